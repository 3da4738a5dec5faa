//! Running one process of a trial (the agent, then the verifier) under a time limit.
//!
//! The process leads a process group of its own, so everything it starts (the MCP server, a
//! shell's children) can be killed with it. When it ends, at its limit or on its own, the
//! whole group gets SIGKILL before the runner moves on: nothing of one trial outlives it to
//! touch the next. Its output goes through pipes the runner drains into files, keeping the
//! first bytes up to a cap, so a chatty or runaway agent cannot fill the disk nor block on a
//! full pipe.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use crate::record::{End, ProcessEnd};

/// Bytes of `agent.out`, `agent.err` and `verify.out` kept (the rest is read and dropped).
pub const LOG_CAP: u64 = 4 * 1024 * 1024;
/// Bytes kept of an agent's stdout redirected by the study (`agent.stdout`), which is usually
/// its transcript: larger than a log, still bounded.
pub const REDIRECT_CAP: u64 = 256 * 1024 * 1024;
/// How often a running process is looked at (its end, its deadline, Ctrl-C).
const POLL: Duration = Duration::from_millis(10);
/// How long to wait for the output pipes to close once the group is killed: only a process
/// that left the group (setsid) can hold them longer, and it must not hold up the run.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Where one output stream goes.
#[derive(Debug, Clone)]
pub struct Sink {
    /// The file written.
    pub path: PathBuf,
    /// Bytes kept.
    pub cap: u64,
    /// Whether to append a line saying the output was cut (not for a transcript, whose
    /// format a note would break).
    pub note_cut: bool,
}

/// What to start and how.
#[derive(Debug, Clone)]
pub struct Job {
    /// Program and arguments.
    pub argv: Vec<OsString>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Extra environment.
    pub env: Vec<(String, OsString)>,
    /// A file for stdin, else /dev/null.
    pub stdin: Option<PathBuf>,
    /// Where stdout goes.
    pub stdout: Sink,
    /// Where stderr goes; `None`: into the same sink as stdout.
    pub stderr: Option<Sink>,
    /// Wall-clock limit.
    pub limit: Duration,
}

/// The run was interrupted (Ctrl-C): the process was killed and nothing is to be recorded.
#[derive(Debug)]
pub struct Interrupted;

/// Runs `job` to its end, its limit, or `stop`. A process that cannot be started is an
/// outcome ([`End::FailedToStart`]), not an error: the trial is recorded as such.
pub fn run(job: &Job, stop: &AtomicBool) -> Result<ProcessEnd, Interrupted> {
    let started = Instant::now();
    let failed = |error: String| ProcessEnd {
        end: End::FailedToStart,
        code: None,
        signal: None,
        secs: started.elapsed().as_secs_f64(),
        error: Some(error),
    };
    let Some((program, args)) = job.argv.split_first() else {
        return Ok(failed("no program given".into()));
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&job.cwd)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .process_group(0);
    match &job.stdin {
        Some(path) => match File::open(path) {
            Ok(f) => cmd.stdin(f),
            Err(e) => {
                return Ok(failed(format!(
                    "cannot open its stdin {}: {e}",
                    path.display()
                )))
            }
        },
        None => cmd.stdin(Stdio::null()),
    };
    let mut drains = Vec::new();
    let out = match open_sink(&job.stdout) {
        Ok(f) => f,
        Err(e) => {
            return Ok(failed(format!(
                "cannot create {}: {e}",
                job.stdout.path.display()
            )))
        }
    };
    let (reader, writer) = match io::pipe() {
        Ok(p) => p,
        Err(e) => return Ok(failed(format!("cannot make a pipe: {e}"))),
    };
    match &job.stderr {
        Some(sink) => {
            let err_file = match open_sink(sink) {
                Ok(f) => f,
                Err(e) => {
                    return Ok(failed(format!(
                        "cannot create {}: {e}",
                        sink.path.display()
                    )))
                }
            };
            let (err_reader, err_writer) = match io::pipe() {
                Ok(p) => p,
                Err(e) => return Ok(failed(format!("cannot make a pipe: {e}"))),
            };
            cmd.stderr(err_writer);
            drains.push(drain(err_reader, err_file, sink.clone()));
        }
        None => match writer.try_clone() {
            Ok(w) => {
                cmd.stderr(w);
            }
            Err(e) => return Ok(failed(format!("cannot share a pipe: {e}"))),
        },
    }
    cmd.stdout(writer);
    drains.push(drain(reader, out, job.stdout.clone()));
    let spawned = cmd.spawn();
    // The command holds the pipes' write ends: drop them, or the drains never see the end.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            finish_drains(drains);
            let program = PathBuf::from(program);
            return Ok(failed(format!("cannot start {}: {e}", program.display())));
        }
    };
    let outcome = supervise(&mut child, job.limit, stop);
    finish_drains(drains);
    let secs = started.elapsed().as_secs_f64();
    let status = match outcome {
        Supervised::Interrupted => return Err(Interrupted),
        Supervised::Ended(status) => status,
        Supervised::Killed => {
            return Ok(ProcessEnd {
                end: End::KilledAtLimit,
                code: None,
                signal: Some(libc::SIGKILL),
                secs,
                error: None,
            })
        }
    };
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => ProcessEnd {
            end: End::Exited,
            code: Some(code),
            signal: None,
            secs,
            error: None,
        },
        (None, signal) => ProcessEnd {
            end: End::Signaled,
            code: None,
            signal,
            secs,
            error: None,
        },
    })
}

enum Supervised {
    Ended(std::process::ExitStatus),
    Killed,
    Interrupted,
}

/// Waits for the child, its deadline or `stop`; in every case kills its group and reaps it.
fn supervise(child: &mut Child, limit: Duration, stop: &AtomicBool) -> Supervised {
    let deadline = Instant::now() + limit;
    let pid = Pid::from_child(child);
    loop {
        // WNOWAIT: the exited child stays a zombie, so its pid (the group's id) cannot be
        // reused before the group is killed below.
        let exited = rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        );
        let ended = match exited {
            Ok(Some(_)) => true,
            Ok(None) => false,
            // Only a bug could make waiting fail; treat it as an end and let wait() tell.
            Err(_) => true,
        };
        let interrupted = stop.load(Ordering::SeqCst);
        let late = Instant::now() >= deadline;
        if ended || interrupted || late {
            // The group outlives its leader when it started others (the MCP server, a
            // background job): they end with it.
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
            let status = child.wait();
            return match (ended, status) {
                (true, Ok(status)) => Supervised::Ended(status),
                _ if interrupted => Supervised::Interrupted,
                (_, Ok(status)) if !late => Supervised::Ended(status),
                _ => Supervised::Killed,
            };
        }
        thread::sleep(POLL);
    }
}

/// Creates or truncates a sink's file, refusing a symlink in its place: the verifier's output
/// is opened after the agent has run, and an agent that left a link at `verify.out` must not
/// have the runner overwrite whatever the link names.
fn open_sink(sink: &Sink) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&sink.path)
}

/// A thread copying `reader` into `file`: the first `sink.cap` bytes kept, the rest read and
/// dropped so the writer never blocks. It reports on a channel so the runner can stop
/// waiting for it.
fn drain(mut reader: io::PipeReader, mut file: File, sink: Sink) -> mpsc::Receiver<()> {
    let (done, wait) = mpsc::channel();
    thread::spawn(move || {
        let mut kept = 0u64;
        let mut cut = false;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let room = sink.cap.saturating_sub(kept).min(n as u64) as usize;
            if room < n {
                cut = true;
            }
            if room > 0 && file.write_all(&buf[..room]).is_err() {
                // A full disk: keep draining so the process is not blocked, keep nothing more.
                kept = sink.cap;
                cut = true;
                continue;
            }
            kept += room as u64;
        }
        if cut && sink.note_cut {
            let _ = writeln!(
                file,
                "\n[filesystem study: output cut here, only the first {} bytes are kept]",
                sink.cap
            );
        }
        let _ = done.send(());
    });
    wait
}

fn finish_drains(drains: Vec<mpsc::Receiver<()>>) {
    let until = Instant::now() + DRAIN_GRACE;
    for d in drains {
        let _ = d.recv_timeout(until.saturating_duration_since(Instant::now()));
    }
}
