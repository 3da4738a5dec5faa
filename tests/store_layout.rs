#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The `.filesystem/` store on disk exactly as the README documents it: a path's snapshots and
//! `.head` in the directory named for it, the logs and trash at the top, a `%` escape on the
//! workspace names that would collide, and stores in the previous layout
//! (`files/<path>/#versions/{NNNNN,head}`) converted on first open, even when that conversion is
//! killed at any step.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use test_support::cli::in_root;
use test_support::cli::printed;
use test_support::temp::canonical_temp_dir;

/// The store's crash-point hook (see `crates/workspace/src/history/crash_point.rs`), counting
/// the conversion's writes.
const STOP_AFTER: &str = "FILESYSTEM_TEST_STOP_AFTER";

fn run(root: &Path, args: &[&str], stop_after: Option<u64>) -> Output {
    let mut cmd = in_root(root, args);
    cmd.env_remove(STOP_AFTER);
    if let Some(n) = stop_after {
        cmd.env(STOP_AFTER, format!("convert:{n}"));
    }
    cmd.output().expect("run filesystem")
}

/// One tool call through `filesystem call … --backup`; its text, and whether it succeeded.
fn call(root: &Path, tool: &str, args: Value) -> (bool, String) {
    let out = run(root, &["call", tool, &args.to_string(), "--backup"], None);
    let text = printed(&out);
    (out.status.success(), text)
}

fn ok(root: &Path, tool: &str, args: Value) -> String {
    let (good, text) = call(root, tool, args.clone());
    assert!(good, "{tool} {args}: {text}");
    text
}

fn write(root: &Path, path: &str, content: &str) {
    ok(
        root,
        "write_file",
        json!({"path": path, "content": content}),
    );
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn put(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, content).expect("write");
}

fn log_lines(root: &Path, log: &str) -> Vec<Vec<String>> {
    read(root, log)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn the_documented_paths_exist_after_writes_undo_delete_and_move() {
    let (_d, root) = canonical_temp_dir();
    write(&root, "src/main.rs", "one");
    write(&root, "src/main.rs", "two");
    let s = ".filesystem/src/main.rs";
    assert_eq!(read(&root, &format!("{s}/00001")), "one");
    assert_eq!(read(&root, &format!("{s}/00002")), "two");
    assert_eq!(read(&root, &format!("{s}/.head")), "2\n");
    assert_eq!(read(&root, ".filesystem/.gitignore"), "*\n");
    assert!(!root.join(".filesystem/files").exists());

    ok(&root, "undo_file", json!({"path": "src/main.rs"}));
    assert_eq!(read(&root, &format!("{s}/.head")), "1\n");
    assert_eq!(read(&root, &format!("{s}/00002")), "two", "redo keeps it");
    // A write after the undo takes version 2 and leaves no second name behind.
    write(&root, "src/main.rs", "three");
    assert_eq!(read(&root, &format!("{s}/00002")), "three");
    assert_eq!(read(&root, &format!("{s}/.head")), "2\n");
    let names: Vec<String> = std::fs::read_dir(root.join(s))
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, [".head", "00001", "00002"], "{names:?}");

    ok(
        &root,
        "move_file",
        json!({"source": "src/main.rs", "destination": "src/lib.rs"}),
    );
    assert!(!root.join(s).exists());
    assert_eq!(read(&root, ".filesystem/src/lib.rs/.head"), "2\n");
    let moves = log_lines(&root, ".filesystem/.moves");
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0][1..], ["src/main.rs", "src/lib.rs"]);

    ok(&root, "delete_file", json!({"path": "src/lib.rs"}));
    assert_eq!(read(&root, ".filesystem/.trash/00001"), "three");
    assert_eq!(read(&root, ".filesystem/.trash/00001.history/00001"), "one");
    assert_eq!(read(&root, ".filesystem/.trash/00001.history/.head"), "2\n");
    let deletes = log_lines(&root, ".filesystem/.deletes");
    assert_eq!(deletes[0][1..], ["delete", "1", "src/lib.rs"]);

    // A directory's tree holds its children's trees; deleting it moves the whole tree.
    write(&root, "d/a.txt", "a");
    ok(&root, "delete_file", json!({"path": "d"}));
    assert_eq!(read(&root, ".filesystem/.trash/00002/a.txt"), "a");
    assert_eq!(
        read(&root, ".filesystem/.trash/00002.history/a.txt/.head"),
        "1\n"
    );
    ok(&root, "restore_file", json!({"id": 2}));
    assert_eq!(read(&root, ".filesystem/d/a.txt/00001"), "a");
    let deletes = log_lines(&root, ".filesystem/.deletes");
    assert_eq!(deletes[2][1..], ["restore", "2", "d"]);
    assert_eq!(read(&root, ".filesystem/.layout"), "2\n");
}

#[test]
fn a_user_s_own_store_gitignore_is_never_overwritten() {
    let (_d, root) = canonical_temp_dir();
    put(&root, ".filesystem/.gitignore", "mine\n");
    write(&root, "a.txt", "one");
    assert_eq!(read(&root, ".filesystem/.gitignore"), "mine\n");
}

#[test]
fn colliding_workspace_names_round_trip_through_write_undo_redo_delete_restore() {
    let (_d, root) = canonical_temp_dir();
    // Each workspace path and where its history must be.
    let cases = [
        (".moves", ".filesystem/%.moves"),
        ("d/00001", ".filesystem/d/%00001"),
        ("e/.head", ".filesystem/e/%.head"),
        ("%x", ".filesystem/%%x"),
        ("f/00002.undone", ".filesystem/f/%00002.undone"),
        (".trash", ".filesystem/%.trash"),
    ];
    for (path, _) in cases {
        write(&root, path, &format!("{path} v1"));
        write(&root, path, &format!("{path} v2"));
    }
    for (path, store) in cases {
        assert_eq!(read(&root, &format!("{store}/00001")), format!("{path} v1"));
        assert_eq!(read(&root, &format!("{store}/.head")), "2\n", "{path}");
    }
    // The store's own `.moves` is still the log, not a history.
    assert!(root.join(".filesystem/.moves").metadata().is_err());
    for (path, store) in cases {
        ok(&root, "undo_file", json!({"path": path}));
        assert_eq!(read(&root, path), format!("{path} v1"));
        ok(&root, "redo_file", json!({"path": path}));
        assert_eq!(read(&root, path), format!("{path} v2"));
        let text = ok(&root, "delete_file", json!({"path": path}));
        assert!(!root.join(store).exists(), "{path}: {text}");
    }
    for (i, (path, store)) in cases.iter().enumerate() {
        ok(&root, "restore_file", json!({"id": i + 1}));
        assert_eq!(read(&root, &format!("{store}/.head")), "2\n", "{path}");
        ok(&root, "undo_file", json!({"path": path}));
        assert_eq!(read(&root, path), format!("{path} v1"));
    }
    let out = run(&root, &["check"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A store exactly as the previous layout's code left it: `files/<#-escaped path>/#versions/`
/// with snapshots and `head` ("current newest"), trash histories that are a file's `#versions`
/// itself or a directory's tree, an orphaned history, a write after undo cut short (its undone
/// version kept as `00002.undone`), and a stray snapshot from a write cut short before its
/// head moved. No `.gitignore`.
fn old_store(root: &Path) {
    let f = ".filesystem/files";
    // src/main.rs at version 2 of 3.
    put(root, &format!("{f}/src/main.rs/#versions/00001"), "main 1");
    put(root, &format!("{f}/src/main.rs/#versions/00002"), "main 2");
    put(root, &format!("{f}/src/main.rs/#versions/00003"), "main 3");
    put(root, &format!("{f}/src/main.rs/#versions/head"), "2 3\n");
    put(root, "src/main.rs", "main 2");
    // `#h` was stored as `##h`.
    put(root, &format!("{f}/##h/#versions/00001"), "h 1");
    put(root, &format!("{f}/##h/#versions/head"), "1 1\n");
    put(root, "#h", "h 1");
    // A directory d holding a file named 00001, and d/.head.
    put(root, &format!("{f}/d/00001/#versions/00001"), "d0 1");
    put(root, &format!("{f}/d/00001/#versions/00002"), "d0 2");
    put(root, &format!("{f}/d/00001/#versions/head"), "2 2\n");
    put(root, "d/00001", "d0 2");
    put(root, &format!("{f}/d/.head/#versions/00001"), "dh 1");
    put(root, &format!("{f}/d/.head/#versions/head"), "1 1\n");
    put(root, "d/.head", "dh 1");
    // A write after undo cut short: head 1 of 3, version 2 set aside, the new snapshot in 2.
    put(root, &format!("{f}/p/#versions/00001"), "p 1");
    put(
        root,
        &format!("{f}/p/#versions/00002"),
        "never acknowledged",
    );
    put(root, &format!("{f}/p/#versions/00002.undone"), "p 2");
    put(root, &format!("{f}/p/#versions/00003"), "p 3");
    put(root, &format!("{f}/p/#versions/head"), "1 3\n");
    put(root, "p", "p 1");
    // A stray snapshot above newest.
    put(root, &format!("{f}/s/#versions/00001"), "s 1");
    put(root, &format!("{f}/s/#versions/00002"), "s stray");
    put(root, &format!("{f}/s/#versions/head"), "1 1\n");
    put(root, "s", "s 1");
    // A workspace folder named `files`, like the old layout's own subtree: `files/files/…`.
    put(root, &format!("{f}/files/x.txt/#versions/00001"), "fx 1");
    put(root, &format!("{f}/files/x.txt/#versions/00002"), "fx 2");
    put(root, &format!("{f}/files/x.txt/#versions/head"), "2 2\n");
    put(root, "files/x.txt", "fx 2");
    // The history tree of a trashed file's old parent, left behind empty.
    std::fs::create_dir_all(root.join(format!("{f}/gone"))).expect("mkdir");
    // A deleted file (its history is its #versions itself) and a deleted directory (a tree).
    put(root, ".filesystem/.trash/00001", "gone 2");
    put(root, ".filesystem/.trash/00001.history/00001", "gone 1");
    put(root, ".filesystem/.trash/00001.history/00002", "gone 2");
    put(root, ".filesystem/.trash/00001.history/head", "2 2\n");
    put(root, ".filesystem/.trash/00002/x.txt", "x 1");
    put(
        root,
        ".filesystem/.trash/00002.history/x.txt/#versions/00001",
        "x 1",
    );
    put(
        root,
        ".filesystem/.trash/00002.history/x.txt/#versions/head",
        "1 1\n",
    );
    put(
        root,
        ".filesystem/.deletes",
        "2024-01-01T00:00:00.000000Z\tdelete\t1\tgone/file.txt\n2024-01-01T00:00:01.000000Z\tdelete\t2\tdir\n",
    );
    put(root, ".filesystem/.next-trash-id", "3\n");
    // An orphaned history (a file's #versions set aside).
    put(
        root,
        ".filesystem/.orphans/2024-01-01T00:00:00.000000Z-7/00001",
        "o 1",
    );
    put(
        root,
        ".filesystem/.orphans/2024-01-01T00:00:00.000000Z-7/head",
        "1 1\n",
    );
}

/// The converted store holds every snapshot and head of [`old_store`] at its documented place.
fn assert_converted(root: &Path) {
    let f = |rel: &str| read(root, &format!(".filesystem/{rel}"));
    let absent = |rel: &str| {
        assert!(
            std::fs::symlink_metadata(root.join(".filesystem").join(rel)).is_err(),
            "{rel} is still there"
        )
    };
    // `files/` is now the history of the workspace folder of that name, and nothing else.
    let names = |rel: &str| {
        let mut n: Vec<String> = std::fs::read_dir(root.join(".filesystem").join(rel))
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names("files"), ["x.txt"]);
    assert_eq!(names("files/x.txt"), [".head", "00001", "00002"]);
    assert_eq!(f("files/x.txt/.head"), "2\n");
    assert_eq!(f("files/x.txt/00001"), "fx 1");
    absent(".converting");
    absent(".converted");
    assert_eq!(f(".layout"), "2\n");
    assert_eq!(f(".gitignore"), "*\n");
    assert_eq!(f("src/main.rs/.head"), "2\n");
    assert_eq!(f("src/main.rs/00001"), "main 1");
    assert_eq!(f("src/main.rs/00002"), "main 2");
    assert_eq!(f("src/main.rs/00003"), "main 3");
    assert_eq!(f("#h/.head"), "1\n");
    assert_eq!(f("#h/00001"), "h 1");
    assert_eq!(f("d/%00001/.head"), "2\n");
    assert_eq!(f("d/%00001/00002"), "d0 2");
    assert_eq!(f("d/%.head/00001"), "dh 1");
    assert_eq!(f("p/.head"), "1\n");
    assert_eq!(f("p/00002"), "p 2");
    assert_eq!(f("p/00003"), "p 3");
    absent("p/00002.undone");
    assert_eq!(f("s/.head"), "1\n");
    absent("s/00002");
    assert_eq!(f(".trash/00001.history/.head"), "2\n");
    assert_eq!(f(".trash/00001.history/00001"), "gone 1");
    assert_eq!(f(".trash/00002.history/x.txt/.head"), "1\n");
    assert_eq!(f(".trash/00002.history/x.txt/00001"), "x 1");
    assert_eq!(f(".orphans/2024-01-01T00:00:00.000000Z-7/.head"), "1\n");
    assert_eq!(f(".orphans/2024-01-01T00:00:00.000000Z-7/00001"), "o 1");
    // The stray snapshot was never acknowledged, but it is kept among the leftovers.
    let orphans: Vec<PathBuf> = std::fs::read_dir(root.join(".filesystem/.orphans"))
        .expect("orphans")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("old-layout-"))
        })
        .collect();
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    let stray = orphans[0].join("old-files/s/#versions/00002");
    assert_eq!(
        std::fs::read_to_string(&stray).expect("stray kept"),
        "s stray"
    );
    // Every snapshot is a single file again (no link left into the old tree).
    assert_eq!(
        root.join(".filesystem/src/main.rs/00001")
            .metadata()
            .expect("stat")
            .nlink(),
        1
    );
}

#[test]
fn a_store_in_the_previous_layout_converts_on_first_open_and_keeps_working() {
    let (_d, root) = canonical_temp_dir();
    old_store(&root);
    let out = run(&root, &["check"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("converted on next open"), "{text}");

    ok(&root, "list_trash", json!({}));
    assert_converted(&root);
    let out = run(&root, &["check"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Undo and redo walk the converted histories.
    ok(&root, "redo_file", json!({"path": "src/main.rs"}));
    assert_eq!(read(&root, "src/main.rs"), "main 3");
    ok(
        &root,
        "undo_file",
        json!({"path": "src/main.rs", "steps": 2}),
    );
    assert_eq!(read(&root, "src/main.rs"), "main 1");
    ok(&root, "redo_file", json!({"path": "p", "steps": 2}));
    assert_eq!(read(&root, "p"), "p 3");
    ok(&root, "undo_file", json!({"path": "d/00001"}));
    assert_eq!(read(&root, "d/00001"), "d0 1");
    ok(&root, "undo_file", json!({"path": "files/x.txt"}));
    assert_eq!(read(&root, "files/x.txt"), "fx 1");
    // Restores bring the converted histories back.
    ok(&root, "restore_file", json!({"id": 1}));
    ok(&root, "undo_file", json!({"path": "gone/file.txt"}));
    assert_eq!(read(&root, "gone/file.txt"), "gone 1");
    ok(&root, "restore_file", json!({"id": 2}));
    assert_eq!(read(&root, ".filesystem/dir/x.txt/.head"), "1\n");
    // A second open converts nothing again.
    write(&root, "new.txt", "n");
    assert_eq!(read(&root, ".filesystem/new.txt/00001"), "n");
}

#[test]
fn a_conversion_killed_at_any_step_converts_on_the_next_open_and_loses_nothing() {
    let mut n = 1u64;
    loop {
        let (_d, root) = canonical_temp_dir();
        old_store(&root);
        let first = run(&root, &["call", "list_trash", "{}"], Some(n));
        if first.status.success() {
            // The conversion took fewer than n steps: every step has been tried.
            assert!(n > 20, "the conversion took only {n} steps");
            assert_converted(&root);
            break;
        }
        assert!(
            first.status.code().is_none(),
            "step {n}: failed without being killed: {}",
            String::from_utf8_lossy(&first.stderr)
        );
        // `check` sees a store to convert (or a conversion to finish), not damage.
        let checked = run(&root, &["check"], None);
        assert!(
            checked.status.success(),
            "step {n}: {}",
            String::from_utf8_lossy(&checked.stdout)
        );
        // Killed once more while finishing, at a point that varies with n, then left alone.
        let second = run(&root, &["call", "list_trash", "{}"], Some(1 + (n * 7) % 11));
        if second.status.success() {
            assert_converted(&root);
        }
        let third = run(&root, &["call", "list_trash", "{}"], None);
        assert!(
            third.status.success(),
            "step {n}: the store does not open after the kill: {}",
            String::from_utf8_lossy(&third.stdout)
        );
        assert_converted(&root);
        n += 1;
        assert!(n < 1000, "the conversion never finished");
    }
}

/// A previous-layout store the old layout explains completely (no stray snapshot, so the
/// conversion empties `.converted/` to the last entry), with a workspace folder named `files`.
fn clean_old_store(root: &Path) {
    let f = ".filesystem/files";
    put(root, &format!("{f}/files/x.txt/#versions/00001"), "fx 1");
    put(root, &format!("{f}/files/x.txt/#versions/00002"), "fx 2");
    put(root, &format!("{f}/files/x.txt/#versions/head"), "2 2\n");
    put(root, "files/x.txt", "fx 2");
    put(root, &format!("{f}/a.txt/#versions/00001"), "a 1");
    put(root, &format!("{f}/a.txt/#versions/head"), "1 1\n");
    put(root, "a.txt", "a 1");
}

#[test]
fn a_conversion_killed_after_clearing_the_old_tree_keeps_the_history_of_a_folder_named_files() {
    let mut n = 1u64;
    loop {
        let (_d, root) = canonical_temp_dir();
        clean_old_store(&root);
        let first = run(&root, &["call", "list_trash", "{}"], Some(n));
        let killed = first.status.code().is_none();
        assert!(
            killed || first.status.success(),
            "step {n}: failed without being killed: {}",
            String::from_utf8_lossy(&first.stderr)
        );
        if killed {
            let checked = run(&root, &["check"], None);
            assert!(
                checked.status.success(),
                "step {n}: {}",
                String::from_utf8_lossy(&checked.stdout)
            );
            let again = run(&root, &["call", "list_trash", "{}"], None);
            assert!(again.status.success(), "step {n}: the store does not open");
        }
        assert_eq!(
            read(&root, ".filesystem/files/x.txt/.head"),
            "2\n",
            "step {n}"
        );
        assert_eq!(
            read(&root, ".filesystem/files/x.txt/00001"),
            "fx 1",
            "step {n}"
        );
        assert_eq!(read(&root, ".filesystem/a.txt/00001"), "a 1", "step {n}");
        assert!(
            !root.join(".filesystem/.converted").exists()
                && !root.join(".filesystem/.orphans").exists(),
            "step {n}: nothing is left over or set aside"
        );
        ok(&root, "undo_file", json!({"path": "files/x.txt"}));
        assert_eq!(read(&root, "files/x.txt"), "fx 1", "step {n}");
        let clean = run(&root, &["check", "--strict"], None);
        assert!(
            clean.status.success(),
            "step {n}: {}",
            String::from_utf8_lossy(&clean.stdout)
        );
        if !killed {
            assert!(n > 10, "the conversion took only {n} steps");
            break;
        }
        n += 1;
        assert!(n < 500, "the conversion never finished");
    }
}
