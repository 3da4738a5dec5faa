#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The original shelpa surface against the design records themselves: every text the records
//! quote, served byte for byte.
//!
//! The expected texts are the files in `fixtures/recorded/`, which `fixtures/recorded/extract.sh`
//! copies out of the records by exact line ranges (nothing here is retyped, and no golden file
//! here is regenerated from the binary: a drift can only be fixed in the code). What is compared:
//!
//! - the help (record 000, lines 186-202): the first 17 lines of `--help` in every tool set, and
//!   under the `shelpa-mcp` name, then the separator; the `initialize` instructions are exactly it;
//! - the `shelpa_pipe` definition (000, lines 206-227), whole for a 2024-11-05 client (which is
//!   sent no later fields), and its name, description and input schema for the latest revision;
//! - `shelpa_write`'s description as the help's `Tools:` line gives it (000, line 197);
//! - the error object for `rm` (000, lines 246-253), as text, byte for byte once the record's
//!   layout whitespace is taken out; the approval gate's message (001, lines 88-89), the `cwd`
//!   and path escapes (001, lines 63 and 75);
//! - the success response's keys and their order (000, lines 233-242), and the mirror's overwrite
//!   separator (000, line 175);
//! - the whitelist and the navigation commands (000, lines 41-43 and 67), and the successor's 14
//!   tools, error kinds and two command lines (003, lines 32-53, 122-126 and 61-62).

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use test_support::bin::{command, filesystem};
use test_support::mcp::{text, Session};
use test_support::temp::temp_dir;

const SETS: [&str; 3] = ["pipe", "help", "all"];

/// The separator between the recorded help and what this reconstruction adds below it.
const SEPARATOR: &str =
    "---- this reconstruction, on this machine (not part of the recorded help) ----";

fn recorded(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/recorded")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run fixtures/recorded/extract.sh with the records",
            path.display()
        )
    })
}

/// A recorded one-line text without its final newline.
fn recorded_line(name: &str) -> String {
    recorded(name).trim_end_matches('\n').to_string()
}

fn recorded_json(name: &str) -> Value {
    serde_json::from_str(&recorded(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// JSON text without the whitespace between tokens, keys in the order written: how a record's
/// pretty-printed object reads on the wire.
fn minified(json: &str) -> String {
    let mut out = String::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// The object keys of a JSON text in the order they are written, each with its nesting depth.
fn keys_in_order(json: &str) -> Vec<(usize, String)> {
    let text = minified(json);
    let mut keys = Vec::new();
    let (mut depth, mut chars) = (0usize, text.char_indices().peekable());
    while let Some((at, c)) = chars.next() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            '"' => {
                let mut escaped = false;
                let mut end = at;
                for (i, d) in chars.by_ref() {
                    match (escaped, d) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => {
                            end = i;
                            break;
                        }
                        _ => {}
                    }
                }
                if chars.peek().map(|(_, d)| *d) == Some(':') {
                    keys.push((depth, text[at + 1..end].to_string()));
                }
            }
            _ => {}
        }
    }
    keys
}

fn stdout_of(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `--help` split after its first 17 lines: (those lines, the line after them).
fn head_17(help: &str) -> (String, String) {
    let lines: Vec<&str> = help.split_inclusive('\n').collect();
    assert!(
        lines.len() > 17,
        "--help is shorter than the recorded help:\n{help}"
    );
    (lines[..17].concat(), lines[17].trim_end().to_string())
}

/// A pipe server on `root` with `flags`, past `initialize` at `version`: the session and the
/// `initialize` result.
fn pipe_server(root: &Path, version: &str, flags: &[&str]) -> (Session, Value) {
    let mut all = vec!["--legacy-pipe", "--no-call-log"];
    all.extend_from_slice(flags);
    let mut s = Session::start_in(root, &all);
    let init = s.initialize(version);
    (s, init["result"].clone())
}

fn tools_of(s: &mut Session) -> Vec<Value> {
    let list = s.request(900, "tools/list", json!({}));
    list["result"]["tools"]
        .as_array()
        .cloned()
        .expect("tools array")
}

fn tool<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {tools:?}"))
}

#[test]
fn help_starts_with_the_recorded_help_in_every_set_and_under_the_shelpa_mcp_name() {
    let help = recorded("help.txt");
    assert_eq!(
        help.lines().count(),
        17,
        "the fixture is the 17 recorded lines"
    );
    for set in SETS {
        let out = command()
            .args(["--legacy-pipe", "--shelpa-tools", set, "--help"])
            .output()
            .expect("run --help");
        let (first, next) = head_17(&stdout_of(out));
        assert_eq!(first, help, "--shelpa-tools {set}");
        assert_eq!(next, SEPARATOR, "--shelpa-tools {set}");
    }
    let links = temp_dir();
    let shelpa = links.path().join("shelpa-mcp");
    std::os::unix::fs::symlink(filesystem(), &shelpa).expect("symlink");
    let out = Command::new(&shelpa).arg("--help").output().expect("run");
    let (first, next) = head_17(&stdout_of(out));
    assert_eq!(first, help, "shelpa-mcp --help | head -17");
    assert_eq!(next, SEPARATOR);
}

#[test]
fn the_instructions_are_the_recorded_help_and_nothing_else() {
    let help = recorded("help.txt");
    let ws = temp_dir();
    for set in SETS {
        for version in ["2024-11-05", "2025-11-25"] {
            let (s, init) = pipe_server(ws.path(), version, &["--shelpa-tools", set]);
            assert_eq!(init["instructions"].as_str(), Some(help.as_str()), "{set}");
            assert_eq!(init["serverInfo"]["name"], "shelpa-mcp");
            s.close_and_wait();
        }
    }
    let links = temp_dir();
    let shelpa = links.path().join("shelpa-mcp");
    std::os::unix::fs::symlink(filesystem(), &shelpa).expect("symlink");
    let mut cmd = Command::new(&shelpa);
    cmd.arg("--root").arg(ws.path()).arg("--no-call-log");
    let mut s = Session::from_command(cmd);
    let init = s.initialize("2025-11-25");
    assert_eq!(init["result"]["instructions"].as_str(), Some(help.as_str()));
    s.close_and_wait();
}

#[test]
fn shelpa_pipe_is_the_recorded_definition_in_every_set() {
    let definition = recorded_json("shelpa_pipe.json");
    let ws = temp_dir();
    for set in SETS {
        // A 2024-11-05 client is sent no field the record lacks: the whole definition matches.
        let (mut s, _) = pipe_server(ws.path(), "2024-11-05", &["--shelpa-tools", set]);
        assert_eq!(tool(&tools_of(&mut s), "shelpa_pipe"), &definition, "{set}");
        s.close_and_wait();
        // The latest revision adds a title (the name), annotations and an output schema that
        // carries no words: the recorded fields are unchanged.
        let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &["--shelpa-tools", set]);
        let tools = tools_of(&mut s);
        let pipe = tool(&tools, "shelpa_pipe");
        for key in ["name", "description", "inputSchema"] {
            assert_eq!(pipe[key], definition[key], "{set}: {key}");
        }
        assert_eq!(pipe["title"], "shelpa_pipe");
        for t in &tools {
            assert!(
                !t["outputSchema"].to_string().contains("\"description\""),
                "{set}: {} has words in its output schema",
                t["name"]
            );
        }
        s.close_and_wait();
    }
}

#[test]
fn shelpa_write_is_described_as_the_recorded_help_lists_it() {
    let help = recorded("help.txt");
    let line = help
        .lines()
        .find_map(|l| l.strip_prefix("  - shelpa_write"))
        .expect("the help's shelpa_write line");
    let description = line.trim_start();
    assert!(!description.is_empty());
    let ws = temp_dir();
    for set in ["help", "all"] {
        let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &["--shelpa-tools", set]);
        let tools = tools_of(&mut s);
        assert_eq!(
            tool(&tools, "shelpa_write")["description"],
            description,
            "{set}"
        );
        // The reconstructed property descriptions reuse the recorded words for the same
        // property; none names a limit, the fence or a missing tool.
        let confirm = &recorded_json("shelpa_pipe.json")["inputSchema"]["properties"]
            ["confirm_oversize"]["description"];
        for t in &tools {
            let props = &t["inputSchema"]["properties"];
            if props.get("confirm_oversize").is_some() {
                assert_eq!(
                    &props["confirm_oversize"]["description"], confirm,
                    "{}",
                    t["name"]
                );
            }
            let words = t.to_string();
            for added in ["MISSING", "Landlock", "KiB", "1 MiB", "2048"] {
                assert!(!words.contains(added), "{}: {added}", t["name"]);
            }
        }
        s.close_and_wait();
    }
}

#[test]
fn a_refused_rm_is_the_recorded_error_object_byte_for_byte() {
    let expected = minified(&recorded("error.json"));
    let ws = temp_dir();
    std::fs::write(ws.path().join("x"), "keep\n").expect("write");
    for set in SETS {
        let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &["--shelpa-tools", set]);
        let r = s.call(2, "shelpa_pipe", json!({"command": "rm x"}));
        assert_eq!(r["isError"], json!(true));
        assert_eq!(text(&r), expected, "{set}");
        s.close_and_wait();
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("x")).expect("x"),
        "keep\n"
    );
    // The modern surface keeps this reconstruction's own words for the same refusal.
    let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &["--surface", "modern"]);
    let r = s.call(2, "shelpa_pipe", json!({"command": "rm x"}));
    assert_ne!(text(&r), expected);
    s.close_and_wait();
}

/// The recorded gate message for `size` bytes and the default 2048-byte threshold.
fn gate_message(size: usize) -> String {
    let template = recorded_line("approval-gate.txt");
    assert_eq!(template.matches("{}").count(), 2, "{template}");
    template
        .replacen("{}", &size.to_string(), 1)
        .replacen("{}", "2048", 1)
}

fn error_of(result: &Value) -> Value {
    assert_eq!(result["isError"], json!(true), "{result}");
    serde_json::from_str::<Value>(&text(result)).expect("error JSON")["error"].clone()
}

#[test]
fn the_approval_gate_refuses_in_the_recorded_words() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("big.log"), "x".repeat(2999) + "\n").expect("write");
    let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &["--shelpa-tools", "all"]);
    let r = s.call(
        2,
        "shelpa_pipe",
        json!({"command": "head -n 5 big.log | tee out.txt"}),
    );
    let e = error_of(&r);
    assert_eq!(e["reason"], "APPROVAL_REQUIRED");
    assert_eq!(e["detail"], gate_message(3000));
    let r = s.call(
        3,
        "shelpa_write",
        json!({"path": "w.txt", "content": "y".repeat(4096)}),
    );
    assert_eq!(error_of(&r)["detail"], gate_message(4096));
    let r = s.call(
        4,
        "shelpa_tee",
        json!({"paths": ["t.txt"], "content": "z".repeat(2049)}),
    );
    let e = error_of(&r);
    assert_eq!(e["detail"], gate_message(2049));
    let keys: Vec<&String> = e
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys.len(), 4, "the recorded four keys: {e}");
    for name in ["out.txt", "w.txt", "t.txt"] {
        assert!(!ws.path().join(name).exists(), "{name} was not written");
    }
    // Confirmed, the same write goes through.
    let r = s.call(
        5,
        "shelpa_write",
        json!({"path": "w.txt", "content": "y".repeat(4096), "confirm_oversize": true}),
    );
    assert_ne!(r["isError"], json!(true), "{}", text(&r));
    s.close_and_wait();
}

#[test]
fn escapes_are_named_in_the_recorded_words() {
    let cwd_escape = recorded_line("cwd-escape.txt");
    let path_escape = recorded_line("path-escape.txt");
    let ws = temp_dir();
    std::fs::create_dir(ws.path().join("src")).expect("mkdir");
    let outside = temp_dir();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).expect("symlink");
    let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &["--shelpa-tools", "all"]);
    let calls = [
        (
            "shelpa_pipe",
            json!({"command": "ls", "cwd": "out"}),
            &cwd_escape,
        ),
        ("shelpa_pipe", json!({"command": "ls out/"}), &path_escape),
        (
            "shelpa_pipe",
            json!({"command": "rg x src | tee out/x.txt"}),
            &path_escape,
        ),
        (
            "shelpa_pipe",
            json!({"command": "pwd", "cwd": ".."}),
            &cwd_escape,
        ),
        (
            "shelpa_pipe",
            json!({"command": "ls", "cwd": "src/../.."}),
            &cwd_escape,
        ),
        ("shelpa_pipe", json!({"command": "ls ../.."}), &path_escape),
        ("shelpa_pipe", json!({"command": "cd .."}), &path_escape),
        (
            "shelpa_pipe",
            json!({"command": "rg x src | tee ../out.txt"}),
            &path_escape,
        ),
        (
            "shelpa_write",
            json!({"path": "../out.txt", "content": "x"}),
            &path_escape,
        ),
        (
            "shelpa_tee",
            json!({"paths": ["../out.txt"], "content": "x"}),
            &path_escape,
        ),
        ("shelpa", json!({"command": "cd ../.."}), &path_escape),
    ];
    for (i, (name, args, expected)) in calls.into_iter().enumerate() {
        let r = s.call(10 + i as i64, name, args.clone());
        let e = error_of(&r);
        assert_eq!(e["reason"], "PATH_ESCAPE", "{name} {args}");
        assert_eq!(&e["detail"], expected.as_str(), "{name} {args}");
    }
    s.close_and_wait();
    let written: Vec<_> = std::fs::read_dir(outside.path()).expect("ls").collect();
    assert!(written.is_empty(), "nothing written outside: {written:?}");
}

#[test]
fn a_success_has_the_recorded_keys_in_the_recorded_order() {
    let recorded_text = recorded("success.json");
    let ws = temp_dir();
    std::fs::write(ws.path().join("file"), "a ok\nb pattern\nc pattern\n").expect("write");
    let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &[]);
    let r = s.call(
        2,
        "shelpa_pipe",
        json!({"command": "tail -n 100 file | rg pattern"}),
    );
    assert_ne!(r["isError"], json!(true), "{}", text(&r));
    let served = text(&r);
    let value: Value = serde_json::from_str(&served).expect("JSON");
    assert_eq!(value["stdout"], "b pattern\nc pattern\n");
    assert_eq!(value["meta"]["tee"], Value::Null);
    let want = keys_in_order(&recorded_text);
    let got: Vec<(usize, String)> = keys_in_order(&served)
        .into_iter()
        .filter(|k| want.contains(k))
        .collect();
    assert_eq!(got, want, "{served}");
    for (step, command) in value["meta"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .zip(["tail -n 100 file", "rg pattern"])
    {
        assert_eq!(step["command"], command);
    }
    s.close_and_wait();
}

#[test]
fn an_overwrite_is_marked_in_the_mirror_by_the_recorded_separator() {
    let recorded_sep = recorded_line("overwrite-separator.txt");
    let ws = temp_dir();
    let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &[]);
    for (id, content) in [(2, "one\n"), (3, "two\n")] {
        let r = s.call(
            id,
            "shelpa_write",
            json!({"path": "out.txt", "content": content}),
        );
        assert_ne!(r["isError"], json!(true), "{}", text(&r));
    }
    s.close_and_wait();
    let mirror = std::fs::read_to_string(ws.path().join(".shelpa/out.txt")).expect("mirror");
    let headers: Vec<&str> = mirror.lines().filter(|l| l.starts_with("--- ")).collect();
    assert_eq!(headers.len(), 2, "{mirror}");
    // The recorded line's words, with its time and record id as placeholders.
    let shape = |line: &str| -> Vec<String> {
        line.split(' ')
            .map(|w| match w.split_once('=') {
                Some(("ts", v)) => {
                    let ok = chrono_like(v);
                    format!("ts=<{}>", if ok { "time" } else { v })
                }
                Some(("record_id", v)) if v.chars().all(|c| c.is_ascii_digit()) => {
                    "record_id=<digits>".to_string()
                }
                _ => w.to_string(),
            })
            .collect()
    };
    for header in headers {
        assert_eq!(shape(header), shape(&recorded_sep), "{header}");
    }
    assert!(mirror.ends_with("two\n"), "{mirror}");
}

/// `YYYY-MM-DDTHH:MM:SSZ`, the recorded time's form.
fn chrono_like(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

#[test]
fn the_recorded_whitelist_is_recognised_and_navigation_runs_alone() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("f.txt"), "a\n").expect("write");
    let (mut s, _) = pipe_server(ws.path(), "2025-11-25", &[]);
    let mut id = 10;
    for name in recorded("pipeline-commands.txt").lines() {
        id += 1;
        // Every recorded name is a command here: it runs, or it is answered as allowed but not
        // installed (the companion tools); it is never refused as a disallowed command.
        let r = s.call(
            id,
            "shelpa_pipe",
            json!({"command": format!("{name} --version")}),
        );
        if r["isError"] == json!(true) {
            let e = error_of(&r);
            assert_ne!(e["reason"], "DISALLOWED_CMD", "{name}: {e}");
        }
    }
    for name in recorded("navigation-commands.txt").lines() {
        id += 1;
        let alone = if name == "cd" { "cd ." } else { name };
        let r = s.call(id, "shelpa_pipe", json!({"command": alone}));
        assert_ne!(r["isError"], json!(true), "{alone}: {}", text(&r));
        id += 1;
        let r = s.call(
            id,
            "shelpa_pipe",
            json!({"command": format!("{alone} | head -n 1")}),
        );
        assert_eq!(error_of(&r)["reason"], "NAV_IN_PIPELINE", "{alone}");
    }
    s.close_and_wait();
}

/// The successor's tools as the record's table names them: each row opens with a tool name.
fn recorded_rows(name: &str) -> Vec<String> {
    recorded(name).lines().map(str::to_string).collect()
}

/// The name among `names` that `row` opens with (the longest, so `list_directory` does not
/// claim a `list_directory_with_sizes` row).
fn opening<'a>(row: &str, names: &'a [String]) -> Option<&'a String> {
    names
        .iter()
        .filter(|n| row.starts_with(n.as_str()))
        .max_by_key(|n| n.len())
}

#[test]
fn the_filesystem_mode_serves_the_recorded_fourteen_tools() {
    let ws = temp_dir();
    let mut s = Session::start_in(ws.path(), &["--backup", "--no-call-log"]);
    s.initialize("2025-11-25");
    let served: Vec<String> = tools_of(&mut s)
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect();
    s.close_and_wait();
    let rows = recorded_rows("filesystem-tool-rows.txt");
    assert_eq!(rows.len(), 14);
    let mut named: Vec<&String> = rows
        .iter()
        .map(|r| opening(r, &served).unwrap_or_else(|| panic!("no served tool for {r:?}")))
        .collect();
    named.sort();
    named.dedup();
    let mut served_sorted: Vec<&String> = served.iter().collect();
    served_sorted.sort();
    assert_eq!(
        named, served_sorted,
        "the 14 recorded tools, each once, and no other"
    );
}

#[test]
fn the_filesystem_mode_answers_with_the_recorded_error_kinds() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("a.txt"), "a\n").expect("write");
    let mut s = Session::start_in(ws.path(), &["--no-call-log"]);
    // A name longer than any file system allows: the OS refuses to look it up (ENAMETOOLONG).
    let too_long = "a".repeat(300);
    s.initialize("2025-11-25");
    let calls: [(&str, Value); 5] = [
        ("read_text_file", json!({"path": "../x"})),
        ("read_text_file", json!({"path": "missing.txt"})),
        ("create_file", json!({"path": "a.txt", "content": "b"})),
        ("read_text_file", json!({"path": too_long})),
        (
            "read_text_file",
            json!({"path": "a.txt", "head": 1, "tail": 1}),
        ),
    ];
    let mut kinds = Vec::new();
    for (i, (name, args)) in calls.into_iter().enumerate() {
        let r = s.call(10 + i as i64, name, args);
        assert_eq!(r["isError"], json!(true), "{name}");
        kinds.push(text(&r));
    }
    s.close_and_wait();
    let rows = recorded_rows("filesystem-error-kind-rows.txt");
    assert_eq!(rows.len(), 5);
    for (row, said) in rows.iter().zip(&kinds) {
        let kind = said.split(':').next().unwrap_or_default();
        assert!(
            row.starts_with(kind) && !kind.is_empty(),
            "{row:?} vs {said:?}"
        );
    }
}

#[test]
fn the_successors_two_recorded_command_lines_start_a_server_named_filesystem() {
    let ws = temp_dir();
    std::fs::write(ws.path().join("a.txt"), "a\n").expect("write");
    let root = ws.path().to_str().expect("utf-8 path");
    let lines: Vec<String> = recorded("filesystem-usage.txt")
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in lines {
        let words: Vec<String> = line
            .replace("[--root <ROOT>]", &format!("--root {root}"))
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(words[0], "filesystem", "{line}");
        let mut args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let server = args.contains(&"--server");
        if server {
            // The daemon serves roots below its allowed directories (by default the home one).
            args.extend(["--allow-root", root]);
        }
        args.push("--no-call-log");
        let mut s = Session::spawn(&[], &args);
        let init = s.initialize("2025-11-25");
        assert_eq!(init["result"]["serverInfo"]["name"], "filesystem", "{line}");
        let r = s.call(2, "read_text_file", json!({"path": "a.txt"}));
        if server {
            // --server: every call must name its root (003, line 65).
            assert_eq!(r["isError"], json!(true), "{line}");
            assert!(text(&r).starts_with("InvalidArgument"), "{}", text(&r));
            let r = s.call(3, "read_text_file", json!({"path": "a.txt", "root": root}));
            assert_eq!(text(&r), "a\n", "{line}");
        } else {
            // --mcp: a call's root is ignored (003, line 65).
            assert_eq!(text(&r), "a\n", "{line}");
            let r = s.call(3, "read_text_file", json!({"path": "a.txt", "root": "/"}));
            assert_eq!(text(&r), "a\n", "{line}");
        }
        s.close_and_wait();
    }
}
