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

use super::HistoryError;
use crate::workspace::Workspace;

/// The file in a versions directory naming the current and the newest version.
pub(crate) const HEAD_FILE: &str = "head";

/// Suffix of the second name an undone snapshot gets while a write after an undo takes its
/// number (`00003.undone`); see [`Versions::append`].
pub(crate) const UNDONE_SUFFIX: &str = ".undone";

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

/// The versions directory of one file (root-relative, reached through the workspace layer).
pub(crate) struct Versions {
    ws: Workspace,
    dir: PathBuf,
    /// The file as the client named it, for messages.
    shown: String,
}

impl Versions {
    /// The history kept in root-relative `dir` for the file shown to clients as `shown`.
    pub(crate) fn new(ws: Workspace, dir: PathBuf, shown: String) -> Self {
        Versions { ws, dir, shown }
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
        let text = match self.ws.read(&self.dir.join(HEAD_FILE)) {
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
        self.ws
            .replace_file(&self.dir.join(HEAD_FILE), text.as_bytes(), None, false)
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

    fn undone_path(&self, version: u64) -> PathBuf {
        self.dir.join(format!("{version:05}{UNDONE_SUFFIX}"))
    }

    /// Finishes what a crash interrupted in [`Versions::append`] over an undone version: if the
    /// head reached the new version, the kept copy of the old one is no longer needed; if it did
    /// not, the old version goes back under its number, as if the write had never started.
    /// Called (under the store lock) before every change to this history.
    pub(crate) fn settle(&self, head: Option<Head>) -> Result<(), HistoryError> {
        let Some(h) = head else {
            return Ok(());
        };
        let exists = |p: &Path| self.ws.exists(p);
        let committed = self.undone_path(h.current);
        if h.current == h.newest && exists(&committed).map_err(self.io("read"))? {
            self.ws.remove_file(&committed).map_err(self.io("tidy"))?;
        }
        let pending = self.undone_path(h.current + 1);
        if h.newest > h.current && exists(&pending).map_err(self.io("read"))? {
            self.ws
                .rename_replace(&pending, &self.snapshot_path(h.current + 1))
                .map_err(self.io("restore an undone version in"))?;
            // Cut short before the new snapshot replaced it, both names are still the same
            // file, and rename(2) between two links of one file does nothing: drop the spare.
            if exists(&pending).map_err(self.io("read"))? {
                self.ws.remove_file(&pending).map_err(self.io("tidy"))?;
            }
            self.ws.sync_dir(&self.dir).map_err(self.io("sync"))?;
        }
        Ok(())
    }

    /// The content of `version`; `None` if that snapshot is missing.
    pub(crate) fn snapshot(&self, version: u64) -> Result<Option<Vec<u8>>, HistoryError> {
        match self.ws.read(&self.snapshot_path(version)) {
            Ok(c) => Ok(Some(c)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("read")(e)),
        }
    }

    /// True when the file at `path` holds exactly the snapshot the head points at (a missing
    /// snapshot matches nothing). Every versioned write and every undo asks this of the file it
    /// replaces; the two are compared a block at a time after their sizes, because reading both
    /// whole into memory was most of what `--backup` added to writing a large file.
    pub(crate) fn matches_file(&self, head: Head, path: &Path) -> Result<bool, HistoryError> {
        let regular = |p: &Path| {
            self.ws
                .open_regular(p, rustix::fs::OFlags::RDONLY, rustix::fs::Mode::empty())
        };
        let snapshot = match regular(&self.snapshot_path(head.current)) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(self.io("read")(e)),
        };
        let file = regular(path).map_err(self.io("compare a file with"))?;
        same_content(file, snapshot).map_err(self.io("compare a file with"))
    }

    /// Records `content` as the version after the current one, dropping any versions after the
    /// head (a new write after an undo forgets the undone future, as editors do).
    ///
    /// The new snapshot takes the number of the first undone version. Until the head has moved,
    /// that undone version must stay reachable (a crash in between must not lose it to a write
    /// that was never acknowledged), so it first gets a second name, `NNNNN.undone`, which
    /// [`Versions::settle`] either drops (the write committed) or puts back (it did not).
    pub(crate) fn append(&self, head: Option<Head>, content: &[u8]) -> Result<Head, HistoryError> {
        self.ws.create_dirs(&self.dir).map_err(self.io("create"))?;
        self.settle(head)?;
        let version = head.map_or(1, |h| h.current + 1);
        let keep_undone = head.is_some_and(|h| h.newest >= version)
            && match self
                .ws
                .hard_link(&self.snapshot_path(version), &self.undone_path(version))
            {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                Err(e) => return Err(self.io("keep an undone version of")(e)),
            };
        if keep_undone {
            self.ws.sync_dir(&self.dir).map_err(self.io("sync"))?;
        }
        self.ws
            .replace_file(&self.snapshot_path(version), content, Some(0o600), false)
            .map_err(self.io("write"))?;
        let new = Head {
            current: version,
            newest: version,
        };
        self.set_head(new)?;
        if keep_undone {
            self.ws
                .remove_file(&self.undone_path(version))
                .map_err(self.io("tidy"))?;
        }
        // Only the dropped range is touched, never the whole directory.
        if let Some(old) = head {
            for stale in version + 1..=old.newest {
                self.ws
                    .remove_file(&self.snapshot_path(stale))
                    .map_err(self.io("trim"))?;
            }
        }
        Ok(new)
    }
}

/// True when two open files have the same bytes: sizes first, then block by block.
fn same_content(mut a: std::fs::File, mut b: std::fs::File) -> io::Result<bool> {
    use std::io::Read;
    const BLOCK: usize = 64 * 1024;
    if a.metadata()?.len() != b.metadata()?.len() {
        return Ok(false);
    }
    let mut left = vec![0u8; BLOCK];
    let mut right = vec![0u8; BLOCK];
    loop {
        let n = a.read(&mut left)?;
        if n == 0 {
            // Both must end here (either may have changed size since it was measured).
            return Ok(b.read(&mut right[..1])? == 0);
        }
        match b.read_exact(&mut right[..n]) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(e),
        }
        if left[..n] != right[..n] {
            return Ok(false);
        }
    }
}

/// The versions directory of `rel` inside `state`, wrapped.
pub(crate) fn for_path(ws: &Workspace, state: &Path, rel: &Path) -> Result<Versions, HistoryError> {
    Ok(Versions::new(
        ws.clone(),
        super::layout::versions_dir(state, rel)?,
        crate::guard::display_relative(rel),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three versions with the head moved back to the first, as after `undo_file` steps: 2.
    #[test]
    fn files_compare_equal_only_when_every_byte_matches() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).expect("write");
            std::fs::File::open(path).expect("open")
        };
        // Several blocks, so the comparison crosses block boundaries.
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut late = big.clone();
        late[150_000] ^= 1;
        let same = |a: &[u8], b: &[u8]| same_content(file("a", a), file("b", b)).expect("compare");
        assert!(same(&big, &big));
        assert!(same(b"", b""));
        assert!(!same(&big, &late), "a difference in a later block");
        assert!(!same(&big, &big[..big.len() - 1]), "a shorter file");
        assert!(!same(b"abc", b"abd"));
    }

    fn versions_in(dir: &tempfile::TempDir) -> Versions {
        let ws = Workspace::open(dir.path()).expect("ws");
        Versions::new(ws, PathBuf::from("v"), "f".into())
    }

    fn undone_history() -> (tempfile::TempDir, Versions) {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = versions_in(&dir);
        let mut h = v.append(None, b"one").expect("1");
        h = v.append(Some(h), b"two").expect("2");
        h = v.append(Some(h), b"three").expect("3");
        v.move_head(h, 1).expect("undo");
        (dir, v)
    }

    #[test]
    fn a_write_after_undo_cut_short_before_the_head_moved_loses_no_undone_version() {
        let (dir, v) = undone_history();
        let at = |p: PathBuf| dir.path().join(p);
        // The crash state: the undone version 2 was given its second name and the new snapshot
        // took number 2, but the head still says 1 of 3.
        std::fs::hard_link(at(v.snapshot_path(2)), at(v.undone_path(2))).expect("link");
        v.ws.replace_file(&v.snapshot_path(2), b"never acknowledged", None, false)
            .expect("write");
        let head = v.head().expect("head");
        v.settle(head).expect("settle");
        assert_eq!(v.snapshot(2).expect("read").as_deref(), Some(&b"two"[..]));
        assert!(!at(v.undone_path(2)).exists());
        assert_eq!(
            head,
            Some(Head {
                current: 1,
                newest: 3
            })
        );
    }

    #[test]
    fn a_write_after_undo_cut_short_right_after_the_second_name_loses_nothing() {
        let (dir, v) = undone_history();
        let at = |p: PathBuf| dir.path().join(p);
        std::fs::hard_link(at(v.snapshot_path(2)), at(v.undone_path(2))).expect("link");
        let head = v.head().expect("head");
        v.settle(head).expect("settle");
        assert!(!at(v.undone_path(2)).exists());
        assert_eq!(v.snapshot(2).expect("read").as_deref(), Some(&b"two"[..]));
        // And the next write goes through.
        let new = v.append(head, b"new").expect("append");
        assert_eq!(
            new,
            Head {
                current: 2,
                newest: 2
            }
        );
    }

    #[test]
    fn a_write_after_undo_cut_short_after_the_head_moved_keeps_the_new_version() {
        let (dir, v) = undone_history();
        let at = |p: PathBuf| dir.path().join(p);
        std::fs::hard_link(at(v.snapshot_path(2)), at(v.undone_path(2))).expect("link");
        v.ws.replace_file(&v.snapshot_path(2), b"new", None, false)
            .expect("write");
        v.set_head(Head {
            current: 2,
            newest: 2,
        })
        .expect("head");
        let head = v.head().expect("head");
        v.settle(head).expect("settle");
        assert_eq!(v.snapshot(2).expect("read").as_deref(), Some(&b"new"[..]));
        assert!(!at(v.undone_path(2)).exists());
    }

    #[test]
    fn a_completed_write_after_undo_leaves_no_second_name() {
        let (dir, v) = undone_history();
        let at = |p: PathBuf| dir.path().join(p);
        let head = v.head().expect("head");
        let new = v.append(head, b"new").expect("append");
        assert_eq!(
            new,
            Head {
                current: 2,
                newest: 2
            }
        );
        assert!(!at(v.undone_path(2)).exists());
        assert_eq!(v.snapshot(2).expect("read").as_deref(), Some(&b"new"[..]));
        assert_eq!(v.snapshot(3).expect("read"), None);
    }

    #[test]
    fn append_after_undo_drops_the_undone_future() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = versions_in(&dir);
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
        let v = versions_in(&dir);
        assert!(v.head().is_err());
    }
}
