//! Converting a store written in the previous layout (`files/<path>/#versions/{NNNNN,head}`,
//! `#`-escaped names, `head` holding "current newest") to the documented one, once, on first
//! open, under the store lock.
//!
//! A store is in the previous layout when it has no [`LAYOUT_MARK`] and a `files/` directory
//! (the previous code made `files/` with the first snapshot and never removed it). The
//! conversion never changes a file of the old store in place; it works in three phases, and a
//! SIGKILL between any two system calls leaves a store that the next open finishes converting:
//!
//! 1. **Build** `.converting/`: `tree/` (the new form of `files/`), `trash/NNNNN.history`
//!    and `orphans/<name>` (the new form of each old trash history and orphan). Snapshots are
//!    *hard links* to the old ones (no data is copied, and the old store stays whole); each
//!    `head` "current newest" becomes a `.head` "current"; a version set aside by a write after
//!    an undo that was cut short goes back under its number, as the old code would have put it
//!    back; snapshots above "newest" (never acknowledged) are not linked. Every directory is
//!    synced once filled. A `.converting/` found at the start is a build that never committed:
//!    it holds only links and new `.head` files, so it is removed and built again.
//! 2. **Commit**: one `rename(.converting, .converted)`. Before it the store is in the old
//!    layout; after it, in the new one.
//! 3. **Place** (idempotent, resumed whenever `.converted/` exists): each old trash history and
//!    orphan is renamed into `.converted/old-*` and its new form renamed into its place; then
//!    `files/` is renamed to `.converted/old-files` (before the new trees, one of which may
//!    itself be called `files`) and each tree of `.converted/tree/` is renamed to the top of
//!    the store (anything unexpected already there is set aside the same way). Then
//!    [`LAYOUT_MARK`] is written, and `.converted/` is emptied: a file is removed if it is also
//!    linked into the new trees, or is an old `head`, a second name of an undone version, or a
//!    temporary; what is left (anything the old layout did not explain, such as a stray
//!    snapshot) is moved to `.orphans/old-layout-<time>-<pid>/` rather than deleted.
//!
//! Once [`LAYOUT_MARK`] is written every tree is in place, so a resumed phase 3 that finds the
//! mark only empties `.converted/`: a `files/` at the top is then the new layout's history of a
//! workspace folder named `files`, never the old tree, and is left where it is.
//!
//! For tests, [`super::crash_point`] with `convert:N` makes the process SIGKILL itself (no
//! clean-up runs) right after the conversion's Nth change to the disk, so a crash at every
//! point can be tried deterministically.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::crash_point::{Op, Steps};
use super::layout::{
    self, old, CONVERTED_DIR, CONVERTING_DIR, HEAD_FILE, LAYOUT_MARK, LAYOUT_MARK_TEXT,
    ORPHANS_DIR, TRASH_DIR, TRASH_HISTORY_SUFFIX,
};
use super::{io_err, HistoryError};
use crate::{Entry, Workspace};

/// Names of `.orphans/` entries made by `filesystem check --repair`: debris it set aside, not
/// histories, so they are left as they are.
const CHECK_ORPHAN_PREFIX: &str = "check-";

/// What the store at `.filesystem/` is, as far as its layout goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// In the documented layout (or empty).
    Current,
    /// In the previous layout: converted on the next open.
    Old,
    /// A conversion was committed and is being finished.
    Finishing,
}

/// Which layout the store at `state` is in, read without changing anything (for `check`).
pub fn inspect(ws: &Workspace, state: &Path) -> io::Result<Found> {
    if is_dir(ws, &state.join(CONVERTED_DIR))? {
        return Ok(Found::Finishing);
    }
    if ws.exists(&state.join(LAYOUT_MARK))? {
        return Ok(Found::Current);
    }
    if is_dir(ws, &state.join(old::FILES_DIR))? {
        return Ok(Found::Old);
    }
    Ok(Found::Current)
}

fn is_dir(ws: &Workspace, rel: &Path) -> io::Result<bool> {
    Ok(matches!(ws.stat(rel)?, Some(s) if s.is_dir()))
}

/// Brings the store at `state` into the documented layout (a no-op after the first time) and
/// gives it its `.gitignore` if it lacks one. The caller holds the store lock.
pub fn ensure(ws: &Workspace, state: &Path) -> Result<(), HistoryError> {
    let ctx = "cannot convert the history store to the current layout";
    mark_ignored(ws, state).map_err(io_err("cannot write .filesystem/.gitignore"))?;
    let mut c = Conversion {
        ws,
        state,
        steps: Steps::new(Op::Convert),
    };
    match inspect(ws, state).map_err(io_err(ctx))? {
        Found::Current => {
            if !ws.exists(&state.join(LAYOUT_MARK)).map_err(io_err(ctx))? {
                // A new store, or one written by the successor without a mark.
                c.remove_tree(&state.join(CONVERTING_DIR))
                    .map_err(io_err(ctx))?;
                c.mark().map_err(io_err(ctx))?;
            }
            Ok(())
        }
        Found::Old => {
            c.build().map_err(io_err(ctx))?;
            c.place().map_err(io_err(ctx))
        }
        Found::Finishing => c.place().map_err(io_err(ctx)),
    }
}

/// Writes `.filesystem/.gitignore` ("*") when it is missing; a file already there (the user's
/// own, or ours) is left alone.
fn mark_ignored(ws: &Workspace, state: &Path) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Write;
    let path = state.join(crate::STORE_GITIGNORE);
    if ws.stat(&path)?.is_some() {
        return Ok(());
    }
    match ws.open_at(
        &path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        Mode::from_raw_mode(0o644),
    ) {
        Ok(fd) => std::fs::File::from(fd).write_all(b"*\n"),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

struct Conversion<'a> {
    ws: &'a Workspace,
    state: &'a Path,
    /// Where each change to the disk is reported (the crash tests' hook).
    steps: Steps,
}

/// The head of a previous-layout versions directory.
enum OldHead {
    /// "current newest".
    Sound { current: u64, newest: u64 },
    /// Unreadable text, carried over as it is (check reports it in either layout).
    Damaged(Vec<u8>),
    /// No head (a first write cut short).
    Missing,
}

impl Conversion<'_> {
    /// Counts one change to the disk, and stops the process there when the test hook says so.
    fn effect(&mut self) {
        self.steps.done();
    }

    fn at(&self, name: &str) -> PathBuf {
        self.state.join(name)
    }

    fn entries(&self, rel: &Path) -> io::Result<Vec<Entry>> {
        match self.ws.entries(rel) {
            Ok(mut l) => {
                l.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(l)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn mkdir(&mut self, rel: &Path) -> io::Result<()> {
        self.ws.create_dirs(rel)?;
        self.effect();
        Ok(())
    }

    fn link(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.ws.hard_link(from, to)?;
        self.effect();
        Ok(())
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.ws.rename_no_replace(from, to)?;
        self.effect();
        Ok(())
    }

    fn sync(&mut self, rel: &Path) -> io::Result<()> {
        self.ws.sync_dir(rel)
    }

    fn mark(&mut self) -> io::Result<()> {
        self.ws
            .replace_file(&self.at(LAYOUT_MARK), LAYOUT_MARK_TEXT, Some(0o644), false)?;
        self.effect();
        Ok(())
    }

    /// Phases 1 and 2: builds `.converting/` from scratch and commits it.
    fn build(&mut self) -> io::Result<()> {
        let conv = self.at(CONVERTING_DIR);
        self.remove_tree(&conv)?;
        for sub in ["tree", "trash", "orphans"] {
            self.mkdir(&conv.join(sub))?;
        }
        self.convert_tree(&self.at(old::FILES_DIR), &conv.join("tree"))?;
        let trash = self.at(TRASH_DIR);
        for e in self.entries(&trash)? {
            let is_history = e
                .name
                .as_bytes()
                .strip_suffix(TRASH_HISTORY_SUFFIX.as_bytes())
                .and_then(layout::trash_id)
                .is_some();
            if is_history && e.stat.is_dir() {
                self.convert_root(&trash.join(&e.name), &conv.join("trash").join(&e.name))?;
            }
        }
        let orphans = self.at(ORPHANS_DIR);
        for e in self.entries(&orphans)? {
            if e.stat.is_dir()
                && !e
                    .name
                    .as_bytes()
                    .starts_with(CHECK_ORPHAN_PREFIX.as_bytes())
            {
                self.convert_root(&orphans.join(&e.name), &conv.join("orphans").join(&e.name))?;
            }
        }
        self.sync(&conv)?;
        self.rename(&conv, &self.at(CONVERTED_DIR))?;
        self.sync(self.state)
    }

    /// An old trash history or orphan: a file's `#versions` directory itself (it holds a head
    /// or snapshots), or a directory's tree.
    fn convert_root(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let holds_versions = self.entries(from)?.iter().any(|e| {
            e.stat.is_file()
                && (e.name == old::HEAD_FILE
                    || layout::snapshot_version(e.name.as_bytes()).is_some())
        });
        if holds_versions {
            self.mkdir(to)?;
            self.convert_versions(from, to)?;
            self.sync(to)
        } else {
            self.convert_tree(from, to)
        }
    }

    /// An old history tree (directories named with the `#` escape, each possibly holding a
    /// `#versions`) into a new one at `to`. Iterative: a tree is as deep as the workspace was.
    fn convert_tree(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
        while let Some((o, n)) = stack.pop() {
            self.mkdir(&n)?;
            for e in self.entries(&o)? {
                if !e.stat.is_dir() {
                    continue;
                }
                if e.name == old::VERSIONS_DIR {
                    self.convert_versions(&o.join(&e.name), &n)?;
                } else if let Some(ws_name) = old::decode(&e.name) {
                    stack.push((o.join(&e.name), n.join(layout::encode(&ws_name))));
                }
                // Any other `#` name was never written by the old store: left behind, and
                // kept among the leftovers when the old tree is cleared.
            }
            self.sync(&n)?;
        }
        Ok(())
    }

    fn old_head(&self, versions: &Path) -> io::Result<OldHead> {
        let text = match self.ws.read(&versions.join(old::HEAD_FILE)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(OldHead::Missing),
            Err(e) => return Err(e),
        };
        let s = String::from_utf8_lossy(&text);
        let mut nums = s.split_whitespace().map(str::parse::<u64>);
        Ok(match (nums.next(), nums.next(), nums.next()) {
            (Some(Ok(current)), Some(Ok(newest)), None)
                if current >= 1 && current <= newest && newest <= layout::MAX_VERSION =>
            {
                OldHead::Sound { current, newest }
            }
            _ => OldHead::Damaged(text),
        })
    }

    /// One old `#versions` directory into the file's new history directory `to`.
    fn convert_versions(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let head = self.old_head(from)?;
        // The old code's own recovery (its `settle`): with an undone future, a second name at
        // current + 1 is the undone version a cut-short write set aside, and goes back.
        let put_back = match head {
            OldHead::Sound { current, newest } if newest > current => {
                let name = layout::undone_name(current + 1);
                self.ws
                    .exists(&from.join(&name))?
                    .then_some((current + 1, name))
            }
            _ => None,
        };
        for e in self.entries(from)? {
            if !e.stat.is_file() {
                continue;
            }
            let Some(v) = layout::snapshot_version(e.name.as_bytes()) else {
                continue;
            };
            let wanted = match head {
                OldHead::Sound { newest, .. } => v <= newest,
                _ => true,
            };
            if wanted && put_back.as_ref().is_none_or(|(p, _)| *p != v) {
                self.link(&from.join(&e.name), &to.join(&e.name))?;
            }
        }
        if let Some((v, name)) = put_back {
            self.link(&from.join(name), &to.join(layout::snapshot_name(v)))?;
        }
        let text = match head {
            OldHead::Sound { current, .. } => Some(format!("{current}\n").into_bytes()),
            OldHead::Damaged(t) => Some(t),
            OldHead::Missing => None,
        };
        if let Some(text) = text {
            self.ws
                .replace_file(&to.join(HEAD_FILE), &text, Some(0o600), false)?;
            self.effect();
        }
        Ok(())
    }

    /// Phase 3: moves the committed trees into place, marks the store, clears the old tree.
    fn place(&mut self) -> io::Result<()> {
        let done = self.at(CONVERTED_DIR);
        // The mark is written only once every tree is in place: what is left is emptying
        // `.converted/`. Going through the moves again would take the new layout's `files/` (the
        // history of a workspace folder of that name) for the old tree and clear it away.
        if self.ws.exists(&self.at(LAYOUT_MARK))? {
            return self.clear_old(&done);
        }
        for (new, live, aside) in [
            ("trash", TRASH_DIR, "old-trash"),
            ("orphans", ORPHANS_DIR, "old-orphans"),
        ] {
            for e in self.entries(&done.join(new))? {
                let (n, l, a) = (
                    done.join(new).join(&e.name),
                    self.at(live).join(&e.name),
                    done.join(aside).join(&e.name),
                );
                self.swap_in(&n, &l, &a)?;
            }
        }
        let files = self.at(old::FILES_DIR);
        let old_files = done.join("old-files");
        if !self.ws.exists(&old_files)? && is_dir(self.ws, &files)? {
            self.rename(&files, &old_files)?;
        }
        for e in self.entries(&done.join("tree"))? {
            let (n, l, a) = (
                done.join("tree").join(&e.name),
                self.state.join(&e.name),
                done.join("old-top").join(&e.name),
            );
            self.swap_in(&n, &l, &a)?;
        }
        self.sync(self.state)?;
        self.mark()?;
        self.sync(self.state)?;
        self.clear_old(&done)
    }

    /// Puts `new` at `live`, first setting aside whatever is at `live` as `aside`. Resumable:
    /// once `new` is gone it was placed.
    fn swap_in(&mut self, new: &Path, live: &Path, aside: &Path) -> io::Result<()> {
        if !self.ws.exists(new)? {
            return Ok(());
        }
        if self.ws.exists(live)? {
            if let Some(parent) = aside.parent() {
                self.ws.create_dirs(parent)?;
            }
            self.rename(live, aside)?;
        }
        if let Some(parent) = live.parent() {
            self.ws.create_dirs(parent)?;
        }
        self.rename(new, live)
    }

    /// Empties `.converted/` of everything the new trees hold or the old layout explains, and
    /// moves what is left to `.orphans/` (see the module doc).
    fn clear_old(&mut self, done: &Path) -> io::Result<()> {
        self.remove_tree_where(done, |name, nlink| {
            nlink > 1
                || name == old::HEAD_FILE
                || layout::undone_version(name.as_bytes()).is_some()
                || crate::temp::is_temp_name(name.as_bytes())
        })?;
        if self.ws.exists(done)? {
            let orphans = self.at(ORPHANS_DIR);
            self.ws.create_dirs(&orphans)?;
            let name = format!("old-layout-{}-{}", super::log::now(), std::process::id());
            self.rename(done, &orphans.join(name))?;
        }
        Ok(())
    }

    /// Removes the tree at `rel` (a build that never committed: only links and new heads).
    fn remove_tree(&mut self, rel: &Path) -> io::Result<()> {
        self.remove_tree_where(rel, |_, _| true)
    }

    /// Removes every file below `rel` for which `remove(name, links)` says so, and every
    /// directory that is empty then (`rel` included). No recursion, no symlink followed (a
    /// symlink is a file here: removed only if `remove` says so, never entered).
    fn remove_tree_where(
        &mut self,
        rel: &Path,
        remove: impl Fn(&OsStr, u64) -> bool,
    ) -> io::Result<()> {
        if !is_dir(self.ws, rel)? {
            return Ok(());
        }
        // (directory, whether its children were already visited)
        let mut stack: Vec<(PathBuf, bool)> = vec![(rel.to_path_buf(), false)];
        while let Some((dir, visited)) = stack.pop() {
            if visited {
                let (parent, name) = self.ws.parent(&dir)?;
                match parent.rmdir(name) {
                    Ok(()) => self.effect(),
                    Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
                continue;
            }
            stack.push((dir.clone(), true));
            for e in self.entries(&dir)? {
                let child = dir.join(&e.name);
                if e.stat.is_dir() {
                    stack.push((child, false));
                } else if remove(&e.name, e.stat.nlink) {
                    self.ws.remove_file(&child)?;
                    self.effect();
                }
            }
        }
        Ok(())
    }
}
