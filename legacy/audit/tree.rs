//! Finding and reading mirror files under `.shelpa/` without ever following a link.
//!
//! A `.shelpa/` tree may come from an old machine, an archive, or an agent that was not careful,
//! so it is treated as hostile: every entry is inspected with `lstat`, symlinks and special files
//! are reported and skipped, and files are opened one directory handle at a time with
//! `O_NOFOLLOW`, so swapping a component for a link between the walk and the read cannot redirect
//! the read outside the root either.

use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::guard::normalize;

/// The mirror directory's name inside the workspace root.
pub const MIRROR_DIR: &str = ".shelpa";

/// One regular file found under `.shelpa/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorFile {
    /// The workspace path it mirrors, relative to the root (`notes/todo.md`).
    pub relative: PathBuf,
    /// The same path as output shows it.
    pub display: String,
}

/// An entry under `.shelpa/` that is not a readable mirror and was not followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hostile {
    /// Its path relative to `.shelpa/`, lossily shown.
    pub display: String,
    /// What it is and why it was skipped.
    pub message: String,
}

/// What a walk of `.shelpa/` found.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Regular files, sorted by path.
    pub mirrors: Vec<MirrorFile>,
    /// Entries that were reported instead of read.
    pub hostile: Vec<Hostile>,
}

/// Walks `root/.shelpa/` without following symlinks. A missing `.shelpa/` is an empty scan.
pub fn scan(root: &Path) -> io::Result<Scan> {
    let mut out = Scan::default();
    let top = root.join(MIRROR_DIR);
    match std::fs::symlink_metadata(&top) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
        Ok(meta) if meta.file_type().is_symlink() => {
            out.hostile.push(Hostile {
                display: ".".into(),
                message: ".shelpa itself is a symlink; it was not followed (a mirror directory is never a link: move the real directory into place)".into(),
            });
            return Ok(out);
        }
        Ok(meta) if !meta.is_dir() => {
            out.hostile.push(Hostile {
                display: ".".into(),
                message: ".shelpa is not a directory, so there is no mirror to read".into(),
            });
            return Ok(out);
        }
        Ok(_) => {}
    }
    walk(&top, Path::new(""), &mut out)?;
    out.mirrors.sort_by(|a, b| a.relative.cmp(&b.relative));
    out.hostile.sort_by(|a, b| a.display.cmp(&b.display));
    Ok(out)
}

fn walk(dir: &Path, rel: &Path, out: &mut Scan) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let child_rel = rel.join(&name);
        let display = child_rel.to_string_lossy().into_owned();
        // DirEntry::file_type does not follow links.
        let kind = entry.file_type()?;
        if name.to_str().is_none() {
            out.hostile.push(Hostile {
                display,
                message:
                    "the name is not valid UTF-8, so no workspace path can name it; it was skipped"
                        .into(),
            });
        } else if kind.is_symlink() {
            out.hostile.push(Hostile {
                display,
                message: "a symlink inside .shelpa/; it was not followed (tee never writes links, so this mirror was tampered with or copied carelessly)".into(),
            });
        } else if kind.is_dir() {
            walk(&entry.path(), &child_rel, out)?;
        } else if kind.is_file() {
            out.mirrors.push(MirrorFile {
                relative: child_rel,
                display,
            });
        } else {
            out.hostile.push(Hostile {
                display,
                message: "not a regular file (FIFO, socket or device); it was not opened".into(),
            });
        }
    }
    Ok(())
}

/// Why a path could not be opened safely.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Nothing there.
    #[error("does not exist")]
    NotFound,
    /// A symlink on the way (or at the end) was refused.
    #[error("goes through a symlink, which is not followed here")]
    Symlink,
    /// Not a regular file.
    #[error("is not a regular file")]
    NotAFile,
    /// Anything else.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Opens the directory handle of the root for the descriptor walk.
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Splits a root-relative path into plain names; anything else (`..`, `/`) is refused.
fn names(rel: &Path) -> Result<Vec<&std::ffi::OsStr>, OpenError> {
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(OpenError::Symlink),
        })
        .collect()
}

fn map_errno(e: rustix::io::Errno) -> OpenError {
    match e {
        rustix::io::Errno::NOENT => OpenError::NotFound,
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => OpenError::Symlink,
        other => OpenError::Io(other.into()),
    }
}

/// Opens the directory `rel` (relative to `root_fd`) one component at a time, refusing links.
/// With `create`, missing directories are made on the way.
pub fn open_dir_nofollow(
    root_fd: &OwnedFd,
    rel: &Path,
    create: bool,
) -> Result<OwnedFd, OpenError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = rustix::fs::openat(root_fd, ".", flags, Mode::empty()).map_err(map_errno)?;
    for name in names(rel)? {
        let next = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(map_errno(e)),
                }
                rustix::fs::openat(&dir, name, flags, Mode::empty()).map_err(map_errno)?
            }
            other => other.map_err(map_errno)?,
        };
        dir = next;
    }
    Ok(dir)
}

/// Opens the regular file `rel` (relative to `root_fd`) for reading without following any link
/// and without blocking on a FIFO.
pub fn open_file_nofollow(root_fd: &OwnedFd, rel: &Path) -> Result<std::fs::File, OpenError> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let name = rel.file_name().ok_or(OpenError::NotAFile)?;
    let dir = open_dir_nofollow(root_fd, parent, false)?;
    let fd = rustix::fs::openat(
        &dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(map_errno)?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| OpenError::Io(e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(OpenError::NotAFile);
    }
    Ok(std::fs::File::from(fd))
}

/// Reads the mirror of a workspace path (`.shelpa/<relative>`) without following links.
pub fn read_mirror(root_fd: &OwnedFd, relative: &Path) -> Result<Vec<u8>, OpenError> {
    let mut file = open_file_nofollow(root_fd, &Path::new(MIRROR_DIR).join(relative))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Turns a user's PATH argument into a root-relative workspace path, lexically: `..` may not
/// climb out, absolute paths must be inside the root, and a leading `.shelpa/` is accepted as a
/// way of naming the mirror itself.
pub fn lexical_relative(root: &Path, input: &str) -> Option<PathBuf> {
    if input.is_empty() || input.contains('\0') {
        return None;
    }
    let given = Path::new(input);
    let absolute = normalize(&if given.is_absolute() {
        given.to_path_buf()
    } else {
        root.join(given)
    });
    let rel = absolute.strip_prefix(root).ok()?.to_path_buf();
    let rel = match rel.strip_prefix(MIRROR_DIR) {
        Ok(inner) => inner.to_path_buf(),
        Err(_) => rel,
    };
    if rel.as_os_str().is_empty() {
        None
    } else {
        Some(rel)
    }
}
