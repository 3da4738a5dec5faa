//! OpenAI's Responses API: reading a request, writing the streamed answer.
//!
//! A request has `instructions`, `tools` (`{type: "function", name, parameters}`, or Codex's
//! `{type: "namespace", name, tools: [...]}` holding an MCP server's tools) and `input`, a list
//! of items: messages (`role` user, developer, assistant), `function_call` (`name`,
//! `namespace`, `arguments` as a JSON string, `call_id`) and `function_call_output` (`call_id`,
//! `output`: a string or a list of `input_text` items).
//!
//! A freeform tool (`{type: "custom", name}`, Codex's `apply_patch` for the models it knows) is
//! called with a `custom_tool_call` (`name`, `input` as plain text, `call_id`) and answered by a
//! `custom_tool_call_output`.
//!
//! With a model it knows to support it, Codex defers MCP tools behind a `{type: "tool_search"}`
//! tool: the model emits a `tool_search_call` (`arguments: {query}`), and the next request holds
//! a `tool_search_output` whose `tools` are the loaded definitions.
//!
//! The streamed answer is `response.created`, one `response.output_item.done` (a
//! `function_call` or an assistant `message`) and `response.completed`.

use serde_json::{json, Value};

use crate::conversation::{text_parts, Call, CallResult, Conversation, Offered};
use crate::script::Action;

/// Codex's discovery tool: deferred tools are loaded by a `tool_search_call` the client runs,
/// answered in the next request by a `tool_search_output` item holding the loaded tools.
pub const TOOL_SEARCH: &str = "tool_search";

/// Reads a Responses API request body.
pub fn parse(body: &Value) -> Conversation {
    let mut conv = Conversation {
        model: body.get("model").and_then(Value::as_str).map(String::from),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        ..Conversation::default()
    };
    conv.system_chars = body
        .get("instructions")
        .and_then(Value::as_str)
        .map_or(0, |s| s.chars().count());
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        // Codex's `tool_search` (a client-run discovery tool) has a type and no name.
        let Some(name) = tool.get("name").and_then(Value::as_str).or_else(|| {
            tool.get("type")
                .and_then(Value::as_str)
                .filter(|t| *t == TOOL_SEARCH)
        }) else {
            continue;
        };
        offer(tool, name, &mut conv.offered);
    }
    for item in body
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                let arguments = item.get("arguments").and_then(Value::as_str).unwrap_or("");
                conv.calls.push(Call {
                    id: str_field(item, "call_id"),
                    name: str_field(item, "name"),
                    namespace: item
                        .get("namespace")
                        .and_then(Value::as_str)
                        .map(String::from),
                    input: serde_json::from_str(arguments)
                        .unwrap_or_else(|_| Value::String(arguments.to_string())),
                    result: None,
                });
            }
            Some("custom_tool_call") => conv.calls.push(Call {
                id: str_field(item, "call_id"),
                name: str_field(item, "name"),
                namespace: None,
                input: Value::String(str_field(item, "input")),
                result: None,
            }),
            Some("tool_search_call") => conv.calls.push(Call {
                id: str_field(item, "call_id"),
                name: TOOL_SEARCH.to_string(),
                namespace: None,
                input: item.get("arguments").cloned().unwrap_or(Value::Null),
                result: None,
            }),
            Some("tool_search_output") => {
                // The tools a search loaded are offered from then on, as if listed up front.
                let mut loaded = Vec::new();
                for tool in item
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(name) = tool.get("name").and_then(Value::as_str) {
                        offer(tool, name, &mut loaded);
                    }
                }
                let id = str_field(item, "call_id");
                if let Some(call) = conv.calls.iter_mut().rev().find(|c| c.id == id) {
                    call.result = Some(CallResult {
                        parts: loaded
                            .iter()
                            .map(|o| match &o.namespace {
                                Some(ns) => format!("{ns}/{}", o.name),
                                None => o.name.clone(),
                            })
                            .collect(),
                        is_error: false,
                    });
                }
                conv.offered.extend(loaded);
            }
            Some("function_call_output" | "custom_tool_call_output") => {
                let id = str_field(item, "call_id");
                let output = item.get("output").unwrap_or(&Value::Null);
                // A failed call's output is `{content, success: false}`.
                let (content, is_error) = match output.get("content") {
                    Some(content) => (
                        content,
                        output.get("success").and_then(Value::as_bool) == Some(false),
                    ),
                    None => (output, false),
                };
                if let Some(call) = conv.calls.iter_mut().rev().find(|c| c.id == id) {
                    call.result = Some(CallResult {
                        parts: text_parts(content),
                        is_error,
                    });
                }
            }
            Some("message") | None => {
                let content = item.get("content").unwrap_or(&Value::Null);
                match item.get("role").and_then(Value::as_str) {
                    Some("user") => {
                        for text in text_parts(content) {
                            conv.user_text.push_str(&text);
                            conv.user_text.push('\n');
                        }
                    }
                    Some("developer") | Some("system") => {
                        conv.system_chars += text_parts(content)
                            .iter()
                            .map(|t| t.chars().count())
                            .sum::<usize>();
                    }
                    _ => {}
                }
            }
            Some(_) => {}
        }
    }
    conv
}

/// Adds a tool definition to `offered`: a namespace's tools each in it, any other tool by name.
fn offer(tool: &Value, name: &str, offered: &mut Vec<Offered>) {
    match tool.get("tools").and_then(Value::as_array) {
        Some(inner) => {
            for t in inner {
                if let Some(inner_name) = t.get("name").and_then(Value::as_str) {
                    offered.push(Offered {
                        name: inner_name.to_string(),
                        namespace: Some(name.to_string()),
                    });
                }
            }
        }
        None => offered.push(Offered {
            name: name.to_string(),
            namespace: None,
        }),
    }
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The streamed answer; `id` names the response, its item and a call.
pub fn answer(action: &Action, id: u64) -> (Vec<u8>, &'static str) {
    let item = match action {
        Action::Text { text } => json!({
            "type": "message", "role": "assistant", "id": format!("msg_scripted_{id}"),
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
        Action::Call {
            name,
            namespace: None,
            input,
        } if name == TOOL_SEARCH => json!({
            "type": "tool_search_call", "id": format!("ts_scripted_{id}"),
            "call_id": format!("call_scripted_{id}"), "execution": "client",
            "status": "completed", "arguments": input,
        }),
        // A freeform tool takes text, where a function takes an object of arguments.
        Action::Call {
            name,
            namespace: None,
            input: Value::String(text),
        } => json!({
            "type": "custom_tool_call", "id": format!("ctc_scripted_{id}"),
            "call_id": format!("call_scripted_{id}"), "name": name, "input": text,
            "status": "completed",
        }),
        Action::Call {
            name,
            namespace,
            input,
        } => {
            let mut item = json!({
                "type": "function_call", "id": format!("fc_scripted_{id}"),
                "call_id": format!("call_scripted_{id}"), "name": name,
                "arguments": input.to_string(), "status": "completed",
            });
            if let (Some(ns), Value::Object(map)) = (namespace, &mut item) {
                map.insert("namespace".into(), json!(ns));
            }
            item
        }
    };
    let response_id = format!("resp_scripted_{id}");
    let usage = json!({
        "input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2,
    });
    let events = [
        json!({"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {
            "id": response_id, "status": "completed", "usage": usage}}),
    ];
    (crate::http::sse(&events), "text/event-stream")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_tool_and_a_call_with_its_output_are_read() {
        let body = json!({
            "model": "m", "stream": true, "instructions": "be brief",
            "tools": [
                {"type": "function", "name": "exec_command"},
                {"type": "namespace", "name": "mcp__fs", "tools": [{"type": "function", "name": "read_text_file"}]},
                {"type": "web_search"}
            ],
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task 1"}]},
                {"type": "function_call", "name": "read_text_file", "namespace": "mcp__fs",
                 "arguments": "{\"path\":\"a\"}", "call_id": "c1"},
                {"type": "function_call_output", "call_id": "c1",
                 "output": [{"type": "input_text", "text": "Wall time: 0 seconds\nOutput:"}, {"type": "input_text", "text": "hello"}]}
            ]
        });
        let conv = parse(&body);
        assert!(conv.offers("read_text_file", Some("mcp__fs")));
        assert!(conv.offers("exec_command", None));
        assert_eq!(conv.system_chars, "be brief".len() + "dev".len());
        assert_eq!(conv.calls[0].input, json!({"path": "a"}));
        assert_eq!(conv.calls[0].result.as_ref().unwrap().parts[1], "hello");
        assert!(conv.user_text.contains("task 1"));
    }

    #[test]
    fn a_text_input_is_a_freeform_call_and_its_output_is_read_back() {
        let action = Action::Call {
            name: "apply_patch".into(),
            namespace: None,
            input: json!("*** Begin Patch\n*** End Patch\n"),
        };
        let text = String::from_utf8(answer(&action, 4).0).unwrap();
        assert!(text.contains(r#""type":"custom_tool_call""#), "{text}");
        assert!(text.contains(r#""input":"*** Begin Patch\n"#), "{text}");
        let conv = parse(&json!({"input": [
            {"type": "custom_tool_call", "name": "apply_patch", "input": "patch", "call_id": "c4"},
            {"type": "custom_tool_call_output", "call_id": "c4", "output": "Success."}
        ]}));
        assert_eq!(conv.calls[0].input, json!("patch"));
        assert_eq!(conv.calls[0].result.as_ref().unwrap().parts, ["Success."]);
    }

    #[test]
    fn a_call_in_a_namespace_carries_it() {
        let action = Action::Call {
            name: "read_text_file".into(),
            namespace: Some("mcp__fs".into()),
            input: json!({"path": "a"}),
        };
        let text = String::from_utf8(answer(&action, 3).0).unwrap();
        assert!(text.contains(r#""namespace":"mcp__fs""#), "{text}");
        assert!(text.contains(r#""arguments":"{\"path\":\"a\"}""#), "{text}");
        assert!(text.contains("event: response.completed"));
    }
}
