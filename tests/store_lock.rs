#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Waiting for the store's lock honours the call's time limit and its cancellation. The lock is
//! held by construction: a real `filesystem call move_file` parked by the store's crash-point
//! hook (`FILESYSTEM_TEST_STOP_AFTER=move:2:park`) right after it wrote its pending note, under
//! the lock, until the test kills it. A server call that needs the lock meanwhile must be
//! answered (an error naming the holder), and must not hold up the calls after it.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::cli::{in_root, printed};
use test_support::mcp::{initialize, initialized, outcome, tools_call};
use test_support::temp::canonical_temp_dir;

/// How long any reply may take before the test calls it a hang: far above any wait the server
/// is allowed (one second of `--timeout`, or a cancellation), so only a hang reaches it.
const HANG: Duration = Duration::from_secs(60);

fn ok(root: &Path, tool: &str, args: Value) -> String {
    let out = in_root(root, &["call", tool, &args.to_string(), "--backup"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{tool}: {}", printed(&out));
    printed(&out)
}

/// A `move_file` of `a.txt` parked under the store lock after its note is written.
fn park_a_move(root: &Path) -> Child {
    let mut child = in_root(
        root,
        &[
            "call",
            "move_file",
            r#"{"source":"a.txt","destination":"b.txt"}"#,
            "--backup",
        ],
    )
    .env("FILESYSTEM_TEST_STOP_AFTER", "move:2:park")
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("spawn the holder");
    let note = root.join(".filesystem/.pending-move");
    let started = Instant::now();
    while !note.exists() {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the holder ended"
        );
        assert!(started.elapsed() < HANG, "the holder never parked");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// A server whose replies arrive on a channel, so a missing one is seen as a hang.
struct Server {
    child: Child,
    stdin: std::process::ChildStdin,
    replies: mpsc::Receiver<Value>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(root: &Path, timeout: &str) -> Server {
        let mut child = command()
            .args(["--backup", "--timeout", timeout, "--root"])
            .arg(root)
            .env_remove("FILESYSTEM_ROOT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            while stdout.read_line(&mut line).is_ok_and(|n| n > 0) {
                if let Ok(v) = serde_json::from_str(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                line.clear();
            }
        });
        let mut s = Server {
            child,
            stdin,
            replies,
        };
        s.send(initialize(0, "2025-06-18", "lock-test"));
        s.reply(0);
        s.send(initialized());
        s
    }

    fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).expect("json");
        line.push(b'\n');
        self.stdin.write_all(&line).expect("write to the server");
        self.stdin.flush().expect("flush");
    }

    /// The reply to request `id`, or a failed test once [`HANG`] has passed without it.
    fn reply(&mut self, id: i64) -> Value {
        let started = Instant::now();
        loop {
            let left = HANG.saturating_sub(started.elapsed());
            let v = self
                .replies
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no reply to request {id}: the call hangs"));
            if v["id"] == json!(id) {
                return v;
            }
        }
    }
}

#[test]
fn a_call_waiting_for_a_held_lock_gives_up_at_its_time_limit_and_names_the_holder() {
    let (_d, root) = canonical_temp_dir();
    ok(
        &root,
        "write_file",
        json!({"path": "a.txt", "content": "one"}),
    );
    let mut holder = park_a_move(&root);
    let mut server = Server::start(&root, "1");
    for id in [2, 3] {
        server.send(tools_call(
            id,
            "write_file",
            json!({"path": "c.txt", "content": "x"}),
        ));
        let (is_error, text) = outcome(&server.reply(id)["result"]);
        assert!(is_error, "{text}");
        // The executor may answer the timeout itself; either way the call did not wait past it,
        // and when the store answers it says who holds the lock.
        assert!(
            text.contains(&format!("locked by process {}", holder.id()))
                && text.contains("move_file")
                || text.starts_with("TimedOut"),
            "{text}"
        );
    }
    // A call that needs no lock, after the two, is answered: the lane is free.
    server.send(tools_call(4, "read_text_file", json!({"path": "a.txt"})));
    let (is_error, text) = outcome(&server.reply(4)["result"]);
    assert!(!is_error && text.contains("one"), "{text}");
    assert!(!root.join("c.txt").exists(), "nothing was written");

    holder.kill().expect("kill the holder");
    holder.wait().expect("reap");
    server.send(tools_call(
        5,
        "write_file",
        json!({"path": "c.txt", "content": "x"}),
    ));
    let (is_error, text) = outcome(&server.reply(5)["result"]);
    assert!(
        !is_error,
        "once the holder is gone the lock is free: {text}"
    );
}

#[test]
fn a_cancelled_call_stops_waiting_for_a_held_lock_and_frees_its_lane() {
    let (_d, root) = canonical_temp_dir();
    ok(
        &root,
        "write_file",
        json!({"path": "a.txt", "content": "one"}),
    );
    let mut holder = park_a_move(&root);
    // No time limit: only the cancellation can end the wait before the store's own cap.
    let mut server = Server::start(&root, "0");
    server.send(tools_call(
        2,
        "write_file",
        json!({"path": "c.txt", "content": "x"}),
    ));
    server.send(json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "test"}
    }));
    server.send(tools_call(3, "read_text_file", json!({"path": "a.txt"})));
    let (is_error, text) = outcome(&server.reply(3)["result"]);
    assert!(!is_error && text.contains("one"), "{text}");
    assert!(
        !root.join("c.txt").exists(),
        "the cancelled write changed nothing"
    );
    holder.kill().expect("kill the holder");
    holder.wait().expect("reap");
}
