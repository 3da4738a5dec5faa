#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Pipe-mode contract gaps of issue #14, through the real binary and the real tools: an overwrite
//! of a hard-linked file replaces it while appends stay refused, and the original whitelist's
//! companion tools are `MISSING_TOOL`, never `DISALLOWED_CMD`.

use std::os::unix::fs::MetadataExt;
use std::process::Stdio;

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::temp::TempRoot;

/// A canonical temporary workspace, with this file's way to run the pipe tools in it.
struct Ws(TempRoot);

impl std::ops::Deref for Ws {
    type Target = TempRoot;

    fn deref(&self) -> &TempRoot {
        &self.0
    }
}

impl Ws {
    fn new() -> Ws {
        Ws(TempRoot::new())
    }

    fn ino(&self, rel: &str) -> u64 {
        std::fs::metadata(self.root.join(rel)).expect("stat").ino()
    }

    /// `a.txt` and its hard link `b.txt`, both "old\n", and `src.txt` to pipe from.
    fn linked_pair(&self) {
        self.write("a.txt", "old\n");
        std::fs::hard_link(self.root.join("a.txt"), self.root.join("b.txt")).expect("link");
        self.write("src.txt", "new\nsecond\n");
    }

    /// Runs one tool call with `filesystem --legacy-pipe call`; returns (ok, result JSON).
    fn call(&self, tool: &str, args: Value) -> (bool, Value) {
        let out = command()
            .args(["--legacy-pipe", "--no-call-log", "call", tool])
            .arg(args.to_string())
            .arg("--root")
            .arg(&self.root)
            .stdin(Stdio::null())
            .output()
            .expect("run binary");
        let text = if out.status.success() {
            String::from_utf8_lossy(&out.stdout).into_owned()
        } else {
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        let value: Value =
            serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        (out.status.success(), value)
    }

    fn pipe(&self, command: &str) -> (bool, Value) {
        self.call("shelpa_pipe", json!({ "command": command }))
    }
}

fn assert_refused(ok: bool, v: &Value, code: &str, reason: &str) {
    assert!(!ok, "expected a refusal: {v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    assert_eq!(v["error"]["reason"], reason, "{v}");
}

#[test]
fn tee_overwrite_replaces_a_hard_linked_file_and_the_other_name_keeps_the_old_content() {
    let ws = Ws::new();
    ws.linked_pair();
    let old_ino = ws.ino("a.txt");
    let (ok, v) = ws.pipe("head -n 1 src.txt | tee a.txt");
    assert!(ok, "{v}");
    assert_eq!(v["meta"]["tee"]["mode"], "overwrite", "{v}");
    assert_eq!(ws.read("a.txt"), "new\n");
    assert_eq!(ws.read("b.txt"), "old\n");
    assert_ne!(ws.ino("a.txt"), old_ino, "a.txt must be a new file");
    assert_eq!(ws.ino("b.txt"), old_ino);
}

#[test]
fn tee_append_to_a_hard_linked_file_stays_refused() {
    let ws = Ws::new();
    ws.linked_pair();
    for command in [
        "head -n 1 src.txt | tee -a a.txt",
        "head -n 1 src.txt | tee a.txt -a",
        "head -n 1 src.txt | tee --append b.txt",
    ] {
        let (ok, v) = ws.pipe(command);
        assert_refused(ok, &v, "GUARD_VIOLATION", "DISALLOWED_TARGET");
    }
    assert_eq!(ws.read("a.txt"), "old\n");
    assert_eq!(ws.read("b.txt"), "old\n");
}

#[test]
fn shelpa_write_agrees_with_tee_on_hard_linked_files() {
    let ws = Ws::new();
    ws.linked_pair();
    let (ok, v) = ws.call(
        "shelpa_write",
        json!({"path": "a.txt", "content": "tee -a\n", "append": true}),
    );
    assert_refused(ok, &v, "GUARD_VIOLATION", "DISALLOWED_TARGET");
    assert_eq!(ws.read("a.txt"), "old\n");

    let (ok, v) = ws.call("shelpa_write", json!({"path": "a.txt", "content": "new\n"}));
    assert!(ok, "{v}");
    assert_eq!(ws.read("a.txt"), "new\n");
    assert_eq!(ws.read("b.txt"), "old\n");
    // a.txt now has a single link again, so an append to it goes through.
    let (ok, v) = ws.call(
        "shelpa_write",
        json!({"path": "a.txt", "content": "more\n", "append": true}),
    );
    assert!(ok, "{v}");
    assert_eq!(ws.read("a.txt"), "new\nmore\n");
    assert_eq!(ws.read("b.txt"), "old\n");
}

const COMPANIONS: [&str; 3] = ["ctree_check", "ctree_generate", "serena_find_symbol"];

#[test]
fn companion_tools_of_the_original_toolkit_are_missing_not_disallowed() {
    let ws = Ws::new();
    ws.write("src.txt", "x\n");
    for name in COMPANIONS {
        // Alone, with options nobody models, and as a later stage of a pipeline.
        for command in [
            name.to_string(),
            format!("{name} --frobnicate -q ."),
            format!("head -n 1 src.txt | {name} | sort"),
        ] {
            let (ok, v) = ws.pipe(&command);
            assert_refused(ok, &v, "GUARD_VIOLATION", "MISSING_TOOL");
            let detail = v["error"]["detail"].as_str().unwrap_or("");
            assert!(detail.contains(name), "{command}: {v}");
            assert!(detail.contains("companion tool"), "{command}: {v}");
            assert!(detail.contains("not available"), "{command}: {v}");
        }
    }
    // Only the exact names: a near miss is still off the list.
    let (ok, v) = ws.pipe("ctree_checks");
    assert_refused(ok, &v, "GUARD_VIOLATION", "DISALLOWED_CMD");
}

#[test]
fn the_help_lists_the_companion_tools_as_missing() {
    for surface in ["original", "modern"] {
        help_lists_the_companions(surface);
    }
}

fn help_lists_the_companions(surface: &str) {
    let out = command()
        .args(["--legacy-pipe", "--surface", surface, "--help"])
        .output()
        .expect("run binary");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help
        .lines()
        .find(|l| l.contains("MISSING:") && l.contains("ctree_check"))
        .unwrap_or_else(|| panic!("no missing line for the companions:\n{help}"));
    for name in COMPANIONS {
        assert!(line.contains(name), "{line}");
    }
    assert!(
        help.contains("not available in this reconstruction"),
        "{help}"
    );
}
