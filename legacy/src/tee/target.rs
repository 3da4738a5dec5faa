//! The checks a tee target passes: which paths may be written at all, and, right before the
//! write, that what is there is still a plain, singly-linked regular file (closing the window
//! since the policy looked: a target swapped for a symlink, FIFO or hard link is refused).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use super::{TeeError, TeeMode};
use workspace::guard::{display_relative, PathGuard, REPOSITORY_DIR};
use workspace::{is_swap, temp, Dir, Stat};

/// The root-relative form of a target the policy checked (it hands absolute paths inside the
/// root to the stages, and tee gets the same ones). Lexical only: the guard made the absolute
/// path by joining the root and the resolved relative path, so stripping the root gives that
/// relative path back; everything after this acts on it through the workspace layer.
pub fn relative_target(guard: &PathGuard, target: &Path) -> Result<PathBuf, TeeError> {
    target
        .strip_prefix(guard.root())
        .map(Path::to_path_buf)
        .map_err(|_| {
            // Never echo a path outside the root: only its last component.
            let name = target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            TeeError::Escape(name)
        })
}

/// A target that passed the static checks: root-relative, not protected, has a file name.
pub(super) struct Target {
    /// The path, relative to the root.
    pub(super) relative: PathBuf,
    /// Its directory, relative to the root (empty for a file at the top).
    pub(super) parent: PathBuf,
    /// Its file name.
    pub(super) name: OsString,
}

/// The static checks every target passes before any is written: a plain relative path with a
/// file name, outside the tool's state, `.git/` and the temporary-file namespace.
pub(super) fn check_target(relative: &Path) -> Result<Target, TeeError> {
    let shown_path = display_relative(relative);
    let mut components = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(name) => components.push(name),
            _ => return Err(TeeError::Escape(shown_path)),
        }
    }
    let Some(name) = components.last() else {
        return Err(TeeError::DisallowedTarget {
            path: shown_path,
            what: "the workspace root (a directory)",
        });
    };
    // State directories at any depth (a nested workspace's mirror is as untouchable as this
    // one's), and a repository's `.git/` anywhere.
    if PathGuard::is_state_path(relative).is_some()
        || components.iter().any(|c| *c == REPOSITORY_DIR)
    {
        return Err(TeeError::Protected(shown_path));
    }
    if components.iter().any(|c| temp::is_reserved(c.as_bytes())) {
        return Err(TeeError::DisallowedTarget {
            path: shown_path,
            what:
                "in the server's temporary-file namespace (names starting with '.filesystem-tmp-')",
        });
    }
    let name = name.to_os_string();
    let parent = relative.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(Target {
        relative: relative.to_path_buf(),
        parent,
        name,
    })
}

/// How a message names what is at a path that is not a regular file.
fn kind_name(file_type: FileType) -> &'static str {
    match file_type {
        FileType::Symlink => "a symlink",
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Socket => "a socket",
        _ => "not a regular file",
    }
}

/// The re-check of an existing target right before it is written: it must be a regular file,
/// and one with no other link when it is appended to.
pub(super) fn recheck(existing: &Stat, shown_path: &str, mode: TeeMode) -> Result<(), TeeError> {
    if !existing.is_file() {
        return Err(TeeError::DisallowedTarget {
            path: shown_path.to_string(),
            what: kind_name(existing.kind),
        });
    }
    if mode == TeeMode::Append && existing.nlink > 1 {
        return Err(TeeError::DisallowedTarget {
            path: shown_path.to_string(),
            what: "a file with more than one hard link",
        });
    }
    Ok(())
}

/// Opens an existing-or-new target without following symlinks and without blocking on a FIFO,
/// then checks what was actually opened.
pub(super) fn open_regular(
    dir: &Dir,
    name: &OsStr,
    flags: OFlags,
    shown_path: &str,
    mode: TeeMode,
) -> Result<std::fs::File, TeeError> {
    let fd = dir
        .open(name, flags | OFlags::NONBLOCK, Mode::from_raw_mode(0o666))
        .map_err(|e| {
            if is_swap(&e) {
                TeeError::DisallowedTarget {
                    path: shown_path.to_string(),
                    what: "a symlink",
                }
            } else if e.raw_os_error() == Some(libc::ENXIO) {
                TeeError::DisallowedTarget {
                    path: shown_path.to_string(),
                    what: "a FIFO",
                }
            } else {
                TeeError::Io {
                    op: "open",
                    path: shown_path.to_string(),
                    source: e,
                }
            }
        })?;
    let st = Stat::of(&fd).map_err(|e| TeeError::Io {
        op: "inspect",
        path: shown_path.to_string(),
        source: e,
    })?;
    // Checked again on what was opened: the entry may have changed since it was looked at.
    recheck(&st, shown_path, mode)?;
    Ok(std::fs::File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(path: &str) -> TeeError {
        match check_target(Path::new(path)) {
            Ok(_) => panic!("'{path}' was accepted"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_plain_relative_path_splits_into_its_directory_and_name() {
        let t = check_target(Path::new("notes/todo.md")).expect("accepted");
        assert_eq!(t.parent, Path::new("notes"));
        assert_eq!(t.name, "todo.md");
        let top = check_target(Path::new("a.txt")).expect("accepted");
        assert_eq!(top.parent, Path::new(""));
    }

    #[test]
    fn state_repository_and_temporary_names_are_never_targets() {
        for path in [".shelpa/a.txt", "docs/.filesystem/x", "sub/.git/config"] {
            assert!(matches!(refused(path), TeeError::Protected(_)), "{path}");
        }
        assert!(matches!(
            refused("d/.filesystem-tmp-123"),
            TeeError::DisallowedTarget { .. }
        ));
        assert!(matches!(refused("../outside"), TeeError::Escape(_)));
        assert!(matches!(refused(""), TeeError::DisallowedTarget { .. }));
    }

    fn stat(kind: FileType, nlink: u64) -> Stat {
        Stat {
            kind,
            size: 0,
            mode: 0o644,
            nlink,
            mtime: 0,
            mtime_nsec: 0,
            dev: 0,
            ino: 0,
        }
    }

    #[test]
    fn a_hard_linked_file_may_be_replaced_but_not_appended_to() {
        let linked = stat(FileType::RegularFile, 2);
        assert!(recheck(&linked, "f", TeeMode::Overwrite).is_ok());
        let err = recheck(&linked, "f", TeeMode::Append).expect_err("refused");
        assert!(err.to_string().contains("more than one hard link"), "{err}");
        let fifo = stat(FileType::Fifo, 1);
        let err = recheck(&fifo, "f", TeeMode::Overwrite).expect_err("refused");
        assert!(err.to_string().contains("a FIFO"), "{err}");
    }
}
