#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The adoption-study call log and the combined mode, through the real binary.

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::logs::json_lines;
use test_support::mcp::{text, Session};
use test_support::temp::temp_dir;

#[test]
fn every_call_is_logged_with_outcome_sizes_and_client_but_no_contents() {
    let mut s = Session::start(&[]);
    s.initialize("2025-06-18");
    let ok = s.call(2, "read_text_file", json!({"path": "hello.txt"}));
    assert_eq!(ok["isError"], json!(false), "{ok}");
    let bad = s.call(3, "read_text_file", json!({"path": "../secret"}));
    assert_eq!(bad["isError"], json!(true));
    let root = s.root.clone();
    let dir = s.dir.take();
    assert!(s.close_and_wait().success());

    let lines = json_lines(&root.join(".filesystem/.calls.jsonl"));
    assert_eq!(lines.len(), 2, "{lines:?}");
    let first = &lines[0];
    assert_eq!(first["tool"], json!("read_text_file"));
    assert_eq!(first["outcome"], json!("ok"));
    assert_eq!(first["mode"], json!("filesystem"));
    assert_eq!(first["client"]["name"], json!("test"));
    assert_eq!(first["protocol"], json!("2025-06-18"));
    assert_eq!(first["output_bytes"], json!("hello\n".len()));
    assert_eq!(
        first["input_bytes"],
        json!(json!({"path": "hello.txt"}).to_string().len())
    );
    assert!(
        first.get("args").is_none(),
        "arguments must not be logged by default"
    );
    assert_eq!(lines[1]["outcome"], json!("error"));
    assert_eq!(lines[1]["error_kind"], json!("PathEscape"));
    assert_eq!(first["session"], lines[1]["session"]);
    let raw = std::fs::read_to_string(root.join(".filesystem/.calls.jsonl")).unwrap_or_default();
    assert!(!raw.contains("hello.txt") && !raw.contains("secret"));
    drop(dir);
}

#[test]
fn arguments_are_logged_only_when_asked_and_the_log_can_move_or_be_off() {
    let elsewhere = temp_dir();
    let log = elsewhere.path().join("calls.jsonl");
    let log_arg = log.to_string_lossy().into_owned();
    let mut s = Session::start(&["--call-log", &log_arg, "--call-log-args"]);
    s.initialize("2025-11-25");
    s.call(2, "read_text_file", json!({"path": "hello.txt"}));
    let root = s.root.clone();
    let _dir = s.dir.take();
    assert!(s.close_and_wait().success());
    let lines = json_lines(&log);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["args"], json!({"path": "hello.txt"}));
    assert!(!root.join(".filesystem/.calls.jsonl").exists());

    let mut off = Session::start(&["--no-call-log"]);
    off.initialize("2025-11-25");
    off.call(2, "read_text_file", json!({"path": "hello.txt"}));
    let root = off.root.clone();
    let _dir = off.dir.take();
    assert!(off.close_and_wait().success());
    assert!(
        !root.join(".filesystem").exists(),
        "nothing may be written with --no-call-log"
    );
}

#[test]
fn concurrent_servers_sharing_a_log_never_interleave_lines() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("hello.txt"), "hello\n").expect("write");
    let per_server = 150;
    let mut sessions: Vec<Session> = (0..3).map(|_| Session::start_in(ws.path(), &[])).collect();
    for s in &mut sessions {
        s.initialize("2025-11-25");
    }
    // Pipeline every request first, so the three servers append at the same time.
    for s in &mut sessions {
        for i in 0..per_server {
            s.send(
                json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                "params": {"name": "read_text_file", "arguments": {"path": "hello.txt"}}}),
            );
        }
    }
    for s in &mut sessions {
        for _ in 0..per_server {
            let reply = s.recv();
            assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        }
    }
    for s in sessions {
        assert!(s.close_and_wait().success());
    }
    let lines = json_lines(&ws.path().join(".filesystem/.calls.jsonl"));
    assert_eq!(lines.len(), 3 * per_server as usize);
    let sessions: std::collections::HashSet<String> = lines
        .iter()
        .map(|l| l["session"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(sessions.len(), 3);
}

#[test]
fn the_combined_mode_serves_both_interfaces_and_the_log_shows_which_was_used() {
    let mut s = Session::start(&["--legacy-pipe", "--with-filesystem"]);
    let init = s.initialize("2025-11-25");
    assert!(init["result"]["instructions"]
        .as_str()
        .is_some_and(|i| i.contains("shelpa") || i.contains("pipe")));
    let tools = s.request(2, "tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"shelpa_pipe") && names.contains(&"write_file"),
        "{names:?}"
    );

    let piped = s.call(
        3,
        "shelpa_pipe",
        json!({"command": "head -n 1 hello.txt | wc -l"}),
    );
    assert_eq!(piped["isError"], json!(false), "{piped}");
    let wrote = s.call(4, "write_file", json!({"path": "b.txt", "content": "b\n"}));
    assert_eq!(wrote["isError"], json!(false), "{}", text(&wrote));
    let refused = s.call(
        5,
        "shelpa_pipe",
        json!({"command": "sort -o out hello.txt"}),
    );
    assert_eq!(refused["isError"], json!(true));

    let root = s.root.clone();
    let _dir = s.dir.take();
    assert!(s.close_and_wait().success());
    let lines = json_lines(&root.join(".filesystem/.calls.jsonl"));
    assert_eq!(lines.len(), 3);
    assert!(lines
        .iter()
        .all(|l| l["mode"] == json!("legacy-pipe+filesystem")));
    assert_eq!(lines[0]["tool"], json!("shelpa_pipe"));
    assert_eq!(lines[0]["stages"], json!(["head", "wc"]));
    assert_eq!(lines[0]["stage_count"], json!(2));
    assert_eq!(lines[1]["tool"], json!("write_file"));
    assert_eq!(lines[2]["error_kind"], json!("DISALLOWED_OPTION"));
    assert!(lines[2]["token"]
        .as_str()
        .is_some_and(|t| t.starts_with("-o")));

    // The report reads the log the server wrote, not only hand-made fixtures.
    let out = command()
        .args(["report", "--format", "json", "--log"])
        .arg(root.join(".filesystem/.calls.jsonl"))
        .output()
        .expect("report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json report");
    let total = &report["call_logs"]["total"];
    assert_eq!(total["calls"], json!(3));
    assert_eq!(total["interfaces"]["pipe"]["calls"], json!(2));
    assert_eq!(total["interfaces"]["filesystem"]["calls"], json!(1));
    assert_eq!(
        total["interfaces"]["pipe"]["errors_by_reason"]["DISALLOWED_OPTION"],
        json!(1)
    );
    assert_eq!(
        total["adoption"]["writes_by_interface"]["filesystem"],
        json!(1)
    );
}

#[test]
fn a_line_torn_by_a_killed_server_is_cut_before_the_next_append() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("hello.txt"), "hello\n").expect("write");
    std::fs::create_dir_all(ws.path().join(".filesystem")).expect("mkdir");
    let log = ws.path().join(".filesystem/.calls.jsonl");
    std::fs::write(&log, "{\"whole\":1}\n{\"torn\":").expect("seed");
    let mut s = Session::start_in(ws.path(), &[]);
    s.initialize("2025-11-25");
    s.call(2, "read_text_file", json!({"path": "hello.txt"}));
    assert!(s.close_and_wait().success());
    let lines = json_lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], json!({"whole": 1}));
    assert_eq!(lines[1]["tool"], json!("read_text_file"));
}

#[test]
fn a_call_is_in_the_log_by_the_time_its_reply_arrives() {
    let mut s = Session::start(&[]);
    s.initialize("2025-06-18");
    let log = s.root.join(".filesystem/.calls.jsonl");
    // One call at a time: each reply finds its own line already written.
    for id in 2..5 {
        let reply = s.call(id, "read_text_file", json!({"path": "hello.txt"}));
        assert_eq!(reply["isError"], json!(false), "{reply}");
        assert_eq!(json_lines(&log).len() as i64, id - 1, "after reply {id}");
    }
    // Pipelined: all requests first, then every reply; lines go out in batches, but never after
    // the replies they describe.
    for id in 10..60 {
        s.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "list_directory", "arguments": {"path": "."}}}));
    }
    for n in 1..=50 {
        let reply = s.recv();
        assert!(reply.get("result").is_some(), "{reply}");
        assert!(
            json_lines(&log).len() >= 3 + n,
            "reply {n} of the pipelined calls arrived before its log line"
        );
    }
    let dir = s.dir.take();
    assert!(s.close_and_wait().success());
    assert_eq!(json_lines(&log).len(), 53);
    drop(dir);
}

#[test]
fn a_per_root_log_hard_linked_to_an_outside_file_is_not_written_through() {
    let base = temp_dir();
    let ws = base.path().join("ws");
    std::fs::create_dir_all(ws.join(".filesystem")).expect("mkdir");
    std::fs::write(ws.join("hello.txt"), "hello\n").expect("write");
    let outside = base.path().join("outside.jsonl");
    std::fs::write(&outside, "outside\n").expect("seed");
    // Planted: the log inside the store is another name for a file outside the workspace.
    std::fs::hard_link(&outside, ws.join(".filesystem/.calls.jsonl")).expect("link");
    let mut s = Session::start_in(&ws, &[]);
    s.initialize("2025-11-25");
    let reply = s.call(2, "read_text_file", json!({"path": "hello.txt"}));
    assert_eq!(
        reply["isError"],
        json!(false),
        "a refused log never breaks the call"
    );
    assert!(s.close_and_wait().success());
    assert_eq!(
        std::fs::read_to_string(&outside).expect("read"),
        "outside\n",
        "the append went through the hard link"
    );
}
