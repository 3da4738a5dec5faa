//! Opening the roots `--server` calls name, off the call's own thread, so that a call is answered
//! by its deadline even when opening its root blocks.
//!
//! Opening a path can block in the kernel for as long as its filesystem does not answer (a network
//! mount whose server is gone), and nothing can interrupt it. So a call hands its root to a small
//! pool of opener threads and waits for the answer only until its deadline (or cancellation);
//! then it is answered, and the opener finishes on its own time, its result dropped. Handing off
//! to a thread already waiting costs two wake-ups; starting a thread for each call cost several
//! times more than the rest of a small call. A new opener is started only when none is idle, so
//! openers stuck on one tenant's root do not hold up another tenant's, up to [`MAX_OPENERS`];
//! past that, roots wait their turn (still answered by their deadline), and past
//! [`MAX_WAITING`] waiting, a call is refused at once rather than queued.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use mcp_core::toolset::{CallContext, Stop};
use workspace::root::OpenedRoot;

use crate::allow::{RootRefused, ServedRoots};

/// The most opener threads: as many stuck roots as this can be waited out without holding up a
/// root that opens at once.
pub const MAX_OPENERS: usize = 16;

/// The most roots waiting for an opener when every opener is busy.
pub const MAX_WAITING: usize = 64;

/// Why a call's root was not opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The root was opened and refused.
    #[error(transparent)]
    Refused(#[from] RootRefused),
    /// The call stopped (timed out or was cancelled) before its root was open.
    #[error("opening root '{given}' stopped: {stop}; nothing was changed (a root that does not open in time is on a filesystem that is not answering: check it, or raise --timeout)")]
    Stopped { given: String, stop: Stop },
    /// Every opener is busy and too many roots are waiting already.
    #[error("cannot open root '{0}' now: {MAX_OPENERS} roots are still being opened and {MAX_WAITING} more are waiting (a filesystem that does not answer?); try again later")]
    Busy(String),
    /// No opener could be started.
    #[error("cannot open root '{given}': no thread to open it on ({source})")]
    NoThread {
        given: String,
        source: std::io::Error,
    },
}

/// Where an opener leaves its answer for the waiting call. A mutex and a condition variable
/// rather than a channel: a channel's receiver spins and yields the processor before it sleeps,
/// which on a busy machine cost a call far more than the open itself.
#[derive(Default)]
struct Answer {
    outcome: Mutex<Option<Result<OpenedRoot, RootRefused>>>,
    ready: Condvar,
}

/// One root to open and where its answer goes.
struct Job {
    given: String,
    answer: Arc<Answer>,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Openers waiting for a job.
    idle: usize,
    /// Openers started.
    threads: usize,
}

/// The opener pool of one daemon.
pub struct RootOpener {
    served: Arc<ServedRoots>,
    state: Mutex<State>,
    ready: Condvar,
}

impl RootOpener {
    /// A pool opening roots by `served`'s rules; no thread is started before the first call.
    pub fn new(served: Arc<ServedRoots>) -> Arc<RootOpener> {
        Arc::new(RootOpener {
            served,
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the root `given` names and checks it (see [`ServedRoots::resolve`]), waiting no
    /// longer than `ctx` allows.
    pub fn open(self: &Arc<Self>, given: &str, ctx: &CallContext) -> Result<OpenedRoot, OpenError> {
        let answer = Arc::new(Answer::default());
        {
            let mut state = self.lock();
            let waiting = state.jobs.len();
            if waiting >= MAX_WAITING {
                return Err(OpenError::Busy(given.to_string()));
            }
            // An idle opener takes the job; with none, a new one is started (the job is queued
            // only once it has someone to take it, or every opener is busy).
            if state.idle > waiting {
                self.ready.notify_one();
            } else if state.threads < MAX_OPENERS {
                let me = self.clone();
                std::thread::Builder::new()
                    .name("root-opener".into())
                    .spawn(move || me.serve())
                    .map_err(|source| OpenError::NoThread {
                        given: given.to_string(),
                        source,
                    })?;
                state.threads += 1;
            }
            state.jobs.push_back(Job {
                given: given.to_string(),
                answer: answer.clone(),
            });
        }
        let mut outcome = answer.outcome.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(opened) = outcome.take() {
                return Ok(opened?);
            }
            if let Err(stop) = ctx.check() {
                // The opener leaves its answer where nobody reads it: the root it opened is
                // dropped with it.
                return Err(OpenError::Stopped {
                    given: given.to_string(),
                    stop,
                });
            }
            // Short slices, so a cancelled call is released promptly too.
            let slice = ctx.remaining().map_or(Duration::from_millis(100), |r| {
                r.min(Duration::from_millis(100))
            });
            outcome = answer
                .ready
                .wait_timeout(outcome, slice)
                .map(|(o, _)| o)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// An opener: takes jobs for as long as the daemon lives.
    fn serve(&self) {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.jobs.pop_front() {
                drop(state);
                let outcome = self.served.resolve(&job.given);
                *job.answer.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
                job.answer.ready.notify_one();
                state = self.lock();
                continue;
            }
            state.idle += 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.idle -= 1;
        }
    }
}
