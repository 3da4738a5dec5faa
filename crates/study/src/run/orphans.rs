//! What a runner that died left running: on `--resume`, before an unfinished trial runs again,
//! every process still carrying that trial's marker ([`crate::record::TRIAL_MARKER_VAR`]) is
//! killed, so nothing of the earlier attempt writes into the new attempt's fresh workspace.
//!
//! The agent itself dies with the runner (`PR_SET_PDEATHSIG`, see [`super::process`]), but what
//! it started (an MCP server, a shell's background job) is only in its process group, which a
//! dead runner can no longer kill. A recorded group id is no proof of identity (the id can be
//! reused once the group is gone); the marker is: it is in the environment of every process the
//! trial started, unless one cleared its own environment on purpose.

use std::collections::HashSet;
use std::io::Read;
use std::time::Duration;

use rustix::process::{Pid, Signal};

/// How many passes over the process table are made at most (each kills what it found, so a
/// process forking while a pass runs is caught by the next).
const PASSES: usize = 50;
/// The pause between looks at a killed process that has not ended yet.
const PAUSE: Duration = Duration::from_millis(10);
/// How long a killed process is waited for to end (SIGKILL acts when the process next runs;
/// only one stuck in the kernel takes long).
const END_WAIT: Duration = Duration::from_secs(5);
/// The most bytes of one process's environment read.
const MAX_ENVIRON: u64 = 1024 * 1024;

/// Kills every process whose environment holds `VAR=marker` for one of `markers`; returns how
/// many were killed.
pub fn kill_marked(markers: &HashSet<String>) -> usize {
    if markers.is_empty() {
        return 0;
    }
    let wanted: HashSet<Vec<u8>> = markers
        .iter()
        .map(|m| format!("{}={m}", crate::record::TRIAL_MARKER_VAR).into_bytes())
        .collect();
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut killed = 0;
    for _ in 0..PASSES {
        let found: Vec<i32> = processes()
            .into_iter()
            .filter(|&pid| pid != me && carries(pid, &wanted))
            .collect();
        if found.is_empty() {
            break;
        }
        for &pid in &found {
            if let Some(pid) = Pid::from_raw(pid) {
                if rustix::process::kill_process(pid, Signal::KILL).is_ok() {
                    killed += 1;
                }
            }
        }
        // Only a process that has ended (a zombie, or gone) can no longer write: wait for it,
        // so the trial never reruns beside what it kills.
        let until = std::time::Instant::now() + END_WAIT;
        while found.iter().any(|&pid| running(pid)) && std::time::Instant::now() < until {
            std::thread::sleep(PAUSE);
        }
    }
    killed
}

/// True while process `pid` exists and has not ended (a zombie has).
fn running(pid: i32) -> bool {
    // By name: /proc is the kernel's table of processes.
    #[allow(clippy::disallowed_methods)]
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name in parentheses, which may hold anything.
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
}

/// The ids of the processes there are.
fn processes() -> Vec<i32> {
    // By name: /proc is the kernel's table of processes, not a workspace or a file of the run.
    #[allow(clippy::disallowed_methods)]
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// True when process `pid` has one of `wanted` (`VAR=value`) in its environment. A zombie's
/// environment reads empty, so a process already killed is not found again.
fn carries(pid: i32, wanted: &HashSet<Vec<u8>>) -> bool {
    // By name: /proc is the kernel's table of processes (only the runner's own user's
    // processes can be read, which are the only ones it could have started).
    #[allow(clippy::disallowed_methods)]
    let Ok(file) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let mut environ = Vec::new();
    if file.take(MAX_ENVIRON).read_to_end(&mut environ).is_err() {
        return false;
    }
    environ.split(|&b| b == 0).any(|var| wanted.contains(var))
}
