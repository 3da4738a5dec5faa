//! Durable file-system primitives the store builds on: atomic replacement, directory fsync, and a
//! rename that never overwrites.
//!
//! Crash safety of the whole store reduces to these three: a file is either its old or its new
//! content (temp file in the same directory, fsync, rename, fsync of the directory), and a move
//! never silently replaces what another process put at the destination.

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Makes a directory's entries (creations, renames) durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The name prefix of every temporary file [`replace_file`] creates (beside the file it replaces,
/// in the workspace or in the store). `filesystem check` relies on it to recognise leftovers of
/// an interrupted replacement.
pub(crate) const TEMP_PREFIX: &str = ".filesystem-tmp-";

/// How many random characters the temporary-file library appends to [`TEMP_PREFIX`].
pub(crate) const TEMP_RANDOM_LEN: usize = 6;

/// True when `name` has exactly the shape of a [`replace_file`] temporary: the prefix, then
/// [`TEMP_RANDOM_LEN`] ASCII letters or digits.
pub(crate) fn is_temp_name(name: &[u8]) -> bool {
    match name.strip_prefix(TEMP_PREFIX.as_bytes()) {
        Some(rest) => rest.len() == TEMP_RANDOM_LEN && rest.iter().all(u8::is_ascii_alphanumeric),
        None => false,
    }
}

/// Replaces (or creates) `path` with `content` so that a crash leaves either the old or the new
/// file, never a torn one. `mode` sets the exact permission bits (to keep an overwritten file's
/// mode); `None` gives a new file the usual `0666 & !umask`. With `no_clobber`, anything already
/// at `path` makes this fail with `AlreadyExists` instead of being replaced.
pub(crate) fn replace_file(
    path: &Path,
    content: &[u8],
    mode: Option<u32>,
    no_clobber: bool,
) -> io::Result<()> {
    let dir = parent_of(path)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .rand_bytes(TEMP_RANDOM_LEN)
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    if let Some(bits) = mode {
        tmp.as_file()
            .set_permissions(Permissions::from_mode(bits & 0o7777))?;
    }
    tmp.write_all(content)?;
    tmp.as_file().sync_all()?;
    if no_clobber {
        tmp.persist_noclobber(path).map_err(|e| e.error)?;
    } else {
        tmp.persist(path).map_err(|e| e.error)?;
    }
    sync_dir(dir)
}

/// Renames `from` to `to`, failing with `AlreadyExists` if anything is at `to` — even something
/// another process created a moment ago. Falls back to check-then-rename only on file systems that
/// cannot refuse replacement atomically.
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => {}
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => {
            if std::fs::symlink_metadata(to).is_ok() {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            std::fs::rename(from, to)?;
        }
        Err(e) => return Err(e.into()),
    }
    sync_dir(parent_of(to)?)?;
    let from_dir = parent_of(from)?;
    if from_dir != parent_of(to)? {
        sync_dir(from_dir)?;
    }
    Ok(())
}

/// Creates `dir` and any missing ancestors, syncing each parent so the new entries survive a
/// crash (a snapshot in a directory whose own entry was lost would be lost with it).
pub(crate) fn create_dirs(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    sync_dir(parent_of(dir)?)
}

/// True when something (a file, directory, or even a dangling symlink) is at `path`.
pub(crate) fn occupied(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn parent_of(path: &Path) -> io::Result<&Path> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => Ok(p),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path has no parent directory",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_keeps_requested_mode_and_no_clobber_refuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("f");
        replace_file(&f, b"one", None, true).expect("create");
        assert!(replace_file(&f, b"two", None, true).is_err());
        replace_file(&f, b"two", Some(0o751), false).expect("replace");
        assert_eq!(std::fs::read(&f).expect("read"), b"two");
        let mode = std::fs::metadata(&f).expect("meta").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o751);
    }

    #[test]
    fn rename_no_replace_refuses_an_occupied_destination() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "a").expect("write");
        std::fs::write(&b, "b").expect("write");
        let err = rename_no_replace(&a, &b).expect_err("occupied");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&b).expect("read"), b"b");
    }
}
