#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Moves, deletes and restores killed (SIGKILL) right after each of their writes in turn, through
//! the store's crash-point hook (`FILESYSTEM_TEST_STOP_AFTER=op:N`, see
//! `crates/workspace/src/history/crash_point.rs`): after every kill `check` finds no error, the
//! next open (a tool call, or `check --repair`) finishes or undoes what was cut short (a tool
//! call's is itself killed once more while doing so), and
//! then nothing is lost: the file is in exactly one place, the workspace or the trash, its
//! version history is with it (undo works), the logs agree with where it is, a stale history the
//! operation had to set aside is kept, and `check --strict` is clean.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use test_support::cli::{in_root, printed};
use test_support::temp::canonical_temp_dir;

const STOP_AFTER: &str = "FILESYSTEM_TEST_STOP_AFTER";

fn run(root: &Path, args: &[&str], stop: Option<String>) -> Output {
    let mut cmd = in_root(root, args);
    cmd.env_remove(STOP_AFTER);
    if let Some(s) = stop {
        cmd.env(STOP_AFTER, s);
    }
    cmd.output().expect("run filesystem")
}

fn call_with(root: &Path, tool: &str, args: &Value, stop: Option<String>) -> Output {
    run(root, &["call", tool, &args.to_string(), "--backup"], stop)
}

fn ok(root: &Path, tool: &str, args: Value) -> String {
    let out = call_with(root, tool, &args, None);
    let text = printed(&out);
    assert!(out.status.success(), "{tool} {args}: {text}");
    text
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok()
}

/// Every file under `dir` (not following links), as paths relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(list) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in list {
            let e = e.expect("entry");
            let t = e.file_type().expect("type");
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path().strip_prefix(dir).expect("under").to_path_buf());
            }
        }
    }
    out
}

/// The workspace every operation starts from: `d/a.txt` with versions "a v1" and "a v2"; stale
/// histories (their files removed outside the server) at `c.txt` and `r.txt`, which a move or
/// restore onto those paths must set aside, not drop; and, for restores, `d/a.txt` already in the
/// trash as id 1.
fn fixture(root: &Path, deleted: bool) {
    for (path, content) in [
        ("d/a.txt", "a v1"),
        ("d/a.txt", "a v2"),
        ("c.txt", "c v1"),
        ("r.txt", "r v1"),
    ] {
        ok(
            root,
            "write_file",
            json!({"path": path, "content": content}),
        );
    }
    std::fs::remove_file(root.join("c.txt")).expect("rm");
    std::fs::remove_file(root.join("r.txt")).expect("rm");
    if deleted {
        ok(root, "delete_file", json!({"path": "d/a.txt"}));
    }
}

/// One operation to cut short: the hook's name for it, the call, and the workspace paths the
/// file `a.txt` can be at before and after it.
struct Case {
    name: &'static str,
    op: &'static str,
    tool: &'static str,
    args: Value,
    deleted_first: bool,
    before: &'static str,
    after: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "move a file onto a stale history",
            op: "move",
            tool: "move_file",
            args: json!({"source": "d/a.txt", "destination": "c.txt"}),
            deleted_first: false,
            before: "d/a.txt",
            after: Some("c.txt"),
        },
        Case {
            name: "move a directory",
            op: "move",
            tool: "move_file",
            args: json!({"source": "d", "destination": "e/f"}),
            deleted_first: false,
            before: "d/a.txt",
            after: Some("e/f/a.txt"),
        },
        Case {
            name: "delete a file",
            op: "delete",
            tool: "delete_file",
            args: json!({"path": "d/a.txt"}),
            deleted_first: false,
            before: "d/a.txt",
            after: None,
        },
        Case {
            name: "delete a directory",
            op: "delete",
            tool: "delete_file",
            args: json!({"path": "d"}),
            deleted_first: false,
            before: "d/a.txt",
            after: None,
        },
        Case {
            name: "restore a file",
            op: "restore",
            tool: "restore_file",
            args: json!({"id": 1}),
            deleted_first: true,
            before: "d/a.txt",
            after: Some("d/a.txt"),
        },
        Case {
            name: "restore a file onto a stale history",
            op: "restore",
            tool: "restore_file",
            args: json!({"id": 1, "destination": "r.txt"}),
            deleted_first: true,
            before: "d/a.txt",
            after: Some("r.txt"),
        },
    ]
}

/// Where `a.txt` is once the store has been reopened: a workspace path, or a trash id.
enum Place {
    Workspace(&'static str),
    Trash(u64),
}

fn locate(root: &Path, case: &Case, step: &str) -> Place {
    let mut found = Vec::new();
    for p in [Some(case.before), case.after].into_iter().flatten() {
        if read(root, p).is_some()
            && !found
                .iter()
                .any(|f: &Place| matches!(f, Place::Workspace(q) if *q == p))
        {
            found.push(Place::Workspace(p));
        }
    }
    let trash = root.join(".filesystem/.trash");
    for f in files_under(&trash) {
        let mut parts = f.components();
        let Some(first) = parts.next() else { continue };
        let first = first.as_os_str().to_string_lossy().into_owned();
        if first.ends_with(".history") {
            continue;
        }
        if std::fs::read_to_string(trash.join(&f)).is_ok_and(|c| c == "a v2") {
            found.push(Place::Trash(first.parse().expect("a trash id")));
        }
    }
    assert_eq!(
        found.len(),
        1,
        "{step}: a.txt must be in exactly one place, found {}",
        found.len()
    );
    found.pop().expect("one place")
}

/// After the reopen: nothing lost, logs agreeing with the disk, the store clean.
fn assert_nothing_lost(root: &Path, case: &Case, step: &str) {
    let trash_list = ok(root, "list_trash", json!({}));
    for note in [".pending-move", ".pending-delete", ".pending-restore"] {
        assert!(
            !root.join(".filesystem").join(note).exists(),
            "{step}: {note} is still there"
        );
    }
    let path = match locate(root, case, step) {
        Place::Workspace(p) => {
            assert_eq!(read(root, p).as_deref(), Some("a v2"), "{step}");
            // Restored (or never deleted): the trash does not list it.
            if case.deleted_first && p == case.after.unwrap_or("") {
                assert!(
                    !trash_list.contains("id 1 "),
                    "{step}: restored but still listed in the trash: {trash_list}"
                );
            }
            if case.op == "move" && Some(p) == case.after {
                let moves = read(root, ".filesystem/.moves").unwrap_or_default();
                assert!(
                    moves.lines().count() == 1,
                    "{step}: the move is logged once: {moves}"
                );
            }
            p
        }
        Place::Trash(id) => {
            assert!(
                trash_list.contains(&format!("id {id} ")),
                "{step}: trash entry {id} is not listed: {trash_list}"
            );
            let text = ok(root, "restore_file", json!({"id": id}));
            let restored = if case.args["path"] == "d" || case.args["source"] == "d" {
                "d/a.txt"
            } else {
                case.before
            };
            assert!(text.contains("history"), "{step}: {text}");
            restored
        }
    };
    let text = ok(root, "undo_file", json!({"path": path}));
    assert_eq!(
        read(root, path).as_deref(),
        Some("a v1"),
        "{step}: the history did not come along: {text}"
    );
    // The stale histories are kept: at their paths, or set aside into .orphans/.
    let store = root.join(".filesystem");
    for stale in ["c v1", "r v1"] {
        assert!(
            files_under(&store)
                .iter()
                .any(|f| std::fs::read_to_string(store.join(f)).is_ok_and(|c| c == stale)),
            "{step}: the stale history holding {stale:?} was lost"
        );
    }
    let checked = run(root, &["check", "--strict"], None);
    assert!(
        checked.status.success(),
        "{step}: check --strict after the reopen: {}",
        printed(&checked)
    );
}

#[test]
fn a_move_delete_or_restore_killed_after_any_of_its_writes_loses_nothing() {
    for case in cases() {
        let mut n = 1u64;
        loop {
            let step = format!("{} (killed after write {n})", case.name);
            let (_d, root) = canonical_temp_dir();
            fixture(&root, case.deleted_first);
            let stop = Some(format!("{}:{n}", case.op));
            let first = call_with(&root, case.tool, &case.args, stop);
            if first.status.success() {
                // Fewer than n writes: every one of them has been tried.
                assert!(n > 4, "{}: only {} writes", case.name, n - 1);
                assert_nothing_lost(&root, &case, &step);
                break;
            }
            assert!(
                first.status.code().is_none(),
                "{step}: failed without being killed: {}",
                printed(&first)
            );
            // `check` sees what a crash leaves, never damage.
            let checked = run(&root, &["check"], None);
            assert!(
                checked.status.success(),
                "{step}: check right after the kill: {}",
                printed(&checked)
            );
            // The next open finishes it, killed once more after its first write if it has one;
            // every other time that open is `check --repair`'s, which must leave no error.
            let again = if n.is_multiple_of(2) {
                run(&root, &["check", "--repair"], None)
            } else {
                run(
                    &root,
                    &["call", "list_trash", "{}", "--backup"],
                    Some(format!("{}:1", case.op)),
                )
            };
            if !again.status.success() {
                assert!(again.status.code().is_none(), "{step}: {}", printed(&again));
            }
            assert_nothing_lost(&root, &case, &step);
            n += 1;
            assert!(n < 40, "{}: never finished", case.name);
        }
    }
}
