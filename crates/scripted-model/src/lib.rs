//! A scripted model endpoint: the model's side of an agent harness, played by a script.
//!
//! Real agent harnesses take a base URL for their model: Claude Code `ANTHROPIC_BASE_URL` (the
//! Messages API, streamed as server-sent events), Codex CLI a `model_providers` entry's `base_url`
//! (the Responses API, streamed the same way), Gemini CLI `GOOGLE_GEMINI_BASE_URL` (the Gemini
//! API's `generateContent`). [`ScriptedModel`] listens on 127.0.0.1 at an ephemeral port and
//! answers all three. Each request carries the whole conversation so far, so the
//! answer is worked out from the request alone ([`script::next_action`]): the script is replayed
//! against the tool calls the conversation already holds, and the first step not yet taken is the
//! answer. A harness that retries a request gets the same answer again, and several sessions can
//! share one endpoint.
//!
//! What the harness sent is kept as [`record::Record`]s: which tools it offered (and which it
//! deferred behind a discovery tool such as Claude Code's `ToolSearch`), the tool results it
//! passed back, and what was answered, so a test can assert on what the model saw.
//!
//! - [`script`]: the steps (call a tool, keep paging, finish) and the replay.
//! - [`conversation`]: a request as the replay sees it, whichever API it came in.
//! - [`anthropic`], [`openai`], [`gemini`]: reading each API's request and writing its streamed answer.
//! - [`continuation`]: reading a cut answer's note (`continue with offset=…`/`cursor="…"`).
//! - [`http`]: the little HTTP/1.1 the harnesses speak.
//! - [`server`]: the listener, its threads and the records.

pub mod anthropic;
pub mod continuation;
pub mod conversation;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod record;
pub mod script;
pub mod server;

pub use record::{Record, ToolResultSeen};
pub use script::{Script, Step, ToolRef};
pub use server::{ScriptedModel, StartError};
