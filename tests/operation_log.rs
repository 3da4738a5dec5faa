#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The operation log end to end, through the real binary: sessions of many mixed calls in each
//! mode are reverted to a byte-identical tree (directories, modes and links included) and the
//! revert is reverted back; sessions interleaved on one root are reverted one at a time; a path
//! changed outside the server is left alone unless `--force`; a revert killed after each of its
//! steps in turn loses nothing and leaves `check` clean; a torn last entry is mended by
//! `check --repair`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use test_support::cli::{in_root, printed};
use test_support::mcp::Client;
use test_support::temp::canonical_temp_dir;

const STOP_AFTER: &str = "FILESYSTEM_TEST_STOP_AFTER";

/// What a tree holds, as a user would compare it: each path's kind, bytes, mode, link target.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(PathBuf),
}

/// Everything under `root` but the server's own `.filesystem/` and `.shelpa/`.
fn tree(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir") {
            let e = e.expect("entry");
            let rel = e.path().strip_prefix(root).expect("under").to_path_buf();
            if rel == Path::new(".filesystem") || rel == Path::new(".shelpa") {
                continue;
            }
            let meta = std::fs::symlink_metadata(e.path()).expect("meta");
            let mode = meta.permissions().mode() & 0o7777;
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(e.path()).expect("link"))
            } else if meta.is_dir() {
                stack.push(e.path());
                Node::Dir(mode)
            } else {
                Node::File(std::fs::read(e.path()).expect("read"), mode)
            };
            out.insert(rel, node);
        }
    }
    out
}

fn run(root: &Path, args: &[&str], stop: Option<&str>) -> Output {
    let mut cmd = in_root(root, args);
    cmd.env_remove(STOP_AFTER);
    if let Some(s) = stop {
        cmd.env(STOP_AFTER, s);
    }
    cmd.output().expect("run filesystem")
}

/// `filesystem ARGS` that must succeed; its output.
fn ok(root: &Path, args: &[&str]) -> String {
    let out = run(root, args, None);
    let text = printed(&out);
    assert!(out.status.success(), "{args:?}: {text}");
    text
}

/// The log's entries, newest first, as JSON.
fn entries(root: &Path) -> Vec<Value> {
    ok(root, &["log", "--format", "json", "--limit", "100000"])
        .lines()
        .map(|l| serde_json::from_str(l).expect("an entry"))
        .collect()
}

/// The session id of the newest entry.
fn newest_session(root: &Path) -> String {
    entries(root)[0]["session"]["id"]
        .as_str()
        .expect("session id")
        .to_string()
}

/// The id of the revert's own entry, from `revert`'s output.
fn revert_entry(text: &str) -> String {
    let at = text
        .find("as operation ")
        .unwrap_or_else(|| panic!("the revert names its entry: {text}"))
        + 13;
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .expect("id")
        .to_string()
}

/// A small deterministic generator, so a failure can be replayed.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// A tree of files with several modes, nested directories (one of mode 0700) and links.
fn seed(root: &Path) {
    std::fs::create_dir_all(root.join("src/deep")).expect("mkdir");
    std::fs::create_dir(root.join("private")).expect("mkdir");
    std::fs::set_permissions(root.join("private"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    for (p, text, mode) in [
        ("README", "hello\n", 0o644),
        ("src/main.rs", "fn main() {}\n", 0o644),
        ("src/deep/run.sh", "#!/bin/sh\necho hi\n", 0o755),
        ("private/key", "secret\n", 0o600),
    ] {
        std::fs::write(root.join(p), text).expect("write");
        std::fs::set_permissions(root.join(p), std::fs::Permissions::from_mode(mode))
            .expect("chmod");
    }
    std::os::unix::fs::symlink("src/main.rs", root.join("main-link")).expect("symlink");
    std::os::unix::fs::symlink("missing", root.join("dangling")).expect("symlink");
}

/// `calls` mixed filesystem-mode calls (creates, writes, edits, moves, deletes, restores,
/// directories, undo and redo) through one server; returns how many succeeded.
fn filesystem_session(root: &Path, calls: usize, seed_value: u64) -> usize {
    let mut c = Client::start(root, &["--backup", "--tools", "extended"]);
    let mut rng = Lcg(seed_value);
    let mut files: Vec<String> = vec![
        "README".into(),
        "src/main.rs".into(),
        "src/deep/run.sh".into(),
        "private/key".into(),
    ];
    let mut others: Vec<String> = vec!["main-link".into(), "dangling".into()];
    let mut trash: Vec<u64> = Vec::new();
    let mut fresh = 0;
    let mut new_name = |rng: &mut Lcg| {
        fresh += 1;
        let dirs = ["", "src/", "new/", "new/sub/", "private/"];
        format!("{}f{fresh}.txt", dirs[rng.next(dirs.len())])
    };
    let mut succeeded = 0;
    for i in 0..calls {
        let kind = rng.next(10);
        let reply = match kind {
            0 | 1 => {
                let p = new_name(&mut rng);
                let r = c.call(
                    "create_file",
                    json!({"path": p, "content": format!("new {i}\n")}),
                );
                if r.ok {
                    files.push(p);
                }
                r
            }
            2 | 3 if !files.is_empty() => {
                let p = files[rng.next(files.len())].clone();
                c.call(
                    "write_file",
                    json!({"path": p, "content": format!("written {i}\n")}),
                )
            }
            4 if !files.is_empty() => {
                let p = files[rng.next(files.len())].clone();
                let now = std::fs::read_to_string(root.join(&p)).unwrap_or_default();
                c.call(
                    "edit_file",
                    json!({"path": p, "edits": [{"oldText": now, "newText": format!("{now}edit {i}\n")}]}),
                )
            }
            5 if !files.is_empty() => {
                let from = files.remove(rng.next(files.len()));
                let to = new_name(&mut rng);
                let r = c.call("move_file", json!({"source": from, "destination": to}));
                files.push(if r.ok { to } else { from });
                r
            }
            6 if !files.is_empty() || !others.is_empty() => {
                let pool = if others.is_empty() || rng.next(3) > 0 {
                    &mut files
                } else {
                    &mut others
                };
                if pool.is_empty() {
                    continue;
                }
                let p = pool.remove(rng.next(pool.len()));
                let r = c.call("delete_file", json!({"path": p}));
                if let Some(at) = r.text.find("as id ") {
                    let id: String = r.text[at + 6..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    trash.push(id.parse().expect("trash id"));
                }
                r
            }
            7 if !trash.is_empty() => {
                let id = trash.remove(rng.next(trash.len()));
                let r = c.call("restore_file", json!({"id": id}));
                // Whatever came back is a path that exists again; the listing learns it later.
                r
            }
            8 => {
                let d = format!("dirs/d{}/e{}", rng.next(4), rng.next(3));
                c.call("create_directory", json!({"path": d}))
            }
            _ if !files.is_empty() => {
                let p = files[rng.next(files.len())].clone();
                if rng.next(2) == 0 {
                    c.call("undo_file", json!({"path": p}))
                } else {
                    c.call("redo_file", json!({"path": p}))
                }
            }
            _ => continue,
        };
        succeeded += usize::from(reply.ok);
        // The files a restore brought back are found again by looking.
        if kind == 7 && reply.ok {
            files = tree(root)
                .into_iter()
                .filter(|(_, n)| matches!(n, Node::File(..)))
                .map(|(p, _)| p.to_string_lossy().into_owned())
                .collect();
        }
    }
    c.close();
    succeeded
}

#[test]
fn a_session_of_mixed_filesystem_calls_reverts_to_the_same_tree_and_the_revert_reverts_back() {
    let (_t, root) = canonical_temp_dir();
    seed(&root);
    let before = tree(&root);
    let succeeded = filesystem_session(&root, 200, 7);
    assert!(succeeded >= 150, "only {succeeded} of 200 calls succeeded");
    let after = tree(&root);
    assert_ne!(before, after);
    let session = newest_session(&root);
    let logged = entries(&root)
        .iter()
        .filter(|e| e["session"]["id"] == json!(session))
        .count();
    assert!(
        logged >= 140,
        "{logged} entries for {succeeded} successful calls"
    );

    let dry = printed(&run(
        &root,
        &["revert", "--session", &session, "--dry-run"],
        None,
    ));
    assert!(dry.contains("would revert"), "{dry}");
    assert_eq!(tree(&root), after, "a dry run changed nothing");

    if std::env::var_os("OPLOG_KEEP").is_some() {
        let _ = std::fs::remove_dir_all("/tmp/oplog-keep");
        std::process::Command::new("cp")
            .args(["-a"])
            .arg(&root)
            .arg("/tmp/oplog-keep")
            .status()
            .expect("cp");
    }
    let text = ok(&root, &["revert", "--session", &session]);
    assert_eq!(tree(&root), before, "{text}");
    let revert = revert_entry(&text);
    if std::env::var_os("OPLOG_KEEP").is_some() {
        let _ = std::fs::remove_dir_all("/tmp/oplog-keep2");
        std::process::Command::new("cp")
            .args(["-a"])
            .arg(&root)
            .arg("/tmp/oplog-keep2")
            .status()
            .expect("cp");
    }

    let again = ok(&root, &["revert", &revert]);
    assert_eq!(tree(&root), after, "{again}");
    let check = run(&root, &["check", "--strict"], None);
    assert!(check.status.success(), "{}", printed(&check));
}

/// `calls` pipe-mode writes (`shelpa_write` new, overwrite and append; `tee` in a pipeline) on
/// files of the session's own.
fn pipe_session(root: &Path, calls: usize, seed_value: u64) -> usize {
    let mut c = Client::start(root, &["--legacy-pipe"]);
    let mut rng = Lcg(seed_value);
    let mut mine: Vec<String> = Vec::new();
    let mut succeeded = 0;
    for i in 0..calls {
        let reply = match rng.next(4) {
            0 => {
                let p = format!("{}p{i}.txt", ["", "src/"][rng.next(2)]);
                let r = c.call(
                    "shelpa_write",
                    json!({"path": p, "content": format!("w {i}\n")}),
                );
                if r.ok {
                    mine.push(p);
                }
                r
            }
            1 if !mine.is_empty() => {
                let p = mine[rng.next(mine.len())].clone();
                c.call(
                    "shelpa_write",
                    json!({"path": p, "content": format!("a {i}\n"), "append": true}),
                )
            }
            2 if !mine.is_empty() => {
                let p = mine[rng.next(mine.len())].clone();
                c.call(
                    "shelpa_write",
                    json!({"path": p, "content": format!("o {i}\n")}),
                )
            }
            _ => {
                let p = format!("t{i}.txt");
                let r = c.call(
                    "shelpa_pipe",
                    json!({"command": format!("head -n 5 README | tee {p}")}),
                );
                if r.ok {
                    mine.push(p);
                }
                r
            }
        };
        succeeded += usize::from(reply.ok);
    }
    c.close();
    succeeded
}

#[test]
fn a_session_of_pipe_mode_writes_reverts_to_the_same_tree_and_back() {
    let (_t, root) = canonical_temp_dir();
    seed(&root);
    let before = tree(&root);
    let succeeded = pipe_session(&root, 200, 11);
    assert!(succeeded >= 180, "only {succeeded} of 200 calls succeeded");
    let after = tree(&root);
    let session = newest_session(&root);
    assert_eq!(entries(&root)[0]["session"]["mode"], json!("pipe"));
    let text = ok(&root, &["revert", "--session", &session]);
    assert_eq!(tree(&root), before, "{text}");
    let again = ok(&root, &["revert", &revert_entry(&text)]);
    assert_eq!(tree(&root), after, "{again}");
}

#[test]
fn reverting_one_of_two_interleaved_sessions_leaves_the_others_changes() {
    let (_t, root) = canonical_temp_dir();
    seed(&root);
    let before = tree(&root);
    let mut a = Client::start(&root, &["--backup"]);
    let mut b = Client::start(&root, &["--backup"]);
    for i in 0..20 {
        a.must(
            "write_file",
            json!({"path": format!("a/{}.txt", i % 5), "content": format!("a{i}\n")}),
        );
        b.must(
            "write_file",
            json!({"path": format!("b/{}.txt", i % 5), "content": format!("b{i}\n")}),
        );
    }
    a.must(
        "edit_file",
        json!({"path": "README", "edits": [{"oldText": "hello", "newText": "hello from a"}]}),
    );
    a.close();
    b.close();
    let after = tree(&root);
    let log = entries(&root);
    let session_of = |prefix: &str| {
        log.iter()
            .find(|e| {
                e["changes"]
                    .as_array()
                    .expect("changes")
                    .iter()
                    .any(|c| c["path"].as_str().is_some_and(|p| p.starts_with(prefix)))
            })
            .expect("an entry")["session"]["id"]
            .as_str()
            .expect("id")
            .to_string()
    };
    let (sa, sb) = (session_of("a/"), session_of("b/"));
    assert_ne!(sa, sb);
    ok(&root, &["revert", "--session", &sa]);
    let now = tree(&root);
    for (p, n) in &after {
        if p.starts_with("b") {
            assert_eq!(now.get(p), Some(n), "b's {p:?} kept");
        }
    }
    assert!(!now.keys().any(|p| p.starts_with("a")), "a's files gone");
    assert_eq!(
        now.get(Path::new("README")),
        before.get(Path::new("README"))
    );
    ok(&root, &["revert", "--session", &sb]);
    assert_eq!(tree(&root), before);
}

#[test]
fn a_path_changed_outside_the_server_is_left_alone_unless_forced() {
    let (_t, root) = canonical_temp_dir();
    seed(&root);
    let before = tree(&root);
    let mut c = Client::start(&root, &[]);
    c.must(
        "create_file",
        json!({"path": "made.txt", "content": "by the agent\n"}),
    );
    c.must(
        "create_file",
        json!({"path": "other.txt", "content": "also\n"}),
    );
    c.close();
    let session = newest_session(&root);
    std::fs::write(root.join("made.txt"), "edited by hand\n").expect("outside edit");
    let out = run(&root, &["revert", "--session", &session], None);
    let text = printed(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("made.txt") && text.contains("--force"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("made.txt")).expect("kept"),
        "edited by hand\n"
    );
    assert!(
        !root.join("other.txt").exists(),
        "the rest was reverted: {text}"
    );

    let forced = ok(&root, &["revert", "--session", &session, "--force"]);
    assert_eq!(tree(&root), before, "{forced}");
    // The hand edit was saved to the trash, not lost.
    let trash = ok(&root, &["call", "list_trash", "{}"]);
    assert!(trash.contains("made.txt"), "{trash}");
}

/// The mixed session the crash tests revert: a create, a write, a move and two deletes, with
/// every history `--backup` keeps.
fn mixed_changes(c: &mut Client) {
    c.must(
        "create_file",
        json!({"path": "n/one.txt", "content": "1\n"}),
    );
    c.must(
        "write_file",
        json!({"path": "README", "content": "changed\n"}),
    );
    c.must(
        "move_file",
        json!({"source": "src/main.rs", "destination": "n/main.rs"}),
    );
    c.must("delete_file", json!({"path": "private/key"}));
    c.must("delete_file", json!({"path": "main-link"}));
}

/// A session of creates without `--backup`, so no history follows them into the trash and the
/// revert moves them there in batches: files of two directories, at two depths.
fn many_creates(c: &mut Client) {
    for i in 0..6 {
        let path = format!("made/{}/f{i}.txt", i % 2);
        c.must("create_file", json!({"path": path, "content": "x\n"}));
    }
    c.must("create_file", json!({"path": "top.txt", "content": "t\n"}));
}

/// A session of deletes, so the revert brings them back in batches: files and links of several
/// directories, then a directory a file of which was deleted first (its restore must wait for
/// the directory's).
fn many_deletes(c: &mut Client) {
    for path in [
        "README",
        "src/main.rs",
        "private/key",
        "main-link",
        "dangling",
        "src/deep/run.sh",
    ] {
        assert!(c.call("delete_file", json!({"path": path})).ok, "{path}");
    }
    c.must("delete_file", json!({"path": "src/deep"}));
}

/// Reverts the session `changes` makes (through a server started with `flags`), killed after
/// the `k`th write of kind `kind` for each `k` in turn, until the revert runs to the end: after
/// each kill `check` is clean, a second revert finishes the job, the cut revert has an entry,
/// and reverting both reverts brings the state after the session back.
fn revert_killed_at_each(kind: &str, flags: &[&str], changes: fn(&mut Client)) {
    for k in 1.. {
        let (_t, root) = canonical_temp_dir();
        seed(&root);
        let before = tree(&root);
        let mut c = Client::start(&root, flags);
        changes(&mut c);
        c.close();
        let after = tree(&root);
        let session = newest_session(&root);
        let stop = format!("{kind}:{k}");
        let out = run(&root, &["revert", "--session", &session], Some(&stop));
        if out.status.success() {
            assert!(k > 3, "the revert has several steps, it finished at {k}");
            assert_eq!(tree(&root), before);
            break;
        }
        assert_eq!(
            out.status.code(),
            None,
            "killed at {stop}: {}",
            printed(&out)
        );
        let check = run(&root, &["check"], None);
        assert!(
            check.status.success(),
            "check after a kill at {stop}: {}",
            printed(&check)
        );
        let left = tree(&root);
        // The next run finishes the entry of the cut revert, then reverts the rest.
        let text = ok(&root, &["revert", "--session", &session]);
        assert_eq!(tree(&root), before, "after the kill at {stop}: {text}");
        let log = entries(&root);
        let Some(cut) = log.iter().find(|e| e["interrupted"] == json!(true)) else {
            // Killed before it announced any change, the cut revert changed nothing, and the
            // second one did it all.
            assert_eq!(left, after, "no entry, yet the kill at {stop} left changes");
            ok(&root, &["revert", &revert_entry(&text)]);
            assert_eq!(tree(&root), after, "kill at {stop}");
            continue;
        };
        // What the cut revert sent to the trash is recorded with what it was, not as nothing.
        for c in cut["changes"].as_array().expect("changes") {
            if c["after"].get("trashed").is_some() {
                assert_ne!(c["before"], json!("absent"), "kill at {stop}: {c}");
            }
        }
        let cut = cut["id"].to_string();
        // Killed after its last step, the cut revert had done everything: the second changed
        // nothing and has no entry.
        let mut both = vec!["revert", &cut];
        let done = text.contains("as operation ").then(|| revert_entry(&text));
        if let Some(d) = &done {
            both.push(d);
        } else {
            assert!(text.contains("already as before"), "{text}");
        }
        // Nothing was lost: reverting both reverts brings the after-state back.
        ok(&root, &both);
        assert_eq!(tree(&root), after, "kill at {stop}");
        let strict = run(&root, &["check", "--strict"], None);
        assert!(strict.status.success(), "{}", printed(&strict));
        assert!(k < 100, "the revert never finished");
    }
}

#[test]
fn a_revert_killed_after_each_of_its_steps_loses_nothing_and_check_stays_clean() {
    revert_killed_at_each("revert", &["--backup"], mixed_changes);
}

#[test]
fn a_revert_killed_inside_a_batch_of_restores_loses_nothing_and_check_stays_clean() {
    // Every write of the restores counts: kills land between the note and the renames, between
    // renames, and before the restores are logged.
    revert_killed_at_each("restore", &["--backup"], many_deletes);
}

#[test]
fn a_revert_killed_inside_a_batch_of_trash_moves_loses_nothing_and_check_stays_clean() {
    // Every write of the trash moves counts, so the kills land between a batch's announcement
    // and its renames, and between one rename and the next.
    revert_killed_at_each("delete", &[], many_creates);
    // With `--backup` each created file has a history, which follows it under the
    // pending-delete note: kills also land between the renames and the histories' moves.
    revert_killed_at_each("delete", &["--backup"], many_creates);
}

#[test]
fn a_torn_last_entry_is_skipped_and_cut_by_check_repair() {
    let (_t, root) = canonical_temp_dir();
    let mut c = Client::start(&root, &[]);
    c.must("create_file", json!({"path": "x", "content": "x"}));
    c.close();
    let log = root.join(".filesystem/.operations");
    let mut bytes = std::fs::read(&log).expect("log");
    bytes.extend_from_slice(b"{\"id\":2,\"time\":\"2026");
    std::fs::write(&log, &bytes).expect("tear");
    assert_eq!(entries(&root).len(), 1);
    let check = run(&root, &["check", "--strict"], None);
    assert!(!check.status.success());
    assert!(
        printed(&check).contains(".operations"),
        "{}",
        printed(&check)
    );
    ok(&root, &["check", "--repair"]);
    ok(&root, &["check", "--strict"]);
    // The next entry gets the next id, whatever the torn line said.
    let mut c = Client::start(&root, &[]);
    c.must("create_file", json!({"path": "y", "content": "y"}));
    c.close();
    assert_eq!(entries(&root)[0]["id"], json!(2));
}

#[test]
fn the_log_is_filtered_by_path_session_and_time_and_shows_diffs() {
    let (_t, root) = canonical_temp_dir();
    let mut c = Client::start(&root, &["--backup"]);
    c.must("create_file", json!({"path": "a.txt", "content": "one\n"}));
    c.must(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"oldText": "one", "newText": "two"}]}),
    );
    c.must("create_file", json!({"path": "d/b.txt", "content": "b\n"}));
    c.close();
    let text = ok(&root, &["log"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains("create d/b.txt"), "newest first: {text}");
    assert!(lines[1].contains("edit a.txt (v1 → v2)"), "{text}");
    assert_eq!(ok(&root, &["log", "--path", "d"]).lines().count(), 1);
    assert_eq!(ok(&root, &["log", "--limit", "2"]).lines().count(), 2);
    assert_eq!(ok(&root, &["log", "--since", "1h"]).lines().count(), 3);
    assert_eq!(
        ok(&root, &["log", "--since", "2999-01-01T00:00:00Z"])
            .lines()
            .count(),
        0
    );
    assert_eq!(
        ok(&root, &["log", "--session", "nobody"]).lines().count(),
        0
    );
    let show = ok(&root, &["log", "show", "2"]);
    assert!(show.contains("-one") && show.contains("+two"), "{show}");
    let json_line = ok(&root, &["log", "--format", "json", "--limit", "1"]);
    let entry: Value = serde_json::from_str(json_line.trim()).expect("json");
    assert_eq!(entry["tool"], json!("create_file"));
    assert_eq!(entry["session"]["client"], json!("test"));
    assert!(
        entry["changes"].to_string().find("\"b\\n\"").is_none(),
        "no contents in the log"
    );
}

#[test]
fn the_agent_lists_operations_page_by_page_and_reverts_one_without_forcing() {
    let (_t, root) = canonical_temp_dir();
    seed(&root);
    let mut c = Client::start(
        &root,
        &[
            "--backup",
            "--tools",
            "list_operations,revert_operation,write_file",
        ],
    );
    for i in 0..3 {
        c.must(
            "write_file",
            json!({"path": format!("w{i}.txt"), "content": "x\n"}),
        );
    }
    let first = c.call("list_operations", json!({"limit": 2}));
    assert!(first.ok, "{}", first.text);
    let raw: Value = serde_json::from_str(&first.raw).expect("json");
    let page = &raw["structuredContent"];
    assert_eq!(
        page["operations"].as_array().map(Vec::len),
        Some(2),
        "{}",
        first.raw
    );
    assert_eq!(page["operations"][0]["id"], json!(3));
    let cursor = page["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let second = c.call("list_operations", json!({"limit": 2, "cursor": cursor}));
    let raw: Value = serde_json::from_str(&second.raw).expect("json");
    assert_eq!(raw["structuredContent"]["operations"][0]["id"], json!(1));
    assert!(raw["structuredContent"]["nextCursor"].is_null());

    let dry = c.call("revert_operation", json!({"id": 3, "dryRun": true}));
    assert!(dry.ok && dry.text.contains("Would revert"), "{}", dry.text);
    assert!(root.join("w2.txt").exists());
    let done = c.call("revert_operation", json!({"id": 3}));
    assert!(
        done.ok && done.text.contains("as operation 4"),
        "{}",
        done.text
    );
    assert!(!root.join("w2.txt").exists());

    std::fs::write(root.join("w1.txt"), "by hand\n").expect("outside edit");
    let refused = c.call("revert_operation", json!({"id": 2}));
    assert!(
        refused.text.contains("left alone w1.txt"),
        "{}",
        refused.text
    );
    assert_eq!(
        std::fs::read_to_string(root.join("w1.txt")).expect("kept"),
        "by hand\n"
    );
    let both = c.call("revert_operation", json!({"id": 2, "session": "x"}));
    assert!(
        !both.ok && both.text.contains("exactly one"),
        "{}",
        both.text
    );
    c.close();
}

#[test]
fn check_finds_a_trash_entry_of_the_log_that_the_delete_log_never_recorded() {
    let (_t, root) = canonical_temp_dir();
    std::fs::write(root.join("gone.txt"), "x").expect("seed");
    let mut c = Client::start(&root, &[]);
    c.must("delete_file", json!({"path": "gone.txt"}));
    c.close();
    ok(&root, &["check", "--strict"]);
    // The delete log emptied by hand: the operation log still names trash entry 1.
    std::fs::write(root.join(".filesystem/.deletes"), "").expect("tamper");
    let out = run(&root, &["check"], None);
    let text = printed(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("names trash entry 1, which .filesystem/.deletes never recorded"),
        "{text}"
    );
}

#[test]
fn the_log_rotates_like_the_call_log_and_is_read_across_its_files() {
    let (_t, root) = canonical_temp_dir();
    let mut cmd = test_support::bin::command();
    cmd.arg("--root")
        .arg(&root)
        .env("FILESYSTEM_OPERATIONS_ROTATE_BYTES", "900");
    let mut s = test_support::mcp::Session::from_command(cmd);
    s.initialize("2025-06-18");
    for i in 0..30 {
        let r = s.call(
            10 + i,
            "write_file",
            json!({"path": format!("r{i}.txt"), "content": "x"}),
        );
        assert_ne!(r["isError"], json!(true), "{r}");
    }
    assert!(s.close_and_wait().success());
    assert!(root.join(".filesystem/.operations.1").exists());
    assert!(root.join(".filesystem/.operations.2").exists());
    let ids: Vec<u64> = entries(&root)
        .iter()
        .map(|e| e["id"].as_u64().expect("id"))
        .collect();
    // Newest first across the files, ids rising without a repeat; the oldest rotated away.
    assert_eq!(ids[0], 30);
    assert!(ids.windows(2).all(|w| w[0] == w[1] + 1), "{ids:?}");
    assert!(ids.len() < 30, "the oldest files were dropped: {ids:?}");
    ok(&root, &["check", "--strict"]);
}
