//! What every writing tool checks before it touches a path, and the race-free primitives they
//! share: refusing anything but a regular file, creating directories one component at a time
//! beneath the root without following symlinks, and opening files through the guard.

use std::fs::File;
use std::io;
use std::path::Path;

use rustix::fs::FileType;

use super::error::FsError;
use super::FsContext;
use workspace::guard::{display_relative, PathGuard, Resolved};
use workspace::{is_swap, Stat};

/// Names a non-regular file type the way the model should read it.
pub fn kind_name(meta: &Stat) -> &'static str {
    match meta.kind {
        FileType::Symlink => "a symbolic link",
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::BlockDevice | FileType::CharacterDevice => "a device",
        _ => "a regular file",
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
    let resolved = cx.guard.resolve_for_change(path)?;
    if resolved.is_root() {
        return Err(FsError::InvalidArgument(
            "the workspace root is a directory, not a file; name a file inside it".into(),
        ));
    }
    let existing_mode = match inspect(&cx.guard, &resolved)? {
        None => None,
        Some(meta) if meta.is_file() => Some(meta.mode),
        Some(meta) => {
            let hint = if meta.is_symlink() {
                "writes never go through symbolic links; write to the file it points to by its real path, or delete the link first"
            } else if meta.is_dir() {
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
pub fn inspect(guard: &PathGuard, resolved: &Resolved) -> Result<Option<Stat>, FsError> {
    match guard.workspace().stat(&resolved.relative) {
        Ok(meta) => Ok(meta),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Err(FsError::AlreadyExists(format!(
            "a parent of '{}' is a file, so nothing can be created below it; choose another path",
            resolved.display()
        ))),
        Err(e) => Err(io_error("cannot inspect", &resolved.relative, e)),
    }
}

/// An error naming the root-relative path, never the host's absolute path. A path that changed
/// into a symlink while the call ran is a `PathEscape`: the call was refused, not broken.
pub fn io_error(what: &str, relative: &Path, e: io::Error) -> FsError {
    if is_swap(&e) {
        return FsError::PathEscape(format!("'{}': {e}", display_relative(relative)));
    }
    FsError::IoError(format!("{what} '{}': {e}", display_relative(relative)))
}

/// Creates the directory `relative` and every missing parent through the workspace layer (one
/// component at a time, relative to its parent's descriptor, never through a symlink). Returns
/// true when anything was created.
pub fn make_dirs(
    store: &workspace::history::Store,
    lock: &workspace::history::StoreLock,
    relative: &Path,
) -> Result<bool, FsError> {
    store
        .create_dirs(lock, relative)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => FsError::AlreadyExists(format!(
                "a part of '{}' already exists and is not a directory ({e}); choose another path or move it away first",
                display_relative(relative)
            )),
            io::ErrorKind::NotADirectory => FsError::AlreadyExists(format!(
                "a part of '{}' is a file, so nothing can be created inside it; choose another path",
                display_relative(relative)
            )),
            _ => io_error("cannot create directory", relative, e),
        })
}

/// Opens a guarded path for reading, race-free: the workspace layer refuses any symlink and
/// anything outside the root. `O_NONBLOCK` keeps a FIFO from hanging the call before its type is
/// checked.
pub fn open_for_reading(guard: &PathGuard, resolved: &Resolved) -> Result<File, FsError> {
    match guard.workspace().open_read(&resolved.relative) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(not_found(&resolved.relative)),
        Err(e) => Err(io_error("cannot open", &resolved.relative, e)),
    }
}

/// Resolves a client path through the guard and opens it as a regular file, for the tools that
/// read a whole file (`read_text_file`, `read_multiple_files`, `read_media_file`), with its
/// metadata taken from the open descriptor. A directory is refused with `dir_hint` (what to use instead); anything else
/// that is not a regular file is named.
pub fn open_regular_for_reading(
    guard: &PathGuard,
    input: &str,
    dir_hint: &str,
) -> Result<(Resolved, File, std::fs::Metadata), FsError> {
    // Most paths have no symlink on the way: one open is then the whole resolution.
    let (resolved, file) = match guard.open_read_direct(input)? {
        Some(opened) => opened,
        None => {
            let resolved = guard.resolve(input)?;
            let file = open_for_reading(guard, &resolved)?;
            (resolved, file)
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| io_error("cannot inspect", &resolved.relative, e))?;
    if meta.is_dir() {
        return Err(FsError::InvalidArgument(format!(
            "'{}' is a directory; {dir_hint}",
            resolved.display()
        )));
    }
    if !meta.is_file() {
        let stat = workspace::Stat::of(&file)
            .map_err(|e| io_error("cannot inspect", &resolved.relative, e))?;
        return Err(FsError::InvalidArgument(format!(
            "'{}' is {}; only regular files can be read",
            resolved.display(),
            kind_name(&stat)
        )));
    }
    Ok((resolved, file, meta))
}

/// The `NotFound` every tool gives for a missing path.
pub fn not_found(relative: &Path) -> FsError {
    FsError::NotFound(format!(
        "'{}' does not exist; check the name with list_directory or directory_tree, or search_file to find where it went",
        display_relative(relative)
    ))
}

pub use workspace::new_file_mode;

/// Gives the file just written at `resolved` the permission bits `mode`. The store writes
/// through a temporary renamed into place; this puts the intended bits on the result, through
/// the workspace layer, so a link swapped in after the write is never chmod-ed through.
pub fn set_mode(guard: &PathGuard, resolved: &Resolved, mode: u32) -> Result<(), FsError> {
    guard
        .workspace()
        .set_mode(&resolved.relative, mode)
        .map_err(|e| io_error("cannot set permissions of", &resolved.relative, e))
}
