#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The bounds of the filesystem tools through the real binary: edit_file's whitespace-tolerant
//! match stays linear on hostile input, its diff has a time budget and falls back to one block
//! that `patch` still applies, edits per call are capped, and a cancelled or timed-out edit
//! writes nothing.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use test_support::mcp::{text, Session};
use test_support::temp::temp_dir;

/// The diff inside a reply's ```diff fence.
fn fenced_diff(reply: &str) -> &str {
    let start = reply.find("```diff\n").expect("a fenced diff") + "```diff\n".len();
    let end = reply.rfind("```\n").expect("a closing fence");
    &reply[start..end]
}

/// `original` with `diff` applied by the real `patch` (or `git apply` where there is no
/// `patch`); `None` when neither tool is installed.
fn patched(original: &str, diff: &str) -> Option<String> {
    let dir = temp_dir();
    let file = dir.path().join("f.txt");
    let patch_file = dir.path().join("change.diff");
    std::fs::write(&file, original).expect("write");
    // The headers name the edited path; point them at the copy.
    let mut body = String::new();
    for (i, line) in diff.split_inclusive('\n').enumerate() {
        match i {
            0 => body.push_str("--- f.txt\n"),
            1 => body.push_str("+++ f.txt\n"),
            _ => body.push_str(line),
        }
    }
    std::fs::write(&patch_file, body).expect("write");
    let run = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .ok()
    };
    let out = run(
        "patch",
        &["--batch", "--silent", "-p0", "f.txt", "-i", "change.diff"],
    )
    .or_else(|| run("git", &["apply", "-p0", "change.diff"]))?;
    assert!(
        out.status.success(),
        "the diff does not apply: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(std::fs::read_to_string(&file).expect("read"))
}

/// Asserts `diff` is one hunk that, after its leading context, removes `old_lines` lines and
/// then adds `new_lines` lines.
fn assert_one_block(diff: &str, old_lines: usize, new_lines: usize) {
    let hunks = diff.lines().filter(|l| l.starts_with("@@ ")).count();
    assert_eq!(hunks, 1, "{}", &diff[..diff.len().min(300)]);
    let body: Vec<&str> = diff
        .lines()
        .skip(3)
        .skip_while(|l| l.starts_with(' '))
        .collect();
    let removed = body.iter().take_while(|l| l.starts_with('-')).count();
    let added = body[removed..]
        .iter()
        .take_while(|l| l.starts_with('+'))
        .count();
    assert_eq!((removed, added), (old_lines, new_lines));
}

fn edit_call(s: &mut Session, id: i64, path: &str, edits: Value) -> Value {
    s.call(id, "edit_file", json!({"path": path, "edits": edits}))
}

fn numbered(prefix: &str, count: usize) -> String {
    (0..count).map(|i| format!("{prefix} {i}\n")).collect()
}

#[test]
fn a_whitespace_tolerant_edit_that_repeats_all_over_the_file_is_answered_at_once() {
    // The old line-by-line match compared 60,000 lines at each of 60,000 positions here
    // (an hour of CPU in a debug build); the linear one finishes far inside the limit.
    let dir = temp_dir();
    let body = "    xx\n".repeat(120_000);
    std::fs::write(dir.path().join("q.txt"), format!("{body}    yy\n")).expect("write");
    // About the diff engine, not the result budget: lifted, so one answer holds the whole diff.
    let mut s = Session::start_in(
        dir.path(),
        &[
            "--timeout",
            "20",
            "--no-call-log",
            "--max-result-bytes",
            "1000000000",
        ],
    );
    s.initialize("2025-06-18");
    let wanted = format!("{}yy", "xx\n".repeat(60_000));
    let started = Instant::now();
    let missing = edit_call(
        &mut s,
        2,
        "q.txt",
        json!([{"oldText": format!("{wanted}zz"), "newText": "-"}]),
    );
    assert_eq!(missing["isError"], true);
    assert!(
        text(&missing).starts_with("NotFound: "),
        "{}",
        text(&missing)
    );
    let r = edit_call(
        &mut s,
        3,
        "q.txt",
        json!([{"oldText": wanted, "newText": "zz"}]),
    );
    assert_eq!(r["isError"], false, "{}", text(&r));
    assert!(started.elapsed() < Duration::from_secs(20));
    let after = std::fs::read_to_string(dir.path().join("q.txt")).expect("read");
    assert_eq!(after, format!("{}    zz\n", "    xx\n".repeat(60_000)));
    // A block of 60,001 lines replaced by one is shown as one block.
    assert_one_block(fenced_diff(&text(&r)), 60_001, 1);
    s.close_and_wait();
}

#[test]
fn a_sixty_thousand_line_replacement_is_shown_as_one_block_that_patch_applies() {
    let dir = temp_dir();
    let old = numbered("old line", 60_000);
    let new = numbered("new text", 60_000);
    let file = format!("head\n{old}tail\n");
    std::fs::write(dir.path().join("r.txt"), &file).expect("write");
    // About the diff engine, not the result budget: lifted, so one answer holds the whole diff.
    let mut s = Session::start_in(
        dir.path(),
        &["--no-call-log", "--max-result-bytes", "1000000000"],
    );
    s.initialize("2025-06-18");
    let r = edit_call(
        &mut s,
        2,
        "r.txt",
        json!([{"oldText": old, "newText": new}]),
    );
    assert_eq!(r["isError"], false, "{}", text(&r));
    let diff = fenced_diff(&text(&r)).to_owned();
    assert!(diff.contains("\n@@ -1,60002 +1,60002 @@\n head\n-old line 0\n"));
    assert_one_block(&diff, 60_000, 60_000);
    let expected = format!("head\n{new}tail\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("r.txt")).expect("read"),
        expected
    );
    if let Some(applied) = patched(&file, &diff) {
        assert_eq!(applied, expected);
    }
    s.close_and_wait();
}

#[test]
fn a_diff_past_its_time_budget_is_one_block_that_patch_applies() {
    // The same lines reversed: nothing suggests the diff is large until the search runs out of
    // time; the block drawn then still applies.
    let dir = temp_dir();
    let lines: Vec<String> = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let old: String = lines.concat();
    let new: String = lines.iter().rev().map(String::as_str).collect();
    let file = format!("a\nb\nc\nd\n{old}");
    std::fs::write(dir.path().join("r.txt"), &file).expect("write");
    // About the diff engine, not the result budget: lifted, so one answer holds the whole diff.
    let mut s = Session::start_in(
        dir.path(),
        &["--no-call-log", "--max-result-bytes", "1000000000"],
    );
    s.initialize("2025-06-18");
    let r = edit_call(
        &mut s,
        2,
        "r.txt",
        json!([{"oldText": old, "newText": new}]),
    );
    assert_eq!(r["isError"], false, "{}", text(&r));
    let diff = fenced_diff(&text(&r)).to_owned();
    assert!(diff.contains("\n@@ -2,20003 +2,20003 @@\n b\n c\n d\n-line 0\n"));
    let expected = format!("a\nb\nc\nd\n{new}");
    if let Some(applied) = patched(&file, &diff) {
        assert_eq!(applied, expected);
    }
    s.close_and_wait();
}

#[test]
fn a_diff_of_several_hunks_in_a_large_file_applies_with_patch() {
    let ws = test_support::temp::Ws::new();
    let file = numbered("line", 5_000);
    ws.write("f.txt", &file);
    let reply = ws
        .call(
            "edit_file",
            json!({"path": "f.txt", "edits": [
                {"oldText": "line 100\n", "newText": "first\n"},
                {"oldText": "line 2000\nline 2001\n", "newText": ""},
                {"oldText": "line 4999\n", "newText": "line 4999"}
            ]}),
        )
        .expect_ok();
    let diff = fenced_diff(&reply);
    assert_eq!(diff.lines().filter(|l| l.starts_with("@@ ")).count(), 3);
    if let Some(applied) = patched(&file, diff) {
        assert_eq!(applied, ws.read("f.txt"));
    }
}

#[test]
fn more_than_a_hundred_edits_are_refused_and_a_hundred_are_applied() {
    let ws = test_support::temp::Ws::new();
    let file = numbered("line", 200);
    ws.write("f.txt", &file);
    let edits = |n: usize| -> Value {
        (0..n)
            .map(|i| json!({"oldText": format!("line {i}\n"), "newText": format!("LINE {i}\n")}))
            .collect()
    };
    let err = ws
        .call("edit_file", json!({"path": "f.txt", "edits": edits(101)}))
        .expect_err("InvalidArgument");
    assert!(
        err.contains("101 edits") && err.contains("100") && err.contains("split"),
        "{err}"
    );
    assert_eq!(ws.read("f.txt"), file);
    let text = ws
        .call("edit_file", json!({"path": "f.txt", "edits": edits(100)}))
        .expect_ok();
    assert!(text.starts_with("Edited (100 edits) f.txt"), "{text}");
    assert!(ws.read("f.txt").starts_with("LINE 0\n"));
}

#[test]
fn more_edit_text_than_a_call_takes_is_refused() {
    let dir = temp_dir();
    std::fs::write(dir.path().join("f.txt"), "a\n").expect("write");
    let mut s = Session::start_in(dir.path(), &["--no-call-log"]);
    s.initialize("2025-06-18");
    let big = "x".repeat(9 << 20);
    let r = edit_call(
        &mut s,
        2,
        "f.txt",
        json!([{"oldText": "a", "newText": big}, {"oldText": big, "newText": "b"}]),
    );
    assert_eq!(r["isError"], true);
    let t = text(&r);
    assert!(
        t.starts_with("InvalidArgument: ") && t.contains("edit 2") && t.contains("split"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).expect("read"),
        "a\n"
    );
    s.close_and_wait();
}

/// A file whose edit (every line reversed) keeps the server busy for the diff's whole time
/// budget, and that edit.
fn slow_edit(root: &Path) -> (String, Value) {
    let lines: Vec<String> = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let old: String = lines.concat();
    let new: String = lines.iter().rev().map(String::as_str).collect();
    std::fs::write(root.join("r.txt"), &old).expect("write");
    (old.clone(), json!([{"oldText": old, "newText": new}]))
}

#[test]
fn a_cancelled_edit_writes_nothing_and_is_not_answered() {
    let dir = temp_dir();
    let (before, edits) = slow_edit(dir.path());
    std::fs::write(dir.path().join("hello.txt"), "hello\n").expect("write");
    let mut s = Session::start_in(dir.path(), &["--no-call-log"]);
    s.initialize("2025-06-18");
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "edit_file", "arguments": {"path": "r.txt", "edits": edits}}}));
    // The edit takes the store lock first: once its file exists the edit is running.
    let lock = dir.path().join(".filesystem/.lock");
    let waited = Instant::now();
    while !lock.exists() {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "the edit never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "test"}}),
    );
    // Calls run one after another: the answer to this one comes after the edit has ended.
    s.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "read_text_file", "arguments": {"path": "hello.txt"}}}));
    let reply = s.recv();
    assert_eq!(reply["id"], 3, "the cancelled call was answered: {reply}");
    assert_eq!(text(&reply["result"]), "hello\n");
    assert_eq!(
        std::fs::read(dir.path().join("r.txt")).expect("read"),
        before.as_bytes()
    );
    s.close_and_wait();
}

#[test]
fn a_timed_out_edit_is_a_timeout_and_writes_nothing() {
    let dir = temp_dir();
    let (before, edits) = slow_edit(dir.path());
    let mut s = Session::start_in(dir.path(), &["--timeout", "1", "--no-call-log"]);
    s.initialize("2025-06-18");
    let started = Instant::now();
    let r = edit_call(&mut s, 2, "r.txt", edits);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(r["isError"], true);
    let t = text(&r);
    assert!(
        t.starts_with("Timeout: edit_file on 'r.txt' stopped") && t.contains("nothing was changed"),
        "{t}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("r.txt")).expect("read"),
        before.as_bytes()
    );
    s.close_and_wait();
}
