//! Anthropic's Messages API: reading a request, writing the answer (streamed or whole).
//!
//! A request has `tools` (name, description, `input_schema`), `system` (a string or text blocks)
//! and `messages`: assistant messages hold `tool_use` blocks (`id`, `name`, `input`), user
//! messages `tool_result` blocks (`tool_use_id`, `content`, `is_error`). Claude Code also puts
//! messages of role `system` in the list, and names the tools it defers in one of them
//! ("The following deferred tools are now available via ToolSearch …", one name a line).
//!
//! A streamed answer is the event sequence `message_start`, `content_block_start`,
//! `content_block_delta` (`text_delta` or `input_json_delta`), `content_block_stop`,
//! `message_delta` (the stop reason), `message_stop`.

use serde_json::{json, Value};

use crate::conversation::{text_parts, Call, CallResult, Conversation, Offered};
use crate::script::Action;

/// The line before the names of the tools Claude Code defers.
const DEFERRED_MARKER: &str = "deferred tools are now available via ToolSearch";

/// Reads a Messages API request body.
pub fn parse(body: &Value) -> Conversation {
    let mut conv = Conversation {
        model: body.get("model").and_then(Value::as_str).map(String::from),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        ..Conversation::default()
    };
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = tool.get("name").and_then(Value::as_str) {
            conv.offered.push(Offered {
                name: name.to_string(),
                namespace: None,
            });
        }
    }
    let system = body.get("system").map(text_parts).unwrap_or_default();
    conv.system_chars = system.iter().map(|s| s.chars().count()).sum();
    for text in &system {
        read_deferred(text, &mut conv.deferred);
    }
    let messages = body.get("messages").and_then(Value::as_array);
    for message in messages.into_iter().flatten() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "assistant" => read_tool_uses(content, &mut conv.calls),
            "user" => {
                read_tool_results(content, &mut conv.calls);
                for text in user_texts(content) {
                    read_deferred(&text, &mut conv.deferred);
                    conv.user_text.push_str(&text);
                    conv.user_text.push('\n');
                }
            }
            "system" => {
                for text in text_parts(content) {
                    conv.system_chars += text.chars().count();
                    read_deferred(&text, &mut conv.deferred);
                }
            }
            _ => {}
        }
    }
    conv
}

/// The text blocks of a user message (its tool results are not the user's words).
fn user_texts(content: &Value) -> Vec<String> {
    match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str).map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

fn read_tool_uses(content: &Value, calls: &mut Vec<Call>) {
    for block in content.as_array().into_iter().flatten() {
        if block.get("type").and_then(Value::as_str) != Some("tool_use") {
            continue;
        }
        calls.push(Call {
            id: str_field(block, "id"),
            name: str_field(block, "name"),
            namespace: None,
            input: block.get("input").cloned().unwrap_or(Value::Null),
            result: None,
        });
    }
}

fn read_tool_results(content: &Value, calls: &mut [Call]) {
    for block in content.as_array().into_iter().flatten() {
        if block.get("type").and_then(Value::as_str) != Some("tool_result") {
            continue;
        }
        let id = str_field(block, "tool_use_id");
        if let Some(call) = calls.iter_mut().rev().find(|c| c.id == id) {
            call.result = Some(CallResult {
                parts: text_parts(block.get("content").unwrap_or(&Value::Null)),
                is_error: block
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            });
        }
    }
}

/// Adds the tool names listed after the deferral marker, one a line up to the first empty line.
fn read_deferred(text: &str, deferred: &mut Vec<String>) {
    let Some(at) = text.find(DEFERRED_MARKER) else {
        return;
    };
    let names = text[at..].lines().skip(1);
    for line in names {
        let name = line.trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            break;
        }
        if !deferred.iter().any(|d| d == name) {
            deferred.push(name.to_string());
        }
    }
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The answer, as the body to send and its content type: server-sent events when the request
/// asked for a stream, one JSON message otherwise. `id` names the message and a tool call.
pub fn answer(action: &Action, model: &str, id: u64, stream: bool) -> (Vec<u8>, &'static str) {
    let (block, stop_reason, delta) = match action {
        Action::Text { text } => (
            json!({"type": "text", "text": text}),
            "end_turn",
            json!({"type": "text_delta", "text": text}),
        ),
        Action::Call { name, input, .. } => (
            json!({"type": "tool_use", "id": format!("toolu_scripted_{id}"), "name": name, "input": input}),
            "tool_use",
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
        ),
    };
    let usage = json!({"input_tokens": 1, "output_tokens": 1});
    if !stream {
        let message = json!({
            "id": format!("msg_scripted_{id}"), "type": "message", "role": "assistant",
            "model": model, "content": [block], "stop_reason": stop_reason,
            "stop_sequence": null, "usage": usage,
        });
        return (message.to_string().into_bytes(), "application/json");
    }
    let mut start_block = block;
    match &mut start_block {
        Value::Object(map) if map.contains_key("input") => {
            map.insert("input".into(), json!({}));
        }
        Value::Object(map) => {
            map.insert("text".into(), json!(""));
        }
        _ => {}
    }
    let events = [
        json!({"type": "message_start", "message": {
            "id": format!("msg_scripted_{id}"), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": usage}}),
        json!({"type": "content_block_start", "index": 0, "content_block": start_block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    (crate::http::sse(&events), "text/event-stream")
}

/// The answer to `count_tokens`: an estimate of four bytes a token, which is all a harness
/// uses it for (deciding when to compact).
pub fn count_tokens(body_len: usize) -> Vec<u8> {
    json!({"input_tokens": body_len / 4})
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_yields_offered_deferred_and_calls_with_their_results() {
        let body = json!({
            "model": "m", "stream": true,
            "system": [{"type": "text", "text": "You are an agent."}],
            "tools": [{"name": "Read"}, {"name": "ToolSearch"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "do the task"}]},
                {"role": "system", "content": [{"type": "text", "text":
                    "The following deferred tools are now available via ToolSearch. Use it:\nWebFetch\nmcp__fs__read_text_file\n\nOther text"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "line"}], "is_error": true}]}
            ]
        });
        let conv = parse(&body);
        assert!(conv.stream);
        assert!(conv.offers("ToolSearch", None));
        assert_eq!(conv.deferred, ["WebFetch", "mcp__fs__read_text_file"]);
        assert_eq!(conv.calls.len(), 1);
        let result = conv.calls[0].result.as_ref().unwrap();
        assert_eq!(result.parts, ["line"]);
        assert!(result.is_error);
        assert!(conv.user_text.contains("do the task"));
        assert!(!conv.is_auxiliary());
    }

    #[test]
    fn a_streamed_tool_call_sends_its_input_as_one_json_delta() {
        let action = Action::Call {
            name: "Read".into(),
            namespace: None,
            input: json!({"file_path": "a"}),
        };
        let (body, kind) = answer(&action, "m", 7, true);
        assert_eq!(kind, "text/event-stream");
        let text = String::from_utf8(body).unwrap();
        assert!(text.contains("event: content_block_delta"));
        assert!(
            text.contains(r#""partial_json":"{\"file_path\":\"a\"}""#),
            "{text}"
        );
        assert!(text.contains(r#""stop_reason":"tool_use""#));
        assert!(text.contains("toolu_scripted_7"));
    }
}
