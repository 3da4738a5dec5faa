//! Opening a root-relative path beneath the root's directory descriptor without following any
//! symbolic link, on every kernel.
//!
//! Every path this layer is handed has already passed the guard, which splices symlinks out of
//! it: what is left names real directories and a final entry. So the layer may refuse *every*
//! symlink it meets: one that is there now was swapped in after the check, and following it is
//! exactly the redirection an attacker racing the server wants. `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` makes the kernel enforce that
//! in one call. Where `openat2` is missing (Linux before 5.6, seccomp filters that deny it), the
//! same guarantee comes from a walk that opens one component at a time with `O_NOFOLLOW`
//! relative to the previous one; the path never holds `..`, so the walk cannot climb out either.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU8, Ordering};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Set to any value to make the layer use the per-component walk even where `openat2` exists:
/// how the fallback is tested, and a way out on a system whose filter breaks `openat2` in a way
/// the detection cannot see.
pub const NO_OPENAT2_ENV: &str = "FILESYSTEM_NO_OPENAT2";

const UNKNOWN: u8 = 0;
const HAVE: u8 = 1;
const MISSING: u8 = 2;

/// Whether `openat2` works here, learned on first use.
static OPENAT2: AtomicU8 = AtomicU8::new(UNKNOWN);

/// How paths are opened beneath the root on this system: the kernel's `openat2`, or the
/// per-component `O_NOFOLLOW` walk. For `--help` and the README's security model.
pub fn resolution_method() -> &'static str {
    if openat2_usable() {
        "openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)"
    } else if std::env::var_os(NO_OPENAT2_ENV).is_some() {
        "a per-component O_NOFOLLOW walk (chosen by FILESYSTEM_NO_OPENAT2)"
    } else {
        "a per-component O_NOFOLLOW walk (openat2 is not available here)"
    }
}

fn openat2_usable() -> bool {
    match OPENAT2.load(Ordering::Relaxed) {
        HAVE => true,
        MISSING => false,
        _ => {
            let usable = std::env::var_os(NO_OPENAT2_ENV).is_none()
                && !matches!(
                    rustix::fs::openat2(
                        rustix::fs::CWD,
                        ".",
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                        Mode::empty(),
                        ResolveFlags::BENEATH,
                    ),
                    Err(Errno::NOSYS) | Err(Errno::PERM)
                );
            OPENAT2.store(if usable { HAVE } else { MISSING }, Ordering::Relaxed);
            usable
        }
    }
}

/// Why an operation was refused when a symlink turned up on a path the guard had checked: it
/// was swapped in after the check (by another session or another process). Nothing was done.
#[derive(Debug, thiserror::Error)]
#[error("a part of the path is a symbolic link where a real directory or file was checked (swapped in while the call ran, or planted); nothing was done, so try again, or remove the link if it stays")]
pub struct Swapped;

/// The error every refused component becomes (see [`Swapped`]).
pub fn swapped() -> io::Error {
    io::Error::other(Swapped)
}

/// True when `e` is a [`Swapped`] refusal, so callers can report it as a confinement refusal
/// rather than an I/O failure.
pub fn is_swap(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Swapped>())
}

/// True for an error [`open_beneath`] produced because of a symlink on the way.
fn is_link_refusal(e: Errno) -> bool {
    e == Errno::LOOP || e == Errno::XDEV
}

/// The components of a root-relative path, all plain names; anything else (`..`, a root, a
/// prefix) is refused rather than trusted.
pub fn plain_components(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "'{}' is not a plain path relative to the workspace root",
                    rel.display()
                ),
            )),
        })
        .collect()
}

/// Opens `rel` (root-relative, plain) beneath `root` with `flags`, refusing any symlink on the
/// way and at the end. An empty path opens the root itself.
pub fn open_beneath(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let names = plain_components(rel)?;
    let flags = flags | OFlags::CLOEXEC;
    if openat2_usable() {
        let target: &Path = if names.is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_SYMLINKS;
        // The kernel answers EAGAIN when a rename elsewhere raced the lookup; a retry is cheap.
        for _ in 0..8 {
            match rustix::fs::openat2(root, target, flags, mode, resolve) {
                Err(Errno::AGAIN) | Err(Errno::INTR) => continue,
                Err(e) if is_link_refusal(e) => return Err(swapped()),
                other => return other.map_err(io::Error::from),
            }
        }
        return Err(io::Error::from(Errno::AGAIN));
    }
    walk(root, &names, flags, mode)
}

/// The fallback: one `openat(O_NOFOLLOW)` per component, each relative to the last.
fn walk(root: BorrowedFd<'_>, names: &[&OsStr], flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let Some((last, dirs)) = names.split_last() else {
        return Ok(rustix::fs::openat(root, ".", flags, mode)?);
    };
    let mut held: Option<OwnedFd> = None;
    for name in dirs {
        let at = held.as_ref().map_or(root, |fd| fd.as_fd());
        let next = rustix::fs::openat(
            at,
            *name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refusal(at, name, e))?;
        held = Some(next);
    }
    let at = held.as_ref().map_or(root, |fd| fd.as_fd());
    let fd = rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW, mode)
        .map_err(|e| refusal(at, last, e))?;
    // `O_PATH | O_NOFOLLOW` opens a final symlink itself instead of failing; openat2 refuses it.
    if flags.contains(OFlags::PATH) {
        let stat = rustix::fs::fstat(&fd)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Symlink {
            return Err(swapped());
        }
    }
    Ok(fd)
}

/// Turns an `O_NOFOLLOW` failure into the same answer openat2 gives: `ELOOP` (or `ENOTDIR` for a
/// symlink where a directory was wanted) is a swap; anything else is what it says. The walk and
/// [`crate::Dir::open`] both answer through it.
pub(crate) fn refusal(at: BorrowedFd<'_>, name: &OsStr, e: Errno) -> io::Error {
    if e == Errno::LOOP {
        return swapped();
    }
    if e == Errno::NOTDIR && not_a_dir_was_swapped(at, name) {
        return swapped();
    }
    e.into()
}

/// After an open of `name` as a directory, without following links, failed with `ENOTDIR`:
/// true when what is there now is a symlink or a directory. A symlink is the swap itself; a
/// directory means the entry was exchanged between the open and this look, since a directory
/// does not fail that open. Only a file (or another non-directory) that stays is a real
/// `ENOTDIR`. Looking once more can never tell a swap that was undone from a file, so the
/// look errs on the side of the swap.
fn not_a_dir_was_swapped(at: BorrowedFd<'_>, name: &OsStr) -> bool {
    use rustix::fs::FileType;
    rustix::fs::statat(at, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
        matches!(
            FileType::from_raw_mode(st.st_mode),
            FileType::Symlink | FileType::Directory
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_plain_paths_are_refused() {
        for bad in ["../x", "/etc", "a/../b"] {
            assert!(plain_components(Path::new(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            plain_components(Path::new("./a/b")).expect("plain"),
            vec![OsStr::new("a"), OsStr::new("b")]
        );
    }

    /// An `ENOTDIR` whose entry is a directory by the time it is looked at was exchanged in
    /// between (the race a swapper wins between the open and the look): a swap, as a link is;
    /// only a file that stays a file is a real `ENOTDIR`.
    #[test]
    fn a_not_a_directory_is_a_swap_unless_a_file_is_there() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path();
        std::fs::create_dir(root.join("d")).expect("mkdir");
        std::fs::write(root.join("f"), "x").expect("write");
        std::os::unix::fs::symlink("d", root.join("l")).expect("link");
        let fd =
            rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).expect("root");
        for (name, swap) in [("d", true), ("l", true), ("f", false), ("gone", false)] {
            assert_eq!(
                not_a_dir_was_swapped(fd.as_fd(), OsStr::new(name)),
                swap,
                "{name}"
            );
        }
        let err = refusal(fd.as_fd(), OsStr::new("f"), Errno::NOTDIR);
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
        assert!(is_swap(&refusal(
            fd.as_fd(),
            OsStr::new("d"),
            Errno::NOTDIR
        )));
    }

    #[test]
    fn both_resolvers_refuse_every_symlink_and_open_real_paths() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path();
        std::fs::create_dir_all(root.join("d/e")).expect("mkdir");
        std::fs::write(root.join("d/e/f"), "x").expect("write");
        std::os::unix::fs::symlink("d", root.join("l")).expect("link");
        std::os::unix::fs::symlink("f", root.join("d/e/lf")).expect("link");
        let fd =
            rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).expect("root");
        let real: Vec<&OsStr> = ["d", "e", "f"].iter().map(OsStr::new).collect();
        assert!(walk(fd.as_fd(), &real, OFlags::RDONLY, Mode::empty()).is_ok());
        for bad in [vec!["l", "e", "f"], vec!["d", "e", "lf"], vec!["l"]] {
            let names: Vec<&OsStr> = bad.iter().map(OsStr::new).collect();
            for flags in [
                OFlags::RDONLY,
                OFlags::PATH,
                OFlags::PATH | OFlags::DIRECTORY,
            ] {
                let err = walk(fd.as_fd(), &names, flags, Mode::empty()).expect_err("refused");
                assert_eq!(err.kind(), io::ErrorKind::Other, "{bad:?}: {err}");
            }
            let rel: std::path::PathBuf = bad.iter().collect();
            assert!(open_beneath(fd.as_fd(), &rel, OFlags::RDONLY, Mode::empty()).is_err());
        }
        assert!(open_beneath(
            fd.as_fd(),
            Path::new("d/e/f"),
            OFlags::RDONLY,
            Mode::empty()
        )
        .is_ok());
        assert!(open_beneath(fd.as_fd(), Path::new(""), OFlags::PATH, Mode::empty()).is_ok());
    }
}
