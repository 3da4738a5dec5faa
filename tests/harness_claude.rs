#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Claude Code (the pinned `@anthropic-ai/claude-code`, installed by `scripts/test`) drives the
//! real binary, the model played by the scripted endpoint on 127.0.0.1.
//!
//! What is shown: the server connects and Claude Code offers its tools (deferred behind
//! `ToolSearch`, which the scripted model calls first, as a model must); the scripted calls reach
//! the server with the intended arguments (the call log agrees); a 1 MB file, a large
//! `directory_tree` and a large `search_content` reach the model whole across pages, where one
//! answer of that size would be saved to a file of Claude Code's own (`<persisted-output>`) or
//! refused as too large; and `filesystem report` reads Claude Code's own transcript under the
//! run's `HOME` with exact counts per tool.

use scripted_model::record::Kind;
use scripted_model::{Script, ScriptedModel, Step, ToolRef, ToolResultSeen};
use serde_json::{json, Value};

use test_support::harness::{
    assert_pages_make, large_tree, logged_calls, logging_server, run_claude, search_page,
    split_page_note, tree_paths, unlimited_answer, Home,
};
use test_support::temp::TempRoot;

/// Claude Code diverts a result of more characters than this (measured: README, "Thresholds
/// measured per harness").
const CLAUDE_WHOLE_CHARS: usize = 50_000;

/// One scripted session: the endpoint, the workspace, the run's home, and what came back.
struct Run {
    model: ScriptedModel,
    home: Home,
    call_log: std::path::PathBuf,
}

fn fs(tool: &str) -> ToolRef {
    ToolRef::mcp("filesystem", tool)
}

/// Runs Claude Code once on `ws` with `steps` as the model, the server given `flags`.
fn run(ws: &TempRoot, steps: Vec<Step>, flags: &[&str]) -> Run {
    let model = ScriptedModel::start(vec![Script {
        name: "claude".into(),
        when: None,
        steps,
    }])
    .expect("start the scripted model");
    let home = Home::new();
    let call_log = home.path.join("calls.jsonl");
    let server = logging_server(&ws.root, &call_log, flags);
    let done = run_claude(
        &home,
        &ws.root,
        &model.base_url(),
        &server,
        "Do the scripted task.",
    );
    assert!(
        done.ok,
        "claude failed\nstdout: {}\nstderr: {}",
        done.stdout, done.stderr
    );
    let records = model.records();
    for r in &records {
        assert!(r.diverged.is_none(), "the run left the script: {r:?}");
    }
    assert!(
        records.iter().any(|r| r.kind == Kind::Turn),
        "Claude Code never asked the model: {records:?}"
    );
    Run {
        model,
        home,
        call_log,
    }
}

/// The results of `tool` the model received, in order.
fn results_of(run: &Run, tool: &str) -> Vec<ToolResultSeen> {
    let name = format!("mcp__filesystem__{tool}");
    run.model
        .tool_results()
        .into_iter()
        .filter(|r| r.name == name)
        .collect()
}

/// Asserts no result of the run was diverted by Claude Code, and each stayed under its limit.
fn assert_none_diverted(results: &[ToolResultSeen]) {
    for r in results {
        let text = r.text();
        assert!(!r.is_error, "an error reached the model: {text:.300}");
        assert!(
            !text.contains("<persisted-output>")
                && !text.contains("exceeds maximum allowed tokens"),
            "Claude Code diverted a result: {text:.300}"
        );
        assert!(text.chars().count() <= CLAUDE_WHOLE_CHARS);
    }
}

/// `filesystem report` over the run's transcripts, as JSON.
fn report(home: &Home) -> Value {
    let projects = home.claude_projects();
    assert!(
        projects.is_dir(),
        "Claude Code wrote no transcript under {}",
        projects.display()
    );
    let out = test_support::bin::command()
        .arg("report")
        .arg("--transcripts")
        .arg(&projects)
        .args(["--format", "json"])
        .output()
        .expect("run filesystem report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("report prints JSON")
}

fn by_tool(report: &Value, interface: &str) -> Value {
    report["transcripts"]["total"]["interfaces"][interface]["by_tool"].clone()
}

#[test]
fn claude_code_offers_the_servers_tools_and_the_scripted_calls_reach_it() {
    let ws = TempRoot::new();
    ws.write("hello.txt", "hello\nworld\n");
    ws.write("src/main.rs", "fn main() {}\n");
    let run = run(
        &ws,
        vec![
            Step::Call {
                tool: fs("list_directory"),
                args: json!({"path": "src"}),
            },
            Step::Call {
                tool: fs("read_text_file"),
                args: json!({"path": "hello.txt", "head": 1}),
            },
            Step::Finish {
                text: "done".into(),
            },
        ],
        &[],
    );

    let records = run.model.records();
    let first = records
        .iter()
        .find(|r| r.kind == Kind::Turn)
        .expect("a turn");
    // Claude Code defers MCP tools: their names in a message, the schemas behind ToolSearch.
    assert!(
        first.offered.iter().any(|o| o.name == "ToolSearch"),
        "{:?}",
        first.offered
    );
    for tool in [
        "read_text_file",
        "list_directory",
        "edit_file",
        "write_file",
        "directory_tree",
    ] {
        let name = format!("mcp__filesystem__{tool}");
        assert!(
            first.deferred.contains(&name),
            "{name} not offered: {:?}",
            first.deferred
        );
    }

    assert_eq!(
        results_of(&run, "list_directory")[0].text(),
        "[FILE] main.rs"
    );
    assert_eq!(results_of(&run, "read_text_file")[0].text(), "hello\n");
    assert_eq!(
        logged_calls(&run.call_log),
        [
            ("list_directory".to_string(), json!({"path": "src"})),
            (
                "read_text_file".to_string(),
                json!({"path": "hello.txt", "head": 1})
            ),
        ]
    );

    // Each tool's schema was loaded by one ToolSearch call before its first use.
    let searches = run
        .model
        .tool_results()
        .iter()
        .filter(|r| r.name == "ToolSearch")
        .count();
    assert_eq!(searches, 2);
    let report = report(&run.home);
    let ours = by_tool(&report, "filesystem");
    assert_eq!(
        ours,
        json!({"list_directory": 1, "read_text_file": 1}),
        "{report:#}"
    );
    // The schema loads are discovery, counted apart from the two work calls.
    assert_eq!(
        by_tool(&report, "discovery"),
        json!({"ToolSearch": 2}),
        "{report:#}"
    );
    let total = &report["transcripts"]["total"];
    assert_eq!(total["calls"], json!(4), "{report:#}");
    assert_eq!(total["work_calls"], json!(2), "{report:#}");
    assert_eq!(total["discovery_calls"], json!(2), "{report:#}");
}

#[test]
fn claude_code_receives_a_1_mb_file_whole_across_pages() {
    let ws = TempRoot::new();
    let file: String = (1..=20_000)
        .map(|i| format!("{i:05} the quick brown fox jumps over the lazy dog, line {i:05}\n"))
        .collect();
    assert!(file.len() > 1_000_000);
    ws.write("big.txt", &file);
    let run = run(
        &ws,
        vec![
            Step::Page {
                tool: fs("read_text_file"),
                args: json!({"path": "big.txt"}),
                max_pages: 200,
            },
            Step::Finish {
                text: "read".into(),
            },
        ],
        &[],
    );

    let pages = results_of(&run, "read_text_file");
    assert!(
        pages.len() > 20,
        "{} pages: {:#?}",
        pages.len(),
        run.model.records()
    );
    assert_none_diverted(&pages);
    // Each page the model asked for went to the server with the offset the last note named.
    assert_pages_make(
        &file,
        &pages.iter().map(|r| r.text()).collect::<Vec<_>>(),
        &pages.iter().map(|r| &r.input).collect::<Vec<_>>(),
        &run.call_log,
        "read_text_file",
    );
    assert_eq!(logged_calls(&run.call_log)[0].1, json!({"path": "big.txt"}));
    let report = report(&run.home);
    assert_eq!(
        by_tool(&report, "filesystem"),
        json!({"read_text_file": pages.len()}),
        "{report:#}"
    );
}

#[test]
fn claude_code_receives_a_large_directory_tree_whole_across_pages() {
    let ws = TempRoot::new();
    large_tree(&ws);
    let args = json!({"path": "tree"});
    let whole = unlimited_answer(&ws.root, "directory_tree", &args, &[]);
    // One answer would not reach the model whole: the paging is what brings it through.
    assert!(whole.chars().count() > CLAUDE_WHOLE_CHARS);
    let run = run_steps(&ws, "directory_tree", args, &[]);
    let pages = results_of(&run, "directory_tree");
    assert!(pages.len() > 1, "{} pages", pages.len());
    assert_none_diverted(&pages);
    let mut paths = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let text = page.text();
        let (body, note) = split_page_note(&text);
        assert_eq!(
            note.is_some(),
            i + 1 < pages.len(),
            "page {i} of {}: the text the model got: {text:.300}",
            pages.len()
        );
        paths.extend(tree_paths(body));
    }
    assert_eq!(paths, tree_paths(&whole));
    assert_eq!(paths.len(), 3000 + 60);
    assert_eq!(logged_calls(&run.call_log).len(), pages.len());
    assert_eq!(
        by_tool(&report(&run.home), "filesystem"),
        json!({"directory_tree": pages.len()})
    );
}

#[test]
fn claude_code_receives_a_large_search_content_whole_across_pages() {
    let ws = TempRoot::new();
    large_tree(&ws);
    let args = json!({"pattern": "needle", "path": "tree", "maxResults": 2000});
    let extended = ["--tools", "extended"];
    let whole = unlimited_answer(&ws.root, "search_content", &args, &extended);
    assert!(whole.chars().count() > CLAUDE_WHOLE_CHARS);
    let run = run_steps(&ws, "search_content", args, &extended);
    let pages = results_of(&run, "search_content");
    assert!(pages.len() > 1, "{} pages", pages.len());
    assert_none_diverted(&pages);
    let mut lines = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let text = page.text();
        let (page_lines, more) = search_page(&text);
        assert_eq!(
            more,
            i + 1 < pages.len(),
            "page {i} of {}: the text the model got: {text:.300}",
            pages.len()
        );
        lines.extend(page_lines);
    }
    assert_eq!(lines, whole.lines().collect::<Vec<_>>());
    assert_eq!(lines.len(), 1500);
    assert_eq!(logged_calls(&run.call_log).len(), pages.len());
    assert_eq!(
        by_tool(&report(&run.home), "filesystem"),
        json!({"search_content": pages.len()})
    );
}

/// Runs one `page` step of `tool` from `args`, then finishes.
fn run_steps(ws: &TempRoot, tool: &str, args: Value, flags: &[&str]) -> Run {
    run(
        ws,
        vec![
            Step::Page {
                tool: fs(tool),
                args,
                max_pages: 100,
            },
            Step::Finish {
                text: "listed".into(),
            },
        ],
        flags,
    )
}
