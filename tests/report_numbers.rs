#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem report` on the fixtures, checked against counts worked out by hand.
//!
//! Transcripts (fixtures/transcripts/-home-dev-demo), calls in order, `[d]` = decile of position:
//!
//! sess-a.jsonl (10 calls, decile = index)
//!   0 pipe shelpa_pipe `tail|rg|awk|sort` ok                         stages 4
//!   1 pipe shelpa_pipe `rg -i 'todo|fixme' src | head` DISALLOWED_OPTION   stages 2 (quoted | kept)
//!   2 pipe shelpa_pipe `rg '…|FIXME' src | head` ok  -> retry of 1 (same stages)
//!   3 pipe shelpa_pipe `printf … | tee 'notes.txt` PARSE_ERROR, WRITE (tee), stages 2
//!   4 builtin Write ok WRITE                        (not a retry of 3: other tool)
//!   5 builtin Edit main.rs error <tool_use_error> -> unclassified, WRITE
//!   6 builtin Edit main.rs ok WRITE -> retry of 5 (same file)
//!   7 builtin Bash `cargo test 2>&1 | tail -n 20` ok, stages 2, not a write
//!   8 pipe shelpa_write ok WRITE
//!   9 other Task ok
//!   writes 5 (pipe 2, builtin 3), ours 2 -> 0.4; errors 3, retried 2
//! sess-a/subagents/agent-a1.jsonl (5 calls, deciles 0,2,4,6,8; own session, parent sess-a)
//!   0 fs read_text_file ok | 1 fs edit_file NotFound WRITE | 2 fs edit_file same path ok WRITE
//!   (retry) | 3 fs create_file WRITE (line repeated: 1 duplicate) | 4 fs read_text_file PathEscape
//!   writes 3, ours 3 -> 1.0; errors 2, retried 1
//! sess-b.jsonl (8 calls, deciles 0,1,2,3,5,6,7,8)
//!   0 builtin Glob | 1 fs write_file WRITE (line repeated: 1 duplicate) | 2 other_mcp
//!   create_issue | 3 fs edit_file README InvalidArgument WRITE | 4 fs edit_file guide.md ok
//!   WRITE (other file: no retry) | 5 builtin MultiEdit WRITE | 6 builtin Edit WRITE | 7 builtin
//!   Write WRITE, no result
//!   plus: 1 malformed line, 1 result without a call, skipped types summary, system,
//!   file-history-snapshot (1 each)
//!   writes 6, ours 3 -> 0.5
//!
//! Totals: 23 calls; builtin 8 (Write 2, Edit 3, Bash 1, Glob 1, MultiEdit 1; writes 6, errors
//! 1, no result 1, error rate 1/7 = 0.1429, retried 1); pipe 5 (writes 2, errors 2, rate 0.4,
//! retried 1, pipelines {2: 3, 4: 1}, rg 3, head 2, tee 1); filesystem 8 (read_text_file 2,
//! edit_file 4, create_file 1, write_file 1; writes 6; errors NotFound, PathEscape,
//! InvalidArgument; rate 0.375; retried 1); other_mcp 1; other 1.
//! Adoption 8 of 14 = 0.5714. Writes by decile (ours/all): d0 0/0, d1 1/1, d2 1/1, d3 2/2,
//! d4 1/2, d5 1/2, d6 1/3, d7 0/1, d8 1/2, d9 0/0. Calls by decile: 3,2,3,2,2,2,3,2,3,1.
//!
//! Call logs (fixtures/calllogs): s-1111 (combined.jsonl, 6 calls): pipe cat|rg ok; pipe sed
//! DISALLOWED_OPTION; edit_file WRITE; pipe cat|tee WRITE; read_text_file NotFound;
//! read_text_file ok (retry: no args, same tool). Then "{not json" (malformed).
//! s-2222 (5): write_file WRITE; edit_file NotFound WRITE; edit_file NotFound WRITE (retry);
//! edit_file ok WRITE (retry); shelpa_pipe PARSE_ERROR without stages.
//! s-3333 (legacy.jsonl, 4): pipe ls; shelpa_write WRITE; (outcome "weird": malformed);
//! cat|tee APPROVAL_REQUIRED WRITE; cat|tee ok WRITE (retry: same command in args).
//! Totals: 15 calls; pipe 8 (writes 4, errors 3, retried 1, pipelines {1: 2, 2: 4}, cat 4,
//! tee 3); filesystem 7 (edit_file 4, writes 5, NotFound 3, retried 3); adoption 9/9 = 1.0;
//! decile 0: 3 calls, 1 write (filesystem).

use serde_json::Value;

use test_support::bin::command;
use test_support::fixtures::fixture;

fn report_json() -> Value {
    let out = command()
        .arg("report")
        .arg("--transcripts")
        .arg(fixture("transcripts"))
        .arg("--log")
        .arg(fixture("calllogs/combined.jsonl"))
        .arg(fixture("calllogs/legacy.jsonl"))
        .args(["--format", "json"])
        .output()
        .expect("run filesystem report");
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("report prints JSON")
}

fn n(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected a count, got {v}"))
}

#[test]
fn transcript_inputs_count_skipped_and_repeated_lines() {
    let r = report_json();
    let i = &r["transcripts"]["inputs"];
    assert_eq!(n(&i["files"]), 3);
    assert_eq!(n(&i["malformed_lines"]), 1);
    assert_eq!(n(&i["duplicate_tool_uses"]), 2);
    assert_eq!(n(&i["results_without_call"]), 1);
    assert_eq!(n(&i["skipped_line_types"]["summary"]), 1);
    assert_eq!(n(&i["skipped_line_types"]["system"]), 1);
    assert_eq!(n(&i["skipped_line_types"]["file-history-snapshot"]), 1);
    assert_eq!(n(&r["transcripts"]["sessions"]), 3);
}

#[test]
fn transcript_calls_are_classified_by_interface_and_tool() {
    let r = report_json();
    let t = &r["transcripts"]["total"];
    assert_eq!(n(&t["calls"]), 23);
    let i = &t["interfaces"];
    assert_eq!(n(&i["builtin"]["calls"]), 8);
    assert_eq!(n(&i["builtin"]["by_tool"]["Edit"]), 3);
    assert_eq!(n(&i["builtin"]["by_tool"]["Write"]), 2);
    assert_eq!(n(&i["pipe"]["calls"]), 5);
    assert_eq!(n(&i["pipe"]["by_tool"]["shelpa_pipe"]), 4);
    assert_eq!(n(&i["filesystem"]["calls"]), 8);
    assert_eq!(n(&i["filesystem"]["by_tool"]["edit_file"]), 4);
    assert_eq!(n(&i["other_mcp"]["by_tool"]["create_issue"]), 1);
    assert_eq!(n(&i["other"]["by_tool"]["Task"]), 1);
}

#[test]
fn transcript_adoption_share_counts_writes_through_our_tools() {
    let r = report_json();
    let a = &r["transcripts"]["total"]["adoption"];
    assert_eq!(n(&a["writes"]), 14);
    assert_eq!(n(&a["ours"]), 8);
    assert_eq!(a["share"].as_f64(), Some(0.5714));
    assert_eq!(n(&a["writes_by_interface"]["builtin"]), 6);
    assert_eq!(n(&a["writes_by_interface"]["pipe"]), 2);
    assert_eq!(n(&a["writes_by_interface"]["filesystem"]), 6);
}

#[test]
fn transcript_errors_are_read_back_by_reason_and_retries_found() {
    let r = report_json();
    let i = &r["transcripts"]["total"]["interfaces"];
    let pipe = &i["pipe"];
    assert_eq!(n(&pipe["errors"]), 2);
    assert_eq!(n(&pipe["errors_by_reason"]["DISALLOWED_OPTION"]), 1);
    assert_eq!(n(&pipe["errors_by_reason"]["PARSE_ERROR"]), 1);
    assert_eq!(pipe["error_rate"].as_f64(), Some(0.4));
    // The pipe's JSON error names the refused token; the report keeps it by reason.
    assert_eq!(n(&pipe["refused_tokens"]["DISALLOWED_OPTION"]["-i"]), 1);
    assert_eq!(n(&pipe["refused_tokens"]["PARSE_ERROR"]["'notes.txt"]), 1);
    assert_eq!(n(&pipe["retried_after_error"]), 1);
    let fs = &i["filesystem"];
    for reason in ["NotFound", "PathEscape", "InvalidArgument"] {
        assert_eq!(n(&fs["errors_by_reason"][reason]), 1, "{reason}");
    }
    assert_eq!(fs["error_rate"].as_f64(), Some(0.375));
    assert_eq!(n(&fs["retried_after_error"]), 1);
    let builtin = &i["builtin"];
    assert_eq!(n(&builtin["errors_by_reason"]["unclassified"]), 1);
    assert_eq!(n(&builtin["no_result"]), 1);
    assert_eq!(builtin["error_rate"].as_f64(), Some(0.1429));
    assert_eq!(n(&builtin["retried_after_error"]), 1);
}

#[test]
fn transcript_pipelines_split_on_unquoted_pipes_only() {
    let r = report_json();
    let i = &r["transcripts"]["total"]["interfaces"];
    let p = &i["pipe"]["pipelines"];
    assert_eq!(n(&p["count"]), 4);
    assert_eq!(n(&p["by_length"]["2"]), 3);
    assert_eq!(n(&p["by_length"]["4"]), 1);
    assert_eq!(n(&p["commands"]["rg"]), 3);
    assert_eq!(n(&p["commands"]["head"]), 2);
    assert_eq!(n(&p["commands"]["tee"]), 1);
    let b = &i["builtin"]["pipelines"];
    assert_eq!(n(&b["count"]), 1);
    assert_eq!(n(&b["commands"]["cargo"]), 1);
}

#[test]
fn transcript_adoption_by_position_matches_hand_counts() {
    let r = report_json();
    let buckets = r["transcripts"]["by_position"]
        .as_array()
        .expect("by_position is a list")
        .clone();
    assert_eq!(buckets.len(), 10);
    let ours = [0, 1, 1, 2, 1, 1, 1, 0, 1, 0];
    let writes = [0, 1, 1, 2, 2, 2, 3, 1, 2, 0];
    let calls = [3, 2, 3, 2, 2, 2, 3, 2, 3, 1];
    for (d, b) in buckets.iter().enumerate() {
        assert_eq!(n(&b["adoption"]["ours"]), ours[d], "ours in decile {d}");
        assert_eq!(
            n(&b["adoption"]["writes"]),
            writes[d],
            "writes in decile {d}"
        );
        let total: u64 = b["calls_by_interface"]
            .as_object()
            .expect("map")
            .values()
            .map(n)
            .sum();
        assert_eq!(total, calls[d], "calls in decile {d}");
    }
    assert!(buckets[0]["adoption"]["share"].is_null());
    assert_eq!(buckets[6]["adoption"]["share"].as_f64(), Some(0.3333));
}

#[test]
fn subagent_transcripts_are_their_own_sessions_with_a_parent() {
    let r = report_json();
    let sessions = r["transcripts"]["per_session"]
        .as_array()
        .expect("per_session is a list")
        .clone();
    let find = |id: &str| {
        sessions
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no session {id}"))
            .clone()
    };
    let sub = find("-home-dev-demo/sess-a/subagents/agent-a1");
    assert_eq!(sub["parent"], "-home-dev-demo/sess-a");
    assert_eq!(n(&sub["calls"]), 5);
    assert_eq!(sub["adoption"]["share"].as_f64(), Some(1.0));
    let a = find("-home-dev-demo/sess-a");
    assert_eq!(n(&a["calls"]), 10);
    assert_eq!(a["adoption"]["share"].as_f64(), Some(0.4));
    let b = find("-home-dev-demo/sess-b");
    assert_eq!(n(&b["calls"]), 8);
    assert_eq!(b["adoption"]["share"].as_f64(), Some(0.5));
}

#[test]
fn call_logs_are_counted_per_session_with_retries_and_stages() {
    let r = report_json();
    let s = &r["call_logs"];
    assert_eq!(n(&s["inputs"]["files"]), 2);
    assert_eq!(n(&s["inputs"]["malformed_lines"]), 2);
    assert_eq!(n(&s["sessions"]), 3);
    let t = &s["total"];
    assert_eq!(n(&t["calls"]), 15);
    let pipe = &t["interfaces"]["pipe"];
    assert_eq!(n(&pipe["calls"]), 8);
    assert_eq!(n(&pipe["writes"]), 4);
    assert_eq!(n(&pipe["errors"]), 3);
    assert_eq!(n(&pipe["errors_by_reason"]["APPROVAL_REQUIRED"]), 1);
    assert_eq!(n(&pipe["refused_tokens"]["DISALLOWED_OPTION"]["-i"]), 1);
    assert_eq!(n(&pipe["retried_after_error"]), 1);
    assert_eq!(n(&pipe["pipelines"]["by_length"]["1"]), 2);
    assert_eq!(n(&pipe["pipelines"]["by_length"]["2"]), 4);
    assert_eq!(n(&pipe["pipelines"]["commands"]["cat"]), 4);
    let fs = &t["interfaces"]["filesystem"];
    assert_eq!(n(&fs["calls"]), 7);
    assert_eq!(n(&fs["writes"]), 5);
    assert_eq!(n(&fs["errors_by_reason"]["NotFound"]), 3);
    assert_eq!(n(&fs["retried_after_error"]), 3);
    assert_eq!(t["adoption"]["share"].as_f64(), Some(1.0));
    let d0 = &s["by_position"][0];
    assert_eq!(n(&d0["adoption"]["writes_by_interface"]["filesystem"]), 1);
    let calls0: u64 = d0["calls_by_interface"]
        .as_object()
        .expect("map")
        .values()
        .map(n)
        .sum();
    assert_eq!(calls0, 3);
}
