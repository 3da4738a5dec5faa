//! The kernel-enforced fence around pipeline stages (Landlock).
//!
//! The argument policy decides what a stage may touch before it starts; the fence makes the kernel
//! hold the stage to it while it runs. A stage may read the workspace, read and run the system's
//! programs and libraries, and write only regular files in its private scratch directory — not the workspace (the
//! one write, `tee`, is done by the server), not anything outside; it opens no TCP connection and
//! signals no process outside the stage. That covers what the policy cannot see: a symlink
//! swapped in after the policy looked, a file a tool opens on its own, an option the tables got
//! wrong.
//!
//! Kernels without Landlock (before 5.13, or with it disabled) run stages unfenced; the fence
//! says so ([`Fence::enforced`]) and the status line of `--legacy-pipe --help` reports it. Newer
//! rights are used where the kernel has them and left out where it does not.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
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

/// Opens a system path (`SYSTEM_TREES`, `SYSTEM_FILES`, `READABLE_DEVICES`) to name it in a rule;
/// `None` when this system has no such path.
// By name: these are fixed paths of the system, never inside a workspace (whose root the fence
// takes as a descriptor).
#[allow(clippy::disallowed_methods)]
fn system_path(path: &Path) -> Option<PathFd> {
    PathFd::new(path).ok()
}

/// Opens the program file a stage runs, wherever a symlink in the search path leads (e.g.
/// `/usr/local/bin/rg` to `/opt/…`): the file itself, not its directory, so nothing else beside it
/// becomes reachable. `None` when it cannot be found.
// By name: `program` is the absolute path found in the fixed search path at start-up
// (`tools::SEARCH_PATH`), never a path a caller typed, and never inside a workspace.
#[allow(clippy::disallowed_methods)]
fn program_file(program: &Path) -> Option<PathFd> {
    let real = std::fs::canonicalize(program).ok()?;
    PathFd::new(real).ok()
}

/// What a stage may do in its scratch folder: create, read, write and remove regular files —
/// all that `sort`'s spill files need. Nothing there can be run, and no directory, link, FIFO,
/// socket or device can be made, so the folder stays one flat list of files that the server
/// removes in one pass (see `scratch`).
fn scratch_rights() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_all(ABI_WANTED)
        & !(AccessFs::Execute
            | AccessFs::MakeDir
            | AccessFs::MakeSym
            | AccessFs::MakeFifo
            | AccessFs::MakeSock
            | AccessFs::MakeChar
            | AccessFs::MakeBlock)
}

/// A fence failed to be built; the pipeline is not run unfenced because of it.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The kernel refused to create or fill the ruleset.
    #[error("cannot set up the Landlock fence for pipeline stages: {0}")]
    Ruleset(#[from] landlock::RulesetError),
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
    ///
    /// The workspace and the scratch folder are named by the descriptors the server already holds,
    /// never by their paths: a root renamed away and replaced by a symlink since it was opened
    /// cannot widen the fence to wherever the link points.
    pub fn new(
        workspace: BorrowedFd<'_>,
        scratch: BorrowedFd<'_>,
        programs: &[&Path],
    ) -> Result<Fence, FenceError> {
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
            .add_rule(PathBeneath::new(workspace, read))?
            .add_rule(PathBeneath::new(scratch, scratch_rights()))?;
        // Missing system paths (no /lib32 here, no /etc/ld.so.preload there) are simply skipped.
        for tree in SYSTEM_TREES {
            if let Some(fd) = system_path(Path::new(tree)) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, run))?;
            }
        }
        for program in programs {
            if let Some(fd) = program_file(program) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, run))?;
            }
        }
        for file in SYSTEM_FILES {
            if let Some(fd) = system_path(Path::new(file)) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, read))?;
            }
        }
        for device in READABLE_DEVICES {
            let access = if device == "/dev/null" {
                AccessFs::ReadFile | AccessFs::WriteFile
            } else {
                AccessFs::ReadFile.into()
            };
            if let Some(fd) = system_path(Path::new(device)) {
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

/// Fences the calling process: no_new_privs, the Landlock ruleset `fd` ([`Fence::handle`];
/// `None` on a kernel without Landlock), then the filter that keeps it from starting processes
/// ([`forbid_new_processes`]). Meant for the child side of a spawn, between `fork` and `exec`: it
/// only makes system calls on integers and on memory prepared before the fork.
pub fn enter(fd: Option<RawFd>) -> std::io::Result<()> {
    // Landlock and seccomp require no_new_privs (or CAP_SYS_ADMIN); it also keeps set-user-ID
    // programs from gaining privileges, which no stage needs.
    // SAFETY: prctl and the landlock_restrict_self system call take plain integers and touch no
    // memory of ours; both are async-signal-safe.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let Some(fd) = fd {
            if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    forbid_new_processes()
}

/// The seccomp filter of [`forbid_new_processes`], written for the architectures whose system
/// call numbers it names.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod bpf {
    /// A classic-BPF instruction whose jumps name labels, resolved by [`assemble`].
    #[derive(Clone, Copy)]
    pub enum Op {
        /// Load the 32-bit word at this offset of `struct seccomp_data`.
        Load(u32),
        /// Jump to the first label when the accumulator equals the value, else to the second.
        IfEq(u32, Label, Label),
        /// Jump to the first label when the accumulator is at least the value.
        IfAtLeast(u32, Label, Label),
        /// Jump to the first label when the accumulator has any of these bits.
        IfAnyBit(u32, Label, Label),
        /// Return this action.
        Return(u32),
        /// Here is this label.
        Mark(Label),
    }

    /// Jump targets of the filter.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub enum Label {
        Next,
        Allow,
        Clone,
        NoSys,
        Refuse,
    }

    /// Offsets into `struct seccomp_data`: the system call number, the architecture, and the low
    /// half of the first argument (both supported architectures are little-endian).
    const SECCOMP_NR: u32 = 0;
    const SECCOMP_ARCH: u32 = 4;
    const SECCOMP_ARG0_LOW: u32 = 16;

    /// `AUDIT_ARCH_*` of the architecture the filter is written for (not exported by `libc`).
    #[cfg(target_arch = "x86_64")]
    const NATIVE_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const NATIVE_ARCH: u32 = 0xC000_00B7;

    /// The filter program: `clone` only with `CLONE_THREAD` (threads, which `rg`, `fd` and `sort`
    /// use), `clone3` answered "not implemented" (its flags are in memory a filter cannot read; libc
    /// then falls back to `clone`), `fork` and `vfork` refused, and on x86-64 every x32 system call
    /// and any other architecture's refused too.
    pub fn program() -> Vec<Op> {
        let nr = |n: libc::c_long| n as u32;
        let mut ops = vec![
            Op::Load(SECCOMP_ARCH),
            Op::IfEq(NATIVE_ARCH, Label::Next, Label::Refuse),
            Op::Load(SECCOMP_NR),
        ];
        #[cfg(target_arch = "x86_64")]
        ops.extend([
            Op::IfAtLeast(0x4000_0000, Label::Refuse, Label::Next),
            Op::IfEq(nr(libc::SYS_fork), Label::Refuse, Label::Next),
            Op::IfEq(nr(libc::SYS_vfork), Label::Refuse, Label::Next),
        ]);
        ops.extend([
            Op::IfEq(nr(libc::SYS_clone), Label::Clone, Label::Next),
            Op::IfEq(nr(libc::SYS_clone3), Label::NoSys, Label::Allow),
            Op::Mark(Label::Clone),
            Op::Load(SECCOMP_ARG0_LOW),
            Op::IfAnyBit(libc::CLONE_THREAD as u32, Label::Allow, Label::Refuse),
            Op::Mark(Label::Allow),
            Op::Return(libc::SECCOMP_RET_ALLOW),
            Op::Mark(Label::NoSys),
            Op::Return(libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
            Op::Mark(Label::Refuse),
            Op::Return(libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        ]);
        ops
    }

    /// Turns labelled operations into BPF instructions with relative jumps.
    pub fn assemble(ops: &[Op]) -> Vec<libc::sock_filter> {
        let mut at = Vec::new();
        let mut index = 0u8;
        for op in ops {
            match op {
                Op::Mark(label) => at.push((*label, index)),
                _ => index += 1,
            }
        }
        let target = |label: Label, pc: u8| -> u8 {
            match label {
                Label::Next => 0,
                other => {
                    let to = at.iter().find(|(l, _)| *l == other).map_or(pc, |(_, i)| *i);
                    to - pc - 1
                }
            }
        };
        let jump = |code: u32, k: u32, t: Label, f: Label, pc: u8| libc::sock_filter {
            code: (libc::BPF_JMP | code | libc::BPF_K) as u16,
            jt: target(t, pc),
            jf: target(f, pc),
            k,
        };
        let mut out = Vec::new();
        for op in ops {
            let pc = out.len() as u8;
            let insn = match *op {
                Op::Mark(_) => continue,
                Op::Load(offset) => libc::sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: offset,
                },
                Op::IfEq(k, t, f) => jump(libc::BPF_JEQ, k, t, f, pc),
                Op::IfAtLeast(k, t, f) => jump(libc::BPF_JGE, k, t, f, pc),
                Op::IfAnyBit(k, t, f) => jump(libc::BPF_JSET, k, t, f, pc),
                Op::Return(action) => libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: action,
                },
            };
            out.push(insn);
        }
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn every_jump_lands_forward_inside_the_program() {
            let filter = assemble(&program());
            let ops = program()
                .iter()
                .filter(|op| !matches!(op, Op::Mark(_)))
                .count();
            assert_eq!(filter.len(), ops);
            let jumps = filter
                .iter()
                .enumerate()
                .filter(|(_, i)| u32::from(i.code) & 0x07 == libc::BPF_JMP);
            for (pc, insn) in jumps {
                let last = pc + 1 + usize::from(insn.jt.max(insn.jf));
                assert!(last < filter.len(), "instruction {pc} jumps past the end");
            }
            let ret = (libc::BPF_RET | libc::BPF_K) as u16;
            assert_eq!(filter.last().map(|i| i.code), Some(ret));
        }
    }
}

/// The assembled filter, built once in the server by [`prepare`]; a forked child only points
/// the kernel at it.
static FILTER: std::sync::OnceLock<Vec<libc::sock_filter>> = std::sync::OnceLock::new();

/// True when stages are kept from starting processes on this machine's architecture (for status
/// lines).
pub fn forbids_new_processes() -> bool {
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
}

/// Builds the filter of [`forbid_new_processes`] ahead of a fork (it allocates, once).
pub fn prepare() {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    FILTER.get_or_init(|| bpf::assemble(&bpf::program()));
}

/// Keeps the calling process from creating processes: no allowed command needs to (the argument
/// policy refuses every option that would run a program), so a stage that tries is refused by the
/// kernel (`EPERM`). Threads stay allowed. This is the process limit of a stage: `RLIMIT_NPROC`
/// counts the user's processes and threads machine-wide, so it cannot bound one stage (see
/// `limits`). Needs no_new_privs; [`prepare`] must have run before the fork. A kernel built
/// without seccomp filters (`EINVAL`) runs the stage without it, as one without Landlock runs
/// it unfenced.
pub fn forbid_new_processes() -> std::io::Result<()> {
    if !forbids_new_processes() {
        return Ok(());
    }
    let Some(filter) = FILTER.get() else {
        return Err(std::io::Error::other(
            "the process filter was not prepared before the fork",
        ));
    };
    let program = libc::sock_fprog {
        len: filter.len() as libc::c_ushort,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: the kernel copies the program from `program`, which points at a static the fork
    // copied; nothing is allocated or freed here.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &program as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
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
