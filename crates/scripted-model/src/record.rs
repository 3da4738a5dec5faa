//! What the endpoint keeps of each request: enough for a test (or a study) to say what the model
//! was offered and what it received, without keeping whole bodies (a long paging conversation
//! resends every earlier page with each request).

use serde::Serialize;
use serde_json::Value;

use crate::conversation::{Api, Offered};
use crate::script::Action;

/// How a request was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A turn of the agent loop, answered from the script.
    Turn,
    /// A harness's side request (a title, a quota probe, a question without tools), answered
    /// with a short text so the script is not disturbed.
    Auxiliary,
    /// A token count (`/v1/messages/count_tokens`).
    CountTokens,
    /// A path neither API has; answered 404.
    Unknown,
}

/// One tool result as the model first received it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResultSeen {
    /// The call's id.
    pub call_id: String,
    /// The tool's name as called.
    pub name: String,
    /// Its namespace, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The arguments it was called with.
    pub input: Value,
    /// The text blocks the harness passed back.
    pub parts: Vec<String>,
    /// The harness marked it as an error.
    pub is_error: bool,
}

impl ToolResultSeen {
    /// All text blocks, joined.
    pub fn text(&self) -> String {
        self.parts.join("\n")
    }
}

/// One request and its answer.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Its place among all requests this endpoint took, from 0.
    pub seq: u64,
    /// The API, when the path named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    /// `POST`, `GET`, …
    pub method: String,
    /// The path and query.
    pub target: String,
    /// How it was taken.
    pub kind: Kind,
    /// The model asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The harness's `user-agent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The script that answered, by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// The tools offered with a schema.
    pub offered: Vec<Offered>,
    /// The tools named but deferred behind a discovery tool.
    pub deferred: Vec<String>,
    /// Characters of system text.
    pub system_chars: usize,
    /// Bytes of the request's body.
    pub body_bytes: usize,
    /// The tool calls the conversation held.
    pub calls_so_far: usize,
    /// The results this request carried that no earlier request did.
    pub new_results: Vec<ToolResultSeen>,
    /// The answer, for a turn or a side request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<Action>,
    /// Why the conversation left the script, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diverged: Option<String>,
}
