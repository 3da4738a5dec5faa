#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The pipe mode's session directory when it vanishes under the session (issue #14, item 5):
//! the session falls back to the nearest existing directory, says so, and is never stuck; a
//! directory replaced by a symlink is refused, not followed, and `cd`/`pwd` still work.
//! Every test runs the real binary in one MCP session.

use std::path::Path;

use serde_json::{json, Value};

use test_support::mcp::Session;
use test_support::temp::{canonical_temp_dir, temp_dir};

fn start(root: &Path, combined: bool) -> Session {
    let flags: &[&str] = if combined {
        &["--legacy-pipe", "--with-filesystem"]
    } else {
        &["--legacy-pipe"]
    };
    let mut s = Session::start_in(root, flags);
    s.initialize("2025-11-25");
    s
}

/// One `shelpa_pipe` call; returns (isError, the JSON result).
fn pipe(s: &mut Session, id: i64, command: &str) -> (bool, Value) {
    let r = s.call(id, "shelpa_pipe", json!({ "command": command }));
    (
        r["isError"] == json!(true),
        serde_json::from_str(&test_support::mcp::text(&r)).expect("JSON result"),
    )
}

fn pipe_ok(s: &mut Session, id: i64, command: &str) -> Value {
    let (failed, v) = pipe(s, id, command);
    assert!(!failed, "{command}: {v}");
    v
}

fn note(v: &Value) -> &str {
    v["note"].as_str().unwrap_or("")
}

#[test]
fn a_session_directory_deleted_by_delete_file_falls_back_to_the_root_and_says_so() {
    let (_tmp, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::create_dir_all(root.join("other")).expect("mkdir");
    std::fs::write(root.join("sub/in.txt"), "x\n").expect("write");
    std::fs::write(root.join("top.txt"), "t\n").expect("write");
    let mut s = start(&root, true);

    pipe_ok(&mut s, 2, "cd sub");
    let deleted = s.call(3, "delete_file", json!({"path": "sub"}));
    assert_eq!(deleted["isError"], json!(false), "{deleted}");
    assert!(!root.join("sub").exists());

    let pwd = pipe_ok(&mut s, 4, "pwd");
    assert_eq!(pwd["stdout"], format!("{}\n", root.display()), "{pwd}");
    let said = note(&pwd);
    assert!(
        said.contains("cwd") && said.contains("'sub'") && said.contains("'.'"),
        "{pwd}"
    );
    // The result keeps its recorded shape; the note is an added field.
    assert!(pwd["meta"]["steps"].is_array(), "{pwd}");
    assert!(
        !said.contains(&*root.to_string_lossy()),
        "host root leaked: {said}"
    );

    // The session moved: the next calls run at the root without a note.
    let ls = pipe_ok(&mut s, 5, "ls");
    assert!(
        ls["stdout"].as_str().unwrap_or("").contains("top.txt"),
        "{ls}"
    );
    assert!(ls.get("note").is_none(), "{ls}");
    pipe_ok(&mut s, 6, "cd other");
    let pwd = pipe_ok(&mut s, 7, "pwd");
    assert_eq!(pwd["stdout"], format!("{}/other\n", root.display()));
}

#[test]
fn a_nested_directory_removed_outside_falls_back_to_its_parent() {
    let (_tmp, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
    std::fs::write(root.join("a/keep.txt"), "k\n").expect("write");
    let mut s = start(&root, false);

    pipe_ok(&mut s, 2, "cd a/b");
    std::fs::remove_dir_all(root.join("a/b")).expect("rm -r outside");

    // The first call after the removal is a listing: it runs in `a` and says why.
    let ls = pipe_ok(&mut s, 3, "ls");
    assert!(
        ls["stdout"].as_str().unwrap_or("").contains("keep.txt"),
        "{ls}"
    );
    let said = note(&ls);
    assert!(said.contains("'a/b'") && said.contains("'a'"), "{ls}");

    let pwd = pipe_ok(&mut s, 4, "pwd");
    assert_eq!(pwd["stdout"], format!("{}/a\n", root.display()));
    assert!(pwd.get("note").is_none(), "{pwd}");
    pipe_ok(&mut s, 5, "cd ..");
    let pwd = pipe_ok(&mut s, 6, "pwd");
    assert_eq!(pwd["stdout"], format!("{}\n", root.display()));
}

#[test]
fn a_whole_removed_chain_falls_back_to_the_root_and_a_failure_carries_the_note_too() {
    let (_tmp, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join("x/y/z")).expect("mkdir");
    let mut s = start(&root, false);

    pipe_ok(&mut s, 2, "cd x/y/z");
    std::fs::remove_dir_all(root.join("x")).expect("rm -r outside");
    // A run that fails still reports the move.
    let (failed, v) = pipe(&mut s, 3, "wc -l no-such-file.txt");
    assert!(failed, "{v}");
    assert_eq!(v["error"]["code"], "EXEC_FAILED", "{v}");
    assert!(
        note(&v).contains("'x/y/z'") && note(&v).contains("'.'"),
        "{v}"
    );
    let pwd = pipe_ok(&mut s, 4, "pwd");
    assert_eq!(pwd["stdout"], format!("{}\n", root.display()));
}

#[test]
fn a_session_directory_turned_into_a_file_falls_back_and_shelpa_write_says_so() {
    let (_tmp, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join("d")).expect("mkdir");
    let mut s = start(&root, false);

    pipe_ok(&mut s, 2, "cd d");
    std::fs::remove_dir(root.join("d")).expect("rmdir");
    std::fs::write(root.join("d"), "now a file\n").expect("write");

    let r = s.call(
        3,
        "shelpa_write",
        json!({"path": "written.txt", "content": "w\n"}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let v: Value = serde_json::from_str(&test_support::mcp::text(&r)).expect("json");
    assert!(note(&v).contains("'d'") && note(&v).contains("'.'"), "{v}");
    assert_eq!(
        std::fs::read_to_string(root.join("written.txt")).expect("written at the root"),
        "w\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("d")).expect("file untouched"),
        "now a file\n"
    );
}

#[test]
fn a_session_directory_replaced_by_a_symlink_is_refused_not_followed_but_cd_and_pwd_work() {
    let (_tmp, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::write(root.join("top.txt"), "t\n").expect("write");
    let outside = temp_dir();
    std::fs::write(outside.path().join("outside-marker"), "secret\n").expect("write");
    let mut s = start(&root, false);

    pipe_ok(&mut s, 2, "cd sub");
    std::fs::remove_dir(root.join("sub")).expect("rmdir");
    std::os::unix::fs::symlink(outside.path(), root.join("sub")).expect("symlink");

    for (id, command) in [(3, "ls"), (4, "ls -l"), (5, "rg -l secret")] {
        let (failed, v) = pipe(&mut s, id, command);
        assert!(failed, "{command}: {v}");
        assert_eq!(v["error"]["reason"], "PATH_ESCAPE", "{command}: {v}");
        assert!(
            v["error"]["detail"].as_str().unwrap_or("").contains("cwd"),
            "{command}: {v}"
        );
        assert!(!v.to_string().contains("outside-marker"), "{command}: {v}");
        assert!(!v.to_string().contains("secret\\n"), "{command}: {v}");
    }
    // Not a vanished directory: the session did not silently move to the root.
    let pwd = pipe_ok(&mut s, 6, "pwd");
    assert_eq!(pwd["stdout"], format!("{}/sub\n", root.display()));
    assert!(note(&pwd).contains("symbolic link"), "{pwd}");
    // `cd` still works, and gets the session out.
    pipe_ok(&mut s, 7, "cd ..");
    let ls = pipe_ok(&mut s, 8, "ls");
    assert!(
        ls["stdout"].as_str().unwrap_or("").contains("top.txt"),
        "{ls}"
    );
    assert!(ls.get("note").is_none(), "{ls}");
    // And `cd` through the link is refused as ever.
    let (failed, v) = pipe(&mut s, 9, "cd sub");
    assert!(failed, "{v}");
    assert_eq!(v["error"]["reason"], "PATH_ESCAPE", "{v}");
}

#[test]
fn an_ancestor_replaced_by_a_symlink_is_refused_not_skipped() {
    let (_tmp, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
    std::fs::create_dir_all(root.join("elsewhere")).expect("mkdir");
    std::fs::write(root.join("elsewhere/inside-marker"), "x\n").expect("write");
    let mut s = start(&root, false);

    pipe_ok(&mut s, 2, "cd a/b");
    std::fs::remove_dir_all(root.join("a")).expect("rm");
    // `a` is now a link inside the workspace to a directory without `b`.
    std::os::unix::fs::symlink(root.join("elsewhere"), root.join("a")).expect("symlink");
    let (failed, v) = pipe(&mut s, 3, "ls");
    assert!(failed, "{v}");
    assert_eq!(v["error"]["reason"], "PATH_ESCAPE", "{v}");
    assert!(!v.to_string().contains("inside-marker"), "{v}");
    // `cd /` spelled as the absolute root gets out.
    pipe_ok(&mut s, 4, &format!("cd {}", root.display()));
    let pwd = pipe_ok(&mut s, 5, "pwd");
    assert_eq!(pwd["stdout"], format!("{}\n", root.display()));
}

#[test]
fn an_explicit_cwd_that_does_not_exist_is_still_an_error() {
    let (_tmp, root) = canonical_temp_dir();
    let mut s = start(&root, false);
    let r = s.call(2, "shelpa_pipe", json!({"command": "ls", "cwd": "missing"}));
    assert_eq!(r["isError"], json!(true), "{r}");
    let v: Value = serde_json::from_str(&test_support::mcp::text(&r)).expect("json");
    assert_eq!(v["error"]["reason"], "NOT_A_DIRECTORY", "{v}");
    assert!(v.get("note").is_none(), "{v}");
}

/// The root renamed away and replaced by a symlink to an outside directory while the server runs
/// (an outside process can do this at any time): stages go on reading the workspace the server
/// holds open, never what the link now names. Neither a path operand (`../a.txt` from a
/// subdirectory) nor the kernel fence may name the workspace by its path again.
#[test]
fn a_root_replaced_by_a_symlink_is_not_followed_by_stages_or_their_fence() {
    let (_tmp, base) = canonical_temp_dir();
    let root = base.join("ws");
    let outside = base.join("outside");
    for dir in [&root, &outside] {
        std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
    }
    std::fs::write(root.join("a.txt"), "inside\n").expect("write");
    std::fs::write(root.join("sub/b.txt"), "inside too\n").expect("write");
    std::fs::write(outside.join("a.txt"), "OUTSIDE-SECRET\n").expect("write");
    std::fs::write(outside.join("sub/b.txt"), "OUTSIDE-SECRET\n").expect("write");
    let mut s = start(&root, false);
    pipe_ok(&mut s, 2, "cd sub");
    std::fs::rename(&root, base.join("ws-moved")).expect("move the root away");
    std::os::unix::fs::symlink(&outside, &root).expect("link in its place");
    for (id, command, shows) in [
        (3, "head ../a.txt", "inside"),
        (4, "wc -c ../a.txt b.txt", "b.txt"),
        (5, "rg -n inside ..", "inside too"),
        (6, "head -n 1 b.txt", "inside too"),
    ] {
        let (failed, v) = pipe(&mut s, id, command);
        let raw = v.to_string();
        assert!(
            !raw.contains("OUTSIDE-SECRET"),
            "{command} read through the link: {raw}"
        );
        assert!(!failed, "{command} must read the workspace: {raw}");
        assert!(
            v["stdout"].as_str().is_some_and(|o| o.contains(shows)),
            "{command}: {raw}"
        );
    }
}
