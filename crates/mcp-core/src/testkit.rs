//! A tiny toolset and a session driver for the core's unit tests.
//!
//! The core's tests pin the exact bytes a client receives, so they run the real server loop
//! ([`serve`]) in-process over byte buffers and pipes, with tools that do nothing but what a test
//! needs: answer, fail, or wait to be cancelled. Integration tests elsewhere start the binary
//! with the real toolsets; these stay below the toolsets, where the protocol is decided.

use std::io::{self, BufReader, Cursor, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::server::{serve, ServerConfig};
use crate::toolset::{CallContext, Effects, ToolDef, ToolOutput, Toolset};

/// Three tools: `echo` (returns its `text`, with structured content), `fail` (a tool error) and
/// `wait` (says it has started, then runs until cancelled or out of time).
pub struct Tiny {
    started: Mutex<Option<mpsc::Sender<()>>>,
}

impl Tiny {
    /// The toolset, and a receiver that hears each time `wait` starts running.
    pub fn new() -> (Self, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        (
            Tiny {
                started: Mutex::new(Some(tx)),
            },
            rx,
        )
    }
}

fn tool(name: &str, effects: Effects) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: name.to_uppercase(),
        description: format!("the {name} tool"),
        input_schema: json!({"type": "object"}),
        output_schema: (name == "echo").then(|| json!({"type": "object"})),
        effects,
    }
}

impl Toolset for Tiny {
    fn mode(&self) -> String {
        "tiny".into()
    }

    fn instructions(&self) -> String {
        "Tools for tests.".into()
    }

    fn tools(&self) -> Vec<ToolDef> {
        vec![
            tool("echo", Effects::READ_ONLY),
            tool("fail", Effects::default()),
            tool("wait", Effects::READ_ONLY),
        ]
    }

    fn call(&self, name: &str, args: &Map<String, Value>, ctx: &CallContext) -> ToolOutput {
        match name {
            "echo" => {
                let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
                ToolOutput::structured(text, json!({ "echoed": text }))
            }
            "wait" => {
                if let Some(tx) = self.started.lock().ok().and_then(|g| g.clone()) {
                    let _ = tx.send(());
                }
                loop {
                    if let Err(stop) = ctx.check() {
                        return ToolOutput::stopped(stop, "wait");
                    }
                    thread::sleep(Duration::from_millis(1));
                }
            }
            _ => ToolOutput::error("NotFound", "fail: nothing here"),
        }
    }
}

/// A writer the test keeps a handle on after the server has taken it.
#[derive(Clone, Default)]
pub struct SharedOutput(Arc<Mutex<Vec<u8>>>);

impl SharedOutput {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8(bytes).expect("the server writes UTF-8")
    }
}

impl Write for SharedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The settings the tests run with: pages of two tools, no time limit.
pub fn config() -> ServerConfig {
    ServerConfig {
        page_size: 2,
        call_timeout: None,
        ..ServerConfig::default()
    }
}

/// Serves `input` (every message already written, then end of input) and returns the output.
pub fn session(input: &str) -> String {
    let (tools, _started) = Tiny::new();
    let out = SharedOutput::default();
    let result = serve(
        Arc::new(tools),
        config(),
        None,
        Cursor::new(input.as_bytes().to_vec()),
        out.clone(),
    );
    assert!(result.is_ok(), "the session ended with {result:?}");
    out.text()
}

/// The `initialize` request of a session opened with `revision`.
pub fn initialize(revision: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{revision}","capabilities":{{}},"clientInfo":{{"name":"unit","version":"9"}}}}}}"#
    ) + "\n"
}

/// Opens a session with `revision`, sends `input` after the `initialize`, and returns the
/// output lines after the answer to it (which [`initialized`] pins), with their newlines.
pub fn after_initialize(revision: &str, input: &str) -> String {
    let output = session(&(initialize(revision) + input));
    let Some((first, rest)) = output.split_once('\n') else {
        panic!("no answer to initialize in {output:?}");
    };
    assert!(
        first.starts_with(r#"{"id":0,"jsonrpc":"2.0","result":{"capabilities""#),
        "{first}"
    );
    rest.to_string()
}

/// Expected output: each line as it goes on the wire, with `{VERSION}` standing for this
/// crate's version (it is in every `serverInfo`).
pub fn wire(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| l.replace("{VERSION}", env!("CARGO_PKG_VERSION")) + "\n")
        .collect()
}

/// The `_meta` of a stateless (2026-07-28) request, as the members of an object.
pub const STATELESS_META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"s","version":"2"}}"#;

/// A live session over a pipe: the test writes messages one at a time and can wait for a call
/// to be running before it sends the next.
pub struct Live {
    input: Option<os_pipe::PipeWriter>,
    /// Hears each time the `wait` tool starts.
    pub started: mpsc::Receiver<()>,
    output: SharedOutput,
    server: thread::JoinHandle<io::Result<()>>,
}

impl Live {
    /// Starts a server whose calls may run for at most `timeout` (a bound on a test that goes
    /// wrong, not a measurement).
    pub fn start(timeout: Duration) -> Self {
        let (reader, writer) = os_pipe::pipe().expect("a pipe");
        let (tools, started) = Tiny::new();
        let output = SharedOutput::default();
        let config = ServerConfig {
            call_timeout: Some(timeout),
            ..config()
        };
        let server = {
            let output = output.clone();
            thread::spawn(move || {
                serve(
                    Arc::new(tools),
                    config,
                    None,
                    BufReader::new(reader),
                    output,
                )
            })
        };
        Live {
            input: Some(writer),
            started,
            output,
            server,
        }
    }

    /// Writes raw bytes to the server's input.
    pub fn send(&mut self, text: &str) {
        if let Some(input) = &mut self.input {
            input.write_all(text.as_bytes()).expect("the server reads");
        }
    }

    /// Ends the input, waits for the server to finish, and returns everything it wrote.
    pub fn finish(mut self) -> String {
        drop(self.input.take());
        let result = self.server.join().expect("the server thread");
        assert!(result.is_ok(), "the session ended with {result:?}");
        self.output.text()
    }
}
