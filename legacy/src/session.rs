//! The session directory: shelpa's one piece of shell state.
//!
//! Models expect `cd` to stick, so each toolset keeps one working directory, starting at the root.
//! It is stored relative to the root and re-resolved through the guard, then opened through the
//! workspace layer, on every call: a directory that was swapped for a symlink since the `cd` is
//! refused, not followed.
//!
//! A session directory that vanished (deleted by `delete_file` in the combined mode, by `rm -r`
//! outside, or turned into a file) must not leave the session stuck: the call falls back to the
//! nearest ancestor that is still a real directory (at worst the root), the session moves there,
//! and the result says so. A directory replaced by a symlink has not vanished: that stays a
//! refusal (PATH_ESCAPE), since following or skipping past a planted link is how an attacker
//! would steer the session.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use workspace::guard::{display_relative, GuardError, PathGuard};
use workspace::is_swap;

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
    /// The session directory (cwd) is a symbolic link now, or leads through one: refused, not
    /// followed, and not "vanished" either (falling back past a planted link would let whoever
    /// planted it steer the session).
    #[error("The session directory (cwd) '{0}' has been replaced by a symbolic link (or leads through one); it is not followed.")]
    SessionSwapped(String),
    /// The guard refused the path for another reason (state directory, NUL, empty…).
    #[error("{0}")]
    Refused(#[source] GuardError),
}

/// The directory a call runs in, and whether the session had to leave a vanished directory to
/// find it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// Root-relative directory of the call.
    pub relative: PathBuf,
    /// Set when the session directory no longer existed and the session moved.
    pub fallback: Option<Fallback>,
}

/// A move of the session out of a directory that vanished: reported to the model, so that it
/// knows its `cd` no longer holds and where it now is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// The vanished session directory, root-relative.
    pub from: PathBuf,
    /// The nearest existing ancestor the session moved to, root-relative.
    pub to: PathBuf,
}

impl Fallback {
    /// The sentence put in the result's `note` field (root-relative names only, never the
    /// host's path of the root).
    pub fn note(&self) -> String {
        format!(
            "The session directory (cwd) '{}' no longer exists or is no longer a directory; the \
             session moved to '{}', the nearest existing directory above it, and this call ran \
             there.",
            display_relative(&self.from),
            display_relative(&self.to)
        )
    }
}

/// How many times a fallback is attempted when the tree keeps changing under it (another
/// session deleting the ancestor just found) before giving up with the original error.
const FALLBACK_ATTEMPTS: usize = 8;

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
    ///
    /// Only the session directory falls back when it vanished; an explicit `override_dir` that
    /// does not exist is the caller's mistake and is reported as such.
    pub fn current(
        &self,
        guard: &PathGuard,
        override_dir: Option<&str>,
    ) -> Result<Current, SessionError> {
        if let Some(dir) = override_dir {
            return resolve_dir(guard, dir, dir).map(|relative| Current {
                relative,
                fallback: None,
            });
        }
        let stored = self.relative();
        let shown = display_relative(&stored);
        let err = match resolve_dir(guard, &shown, &shown) {
            Ok(relative) => {
                return Ok(Current {
                    relative,
                    fallback: None,
                })
            }
            Err(err @ SessionError::NotADirectory(_)) => err,
            // The stored directory was inside when the session entered it, so an escape or a
            // swap now means a link was put in its place: say it is the session directory.
            Err(SessionError::Escape(..) | SessionError::Swapped(_)) => {
                return Err(SessionError::SessionSwapped(shown))
            }
            Err(other) => return Err(other),
        };
        let Some(to) = nearest_directory(guard, &stored)? else {
            return Err(err);
        };
        if to == stored {
            // It came back between the two looks: no move.
            return Ok(Current {
                relative: to,
                fallback: None,
            });
        }
        self.replace_if(&stored, &to);
        Ok(Current {
            relative: to.clone(),
            fallback: Some(Fallback { from: stored, to }),
        })
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

    /// Moves the session from `from` to `to` unless another call moved it meanwhile (a `cd`
    /// that landed between this call's look and now wins).
    fn replace_if(&self, from: &Path, to: &Path) {
        let mut cwd = match self.cwd.lock() {
            Ok(cwd) => cwd,
            Err(poisoned) => poisoned.into_inner(),
        };
        if cwd.as_path() == from {
            *cwd = to.to_path_buf();
        }
    }

    /// The stored session directory, root-relative, unchecked: only a lexical base (for `cd` and
    /// `pwd` when the directory itself cannot be entered), never opened as it is.
    pub fn stored(&self) -> PathBuf {
        self.relative()
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

/// The nearest ancestor of `stored` (or `stored` itself) that is a real directory, found by
/// looking at each component without following links and then opened through the workspace
/// layer (which refuses every symlink on the way), so the answer is a directory beneath the root
/// reached without any link.
///
/// A component that is missing, or is now a file (or anything else that is neither a directory
/// nor a link), is where the session's directory vanished: the prefix before it is the answer.
/// A component that is a symlink is not a vanished directory but a swap: refused as
/// [`SessionError::Swapped`], never followed and never skipped. `None` when the tree keeps
/// changing under every attempt.
fn nearest_directory(guard: &PathGuard, stored: &Path) -> Result<Option<PathBuf>, SessionError> {
    let ws = guard.workspace();
    for _ in 0..FALLBACK_ATTEMPTS {
        let mut prefix = PathBuf::new();
        for component in stored.components() {
            let candidate = prefix.join(component.as_os_str());
            match ws.stat(&candidate) {
                Ok(Some(st)) if st.is_dir() => prefix = candidate,
                Ok(Some(st)) if st.is_symlink() => {
                    return Err(SessionError::SessionSwapped(display_relative(stored)))
                }
                // Missing, a file where the directory was, or a parent that is now a file.
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => break,
                Err(e) if is_swap(&e) => {
                    return Err(SessionError::SessionSwapped(display_relative(stored)))
                }
                Err(_) => break,
            }
        }
        match ws.dir(&prefix) {
            Ok(_) => return Ok(Some(prefix)),
            Err(e) if is_swap(&e) => {
                return Err(SessionError::SessionSwapped(display_relative(stored)))
            }
            // Vanished again between the look and the open (another session deleting): look
            // again from the root.
            Err(_) => continue,
        }
    }
    Ok(None)
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
