//! The third phase of a run: watching the started stages until they all finish, the call is
//! cancelled, a clock runs out or a stage passes a limit; then the sweep that kills whatever is
//! left.

use std::time::{Duration, Instant};

use rustix::process::Signal;

use super::builtin_tee::TeeThread;
use super::stage::{exited, Proc, Running};
use super::streams::Streams;
use super::{elapsed_ms, step_command, Outcome};
use crate::limits::{Limit, StageLimits};
use crate::plan::{CommandName, Step};
use crate::scratch::Home;
use mcp_core::toolset::CallContext;

/// How often the runner looks at its children, the clock and the cancel flag.
const POLL: Duration = Duration::from_millis(5);
/// How often the runner sums the scratch folder against its limit.
const SCRATCH_POLL: Duration = Duration::from_millis(100);

/// What the supervisor watches besides the stages.
pub(super) struct Watch<'a> {
    /// The call's cancel flag and deadline.
    pub(super) ctx: &'a CallContext,
    /// The pipeline's own limit, from its first spawn.
    pub(super) own: Option<(Instant, Duration)>,
    /// When the call started (step times count from it).
    pub(super) started: Instant,
    /// The per-call scratch folder, summed against `stage.scratch`.
    pub(super) home: &'a Home,
    /// The stages' limits.
    pub(super) stage: &'a StageLimits,
}

/// Watches the run every [`POLL`] until everything finished (`None`) or it must stop (why).
/// Stages are only looked at, never reaped, so the group id stays theirs. When the output cap
/// is hit, the stages after the last tee are killed (their output is no longer wanted); the
/// ones before it keep going, since their bytes still go to its file.
pub(super) fn supervise(
    running: &mut Running,
    tees: &[TeeThread],
    streams: &Streams,
    steps: &[Step],
    watch: &Watch<'_>,
) -> Option<Outcome> {
    let last_tee = tees.iter().map(|t| t.index).max();
    let mut cap_handled = false;
    let mut scratch_checked = Instant::now();
    loop {
        for p in running.procs.iter_mut().filter(|p| p.done.is_none()) {
            if let Some(end) = exited(p.pid) {
                p.done = Some((end, elapsed_ms(watch.started)));
            }
        }
        let finished = running.procs.iter().all(|p| p.done.is_some())
            && streams.finished()
            && tees.iter().all(|t| t.handle.is_finished());
        if finished {
            return None;
        }
        if let Some(stop) = stop_now(watch.ctx, watch.own) {
            return Some(stop);
        }
        if !cap_handled && streams.cap_hit.load(std::sync::atomic::Ordering::SeqCst) {
            cap_handled = true;
            for p in running.procs.iter_mut().filter(|p| p.done.is_none()) {
                if last_tee.is_none_or(|t| p.index > t) {
                    p.killed = true;
                    let _ = rustix::process::kill_process(p.pid, Signal::KILL);
                }
            }
        }
        if scratch_checked.elapsed() >= SCRATCH_POLL {
            scratch_checked = Instant::now();
            if let Some(over) = scratch_overrun(&running.procs, steps, watch.home, watch.stage) {
                return Some(over);
            }
        }
        std::thread::sleep(POLL);
    }
}

/// The sweep: nothing started for this call outlives it. Children are not reaped yet, so the
/// group id still belongs to this pipeline. Killed stages close their stderr at once; the
/// streams are given a moment to take in what they wrote last.
pub(super) fn sweep(running: &Running, streams: &Streams) {
    running.kill_all();
    streams.drain();
}

/// Why the run must stop now, if it must: the client cancelled, or the call's deadline or the
/// pipeline's own limit (from the first spawn, `own`) has passed.
pub(super) fn stop_now(ctx: &CallContext, own: Option<(Instant, Duration)>) -> Option<Outcome> {
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
