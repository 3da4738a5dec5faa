//! Racing a server: a [`Swapper`] thread that exchanges two names as fast as it can, helpers that
//! work in a directory by descriptor whatever name it has at the moment, a [`Tally`] of outcomes
//! and the [`Goal`] it must reach before a race may end, the [`Turns`] two racing sessions hand
//! over with, and how long races run.
//!
//! A race ends on what it has seen, not on the clock alone: it keeps going until every raced
//! operation has succeeded, and been refused, [`MIN_EACH`] times (so each was both done and hit
//! by the race), for at least [`race_duration`], and gives up only at [`race_cap`], which a
//! working machine, however loaded, does not reach.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags, RenameFlags};

/// How long each race runs: `FILESYSTEM_RACE_SECS` (fractions allowed), else two seconds.
pub fn race_duration() -> Duration {
    std::env::var("FILESYSTEM_RACE_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(2), Duration::from_secs_f64)
}

/// How many times each raced operation must have succeeded, and each refusal been seen, before a
/// race may end.
pub const MIN_EACH: u64 = 5;

/// The longest a race keeps going to reach its [`Goal`]: its duration plus a minute. A race that
/// needs that long is not unlucky but broken (an operation that can never succeed under it, a
/// swapper that never runs), and fails naming what it did not see.
pub fn race_cap() -> Duration {
    race_duration() + Duration::from_secs(60)
}

/// Successes and failures per operation, to show a race loop did real work: an operation that
/// never succeeded proves nothing about what a success could have done.
#[derive(Default, Debug)]
pub struct Tally {
    counts: BTreeMap<String, (u64, u64)>,
    last_refusal: BTreeMap<String, String>,
}

impl Tally {
    /// Counts one outcome of `op`.
    pub fn record(&mut self, op: &str, ok: bool) {
        let c = self.counts.entry(op.to_string()).or_default();
        if ok {
            c.0 += 1;
        } else {
            c.1 += 1;
        }
    }

    /// Counts one outcome of `op` and keeps the text of its latest refusal, so a race that never
    /// sees a success can say why (a tool missing from the machine, say).
    pub fn record_reply(&mut self, op: &str, ok: bool, text: &str) {
        self.record(op, ok);
        if !ok {
            let shown: String = text.chars().take(300).collect();
            self.last_refusal.insert(op.to_string(), shown);
        }
    }

    /// How often `op` succeeded.
    pub fn successes(&self, op: &str) -> u64 {
        self.counts.get(op).map_or(0, |c| c.0)
    }

    /// How often `op` failed (was refused).
    pub fn refusals(&self, op: &str) -> u64 {
        self.counts.get(op).map_or(0, |c| c.1)
    }
}

/// What a race must have seen before it may end: operations that must each have succeeded
/// [`MIN_EACH`] times (a success is what a redirection would have been), and of those the raced
/// ones must each have been refused [`MIN_EACH`] times, too (a refusal shows the race hit that
/// operation, not only ran beside it).
#[derive(Debug, Clone, Default)]
pub struct Goal {
    succeed: Vec<String>,
    refuse: Vec<String>,
}

impl Goal {
    /// Every operation in `ops` must both succeed and be refused [`MIN_EACH`] times.
    pub fn raced(ops: &[&str]) -> Goal {
        Goal::default().and_raced(ops)
    }

    /// Adds operations that must both succeed and be refused.
    pub fn and_raced(mut self, ops: &[&str]) -> Goal {
        self.succeed.extend(ops.iter().map(|s| s.to_string()));
        self.refuse.extend(ops.iter().map(|s| s.to_string()));
        self
    }

    /// Adds operations that must succeed (those the race cannot refuse, such as reading what a
    /// raced move brought to the top).
    pub fn and_succeeded(mut self, ops: &[&str]) -> Goal {
        self.succeed.extend(ops.iter().map(|s| s.to_string()));
        self
    }

    /// What is still missing in `tally`, one line per shortfall (empty once the goal is met).
    pub fn missing(&self, tally: &Tally) -> Vec<String> {
        let short_ok = self
            .succeed
            .iter()
            .filter(|op| tally.successes(op) < MIN_EACH)
            .map(|op| {
                let why = tally
                    .last_refusal
                    .get(op.as_str())
                    .map_or(String::new(), |t| format!(" (last refusal: {t})"));
                format!("'{op}' succeeded only {} times{why}", tally.successes(op))
            });
        let short_refused = self
            .refuse
            .iter()
            .filter(|op| tally.refusals(op) < MIN_EACH)
            .map(|op| format!("'{op}' was refused only {} times", tally.refusals(op)));
        short_ok.chain(short_refused).collect()
    }

    /// True once every operation reached its count.
    pub fn met(&self, tally: &Tally) -> bool {
        self.succeed
            .iter()
            .all(|op| tally.successes(op) >= MIN_EACH)
            && self.refuse.iter().all(|op| tally.refusals(op) >= MIN_EACH)
    }

    /// Fails unless the goal was met, naming each shortfall and the whole tally.
    pub fn assert_met(&self, tally: &Tally) {
        let missing = self.missing(tally);
        assert!(
            missing.is_empty(),
            "the race ended at its cap of {:?} without seeing each operation succeed and be \
             refused {MIN_EACH} times, so it proved nothing about: {}; tally (ok, refused): {:?}",
            race_cap(),
            missing.join(", "),
            tally.counts
        );
    }
}

/// Opens a directory (never through a link) so the test can keep working in it by descriptor,
/// whatever name it has at the moment.
pub fn open_dir(path: &Path) -> OwnedFd {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .expect("open dir")
}

/// True when `name` exists in the directory `dir` (not following a link).
pub fn exists_at(dir: &OwnedFd, name: &str) -> bool {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok()
}

/// Creates or replaces the regular file `name` in `dir` with `content`, by descriptor.
pub fn write_at(dir: &OwnedFd, name: &str, content: &[u8]) {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .expect("create file by descriptor");
    rustix::io::write(&fd, content).expect("write by descriptor");
}

/// A thread that exchanges two names in one directory (`renameat2(RENAME_EXCHANGE)`) as fast as
/// it can, counting the exchanges that happened; it stops and is joined when dropped.
pub struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Swapper {
    /// Starts exchanging `a` and `b` inside `dir`.
    pub fn start(dir: &Path, a: &str, b: &str) -> Swapper {
        Swapper::start_paced(dir, a, b, None)
    }

    /// Like [`Swapper::start`], but after every `burst` of exchanges it puts the names back as
    /// they started and rests for the same time. For a racer that is a whole process (a CLI
    /// subcommand walks the path many times): under nonstop exchanges it may never get through,
    /// and a race with no success proves nothing. With rests, runs that start in a burst and end
    /// in a rest succeed while they were raced.
    pub fn start_with_rests(dir: &Path, a: &str, b: &str, burst: Duration) -> Swapper {
        Swapper::start_paced(dir, a, b, Some(burst))
    }

    fn start_paced(dir: &Path, a: &str, b: &str, burst: Option<Duration>) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let dir_fd = open_dir(dir);
        let (a, b) = (a.to_string(), b.to_string());
        let thread = {
            let (stop, swaps, failures) = (stop.clone(), swaps.clone(), failures.clone());
            std::thread::spawn(move || {
                let exchange = || {
                    match rustix::fs::renameat_with(
                        &dir_fd,
                        a.as_str(),
                        &dir_fd,
                        b.as_str(),
                        RenameFlags::EXCHANGE,
                    ) {
                        Ok(()) => swaps.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failures.fetch_add(1, Ordering::Relaxed),
                    };
                };
                let mut burst_start = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    exchange();
                    // Leave the server a share of the CPU on a small machine.
                    std::thread::yield_now();
                    if let Some(burst) = burst {
                        if burst_start.elapsed() >= burst {
                            if swaps.load(Ordering::Relaxed) % 2 == 1 {
                                exchange();
                            }
                            std::thread::sleep(burst);
                            burst_start = Instant::now();
                        }
                    }
                }
                // Leave the names as they started, so later checks find the directory.
                if swaps.load(Ordering::Relaxed) % 2 == 1 {
                    let _ = rustix::fs::renameat_with(
                        &dir_fd,
                        a.as_str(),
                        &dir_fd,
                        b.as_str(),
                        RenameFlags::EXCHANGE,
                    );
                }
            })
        };
        Swapper {
            stop,
            swaps,
            failures,
            thread: Some(thread),
        }
    }

    /// How many exchanges it made so far.
    pub fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }

    /// Stops the thread and returns how many exchanges it made.
    pub fn finish(mut self) -> u64 {
        self.halt();
        self.swaps.load(Ordering::Relaxed)
    }

    /// Stops, then fails unless the exchanges really happened (at least `min`).
    pub fn finish_checked(self, min: u64) -> u64 {
        let failures = self.failures.load(Ordering::Relaxed);
        let swaps = self.finish();
        assert!(
            swaps >= min,
            "the swapper made only {swaps} exchanges ({failures} failed), so the race proved nothing"
        );
        swaps
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("swapper thread");
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Runs `step` with a rising counter until it reports its goal met (by returning true) after at
/// least [`race_duration`], or until [`race_cap`]; returns how many rounds ran. The caller then
/// asserts its goal, which fails if the cap ended the race.
pub fn until_met(mut step: impl FnMut(u64) -> bool) -> u64 {
    let start = Instant::now();
    let (least, cap) = (race_duration(), race_cap());
    let mut i = 0;
    loop {
        let met = step(i);
        i += 1;
        let elapsed = start.elapsed();
        if (met && elapsed >= least) || elapsed >= cap {
            return i;
        }
    }
}

/// The hand-over between two racing sessions: a mover that steps a name through states (a link
/// to the outside, a real directory, absent) and a raider that works through that name. Neither
/// waits for the other to finish a call, so their calls overlap; the hand-over only makes sure
/// each side gets through by construction instead of by luck:
///
/// - after each step, the mover waits until a raid that *started* after the step has finished,
///   so the raider sees every state at least once whole (and its calls that straddle a step
///   race it);
/// - in a state the raider's own call would undo (a move that creates the missing name the
///   mover is about to fill), the raider rests between calls, each rest twice the last, until
///   the mover has stepped, so the mover's next step gets a window however slow the machine.
#[derive(Default)]
pub struct Turns {
    steps: AtomicU64,
    raids_started: AtomicU64,
    raids_done: AtomicU64,
    stop: AtomicBool,
}

impl Turns {
    /// A hand-over before the first step, shared by both sides.
    pub fn new() -> Arc<Turns> {
        Arc::new(Turns::default())
    }

    /// How many steps the mover has made.
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::SeqCst)
    }

    /// Tells both sides to stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// True once [`Turns::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The mover made a step: waits (until stopped, or [`race_cap`]) for a raid that starts
    /// after it to finish.
    pub fn stepped(&self) {
        let after = self.raids_started.load(Ordering::SeqCst);
        self.steps.fetch_add(1, Ordering::SeqCst);
        let cap = Instant::now() + race_cap();
        while self.raids_done.load(Ordering::SeqCst) <= after && !self.stopped() {
            if Instant::now() > cap {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Runs one raid, so the mover can tell it started and finished.
    pub fn raid<T>(&self, call: impl FnOnce() -> T) -> T {
        let n = self.raids_started.fetch_add(1, Ordering::SeqCst) + 1;
        let out = call();
        self.raids_done.store(n, Ordering::SeqCst);
        out
    }

    /// The raider rests `rest` (then twice as long next time), or less if the mover steps past
    /// `step` first; returns the next rest.
    pub fn rest_until_step_after(&self, step: u64, rest: Duration) -> Duration {
        let end = Instant::now() + rest;
        while self.steps() == step && !self.stopped() && Instant::now() < end {
            std::thread::sleep(Duration::from_micros(200));
        }
        (rest * 2).min(race_cap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goal_needs_every_success_and_every_refusal_it_names() {
        let goal = Goal::raced(&["raced"]).and_succeeded(&["read"]);
        let mut tally = Tally::default();
        for _ in 0..MIN_EACH {
            tally.record("raced", true);
            tally.record("read", true);
        }
        assert!(!goal.met(&tally), "no refusal of 'raced' was seen yet");
        assert_eq!(goal.missing(&tally).len(), 1);
        for _ in 1..MIN_EACH {
            tally.record_reply("raced", false, "NotFound: d is a link");
        }
        assert!(!goal.met(&tally), "one refusal short");
        tally.record("raced", false);
        assert!(goal.met(&tally));
        assert!(goal.missing(&tally).is_empty());
        // A read that is never refused does not hold the goal back.
        assert_eq!(tally.refusals("read"), 0);
    }

    #[test]
    fn a_goal_short_of_successes_says_why_the_operation_was_refused() {
        let goal = Goal::raced(&["rg over d"]);
        let mut tally = Tally::default();
        tally.record_reply("rg over d", false, "'rg' is allowed but not installed");
        let missing = goal.missing(&tally).join("; ");
        assert!(missing.contains("succeeded only 0 times"), "{missing}");
        assert!(missing.contains("not installed"), "{missing}");
    }
}
