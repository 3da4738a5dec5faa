//! The trash: deleting moves things into `.trash/NNNNN` (and their history into
//! `NNNNN.history/`), restoring moves them back. `.deletes` is the record of both.

use std::io;
use std::path::{Path, PathBuf};

use super::crash_point::{Op, Steps};
use super::durable::occupied;
use super::log::{field_path, path_field, HistoryLog};
use super::{already_exists_or_io, io_err, layout, log, HistoryError, Store, StoreLock};
use crate::guard::display_relative;
use crate::Stat;

/// How many entries the size of a trashed directory may add up before it is given as it stands:
/// listing the trash must not walk a huge tree.
const SIZE_BUDGET: usize = 100_000;

/// The most moves [`Store::trash_all`] announces before it makes them: a crash can leave at
/// most this many announced and not made, which the logs and the recoveries tolerate.
const TRASH_BATCH: usize = 256;

/// A move into the trash announced and not yet made: its id reserved, its `.deletes` line and
/// the journal's record written.
struct Departure<'a> {
    rel: &'a Path,
    shown: String,
    kind: EntryKind,
    id: u64,
    deleted_at: String,
    slot: PathBuf,
    /// The history that follows it into the trash, if it has one.
    history: Option<PathBuf>,
}

/// A restore checked and about to be made: the entry, where it goes, what it is.
struct Return {
    id: u64,
    rel: PathBuf,
    kind: EntryKind,
    slot: PathBuf,
}

/// The most trash ids one reservation of [`Store::next_trash_id`] saves at a time.
const MAX_RESERVED: u64 = 1024;

/// Trash ids one lock has saved in the counter and not used yet. A reservation doubles each
/// time (1, 2, 4, … up to [`MAX_RESERVED`]), so a lone delete writes the counter as it always
/// did and a revert of 10,000 deletes writes it a few dozen times, not 10,000. What is left when
/// the lock is let go is given back ([`ReservedIds::give_back`]); a crash before that leaves a
/// gap in the ids, never a repeat.
#[derive(Default)]
pub(super) struct ReservedIds {
    /// The next id to give and the end (exclusive) of what the counter holds.
    range: Option<(u64, u64)>,
    /// How many ids the next reservation takes.
    block: u64,
    /// Where the counter is, once reserved from.
    counter: Option<(crate::Workspace, PathBuf)>,
}

impl ReservedIds {
    /// Lowers the counter to the first id not given: none at or past it was used, so no id
    /// repeats, and the next lock goes on where this one stopped. A failure leaves the gap.
    pub(super) fn give_back(&mut self) {
        if let (Some((next, end)), Some((ws, counter))) = (self.range.take(), &self.counter) {
            if next < end {
                let _ = ws.replace_file(counter, format!("{next}\n").as_bytes(), None, false);
            }
        }
    }
}

/// What kind of thing an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory (with everything in it).
    Directory,
    /// A symbolic link (the link itself, never its target).
    Symlink,
    /// A FIFO, socket or device node.
    Other,
}

impl EntryKind {
    /// The kind of what `meta` (not following a final symlink) describes.
    pub fn of(meta: &Stat) -> EntryKind {
        if meta.is_symlink() {
            EntryKind::Symlink
        } else if meta.is_dir() {
            EntryKind::Directory
        } else if meta.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }

    /// The word shown to clients.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Directory => "directory",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "special file",
        }
    }
}

/// One thing waiting in the trash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrashEntry {
    /// The id `restore` takes; never reused.
    pub id: u64,
    /// Where it was when deleted (root-relative).
    pub path: PathBuf,
    /// When it was deleted (RFC 3339, UTC).
    pub deleted_at: String,
    /// File, directory, symlink…
    pub kind: EntryKind,
    /// Bytes: a file's length, or the total of the files inside a directory.
    pub size: u64,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// The trash id restored.
    pub id: u64,
    /// Where it was put back (root-relative).
    pub path: PathBuf,
    /// What it is.
    pub kind: EntryKind,
    /// True when a version history came back with it.
    pub history_restored: bool,
}

/// A `.deletes` entry.
#[derive(Debug, Clone)]
pub struct DeleteEvent {
    pub restore: bool,
    pub id: u64,
    pub path: PathBuf,
}

/// The entries of a delete log.
pub fn read_deletes(log: &HistoryLog) -> Result<Vec<DeleteEvent>, HistoryError> {
    let lines = log.read().map_err(io_err("cannot read the delete log"))?;
    Ok(lines
        .into_iter()
        .filter_map(|f| match f.as_slice() {
            [_time, action, id, path] => Some(DeleteEvent {
                restore: match action.as_slice() {
                    b"delete" => false,
                    b"restore" => true,
                    _ => return None,
                },
                id: std::str::from_utf8(id).ok()?.parse().ok()?,
                path: field_path(path),
            }),
            _ => None,
        })
        .collect())
}

impl Store {
    fn trash_dir(&self, state: &Path) -> PathBuf {
        state.join(layout::TRASH_DIR)
    }

    /// Reserves the next trash id. The counter is saved before the id is used, and the id also
    /// skips anything already in `.trash/` or named in `.deletes`, so ids never repeat even if the
    /// counter file were lost. A lock that trashes many things (a revert) saves the counter for
    /// a growing block of ids at a time ([`ReservedIds`]), not once per id.
    fn next_trash_id(
        &self,
        lock: &StoreLock,
        state: &Path,
        trash: &Path,
        steps: Steps,
    ) -> Result<u64, HistoryError> {
        let mut reserved = lock.reserved_ids();
        if let Some((next, end)) = reserved.range {
            if next < end && !occupied(&self.ws, &trash.join(layout::trash_name(next))) {
                reserved.range = Some((next + 1, end));
                return Ok(next);
            }
        }
        let counter = state.join(layout::TRASH_COUNTER);
        let saved = match self.ws.read(&counter) {
            Ok(t) => String::from_utf8_lossy(&t).trim().parse::<u64>().ok(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err("cannot read the trash counter")(e)),
        };
        let exhausted = || {
            HistoryError::InvalidArgument(
                "the trash has used every id a 64-bit counter can give, so nothing more can be deleted into it; move .filesystem/ aside to start a new store".into(),
            )
        };
        let mut id = match saved {
            Some(n) => n.max(1),
            // No (readable) counter: never reuse an id the log already knows.
            None => match self.index(state)?.max_id {
                Some(max) => max.checked_add(1).ok_or_else(exhausted)?,
                None => 1,
            },
        };
        while occupied(&self.ws, &trash.join(layout::trash_name(id))) {
            id = id.checked_add(1).ok_or_else(exhausted)?;
        }
        // The first trash of a lock saves exactly the next id, as a lone delete always did.
        let block = reserved.block.clamp(1, MAX_RESERVED);
        let end = id
            .checked_add(block)
            .or_else(|| id.checked_add(1))
            .ok_or_else(exhausted)?;
        self.ws
            .replace_file(&counter, format!("{end}\n").as_bytes(), None, false)
            .map_err(io_err("cannot update the trash counter"))?;
        steps.done();
        reserved.block = block.saturating_mul(2);
        reserved.range = Some((id + 1, end));
        reserved.counter = Some((self.ws.clone(), counter));
        Ok(id)
    }

    /// Moves the history tree of `rel` (now trash entry `id`) beside it. A path whose names
    /// cannot be kept in the store has none. With `later`, the move's directories are synced
    /// with that lock's next flush, which the caller makes before it clears its note.
    fn trash_history(
        &self,
        state: &Path,
        id: u64,
        rel: &Path,
        steps: Steps,
        later: Option<&StoreLock>,
    ) -> Result<(), HistoryError> {
        let Some(history) = layout::stored_history_tree(state, rel)? else {
            return Ok(());
        };
        if occupied(&self.ws, &history) {
            let dest = self.trash_dir(state).join(layout::trash_history_name(id));
            let cannot = || {
                format!(
                    "cannot move the history of {} into the trash",
                    display_relative(rel)
                )
            };
            match later {
                Some(lock) => {
                    let unsynced = self
                        .ws
                        .rename_no_replace_sync_later(&history, &dest)
                        .map_err(io_err(cannot()))?;
                    for pending in unsynced {
                        lock.journal().sync_later(pending);
                    }
                }
                None => self
                    .ws
                    .rename_no_replace(&history, &dest)
                    .map_err(io_err(cannot()))?,
            }
            steps.done();
        }
        Ok(())
    }

    /// Completes a delete a crash cut short (see [`layout::PENDING_DELETE`]): if the entry
    /// reached its trash slot, its history follows; if not, nothing moved.
    pub fn finish_pending_delete(&self, state: &Path) -> Result<(), HistoryError> {
        let steps = Steps::new(Op::Delete);
        self.finish_pending(state, layout::PENDING_DELETE, "delete", steps, |id, rel| {
            let id = String::from_utf8_lossy(id).parse::<u64>().ok();
            let rel = field_path(rel);
            let slot = id.map(|id| (id, self.trash_dir(state).join(layout::trash_name(id))));
            if let Some((id, Ok(Some(_)))) = slot.map(|(id, p)| (id, self.ws.stat(&p))) {
                if !occupied(&self.ws, &rel) {
                    self.trash_history(state, id, &rel, steps, None)?;
                }
            }
            Ok(())
        })
    }

    /// Completes a restore a crash cut short (see [`layout::PENDING_RESTORE`]): a restore starts
    /// only with the entry in its trash slot, so an empty slot means the entry was put back; its
    /// history follows (unless it already did) and the restore is logged (unless it already
    /// was). A slot still full means nothing moved.
    pub fn finish_pending_restore(&self, state: &Path) -> Result<(), HistoryError> {
        let steps = Steps::new(Op::Restore);
        self.finish_pending(
            state,
            layout::PENDING_RESTORE,
            "restore",
            steps,
            |id, rel| {
                let Ok(id) = String::from_utf8_lossy(id).parse::<u64>() else {
                    return Ok(());
                };
                let rel = field_path(rel);
                let trash = self.trash_dir(state);
                if occupied(&self.ws, &trash.join(layout::trash_name(id))) {
                    return Ok(());
                }
                let history = trash.join(layout::trash_history_name(id));
                self.place_history(state, &history, &rel, steps)?;
                if self.index(state)?.first_restore(id).is_none() {
                    self.log_restore(state, id, &rel)?;
                    steps.done();
                }
                Ok(())
            },
        )
    }

    /// Appends the `.deletes` line of the restore of `id` to `rel`.
    fn log_restore(&self, state: &Path, id: u64, rel: &Path) -> Result<(), HistoryError> {
        self.log(state, layout::DELETES_LOG)
            .append(&[
                log::now().as_bytes(),
                b"restore",
                id.to_string().as_bytes(),
                path_field(rel),
            ])
            .map_err(io_err("cannot append to the delete log"))
    }

    /// Moves the file, directory or symlink at `rel` (never what a symlink points to) into the
    /// trash with its history, logs it in `.deletes`, and returns its entry.
    pub fn trash(&self, lock: &StoreLock, rel: &Path) -> Result<TrashEntry, HistoryError> {
        let mut done = self.trash_all(lock, &[rel.to_path_buf()])?;
        // A batch of one gives its entry or its error; nothing else is left to say.
        done.pop().ok_or_else(|| {
            io_err(format!(
                "cannot move {} into the trash",
                display_relative(rel)
            ))(io::Error::other("the move was not made"))
        })
    }

    /// [`Store::trash`] for many paths, none inside another (a revert taking back what many
    /// operations created): their moves are announced (ids, `.deletes` lines, the journal's
    /// records, and for those with a history a line each of the pending-delete note) a batch
    /// at a time and made durable with one round of syncs before the batch's first rename; the
    /// renames' directories are synced once each, before the histories follow, and the
    /// histories' before the note is cleared (or with the next batch, or the operation's
    /// entry, when no history moved). A crash in between leaves announcements whose rename
    /// may not have happened: the delete log ignores a line whose trash slot is empty, the
    /// journal's recovery believes a move into the trash only if the path is gone, and the
    /// note's recovery moves a history only after an entry that reached its slot. Stops at the
    /// first failure; what was moved before it stays moved (and in the journal).
    pub fn trash_all(
        &self,
        lock: &StoreLock,
        rels: &[PathBuf],
    ) -> Result<Vec<TrashEntry>, HistoryError> {
        let steps = Steps::new(Op::Delete);
        let (state, trash) = self.open_trash(steps)?;
        let mut out = Vec::with_capacity(rels.len());
        let mut batch = Vec::new();
        for rel in rels {
            match self.announce_trash(lock, &state, &trash, rel, steps) {
                Ok(d) => batch.push(d),
                Err(e) => {
                    self.move_batch(lock, &state, &mut batch, steps, &mut out)?;
                    return Err(e);
                }
            }
            if batch.len() >= TRASH_BATCH {
                self.move_batch(lock, &state, &mut batch, steps, &mut out)?;
            }
        }
        self.move_batch(lock, &state, &mut batch, steps, &mut out)?;
        Ok(out)
    }

    /// The store's state directory and its trash, made if missing.
    fn open_trash(&self, steps: Steps) -> Result<(PathBuf, PathBuf), HistoryError> {
        let state = self.state_dir(true)?;
        let trash = self.trash_dir(&state);
        self.ws
            .create_dirs(&trash)
            .map_err(io_err("cannot create the trash"))?;
        steps.done();
        Ok((state, trash))
    }

    /// Checks that `rel` may be deleted, reserves its trash id and announces its move: the
    /// `.deletes` line and the journal's record are written, not yet durable.
    fn announce_trash<'a>(
        &self,
        lock: &StoreLock,
        state: &Path,
        trash: &Path,
        rel: &'a Path,
        steps: Steps,
    ) -> Result<Departure<'a>, HistoryError> {
        let rel = self.changeable(rel)?;
        let shown = display_relative(rel);
        let kind = EntryKind::of(&self.entry(rel, &shown, "delete")?);
        let id = self.next_trash_id(lock, state, trash, steps)?;
        let deleted_at = log::now();
        // Logged before the rename: a delete cut short leaves the file in place (and the log
        // line is ignored because the trash slot is empty), a finished one is always listed.
        // The line, the journal's record and the pending-delete note are written first and
        // made durable together, before the rename.
        let line = self
            .log(state, layout::DELETES_LOG)
            .append_unsynced(&[
                deleted_at.as_bytes(),
                b"delete",
                id.to_string().as_bytes(),
                path_field(rel),
            ])
            .map_err(io_err("cannot append to the delete log"))?;
        lock.journal().sync_later(line);
        steps.done();
        let history = layout::stored_history_tree(state, rel)?.filter(|h| occupied(&self.ws, h));
        lock.journal().trashing(rel, id);
        Ok(Departure {
            rel,
            shown,
            kind,
            id,
            deleted_at,
            slot: trash.join(layout::trash_name(id)),
            history,
        })
    }

    /// Makes the announced moves of `batch` durable as announced, then makes them, each
    /// listed in `out`, and moves their histories after them; on a failure the rest are told
    /// to the journal as not made.
    fn move_batch(
        &self,
        lock: &StoreLock,
        state: &Path,
        batch: &mut Vec<Departure<'_>>,
        steps: Steps,
        out: &mut Vec<TrashEntry>,
    ) -> Result<(), HistoryError> {
        if batch.is_empty() {
            return Ok(());
        }
        let ds: Vec<Departure<'_>> = std::mem::take(batch);
        // The note says that the history follows the entry into the trash after a crash; with
        // no history there is nothing to follow, and no note.
        let note = self.note(state, layout::PENDING_DELETE);
        let with_history = ds.iter().any(|d| d.history.is_some());
        // Lines written so far: a note none could be written to (one that is not a regular
        // file, say) is not ours to remove.
        let mut lines = 0usize;
        let announced = ds
            .iter()
            .filter(|d| d.history.is_some())
            .try_for_each(|d| {
                let written =
                    note.write_unsynced(&[d.id.to_string().as_bytes(), path_field(d.rel)])?;
                lines += 1;
                lock.journal().sync_later(written);
                steps.done();
                Ok(())
            })
            .and_then(|()| lock.journal().flush());
        if let Err(e) = announced {
            for d in &ds {
                lock.journal().stayed(d.rel);
            }
            if lines > 0 {
                let _ = note.clear();
            }
            return Err(io_err("cannot record the delete before making it")(e));
        }
        let mut moved = Vec::with_capacity(ds.len());
        let mut failed = None;
        let mut ds = ds.into_iter();
        for d in ds.by_ref() {
            match self.depart(lock, &d, steps) {
                Ok(()) => moved.push(d),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        for rest in ds {
            lock.journal().stayed(rest.rel);
        }
        if with_history {
            // A history follows only a move already durable, and the note goes only once the
            // histories' moves are.
            lock.journal()
                .flush()
                .map_err(io_err("cannot make the moves into the trash durable"))?;
            for d in moved.iter().filter(|d| d.history.is_some()) {
                self.trash_history(state, d.id, d.rel, steps, Some(lock))?;
            }
            lock.journal().flush().map_err(io_err(
                "cannot make the moves of the histories into the trash durable",
            ))?;
            note.clear()
                .map_err(io_err("cannot remove the pending-delete note"))?;
            steps.done();
        }
        out.extend(moved.into_iter().map(|d| self.departed(d)));
        failed.map_or(Ok(()), Err)
    }

    /// Renames what `d` announced into its trash slot; the directories are synced later, with
    /// the next thing that must be durable (the operation's entry, or a long operation's next
    /// step), and a history follows only a move already durable.
    fn depart(
        &self,
        lock: &StoreLock,
        d: &Departure<'_>,
        steps: Steps,
    ) -> Result<(), HistoryError> {
        match self.ws.rename_no_replace_sync_later(d.rel, &d.slot) {
            Ok(unsynced) => {
                for pending in unsynced {
                    lock.journal().sync_later(pending);
                }
                steps.done();
                Ok(())
            }
            Err(e) => {
                lock.journal().stayed(d.rel);
                Err(io_err(format!(
                    "cannot move {} into the trash (is it on another file system?)",
                    d.shown
                ))(e))
            }
        }
    }

    /// The trash entry `d` made. Measured in the trash, where nothing else changes it: what was
    /// deleted, whatever was at the path when the call began.
    fn departed(&self, d: Departure<'_>) -> TrashEntry {
        TrashEntry {
            id: d.id,
            path: d.rel.to_path_buf(),
            size: self.ws.tree_size(&d.slot, SIZE_BUDGET),
            deleted_at: d.deleted_at,
            kind: d.kind,
        }
    }

    /// Every entry still in the trash, oldest first. The index knows which deletes were never
    /// restored, so this looks at the trash entries themselves and nothing else: its time grows
    /// with what is in the trash, not with the length of the logs. A directory's size is
    /// measured once (within [`SIZE_BUDGET`] entries) and remembered while it stays in the trash,
    /// where nothing changes it.
    pub fn list_trash(&self) -> Result<Vec<TrashEntry>, HistoryError> {
        let state = self.state_dir(false)?;
        let trash = self.trash_dir(&state);
        let mut index = self.index(&state)?;
        let waiting: Vec<(u32, u64)> = index.in_trash.iter().map(|(&n, &id)| (n, id)).collect();
        let mut out = Vec::with_capacity(waiting.len());
        for (n, id) in waiting {
            let slot = trash.join(layout::trash_name(id));
            let Ok(Some(meta)) = self.ws.stat(&slot) else {
                continue;
            };
            let size = if meta.is_dir() {
                match index.sizes.get(&id) {
                    Some(&(dev, ino, size)) if (dev, ino) == (meta.dev, meta.ino) => size,
                    _ => {
                        let size = self.ws.tree_size(&slot, SIZE_BUDGET);
                        index.sizes.insert(id, (meta.dev, meta.ino, size));
                        size
                    }
                }
            } else {
                meta.size
            };
            let e = index.deletion(n);
            out.push(TrashEntry {
                id,
                path: e.path,
                deleted_at: e.time,
                kind: EntryKind::of(&meta),
                size,
            });
        }
        Ok(out)
    }

    /// Puts trash entry `id` back at its original path, or at `dest_rel`, with its history, and
    /// logs the restore. Occupied → `AlreadyExists`; unknown or already restored → `NotFound`.
    pub fn restore(
        &self,
        lock: &StoreLock,
        id: u64,
        dest_rel: Option<&Path>,
    ) -> Result<RestoreReport, HistoryError> {
        let dest = dest_rel.map(Path::to_path_buf);
        let mut done = self.restore_all(lock, &[(id, dest)])?;
        done.pop().unwrap_or_else(|| {
            Err(HistoryError::NotFound(format!(
                "there is no trash entry {id}; list_trash shows the ids that can be restored"
            )))
        })
    }

    /// [`Store::restore`] for many entries (a revert bringing back what many operations
    /// deleted), each to its original path or the one given, none inside another: one result
    /// each, in order, a refusal (`NotFound`, `AlreadyExists`, a read-only path) for that entry
    /// alone. The restores share their steps, each made durable for all of them at once: the
    /// pending-restore note (a line each) with the journal's records, then the renames, then the
    /// histories, then the `.deletes` lines. A failure to write stops the batch; what was
    /// restored before it stays restored, and the note lets the next lock finish the rest.
    pub fn restore_all(
        &self,
        lock: &StoreLock,
        items: &[(u64, Option<PathBuf>)],
    ) -> Result<Vec<Result<RestoreReport, HistoryError>>, HistoryError> {
        let state = self.state_dir(false)?;
        let trash = self.trash_dir(&state);
        let steps = Steps::new(Op::Restore);
        let mut out: Vec<Result<RestoreReport, HistoryError>> = Vec::with_capacity(items.len());
        let mut going = Vec::new();
        for (id, dest) in items {
            let planned = self.plan_restore(lock, &state, &trash, *id, dest.as_deref(), steps);
            // Two restores of one batch must not meet: the second would land in or over the first.
            let planned = planned.and_then(|r| {
                let meets = going.iter().any(|(_, o): &(usize, Return)| {
                    o.rel.starts_with(&r.rel) || r.rel.starts_with(&o.rel)
                });
                if meets {
                    return Err(HistoryError::AlreadyExists(format!(
                        "{} meets another restore of the same batch; restore the two one after the other",
                        display_relative(&r.rel)
                    )));
                }
                Ok(r)
            });
            match planned {
                Ok(r) => {
                    going.push((out.len(), r));
                    out.push(Err(HistoryError::NotFound(String::new())));
                }
                Err(e) => out.push(Err(e)),
            }
        }
        if going.is_empty() {
            return Ok(out);
        }
        // The entry, its history and the log line move in three steps, entry first (as a move
        // does); the note makes them one for a crash: the next lock finishes what was started.
        let note = self.note(&state, layout::PENDING_RESTORE);
        // Lines written so far: on a failure before any rename none of the batch is made, so
        // the note goes (if anything could be written to it) and the journal is told.
        let mut lines = 0usize;
        let announced = going
            .iter()
            .try_for_each(|(_, r)| {
                let written =
                    note.write_unsynced(&[r.id.to_string().as_bytes(), path_field(&r.rel)])?;
                lines += 1;
                lock.journal().sync_later(written);
                lock.journal().restoring(&r.rel, r.id);
                Ok(())
            })
            .and_then(|()| lock.journal().flush());
        if let Err(e) = announced {
            for (_, r) in going.iter().take(lines) {
                lock.journal().not_restored(&r.rel);
            }
            if lines > 0 {
                let _ = note.clear();
            }
            return Err(io_err("cannot record the restore before making it")(e));
        }
        steps.done();
        let mut moved = Vec::with_capacity(going.len());
        for (i, r) in going {
            match self.ws.rename_no_replace_sync_later(&r.slot, &r.rel) {
                Ok(unsynced) => {
                    for pending in unsynced {
                        lock.journal().sync_later(pending);
                    }
                    steps.done();
                    moved.push((i, r));
                }
                Err(e) => {
                    lock.journal().not_restored(&r.rel);
                    let shown = display_relative(&r.rel);
                    out[i] = Err(already_exists_or_io(
                        e,
                        &shown,
                        &format!("cannot restore {shown}"),
                    ));
                }
            }
        }
        // A history follows, and the restore is logged, only once the entry is back for good.
        lock.journal()
            .flush()
            .map_err(io_err("cannot make the restore durable"))?;
        for (i, r) in moved {
            let history = trash.join(layout::trash_history_name(r.id));
            let history_restored = self.place_history(&state, &history, &r.rel, steps)?;
            let line = self
                .log(&state, layout::DELETES_LOG)
                .append_unsynced(&[
                    log::now().as_bytes(),
                    b"restore",
                    r.id.to_string().as_bytes(),
                    path_field(&r.rel),
                ])
                .map_err(io_err("cannot append to the delete log"))?;
            lock.journal().sync_later(line);
            out[i] = Ok(RestoreReport {
                id: r.id,
                path: r.rel,
                kind: r.kind,
                history_restored,
            });
        }
        lock.journal()
            .flush()
            .map_err(io_err("cannot append to the delete log"))?;
        steps.done();
        note.clear()
            .map_err(io_err("cannot remove the pending-restore note"))?;
        steps.done();
        Ok(out)
    }

    /// Checks that trash entry `id` can go back to `dest_rel` (or where it was deleted from)
    /// and makes the destination's missing parents.
    fn plan_restore(
        &self,
        lock: &StoreLock,
        state: &Path,
        trash: &Path,
        id: u64,
        dest_rel: Option<&Path>,
        steps: Steps,
    ) -> Result<Return, HistoryError> {
        let deleted = {
            let index = self.index(state)?;
            let Some(deleted) = index.first_delete(id) else {
                return Err(HistoryError::NotFound(format!(
                    "there is no trash entry {id}; list_trash shows the ids that can be restored"
                )));
            };
            if let Some(r) = index.first_restore(id) {
                return Err(HistoryError::NotFound(format!(
                    "trash entry {id} was already restored to {} at {}; search_file tells where it is now",
                    display_relative(&r.path),
                    r.time
                )));
            }
            deleted
        };
        let slot = trash.join(layout::trash_name(id));
        let meta = self.ws.stat(&slot).ok().flatten().ok_or_else(|| {
            HistoryError::NotFound(format!(
                "trash entry {id} is not in the trash (its delete did not complete, so {} was never moved); list_trash shows what can be restored",
                display_relative(&deleted.path)
            ))
        })?;
        let kind = EntryKind::of(&meta);
        let rel = dest_rel.unwrap_or(&deleted.path).to_path_buf();
        let path = self.changeable(&rel)?;
        let shown = display_relative(path);
        if occupied(&self.ws, path) {
            return Err(HistoryError::AlreadyExists(format!(
                "{shown} is occupied; restore to another place with 'destination', or move what is there first"
            )));
        }
        let history = trash.join(layout::trash_history_name(id));
        // A history that could not be kept at the destination is refused before anything moves.
        if occupied(&self.ws, &history) && layout::stored_history_tree(state, path)?.is_none() {
            return Err(layout::unstorable(path));
        }
        self.make_parent(lock, path, &shown)?;
        steps.done();
        Ok(Return {
            id,
            rel: path.to_path_buf(),
            kind,
            slot,
        })
    }
}
