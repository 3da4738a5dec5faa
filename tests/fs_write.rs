#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! create_file, write_file and create_directory through the real binary: what they create,
//! what they keep (mode, hard links), and every refusal, symlinks above all.

use serde_json::json;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

use test_support::temp::{exists, Ws};

#[test]
fn create_file_creates_missing_parents_and_answers_one_line() {
    let ws = Ws::new();
    let text = ws
        .call(
            "create_file",
            json!({"path": "a/b/c.txt", "content": "hello\n"}),
        )
        .expect_ok();
    assert_eq!(text, "Created a/b/c.txt: 6 bytes\n");
    assert_eq!(ws.read("a/b/c.txt"), "hello\n");
    // A new file is not left with the temporary file's private mode.
    let mode = std::fs::metadata(ws.path("a/b/c.txt"))
        .expect("meta")
        .mode()
        & 0o777;
    assert_ne!(mode, 0o600, "mode {mode:o}");
    assert!(mode & 0o600 == 0o600, "mode {mode:o}");
}

#[test]
fn create_file_refuses_anything_already_there() {
    let ws = Ws::new();
    ws.write("f.txt", "keep");
    std::fs::create_dir(ws.path("d")).expect("mkdir");
    for p in ["f.txt", "d", "."] {
        ws.call("create_file", json!({"path": p, "content": "new"}))
            .expect_err("AlreadyExists");
    }
    assert_eq!(ws.read("f.txt"), "keep");
    ws.write("plain", "x");
    let err = ws
        .call(
            "create_file",
            json!({"path": "plain/inside.txt", "content": "x"}),
        )
        .expect_err("AlreadyExists");
    assert!(err.contains("plain"), "{err}");
}

#[test]
fn write_file_creates_and_overwrites_keeping_the_mode() {
    let ws = Ws::new();
    let text = ws
        .call(
            "write_file",
            json!({"path": "new.sh", "content": "echo 1\n"}),
        )
        .expect_ok();
    assert_eq!(text, "Created new.sh: 7 bytes\n");
    std::fs::set_permissions(ws.path("new.sh"), std::fs::Permissions::from_mode(0o751))
        .expect("chmod");
    let text = ws
        .call(
            "write_file",
            json!({"path": "new.sh", "content": "echo 22\n"}),
        )
        .expect_ok();
    assert_eq!(text, "Wrote new.sh: 8 bytes\n");
    assert_eq!(ws.read("new.sh"), "echo 22\n");
    let mode = std::fs::metadata(ws.path("new.sh")).expect("meta").mode() & 0o7777;
    assert_eq!(mode, 0o751);
}

#[test]
fn an_overwrite_never_modifies_a_hard_linked_file_through_the_link() {
    let ws = Ws::new();
    ws.write("a.txt", "original\n");
    std::fs::hard_link(ws.path("a.txt"), ws.outside.join("other-link")).expect("hard link");
    ws.call(
        "write_file",
        json!({"path": "a.txt", "content": "changed\n"}),
    )
    .expect_ok();
    assert_eq!(ws.read("a.txt"), "changed\n");
    assert_eq!(
        std::fs::read_to_string(ws.outside.join("other-link")).expect("read"),
        "original\n"
    );
    let ino_a = std::fs::metadata(ws.path("a.txt")).expect("meta").ino();
    let ino_b = std::fs::metadata(ws.outside.join("other-link"))
        .expect("meta")
        .ino();
    assert_ne!(ino_a, ino_b);
}

/// A workspace with links of every kind at `link-in` (to a file inside), `link-out` (to a file
/// outside), `link-dangling` (to nothing) and `link-dir` (to a directory inside).
fn with_links() -> Ws {
    let ws = Ws::new();
    ws.write("target.txt", "inside\n");
    std::fs::create_dir(ws.path("realdir")).expect("mkdir");
    std::fs::write(ws.outside.join("secret.txt"), "outside\n").expect("write");
    symlink("target.txt", ws.path("link-in")).expect("link");
    symlink(ws.outside.join("secret.txt"), ws.path("link-out")).expect("link");
    symlink("nothing-here", ws.path("link-dangling")).expect("link");
    symlink("realdir", ws.path("link-dir")).expect("link");
    ws
}

fn links_untouched(ws: &Ws) {
    assert_eq!(ws.read("target.txt"), "inside\n");
    assert_eq!(
        std::fs::read_to_string(ws.outside.join("secret.txt")).expect("read"),
        "outside\n"
    );
    assert!(!exists(&ws.path("nothing-here")));
    for l in ["link-in", "link-out", "link-dangling", "link-dir"] {
        let meta = std::fs::symlink_metadata(ws.path(l)).expect("link still there");
        assert!(meta.file_type().is_symlink(), "{l} was replaced");
    }
    assert_eq!(
        std::fs::read_dir(ws.path("realdir")).expect("dir").count(),
        0
    );
}

#[test]
fn write_file_refuses_every_kind_of_symlink() {
    let ws = with_links();
    for l in ["link-in", "link-out", "link-dangling", "link-dir"] {
        let err = ws
            .call("write_file", json!({"path": l, "content": "pwned"}))
            .expect_err("InvalidArgument");
        assert!(err.contains("symbolic link"), "{err}");
    }
    links_untouched(&ws);
}

#[test]
fn create_file_refuses_every_kind_of_symlink() {
    let ws = with_links();
    for l in ["link-in", "link-out", "link-dangling", "link-dir"] {
        ws.call("create_file", json!({"path": l, "content": "pwned"}))
            .expect_err("AlreadyExists");
    }
    links_untouched(&ws);
}

#[test]
fn edit_file_refuses_every_kind_of_symlink() {
    let ws = with_links();
    for l in ["link-in", "link-out", "link-dangling", "link-dir"] {
        let edits = json!([{"oldText": "inside", "newText": "pwned"}]);
        let err = ws
            .call("edit_file", json!({"path": l, "edits": edits}))
            .expect_err("InvalidArgument");
        assert!(err.contains("symbolic link"), "{err}");
    }
    links_untouched(&ws);
}

#[test]
fn create_directory_refuses_every_kind_of_symlink() {
    let ws = with_links();
    for l in ["link-in", "link-out", "link-dangling", "link-dir"] {
        ws.call("create_directory", json!({"path": l}))
            .expect_err("InvalidArgument");
    }
    links_untouched(&ws);
}

#[test]
fn writing_through_a_directory_link_to_the_outside_is_path_escape() {
    let ws = Ws::new();
    symlink(&ws.outside, ws.path("out")).expect("link");
    for tool in ["write_file", "create_file"] {
        ws.call(tool, json!({"path": "out/new.txt", "content": "x"}))
            .expect_err("PathEscape");
    }
    ws.call("create_directory", json!({"path": "out/sub"}))
        .expect_err("PathEscape");
    assert_eq!(std::fs::read_dir(&ws.outside).expect("dir").count(), 0);
}

#[test]
fn writes_onto_directories_and_fifos_are_refused() {
    let ws = Ws::new();
    std::fs::create_dir(ws.path("d")).expect("mkdir");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        ws.path("pipe"),
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .expect("mkfifo");
    let err = ws
        .call("write_file", json!({"path": "d", "content": "x"}))
        .expect_err("InvalidArgument");
    assert!(err.contains("directory"), "{err}");
    let err = ws
        .call("write_file", json!({"path": "pipe", "content": "x"}))
        .expect_err("InvalidArgument");
    assert!(err.contains("FIFO"), "{err}");
    ws.call("write_file", json!({"path": ".", "content": "x"}))
        .expect_err("InvalidArgument");
}

#[test]
fn writes_outside_the_root_or_into_state_dirs_are_path_escape() {
    let ws = Ws::new();
    let outside_abs = ws.outside.join("x.txt");
    for tool in ["write_file", "create_file"] {
        for p in [
            "../outside/x.txt",
            outside_abs.to_str().expect("utf8"),
            ".filesystem/.head",
            ".shelpa/mirror",
            "a/../../outside/x.txt",
        ] {
            ws.call(tool, json!({"path": p, "content": "x"}))
                .expect_err("PathEscape");
        }
    }
    for p in ["../outside/d", ".filesystem/d"] {
        ws.call("create_directory", json!({"path": p}))
            .expect_err("PathEscape");
    }
    assert_eq!(std::fs::read_dir(&ws.outside).expect("dir").count(), 0);
    assert!(!exists(&ws.path(".filesystem/.head")));
}

#[test]
fn create_directory_is_recursive_and_idempotent() {
    let ws = Ws::new();
    let text = ws
        .call("create_directory", json!({"path": "a/b/c"}))
        .expect_ok();
    assert_eq!(text, "Created directory a/b/c\n");
    assert!(ws.path("a/b/c").is_dir());
    let text = ws
        .call("create_directory", json!({"path": "a/b/c"}))
        .expect_ok();
    assert!(text.contains("already exists"), "{text}");
    ws.write("file", "x");
    ws.call("create_directory", json!({"path": "file"}))
        .expect_err("AlreadyExists");
    ws.call("create_directory", json!({"path": "file/sub"}))
        .expect_err("AlreadyExists");
}

#[test]
fn writing_tools_name_unknown_and_missing_arguments() {
    let ws = Ws::new();
    let err = ws
        .call(
            "write_file",
            json!({"path": "a", "content": "x", "mode": 420}),
        )
        .expect_err("InvalidArgument");
    assert!(err.contains("'mode'"), "{err}");
    let err = ws
        .call("create_file", json!({"path": "a"}))
        .expect_err("InvalidArgument");
    assert!(err.contains("content"), "{err}");
    ws.call("create_directory", json!({"path": "a", "parents": true}))
        .expect_err("InvalidArgument");
    ws.call("write_file", json!({"path": "", "content": "x"}))
        .expect_err("InvalidArgument");
    assert!(!exists(&ws.path("a")));
}
