//! The JSON-RPC lifecycle of an MCP server over one byte stream.
//!
//! Three threads, joined by channels: the caller's thread reads and dispatches messages, a worker
//! runs tool calls one at a time in arrival order, and a writer owns the output stream. Reading on
//! its own thread is what lets `ping` and `notifications/cancelled` be answered while a long call
//! runs, and an unbounded writer queue means a client that sends many requests before reading
//! cannot deadlock against our output.
//!
//! Both eras of the protocol are served: the handshake revisions (2024-11-05 … 2025-11-25, opened
//! with `initialize`) and the stateless 2026-07-28 revision (`server/discover`, a protocol version
//! in every request's `_meta`).

use std::collections::HashMap;
use std::io::{self, BufRead, BufWriter, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::message::{self, classify, code, Incoming, RequestId};
use super::reply;
use super::wire::{write_frame, Frame, FrameReader, Framing};
use crate::toolset::{CallContext, CancelToken, ToolDef, ToolOutput, Toolset};

/// Handshake-era protocol revisions, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The stateless revision served to clients that send `_meta` instead of `initialize`.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The `_meta` key that carries a 2026-07-28 request's protocol version.
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key that carries a 2026-07-28 client's identity.
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The `_meta` key a 2026-07-28 server stamps its identity under.
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// How long 2026-07-28 clients may cache `tools/list` and `server/discover` answers. The tool list
/// is fixed for the life of the process.
const CACHE_TTL_MS: u64 = 60_000;

/// Settings of the core that do not depend on the toolset.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Messages longer than this are refused without being held in memory.
    pub max_message_bytes: usize,
    /// How many tools one `tools/list` page holds.
    pub page_size: usize,
    /// Wall-clock limit of every tool call (`--timeout`); `None` for none.
    pub call_timeout: Option<Duration>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_message_bytes: 64 * 1024 * 1024,
            page_size: 100,
            call_timeout: Some(Duration::from_secs(30)),
        }
    }
}

/// Who is on the other end, as learnt from `initialize` or a 2026-07-28 request's `_meta`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientInfo {
    /// `clientInfo.name`.
    pub name: Option<String>,
    /// `clientInfo.version`.
    pub version: Option<String>,
    /// The negotiated (or per-request) protocol revision.
    pub protocol_version: String,
}

impl ClientInfo {
    /// Reads an MCP `Implementation` object (`clientInfo`), tolerating its absence.
    fn from_json(info: Option<&Value>, protocol_version: &str) -> Self {
        let field = |key: &str| {
            info.and_then(|i| i.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        ClientInfo {
            name: field("name"),
            version: field("version"),
            protocol_version: protocol_version.to_string(),
        }
    }
}

/// A finished tool call, as seen by the core; observers such as a call log receive one per call.
#[derive(Debug)]
pub struct CallRecord<'a> {
    /// The tool that ran.
    pub tool: &'a str,
    /// The arguments it was given.
    pub args: &'a Map<String, Value>,
    /// What it returned.
    pub output: &'a ToolOutput,
    /// The client that asked.
    pub client: &'a ClientInfo,
    /// Wall time of the call.
    pub duration: std::time::Duration,
}

/// Something that wants to know about every tool call (the adoption-study call log).
pub trait CallObserver: Send + Sync {
    /// Called after each tool call, before its response can be written; the observer may record
    /// it at once or keep it until [`release`](Self::release).
    fn observe(&self, record: &CallRecord<'_>);

    /// Called before replies go to the client: whatever [`observe`](Self::observe) kept back must
    /// be recorded by the time this returns, so no client sees a reply to a call that left no
    /// record. Observers that record at once need not implement it.
    fn release(&self) {}
}

/// A tool call waiting for the worker.
struct CallJob {
    id: RequestId,
    name: String,
    args: Map<String, Value>,
    client: Arc<ClientInfo>,
    modern: bool,
    cancel: CancelToken,
    framing: Framing,
}

/// What dispatching one message asks for.
enum Step {
    Reply(Value),
    Call(Box<CallJob>),
    Nothing,
}

type InFlight = Arc<Mutex<HashMap<RequestId, CancelToken>>>;

/// Everything a tool call needs once it has left the dispatcher.
struct Executor {
    toolset: Arc<dyn Toolset>,
    observer: Option<Arc<dyn CallObserver>>,
    in_flight: InFlight,
    call_timeout: Option<Duration>,
}

impl Executor {
    /// Runs one call and appends its response to `out`; returns false, with nothing appended,
    /// when it was cancelled (MCP forbids a response to a cancelled request).
    fn run(&self, job: &CallJob, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        if !job.cancel.is_cancelled() {
            let started = std::time::Instant::now();
            let ctx = CallContext::with_timeout(job.cancel.clone(), self.call_timeout);
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                self.toolset.call(&job.name, &job.args, &ctx)
            }));
            let id = job.id.to_json();
            match outcome {
                Ok(output) => {
                    if let Some(observer) = &self.observer {
                        observer.observe(&CallRecord {
                            tool: &job.name,
                            args: &job.args,
                            output: &output,
                            client: &job.client,
                            duration: started.elapsed(),
                        });
                    }
                    reply::write_call_response(
                        out,
                        &id,
                        &output,
                        &job.client.protocol_version,
                        job.modern,
                    );
                }
                Err(_) => {
                    let error = message::error(
                        &id,
                        code::INTERNAL_ERROR,
                        format!(
                            "internal error while running tool '{}'; nothing was reported as done — please report this bug",
                            job.name
                        ),
                        None,
                    );
                    let _ = serde_json::to_writer(&mut *out, &error);
                }
            }
        }
        if let Ok(mut map) = self.in_flight.lock() {
            map.remove(&job.id);
        }
        if job.cancel.is_cancelled() {
            out.truncate(start);
            return false;
        }
        out.len() > start
    }
}

/// The session state and the dispatch rules of the protocol.
struct Dispatcher {
    toolset: Arc<dyn Toolset>,
    /// Built on first use: `initialize` does not need them, and start-up is on the clock.
    tools: Option<Vec<ToolDef>>,
    instructions: String,
    config: ServerConfig,
    /// Set once a handshake-era client has sent `initialize`.
    /// Shared with every call of the session rather than copied into each.
    session: Option<Arc<ClientInfo>>,
    in_flight: InFlight,
}

impl Dispatcher {
    fn server_info(&self, protocol_version: &str) -> Value {
        let mut info = json!({"name": "filesystem", "version": env!("CARGO_PKG_VERSION")});
        if protocol_version >= "2025-06-18" {
            info["title"] = json!(format!("filesystem ({})", self.toolset.mode()));
        }
        info
    }

    /// The toolset's tools, built on first use.
    fn tools(&mut self) -> &[ToolDef] {
        let toolset = &self.toolset;
        self.tools.get_or_insert_with(|| toolset.tools())
    }

    fn capabilities() -> Value {
        json!({"tools": {"listChanged": false}})
    }

    /// Dispatches one message (not a batch).
    fn dispatch(&mut self, value: Value, framing: Framing) -> Step {
        match classify(value) {
            Incoming::Response => Step::Nothing,
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

    fn notification(&mut self, method: &str, params: &Map<String, Value>) {
        if method == "notifications/cancelled" {
            let Some(id) = params.get("requestId").and_then(RequestId::from_json) else {
                return;
            };
            if let Ok(map) = self.in_flight.lock() {
                if let Some(token) = map.get(&id) {
                    token.cancel();
                }
            }
        }
        // `notifications/initialized` and every other notification need nothing from us: the
        // session is usable as soon as `initialize` has been answered.
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

        // A 2026-07-28 request names its revision in `_meta`; handshake-era requests do not.
        let meta_version = params
            .get("_meta")
            .and_then(|m| m.get(META_PROTOCOL_VERSION));
        let modern_client = match meta_version {
            _ if method == "initialize" => None,
            None => None,
            Some(Value::String(v)) if v == MODERN_VERSION => {
                let info = params.get("_meta").and_then(|m| m.get(META_CLIENT_INFO));
                Some(Arc::new(ClientInfo::from_json(info, MODERN_VERSION)))
            }
            Some(Value::String(v)) => {
                return err(
                    code::UNSUPPORTED_PROTOCOL_VERSION,
                    format!("unsupported protocol version {v:?}; this server's stateless revision is {MODERN_VERSION}, or open the session with initialize for {}", HANDSHAKE_VERSIONS.join(", ")),
                    Some(json!({"supported": [MODERN_VERSION], "requested": v})),
                )
            }
            Some(_) => {
                return err(
                    code::INVALID_PARAMS,
                    format!("_meta[\"{META_PROTOCOL_VERSION}\"] must be a string"),
                    None,
                )
            }
        };
        let modern = modern_client.is_some();
        let client = match (modern_client, &self.session) {
            (Some(c), _) => c,
            (None, Some(s)) => s.clone(),
            (None, None) => Arc::default(),
        };

        match method {
            "initialize" => self.initialize(&id_json, &params),
            "ping" => Step::Reply(message::response(&id_json, self.stamp(json!({}), modern))),
            "server/discover" => Step::Reply(message::response(
                &id_json,
                json!({
                    "resultType": "complete",
                    "supportedVersions": [MODERN_VERSION],
                    "capabilities": Self::capabilities(),
                    "instructions": self.instructions,
                    "ttlMs": CACHE_TTL_MS,
                    "cacheScope": "public",
                    "_meta": {META_SERVER_INFO: self.server_info(MODERN_VERSION)},
                }),
            )),
            _ if !modern && self.session.is_none() => err(
                code::INVALID_REQUEST,
                format!("'{method}' sent before initialize: open the session with an initialize request first (or, for protocol {MODERN_VERSION}, send the protocol version in each request's _meta)"),
                None,
            ),
            "tools/list" => self.list_tools(&id_json, &params, &client.protocol_version, modern),
            "tools/call" => self.call_tool(id, params, client, modern, framing),
            _ => err(
                code::METHOD_NOT_FOUND,
                format!("method '{method}' is not supported; this server offers tools only (tools/list, tools/call)"),
                None,
            ),
        }
    }

    /// Adds the fields every 2026-07-28 result carries.
    fn stamp(&self, mut result: Value, modern: bool) -> Value {
        if modern {
            result["resultType"] = json!("complete");
        }
        result
    }

    fn initialize(&mut self, id: &Value, params: &Map<String, Value>) -> Step {
        let requested = match params.get("protocolVersion") {
            Some(Value::String(v)) => v.as_str(),
            _ => {
                return Step::Reply(message::error(
                    id,
                    code::INVALID_PARAMS,
                    "initialize needs params.protocolVersion (a string such as \"2025-11-25\")",
                    None,
                ))
            }
        };
        // Echo a revision we speak; otherwise offer our latest and let the client decide.
        let version = HANDSHAKE_VERSIONS
            .iter()
            .find(|v| **v == requested)
            .copied()
            .unwrap_or(HANDSHAKE_VERSIONS[HANDSHAKE_VERSIONS.len() - 1]);
        self.session = Some(Arc::new(ClientInfo::from_json(
            params.get("clientInfo"),
            version,
        )));
        Step::Reply(message::response(
            id,
            json!({
                "protocolVersion": version,
                "capabilities": Self::capabilities(),
                "serverInfo": self.server_info(version),
                "instructions": self.instructions,
            }),
        ))
    }

    fn list_tools(
        &mut self,
        id: &Value,
        params: &Map<String, Value>,
        protocol_version: &str,
        modern: bool,
    ) -> Step {
        let page_size = self.config.page_size.max(1);
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
            .map(|t| t.to_json(protocol_version))
            .collect();
        let mut result = json!({ "tools": page });
        if end < tools.len() {
            result["nextCursor"] = json!(format!("tools:{end}"));
        }
        if modern {
            result["ttlMs"] = json!(CACHE_TTL_MS);
            result["cacheScope"] = json!("public");
        }
        Step::Reply(message::response(id, self.stamp(result, modern)))
    }

    fn call_tool(
        &mut self,
        id: RequestId,
        mut params: Map<String, Value>,
        client: Arc<ClientInfo>,
        modern: bool,
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
        let cancel = CancelToken::default();
        if let Ok(mut map) = self.in_flight.lock() {
            map.insert(id.clone(), cancel.clone());
        }
        Step::Call(Box::new(CallJob {
            id,
            name,
            args,
            client,
            modern,
            cancel,
            framing,
        }))
    }
}

/// Serves MCP on `input`/`output` until `input` ends, then finishes queued calls, flushes and
/// returns. Tool failures never end the loop; only an I/O error on `input` does.
pub fn serve<R, W>(
    toolset: Arc<dyn Toolset>,
    config: ServerConfig,
    observer: Option<Arc<dyn CallObserver>>,
    input: R,
    output: W,
) -> io::Result<()>
where
    R: BufRead,
    W: Write + Send + 'static,
{
    let in_flight: InFlight = Arc::default();
    let mut dispatcher = Dispatcher {
        tools: None,
        instructions: toolset.instructions(),
        toolset: toolset.clone(),
        config: config.clone(),
        session: None,
        in_flight: in_flight.clone(),
    };
    let executor = Arc::new(Executor {
        toolset,
        observer,
        in_flight,
        call_timeout: config.call_timeout,
    });
    let mut reader = FrameReader::new(input, config.max_message_bytes);
    let mut output = BufWriter::with_capacity(64 * 1024, output);

    // The first exchange (normally `initialize`) is answered before any thread exists: the output
    // pipe is still empty, so one small reply cannot block, and the client hears back without
    // waiting for thread start-up.
    let first = match reader.read_frame()? {
        Some(frame) => {
            let framing = reader.framing().unwrap_or(Framing::Lines);
            match handle_frame(&mut dispatcher, &executor, frame, framing, &config) {
                Step::Reply(reply) => {
                    let body = serde_json::to_vec(&reply).map_err(io::Error::other)?;
                    write_frame(&mut output, framing, &body)?;
                    output.flush()?;
                    None
                }
                other => Some(other),
            }
        }
        None => return output.flush(),
    };

    let (out_tx, out_rx) = mpsc::channel::<Out>();
    let outbox: Outbox = Arc::default();
    let writer_outbox = outbox.clone();
    let writer_observer = executor.observer.clone();
    let writer = thread::Builder::new()
        .name("mcp-writer".into())
        .spawn(move || write_loop(output, out_rx, writer_outbox, writer_observer))?;

    let (job_tx, job_rx) = mpsc::channel::<Box<CallJob>>();
    let worker_out = out_tx.clone();
    let worker_exec = executor.clone();
    let worker = thread::Builder::new()
        .name("mcp-worker".into())
        .spawn(move || run_calls(&worker_exec, &job_rx, &outbox, &worker_out))?;

    let mut next = first;
    let result = loop {
        let step = match next.take() {
            Some(step) => step,
            None => match reader.read_frame() {
                Ok(Some(frame)) => {
                    let framing = reader.framing().unwrap_or(Framing::Lines);
                    handle_frame(&mut dispatcher, &executor, frame, framing, &config)
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            },
        };
        match step {
            Step::Reply(reply) => {
                let framing = reader.framing().unwrap_or(Framing::Lines);
                send(&out_tx, framing, &reply);
            }
            Step::Call(job) => {
                if job_tx.send(job).is_err() {
                    break Err(io::Error::other("tool worker stopped"));
                }
            }
            Step::Nothing => {}
        }
    };
    // End of input: let queued calls finish (a write in progress is never cut short), then flush.
    drop(job_tx);
    let _ = worker.join();
    drop(out_tx);
    let _ = writer.join();
    // The writer releases before every write; this is for a writer that stopped early (the client
    // closed our output), whose last calls still ran and still deserve their record.
    if let Some(observer) = &executor.observer {
        observer.release();
    }
    result
}

/// Turns one frame into what to do about it: a reply, a call for the worker, or nothing.
fn handle_frame(
    dispatcher: &mut Dispatcher,
    executor: &Executor,
    frame: Frame,
    framing: Framing,
    config: &ServerConfig,
) -> Step {
    let bytes = match frame {
        Frame::Message(bytes) => bytes,
        Frame::TooLarge => {
            return Step::Reply(message::error(
                &Value::Null,
                code::INVALID_REQUEST,
                format!(
                    "message larger than the limit of {} bytes was discarded; send smaller messages (e.g. split a large write)",
                    config.max_message_bytes
                ),
                None,
            ))
        }
        Frame::BadHeader(why) => {
            return Step::Reply(message::error(&Value::Null, code::PARSE_ERROR, why, None))
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(Value::Array(items)) => match run_batch(dispatcher, executor, items, framing) {
            Some(reply) => Step::Reply(reply),
            None => Step::Nothing,
        },
        Ok(single) => dispatcher.dispatch(single, framing),
        Err(e) => Step::Reply(message::error(
            &Value::Null,
            code::PARSE_ERROR,
            format!("not valid JSON: {e}"),
            None,
        )),
    }
}

/// JSON-RPC batches exist only in protocol 2025-03-26; every other revision forbids them.
fn run_batch(
    dispatcher: &mut Dispatcher,
    executor: &Executor,
    items: Vec<Value>,
    framing: Framing,
) -> Option<Value> {
    let version = dispatcher
        .session
        .as_ref()
        .map(|s| s.protocol_version.clone())
        .unwrap_or_default();
    if version != "2025-03-26" {
        return Some(message::error(
            &Value::Null,
            code::INVALID_REQUEST,
            "JSON-RPC batches are only part of protocol 2025-03-26; send one message at a time",
            None,
        ));
    }
    if items.is_empty() {
        return Some(message::error(
            &Value::Null,
            code::INVALID_REQUEST,
            "empty batch",
            None,
        ));
    }
    let mut replies = Vec::new();
    for item in items {
        let is_initialize = item.get("method") == Some(&json!("initialize"));
        if is_initialize {
            let id = item.get("id").cloned().unwrap_or(Value::Null);
            replies.push(message::error(
                &id,
                code::INVALID_REQUEST,
                "initialize must not be part of a batch",
                None,
            ));
            continue;
        }
        match dispatcher.dispatch(item, framing) {
            Step::Reply(r) => replies.push(r),
            Step::Call(job) => {
                let mut bytes = Vec::new();
                if executor.run(&job, &mut bytes) {
                    replies.extend(serde_json::from_slice::<Value>(&bytes).ok());
                }
            }
            Step::Nothing => {}
        }
    }
    (!replies.is_empty()).then_some(Value::Array(replies))
}

/// Longest a finished reply may wait in the outbox for company before the writer sends it.
const REPLY_HOLD: Duration = Duration::from_millis(2);

/// What the writer thread is asked to do.
enum Out {
    /// Write this framed message now.
    Frame(Vec<u8>),
    /// The outbox has replies; send them within [`REPLY_HOLD`] at the latest.
    Pending,
    /// Send the outbox now: no call is waiting, so nothing is gained by holding replies.
    Flush,
}

/// Replies the worker has finished but the writer has not yet taken.
type Outbox = Arc<Mutex<Vec<u8>>>;

/// Runs tool calls in arrival order. While more calls are already queued (a client pipelining
/// requests), replies collect in the outbox and go out together — one thread wake-up and one
/// `write(2)` for many replies — but never later than [`REPLY_HOLD`] after they were ready, even
/// if the next call runs for a long time; a lone call's reply is flushed at once.
fn run_calls(
    executor: &Executor,
    jobs: &mpsc::Receiver<Box<CallJob>>,
    outbox: &Outbox,
    out: &mpsc::Sender<Out>,
) {
    // One buffer for every reply body: a reply to a read is as long as the file, and growing a
    // fresh vector to that size on every call showed up in profiles.
    let mut body = Vec::new();
    loop {
        let job = match jobs.try_recv() {
            Ok(job) => job,
            Err(mpsc::TryRecvError::Empty) => {
                let _ = out.send(Out::Flush);
                match jobs.recv() {
                    Ok(job) => job,
                    Err(_) => break,
                }
            }
            Err(mpsc::TryRecvError::Disconnected) => break,
        };
        crate::buffer::recycle(&mut body);
        if !executor.run(&job, &mut body) {
            continue;
        }
        let was_empty = match outbox.lock() {
            Ok(mut buf) => {
                let was_empty = buf.is_empty();
                let _ = write_frame(&mut *buf, job.framing, &body);
                was_empty
            }
            Err(_) => break,
        };
        if was_empty {
            let _ = out.send(Out::Pending);
        }
    }
    let _ = out.send(Out::Flush);
}

/// Frames one message and queues it for the writer.
fn send(tx: &mpsc::Sender<Out>, framing: Framing, value: &Value) {
    // Serialising a Value cannot fail; a closed channel means the writer is gone and the reply
    // has nowhere to go anyway.
    if let Ok(body) = serde_json::to_vec(value) {
        let mut framed = Vec::with_capacity(body.len() + 32);
        if write_frame(&mut framed, framing, &body).is_ok() {
            let _ = tx.send(Out::Frame(framed));
        }
    }
}

/// Writes replies: framed messages from the dispatcher at once, the worker's outbox when asked or
/// when its hold time is up, and flushes whenever there is nothing more to do right now. The
/// observer is released before any reply it may have seen is written.
fn write_loop<W: Write>(
    output: W,
    rx: mpsc::Receiver<Out>,
    outbox: Outbox,
    observer: Option<Arc<dyn CallObserver>>,
) {
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    let mut deadline: Option<Instant> = None;
    let release = || {
        if let Some(observer) = &observer {
            observer.release();
        }
    };
    let take = |out: &mut BufWriter<W>| -> io::Result<()> {
        let batch = match outbox.lock() {
            Ok(mut buf) => std::mem::take(&mut *buf),
            Err(_) => return Err(io::Error::other("outbox poisoned")),
        };
        if batch.is_empty() {
            return Ok(());
        }
        release();
        out.write_all(&batch)
    };
    loop {
        let first = match deadline {
            None => rx.recv().ok(),
            Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(msg) => Some(msg),
                Err(mpsc::RecvTimeoutError::Timeout) => Some(Out::Flush),
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        };
        let Some(first) = first else {
            let _ = take(&mut out).and_then(|_| out.flush());
            return;
        };
        let mut next = Some(first);
        while let Some(msg) = next {
            let written = match msg {
                Out::Frame(bytes) => {
                    // A batch's frame can hold call results.
                    release();
                    out.write_all(&bytes)
                }
                Out::Pending => {
                    deadline.get_or_insert_with(|| Instant::now() + REPLY_HOLD);
                    Ok(())
                }
                Out::Flush => {
                    deadline = None;
                    take(&mut out)
                }
            };
            if written.is_err() {
                return;
            }
            next = rx.try_recv().ok();
        }
        if out.flush().is_err() {
            return;
        }
    }
}
