#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The server core under abuse: order of batched and queued calls, cancels, duplicate ids,
//! framing edges, a client that stops reading or closes our output, and the daemon's roots (one
//! slow tenant, twenty thousand tenants).

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::filesystem;
use test_support::framing::read_framed;
use test_support::mcp::{initialize, text, Session};
use test_support::temp::temp_dir;

/// A pipeline that runs until it is stopped.
const BUSY: &str = "awk 'BEGIN { while (1) {} }'";

fn call_msg(id: i64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
}

fn cancel_msg(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}})
}

fn ping_msg(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

/// Waits for the process to exit on its own (stdin still open), failing after `limit`.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the process has a child (a pipeline stage it started), failing after `limit`.
fn wait_for_a_child(parent: &std::process::Child, limit: Duration) {
    let parent = parent.id().to_string();
    let has_child = || {
        test_support::procs::proc_entries().iter().any(|(_, dir)| {
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            // The fields after the command name (which may hold spaces) in parentheses: state, ppid.
            stat.rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                .is_some_and(|ppid| ppid == parent)
        })
    };
    let deadline = Instant::now() + limit;
    while !has_child() {
        assert!(
            Instant::now() < deadline,
            "the call never started its stage"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A `/proc/PID/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn a_batched_read_sees_a_write_queued_before_it_and_ping_is_not_held_up() {
    let mut s = Session::start(&["--legacy-pipe", "--with-filesystem", "--timeout", "3"]);
    std::fs::write(s.root.join("a.txt"), "old\n").expect("seed");
    s.initialize("2025-03-26");
    // A slow call first, so the write behind it is still queued when the batch arrives.
    s.send(call_msg(2, "shelpa_pipe", json!({"command": BUSY})));
    s.send(call_msg(
        3,
        "write_file",
        json!({"path": "a.txt", "content": "new\n"}),
    ));
    s.send(json!([call_msg(
        4,
        "read_text_file",
        json!({"path": "a.txt"})
    )]));
    s.send(ping_msg(5));
    // The ping is answered while the slow call still runs.
    let first = s.recv();
    assert_eq!(first["id"], json!(5), "ping was held up: {first}");
    let slow = s.recv();
    assert_eq!(slow["id"], json!(2), "{slow}");
    let write = s.recv();
    assert_eq!(write["id"], json!(3), "{write}");
    let batch = s.recv();
    let items = batch.as_array().expect("a batch reply is an array");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["id"], json!(4));
    assert_eq!(text(&items[0]["result"]), "new\n", "{batch}");
}

#[test]
fn a_cancel_reaches_a_batched_call_and_it_gets_no_reply() {
    let mut s = Session::start(&["--legacy-pipe", "--with-filesystem", "--timeout", "60"]);
    s.initialize("2025-03-26");
    s.send(json!([call_msg(
        10,
        "shelpa_pipe",
        json!({"command": BUSY})
    )]));
    // Cancel it while it runs: once its stage is seen as the server's child.
    wait_for_a_child(&s.child, Duration::from_secs(20));
    s.send(cancel_msg(10));
    // Behind the batch in the queue: answered only once the batch is over.
    s.send(call_msg(11, "list_directory", json!({"path": "."})));
    let reply = s.recv();
    assert_eq!(
        reply["id"],
        json!(11),
        "a cancelled call must get no reply: {reply}"
    );
    assert!(
        s.child.try_wait().expect("wait").is_none(),
        "the server must live on"
    );
}

#[test]
fn a_second_call_under_an_id_in_flight_is_refused_and_the_cancel_stays_with_the_first() {
    let mut s = Session::start(&["--legacy-pipe", "--timeout", "60"]);
    s.initialize("2025-11-25");
    s.send(call_msg(20, "shelpa_pipe", json!({"command": BUSY})));
    s.send(call_msg(20, "shelpa_pipe", json!({"command": "ls"})));
    let refused = s.recv();
    assert_eq!(refused["id"], json!(20));
    assert_eq!(refused["error"]["code"], json!(-32600), "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("already used")));
    // The cancel still finds the first call: the refused one did not take its entry.
    s.send(cancel_msg(20));
    s.send(call_msg(21, "shelpa_pipe", json!({"command": "ls"})));
    let next = s.recv();
    assert_eq!(next["id"], json!(21), "{next}");
    // The id is free again once its call is over.
    let again = s.call(20, "shelpa_pipe", json!({"command": "ls"}));
    assert_eq!(again["isError"], json!(false), "{again}");
}

#[test]
fn a_second_initialize_is_refused_and_the_session_keeps_its_version() {
    let mut s = Session::start(&[]);
    s.initialize("2025-11-25");
    let again = s.request(
        2,
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}),
    );
    assert_eq!(again["error"]["code"], json!(-32600), "{again}");
    // Batches belong to 2025-03-26 only: still refused, so nothing was renegotiated.
    s.send(json!([ping_msg(3)]));
    let batch = s.recv();
    assert_eq!(batch["error"]["code"], json!(-32600), "{batch}");
}

#[test]
fn an_oversized_content_length_is_answered_before_its_body_arrives() {
    let mut s = Session::start(&["--max-message-bytes", "1000"]);
    s.send_raw(b"Content-Length: 5000\r\n\r\n");
    let refused = read_framed(&mut s.stdout);
    assert_eq!(refused["id"], Value::Null);
    assert_eq!(refused["error"]["code"], json!(-32600), "{refused}");
    // The body is skipped when it comes; the next message is read normally.
    s.send_raw(&vec![b'x'; 5000]);
    let ping = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    s.send_raw(format!("Content-Length: {}\r\n\r\n", ping.len()).as_bytes());
    s.send_raw(ping);
    let reply = read_framed(&mut s.stdout);
    assert_eq!(reply["id"], json!(7), "{reply}");
}

#[test]
fn conflicting_content_lengths_are_an_error_and_end_the_session() {
    let mut s = Session::start(&[]);
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    s.send_raw(
        format!(
            "Content-Length: {}\r\nContent-Length: 5\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    s.send_raw(body);
    let reply = read_framed(&mut s.stdout);
    assert_eq!(reply["id"], Value::Null);
    assert_eq!(reply["error"]["code"], json!(-32700), "{reply}");
    let mut rest = Vec::new();
    s.stdout.read_to_end(&mut rest).expect("read");
    assert!(
        rest.is_empty(),
        "nothing after the error: {:?}",
        String::from_utf8_lossy(&rest)
    );
    wait_exit(&mut s.child, Duration::from_secs(10));
}

#[test]
fn a_client_that_closes_our_output_stops_the_calls_and_the_server_exits() {
    let dir = temp_dir();
    let mut child = command()
        .arg("--root")
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let init = initialize(1, "2025-11-25", "t");
    writeln!(stdin, "{init}").expect("send");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("init reply");
    drop(stdout);
    let calls = 2000;
    let content = "x".repeat(64 * 1024);
    let writer = std::thread::spawn(move || {
        for i in 0..calls {
            let msg = call_msg(
                i + 2,
                "write_file",
                json!({"path": format!("f{i}.txt"), "content": content}),
            );
            if writeln!(stdin, "{msg}").is_err() {
                break;
            }
        }
        // Keep stdin open: the server must leave because its output is gone, not its input.
        std::thread::sleep(Duration::from_secs(20));
        drop(stdin);
    });
    wait_exit(&mut child, Duration::from_secs(15));
    let written = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with('f'))
        .count();
    assert!(
        written < calls as usize,
        "every call ran although nobody could read a reply ({written})"
    );
    drop(writer);
}

#[test]
fn a_client_that_does_not_read_holds_the_server_to_a_bounded_size() {
    // Replies of 4 MiB each are the point: the result budget is lifted.
    let mut s = Session::start(&["--no-call-log", "--max-result-bytes", "1000000000"]);
    let four_mb = "y".repeat(4 * 1024 * 1024);
    std::fs::write(s.root.join("big.txt"), &four_mb).expect("seed");
    s.initialize("2025-11-25");
    let pid = s.child.id();
    let mut stdin = s.stdin.take().expect("stdin");
    let calls: i64 = 200;
    let writer = std::thread::spawn(move || {
        for i in 0..calls {
            let msg = call_msg(i + 2, "read_text_file", json!({"path": "big.txt"}));
            writeln!(stdin, "{msg}").expect("send");
        }
        stdin
    });
    // Give the server every chance to run ahead of its reader.
    std::thread::sleep(Duration::from_secs(3));
    let stalled_kib = status_kib(pid, "VmHWM:");
    let stdin = writer.join().expect("writer");
    let mut seen = 0;
    while seen < calls {
        let reply = s.recv();
        assert_eq!(reply["id"], json!(seen + 2), "replies in order, none lost");
        assert_eq!(text(&reply["result"]).len(), four_mb.len());
        seen += 1;
    }
    let peak_kib = status_kib(pid, "VmHWM:");
    // 200 replies of 4 MiB are 800 MiB; the outbox bound keeps the server far below that.
    assert!(
        stalled_kib < 160 * 1024 && peak_kib < 160 * 1024,
        "peak RSS {stalled_kib} KiB while stalled, {peak_kib} KiB overall"
    );
    s.stdin = Some(stdin);
}

#[test]
fn in_server_mode_a_slow_tenant_does_not_hold_up_another_and_each_root_stays_in_order() {
    let allowed = temp_dir();
    let a = allowed.path().join("a");
    let b = allowed.path().join("b");
    std::fs::create_dir(&a).expect("a");
    std::fs::create_dir(&b).expect("b");
    let allowed_arg = allowed.path().as_os_str();
    let mut s = Session::spawn(
        &[
            "--server".as_ref(),
            "--legacy-pipe".as_ref(),
            "--with-filesystem".as_ref(),
            "--allow-root".as_ref(),
            allowed_arg,
            "--timeout".as_ref(),
            "3".as_ref(),
        ],
        &[],
    );
    s.initialize("2025-11-25");
    let root = |p: &Path| p.to_string_lossy().into_owned();
    s.send(call_msg(
        2,
        "shelpa_pipe",
        json!({"root": root(&a), "command": BUSY}),
    ));
    s.send(call_msg(
        3,
        "write_file",
        json!({"root": root(&a), "path": "after.txt", "content": "x"}),
    ));
    s.send(call_msg(
        4,
        "list_directory",
        json!({"root": root(&b), "path": "."}),
    ));
    let order: Vec<Value> = (0..3).map(|_| s.recv()["id"].clone()).collect();
    assert_eq!(order, vec![json!(4), json!(2), json!(3)]);
}

#[test]
fn twenty_thousand_roots_cost_a_bounded_number_of_descriptors() {
    let allowed = temp_dir();
    let roots = 20_000;
    for i in 0..roots {
        std::fs::create_dir(allowed.path().join(format!("r{i}"))).expect("mkdir");
    }
    let allowed_arg = allowed.path().as_os_str();
    let mut s = Session::spawn(
        &[
            "--server".as_ref(),
            "--no-call-log".as_ref(),
            "--allow-root".as_ref(),
            allowed_arg,
        ],
        &[],
    );
    s.initialize("2025-11-25");
    let pid = s.child.id();
    let base = allowed.path().to_path_buf();
    let mut stdin = s.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        for i in 0..roots {
            let root = base.join(format!("r{i}"));
            let msg = call_msg(
                i + 2,
                "list_directory",
                json!({"root": root.to_string_lossy(), "path": "."}),
            );
            writeln!(stdin, "{msg}").expect("send");
        }
        stdin
    });
    let mut peak_fds = 0;
    // Different roots are different lanes: their replies may come in any order.
    let mut answered = std::collections::HashSet::new();
    for i in 0..roots {
        let reply = s.recv();
        assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        assert!(
            answered.insert(reply["id"].as_i64().expect("id")),
            "answered twice: {reply}"
        );
        if i % 1000 == 0 {
            peak_fds = peak_fds.max(open_descriptors(pid));
        }
    }
    assert_eq!(answered.len(), roots as usize);
    s.stdin = Some(writer.join().expect("writer"));
    peak_fds = peak_fds.max(open_descriptors(pid));
    assert!(peak_fds < 300, "{peak_fds} descriptors open");
    // The first root was closed long ago and opens again on demand.
    let first = allowed.path().join("r0");
    let again = s.call(
        99_999,
        "write_file",
        json!({"root": first.to_string_lossy(), "path": "back.txt", "content": "ok"}),
    );
    assert_eq!(again["isError"], json!(false), "{again}");
    assert_eq!(
        std::fs::read_to_string(first.join("back.txt")).expect("read"),
        "ok"
    );
}

#[test]
fn under_a_low_descriptor_limit_every_root_is_still_served() {
    let allowed = temp_dir();
    let roots = 300;
    for i in 0..roots {
        std::fs::create_dir(allowed.path().join(format!("r{i}"))).expect("mkdir");
    }
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(filesystem())
        .args(["--server", "--allow-root"])
        .arg(allowed.path());
    let mut s = Session::from_command(cmd);
    s.initialize("2025-11-25");
    // Twice round: the second pass finds every early root closed and must open it again.
    for pass in 0..2 {
        for i in 0..roots {
            let root = allowed.path().join(format!("r{i}"));
            let reply = s.call(
                pass * 1000 + i + 2,
                "write_file",
                json!({"root": root.to_string_lossy(), "path": "f.txt", "content": format!("{pass}")}),
            );
            assert_eq!(
                reply["isError"],
                json!(false),
                "root {i}, pass {pass}: {reply}"
            );
        }
    }
    // Every call of both passes is in its root's call log.
    for i in 0..roots {
        let log = allowed
            .path()
            .join(format!("r{i}/.filesystem/.calls.jsonl"));
        let lines = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count();
        assert_eq!(lines, 2, "root {i}: {lines} log lines");
    }
}
