#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The store marks itself ignored: `.filesystem/.gitignore` says `*`, so git, ripgrep and fd
//! leave the store alone, and `check` counts the file as one of the store's own.

use std::process::Command;

use serde_json::json;

use test_support::bin::command;
use test_support::mcp::Session;

#[test]
fn a_new_store_is_ignored_by_git_and_ripgrep_and_check_accepts_it() {
    let mut s = Session::start(&["--backup"]);
    s.initialize("2025-11-25");
    let r = s.call(
        2,
        "write_file",
        json!({"path": "a.txt", "content": "one\n"}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let r = s.call(
        3,
        "write_file",
        json!({"path": "a.txt", "content": "two\n"}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let root = s.root.clone();
    assert_eq!(
        std::fs::read_to_string(root.join(".filesystem/.gitignore"))
            .expect("the store's .gitignore"),
        "*\n"
    );
    // ripgrep honours a .gitignore only inside a git repository unless told otherwise.
    let rg = Command::new("rg")
        .args(["--files", "--hidden", "--no-require-git"])
        .current_dir(&root)
        .output()
        .expect("run rg");
    let listed = String::from_utf8_lossy(&rg.stdout);
    assert!(listed.contains("a.txt"), "{listed}");
    assert!(
        !listed.contains(".filesystem"),
        "rg listed the store: {listed}"
    );
    if Command::new("git").arg("--version").output().is_ok() {
        let init = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&root)
            .status()
            .expect("git init");
        assert!(init.success());
        let status = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=all"])
            .current_dir(&root)
            .output()
            .expect("git status");
        let text = String::from_utf8_lossy(&status.stdout);
        assert!(text.contains("a.txt"), "{text}");
        assert!(!text.contains(".filesystem"), "git saw the store: {text}");
    }
    let check = command()
        .args(["check", "--strict", "--root"])
        .arg(&root)
        .env_remove("FILESYSTEM_ROOT")
        .output()
        .expect("check");
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(s.close_and_wait().success());
}
