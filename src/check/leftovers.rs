//! Temporary files beside workspace files, left when a process died between writing the
//! temporary and renaming it over the real file.
//!
//! Today every writer uses the workspace layer's one scheme (`.filesystem-tmp-XXXXXX`): the
//! store's atomic replace under the store lock, and the legacy `tee` and `audit restore`. Older
//! versions of the legacy `tee` made `.NAME.shelpa-tmp-PID-NANOS-N` under the mirror's own lock;
//! those are still recognised, since a workspace may hold one from before the change. A leftover was never renamed into place, so no acknowledged write
//! depends on it; still, it may be the only copy of an unacknowledged write, so `--repair` moves
//! it aside into `.filesystem/.orphans/` rather than deleting it. The walk never follows a link
//! and skips the server's own state directories (checked elsewhere).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use workspace::history::durable::is_temp_name;
use workspace::temp::is_leftover;
use workspace::walk::{self, DescendError, Tree, MAX_DEPTH};
use workspace::Stat;

use super::repair::Fixer;
use super::{CheckError, CheckReport, CheckSeverity, Fix};

/// Walks the workspace at `root` for leftover temporaries: a [`Tree`] from the root's
/// descriptor, so the walk neither recurses nor holds a descriptor per level, reaches every
/// depth the kernel could never name in one path, and stops at [`MAX_DEPTH`] with a warning.
pub(crate) fn check(
    root: &Path,
    fixer: &mut Fixer,
    report: &mut CheckReport,
) -> Result<(), CheckError> {
    let cannot = |source| CheckError::Io {
        what: "cannot walk the workspace".into(),
        source,
    };
    let fd = fixer
        .workspace()
        .open_at(
            Path::new(""),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .map_err(cannot)?;
    let mut tree = Tree::new(fd).map_err(cannot)?;
    let mut too_deep: Vec<PathBuf> = Vec::new();
    while let Some(found) = tree.next_entry() {
        // State directories at any depth are checked elsewhere (or belong to a nested root).
        if workspace::guard::STATE_DIRS
            .iter()
            .any(|s| found.name == *s)
        {
            continue;
        }
        match found.kind {
            FileType::Directory => match tree.descend() {
                Ok(()) => {}
                Err(DescendError::TooDeep) => too_deep.push(found.path),
                // A directory that cannot be read is reported, not fatal: the rest still gets
                // checked.
                Err(e) => report.push(
                    CheckSeverity::Warning,
                    walk::shorten(&found.path),
                    format!("cannot be read ({e}), so it was not checked for leftover temporaries"),
                    Fix::Manual("check its permissions, then rerun".into()),
                ),
            },
            FileType::RegularFile => {
                let stat = tree
                    .current()
                    .and_then(|dir| walk::stat_at(dir, &found.name).ok().flatten());
                if let Some(stat) = stat.filter(Stat::is_file) {
                    temp(root, &found.path, &found.name, &stat, fixer, report);
                }
            }
            _ => {}
        }
    }
    if let Some(first) = too_deep.first() {
        report.push(
            CheckSeverity::Warning,
            walk::shorten(first),
            format!(
                "{} director{} more than {MAX_DEPTH} levels below the root (the depth limit of every walk), so what is below {} not checked for leftover temporaries",
                too_deep.len(),
                if too_deep.len() == 1 { "y lies" } else { "ies lie" },
                if too_deep.len() == 1 { "it was" } else { "them was" },
            ),
            Fix::Manual("move deep trees closer to the root if they should be checked".into()),
        );
    }
    Ok(())
}

/// Reports (and with `--repair` moves aside) `rel` if it is one of our temporaries; `stat` is
/// what the walk found there.
fn temp(
    root: &Path,
    rel: &Path,
    name: &OsStr,
    stat: &Stat,
    fixer: &mut Fixer,
    report: &mut CheckReport,
) {
    let path = root.join(rel);
    let shown = walk::shorten(rel);
    let owner = if is_temp_name(name.as_bytes()) {
        // Only a file that still bears the mark every temporary is made with is ours; a user's
        // file that merely has such a name is left alone.
        if !is_leftover(name.as_bytes(), stat) {
            return;
        }
        Owner::Store
    } else if let Some(pid) = name.to_str().and_then(temp_owner_pid) {
        Owner::Tee(pid)
    } else {
        return;
    };
    let busy = match owner {
        // The store makes these only under the store lock, which --repair holds; tee and
        // `audit restore` hold one only for the length of a single write, so one older than the
        // start of this check is a leftover (at worst a write racing the check fails; it is
        // never lost, as the rename into place then finds no temporary).
        // A temporary whose owner's registry is still locked belongs to a live server, however
        // old it is (a long write); the others have only the age test.
        Owner::Store => {
            !fixer.before_start(stat)
                || fixer.workspace().temp_owner_alive(name.as_bytes()) == Some(true)
        }
        Owner::Tee(pid) => !fixer.before_start(stat) || process_alive(pid),
    };
    if let Owner::Tee(_) = owner {
        // Tee no longer makes these (it uses the one temporary scheme), and nothing marks an old
        // one as ours rather than a user's file with a look-alike name: reported, never moved.
        report.push(
            CheckSeverity::Info,
            shown,
            if busy {
                "named like a temporary of tee from an older version, whose writer may still be running; left alone"
            } else {
                "named like a temporary of an interrupted tee from an older version; left alone, since a user's file could have this name: remove it by hand if it is debris"
            }
            .into(),
            Fix::Nothing,
        );
        return;
    }
    if busy {
        report.push(
            CheckSeverity::Info,
            shown,
            "a temporary file of a write that may still be running; left alone".into(),
            Fix::Nothing,
        );
        return;
    }
    let fix = fixer.move_aside(&path, &Path::new("workspace").join(rel));
    report.push(
        CheckSeverity::Warning,
        shown,
        "a temporary file left by an interrupted overwrite (never renamed into place, so never acknowledged)".into(),
        fix,
    );
}

/// Who made a temporary.
enum Owner {
    /// The workspace layer's scheme (the store, tee, `audit restore`).
    Store,
    /// Legacy `tee`, in the process with this id.
    Tee(u32),
}

/// True when a process with `pid` exists (a process we may not signal still exists).
fn process_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// What marked a name as a temporary of the legacy `tee` before it used the workspace layer's
/// scheme: `.{name}.shelpa-tmp-{pid}-{nanos}-{attempt}`. No longer made; recognised so leftovers
/// of older versions are still found.
const OLD_TEE_MARKER: &str = ".shelpa-tmp-";

/// The process id inside an old tee temporary's name, or `None` if `name` does not have exactly
/// that shape: an interrupted overwrite's leftover (its process is gone) is told from one still
/// being written by an older server that is still running.
fn temp_owner_pid(name: &str) -> Option<u32> {
    let at = name.rfind(OLD_TEE_MARKER)?;
    if !name.starts_with('.') || at < 2 {
        return None;
    }
    let mut parts = name[at + OLD_TEE_MARKER.len()..].split('-');
    let pid = parts.next()?.parse::<u32>().ok()?;
    let nanos = parts.next()?;
    let attempt = parts.next()?;
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (numeric(nanos) && numeric(attempt) && parts.next().is_none()).then_some(pid)
}
