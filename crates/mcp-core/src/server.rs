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
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::message::{self, classify, code, Incoming, RequestId};
use super::output::{write_loop, Out, Outbox};
use super::reply;
use super::schedule::{Lane, Queue, QueueLimits};
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
    /// Threads running tool calls. Calls of one lane (see [`Toolset::lane`]) still run one at a
    /// time in arrival order; more workers only let different lanes (the daemon's roots) proceed
    /// side by side.
    pub workers: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_message_bytes: 64 * 1024 * 1024,
            page_size: 100,
            call_timeout: Some(Duration::from_secs(30)),
            workers: 1,
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

/// A tool call waiting for a worker.
struct CallJob {
    id: RequestId,
    name: String,
    args: Map<String, Value>,
    client: Arc<ClientInfo>,
    modern: bool,
    cancel: CancelToken,
    framing: Framing,
}

/// One member of a JSON-RPC batch: answered while dispatching, or a call to run in its turn.
enum BatchItem {
    Ready(Value),
    Call(Box<CallJob>),
}

/// What a worker runs.
enum Job {
    Call(Box<CallJob>),
    /// A 2025-03-26 batch with at least one tool call: its calls run in order, as one job, and
    /// its replies go out as one array.
    Batch(Vec<BatchItem>, Framing),
}

/// What dispatching one message asks for.
enum Step {
    Reply(Value),
    Run(Job),
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
        self.forget(&job.id);
        if job.cancel.is_cancelled() {
            out.truncate(start);
            return false;
        }
        out.len() > start
    }

    /// Runs a batch's calls in order and writes the array of its replies; false when nothing is
    /// left to answer (every call in it was cancelled).
    fn run_batch(&self, items: Vec<BatchItem>, out: &mut Vec<u8>) -> bool {
        let mut replies = Vec::with_capacity(items.len());
        let mut bytes = Vec::new();
        for item in items {
            match item {
                BatchItem::Ready(reply) => replies.push(reply),
                BatchItem::Call(job) => {
                    bytes.clear();
                    if self.run(&job, &mut bytes) {
                        replies.extend(serde_json::from_slice::<Value>(&bytes).ok());
                    }
                }
            }
        }
        !replies.is_empty() && serde_json::to_writer(&mut *out, &Value::Array(replies)).is_ok()
    }

    fn forget(&self, id: &RequestId) {
        if let Ok(mut map) = self.in_flight.lock() {
            map.remove(id);
        }
    }

    /// Cancels every call that has been accepted and not finished: the client is gone.
    fn cancel_all(&self) {
        if let Ok(map) = self.in_flight.lock() {
            map.values().for_each(CancelToken::cancel);
        }
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
        let name = self.toolset.server_name();
        let mut info = json!({"name": name, "version": env!("CARGO_PKG_VERSION")});
        if protocol_version >= "2025-06-18" {
            info["title"] = json!(format!("{name} ({})", self.toolset.mode()));
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
        if let Some(session) = &self.session {
            // Renegotiating mid-session would change what every queued call is answered in (and
            // switch batches on or off under the client's feet).
            return Step::Reply(message::error(
                id,
                code::INVALID_REQUEST,
                format!(
                    "the session is already initialized (protocol {}); initialize is allowed once per session — start a new server process to negotiate again",
                    session.protocol_version
                ),
                None,
            ));
        }
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
            if map.contains_key(&id) {
                // Two calls under one id could not be told apart by a cancel or a reply.
                return Step::Reply(message::error(
                    &id_json,
                    code::INVALID_REQUEST,
                    format!("request id {id_json} is already used by a call in progress; give every request its own id"),
                    None,
                ));
            }
            map.insert(id.clone(), cancel.clone());
        }
        Step::Run(Job::Call(Box::new(CallJob {
            id,
            name,
            args,
            client,
            modern,
            cancel,
            framing,
        })))
    }

    /// The lane a job runs in: a call's toolset names it; a batch runs alone.
    fn lane(&self, job: &Job) -> Lane {
        match job {
            Job::Call(call) => Lane::Key(self.toolset.lane(&call.name, &call.args)),
            Job::Batch(..) => Lane::Barrier,
        }
    }
}

/// What the session's threads share.
struct Session {
    executor: Executor,
    queue: Queue<Job>,
    outbox: Arc<Outbox>,
}

impl Session {
    /// The client stopped taking our output: nothing more runs, what runs is cancelled.
    fn abandon(&self) {
        self.queue.abort();
        self.executor.cancel_all();
    }
}

/// Calls queued before the reader waits (see [`schedule`](super::schedule)).
const QUEUED_CALLS: usize = 256;
/// Bytes of queued requests before the reader waits.
const QUEUED_BYTES: usize = 256 * 1024 * 1024;
/// Direct replies (ping, tools/list, errors) waiting for the writer before the reader waits.
const QUEUED_FRAMES: usize = 64;

/// How a session ended.
enum End {
    /// Input ended (or failed): queued calls were finished.
    Input(io::Result<()>),
    /// The output was closed by the client.
    OutputGone,
}

/// Serves MCP on `input`/`output` until `input` ends, then finishes queued calls, flushes and
/// returns. Tool failures never end the loop; an I/O error on `input` does, and so does a closed
/// `output` (then queued calls are dropped, running ones cancelled, and `BrokenPipe` returned
/// without waiting for `input`).
pub fn serve<R, W>(
    toolset: Arc<dyn Toolset>,
    config: ServerConfig,
    observer: Option<Arc<dyn CallObserver>>,
    input: R,
    output: W,
) -> io::Result<()>
where
    R: BufRead + Send + 'static,
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
    let mut reader = FrameReader::new(input, config.max_message_bytes);
    let mut output = BufWriter::with_capacity(64 * 1024, output);

    // The first exchange (normally `initialize`) is answered before any thread exists: the output
    // pipe is still empty, so one small reply cannot block, and the client hears back without
    // waiting for thread start-up.
    let first = match reader.read_frame()? {
        Some(frame) => {
            let framing = reader.framing().unwrap_or(Framing::Lines);
            match handle_frame(&mut dispatcher, frame, framing, config.max_message_bytes) {
                Step::Reply(reply) => {
                    let body = serde_json::to_vec(&reply).map_err(io::Error::other)?;
                    write_frame(&mut output, framing, &body)?;
                    output.flush()?;
                    None
                }
                other => Some((other, framing)),
            }
        }
        None => return output.flush(),
    };

    let session = Arc::new(Session {
        executor: Executor {
            toolset,
            observer: observer.clone(),
            in_flight,
            call_timeout: config.call_timeout,
        },
        queue: Queue::new(QueueLimits {
            jobs: QUEUED_CALLS,
            bytes: QUEUED_BYTES.max(config.max_message_bytes),
        }),
        outbox: Arc::default(),
    });
    let (end_tx, end_rx) = mpsc::channel::<End>();

    let (out_tx, out_rx) = mpsc::sync_channel::<Out>(QUEUED_FRAMES);
    let writer = {
        let outbox = session.outbox.clone();
        let session = session.clone();
        let end_tx = end_tx.clone();
        thread::Builder::new()
            .name("mcp-writer".into())
            .spawn(move || {
                write_loop(output, out_rx, outbox, observer, move || {
                    session.abandon();
                    let _ = end_tx.send(End::OutputGone);
                })
            })?
    };

    let mut workers = Vec::new();
    for n in 0..config.workers.max(1) {
        let session = session.clone();
        let out = out_tx.clone();
        workers.push(
            thread::Builder::new()
                .name(format!("mcp-worker-{n}"))
                .spawn(move || run_calls(&session, &out))?,
        );
    }

    let reader_thread = {
        let session = session.clone();
        thread::Builder::new()
            .name("mcp-reader".into())
            .spawn(move || {
                session.executor.toolset.started();
                let result = read_loop(&mut reader, &mut dispatcher, &session, &out_tx, first);
                session.queue.close();
                let _ = end_tx.send(End::Input(result));
            })?
    };

    let end = end_rx.recv().unwrap_or(End::Input(Ok(())));
    for worker in workers {
        let _ = worker.join();
    }
    let result = match end {
        End::Input(result) => {
            let _ = reader_thread.join();
            // Every sender is gone once the reader and the workers are: the writer flushes the
            // last replies and returns (or has already, if the output went away meanwhile).
            let _ = writer.join();
            result
        }
        // The reader may be blocked reading input that never ends; it is left to the process.
        End::OutputGone => Err(io::Error::new(
            io::ErrorKind::BrokenPipe,
            "the client closed the server's output; queued calls were dropped and running ones cancelled",
        )),
    };
    // The writer releases before every write; this is for a writer that stopped early (the client
    // closed our output), whose last calls still ran and still deserve their record.
    if let Some(observer) = &session.executor.observer {
        observer.release();
    }
    result
}

/// Reads and dispatches messages until input ends or the session is abandoned.
fn read_loop<R: BufRead>(
    reader: &mut FrameReader<R>,
    dispatcher: &mut Dispatcher,
    session: &Session,
    out: &mpsc::SyncSender<Out>,
    first: Option<(Step, Framing)>,
) -> io::Result<()> {
    let mut next = first;
    loop {
        // The size of the message a job came from is what it holds in memory while queued (the
        // first message is small: an initialize, or one call).
        let (step, framing, size) = match next.take() {
            Some((step, framing)) => (step, framing, 0),
            None => match reader.read_frame()? {
                Some(frame) => {
                    let framing = reader.framing().unwrap_or(Framing::Lines);
                    let size = match &frame {
                        Frame::Message(bytes) => bytes.len(),
                        _ => 0,
                    };
                    let limit = dispatcher.config.max_message_bytes;
                    (
                        handle_frame(dispatcher, frame, framing, limit),
                        framing,
                        size,
                    )
                }
                None => return Ok(()),
            },
        };
        match step {
            Step::Reply(reply) => {
                if !send(out, framing, &reply) {
                    return Ok(());
                }
            }
            Step::Run(job) => {
                let lane = dispatcher.lane(&job);
                if session.queue.push(lane, size, job).is_err() {
                    return Ok(());
                }
            }
            Step::Nothing => {}
        }
    }
}

/// Turns one frame into what to do about it: a reply, a job for the workers, or nothing.
fn handle_frame(
    dispatcher: &mut Dispatcher,
    frame: Frame,
    framing: Framing,
    max_message_bytes: usize,
) -> Step {
    let bytes = match frame {
        Frame::Message(bytes) => bytes,
        Frame::TooLarge => {
            return Step::Reply(message::error(
                &Value::Null,
                code::INVALID_REQUEST,
                format!(
                    "message larger than the limit of {} bytes was discarded; send smaller messages (e.g. split a large write)",
                    max_message_bytes
                ),
                None,
            ))
        }
        Frame::BadHeader(why) => {
            return Step::Reply(message::error(&Value::Null, code::PARSE_ERROR, why, None))
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(Value::Array(items)) => dispatch_batch(dispatcher, items, framing),
        Ok(single) => dispatcher.dispatch(single, framing),
        Err(e) => Step::Reply(message::error(
            &Value::Null,
            code::PARSE_ERROR,
            format!("not valid JSON: {e}"),
            None,
        )),
    }
}

/// JSON-RPC batches exist only in protocol 2025-03-26; every other revision forbids them. A batch
/// whose members need no tool is answered at once; one with calls becomes a job, so its calls
/// take effect in their turn after what was received before it.
fn dispatch_batch(dispatcher: &mut Dispatcher, items: Vec<Value>, framing: Framing) -> Step {
    let version = dispatcher
        .session
        .as_ref()
        .map(|s| s.protocol_version.clone())
        .unwrap_or_default();
    if version != "2025-03-26" {
        return Step::Reply(message::error(
            &Value::Null,
            code::INVALID_REQUEST,
            "JSON-RPC batches are only part of protocol 2025-03-26; send one message at a time",
            None,
        ));
    }
    if items.is_empty() {
        return Step::Reply(message::error(
            &Value::Null,
            code::INVALID_REQUEST,
            "empty batch",
            None,
        ));
    }
    let mut members = Vec::new();
    for item in items {
        let is_initialize = item.get("method") == Some(&json!("initialize"));
        if is_initialize {
            let id = item.get("id").cloned().unwrap_or(Value::Null);
            members.push(BatchItem::Ready(message::error(
                &id,
                code::INVALID_REQUEST,
                "initialize must not be part of a batch",
                None,
            )));
            continue;
        }
        match dispatcher.dispatch(item, framing) {
            Step::Reply(r) => members.push(BatchItem::Ready(r)),
            Step::Run(Job::Call(job)) => members.push(BatchItem::Call(job)),
            // Batches do not nest: dispatch of a single member never yields one.
            Step::Run(Job::Batch(..)) | Step::Nothing => {}
        }
    }
    if members.iter().any(|m| matches!(m, BatchItem::Call(_))) {
        return Step::Run(Job::Batch(members, framing));
    }
    let replies: Vec<Value> = members
        .into_iter()
        .filter_map(|m| match m {
            BatchItem::Ready(r) => Some(r),
            BatchItem::Call(_) => None,
        })
        .collect();
    if replies.is_empty() {
        Step::Nothing
    } else {
        Step::Reply(Value::Array(replies))
    }
}

/// Runs jobs as the queue hands them out. While more calls are already queued (a client
/// pipelining requests), replies collect in the outbox and go out together; a lone call's reply
/// is flushed at once.
fn run_calls(session: &Session, out: &mpsc::SyncSender<Out>) {
    // One buffer for every reply body: a reply to a read is as long as the file, and growing a
    // fresh vector to that size on every call showed up in profiles.
    let mut body = Vec::new();
    while let Some(mut ticket) = session.queue.next() {
        crate::buffer::recycle(&mut body);
        let (answered, framing) = match &mut ticket.job {
            Job::Call(call) => (session.executor.run(call, &mut body), call.framing),
            Job::Batch(items, framing) => (
                session.executor.run_batch(std::mem::take(items), &mut body),
                *framing,
            ),
        };
        // The reply is queued before the lane is freed, so a lane's replies leave in its order.
        let appended = if answered {
            session.outbox.append(framing, &body)
        } else {
            Some(false)
        };
        session.queue.done(ticket);
        let Some(was_empty) = appended else {
            break;
        };
        if !answered {
            continue;
        }
        let signal = if session.queue.is_idle() {
            Out::Flush
        } else if was_empty {
            Out::Pending
        } else {
            continue;
        };
        if out.send(signal).is_err() {
            break;
        }
    }
    let _ = out.send(Out::Flush);
}

/// Frames one message and queues it for the writer; false when the writer is gone.
fn send(tx: &mpsc::SyncSender<Out>, framing: Framing, value: &Value) -> bool {
    // Serialising a Value cannot fail.
    let Ok(body) = serde_json::to_vec(value) else {
        return true;
    };
    let mut framed = Vec::with_capacity(body.len() + 32);
    if write_frame(&mut framed, framing, &body).is_err() {
        return true;
    }
    tx.send(Out::Frame(framed)).is_ok()
}
