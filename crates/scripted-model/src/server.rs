//! The endpoint: a listener on 127.0.0.1, one thread per connection, the records of every
//! request.

use std::collections::HashSet;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use serde_json::Value;

use crate::conversation::{Api, Conversation};
use crate::gemini::{self, Method};
use crate::http::{self, Request, Response};
use crate::record::{Kind, Record, ToolResultSeen};
use crate::script::{next_action, Action, Script};
use crate::{anthropic, openai};

/// What answers a side request: a harness that asks for a title or a one-word check gets this.
pub const AUXILIARY_TEXT: &str = "Scripted session";

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No port could be bound on 127.0.0.1.
    #[error("binding 127.0.0.1:0: {0}")]
    Bind(io::Error),
    /// The script list was empty.
    #[error("no script given: pass at least one")]
    NoScript,
}

/// Called with each record as it is made (the binary writes them out as JSON lines).
pub type RecordSink = Box<dyn Fn(&Record) + Send + Sync>;

struct State {
    records: Vec<Record>,
    seen_results: HashSet<String>,
    next_id: u64,
}

struct Shared {
    scripts: Vec<Script>,
    state: Mutex<State>,
    sink: Option<RecordSink>,
}

/// A running scripted model endpoint; it stops when dropped.
pub struct ScriptedModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl ScriptedModel {
    /// Starts an endpoint on an ephemeral port of 127.0.0.1 playing `scripts`: a conversation
    /// gets the first script whose `when` its user text contains (or that has none).
    pub fn start(scripts: Vec<Script>) -> Result<ScriptedModel, StartError> {
        ScriptedModel::start_with(scripts, None)
    }

    /// [`start`](Self::start), with every record also handed to `sink`.
    pub fn start_with(
        scripts: Vec<Script>,
        sink: Option<RecordSink>,
    ) -> Result<ScriptedModel, StartError> {
        if scripts.is_empty() {
            return Err(StartError::NoScript);
        }
        let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(StartError::Bind)?;
        let addr = listener.local_addr().map_err(StartError::Bind)?;
        let shared = Arc::new(Shared {
            scripts,
            state: Mutex::new(State {
                records: Vec::new(),
                seen_results: HashSet::new(),
                next_id: 1,
            }),
            sink,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
            std::thread::spawn(move || accept_loop(listener, shared, stop))
        };
        Ok(ScriptedModel {
            addr,
            shared,
            stop,
            accept: Some(accept),
        })
    }

    /// `http://127.0.0.1:PORT`: Claude Code's `ANTHROPIC_BASE_URL`, and Gemini CLI's
    /// `GOOGLE_GEMINI_BASE_URL` (its client adds `/v1beta/models/{model}:…`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: a Codex `model_providers` entry's `base_url`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request so far, in the order they were answered.
    pub fn records(&self) -> Vec<Record> {
        self.shared.lock().records.clone()
    }

    /// Every tool result the model received, once each, in the order it first arrived.
    pub fn tool_results(&self) -> Vec<ToolResultSeen> {
        self.shared
            .lock()
            .records
            .iter()
            .flat_map(|r| r.new_results.iter().cloned())
            .collect()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag; if the connect fails the listener is gone.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let shared = Arc::clone(&shared);
        // A connection ends when the harness closes it or goes quiet past the I/O deadline.
        std::thread::spawn(move || {
            let _ = http::serve(stream, |request| shared.answer(request));
        });
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in one connection's answer must not hide the records from the test.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn answer(&self, request: &Request) -> Response {
        let path = request.path();
        let gemini_route = gemini::route(path);
        let api = if path.ends_with("/messages") || path.ends_with("/messages/count_tokens") {
            Some(Api::Anthropic)
        } else if path.ends_with("/responses") {
            Some(Api::Openai)
        } else if gemini_route.is_some() {
            Some(Api::Gemini)
        } else {
            None
        };
        let mut record = Record {
            seq: 0,
            api,
            method: request.method.clone(),
            target: request.target.clone(),
            kind: Kind::Unknown,
            model: None,
            user_agent: request.header("user-agent").map(String::from),
            script: None,
            offered: Vec::new(),
            deferred: Vec::new(),
            system_chars: 0,
            body_bytes: request.body.len(),
            calls_so_far: 0,
            new_results: Vec::new(),
            answer: None,
            diverged: None,
        };
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        let response = match (request.method.as_str(), api) {
            ("POST", Some(Api::Anthropic)) if path.ends_with("/count_tokens") => {
                record.kind = Kind::CountTokens;
                Response {
                    status: 200,
                    content_type: "application/json",
                    body: anthropic::count_tokens(request.body.len()),
                }
            }
            ("POST", Some(Api::Gemini))
                if matches!(gemini_route, Some((_, Method::CountTokens))) =>
            {
                record.kind = Kind::CountTokens;
                Response {
                    status: 200,
                    content_type: "application/json",
                    body: gemini::count_tokens(request.body.len()),
                }
            }
            ("POST", Some(api)) => match serde_json::from_slice::<Value>(&request.body) {
                Ok(body) => {
                    let conv = match api {
                        Api::Anthropic => anthropic::parse(&body),
                        Api::Openai => openai::parse(&body),
                        Api::Gemini => {
                            // The route is there: it is what made the API Gemini's.
                            let (model, method) = gemini_route
                                .clone()
                                .unwrap_or_else(|| ("scripted".into(), Method::Generate));
                            gemini::parse(&body, &model, method == Method::Stream)
                        }
                    };
                    let action = self.turn(&conv, &mut state, &mut record);
                    let (body, content_type) = match api {
                        Api::Anthropic => anthropic::answer(
                            &action,
                            conv.model.as_deref().unwrap_or("scripted"),
                            id,
                            conv.stream,
                        ),
                        Api::Openai => openai::answer(&action, id),
                        Api::Gemini => gemini::answer(
                            &action,
                            conv.model.as_deref().unwrap_or("scripted"),
                            id,
                            conv.stream,
                            conv.response_schema.as_ref(),
                        ),
                    };
                    record.answer = Some(action);
                    Response {
                        status: 200,
                        content_type,
                        body,
                    }
                }
                Err(e) => Response::error(400, &format!("the body is not JSON: {e}")),
            },
            ("GET", None) if path.ends_with("/models") => Response {
                status: 200,
                content_type: "application/json",
                body: br#"{"object":"list","data":[],"models":[]}"#.to_vec(),
            },
            _ => Response::error(404, &format!("no such endpoint: {} {path}", request.method)),
        };
        record.seq = state.records.len() as u64;
        if let Some(sink) = &self.sink {
            sink(&record);
        }
        state.records.push(record);
        response
    }

    /// Works out a turn's answer and fills in its record.
    fn turn(&self, conv: &Conversation, state: &mut State, record: &mut Record) -> Action {
        record.model = conv.model.clone();
        record.offered = conv.offered.clone();
        record.deferred = conv.deferred.clone();
        record.system_chars = conv.system_chars;
        record.calls_so_far = conv.calls.len();
        for call in &conv.calls {
            let Some(result) = &call.result else { continue };
            if state.seen_results.insert(call.id.clone()) {
                record.new_results.push(ToolResultSeen {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    namespace: call.namespace.clone(),
                    input: call.input.clone(),
                    parts: result.parts.clone(),
                    is_error: result.is_error,
                });
            }
        }
        if conv.is_auxiliary() {
            record.kind = Kind::Auxiliary;
            return Action::Text {
                text: AUXILIARY_TEXT.into(),
            };
        }
        record.kind = Kind::Turn;
        let script = self.scripts.iter().find(|s| {
            s.when
                .as_deref()
                .is_none_or(|needle| conv.user_text.contains(needle))
        });
        let Some(script) = script else {
            let why = "no script's `when` is in the user's text".to_string();
            record.diverged = Some(why.clone());
            return Action::Text {
                text: format!("scripted model: {why}"),
            };
        };
        record.script = Some(script.name.clone());
        let next = next_action(script, conv);
        record.diverged = next.diverged;
        next.action
    }
}
