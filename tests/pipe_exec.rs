#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The legacy pipe mode's execution, tee, mirror and session, through the real binary and the
//! real tools.

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::{initialize, initialized, tools_call, Session};
use test_support::temp::TempRoot;
use test_support::temp::{canonical_temp_dir, temp_dir};

/// A canonical temporary workspace, with this file's way to run the pipe tools in it.
struct Ws(TempRoot);

impl std::ops::Deref for Ws {
    type Target = TempRoot;

    fn deref(&self) -> &TempRoot {
        &self.0
    }
}

impl Ws {
    fn new() -> Ws {
        Ws(TempRoot::new())
    }

    /// Runs one tool call with `filesystem --legacy-pipe call`; returns (ok, result JSON).
    fn call_with(&self, tool: &str, args: Value, flags: &[&str]) -> (bool, Value) {
        let out = command()
            .arg("--legacy-pipe")
            .args(flags)
            .args(["call", tool, &args.to_string(), "--root"])
            .arg(&self.root)
            .env("SHELPA_TEST_SECRET", "hunter2")
            .stdin(Stdio::null())
            .output()
            .expect("run binary");
        let text = if out.status.success() {
            String::from_utf8_lossy(&out.stdout).into_owned()
        } else {
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        let value: Value =
            serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        (out.status.success(), value)
    }

    fn pipe(&self, command: &str) -> (bool, Value) {
        self.call_with("shelpa_pipe", json!({ "command": command }), &[])
    }

    fn pipe_ok(&self, command: &str) -> Value {
        let (ok, v) = self.pipe(command);
        assert!(ok, "{command}: {v}");
        v
    }
}

fn reason(v: &Value) -> &str {
    v["error"]["reason"].as_str().unwrap_or("")
}

/// Splits a mirror into its separator lines' kinds and ids, checking each separator's format.
fn separators(mirror: &str) -> Vec<(String, u64)> {
    let re = regex::Regex::new(
        r"^--- shelpa:(overwrite|baseline) ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ record_id=(\d+) ---$",
    )
    .expect("regex");
    mirror
        .lines()
        .filter(|l| l.starts_with("--- shelpa:"))
        .map(|l| {
            let c = re
                .captures(l)
                .unwrap_or_else(|| panic!("bad separator: {l}"));
            (c[1].to_string(), c[2].parse().expect("id"))
        })
        .collect()
}

/// Pids of processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("proc").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(marker) {
                found.push(name);
            }
        }
    }
    found
}

fn unique_marker(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    format!("shelpa-{tag}-{}-{nanos}", std::process::id())
}

#[test]
fn seed_examples_run_as_real_pipelines() {
    let ws = Ws::new();
    let mut log = String::new();
    for i in 0..150 {
        let level = if i % 3 == 0 { "ERROR" } else { "INFO" };
        log.push_str(&format!("2026-01-01 {level} svc{} message {i}\n", i % 4));
    }
    ws.write("app.log", &log);
    ws.write("src/main.rs", "fn main() {}\n");
    ws.write("src/lib.rs", "\n");
    ws.write("src/notes.txt", "\n");
    ws.write("Cargo.toml", "[package]\n");
    ws.write("sub/x.toml", "\n");

    let v = ws.pipe_ok(r#"tail -n 100 app.log | rg "ERROR" | awk '{print $3}' | sort -u"#);
    assert_eq!(v["stdout"], "svc0\nsvc1\nsvc2\nsvc3\n");
    let steps = v["meta"]["steps"].as_array().expect("steps");
    let names: Vec<&str> = steps.iter().filter_map(|s| s["command"].as_str()).collect();
    // Each step is the stage as written (issue #14, item 4).
    assert_eq!(
        names,
        [
            "tail -n 100 app.log",
            r#"rg "ERROR""#,
            "awk '{print $3}'",
            "sort -u"
        ]
    );
    for s in steps {
        assert_eq!(s["exit_code"], 0);
        assert_eq!(s["truncated"], false);
        assert!(s["execution_time_ms"].is_u64());
    }
    assert_eq!(steps[3]["output_size"], 20);
    assert_eq!(v["meta"]["tee"], Value::Null);

    let v = ws.pipe_ok(r#"ls src | rg "\.rs$""#);
    assert_eq!(v["stdout"], "lib.rs\nmain.rs\n");

    let v = ws.pipe_ok(r#"fd "\.toml$" | head -5"#);
    let mut lines: Vec<&str> = v["stdout"].as_str().expect("text").lines().collect();
    lines.sort();
    assert_eq!(lines, ["Cargo.toml", "sub/x.toml"]);
}

#[test]
fn rg_without_a_match_is_not_a_failure() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    let v = ws.pipe_ok("rg nothing-here a.txt");
    assert_eq!(v["stdout"], "");
    assert_eq!(v["meta"]["steps"][0]["exit_code"], 1);
}

#[test]
fn a_failing_last_stage_reports_its_exit_code_stderr_and_partial_output() {
    let ws = Ws::new();
    ws.write("data.txt", "{\"a\": 1}\nnot json\n");
    let (ok, v) = ws.pipe("tail -n 2 data.txt | jq -c .");
    assert!(!ok);
    assert_eq!(v["error"]["code"], "EXEC_FAILED");
    assert_eq!(reason(&v), "NONZERO_EXIT");
    assert_ne!(v["error"]["exit_code"], 0);
    let stderr = v["error"]["stderr"].as_str().expect("stderr");
    assert!(stderr.contains("parse error"), "{stderr}");
    assert_eq!(v["stdout"], "{\"a\":1}\n");
    assert_eq!(v["meta"]["steps"][1]["command"], "jq -c .");
}

#[test]
fn a_stage_killed_by_sigpipe_is_not_a_failure() {
    let ws = Ws::new();
    let v = ws.pipe_ok(r#"awk 'BEGIN { while (1) print "y" }' | head -1"#);
    assert_eq!(v["stdout"], "y\n");
    assert_eq!(v["meta"]["steps"][0]["exit_code"], 141);
    assert_eq!(v["meta"]["steps"][1]["exit_code"], 0);
}

#[test]
fn the_output_cap_truncates_as_a_success_and_stops_the_producer() {
    let ws = Ws::new();
    // The output cap, not the result budget (lifted here), is what this is about.
    let (ok, v) = ws.call_with(
        "shelpa_pipe",
        json!({"command": r#"awk 'BEGIN { while (1) print "0123456789abcdef" }' | head -n 1000000"#}),
        &["--max-result-bytes", "1000000000"],
    );
    assert!(ok, "{v}");
    assert_eq!(v["stdout"].as_str().expect("text").len(), 1024 * 1024);
    let last = &v["meta"]["steps"][1];
    assert_eq!(last["truncated"], true);
    assert_eq!(last["output_size"], 1024 * 1024);
}

#[test]
fn a_timeout_kills_every_stage_and_reports_what_was_produced() {
    let ws = Ws::new();
    let marker = unique_marker("timeout");
    let command = format!(
        r#"awk 'BEGIN {{ m = "{marker}"; while (1) {{}} }}' | awk 'BEGIN {{ m = "{marker}"; print "started"; fflush() }} {{ print }}'"#
    );
    let (ok, v) = ws.call_with(
        "shelpa_pipe",
        json!({ "command": command }),
        // Long enough for the second stage to start on a loaded machine.
        &["--timeout", "3"],
    );
    assert!(!ok);
    assert_eq!(v["error"]["code"], "EXEC_FAILED");
    assert_eq!(reason(&v), "TIMEOUT");
    assert_eq!(v["stdout"], "started\n");
    assert_eq!(v["meta"]["steps"][0]["exit_code"], 137);
    assert_eq!(v["meta"]["steps"][1]["exit_code"], 137);
    assert!(
        processes_with(&marker).is_empty(),
        "a stage outlived its call"
    );
}

#[test]
fn stages_do_not_see_the_server_environment() {
    let ws = Ws::new();
    let (ok, v) =
        ws.pipe(r#"awk 'BEGIN { print ENVIRON["SHELPA_TEST_SECRET"] "|" ENVIRON["HOME"] }'"#);
    if ok {
        let out = v["stdout"].as_str().expect("text");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("/root"), "{out}");
    } else {
        // The policy may refuse ENVIRON outright, which protects the environment too.
        assert_eq!(v["error"]["code"], "GUARD_VIOLATION", "{v}");
    }
}

#[test]
fn tee_overwrites_appends_and_mirrors_in_the_exact_format() {
    let ws = Ws::new();
    ws.write("app.log", "ERROR one\nINFO two\nERROR three\n");
    let v = ws.pipe_ok("rg ERROR app.log | tee out.txt");
    assert_eq!(v["stdout"], "ERROR one\nERROR three\n");
    assert_eq!(
        v["meta"]["tee"],
        json!({"paths": ["out.txt"], "bytes": 22, "mode": "overwrite", "mirror": [".shelpa/out.txt"], "truncated": false})
    );
    assert_eq!(v["meta"]["steps"][0]["output_size"], 22);
    assert_eq!(v["meta"]["steps"][1]["command"], "tee out.txt");
    assert_eq!(ws.read("out.txt"), "ERROR one\nERROR three\n");

    let v = ws.pipe_ok("rg INFO app.log | tee -a out.txt");
    assert_eq!(v["meta"]["tee"]["mode"], "append");
    assert_eq!(ws.read("out.txt"), "ERROR one\nERROR three\nINFO two\n");

    // A version without a final newline: the next separator starts a new line anyway.
    let (ok, v) = ws.call_with(
        "shelpa_write",
        json!({"path": "out.txt", "content": "no newline"}),
        &[],
    );
    assert!(ok, "{v}");
    let (ok, v) = ws.call_with(
        "shelpa_write",
        json!({"path": "out.txt", "content": "last\n"}),
        &[],
    );
    assert!(ok, "{v}");
    assert_eq!(ws.read("out.txt"), "last\n");

    let mirror = ws.read(".shelpa/out.txt");
    let seps = separators(&mirror);
    assert_eq!(seps.len(), 3, "{mirror}");
    assert!(seps.iter().all(|(kind, _)| kind == "overwrite"));
    assert!(
        seps[0].1 < seps[1].1 && seps[1].1 < seps[2].1,
        "ids increase across processes"
    );
    let lines: Vec<&str> = mirror.lines().collect();
    let body: Vec<&str> = lines
        .iter()
        .filter(|l| !l.starts_with("--- shelpa:"))
        .copied()
        .collect();
    assert_eq!(
        body,
        ["ERROR one", "ERROR three", "INFO two", "no newline", "last"]
    );
    assert!(lines[0].starts_with("--- shelpa:overwrite "));
    assert!(lines[4].starts_with("--- shelpa:overwrite "));
    assert!(lines[6].starts_with("--- shelpa:overwrite "));
    assert!(mirror.ends_with("---\nlast\n"));
    assert!(mirror.contains("\nno newline\n--- shelpa:overwrite "));
}

#[test]
fn the_first_write_to_an_existing_file_records_its_old_content_as_a_baseline() {
    let ws = Ws::new();
    ws.write("notes/todo.txt", "old line 1\nold line 2\n");
    let (ok, v) = ws.call_with(
        "shelpa_write",
        json!({"path": "notes/todo.txt", "content": "new\n"}),
        &[],
    );
    assert!(ok, "{v}");
    assert_eq!(
        v["meta"]["tee"]["mirror"],
        json!([".shelpa/notes/todo.txt"])
    );
    let mirror = ws.read(".shelpa/notes/todo.txt");
    let seps = separators(&mirror);
    assert_eq!(
        seps.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["baseline", "overwrite"]
    );
    let lines: Vec<&str> = mirror.lines().collect();
    assert_eq!(lines[1..3], ["old line 1", "old line 2"]);
    assert_eq!(lines[4], "new");
    assert_eq!(lines.len(), 5);

    // Appending to another pre-existing file: baseline, then the bytes with no separator.
    ws.write("log.txt", "before\n");
    let v = ws.pipe_ok("rg -c before log.txt | tee -a log.txt");
    assert_eq!(v["meta"]["tee"]["mode"], "append");
    let mirror = ws.read(".shelpa/log.txt");
    assert_eq!(separators(&mirror).len(), 1);
    let after_sep = mirror
        .split_once("---\n")
        .map(|(_, b)| b)
        .expect("separator");
    assert_eq!(after_sep, ws.read("log.txt"));
}

#[test]
fn the_approval_gate_refuses_then_accepts_a_confirmed_write() {
    let ws = Ws::new();
    let big: String = (0..500).map(|i| format!("line {i}\n")).collect();
    ws.write("big.txt", &big);
    let (ok, v) = ws.pipe("tail -n 500 big.txt | tee copy.txt");
    assert!(!ok);
    assert_eq!(v["error"]["code"], "GUARD_VIOLATION");
    assert_eq!(reason(&v), "APPROVAL_REQUIRED");
    // The original surface's words are the gate message the design records quote.
    assert_eq!(
        v["error"]["detail"],
        format!(
            "tee would write {} bytes, exceeding the 2048-byte threshold. Re-invoke with confirm_oversize=true to proceed.",
            big.len()
        )
    );
    assert!(!v["error"]["suggestion"].as_str().expect("s").is_empty());
    assert!(!ws.root.join("copy.txt").exists());
    assert!(
        !ws.root.join(".shelpa").exists(),
        "nothing written, mirror included"
    );

    let (ok, v) = ws.call_with(
        "shelpa_pipe",
        json!({"command": "tail -n 500 big.txt | tee copy.txt", "confirm_oversize": true}),
        &[],
    );
    assert!(ok, "{v}");
    assert_eq!(ws.read("copy.txt"), big);

    let (ok, v) = ws.call_with(
        "shelpa_write",
        json!({"path": "w.txt", "content": big}),
        &[],
    );
    assert!(!ok);
    assert_eq!(reason(&v), "APPROVAL_REQUIRED");
    assert!(!ws.root.join("w.txt").exists());
}

#[test]
fn writes_beyond_the_hard_limit_are_cut_and_reported() {
    let ws = Ws::new();
    let line = "abcdefghijklmnopqrstuvwxyz0123456789\n";
    ws.write("huge.txt", line.repeat(50_000));
    let (ok, v) = ws.call_with(
        "shelpa_pipe",
        json!({"command": "tail -n +1 huge.txt | tee cut.txt", "confirm_oversize": true}),
        // tee's limits, not the result budget (lifted here; tests/result_budget.rs keeps it).
        &["--max-result-bytes", "1000000000"],
    );
    assert!(ok, "{v}");
    assert_eq!(v["meta"]["tee"]["truncated"], true);
    assert_eq!(v["meta"]["tee"]["bytes"], 1_048_576);
    let written = std::fs::metadata(ws.root.join("cut.txt"))
        .expect("written")
        .len();
    assert_eq!(written, 1_048_576);
    assert_eq!(v["stdout"].as_str().expect("text").len(), 1_048_576);
}

#[test]
fn unsafe_write_targets_are_refused() {
    let ws = Ws::new();
    ws.write("real.txt", "x\n");
    std::os::unix::fs::symlink("real.txt", ws.root.join("link.txt")).expect("symlink");
    std::fs::hard_link(ws.root.join("real.txt"), ws.root.join("hard.txt")).expect("hardlink");
    std::fs::create_dir(ws.root.join(".git")).expect("mkdir");

    let write = |path: &str, append: bool| {
        ws.call_with(
            "shelpa_write",
            json!({"path": path, "content": "y\n", "append": append}),
            &[],
        )
    };
    let (ok, v) = write("link.txt", false);
    assert!(!ok);
    assert_eq!(reason(&v), "DISALLOWED_TARGET");
    let (ok, v) = write("hard.txt", true);
    assert!(!ok);
    assert_eq!(reason(&v), "DISALLOWED_TARGET");
    let (ok, v) = write(".git/config", false);
    assert!(!ok);
    assert_eq!(reason(&v), "PROTECTED_PATH");
    let (ok, v) = write(".shelpa/real.txt", false);
    assert!(!ok);
    assert_eq!(reason(&v), "PROTECTED_PATH");
    let (ok, v) = write("../outside.txt", false);
    assert!(!ok);
    assert_eq!(reason(&v), "PATH_ESCAPE");
    assert_eq!(ws.read("real.txt"), "x\n");
}

#[test]
fn a_symlinked_mirror_is_refused_and_nothing_is_written() {
    let ws = Ws::new();
    let outside = temp_dir();
    std::os::unix::fs::symlink(outside.path(), ws.root.join(".shelpa")).expect("symlink");
    let (ok, v) = ws.call_with(
        "shelpa_write",
        json!({"path": "a.txt", "content": "y\n"}),
        &[],
    );
    assert!(!ok);
    assert_eq!(v["error"]["code"], "EXEC_FAILED");
    assert!(!ws.root.join("a.txt").exists());
    assert_eq!(std::fs::read_dir(outside.path()).expect("dir").count(), 0);
}

#[test]
fn the_builtin_ls_hides_the_mirror() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    ws.write("dir/b.txt", "x\n");
    let (ok, _) = ws.call_with(
        "shelpa_write",
        json!({"path": "c.txt", "content": "y\n"}),
        &[],
    );
    assert!(ok);
    let v = ws.pipe_ok("ls");
    assert_eq!(v["stdout"], "a.txt\nc.txt\ndir/\n");
}

/// A server speaking MCP over stdin/stdout.
struct Mcp {
    s: Session,
}

impl Mcp {
    fn start(root: &Path) -> Mcp {
        let mut mcp = Mcp {
            s: Session::start_in(root, &["--legacy-pipe"]),
        };
        mcp.send(initialize(0, "2025-06-18", "pipe-exec-test"));
        let init = mcp.response(0);
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        mcp.send(initialized());
        mcp
    }

    fn send(&mut self, msg: Value) {
        self.s.send(msg);
    }

    /// Reads messages until the response to `id`; panics if a response to any other id in
    /// `forbidden` shows up first.
    fn response_excluding(&mut self, id: u64, forbidden: &[u64]) -> Value {
        loop {
            let msg = self.s.recv();
            if let Some(got) = msg["id"].as_u64() {
                assert!(
                    !forbidden.contains(&got),
                    "unexpected response to {got}: {msg}"
                );
                if got == id {
                    return msg;
                }
            }
        }
    }

    fn response(&mut self, id: u64) -> Value {
        self.response_excluding(id, &[])
    }

    fn pipe(&mut self, id: u64, args: Value) -> Value {
        let id_number = i64::try_from(id).expect("small id");
        self.send(tools_call(id_number, "shelpa_pipe", args));
        self.response(id)["result"].clone()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.s.child.kill();
        let _ = self.s.child.wait();
    }
}

#[test]
fn cd_persists_for_the_session_and_cwd_overrides_one_call() {
    let ws = Ws::new();
    ws.write("src/inner/f.txt", "x\n");
    ws.write("file.txt", "x\n");
    let root = ws.root.display().to_string();
    let mut mcp = Mcp::start(&ws.root);

    let r = mcp.pipe(1, json!({"command": "pwd"}));
    assert_eq!(r["structuredContent"]["stdout"], format!("{root}\n"));
    let r = mcp.pipe(2, json!({"command": "cd src"}));
    assert_eq!(r["isError"], false, "{r}");
    let r = mcp.pipe(3, json!({"command": "pwd"}));
    assert_eq!(r["structuredContent"]["stdout"], format!("{root}/src\n"));
    let r = mcp.pipe(4, json!({"command": "ls"}));
    assert_eq!(r["structuredContent"]["stdout"], "inner/\n");

    // The override is root-relative and lasts one call.
    let r = mcp.pipe(5, json!({"command": "pwd", "cwd": "src/inner"}));
    assert_eq!(
        r["structuredContent"]["stdout"],
        format!("{root}/src/inner\n")
    );
    let r = mcp.pipe(6, json!({"command": "pwd"}));
    assert_eq!(r["structuredContent"]["stdout"], format!("{root}/src\n"));

    let r = mcp.pipe(7, json!({"command": "pwd", "cwd": "../.."}));
    assert_eq!(r["isError"], true);
    let text = r["content"][0]["text"].as_str().expect("text");
    let err: Value = serde_json::from_str(text).expect("json");
    assert_eq!(reason(&err), "PATH_ESCAPE");

    // cd to a file or outside fails and leaves the session where it was.
    let r = mcp.pipe(8, json!({"command": "cd ../file.txt"}));
    assert_eq!(r["isError"], true);
    let r = mcp.pipe(9, json!({"command": "pwd"}));
    assert_eq!(r["structuredContent"]["stdout"], format!("{root}/src\n"));
}

#[test]
fn cancelling_a_call_kills_its_pipeline() {
    let ws = Ws::new();
    let marker = unique_marker("cancel");
    let mut mcp = Mcp::start(&ws.root);
    let command = format!(r#"awk 'BEGIN {{ m = "{marker}"; while (1) {{}} }}' | wc -l"#);
    mcp.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": "shelpa_pipe", "arguments": {"command": command}}}));
    // Wait until the stage really runs before cancelling it; a stage not seen within a minute
    // means the call never started it, which is a failure, not a reason to wait on.
    let started = std::time::Instant::now();
    while processes_with(&marker).is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the endless stage was never seen running"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    mcp.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 10, "reason": "test"}}),
    );
    // The next call runs on the same worker, so its answer means the pipeline was torn down.
    mcp.send(json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "shelpa_pipe", "arguments": {"command": "pwd"}}}));
    let r = mcp.response_excluding(11, &[10]);
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(
        processes_with(&marker).is_empty(),
        "the cancelled stage survived"
    );
}

#[test]
fn the_help_names_the_tools_commands_and_rules() {
    // The modern surface's help (the original surface's is the recorded text, golden-tested in
    // tests/shelpa_surface.rs).
    let out = command()
        .args(["--legacy-pipe", "--surface", "modern", "--help"])
        .output()
        .expect("run binary");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "shelpa_pipe",
        "shelpa_write",
        "Content-Length",
        "confirm_oversize",
        "tee (built in)",
        "cd DIR",
        "pwd",
        "sed -i",
    ] {
        assert!(help.contains(needle), "help lacks {needle}");
    }
    for command in [
        "tail", "rg", "awk", "sed", "tr", "jq", "wc", "fd", "ls", "head", "sort",
    ] {
        assert!(help.contains(command), "help lacks {command}");
    }
}

#[test]
fn one_tee_can_write_several_files_each_with_its_mirror() {
    let ws = Ws::new();
    ws.write("in.txt", "a\nb\n");
    let v = ws.pipe_ok("tail -n 1 in.txt | tee one.txt two.txt | wc -l");
    assert_eq!(v["stdout"].as_str().expect("text").trim(), "1");
    assert_eq!(v["meta"]["tee"]["paths"], json!(["one.txt", "two.txt"]));
    assert_eq!(
        v["meta"]["tee"]["mirror"],
        json!([".shelpa/one.txt", ".shelpa/two.txt"])
    );
    assert_eq!(ws.read("one.txt"), "b\n");
    assert_eq!(ws.read("two.txt"), "b\n");
    assert!(ws.read(".shelpa/two.txt").ends_with("---\nb\n"));
}

#[test]
fn ignore_files_above_the_workspace_do_not_shape_searches() {
    // The workspace sits inside a repository whose .gitignore (outside the workspace) hides *.log.
    let (tmp, repo) = canonical_temp_dir();
    std::fs::create_dir_all(repo.join(".git")).expect("git dir");
    std::fs::write(repo.join(".gitignore"), "*.log\n").expect("gitignore");
    let ws = Ws(TempRoot::inside(tmp, repo.join("ws")));
    ws.write("a.log", "x\n");
    ws.write("b.txt", "x\n");
    ws.write(".gitignore", "*.tmp\n");
    ws.write("c.tmp", "x\n");
    for command in ["rg -l x | sort", "fd -t f | sort"] {
        let (ok, v) = ws.pipe(command);
        assert!(ok, "{command}: {v}");
        // The workspace's own ignore file applies; the repository's above it does not.
        assert_eq!(v["stdout"], json!("a.log\nb.txt\n"), "{command}");
    }
}

#[test]
fn the_builtin_ls_long_shows_inside_link_targets_but_never_outside_ones() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let (_outside_dir, outside) = canonical_temp_dir();
    std::os::unix::fs::symlink("a.txt", ws.root.join("in-link")).expect("link");
    std::os::unix::fs::symlink(&outside, ws.root.join("out-link")).expect("link");
    std::os::unix::fs::symlink("../../etc/passwd", ws.root.join("rel-out")).expect("link");
    std::os::unix::fs::symlink(".shelpa/x", ws.root.join("state-link")).expect("link");
    let v = ws.pipe_ok("ls -l");
    let out = v["stdout"].as_str().expect("stdout");
    assert!(out.contains("in-link -> a.txt\n"), "{out}");
    assert!(
        out.contains("out-link -> (outside the workspace)\n"),
        "{out}"
    );
    assert!(
        out.contains("rel-out -> (outside the workspace)\n"),
        "{out}"
    );
    assert!(
        out.contains("state-link -> (outside the workspace)\n"),
        "{out}"
    );
    assert!(!out.contains(&outside.display().to_string()), "{out}");
    assert!(!out.contains("passwd"), "{out}");
}

#[test]
fn the_builtin_ls_hides_nested_state_dirs_and_temporaries() {
    let ws = Ws::new();
    ws.write("sub/.shelpa/m", "x\n");
    ws.write("sub/.filesystem/h", "x\n");
    ws.write("sub/.filesystem-tmp-abc123", "half\n");
    ws.write("sub/f.txt", "x\n");
    let v = ws.pipe_ok("ls -a sub");
    assert_eq!(v["stdout"], "f.txt\n");
}

#[test]
fn tee_never_appends_through_a_mirror_hard_linked_to_an_outside_file() {
    let ws = Ws::new();
    let outside = temp_dir();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "secret\n").expect("write");
    std::fs::create_dir_all(ws.root.join(".shelpa")).expect("mkdir");
    std::fs::hard_link(&secret, ws.root.join(".shelpa/f.txt")).expect("link");
    ws.write("in.txt", "data\n");
    for (tool, args) in [
        ("shelpa_write", json!({"path": "f.txt", "content": "x\n"})),
        (
            "shelpa_write",
            json!({"path": "f.txt", "content": "x\n", "append": true}),
        ),
        (
            "shelpa_pipe",
            json!({"command": "head -n 1 in.txt | tee f.txt"}),
        ),
    ] {
        let (ok, v) = ws.call_with(tool, args, &[]);
        assert!(!ok, "{tool}: {v}");
        assert_eq!(v["error"]["reason"], "WRITE_FAILED", "{tool}: {v}");
    }
    assert_eq!(std::fs::read_to_string(&secret).expect("read"), "secret\n");
    assert!(
        !ws.root.join("f.txt").exists(),
        "a write the mirror could not record did not happen"
    );
}

#[test]
fn tee_overwrites_leave_no_temporary_and_use_the_one_scheme() {
    let ws = Ws::new();
    ws.write("f.txt", "old\n");
    let (ok, v) = ws.call_with(
        "shelpa_write",
        json!({"path": "f.txt", "content": "new\n"}),
        &[],
    );
    assert!(ok, "{v}");
    assert_eq!(ws.read("f.txt"), "new\n");
    let names: Vec<String> = std::fs::read_dir(&ws.root)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("tmp")),
        "leftover temporaries: {names:?}"
    );
}

#[test]
fn write_refusals_never_name_the_host_root() {
    let ws = Ws::new();
    ws.write("src/a.txt", "x\n");
    let root = ws.root.display().to_string();
    let mut mcp = Mcp::start(&ws.root);
    let r = mcp.pipe(1, json!({"command": "cd src"}));
    assert_eq!(r["isError"], false, "{r}");
    for (id, path) in [
        (2, "../../outside.txt"),
        (3, "../.shelpa/x"),
        (4, "../.git/hooks/pre-commit"),
        (5, "../.filesystem-tmp-abc123"),
    ] {
        mcp.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "shelpa_write", "arguments": {"path": path, "content": "x"}}}));
        let r = mcp.response(id)["result"].clone();
        assert_eq!(r["isError"], true, "{path}: {r}");
        let text = r["content"][0]["text"].as_str().expect("text");
        assert!(!text.contains(&root), "{path}: {text}");
    }
    assert!(!ws.root.join(".git").exists());
}

#[test]
fn a_stage_never_runs_in_a_directory_swapped_for_an_outside_link() {
    let ws = Ws::new();
    ws.write("a/inside-marker", "x\n");
    let outside = temp_dir();
    std::fs::write(outside.path().join("outside-marker"), "x\n").expect("write");
    let real = ws.root.join("a");
    let parked = ws.root.join("a-parked");
    let link_target = outside.path().to_path_buf();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (real, parked) = (real.clone(), parked.clone());
        std::thread::spawn(move || {
            // Another process on the same root: `a` keeps turning into a link to the outside
            // and back, between any two system calls of the server.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if std::fs::rename(&real, &parked).is_ok() {
                    let _ = std::os::unix::fs::symlink(&link_target, &real);
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&real);
                    let _ = std::fs::rename(&parked, &real);
                }
                std::thread::yield_now();
            }
        })
    };
    let mut mcp = Mcp::start(&ws.root);
    let mut ran_inside = 0;
    for id in 1..=40 {
        for command in ["ls | sort", "ls -l"] {
            let r = mcp.pipe(id, json!({"command": command, "cwd": "a"}));
            let text = r.to_string();
            assert!(!text.contains("outside-marker"), "{command}: {text}");
            if text.contains("inside-marker") {
                ran_inside += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().expect("swapper");
    // Calls that found `a` swapped failed; the rest listed the real directory.
    assert!(ran_inside > 0 || std::fs::symlink_metadata(&real).is_ok());
}

#[test]
fn a_nul_byte_in_a_command_is_a_parse_error_guard_violation() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    for command in [
        "cat a.txt\0",
        "cat a\0.txt | head -1",
        "\0",
        "cd sub\0dir",
        "ls \0",
        "pwd\0",
        "printf x | tee out\0.txt",
    ] {
        let (ok, v) = ws.pipe(command);
        assert!(!ok, "{command:?}: {v}");
        assert_eq!(
            v["error"]["code"],
            json!("GUARD_VIOLATION"),
            "{command:?}: {v}"
        );
        assert_eq!(reason(&v), "PARSE_ERROR", "{command:?}: {v}");
    }
    // The same byte in a path argument (`cwd`, shelpa_write's `path`) is the same refusal.
    for (tool, args) in [
        ("shelpa_pipe", json!({"command": "ls", "cwd": "a\0b"})),
        ("shelpa_write", json!({"path": "a\0b.txt", "content": "x"})),
    ] {
        let (ok, v) = ws.call_with(tool, args.clone(), &[]);
        assert!(!ok, "{args}: {v}");
        assert_eq!(v["error"]["code"], json!("GUARD_VIOLATION"), "{args}: {v}");
        assert_eq!(reason(&v), "PARSE_ERROR", "{args}: {v}");
    }
    assert!(!ws.root.join("out").exists());
    assert!(!ws.root.join("a").exists());
}

/// GNU ls's long format prints where every symlink points; in a pipeline (and whenever the
/// built-in listing does not apply) it would show a link's target outside the workspace, which
/// no result may show. Every spelling that turns the long format on is refused, the built-in
/// `ls -l` on its own still lists the link with its target hidden, and the refusal says so.
#[test]
fn no_pipeline_shows_where_an_outside_symlink_points() {
    let ws = Ws::new();
    ws.write("a.txt", "a\n");
    let outside = temp_dir();
    let secret = outside.path().join("secret-target-dir");
    std::fs::create_dir(&secret).expect("outside dir");
    std::os::unix::fs::symlink(&secret, ws.root.join("out")).expect("symlink");
    let secret = secret.display().to_string();
    let long_spellings = [
        "ls -l | head",
        "ls -la | head",
        "ls -al | sort",
        "ls -1l | head",
        "ls -g | head",
        "ls -o | head",
        "ls -n | head",
        "ls --numeric-uid-gid | head",
        "ls --numeric | head",
        "ls --full-time | head",
        "ls --full | head",
        "ls --format=long | head",
        "ls --format long | head",
        "ls --format=verbose | head",
        "ls --format=l | head",
        "ls --form=verb | head",
        "ls --dired | head",
        "ls -D | head",
        "ls -ltr | tail -n 3",
        "ls -R -l | head",
        "ls -l out | head",
        "ls -l -- . | head",
        "ls . -l | head",
        "ls -lh",
        "ls -lS .",
        "ls -l a.txt out",
        // Refused wherever it stands, even when a later option would switch the format back.
        "ls -l -C | head",
    ];
    for command in long_spellings {
        let (ok, v) = ws.pipe(command);
        let raw = v.to_string();
        assert!(
            !raw.contains(&secret) && !raw.contains("secret-target-dir"),
            "{command} shows where the outside link points: {raw}"
        );
        assert!(!ok, "{command} must be refused: {raw}");
        assert_eq!(reason(&v), "DISALLOWED_OPTION", "{command}: {raw}");
        assert!(
            v["error"]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("built-in listing")),
            "{command}: the refusal must name the built-in listing: {raw}"
        );
    }
    // Formats that are not long still run in a pipeline; the link is listed by name only.
    for command in ["ls | head", "ls --format=commas | head", "ls -F | sort"] {
        let v = ws.pipe_ok(command);
        let raw = v.to_string();
        assert!(raw.contains("out"), "{command}: {raw}");
        assert!(!raw.contains("secret-target-dir"), "{command}: {raw}");
    }
    // The built-in listing, on its own, lists the link and hides where it points.
    for command in ["ls -l", "ls -la", "ls -l1 ."] {
        let v = ws.pipe_ok(command);
        let raw = v.to_string();
        assert!(
            raw.contains("out -> (outside the workspace)"),
            "{command}: {raw}"
        );
        assert!(!raw.contains("secret-target-dir"), "{command}: {raw}");
    }
}

/// `fd -a` prints absolute paths, which start with the workspace's host path; no result shows
/// one. It is refused with the way to get the same list relative to the current directory.
#[test]
fn fd_never_prints_the_workspace_host_path() {
    let ws = Ws::new();
    ws.write("sub/a.txt", "a\n");
    let host = ws.root.display().to_string();
    for command in [
        "fd -a",
        "fd -a . sub",
        "fd --absolute-path a",
        "fd -Ha txt",
        "fd -t f -a | head",
        "fd a sub --absolute-path",
    ] {
        let (ok, v) = ws.pipe(command);
        let raw = v.to_string();
        assert!(
            !raw.contains(&host),
            "{command} shows the workspace's host path: {raw}"
        );
        assert!(!ok, "{command} must be refused: {raw}");
        assert_eq!(reason(&v), "DISALLOWED_OPTION", "{command}: {raw}");
        assert!(
            v["error"]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("relative")),
            "{command}: {raw}"
        );
    }
    let v = ws.pipe_ok("fd -t f a");
    let raw = v.to_string();
    assert!(raw.contains("sub/a.txt") && !raw.contains(&host), "{raw}");
}

/// A path operand above the stage's directory is handed to the tool relative to it (`../a.txt`),
/// never as an absolute path: tools print the paths they are given, and an absolute one starts
/// with the workspace's host path, which no result shows.
#[test]
fn operands_above_the_session_directory_never_print_the_host_path() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    ws.write("sub/deeper/b.txt", "hello\n");
    ws.write("other/c.txt", "hello\n");
    let host = ws.root.display().to_string();
    for (cwd, command, shows) in [
        ("sub", "rg hello ..", "../a.txt"),
        ("sub", "fd . ..", "../other/c.txt"),
        ("sub", "wc -l ../a.txt deeper/b.txt", "../a.txt"),
        ("sub/deeper", "rg -l hello ../../other", "../../other/c.txt"),
        (
            "sub/deeper",
            "rg -c hello ../../a.txt b.txt",
            "../../a.txt:1",
        ),
        (
            "sub",
            "rg -l hello ../other ../a.txt | sort",
            "../other/c.txt",
        ),
        ("other", "rg --files ..", "../sub/deeper/b.txt"),
    ] {
        let (ok, v) = ws.call_with(
            "shelpa_pipe",
            json!({ "command": command, "cwd": cwd }),
            &[],
        );
        let raw = v.to_string();
        assert!(ok, "{command} (cwd {cwd}): {raw}");
        assert!(
            !raw.contains(&host),
            "{command} (cwd {cwd}) shows the workspace's host path: {raw}"
        );
        assert!(
            v["stdout"].as_str().is_some_and(|s| s.contains(shows)),
            "{command} (cwd {cwd}) should show {shows}: {raw}"
        );
    }
}

/// `fd --full-path` matches its pattern against the absolute path, so whether a pattern such as
/// `^/tmp/x/` finds anything tells where the workspace is on the host, one guess at a time. It is
/// refused with the way to filter the relative paths instead.
#[test]
fn fd_full_path_cannot_probe_the_workspace_host_path() {
    let ws = Ws::new();
    ws.write("sub/a.txt", "a\n");
    let right = format!("^{}/", regex::escape(&ws.root.display().to_string()));
    let wrong = format!("^{}-not-it/", regex::escape(&ws.root.display().to_string()));
    for pattern in [&right, &wrong] {
        for command in [
            format!("fd -p '{pattern}'"),
            format!("fd --full-path '{pattern}' sub"),
            format!("fd -Hp '{pattern}' | head"),
        ] {
            let (ok, v) = ws.pipe(&command);
            let raw = v.to_string();
            assert!(!ok, "{command} must be refused: {raw}");
            assert_eq!(reason(&v), "DISALLOWED_OPTION", "{command}: {raw}");
            assert!(
                v["error"]["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("host path")),
                "{command}: {raw}"
            );
        }
    }
}
