//! The only ways `--repair` changes anything: removing a stale temporary, moving debris aside
//! into `.filesystem/.orphans/`, truncating a log to its complete lines, and replacing a small
//! store file atomically. Keeping them in one place keeps the allow-list of repairs auditable.

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use workspace::history::layout::ORPHANS_DIR;
use workspace::history::log::now;
use workspace::{Stat, Workspace};

use super::Fix;

/// Carries out repairs (or describes them when not repairing). Every repair goes through the
/// workspace layer: relative to descriptors opened beneath the root, following no symlink, and
/// never cutting a file that has another hard link.
pub(crate) struct Fixer {
    ws: Workspace,
    repair: bool,
    /// When the check started (after taking the lock when repairing): temporaries modified
    /// before it cannot belong to a mutation still running.
    pub(crate) started: SystemTime,
    /// `.filesystem/.orphans/check-<time>-<pid>/`, made on first use.
    batch: Option<PathBuf>,
}

impl Fixer {
    pub(crate) fn new(ws: Workspace, repair: bool) -> Fixer {
        Fixer {
            ws,
            repair,
            started: SystemTime::now(),
            batch: None,
        }
    }

    /// `what` done by `act` when repairing, or described as what would be done.
    pub(crate) fn apply(&self, what: String, act: impl FnOnce() -> io::Result<()>) -> Fix {
        if !self.repair {
            return Fix::WouldRepair(what);
        }
        match act() {
            Ok(()) => Fix::Repaired(what),
            Err(e) => Fix::Failed(format!("{what} failed: {e}")),
        }
    }

    /// The root-relative spelling of a path the walk found under the root.
    fn rel<'p>(&self, path: &'p Path) -> io::Result<&'p Path> {
        self.ws.relative(path)
    }

    /// True when `path` (not followed) was last modified before the check started.
    pub(crate) fn older_than_start(&self, path: &Path) -> bool {
        self.rel(path)
            .and_then(|rel| self.ws.stat(rel))
            .is_ok_and(|m| m.is_some_and(|m| self.before_start(&m)))
    }

    /// True when what `stat` describes was last modified before the check started: for walks
    /// that looked at an entry through its directory rather than by path.
    pub(crate) fn before_start(&self, stat: &Stat) -> bool {
        let started = self
            .started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or((0, 0), |d| {
                (d.as_secs() as i64, i64::from(d.subsec_nanos()))
            });
        (stat.mtime, stat.mtime_nsec) < started
    }

    /// Removes the stale temporary file at `path`.
    pub(crate) fn remove_temp(&self, path: &Path) -> Fix {
        self.apply("removed it".into(), || {
            // Only a regular file is ever removed: the walk saw one, and a swap since then is
            // refused rather than followed.
            let rel = self.rel(path)?;
            if !self.ws.stat(rel)?.is_some_and(|m| m.is_file()) {
                return Err(io::Error::other("it is no longer a regular file"));
            }
            self.ws.remove_file(rel)
        })
    }

    /// Moves `path` (root-relative `rel`) into this run's directory under `.orphans/`, keeping
    /// its relative path so a person can tell where it came from.
    pub(crate) fn move_aside(&mut self, path: &Path, rel: &Path) -> Fix {
        let shown_batch = self
            .batch
            .as_ref()
            .and_then(|b| self.rel(b).ok())
            .map(|b| b.display().to_string())
            .unwrap_or_else(|| format!(".filesystem/{ORPHANS_DIR}/check-…"));
        if !self.repair {
            return Fix::WouldRepair(format!("move it aside into {shown_batch}/"));
        }
        let batch = match self.batch_dir() {
            Ok(b) => b,
            Err(e) => return Fix::Failed(format!("cannot create the orphans directory: {e}")),
        };
        let dest = batch.join(rel);
        let shown = self.rel(&dest).unwrap_or(&dest).display().to_string();
        let moved = (|| {
            let (from, to) = (self.rel(path)?, self.rel(&dest)?);
            if let Some(parent) = to.parent() {
                self.ws.create_dirs(parent)?;
            }
            self.ws.rename_no_replace(from, to)
        })();
        match moved {
            Ok(()) => Fix::Repaired(format!("moved it aside to {shown}")),
            Err(e) => Fix::Failed(format!("moving it aside to {shown} failed: {e}")),
        }
    }

    fn batch_dir(&mut self) -> io::Result<PathBuf> {
        if let Some(b) = &self.batch {
            return Ok(b.clone());
        }
        let stamp: String = now()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let dir = self
            .ws
            .root()
            .join(workspace::guard::STATE_DIRS[0])
            .join(ORPHANS_DIR)
            .join(format!("check-{stamp}-{}", std::process::id()));
        self.ws.create_dirs(self.rel(&dir)?)?;
        self.batch = Some(dir.clone());
        Ok(dir)
    }

    /// Cuts the file at `path` back to its first `keep` bytes and makes that durable.
    pub(crate) fn truncate(&self, path: &Path, keep: u64, what: String) -> Fix {
        self.apply(what, || {
            // Refused when the file has another hard link: cutting it would cut that file too.
            let file = self.ws.open_for_update(self.rel(path)?)?;
            file.set_len(keep)?;
            file.sync_all()
        })
    }

    /// Replaces the small store file at `path` with `content`, atomically.
    pub(crate) fn rewrite(&self, path: &Path, content: &[u8], what: String) -> Fix {
        self.apply(what, || {
            self.ws.replace_file(self.rel(path)?, content, None, false)
        })
    }

    /// The workspace layer repairs go through, for the walks that read the store.
    pub(crate) fn workspace(&self) -> &Workspace {
        &self.ws
    }
}
