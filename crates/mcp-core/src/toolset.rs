//! The contract between the MCP core and a set of tools.
//!
//! The server knows nothing about files or pipelines: it lists whatever [`ToolDef`]s a [`Toolset`]
//! declares and hands each `tools/call` to [`Toolset::call`]. The filesystem mode, the legacy pipe
//! mode, the per-root daemon and any combination of them are just different toolsets behind the
//! same core.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::protocol::Revision;

/// What a tool does to the world, as MCP tool annotations. Every tool of this server acts only on
/// its workspace, so `openWorldHint` is always false and not configurable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// The tool changes nothing.
    pub read_only: bool,
    /// The tool may overwrite or remove what was there (only meaningful when not read-only).
    pub destructive: bool,
    /// Calling it twice with the same arguments has no further effect.
    pub idempotent: bool,
}

impl Effects {
    /// A tool that only reads.
    pub const READ_ONLY: Effects = Effects {
        read_only: true,
        destructive: false,
        idempotent: true,
    };
}

/// One tool as the client sees it in `tools/list`.
#[derive(Clone, Debug)]
pub struct ToolDef {
    /// Stable machine name (`[A-Za-z0-9_.-]`).
    pub name: String,
    /// Short human-readable name.
    pub title: String,
    /// What the tool does and when to use it; models read this to choose tools.
    pub description: String,
    /// JSON Schema for the arguments; the root is always `type: object`.
    pub input_schema: Value,
    /// JSON Schema for `structuredContent`, when the tool returns structured data.
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    pub effects: Effects,
}

impl ToolDef {
    /// Renders the definition for a client speaking `revision`: fields newer than the
    /// negotiated revision are left out so older clients see exactly what their schema expects.
    pub fn to_json(&self, revision: Revision) -> Value {
        let mut tool = Map::new();
        tool.insert("name".into(), json!(self.name));
        tool.insert("description".into(), json!(self.description));
        tool.insert("inputSchema".into(), self.input_schema.clone());
        if revision >= Revision::V2025_03_26 {
            let mut annotations = json!({
                "title": self.title,
                "readOnlyHint": self.effects.read_only,
                "openWorldHint": false,
            });
            if !self.effects.read_only {
                annotations["destructiveHint"] = json!(self.effects.destructive);
            }
            annotations["idempotentHint"] = json!(self.effects.idempotent);
            tool.insert("annotations".into(), annotations);
        }
        if revision >= Revision::V2025_06_18 {
            tool.insert("title".into(), json!(self.title));
            if let Some(schema) = &self.output_schema {
                tool.insert("outputSchema".into(), schema.clone());
            }
        }
        Value::Object(tool)
    }
}

/// The result of one tool call. Failures are results too (`is_error`), never protocol errors: the
/// model must see them to correct itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// The text the model reads.
    pub text: String,
    /// Structured data matching the tool's output schema, if it declares one.
    pub structured: Option<Value>,
    /// True when the call failed.
    pub is_error: bool,
    /// A short machine-readable classification of a failure (`PathEscape`, `DISALLOWED_OPTION`…),
    /// for logs and reports.
    pub error_kind: Option<String>,
    /// Extra facts about the call worth recording in a call log (never file contents).
    pub log: Map<String, Value>,
    /// Content that is not text (an image, a sound), sent as further content blocks after the
    /// text block. Most tools leave it empty; the text stays the first block so that every
    /// client, even one that shows no media, reads what the call returned.
    pub blocks: Vec<ContentBlock>,
}

/// A content block of a tool result other than its text, as MCP defines it.
///
/// The data is already base64, as it goes on the wire: the core writes it as it is, and the
/// tool that read the bytes is the one place that encodes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentBlock {
    /// An `image` block.
    Image {
        /// The bytes, base64-encoded (standard alphabet, padded).
        data: String,
        /// What the bytes are (`image/png`).
        mime_type: String,
    },
    /// An `audio` block. The protocol has it from 2025-03-26; a client that negotiated an older
    /// revision is told in a text block that it was left out.
    Audio {
        /// The bytes, base64-encoded (standard alphabet, padded).
        data: String,
        /// What the bytes are (`audio/wav`).
        mime_type: String,
    },
}

impl ContentBlock {
    /// How many bytes of data the block carries (base64), for logs and buffer sizes.
    pub fn data_len(&self) -> usize {
        match self {
            ContentBlock::Image { data, .. } | ContentBlock::Audio { data, .. } => data.len(),
        }
    }
}

impl ToolOutput {
    /// A successful plain-text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            ..Default::default()
        }
    }

    /// A successful result with structured content; the text is its JSON form (MCP asks tools
    /// that return structured content to also return it serialised for older clients).
    pub fn structured(text: impl Into<String>, value: Value) -> Self {
        ToolOutput {
            text: text.into(),
            structured: Some(value),
            ..Default::default()
        }
    }

    /// A successful result of `text` followed by `blocks` (an image, a sound).
    pub fn with_blocks(text: impl Into<String>, blocks: Vec<ContentBlock>) -> Self {
        ToolOutput {
            text: text.into(),
            blocks,
            ..Default::default()
        }
    }

    /// A call that stopped early: it changed nothing, and says so.
    pub fn stopped(stop: Stop, what: &str) -> Self {
        let advice = match stop {
            Stop::Cancelled => "Run it again if it is still needed.",
            Stop::TimedOut(_) => {
                "Narrow it (a smaller path, fewer edits, a head or tail limit) or raise --timeout."
            }
        };
        ToolOutput::error(
            stop.kind(),
            format!(
                "{}: {what} stopped: {stop}; nothing was changed. {advice}",
                stop.kind()
            ),
        )
    }

    /// A failed call of the given kind.
    pub fn error(kind: impl Into<String>, text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
            error_kind: Some(kind.into()),
            ..Default::default()
        }
    }
}

/// Lets the client stop a call in progress (`notifications/cancelled`). Long-running tools poll it.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// Marks the call as cancelled.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once the client has cancelled the call.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Why a call stopped before finishing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    /// The client sent `notifications/cancelled` for it.
    #[error("the call was cancelled by the client")]
    Cancelled,
    /// It ran past the server's wall-clock limit (`--timeout`).
    #[error("the call ran longer than the time limit of {} s", .0.as_secs_f64())]
    TimedOut(Duration),
}

impl Stop {
    /// The machine-readable kind a call log and a report see (`Cancelled`, `Timeout`).
    pub fn kind(self) -> &'static str {
        match self {
            Stop::Cancelled => "Cancelled",
            Stop::TimedOut(_) => "Timeout",
        }
    }
}

/// What a tool may know about the call beyond its arguments.
///
/// Every call in every mode runs under a wall-clock limit and can be cancelled. Neither can stop a
/// thread from outside, so long-running tools poll [`CallContext::check`] between steps and stop
/// before their next effect; a tool checks once more just before it commits, so a call that is
/// answered as cancelled or timed out has changed nothing.
#[derive(Clone, Debug, Default)]
pub struct CallContext {
    /// Set when the client cancels this call.
    pub cancel: CancelToken,
    /// When the call must be finished by, if it has a limit.
    pub deadline: Option<Instant>,
    /// The limit itself, for messages.
    pub timeout: Option<Duration>,
    /// The tool being called, for records a toolset keeps of what changed (the operation log).
    pub tool: String,
    /// The client that called it, when the call came over MCP.
    pub client: Option<std::sync::Arc<crate::protocol::ClientInfo>>,
}

impl CallContext {
    /// A context whose clock starts now and runs for `timeout`.
    pub fn with_timeout(cancel: CancelToken, timeout: Option<Duration>) -> Self {
        CallContext {
            cancel,
            deadline: timeout.and_then(|t| Instant::now().checked_add(t)),
            timeout,
            tool: String::new(),
            client: None,
        }
    }

    /// Why the call must stop now, if it must. Cancellation is reported before the deadline.
    pub fn stopped(&self) -> Option<Stop> {
        if self.cancel.is_cancelled() {
            return Some(Stop::Cancelled);
        }
        match (self.deadline, self.timeout) {
            (Some(at), Some(limit)) if Instant::now() >= at => Some(Stop::TimedOut(limit)),
            _ => None,
        }
    }

    /// `Err` once the call must stop; tools call this between steps and before committing.
    pub fn check(&self) -> Result<(), Stop> {
        self.stopped().map_or(Ok(()), Err)
    }

    /// Time left before the deadline (`None` when there is no limit).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|at| at.saturating_duration_since(Instant::now()))
    }
}

/// A set of tools served over MCP.
pub trait Toolset: Send + Sync {
    /// The mode name shown to people (`filesystem`, `legacy-pipe`, …).
    fn mode(&self) -> String;

    /// Guidance for the model: what these tools are for and when to prefer them.
    fn instructions(&self) -> String;

    /// The tools, in the order clients should see them.
    fn tools(&self) -> Vec<ToolDef>;

    /// Runs one call. `name` is always one of [`Toolset::tools`] (the server checks).
    fn call(&self, name: &str, args: &Map<String, Value>, ctx: &CallContext) -> ToolOutput;

    /// Called once by the server after it has answered the first message and before it runs
    /// any call: work a new session needs done before its first call but that must not delay
    /// the answer to `initialize` (start-up is measured to that answer).
    fn started(&self) {}

    /// The name the server announces in `serverInfo.name`. `filesystem` unless a mode reproduces
    /// a system that announced itself otherwise (shelpa's original surface: `shelpa-mcp`).
    fn server_name(&self) -> String {
        "filesystem".into()
    }

    /// Hears what the client says besides tool calls (the end of the handshake, notifications
    /// such as `notifications/roots/list_changed`), on the reader thread, with `peer` to send the
    /// client requests. It must return promptly and never wait for the client: answers arrive
    /// through the handlers given to [`Peer::request`](crate::peer::Peer::request). Toolsets that
    /// need nothing from the client ignore it.
    fn client_event(&self, _event: crate::peer::ClientEvent<'_>, _peer: &crate::peer::Peer) {}

    /// Which calls must be ordered with this one: calls with the same lane run one at a time in
    /// arrival order, calls with different lanes may run side by side. A toolset for one
    /// workspace has one lane; the daemon gives each root its own.
    fn lane(&self, _name: &str, _args: &Map<String, Value>) -> String {
        String::new()
    }
}

/// Builds a mode's toolset for a workspace root.
///
/// Separating the description of a mode from its instances is what lets the `--server` daemon list
/// tools before any root is known and then create one isolated toolset (own guard, own history) per
/// root it is asked about. `R` is the handle a toolset is confined by (the workspace layer's path
/// guard); the core passes it along and never looks inside, which keeps it free of file access.
pub trait ToolsetFactory<R>: Send + Sync {
    /// The mode name shown to people.
    fn mode(&self) -> String;
    /// Guidance for the model (see [`Toolset::instructions`]).
    fn instructions(&self) -> String;
    /// The tools every instance of this mode serves.
    fn definitions(&self) -> Vec<ToolDef>;
    /// A toolset confined to `root`, or the reason it could not be built whole (e.g. no
    /// descriptor left for one of its parts): a toolset is never served with tools missing.
    fn build(&self, root: R) -> std::io::Result<Box<dyn Toolset>>;
}

/// Several toolsets served as one, so an agent can choose between interfaces in one session.
pub struct Combined {
    parts: Vec<Box<dyn Toolset>>,
    tools: Vec<ToolDef>,
    /// Which part serves each tool name, so a call is routed without asking every part.
    owner: std::collections::HashMap<String, usize>,
}

impl Combined {
    /// Serves `parts` together; tool names must not collide (the first wins if they do).
    pub fn new(parts: Vec<Box<dyn Toolset>>) -> Self {
        let mut owner = std::collections::HashMap::new();
        let tagged = parts
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.tools().into_iter().map(move |t| (i, t)));
        let mut tools = Vec::new();
        for (i, tool) in tagged {
            if !owner.contains_key(&tool.name) {
                owner.insert(tool.name.clone(), i);
                tools.push(tool);
            }
        }
        Combined {
            parts,
            tools,
            owner,
        }
    }
}

impl Toolset for Combined {
    fn mode(&self) -> String {
        joined_modes(self.parts.iter().map(|p| p.mode()))
    }

    fn instructions(&self) -> String {
        joined_instructions(self.parts.iter().map(|p| p.instructions()))
    }

    fn tools(&self) -> Vec<ToolDef> {
        self.tools.clone()
    }

    fn started(&self) {
        self.parts.iter().for_each(|p| p.started());
    }

    fn call(&self, name: &str, args: &Map<String, Value>, ctx: &CallContext) -> ToolOutput {
        match self.owner.get(name).and_then(|&i| self.parts.get(i)) {
            Some(part) => part.call(name, args, ctx),
            None => ToolOutput::error("InvalidArgument", format!("unknown tool '{name}'")),
        }
    }
}

/// The mode name of several toolsets served together (`legacy-pipe+filesystem`).
fn joined_modes(modes: impl Iterator<Item = String>) -> String {
    modes.collect::<Vec<_>>().join("+")
}

/// The instructions of several toolsets served together, with a word on choosing between them.
fn joined_instructions(parts: impl Iterator<Item = String>) -> String {
    let parts: Vec<String> = parts.collect();
    let mut text = parts.join("\n\n");
    if parts.len() > 1 {
        text.push_str(
            "\n\nThese interfaces act on the same workspace; use whichever fits the task.",
        );
    }
    text
}

/// Builds [`Combined`] toolsets from several modes' factories.
pub struct CombinedFactory<R> {
    parts: Vec<Box<dyn ToolsetFactory<R>>>,
    /// A second handle on the same root, one for each part.
    duplicate: fn(&R) -> std::io::Result<R>,
}

impl<R> CombinedFactory<R> {
    /// Serves `parts` together, in this order; `duplicate` gives each part its own handle on the
    /// root.
    pub fn new(
        parts: Vec<Box<dyn ToolsetFactory<R>>>,
        duplicate: fn(&R) -> std::io::Result<R>,
    ) -> Self {
        CombinedFactory { parts, duplicate }
    }
}

impl<R> ToolsetFactory<R> for CombinedFactory<R> {
    fn mode(&self) -> String {
        joined_modes(self.parts.iter().map(|p| p.mode()))
    }

    fn instructions(&self) -> String {
        joined_instructions(self.parts.iter().map(|p| p.instructions()))
    }

    fn definitions(&self) -> Vec<ToolDef> {
        let mut seen = std::collections::HashSet::new();
        self.parts
            .iter()
            .flat_map(|p| p.definitions())
            .filter(|t| seen.insert(t.name.clone()))
            .collect()
    }

    fn build(&self, root: R) -> std::io::Result<Box<dyn Toolset>> {
        // Each part gets its own handle on the same root. One part that cannot be built fails the
        // whole: serving the rest would silently drop tools.
        let built = self
            .parts
            .iter()
            .map(|part| part.build((self.duplicate)(&root)?))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Box::new(Combined::new(built)))
    }
}

/// What a tool does to a workspace, in the terms the adoption report counts calls by. Each
/// toolset states it once per tool in its table of [`ToolEntry`]s, beside the name, so a reader of
/// call logs learns what a call did from the toolset that serves it rather than from a copy of
/// its names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolClass {
    /// Reads a file's content.
    Read,
    /// Writes or edits a file's content: every call counts as a write.
    Write,
    /// Looks around the tree (lists, `cd`, `pwd`) and changes no file.
    Navigate,
    /// Changes where things are (a new directory, a move, a delete to trash), not what a file
    /// holds.
    Arrange,
    /// Looks up or replays what happened before: the trash, the move log, version history.
    History,
    /// Runs a command line whose stages decide: it writes only through a `tee` stage.
    Pipeline,
}

/// One row of a toolset's table of tools: the stable name clients call it by and its class.
///
/// Each toolset owns one table (the core names no tool); its `tools/list` definitions take their
/// names from it and the adoption report classifies call logs and transcripts through it, so a
/// tool is named in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolEntry {
    /// The tool's machine name, as in `tools/list` and `tools/call`.
    pub name: &'static str,
    /// What the tool does, for counting.
    pub class: ToolClass,
}

/// A malformed tool argument, described so the model can fix its call.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgError {
    /// A required argument is absent.
    #[error("missing required argument '{0}'")]
    Missing(String),
    /// An argument has the wrong JSON type.
    #[error("argument '{name}' must be {expected}, got {got}")]
    WrongType {
        name: String,
        expected: &'static str,
        got: &'static str,
    },
    /// An argument has the right type but an unusable value.
    #[error("argument '{name}' {problem}")]
    BadValue { name: String, problem: String },
    /// Arguments the tool does not take (a typo such as `old_text` for `oldText`, or an argument
    /// of another tool). Refused rather than ignored: a silently dropped argument would make the
    /// call do something other than what the model asked. Every toolset reports it through
    /// [`Args::check_names`], so the message reads the same in every mode.
    #[error("{}", unknown_message(unknown, allowed))]
    Unknown {
        /// The names sent that are not accepted, in the order the arguments map holds them.
        unknown: Vec<String>,
        /// Every name that is accepted, in the order the tool declares them.
        allowed: Vec<String>,
    },
}

/// The one wording of [`ArgError::Unknown`]: which names are wrong, which are right, and what
/// to do about it.
fn unknown_message(unknown: &[String], allowed: &[String]) -> String {
    let quoted = |names: &[String]| {
        names
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (noun, pronoun) = if unknown.len() == 1 {
        ("argument", "it")
    } else {
        ("arguments", "them")
    };
    if allowed.is_empty() {
        return format!(
            "unknown {noun} {}; this call takes no arguments: remove {pronoun}",
            quoted(unknown)
        );
    }
    format!(
        "unknown {noun} {}; the accepted arguments are {} (names are case-sensitive): rename or \
         remove {pronoun}",
        quoted(unknown),
        quoted(allowed)
    )
}

/// Typed access to a call's arguments with errors a model can act on.
pub struct Args<'a>(pub &'a Map<String, Value>);

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Args<'a> {
    /// A required string.
    pub fn str(&self, name: &str) -> Result<&'a str, ArgError> {
        self.opt_str(name)?
            .ok_or_else(|| ArgError::Missing(name.to_string()))
    }

    /// An optional string (`null` counts as absent).
    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, ArgError> {
        self.opt(name, "a string", Value::as_str)
    }

    /// An optional boolean (`null` counts as absent).
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, ArgError> {
        self.opt(name, "a boolean", Value::as_bool)
    }

    /// An optional non-negative integer (`null` counts as absent). Integral floats such as `3.0`
    /// are accepted because some clients send every number as a float.
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, ArgError> {
        let number = |v: &'a Value| match v {
            Value::Number(n) => Some(n),
            _ => None,
        };
        let Some(n) = self.opt(name, "a non-negative integer", number)? else {
            return Ok(None);
        };
        if let Some(u) = n.as_u64() {
            return Ok(Some(u));
        }
        match n.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => Ok(Some(f as u64)),
            _ => Err(ArgError::BadValue {
                name: name.to_string(),
                problem: format!("must be a non-negative whole number, got {n}"),
            }),
        }
    }

    /// An optional array (`null` counts as absent).
    pub fn opt_array(&self, name: &str) -> Result<Option<&'a Vec<Value>>, ArgError> {
        self.opt(name, "an array", Value::as_array)
    }

    /// The frame every optional getter shares: absent or `null` is `None`; a value `pick`
    /// accepts is returned; any other is `WrongType`, naming what was `expected`.
    fn opt<T>(
        &self,
        name: &str,
        expected: &'static str,
        pick: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, ArgError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => pick(v).map(Some).ok_or_else(|| ArgError::WrongType {
                name: name.to_string(),
                expected,
                got: type_name(v),
            }),
        }
    }

    /// An optional array of strings.
    pub fn opt_str_list(&self, name: &str) -> Result<Option<Vec<&'a str>>, ArgError> {
        let Some(items) = self.opt_array(name)? else {
            return Ok(None);
        };
        items
            .iter()
            .map(|v| {
                v.as_str().ok_or_else(|| ArgError::WrongType {
                    name: format!("{name}[]"),
                    expected: "a string",
                    got: type_name(v),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The one unknown-argument check of every toolset: `Ok` when every argument present is one
    /// of `allowed`, otherwise [`ArgError::Unknown`] naming the others and listing `allowed`, so
    /// a typo (`old_text` for `oldText`) is reported instead of silently ignored. Each toolset
    /// wraps the error in its own shape (the filesystem mode's `InvalidArgument`, shelpa's
    /// `INVALID_ARGUMENT` object); the wording is this one.
    pub fn check_names(&self, allowed: &[&str]) -> Result<(), ArgError> {
        let unknown: Vec<String> = self
            .0
            .keys()
            .filter(|k| !allowed.contains(&k.as_str()))
            .cloned()
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(ArgError::Unknown {
            unknown,
            allowed: allowed.iter().map(|a| a.to_string()).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn args_report_missing_wrong_type_and_accept_integral_floats() {
        let m = map(json!({"path": 3, "head": 2.0, "tail": -1, "edits": "x"}));
        let a = Args(&m);
        assert_eq!(
            a.str("path"),
            Err(ArgError::WrongType {
                name: "path".into(),
                expected: "a string",
                got: "a number"
            })
        );
        assert_eq!(a.str("content"), Err(ArgError::Missing("content".into())));
        assert_eq!(a.opt_u64("head"), Ok(Some(2)));
        assert!(a.opt_u64("tail").is_err());
        assert!(a.opt_array("edits").is_err());
    }

    #[test]
    fn optional_getters_take_null_as_absent_and_name_the_expected_type() {
        let m = map(json!({"dryRun": null, "append": "yes", "head": "5", "paths": ["a"]}));
        let a = Args(&m);
        assert_eq!(a.opt_bool("dryRun"), Ok(None));
        assert_eq!(
            a.opt_bool("append"),
            Err(ArgError::WrongType {
                name: "append".into(),
                expected: "a boolean",
                got: "a string"
            })
        );
        assert_eq!(
            a.opt_u64("head"),
            Err(ArgError::WrongType {
                name: "head".into(),
                expected: "a non-negative integer",
                got: "a string"
            })
        );
        assert_eq!(a.opt_str_list("paths"), Ok(Some(vec!["a"])));
        assert_eq!(a.opt_str("missing"), Ok(None));
    }

    #[test]
    fn check_names_accepts_known_and_absent_arguments() {
        let m = map(json!({"path": "a.txt", "head": 3}));
        assert_eq!(Args(&m).check_names(&["path", "head", "tail"]), Ok(()));
        let empty = Map::new();
        assert_eq!(Args(&empty).check_names(&[]), Ok(()));
    }

    #[test]
    fn check_names_names_the_unknown_and_lists_the_accepted() {
        let m = map(json!({"path": "a.txt", "old_text": "x"}));
        let err = Args(&m)
            .check_names(&["path", "edits", "dryRun"])
            .expect_err("old_text is not an argument of this tool");
        assert_eq!(
            err,
            ArgError::Unknown {
                unknown: vec!["old_text".into()],
                allowed: vec!["path".into(), "edits".into(), "dryRun".into()],
            }
        );
        assert_eq!(
            err.to_string(),
            "unknown argument 'old_text'; the accepted arguments are 'path', 'edits', 'dryRun' \
             (names are case-sensitive): rename or remove it"
        );
    }

    #[test]
    fn check_names_is_case_sensitive_and_reports_every_unknown_name() {
        let m = map(json!({"Path": "a.txt", "roots": "/", "path": "b"}));
        let err = Args(&m)
            .check_names(&["path"])
            .expect_err("Path and roots are not path");
        let ArgError::Unknown { unknown, .. } = &err else {
            panic!("expected Unknown, got {err:?}");
        };
        assert_eq!(unknown, &["Path".to_string(), "roots".to_string()]);
        assert!(err
            .to_string()
            .starts_with("unknown arguments 'Path', 'roots'; the accepted arguments are 'path'"));
        assert!(err.to_string().ends_with("rename or remove them"));
    }

    #[test]
    fn check_names_says_when_a_tool_takes_no_arguments() {
        let m = map(json!({"path": "."}));
        let err = Args(&m).check_names(&[]).expect_err("nothing is accepted");
        assert_eq!(
            err.to_string(),
            "unknown argument 'path'; this call takes no arguments: remove it"
        );
    }

    #[test]
    fn tool_json_leaves_out_fields_newer_than_the_negotiated_version() {
        let def = ToolDef {
            name: "t".into(),
            title: "T".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
            output_schema: Some(json!({"type": "object"})),
            effects: Effects::READ_ONLY,
        };
        let old = def.to_json(Revision::V2024_11_05);
        assert!(old.get("annotations").is_none() && old.get("outputSchema").is_none());
        let mid = def.to_json(Revision::V2025_03_26);
        assert_eq!(mid["annotations"]["readOnlyHint"], json!(true));
        assert!(mid.get("outputSchema").is_none());
        let new = def.to_json(Revision::V2025_11_25);
        assert_eq!(new["title"], json!("T"));
        assert_eq!(new["annotations"]["openWorldHint"], json!(false));
        assert!(new.get("outputSchema").is_some());
    }
}
