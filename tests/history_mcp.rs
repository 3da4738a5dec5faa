//! The recovery tools over a real MCP session: structured results match their output schemas.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use test_support::filesystem;

/// Sends `calls` (tool name, arguments) after the handshake and returns the responses by id.
fn session(root: &std::path::Path, calls: &[(&str, Value)]) -> Vec<Value> {
    let mut child = Command::new(filesystem())
        .arg("--root")
        .arg(root)
        .arg("--backup")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server");
    let mut input = String::new();
    input.push_str(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string());
    input.push('\n');
    input.push_str(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}).to_string());
    input.push('\n');
    input.push_str(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}).to_string());
    input.push('\n');
    for (i, (name, args)) in calls.iter().enumerate() {
        input.push_str(&json!({"jsonrpc":"2.0","id":i + 2,"method":"tools/call","params":{"name":name,"arguments":args}}).to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("send");
    drop(stdin);
    let out = child.wait_with_output().expect("server output");
    let mut responses: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    responses.sort_by_key(|r| r["id"].as_u64());
    responses
}

#[test]
fn list_trash_and_search_file_return_structured_content_with_schemas() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical");
    std::fs::create_dir(root.join("docs")).expect("mkdir");
    std::fs::write(root.join("docs/a.md"), "hello").expect("seed");
    let r = session(
        &root,
        &[
            (
                "move_file",
                json!({"source": "docs", "destination": "manual"}),
            ),
            ("delete_file", json!({"path": "manual/a.md"})),
            ("list_trash", json!({})),
            ("search_file", json!({"path": "docs/a.md"})),
            ("restore_file", json!({"id": 1})),
        ],
    );
    let tools = r[1]["result"]["tools"].as_array().expect("tools");
    for name in ["list_trash", "search_file"] {
        let t = tools.iter().find(|t| t["name"] == name).expect("listed");
        assert_eq!(t["outputSchema"]["type"], "object", "{name}");
    }
    assert!(tools.iter().any(|t| t["name"] == "undo_file"));

    let trash = &r[4]["result"];
    assert_eq!(trash["isError"], false);
    let entry = &trash["structuredContent"]["entries"][0];
    assert_eq!(entry["id"], 1);
    assert_eq!(entry["path"], "manual/a.md");
    assert_eq!(entry["kind"], "file");
    assert_eq!(entry["size"], 5);
    assert!(entry["deletedAt"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));

    let story = &r[5]["result"]["structuredContent"];
    assert_eq!(story["existsNow"], false);
    assert_eq!(story["status"], "in_trash");
    assert_eq!(story["trashId"], 1);
    assert_eq!(story["events"][0]["event"], "moved");
    assert_eq!(story["events"][0]["to"], "manual/a.md");
    assert_eq!(story["events"][0]["via"], "docs");
    assert_eq!(story["events"][1]["event"], "deleted");

    assert_eq!(r[6]["result"]["isError"], false);
    assert_eq!(
        std::fs::read_to_string(root.join("manual/a.md")).expect("restored"),
        "hello"
    );
}
