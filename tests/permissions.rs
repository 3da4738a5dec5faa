#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Who may write where: every tool that changes something, and every pipe write, against each
//! kind of rule (`--read-only-dir`, `--writable-dir`, `--read-only`), reached by a plain path, a
//! `..` spelling, an absolute path and a symlink that crosses the boundary. A refused change is
//! `ReadOnly` (pipe mode: `GUARD_VIOLATION` / `READ_ONLY`) naming the rule, and it changes
//! nothing; the same change on the allowed side succeeds, so no refusal is vacuous.

use serde_json::{json, Value};

use test_support::arena::Snapshot;
use test_support::cli::{self, Outcome};
use test_support::mcp::Session;
use test_support::temp::Ws;

/// A workspace with a read-only candidate `migrations/` (a file in it), a writable `src/` (a
/// file and a symlink `src/link` into `migrations/`), and `docs/`.
fn fixture() -> Ws {
    let ws = Ws::new();
    ws.write("migrations/0003.sql", "create table t;\n");
    ws.write("src/a.txt", "alpha\n");
    ws.write("docs/readme.md", "docs\n");
    std::os::unix::fs::symlink("../migrations", ws.path("src/link")).expect("symlink");
    ws
}

/// Runs `tool` once under `flags`.
fn call(ws: &Ws, tool: &str, args: Value, flags: &[&str]) -> Outcome {
    cli::call(&ws.root, tool, &args.to_string(), flags)
}

/// Asserts a ReadOnly refusal in the contract's words that left `watched` exactly as it was.
fn refused(ws: &Ws, tool: &str, args: Value, flags: &[&str], path: &str, rule: &str) {
    let watched = Snapshot::of(&ws.root.join("migrations"));
    let docs = Snapshot::of(&ws.root.join("docs"));
    let out = call(ws, tool, args.clone(), flags);
    let text = out.expect_err("ReadOnly");
    let contract = format!("ReadOnly: '{path}' is read-only ({rule})");
    assert!(
        text.starts_with(&contract),
        "{tool} {args} under {flags:?}: expected `{contract}`, got: {text}"
    );
    watched.assert_same(&Snapshot::of(&ws.root.join("migrations")), "migrations");
    docs.assert_same(&Snapshot::of(&ws.root.join("docs")), "docs");
}

const RO: [&str; 2] = ["--read-only-dir", "migrations"];

#[test]
fn every_write_tool_refuses_a_target_in_a_read_only_dir_however_it_is_spelt() {
    let ws = fixture();
    let rule = "--read-only-dir migrations";
    let abs = ws.root.join("migrations/0003.sql");
    let abs = abs.to_str().expect("utf8");
    for spelling in [
        "migrations/0003.sql",
        "src/../migrations/0003.sql",
        "./migrations//0003.sql",
        abs,
        "src/link/0003.sql",
    ] {
        refused(
            &ws,
            "write_file",
            json!({"path": spelling, "content": "drop table t;\n"}),
            &RO,
            "migrations/0003.sql",
            rule,
        );
        refused(
            &ws,
            "edit_file",
            json!({"path": spelling, "edits": [{"oldText": "create", "newText": "drop"}]}),
            &RO,
            "migrations/0003.sql",
            rule,
        );
        refused(
            &ws,
            "delete_file",
            json!({"path": spelling}),
            &RO,
            "migrations/0003.sql",
            rule,
        );
        refused(
            &ws,
            "move_file",
            json!({"source": spelling, "destination": "src/moved.sql"}),
            &RO,
            "migrations/0003.sql",
            rule,
        );
    }
    for spelling in [
        "migrations/0004.sql",
        "src/link/0004.sql",
        "src/../migrations/0004.sql",
    ] {
        refused(
            &ws,
            "create_file",
            json!({"path": spelling, "content": "x"}),
            &RO,
            "migrations/0004.sql",
            rule,
        );
        refused(
            &ws,
            "move_file",
            json!({"source": "src/a.txt", "destination": spelling}),
            &RO,
            "migrations/0004.sql",
            rule,
        );
    }
    refused(
        &ws,
        "create_directory",
        json!({"path": "src/link/new"}),
        &RO,
        "migrations/new",
        rule,
    );
    // The rule directory itself may be neither moved nor deleted, nor anything holding it.
    refused(
        &ws,
        "move_file",
        json!({"source": "migrations", "destination": "old"}),
        &RO,
        "migrations",
        rule,
    );
    ws.write("db/schema/1.sql", "x\n");
    refused(
        &ws,
        "delete_file",
        json!({"path": "db"}),
        &["--read-only-dir", "db/schema"],
        "db",
        "it holds --read-only-dir db/schema",
    );
    // The allowed side works under the same rule, and the link itself may be replaced.
    call(
        &ws,
        "write_file",
        json!({"path": "src/b.txt", "content": "ok\n"}),
        &RO,
    )
    .expect_ok();
    call(&ws, "delete_file", json!({"path": "src/link"}), &RO).expect_ok();
    assert_eq!(ws.read("src/b.txt"), "ok\n");
}

#[test]
fn a_rule_dir_that_is_a_symlink_also_guards_where_it_leads() {
    let ws = fixture();
    std::os::unix::fs::symlink("migrations", ws.path("db")).expect("symlink");
    refused(
        &ws,
        "write_file",
        json!({"path": "migrations/0003.sql", "content": "x"}),
        &["--read-only-dir", "db"],
        "migrations/0003.sql",
        "--read-only-dir db",
    );
}

#[test]
fn restore_and_undo_refuse_a_target_in_a_read_only_dir() {
    let ws = fixture();
    let backup = ["--backup"];
    call(
        &ws,
        "write_file",
        json!({"path": "migrations/0003.sql", "content": "v2\n"}),
        &backup,
    )
    .expect_ok();
    let ro_backup = ["--backup", "--read-only-dir", "migrations"];
    let rule = "--read-only-dir migrations";
    refused(
        &ws,
        "undo_file",
        json!({"path": "migrations/0003.sql"}),
        &ro_backup,
        "migrations/0003.sql",
        rule,
    );
    refused(
        &ws,
        "redo_file",
        json!({"path": "src/link/0003.sql"}),
        &ro_backup,
        "migrations/0003.sql",
        rule,
    );
    // A delete made before the rule: restoring to the original place is refused (the store's
    // own check: no path argument names it), restoring elsewhere works.
    call(
        &ws,
        "delete_file",
        json!({"path": "migrations/0003.sql"}),
        &backup,
    )
    .expect_ok();
    refused(
        &ws,
        "restore_file",
        json!({"id": 1}),
        &ro_backup,
        "migrations/0003.sql",
        rule,
    );
    refused(
        &ws,
        "restore_file",
        json!({"id": 1, "destination": "src/link/again.sql"}),
        &ro_backup,
        "migrations/again.sql",
        rule,
    );
    call(
        &ws,
        "restore_file",
        json!({"id": 1, "destination": "src/restored.sql"}),
        &ro_backup,
    )
    .expect_ok();
    assert_eq!(ws.read("src/restored.sql"), "v2\n");
}

#[test]
fn writable_dirs_admit_only_their_subtrees_and_read_only_dirs_subtract_from_them() {
    let ws = fixture();
    ws.write("src/vendor/lib.rs", "vendored\n");
    let flags = [
        "--writable-dir",
        "src",
        "--writable-dir",
        "notes",
        "--read-only-dir",
        "src/vendor",
    ];
    let outside = "only --writable-dir src, notes may change";
    refused(
        &ws,
        "write_file",
        json!({"path": "docs/readme.md", "content": "x"}),
        &flags,
        "docs/readme.md",
        outside,
    );
    refused(
        &ws,
        "create_file",
        json!({"path": "src/../top.txt", "content": "x"}),
        &flags,
        "top.txt",
        outside,
    );
    refused(
        &ws,
        "write_file",
        json!({"path": "src/link/0003.sql", "content": "x"}),
        &flags,
        "migrations/0003.sql",
        outside,
    );
    refused(
        &ws,
        "move_file",
        json!({"source": "src/a.txt", "destination": "docs/a.txt"}),
        &flags,
        "docs/a.txt",
        outside,
    );
    refused(
        &ws,
        "move_file",
        json!({"source": "docs/readme.md", "destination": "src/readme.md"}),
        &flags,
        "docs/readme.md",
        outside,
    );
    let vendor = Snapshot::of(&ws.root.join("src/vendor"));
    let out = call(
        &ws,
        "edit_file",
        json!({"path": "src/vendor/lib.rs", "edits": [{"oldText": "vendored", "newText": "patched"}]}),
        &flags,
    );
    assert!(out
        .expect_err("ReadOnly")
        .starts_with("ReadOnly: 'src/vendor/lib.rs' is read-only (--read-only-dir src/vendor)"),);
    vendor.assert_same(&Snapshot::of(&ws.root.join("src/vendor")), "src/vendor");
    refused(
        &ws,
        "move_file",
        json!({"source": "src", "destination": "notes/src"}),
        &flags,
        "src",
        "it holds --read-only-dir src/vendor",
    );
    // Inside a writable part, and nowhere else, changes work.
    call(
        &ws,
        "create_directory",
        json!({"path": "notes/today"}),
        &flags,
    )
    .expect_ok();
    call(
        &ws,
        "move_file",
        json!({"source": "src/a.txt", "destination": "notes/today/a.txt"}),
        &flags,
    )
    .expect_ok();
    assert_eq!(ws.read("notes/today/a.txt"), "alpha\n");
}

#[test]
fn environment_lists_add_rules_and_a_rule_outside_the_root_stops_the_server() {
    let ws = fixture();
    let out = cli::in_root(
        &ws.root,
        &["call", "write_file", r#"{"path":"docs/x","content":"x"}"#],
    )
    .env("FILESYSTEM_READ_ONLY_DIRS", "migrations:docs")
    .output()
    .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("ReadOnly: 'docs/x' is read-only (--read-only-dir docs)"),
        "{err}"
    );
    let out = cli::in_root(
        &ws.root,
        &["call", "write_file", r#"{"path":"docs/x","content":"x"}"#],
    )
    .env("FILESYSTEM_WRITABLE_DIRS", "src")
    .output()
    .expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("only --writable-dir src may change"));
    for bad in ["../outside", "/etc", "."] {
        let out = call(
            &ws,
            "read_text_file",
            json!({"path": "src/a.txt"}),
            &["--read-only-dir", bad],
        );
        assert!(!out.ok, "{bad}: a rule outside the root must be refused");
        assert!(out.text.contains("--read-only-dir"), "{}", out.text);
    }
}

/// One pipe-mode call through `filesystem call`: (success, what it printed).
fn pipe(ws: &Ws, tool: &str, args: Value, flags: &[&str]) -> Outcome {
    let mut all = vec!["--legacy-pipe", "--shelpa-tools", "all"];
    all.extend_from_slice(flags);
    call(ws, tool, args, &all)
}

fn pipe_refused(ws: &Ws, tool: &str, args: Value, flags: &[&str], detail: &str) {
    let before = Snapshot::of(&ws.root.join("migrations"));
    let docs = Snapshot::of(&ws.root.join("docs"));
    let out = pipe(ws, tool, args.clone(), flags);
    assert!(!out.ok, "{tool} {args} must be refused");
    let body: Value = serde_json::from_str(out.text.trim()).unwrap_or_else(|e| {
        panic!(
            "{tool} {args}: not a shelpa error object ({e}): {}",
            out.text
        )
    });
    assert_eq!(body["error"]["code"], "GUARD_VIOLATION", "{body}");
    assert_eq!(body["error"]["reason"], "READ_ONLY", "{body}");
    let got = body["error"]["detail"].as_str().unwrap_or_default();
    assert!(got.starts_with(detail), "expected `{detail}`, got `{got}`");
    before.assert_same(&Snapshot::of(&ws.root.join("migrations")), "migrations");
    docs.assert_same(&Snapshot::of(&ws.root.join("docs")), "docs");
    assert!(
        !ws.root.join(".shelpa/migrations").exists() && !ws.root.join(".shelpa/docs").exists(),
        "a refused write left a mirror record"
    );
}

#[test]
fn pipe_writes_refuse_read_only_targets_with_read_only() {
    let ws = fixture();
    let detail = "'migrations/0003.sql' is read-only (--read-only-dir migrations)";
    for target in [
        "migrations/0003.sql",
        "src/../migrations/0003.sql",
        "src/link/0003.sql",
    ] {
        pipe_refused(
            &ws,
            "shelpa_pipe",
            json!({"command": format!("ls | tee {target}")}),
            &RO,
            detail,
        );
        pipe_refused(
            &ws,
            "shelpa_pipe",
            json!({"command": format!("ls | tee -a {target}")}),
            &RO,
            detail,
        );
        pipe_refused(
            &ws,
            "shelpa_write",
            json!({"path": target, "content": "x"}),
            &RO,
            detail,
        );
        pipe_refused(
            &ws,
            "shelpa_tee",
            json!({"paths": ["src/ok.txt", target], "content": "x"}),
            &RO,
            detail,
        );
    }
    assert!(
        !ws.root.join("src/ok.txt").exists(),
        "a tee with one refused target writes none of them"
    );
    pipe_refused(
        &ws,
        "shelpa_write",
        json!({"path": "docs/x", "content": "x"}),
        &["--writable-dir", "src"],
        "'docs/x' is read-only (only --writable-dir src may change)",
    );
    pipe_refused(
        &ws,
        "shelpa_pipe",
        json!({"command": "ls | tee src/new.txt"}),
        &["--read-only"],
        "'src/new.txt' is read-only (--read-only)",
    );
    let ok = pipe(
        &ws,
        "shelpa_pipe",
        json!({"command": "ls | tee src/new.txt"}),
        &["--writable-dir", "src"],
    );
    assert!(ok.ok, "{}", ok.text);
    assert!(ws.root.join("src/new.txt").exists());
}

/// The tools a server lists, by name.
fn listed(flags: &[&str], env: &[(&str, &str)]) -> (Vec<String>, Value) {
    let ws = Ws::new();
    let mut cmd = test_support::bin::command();
    cmd.arg("--root").arg(&ws.root).args(flags);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut s = Session::from_command(cmd);
    let init = s.initialize("2025-06-18");
    let list = s.request(2, "tools/list", json!({}));
    let names = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect();
    let unknown = s.request(
        3,
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": "x", "content": "x"}}),
    );
    // Reading, listing and asking the history write nothing either (no store, no call log).
    ws.write("seen.txt", "seen\n");
    let mut id = 3;
    for (tool, args) in [
        ("read_text_file", json!({"path": "seen.txt"})),
        ("list_directory", json!({"path": "."})),
        ("list_trash", json!({})),
        ("search_file", json!({"path": "seen.txt"})),
    ] {
        id += 1;
        let (failed, text) = s.call_text(id, tool, args);
        assert!(!failed, "{tool}: {text}");
    }
    s.close_and_wait();
    assert!(
        !ws.root.join(".filesystem").exists(),
        "a read-only server made a history store"
    );
    assert!(!ws.root.join("x").exists());
    (names, json!({"init": init, "unknown": unknown}))
}

#[test]
fn read_only_serves_no_tool_that_changes_anything_and_writes_nothing() {
    let writers = [
        "create_file",
        "write_file",
        "edit_file",
        "create_directory",
        "move_file",
        "delete_file",
        "restore_file",
        "undo_file",
        "redo_file",
    ];
    for (flags, env) in [
        (vec!["--read-only", "--backup"], vec![]),
        (vec!["--backup"], vec![("FILESYSTEM_READ_ONLY", "1")]),
        (
            vec!["--read-only", "--backup", "--tools", "extended"],
            vec![],
        ),
    ] {
        let (names, seen) = listed(&flags, &env);
        for w in writers {
            assert!(
                !names.contains(&w.to_string()),
                "{w} served under {flags:?}"
            );
        }
        for r in [
            "read_text_file",
            "list_directory",
            "search_file",
            "list_trash",
        ] {
            assert!(
                names.contains(&r.to_string()),
                "{r} missing under {flags:?}"
            );
        }
        let error = &seen["unknown"]["error"];
        assert_eq!(error["code"], -32602, "{seen}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Unknown tool: write_file")),
            "{seen}"
        );
        let instructions = seen["init"]["result"]["instructions"]
            .as_str()
            .unwrap_or_default();
        assert!(
            instructions.contains("This server is read-only"),
            "{instructions}"
        );
    }
    // Not read-only: the same server serves them.
    let ws = Ws::new();
    let mut s = Session::start_in(&ws.root, &["--backup"]);
    s.initialize("2025-06-18");
    let list = s.request(2, "tools/list", json!({}));
    assert!(list.to_string().contains("\"write_file\""));
    s.close_and_wait();
}

#[test]
fn tools_and_help_show_the_rules_in_force() {
    let ws = fixture();
    let (ok, text) = cli::run(
        &ws.root,
        &[
            "tools",
            "--read-only-dir",
            "migrations",
            "--writable-dir",
            "src",
        ],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains(
            "Write rules in force: --writable-dir: only src may change; --read-only-dir: migrations may not change."
        ),
        "{text}"
    );
    let (_, plain) = cli::run(&ws.root, &["tools"]);
    assert!(plain.contains("Write rules in force: none"), "{plain}");
    let (_, help) = cli::run(&ws.root, &["--help", "--read-only"]);
    assert!(
        help.contains("Write rules in force: --read-only: nothing may change."),
        "{help}"
    );
    let (_, pipe_help) = cli::run(&ws.root, &["--legacy-pipe", "--help", "--read-only"]);
    let recorded = pipe_help
        .find("write rules of this server: --read-only")
        .expect("the pipe help names the rule");
    assert!(
        pipe_help[recorded..].contains("GUARD_VIOLATION / READ_ONLY"),
        "{pipe_help}"
    );
    // After the recorded text and its separator, never inside it.
    let separator = pipe_help.find("tools served (").expect("status part");
    assert!(recorded > separator, "{pipe_help}");
}

#[test]
fn in_server_mode_the_rules_hold_for_every_root() {
    let (_tmp, base) = test_support::temp::canonical_temp_dir();
    for name in ["one", "two"] {
        test_support::temp::write_under(&base, &format!("{name}/migrations/1.sql"), "one\n");
        test_support::temp::write_under(&base, &format!("{name}/src/a.txt"), "a\n");
    }
    let start = |flags: &[&str]| {
        let mut cmd = test_support::bin::command();
        cmd.arg("--server")
            .arg("--allow-root")
            .arg(&base)
            .args(flags)
            .env_remove("FILESYSTEM_ROOT");
        let mut s = Session::from_command(cmd);
        s.initialize("2025-06-18");
        s
    };
    let mut s = start(&["--read-only-dir", "migrations"]);
    let mut id = 10;
    for name in ["one", "two"] {
        let root = base.join(name);
        let root = root.to_str().expect("utf8");
        id += 1;
        let (failed, text) = s.call_text(
            id,
            "write_file",
            json!({"root": root, "path": "migrations/1.sql", "content": "x"}),
        );
        assert!(
            failed
                && text.starts_with(
                    "ReadOnly: 'migrations/1.sql' is read-only (--read-only-dir migrations)"
                ),
            "{name}: {text}"
        );
        id += 1;
        let (failed, text) = s.call_text(
            id,
            "write_file",
            json!({"root": root, "path": "src/b.txt", "content": "b\n"}),
        );
        assert!(!failed, "{name}: {text}");
    }
    s.close_and_wait();
    for name in ["one", "two"] {
        let text = std::fs::read_to_string(base.join(name).join("migrations/1.sql")).expect("read");
        assert_eq!(text, "one\n");
    }

    let mut s = start(&["--read-only"]);
    let list = s.request(2, "tools/list", json!({}));
    let names = list["result"]["tools"].to_string();
    assert!(names.contains("\"read_text_file\""), "{names}");
    assert!(
        !names.contains("\"write_file\"") && !names.contains("\"move_file\""),
        "{names}"
    );
    s.close_and_wait();
}
