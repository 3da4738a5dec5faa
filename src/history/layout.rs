//! Where each piece of history lives inside `.filesystem/`, and the name encoding that keeps
//! workspace names from colliding with the store's own.
//!
//! Every name the store itself chooses inside a history tree starts with a single `#`
//! (`#versions`). A workspace component that starts with `#` is stored with one more `#` in
//! front (`#x` → `##x`), so no workspace name can ever be mistaken for a store name, and the
//! mapping stays readable for a person browsing `.filesystem/files/`.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use super::HistoryError;

/// Directory (inside a path's history tree) holding that path's own versions and head. Its name
/// starts with a single `#`, which no encoded workspace name does.
pub(crate) const VERSIONS_DIR: &str = "#versions";
/// Subtree of `.filesystem/` mirroring the workspace, one history tree per tracked path.
pub(crate) const FILES_DIR: &str = "files";
/// Where deleted entries (and their histories) wait.
pub(crate) const TRASH_DIR: &str = ".trash";
/// Where histories go that had to make room (a stale history found at a move or restore target).
pub(crate) const ORPHANS_DIR: &str = ".orphans";
/// Append-only log of moves.
pub(crate) const MOVES_LOG: &str = ".moves";
/// Append-only log of deletes and restores.
pub(crate) const DELETES_LOG: &str = ".deletes";
/// The next trash id, so ids are never reused even after the trash empties.
pub(crate) const TRASH_COUNTER: &str = ".next-trash-id";
/// The file every mutation `flock`s.
pub(crate) const LOCK_FILE: &str = ".lock";

/// Checks that `rel` is a plain root-relative path (what the guard produces) and returns its
/// components. Anything else is refused rather than trusted: the store joins these onto real
/// directories.
pub(crate) fn components(rel: &Path) -> Result<Vec<&std::ffi::OsStr>, HistoryError> {
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

/// The workspace name a history-tree entry stands for, or `None` for one of the store's own names
/// (a single leading `#`). Reverses [`encode`].
pub(crate) fn decode(name: &std::ffi::OsStr) -> Option<OsString> {
    let bytes = name.as_bytes();
    match bytes.first() {
        Some(b'#') if bytes.get(1) == Some(&b'#') => Some(OsString::from_vec(bytes[1..].to_vec())),
        Some(b'#') => None,
        _ => Some(name.to_os_string()),
    }
}

/// The trash id a `.trash/` entry name stands for (`00012` → 12), or `None` for any name
/// [`trash_name`] would not produce.
pub(crate) fn trash_id(name: &[u8]) -> Option<u64> {
    if name.len() < 5 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(name).ok()?.parse().ok()?;
    (trash_name(n).as_bytes() == name).then_some(n)
}

/// The suffix of the directory beside a trash entry that holds its history.
pub(crate) const TRASH_HISTORY_SUFFIX: &str = ".history";

/// One workspace name as stored in a history tree.
fn encode(name: &std::ffi::OsStr) -> OsString {
    let bytes = name.as_bytes();
    if bytes.first() == Some(&b'#') {
        let mut v = Vec::with_capacity(bytes.len() + 1);
        v.push(b'#');
        v.extend_from_slice(bytes);
        OsString::from_vec(v)
    } else {
        name.to_os_string()
    }
}

/// The history tree of root-relative `rel`: `files/<encoded rel>` under `state`. For a
/// directory it holds the trees of its children; for a file, its [`VERSIONS_DIR`].
/// A symlink anywhere on it is refused when the store acts on it: every store operation goes
/// through the workspace layer, which follows no symlink.
pub(crate) fn history_tree(state: &Path, rel: &Path) -> Result<PathBuf, HistoryError> {
    let mut out = state.join(FILES_DIR);
    for name in components(rel)? {
        out.push(encode(name));
    }
    Ok(out)
}

/// The versions directory of the file at `rel`.
pub(crate) fn versions_dir(state: &Path, rel: &Path) -> Result<PathBuf, HistoryError> {
    Ok(history_tree(state, rel)?.join(VERSIONS_DIR))
}

/// Which outside versions (shelpa mirror records) were already imported, one `path \t key` per
/// line, so importing twice adds nothing.
pub(crate) const IMPORTS_LOG: &str = ".imports";

/// A move in progress (`from \t to`): written before a move starts and removed when it is
/// logged, so a move cut short by a crash is finished (or found not to have happened) under the
/// next lock instead of leaving the history at the old path.
pub(crate) const PENDING_MOVE: &str = ".pending-move";

/// A delete in progress (`id \t path`): like [`PENDING_MOVE`], so that a delete cut short after
/// the entry went into the trash also takes its history there, instead of leaving it behind for
/// whatever is next created at that path.
pub(crate) const PENDING_DELETE: &str = ".pending-delete";

/// The name of trash entry `id` (five digits, more once ids pass 99999).
pub(crate) fn trash_name(id: u64) -> String {
    format!("{id:05}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_names_and_workspace_names_never_collide() {
        let s = Path::new("/ws/.filesystem");
        let file = versions_dir(s, Path::new("a")).expect("ok");
        let child_named_like_store = history_tree(s, Path::new("a/#versions")).expect("ok");
        assert_ne!(file, child_named_like_store);
        assert_eq!(
            child_named_like_store,
            PathBuf::from("/ws/.filesystem/files/a/##versions")
        );
        // Names the store uses at its top level are just names inside `files/`.
        assert_eq!(
            history_tree(s, Path::new(".moves")).expect("ok"),
            PathBuf::from("/ws/.filesystem/files/.moves")
        );
    }

    #[test]
    fn non_plain_paths_are_refused() {
        let s = Path::new("/ws/.filesystem");
        for bad in ["", "../x", "/etc/passwd", "a/../../b"] {
            assert!(history_tree(s, Path::new(bad)).is_err(), "{bad}");
        }
    }
}
