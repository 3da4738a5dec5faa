#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! What one call or one message may cost the server, through the real binary: a content search
//! stops inside one large file at the time limit, deep paths count against the answers of
//! `search_content` and `find_files` (and the memory behind them), a chain of large `.gitignore`
//! files is applied within a budget, and a 2025-03-26 batch is bounded in members and in the size
//! of its answer. Memory is the server's peak resident size (`VmHWM`), with bounds far above what
//! the bounded server takes and far below what an unbounded one took on the same input.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::fs::{Mode, OFlags};
use serde_json::{json, Value};

use test_support::mcp::{initialize, initialized, text, tools_call, Session};
use test_support::procs::peak_rss_kib;
use test_support::temp::temp_dir;

/// Peak memory allowed to a server in these tests. A bounded server stays at a few tens of MiB
/// on their inputs; the unbounded one took several hundred MiB on each.
const PEAK_KIB: u64 = 150 * 1024;

/// Text of `bytes` bytes, lines of random lowercase words (a fixed seed): no digit anywhere, and
/// varied enough that a regex engine cannot cache its way through it.
fn words(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 128);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    while out.len() < bytes {
        for w in 0..10 {
            if w > 0 {
                out.push(b' ');
            }
            for _ in 0..2 + next() % 8 {
                out.push(b'a' + (next() % 26) as u8);
            }
        }
        out.push(b'\n');
    }
    out
}

/// A server whose replies are read on a thread of their own, so a test can wait for one with a
/// bound instead of hanging when the server does not answer.
struct Bounded {
    child: Child,
    stdin: ChildStdin,
    replies: mpsc::Receiver<Value>,
}

impl Bounded {
    fn start(root: &Path, flags: &[&str]) -> Bounded {
        let mut child = test_support::bin::command()
            .arg("--root")
            .arg(root)
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                let Ok(v) = serde_json::from_str(&line) else {
                    return;
                };
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Bounded {
            child,
            stdin,
            replies,
        }
    }

    fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).expect("json");
        line.push(b'\n');
        self.stdin.write_all(&line).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The next reply, failing if none comes within `within`.
    fn recv(&mut self, within: Duration, what: &str) -> Value {
        self.replies
            .recv_timeout(within)
            .unwrap_or_else(|e| panic!("no reply to {what} within {within:?} ({e})"))
    }

    fn handshake(&mut self, version: &str) {
        self.send(&initialize(1, version, "bounds"));
        self.recv(Duration::from_secs(30), "initialize");
        self.send(&initialized());
    }

    fn peak_kib(&self) -> u64 {
        peak_rss_kib(self.child.id()).expect("VmHWM of the server")
    }
}

impl Drop for Bounded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `levels` nested directories named `name` below `base`, made one at a time through descriptors
/// (the path soon becomes longer than the kernel takes in one call); returns the deepest.
fn nest(base: &Path, name: &str, levels: usize) -> OwnedFd {
    let mut fd = rustix::fs::open(base, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
        .expect("open base");
    for _ in 0..levels {
        rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)).expect("mkdir");
        fd = rustix::fs::openat(&fd, name, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .expect("open");
    }
    fd
}

/// Creates `name` with `content` in the directory `dir`.
fn write_at(dir: &OwnedFd, name: &str, content: &[u8]) {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
        Mode::from_raw_mode(0o644),
    )
    .expect("create");
    std::fs::File::from(fd).write_all(content).expect("write");
}

#[test]
fn a_slow_pattern_over_one_large_file_stops_at_the_time_limit_and_the_session_goes_on() {
    let dir = temp_dir();
    // At the pace this pattern matches (about 0.5 MB/s of CPU unoptimised, a few MB/s
    // optimised), searching the whole file takes minutes; the test waits 30 s past a limit of
    // 10 s, long enough that even on a loaded machine the search has begun when it runs out.
    std::fs::write(dir.path().join("big.txt"), words(48 << 20)).expect("write");
    std::fs::write(dir.path().join("small.txt"), "needle\n").expect("write");
    let mut s = Bounded::start(dir.path(), &["--tools", "extended", "--timeout", "10"]);
    s.handshake("2025-06-18");
    s.send(&tools_call(
        2,
        "search_content",
        json!({"pattern": r"(?i)[aeiou][\w\s]{200}\d", "path": "big.txt"}),
    ));
    let reply = s.recv(Duration::from_secs(40), "the slow search");
    assert_eq!(reply["id"], json!(2), "{reply}");
    let said = text(&reply["result"]);
    assert_eq!(reply["result"]["isError"], json!(true), "{said}");
    assert!(said.starts_with("Timeout"), "{said}");
    // The lane is free again: the next call is answered.
    s.send(&tools_call(
        3,
        "search_content",
        json!({"pattern": "needle", "path": "small.txt"}),
    ));
    let next = s.recv(Duration::from_secs(30), "the call after it");
    assert_eq!(next["id"], json!(3), "{next}");
    assert_eq!(text(&next["result"]), "small.txt:1:needle");
}

/// 800 levels of 255-byte names: every path below is about 200 KiB long.
const DEEP_LEVELS: usize = 800;
/// Files with a match at the bottom of the deep tree.
const DEEP_FILES: usize = 500;

/// A workspace whose every file lies [`DEEP_LEVELS`] levels down, each holding a match.
fn deep_tree() -> tempfile::TempDir {
    let dir = temp_dir();
    let bottom = nest(dir.path(), &"d".repeat(255), DEEP_LEVELS);
    for n in 0..DEEP_FILES {
        write_at(&bottom, &format!("f{n:04}.txt"), b"needle\n");
    }
    dir
}

#[test]
fn deep_paths_count_against_the_answer_of_search_content() {
    let dir = deep_tree();
    let mut s = Bounded::start(
        dir.path(),
        &[
            "--tools",
            "extended",
            "--timeout",
            "0",
            "--max-result-bytes",
            "1000000000",
        ],
    );
    s.handshake("2025-06-18");
    s.send(&tools_call(
        2,
        "search_content",
        json!({"pattern": "needle", "maxResults": 2000}),
    ));
    let reply = s.recv(Duration::from_secs(300), "the search");
    let peak = s.peak_kib();
    assert!(
        peak < PEAK_KIB,
        "search_content peaked at {peak} KiB over {DEEP_FILES} files {DEEP_LEVELS} levels down"
    );
    let said = text(&reply["result"]);
    assert_eq!(reply["result"]["isError"], json!(false), "{}", &said[..200]);
    assert!(
        said.ends_with("[truncated: the answer reached 512 KiB; the lines after this point are not shown. Narrow the pattern or the path, or add include/exclude globs]"),
        "{}",
        &said[said.len().saturating_sub(300)..]
    );
    let shown = said.lines().filter(|l| l.ends_with(":1:needle")).count();
    assert!((1..=3).contains(&shown), "{shown} lines shown");
}

#[test]
fn deep_paths_count_against_the_answer_of_find_files() {
    let dir = deep_tree();
    let mut s = Bounded::start(
        dir.path(),
        &[
            "--tools",
            "extended",
            "--timeout",
            "0",
            "--max-result-bytes",
            "1000000000",
        ],
    );
    s.handshake("2025-06-18");
    s.send(&tools_call(
        2,
        "find_files",
        json!({"path": ".", "pattern": "**/f*.txt"}),
    ));
    let reply = s.recv(Duration::from_secs(300), "find_files");
    let peak = s.peak_kib();
    assert!(
        peak < PEAK_KIB,
        "find_files peaked at {peak} KiB over {DEEP_FILES} files {DEEP_LEVELS} levels down"
    );
    let said = text(&reply["result"]);
    assert_eq!(reply["result"]["isError"], json!(false), "{}", &said[..200]);
    let found = said.lines().filter(|l| l.ends_with(".txt")).count();
    assert!((1..=3).contains(&found), "{found} paths shown");
    assert!(
        said.ends_with(&format!("[truncated: the answer reached 512 KiB; only the first {found} matches are shown. Narrow the pattern, the path or add excludePatterns]")),
        "{}",
        &said[said.len().saturating_sub(300)..]
    );
}

#[test]
fn a_chain_of_large_gitignore_files_is_applied_within_a_budget() {
    const LEVELS: usize = 12;
    let dir = temp_dir();
    let mut fd = rustix::fs::open(
        dir.path(),
        OFlags::RDONLY | OFlags::DIRECTORY,
        Mode::empty(),
    )
    .expect("open");
    // 64 KiB of short globs per level, each a few KiB once compiled, none matching anything.
    for level in 0..LEVELS {
        let mut rules = String::new();
        let mut n = 0;
        while rules.len() < 64 * 1024 {
            rules.push_str(&format!("p{level}x{n}/*\n"));
            n += 1;
        }
        write_at(&fd, ".gitignore", rules.as_bytes());
        rustix::fs::mkdirat(&fd, "d", Mode::from_raw_mode(0o755)).expect("mkdir");
        fd = rustix::fs::openat(&fd, "d", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .expect("open");
    }
    write_at(&fd, "f.txt", b"needle\n");
    let mut s = Bounded::start(dir.path(), &["--tools", "extended", "--timeout", "0"]);
    s.handshake("2025-06-18");
    s.send(&tools_call(
        2,
        "search_content",
        json!({"pattern": "needle"}),
    ));
    let reply = s.recv(Duration::from_secs(300), "the search");
    let peak = s.peak_kib();
    assert!(
        peak < PEAK_KIB,
        "search_content peaked at {peak} KiB under {LEVELS} levels of 64 KiB .gitignore files"
    );
    let said = text(&reply["result"]);
    let found = format!("{}/f.txt:1:needle", ["d"; LEVELS].join("/"));
    assert!(said.starts_with(&found), "{said}");
    // The root's file fits the budget; each deeper one would go past it.
    assert!(
        said.ends_with(&format!("[note: {} .gitignore files were not applied (the first: 'd/.gitignore'), so files they ignore may be listed: one search applies at most 10000 ignore rules and 1024 KiB of them, from files of at most 256 KiB. Search a smaller path, or exclude what they ignore with 'exclude']", LEVELS - 1)),
        "{said}"
    );
}

#[test]
fn a_batch_of_large_reads_is_answered_within_a_bound_and_says_what_was_not_run() {
    const READS: usize = 200;
    let dir = temp_dir();
    std::fs::write(dir.path().join("one-mib.txt"), words(1 << 20)).expect("write");
    let mut s = Bounded::start(
        dir.path(),
        &["--timeout", "0", "--max-result-bytes", "1000000000"],
    );
    s.handshake("2025-03-26");
    let batch: Vec<Value> = (0..READS)
        .map(|n| {
            tools_call(
                10 + n as i64,
                "read_text_file",
                json!({"path": "one-mib.txt"}),
            )
        })
        .collect();
    s.send(&Value::Array(batch));
    let reply = s.recv(Duration::from_secs(300), "the batch");
    let peak = s.peak_kib();
    assert!(
        peak < PEAK_KIB,
        "a batch of {READS} reads of 1 MiB peaked at {peak} KiB"
    );
    let members = reply.as_array().expect("an array answer");
    assert_eq!(members.len(), READS);
    let ran = members
        .iter()
        .take_while(|m| m.get("result").is_some())
        .count();
    // About 16 MiB of answer: the reads up to it ran, the rest were refused unrun.
    assert!((2..=20).contains(&ran), "{ran} reads ran");
    for (n, m) in members.iter().enumerate() {
        assert_eq!(m["id"], json!(10 + n as i64));
        if n >= ran {
            let why = m["error"]["message"].as_str().unwrap_or_default();
            assert!(
                why.starts_with("not run: the answer to this batch reached 16 MiB before this member; send it again on its own"),
                "{m}"
            );
        }
    }
}

#[test]
fn a_batch_longer_than_the_limit_is_refused_whole_and_the_session_goes_on() {
    const MEMBERS: usize = 5000;
    let mut s = Session::start(&["--tools", "extended"]);
    s.initialize("2025-03-26");
    let batch: Vec<Value> = (0..MEMBERS)
        .map(|n| json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/list"}))
        .collect();
    s.send(Value::Array(batch));
    let reply = s.recv();
    let peak = peak_rss_kib(s.child.id()).expect("VmHWM");
    assert!(
        peak < PEAK_KIB,
        "a batch of {MEMBERS} tools/list peaked at {peak} KiB"
    );
    assert_eq!(
        reply,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": format!("a batch of {MEMBERS} messages is more than the 256 one batch may hold; nothing in it was run. Send at most 256 at a time, or send them one at a time")}})
    );
    let pong = s.request(2, "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
}

#[test]
fn the_largest_batch_of_tools_list_is_answered_whole() {
    let mut s = Session::start(&["--tools", "extended"]);
    s.initialize("2025-03-26");
    let batch: Vec<Value> = (0..256)
        .map(|n| json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/list"}))
        .collect();
    s.send(Value::Array(batch));
    let reply = s.recv();
    let members = reply.as_array().expect("an array answer");
    assert_eq!(members.len(), 256);
    // Each list is a few tens of KiB: all of them fit the answer's bound.
    assert!(
        members.iter().all(|m| m["result"]["tools"].is_array()),
        "{}",
        members
            .iter()
            .find(|m| !m["result"]["tools"].is_array())
            .map(|m| m.to_string())
            .unwrap_or_default()
    );
    let peak = peak_rss_kib(s.child.id()).expect("VmHWM");
    assert!(
        peak < PEAK_KIB,
        "256 tools/list in a batch peaked at {peak} KiB"
    );
}
