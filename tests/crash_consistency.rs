#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Crash consistency: the real server (`--backup`, MCP over stdio) is SIGKILLed at seeded random
//! moments during a long stream of writes, edits, moves, deletes, restores, undos and redos, then
//! restarted. After every kill the workspace must hold only whole, acknowledged (or in-flight)
//! contents, `filesystem check` must find no error, and `check --repair` must leave it clean.
//! At the end every acknowledged write must still be found: through undo, through the trash, or
//! (reported separately, see `only_on_disk`) as a snapshot in the store.
//!
//! Contents validate themselves: a header `seq N sum S` where S is a checksum of N and the body,
//! so a torn or mixed file can never pass for a real version.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::{initialize, initialized, outcome, tools_call, Session};
use test_support::temp::canonical_temp_dir;

const PATHS: [&str; 4] = ["a.txt", "b.txt", "d/c.txt", "d/e/f.txt"];
const KILL_ROUNDS: usize = 40;

/// A small deterministic generator (xorshift64*), so every run makes the same choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

fn header(seq: u64, body: &[u8]) -> String {
    format!(
        "seq {seq} sum {:016x}\n",
        fnv(&[seq.to_string().as_bytes(), body])
    )
}

/// A self-validating content: header then `lines` lines of a pattern.
fn content(seq: u64, lines: u64) -> Vec<u8> {
    let mut body = Vec::new();
    for i in 0..lines {
        body.extend_from_slice(format!("line {i} of version {seq} ..........\n").as_bytes());
    }
    let mut out = header(seq, &body).into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The sequence number of a whole, untorn content; `None` for anything else.
fn validate(bytes: &[u8]) -> Option<u64> {
    let nl = bytes.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&bytes[..nl]).ok()?;
    let mut words = head.split(' ');
    let seq: u64 = match (words.next(), words.next()) {
        (Some("seq"), Some(n)) => n.parse().ok()?,
        _ => return None,
    };
    (header(seq, &bytes[nl + 1..]).as_bytes() == &bytes[..=nl]).then_some(seq)
}

/// One running server and its request ids.
struct Server {
    s: Session,
    next_id: i64,
}

impl Server {
    fn start(root: &Path) -> Server {
        let mut cmd = command();
        cmd.arg("--backup")
            .arg("--root")
            .arg(root)
            .env_remove("FILESYSTEM_ROOT");
        let mut s = Session::from_command(cmd);
        s.send(initialize(0, "2025-06-18", "crash-test"));
        s.try_recv().expect("initialize answered");
        s.send(initialized());
        Server { s, next_id: 1 }
    }

    fn request(&mut self, tool: &str, args: Value) {
        let id = self.next_id;
        self.next_id += 1;
        self.s.send(tools_call(id, tool, args));
    }

    /// Calls a tool and waits: (is_error, text).
    fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        self.request(tool, args);
        outcome(&self.s.try_recv().expect("the server answers")["result"])
    }

    /// Sends a call, SIGKILLs the server after `delay`, and returns the reply if it got out.
    fn call_and_kill(mut self, tool: &str, args: Value, delay: Duration) -> Option<(bool, String)> {
        self.request(tool, args);
        std::thread::sleep(delay);
        self.s.child.kill().expect("SIGKILL");
        self.s.child.wait().expect("reap");
        self.s.try_recv().map(|r| outcome(&r["result"]))
    }

    fn stop(mut self) {
        drop(self.s.stdin.take());
        self.s.child.wait().expect("exit on EOF");
    }
}

/// What the test believes about one path's history.
#[derive(Clone, Default, Debug)]
struct Lineage {
    /// Acknowledged contents, oldest first.
    stack: Vec<u64>,
    /// Index of the content the file is at.
    pos: usize,
    /// An undo or redo landed on a version the test never saw acknowledged (a write cut short
    /// by a kill, later saved by the store as an outside change), so where the store's head
    /// sits among `stack` is unknown.
    uncertain: bool,
}

impl Lineage {
    /// A new acknowledged version: as in the store, the versions after the current one are
    /// dropped by design. When the position is unknown, every older version of this lineage
    /// counts as possibly dropped (the test cannot tell which ones the store kept).
    fn write(&mut self, seq: u64, dropped: &mut BTreeSet<u64>) {
        if self.uncertain {
            dropped.extend(self.stack.drain(..));
            self.uncertain = false;
        } else if !self.stack.is_empty() {
            dropped.extend(self.stack.drain(self.pos + 1..));
        }
        self.stack.push(seq);
        self.pos = self.stack.len() - 1;
    }

    /// An undo or redo left the file at `seq`.
    fn step_to(&mut self, seq: u64) {
        match self.stack.iter().position(|&s| s == seq) {
            Some(i) => self.pos = i,
            None => self.uncertain = true,
        }
    }
}

#[derive(Default)]
struct Model {
    /// Workspace path → seq of its content.
    files: BTreeMap<String, u64>,
    lineage: BTreeMap<String, Lineage>,
    /// Trash id → (original path, lineage).
    trash: BTreeMap<u64, (String, Lineage)>,
    acked: BTreeSet<u64>,
    /// Contents of calls cut short by a kill: legitimate history, never required.
    in_flight: BTreeSet<u64>,
    /// Versions a write after an undo dropped by design.
    dropped: BTreeSet<u64>,
}

/// One planned call.
#[derive(Debug, Clone)]
enum Op {
    Write(String, u64),
    Edit(String, u64, u64),
    Move(String, String),
    Delete(String),
    Restore(u64, String),
    Undo(String, u64),
    Redo(String),
}

impl Op {
    fn call(&self, root: &Path) -> (&'static str, Value) {
        match self {
            Op::Write(p, seq) => {
                let lines = 1 + seq * 7919 % 3000;
                let c = String::from_utf8(content(*seq, lines)).expect("utf8");
                ("write_file", json!({"path": p, "content": c}))
            }
            Op::Edit(p, old, new) => {
                let bytes = std::fs::read(root.join(p)).expect("read for edit");
                let nl = bytes.iter().position(|&b| b == b'\n').expect("header");
                let body = &bytes[nl + 1..];
                let old_h = String::from_utf8(bytes[..=nl].to_vec()).expect("utf8");
                assert_eq!(validate(&bytes), Some(*old));
                (
                    "edit_file",
                    json!({"path": p, "edits": [{"oldText": old_h, "newText": header(*new, body)}]}),
                )
            }
            Op::Move(a, b) => ("move_file", json!({"source": a, "destination": b})),
            Op::Delete(p) => ("delete_file", json!({"path": p})),
            Op::Restore(id, dest) => ("restore_file", json!({"id": id, "destination": dest})),
            Op::Undo(p, steps) => ("undo_file", json!({"path": p, "steps": steps})),
            Op::Redo(p) => ("redo_file", json!({"path": p})),
        }
    }
}

impl Model {
    fn plan(&self, rng: &mut Rng, seq: &mut u64) -> Op {
        let present: Vec<&String> = self.files.keys().collect();
        let free: Vec<&str> = PATHS
            .iter()
            .copied()
            .filter(|p| {
                !self.files.contains_key(*p)
                    && !self.files.keys().any(|f| f.starts_with(&format!("{p}/")))
            })
            .collect();
        loop {
            *seq += 1;
            match rng.below(10) {
                0..=2 => {
                    let p = PATHS[rng.below(PATHS.len() as u64) as usize];
                    if self.files.keys().any(|f| f.starts_with(&format!("{p}/"))) {
                        continue;
                    }
                    return Op::Write(p.into(), *seq);
                }
                3 if !present.is_empty() => {
                    let p = present[rng.below(present.len() as u64) as usize];
                    return Op::Edit(p.clone(), self.files[p], *seq);
                }
                4 if !present.is_empty() && !free.is_empty() => {
                    let a = present[rng.below(present.len() as u64) as usize];
                    let b = free[rng.below(free.len() as u64) as usize];
                    return Op::Move(a.clone(), b.into());
                }
                5 if !present.is_empty() => {
                    let p = present[rng.below(present.len() as u64) as usize];
                    return Op::Delete(p.clone());
                }
                6 if !self.trash.is_empty() && !free.is_empty() => {
                    let ids: Vec<&u64> = self.trash.keys().collect();
                    let id = *ids[rng.below(ids.len() as u64) as usize];
                    let dest = free[rng.below(free.len() as u64) as usize];
                    return Op::Restore(id, dest.into());
                }
                7 | 8 => {
                    let can: Vec<(&String, usize)> = self
                        .files
                        .keys()
                        .filter_map(|p| self.lineage.get(p).map(|l| (p, l.pos)))
                        .filter(|(_, pos)| *pos > 0)
                        .collect();
                    if can.is_empty() {
                        continue;
                    }
                    let (p, pos) = can[rng.below(can.len() as u64) as usize];
                    return Op::Undo(p.clone(), 1 + rng.below(pos.min(2) as u64));
                }
                9 => {
                    let can: Vec<&String> = self
                        .files
                        .keys()
                        .filter(|p| {
                            self.lineage
                                .get(*p)
                                .is_some_and(|l| l.pos + 1 < l.stack.len())
                        })
                        .collect();
                    if can.is_empty() {
                        continue;
                    }
                    return Op::Redo(can[rng.below(can.len() as u64) as usize].clone());
                }
                _ => continue,
            }
        }
    }

    /// Applies an acknowledged call.
    fn apply(&mut self, op: &Op, text: &str, root: &Path) {
        match op {
            Op::Write(p, seq) | Op::Edit(p, _, seq) => {
                self.acked.insert(*seq);
                self.files.insert(p.clone(), *seq);
                self.lineage
                    .entry(p.clone())
                    .or_default()
                    .write(*seq, &mut self.dropped);
            }
            Op::Move(a, b) => {
                let seq = self.files.remove(a).expect("moved file known");
                self.files.insert(b.clone(), seq);
                let l = self.lineage.remove(a).unwrap_or_default();
                self.lineage.insert(b.clone(), l);
            }
            Op::Delete(p) => {
                let id: u64 = text
                    .split("as id ")
                    .nth(1)
                    .and_then(|t| t.split(';').next())
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or_else(|| panic!("trash id in {text:?}"));
                self.files.remove(p);
                let l = self.lineage.remove(p).unwrap_or_default();
                self.trash.insert(id, (p.clone(), l));
            }
            Op::Restore(id, dest) => {
                let (_, l) = self.trash.remove(id).expect("restored id known");
                let seq = validate(&std::fs::read(root.join(dest)).expect("restored"))
                    .expect("restored content is whole");
                self.files.insert(dest.clone(), seq);
                self.lineage.insert(dest.clone(), l);
            }
            Op::Undo(p, _) | Op::Redo(p) => {
                let seq = validate(&std::fs::read(root.join(p)).expect("stepped file"))
                    .expect("undo/redo gives a whole content");
                assert!(
                    self.acked.contains(&seq) || self.in_flight.contains(&seq),
                    "{op:?} produced content {seq}, which was never written"
                );
                self.files.insert(p.clone(), seq);
                if let Some(l) = self.lineage.get_mut(p) {
                    l.step_to(seq);
                }
            }
        }
    }
}

/// Every regular workspace file outside the state directories: path → bytes.
fn workspace(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(root.join(dir)).expect("read_dir") {
            let e = e.expect("entry");
            let rel = dir.join(e.file_name());
            let name = rel.to_string_lossy().into_owned();
            if name == ".filesystem" || name == ".shelpa" {
                continue;
            }
            // Leftover temporaries are `check`'s business (it reports and repairs them).
            if e.file_name()
                .to_string_lossy()
                .starts_with(".filesystem-tmp-")
            {
                continue;
            }
            let t = e.file_type().expect("type");
            if t.is_dir() {
                walk(root, &rel, out);
            } else {
                out.insert(name, std::fs::read(root.join(&rel)).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, Path::new(""), &mut out);
    out
}

fn check(root: &Path, repair: bool) -> (i32, Value) {
    let mut cmd = command();
    cmd.arg("check").arg("--json").arg("--root").arg(root);
    if repair {
        cmd.arg("--repair");
    }
    let out = cmd
        .env_remove("FILESYSTEM_ROOT")
        .output()
        .expect("run check");
    let v: Value = serde_json::from_slice(&out.stdout).expect("check prints JSON");
    (out.status.code().unwrap_or(-1), v)
}

/// Every `.head` under the store holds one version number whose snapshot, and every one below
/// it, exists beside it.
fn heads_name_existing_snapshots(dir: &Path) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let e = e.expect("entry");
        let p = e.path();
        let t = e.file_type().expect("type");
        if t.is_dir() {
            heads_name_existing_snapshots(&p);
        } else if e.file_name() == ".head" {
            let text = std::fs::read_to_string(&p).expect("head");
            let nums: Vec<u64> = text
                .split_whitespace()
                .map(|n| n.parse().expect("number"))
                .collect();
            assert_eq!(nums.len(), 1, "{}: {text:?}", p.display());
            for v in 1..=nums[0] {
                let snap = dir.join(format!("{v:05}"));
                assert!(snap.exists(), "{} names {v}, missing", p.display());
            }
        }
    }
}

/// Every snapshot content anywhere in the store.
fn snapshots_on_disk(dir: &Path, out: &mut BTreeSet<u64>) {
    let Ok(list) = std::fs::read_dir(dir) else {
        return;
    };
    for e in list.flatten() {
        let t = e.file_type().expect("type");
        if t.is_dir() {
            snapshots_on_disk(&e.path(), out);
        } else if t.is_file() {
            if let Some(seq) = std::fs::read(e.path()).ok().as_deref().and_then(validate) {
                out.insert(seq);
            }
        }
    }
}

/// Walks `path` forward with redo to its newest version, then back with undo to its first,
/// collecting every content seen.
fn undo_chain(server: &mut Server, root: &Path, path: &str, found: &mut BTreeSet<u64>) {
    loop {
        if let Some(seq) = std::fs::read(root.join(path))
            .ok()
            .as_deref()
            .and_then(validate)
        {
            found.insert(seq);
        }
        let (err, _) = server.call("redo_file", json!({"path": path}));
        if err {
            break;
        }
    }
    loop {
        if let Some(seq) = std::fs::read(root.join(path))
            .ok()
            .as_deref()
            .and_then(validate)
        {
            found.insert(seq);
        }
        let (err, _) = server.call("undo_file", json!({"path": path}));
        if err {
            return;
        }
    }
}

#[test]
fn killed_at_random_moments_the_store_stays_consistent_and_nothing_acknowledged_is_lost() {
    let (_tmp, root) = canonical_temp_dir();
    let mut rng = Rng(0x5eed_c0ff_ee15_dead);
    let mut model = Model::default();
    let mut seq = 0;
    let mut acked_at_kill = 0;
    for round in 0..KILL_ROUNDS {
        let mut server = Server::start(&root);
        for _ in 0..(2 + rng.below(6)) {
            let op = model.plan(&mut rng, &mut seq);
            let (tool, args) = op.call(&root);
            let (err, text) = server.call(tool, args);
            if std::env::var_os("CRASH_TRACE").is_some() {
                eprintln!("{round}: {op:?} -> {text}");
            }
            // After a crash the store may hold more versions than the test knows of (a write cut
            // short after its snapshot is saved later as an outside change), so how far undo and
            // redo can step is the store's call; a refusal changes nothing.
            if err
                && matches!(op, Op::Undo(..) | Op::Redo(..))
                && text.starts_with("InvalidArgument")
            {
                continue;
            }
            assert!(!err, "round {round}: {op:?} failed: {text}");
            model.apply(&op, &text, &root);
        }
        let op = model.plan(&mut rng, &mut seq);
        let before = workspace(&root);
        let (tool, args) = op.call(&root);
        let delay = Duration::from_micros(rng.below(4000));
        if let Op::Write(_, s) | Op::Edit(_, _, s) = &op {
            model.in_flight.insert(*s);
        }
        let outcome = server.call_and_kill(tool, args, delay);
        if std::env::var_os("CRASH_TRACE").is_some() {
            eprintln!("{round}: KILL {op:?} -> {outcome:?}");
        }
        match outcome {
            Some((false, text)) => {
                acked_at_kill += 1;
                model.apply(&op, &text, &root);
            }
            // As above: how far undo and redo can step after earlier crashes is the store's call.
            Some((true, text))
                if matches!(op, Op::Undo(..) | Op::Redo(..))
                    && text.starts_with("InvalidArgument") => {}
            Some((true, text)) => panic!("round {round}: {op:?} failed: {text}"),
            None => resync(&mut model, &op, &before, &root, round),
        }
        // Whatever happened, every workspace file is whole and known.
        let now = workspace(&root);
        for (p, bytes) in &now {
            let seq = validate(bytes)
                .unwrap_or_else(|| panic!("round {round}: {p} is torn or mixed after {op:?}"));
            assert_eq!(
                model.files.get(p),
                Some(&seq),
                "round {round}: {p} after {op:?}"
            );
        }
        assert_eq!(
            now.len(),
            model.files.len(),
            "round {round}: workspace {:?} vs model {:?}",
            now.keys().collect::<Vec<_>>(),
            model.files
        );
        heads_name_existing_snapshots(&root.join(".filesystem"));
        let (_, report) = check(&root, false);
        assert_eq!(report["errors"], 0, "round {round}: {report:#}");
        if report["clean"] != true {
            let (_, repaired) = check(&root, true);
            assert_eq!(repaired["clean"], true, "round {round}: {repaired:#}");
            let (code, after) = check(&root, false);
            assert_eq!(code, 0, "round {round}: {after:#}");
        }
    }
    // Every acknowledged write is still there: undo every file to its start, restore every trash
    // entry to a fresh place and undo that too.
    let mut server = Server::start(&root);
    let mut found = BTreeSet::new();
    let files: Vec<String> = model.files.keys().cloned().collect();
    for p in &files {
        undo_chain(&mut server, &root, p, &mut found);
    }
    for id in model.trash.keys().copied().collect::<Vec<_>>() {
        let dest = format!("restored/{id}");
        let (err, text) = server.call("restore_file", json!({"id": id, "destination": dest}));
        assert!(!err, "restore {id}: {text}");
        undo_chain(&mut server, &root, &dest, &mut found);
    }
    server.stop();
    let mut on_disk = BTreeSet::new();
    snapshots_on_disk(&root.join(".filesystem"), &mut on_disk);
    let required: BTreeSet<u64> = model.acked.difference(&model.dropped).copied().collect();
    let lost: Vec<u64> = required
        .iter()
        .filter(|s| !found.contains(s) && !on_disk.contains(s))
        .copied()
        .collect();
    assert!(lost.is_empty(), "acknowledged versions lost: {lost:?}");
    let only_on_disk: Vec<u64> = required.difference(&found).copied().collect();
    eprintln!(
        "{} acknowledged versions ({} dropped by design), {acked_at_kill} acknowledged just before a kill; not reachable by undo/trash but kept in the store: {only_on_disk:?}",
        model.acked.len(),
        model.dropped.len()
    );
}

/// After a call cut short, the workspace is either as before it or as after it; the model
/// follows whichever happened.
fn resync(
    model: &mut Model,
    op: &Op,
    before: &BTreeMap<String, Vec<u8>>,
    root: &Path,
    round: usize,
) {
    // A write asks to drop the undone versions after the current one. Cut short after its new
    // version reached the history but before the file was replaced, it has done so although the
    // file looks untouched: those versions count as dropped by design either way.
    if let Op::Write(p, _) | Op::Edit(p, _, _) = op {
        if let Some(l) = model.lineage.get(p) {
            let from = if l.uncertain { 0 } else { l.pos + 1 };
            model.dropped.extend(l.stack.iter().skip(from).copied());
        }
    }
    let now = workspace(root);
    if &now == before {
        return;
    }
    match op {
        Op::Write(p, s) | Op::Edit(p, _, s) => {
            assert_eq!(
                now.get(p).and_then(|b| validate(b)),
                Some(*s),
                "round {round}: {p} after a cut-short {op:?}"
            );
            model.files.insert(p.clone(), *s);
            // The write finished with only its reply lost: it is part of the history now.
            model
                .lineage
                .entry(p.clone())
                .or_default()
                .write(*s, &mut model.dropped);
        }
        Op::Move(a, b) => {
            assert!(
                !now.contains_key(a) && now.contains_key(b),
                "round {round}: {op:?}"
            );
            let seq = model.files.remove(a).expect("known");
            model.files.insert(b.clone(), seq);
            // The history may or may not have followed; the lineage goes with the file.
            let l = model.lineage.remove(a).unwrap_or_default();
            model.lineage.insert(b.clone(), l);
        }
        Op::Delete(p) => {
            assert!(!now.contains_key(p), "round {round}: {op:?}");
            model.files.remove(p);
            // The trash id is unknown (the reply was lost); list_trash finds it. The lineage
            // goes with the entry, as its history does.
            let lineage = model.lineage.remove(p).unwrap_or_default();
            discover_trash(model, root, p, lineage);
        }
        Op::Restore(id, dest) => {
            let seq = validate(now.get(dest).expect("restored")).expect("whole");
            model.files.insert(dest.clone(), seq);
            let (_, l) = model.trash.remove(id).expect("known");
            model.lineage.insert(dest.clone(), l);
        }
        Op::Undo(p, _) | Op::Redo(p) => {
            let seq = validate(now.get(p).expect("stepped")).expect("whole");
            assert!(
                model.acked.contains(&seq) || model.in_flight.contains(&seq),
                "round {round}: {op:?} gave {seq}"
            );
            model.files.insert(p.clone(), seq);
            // The step may have finished with only its reply lost: what it skipped may be
            // dropped by the next write, exactly as after an acknowledged undo.
            if let Some(l) = model.lineage.get_mut(p) {
                l.step_to(seq);
            }
        }
    }
}

/// Finds the trash id of a delete whose reply was lost.
fn discover_trash(model: &mut Model, root: &Path, path: &str, lineage: Lineage) {
    let mut server = Server::start(root);
    let (_, text) = server.call("list_trash", json!({}));
    server.stop();
    let known: BTreeSet<u64> = model.trash.keys().copied().collect();
    for line in text.lines() {
        let id = line
            .split(|c: char| !c.is_ascii_digit())
            .find(|t| !t.is_empty())
            .and_then(|t| t.parse::<u64>().ok());
        if let Some(id) = id {
            if !known.contains(&id) && line.contains(path) {
                if std::env::var_os("CRASH_TRACE").is_some() {
                    eprintln!("discovered trash id {id} for the cut-short delete of {path}");
                }
                model.trash.insert(id, (path.to_string(), lineage));
                return;
            }
        }
    }
    panic!("a cut-short delete of {path} moved it away but list_trash does not show it: {text}");
}
