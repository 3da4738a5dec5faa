#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! read_text_file through the real binary: whole files, head/tail, and every refusal.

use serde_json::json;
use std::os::unix::fs::symlink;

use test_support::temp::Ws;

#[test]
fn reads_a_whole_text_file() {
    let ws = Ws::new();
    ws.write("src/a.txt", "one\ntwo\n");
    let text = ws
        .call("read_text_file", json!({"path": "src/a.txt"}))
        .expect_ok();
    assert_eq!(text, "one\ntwo\n");
    let abs = ws.path("src/a.txt");
    let text = ws
        .call(
            "read_text_file",
            json!({"path": abs.to_str().expect("utf8")}),
        )
        .expect_ok();
    assert_eq!(text, "one\ntwo\n");
}

#[test]
fn head_returns_the_first_lines_and_tail_the_last() {
    let ws = Ws::new();
    ws.write("a.txt", "one\ntwo\nthree\nfour\n");
    let head = ws
        .call("read_text_file", json!({"path": "a.txt", "head": 2}))
        .expect_ok();
    assert_eq!(head, "one\ntwo\n");
    let tail = ws
        .call("read_text_file", json!({"path": "a.txt", "tail": 2}))
        .expect_ok();
    assert_eq!(tail, "three\nfour\n");
    let all = ws
        .call("read_text_file", json!({"path": "a.txt", "tail": 10}))
        .expect_ok();
    assert_eq!(all, "one\ntwo\nthree\nfour\n");
    ws.write("b.txt", "x\ny\nz");
    let tail = ws
        .call("read_text_file", json!({"path": "b.txt", "tail": 2}))
        .expect_ok();
    assert_eq!(tail, "y\nz\n", "the CLI adds the newline the file lacks");
}

#[test]
fn tail_reads_the_end_of_a_file_larger_than_the_read_limit() {
    let ws = Ws::new();
    let mut big = String::new();
    for i in 0..200_000 {
        big.push_str(&format!("line {i}\n"));
    }
    ws.write("big.log", &big);
    let flags = ["--max-read-bytes", "100000"];
    let tail = ws
        .call_with(
            "read_text_file",
            json!({"path": "big.log", "tail": 3}),
            &flags,
        )
        .expect_ok();
    assert_eq!(tail, "line 199997\nline 199998\nline 199999\n");
    let head = ws
        .call_with(
            "read_text_file",
            json!({"path": "big.log", "head": 1}),
            &flags,
        )
        .expect_ok();
    assert_eq!(head, "line 0\n");
    let err = ws
        .call_with("read_text_file", json!({"path": "big.log"}), &flags)
        .expect_err("InvalidArgument");
    assert!(err.contains("head or tail"), "{err}");
    let err = ws
        .call_with(
            "read_text_file",
            json!({"path": "big.log", "tail": 150000}),
            &flags,
        )
        .expect_err("InvalidArgument");
    assert!(err.contains("fewer lines"), "{err}");
}

#[test]
fn head_and_tail_together_are_refused() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let err = ws
        .call(
            "read_text_file",
            json!({"path": "a.txt", "head": 1, "tail": 1}),
        )
        .expect_err("InvalidArgument");
    assert!(err.contains("head") && err.contains("tail"), "{err}");
}

#[test]
fn directories_binary_files_and_missing_files_are_refused_with_a_hint() {
    let ws = Ws::new();
    ws.write("dir/x.txt", "x");
    ws.write("nul.bin", b"ab\0cd");
    ws.write("latin1.txt", b"caf\xe9\n");
    let err = ws
        .call("read_text_file", json!({"path": "dir"}))
        .expect_err("InvalidArgument");
    assert!(err.contains("list_directory"), "{err}");
    for p in ["nul.bin", "latin1.txt"] {
        let err = ws
            .call("read_text_file", json!({"path": p}))
            .expect_err("InvalidArgument");
        assert!(err.contains("binary"), "{err}");
        assert!(err.contains("this tool only returns text"), "{err}");
    }
    let err = ws
        .call("read_text_file", json!({"path": "missing.txt"}))
        .expect_err("NotFound");
    assert!(err.contains("missing.txt"), "{err}");
}

#[test]
fn a_fifo_is_refused_without_hanging() {
    let ws = Ws::new();
    let fifo = ws.path("pipe");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .expect("mkfifo");
    let err = ws
        .call("read_text_file", json!({"path": "pipe"}))
        .expect_err("InvalidArgument");
    assert!(err.contains("FIFO"), "{err}");
}

#[test]
fn unknown_and_mistyped_arguments_are_named() {
    let ws = Ws::new();
    ws.write("a.txt", "x");
    let err = ws
        .call("read_text_file", json!({"path": "a.txt", "lines": 3}))
        .expect_err("InvalidArgument");
    assert!(err.contains("'lines'"), "{err}");
    ws.call("read_text_file", json!({"path": "a.txt", "head": "3"}))
        .expect_err("InvalidArgument");
    ws.call("read_text_file", json!({}))
        .expect_err("InvalidArgument");
}

#[test]
fn paths_outside_the_root_and_into_the_state_dirs_are_path_escape() {
    let ws = Ws::new();
    std::fs::write(ws.outside.join("secret.txt"), "secret").expect("write");
    std::fs::create_dir_all(ws.path(".filesystem")).expect("mkdir");
    std::fs::write(ws.path(".filesystem/.moves"), "x").expect("write");
    symlink(ws.outside.join("secret.txt"), ws.path("leak")).expect("link");
    symlink(&ws.outside, ws.path("outdir")).expect("link");
    let outside_abs = ws.outside.join("secret.txt");
    for p in [
        "../outside/secret.txt",
        outside_abs.to_str().expect("utf8"),
        "/etc/passwd",
        "leak",
        "outdir/secret.txt",
        ".filesystem/.moves",
        ".shelpa/x",
    ] {
        let err = ws
            .call("read_text_file", json!({"path": p}))
            .expect_err("PathEscape");
        assert!(!err.contains("secret\n"), "{err}");
    }
}

#[test]
fn a_symlink_inside_pointing_inside_is_read_through() {
    let ws = Ws::new();
    ws.write("real.txt", "real\n");
    symlink("real.txt", ws.path("alias")).expect("link");
    let text = ws
        .call("read_text_file", json!({"path": "alias"}))
        .expect_ok();
    assert_eq!(text, "real\n");
}
