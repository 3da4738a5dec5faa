//! Google's Gemini API (`generateContent`), as Gemini CLI speaks it: reading a request, writing
//! the answer (streamed or whole).
//!
//! The model is named in the path, `…/models/{model}:streamGenerateContent?alt=sse` (streamed)
//! or `…/models/{model}:generateContent` (whole); `…:countTokens` asks for a token count. A
//! request has `systemInstruction` (`{parts: [{text}]}`), `tools` (a list of
//! `{functionDeclarations: [{name, description, parametersJsonSchema}]}`) and `contents`, a
//! list of `{role: "user"|"model", parts}`: a model turn's parts hold `functionCall` (`id`,
//! `name`, `args`), a user turn's `text` or `functionResponse` (`id`, `name`, `response`).
//!
//! Gemini CLI offers an MCP server's tools flat, as `mcp_<server>_<tool>`, with every schema up
//! front.
//!
//! A streamed answer is server-sent events of `data:` lines only, each one
//! `GenerateContentResponse` (`candidates[0].content.parts`, `finishReason`,
//! `usageMetadata`); the whole answer is that one object as the body.

use serde_json::{json, Value};

use crate::conversation::{text_parts, Call, CallResult, Conversation, Offered};
use crate::script::Action;

/// What a request's path asks of the Gemini API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `:streamGenerateContent`: an answer as server-sent events.
    Stream,
    /// `:generateContent`: the answer as one JSON object.
    Generate,
    /// `:countTokens`.
    CountTokens,
}

/// The model and method a path names (`/v1beta/models/gemini-2.5-flash:generateContent`), or
/// `None` for a path that is not a Gemini model method.
pub fn route(path: &str) -> Option<(String, Method)> {
    let (_, rest) = path.rsplit_once("/models/")?;
    let (model, method) = rest.split_once(':')?;
    let method = match method {
        "streamGenerateContent" => Method::Stream,
        "generateContent" => Method::Generate,
        "countTokens" => Method::CountTokens,
        _ => return None,
    };
    Some((model.to_string(), method))
}

/// Reads a `generateContent` request body; `model` and `stream` come from the path.
pub fn parse(body: &Value, model: &str, stream: bool) -> Conversation {
    let mut conv = Conversation {
        model: Some(model.to_string()),
        stream,
        ..Conversation::default()
    };
    conv.response_schema = body
        .pointer("/generationConfig/responseJsonSchema")
        .or_else(|| body.pointer("/generationConfig/responseSchema"))
        .cloned();
    conv.system_chars = body
        .get("systemInstruction")
        .map(content_texts)
        .unwrap_or_default()
        .iter()
        .map(|t| t.chars().count())
        .sum();
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for decl in tool
            .get("functionDeclarations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = decl.get("name").and_then(Value::as_str) {
                conv.offered.push(Offered {
                    name: name.to_string(),
                    namespace: None,
                });
            }
        }
    }
    for content in body
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = content
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        for part in content
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(call) = part.get("functionCall") {
                conv.calls.push(Call {
                    id: call_id(call),
                    name: str_field(call, "name"),
                    namespace: None,
                    input: call.get("args").cloned().unwrap_or_else(|| json!({})),
                    result: None,
                });
            } else if let Some(response) = part.get("functionResponse") {
                read_response(response, &mut conv.calls);
            } else if role == "user" && part.get("thought").and_then(Value::as_bool) != Some(true) {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    conv.user_text.push_str(text);
                    conv.user_text.push('\n');
                }
            }
        }
    }
    conv
}

/// The texts of a `Content` (`{parts: [{text}]}`), or of a bare string.
fn content_texts(content: &Value) -> Vec<String> {
    match content.get("parts") {
        Some(parts) => text_parts(parts),
        None => text_parts(content),
    }
}

/// Gives a `functionResponse` to its call: the one with its id, else (a harness that sent no
/// id) the first call of its name still without a result.
fn read_response(response: &Value, calls: &mut [Call]) {
    let id = call_id(response);
    let name = str_field(response, "name");
    let call = match calls.iter().position(|c| !id.is_empty() && c.id == id) {
        Some(at) => Some(at),
        None => calls
            .iter()
            .position(|c| c.result.is_none() && c.name == name),
    };
    let Some(at) = call else { return };
    let body = response.get("response").unwrap_or(&Value::Null);
    // Gemini CLI passes a tool's text as `{output}`, a failure as `{error}`; any other shape is
    // kept whole as JSON, so nothing the harness sent is lost.
    let (parts, is_error) = match (body.get("output"), body.get("error")) {
        (Some(output), _) => (text_parts(output), false),
        (None, Some(error)) => (text_parts(error), true),
        (None, None) => (vec![body.to_string()], false),
    };
    calls[at].result = Some(CallResult { parts, is_error });
}

/// A call's id as the model gave it. Gemini CLI's side requests resend the history with each id
/// as `<tool name>__<id>` (the call id it keeps), its main loop with the model's own: both
/// name one call.
fn call_id(part: &Value) -> String {
    let id = str_field(part, "id");
    let prefix = format!("{}__", str_field(part, "name"));
    match id.strip_prefix(&prefix) {
        Some(own) if !own.is_empty() => own.to_string(),
        _ => id,
    }
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The answer, as the body to send and its content type: one `data:` event when streamed, the
/// object itself otherwise. `id` names the response and a call. A text answer to a request
/// that named a response schema is the plainest instance of it ([`schema_instance`]) instead:
/// a harness's side request gets an answer it can read.
pub fn answer(
    action: &Action,
    model: &str,
    id: u64,
    stream: bool,
    schema: Option<&Value>,
) -> (Vec<u8>, &'static str) {
    let part = match (action, schema) {
        (Action::Text { .. }, Some(schema)) => {
            json!({"text": schema_instance(schema, 0).to_string()})
        }
        (Action::Text { text }, None) => json!({"text": text}),
        (Action::Call { name, input, .. }, _) => json!({"functionCall": {
            "id": format!("call_scripted_{id}"), "name": name, "args": input}}),
    };
    let response = json!({
        "candidates": [{
            "content": {"role": "model", "parts": [part]},
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": model,
        "responseId": format!("resp_scripted_{id}"),
    });
    if stream {
        (
            format!("data: {response}\r\n\r\n").into_bytes(),
            "text/event-stream",
        )
    } else {
        (response.to_string().into_bytes(), "application/json")
    }
}

/// How deep [`schema_instance`] follows nested schemas: a harness's answer schema is a few
/// levels at most, and a hostile one must not recurse without end.
const SCHEMA_DEPTH: usize = 16;

/// The plainest value a JSON schema accepts: every property of an object, an enum's first value,
/// `""`, `0`, `false`, `[]`. Gemini CLI's loop check asks for
/// `{unproductive_state_analysis, unproductive_state_confidence}`: confidence 0 says the
/// conversation is not looping, which a script replaying its steps never is.
pub fn schema_instance(schema: &Value, depth: usize) -> Value {
    if depth >= SCHEMA_DEPTH {
        return Value::Null;
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object")
        .to_ascii_lowercase();
    match kind.as_str() {
        "string" => json!(""),
        "number" | "integer" => json!(0),
        "boolean" => json!(false),
        "array" => json!([]),
        "null" => Value::Null,
        _ => {
            let mut object = serde_json::Map::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, inner) in properties {
                    object.insert(name.clone(), schema_instance(inner, depth + 1));
                }
            }
            Value::Object(object)
        }
    }
}

/// The answer to `countTokens`: an estimate of four bytes a token, all a harness uses it for.
pub fn count_tokens(body_len: usize) -> Vec<u8> {
    json!({"totalTokens": body_len / 4})
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_the_model_and_the_method() {
        assert_eq!(
            route("/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
            Some(("gemini-2.5-flash".into(), Method::Stream))
        );
        assert_eq!(
            route("/v1beta/models/m:generateContent"),
            Some(("m".into(), Method::Generate))
        );
        assert_eq!(
            route("/v1beta/models/m:countTokens"),
            Some(("m".into(), Method::CountTokens))
        );
        assert_eq!(route("/v1beta/models/m:embedContent"), None);
        assert_eq!(route("/v1/messages"), None);
    }

    #[test]
    fn a_request_yields_offered_tools_and_calls_with_their_results() {
        let body = json!({
            "systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]},
            "tools": [{"functionDeclarations": [
                {"name": "read_file"}, {"name": "mcp_fs_read_text_file"}]}],
            "contents": [
                {"role": "user", "parts": [{"text": "context"}, {"text": "do task 1"}]},
                {"role": "model", "parts": [
                    {"text": "thinking", "thought": true},
                    {"functionCall": {"id": "c1", "name": "mcp_fs_read_text_file", "args": {"path": "a"}}},
                    {"functionCall": {"name": "read_file", "args": {"file_path": "b"}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "read_file", "response": {"error": "no such file"}}},
                    {"functionResponse": {"id": "c1", "name": "mcp_fs_read_text_file",
                        "response": {"output": "hello"}}}]}
            ]
        });
        let conv = parse(&body, "m", true);
        assert_eq!(conv.model.as_deref(), Some("m"));
        assert!(conv.offers("mcp_fs_read_text_file", None));
        assert_eq!(conv.system_chars, "You are Gemini CLI.".len());
        assert!(conv.user_text.contains("do task 1"));
        assert_eq!(conv.calls.len(), 2);
        let first = conv.calls[0].result.as_ref().unwrap();
        assert_eq!(
            (first.parts.as_slice(), first.is_error),
            (&["hello".to_string()][..], false)
        );
        assert_eq!(conv.calls[1].input, json!({"file_path": "b"}));
        let second = conv.calls[1].result.as_ref().unwrap();
        assert!(second.is_error);
        assert_eq!(second.parts, ["no such file"]);
    }

    #[test]
    fn a_side_request_with_a_schema_gets_its_plainest_instance() {
        let body = json!({
            "generationConfig": {"responseJsonSchema": {"type": "object", "properties": {
                "unproductive_state_analysis": {"type": "string"},
                "unproductive_state_confidence": {"type": "number"},
                "mode": {"type": "string", "enum": ["a", "b"]}}}},
            "contents": [{"role": "user", "parts": [{"text": "check"}]}]
        });
        let conv = parse(&body, "m", false);
        assert!(conv.is_auxiliary());
        let text = Action::Text { text: "x".into() };
        let (whole, _) = answer(&text, "m", 1, false, conv.response_schema.as_ref());
        let whole: Value = serde_json::from_slice(&whole).unwrap();
        let said = whole["candidates"][0]["content"]["parts"][0]["text"]
            .as_str()
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(said).unwrap(),
            json!({"unproductive_state_analysis": "", "unproductive_state_confidence": 0, "mode": "a"})
        );
        let mut deep = json!({"type": "string"});
        for _ in 0..100 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let _ = schema_instance(&deep, 0);
    }

    #[test]
    fn a_side_requests_prefixed_ids_name_the_same_calls() {
        let body = json!({"contents": [
            {"role": "model", "parts": [{"functionCall": {"id": "mcp_fs_x__c1", "name": "mcp_fs_x", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "mcp_fs_x__c1", "name": "mcp_fs_x",
                "response": {"output": "ok"}}}]}
        ]});
        let conv = parse(&body, "m", false);
        assert_eq!(conv.calls[0].id, "c1");
        assert!(conv.calls[0].result.is_some());
    }

    #[test]
    fn a_streamed_call_is_one_data_event_with_its_id_and_args() {
        let action = Action::Call {
            name: "mcp_fs_list_directory".into(),
            namespace: None,
            input: json!({"path": "src"}),
        };
        let (body, kind) = answer(&action, "m", 4, true, None);
        assert_eq!(kind, "text/event-stream");
        let text = String::from_utf8(body).unwrap();
        let data = text.strip_prefix("data: ").unwrap().trim_end();
        let event: Value = serde_json::from_str(data).unwrap();
        let call = &event["candidates"][0]["content"]["parts"][0]["functionCall"];
        assert_eq!(call["id"], "call_scripted_4");
        assert_eq!(call["args"], json!({"path": "src"}));
        let (whole, kind) = answer(
            &Action::Text {
                text: "done".into(),
            },
            "m",
            5,
            false,
            None,
        );
        assert_eq!(kind, "application/json");
        let whole: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(
            whole["candidates"][0]["content"]["parts"][0]["text"],
            "done"
        );
    }
}
