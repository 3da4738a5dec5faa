#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! MCP roots: a server started without `--root`, `FILESYSTEM_ROOT` or a usable current directory
//! (here `/`, as desktop clients start servers) asks a client that declared `roots` for them,
//! serves the first, lists the others, follows `notifications/roots/list_changed`, and says
//! clearly what is missing when it cannot have a root. `--root` always wins.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::{initialized, outcome, text_json, Session};
use test_support::temp::canonical_temp_dir;

/// A server started in `/` with no root of its own, serving the extended filesystem tools.
fn rootless(extra: &[&str]) -> Session {
    rootless_with(&[&["--tools", "extended"], extra].concat())
}

/// A server started in `/` with no root of its own and exactly these flags.
fn rootless_with(flags: &[&str]) -> Session {
    let mut cmd = command();
    cmd.current_dir("/")
        .env_remove("FILESYSTEM_ROOT")
        .args(flags);
    Session::from_command(cmd)
}

/// The handshake of a client at `version` declaring `capabilities`; returns the initialize reply.
fn handshake(s: &mut Session, version: &str, capabilities: Value) -> Value {
    let reply = s.request(
        1,
        "initialize",
        json!({"protocolVersion": version, "capabilities": capabilities,
               "clientInfo": {"name": "roots-test", "version": "1"}}),
    );
    s.send(initialized());
    reply
}

/// Reads the server's `roots/list` request and answers it with `roots` (URIs); returns the
/// request.
fn answer_roots(s: &mut Session, roots: &[String]) -> Value {
    let request = s.recv();
    assert_eq!(request["method"], "roots/list", "{request}");
    assert!(request.get("params").is_none(), "{request}");
    let roots: Vec<Value> = roots
        .iter()
        .map(|u| json!({"uri": u, "name": "r"}))
        .collect();
    s.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": roots}}));
    request
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display()).replace(' ', "%20")
}

/// Two workspaces under one temporary directory: `my project` (with a space, so its URI is
/// percent-encoded) and `second`, each with its own `hello.txt`.
fn two_workspaces() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (tmp, base) = canonical_temp_dir();
    let first = base.join("my project");
    let second = base.join("second");
    for (dir, text) in [(&first, "first\n"), (&second, "second\n")] {
        std::fs::create_dir(dir).expect("mkdir");
        std::fs::write(dir.join("hello.txt"), text).expect("write");
    }
    (tmp, first, second)
}

fn read_hello(s: &mut Session, id: i64) -> (bool, String) {
    s.call_text(id, "read_text_file", json!({"path": "hello.txt"}))
}

#[test]
fn a_client_with_roots_is_asked_and_its_first_root_is_served() {
    let (_tmp, first, second) = two_workspaces();
    let mut s = rootless(&[]);
    handshake(
        &mut s,
        "2025-11-25",
        json!({"roots": {"listChanged": true}}),
    );
    answer_roots(&mut s, &[uri(&first), uri(&second)]);
    assert_eq!(read_hello(&mut s, 2), (false, "first\n".into()));
    let (is_error, listed) = s.call_text(3, "list_allowed_directories", json!({}));
    assert!(!is_error, "{listed}");
    assert_eq!(
        listed,
        format!(
            "Allowed directories:\n{}\n{}",
            first.display(),
            second.display()
        )
    );
    // Writes land in the served root, and the call log goes into its store.
    let (is_error, text) =
        s.call_text(4, "create_file", json!({"path": "new.txt", "content": "x"}));
    assert!(!is_error, "{text}");
    assert!(first.join("new.txt").is_file());
    assert!(first.join(".filesystem/.calls.jsonl").is_file());
    assert!(!second.join("new.txt").exists());
    assert!(s.close_and_wait().success());
}

#[test]
fn list_changed_asks_again_and_switches_to_the_new_first_root() {
    let (_tmp, first, second) = two_workspaces();
    let mut s = rootless(&[]);
    handshake(
        &mut s,
        "2025-06-18",
        json!({"roots": {"listChanged": true}}),
    );
    let asked = answer_roots(&mut s, &[uri(&first)]);
    assert_eq!(read_hello(&mut s, 2), (false, "first\n".into()));
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    let again = answer_roots(&mut s, &[uri(&second), uri(&first)]);
    assert_ne!(asked["id"], again["id"], "every request has its own id");
    assert_eq!(read_hello(&mut s, 3), (false, "second\n".into()));
    let (_, listed) = s.call_text(4, "list_allowed_directories", json!({}));
    assert_eq!(
        listed,
        format!(
            "Allowed directories:\n{}\n{}",
            second.display(),
            first.display()
        )
    );
    // An answer with no usable root revokes access, saying why.
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    answer_roots(&mut s, &[]);
    let (is_error, text) = read_hello(&mut s, 5);
    assert!(
        is_error && text.contains("the client lists no roots"),
        "{text}"
    );
    assert!(s.close_and_wait().success());
}

#[test]
fn an_explicit_root_wins_and_no_roots_list_is_sent() {
    let (_tmp, first, _second) = two_workspaces();
    let mut s = Session::start_in(&first, &[]);
    handshake(
        &mut s,
        "2025-11-25",
        json!({"roots": {"listChanged": true}}),
    );
    // The next message is the answer to this ping, not a roots/list request.
    let pong = s.request(2, "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    assert_eq!(read_hello(&mut s, 3), (false, "first\n".into()));
    assert!(s.close_and_wait().success());
}

#[test]
fn the_stateless_revision_is_told_that_root_is_needed() {
    let mut s = rootless(&[]);
    let reply = s.request(
        1,
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": "hello.txt"},
               "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    );
    let (is_error, text) = outcome(&reply["result"]);
    assert!(is_error, "{reply}");
    assert!(
        text.contains("--root") && text.contains("2026-07-28") && text.contains("deprecates roots"),
        "{text}"
    );
    assert!(s.close_and_wait().success());
}

#[test]
fn a_client_without_the_roots_capability_is_told_to_pass_root() {
    let mut s = rootless(&[]);
    handshake(&mut s, "2025-11-25", json!({}));
    let (is_error, text) = read_hello(&mut s, 2);
    assert!(is_error, "{text}");
    assert!(
        text.contains("did not declare the 'roots' capability") && text.contains("--root"),
        "{text}"
    );
    assert!(s.close_and_wait().success());
}

#[test]
fn non_file_uris_and_missing_directories_are_refused_clearly() {
    let (_tmp, first, _second) = two_workspaces();
    let missing = first.join("nope");
    let mut s = rootless(&[]);
    handshake(&mut s, "2025-03-26", json!({"roots": {}}));
    answer_roots(&mut s, &["https://example.com/repo".into(), uri(&missing)]);
    let (is_error, text) = read_hello(&mut s, 2);
    assert!(is_error, "{text}");
    assert!(
        text.contains("'https://example.com/repo' is not a file:// URI")
            && text.contains("does not exist")
            && text.contains("--root"),
        "{text}"
    );
    // A usable root after refused ones is served; the refused ones are skipped.
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    answer_roots(&mut s, &["file:///".into(), uri(&first)]);
    assert_eq!(read_hello(&mut s, 3), (false, "first\n".into()));
    let (_, listed) = s.call_text(4, "list_allowed_directories", json!({}));
    assert_eq!(listed, format!("Allowed directories:\n{}", first.display()));
    assert!(s.close_and_wait().success());
}

#[test]
fn a_client_that_answers_roots_list_with_an_error_is_reported() {
    let mut s = rootless(&[]);
    handshake(&mut s, "2025-11-25", json!({"roots": {}}));
    let request = s.recv();
    assert_eq!(request["method"], "roots/list");
    s.send(json!({"jsonrpc": "2.0", "id": request["id"],
                  "error": {"code": -32601, "message": "List roots not supported"}}));
    let (is_error, text) = read_hello(&mut s, 2);
    assert!(
        is_error && text.contains("error -32601 (List roots not supported)"),
        "{text}"
    );
    assert!(s.close_and_wait().success());
}

#[test]
fn one_off_commands_without_a_root_still_refuse_slash() {
    let out = command()
        .current_dir("/")
        .env_remove("FILESYSTEM_ROOT")
        .arg("tools")
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to serve '/'"), "{stderr}");
}

#[test]
fn the_pipe_mode_takes_its_root_from_the_client_too_and_keeps_its_name() {
    let (_tmp, first, _second) = two_workspaces();
    let mut s = rootless_with(&["--legacy-pipe"]);
    let init = handshake(&mut s, "2025-11-25", json!({"roots": {}}));
    assert_eq!(init["result"]["serverInfo"]["name"], "shelpa-mcp", "{init}");
    answer_roots(&mut s, &[uri(&first)]);
    let result = s.call(2, "shelpa_pipe", json!({"command": "head -n 5 hello.txt"}));
    assert_eq!(text_json(&result)["stdout"], "first\n", "{result}");
    assert!(s.close_and_wait().success());
}
