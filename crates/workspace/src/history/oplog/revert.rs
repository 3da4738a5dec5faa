//! Putting back what chosen operations changed: `filesystem revert` and `revert_operation`.
//!
//! The operations are undone newest first, each one's changes in reverse order. A path whose
//! state now is not the one the operation left ("after") was changed since, by another
//! operation, another client or by hand, and is not touched unless forced: then what is there
//! is saved first (a version of the file under `--backup`, else the trash). A run of changes to
//! one path by the chosen operations is put back at once, to the state before the oldest of
//! them, so a file created and then appended to by `tee` (no versions) still goes back to
//! nothing. Content comes from the versions (`--backup`), deletions from the trash, moves are
//! moved back, and what the operations created goes to the trash. The revert is itself one
//! operation, journaled on disk as it goes (see [`super::journal`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::super::crash_point::{Op, Steps};
use super::super::{layout, versions, HistoryError, Store, StoreLock};
use super::file::NewestFirst;
use super::journal::{observe, sha256_hex};
use super::record::{field_to_path, Operation, PathChange, State};
use crate::guard::display_relative;

/// Which operations to revert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// These ids.
    Ids(Vec<u64>),
    /// Every operation of this session.
    Session(String),
    /// Every operation at or after this time (RFC 3339, compared as the log writes it).
    Since(String),
}

/// A time as the log writes it (UTC, microseconds), from RFC 3339 or an age before now.
pub fn parse_since(text: &str) -> Result<String, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t
            .with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
    }
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: i64 = digits
        .parse()
        .map_err(|_| format!("--since {text:?} is neither an RFC 3339 time (2026-05-01T12:00:00Z) nor an age such as 30m, 2h or 1d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "--since {text:?}: the age's unit must be s, m, h or d"
            ))
        }
    };
    let age = chrono::Duration::try_seconds(n.saturating_mul(seconds))
        .ok_or_else(|| format!("--since {text:?} is too long ago"))?;
    Ok((chrono::Utc::now() - age).to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
}

/// The most operations one revert takes on: beyond it the command asks for a narrower choice.
pub const MAX_OPERATIONS: usize = 1_000_000;

/// The chosen operations, newest first. Ids that are not in the log are `NotFound`.
pub fn select(store: &Store, selection: &Selection) -> Result<Vec<Operation>, HistoryError> {
    let state = PathBuf::from(crate::guard::STATE_DIRS[0]);
    let mut entries = NewestFirst::new(store.workspace(), &state);
    let mut out = Vec::new();
    let read_err = |e| HistoryError::Io {
        context: "cannot read the operation log .filesystem/.operations".into(),
        source: e,
    };
    let mut wanted: Vec<u64> = match selection {
        Selection::Ids(ids) => ids.clone(),
        _ => Vec::new(),
    };
    wanted.sort_unstable();
    wanted.dedup();
    let lowest = wanted.first().copied();
    while let Some(op) = entries.next_entry().map_err(read_err)? {
        let keep = match selection {
            Selection::Ids(_) => {
                if lowest.is_some_and(|l| op.id < l) {
                    break;
                }
                wanted.binary_search(&op.id).is_ok()
            }
            Selection::Session(s) => &op.session.id == s,
            Selection::Since(t) => {
                if op.time.as_str() < t.as_str() {
                    break;
                }
                true
            }
        };
        if keep {
            if out.len() == MAX_OPERATIONS {
                return Err(HistoryError::InvalidArgument(format!(
                    "more than {MAX_OPERATIONS} operations were chosen; revert a narrower choice (--since a later time, or a list of ids) first"
                )));
            }
            out.push(op);
        }
    }
    if let Selection::Ids(_) = selection {
        let found: std::collections::HashSet<u64> = out.iter().map(|o| o.id).collect();
        let missing: Vec<String> = wanted
            .iter()
            .filter(|i| !found.contains(i))
            .map(u64::to_string)
            .collect();
        if !missing.is_empty() {
            return Err(HistoryError::NotFound(format!(
                "no operation {} in the log; `filesystem log` lists the ids that can be reverted",
                missing.join(", ")
            )));
        }
    }
    Ok(out)
}

/// One path's part in a revert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The root-relative path.
    pub path: PathBuf,
    /// What was (or would be) done, or why not.
    pub what: String,
}

/// What a revert did (or, dry, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The operations reverted, newest first.
    pub reverted: Vec<u64>,
    /// Paths put back.
    pub done: Vec<Step>,
    /// Paths left alone because they changed since (revert with `force` to save and replace).
    pub refused: Vec<Step>,
    /// Paths that cannot be put back (no version holds their earlier content).
    pub cannot: Vec<Step>,
    /// Paths already as they were before.
    pub already: usize,
    /// The revert's own entry in the log (not for a dry run or when nothing changed).
    pub entry: Option<u64>,
    /// True when nothing was changed, only planned.
    pub dry_run: bool,
}

/// A run of changes to one path, to be put back at once.
struct Pending {
    path: PathBuf,
    /// What the newest change left there: the disk must still show it.
    expect: State,
    /// What was there before the oldest change of the run.
    target: State,
    /// The operation of the oldest change, for messages.
    op: u64,
}

/// A restore of trash entry `id` to `rel`, where operation `op` deleted what showed `before`:
/// checked, and waiting to be made with others at once ([`Store::restore_all`]).
struct Untrash {
    op: u64,
    rel: PathBuf,
    id: u64,
    before: State,
}

/// The most restores a revert makes at once.
const UNTRASH_BATCH: usize = 256;

/// The revert of a list of operations under one lock.
struct Reverter<'a> {
    store: &'a Store,
    lock: &'a StoreLock,
    force: bool,
    dry_run: bool,
    /// A dry run's idea of the disk after the steps it planned.
    planned: HashMap<PathBuf, State>,
    pending: Vec<Pending>,
    open: HashMap<PathBuf, usize>,
    out: Outcome,
    steps: Steps,
    /// Set once a move, trash or restore has been planned (in a dry run, histories stay put).
    moved_histories: bool,
    /// Trash entries this revert made of what came back from an older entry: undoing a restore
    /// of entry N puts the thing in a new entry M, and undoing the delete that made N must
    /// bring back M.
    renumbered: HashMap<u64, u64>,
    /// The entry of the last thing this revert moved to the trash.
    last_trashed: Option<u64>,
    /// Every path the chosen operations touched: a directory one of them made may be moved to
    /// the trash holding these, and nothing else.
    ours: std::collections::HashSet<PathBuf>,
    /// Set while undoing a restore: the thing goes back to the trash whole.
    whole: bool,
    /// Restores checked and not made yet: made before any change at or around their paths,
    /// and at the end.
    untrash: Vec<Untrash>,
}

impl Store {
    /// The content with SHA-256 `sha256` from `rel`'s versions (`--backup`): `version` if it
    /// holds it, else the newest that does; `None` when none does. For revert and `log show`.
    pub fn content_with_hash(
        &self,
        rel: &Path,
        sha256: &str,
        version: Option<u64>,
    ) -> Result<Option<Vec<u8>>, HistoryError> {
        const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        if sha256 == EMPTY {
            return Ok(Some(Vec::new()));
        }
        let state = PathBuf::from(crate::guard::STATE_DIRS[0]);
        if layout::stored_history_tree(&state, rel)?.is_none() {
            return Ok(None);
        }
        let v = versions::for_path(self.workspace(), &state, rel)?;
        let Some(head) = v.head()? else {
            return Ok(None);
        };
        let check = |n: u64| -> Result<Option<Vec<u8>>, HistoryError> {
            Ok(v.snapshot(n)?.filter(|c| sha256_hex(c) == sha256))
        };
        if let Some(n) = version {
            if let Some(c) = check(n)? {
                return Ok(Some(c));
            }
        }
        let newest = v.newest(head)?;
        for n in (1..=newest).rev() {
            if let Some(c) = check(n)? {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    /// Reverts the operations `selection` chooses, on behalf of `origin`, waiting for the lock
    /// no longer than `wait` allows: the one road from `filesystem revert` and the
    /// `revert_operation` tool to [`Store::revert`]. The choice is made under the lock, so no
    /// entry is appended between the choice and the revert.
    pub fn revert_chosen(
        &self,
        wait: &super::super::LockWait<'_>,
        origin: &super::Origin,
        selection: &Selection,
        dry_run: bool,
        force: bool,
    ) -> Result<Outcome, HistoryError> {
        let lock = self.begin(wait, origin)?;
        let ops = select(self, selection)?;
        if ops.is_empty() {
            return Ok(Outcome {
                dry_run,
                ..Outcome::default()
            });
        }
        if !dry_run {
            lock.make_durable(ops.iter().map(|o| o.id).collect())?;
        }
        self.revert(&lock, &ops, force, dry_run)
    }

    /// Reverts `ops` (newest first, as [`select`] gives them) under `lock`, made durable
    /// ([`StoreLock::make_durable`]) unless `dry_run`.
    pub fn revert(
        &self,
        lock: &StoreLock,
        ops: &[Operation],
        force: bool,
        dry_run: bool,
    ) -> Result<Outcome, HistoryError> {
        let mut r = Reverter {
            store: self,
            lock,
            force,
            dry_run,
            planned: HashMap::new(),
            pending: Vec::new(),
            open: HashMap::new(),
            out: Outcome {
                dry_run,
                ..Outcome::default()
            },
            steps: Steps::new(Op::Revert),
            moved_histories: false,
            renumbered: HashMap::new(),
            last_trashed: None,
            ours: ops
                .iter()
                .flat_map(|o| o.changes.iter())
                .flat_map(|c| {
                    std::iter::once(c.rel()).chain(c.moved_from.as_deref().map(field_to_path))
                })
                .collect(),
            whole: false,
            untrash: Vec::new(),
        };
        for op in ops {
            r.out.reverted.push(op.id);
            for change in op.changes.iter().rev() {
                r.change(op.id, change)?;
            }
        }
        r.flush_all()?;
        let mut out = r.out;
        if !dry_run {
            out.entry = lock.commit()?;
        }
        Ok(out)
    }
}

impl Reverter<'_> {
    /// What is at `rel`: the disk, or for a dry run what the planned steps would leave.
    fn now(&self, rel: &Path) -> State {
        if let Some(s) = self.planned.get(rel).filter(|_| self.dry_run) {
            return s.clone();
        }
        observe(self.store.workspace(), rel).unwrap_or(State::Other)
    }

    fn done(&mut self, path: &Path, what: String) {
        self.out.done.push(Step {
            path: path.to_path_buf(),
            what,
        });
        if !self.dry_run {
            self.steps.done();
        }
    }

    fn refuse(&mut self, path: &Path, op: u64, now: &State, expect: &State) {
        let what = format!(
            "changed since operation {op} left it (it is {} now, it was left {}); left as it is. Revert with --force to save what is there (as a version, or to the trash) and put it back anyway",
            describe_state(now),
            describe_state(expect)
        );
        self.out.refused.push(Step {
            path: path.to_path_buf(),
            what,
        });
    }

    /// Takes on one change of operation `op`.
    fn change(&mut self, op: u64, c: &PathChange) -> Result<(), HistoryError> {
        let path = c.rel();
        let moved_from = c.moved_from.as_deref().map(field_to_path);
        let meets = |u: &Untrash| {
            std::iter::once(&path)
                .chain(&moved_from)
                .any(|p| p.starts_with(&u.rel) || u.rel.starts_with(p))
        };
        if self.untrash.iter().any(meets) {
            self.make_untrash()?;
        }
        if matches!(c.after, State::Moved { .. }) {
            // Its other half, the destination's change, moves it back.
            return Ok(());
        }
        if let Some(from) = &c.moved_from {
            let from = field_to_path(from);
            self.flush_under(&[&path, &from])?;
            return self.move_back(op, &path, &from, &c.after);
        }
        if let State::Trashed { id } = c.after {
            self.flush_under(&[&path])?;
            return self.untrash(op, &path, id, &c.before);
        }
        if let Some(from) = c.restored_from {
            self.flush_under(&[&path])?;
            let before = self.out.done.len();
            // What came back from the trash goes back whole, whatever is inside it.
            self.whole = true;
            let id = self.put_back_to_trash(Pending {
                path,
                expect: c.after.clone(),
                target: State::Absent,
                op,
            });
            self.whole = false;
            let id = id?;
            if let (Some(new), true) = (id, self.out.done.len() > before) {
                self.renumbered.insert(from, new);
            }
            return Ok(());
        }
        match self.open.get(&path).copied() {
            Some(i) if self.pending[i].target.matches(&c.after) => {
                self.pending[i].target = c.before.clone();
                self.pending[i].op = op;
            }
            other => {
                if let Some(i) = other {
                    // The chain broke: something the chosen operations did not do came between.
                    self.flush_one(i)?;
                }
                self.open.insert(path.clone(), self.pending.len());
                self.pending.push(Pending {
                    path,
                    expect: c.after.clone(),
                    target: c.before.clone(),
                    op,
                });
            }
        }
        Ok(())
    }

    fn flush_one(&mut self, i: usize) -> Result<(), HistoryError> {
        let p = self.pending.remove(i);
        self.open.remove(&p.path);
        for v in self.open.values_mut() {
            if *v > i {
                *v -= 1;
            }
        }
        self.put_back(p)
    }

    /// Puts back the pending runs at or below `paths` (in the order they were begun), before a
    /// move, trash or restore there; runs elsewhere wait, so a run of changes to one file is not
    /// cut by a move of another.
    fn flush_under(&mut self, paths: &[&Path]) -> Result<(), HistoryError> {
        let (now, later): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| paths.iter().any(|q| p.path.starts_with(q)));
        self.pending = later;
        self.open = self
            .pending
            .iter()
            .enumerate()
            .map(|(i, p)| (p.path.clone(), i))
            .collect();
        self.put_back_all(now)
    }

    fn flush_all(&mut self) -> Result<(), HistoryError> {
        self.make_untrash()?;
        self.open.clear();
        let all = std::mem::take(&mut self.pending);
        self.put_back_all(all)
    }

    /// Puts back `runs` of distinct paths: first what goes away, deepest first (a directory's
    /// entries before the directory), then what comes back, shallowest first. What goes away
    /// at one depth (so none of it inside another) goes to the trash as one batch.
    fn put_back_all(&mut self, runs: Vec<Pending>) -> Result<(), HistoryError> {
        let depth = |p: &Pending| p.path.components().count();
        let (mut away, mut back): (Vec<Pending>, Vec<Pending>) =
            runs.into_iter().partition(|p| p.target.is_absent());
        away.sort_by_key(|p| std::cmp::Reverse(depth(p)));
        back.sort_by_key(depth);
        let mut away = away.into_iter().peekable();
        while let Some(first) = away.next() {
            let d = depth(&first);
            let mut level = vec![first];
            while let Some(p) = away.next_if(|p| depth(p) == d) {
                level.push(p);
            }
            self.put_away(level)?;
        }
        for p in back {
            self.put_back(p)?;
        }
        Ok(())
    }

    /// Moves to the trash each of `level` (runs whose target is nothing, none inside another)
    /// that may go, with one [`Store::trash_all`].
    fn put_away(&mut self, level: Vec<Pending>) -> Result<(), HistoryError> {
        if self.dry_run || level.len() < 2 {
            for p in level {
                self.put_back(p)?;
            }
            return Ok(());
        }
        let going: Vec<Pending> = level
            .into_iter()
            .filter(|p| {
                let now = self.now(&p.path);
                self.may_go(p, &now)
            })
            .collect();
        if going.is_empty() {
            return Ok(());
        }
        let paths: Vec<PathBuf> = going.iter().map(|p| p.path.clone()).collect();
        let entries = self.store.trash_all(self.lock, &paths);
        self.moved_histories = true;
        // What went before a failure is reported as done, as one by one it would have been.
        let (entries, failed) = match entries {
            Ok(e) => (e, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        for (p, entry) in going.iter().zip(&entries) {
            self.planned.insert(p.path.clone(), State::Absent);
            self.last_trashed = Some(entry.id);
            self.gone(p, &format!(" as entry {}", entry.id));
        }
        failed.map_or(Ok(()), Err)
    }

    /// True when `p`, whose target is nothing and which shows `now`, is to go to the trash:
    /// not when it is already gone (counted), changed since its operation (refused unless
    /// forced), or a directory that holds what the chosen operations did not make (refused
    /// unless forced).
    fn may_go(&mut self, p: &Pending, now: &State) -> bool {
        if p.target.matches(now) {
            self.out.already += 1;
            return false;
        }
        if !p.expect.matches(now) && !self.force {
            self.refuse(&p.path, p.op, now, &p.expect);
            return false;
        }
        if let State::Dir { .. } = now {
            // Entries this revert brought back (a file of a directory that came back from the
            // trash whole, then went on its own) are its own to move.
            let has_entries = !self.dry_run
                && !self.whole
                && self.store.workspace().entries(&p.path).is_ok_and(|e| {
                    e.iter().any(|x| {
                        let at = p.path.join(&x.name);
                        !self.ours.contains(&at)
                            && !matches!(self.planned.get(&at), Some(s) if !s.is_absent())
                    })
                });
            if has_entries && !self.force {
                self.out.refused.push(Step {
                    path: p.path.clone(),
                    what: format!("operation {} created this directory, but it holds entries the chosen operations did not make; left as it is. Revert with --force to move it to the trash anyway", p.op),
                });
                return false;
            }
        }
        true
    }

    /// Reports `p`'s thing moved to the trash (`id`: " as entry N", or nothing in a dry run).
    fn gone(&mut self, p: &Pending, id: &str) {
        let shown = display_relative(&p.path);
        self.done(
            &p.path,
            format!(
                "moved {shown} to the trash{id} (operation {} created it)",
                p.op
            ),
        );
    }

    /// Puts `p.path` back to `p.target`, if it still shows `p.expect` (or `force`).
    fn put_back(&mut self, p: Pending) -> Result<(), HistoryError> {
        self.put_back_to_trash(p).map(|_| ())
    }

    /// [`Reverter::put_back`], returning the trash entry the thing went to when the target is
    /// nothing.
    fn put_back_to_trash(&mut self, p: Pending) -> Result<Option<u64>, HistoryError> {
        let now = self.now(&p.path);
        if p.target.is_absent() {
            if !self.may_go(&p, &now) {
                return Ok(None);
            }
            let id = self.trash(&p.path)?;
            self.gone(&p, &id);
            return Ok(self.last_trashed);
        }
        if p.target.matches(&now) {
            self.out.already += 1;
            return Ok(None);
        }
        let changed = !p.expect.matches(&now);
        if changed && !self.force {
            self.refuse(&p.path, p.op, &now, &p.expect);
            return Ok(None);
        }
        let shown = display_relative(&p.path);
        match &p.target {
            State::File {
                sha256,
                mode,
                version,
                size,
            } => {
                let found = self.store.content_with_hash(&p.path, sha256, *version)?;
                // A dry run moves no history along with the moves and restores it plans, so
                // after one of them it cannot tell where the versions will be: it says so
                // instead of guessing that they are missing.
                let found = match found {
                    None if self.dry_run && self.moved_histories => {
                        self.planned.insert(p.path.clone(), p.target.clone());
                        self.out.done.push(Step {
                            path: p.path.clone(),
                            what: format!("put back {shown} as it was before operation {}, if a version holds that content once the earlier steps have moved the histories", p.op),
                        });
                        return Ok(None);
                    }
                    f => f,
                };
                let Some(content) = found else {
                    self.out.cannot.push(Step {
                        path: p.path.clone(),
                        what: format!("its content before operation {} ({size} bytes) is in no version; only content written with --backup can be put back", p.op),
                    });
                    return Ok(None);
                };
                // What is there now is saved first: a version when the store keeps them and a
                // file is there (the write saves an unknown content itself), else the trash.
                let keep_as_version = self.store.backup && matches!(now, State::File { .. });
                let mut saved = String::new();
                if !now.is_absent() && (!keep_as_version || !matches!(now, State::File { .. })) {
                    saved = self.trash(&p.path)?;
                    saved = format!(" (what was there went to the trash{saved})");
                }
                if !self.dry_run {
                    self.store.write(self.lock, &p.path, &content, false)?;
                    self.store
                        .workspace()
                        .set_mode(&p.path, *mode)
                        .map_err(io_ctx(format!("cannot set the permissions of {shown}")))?;
                }
                self.planned.insert(p.path.clone(), p.target.clone());
                let v = version
                    .map(|v| format!(" (version {v})"))
                    .unwrap_or_default();
                self.done(
                    &p.path,
                    format!(
                        "put back {shown} as it was before operation {}{v}{saved}",
                        p.op
                    ),
                );
            }
            State::Dir { mode } => {
                if !matches!(now, State::Dir { .. }) && !now.is_absent() {
                    self.trash(&p.path)?;
                }
                if !self.dry_run {
                    if !matches!(now, State::Dir { .. }) {
                        self.store
                            .create_dirs(self.lock, &p.path)
                            .map_err(io_ctx(format!("cannot create directory {shown}")))?;
                    }
                    self.lock.touch(&p.path);
                    self.store
                        .workspace()
                        .set_mode(&p.path, *mode)
                        .map_err(io_ctx(format!("cannot set the permissions of {shown}")))?;
                }
                self.planned.insert(p.path.clone(), p.target.clone());
                self.done(
                    &p.path,
                    format!("put back directory {shown} (mode {mode:o})"),
                );
            }
            State::Link { target } => {
                if !now.is_absent() {
                    self.trash(&p.path)?;
                }
                if !self.dry_run {
                    self.lock.touch(&p.path);
                    self.store
                        .workspace()
                        .symlink(&p.path, &field_to_path(target))
                        .map_err(io_ctx(format!("cannot put back the link {shown}")))?;
                }
                self.planned.insert(p.path.clone(), p.target.clone());
                self.done(&p.path, format!("put back link {shown} → {target}"));
            }
            _ => self.out.cannot.push(Step {
                path: p.path.clone(),
                what: format!(
                    "it was a special file before operation {}, which the server cannot make",
                    p.op
                ),
            }),
        }
        Ok(None)
    }

    /// Moves what is at `rel` to the trash (planned, for a dry run); returns " as entry N".
    fn trash(&mut self, rel: &Path) -> Result<String, HistoryError> {
        self.planned.insert(rel.to_path_buf(), State::Absent);
        self.moved_histories = true;
        if self.dry_run {
            return Ok(String::new());
        }
        let entry = self.store.trash(self.lock, rel)?;
        self.last_trashed = Some(entry.id);
        Ok(format!(" as entry {}", entry.id))
    }

    /// Moves what operation `op` moved from `from` to `to` back.
    fn move_back(
        &mut self,
        op: u64,
        to: &Path,
        from: &Path,
        left: &State,
    ) -> Result<(), HistoryError> {
        let (now_to, now_from) = (self.now(to), self.now(from));
        if now_to.is_absent() && left.matches(&now_from) {
            self.out.already += 1;
            return Ok(());
        }
        if !left.matches(&now_to) && !self.force {
            self.refuse(to, op, &now_to, left);
            return Ok(());
        }
        if !now_from.is_absent() {
            if !self.force {
                self.out.refused.push(Step {
                    path: from.to_path_buf(),
                    what: format!("operation {op} moved this to {}, but something is here again; left as it is. Revert with --force to move it to the trash first", display_relative(to)),
                });
                return Ok(());
            }
            self.trash(from)?;
        }
        if now_to.is_absent() {
            self.out.refused.push(Step {
                path: to.to_path_buf(),
                what: format!(
                    "operation {op} moved {} here, but nothing is here any more",
                    display_relative(from)
                ),
            });
            return Ok(());
        }
        if !self.dry_run {
            self.store.rename(self.lock, to, from)?;
        }
        self.moved_histories = true;
        self.planned.insert(from.to_path_buf(), now_to);
        self.planned.insert(to.to_path_buf(), State::Absent);
        self.done(
            from,
            format!(
                "moved {} back to {} (operation {op})",
                display_relative(to),
                display_relative(from)
            ),
        );
        Ok(())
    }

    /// Brings back trash entry `id` to `rel`, where operation `op` deleted it.
    fn untrash(
        &mut self,
        op: u64,
        rel: &Path,
        id: u64,
        before: &State,
    ) -> Result<(), HistoryError> {
        let now = self.now(rel);
        if !now.is_absent() {
            if before.matches(&now) {
                self.out.already += 1;
                return Ok(());
            }
            if !self.force {
                self.refuse(rel, op, &now, &State::Trashed { id });
                return Ok(());
            }
            self.trash(rel)?;
        }
        let mut id = id;
        while let Some(&newer) = self.renumbered.get(&id) {
            id = newer;
        }
        let u = Untrash {
            op,
            rel: rel.to_path_buf(),
            id,
            before: before.clone(),
        };
        if self.dry_run {
            self.untrashed(u);
            return Ok(());
        }
        self.untrash.push(u);
        if self.untrash.len() >= UNTRASH_BATCH {
            self.make_untrash()?;
        }
        Ok(())
    }

    /// Makes the restores waiting in [`Reverter::untrash`], all at once.
    fn make_untrash(&mut self) -> Result<(), HistoryError> {
        let batch = std::mem::take(&mut self.untrash);
        if batch.is_empty() {
            return Ok(());
        }
        let items: Vec<(u64, Option<PathBuf>)> =
            batch.iter().map(|u| (u.id, Some(u.rel.clone()))).collect();
        let results = self.store.restore_all(self.lock, &items)?;
        // Reported in order, so what came back before a failure is listed as done.
        for (u, result) in batch.into_iter().zip(results) {
            match result {
                Ok(_) => self.untrashed(u),
                Err(HistoryError::NotFound(why)) => self.out.cannot.push(Step {
                    path: u.rel,
                    what: format!(
                        "operation {} deleted it as trash entry {}, which cannot be brought back: {why}",
                        u.op, u.id
                    ),
                }),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reports the restore `u` made (or, in a dry run, would make).
    fn untrashed(&mut self, u: Untrash) {
        self.moved_histories = true;
        self.done(
            &u.rel,
            format!(
                "brought {} back from trash entry {} (operation {})",
                display_relative(&u.rel),
                u.id,
                u.op
            ),
        );
        self.planned.insert(u.rel, u.before);
    }
}

fn io_ctx(context: String) -> impl FnOnce(std::io::Error) -> HistoryError {
    move |source| HistoryError::Io { context, source }
}

/// A state in words, for the messages of a refusal.
fn describe_state(s: &State) -> String {
    match s {
        State::File { size, sha256, .. } => {
            format!(
                "a file of {size} bytes, SHA-256 {}…",
                &sha256[..sha256.len().min(12)]
            )
        }
        State::Dir { mode } => format!("a directory (mode {mode:o})"),
        State::Link { target } => format!("a link to {target}"),
        State::Other => "a special file".into(),
        State::Trashed { id } => format!("absent (in the trash as entry {id})"),
        State::Moved { to } => format!("absent (moved to {to})"),
        State::Absent => "absent".into(),
    }
}
