//! A root is opened once, as a descriptor, and everything about it is derived from that
//! descriptor: a path that later names another directory (a directory on the way swapped for a
//! symlink, the root renamed away and replaced) is never followed there, however the root arrived
//! (`--root`, a `--server` call's `root`, an MCP client's roots). Where an attack needs an outside
//! process to act between two steps of the server, the server is parked at that step by its test
//! hook (`FILESYSTEM_TEST_PARK`) until the test has acted: the race is won by construction.

// The test plays the user and the outside process: it makes, swaps and reads directories by name,
// which is exactly what the server must not do.
#![allow(clippy::disallowed_methods)]

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::{initialized, outcome, tools_call, Session};
use test_support::temp::canonical_temp_dir;

/// Generous cap on waiting for the server to reach a park point (only reached when it never
/// does, i.e. when the test is about to fail).
const PARK_CAP: Duration = Duration::from_secs(60);

/// The FIFO a parked server waits on.
struct Park {
    _dir: tempfile::TempDir,
    fifo: PathBuf,
}

impl Park {
    fn new() -> Park {
        let dir = tempfile::tempdir().expect("tmp");
        let fifo = dir.path().join("park");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        Park { _dir: dir, fifo }
    }

    /// Makes the server started by `cmd` park at `point` for the root spelled `root`.
    fn arm(&self, cmd: &mut Command, point: &str, root: &Path) {
        cmd.env(
            "FILESYSTEM_TEST_PARK",
            format!("{point}:{}", root.display()),
        )
        .env("FILESYSTEM_TEST_PARK_FIFO", &self.fifo);
    }

    /// Waits until the server is parked (its end of the FIFO is open) and returns the test's end:
    /// the server stays parked until it is dropped. `None` when the server never parked within
    /// [`PARK_CAP`].
    fn try_parked(&self, cap: Duration) -> Option<File> {
        let until = Instant::now() + cap;
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.fifo)
            {
                Ok(f) => return Some(f),
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
                Err(e) => panic!("cannot open the park FIFO: {e}"),
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn parked(&self) -> File {
        self.try_parked(PARK_CAP)
            .expect("the server never reached the park point")
    }

    /// Lets every later park go at once, until the returned releaser is stopped.
    fn release_all(&self) -> Releaser {
        let stop = Arc::new(AtomicBool::new(false));
        let fifo = self.fifo.clone();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let opened = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&fifo);
                if opened.is_err() {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        });
        Releaser {
            stop,
            thread: Some(thread),
        }
    }
}

/// Lets parks go until dropped.
struct Releaser {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Releaser {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Exchanges `path` (a directory) for a symlink to `target`, keeping the directory as
/// `path-old`.
fn swap_for_link(path: &Path, target: &Path) -> PathBuf {
    let old = path.with_file_name(format!(
        "{}-old",
        path.file_name().expect("name").to_string_lossy()
    ));
    std::fs::rename(path, &old).expect("rename away");
    std::os::unix::fs::symlink(target, path).expect("symlink");
    old
}

fn mkdir_with(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).expect("mkdir");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write");
    }
}

/// A `--server` daemon command allowed `allowed` only, with a clean environment.
fn daemon(allowed: &Path, extra: &[&str]) -> Command {
    let mut cmd = command();
    cmd.arg("--server")
        .arg("--allow-root")
        .arg(allowed)
        .args(extra)
        .env_remove("FILESYSTEM_ALLOW_ROOTS")
        .env_remove("FILESYSTEM_ROOT")
        .env("HOME", "/");
    cmd
}

/// A server started in `/` with no root of its own, so it takes the client's MCP roots.
fn rootless(extra: &[&str]) -> Command {
    let mut cmd = command();
    cmd.current_dir("/")
        .env_remove("FILESYSTEM_ROOT")
        .args(["--tools", "extended"])
        .args(extra);
    cmd
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The handshake of a client that declares `roots`.
fn roots_handshake(s: &mut Session) {
    s.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"roots": {"listChanged": true}},
               "clientInfo": {"name": "root-once", "version": "1"}}),
    );
    s.send(initialized());
}

/// Reads the server's `roots/list` request and answers it with `roots`.
fn answer_roots(s: &mut Session, roots: &[&Path]) {
    let request = s.recv();
    assert_eq!(request["method"], "roots/list", "{request}");
    let roots: Vec<Value> = roots
        .iter()
        .map(|p| json!({"uri": uri(p), "name": "r"}))
        .collect();
    s.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": roots}}));
}

fn read_in(s: &mut Session, id: i64, root: &Path, path: &str) -> (bool, String) {
    s.call_text(
        id,
        "read_text_file",
        json!({"root": root.to_str().expect("utf-8"), "path": path}),
    )
}

fn lines(path: &Path) -> Vec<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Finding: a `--server` call's root was checked by path and then opened by path again, so a
/// directory on the way swapped for a symlink in between made the daemon open (and cache under the
/// allowed name) a directory outside every allowed root.
#[test]
fn a_daemon_root_swapped_between_check_and_open_is_not_followed_outside() {
    let (_tmp, base) = canonical_temp_dir();
    let allowed = base.join("allowed");
    let root = allowed.join("a/ws");
    mkdir_with(&root, &[("hello.txt", "inside\n")]);
    let outside = base.join("outside");
    mkdir_with(&outside.join("ws"), &[("hello.txt", "outside\n")]);
    let park = Park::new();
    let mut cmd = daemon(&allowed, &[]);
    park.arm(&mut cmd, "root-opened", &root);
    let mut s = Session::from_command(cmd);
    s.initialize("2025-11-25");
    s.send(tools_call(
        2,
        "read_text_file",
        json!({"root": root.to_str().expect("utf-8"), "path": "hello.txt"}),
    ));
    {
        let _parked = park.parked();
        // `allowed/a` now leads outside: `allowed/a/ws` names `outside/ws`.
        swap_for_link(&allowed.join("a"), &outside);
    }
    let _later = park.release_all();
    let reply = s.recv();
    let (is_error, text) = outcome(&reply["result"]);
    assert_ne!(
        text, "outside\n",
        "the daemon read outside its allowed roots"
    );
    assert!(!is_error && text == "inside\n", "{reply}");
    // Named again, the path leads outside now and is refused; nothing was cached under it.
    let (is_error, text) = read_in(&mut s, 3, &root, "hello.txt");
    assert!(is_error && text.contains("outside the roots"), "{text}");
    let (is_error, text) = s.call_text(
        4,
        "write_file",
        json!({"root": root.to_str().expect("utf-8"), "path": "planted.txt", "content": "x"}),
    );
    assert!(is_error, "{text}");
    assert!(!outside.join("ws/planted.txt").exists());
    assert!(s.close_and_wait().success());
}

/// Finding: a `--server` root's toolset was cached under its path and only the path re-checked
/// later, so a directory at that path replaced by another went on being served from the old one,
/// wherever it was moved (here into another workspace's store).
#[test]
fn a_daemon_root_replaced_at_its_path_is_served_afresh_and_the_moved_one_not_at_all() {
    let (_tmp, base) = canonical_temp_dir();
    let allowed = base.join("allowed");
    let root = allowed.join("ws");
    mkdir_with(&root, &[("hello.txt", "old\n")]);
    let other = allowed.join("other");
    std::fs::create_dir_all(other.join(".filesystem")).expect("store");
    let mut s = Session::from_command(daemon(&allowed, &[]));
    s.initialize("2025-11-25");
    assert_eq!(
        read_in(&mut s, 2, &root, "hello.txt"),
        (false, "old\n".into())
    );
    // The served directory moves into another workspace's store; a new one takes its path.
    let moved = other.join(".filesystem/ws");
    std::fs::rename(&root, &moved).expect("move into the store");
    mkdir_with(&root, &[("hello.txt", "new\n")]);
    assert_eq!(
        read_in(&mut s, 3, &root, "hello.txt"),
        (false, "new\n".into()),
        "the call must act on the directory the path names now"
    );
    let (is_error, text) = s.call_text(
        4,
        "write_file",
        json!({"root": root.to_str().expect("utf-8"), "path": "hello.txt", "content": "changed\n"}),
    );
    assert!(!is_error, "{text}");
    assert_eq!(
        std::fs::read_to_string(moved.join("hello.txt")).expect("read"),
        "old\n",
        "the moved directory (now inside a store) must not be written"
    );
    // The moved directory is not reachable under its new name either: it is inside a store.
    let (is_error, text) = read_in(&mut s, 5, &moved, "hello.txt");
    assert!(is_error && text.contains("store"), "{text}");
    // And a path that names nothing any more is refused, not served from the moved directory.
    std::fs::rename(&root, other.join(".filesystem/ws2")).expect("move away");
    let (is_error, text) = read_in(&mut s, 6, &root, "hello.txt");
    assert!(is_error && text.contains("does not exist"), "{text}");
    assert!(s.close_and_wait().success());
}

/// Finding: the daemon resolved a call's root on its reader thread, so one tenant whose root was
/// slow to resolve stalled every other tenant's calls; and nothing bounded that wait.
#[test]
fn a_root_slow_to_open_holds_up_neither_other_tenants_nor_its_own_deadline() {
    let (_tmp, base) = canonical_temp_dir();
    let slow = base.join("slow");
    let quick = base.join("quick");
    mkdir_with(&slow, &[("hello.txt", "slow\n")]);
    mkdir_with(&quick, &[("hello.txt", "quick\n")]);
    let park = Park::new();
    let mut cmd = daemon(&base, &["--timeout", "2"]);
    park.arm(&mut cmd, "root-open", &slow);
    let mut s = Session::from_command(cmd);
    s.initialize("2025-11-25");
    s.send(tools_call(
        2,
        "read_text_file",
        json!({"root": slow.to_str().expect("utf-8"), "path": "hello.txt"}),
    ));
    let parked = park.parked();
    s.send(tools_call(
        3,
        "read_text_file",
        json!({"root": quick.to_str().expect("utf-8"), "path": "hello.txt"}),
    ));
    // A watchdog lets the slow root go after a long while, so a server that is stuck behind it
    // fails this test instead of hanging it; `released` says whether it had to.
    let released = Arc::new(AtomicBool::new(false));
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let released = released.clone();
        std::thread::spawn(move || {
            if finished.recv_timeout(PARK_CAP).is_err() {
                released.store(true, Ordering::SeqCst);
            }
            drop(parked);
        })
    };
    // Both calls are answered while the slow root is still parked: the other tenant's at once,
    // the slow root's own by its deadline (in whichever order they come).
    let mut replies = Vec::new();
    for _ in 0..2 {
        let reply = s.recv();
        assert!(
            !released.load(Ordering::SeqCst),
            "a call waited for the slow root to open: {reply}"
        );
        replies.push(reply);
    }
    replies.sort_by_key(|r| r["id"].as_i64());
    assert_eq!(replies[1]["id"], 3, "{replies:?}");
    assert_eq!(outcome(&replies[1]["result"]), (false, "quick\n".into()));
    assert_eq!(replies[0]["id"], 2, "{replies:?}");
    let (is_error, text) = outcome(&replies[0]["result"]);
    assert!(is_error && text.contains("time limit"), "{replies:?}");
    // Let the slow root go: its open finishes on its own, and the server exits cleanly.
    let _later = park.release_all();
    let _ = done.send(());
    watchdog.join().expect("watchdog");
    assert!(s.close_and_wait().success());
}

/// Finding: the validated client root was opened again by path, so the root swapped for a symlink
/// in between was served wherever the link led.
#[test]
fn a_client_root_swapped_before_it_is_opened_is_not_followed() {
    let (_tmp, base) = canonical_temp_dir();
    let root = base.join("a/ws");
    mkdir_with(&root, &[("hello.txt", "inside\n")]);
    let outside = base.join("outside");
    mkdir_with(&outside, &[("hello.txt", "outside\n")]);
    let park = Park::new();
    let mut cmd = rootless(&[]);
    park.arm(&mut cmd, "root-opened", &root);
    let mut s = Session::from_command(cmd);
    roots_handshake(&mut s);
    answer_roots(&mut s, &[&root]);
    {
        let _parked = park.parked();
        swap_for_link(&root, &outside);
    }
    let _later = park.release_all();
    let (is_error, text) = s.call_text(2, "read_text_file", json!({"path": "hello.txt"}));
    assert_ne!(text, "outside\n", "the server followed the swapped root");
    assert!(!is_error && text == "inside\n", "{text}");
    assert!(s.close_and_wait().success());
}

/// Finding: a client could name another workspace's `.filesystem/` store (or a directory in it, or
/// a link to it) as its root, and read and rewrite that workspace's snapshots. `--root` is held to
/// the same rule.
#[test]
fn a_root_in_a_store_is_refused_however_it_arrives() {
    let (_tmp, base) = canonical_temp_dir();
    let store = base.join("other/.filesystem");
    mkdir_with(&store.join("snapshots"), &[("v1", "secret\n")]);
    std::os::unix::fs::symlink(&store, base.join("link")).expect("symlink");
    for named in [store.clone(), store.join("snapshots"), base.join("link")] {
        let mut s = Session::from_command(rootless(&[]));
        roots_handshake(&mut s);
        answer_roots(&mut s, &[&named]);
        let (is_error, text) = s.call_text(2, "list_directory", json!({"path": "."}));
        assert!(
            is_error && text.contains(".filesystem") && text.contains("store"),
            "{} served: {text}",
            named.display()
        );
        assert!(s.close_and_wait().success());
        let out = command()
            .arg("--root")
            .arg(&named)
            .args(["call", "list_directory", r#"{"path":"."}"#])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("store"),
            "--root {} served: {err}",
            named.display()
        );
    }
}

/// Finding: the call log was opened by the root's path on the first logged call while the tools
/// used the root's descriptor, so a root renamed away and replaced by a symlink made the server
/// create `.filesystem/` and write call records where the link led. No race needed.
#[test]
fn the_call_log_goes_into_the_opened_root_not_where_its_path_leads_later() {
    let (_tmp, base) = canonical_temp_dir();
    let root = base.join("ws");
    mkdir_with(&root, &[("hello.txt", "hello\n")]);
    let elsewhere = base.join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let mut s = Session::start_in(&root, &["--call-log-args"]);
    s.initialize("2025-11-25");
    let moved = swap_for_link(&root, &elsewhere);
    let (is_error, text) = s.call_text(2, "read_text_file", json!({"path": "hello.txt"}));
    assert_eq!((is_error, text.as_str()), (false, "hello\n"));
    assert!(s.close_and_wait().success());
    assert!(
        !elsewhere.join(".filesystem").exists(),
        "the server wrote its store where the root's path leads now"
    );
    let logged = lines(&moved.join(".filesystem/.calls.jsonl"));
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["tool"], "read_text_file");
}

/// Finding: with client roots, a call that ran on root A while the client switched to B was
/// logged in B's call log, with A's arguments.
#[test]
fn a_call_is_logged_in_the_log_of_the_root_it_ran_on() {
    let (_tmp, base) = canonical_temp_dir();
    let a = base.join("a");
    let b = base.join("b");
    mkdir_with(&a, &[("hello.txt", "a\n")]);
    mkdir_with(&b, &[("hello.txt", "b\n")]);
    let park = Park::new();
    let mut cmd = rootless(&["--call-log-args"]);
    park.arm(&mut cmd, "call-ran", &a);
    let mut s = Session::from_command(cmd);
    roots_handshake(&mut s);
    answer_roots(&mut s, &[&a]);
    s.send(tools_call(
        2,
        "read_text_file",
        json!({"path": "hello.txt"}),
    ));
    {
        let _parked = park.parked();
        // The call has run on A; the client now switches to B before it is logged.
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
        answer_roots(&mut s, &[&b]);
        // The answer has been handled once a later ping is answered (the reader takes messages
        // in order).
        let pong = s.request(9, "ping", json!({}));
        assert!(pong.get("result").is_some(), "{pong}");
    }
    let _later = park.release_all();
    let reply = s.recv();
    assert_eq!(outcome(&reply["result"]), (false, "a\n".into()), "{reply}");
    assert!(s.close_and_wait().success());
    let in_a = lines(&a.join(".filesystem/.calls.jsonl"));
    let in_b = lines(&b.join(".filesystem/.calls.jsonl"));
    assert!(in_b.is_empty(), "A's call was logged in B's log: {in_b:?}");
    assert_eq!(in_a.len(), 1, "{in_a:?}");
    assert_eq!(in_a[0]["args"]["path"], "hello.txt");
}
