//! What every writing tool checks before it touches a path, and the race-free primitives they
//! share: refusing anything but a regular file, creating directories one component at a time
//! beneath the root without following symlinks, and opening files through the guard.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use super::error::FsError;
use super::FsContext;
use crate::guard::{display_relative, PathGuard, Resolved};

/// Names a non-regular file type the way the model should read it.
pub fn kind_name(meta: &Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device"
    } else {
        "a regular file"
    }
}

/// A path a writing tool may replace: it passed the guard without following a final symlink,
/// and what is there now (if anything) is a regular file.
pub struct WriteTarget {
    /// The guarded path (a final symlink is the link itself, never its target).
    pub resolved: Resolved,
    /// The permission bits of the file being replaced, or `None` for a new file.
    pub existing_mode: Option<u32>,
}

/// Checks `path` for writing. A symlink, directory, FIFO, socket or device at the path is
/// refused: writing through a link could reach a file the caller did not name, and the others
/// cannot hold the content.
pub fn writable(cx: &FsContext, path: &str) -> Result<WriteTarget, FsError> {
    let resolved = cx.guard.resolve_no_follow(path)?;
    if resolved.is_root() {
        return Err(FsError::InvalidArgument(
            "the workspace root is a directory, not a file; name a file inside it".into(),
        ));
    }
    let existing_mode = match inspect(&resolved)? {
        None => None,
        Some(meta) if meta.file_type().is_file() => Some(meta.permissions().mode() & 0o7777),
        Some(meta) => {
            let hint = if meta.file_type().is_symlink() {
                "writes never go through symbolic links; write to the file it points to by its real path, or delete the link first"
            } else if meta.file_type().is_dir() {
                "name a file inside it instead"
            } else {
                "only regular files can be written"
            };
            return Err(FsError::InvalidArgument(format!(
                "'{}' is {}; {hint}",
                resolved.display(),
                kind_name(&meta)
            )));
        }
    };
    Ok(WriteTarget {
        resolved,
        existing_mode,
    })
}

/// What is at a guarded path now, without following a final symlink: `None` when nothing is.
/// A file where one of the parents should be a directory is `AlreadyExists`, because nothing
/// can be created below it.
pub fn inspect(resolved: &Resolved) -> Result<Option<Metadata>, FsError> {
    match std::fs::symlink_metadata(&resolved.path) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Err(FsError::AlreadyExists(format!(
            "a parent of '{}' is a file, so nothing can be created below it; choose another path",
            resolved.display()
        ))),
        Err(e) => Err(io_error("cannot inspect", &resolved.relative, e)),
    }
}

/// An `IoError` naming the root-relative path, never the host's absolute path.
pub fn io_error(what: &str, relative: &Path, e: io::Error) -> FsError {
    FsError::IoError(format!("{what} '{}': {e}", display_relative(relative)))
}

/// A guarded path for a root-relative prefix the caller built itself (every component of it
/// has already been resolved by the guard).
fn prefix(guard: &PathGuard, relative: &Path) -> Resolved {
    Resolved {
        path: guard.root().join(relative),
        relative: relative.to_path_buf(),
    }
}

/// Creates the directory `relative` and every missing parent, one component at a time relative
/// to a handle on its parent that the kernel opened without following any symlink. A component
/// that exists must be a real directory. Returns true when anything was created.
pub fn make_dirs(guard: &PathGuard, relative: &Path) -> Result<bool, FsError> {
    let mut done = PathBuf::new();
    let mut created = false;
    for component in relative.components() {
        let parent = guard
            .open_beneath(
                &prefix(guard, &done),
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
                true,
            )
            .map_err(|e| dir_error(&done, e))?;
        let name = component.as_os_str();
        done.push(name);
        match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o777)) {
            Ok(()) => created = true,
            Err(rustix::io::Errno::EXIST) => {
                let stat = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(|e| io_error("cannot inspect", &done, e.into()))?;
                match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
                    rustix::fs::FileType::Directory => {}
                    rustix::fs::FileType::Symlink => {
                        return Err(FsError::InvalidArgument(format!(
                            "'{}' is a symbolic link; directories are never created through links, use the real path",
                            display_relative(&done)
                        )))
                    }
                    _ => {
                        return Err(FsError::AlreadyExists(format!(
                            "'{}' already exists and is not a directory; choose another path or move it away first",
                            display_relative(&done)
                        )))
                    }
                }
            }
            Err(e) => return Err(io_error("cannot create directory", &done, e.into())),
        }
    }
    Ok(created)
}

fn dir_error(relative: &Path, e: io::Error) -> FsError {
    if e.raw_os_error() == Some(libc::ENOTDIR) {
        FsError::AlreadyExists(format!(
            "'{}' is a file, so nothing can be created inside it; choose another path",
            display_relative(relative)
        ))
    } else if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::EXDEV) {
        FsError::PathEscape(format!(
            "'{}' changed into a symbolic link while the call ran; nothing was written",
            display_relative(relative)
        ))
    } else {
        io_error("cannot open directory", relative, e)
    }
}

/// Opens a guarded path for reading, race-free: the kernel refuses any symlink and anything
/// outside the root. `O_NONBLOCK` keeps a FIFO from hanging the call before its type is checked.
pub fn open_for_reading(guard: &PathGuard, resolved: &Resolved) -> Result<File, FsError> {
    match guard.open_beneath(
        resolved,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
        true,
    ) {
        Ok(fd) => Ok(File::from(fd)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(not_found(&resolved.relative)),
        Err(e)
            if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::EXDEV) =>
        {
            Err(FsError::PathEscape(format!(
                "'{}' changed into a symbolic link while the call ran; try again",
                resolved.display()
            )))
        }
        Err(e) => Err(io_error("cannot open", &resolved.relative, e)),
    }
}

/// The `NotFound` every tool gives for a missing path.
pub fn not_found(relative: &Path) -> FsError {
    FsError::NotFound(format!(
        "'{}' does not exist; check the name with list_directory or directory_tree, or search_file to find where it went",
        display_relative(relative)
    ))
}

/// The permission bits a new file gets: what `open(2)` would give with mode 0666 under this
/// process's umask. Read once from `/proc` because `umask(2)` can only be read by setting it,
/// which would race with other threads.
pub fn new_file_mode() -> u32 {
    static MODE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| {
        let umask = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o022);
        0o666 & !umask
    })
}

/// Gives the file just written at `resolved` the permission bits `mode`. The store writes
/// through a temporary file (private, 0600) renamed into place, which would otherwise lose the
/// old file's mode. Opened through the guard without following links, so a link swapped in
/// after the write is never chmod-ed through.
pub fn set_mode(guard: &PathGuard, resolved: &Resolved, mode: u32) -> Result<(), FsError> {
    let failed = |e: io::Error| io_error("cannot set permissions of", &resolved.relative, e);
    // A path handle can be inspected even when the bits deny reading, so a store that already
    // kept the mode is never second-guessed.
    let handle = guard
        .open_beneath(resolved, OFlags::PATH, Mode::empty(), true)
        .map_err(failed)?;
    let stat = rustix::fs::fstat(&handle).map_err(|e| failed(e.into()))?;
    if stat.st_mode & 0o7777 == mode {
        return Ok(());
    }
    let fd = guard
        .open_beneath(
            resolved,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
            true,
        )
        .map_err(failed)?;
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| failed(e.into()))
}
