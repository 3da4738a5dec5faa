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
                    id: str_field(call, "id"),
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
    let id = str_field(response, "id");
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

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The answer, as the body to send and its content type: one `data:` event when streamed, the
/// object itself otherwise. `id` names the response and a call.
pub fn answer(action: &Action, model: &str, id: u64, stream: bool) -> (Vec<u8>, &'static str) {
    let part = match action {
        Action::Text { text } => json!({"text": text}),
        Action::Call { name, input, .. } => json!({"functionCall": {
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
    fn a_streamed_call_is_one_data_event_with_its_id_and_args() {
        let action = Action::Call {
            name: "mcp_fs_list_directory".into(),
            namespace: None,
            input: json!({"path": "src"}),
        };
        let (body, kind) = answer(&action, "m", 4, true);
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
        );
        assert_eq!(kind, "application/json");
        let whole: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(
            whole["candidates"][0]["content"]["parts"][0]["text"],
            "done"
        );
    }
}
