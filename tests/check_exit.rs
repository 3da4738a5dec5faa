#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem check`'s exit status, which scripts and crash tests rely on: 0 when the store is
//! consistent (warnings and notes are printed but do not fail it), 1 when an error remains,
//! `--strict` counting warnings too, and 2 when the check cannot run at all.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::cli::in_root;
use test_support::cli::printed;
use test_support::mcp::initialize;
use test_support::temp::canonical_temp_dir;

fn check(root: &Path, flags: &[&str]) -> Output {
    let argv: Vec<&str> = ["check"].iter().chain(flags).copied().collect();
    in_root(root, &argv).output().expect("run check")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("check exited, not killed")
}

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, content).expect("write");
}

/// A temporary exactly as the workspace layer leaves one when its writer dies: the reserved name
/// and no permission bits.
fn leftover_temporary(root: &Path, rel: &str) {
    write(root, rel, b"half a write");
    std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(0o000))
        .expect("chmod");
}

#[test]
fn a_workspace_without_problems_exits_0() {
    let (_d, root) = canonical_temp_dir();
    write(&root, "a.txt", b"a");
    let out = check(&root, &[]);
    assert_eq!(code(&out), 0, "{}", printed(&out));
    assert!(
        printed(&out).contains("nothing left to do"),
        "{}",
        printed(&out)
    );
    assert_eq!(code(&check(&root, &["--strict"])), 0);
}

#[test]
fn warnings_are_printed_but_exit_0_unless_strict() {
    let (_d, root) = canonical_temp_dir();
    let t = "2024-01-01T00:00:00.000000Z";
    // A torn last log line and a leftover temporary: both harmless leftovers of a crash.
    write(
        &root,
        ".filesystem/.moves",
        format!("{t}\ta\tb\n{t}\tb\t").as_bytes(),
    );
    leftover_temporary(&root, "src/.filesystem-tmp-Ab12Cd");
    let out = check(&root, &[]);
    let shown = printed(&out);
    assert_eq!(code(&out), 0, "{shown}");
    assert!(shown.contains("0 error(s), 2 warning(s)"), "{shown}");
    assert!(shown.contains("warning .filesystem/.moves:2"), "{shown}");
    assert!(
        shown.contains("warning src/.filesystem-tmp-Ab12Cd"),
        "{shown}"
    );
    let strict = check(&root, &["--strict"]);
    assert_eq!(code(&strict), 1, "{}", printed(&strict));
    let json = check(&root, &["--json", "--strict"]);
    assert_eq!(code(&json), 1);
    let v: Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(
        (v["errors"].clone(), v["warnings"].clone()),
        (json!(0), json!(2))
    );
    // Repaired, nothing remains, so even --strict passes.
    let repaired = check(&root, &["--repair", "--strict"]);
    assert_eq!(code(&repaired), 0, "{}", printed(&repaired));
    assert!(!root.join("src/.filesystem-tmp-Ab12Cd").exists());
}

#[test]
fn an_error_exits_1_until_repaired_and_one_repair_cannot_fix_stays_1() {
    let (_d, root) = canonical_temp_dir();
    write(&root, ".filesystem/a/00001", b"1");
    write(&root, ".filesystem/a/.head", b"3\n");
    let out = check(&root, &[]);
    assert_eq!(code(&out), 1, "{}", printed(&out));
    assert!(printed(&out).contains("error "), "{}", printed(&out));
    let repaired = check(&root, &["--repair"]);
    assert_eq!(code(&repaired), 0, "{}", printed(&repaired));
    assert_eq!(code(&check(&root, &["--strict"])), 0);
    // A link planted in the store is never followed or removed by check: it stays an error.
    std::os::unix::fs::symlink("/etc", root.join(".filesystem/a/evil")).expect("link");
    assert_eq!(code(&check(&root, &["--repair"])), 1);
    assert_eq!(code(&check(&root, &[])), 1);
}

#[test]
fn a_check_that_cannot_run_exits_2() {
    let (_d, root) = canonical_temp_dir();
    let out = check(&root.join("missing"), &[]);
    assert_eq!(code(&out), 2, "{}", printed(&out));
}

#[test]
fn check_help_documents_the_exit_status() {
    let out = command().args(["check", "--help"]).output().expect("help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for needle in [
        "Exit status:",
        "0  the store is consistent",
        "1  an error remains",
        "--strict",
        "2  the check could not run",
    ] {
        assert!(help.contains(needle), "{needle:?} missing from:\n{help}");
    }
}

/// The finding of the issue: a server killed in the middle of writing leaves the temporary of
/// that write (and of its snapshot) behind, and `check` must call the store consistent.
#[test]
fn after_a_server_is_killed_mid_write_check_exits_0_with_warnings() {
    let (_d, root) = canonical_temp_dir();
    write(&root, "big.txt", b"old\n");
    let content = "x".repeat(48 << 20);
    let request = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "write_file", "arguments": {"path": "big.txt", "content": content}}})
    );
    // Until one kill lands before the write renames its temporary, for up to two minutes.
    let mut left = None;
    let giving_up = Instant::now() + Duration::from_secs(120);
    while Instant::now() < giving_up {
        let mut child = command()
            .arg("--root")
            .arg(&root)
            .arg("--backup")
            .env_remove("FILESYSTEM_ROOT")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let init = initialize(1, "2025-06-18", "t");
        writeln!(stdin, "{init}").expect("init");
        stdin.write_all(request.as_bytes()).expect("request");
        stdin.flush().expect("flush");
        // Kill it the moment a temporary of the write shows up beside the file.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && left.is_none() {
            left = std::fs::read_dir(&root)
                .expect("ls")
                .flatten()
                .find(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(".filesystem-tmp-")
                })
                .map(|e| e.file_name());
            if child.try_wait().expect("wait").is_some() {
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        if left.as_ref().is_some_and(|n| root.join(n).exists()) {
            break;
        }
        left = None;
    }
    let Some(name) = left else {
        panic!("the write never left a temporary to kill it at");
    };
    let out = check(&root, &[]);
    let shown = printed(&out);
    assert_eq!(code(&out), 0, "{shown}");
    assert!(shown.contains(" 0 error(s)"), "{shown}");
    let mode = std::fs::metadata(root.join(&name))
        .expect("temp")
        .permissions()
        .mode();
    if mode & 0o7777 == 0 {
        // Still bearing the mark of an unfinished temporary: reported as a warning.
        assert!(shown.contains("interrupted overwrite"), "{shown}");
        assert_eq!(code(&check(&root, &["--strict"])), 1);
    }
    let repaired = check(&root, &["--repair"]);
    assert_eq!(code(&repaired), 0, "{}", printed(&repaired));
    // The file itself is whole: the old content or the new, never a mix.
    let now = std::fs::read(root.join("big.txt")).expect("big");
    assert!(
        now == b"old\n" || now == content.as_bytes(),
        "torn: {} bytes",
        now.len()
    );
}

#[test]
fn a_running_servers_registry_and_rotated_call_logs_are_part_of_a_consistent_store() {
    let (_dir, root) = canonical_temp_dir();
    let mut server = command()
        .arg("--root")
        .arg(&root)
        .env("FILESYSTEM_CALL_LOG_ROTATE_BYTES", "2000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = server.stdin.take().expect("stdin");
    let mut stdout = std::io::BufReader::new(server.stdout.take().expect("stdout"));
    let mut ask = |msg: Value| -> Value {
        writeln!(stdin, "{msg}").expect("send");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).expect("reply");
        serde_json::from_str(&line).expect("json")
    };
    ask(initialize(0, "2025-11-25", "t"));
    // Enough writes for the call log to rotate and for the server to register its temporaries.
    for i in 1..40 {
        let reply = ask(
            json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt","content":format!("{i}")}}}),
        );
        assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
    }
    let store = root.join(".filesystem");
    assert!(
        store.join(".live").is_dir(),
        "the server registered its temporaries"
    );
    assert!(
        store.join(".calls.jsonl.1").is_file(),
        "the call log rotated"
    );
    let out = check(&root, &["--strict"]);
    assert_eq!(code(&out), 0, "{}", printed(&out));
    // A repair while the server runs leaves its registry where it is.
    let out = check(&root, &["--repair"]);
    assert_eq!(code(&out), 0, "{}", printed(&out));
    assert!(store.join(".live").is_dir(), "{}", printed(&out));
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}
