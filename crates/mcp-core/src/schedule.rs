//! The queue between the reader and the workers: bounded, ordered per lane.
//!
//! A session's calls must take effect in the order they were received, but in `--server` mode
//! calls for different workspaces have nothing to order between them, and one tenant's slow call
//! must not hold up another's. Each call therefore names a *lane* (the workspace it acts on); a
//! lane runs one call at a time, in arrival order, and different lanes run side by side on a small
//! pool of workers. A *barrier* (a JSON-RPC batch, whose calls may touch any lane) waits for
//! everything before it and holds back everything after it.
//!
//! The queue is also where backpressure starts: it holds at most [`QueueLimits::jobs`] calls and
//! [`QueueLimits::bytes`] bytes of arguments, and the reader waits for room rather than reading
//! more requests than the workers can take.

use std::collections::{HashSet, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Rounds of busy-waiting (1, 2, 4 … 64 spins) before a worker with nothing to do yields.
const SPIN_ROUNDS: u32 = 7;
/// Rounds in all (the rest yield the processor) before it parks.
const BACKOFF_ROUNDS: u32 = 11;

/// Where a job may run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// With every other job of the same key, one at a time, in arrival order.
    Key(String),
    /// Alone: after every earlier job has finished, before any later one starts.
    Barrier,
}

/// How much the queue holds before the reader has to wait.
#[derive(Clone, Copy, Debug)]
pub struct QueueLimits {
    /// Jobs waiting to run.
    pub jobs: usize,
    /// Bytes of the messages those jobs came from. A single job larger than this is still taken
    /// when the queue is empty, so the limit never refuses a message the framing accepted.
    pub bytes: usize,
}

/// A job taken from the queue; give it back with [`Queue::done`] once it has run.
pub struct Ticket<J> {
    /// The job itself.
    pub job: J,
    lane: Lane,
}

struct Waiting<J> {
    lane: Lane,
    bytes: usize,
    job: J,
}

struct State<J> {
    waiting: VecDeque<Waiting<J>>,
    /// Lanes with a job running now.
    busy: HashSet<String>,
    running: usize,
    barrier_running: bool,
    bytes: usize,
    /// No more jobs will come (end of input): workers leave once the queue is empty.
    closed: bool,
    /// Nothing more will run (the client is gone): waiting jobs were dropped.
    aborted: bool,
    /// Workers blocked in [`Queue::next`] and pushers blocked in [`Queue::push`]: a condition
    /// variable's notify is a system call even with nobody waiting, and on a stream of pipelined
    /// calls three of them per call showed in the time of a small read.
    idle_workers: usize,
    blocked_pushers: usize,
}

/// The bounded, lane-ordered job queue.
pub struct Queue<J> {
    state: Mutex<State<J>>,
    /// Signalled when a job may have become runnable.
    ready: Condvar,
    /// Signalled when room may have become free.
    room: Condvar,
    limits: QueueLimits,
}

impl<J> Queue<J> {
    /// An empty queue with these limits.
    pub fn new(limits: QueueLimits) -> Self {
        Queue {
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                busy: HashSet::new(),
                running: 0,
                barrier_running: false,
                bytes: 0,
                closed: false,
                aborted: false,
                idle_workers: 0,
                blocked_pushers: 0,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            limits,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<J>> {
        // A worker that panicked while holding the lock left the counters as they were before
        // its change; carrying on is safer than taking the whole session down.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a job, waiting for room first. Returns the job back if the queue was aborted.
    pub fn push(&self, lane: Lane, bytes: usize, job: J) -> Result<(), J> {
        let mut state = self.lock();
        let mut blocked = false;
        loop {
            if state.aborted {
                return Err(job);
            }
            let empty = state.waiting.is_empty();
            // Once full, the reader waits until the queue is half empty: waking it for every
            // job taken would cost two system calls per call on a client that pipelines.
            let fits = if blocked {
                self.below_low_water(&state)
            } else {
                state.waiting.len() < self.limits.jobs
                    && state.bytes.saturating_add(bytes) <= self.limits.bytes
            };
            if empty || fits {
                break;
            }
            blocked = true;
            state.blocked_pushers += 1;
            state = self.room.wait(state).unwrap_or_else(|p| p.into_inner());
            state.blocked_pushers -= 1;
        }
        state.bytes = state.bytes.saturating_add(bytes);
        state.waiting.push_back(Waiting { lane, bytes, job });
        let wake = state.idle_workers > 0;
        drop(state);
        if wake {
            self.ready.notify_all();
        }
        Ok(())
    }

    /// The next job that may run now, waiting until there is one; `None` once the queue is closed
    /// and empty, or aborted.
    pub fn next(&self) -> Option<Ticket<J>> {
        let mut state = self.lock();
        // A client pipelining small calls keeps the worker just ahead of the reader: parking on
        // the condition variable at every call (and being woken) cost two system calls per call,
        // a fifth of a small read. Spinning, then yielding, a little first catches the next call
        // as it arrives; a worker with really nothing to do parks within microseconds.
        let mut backoff = 0u32;
        loop {
            if state.aborted {
                return None;
            }
            if let Some(i) = runnable(&state) {
                let Some(w) = state.waiting.remove(i) else {
                    continue;
                };
                state.bytes = state.bytes.saturating_sub(w.bytes);
                state.running += 1;
                match &w.lane {
                    Lane::Key(k) => {
                        state.busy.insert(k.clone());
                    }
                    Lane::Barrier => state.barrier_running = true,
                }
                let wake = state.blocked_pushers > 0 && self.below_low_water(&state);
                drop(state);
                if wake {
                    self.room.notify_all();
                }
                return Some(Ticket {
                    job: w.job,
                    lane: w.lane,
                });
            }
            if state.closed && state.waiting.is_empty() {
                return None;
            }
            if backoff < BACKOFF_ROUNDS {
                drop(state);
                if backoff < SPIN_ROUNDS {
                    for _ in 0..(1u32 << backoff) {
                        std::hint::spin_loop();
                    }
                } else {
                    std::thread::yield_now();
                }
                backoff += 1;
                state = self.lock();
                continue;
            }
            state.idle_workers += 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.idle_workers -= 1;
        }
    }

    /// True when a reader that found the queue full may go on: half of it has drained.
    fn below_low_water(&self, state: &State<J>) -> bool {
        state.waiting.len() <= self.limits.jobs / 2 && state.bytes <= self.limits.bytes / 2
    }

    /// Marks a job finished, freeing its lane.
    pub fn done(&self, ticket: Ticket<J>) {
        let mut state = self.lock();
        state.running = state.running.saturating_sub(1);
        match &ticket.lane {
            Lane::Key(k) => {
                state.busy.remove(k);
            }
            Lane::Barrier => state.barrier_running = false,
        }
        let wake = state.idle_workers > 0;
        drop(state);
        if wake {
            self.ready.notify_all();
        }
    }

    /// True when no job is waiting (a worker uses it to decide whether to hold its reply for
    /// company or send it at once).
    pub fn is_idle(&self) -> bool {
        self.lock().waiting.is_empty()
    }

    /// No more jobs will be pushed: workers finish what is queued, then leave.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Drops every waiting job and wakes everyone: the client is gone, so nothing more runs.
    pub fn abort(&self) {
        let dropped = {
            let mut state = self.lock();
            state.aborted = true;
            state.bytes = 0;
            std::mem::take(&mut state.waiting)
        };
        drop(dropped);
        self.ready.notify_all();
        self.room.notify_all();
    }
}

/// The index of the first waiting job that may start now.
fn runnable<J>(state: &State<J>) -> Option<usize> {
    if state.barrier_running {
        return None;
    }
    // Lanes that already have an earlier job waiting: a later job of the same lane must not
    // overtake it.
    let mut held: HashSet<&str> = HashSet::new();
    for (i, w) in state.waiting.iter().enumerate() {
        match &w.lane {
            Lane::Barrier => {
                return (i == 0 && state.running == 0).then_some(i);
            }
            Lane::Key(k) => {
                if state.busy.contains(k) || held.contains(k.as_str()) {
                    held.insert(k);
                    continue;
                }
                return Some(i);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;
    use std::time::Duration;

    fn limits() -> QueueLimits {
        QueueLimits {
            jobs: 8,
            bytes: 1000,
        }
    }

    fn key(k: &str) -> Lane {
        Lane::Key(k.into())
    }

    #[test]
    fn a_lane_runs_one_job_at_a_time_in_order_while_other_lanes_pass() {
        let q = Queue::new(limits());
        for (lane, job) in [("a", 1), ("a", 2), ("b", 3), ("a", 4), ("b", 5)] {
            assert!(q.push(key(lane), 1, job).is_ok());
        }
        let first = q.next().expect("a1");
        assert_eq!(first.job, 1);
        // a is busy: the next runnable job is b's first, not a's second.
        let second = q.next().expect("b3");
        assert_eq!(second.job, 3);
        q.done(first);
        assert_eq!(q.next().map(|t| t.job), Some(2));
    }

    #[test]
    fn a_barrier_waits_for_earlier_jobs_and_holds_back_later_ones() {
        let q = Queue::new(limits());
        assert!(q.push(key("a"), 1, 1).is_ok());
        assert!(q.push(Lane::Barrier, 1, 2).is_ok());
        assert!(q.push(key("b"), 1, 3).is_ok());
        let a = q.next().expect("a");
        {
            let state = q.lock();
            assert_eq!(
                runnable(&state),
                None,
                "barrier must wait for a; b behind it"
            );
        }
        q.done(a);
        let barrier = q.next().expect("barrier");
        assert_eq!(barrier.job, 2);
        assert_eq!(runnable(&q.lock()), None);
        q.done(barrier);
        assert_eq!(q.next().map(|t| t.job), Some(3));
    }

    #[test]
    fn push_waits_for_room_and_abort_releases_everyone() {
        let q = Arc::new(Queue::new(QueueLimits { jobs: 1, bytes: 10 }));
        assert!(q.push(key("a"), 1, 1).is_ok());
        let pusher = {
            let q = q.clone();
            thread::spawn(move || q.push(key("a"), 1, 2))
        };
        thread::sleep(Duration::from_millis(50));
        assert!(
            !pusher.is_finished(),
            "a full queue must make the pusher wait"
        );
        q.abort();
        assert_eq!(pusher.join().ok(), Some(Err(2)));
        assert!(q.next().is_none());
    }

    #[test]
    fn an_oversized_job_is_taken_when_the_queue_is_empty_and_close_drains() {
        let q = Queue::new(limits());
        assert!(q.push(key("a"), 5000, 1).is_ok());
        q.close();
        let t = q.next().expect("job");
        q.done(t);
        assert!(q.next().is_none());
    }
}
