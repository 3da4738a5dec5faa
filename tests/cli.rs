#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The command line without an MCP client: `tools`, `call`, exit codes, a reader that stops early.

use std::io::Read;
use std::process::Stdio;

use test_support::bin::command;
use test_support::temp::temp_dir;

fn workspace() -> tempfile::TempDir {
    let dir = temp_dir();
    let lines: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("big.txt"), lines).expect("write");
    dir
}

#[test]
fn call_prints_results_and_exits_1_with_the_message_on_stderr_when_the_tool_fails() {
    let ws = workspace();
    let ok = command()
        .args([
            "call",
            "read_text_file",
            r#"{"path":"big.txt","head":2}"#,
            "--root",
        ])
        .arg(ws.path())
        .output()
        .expect("run");
    assert!(ok.status.success());
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "line 0\nline 1\n");

    let failed = command()
        .args(["call", "read_text_file", r#"{"path":"../x"}"#, "--root"])
        .arg(ws.path())
        .output()
        .expect("run");
    assert_eq!(failed.status.code(), Some(1));
    assert!(failed.stdout.is_empty());
    assert!(String::from_utf8_lossy(&failed.stderr).starts_with("PathEscape"));

    for (tool, args) in [
        ("no_such_tool", "{}"),
        ("read_text_file", "not json"),
        ("read_text_file", "[1]"),
    ] {
        let usage = command()
            .args(["call", tool, args, "--root"])
            .arg(ws.path())
            .output()
            .expect("run");
        assert_eq!(usage.status.code(), Some(2), "{tool} {args}");
        assert!(!usage.stderr.is_empty());
    }
}

#[test]
fn tools_lists_every_tool_of_the_mode_with_a_summary_line() {
    let ws = workspace();
    let out = command()
        .args(["tools", "--backup", "--root"])
        .arg(ws.path())
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("14 tools (mode: filesystem"), "{text}");
    assert!(text.contains("  undo_file "));
    let pipe = command()
        .args(["--legacy-pipe", "tools", "--root"])
        .arg(ws.path())
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&pipe.stdout);
    assert!(text.starts_with("2 tools (mode: legacy-pipe"), "{text}");
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    let ws = workspace();
    let mut child = command()
        .args(["call", "read_text_file", r#"{"path":"big.txt"}"#, "--root"])
        .arg(ws.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut first = [0u8; 10];
    child
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut first)
        .expect("read");
    // Dropping our end closes the pipe while the binary is still writing.
    let status = child.wait().expect("wait");
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    assert!(!err.contains("panicked"), "{err}");
    assert!(status.success(), "{status:?} {err}");
}

#[test]
fn the_legacy_help_reproduces_shelpas() {
    // The modern surface's help, which spells out the rules (the original surface's is the
    // recorded text: tests/shelpa_surface.rs).
    let out = command()
        .args(["--legacy-pipe", "--surface", "modern", "--help"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in ["shelpa_pipe", "shelpa_write", "tee", "sed -i", "pwd", "cd"] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}
