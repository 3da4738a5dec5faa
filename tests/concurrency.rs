#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Concurrency: two `--backup` servers mutating one root in parallel, and one `--server` daemon
//! serving interleaved calls for several roots.
//!
//! The first test pipelines hundreds of writes, edits, moves, deletes, undos and redos from two
//! server processes at once, then inspects the root and its `.filesystem/` store directly: every
//! file and every snapshot must be content some call wrote (never a mix), every version in a
//! history must be the one its call reported, every acknowledged write must still be reachable
//! through a history or the trash (unless a later write after an undo dropped it, as designed),
//! every `head` must be sound, the logs must parse and the trash ids must be unique and rising.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use test_support::mcp::{text, Session};
use test_support::temp::canonical_temp_dir;

/// Calls each of the two servers makes.
const CALLS_PER_SERVER: usize = 400;
/// File names the move group spreads over.
const MOVE_NAMES: u64 = 16;

/// A small deterministic generator, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write,
    Edit,
    Undo,
    Redo,
    Move,
    Delete,
}

/// Which part of the workspace an operation touches; the groups differ in which losses are
/// legitimate (only a write after an undo may drop versions, and only the undo group undoes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Undo,
    Move,
    Delete,
}

/// One call one server makes, and what came of it.
#[derive(Debug, Clone)]
struct Op {
    server: char,
    seq: usize,
    kind: Kind,
    group: Group,
    path: String,
    /// The unique tag of the content a write or edit introduces.
    tag: String,
    args: Value,
    ok: bool,
    reply: String,
    /// The version a write or edit reported.
    version: Option<u64>,
    /// The trash id a delete reported.
    trash_id: Option<u64>,
}

/// The body of a write tagged `tag`: derived from the tag, so a mix of two writes is visible.
fn body(tag: &str, len: usize) -> String {
    format!("{tag}.").repeat(len / (tag.len() + 1) + 1)[..len].to_string()
}

fn write_content(tag: &str, len: usize) -> String {
    format!("W {tag} {len}\n{}\n#END\n", body(tag, len))
}

/// A file as the workload writes it: one write, then the lines of the edits made since.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Doc {
    write: String,
    edits: Vec<String>,
}

impl Doc {
    /// The tag of the call that produced this exact content (its last edit, or its write).
    fn last(&self) -> &str {
        self.edits.last().unwrap_or(&self.write)
    }
}

fn parse_doc(bytes: &[u8]) -> Result<Doc, String> {
    let s = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut lines = s.split('\n');
    let head = lines.next().ok_or("empty")?;
    let mut words = head.split(' ');
    let (Some("W"), Some(tag), Some(len), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(format!("bad first line {head:?}"));
    };
    let len: usize = len.parse().map_err(|_| format!("bad length in {head:?}"))?;
    let b = lines.next().ok_or("no body")?;
    if b != body(tag, len) {
        return Err(format!("body of {tag} is not its own ({} bytes)", b.len()));
    }
    let mut edits = Vec::new();
    for line in lines.by_ref() {
        if line == "#END" {
            break;
        }
        let e = line
            .strip_prefix("E ")
            .ok_or_else(|| format!("bad edit line {line:?}"))?;
        edits.push(e.to_string());
    }
    if lines.collect::<Vec<_>>() != [""] || !s.ends_with("#END\n") {
        return Err("content after #END or no #END".into());
    }
    Ok(Doc {
        write: tag.to_string(),
        edits,
    })
}

/// The number after `word ` in a reply (`version 3`, `as id 7`).
fn number_after(text: &str, word: &str) -> Option<u64> {
    let rest = &text[text.find(word)? + word.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The calls server `server` makes, in order.
fn workload(server: char, seed: u64) -> Vec<Op> {
    let mut rng = Rng(seed);
    let mut ops = Vec::new();
    for seq in 0..CALLS_PER_SERVER {
        let tag = format!("{server}{seq}");
        let roll = rng.below(100);
        let (group, path) = if roll < 40 {
            let p = match rng.below(5) {
                4 => format!("u/own{server}.txt"),
                n => format!("u/s{n}.txt"),
            };
            (Group::Undo, p)
        } else if roll < 75 {
            // Writes create files among the first few names only, so that moves, which spread
            // files over all the names, keep finding free destinations.
            let names = if roll < 50 { 4 } else { MOVE_NAMES };
            (Group::Move, format!("m/{}.txt", rng.below(names)))
        } else {
            let p = match rng.below(4) {
                3 => format!("d/own{server}{}.txt", rng.below(3)),
                n => format!("d/s{n}.txt"),
            };
            (Group::Delete, p)
        };
        let r = rng.below(100);
        let kind = match group {
            Group::Undo => match r {
                0..=34 => Kind::Write,
                35..=69 => Kind::Edit,
                70..=89 => Kind::Undo,
                _ => Kind::Redo,
            },
            Group::Move if roll < 50 => Kind::Write,
            Group::Move => match r {
                0..=29 => Kind::Edit,
                _ => Kind::Move,
            },
            Group::Delete => match r {
                0..=49 => Kind::Write,
                50..=69 => Kind::Edit,
                _ => Kind::Delete,
            },
        };
        let (tool, args) = match kind {
            Kind::Write => {
                let len = 1 + rng.below(6000) as usize;
                (
                    "write_file",
                    json!({"path": path, "content": write_content(&tag, len)}),
                )
            }
            Kind::Edit => (
                "edit_file",
                json!({"path": path, "edits": [{"oldText": "#END", "newText": format!("E {tag}\n#END")}]}),
            ),
            Kind::Undo => (
                "undo_file",
                json!({"path": path, "steps": 1 + rng.below(2)}),
            ),
            Kind::Redo => ("redo_file", json!({"path": path})),
            Kind::Move => {
                let dest = format!("m/{}.txt", rng.below(MOVE_NAMES));
                ("move_file", json!({"source": path, "destination": dest}))
            }
            Kind::Delete => ("delete_file", json!({"path": path})),
        };
        ops.push(Op {
            server,
            seq,
            kind,
            group,
            path,
            tag,
            args: json!({"name": tool, "arguments": args}),
            ok: false,
            reply: String::new(),
            version: None,
            trash_id: None,
        });
    }
    ops
}

/// Sends every call of `ops` without waiting (from a second thread), then reads every reply.
fn run_pipelined(mut session: Session, mut ops: Vec<Op>) -> Vec<Op> {
    session.initialize("2025-06-18");
    let mut stdin = session.stdin.take().expect("stdin");
    let requests: Vec<Vec<u8>> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let mut line = serde_json::to_vec(&json!({
                "jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": op.args
            }))
            .expect("json");
            line.push(b'\n');
            line
        })
        .collect();
    let sender = std::thread::spawn(move || {
        use std::io::Write;
        for r in &requests {
            stdin.write_all(r).expect("send");
        }
        stdin.flush().expect("flush");
        stdin
    });
    let mut replies: HashMap<u64, Value> = HashMap::new();
    while replies.len() < ops.len() {
        let reply = session.recv();
        let id = reply["id"].as_u64().expect("reply with a numeric id");
        assert!(reply.get("error").is_none(), "JSON-RPC error: {reply}");
        assert!(replies.insert(id, reply).is_none(), "two replies to {id}");
    }
    session.stdin = Some(sender.join().expect("sender"));
    let status = session.close_and_wait();
    assert!(status.success(), "server exited with {status}");
    for (i, op) in ops.iter_mut().enumerate() {
        let result = &replies[&(100 + i as u64)]["result"];
        op.ok = result["isError"] != json!(true);
        op.reply = text(result);
        if op.ok {
            if matches!(op.kind, Kind::Write | Kind::Edit) {
                op.version = number_after(&op.reply, "version ");
                assert!(op.version.is_some(), "no version in {:?}", op.reply);
            }
            if op.kind == Kind::Delete {
                op.trash_id = number_after(&op.reply, "as id ");
                assert!(op.trash_id.is_some(), "no trash id in {:?}", op.reply);
            }
        } else {
            // Races make these expected (the other server moved or deleted the file, undo ran
            // out of versions); an IoError would mean the two servers tripped over each other.
            let kind = op.reply.split(':').next().unwrap_or_default();
            assert!(
                ["NotFound", "AlreadyExists", "InvalidArgument"].contains(&kind),
                "{} {:?} failed unexpectedly: {}",
                op.tag,
                op.kind,
                op.reply
            );
        }
    }
    ops
}

/// One version history found in the store: a directory holding `.head` and its snapshots.
struct History {
    dir: PathBuf,
    current: u64,
    newest: u64,
    snapshots: BTreeMap<u64, Vec<u8>>,
}

/// Every history below `dir` (live ones at their paths, trashed ones under `.trash/`).
fn histories(dir: &Path, out: &mut Vec<History>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subdirs = Vec::new();
    let mut head = None;
    let mut snapshots = BTreeMap::new();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e.file_type().expect("type");
        if ft.is_dir() {
            subdirs.push(path);
        } else if name == ".head" {
            head = Some(std::fs::read_to_string(&path).expect("head"));
        } else if name.len() == 5 && name.bytes().all(|b| b.is_ascii_digit()) {
            let n: u64 = name.parse().expect("number");
            snapshots.insert(n, std::fs::read(&path).expect("snapshot"));
        }
    }
    if let Some(head) = head {
        let nums: Vec<u64> = head
            .split_whitespace()
            .map(|n| n.parse().expect("head holds a number"))
            .collect();
        assert_eq!(nums.len(), 1, "head of {} is {head:?}", dir.display());
        // The newest version is the top of the run of snapshots above the head.
        let mut newest = nums[0];
        while snapshots.contains_key(&(newest + 1)) {
            newest += 1;
        }
        out.push(History {
            dir: dir.to_path_buf(),
            current: nums[0],
            newest,
            snapshots,
        });
    }
    for d in subdirs {
        histories(&d, out);
    }
}

/// Workspace files (outside `.filesystem/`), by root-relative path.
fn workspace_files(root: &Path, rel: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(root.join(rel))
        .expect("read_dir")
        .flatten()
    {
        let name = e.file_name();
        if rel.as_os_str().is_empty() && name == ".filesystem" {
            continue;
        }
        let r = rel.join(&name);
        if e.file_type().expect("type").is_dir() {
            workspace_files(root, &r, out);
        } else {
            out.insert(
                r.to_string_lossy().into_owned(),
                std::fs::read(root.join(&r)).expect("read"),
            );
        }
    }
}

/// Lines of a tab-separated store log, each split into fields.
fn log_lines(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{} ends in a torn line",
        path.display()
    );
    text.lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn two_servers_on_one_root_never_corrupt_or_lose_acknowledged_work() {
    let (_dir, root) = canonical_temp_dir();
    let a = Session::start_in(&root, &["--backup"]);
    let b = Session::start_in(&root, &["--backup"]);
    let (wa, wb) = (
        workload('A', 0x9e37_79b9_7f4a_7c15),
        workload('B', 0xd1b5_4a32_d192_ed03),
    );
    let ta = std::thread::spawn(move || run_pipelined(a, wa));
    let tb = std::thread::spawn(move || run_pipelined(b, wb));
    let ops: Vec<Op> = [ta, tb]
        .into_iter()
        .flat_map(|t| t.join().expect("server thread"))
        .collect();
    let by_tag: HashMap<&str, &Op> = ops.iter().map(|o| (o.tag.as_str(), o)).collect();
    let acked = |kind: Kind| ops.iter().filter(move |o| o.ok && o.kind == kind);
    // The workload must have exercised each kind of call, or the checks below prove little.
    for kind in [
        Kind::Write,
        Kind::Edit,
        Kind::Undo,
        Kind::Redo,
        Kind::Move,
        Kind::Delete,
    ] {
        assert!(acked(kind).count() > 0, "no {kind:?} succeeded");
    }

    let state = root.join(".filesystem");
    let mut found = Vec::new();
    // Live histories at their paths, trashed ones under `.trash/`: one walk finds both.
    histories(&state, &mut found);
    assert!(
        !state.join(".orphans").exists(),
        "histories were set aside as orphans"
    );

    // Valid content: one write plus whole edit lines, each from a call that was made.
    let check_doc = |what: &str, bytes: &[u8]| -> Doc {
        let doc = parse_doc(bytes).unwrap_or_else(|e| panic!("{what} is corrupt: {e}"));
        assert!(
            by_tag
                .get(doc.write.as_str())
                .is_some_and(|o| o.kind == Kind::Write),
            "{what} holds a write nobody made: {}",
            doc.write
        );
        for e in &doc.edits {
            assert!(
                by_tag.get(e.as_str()).is_some_and(|o| o.kind == Kind::Edit),
                "{what} holds an edit nobody made: {e}"
            );
        }
        doc
    };

    let mut reachable: BTreeSet<String> = BTreeSet::new();
    for h in &found {
        let shown = h.dir.strip_prefix(&state).expect("inside").display();
        // Sound head: it names versions that exist, and nothing beyond the newest survives.
        assert!(
            1 <= h.current && h.current <= h.newest,
            "{shown}: head {} {}",
            h.current,
            h.newest
        );
        let numbers: Vec<u64> = h.snapshots.keys().copied().collect();
        assert_eq!(
            numbers,
            (1..=h.newest).collect::<Vec<_>>(),
            "{shown}: snapshots do not match the head"
        );
        for (n, bytes) in &h.snapshots {
            let doc = check_doc(&format!("{shown}/{n:05}"), bytes);
            // The call that produced a version reported exactly that version number.
            let maker = by_tag[doc.last()];
            assert!(
                maker.ok && maker.version == Some(*n),
                "{shown}/{n:05} was made by {} which reported {:?} ({})",
                maker.tag,
                maker.version,
                maker.reply
            );
            reachable.insert(doc.last().to_string());
        }
    }

    // The workspace: every file is a valid document equal to its history's current version.
    let mut files = BTreeMap::new();
    workspace_files(&root, Path::new(""), &mut files);
    assert!(!files.is_empty());
    for (rel, bytes) in &files {
        check_doc(rel, bytes);
        let versions = state.join(rel);
        let h = found
            .iter()
            .find(|h| h.dir == versions)
            .unwrap_or_else(|| panic!("{rel} has no history"));
        assert_eq!(
            Some(bytes),
            h.snapshots.get(&h.current),
            "{rel} differs from its current version"
        );
    }

    // The trash: unique, rising ids; each entry there, equal to its history's current version.
    let deleted: Vec<u64> = acked(Kind::Delete).filter_map(|o| o.trash_id).collect();
    let unique: BTreeSet<u64> = deleted.iter().copied().collect();
    assert_eq!(
        unique.len(),
        deleted.len(),
        "a trash id was handed out twice"
    );
    let log = log_lines(&state.join(".deletes"));
    let mut logged = Vec::new();
    for line in &log {
        assert_eq!(line.len(), 4, "bad .deletes line {line:?}");
        assert_eq!(line[1], "delete", "{line:?}");
        logged.push(line[2].parse::<u64>().expect("numeric id"));
    }
    assert!(
        logged.windows(2).all(|w| w[0] < w[1]),
        "trash ids do not rise in log order: {logged:?}"
    );
    assert_eq!(logged.iter().copied().collect::<BTreeSet<_>>(), unique);
    for id in &unique {
        let entry = state.join(".trash").join(format!("{id:05}"));
        let bytes = std::fs::read(&entry).expect("trash entry");
        let doc = check_doc(&format!("trash {id}"), &bytes);
        reachable.insert(doc.last().to_string());
        let h = found
            .iter()
            .find(|h| h.dir == state.join(".trash").join(format!("{id:05}.history")))
            .unwrap_or_else(|| panic!("trash {id} lost its history"));
        assert_eq!(Some(&bytes), h.snapshots.get(&h.current));
    }
    let next: u64 = std::fs::read_to_string(state.join(".next-trash-id"))
        .expect("counter")
        .trim()
        .parse()
        .expect("number");
    assert!(
        unique.iter().all(|id| *id < next),
        "counter {next} behind the ids"
    );

    // No lost acknowledged write. The store drops versions in exactly one case: a write after an
    // undo forgets the undone future. So a write or edit that is nowhere to be found must be in
    // the undo group, and some other acknowledged write there must have landed at or below its
    // version, after it (when both came from one server, whose calls run in order).
    for x in ops
        .iter()
        .filter(|o| o.ok && matches!(o.kind, Kind::Write | Kind::Edit))
    {
        if reachable.contains(&x.tag) {
            continue;
        }
        assert_eq!(
            x.group,
            Group::Undo,
            "acknowledged {:?} {} of {} is lost: {}",
            x.kind,
            x.tag,
            x.path,
            x.reply
        );
        let dropped_by = ops.iter().find(|y| {
            y.ok && matches!(y.kind, Kind::Write | Kind::Edit)
                && y.path == x.path
                && y.tag != x.tag
                && y.version <= x.version
                && (y.server != x.server || y.seq > x.seq)
        });
        assert!(
            dropped_by.is_some(),
            "acknowledged {:?} {} of {} (version {:?}) is lost though no later write replaced it",
            x.kind,
            x.tag,
            x.path,
            x.version
        );
    }

    // The move log and the shared call log parse and account for every call.
    let moves = log_lines(&state.join(".moves"));
    assert!(moves.iter().all(|l| l.len() == 3), "bad .moves line");
    assert_eq!(moves.len(), acked(Kind::Move).count());
    let calls = std::fs::read_to_string(state.join(".calls.jsonl")).expect("call log");
    let mut per_outcome: HashMap<(String, String), usize> = HashMap::new();
    for line in calls.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let key = (
            v["tool"].as_str().expect("tool").to_string(),
            v["outcome"].as_str().expect("outcome").to_string(),
        );
        *per_outcome.entry(key).or_default() += 1;
    }
    let mut expected: HashMap<(String, String), usize> = HashMap::new();
    for o in &ops {
        let tool = o.args["name"].as_str().expect("tool").to_string();
        let outcome = if o.ok { "ok" } else { "error" };
        *expected.entry((tool, outcome.to_string())).or_default() += 1;
    }
    assert_eq!(
        per_outcome, expected,
        "the call log does not match the calls"
    );
}

/// The roots of the `--server` test: siblings, so `../rN` names a neighbour.
const ROOTS: usize = 3;

#[test]
fn a_server_daemon_keeps_interleaved_roots_isolated() {
    let (_base_dir, base) = canonical_temp_dir();
    let roots: Vec<PathBuf> = (0..ROOTS)
        .map(|i| {
            let r = base.join(format!("r{i}"));
            std::fs::create_dir(&r).expect("mkdir");
            r
        })
        .collect();
    let mut s = Session::spawn(
        &[
            "--server".as_ref(),
            "--allow-root".as_ref(),
            base.as_os_str(),
        ],
        &["--backup", "--call-log-args"],
    );
    s.initialize("2025-06-18");

    // Every step is made for each root in turn, all pipelined on the one connection.
    let steps = |i: usize| -> Vec<(&'static str, Value)> {
        let other = (i + 1) % ROOTS;
        vec![
            (
                "write_file",
                json!({"path": format!("mine{i}.txt"), "content": format!("root {i}\n")}),
            ),
            (
                "write_file",
                json!({"path": "same.txt", "content": format!("same name, root {i}\n")}),
            ),
            (
                "edit_file",
                json!({"path": "same.txt", "edits": [{"oldText": "same name", "newText": "edited"}]}),
            ),
            ("undo_file", json!({"path": "same.txt"})),
            ("create_directory", json!({"path": format!("dir{i}")})),
            (
                "move_file",
                json!({"source": format!("mine{i}.txt"), "destination": format!("dir{i}/moved{i}.txt")}),
            ),
            (
                "write_file",
                json!({"path": format!("gone{i}.txt"), "content": "x\n"}),
            ),
            ("delete_file", json!({"path": format!("gone{i}.txt")})),
            ("list_directory", json!({"path": "."})),
            ("read_text_file", json!({"path": "same.txt"})),
            (
                "read_text_file",
                json!({"path": format!("dir{other}/moved{other}.txt")}),
            ),
            (
                "read_text_file",
                json!({"path": format!("../r{other}/same.txt")}),
            ),
            (
                "read_text_file",
                json!({"path": roots[other].join("same.txt")}),
            ),
            (
                "write_file",
                json!({"path": format!("../r{other}/planted.txt"), "content": "no"}),
            ),
            (
                "move_file",
                json!({"source": "same.txt", "destination": format!("../r{other}/stolen.txt")}),
            ),
            ("list_trash", json!({})),
        ]
    };
    let per_root: Vec<Vec<(&str, Value)>> = (0..ROOTS).map(steps).collect();
    let n_steps = per_root[0].len();
    let mut sent: Vec<(usize, usize)> = Vec::new();
    for step in 0..n_steps {
        for (i, calls) in per_root.iter().enumerate() {
            let (tool, args) = &calls[step];
            let mut args = args.clone();
            args["root"] = json!(roots[i]);
            let id = 100 + sent.len();
            s.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": args}}));
            sent.push((i, step));
        }
    }
    let mut replies: HashMap<u64, Value> = HashMap::new();
    while replies.len() < sent.len() {
        let r = s.recv();
        assert!(r.get("error").is_none(), "JSON-RPC error: {r}");
        replies.insert(r["id"].as_u64().expect("id"), r["result"].clone());
    }
    let result = |i: usize, step: usize| -> (bool, String) {
        let k = sent.iter().position(|&x| x == (i, step)).expect("sent");
        let r = &replies[&(100 + k as u64)];
        (r["isError"] != json!(true), text(r))
    };
    let status = s.close_and_wait();
    assert!(status.success());

    for (i, root) in roots.iter().enumerate() {
        let other = (i + 1) % ROOTS;
        for step in 0..10 {
            let (ok, t) = result(i, step);
            assert!(ok, "root {i} step {step} failed: {t}");
        }
        let (_, listing) = result(i, 8);
        assert_eq!(
            listing.lines().collect::<Vec<_>>(),
            [format!("[DIR] dir{i}"), "[FILE] same.txt".to_string()],
            "root {i} sees: {listing}"
        );
        // Each root's same.txt was edited and undone in its own history only.
        let (_, same) = result(i, 9);
        assert_eq!(same, format!("same name, root {i}\n"));
        let (ok, t) = result(i, 10);
        assert!(
            !ok && t.starts_with("NotFound"),
            "root {i} read a neighbour's file: {t}"
        );
        for step in 11..15 {
            let (ok, t) = result(i, step);
            assert!(
                !ok && t.starts_with("PathEscape"),
                "root {i} step {step}: {t}"
            );
        }
        // Independent trash counters: each root's first delete is its id 1.
        let (_, trash) = result(i, 15);
        assert!(trash.contains(&format!("gone{i}.txt")), "{trash}");
        for j in (0..ROOTS).filter(|&j| j != i) {
            assert!(
                !trash.contains(&format!("gone{j}.txt")),
                "root {i} lists {j}'s trash: {trash}"
            );
        }
        assert!(!roots[other].join("planted.txt").exists());
        assert!(!roots[other].join("stolen.txt").exists());

        // On disk: the move, the delete and the history landed in this root's own store.
        let state = root.join(".filesystem");
        let moves = log_lines(&state.join(".moves"));
        assert_eq!(
            moves
                .iter()
                .map(|l| (l[1].clone(), l[2].clone()))
                .collect::<Vec<_>>(),
            [(format!("mine{i}.txt"), format!("dir{i}/moved{i}.txt"))]
        );
        let deletes = log_lines(&state.join(".deletes"));
        assert_eq!(deletes.len(), 1, "{deletes:?}");
        assert_eq!(
            deletes[0][1..],
            ["delete".to_string(), "1".into(), format!("gone{i}.txt")]
        );
        assert!(state.join(".trash/00001").is_file());
        assert!(state.join(format!("dir{i}/moved{i}.txt/.head")).is_file());
        let mut files = BTreeMap::new();
        workspace_files(root, Path::new(""), &mut files);
        assert_eq!(
            files.keys().cloned().collect::<Vec<_>>(),
            [format!("dir{i}/moved{i}.txt"), "same.txt".to_string()]
        );

        // The call log of this root holds exactly its own calls.
        let calls = std::fs::read_to_string(state.join(".calls.jsonl")).expect("call log");
        let lines: Vec<Value> = calls
            .lines()
            .map(|l| serde_json::from_str(l).expect("call log line is JSON"))
            .collect();
        assert_eq!(
            lines.len(),
            n_steps,
            "root {i} logged {} calls",
            lines.len()
        );
        for l in &lines {
            assert_eq!(
                l["args"]["root"],
                json!(root),
                "root {i} logged a foreign call: {l}"
            );
        }
        let tools: Vec<&str> = lines
            .iter()
            .map(|l| l["tool"].as_str().expect("tool"))
            .collect();
        let sent_tools: Vec<&str> = per_root[i].iter().map(|(t, _)| *t).collect();
        assert_eq!(tools, sent_tools);
    }
}
