#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem report`'s text, CSV and SVG outputs, and its refusals, through the real binary.

use std::process::Output;

use test_support::bin::command;
use test_support::fixtures::fixture;
use test_support::temp::temp_dir;

fn report(extra: &[&str]) -> Output {
    command()
        .arg("report")
        .arg("--transcripts")
        .arg(fixture("transcripts"))
        .arg("--log")
        .arg(fixture("calllogs/combined.jsonl"))
        .arg(fixture("calllogs/legacy.jsonl"))
        .args(extra)
        .output()
        .expect("run filesystem report")
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8 output")
}

#[test]
fn text_output_has_aligned_tables_for_both_sections() {
    let text = stdout_of(&report(&[]));
    assert!(text.contains("== transcripts: 3 files"), "{text}");
    assert!(text.contains("== call logs: 2 files"), "{text}");
    assert!(
        text.contains("through this project's tools: 8 (57.1%)"),
        "{text}"
    );
    // Columns line up: in the interface table every row's "calls" ends at the header's end.
    let lines: Vec<&str> = text.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.trim_start().starts_with("interface  calls"))
        .expect("interface table header");
    let end = lines[header].find("calls").expect("calls column") + "calls".len();
    for row in &lines[header + 1..header + 6] {
        let cell_end = row[..end].trim_end().len();
        assert_eq!(cell_end, end, "misaligned row {row:?}");
    }
}

#[test]
fn csv_output_is_one_number_a_row() {
    let csv = stdout_of(&report(&["--format", "csv"]));
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("section,session,interface,metric,key,value")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 6), "every row has 6 cells");
    assert!(rows.contains(&vec!["transcripts", "", "", "adoption_share", "", "0.5714"]));
    assert!(rows.contains(&vec![
        "transcripts",
        "",
        "pipe",
        "errors_by_reason",
        "PARSE_ERROR",
        "1"
    ]));
    assert!(rows.contains(&vec![
        "call_logs",
        "s-2222",
        "filesystem",
        "retried_after_error",
        "",
        "2"
    ]));
}

#[test]
fn svg_output_draws_a_curve_per_interface() {
    let dir = temp_dir();
    let svg_path = dir.path().join("adoption.svg");
    let svg_arg = svg_path.to_str().expect("utf-8 temp path");
    stdout_of(&report(&["--svg", svg_arg, "--format", "json"]));
    let svg = std::fs::read_to_string(&svg_path).expect("svg written");
    assert!(svg.trim_start().starts_with("<svg"), "starts with <svg");
    assert!(svg.trim_end().ends_with("</svg>"), "ends with </svg>");
    // One legend label and one coloured line per interface that made writes.
    for label in [
        "transcripts: builtin",
        "transcripts: pipe",
        "transcripts: filesystem",
        "call logs: pipe",
        "call logs: filesystem",
    ] {
        assert!(svg.contains(label), "legend lacks {label}");
    }
    for colour in ["#888888", "#D62728", "#1F77B4"] {
        let drawn = svg
            .split("<polyline")
            .skip(1)
            .any(|el| el.contains(&format!("stroke=\"{colour}\"")));
        assert!(drawn, "no polyline in {colour}");
    }
}

#[test]
fn no_inputs_is_refused_with_what_to_give() {
    let out = command()
        .arg("report")
        .output()
        .expect("run filesystem report");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--log") && err.contains("--transcripts"),
        "{err}"
    );
}

#[test]
fn a_missing_log_file_is_named_in_the_error() {
    let out = command()
        .args(["report", "--log", "/nonexistent/calls.jsonl"])
        .output()
        .expect("run filesystem report");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/calls.jsonl"), "{err}");
}

#[test]
fn mcp_server_filter_moves_other_servers_tools_out_of_adoption() {
    // With only "shelpa" admitted, the subagent's and sess-b's mcp__filesystem__ calls become
    // other MCP tools: writes through ours drop from 8 to the 2 pipe writes.
    let out = command()
        .arg("report")
        .arg("--transcripts")
        .arg(fixture("transcripts"))
        .args(["--mcp-server", "shelpa", "--format", "json"])
        .output()
        .expect("run filesystem report");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report prints JSON");
    let a = &json["transcripts"]["total"]["adoption"];
    assert_eq!(a["ours"].as_u64(), Some(2));
    assert_eq!(a["writes"].as_u64(), Some(8));
    assert_eq!(
        json["transcripts"]["total"]["interfaces"]["other_mcp"]["calls"].as_u64(),
        Some(9)
    );
}

/// Writes one assistant line calling `name`, and its result, into `dir/file`.
fn write_transcript(dir: &std::path::Path, file: &str, name: &str) {
    let call = serde_json::json!({"type": "assistant", "message": {"role": "assistant",
        "content": [{"type": "tool_use", "id": format!("toolu_{file}"), "name": name, "input": {}}]}});
    let result = serde_json::json!({"type": "user", "message": {"role": "user",
        "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{file}"), "content": "ok"}]}});
    std::fs::write(dir.join(file), format!("{call}\n{result}\n")).expect("write transcript");
}

#[test]
fn names_from_transcripts_cannot_drive_the_terminal_or_a_spreadsheet() {
    let dir = temp_dir();
    write_transcript(dir.path(), "evil.jsonl", "\u{1b}[2J=HYPERLINK(1)");
    let run = |format: &str| {
        let out = command()
            .arg("report")
            .arg("--transcripts")
            .arg(dir.path())
            .args(["--format", format])
            .output()
            .expect("run filesystem report");
        stdout_of(&out)
    };
    let text = run("text");
    assert!(!text.contains('\u{1b}'), "escape reached the terminal");
    assert!(text.contains("\\u{1b}[2J=HYPERLINK(1)"), "{text}");
    let csv = run("csv");
    assert!(!csv.contains(",=HYPERLINK"), "{csv}");
}

#[test]
fn symlinked_directories_are_not_followed() {
    let outside = temp_dir();
    write_transcript(outside.path(), "elsewhere.jsonl", "Write");
    let dir = temp_dir();
    write_transcript(dir.path(), "here.jsonl", "Edit");
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).expect("symlink");
    let out = command()
        .arg("report")
        .arg("--transcripts")
        .arg(dir.path())
        .args(["--format", "json"])
        .output()
        .expect("run filesystem report");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report prints JSON");
    assert_eq!(json["transcripts"]["inputs"]["files"].as_u64(), Some(1));
    assert_eq!(
        json["transcripts"]["total"]["interfaces"]["builtin"]["by_tool"]["Edit"].as_u64(),
        Some(1)
    );
    assert!(json["transcripts"]["total"]["interfaces"]["builtin"]["by_tool"]["Write"].is_null());
}
