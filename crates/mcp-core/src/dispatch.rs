//! Which method does what: turning one frame into a reply, a job for the workers, or nothing.
//!
//! The dispatcher runs on the reader thread and holds the session state (the handshake's client,
//! the tool list). Everything that can be answered without running a tool is answered here, at
//! once, so a `ping` or a `notifications/cancelled` is never stuck behind a slow call; a
//! `tools/call` is checked (tool name, arguments, request id) and handed on as a [`Job`].

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::batch::{self, Parsed};
use super::executor::{BatchItem, CallJob, InFlight, Job};
use super::message::{self, classify, code, Incoming, RequestId};
use super::peer::{ClientEvent, Peer};
use super::protocol::{self, ClientInfo, Revision, CACHE_TTL_MS, META_PROTOCOL_VERSION};
use super::schedule::Lane;
use super::wire::{Frame, Framing};
use crate::toolset::{ToolDef, Toolset};

/// What dispatching one message asks for.
pub enum Step {
    /// Send this message now.
    Reply(Value),
    /// Send this message, already serialised, now (a batch's answer, written member by member).
    Frame(Vec<u8>),
    /// Queue this job for the workers; its reply comes from them.
    Run(Job),
    /// Nothing to answer (a notification, a response).
    Nothing,
}

/// The session state and the dispatch rules of the protocol.
pub struct Dispatcher {
    toolset: Arc<dyn Toolset>,
    /// Built on first use: `initialize` does not need them, and start-up is on the clock.
    tools: Option<Vec<ToolDef>>,
    instructions: String,
    /// How many tools one `tools/list` page holds.
    page_size: usize,
    /// The framing's message limit, quoted when a message over it is refused.
    max_message_bytes: usize,
    /// Set once a handshake-era client has sent `initialize`.
    /// Shared with every call of the session rather than copied into each.
    session: Option<Arc<ClientInfo>>,
    /// The capabilities the handshake-era client declared in `initialize` (`roots`, …), told to
    /// the toolset once the handshake is complete.
    capabilities: Value,
    in_flight: InFlight,
    /// Sends the server's own requests and routes their answers; attached once the writer runs
    /// (the first message is answered before it exists and is never a response).
    peer: Option<Peer>,
}

impl Dispatcher {
    /// A dispatcher for a new session, before any message.
    pub fn new(
        toolset: Arc<dyn Toolset>,
        page_size: usize,
        max_message_bytes: usize,
        in_flight: InFlight,
    ) -> Self {
        Dispatcher {
            tools: None,
            instructions: toolset.instructions(),
            toolset,
            page_size,
            max_message_bytes,
            session: None,
            capabilities: Value::Object(Map::new()),
            in_flight,
            peer: None,
        }
    }

    /// Lets the dispatcher send requests to the client and route their answers (see
    /// [`Peer`]); until then responses are ignored and the toolset hears no client events.
    pub fn attach(&mut self, peer: Peer) {
        self.peer = Some(peer);
    }

    /// The toolset's tools, built on first use.
    fn tools(&mut self) -> &[ToolDef] {
        let toolset = &self.toolset;
        self.tools.get_or_insert_with(|| toolset.tools())
    }

    /// Turns one frame into what to do about it: a reply, a job for the workers, or nothing.
    pub fn handle_frame(&mut self, frame: Frame, framing: Framing) -> Step {
        let bytes = match frame {
            Frame::Message(bytes) => bytes,
            Frame::TooLarge => {
                return Step::Reply(message::error(
                    &Value::Null,
                    code::INVALID_REQUEST,
                    format!(
                        "message larger than the limit of {} bytes was discarded; send smaller messages (e.g. split a large write)",
                        self.max_message_bytes
                    ),
                    None,
                ))
            }
            Frame::BadHeader(why) => {
                return Step::Reply(message::error(&Value::Null, code::PARSE_ERROR, why, None))
            }
        };
        match batch::parse(&bytes) {
            Ok(Parsed::Batch(items)) => self.batch(Ok(items), framing),
            Ok(Parsed::TooLong(count)) => self.batch(Err(count), framing),
            Ok(Parsed::Single(single)) => self.dispatch(single, framing),
            Err(e) => Step::Reply(message::error(
                &Value::Null,
                code::PARSE_ERROR,
                format!("not valid JSON: {e}"),
                None,
            )),
        }
    }

    /// The lane a job runs in: a call's toolset names it; a batch runs alone.
    pub fn lane(&self, job: &Job) -> Lane {
        match job {
            Job::Call(call) => Lane::Key(self.toolset.lane(&call.name, &call.args)),
            Job::Batch(..) => Lane::Barrier,
        }
    }

    /// Dispatches one message (not a batch).
    fn dispatch(&mut self, value: Value, framing: Framing) -> Step {
        match classify(value) {
            Incoming::Response { id, outcome } => {
                if let Some(peer) = &self.peer {
                    peer.deliver(&id, outcome);
                }
                Step::Nothing
            }
            Incoming::Invalid { id, message } => {
                Step::Reply(message::error(&id, code::INVALID_REQUEST, message, None))
            }
            Incoming::Notification { method, params } => {
                self.notification(&method, &params);
                Step::Nothing
            }
            Incoming::Request { id, method, params } => self.request(id, &method, params, framing),
        }
    }

    /// JSON-RPC batches exist only in protocol 2025-03-26; every other revision forbids them. A
    /// batch whose members need no tool is answered at once; one with calls becomes a job, so its
    /// calls take effect in their turn after what was received before it. `items` is `Err` with
    /// the count of a batch longer than [`batch::MAX_MEMBERS`], refused whole. Replies known now
    /// are serialised at once and counted against [`batch::MAX_REPLY_BYTES`], so a batch of many
    /// `tools/list` holds its answer, not a tree per member.
    fn batch(&mut self, items: Result<Vec<Value>, usize>, framing: Framing) -> Step {
        if self.session.as_ref().map(|s| s.revision) != Some(Revision::V2025_03_26) {
            return Step::Reply(message::error(
                &Value::Null,
                code::INVALID_REQUEST,
                "JSON-RPC batches are only part of protocol 2025-03-26; send one message at a time",
                None,
            ));
        }
        let items = match items {
            Ok(items) => items,
            Err(count) => return Step::Reply(batch::too_long(count)),
        };
        if items.is_empty() {
            return Step::Reply(message::error(
                &Value::Null,
                code::INVALID_REQUEST,
                "empty batch",
                None,
            ));
        }
        let mut members = Vec::new();
        // The bytes of the replies known so far: past the bound, the rest are refused here too.
        let mut ready = 0usize;
        for item in items {
            let id = item.get("id").cloned().unwrap_or(Value::Null);
            let step = if item.get("method") == Some(&json!("initialize")) {
                Step::Reply(message::error(
                    &id,
                    code::INVALID_REQUEST,
                    "initialize must not be part of a batch",
                    None,
                ))
            } else if ready >= batch::MAX_REPLY_BYTES
                && item.get("id").is_some()
                && item.get("method").is_some()
            {
                // A request not even dispatched (a call would be registered, a list built).
                // Notifications and responses still go through: they have no reply to bound.
                members.push(BatchItem::Refused(id));
                continue;
            } else {
                self.dispatch(item, framing)
            };
            let reply = match step {
                Step::Reply(r) => serde_json::to_vec(&r).unwrap_or_default(),
                Step::Frame(bytes) => bytes,
                Step::Run(Job::Call(job)) => {
                    members.push(BatchItem::Call(job));
                    continue;
                }
                // Batches do not nest: dispatch of a single member never yields one.
                Step::Run(Job::Batch(..)) | Step::Nothing => continue,
            };
            ready += reply.len();
            members.push(BatchItem::Ready(id, reply));
        }
        if members.iter().any(|m| matches!(m, BatchItem::Call(_))) {
            return Step::Run(Job::Batch(members, framing));
        }
        let mut out = Vec::new();
        let mut answer = batch::Answer::new(&mut out);
        for member in members {
            match member {
                BatchItem::Ready(id, reply) => answer.push(&id, &reply),
                BatchItem::Refused(id) => answer.refuse(&id),
                BatchItem::Call(_) => {}
            }
        }
        if answer.finish() {
            Step::Frame(out)
        } else {
            Step::Nothing
        }
    }

    fn notification(&mut self, method: &str, params: &Map<String, Value>) {
        if method == "notifications/cancelled" {
            if let Some(id) = params.get("requestId").and_then(RequestId::from_json) {
                self.in_flight.cancel(&id);
            }
            return;
        }
        // The session is usable as soon as `initialize` has been answered; the notifications
        // matter only to a toolset that talks back to the client (roots).
        let Some(peer) = &self.peer else { return };
        let event = match (method, &self.session) {
            ("notifications/initialized", Some(client)) => ClientEvent::Initialized {
                client,
                capabilities: &self.capabilities,
            },
            ("notifications/initialized", None) => return,
            _ => ClientEvent::Notification { method, params },
        };
        self.toolset.client_event(event, peer);
    }

    fn request(
        &mut self,
        id: RequestId,
        method: &str,
        params: Map<String, Value>,
        framing: Framing,
    ) -> Step {
        let id_json = id.to_json();
        let err = |code: i64, msg: String, data: Option<Value>| {
            Step::Reply(message::error(&id_json, code, msg, data))
        };

        // A 2026-07-28 request names its revision in `_meta`; handshake-era requests do not, and
        // `initialize` opens a handshake whatever its `_meta` says.
        let stateless = if method == "initialize" {
            None
        } else {
            match protocol::stateless_client(&params) {
                Ok(client) => client.map(Arc::new),
                Err(e) => return err(e.code(), e.to_string(), e.data()),
            }
        };
        let client = stateless.or_else(|| self.session.clone());

        match method {
            "initialize" => {
                return match protocol::initialize(
                    self.session.as_deref(),
                    &params,
                    &*self.toolset,
                    &self.instructions,
                ) {
                    Ok((session, result)) => {
                        self.session = Some(session);
                        if let Some(caps @ Value::Object(_)) = params.get("capabilities") {
                            self.capabilities = caps.clone();
                        }
                        Step::Reply(message::response(&id_json, result))
                    }
                    Err(e) => err(e.code(), e.to_string(), None),
                }
            }
            "ping" => {
                let revision = client.map(|c| c.revision);
                return Step::Reply(message::response(&id_json, stamp(json!({}), revision)));
            }
            "server/discover" => {
                let result = protocol::discover(&*self.toolset, &self.instructions);
                return Step::Reply(message::response(&id_json, result));
            }
            _ => {}
        }
        let Some(client) = client else {
            return err(
                code::INVALID_REQUEST,
                format!("'{method}' sent before initialize: open the session with an initialize request first (or, for protocol {0}, send \"{0}\" in each request's params._meta[\"{META_PROTOCOL_VERSION}\"])", Revision::STATELESS),
                None,
            );
        };
        match method {
            "tools/list" => self.list_tools(&id_json, &params, client.revision),
            "tools/call" => self.call_tool(id, params, client, framing),
            _ => err(
                code::METHOD_NOT_FOUND,
                format!("method '{method}' is not supported; this server offers tools only (tools/list, tools/call)"),
                None,
            ),
        }
    }

    fn list_tools(&mut self, id: &Value, params: &Map<String, Value>, revision: Revision) -> Step {
        let page_size = self.page_size.max(1);
        let tools = self.tools();
        let start = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(c)) => match c.strip_prefix("tools:").and_then(|n| n.parse().ok())
            {
                Some(n) if n < tools.len() => n,
                _ => {
                    return Step::Reply(message::error(
                        id,
                        code::INVALID_PARAMS,
                        format!("invalid cursor {c:?}: pass back a nextCursor from a previous tools/list, or omit it to start over"),
                        None,
                    ))
                }
            },
            Some(_) => {
                return Step::Reply(message::error(
                    id,
                    code::INVALID_PARAMS,
                    "cursor must be a string",
                    None,
                ))
            }
        };
        let end = (start + page_size).min(tools.len());
        let page: Vec<Value> = tools[start..end]
            .iter()
            .map(|t| t.to_json(revision))
            .collect();
        let mut result = json!({ "tools": page });
        if end < tools.len() {
            result["nextCursor"] = json!(format!("tools:{end}"));
        }
        if revision.is_stateless() {
            result["ttlMs"] = json!(CACHE_TTL_MS);
            result["cacheScope"] = json!("public");
        }
        Step::Reply(message::response(id, stamp(result, Some(revision))))
    }

    fn call_tool(
        &mut self,
        id: RequestId,
        mut params: Map<String, Value>,
        client: Arc<ClientInfo>,
        framing: Framing,
    ) -> Step {
        let id_json = id.to_json();
        let invalid =
            |msg: String| Step::Reply(message::error(&id_json, code::INVALID_PARAMS, msg, None));
        let Some(Value::String(name)) = params.remove("name") else {
            return invalid(
                "tools/call needs params.name (a string naming a tool from tools/list)".into(),
            );
        };
        // Taken, not copied: the arguments of a write carry the whole file.
        let args = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(a)) => a,
            Some(_) => return invalid("tools/call params.arguments must be an object".into()),
        };
        let tools = self.tools();
        if !tools.iter().any(|t| t.name == name) {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            return invalid(format!(
                "Unknown tool: {name}. Available tools: {}",
                names.join(", ")
            ));
        }
        let Some(cancel) = self.in_flight.admit(&id) else {
            // Two calls under one id could not be told apart by a cancel or a reply.
            return Step::Reply(message::error(
                &id_json,
                code::INVALID_REQUEST,
                format!("request id {id_json} is already used by a call in progress; give every request its own id"),
                None,
            ));
        };
        Step::Run(Job::Call(Box::new(CallJob {
            id,
            name,
            args,
            client,
            cancel,
            framing,
        })))
    }
}

/// Adds the fields every 2026-07-28 result carries.
fn stamp(mut result: Value, revision: Option<Revision>) -> Value {
    if revision.is_some_and(Revision::is_stateless) {
        result["resultType"] = json!("complete");
    }
    result
}

#[cfg(test)]
mod tests {
    use crate::testkit::{after_initialize, session, wire, STATELESS_META};

    #[test]
    fn tools_list_pages_by_cursor_and_refuses_a_cursor_it_did_not_give() {
        let input = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}
{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"tools:2"}}
{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"tools:9"}}
{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":2}}
"#;
        assert_eq!(
            after_initialize("2025-11-25", input),
            wire(&[
                r#"{"id":1,"jsonrpc":"2.0","result":{"nextCursor":"tools:2","tools":[{"annotations":{"idempotentHint":true,"openWorldHint":false,"readOnlyHint":true,"title":"ECHO"},"description":"the echo tool","inputSchema":{"type":"object"},"name":"echo","outputSchema":{"type":"object"},"title":"ECHO"},{"annotations":{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false,"title":"FAIL"},"description":"the fail tool","inputSchema":{"type":"object"},"name":"fail","title":"FAIL"}]}}"#,
                r#"{"id":2,"jsonrpc":"2.0","result":{"tools":[{"annotations":{"idempotentHint":true,"openWorldHint":false,"readOnlyHint":true,"title":"WAIT"},"description":"the wait tool","inputSchema":{"type":"object"},"name":"wait","title":"WAIT"}]}}"#,
                r#"{"error":{"code":-32602,"message":"invalid cursor \"tools:9\": pass back a nextCursor from a previous tools/list, or omit it to start over"},"id":3,"jsonrpc":"2.0"}"#,
                r#"{"error":{"code":-32602,"message":"cursor must be a string"},"id":4,"jsonrpc":"2.0"}"#,
            ]),
        );
    }

    #[test]
    fn tools_list_shows_only_the_fields_of_the_clients_revision() {
        assert_eq!(
            after_initialize(
                "2024-11-05",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n"
            ),
            wire(&[
                r#"{"id":1,"jsonrpc":"2.0","result":{"nextCursor":"tools:2","tools":[{"description":"the echo tool","inputSchema":{"type":"object"},"name":"echo"},{"description":"the fail tool","inputSchema":{"type":"object"},"name":"fail"}]}}"#
            ]),
        );
        let stateless =
            format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{{STATELESS_META}}}}}\n");
        assert_eq!(
            session(&stateless),
            wire(&[
                r#"{"id":1,"jsonrpc":"2.0","result":{"cacheScope":"public","nextCursor":"tools:2","resultType":"complete","tools":[{"annotations":{"idempotentHint":true,"openWorldHint":false,"readOnlyHint":true,"title":"ECHO"},"description":"the echo tool","inputSchema":{"type":"object"},"name":"echo","outputSchema":{"type":"object"},"title":"ECHO"},{"annotations":{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false,"title":"FAIL"},"description":"the fail tool","inputSchema":{"type":"object"},"name":"fail","title":"FAIL"}],"ttlMs":60000}}"#
            ]),
        );
    }

    #[test]
    fn ping_is_answered_in_every_state_and_stamped_for_stateless_clients() {
        assert_eq!(
            after_initialize(
                "2025-06-18",
                "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n"
            ),
            wire(&[r#"{"id":"p","jsonrpc":"2.0","result":{}}"#]),
        );
        assert_eq!(
            session("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"),
            wire(&[r#"{"id":1,"jsonrpc":"2.0","result":{}}"#]),
        );
        let stateless =
            format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{{STATELESS_META}}}}}\n");
        assert_eq!(
            session(&stateless),
            wire(&[r#"{"id":1,"jsonrpc":"2.0","result":{"resultType":"complete"}}"#]),
        );
    }

    #[test]
    fn an_unknown_method_is_method_not_found_once_a_session_is_open() {
        let input = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}\n";
        assert_eq!(
            after_initialize("2025-06-18", input),
            wire(&[
                r#"{"error":{"code":-32601,"message":"method 'resources/list' is not supported; this server offers tools only (tools/list, tools/call)"},"id":1,"jsonrpc":"2.0"}"#
            ]),
        );
        // Before the session is open, it is told to open one first.
        assert_eq!(
            session(input),
            wire(&[
                r#"{"error":{"code":-32600,"message":"'resources/list' sent before initialize: open the session with an initialize request first (or, for protocol 2026-07-28, send \"2026-07-28\" in each request's params._meta[\"io.modelcontextprotocol/protocolVersion\"])"},"id":1,"jsonrpc":"2.0"}"#
            ]),
        );
    }

    #[test]
    fn malformed_messages_are_parse_errors_or_invalid_requests() {
        let input = r#"{"jsonrpc":"2.0","id":1
{"jsonrpc":"2.0","id":2}
{"jsonrpc":"2.0","id":null,"method":"ping"}
"just a string"
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":9,"result":{}}
"#;
        assert_eq!(
            after_initialize("2025-06-18", input),
            wire(&[
                r#"{"error":{"code":-32700,"message":"not valid JSON: EOF while parsing an object at line 1 column 23"},"id":null,"jsonrpc":"2.0"}"#,
                r#"{"error":{"code":-32600,"message":"a request needs a \"method\""},"id":2,"jsonrpc":"2.0"}"#,
                r#"{"error":{"code":-32600,"message":"\"id\" must be a string or an integer (MCP forbids null ids)"},"id":null,"jsonrpc":"2.0"}"#,
                r#"{"error":{"code":-32600,"message":"a JSON-RPC message must be an object"},"id":null,"jsonrpc":"2.0"}"#,
            ]),
        );
    }

    #[test]
    fn a_batch_of_2025_03_26_is_answered_as_one_array_in_member_order() {
        let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}},{"jsonrpc":"2.0","method":"notifications/progress"},{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}]
"#;
        assert_eq!(
            after_initialize("2025-03-26", batch),
            wire(&[
                r#"[{"id":1,"jsonrpc":"2.0","result":{}},{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}},{"error":{"code":-32600,"message":"initialize must not be part of a batch"},"id":3,"jsonrpc":"2.0"}]"#
            ]),
        );
        // Without calls it is answered by the reader, at once.
        assert_eq!(
            after_initialize(
                "2025-03-26",
                "[{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}]\n[]\n"
            ),
            wire(&[
                r#"[{"id":4,"jsonrpc":"2.0","result":{}}]"#,
                r#"{"error":{"code":-32600,"message":"empty batch"},"id":null,"jsonrpc":"2.0"}"#,
            ]),
        );
    }

    #[test]
    fn a_batch_outside_2025_03_26_is_refused_whole() {
        for revision in ["2024-11-05", "2025-06-18", "2025-11-25"] {
            assert_eq!(
                after_initialize(
                    revision,
                    "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n"
                ),
                wire(&[
                    r#"{"error":{"code":-32600,"message":"JSON-RPC batches are only part of protocol 2025-03-26; send one message at a time"},"id":null,"jsonrpc":"2.0"}"#
                ]),
                "{revision}"
            );
        }
    }

    #[test]
    fn a_call_to_an_unknown_tool_or_with_bad_params_is_invalid_params() {
        let input = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":[1]}}
"#;
        assert_eq!(
            after_initialize("2025-06-18", input),
            wire(&[
                r#"{"error":{"code":-32602,"message":"Unknown tool: nope. Available tools: echo, fail, wait"},"id":1,"jsonrpc":"2.0"}"#,
                r#"{"error":{"code":-32602,"message":"tools/call needs params.name (a string naming a tool from tools/list)"},"id":2,"jsonrpc":"2.0"}"#,
                r#"{"error":{"code":-32602,"message":"tools/call params.arguments must be an object"},"id":3,"jsonrpc":"2.0"}"#,
            ]),
        );
    }
}
