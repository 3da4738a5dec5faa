//! A model request as the script's replay sees it, whichever API it came in.

use serde::Serialize;
use serde_json::Value;

/// Which vendor API a request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// Anthropic's Messages API (Claude Code).
    Anthropic,
    /// OpenAI's Responses API (Codex CLI).
    Openai,
    /// Google's Gemini API, `generateContent` (Gemini CLI).
    Gemini,
}

/// One tool the harness offered the model with a schema, so the model may call it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offered {
    /// The name the model calls it by (for a namespace's tool, the name inside the namespace).
    pub name: String,
    /// The namespace tool it was offered in (Codex offers an MCP server's tools as one
    /// namespace, `mcp__<server>`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// One tool call of the conversation so far, with the result the harness passed back.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The call's id (ours: the harness echoes the id the model gave).
    pub id: String,
    /// The tool's name as called.
    pub name: String,
    /// The namespace it was called in, if any.
    pub namespace: Option<String>,
    /// The arguments.
    pub input: Value,
    /// What the harness passed back, if it has yet.
    pub result: Option<CallResult>,
}

/// A tool result as the model received it: the text blocks in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallResult {
    /// Each text block (an image or other block stands as a short placeholder).
    pub parts: Vec<String>,
    /// The harness marked the result as an error.
    pub is_error: bool,
}

impl CallResult {
    /// All text blocks, joined as the model reads them.
    pub fn text(&self) -> String {
        self.parts.join("\n")
    }
}

/// What one request to the model holds, in the terms the replay needs.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    /// The model asked for.
    pub model: Option<String>,
    /// Whether the answer is to be streamed (server-sent events).
    pub stream: bool,
    /// Every tool offered with a schema.
    pub offered: Vec<Offered>,
    /// Tools the harness named but deferred behind a discovery tool (Claude Code lists them in
    /// a message and loads a schema only when the model calls `ToolSearch`).
    pub deferred: Vec<String>,
    /// The characters of system text (system prompt, developer messages, instructions).
    pub system_chars: usize,
    /// The text of every user message, joined: where a script's `when` is looked for.
    pub user_text: String,
    /// Every tool call so far, in order.
    pub calls: Vec<Call>,
    /// The JSON schema the answer must follow, when the harness asked for one (Gemini CLI's side
    /// requests, e.g. its loop check, set `generationConfig.responseJsonSchema`).
    pub response_schema: Option<Value>,
}

impl Conversation {
    /// True when a tool of this name (in this namespace, if given) was offered with a schema.
    pub fn offers(&self, name: &str, namespace: Option<&str>) -> bool {
        self.offered
            .iter()
            .any(|o| o.name == name && o.namespace.as_deref() == namespace)
    }

    /// True for the harness's own requests beside the agent loop (titles, quota probes, side
    /// questions): they offer no tools, while every turn of the loop does.
    pub fn is_auxiliary(&self) -> bool {
        self.offered.is_empty()
    }
}

/// The text of a content value that is either a string or a list of blocks (`{type: "text",
/// text}` in Anthropic's API, `{type: "input_text"|"output_text", text}` in OpenAI's), one
/// entry per block.
pub fn text_parts(content: &Value) -> Vec<String> {
    match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b.get("text").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None => format!(
                    "[{} block]",
                    b.get("type").and_then(Value::as_str).unwrap_or("unknown")
                ),
            })
            .collect(),
        Value::Null => Vec::new(),
        other => vec![other.to_string()],
    }
}
