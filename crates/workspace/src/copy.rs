//! What a copy of a file or a directory tree would create, worked out before anything is
//! created: the `copy_file` tool walks the source once here (bounded like every walk, never
//! following a symlink), so a source too large, too deep or holding something that cannot be
//! copied is refused whole instead of leaving half a copy behind.
//!
//! The plan lists the tree in walk order (every directory before what it holds), with the
//! relative path of each entry below the source, its permission bits, and for a symlink its own
//! target (a link is copied as a link; whether its target stays inside the root where the copy
//! puts it is the guard's question, asked by the caller). The copy itself goes through the
//! history store and [`crate::Workspace`] like every other change.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::guard::{display_relative, PathGuard, REPOSITORY_DIR};
use crate::walk::{self, DescendError, Tree};
use crate::{temp, Workspace};

/// How large a copy may be.
#[derive(Clone, Copy, Debug)]
pub struct CopyLimits {
    /// Entries (files, directories, links) in one copy.
    pub entries: usize,
    /// Bytes of file content in one copy.
    pub bytes: u64,
}

/// One thing a copy creates, relative to the copy's top (empty for the top itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyItem {
    /// A directory, with its permission bits.
    Dir {
        /// Below the top.
        rel: PathBuf,
        /// Permission bits.
        mode: u32,
    },
    /// A regular file, with its permission bits and size when planned.
    File {
        /// Below the top.
        rel: PathBuf,
        /// Permission bits.
        mode: u32,
        /// Bytes when planned.
        size: u64,
    },
    /// A symbolic link, with its own target (never followed).
    Link {
        /// Below the top.
        rel: PathBuf,
        /// What the link says.
        target: PathBuf,
    },
}

/// What a copy of a tree would create.
#[derive(Debug, Default)]
pub struct CopyPlan {
    /// In walk order: a directory before everything it holds.
    pub items: Vec<CopyItem>,
    /// Bytes of file content in all.
    pub bytes: u64,
}

/// Why a copy was refused before anything was created.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Nothing at the source.
    #[error("'{0}' does not exist")]
    Missing(String),
    /// More entries than the limit.
    #[error("'{path}' holds more than {limit} entries, more than one copy_file call copies; copy its subdirectories one at a time")]
    TooMany {
        /// The source.
        path: String,
        /// The limit.
        limit: usize,
    },
    /// More bytes than the limit.
    #[error("'{path}' holds more than {limit} bytes of files, more than one copy_file call copies; copy its parts one at a time")]
    TooLarge {
        /// The source.
        path: String,
        /// The limit.
        limit: u64,
    },
    /// Deeper than a path can name in one call (or than any walk goes).
    #[error("'{0}' lies too deep to be copied (its path would not fit in one system call); move the deep part closer to the top first")]
    TooDeep(String),
    /// A FIFO, socket or device: nothing a copy can reproduce.
    #[error("'{0}' is a FIFO, socket or device, which copy_file does not copy; copy the regular files around it")]
    Special(String),
    /// The server's own store or a repository's `.git/` inside the source: a copy would create
    /// one where no tool may write.
    #[error("'{0}' is the server's own store or a repository's .git/, which a copy may not create; copy the parts around it")]
    Protected(String),
    /// The operating system refused while looking.
    #[error("could not read '{path}': {source}")]
    Io {
        /// What was being read.
        path: String,
        /// The OS error.
        source: io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> CopyError + '_ {
    move |source| CopyError::Io {
        path: display_relative(path),
        source,
    }
}

/// True for a name a copy must not create below its destination.
fn protected(name: &OsStr) -> bool {
    name == REPOSITORY_DIR || crate::guard::STATE_DIRS.iter().any(|d| name == *d)
}

/// Plans the copy of `src` (root-relative, as the guard resolved it without following a final
/// link) to `dst`: the whole tree, within `limits`. Temporary files of the server's own are left
/// out (a crash's leftovers, not content).
pub fn plan(
    ws: &Workspace,
    src: &Path,
    dst: &Path,
    limits: CopyLimits,
) -> Result<CopyPlan, CopyError> {
    let shown = || display_relative(src);
    let top = ws
        .stat(src)
        .map_err(io_error(src))?
        .ok_or_else(|| CopyError::Missing(shown()))?;
    let mut plan = CopyPlan::default();
    let fits =
        |rel: &Path| walk::fits_one_call(&src.join(rel)) && walk::fits_one_call(&dst.join(rel));
    match top.kind {
        FileType::RegularFile => {
            plan.bytes = top.size;
            plan.items.push(CopyItem::File {
                rel: PathBuf::new(),
                mode: top.mode,
                size: top.size,
            });
        }
        FileType::Symlink => plan.items.push(CopyItem::Link {
            rel: PathBuf::new(),
            target: ws.read_link(src).map_err(io_error(src))?,
        }),
        FileType::Directory => {
            plan.items.push(CopyItem::Dir {
                rel: PathBuf::new(),
                mode: top.mode,
            });
            let fd = ws
                .open_at(src, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
                .map_err(io_error(src))?;
            let mut tree = Tree::new(fd).map_err(io_error(src))?;
            while let Some(found) = tree.next_entry() {
                let at = src.join(&found.path);
                if temp::is_reserved(found.name.as_bytes()) {
                    continue;
                }
                if protected(&found.name) {
                    return Err(CopyError::Protected(display_relative(&at)));
                }
                if plan.items.len() >= limits.entries {
                    return Err(CopyError::TooMany {
                        path: shown(),
                        limit: limits.entries,
                    });
                }
                if !fits(&found.path) {
                    return Err(CopyError::TooDeep(walk::shorten(&at)));
                }
                let dir = tree.current().ok_or_else(|| CopyError::Io {
                    path: display_relative(&at),
                    source: io::Error::other("its directory was moved while it was being read"),
                })?;
                let stat = walk::stat_at(dir, &found.name)
                    .map_err(io_error(&at))?
                    .ok_or_else(|| CopyError::Missing(display_relative(&at)))?;
                let rel = found.path.clone();
                match stat.kind {
                    FileType::RegularFile => {
                        plan.bytes = plan.bytes.saturating_add(stat.size);
                        if plan.bytes > limits.bytes {
                            return Err(CopyError::TooLarge {
                                path: shown(),
                                limit: limits.bytes,
                            });
                        }
                        plan.items.push(CopyItem::File {
                            rel,
                            mode: stat.mode,
                            size: stat.size,
                        });
                    }
                    FileType::Symlink => {
                        let target = walk::read_link_at(dir, &found.name).map_err(io_error(&at))?;
                        plan.items.push(CopyItem::Link { rel, target });
                    }
                    FileType::Directory => {
                        plan.items.push(CopyItem::Dir {
                            rel,
                            mode: stat.mode,
                        });
                        match tree.descend() {
                            Ok(()) => {}
                            Err(DescendError::TooDeep) => {
                                return Err(CopyError::TooDeep(walk::shorten(&at)))
                            }
                            Err(DescendError::Lost) => {
                                return Err(CopyError::Io {
                                    path: display_relative(&at),
                                    source: io::Error::other(
                                        "it was moved while it was being read",
                                    ),
                                })
                            }
                            Err(DescendError::Io(e)) => return Err(io_error(&at)(e)),
                        }
                    }
                    _ => return Err(CopyError::Special(display_relative(&at))),
                }
            }
        }
        _ => return Err(CopyError::Special(shown())),
    }
    Ok(plan)
}

/// True when a link saying `target`, made at the root-relative `at`, leads somewhere inside the
/// root by the guard's rules (a dangling link inside counts; a link that would point outside, or
/// into the server's own state, does not). Asked of every link a copy would make, where the copy
/// puts it: a relative target means something else one directory over.
pub fn link_stays_inside(guard: &PathGuard, at: &Path, target: &Path) -> bool {
    let joined = if target.is_absolute() {
        target.to_path_buf()
    } else {
        guard
            .root()
            .join(at.parent().unwrap_or(Path::new("")))
            .join(target)
    };
    joined.to_str().is_some_and(|p| guard.resolve(p).is_ok())
}
