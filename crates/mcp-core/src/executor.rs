//! Running tool calls: the worker threads, their time limit, cancellation and the calls in flight.
//!
//! The dispatcher turns a `tools/call` into a [`CallJob`] and registers it in [`InFlight`], where a
//! `notifications/cancelled` can find it while it waits or runs. Workers take jobs from the
//! [`schedule`](super::schedule) queue in lane order, run them under the call's time limit, write
//! each reply into one reused buffer and hand it to the [`Outbox`]. A cancelled call leaves no
//! reply at all (MCP forbids one), and a tool that panics is answered with an internal error
//! instead of taking the session down.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::batch::Answer;
use super::message::{self, code, RequestId};
use super::output::{Out, Outbox};
use super::protocol::ClientInfo;
use super::reply;
use super::schedule::Queue;
use super::wire::Framing;
use crate::toolset::{CallContext, CancelToken, ToolOutput, Toolset};

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
    pub duration: Duration,
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
pub struct CallJob {
    /// The request it answers.
    pub id: RequestId,
    /// The tool, already checked to be one the toolset lists.
    pub name: String,
    /// Its arguments, taken out of the request rather than copied (a write carries a whole file).
    pub args: Map<String, Value>,
    /// Who asked, and in which revision the reply is written.
    pub client: Arc<ClientInfo>,
    /// Set by `notifications/cancelled`; registered in [`InFlight`] under `id`.
    pub cancel: CancelToken,
    /// How the reply is framed.
    pub framing: Framing,
}

/// One member of a JSON-RPC batch: answered while dispatching, or a call to run in its turn.
pub enum BatchItem {
    /// The member's id and its reply, already known (a ping, an error) and serialised.
    Ready(Value, Vec<u8>),
    /// The id of a member refused unread: the answer had already reached its bound (see
    /// [`batch`](super::batch)).
    Refused(Value),
    /// A call whose reply comes from running it.
    Call(Box<CallJob>),
}

/// What a worker runs.
pub enum Job {
    /// One `tools/call`.
    Call(Box<CallJob>),
    /// A 2025-03-26 batch with at least one tool call: its calls run in order, as one job, and
    /// its replies go out as one array.
    Batch(Vec<BatchItem>, Framing),
}

/// The calls accepted and not yet finished, by request id: where a cancellation finds its call,
/// and what is cancelled when the client goes away.
#[derive(Clone, Default)]
pub struct InFlight(Arc<Mutex<HashMap<RequestId, CancelToken>>>);

impl InFlight {
    /// Registers a call under `id` and returns its cancel token; `None` when a call under that id
    /// is still in progress (a cancel or a reply could not tell the two apart).
    pub fn admit(&self, id: &RequestId) -> Option<CancelToken> {
        let cancel = CancelToken::default();
        if let Ok(mut map) = self.0.lock() {
            if map.contains_key(id) {
                return None;
            }
            map.insert(id.clone(), cancel.clone());
        }
        Some(cancel)
    }

    /// Cancels the call under `id`, if one is in flight (a late cancel is not an error).
    pub fn cancel(&self, id: &RequestId) {
        if let Ok(map) = self.0.lock() {
            if let Some(token) = map.get(id) {
                token.cancel();
            }
        }
    }

    /// Forgets a finished call, freeing its id for reuse.
    fn forget(&self, id: &RequestId) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(id);
        }
    }

    /// Cancels every call that has been accepted and not finished: the client is gone.
    pub fn cancel_all(&self) {
        if let Ok(map) = self.0.lock() {
            map.values().for_each(CancelToken::cancel);
        }
    }
}

/// Everything a tool call needs once it has left the dispatcher.
pub struct Executor {
    /// The tools being served.
    pub toolset: Arc<dyn Toolset>,
    /// Told about every finished call (the call log).
    pub observer: Option<Arc<dyn CallObserver>>,
    /// Shared with the dispatcher, which registers calls and cancels them.
    pub in_flight: InFlight,
    /// Wall-clock limit of every call.
    pub call_timeout: Option<Duration>,
    /// The most bytes one answer carries; the last resort for a tool that left more.
    pub result_budget: crate::budget::ResultBudget,
}

impl Executor {
    /// Runs one call and appends its response to `out`; returns false, with nothing appended,
    /// when it was cancelled (MCP forbids a response to a cancelled request).
    fn run(&self, job: &CallJob, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        if !job.cancel.is_cancelled() {
            let started = Instant::now();
            let mut ctx = CallContext::with_timeout(job.cancel.clone(), self.call_timeout);
            ctx.tool.clone_from(&job.name);
            ctx.client = Some(job.client.clone());
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                self.toolset.call(&job.name, &job.args, &ctx)
            }));
            let id = job.id.to_json();
            match outcome {
                Ok(output) => {
                    let output = self.result_budget.enforce(output);
                    if let Some(observer) = &self.observer {
                        observer.observe(&CallRecord {
                            tool: &job.name,
                            args: &job.args,
                            output: &output,
                            client: &job.client,
                            duration: started.elapsed(),
                        });
                    }
                    reply::write_call_response(out, &id, &output, job.client.revision);
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
        self.in_flight.forget(&job.id);
        if job.cancel.is_cancelled() {
            out.truncate(start);
            return false;
        }
        out.len() > start
    }

    /// Runs a batch's calls in order and writes the array of their replies, each straight into
    /// `out` as it finishes; false when nothing is left to answer (every call in it was
    /// cancelled). Once the answer has reached [`MAX_REPLY_BYTES`](super::batch::MAX_REPLY_BYTES)
    /// the calls after it are not run and are answered with an error saying to send them alone.
    fn run_batch(&self, items: Vec<BatchItem>, out: &mut Vec<u8>) -> bool {
        let mut answer = Answer::new(out);
        for item in items {
            match item {
                BatchItem::Ready(id, reply) => answer.push(&id, &reply),
                BatchItem::Refused(id) => answer.refuse(&id),
                BatchItem::Call(job) if answer.full() => {
                    self.in_flight.forget(&job.id);
                    // A cancelled request gets no reply at all (MCP forbids one).
                    if !job.cancel.is_cancelled() {
                        answer.refuse(&job.id.to_json());
                    }
                }
                BatchItem::Call(job) => answer.push_with(|out| self.run(&job, out)),
            }
        }
        answer.finish()
    }

    /// A worker thread: runs jobs as the queue hands them out and puts their replies in the
    /// outbox, telling the writer (through `out`) when to send them. Returns once the queue is
    /// closed and drained, or aborted, or the output is gone.
    pub fn work(&self, queue: &Queue<Job>, outbox: &Outbox, out: &mpsc::SyncSender<Out>) {
        // One buffer for every reply body: a reply to a read is as long as the file, and growing a
        // fresh vector to that size on every call showed up in profiles.
        let mut body = Vec::new();
        while let Some(mut ticket) = queue.next() {
            crate::buffer::recycle(&mut body);
            let (answered, framing) = match &mut ticket.job {
                Job::Call(call) => (self.run(call, &mut body), call.framing),
                Job::Batch(items, framing) => {
                    (self.run_batch(std::mem::take(items), &mut body), *framing)
                }
            };
            // The reply is queued before the lane is freed, so a lane's replies leave in its order.
            let appended = if answered {
                outbox.append(framing, &body)
            } else {
                Some(false)
            };
            queue.done(ticket);
            let Some(was_empty) = appended else {
                break;
            };
            if !answered {
                continue;
            }
            let Some(signal) = Out::after_append(was_empty, queue.is_idle()) else {
                continue;
            };
            if out.send(signal).is_err() {
                break;
            }
        }
        let _ = out.send(Out::Flush);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::testkit::{after_initialize, initialize, session, wire, Live, STATELESS_META};

    /// Long enough that a test that goes wrong shows a timeout reply instead of hanging; never
    /// reached when it goes right.
    const BOUND: Duration = Duration::from_secs(20);

    #[test]
    fn a_tool_result_carries_structured_content_from_2025_06_18() {
        let call = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"a\\\"b\"}}}\n";
        assert_eq!(
            after_initialize("2025-06-18", call),
            wire(&[
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\"b"}],"structuredContent":{"echoed":"a\"b"},"isError":false}}"#
            ]),
        );
        assert_eq!(
            after_initialize("2024-11-05", call),
            wire(&[
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\"b"}],"isError":false}}"#
            ]),
        );
        let stateless = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"x\"}},{STATELESS_META}}}}}\n");
        assert_eq!(
            session(&stateless),
            wire(&[
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"structuredContent":{"echoed":"x"},"isError":false,"resultType":"complete"}}"#
            ]),
        );
    }

    #[test]
    fn a_tool_failure_is_a_result_with_is_error_not_a_protocol_error() {
        let call = "{\"jsonrpc\":\"2.0\",\"id\":\"f\",\"method\":\"tools/call\",\"params\":{\"name\":\"fail\"}}\n";
        assert_eq!(
            after_initialize("2025-06-18", call),
            wire(&[
                r#"{"jsonrpc":"2.0","id":"f","result":{"content":[{"type":"text","text":"fail: nothing here"}],"isError":true}}"#
            ]),
        );
    }

    #[test]
    fn a_cancelled_call_gets_no_reply_and_the_session_goes_on() {
        let mut live = Live::start(BOUND);
        live.send(&initialize("2025-06-18"));
        live.send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}\n");
        live.started.recv().expect("the call starts");
        // While it runs, its id is taken.
        live.send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}\n");
        live.send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}\n");
        live.send("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\n");
        let output = live.finish();
        let rest = output.split_once('\n').map(|(_, rest)| rest);
        assert_eq!(
            rest,
            Some(
                wire(&[
                    r#"{"error":{"code":-32600,"message":"request id 7 is already used by a call in progress; give every request its own id"},"id":7,"jsonrpc":"2.0"}"#,
                    r#"{"id":8,"jsonrpc":"2.0","result":{}}"#,
                ])
                .as_str()
            ),
        );
    }

    #[test]
    fn a_call_that_runs_out_of_time_is_answered_as_stopped() {
        let mut live = Live::start(Duration::from_millis(1));
        live.send(&initialize("2025-06-18"));
        live.send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}\n");
        let output = live.finish();
        assert_eq!(
            output.lines().nth(1),
            Some(
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Timeout: wait stopped: the call ran longer than the time limit of 0.001 s; nothing was changed. Narrow it (a smaller path, fewer edits, a head or tail limit) or raise --timeout."}],"isError":true}}"#
            ),
        );
    }
}
