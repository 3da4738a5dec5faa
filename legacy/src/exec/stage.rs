//! Starting one external stage — in its directory, fenced, under its limits, in the pipeline's
//! process group — and keeping the started stages so that none outlives the call.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use super::streams::Shared;
use crate::fence;
use crate::limits::{self, PreparedLimits, StageEnd};
use crate::plan::CommandName;
use workspace::{Dir, Workspace};

/// The fixed `PATH` of every stage (binaries are absolute anyway; this is for what they spawn).
const STAGE_PATH: &str = "/usr/bin:/bin";
/// A UTF-8 locale that exists everywhere glibc does.
const STAGE_LOCALE: &str = "C.UTF-8";

/// One started external stage.
pub(super) struct Proc {
    /// Its position in the pipeline.
    pub(super) index: usize,
    /// The process.
    pub(super) child: Child,
    /// Its pid.
    pub(super) pid: Pid,
    /// Its stderr as the collector has read it so far.
    pub(super) stderr: Shared,
    /// How it ended and when, once seen exited.
    pub(super) done: Option<(StageEnd, u64)>,
    /// The runner killed it (the output cap, or the final sweep): no limit of its own ended it.
    pub(super) killed: bool,
}

/// The started stages of one run. Dropped while still armed — the runner failed to start a
/// stage, or unwound — it kills the group and reaps every stage, so none outlives the call.
pub(super) struct Running {
    /// Every stage started so far, in pipeline order.
    pub(super) procs: Vec<Proc>,
    /// The group every stage joins (the first stage's pid).
    pub(super) pgid: Option<Pid>,
}

impl Running {
    /// Kills everything still running in the group. Only while no stage has been reaped: after
    /// that the group id may belong to someone else.
    pub(super) fn kill_all(&self) {
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

/// The directory a stage starts in, opened through the workspace layer.
pub(super) struct StageDir {
    dir: Dir,
}

impl StageDir {
    /// Opens the stage directory `cwd` (absolute inside the root, as the policy builds it).
    pub(super) fn open(ws: &Workspace, cwd: &Path) -> io::Result<StageDir> {
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
pub(super) struct Place<'a> {
    /// The directory it starts in.
    pub(super) dir: &'a StageDir,
    /// Its private home (and TMPDIR).
    pub(super) home: &'a Path,
    /// [`Fence::handle`]; `None` runs the stage without Landlock (a kernel without it).
    pub(super) fence: Option<std::os::fd::RawFd>,
    /// The stage's resource limits and the server's pid, ready for the child.
    pub(super) limits: &'a PreparedLimits,
}

/// Starts one external stage; returns it, the reader of its stdout and that of its stderr.
pub(super) fn spawn_stage(
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

/// Checks whether `pid` has exited, without reaping it.
pub(super) fn exited(pid: Pid) -> Option<StageEnd> {
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
