//! The last phase of a run: reaping the stages and gathering what each step did into the
//! [`RunResult`] — per-step sizes, times and exit codes, the stderr texts, what every tee kept,
//! the captured stdout — and deciding how the run ended.

use std::os::unix::process::ExitStatusExt;
use std::time::Instant;

use super::builtin_tee::TeeThread;
use super::stage::Running;
use super::streams::{snapshot, Streams};
use super::{elapsed_ms, step_command, ExecLimits, Outcome, RunResult, StepMeta, TeeCapture};
use crate::limits::{self, StageEnd};
use crate::plan::{CommandName, Step};

/// What the stages (not the tees) left behind.
struct Reaped {
    /// Per step, once known.
    metas: Vec<Option<StepMeta>>,
    /// Each external stage's non-empty stderr, in pipeline order.
    stderr: Vec<(CommandName, String)>,
    /// The last stage's stderr.
    last_stderr: String,
    /// The first stage that ran into a limit of its own.
    hit: Option<Outcome>,
}

/// Gathers the result of a run that was swept (see `supervise::sweep`). `stopped` is why the
/// supervisor stopped it, if it did.
pub(super) fn collect(
    running: &mut Running,
    tees: Vec<TeeThread>,
    streams: &Streams,
    steps: &[Step],
    limits: &ExecLimits,
    stopped: Option<Outcome>,
    started: Instant,
) -> RunResult {
    let Reaped {
        mut metas,
        stderr,
        last_stderr,
        hit,
    } = reap(running, streams, steps, limits, started);
    // A stage stopped by its own limit explains a timeout that followed; a cancellation stays one.
    let outcome = match (stopped, hit) {
        (Some(Outcome::Cancelled), _) => Some(Outcome::Cancelled),
        (Some(found @ Outcome::ResourceLimit { .. }), _) => Some(found),
        (_, Some(limit)) => Some(limit),
        (other, None) => other,
    };
    let killed = matches!(
        outcome,
        Some(Outcome::Timeout(_) | Outcome::Cancelled | Outcome::ResourceLimit { .. })
    );
    let captures = join_tees(tees, killed, &mut metas);

    let (stdout, truncated) = streams.stdout();
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
    let outcome = outcome.unwrap_or_else(|| ending(steps, &steps_meta, truncated));
    RunResult {
        outcome,
        stdout,
        truncated,
        steps: steps_meta,
        stderr,
        last_stderr,
        tees: captures,
    }
}

/// Reaps every stage (waiting for one not yet seen exited: the sweep killed it) and records its
/// step: the junction's count as its output size, its time, its exit code, its stderr, and
/// whether it ran into a limit of its own.
fn reap(
    running: &mut Running,
    streams: &Streams,
    steps: &[Step],
    limits: &ExecLimits,
    started: Instant,
) -> Reaped {
    let mut procs = std::mem::take(&mut running.procs);
    // Reaped stages free their pids: the group id must not be signalled any more.
    running.pgid = None;
    let mut reaped = Reaped {
        metas: vec![None; steps.len()],
        stderr: Vec::new(),
        last_stderr: String::new(),
        hit: None,
    };
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
        let output_size = streams.moved_after(p.index);
        reaped.metas[p.index] = Some(StepMeta {
            command,
            output_size,
            truncated: false,
            execution_time_ms: ms,
            exit_code: Some(end.code()),
        });
        let text = String::from_utf8_lossy(&snapshot(&p.stderr)).into_owned();
        if reaped.hit.is_none() {
            if let Some(limit) = limits::classify(end, &text, killed, &limits.stage) {
                reaped.hit = Some(Outcome::ResourceLimit {
                    step: p.index,
                    command,
                    limit,
                    stderr: text.clone(),
                });
            }
        }
        if p.index + 1 == steps.len() {
            reaped.last_stderr = text.clone();
        }
        if !text.is_empty() {
            reaped.stderr.push((command, text));
        }
    }
    reaped
}

/// Joins the tees and records their steps (a tee also measures the stage feeding it). After a
/// kill every tee's input is closed, so the join is prompt; a tee that somehow still runs is
/// left behind rather than waited for.
fn join_tees(
    tees: Vec<TeeThread>,
    killed: bool,
    metas: &mut [Option<StepMeta>],
) -> Vec<TeeCapture> {
    let mut captures = Vec::new();
    for t in tees {
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
            if t.index > 0 {
                if let Some(Some(prev_meta)) = metas.get_mut(t.index - 1) {
                    prev_meta.output_size = capture.total;
                }
            }
            captures.push(capture);
        }
    }
    captures
}

/// How a run that nothing stopped ended: by its last stage's exit status (`rg` finding nothing
/// is a success; so is a stage killed, or cut off by the closed pipe, after the output cap).
fn ending(steps: &[Step], metas: &[StepMeta], truncated: bool) -> Outcome {
    match (steps.last(), metas.last()) {
        (Some(Step::Run { command, .. }), Some(meta)) => {
            let code = meta.exit_code.unwrap_or(-1);
            let no_match = *command == CommandName::Rg && code == 1;
            let cut_off = truncated && (code == 128 + 9 || code == 128 + 13);
            if code == 0 || no_match || cut_off {
                Outcome::Completed
            } else {
                Outcome::NonZeroExit(code)
            }
        }
        _ => Outcome::Completed,
    }
}
