#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The call log stays bounded whatever the client sends: client identity and echoed tokens are
//! cut to a documented length, and the file is rotated by size, with `report` reading across the
//! rotated files.

use std::path::Path;

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::logs::json_lines;
use test_support::mcp::Session;
use test_support::temp::{canonical_temp_dir, temp_dir};

/// The documented cut: 256 bytes of a client-supplied string, then a marker.
const TOKEN_MAX_BYTES: usize = 256;

fn is_cut(v: &Value, original_len: usize) -> bool {
    let s = v.as_str().unwrap_or_default();
    s.len() < TOKEN_MAX_BYTES + 32 && s.ends_with(&format!("…[+{} bytes]", original_len - 256))
}

#[test]
fn a_huge_client_name_and_version_are_cut_in_every_line() {
    let name = "n".repeat(1024 * 1024);
    let version = "é".repeat(1000); // two bytes each: the cut lands on a character boundary
    let mut s = Session::start(&[]);
    let init = s.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": name, "version": version}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    for id in 2..22 {
        let r = s.call(id, "read_text_file", json!({"path": "hello.txt"}));
        assert_eq!(r["isError"], json!(false), "{r}");
    }
    let root = s.root.clone();
    let _dir = s.dir.take();
    assert!(s.close_and_wait().success());
    let log = root.join(".filesystem/.calls.jsonl");
    let size = std::fs::metadata(&log).expect("log").len();
    assert!(size < 20 * 2048, "20 calls wrote {size} bytes");
    let lines = json_lines(&log);
    assert_eq!(lines.len(), 20);
    for l in &lines {
        assert!(is_cut(&l["client"]["name"], name.len()), "{}", l["client"]);
        let v = l["client"]["version"].as_str().expect("version");
        assert!(v.starts_with(&"é".repeat(128)) && v.contains("…[+"), "{v}");
    }
}

#[test]
fn a_stateless_clients_meta_identity_is_cut_too() {
    let mut s = Session::start(&[]);
    let name = "m".repeat(100_000);
    let reply = s.request(
        2,
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": "hello.txt"},
               "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                         "io.modelcontextprotocol/clientInfo": {"name": name, "version": "v"}}}),
    );
    assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
    let root = s.root.clone();
    let _dir = s.dir.take();
    assert!(s.close_and_wait().success());
    let lines = json_lines(&root.join(".filesystem/.calls.jsonl"));
    assert_eq!(lines.len(), 1);
    assert!(is_cut(&lines[0]["client"]["name"], name.len()));
    assert_eq!(lines[0]["client"]["version"], json!("v"));
}

#[test]
fn a_huge_pipe_command_word_makes_a_short_line() {
    let mut s = Session::start(&["--legacy-pipe"]);
    s.initialize("2025-11-25");
    let word = "w".repeat(4 * 1024 * 1024);
    let refused = s.call(
        2,
        "shelpa_pipe",
        json!({"command": format!("{word} | sort")}),
    );
    assert_eq!(refused["isError"], json!(true));
    let pattern = "p".repeat(1024 * 1024);
    let ran = s.call(
        3,
        "shelpa_pipe",
        json!({"command": format!("rg -c '{pattern}' hello.txt")}),
    );
    let _ = ran;
    let root = s.root.clone();
    let _dir = s.dir.take();
    assert!(s.close_and_wait().success());
    let log = root.join(".filesystem/.calls.jsonl");
    let size = std::fs::metadata(&log).expect("log").len();
    assert!(size < 8 * 1024, "two calls wrote {size} bytes");
    let lines = json_lines(&log);
    assert_eq!(lines.len(), 2);
    assert!(is_cut(&lines[0]["stages"][0], word.len()), "{}", lines[0]);
    assert!(is_cut(&lines[0]["token"], word.len()), "{}", lines[0]);
    assert_eq!(lines[0]["stages"][1], json!("sort"));
}

/// Runs `report --format json --log FILE…` and returns the call-log section.
fn report(logs: &[&Path]) -> Value {
    let out = command()
        .args(["report", "--format", "json", "--log"])
        .args(logs)
        .output()
        .expect("report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    v["call_logs"].clone()
}

#[test]
fn the_log_rotates_by_size_and_report_reads_across_the_rotated_files() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("hello.txt"), "hello\n").expect("write");
    let limit = 4096;
    let calls: i64 = 40;
    // Two servers sharing the log, appending at the same time, rotating it between them.
    let mut servers: Vec<Session> = (0..2)
        .map(|_| {
            let mut cmd = command();
            cmd.arg("--root")
                .arg(ws.path())
                .env("FILESYSTEM_CALL_LOG_ROTATE_BYTES", limit.to_string());
            let mut s = Session::from_command(cmd);
            s.initialize("2025-11-25");
            s
        })
        .collect();
    for s in &mut servers {
        for i in 0..calls / 2 {
            s.send(
                json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                "params": {"name": "read_text_file", "arguments": {"path": "hello.txt"}}}),
            );
        }
    }
    for s in &mut servers {
        for _ in 0..calls / 2 {
            let r = s.recv();
            assert_eq!(r["result"]["isError"], json!(false), "{r}");
        }
    }
    for s in servers {
        assert!(s.close_and_wait().success());
    }
    let store = ws.path().join(".filesystem");
    let log = store.join(".calls.jsonl");
    let rotated: Vec<_> = (1..=4)
        .map(|n| store.join(format!(".calls.jsonl.{n}")))
        .filter(|p| p.exists())
        .collect();
    assert!(!rotated.is_empty(), "the log was never rotated");
    assert!(!store.join(".calls.jsonl.5").exists());
    // Every file stays near the limit (one batch of lines past it at most), every line is whole,
    // and no line was lost or written twice.
    let mut total = 0;
    for p in rotated.iter().chain([&log]) {
        let size = std::fs::metadata(p).expect("size").len();
        assert!(size < limit + 64 * 1024, "{} is {size} bytes", p.display());
        total += json_lines(p).len();
    }
    assert_eq!(total, calls as usize);
    let section = report(&[&log]);
    assert_eq!(section["total"]["calls"], json!(calls));
    assert_eq!(section["inputs"]["files"], json!(rotated.len() + 1));
    // Naming a rotated file as well does not count it twice.
    let section = report(&[&log, &rotated[0]]);
    assert_eq!(section["total"]["calls"], json!(calls));
}

#[test]
fn only_the_documented_number_of_rotated_files_is_kept() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("hello.txt"), "hello\n").expect("write");
    let mut cmd = command();
    cmd.arg("--root")
        .arg(ws.path())
        .env("FILESYSTEM_CALL_LOG_ROTATE_BYTES", "512");
    let mut s = Session::from_command(cmd);
    s.initialize("2025-11-25");
    for id in 2..60 {
        let r = s.call(id, "read_text_file", json!({"path": "hello.txt"}));
        assert_eq!(r["isError"], json!(false), "{r}");
    }
    assert!(s.close_and_wait().success());
    let store = ws.path().join(".filesystem");
    for n in 1..=4 {
        assert!(store.join(format!(".calls.jsonl.{n}")).exists(), ".{n}");
    }
    assert!(!store.join(".calls.jsonl.5").exists());
    let section = report(&[&store.join(".calls.jsonl")]);
    let kept = section["total"]["calls"].as_u64().expect("calls");
    assert!(kept > 0 && kept < 58, "{kept}");
}

#[test]
fn a_fifo_named_as_a_log_is_refused_by_report_and_the_server_keeps_serving() {
    let dir = temp_dir();
    let fifo = dir.path().join("calls.jsonl");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let out = command()
        .args(["report", "--log"])
        .arg(&fifo)
        .output()
        .expect("report");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("FIFO"), "{err}");

    let mut s = Session::start(&["--call-log", fifo.to_str().expect("utf8")]);
    s.initialize("2025-11-25");
    let r = s.call(2, "read_text_file", json!({"path": "hello.txt"}));
    assert_eq!(r["isError"], json!(false), "{r}");
    assert!(s.close_and_wait().success());
}

#[test]
fn a_daemon_keeps_a_bounded_number_of_logs_open_and_loses_no_line() {
    let (_base_dir, base) = canonical_temp_dir();
    let roots: Vec<_> = (0..80)
        .map(|i| {
            let r = base.join(format!("r{i}"));
            std::fs::create_dir_all(&r).expect("mkdir");
            std::fs::write(r.join("hello.txt"), "hello\n").expect("write");
            r
        })
        .collect();
    let mut cmd = command();
    cmd.arg("--server")
        .arg("--allow-root")
        .arg(&base)
        .env_remove("FILESYSTEM_ALLOW_ROOTS")
        .env_remove("FILESYSTEM_ROOT");
    let mut s = Session::from_command(cmd);
    s.initialize("2025-11-25");
    let mut id = 2;
    // Twice round more roots than the log keeps open: every log is closed and reopened.
    for _ in 0..2 {
        for r in &roots {
            let reply = s.call(
                id,
                "read_text_file",
                json!({"root": r.to_str().expect("utf8"), "path": "hello.txt"}),
            );
            assert_eq!(reply["isError"], json!(false), "{reply}");
            id += 1;
        }
    }
    assert!(s.close_and_wait().success());
    for r in &roots {
        let lines = json_lines(&r.join(".filesystem/.calls.jsonl"));
        assert_eq!(lines.len(), 2, "{}", r.display());
    }
}
