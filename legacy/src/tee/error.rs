//! Why a tee write did not happen, and the shelpa error object each reason becomes.

use std::io;

use serde_json::json;

use crate::failure::{Failure, EXEC_FAILED, GUARD_VIOLATION};

/// Why a tee write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum TeeError {
    /// Over the approval threshold without `confirm_oversize`.
    #[error("tee would write {size} bytes to '{path}', more than the approval threshold of {threshold} bytes; nothing was written.")]
    ApprovalRequired {
        /// The size that would have been written.
        size: u64,
        /// The threshold.
        threshold: u64,
        /// The (first) target.
        path: String,
    },
    /// A target inside the tool's state or `.git/`.
    #[error("'{0}' is inside a protected directory (.shelpa/, .filesystem/ or .git/) and cannot be written.")]
    Protected(String),
    /// A target that is not a plain, singly-linked regular file.
    #[error("'{path}' is {what} and cannot be written by tee.")]
    DisallowedTarget {
        /// The target.
        path: String,
        /// What it is (`a symlink`, `a directory`, …).
        what: &'static str,
    },
    /// A target outside the root, or whose directory became a symlink after checking.
    #[error("'{0}' is outside the workspace, or its directory is reached through a symlink.")]
    Escape(String),
    /// A target the operator's rules do not let change.
    #[error("{0}.")]
    ReadOnly(workspace::permissions::ReadOnly),
    /// The target's directory does not exist.
    #[error("the directory of '{0}' does not exist; tee does not create directories.")]
    NoDirectory(String),
    /// The mirror under `.shelpa/` is a symlink or not a regular file: someone tampered with it.
    #[error("the audit mirror '{0}' (or a directory on its way) is a symlink or not a regular file, so the write was refused.")]
    MirrorUnsafe(String),
    /// Any other I/O failure.
    #[error("could not {op} '{path}': {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file concerned (relative to the root).
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl TeeError {
    /// The shelpa error object for this failure.
    pub fn to_failure(&self) -> Failure {
        let detail = self.to_string();
        let (code, reason, suggestion) = match self {
            TeeError::ApprovalRequired { .. } => (
                GUARD_VIOLATION,
                "APPROVAL_REQUIRED",
                "Check that this much content is intended, then repeat the same call with \"confirm_oversize\": true.".to_string(),
            ),
            TeeError::Protected(_) => (
                GUARD_VIOLATION,
                "PROTECTED_PATH",
                "Write to a file outside .shelpa/, .filesystem/ and .git/.".to_string(),
            ),
            TeeError::DisallowedTarget { .. } => (
                GUARD_VIOLATION,
                "DISALLOWED_TARGET",
                "Write to a regular file or a new name; a file with other hard links can be replaced with tee FILE, never appended to.".to_string(),
            ),
            TeeError::Escape(_) => (
                GUARD_VIOLATION,
                "PATH_ESCAPE",
                "Use a path inside the workspace.".to_string(),
            ),
            TeeError::ReadOnly(_) => (
                GUARD_VIOLATION,
                "READ_ONLY",
                "This server may not change it: write somewhere the rules allow, or ask the user to lift the rule.".to_string(),
            ),
            TeeError::NoDirectory(_) => (
                EXEC_FAILED,
                "WRITE_FAILED",
                "Write into an existing directory (list it with `ls`).".to_string(),
            ),
            TeeError::MirrorUnsafe(_) => (
                EXEC_FAILED,
                "WRITE_FAILED",
                "Ask the workspace owner to inspect .shelpa/; nothing was written.".to_string(),
            ),
            TeeError::Io { .. } => (
                EXEC_FAILED,
                "WRITE_FAILED",
                "Check the path and try again.".to_string(),
            ),
        };
        let mut f = Failure::new(code, reason, detail, suggestion);
        match self {
            TeeError::ApprovalRequired { path, size, .. } => {
                f.token = Some(path.clone());
                f.extra.insert("size".into(), json!(size));
            }
            TeeError::Protected(p)
            | TeeError::DisallowedTarget { path: p, .. }
            | TeeError::Escape(p)
            | TeeError::NoDirectory(p) => f.token = Some(p.clone()),
            TeeError::ReadOnly(refused) => f.token = Some(refused.path.clone()),
            _ => {}
        }
        f
    }
}
