//! Shared by the integration tests: a real `filesystem` process spoken to over MCP line framing.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_filesystem");

/// A running server and line-framed access to it.
pub struct Session {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
    pub dir: Option<tempfile::TempDir>,
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
        let mut cmd = Command::new(BIN);
        cmd.args(leading).args(extra);
        Session::from_command(cmd)
    }

    /// A server started from a prepared command (e.g. one with its own environment).
    pub fn from_command(mut cmd: Command) -> Session {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
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

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    pub fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).expect("json");
        line.push(b'\n');
        self.send_raw(&line);
    }

    pub fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read");
        assert!(n > 0, "server closed stdout unexpectedly");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad JSON {line:?}: {e}"))
    }

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

    pub fn initialize(&mut self, version: &str) -> Value {
        let reply = self.request(
            1,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
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

    /// Calls a tool and returns the `result` object (failing on a JSON-RPC error).
    pub fn call(&mut self, id: i64, name: &str, args: Value) -> Value {
        let reply = self.request(id, "tools/call", json!({"name": name, "arguments": args}));
        assert!(reply.get("error").is_none(), "JSON-RPC error: {reply}");
        reply["result"].clone()
    }
}

/// The text of a tool result.
pub fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Reads one `Content-Length` framed message (skipping stray blank lines between messages).
pub fn read_framed(r: &mut impl BufRead) -> Value {
    let mut length = None;
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).expect("read") > 0, "eof in headers");
        let line = line.trim_end();
        if line.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            length = Some(v.parse::<usize>().expect("length"));
        }
    }
    let mut body = vec![0; length.expect("Content-Length header")];
    r.read_exact(&mut body).expect("body");
    serde_json::from_slice(&body).expect("json body")
}

/// Every process directory in `/proc`: its pid and its path (processes that vanish while being
/// looked at are simply missing from what the caller reads next).
pub fn proc_entries() -> Vec<(i32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            Some((pid, entry.path()))
        })
        .collect()
}
