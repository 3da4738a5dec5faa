#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `meta.steps` of `shelpa_pipe` as recorded (issue #14, item 4): each step's `command` is its
//! stage as the model wrote it, and its `output_size` is the byte count of what it wrote, for
//! every stage, including two external stages joined through the server's splice relay. The
//! relay must not change what a pipeline does: `head` still stops its upstream with SIGPIPE, a
//! timeout still kills every stage, and no descriptor is left behind.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use test_support::mcp::{text, Session};
use test_support::temp::temp_dir;

/// A `--legacy-pipe` server on `root`.
struct Pipe {
    s: Session,
    next_id: i64,
}

impl Pipe {
    fn start(root: &Path, extra: &[&str]) -> Pipe {
        let mut flags = vec!["--legacy-pipe", "--no-call-log"];
        flags.extend_from_slice(extra);
        let mut s = Session::start_in(root, &flags);
        s.initialize("2025-06-18");
        Pipe { s, next_id: 10 }
    }

    /// Runs `command`; returns whether it succeeded and the result's JSON body.
    fn run(&mut self, command: &str) -> (bool, Value) {
        self.next_id += 1;
        let result = self
            .s
            .call(self.next_id, "shelpa_pipe", json!({ "command": command }));
        let body: Value = serde_json::from_str(&text(&result))
            .unwrap_or_else(|e| panic!("not JSON ({e}): {result}"));
        (result["isError"] != json!(true), body)
    }

    fn ok(&mut self, command: &str) -> Value {
        let (ok, body) = self.run(command);
        assert!(ok, "{command}: {body}");
        body
    }

    /// How many descriptors the server holds open.
    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.s.child.id()))
            .expect("server fd dir")
            .count()
    }
}

fn steps(body: &Value) -> &Vec<Value> {
    body["meta"]["steps"].as_array().expect("meta.steps")
}

fn commands(body: &Value) -> Vec<String> {
    steps(body)
        .iter()
        .map(|s| s["command"].as_str().expect("command text").to_string())
        .collect()
}

fn sizes(body: &Value) -> Vec<u64> {
    steps(body)
        .iter()
        .map(|s| {
            s["output_size"]
                .as_u64()
                .unwrap_or_else(|| panic!("output_size is not an integer: {s}"))
        })
        .collect()
}

/// Runs `argv` the way a stage runs (cleared environment, same locale) on `input`, in `dir`.
fn run_tool(dir: &Path, argv: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{} is needed for this test: {e}", argv[0]));
    let mut stdin = child.stdin.take().expect("stdin");
    let data = input.to_vec();
    // Fed from a thread: a tool may write before it has read everything.
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("tool output");
    feeder.join().expect("feeder");
    out.stdout
}

#[test]
fn each_step_is_its_stage_as_written() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("x.txt"), "a|b one\nc two\na|b three\n").expect("write");
    std::fs::create_dir(ws.path().join("sub")).expect("mkdir");
    let mut p = Pipe::start(ws.path(), &[]);

    // A quoted `|` stays in its stage; inner spaces, tabs and quotes are kept; the whitespace
    // around a stage is not part of it.
    let body = p.ok("  rg  'a|b'\tx.txt |  awk '{print $2}'  |sort\t-r \"-u\"  ");
    assert_eq!(body["stdout"], "three\none\n", "{body}");
    assert_eq!(
        commands(&body),
        ["rg  'a|b'\tx.txt", "awk '{print $2}'", "sort\t-r \"-u\""]
    );
    let body = p.ok(r#"rg -c a\|b x.txt|tail -n 1"#);
    assert_eq!(commands(&body), [r#"rg -c a\|b x.txt"#, "tail -n 1"]);

    // Navigation and the built-in `ls` report their stage too.
    let body = p.ok("cd   sub");
    assert_eq!(commands(&body), ["cd   sub"]);
    let body = p.ok(" pwd ");
    assert_eq!(commands(&body), ["pwd"]);
    let body = p.ok("ls  -a ..");
    assert_eq!(commands(&body), ["ls  -a .."]);
    assert_eq!(
        sizes(&body),
        [body["stdout"].as_str().expect("text").len() as u64]
    );
}

#[test]
fn every_stage_reports_the_bytes_it_wrote() {
    let ws = temp_dir();
    // About 5 MB, so the first junction passes its pipe-growing threshold; one line in 997
    // holds `needle`, so what reaches `sort` is small and `head` reads it in one go.
    let mut log = String::new();
    for i in 0..120_000u32 {
        let tag = if i % 997 == 0 { "needle" } else { "hay" };
        log.push_str(&format!(
            "2026-01-01T00:00:{:02}Z {tag} k{} {i} padding-padding-padding\n",
            i % 60,
            i % 13
        ));
    }
    std::fs::write(ws.path().join("f.log"), &log).expect("write");
    let mut p = Pipe::start(ws.path(), &[]);

    let body = p.ok("tail -n 100000 f.log | rg needle | awk '{print $3, $4}' | sort | head -n 2");
    let dir = ws.path();
    let tail = run_tool(dir, &["tail", "-n", "100000", "f.log"], b"");
    let rg = run_tool(dir, &["rg", "--no-config", "needle"], &tail);
    let awk = run_tool(dir, &["awk", "{print $3, $4}"], &rg);
    let sort = run_tool(dir, &["sort"], &awk);
    let head = run_tool(dir, &["head", "-n", "2"], &sort);
    assert!(tail.len() > 4 << 20, "the input should stream megabytes");
    assert_eq!(body["stdout"], String::from_utf8_lossy(&head).as_ref());
    let expected: Vec<u64> = [&tail, &rg, &awk, &sort, &head]
        .iter()
        .map(|b| b.len() as u64)
        .collect();
    assert_eq!(sizes(&body), expected, "{body}");
    for s in steps(&body) {
        assert_eq!(s["exit_code"], 0, "{s}");
        assert_eq!(s["truncated"], false, "{s}");
    }

    // Stages on both sides of the built-in tee are counted as well.
    let body = p.ok("awk 'NR % 20000 == 0' f.log | tee kept.txt | wc -l");
    let awk = run_tool(dir, &["awk", "NR % 20000 == 0", "f.log"], b"");
    let n = awk.len() as u64;
    assert_eq!(body["stdout"], "6\n");
    assert_eq!(sizes(&body), [n, n, 2]);
}

#[test]
fn head_still_stops_a_large_upstream_promptly() {
    let ws = temp_dir();
    let line = "0123456789".repeat(10) + "\n";
    let big = line.repeat(200_000);
    std::fs::write(ws.path().join("big.txt"), &big).expect("write");
    let mut p = Pipe::start(ws.path(), &["--timeout", "60"]);

    // An upstream that never ends by itself: only SIGPIPE through the relay stops it.
    let started = Instant::now();
    let body = p.ok(r#"awk 'BEGIN { while (1) print "y" }' | tr y z | head -n 1"#);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "head did not stop its upstream"
    );
    assert_eq!(body["stdout"], "z\n");
    let st = steps(&body);
    assert_eq!(st[0]["exit_code"], 141, "{body}");
    assert_eq!(st[1]["exit_code"], 141, "{body}");
    let s = sizes(&body);
    // Everything tr wrote it first read from awk; head wrote its one line.
    assert!(s[0] >= s[1] && s[1] >= 2 && s[2] == 2, "{s:?}");

    // A large file: tail is cut off long before its end.
    let body = p.ok("tail -n 200000 big.txt | head -1");
    assert_eq!(body["stdout"], line);
    let st = steps(&body);
    assert_eq!(st[0]["exit_code"], 141, "{body}");
    let s = sizes(&body);
    assert!(
        s[0] >= line.len() as u64 && s[0] < big.len() as u64,
        "{s:?}"
    );
    assert_eq!(s[1], line.len() as u64);
}

#[test]
fn a_timeout_still_kills_every_stage_and_counts_what_they_wrote() {
    let ws = temp_dir();
    let marker = format!("steps-timeout-{}", std::process::id());
    let mut p = Pipe::start(ws.path(), &["--timeout", "2"]);
    let command = format!(
        r#"awk 'BEGIN {{ m = "{marker}"; while (1) print "y" }}' | awk '{{ n++ }} END {{ print n }}' | wc -c"#
    );
    let started = Instant::now();
    let (ok, body) = p.run(&command);
    assert!(!ok);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(body["error"]["reason"], "TIMEOUT", "{body}");
    let st = steps(&body);
    assert_eq!(st[0]["exit_code"], 137, "{body}");
    assert_eq!(st[1]["exit_code"], 137, "{body}");
    let s = sizes(&body);
    // The producer streamed until it was killed; the counter never printed its END line.
    assert!(s[0] > 0 && s[1] == 0, "{s:?}");
    let left: Vec<_> = test_support::procs::proc_entries()
        .into_iter()
        .filter(|(_, dir)| {
            std::fs::read(dir.join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
        })
        .collect();
    assert!(left.is_empty(), "a stage outlived its call: {left:?}");
}

#[test]
fn junctions_leave_no_descriptor_behind() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("f.txt"), "b\na\nc\n".repeat(100_000)).expect("write");
    // The endless pipeline must reach the limit and the others must not: they take well under a
    // second even on a loaded machine, so 5 s leaves them room.
    let mut p = Pipe::start(ws.path(), &["--timeout", "5"]);
    // A first call opens whatever the server keeps for the session (the fence, the tools).
    p.ok("tail -n 1 f.txt | wc -l");
    let before = p.open_fds();
    for _ in 0..3 {
        p.ok("tail -n 300000 f.txt | sort | tr a-c x-z | wc -c");
        p.ok("tail -n 300000 f.txt | sort | head -n 1");
        let (ok, _) = p.run(r#"awk 'BEGIN { while (1) print "y" }' | tr y n | wc -l"#);
        assert!(!ok, "the endless pipeline should time out");
    }
    assert_eq!(p.open_fds(), before, "the server leaks descriptors");
}
