//! The little HTTP/1.1 both harnesses speak: one request at a time on a kept-alive connection,
//! bodies sized by `Content-Length` or sent chunked, answers sent whole with their length.
//!
//! A crate would bring a general server (routing, TLS, async) for what is here a loop over a
//! socket; the two clients are known, so this reads exactly what they send and refuses the rest
//! with a status that says why. Every read has a deadline (the socket's timeout) and every size a
//! bound.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// The most bytes of request line and headers.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The largest request body: a conversation carrying many pages of a large file is several
/// megabytes; a body past this is refused (413).
pub const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;
/// How long a read or write on a connection may wait; a harness that goes quiet longer is cut off.
pub const IO_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The socket failed or timed out.
    #[error("reading the request: {0}")]
    Io(#[from] io::Error),
    /// The head was longer than [`MAX_HEAD_BYTES`].
    #[error("the request's head is over {MAX_HEAD_BYTES} bytes")]
    HeadTooLarge,
    /// The body was longer than [`MAX_BODY_BYTES`].
    #[error("the request's body is over {MAX_BODY_BYTES} bytes")]
    BodyTooLarge,
    /// Something other than HTTP/1.1 as the harnesses send it.
    #[error("malformed request: {0}")]
    Malformed(String),
}

/// One request.
#[derive(Debug)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path with its query, as sent.
    pub target: String,
    /// Header names in lower case, with their values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// The path without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// A header's value, by its lower-case name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The client asked to close the connection after this request.
    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// One answer.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Its content type.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON error body in the shape both APIs use, with `status`.
    pub fn error(status: u16, message: &str) -> Response {
        let body = serde_json::json!({"type": "error", "error": {"type": "scripted_model_error", "message": message}});
        Response {
            status,
            content_type: "application/json",
            body: body.to_string().into_bytes(),
        }
    }
}

/// Serves one connection: requests in turn until the client closes it, asks to, or errs.
pub fn serve(stream: TcpStream, mut answer: impl FnMut(&Request) -> Response) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let request = match read_request(&mut reader) {
            Ok(Some(request)) => request,
            Ok(None) => return Ok(()),
            Err(e) => {
                let status = match e {
                    ReadError::BodyTooLarge | ReadError::HeadTooLarge => 413,
                    ReadError::Io(_) => return Ok(()),
                    ReadError::Malformed(_) => 400,
                };
                write_response(&mut writer, &Response::error(status, &e.to_string()), true)?;
                return Ok(());
            }
        };
        let response = answer(&request);
        let close = request.wants_close();
        write_response(&mut writer, &response, close)?;
        if close {
            return Ok(());
        }
    }
}

/// Reads one request; `None` when the connection closed before a new one began.
pub fn read_request(reader: &mut impl BufRead) -> Result<Option<Request>, ReadError> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let n = reader
            .by_ref()
            .take((MAX_HEAD_BYTES + 1 - before) as u64)
            .read_until(b'\n', &mut head)?;
        if n == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(ReadError::Malformed(
                    "the connection closed inside the head".into(),
                ))
            };
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(ReadError::HeadTooLarge);
        }
        if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") || head == b"\r\n" {
            if head == b"\r\n" {
                // A stray line end between kept-alive requests.
                head.clear();
                continue;
            }
            break;
        }
    }
    let head =
        String::from_utf8(head).map_err(|_| ReadError::Malformed("head not UTF-8".into()))?;
    let mut lines = head.lines();
    let start = lines.next().unwrap_or("");
    let mut parts = start.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(ReadError::Malformed(format!("request line {start:?}")));
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut request = Request {
        method: method.to_string(),
        target: target.to_string(),
        headers,
        body: Vec::new(),
    };
    if request
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        request.body = read_chunked(reader)?;
    } else if let Some(len) = request.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| ReadError::Malformed(format!("content-length {len:?}")))?;
        if len > MAX_BODY_BYTES {
            return Err(ReadError::BodyTooLarge);
        }
        request.body = vec![0; len];
        reader.read_exact(&mut request.body)?;
    }
    Ok(Some(request))
}

fn read_chunked(reader: &mut impl BufRead) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        reader.by_ref().take(1024).read_line(&mut size_line)?;
        let size_hex = size_line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| ReadError::Malformed(format!("chunk size {size_hex:?}")))?;
        if body.len() + size > MAX_BODY_BYTES {
            return Err(ReadError::BodyTooLarge);
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = String::new();
        reader.by_ref().take(1024).read_line(&mut crlf)?;
        if size == 0 {
            return Ok(body);
        }
    }
}

fn write_response(w: &mut impl Write, response: &Response, close: bool) -> io::Result<()> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        413 => "Payload Too Large",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: {}\r\ncontent-length: {}\r\ncache-control: no-cache\r\nconnection: {}\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len(),
        if close { "close" } else { "keep-alive" },
    );
    w.write_all(head.as_bytes())?;
    w.write_all(&response.body)?;
    w.flush()
}

/// Server-sent events, one per value, named by its `type` field.
pub fn sse(events: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        let name = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        out.extend_from_slice(format!("event: {name}\ndata: {event}\n\n").as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_with_a_length_and_chunked_are_read_in_turn() {
        let wire =
            b"POST /v1/messages?beta=true HTTP/1.1\r\nContent-Length: 2\r\nHost: x\r\n\r\n{}\
POST /v1/responses HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let mut reader = BufReader::new(&wire[..]);
        let first = read_request(&mut reader).unwrap().unwrap();
        assert_eq!(first.path(), "/v1/messages");
        assert_eq!(first.body, b"{}");
        assert_eq!(first.header("host"), Some("x"));
        let second = read_request(&mut reader).unwrap().unwrap();
        assert_eq!(second.body, b"abcde");
        assert!(read_request(&mut reader).unwrap().is_none());
    }

    #[test]
    fn an_oversized_head_or_body_is_refused() {
        let long = format!(
            "GET / HTTP/1.1\r\nx: {}\r\n\r\n",
            "a".repeat(MAX_HEAD_BYTES)
        );
        let err = read_request(&mut BufReader::new(long.as_bytes())).unwrap_err();
        assert!(matches!(err, ReadError::HeadTooLarge), "{err}");
        let big = format!(
            "POST / HTTP/1.1\r\ncontent-length: {}\r\n\r\n",
            MAX_BODY_BYTES + 1
        );
        let err = read_request(&mut BufReader::new(big.as_bytes())).unwrap_err();
        assert!(matches!(err, ReadError::BodyTooLarge), "{err}");
    }
}
