#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! A mirror written live by the pipe mode's tee, read back by the auditor: the writer and the
//! reader agree on the format byte for byte.

use std::path::Path;

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::temp::temp_dir;

fn pipe(root: &Path, tool: &str, args: Value) {
    let out = command()
        .args(["--legacy-pipe", "--no-call-log", "call", tool])
        .arg(args.to_string())
        .arg("--root")
        .arg(root)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn audit(root: &Path, args: &[&str]) -> (i32, Vec<u8>) {
    let out = command()
        .arg("audit")
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .expect("run");
    (out.status.code().unwrap_or(-1), out.stdout)
}

#[test]
fn tee_mirrors_read_back_exactly_with_the_auditor() {
    let tmp = temp_dir();
    let root = tmp.path();
    std::fs::write(root.join("notes.md"), "written before shelpa\n").expect("write");
    std::fs::write(root.join("app.log"), "a\nERROR one\nb\nERROR two\n").expect("write");

    pipe(
        root,
        "shelpa_write",
        json!({"path": "notes.md", "content": "first draft\n"}),
    );
    pipe(
        root,
        "shelpa_write",
        json!({"path": "notes.md", "content": "more\n", "append": true}),
    );
    pipe(
        root,
        "shelpa_pipe",
        json!({"command": "rg ERROR app.log | tee notes.md"}),
    );
    pipe(
        root,
        "shelpa_write",
        json!({"path": "notes.md", "content": "no final newline"}),
    );
    pipe(
        root,
        "shelpa_write",
        json!({"path": "notes.md", "content": "last\n"}),
    );

    let (code, log) = audit(root, &["log", "notes.md", "--json"]);
    assert_eq!(code, 0);
    let log: Value = serde_json::from_slice(&log).expect("json");
    let kinds: Vec<&str> = log["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "baseline",
            "overwrite",
            "overwrite",
            "overwrite",
            "overwrite"
        ]
    );

    let expected: [&[u8]; 5] = [
        b"written before shelpa\n",
        b"first draft\nmore\n",
        b"ERROR one\nERROR two\n",
        // A version without a final newline reads back with one: a documented limit of the format.
        b"no final newline\n",
        b"last\n",
    ];
    for (i, want) in expected.iter().enumerate() {
        let (code, got) = audit(root, &["show", "notes.md", &format!("#{}", i + 1)]);
        assert_eq!(code, 0);
        assert_eq!(got, *want, "record #{}", i + 1);
    }
    let (code, report) = audit(root, &["verify"]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&report));
    let (code, list) = audit(root, &["list", "--json"]);
    assert_eq!(code, 0);
    let list: Value = serde_json::from_slice(&list).expect("json");
    assert!(list.to_string().contains("notes.md"));
}
