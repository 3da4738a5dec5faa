//! Where each piece of history lives inside `.filesystem/`, and the name escape that keeps
//! workspace names from colliding with the store's own.
//!
//! The history tree of a workspace path is the directory named for it directly under
//! `.filesystem/` (`src/main.rs` → `.filesystem/src/main.rs/`): a file's snapshots `00001`,
//! `00002`, … and its `.head` sit in that directory, and a directory's tree holds the trees of
//! its children. The store's own files share those directories, so a workspace name that could
//! be mistaken for one of them is stored with one `%` in front:
//!
//! | stored as `%` + name                              | why                                   |
//! |---------------------------------------------------|---------------------------------------|
//! | a name in [`RESERVED_NAMES`] (`.head`, `.moves`…) | the store's own files and directories |
//! | five or more ASCII digits (`00001`, `20240101`)   | snapshot and trash-entry names        |
//! | five or more digits + [`UNDONE_SUFFIX`]           | an undone snapshot's second name      |
//! | `.calls.jsonl.` + digits                          | the call log's rotated files          |
//! | [`TEMP_PREFIX`](crate::temp::TEMP_PREFIX)… | atomic-write temporaries          |
//! | anything that begins with `%`                     | so the escape itself is reversible    |
//!
//! Every other name is stored as it is, so ordinary paths look exactly like the workspace. The
//! escape is the same at every level (one table, no level-dependent rules), which is what makes
//! [`encode`] and [`decode`] a reversible pair that needs no context.
//!
//! `files`, the subtree the previous layout kept histories in, is an ordinary name here: a
//! store in the previous layout is recognised by the absence of [`LAYOUT_MARK`] (see
//! [`super::convert`]), not by its name.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use super::HistoryError;

/// The escape character: a stored name beginning with it stands for the rest of the name.
pub const ESCAPE: u8 = b'%';

/// A file's current version, one decimal number, in the file's history directory.
pub const HEAD_FILE: &str = ".head";
/// Suffix of the second name an undone snapshot gets while a write after an undo takes it out
/// of the redo chain (`00003.undone`); see [`super::versions::Versions::append`].
pub const UNDONE_SUFFIX: &str = ".undone";
/// Where deleted entries (and their histories) wait.
pub const TRASH_DIR: &str = ".trash";
/// Where histories go that had to make room (a stale history found at a move or restore target).
pub const ORPHANS_DIR: &str = ".orphans";
/// Append-only log of moves.
pub const MOVES_LOG: &str = ".moves";
/// Append-only log of deletes and restores.
pub const DELETES_LOG: &str = ".deletes";
/// The next trash id, so ids are never reused even after the trash empties.
pub const TRASH_COUNTER: &str = ".next-trash-id";
/// The file every mutation `flock`s.
pub const LOCK_FILE: &str = ".lock";
/// Which outside versions (shelpa mirror records) were already imported, one `path \t key` per
/// line, so importing twice adds nothing.
pub const IMPORTS_LOG: &str = ".imports";
/// A move in progress (`from \t to`): written before a move starts and removed when it is
/// logged, so a move cut short by a crash is finished (or found not to have happened) under the
/// next lock instead of leaving the history at the old path.
pub const PENDING_MOVE: &str = ".pending-move";
/// A delete in progress (`id \t path`): like [`PENDING_MOVE`], so that a delete cut short after
/// the entry went into the trash also takes its history there, instead of leaving it behind for
/// whatever is next created at that path.
pub const PENDING_DELETE: &str = ".pending-delete";
/// A restore in progress (`id \t path`): like [`PENDING_MOVE`], so that a restore cut short after
/// the entry left the trash also brings its history back and is logged, instead of leaving the
/// history behind in the trash and the entry listed as still deleted.
pub const PENDING_RESTORE: &str = ".pending-restore";
/// How the name of a pending note that could not be finished begins once it is set aside into
/// [`ORPHANS_DIR`] (`pending-move-<time>-<pid>`), for `check` to report.
pub const STUCK_NOTE_PREFIX: &str = "pending-";
/// Says the store is in this layout (`2`); a store without it and with a `files/` directory is
/// in the previous one and is converted on open (see [`super::convert`]).
pub const LAYOUT_MARK: &str = ".layout";
/// The text of [`LAYOUT_MARK`].
pub const LAYOUT_MARK_TEXT: &[u8] = b"2\n";
/// A conversion being built (not yet committed); thrown away and rebuilt after a crash.
pub const CONVERTING_DIR: &str = ".converting";
/// A committed conversion whose trees are being moved into place; finished after a crash.
pub const CONVERTED_DIR: &str = ".converted";
/// The operation log: one JSON line per call that changed the workspace (see [`super::oplog`]).
pub const OPERATIONS_LOG: &str = ".operations";
/// The journal of a durable operation (a revert) in progress, from which the next lock writes
/// its entry if a crash cut it short.
pub const PENDING_OPERATION: &str = ".pending-operation";

/// The suffix of the directory beside a trash entry that holds its history.
pub const TRASH_HISTORY_SUFFIX: &str = ".history";

/// Every fixed name the store uses at any level of `.filesystem/`. A workspace name equal to
/// one of them is stored escaped (`%.moves`), wherever it is.
pub const RESERVED_NAMES: &[&str] = &[
    HEAD_FILE,
    MOVES_LOG,
    DELETES_LOG,
    IMPORTS_LOG,
    TRASH_DIR,
    ORPHANS_DIR,
    LOCK_FILE,
    TRASH_COUNTER,
    PENDING_MOVE,
    PENDING_DELETE,
    PENDING_RESTORE,
    LAYOUT_MARK,
    CONVERTING_DIR,
    CONVERTED_DIR,
    crate::STORE_GITIGNORE,
    crate::temp::LIVE_DIR,
    DEFAULT_LOG_NAME,
    OPERATIONS_LOG,
    PENDING_OPERATION,
];

/// Five or more ASCII digits: the shape of snapshot and trash-entry names.
fn all_digits(name: &[u8]) -> bool {
    name.len() >= 5 && name.iter().all(u8::is_ascii_digit)
}

/// True when `name`, stored as it is, could be taken for one of the store's own names.
fn collides(name: &[u8]) -> bool {
    name.first() == Some(&ESCAPE)
        || RESERVED_NAMES.iter().any(|r| r.as_bytes() == name)
        || all_digits(name)
        || name
            .strip_suffix(UNDONE_SUFFIX.as_bytes())
            .is_some_and(all_digits)
        || [DEFAULT_LOG_NAME, OPERATIONS_LOG].iter().any(|log| {
            name.strip_prefix(log.as_bytes())
                .and_then(|r| r.strip_prefix(b"."))
                .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
        })
        || name.starts_with(crate::temp::TEMP_PREFIX.as_bytes())
}

/// One workspace name as stored in a history tree: `%` in front when it would collide, as it
/// is otherwise. Reversed by [`decode`].
pub fn encode(name: &OsStr) -> OsString {
    let bytes = name.as_bytes();
    if collides(bytes) {
        let mut v = Vec::with_capacity(bytes.len() + 1);
        v.push(ESCAPE);
        v.extend_from_slice(bytes);
        OsString::from_vec(v)
    } else {
        name.to_os_string()
    }
}

/// The workspace name a history-tree entry stands for, or `None` for one of the store's own
/// names (a snapshot, `.head`, a log…) or a name [`encode`] never produces (`%` followed by a
/// name that would not have needed it). Reverses [`encode`].
pub fn decode(name: &OsStr) -> Option<OsString> {
    let bytes = name.as_bytes();
    match bytes.split_first() {
        Some((&ESCAPE, rest)) if collides(rest) => Some(OsString::from_vec(rest.to_vec())),
        Some((&ESCAPE, _)) => None,
        _ if collides(bytes) => None,
        Some(_) => Some(name.to_os_string()),
        None => None,
    }
}

/// The longest name one directory entry can have (Linux `NAME_MAX`, in bytes).
pub const NAME_MAX: usize = 255;

/// The history tree of root-relative `rel`, or `None` when one of its names, as stored, would be
/// longer than [`NAME_MAX`] (a 255-byte name that needs the `%` escape): no history can exist
/// there, so there is none to move, and none can be made.
pub fn stored_history_tree(state: &Path, rel: &Path) -> Result<Option<PathBuf>, HistoryError> {
    let mut out = state.to_path_buf();
    for name in components(rel)? {
        let stored = encode(name);
        if stored.len() > NAME_MAX {
            return Ok(None);
        }
        out.push(stored);
    }
    Ok(Some(out))
}

/// Checks that `rel` is a plain root-relative path (what the guard produces) and returns its
/// components. Anything else is refused rather than trusted: the store joins these onto real
/// directories.
pub fn components(rel: &Path) -> Result<Vec<&OsStr>, HistoryError> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(name) => out.push(name),
            _ => {
                return Err(HistoryError::InvalidArgument(format!(
                    "'{}' is not a plain path relative to the workspace root; pass a path like 'src/main.rs'",
                    rel.display()
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(HistoryError::InvalidArgument(
            "this needs a file or directory inside the workspace, not the workspace root itself"
                .into(),
        ));
    }
    Ok(out)
}

/// The history tree of root-relative `rel`: `<state>/<encoded rel>`. For a file it holds the
/// snapshots and `.head`; for a directory, the trees of its children (a path that was both, at
/// different times, holds both). A symlink anywhere on it is refused when the store acts on it:
/// every store operation goes through the workspace layer, which follows no symlink.
///
/// A path with a name the store cannot keep (see [`stored_history_tree`]) is refused with
/// `InvalidArgument`, before anything is changed.
pub fn history_tree(state: &Path, rel: &Path) -> Result<PathBuf, HistoryError> {
    stored_history_tree(state, rel)?.ok_or_else(|| unstorable(rel))
}

/// Why `rel` can have no version history: one of its names is too long to keep escaped.
pub fn unstorable(rel: &Path) -> HistoryError {
    let long = components(rel)
        .ok()
        .and_then(|c| c.into_iter().find(|n| encode(n).len() > NAME_MAX))
        .map_or(0, |n| n.len());
    HistoryError::InvalidArgument(format!(
        "a name in '{}' is {long} bytes and could be taken for one of the history store's own names, so the store would keep it with a '%' in front: {} bytes, more than the {NAME_MAX} a file name can have; rename it to something shorter (or unlike a store name) to give it a version history",
        crate::guard::display_relative(rel),
        long + 1
    ))
}

/// The highest version number a history can reach. A `.head` or snapshot name past it was not
/// written by the store (a store that made a version a second would need thirty years to get
/// there): it is read as damage, so a planted number near `u64::MAX` can neither overflow the
/// arithmetic of a write nor make `check` count to it.
pub const MAX_VERSION: u64 = 999_999_999;

/// The name of snapshot `version` (five digits, more past 99999).
pub fn snapshot_name(version: u64) -> String {
    format!("{version:05}")
}

/// The second name of undone snapshot `version` (`00003.undone`).
pub fn undone_name(version: u64) -> String {
    format!("{version:05}{UNDONE_SUFFIX}")
}

/// The version number a snapshot file name stands for (`00007` → 7), or `None` for any name the
/// store would not have written (it must read back exactly as [`snapshot_name`] formats it).
pub fn snapshot_version(name: &[u8]) -> Option<u64> {
    if !all_digits(name) {
        return None;
    }
    let n: u64 = std::str::from_utf8(name).ok()?.parse().ok()?;
    ((1..=MAX_VERSION).contains(&n) && snapshot_name(n).as_bytes() == name).then_some(n)
}

/// The version an undone snapshot's second name stands for (`00003.undone` → 3).
pub fn undone_version(name: &[u8]) -> Option<u64> {
    name.strip_suffix(UNDONE_SUFFIX.as_bytes())
        .and_then(snapshot_version)
}

/// The trash id a `.trash/` entry name stands for (`00012` → 12), or `None` for any name
/// [`trash_name`] would not produce.
pub fn trash_id(name: &[u8]) -> Option<u64> {
    if !all_digits(name) {
        return None;
    }
    let n: u64 = std::str::from_utf8(name).ok()?.parse().ok()?;
    (trash_name(n).as_bytes() == name).then_some(n)
}

/// The name of trash entry `id` (five digits, more once ids pass 99999).
pub fn trash_name(id: u64) -> String {
    format!("{id:05}")
}

/// The directory beside trash entry `id` that holds its history (`00001.history`).
pub fn trash_history_name(id: u64) -> String {
    format!("{}{TRASH_HISTORY_SUFFIX}", trash_name(id))
}

/// The previous layout (`files/<path>/#versions/{NNNNN,head}`), which [`super::convert`] reads
/// and `check` recognises. Nothing writes it any more.
pub mod old {
    use std::ffi::{OsStr, OsString};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    /// The subtree that mirrored the workspace.
    pub const FILES_DIR: &str = "files";
    /// A file's versions directory inside its tree.
    pub const VERSIONS_DIR: &str = "#versions";
    /// "current newest", in the versions directory.
    pub const HEAD_FILE: &str = "head";

    /// The workspace name an old tree entry stands for (`##x` → `#x`), or `None` for one of
    /// its own names (a single leading `#`).
    pub fn decode(name: &OsStr) -> Option<OsString> {
        let bytes = name.as_bytes();
        match bytes.first() {
            Some(b'#') if bytes.get(1) == Some(&b'#') => {
                Some(OsString::from_vec(bytes[1..].to_vec()))
            }
            Some(b'#') => None,
            _ => Some(name.to_os_string()),
        }
    }
}

// The call log's names. The binary writes the log and the report reads it, but the files live in
// the store, so the store's own name table is where they are defined.

/// How many rotated files are kept (`.1` newest … `.KEEP_ROTATED` oldest).
pub const KEEP_ROTATED: u32 = 4;

/// The log file's name inside a root's `.filesystem/` store.
pub const DEFAULT_LOG_NAME: &str = ".calls.jsonl";

/// True for the name of a rotated call log in a store (`.calls.jsonl.1` …
/// `.calls.jsonl.`[`KEEP_ROTATED`]): one of the store's own files, for `check`.
pub fn is_rotated_log_name(name: &[u8]) -> bool {
    name.strip_prefix(DEFAULT_LOG_NAME.as_bytes())
        .and_then(|rest| rest.strip_prefix(b"."))
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse::<u32>().ok().filter(|v| v.to_string() == n))
        .is_some_and(|n| (1..=KEEP_ROTATED).contains(&n))
}

/// True for the name of a rotated operation log (`.operations.1` …
/// `.operations.`[`KEEP_ROTATED`]), for `check`.
pub fn is_rotated_operations_name(name: &[u8]) -> bool {
    name.strip_prefix(OPERATIONS_LOG.as_bytes())
        .and_then(|rest| rest.strip_prefix(b"."))
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse::<u32>().ok().filter(|v| v.to_string() == n))
        .is_some_and(|n| (1..=KEEP_ROTATED).contains(&n))
}

/// The name of rotated file `n` of the log `name` (`.calls.jsonl.1`).
pub fn rotated_name(name: &OsStr, n: u32) -> OsString {
    let mut out = name.to_os_string();
    out.push(format!(".{n}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(s: &str) -> String {
        encode(OsStr::new(s)).to_string_lossy().into_owned()
    }

    #[test]
    fn ordinary_names_are_stored_as_they_are() {
        for n in [
            "main.rs",
            "src",
            "files",
            "0001",
            "20240101.log",
            "#x",
            "head",
            "a%b",
            ".git",
            "00001.history",
        ] {
            assert_eq!(enc(n), n);
            assert_eq!(decode(OsStr::new(n)).as_deref(), Some(OsStr::new(n)));
        }
    }

    #[test]
    fn colliding_names_get_one_escape() {
        for (n, stored) in [
            ("00001", "%00001"),
            ("123456", "%123456"),
            ("00003.undone", "%00003.undone"),
            (".head", "%.head"),
            (".moves", "%.moves"),
            (".trash", "%.trash"),
            (".gitignore", "%.gitignore"),
            (".calls.jsonl", "%.calls.jsonl"),
            (".calls.jsonl.2", "%.calls.jsonl.2"),
            (".layout", "%.layout"),
            ("%x", "%%x"),
            ("%", "%%"),
            ("%00001", "%%00001"),
        ] {
            assert_eq!(enc(n), stored, "{n}");
            assert_eq!(decode(OsStr::new(stored)).as_deref(), Some(OsStr::new(n)));
        }
    }

    #[test]
    fn the_store_s_own_names_decode_to_nothing() {
        for n in [
            "00001",
            ".head",
            "00002.undone",
            ".moves",
            ".trash",
            "%x",
            "%",
        ] {
            assert_eq!(decode(OsStr::new(n)), None, "{n}");
        }
    }

    #[test]
    fn paths_map_to_the_documented_places() {
        let s = Path::new(".filesystem");
        let tree = |p: &str| history_tree(s, Path::new(p)).expect("ok");
        assert_eq!(tree("src/main.rs"), Path::new(".filesystem/src/main.rs"));
        assert_eq!(tree(".moves"), Path::new(".filesystem/%.moves"));
        assert_eq!(tree("d/00001"), Path::new(".filesystem/d/%00001"));
        assert_eq!(tree("d/.head/%x"), Path::new(".filesystem/d/%.head/%%x"));
    }

    #[test]
    fn a_name_too_long_to_escape_has_no_history_tree() {
        let s = Path::new(".filesystem");
        let long = "%".repeat(NAME_MAX);
        let plain = "a".repeat(NAME_MAX);
        assert_eq!(
            stored_history_tree(s, &Path::new("d").join(&long)).expect("plain path"),
            None
        );
        assert!(history_tree(s, Path::new(&long)).is_err());
        assert_eq!(
            history_tree(s, Path::new(&plain)).expect("fits"),
            s.join(&plain)
        );
    }

    #[test]
    fn non_plain_paths_are_refused() {
        let s = Path::new(".filesystem");
        for bad in ["", "../x", "/etc/passwd", "a/../../b"] {
            assert!(history_tree(s, Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn snapshot_and_undone_names_read_back() {
        assert_eq!(snapshot_version(b"00007"), Some(7));
        assert_eq!(snapshot_version(b"123456"), Some(123456));
        assert_eq!(snapshot_version(b"0007"), None);
        assert_eq!(snapshot_version(b"000007"), None);
        assert_eq!(snapshot_version(b"00000"), None);
        assert_eq!(undone_version(b"00003.undone"), Some(3));
        assert_eq!(undone_version(b"00003"), None);
        assert_eq!(snapshot_version(b"999999999"), Some(MAX_VERSION));
        assert_eq!(snapshot_version(b"1000000000"), None);
        assert_eq!(snapshot_version(b"18446744073709551615"), None);
    }

    proptest! {
        /// Any name a directory entry can have round-trips, and a stored name never reads as
        /// one of the store's own.
        #[test]
        fn escape_round_trips_over_arbitrary_names(
            raw in proptest::collection::vec(any::<u8>(), 1..24),
            pick in 0usize..40,
        ) {
            // Bias towards the interesting shapes: reserved names, digits, escapes.
            let mut name: Vec<u8> = match pick {
                0..=15 => RESERVED_NAMES[pick].as_bytes().to_vec(),
                16..=19 => b"00001".to_vec(),
                20..=23 => b"%".to_vec(),
                24..=25 => b"00042.undone".to_vec(),
                _ => Vec::new(),
            };
            if pick % 2 == 0 || name.is_empty() {
                name.extend(raw);
            }
            name.retain(|&b| b != b'/' && b != 0);
            prop_assume!(!name.is_empty() && name != b"." && name != b"..");
            let os = OsString::from_vec(name.clone());
            let stored = encode(&os);
            prop_assert_eq!(decode(&stored), Some(os.clone()));
            prop_assert!(!stored.as_bytes().contains(&b'/'));
            // What is stored is never a snapshot, head, log or second name.
            prop_assert!(snapshot_version(stored.as_bytes()).is_none());
            prop_assert!(undone_version(stored.as_bytes()).is_none());
            prop_assert!(!RESERVED_NAMES.iter().any(|r| r.as_bytes() == stored.as_bytes()));
            // And distinct names stay distinct.
            let mut other = name.clone();
            other.push(b'x');
            prop_assert_ne!(encode(&OsString::from_vec(other)), stored);
        }
    }
}
