//! The `.filesystem/` store: every name in it is on an allow-list or a valid escaped workspace
//! name, every version history's `.head` must name a snapshot that exists with no gap below
//! it, the trash must agree with `.deletes`, and the trash counter must be ahead of every id in
//! use. Nothing is followed: entries are inspected with `lstat`.
//!
//! A store still in the previous layout (`files/…/#versions`) is reported as such, not as
//! damage: the server converts it the next time it opens it (see
//! [`workspace::history::convert`]). Its trash and counter are checked; its histories are checked
//! after the conversion.
//!
//! The one exception to "no links inside the store" is a trash entry itself (`.trash/00007`):
//! it is whatever the user deleted, a symlink included, so it is never looked into.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use workspace::history::convert::{self, Found};
use workspace::history::durable::is_temp_name;
use workspace::history::layout::{
    self, old, snapshot_version, undone_version, CONVERTED_DIR, CONVERTING_DIR, DELETES_LOG,
    HEAD_FILE, IMPORTS_LOG, LAYOUT_MARK, LOCK_FILE, MOVES_LOG, ORPHANS_DIR, PENDING_DELETE,
    PENDING_MOVE, PENDING_RESTORE, STUCK_NOTE_PREFIX, TRASH_COUNTER, TRASH_DIR,
    TRASH_HISTORY_SUFFIX,
};
use workspace::history::versions::Versions;

use rustix::fs::{FileType, Mode, OFlags};

use workspace::is_swap;
use workspace::walk::{self, DescendError, Tree, MAX_DEPTH};

use super::repair::Fixer;
use super::{CheckError, CheckReport, CheckSeverity, Fix};

/// What an entry is, without following it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Link,
    Special,
}

impl Kind {
    /// The kind of an entry a [`Tree`] walk came to.
    fn of_entry(t: FileType) -> Kind {
        match t {
            FileType::Symlink => Kind::Link,
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File,
            _ => Kind::Special,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "directory",
            Kind::Link => "symlink",
            Kind::Special => "special file",
        }
    }
}

/// One store walk: the store's path, and the repairer and report it writes to.
struct Walk<'a> {
    state: &'a Path,
    fixer: &'a mut Fixer,
    report: &'a mut CheckReport,
    /// Directories the walks did not enter because of the depth limit.
    too_deep: Vec<PathBuf>,
    /// Entries whose paths are too long to act on.
    too_long: Vec<PathBuf>,
    /// Which layout the store is in.
    layout: Found,
}

/// The store directory, root-relative: every read of the store goes through the workspace
/// layer, relative to the root's descriptor, never by its absolute path.
fn store_dir() -> &'static Path {
    Path::new(workspace::guard::STATE_DIRS[0])
}

/// Checks everything inside `.filesystem/` at `state` except the logs' lines.
pub(crate) fn check(
    state: &Path,
    fixer: &mut Fixer,
    report: &mut CheckReport,
) -> Result<(), CheckError> {
    let layout = convert::inspect(
        fixer.workspace(),
        Path::new(workspace::guard::STATE_DIRS[0]),
    )
    .map_err(|source| CheckError::Io {
        what: "cannot read .filesystem/".into(),
        source,
    })?;
    let mut walk = Walk {
        state,
        fixer,
        report,
        too_deep: Vec::new(),
        too_long: Vec::new(),
        layout,
    };
    walk.layout_note();
    for (dir, shown) in walk.top_level()? {
        walk.history_tree(&dir, &shown);
    }
    walk.trash();
    walk.orphans(Path::new(ORPHANS_DIR));
    walk.unreached();
    Ok(())
}

impl Walk<'_> {
    /// The entries of the store directory `rel` (names and kinds, not followed), sorted by name.
    fn entries(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        let mut out: Vec<(OsString, Kind)> = self
            .fixer
            .workspace()
            .entries(&store_dir().join(rel))?
            .into_iter()
            .map(|e| (e.name, Kind::of_entry(e.stat.kind)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn place(rel: &Path) -> String {
        format!(".filesystem/{}", rel.display())
    }

    fn unreadable(&mut self, rel: &Path, e: io::Error) {
        self.report.push(
            CheckSeverity::Error,
            Self::place(rel),
            format!("cannot be read: {e}"),
            Fix::Manual("check its permissions, then rerun".into()),
        );
    }

    /// A symlink or special file: never followed, never moved (moving it would keep it inside
    /// the store anyway), reported for a person to remove.
    fn link(&mut self, rel: &Path, kind: Kind) {
        self.report.push(
            CheckSeverity::Error,
            Self::place(rel),
            format!("a {} inside the history store; it was not followed (the server never creates one, so it was planted or copied in)", kind.name()),
            Fix::Manual("remove it by hand after looking at where it points".into()),
        );
    }

    /// An entry the store never writes at that place.
    fn debris(&mut self, rel: &Path, kind: Kind, why: &str) {
        let fix = self.fixer.move_aside(&self.state.join(rel), rel);
        self.report.push(
            CheckSeverity::Warning,
            Self::place(rel),
            format!("an unexpected {} ({why})", kind.name()),
            fix,
        );
    }

    /// A leftover of `replace_file`: removed when provably stale.
    fn temp(&mut self, rel: &Path) {
        let path = self.state.join(rel);
        if self.fixer.older_than_start(&path) {
            let fix = self.fixer.remove_temp(&path);
            self.report.push(
                CheckSeverity::Warning,
                Self::place(rel),
                "a temporary file left by an interrupted atomic write (it was never renamed into place, so nothing acknowledged depends on it)".into(),
                fix,
            );
        } else {
            self.report.push(
                CheckSeverity::Info,
                Self::place(rel),
                "a temporary file newer than this check: a write is probably in progress".into(),
                Fix::Nothing,
            );
        }
    }

    /// Says which layout the store is in when it is not the current one.
    fn layout_note(&mut self) {
        match self.layout {
            Found::Current => {}
            Found::Old => self.report.push(
                CheckSeverity::Info,
                Self::place(Path::new(old::FILES_DIR)),
                "the store is in the previous layout (files/<path>/#versions/{NNNNN,head}); it will be converted on next open, keeping every snapshot and head, and its histories are checked after that".into(),
                Fix::Nothing,
            ),
            Found::Finishing => self.report.push(
                CheckSeverity::Info,
                Self::place(Path::new(CONVERTED_DIR)),
                "a conversion from the previous layout was committed but cut short before every history was moved into place; the next open finishes it".into(),
                Fix::Nothing,
            ),
        }
    }

    /// The fixed names at the top of the store; returns the history trees found there (the
    /// store path of each and the workspace path it stands for).
    fn top_level(&mut self) -> Result<Vec<(PathBuf, PathBuf)>, CheckError> {
        let list = self
            .entries(Path::new(""))
            .map_err(|source| CheckError::Io {
                what: "cannot list .filesystem/".into(),
                source,
            })?;
        let mut trees = Vec::new();
        for (name, kind) in list {
            let rel = PathBuf::from(&name);
            let old_files = self.layout != Found::Current && name == old::FILES_DIR;
            let expected = match name.to_str() {
                // `.live/` holds the registries of running servers' temporaries: never debris.
                Some(TRASH_DIR | ORPHANS_DIR | workspace::temp::LIVE_DIR) => Some(Kind::Dir),
                // A conversion in progress; reported by `layout_note`, or below when stray.
                Some(CONVERTED_DIR | CONVERTING_DIR) => Some(Kind::Dir),
                _ if old_files => Some(Kind::Dir),
                _ if workspace::history::layout::is_rotated_log_name(name.as_bytes())
                    || workspace::history::layout::is_rotated_operations_name(name.as_bytes()) =>
                {
                    Some(Kind::File)
                }
                Some(
                    MOVES_LOG
                    | DELETES_LOG
                    | IMPORTS_LOG
                    | PENDING_MOVE
                    | PENDING_DELETE
                    | PENDING_RESTORE
                    | TRASH_COUNTER
                    | LOCK_FILE
                    | LAYOUT_MARK
                    | workspace::STORE_GITIGNORE
                    | workspace::history::layout::DEFAULT_LOG_NAME
                    | workspace::history::layout::OPERATIONS_LOG
                    | workspace::history::layout::PENDING_OPERATION,
                ) => Some(Kind::File),
                _ => None,
            };
            if [
                PENDING_MOVE,
                PENDING_DELETE,
                PENDING_RESTORE,
                workspace::history::layout::PENDING_OPERATION,
            ]
            .iter()
            .any(|p| name == *p)
                && kind == Kind::File
            {
                self.report.push(
                    CheckSeverity::Info,
                    Self::place(&rel),
                    "a move, delete, restore or revert was cut short; the next change to the store finishes it (or finds it never happened)".to_string(),
                    Fix::Nothing,
                );
            }
            if name == CONVERTING_DIR && kind == Kind::Dir {
                self.report.push(
                    CheckSeverity::Info,
                    Self::place(&rel),
                    "a conversion from the previous layout was being built when it was cut short; the next open throws it away and builds it again (the old store is untouched)".to_string(),
                    Fix::Nothing,
                );
            }
            match (expected, kind) {
                (Some(want), got) if want == got => {}
                (_, Kind::Link | Kind::Special) => self.link(&rel, kind),
                (Some(want), got) => self.report.push(
                    CheckSeverity::Error,
                    Self::place(&rel),
                    format!(
                        "is a {} where the store keeps a {}",
                        got.name(),
                        want.name()
                    ),
                    Fix::Manual(
                        "rename it out of .filesystem/ by hand so the server can recreate it"
                            .into(),
                    ),
                ),
                (None, Kind::File) if is_temp_name(name.as_bytes()) => self.temp(&rel),
                (None, Kind::Dir) if self.layout == Found::Current => match layout::decode(&name) {
                    Some(ws_name) => trees.push((rel, PathBuf::from(ws_name))),
                    None => self.debris(&rel, kind, "a name the store reserves but never uses here, or an escape (%) on a name that needs none"),
                },
                // Mid-conversion, trees already moved into place sit here: checked (and never
                // moved aside as debris) once the next open has finished the conversion.
                (None, Kind::Dir) if self.layout == Found::Finishing => {}
                (None, _) => self.debris(&rel, kind, "not one of the store's own names or a history tree"),
            }
        }
        Ok(trees)
    }

    /// A history tree: the directory of one workspace path, holding that file's snapshots and
    /// `.head` (see [`Walk::versions`]) and the trees of its children, named with the store's
    /// escape. Walked as a [`Tree`] (no recursion, a bounded number of descriptors, at most
    /// [`MAX_DEPTH`] levels), because moving a directory moves its history tree too, so a store
    /// can be as deep as the workspace was made.
    fn history_tree(&mut self, dir: &Path, workspace: &Path) {
        if self.reachable(dir) {
            self.versions(dir, workspace);
        }
        let Some(mut tree) = self.start(dir) else {
            return;
        };
        // The workspace names of the directories entered, down to the entry at hand.
        let mut names: Vec<OsString> = Vec::new();
        while let Some(found) = tree.next_entry() {
            names.truncate(found.depth);
            let name = &found.name;
            let kind = Kind::of_entry(found.kind);
            let child = dir.join(&found.path);
            match kind {
                Kind::Link | Kind::Special => self.link(&child, kind),
                // Snapshots, `.head`, second names and temporaries: see `versions`.
                Kind::File if is_version_file(name) => {}
                Kind::Dir => match layout::decode(name) {
                    Some(ws_name) => {
                        if self.descend(&mut tree, &child) {
                            names.push(ws_name);
                            if self.reachable(&child) {
                                let mut shown = workspace.to_path_buf();
                                shown.extend(&names);
                                self.versions(&child, &shown);
                            }
                        }
                    }
                    None => {
                        if self.reachable(&child) {
                            self.debris(&child, kind, "a name the store reserves for its own files, or an escape (%) on a name that needs none")
                        }
                    }
                },
                Kind::File => {
                    if self.reachable(&child) {
                        self.debris(
                            &child,
                            kind,
                            "not a snapshot, the .head, or a temporary (a workspace name here would be a directory)",
                        )
                    }
                }
            }
        }
    }

    /// Starts a walk at the store directory `dir`; `None` (with the problem reported) when it
    /// cannot be read, and also when it does not exist.
    fn start(&mut self, dir: &Path) -> Option<Tree> {
        let opened = self
            .fixer
            .workspace()
            .open_at(
                &Path::new(workspace::guard::STATE_DIRS[0]).join(dir),
                OFlags::RDONLY | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .and_then(Tree::new);
        match opened {
            Ok(tree) => Some(tree),
            // A link in its place is reported by the listing that found it.
            Err(e) if e.kind() == io::ErrorKind::NotFound || is_swap(&e) => None,
            Err(e) => {
                self.unreadable(dir, e);
                None
            }
        }
    }

    /// Goes into the directory `child` the walk just came to; false when that failed
    /// (reported) or the walk is at its depth limit (counted, reported once).
    fn descend(&mut self, tree: &mut Tree, child: &Path) -> bool {
        match tree.descend() {
            Ok(()) => true,
            Err(DescendError::TooDeep) => {
                self.too_deep.push(child.to_path_buf());
                false
            }
            Err(DescendError::Io(e)) => {
                self.unreadable(child, e);
                false
            }
            Err(lost) => {
                self.unreadable(child, io::Error::other(lost));
                false
            }
        }
    }

    /// True when the store entry `rel` can be acted on by path; otherwise it is counted and
    /// reported once (a path the kernel refuses is not a problem of the store).
    fn reachable(&mut self, rel: &Path) -> bool {
        // The checks of an entry still read it by its absolute path, the longer spelling.
        let fits = walk::fits_one_call(&self.state.join(rel));
        if !fits {
            self.too_long.push(rel.to_path_buf());
        }
        fits
    }

    /// One warning each for what the walks could not reach: deeper than the depth limit, or
    /// with a path longer than the kernel accepts.
    fn unreached(&mut self) {
        let deep = std::mem::take(&mut self.too_deep);
        self.warn_unreached(&deep, |n| {
            format!(
                "{n} director{} of the store more than {MAX_DEPTH} levels below where the walk started (the depth limit of every walk); what is below was not checked",
                if n == 1 { "y lies" } else { "ies lie" },
            )
        });
        let long = std::mem::take(&mut self.too_long);
        self.warn_unreached(&long, |n| {
            format!(
                "{n} entr{} of the store {} a path longer than the system's limit of {} bytes, so {} not checked",
                if n == 1 { "y" } else { "ies" },
                if n == 1 { "has" } else { "have" },
                libc::PATH_MAX,
                if n == 1 { "it was" } else { "they were" },
            )
        });
    }

    /// One warning for the store paths in `unreached` (none when it is empty), at the first of
    /// them, saying what `message` says of their number: the frame both of [`Self::unreached`]'s
    /// warnings share, with the one remedy for both.
    fn warn_unreached(&mut self, unreached: &[PathBuf], message: impl FnOnce(usize) -> String) {
        let Some(first) = unreached.first() else {
            return;
        };
        self.report.push(
            CheckSeverity::Warning,
            format!(".filesystem/{}", walk::shorten(first)),
            message(unreached.len()),
            Fix::Manual("move the deep workspace tree closer to the root (its history follows it), then rerun".into()),
        );
    }

    /// The file history kept directly in the history directory `dir` (if any): its snapshots,
    /// `.head` and second names. A directory's tree with no snapshots and no head is no file's
    /// history and is not counted.
    fn versions(&mut self, dir: &Path, workspace: &Path) {
        let list = match self.entries(dir) {
            Ok(l) => l,
            Err(e) => return self.unreadable(dir, e),
        };
        let mut snapshots = BTreeSet::new();
        let mut has_head = false;
        let mut any = false;
        for (name, kind) in list {
            let rel = dir.join(&name);
            match kind {
                Kind::File if name == HEAD_FILE => {
                    has_head = true;
                    any = true;
                }
                Kind::File if is_temp_name(name.as_bytes()) => self.temp(&rel),
                Kind::File if undone_version(name.as_bytes()).is_some() => {
                    any = true;
                    self.report.push(
                        CheckSeverity::Info,
                        Self::place(&rel),
                        "a write after an undo was cut short; the undone version is kept under this second name, and the next change to the file puts it back or drops it".to_string(),
                        Fix::Nothing,
                    );
                }
                Kind::File => {
                    if let Some(v) = snapshot_version(name.as_bytes()) {
                        snapshots.insert(v);
                        any = true;
                    }
                }
                // Links are reported by the tree walk; child trees are walked by it.
                _ => {}
            }
        }
        if !any {
            return;
        }
        self.report.histories_checked += 1;
        let shown = if workspace.as_os_str().is_empty() {
            "?".to_string()
        } else {
            workspace.display().to_string()
        };
        let head_rel = dir.join(HEAD_FILE);
        let history = Versions::new(
            self.fixer.workspace().clone(),
            Path::new(workspace::guard::STATE_DIRS[0]).join(dir),
            shown.clone(),
        );
        let head = if has_head { history.head() } else { Ok(None) };
        let current = match head {
            Ok(Some(h)) => h.current,
            Ok(None) => {
                if !snapshots.is_empty() {
                    self.report.push(
                        CheckSeverity::Info,
                        Self::place(dir),
                        format!("the history of {shown} has snapshot(s) {} but no .head (its first write was cut short); redo can bring them back before the next write replaces them", list_numbers(&snapshots)),
                        Fix::Nothing,
                    );
                }
                return;
            }
            Err(e) => {
                self.report.push(
                    CheckSeverity::Error,
                    Self::place(&head_rel),
                    format!("the .head of {shown} cannot be used: {e}"),
                    Fix::Manual(format!(
                        "write the current version number into it by hand; snapshots present: {}",
                        list_numbers(&snapshots)
                    )),
                );
                return;
            }
        };
        if !snapshots.contains(&current) {
            match snapshots.range(..current).next_back().copied() {
                Some(m) => {
                    let fix = self.fixer.rewrite(
                        &self.state.join(&head_rel),
                        format!("{m}\n").as_bytes(),
                        format!("set the head to version {m}"),
                    );
                    self.report.push(
                        CheckSeverity::Error,
                        Self::place(&head_rel),
                        format!("the .head of {shown} names version {current}, but the newest snapshot present below it is {m}"),
                        fix,
                    );
                }
                None => self.report.push(
                    CheckSeverity::Error,
                    Self::place(&head_rel),
                    format!("the .head of {shown} names version {current}, but no snapshot up to it exists"),
                    Fix::Manual("undo is impossible for this file; move its history directory out of the store by hand".into()),
                ),
            }
        }
        let below = snapshots
            .range(..=current)
            .next_back()
            .copied()
            .unwrap_or(0);
        let gaps = missing_runs(&snapshots, below);
        if !gaps.is_empty() {
            self.report.push(
                CheckSeverity::Error,
                Self::place(dir),
                format!(
                    "the history of {shown} is missing snapshot(s) {} below its head; undo cannot step past them",
                    list_runs(&gaps)
                ),
                Fix::Manual("restore them from a backup if one exists; otherwise only the versions above the gap can be undone to".into()),
            );
        }
        // The redo chain is the unbroken run right above the head; anything past a break is
        // out of redo's reach.
        let mut top = current;
        while snapshots.contains(&(top + 1)) {
            top += 1;
        }
        let strays: BTreeSet<u64> = snapshots.range(top + 1..).copied().collect();
        if !strays.is_empty() {
            self.report.push(
                CheckSeverity::Info,
                Self::place(dir),
                format!(
                    "the history of {shown} has snapshot(s) {} past a break in its redo chain (which ends at {top}); redo cannot reach them and the next write leaves them as they are",
                    list_numbers(&strays)
                ),
                Fix::Nothing,
            );
        }
    }

    /// `.trash/`: entries, their histories, and their agreement with `.deletes` and the counter.
    fn trash(&mut self) {
        let dir = Path::new(TRASH_DIR);
        let list = match self.entries(dir) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return self.unreadable(dir, e),
        };
        let deletes = workspace::history::log::HistoryLog::new(
            self.fixer.workspace().clone(),
            Path::new(workspace::guard::STATE_DIRS[0])
                .join(workspace::history::layout::DELETES_LOG),
        );
        let events = match workspace::history::trash::read_deletes(&deletes) {
            Ok(e) => e,
            Err(e) => {
                self.report.push(
                    CheckSeverity::Error,
                    Self::place(Path::new(DELETES_LOG)),
                    format!("cannot be read: {e}"),
                    Fix::Manual("check its permissions, then rerun".into()),
                );
                Vec::new()
            }
        };
        let mut deleted: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
        let mut restored = BTreeSet::new();
        for e in &events {
            if e.restore {
                restored.insert(e.id);
            } else {
                deleted.entry(e.id).or_default().push(e.path.clone());
            }
        }
        let mut slots = BTreeSet::new();
        let mut histories = BTreeSet::new();
        for (name, kind) in list {
            let rel = dir.join(&name);
            let bytes = name.as_bytes();
            if let Some(id) = layout::trash_id(bytes) {
                slots.insert(id);
                continue;
            }
            let history_id = bytes
                .strip_suffix(TRASH_HISTORY_SUFFIX.as_bytes())
                .and_then(layout::trash_id);
            match (history_id, kind) {
                (_, Kind::Link | Kind::Special) => self.link(&rel, kind),
                (Some(id), Kind::Dir) => {
                    histories.insert(id);
                    let was = deleted
                        .get(&id)
                        .and_then(|p| p.first())
                        .cloned()
                        .unwrap_or_else(|| PathBuf::from(format!("trash entry {id}")));
                    // Same layout as a live tree; an old-layout one is converted on next open.
                    if self.layout == Found::Current {
                        self.history_tree(&rel, &was);
                    }
                }
                (None, Kind::File) if is_temp_name(bytes) => self.temp(&rel),
                _ => self.debris(&rel, kind, "not a trash entry or a trash entry's history"),
            }
        }
        for (id, paths) in &deleted {
            let rel = dir.join(layout::trash_name(*id));
            let shown = paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            if paths.len() > 1 {
                self.report.push(
                    CheckSeverity::Error,
                    Self::place(Path::new(DELETES_LOG)),
                    format!("trash id {id} was logged for {} deletes ({shown}); ids must never repeat, and restore_file {id} would use the first", paths.len()),
                    Fix::Manual(format!("look in {} by hand to see which of them it holds", Self::place(&rel))),
                );
            }
            if !restored.contains(id) && !slots.contains(id) {
                self.report.push(
                    CheckSeverity::Info,
                    Self::place(&rel),
                    format!("the delete of {shown} (trash id {id}) was logged but nothing is in the trash under that id: the delete was cut short (the file stayed in place) or a restore was cut short before it was logged"),
                    Fix::Nothing,
                );
            }
        }
        for id in &slots {
            let rel = dir.join(layout::trash_name(*id));
            if !deleted.contains_key(id) {
                self.report.push(
                    CheckSeverity::Warning,
                    Self::place(&rel),
                    format!("trash entry {id} was never logged in .deletes, so list_trash does not show it and restore_file cannot bring it back"),
                    Fix::Manual("move it back into the workspace by hand (it is user data; check will not touch it)".into()),
                );
            } else if restored.contains(id) {
                self.report.push(
                    CheckSeverity::Warning,
                    Self::place(&rel),
                    format!("trash entry {id} is logged as restored but is still in the trash, so restore_file refuses it"),
                    Fix::Manual("move it back into the workspace by hand (it is user data; check will not touch it)".into()),
                );
            }
        }
        let restoring = self.pending_restore();
        for id in histories.difference(&slots) {
            let name = format!("{}{TRASH_HISTORY_SUFFIX}", layout::trash_name(*id));
            let rel = dir.join(name);
            if restoring == Some(*id) {
                self.report.push(
                    CheckSeverity::Info,
                    Self::place(&rel),
                    format!("the history of trash entry {id}, whose restore was cut short after the entry left the trash; the next change to the store brings it back with the entry"),
                    Fix::Nothing,
                );
                continue;
            }
            self.debris(&rel, Kind::Dir, "the history of a trash entry that is no longer in the trash: its restore was cut short before the history followed");
        }
        let largest = slots
            .iter()
            .chain(&histories)
            .chain(deleted.keys())
            .chain(&restored)
            .max()
            .copied()
            .unwrap_or(0);
        self.counter(largest);
    }

    /// The trash id of the restore a crash cut short, as `.pending-restore` names it.
    fn pending_restore(&self) -> Option<u64> {
        let note = workspace::history::log::PendingNote::new(
            self.fixer.workspace().clone(),
            store_dir().join(PENDING_RESTORE),
        );
        let fields = note.read().ok()??;
        std::str::from_utf8(fields.first()?).ok()?.parse().ok()
    }

    /// `.next-trash-id` must be above every id in use, or an id could be handed out twice.
    fn counter(&mut self, largest: u64) {
        let rel = Path::new(TRASH_COUNTER);
        let path = self.state.join(rel);
        let ws = self.fixer.workspace();
        let saved = match ws.stat(&store_dir().join(rel)) {
            Ok(Some(m)) if !m.is_file() => return,
            Ok(Some(_)) => ws
                .read(&store_dir().join(rel))
                .ok()
                .map(|t| String::from_utf8_lossy(&t).trim().parse::<u64>().ok()),
            Ok(None) | Err(_) => None,
        };
        let needed = largest + 1;
        let problem = match saved {
            None if largest == 0 => return,
            None => "is missing while trash ids are in use".to_string(),
            Some(None) => "does not hold a number".to_string(),
            Some(Some(n)) if n < needed => {
                format!("says the next id is {n}, but id {largest} is already in use")
            }
            Some(Some(_)) => return,
        };
        let fix = self.fixer.rewrite(
            &path,
            format!("{needed}\n").as_bytes(),
            format!("set it to {needed}"),
        );
        self.report.push(
            CheckSeverity::Warning,
            Self::place(rel),
            format!("the trash counter {problem} (the next delete skips used ids anyway, but the counter is what keeps ids from ever repeating)"),
            fix,
        );
    }

    /// `.orphans/` holds anything, but never a link or special file. Walked like a history tree.
    fn orphans(&mut self, dir: &Path) {
        let Some(mut tree) = self.start(dir) else {
            return;
        };
        while let Some(found) = tree.next_entry() {
            let kind = Kind::of_entry(found.kind);
            let child = dir.join(&found.path);
            match kind {
                Kind::Link | Kind::Special => self.link(&child, kind),
                Kind::Dir => {
                    self.descend(&mut tree, &child);
                }
                Kind::File
                    if found.depth == 0
                        && found
                            .name
                            .as_bytes()
                            .starts_with(STUCK_NOTE_PREFIX.as_bytes()) =>
                {
                    self.stuck_note(&child)
                }
                Kind::File => {}
            }
        }
    }

    /// A pending note the store could not finish and set aside (see
    /// `workspace::history::Store::lock`): the operation it names is half done.
    fn stuck_note(&mut self, rel: &Path) {
        // Its first 600 bytes: a note is one short line, and a planted large file is not read.
        let mut head = Vec::new();
        let _ = self
            .fixer
            .workspace()
            .open_regular(&store_dir().join(rel), OFlags::RDONLY, Mode::empty())
            .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 600), &mut head));
        let text: String = String::from_utf8_lossy(&head)
            .trim_end()
            .replace('\t', " -> ")
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        self.report.push(
            CheckSeverity::Warning,
            Self::place(rel),
            format!("a move, delete or restore cut short by a crash could not be finished when the store was next opened, so its note ({text}) was set aside here: the entry is where the crash left it, and its version history may still be under its old path in .filesystem/"),
            Fix::Manual("look where the note's paths lead; move the history directory by hand if it did not follow, then remove this file".into()),
        );
    }
}

/// True for the names a file's history keeps beside its children's trees: snapshots, `.head`,
/// second names of undone versions, and temporaries of atomic writes.
fn is_version_file(name: &std::ffi::OsStr) -> bool {
    let b = name.as_bytes();
    name == HEAD_FILE
        || snapshot_version(b).is_some()
        || undone_version(b).is_some()
        || is_temp_name(b)
}

/// The runs of numbers in `1..below` missing from `present`, as `(first, last)`: as many as
/// there are gaps (at most one more than the snapshots present), however large the numbers.
fn missing_runs(present: &BTreeSet<u64>, below: u64) -> Vec<(u64, u64)> {
    let mut runs = Vec::new();
    let mut next = 1u64;
    for &v in present.range(..below) {
        if v > next {
            runs.push((next, v - 1));
        }
        next = v.saturating_add(1);
    }
    if next < below {
        runs.push((next, below - 1));
    }
    runs
}

/// `1-4, 7, 9-12` — at most ten runs, then how many more, and how many numbers in all.
fn list_runs(runs: &[(u64, u64)]) -> String {
    let mut parts: Vec<String> = runs
        .iter()
        .take(10)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    if runs.len() > 10 {
        parts.push(format!("and {} more runs", runs.len() - 10));
    }
    let total: u64 = runs.iter().map(|&(a, b)| b - a + 1).sum();
    if runs.len() > 10 || runs.iter().any(|&(a, b)| a != b) {
        parts.push(format!("({total} in all)"));
    }
    parts.join(", ")
}

/// `1, 2, 5` — at most ten numbers, then how many more.
fn list_numbers(set: &BTreeSet<u64>) -> String {
    let mut parts: Vec<String> = set.iter().take(10).map(u64::to_string).collect();
    if set.len() > 10 {
        parts.push(format!("and {} more", set.len() - 10));
    }
    parts.join(", ")
}
