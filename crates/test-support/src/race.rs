//! Racing a server: a [`Swapper`] thread that exchanges two names as fast as it can, helpers that
//! work in a directory by descriptor whatever name it has at the moment, a [`Tally`] that shows a
//! race did real work, and how long races run.

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

/// Successes and failures per operation, to show a race loop did real work: an operation that
/// never succeeded proves nothing about what a success could have done.
#[derive(Default, Debug)]
pub struct Tally {
    counts: BTreeMap<String, (u64, u64)>,
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

    /// How often `op` succeeded.
    pub fn successes(&self, op: &str) -> u64 {
        self.counts.get(op).map_or(0, |c| c.0)
    }

    /// Fails unless every operation in `ops` succeeded at least once.
    pub fn assert_each_succeeded(&self, ops: &[&str]) {
        for op in ops {
            assert!(
                self.successes(op) > 0,
                "'{op}' never succeeded, so the race proved nothing about it: {:?}",
                self.counts
            );
        }
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

/// Runs `step` with a rising counter until `duration` has passed (at least once).
pub fn for_duration(duration: Duration, mut step: impl FnMut(u64)) -> u64 {
    let end = Instant::now() + duration;
    let mut i = 0;
    loop {
        step(i);
        i += 1;
        if Instant::now() >= end {
            return i;
        }
    }
}
