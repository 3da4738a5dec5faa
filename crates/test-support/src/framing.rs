//! Reading `Content-Length` framed replies, for the tests of the LSP-style framing the server
//! detects from a client's first bytes.

use std::io::BufRead;

use serde_json::Value;

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
