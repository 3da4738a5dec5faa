#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The history store and the recovery tools, through the real binary: one `filesystem call` per
//! process, which is exactly how history must survive (everything is on disk).

use std::path::PathBuf;
use std::process::Output;

use test_support::bin::command;
use test_support::temp::{canonical_temp_dir, temp_dir};

struct Ws {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        let (tmp, root) = canonical_temp_dir();
        Ws { _tmp: tmp, root }
    }

    fn run(&self, backup: bool, tool: &str, args: &str) -> Output {
        let mut cmd = command();
        cmd.arg("call")
            .arg(tool)
            .arg(args)
            .arg("--root")
            .arg(&self.root);
        if backup {
            cmd.arg("--backup");
        }
        cmd.output().expect("run filesystem")
    }

    /// A call that must succeed; returns its text.
    fn ok(&self, tool: &str, args: &str) -> String {
        let out = self.run(true, tool, args);
        assert!(
            out.status.success(),
            "{tool} {args} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A call that must fail with `kind`; returns its message.
    fn err(&self, tool: &str, args: &str, kind: &str) -> String {
        let out = self.run(true, tool, args);
        let msg = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !out.status.success(),
            "{tool} {args} should fail, said {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            msg.starts_with(kind),
            "{tool} {args}: expected {kind}, got {msg}"
        );
        msg
    }

    fn write(&self, path: &str, content: &str) -> String {
        self.ok(
            "write_file",
            &serde_json::json!({"path": path, "content": content}).to_string(),
        )
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.root.join(path)).expect("read workspace file")
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

fn args(v: serde_json::Value) -> String {
    v.to_string()
}

#[test]
fn undo_redo_chain_with_a_write_in_between_drops_the_undone_future() {
    let ws = Ws::new();
    std::fs::write(ws.path("f.txt"), "original").expect("seed");
    assert!(
        ws.write("f.txt", "one").contains("version 2"),
        "original becomes version 1"
    );
    ws.write("f.txt", "two");
    ws.write("f.txt", "three");
    let undo2 = ws.ok("undo_file", r#"{"path":"f.txt","steps":2}"#);
    assert!(undo2.contains("version 2 of 4"), "{undo2}");
    assert_eq!(ws.read("f.txt"), "one");
    ws.ok("redo_file", r#"{"path":"f.txt"}"#);
    assert_eq!(ws.read("f.txt"), "two");
    // A write after undo forgets "three".
    assert!(ws.write("f.txt", "new").contains("version 4"));
    let msg = ws.err("redo_file", r#"{"path":"f.txt"}"#, "InvalidArgument");
    assert!(msg.contains("at most 0"), "{msg}");
    ws.ok("undo_file", r#"{"path":"f.txt","steps":3}"#);
    assert_eq!(ws.read("f.txt"), "original");
    let msg = ws.err("undo_file", r#"{"path":"f.txt"}"#, "InvalidArgument");
    assert!(
        msg.contains("version 1 of 4") && msg.contains("at most 0"),
        "{msg}"
    );
    let msg = ws.err(
        "redo_file",
        r#"{"path":"f.txt","steps":9}"#,
        "InvalidArgument",
    );
    assert!(msg.contains("at most 3"), "{msg}");
    ws.ok("redo_file", r#"{"path":"f.txt","steps":3}"#);
    assert_eq!(ws.read("f.txt"), "new");
}

#[test]
fn undo_after_an_outside_change_saves_it_and_redo_brings_it_back() {
    let ws = Ws::new();
    ws.write("f.txt", "mine");
    std::fs::write(ws.path("f.txt"), "theirs").expect("outside edit");
    let undo = ws.ok("undo_file", r#"{"path":"f.txt"}"#);
    assert!(undo.contains("saved first as version 2"), "{undo}");
    assert_eq!(ws.read("f.txt"), "mine");
    ws.ok("redo_file", r#"{"path":"f.txt"}"#);
    assert_eq!(ws.read("f.txt"), "theirs");
}

#[test]
fn an_outside_change_after_undo_keeps_the_undone_versions() {
    let ws = Ws::new();
    for v in ["v1", "v2", "v3", "v4"] {
        ws.write("f.txt", v);
    }
    ws.ok("undo_file", r#"{"path":"f.txt","steps":2}"#);
    assert_eq!(ws.read("f.txt"), "v2");
    // Changed outside while v3 and v4 are undone (a crash in the middle of a redo looks the same).
    std::fs::write(ws.path("f.txt"), "outside").expect("outside edit");
    ws.ok("undo_file", r#"{"path":"f.txt"}"#);
    assert_eq!(
        ws.read("f.txt"),
        "v2",
        "one undo returns to what the server last wrote"
    );
    ws.ok("redo_file", r#"{"path":"f.txt"}"#);
    assert_eq!(ws.read("f.txt"), "outside");
    // Walking back finds the undone versions too: nothing was dropped.
    let mut seen = Vec::new();
    loop {
        seen.push(ws.read("f.txt"));
        if !ws
            .run(true, "undo_file", r#"{"path":"f.txt"}"#)
            .status
            .success()
        {
            break;
        }
    }
    assert_eq!(seen, ["outside", "v2", "v4", "v3", "v2", "v1"]);
}

#[test]
fn undo_keeps_the_file_mode_and_needs_a_history() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Ws::new();
    std::fs::write(ws.path("run.sh"), "#!/bin/sh\n").expect("seed");
    std::fs::set_permissions(ws.path("run.sh"), std::fs::Permissions::from_mode(0o750))
        .expect("chmod");
    ws.write("run.sh", "#!/bin/sh\necho hi\n");
    ws.ok("undo_file", r#"{"path":"run.sh"}"#);
    let mode = std::fs::metadata(ws.path("run.sh"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o750);
    std::fs::write(ws.path("plain.txt"), "x").expect("seed");
    ws.err("undo_file", r#"{"path":"plain.txt"}"#, "NotFound");
    ws.err(
        "undo_file",
        r#"{"path":"run.sh","steps":0}"#,
        "InvalidArgument",
    );
}

#[test]
fn delete_list_restore_then_undo() {
    let ws = Ws::new();
    ws.write("notes/todo.md", "first");
    ws.write("notes/todo.md", "second");
    let del = ws.ok("delete_file", r#"{"path":"notes/todo.md"}"#);
    assert!(del.contains("id 1"), "{del}");
    assert!(!ws.path("notes/todo.md").exists());
    let list = ws.ok("list_trash", "{}");
    assert!(
        list.contains("id 1")
            && list.contains("notes/todo.md")
            && list.contains("file")
            && list.contains("6 bytes"),
        "{list}"
    );
    let restored = ws.ok("restore_file", r#"{"id":1}"#);
    assert!(restored.contains("with its version history"), "{restored}");
    assert_eq!(ws.read("notes/todo.md"), "second");
    ws.ok("undo_file", r#"{"path":"notes/todo.md"}"#);
    assert_eq!(ws.read("notes/todo.md"), "first");
    assert!(ws.ok("list_trash", "{}").contains("empty"));
    ws.err("restore_file", r#"{"id":1}"#, "NotFound");
    ws.err("restore_file", r#"{"id":42}"#, "NotFound");
    ws.err("restore_file", r#"{"id":"one"}"#, "InvalidArgument");
}

#[test]
fn restore_onto_an_occupied_path_is_refused_and_a_destination_works() {
    let ws = Ws::new();
    ws.write("a.txt", "old");
    ws.ok("delete_file", r#"{"path":"a.txt"}"#);
    ws.write("a.txt", "replacement");
    ws.err("restore_file", r#"{"id":"00001"}"#, "AlreadyExists");
    assert_eq!(ws.read("a.txt"), "replacement");
    ws.ok(
        "restore_file",
        r#"{"id":"00001","destination":"old/a.txt"}"#,
    );
    assert_eq!(ws.read("old/a.txt"), "old");
    ws.err("delete_file", r#"{"path":"missing.txt"}"#, "NotFound");
}

#[test]
fn moving_a_directory_carries_histories_and_search_follows_the_old_path() {
    let ws = Ws::new();
    ws.write("src/lib/a.rs", "a1");
    ws.write("src/lib/a.rs", "a2");
    ws.ok("move_file", r#"{"source":"src","destination":"code"}"#);
    ws.ok(
        "move_file",
        r#"{"source":"code/lib/a.rs","destination":"code/lib/b.rs"}"#,
    );
    let story = ws.ok("search_file", r#"{"path":"src/lib/a.rs"}"#);
    assert!(story.contains("now at code/lib/b.rs"), "{story}");
    assert!(story.contains("its directory src was moved"), "{story}");
    // The history came along twice.
    ws.ok("undo_file", r#"{"path":"code/lib/b.rs"}"#);
    assert_eq!(ws.read("code/lib/b.rs"), "a1");
    ws.err("undo_file", r#"{"path":"src/lib/a.rs"}"#, "NotFound");

    ws.ok("delete_file", r#"{"path":"code"}"#);
    let story = ws.ok("search_file", r#"{"path":"src/lib/a.rs"}"#);
    assert!(story.contains("in the trash as id 1"), "{story}");
    let never = ws.ok("search_file", r#"{"path":"never/there.txt"}"#);
    assert!(never.contains("never mention"), "{never}");
    std::fs::write(ws.path("here.txt"), "x").expect("seed");
    assert!(ws
        .ok("search_file", r#"{"path":"here.txt"}"#)
        .contains("here.txt exists"));
}

#[test]
fn move_errors_name_the_problem() {
    let ws = Ws::new();
    ws.write("a.txt", "a");
    ws.write("b.txt", "b");
    ws.err(
        "move_file",
        r#"{"source":"a.txt","destination":"b.txt"}"#,
        "AlreadyExists",
    );
    assert_eq!(ws.read("b.txt"), "b");
    ws.err(
        "move_file",
        r#"{"source":"nope","destination":"c"}"#,
        "NotFound",
    );
    ws.err(
        "move_file",
        r#"{"source":"a.txt","destination":".filesystem/x"}"#,
        "PathEscape",
    );
    ws.err(
        "move_file",
        r#"{"source":"a.txt","destination":"../out.txt"}"#,
        "PathEscape",
    );
    ws.err("delete_file", r#"{"path":".filesystem"}"#, "PathEscape");
    ws.err("delete_file", r#"{"path":"."}"#, "InvalidArgument");
    std::fs::create_dir(ws.path("d")).expect("mkdir");
    ws.err(
        "move_file",
        r#"{"source":"d","destination":"d/inner"}"#,
        "InvalidArgument",
    );
    ws.err(
        "move_file",
        r#"{"source":"a.txt","destination":"c","extra":1}"#,
        "InvalidArgument",
    );
}

#[test]
fn workspace_names_that_collide_with_store_names_get_their_own_history() {
    let ws = Ws::new();
    let names = [
        ".moves",
        ".deletes",
        ".trash",
        ".lock",
        ".next-trash-id",
        ".head",
        ".imports",
        ".orphans",
        ".gitignore",
        ".layout",
        "files",
        "#versions",
        "head",
        "00001",
        "00001.undone",
        "%x",
        "%%",
    ];
    for name in names {
        ws.write(name, &format!("{name} v1"));
        ws.write(name, &format!("{name} v2"));
    }
    // The file `a` had a history; then `a` became a directory holding store-like names.
    ws.write("a", "file a v1");
    ws.write("a", "file a v2");
    ws.ok("move_file", r#"{"source":"a","destination":"a-file"}"#);
    for inner in [
        "00001",
        "00002",
        "head",
        ".head",
        "00002.undone",
        "#versions",
        "##x",
        "%y",
    ] {
        let p = format!("a/{inner}");
        ws.write(&p, &format!("{p} v1"));
        ws.write(&p, &format!("{p} v2"));
    }
    // Logs still work with a workspace `.moves` and `.deletes` around.
    ws.ok("delete_file", r#"{"path":".trash"}"#);
    ws.ok("restore_file", r#"{"id":1}"#);
    for name in names {
        ws.ok("undo_file", &args(serde_json::json!({"path": name})));
        assert_eq!(ws.read(name), format!("{name} v1"));
    }
    for inner in [
        "00001",
        "00002",
        "head",
        ".head",
        "00002.undone",
        "#versions",
        "##x",
        "%y",
    ] {
        let p = format!("a/{inner}");
        ws.ok("undo_file", &args(serde_json::json!({"path": p})));
        assert_eq!(ws.read(&p), format!("{p} v1"));
        ws.err(
            "undo_file",
            &args(serde_json::json!({"path": p})),
            "InvalidArgument",
        );
    }
    ws.ok("undo_file", r#"{"path":"a-file"}"#);
    assert_eq!(ws.read("a-file"), "file a v1");
}

#[test]
fn trash_ids_increase_and_are_never_reused_after_restore() {
    let ws = Ws::new();
    ws.write("x", "x");
    assert!(ws.ok("delete_file", r#"{"path":"x"}"#).contains("id 1;"));
    ws.ok("restore_file", r#"{"id":1}"#);
    assert!(ws.ok("delete_file", r#"{"path":"x"}"#).contains("id 2;"));
    ws.write("y", "y");
    assert!(ws.ok("delete_file", r#"{"path":"y"}"#).contains("id 3;"));
    ws.ok("restore_file", r#"{"id":3}"#);
    ws.ok("restore_file", r#"{"id":2}"#);
    ws.write("z", "z");
    assert!(ws.ok("delete_file", r#"{"path":"z"}"#).contains("id 4;"));
    ws.err("restore_file", r#"{"id":1}"#, "NotFound");
}

#[test]
fn deleting_a_symlink_trashes_the_link_and_leaves_the_target() {
    let ws = Ws::new();
    std::fs::write(ws.path("target.txt"), "keep me").expect("seed");
    std::os::unix::fs::symlink("target.txt", ws.path("link")).expect("symlink");
    std::fs::create_dir(ws.path("dir")).expect("mkdir");
    std::fs::write(ws.path("dir/inside"), "inside").expect("seed");
    std::os::unix::fs::symlink("dir", ws.path("dirlink")).expect("symlink");
    assert!(ws
        .ok("delete_file", r#"{"path":"link"}"#)
        .contains("symlink"));
    assert!(ws
        .ok("delete_file", r#"{"path":"dirlink"}"#)
        .contains("symlink"));
    assert_eq!(ws.read("target.txt"), "keep me");
    assert_eq!(ws.read("dir/inside"), "inside");
    assert!(std::fs::symlink_metadata(ws.path("link")).is_err());
    assert!(ws.ok("list_trash", "{}").contains("symlink"));
    ws.ok("restore_file", r#"{"id":1}"#);
    let meta = std::fs::symlink_metadata(ws.path("link")).expect("link back");
    assert!(meta.file_type().is_symlink());
    ws.ok("move_file", r#"{"source":"link","destination":"link2"}"#);
    assert!(std::fs::symlink_metadata(ws.path("link2"))
        .expect("moved")
        .file_type()
        .is_symlink());
    assert_eq!(ws.read("target.txt"), "keep me");
}

#[test]
fn undo_and_redo_are_only_offered_with_backup() {
    let ws = Ws::new();
    let list = |backup: bool| {
        let mut cmd = command();
        cmd.arg("tools").arg("--root").arg(&ws.root);
        if backup {
            cmd.arg("--backup");
        }
        String::from_utf8_lossy(&cmd.output().expect("tools").stdout).into_owned()
    };
    assert!(!list(false).contains("undo_file"));
    assert!(list(true).contains("undo_file") && list(true).contains("redo_file"));
    let out = ws.run(false, "undo_file", r#"{"path":"x"}"#);
    assert!(!out.status.success());
}

#[test]
fn two_processes_writing_one_file_never_corrupt_the_history() {
    let ws = std::sync::Arc::new(Ws::new());
    const EACH: usize = 12;
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let ws = ws.clone();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    ws.write("shared.txt", &format!("{who}{i}"));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer thread");
    }
    let versions = ws.path(".filesystem/shared.txt");
    let head = std::fs::read_to_string(versions.join(".head")).expect("head");
    let total = 2 * EACH;
    assert_eq!(head.trim(), total.to_string(), "every write is one version");
    assert!(!versions.join(format!("{:05}", total + 1)).exists());
    let mut seen = std::collections::HashSet::new();
    for v in 1..=total {
        let snap = std::fs::read_to_string(versions.join(format!("{v:05}"))).expect("snapshot");
        assert!(seen.insert(snap), "versions are distinct writes");
    }
    assert_eq!(
        ws.read("shared.txt"),
        std::fs::read_to_string(versions.join(format!("{total:05}"))).expect("newest")
    );
    ws.ok(
        "undo_file",
        &args(serde_json::json!({"path": "shared.txt", "steps": total - 1})),
    );
    assert_eq!(
        ws.read("shared.txt"),
        std::fs::read_to_string(versions.join("00001")).expect("first")
    );
}

#[test]
fn a_symlink_planted_inside_the_store_is_never_followed() {
    let ws = Ws::new();
    let outside = temp_dir();
    std::fs::create_dir_all(ws.path(".filesystem")).expect("mkdir");
    std::os::unix::fs::symlink(outside.path(), ws.path(".filesystem/a.txt")).expect("plant");
    std::os::unix::fs::symlink(outside.path(), ws.path(".filesystem/.trash")).expect("plant");
    std::fs::write(ws.path("a.txt"), "mine").expect("seed");
    ws.err("write_file", r#"{"path":"a.txt","content":"x"}"#, "IoError");
    ws.err("delete_file", r#"{"path":"a.txt"}"#, "IoError");
    assert_eq!(ws.read("a.txt"), "mine");
    assert_eq!(std::fs::read_dir(outside.path()).expect("ls").count(), 0);
}

#[test]
fn reads_of_the_store_never_see_a_move_a_crash_cut_short() {
    let ws = Ws::new();
    ws.write("a.txt", "one");
    ws.write("a.txt", "two");
    // The state a crash leaves between a move's first and second step: the note written, the
    // file renamed, its history and the move log not yet updated.
    let state = ws.path(".filesystem");
    std::fs::write(state.join(".pending-move"), "a.txt\tb.txt\n").expect("note");
    std::fs::rename(ws.path("a.txt"), ws.path("b.txt")).expect("rename");
    // A read-only tool finishes the move before it looks, so the story is whole.
    let story = ws.ok("search_file", r#"{"path":"a.txt"}"#);
    assert!(story.contains("now at b.txt"), "{story}");
    assert!(!state.join(".pending-move").exists());
    ws.ok("undo_file", r#"{"path":"b.txt"}"#);
    assert_eq!(ws.read("b.txt"), "one");
}

#[test]
fn reading_an_empty_workspace_creates_no_store() {
    let ws = Ws::new();
    let trash = ws.ok("list_trash", "{}");
    assert!(trash.contains("empty"), "{trash}");
    let story = ws.ok("search_file", r#"{"path":"x.txt"}"#);
    assert!(story.contains("never mention"), "{story}");
    assert!(!ws.path(".filesystem").exists());
}

#[test]
fn a_rename_carried_by_a_move_of_its_directory_is_followed() {
    let ws = Ws::new();
    ws.write("d/x.txt", "x");
    ws.ok(
        "move_file",
        r#"{"source":"d/x.txt","destination":"d/y.txt"}"#,
    );
    ws.ok("move_file", r#"{"source":"d","destination":"e"}"#);
    let story = ws.ok("search_file", r#"{"path":"d/x.txt"}"#);
    assert!(story.contains("now at e/y.txt"), "{story}");
    assert!(!story.contains("nothing is there"), "{story}");
    // The name the rename freed was carried by nothing; the file at it now was.
    let y = ws.ok("search_file", r#"{"path":"d/y.txt"}"#);
    assert!(y.contains("now at e/y.txt"), "{y}");
}

#[test]
fn a_file_restored_to_its_own_path_is_not_something_else() {
    let ws = Ws::new();
    ws.write("a.txt", "a");
    ws.ok("delete_file", r#"{"path":"a.txt"}"#);
    ws.ok("restore_file", r#"{"id":1}"#);
    let story = ws.ok("search_file", r#"{"path":"a.txt"}"#);
    assert!(!story.contains("Something else"), "{story}");
    assert!(story.contains("back at a.txt"), "{story}");
    assert!(story.contains("deleted and restored"), "{story}");
    // Something that really is another thing is still called so.
    ws.ok("move_file", r#"{"source":"a.txt","destination":"b.txt"}"#);
    ws.write("a.txt", "new");
    let story = ws.ok("search_file", r#"{"path":"a.txt"}"#);
    assert!(story.contains("now at b.txt"), "{story}");
    assert!(story.contains("Something else is at a.txt"), "{story}");
}

impl Ws {
    /// `filesystem check FLAGS` on this root: (exit code, what it printed).
    fn check(&self, flags: &[&str]) -> (Option<i32>, String) {
        let out = command()
            .arg("check")
            .args(flags)
            .arg("--root")
            .arg(&self.root)
            .env_remove("FILESYSTEM_ROOT")
            .output()
            .expect("run filesystem check");
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

#[test]
fn a_versioned_write_to_a_name_too_long_for_the_store_s_escape_is_refused_before_it_is_written() {
    let ws = Ws::new();
    // 255 bytes beginning with the escape: the store would have to keep it as 256.
    let long = format!("%{}", "a".repeat(254));
    let msg = ws.err(
        "write_file",
        &args(serde_json::json!({"path": long, "content": "x"})),
        "InvalidArgument",
    );
    assert!(msg.contains("255") && msg.contains("shorter"), "{msg}");
    assert!(!ws.path(&long).exists(), "nothing was written");
}

#[test]
fn a_name_too_long_for_the_store_s_escape_never_disables_the_store() {
    let ws = Ws::new();
    let long = format!("%{}", "a".repeat(254));
    // Made outside the server, it deletes and restores like any file, and the store goes on.
    std::fs::write(ws.path(&long), "outside").expect("write");
    ws.ok("delete_file", &args(serde_json::json!({"path": long})));
    ws.write("other.txt", "one");
    ws.ok("restore_file", &args(serde_json::json!({"id": 1})));
    assert_eq!(ws.read(&long), "outside");

    // A file with a history is not moved where its history could not follow.
    ws.write("h.txt", "v1");
    ws.write("h.txt", "v2");
    let dest = format!("d/{long}");
    let msg = ws.err(
        "move_file",
        &args(serde_json::json!({"source": "h.txt", "destination": dest})),
        "InvalidArgument",
    );
    assert!(msg.contains("shorter"), "{msg}");
    assert!(!ws.path("d").exists(), "nothing moved, nothing was created");
    ws.ok("undo_file", &args(serde_json::json!({"path": "h.txt"})));
    assert_eq!(ws.read("h.txt"), "v1");
    // One without a history moves there.
    ws.ok(
        "move_file",
        &args(serde_json::json!({"source": long, "destination": dest})),
    );
    assert_eq!(ws.read(&dest), "outside");

    // A pending note that can never be finished (its history cannot follow to that name), as a
    // crash would leave it: set aside, reported, and the store keeps working.
    ws.write("g.txt", "g1");
    std::fs::rename(ws.path("g.txt"), ws.path(&long)).expect("rename");
    std::fs::write(
        ws.path(".filesystem/.pending-move"),
        format!("g.txt\t{long}\n"),
    )
    .expect("plant");
    ws.write("other.txt", "two");
    assert!(!ws.path(".filesystem/.pending-move").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path(".filesystem/g.txt/00001")).expect("kept"),
        "g1",
        "the history stays where it was"
    );
    let (code, text) = ws.check(&["--repair"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(".filesystem/.orphans/pending-move-")
            && text.contains("could not be finished"),
        "{text}"
    );
}
