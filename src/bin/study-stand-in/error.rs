//! Everything that can stop the stand-in, each with what to do instead; turned into a message
//! only in `main`.

use std::path::PathBuf;

/// Why the stand-in stopped before carrying out its plan (giving up by policy is not an error).
#[derive(Debug, thiserror::Error)]
pub enum StandInError {
    /// A command-line mistake: the message says which option and how to spell it.
    #[error("{0}\nRun `study-stand-in --help` for the options.")]
    Usage(String),
    /// An input file could not be read.
    #[error("cannot read {what} '{}': {source}", path.display())]
    Read {
        /// Which input (plan, policy, MCP configuration, prompt).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An input file is larger than the stand-in accepts.
    #[error("{what} '{}' is larger than {limit} bytes; the stand-in reads small task files only", path.display())]
    TooLarge {
        /// Which input.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The bound.
        limit: u64,
    },
    /// An input file is not what its format requires.
    #[error("{what} '{}': {message}", path.display())]
    Invalid {
        /// Which input.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// A plan step cannot be carried out on the workspace as it is.
    #[error("plan step {step}: {message}")]
    Step {
        /// 1-based step number.
        step: usize,
        /// What went wrong and what to change.
        message: String,
    },
    /// The MCP server could not be started, died, or answered out of protocol.
    #[error("MCP server '{server}': {message}")]
    Server {
        /// The server's key in `mcpServers`.
        server: String,
        /// What happened.
        message: String,
    },
    /// Built-in file work failed on the workspace.
    #[error("{action} '{}': {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}
