#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The recovery tools over a real MCP session: structured results match their output schemas.

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::{batch, tools_call};
use test_support::temp::canonical_temp_dir;

/// Sends `calls` (tool name, arguments) after the handshake and returns the responses by id.
fn session(root: &std::path::Path, calls: &[(&str, Value)]) -> Vec<Value> {
    let mut cmd = command();
    cmd.arg("--root").arg(root).arg("--backup");
    let mut requests = vec![json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})];
    requests.extend(
        calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| tools_call(i as i64 + 2, name, args.clone())),
    );
    batch(cmd, &requests)
}

#[test]
fn list_trash_and_search_file_return_structured_content_with_schemas() {
    let (_tmp, root) = canonical_temp_dir();
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
