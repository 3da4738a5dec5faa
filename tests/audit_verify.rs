#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem audit verify` and hostile `.shelpa/` trees, through the real binary: problems are
//! reported, never followed.

use std::os::unix::fs::symlink;

use serde_json::Value;

use test_support::audit::Workspace;

fn findings(v: &Value) -> Vec<(String, String, Option<u64>, String)> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().expect("sev").to_string(),
                f["path"].as_str().expect("path").to_string(),
                f["line"].as_u64(),
                f["message"].as_str().expect("msg").to_string(),
            )
        })
        .collect()
}

#[test]
fn verify_reports_every_problem_in_the_fixture() {
    let ws = Workspace::fixture();
    let run = ws.audit(&["verify", "--json"]);
    assert_eq!(run.code, 1, "problems found means exit 1");
    let v = run.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["mirrors_checked"], 10);
    let found = findings(&v);
    let has = |sev: &str, path: &str, line: Option<u64>, text: &str| {
        assert!(
            found
                .iter()
                .any(|f| f.0 == sev && f.1 == path && f.2 == line && f.3.contains(text)),
            "missing {sev} {path}:{line:?} {text:?} in {found:#?}"
        );
    };
    has(
        "warning",
        ".shelpa/README.md",
        Some(3),
        "not a valid RFC 3339 time",
    );
    has("warning", ".shelpa/README.md", Some(7), "carriage return");
    has(
        "warning",
        ".shelpa/notes/plan.md",
        Some(21),
        "looks like a separator",
    );
    has(
        "warning",
        ".shelpa/notes/plan.md",
        Some(22),
        "looks like a separator",
    );
    has(
        "error",
        ".shelpa/docs/changelog.txt",
        Some(3),
        "ids go backwards",
    );
    has("error", ".shelpa/session.log", Some(3), "truncated");
    has(
        "warning",
        ".shelpa/data/latin1.txt",
        Some(1),
        "not valid UTF-8",
    );
    assert_eq!(found.len(), 7, "{found:#?}");
    assert_eq!(v["errors"], 2);
    assert_eq!(v["warnings"], 5);

    let table = ws.audit(&["verify"]);
    assert_eq!(table.code, 1);
    let text = table.text();
    assert!(text.starts_with("SEVERITY  MIRROR"), "{text}");
    assert!(
        text.ends_with("10 mirror(s) checked: 2 error(s), 5 warning(s)\n"),
        "{text}"
    );
}

#[test]
fn a_clean_mirror_verifies_with_exit_0() {
    let ws = Workspace::fixture();
    std::fs::remove_dir_all(ws.path(".shelpa")).expect("rm");
    std::fs::create_dir(ws.path(".shelpa")).expect("mkdir");
    std::fs::write(
        ws.path(".shelpa/todo.txt"),
        "--- shelpa:overwrite ts=2026-02-20T09:00:00Z record_id=1 ---\nbuy milk\n--- shelpa:overwrite ts=2026-02-20T09:00:01Z record_id=2 ---\ncall bob\n",
    )
    .expect("write");
    let run = ws.audit(&["verify"]).ok();
    assert_eq!(
        run.text(),
        "1 mirror(s) checked: 0 error(s), 0 warning(s)\n"
    );
}

#[test]
fn near_miss_lines_alone_are_warnings_and_exit_0() {
    let ws = Workspace::fixture();
    std::fs::remove_dir_all(ws.path(".shelpa")).expect("rm");
    std::fs::create_dir(ws.path(".shelpa")).expect("mkdir");
    // A note that talks about the format: its line looks like a separator but is not one.
    std::fs::write(
        ws.path(".shelpa/todo.txt"),
        "--- shelpa:overwrite ts=2026-02-20T09:00:00Z record_id=1 ---\nbuy milk\n--- shelpa:overwrite ts=yesterday record_id=2 ---\n",
    )
    .expect("write");
    let run = ws.audit(&["verify"]);
    assert_eq!(run.code, 0, "warnings only: {}", run.text());
    let text = run.text();
    assert!(
        text.contains("warning"),
        "the warning is still shown: {text}"
    );
    assert!(
        text.ends_with("1 mirror(s) checked: 0 error(s), 1 warning(s)\n"),
        "{text}"
    );
    let run = ws.audit(&["verify", "--json"]);
    assert_eq!(run.code, 0);
    let v = run.json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["errors"], 0);
    assert_eq!(v["warnings"], 1);
    assert_eq!(findings(&v).len(), 1);
}

#[test]
fn links_and_special_files_inside_shelpa_are_reported_and_never_followed() {
    let ws = Workspace::fixture();
    // A link to a file outside, a link to a directory outside, a FIFO (which would hang a naive
    // reader), and a workspace directory replaced by a link leading outside.
    symlink(ws.outside.join("secret.txt"), ws.path(".shelpa/leak.txt")).expect("symlink");
    symlink(&ws.outside, ws.path(".shelpa/outdir")).expect("symlink");
    let fifo = std::process::Command::new("mkfifo")
        .arg(ws.path(".shelpa/pipe"))
        .status()
        .expect("mkfifo");
    assert!(fifo.success());
    symlink(&ws.outside, ws.path("vendor")).expect("symlink");
    std::fs::write(ws.outside.join("lib.rs"), "TOP-SECRET lib\n").expect("write");

    let run = ws.audit(&["verify", "--json"]);
    assert_eq!(run.code, 1);
    let found = findings(&run.json());
    let has = |path: &str, text: &str| {
        assert!(
            found
                .iter()
                .any(|f| f.0 == "error" && f.1 == path && f.3.contains(text)),
            "missing {path} {text:?} in {found:#?}"
        );
    };
    has(
        ".shelpa/leak.txt",
        "symlink inside .shelpa/; it was not followed",
    );
    has(
        ".shelpa/outdir",
        "symlink inside .shelpa/; it was not followed",
    );
    has(".shelpa/pipe", "not a regular file");
    has(".shelpa/vendor/lib.rs", "outside the workspace");

    // Nothing outside the root is ever read, by any command.
    for args in [
        &["verify"][..],
        &["list"],
        &["list", "--json"],
        &["grep", "TOP-SECRET"],
        &["grep", "."],
        &["show", "leak.txt"],
        &["show", "outdir/secret.txt"],
        &["log", "outdir/secret.txt"],
        &["diff", "vendor/lib.rs", "#1"],
        &["show", "pipe"],
    ] {
        let r = ws.audit(args);
        assert!(
            !r.text().contains("TOP-SECRET") && !r.stderr.contains("TOP-SECRET"),
            "{args:?} leaked: {}{}",
            r.text(),
            r.stderr
        );
    }
    let leak = ws.audit(&["show", "leak.txt"]);
    assert_eq!(leak.code, 1);
    assert!(leak.stderr.contains("audit verify"), "{}", leak.stderr);
    let through_dir = ws.audit(&["show", "outdir/secret.txt"]);
    assert_eq!(through_dir.code, 1, "{}", through_dir.stderr);
    let list = ws.audit(&["list", "--json"]).ok().json();
    let paths: Vec<&str> = list["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("p"))
        .collect();
    assert!(!paths.contains(&"leak.txt") && !paths.contains(&"pipe"));
    assert_eq!(list["skipped_hostile_entries"], 3);
    let vendor = list["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == "vendor/lib.rs")
        .expect("vendor mirror listed");
    assert_eq!(vendor["workspace"], "outside root (not read)");
    // The mirror itself is inside the root and still readable.
    assert_eq!(
        ws.audit(&["show", ".shelpa/vendor/lib.rs"]).ok().text(),
        "pub fn vendored() {}\n"
    );
    let restore = ws.audit(&["restore", ".shelpa/vendor/lib.rs", "#1"]);
    assert_eq!(restore.code, 1, "{}", restore.stderr);
    assert_eq!(
        std::fs::read(ws.outside.join("lib.rs")).expect("read"),
        b"TOP-SECRET lib\n"
    );
}

#[test]
fn a_shelpa_directory_that_is_itself_a_link_is_not_followed() {
    let ws = Workspace::fixture();
    std::fs::remove_dir_all(ws.path(".shelpa")).expect("rm");
    std::fs::create_dir(ws.outside.join("mirror")).expect("mkdir");
    std::fs::write(ws.outside.join("mirror/todo.txt"), "TOP-SECRET\n").expect("write");
    symlink(ws.outside.join("mirror"), ws.path(".shelpa")).expect("symlink");
    let run = ws.audit(&["verify"]);
    assert_eq!(run.code, 1);
    assert!(
        run.text().contains(".shelpa itself is a symlink"),
        "{}",
        run.text()
    );
    let show = ws.audit(&["show", "todo.txt"]);
    assert_ne!(show.code, 0);
    assert!(!show.text().contains("TOP-SECRET"));
}

/// `filesystem ARGS --root ROOT` under an address-space limit of `kib` KiB: (exit code, stdout).
fn within(root: &std::path::Path, kib: u64, args: &[&str]) -> (Option<i32>, String) {
    let bin = test_support::bin::command().get_program().to_owned();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(bin)
        .args(args)
        .arg("--root")
        .arg(root)
        .env_remove("FILESYSTEM_ROOT")
        .output()
        .expect("run filesystem");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_mirror_of_lines_that_look_like_separators_is_verified_in_memory_bounded_by_a_line() {
    let (_d, root) = test_support::temp::canonical_temp_dir();
    std::fs::create_dir_all(root.join(".shelpa")).expect("mkdir");
    std::fs::write(root.join("notes.md"), "notes\n").expect("file");
    // 64 MiB of near-miss separators: a message per line would need gigabytes.
    let line = b"--- shelpa:x\n";
    let mut mirror = Vec::with_capacity(64 << 20);
    while mirror.len() + line.len() <= 64 << 20 {
        mirror.extend_from_slice(line);
    }
    let lines = mirror.len() / line.len();
    std::fs::write(root.join(".shelpa/notes.md"), &mirror).expect("mirror");
    drop(mirror);
    let limit = 256 * 1024;
    let (code, text) = within(&root, limit, &["audit", "verify", "--json"]);
    assert_eq!(code, Some(0), "warnings only: {text}");
    let v: Value = serde_json::from_str(&text).expect("json");
    let found = findings(&v);
    assert_eq!(found.len(), 51, "{found:#?}");
    assert!(
        found[50].3.contains(&format!("{} more", lines - 50)),
        "{:?}",
        found[50]
    );
    let (code, text) = within(&root, limit, &["check"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("more findings about separator lines"),
        "{text}"
    );
}
