//! The session directory: shelpa's one piece of shell state.
//!
//! Models expect `cd` to stick, so each toolset keeps one working directory, starting at the root.
//! It is stored relative to the root and re-resolved through the guard on every call: a directory
//! that was swapped for a symlink to the outside since the `cd` is refused, not followed.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::guard::{GuardError, PathGuard};

/// Why the working directory of a call could not be established.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The directory is outside the workspace (or reached through an escaping symlink).
    #[error("'{0}' is outside the workspace.")]
    Escape(String, #[source] GuardError),
    /// The path exists but is not a directory, or does not exist.
    #[error("'{0}' is not a directory inside the workspace.")]
    NotADirectory(String),
    /// The guard refused the path for another reason (state directory, NUL, empty…).
    #[error("{0}")]
    Refused(#[source] GuardError),
}

/// One session directory per toolset, behind a mutex because MCP calls may arrive on any thread.
#[derive(Debug)]
pub struct Session {
    /// Relative to the root; empty for the root itself.
    cwd: Mutex<PathBuf>,
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

impl Session {
    /// A session that starts at the root.
    pub fn new() -> Self {
        Session {
            cwd: Mutex::new(PathBuf::new()),
        }
    }

    /// The absolute directory a call runs in: `override_dir` (the call's `cwd` argument) if given,
    /// else the session directory. Either is checked again through the guard now.
    ///
    /// `override_dir` is relative to the root, like every path a tool argument names, so that the
    /// same `cwd` means the same directory whatever `cd` happened before.
    pub fn current(
        &self,
        guard: &PathGuard,
        override_dir: Option<&str>,
    ) -> Result<PathBuf, SessionError> {
        let session_rel = self.relative();
        let session_abs = guard.root().join(&session_rel);
        match override_dir {
            Some(dir) => resolve_dir(guard, dir, dir),
            None => {
                let shown = crate::guard::display_relative(&session_rel);
                resolve_dir(guard, &session_abs.to_string_lossy(), &shown)
            }
        }
    }

    /// Moves the session to `dir` (absolute, already guarded by the policy); checked again here.
    pub fn change(&self, guard: &PathGuard, dir: &Path) -> Result<PathBuf, SessionError> {
        let shown = dir
            .strip_prefix(guard.root())
            .map(crate::guard::display_relative)
            .unwrap_or_else(|_| dir.to_string_lossy().into_owned());
        let resolved = resolve_dir(guard, &dir.to_string_lossy(), &shown)?;
        let relative = resolved
            .strip_prefix(guard.root())
            .map(Path::to_path_buf)
            .unwrap_or_default();
        if let Ok(mut cwd) = self.cwd.lock() {
            *cwd = relative;
        }
        Ok(resolved)
    }

    fn relative(&self) -> PathBuf {
        // A poisoned lock only means another call panicked mid-update of a PathBuf, which is
        // always a whole value: keep using it.
        match self.cwd.lock() {
            Ok(cwd) => cwd.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// Resolves `path` through the guard and requires a directory; `shown` is the caller's spelling.
fn resolve_dir(guard: &PathGuard, path: &str, shown: &str) -> Result<PathBuf, SessionError> {
    let resolved = guard.resolve(path).map_err(|e| {
        if e.is_escape() && !matches!(e, GuardError::Protected { .. }) {
            SessionError::Escape(shown.to_string(), e)
        } else {
            SessionError::Refused(e)
        }
    })?;
    // `root.join("")` would end in a slash; `pwd` shows the root as itself.
    let path = if resolved.is_root() {
        guard.root().to_path_buf()
    } else {
        resolved.path
    };
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => Ok(path),
        _ => Err(SessionError::NotADirectory(shown.to_string())),
    }
}
