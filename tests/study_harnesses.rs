#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem study run` across harnesses: every trial in a home of its own (never another
//! trial's, never the user's), the `harness` dimension interleaved with the arms, and the example
//! study `fixtures/study/harnesses.toml` run through the real Claude Code, Codex CLI and Gemini
//! CLI with the scripted model: for each harness and arm the report recovers the script's
//! choices exactly (work calls per interface, reads, writes), counts the discovery calls apart
//! (Claude Code's ToolSearch, Codex's tool_search for a model it knows), and shows how this
//! project's tools were offered (Claude Code deferred, Codex namespaced or deferred, Gemini up
//! front).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use scripted_model::record::Kind;
use scripted_model::{Script, ScriptedModel};
use serde_json::{json, Value};
use test_support::harness::Harness;

fn filesystem() -> PathBuf {
    test_support::filesystem().to_path_buf()
}

fn records(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("trials.jsonl"))
        .expect("read trials.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

fn report_json(out: &Path) -> Value {
    let report = Command::new(filesystem())
        .args(["study", "report", "--format", "json"])
        .arg(out)
        .output()
        .expect("run study report");
    assert!(report.status.success(), "{report:?}");
    serde_json::from_slice(&report.stdout).expect("report JSON")
}

fn ok(output: &Output) {
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn every_trial_has_its_own_home_and_harnesses_interleave_with_arms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let study_dir = dir.path();
    let task = study_dir.join("tasks/t");
    std::fs::create_dir_all(task.join("workspace")).expect("mkdir");
    std::fs::write(task.join("workspace/seed.txt"), "x").expect("write");
    std::fs::write(task.join("prompt.md"), "Do it.\n").expect("write");
    // Each agent notes where its home and state variables point, then leaves a file in its home
    // (as a harness leaves its sessions), so a shared home would show.
    let note = "printf '%s\\n' \"$HOME\" \"$TMPDIR\" \"$XDG_CONFIG_HOME\" \"$CLAUDE_CONFIG_DIR\" \"$1\" > seen.txt; \
                ls -A \"$(dirname \"$TMPDIR\")\" > home-before.txt; echo state > \"$HOME/state\"";
    let study = format!(
        "[study]\nname = \"homes\"\nseed = 5\ntrials = 2\nbaseline = \"a\"\n\n\
         [[harness]]\nname = \"one\"\ncommand = [\"sh\", \"-c\", {note:?}, \"sh\", \"{{harness}}\"]\n\n\
         [[harness]]\nname = \"two\"\ncommand = [\"sh\", \"-c\", {note:?}, \"sh\", \"{{harness}}\"]\n\
         env = {{ HOME = \"{{workspace}}/own-home\" }}\n\n\
         [[task]]\nname = \"t\"\ndir = \"tasks/t\"\nfixture = \"workspace\"\nprompt = \"prompt.md\"\n\
         verify = [\"true\"]\ntime_limit = 30\n\n\
         [[arm]]\nname = \"a\"\nargs = []\n\n[[arm]]\nname = \"b\"\nserver = false\n"
    );
    let file = study_dir.join("study.toml");
    std::fs::write(&file, study).expect("write study");
    let user_home = tempfile::tempdir().expect("user home");
    let out = study_dir.join("out");
    let run = Command::new(filesystem())
        .args(["study", "run"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .env("HOME", user_home.path())
        .env("CLAUDE_CONFIG_DIR", user_home.path().join(".claude"))
        .output()
        .expect("run the study");
    ok(&run);

    let recs = records(&out);
    assert_eq!(recs.len(), 2 * 2 * 2);
    let mut homes = HashSet::new();
    for r in &recs {
        let id = r["id"].as_str().expect("id");
        let harness = r["harness"].as_str().expect("a harness name in the record");
        assert!(id.ends_with(&format!("-{harness}")), "{id}");
        let trial = out.join("trials").join(id);
        let seen = std::fs::read_to_string(trial.join("workspace/seen.txt")).expect("seen.txt");
        let seen: Vec<&str> = seen.lines().collect();
        let home = trial.join("home");
        assert_eq!(
            seen[4], harness,
            "{{harness}} expands to the harness's name"
        );
        if harness == "two" {
            // The study's own HOME wins; the other variables still point into the trial's home.
            assert_eq!(Path::new(seen[0]), trial.join("workspace/own-home"));
        } else {
            assert_eq!(Path::new(seen[0]), home);
        }
        assert_eq!(Path::new(seen[1]), home.join(".tmp"));
        assert_eq!(Path::new(seen[2]), home.join(".config"));
        // An inherited CLAUDE_CONFIG_DIR would lead back to the user's own state.
        assert_eq!(Path::new(seen[3]), home.join(".claude"));
        // The home was empty but for the temporary directory when the agent started.
        let before = std::fs::read_to_string(trial.join("workspace/home-before.txt"))
            .expect("home-before.txt");
        assert_eq!(before.trim(), ".tmp", "{id}");
        assert!(
            homes.insert(seen[0].to_string()),
            "two trials share {}",
            seen[0]
        );
    }
    // Harnesses are interleaved with arms within each repetition.
    let first: HashSet<&str> = recs[..4]
        .iter()
        .map(|r| r["harness"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(first.len(), 2, "{recs:?}");
    assert_eq!(
        std::fs::read_dir(user_home.path()).expect("list").count(),
        0,
        "the user's home was touched"
    );

    let report = report_json(&out);
    assert_eq!(report["harnesses"], json!(["one", "two"]));
    let cells = report["cells"].as_array().expect("cells");
    let keys: Vec<(String, String, u64)> = cells
        .iter()
        .map(|c| {
            (
                c["arm"].as_str().unwrap_or("").to_string(),
                c["harness"].as_str().unwrap_or("").to_string(),
                c["trials"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let expected: Vec<(String, String, u64)> =
        [("a", "one"), ("a", "two"), ("b", "one"), ("b", "two")]
            .iter()
            .map(|(a, h)| (a.to_string(), h.to_string(), 2))
            .collect();
    assert_eq!(keys, expected);
    assert_eq!(report["arms"][0]["trials"], json!(4));

    // Text, CSV and SVG show the same rows, each arm under each harness.
    let svg = study_dir.join("report.svg");
    let text = Command::new(filesystem())
        .args(["study", "report"])
        .arg(&out)
        .arg("--svg")
        .arg(&svg)
        .output()
        .expect("study report");
    ok(&text);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains("== per arm and harness"), "{text}");
    let csv = Command::new(filesystem())
        .args(["study", "report", "--format", "csv"])
        .arg(&out)
        .output()
        .expect("study report");
    ok(&csv);
    let csv = String::from_utf8_lossy(&csv.stdout).into_owned();
    let drawn = std::fs::read_to_string(&svg).expect("the chart");
    for (arm, harness) in [("a", "one"), ("a", "two"), ("b", "one"), ("b", "two")] {
        let label = format!("{arm}@{harness}");
        assert!(csv.contains(&format!("\n{label},trials,2,")), "{csv}");
        assert!(drawn.contains(&label), "{label} not drawn");
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{arm} "))
                && l.split_whitespace().nth(1) == Some(harness)),
            "{text}"
        );
    }
}

/// The example study's scripts, as the demo gives them to the `scripted-model` binary.
fn example_scripts() -> Vec<Script> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/study/harnesses-scripts.json");
    let text = std::fs::read_to_string(&path).expect("read the scripts");
    serde_json::from_str(&text).expect("scripts")
}

fn cell<'a>(report: &'a Value, arm: &str, harness: &str) -> &'a Value {
    report["cells"]
        .as_array()
        .and_then(|cells| {
            cells
                .iter()
                .find(|c| c["arm"] == json!(arm) && c["harness"] == json!(harness))
        })
        .unwrap_or_else(|| panic!("no cell {arm}/{harness} in {report:#}"))
}

#[test]
fn the_example_study_through_claude_code_codex_and_gemini_recovers_the_scripted_choices() {
    // A model Codex has no metadata for (a local one): the namespace with every schema.
    example_study("scripted", Codex::Namespaced);
}

#[test]
fn codex_defers_the_namespace_for_a_known_model_and_the_relay_shows_it() {
    // A model Codex knows (as a hosted one is configured): the namespace behind tool_search,
    // loaded by the search, which the relay sees in the later requests.
    example_study("gpt-5.5", Codex::Deferred);
}

/// How Codex offers this project's tools, by the model it is told.
#[derive(Clone, Copy, PartialEq)]
enum Codex {
    /// One namespace with every schema, from the first request.
    Namespaced,
    /// The namespace behind `tool_search`: one discovery call loads it.
    Deferred,
}

/// What one cell (arm under harness) of the report must say: the scripted choices, and how the
/// tools were offered.
struct Expected {
    harness: &'static str,
    arm: &'static str,
    /// Work calls by interface.
    work: Value,
    reads: Value,
    writes: Value,
    discovery: u64,
    presentation: &'static str,
    /// Where what was offered is read from.
    source: &'static str,
    instructions_seen: u64,
}

/// The scripted choices of harnesses-scripts.json, as the report must recover them.
fn expected(codex: Codex) -> Vec<Expected> {
    let mut out = Vec::new();
    // Claude Code: its own request records; this project's tools deferred, each loaded by one
    // ToolSearch call (two tools a trial), the server's instructions in its system message.
    // Codex: the relay; one namespace, with the server's instructions as its description; for
    // a known model one tool_search call loads it. Its shell is neither a read nor a write.
    // Gemini: the relay; every tool declared up front, no discovery; the server's instructions
    // reach the model (0.61.0 adds them to a trusted folder's context, in the first user message).
    let codex_discovery = u64::from(codex == Codex::Deferred);
    let codex_presentation = match codex {
        Codex::Namespaced => "namespaced",
        Codex::Deferred => "deferred",
    };
    for (harness, discovery, presentation, source, instructions) in [
        ("claude-code", 2, "deferred", "claude_code_transcript", 1),
        ("codex", codex_discovery, codex_presentation, "relay", 1),
        ("gemini", 0, "up_front", "relay", 1),
    ] {
        out.push(Expected {
            harness,
            arm: "filesystem",
            work: json!({"filesystem": 2}),
            reads: json!({"filesystem": 1}),
            writes: json!({"filesystem": 1}),
            discovery,
            presentation,
            source,
            instructions_seen: instructions,
        });
        out.push(Expected {
            harness,
            arm: "pipe-modern",
            work: json!({"pipe": 2}),
            reads: json!({"pipe": 1}),
            writes: json!({"pipe": 1}),
            discovery,
            presentation,
            source,
            instructions_seen: instructions,
        });
        let (reads, writes) = if harness == "codex" {
            (json!({}), json!({}))
        } else {
            (json!({"builtin": 1}), json!({"builtin": 1}))
        };
        out.push(Expected {
            harness,
            arm: "builtin-only",
            work: json!({"builtin": 2}),
            reads,
            writes,
            discovery: 0,
            presentation: "not_offered",
            source,
            instructions_seen: 0,
        });
    }
    out
}

/// Runs the example study with Codex told `codex_model`, and checks every cell of the report
/// against the scripts.
fn example_study(codex_model: &str, codex: Codex) {
    let claude = Harness::ClaudeCode.executable();
    let bin_dir = claude.parent().expect("the .bin directory").to_path_buf();
    // All three come from the same pinned install.
    for h in [Harness::Codex, Harness::Gemini] {
        assert_eq!(h.executable().parent(), Some(bin_dir.as_path()));
    }
    let model = ScriptedModel::start(example_scripts()).expect("start the scripted model");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let user_home = tempfile::tempdir().expect("user home");
    let study = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/study/harnesses.toml");
    let run = Command::new(filesystem())
        .args(["study", "run"])
        .arg(&study)
        .arg("--out")
        .arg(&out)
        .env_clear()
        .env("HOME", user_home.path())
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir.display()),
        )
        .env("LANG", "C.UTF-8")
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "scripted-model-key")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_BUG_COMMAND", "1")
        .env("CODEX_BASE_URL", model.openai_base_url())
        .env("CODEX_MODEL", codex_model)
        .env("GOOGLE_GEMINI_BASE_URL", model.base_url())
        .env("GEMINI_API_KEY", "scripted-model-key")
        .output()
        .expect("run the study");
    ok(&run);
    let recorded = model.records();
    for r in &recorded {
        assert!(r.diverged.is_none(), "a run left its script: {r:?}");
    }
    // Every script played to its end: its final answer was given.
    let finished: HashSet<String> = recorded
        .iter()
        .filter(|r| r.kind == Kind::Turn)
        .filter(|r| {
            r.answer
                .as_ref()
                .is_some_and(|a| serde_json::to_value(a).is_ok_and(|v| v["kind"] == "text"))
        })
        .filter_map(|r| r.script.clone())
        .collect();
    let scripts: HashSet<String> = example_scripts().into_iter().map(|s| s.name).collect();
    assert_eq!(scripts.len(), 9, "three arms under three harnesses");
    assert_eq!(finished, scripts, "{recorded:#?}");
    assert_eq!(
        std::fs::read_dir(user_home.path()).expect("list").count(),
        0,
        "the user's home was touched"
    );

    let recs = records(&out);
    assert_eq!(recs.len(), 9);
    for r in &recs {
        let id = r["id"].as_str().unwrap_or("");
        let verify = std::fs::read_to_string(out.join("trials").join(id).join("verify.out"))
            .unwrap_or_default();
        assert_eq!(r["success"], json!(true), "{r:#}\n{verify}");
    }
    // Gemini CLI's settings were written into the trial's home, with the arm's server only.
    for r in recs.iter().filter(|r| r["harness"] == "gemini") {
        let id = r["id"].as_str().expect("id");
        let settings: Value = serde_json::from_str(
            &std::fs::read_to_string(
                out.join("trials")
                    .join(id)
                    .join("home/.gemini/settings.json"),
            )
            .expect("the trial's Gemini settings"),
        )
        .expect("JSON");
        let servers = settings["mcpServers"].as_object().expect("mcpServers");
        assert_eq!(servers.is_empty(), r["arm"] == "builtin-only", "{id}");
    }
    let report = report_json(&out);
    assert_eq!(
        report["harnesses"],
        json!(["claude-code", "codex", "gemini"])
    );
    assert_eq!(
        report["inputs"]["trials_without_transcript"],
        json!(0),
        "{report:#}"
    );

    for e in expected(codex) {
        let c = cell(&report, e.arm, e.harness);
        let at = format!("{}/{}", e.arm, e.harness);
        assert_eq!(c["trials"], json!(1), "{at}: {c:#}");
        assert_eq!(c["calls"]["work_by_interface"], e.work, "{at}: {c:#}");
        assert_eq!(c["calls"]["work"], json!(2), "{at}: {c:#}");
        assert_eq!(c["calls"]["discovery"], json!(e.discovery), "{at}: {c:#}");
        assert_eq!(c["calls"]["all"], json!(2 + e.discovery), "{at}: {c:#}");
        assert_eq!(c["reads_by_interface"], e.reads, "{at}: {c:#}");
        assert_eq!(c["writes_by_interface"], e.writes, "{at}: {c:#}");
        // Adoption is over work calls: discovery never counts as a write of ours.
        let writes: u64 = e
            .writes
            .as_object()
            .map_or(0, |w| w.values().filter_map(Value::as_u64).sum());
        let ours = if e.arm == "builtin-only" { 0 } else { writes };
        assert_eq!(c["write_adoption"]["count"], json!(ours), "{at}: {c:#}");
        assert_eq!(c["write_adoption"]["total"], json!(writes), "{at}: {c:#}");
        // What the model was offered.
        let o = &c["offered"];
        assert_eq!(o["trials_known"], json!(1), "{at}: {c:#}");
        assert_eq!(o["presentation"], json!({e.presentation: 1}), "{at}: {c:#}");
        assert_eq!(
            o["instructions_seen"],
            json!(e.instructions_seen),
            "{at}: {c:#}"
        );
        assert_eq!(o["sources"], json!([e.source]), "{at}: {c:#}");
        assert!(
            o["mean_system_chars"].as_f64().is_some_and(|n| n > 1000.0),
            "{at}: {c:#}"
        );
    }

    // The trial's own record and offered.json say the same, per trial.
    let offered_of = |harness: &str, arm: &str| -> Value {
        let rec = recs
            .iter()
            .find(|r| r["arm"] == arm && r["harness"] == harness)
            .expect("the trial");
        let id = rec["id"].as_str().expect("id");
        let file: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("trials").join(id).join("offered.json"))
                .expect("offered.json"),
        )
        .expect("JSON");
        assert_eq!(file, rec["offered"]);
        file
    };
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    // Claude Code: this project's tools named only, ToolSearch with its schema.
    let cc = offered_of("claude-code", "filesystem");
    assert!(
        names(&cc["deferred"]).contains(&"mcp__filesystem__write_file".into()),
        "{cc:#}"
    );
    assert!(
        names(&cc["with_schema"]).contains(&"ToolSearch".into()),
        "{cc:#}"
    );
    // Codex: the mcp__filesystem namespace, in the first request or loaded by tool_search.
    let cx = offered_of("codex", "filesystem");
    assert_eq!(cx["api"], json!("openai"), "{cx:#}");
    let in_namespace = "mcp__filesystem/write_file".to_string();
    match codex {
        Codex::Namespaced => {
            // Beside Codex's own multi_agent_v1 namespace.
            assert!(
                names(&cx["namespaces"]).contains(&"mcp__filesystem".into()),
                "{cx:#}"
            );
            assert!(names(&cx["with_schema"]).contains(&in_namespace), "{cx:#}");
        }
        Codex::Deferred => {
            assert!(
                names(&cx["with_schema"]).contains(&"tool_search".into()),
                "{cx:#}"
            );
            assert!(names(&cx["loaded_later"]).contains(&in_namespace), "{cx:#}");
        }
    }
    // Gemini: every tool of this project declared flat with its schema, beside its own.
    let gm = offered_of("gemini", "filesystem");
    assert_eq!(gm["api"], json!("gemini"), "{gm:#}");
    let with_schema = names(&gm["with_schema"]);
    for tool in [
        "mcp_filesystem_write_file",
        "mcp_filesystem_read_text_file",
        "read_file",
    ] {
        assert!(with_schema.contains(&tool.to_string()), "{gm:#}");
    }
    assert_eq!(gm["deferred"], json!([]), "{gm:#}");
}
