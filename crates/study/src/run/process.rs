//! Running one process of a trial (the agent, then the verifier) under a time limit.
//!
//! The process leads a process group of its own, so everything it starts (the MCP server, a
//! shell's children) can be killed with it. When it ends, at its limit or on its own, the
//! whole group gets SIGKILL before the runner moves on: nothing of one trial outlives it to
//! touch the next. Should the runner itself die (SIGKILL, a crash), the kernel kills the
//! process it started (`PR_SET_PDEATHSIG`), and `--resume` kills what that process left (see
//! [`super::orphans`]). Its output goes through pipes the runner drains into files, keeping the
//! first bytes up to a cap, so a chatty or runaway agent cannot fill the disk nor block on a
//! full pipe. No file is opened in a way that can block: a FIFO an agent left where output or
//! input goes is refused, never waited on.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use workspace::Dir;

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

/// A file the runner writes or reads for a process.
#[derive(Debug, Clone)]
pub enum Place {
    /// A file of the trial's own directory (`agent.out`, `verify.out`…), by its name in that
    /// directory's descriptor. Whatever is at the name (what the agent left: a link to another
    /// file, a FIFO) is removed and the file created anew, so the runner never writes through
    /// it and never waits on it.
    Trial(Arc<Dir>, &'static str),
    /// A path the study file names (`agent.stdout`, `agent.stdin`), opened by name as the study's
    /// author asked; refused unless it is a regular file with a single link.
    Named(PathBuf),
}

impl Place {
    fn describe(&self) -> String {
        match self {
            Place::Trial(_, name) => format!("the trial's {name}"),
            Place::Named(path) => path.display().to_string(),
        }
    }
}

/// Where one output stream goes.
#[derive(Debug, Clone)]
pub struct Sink {
    /// The file written.
    pub place: Place,
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
    /// `(name, value)` of the variable that marks every process of this trial (inherited by
    /// all it starts), by which `--resume` finds what a killed runner left running.
    pub marker: (&'static str, String),
    /// Where stdout goes.
    pub stdout: Sink,
    /// Where stderr goes; `None`: into the same sink as stdout.
    pub stderr: Option<Sink>,
    /// Wall-clock limit.
    pub limit: Duration,
}

/// Makes `cmd` start in `dir`, a trial's workspace or task directory.
// By name, and safe here: the runner made `dir` itself inside its own output directory (or it is
// the study's own task directory), and the agent is handed the same path in `{workspace}` anyway;
// agents are not sandboxed by the runner (README), so a descriptor would confine nothing more.
#[allow(clippy::disallowed_methods)]
fn starts_in(cmd: &mut Command, dir: &std::path::Path) {
    cmd.current_dir(dir);
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
    starts_in(&mut cmd, &job.cwd);
    cmd.args(args)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .env(job.marker.0, &job.marker.1)
        .process_group(0);
    die_with_runner(&mut cmd);
    match &job.stdin {
        Some(path) => match open_input(path) {
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
                job.stdout.place.describe()
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
                        sink.place.describe()
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

/// Makes the process die with the runner: `PR_SET_PDEATHSIG` is set in the child before it
/// runs the program, so if the runner's thread that started it ends (the runner killed by
/// SIGKILL, a crash) the kernel sends it SIGKILL. The runner may die before the child gets to
/// `prctl`; the death signal would then never come, so the child checks that its parent is
/// still the runner after setting it, and gives up instead of running orphaned.
fn die_with_runner(cmd: &mut Command) {
    let runner = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec and calls only prctl and
    // getppid, both async-signal-safe; it allocates nothing (the error is built from an errno).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != runner.as_raw_nonzero().get() {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Opens a sink's file. A file of the trial's directory is created fresh (what was at its name
/// is removed first, `O_EXCL` refuses anything put there in between): an agent that left a
/// hard link there to a file of the run (`trials.jsonl`), a symlink or a FIFO cannot have the
/// runner truncate, write through or wait on it. A path of the study file is opened without
/// following a final symlink and without blocking, refused unless it is a regular file with
/// one link, and only then emptied.
fn open_sink(sink: &Sink) -> io::Result<File> {
    match &sink.place {
        Place::Trial(dir, name) => create_fresh(dir, OsStr::new(name)),
        Place::Named(path) => {
            // By name: the study's author chose this path (`agent.stdout`), usually inside the
            // fresh trial directory; the open follows no final symlink, cannot block on a FIFO,
            // and nothing is truncated before the file is known to be a regular file with a
            // single link.
            #[allow(clippy::disallowed_methods)]
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .custom_flags(
                    libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
                )
                .open(path)
                .map_err(fifo_without_reader)?;
            refuse_shared(&file)?;
            file.set_len(0)?;
            Ok(file)
        }
    }
}

/// Creates `name` in `dir` anew for writing: whatever is at the name is unlinked (never
/// followed), then the file is made with `O_EXCL`.
pub fn create_fresh(dir: &Dir, name: &OsStr) -> io::Result<File> {
    match dir.unlink(name) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let fd = dir.open(
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o644),
    )?;
    Ok(File::from(fd))
}

/// Opens a process's stdin file (a path of the study file) without blocking, refusing anything
/// but a regular file: a FIFO there would hang the runner before the process even started.
fn open_input(path: &std::path::Path) -> io::Result<File> {
    // By name: the study's author chose this path (`agent.stdin`, e.g. `{prompt_file}`).
    #[allow(clippy::disallowed_methods)]
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    workspace::require_regular(&file)?;
    Ok(file)
}

/// `open(O_WRONLY | O_NONBLOCK)` of a FIFO nobody reads fails with `ENXIO`; say what it is.
fn fifo_without_reader(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ENXIO) {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "it is a FIFO, not a regular file",
        )
    } else {
        e
    }
}

/// Refuses a file that is not regular or has more than one link: emptying it would empty the
/// file's other names too.
fn refuse_shared(file: &File) -> io::Result<()> {
    let st = workspace::require_regular(file)?;
    if st.nlink > 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "it has more than one hard link, so emptying it would empty a file elsewhere; remove the extra link",
        ));
    }
    Ok(())
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
