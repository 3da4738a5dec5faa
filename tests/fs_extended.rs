#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The opt-in tools of `--tools` through the real binary: read_multiple_files, get_file_info,
//! list_directory_with_sizes and find_files on a small tree, their error labelling, a symlink to
//! outside in every one of them (never followed out, its target never shown), and which tools a
//! `--tools` selection serves in `tools/list` and in the `tools` subcommand.

use std::os::unix::fs::{symlink, PermissionsExt};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::cli::run;
use test_support::mcp::{batch, Client};
use test_support::temp::Ws;

const EXTENDED: &[&str] = &["--tools", "extended"];

/// A small tree with a symlink to a file and one to a directory outside the workspace, and a
/// link to a file inside.
fn project() -> Ws {
    let ws = Ws::new();
    ws.write("a.txt", "alpha\n");
    ws.write("b.md", "# bee\n");
    ws.write("src/main.rs", "fn main() {}\n");
    ws.write("src/deep/x.txt", "x");
    ws.write(".filesystem/secret.txt", "store");
    std::fs::write(ws.outside.join("secret.txt"), "outside secret, 27 bytes...").expect("write");
    symlink(ws.outside.join("secret.txt"), ws.path("out.txt")).expect("link");
    symlink(&ws.outside, ws.path("outdir")).expect("link");
    symlink("a.txt", ws.path("in.txt")).expect("link");
    ws
}

fn call(ws: &Ws, tool: &str, args: Value) -> test_support::cli::Outcome {
    ws.call_with(tool, args, EXTENDED)
}

/// Asserts that nothing of the outside directory (its path, its file's name or content) shows.
fn shows_nothing_outside(ws: &Ws, text: &str) {
    let outside = ws.outside.to_string_lossy();
    assert!(
        !text.contains(outside.as_ref()),
        "outside path shown: {text}"
    );
    assert!(
        !text.contains("outside secret"),
        "outside content shown: {text}"
    );
    assert!(!text.contains("27 B"), "outside size shown: {text}");
}

#[test]
fn read_multiple_files_labels_each_result_by_path_in_input_order() {
    let ws = project();
    let text = call(
        &ws,
        "read_multiple_files",
        json!({"paths": ["b.md", "missing.txt", "a.txt", "src", "out.txt", "in.txt"]}),
    )
    .expect_ok();
    let parts: Vec<&str> = text.split("\n---\n").collect();
    assert_eq!(parts.len(), 6, "{text}");
    // As the reference: the content, then a newline of its own before the separator.
    assert_eq!(parts[0], "b.md:\n# bee\n\n");
    assert!(
        parts[1].starts_with("missing.txt: Error - NotFound: "),
        "{}",
        parts[1]
    );
    assert_eq!(parts[2], "a.txt:\nalpha\n\n");
    assert!(
        parts[3].starts_with("src: Error - InvalidArgument: "),
        "{}",
        parts[3]
    );
    assert!(
        parts[4].starts_with("out.txt: Error - PathEscape: "),
        "{}",
        parts[4]
    );
    assert_eq!(parts[5], "in.txt:\nalpha\n\n");
    shows_nothing_outside(&ws, &text);
}

#[test]
fn read_multiple_files_bounds_the_count_and_the_total_bytes() {
    let ws = project();
    let err = call(&ws, "read_multiple_files", json!({"paths": []})).expect_err("InvalidArgument");
    assert!(err.contains("1 to 100"), "{err}");
    let many: Vec<String> = (0..101).map(|i| format!("f{i}")).collect();
    call(&ws, "read_multiple_files", json!({ "paths": many })).expect_err("InvalidArgument");
    // a.txt and b.md are 6 bytes each: the second no longer fits in 10.
    let text = ws
        .call_with(
            "read_multiple_files",
            json!({"paths": ["a.txt", "b.md"]}),
            &["--tools", "extended", "--max-read-bytes", "10"],
        )
        .expect_ok();
    assert!(
        text.starts_with("a.txt:\nalpha\n\n\n---\nb.md: Error - InvalidArgument: "),
        "{text}"
    );
    assert!(text.contains("4 bytes left"), "{text}");
}

#[test]
fn read_multiple_files_answers_structured_content_too() {
    let ws = project();
    let mut client = Client::start(&ws.root, EXTENDED);
    let reply = client.call("read_multiple_files", json!({"paths": ["a.txt", "nope"]}));
    assert!(reply.ok, "{}", reply.raw);
    let raw: Value = serde_json::from_str(&reply.raw).expect("json");
    let files = &raw["structuredContent"]["files"];
    assert_eq!(files[0], json!({"path": "a.txt", "content": "alpha\n"}));
    assert_eq!(files[1]["path"], "nope");
    assert!(files[1]["error"]
        .as_str()
        .is_some_and(|e| e.starts_with("NotFound: ")));
    client.close();
}

fn info_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once(": ").expect("key: value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn field(text: &str, key: &str) -> String {
    info_lines(text)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

fn is_rfc3339_utc(s: &str) -> bool {
    // 2026-12-01T11:23:57Z
    s.len() == 20
        && s.ends_with('Z')
        && s.as_bytes()[4] == b'-'
        && s.as_bytes()[10] == b'T'
        && s.as_bytes()[13] == b':'
}

#[test]
fn get_file_info_describes_a_file_and_a_directory() {
    let ws = project();
    std::fs::set_permissions(ws.path("a.txt"), std::fs::Permissions::from_mode(0o640))
        .expect("chmod");
    let text = call(&ws, "get_file_info", json!({"path": "a.txt"})).expect_ok();
    let keys: Vec<String> = info_lines(&text).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "path",
            "type",
            "size",
            "created",
            "modified",
            "accessed",
            "isDirectory",
            "isFile",
            "permissions"
        ]
    );
    assert_eq!(field(&text, "path"), "a.txt");
    assert_eq!(field(&text, "type"), "file");
    assert_eq!(field(&text, "size"), "6");
    assert_eq!(field(&text, "permissions"), "640");
    assert_eq!(field(&text, "isFile"), "true");
    assert!(is_rfc3339_utc(&field(&text, "modified")), "{text}");
    assert!(is_rfc3339_utc(&field(&text, "accessed")), "{text}");
    let created = field(&text, "created");
    assert!(
        is_rfc3339_utc(&created) || created.starts_with("unknown"),
        "{text}"
    );

    let text = call(&ws, "get_file_info", json!({"path": "src"})).expect_ok();
    assert_eq!(field(&text, "type"), "directory");
    assert_eq!(field(&text, "isDirectory"), "true");
    let root = call(&ws, "get_file_info", json!({"path": "."})).expect_ok();
    assert_eq!(field(&root, "type"), "directory");
    shows_nothing_outside(&ws, &root);

    call(&ws, "get_file_info", json!({"path": "nope"})).expect_err("NotFound");
    call(
        &ws,
        "get_file_info",
        json!({"path": "../outside/secret.txt"}),
    )
    .expect_err("PathEscape");
    call(
        &ws,
        "get_file_info",
        json!({"path": ".filesystem/secret.txt"}),
    )
    .expect_err("PathEscape");
}

#[test]
fn get_file_info_describes_a_link_as_itself_and_never_shows_an_outside_target() {
    let ws = project();
    let inside = call(&ws, "get_file_info", json!({"path": "in.txt"})).expect_ok();
    assert_eq!(field(&inside, "type"), "symlink");
    assert_eq!(field(&inside, "target"), "a.txt");
    assert_eq!(field(&inside, "isFile"), "false");
    for link in ["out.txt", "outdir"] {
        let text = call(&ws, "get_file_info", json!({"path": link})).expect_ok();
        assert_eq!(field(&text, "type"), "symlink", "{text}");
        assert!(
            field(&text, "target").starts_with("outside the workspace"),
            "{text}"
        );
        shows_nothing_outside(&ws, &text);
    }
    // Through a link out, nothing is described.
    call(&ws, "get_file_info", json!({"path": "outdir/secret.txt"})).expect_err("PathEscape");
    symlink("gone.txt", ws.path("dangling")).expect("link");
    let text = call(&ws, "get_file_info", json!({"path": "dangling"})).expect_ok();
    assert_eq!(field(&text, "target"), "gone.txt (missing)");
}

#[test]
fn get_file_info_counts_versions_with_backup() {
    let ws = Ws::new();
    let flags = ["--tools", "extended", "--backup"];
    for content in ["one", "two", "three"] {
        ws.call_with(
            "write_file",
            json!({"path": "v.txt", "content": content}),
            &flags,
        )
        .expect_ok();
    }
    ws.call_with("undo_file", json!({"path": "v.txt"}), &flags)
        .expect_ok();
    let text = ws
        .call_with("get_file_info", json!({"path": "v.txt"}), &flags)
        .expect_ok();
    assert_eq!(field(&text, "versions"), "3 (current: 2)", "{text}");
    ws.write("plain.txt", "never written by the server");
    let text = ws
        .call_with("get_file_info", json!({"path": "plain.txt"}), &flags)
        .expect_ok();
    assert_eq!(field(&text, "versions"), "none");
    // Without --backup there is no versions line.
    let text = call(&ws, "get_file_info", json!({"path": "v.txt"})).expect_ok();
    assert!(!text.contains("versions"), "{text}");
}

#[test]
fn list_directory_with_sizes_writes_the_reference_format() {
    let ws = project();
    ws.write("big.bin", vec![b'x'; 2048]);
    let text = call(&ws, "list_directory_with_sizes", json!({"path": "."})).expect_ok();
    // The link to an outside directory is a link, not a directory: a file of size 0 (its target
    // is neither measured nor entered), like the link to an outside file; the link inside counts
    // with its target's size.
    let row = |name: &str, size: &str| format!("[FILE] {name:<30} {size:>10}\n");
    let expected = [
        row("a.txt", "6 B"),
        row("b.md", "6 B"),
        row("big.bin", "2.00 KB"),
        row("in.txt", "6 B"),
        row("out.txt", "0 B"),
        row("outdir", "0 B"),
        format!("[DIR] {:<30} \n", "src"),
        "\nTotal: 6 files, 1 directories\nCombined size: 2.02 KB\n".to_string(),
    ]
    .concat();
    assert_eq!(text, expected);
    shows_nothing_outside(&ws, &text);

    let by_size = call(
        &ws,
        "list_directory_with_sizes",
        json!({"path": ".", "sortBy": "size"}),
    )
    .expect_ok();
    // Largest first; a directory takes part with its own size (as in the reference), so only
    // the order of the files is pinned here.
    let files: Vec<&str> = by_size
        .lines()
        .filter(|l| l.starts_with("[FILE]"))
        .map(|l| l.split_whitespace().nth(1).expect("name"))
        .collect();
    assert_eq!(
        files,
        ["big.bin", "a.txt", "b.md", "in.txt", "out.txt", "outdir"]
    );
    call(
        &ws,
        "list_directory_with_sizes",
        json!({"path": ".", "sortBy": "date"}),
    )
    .expect_err("InvalidArgument");
    call(&ws, "list_directory_with_sizes", json!({"path": "outdir"})).expect_err("PathEscape");
    call(&ws, "list_directory_with_sizes", json!({"path": "a.txt"})).expect_err("InvalidArgument");
}

#[test]
fn find_files_matches_relative_paths_like_the_reference() {
    let ws = project();
    let top = call(&ws, "find_files", json!({"path": ".", "pattern": "*.txt"})).expect_ok();
    // Top level only; the link out is never offered, the link in is.
    assert_eq!(top, "a.txt\nin.txt\n");
    let deep = call(
        &ws,
        "find_files",
        json!({"path": ".", "pattern": "**/*.txt"}),
    )
    .expect_ok();
    assert_eq!(deep, "a.txt\nin.txt\nsrc/deep/x.txt\n");
    shows_nothing_outside(&ws, &deep);
    // Below a subdirectory the pattern is relative to it; the answer is root-relative.
    let sub = call(&ws, "find_files", json!({"path": "src", "pattern": "*"})).expect_ok();
    assert_eq!(sub, "src/deep\nsrc/main.rs\n");
    let excluded = call(
        &ws,
        "find_files",
        json!({"path": ".", "pattern": "**", "excludePatterns": ["deep", "*.md", "in.txt"]}),
    )
    .expect_ok();
    assert_eq!(excluded, "a.txt\nsrc\nsrc/main.rs\n");
    // The server's store is never searched, not even by name.
    let store = call(
        &ws,
        "find_files",
        json!({"path": ".", "pattern": "**/secret*"}),
    )
    .expect_ok();
    assert_eq!(store, "No matches found\n");
    call(&ws, "find_files", json!({"path": ".", "pattern": "a["})).expect_err("InvalidArgument");
    call(&ws, "find_files", json!({"path": "outdir", "pattern": "*"})).expect_err("PathEscape");
    call(&ws, "find_files", json!({"path": "a.txt", "pattern": "*"})).expect_err("InvalidArgument");
}

#[test]
fn find_files_caps_its_answer_and_says_so() {
    let ws = Ws::new();
    for i in 0..1005 {
        ws.write(&format!("d/f{i:04}"), "");
    }
    let text = call(&ws, "find_files", json!({"path": "d", "pattern": "*"})).expect_ok();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1001);
    assert_eq!(lines[0], "d/f0000");
    assert!(
        lines[1000].starts_with("[truncated: more than 1000 matches"),
        "{text}"
    );
}

fn listed(flags: &[&str]) -> Vec<String> {
    let ws = Ws::new();
    let mut cmd = command();
    cmd.arg("--root")
        .arg(&ws.root)
        .args(flags)
        .env_remove("FILESYSTEM_ROOT");
    let replies = batch(
        cmd,
        &[json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})],
    );
    replies[1]["result"]["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

#[test]
fn the_default_list_is_unchanged_and_tools_selects_more_or_fewer() {
    let table: Vec<&str> = fs_tools::TOOLS.iter().map(|t| t.name).collect();
    assert_eq!(listed(&["--backup"]), table);
    assert_eq!(listed(&["--backup", "--tools", "default"]), table);
    let all: Vec<&str> = fs_tools::tools::every_tool().map(|t| t.name).collect();
    assert_eq!(listed(&["--backup", "--tools", "extended"]), all);
    assert_eq!(all.len(), 25);
    assert_eq!(
        listed(&["--tools", "find_files,read_text_file,get_file_info"]),
        ["read_text_file", "get_file_info", "find_files"]
    );
}

#[test]
fn a_tool_left_out_by_the_selection_cannot_be_called() {
    let ws = project();
    let out = ws.call("find_files", json!({"path": ".", "pattern": "*"}));
    assert!(!out.ok, "{}", out.text);
    let out = ws.call_with(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"oldText": "alpha", "newText": "beta"}]}),
        &["--tools", "read_text_file"],
    );
    assert!(!out.ok, "{}", out.text);
    assert_eq!(ws.read("a.txt"), "alpha\n");
}

#[test]
fn an_unknown_tool_name_is_a_cli_error_listing_the_valid_ones() {
    let ws = Ws::new();
    let (ok, printed) = run(
        &ws.root,
        &["tools", "--tools", "read_text_file,search_files"],
    );
    assert!(!ok, "{printed}");
    assert!(printed.contains("unknown tool 'search_files'"), "{printed}");
    assert!(
        printed.contains("find_files") && printed.contains("undo_file"),
        "{printed}"
    );
}

#[test]
fn tools_needs_a_filesystem_toolset_to_select_from() {
    let ws = Ws::new();
    let (ok, printed) = run(&ws.root, &["tools", "--legacy-pipe", "--tools", "extended"]);
    assert!(!ok && printed.contains("--with-filesystem"), "{printed}");
    let (ok, printed) = run(
        &ws.root,
        &[
            "tools",
            "--legacy-pipe",
            "--with-filesystem",
            "--tools",
            "find_files",
        ],
    );
    assert!(ok && printed.contains("find_files"), "{printed}");
    assert!(!printed.contains("read_text_file"), "{printed}");
}

#[test]
fn the_tools_subcommand_lists_what_the_selection_serves() {
    let ws = Ws::new();
    let (ok, plain) = run(&ws.root, &["tools"]);
    assert!(ok, "{plain}");
    assert!(plain.starts_with("12 tools"), "{plain}");
    assert!(!plain.contains("find_files"), "{plain}");
    let (ok, extended) = run(&ws.root, &["tools", "--tools", "extended"]);
    assert!(ok, "{extended}");
    assert!(extended.starts_with("23 tools"), "{extended}");
    for name in [
        "read_multiple_files",
        "get_file_info",
        "list_directory_with_sizes",
        "find_files",
        "read_media_file",
        "list_operations",
        "revert_operation",
        "list_allowed_directories",
        "search_content",
        "copy_file",
        "append_file",
    ] {
        assert!(extended.contains(name), "{name}: {extended}");
    }
    let (ok, picked) = run(&ws.root, &["tools", "--tools", "get_file_info"]);
    assert!(ok && picked.starts_with("1 tools"), "{picked}");
}
