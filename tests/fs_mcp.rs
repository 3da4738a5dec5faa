#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The filesystem mode over real MCP on stdin/stdout: the tool list (12 tools, 14 with
//! `--backup`), annotations, schemas, structured content and error results.

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::batch;
use test_support::temp::temp_dir;

/// The names of the filesystem mode's table of tools, in its order (the order of `tools/list`
/// under `--backup`).
fn table() -> Vec<&'static str> {
    fs_tools::TOOLS.iter().map(|t| t.name).collect()
}

/// Sends `requests` (after the handshake) to a server on `root` and returns its replies by id.
fn session(root: &std::path::Path, flags: &[&str], requests: &[Value]) -> Vec<Value> {
    let mut cmd = command();
    cmd.arg("--root")
        .arg(root)
        .args(flags)
        .env_remove("FILESYSTEM_ROOT");
    batch(cmd, requests)
}

fn tools(root: &std::path::Path, flags: &[&str]) -> Vec<Value> {
    let replies = session(
        root,
        flags,
        &[json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})],
    );
    replies[1]["result"]["tools"]
        .as_array()
        .expect("tools array")
        .clone()
}

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

#[test]
fn tools_list_shows_twelve_tools_and_fourteen_with_backup() {
    let tmp = temp_dir();
    let plain = names(&tools(tmp.path(), &[]));
    let backup = names(&tools(tmp.path(), &["--backup"]));
    assert_eq!(backup, table(), "under --backup: the whole table, in order");
    let without: Vec<&str> = table()
        .into_iter()
        .filter(|n| !fs_tools::tools::BACKUP_ONLY.contains(n))
        .collect();
    assert_eq!(
        plain, without,
        "without it: the table less undo_file and redo_file"
    );
    assert_eq!((plain.len(), backup.len()), (12, 14));
}

#[test]
fn annotations_and_schemas_describe_each_tool() {
    let tmp = temp_dir();
    let list = tools(tmp.path(), &[]);
    let get = |name: &str| -> Value {
        list.iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    for name in ["read_text_file", "list_directory", "directory_tree"] {
        let t = get(name);
        assert_eq!(t["annotations"]["readOnlyHint"], json!(true), "{name}");
        assert_eq!(t["annotations"]["openWorldHint"], json!(false), "{name}");
    }
    let write = get("write_file");
    assert_eq!(write["annotations"]["readOnlyHint"], json!(false));
    assert_eq!(write["annotations"]["destructiveHint"], json!(true));
    assert_eq!(write["annotations"]["idempotentHint"], json!(true));
    let mkdir = get("create_directory");
    assert_eq!(mkdir["annotations"]["destructiveHint"], json!(false));
    assert_eq!(mkdir["annotations"]["idempotentHint"], json!(true));
    let edit = get("edit_file");
    assert_eq!(edit["annotations"]["destructiveHint"], json!(true));
    assert_eq!(edit["annotations"]["idempotentHint"], json!(false));
    assert_eq!(edit["inputSchema"]["required"], json!(["path", "edits"]));
    assert_eq!(
        edit["inputSchema"]["properties"]["edits"]["items"]["required"],
        json!(["oldText", "newText"])
    );
    assert_eq!(
        edit["inputSchema"]["properties"]["dryRun"]["default"],
        json!(false)
    );
    let read = get("read_text_file");
    // The text is the result; no structured copy of every file.
    assert!(read.get("outputSchema").is_none(), "{read}");
    let tree = get("directory_tree");
    assert!(tree["inputSchema"]["properties"]["excludePatterns"].is_object());
    assert!(tree["inputSchema"]["properties"]["maxDepth"].is_object());
    for t in &list {
        assert_eq!(t["inputSchema"]["type"], json!("object"), "{}", t["name"]);
        assert!(!t["description"].as_str().unwrap_or("").is_empty());
    }
}

#[test]
fn calls_return_structured_content_and_errors_as_results() {
    let tmp = temp_dir();
    std::fs::write(tmp.path().join("a.txt"), "hello\n").expect("write");
    let replies = session(
        tmp.path(),
        &[],
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "read_text_file", "arguments": {"path": "a.txt"}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "read_text_file", "arguments": {"path": "../x"}}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "write_file", "arguments": {"path": "b.txt", "content": "hi"}}}),
        ],
    );
    let read = &replies[1]["result"];
    assert_eq!(read["content"][0]["text"], json!("hello\n"));
    assert!(read.get("structuredContent").is_none(), "{read}");
    assert_ne!(read["isError"], json!(true));
    let escape = &replies[2]["result"];
    assert_eq!(escape["isError"], json!(true));
    assert!(escape["content"][0]["text"]
        .as_str()
        .expect("text")
        .starts_with("PathEscape: "));
    let write = &replies[3]["result"];
    assert_eq!(write["content"][0]["text"], json!("Created b.txt: 2 bytes"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("b.txt")).expect("read"),
        "hi"
    );
    assert!(replies[0]["result"]["instructions"]
        .as_str()
        .expect("instructions")
        .contains("edit_file"));
}

#[test]
fn a_root_argument_injected_by_a_gateway_is_accepted_and_ignored_by_every_tool() {
    let tmp = temp_dir();
    let elsewhere = temp_dir();
    std::fs::write(tmp.path().join("a.txt"), "v1\n").expect("write");
    // A gateway adds the same `root` to every call; here it even names another directory,
    // which must change nothing: `--root` alone decides the workspace in this mode.
    let root = elsewhere.path().to_str().expect("utf8 path");
    let calls: Vec<(&str, Value)> = vec![
        ("read_text_file", json!({"path": "a.txt"})),
        ("create_file", json!({"path": "c.txt", "content": "c"})),
        ("write_file", json!({"path": "a.txt", "content": "v2\n"})),
        (
            "edit_file",
            json!({"path": "a.txt", "edits": [{"oldText": "v2", "newText": "v3"}]}),
        ),
        ("create_directory", json!({"path": "d"})),
        ("list_directory", json!({"path": "."})),
        ("directory_tree", json!({"path": "."})),
        (
            "move_file",
            json!({"source": "c.txt", "destination": "d/c.txt"}),
        ),
        ("delete_file", json!({"path": "d/c.txt"})),
        ("list_trash", json!({})),
        ("restore_file", json!({"id": 1})),
        ("search_file", json!({"path": "c.txt"})),
        ("undo_file", json!({"path": "a.txt"})),
        ("redo_file", json!({"path": "a.txt"})),
    ];
    let called: Vec<&str> = calls.iter().map(|(name, _)| *name).collect();
    assert_eq!(called, table(), "every tool of the mode is called");
    let requests: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            let mut args = args.clone();
            args["root"] = json!(root);
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                   "params": {"name": name, "arguments": args}})
        })
        .collect();
    let replies = session(tmp.path(), &["--backup"], &requests);
    for (i, (name, _)) in calls.iter().enumerate() {
        let result = &replies[i + 1]["result"];
        assert_ne!(result["isError"], json!(true), "{name}: {result}");
    }
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("a.txt")).expect("read"),
        "v3\n"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("d/c.txt")).expect("restored"),
        "c"
    );
    let stray: Vec<_> = std::fs::read_dir(elsewhere.path())
        .expect("read elsewhere")
        .collect();
    assert!(stray.is_empty(), "the injected root was touched: {stray:?}");
    // Other unknown arguments are still refused.
    let replies = session(
        tmp.path(),
        &[],
        &[json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "read_text_file", "arguments": {"path": "a.txt", "roots": root}}})],
    );
    let result = &replies[1]["result"];
    assert_eq!(result["isError"], json!(true), "{result}");
    assert!(result["content"][0]["text"]
        .as_str()
        .expect("text")
        .contains("'roots'"));
}
