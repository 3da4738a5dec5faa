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

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use super::fence::{self, Fence};
use super::limits::{self, Limit, PreparedLimits, StageEnd, StageLimits};
use super::plan::{CommandName, Step};
use super::scratch::Home;
use mcp_core::toolset::CallContext;
use relay::Junction;
use workspace::{Dir, Workspace};

/// The fixed `PATH` of every stage (binaries are absolute anyway; this is for what they spawn).
const STAGE_PATH: &str = "/usr/bin:/bin";
/// A UTF-8 locale that exists everywhere glibc does.
const STAGE_LOCALE: &str = "C.UTF-8";
/// How often the runner looks at its children, the clock and the cancel flag.
const POLL: Duration = Duration::from_millis(5);
/// How often the runner sums the scratch folder against its limit.
const SCRATCH_POLL: Duration = Duration::from_millis(100);
/// How long the runner waits, after killing the pipeline, for the last stderr bytes.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// Read size of the in-process copies.
const CHUNK: usize = 64 * 1024;

mod relay;

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

/// A byte buffer filled by a thread and read by the runner at any time.
type Shared = Arc<Mutex<Vec<u8>>>;

fn snapshot(buf: &Shared) -> Vec<u8> {
    match buf.lock() {
        Ok(b) => b.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// One started external stage.
struct Proc {
    index: usize,
    child: Child,
    pid: Pid,
    stderr: Shared,
    /// How it ended and when, once seen exited.
    done: Option<(StageEnd, u64)>,
    /// The runner killed it (the output cap, or the final sweep): no limit of its own ended it.
    killed: bool,
}

/// The started stages of one run. Dropped while still armed — the runner failed to start a
/// stage, or unwound — it kills the group and reaps every stage, so none outlives the call.
struct Running {
    procs: Vec<Proc>,
    pgid: Option<Pid>,
}

impl Running {
    /// Kills everything still running in the group. Only while no stage has been reaped: after
    /// that the group id may belong to someone else.
    fn kill_all(&self) {
        if let Some(g) = self.pgid {
            let _ = rustix::process::kill_process_group(g, Signal::KILL);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill_all();
        for p in &mut self.procs {
            let _ = p.child.wait();
        }
    }
}

/// One started tee.
struct TeeThread {
    index: usize,
    handle: JoinHandle<(TeeCapture, u64)>,
}

/// Why the run must stop now, if it must: the client cancelled, or the call's deadline or the
/// pipeline's own limit (from the first spawn, `own`) has passed.
fn stop_now(ctx: &CallContext, own: Option<(Instant, Duration)>) -> Option<Outcome> {
    if ctx.cancel.is_cancelled() {
        return Some(Outcome::Cancelled);
    }
    let now = Instant::now();
    if ctx.deadline.is_some_and(|at| now >= at) {
        return Some(Outcome::Timeout(ctx.timeout.or(own.map(|(_, t)| t))));
    }
    match own {
        Some((from, limit)) if now.saturating_duration_since(from) >= limit => {
            Some(Outcome::Timeout(Some(limit)))
        }
        _ => None,
    }
}

/// Runs `steps` (checked by the policy) and waits for them, within `limits` and the call's own
/// deadline, stopping when the call is cancelled. Every stage runs inside a [`Fence`] that lets
/// it read `workspace` and nothing of the user's outside it, under its [`StageLimits`], and
/// starts in its directory opened through the workspace layer (see `StageDir`), never in one
/// named by path.
pub fn run(
    steps: &[Step],
    workspace: &Workspace,
    limits: &ExecLimits,
    ctx: &CallContext,
) -> Result<RunResult, SpawnError> {
    let started = Instant::now();
    let first = steps.first().map(step_name).unwrap_or("pipeline");
    let setup = |source: io::Error| SpawnError {
        command: first,
        source,
    };
    let home = Home::create().map_err(setup)?;
    let programs: Vec<&Path> = steps
        .iter()
        .filter_map(|step| match step {
            Step::Run { argv, .. } => argv.first().map(Path::new),
            Step::Tee { .. } => None,
        })
        .collect();
    let fence = Fence::new(workspace.root(), home.path(), &programs)
        .map_err(|e| setup(io::Error::other(e)))?;
    fence::prepare();
    let prepared = limits.stage.prepare();

    let mut running = Running {
        procs: Vec::new(),
        pgid: None,
    };
    let mut tees: Vec<TeeThread> = Vec::new();
    let mut stderr_pipes: Vec<(os_pipe::PipeReader, Shared)> = Vec::new();
    let mut prev: Option<os_pipe::PipeReader> = None;
    let mut junctions: Vec<Junction> = Vec::new();
    // Per step: the count of the junction its stdout feeds, if it feeds one.
    let mut counted: Vec<Option<Arc<AtomicU64>>> = vec![None; steps.len()];
    let own_clock = limits.timeout.map(|t| (Instant::now(), t));
    let mut outcome = None;

    for (index, step) in steps.iter().enumerate() {
        if let Some(stop) = stop_now(ctx, own_clock) {
            outcome = Some(stop);
            break;
        }
        let spawned = match step {
            Step::Run { command, argv, cwd } => StageDir::open(workspace, cwd)
                .and_then(|dir| {
                    let place = Place {
                        dir: &dir,
                        home: home.path(),
                        fence: fence.handle(),
                        limits: &prepared,
                    };
                    // Fed by an external stage: through a counted junction.
                    let upstream_runs = index > 0 && matches!(steps[index - 1], Step::Run { .. });
                    let stdin = match prev.take() {
                        Some(from) if upstream_runs => {
                            let (stdin, to) = os_pipe::pipe()?;
                            let (junction, moved) = Junction::new(from, to);
                            junctions.push(junction);
                            counted[index - 1] = Some(moved);
                            Some(stdin)
                        }
                        other => other,
                    };
                    spawn_stage(*command, argv, &place, stdin, running.pgid)
                })
                .map(|(child, out, err)| {
                    let pid = Pid::from_child(&child);
                    running.pgid.get_or_insert(pid);
                    let stderr: Shared = Arc::new(Mutex::new(Vec::new()));
                    stderr_pipes.push((err, stderr.clone()));
                    running.procs.push(Proc {
                        index,
                        child,
                        pid,
                        stderr,
                        done: None,
                        killed: false,
                    });
                    out
                })
                .map_err(|source| SpawnError {
                    command: command.as_str(),
                    source,
                }),
            Step::Tee { append, targets } => {
                spawn_tee(*append, targets.clone(), prev.take(), limits.tee_limit)
                    .map(|(handle, out)| {
                        tees.push(TeeThread { index, handle });
                        out
                    })
                    .map_err(|source| SpawnError {
                        command: "tee",
                        source,
                    })
            }
        };
        match spawned {
            Ok(out) => prev = Some(out),
            // `running` kills and reaps what started.
            Err(e) => return Err(e),
        }
    }

    let cap = limits.stderr_cap;
    let collector = std::thread::spawn(move || drain_all(stderr_pipes, cap));
    // Started once every stage runs (no fork copies its stack). A run stopped while starting
    // moves nothing more: dropping the junctions closes both ends, as the sweep's kill would.
    let relay = (outcome.is_none() && !junctions.is_empty())
        .then(|| std::thread::spawn(move || relay::relay_all(junctions)));
    // The last pipe's reader: the captured stdout (not read when the run stopped while starting).
    let captured: Shared = Arc::new(Mutex::new(Vec::new()));
    let cap_hit = Arc::new(AtomicBool::new(false));
    let capture = prev.take().filter(|_| outcome.is_none()).map(|reader| {
        let buf = captured.clone();
        let hit = cap_hit.clone();
        let cap = limits.output_cap;
        std::thread::spawn(move || capture_stdout(reader, &buf, cap, &hit))
    });

    let last_tee = tees.iter().map(|t| t.index).max();
    let mut cap_handled = false;
    let mut scratch_checked = Instant::now();
    while outcome.is_none() {
        for p in running.procs.iter_mut().filter(|p| p.done.is_none()) {
            if let Some(end) = exited(p.pid) {
                p.done = Some((end, elapsed_ms(started)));
            }
        }
        let finished = running.procs.iter().all(|p| p.done.is_some())
            && collector.is_finished()
            && relay.as_ref().is_none_or(|r| r.is_finished())
            && tees.iter().all(|t| t.handle.is_finished())
            && capture.as_ref().is_none_or(|c| c.is_finished());
        if finished {
            break;
        }
        outcome = stop_now(ctx, own_clock);
        if outcome.is_some() {
            break;
        }
        if !cap_handled && cap_hit.load(Ordering::SeqCst) {
            cap_handled = true;
            // Stop the producers of the capped output. Stages before the last tee keep going:
            // their bytes still go to its file.
            for p in running.procs.iter_mut().filter(|p| p.done.is_none()) {
                if last_tee.is_none_or(|t| p.index > t) {
                    p.killed = true;
                    let _ = rustix::process::kill_process(p.pid, Signal::KILL);
                }
            }
        }
        if scratch_checked.elapsed() >= SCRATCH_POLL {
            scratch_checked = Instant::now();
            outcome = scratch_overrun(&running.procs, steps, &home, &limits.stage);
        }
        std::thread::sleep(POLL);
    }

    // The sweep: nothing started for this call outlives it. Children are not reaped yet, so the
    // group id still belongs to this pipeline.
    running.kill_all();
    // Killed stages close their stderr at once; give the collector a moment to read what they
    // wrote last (a memory limit's message, say) before it is looked at.
    // The relay, likewise, passes on what the killed stages wrote last, so it is counted.
    let drained_by = Instant::now() + DRAIN_GRACE;
    while !(collector.is_finished() && relay.as_ref().is_none_or(|r| r.is_finished()))
        && Instant::now() < drained_by
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut procs = std::mem::take(&mut running.procs);
    running.pgid = None;
    let mut metas: Vec<Option<StepMeta>> = vec![None; steps.len()];
    let mut stderr = Vec::new();
    let mut last_stderr = String::new();
    let mut hit: Option<Outcome> = None;
    for p in &mut procs {
        let (end, killed) = match p.done {
            Some((end, _)) => (end, p.killed),
            None => (
                match p.child.wait() {
                    Ok(status) => status
                        .code()
                        .map(StageEnd::Exited)
                        .or_else(|| status.signal().map(StageEnd::Signaled))
                        .unwrap_or(StageEnd::Exited(-1)),
                    Err(_) => StageEnd::Exited(-1),
                },
                true,
            ),
        };
        // Reap (a no-op wait for a child already seen exited).
        let _ = p.child.wait();
        let ms = p
            .done
            .map(|(_, ms)| ms)
            .unwrap_or_else(|| elapsed_ms(started));
        let command = step_command(&steps[p.index]);
        let output_size = counted[p.index]
            .as_ref()
            .map_or(0, |moved| moved.load(Ordering::Relaxed));
        metas[p.index] = Some(StepMeta {
            command,
            output_size,
            truncated: false,
            execution_time_ms: ms,
            exit_code: Some(end.code()),
        });
        let text = String::from_utf8_lossy(&snapshot(&p.stderr)).into_owned();
        if hit.is_none() {
            if let Some(limit) = limits::classify(end, &text, killed, &limits.stage) {
                hit = Some(Outcome::ResourceLimit {
                    step: p.index,
                    command,
                    limit,
                    stderr: text.clone(),
                });
            }
        }
        if p.index + 1 == steps.len() {
            last_stderr = text.clone();
        }
        if !text.is_empty() {
            stderr.push((command, text));
        }
    }
    // A stage stopped by its own limit explains a timeout that followed; a cancellation stays one.
    let outcome = match (outcome, hit) {
        (Some(Outcome::Cancelled), _) => Some(Outcome::Cancelled),
        (Some(found @ Outcome::ResourceLimit { .. }), _) => Some(found),
        (_, Some(limit)) => Some(limit),
        (other, None) => other,
    };

    let killed = matches!(
        outcome,
        Some(Outcome::Timeout(_) | Outcome::Cancelled | Outcome::ResourceLimit { .. })
    );
    let mut captures = Vec::new();
    for t in tees {
        // After a kill every tee's input is closed, so the join is prompt; a tee that somehow
        // still runs is left behind rather than waited for.
        if killed && !t.handle.is_finished() {
            continue;
        }
        if let Ok((capture, ms)) = t.handle.join() {
            metas[t.index] = Some(StepMeta {
                command: CommandName::Tee,
                output_size: capture.total,
                truncated: capture.truncated,
                execution_time_ms: ms,
                exit_code: Some(0),
            });
            // The stage feeding a tee is measured by it.
            if t.index > 0 {
                if let Some(Some(prev_meta)) = metas.get_mut(t.index - 1) {
                    prev_meta.output_size = capture.total;
                }
            }
            captures.push(capture);
        }
    }

    let stdout = snapshot(&captured);
    let truncated = cap_hit.load(Ordering::SeqCst);
    if let Some(Some(last)) = metas.last_mut() {
        last.output_size = stdout.len() as u64;
        last.truncated |= truncated;
    }
    let steps_meta: Vec<StepMeta> = metas
        .into_iter()
        .zip(steps)
        .map(|(m, s)| {
            m.unwrap_or(StepMeta {
                command: step_command(s),
                output_size: 0,
                truncated: false,
                execution_time_ms: elapsed_ms(started),
                exit_code: None,
            })
        })
        .collect();

    let outcome = outcome.unwrap_or_else(|| match (steps.last(), steps_meta.last()) {
        (Some(Step::Run { command, .. }), Some(meta)) => {
            let code = meta.exit_code.unwrap_or(-1);
            let no_match = *command == CommandName::Rg && code == 1;
            // Killed by us (or by the pipe we closed) after the cap: a truncated success.
            let cut_off = truncated && (code == 128 + 9 || code == 128 + 13);
            if code == 0 || no_match || cut_off {
                Outcome::Completed
            } else {
                Outcome::NonZeroExit(code)
            }
        }
        _ => Outcome::Completed,
    });

    Ok(RunResult {
        outcome,
        stdout,
        truncated,
        steps: steps_meta,
        stderr,
        last_stderr,
        tees: captures,
    })
}

/// The scratch folder holds more than the stages may write in all: the run stops, blamed on
/// the stage that writes scratch files (sort), or the first one still running.
fn scratch_overrun(
    procs: &[Proc],
    steps: &[Step],
    home: &Home,
    limits: &StageLimits,
) -> Option<Outcome> {
    let max = limits.scratch?;
    if home.size() <= max {
        return None;
    }
    let running = || procs.iter().filter(|p| p.done.is_none());
    let culprit = running()
        .find(|p| step_command(&steps[p.index]) == CommandName::Sort)
        .or_else(|| running().next())?;
    Some(Outcome::ResourceLimit {
        step: culprit.index,
        command: step_command(&steps[culprit.index]),
        limit: Limit::FileSize,
        stderr: String::new(),
    })
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

/// Checks whether `pid` has exited, without reaping it.
fn exited(pid: Pid) -> Option<StageEnd> {
    match rustix::process::waitid(
        WaitId::Pid(pid),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    ) {
        Ok(Some(status)) => {
            if let Some(code) = status.exit_status() {
                Some(StageEnd::Exited(code))
            } else {
                status.terminating_signal().map(StageEnd::Signaled)
            }
        }
        Ok(None) => None,
        // No such child any more: nothing left to wait for.
        Err(_) => Some(StageEnd::Exited(-1)),
    }
}

struct StageDir {
    dir: Dir,
}

impl StageDir {
    /// Opens the stage directory `cwd` (absolute inside the root, as the policy builds it).
    fn open(ws: &Workspace, cwd: &Path) -> io::Result<StageDir> {
        let relative = ws.relative(cwd)?;
        Ok(StageDir {
            dir: ws.dir(relative)?,
        })
    }

    /// The descriptor number the child changes into. It is close-on-exec (the layer opens
    /// everything so): `fork` copies it into the child, where `fchdir` uses it, and the `exec`
    /// of the stage's program closes it, so the stage never holds it.
    fn raw(&self) -> RawFd {
        self.dir.as_fd().as_raw_fd()
    }
}

/// Where a stage runs: its directory, its private home, the fence it enters and its limits.
struct Place<'a> {
    dir: &'a StageDir,
    home: &'a Path,
    /// [`Fence::handle`]; `None` runs the stage without Landlock (a kernel without it).
    fence: Option<std::os::fd::RawFd>,
    /// The stage's resource limits and the server's pid, ready for the child.
    limits: &'a PreparedLimits,
}

/// Starts one external stage; returns it, the reader of its stdout and that of its stderr.
fn spawn_stage(
    command: CommandName,
    argv: &[std::ffi::OsString],
    place: &Place<'_>,
    stdin: Option<os_pipe::PipeReader>,
    pgid: Option<Pid>,
) -> io::Result<(Child, os_pipe::PipeReader, os_pipe::PipeReader)> {
    let Some((program, args)) = argv.split_first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no program for '{}'", command.as_str()),
        ));
    };
    let (out_r, out_w) = os_pipe::pipe()?;
    let (err_r, err_w) = os_pipe::pipe()?;
    let home = place.home;
    let mut cmd = Command::new(program);
    // argv[0] is the typed name, so messages read `sort: …`, not `/usr/bin/sort: …`.
    cmd.arg0(command.as_str())
        .args(args)
        .env_clear()
        .env("PATH", STAGE_PATH)
        .env("LC_ALL", STAGE_LOCALE)
        .env("HOME", home)
        // Scratch files (sort's spill runs) go into the per-call directory too: a stage killed at
        // the time limit cannot clean up after itself, and the directory is removed when the call
        // ends. Left to the default, a runaway `sort` strewed its runs over the shared /tmp.
        .env("TMPDIR", home)
        .stdin(stdin.map(Stdio::from).unwrap_or_else(Stdio::null))
        .stdout(out_w)
        .stderr(err_w)
        .process_group(pgid.map(|p| p.as_raw_nonzero().get()).unwrap_or(0));
    let (dir, fence_fd, limits) = (place.dir.raw(), place.fence, *place.limits);
    // SAFETY: the hook makes only system calls on plain integers and on memory prepared before
    // the fork (`fchdir`, those of `limits::enter`, those of `fence::enter`) and allocates
    // nothing, as the child side of fork requires. `dir` stays open in the parent until `spawn`
    // returns (the caller holds the `StageDir`), so the child's copy names the checked
    // directory. If any step fails the spawn fails: a stage never runs elsewhere than where it
    // was checked, nor without its limits, nor unfenced where a fence was built.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fchdir(dir) != 0 {
                return Err(io::Error::last_os_error());
            }
            limits::enter(&limits)?;
            fence::enter(fence_fd)
        });
    }
    let child = cmd.spawn()?;
    // Dropping the command closes our copies of the child's ends, so EOF can propagate.
    drop(cmd);
    Ok((child, out_r, err_r))
}

/// Starts a built-in tee; returns its thread and the reader of what it passes on.
fn spawn_tee(
    append: bool,
    targets: Vec<PathBuf>,
    input: Option<os_pipe::PipeReader>,
    limit: usize,
) -> io::Result<(JoinHandle<(TeeCapture, u64)>, os_pipe::PipeReader)> {
    let (out_r, out_w) = os_pipe::pipe()?;
    let handle = std::thread::spawn(move || {
        let started = Instant::now();
        let capture = tee_copy(input, out_w, limit, append, targets);
        (capture, elapsed_ms(started))
    });
    Ok((handle, out_r))
}

/// The body of the built-in tee: pass everything on, keep up to `limit` bytes.
fn tee_copy(
    input: Option<os_pipe::PipeReader>,
    out: os_pipe::PipeWriter,
    limit: usize,
    append: bool,
    targets: Vec<PathBuf>,
) -> TeeCapture {
    let mut capture = TeeCapture {
        append,
        targets,
        ..Default::default()
    };
    let Some(mut input) = input else {
        return capture;
    };
    let mut out = Some(out);
    let mut buf = vec![0u8; CHUNK];
    let mut eof = false;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        capture.total += n as u64;
        let room = limit.saturating_sub(capture.data.len());
        capture.data.extend_from_slice(&buf[..n.min(room)]);
        if let Some(w) = out.as_mut() {
            if w.write_all(&buf[..n]).is_err() {
                // The reader went away: stop passing on, keep filling the file.
                out = None;
            }
        }
        if out.is_none() && capture.data.len() >= limit {
            break;
        }
    }
    capture.truncated = !eof || capture.total > limit as u64;
    capture
}

/// Reads the last stage's stdout into `buf` up to `cap` bytes; sets `hit` when there was more.
fn capture_stdout(mut reader: os_pipe::PipeReader, buf: &Shared, cap: usize, hit: &AtomicBool) {
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let Ok(mut b) = buf.lock() else { return };
        let room = cap.saturating_sub(b.len());
        b.extend_from_slice(&chunk[..n.min(room)]);
        if n > room {
            hit.store(true, Ordering::SeqCst);
            // Dropping the reader makes the writer's next write fail (SIGPIPE).
            return;
        }
    }
}

/// Reads every stage's stderr pipe to its end, keeping the first `cap` bytes of each in its
/// buffer: a full stderr pipe would otherwise block its stage forever. One thread for all of
/// them (see the module docs on why not one per stage); it ends when every pipe is closed.
fn drain_all(pipes: Vec<(os_pipe::PipeReader, Shared)>, cap: usize) {
    let mut open = pipes;
    let mut chunk = vec![0u8; 8 * 1024];
    while !open.is_empty() {
        let mut fds: Vec<libc::pollfd> = open
            .iter()
            .map(|(reader, _)| libc::pollfd {
                fd: reader.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs the kernel fills in.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let mut closed = vec![false; open.len()];
        for (i, fd) in fds.iter().enumerate() {
            if fd.revents == 0 {
                continue;
            }
            let (reader, buf) = &mut open[i];
            match reader.read(&mut chunk) {
                Ok(0) => closed[i] = true,
                Ok(n) => {
                    if let Ok(mut b) = buf.lock() {
                        let room = cap.saturating_sub(b.len());
                        b.extend_from_slice(&chunk[..n.min(room)]);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => closed[i] = true,
            }
        }
        let mut i = 0;
        open.retain(|_| {
            i += 1;
            !closed[i - 1]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
