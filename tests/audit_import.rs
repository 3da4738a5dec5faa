#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem audit import`: the shelpa era's mirror becomes `.filesystem/` history that
//! `undo_file` walks back through, and a second import adds nothing.

use test_support::audit::Workspace;
use test_support::bin::command;
use test_support::cli::printed;

fn call(ws: &Workspace, tool: &str, args: &str) -> (bool, String) {
    let out = command()
        .args(["call", tool, args, "--backup", "--no-call-log", "--root"])
        .arg(&ws.root)
        .output()
        .expect("run");
    let text = printed(&out);
    (out.status.success(), text)
}

fn show(ws: &Workspace, path: &str, record: &str) -> Vec<u8> {
    let run = ws.audit(&["show", path, record]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

#[test]
fn import_then_undo_walks_back_through_the_shelpa_versions() {
    let ws = Workspace::fixture();
    let log = ws.audit(&["log", "notes/plan.md", "--json"]);
    let records = log.json()["records"].as_array().expect("records").len();
    assert!(records >= 6, "the fixture overwrites plan.md many times");

    let first = ws.audit(&["import", "--json"]);
    assert_eq!(first.code, 0, "{}{}", first.text(), first.stderr);
    let doc = first.json();
    let plan = doc["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == "notes/plan.md")
        .expect("plan.md imported")
        .clone();
    assert_eq!(plan["added"], records);
    assert_eq!(plan["newest_version"], records);

    // The workspace file holds the newest version, so one undo gives the record before it, and
    // walking back reaches the oldest record, byte for byte.
    assert_eq!(
        ws.read("notes/plan.md"),
        show(&ws, "notes/plan.md", &format!("#{records}"))
    );
    for back in 1..records {
        let (ok, text) = call(&ws, "undo_file", r#"{"path":"notes/plan.md"}"#);
        assert!(ok, "{text}");
        let expected = show(&ws, "notes/plan.md", &format!("#{}", records - back));
        assert_eq!(ws.read("notes/plan.md"), expected, "after {back} undo(s)");
    }
    let (ok, text) = call(&ws, "undo_file", r#"{"path":"notes/plan.md"}"#);
    assert!(!ok && text.contains("InvalidArgument"), "{text}");
    let (ok, text) = call(&ws, "redo_file", r#"{"path":"notes/plan.md","steps":2}"#);
    assert!(ok, "{text}");
    assert_eq!(ws.read("notes/plan.md"), show(&ws, "notes/plan.md", "#3"));

    let second = ws.audit(&["import", "--json"]);
    assert_eq!(second.code, 0);
    assert_eq!(
        second.json()["added"],
        0,
        "a second import must add nothing"
    );
}

#[test]
fn a_file_changed_after_the_shelpa_era_keeps_its_current_content_through_undo() {
    let ws = Workspace::fixture();
    // src/config.toml holds an edit that is in no record.
    let current = ws.read("src/config.toml");
    let run = ws.audit(&["import"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.text().contains("imported"), "{}", run.text());
    let (ok, text) = call(&ws, "undo_file", r#"{"path":"src/config.toml"}"#);
    assert!(ok, "{text}");
    assert_ne!(ws.read("src/config.toml"), current);
    // The unrecorded edit was saved as a version before stepping back, so redo brings it back.
    let (ok, text) = call(&ws, "redo_file", r#"{"path":"src/config.toml"}"#);
    assert!(ok, "{text}");
    assert_eq!(ws.read("src/config.toml"), current);
}

#[test]
fn restore_into_a_workspace_with_history_can_be_undone() {
    let ws = Workspace::fixture();
    assert_eq!(ws.audit(&["import"]).code, 0);
    let before = ws.read("notes/plan.md");
    let restored = ws.audit(&["restore", "notes/plan.md", "#2", "--json"]);
    assert_eq!(restored.code, 0, "{}", restored.stderr);
    assert!(restored.json()["history_version"].is_u64());
    assert_eq!(ws.read("notes/plan.md"), show(&ws, "notes/plan.md", "#2"));
    let (ok, text) = call(&ws, "undo_file", r#"{"path":"notes/plan.md"}"#);
    assert!(ok, "{text}");
    assert_eq!(ws.read("notes/plan.md"), before);
}
