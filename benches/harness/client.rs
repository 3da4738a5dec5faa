//! A minimal MCP client over stdio: enough to start a server, shake hands, call tools one at a
//! time or pipelined, and read the server's peak memory before it exits.
//!
//! It speaks newline-delimited JSON (the MCP standard every peer understands) and keeps its own
//! cost low — requests are serialised before the clock starts and replies are parsed only as far
//! as their id and error flags — so that what is timed is the server, not the driver.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::BenchError;

/// The protocol revision the driver asks for: the newest one every peer negotiates.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// How to start one server: a program, its arguments and the directory it runs in.
#[derive(Clone, Debug)]
pub struct Launch {
    /// What people call this server in the report.
    pub label: String,
    /// The executable.
    pub program: PathBuf,
    /// Its arguments, the workspace root included.
    pub args: Vec<String>,
    /// Where its stderr goes (kept for post-mortems; never mixed with the protocol).
    pub stderr_log: Option<PathBuf>,
}

impl Launch {
    fn command(&self) -> Result<Command, BenchError> {
        let mut cmd = Command::new(&self.program);
        // The cases compare whole answers with servers that do not page, so this server's result
        // budget is lifted for every subject (an older build and the peers ignore the variable).
        cmd.args(&self.args)
            .env("FILESYSTEM_MAX_RESULT_BYTES", "1000000000")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        match &self.stderr_log {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| BenchError::io(format!("open {}", path.display()), e))?;
                cmd.stderr(file);
            }
            None => {
                cmd.stderr(Stdio::null());
            }
        }
        Ok(cmd)
    }
}

/// Kills a server that stops answering, so one hung peer cannot hang the whole run.
struct Watchdog {
    done: Arc<AtomicBool>,
}

impl Watchdog {
    fn arm(pid: u32, limit: Duration) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < limit {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
            if !flag.load(Ordering::Relaxed) {
                if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        });
        Watchdog { done }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// The parts of a JSON-RPC reply the driver looks at; everything else is skipped unparsed.
#[derive(Deserialize)]
struct ReplyHead {
    id: Option<Value>,
    method: Option<String>,
    error: Option<Value>,
    result: Option<ResultFlags>,
}

#[derive(Deserialize)]
struct ResultFlags {
    #[serde(default, rename = "isError")]
    is_error: bool,
}

/// A running server and a line-framed conversation with it.
pub struct Server {
    label: String,
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    started: Instant,
    _watchdog: Watchdog,
}

/// One tool call's answer.
#[derive(Debug)]
pub struct ToolReply {
    /// The concatenated text content.
    pub text: String,
    /// The whole `result` object.
    pub result: Value,
}

impl Server {
    /// Starts the server; `limit` is how long the whole session may take before it is killed.
    pub fn spawn(launch: &Launch, limit: Duration) -> Result<Server, BenchError> {
        let mut cmd = launch.command()?;
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|e| {
            BenchError::io(
                format!("start {} ({})", launch.label, launch.program.display()),
                e,
            )
        })?;
        let stdin = child
            .stdin
            .take()
            .map(|s| BufWriter::with_capacity(256 * 1024, s));
        let Some(stdout) = child.stdout.take() else {
            return Err(BenchError::Protocol(format!(
                "{}: no stdout pipe",
                launch.label
            )));
        };
        let _watchdog = Watchdog::arm(child.id(), limit);
        Ok(Server {
            label: launch.label.clone(),
            child,
            stdin,
            stdout: BufReader::with_capacity(1024 * 1024, stdout),
            next_id: 1,
            started,
            _watchdog,
        })
    }

    /// When the process was started (for start-up timing).
    pub fn started(&self) -> Instant {
        self.started
    }

    fn stdin(&mut self) -> Result<&mut BufWriter<ChildStdin>, BenchError> {
        let label = self.label.clone();
        self.stdin
            .as_mut()
            .ok_or_else(|| BenchError::Protocol(format!("{label}: stdin already closed")))
    }

    fn send(&mut self, message: &Value) -> Result<(), BenchError> {
        let mut line = serde_json::to_vec(message)
            .map_err(|e| BenchError::Protocol(format!("cannot encode a request: {e}")))?;
        line.push(b'\n');
        let label = self.label.clone();
        let stdin = self.stdin()?;
        stdin
            .write_all(&line)
            .and_then(|()| stdin.flush())
            .map_err(|e| BenchError::io(format!("write to {label}"), e))
    }

    /// Reads the server's next output line into `line`. The end of its output is an error that
    /// says what was still awaited: `awaited` completes "… closed its output …".
    fn read_line(
        &mut self,
        line: &mut Vec<u8>,
        awaited: impl FnOnce() -> String,
    ) -> Result<(), BenchError> {
        line.clear();
        let n = self
            .stdout
            .read_until(b'\n', line)
            .map_err(|e| BenchError::io(format!("read from {}", self.label), e))?;
        if n == 0 {
            return Err(BenchError::Protocol(format!(
                "{} closed its output {}",
                self.label,
                awaited()
            )));
        }
        Ok(())
    }

    /// Reads lines until the reply to `id` arrives (server notifications are skipped).
    fn recv_reply(&mut self, id: u64) -> Result<Value, BenchError> {
        let mut line = Vec::new();
        loop {
            self.read_line(&mut line, || {
                format!("before answering request {id} (see its stderr log)")
            })?;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: Value = serde_json::from_slice(&line).map_err(|e| {
                BenchError::Protocol(format!("{} wrote a line that is not JSON: {e}", self.label))
            })?;
            if value.get("method").is_some() {
                continue;
            }
            if value.get("id") == Some(&json!(id)) {
                return Ok(value);
            }
        }
    }

    /// Sends one request and waits for its result; a JSON-RPC error is an `Err`.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, BenchError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let reply = self.recv_reply(id)?;
        if let Some(error) = reply.get("error") {
            return Err(BenchError::Protocol(format!(
                "{} answered {method} with an error: {error}",
                self.label
            )));
        }
        Ok(reply.get("result").cloned().unwrap_or(Value::Null))
    }

    /// `initialize` then `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self) -> Result<Value, BenchError> {
        let result = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "filesystem-bench", "version": "1"}
            }),
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(result)
    }

    /// Every tool the server lists, following pagination.
    pub fn list_tools(&mut self) -> Result<Vec<Value>, BenchError> {
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let result = self.request("tools/list", params)?;
            if let Some(list) = result.get("tools").and_then(Value::as_array) {
                tools.extend(list.iter().cloned());
            }
            match result.get("nextCursor") {
                Some(c) if !c.is_null() => cursor = Some(c.clone()),
                _ => return Ok(tools),
            }
        }
    }

    /// One tool call, waiting for its answer; a tool failure (`isError`) is an `Err` naming it.
    pub fn call_tool(
        &mut self,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<ToolReply, BenchError> {
        let result = self.request("tools/call", json!({"name": name, "arguments": args}))?;
        let text = result
            .get("content")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("")
            })
            .unwrap_or_default();
        if result.get("isError") == Some(&Value::Bool(true)) {
            let short: String = text.chars().take(300).collect();
            return Err(BenchError::ToolFailed(format!(
                "{}: {name} failed: {short}",
                self.label
            )));
        }
        Ok(ToolReply { text, result })
    }

    /// Sends one tool call per element of `calls` without waiting — a writer thread feeds the
    /// server while this thread reads the answers — and returns the time from the first byte
    /// sent to the last answer read. Requests are encoded before the clock starts.
    pub fn pipelined_calls(
        &mut self,
        name: &str,
        calls: &[Map<String, Value>],
    ) -> Result<Duration, BenchError> {
        let count = calls.len() as u64;
        let first = self.next_id;
        let mut batch = Vec::new();
        for (i, args) in calls.iter().enumerate() {
            let request = json!({
                "jsonrpc": "2.0", "id": first + i as u64, "method": "tools/call",
                "params": {"name": name, "arguments": args}
            });
            serde_json::to_writer(&mut batch, &request)
                .map_err(|e| BenchError::Protocol(format!("cannot encode a request: {e}")))?;
            batch.push(b'\n');
        }
        self.next_id += count;
        let Some(mut stdin) = self.stdin.take() else {
            return Err(BenchError::Protocol(format!(
                "{}: stdin closed",
                self.label
            )));
        };
        let start = Instant::now();
        let writer = thread::spawn(move || {
            let written = stdin.write_all(&batch).and_then(|()| stdin.flush());
            (stdin, written)
        });
        let mut answered = 0u64;
        let mut failures = 0u64;
        let mut first_failure = String::new();
        let mut line = Vec::new();
        while answered < count {
            self.read_line(&mut line, || format!("after {answered} of {count} answers"))?;
            let head: ReplyHead = match serde_json::from_slice(&line) {
                Ok(h) => h,
                Err(_) if line.iter().all(u8::is_ascii_whitespace) => continue,
                Err(e) => {
                    return Err(BenchError::Protocol(format!(
                        "{} wrote a line that is not JSON: {e}",
                        self.label
                    )))
                }
            };
            if head.method.is_some() || head.id.is_none() {
                continue;
            }
            answered += 1;
            let failed = head.error.is_some() || head.result.as_ref().is_none_or(|r| r.is_error);
            if failed {
                failures += 1;
                if first_failure.is_empty() {
                    first_failure = String::from_utf8_lossy(&line).chars().take(300).collect();
                }
            }
        }
        let elapsed = start.elapsed();
        let (stdin, written) = writer
            .join()
            .map_err(|_| BenchError::Protocol("the request writer thread panicked".into()))?;
        written.map_err(|e| BenchError::io(format!("write to {}", self.label), e))?;
        self.stdin = Some(stdin);
        if failures > 0 {
            return Err(BenchError::ToolFailed(format!(
                "{}: {failures} of {count} {name} calls failed, e.g. {first_failure}",
                self.label
            )));
        }
        Ok(elapsed)
    }

    /// The peak resident set size so far (`VmHWM`), in KiB; read while the process is alive.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Reads the peak RSS while the process still exists (its `/proc` entry goes with it), then
    /// finishes it: the end of every measured session, which reports both.
    pub fn finish_with_peak_rss(self) -> Result<Option<u64>, BenchError> {
        let rss_kib = self.peak_rss_kib();
        self.finish()?;
        Ok(rss_kib)
    }

    /// Closes stdin (MCP's shutdown for stdio) and waits for the process to exit.
    pub fn finish(mut self) -> Result<(), BenchError> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(BenchError::Protocol(format!(
                        "{} did not exit within 10 s of stdin closing",
                        self.label
                    )));
                }
                Err(e) => return Err(BenchError::io(format!("wait for {}", self.label), e)),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A session abandoned on an error must not leave a server running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
