#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Gemini CLI (the pinned `@google/gemini-cli`, installed by `scripts/test`) drives the real
//! binary, the model played by the scripted endpoint on 127.0.0.1 through
//! `GOOGLE_GEMINI_BASE_URL`, the server configured in a per-run `~/.gemini/settings.json`.
//!
//! Gemini CLI offers an MCP server's tools flat, each as `mcp_<server>_<tool>` with its schema,
//! beside its own (`read_file`, `write_file`, `replace`, `run_shell_command`, …), and wraps each
//! MCP result's text in `<untrusted_context>` lines. It cuts a single-text MCP result over its
//! `truncateToolOutputThreshold` (40,000 characters) to a head and a tail: the 1 MB file, the
//! large tree and the large search reach the model whole only because every page stays under
//! it, which the last test measures.

use scripted_model::record::Kind;
use scripted_model::{Script, ScriptedModel, Step, ToolRef, ToolResultSeen};
use serde_json::{json, Value};

use test_support::harness::{
    assert_pages_make, gemini_chats, gemini_tool_text, large_tree, logged_calls, logging_server,
    run_gemini, search_page, split_page_note, tree_paths, unlimited_answer, Finished, Home,
};
use test_support::temp::TempRoot;

/// The model asked for: a hosted model's name, as a user of the Gemini API would give it.
const MODEL: &str = "gemini-2.5-flash";

/// Gemini CLI keeps an MCP tool's text whole up to this many characters of ours: its default
/// `tools.truncateToolOutputThreshold`, 40,000 characters, counts the 41 of the
/// `<untrusted_context>` lines it wraps the text in (measured by the last test, README
/// "Thresholds measured per harness").
const GEMINI_WHOLE_CHARS: usize = 40_000 - 41;

/// The budget the paging runs give the server: the default, 40,000 bytes, can make a page of
/// ASCII text longer than [`GEMINI_WHOLE_CHARS`], which Gemini CLI would cut.
const BUDGET: [&str; 2] = ["--max-result-bytes", "39900"];

/// What Gemini CLI puts in front of a result it cut.
const CUT_MARKER: &str = "Output too large. Showing first ";

struct Run {
    model: ScriptedModel,
    call_log: std::path::PathBuf,
    done: Finished,
    home: Home,
}

fn fs(tool: &str) -> ToolRef {
    ToolRef::mcp("filesystem", tool)
}

fn run(ws: &TempRoot, steps: Vec<Step>, flags: &[&str]) -> Run {
    let model = ScriptedModel::start(vec![Script {
        name: "gemini".into(),
        when: None,
        steps,
    }])
    .expect("start the scripted model");
    let home = Home::new();
    let call_log = home.path.join("calls.jsonl");
    let server = logging_server(&ws.root, &call_log, flags);
    let done = run_gemini(
        &home,
        &ws.root,
        &model.base_url(),
        MODEL,
        &server,
        "Do the scripted task.",
    );
    assert!(
        done.ok,
        "gemini failed\nstdout: {}\nstderr: {}",
        done.stdout, done.stderr
    );
    let records = model.records();
    for r in &records {
        assert!(r.diverged.is_none(), "the run left the script: {r:?}");
    }
    assert!(
        records.iter().any(|r| r.kind == Kind::Turn),
        "Gemini CLI never asked the model: {records:?}\nstderr: {}",
        done.stderr
    );
    Run {
        model,
        call_log,
        done,
        home,
    }
}

fn results_of(run: &Run, tool: &str) -> Vec<ToolResultSeen> {
    let name = format!("mcp_filesystem_{tool}");
    run.model
        .tool_results()
        .into_iter()
        .filter(|r| r.name == name)
        .collect()
}

/// Asserts Gemini CLI cut none of the results, and each stayed under its limit.
fn assert_none_cut(results: &[ToolResultSeen]) {
    for r in results {
        let text = gemini_tool_text(&r.parts);
        assert!(!r.is_error, "an error reached the model: {text:.2000}");
        assert!(
            !text.contains(CUT_MARKER),
            "Gemini cut a result: {text:.300}"
        );
        assert!(text.chars().count() <= GEMINI_WHOLE_CHARS);
    }
}

/// The stream-json events Gemini CLI printed of `type`.
fn events(done: &Finished, kind: &str) -> Vec<Value> {
    done.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == kind)
        .collect()
}

#[test]
fn gemini_offers_the_servers_tools_flat_and_list_read_write_reach_it() {
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
            Step::Call {
                tool: fs("write_file"),
                args: json!({"path": "out.txt", "content": "written\n"}),
            },
            Step::Call {
                tool: ToolRef::Builtin {
                    builtin: "read_file".into(),
                },
                args: json!({"file_path": "out.txt"}),
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
    let offered: Vec<&str> = first.offered.iter().map(|o| o.name.as_str()).collect();
    for tool in [
        "mcp_filesystem_read_text_file",
        "mcp_filesystem_list_directory",
        "mcp_filesystem_write_file",
        "mcp_filesystem_edit_file",
        "read_file",
        "write_file",
        "replace",
        "run_shell_command",
    ] {
        assert!(offered.contains(&tool), "{tool} not offered: {offered:?}");
    }
    assert!(first.offered.iter().all(|o| o.namespace.is_none()));
    assert!(first.deferred.is_empty(), "{:?}", first.deferred);
    assert_eq!(
        gemini_tool_text(&results_of(&run, "list_directory")[0].parts),
        "[FILE] main.rs"
    );
    assert_eq!(
        gemini_tool_text(&results_of(&run, "read_text_file")[0].parts),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("out.txt")).unwrap(),
        "written\n"
    );
    let builtin: Vec<_> = run
        .model
        .tool_results()
        .into_iter()
        .filter(|r| r.name == "read_file")
        .collect();
    assert_eq!(builtin.len(), 1);
    assert_eq!(builtin[0].text(), "written\n");
    assert_eq!(
        logged_calls(&run.call_log),
        [
            ("list_directory".to_string(), json!({"path": "src"})),
            (
                "read_text_file".to_string(),
                json!({"path": "hello.txt", "head": 1})
            ),
            (
                "write_file".to_string(),
                json!({"path": "out.txt", "content": "written\n"})
            ),
        ]
    );
    // Its stdout names every call as the model made it, and its chat record is in the home.
    let used: Vec<Value> = events(&run.done, "tool_use")
        .iter()
        .map(|e| e["tool_name"].clone())
        .collect();
    assert_eq!(
        used,
        [
            "mcp_filesystem_list_directory",
            "mcp_filesystem_read_text_file",
            "mcp_filesystem_write_file",
            "read_file"
        ]
    );
    assert_eq!(events(&run.done, "tool_result").len(), 4);
    let chats = gemini_chats(&run.home.gemini_dir());
    assert_eq!(chats.len(), 1, "{chats:?}");
    // The report reads both records into the same calls: three of this project's, one built-in.
    let stdout = run.home.path.join("stdout.jsonl");
    std::fs::write(&stdout, &run.done.stdout).unwrap();
    for record in [run.home.gemini_dir().join("tmp"), stdout] {
        let (sessions, stats) = report::transcript::read_transcripts(
            std::slice::from_ref(&record),
            &report::classify::ServerFilter::default(),
        )
        .expect("read Gemini's record");
        assert_eq!(sessions.len(), 1, "{record:?}");
        let calls: Vec<_> = sessions[0]
            .calls
            .iter()
            .map(|c| (c.tool.as_str(), c.interface, c.write, c.outcome.clone()))
            .collect();
        use report::classify::Interface::{Builtin, Filesystem};
        use report::model::Outcome::Ok;
        assert_eq!(
            calls,
            [
                ("list_directory", Filesystem, false, Ok),
                ("read_text_file", Filesystem, false, Ok),
                ("write_file", Filesystem, true, Ok),
                ("read_file", Builtin, false, Ok),
            ],
            "{record:?}"
        );
        assert_eq!(stats.malformed_lines, 0);
    }
}

#[test]
fn gemini_receives_a_1_mb_file_whole_across_pages() {
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
        &BUDGET,
    );
    let pages = results_of(&run, "read_text_file");
    assert!(pages.len() > 20, "{} pages", pages.len());
    assert_none_cut(&pages);
    assert_pages_make(
        &file,
        &pages
            .iter()
            .map(|r| gemini_tool_text(&r.parts))
            .collect::<Vec<_>>(),
        &pages.iter().map(|r| &r.input).collect::<Vec<_>>(),
        &run.call_log,
        "read_text_file",
    );
}

/// The tree's pages but the last reach the model whole. The last page, a bare JSON array (it
/// ends without a note), does not: Gemini CLI 0.61.0 parses a result's first text as JSON into
/// `structuredContent` when the server sent none, and its MCP client then rejects the result
/// ("expected record, received array"), so the model gets an error in its place. The call log
/// shows the server answered it.
#[test]
fn gemini_receives_a_large_directory_tree_across_pages_but_its_last_page_as_an_error() {
    let ws = TempRoot::new();
    large_tree(&ws);
    let args = json!({"path": "tree"});
    let whole = unlimited_answer(&ws.root, "directory_tree", &args, &[]);
    // One answer would not reach the model whole: the paging is what brings it through.
    assert!(whole.len() > GEMINI_WHOLE_CHARS);
    let run = run_steps(&ws, "directory_tree", args, &BUDGET);
    let pages = results_of(&run, "directory_tree");
    assert!(pages.len() > 2, "{} pages", pages.len());
    let (last, before) = pages.split_last().expect("pages");
    assert_none_cut(before);
    let mut paths = Vec::new();
    for (i, page) in before.iter().enumerate() {
        let text = gemini_tool_text(&page.parts);
        let (body, note) = split_page_note(&text);
        assert!(
            note.is_some(),
            "page {i}: the text the model got: {text:.300}"
        );
        paths.extend(tree_paths(body));
    }
    let all = tree_paths(&whole);
    assert_eq!(all.len(), 3000 + 60);
    assert!(paths.len() < all.len() && all.starts_with(&paths));
    assert!(last.is_error, "{:.300}", last.text());
    assert!(
        last.text().contains("expected record, received array"),
        "{:.600}",
        last.text()
    );
    assert_eq!(logged_calls(&run.call_log).len(), pages.len());
}

/// Any result whose whole text is a JSON array reaches the model as an error (see above): a
/// one-page `directory_tree`, or a file that holds one read with `read_text_file`. A JSON
/// object passes, its text unchanged.
#[test]
fn gemini_turns_a_result_whose_text_is_a_json_array_into_an_error() {
    let ws = TempRoot::new();
    ws.write("list.json", "[1, 2]");
    ws.write("map.json", "{\"a\": 1}");
    ws.write("src/main.rs", "fn main() {}\n");
    let run = run(
        &ws,
        vec![
            Step::Call {
                tool: fs("directory_tree"),
                args: json!({"path": "src"}),
            },
            Step::Call {
                tool: fs("read_text_file"),
                args: json!({"path": "list.json"}),
            },
            Step::Call {
                tool: fs("read_text_file"),
                args: json!({"path": "map.json"}),
            },
            Step::Finish {
                text: "done".into(),
            },
        ],
        &[],
    );
    let tree = &results_of(&run, "directory_tree")[0];
    assert!(tree.is_error && tree.text().contains("expected record, received array"));
    let reads = results_of(&run, "read_text_file");
    assert!(reads[0].is_error && reads[0].text().contains("expected record, received array"));
    assert!(!reads[1].is_error);
    assert_eq!(gemini_tool_text(&reads[1].parts), "{\"a\": 1}");
    assert_eq!(logged_calls(&run.call_log).len(), 3);
}

#[test]
fn gemini_receives_a_large_search_content_whole_across_pages() {
    let ws = TempRoot::new();
    large_tree(&ws);
    let args = json!({"pattern": "needle", "path": "tree", "maxResults": 2000});
    let extended = ["--tools", "extended"];
    let whole = unlimited_answer(&ws.root, "search_content", &args, &extended);
    assert!(whole.len() > GEMINI_WHOLE_CHARS);
    let run = run_steps(
        &ws,
        "search_content",
        args,
        &[&extended[..], &BUDGET].concat(),
    );
    let pages = results_of(&run, "search_content");
    assert!(pages.len() > 1, "{} pages", pages.len());
    assert_none_cut(&pages);
    let mut lines = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let text = gemini_tool_text(&page.parts);
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

/// The threshold itself, with the server's budget out of the way: a result of exactly
/// [`GEMINI_WHOLE_CHARS`] characters (two-byte ones, so characters and not bytes are what
/// count) reaches the model whole, one character more is cut to a head and a tail.
#[test]
fn gemini_cuts_a_result_over_its_threshold_and_keeps_one_at_it_whole() {
    let ws = TempRoot::new();
    let at = "é".repeat(GEMINI_WHOLE_CHARS - 1) + "\n";
    let over = "é".repeat(GEMINI_WHOLE_CHARS) + "\n";
    ws.write("at.txt", &at);
    ws.write("over.txt", &over);
    let read = |path: &str| Step::Call {
        tool: fs("read_text_file"),
        args: json!({"path": path}),
    };
    let run = run(
        &ws,
        vec![
            read("at.txt"),
            read("over.txt"),
            Step::Finish {
                text: "measured".into(),
            },
        ],
        &[
            "--max-result-bytes",
            "100000000",
            "--max-read-bytes",
            "100000000",
        ],
    );
    let results = results_of(&run, "read_text_file");
    assert_eq!(results.len(), 2);
    assert_eq!(gemini_tool_text(&results[0].parts), at);
    let cut = gemini_tool_text(&results[1].parts);
    assert!(cut.starts_with(CUT_MARKER), "{cut:.300}");
    assert!(cut.contains("characters omitted]"), "{cut:.300}");
    // 20% of the threshold from the start, the rest from the end: the threshold is 40,000.
    assert!(
        cut.contains("Showing first 8,000 and last 32,000 characters"),
        "{cut:.300}"
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
