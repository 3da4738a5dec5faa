//! The test hook that kills the process between two writes of a multi-step store operation, so
//! the crash tests can stop a conversion, move, delete or restore at every one of its writes in
//! turn, deterministically, instead of hoping a timed kill lands there.
//!
//! With [`STOP_AFTER_ENV`] set to `OP:N` (`convert`, `move`, `delete`, `restore`, `write` or `revert`, then a
//! count), the process SIGKILLs itself right after the Nth change to the disk made by operations
//! of kind `OP` (the finishing of one a crash cut short included), counted from the start of the
//! process. `OP:N:park` parks the process there instead (it sleeps, holding the store lock,
//! until it is killed), so a test can have a real server hold the lock mid-operation by
//! construction. Without the variable every [`Steps::done`] is one relaxed load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Test hook: `OP:N` makes the process SIGKILL itself after the Nth write of operations `OP`;
/// `OP:N:park` makes it sleep there until it is killed.
pub const STOP_AFTER_ENV: &str = "FILESYSTEM_TEST_STOP_AFTER";

/// The kinds of operation whose writes the hook counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Converting a store from the previous layout.
    Convert,
    /// `Store::rename`, and finishing one cut short.
    Move,
    /// `Store::trash`, and finishing one cut short.
    Delete,
    /// `Store::restore`, and finishing one cut short.
    Restore,
    /// `Store::write` (every whole-file write: write_file, edit_file, append_file, a copy's
    /// files): once its versions are recorded, once the file is replaced.
    Write,
    /// A revert of operations from the operation log: one count per path put back.
    Revert,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Convert => "convert",
            Op::Move => "move",
            Op::Delete => "delete",
            Op::Restore => "restore",
            Op::Write => "write",
            Op::Revert => "revert",
        }
    }
}

/// What the hook does once the count is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Kill,
    Park,
}

/// The operation, count and action the environment asked for, read once.
fn plan() -> Option<(Op, u64, Then)> {
    static PLAN: OnceLock<Option<(Op, u64, Then)>> = OnceLock::new();
    *PLAN.get_or_init(|| {
        let text = std::env::var(STOP_AFTER_ENV).ok()?;
        let mut parts = text.split(':');
        let op = parts.next()?;
        let op = [
            Op::Convert,
            Op::Move,
            Op::Delete,
            Op::Restore,
            Op::Write,
            Op::Revert,
        ]
        .into_iter()
        .find(|o| o.name() == op)?;
        let n = parts.next()?.parse().ok()?;
        let then = match parts.next() {
            None => Then::Kill,
            Some("park") => Then::Park,
            Some(_) => return None,
        };
        Some((op, n, then))
    })
}

/// Writes counted so far of the planned operation kind, in this process.
static DONE: AtomicU64 = AtomicU64::new(0);

/// The writes of one operation of kind `op`, reported to the hook one by one.
#[derive(Debug, Clone, Copy)]
pub struct Steps(Op);

impl Steps {
    /// The steps of an operation of kind `op`.
    pub fn new(op: Op) -> Steps {
        Steps(op)
    }

    /// One change to the disk was made; the process dies here if the hook says so.
    pub fn done(self) {
        let Some((op, n, then)) = plan() else {
            return;
        };
        if op != self.0 {
            return;
        }
        if DONE.fetch_add(1, Ordering::Relaxed) + 1 != n {
            return;
        }
        if then == Then::Park {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        {
            // SIGKILL, exactly what the crash tests simulate: no destructor, no flush.
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            std::process::abort();
        }
    }
}
