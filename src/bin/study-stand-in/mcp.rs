//! The MCP client: reads the mcpServers configuration, starts the one server it names, and
//! speaks newline-delimited JSON-RPC to it over stdio (initialize, tools/list, tools/call).
//!
//! Replies are read on their own thread and waited for with a time limit, so a server that dies
//! or stops answering becomes a clear error instead of a stand-in blocked for ever (a hang is
//! the policy's to decide, not the server's). Every line read has a size bound.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::error::StandInError;
use crate::input::read_text;

/// The protocol version the stand-in asks for: what Claude Code sends today.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// The largest configuration file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The longest line accepted from the server (a read result of a large file fits well below).
const MAX_LINE_BYTES: usize = 64 << 20;
/// How long to wait for one reply before calling the server stuck.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);
/// How many unrelated messages (notifications, requests) may come before a reply.
const MAX_UNRELATED: usize = 10_000;
/// How many pages of tools/list are followed.
const MAX_TOOL_PAGES: usize = 100;

/// One stdio server of the configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Its key in `mcpServers`: the `<server>` in `mcp__<server>__<tool>`.
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment, on top of the stand-in's own (as clients do).
    pub env: BTreeMap<String, String>,
}

/// Reads the mcpServers JSON at `path`: `None` when it configures no server.
pub fn read_config(path: &Path) -> Result<Option<ServerConfig>, StandInError> {
    let invalid = |message: String| StandInError::Invalid {
        what: "MCP configuration",
        path: path.to_path_buf(),
        message,
    };
    let text = read_text(path, "MCP configuration", MAX_CONFIG_BYTES)?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| invalid(format!("is not JSON: {e}")))?;
    let servers = value
        .get("mcpServers")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            invalid("has no \"mcpServers\" object; write {\"mcpServers\": {}} for no server".into())
        })?;
    let mut entries = servers.iter();
    let Some((name, server)) = entries.next() else {
        return Ok(None);
    };
    if entries.next().is_some() {
        return Err(invalid(format!(
            "configures {} servers; the stand-in speaks to one, so keep one",
            servers.len()
        )));
    }
    let field = |key: &str| server.get(key);
    if let Some(kind) = field("type") {
        if kind.as_str() != Some("stdio") {
            return Err(invalid(format!(
                "server '{name}' has type {kind}; the stand-in starts stdio servers only (a command and args)"
            )));
        }
    }
    let command = field("command")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| invalid(format!("server '{name}' has no \"command\" string")))?
        .to_string();
    let strings = |v: &Value| v.as_str().map(str::to_string);
    let args = match field("args") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(strings)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                invalid(format!(
                    "server '{name}': \"args\" must be an array of strings"
                ))
            })?,
        Some(_) => {
            return Err(invalid(format!(
                "server '{name}': \"args\" must be an array of strings"
            )))
        }
    };
    let env = match field("env") {
        None => BTreeMap::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| strings(v).map(|v| (k.clone(), v)))
            .collect::<Option<BTreeMap<_, _>>>()
            .ok_or_else(|| invalid(format!("server '{name}': \"env\" values must be strings")))?,
        Some(_) => {
            return Err(invalid(format!(
                "server '{name}': \"env\" must be an object of strings"
            )))
        }
    };
    Ok(Some(ServerConfig {
        name: name.clone(),
        command,
        args,
        env,
    }))
}

/// A tool's answer as the client sees it.
#[derive(Debug, Clone)]
pub struct ToolResult {
    /// The `content` blocks (or, for a JSON-RPC error, one text block with its message).
    pub content: Value,
    /// `isError`, or true for a JSON-RPC error.
    pub is_error: bool,
}

impl ToolResult {
    /// The text of the content blocks, joined.
    pub fn text(&self) -> String {
        self.content
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Makes the server start in `dir`, the workspace the runner gave this agent.
// By name, and safe here: the stand-in plays an agent harness, which starts its MCP servers in the
// directory it was started in, a path it is handed; the server then opens its root once itself.
#[allow(clippy::disallowed_methods)]
fn starts_in(command: &mut Command, dir: &Path) {
    command.current_dir(dir);
}

/// A running server and the session with it.
pub struct Client {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Result<Vec<u8>, String>>,
    next_id: u64,
}

impl Client {
    /// Starts the server (in `cwd`, its stderr shared with the stand-in's) and initializes the
    /// session.
    pub fn start(config: &ServerConfig, cwd: &Path) -> Result<Self, StandInError> {
        let mut command = Command::new(&config.command);
        starts_in(&mut command, cwd);
        let mut child = command
            .args(&config.args)
            .envs(&config.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| StandInError::Server {
                server: config.name.clone(),
                message: format!(
                    "cannot start '{}': {e}; check \"command\" in the configuration",
                    config.command
                ),
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (tx, lines) = mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                loop {
                    let line = read_line(&mut reader);
                    let end = line.is_err();
                    if tx.send(line).is_err() || end {
                        break;
                    }
                }
            });
        }
        let mut client = Client {
            name: config.name.clone(),
            child,
            stdin,
            lines,
            next_id: 0,
        };
        client.initialize()?;
        Ok(client)
    }

    /// The server's key in the configuration.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn initialize(&mut self) -> Result<(), StandInError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "study-stand-in", "version": env!("CARGO_PKG_VERSION")}
        });
        self.request("initialize", params)?
            .map_err(|e| self.error(format!("refused initialize: {e}")))?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    }

    /// Every tool the server lists (following `nextCursor`).
    pub fn list_tools(&mut self) -> Result<Vec<Value>, StandInError> {
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self
                .request("tools/list", params)?
                .map_err(|e| self.error(format!("refused tools/list: {e}")))?;
            let list = page.get("tools").and_then(Value::as_array).ok_or_else(|| {
                self.error("answered tools/list without a \"tools\" array".into())
            })?;
            tools.extend(list.iter().cloned());
            cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(self.error(format!("tools/list goes on past {MAX_TOOL_PAGES} pages")))
    }

    /// Calls `tool` with `arguments`. A JSON-RPC error (unknown tool, malformed request) is an
    /// error result, as clients show it to the model; only a dead or confused server is an `Err`.
    pub fn call_tool(&mut self, tool: &str, arguments: &Value) -> Result<ToolResult, StandInError> {
        let reply = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        Ok(match reply {
            Ok(result) => ToolResult {
                content: result.get("content").cloned().unwrap_or_else(|| json!([])),
                is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
            },
            Err(error) => ToolResult {
                content: json!([{"type": "text", "text": format!("MCP error: {error}")}]),
                is_error: true,
            },
        })
    }

    fn error(&self, message: String) -> StandInError {
        StandInError::Server {
            server: self.name.clone(),
            message,
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), StandInError> {
        let mut line = message.to_string();
        line.push('\n');
        let sent = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(std::io::Error::other("no stdin")),
        };
        sent.map_err(|e| self.died(&format!("cannot be written to ({e})")))
    }

    /// Sends a request and waits for its reply: `Ok(Ok(result))` or `Ok(Err(error object))`.
    fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, Value>, StandInError> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + REPLY_TIMEOUT;
        for _ in 0..MAX_UNRELATED {
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(wait) {
                Ok(Ok(line)) => line,
                Ok(Err(why)) => return Err(self.died(&format!("{why} before answering {method}"))),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.error(format!(
                        "no answer to {method} within {} s",
                        REPLY_TIMEOUT.as_secs()
                    )))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.died(&format!("stopped answering before {method}")))
                }
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message: Map<String, Value> = match serde_json::from_slice(&line) {
                Ok(Value::Object(m)) => m,
                _ => {
                    return Err(self.error(format!(
                        "wrote a line that is not a JSON-RPC object while {method} was pending: {}",
                        String::from_utf8_lossy(&line[..line.len().min(200)])
                    )))
                }
            };
            if message.contains_key("method") {
                if let Some(request_id) = message.get("id") {
                    // A request from the server (sampling, roots…): the stand-in offers none.
                    self.send(&json!({"jsonrpc": "2.0", "id": request_id,
                        "error": {"code": -32601, "message": "the stand-in client serves no requests"}}))?;
                }
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Ok(Err(error.clone()));
            }
            return message.get("result").cloned().map(Ok).ok_or_else(|| {
                self.error(format!("answered {method} with neither result nor error"))
            });
        }
        Err(self.error(format!(
            "sent more than {MAX_UNRELATED} other messages before answering {method}"
        )))
    }

    /// The error for a server that went away, with how it ended when that is known by now.
    fn died(&mut self, what: &str) -> StandInError {
        let deadline = Instant::now() + Duration::from_millis(500);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => break None,
            }
        };
        let ended = status.map_or(String::new(), |s| format!(" (it exited: {s})"));
        self.error(format!(
            "{what}{ended}; its own messages, if any, are above on stderr"
        ))
    }
}

impl Drop for Client {
    /// Closing stdin is how a stdio server is told to stop; one that does not within a second
    /// is killed, so the stand-in never leaves a server behind.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One newline-terminated line (without the newline), at most [`MAX_LINE_BYTES`].
fn read_line(reader: &mut impl BufRead) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    loop {
        let buf = reader
            .fill_buf()
            .map_err(|e| format!("its output could not be read ({e})"))?;
        if buf.is_empty() {
            return Err("closed its output".into());
        }
        let (chunk, done) = match memchr_newline(buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > MAX_LINE_BYTES {
            return Err(format!("wrote a line longer than {MAX_LINE_BYTES} bytes"));
        }
        line.extend_from_slice(chunk);
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(line);
        }
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}
