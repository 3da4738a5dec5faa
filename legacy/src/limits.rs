//! The bounds of one pipeline: how many stages it may have, what each stage's process may use,
//! and how a stage that ran into one of them is recognised afterwards.
//!
//! Decisions worth knowing:
//!
//! - **Memory is `RLIMIT_DATA`, not `RLIMIT_AS`.** Since Linux 4.7 the data limit counts every
//!   private writable mapping (heap, anonymous `mmap`, thread stacks), which is what a runaway
//!   stage grows. The address-space limit also counts reservations that use no memory: glibc
//!   reserves 64 MiB of address space for each per-thread malloc arena (up to eight per core), so
//!   under a 1 GiB `RLIMIT_AS` `rg -j 64` and `fd -j 64` already panicked at start-up on a 2-core
//!   machine, and the defaults would on a 16-core one, while under `RLIMIT_DATA` they ran. Both
//!   stopped `awk 'BEGIN{s="x"; while(1) s = s s}'` the same way ("cannot allocate … memory").
//!   The stack is bounded separately (`RLIMIT_STACK`, never above the memory limit).
//! - **No `RLIMIT_NPROC`.** It counts every process *and thread* of the user across the machine
//!   (and root ignores it), so a value small enough to matter would make `rg`/`fd` fail to start
//!   their threads whenever the user runs many programs. Stages instead cannot create processes
//!   at all: the fence's system-call filter refuses `fork`, `vfork` and `clone` without
//!   `CLONE_THREAD` (see [`super::fence`]), and no allowed command needs to.
//! - **Scratch files count.** A stage writes only to its private `HOME`/`TMPDIR`, which is in the
//!   system temporary directory — often a RAM-backed tmpfs. Each file there is bounded by
//!   `RLIMIT_FSIZE`, and the runner also sums the folder while the pipeline runs; both use the
//!   memory limit as their bound.
//! - **CPU time is a backstop.** The wall clock is kept by the server, which kills the whole
//!   group at the call's deadline. `RLIMIT_CPU` (the wall-clock limit times the number of cores,
//!   plus a margin) only matters if the server cannot do that, e.g. while it is stopped.
//! - **Nothing to restore.** Every limit is set in the child between `fork` and `exec` on its
//!   own process, hard and soft alike, so a stage cannot raise it again.

use std::io;
use std::time::Duration;

use rustix::process::{
    getppid, getrlimit, set_parent_process_death_signal, setrlimit, Pid, Resource, Rlimit, Signal,
};

/// Most stages in one pipeline. A pipeline is a few commands an agent types; 32 is plenty, and
/// every stage is a process, two pipes and a descriptor in the server while the call runs.
pub const MAX_STAGES: usize = 32;

/// The default memory limit of each stage (`--stage-memory`): 1 GiB.
pub const DEFAULT_STAGE_MEMORY: u64 = 1 << 30;

/// The smallest `--stage-memory` accepted (other than 0, no limit): below this the dynamic
/// loader and libc of the smallest stage cannot start.
pub const MIN_STAGE_MEMORY: u64 = 16 << 20;

/// Seconds added to the CPU-time backstop, so that it can never fire before the wall clock.
const CPU_MARGIN_SECS: u64 = 5;

/// The process limits of every stage of a pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageLimits {
    /// Bytes of writable private memory (`RLIMIT_DATA`); also caps `RLIMIT_STACK`. `None`: none.
    pub memory: Option<u64>,
    /// Bytes in any one file a stage writes (`RLIMIT_FSIZE`), and in its scratch folder in all.
    pub scratch: Option<u64>,
    /// Seconds of CPU time (`RLIMIT_CPU`); SIGXCPU at this, SIGKILL a little later.
    pub cpu_secs: Option<u64>,
}

impl StageLimits {
    /// The limits for a memory bound (`None`: no memory or scratch limit) and a wall-clock limit
    /// of the whole pipeline (`None`: no CPU backstop either).
    pub fn new(memory: Option<u64>, wall_clock: Option<Duration>) -> StageLimits {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        StageLimits {
            memory,
            scratch: memory,
            cpu_secs: wall_clock.map(|t| {
                (t.as_secs() + 1)
                    .saturating_mul(cores)
                    .saturating_add(CPU_MARGIN_SECS)
            }),
        }
    }

    /// The values the child sets, computed before the fork so that the child's side is only
    /// `setrlimit` calls.
    pub fn prepare(&self) -> PreparedLimits {
        let stack = self.memory.map(|m| {
            let current = getrlimit(Resource::Stack);
            let cur = current.current.map_or(m, |c| c.min(m));
            let max = current.maximum.map_or(m, |c| c.min(m)).max(cur);
            (cur, max)
        });
        PreparedLimits {
            data: self.memory,
            stack,
            fsize: self.scratch,
            cpu: self.cpu_secs,
            parent: rustix::process::getpid(),
        }
    }
}

/// What the child of a spawn applies to itself: plain integers only.
#[derive(Clone, Copy, Debug)]
pub struct PreparedLimits {
    data: Option<u64>,
    stack: Option<(u64, u64)>,
    fsize: Option<u64>,
    cpu: Option<u64>,
    /// The server's process id, to see whether it died before the death signal was armed.
    parent: Pid,
}

/// Sets both the soft and the hard limit, so the stage cannot raise it again.
fn set(resource: Resource, current: u64, maximum: u64) -> io::Result<()> {
    let limit = Rlimit {
        current: Some(current),
        maximum: Some(maximum),
    };
    Ok(setrlimit(resource, limit)?)
}

/// Applies `limits` to the calling process and ties its life to the server's. Meant for the
/// child side of a spawn, between `fork` and `exec`: it only makes system calls on integers
/// (rustix calls the kernel directly and allocates nothing).
///
/// The death signal (`PR_SET_PDEATHSIG`, SIGKILL) is sent when the *thread* that forked the
/// stage ends, not only when the server's process does. That is right here: a pipeline is run
/// to its end — every stage killed and reaped — by the thread that started it (a server worker
/// thread, for as long as the call lasts), which therefore outlives its stages unless the whole
/// server dies, and then the kernel kills them whatever ended the server (SIGKILL, or SIGTERM
/// and SIGINT, whose default action ends the process). It survives `exec` (stages are never
/// set-user-ID, and the fence sets no_new_privs). If the server died between the fork and
/// arming the signal, the child has already been handed to another parent and would never get
/// it, so the parent is checked once more afterwards.
pub fn enter(limits: &PreparedLimits) -> io::Result<()> {
    set_parent_process_death_signal(Some(Signal::KILL))?;
    if getppid() != Some(limits.parent) {
        return Err(io::Error::other(
            "the server exited while the stage was starting",
        ));
    }
    // No core files: a crashed stage's memory holds workspace data, and its directory is the
    // workspace.
    set(Resource::Core, 0, 0)?;
    if let Some(data) = limits.data {
        set(Resource::Data, data, data)?;
    }
    if let Some((cur, max)) = limits.stack {
        set(Resource::Stack, cur, max)?;
    }
    if let Some(fsize) = limits.fsize {
        set(Resource::Fsize, fsize, fsize)?;
    }
    if let Some(cpu) = limits.cpu {
        set(Resource::Cpu, cpu, cpu.saturating_add(CPU_MARGIN_SECS))?;
    }
    Ok(())
}

/// Which limit stopped a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The memory limit (`--stage-memory`), or the kernel's out-of-memory killer.
    Memory,
    /// The size of a scratch file, or of the scratch folder.
    FileSize,
    /// A stage tried to start a process, or could not start a thread.
    Processes,
    /// The CPU-time backstop.
    Time,
}

impl Limit {
    /// The `limit` field of a `RESOURCE_LIMIT` error.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Memory => "memory",
            Limit::FileSize => "file size",
            Limit::Processes => "processes",
            Limit::Time => "time",
        }
    }

    /// What happened, for the error's detail.
    pub fn what(self, memory: Option<u64>) -> String {
        let bound = memory.map_or("its limit".to_string(), |m| {
            format!("{} per stage", show(m))
        });
        match self {
            Limit::Memory => format!("it ran out of memory ({bound})"),
            Limit::FileSize => format!("its scratch files grew past {bound}"),
            Limit::Processes => {
                "it tried to start a process or a thread it may not (stages may not start processes; each thread's stack counts against the memory limit)".into()
            }
            Limit::Time => "it used more CPU time than the call's time limit allows".into(),
        }
    }

    /// What to do instead, for the error's suggestion.
    pub fn suggestion(self) -> &'static str {
        match self {
            Limit::Memory => {
                "Work on less data at once: narrow the input first (head, tail -n, a more specific rg pattern or path), and avoid programs that build ever-growing strings or arrays; or restart the server with a larger --stage-memory."
            }
            Limit::FileSize => {
                "Narrow the input before sort (rg, head, tail -n, awk filters) so it sorts in memory, or restart the server with a larger --stage-memory."
            }
            Limit::Processes => "Use fewer threads (-j 4) and no option that runs other programs.",
            Limit::Time => {
                "Narrow the input (head, tail -n, a more specific rg pattern or path) and run it again."
            }
        }
    }
}

/// How a stage's process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageEnd {
    /// It exited with this status.
    Exited(i32),
    /// A signal ended it.
    Signaled(i32),
}

impl StageEnd {
    /// The shell's spelling: the status, or `128 + signal`.
    pub fn code(self) -> i32 {
        match self {
            StageEnd::Exited(code) => code,
            StageEnd::Signaled(signal) => 128 + signal,
        }
    }
}

/// Messages with which the allowed commands report a failed allocation: gnulib's `xalloc_die`
/// (coreutils, sed, sort), gawk, jq, Rust's allocation-failure handler (rg, fd), glibc's
/// `strerror(ENOMEM)`.
const OUT_OF_MEMORY: [&str; 6] = [
    "memory exhausted",
    "cannot allocate",
    "couldn't allocate",
    "couldn't re-allocate",
    "out of memory",
    "memory allocation of",
];

/// Which limit, if any, ended a stage that ended as `end` with `stderr`, which the server did
/// not kill itself (`killed_by_us` false). A heuristic for the exit-status cases: a stage whose
/// allocation failed reports it on stderr and exits non-zero (or aborts); one whose stack could
/// not grow dies of SIGSEGV. A genuine crash under the limit is reported as the limit, which at
/// worst suggests raising it.
pub fn classify(
    end: StageEnd,
    stderr: &str,
    killed_by_us: bool,
    limits: &StageLimits,
) -> Option<Limit> {
    if killed_by_us || end == StageEnd::Exited(0) {
        return None;
    }
    let lower = stderr.to_ascii_lowercase();
    let reports = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    match end {
        StageEnd::Signaled(libc::SIGXFSZ) => Some(Limit::FileSize),
        StageEnd::Signaled(libc::SIGXCPU) => Some(Limit::Time),
        // A SIGKILL the server did not send: the kernel's out-of-memory killer (the CPU
        // backstop's hard limit comes only after a SIGXCPU the allowed commands do not catch).
        // A SIGSEGV: a stack or heap that could not grow.
        StageEnd::Signaled(libc::SIGKILL) | StageEnd::Signaled(libc::SIGSEGV) => {
            Some(Limit::Memory)
        }
        _ if reports(&["failed to spawn", "cannot fork", "couldn't fork"]) => {
            Some(Limit::Processes)
        }
        _ if limits.memory.is_some() && reports(&OUT_OF_MEMORY) => Some(Limit::Memory),
        _ => None,
    }
}

/// A byte count the way `--stage-memory` accepts it back (`512M`, `1G`).
pub fn show(bytes: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("T", 40), ("G", 30), ("M", 20), ("K", 10)];
    for (unit, shift) in UNITS {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// Parses `--stage-memory`: bytes, or a number with a binary suffix `K`, `M`, `G`, `T` (also
/// `KiB`, `MB`, …: all are powers of 1024); `0` turns the limit off.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let number: u64 = number.parse().map_err(|_| {
        format!("'{text}' is not a size: use bytes or a number with K, M or G (e.g. 512M, 1G)")
    })?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => {
            return Err(format!(
                "'{text}' has an unknown unit: use K, M or G (e.g. 512M, 1G)"
            ))
        }
    };
    let bytes = number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))?;
    if bytes != 0 && bytes < MIN_STAGE_MEMORY {
        return Err(format!(
            "'{text}' is too small for any stage to start: use at least {} (or 0 for no limit)",
            show(MIN_STAGE_MEMORY)
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("512mib"), Ok(512 << 20));
        assert_eq!(parse_size("33554432"), Ok(32 << 20));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("1K").is_err(), "too small");
        assert!(parse_size("1.5G").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(show(1 << 30), "1G");
        assert_eq!(show(768 << 20), "768M");
        assert_eq!(show(1000), "1000 bytes");
    }

    #[test]
    fn a_stage_is_blamed_on_a_limit_only_by_its_own_signs() {
        let limits = StageLimits::new(Some(1 << 30), Some(Duration::from_secs(30)));
        let awk = "awk: cmd. line:1: fatal: cannot allocate 1073741825 bytes of memory";
        assert_eq!(
            classify(StageEnd::Exited(2), awk, false, &limits),
            Some(Limit::Memory)
        );
        assert_eq!(classify(StageEnd::Exited(2), awk, true, &limits), None);
        assert_eq!(
            classify(StageEnd::Signaled(libc::SIGXFSZ), "", false, &limits),
            Some(Limit::FileSize)
        );
        assert_eq!(
            classify(StageEnd::Signaled(libc::SIGXCPU), "", false, &limits),
            Some(Limit::Time)
        );
        assert_eq!(
            classify(StageEnd::Signaled(libc::SIGKILL), "", false, &limits),
            Some(Limit::Memory)
        );
        assert_eq!(
            classify(
                StageEnd::Exited(101),
                "thread 'main' panicked at 'failed to spawn scoped thread'",
                false,
                &limits
            ),
            Some(Limit::Processes)
        );
        // A plain failure, and a SIGPIPE, are not limits.
        assert_eq!(
            classify(
                StageEnd::Exited(2),
                "sort: cannot read: x: No such file",
                false,
                &limits
            ),
            None
        );
        assert_eq!(
            classify(StageEnd::Signaled(libc::SIGPIPE), "", false, &limits),
            None
        );
    }
}
