//! The kernel-enforced fence around pipeline stages (Landlock).
//!
//! The argument policy decides what a stage may touch before it starts; the fence makes the kernel
//! hold the stage to it while it runs. A stage may read the workspace, read and run the system's
//! programs and libraries, and write only its private scratch directory — not the workspace (the
//! one write, `tee`, is done by the server), not anything outside; it opens no TCP connection and
//! signals no process outside the stage. That covers what the policy cannot see: a symlink
//! swapped in after the policy looked, a file a tool opens on its own, an option the tables got
//! wrong.
//!
//! Kernels without Landlock (before 5.13, or with it disabled) run stages unfenced; the fence
//! says so ([`Fence::enforced`]) and the status line of `--legacy-pipe --help` reports it. Newer
//! rights are used where the kernel has them and left out where it does not.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

/// The newest Landlock ABI whose rights the fence asks for; older kernels get what they have.
const ABI_WANTED: ABI = ABI::V6;

/// System trees stages may read and execute from: programs, their libraries and shared data.
const SYSTEM_TREES: [&str; 6] = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"];

/// Single files outside those trees that ordinary programs read: the loader cache, user and
/// group names (`ls -l`), the local time zone (`ls -l` dates).
const SYSTEM_FILES: [&str; 7] = [
    "/etc/ld.so.cache",
    "/etc/ld.so.preload",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/alternatives",
];

/// Devices a stage may open: reading the null and random devices, writing the null one.
const READABLE_DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];

/// A fence failed to be built; the pipeline is not run unfenced because of it.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The kernel refused to create or fill the ruleset.
    #[error("cannot set up the Landlock fence for pipeline stages: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// The workspace or the scratch directory could not be opened to name it in a rule.
    #[error("cannot set up the Landlock fence for pipeline stages: {0}")]
    Path(#[from] landlock::PathFdError),
}

/// A Landlock ruleset ready to be applied in each stage's process before it runs its program.
pub struct Fence {
    /// `None` when the kernel has no Landlock: stages then run unfenced.
    ruleset: Option<OwnedFd>,
}

impl Fence {
    /// The fence for one pipeline run: `workspace` readable, `scratch` (the run's private
    /// directory, its `HOME` and `TMPDIR`) fully usable, the system's programs and the run's own
    /// `programs` (wherever a symlink in the search path leads, e.g. `/usr/local/bin/rg` to
    /// `/opt/…`) readable and executable, everything else out of reach.
    pub fn new(workspace: &Path, scratch: &Path, programs: &[&Path]) -> Result<Fence, FenceError> {
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        let run = read | AccessFs::Execute;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(ABI_WANTED))?
            .handle_access(AccessNet::from_all(ABI_WANTED))?
            // No signals to processes outside the stage (the server, the client, the user's other
            // programs) and no abstract UNIX sockets (a session bus, an X server), from ABI 6.
            .scope(Scope::from_all(ABI_WANTED))?
            .create()?
            .add_rule(PathBeneath::new(PathFd::new(workspace)?, read))?
            .add_rule(PathBeneath::new(
                PathFd::new(scratch)?,
                AccessFs::from_all(ABI_WANTED),
            ))?;
        // Missing system paths (no /lib32 here, no /etc/ld.so.preload there) are simply skipped.
        for tree in SYSTEM_TREES {
            if let Ok(fd) = PathFd::new(tree) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, run))?;
            }
        }
        for program in programs {
            // The file itself, not its directory: nothing else beside it becomes reachable.
            let Ok(real) = std::fs::canonicalize(program) else {
                continue;
            };
            if let Ok(fd) = PathFd::new(real) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, run))?;
            }
        }
        for file in SYSTEM_FILES {
            if let Ok(fd) = PathFd::new(file) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, read))?;
            }
        }
        for device in READABLE_DEVICES {
            let access = if device == "/dev/null" {
                AccessFs::ReadFile | AccessFs::WriteFile
            } else {
                AccessFs::ReadFile.into()
            };
            if let Ok(fd) = PathFd::new(device) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, access))?;
            }
        }
        Ok(Fence {
            ruleset: ruleset.into(),
        })
    }

    /// True when the kernel enforces the fence (it has Landlock).
    pub fn enforced(&self) -> bool {
        self.ruleset.is_some()
    }

    /// What a forked child needs to fence itself: a plain descriptor number, so that
    /// [`enter`] runs without allocating between `fork` and `exec`.
    pub fn handle(&self) -> Option<RawFd> {
        self.ruleset.as_ref().map(AsRawFd::as_raw_fd)
    }
}

/// Fences the calling process with the ruleset `fd` ([`Fence::handle`]). Meant for the child side
/// of a spawn, between `fork` and `exec`: it only makes two system calls.
pub fn enter(fd: RawFd) -> std::io::Result<()> {
    // Landlock requires no_new_privs (or CAP_SYS_ADMIN); it also keeps set-user-ID programs from
    // gaining privileges, which no stage needs.
    // SAFETY: prctl and the landlock_restrict_self system call take plain integers and touch no
    // memory of ours; both are async-signal-safe.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The Landlock ABI version this kernel offers, `None` without Landlock (for status lines).
pub fn kernel_abi() -> Option<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer and this flag the call only reports a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (version > 0).then_some(version)
}
