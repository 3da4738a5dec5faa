//! The files a user names, looked at by name: the study file given on the command line, and the
//! task directories, fixtures, prompts and programs it names. They are the user's own inputs,
//! read once when the study is loaded (the fixtures are then copied through descriptors, see
//! [`crate::run::copy`]); nothing here touches a trial's workspace or the run's output, which
//! are only ever reached through the run directory's descriptor. This module is the one place
//! of the crate that opens by name, so each site is visible and argued for.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What is at a named path (following links, as the user's own paths may).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// Anything else (a FIFO, a device, a socket).
    Other,
}

/// The canonical form of a path the user named.
pub fn canonical(path: &Path) -> io::Result<PathBuf> {
    // By name: a path of the user's study file, resolved once at load.
    #[allow(clippy::disallowed_methods)]
    let real = std::fs::canonicalize(path);
    real
}

/// What is at a path the user named.
pub fn kind(path: &Path) -> io::Result<Kind> {
    // By name: a path of the user's study file, looked at once at load.
    #[allow(clippy::disallowed_methods)]
    let meta = std::fs::metadata(path)?;
    Ok(if meta.is_dir() {
        Kind::Dir
    } else if meta.is_file() {
        Kind::File
    } else {
        Kind::Other
    })
}

/// Reads at most `limit + 1` bytes of the regular file the user named at `path` (so a caller
/// can tell one over its limit). Opened without blocking and refused unless it is a regular
/// file: a FIFO named as a study file or prompt fails at once instead of hanging the load.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    // By name: the study file on the command line, or a prompt it names, read once at load.
    #[allow(clippy::disallowed_methods)]
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    read_file(file, limit)
}

/// Reads at most `limit + 1` bytes of an opened regular file.
pub fn read_file(file: File, limit: u64) -> io::Result<Vec<u8>> {
    workspace::require_regular(&file)?;
    let mut out = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut out)?;
    Ok(out)
}

/// True when `path` is a regular file someone may execute: what `exec` needs of a program.
pub fn is_executable(path: &Path) -> bool {
    // By name: a program the study file names, looked up as `exec` will look it up.
    #[allow(clippy::disallowed_methods)]
    let meta = std::fs::metadata(path);
    meta.is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
