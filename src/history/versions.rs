//! One file's version history: full snapshots `00001`, `00002`, … and a `head` file naming the
//! current version and the newest one.
//!
//! Keeping both numbers in `head` is what makes undo and redo O(1) in the number of versions:
//! nothing ever lists the directory. Snapshots are written and synced before `head` moves, and
//! `head` itself is replaced atomically, so a crash leaves either the old or the new head, each
//! pointing at snapshots that are on disk. Stray snapshots beyond `newest` (from a crash after a
//! snapshot but before its head) are simply overwritten by the next write.

use std::io;
use std::path::{Path, PathBuf};

use super::durable::{create_dirs, replace_file};
use super::HistoryError;

/// The file in a versions directory naming the current and the newest version.
pub(crate) const HEAD_FILE: &str = "head";

/// The version number a snapshot file name stands for (`00007` → 7), or `None` for any name the
/// store would not have written (it must read back exactly as [`Versions`] formats it).
pub(crate) fn snapshot_version(name: &[u8]) -> Option<u64> {
    if name.len() < 5 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(name).ok()?.parse().ok()?;
    (n >= 1 && format!("{n:05}").as_bytes() == name).then_some(n)
}

/// Where a file's history stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    /// The version the file is at (what undo steps back from).
    pub current: u64,
    /// The newest version kept (redo can go up to it).
    pub newest: u64,
}

/// The versions directory of one file.
pub(crate) struct Versions {
    dir: PathBuf,
    /// The file as the client named it, for messages.
    shown: String,
}

impl Versions {
    /// The history kept in `dir` for the file shown to clients as `shown`.
    pub(crate) fn new(dir: PathBuf, shown: String) -> Self {
        Versions { dir, shown }
    }

    fn io(&self, what: &str) -> impl Fn(io::Error) -> HistoryError + '_ {
        let context = format!("cannot {what} the history of {}", self.shown);
        move |source| HistoryError::Io {
            context: context.clone(),
            source,
        }
    }

    /// The head, or `None` when the file has no history yet.
    pub(crate) fn head(&self) -> Result<Option<Head>, HistoryError> {
        let text = match read_no_follow(&self.dir.join(HEAD_FILE)) {
            Ok(t) => String::from_utf8_lossy(&t).into_owned(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io("read")(e)),
        };
        let mut nums = text.split_whitespace().map(str::parse::<u64>);
        match (nums.next(), nums.next()) {
            (Some(Ok(current)), Some(Ok(newest))) if current >= 1 && current <= newest => {
                Ok(Some(Head { current, newest }))
            }
            _ => Err(self.io("read")(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "its head file {} is damaged; the snapshots beside it are intact and can be copied back by hand",
                    self.dir.join(HEAD_FILE).display()
                ),
            ))),
        }
    }

    fn set_head(&self, head: Head) -> Result<(), HistoryError> {
        let text = format!("{} {}\n", head.current, head.newest);
        replace_file(&self.dir.join(HEAD_FILE), text.as_bytes(), None, false)
            .map_err(self.io("update"))
    }

    /// Moves the head to `current` (undo/redo), keeping `newest`.
    pub(crate) fn move_head(&self, head: Head, current: u64) -> Result<Head, HistoryError> {
        let moved = Head {
            current,
            newest: head.newest,
        };
        self.set_head(moved)?;
        Ok(moved)
    }

    fn snapshot_path(&self, version: u64) -> PathBuf {
        self.dir.join(format!("{version:05}"))
    }

    /// The content of `version`; `None` if that snapshot is missing.
    pub(crate) fn snapshot(&self, version: u64) -> Result<Option<Vec<u8>>, HistoryError> {
        match read_no_follow(&self.snapshot_path(version)) {
            Ok(c) => Ok(Some(c)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("read")(e)),
        }
    }

    /// True when `content` is exactly the snapshot the head points at.
    pub(crate) fn matches_head(&self, head: Head, content: &[u8]) -> Result<bool, HistoryError> {
        Ok(self.snapshot(head.current)?.as_deref() == Some(content))
    }

    /// Records `content` as the version after the current one, dropping any versions after the
    /// head (a new write after an undo forgets the undone future, as editors do).
    pub(crate) fn append(&self, head: Option<Head>, content: &[u8]) -> Result<Head, HistoryError> {
        create_dirs(&self.dir).map_err(self.io("create"))?;
        let version = head.map_or(1, |h| h.current + 1);
        replace_file(&self.snapshot_path(version), content, Some(0o600), false)
            .map_err(self.io("write"))?;
        let new = Head {
            current: version,
            newest: version,
        };
        self.set_head(new)?;
        // Only the dropped range is touched, never the whole directory.
        if let Some(old) = head {
            for stale in version + 1..=old.newest {
                match std::fs::remove_file(self.snapshot_path(stale)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(self.io("trim")(e)),
                }
            }
        }
        Ok(new)
    }
}

/// Reads a store file, refusing a symlink in its place (see [`super::layout::refuse_links`]).
fn read_no_follow(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let mut out = Vec::new();
    file.read_to_end(&mut out)?;
    Ok(out)
}

/// The versions directory of `rel` inside `state`, wrapped.
pub(crate) fn for_path(state: &Path, rel: &Path) -> Result<Versions, HistoryError> {
    Ok(Versions::new(
        super::layout::versions_dir(state, rel)?,
        crate::guard::display_relative(rel),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_after_undo_drops_the_undone_future() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = Versions::new(dir.path().join("v"), "f".into());
        assert_eq!(v.head().expect("head"), None);
        let mut h = v.append(None, b"1").expect("1");
        h = v.append(Some(h), b"2").expect("2");
        h = v.append(Some(h), b"3").expect("3");
        assert_eq!(
            h,
            Head {
                current: 3,
                newest: 3
            }
        );
        h = v.move_head(h, 1).expect("undo");
        h = v.append(Some(h), b"new").expect("write");
        assert_eq!(
            h,
            Head {
                current: 2,
                newest: 2
            }
        );
        assert_eq!(v.snapshot(2).expect("read").as_deref(), Some(&b"new"[..]));
        assert_eq!(v.snapshot(3).expect("read"), None);
    }

    #[test]
    fn a_damaged_head_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("v")).expect("mkdir");
        std::fs::write(dir.path().join("v/head"), "garbage").expect("write");
        let v = Versions::new(dir.path().join("v"), "f".into());
        assert!(v.head().is_err());
    }
}
