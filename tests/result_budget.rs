#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The result budget through the real binary: every answer stays within `--max-result-bytes`
//! (text plus structured copy), a cut answer says how to continue, and following the
//! continuation to the end gives back exactly the answer an unlimited budget gives at once.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use test_support::mcp::Session;

/// A budget large enough that nothing in these fixtures is cut.
const UNLIMITED: &str = "100000000";

/// A server on `root` with `--max-result-bytes budget` and every tool served, and the budget it
/// checks each answer against.
struct Budgeted {
    session: Session,
    budget: usize,
    id: i64,
}

/// One answer: success, its text, its structured content.
#[derive(Debug)]
struct Answer {
    ok: bool,
    text: String,
    structured: Value,
}

impl Budgeted {
    fn start(root: &Path, budget: &str, extra: &[&str]) -> Budgeted {
        // The paging fields are checked in the structured content too, where the server puts them
        // for every tool only when asked (`--structured-paging`); the default is tested below.
        let mut flags = vec![
            "--structured-paging",
            "--tools",
            "extended",
            "--no-call-log",
            "--max-result-bytes",
            budget,
        ];
        flags.extend_from_slice(extra);
        let mut session = Session::start_in(root, &flags);
        session.initialize("2025-06-18");
        Budgeted {
            session,
            budget: budget.parse().expect("a number"),
            id: 1,
        }
    }

    fn from_command(cmd: Command, budget: usize) -> Budgeted {
        let mut session = Session::from_command(cmd);
        session.initialize("2025-06-18");
        Budgeted {
            session,
            budget,
            id: 1,
        }
    }

    /// Calls `tool` and checks the answer against the budget: its text plus its structured
    /// content as compact JSON, as the server sends them.
    fn call(&mut self, tool: &str, args: Value) -> Answer {
        self.id += 1;
        let result = self.session.call(self.id, tool, args.clone());
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{tool} {args}: no text in {result}"))
            .to_string();
        let structured = result
            .get("structuredContent")
            .cloned()
            .unwrap_or(Value::Null);
        let cost = text.len()
            + if structured.is_null() {
                0
            } else {
                structured.to_string().len()
            };
        assert!(
            cost <= self.budget,
            "{tool} {args}: the answer is {cost} bytes, over the budget of {}",
            self.budget
        );
        Answer {
            ok: result["isError"] != json!(true),
            text,
            structured,
        }
    }
}

/// The text of a cut listing without its note (its last line), after checking that the note
/// names the structured `next_cursor` exactly as a model must pass it.
fn body_and_cursor(answer: &Answer) -> (String, Option<String>) {
    let Some(cursor) = answer.structured["next_cursor"].as_str() else {
        assert_ne!(
            answer.structured["truncated"],
            json!(true),
            "a cut answer carries next_cursor: {:?}",
            answer.structured
        );
        return (answer.text.clone(), None);
    };
    let (body, note) = answer.text.rsplit_once('\n').expect("a note line");
    assert!(
        note.contains(&format!("continue with cursor=\"{cursor}\"")),
        "{note}"
    );
    (body.to_string(), Some(cursor.to_string()))
}

/// Follows `tool`'s cursor from the first page to the last; every page's text without its note.
fn pages(server: &mut Budgeted, tool: &str, args: Value) -> Vec<Answer> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut a = args.clone();
        if let Some(c) = &cursor {
            a["cursor"] = json!(c);
        }
        let answer = server.call(tool, a);
        assert!(answer.ok, "{tool}: {}", answer.text);
        cursor = body_and_cursor(&answer).1;
        out.push(answer);
        if cursor.is_none() {
            return out;
        }
        assert!(out.len() < 10_000, "{tool} never ended");
    }
}

fn lines_file(lines: usize) -> String {
    (1..=lines)
        .map(|i| format!("{i:05} the quick brown fox jumps over the lazy dog, line {i}\n"))
        .collect()
}

#[test]
fn a_1_mb_file_read_by_offset_comes_back_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tmp");
    let content = lines_file(20_000);
    assert!(content.len() > 1_000_000);
    std::fs::write(dir.path().join("big.txt"), &content).expect("write");
    let mut server = Budgeted::start(dir.path(), "40000", &[]);
    let mut got = String::new();
    let mut args = json!({"path": "big.txt"});
    let mut pages = 0;
    loop {
        let answer = server.call("read_text_file", args.clone());
        assert!(answer.ok, "{}", answer.text);
        pages += 1;
        let Some(next) = answer.structured["next_offset"].as_u64() else {
            assert!(answer.structured.is_null(), "{:?}", answer.structured);
            got.push_str(&answer.text);
            break;
        };
        let first = answer.structured["first_line"].as_u64().expect("first");
        let last = answer.structured["last_line"].as_u64().expect("last");
        assert_eq!(answer.structured["total_lines"], json!(20_000));
        assert_eq!(answer.structured["truncated"], json!(true));
        assert_eq!(next, last + 1);
        let note = format!(
            "[lines {}–{} of 20,000 shown; continue with offset={next}]",
            thousands(first),
            thousands(last)
        );
        let body = answer
            .text
            .strip_suffix(&note)
            .unwrap_or_else(|| panic!("ends with {note}: {}", tail(&answer.text)));
        got.push_str(body);
        args = json!({"path": "big.txt", "offset": next});
    }
    assert!(pages > 20, "{pages} pages");
    assert!(got == content, "the pages put together are the file");
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn tail(text: &str) -> &str {
    &text[text.len().saturating_sub(200)..]
}

#[test]
fn offset_and_limit_give_exactly_those_lines_and_a_read_that_fits_is_unchanged() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\nfour\nfive").expect("write");
    let mut server = Budgeted::start(dir.path(), "40000", &[]);
    let whole = server.call("read_text_file", json!({"path": "a.txt"}));
    assert_eq!(whole.text, "one\ntwo\nthree\nfour\nfive");
    assert!(
        whole.structured.is_null(),
        "no structured copy of a whole read"
    );
    let part = server.call(
        "read_text_file",
        json!({"path": "a.txt", "offset": 2, "limit": 2}),
    );
    assert_eq!(part.text, "two\nthree\n");
    let end = server.call("read_text_file", json!({"path": "a.txt", "offset": 4}));
    assert_eq!(end.text, "four\nfive");
    let first = server.call("read_text_file", json!({"path": "a.txt", "limit": 1}));
    assert_eq!(first.text, "one\n");
    let past = server.call("read_text_file", json!({"path": "a.txt", "offset": 9}));
    assert!(!past.ok);
    assert!(
        past.text.starts_with("InvalidArgument") && past.text.contains("5 lines"),
        "{}",
        past.text
    );
}

#[test]
fn head_or_tail_with_offset_or_limit_is_refused_saying_which_to_use() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").expect("write");
    let mut server = Budgeted::start(dir.path(), "40000", &[]);
    for args in [
        json!({"path": "a.txt", "head": 1, "offset": 2}),
        json!({"path": "a.txt", "tail": 1, "limit": 2}),
    ] {
        let answer = server.call("read_text_file", args);
        assert!(!answer.ok);
        assert!(
            answer.text.starts_with("InvalidArgument")
                && answer.text.contains("use offset and limit alone")
                && answer.text.contains("or head or tail alone"),
            "{}",
            answer.text
        );
    }
}

#[test]
fn a_line_longer_than_the_budget_is_cut_within_itself_and_the_next_line_follows() {
    let dir = tempfile::tempdir().expect("tmp");
    let giant = "é".repeat(30_000); // 60,000 bytes, two per character
    std::fs::write(dir.path().join("g.txt"), format!("short\n{giant}\nafter\n")).expect("write");
    let mut server = Budgeted::start(dir.path(), "20000", &[]);
    let first = server.call("read_text_file", json!({"path": "g.txt"}));
    assert!(first.ok, "{}", first.text);
    assert_eq!(first.structured["next_offset"], json!(2));
    assert!(first
        .text
        .starts_with("short\n[lines 1–1 of 3 shown; continue with offset=2]"));
    let cut = server.call("read_text_file", json!({"path": "g.txt", "offset": 2}));
    assert!(cut.ok, "{}", cut.text);
    assert_eq!(cut.structured["line_cut"], json!(true));
    assert_eq!(cut.structured["next_offset"], json!(3));
    let (shown, note) = cut.text.rsplit_once('\n').expect("a note");
    assert!(
        giant.starts_with(shown) && shown.len() > 10_000,
        "{}",
        shown.len()
    );
    assert!(
        note.starts_with(
            "[line 2 of 3 is 60,001 bytes, longer than the result budget of 20,000 bytes"
        ) && note.ends_with("continue with offset=3]"),
        "{note}"
    );
    let after = server.call("read_text_file", json!({"path": "g.txt", "offset": 3}));
    assert_eq!(after.text, "after\n");
}

#[test]
fn a_tail_larger_than_the_budget_pages_from_its_first_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let content = lines_file(3_000);
    std::fs::write(dir.path().join("log.txt"), &content).expect("write");
    let mut server = Budgeted::start(dir.path(), "20000", &[]);
    let answer = server.call("read_text_file", json!({"path": "log.txt", "tail": 2000}));
    assert!(answer.ok, "{}", answer.text);
    assert_eq!(answer.structured["first_line"], json!(1001));
    let next = answer.structured["next_offset"].as_u64().expect("cut");
    let (body, _) = answer.text.rsplit_once("\n[lines").expect("note");
    let mut got = format!("{body}\n");
    let rest = server.call(
        "read_text_file",
        json!({"path": "log.txt", "offset": next, "limit": 3001 - next}),
    );
    // The rest may itself be cut; follow it to the end.
    let mut answer = rest;
    loop {
        match answer.structured["next_offset"].as_u64() {
            Some(n) => {
                got.push_str(answer.text.rsplit_once("\n[lines").expect("note").0);
                got.push('\n');
                answer = server.call("read_text_file", json!({"path": "log.txt", "offset": n}));
            }
            None => {
                got.push_str(&answer.text);
                break;
            }
        }
    }
    let expected: String = content
        .lines()
        .skip(1000)
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(got == expected, "the tail's pages are the last 2000 lines");
}

/// A tree of `dirs` directories, each with `files` files and a subdirectory with as many.
fn tree(root: &Path, dirs: usize, files: usize) {
    for d in 0..dirs {
        let sub = root.join(format!("tree/dir{d:03}/inner"));
        std::fs::create_dir_all(&sub).expect("mkdir");
        for f in 0..files {
            std::fs::write(
                root.join(format!("tree/dir{d:03}/file{f:03}.txt")),
                "needle\n",
            )
            .expect("write");
            std::fs::write(sub.join(format!("deep{f:03}.rs")), "x\nneedle here\n").expect("write");
        }
    }
}

/// The entries of a `directory_tree` page as (path, type), depth first, leaving out the
/// directories a page reopens (`continued`: shown on an earlier page).
fn flatten(nodes: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    for node in nodes.as_array().expect("an array") {
        let path = format!("{prefix}/{}", node["name"].as_str().expect("name"));
        if node["continued"] != json!(true) {
            out.push((path.clone(), node["type"].as_str().expect("type").into()));
        }
        if let Some(children) = node.get("children") {
            flatten(children, &path, out);
        }
    }
}

#[test]
fn directory_tree_paged_by_cursor_is_the_whole_tree() {
    let dir = tempfile::tempdir().expect("tmp");
    tree(dir.path(), 40, 30);
    let mut whole_server = Budgeted::start(dir.path(), UNLIMITED, &[]);
    let whole = whole_server.call("directory_tree", json!({"path": "tree"}));
    assert!(
        whole.structured.is_null(),
        "an answer that fits is unchanged"
    );
    let mut expected = Vec::new();
    flatten(
        &serde_json::from_str(&whole.text).expect("json"),
        "",
        &mut expected,
    );
    assert_eq!(expected.len(), 40 * 2 + 40 * 30 * 2);
    let mut server = Budgeted::start(dir.path(), "40000", &[]);
    let pages = pages(&mut server, "directory_tree", json!({"path": "tree"}));
    assert!(pages.len() >= 3, "{} pages", pages.len());
    let mut got = Vec::new();
    for page in &pages {
        let (body, _) = body_and_cursor(page);
        flatten(
            &serde_json::from_str(&body).expect("each page is a JSON tree"),
            "",
            &mut got,
        );
    }
    assert_eq!(got, expected);
}

#[test]
fn search_content_paged_by_cursor_is_the_whole_answer() {
    let dir = tempfile::tempdir().expect("tmp");
    tree(dir.path(), 30, 25);
    let args = json!({"pattern": "needle", "maxResults": 2000});
    let mut whole_server = Budgeted::start(dir.path(), UNLIMITED, &[]);
    let whole = whole_server.call("search_content", args.clone());
    assert_eq!(
        whole.structured["matches"].as_array().map(Vec::len),
        Some(1500)
    );
    let mut server = Budgeted::start(dir.path(), "40000", &[]);
    let pages = pages(&mut server, "search_content", args);
    assert!(pages.len() >= 3, "{} pages", pages.len());
    let text: Vec<String> = pages.iter().map(|p| body_and_cursor(p).0).collect();
    assert_eq!(text.join("\n"), whole.text);
    let matches: Vec<Value> = pages
        .iter()
        .flat_map(|p| {
            p.structured["matches"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(Value::Array(matches), whole.structured["matches"]);
}

#[test]
fn find_files_list_directory_and_sizes_paged_by_cursor_are_the_whole_answers() {
    let dir = tempfile::tempdir().expect("tmp");
    tree(dir.path(), 30, 30);
    for f in 0..2500 {
        std::fs::write(
            dir.path()
                .join(format!("flat/entry-with-a-longish-name-{f:05}.txt")),
            "",
        )
        .or_else(|_| {
            std::fs::create_dir_all(dir.path().join("flat"))?;
            std::fs::write(
                dir.path()
                    .join(format!("flat/entry-with-a-longish-name-{f:05}.txt")),
                "",
            )
        })
        .expect("write");
    }
    let cases = [
        ("find_files", json!({"path": "tree", "pattern": "**/*.rs"})),
        ("list_directory", json!({"path": "flat"})),
        ("list_directory_with_sizes", json!({"path": "flat"})),
        (
            "list_directory_with_sizes",
            json!({"path": "flat", "sortBy": "size"}),
        ),
    ];
    let mut whole_server = Budgeted::start(dir.path(), UNLIMITED, &[]);
    let mut server = Budgeted::start(dir.path(), "10000", &[]);
    for (tool, args) in cases {
        let whole = whole_server.call(tool, args.clone());
        assert!(
            whole.ok && whole.structured.is_null(),
            "{tool}: {}",
            whole.text
        );
        let pages = pages(&mut server, tool, args);
        assert!(pages.len() >= 3, "{tool}: {} pages", pages.len());
        let text: Vec<String> = pages.iter().map(|p| body_and_cursor(p).0).collect();
        assert_eq!(text.join("\n"), whole.text, "{tool}");
    }
}

#[test]
fn read_multiple_files_paged_by_cursor_is_the_whole_answer() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut paths = Vec::new();
    for i in 0..99 {
        let name = format!("f{i:03}.txt");
        std::fs::write(dir.path().join(&name), format!("{name}\n").repeat(90)).expect("write");
        paths.push(name);
    }
    paths.push("missing.txt".into());
    let args = json!({ "paths": paths });
    let mut whole_server = Budgeted::start(dir.path(), UNLIMITED, &[]);
    let whole = whole_server.call("read_multiple_files", args.clone());
    let mut server = Budgeted::start(dir.path(), "40000", &[]);
    let pages = pages(&mut server, "read_multiple_files", args);
    assert!(pages.len() >= 3, "{} pages", pages.len());
    let files: Vec<Value> = pages
        .iter()
        .flat_map(|p| {
            p.structured["files"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(Value::Array(files), whole.structured["files"]);
    let text: Vec<String> = pages
        .iter()
        .map(|p| {
            let (body, cursor) = body_and_cursor(p);
            // A page ends after a file's final line ending; the note follows it.
            if cursor.is_some() {
                body + "\n"
            } else {
                body
            }
        })
        .collect();
    assert!(
        text.join("\n---\n") == whole.text,
        "the pages joined as the whole answer joins files are the whole answer"
    );
}

#[test]
fn a_file_too_large_for_a_page_of_read_multiple_files_says_how_to_read_the_rest() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("big.txt"), lines_file(2000)).expect("write");
    std::fs::write(dir.path().join("small.txt"), "small\n").expect("write");
    let mut server = Budgeted::start(dir.path(), "20000", &[]);
    let answer = server.call(
        "read_multiple_files",
        json!({"paths": ["big.txt", "small.txt"]}),
    );
    let file = &answer.structured["files"][0];
    assert_eq!(file["truncated"], json!(true));
    let next = file["next_offset"].as_u64().expect("next_offset");
    let shown = file["content"].as_str().expect("content");
    assert_eq!(shown.lines().count() as u64, next - 1);
    assert!(answer.text.contains(&format!(
        "read the rest with read_text_file path=\"big.txt\" offset={next}]"
    )));
    let (_, cursor) = body_and_cursor(&answer);
    let rest = server.call(
        "read_multiple_files",
        json!({"paths": ["big.txt", "small.txt"], "cursor": cursor.expect("a cursor")}),
    );
    assert_eq!(rest.text, "small.txt:\nsmall\n\n");
}

#[test]
fn list_trash_paged_by_cursor_is_the_whole_trash() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut server = Budgeted::start(dir.path(), "4000", &[]);
    for i in 0..60 {
        let path = format!("gone-{i:02}.txt");
        std::fs::write(dir.path().join(&path), "bye\n").expect("write");
        let answer = server.call("delete_file", json!({ "path": path }));
        assert!(answer.ok, "{}", answer.text);
    }
    let mut whole_server = Budgeted::start(dir.path(), UNLIMITED, &[]);
    let whole = whole_server.call("list_trash", json!({}));
    assert_eq!(
        whole.structured["entries"].as_array().map(Vec::len),
        Some(60)
    );
    let pages = pages(&mut server, "list_trash", json!({}));
    assert!(pages.len() >= 3, "{} pages", pages.len());
    let entries: Vec<Value> = pages
        .iter()
        .flat_map(|p| {
            p.structured["entries"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(Value::Array(entries), whole.structured["entries"]);
}

#[test]
fn a_bad_foreign_or_stale_cursor_is_refused_saying_to_start_again() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    for f in 0..400 {
        std::fs::write(dir.path().join(format!("d/file-{f:04}.txt")), "").expect("write");
    }
    let mut server = Budgeted::start(dir.path(), "2000", &[]);
    let first = server.call("list_directory", json!({"path": "d"}));
    let (body, cursor) = body_and_cursor(&first);
    let cursor = cursor.expect("cut");
    let refused = |answer: &Answer| {
        assert!(!answer.ok, "{}", answer.text);
        assert!(
            answer.text.starts_with("InvalidArgument")
                && answer.text.contains("again without a cursor"),
            "{}",
            answer.text
        );
    };
    for bad in ["garbage", "../../etc/passwd", "1.0.0", ""] {
        let answer = server.call("list_directory", json!({"path": "d", "cursor": bad}));
        if bad.is_empty() {
            // An empty cursor is no cursor: the first page.
            assert_eq!(answer.text, first.text);
        } else {
            refused(&answer);
        }
    }
    // A cursor of another listing (other arguments, another tool) is not taken.
    refused(&server.call("list_directory", json!({"path": ".", "cursor": cursor})));
    refused(&server.call(
        "find_files",
        json!({"path": "d", "pattern": "*", "cursor": cursor}),
    ));
    let tampered = cursor.replacen(|c: char| c.is_ascii_digit(), "9", 1);
    refused(&server.call("list_directory", json!({"path": "d", "cursor": tampered})));
    // The entry the cursor continues after is gone: the listing changed.
    let last = body
        .lines()
        .last()
        .expect("an entry")
        .trim_start_matches("[FILE] ");
    std::fs::remove_file(dir.path().join("d").join(last)).expect("remove");
    refused(&server.call("list_directory", json!({"path": "d", "cursor": cursor})));
}

#[test]
fn pipe_stdout_beyond_the_budget_is_cut_and_marked_truncated() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("big.txt"), lines_file(5000)).expect("write");
    let mut session = Session::start_in(
        dir.path(),
        &[
            "--legacy-pipe",
            "--no-call-log",
            "--max-result-bytes",
            "20000",
        ],
    );
    session.initialize("2025-06-18");
    let result = session.call(2, "shelpa_pipe", json!({"command": "head -n 5000 big.txt"}));
    let text = result["content"][0]["text"].as_str().expect("text");
    let structured = &result["structuredContent"];
    assert!(text.len() + structured.to_string().len() <= 20_000);
    assert_eq!(result["isError"], json!(false), "{text}");
    let stdout = structured["stdout"].as_str().expect("stdout");
    assert!(!stdout.is_empty() && lines_file(5000).starts_with(stdout));
    assert!(stdout.ends_with('\n'), "cut after a whole line");
    assert_eq!(structured["meta"]["steps"][0]["truncated"], json!(true));
    assert!(
        structured["note"].as_str().is_some_and(|n| n
            .contains("output cut at the result budget of 20,000 bytes")
            && n.contains("of stdout's")),
        "{structured}"
    );
    // Output that fits is not marked.
    let small = session.call(3, "shelpa_pipe", json!({"command": "head -n 3 big.txt"}));
    assert_eq!(
        small["structuredContent"]["meta"]["steps"][0]["truncated"],
        json!(false)
    );
    assert!(small["structuredContent"].get("note").is_none());
}

#[test]
fn tee_keeps_its_own_limits_under_the_budget_and_only_the_answer_is_cut() {
    let dir = tempfile::tempdir().expect("tmp");
    let line = "abcdefghijklmnopqrstuvwxyz0123456789\n";
    std::fs::write(dir.path().join("huge.txt"), line.repeat(50_000)).expect("write");
    std::fs::write(dir.path().join("small.txt"), line.repeat(100)).expect("write");
    let mut session = Session::start_in(
        dir.path(),
        &[
            "--legacy-pipe",
            "--no-call-log",
            "--max-result-bytes",
            "20000",
        ],
    );
    session.initialize("2025-06-18");
    // Over 2 KiB without confirmation: refused by tee's gate, whatever the budget.
    let gated = session.call(
        2,
        "shelpa_pipe",
        json!({"command": "cat small.txt | tee a.txt"}),
    );
    let gated_text = gated["content"][0]["text"].as_str().expect("text");
    assert_eq!(gated["isError"], json!(true), "{gated_text}");
    assert!(!dir.path().join("a.txt").exists());
    // Confirmed, a write past 1 MiB is cut at exactly 1 MiB, while the answer stays in budget.
    let result = session.call(
        3,
        "shelpa_pipe",
        json!({"command": "tail -n +1 huge.txt | tee cut.txt", "confirm_oversize": true}),
    );
    let text = result["content"][0]["text"].as_str().expect("text");
    assert_eq!(result["isError"], json!(false), "{text}");
    let structured = &result["structuredContent"];
    assert!(text.len() + structured.to_string().len() <= 20_000);
    assert_eq!(structured["meta"]["tee"]["truncated"], json!(true));
    assert_eq!(structured["meta"]["tee"]["bytes"], json!(1_048_576));
    let written = std::fs::metadata(dir.path().join("cut.txt")).expect("written");
    assert_eq!(written.len(), 1_048_576);
    assert_eq!(structured["meta"]["steps"][1]["truncated"], json!(true));
}

#[test]
fn the_budget_comes_from_the_environment_and_holds_in_server_mode() {
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::write(root.join("big.txt"), lines_file(2000)).expect("write");
    let mut cmd = test_support::bin::command();
    cmd.args([
        "--server",
        "--structured-paging",
        "--no-call-log",
        "--allow-root",
    ])
    .arg(&root)
    .env("FILESYSTEM_MAX_RESULT_BYTES", "5000")
    .env_remove("FILESYSTEM_ALLOW_ROOTS");
    let mut server = Budgeted::from_command(cmd, 5000);
    let answer = server.call("read_text_file", json!({"root": root, "path": "big.txt"}));
    assert!(answer.ok, "{}", answer.text);
    assert!(
        answer.text.len() > 4000,
        "the budget is used, not a smaller one"
    );
    assert!(
        answer.structured["next_offset"].is_u64(),
        "{}",
        tail(&answer.text)
    );
}

#[test]
fn help_explains_the_budget_and_a_budget_too_small_is_refused() {
    let help = test_support::bin::command()
        .arg("--help")
        .output()
        .expect("run");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--max-result-bytes")
            && help.contains("FILESYSTEM_MAX_RESULT_BYTES")
            && help.contains("40000"),
        "{help}"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let out = test_support::cli::in_root(dir.path(), &["--max-result-bytes", "10", "tools"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("at least 1024"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn by_default_only_tools_with_an_output_schema_carry_structured_content() {
    // Claude Code and Codex CLI show the model a result's structured content in place of its
    // text when it has one, so the pages of tools without an output schema are text alone, and
    // the note in the text is what says how to go on.
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("big.txt"), lines_file(20_000)).expect("write");
    for i in 0..300 {
        std::fs::write(dir.path().join(format!("f{i:03}.txt")), "needle\n").expect("write");
    }
    let mut session = Session::start_in(
        dir.path(),
        &[
            "--tools",
            "extended",
            "--no-call-log",
            "--max-result-bytes",
            "4000",
        ],
    );
    session.initialize("2025-06-18");
    let read = session.call(2, "read_text_file", json!({"path": "big.txt"}));
    assert!(read.get("structuredContent").is_none(), "{read}");
    let text = read["content"][0]["text"].as_str().expect("text");
    let note = text.rsplit_once('\n').expect("a note line").1;
    assert!(
        note.starts_with("[lines 1–") && note.contains("continue with offset="),
        "{note}"
    );
    let list = session.call(3, "list_directory", json!({"path": "."}));
    assert!(list.get("structuredContent").is_none(), "{list}");
    let text = list["content"][0]["text"].as_str().expect("text");
    assert!(text.contains("continue with cursor=\""), "{text}");
    // search_content declares an output schema: its structured content stays, cursor included.
    let found = session.call(
        4,
        "search_content",
        json!({"pattern": "needle", "maxResults": 2000}),
    );
    let cursor = found["structuredContent"]["next_cursor"]
        .as_str()
        .unwrap_or_else(|| panic!("no next_cursor: {found}"));
    let text = found["content"][0]["text"].as_str().expect("text");
    assert!(
        text.contains(&format!("continue with cursor=\"{cursor}\"")),
        "{text}"
    );
}
