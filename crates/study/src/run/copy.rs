//! The fresh copy of a task's fixture that each trial works in.
//!
//! Symlinks are copied as symlinks and never followed: a fixture that links outside itself
//! must not turn into a copy of whatever the link pointed at (or into a loop). The walk keeps
//! its own stack, so a deep tree costs memory in proportion, never call depth, and every
//! dimension is bounded so a mistaken `fixture = "/"` fails fast instead of filling the disk.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Most entries (files, directories, symlinks) a fixture may hold.
pub const MAX_ENTRIES: u64 = 100_000;
/// Most bytes of file content a fixture may hold.
pub const MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// Deepest directory nesting of a fixture.
pub const MAX_DEPTH: usize = 128;

/// Why a fixture could not be copied (or measured).
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// A read or write failed.
    #[error("{path}: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The fixture holds something other than files, directories and symlinks.
    #[error("the fixture holds {path}, which is neither a file, a directory nor a symlink; remove it from the fixture")]
    Special {
        /// The offending entry.
        path: PathBuf,
    },
    /// The fixture is larger than a bound.
    #[error("the fixture {path} holds more than {limit}; fixtures are small sample workspaces, copied once per trial")]
    TooLarge {
        /// The fixture.
        path: PathBuf,
        /// Which bound, in words.
        limit: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CopyError + '_ {
    move |source| CopyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What the walk found, for its caller.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Entries below the fixture directory.
    pub entries: u64,
    /// Bytes of regular files.
    pub bytes: u64,
}

/// Walks the fixture checking every bound and entry type, copying nothing: the study file's
/// check, so a bad fixture is refused before the first trial.
pub fn measure(fixture: &Path) -> Result<Size, CopyError> {
    walk(fixture, None)
}

/// Copies `fixture` to `dest`, which must not exist. Modes are kept; directories get theirs
/// after their content is in place, so a read-only directory is copied too.
pub fn copy_fixture(fixture: &Path, dest: &Path) -> Result<Size, CopyError> {
    walk(fixture, Some(dest))
}

fn walk(fixture: &Path, dest: Option<&Path>) -> Result<Size, CopyError> {
    let mut size = Size::default();
    let mut dir_modes: Vec<(PathBuf, u32)> = Vec::new();
    if let Some(dest) = dest {
        fs::create_dir(dest).map_err(io_err(dest))?;
        let mode = fs::metadata(fixture)
            .map_err(io_err(fixture))?
            .permissions()
            .mode();
        dir_modes.push((dest.to_path_buf(), mode));
    }
    let mut stack: Vec<(PathBuf, Option<PathBuf>, usize)> =
        vec![(fixture.to_path_buf(), dest.map(Path::to_path_buf), 0)];
    let too_large = |limit: String| CopyError::TooLarge {
        path: fixture.to_path_buf(),
        limit,
    };
    while let Some((src_dir, dst_dir, depth)) = stack.pop() {
        for entry in fs::read_dir(&src_dir).map_err(io_err(&src_dir))? {
            let entry = entry.map_err(io_err(&src_dir))?;
            let src = entry.path();
            size.entries += 1;
            if size.entries > MAX_ENTRIES {
                return Err(too_large(format!("{MAX_ENTRIES} entries")));
            }
            let dst = dst_dir.as_ref().map(|d| d.join(entry.file_name()));
            let meta = fs::symlink_metadata(&src).map_err(io_err(&src))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                if let Some(dst) = dst {
                    let target = fs::read_link(&src).map_err(io_err(&src))?;
                    std::os::unix::fs::symlink(&target, &dst).map_err(io_err(&dst))?;
                }
            } else if kind.is_dir() {
                if depth + 1 > MAX_DEPTH {
                    return Err(too_large(format!("directories nested {MAX_DEPTH} deep")));
                }
                if let Some(dst) = &dst {
                    fs::create_dir(dst).map_err(io_err(dst))?;
                    dir_modes.push((dst.clone(), meta.permissions().mode()));
                }
                stack.push((src, dst, depth + 1));
            } else if kind.is_file() {
                let left = MAX_BYTES - size.bytes;
                let copied = match dst {
                    Some(dst) => copy_file(&src, &dst, meta.permissions().mode(), left)?,
                    None => meta.len(),
                };
                if copied > left {
                    return Err(too_large(format!("{MAX_BYTES} bytes")));
                }
                size.bytes += copied;
            } else {
                return Err(CopyError::Special { path: src });
            }
        }
    }
    // Deepest first, so making a parent read-only never blocks setting a child's mode.
    for (dir, mode) in dir_modes.iter().rev() {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode & 0o7777)).map_err(io_err(dir))?;
    }
    Ok(size)
}

/// Copies one regular file, reading at most `left + 1` bytes (so an over-long file is noticed,
/// not copied whole). The source is opened without following a symlink swapped in after the
/// walk looked at it.
fn copy_file(src: &Path, dst: &Path, mode: u32, left: u64) -> Result<u64, CopyError> {
    let input = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(src)
        .map_err(io_err(src))?;
    let mut output = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o7777 | 0o200)
        .open(dst)
        .map_err(io_err(dst))?;
    let copied =
        io::copy(&mut input.take(left.saturating_add(1)), &mut output).map_err(io_err(dst))?;
    // The owner-write bit was added so the copy could be written; give the file its own mode.
    File::set_permissions(&output, fs::Permissions::from_mode(mode & 0o7777))
        .map_err(io_err(dst))?;
    Ok(copied)
}

/// Removes a trial directory left by a run cut short, even where the agent made parts of it
/// read-only (which `remove_dir_all` alone cannot delete). Symlinks are removed, never followed.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    // Give every directory owner rwx, then try again.
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let meta = fs::symlink_metadata(&dir)?;
        if !meta.is_dir() {
            continue;
        }
        let mode = meta.permissions().mode() | 0o700;
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode))?;
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    fs::remove_dir_all(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_dirs_and_links_without_following() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("sub/f.txt"), "hello").unwrap();
        fs::write(d.path().join("outside.txt"), "secret").unwrap();
        std::os::unix::fs::symlink("../outside.txt", src.join("link")).unwrap();
        std::os::unix::fs::symlink(".", src.join("sub/loop")).unwrap();
        fs::set_permissions(src.join("sub"), fs::Permissions::from_mode(0o555)).unwrap();
        let dst = d.path().join("dst");
        let size = copy_fixture(&src, &dst).unwrap();
        assert_eq!(
            size,
            Size {
                entries: 4,
                bytes: 5
            }
        );
        assert_eq!(fs::read_to_string(dst.join("sub/f.txt")).unwrap(), "hello");
        assert_eq!(
            fs::read_link(dst.join("link")).unwrap(),
            Path::new("../outside.txt")
        );
        assert_eq!(fs::read_link(dst.join("sub/loop")).unwrap(), Path::new("."));
        assert_eq!(
            fs::metadata(dst.join("sub")).unwrap().permissions().mode() & 0o777,
            0o555
        );
        remove_tree(&dst).unwrap();
        assert!(!dst.exists());
        fs::set_permissions(src.join("sub"), fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn special_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(matches!(measure(d.path()), Err(CopyError::Special { .. })));
    }
}
