//! The fresh copy of a task's fixture that each trial works in.
//!
//! Symlinks are copied as symlinks and never followed: a fixture that links outside itself
//! must not turn into a copy of whatever the link pointed at (or into a loop). The walk keeps
//! its own stack, so a deep tree costs memory in proportion, never call depth, and every
//! dimension is bounded so a mistaken `fixture = "/"` fails fast instead of filling the disk.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use workspace::{Dir, Entry};

/// Most entries (files, directories, symlinks) a fixture may hold.
pub const MAX_ENTRIES: u64 = 100_000;
/// Most bytes of file content a fixture may hold.
pub const MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// Deepest directory nesting of a fixture.
pub const MAX_DEPTH: usize = 128;
/// Deepest nesting a trial directory is removed through: an agent can build any tree in its
/// workspace, and each level holds one descriptor while it is emptied.
pub const MAX_REMOVE_DEPTH: usize = 512;

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

/// Walks the fixture (a canonical path) checking every bound and entry type, copying nothing:
/// the study file's check, so a bad fixture is refused before the first trial.
pub fn measure(fixture: &Path) -> Result<Size, CopyError> {
    walk(fixture, None)
}

/// Copies `fixture` (a canonical path) to `name` in `dest`, which must not exist there. Modes
/// are kept; directories get theirs after their content is in place, so a read-only directory
/// is copied too.
pub fn copy_fixture(fixture: &Path, dest: &Dir, name: &OsStr) -> Result<Size, CopyError> {
    walk(fixture, Some((dest, name)))
}

/// One directory being copied: its entries, the next one to look at, and its copy.
struct Frame {
    src: Dir,
    dst: Option<Dir>,
    mode: u32,
    rel: PathBuf,
    entries: Vec<Entry>,
    next: usize,
}

/// The walk keeps one frame per level (so open descriptors grow with depth, which is bounded,
/// never with the width of a directory), and names every entry relative to its directory's
/// descriptor: a symlink swapped into the fixture while it is copied is refused, never followed.
fn walk(fixture: &Path, dest: Option<(&Dir, &OsStr)>) -> Result<Size, CopyError> {
    let mut size = Size::default();
    let too_large = |limit: String| CopyError::TooLarge {
        path: fixture.to_path_buf(),
        limit,
    };
    let top = super::resume::open_dir(fixture).map_err(io_err(fixture))?;
    let top_mode = workspace::Stat::of(&top).map_err(io_err(fixture))?.mode;
    let dst = match dest {
        Some((parent, name)) => Some(make_dir(parent, name).map_err(io_err(fixture))?),
        None => None,
    };
    let entries = top.entries().map_err(io_err(fixture))?;
    let mut stack = vec![Frame {
        src: top,
        dst,
        mode: top_mode,
        rel: PathBuf::new(),
        entries,
        next: 0,
    }];
    loop {
        let depth = stack.len();
        let Some(frame) = stack.last_mut() else {
            break;
        };
        let Some(entry) = frame.entries.get(frame.next) else {
            // Deepest first, so making a parent read-only never blocks a child's copy.
            let done = stack.pop().expect("a frame");
            if let Some(dst) = &done.dst {
                rustix::fs::fchmod(dst, Mode::from_raw_mode(done.mode & 0o7777))
                    .map_err(|e| io_err(&fixture.join(&done.rel))(e.into()))?;
            }
            continue;
        };
        frame.next += 1;
        let name: OsString = entry.name.clone();
        let stat = entry.stat;
        let rel = frame.rel.join(&name);
        let src_path = fixture.join(&rel);
        size.entries += 1;
        if size.entries > MAX_ENTRIES {
            return Err(too_large(format!("{MAX_ENTRIES} entries")));
        }
        if stat.is_symlink() {
            if let Some(dst) = &frame.dst {
                let target = frame.src.read_link(&name).map_err(io_err(&src_path))?;
                symlink(&target, dst, &name).map_err(io_err(&src_path))?;
            }
        } else if stat.is_dir() {
            if depth > MAX_DEPTH {
                return Err(too_large(format!("directories nested {MAX_DEPTH} deep")));
            }
            let src = frame.src.subdir(&name).map_err(io_err(&src_path))?;
            let dst = match &frame.dst {
                Some(d) => Some(make_dir(d, &name).map_err(io_err(&src_path))?),
                None => None,
            };
            let entries = src.entries().map_err(io_err(&src_path))?;
            stack.push(Frame {
                src,
                dst,
                mode: stat.mode,
                rel,
                entries,
                next: 0,
            });
        } else if stat.is_file() {
            let left = MAX_BYTES - size.bytes;
            let copied = match &frame.dst {
                Some(dst) => {
                    copy_file(&frame.src, dst, &name, stat.mode, left).map_err(io_err(&src_path))?
                }
                None => stat.size,
            };
            if copied > left {
                return Err(too_large(format!("{MAX_BYTES} bytes")));
            }
            size.bytes += copied;
        } else {
            return Err(CopyError::Special { path: src_path });
        }
    }
    Ok(size)
}

/// Makes the directory `name` in `parent` (owner rwx until its own mode is set) and opens it.
fn make_dir(parent: &Dir, name: &OsStr) -> io::Result<Dir> {
    if !parent.mkdir(name)? {
        return Err(io::Error::from(io::ErrorKind::AlreadyExists));
    }
    parent.subdir(name)
}

/// Makes the symlink `name` in `dir` pointing at `target`, relative to the directory's
/// descriptor.
fn symlink(target: &Path, dir: &Dir, name: &OsStr) -> io::Result<()> {
    // Relative to the descriptor of a directory the copy itself just made (the workspace
    // layer's Dir has no symlink-making operation of its own).
    #[allow(clippy::disallowed_methods)]
    let made = rustix::fs::symlinkat(target, dir, name);
    Ok(made?)
}

/// Copies one regular file, reading at most `left + 1` bytes (so an over-long file is noticed,
/// not copied whole). The source is opened without following a symlink and refused unless it
/// is a regular file (one swapped in after the walk looked at it).
fn copy_file(src: &Dir, dst: &Dir, name: &OsStr, mode: u32, left: u64) -> io::Result<u64> {
    let input = src.open_regular(name, OFlags::RDONLY, Mode::empty())?;
    let mut output = File::from(dst.open(
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        Mode::from_raw_mode(mode & 0o7777 | 0o200),
    )?);
    let copied = io::copy(&mut input.take(left.saturating_add(1)), &mut output)?;
    // The owner-write bit was added so the copy could be written; give the file its own mode.
    rustix::fs::fchmod(&output, Mode::from_raw_mode(mode & 0o7777))?;
    Ok(copied)
}

/// Removes `name` in `parent` and everything below it (a trial directory left by a run cut
/// short), even where the agent made parts of it read-only. Symlinks are removed, never
/// followed: every name is taken relative to its directory's descriptor.
pub fn remove_entry(parent: &Dir, name: &OsStr) -> io::Result<()> {
    match parent.stat(name)? {
        None => return Ok(()),
        Some(s) if !s.is_dir() => return parent.unlink(name),
        Some(_) => {}
    }
    // (the directory, its name in the directory below it in the stack)
    let mut stack: Vec<(Dir, OsString)> = vec![(enter(parent, name)?, name.to_os_string())];
    while let Some((dir, _)) = stack.last() {
        let mut sub = None;
        for entry in dir.entries()? {
            if entry.stat.is_dir() {
                sub = Some(entry.name);
                break;
            }
            dir.unlink(&entry.name)?;
        }
        match sub {
            Some(sub) => {
                if stack.len() >= MAX_REMOVE_DEPTH {
                    return Err(io::Error::other(format!(
                        "directories nested deeper than {MAX_REMOVE_DEPTH}; remove the trial directory by hand"
                    )));
                }
                let child = enter(dir, &sub)?;
                stack.push((child, sub));
            }
            None => {
                let (_, own) = stack.pop().expect("a frame");
                let above = stack.last().map_or(parent, |(d, _)| d);
                above.rmdir(&own)?;
            }
        }
    }
    Ok(())
}

/// Opens the directory `name` in `parent` for emptying, giving it owner rwx first.
fn enter(parent: &Dir, name: &OsStr) -> io::Result<Dir> {
    let dir = match parent.subdir(name) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            // A directory the agent left unreadable cannot be opened to be given its bits back:
            // change them by its name in the parent's descriptor (no symlink followed).
            #[allow(clippy::disallowed_methods)]
            let changed = rustix::fs::chmodat(
                parent,
                name,
                Mode::from_raw_mode(0o700),
                rustix::fs::AtFlags::empty(),
            );
            changed?;
            parent.subdir(name)?
        }
        Err(e) => return Err(e),
    };
    let mode = workspace::Stat::of(&dir)?.mode;
    rustix::fs::fchmod(&dir, Mode::from_raw_mode(mode | 0o700))?;
    Ok(dir)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

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
        let parent = super::super::resume::open_dir(&fs::canonicalize(d.path()).unwrap()).unwrap();
        let size =
            copy_fixture(&fs::canonicalize(&src).unwrap(), &parent, OsStr::new("dst")).unwrap();
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
        fs::set_permissions(dst.join("sub"), fs::Permissions::from_mode(0o000)).unwrap();
        remove_entry(&parent, OsStr::new("dst")).unwrap();
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
