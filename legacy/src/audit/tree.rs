//! Finding and reading mirror files under `.shelpa/` without ever following a link.
//!
//! A `.shelpa/` tree may come from an old machine, an archive, or an agent that was not careful,
//! so it is treated as hostile: every entry is inspected without following it, symlinks and special
//! files are reported and skipped, and everything is opened through the workspace layer (beneath
//! the root's descriptor, refusing every link), so swapping a component for a link between the
//! walk and the read cannot redirect the read outside the root either.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use workspace::guard::PathGuard;
use workspace::mirror::MIRROR_DIR;
use workspace::walk::{self, DescendError, Tree, MAX_DEPTH};
use workspace::{is_swap, Stat, Workspace};

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

/// Walks `.shelpa/` through the workspace layer without following symlinks. A missing `.shelpa/`
/// is an empty scan. A [`Tree`] walk from the mirror directory's descriptor: no recursion and a
/// bounded number of open directories however deep or wide a hostile tree is, and a directory
/// swapped for a link mid-walk is refused rather than followed. What lies more than
/// [`MAX_DEPTH`] levels down, or whose path is longer than the kernel accepts (mirrors are read
/// by path), is reported instead of read.
pub fn scan(ws: &Workspace) -> io::Result<Scan> {
    let mut out = Scan::default();
    let top = Path::new(MIRROR_DIR);
    match ws.stat(top)? {
        None => return Ok(out),
        Some(stat) if stat.is_symlink() => {
            out.hostile.push(Hostile {
                display: ".".into(),
                message: ".shelpa itself is a symlink; it was not followed (a mirror directory is never a link: move the real directory into place)".into(),
            });
            return Ok(out);
        }
        Some(stat) if !stat.is_dir() => {
            out.hostile.push(Hostile {
                display: ".".into(),
                message: ".shelpa is not a directory, so there is no mirror to read".into(),
            });
            return Ok(out);
        }
        Some(_) => {}
    }
    let mut tree =
        Tree::new(ws.open_at(top, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?)?;
    while let Some(found) = tree.next_entry() {
        let hostile = |message: &str| Hostile {
            display: walk::shorten(&found.path),
            message: message.into(),
        };
        if found.name.to_str().is_none() {
            out.hostile.push(hostile(
                "the name is not valid UTF-8, so no workspace path can name it; it was skipped",
            ));
        } else if found.kind == FileType::Symlink {
            out.hostile.push(hostile("a symlink inside .shelpa/; it was not followed (tee never writes links, so this mirror was tampered with or copied carelessly)"));
        } else if found.kind == FileType::Directory {
            match tree.descend() {
                Ok(()) => {}
                Err(DescendError::TooDeep) => out.hostile.push(hostile(&format!(
                    "a directory more than {MAX_DEPTH} levels below .shelpa/ (the depth limit of every walk); nothing below it was read"
                ))),
                Err(DescendError::Io(e)) => return Err(e),
                Err(lost) => return Err(io::Error::other(lost)),
            }
        } else if found.kind == FileType::RegularFile {
            if walk::fits_one_call(&top.join(&found.path)) {
                out.mirrors.push(MirrorFile {
                    display: found.path.to_string_lossy().into_owned(),
                    relative: found.path,
                });
            } else {
                out.hostile.push(hostile(&format!(
                    "its path is longer than the system's limit of {} bytes, so it cannot be opened; it was skipped (move the mirrored tree closer to the root)",
                    libc::PATH_MAX
                )));
            }
        } else {
            out.hostile.push(hostile(
                "not a regular file (FIFO, socket or device); it was not opened",
            ));
        }
    }
    out.mirrors.sort_by(|a, b| a.relative.cmp(&b.relative));
    out.hostile.sort_by(|a, b| a.display.cmp(&b.display));
    Ok(out)
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
    Io(io::Error),
}

impl From<io::Error> for OpenError {
    /// The layer's answers, sorted: nothing there, a link met on the way (or a file where a
    /// directory was needed, the shape a swapped-in link takes too), anything else.
    fn from(e: io::Error) -> OpenError {
        if is_swap(&e) || e.raw_os_error() == Some(libc::ENOTDIR) {
            OpenError::Symlink
        } else if e.kind() == io::ErrorKind::NotFound {
            OpenError::NotFound
        } else {
            OpenError::Io(e)
        }
    }
}

/// Opens the regular file `rel` for reading through the workspace layer: no link anywhere on the
/// way or at the end, no blocking on a FIFO.
pub fn open_file_nofollow(ws: &Workspace, rel: &Path) -> Result<std::fs::File, OpenError> {
    let file = ws.open_read(rel)?;
    if !Stat::of(&file)?.is_file() {
        return Err(OpenError::NotAFile);
    }
    Ok(file)
}

/// Reads the mirror of a workspace path (`.shelpa/<relative>`) without following links.
pub fn read_mirror(ws: &Workspace, relative: &Path) -> Result<Vec<u8>, OpenError> {
    let mut file = open_file_nofollow(ws, &Path::new(MIRROR_DIR).join(relative))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(OpenError::Io)?;
    Ok(bytes)
}

/// Turns a user's PATH argument into a root-relative workspace path, lexically: `..` may not
/// climb out, absolute paths must be inside the root, and a leading `.shelpa/` is accepted as a
/// way of naming the mirror itself.
pub fn lexical_relative(guard: &PathGuard, input: &str) -> Option<PathBuf> {
    let rel = guard.lexical(input).ok()?;
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
