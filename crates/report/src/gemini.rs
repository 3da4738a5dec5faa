//! Gemini CLI's records, read into the report's sessions of calls.
//!
//! Gemini CLI (read from 0.61.0) keeps two records, both JSON lines, told apart from Claude
//! Code's transcripts by their first line ([`recognise`]):
//!
//! - its chat file, `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`: a first line
//!   `{sessionId, projectHash, startTime, lastUpdated, kind}`, then message lines `{id, type,
//!   content, …}` (`type` `user`, `gemini`, `info`, …) and `{"$set": {…}}` updates. A `gemini`
//!   message holds its `toolCalls` (`id`, `name`, `args`, `result`, `status`), and is written
//!   again each time it grows, so a call is read once, by its id, and a later copy only updates
//!   its outcome;
//! - its `--output-format stream-json` stdout: `{type: "init", session_id, model}`, then
//!   `message`, `tool_use` (`tool_name`, `tool_id`, `parameters`), `tool_result` (`tool_id`,
//!   `status`, `output`, `error`) and `result` lines.
//!
//! Neither names the CLI's version, so a line is read only if its shape is one of the above; any
//! other line type is counted as skipped (`gemini_chat:<type>`, `gemini_stream:<type>`).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::classify::{classify_gemini_name, is_write, ServerFilter};
use super::model::{Call, InputStats, Outcome, Session};
use super::pipeline::call_stages;
use super::reason::{clip_token, reason_from_text, token_from_text};
use super::retry::InputKey;

/// Which of Gemini CLI's records a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A chat file under `~/.gemini/tmp/<project>/chats/`.
    Chat,
    /// Its `stream-json` stdout.
    Stream,
}

impl Format {
    fn label(self) -> &'static str {
        match self {
            Format::Chat => "gemini_chat",
            Format::Stream => "gemini_stream",
        }
    }
}

/// The format a file's first line says it is in, or `None` for a line neither record starts
/// with (the file is then someone else's, e.g. Claude Code's).
pub fn recognise(first: &Value) -> Option<Format> {
    let has = |key: &str| first.get(key).is_some_and(Value::is_string);
    if has("sessionId") && has("projectHash") && has("startTime") && first.get("type").is_none() {
        return Some(Format::Chat);
    }
    if first.get("type").and_then(Value::as_str) == Some("init") && has("session_id") {
        return Some(Format::Stream);
    }
    None
}

/// Where the reader keeps what it needs across lines and files.
pub struct Sink<'a> {
    /// Which server names count as this project.
    pub servers: &'a ServerFilter,
    /// What was read and skipped.
    pub stats: &'a mut InputStats,
    /// Every call id counted so far (shared with the other readers, across files).
    pub seen: &'a mut HashSet<String>,
    /// Where each call is: (session index, call index).
    pub by_id: &'a mut HashMap<String, (usize, usize)>,
    /// The sessions; the one being read is at `session`.
    pub sessions: &'a mut [Session],
    /// The session the file's calls go to.
    pub session: usize,
}

/// Reads one line of a file in `format`.
pub fn read_line(format: Format, line: &Value, sink: &mut Sink) {
    match format {
        Format::Chat => chat_line(line, sink),
        Format::Stream => stream_line(line, sink),
    }
}

fn skipped(format: Format, kind: &str, sink: &mut Sink) {
    // The type is the writer's text: cut like a refused token, it only needs to be recognised.
    *sink
        .stats
        .skipped_line_types
        .entry(format!("{}:{}", format.label(), clip_token(kind)))
        .or_default() += 1;
}

fn chat_line(line: &Value, sink: &mut Sink) {
    let kind = match (line.get("type").and_then(Value::as_str), line.get("$set")) {
        (Some(kind), _) => kind,
        (None, Some(_)) => "$set",
        (None, None) if recognise(line) == Some(Format::Chat) => "session",
        (None, None) => "(none)",
    };
    let calls = line.get("toolCalls").and_then(Value::as_array);
    match (kind, calls) {
        ("gemini", Some(calls)) => {
            for call in calls {
                let (Some(id), Some(name)) = (
                    call.get("id").and_then(Value::as_str),
                    call.get("name").and_then(Value::as_str),
                ) else {
                    sink.stats.malformed_lines += 1;
                    continue;
                };
                use_tool(id, name, call.get("args"), sink);
                finish(id, call.get("status"), &chat_result_text(call), sink);
            }
        }
        // A `gemini` message without calls is the model's text: nothing to count.
        _ => skipped(Format::Chat, kind, sink),
    }
}

fn stream_line(line: &Value, sink: &mut Sink) {
    let kind = line.get("type").and_then(Value::as_str).unwrap_or("(none)");
    match kind {
        "tool_use" => {
            let (Some(id), Some(name)) = (
                line.get("tool_id").and_then(Value::as_str),
                line.get("tool_name").and_then(Value::as_str),
            ) else {
                sink.stats.malformed_lines += 1;
                return;
            };
            use_tool(id, name, line.get("parameters"), sink);
        }
        "tool_result" => {
            let Some(id) = line.get("tool_id").and_then(Value::as_str) else {
                sink.stats.malformed_lines += 1;
                return;
            };
            if !sink.by_id.contains_key(id) {
                sink.stats.results_without_call += 1;
                return;
            }
            let text = match line.get("error") {
                Some(error) => error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                None => line
                    .get("output")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            };
            finish(id, line.get("status"), &text, sink);
        }
        other => skipped(Format::Stream, other, sink),
    }
}

/// Counts a call once by its id; a copy seen again (a chat message rewritten as it grows) is
/// left to [`finish`] to update.
fn use_tool(id: &str, name: &str, args: Option<&Value>, sink: &mut Sink) {
    if sink.by_id.contains_key(id) {
        return;
    }
    if !sink.seen.insert(id.to_string()) {
        sink.stats.duplicate_tool_uses += 1;
        return;
    }
    let name = classify_gemini_name(name, sink.servers);
    let stages = call_stages(name.interface, args, &["command"]);
    let write = is_write(name.interface, &name.tool, &stages);
    let calls = &mut sink.sessions[sink.session].calls;
    calls.push(Call {
        tool: name.tool,
        interface: name.interface,
        write,
        outcome: Outcome::NoResult,
        stages,
        input: args.map(InputKey::of),
        refused_token: None,
    });
    sink.by_id
        .insert(id.to_string(), (sink.session, calls.len() - 1));
}

/// Sets a call's outcome from its `status` (`success`, `error`; anything else, such as a call
/// still running or cancelled, leaves it without a result).
fn finish(id: &str, status: Option<&Value>, text: &str, sink: &mut Sink) {
    let Some(&(session, index)) = sink.by_id.get(id) else {
        return;
    };
    let call = &mut sink.sessions[session].calls[index];
    match status.and_then(Value::as_str) {
        Some("success") => {
            call.outcome = Outcome::Ok;
            call.refused_token = None;
        }
        Some("error") => {
            let text = server_text(text);
            call.outcome = Outcome::Error(reason_from_text(&text));
            call.refused_token = token_from_text(&text);
        }
        _ => {}
    }
}

/// The marker before the server's own result in the message Gemini CLI makes of an MCP tool's
/// error: "MCP tool 'T' reported tool error for function call: {…} with response: [{…}]".
const WITH_RESPONSE: &str = " with response: ";

/// The server's own text of an MCP error (the `content` texts of the result Gemini CLI quotes),
/// so the reason is read from what this project wrote; any other text as it is.
fn server_text(text: &str) -> String {
    let quoted = text
        .rfind(WITH_RESPONSE)
        .and_then(|at| serde_json::from_str::<Value>(&text[at + WITH_RESPONSE.len()..]).ok());
    let texts: Vec<&str> = quoted
        .iter()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|part| part.pointer("/functionResponse/response/content"))
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        text.to_string()
    } else {
        texts.join("\n")
    }
}

/// The text a chat file's call passed back: each `functionResponse`'s `output` or `error`.
fn chat_result_text(call: &Value) -> String {
    call.get("result")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| {
            let response = part.pointer("/functionResponse/response")?;
            response
                .get("error")
                .or_else(|| response.get("output"))
                .and_then(Value::as_str)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Interface;
    use serde_json::json;

    fn read(lines: &[Value]) -> (Vec<Call>, InputStats) {
        let servers = ServerFilter::default();
        let mut stats = InputStats::default();
        let (mut seen, mut by_id) = (HashSet::new(), HashMap::new());
        let mut sessions = vec![Session {
            id: "s".into(),
            parent: None,
            calls: Vec::new(),
        }];
        let format = recognise(&lines[0]).expect("a Gemini record");
        for line in lines {
            let mut sink = Sink {
                servers: &servers,
                stats: &mut stats,
                seen: &mut seen,
                by_id: &mut by_id,
                sessions: &mut sessions,
                session: 0,
            };
            read_line(format, line, &mut sink);
        }
        (sessions.remove(0).calls, stats)
    }

    fn response(id: &str, name: &str, key: &str, text: &str) -> Value {
        json!([{"functionResponse": {"id": id, "name": name, "response": {key: text}}}])
    }

    #[test]
    fn a_chat_files_calls_are_read_once_each_with_their_outcomes() {
        let first = json!({"id": "m1", "type": "gemini", "content": "", "toolCalls": [
            {"id": "a", "name": "mcp_filesystem_list_directory", "args": {"path": "."},
             "status": "success", "result": response("a", "mcp_filesystem_list_directory", "output", "[FILE] x")}]});
        let grown = json!({"id": "m1", "type": "gemini", "content": "", "toolCalls": [
            {"id": "a", "name": "mcp_filesystem_list_directory", "args": {"path": "."},
             "status": "success", "result": response("a", "mcp_filesystem_list_directory", "output", "[FILE] x")},
            {"id": "b", "name": "write_file", "args": {"file_path": "y", "content": "z"},
             "status": "error", "result": response("b", "write_file", "error", "NotFound: no")}]});
        let lines = [
            json!({"sessionId": "s1", "projectHash": "h", "startTime": "t", "lastUpdated": "t", "kind": "main"}),
            json!({"id": "u1", "type": "user", "content": [{"text": "do it"}]}),
            json!({"$set": {"lastUpdated": "t"}}),
            first,
            grown,
            json!({"id": "m2", "type": "gemini", "content": "done"}),
        ];
        let (calls, stats) = read(&lines);
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (
                calls[0].tool.as_str(),
                calls[0].interface,
                &calls[0].outcome
            ),
            ("list_directory", Interface::Filesystem, &Outcome::Ok)
        );
        assert_eq!(calls[1].interface, Interface::Builtin);
        assert!(calls[1].write);
        assert_eq!(calls[1].outcome, Outcome::Error("NotFound".into()));
        assert_eq!(stats.skipped_line_types["gemini_chat:session"], 1);
        assert_eq!(stats.skipped_line_types["gemini_chat:$set"], 1);
        assert_eq!(stats.skipped_line_types["gemini_chat:user"], 1);
        assert_eq!(stats.skipped_line_types["gemini_chat:gemini"], 1);
        assert_eq!(stats.duplicate_tool_uses, 0);
    }

    #[test]
    fn stream_json_calls_are_paired_with_their_results() {
        let lines = [
            json!({"type": "init", "session_id": "s", "model": "m"}),
            json!({"type": "tool_use", "tool_name": "mcp_filesystem_read_text_file", "tool_id": "t1",
                   "parameters": {"path": "a"}}),
            json!({"type": "tool_result", "tool_id": "t1", "status": "error", "output": "Error",
                   "error": {"type": "mcp_tool_error", "message": "MCP tool 'read_text_file' reported tool error for function call: {\"name\":\"read_text_file\",\"args\":{\"path\":\"a\"}} with response: [{\"functionResponse\":{\"name\":\"read_text_file\",\"response\":{\"content\":[{\"type\":\"text\",\"text\":\"NotFound: 'a' does not exist\"}],\"isError\":true}}}]"}}),
            json!({"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t2",
                   "parameters": {"command": "cat a | wc -l"}}),
            json!({"type": "tool_result", "tool_id": "t2", "status": "success", "output": "1"}),
            json!({"type": "tool_result", "tool_id": "nobody", "status": "success", "output": ""}),
            json!({"type": "some_future_event"}),
        ];
        let (calls, stats) = read(&lines);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].tool, "read_text_file");
        assert_eq!(calls[0].outcome, Outcome::Error("NotFound".into()));
        assert_eq!(calls[1].stages, ["cat", "wc"]);
        assert!(!calls[1].write);
        assert_eq!(calls[1].outcome, Outcome::Ok);
        assert_eq!(stats.results_without_call, 1);
        assert_eq!(stats.skipped_line_types["gemini_stream:init"], 1);
        assert_eq!(
            stats.skipped_line_types["gemini_stream:some_future_event"],
            1
        );
    }

    #[test]
    fn a_claude_code_line_is_not_taken_for_gemini() {
        assert_eq!(
            recognise(&json!({"type": "user", "sessionId": "s", "message": {}})),
            None
        );
        assert_eq!(recognise(&json!({"type": "summary"})), None);
    }
}
