//! Reading Codex CLI's records of a session: its session files (`rollout-*.jsonl` under
//! `$CODEX_HOME/sessions/YYYY/MM/DD/`) and the event stream `codex exec --json` prints.
//!
//! Both are JSON lines, told apart (and from Claude Code's transcripts) by their first line; the
//! README ("Transcript formats") describes each as read from Codex CLI 0.171.0.
//!
//! - A **session file** opens with a `session_meta` line naming the `cli_version` that wrote it.
//!   Its `response_item` lines are the items exchanged with the model, exactly as sent: a
//!   `function_call` (`name`, `namespace`: `mcp__<server>` for an MCP server's tools, `arguments`
//!   as a JSON string, `call_id`), a `custom_tool_call` (a freeform tool such as `apply_patch`,
//!   its `input` as text), a `tool_search_call` (the discovery call), and their `*_output` items.
//!   Whether a call failed is not in its output item (the model is shown the text only) but in
//!   the `event_msg` line `item_completed` Codex writes as the call ends (`McpToolCall` with
//!   `result.isError`, `CommandExecution` with its `exit_code`, `FileChange` with its `status`).
//!   A file written by a version this reader was not checked against is counted as skipped
//!   lines, never read as if it were the known format.
//! - The **event stream** opens with `thread.started`; its `item.started`/`item.completed` lines
//!   carry the tool calls Codex shows a user: `mcp_tool_call`, `command_execution` (the shell line
//!   as run, `bash -lc '…'`) and `file_change` (an `apply_patch`). It names no version and leaves
//!   out the discovery calls and the tools it does not show, so the session file is the record a
//!   study reads; the stream is read for what a template redirected.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::classify::{
    classify_codex_name, is_write, Interface, ServerFilter, CODEX_DISCOVERY_TOOL,
};
use super::model::{Call, InputStats, Outcome};
use super::pipeline::stage_commands;
use super::reason::{clip_token, reason_from_text, token_from_text};
use super::retry::InputKey;

/// The versions of Codex CLI whose session files this reader was checked against (a version
/// matches when it starts with one of these): the format changes between minor releases.
pub const KNOWN_ROLLOUT_VERSIONS: &[&str] = &["0.171."];

/// A Codex file, as its first line says: the reader of its lines.
pub(crate) enum CodexFile {
    /// A session file of a known version.
    Rollout(Calls),
    /// A session file of a version not checked against: every line is skipped, counted under
    /// this version.
    UnknownRollout(String),
    /// `codex exec --json` output.
    Events(Calls),
}

impl CodexFile {
    /// The Codex file whose first JSON line is `first`, or `None` when it is no Codex file.
    pub(crate) fn recognise(first: &Value) -> Option<CodexFile> {
        match first.get("type").and_then(Value::as_str) {
            Some("session_meta") => {
                let version = first
                    .get("payload")
                    .and_then(|p| p.get("cli_version"))
                    .and_then(Value::as_str)
                    .unwrap_or("(none)");
                Some(
                    if KNOWN_ROLLOUT_VERSIONS
                        .iter()
                        .any(|v| version.starts_with(v))
                    {
                        CodexFile::Rollout(Calls::default())
                    } else {
                        CodexFile::UnknownRollout(clip_token(version))
                    },
                )
            }
            Some("thread.started") if first.get("thread_id").is_some_and(Value::is_string) => {
                Some(CodexFile::Events(Calls::default()))
            }
            _ => None,
        }
    }

    /// True for a session file that is read (of a known version): the fuller record of its
    /// thread.
    pub(crate) fn is_read_session(&self) -> bool {
        matches!(self, CodexFile::Rollout(_))
    }

    /// Reads one line of the file into `calls`.
    pub(crate) fn read_line(
        &mut self,
        line: &Value,
        calls: &mut Vec<Call>,
        stats: &mut InputStats,
        servers: &ServerFilter,
    ) {
        match self {
            CodexFile::Rollout(state) => state.rollout_line(line, calls, stats, servers),
            CodexFile::Events(state) => state.event_line(line, calls, stats, servers),
            CodexFile::UnknownRollout(version) => skipped(
                stats,
                &format!("codex session of unknown version {version}"),
            ),
        }
    }
}

/// The thread a Codex file records, from its first line: a session file's `session_meta` id, a
/// stream's `thread.started` id (the same for one session).
pub(crate) fn thread_id(first: &Value) -> Option<&str> {
    match first.get("type").and_then(Value::as_str) {
        Some("session_meta") => first.get("payload")?.get("id")?.as_str(),
        Some("thread.started") => first.get("thread_id")?.as_str(),
        _ => None,
    }
}

/// The calls of one Codex file as they are read, by their call id (ids are the model's and
/// unique within a session only, so each file keeps its own).
#[derive(Default)]
pub(crate) struct Calls {
    by_id: HashMap<String, usize>,
    /// Calls whose end Codex recorded as a failure (an output item read later keeps that).
    failed: HashSet<String>,
}

impl Calls {
    /// Reads one line of a session file into `calls`.
    pub(crate) fn rollout_line(
        &mut self,
        line: &Value,
        calls: &mut Vec<Call>,
        stats: &mut InputStats,
        servers: &ServerFilter,
    ) {
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("(none)");
        let payload = line.get("payload").unwrap_or(&Value::Null);
        let item = payload
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("(none)");
        match (kind, item) {
            ("response_item", "function_call") => {
                let arguments = payload.get("arguments").and_then(Value::as_str);
                let input = arguments.map(|a| {
                    serde_json::from_str(a).unwrap_or_else(|_| Value::String(a.to_string()))
                });
                let namespace = payload.get("namespace").and_then(Value::as_str);
                self.call(payload, namespace, input, calls, stats, servers);
            }
            ("response_item", "custom_tool_call") => {
                let input = payload.get("input").cloned();
                self.call(payload, None, input, calls, stats, servers);
            }
            ("response_item", "tool_search_call") => {
                let named = json!({
                    "name": CODEX_DISCOVERY_TOOL,
                    "call_id": payload.get("call_id").cloned().unwrap_or(Value::Null),
                });
                let input = payload.get("arguments").cloned();
                self.call(&named, None, input, calls, stats, servers);
            }
            (
                "response_item",
                "function_call_output" | "custom_tool_call_output" | "tool_search_output",
            ) => {
                let output = payload.get("output");
                // Not written by 0.171.0, whose outputs are the text the model saw; a failure
                // in the API's own shape is read if a session holds one.
                let failed = output
                    .filter(|o| o.get("success").and_then(Value::as_bool) == Some(false))
                    .map(|o| result_text(o.get("content")));
                self.result(payload, calls, stats, failed);
            }
            ("event_msg", "item_completed") => {
                let item = payload.get("item").unwrap_or(&Value::Null);
                let failure = match item.get("type").and_then(Value::as_str) {
                    Some("McpToolCall") => {
                        let result = item.get("result");
                        let is_error = result
                            .and_then(|r| r.get("isError"))
                            .and_then(Value::as_bool)
                            == Some(true);
                        (is_error || status_failed(item))
                            .then(|| result_text(result.and_then(|r| r.get("content"))))
                    }
                    Some("CommandExecution") => {
                        let code = item.get("exit_code").and_then(Value::as_i64);
                        (code.is_some_and(|c| c != 0) || status_failed(item)).then(|| {
                            item.get("aggregated_output")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string()
                        })
                    }
                    Some("FileChange") => status_failed(item).then(|| {
                        item.get("stderr")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string()
                    }),
                    _ => None,
                };
                match (failure, item.get("id").and_then(Value::as_str)) {
                    (Some(text), Some(id)) => self.fail(id, &text, calls),
                    _ => skipped(stats, "event_msg"),
                }
            }
            ("response_item", other) => skipped(stats, &format!("response_item.{other}")),
            (other, _) => skipped(stats, other),
        }
    }

    /// Reads one line of `codex exec --json` output into `calls`.
    pub(crate) fn event_line(
        &mut self,
        line: &Value,
        calls: &mut Vec<Call>,
        stats: &mut InputStats,
        servers: &ServerFilter,
    ) {
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("(none)");
        let item = line.get("item").unwrap_or(&Value::Null);
        let item_type = item.get("type").and_then(Value::as_str).unwrap_or("(none)");
        if !matches!(kind, "item.started" | "item.updated" | "item.completed") {
            return skipped(stats, kind);
        }
        let (name, namespace, input) = match item_type {
            "mcp_tool_call" => {
                let server = item.get("server").and_then(Value::as_str).unwrap_or("");
                (
                    item.get("tool").and_then(Value::as_str).unwrap_or(""),
                    Some(format!("mcp__{server}")),
                    item.get("arguments").cloned(),
                )
            }
            "command_execution" => {
                let command = item.get("command").and_then(Value::as_str).unwrap_or("");
                (
                    "exec_command",
                    None,
                    Some(json!({ "cmd": shell_line(command) })),
                )
            }
            "file_change" => ("apply_patch", None, None),
            other => return skipped(stats, &format!("item.{other}")),
        };
        let Some(id) = item.get("id").and_then(Value::as_str) else {
            stats.malformed_lines += 1;
            return;
        };
        if !self.by_id.contains_key(id) {
            let named = json!({"name": name, "call_id": id});
            self.call(&named, namespace.as_deref(), input, calls, stats, servers);
        }
        if kind != "item.completed" {
            return;
        }
        let status_bad = status_failed(item);
        let failure = match item_type {
            "mcp_tool_call" => {
                let error = item.get("error").filter(|e| !e.is_null());
                (status_bad || error.is_some()).then(|| match error {
                    Some(e) => e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    None => result_text(item.get("result").and_then(|r| r.get("content"))),
                })
            }
            "command_execution" => {
                let code = item.get("exit_code").and_then(Value::as_i64);
                (status_bad || code.is_some_and(|c| c != 0)).then(|| {
                    item.get("aggregated_output")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
            }
            _ => status_bad.then(String::new),
        };
        match failure {
            Some(text) => self.fail(id, &text, calls),
            None => {
                if let Some(&index) = self.by_id.get(id) {
                    calls[index].outcome = Outcome::Ok;
                }
            }
        }
    }

    /// Adds the call `named` (its `name` and `call_id`) with `input`.
    fn call(
        &mut self,
        named: &Value,
        namespace: Option<&str>,
        input: Option<Value>,
        calls: &mut Vec<Call>,
        stats: &mut InputStats,
        servers: &ServerFilter,
    ) {
        let (Some(id), Some(name)) = (
            named.get("call_id").and_then(Value::as_str),
            named.get("name").and_then(Value::as_str),
        ) else {
            stats.malformed_lines += 1;
            return;
        };
        if self.by_id.contains_key(id) {
            stats.duplicate_tool_uses += 1;
            return;
        }
        let name = classify_codex_name(name, namespace, servers);
        let stages = match (name.interface, &input) {
            (Interface::Pipe | Interface::Builtin, Some(input)) => input
                .get("command")
                .or_else(|| input.get("cmd"))
                .and_then(Value::as_str)
                .map(stage_commands)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let write = is_write(name.interface, &name.tool, &stages);
        calls.push(Call {
            tool: name.tool,
            interface: name.interface,
            write,
            outcome: Outcome::NoResult,
            stages,
            input: input.as_ref().map(InputKey::of),
            refused_token: None,
        });
        self.by_id.insert(id.to_string(), calls.len() - 1);
    }

    /// An output item: the call has a result, which is a failure if Codex said so.
    fn result(
        &mut self,
        payload: &Value,
        calls: &mut [Call],
        stats: &mut InputStats,
        failed: Option<String>,
    ) {
        let Some(id) = payload.get("call_id").and_then(Value::as_str) else {
            stats.malformed_lines += 1;
            return;
        };
        let Some(&index) = self.by_id.get(id) else {
            stats.results_without_call += 1;
            return;
        };
        if let Some(text) = failed {
            return self.fail(id, &text, calls);
        }
        if !self.failed.contains(id) {
            calls[index].outcome = Outcome::Ok;
        }
    }

    /// Codex recorded the call `id` as failed, with `text` as what it said.
    fn fail(&mut self, id: &str, text: &str, calls: &mut [Call]) {
        self.failed.insert(id.to_string());
        if let Some(&index) = self.by_id.get(id) {
            calls[index].outcome = Outcome::Error(reason_from_text(text));
            calls[index].refused_token = token_from_text(text);
        }
    }
}

/// Counts a line that carries no tool call, by its type (clipped: it is the writer's text).
fn skipped(stats: &mut InputStats, kind: &str) {
    *stats
        .skipped_line_types
        .entry(clip_token(kind))
        .or_default() += 1;
}

/// True when an item's status says it did not succeed.
fn status_failed(item: &Value) -> bool {
    matches!(
        item.get("status").and_then(Value::as_str),
        Some("failed" | "declined")
    )
}

/// The text of an MCP result's content: the `text` of each text block, joined.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The command line the model wrote, from the one Codex ran: `/bin/bash -lc '<line>'` (or `sh
/// -c`) gives back `<line>`; anything else is kept as it is.
fn shell_line(command: &str) -> String {
    if let Ok(words) = shell_words::split(command) {
        if let [shell, flag, line] = words.as_slice() {
            let name = shell.rsplit('/').next().unwrap_or(shell);
            if matches!(name, "bash" | "sh" | "zsh") && matches!(flag.as_str(), "-c" | "-lc") {
                return line.clone();
            }
        }
    }
    command.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(format: &str, lines: &[Value]) -> (Vec<Call>, InputStats) {
        let mut calls = Vec::new();
        let mut stats = InputStats::default();
        let mut state = Calls::default();
        let f = ServerFilter::default();
        for line in lines {
            if format == "rollout" {
                state.rollout_line(line, &mut calls, &mut stats, &f);
            } else {
                state.event_line(line, &mut calls, &mut stats, &f);
            }
        }
        (calls, stats)
    }

    #[test]
    fn the_first_line_tells_the_formats_and_versions_apart() {
        let meta = |v: &str| json!({"type": "session_meta", "payload": {"cli_version": v}});
        assert!(matches!(
            CodexFile::recognise(&meta("0.171.0")),
            Some(CodexFile::Rollout(_))
        ));
        assert!(matches!(
            CodexFile::recognise(&meta("0.172.0")),
            Some(CodexFile::UnknownRollout(v)) if v == "0.172.0"
        ));
        assert!(matches!(
            CodexFile::recognise(&json!({"type": "thread.started", "thread_id": "t"})),
            Some(CodexFile::Events(_))
        ));
        assert!(CodexFile::recognise(&json!({"type": "user", "message": {}})).is_none());
    }

    #[test]
    fn a_session_files_calls_their_namespaces_and_failures_are_read() {
        let item = |p: Value| json!({"type": "response_item", "payload": p});
        let (calls, stats) = read(
            "rollout",
            &[
                item(
                    json!({"type": "tool_search_call", "call_id": "c0", "arguments": {"query": "fs"}}),
                ),
                item(json!({"type": "tool_search_output", "call_id": "c0", "tools": []})),
                item(json!({"type": "function_call", "name": "read_text_file",
                    "namespace": "mcp__filesystem", "arguments": "{\"path\":\"x\"}", "call_id": "c1"})),
                json!({"type": "event_msg", "payload": {"type": "item_completed", "item": {
                    "type": "McpToolCall", "id": "c1", "status": "failed",
                    "result": {"content": [{"type": "text", "text": "NotFound: x"}], "isError": true}}}}),
                item(
                    json!({"type": "function_call_output", "call_id": "c1", "output": "NotFound: x"}),
                ),
                item(json!({"type": "function_call", "name": "exec_command",
                    "arguments": "{\"cmd\":\"cat a | wc -l\"}", "call_id": "c2"})),
                item(json!({"type": "function_call_output", "call_id": "c2", "output": "1"})),
                item(
                    json!({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c3"}),
                ),
                item(json!({"type": "message", "role": "assistant"})),
                item(
                    json!({"type": "function_call", "name": "spawn_agent", "namespace": "multi_agent_v1",
                    "arguments": "{}", "call_id": "c1"}),
                ),
            ],
        );
        let shown: Vec<_> = calls
            .iter()
            .map(|c| (c.tool.as_str(), c.interface, c.write, c.outcome.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                ("tool_search", Interface::Discovery, false, Outcome::Ok),
                (
                    "read_text_file",
                    Interface::Filesystem,
                    false,
                    Outcome::Error("NotFound".into())
                ),
                ("exec_command", Interface::Builtin, false, Outcome::Ok),
                ("apply_patch", Interface::Builtin, true, Outcome::NoResult),
            ]
        );
        assert_eq!(calls[2].stages, ["cat", "wc"]);
        assert_eq!(stats.duplicate_tool_uses, 1);
        assert_eq!(
            stats.skipped_line_types.get("response_item.message"),
            Some(&1)
        );
    }

    #[test]
    fn calls_without_an_id_and_outputs_without_a_call_are_counted_not_guessed() {
        let item = |p: Value| json!({"type": "response_item", "payload": p});
        let (calls, stats) = read(
            "rollout",
            &[
                item(json!({"type": "function_call", "name": "exec_command", "arguments": "{}"})),
                item(json!({"type": "function_call_output", "call_id": "nobody", "output": "x"})),
                item(json!({"type": "function_call", "name": "exec_command",
                    "arguments": "not json", "call_id": "c1"})),
                json!({"type": "event_msg", "payload": {"type": "item_completed", "item": {
                    "type": "CommandExecution", "id": "c1", "exit_code": 1, "aggregated_output": "no"}}}),
                item(json!({"type": "function_call_output", "call_id": "c1", "output": "no"})),
            ],
        );
        assert_eq!(stats.malformed_lines, 1);
        assert_eq!(stats.results_without_call, 1);
        assert_eq!(calls.len(), 1);
        // A failure recorded before the output stays a failure.
        assert_eq!(calls[0].outcome, Outcome::Error("unclassified".into()));
        assert_eq!(calls[0].stages, Vec::<String>::new());
    }

    #[test]
    fn the_event_streams_items_are_calls_once_each() {
        let ev = |kind: &str, item: Value| json!({"type": kind, "item": item});
        let mcp = |status: &str| {
            json!({"id": "item_0", "type": "mcp_tool_call", "server": "filesystem",
                "tool": "write_file", "arguments": {"path": "a"}, "status": status, "error": null})
        };
        let cmd = json!({"id": "item_1", "type": "command_execution",
            "command": "/bin/bash -lc 'rg x | head'", "exit_code": 2, "status": "failed"});
        let (calls, stats) = read(
            "events",
            &[
                json!({"type": "thread.started", "thread_id": "t"}),
                ev("item.started", mcp("in_progress")),
                ev("item.completed", mcp("completed")),
                ev("item.completed", cmd),
                ev(
                    "item.completed",
                    json!({"id": "item_2", "type": "file_change", "status": "completed"}),
                ),
                ev(
                    "item.completed",
                    json!({"id": "item_3", "type": "agent_message", "text": "hi"}),
                ),
            ],
        );
        let shown: Vec<_> = calls
            .iter()
            .map(|c| (c.tool.as_str(), c.interface, c.write, c.outcome.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                ("write_file", Interface::Filesystem, true, Outcome::Ok),
                (
                    "exec_command",
                    Interface::Builtin,
                    false,
                    Outcome::Error("unclassified".into())
                ),
                ("apply_patch", Interface::Builtin, true, Outcome::Ok),
            ]
        );
        assert_eq!(calls[1].stages, ["rg", "head"]);
        assert_eq!(stats.skipped_line_types.get("item.agent_message"), Some(&1));
        assert_eq!(stats.skipped_line_types.get("thread.started"), Some(&1));
    }
}
