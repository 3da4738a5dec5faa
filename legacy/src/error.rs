//! How each error of the layers below becomes shelpa's error object.
//!
//! [`crate::failure`] is the shape (`{"error":{"code","reason","detail","suggestion"}}`); this
//! module is the mapping: a tool the set does not serve, a bad argument, a session directory that
//! cannot be used, a path the guard refuses, a stage that could not start, a run stopped by its
//! time limit, the client or a resource limit, a non-zero exit. Each says what was wrong and what
//! to do instead, in the words shelpa's clients parse. The policy's refusals convert themselves
//! (`From<Refusal>`) and tee's errors carry their own `to_failure`, beside the rules they report.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::exec::{Outcome, RunResult, SpawnError};
use crate::failure::{Failure, EXEC_FAILED, GUARD_VIOLATION, INVALID_ARGUMENT};
use crate::limits::Limit;
use crate::session::SessionError;
use mcp_core::toolset::{ArgError, Stop};
use workspace::guard::GuardError;

/// A malformed argument (missing, wrong type, bad value, or one the tool does not take: the
/// core's wording, see [`mcp_core::toolset::Args::check_names`]) as `INVALID_ARGUMENT`/`BAD_ARGUMENT`.
pub(crate) fn bad_argument(e: ArgError) -> Failure {
    Failure::new(
        INVALID_ARGUMENT,
        "BAD_ARGUMENT",
        format!("{e}."),
        "Fix the tool arguments and call again.",
    )
}

/// A tool this set does not serve (`served`, in `tools/list` order), with the ones it does.
pub(crate) fn unknown_tool(name: &str, served: &[&str]) -> Failure {
    Failure::new(
        INVALID_ARGUMENT,
        "UNKNOWN_TOOL",
        format!("there is no tool '{name}'."),
        format!("Use {}.", served.join(" or ")),
    )
}

/// What to do when a directory was swapped for a link while a call ran.
pub(crate) const SWAPPED_SUGGESTION: &str =
    "Run the command again; if it keeps failing, check what replaced the directory.";

/// The session directory (or a call's `cwd`) could not be used: outside the workspace, not a
/// directory, or swapped for a link while the call ran.
pub(crate) fn session_failure(e: SessionError) -> Failure {
    let (code, reason, suggestion, token) = match &e {
        SessionError::Escape(token, _) => (
            GUARD_VIOLATION,
            "PATH_ESCAPE",
            "Use a directory inside the workspace (relative to it, or absolute inside it).",
            token,
        ),
        SessionError::NotADirectory(token) => (
            INVALID_ARGUMENT,
            "NOT_A_DIRECTORY",
            "Name an existing directory; `ls` shows what is there.",
            token,
        ),
        SessionError::Swapped(token) => (GUARD_VIOLATION, "PATH_ESCAPE", SWAPPED_SUGGESTION, token),
        SessionError::SessionSwapped(token) => (
            GUARD_VIOLATION,
            "PATH_ESCAPE",
            "`cd` into a directory of the workspace (cd and pwd still work), or pass `cwd` to run \
             one call elsewhere; check what replaced the directory.",
            token,
        ),
        SessionError::Refused(inner) => return guard_failure(inner, ""),
    };
    Failure::new(code, reason, e.to_string(), suggestion).with_token(token.clone())
}

/// A path the guard refused, naming `token` (the argument as the caller wrote it) when there is
/// one: protected state, a NUL byte, an empty path, an I/O failure, or an escape.
pub(crate) fn guard_failure(e: &GuardError, token: &str) -> Failure {
    let (code, reason, suggestion) = match e {
        GuardError::Protected { .. } | GuardError::Repository(_) => (
            GUARD_VIOLATION,
            "PROTECTED_PATH",
            "Write somewhere outside .shelpa/, .filesystem/ and .git/.",
        ),
        // A NUL byte is refused as the parser refuses one in a command (the contract's
        // GUARD_VIOLATION/PARSE_ERROR), whether it came in `cwd` or shelpa_write's `path`.
        GuardError::Nul => (
            GUARD_VIOLATION,
            "PARSE_ERROR",
            "Remove the NUL byte; file names cannot contain one.",
        ),
        GuardError::Empty => (
            INVALID_ARGUMENT,
            "BAD_ARGUMENT",
            "Name a file relative to the session directory.",
        ),
        GuardError::Io { .. } => (EXEC_FAILED, "WRITE_FAILED", "Check the path and try again."),
        GuardError::ReadOnly(_) => (
            GUARD_VIOLATION,
            "READ_ONLY",
            "This server may not change it: write somewhere the rules allow, or ask the user to lift the rule.",
        ),
        _ => (
            GUARD_VIOLATION,
            "PATH_ESCAPE",
            "Use a path inside the workspace.",
        ),
    };
    let detail = match e {
        GuardError::Protected { path, dir } => {
            format!("'{path}' is inside {dir}/, shelpa's protected state.")
        }
        GuardError::ReadOnly(refused) => format!("{refused}."),
        other => other.to_string(),
    };
    let mut f = Failure::new(code, reason, detail, suggestion);
    if !token.is_empty() {
        f.token = Some(token.to_string());
    }
    f
}

/// A stage that could not be started. A stage directory swapped for a symlink after the checks
/// is an escape refused (nothing ran); anything else is the OS refusing to start the command.
pub(crate) fn spawn_failure(e: SpawnError) -> Failure {
    if workspace::is_swap(&e.source) {
        return Failure::new(
            GUARD_VIOLATION,
            "PATH_ESCAPE",
            format!("'{}' was not started: {}.", e.command, e.source),
            SWAPPED_SUGGESTION,
        )
        .with_token(e.command.to_string());
    }
    let mut f = Failure::new(
        EXEC_FAILED,
        "SPAWN_FAILED",
        e.to_string(),
        "The command is installed but could not be started; check `filesystem --legacy-pipe --help` for missing commands.",
    );
    f.token = Some(e.command.to_string());
    f
}

/// The failure of a run that was stopped before its tees could be written (its time limit, the
/// client, a stage's resource limit), or `None` for a run that ended on its own. `timeout` is the
/// pipeline's limit (named when the run does not say which expired), `memory` each stage's
/// memory limit, `stages` how many there were. The caller adds the partial output.
pub(crate) fn stopped_run(
    outcome: &Outcome,
    timeout: Option<Duration>,
    memory: Option<u64>,
    stages: usize,
) -> Option<Failure> {
    match outcome {
        Outcome::Timeout(limit) => {
            let limit = limit.or(timeout).map_or("its time limit".to_string(), |l| {
                format!("{} s", l.as_secs_f64())
            });
            let mut f = Failure::new(
                EXEC_FAILED,
                "TIMEOUT",
                format!("the pipeline ran longer than {limit} and was stopped; nothing was written."),
                "Narrow the input (head, tail -n, a more specific rg pattern or path) and run it again.",
            );
            f.extra.insert("limit".into(), json!(Limit::Time.as_str()));
            Some(f)
        }
        Outcome::Cancelled => Some(Failure::new(
            EXEC_FAILED,
            "CANCELLED",
            "the call was cancelled by the client; every stage was stopped and nothing was written.",
            "Run it again if it is still needed.",
        )),
        Outcome::ResourceLimit {
            step,
            command,
            limit,
            stderr,
        } => {
            let first_line = stderr.lines().next().unwrap_or("").trim();
            let said = if first_line.is_empty() {
                String::new()
            } else {
                format!(" It said: {first_line}")
            };
            let mut f = Failure::new(
                EXEC_FAILED,
                "RESOURCE_LIMIT",
                format!(
                    "'{}' (stage {} of {stages}) was stopped: {}. Nothing was written.{said}",
                    command.as_str(),
                    step + 1,
                    limit.what(memory),
                ),
                limit.suggestion(),
            );
            f.token = Some(command.as_str().to_string());
            f.extra.insert("limit".into(), json!(limit.as_str()));
            f.extra.insert("stage".into(), json!(step + 1));
            if let Some(m) = memory.filter(|_| matches!(limit, Limit::Memory | Limit::FileSize)) {
                f.extra.insert("limit_bytes".into(), json!(m));
            }
            f.extra.insert("stderr".into(), json!(stderr));
            Some(f)
        }
        Outcome::Completed | Outcome::NonZeroExit(_) => None,
    }
}

/// The last stage of `run` exited with `code`: named with the first line of what it said. Its
/// tees were written (a pipeline's writes do not depend on the last exit status); the caller
/// adds the partial output and the tee report.
pub(crate) fn nonzero_exit(code: i32, run: &RunResult) -> Failure {
    let last = run
        .steps
        .last()
        .map(|m| m.command.as_str())
        .unwrap_or("pipeline");
    let first_line = run.last_stderr.lines().next().unwrap_or("").trim();
    let mut f = Failure::new(
        EXEC_FAILED,
        "NONZERO_EXIT",
        if first_line.is_empty() {
            format!("'{last}' exited with status {code}.")
        } else {
            format!("'{last}' exited with status {code}: {first_line}")
        },
        "Read the stderr, fix the arguments of the failing stage and run it again.",
    );
    f.token = Some(last.to_string());
    f.extra.insert("exit_code".into(), json!(code));
    f.extra.insert("stderr".into(), json!(run.last_stderr));
    f
}

/// The built-in `ls` could not list `rel` (root-relative): reported as `ls` itself would fail,
/// with its exit status 2.
pub(crate) fn ls_failure(rel: &Path, e: &std::io::Error) -> Failure {
    let shown = workspace::guard::display_relative(rel);
    let mut f = Failure::new(
        EXEC_FAILED,
        "NONZERO_EXIT",
        format!("ls: cannot list '{shown}': {e}."),
        "Check the path with `ls` on its directory.",
    );
    f.token = Some(shown);
    f.extra.insert("exit_code".into(), json!(2));
    f
}

/// A direct write stopped before its commit: nothing was written, in the pipe's own words.
pub(crate) fn stopped_write(stop: Stop) -> Failure {
    let (reason, suggestion) = match stop {
        Stop::Cancelled => ("CANCELLED", "Run it again if it is still needed."),
        Stop::TimedOut(_) => (
            "TIMEOUT",
            "Run it again; if it keeps timing out, raise --timeout.",
        ),
    };
    Failure::new(
        EXEC_FAILED,
        reason,
        format!("{stop}; nothing was written."),
        suggestion,
    )
}

/// The policy turned shelpa_tee's stage into something other than one tee step: cannot happen
/// (the stage is built as `tee …`), answered rather than trusted.
pub(crate) fn not_a_tee() -> Failure {
    Failure::new(
        EXEC_FAILED,
        "WRITE_FAILED",
        "the targets could not be checked as a tee stage.",
        "Use shelpa_pipe with `... | tee FILE` instead.",
    )
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};

    use crate::surface::{NAV, PIPE, TEE, WRITE};
    use crate::{PipeFactory, PipeOptions};
    use mcp_core::toolset::{Args, CallContext, ToolsetFactory};
    use workspace::guard::PathGuard;

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn an_unknown_argument_is_a_bad_argument_in_the_cores_words() {
        let m = args(json!({"command": "pwd", "cmd": "ls"}));
        let e = Args(&m)
            .check_names(&["command", "cwd"])
            .expect_err("cmd is unknown");
        let f = bad_argument(e);
        assert_eq!(
            (f.code, f.reason.as_str()),
            (INVALID_ARGUMENT, "BAD_ARGUMENT")
        );
        assert_eq!(
            f.detail,
            "unknown argument 'cmd'; the accepted arguments are 'command', 'cwd' (names are \
             case-sensitive): rename or remove it."
        );
        assert!(!f.suggestion.is_empty());
    }

    #[test]
    fn every_tool_refuses_an_unknown_argument_before_it_acts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let guard = PathGuard::new(dir.path()).expect("guard");
        let options = PipeOptions {
            tool_set: crate::surface::ShelpaTools::All,
            ..PipeOptions::default()
        };
        let toolset = PipeFactory::new(options).build(guard).expect("toolset");
        let calls = [
            (
                PIPE,
                json!({"command": "ls | tee out.txt", "confirm": true}),
            ),
            (
                WRITE,
                json!({"path": "out.txt", "content": "x", "mode": "a"}),
            ),
            (
                TEE,
                json!({"paths": ["out.txt"], "content": "x", "path": "o"}),
            ),
            (NAV, json!({"command": "pwd", "dir": "."})),
        ];
        for (tool, call) in calls {
            let out = toolset.call(tool, &args(call), &CallContext::default());
            assert!(out.is_error, "{tool}: {}", out.text);
            assert_eq!(out.error_kind.as_deref(), Some("BAD_ARGUMENT"), "{tool}");
            let wire: Value = serde_json::from_str(&out.text).expect("the error object");
            assert_eq!(wire["error"]["code"], json!(INVALID_ARGUMENT), "{tool}");
            let detail = wire["error"]["detail"].as_str().unwrap_or_default();
            assert!(
                detail.starts_with("unknown argument '") && detail.contains("accepted arguments"),
                "{tool}: {detail}"
            );
        }
        assert!(
            !dir.path().join("out.txt").exists(),
            "a refused call wrote nothing"
        );
    }

    #[test]
    fn a_run_that_ended_on_its_own_is_not_a_stop() {
        for outcome in [Outcome::Completed, Outcome::NonZeroExit(1)] {
            assert!(
                stopped_run(&outcome, None, None, 2).is_none(),
                "{outcome:?}"
            );
        }
        let f = stopped_run(
            &Outcome::Timeout(None),
            Some(Duration::from_secs(3)),
            None,
            2,
        )
        .expect("a timeout stops the run");
        assert_eq!(f.reason, "TIMEOUT");
        assert!(f.detail.contains("longer than 3 s"), "{}", f.detail);
        assert_eq!(f.extra["limit"], json!(Limit::Time.as_str()));
    }

    #[test]
    fn a_protected_path_is_named_as_shelpas_state() {
        let e = GuardError::Protected {
            path: ".shelpa/x".into(),
            dir: ".shelpa",
        };
        let f = guard_failure(&e, ".shelpa/x");
        assert_eq!(
            (f.code, f.reason.as_str()),
            (GUARD_VIOLATION, "PROTECTED_PATH")
        );
        assert_eq!(
            f.detail,
            "'.shelpa/x' is inside .shelpa/, shelpa's protected state."
        );
        assert_eq!(f.token.as_deref(), Some(".shelpa/x"));
    }
}
