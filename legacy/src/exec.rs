//! Runs a checked pipeline: real subprocesses joined by OS pipes, no shell.
//!
//! Decisions worth knowing:
//!
//! - **Counted junctions.** Every step's `output_size` is measured. Between two external stages
//!   the server sits in the middle of the pipe: the upstream stage writes into one pipe, the
//!   server moves the bytes into the next stage's stdin pipe with `splice(2)` (page references
//!   move, nothing is copied through the server) and counts them; the `relay` module says why
//!   one thread, why `splice`, why busy junctions batch, and how SIGPIPE, end of input and kills
//!   pass through unchanged. The last stage is counted by the thread that captures its output,
//!   `tee` and the stage feeding it by the tee thread, which copies anyway.
//! - **One process group.** Every stage joins the group of the first external stage, so a
//!   timeout, a cancellation or the final sweep is one `killpg`. Children are watched with
//!   `waitid(WNOWAIT)` and only reaped at the very end, so the group id cannot be recycled by an
//!   unrelated process while we may still signal it. If the runner unwinds, a guard does the same
//!   sweep.
//! - **No stage outlives the server.** Each stage arms `PR_SET_PDEATHSIG(SIGKILL)` before it runs
//!   its program (see [`limits::enter`]), so if the server dies — SIGKILL, or SIGTERM/SIGINT,
//!   whose default action ends it — the kernel kills its stages; they cannot start processes of
//!   their own ([`fence::forbid_new_processes`]). The per-call scratch folder left behind then is
//!   removed by the next server's start-up sweep (see [`super::scratch`]).
//! - **The clock starts at the first spawn.** The pipeline's own limit runs from just before the
//!   first stage starts, and the call's deadline (`CallContext::deadline`) applies as well: the
//!   earlier wins. Cancellation and both clocks are checked before every spawn, so a pipeline
//!   stopped while it is still being started stops at once.
//! - **Spawning is linear.** A `fork` copies the server's page tables and the `exec` that follows
//!   tears the copy down, so a fork costs in proportion to the server's mapped memory. With one
//!   stderr-draining thread per stage, each stage added two mappings (a stack and its guard) that
//!   every later fork copied: 100, 200, 400 and 800 `tr` stages took 0.17, 0.46, 1.2 and 4.1 s.
//!   One thread now drains every stderr pipe (`poll`), so what a stage adds to the server is two
//!   descriptors and a buffer, and a fork costs the same for the first stage as for the last.
//! - **Shared buffers.** The captured stdout and every stderr are collected by threads into
//!   shared, capped buffers, so after a kill the caller can return what was produced so far
//!   without waiting for a thread that a stray descendant might keep blocked.
//! - **tee buffers.** The built-in tee forwards its input at once but keeps (up to the hard write
//!   limit) what it saw; the files are written by the caller after the run, once the approval
//!   gate has looked at the size. If tee's reader goes away (`… | tee f | head -1`) tee keeps
//!   reading until it holds the hard limit, so the file gets what a shell's tee would have had.
//!
//! A run is a sequence of phases, one module each: [`spawn`] starts the stages ([`stage`] one
//! external stage, [`builtin_tee`] the built-in tee), [`streams`] and [`relay`] move and collect
//! their bytes, [`supervise`] watches them until they end or must stop and sweeps, and
//! [`collect`] gathers the result.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::limits::{Limit, StageLimits};
use super::plan::{CommandName, Step};
use collect::collect;
use mcp_core::toolset::CallContext;
use spawn::{spawn_all, Setup, Started};
use streams::Streams;
use supervise::{supervise, sweep, Watch};
use workspace::Workspace;

/// Read size of the in-process copies.
const CHUNK: usize = 64 * 1024;

mod builtin_tee;
mod collect;
mod relay;
mod spawn;
mod stage;
mod streams;
mod supervise;

/// The limits of one run.
#[derive(Clone, Copy, Debug)]
pub struct ExecLimits {
    /// Wall-clock limit of the whole pipeline, counted from its first spawn (`None`: only the
    /// call's own deadline applies).
    pub timeout: Option<Duration>,
    /// Most bytes of the last stage's stdout returned.
    pub output_cap: usize,
    /// Most bytes of each stage's stderr kept.
    pub stderr_cap: usize,
    /// Most bytes a `tee` keeps for writing.
    pub tee_limit: usize,
    /// What each stage's process may use.
    pub stage: StageLimits,
}

/// Per-step facts reported in `meta.steps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepMeta {
    /// Which command the step ran (the caller reports the stage's text as written).
    pub command: CommandName,
    /// Bytes the step wrote to its stdout (0 for a step that never started). For the last
    /// stage, what was captured (at most the output cap; `truncated` says when it was cut).
    pub output_size: u64,
    /// The step's output was cut (the stdout cap, or tee's hard limit).
    pub truncated: bool,
    /// Time from the start of the call until the step was seen finished.
    pub execution_time_ms: u64,
    /// Exit status; `128 + signal` for a stage killed by a signal (141 = SIGPIPE); `0` for tee.
    pub exit_code: Option<i32>,
}

/// What a built-in tee received, for the caller to gate and write.
#[derive(Clone, Debug, Default)]
pub struct TeeCapture {
    /// `-a`.
    pub append: bool,
    /// The guarded targets.
    pub targets: Vec<PathBuf>,
    /// The first `tee_limit` bytes of its input.
    pub data: Vec<u8>,
    /// All bytes it received (at least `data.len()`).
    pub total: u64,
    /// More input existed than was kept.
    pub truncated: bool,
}

/// How the run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every stage finished and the last one succeeded.
    Completed,
    /// The last stage exited with this non-zero status.
    NonZeroExit(i32),
    /// A wall-clock limit expired (this one, when known); everything was killed.
    Timeout(Option<Duration>),
    /// The client cancelled; everything was killed.
    Cancelled,
    /// A stage ran into one of its resource limits; everything else was stopped.
    ResourceLimit {
        /// Its position in the pipeline.
        step: usize,
        /// Which command it was.
        command: CommandName,
        /// Which limit.
        limit: Limit,
        /// What it said on stderr (capped).
        stderr: String,
    },
}

/// The result of a run that started.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// How it ended.
    pub outcome: Outcome,
    /// The last stage's stdout, at most `output_cap` bytes.
    pub stdout: Vec<u8>,
    /// The stdout cap was hit.
    pub truncated: bool,
    /// Per-step metadata, in pipeline order.
    pub steps: Vec<StepMeta>,
    /// Each external stage's stderr (capped), in pipeline order; empty ones left out.
    pub stderr: Vec<(CommandName, String)>,
    /// The last stage's stderr (capped), for `NONZERO_EXIT`.
    pub last_stderr: String,
    /// What each tee received (only meaningful when the run completed or exited non-zero).
    pub tees: Vec<TeeCapture>,
}

/// A stage that could not be started.
#[derive(Debug, thiserror::Error)]
#[error("could not start '{command}': {source}")]
pub struct SpawnError {
    /// The command as typed.
    pub command: &'static str,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

/// Runs `steps` (checked by the policy) and waits for them, within `limits` and the call's own
/// deadline, stopping when the call is cancelled. Every stage runs inside a [`Fence`] that lets
/// it read `workspace` and nothing of the user's outside it, under its [`StageLimits`], and
/// starts in its directory opened through the workspace layer, never in one named by path.
///
/// The phases, one function each: set up what the stages share, spawn them in order, start the
/// threads that move and collect their bytes, supervise until they finish or must stop, sweep,
/// and collect the result.
///
/// [`Fence`]: fence::Fence
/// [`StageLimits`]: limits::StageLimits
pub fn run(
    steps: &[Step],
    workspace: &Workspace,
    limits: &ExecLimits,
    ctx: &CallContext,
) -> Result<RunResult, SpawnError> {
    let started = Instant::now();
    let setup = Setup::new(steps, workspace, limits)?;
    let own = limits.timeout.map(|t| (Instant::now(), t));
    let Started {
        tees,
        stderr_pipes,
        last_out,
        junctions,
        counted,
        stopped,
        mut running,
    } = spawn_all(steps, workspace, &setup, limits, ctx, own)?;
    let streams = Streams::start(
        stderr_pipes,
        junctions,
        counted,
        last_out,
        stopped.is_some(),
        limits,
    );
    let stopped = match stopped {
        Some(stop) => Some(stop),
        None => {
            let watch = Watch {
                ctx,
                own,
                started,
                home: &setup.home,
                stage: &limits.stage,
            };
            supervise(&mut running, &tees, &streams, steps, &watch)
        }
    };
    sweep(&running, &streams);
    Ok(collect(
        &mut running,
        tees,
        &streams,
        steps,
        limits,
        stopped,
        started,
    ))
}

fn step_command(step: &Step) -> CommandName {
    match step {
        Step::Run { command, .. } => *command,
        Step::Tee { .. } => CommandName::Tee,
    }
}

fn step_name(step: &Step) -> &'static str {
    step_command(step).as_str()
}

fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::builtin_tee::tee_copy;
    use super::*;
    use crate::fence;
    use crate::limits;
    use std::io::{Read, Write};
    use std::path::Path;

    fn limits() -> ExecLimits {
        ExecLimits {
            timeout: Some(Duration::from_secs(20)),
            output_cap: 1024 * 1024,
            stderr_cap: 64 * 1024,
            tee_limit: 1024 * 1024,
            stage: StageLimits::new(
                Some(limits::DEFAULT_STAGE_MEMORY),
                Some(Duration::from_secs(20)),
            ),
        }
    }

    /// The system's temporary directory as a workspace (canonical, as the layer requires).
    fn temp_ws() -> (PathBuf, Workspace) {
        let dir = std::env::temp_dir().canonicalize().expect("canonical");
        let ws = Workspace::open(&dir).expect("open");
        (dir, ws)
    }

    fn run_argv(argv: &[&str]) -> RunResult {
        let (dir, ws) = temp_ws();
        let step = Step::Run {
            command: CommandName::Awk,
            argv: argv.iter().map(Into::into).collect(),
            cwd: dir,
        };
        run(&[step], &ws, &limits(), &CallContext::default()).expect("runs")
    }

    #[test]
    fn stages_see_only_the_fixed_environment() {
        std::env::set_var("SHELPA_TEST_SECRET", "hunter2");
        let r = run_argv(&["/usr/bin/env"]);
        let text = String::from_utf8_lossy(&r.stdout).into_owned();
        let mut names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect();
        names.sort();
        assert_eq!(names, ["HOME", "LC_ALL", "PATH", "TMPDIR"], "{text}");
        assert!(!text.contains("hunter2"));
        assert!(text.contains("PATH=/usr/bin:/bin\n"));
        let home = text
            .lines()
            .find_map(|l| l.strip_prefix("HOME="))
            .expect("HOME set");
        assert!(home.contains("shelpa-home-"), "{home}");
        // The private HOME is gone after the call.
        assert!(!std::path::Path::new(home).exists());
    }

    #[test]
    fn the_first_stage_reads_an_empty_stdin() {
        let r = run_argv(&["/usr/bin/wc", "-c"]);
        assert_eq!(String::from_utf8_lossy(&r.stdout).trim(), "0");
        assert_eq!(r.outcome, Outcome::Completed);
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let (dir, ws) = temp_ws();
        let step = Step::Run {
            command: CommandName::Jq,
            argv: vec!["/nonexistent/jq".into()],
            cwd: dir,
        };
        let err = run(&[step], &ws, &limits(), &CallContext::default()).expect_err("fails");
        assert_eq!(err.command, "jq");
    }

    /// Runs one stage with `workspace` as the fenced workspace.
    fn run_in(workspace: &Path, command: CommandName, argv: &[&str]) -> RunResult {
        let workspace = workspace.canonicalize().expect("canonical");
        let ws = Workspace::open(&workspace).expect("open");
        let step = Step::Run {
            command,
            argv: argv.iter().map(Into::into).collect(),
            cwd: workspace,
        };
        run(&[step], &ws, &limits(), &CallContext::default()).expect("runs")
    }

    fn stderr_of(r: &RunResult) -> String {
        r.stderr.iter().map(|(_, s)| s.as_str()).collect()
    }

    /// Where `command` is installed (the tests that use this need it).
    fn installed(command: CommandName) -> String {
        match crate::tools::ToolPaths::discover().get(command) {
            Some(path) => path.display().to_string(),
            None => panic!("{} is needed for this test", command.as_str()),
        }
    }

    /// The fence refused the stage: it failed with EACCES and `refused` holds.
    fn assert_fenced_out(r: &RunResult, refused: bool, what: &str) {
        assert!(refused, "the fence let a stage {what}");
        assert!(
            stderr_of(r).contains("Permission denied"),
            "{}",
            stderr_of(r)
        );
    }

    /// A workspace holding `in.txt` with `content`.
    fn workspace_with(content: &str) -> tempfile::TempDir {
        let workspace = tempfile::tempdir().expect("tmp");
        std::fs::write(workspace.path().join("in.txt"), content).expect("write");
        workspace
    }

    #[test]
    fn a_stage_reads_the_workspace_but_not_what_lies_outside_it() {
        let workspace = workspace_with("inside\n");
        let outside = tempfile::tempdir().expect("tmp");
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "outside\n").expect("write");
        let head = installed(CommandName::Head);

        let inside = run_in(workspace.path(), CommandName::Head, &[&head, "in.txt"]);
        assert_eq!(inside.stdout, b"inside\n", "{}", stderr_of(&inside));

        let secret = secret.display().to_string();
        let escaped = run_in(workspace.path(), CommandName::Head, &[&head, &secret]);
        if fence::kernel_abi().is_some() {
            let what = format!("read {secret}");
            assert_fenced_out(&escaped, escaped.stdout.is_empty(), &what);
        } else {
            // Without Landlock the fence cannot hold; the status line says so (see `help`).
            assert_eq!(escaped.stdout, b"outside\n");
        }
    }

    #[test]
    fn a_program_installed_outside_the_system_trees_still_runs_fenced() {
        // Like /usr/local/bin/rg linking to /opt/ripgrep/bin/rg: the program lives elsewhere.
        let workspace = workspace_with("inside\n");
        let elsewhere = tempfile::tempdir().expect("tmp");
        let copy = elsewhere.path().join("head");
        std::fs::copy(installed(CommandName::Head), &copy).expect("copy head");
        let link = elsewhere.path().join("linked-head");
        std::os::unix::fs::symlink(&copy, &link).expect("symlink");
        let link = link.display().to_string();
        let r = run_in(workspace.path(), CommandName::Head, &[&link, "in.txt"]);
        assert_eq!(r.stdout, b"inside\n", "{}", stderr_of(&r));
    }

    #[test]
    fn a_stage_cannot_signal_processes_outside_it() {
        // No allowed command sends signals; `kill` stands in for a tool that could.
        let kill = ["/usr/bin/kill", "/bin/kill"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("kill (procps) is needed for this test");
        let workspace = workspace_with("");
        let server = std::process::id().to_string();
        let r = run_in(workspace.path(), CommandName::Head, &[kill, "-0", &server]);
        let refused = r.steps.first().and_then(|s| s.exit_code) != Some(0);
        if fence::kernel_abi().is_some_and(|abi| abi >= 6) {
            assert!(refused, "the fence let a stage signal the server");
            let stderr = stderr_of(&r);
            assert!(stderr.contains("not permitted"), "{stderr}");
        } else {
            assert!(!refused, "{}", stderr_of(&r));
        }
    }

    #[test]
    fn a_stage_cannot_write_into_the_workspace_itself() {
        let workspace = workspace_with("b\na\n");
        let sort = installed(CommandName::Sort);
        // `sort -o` is refused by the policy; here the stage is run directly, as if a policy
        // mistake had let it through.
        let r = run_in(
            workspace.path(),
            CommandName::Sort,
            &[&sort, "-o", "out.txt", "in.txt"],
        );
        let written = workspace.path().join("out.txt").exists();
        if fence::kernel_abi().is_some() {
            assert_fenced_out(&r, !written, "create a file in the workspace");
        } else {
            assert!(written);
        }
    }

    #[test]
    fn a_stage_starts_in_the_directory_opened_through_the_layer() {
        let workspace = workspace_with("");
        std::fs::create_dir(workspace.path().join("sub")).expect("mkdir");
        std::fs::write(workspace.path().join("sub/inside-marker"), "").expect("write");
        let root = workspace.path().canonicalize().expect("canonical");
        let ws = Workspace::open(&root).expect("open");
        let ls = installed(CommandName::Ls);
        let step = |cwd: PathBuf| Step::Run {
            command: CommandName::Ls,
            argv: vec![ls.clone().into()],
            cwd,
        };
        let r = run(
            &[step(root.join("sub"))],
            &ws,
            &limits(),
            &CallContext::default(),
        )
        .expect("runs");
        assert_eq!(r.stdout, b"inside-marker\n", "{}", stderr_of(&r));

        // The swap lands between the policy's check and the start of the stage: the stage is
        // not started at all, rather than started in the directory the link leads to.
        let outside = tempfile::tempdir().expect("tmp");
        std::fs::write(outside.path().join("outside-marker"), "").expect("write");
        std::fs::rename(root.join("sub"), root.join("parked")).expect("park");
        std::os::unix::fs::symlink(outside.path(), root.join("sub")).expect("link");
        let err = run(
            &[step(root.join("sub"))],
            &ws,
            &limits(),
            &CallContext::default(),
        )
        .expect_err("refused");
        assert!(workspace::is_swap(&err.source), "{err}");
        assert!(!err.to_string().contains(&root.display().to_string()));
    }

    /// Runs `argv` as one `command` stage in a fresh workspace under `stage` limits.
    fn run_limited(command: CommandName, argv: &[&str], stage: StageLimits) -> RunResult {
        let workspace = workspace_with("");
        let root = workspace.path().canonicalize().expect("canonical");
        let ws = Workspace::open(&root).expect("open");
        let step = Step::Run {
            command,
            argv: argv.iter().map(Into::into).collect(),
            cwd: root,
        };
        let limits = ExecLimits { stage, ..limits() };
        run(&[step], &ws, &limits, &CallContext::default()).expect("runs")
    }

    fn limit_of(r: &RunResult) -> Option<Limit> {
        match &r.outcome {
            Outcome::ResourceLimit { limit, .. } => Some(*limit),
            _ => None,
        }
    }

    #[test]
    fn a_stage_cannot_start_processes_but_may_start_threads() {
        if !fence::forbids_new_processes() {
            return;
        }
        // No allowed command forks; a shell stands in for one that would.
        let r = run_argv(&["/bin/sh", "-c", "/bin/echo forked; exit 0"]);
        assert!(
            r.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&r.stdout)
        );
        assert!(stderr_of(&r).contains("fork"), "{}", stderr_of(&r));
        // rg searches with several threads.
        let rg = installed(CommandName::Rg);
        let workspace = workspace_with("needle\n");
        for i in 0..8 {
            std::fs::write(workspace.path().join(format!("f{i}")), "needle\n").expect("write");
        }
        let r = run_in(
            workspace.path(),
            CommandName::Rg,
            &[&rg, "-j", "4", "-c", "needle"],
        );
        assert_eq!(r.outcome, Outcome::Completed, "{}", stderr_of(&r));
        assert_eq!(String::from_utf8_lossy(&r.stdout).lines().count(), 9);
    }

    #[test]
    fn a_stage_past_its_memory_is_stopped_and_named() {
        let awk = installed(CommandName::Awk);
        let stage = StageLimits::new(Some(64 << 20), None);
        let r = run_limited(
            CommandName::Awk,
            &[&awk, "BEGIN{s=\"x\"; while(1) s = s s}"],
            stage,
        );
        assert_eq!(limit_of(&r), Some(Limit::Memory), "{:?}", r.outcome);
    }

    #[test]
    fn scratch_files_past_the_limit_stop_the_stage() {
        let sort = installed(CommandName::Sort);
        let jq = installed(CommandName::Jq);
        let workspace = workspace_with("");
        let root = workspace.path().canonicalize().expect("canonical");
        let ws = Workspace::open(&root).expect("open");
        let stage = StageLimits {
            memory: Some(256 << 20),
            scratch: Some(1 << 20),
            cpu_secs: None,
        };
        let steps = [
            Step::Run {
                command: CommandName::Jq,
                argv: vec![jq.into(), "-n".into(), "range(2000000)".into()],
                cwd: root.clone(),
            },
            // A tiny buffer: sort spills runs to its TMPDIR.
            Step::Run {
                command: CommandName::Sort,
                argv: vec![sort.into(), "-S".into(), "64K".into()],
                cwd: root,
            },
        ];
        let limits = ExecLimits { stage, ..limits() };
        let r = run(&steps, &ws, &limits, &CallContext::default()).expect("runs");
        assert_eq!(limit_of(&r), Some(Limit::FileSize), "{:?}", r.outcome);
        assert!(matches!(r.outcome, Outcome::ResourceLimit { step: 1, .. }));
    }

    #[test]
    fn the_cpu_backstop_stops_a_busy_stage() {
        let awk = installed(CommandName::Awk);
        let stage = StageLimits {
            memory: None,
            scratch: None,
            cpu_secs: Some(1),
        };
        let r = run_limited(CommandName::Awk, &[&awk, "BEGIN{while(1){}}"], stage);
        assert_eq!(limit_of(&r), Some(Limit::Time), "{:?}", r.outcome);
    }

    #[test]
    fn a_cancel_or_deadline_before_the_first_spawn_starts_nothing() {
        let (dir, ws) = temp_ws();
        let step = Step::Run {
            command: CommandName::Wc,
            argv: vec![installed(CommandName::Wc).into()],
            cwd: dir,
        };
        let cancelled = CallContext::default();
        cancelled.cancel.cancel();
        let r = run(std::slice::from_ref(&step), &ws, &limits(), &cancelled).expect("runs");
        assert_eq!(r.outcome, Outcome::Cancelled);
        assert_eq!(r.steps[0].exit_code, None, "a stage was started");
        let late = CallContext::with_timeout(Default::default(), Some(Duration::ZERO));
        let r = run(&[step], &ws, &limits(), &late).expect("runs");
        assert_eq!(r.outcome, Outcome::Timeout(Some(Duration::ZERO)));
        assert_eq!(r.steps[0].exit_code, None, "a stage was started");
    }

    #[test]
    fn tee_passes_input_on_and_keeps_up_to_its_limit() {
        let (r, mut w) = os_pipe::pipe().expect("pipe");
        let (out_r, out_w) = os_pipe::pipe().expect("pipe");
        let writer = std::thread::spawn(move || {
            w.write_all(&[b'x'; 10_000]).expect("write");
        });
        let reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let mut out_r = out_r;
            out_r.read_to_end(&mut s).expect("read");
            s.len()
        });
        let cap = tee_copy(Some(r), out_w, 4096, false, Vec::new());
        writer.join().expect("writer");
        assert_eq!(reader.join().expect("reader"), 10_000);
        assert_eq!(cap.total, 10_000);
        assert_eq!(cap.data.len(), 4096);
        assert!(cap.truncated);
    }
}
