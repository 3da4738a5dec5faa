//! Runs a checked pipeline: real subprocesses joined by OS pipes, no shell.
//!
//! Decisions worth knowing:
//!
//! - **Direct pipes.** Adjacent external stages are joined by one OS pipe each, with no relay
//!   through the server: a relay would copy every byte twice more and cost throughput on large
//!   inputs. The price is that the byte count of such a stage's output is not measured, so its
//!   `output_size` is `null`. It is measured (cheaply, because the bytes pass through the server
//!   anyway) for the last stage, for `tee`, and for a stage whose output feeds a `tee`.
//! - **One process group.** Every stage joins the group of the first external stage, so a
//!   timeout, a cancellation or the final sweep is one `killpg`. Children are watched with
//!   `waitid(WNOWAIT)` and only reaped at the very end, so the group id cannot be recycled by an
//!   unrelated process while we may still signal it.
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use super::fence::{self, Fence};
use super::plan::{CommandName, Step};
use crate::toolset::CancelToken;
use crate::workspace::{Dir, Workspace};

/// The fixed `PATH` of every stage (binaries are absolute anyway; this is for what they spawn).
const STAGE_PATH: &str = "/usr/bin:/bin";
/// A UTF-8 locale that exists everywhere glibc does.
const STAGE_LOCALE: &str = "C.UTF-8";
/// How often the runner looks at its children, the clock and the cancel flag.
const POLL: Duration = Duration::from_millis(5);
/// Read size of the in-process copies.
const CHUNK: usize = 64 * 1024;

/// The limits of one run.
#[derive(Clone, Copy, Debug)]
pub struct ExecLimits {
    /// Wall-clock limit of the whole pipeline.
    pub timeout: Duration,
    /// Most bytes of the last stage's stdout returned.
    pub output_cap: usize,
    /// Most bytes of each stage's stderr kept.
    pub stderr_cap: usize,
    /// Most bytes a `tee` keeps for writing.
    pub tee_limit: usize,
}

/// Per-step facts reported in `meta.steps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepMeta {
    /// The command as the caller typed it.
    pub command: CommandName,
    /// Bytes the step wrote to its stdout, when measured (see the module docs).
    pub output_size: Option<u64>,
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
    /// The wall-clock limit expired; everything was killed.
    Timeout,
    /// The client cancelled; everything was killed.
    Cancelled,
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
    drain: JoinHandle<()>,
    /// Exit code and time once seen exited.
    done: Option<(i32, u64)>,
}

/// One started tee.
struct TeeThread {
    index: usize,
    handle: JoinHandle<(TeeCapture, u64)>,
}

/// Runs `steps` (checked by the policy) and waits for them, within `limits`, polling `cancel`.
/// Every stage runs inside a [`Fence`] that lets it read `workspace` and nothing of the user's
/// outside it, and starts in its directory opened through the workspace layer (see
/// `StageDir`), never in one named by path.
pub fn run(
    steps: &[Step],
    workspace: &Workspace,
    limits: &ExecLimits,
    cancel: &CancelToken,
) -> Result<RunResult, SpawnError> {
    let started = Instant::now();
    let first = steps.first().map(step_name).unwrap_or("pipeline");
    let home = tempfile::Builder::new()
        .prefix("shelpa-home-")
        .tempdir()
        .map_err(|source| SpawnError {
            command: first,
            source,
        })?;
    let programs: Vec<&Path> = steps
        .iter()
        .filter_map(|step| match step {
            Step::Run { argv, .. } => argv.first().map(Path::new),
            Step::Tee { .. } => None,
        })
        .collect();
    let fence = Fence::new(workspace.root(), home.path(), &programs).map_err(|e| SpawnError {
        command: first,
        source: io::Error::other(e),
    })?;

    let mut procs: Vec<Proc> = Vec::new();
    let mut tees: Vec<TeeThread> = Vec::new();
    let mut pgid: Option<Pid> = None;
    let mut prev: Option<os_pipe::PipeReader> = None;

    for (index, step) in steps.iter().enumerate() {
        let spawned = match step {
            Step::Run { command, argv, cwd } => StageDir::open(workspace, cwd)
                .and_then(|dir| {
                    let place = Place {
                        dir: &dir,
                        home: home.path(),
                        fence: fence.handle(),
                    };
                    spawn_stage(*command, argv, &place, prev.take(), pgid, limits)
                })
                .map(|(proc_, out)| {
                    pgid.get_or_insert(proc_.pid);
                    procs.push(Proc { index, ..proc_ });
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
            Err(e) => {
                drop(prev.take());
                if let Some(g) = pgid {
                    let _ = rustix::process::kill_process_group(g, Signal::KILL);
                }
                for p in &mut procs {
                    let _ = p.child.wait();
                }
                return Err(e);
            }
        }
    }

    // The last pipe's reader: the captured stdout.
    let captured: Shared = Arc::new(Mutex::new(Vec::new()));
    let cap_hit = Arc::new(AtomicBool::new(false));
    let capture = prev.take().map(|reader| {
        let buf = captured.clone();
        let hit = cap_hit.clone();
        let cap = limits.output_cap;
        std::thread::spawn(move || capture_stdout(reader, &buf, cap, &hit))
    });

    let last_tee = tees.iter().map(|t| t.index).max();
    let mut outcome = None;
    let mut cap_handled = false;
    loop {
        for p in procs.iter_mut().filter(|p| p.done.is_none()) {
            if let Some(code) = exited(p.pid) {
                p.done = Some((code, elapsed_ms(started)));
            }
        }
        let finished = procs
            .iter()
            .all(|p| p.done.is_some() && p.drain.is_finished())
            && tees.iter().all(|t| t.handle.is_finished())
            && capture.as_ref().is_none_or(|c| c.is_finished());
        if finished {
            break;
        }
        if cancel.is_cancelled() {
            outcome = Some(Outcome::Cancelled);
            break;
        }
        if started.elapsed() >= limits.timeout {
            outcome = Some(Outcome::Timeout);
            break;
        }
        if !cap_handled && cap_hit.load(Ordering::SeqCst) {
            cap_handled = true;
            // Stop the producers of the capped output. Stages before the last tee keep going:
            // their bytes still go to its file.
            for p in procs.iter().filter(|p| p.done.is_none()) {
                if last_tee.is_none_or(|t| p.index > t) {
                    let _ = rustix::process::kill_process(p.pid, Signal::KILL);
                }
            }
        }
        std::thread::sleep(POLL);
    }

    // The sweep: nothing started for this call outlives it. Children are not reaped yet, so the
    // group id still belongs to this pipeline.
    if let Some(g) = pgid {
        let _ = rustix::process::kill_process_group(g, Signal::KILL);
    }
    let mut metas: Vec<Option<StepMeta>> = vec![None; steps.len()];
    let mut stderr = Vec::new();
    let mut last_stderr = String::new();
    for p in &mut procs {
        let code = match p.done {
            Some((code, _)) => code,
            None => match p.child.wait() {
                Ok(status) => status
                    .code()
                    .or_else(|| status.signal().map(|s| 128 + s))
                    .unwrap_or(-1),
                Err(_) => -1,
            },
        };
        // Reap (a no-op wait for a child already seen exited).
        let _ = p.child.wait();
        let ms = p
            .done
            .map(|(_, ms)| ms)
            .unwrap_or_else(|| elapsed_ms(started));
        let command = match &steps[p.index] {
            Step::Run { command, .. } => *command,
            Step::Tee { .. } => CommandName::Tee,
        };
        metas[p.index] = Some(StepMeta {
            command,
            output_size: None,
            truncated: false,
            execution_time_ms: ms,
            exit_code: Some(code),
        });
        let text = String::from_utf8_lossy(&snapshot(&p.stderr)).into_owned();
        if p.index + 1 == steps.len() {
            last_stderr = text.clone();
        }
        if !text.is_empty() {
            stderr.push((command, text));
        }
    }

    let killed = matches!(outcome, Some(Outcome::Timeout | Outcome::Cancelled));
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
                output_size: Some(capture.total),
                truncated: capture.truncated,
                execution_time_ms: ms,
                exit_code: Some(0),
            });
            // The stage feeding a tee is measured by it.
            if t.index > 0 {
                if let Some(Some(prev_meta)) = metas.get_mut(t.index - 1) {
                    prev_meta.output_size = Some(capture.total);
                }
            }
            captures.push(capture);
        }
    }

    let stdout = snapshot(&captured);
    let truncated = cap_hit.load(Ordering::SeqCst);
    if let Some(Some(last)) = metas.last_mut() {
        last.output_size = Some(stdout.len() as u64);
        last.truncated |= truncated;
    }
    let steps_meta: Vec<StepMeta> = metas
        .into_iter()
        .zip(steps)
        .map(|(m, s)| {
            m.unwrap_or(StepMeta {
                command: step_command(s),
                output_size: None,
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

/// Checks whether `pid` has exited, without reaping it; returns its shell-style exit code.
fn exited(pid: Pid) -> Option<i32> {
    match rustix::process::waitid(
        WaitId::Pid(pid),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    ) {
        Ok(Some(status)) => {
            if let Some(code) = status.exit_status() {
                Some(code)
            } else {
                status.terminating_signal().map(|s| 128 + s)
            }
        }
        Ok(None) => None,
        // No such child any more: nothing left to wait for.
        Err(_) => Some(-1),
    }
}

/// The directory a stage starts in, opened through the workspace layer (beneath the root's
/// descriptor, no symlink anywhere) in the server before the fork; the child `fchdir`s to it
/// between fork and exec. Starting a process in a directory named by path would let a directory
/// swapped for a symlink after the policy looked move the stage outside the workspace; a
/// descriptor keeps naming the directory that was checked, and a swap makes the open fail.
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

/// Where a stage runs: its directory, its private home, and the fence it enters.
struct Place<'a> {
    dir: &'a StageDir,
    home: &'a Path,
    /// [`Fence::handle`]; `None` runs the stage unfenced (a kernel without Landlock).
    fence: Option<std::os::fd::RawFd>,
}

/// Starts one external stage; returns it and the reader of its stdout.
fn spawn_stage(
    command: CommandName,
    argv: &[std::ffi::OsString],
    place: &Place<'_>,
    stdin: Option<os_pipe::PipeReader>,
    pgid: Option<Pid>,
    limits: &ExecLimits,
) -> io::Result<(Proc, os_pipe::PipeReader)> {
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
    let (dir, fence_fd) = (place.dir.raw(), place.fence);
    // SAFETY: the hook makes only system calls on plain integers (`fchdir`, then the two of
    // `fence::enter`) and allocates nothing, as the child side of fork requires. `dir` stays
    // open in the parent until `spawn` returns (the caller holds the `StageDir`), so the child's
    // copy names the checked directory. If either step fails the spawn fails: a stage never runs
    // elsewhere than where it was checked, nor unfenced where a fence was built.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fchdir(dir) != 0 {
                return Err(io::Error::last_os_error());
            }
            match fence_fd {
                Some(fd) => fence::enter(fd),
                None => Ok(()),
            }
        });
    }
    let child = cmd.spawn()?;
    // Dropping the command closes our copies of the child's ends, so EOF can propagate.
    drop(cmd);
    let pid = Pid::from_child(&child);
    let stderr: Shared = Arc::new(Mutex::new(Vec::new()));
    let buf = stderr.clone();
    let cap = limits.stderr_cap;
    let drain = std::thread::spawn(move || drain_capped(err_r, &buf, cap));
    Ok((
        Proc {
            index: 0,
            child,
            pid,
            stderr,
            drain,
            done: None,
        },
        out_r,
    ))
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

/// Reads a stderr pipe to its end, keeping the first `cap` bytes: a full stderr pipe would
/// otherwise block the stage forever.
fn drain_capped(mut reader: os_pipe::PipeReader, buf: &Shared, cap: usize) {
    let mut chunk = vec![0u8; 8 * 1024];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                if let Ok(mut b) = buf.lock() {
                    let room = cap.saturating_sub(b.len());
                    b.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ExecLimits {
        ExecLimits {
            timeout: Duration::from_secs(20),
            output_cap: 1024 * 1024,
            stderr_cap: 64 * 1024,
            tee_limit: 1024 * 1024,
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
        run(&[step], &ws, &limits(), &CancelToken::default()).expect("runs")
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
        let err = run(&[step], &ws, &limits(), &CancelToken::default()).expect_err("fails");
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
        run(&[step], &ws, &limits(), &CancelToken::default()).expect("runs")
    }

    fn stderr_of(r: &RunResult) -> String {
        r.stderr.iter().map(|(_, s)| s.as_str()).collect()
    }

    /// Where `command` is installed (the tests that use this need it).
    fn installed(command: CommandName) -> String {
        match crate::legacy::tools::ToolPaths::discover().get(command) {
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
            &CancelToken::default(),
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
            &CancelToken::default(),
        )
        .expect_err("refused");
        assert!(crate::workspace::is_swap(&err.source), "{err}");
        assert!(!err.to_string().contains(&root.display().to_string()));
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
