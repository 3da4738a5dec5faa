//! Reading and writing framed messages on a byte stream.
//!
//! MCP over stdio is newline-delimited JSON; some gateways instead frame messages LSP-style with a
//! `Content-Length` header. The reader sniffs the first message (a `{` or `[` means lines, anything
//! else is read as a header block) and the server answers in the same framing for the whole
//! session. Every read is bounded: a message over the limit is skipped, never buffered whole.

use std::io::{self, BufRead, Write};

/// How messages are delimited on the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One JSON message per line (the MCP standard).
    Lines,
    /// `Content-Length: N` headers, a blank line, then N bytes of JSON (LSP style).
    Headers,
}

/// One unit read from the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// The bytes of one message (not yet parsed as JSON).
    Message(Vec<u8>),
    /// A message longer than the limit; its bytes were discarded.
    TooLarge,
    /// A header block that cannot be understood (e.g. no `Content-Length`).
    BadHeader(String),
}

/// Longest header line accepted in `Content-Length` framing.
const MAX_HEADER_LINE: usize = 8 * 1024;

/// Reads frames from a buffered byte stream, detecting the framing from the first message.
pub struct FrameReader<R> {
    inner: R,
    framing: Option<Framing>,
    max_message: usize,
    /// Bytes of an oversized body still to be discarded: the refusal is reported as soon as the
    /// header is read, and the body skipped on the next read.
    skip: u64,
    /// The stream can no longer be split into messages (conflicting lengths): it is treated as
    /// ended after that is reported once.
    broken: bool,
}

impl<R: BufRead> FrameReader<R> {
    /// Wraps `inner`; messages longer than `max_message` bytes are refused.
    pub fn new(inner: R, max_message: usize) -> Self {
        FrameReader {
            inner,
            framing: None,
            max_message,
            skip: 0,
            broken: false,
        }
    }

    /// The framing detected from the first message, once one has been seen.
    pub fn framing(&self) -> Option<Framing> {
        self.framing
    }

    /// Reads the next frame; `Ok(None)` at end of input (including input that ends mid-message,
    /// which can only mean the client went away).
    pub fn read_frame(&mut self) -> io::Result<Option<Frame>> {
        if self.broken {
            return Ok(None);
        }
        if self.skip > 0 {
            // A short read means the client went away mid-body.
            let wanted = std::mem::take(&mut self.skip);
            let skipped = io::copy(&mut (&mut self.inner).take(wanted), &mut io::sink())?;
            if skipped < wanted {
                return Ok(None);
            }
        }
        loop {
            let Some(first) = self.skip_blank()? else {
                return Ok(None);
            };
            // Once a session speaks lines, every message is a line (garbage included); a header
            // session still accepts a bare JSON line, which costs nothing to understand.
            let this = if self.framing == Some(Framing::Lines) || first == b'{' || first == b'[' {
                Framing::Lines
            } else {
                Framing::Headers
            };
            self.framing.get_or_insert(this);
            let frame = match this {
                Framing::Lines => self.read_line_frame()?,
                Framing::Headers => self.read_header_frame()?,
            };
            match frame {
                Some(Frame::Message(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => {
                    continue
                }
                other => return Ok(other),
            }
        }
    }

    /// Skips whitespace and byte-order marks between messages; returns the next byte without
    /// consuming it.
    fn skip_blank(&mut self) -> io::Result<Option<u8>> {
        loop {
            if buffered(&mut self.inner)? == 0 {
                return Ok(None);
            }
            let buf = self.inner.fill_buf()?;
            if buf.starts_with(&[0xEF, 0xBB, 0xBF]) {
                self.inner.consume(3);
                continue;
            }
            let blank = buf
                .iter()
                .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
                .count();
            if blank == 0 {
                return Ok(Some(buf[0]));
            }
            self.inner.consume(blank);
        }
    }

    /// Reads up to and including the next `\n`, keeping at most `limit` bytes. Returns the kept
    /// bytes (without the newline), whether the line was longer than the limit, and whether the
    /// line ended (false at end of input).
    fn read_bounded_line(&mut self, limit: usize) -> io::Result<(Vec<u8>, bool, bool)> {
        let mut line = Vec::new();
        let mut overflow = false;
        loop {
            if buffered(&mut self.inner)? == 0 {
                return Ok((line, overflow, false));
            }
            let buf = self.inner.fill_buf()?;
            // A word-at-a-time search: a write_file of a large file is one line of megabytes. The
            // portable kernel, not the CPU-dispatched one: choosing that runs `cpuid`, which traps
            // to the hypervisor on a VM and cost more than the search itself before `initialize`
            // could be answered.
            let (chunk, found) = match memchr::arch::all::memchr::One::new(b'\n').find(buf) {
                Some(i) => (&buf[..i], true),
                None => (buf, false),
            };
            if !overflow {
                if line.len() + chunk.len() > limit {
                    overflow = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            let used = chunk.len() + usize::from(found);
            self.inner.consume(used);
            if found {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok((line, overflow, true));
            }
        }
    }

    fn read_line_frame(&mut self) -> io::Result<Option<Frame>> {
        let (line, overflow, ended) = self.read_bounded_line(self.max_message)?;
        if overflow {
            return Ok(Some(Frame::TooLarge));
        }
        if !ended && line.is_empty() {
            return Ok(None);
        }
        // A final message without a trailing newline is still a message.
        Ok(Some(Frame::Message(line)))
    }

    fn read_header_frame(&mut self) -> io::Result<Option<Frame>> {
        let mut length: Option<Result<usize, String>> = None;
        let mut first = true;
        loop {
            let (line, overflow, ended) = self.read_bounded_line(MAX_HEADER_LINE)?;
            if !ended {
                // Headers without a body: the client stopped mid-message.
                return Ok(None);
            }
            if overflow {
                return Ok(Some(Frame::BadHeader(
                    "header line longer than 8 KiB".to_string(),
                )));
            }
            if line.is_empty() {
                if first {
                    continue;
                }
                break;
            }
            first = false;
            let text = String::from_utf8_lossy(&line);
            let Some((name, value)) = text.split_once(':') else {
                return Ok(Some(Frame::BadHeader(format!(
                    "expected a 'Name: value' header or a JSON message, got {:?}",
                    truncate(&text, 60)
                ))));
            };
            if name.trim().eq_ignore_ascii_case("content-length") {
                let this = value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| format!("invalid Content-Length {:?}", value.trim()));
                if let Some(earlier) = &length {
                    if *earlier != this {
                        // Which length is right cannot be known, so neither is where the next
                        // message starts: guessing would let a body be read as a message.
                        self.broken = true;
                        return Ok(Some(Frame::BadHeader(format!(
                            "conflicting Content-Length headers ({:?} and {:?}): the message boundary is unknown, so the session ends; send exactly one Content-Length per message",
                            header_value(earlier),
                            value.trim()
                        ))));
                    }
                }
                length = Some(this);
            }
        }
        let length = match length {
            None => {
                return Ok(Some(Frame::BadHeader(
                    "header block without Content-Length".to_string(),
                )))
            }
            Some(Err(msg)) => return Ok(Some(Frame::BadHeader(msg))),
            Some(Ok(n)) => n,
        };
        if length > self.max_message {
            // Refused now, so the client hears at once rather than after sending it all; the body
            // is skipped, never held, on the next read.
            self.skip = length as u64;
            return Ok(Some(Frame::TooLarge));
        }
        let mut body = vec![0; length];
        match self.inner.read_exact(&mut body) {
            Ok(()) => Ok(Some(Frame::Message(body))),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Fills the reader's buffer if it is empty, retrying reads interrupted by a signal, and returns
/// how many bytes it holds; 0 means end of input. Only one read is made per call: a terminal
/// reports Ctrl-D once, so reading again after an empty read would wait for more typing.
fn buffered<R: BufRead>(inner: &mut R) -> io::Result<usize> {
    loop {
        match inner.fill_buf() {
            Ok(buf) => return Ok(buf.len()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A parsed `Content-Length` as it was written, for messages.
fn header_value(parsed: &Result<usize, String>) -> String {
    match parsed {
        Ok(n) => n.to_string(),
        Err(msg) => msg.clone(),
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// Writes one message in the given framing. The body must be a single line of JSON (serde_json's
/// compact output escapes newlines inside strings, so it always is).
pub fn write_frame(out: &mut impl Write, framing: Framing, body: &[u8]) -> io::Result<()> {
    match framing {
        Framing::Lines => {
            out.write_all(body)?;
            out.write_all(b"\n")
        }
        Framing::Headers => {
            write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
            out.write_all(body)
        }
    }
}

use std::io::Read as _;

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8], max: usize) -> (Vec<Frame>, Option<Framing>) {
        let mut r = FrameReader::new(input, max);
        let mut out = Vec::new();
        while let Some(f) = r.read_frame().expect("read") {
            out.push(f);
        }
        (out, r.framing())
    }

    fn msg(s: &str) -> Frame {
        Frame::Message(s.as_bytes().to_vec())
    }

    #[test]
    fn lines_are_detected_and_split_with_crlf_bom_and_blank_lines_tolerated() {
        let (f, framing) = frames(b"\xEF\xBB\xBF\n\n {\"a\":1}\r\n\n[1]\n{\"b\":2}", 1024);
        assert_eq!(framing, Some(Framing::Lines));
        assert_eq!(f, vec![msg("{\"a\":1}"), msg("[1]"), msg("{\"b\":2}")]);
    }

    #[test]
    fn content_length_framing_with_extra_headers_in_any_case() {
        let body = "{\"x\":\"\u{e9}\"}";
        let input = format!(
            "Content-Type: application/json\r\ncontent-LENGTH: {}\r\n\r\n{}CONTENT-LENGTH:2\n\n{{}}",
            body.len(),
            body
        );
        let (f, framing) = frames(input.as_bytes(), 1024);
        assert_eq!(framing, Some(Framing::Headers));
        assert_eq!(f, vec![msg(body), msg("{}")]);
    }

    #[test]
    fn oversized_messages_are_skipped_not_buffered() {
        let long = format!("{{\"pad\":\"{}\"}}\n{{\"ok\":1}}\n", "x".repeat(100));
        let (f, _) = frames(long.as_bytes(), 50);
        assert_eq!(f, vec![Frame::TooLarge, msg("{\"ok\":1}")]);
        let framed = format!(
            "Content-Length: 100\r\n\r\n{}Content-Length: 2\r\n\r\n{{}}",
            "y".repeat(100)
        );
        let (f, _) = frames(framed.as_bytes(), 50);
        assert_eq!(f, vec![Frame::TooLarge, msg("{}")]);
    }

    #[test]
    fn an_oversized_length_is_refused_before_its_body_arrives() {
        // Only the header has arrived: the refusal must not wait for the body.
        let mut r = FrameReader::new(&b"Content-Length: 100\r\n\r\n"[..], 50);
        assert_eq!(r.read_frame().expect("read"), Some(Frame::TooLarge));
        assert_eq!(r.read_frame().expect("read"), None);
    }

    #[test]
    fn conflicting_lengths_end_the_session_after_one_error() {
        let input = b"Content-Length: 2\r\nContent-Length: 9\r\n\r\n{}{\"a\":1}\n{\"b\":2}\n";
        let (f, _) = frames(input, 1024);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(matches!(&f[0], Frame::BadHeader(m) if m.contains("conflicting")));
        // The same length twice is not a conflict.
        let (f, _) = frames(b"Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}", 1024);
        assert_eq!(f, vec![msg("{}")]);
    }

    #[test]
    fn truncated_input_ends_cleanly() {
        let (f, _) = frames(b"Content-Length: 10\r\n\r\n{}", 1024);
        assert!(f.is_empty());
        let (f, _) = frames(b"Content-Length: 10\r\n", 1024);
        assert!(f.is_empty());
    }

    #[test]
    fn header_blocks_without_length_are_reported() {
        let (f, _) = frames(b"Content-Type: x\r\n\r\nContent-Length: 2\r\n\r\n{}", 1024);
        assert!(matches!(f[0], Frame::BadHeader(_)));
        assert_eq!(f[1], msg("{}"));
        let (f, _) = frames(b"Content-Length: lots\r\n\r\n", 1024);
        assert!(matches!(f[0], Frame::BadHeader(_)));
    }

    #[test]
    fn a_line_session_reads_garbage_as_a_line_not_as_headers() {
        let (f, _) = frames(b"{}\nName: value\n{\"a\":1}\n", 1024);
        assert_eq!(f, vec![msg("{}"), msg("Name: value"), msg("{\"a\":1}")]);
    }

    #[test]
    fn writes_use_the_requested_framing() {
        let mut out = Vec::new();
        write_frame(&mut out, Framing::Lines, b"{}").expect("write");
        write_frame(&mut out, Framing::Headers, b"{\"a\":1}").expect("write");
        assert_eq!(out, b"{}\nContent-Length: 7\r\n\r\n{\"a\":1}".to_vec());
    }
}
