//! The `.filesystem/` store: version snapshots, move and delete logs, and the trash.
//!
//! Every mutation the filesystem toolset makes goes through [`Store`], so that nothing is ever
//! lost: overwrites are atomic (and snapshotted under `--backup`), deletes go to the trash, moves
//! are logged. The store knows paths relative to the root; the guard has already checked them.
//! It knows nothing about MCP or tool names.
//!
//! # On-disk layout
//!
//! ```text
//! .filesystem/
//!   src/main.rs/00001     full snapshot, version 1          (--backup)
//!   src/main.rs/00002
//!   src/main.rs/.head     one number: the current version   (--backup)
//!   .moves                append-only: time<TAB>from<TAB>to
//!   .trash/00001          a deleted file or directory
//!   .trash/00001.history/ its version history, same layout
//!   .deletes              append-only: time<TAB>delete|restore<TAB>id<TAB>path
//!   .imports              append-only: path<TAB>key of each imported outside version
//!   .operations           append-only: one JSON entry per call that changed the workspace
//!                         (see [`oplog`]); rotated to .operations.1 … like the call log
//!   .pending-operation    the journal of a revert in progress (see [`oplog::journal`])
//!   .next-trash-id        the next trash id (ids are never reused)
//!   .orphans/<time>-<pid>/  a stale history that had to make room at a move/restore target
//!   .lock                 flock'd around every mutation
//!   .layout               "2": the store is in this layout (see [`convert`])
//!   .gitignore            "*", so git, ripgrep and fd leave the store alone
//! ```
//!
//! A path's history tree is the directory named for it under `.filesystem/`: a file's
//! snapshots and `.head` sit in it, a directory's children have their trees in it. A workspace
//! name that could be taken for one of the store's own (`.moves` at the root, a file `00001` in
//! a directory, a file `.head`, a name beginning with `%`) is stored with a `%` in front; see
//! [`layout`] for the one table of such names. Moving or trashing anything moves its whole
//! tree, one rename. Redo reaches the snapshots right above `.head`; a write after an undo sets
//! them aside under a second name (`00004.undone`) until its head is durable (see
//! [`versions`]). A store in the previous layout (`files/<path>/#versions/{NNNNN,head}`) is
//! converted on first open (see [`convert`]).
//!
//! # Crash safety
//!
//! Snapshots are synced before `head` moves; `head` and the trash counter are replaced atomically;
//! log lines are single appends followed by fsync, and a torn last line is ignored. A delete logs
//! first and then renames (an unfinished delete leaves the file where it was, and a finished one
//! is always listed); a restore and a move rename first and then log. Each of the three writes a
//! pending note (`.pending-move`, `.pending-delete`, `.pending-restore`) before its first rename
//! and removes it after its last step, and the next lock finishes whatever a crash cut short (or
//! finds it never happened); a note that cannot be finished is set aside into `.orphans/` for
//! `check` to report, never left to block the store. Two processes never interleave mutations:
//! each one holds the exclusive `flock` on `.lock`, waiting for it no longer than the caller's
//! deadline ([`LockWait`]); the holder's process id and command are written into `.lock`, so a
//! caller that gives up can say who has it. [`crash_point`] is the test hook that kills the
//! process between any two writes of a conversion, move, delete or restore.

// `durable`, `layout`, `log` and `versions` are crate-visible so `filesystem check` reads the
// store with the store's own layout knowledge instead of a second copy of it.
pub mod convert;
pub mod crash_point;
pub mod durable;
mod import;
mod index;
pub mod layout;
pub mod log;
pub mod oplog;
mod story;
pub mod trash;
pub mod versions;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use import::ImportReport;
pub use story::{Story, StoryEvent, Whereabouts};
pub use trash::{EntryKind, RestoreReport, TrashEntry};

use crate::guard::display_relative;
use crate::{Stat, Workspace};
use crash_point::{Op, Steps};
use durable::occupied;
use log::{field_path, path_field, HistoryLog, PendingNote};

/// Why a history operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Nothing at the path, or no such trash id / version.
    #[error("{0}")]
    NotFound(String),
    /// The destination is occupied.
    #[error("{0}")]
    AlreadyExists(String),
    /// The request cannot work (e.g. undo past the first version).
    #[error("{0}")]
    InvalidArgument(String),
    /// Another process held the store's lock for longer than the caller could wait.
    #[error("{0}")]
    Busy(String),
    /// The operator's rules refuse the change (see [`crate::permissions`]).
    #[error("{0}")]
    ReadOnly(crate::permissions::ReadOnly),
    /// The operating system refused.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: io::Error,
    },
}

/// Builds an `Io` error with a context naming what was being done.
fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> HistoryError {
    let context = context.into();
    move |source| HistoryError::Io { context, source }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// Bytes written.
    pub bytes: u64,
    /// True when the file did not exist before.
    pub created: bool,
    /// The version number the write became under `--backup`.
    pub version: Option<u64>,
}

/// What an undo or redo did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// The version the file is at now.
    pub version: u64,
    /// The newest version kept (redo can return to it).
    pub newest: u64,
    /// Bytes of the file now.
    pub bytes: u64,
    /// When the file had been changed outside the server, the version its content was saved as
    /// before stepping.
    pub saved_outside_change: Option<u64>,
}

/// What a move did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveReport {
    /// What was moved.
    pub kind: EntryKind,
    /// True when a version history moved along.
    pub history_moved: bool,
}

/// The size from which [`Store::write`] hashes the new content beside its write instead of after.
const HASH_ASIDE_BYTES: usize = 256 * 1024;

/// Proof that the store's lock is held; every mutation takes one. Dropping it writes the
/// operation log's entry for what was changed under it (see [`oplog::journal`]), then releases
/// the lock.
pub struct StoreLock {
    journal: std::sync::Mutex<oplog::Journal>,
    /// Trash ids saved in the counter for this lock and not used yet.
    reserved_ids: std::sync::Mutex<trash::ReservedIds>,
    _file: Option<File>,
}

impl StoreLock {
    /// Tells the journal of this lock about a change about to be made.
    pub(crate) fn journal(&self) -> std::sync::MutexGuard<'_, oplog::Journal> {
        match self.journal.lock() {
            Ok(j) => j,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The trash ids this lock has reserved (see [`trash::ReservedIds`]).
    fn reserved_ids(&self) -> std::sync::MutexGuard<'_, trash::ReservedIds> {
        match self.reserved_ids.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Notes that `rel` is about to change, so the entry of this lock records what was there.
    /// For the layers above that change a path the store does not write itself (a `tee`
    /// append, a permission change): call it before the change.
    pub fn touch(&self, rel: &Path) {
        self.journal().touch(rel);
    }

    /// Makes the changes under this lock a long operation whose journal is kept on disk as it
    /// goes (see [`oplog::journal`]): a revert of `reverts`. Call it before the first change.
    pub fn make_durable(&self, reverts: Vec<u64>) -> Result<(), HistoryError> {
        self.journal().make_durable(reverts).map_err(io_err(
            "cannot start the journal of the operation (.filesystem/.pending-operation)",
        ))
    }

    /// Writes the operation log's entry for what was changed under this lock so far, and
    /// returns its id (`None` when nothing changed). Dropping the lock does the same, but can
    /// only print a failure; a caller that can report one calls this first.
    pub fn commit(&self) -> Result<Option<u64>, HistoryError> {
        self.journal().commit().map_err(io_err(
            "cannot append to the operation log .filesystem/.operations",
        ))
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        let journal = match self.journal.get_mut() {
            Ok(j) => j,
            Err(poisoned) => poisoned.into_inner(),
        };
        // The change is made and cannot be taken back here; what can be done is to say so.
        if !journal.is_empty() {
            if let Err(e) = journal.commit() {
                eprintln!("filesystem: a change was made but its entry could not be appended to the operation log .filesystem/.operations: {e}");
            }
        }
        self.reserved_ids().give_back();
    }
}

/// The longest a caller without a deadline of its own (a command a person runs, such as
/// `check --repair` or `audit import`) waits for the store's lock before it gives up.
pub const LONGEST_LOCK_WAIT: Duration = Duration::from_secs(60);

/// How long a caller waits for the store's lock, and how it says it no longer wants it: the
/// store knows nothing of calls, so a tool passes its call's deadline and a check of its
/// cancellation.
pub struct LockWait<'a> {
    deadline: Instant,
    gave_up: &'a dyn Fn() -> bool,
}

impl<'a> LockWait<'a> {
    /// Waits until `deadline` (at most [`LONGEST_LOCK_WAIT`] from now), and stops as soon as
    /// `gave_up` returns true (the call was cancelled).
    pub fn new(deadline: Option<Instant>, gave_up: &'a dyn Fn() -> bool) -> LockWait<'a> {
        let longest = Instant::now() + LONGEST_LOCK_WAIT;
        LockWait {
            deadline: deadline.map_or(longest, |d| d.min(longest)),
            gave_up,
        }
    }

    /// Waits up to [`LONGEST_LOCK_WAIT`] and never gives up earlier.
    pub fn patient() -> LockWait<'static> {
        LockWait::new(None, &|| false)
    }
}

/// Who holds the lock, as `.lock` says: `pid command`, printable ASCII only, a line at most;
/// `None` when it names no live process (the holder is then one that does not write its name,
/// such as an older build, and the name left there is a previous holder's).
fn lock_holder(ws: &Workspace, lock: &Path) -> Option<String> {
    use std::io::Read;
    let file = ws
        .open_regular(lock, rustix::fs::OFlags::RDONLY, rustix::fs::Mode::empty())
        .ok()?;
    let mut text = Vec::new();
    file.take(256).read_to_end(&mut text).ok()?;
    let line = text.split(|&b| b == b'\n').next()?;
    let shown: String = line
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    let (pid, command) = shown.split_once(' ')?;
    let alive = pid
        .parse::<i32>()
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|p| {
            !matches!(
                rustix::process::test_kill_process(p),
                Err(rustix::io::Errno::SRCH)
            )
        });
    alive.then(|| format!("process {pid} ({command})"))
}

/// Writes who holds the lock into `.lock` (`pid command`), for a caller that gives up waiting.
/// Skipped when the file has a second hard link: it must not write through to another file.
fn note_holder(file: &File) {
    use std::os::unix::fs::{FileExt, MetadataExt};
    if !file.metadata().is_ok_and(|m| m.nlink() == 1) {
        return;
    }
    let command: Vec<String> = std::env::args()
        .take(4)
        .enumerate()
        .map(|(i, a)| match (i, a.rsplit_once('/')) {
            (0, Some((_, base))) => base.to_string(),
            _ => a,
        })
        .collect();
    let mut line: String = format!("{} {}", std::process::id(), command.join(" "))
        .chars()
        .take(200)
        .collect();
    line.push('\n');
    // Most locks are taken again by the process that wrote the line last: then it is left as it
    // is, so an uncontended lock costs a read of the page cache, not a truncate and a write.
    let mut there = vec![0u8; line.len() + 1];
    if file.metadata().is_ok_and(|m| m.len() == line.len() as u64)
        && file.read_at(&mut there, 0).ok() == Some(line.len())
        && there[..line.len()] == *line.as_bytes()
    {
        return;
    }
    let _ = file.set_len(0);
    let _ = file.write_all_at(line.as_bytes(), 0);
}

/// The history store of one workspace root.
///
/// Every path it handles is relative to the root, and every operation goes through the
/// workspace layer ([`Workspace`]): relative to directory descriptors opened beneath the root,
/// refusing any symlink, so neither a link planted inside `.filesystem/` nor a directory swapped
/// for one while a call runs can carry a snapshot, a trashed file or a log line elsewhere.
pub struct Store {
    ws: Workspace,
    backup: bool,
    /// The logs' index, built on first use and brought up to date before each question.
    index: std::sync::Mutex<index::Index>,
    /// Set once this process has found (or made) the store in the current layout, so the
    /// check (a couple of `stat`s, see [`convert`]) runs under the first lock only.
    layout_checked: std::sync::atomic::AtomicBool,
    /// Who may write where: checked again by every mutation, under the store lock.
    permissions: crate::permissions::Permissions,
}

impl Store {
    /// The store of workspace `ws`. Nothing is created on disk until the first mutation.
    pub fn new(ws: Workspace, backup: bool) -> Store {
        Store {
            ws,
            backup,
            index: std::sync::Mutex::new(index::Index::default()),
            layout_checked: std::sync::atomic::AtomicBool::new(false),
            permissions: Default::default(),
        }
    }

    /// The same store, refusing every change `permissions` does not allow: each mutation checks
    /// the paths it changes (a move's both ends, a delete's, a restore's and an undo's target)
    /// while it holds the lock, right before it acts, so no other server on the root can change
    /// the store between the check and the change.
    pub fn with_permissions(mut self, permissions: crate::permissions::Permissions) -> Store {
        self.permissions = permissions;
        self
    }

    /// The index of the move and delete logs in `state`, brought up to date with what was
    /// appended since it was last asked (by this process or another server on the root).
    fn index(&self, state: &Path) -> Result<std::sync::MutexGuard<'_, index::Index>, HistoryError> {
        self.index_part(state, index::Part::History)
    }

    /// The index with its `part` brought up to date.
    fn index_part(
        &self,
        state: &Path,
        part: index::Part,
    ) -> Result<std::sync::MutexGuard<'_, index::Index>, HistoryError> {
        let mut index = match self.index.lock() {
            Ok(i) => i,
            // A panic while it was being updated may have left it half-read: start over.
            Err(poisoned) => {
                let mut i = poisoned.into_inner();
                *i = index::Index::default();
                i
            }
        };
        if let Err(e) = index.refresh(&self.ws, state, part) {
            index.reset(part);
            return Err(io_err("cannot read the store's logs")(e));
        }
        Ok(index)
    }

    /// The workspace layer the store acts through.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// `.filesystem/`, root-relative — refused if something other than a real directory sits
    /// there (a symlink planted in a checked-out repository must not redirect the store).
    fn state_dir(&self, create: bool) -> Result<PathBuf, HistoryError> {
        let dir = PathBuf::from(crate::guard::STATE_DIRS[0]);
        match self.ws.stat(&dir) {
            Ok(Some(m)) if m.is_dir() => Ok(dir),
            Ok(Some(_)) => Err(HistoryError::Io {
                context: format!(
                    "the history store {} is not a plain directory (a symlink or a file)",
                    dir.display()
                ),
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    "move it out of the workspace so the server can create its own",
                ),
            }),
            Ok(None) if create => {
                self.ws
                    .create_dirs(&dir)
                    .map_err(io_err("cannot create the history store"))?;
                Ok(dir)
            }
            Ok(None) => Ok(dir),
            Err(e) => Err(io_err("cannot open the history store")(e)),
        }
    }

    /// True when `.filesystem/` exists as a directory.
    fn has_state_dir(&self) -> bool {
        matches!(self.ws.stat(Path::new(crate::guard::STATE_DIRS[0])), Ok(Some(m)) if m.is_dir())
    }

    /// The append-only log `name` inside the store.
    fn log(&self, state: &Path, name: &str) -> HistoryLog {
        HistoryLog::new(self.ws.clone(), state.join(name))
    }

    /// The pending-operation note `name` inside the store.
    fn note(&self, state: &Path, name: &str) -> PendingNote {
        PendingNote::new(self.ws.clone(), state.join(name))
    }

    /// Takes the store's exclusive lock, waiting up to [`LONGEST_LOCK_WAIT`]: for commands a
    /// person runs. A tool call uses [`Store::lock_within`] with its own deadline.
    pub fn lock(&self) -> Result<StoreLock, HistoryError> {
        self.lock_within(&LockWait::patient())
    }

    /// Takes the store's exclusive lock, so two server processes on one root never interleave
    /// mutations, waiting no longer than `wait` allows: `Busy` (naming the holder) when another
    /// process keeps it that long. Changes made under it are logged as a command's, tool
    /// `unnamed`; a caller that knows who it acts for uses [`Store::begin`].
    pub fn lock_within(&self, wait: &LockWait<'_>) -> Result<StoreLock, HistoryError> {
        self.begin(wait, &oplog::Origin::command("unnamed"))
    }

    /// Takes the store's lock for changes made on behalf of `origin` (the client, mode and tool
    /// the operation log records), waiting no longer than `wait` allows.
    pub fn begin(
        &self,
        wait: &LockWait<'_>,
        origin: &oplog::Origin,
    ) -> Result<StoreLock, HistoryError> {
        let state = self.state_dir(true)?;
        // A regular file only: a FIFO planted as `.lock` would otherwise block the open forever.
        let file = self
            .ws
            .open_regular(
                &state.join(layout::LOCK_FILE),
                // Read too: the holder's line is compared before it is written (`note_holder`).
                rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CREATE,
                rustix::fs::Mode::from_raw_mode(0o644),
            )
            .map_err(io_err(format!(
                "cannot open the history store's lock file {}",
                state.join(layout::LOCK_FILE).display()
            )))?;
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(io_err("cannot lock the history store")(e.into())),
            }
            let now = Instant::now();
            if (wait.gave_up)() || now >= wait.deadline {
                let holder = lock_holder(&self.ws, &state.join(layout::LOCK_FILE))
                    .unwrap_or_else(|| "another process".into());
                return Err(HistoryError::Busy(format!(
                    "the history store is locked by {holder}, which is changing it; gave up after waiting {:.1} s. Try again once it has finished (a server converting a large store, `audit import` or `check --repair` can hold it for a while)",
                    started.elapsed().as_secs_f64()
                )));
            }
            std::thread::sleep(pause.min(wait.deadline - now));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        note_holder(&file);
        let lock = StoreLock {
            journal: std::sync::Mutex::new(oplog::Journal::new(
                self.ws.clone(),
                state.clone(),
                origin,
            )),
            reserved_ids: std::sync::Mutex::new(trash::ReservedIds::default()),
            _file: Some(file),
        };
        // A store in the previous layout is converted before anything reads or changes it.
        use std::sync::atomic::Ordering;
        if !self.layout_checked.load(Ordering::Acquire) {
            convert::ensure(&self.ws, &state)?;
            self.layout_checked.store(true, Ordering::Release);
        }
        self.finish_pending_move(&state)?;
        self.finish_pending_delete(&state)?;
        self.finish_pending_restore(&state)?;
        // Last, so the states it records are those the finished moves and deletes left.
        oplog::Journal::finish_pending(&self.ws, &state)
            .map_err(io_err("cannot finish the operation log's entry of a revert a crash cut short (.filesystem/.pending-operation)"))?;
        Ok(lock)
    }

    /// Creates the directory `rel` and its missing parents (never through a symlink), each one
    /// created recorded in the operation log; true when the last one was created.
    pub fn create_dirs(&self, lock: &StoreLock, rel: &Path) -> io::Result<bool> {
        if rel.as_os_str().is_empty() {
            return Ok(false); // The root, which exists.
        }
        let path = self
            .checked(rel)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        self.note_new_dirs(lock, path);
        self.ws.create_dirs(path)
    }

    /// Touches, in the lock's journal, each ancestor-or-self of `path` that does not exist yet.
    fn note_new_dirs(&self, lock: &StoreLock, path: &Path) {
        let mut prefix = PathBuf::new();
        let mut journal = lock.journal();
        for c in path.components() {
            prefix.push(c);
            if !occupied(&self.ws, &prefix) {
                journal.touch(&prefix);
            }
        }
    }

    /// The lock for a call that only reads the store, or `None` when there is no store yet (a
    /// read must not create one, and there is nothing half-done to see). Taking it finishes a move
    /// or delete a crash cut short, and while it is held no other server is in the middle of
    /// changing the store: a read never sees half of a move or a delete.
    pub fn lock_for_reading(&self) -> Result<Option<StoreLock>, HistoryError> {
        self.lock_for_reading_within(&LockWait::patient())
    }

    /// [`Store::lock_for_reading`], waiting no longer than `wait` allows.
    pub fn lock_for_reading_within(
        &self,
        wait: &LockWait<'_>,
    ) -> Result<Option<StoreLock>, HistoryError> {
        if !self.has_state_dir() {
            return Ok(None);
        }
        self.lock_within(wait).map(Some)
    }

    /// Completes a move a crash cut short (see [`layout::PENDING_MOVE`]). If the workspace entry
    /// reached its destination, its history follows and the move is logged (unless it already
    /// was); if it did not, nothing moved and the note is simply dropped.
    fn finish_pending_move(&self, state: &Path) -> Result<(), HistoryError> {
        let steps = Steps::new(Op::Move);
        self.finish_pending(state, layout::PENDING_MOVE, "move", steps, |from, to| {
            let (from, to) = (field_path(from), field_path(to));
            if let (false, Ok(Some(_))) = (occupied(&self.ws, &from), self.ws.stat(&to)) {
                self.move_history(state, &from, &to, steps)?;
                let logged = self
                    .index(state)?
                    .last_move()
                    .is_some_and(|m| m.from == from && m.to == to);
                if !logged {
                    self.log(state, layout::MOVES_LOG)
                        .append(&[log::now().as_bytes(), path_field(&from), path_field(&to)])
                        .map_err(io_err("cannot append to the move log"))?;
                    steps.done();
                }
            }
            Ok(())
        })
    }

    /// The frame of crash recovery for one pending note (`name`, about a `what`: "move",
    /// "delete" or "restore"), shared by the three: no note means nothing was cut short; each
    /// line of two fields is handed to `finish` in turn (a batch of restores writes a line
    /// each); the note is removed afterwards, since a line of any other shape cannot be acted
    /// on. A note that `finish` fails on is not left in place, where
    /// it would make every later lock fail (and a second operation's note would be appended
    /// behind it): it is set aside into `.orphans/` under [`layout::STUCK_NOTE_PREFIX`], where
    /// `check` reports it with what is left to do by hand.
    fn finish_pending(
        &self,
        state: &Path,
        name: &str,
        what: &str,
        steps: Steps,
        mut finish: impl FnMut(&[u8], &[u8]) -> Result<(), HistoryError>,
    ) -> Result<(), HistoryError> {
        // Only a regular file is a note: a directory there is the history of a workspace file of
        // that name written before the name was reserved, which `check` reports.
        match self.ws.stat(&state.join(name)) {
            Ok(Some(m)) if m.is_file() => {}
            Ok(_) => return Ok(()),
            Err(e) => return Err(io_err(format!("cannot read the pending-{what} note"))(e)),
        }
        let note = self.note(state, name);
        let lines = note
            .read_lines()
            .map_err(io_err(format!("cannot read the pending-{what} note")))?;
        let finished = lines.iter().try_for_each(|fields| match fields.as_slice() {
            [first, second] => finish(first, second),
            _ => Ok(()),
        });
        if finished.is_err() {
            let orphans = state.join(layout::ORPHANS_DIR);
            let aside = orphans.join(format!(
                "{}{what}-{}-{}",
                layout::STUCK_NOTE_PREFIX,
                log::now(),
                std::process::id()
            ));
            self.ws
                .create_dirs(&orphans)
                .and_then(|_| self.ws.rename_no_replace(&state.join(name), &aside))
                .map_err(io_err(format!(
                    "cannot finish a {what} a crash cut short, nor set its note .filesystem/{name} aside; move that file out of the store by hand"
                )))?;
            steps.done();
            return Ok(());
        }
        note.clear()
            .map_err(io_err(format!("cannot remove the pending-{what} note")))?;
        steps.done();
        Ok(())
    }

    /// Checks that `rel` is a plain root-relative path and that it does not lead into the
    /// store itself: the store only ever acts on workspace paths the guard produced.
    fn checked<'a>(&self, rel: &'a Path) -> Result<&'a Path, HistoryError> {
        layout::components(rel)?;
        if crate::guard::PathGuard::is_state_path(rel).is_some() {
            return Err(HistoryError::InvalidArgument(format!(
                "'{}' is inside the server's own store",
                rel.display()
            )));
        }
        Ok(rel)
    }

    /// [`Store::checked`] for a path a mutation changes: also one the operator's rules let
    /// change, with everything below it.
    fn changeable<'a>(&self, rel: &'a Path) -> Result<&'a Path, HistoryError> {
        let rel = self.checked(rel)?;
        self.permissions
            .check(rel)
            .map_err(HistoryError::ReadOnly)?;
        Ok(rel)
    }

    /// Replaces (or creates) the file at root-relative `rel` with `content`, atomically, keeping
    /// its mode and creating missing parent directories. With `create_new`, fails with
    /// `AlreadyExists` if anything is at `rel`. Under `--backup` the content becomes a new
    /// version; a file that existed without history (or was changed outside the server) has its
    /// current content saved as a version first, so it can always be undone back to.
    pub fn write(
        &self,
        lock: &StoreLock,
        rel: &Path,
        content: &[u8],
        create_new: bool,
    ) -> Result<WriteReport, HistoryError> {
        let path = self.changeable(rel)?;
        let shown = display_relative(rel);
        // For create, anything at all in the way (directory, symlink…) is AlreadyExists.
        if create_new && occupied(&self.ws, path) {
            return Err(HistoryError::AlreadyExists(format!(
                "{shown} already exists; use write_file to replace it or pick another name"
            )));
        }
        let meta = self.regular_file_or_nothing(path, &shown)?;
        // What the file holds before the change, for the log's entry: a large one is hashed on a
        // second thread from a descriptor opened now, while the new content is written and
        // synced (the rename leaves the descriptor on the old content); a small one's hash
        // costs less than the thread, and is taken here.
        let small = meta
            .as_ref()
            .is_some_and(|m| m.size < HASH_ASIDE_BYTES as u64);
        if small {
            lock.touch(path);
        }
        let old = match (!small && lock.journal().touch_later(path), &meta) {
            (false, _) => None,
            (true, None) => Some(Err(oplog::State::Absent)),
            (true, Some(m)) => Some(
                self.ws
                    .open_regular(
                        path,
                        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
                        rustix::fs::Mode::empty(),
                    )
                    .map(|file| (file, m.mode))
                    .map_err(|_| {
                        oplog::journal::observe(&self.ws, path).unwrap_or(oplog::State::Other)
                    }),
            ),
        };
        std::thread::scope(|s| {
            let before = old.map(|old| {
                old.map(|(mut file, mode)| {
                    s.spawn(move || match oplog::journal::digest(&mut file) {
                        Ok((size, sha256)) => oplog::State::File {
                            size,
                            sha256,
                            mode,
                            version: None,
                        },
                        Err(_) => oplog::State::Other,
                    })
                })
            });
            let written = self.replace(lock, rel, path, content, create_new, meta.as_ref(), s);
            if let Some(before) = before {
                let before = match before {
                    Ok(hashing) => hashing.join().unwrap_or(oplog::State::Other),
                    Err(known) => known,
                };
                lock.journal().touched_as(path, before);
            }
            written
        })
    }

    /// [`Store::write`] once the before-state is being worked out: the versions, the missing
    /// parents and the file itself.
    #[allow(clippy::too_many_arguments)]
    fn replace<'scope>(
        &'scope self,
        lock: &StoreLock,
        rel: &Path,
        path: &Path,
        content: &'scope [u8],
        create_new: bool,
        meta: Option<&Stat>,
        s: &'scope std::thread::Scope<'scope, '_>,
    ) -> Result<WriteReport, HistoryError> {
        let shown = &display_relative(rel);
        let steps = Steps::new(Op::Write);
        let mut version = None;
        let mut before_version = None;
        if self.backup {
            let v = versions::for_path(&self.ws, &self.state_dir(true)?, rel)?;
            let mut head = v.head()?;
            if meta.is_some() {
                let known = match head {
                    Some(h) => v.matches_file(h, path)?,
                    None => false,
                };
                if !known {
                    let current = self
                        .ws
                        .read(path)
                        .map_err(io_err(format!("cannot read {shown}")))?;
                    head = Some(v.append(head, &current)?);
                }
                before_version = head.map(|h| h.current);
            }
            version = Some(v.append(head, content)?.current);
            lock.journal().versions(path, before_version, version);
            steps.done();
        }
        self.make_parent(lock, path, shown)?;
        let mode = meta.map(|m| m.mode);
        // The file is the write's last step (its versions are already durable), so its
        // directory's sync can wait for the operation log's entry and share its flush.
        // A large content's digest, for the log's entry, is worked out on a second thread while
        // the content is written and synced; a small one's costs less than the thread.
        let digest = (content.len() >= HASH_ASIDE_BYTES)
            .then(|| s.spawn(|| oplog::journal::sha256_hex(content)));
        let replaced = self
            .ws
            .replace_file_sync_later(path, content, mode, create_new);
        let digest = digest.and_then(|d| d.join().ok());
        let unsynced = replaced.map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                HistoryError::AlreadyExists(format!(
                    "{shown} appeared while writing; nothing was changed"
                ))
            } else {
                io_err(format!("cannot write {shown}"))(e)
            }
        })?;
        let mut journal = lock.journal();
        match digest {
            Some(sha256) => journal.wrote_hashed(path, content.len() as u64, sha256),
            None => journal.wrote(path, content),
        }
        journal.sync_later(unsynced);
        drop(journal);
        steps.done();
        Ok(WriteReport {
            bytes: content.len() as u64,
            created: meta.is_none(),
            version,
        })
    }

    /// Steps the file at `rel` back `steps` versions.
    pub fn undo(
        &self,
        lock: &StoreLock,
        rel: &Path,
        steps: u64,
    ) -> Result<StepReport, HistoryError> {
        self.step(lock, rel, steps, false)
    }

    /// Steps the file at `rel` forward `steps` versions after an undo.
    pub fn redo(
        &self,
        lock: &StoreLock,
        rel: &Path,
        steps: u64,
    ) -> Result<StepReport, HistoryError> {
        self.step(lock, rel, steps, true)
    }

    /// Where the version history of the file at `rel` stands, as `(current, newest)`: the version
    /// the file is at and the newest one redo can reach; `None` when it has no history. Only
    /// reads (a few `stat`s and the head file), for tools that describe a file.
    pub fn version_position(
        &self,
        _lock: &StoreLock,
        rel: &Path,
    ) -> Result<Option<(u64, u64)>, HistoryError> {
        let path = self.checked(rel)?;
        let state = self.state_dir(false)?;
        let Some(dir) = layout::stored_history_tree(&state, path)? else {
            return Ok(None);
        };
        let v = versions::Versions::new(self.ws.clone(), dir, display_relative(rel));
        let Some(head) = v.head()? else {
            return Ok(None);
        };
        Ok(Some((head.current, v.newest(head)?)))
    }

    fn step(
        &self,
        lock: &StoreLock,
        rel: &Path,
        steps: u64,
        forward: bool,
    ) -> Result<StepReport, HistoryError> {
        let (verb, direction) = if forward {
            ("redo", "forward")
        } else {
            ("undo", "back")
        };
        let path = self.changeable(rel)?;
        let shown = display_relative(rel);
        if steps == 0 {
            return Err(HistoryError::InvalidArgument(format!(
                "steps must be at least 1 to {verb} {shown}"
            )));
        }
        let meta = self.regular_file_or_nothing(path, &shown)?;
        let v = versions::for_path(&self.ws, &self.state_dir(false)?, rel)?;
        let Some(head) = v.head()? else {
            return Err(HistoryError::NotFound(format!(
                "{shown} has no version history; only files written through this server with --backup can be undone"
            )));
        };
        v.settle(Some(head))?;
        // The top of the redo chain: a few `stat`s, never a listing.
        let top = v.newest(head)?;
        // An outside change is saved as a new version before stepping, so undo never destroys
        // work. A missing file is simply recreated from the version stepped to.
        let changed = meta.is_some() && !v.matches_file(head, path)?;
        let current = if changed {
            Some(
                self.ws
                    .read(path)
                    .map_err(io_err(format!("cannot read {shown}")))?,
            )
        } else {
            None
        };
        // With an undone future (head below the top), the outside change is recorded after the
        // top version, preceded by a copy of the head's version, so the undone versions stay
        // reachable and one undo still returns to the version the server last wrote. (A crash
        // in the middle of a redo leaves exactly this: newer content in the file, the head
        // unmoved.)
        let keep_future = changed && head.current < top;
        let (at, newest) = match (changed, keep_future) {
            (false, _) => (head.current, top),
            (true, false) => (head.current + 1, head.current + 1),
            (true, true) => (top + 2, top + 2),
        };
        let possible = if forward { newest - at } else { at - 1 };
        if steps > possible {
            let note = if changed {
                " (counting its unsaved outside change as the newest version)"
            } else {
                ""
            };
            return Err(HistoryError::InvalidArgument(format!(
                "cannot {verb} {steps} step(s) of {shown}: it is at version {at} of {newest}{note}, so at most {possible} step(s) {direction} are possible"
            )));
        }
        let mut head = head;
        let mut saved = None;
        if let (true, Some(c)) = (changed, &current) {
            if keep_future {
                let last_written = v.snapshot(head.current)?.ok_or_else(|| {
                    HistoryError::NotFound(format!(
                        "version {} of {shown} is missing from the store",
                        head.current
                    ))
                })?;
                let end = versions::Head { current: top };
                head = v.append(Some(end), &last_written)?;
            }
            head = v.append(Some(head), c)?;
            saved = Some(head.current);
        }
        let target = if forward { at + steps } else { at - steps };
        let content = v.snapshot(target)?.ok_or_else(|| {
            HistoryError::NotFound(format!(
            "version {target} of {shown} is missing from the store; try a different number of steps"
        ))
        })?;
        lock.touch(path);
        lock.journal()
            .versions(path, meta.as_ref().map(|_| head.current), Some(target));
        // The file is written before the head moves. The other order loses work on a crash in
        // between: the file would still hold the newer content while the head already named an
        // older version, so the next call would take that content for an outside change and
        // record it right after the head, overwriting (and dropping) the versions the undo
        // skipped. In this order a crash leaves the head where it was and the file at an older
        // version, which the next call saves as a new version: nothing is dropped.
        self.make_parent(lock, path, &shown)?;
        let mode = meta.as_ref().map(|m| m.mode);
        self.ws
            .replace_file(path, &content, mode, false)
            .map_err(io_err(format!("cannot write {shown}")))?;
        lock.journal().wrote(path, &content);
        let head = v.move_head(target)?;
        Ok(StepReport {
            version: head.current,
            newest,
            bytes: content.len() as u64,
            saved_outside_change: saved,
        })
    }

    /// Moves the file, directory or symlink at `from` to `to` (never following a final symlink),
    /// carrying its version history along, and logs the move in `.moves`.
    pub fn rename(
        &self,
        lock: &StoreLock,
        from: &Path,
        to: &Path,
    ) -> Result<MoveReport, HistoryError> {
        let (src, dst) = (self.changeable(from)?, self.changeable(to)?);
        let (from_s, to_s) = (display_relative(from), display_relative(to));
        if to.starts_with(from) {
            return Err(HistoryError::InvalidArgument(format!(
                "cannot move {from_s} to {to_s}: the destination is {from_s} itself or inside it; pick a destination outside it"
            )));
        }
        let meta = self.entry(src, &from_s, "move")?;
        if occupied(&self.ws, dst) {
            return Err(HistoryError::AlreadyExists(format!(
                "{to_s} already exists; move or delete it first, or pick another destination"
            )));
        }
        let kind = EntryKind::of(&meta);
        let state = self.state_dir(true)?;
        // A history that could not be kept at the destination is refused before anything moves.
        let has_history =
            layout::stored_history_tree(&state, from)?.is_some_and(|h| occupied(&self.ws, &h));
        if has_history && layout::stored_history_tree(&state, to)?.is_none() {
            return Err(layout::unstorable(to));
        }
        let steps = Steps::new(Op::Move);
        self.make_parent(lock, dst, &to_s)?;
        steps.done();
        lock.journal().moved(src, dst);
        // The entry, its history and the log line move in three steps; the note makes them one
        // for a crash (the next lock finishes what was started).
        let note = self.note(&state, layout::PENDING_MOVE);
        note.write(&[path_field(from), path_field(to)])
            .map_err(io_err("cannot record the move before making it"))?;
        steps.done();
        if let Err(e) = self.ws.rename_no_replace(src, dst) {
            let _ = note.clear();
            return Err(already_exists_or_io(
                e,
                &to_s,
                &format!("cannot move {from_s} to {to_s}"),
            ));
        }
        steps.done();
        let history_moved = self.move_history(&state, from, to, steps)?;
        self.log(&state, layout::MOVES_LOG)
            .append(&[log::now().as_bytes(), path_field(from), path_field(to)])
            .map_err(io_err("cannot append to the move log"))?;
        steps.done();
        note.clear()
            .map_err(io_err("cannot remove the pending-move note"))?;
        steps.done();
        Ok(MoveReport {
            kind,
            history_moved,
        })
    }

    /// Moves the history tree of `from` (a file's versions, a directory's children's trees) to
    /// `to`. A path whose names cannot be kept in the store has no history to move; one that
    /// has a history and a destination that cannot hold it is `InvalidArgument`.
    fn move_history(
        &self,
        state: &Path,
        from: &Path,
        to: &Path,
        steps: Steps,
    ) -> Result<bool, HistoryError> {
        let Some(src) = layout::stored_history_tree(state, from)? else {
            return Ok(false);
        };
        self.place_history(state, &src, to, steps)
    }

    /// Renames a history `src` to the history tree of `to`, first moving any stale history
    /// there aside into `.orphans/` (it belongs to something no longer at that path; it is
    /// kept, not deleted).
    fn place_history(
        &self,
        state: &Path,
        src: &Path,
        to: &Path,
        steps: Steps,
    ) -> Result<bool, HistoryError> {
        let ws = &self.ws;
        if !occupied(ws, src) {
            return Ok(false);
        }
        let dst = &layout::history_tree(state, to)?;
        let ctx = "cannot move a version history";
        if occupied(ws, dst) {
            let orphans = state.join(layout::ORPHANS_DIR);
            ws.create_dirs(&orphans).map_err(io_err(ctx))?;
            let base = format!("{}-{}", log::now(), std::process::id());
            let mut aside = orphans.join(&base);
            let mut n = 1;
            while occupied(ws, &aside) {
                n += 1;
                aside = orphans.join(format!("{base}-{n}"));
            }
            ws.rename_no_replace(dst, &aside).map_err(io_err(ctx))?;
            steps.done();
        }
        if let Some(parent) = dst.parent() {
            ws.create_dirs(parent).map_err(io_err(ctx))?;
            steps.done();
        }
        ws.rename_no_replace(src, dst).map_err(io_err(ctx))?;
        steps.done();
        Ok(true)
    }
}

impl Store {
    /// What is at the regular file `path`, `None` if nothing is there, and `InvalidArgument` for
    /// anything that is not a regular file: writing through a symlink or onto a directory, FIFO or
    /// device is never what the caller meant.
    fn regular_file_or_nothing(
        &self,
        path: &Path,
        shown: &str,
    ) -> Result<Option<Stat>, HistoryError> {
        match self.ws.stat(path) {
            Ok(Some(m)) if m.is_file() => Ok(Some(m)),
            Ok(Some(m)) => Err(HistoryError::InvalidArgument(format!(
                "{shown} is a {}, not a regular file; name the file itself",
                EntryKind::of(&m).name()
            ))),
            Ok(None) => Ok(None),
            Err(e) => Err(io_err(format!("cannot inspect {shown}"))(e)),
        }
    }

    /// What is at `path` (not following a final symlink), for an operation `verb` that needs
    /// something there: `NotFound` when nothing is.
    fn entry(&self, path: &Path, shown: &str, verb: &str) -> Result<Stat, HistoryError> {
        match self.ws.stat(path) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(not_found_or_io(io::ErrorKind::NotFound.into(), shown, verb)),
            Err(e) => Err(not_found_or_io(e, shown, verb)),
        }
    }

    /// Creates the missing parents of `path` (never through a symlink), each recorded in the
    /// lock's journal.
    fn make_parent(&self, lock: &StoreLock, path: &Path, shown: &str) -> Result<(), HistoryError> {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => {
                self.note_new_dirs(lock, parent);
                self.ws
                    .create_dirs(parent)
                    .map(|_| ())
                    .map_err(io_err(format!("cannot create the parent of {shown}")))
            }
            _ => Ok(()),
        }
    }
}

fn not_found_or_io(e: io::Error, shown: &str, verb: &str) -> HistoryError {
    if e.kind() == io::ErrorKind::NotFound {
        HistoryError::NotFound(format!(
            "nothing at {shown} to {verb}; check the path with list_directory, or ask search_file where it went"
        ))
    } else {
        io_err(format!("cannot {verb} {shown}"))(e)
    }
}

fn already_exists_or_io(e: io::Error, shown: &str, context: &str) -> HistoryError {
    if e.kind() == io::ErrorKind::AlreadyExists {
        HistoryError::AlreadyExists(format!(
            "{shown} already exists; move or delete it first, or pick another destination"
        ))
    } else {
        io_err(context)(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(backup: bool) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        (
            dir,
            Store::new(Workspace::open(&root).expect("workspace"), backup),
        )
    }

    /// A `--backup` store whose file `a` has versions "one" and "two".
    fn store_with_two_versions_of_a() -> (tempfile::TempDir, Store) {
        let (dir, s) = store(true);
        {
            let lock = s.lock().expect("lock");
            s.write(&lock, Path::new("a"), b"one", false)
                .expect("write");
            s.write(&lock, Path::new("a"), b"two", false)
                .expect("write");
        }
        (dir, s)
    }

    #[test]
    fn a_move_cut_short_after_the_file_moved_is_finished_under_the_next_lock() {
        let (dir, s) = store_with_two_versions_of_a();
        // The crash state: the note written, the file renamed, nothing else.
        let state = dir.path().join(".filesystem");
        std::fs::write(state.join(layout::PENDING_MOVE), "a\tb\n").expect("note");
        std::fs::rename(dir.path().join("a"), dir.path().join("b")).expect("rename");
        let lock = s.lock().expect("lock");
        assert!(!state.join(layout::PENDING_MOVE).exists());
        let moves = s.index(Path::new(".filesystem")).expect("moves");
        assert_eq!(
            moves.last_move().map(|m| (m.from, m.to)),
            Some((PathBuf::from("a"), PathBuf::from("b")))
        );
        drop(moves);
        s.undo(&lock, Path::new("b"), 1)
            .expect("the history followed the file");
        assert_eq!(std::fs::read(dir.path().join("b")).expect("read"), b"one");
    }

    #[test]
    fn a_move_cut_short_before_the_file_moved_leaves_everything_in_place() {
        let (dir, s) = store_with_two_versions_of_a();
        let state = dir.path().join(".filesystem");
        std::fs::write(state.join(layout::PENDING_MOVE), "a\tb\n").expect("note");
        let lock = s.lock().expect("lock");
        assert!(!state.join(layout::PENDING_MOVE).exists());
        assert!(s
            .index(Path::new(".filesystem"))
            .expect("moves")
            .last_move()
            .is_none());
        s.undo(&lock, Path::new("a"), 1)
            .expect("history still at a");
        assert_eq!(std::fs::read(dir.path().join("a")).expect("read"), b"one");
    }

    #[test]
    fn a_delete_cut_short_after_the_file_went_to_the_trash_takes_its_history_along() {
        let (dir, s) = store_with_two_versions_of_a();
        // The crash state: logged, noted, the file in its slot, the history still behind.
        let state = dir.path().join(".filesystem");
        std::fs::create_dir_all(state.join(layout::TRASH_DIR)).expect("trash");
        s.log(Path::new(".filesystem"), layout::DELETES_LOG)
            .append(&[log::now().as_bytes(), b"delete", b"1", b"a"])
            .expect("log");
        std::fs::write(state.join(layout::PENDING_DELETE), "1\ta\n").expect("note");
        std::fs::rename(
            dir.path().join("a"),
            state.join(layout::TRASH_DIR).join("00001"),
        )
        .expect("rename");
        let lock = s.lock().expect("lock");
        assert!(!state.join(layout::PENDING_DELETE).exists());
        // A new file at the old path starts a history of its own...
        let created = s
            .write(&lock, Path::new("a"), b"new", false)
            .expect("write");
        assert_eq!(created.version, Some(1));
        s.trash(&lock, Path::new("a")).expect("trash the new one");
        // ...and the old one comes back with its versions.
        s.restore(&lock, 1, None).expect("restore");
        s.undo(&lock, Path::new("a"), 1)
            .expect("its history came along");
        assert_eq!(std::fs::read(dir.path().join("a")).expect("read"), b"one");
    }

    #[test]
    fn a_directory_or_fifo_where_a_pending_note_goes_does_not_stop_the_lock() {
        let (dir, s) = store_with_two_versions_of_a();
        let state = dir.path().join(".filesystem");
        // The history of a workspace file `.pending-restore` from before the name was reserved.
        std::fs::create_dir_all(state.join(layout::PENDING_RESTORE)).expect("mkdir");
        std::fs::write(state.join(layout::PENDING_RESTORE).join("00001"), "v").expect("write");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            state.join(layout::PENDING_MOVE),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let lock = s.lock().expect("lock");
        s.undo(&lock, Path::new("a"), 1).expect("the store works");
        assert!(state.join(layout::PENDING_RESTORE).join("00001").exists());
    }

    #[test]
    fn trash_ids_survive_a_lost_counter_file() {
        let (dir, s) = store(false);
        let lock = s.lock().expect("lock");
        for name in ["a", "b"] {
            std::fs::write(dir.path().join(name), name).expect("seed");
        }
        let first = s.trash(&lock, Path::new("a")).expect("trash");
        s.restore(&lock, first.id, None).expect("restore");
        std::fs::remove_file(dir.path().join(".filesystem/.next-trash-id")).expect("lose it");
        let second = s.trash(&lock, Path::new("b")).expect("trash");
        assert!(second.id > first.id, "{} after {}", second.id, first.id);
    }

    #[test]
    fn a_stray_snapshot_from_a_crash_is_overwritten_not_trusted() {
        let (dir, s) = store(true);
        let lock = s.lock().expect("lock");
        s.write(&lock, Path::new("f"), b"one", false)
            .expect("write");
        // A crash after writing snapshot 2 but before moving the head leaves this behind.
        let versions = dir.path().join(".filesystem/f");
        std::fs::write(versions.join("00002"), "torn").expect("stray");
        let r = s
            .write(&lock, Path::new("f"), b"two", false)
            .expect("write");
        assert_eq!(r.version, Some(2));
        assert_eq!(std::fs::read(versions.join("00002")).expect("read"), b"two");
        s.undo(&lock, Path::new("f"), 1).expect("undo");
        assert_eq!(std::fs::read(dir.path().join("f")).expect("read"), b"one");
    }

    #[test]
    fn writing_onto_a_directory_or_symlink_is_refused() {
        let (dir, s) = store(true);
        let lock = s.lock().expect("lock");
        std::fs::create_dir(dir.path().join("d")).expect("mkdir");
        std::os::unix::fs::symlink("d", dir.path().join("l")).expect("link");
        for p in ["d", "l"] {
            assert!(matches!(
                s.write(&lock, Path::new(p), b"x", false),
                Err(HistoryError::InvalidArgument(_))
            ));
        }
        assert!(matches!(
            s.write(&lock, Path::new("d"), b"x", true),
            Err(HistoryError::AlreadyExists(_))
        ));
    }
}
