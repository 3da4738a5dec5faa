#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Runaway pipelines in `--legacy-pipe` mode: jobs that never end, never stop writing, spin, or
//! flood stderr. Each call must come back (a `TIMEOUT` error or a truncated success), leave no
//! process of its group behind, and leave the server serving. The server's own memory must stay
//! bounded while a large stream passes through it.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::text_json;
use test_support::mcp::{text, Session};
use test_support::procs::peak_rss_kib;
use test_support::temp::temp_dir;

/// Short enough to keep the file fast, long enough for a loaded 2-core machine to start a stage.
const TIMEOUT_SECS: &str = "2";

/// One line of `/proc/<pid>/stat`, reduced to what these tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProcStat {
    pid: i32,
    state: char,
    ppid: i32,
    pgid: i32,
}

/// Every process visible in `/proc` (processes that vanish mid-scan are skipped).
fn processes() -> Vec<ProcStat> {
    let mut out = Vec::new();
    for (pid, dir) in test_support::procs::proc_entries() {
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // The command name is in parentheses and may itself contain spaces or ')'.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.len() < 3 {
            continue;
        }
        let (Some(state), Ok(ppid), Ok(pgid)) = (
            fields[0].chars().next(),
            fields[1].parse::<i32>(),
            fields[2].parse::<i32>(),
        ) else {
            continue;
        };
        out.push(ProcStat {
            pid,
            state,
            ppid,
            pgid,
        });
    }
    out
}

/// Watches the server's children while a call runs, collecting the process groups they are in.
struct Watcher {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<BTreeSet<i32>>>,
    handle: std::thread::JoinHandle<()>,
}

impl Watcher {
    fn start(server: i32) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let (s, g) = (stop.clone(), seen.clone());
        // A child caught between fork and its own setpgid is still in the server's group (which
        // is the test harness's); that group is not the pipeline's.
        let own_group = processes()
            .into_iter()
            .find(|p| p.pid == server)
            .map(|p| p.pgid);
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                for p in processes()
                    .into_iter()
                    .filter(|p| p.ppid == server && Some(p.pgid) != own_group)
                {
                    g.lock().expect("seen").insert(p.pgid);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Watcher { stop, seen, handle }
    }

    /// The process groups of every child seen.
    fn finish(self) -> BTreeSet<i32> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().expect("watcher");
        let seen = self.seen.lock().expect("seen").clone();
        seen
    }
}

/// A `--legacy-pipe` server with a short time limit.
struct Pipe {
    s: Session,
    next_id: i64,
}

impl Pipe {
    fn start(root: &Path, extra: &[&str]) -> Pipe {
        Pipe::start_with_timeout(root, TIMEOUT_SECS, extra)
    }

    /// For a pipeline that must finish: on a loaded machine it may need more than the short limit.
    fn start_with_timeout(root: &Path, timeout_secs: &str, extra: &[&str]) -> Pipe {
        let mut flags = vec!["--legacy-pipe", "--timeout", timeout_secs, "--no-call-log"];
        flags.extend_from_slice(extra);
        let mut s = Session::start_in(root, &flags);
        s.initialize("2025-06-18");
        Pipe { s, next_id: 10 }
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.s.child.id()).expect("pid fits")
    }

    /// Runs `args` through `shelpa_pipe`; returns the result and the process groups its stages
    /// ran in.
    fn run(&mut self, args: Value) -> (Value, BTreeSet<i32>) {
        self.next_id += 1;
        let id = self.next_id;
        let watcher = Watcher::start(self.pid());
        let reply = self.s.request(
            id,
            "tools/call",
            json!({"name": "shelpa_pipe", "arguments": args}),
        );
        let groups = watcher.finish();
        assert!(reply.get("error").is_none(), "JSON-RPC error: {reply}");
        (reply["result"].clone(), groups)
    }

    /// The call is over: no child of the server is left (not even a zombie: the server reaps its
    /// stages before answering), and nothing still runs in any group a stage was in.
    fn assert_nothing_left(&self, groups: &BTreeSet<i32>) {
        let server = self.pid();
        let children: Vec<ProcStat> = processes()
            .into_iter()
            .filter(|p| p.ppid == server)
            .collect();
        assert!(
            children.is_empty(),
            "stages outlived their call: {children:?}"
        );
        // Anything a stage spawned is in its group but not the server's child; SIGKILL is
        // asynchronous for those, so give them a moment. A zombie has stopped running.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left: Vec<ProcStat> = processes()
                .into_iter()
                .filter(|p| groups.contains(&p.pgid) && p.state != 'Z')
                .collect();
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "processes of the pipeline's group survived: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server still answers a ping and runs a quick pipeline.
    fn assert_still_serving(&mut self) {
        self.next_id += 1;
        let id = self.next_id;
        let pong = self.s.request(id, "ping", json!({}));
        assert_eq!(pong["result"], json!({}), "{pong}");
        let (result, groups) = self.run(json!({"command": "jq -n '1 + 1'"}));
        assert_ne!(result["isError"], json!(true), "{result}");
        assert_eq!(text_json(&result)["stdout"], "2\n");
        self.assert_nothing_left(&groups);
    }
}

fn assert_timeout(result: &Value) {
    assert_eq!(result["isError"], json!(true), "{result}");
    let b = text_json(result);
    assert_eq!(b["error"]["code"], "EXEC_FAILED", "{b}");
    assert_eq!(b["error"]["reason"], "TIMEOUT", "{b}");
    assert_eq!(b["error"]["limit"], "time", "{b}");
}

#[test]
fn a_producer_that_never_stops_is_cut_at_the_output_cap() {
    let ws = temp_dir();
    // The output cap, not the result budget (lifted here), is what this is about.
    let mut p = Pipe::start(ws.path(), &["--max-result-bytes", "1000000000"]);
    let (result, groups) = p.run(json!({"command": "jq -n 'range(1e18)'"}));
    // Hitting the cap is a success with truncated output; should the cap not be reached in time
    // on a slow machine, the time limit ends it instead. Either way the call returns.
    if result["isError"] == json!(true) {
        assert_timeout(&result);
    } else {
        let b = text_json(&result);
        assert_eq!(b["meta"]["steps"][0]["truncated"], true, "{b}");
        let out = b["stdout"].as_str().expect("stdout");
        assert_eq!(out.len(), 1024 * 1024);
        assert!(out.starts_with("0\n1\n2\n"), "{}", &out[..20]);
    }
    p.assert_nothing_left(&groups);
    p.assert_still_serving();
}

#[test]
fn a_huge_sort_is_killed_at_the_limit_and_leaves_no_scratch_files() {
    let ws = temp_dir();
    // The server's temp directory is ours, so what its calls leave behind can be seen.
    let scratch = temp_dir();
    let sort_files_in_tmp = || -> BTreeSet<String> {
        std::fs::read_dir("/tmp")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.starts_with("sort"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = sort_files_in_tmp();
    let mut s = {
        let mut child = command();
        child
            .args(["--root".as_ref(), ws.path().as_os_str()])
            .args(["--legacy-pipe", "--timeout", TIMEOUT_SECS, "--no-call-log"])
            .env("TMPDIR", scratch.path());
        Session::from_command(child)
    };
    s.initialize("2025-06-18");
    let mut p = Pipe { s, next_id: 10 };
    let (result, groups) = p.run(json!({"command": "jq -n 'range(1e8)' | sort"}));
    assert_timeout(&result);
    assert!(!groups.is_empty(), "no stage was ever seen running");
    p.assert_nothing_left(&groups);
    // sort spills sorted runs to $TMPDIR; killed, it cannot remove them. They must land in the
    // call's private directory (removed with the call), never in the machine's shared /tmp.
    let leaked: Vec<String> = sort_files_in_tmp().difference(&before).cloned().collect();
    assert!(
        leaked.is_empty(),
        "sort scratch files leaked into /tmp: {leaked:?}"
    );
    let left: Vec<_> = std::fs::read_dir(scratch.path())
        .expect("scratch")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "the call left files behind: {left:?}");
    p.assert_still_serving();
}

#[test]
fn an_awk_infinite_loop_is_killed_at_the_limit() {
    let ws = temp_dir();
    let mut p = Pipe::start(ws.path(), &[]);
    let (result, groups) = p.run(json!({"command": "awk 'BEGIN{while(1){}}'"}));
    assert_timeout(&result);
    assert!(!groups.is_empty(), "no stage was ever seen running");
    p.assert_nothing_left(&groups);
    p.assert_still_serving();
}

#[test]
fn follow_mode_is_refused_before_anything_runs() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("app.log"), "one\ntwo\n").expect("seed");
    let mut p = Pipe::start(ws.path(), &[]);
    for command in [
        "tail -f app.log",
        "tail -F app.log",
        "tail --follow=name app.log",
        "tail --fol app.log",
        "tail -qf app.log",
        "tail -n3 -vf app.log",
        "tail -n 3 app.log -f",
        "rg ERROR app.log | tail -qf",
        "tail --retry app.log",
        "tail --pid 1 app.log",
    ] {
        let (result, groups) = p.run(json!({"command": command}));
        assert_eq!(result["isError"], json!(true), "{command}: {result}");
        let b = text_json(&result);
        assert_eq!(b["error"]["code"], "GUARD_VIOLATION", "{command}: {b}");
        assert!(
            ["DISALLOWED_OPTION", "PARSE_ERROR"]
                .contains(&b["error"]["reason"].as_str().unwrap_or("")),
            "{command}: {b}"
        );
        assert!(
            groups.is_empty(),
            "{command}: a refused pipeline started {groups:?}"
        );
    }
    p.assert_still_serving();
}

#[test]
fn a_stage_flooding_stderr_neither_blocks_nor_grows_the_reply() {
    let ws = temp_dir();
    let mut p = Pipe::start(ws.path(), &[]);
    // Never ends, writes only to stderr: a pipe nobody drained would block it; here it runs into
    // the time limit instead.
    let (result, groups) = p.run(json!({"command": "jq -n 'range(1e18) | stderr | empty'"}));
    assert_timeout(&result);
    assert!(!groups.is_empty(), "no stage was ever seen running");
    p.assert_nothing_left(&groups);
    // Ends by itself after ~2 MB of stderr: a success whose stderr comes back capped. Its own
    // server with a long limit, so a slow machine cannot turn the success into a timeout.
    let mut p = Pipe::start_with_timeout(ws.path(), "60", &[]);
    let (result, groups) = p.run(json!({"command": "jq -n 'range(300000) | stderr | empty'"}));
    assert_ne!(result["isError"], json!(true), "{result}");
    let reply_text = text(&result);
    assert!(
        reply_text.len() < 256 * 1024,
        "the reply carries {} bytes of stderr",
        reply_text.len()
    );
    let b = text_json(&result);
    assert_eq!(b["stdout"], "");
    // What was produced first comes back, cut at the stderr cap (64 KiB).
    let stderr = b["stderr"].as_str().expect("stderr returned as text");
    assert!(stderr.starts_with("0123456789"), "{stderr:.40}");
    assert!(
        stderr.len() <= 64 * 1024,
        "{} bytes of stderr",
        stderr.len()
    );
    p.assert_nothing_left(&groups);
    p.assert_still_serving();
}

#[test]
fn memory_stays_bounded_while_a_large_stream_passes_through_the_server() {
    let ws = temp_dir();
    let mut p = Pipe::start(ws.path(), &[]);
    // 220,000 lines of 1,000 spaces: 220 MB through awk, the server's built-in tee (which keeps
    // at most its 1 MiB write limit) and on into wc.
    let lines: u64 = 220_000;
    let (result, groups) = p.run(json!({
        "command": format!("awk 'BEGIN{{s = sprintf(\"%1000s\", \"\"); for (i = 0; i < {lines}; i++) print s}}' | tee big.txt | wc -c"),
        "confirm_oversize": true,
    }));
    assert_ne!(result["isError"], json!(true), "{result}");
    let b = text_json(&result);
    let total = lines * 1001;
    assert!(total > 200_000_000);
    assert_eq!(b["stdout"], format!("{total}\n"), "{b}");
    assert_eq!(b["meta"]["steps"][1]["output_size"], json!(total), "{b}");
    assert_eq!(b["meta"]["tee"]["truncated"], true, "{b}");
    let written = std::fs::metadata(ws.path().join("big.txt"))
        .expect("written")
        .len();
    assert_eq!(written, 1024 * 1024);
    let peak = peak_rss_kib(p.s.child.id()).expect("VmHWM line");
    assert!(
        peak < 64 * 1024,
        "the server's peak RSS reached {peak} KiB while streaming {total} bytes"
    );
    p.assert_nothing_left(&groups);
    p.assert_still_serving();
}
