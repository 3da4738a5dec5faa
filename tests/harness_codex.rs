#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Codex CLI (the pinned `@openai/codex`, installed by `scripts/test`) drives the real binary,
//! the model played by the scripted endpoint on 127.0.0.1 through a `model_providers` entry of a
//! per-run `config.toml` under `CODEX_HOME`.
//!
//! Codex offers an MCP server's tools as one namespace tool, `mcp__<server>`. For a model it
//! knows (here `gpt-5.5`, as a hosted model is configured) it defers the namespace behind its
//! `tool_search`, which the scripted model calls first; for a model it has no metadata for (a
//! local model under its own name) it offers every schema up front. Both are shown. Codex cuts
//! the middle out of a tool output over its limit (about 48,000 bytes for a known model, 12,000
//! for an unknown one): the 1 MB file, the large tree and the large search reach the model whole
//! only because every page stays under it.

use scripted_model::record::Kind;
use scripted_model::{Script, ScriptedModel, Step, ToolRef, ToolResultSeen};
use serde_json::{json, Value};

use test_support::harness::{
    assert_pages_make, codex_tool_text, large_tree, logged_calls, logging_server, run_codex,
    search_page, split_page_note, tree_paths, unlimited_answer, Home,
};
use test_support::temp::TempRoot;

/// The model name Codex knows (its bundled catalog): its metadata, truncation included, is a
/// hosted model's.
const KNOWN_MODEL: &str = "gpt-5.5";

/// Codex keeps a known model's tool output whole up to this many bytes of our text (measured:
/// README, "Thresholds measured per harness").
const CODEX_WHOLE_BYTES: usize = 47_964;

struct Run {
    model: ScriptedModel,
    call_log: std::path::PathBuf,
    _home: Home,
}

fn fs(tool: &str) -> ToolRef {
    ToolRef::mcp("filesystem", tool)
}

fn run(ws: &TempRoot, model_name: &str, steps: Vec<Step>, flags: &[&str]) -> Run {
    let model = ScriptedModel::start(vec![Script {
        name: "codex".into(),
        when: None,
        steps,
    }])
    .expect("start the scripted model");
    let home = Home::new();
    let call_log = home.path.join("calls.jsonl");
    let server = logging_server(&ws.root, &call_log, flags);
    let done = run_codex(
        &home,
        &ws.root,
        &model.openai_base_url(),
        model_name,
        &server,
        "Do the scripted task.",
    );
    assert!(
        done.ok,
        "codex failed\nstdout: {}\nstderr: {}",
        done.stdout, done.stderr
    );
    let records = model.records();
    for r in &records {
        assert!(r.diverged.is_none(), "the run left the script: {r:?}");
    }
    assert!(
        records.iter().any(|r| r.kind == Kind::Turn),
        "Codex never asked the model: {records:?}\nstderr: {}",
        done.stderr
    );
    Run {
        model,
        call_log,
        _home: home,
    }
}

fn results_of(run: &Run, tool: &str) -> Vec<ToolResultSeen> {
    run.model
        .tool_results()
        .into_iter()
        .filter(|r| r.name == tool && r.namespace.as_deref() == Some("mcp__filesystem"))
        .collect()
}

/// Asserts Codex cut none of the results, and each stayed under its limit.
fn assert_none_cut(results: &[ToolResultSeen]) {
    for r in results {
        let text = codex_tool_text(&r.parts);
        assert!(!r.is_error, "an error reached the model: {text:.300}");
        assert!(
            !text.contains("tokens truncated…"),
            "Codex cut a result: {text:.300}"
        );
        assert!(text.len() <= CODEX_WHOLE_BYTES);
    }
}

fn two_calls() -> Vec<Step> {
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
    ]
}

fn small_workspace() -> TempRoot {
    let ws = TempRoot::new();
    ws.write("hello.txt", "hello\nworld\n");
    ws.write("src/main.rs", "fn main() {}\n");
    ws
}

fn assert_two_calls_reached_the_server(run: &Run) {
    assert_eq!(
        codex_tool_text(&results_of(run, "list_directory")[0].parts),
        "[FILE] main.rs"
    );
    assert_eq!(
        codex_tool_text(&results_of(run, "read_text_file")[0].parts),
        "hello\n"
    );
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
}

#[test]
fn codex_defers_the_server_behind_tool_search_for_a_known_model_and_the_calls_reach_it() {
    let ws = small_workspace();
    let run = run(&ws, KNOWN_MODEL, two_calls(), &[]);
    let records = run.model.records();
    let first = records
        .iter()
        .find(|r| r.kind == Kind::Turn)
        .expect("a turn");
    assert!(
        first.offered.iter().any(|o| o.name == "tool_search"),
        "{:?}",
        first.offered
    );
    assert!(
        !first
            .offered
            .iter()
            .any(|o| o.namespace.as_deref() == Some("mcp__filesystem")),
        "the server's tools were offered before the search: {:?}",
        first.offered
    );
    // A search loads the tools it found into the namespace; each tool is searched for before
    // its first call.
    let turns: Vec<_> = records.iter().filter(|r| r.kind == Kind::Turn).collect();
    let searches: Vec<_> = run
        .model
        .tool_results()
        .into_iter()
        .filter(|r| r.name == "tool_search")
        .collect();
    assert!(!searches.is_empty());
    let last = turns.last().expect("a last turn");
    for tool in ["read_text_file", "list_directory"] {
        assert!(
            last.offered
                .iter()
                .any(|o| o.name == tool && o.namespace.as_deref() == Some("mcp__filesystem")),
            "{tool} not loaded: {:?}",
            last.offered
        );
    }
    assert_two_calls_reached_the_server(&run);
}

#[test]
fn codex_offers_the_servers_namespace_up_front_for_an_unknown_model_and_the_calls_reach_it() {
    let ws = small_workspace();
    let run = run(&ws, "local-scripted-model", two_calls(), &[]);
    let records = run.model.records();
    let first = records
        .iter()
        .find(|r| r.kind == Kind::Turn)
        .expect("a turn");
    for tool in [
        "read_text_file",
        "list_directory",
        "edit_file",
        "write_file",
        "directory_tree",
    ] {
        assert!(
            first
                .offered
                .iter()
                .any(|o| o.name == tool && o.namespace.as_deref() == Some("mcp__filesystem")),
            "{tool} not offered: {:?}",
            first.offered
        );
    }
    assert_two_calls_reached_the_server(&run);
}

#[test]
fn codex_receives_a_1_mb_file_whole_across_pages() {
    let ws = TempRoot::new();
    let file: String = (1..=20_000)
        .map(|i| format!("{i:05} the quick brown fox jumps over the lazy dog, line {i:05}\n"))
        .collect();
    assert!(file.len() > 1_000_000);
    ws.write("big.txt", &file);
    let run = run(
        &ws,
        KNOWN_MODEL,
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
    assert!(pages.len() > 20, "{} pages", pages.len());
    assert_none_cut(&pages);
    assert_pages_make(
        &file,
        &pages
            .iter()
            .map(|r| codex_tool_text(&r.parts))
            .collect::<Vec<_>>(),
        &pages.iter().map(|r| &r.input).collect::<Vec<_>>(),
        &run.call_log,
        "read_text_file",
    );
}

#[test]
fn codex_receives_a_large_directory_tree_whole_across_pages() {
    let ws = TempRoot::new();
    large_tree(&ws);
    let args = json!({"path": "tree"});
    let whole = unlimited_answer(&ws.root, "directory_tree", &args, &[]);
    // One answer would not reach the model whole: the paging is what brings it through.
    assert!(whole.len() > CODEX_WHOLE_BYTES);
    let run = run_steps(&ws, "directory_tree", args, &[]);
    let pages = results_of(&run, "directory_tree");
    assert!(pages.len() > 1, "{} pages", pages.len());
    assert_none_cut(&pages);
    let mut paths = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let text = codex_tool_text(&page.parts);
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
}

#[test]
fn codex_receives_a_large_search_content_whole_across_pages() {
    let ws = TempRoot::new();
    large_tree(&ws);
    let args = json!({"pattern": "needle", "path": "tree", "maxResults": 2000});
    let extended = ["--tools", "extended"];
    let whole = unlimited_answer(&ws.root, "search_content", &args, &extended);
    assert!(whole.len() > CODEX_WHOLE_BYTES);
    let run = run_steps(&ws, "search_content", args, &extended);
    let pages = results_of(&run, "search_content");
    assert!(pages.len() > 1, "{} pages", pages.len());
    assert_none_cut(&pages);
    let mut lines = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let text = codex_tool_text(&page.parts);
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
}

/// Runs one `page` step of `tool` from `args`, then finishes.
fn run_steps(ws: &TempRoot, tool: &str, args: Value, flags: &[&str]) -> Run {
    run(
        ws,
        KNOWN_MODEL,
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
