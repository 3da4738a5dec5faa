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
        loop {
            if state.aborted {
                return Err(job);
            }
            let empty = state.waiting.is_empty();
            let fits = state.waiting.len() < self.limits.jobs
                && state.bytes.saturating_add(bytes) <= self.limits.bytes;
            if empty || fits {
                break;
            }
            state = self.room.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.bytes = state.bytes.saturating_add(bytes);
        state.waiting.push_back(Waiting { lane, bytes, job });
        drop(state);
        self.ready.notify_all();
        Ok(())
    }

    /// The next job that may run now, waiting until there is one; `None` once the queue is closed
    /// and empty, or aborted.
    pub fn next(&self) -> Option<Ticket<J>> {
        let mut state = self.lock();
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
                drop(state);
                self.room.notify_all();
                return Some(Ticket {
                    job: w.job,
                    lane: w.lane,
                });
            }
            if state.closed && state.waiting.is_empty() {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
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
        drop(state);
        self.ready.notify_all();
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
