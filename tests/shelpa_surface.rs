#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! shelpa's surfaces: the texts each serves, and the tool sets, against golden files in
//! `fixtures/shelpa-surface/`.
//!
//! The golden files are the interface under study, so any drift fails: regenerate them with
//! `UPDATE_GOLDEN=1 cargo test --test shelpa_surface` only for an intended change, and review the
//! diff. What is compared, and what is kept out:
//!
//! - `--help`, original surface: the recorded text comes first and ends at a fixed separator
//!   line; only the part above it is compared (`help-recorded.txt`). Below it are the lines only
//!   this machine can say (missing commands, the Landlock ABI), checked for their fixed parts.
//! - `initialize`: `serverInfo.name` and the `instructions`, which are the same recorded text.
//! - `tools/list`: names, titles, descriptions, input schemas and annotations. The output schema
//!   is left out of the files: it describes behaviour (step metadata), which is the same in both
//!   surfaces and changes with the pipe's metadata, not with the surface; the test checks instead
//!   that every tool of every set and surface declares the very same one.
//!
//! The recorded help is also compared with `fixtures/recorded/help.txt`, the copy taken from the
//! design records by line range, so regenerating the golden here cannot quietly change the
//! recorded words (`tests/recorded_surface.rs` compares every recorded text with the records).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::filesystem;
use test_support::mcp::{text, Session};
use test_support::temp::temp_dir;

/// The separator between the recorded help and the machine's status (see `legacy/src/surface.rs`).
const SEPARATOR: &str =
    "---- this reconstruction, on this machine (not part of the recorded help) ----";

const SETS: [&str; 3] = ["pipe", "help", "all"];

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/shelpa-surface")
        .join(name)
}

/// Compares `actual` with the golden file `name`, or writes it when `UPDATE_GOLDEN=1`.
fn golden(name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read golden file {}: {e}; create it with UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} drifted from its golden file.\n--- expected\n{expected}\n--- actual\n{actual}\n\
         If the change is intended, regenerate with UPDATE_GOLDEN=1 cargo test --test shelpa_surface",
        path.display()
    );
}

fn run(args: &[&str]) -> Output {
    command().args(args).output().expect("run filesystem")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// Splits an original-surface `--help` at the separator: (recorded text, machine status).
fn split_help(help: &str) -> (String, String) {
    let marker = format!("\n{SEPARATOR}\n");
    let at = help
        .find(&marker)
        .unwrap_or_else(|| panic!("no separator line in --help:\n{help}"));
    assert_eq!(
        help.matches(SEPARATOR).count(),
        1,
        "the separator appears once"
    );
    (
        help[..at + 1].to_string(),
        help[at + marker.len()..].to_string(),
    )
}

/// `initialize` and `tools/list` of a pipe server with `flags` (on a fresh workspace).
fn handshake(flags: &[&str]) -> (Value, Value) {
    let mut all = vec!["--legacy-pipe", "--no-call-log"];
    all.extend_from_slice(flags);
    let mut s = Session::start(&all);
    let init = s.initialize("2025-11-25");
    let list = s.request(2, "tools/list", json!({}));
    s.close_and_wait();
    (init["result"].clone(), list["result"]["tools"].clone())
}

/// The tools without their output schemas (see the module documentation), pretty-printed; the
/// removed schemas are returned for the cross-surface check.
fn without_output_schemas(tools: &Value) -> (String, Vec<Value>) {
    let mut tools = tools.clone();
    let mut schemas = Vec::new();
    for tool in tools.as_array_mut().expect("tools array") {
        let schema = tool
            .as_object_mut()
            .and_then(|t| t.remove("outputSchema"))
            .expect("every shelpa tool declares an output schema");
        schemas.push(schema);
    }
    let mut pretty = serde_json::to_string_pretty(&tools).expect("json");
    pretty.push('\n');
    (pretty, schemas)
}

/// Removes every `description` from a JSON schema, at any depth.
fn strip_descriptions(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("description");
            m.values_mut().for_each(strip_descriptions);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

fn names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_golden_help_is_the_help_the_records_quote() {
    let golden = std::fs::read_to_string(golden_path("help-recorded.txt"))
        .expect("fixtures/shelpa-surface/help-recorded.txt");
    let recorded = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/recorded/help.txt"),
    )
    .expect("fixtures/recorded/help.txt");
    assert_eq!(golden, recorded, "the golden help must be the recorded one");
}

#[test]
fn original_help_is_the_recorded_text_then_the_machine_status_for_every_set() {
    for set in SETS {
        let help = stdout(&run(&["--legacy-pipe", "--shelpa-tools", set, "--help"]));
        let (recorded, status) = split_help(&help);
        golden("help-recorded.txt", &recorded);
        assert!(
            status.contains(&format!("tools served (--shelpa-tools {set}): ")),
            "{status}"
        );
        for companion in ["ctree_check", "ctree_generate", "serena_find_symbol"] {
            assert!(status.contains(companion), "{companion} listed as missing");
        }
    }
    // The default surface is the original one, and -h is --help.
    let default = stdout(&run(&["--legacy-pipe", "-h"]));
    assert_eq!(split_help(&default).0, split_help(&help_of("help")).0);
}

fn help_of(set: &str) -> String {
    stdout(&run(&[
        "--legacy-pipe",
        "--surface",
        "original",
        "--shelpa-tools",
        set,
        "--help",
    ]))
}

#[test]
fn original_initialize_and_tools_list_match_the_golden_files() {
    let mut output_schemas = Vec::new();
    for set in SETS {
        let (init, tools) = handshake(&["--shelpa-tools", set]);
        assert_eq!(init["serverInfo"]["name"], "shelpa-mcp", "set {set}");
        let instructions = init["instructions"].as_str().expect("instructions");
        golden("help-recorded.txt", instructions);
        let (listed, schemas) = without_output_schemas(&tools);
        golden(&format!("tools-original-{set}.json"), &listed);
        output_schemas.extend(schemas);
    }
    let (_, modern) = handshake(&["--surface", "modern", "--shelpa-tools", "all"]);
    let (_, modern_schemas) = without_output_schemas(&modern);
    output_schemas.extend(modern_schemas);
    // The original surface's output schema carries no words (the recorded definition has none);
    // without its descriptions, the modern one is the same shape.
    let shape = |v: &Value| {
        let mut v = v.clone();
        strip_descriptions(&mut v);
        v
    };
    assert!(
        output_schemas
            .windows(2)
            .all(|w| shape(&w[0]) == shape(&w[1])),
        "every tool of every surface returns the same shape"
    );
}

#[test]
fn the_sets_hold_the_tools_the_notes_name() {
    let expected: [(&str, &[&str]); 3] = [
        ("pipe", &["shelpa_pipe"]),
        ("help", &["shelpa_pipe", "shelpa_write"]),
        (
            "all",
            &["shelpa_pipe", "shelpa_tee", "shelpa_write", "shelpa"],
        ),
    ];
    let dir = temp_dir();
    let root = dir.path().to_str().expect("utf-8 path");
    for (set, tools) in expected {
        for surface in ["original", "modern"] {
            let (_, listed) = handshake(&["--surface", surface, "--shelpa-tools", set]);
            assert_eq!(names(&listed), tools, "{surface}/{set}");
            let out = stdout(&run(&[
                "--legacy-pipe",
                "--surface",
                surface,
                "--shelpa-tools",
                set,
                "tools",
                "--root",
                root,
            ]));
            for tool in tools {
                assert!(
                    out.lines()
                        .any(|l| l.split_whitespace().next() == Some(tool)),
                    "`tools` lists {tool} for {surface}/{set}:\n{out}"
                );
            }
        }
    }
}

#[test]
fn modern_still_serves_todays_texts() {
    let (init, tools) = handshake(&["--surface", "modern"]);
    assert_eq!(init["serverInfo"]["name"], "filesystem");
    golden(
        "instructions-modern-help.txt",
        init["instructions"].as_str().expect("instructions"),
    );
    golden("tools-modern-help.json", &without_output_schemas(&tools).0);
    let (_, all) = handshake(&["--surface", "modern", "--shelpa-tools", "all"]);
    golden("tools-modern-all.json", &without_output_schemas(&all).0);
    let help = stdout(&run(&["--legacy-pipe", "--surface", "modern", "--help"]));
    assert!(help.starts_with(
        "shelpa — a virtual pipeline shell over one workspace (filesystem --legacy-pipe)\n"
    ));
    assert!(help.contains(
        "TOOLS\n  shelpa_pipe   {command, cwd?, confirm_oversize?}   run a pipeline or a navigation command\n  shelpa_write  {path, content, append?, confirm_oversize?}   write a file through tee\n\nPIPELINE COMMANDS"
    ));
    assert!(!help.contains(SEPARATOR));
}

#[test]
fn started_as_shelpa_mcp_it_is_the_original_shelpa() {
    let links = temp_dir();
    let shelpa = links.path().join("shelpa-mcp");
    std::os::unix::fs::symlink(filesystem(), &shelpa).expect("symlink");

    let help = Command::new(&shelpa)
        .arg("--help")
        .output()
        .expect("run shelpa-mcp --help");
    let help = stdout(&help);
    golden("help-recorded.txt", &split_help(&help).0);

    let ws = temp_dir();
    std::fs::write(ws.path().join("app.log"), "a ERROR db\nb ok\n").expect("write");
    let mut cmd = Command::new(&shelpa);
    cmd.arg("--root").arg(ws.path()).arg("--no-call-log");
    let mut s = Session::from_command(cmd);
    let init = s.initialize("2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "shelpa-mcp");
    assert_eq!(
        init["result"]["instructions"].as_str(),
        Some(split_help(&help).0.as_str())
    );
    let list = s.request(2, "tools/list", json!({}));
    assert_eq!(
        names(&list["result"]["tools"]),
        ["shelpa_pipe", "shelpa_write"]
    );
    let ran = s.call(3, "shelpa_pipe", json!({"command": "rg ERROR app.log"}));
    assert_ne!(ran["isError"], json!(true), "{}", text(&ran));
    assert_eq!(ran["structuredContent"]["stdout"], "a ERROR db\n");
    s.close_and_wait();

    // The original command line is all it needs; filesystem's subcommands still work.
    let out = Command::new(&shelpa)
        .args(["--root"])
        .arg(ws.path())
        .args([
            "--no-call-log",
            "call",
            "shelpa_pipe",
            r#"{"command":"pwd"}"#,
        ])
        .output()
        .expect("run shelpa-mcp call");
    let out = stdout(&out);
    let canonical = ws.path().canonicalize().expect("canonical");
    assert!(
        out.contains(&format!("\"stdout\":\"{}\\n\"", canonical.display())),
        "{out}"
    );
}

/// A server serving all four tools on a workspace holding `src/main.rs`.
fn all_tools() -> Session {
    let dir = temp_dir();
    std::fs::create_dir(dir.path().join("src")).expect("mkdir");
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").expect("write");
    let root = dir.path().to_path_buf();
    let mut s = Session::start_in(
        &root,
        &["--legacy-pipe", "--shelpa-tools", "all", "--no-call-log"],
    );
    s.dir = Some(dir);
    s.initialize("2025-11-25");
    s
}

fn error_reason(result: &Value) -> String {
    assert_eq!(result["isError"], json!(true), "expected a refusal");
    let v: Value = serde_json::from_str(&text(result)).expect("error JSON");
    v["error"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn shelpa_tee_writes_every_path_and_its_mirror_like_a_tee_stage() {
    let mut s = all_tools();
    let root = s.root.clone();
    let r = s.call(
        2,
        "shelpa_tee",
        json!({"content": "one\n", "paths": ["out.txt", "src/copy.txt"]}),
    );
    assert_ne!(r["isError"], json!(true), "{}", text(&r));
    let tee = &r["structuredContent"]["meta"]["tee"];
    assert_eq!(tee["paths"], json!(["out.txt", "src/copy.txt"]));
    assert_eq!(
        tee["mirror"],
        json!([".shelpa/out.txt", ".shelpa/src/copy.txt"])
    );
    assert_eq!(tee["mode"], "overwrite");
    for rel in ["out.txt", "src/copy.txt"] {
        assert_eq!(std::fs::read_to_string(root.join(rel)).expect(rel), "one\n");
        // The audit mirror holds one record per write: a header line, then the bytes.
        let mirror = std::fs::read_to_string(root.join(".shelpa").join(rel)).expect("mirror");
        assert!(mirror.starts_with("--- shelpa:overwrite "), "{mirror}");
        assert!(mirror.ends_with("---\none\n"), "{mirror}");
    }
    let r = s.call(
        3,
        "shelpa_tee",
        json!({"content": "two\n", "paths": ["out.txt"], "append": true}),
    );
    assert_ne!(r["isError"], json!(true), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(root.join("out.txt")).expect("out"),
        "one\ntwo\n"
    );

    // The same refusals as `... | tee`, from the same checks, and nothing written by them.
    let big = "x".repeat(4096);
    let r = s.call(
        4,
        "shelpa_tee",
        json!({"content": big, "paths": ["big.txt"]}),
    );
    assert_eq!(error_reason(&r), "APPROVAL_REQUIRED");
    assert!(!root.join("big.txt").exists());
    let r = s.call(
        5,
        "shelpa_tee",
        json!({"content": "x", "paths": [".shelpa/x"]}),
    );
    assert_eq!(error_reason(&r), "PROTECTED_PATH");
    let r = s.call(6, "shelpa_tee", json!({"content": "x", "paths": ["../x"]}));
    assert_eq!(error_reason(&r), "PATH_ESCAPE");
    let r = s.call(7, "shelpa_tee", json!({"content": "x", "paths": ["src"]}));
    assert_eq!(error_reason(&r), "DISALLOWED_TARGET");
    let r = s.call(
        8,
        "shelpa_pipe",
        json!({"command": "head -n 1 src/main.rs | tee src"}),
    );
    assert_eq!(error_reason(&r), "DISALLOWED_TARGET");
    std::fs::hard_link(root.join("out.txt"), root.join("twin.txt")).expect("link");
    let r = s.call(
        9,
        "shelpa_tee",
        json!({"content": "x", "paths": ["twin.txt"], "append": true}),
    );
    assert_eq!(error_reason(&r), "DISALLOWED_TARGET");
    let r = s.call(10, "shelpa_tee", json!({"content": "x", "paths": []}));
    assert_eq!(error_reason(&r), "BAD_ARGUMENT");
    // A name that looks like an option is still a file name.
    let r = s.call(
        11,
        "shelpa_tee",
        json!({"content": "dash\n", "paths": ["-n"]}),
    );
    assert_ne!(r["isError"], json!(true), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(root.join("-n")).expect("-n"),
        "dash\n"
    );
    s.close_and_wait();
}

#[test]
fn shelpa_navigates_alone_and_sends_pipelines_to_shelpa_pipe() {
    let mut s = all_tools();
    let root = s.root.canonicalize().expect("canonical");
    let r = s.call(2, "shelpa", json!({"command": "cd src"}));
    assert_ne!(r["isError"], json!(true), "{}", text(&r));
    let r = s.call(3, "shelpa", json!({"command": "pwd"}));
    assert_eq!(
        r["structuredContent"]["stdout"],
        format!("{}\n", root.join("src").display())
    );
    let r = s.call(4, "shelpa", json!({"command": "ls"}));
    assert_eq!(r["structuredContent"]["stdout"], "main.rs\n");
    // The session directory is the one shelpa_pipe uses: same session, same code.
    let r = s.call(5, "shelpa_pipe", json!({"command": "pwd"}));
    assert_eq!(
        r["structuredContent"]["stdout"],
        format!("{}\n", root.join("src").display())
    );
    let r = s.call(6, "shelpa", json!({"command": "ls | head -n 1"}));
    assert_eq!(error_reason(&r), "NAV_IN_PIPELINE");
    assert!(text(&r).contains("shelpa_pipe"));
    let r = s.call(7, "shelpa", json!({"command": "rg main"}));
    assert_eq!(error_reason(&r), "DISALLOWED_CMD");
    assert!(text(&r).contains("shelpa_pipe"));
    let r = s.call(8, "shelpa", json!({"command": "cd ../.."}));
    assert_eq!(error_reason(&r), "PATH_ESCAPE");
    s.close_and_wait();
}

#[test]
fn one_off_calls_reach_every_tool_of_the_set_and_no_other() {
    let dir = temp_dir();
    let root = dir.path().to_str().expect("utf-8 path");
    let calls = [
        ("shelpa_pipe", r#"{"command":"pwd"}"#),
        ("shelpa_tee", r#"{"content":"t\n","paths":["t.txt"]}"#),
        ("shelpa_write", r#"{"path":"w.txt","content":"w\n"}"#),
        ("shelpa", r#"{"command":"ls"}"#),
    ];
    for (tool, args) in calls {
        let out = run(&[
            "--legacy-pipe",
            "--shelpa-tools",
            "all",
            "--root",
            root,
            "--no-call-log",
            "call",
            tool,
            args,
        ]);
        stdout(&out);
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("t.txt")).expect("t"),
        "t\n"
    );
    let refused = run(&[
        "--legacy-pipe",
        "--shelpa-tools",
        "pipe",
        "--root",
        root,
        "--no-call-log",
        "call",
        "shelpa_write",
        r#"{"path":"x.txt","content":"x"}"#,
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(!dir.path().join("x.txt").exists());
}

#[test]
fn report_counts_shelpa_tee_and_shelpa_as_the_pipe_and_tee_calls_as_writes() {
    let out = run(&[
        "report",
        "--transcripts",
        golden_path("transcripts").to_str().expect("path"),
        "--log",
        golden_path("calls.jsonl").to_str().expect("path"),
        "--format",
        "json",
    ]);
    let r: Value = serde_json::from_str(&stdout(&out)).expect("report JSON");
    // Transcript sess-s: shelpa cd | shelpa_pipe rg|tee (write) | shelpa_tee (write) | shelpa
    // `ls | head` NAV_IN_PIPELINE | shelpa_tee under mcp__old__box__ (write) | shelpa_write
    // (write) | builtin Write (write): pipe 6 calls, 4 writes; 5 writes, 4 ours.
    let t = &r["transcripts"]["total"];
    let pipe = &t["interfaces"]["pipe"];
    assert_eq!(pipe["calls"], 6);
    assert_eq!(pipe["by_tool"]["shelpa_tee"], 2);
    assert_eq!(pipe["by_tool"]["shelpa"], 2);
    assert_eq!(pipe["errors_by_reason"]["NAV_IN_PIPELINE"], 1);
    assert_eq!(t["adoption"]["writes"], 5);
    assert_eq!(t["adoption"]["ours"], 4);
    assert_eq!(t["adoption"]["writes_by_interface"]["pipe"], 4);
    // Call log s-5555: shelpa pwd | shelpa_tee (write) | shelpa_pipe rg|tee (write) | shelpa
    // NAV_IN_PIPELINE | shelpa_write (write).
    let l = &r["call_logs"]["total"];
    assert_eq!(l["interfaces"]["pipe"]["calls"], 5);
    assert_eq!(l["interfaces"]["pipe"]["by_tool"]["shelpa"], 2);
    assert_eq!(l["adoption"]["writes"], 3);
    assert_eq!(l["adoption"]["writes_by_interface"]["pipe"], 3);
}

#[test]
fn a_served_shelpa_tee_call_is_logged_and_reported_as_a_pipe_write() {
    let dir = temp_dir();
    let log = dir.path().join("calls.jsonl");
    let ws = temp_dir();
    let mut s = Session::start_in(
        ws.path(),
        &[
            "--legacy-pipe",
            "--shelpa-tools",
            "all",
            "--call-log",
            log.to_str().expect("path"),
        ],
    );
    s.initialize("2025-11-25");
    s.call(
        2,
        "shelpa_tee",
        json!({"content": "x\n", "paths": ["x.txt"]}),
    );
    s.call(3, "shelpa", json!({"command": "pwd"}));
    s.close_and_wait();
    let out = run(&[
        "report",
        "--log",
        log.to_str().expect("path"),
        "--format",
        "json",
    ]);
    let r: Value = serde_json::from_str(&stdout(&out)).expect("report JSON");
    let l = &r["call_logs"]["total"];
    assert_eq!(l["interfaces"]["pipe"]["by_tool"]["shelpa_tee"], 1);
    assert_eq!(l["interfaces"]["pipe"]["by_tool"]["shelpa"], 1);
    assert_eq!(l["adoption"]["writes"], 1);
    assert_eq!(l["adoption"]["ours"], 1);
}
