#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Confinement without a race: hard links from the server's own files to files outside, `.git/`,
//! state directories below the top, host paths in replies, and names in the temporary-file
//! namespace. Each test works through the real binary (`filesystem call`, an MCP session, or a
//! subcommand) and checks what is on disk, not the wording of messages.

use std::path::Path;

use serde_json::{json, Value};

use test_support::arena::{Arena, Snapshot};
use test_support::cli;
use test_support::mcp::Client;

/// `filesystem [FLAGS] call TOOL ARGS --root ROOT`: (success, stdout + stderr).
fn call(root: &Path, flags: &[&str], tool: &str, args: Value) -> (bool, String) {
    let mut argv: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    argv.extend(["call".into(), tool.into(), args.to_string()]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    cli::run(root, &argv)
}

/// An outside file (in the arena, so on the same file system as the workspace) and a hard link
/// to it at `rel` inside the workspace. Returns the outside file's path.
fn hard_link_outside(arena: &Arena, rel: &str, content: &[u8]) -> std::path::PathBuf {
    let victim = arena.base.join(format!("victim-{}", rel.replace('/', "_")));
    std::fs::write(&victim, content).expect("write victim");
    let link = arena.path(rel);
    std::fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
    let _ = std::fs::remove_file(&link);
    std::fs::hard_link(&victim, &link).expect("hard link");
    victim
}

fn assert_unchanged(path: &Path, expected: &[u8], what: &str) {
    let now = std::fs::read(path).expect("read outside file");
    assert!(
        now == expected,
        "{what}: the outside file was written through a hard link: {:?} -> {:?}",
        String::from_utf8_lossy(expected),
        String::from_utf8_lossy(&now)
    );
}

// ---------------------------------------------------------------------------------------------
// Hard links: a store, log or mirror file that is a hard link to an outside file is never
// written through.

#[test]
fn move_file_never_appends_to_a_hard_linked_moves_log() {
    let arena = Arena::new();
    arena.write("a.txt", "a\n");
    let outside = b"outside moves log, not ours\n";
    let victim = hard_link_outside(&arena, ".filesystem/.moves", outside);
    call(
        &arena.root,
        &["--no-call-log"],
        "move_file",
        json!({"source": "a.txt", "destination": "b.txt"}),
    );
    assert_unchanged(&victim, outside, ".filesystem/.moves");
}

#[test]
fn delete_file_never_appends_to_a_hard_linked_deletes_log() {
    let arena = Arena::new();
    arena.write("a.txt", "a\n");
    let outside = b"outside deletes log, not ours\n";
    let victim = hard_link_outside(&arena, ".filesystem/.deletes", outside);
    call(
        &arena.root,
        &["--no-call-log"],
        "delete_file",
        json!({"path": "a.txt"}),
    );
    assert_unchanged(&victim, outside, ".filesystem/.deletes");
}

#[test]
fn the_call_log_is_never_appended_through_a_hard_link() {
    let arena = Arena::new();
    arena.write("a.txt", "a\n");
    let outside = b"outside call log, not ours\n";
    let victim = hard_link_outside(&arena, ".filesystem/.calls.jsonl", outside);
    let (ok, text) = call(&arena.root, &[], "read_text_file", json!({"path": "a.txt"}));
    assert!(ok, "{text}");
    // Over MCP as well, where the log stays open for the session.
    let mut c = Client::start(&arena.root, &[]);
    assert!(c.call("read_text_file", json!({"path": "a.txt"})).ok);
    c.close();
    assert_unchanged(&victim, outside, ".filesystem/.calls.jsonl");
}

/// A `.shelpa/` mirror of `notes.txt` with one overwrite record.
fn mirror_of(content: &str) -> String {
    format!(
        "--- shelpa:overwrite ts=2026-02-20T09:00:00Z record_id=1771578000000000000 ---\n{content}"
    )
}

#[test]
fn audit_import_never_appends_to_a_hard_linked_imports_log() {
    let arena = Arena::new();
    arena.write("notes.txt", "two\n");
    arena.write(".shelpa/notes.txt", mirror_of("one\n"));
    let outside = b"outside imports log, not ours\n";
    let victim = hard_link_outside(&arena, ".filesystem/.imports", outside);
    cli::run(&arena.root, &["audit", "import"]);
    assert_unchanged(&victim, outside, ".filesystem/.imports");
}

#[test]
fn audit_restore_never_appends_to_a_hard_linked_mirror() {
    let arena = Arena::new();
    arena.write("notes.txt", "two\n");
    let mirror = mirror_of("one\n");
    let victim = hard_link_outside(&arena, ".shelpa/notes.txt", mirror.as_bytes());
    cli::run(
        &arena.root,
        &["audit", "restore", "notes.txt", "#1", "--force"],
    );
    assert_unchanged(&victim, mirror.as_bytes(), ".shelpa/notes.txt");
}

#[test]
fn tee_never_appends_to_a_hard_linked_mirror() {
    let arena = Arena::new();
    arena.write("notes.txt", "one\n");
    arena.write("a.txt", "line\n");
    let mirror = mirror_of("one\n");
    let victim = hard_link_outside(&arena, ".shelpa/notes.txt", mirror.as_bytes());
    let mut c = Client::start(&arena.root, &["--legacy-pipe", "--no-call-log"]);
    c.call(
        "shelpa_write",
        json!({"path": "notes.txt", "content": "two\n"}),
    );
    c.call(
        "shelpa_write",
        json!({"path": "notes.txt", "content": "three\n", "append": true}),
    );
    c.call(
        "shelpa_pipe",
        json!({"command": "head -n 1 a.txt | tee notes.txt"}),
    );
    c.close();
    assert_unchanged(&victim, mirror.as_bytes(), ".shelpa/notes.txt");
}

#[test]
fn writes_to_a_hard_linked_workspace_file_never_change_the_outside_link() {
    let arena = Arena::new();
    let outside = b"EDIT-ME outside, shares an inode with h.txt\n";
    let victim = hard_link_outside(&arena, "h.txt", outside);
    call(
        &arena.root,
        &["--no-call-log"],
        "write_file",
        json!({"path": "h.txt", "content": "new\n"}),
    );
    let victim2 = hard_link_outside(&arena, "h2.txt", outside);
    call(
        &arena.root,
        &["--no-call-log", "--backup"],
        "edit_file",
        json!({"path": "h2.txt", "edits": [{"oldText": "EDIT-ME", "newText": "edited"}]}),
    );
    let victim3 = hard_link_outside(&arena, "h3.txt", outside);
    let mut c = Client::start(&arena.root, &["--legacy-pipe", "--no-call-log"]);
    c.call(
        "shelpa_write",
        json!({"path": "h3.txt", "content": "tee\n"}),
    );
    c.call(
        "shelpa_write",
        json!({"path": "h3.txt", "content": "tee -a\n", "append": true}),
    );
    c.close();
    assert_unchanged(&victim, outside, "write_file h.txt");
    assert_unchanged(&victim2, outside, "edit_file h2.txt");
    assert_unchanged(&victim3, outside, "shelpa_write h3.txt");
}

#[test]
fn check_repair_never_cuts_a_hard_linked_log_with_a_torn_last_line() {
    let arena = Arena::new();
    arena.write("a.txt", "a\n");
    // Real, complete log lines from a real MCP session (which keeps the call log), then a torn
    // one.
    let mut c = Client::start(&arena.root, &[]);
    let r = c.call(
        "move_file",
        json!({"source": "a.txt", "destination": "b.txt"}),
    );
    assert!(r.ok, "{}", r.raw);
    c.close();
    let mut victims = Vec::new();
    for log in [".filesystem/.moves", ".filesystem/.calls.jsonl"] {
        let mut content = std::fs::read(arena.path(log)).expect("the call wrote the log");
        assert!(!content.is_empty(), "{log} is empty");
        content.extend_from_slice(b"{\"ts\":\"2026-");
        let victim = hard_link_outside(&arena, log, &content);
        victims.push((victim, content, log));
    }
    cli::run(&arena.root, &["check", "--repair"]);
    for (victim, content, log) in victims {
        assert_unchanged(&victim, &content, log);
    }
}

// ---------------------------------------------------------------------------------------------
// `.git/` is readable, never written by a tool.

fn git_workspace() -> Arena {
    let arena = Arena::new();
    arena.write(".git/config", "[core]\n\tbare = false\n");
    arena.write(".git/HEAD", "ref: refs/heads/main\n");
    arena.write(".git/hooks/README", "hooks\n");
    arena.write("a.txt", "a\n");
    arena
}

#[test]
fn git_directory_is_readable() {
    let arena = git_workspace();
    let (ok, text) = call(
        &arena.root,
        &["--no-call-log"],
        "read_text_file",
        json!({"path": ".git/config"}),
    );
    assert!(ok, "{text}");
    assert!(text.contains("bare = false"), "{text}");
}

#[test]
fn no_tool_writes_into_the_git_directory() {
    let arena = git_workspace();
    let before = Snapshot::of(&arena.path(".git"));
    let attempts: [(&str, Value); 7] = [
        (
            "write_file",
            json!({"path": ".git/hooks/post-checkout", "content": "#!/bin/sh\necho pwned\n"}),
        ),
        ("create_file", json!({"path": ".git/x", "content": "x\n"})),
        (
            "move_file",
            json!({"source": "a.txt", "destination": ".git/a"}),
        ),
        (
            "move_file",
            json!({"source": ".git/config", "destination": "c"}),
        ),
        ("delete_file", json!({"path": ".git/config"})),
        (
            "edit_file",
            json!({"path": ".git/config", "edits": [{"oldText": "false", "newText": "true"}]}),
        ),
        ("create_directory", json!({"path": ".git/hooks/x"})),
    ];
    let mut c = Client::start(&arena.root, &["--backup", "--no-call-log"]);
    let mut accepted = Vec::new();
    for (tool, args) in attempts {
        let r = c.call(tool, args.clone());
        if r.ok {
            accepted.push(format!("{tool} {args}: {}", r.text));
        }
    }
    let mut pipe = Client::start(&arena.root, &["--legacy-pipe", "--no-call-log"]);
    for (tool, args) in [
        (
            "shelpa_write",
            json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
        ),
        (
            "shelpa_pipe",
            json!({"command": "head -n 1 a.txt | tee .git/hooks/pre-push"}),
        ),
        (
            "shelpa_pipe",
            json!({"command": "head -n 1 a.txt | tee -a .git/config"}),
        ),
    ] {
        let r = pipe.call(tool, args.clone());
        if r.ok {
            accepted.push(format!("{tool} {args}: {}", r.text));
        }
    }
    c.close();
    pipe.close();
    assert!(
        accepted.is_empty(),
        "writes into .git/ were accepted:\n  {}",
        accepted.join("\n  ")
    );
    before.assert_same(&Snapshot::of(&arena.path(".git")), ".git/");
    assert!(arena.path("a.txt").exists() && !arena.path("c").exists());
}

#[test]
fn audit_restore_never_writes_a_hostile_mirror_into_git() {
    let arena = git_workspace();
    arena.write(
        ".shelpa/.git/hooks/pre-commit",
        mirror_of("#!/bin/sh\necho pwned\n"),
    );
    arena.write(".shelpa/a.txt", mirror_of("#!/bin/sh\necho pwned\n"));
    let before = Snapshot::of(&arena.path(".git"));
    let (ok, text) = cli::run(
        &arena.root,
        &["audit", "restore", ".git/hooks/pre-commit", "#1", "--force"],
    );
    assert!(!ok, "restored into .git/: {text}");
    let (ok, text) = cli::run(
        &arena.root,
        &[
            "audit",
            "restore",
            "a.txt",
            "#1",
            "--to",
            ".git/hooks/post-merge",
            "--force",
        ],
    );
    assert!(!ok, "restored into .git/: {text}");
    before.assert_same(&Snapshot::of(&arena.path(".git")), ".git/");
}

// ---------------------------------------------------------------------------------------------
// `.filesystem/` and `.shelpa/` are untouchable at any depth.

const STATE_SECRET: &str = "STATE-DIR-CONTENT-never-returned";

fn nested_state_workspace() -> Arena {
    let arena = Arena::new();
    arena.write("sub/.filesystem/x", format!("{STATE_SECRET}\n"));
    arena.write("sub/.shelpa/x", format!("{STATE_SECRET}\n"));
    arena.write("sub/plain.txt", "plain\n");
    arena.write("a.txt", "a\n");
    arena
}

#[test]
fn tools_refuse_state_directories_below_the_top() {
    let arena = nested_state_workspace();
    let before = Snapshot::of(&arena.path("sub"));
    let mut c = Client::start(&arena.root, &["--no-call-log"]);
    let mut accepted = Vec::new();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "sub/.filesystem/x", "content": "w\n"}),
        ),
        (
            "write_file",
            json!({"path": "sub/.shelpa/new", "content": "w\n"}),
        ),
        ("read_text_file", json!({"path": "sub/.filesystem/x"})),
        ("read_text_file", json!({"path": "sub/.shelpa/x"})),
        (
            "move_file",
            json!({"source": "sub/.filesystem/x", "destination": "y"}),
        ),
        (
            "move_file",
            json!({"source": "a.txt", "destination": "sub/.shelpa/a.txt"}),
        ),
        (
            "move_file",
            json!({"source": "sub/.shelpa", "destination": "moved-state"}),
        ),
        ("delete_file", json!({"path": "sub/.filesystem/x"})),
        ("delete_file", json!({"path": "sub/.shelpa"})),
        ("list_directory", json!({"path": "sub/.shelpa"})),
        ("directory_tree", json!({"path": "sub/.filesystem"})),
        ("create_directory", json!({"path": "sub/.filesystem/z"})),
    ] {
        let r = c.call(tool, args.clone());
        assert!(!r.raw.contains(STATE_SECRET), "{tool} {args}: {}", r.raw);
        if r.ok {
            accepted.push(format!("{tool} {args}: {}", r.text));
        }
    }
    c.close();
    assert!(
        accepted.is_empty(),
        "calls into nested state directories were accepted:\n  {}",
        accepted.join("\n  ")
    );
    before.assert_same(&Snapshot::of(&arena.path("sub")), "sub/");
    assert!(arena.path("a.txt").exists() && !arena.path("y").exists());
}

#[test]
fn pipelines_refuse_state_directories_below_the_top() {
    let arena = nested_state_workspace();
    let before = Snapshot::of(&arena.path("sub"));
    let mut c = Client::start(&arena.root, &["--legacy-pipe", "--no-call-log"]);
    let mut accepted = Vec::new();
    for (tool, args) in [
        ("shelpa_pipe", json!({"command": "head -n 5 sub/.shelpa/x"})),
        ("shelpa_pipe", json!({"command": "ls sub/.filesystem"})),
        (
            "shelpa_pipe",
            json!({"command": "ls", "cwd": "sub/.shelpa"}),
        ),
        ("shelpa_pipe", json!({"command": "cd sub/.filesystem"})),
        (
            "shelpa_write",
            json!({"path": "sub/.filesystem/y", "content": "w\n"}),
        ),
        (
            "shelpa_pipe",
            json!({"command": "head -n 1 a.txt | tee sub/.shelpa/x"}),
        ),
    ] {
        let r = c.call(tool, args.clone());
        assert!(!r.raw.contains(STATE_SECRET), "{tool} {args}: {}", r.raw);
        if r.ok {
            accepted.push(format!("{tool} {args}: {}", r.text));
        }
    }
    // Recursive readers walk past them: the content never comes back.
    for command in ["rg -n STATE sub", "rg -n --hidden STATE sub", "rg -n STATE"] {
        let r = c.call("shelpa_pipe", json!({ "command": command }));
        assert!(!r.raw.contains(STATE_SECRET), "{command}: {}", r.raw);
    }
    c.close();
    assert!(
        accepted.is_empty(),
        "pipeline calls into nested state directories were accepted:\n  {}",
        accepted.join("\n  ")
    );
    before.assert_same(&Snapshot::of(&arena.path("sub")), "sub/");
}

/// Decision: a listing of a directory leaves nested state directories out, as it leaves the
/// top-level ones out, so neither their names nor anything in them is shown.
#[test]
fn listings_leave_nested_state_directories_out() {
    let arena = nested_state_workspace();
    let mut c = Client::start(&arena.root, &["--no-call-log"]);
    for (tool, args) in [
        ("list_directory", json!({"path": "sub"})),
        ("directory_tree", json!({"path": "sub"})),
        ("directory_tree", json!({"path": "."})),
    ] {
        let r = c.call(tool, args.clone());
        assert!(r.ok, "{tool} {args}: {}", r.raw);
        assert!(r.text.contains("plain.txt"), "{tool} {args}: {}", r.text);
        assert!(
            !r.text.contains(".filesystem") && !r.text.contains(".shelpa"),
            "{tool} {args} shows a state directory: {}",
            r.text
        );
    }
}

// ---------------------------------------------------------------------------------------------
// No host paths in replies.

#[test]
fn errors_never_show_the_host_path_of_the_root_or_of_anything_outside() {
    let arena = Arena::new();
    arena.write("a.txt", "a\n");
    std::os::unix::fs::symlink(&arena.canary, arena.path("out")).expect("symlink");
    let forbidden = [
        arena.root.display().to_string(),
        arena.base.display().to_string(),
        arena.canary.display().to_string(),
    ];
    let mut replies = Vec::new();
    let mut c = Client::start(&arena.root, &["--no-call-log"]);
    for (tool, args) in [
        ("write_file", json!({"path": "a.txt/x", "content": "q"})),
        ("create_file", json!({"path": "a.txt/x", "content": "q"})),
        ("read_text_file", json!({"path": "a.txt/x"})),
        ("list_directory", json!({"path": "a.txt"})),
        ("create_directory", json!({"path": "a.txt/d"})),
        (
            "move_file",
            json!({"source": "a.txt/x", "destination": "b"}),
        ),
        ("delete_file", json!({"path": "a.txt/x"})),
        ("read_text_file", json!({"path": "out/secret.txt"})),
        ("write_file", json!({"path": "out/new", "content": "q"})),
        ("list_directory", json!({"path": "out"})),
        ("read_text_file", json!({"path": "../outside.txt"})),
        ("read_text_file", json!({"path": "missing/deeper/x"})),
    ] {
        let r = c.call(tool, args.clone());
        assert!(!r.ok, "{tool} {args} should fail: {}", r.raw);
        replies.push((format!("{tool} {args}"), r.raw));
    }
    let mut pipe = Client::start(&arena.root, &["--legacy-pipe", "--no-call-log"]);
    for (tool, args) in [
        ("shelpa_write", json!({"path": "a.txt/x", "content": "q"})),
        ("shelpa_write", json!({"path": "out/new", "content": "q"})),
        ("shelpa_write", json!({"path": "../x", "content": "q"})),
        ("shelpa_pipe", json!({"command": "ls a.txt/x"})),
        ("shelpa_pipe", json!({"command": "head -n 1 a.txt/x"})),
        (
            "shelpa_pipe",
            json!({"command": "head -n 1 out/secret.txt"}),
        ),
        ("shelpa_pipe", json!({"command": "cd out"})),
        ("shelpa_pipe", json!({"command": "ls", "cwd": "a.txt"})),
    ] {
        let r = pipe.call(tool, args.clone());
        assert!(!r.ok, "{tool} {args} should fail: {}", r.raw);
        replies.push((format!("{tool} {args}"), r.raw));
    }
    for (args, reason) in [
        (
            vec!["audit", "restore", "a.txt", "#1", "--to", "a.txt/x"],
            "restore through a file",
        ),
        (
            vec!["audit", "show", "out/secret.txt"],
            "show through a link",
        ),
    ] {
        let (ok, text) = cli::run(&arena.root, &args);
        assert!(!ok, "{reason}: {text}");
        replies.push((reason.to_string(), text));
    }
    let leaks: Vec<String> = replies
        .iter()
        .filter(|(_, text)| forbidden.iter().any(|f| text.contains(f.as_str())))
        .map(|(what, text)| format!("{what}: {text}"))
        .collect();
    assert!(
        leaks.is_empty(),
        "replies show host paths:\n  {}",
        leaks.join("\n  ")
    );
}

#[test]
fn ls_long_never_shows_where_an_outside_link_points() {
    let arena = Arena::new();
    arena.write("a.txt", "a\n");
    std::os::unix::fs::symlink(&arena.canary, arena.path("out")).expect("symlink");
    std::os::unix::fs::symlink("../canary-outside", arena.path("rel-out")).expect("symlink");
    std::os::unix::fs::symlink("a.txt", arena.path("in")).expect("symlink");
    let mut c = Client::start(&arena.root, &["--legacy-pipe", "--no-call-log"]);
    for command in ["ls -l", "ls -la", "ls -l out", "ls -l rel-out", "fd -l ."] {
        let r = c.call("shelpa_pipe", json!({ "command": command }));
        assert!(
            !r.raw.contains("canary-outside") && !r.raw.contains(&arena.base.display().to_string()),
            "{command} shows an outside link's target: {}",
            r.raw
        );
    }
    let r = c.call("shelpa_pipe", json!({"command": "ls -l"}));
    assert!(r.ok && r.raw.contains("in"), "{}", r.raw);
}

// ---------------------------------------------------------------------------------------------
// The temporary-file namespace: `check --repair` only takes what it made.

/// A user file named exactly like a store temporary (`.filesystem-tmp-` + 6 alphanumerics) and
/// one named like a tee temporary of a process that is gone.
const TEMP_LOOKALIKES: [&str; 2] = [
    ".filesystem-tmp-abc123",
    ".notes.txt.shelpa-tmp-999999999-1-0",
];

#[test]
fn check_repair_leaves_user_files_named_like_temporaries_alone() {
    let arena = Arena::new();
    arena.write("notes.txt", "notes\n");
    for name in TEMP_LOOKALIKES {
        arena.write(name, format!("my own file {name}\n"));
        arena.write(&format!("deep/{name}"), format!("my own file {name}\n"));
    }
    // Make a store, as a real workspace would have.
    let (ok, text) = call(
        &arena.root,
        &["--backup"],
        "write_file",
        json!({"path": "notes.txt", "content": "notes 2\n"}),
    );
    assert!(ok, "{text}");
    let before = Snapshot::of(&arena.root);
    cli::run(&arena.root, &["check", "--repair"]);
    let after = Snapshot::of(&arena.root);
    for name in TEMP_LOOKALIKES {
        for rel in [name.to_string(), format!("deep/{name}")] {
            assert_eq!(
                after.entries.get(&rel).and_then(|e| e.content.clone()),
                before.entries.get(&rel).and_then(|e| e.content.clone()),
                "check --repair took the user's file {rel}"
            );
        }
    }
}

#[test]
fn a_file_a_tool_puts_at_a_temporary_name_is_refused_or_survives_check_repair() {
    let arena = Arena::new();
    arena.write("notes.txt", "notes\n");
    arena.write("moved.txt", "moved\n");
    let mut c = Client::start(&arena.root, &["--backup", "--no-call-log"]);
    let mut made = Vec::new();
    for (tool, args, name) in [
        (
            "write_file",
            json!({"path": ".filesystem-tmp-wri123", "content": "written\n"}),
            ".filesystem-tmp-wri123",
        ),
        (
            "create_file",
            json!({"path": ".filesystem-tmp-cre123", "content": "created\n"}),
            ".filesystem-tmp-cre123",
        ),
        (
            "move_file",
            json!({"source": "moved.txt", "destination": ".filesystem-tmp-mov123"}),
            ".filesystem-tmp-mov123",
        ),
    ] {
        let r = c.call(tool, args.clone());
        if r.ok {
            made.push(name);
        } else {
            assert!(
                r.text.starts_with("InvalidArgument"),
                "{tool} {args}: a refusal should say the name is not allowed: {}",
                r.text
            );
            assert!(!arena.path(name).exists(), "{tool} {args} failed but wrote");
        }
    }
    c.close();
    let mut pipe = Client::start(&arena.root, &["--legacy-pipe", "--no-call-log"]);
    let tee_name = ".notes.txt.shelpa-tmp-999999999-1-0";
    if pipe
        .call(
            "shelpa_write",
            json!({"path": tee_name, "content": "tee'd\n"}),
        )
        .ok
    {
        made.push(tee_name);
    }
    pipe.close();
    let before = Snapshot::of(&arena.root);
    cli::run(&arena.root, &["check", "--repair"]);
    let after = Snapshot::of(&arena.root);
    for name in made {
        assert_eq!(
            after.entries.get(name).and_then(|e| e.content.clone()),
            before.entries.get(name).and_then(|e| e.content.clone()),
            "a file a tool wrote at {name} was taken by check --repair"
        );
    }
}
