//! Requests from the server to the client (`roots/list`), and what the client tells the toolset
//! besides tool calls.
//!
//! MCP lets a server ask its client things: the only one this server asks is `roots/list`, but
//! the mechanism is general. A [`Peer`] gives each request its own id, frames it in the
//! session's framing and queues it to the writer thread (which owns the output, so a request
//! never interleaves with a reply); the client's response arrives on the reader thread, which
//! hands it to the handler registered under that id. Nothing waits: a toolset that needs the
//! answer reacts in its handler. The core only carries messages; what they mean (a directory, a
//! root) is the toolset's business.

use std::collections::HashMap;
use std::sync::mpsc::SyncSender;
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use super::message::RequestId;
use super::output::Out;
use super::protocol::ClientInfo;
use super::wire::{write_frame, Framing};

/// The most server requests awaiting an answer at once: a client that never answers cannot make
/// the table grow without bound; past it a new request is refused.
pub const MAX_PENDING: usize = 16;

/// What the client answered to a server request.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientReply {
    /// The request's `result`.
    Result(Value),
    /// The request's `error`: its code and message, as the client sent them.
    Error {
        /// The JSON-RPC error code (e.g. -32601 when the client has no such method).
        code: i64,
        /// The client's message.
        message: String,
    },
}

/// Called on the reader thread with the client's answer. It must not wait for another message
/// (the reader delivers them): it records the answer and returns.
pub type ReplyHandler = Box<dyn FnOnce(ClientReply, &Peer) + Send>;

/// Why a server request was not sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PeerError {
    /// [`MAX_PENDING`] requests are still unanswered.
    #[error("{MAX_PENDING} requests to the client are still unanswered")]
    TooManyPending,
    /// The writer is gone: the session is ending.
    #[error("the client's connection is closed")]
    Closed,
}

/// The client side of a session, for sending it requests. Lent to the toolset by reference only
/// (see [`crate::toolset::Toolset::client_event`]): it holds the writer's channel, and the session
/// ends when every holder of that channel is gone.
pub struct Peer {
    out: SyncSender<Out>,
    framing: Framing,
    state: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    next_id: u64,
    handlers: HashMap<RequestId, ReplyHandler>,
}

impl Peer {
    /// A peer writing through `out` in `framing` (the session's, fixed by its first message).
    pub fn new(out: SyncSender<Out>, framing: Framing) -> Peer {
        Peer {
            out,
            framing,
            state: Mutex::default(),
        }
    }

    /// Sends the request `method` (with `params` when given) and registers `on_reply` for its
    /// answer.
    pub fn request(
        &self,
        method: &str,
        params: Option<Value>,
        on_reply: ReplyHandler,
    ) -> Result<(), PeerError> {
        let id = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.handlers.len() >= MAX_PENDING {
                return Err(PeerError::TooManyPending);
            }
            state.next_id += 1;
            // Ids of our own, in a namespace apart from the client's (JSON-RPC ids are per sender,
            // but a readable prefix makes a transcript easy to follow).
            let id = RequestId::Text(format!("server-{}", state.next_id));
            state.handlers.insert(id.clone(), on_reply);
            id
        };
        let mut message = json!({"jsonrpc": "2.0", "id": id.to_json(), "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        let mut framed = Vec::new();
        let sent = serde_json::to_vec(&message)
            .ok()
            .is_some_and(|body| write_frame(&mut framed, self.framing, &body).is_ok())
            && self.out.send(Out::Frame(framed)).is_ok();
        if !sent {
            self.forget(&id);
            return Err(PeerError::Closed);
        }
        Ok(())
    }

    fn forget(&self, id: &RequestId) -> Option<ReplyHandler> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.handlers.remove(id)
    }

    /// Hands a response from the client to the handler of the request it answers; a response to
    /// no pending request (unknown or answered already) is ignored, as JSON-RPC allows nothing
    /// else.
    pub fn deliver(&self, id: &Value, outcome: Result<Value, Value>) {
        let Some(id) = RequestId::from_json(id) else {
            return;
        };
        let Some(handler) = self.forget(&id) else {
            return;
        };
        let reply = match outcome {
            Ok(result) => ClientReply::Result(result),
            Err(error) => ClientReply::Error {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            },
        };
        handler(reply, self);
    }
}

/// What the client said that is not a tool call, as the toolset hears it.
#[derive(Debug, Clone, Copy)]
pub enum ClientEvent<'a> {
    /// The handshake is complete (`notifications/initialized`): from now on the server may send
    /// requests. Carries the client and the capabilities it declared in `initialize`.
    Initialized {
        /// Who the client is and which revision the session speaks.
        client: &'a ClientInfo,
        /// `initialize`'s `params.capabilities` (an empty object when it sent none).
        capabilities: &'a Value,
    },
    /// Any other notification (`notifications/roots/list_changed`, …) except cancellation, which
    /// the core handles itself.
    Notification {
        /// The notification's method.
        method: &'a str,
        /// Its params.
        params: &'a Map<String, Value>,
    },
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};

    use super::*;

    fn frame(rx: &mpsc::Receiver<Out>) -> String {
        match rx.try_recv() {
            Ok(Out::Frame(bytes)) => String::from_utf8(bytes).expect("utf-8"),
            _ => panic!("no frame was queued"),
        }
    }

    /// A handler that keeps what it was given.
    fn keeper() -> (Arc<Mutex<Vec<ClientReply>>>, ReplyHandler) {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let k = kept.clone();
        let handler: ReplyHandler = Box::new(move |reply, _| k.lock().expect("lock").push(reply));
        (kept, handler)
    }

    #[test]
    fn a_request_is_framed_in_the_sessions_framing_and_its_answer_reaches_its_handler() {
        let (tx, rx) = mpsc::sync_channel(8);
        let peer = Peer::new(tx, Framing::Headers);
        let (kept, handler) = keeper();
        peer.request("roots/list", None, handler).expect("sent");
        let body = r#"{"id":"server-1","jsonrpc":"2.0","method":"roots/list"}"#;
        assert_eq!(
            frame(&rx),
            format!("Content-Length: {}\r\n\r\n{body}", body.len())
        );
        // An answer to another id is not this request's; the right one is delivered once.
        peer.deliver(&json!("server-9"), Ok(json!({})));
        peer.deliver(&json!(1), Ok(json!({})));
        assert!(kept.lock().expect("lock").is_empty());
        peer.deliver(&json!("server-1"), Ok(json!({"roots": []})));
        peer.deliver(&json!("server-1"), Ok(json!({"roots": [1]})));
        assert_eq!(
            *kept.lock().expect("lock"),
            [ClientReply::Result(json!({"roots": []}))]
        );
    }

    #[test]
    fn an_error_answer_carries_the_clients_code_and_message() {
        let (tx, rx) = mpsc::sync_channel(8);
        let peer = Peer::new(tx, Framing::Lines);
        let (kept, handler) = keeper();
        peer.request("x/y", Some(json!({"a": 1})), handler)
            .expect("sent");
        assert_eq!(
            frame(&rx),
            "{\"id\":\"server-1\",\"jsonrpc\":\"2.0\",\"method\":\"x/y\",\"params\":{\"a\":1}}\n"
        );
        peer.deliver(
            &json!("server-1"),
            Err(json!({"code": -32601, "message": "no"})),
        );
        assert_eq!(
            *kept.lock().expect("lock"),
            [ClientReply::Error {
                code: -32601,
                message: "no".into()
            }]
        );
    }

    #[test]
    fn unanswered_requests_are_bounded_and_a_closed_writer_refuses() {
        let (tx, rx) = mpsc::sync_channel(MAX_PENDING + 1);
        let peer = Peer::new(tx, Framing::Lines);
        for _ in 0..MAX_PENDING {
            peer.request("m", None, keeper().1).expect("room");
        }
        assert_eq!(
            peer.request("m", None, keeper().1),
            Err(PeerError::TooManyPending)
        );
        drop(rx);
        peer.deliver(&json!("server-1"), Ok(json!({})));
        assert_eq!(peer.request("m", None, keeper().1), Err(PeerError::Closed));
    }
}
