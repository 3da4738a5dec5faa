//! The filesystem mode's error kinds, and how each becomes a tool result.

use mcp_core::toolset::{ArgError, Stop, ToolOutput};
use workspace::guard::GuardError;
use workspace::history::HistoryError;

/// A failed filesystem tool call. The text of every variant says what was wrong and what to do
/// instead; the kind is the first word the model sees.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path leaves the workspace or enters the server's own state.
    #[error("PathEscape: {0}")]
    PathEscape(String),
    /// Nothing at the path (or no such text, trash id, version…).
    #[error("NotFound: {0}")]
    NotFound(String),
    /// Something is already where the call would create something.
    #[error("AlreadyExists: {0}")]
    AlreadyExists(String),
    /// The operating system refused.
    #[error("IoError: {0}")]
    IoError(String),
    /// The operator's rules do not let this change (`--read-only`, `--read-only-dir`,
    /// `--writable-dir`).
    #[error("ReadOnly: {0}; {suggestion}", suggestion = workspace::permissions::READ_ONLY_SUGGESTION)]
    ReadOnly(workspace::permissions::ReadOnly),
    /// The arguments cannot work as given.
    #[error("InvalidArgument: {0}")]
    InvalidArgument(String),
    /// The client cancelled the call or it ran past its time limit, before it changed anything.
    #[error("{}: {what} stopped: {stop}; nothing was changed", .stop.kind())]
    Stopped {
        /// Why it stopped.
        stop: Stop,
        /// The call, as the message names it (`edit_file on 'a.txt'`).
        what: String,
    },
}

impl FsError {
    /// The kind's name, for logs and reports.
    pub fn kind(&self) -> &'static str {
        match self {
            FsError::PathEscape(_) => "PathEscape",
            FsError::NotFound(_) => "NotFound",
            FsError::AlreadyExists(_) => "AlreadyExists",
            FsError::IoError(_) => "IoError",
            FsError::InvalidArgument(_) => "InvalidArgument",
            FsError::ReadOnly(_) => "ReadOnly",
            FsError::Stopped { stop, .. } => stop.kind(),
        }
    }

    /// The tool result the model sees.
    pub fn into_output(self) -> ToolOutput {
        match self {
            FsError::Stopped { stop, what } => ToolOutput::stopped(stop, &what),
            other => ToolOutput::error(other.kind(), other.to_string()),
        }
    }

    /// `Err` once the call must stop (see [`mcp_core::toolset::CallContext::check`]); tools call it
    /// at their natural stopping points and last just before they commit a change. `what` names
    /// the call for the message.
    pub fn check(
        ctx: &mcp_core::toolset::CallContext,
        what: impl FnOnce() -> String,
    ) -> Result<(), FsError> {
        ctx.check()
            .map_err(|stop| FsError::Stopped { stop, what: what() })
    }
}

impl From<GuardError> for FsError {
    fn from(e: GuardError) -> Self {
        let swapped = matches!(&e, GuardError::Io { source, .. } if workspace::is_swap(source));
        if let GuardError::ReadOnly(refused) = e {
            FsError::ReadOnly(refused)
        } else if e.is_escape() || swapped {
            FsError::PathEscape(e.to_string())
        } else if e.is_invalid_input() {
            FsError::InvalidArgument(e.to_string())
        } else {
            FsError::IoError(e.to_string())
        }
    }
}

impl From<ArgError> for FsError {
    fn from(e: ArgError) -> Self {
        FsError::InvalidArgument(e.to_string())
    }
}

impl From<HistoryError> for FsError {
    fn from(e: HistoryError) -> Self {
        match e {
            HistoryError::NotFound(m) => FsError::NotFound(m),
            HistoryError::AlreadyExists(m) => FsError::AlreadyExists(m),
            HistoryError::InvalidArgument(m) => FsError::InvalidArgument(m),
            HistoryError::Busy(m) => FsError::IoError(m),
            HistoryError::ReadOnly(refused) => FsError::ReadOnly(refused),
            HistoryError::Io { .. } => FsError::IoError(e.to_string()),
        }
    }
}
