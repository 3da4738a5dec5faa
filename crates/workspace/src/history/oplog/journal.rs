//! What one holder of the store lock changed, gathered while it holds the lock and written as
//! one entry of the operation log when it lets go.
//!
//! Every mutation of the store ([`Store`](super::super::Store)'s write, undo, redo, move, trash,
//! restore, import, directory creation) takes a [`StoreLock`](super::super::StoreLock) and tells
//! its journal which path it is about to touch; the journal notes what was there then. When the
//! lock is released the journal looks at each path again and appends one entry with both
//! states. So the log is kept in one place, and a new mutation that goes through the store (as
//! every one must: the store lock is what makes a check and its change one) cannot leave it
//! out.
//!
//! A long operation (a revert) is *durable*: each event is also appended to
//! `.pending-operation` before the change it announces, so a crash in the middle leaves a note
//! from which the next lock writes the entry (marked interrupted) from what is then on the
//! disk. Short operations skip the note, which would cost a second sync per call; a crash
//! between their change and their entry loses the entry, never the change (see ARCHITECTURE.md).

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::super::layout::PENDING_OPERATION;
use super::super::log::{now, PendingNote};
use super::record::{
    bytes_to_field, field_to_path, path_to_field, Operation, PathChange, Session, State,
};
use crate::{PendingSync, SyncQueue, Workspace};

/// Who is making the changes of one lock: the client and surface, and the tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// `clientInfo.name`.
    pub client: Option<String>,
    /// `clientInfo.version`.
    pub version: Option<String>,
    /// `filesystem`, `pipe` or `cli`.
    pub mode: String,
    /// The tool or command.
    pub tool: String,
}

impl Origin {
    /// A command run by a person (`audit restore`, `revert`): no MCP client.
    pub fn command(tool: &str) -> Origin {
        Origin {
            client: None,
            version: None,
            mode: "cli".into(),
            tool: tool.into(),
        }
    }
}

/// The most changes [`Journal::sync_later`] keeps waiting for the entry.
const MAX_UNSYNCED: usize = 16;

/// The longest client-given string kept in an entry (a client name or version).
const TOKEN_MAX: usize = 128;

/// This process's session id: drawn once, shared by every operation it makes.
pub fn session_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| crate::temp::fresh_token().to_ascii_lowercase())
}

/// What is at `rel` now, as an entry records it: a file's size, SHA-256 and mode, a directory's
/// mode, a link's target.
pub fn observe(ws: &Workspace, rel: &Path) -> io::Result<State> {
    let Some(st) = ws.stat(rel)? else {
        return Ok(State::Absent);
    };
    Ok(if st.is_file() {
        let mut file = ws.open_regular(
            rel,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
            rustix::fs::Mode::empty(),
        )?;
        let (size, sha256) = digest(&mut file)?;
        State::File {
            size,
            sha256,
            mode: st.mode,
            version: None,
        }
    } else if st.is_dir() {
        State::Dir { mode: st.mode }
    } else if st.is_symlink() {
        use std::os::unix::ffi::OsStrExt;
        State::Link {
            target: bytes_to_field(ws.read_link(rel)?.as_os_str().as_bytes()),
        }
    } else {
        State::Other
    })
}

/// The length and SHA-256 (lowercase hex) of what `reader` yields.
pub fn digest(reader: &mut impl Read) -> io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        size += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((size, hex(&hasher.finalize())))
}

/// The SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One thing a journal learns, in the form the durable note stores it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Event {
    /// The operation begins (the first line of a durable note).
    Begin {
        session: Session,
        tool: String,
        #[serde(default)]
        reverts: Vec<u64>,
    },
    /// `path` is about to change; `before` is what is there.
    Touch { path: String, before: State },
    /// What was at `from` is about to move to `to`.
    Moved {
        from: String,
        to: String,
        /// What is at `from` as it leaves.
        before: State,
    },
    /// What is at `path` is about to go to the trash as `id`.
    Trashed {
        path: String,
        id: u64,
        /// What is at `path` as it leaves.
        before: State,
    },
    /// Trash entry `id` is about to come back at `path`.
    Restored { path: String, id: u64 },
    /// The versions that hold `path`'s content before and after.
    Versions {
        path: String,
        before: Option<u64>,
        after: Option<u64>,
    },
}

/// One path the lock's holder touched.
#[derive(Debug, Clone)]
struct Touched {
    path: PathBuf,
    before: State,
    /// Set when the path's after-state is not what the disk shows (trashed, moved away).
    after: Option<State>,
    moved_from: Option<PathBuf>,
    restored_from: Option<u64>,
    before_version: Option<u64>,
    after_version: Option<u64>,
    /// The length and SHA-256 of the content the store itself last wrote here, so the entry
    /// need not read the file back to learn them.
    written: Option<(u64, String)>,
}

/// The changes of one lock, in the order they were made. A path has one entry for each
/// stretch between its arrivals and departures (a restore or a move's destination begins one;
/// a trash or a move away ends it), so each entry holds at most one of them and a revert can
/// undo them in reverse order.
pub struct Journal {
    ws: Workspace,
    state: PathBuf,
    session: Session,
    tool: String,
    reverts: Vec<u64>,
    touched: Vec<Touched>,
    /// The open entry of each path: the one a further change to it belongs to.
    by_path: HashMap<PathBuf, usize>,
    /// Set for a durable operation: the note each event is appended to first.
    note: Option<PendingNote>,
    /// A failure to keep the note: the entry is still written, the error reported with it.
    broken: Option<io::Error>,
    /// Changes made durable with the entry or the next record (see [`Journal::sync_later`]),
    /// one sync per file or directory.
    unsynced: SyncQueue,
}

impl Journal {
    /// An empty journal for changes made on behalf of `origin` in store `state`.
    pub fn new(ws: Workspace, state: PathBuf, origin: &Origin) -> Journal {
        let cut = |s: &Option<String>| {
            s.as_ref()
                .map(|s| s.chars().take(TOKEN_MAX).collect::<String>())
        };
        Journal {
            ws,
            state,
            session: Session {
                id: session_id().to_string(),
                client: cut(&origin.client),
                version: cut(&origin.version),
                mode: origin.mode.clone(),
            },
            tool: origin.tool.chars().take(TOKEN_MAX).collect(),
            reverts: Vec::new(),
            touched: Vec::new(),
            by_path: HashMap::new(),
            note: None,
            broken: None,
            unsynced: SyncQueue::default(),
        }
    }

    /// Makes this a durable operation that reverts `reverts`: from now on every event is
    /// appended to `.pending-operation` before it is acted on.
    pub fn make_durable(&mut self, reverts: Vec<u64>) -> io::Result<()> {
        self.reverts = reverts;
        let note = PendingNote::new(self.ws.clone(), self.state.join(PENDING_OPERATION));
        let begin = Event::Begin {
            session: self.session.clone(),
            tool: self.tool.clone(),
            reverts: self.reverts.clone(),
        };
        note.write(&[&serde_json::to_vec(&begin).map_err(io::Error::other)?])?;
        self.note = Some(note);
        Ok(())
    }

    /// True when nothing has been touched.
    pub fn is_empty(&self) -> bool {
        self.touched.is_empty()
    }

    /// Appends `event` to the durable note, if this operation keeps one, and makes it durable
    /// with every earlier step still waiting (see [`Journal::sync_later`]), before the change
    /// it announces is made: each step is then durable before the next one begins, at one
    /// round of syncs per step.
    fn record(&mut self, event: &Event) {
        if self.note.is_some() {
            self.announce(event);
            if let Err(e) = self.flush() {
                self.broken.get_or_insert(e);
            }
        }
    }

    /// [`Journal::record`] without the flush, for a batch of changes announced together and
    /// made durable by one [`Journal::flush`] before the first of them is made.
    fn announce(&mut self, event: &Event) {
        if let Some(note) = &self.note {
            let line = serde_json::to_vec(event).map_err(io::Error::other);
            let queued = line
                .and_then(|l| note.write_unsynced(&[&l]))
                .and_then(|pending| self.unsynced.push(pending));
            if let Err(e) = queued {
                self.broken.get_or_insert(e);
            }
        }
    }

    /// Makes every change waiting in [`Journal::sync_later`] durable now: for a step that must
    /// not begin before them (a file's move into the trash after its `.deletes` line).
    pub fn flush(&mut self) -> io::Result<()> {
        sync_all(std::mem::take(&mut self.unsynced).into_vec())
    }

    /// `rel` is about to change: what is there now is its before-state (the first time only).
    pub fn touch(&mut self, rel: &Path) {
        if let Some(&i) = self.by_path.get(rel) {
            let t = &self.touched[i];
            if t.moved_from.is_none() && t.restored_from.is_none() {
                return;
            }
            // A change after an arrival is an entry of its own, so a revert undoes the change
            // before it moves the thing back (or trashes it), not the arrival alone.
            let now = observe(&self.ws, rel).unwrap_or(State::Other);
            self.touched[i].after = Some(now);
            self.by_path.remove(rel);
        }
        let before = observe(&self.ws, rel).unwrap_or(State::Other);
        self.record(&Event::Touch {
            path: path_to_field(rel),
            before: before.clone(),
        });
        self.insert(rel.to_path_buf(), before);
    }

    /// [`Journal::touch`] for a change whose maker works out the before-state itself, beside
    /// the change (the store hashes a file it replaces on a second thread while it writes the
    /// new content, from a descriptor opened before): true when the journal wants it, to be
    /// given with [`Journal::touched_as`]. False when it needs none (the path already has an
    /// open entry) or has just observed it itself: a durable operation's note records the
    /// before-state ahead of the change, and an arrival is closed with what is there now.
    pub fn touch_later(&mut self, rel: &Path) -> bool {
        let open = self.by_path.get(rel).map(|&i| &self.touched[i]);
        match open {
            Some(t) if t.moved_from.is_none() && t.restored_from.is_none() => false,
            Some(_) => {
                self.touch(rel);
                false
            }
            None if self.note.is_some() => {
                self.touch(rel);
                false
            }
            None => {
                // Stands until the maker gives the real one; a maker that never does leaves
                // "unknown", which a revert refuses to act on rather than guess.
                self.insert(rel.to_path_buf(), State::Other);
                true
            }
        }
    }

    /// The before-state of `rel` that [`Journal::touch_later`] asked for.
    pub fn touched_as(&mut self, rel: &Path, before: State) {
        if let Some(&i) = self.by_path.get(rel) {
            self.touched[i].before = before;
        }
    }

    fn insert(&mut self, path: PathBuf, before: State) -> usize {
        let i = self.touched.len();
        self.by_path.insert(path.clone(), i);
        self.touched.push(Touched {
            path,
            before,
            after: None,
            moved_from: None,
            restored_from: None,
            before_version: None,
            after_version: None,
            written: None,
        });
        i
    }

    /// The open entry of `rel`, begun now (with what is there) if it has none.
    fn entry(&mut self, rel: &Path) -> &mut Touched {
        let i = match self.by_path.get(rel) {
            Some(&i) => i,
            None => {
                let before = observe(&self.ws, rel).unwrap_or(State::Other);
                self.insert(rel.to_path_buf(), before)
            }
        };
        &mut self.touched[i]
    }

    /// The open entry of `rel` for a departure: a fresh one when the open one began with an
    /// arrival or holds a change (it is then closed with what is there now), so an entry is
    /// an arrival, a change or a departure, never two of them.
    fn departing(&mut self, rel: &Path, now: State) -> usize {
        if let Some(&i) = self.by_path.get(rel) {
            let t = &self.touched[i];
            // An entry whose path was changed before it departs is closed first, so the
            // departure leaves with what is there now and a revert undoes the change after it
            // brings the thing back.
            if t.moved_from.is_none() && t.restored_from.is_none() && t.before.matches(&now) {
                return i;
            }
            self.touched[i].after = Some(now.clone());
            self.by_path.remove(rel);
        }
        self.insert(rel.to_path_buf(), now)
    }

    /// Ends the open entry of `rel` (which holds `now` as it leaves) with `after`.
    fn depart(&mut self, rel: &Path, now: State, after: State) {
        let i = self.departing(rel, now);
        self.touched[i].after = Some(after);
        self.by_path.remove(rel);
    }

    /// Begins a fresh entry of `rel` (nothing there) for an arrival, ending any open one.
    fn arriving(&mut self, rel: &Path) -> &mut Touched {
        if let Some(i) = self.by_path.remove(rel) {
            self.touched[i].after = Some(State::Absent);
        }
        let i = self.insert(rel.to_path_buf(), State::Absent);
        &mut self.touched[i]
    }

    /// What is at `from` is about to be moved to `to`.
    pub fn moved(&mut self, from: &Path, to: &Path) {
        let before = observe(&self.ws, from).unwrap_or(State::Other);
        self.record(&Event::Moved {
            from: path_to_field(from),
            to: path_to_field(to),
            before: before.clone(),
        });
        self.apply_moved(from, to, before);
    }

    fn apply_moved(&mut self, from: &Path, to: &Path, before: State) {
        self.depart(
            from,
            before,
            State::Moved {
                to: path_to_field(to),
            },
        );
        self.arriving(to).moved_from = Some(from.to_path_buf());
    }

    /// What is at `rel` is about to go to the trash as entry `id`.
    pub fn trashed(&mut self, rel: &Path, id: u64) {
        self.trashing(rel, id);
        if self.note.is_some() {
            if let Err(e) = self.flush() {
                self.broken.get_or_insert(e);
            }
        }
    }

    /// [`Journal::trashed`] for one of a batch of trash moves: announced, not yet durable; the
    /// caller makes the batch's announcements durable with one [`Journal::flush`] before it
    /// moves the first of them.
    pub fn trashing(&mut self, rel: &Path, id: u64) {
        let before = observe(&self.ws, rel).unwrap_or(State::Other);
        self.announce(&Event::Trashed {
            path: path_to_field(rel),
            id,
            before: before.clone(),
        });
        self.depart(rel, before, State::Trashed { id });
    }

    /// The move into the trash announced for `rel` did not happen (the rename failed): its
    /// entry ends with what the disk shows, not with the trash. A durable note keeps the
    /// announcement, which a crash's recovery checks against the disk all the same.
    pub fn stayed(&mut self, rel: &Path) {
        let last = self.touched.iter().rposition(|t| t.path == rel);
        if let Some(i) =
            last.filter(|&i| matches!(self.touched[i].after, Some(State::Trashed { .. })))
        {
            self.touched[i].after = None;
            self.by_path.insert(rel.to_path_buf(), i);
        }
    }

    /// Trash entry `id` is about to be put back at `rel`: announced, not yet durable; the
    /// caller makes its announcements durable with one [`Journal::flush`] before the first
    /// rename.
    pub fn restoring(&mut self, rel: &Path, id: u64) {
        self.announce(&Event::Restored {
            path: path_to_field(rel),
            id,
        });
        self.arriving(rel).restored_from = Some(id);
    }

    /// The restore announced for `rel` did not happen (the rename failed): its entry holds no
    /// change, what is there before and after, as the disk shows it.
    pub fn not_restored(&mut self, rel: &Path) {
        if let Some(&i) = self.by_path.get(rel) {
            if self.touched[i].restored_from.is_some() {
                let now = observe(&self.ws, rel).unwrap_or(State::Other);
                self.touched[i].restored_from = None;
                self.touched[i].before = now;
            }
        }
    }

    /// `pending` is a change of this lock that is written but not durable yet. It is synced
    /// with the next thing that must be durable: the operation's entry, once written (on a
    /// journalling file system one commit then carries both), or in a durable operation the
    /// record of its next step, or an explicit [`Journal::flush`]. Only for what no later step
    /// of a short operation relies on; a step that does calls `flush` first.
    pub fn sync_later(&mut self, pending: PendingSync) {
        if let Err(e) = self.unsynced.push(pending) {
            self.broken.get_or_insert(e);
        }
        // A lock held over many writes must not hold a descriptor for each of them.
        if self.unsynced.len() >= MAX_UNSYNCED {
            if let Err(e) = self.flush() {
                self.broken.get_or_insert(e);
            }
        }
    }

    /// The store has just replaced the content of `rel` (already touched) with `content`.
    pub fn wrote(&mut self, rel: &Path, content: &[u8]) {
        self.wrote_hashed(rel, content.len() as u64, sha256_hex(content));
    }

    /// [`Journal::wrote`] with the content's length and SHA-256 already worked out (the store
    /// hashes a large content while it is being written and synced).
    pub fn wrote_hashed(&mut self, rel: &Path, size: u64, sha256: String) {
        self.entry(rel).written = Some((size, sha256));
    }

    /// The versions (`--backup`) that hold `rel`'s content before (only if not yet known) and
    /// after the change.
    pub fn versions(&mut self, rel: &Path, before: Option<u64>, after: Option<u64>) {
        self.record(&Event::Versions {
            path: path_to_field(rel),
            before,
            after,
        });
        let t = self.entry(rel);
        if t.before_version.is_none() {
            t.before_version = before;
        }
        t.after_version = after.or(t.after_version);
    }

    /// The entry for what was done, with every path's state as the disk shows it now (or as the
    /// journal knows it went: to the trash, away by a move). `None` when nothing was touched.
    pub fn finish(&self, interrupted: bool) -> Option<Operation> {
        if self.touched.is_empty() {
            return None;
        }
        let changes = self
            .touched
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let after = match &t.after {
                    // An open entry ends with what is there now: for a file the store wrote,
                    // its mode and size read back, its digest the one of what was written.
                    None => match (&t.written, self.ws.stat(&t.path)) {
                        (Some((size, sha256)), Ok(Some(st)))
                            if st.is_file() && st.size == *size =>
                        {
                            State::File {
                                size: *size,
                                sha256: sha256.clone(),
                                mode: st.mode,
                                version: None,
                            }
                        }
                        _ => observe(&self.ws, &t.path).unwrap_or(State::Other),
                    },
                    // After a crash, what the journal says went away is believed only if it
                    // did go: the crash may have come between the announcement and the rename.
                    Some(s @ (State::Trashed { .. } | State::Moved { .. }))
                        if interrupted && !last_of_path(&self.touched, i) =>
                    {
                        s.clone()
                    }
                    Some(s @ (State::Trashed { .. } | State::Moved { .. })) if interrupted => {
                        let seen = observe(&self.ws, &t.path).unwrap_or(State::Other);
                        if seen.is_absent() {
                            s.clone()
                        } else {
                            seen
                        }
                    }
                    Some(s) => s.clone(),
                };
                PathChange {
                    path: path_to_field(&t.path),
                    before: with_version(t.before.clone(), t.before_version),
                    after: with_version(after, t.after_version),
                    moved_from: t.moved_from.as_deref().map(path_to_field),
                    restored_from: t.restored_from,
                }
            })
            .collect();
        Some(Operation {
            id: 0,
            time: now(),
            session: self.session.clone(),
            tool: self.tool.clone(),
            changes,
            reverts: self.reverts.clone(),
            interrupted,
        })
    }

    /// Appends the entry (if anything changed) and clears the durable note; returns the id.
    pub fn commit(&mut self) -> io::Result<Option<u64>> {
        let unsynced = std::mem::take(&mut self.unsynced).into_vec();
        let result = match self.finish(false) {
            Some(mut op) => super::file::append(&self.ws, &self.state, &mut op, unsynced).map(Some),
            None => sync_all(unsynced).map(|()| None),
        };
        if result.is_ok() {
            if let Some(note) = self.note.take() {
                note.clear()?;
            }
        }
        self.touched.clear();
        self.by_path.clear();
        match (result, self.broken.take()) {
            (Ok(id), None) => Ok(id),
            (Ok(_), Some(e)) => Err(e),
            (Err(e), _) => Err(e),
        }
    }

    /// Writes the entry of a durable operation a crash cut short, from its note in store
    /// `state`, and removes the note. Nothing to do when there is no note.
    pub fn finish_pending(ws: &Workspace, state: &Path) -> io::Result<Option<u64>> {
        let note = PendingNote::new(ws.clone(), state.join(PENDING_OPERATION));
        let lines = note.read_all()?;
        let Some(first) = lines.first() else {
            return Ok(None);
        };
        let Ok(Event::Begin {
            session,
            tool,
            reverts,
        }) = serde_json::from_slice::<Event>(first)
        else {
            note.clear()?;
            return Ok(None);
        };
        let mut journal = Journal::new(ws.clone(), state.to_path_buf(), &Origin::default());
        journal.session = session;
        journal.tool = tool;
        journal.reverts = reverts;
        for line in &lines[1..] {
            match serde_json::from_slice::<Event>(line) {
                Ok(Event::Touch { path, before }) => {
                    let p = field_to_path(&path);
                    if !journal.by_path.contains_key(&p) {
                        journal.insert(p, before);
                    }
                }
                Ok(Event::Moved { from, to, before }) => {
                    journal.apply_moved(&field_to_path(&from), &field_to_path(&to), before)
                }
                Ok(Event::Trashed { path, id, before }) => {
                    journal.depart(&field_to_path(&path), before, State::Trashed { id })
                }
                Ok(Event::Restored { path, id }) => {
                    journal.arriving(&field_to_path(&path)).restored_from = Some(id);
                }
                Ok(Event::Versions {
                    path,
                    before,
                    after,
                }) => {
                    let t = journal.entry(&field_to_path(&path));
                    if t.before_version.is_none() {
                        t.before_version = before;
                    }
                    t.after_version = after.or(t.after_version);
                }
                Ok(Event::Begin { .. }) | Err(_) => {}
            }
        }
        let id = match journal.finish(true) {
            Some(mut op) => Some(super::file::append(ws, state, &mut op, Vec::new())?),
            None => None,
        };
        note.clear()?;
        Ok(id)
    }
}

/// Syncs each of `pending`, all of them even when one fails (the first failure is returned,
/// saying what it stopped).
pub(super) fn sync_all(pending: Vec<PendingSync>) -> io::Result<()> {
    PendingSync::sync_all(pending).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot make the change durable (syncing it to the disk): {e}"),
        )
    })
}

/// True when entry `i` is the last of its path.
fn last_of_path(touched: &[Touched], i: usize) -> bool {
    !touched[i + 1..].iter().any(|t| t.path == touched[i].path)
}

/// `state` with `version` filled in, for a file.
fn with_version(state: State, version: Option<u64>) -> State {
    match state {
        State::File {
            size,
            sha256,
            mode,
            version: v,
        } => State::File {
            size,
            sha256,
            mode,
            version: version.or(v),
        },
        s => s,
    }
}
