#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Every subcommand that works on one root chooses it the same way: `--root`, else
//! `FILESYSTEM_ROOT`, else the current directory (the help promises it for all of them). The
//! `--server` daemon has no root of its own and ignores `FILESYSTEM_ROOT`.
//!
//! Each test runs the real binary in a current directory that is neither root, so a subcommand
//! that fell back to it (as `check` and `audit` once did) would be caught.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};
use test_support::audit::copy_tree;
use test_support::bin::command;
use test_support::fixtures::fixture;
use test_support::temp::canonical_temp_dir;

/// Three workspaces side by side: `env` (named by `FILESYSTEM_ROOT`), `flag` (named by `--root`)
/// and `cwd` (the current directory). Each holds `which.txt` naming itself; `env` and `flag` also
/// hold a copy of the shelpa mirror fixture, whose `todo.txt` mirror only `env`'s keeps.
struct Roots {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Roots {
    fn new() -> Roots {
        let (tmp, base) = canonical_temp_dir();
        let fixture = fixture("shelpa-mirror");
        for name in ["env", "flag", "cwd"] {
            let root = base.join(name);
            if name == "cwd" {
                std::fs::create_dir(&root).expect("mkdir");
            } else {
                copy_tree(&fixture, &root);
            }
            std::fs::write(root.join("which.txt"), name).expect("write");
        }
        // Only the environment's root has a mirror of todo.txt, so `audit show todo.txt` tells
        // which root it read.
        std::fs::remove_file(base.join("flag/.shelpa/todo.txt")).expect("remove mirror");
        Roots { _tmp: tmp, base }
    }

    fn root(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    /// The binary with `FILESYSTEM_ROOT` naming `env`, started in `cwd`, with `--root flag`
    /// when `with_flag`.
    fn command(&self, with_flag: bool) -> Command {
        let mut cmd = command();
        cmd.env("FILESYSTEM_ROOT", self.root("env"))
            .env("TZ", "UTC")
            .current_dir(self.root("cwd"))
            .stdin(Stdio::null());
        if with_flag {
            cmd.arg("--root").arg(self.root("flag"));
        }
        cmd
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run the binary")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn call_reads_from_the_environments_root_unless_root_is_given() {
    let roots = Roots::new();
    let read = |with_flag| {
        stdout(&run(roots.command(with_flag).args([
            "call",
            "read_text_file",
            r#"{"path":"which.txt"}"#,
        ])))
    };
    assert_eq!(read(false).trim(), "env");
    assert_eq!(read(true).trim(), "flag");
}

#[test]
fn tools_names_the_environments_root_unless_root_is_given() {
    let roots = Roots::new();
    let header = |with_flag| {
        let text = stdout(&run(roots.command(with_flag).arg("tools")));
        text.lines().next().unwrap_or_default().to_string()
    };
    let env = header(false);
    assert!(
        env.contains(&format!("root: {})", roots.root("env").display())),
        "{env}"
    );
    let flag = header(true);
    assert!(
        flag.contains(&format!("root: {})", roots.root("flag").display())),
        "{flag}"
    );
}

#[test]
fn serving_reads_from_the_environments_root_unless_root_is_given() {
    let roots = Roots::new();
    let served = |with_flag| {
        let mut child = roots
            .command(with_flag)
            .arg("--no-call-log")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let requests = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "read_text_file", "arguments": {"path": "which.txt"}}}),
        ];
        let mut stdin = child.stdin.take().expect("stdin");
        for request in requests {
            writeln!(stdin, "{request}").expect("write a request");
        }
        drop(stdin);
        let out = child.wait_with_output().expect("wait");
        let text = stdout(&out);
        let reply = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|m| m["id"] == json!(2))
            .unwrap_or_else(|| panic!("no reply to the call in {text}"));
        assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert_eq!(served(false), "env");
    assert_eq!(served(true), "flag");
}

#[test]
fn check_checks_the_environments_root_unless_root_is_given() {
    let roots = Roots::new();
    let checked = |with_flag| {
        let out = run(roots.command(with_flag).args(["check", "--json"]));
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("check --json printed no JSON ({e}): {out:?}"));
        report["root"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(checked(false), roots.root("env").display().to_string());
    assert_eq!(checked(true), roots.root("flag").display().to_string());
}

#[test]
fn audit_reads_the_environments_mirrors_unless_root_is_given() {
    let roots = Roots::new();
    let show = |with_flag| run(roots.command(with_flag).args(["audit", "show", "todo.txt"]));
    let from_env = show(false);
    assert_eq!(from_env.status.code(), Some(0), "{from_env:?}");
    assert_eq!(from_env.stdout, b"buy milk\ncall bob");
    // The flag's root has no mirror of todo.txt: the audit looked there, not in the environment's.
    let from_flag = show(true);
    assert_eq!(from_flag.status.code(), Some(2), "{from_flag:?}");
    assert!(from_flag.stdout.is_empty(), "{from_flag:?}");
}

#[test]
fn without_either_the_current_directory_is_the_root() {
    let roots = Roots::new();
    let out = run(roots.command(false).env_remove("FILESYSTEM_ROOT").args([
        "call",
        "read_text_file",
        r#"{"path":"which.txt"}"#,
    ]));
    assert_eq!(stdout(&out).trim(), "cwd");
    // An empty FILESYSTEM_ROOT reads as unset.
    let out = run(roots
        .command(false)
        .env("FILESYSTEM_ROOT", "")
        .args(["check", "--json"]));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        report["root"],
        json!(roots.root("cwd").display().to_string())
    );
}

#[test]
fn a_missing_environment_root_is_refused_by_every_subcommand() {
    let roots = Roots::new();
    let gone = roots.root("gone");
    let subcommands: [&[&str]; 4] = [
        &["tools"],
        &["call", "read_text_file", r#"{"path":"which.txt"}"#],
        &["check"],
        &["audit", "list"],
    ];
    for args in subcommands {
        let out = run(roots
            .command(false)
            .env("FILESYSTEM_ROOT", &gone)
            .args(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("does not exist"), "{args:?}: {err}");
    }
}

#[test]
fn the_daemon_ignores_the_environments_root() {
    let roots = Roots::new();
    // --root would conflict with --server; FILESYSTEM_ROOT must not.
    let out = run(roots
        .command(false)
        .args(["--server", "--allow-root"])
        .arg(&roots.base)
        .arg("tools"));
    let text = stdout(&out);
    let header = text.lines().next().unwrap_or_default();
    assert!(header.contains("root: named by each call"), "{header}");
    assert!(
        !header.contains(&roots.root("env").display().to_string()),
        "{header}"
    );
}
