#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The bounds of `--legacy-pipe` pipelines, through the real binary and real tools: the stage
//! count, the memory limit of each stage, the time limit counted from the first spawn, and that
//! no stage — nor its scratch folder — outlives a server that is killed mid-pipeline.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::text_json;
use test_support::mcp::Session;
use test_support::temp::temp_dir;

/// A server that is killed when the test ends, passed or not (its stages die with it), so a
/// failed test leaves no busy loop behind.
struct Server(Session);

impl std::ops::Deref for Server {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

/// A `--legacy-pipe` server whose temporary directory (where the per-call scratch folders go,
/// and which its start-up sweep looks at) is `tmp`, so that what it leaves can be seen and no
/// other program's folders are touched.
fn server(root: &Path, tmp: &Path, flags: &[&str]) -> Server {
    let mut cmd = command();
    cmd.args(["--root".as_ref(), root.as_os_str()])
        .args(["--legacy-pipe", "--no-call-log"])
        .args(flags)
        .env("TMPDIR", tmp);
    // A test run started in the background by a shell without job control inherits SIGINT (and
    // SIGQUIT) ignored, and so would the server, which then could not be stopped by the SIGINT
    // the tests send: give it the default dispositions a terminal user's server has.
    // SAFETY: signal(2) is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut s = Server(Session::from_command(cmd));
    s.initialize("2025-06-18");
    s
}

fn pipe(s: &mut Session, id: i64, command: &str) -> Value {
    s.call(id, "shelpa_pipe", json!({"command": command}))
}

/// Sends a pipeline without waiting for its answer.
fn start_pipe(s: &mut Session, id: i64, command: &str) {
    s.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "shelpa_pipe", "arguments": {"command": command}}}));
}

fn cancel(s: &mut Session, id: i64) {
    s.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "test"}}),
    );
}

fn assert_failure(result: &Value, code: &str, reason: &str) -> Value {
    assert_eq!(result["isError"], json!(true), "{result}");
    let b = text_json(result);
    assert_eq!(b["error"]["code"], code, "{b}");
    assert_eq!(b["error"]["reason"], reason, "{b}");
    b
}

/// The server still answers a ping and runs a quick pipeline.
fn assert_still_serving(s: &mut Session, id: i64) {
    let pong = s.request(id, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");
    let result = pipe(s, id + 1, "jq -n '1 + 1'");
    assert_ne!(result["isError"], json!(true), "{result}");
    assert_eq!(text_json(&result)["stdout"], "2\n");
}

/// Processes (not zombies) whose command line contains `marker`.
fn with_marker(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for (pid, dir) in test_support::procs::proc_entries() {
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmdline).contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .unwrap_or("");
        if state != "Z" {
            found.push(pid);
        }
    }
    found
}

/// Waits until `check` holds, failing with `what` after `limit`.
fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The scratch folders in `tmp`.
fn scratch_folders(tmp: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(tmp)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("shelpa-home-"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// A busy loop whose command line carries `marker`, so its process can be found in /proc.
fn busy_loop(marker: &str) -> String {
    format!("awk 'BEGIN{{m=\"{marker}\"; while(1){{}}}}'")
}

/// A marker no other test's process carries.
fn marker(name: &str, tmp: &Path) -> String {
    let unique = tmp.file_name().map(|n| n.to_string_lossy().into_owned());
    format!("{name}-{}", unique.unwrap_or_default())
}

#[test]
fn an_awk_doubling_its_string_is_stopped_at_the_memory_limit() {
    let (ws, tmp) = (temp_dir(), temp_dir());
    // The default limit (1 GiB); the time limit is far away, so only the memory limit can end it.
    let mut s = server(ws.path(), tmp.path(), &["--timeout", "60"]);
    let started = Instant::now();
    let result = pipe(
        &mut s,
        10,
        "jq -n '1' | awk 'BEGIN{s=\"x\"; while(1) s = s s}' | wc -c",
    );
    let took = started.elapsed();
    let b = assert_failure(&result, "EXEC_FAILED", "RESOURCE_LIMIT");
    assert_eq!(b["error"]["limit"], "memory", "{b}");
    assert_eq!(b["error"]["stage"], 2, "{b}");
    assert_eq!(b["error"]["token"], "awk", "{b}");
    assert_eq!(b["error"]["limit_bytes"], 1u64 << 30, "{b}");
    let detail = b["error"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("ran out of memory (1G per stage)"),
        "{detail}"
    );
    let suggestion = b["error"]["suggestion"].as_str().unwrap_or_default();
    assert!(suggestion.contains("--stage-memory"), "{suggestion}");
    assert!(
        took < Duration::from_secs(30),
        "stopped only after {took:?}"
    );
    assert_still_serving(&mut s, 20);
    assert!(
        scratch_folders(tmp.path()).is_empty(),
        "the call left its folder"
    );
}

#[test]
fn a_smaller_stage_memory_is_honoured_and_a_nonsense_one_refused() {
    let (ws, tmp) = (temp_dir(), temp_dir());
    let mut s = server(ws.path(), tmp.path(), &["--stage-memory", "64M"]);
    let result = pipe(&mut s, 10, "awk 'BEGIN{s=\"x\"; while(1) s = s s}'");
    let b = assert_failure(&result, "EXEC_FAILED", "RESOURCE_LIMIT");
    assert_eq!(b["error"]["limit_bytes"], 64u64 << 20, "{b}");
    assert_still_serving(&mut s, 20);

    let out = command()
        .args(["--legacy-pipe", "--stage-memory", "1K", "tools"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("too small"), "{stderr}");
}

#[test]
fn pipelines_of_more_than_32_stages_are_refused_before_anything_runs() {
    let (ws, tmp) = (temp_dir(), temp_dir());
    let mut s = server(ws.path(), tmp.path(), &["--timeout", "30"]);
    let pipeline = |stages: usize| format!("jq -rn '\"aaa\"'{}", " | tr a b".repeat(stages - 1));

    let accepted = pipe(&mut s, 10, &pipeline(32));
    assert_ne!(accepted["isError"], json!(true), "{accepted}");
    let b = text_json(&accepted);
    assert_eq!(b["stdout"], "bbb\n", "{b}");
    assert_eq!(b["meta"]["steps"].as_array().map(Vec::len), Some(32));

    for (id, stages) in [(11, 33), (12, 1_500)] {
        let started = Instant::now();
        let refused = pipe(&mut s, id, &pipeline(stages));
        let took = started.elapsed();
        let b = assert_failure(&refused, "GUARD_VIOLATION", "TOO_MANY_STAGES");
        let detail = b["error"]["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("more than 32 stages"), "{detail}");
        let suggestion = b["error"]["suggestion"].as_str().unwrap_or_default();
        assert!(suggestion.contains("tee"), "{suggestion}");
        // Nothing was started: no scratch folder was even made, and the answer came at once.
        assert!(scratch_folders(tmp.path()).is_empty());
        assert!(took < Duration::from_secs(5), "{stages} stages: {took:?}");
    }
    assert_still_serving(&mut s, 20);
}

#[test]
fn the_time_limit_stops_a_slow_pipeline_and_a_cancel_stops_it_at_once() {
    let (ws, tmp) = (temp_dir(), temp_dir());
    let mut s = server(ws.path(), tmp.path(), &["--timeout", "2"]);
    let mark = marker("slow", tmp.path());
    let slow = format!("{}{}", busy_loop(&mark), " | tr a b".repeat(31));
    let started = Instant::now();
    let result = pipe(&mut s, 10, &slow);
    let took = started.elapsed();
    let b = assert_failure(&result, "EXEC_FAILED", "TIMEOUT");
    assert_eq!(b["error"]["limit"], "time", "{b}");
    assert!(took < Duration::from_secs(20), "a 2 s limit took {took:?}");
    assert!(with_marker(&mark).is_empty(), "a stage outlived the call");

    // A cancellation stops the pipeline, not its time limit.
    let mut s = server(ws.path(), tmp.path(), &["--timeout", "60"]);
    start_pipe(&mut s, 11, &slow);
    wait_until(
        Duration::from_secs(20),
        "the pipeline never started",
        || !with_marker(&mark).is_empty(),
    );
    let cancelled_at = Instant::now();
    cancel(&mut s, 11);
    // MCP forbids an answer to a cancelled request: the stages stop, and the next answer is the
    // ping's (which `assert_still_serving` checks by id).
    wait_until(
        Duration::from_secs(20),
        "a stage outlived its cancelled call",
        || with_marker(&mark).is_empty(),
    );
    assert!(cancelled_at.elapsed() < Duration::from_secs(20));
    assert_still_serving(&mut s, 20);
    assert!(scratch_folders(tmp.path()).is_empty());
}

/// Starts a busy pipeline on a fresh server in `tmp` and waits until its stage runs; returns
/// the server and its call's scratch folder.
fn busy_server(ws: &Path, tmp: &Path, mark: &str) -> (Server, PathBuf) {
    let before = scratch_folders(tmp);
    let mut s = server(ws, tmp, &["--timeout", "60"]);
    start_pipe(&mut s, 10, &format!("{} | tr a b", busy_loop(mark)));
    wait_until(Duration::from_secs(20), "the stage never started", || {
        !with_marker(mark).is_empty()
    });
    let folder = scratch_folders(tmp)
        .into_iter()
        .find(|f| !before.contains(f))
        .expect("the call's scratch folder");
    (s, folder)
}

fn signal(s: &Server, sig: i32) {
    let pid = i32::try_from(s.child.id()).expect("pid");
    // SAFETY: kill takes plain integers.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

#[test]
fn no_stage_outlives_a_server_killed_mid_pipeline() {
    let ws = temp_dir();
    for (name, sig) in [
        ("term", libc::SIGTERM),
        ("int", libc::SIGINT),
        ("kill", libc::SIGKILL),
    ] {
        let tmp = temp_dir();
        let mark = marker(name, tmp.path());
        let (mut s, _folder) = busy_server(ws.path(), tmp.path(), &mark);
        signal(&s, sig);
        let status = s.child.wait().expect("wait");
        assert!(!status.success(), "{name}: {status:?}");
        wait_until(
            Duration::from_secs(10),
            &format!(
                "a stage outlived a server ended by SIG{}",
                name.to_uppercase()
            ),
            || with_marker(&mark).is_empty(),
        );
    }
}

#[test]
fn the_next_start_removes_the_folder_of_a_killed_server_but_not_that_of_a_live_one() {
    let ws = temp_dir();
    let tmp = temp_dir();
    let dead_mark = marker("dead", tmp.path());
    let live_mark = marker("live", tmp.path());
    let (mut dead, dead_folder) = busy_server(ws.path(), tmp.path(), &dead_mark);
    let (mut live, live_folder) = busy_server(ws.path(), tmp.path(), &live_mark);
    signal(&dead, libc::SIGKILL);
    dead.child.wait().expect("wait");
    wait_until(
        Duration::from_secs(10),
        "a stage outlived its server",
        || with_marker(&dead_mark).is_empty(),
    );
    assert!(dead_folder.exists(), "nothing was left to sweep");

    // A new server sweeps at start-up, in the background.
    let mut next = server(ws.path(), tmp.path(), &[]);
    wait_until(
        Duration::from_secs(10),
        "the killed server's scratch folder was not removed",
        || !dead_folder.exists(),
    );
    assert!(live_folder.exists(), "the live server's folder was swept");
    assert!(
        !with_marker(&live_mark).is_empty(),
        "the live call was disturbed"
    );
    assert_still_serving(&mut next, 20);

    // The live call goes on until it is cancelled (which is not answered), and then removes its
    // own folder.
    cancel(&mut live, 10);
    wait_until(
        Duration::from_secs(10),
        "the live call left its folder",
        || !live_folder.exists(),
    );
    assert_still_serving(&mut live, 30);
}
