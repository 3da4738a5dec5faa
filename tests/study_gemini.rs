#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem study run` with Gemini CLI as the agent (the pinned `@google/gemini-cli`, as
//! `scripts/test` installs it) and the scripted model as its model (`GOOGLE_GEMINI_BASE_URL`),
//! on the example study's `summarize-log` task in three arms: pipe-original, filesystem and
//! builtin-only. The model's script differs per arm (it knows a trial's arm by the workspace
//! path Gemini CLI puts in the first message), so what `study report` counts per arm is known:
//! it must recover it exactly. Each trial's Gemini CLI gets its own home, with the settings the
//! runner wrote for that arm.

use std::path::{Path, PathBuf};
use std::process::Command;

use scripted_model::{Script, ScriptedModel, Step, ToolRef};
use serde_json::{json, Value};
use test_support::fixtures::fixture;
use test_support::harness::{gemini_chats, Harness};
use test_support::study::arm;

/// The summary the verifier accepts for the task's log.
const SUMMARY: &str = "lines: 16\nerrors: 5\nwarnings: 3\nfirst error: 2026-11-30T10:02:11Z\n\
                       modules with errors: api, db, worker\n";

const ARMS: &str = r#"
[[arm]]
name = "pipe-original"
args = ["--legacy-pipe", "--surface", "original"]

[[arm]]
name = "filesystem"
args = []

[[arm]]
name = "builtin-only"
server = false
"#;

/// Reads the log and writes the summary through `read` and `write`, for the trials of `arm`
/// (their workspace is `…/<rep>-summarize-log-<arm>/workspace`, which Gemini CLI names in the
/// first message).
fn script(arm: &str, read: Step, write: Step) -> Script {
    Script {
        name: arm.into(),
        when: Some(format!("-summarize-log-{arm}/workspace")),
        steps: vec![
            read,
            write,
            Step::Finish {
                text: "summary.txt written".into(),
            },
        ],
    }
}

fn call(tool: ToolRef, args: Value) -> Step {
    Step::Call { tool, args }
}

fn scripts() -> Vec<Script> {
    let fs = |tool: &str| ToolRef::mcp("filesystem", tool);
    let builtin = |name: &str| ToolRef::Builtin {
        builtin: name.into(),
    };
    vec![
        script(
            "pipe-original",
            call(fs("shelpa_pipe"), json!({"command": "tail -n +1 app.log"})),
            call(
                fs("shelpa_write"),
                json!({"path": "summary.txt", "content": SUMMARY}),
            ),
        ),
        script(
            "filesystem",
            call(fs("read_text_file"), json!({"path": "app.log"})),
            call(
                fs("write_file"),
                json!({"path": "summary.txt", "content": SUMMARY}),
            ),
        ),
        script(
            "builtin-only",
            call(builtin("read_file"), json!({"file_path": "app.log"})),
            call(
                builtin("write_file"),
                json!({"file_path": "summary.txt", "content": SUMMARY}),
            ),
        ),
    ]
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn study_file(dir: &Path, base_url: &str) -> PathBuf {
    copy_tree(
        &fixture("study/tasks/summarize-log"),
        &dir.join("tasks/summarize-log"),
    );
    let gemini = Harness::Gemini.executable();
    let text = format!(
        r#"[study]
name = "gemini e2e"
seed = 5
trials = 2
baseline = "filesystem"

[agent]
command = [{gemini}, "-p", "{{prompt}}", "-m", "gemini-2.5-flash",
           "--approval-mode", "yolo", "--output-format", "stream-json"]
stdout = "{{transcript_dir}}/stream.jsonl"

[agent.env]
GEMINI_CLI_HOME = "{{gemini_home}}"
GOOGLE_GEMINI_BASE_URL = {url}
GEMINI_API_KEY = "scripted-model-key"
GEMINI_CLI_TRUST_WORKSPACE = "true"

[[task]]
name = "summarize-log"
dir = "tasks/summarize-log"
fixture = "workspace"
prompt = "prompt.md"
verify = ["sh", "{{task_dir}}/verify.sh"]
time_limit = 600
{ARMS}"#,
        gemini = Value::from(gemini.display().to_string()),
        url = Value::from(base_url),
    );
    let path = dir.join("study.toml");
    std::fs::write(&path, text).expect("write study.toml");
    path
}

fn filesystem(args: &[&str], home: &Path) -> std::process::Output {
    Command::new(test_support::bin::filesystem())
        .args(args)
        .env("HOME", home)
        .output()
        .expect("run filesystem")
}

#[test]
fn a_gemini_study_reports_each_arms_scripted_calls_exactly() {
    let model = ScriptedModel::start(scripts()).expect("start the scripted model");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().canonicalize().expect("canonical");
    let study = study_file(&dir, &model.base_url());
    let out = dir.join("run");
    // The runner's own HOME is one no trial may use: each trial's Gemini CLI gets its own.
    let user_home = dir.join("user-home");
    std::fs::create_dir_all(&user_home).expect("mkdir");
    let run = filesystem(
        &[
            "study",
            "run",
            study.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ],
        &user_home,
    );
    assert!(
        run.status.success(),
        "study run failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    for r in model.records() {
        assert!(r.diverged.is_none(), "a trial left its script: {r:?}");
    }
    // Six trials, each with its own home: its settings name the arm's server (none for
    // builtin-only) and its chat file is there, none in the runner's home.
    let trials: Vec<PathBuf> = std::fs::read_dir(out.join("trials"))
        .expect("trials")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(trials.len(), 6, "{trials:?}");
    for trial in &trials {
        let name = trial.file_name().unwrap().to_string_lossy().into_owned();
        let gemini_dir = trial.join("home/.gemini");
        let settings: Value = serde_json::from_str(
            &std::fs::read_to_string(gemini_dir.join("settings.json")).unwrap(),
        )
        .unwrap();
        let servers = settings["mcpServers"].as_object().unwrap();
        assert_eq!(servers.is_empty(), name.ends_with("builtin-only"), "{name}");
        if let Some(server) = servers.get("filesystem") {
            let args: Vec<&str> = server["args"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let workspace = trial.join("workspace");
            assert!(args.contains(&workspace.to_str().unwrap()), "{args:?}");
        }
        assert_eq!(gemini_chats(&gemini_dir).len(), 1, "{name}");
    }
    assert!(!user_home.join(".gemini").exists());

    let report = filesystem(
        &[
            "study",
            "report",
            out.to_str().expect("utf-8"),
            "--format",
            "json",
        ],
        &user_home,
    );
    assert!(
        report.status.success(),
        "study report failed: {}",
        String::from_utf8_lossy(&report.stderr)
    );
    let report: Value = serde_json::from_slice(&report.stdout).expect("the report is JSON");
    for (name, interface) in [
        ("pipe-original", "pipe"),
        ("filesystem", "filesystem"),
        ("builtin-only", "builtin"),
    ] {
        let a = arm(&report, name);
        assert_eq!(a["trials"], 2, "{name}: {a}");
        assert_eq!(a["success"]["count"], 2, "{name}: {a}");
        assert_eq!(a["trials_with_transcript"], 2, "{name}: {a}");
        assert_eq!(
            a["reads_by_interface"],
            json!({interface: 2}),
            "{name}: {a}"
        );
        assert_eq!(
            a["writes_by_interface"],
            json!({interface: 2}),
            "{name}: {a}"
        );
        assert_eq!(a["calls_per_trial"]["mean"], 2.0, "{name}: {a}");
    }
}
