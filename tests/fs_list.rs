#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! list_directory and directory_tree through the real binary: format, order, what is left out,
//! symlinks, depth and exclude patterns.

use serde_json::{json, Value};
use std::os::unix::fs::symlink;

use test_support::temp::Ws;

fn tree(ws: &Ws, args: Value) -> Value {
    let text = ws.call("directory_tree", args).expect_ok();
    serde_json::from_str(&text).expect("directory_tree answers JSON")
}

/// A small project with noise a model should not see.
fn project() -> Ws {
    let ws = Ws::new();
    ws.write("src/main.rs", "fn main() {}\n");
    ws.write("src/lib/util.rs", "\n");
    ws.write("README.md", "# x\n");
    ws.write("b.txt", "b");
    ws.write("node_modules/pkg/index.js", "x");
    ws.write("target/debug/app", "x");
    ws.write(".git/HEAD", "ref");
    ws.write("sub/__pycache__/m.pyc", "x");
    ws.write(".filesystem/.moves", "x");
    ws.write("app.log", "x");
    ws.write("build/out.o", "x");
    ws.write("keep/target", "a file named like a build dir is shown");
    ws.write(".gitignore", "*.log\nbuild/\n");
    ws
}

#[test]
fn list_directory_sorts_by_name_and_marks_directories() {
    let ws = project();
    let text = ws.call("list_directory", json!({"path": "."})).expect_ok();
    assert_eq!(
        text,
        "[FILE] .gitignore\n[FILE] README.md\n[FILE] b.txt\n[DIR] keep\n[DIR] src\n[DIR] sub\n"
    );
    let text = ws
        .call("list_directory", json!({"path": "src"}))
        .expect_ok();
    assert_eq!(text, "[DIR] lib\n[FILE] main.rs\n");
    let text = ws
        .call("list_directory", json!({"path": "keep"}))
        .expect_ok();
    assert_eq!(text, "[FILE] target\n");
}

#[test]
fn a_hidden_directory_named_explicitly_is_still_listed() {
    let ws = project();
    let text = ws
        .call("list_directory", json!({"path": "node_modules"}))
        .expect_ok();
    assert_eq!(text, "[DIR] pkg\n");
}

#[test]
fn list_directory_refuses_files_missing_paths_and_escapes() {
    let ws = project();
    let err = ws
        .call("list_directory", json!({"path": "b.txt"}))
        .expect_err("InvalidArgument");
    assert!(err.contains("read_text_file"), "{err}");
    ws.call("list_directory", json!({"path": "nope"}))
        .expect_err("NotFound");
    ws.call("list_directory", json!({"path": ".."}))
        .expect_err("PathEscape");
    ws.call("list_directory", json!({"path": ".filesystem"}))
        .expect_err("PathEscape");
    ws.call("list_directory", json!({"path": ".", "recursive": true}))
        .expect_err("InvalidArgument");
    symlink(&ws.outside, ws.path("out")).expect("link");
    ws.call("list_directory", json!({"path": "out"}))
        .expect_err("PathEscape");
}

#[test]
fn directory_tree_is_compact_json_without_noise() {
    let ws = project();
    let text = ws.call("directory_tree", json!({"path": "."})).expect_ok();
    assert!(!text.contains("\n "), "compact JSON: {text}");
    let v: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        v,
        json!([
            {"name": ".gitignore", "type": "file"},
            {"name": "README.md", "type": "file"},
            {"name": "b.txt", "type": "file"},
            {"name": "keep", "type": "directory", "children": [{"name": "target", "type": "file"}]},
            {"name": "src", "type": "directory", "children": [
                {"name": "lib", "type": "directory", "children": [{"name": "util.rs", "type": "file"}]},
                {"name": "main.rs", "type": "file"}
            ]},
            {"name": "sub", "type": "directory", "children": []}
        ])
    );
}

#[test]
fn the_root_gitignore_applies_in_subdirectories_without_a_git_dir() {
    let ws = Ws::new();
    ws.write(".gitignore", "secret*.txt\n/only-top.txt\n");
    ws.write("a/secret1.txt", "x");
    ws.write("a/ok.txt", "x");
    ws.write("only-top.txt", "x");
    ws.write("a/only-top.txt", "x");
    assert!(!ws.path(".git").exists());
    let text = ws.call("list_directory", json!({"path": "a"})).expect_ok();
    assert_eq!(text, "[FILE] ok.txt\n[FILE] only-top.txt\n");
    let v = tree(&ws, json!({"path": "."}));
    assert_eq!(
        v,
        json!([
            {"name": ".gitignore", "type": "file"},
            {"name": "a", "type": "directory", "children": [
                {"name": "ok.txt", "type": "file"},
                {"name": "only-top.txt", "type": "file"}
            ]}
        ])
    );
}

#[test]
fn max_depth_one_lists_direct_entries_with_empty_children() {
    let ws = project();
    let v = tree(&ws, json!({"path": "src", "maxDepth": 1}));
    assert_eq!(
        v,
        json!([
            {"name": "lib", "type": "directory", "children": []},
            {"name": "main.rs", "type": "file"}
        ])
    );
    let v = tree(&ws, json!({"path": ".", "maxDepth": 2}));
    let src = v
        .as_array()
        .and_then(|a| a.iter().find(|e| e["name"] == "src"))
        .expect("src listed");
    assert_eq!(
        src["children"][0],
        json!({"name": "lib", "type": "directory", "children": []})
    );
    ws.call("directory_tree", json!({"path": ".", "maxDepth": 0}))
        .expect_err("InvalidArgument");
}

#[test]
fn exclude_patterns_match_names_anywhere_and_paths_from_the_start() {
    let ws = project();
    let v = tree(
        &ws,
        json!({"path": ".", "excludePatterns": ["*.rs", "keep", "sub/"]}),
    );
    assert_eq!(
        v,
        json!([
            {"name": ".gitignore", "type": "file"},
            {"name": "README.md", "type": "file"},
            {"name": "b.txt", "type": "file"},
            {"name": "src", "type": "directory", "children": [
                {"name": "lib", "type": "directory", "children": []}
            ]}
        ])
    );
    let v = tree(&ws, json!({"path": "src", "excludePatterns": ["lib/*.rs"]}));
    assert_eq!(
        v,
        json!([
            {"name": "lib", "type": "directory", "children": []},
            {"name": "main.rs", "type": "file"}
        ])
    );
    ws.call(
        "directory_tree",
        json!({"path": ".", "excludePatterns": ["a[b"]}),
    )
    .expect_err("InvalidArgument");
    ws.call(
        "directory_tree",
        json!({"path": ".", "excludePatterns": "*.rs"}),
    )
    .expect_err("InvalidArgument");
}

#[test]
fn symlinks_are_listed_as_symlinks_and_never_followed() {
    let ws = Ws::new();
    ws.write("real/inner.txt", "x");
    std::fs::write(ws.outside.join("secret.txt"), "x").expect("write");
    symlink("real", ws.path("alias")).expect("link");
    symlink(&ws.outside, ws.path("out")).expect("link");
    symlink("real/inner.txt", ws.path("to_file")).expect("link");
    symlink("nowhere", ws.path("dangling")).expect("link");
    let v = tree(&ws, json!({"path": "."}));
    // Links to directories, to files, to outside and to nothing are all `symlink`, with no
    // `children`: the walk never follows them.
    assert_eq!(
        v,
        json!([
            {"name": "alias", "type": "symlink"},
            {"name": "dangling", "type": "symlink"},
            {"name": "out", "type": "symlink"},
            {"name": "real", "type": "directory", "children": [{"name": "inner.txt", "type": "file"}]},
            {"name": "to_file", "type": "symlink"}
        ])
    );
    // list_directory keeps the reference server's two markers.
    let text = ws.call("list_directory", json!({"path": "."})).expect_ok();
    assert_eq!(
        text,
        "[FILE] alias\n[FILE] dangling\n[FILE] out\n[DIR] real\n[FILE] to_file\n"
    );
    // Naming a link to an inside directory lists the directory it points to.
    let text = ws
        .call("list_directory", json!({"path": "alias"}))
        .expect_ok();
    assert_eq!(text, "[FILE] inner.txt\n");
    ws.call("directory_tree", json!({"path": "out"}))
        .expect_err("PathEscape");
}

#[test]
fn directory_tree_refuses_files_and_missing_paths() {
    let ws = project();
    ws.call("directory_tree", json!({"path": "b.txt"}))
        .expect_err("InvalidArgument");
    ws.call("directory_tree", json!({"path": "missing"}))
        .expect_err("NotFound");
    ws.call("directory_tree", json!({"path": "/"}))
        .expect_err("PathEscape");
}
