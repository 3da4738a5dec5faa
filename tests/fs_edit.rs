#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! edit_file through the real binary: matching, ambiguity, line endings, all-or-nothing, dryRun
//! and the diff it answers with.

use serde_json::json;

use test_support::temp::Ws;

fn edit(ws: &Ws, path: &str, edits: serde_json::Value) -> test_support::cli::Outcome {
    ws.call("edit_file", json!({"path": path, "edits": edits}))
}

#[test]
fn an_exact_edit_writes_the_file_and_answers_with_a_fenced_diff() {
    let ws = Ws::new();
    ws.write("a.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    let text = edit(
        &ws,
        "a.rs",
        json!([{"oldText": "println!(\"hi\");", "newText": "println!(\"bye\");"}]),
    )
    .expect_ok();
    assert_eq!(ws.read("a.rs"), "fn main() {\n    println!(\"bye\");\n}\n");
    assert!(text.starts_with("Edited (1 edit) a.rs: "), "{text}");
    assert!(
        text.contains("\n```diff\n--- a.rs\n+++ a.rs\n@@ -1,3 +1,3 @@\n"),
        "{text}"
    );
    assert!(
        text.contains("\n-    println!(\"hi\");\n+    println!(\"bye\");\n"),
        "{text}"
    );
    assert!(text.ends_with("\n```\n"), "{text}");
}

#[test]
fn the_fence_is_widened_when_the_diff_contains_backticks() {
    let ws = Ws::new();
    ws.write("README.md", "intro\n```sh\nmake\n```\n");
    let text = edit(
        &ws,
        "README.md",
        json!([{"oldText": "make", "newText": "make test"}]),
    )
    .expect_ok();
    assert!(text.contains("\n````diff\n"), "{text}");
    assert!(text.ends_with("\n````\n"), "{text}");
}

#[test]
fn a_whitespace_tolerant_match_keeps_the_files_indentation() {
    let ws = Ws::new();
    ws.write(
        "a.js",
        "function f() {\n    if (a) {\n        b();\n    }\n}\n",
    );
    edit(
        &ws,
        "a.js",
        json!([{"oldText": "if (a) {\n  b();\n}", "newText": "if (a) {\n  b();\n  c();\n}"}]),
    )
    .expect_ok();
    assert_eq!(
        ws.read("a.js"),
        "function f() {\n    if (a) {\n        b();\n        c();\n    }\n}\n"
    );
}

#[test]
fn tabs_in_the_file_are_kept_when_the_edit_uses_spaces() {
    let ws = Ws::new();
    ws.write("m.go", "func f() {\n\tx := 1\n\treturn x\n}\n");
    edit(
        &ws,
        "m.go",
        json!([{"oldText": "    x := 1\n    return x", "newText": "    x := 1\n    if x > 0 {\n        x++\n    }\n    return x"}]),
    )
    .expect_ok();
    assert_eq!(
        ws.read("m.go"),
        "func f() {\n\tx := 1\n\tif x > 0 {\n\t\tx++\n\t}\n\treturn x\n}\n"
    );
}

#[test]
fn text_found_in_two_places_is_ambiguous_and_nothing_is_written() {
    let ws = Ws::new();
    ws.write("a.txt", "x = 1\ny = 2\nx = 1\n");
    let err = edit(
        &ws,
        "a.txt",
        json!([{"oldText": "x = 1", "newText": "x = 3"}]),
    )
    .expect_err("InvalidArgument");
    assert!(
        err.contains("2 places") && err.contains("more surrounding"),
        "{err}"
    );
    assert!(err.contains("lines 1 and 3"), "{err}");
    // The loose match checks uniqueness too.
    let err = edit(
        &ws,
        "a.txt",
        json!([{"oldText": "  x = 1  ", "newText": "x = 3"}]),
    )
    .expect_err("InvalidArgument");
    assert!(err.contains("places"), "{err}");
    assert_eq!(ws.read("a.txt"), "x = 1\ny = 2\nx = 1\n");
}

#[test]
fn text_not_found_is_not_found_and_names_the_text() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    let err = edit(
        &ws,
        "a.txt",
        json!([{"oldText": "goodbye world", "newText": "x"}]),
    )
    .expect_err("NotFound");
    assert!(
        err.contains("goodbye world") && err.contains("read_text_file"),
        "{err}"
    );
}

#[test]
fn one_failing_edit_writes_nothing() {
    let ws = Ws::new();
    ws.write("a.txt", "one\ntwo\nthree\n");
    edit(
        &ws,
        "a.txt",
        json!([
            {"oldText": "one", "newText": "1"},
            {"oldText": "two", "newText": "2"},
            {"oldText": "four", "newText": "4"}
        ]),
    )
    .expect_err("NotFound");
    assert_eq!(ws.read("a.txt"), "one\ntwo\nthree\n");
}

#[test]
fn edits_apply_in_order_each_to_the_previous_result() {
    let ws = Ws::new();
    ws.write("a.txt", "alpha\n");
    let text = edit(
        &ws,
        "a.txt",
        json!([
            {"oldText": "alpha", "newText": "beta"},
            {"oldText": "beta", "newText": "gamma"}
        ]),
    )
    .expect_ok();
    assert!(text.starts_with("Edited (2 edits) a.txt"), "{text}");
    assert_eq!(ws.read("a.txt"), "gamma\n");
}

#[test]
fn crlf_files_stay_crlf() {
    let ws = Ws::new();
    ws.write("w.txt", "one\r\ntwo\r\nthree\r\n");
    let text = edit(
        &ws,
        "w.txt",
        json!([{"oldText": "two\nthree", "newText": "2\n3\n3.5"}]),
    )
    .expect_ok();
    assert_eq!(ws.read("w.txt"), "one\r\n2\r\n3\r\n3.5\r\n");
    assert!(!text.contains('\r'), "the diff is shown with LF: {text:?}");
    // oldText sent with CRLF matches too.
    edit(
        &ws,
        "w.txt",
        json!([{"oldText": "one\r\n2", "newText": "1\r\n2"}]),
    )
    .expect_ok();
    assert_eq!(ws.read("w.txt"), "1\r\n2\r\n3\r\n3.5\r\n");
}

#[test]
fn a_missing_final_newline_stays_missing() {
    let ws = Ws::new();
    ws.write("a.txt", "first\nlast");
    let text = edit(
        &ws,
        "a.txt",
        json!([{"oldText": "last", "newText": "final"}]),
    )
    .expect_ok();
    assert_eq!(ws.read("a.txt"), "first\nfinal");
    assert!(text.contains("No newline at end of file"), "{text}");
    ws.write("b.txt", "first\n    last  ");
    edit(
        &ws,
        "b.txt",
        json!([{"oldText": "last\n", "newText": "end\n"}]),
    )
    .expect_ok();
    assert_eq!(ws.read("b.txt"), "first\n    end");
}

#[test]
fn dry_run_returns_the_diff_and_writes_nothing() {
    let ws = Ws::new();
    ws.write("a.txt", "keep me\n");
    let text = ws
        .call(
            "edit_file",
            json!({"path": "a.txt", "edits": [{"oldText": "keep", "newText": "change"}], "dryRun": true}),
        )
        .expect_ok();
    assert!(text.contains("nothing was written"), "{text}");
    assert!(text.contains("-keep me\n+change me\n"), "{text}");
    assert_eq!(ws.read("a.txt"), "keep me\n");
    assert!(!ws.path(".filesystem").exists());
}

#[test]
fn bad_edit_arguments_are_invalid() {
    let ws = Ws::new();
    ws.write("a.txt", "x\n");
    let err = edit(&ws, "a.txt", json!([{"old_text": "x", "newText": "y"}]))
        .expect_err("InvalidArgument");
    assert!(err.contains("old_text"), "{err}");
    edit(&ws, "a.txt", json!([])).expect_err("InvalidArgument");
    edit(&ws, "a.txt", json!([{"oldText": "", "newText": "y"}])).expect_err("InvalidArgument");
    edit(&ws, "a.txt", json!("x")).expect_err("InvalidArgument");
    let err = ws
        .call(
            "edit_file",
            json!({"path": "a.txt", "edits": [], "dry_run": true}),
        )
        .expect_err("InvalidArgument");
    assert!(err.contains("dry_run"), "{err}");
    assert_eq!(ws.read("a.txt"), "x\n");
}

#[test]
fn missing_binary_and_outside_files_are_refused() {
    let ws = Ws::new();
    let edits = json!([{"oldText": "a", "newText": "b"}]);
    edit(&ws, "missing.txt", edits.clone()).expect_err("NotFound");
    ws.write("bin", b"a\0b");
    let err = edit(&ws, "bin", edits.clone()).expect_err("InvalidArgument");
    assert!(
        err.contains("not UTF-8 text (it looks binary); edit_file only edits text"),
        "{err}"
    );
    std::fs::create_dir(ws.path("d")).expect("mkdir");
    edit(&ws, "d", edits.clone()).expect_err("InvalidArgument");
    std::fs::write(ws.outside.join("o.txt"), "a").expect("write");
    edit(&ws, "../outside/o.txt", edits.clone()).expect_err("PathEscape");
    edit(&ws, ".filesystem/x", edits).expect_err("PathEscape");
    assert_eq!(
        std::fs::read_to_string(ws.outside.join("o.txt")).expect("read"),
        "a"
    );
}

#[test]
fn one_edit_near_the_end_of_a_ten_mebibyte_file() {
    let ws = Ws::new();
    let mut big = String::with_capacity(11 << 20);
    let mut i = 0;
    while big.len() < 10 << 20 {
        big.push_str(&format!("    let value_{i} = compute({i});\n"));
        i += 1;
    }
    let last = format!("    let value_{} = compute({});\n", i - 2, i - 2);
    ws.write("big.rs", &big);
    let text = edit(
        &ws,
        "big.rs",
        json!([{"oldText": last.trim_end(), "newText": "    let changed = 0;"}]),
    )
    .expect_ok();
    assert!(
        text.contains("+    let changed = 0;"),
        "{}",
        &text[..text.len().min(500)]
    );
    let after = ws.read("big.rs");
    assert_eq!(
        after.len(),
        big.len() - last.len() + "    let changed = 0;\n".len()
    );
    assert!(after.ends_with(&format!(
        "    let changed = 0;\n    let value_{} = compute({});\n",
        i - 1,
        i - 1
    )));
}

#[test]
fn a_large_whitespace_tolerant_edit_keeps_each_lines_indentation() {
    // More lines than are paired through a full diff: the pairing through unique lines still
    // lines up an inserted line with its neighbour and a changed one with its own.
    let ws = Ws::new();
    let file: String = (0..1500)
        .map(|i| format!("\tstep({i});\n\t\t}}\n"))
        .collect();
    ws.write("big.c", &file);
    let old: String = (0..1500).map(|i| format!("step({i});\n}}\n")).collect();
    let new = old
        .replacen("step(10);\n", "step(10, more);\n", 1)
        .replacen("step(700);\n}\n", "step(700);\n}\nextra();\n", 1);
    edit(&ws, "big.c", json!([{"oldText": old, "newText": new}])).expect_ok();
    let expected = file
        .replacen("\tstep(10);\n", "\tstep(10, more);\n", 1)
        .replacen(
            "\tstep(700);\n\t\t}\n",
            "\tstep(700);\n\t\t}\n\t\textra();\n",
            1,
        );
    assert_eq!(ws.read("big.c"), expected);
}
