//! The session directory: shelpa's one piece of shell state.
//!
//! Models expect `cd` to stick, so each toolset keeps one working directory, starting at the root.
//! It is stored relative to the root and re-resolved through the guard, then opened through the
//! workspace layer, on every call: a directory that was swapped for a symlink since the `cd` is
//! refused, not followed.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::guard::{display_relative, GuardError, PathGuard};
use crate::workspace::is_swap;

/// Why the working directory of a call could not be established.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The directory is outside the workspace (or reached through an escaping symlink).
    #[error("'{0}' is outside the workspace.")]
    Escape(String, #[source] GuardError),
    /// The path exists but is not a directory, or does not exist.
    #[error("'{0}' is not a directory inside the workspace.")]
    NotADirectory(String),
    /// The directory was replaced by a symlink between the check and the open: refused.
    #[error("'{0}' was replaced by a symbolic link while the call ran, so it was not entered.")]
    Swapped(String),
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

    /// The directory a call runs in, relative to the root: `override_dir` (the call's `cwd`
    /// argument) if given, else the session directory. Either is checked again now, through the
    /// guard and then by opening it through the workspace layer, so a directory swapped for a
    /// symlink since the `cd` is refused, never followed.
    ///
    /// `override_dir` is relative to the root, like every path a tool argument names, so that the
    /// same `cwd` means the same directory whatever `cd` happened before.
    pub fn current(
        &self,
        guard: &PathGuard,
        override_dir: Option<&str>,
    ) -> Result<PathBuf, SessionError> {
        match override_dir {
            Some(dir) => resolve_dir(guard, dir, dir),
            None => {
                let shown = display_relative(&self.relative());
                resolve_dir(guard, &shown, &shown)
            }
        }
    }

    /// Moves the session to `dir` (root-relative, already guarded by the policy); checked again
    /// here. Returns the new directory, root-relative.
    pub fn change(&self, guard: &PathGuard, dir: &Path) -> Result<PathBuf, SessionError> {
        let shown = display_relative(dir);
        let relative = resolve_dir(guard, &shown, &shown)?;
        if let Ok(mut cwd) = self.cwd.lock() {
            *cwd = relative.clone();
        }
        Ok(relative)
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

/// Resolves `path` (root-relative or absolute inside the root) through the guard and requires
/// a real directory there, opened through the workspace layer; `shown` is the caller's spelling.
/// Returns the root-relative directory.
fn resolve_dir(guard: &PathGuard, path: &str, shown: &str) -> Result<PathBuf, SessionError> {
    let resolved = guard.resolve(path).map_err(|e| {
        if e.is_escape() && !matches!(e, GuardError::Protected { .. }) {
            SessionError::Escape(shown.to_string(), e)
        } else {
            SessionError::Refused(e)
        }
    })?;
    match guard.workspace().dir(&resolved.relative) {
        Ok(_) => Ok(resolved.relative),
        Err(e) if is_swap(&e) => Err(SessionError::Swapped(shown.to_string())),
        Err(_) => Err(SessionError::NotADirectory(shown.to_string())),
    }
}

/// The absolute form of a session directory, for the argument policy (which hands stages paths
/// relative to it) and for `pwd`: the root itself for the root, never with a trailing slash.
pub fn absolute(guard: &PathGuard, relative: &Path) -> PathBuf {
    if relative.as_os_str().is_empty() {
        guard.root().to_path_buf()
    } else {
        guard.root().join(relative)
    }
}
