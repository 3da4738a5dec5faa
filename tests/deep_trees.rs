#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Trees far deeper than anyone makes on purpose, through every tool and subcommand that walks:
//! nothing recurses per level, so the server survives each walk and keeps answering, what lies
//! past the documented depth limit (4,096 levels) is left out with a note, and paths longer than
//! the kernel accepts are clear errors.
//!
//! The trees are 10,000 levels deep, made directly on disk (one `mkdirat` relative to the last:
//! no path of that depth can be named in one call) and with the tools alone (`create_directory`
//! chains nested into each other with `move_file`, as a client could).

use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use rustix::fs::{Mode, OFlags};
use serde_json::{json, Value};

use test_support::bin::command;
use test_support::cli::in_root;
use test_support::mcp::{text, Session};

/// How deep the trees are.
const LEVELS: usize = 10_000;

/// The walks' depth limit, as the README documents it.
const MAX_DEPTH: usize = 4096;

/// A scratch directory holding a workspace root (and whatever else a test needs), removed by
/// [`remove_tree`] rather than a recursive removal.
struct Scratch {
    base: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        // tmpfs where there is one: tens of thousands of directories made, synced and removed
        // cost seconds on a disk and nothing in memory, and the walks do not care.
        let shm = Path::new("/dev/shm");
        let tmp = tempfile::tempdir_in(shm)
            .or_else(|_| tempfile::tempdir())
            .expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        Scratch { base, _tmp: tmp }
    }

    fn dir(&self, name: &str) -> PathBuf {
        let p = self.base.join(name);
        std::fs::create_dir_all(&p).expect("mkdir");
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        remove_tree(&self.base);
    }
}

/// Empties the directory `top` however deep it is, one directory open at a time and without
/// recursion: down into the first subdirectory until there is none, its files removed, then up
/// through `..` removing the directory just left. (`rm -rf` takes seconds per 10,000 levels.)
fn remove_tree(top: &Path) {
    let mut fd = open_dir(top);
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    loop {
        let mut sub = None;
        let mut files = Vec::new();
        let Ok(mut dir) = rustix::fs::Dir::read_from(&fd) else {
            return;
        };
        while let Some(Ok(entry)) = dir.read() {
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = std::ffi::OsStr::from_bytes(name).to_os_string();
            if entry.file_type() == rustix::fs::FileType::Directory {
                sub = Some(name);
                break;
            }
            files.push(name);
        }
        for f in files {
            let _ = rustix::fs::unlinkat(&fd, &f, rustix::fs::AtFlags::empty());
        }
        if let Some(name) = sub {
            let Ok(child) = rustix::fs::openat(
                &fd,
                &name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                return;
            };
            names.push(name);
            fd = child;
            continue;
        }
        let Some(name) = names.pop() else {
            return;
        };
        let Ok(parent) = rustix::fs::openat(
            &fd,
            "..",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return;
        };
        let _ = rustix::fs::unlinkat(&parent, &name, rustix::fs::AtFlags::REMOVEDIR);
        fd = parent;
    }
}

fn open_dir(p: &Path) -> OwnedFd {
    rustix::fs::open(
        p,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .expect("open dir")
}

/// Makes `base/first/d/d/…` with `levels` directories below `first`, each made relative to the
/// last, and writes `leaf` (name, bytes) into the deepest one.
fn nest(base: &Path, first: &str, levels: usize, leaf: Option<(&str, &[u8])>) {
    let mut fd = open_dir(base);
    for name in std::iter::once(first).chain(std::iter::repeat_n("d", levels)) {
        rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)).expect("mkdirat");
        fd = rustix::fs::openat(
            &fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("openat");
    }
    if let Some((name, bytes)) = leaf {
        let file = rustix::fs::openat(
            &fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .expect("create leaf");
        rustix::io::write(&file, bytes).expect("write leaf");
    }
}

/// `first/d/d/…` with `levels` `d`s: a path the tools can name (while it stays under 4 KiB).
fn chain(first: &str, levels: usize) -> String {
    std::iter::once(first)
        .chain(std::iter::repeat_n("d", levels))
        .collect::<Vec<_>>()
        .join("/")
}

/// A filesystem-mode server on `root`, initialised. These tests look at whole answers of trees
/// thousands deep, so the result budget is lifted: paging is not what they are about.
fn serve(root: &Path, extra: &[&str]) -> Session {
    let mut flags = vec!["--max-result-bytes", "1000000000"];
    flags.extend_from_slice(extra);
    let mut s = Session::start_in(root, &flags);
    s.initialize("2025-11-25");
    s
}

/// Calls a tool and returns (is_error, text); a JSON-RPC error or a dead server fails the test.
/// The server still answers: a ping and a listing of the root.
fn still_answers(s: &mut Session, id: i64) {
    let pong = s.request(id, "ping", json!({}));
    assert!(pong.get("result").is_some(), "{pong}");
    let (err, listing) = s.call_text(id + 1, "list_directory", json!({"path": "."}));
    assert!(!err, "{listing}");
}

/// How many directories named `name` a directory_tree text shows.
fn count_dirs(tree: &str, name: &str) -> usize {
    tree.matches(&format!("{{\"name\":\"{name}\",\"type\":\"directory\""))
        .count()
}

fn cli(args: &[&str], root: &Path) -> Output {
    in_root(root, args).output().expect("run filesystem")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_tree_ten_thousand_levels_deep_on_disk_is_walked_by_every_tool_and_the_server_lives() {
    let scratch = Scratch::new();
    let root = scratch.dir("ws");
    std::fs::write(root.join("hello.txt"), "hello\n").expect("write");
    nest(&root, "top", LEVELS, Some(("leaf.txt", b"at the bottom\n")));
    let mut s = serve(&root, &["--backup"]);

    // The whole tree: 4,096 levels shown (`top` and 4,095 `d`s), the last marked as cut.
    let (err, tree) = s.call_text(2, "directory_tree", json!({"path": "."}));
    assert!(!err, "{tree}");
    assert_eq!(count_dirs(&tree, "top"), 1);
    assert_eq!(count_dirs(&tree, "d"), MAX_DEPTH - 1);
    assert_eq!(tree.matches("\"truncated\":").count(), 1, "one cut");
    assert!(tree.contains("deeper than 4096 levels"), "{}", &tree[..200]);
    assert!(tree.starts_with("[{\"name\":\"hello.txt\",\"type\":\"file\"}"));
    // A depth the caller asks for is honoured silently, as before, and is plain JSON.
    let (err, shallow) = s.call_text(3, "directory_tree", json!({"path": ".", "maxDepth": 3}));
    assert!(!err, "{shallow}");
    let v: Value = serde_json::from_str(&shallow).expect("json");
    assert_eq!(
        v,
        json!([
            {"name": "hello.txt", "type": "file"},
            {"name": "top", "type": "directory", "children": [
                {"name": "d", "type": "directory", "children": [
                    {"name": "d", "type": "directory", "children": []}
                ]}
            ]}
        ])
    );
    // Listing from 1,500 levels down walks the rest: 8,500 levels, cut at 4,096 below it.
    let (err, below) = s.call_text(4, "directory_tree", json!({"path": chain("top", 1500)}));
    assert!(!err, "{}", &below[..below.len().min(300)]);
    assert_eq!(count_dirs(&below, "d"), MAX_DEPTH);
    assert!(below.contains("\"truncated\":"));

    let (err, listing) = s.call_text(5, "list_directory", json!({"path": "top"}));
    assert_eq!((err, listing.as_str()), (false, "[DIR] d"));
    let (err, listing) = s.call_text(6, "list_directory", json!({"path": chain("top", 1500)}));
    assert_eq!((err, listing.as_str()), (false, "[DIR] d"));
    // A path longer than the kernel accepts is a clear error, not a crash.
    let (err, refused) = s.call_text(7, "list_directory", json!({"path": chain("top", 2500)}));
    assert!(err, "{}", &refused[..200]);
    assert!(
        refused.contains("File name too long"),
        "{}",
        &refused[..200]
    );
    let (err, story) = s.call_text(8, "search_file", json!({"path": "top"}));
    assert!(!err, "{story}");
    still_answers(&mut s, 9);

    // Into the trash and back: the trash's size walk goes as deep as the limit, no deeper.
    let (err, deleted) = s.call_text(20, "delete_file", json!({"path": "top"}));
    assert!(!err, "{deleted}");
    let (err, trash) = s.call_text(21, "list_trash", json!({}));
    assert!(!err && trash.contains("top"), "{trash}");
    let (err, restored) = s.call_text(22, "restore_file", json!({"id": 1}));
    assert!(!err, "{restored}");
    let (err, tree) = s.call_text(23, "directory_tree", json!({"path": "top"}));
    assert!(!err && tree.contains("\"truncated\":"), "{}", &tree[..200]);
    still_answers(&mut s, 24);
    assert!(s.close_and_wait().success());

    // `check` walks it too: consistent, with one warning for what lies past the limit.
    let out = cli(&["check"], &root);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("more than 4096 levels below the root"));
    assert_eq!(cli(&["check", "--strict"], &root).status.code(), Some(1));
}

#[test]
fn a_tree_nested_ten_thousand_deep_with_the_tools_alone_is_walked_and_checked() {
    let scratch = Scratch::new();
    let root = scratch.dir("ws");
    let mut s = serve(&root, &["--backup"]);
    // Eleven chains of 1,000 levels, each nested into the next with one move: every path a
    // tool is given stays far below the kernel's limit, yet the result is 11,000 levels deep.
    const CHUNK: usize = 1000;
    const CHAINS: usize = 11;
    let mut id = 10;
    for k in 0..CHAINS {
        let (err, made) = s.call_text(
            id,
            "create_directory",
            json!({"path": chain(&format!("c{k}"), CHUNK - 1)}),
        );
        assert!(!err, "{}", &made[..made.len().min(200)]);
        id += 1;
    }
    // A file with a history at the bottom: its history tree moves along with every nesting.
    let (err, written) = s.call_text(
        id,
        "write_file",
        json!({"path": format!("{}/leaf.txt", chain("c0", CHUNK - 1)), "content": "deep\n"}),
    );
    assert!(!err, "{}", &written[..written.len().min(200)]);
    for k in 0..CHAINS - 1 {
        id += 1;
        let into = format!("{}/c{k}", chain(&format!("c{}", k + 1), CHUNK - 1));
        let (err, moved) = s.call_text(
            id,
            "move_file",
            json!({"source": format!("c{k}"), "destination": into}),
        );
        assert!(!err, "{}", &moved[..moved.len().min(200)]);
    }
    let last = format!("c{}", CHAINS - 1);
    let (err, tree) = s.call_text(100, "directory_tree", json!({"path": "."}));
    assert!(!err, "{}", &tree[..tree.len().min(200)]);
    assert_eq!(tree.matches("\"truncated\":").count(), 1);
    assert_eq!(
        count_dirs(&tree, "d") + tree.matches("{\"name\":\"c").count(),
        MAX_DEPTH
    );
    let (err, listing) = s.call_text(101, "list_directory", json!({"path": last}));
    assert_eq!((err, listing.as_str()), (false, "[DIR] d"));
    still_answers(&mut s, 102);
    let (err, deleted) = s.call_text(103, "delete_file", json!({"path": last}));
    assert!(!err, "{deleted}");
    let (err, trash) = s.call_text(104, "list_trash", json!({}));
    assert!(!err && trash.contains(&last), "{trash}");
    let (err, story) = s.call_text(105, "search_file", json!({"path": last}));
    assert!(!err && story.contains("trash"), "{story}");
    let (err, restored) = s.call_text(106, "restore_file", json!({"id": 1}));
    assert!(!err, "{restored}");
    still_answers(&mut s, 107);
    assert!(s.close_and_wait().success());

    // The store's history tree is as deep as the workspace: check walks both, without error.
    let out = cli(&["check"], &root);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{report}{}", stderr(&out));
    assert!(report.contains(" 0 error(s)"), "{report}");
    assert!(
        report.contains("more than 4096 levels below the root"),
        "{report}"
    );
    assert!(
        report.contains("of the store more than 4096 levels"),
        "{report}"
    );
}

#[test]
fn a_deep_tree_in_one_root_does_not_take_the_daemon_down_for_the_others() {
    let scratch = Scratch::new();
    let deep = scratch.dir("deep");
    let plain = scratch.dir("plain");
    std::fs::write(plain.join("a.txt"), "a").expect("write");
    nest(&deep, "top", LEVELS, None);
    let mut cmd = command();
    cmd.arg("--server")
        .args(["--max-result-bytes", "1000000000"])
        .arg("--allow-root")
        .arg(&scratch.base)
        .env_remove("FILESYSTEM_ALLOW_ROOTS")
        .env_remove("FILESYSTEM_ROOT");
    let mut s = Session::from_command(cmd);
    s.initialize("2025-11-25");
    for round in 0..2 {
        let id = 10 * round;
        let (err, tree) = s.call_text(id + 1, "directory_tree", json!({"root": deep, "path": "."}));
        assert!(!err && tree.contains("\"truncated\":"), "{}", &tree[..200]);
        let (err, listing) = s.call_text(
            id + 2,
            "list_directory",
            json!({"root": plain, "path": "."}),
        );
        assert_eq!((err, listing.as_str()), (false, "[FILE] a.txt"));
    }
    assert!(s.close_and_wait().success());
}

#[test]
fn pipe_mode_ls_answers_at_any_depth_with_a_listing_or_a_clear_error() {
    let scratch = Scratch::new();
    let root = scratch.dir("ws");
    nest(&root, "top", LEVELS, None);
    let mut s = Session::start_in(&root, &["--legacy-pipe"]);
    s.initialize("2025-11-25");
    let pipe = |s: &mut Session, id: i64, command: String| -> Value {
        let result = s.call(id, "shelpa_pipe", json!({"command": command}));
        serde_json::from_str(&text(&result)).expect("shelpa answers JSON")
    };
    let listed = pipe(&mut s, 2, format!("ls {}", chain("top", 1500)));
    assert_eq!(listed["stdout"], json!("d/\n"), "{listed}");
    // Too long a path to name: refused with a reason, and the session goes on.
    let refused = pipe(&mut s, 3, format!("ls {}", chain("top", 2500)));
    assert!(refused["error"]["code"].is_string(), "{refused}");
    // Step down in two moves to where the session's own directory is too long to name.
    let cd = pipe(&mut s, 4, format!("cd {}", chain("top", 1500)));
    assert!(cd.get("error").is_none(), "{cd}");
    let listed = pipe(&mut s, 5, "ls".into());
    assert_eq!(listed["stdout"], json!("d/\n"), "{listed}");
    let deeper = pipe(&mut s, 6, format!("cd {}", chain("d", 1500)));
    let listed = pipe(&mut s, 7, "ls".into());
    assert!(
        deeper.get("error").is_some() || listed.get("error").is_some(),
        "{deeper} / {listed}"
    );
    let back = pipe(&mut s, 8, "cd".into());
    assert!(back.get("error").is_none(), "{back}");
    let listed = pipe(&mut s, 9, "ls".into());
    assert_eq!(listed["stdout"], json!("top/\n"), "{listed}");
    assert!(s.close_and_wait().success());
}

#[test]
fn audit_reads_a_mirror_tree_deeper_than_the_limit_and_reports_what_it_skipped() {
    let scratch = Scratch::new();
    let root = scratch.dir("ws");
    let mirror = root.join(".shelpa");
    std::fs::create_dir_all(&mirror).expect("mkdir");
    std::fs::write(root.join("todo.txt"), "x\n").expect("write");
    std::fs::write(mirror.join("todo.txt"), "x\n").expect("mirror");
    nest(&mirror, "deep", LEVELS, Some(("f.txt", b"x\n")));
    nest(&mirror, "long", 2500, Some(("f.txt", b"x\n")));
    let list = cli(&["audit", "list"], &root);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    assert!(stdout(&list).contains("todo.txt"), "{}", stdout(&list));
    let verify = cli(&["audit", "verify"], &root);
    let found = stdout(&verify);
    assert!(verify.status.code().is_some(), "the audit was killed");
    assert!(
        found.contains("more than 4096 levels below .shelpa/"),
        "{found}"
    );
    assert!(found.contains("longer than the system's limit"), "{found}");
    // `check` judges mirrors with the same verifier.
    let check = cli(&["check"], &root);
    assert!(
        stdout(&check).contains("more than 4096 levels below .shelpa/"),
        "{}",
        stdout(&check)
    );
}

#[test]
fn report_reads_a_transcript_folder_2100_deep_and_skips_only_what_is_past_the_limit() {
    let scratch = Scratch::new();
    let projects = scratch.dir("projects");
    let line = |id: &str| {
        format!(
            "{}\n",
            json!({"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": id, "name": "mcp__filesystem__read_text_file", "input": {"path": "a"}}
            ]}})
        )
    };
    std::fs::create_dir_all(projects.join("p")).expect("mkdir");
    std::fs::write(projects.join("p/top.jsonl"), line("t1")).expect("write");
    nest(
        &projects,
        "deep",
        2100,
        Some(("s.jsonl", line("t2").as_bytes())),
    );
    nest(
        &projects,
        "past",
        5000,
        Some(("s.jsonl", line("t3").as_bytes())),
    );
    let out = command()
        .arg("report")
        .arg("--transcripts")
        .arg(&projects)
        .args(["--format", "json"])
        .output()
        .expect("run report");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["transcripts"]["inputs"]["files"], json!(2), "{v:#}");
    let warned = stderr(&out);
    assert!(warned.contains("warning: skipped 1 folder(s)"), "{warned}");
    assert!(warned.contains("past/d/d/d"), "{warned}");
    assert!(warned.len() < 1000, "long paths are shortened: {warned}");
}
