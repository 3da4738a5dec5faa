//! Shared by the confinement tests: a workspace beside a canary directory it must never reach, a
//! snapshot of the canary to compare before and after, a thread that swaps a workspace directory
//! with a symlink to the canary, and MCP / CLI clients whose every reply is screened for leaks.
//!
//! Uses `support` (the MCP session), so a test file declares `mod support;` before this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags, RenameFlags};
use serde_json::{json, Value};

use crate::support::{Session, BIN};

/// The binary under test.
pub const FILESYSTEM: &str = BIN;

/// How long each race runs: `FILESYSTEM_RACE_SECS` (fractions allowed), else two seconds.
pub fn race_duration() -> Duration {
    std::env::var("FILESYSTEM_RACE_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(2), Duration::from_secs_f64)
}

/// A temp dir holding `ws/` (the workspace root) and `canary/` (outside it, on the same file
/// system so hard links work), both canonical. The canary holds files with the names the tests
/// aim at inside the workspace ([`CANARY_DECOYS`]), so any redirected write, move or delete
/// changes it, but none of the names the tests create (so a redirected creation shows, too), plus
/// one name and one content found nowhere else, so a redirected read or listing shows in the
/// reply.
pub struct Arena {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub root: PathBuf,
    pub canary: PathBuf,
    /// Content of every canary file; it must never appear in a reply or inside the workspace.
    pub secret: String,
    /// A file name only the canary has.
    pub canary_name: String,
}

/// Names the canary holds that the workspace operations aim at, too.
pub const CANARY_DECOYS: [&str; 5] = ["f", "o", "x", "t.txt", "secret.txt"];

impl Arena {
    pub fn new() -> Arena {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        let canary = base.join("canary-outside");
        std::fs::create_dir(&root).expect("mkdir ws");
        std::fs::create_dir(&canary).expect("mkdir canary");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        let secret = format!("CANARY-SECRET-{}-{nanos}", std::process::id());
        let canary_name = format!("canary-only-{nanos}.txt");
        // EDIT-ME lets a redirected edit_file match; the secret shows any redirected read.
        let body = format!("EDIT-ME\n{secret}\n");
        for name in CANARY_DECOYS.iter().copied().chain([canary_name.as_str()]) {
            std::fs::write(canary.join(name), &body).expect("write canary");
        }
        std::fs::create_dir(canary.join("sub")).expect("mkdir canary/sub");
        std::fs::write(canary.join("sub/deep.txt"), &body).expect("write canary");
        Arena {
            _tmp: tmp,
            base,
            root,
            canary,
            secret,
            canary_name,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, content).expect("write");
    }

    /// What must never appear in a reply: the canary's path, its content, its own name.
    pub fn forbidden(&self) -> Vec<String> {
        vec![
            self.canary.display().to_string(),
            self.secret.clone(),
            self.canary_name.clone(),
        ]
    }

    /// A leak screen for this arena.
    pub fn screen(&self) -> Screen {
        Screen::new(self.forbidden())
    }

    /// Fails unless the canary is exactly as `before`, naming every difference.
    pub fn assert_canary_unchanged(&self, before: &Snapshot) {
        let after = Snapshot::of(&self.canary);
        before.assert_same(&after, "the canary directory outside the workspace");
    }

    /// Fails if any file in the workspace (state directories included, links not followed)
    /// holds the canary's secret: content copied in from outside.
    pub fn assert_no_secret_inside(&self) {
        let copies: Vec<String> = Snapshot::of(&self.root)
            .entries
            .iter()
            .filter(|(_, e)| {
                e.content
                    .as_ref()
                    .is_some_and(|c| contains(c, self.secret.as_bytes()))
            })
            .map(|(p, _)| p.clone())
            .collect();
        assert!(
            copies.is_empty(),
            "content from outside the workspace was copied into it: {copies:?}"
        );
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// One entry of a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: &'static str,
    pub size: u64,
    pub mode: u32,
    pub ino: u64,
    pub nlink: u64,
    pub mtime_ns: i128,
    /// A regular file's bytes.
    pub content: Option<Vec<u8>>,
    /// A symlink's target.
    pub link: Option<PathBuf>,
}

/// Every entry under a directory (itself included as ""), never following a link: kind, size,
/// mode, inode, link count, mtime, and content or link target. A directory's mtime changes when
/// an entry is created or removed in it, so even a temporary made and removed again shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub entries: BTreeMap<String, Entry>,
}

impl Snapshot {
    pub fn of(dir: &Path) -> Snapshot {
        let mut entries = BTreeMap::new();
        let mut stack = vec![(dir.to_path_buf(), String::new())];
        while let Some((path, rel)) = stack.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let ft = meta.file_type();
            let kind = if ft.is_dir() {
                "dir"
            } else if ft.is_file() {
                "file"
            } else if ft.is_symlink() {
                "symlink"
            } else {
                "other"
            };
            let entry = Entry {
                kind,
                size: meta.len(),
                mode: meta.mode(),
                ino: meta.ino(),
                nlink: meta.nlink(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                content: ft
                    .is_file()
                    .then(|| std::fs::read(&path).unwrap_or_default()),
                link: ft
                    .is_symlink()
                    .then(|| std::fs::read_link(&path).unwrap_or_default()),
            };
            if ft.is_dir() {
                if let Ok(list) = std::fs::read_dir(&path) {
                    for e in list.flatten() {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let child = if rel.is_empty() {
                            name
                        } else {
                            format!("{rel}/{name}")
                        };
                        stack.push((e.path(), child));
                    }
                }
            }
            entries.insert(rel, entry);
        }
        Snapshot { entries }
    }

    /// Names in this snapshot that look like a temporary file (ours or anyone's).
    pub fn temporaries(&self) -> Vec<&str> {
        self.entries
            .keys()
            .map(String::as_str)
            .filter(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                name.contains("tmp") || name.contains(".audit-restore.") || name.starts_with(".#")
            })
            .collect()
    }

    pub fn assert_same(&self, after: &Snapshot, what: &str) {
        let temps = after.temporaries();
        assert!(temps.is_empty(), "{what}: temporary files left: {temps:?}");
        let mut diffs = Vec::new();
        for (path, e) in &self.entries {
            match after.entries.get(path) {
                None => diffs.push(format!("'{path}' disappeared")),
                Some(a) if a != e => diffs.push(format!(
                    "'{path}' changed: {} -> {}",
                    describe(e),
                    describe(a)
                )),
                Some(_) => {}
            }
        }
        for path in after.entries.keys() {
            if !self.entries.contains_key(path) {
                diffs.push(format!("'{path}' appeared"));
            }
        }
        assert!(
            diffs.is_empty(),
            "{what} changed:\n  {}",
            diffs.join("\n  ")
        );
    }
}

fn describe(e: &Entry) -> String {
    format!(
        "{} size {} mode {:o} ino {} nlink {} mtime {} {}",
        e.kind,
        e.size,
        e.mode,
        e.ino,
        e.nlink,
        e.mtime_ns,
        e.content
            .as_ref()
            .map(|c| format!("{:?}", String::from_utf8_lossy(&c[..c.len().min(80)])))
            .or_else(|| e.link.as_ref().map(|l| format!("-> {}", l.display())))
            .unwrap_or_default()
    )
}

/// Collects replies that contain a forbidden string (at most a few, for the failure message).
pub struct Screen {
    forbidden: Vec<String>,
    pub leaks: Vec<String>,
    pub screened: u64,
}

impl Screen {
    pub fn new(forbidden: Vec<String>) -> Screen {
        Screen {
            forbidden,
            leaks: Vec::new(),
            screened: 0,
        }
    }

    pub fn check(&mut self, what: &str, reply: &str) {
        self.screened += 1;
        for f in &self.forbidden {
            if reply.contains(f.as_str()) && self.leaks.len() < 5 {
                let shown: String = reply.chars().take(400).collect();
                self.leaks
                    .push(format!("{what}: reply contains {f:?}: {shown}"));
            }
        }
    }

    pub fn assert_clean(&self) {
        assert!(
            self.leaks.is_empty(),
            "replies leaked what lies outside the workspace:\n  {}",
            self.leaks.join("\n  ")
        );
    }
}

/// Successes and failures per operation, to show a race loop did real work: an operation that
/// never succeeded proves nothing about what a success could have done.
#[derive(Default, Debug)]
pub struct Tally {
    counts: BTreeMap<String, (u64, u64)>,
}

impl Tally {
    pub fn record(&mut self, op: &str, ok: bool) {
        let c = self.counts.entry(op.to_string()).or_default();
        if ok {
            c.0 += 1;
        } else {
            c.1 += 1;
        }
    }

    pub fn successes(&self, op: &str) -> u64 {
        self.counts.get(op).map_or(0, |c| c.0)
    }

    /// Fails unless every operation in `ops` succeeded at least once.
    pub fn assert_each_succeeded(&self, ops: &[&str]) {
        for op in ops {
            assert!(
                self.successes(op) > 0,
                "'{op}' never succeeded, so the race proved nothing about it: {:?}",
                self.counts
            );
        }
    }
}

/// One tool result: `ok` unless `isError`, and the whole result serialised (text and
/// structured content), which is what gets screened.
#[derive(Debug)]
pub struct Reply {
    pub ok: bool,
    pub text: String,
    pub raw: String,
}

/// A server process on a root, initialised, with its own request ids.
pub struct Client {
    session: Session,
    next_id: i64,
}

impl Client {
    pub fn start(root: &Path, flags: &[&str]) -> Client {
        Client::start_with(root, flags, false)
    }

    /// A server that opens paths with the per-component `O_NOFOLLOW` walk instead of `openat2`
    /// when `walk` is set: the fallback must hold under the same races.
    pub fn start_with(root: &Path, flags: &[&str], walk: bool) -> Client {
        let mut cmd = Command::new(FILESYSTEM);
        cmd.arg("--root").arg(root).args(flags);
        if walk {
            cmd.env("FILESYSTEM_NO_OPENAT2", "1");
        }
        let mut session = Session::from_command(cmd);
        session.initialize("2025-06-18");
        Client {
            session,
            next_id: 2,
        }
    }

    pub fn call(&mut self, tool: &str, args: Value) -> Reply {
        self.next_id += 1;
        let result = self.session.call(self.next_id, tool, args);
        Reply {
            ok: result["isError"] != json!(true),
            text: crate::support::text(&result),
            raw: result.to_string(),
        }
    }

    /// Closes stdin and waits for the server to exit, so everything it writes is on disk.
    pub fn close(self) {
        let status = self.session.close_and_wait();
        assert!(status.success(), "server exited with {status}");
    }

    /// Calls, screens the reply and tallies it under `op`.
    pub fn run(
        &mut self,
        op: &str,
        tool: &str,
        args: Value,
        screen: &mut Screen,
        tally: &mut Tally,
    ) -> Reply {
        let reply = self.call(tool, args);
        screen.check(op, &reply.raw);
        tally.record(op, reply.ok);
        reply
    }
}

/// Runs `filesystem ARGS --root ROOT` (a subcommand such as `audit restore`) and returns
/// (success, stdout + stderr).
pub fn cli(root: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(FILESYSTEM)
        .args(args)
        .arg("--root")
        .arg(root)
        .env_remove("FILESYSTEM_ROOT")
        .env("TZ", "UTC")
        .output()
        .expect("run filesystem");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Opens a directory (never through a link) so the test can keep working in it by descriptor,
/// whatever name it has at the moment.
pub fn open_dir(path: &Path) -> OwnedFd {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .expect("open dir")
}

/// True when `name` exists in the directory `dir` (not following a link).
pub fn exists_at(dir: &OwnedFd, name: &str) -> bool {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok()
}

/// Creates or replaces the regular file `name` in `dir` with `content`, by descriptor.
pub fn write_at(dir: &OwnedFd, name: &str, content: &[u8]) {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .expect("create file by descriptor");
    rustix::io::write(&fd, content).expect("write by descriptor");
}

/// A thread that exchanges two names in one directory (`renameat2(RENAME_EXCHANGE)`) as fast as
/// it can, counting the exchanges that happened; it stops and is joined when dropped.
pub struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Swapper {
    /// Starts exchanging `a` and `b` inside `dir`.
    pub fn start(dir: &Path, a: &str, b: &str) -> Swapper {
        Swapper::start_paced(dir, a, b, None)
    }

    /// Like [`Swapper::start`], but after every `burst` of exchanges it puts the names back as
    /// they started and rests for the same time. For a racer that is a whole process (a CLI
    /// subcommand walks the path many times): under nonstop exchanges it may never get through,
    /// and a race with no success proves nothing. With rests, runs that start in a burst and end
    /// in a rest succeed while they were raced.
    pub fn start_with_rests(dir: &Path, a: &str, b: &str, burst: Duration) -> Swapper {
        Swapper::start_paced(dir, a, b, Some(burst))
    }

    fn start_paced(dir: &Path, a: &str, b: &str, burst: Option<Duration>) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let dir_fd = open_dir(dir);
        let (a, b) = (a.to_string(), b.to_string());
        let thread = {
            let (stop, swaps, failures) = (stop.clone(), swaps.clone(), failures.clone());
            std::thread::spawn(move || {
                let exchange = || {
                    match rustix::fs::renameat_with(
                        &dir_fd,
                        a.as_str(),
                        &dir_fd,
                        b.as_str(),
                        RenameFlags::EXCHANGE,
                    ) {
                        Ok(()) => swaps.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failures.fetch_add(1, Ordering::Relaxed),
                    };
                };
                let mut burst_start = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    exchange();
                    // Leave the server a share of the CPU on a small machine.
                    std::thread::yield_now();
                    if let Some(burst) = burst {
                        if burst_start.elapsed() >= burst {
                            if swaps.load(Ordering::Relaxed) % 2 == 1 {
                                exchange();
                            }
                            std::thread::sleep(burst);
                            burst_start = Instant::now();
                        }
                    }
                }
                // Leave the names as they started, so later checks find the directory.
                if swaps.load(Ordering::Relaxed) % 2 == 1 {
                    let _ = rustix::fs::renameat_with(
                        &dir_fd,
                        a.as_str(),
                        &dir_fd,
                        b.as_str(),
                        RenameFlags::EXCHANGE,
                    );
                }
            })
        };
        Swapper {
            stop,
            swaps,
            failures,
            thread: Some(thread),
        }
    }

    /// Stops the thread and returns how many exchanges it made.
    pub fn finish(mut self) -> u64 {
        self.halt();
        self.swaps.load(Ordering::Relaxed)
    }

    /// Stops, then fails unless the exchanges really happened (at least `min`).
    pub fn finish_checked(self, min: u64) -> u64 {
        let failures = self.failures.load(Ordering::Relaxed);
        let swaps = self.finish();
        assert!(
            swaps >= min,
            "the swapper made only {swaps} exchanges ({failures} failed), so the race proved nothing"
        );
        swaps
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("swapper thread");
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Runs `step` with a rising counter until `duration` has passed (at least once).
pub fn for_duration(duration: Duration, mut step: impl FnMut(u64)) -> u64 {
    let end = Instant::now() + duration;
    let mut i = 0;
    loop {
        step(i);
        i += 1;
        if Instant::now() >= end {
            return i;
        }
    }
}
