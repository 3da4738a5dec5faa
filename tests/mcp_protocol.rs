#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The MCP core as a client sees it: the real binary, spoken to over stdin/stdout in both framings.

use std::process::{Command, Stdio};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::framing::read_framed;
use test_support::mcp::{initialize, Session};
use test_support::temp::temp_dir;

#[test]
fn every_handshake_version_is_echoed_and_unknown_ones_get_the_latest() {
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut s = Session::start(&[]);
        let reply = s.initialize(version);
        assert_eq!(reply["result"]["protocolVersion"], json!(version));
        assert_eq!(reply["result"]["serverInfo"]["name"], json!("filesystem"));
        assert_eq!(
            reply["result"]["serverInfo"]["version"],
            json!(env!("CARGO_PKG_VERSION"))
        );
        assert!(reply["result"]["capabilities"]["tools"].is_object());
        assert!(reply["result"]["instructions"].is_string());
        assert!(s.close_and_wait().success());
    }
    let mut s = Session::start(&[]);
    let reply = s.initialize("2099-01-01");
    assert_eq!(reply["result"]["protocolVersion"], json!("2025-11-25"));
}

#[test]
fn ping_works_before_initialize_but_other_requests_get_an_error() {
    let mut s = Session::start(&[]);
    assert_eq!(s.request(5, "ping", json!({}))["result"], json!({}));
    let early = s.request(6, "tools/list", json!({}));
    assert_eq!(early["error"]["code"], json!(-32600));
    assert!(early["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("initialize")));
}

#[test]
fn garbage_gets_a_parse_error_and_the_server_keeps_reading() {
    let mut s = Session::start(&[]);
    s.initialize("2025-11-25");
    s.send_raw(b"{not json at all\n");
    let err = s.recv();
    assert_eq!(err["error"]["code"], json!(-32700));
    assert_eq!(err["id"], Value::Null);
    s.send_raw(b"[1,2\n");
    assert_eq!(s.recv()["error"]["code"], json!(-32700));
    s.send_raw(&[0xff, 0xfe, b'\n']);
    assert_eq!(s.recv()["error"]["code"], json!(-32700));
    assert_eq!(s.request(9, "ping", json!({}))["result"], json!({}));
}

#[test]
fn notifications_never_get_a_reply() {
    let mut s = Session::start(&[]);
    s.initialize("2025-11-25");
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}}));
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 42}}),
    );
    s.send(json!({"jsonrpc": "2.0", "method": "tools/list"}));
    // The next line on stdout must be the answer to this ping, not a reply to a notification.
    let reply = s.request(7, "ping", json!({}));
    assert_eq!(reply["result"], json!({}));
}

#[test]
fn json_rpc_errors_use_the_right_codes() {
    let mut s = Session::start(&[]);
    s.initialize("2025-11-25");
    assert_eq!(
        s.request(2, "resources/list", json!({}))["error"]["code"],
        json!(-32601)
    );
    let unknown = s.request(
        3,
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert_eq!(unknown["error"]["code"], json!(-32602));
    let bad_args = s.request(4, "tools/call", json!({"name": "x", "arguments": [1]}));
    assert_eq!(bad_args["error"]["code"], json!(-32602));
    let bad_cursor = s.request(5, "tools/list", json!({"cursor": "bogus"}));
    assert_eq!(bad_cursor["error"]["code"], json!(-32602));
    s.send(json!({"jsonrpc": "2.0", "id": null, "method": "ping"}));
    let null_id = s.recv();
    assert_eq!(null_id["error"]["code"], json!(-32600));
    s.send(json!({"jsonrpc": "1.0", "id": 8, "method": "ping"}));
    assert_eq!(s.recv()["error"]["code"], json!(-32600));
    s.send(json!(42));
    assert_eq!(s.recv()["error"]["code"], json!(-32600));
}

#[test]
fn tools_list_pages_follow_next_cursor_to_the_full_list() {
    let mut whole = Session::start(&["--backup"]);
    whole.initialize("2025-11-25");
    let all = whole.request(2, "tools/list", json!({}))["result"]["tools"].clone();
    let all = all.as_array().expect("tools").clone();
    assert!(whole.close_and_wait().success());

    let mut paged = Session::start(&["--backup", "--page-size", "3"]);
    paged.initialize("2025-11-25");
    let mut seen = Vec::new();
    let mut cursor: Option<Value> = None;
    for id in 10..100 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = paged.request(id, "tools/list", params);
        let tools = page["result"]["tools"].as_array().expect("tools").clone();
        assert!(tools.len() <= 3);
        seen.extend(tools);
        match page["result"].get("nextCursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
    }
    assert_eq!(seen, all);
}

#[test]
fn content_length_framing_is_detected_and_answered_in_kind() {
    let mut s = Session::start(&[]);
    let body = initialize(1, "2025-06-18", "lsp").to_string();
    let framed = format!(
        "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: {}\r\n\r\n{}",
        body.len(),
        body
    );
    s.send_raw(framed.as_bytes());
    let reply = read_framed(&mut s.stdout);
    assert_eq!(reply["result"]["protocolVersion"], json!("2025-06-18"));
    let ping = json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}).to_string();
    s.send_raw(format!("Content-Length: {}\r\n\r\n{}", ping.len(), ping).as_bytes());
    assert_eq!(read_framed(&mut s.stdout)["id"], json!("p"));
    // A header block without Content-Length is reported and the session goes on.
    s.send_raw(b"X-Nothing: 1\r\n\r\n");
    assert_eq!(read_framed(&mut s.stdout)["error"]["code"], json!(-32700));
    s.send_raw(format!("Content-Length: {}\r\n\r\n{}", ping.len(), ping).as_bytes());
    assert_eq!(read_framed(&mut s.stdout)["id"], json!("p"));
    assert!(s.close_and_wait().success());
}

#[test]
fn a_bom_and_blank_lines_before_the_first_message_do_not_break_detection() {
    let mut s = Session::start(&[]);
    s.send_raw(b"\xEF\xBB\xBF\n\r\n  ");
    s.send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(s.recv()["id"], json!(3));
}

#[test]
fn the_stateless_revision_is_served_without_initialize() {
    let mut s = Session::start(&[]);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "2"}});
    let discover = s.request(1, "server/discover", json!({"_meta": meta}));
    let result = &discover["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(result["resultType"], json!("complete"));
    assert!(result["capabilities"]["tools"].is_object());
    assert!(result["ttlMs"].is_u64());
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        json!("filesystem")
    );
    let list = s.request(2, "tools/list", json!({"_meta": meta}));
    assert_eq!(list["result"]["resultType"], json!("complete"));
    assert!(list["result"]["tools"].is_array());
    assert!(list["result"]["cacheScope"].is_string());
    let bad = s.request(
        3,
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01"}}),
    );
    assert_eq!(bad["error"]["code"], json!(-32022));
    assert_eq!(bad["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(bad["error"]["data"]["requested"], json!("2030-01-01"));
}

#[test]
fn a_request_with_neither_handshake_nor_meta_is_told_the_exact_meta_key() {
    let mut s = Session::start(&[]);
    let reply = s.request(1, "tools/list", json!({}));
    assert_eq!(reply["error"]["code"], json!(-32600));
    let said = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains(r#"send "2026-07-28" in each request's params._meta["io.modelcontextprotocol/protocolVersion"]"#),
        "{said}"
    );
    // Doing what it says is served.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let list = s.request(2, "tools/list", json!({"_meta": meta}));
    assert!(list["result"]["tools"].is_array(), "{list}");
}

#[test]
fn oversized_messages_are_refused_without_ending_the_session() {
    let mut s = Session::start(&["--max-message-bytes", "1024"]);
    s.initialize("2025-11-25");
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}}}}\n",
        "x".repeat(4096)
    );
    s.send_raw(big.as_bytes());
    let err = s.recv();
    assert_eq!(err["error"]["code"], json!(-32600));
    assert!(err["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("1024")));
    assert_eq!(s.request(3, "ping", json!({}))["result"], json!({}));
}

#[test]
fn stdin_eof_exits_zero_after_answering_what_was_sent() {
    let mut s = Session::start(&[]);
    s.initialize("2025-11-25");
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    let status = {
        drop(s.stdin.take());
        let reply = s.recv();
        assert_eq!(reply["id"], json!(2));
        s.close_and_wait()
    };
    assert!(status.success());
}

#[test]
fn batches_are_accepted_only_under_2025_03_26() {
    let mut s = Session::start(&[]);
    s.initialize("2025-03-26");
    s.send(json!([
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    ]));
    let replies = s.recv();
    let ids: Vec<Value> = replies
        .as_array()
        .expect("array reply")
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(2), json!(3)]);

    let mut s = Session::start(&[]);
    s.initialize("2025-11-25");
    s.send(json!([{"jsonrpc": "2.0", "id": 2, "method": "ping"}]));
    assert_eq!(s.recv()["error"]["code"], json!(-32600));
}

#[test]
fn the_server_refuses_slash_as_root_and_explains_why() {
    let out = command()
        .args(["--root", "/"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--allow-root-slash") && err.contains("desktop"),
        "{err}"
    );
}

#[test]
fn root_precedence_is_flag_then_environment_then_current_directory() {
    let a = temp_dir();
    let b = temp_dir();
    let c = temp_dir();
    let root_line = |cmd: &mut Command| {
        let out = cmd.arg("tools").output().expect("run");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let canon = |d: &tempfile::TempDir| d.path().canonicalize().expect("c").display().to_string();
    let flag = root_line(
        command()
            .arg("--root")
            .arg(a.path())
            .env("FILESYSTEM_ROOT", b.path())
            .current_dir(c.path()),
    );
    assert!(flag.contains(&canon(&a)), "{flag}");
    let env = root_line(
        command()
            .env("FILESYSTEM_ROOT", b.path())
            .current_dir(c.path()),
    );
    assert!(env.contains(&canon(&b)), "{env}");
    let cwd = root_line(
        command()
            .env_remove("FILESYSTEM_ROOT")
            .current_dir(c.path()),
    );
    assert!(cwd.contains(&canon(&c)), "{cwd}");
    let missing = command()
        .args(["--root", "/definitely/not/here", "tools"])
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("does not exist"));
}

#[test]
fn server_mode_refuses_root_flag_and_requires_root_per_call() {
    let refused = command()
        .args(["--server", "--root", "/tmp"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert!(!refused.status.success());

    // An exported FILESYSTEM_ROOT must not stop the daemon from starting.
    std::env::set_var("FILESYSTEM_ROOT", "/tmp");
    let allowed = temp_dir();
    let mut s = Session::spawn(
        &[
            "--server".as_ref(),
            "--allow-root".as_ref(),
            allowed.path().as_os_str(),
        ],
        &[],
    );
    s.initialize("2025-11-25");
    let tools = s.request(2, "tools/list", json!({}));
    for tool in tools["result"]["tools"].as_array().expect("tools") {
        assert_eq!(tool["inputSchema"]["required"][0], json!("root"), "{tool}");
    }
    let Some(name) = tools["result"]["tools"][0]["name"]
        .as_str()
        .map(str::to_string)
    else {
        // The toolset may be empty while its issue is open; the schema check above still ran.
        return;
    };
    for (id, args) in [
        (3, json!({})),
        (4, json!({"root": "relative/dir"})),
        (5, json!({"root": "/"})),
        (6, json!({"root": "/no/such/dir"})),
    ] {
        let reply = s.request(id, "tools/call", json!({"name": name, "arguments": args}));
        assert_eq!(reply["result"]["isError"], json!(true), "{reply}");
        let text = reply["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(text.starts_with("InvalidArgument"), "{text}");
    }
}
