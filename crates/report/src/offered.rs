//! What a harness offered the model: the tools sent with their schemas, the tools only named and
//! deferred behind a discovery tool, MCP servers' tools offered as one namespace, whether this
//! project's server `instructions` reached the model, and the size of the system text.
//!
//! Whether a model adopts an interface depends on how its harness presents it (Claude Code lists
//! an MCP server's tools by name and loads a schema only after a `ToolSearch` call; Codex CLI
//! offers the server as one namespace tool with every schema), so a study records this per trial.
//! One parser, [`parse_request`], reads a model request body of each API; it is fed by both
//! sources there are: a harness's own records of its requests (Claude Code's transcript lines
//! `api-request-shape`, read by [`ClaudeRecords`]) and the study runner's recording relay.
//!
//! Only names, flags and sizes are kept: never message text, arguments or credentials.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::classify::{classify_gemini_name, classify_transcript_name, ServerFilter};

/// Most tool names kept per list: far above any harness's tool count, so only hostile input
/// meets it.
pub const MAX_TOOLS: usize = 1000;

/// Longest tool name kept, in bytes; a longer one is cut (names are identifiers, a few dozen
/// bytes).
pub const MAX_NAME_BYTES: usize = 256;

/// The sentence Claude Code puts before the names of tools whose schemas it has not sent (one
/// name a line after it, up to an empty line), as of 2.1.332.
const CLAUDE_DEFERRED_MARKER: &str = "deferred tools are now available via ToolSearch";

/// How each of this project's instructions begins (the filesystem mode's, shelpa's modern and
/// original surfaces'): text holding one of these is the server's `instructions` reaching the
/// model. The unit tests hold each to the toolset's own text.
pub const INSTRUCTION_OPENINGS: [&str; 3] = [
    "File access confined to one workspace, with nothing lost",
    "shelpa is a virtual pipeline shell over one workspace",
    "shelpa-mcp (MCP stdio server)",
];

/// The vendor API of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// Anthropic Messages (`/v1/messages`): Claude Code.
    Anthropic,
    /// OpenAI Responses (`/v1/responses`): Codex CLI.
    Openai,
    /// Gemini `generateContent` / `streamGenerateContent`: Gemini CLI.
    Gemini,
}

impl Api {
    /// The API a request path is for, or `None` for a path that is not a model turn.
    pub fn from_path(path: &str) -> Option<Api> {
        let path = path.split('?').next().unwrap_or("");
        if path.ends_with("/messages") {
            Some(Api::Anthropic)
        } else if path.ends_with("/responses") {
            Some(Api::Openai)
        } else if path.contains(":generateContent") || path.contains(":streamGenerateContent") {
            Some(Api::Gemini)
        } else {
            None
        }
    }
}

/// One tool as a request offered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tool {
    /// The name the model calls it by (inside its namespace, for a namespace's tool).
    pub name: String,
    /// The namespace tool holding it (Codex: `mcp__<server>`), if any.
    pub namespace: Option<String>,
    /// True when the request names it without its schema (Anthropic `defer_loading`), so the
    /// model must load it through a discovery call first.
    pub deferred: bool,
}

/// What one request offered, as [`parse_request`] reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestOffered {
    /// The tools in the request's tool list.
    pub tools: Vec<Tool>,
    /// Tools only named in the request's text as deferred (Claude Code's list).
    pub named_deferred: Vec<String>,
    /// Characters of system text (system prompt, instructions, developer/system messages).
    pub system_chars: u64,
    /// True when one of this project's [`INSTRUCTION_OPENINGS`] is in the system text, a
    /// message's text or a tool's description.
    pub instructions_seen: bool,
}

/// How this project's tools reached the model in a trial's first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Presentation {
    /// Every one with its schema, as a tool of its own.
    UpFront,
    /// Named only, each loaded through a discovery call before its first use.
    Deferred,
    /// Inside a namespace tool, with their schemas.
    Namespaced,
    /// Some one way, some another.
    Mixed,
    /// None was offered (an arm without the server, or a harness that dropped it).
    NotOffered,
}

impl Presentation {
    /// The name used in every output format.
    pub fn as_str(self) -> &'static str {
        match self {
            Presentation::UpFront => "up_front",
            Presentation::Deferred => "deferred",
            Presentation::Namespaced => "namespaced",
            Presentation::Mixed => "mixed",
            Presentation::NotOffered => "not_offered",
        }
    }
}

/// What a trial's model was offered: the trial record's and `offered.json`'s summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offered {
    /// Where it was read: `claude_code_transcript` or `relay`.
    pub source: String,
    /// The API of the requests read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    /// Model requests read (turns of the agent loop; requests offering no tool are the
    /// harness's side requests and are left out).
    pub requests: u64,
    /// Tools sent with their schemas in the first request (`namespace/name` for a
    /// namespace's tool).
    pub with_schema: Vec<String>,
    /// Tools named but deferred in the first request.
    pub deferred: Vec<String>,
    /// Namespace tools of the first request.
    pub namespaces: Vec<String>,
    /// Tools listed in a later request only (loaded by a discovery call).
    pub loaded_later: Vec<String>,
    /// True when this project's server instructions reached the model in any request.
    pub instructions_seen: bool,
    /// Characters of system text in the first request.
    pub system_chars: u64,
    /// This project's tools in the first request: with schemas as tools of their own.
    pub ours_up_front: u64,
    /// ... named but deferred.
    pub ours_deferred: u64,
    /// ... inside a namespace tool.
    pub ours_namespaced: u64,
    /// The three counts in a word.
    pub presentation: Presentation,
}

/// Reads a request body of `api` into what it offered. Unknown shapes yield an empty result,
/// never a guess.
pub fn parse_request(api: Api, body: &Value) -> RequestOffered {
    let mut out = RequestOffered::default();
    match api {
        Api::Anthropic => anthropic(body, &mut out),
        Api::Openai => openai(body, &mut out),
        Api::Gemini => gemini(body, &mut out),
    }
    out
}

fn anthropic(body: &Value, out: &mut RequestOffered) {
    for tool in array(body, "tools") {
        if let Some(name) = tool.get("name").and_then(Value::as_str) {
            push_tool(
                out,
                name,
                None,
                tool.get("defer_loading").and_then(Value::as_bool) == Some(true),
            );
            note_text(out, tool.get("description"));
        }
    }
    if let Some(system) = body.get("system") {
        for text in texts(system) {
            out.system_chars += text.chars().count() as u64;
            read_text(out, text);
        }
    }
    for message in array(body, "messages") {
        let content = message.get("content").unwrap_or(&Value::Null);
        let system = message.get("role").and_then(Value::as_str) == Some("system");
        for text in texts(content) {
            if system {
                out.system_chars += text.chars().count() as u64;
            }
            read_text(out, text);
        }
    }
}

fn openai(body: &Value, out: &mut RequestOffered) {
    if let Some(text) = body.get("instructions").and_then(Value::as_str) {
        out.system_chars += text.chars().count() as u64;
        read_text(out, text);
    }
    for tool in array(body, "tools") {
        openai_tool(out, tool);
    }
    for item in array(body, "input") {
        // Codex 0.171.0 defers an MCP namespace behind `tool_search` for a model it knows: the
        // first request offers only `tool_search`, and each later request carries what a
        // search loaded as a `tool_search_output` item.
        if item.get("type").and_then(Value::as_str) == Some("tool_search_output") {
            for tool in array(item, "tools") {
                openai_tool(out, tool);
            }
            continue;
        }
        let role = item.get("role").and_then(Value::as_str);
        let Some(content) = item.get("content") else {
            continue;
        };
        for text in texts(content) {
            if matches!(role, Some("system" | "developer")) {
                out.system_chars += text.chars().count() as u64;
            }
            read_text(out, text);
        }
    }
}

/// One tool definition of the Responses API: a function, a client-run tool (`tool_search`, by
/// its type), or a namespace holding tools.
fn openai_tool(out: &mut RequestOffered, tool: &Value) {
    // Codex's client-run `tool_search` has a type and no name.
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .or_else(|| tool.get("type").and_then(Value::as_str));
    let Some(name) = name else { return };
    note_text(out, tool.get("description"));
    let deferred = tool.get("defer_loading").and_then(Value::as_bool) == Some(true);
    match tool.get("tools").and_then(Value::as_array) {
        Some(inner) => {
            for t in inner {
                if let Some(inner_name) = t.get("name").and_then(Value::as_str) {
                    let inner_deferred =
                        t.get("defer_loading").and_then(Value::as_bool) == Some(true);
                    push_tool(out, inner_name, Some(name), deferred || inner_deferred);
                    note_text(out, t.get("description"));
                }
            }
        }
        None => push_tool(out, name, None, deferred),
    }
}

fn gemini(body: &Value, out: &mut RequestOffered) {
    let system = body
        .get("systemInstruction")
        .or_else(|| body.get("system_instruction"));
    for part in system.map(|s| array(s, "parts")).into_iter().flatten() {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            out.system_chars += text.chars().count() as u64;
            read_text(out, text);
        }
    }
    for tool in array(body, "tools") {
        let decls = tool
            .get("functionDeclarations")
            .or_else(|| tool.get("function_declarations"));
        for decl in decls.and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = decl.get("name").and_then(Value::as_str) {
                push_tool(out, name, None, false);
                note_text(out, decl.get("description"));
            }
        }
    }
    for content in array(body, "contents") {
        for part in array(content, "parts") {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                read_text(out, text);
            }
        }
    }
}

/// The array under `key`, or nothing.
fn array<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// The texts of a content value: a string, or blocks with a `text`.
fn texts(content: &Value) -> Vec<&str> {
    match content {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

fn clip(name: &str) -> String {
    let mut end = name.len().min(MAX_NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

fn push_tool(out: &mut RequestOffered, name: &str, namespace: Option<&str>, deferred: bool) {
    if out.tools.len() < MAX_TOOLS {
        out.tools.push(Tool {
            name: clip(name),
            namespace: namespace.map(clip),
            deferred,
        });
    }
}

fn note_text(out: &mut RequestOffered, text: Option<&Value>) {
    if let Some(text) = text.and_then(Value::as_str) {
        out.instructions_seen |= has_instructions(text);
    }
}

fn has_instructions(text: &str) -> bool {
    INSTRUCTION_OPENINGS.iter().any(|o| text.contains(o))
}

/// Notes the instructions and Claude Code's list of deferred tools in a text.
fn read_text(out: &mut RequestOffered, text: &str) {
    out.instructions_seen |= has_instructions(text);
    let Some(at) = text.find(CLAUDE_DEFERRED_MARKER) else {
        return;
    };
    let after = &text[at..];
    // The names start on the line after the sentence and end at the first empty line.
    for line in after.lines().skip(1) {
        let name = line.trim();
        if name.is_empty() {
            break;
        }
        if name.contains(char::is_whitespace) {
            continue;
        }
        if out.named_deferred.len() < MAX_TOOLS && !out.named_deferred.iter().any(|d| d == name) {
            out.named_deferred.push(clip(name));
        }
    }
}

fn shown(tool: &Tool) -> String {
    match &tool.namespace {
        Some(ns) => format!("{ns}/{}", tool.name),
        None => tool.name.clone(),
    }
}

/// True when `name` (in `namespace`) is one of this project's tools under a server `servers`
/// admits, as a request of `api` names it: Gemini CLI declares an MCP tool as
/// `mcp_<server>_<tool>`, Claude Code and Codex as `mcp__<server>__<tool>` (or the tool inside
/// the `mcp__<server>` namespace).
fn is_ours(api: Option<Api>, name: &str, namespace: Option<&str>, servers: &ServerFilter) -> bool {
    if api == Some(Api::Gemini) && namespace.is_none() {
        return classify_gemini_name(name, servers).interface.is_ours();
    }
    let full = match namespace {
        Some(ns) => format!("{ns}__{name}"),
        None => name.to_string(),
    };
    classify_transcript_name(&full, servers).interface.is_ours()
}

/// Adds up a trial's requests, in order, into its [`Offered`].
#[derive(Debug)]
pub struct Summary {
    source: &'static str,
    api: Option<Api>,
    first: Option<RequestOffered>,
    later: Vec<String>,
    requests: u64,
    instructions_seen: bool,
}

impl Summary {
    /// An empty summary of requests read from `source`.
    pub fn new(source: &'static str) -> Summary {
        Summary {
            source,
            api: None,
            first: None,
            later: Vec::new(),
            requests: 0,
            instructions_seen: false,
        }
    }

    /// Adds one request. A request offering no tool is a harness's side request (a title, a
    /// quota probe), not a turn of the agent loop, and is left out.
    pub fn add(&mut self, api: Api, request: RequestOffered) {
        if request.tools.is_empty() {
            return;
        }
        self.requests += 1;
        self.api.get_or_insert(api);
        self.instructions_seen |= request.instructions_seen;
        match &self.first {
            None => self.first = Some(request),
            Some(first) => {
                // A tool in a later request's list that the first did not list at all was
                // loaded by a discovery call (Claude Code and Codex both keep marking such a
                // tool `defer_loading`, so the flag alone does not tell).
                // A tool first listed deferred and now with its schema was loaded too.
                for tool in &request.tools {
                    let name = shown(tool);
                    let before = first.tools.iter().find(|f| shown(f) == name);
                    let loaded = match before {
                        None => true,
                        Some(f) => f.deferred && !tool.deferred,
                    };
                    if loaded && self.later.len() < MAX_TOOLS && !self.later.contains(&name) {
                        self.later.push(name);
                    }
                }
            }
        }
    }

    /// The summary, or `None` when no request was read.
    pub fn finish(self, servers: &ServerFilter) -> Option<Offered> {
        let first = self.first?;
        let mut with_schema = Vec::new();
        let mut deferred = first.named_deferred.clone();
        let mut namespaces: Vec<String> = Vec::new();
        let (mut up_front, mut namespaced) = (0u64, 0u64);
        for tool in &first.tools {
            if let Some(ns) = &tool.namespace {
                if !namespaces.contains(ns) {
                    namespaces.push(ns.clone());
                }
            }
            if tool.deferred {
                if !deferred.contains(&shown(tool)) {
                    deferred.push(shown(tool));
                }
                continue;
            }
            with_schema.push(shown(tool));
            if is_ours(self.api, &tool.name, tool.namespace.as_deref(), servers) {
                if tool.namespace.is_some() {
                    namespaced += 1;
                } else {
                    up_front += 1;
                }
            }
        }
        // Deferred: named without a schema in the first request, or not offered in it at all
        // and loaded by a later one (through a discovery call).
        let mut behind_discovery: Vec<&String> = deferred.iter().collect();
        for name in &self.later {
            if !behind_discovery.contains(&name) {
                behind_discovery.push(name);
            }
        }
        let ours_deferred = behind_discovery
            .iter()
            .filter(|d| match d.split_once('/') {
                Some((ns, name)) => is_ours(self.api, name, Some(ns), servers),
                None => is_ours(self.api, d, None, servers),
            })
            .count() as u64;
        let presentation = match (up_front > 0, ours_deferred > 0, namespaced > 0) {
            (false, false, false) => Presentation::NotOffered,
            (true, false, false) => Presentation::UpFront,
            (false, true, false) => Presentation::Deferred,
            (false, false, true) => Presentation::Namespaced,
            _ => Presentation::Mixed,
        };
        Some(Offered {
            source: self.source.to_string(),
            api: self.api,
            requests: self.requests,
            with_schema,
            deferred,
            namespaces,
            loaded_later: self.later,
            instructions_seen: self.instructions_seen,
            system_chars: first.system_chars,
            ours_up_front: up_front,
            ours_deferred,
            ours_namespaced: namespaced,
            presentation,
        })
    }
}

/// Reads Claude Code's own records of its requests from its transcript lines: each
/// `api-request-shape` line holds a request's `system` and `tools` (as of 2.1.332), and the
/// `api-request-blob` lines the messages, among them the system message listing the deferred
/// tools and the server instructions. Other lines are not looked at.
#[derive(Debug)]
pub struct ClaudeRecords {
    summary: Summary,
    /// Deferred names and instructions seen in message blobs, which belong to the session
    /// rather than to one request shape.
    blobs: RequestOffered,
}

impl Default for ClaudeRecords {
    fn default() -> Self {
        ClaudeRecords {
            summary: Summary::new("claude_code_transcript"),
            blobs: RequestOffered::default(),
        }
    }
}

impl ClaudeRecords {
    /// Reads one transcript line (any type; only the two request record types are used).
    pub fn line(&mut self, line: &Value) {
        match line.get("type").and_then(Value::as_str) {
            Some("api-request-shape") => {
                if let Some(shape) = line.get("shape") {
                    self.summary
                        .add(Api::Anthropic, parse_request(Api::Anthropic, shape));
                }
            }
            Some("api-request-blob") => {
                if let Some(message) = line.get("message") {
                    let one = serde_json::json!({ "messages": [message] });
                    let seen = parse_request(Api::Anthropic, &one);
                    self.blobs.instructions_seen |= seen.instructions_seen;
                    self.blobs.system_chars += seen.system_chars;
                    for name in seen.named_deferred {
                        if self.blobs.named_deferred.len() < MAX_TOOLS
                            && !self.blobs.named_deferred.contains(&name)
                        {
                            self.blobs.named_deferred.push(name);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The summary, or `None` when the transcript held no request records (an older Claude
    /// Code, or another harness).
    pub fn finish(mut self, servers: &ServerFilter) -> Option<Offered> {
        if let Some(first) = &mut self.summary.first {
            for name in &self.blobs.named_deferred {
                if !first.named_deferred.contains(name) {
                    first.named_deferred.push(name.clone());
                }
            }
            // The system messages are part of what the model reads as system text.
            first.system_chars += self.blobs.system_chars;
        }
        self.summary.instructions_seen |= self.blobs.instructions_seen;
        self.summary.finish(servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openings_are_how_the_toolsets_instructions_begin() {
        use shelpa::surface::{ShelpaTools, Surface};
        for set in [ShelpaTools::Pipe, ShelpaTools::Help, ShelpaTools::All] {
            assert!(shelpa::help::instructions(Surface::Modern, set)
                .starts_with(INSTRUCTION_OPENINGS[1]));
            assert!(shelpa::help::instructions(Surface::Original, set)
                .starts_with(INSTRUCTION_OPENINGS[2]));
        }
    }

    #[test]
    fn claude_code_deferral_is_read_from_the_listing_and_defer_loading() {
        let listing = "The following deferred tools are now available via ToolSearch. Use it:\nWebFetch\nmcp__fs__read_text_file\n\n# MCP Server Instructions\n## fs\nFile access confined to one workspace, with nothing lost: prefer";
        let body = json!({
            "system": [{"type": "text", "text": "be brief"}],
            "tools": [
                {"name": "Read", "description": "reads", "input_schema": {}},
                {"name": "ToolSearch", "input_schema": {}},
                {"name": "mcp__fs__list_directory", "defer_loading": true, "input_schema": {}}
            ],
            "messages": [{"role": "system", "content": [{"type": "text", "text": listing}]}]
        });
        let r = parse_request(Api::Anthropic, &body);
        assert_eq!(r.named_deferred, ["WebFetch", "mcp__fs__read_text_file"]);
        assert!(r.instructions_seen);
        assert_eq!(r.system_chars, 8 + listing.chars().count() as u64);
        let mut s = Summary::new("relay");
        s.add(Api::Anthropic, r);
        let o = s.finish(&ServerFilter::default()).unwrap();
        assert_eq!(o.with_schema, ["Read", "ToolSearch"]);
        assert_eq!(
            o.deferred,
            [
                "WebFetch",
                "mcp__fs__read_text_file",
                "mcp__fs__list_directory"
            ]
        );
        assert_eq!(
            (o.ours_up_front, o.ours_deferred, o.ours_namespaced),
            (0, 2, 0)
        );
        assert_eq!(o.presentation, Presentation::Deferred);
    }

    #[test]
    fn a_codex_namespace_is_namespaced_with_its_description_as_instructions() {
        let body = json!({
            "instructions": "sys",
            "tools": [
                {"type": "function", "name": "exec_command"},
                {"type": "tool_search"},
                {"type": "namespace", "name": "mcp__filesystem",
                 "description": "shelpa is a virtual pipeline shell over one workspace. Send",
                 "tools": [{"name": "shelpa_pipe"}, {"name": "shelpa_write"}]}
            ],
            "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]}]
        });
        let r = parse_request(Api::Openai, &body);
        assert!(r.instructions_seen);
        assert_eq!(r.system_chars, 6);
        let mut s = Summary::new("relay");
        s.add(Api::Openai, r);
        let o = s.finish(&ServerFilter::default()).unwrap();
        assert_eq!(o.namespaces, ["mcp__filesystem"]);
        assert_eq!(o.ours_namespaced, 2);
        assert_eq!(o.presentation, Presentation::Namespaced);
        assert!(o.with_schema.contains(&"tool_search".to_string()));
    }

    #[test]
    fn gemini_declarations_are_up_front_and_side_requests_are_left_out() {
        let body = json!({
            "systemInstruction": {"parts": [{"text": "abc"}]},
            "tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "write_file"},
                {"name": "mcp_filesystem_read_text_file"}, {"name": "mcp_other_write_file"}]}],
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}]
        });
        let mut s = Summary::new("relay");
        s.add(
            Api::Gemini,
            parse_request(Api::Gemini, &json!({"contents": []})),
        );
        s.add(Api::Gemini, parse_request(Api::Gemini, &body));
        // Gemini's own write_file is a built-in, another server's is not ours: one of ours.
        let only = ServerFilter {
            names: vec!["filesystem".into()],
        };
        let o = s.finish(&only).unwrap();
        assert_eq!(o.requests, 1);
        assert_eq!(o.system_chars, 3);
        assert_eq!(o.ours_up_front, 1);
        assert_eq!(o.presentation, Presentation::UpFront);
        assert!(!o.instructions_seen);
    }

    #[test]
    fn a_schema_loaded_by_a_later_request_is_loaded_later() {
        let first = json!({"tools": [{"name": "ToolSearch"}, {"name": "mcp__fs__edit_file", "defer_loading": true}]});
        let second = json!({"tools": [{"name": "ToolSearch"}, {"name": "mcp__fs__edit_file"}]});
        let mut s = Summary::new("relay");
        s.add(Api::Anthropic, parse_request(Api::Anthropic, &first));
        s.add(Api::Anthropic, parse_request(Api::Anthropic, &second));
        let o = s.finish(&ServerFilter::default()).unwrap();
        assert_eq!(o.loaded_later, ["mcp__fs__edit_file"]);
        assert_eq!(o.requests, 2);
    }

    #[test]
    fn a_codex_namespace_loaded_by_tool_search_is_deferred() {
        let first = json!({"tools": [{"type": "function", "name": "exec_command"}, {"type": "tool_search"}]});
        let second = json!({
            "tools": [{"type": "function", "name": "exec_command"}, {"type": "tool_search"}],
            "input": [
                {"type": "tool_search_call", "call_id": "c1", "arguments": {"query": "files"}},
                {"type": "tool_search_output", "call_id": "c1", "tools": [
                    {"type": "namespace", "name": "mcp__filesystem",
                     "tools": [{"type": "function", "name": "read_text_file"}]}]}
            ]
        });
        let mut s = Summary::new("relay");
        s.add(Api::Openai, parse_request(Api::Openai, &first));
        s.add(Api::Openai, parse_request(Api::Openai, &second));
        let o = s.finish(&ServerFilter::default()).unwrap();
        assert_eq!(o.loaded_later, ["mcp__filesystem/read_text_file"]);
        assert_eq!(
            (o.ours_up_front, o.ours_deferred, o.ours_namespaced),
            (0, 1, 0)
        );
        assert_eq!(o.presentation, Presentation::Deferred);
    }

    #[test]
    fn api_from_path() {
        assert_eq!(
            Api::from_path("/v1/messages?beta=true"),
            Some(Api::Anthropic)
        );
        assert_eq!(Api::from_path("/v1/responses"), Some(Api::Openai));
        assert_eq!(
            Api::from_path("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"),
            Some(Api::Gemini)
        );
        assert_eq!(Api::from_path("/v1/messages/count_tokens"), None);
    }
}
