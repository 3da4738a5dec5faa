//! The JSON-RPC lifecycle of an MCP server over one byte stream: the threads and what joins them.
//!
//! Three kinds of thread, joined by channels: a reader reads and dispatches messages
//! ([`dispatch`](super::dispatch)), workers run tool calls ([`executor`](super::executor)) in
//! lane order ([`schedule`](super::schedule)), and a writer owns the output stream
//! ([`output`](super::output)). Reading on its own thread is what lets `ping` and
//! `notifications/cancelled` be answered while a long call runs, and the bounded queues between
//! them mean a client that sends many requests before reading cannot deadlock against our output.
//!
//! Both eras of the protocol are served (see [`protocol`](super::protocol)): the handshake
//! revisions, opened with `initialize`, and the stateless 2026-07-28 revision.

use std::io::{self, BufRead, BufWriter, Write};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::dispatch::{Dispatcher, Step};
use super::executor::{Executor, InFlight, Job};
use super::output::{write_loop, Out, Outbox};
use super::peer::Peer;
use super::schedule::{Queue, QueueLimits};
use super::wire::{write_frame, Frame, FrameReader, Framing};
use crate::budget::ResultBudget;
use crate::toolset::Toolset;

// Callers name these through the server, the one module they start a session with.
pub use super::executor::{CallObserver, CallRecord};
pub use super::protocol::ClientInfo;

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
    /// The most bytes one tool answer carries (`--max-result-bytes`); an answer a tool left
    /// larger is cut by [`ResultBudget::enforce`] before it is sent.
    pub result_budget: ResultBudget,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_message_bytes: 64 * 1024 * 1024,
            page_size: 100,
            call_timeout: Some(Duration::from_secs(30)),
            workers: 1,
            result_budget: ResultBudget::default(),
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
        self.executor.in_flight.cancel_all();
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
    let in_flight = InFlight::default();
    let mut dispatcher = Dispatcher::new(
        toolset.clone(),
        config.page_size,
        config.max_message_bytes,
        in_flight.clone(),
    );
    let mut reader = FrameReader::new(input, config.max_message_bytes);
    let mut output = BufWriter::with_capacity(64 * 1024, output);

    // The first exchange (normally `initialize`) is answered before any thread exists: the output
    // pipe is still empty, so one small reply cannot block, and the client hears back without
    // waiting for thread start-up.
    let first = match reader.read_frame()? {
        Some(frame) => {
            let framing = reader.framing().unwrap_or(Framing::Lines);
            match dispatcher.handle_frame(frame, framing) {
                Step::Reply(reply) => {
                    let body = serde_json::to_vec(&reply).map_err(io::Error::other)?;
                    write_frame(&mut output, framing, &body)?;
                    output.flush()?;
                    None
                }
                Step::Frame(body) => {
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
            result_budget: config.result_budget,
        },
        queue: Queue::new(QueueLimits {
            jobs: QUEUED_CALLS,
            bytes: QUEUED_BYTES.max(config.max_message_bytes),
        }),
        outbox: Arc::default(),
    });
    let (end_tx, end_rx) = mpsc::channel::<End>();

    let (out_tx, out_rx) = mpsc::sync_channel::<Out>(QUEUED_FRAMES);
    // The framing is fixed by the first message; the server's own requests use it too. The peer
    // lives in the dispatcher, on the reader thread, so its channel closes when reading ends.
    let framing = reader.framing().unwrap_or(Framing::Lines);
    dispatcher.attach(Peer::new(out_tx.clone(), framing));
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
                .spawn(move || session.executor.work(&session.queue, &session.outbox, &out))?,
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
                    (dispatcher.handle_frame(frame, framing), framing, size)
                }
                None => return Ok(()),
            },
        };
        match step {
            Step::Reply(reply) => {
                // Serialising a Value cannot fail.
                let body = serde_json::to_vec(&reply).unwrap_or_default();
                if !send(out, framing, &body) {
                    return Ok(());
                }
            }
            Step::Frame(body) => {
                if !send(out, framing, &body) {
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

/// Frames one serialised message and queues it for the writer; false when the writer is gone.
fn send(tx: &mpsc::SyncSender<Out>, framing: Framing, body: &[u8]) -> bool {
    let mut framed = Vec::with_capacity(body.len() + 32);
    if write_frame(&mut framed, framing, body).is_err() {
        return true;
    }
    tx.send(Out::Frame(framed)).is_ok()
}

#[cfg(test)]
mod tests {
    use crate::testkit::{after_initialize, session, wire};

    #[test]
    fn content_length_framing_is_answered_in_kind() {
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"é"}}}"#;
        let init = crate::testkit::initialize("2025-06-18");
        let init = init.trim_end();
        let input: String = [init, ping, call]
            .iter()
            .map(|m| format!("Content-Length: {}\r\n\r\n{m}", m.len()))
            .collect();
        let output = session(&input);
        let bodies: Vec<&str> = output.split("Content-Length: ").skip(1).collect();
        assert_eq!(bodies.len(), 3, "{output}");
        let pong = r#"{"id":1,"jsonrpc":"2.0","result":{}}"#;
        assert_eq!(bodies[1], format!("{}\r\n\r\n{pong}", pong.len()));
        let body = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"é"}],"structuredContent":{"echoed":"é"},"isError":false}}"#;
        assert_eq!(bodies[2], format!("{}\r\n\r\n{body}", body.len()));
    }

    #[test]
    fn empty_input_ends_the_session_without_a_word() {
        assert_eq!(session(""), "");
    }

    #[test]
    fn pipelined_calls_are_answered_in_the_order_they_were_sent() {
        let calls: String = (1..=300)
            .map(|n| format!("{{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{n}\"}}}}}}\n"))
            .collect();
        let expected: Vec<String> = (1..=300)
            .map(|n| format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"content":[{{"type":"text","text":"{n}"}}],"isError":false}}}}"#))
            .collect();
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        assert_eq!(after_initialize("2024-11-05", &calls), wire(&expected));
    }
}
