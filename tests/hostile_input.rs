#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Hostile protocol input: every malformed message gets the right JSON-RPC error or a clean exit,
//! memory stays bounded, and the server never panics.

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use test_support::bin::command;
use test_support::framing::read_framed;
use test_support::mcp::Session;
use test_support::procs::peak_rss_kib;

#[test]
fn malformed_messages_each_get_the_right_error_and_the_session_survives() {
    let mut s = Session::start(&[]);
    s.initialize("2025-11-25");
    let cases: Vec<(&[u8], i64)> = vec![
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi", -32700),
        (b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":7}", -32600),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}",
            -32600,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}",
            -32600,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}",
            -32600,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":[1,2]}",
            -32600,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"ping\"}",
            -32700,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":123456789012345678901234567890,\"method\":\"ping\"}",
            -32600,
        ),
        (b"\"just a string\"", -32600),
        (b"null", -32600),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":5}}",
            -32602,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{}}",
            -32602,
        ),
        // The session is open: a second initialize is refused whatever it carries.
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"initialize\",\"params\":{}}",
            -32600,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}",
            -32700,
        ),
    ];
    for (raw, code) in cases {
        let mut line = raw.to_vec();
        line.push(b'\n');
        s.send_raw(&line);
        let reply = s.recv();
        assert_eq!(
            reply["error"]["code"],
            json!(code),
            "input {:?} got {reply}",
            String::from_utf8_lossy(raw)
        );
    }
    // A request with a huge but valid integer id is answered with that exact id.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"method\":\"ping\"}\n");
    let mut raw = String::new();
    std::io::BufRead::read_line(&mut s.stdout, &mut raw).expect("read");
    assert!(raw.contains("\"id\":18446744073709551615"), "{raw}");
    assert_eq!(s.request(99, "ping", json!({}))["result"], json!({}));
}

#[test]
fn deeply_nested_json_is_a_parse_error_not_a_stack_overflow() {
    let mut s = Session::start(&[]);
    s.initialize("2025-11-25");
    let depth = 100_000;
    let mut line = "[".repeat(depth);
    line.push_str(&"]".repeat(depth));
    line.push('\n');
    s.send_raw(line.as_bytes());
    assert_eq!(s.recv()["error"]["code"], json!(-32700));
    let mut obj = "{\"a\":".repeat(depth);
    obj.push('1');
    obj.push_str(&"}".repeat(depth));
    obj.push('\n');
    s.send_raw(obj.as_bytes());
    assert_eq!(s.recv()["error"]["code"], json!(-32700));
    assert_eq!(s.request(2, "ping", json!({}))["result"], json!({}));
}

#[test]
fn a_100_mb_line_is_refused_with_bounded_memory() {
    let mut s = Session::start(&["--max-message-bytes", "1048576"]);
    s.initialize("2025-11-25");
    let chunk = vec![b'x'; 1024 * 1024];
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{\"pad\":\"");
    for _ in 0..100 {
        s.send_raw(&chunk);
    }
    s.send_raw(b"\"}}\n");
    let reply = s.recv();
    assert_eq!(reply["error"]["code"], json!(-32600), "{reply}");
    assert_eq!(s.request(3, "ping", json!({}))["result"], json!({}));
    let peak = peak_rss_kib(s.child.id()).unwrap_or(0);
    assert!(
        peak > 0 && peak < 64 * 1024,
        "peak RSS {peak} KiB: the line was buffered"
    );
}

#[test]
fn content_length_lies_are_handled() {
    // Shorter than the body: the rest of the body is read as the next (bad) header block.
    let mut s = Session::start(&[]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    s.send_raw(format!("Content-Length: {}\r\n\r\n{}", body.len() - 5, body).as_bytes());
    let first = read_framed(&mut s.stdout);
    assert_eq!(first["error"]["code"], json!(-32700), "{first}");
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    s.send_raw(format!("\r\n\r\nContent-Length: {}\r\n\r\n{}", ping.len(), ping).as_bytes());
    // Whatever the leftover bytes produced, the session recovers and answers the ping.
    let mut answered = false;
    for _ in 0..4 {
        let reply = read_framed(&mut s.stdout);
        if reply["id"] == json!(2) {
            answered = true;
            break;
        }
        assert!(reply.get("error").is_some(), "{reply}");
    }
    assert!(answered);

    // Longer than the body, then EOF: the server exits cleanly without answering garbage.
    let mut child = command()
        .args(["--root", "/tmp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("Content-Length: {}\r\n\r\n{}", body.len() + 50, body).as_bytes())
        .expect("write");
    drop(stdin);
    let status = wait_with_deadline(&mut child);
    assert!(status.success());
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn headers_without_a_body_and_a_negative_length_are_clean() {
    for input in [
        &b"Content-Length: 20\r\n\r\n"[..],
        &b"Content-Length: 20\r\n"[..],
        &b"Content-Length: -1\r\n\r\n"[..],
        &b"Content-Length: 99999999999999999999999\r\n\r\n"[..],
    ] {
        let mut child = command()
            .args(["--root", "/tmp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write");
        let status = wait_with_deadline(&mut child);
        assert!(status.success(), "{:?}", String::from_utf8_lossy(input));
        let mut err = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut err)
            .expect("read");
        assert!(!err.contains("panicked"), "{err}");
    }
}

fn wait_with_deadline(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "server hung");
        std::thread::sleep(Duration::from_millis(20));
    }
}
