#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `search_content` through the real binary: matches and line numbers on a small tree, fixed
//! strings, the case options, include/exclude globs, context lines, the result cap and its note,
//! binary files skipped, `.gitignore` honoured (nested ones and `!` rules too), nothing ever found
//! in the server's state directories or through a symlink (to outside or inside), a bad pattern
//! refused, and the structured answer only for clients that negotiated 2025-06-18 or later.
//! (Cancellation and the time limit are pinned by the unit test in `fs-tools/src/search.rs`,
//! with an already-cancelled call and an already-expired deadline: a search that is reliably
//! still running when a cancel arrives would need timing, which these tests do not rely on.)

use std::os::unix::fs::symlink;

use serde_json::{json, Value};

use test_support::mcp::{Client, Session};
use test_support::temp::Ws;

const EXTENDED: &[&str] = &["--tools", "extended"];

fn search(ws: &Ws, args: Value) -> test_support::cli::Outcome {
    ws.call_with("search_content", args, EXTENDED)
}

/// The answer's text, without the newline `filesystem call` ends its output with.
fn ok(ws: &Ws, args: Value) -> String {
    let text = search(ws, args).expect_ok();
    text.strip_suffix('\n').map(str::to_string).unwrap_or(text)
}

/// A small project: sources, docs, and a few lines that differ only in case.
fn project() -> Ws {
    let ws = Ws::new();
    ws.write("a.txt", "alpha\nneedle one\nbeta\n");
    ws.write("src/main.rs", "fn main() {\n    let needle = 1;\n}\n");
    ws.write("src/lib.rs", "// no match here\n");
    ws.write("docs/guide.md", "# Guide\nA Needle in docs\n");
    ws
}

#[test]
fn matches_are_path_line_text_in_name_order() {
    let ws = project();
    assert_eq!(
        ok(&ws, json!({"pattern": "needle"})),
        "a.txt:2:needle one\ndocs/guide.md:2:A Needle in docs\nsrc/main.rs:2:    let needle = 1;"
    );
    // Below a subdirectory, paths stay root-relative; `path` may also name one file.
    assert_eq!(
        ok(&ws, json!({"pattern": "needle", "path": "src"})),
        "src/main.rs:2:    let needle = 1;"
    );
    assert_eq!(
        ok(&ws, json!({"pattern": "ne+dle", "path": "a.txt"})),
        "a.txt:2:needle one"
    );
    assert_eq!(ok(&ws, json!({"pattern": "absent"})), "No matches found");
    // An empty file has no line, not even an empty one; a file of one newline has one.
    ws.write("empty.txt", "");
    ws.write("newline.txt", "\n");
    assert_eq!(
        ok(
            &ws,
            json!({"pattern": "^$", "include": ["empty.txt", "newline.txt"]})
        ),
        "newline.txt:1:"
    );
    search(&ws, json!({"pattern": "x", "path": "missing"})).expect_err("NotFound");
    search(&ws, json!({"pattern": "x", "path": "../outside"})).expect_err("PathEscape");
}

#[test]
fn fixed_strings_take_regex_characters_literally() {
    let ws = Ws::new();
    ws.write("f.txt", "call(a.b)\ncalla-b\ncall(a.b\n");
    assert_eq!(
        ok(&ws, json!({"pattern": "call(a.b)", "fixedStrings": true})),
        "f.txt:1:call(a.b)"
    );
    // As a regular expression the same text is a group and a wildcard.
    assert_eq!(ok(&ws, json!({"pattern": "call(a.b)"})), "f.txt:2:calla-b");
    assert_eq!(
        ok(&ws, json!({"pattern": "call(a.b", "fixedStrings": true})),
        "f.txt:1:call(a.b)\nf.txt:3:call(a.b"
    );
}

#[test]
fn a_bad_regex_is_an_invalid_argument_that_suggests_fixed_strings() {
    let ws = project();
    let err = search(&ws, json!({"pattern": "call(a.b"})).expect_err("InvalidArgument");
    assert!(
        err.contains("not a valid regular expression") && err.contains("fixedStrings"),
        "{err}"
    );
    search(&ws, json!({"pattern": ""})).expect_err("InvalidArgument");
    search(&ws, json!({"pattern": "x", "caseSensitiv": true})).expect_err("InvalidArgument");
    search(&ws, json!({"pattern": "x", "include": ["a[b"]})).expect_err("InvalidArgument");
}

#[test]
fn case_is_smart_unless_forced() {
    let ws = Ws::new();
    ws.write("c.txt", "hello\nHello\nHELLO\n");
    // Smart: all lowercase ignores case; an uppercase letter makes it exact.
    assert_eq!(
        ok(&ws, json!({"pattern": "hello"})),
        "c.txt:1:hello\nc.txt:2:Hello\nc.txt:3:HELLO"
    );
    assert_eq!(ok(&ws, json!({"pattern": "Hello"})), "c.txt:2:Hello");
    assert_eq!(
        ok(&ws, json!({"pattern": "hello", "caseSensitive": true})),
        "c.txt:1:hello"
    );
    assert_eq!(
        ok(&ws, json!({"pattern": "Hello", "caseSensitive": false})),
        "c.txt:1:hello\nc.txt:2:Hello\nc.txt:3:HELLO"
    );
}

#[test]
fn include_and_exclude_globs_choose_the_files() {
    let ws = project();
    ws.write("vendor/dep.rs", "needle in vendor\n");
    assert_eq!(
        ok(&ws, json!({"pattern": "needle", "include": ["*.rs"]})),
        "src/main.rs:2:    let needle = 1;\nvendor/dep.rs:1:needle in vendor"
    );
    // An excluded directory is not searched; a glob without '/' matches at any depth.
    assert_eq!(
        ok(
            &ws,
            json!({"pattern": "needle", "include": ["*.rs"], "exclude": ["vendor"]})
        ),
        "src/main.rs:2:    let needle = 1;"
    );
    assert_eq!(
        ok(
            &ws,
            json!({"pattern": "needle", "exclude": ["*.md", "src/**"]})
        ),
        "a.txt:2:needle one\nvendor/dep.rs:1:needle in vendor"
    );
    assert_eq!(
        ok(&ws, json!({"pattern": "needle", "include": ["docs/*.md"]})),
        "docs/guide.md:2:A Needle in docs"
    );
}

#[test]
fn context_lines_are_marked_and_groups_divided_like_ripgrep() {
    let ws = Ws::new();
    let lines: Vec<String> = (1..=12).map(|i| format!("line {i}")).collect();
    ws.write("n.txt", lines.join("\n") + "\n");
    ws.write("o.txt", "x\nline 7\n");
    assert_eq!(
        ok(&ws, json!({"pattern": "^line (2|9)$", "contextLines": 1})),
        "n.txt-1-line 1\nn.txt:2:line 2\nn.txt-3-line 3\n--\nn.txt-8-line 8\nn.txt:9:line 9\nn.txt-10-line 10"
    );
    // Overlapping context makes one group; another file's group is divided from it.
    assert_eq!(
        ok(&ws, json!({"pattern": "^line (5|7)$", "contextLines": 1})),
        "n.txt-4-line 4\nn.txt:5:line 5\nn.txt-6-line 6\nn.txt:7:line 7\nn.txt-8-line 8\n--\no.txt-1-x\no.txt:2:line 7"
    );
    // At the cap, the last shown match keeps its context after; the next group is cut whole.
    let capped = ok(
        &ws,
        json!({"pattern": "^line (2|9)$", "contextLines": 1, "maxResults": 1}),
    );
    let (lines, note) = capped.rsplit_once('\n').expect("a note line");
    assert_eq!(lines, "n.txt-1-line 1\nn.txt:2:line 2\nn.txt-3-line 3");
    assert!(
        note.starts_with("[truncated: more than 1 matching lines"),
        "{note}"
    );
    // A later file's group is cut whole too, its context before the match included.
    let capped = ok(
        &ws,
        json!({"pattern": "^line (5|7)$", "contextLines": 1, "maxResults": 2}),
    );
    let (lines, note) = capped.rsplit_once('\n').expect("a note line");
    assert_eq!(
        lines,
        "n.txt-4-line 4\nn.txt:5:line 5\nn.txt-6-line 6\nn.txt:7:line 7\nn.txt-8-line 8"
    );
    assert!(
        note.starts_with("[truncated: more than 2 matching lines"),
        "{note}"
    );
    let err =
        search(&ws, json!({"pattern": "x", "contextLines": 11})).expect_err("InvalidArgument");
    assert!(err.contains("from 0 to 10"), "{err}");
}

#[test]
fn the_result_cap_keeps_the_first_matches_and_says_it_cut() {
    let ws = Ws::new();
    ws.write("a.txt", "hit 1\nhit 2\nmiss\nhit 3\n");
    ws.write("b.txt", "hit 4\nhit 5\n");
    let text = ok(&ws, json!({"pattern": "hit", "maxResults": 3}));
    let (lines, note) = text.rsplit_once('\n').expect("a note line");
    assert_eq!(lines, "a.txt:1:hit 1\na.txt:2:hit 2\na.txt:4:hit 3");
    assert!(
        note.starts_with("[truncated: more than 3 matching lines; only the first 3 are shown"),
        "{note}"
    );
    // Exactly as many matches as the cap is not a cut.
    let all = ok(&ws, json!({"pattern": "hit", "maxResults": 5}));
    assert!(
        !all.contains("truncated") && all.ends_with("b.txt:2:hit 5"),
        "{all}"
    );
    // The default cap is 200.
    ws.write("many.txt", "m\n".repeat(300));
    let many = ok(&ws, json!({"pattern": "^m$"}));
    assert_eq!(many.lines().count(), 201, "{many}");
    assert!(many.contains("more than 200 matching lines"), "{many}");
    search(&ws, json!({"pattern": "x", "maxResults": 2001})).expect_err("InvalidArgument");
    search(&ws, json!({"pattern": "x", "maxResults": 0})).expect_err("InvalidArgument");
}

#[test]
fn long_lines_are_cut_and_binary_files_skipped() {
    let ws = Ws::new();
    ws.write("bin.dat", b"needle\0\x01\x02needle\n");
    let mut late = "needle early\n".as_bytes().to_vec();
    late.extend(std::iter::repeat_n(b'x', 100_000));
    late.extend_from_slice(b"\0needle\n");
    ws.write("late.bin", late);
    ws.write("long.txt", format!("needle{}\n", "y".repeat(10_000)));
    let text = ok(&ws, json!({"pattern": "needle"}));
    // Only the text file: a NUL byte anywhere, even after a match, skips the whole file.
    assert!(text.starts_with("long.txt:1:needle"), "{text}");
    assert!(text.ends_with("… [9506 more bytes]"), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
}

#[test]
fn gitignore_files_are_honoured_at_every_level() {
    let ws = Ws::new();
    ws.write(".gitignore", "build/\n*.log\n");
    ws.write("build/out.txt", "needle\n");
    ws.write("top.log", "needle\n");
    ws.write("kept.txt", "needle\n");
    ws.write("sub/.gitignore", "secret.txt\n!keep.log\n");
    ws.write("sub/secret.txt", "needle\n");
    ws.write("sub/keep.log", "needle\n");
    ws.write("sub/drop.log", "needle\n");
    ws.write("other/secret.txt", "needle\n");
    ws.write("node_modules/dep/index.js", "needle\n");
    let expect = "kept.txt:1:needle\nother/secret.txt:1:needle\nsub/keep.log:1:needle";
    assert_eq!(ok(&ws, json!({"pattern": "needle"})), expect);
    // The root's rules also apply to a search started below it.
    assert_eq!(
        ok(&ws, json!({"pattern": "needle", "path": "sub"})),
        "sub/keep.log:1:needle"
    );
}

#[test]
fn the_state_directories_are_never_searched_at_any_depth() {
    let ws = Ws::new();
    ws.write("a.txt", "needle\n");
    ws.write(".filesystem/history.txt", "needle\n");
    ws.write(".shelpa/x.txt", "needle\n");
    ws.write("deep/er/.filesystem/y.txt", "needle\n");
    ws.write("deep/.shelpa/z.txt", "needle\n");
    assert_eq!(ok(&ws, json!({"pattern": "needle"})), "a.txt:1:needle");
    // Not even when an include names them.
    assert_eq!(
        ok(
            &ws,
            json!({"pattern": "needle", "include": ["**/.filesystem/**", "*.txt"]})
        ),
        "a.txt:1:needle"
    );
    search(&ws, json!({"pattern": "needle", "path": ".filesystem"})).expect_err("PathEscape");
    search(
        &ws,
        json!({"pattern": "needle", "path": "deep/er/.filesystem"}),
    )
    .expect_err("PathEscape");
}

#[test]
fn symlinks_are_never_followed_out_or_in() {
    let ws = Ws::new();
    ws.write("real.txt", "needle inside\n");
    ws.write("dir/f.txt", "needle deep\n");
    std::fs::write(ws.outside.join("secret.txt"), "needle outside secret\n").expect("write");
    symlink(ws.outside.join("secret.txt"), ws.path("out.txt")).expect("link");
    symlink(&ws.outside, ws.path("outdir")).expect("link");
    symlink("real.txt", ws.path("again.txt")).expect("link");
    symlink("dir", ws.path("dirlink")).expect("link");
    let text = ok(&ws, json!({"pattern": "needle"}));
    // Each file once, under its own name: no link is read, inside or out.
    assert_eq!(text, "dir/f.txt:1:needle deep\nreal.txt:1:needle inside");
    // Naming a link to outside is refused by the guard.
    search(&ws, json!({"pattern": "needle", "path": "outdir"})).expect_err("PathEscape");
    search(&ws, json!({"pattern": "needle", "path": "out.txt"})).expect_err("PathEscape");
}

#[test]
fn structured_content_and_output_schema_only_from_2025_06_18() {
    let ws = project();
    let mut c = Client::start(&ws.root, EXTENDED);
    let reply = c.call(
        "search_content",
        json!({"pattern": "needle", "maxResults": 2}),
    );
    assert!(reply.ok, "{}", reply.text);
    let result: Value = serde_json::from_str(&reply.raw).expect("json");
    assert_eq!(
        result["structuredContent"],
        json!({"matches": [
            {"path": "a.txt", "line": 2, "text": "needle one"},
            {"path": "docs/guide.md", "line": 2, "text": "A Needle in docs"},
        ], "truncated": true})
    );
    c.close();

    let mut s = Session::start_in(&ws.root, EXTENDED);
    s.initialize("2025-06-18");
    let list = s.request(2, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    let tool = tools
        .iter()
        .find(|t| t["name"] == "search_content")
        .expect("served");
    assert_eq!(
        tool["outputSchema"]["required"],
        json!(["matches", "truncated"])
    );
    assert_eq!(tool["annotations"]["readOnlyHint"], true);
    s.close_and_wait();

    let mut old = Session::start_in(&ws.root, EXTENDED);
    old.initialize("2025-03-26");
    let list = old.request(2, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    let tool = tools
        .iter()
        .find(|t| t["name"] == "search_content")
        .expect("served");
    assert!(tool.get("outputSchema").is_none(), "{tool}");
    let result = old.call(3, "search_content", json!({"pattern": "needle"}));
    assert!(result.get("structuredContent").is_none(), "{result}");
    assert!(test_support::mcp::text(&result).starts_with("a.txt:2:needle one"));
    old.close_and_wait();
}

#[test]
fn search_content_is_served_only_when_selected() {
    let ws = project();
    let plain = ws.call("search_content", json!({"pattern": "needle"}));
    assert!(
        !plain.ok && plain.text.contains("unknown tool 'search_content'"),
        "{plain:?}"
    );
    let picked = ws
        .call_with(
            "search_content",
            json!({"pattern": "needle", "path": "a.txt"}),
            &["--tools", "search_content"],
        )
        .expect_ok();
    assert_eq!(picked, "a.txt:2:needle one\n");
}
