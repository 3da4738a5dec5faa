//! An MCP client over stdio to the real binary: a [`Session`] speaks line-framed JSON-RPC to one
//! server process, a [`Client`] adds the handshake and its own request ids for tests that only
//! call tools, and [`initialize`] / [`initialized`] / [`tools_call`] are the messages a client
//! sends, for tests that write them by hand. [`batch`] runs a whole session at once: every
//! message written before the first reply is read, stdin closed, the replies collected.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::arena::Screen;
use crate::race::Tally;

/// A running server and line-framed access to it.
pub struct Session {
    /// The server process (tests kill it, read its pid, or wait for it).
    pub child: Child,
    /// Its stdin; `None` once closed (tests close it to see how the server ends).
    pub stdin: Option<ChildStdin>,
    /// Its stdout, read a line (one message) at a time.
    pub stdout: BufReader<ChildStdout>,
    /// The temporary workspace [`Session::start`] made, kept alive as long as the session.
    pub dir: Option<tempfile::TempDir>,
    /// The root the server was started on (empty when the test passed its own arguments).
    pub root: PathBuf,
}

impl Session {
    /// A server on a fresh temp workspace holding `hello.txt`.
    pub fn start(extra: &[&str]) -> Session {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("hello.txt"), "hello\n").expect("write");
        let root = dir.path().to_path_buf();
        let mut s = Session::spawn(&["--root".as_ref(), root.as_os_str()], extra);
        s.dir = Some(dir);
        s.root = root;
        s
    }

    /// A server on an existing workspace.
    pub fn start_in(root: &Path, extra: &[&str]) -> Session {
        let mut s = Session::spawn(&["--root".as_ref(), root.as_os_str()], extra);
        s.root = root.to_path_buf();
        s
    }

    /// A server with exactly these arguments (e.g. `--server`).
    pub fn spawn(leading: &[&std::ffi::OsStr], extra: &[&str]) -> Session {
        let mut cmd = crate::bin::command();
        cmd.args(leading).args(extra);
        Session::from_command(cmd)
    }

    /// A server started from a prepared command (e.g. one with its own environment); its stderr
    /// is discarded.
    pub fn from_command(mut cmd: Command) -> Session {
        let mut child = spawn_server(&mut cmd);
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Session {
            child,
            stdin,
            stdout,
            dir: None,
            root: PathBuf::new(),
        }
    }

    /// Writes bytes to the server as they are (for framing and hostile-input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    /// Writes one message as a JSON line.
    pub fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).expect("json");
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Reads one JSON line, failing if the server closed stdout or wrote something else.
    pub fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read");
        assert!(n > 0, "server closed stdout unexpectedly");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad JSON {line:?}: {e}"))
    }

    /// Reads one JSON line, or `None` once the server's stdout is closed or broken (a test that
    /// kills the server asks whether a reply got out first).
    pub fn try_recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("reply is JSON")),
        }
    }

    /// Sends a request and returns its reply, failing if the reply answers another id.
    pub fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let reply = self.recv();
        assert_eq!(
            reply["id"],
            json!(id),
            "reply to the wrong request: {reply}"
        );
        reply
    }

    /// The handshake at `version` (request id 1, then the `initialized` notification); returns
    /// the `initialize` reply.
    pub fn initialize(&mut self, version: &str) -> Value {
        let reply = self.request(
            1,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        self.send(initialized());
        reply
    }

    /// Closes stdin and waits for the exit status, failing if the server lingers.
    pub fn close_and_wait(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit on stdin EOF"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Calls a tool and returns (is_error, text) of its result (see [`outcome`]).
    pub fn call_text(&mut self, id: i64, name: &str, args: Value) -> (bool, String) {
        outcome(&self.call(id, name, args))
    }

    /// Calls a tool and returns the `result` object (failing on a JSON-RPC error).
    pub fn call(&mut self, id: i64, name: &str, args: Value) -> Value {
        let reply = self.request(id, "tools/call", json!({"name": name, "arguments": args}));
        assert!(reply.get("error").is_none(), "JSON-RPC error: {reply}");
        reply["result"].clone()
    }
}

/// A tool result as (is_error, text): whether `isError` is set, and its first text block.
pub fn outcome(result: &Value) -> (bool, String) {
    (result["isError"] == json!(true), text(result))
}

/// The text of a tool result parsed as JSON (the pipe tools answer with a JSON body), failing
/// with the whole result when it is not.
pub fn text_json(result: &Value) -> Value {
    serde_json::from_str(&text(result)).unwrap_or_else(|e| panic!("not JSON ({e}): {result}"))
}

/// The text of a tool result (its first content block; empty when there is none).
pub fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The `initialize` request with request id `id` at protocol `version`, from a client named
/// `client` (some tests look for the name in the call log).
pub fn initialize(id: i64, version: &str, client: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": client, "version": "1"}}})
}

/// The `notifications/initialized` notification that ends the handshake.
pub fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// A `tools/call` request for `name` with `args`.
pub fn tools_call(id: i64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": args}})
}

/// One tool result: `ok` unless `isError`, and the whole result serialised (text and
/// structured content), which is what gets screened.
#[derive(Debug)]
pub struct Reply {
    /// The tool succeeded (`isError` not set).
    pub ok: bool,
    /// The result's text.
    pub text: String,
    /// The whole result as JSON text.
    pub raw: String,
}

/// A server process on a root, initialised, with its own request ids.
pub struct Client {
    session: Session,
    next_id: i64,
}

impl Client {
    /// A server on `root` with `flags`, after the handshake.
    pub fn start(root: &Path, flags: &[&str]) -> Client {
        Client::start_with(root, flags, false)
    }

    /// A server that opens paths with the per-component `O_NOFOLLOW` walk instead of `openat2`
    /// when `walk` is set: the fallback must hold under the same races.
    pub fn start_with(root: &Path, flags: &[&str], walk: bool) -> Client {
        let mut cmd = crate::bin::command();
        cmd.arg("--root").arg(root).args(flags);
        if walk {
            cmd.env("FILESYSTEM_NO_OPENAT2", "1");
        }
        let mut session = Session::from_command(cmd);
        session.initialize("2025-06-18");
        Client {
            session,
            next_id: 2,
        }
    }

    /// Calls a tool with the next request id.
    pub fn call(&mut self, tool: &str, args: Value) -> Reply {
        self.next_id += 1;
        let result = self.session.call(self.next_id, tool, args);
        Reply {
            ok: result["isError"] != json!(true),
            text: text(&result),
            raw: result.to_string(),
        }
    }

    /// Calls a tool that must succeed: a step of a scenario, whose failure is the test's, named
    /// with the tool and what it said.
    pub fn must(&mut self, tool: &str, args: Value) -> Reply {
        let reply = self.call(tool, args);
        assert!(reply.ok, "{tool} failed: {}", reply.text);
        reply
    }

    /// Closes stdin and waits for the server to exit, so everything it writes is on disk.
    pub fn close(self) {
        let status = self.session.close_and_wait();
        assert!(status.success(), "server exited with {status}");
    }

    /// Calls, screens the reply and tallies it under `op`.
    pub fn run(
        &mut self,
        op: &str,
        tool: &str,
        args: Value,
        screen: &mut Screen,
        tally: &mut Tally,
    ) -> Reply {
        let reply = self.call(tool, args);
        screen.check(op, &reply.raw);
        tally.record_reply(op, reply.ok, &reply.text);
        reply
    }
}

/// Starts a server from `cmd` talking over piped stdin and stdout, its stderr discarded: how
/// both a [`Session`] and a [`batch`] start theirs.
fn spawn_server(cmd: &mut Command) -> std::process::Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server")
}

/// Starts `cmd` (the binary with its flags), sends the handshake at protocol 2025-06-18 (request
/// id 0) and then `requests`, one JSON per line, closes stdin and returns every reply, sorted by
/// id. The server must exit on end of input and write nothing but JSON lines.
pub fn batch(mut cmd: Command, requests: &[Value]) -> Vec<Value> {
    let mut child = spawn_server(&mut cmd);
    let mut input = String::new();
    for message in [initialize(0, "2025-06-18", "test"), initialized()]
        .iter()
        .chain(requests)
    {
        input.push_str(&format!("{message}\n"));
    }
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write requests");
    let out = child.wait_with_output().expect("server exits on EOF");
    let mut replies: Vec<Value> = String::from_utf8(out.stdout)
        .expect("utf8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    replies.sort_by_key(|r| r["id"].as_u64());
    replies
}
