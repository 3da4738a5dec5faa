//! One file's version history: full snapshots `00001`, `00002`, … and a `.head` naming the
//! current version, all directly in the file's history directory (see [`super::layout`]).
//!
//! The redo chain is the run of snapshots right above the head: redo is possible exactly when
//! snapshot `current + 1` exists (one `stat`), and nothing ever lists the directory. Undo and
//! redo only rewrite `.head`; a write appends `current + 1`.
//!
//! A write after an undo must first take the undone versions out of the redo chain without
//! losing them to a crash before the new head is durable. It renames them, lowest first, to a
//! second name (`00004` → `00004.undone`), writes the new snapshot, moves the head, and only then
//! removes the second names, highest first. Which of those steps happened is always readable
//! from the disk, and [`Versions::settle`] (run under the store lock before every change to the
//! history) finishes or reverses it:
//!
//! - `<head>.undone` exists: the head moved, so the write committed; the second names are
//!   removed, highest first, so `<head>.undone` (the evidence) goes last.
//! - otherwise `<head + 1>.undone` exists: the head did not move; the second names go back,
//!   highest first (replacing a new snapshot that was never acknowledged), so
//!   `<head + 1>.undone` goes back last and a crash in between is resumed.
//!
//! Snapshots are written and synced before `.head` moves, and `.head` itself is replaced
//! atomically. A write cut short after its snapshot but before its head leaves that snapshot
//! above the head, where it reads as one redo step (the content of the call that never
//! completed); the next write takes it out of the chain like any undone version.

use std::io;
use std::path::{Path, PathBuf};

use super::layout::{snapshot_name, undone_name, HEAD_FILE, MAX_VERSION};
use super::HistoryError;
use crate::Workspace;

/// Where a file's history stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The version the file is at (what undo steps back from).
    pub current: u64,
}

/// The history directory of one file (root-relative, reached through the workspace layer).
pub struct Versions {
    ws: Workspace,
    dir: PathBuf,
    /// The file as the client named it, for messages.
    shown: String,
}

impl Versions {
    /// The history kept in root-relative `dir` for the file shown to clients as `shown`.
    pub fn new(ws: Workspace, dir: PathBuf, shown: String) -> Self {
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
    pub fn head(&self) -> Result<Option<Head>, HistoryError> {
        let text = match self.ws.read(&self.dir.join(HEAD_FILE)) {
            Ok(t) => String::from_utf8_lossy(&t).into_owned(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io("read")(e)),
        };
        match parse_head(&text) {
            Some(current) => Ok(Some(Head { current })),
            None => Err(self.io("read")(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "its head file {} is damaged (it must hold one version number from 1 to {MAX_VERSION}); the snapshots beside it are intact and can be copied back by hand",
                    self.dir.join(HEAD_FILE).display()
                ),
            ))),
        }
    }

    fn set_head(&self, current: u64) -> Result<Head, HistoryError> {
        self.ws
            .replace_file(
                &self.dir.join(HEAD_FILE),
                format!("{current}\n").as_bytes(),
                None,
                false,
            )
            .map_err(self.io("update"))?;
        Ok(Head { current })
    }

    /// Moves the head to `current` (undo/redo).
    pub fn move_head(&self, current: u64) -> Result<Head, HistoryError> {
        self.set_head(current)
    }

    fn snapshot_path(&self, version: u64) -> PathBuf {
        self.dir.join(snapshot_name(version))
    }

    fn undone_path(&self, version: u64) -> PathBuf {
        self.dir.join(undone_name(version))
    }

    fn exists(&self, p: &Path) -> Result<bool, HistoryError> {
        self.ws.exists(p).map_err(self.io("read"))
    }

    /// True when snapshot `version` is on disk (one `stat`). A number past [`MAX_VERSION`] never
    /// is: the store does not write one, so a file with such a name is not a snapshot.
    pub fn has_snapshot(&self, version: u64) -> Result<bool, HistoryError> {
        if !(1..=MAX_VERSION).contains(&version) {
            return Ok(false);
        }
        self.exists(&self.snapshot_path(version))
    }

    /// The newest version redo can reach from `head`: the top of the run of snapshots right
    /// above it. Found by doubling and then halving the distance, so it costs a few `stat`s
    /// (logarithmic in the number of undone versions) and never lists the directory.
    pub fn newest(&self, head: Head) -> Result<u64, HistoryError> {
        let c = head.current;
        if !self.has_snapshot(c + 1)? {
            return Ok(c);
        }
        // Invariant: c + low exists, c + high does not.
        let (mut low, mut high) = (1u64, 2u64);
        while self.has_snapshot(c.saturating_add(high))? {
            low = high;
            high = high.saturating_mul(2);
            if high == u64::MAX {
                break;
            }
        }
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if self.has_snapshot(c + mid)? {
                low = mid;
            } else {
                high = mid;
            }
        }
        Ok(c + low)
    }

    /// The highest `v >= from` such that every second name `from..=v` exists (`from - 1` when
    /// `from`'s does not).
    fn undone_run(&self, from: u64) -> Result<u64, HistoryError> {
        let mut top = from - 1;
        while top < MAX_VERSION && self.exists(&self.undone_path(top + 1))? {
            top += 1;
        }
        Ok(top)
    }

    /// Finishes what a crash interrupted in [`Versions::append`] over undone versions (see the
    /// module doc): a committed write loses its second names, an uncommitted one gives them
    /// back. Called (under the store lock) before every change to this history.
    pub fn settle(&self, head: Option<Head>) -> Result<(), HistoryError> {
        let current = head.map_or(0, |h| h.current);
        if current >= 1 && self.exists(&self.undone_path(current))? {
            let top = self.undone_run(current)?;
            for v in (current..=top).rev() {
                self.ws
                    .remove_file(&self.undone_path(v))
                    .map_err(self.io("tidy"))?;
            }
            return Ok(());
        }
        let top = self.undone_run(current + 1)?;
        if top > current {
            for v in (current + 1..=top).rev() {
                self.ws
                    .rename_replace(&self.undone_path(v), &self.snapshot_path(v))
                    .map_err(self.io("restore an undone version in"))?;
            }
        }
        Ok(())
    }

    /// The content of `version`; `None` if that snapshot is missing.
    pub fn snapshot(&self, version: u64) -> Result<Option<Vec<u8>>, HistoryError> {
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
    pub fn matches_file(&self, head: Head, path: &Path) -> Result<bool, HistoryError> {
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

    /// Records `content` as the version after the current one, taking any versions after the
    /// head out of the redo chain (a new write after an undo forgets the undone future, as
    /// editors do). See the module doc for the order of the steps and why a crash between any
    /// two of them loses nothing.
    ///
    /// Without an undone future this is one snapshot and one head: the only `stat` is the one
    /// that finds no snapshot above the head. With one, the undone versions are renamed and
    /// then removed once, which is the only part that grows with their number.
    pub fn append(&self, head: Option<Head>, content: &[u8]) -> Result<Head, HistoryError> {
        let version = head.map_or(1, |h| h.current + 1);
        if version > MAX_VERSION {
            return Err(HistoryError::InvalidArgument(format!(
                "the history of {} already holds {MAX_VERSION} versions, the most one history can have; move its history directory {} out of the store by hand to start a new one",
                self.shown,
                self.dir.display()
            )));
        }
        self.ws.create_dirs(&self.dir).map_err(self.io("create"))?;
        self.settle(head)?;
        // Lowest first, so that a crash leaves one run of second names starting right above
        // the head, which `settle` puts back whole.
        let mut top = version - 1;
        while top < MAX_VERSION {
            match self
                .ws
                .rename_no_replace(&self.snapshot_path(top + 1), &self.undone_path(top + 1))
            {
                Ok(()) => top += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) => return Err(self.io("set aside an undone version of")(e)),
            }
        }
        self.ws
            .replace_file(&self.snapshot_path(version), content, Some(0o600), false)
            .map_err(self.io("write"))?;
        let new = self.set_head(version)?;
        // Highest first: the second name of `version` is the evidence that the head moved.
        for v in (version..=top).rev() {
            self.ws
                .remove_file(&self.undone_path(v))
                .map_err(self.io("tidy"))?;
        }
        Ok(new)
    }
}

/// The current version a `.head` file's text names: one number, from 1 to [`MAX_VERSION`].
pub fn parse_head(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    match (words.next().map(str::parse::<u64>), words.next()) {
        (Some(Ok(n)), None) if (1..=MAX_VERSION).contains(&n) => Some(n),
        _ => None,
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

/// The history of the file `rel` inside `state`, wrapped.
pub fn for_path(ws: &Workspace, state: &Path, rel: &Path) -> Result<Versions, HistoryError> {
    Ok(Versions::new(
        ws.clone(),
        super::layout::history_tree(state, rel)?,
        crate::guard::display_relative(rel),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Three versions with the head moved back to the first, as after `undo_file` steps: 2.
    fn undone_history() -> (tempfile::TempDir, Versions) {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = versions_in(&dir);
        let mut h = v.append(None, b"one").expect("1");
        h = v.append(Some(h), b"two").expect("2");
        v.append(Some(h), b"three").expect("3");
        v.move_head(1).expect("undo");
        (dir, v)
    }

    fn content(v: &Versions, n: u64) -> Option<Vec<u8>> {
        v.snapshot(n).expect("read")
    }

    #[test]
    fn the_head_is_one_number_and_redo_reaches_the_top_of_the_chain() {
        let (dir, v) = undone_history();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("v/.head")).expect("head"),
            "1\n"
        );
        let head = v.head().expect("head").expect("some");
        assert_eq!(v.newest(head).expect("newest"), 3);
        assert_eq!(v.newest(Head { current: 3 }).expect("newest"), 3);
    }

    #[test]
    fn newest_finds_the_top_of_a_long_chain() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = versions_in(&dir);
        let mut h = None;
        for i in 0..37u32 {
            h = Some(v.append(h, i.to_string().as_bytes()).expect("append"));
        }
        for at in [1, 2, 5, 20, 36, 37] {
            assert_eq!(v.newest(Head { current: at }).expect("newest"), 37, "{at}");
        }
    }

    #[test]
    fn a_write_after_undo_cut_short_before_the_head_moved_loses_no_undone_version() {
        let (dir, v) = undone_history();
        let at = |p: PathBuf| dir.path().join(p);
        // The crash state: both undone versions set aside, the new snapshot written as 2, the
        // head still at 1.
        for n in [2, 3] {
            std::fs::rename(at(v.snapshot_path(n)), at(v.undone_path(n))).expect("rename");
        }
        v.ws.replace_file(&v.snapshot_path(2), b"never acknowledged", None, false)
            .expect("write");
        let head = v.head().expect("head");
        v.settle(head).expect("settle");
        assert_eq!(content(&v, 2).as_deref(), Some(&b"two"[..]));
        assert_eq!(content(&v, 3).as_deref(), Some(&b"three"[..]));
        assert!(!at(v.undone_path(2)).exists() && !at(v.undone_path(3)).exists());
        assert_eq!(head, Some(Head { current: 1 }));
        assert_eq!(v.newest(Head { current: 1 }).expect("newest"), 3);
    }

    #[test]
    fn a_write_after_undo_cut_short_halfway_through_setting_aside_loses_nothing() {
        let (dir, v) = undone_history();
        let at = |p: PathBuf| dir.path().join(p);
        std::fs::rename(at(v.snapshot_path(2)), at(v.undone_path(2))).expect("rename");
        let head = v.head().expect("head");
        v.settle(head).expect("settle");
        assert!(!at(v.undone_path(2)).exists());
        assert_eq!(content(&v, 2).as_deref(), Some(&b"two"[..]));
        assert_eq!(content(&v, 3).as_deref(), Some(&b"three"[..]));
        // And the next write goes through.
        let new = v.append(head, b"new").expect("append");
        assert_eq!(new, Head { current: 2 });
        assert_eq!(content(&v, 3), None);
    }

    #[test]
    fn a_write_after_undo_cut_short_after_the_head_moved_keeps_the_new_version() {
        let (dir, v) = undone_history();
        let at = |p: PathBuf| dir.path().join(p);
        for n in [2, 3] {
            std::fs::rename(at(v.snapshot_path(n)), at(v.undone_path(n))).expect("rename");
        }
        v.ws.replace_file(&v.snapshot_path(2), b"new", None, false)
            .expect("write");
        v.set_head(2).expect("head");
        // Cut short after removing the highest second name only.
        std::fs::remove_file(at(v.undone_path(3))).expect("rm");
        let head = v.head().expect("head");
        v.settle(head).expect("settle");
        assert_eq!(content(&v, 2).as_deref(), Some(&b"new"[..]));
        assert!(!at(v.undone_path(2)).exists());
        assert_eq!(v.newest(Head { current: 2 }).expect("newest"), 2);
    }

    #[test]
    fn a_completed_write_after_undo_leaves_no_second_name() {
        let (dir, v) = undone_history();
        let at = |p: PathBuf| dir.path().join(p);
        let head = v.head().expect("head");
        let new = v.append(head, b"new").expect("append");
        assert_eq!(new, Head { current: 2 });
        for n in [2, 3] {
            assert!(!at(v.undone_path(n)).exists());
        }
        assert_eq!(content(&v, 2).as_deref(), Some(&b"new"[..]));
        assert_eq!(content(&v, 3), None);
        assert_eq!(content(&v, 1).as_deref(), Some(&b"one"[..]));
    }

    #[test]
    fn a_damaged_head_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("v")).expect("mkdir");
        let v = versions_in(&dir);
        for bad in [
            "garbage",
            "0\n",
            "1 2\n",
            "",
            "18446744073709551615\n",
            "1000000000\n",
        ] {
            std::fs::write(dir.path().join("v/.head"), bad).expect("write");
            assert!(v.head().is_err(), "{bad:?}");
        }
    }
}
