#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem audit list/log/show/grep/diff` on the hand-written fixture mirror, through
//! the real binary.

use serde_json::json;

use test_support::audit::Workspace;
use test_support::bin::command;

#[test]
fn list_shows_every_mirror_with_counts_times_and_workspace_state() {
    let ws = Workspace::fixture();
    let v = ws.audit(&["list", "--json"]).ok().json();
    let files = v["files"].as_array().expect("files");
    let by_path = |p: &str| {
        files
            .iter()
            .find(|f| f["path"] == p)
            .unwrap_or_else(|| panic!("{p} listed"))
            .clone()
    };
    assert_eq!(files.len(), 10);
    let plan = by_path("notes/plan.md");
    assert_eq!(plan["records"], 7);
    assert_eq!(plan["first_write"]["utc"], "2026-02-20T09:00:00Z");
    assert_eq!(plan["last_write"]["utc"], "2026-02-25T13:17:30Z");
    assert_eq!(plan["last_write"]["local"], "2026-02-25 13:17:30 +00:00");
    assert_eq!(plan["matches_newest"], true);
    let log = by_path("app.log");
    assert_eq!(log["records"], 1);
    assert_eq!(log["first_write"]["utc"], json!(null));
    assert_eq!(log["matches_newest"], true);
    let config = by_path("src/config.toml");
    assert_eq!(config["workspace_exists"], true);
    assert_eq!(config["matches_newest"], false);
    let scratch = by_path("scratch.txt");
    assert_eq!(scratch["workspace_exists"], false);
    assert_eq!(scratch["workspace"], "missing");
    assert_eq!(by_path("todo.txt")["matches_newest"], true);

    let table = ws.audit(&["list"]).ok().text();
    let header = table.lines().next().expect("header");
    assert!(header.starts_with("PATH "), "{table}");
    assert!(header.contains("LAST WRITE (UTC)"));
    let plan_line = table
        .lines()
        .find(|l| l.starts_with("notes/plan.md"))
        .expect("plan row");
    assert!(plan_line.contains("2026-02-25T13:17:30Z"), "{plan_line}");
    assert!(plan_line.contains("same as newest"), "{plan_line}");
    // Columns are aligned: every row has RECORDS at the same offset as the header.
    let col = header.find("RECORDS").expect("column");
    for line in table.lines().skip(1) {
        assert_ne!(line.as_bytes()[col], b' ', "misaligned row {line:?}");
        assert_eq!(line.as_bytes()[col - 1], b' ', "misaligned row {line:?}");
    }
}

#[test]
fn log_lists_records_with_ids_kinds_sizes_and_both_times() {
    let ws = Workspace::fixture();
    let v = ws.audit(&["log", "notes/plan.md", "--json"]).ok().json();
    let records = v["records"].as_array().expect("records");
    let ids: Vec<u64> = records
        .iter()
        .map(|r| r["record_id"].as_u64().expect("id"))
        .collect();
    assert_eq!(
        ids,
        [
            1771578000104857600,
            1771578312000123456,
            1771583400500000000,
            1771682565250000001,
            1771748100000000000,
            1771864809999999999,
            1772025450395572000
        ]
    );
    assert_eq!(records[0]["kind"], "baseline");
    assert_eq!(records[1]["kind"], "overwrite");
    assert_eq!(records[0]["size"], "# Plan\n\n- ship v0.1\n".len());
    assert_eq!(records[0]["first_line"], "# Plan");

    let appends = ws.audit(&["log", "app.log", "--json"]).ok().json();
    assert_eq!(appends["records"][0]["kind"], "appends");
    assert_eq!(appends["records"][0]["record_id"], json!(null));

    // Local time follows TZ; the UTC stamp stays as written.
    let table = ws.audit_tz(&["log", "notes/plan.md"], "JST-9").ok().text();
    let last = table.lines().last().expect("row");
    assert!(last.starts_with("#7"), "{table}");
    assert!(last.contains("1772025450395572000"));
    assert!(last.contains("2026-02-25 22:17:30 +09:00"), "{last}");
    assert!(last.contains("2026-02-25T13:17:30Z"), "{last}");
    assert!(last.contains("overwrite"));
}

#[test]
fn show_reconstructs_exact_contents_including_appends_and_separator_lookalikes() {
    let ws = Workspace::fixture();
    let newest = ws.audit(&["show", "notes/plan.md"]).ok();
    assert_eq!(newest.stdout, ws.read("notes/plan.md"));
    assert_eq!(
        newest.text(),
        "# Plan\n\n- ship v0.3\n- CHECKPOINT: audit tool merged\n"
    );
    let with_append = ws
        .audit(&["show", "notes/plan.md", "1771583400500000000"])
        .ok();
    assert_eq!(
        with_append.text(),
        "# Plan\n\n- ship v0.1\n- write docs\n- CHECKPOINT: parser done, all tests green\n- note: appended later by tee -a\n"
    );
    let lookalike = ws.audit(&["show", "notes/plan.md", "#4"]).ok();
    assert_eq!(
        lookalike.text(),
        "# Plan\n\nThe audit mirror marks each version with a line like this one:\n--- shelpa:overwrite ts=<time> record_id=<id> ---\n--- shelpa: the line above is a template, not a separator\n- ship v0.2\n"
    );
    let baseline = ws.audit(&["show", "src/config.toml", "#1"]).ok();
    assert_eq!(
        baseline.text(),
        "[server]\nport = 8080\nhost = \"127.0.0.1\"\n"
    );
    // The documented limit: a version without a final newline comes back with one when a later
    // record follows it; the newest one comes back exactly.
    assert_eq!(
        ws.audit(&["show", "todo.txt", "#1"]).ok().stdout,
        b"buy milk\n"
    );
    assert_eq!(
        ws.audit(&["show", "todo.txt"]).ok().stdout,
        b"buy milk\ncall bob"
    );
    // A deleted file is still recoverable, and non-UTF-8 content comes back byte for byte.
    assert_eq!(
        ws.audit(&["show", "scratch.txt"]).ok().text(),
        "temporary notes: the API key rotation happens on Fridays\n"
    );
    assert_eq!(
        ws.audit(&["show", "data/latin1.txt"]).ok().stdout,
        b"caf\xe9 cr\xe8me\n"
    );
    // The corrupt separator is content of the record before it.
    assert_eq!(
        ws.audit(&["show", "README.md"]).ok().text(),
        "# Demo project\n--- shelpa:overwrite ts=2026-02-20T25:61:00Z record_id=1771578000000000001 ---\n# Demo project\n\nNow with a README.\n--- shelpa:overwrite ts=2026-02-22T08:15:00Z record_id=1771748100000000007 ---\r\n# Demo project (v2)\n"
    );
    let v = ws.audit(&["show", "data/latin1.txt", "--json"]).ok().json();
    assert_eq!(v["utf8"], false);
    assert_eq!(v["record_id"], 1771931471000000000u64);
    assert_eq!(v["utc"], "2026-02-24T11:11:11Z");
    // Naming the mirror itself works too.
    assert_eq!(
        ws.audit(&["show", ".shelpa/todo.txt"]).ok().stdout,
        b"buy milk\ncall bob"
    );
}

#[test]
fn grep_finds_the_checkpoint_records_with_their_matching_lines() {
    let ws = Workspace::fixture();
    let v = ws.audit(&["grep", "CHECKPOINT", "--json"]).ok().json();
    let matches = v["matches"].as_array().expect("matches");
    let found: Vec<(String, u64, u64, String)> = matches
        .iter()
        .map(|m| {
            (
                m["path"].as_str().expect("path").to_string(),
                m["record_id"].as_u64().expect("id"),
                m["lines"][0]["line"].as_u64().expect("line"),
                m["lines"][0]["text"].as_str().expect("text").to_string(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "notes/plan.md".to_string(),
                1771583400500000000,
                5,
                "- CHECKPOINT: parser done, all tests green".to_string()
            ),
            (
                "notes/plan.md".to_string(),
                1772025450395572000,
                4,
                "- CHECKPOINT: audit tool merged".to_string()
            ),
        ]
    );
    assert_eq!(matches[0]["utc"], "2026-02-20T10:30:00Z");

    // A regex, limited to one file; the id-less appends record is named by position.
    let text = ws
        .audit(&["grep", "ERROR .*(timeout|disk)", "app.log"])
        .ok()
        .text();
    assert_eq!(
        text,
        "app.log  record #1  appends  -  -\n      2: 2026-02-20 09:00:02 ERROR db timeout after 30s\n      4: 2026-02-21 10:12:00 ERROR disk nearly full\n"
    );
    // Non-UTF-8 content is searchable.
    let latin = ws
        .audit(&["grep", "cr", "data/latin1.txt", "--json"])
        .ok()
        .json();
    assert_eq!(latin["matches"].as_array().expect("m").len(), 1);
    let none = ws.audit(&["grep", "no such text anywhere"]).ok();
    assert_eq!(none.text(), "no record has a matching line\n");
    let bad = ws.audit(&["grep", "(unclosed"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("not a valid regular expression"),
        "{}",
        bad.stderr
    );
}

#[test]
fn diff_between_versions_and_against_the_workspace_is_a_unified_diff() {
    let ws = Workspace::fixture();
    let text = ws
        .audit(&["diff", "src/config.toml", "#1", "1771583400000000000"])
        .ok()
        .text();
    assert_eq!(
        text,
        "--- a/src/config.toml@1771578312000000000 (2026-02-20T09:05:12Z)\n+++ b/src/config.toml@1771583400000000000 (2026-02-20T10:30:00Z)\n@@ -1,3 +1,5 @@\n [server]\n-port = 8080\n-host = \"127.0.0.1\"\n+port = 9090\n+host = \"0.0.0.0\"\n+[log]\n+level = \"debug\"\n"
    );
    let against_workspace = ws
        .audit(&["diff", "src/config.toml", "1771583400000000000"])
        .ok()
        .text();
    assert_eq!(
        against_workspace,
        "--- a/src/config.toml@1771583400000000000 (2026-02-20T10:30:00Z)\n+++ b/src/config.toml (workspace)\n@@ -3,3 +3,5 @@\n host = \"0.0.0.0\"\n [log]\n level = \"debug\"\n+# hand edit, never mirrored\n+timeout = 5\n"
    );
    let same = ws
        .audit(&["diff", "notes/plan.md", "#7", "--json"])
        .ok()
        .json();
    assert_eq!(same["identical"], true);
    assert_eq!(same["diff"], "");
    let deleted = ws.audit(&["diff", "scratch.txt", "#1"]).ok().text();
    assert!(
        deleted.contains("+++ b/scratch.txt (workspace: missing)"),
        "{deleted}"
    );
    assert!(deleted.contains("-temporary notes"), "{deleted}");
}

#[test]
fn usage_errors_exit_2_and_say_what_to_do() {
    let ws = Workspace::fixture();
    let cases: [(&[&str], &str); 5] = [
        (&["show", "nope.txt"], "filesystem audit list"),
        (
            &["show", "notes/plan.md", "123"],
            "filesystem audit log notes/plan.md",
        ),
        (&["show", "notes/plan.md", "#99"], "#N"),
        (&["log", "../../etc/passwd"], "relative to the root"),
        (&["diff", "notes/plan.md", "latest"], "record ids"),
    ];
    for (args, hint) in cases {
        let run = ws.audit(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(hint), "{args:?}: {}", run.stderr);
    }
    let json = ws.audit(&["show", "nope.txt", "--json"]);
    assert_eq!(json.code, 2);
    assert_eq!(json.json()["exit_code"], 2);
    // A missing subcommand is a clap usage error.
    assert_eq!(ws.audit(&[]).code, 2);
}

#[test]
fn root_defaults_to_the_current_directory() {
    let ws = Workspace::fixture();
    let out = command()
        .args(["audit", "show", "todo.txt"])
        .current_dir(&ws.root)
        .env_remove("FILESYSTEM_ROOT")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"buy milk\ncall bob");
}
