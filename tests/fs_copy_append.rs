#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The opt-in `copy_file` and `append_file`: what they create, what they refuse (an existing
//! destination, a link that would lead outside, a tree too deep or a copy into itself, a
//! read-only part), their version histories under `--backup`, and an append killed (SIGKILL)
//! at each of its writes and at seeded moments of a stream: the file is always the old or the
//! new content, never a torn one, and `check` finds nothing wrong.

use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::cli::{in_root, printed, Outcome};
use test_support::mcp::{initialize, initialized, outcome, tools_call, Session};
use test_support::temp::{exists, Ws};

const EXTENDED: [&str; 2] = ["--tools", "extended"];

fn call(ws: &Ws, tool: &str, args: Value) -> Outcome {
    ws.call_with(tool, args, &EXTENDED)
}

fn call_backup(ws: &Ws, tool: &str, args: Value) -> Outcome {
    ws.call_with(tool, args, &["--tools", "extended", "--backup"])
}

#[test]
fn copy_and_append_are_served_only_when_asked_for() {
    let ws = Ws::new();
    ws.write("a.txt", "a\n");
    let out = ws.call(
        "copy_file",
        json!({"source": "a.txt", "destination": "b.txt"}),
    );
    assert!(
        !out.ok && out.text.contains("unknown tool 'copy_file'"),
        "{}",
        out.text
    );
    let by_name = ws.call_with(
        "append_file",
        json!({"path": "a.txt", "content": "b"}),
        &["--tools", "append_file"],
    );
    by_name.expect_ok();
    assert_eq!(ws.read("a.txt"), "a\nb");
}

#[test]
fn a_file_copy_keeps_content_and_mode_and_never_overwrites() {
    let ws = Ws::new();
    ws.write("s/run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(ws.path("s/run.sh"), std::fs::Permissions::from_mode(0o750))
        .expect("chmod");
    ws.write("taken.txt", "mine\n");
    let text = call(
        &ws,
        "copy_file",
        json!({"source": "s/run.sh", "destination": "new/dir/run.sh"}),
    )
    .expect_ok();
    assert!(
        text.starts_with("Copied file s/run.sh to new/dir/run.sh"),
        "{text}"
    );
    assert_eq!(ws.read("new/dir/run.sh"), "#!/bin/sh\necho hi\n");
    let mode = std::fs::metadata(ws.path("new/dir/run.sh"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o750);
    call(
        &ws,
        "copy_file",
        json!({"source": "s/run.sh", "destination": "taken.txt"}),
    )
    .expect_err("AlreadyExists");
    assert_eq!(ws.read("taken.txt"), "mine\n");
    call(
        &ws,
        "copy_file",
        json!({"source": "nope", "destination": "x"}),
    )
    .expect_err("NotFound");
    call(
        &ws,
        "copy_file",
        json!({"source": "s", "destination": "s/inner"}),
    )
    .expect_err("InvalidArgument");
    assert!(!exists(&ws.path("s/inner")));
    call(
        &ws,
        "copy_file",
        json!({"source": "s/run.sh", "destination": "../outside.sh"}),
    )
    .expect_err("PathEscape");
}

#[test]
fn a_tree_copy_copies_links_as_links_and_refuses_one_that_would_lead_outside() {
    let ws = Ws::new();
    ws.write("t/a.txt", "a\n");
    ws.write("t/sub/b.txt", "b\n");
    std::os::unix::fs::symlink("a.txt", ws.path("t/la")).expect("link");
    std::os::unix::fs::symlink("../a.txt", ws.path("t/sub/up")).expect("link");
    std::os::unix::fs::symlink("missing", ws.path("t/dangling")).expect("link");
    let text = call(&ws, "copy_file", json!({"source": "t", "destination": "c"})).expect_ok();
    assert!(
        text.starts_with("Copied directory t to c: 2 files, 2 directories, 3 links, 4 bytes"),
        "{text}"
    );
    assert_eq!(ws.read("c/sub/b.txt"), "b\n");
    assert_eq!(
        std::fs::read_link(ws.path("c/la")).expect("link"),
        Path::new("a.txt")
    );
    assert_eq!(
        std::fs::read_link(ws.path("c/sub/up")).expect("link"),
        Path::new("../a.txt")
    );
    assert!(std::fs::symlink_metadata(ws.path("c/dangling"))
        .expect("copied")
        .file_type()
        .is_symlink());
    // A link copied alone is copied as a link, judged where it lands: `../a.txt` one level
    // down leads to the root's a.txt (inside), at the top it would leave the root.
    call(
        &ws,
        "copy_file",
        json!({"source": "t/sub/up", "destination": "d/up"}),
    )
    .expect_ok();
    call(
        &ws,
        "copy_file",
        json!({"source": "t/sub/up", "destination": "up"}),
    )
    .expect_err("PathEscape");
    assert!(!exists(&ws.path("up")));
    // One link leading outside refuses the whole copy, before anything is created.
    std::os::unix::fs::symlink(&ws.outside, ws.path("t/sub/out")).expect("link");
    let err =
        call(&ws, "copy_file", json!({"source": "t", "destination": "e"})).expect_err("PathEscape");
    assert!(err.contains("'t/sub/out'"), "{err}");
    assert!(!exists(&ws.path("e")), "a refused copy created something");
    assert!(
        !err.contains(ws.outside.to_str().expect("utf8")),
        "the message names the outside: {err}"
    );
}

/// Makes `levels` nested directories named `a` below `top`, by descriptor (a path that deep
/// cannot be named in one call), with a file at the bottom.
fn deep_tree(top: &Path, levels: usize) {
    use rustix::fs::{mkdirat, openat, Mode, OFlags};
    std::fs::create_dir_all(top).expect("mkdir");
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir: OwnedFd = rustix::fs::open(top, flags, Mode::empty()).expect("open");
    for _ in 0..levels {
        mkdirat(&dir, "a", Mode::from_raw_mode(0o755)).expect("mkdirat");
        dir = openat(&dir, "a", flags, Mode::empty()).expect("openat");
    }
    let f = openat(
        &dir,
        "bottom.txt",
        OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .expect("create");
    rustix::io::write(&f, b"bottom\n").expect("write");
}

#[test]
fn a_ten_thousand_level_directory_is_refused_whole_and_a_modest_one_is_copied() {
    let ws = Ws::new();
    deep_tree(&ws.path("deep"), 10_000);
    let err = call(
        &ws,
        "copy_file",
        json!({"source": "deep", "destination": "copy"}),
    )
    .expect_err("InvalidArgument");
    assert!(err.contains("too deep"), "{err}");
    assert!(
        !exists(&ws.path("copy")),
        "a refused copy created something"
    );
    deep_tree(&ws.path("modest"), 100);
    call(
        &ws,
        "copy_file",
        json!({"source": "modest", "destination": "copy"}),
    )
    .expect_ok();
    let bottom = std::iter::repeat_n("a", 100).collect::<Vec<_>>().join("/");
    assert_eq!(ws.read(&format!("copy/{bottom}/bottom.txt")), "bottom\n");
}

#[test]
fn with_backup_every_copied_file_starts_its_own_history_and_an_append_is_a_version() {
    let ws = Ws::new();
    ws.write("t/a.txt", "a1\n");
    call_backup(&ws, "copy_file", json!({"source": "t", "destination": "c"})).expect_ok();
    call_backup(
        &ws,
        "write_file",
        json!({"path": "c/a.txt", "content": "a2\n"}),
    )
    .expect_ok();
    call_backup(&ws, "undo_file", json!({"path": "c/a.txt"})).expect_ok();
    assert_eq!(
        ws.read("c/a.txt"),
        "a1\n",
        "the copy's first version is its own"
    );
    // The source's file was never written through the store: it has no history.
    call_backup(&ws, "undo_file", json!({"path": "t/a.txt"})).expect_err("NotFound");

    let first = call_backup(
        &ws,
        "append_file",
        json!({"path": "log.txt", "content": "one\n"}),
    )
    .expect_ok();
    assert!(
        first.starts_with("Created log.txt: 4 bytes, version 1"),
        "{first}"
    );
    let second = call_backup(
        &ws,
        "append_file",
        json!({"path": "log.txt", "content": "two"}),
    )
    .expect_ok();
    assert!(
        second.starts_with("Appended to log.txt: 7 bytes, version 2"),
        "{second}"
    );
    assert_eq!(
        ws.read("log.txt"),
        "one\ntwo",
        "bytes as given, no newline added"
    );
    call_backup(&ws, "undo_file", json!({"path": "log.txt"})).expect_ok();
    assert_eq!(ws.read("log.txt"), "one\n");
}

#[test]
fn an_append_never_writes_through_a_link_and_keeps_the_mode() {
    let ws = Ws::new();
    std::fs::write(ws.outside.join("target.txt"), "outside\n").expect("write");
    std::os::unix::fs::symlink(ws.outside.join("target.txt"), ws.path("sym")).expect("link");
    call(&ws, "append_file", json!({"path": "sym", "content": "x"})).expect_err("InvalidArgument");
    std::fs::hard_link(ws.outside.join("target.txt"), ws.path("hard")).expect("link");
    call(&ws, "append_file", json!({"path": "hard", "content": "x"})).expect_ok();
    assert_eq!(ws.read("hard"), "outside\nx");
    assert_eq!(
        std::fs::read_to_string(ws.outside.join("target.txt")).expect("read"),
        "outside\n",
        "the append went through a hard link"
    );
    ws.write("script.sh", "echo 1\n");
    std::fs::set_permissions(ws.path("script.sh"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    call(
        &ws,
        "append_file",
        json!({"path": "script.sh", "content": "echo 2\n"}),
    )
    .expect_ok();
    let mode = std::fs::metadata(ws.path("script.sh"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o700);
}

#[test]
fn copy_and_append_obey_the_write_rules() {
    let ws = Ws::new();
    ws.write("migrations/1.sql", "one\n");
    ws.write("src/a.txt", "a\n");
    let flags = ["--tools", "extended", "--read-only-dir", "migrations"];
    let refused = |tool: &str, args: Value| {
        let err = ws.call_with(tool, args, &flags).expect_err("ReadOnly");
        assert!(err.contains("(--read-only-dir migrations)"), "{err}");
    };
    refused(
        "append_file",
        json!({"path": "migrations/1.sql", "content": "x"}),
    );
    refused(
        "append_file",
        json!({"path": "src/../migrations/2.sql", "content": "x"}),
    );
    refused(
        "copy_file",
        json!({"source": "src/a.txt", "destination": "migrations/a.txt"}),
    );
    refused(
        "copy_file",
        json!({"source": "src", "destination": "migrations/src"}),
    );
    assert_eq!(ws.read("migrations/1.sql"), "one\n");
    assert!(!exists(&ws.path("migrations/2.sql")) && !exists(&ws.path("migrations/src")));
    // Reading out of a read-only part is no change: copying from it works.
    ws.call_with(
        "copy_file",
        json!({"source": "migrations", "destination": "src/m"}),
        &flags,
    )
    .expect_ok();
    assert_eq!(ws.read("src/m/1.sql"), "one\n");
    // Only the writable part may receive a copy or an append.
    let writable = ["--tools", "extended", "--writable-dir", "src"];
    for (tool, args) in [
        ("append_file", json!({"path": "top.txt", "content": "x"})),
        (
            "copy_file",
            json!({"source": "src/a.txt", "destination": "a.txt"}),
        ),
        (
            "copy_file",
            json!({"source": "src", "destination": "src/../copy"}),
        ),
    ] {
        let err = ws.call_with(tool, args, &writable).expect_err("ReadOnly");
        assert!(
            err.contains("(only --writable-dir src may change)"),
            "{err}"
        );
    }
    assert!(!exists(&ws.path("top.txt")) && !exists(&ws.path("copy")));
    ws.call_with(
        "copy_file",
        json!({"source": "migrations/1.sql", "destination": "src/1.sql"}),
        &writable,
    )
    .expect_ok();
    // Under --read-only neither is served, even when named.
    let out = ws.call_with(
        "append_file",
        json!({"path": "src/a.txt", "content": "x"}),
        &["--tools", "append_file,read_text_file", "--read-only"],
    );
    assert!(
        !out.ok && out.text.contains("unknown tool 'append_file'"),
        "{}",
        out.text
    );
}

const STOP_AFTER: &str = "FILESYSTEM_TEST_STOP_AFTER";

fn append_killed(root: &Path, content: &str, stop: &str) -> Output {
    in_root(
        root,
        &[
            "call",
            "append_file",
            &json!({"path": "log.txt", "content": content}).to_string(),
            "--backup",
            "--tools",
            "extended",
        ],
    )
    .env(STOP_AFTER, stop)
    .output()
    .expect("run")
}

fn check(root: &Path) {
    let out = in_root(root, &["check"]).output().expect("check");
    assert!(
        out.status.success(),
        "check after the kill: {}",
        printed(&out)
    );
}

#[test]
fn an_append_killed_after_any_of_its_writes_leaves_the_old_or_the_new_content() {
    for (stop, expect_new) in [("write:1", false), ("write:2", true)] {
        let ws = Ws::new();
        ws.call_with(
            "append_file",
            json!({"path": "log.txt", "content": "old\n"}),
            &["--backup", "--tools", "extended"],
        )
        .expect_ok();
        let out = append_killed(&ws.root, "new\n", stop);
        assert!(
            out.status.code().is_none(),
            "{stop}: not killed: {}",
            printed(&out)
        );
        let after = ws.read("log.txt");
        let want = if expect_new { "old\nnew\n" } else { "old\n" };
        assert_eq!(after, want, "{stop}");
        check(&ws.root);
        // The next call works, and the history holds what was acknowledged.
        ws.call_with(
            "append_file",
            json!({"path": "log.txt", "content": "more\n"}),
            &["--backup", "--tools", "extended"],
        )
        .expect_ok();
        assert!(ws.read("log.txt").ends_with("more\n"));
        ws.call_with("undo_file", json!({"path": "log.txt"}), &["--backup"])
            .expect_ok();
        assert_eq!(
            ws.read("log.txt"),
            want,
            "{stop}: undo goes back to what was there"
        );
    }
}

/// Chunk `i` of the stream: fixed-size, self-describing, so a torn append cannot pass.
fn chunk(i: u64) -> String {
    let body = format!("chunk {i:06} ").repeat(300);
    format!("{body}end {i:06}\n")
}

/// How many whole chunks `bytes` is, in order from 0; `None` when it is anything else.
fn whole_chunks(bytes: &str) -> Option<u64> {
    let mut rest = bytes;
    let mut n = 0;
    while !rest.is_empty() {
        let want = chunk(n);
        rest = rest.strip_prefix(want.as_str())?;
        n += 1;
    }
    Some(n)
}

#[test]
fn a_stream_of_appends_killed_at_seeded_moments_is_always_whole_chunks() {
    let ws = Ws::new();
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut sent = 0u64;
    let mut acknowledged = 0u64;
    for _round in 0..12 {
        let mut cmd = command();
        cmd.args(["--backup", "--tools", "extended", "--root"])
            .arg(&ws.root)
            .env_remove("FILESYSTEM_ROOT");
        let mut s = Session::from_command(cmd);
        s.send(initialize(0, "2025-06-18", "append-crash"));
        s.try_recv().expect("initialize answered");
        s.send(initialized());
        // The file on disk is where this round starts: what the last kill left.
        let on_disk = std::fs::read_to_string(ws.path("log.txt")).unwrap_or_default();
        let mut next = whole_chunks(&on_disk).expect("whole chunks at the start of a round");
        // A few acknowledged appends, then one more sent and killed at a seeded moment.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let settled = rng % 4;
        let mut id = 1;
        for _ in 0..settled {
            s.send(tools_call(
                id,
                "append_file",
                json!({"path": "log.txt", "content": chunk(next)}),
            ));
            let (failed, text) = outcome(&s.try_recv().expect("answered")["result"]);
            assert!(!failed, "{text}");
            next += 1;
            id += 1;
        }
        s.send(tools_call(
            id,
            "append_file",
            json!({"path": "log.txt", "content": chunk(next)}),
        ));
        sent = sent.max(next + 1);
        acknowledged = acknowledged.max(next);
        std::thread::sleep(Duration::from_micros(rng % 4000));
        s.child.kill().expect("SIGKILL");
        s.child.wait().expect("reap");
        let after = std::fs::read_to_string(ws.path("log.txt")).unwrap_or_default();
        let n = whole_chunks(&after)
            .unwrap_or_else(|| panic!("torn or mixed content after a kill: {} bytes", after.len()));
        assert!(
            n >= acknowledged && n <= sent,
            "{n} chunks on disk; acknowledged {acknowledged}, sent {sent}"
        );
        check(&ws.root);
    }
}
