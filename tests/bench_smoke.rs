#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The benchmark harness on tiny inputs against our binary only: it must run every case to the
//! end and produce a report. Nothing here looks at how long anything took — a benchmark is not
//! a test — but every measurement the harness makes of a tool we serve must have succeeded. A
//! second run adds the same binary as a `--baseline` build to check its rows and report section.

#[allow(dead_code)]
#[path = "../benches/harness/mod.rs"]
mod harness;

use harness::peers::{Kind, Peer};
use harness::{report, Config, Sizes, CASES};

fn ours() -> Peer {
    Peer {
        label: "filesystem".into(),
        kind: Kind::Ours,
        program: env!("CARGO_BIN_EXE_filesystem").into(),
        leading: vec![],
        version: "test build".into(),
    }
}

fn preamble() -> report::Preamble {
    report::Preamble {
        command: "smoke".into(),
        machine: harness::machine::facts(),
        versions: vec![("filesystem".into(), "test build".into())],
        reps: 1,
        reps_startup: 1,
        findings: String::new(),
    }
}

#[test]
fn smoke_run_measures_every_case_against_our_binary_and_renders_a_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = Config {
        sizes: Sizes::smoke(),
        reps: 1,
        reps_startup: 1,
        data_dir: dir.path().to_path_buf(),
        peers: vec![ours()],
        only: vec![],
    };
    let outcome = harness::run(&cfg).expect("the harness runs to the end");

    // Every case produced a result with a row for our binary (or its variants).
    for title in [
        "start-up",
        "read_text_file",
        "directory_tree",
        "edit_file",
        "write_file",
        "legacy pipeline",
        "undo/redo",
        "search_file after many moves",
        "find_files",
        "find_files, one top directory",
        "read_multiple_files",
        "search_content",
        "filesystem log, first page",
        "revert --session",
    ] {
        assert!(
            outcome.results.iter().any(|r| r.title.starts_with(title)),
            "no result for {title}"
        );
    }
    assert_eq!(CASES.len(), 14);
    for result in &outcome.results {
        assert!(!result.rows.is_empty(), "{} has no rows", result.title);
        for row in &result.rows {
            match &row.error {
                // A tool not (yet) served is reported, not measured; anything else is a failure
                // of ours or of the harness.
                Some(e) => assert!(
                    e.starts_with("not served"),
                    "{} / {}: {e}",
                    result.title,
                    row.label
                ),
                None => assert_eq!(
                    row.time.len(),
                    1,
                    "{} / {}: one measurement expected",
                    result.title,
                    row.label
                ),
            }
        }
    }

    // The handshake is always served, so start-up is always measured, with its peak memory.
    let startup = &outcome.results[0];
    let row = startup.row("filesystem").expect("start-up row");
    assert!(row.error.is_none(), "start-up failed: {:?}", row.error);
    assert!(row.rss_kib.median().is_some_and(|k| k > 0.0));

    let text = report::render(&preamble(), &outcome);
    assert!(text.contains("## Targets"));
    assert!(text.contains("| subject | median | min | max | runs |"));
    assert!(text.contains("| filesystem |"));
    assert!(text.contains("### start-up"));
}

/// `--baseline` pointed at the current binary itself: the earlier-build rows and the cost section
/// must appear. The ratios are whatever they are (about 1); timing is never asserted.
#[test]
fn baseline_build_runs_beside_ours_in_every_case_and_gets_a_cost_section() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut previous = ours();
    previous.label = "filesystem@same".into();
    previous.kind = Kind::Baseline;
    let cfg = Config {
        sizes: Sizes::smoke(),
        reps: 1,
        reps_startup: 1,
        data_dir: dir.path().to_path_buf(),
        peers: vec![ours(), previous],
        only: vec![],
    };
    let outcome = harness::run(&cfg).expect("the harness runs to the end");
    assert_eq!(outcome.baseline.as_deref(), Some("filesystem@same"));

    // Every case ours takes part in has a twin for each of ours' rows, measured like it; the
    // operation log's commands are left out, since a baseline from before the log has none.
    let without_twins = ["filesystem log, first page", "revert --session"];
    for result in &outcome.results {
        if without_twins.contains(&result.title.as_str()) {
            assert!(
                result.twins.is_empty(),
                "{} has baseline rows",
                result.title
            );
            continue;
        }
        assert!(
            !result.twins.is_empty(),
            "{} has no baseline rows",
            result.title
        );
        for twin in &result.twins {
            let now = result.row(&twin.current).expect("current row");
            let then = result.row(&twin.previous).expect("baseline row");
            assert!(
                twin.previous.contains("filesystem@same"),
                "{}",
                twin.previous
            );
            assert_eq!(
                now.error.is_some(),
                then.error.is_some(),
                "{}",
                twin.previous
            );
            assert_eq!(now.time.len(), then.time.len(), "{}", twin.previous);
        }
    }

    let text = report::render(&preamble(), &outcome);
    assert!(text.contains("## Cost of the changes since filesystem@same"));
    assert!(text.contains("| filesystem@same |"));
    assert!(text.contains("| filesystem@same --backup |"));
    assert!(text.contains("| write_file, --backup vs not | filesystem --backup |"));
    // The section sits between the targets and the results, which keep their place.
    let (targets, cost, results) = (
        text.find("## Targets"),
        text.find("## Cost of the changes"),
        text.find("## Results"),
    );
    assert!(targets < cost && cost < results);
}
