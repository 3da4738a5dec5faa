//! Codex CLI's configuration for one trial: a `CODEX_HOME` of the trial's own
//! (`TRIAL_DIR/home/.codex`, `{codex_home}`) holding a `config.toml` (`{codex_config}`) that
//! names the arm's server under `[mcp_servers.<server_name>]`.
//!
//! Codex reads its MCP servers from `$CODEX_HOME/config.toml` only (it has no `--mcp-config`),
//! and keeps its sessions, caches and state there too, so a home per trial is both how an arm's
//! server reaches Codex and what keeps trials from sharing anything. Only the server is written:
//! the model and its provider are the study's, given in the agent's command line as
//! `-c key=value` overrides, which Codex applies over this file.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

use toml::{Table, Value};
use workspace::Dir;

use super::config::{server_command, NotUtf8};
use crate::spec::{Agent, Placeholder};

/// The trial's harness home, below its directory: `{home}` (the record's `names::HOME`).
pub const HOME_DIR: &str = crate::record::names::HOME;
/// Codex's directory in a home (`~/.codex`, Codex's default `CODEX_HOME`).
pub const CODEX_DIR: &str = ".codex";
/// Codex's configuration file in `CODEX_HOME`.
pub const CONFIG_FILE: &str = "config.toml";
/// Where Codex writes its session files in `CODEX_HOME` (`sessions/YYYY/MM/DD/rollout-*.jsonl`):
/// the record of the trial `study report` reads.
pub const SESSIONS_DIR: &str = "sessions";
/// The variable Codex finds its home by.
pub const CODEX_HOME_VAR: &str = "CODEX_HOME";

/// How the runner lets Codex call the arm's server's tools: without asking. `codex exec` cannot
/// ask, and with `approval_policy = "never"` it refuses every tool its server does not mark
/// read-only ("MCP tool call requires approval"), while its own `apply_patch` writes inside the
/// sandbox: left at Codex's default, an arm's writes would fail for the harness's reasons, not
/// the model's. (Codex 0.171.0 accepts `auto`, `prompt`, `writes` and `approve`.)
pub const TOOLS_APPROVAL: &str = "approve";

/// Where Codex's files of one trial are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexPaths {
    /// `TRIAL_DIR/home/.codex`: `{codex_home}`, and `CODEX_HOME` in the agent's environment.
    pub codex_home: PathBuf,
    /// `TRIAL_DIR/home/.codex/config.toml`: `{codex_config}`.
    pub config: PathBuf,
    /// `TRIAL_DIR/home/.codex/sessions`: the session files the trial leaves.
    pub sessions: PathBuf,
}

impl CodexPaths {
    /// The paths of the trial whose directory is `trial_dir`.
    pub fn new(trial_dir: &Path) -> CodexPaths {
        let codex_home = trial_dir.join(HOME_DIR).join(CODEX_DIR);
        CodexPaths {
            config: codex_home.join(CONFIG_FILE),
            sessions: codex_home.join(SESSIONS_DIR),
            codex_home,
        }
    }
}

/// True when the agent is Codex by the study's own saying: one of its templates names
/// `{codex_home}` or `{codex_config}`. Only then is the configuration written and `CODEX_HOME`
/// set, so another agent's trial directory holds nothing of Codex.
pub fn wanted(agent: &Agent) -> bool {
    let uses = |t: &crate::spec::Template| {
        t.uses(Placeholder::CodexHome) || t.uses(Placeholder::CodexConfig)
    };
    agent.command.iter().any(uses)
        || agent.stdin.iter().chain(&agent.stdout).any(uses)
        || agent.env.iter().any(|(_, v)| uses(v))
}

/// The text of `config.toml` for `arm` in one trial: the arm's server (the same command as its
/// `mcp.json`) with its tools approved, or no server for an arm without one.
pub fn codex_config(
    arm: &crate::spec::Arm,
    server: &Path,
    workspace: &Path,
    call_log: &Path,
) -> Result<String, NotUtf8> {
    let mut servers = Table::new();
    if let Some(cmd) = server_command(arm, server, workspace, call_log)? {
        let mut entry = Table::new();
        entry.insert("command".into(), Value::from(cmd.command));
        entry.insert(
            "args".into(),
            Value::Array(cmd.args.into_iter().map(Value::from).collect()),
        );
        entry.insert(
            "default_tools_approval_mode".into(),
            Value::from(TOOLS_APPROVAL),
        );
        servers.insert(arm.server_name.clone(), Value::Table(entry));
    }
    let mut root = Table::new();
    root.insert("mcp_servers".into(), Value::Table(servers));
    let body = toml::to_string(&root).unwrap_or_default();
    Ok(format!(
        "# Written by `filesystem study run` for one trial of arm {:?}: its MCP server, nothing\n\
         # else (the model and provider come from the agent's `-c` arguments).\n{body}",
        arm.name
    ))
}

/// Creates `home/.codex/config.toml` in the fresh trial directory `dir` with `text` (the home
/// may exist already: it is every harness's).
pub fn write(dir: &Dir, text: &str) -> std::io::Result<()> {
    dir.mkdir(OsStr::new(HOME_DIR))?;
    let home = dir.subdir(OsStr::new(HOME_DIR))?;
    home.mkdir(OsStr::new(CODEX_DIR))?;
    let codex = home.subdir(OsStr::new(CODEX_DIR))?;
    super::process::create_fresh(&codex, OsStr::new(CONFIG_FILE))?.write_all(text.as_bytes())
}

/// True when the trial directory `dir` holds a Codex session directory (the trial's agent was
/// Codex and got as far as starting a session).
pub fn has_sessions(dir: &Dir) -> bool {
    dir.subdir(OsStr::new(HOME_DIR))
        .and_then(|h| h.subdir(OsStr::new(CODEX_DIR)))
        .ok()
        .and_then(|c| c.stat(OsStr::new(SESSIONS_DIR)).ok().flatten())
        .is_some_and(|s| s.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Arm;

    #[test]
    fn the_arms_server_is_written_as_toml_that_reads_back_exactly() {
        let arm = Arm {
            name: "pipe".into(),
            server_args: Some(vec![
                "--legacy-pipe".into(),
                "quote \" back\\slash\n".into(),
            ]),
            server_name: "fs-1".into(),
        };
        let text = codex_config(
            &arm,
            Path::new("/b/file system"),
            Path::new("/w/\"ws\""),
            Path::new("/c.jsonl"),
        )
        .unwrap();
        let back: Table = toml::from_str(&text).expect("valid TOML");
        let entry = &back["mcp_servers"]["fs-1"];
        assert_eq!(entry["command"].as_str(), Some("/b/file system"));
        let args: Vec<&str> = entry["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "--legacy-pipe",
                "quote \" back\\slash\n",
                "--root",
                "/w/\"ws\"",
                "--call-log",
                "/c.jsonl"
            ]
        );
        assert_eq!(
            entry["default_tools_approval_mode"].as_str(),
            Some("approve")
        );

        let none = Arm {
            server_args: None,
            ..arm
        };
        let text = codex_config(&none, Path::new("/b"), Path::new("/w"), Path::new("/c")).unwrap();
        let back: Table = toml::from_str(&text).unwrap();
        assert_eq!(back["mcp_servers"].as_table().map(Table::len), Some(0));
    }

    #[test]
    fn a_path_that_is_not_utf8_is_refused_as_for_mcp_json() {
        use std::os::unix::ffi::OsStrExt;
        let arm = Arm {
            name: "fs".into(),
            server_args: Some(vec![]),
            server_name: "filesystem".into(),
        };
        let bad = Path::new(OsStr::from_bytes(b"/w/\xff"));
        let err = codex_config(&arm, Path::new("/b"), bad, Path::new("/c")).unwrap_err();
        assert!(err.to_string().contains("not UTF-8"), "{err}");
    }

    #[test]
    fn the_paths_are_below_the_trials_home() {
        let p = CodexPaths::new(Path::new("/out/trials/000-a-b"));
        assert_eq!(p.codex_home, Path::new("/out/trials/000-a-b/home/.codex"));
        assert_eq!(
            p.config,
            Path::new("/out/trials/000-a-b/home/.codex/config.toml")
        );
        assert_eq!(
            p.sessions,
            Path::new("/out/trials/000-a-b/home/.codex/sessions")
        );
    }
}
