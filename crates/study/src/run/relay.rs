//! The recording relay: a study may put it between a harness and its model endpoint (a
//! harness's `relay = "URL"`), on 127.0.0.1, to learn what the model was offered when the
//! harness keeps no record of its requests (Codex CLI, Gemini CLI). Each request is forwarded
//! to the upstream unchanged and its response streamed back byte for byte as it arrives; of the
//! request only metadata is kept, through the one parser of request bodies
//! ([`report::offered::parse_request`]): tool names, which have schemas, which are deferred,
//! whether this project's instructions appeared, the system text's size, the API. Never a
//! header's value, a credential or a message's text.
//!
//! HTTP/1.1 on std threads, one request per connection (the relay answers `Connection: close`,
//! which every client honours by opening the next): a crate would bring an async server and
//! TLS for a loop over two sockets. The upstream must be `http://` (a local server: vLLM,
//! llama.cpp, Ollama, the scripted model); a hosted `https://` endpoint is refused at load.
//! Every read and write has a deadline (the sockets' timeouts), the head and body a bound.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use report::classify::ServerFilter;
use report::offered::{parse_request, Api, Offered, Summary};

/// The most bytes of a request's line and headers, and of a response's.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The largest request body relayed (a long conversation is several megabytes).
pub const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;
/// The longest a read from the harness may wait.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest connecting to the upstream may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest one read from the upstream may wait: a model may think long before its first
/// byte, but not forever.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(600);
/// Most connections served at once; one more waits in the listen queue.
const MAX_CONNECTIONS: usize = 64;

/// Why a relay cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The upstream is not an `http://host:port[/path]` URL.
    #[error("the relay's upstream {0:?} is not an http://HOST[:PORT][/PATH] URL (https is not relayed: give a local endpoint, or read the harness's own records)")]
    Upstream(String),
    /// The listening socket could not be made.
    #[error("cannot listen on 127.0.0.1 for the relay: {0}")]
    Listen(io::Error),
}

/// An upstream endpoint: where requests go, and the path prefix the harness is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// `host:port`.
    pub authority: String,
    /// The URL's path (`/v1`), empty for none: the relay's URL keeps it, so the harness's
    /// request paths reach the upstream as they are.
    pub path: String,
}

impl Upstream {
    /// Parses `http://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Upstream, RelayError> {
        let bad = || RelayError::Upstream(url.to_string());
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains(['@', ' ', '?', '#']) {
            return Err(bad());
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        Ok(Upstream {
            authority,
            path: path.to_string(),
        })
    }
}

/// A running relay; dropping it stops it.
pub struct Relay {
    addr: SocketAddr,
    path: String,
    stop: Arc<AtomicBool>,
    summary: Arc<Mutex<Summary>>,
    accept: Option<JoinHandle<()>>,
}

impl Relay {
    /// Starts a relay to `upstream` on a free port of 127.0.0.1.
    pub fn start(upstream: Upstream) -> Result<Relay, RelayError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(RelayError::Listen)?;
        let addr = listener.local_addr().map_err(RelayError::Listen)?;
        let stop = Arc::new(AtomicBool::new(false));
        let summary = Arc::new(Mutex::new(Summary::new("relay")));
        let accept = {
            let (stop, summary, upstream) = (stop.clone(), summary.clone(), upstream.clone());
            std::thread::spawn(move || accept_loop(listener, upstream, stop, summary))
        };
        Ok(Relay {
            addr,
            path: upstream.path,
            stop,
            summary,
            accept: Some(accept),
        })
    }

    /// The URL the harness is given (`{relay_url}`): this relay, with the upstream's path.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.path)
    }

    /// Stops the relay and returns what the requests it saw offered.
    pub fn finish(mut self, servers: &ServerFilter) -> Option<Offered> {
        self.shutdown();
        let summary = std::mem::replace(
            &mut *self.summary.lock().unwrap_or_else(|e| e.into_inner()),
            Summary::new("relay"),
        );
        summary.finish(servers)
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, CONNECT_TIMEOUT);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(
    listener: TcpListener,
    upstream: Upstream,
    stop: Arc<AtomicBool>,
    summary: Arc<Mutex<Summary>>,
) {
    let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        if live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = respond(&stream, "503 Service Unavailable", "too many connections");
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let (upstream, summary, live) = (upstream.clone(), summary.clone(), live.clone());
        std::thread::spawn(move || {
            let _ = serve(stream, &upstream, &summary);
            live.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// A request head: its line and headers, as sent.
struct Head {
    method: String,
    target: String,
    /// `(name, value)` in the order sent.
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads header lines up to the empty line, at most [`MAX_HEAD_BYTES`] in all; `None` on a
/// closed or overlong head.
fn read_headers(reader: &mut impl BufRead) -> io::Result<Option<Vec<(String, String)>>> {
    let mut headers = Vec::new();
    let mut total = 0usize;
    loop {
        let mut line = Vec::new();
        let n = reader
            .by_ref()
            .take((MAX_HEAD_BYTES - total + 1) as u64)
            .read_until(b'\n', &mut line)?;
        total += n;
        if n == 0 || total > MAX_HEAD_BYTES {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        if text.is_empty() {
            return Ok(Some(headers));
        }
        if let Some((n, v)) = text.split_once(':') {
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
    }
}

/// Reads a request head; `None` on a closed, malformed or overlong one.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut first = Vec::new();
    reader
        .by_ref()
        .take(MAX_HEAD_BYTES as u64)
        .read_until(b'\n', &mut first)?;
    let first = String::from_utf8_lossy(&first).trim_end().to_string();
    let mut parts = first.split(' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Ok(None);
    };
    if method.is_empty() || target.is_empty() {
        return Ok(None);
    }
    let Some(headers) = read_headers(reader)? else {
        return Ok(None);
    };
    Ok(Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        headers,
    }))
}

fn respond(mut stream: &TcpStream, status: &str, why: &str) -> io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{why}",
        why.len()
    )
}

/// Relays one request and its response.
fn serve(client: TcpStream, upstream: &Upstream, summary: &Mutex<Summary>) -> io::Result<()> {
    client.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    client.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let Some(head) = read_head(&mut reader)? else {
        return respond(
            &client,
            "400 Bad Request",
            "malformed or overlong request head",
        );
    };
    if head.header("transfer-encoding").is_some() {
        return respond(
            &client,
            "411 Length Required",
            "the relay takes bodies sized by Content-Length",
        );
    }
    let length = match head.header("content-length").map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) if n <= MAX_BODY_BYTES => n,
        Some(_) => {
            return respond(
                &client,
                "413 Content Too Large",
                "the request body is too large",
            )
        }
    };
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;

    if let Some(api) = Api::from_path(&head.target) {
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body) {
            let offered = parse_request(api, &value);
            summary
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(api, offered);
        }
    }

    let addr = upstream
        .authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address for the upstream"))?;
    let mut up = match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
        Ok(up) => up,
        Err(e) => return respond(&client, "502 Bad Gateway", &format!("upstream: {e}")),
    };
    up.set_read_timeout(Some(UPSTREAM_TIMEOUT))?;
    up.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut out = format!("{} {} HTTP/1.1\r\n", head.method, head.target);
    for (name, value) in &head.headers {
        if name.eq_ignore_ascii_case("host") || name.eq_ignore_ascii_case("connection") {
            continue;
        }
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(&format!(
        "host: {}\r\nconnection: close\r\n\r\n",
        upstream.authority
    ));
    up.write_all(out.as_bytes())?;
    up.write_all(&body)?;
    up.flush()?;
    // The response head with `connection: close` (the harness opens a new connection for its
    // next request), then the body byte for byte as it arrives: a stream of server-sent events
    // goes through as the model sends it. The upstream closes after it, as asked.
    let mut up = BufReader::new(up);
    let mut client = client;
    let mut status = Vec::new();
    up.by_ref()
        .take(MAX_HEAD_BYTES as u64)
        .read_until(b'\n', &mut status)?;
    let Some(headers) = read_headers(&mut up)? else {
        return respond(
            &client,
            "502 Bad Gateway",
            "malformed or overlong response head",
        );
    };
    let mut head = String::from_utf8_lossy(&status).trim_end().to_string();
    head.push_str("\r\n");
    for (name, value) in headers {
        if !name.eq_ignore_ascii_case("connection") {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("connection: close\r\n\r\n");
    client.write_all(head.as_bytes())?;
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = up.read(&mut buf)?;
        if n == 0 {
            break;
        }
        client.write_all(&buf[..n])?;
        client.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_are_http_urls_and_keep_their_path() {
        assert_eq!(
            Upstream::parse("http://127.0.0.1:8000/v1/").unwrap(),
            Upstream {
                authority: "127.0.0.1:8000".into(),
                path: "/v1".into()
            }
        );
        assert_eq!(
            Upstream::parse("http://localhost").unwrap().authority,
            "localhost:80"
        );
        assert!(Upstream::parse("https://api.example.com/v1").is_err());
        assert!(Upstream::parse("http://user:pw@host/").is_err());
    }

    /// Sends one request over a new connection and reads the whole response.
    fn send(addr: &str, path: &str, body: &str) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer secret-key-1234\r\n\
             content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn a_relay_forwards_to_the_scripted_model_and_keeps_only_what_was_offered() {
        use scripted_model::{Script, ScriptedModel, Step, ToolRef};
        let model = ScriptedModel::start(vec![Script {
            name: "one".into(),
            when: None,
            steps: vec![
                Step::Call {
                    tool: ToolRef::mcp("filesystem", "read_text_file"),
                    args: serde_json::json!({"path": "a.txt"}),
                },
                Step::Finish {
                    text: "done".into(),
                },
            ],
        }])
        .unwrap();
        let relay = Relay::start(Upstream::parse(&model.openai_base_url()).unwrap()).unwrap();
        let url = relay.url();
        assert!(url.ends_with("/v1"), "{url}");
        let addr = url
            .strip_prefix("http://")
            .and_then(|u| u.strip_suffix("/v1"))
            .unwrap()
            .to_string();
        let body = serde_json::json!({
            "model": "m",
            "stream": true,
            "instructions": "system text",
            "tools": [
                {"type": "function", "name": "exec_command", "parameters": {}},
                {"type": "namespace", "name": "mcp__filesystem",
                 "description": "File access confined to one workspace, with nothing lost: prefer",
                 "tools": [{"type": "function", "name": "read_text_file", "parameters": {}}]}
            ],
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "a private prompt"}]}]
        })
        .to_string();
        let relayed = send(&addr, "/v1/responses", &body);
        assert!(relayed.starts_with("HTTP/1.1 200"), "{relayed}");
        assert!(relayed.contains("connection: close"), "{relayed}");
        // The model's answer came through: the scripted call, streamed as server-sent events.
        assert!(relayed.contains("read_text_file"), "{relayed}");
        assert!(relayed.contains("event: "), "{relayed}");
        // The model received the request as sent.
        let records = model.records();
        assert_eq!(records.len(), 1);
        assert!(records[0].offered.iter().any(
            |o| o.name == "read_text_file" && o.namespace.as_deref() == Some("mcp__filesystem")
        ));

        let offered = relay.finish(&ServerFilter::default()).unwrap();
        assert_eq!(offered.source, "relay");
        assert_eq!(offered.api, Some(Api::Openai));
        assert_eq!(offered.requests, 1);
        assert_eq!(offered.namespaces, ["mcp__filesystem"]);
        assert_eq!(offered.ours_namespaced, 1);
        assert!(offered.instructions_seen);
        assert_eq!(offered.system_chars, "system text".len() as u64);
        let kept = serde_json::to_string(&offered).unwrap();
        assert!(!kept.contains("secret-key"), "{kept}");
        assert!(!kept.contains("private prompt"), "{kept}");
    }

    #[test]
    fn a_relay_refuses_what_it_cannot_size_and_reports_a_dead_upstream() {
        // An upstream nobody listens on: a port just freed.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let relay =
            Relay::start(Upstream::parse(&format!("http://127.0.0.1:{port}")).unwrap()).unwrap();
        let addr = relay.url().trim_start_matches("http://").to_string();
        let answer = send(&addr, "/v1/messages", "{}");
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        let mut stream = TcpStream::connect(&addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "POST /v1/messages HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 411"), "{out}");
        // Neither request offered a tool: nothing to summarise.
        assert!(relay.finish(&ServerFilter::default()).is_none());
    }
}
