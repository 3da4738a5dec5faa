//! The one shape every input is read into: sessions of tool calls in the order they were made.

use std::collections::BTreeMap;

use serde::Serialize;

use super::classify::Interface;
use super::retry::InputKey;

/// How a call ended, as far as the input tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The tool succeeded.
    Ok,
    /// The tool failed, for this reason (a kind, a pipe reason code, or `unclassified`).
    Error(String),
    /// The transcript has the call but no result for it (interrupted, or cut off).
    NoResult,
}

/// One tool call, from either a call log or a transcript.
#[derive(Clone, Debug)]
pub struct Call {
    /// The tool's own name, without any `mcp__server__` prefix.
    pub tool: String,
    /// The interface the tool belongs to.
    pub interface: Interface,
    /// Whether the call wrote or edited a file.
    pub write: bool,
    /// How it ended.
    pub outcome: Outcome,
    /// Command names of its pipeline stages, for calls that carry a command line.
    pub stages: Vec<String>,
    /// What of its arguments tells a retry from a new call, when the input has them
    /// (transcripts always; call logs only with `--call-log-args`). The arguments themselves
    /// are not kept: they hold whole files, and the report's memory would grow with them.
    pub input: Option<InputKey>,
    /// For a pipe refusal, the token the guard refused (`-i`, `rm`…), when the input names it.
    pub refused_token: Option<String>,
}

/// The calls of one conversation (or one server process, for call logs), in order.
#[derive(Clone, Debug)]
pub struct Session {
    /// The session's name in the report.
    pub id: String,
    /// For a subagent's transcript, the session that started it.
    pub parent: Option<String>,
    /// The calls, in the order they were made; a call's index is its position in the session.
    pub calls: Vec<Call>,
}

/// What was read and what was skipped; reported so that skipped input is never silent.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InputStats {
    /// Files read to their end.
    pub files: usize,
    /// Lines read (including blank and skipped ones).
    pub lines: usize,
    /// Lines that were not a JSON object of the expected shape (and `tool_use` blocks without
    /// an id or a name).
    pub malformed_lines: usize,
    /// Lines longer than [`crate::lines::MAX_LINE_BYTES`], skipped without being read whole.
    pub long_lines: usize,
    /// Files that could not be read, or not to their end, each named in a warning with the
    /// reason (a file that failed part-way keeps the lines read before the failure).
    pub unreadable_files: usize,
    /// Lines of a type that carries no tool calls, by type (transcripts only).
    pub skipped_line_types: BTreeMap<String, usize>,
    /// `tool_use` blocks whose id had been seen already (transcripts repeat lines).
    pub duplicate_tool_uses: usize,
    /// `tool_result` blocks whose call was not found.
    pub results_without_call: usize,
}
