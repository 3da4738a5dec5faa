#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem study run` with Codex CLI as the agent (the pinned `@openai/codex`, installed by
//! `scripts/test`), the model played by the scripted endpoint on 127.0.0.1, and `study report`
//! reading back what Codex recorded.
//!
//! The study is the example's `summarize-log` task under three arms (the pipe tools, the
//! filesystem tools, built-ins only), two trials each, started by the command line of the shipped
//! `fixtures/study/codex.toml` with the scripted provider added as `-c` overrides. The scripted
//! model tells the arms apart by the trial's workspace, which Codex names in its environment
//! context, and plays each arm's choices: read the log and write the summary through the pipe
//! tools, through the filesystem tools, or through `exec_command` and `apply_patch`. The report
//! must recover exactly those choices per arm; each trial must have had a Codex home of its own.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use scripted_model::record::Kind;
use scripted_model::{Script, ScriptedModel, Step, ToolRef};
use serde_json::{json, Value};
use test_support::audit::copy_tree;
use test_support::fixtures::fixture;
use test_support::harness::Harness;
use test_support::study::arm;

/// A model Codex knows: it offers `apply_patch` and defers the server behind `tool_search`.
const MODEL: &str = "gpt-5.5";
const TASK: &str = "summarize-log";
const ARMS: [&str; 3] = ["pipe-original", "filesystem", "builtin-only"];
const TRIALS: u64 = 2;

/// The summary the task asks for, worked out from the fixture's log as its verifier does.
fn summary(log: &str) -> String {
    let rows: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    let at = |level: &str| -> Vec<&Vec<&str>> {
        rows.iter().filter(|r| r.get(1) == Some(&level)).collect()
    };
    let errors = at("ERROR");
    let mut modules: Vec<&str> = errors.iter().map(|r| r[2]).collect();
    modules.sort();
    modules.dedup();
    format!(
        "lines: {}\nerrors: {}\nwarnings: {}\nfirst error: {}\nmodules with errors: {}\n",
        rows.len(),
        errors.len(),
        at("WARN").len(),
        errors.first().map_or("", |r| r[0]),
        modules.join(", ")
    )
}

/// How the built-in arm writes the summary: `apply_patch` (offered to a model Codex knows) or a
/// shell command line (all a model it does not know has).
#[derive(Clone, Copy)]
enum BuiltinWrite {
    Patch,
    Shell,
}

/// Each arm's script: read `app.log`, write `summary.txt`, through the arm's tools.
fn scripts(summary: &str, arms: &[&str], write: BuiltinWrite) -> Vec<Script> {
    let fs = |tool: &str| ToolRef::mcp("filesystem", tool);
    let builtin = |name: &str| ToolRef::Builtin {
        builtin: name.into(),
    };
    let patch: String = format!(
        "*** Begin Patch\n*** Add File: summary.txt\n{}*** End Patch\n",
        summary
            .lines()
            .map(|l| format!("+{l}\n"))
            .collect::<String>()
    );
    let steps = |read: Step, write: Step| {
        vec![
            read,
            write,
            Step::Finish {
                text: "summary.txt is written".into(),
            },
        ]
    };
    let call = |tool: ToolRef, args: Value| Step::Call { tool, args };
    arms.iter()
        .map(|&arm| Script {
            name: arm.into(),
            // Codex names the working directory (the trial's workspace, below the trial's
            // directory `<rep>-<task>-<arm>`) in its environment context, a user message.
            when: Some(format!("-{TASK}-{arm}/workspace")),
            steps: match arm {
                "pipe-original" => steps(
                    call(fs("shelpa_pipe"), json!({"command": "tail -n +1 app.log"})),
                    call(
                        fs("shelpa_write"),
                        json!({"path": "summary.txt", "content": summary}),
                    ),
                ),
                "filesystem" => steps(
                    call(fs("read_text_file"), json!({"path": "app.log"})),
                    call(
                        fs("write_file"),
                        json!({"path": "summary.txt", "content": summary}),
                    ),
                ),
                _ => steps(
                    call(builtin("exec_command"), json!({"cmd": "cat app.log"})),
                    match write {
                        BuiltinWrite::Patch => call(builtin("apply_patch"), json!(patch)),
                        BuiltinWrite::Shell => call(
                            builtin("exec_command"),
                            json!({"cmd": format!("printf '%s' '{summary}' > summary.txt")}),
                        ),
                    },
                ),
            },
        })
        .collect()
}

/// The shipped example's agent command, with the harness's path for `codex` and the scripted
/// provider serving `model` as `-c` overrides before the prompt; and its `env`.
fn agent(base_url: &str, model: &str) -> (Vec<String>, BTreeMap<String, String>) {
    let text = std::fs::read_to_string(fixture("study/codex.toml")).expect("read codex.toml");
    let study: toml::Table = toml::from_str(&text).expect("codex.toml is TOML");
    let agent = &study["agent"];
    let mut command: Vec<String> = agent["command"]
        .as_array()
        .expect("agent.command")
        .iter()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect();
    assert_eq!(command[0], "codex");
    assert_eq!(command.last().map(String::as_str), Some("{prompt}"));
    command[0] = Harness::Codex.executable().display().to_string();
    let prompt = command.pop().expect("the prompt");
    for setting in [
        format!("model=\"{model}\""),
        "model_provider=\"scripted\"".into(),
        "model_providers.scripted.name=\"scripted model\"".into(),
        format!("model_providers.scripted.base_url=\"{base_url}\""),
        "model_providers.scripted.wire_api=\"responses\"".into(),
        // Every optional call to the vendor, switched off: the test is offline.
        "check_for_update_on_startup=false".into(),
        "analytics.enabled=false".into(),
    ] {
        command.extend(["-c".to_string(), setting]);
    }
    command.push(prompt);
    let env = agent["env"]
        .as_table()
        .expect("agent.env")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("a string").to_string()))
        .collect();
    (command, env)
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| Value::from(s.as_str()).to_string())
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// Writes the study of `arms` into `dir` (a copy of the task beside it), its agent `command` and
/// `env`.
fn write_study(
    dir: &Path,
    command: &[String],
    env: &BTreeMap<String, String>,
    arms: &[&str],
) -> PathBuf {
    copy_tree(
        &fixture(&format!("study/tasks/{TASK}")),
        &dir.join("tasks").join(TASK),
    );
    let env: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k} = {}", Value::from(v.as_str())))
        .collect();
    let mut text = format!(
        "[study]\nname = \"codex\"\nseed = 5\ntrials = {TRIALS}\nbaseline = \"filesystem\"\n\n\
         [agent]\ncommand = {}\nenv = {{ {} }}\n\n\
         [[task]]\nname = \"{TASK}\"\ndir = \"tasks/{TASK}\"\nfixture = \"workspace\"\n\
         prompt = \"prompt.md\"\nverify = [\"sh\", \"{{task_dir}}/verify.sh\"]\ntime_limit = 300\n\n",
        toml_list(command),
        env.join(", ")
    );
    for arm in arms {
        text.push_str(match *arm {
            "pipe-original" => {
                "[[arm]]\nname = \"pipe-original\"\nargs = [\"--legacy-pipe\", \"--surface\", \"original\"]\n\n"
            }
            "filesystem" => "[[arm]]\nname = \"filesystem\"\nargs = []\n\n",
            _ => "[[arm]]\nname = \"builtin-only\"\nserver = false\n\n",
        });
    }
    let file = dir.join("study.toml");
    std::fs::write(&file, text).expect("write study.toml");
    file
}

/// The runner started as a user would, with an environment of its own (a home no trial may
/// use, a PATH for `node`, `sh` and `python3`): what Codex sees comes from the runner.
fn filesystem(home: &Path, args: &[&OsStr]) -> Output {
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir tmp");
    let o = Command::new(test_support::filesystem())
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("TMPDIR", &tmp)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .output()
        .expect("run filesystem");
    assert!(
        o.status.success(),
        "filesystem {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Every `rollout-*.jsonl` below `dir`.
fn session_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"))
            {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn a_study_with_codex_as_the_agent_recovers_each_arms_scripted_choices() {
    let log = std::fs::read_to_string(fixture(&format!("study/tasks/{TASK}/workspace/app.log")))
        .expect("read app.log");
    let summary = summary(&log);
    let model = ScriptedModel::start(scripts(&summary, &ARMS, BuiltinWrite::Patch))
        .expect("start the scripted model");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().canonicalize().expect("canonical");
    let (command, env) = agent(&model.openai_base_url(), MODEL);
    let study = write_study(&dir, &command, &env, &ARMS);
    let user_home = dir.join("user-home");
    let out = dir.join("run");
    filesystem(
        &user_home,
        &[
            OsStr::new("study"),
            OsStr::new("run"),
            study.as_os_str(),
            OsStr::new("--out"),
            out.as_os_str(),
        ],
    );

    // The scripted model played every arm's script, and Codex never left it.
    let records = model.records();
    for r in &records {
        assert!(r.diverged.is_none(), "a trial left the script: {r:?}");
    }
    let turns = |arm: &str| -> Vec<&scripted_model::Record> {
        records
            .iter()
            .filter(|r| r.kind == Kind::Turn && r.script.as_deref() == Some(arm))
            .collect()
    };
    for arm_name in ARMS {
        assert!(!turns(arm_name).is_empty(), "no turn of arm {arm_name}");
        // Codex offers a server as one namespace, `mcp__<server>`, loaded by its tool_search.
        let namespace_offered = turns(arm_name).iter().any(|t| {
            t.offered
                .iter()
                .any(|o| o.namespace.as_deref() == Some("mcp__filesystem"))
        });
        assert_eq!(
            namespace_offered,
            arm_name != "builtin-only",
            "arm {arm_name}: the namespace mcp__filesystem offered: {namespace_offered}"
        );
        assert!(turns(arm_name)[0]
            .offered
            .iter()
            .any(|o| o.name == "tool_search" && o.namespace.is_none()));
    }

    // Every trial had a Codex home of its own, holding its own session and nothing of another's.
    let trials = test_support::logs::json_lines(&out.join("trials.jsonl"));
    assert_eq!(trials.len() as u64, TRIALS * ARMS.len() as u64);
    let mut homes = HashSet::new();
    let mut threads = HashSet::new();
    for t in &trials {
        let id = t["id"].as_str().expect("an id");
        let trial_dir = out.join("trials").join(id);
        let codex_home = trial_dir.join("home/.codex");
        assert!(
            homes.insert(codex_home.clone()),
            "two trials share {}",
            codex_home.display()
        );
        let config = std::fs::read_to_string(codex_home.join("config.toml")).expect("config.toml");
        let config: toml::Table = toml::from_str(&config).expect("config.toml is TOML");
        let servers = config["mcp_servers"].as_table().expect("mcp_servers");
        let arm_name = t["arm"].as_str().expect("an arm");
        assert_eq!(
            servers.contains_key("filesystem"),
            arm_name != "builtin-only",
            "{id}"
        );
        let sessions = session_files(&codex_home.join("sessions"));
        assert_eq!(sessions.len(), 1, "{id}: {sessions:?}");
        let first = std::fs::read_to_string(&sessions[0]).expect("read the session");
        let meta: Value =
            serde_json::from_str(first.lines().next().expect("a line")).expect("JSON");
        assert_eq!(meta["payload"]["cli_version"], "0.171.0");
        assert_eq!(
            meta["payload"]["cwd"].as_str().map(PathBuf::from),
            Some(trial_dir.join("workspace")),
            "{id}"
        );
        assert!(
            threads.insert(meta["payload"]["id"].to_string()),
            "{id}: a thread seen twice"
        );
        assert_eq!(t["success"], true, "{id}: {t}");
    }
    // Nothing of any trial went into the runner's own home (its tmp/ is the runner's TMPDIR).
    let left: Vec<_> = std::fs::read_dir(&user_home)
        .expect("list the runner's home")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "tmp")
        .collect();
    assert!(
        left.is_empty(),
        "trials wrote into the runner's home: {left:?}"
    );

    // The report counts exactly the scripted reads and writes per arm.
    let o = filesystem(
        &user_home,
        &[
            OsStr::new("study"),
            OsStr::new("report"),
            out.as_os_str(),
            OsStr::new("--format"),
            OsStr::new("json"),
        ],
    );
    let report: Value = serde_json::from_slice(&o.stdout).expect("the report is JSON");
    assert_eq!(report["inputs"]["trials_without_transcript"], 0, "{report}");
    assert_eq!(
        report["inputs"]["transcript_files"],
        TRIALS * ARMS.len() as u64
    );
    let n = TRIALS;
    for (arm_name, interface, reads) in [
        ("pipe-original", "pipe", n),
        ("filesystem", "filesystem", n),
        // `exec_command` is Codex's shell, counted like Claude Code's Bash: neither a read nor a
        // write, whatever its command line does.
        ("builtin-only", "builtin", 0),
    ] {
        let a = arm(&report, arm_name);
        assert_eq!(a["trials"], n);
        assert_eq!(a["success"]["count"], n, "{arm_name}: {a}");
        assert_eq!(
            a["writes_by_interface"],
            json!({ interface: n }),
            "{arm_name}: {a}"
        );
        let ours = if interface == "builtin" { 0 } else { n };
        assert_eq!(
            (&a["write_adoption"]["count"], &a["write_adoption"]["total"]),
            (&json!(ours), &json!(n)),
            "{arm_name}: {a}"
        );
        let expected_reads = if reads > 0 {
            json!({ interface: reads })
        } else {
            json!({})
        };
        assert_eq!(a["reads_by_interface"], expected_reads, "{arm_name}: {a}");
        assert_eq!(a["error_rate"]["count"], 0, "{arm_name}: {a}");
    }
    // The pipe arm's server ran the scripted command line and the write (a `tee`), by its own
    // call log.
    assert_eq!(
        arm(&report, "pipe-original")["pipe"]["top_commands"],
        json!([{"command": "tail", "count": n}, {"command": "tee", "count": n}])
    );

    // `filesystem report` reads one session file alone: the built-in arm's two calls, and the
    // filesystem arm's calls beside its discovery through tool_search.
    for (arm_name, expected) in [
        (
            "builtin-only",
            json!({"builtin": {"exec_command": 1, "apply_patch": 1}}),
        ),
        (
            "filesystem",
            json!({"filesystem": {"read_text_file": 1, "write_file": 1}}),
        ),
    ] {
        let id = format!("000-{TASK}-{arm_name}");
        let sessions = session_files(&out.join("trials").join(&id).join("home/.codex/sessions"));
        let o = filesystem(
            &user_home,
            &[
                OsStr::new("report"),
                OsStr::new("--transcripts"),
                sessions[0].as_os_str(),
                OsStr::new("--format"),
                OsStr::new("json"),
            ],
        );
        let r: Value = serde_json::from_slice(&o.stdout).expect("the report is JSON");
        let interfaces = &r["transcripts"]["total"]["interfaces"];
        for (interface, tools) in expected.as_object().expect("an object") {
            assert_eq!(&interfaces[interface]["by_tool"], tools, "{id}: {r}");
        }
        // tool_search loads schemas: a discovery call, counted apart from the work.
        let discovery = interfaces["discovery"]["by_tool"]["tool_search"]
            .as_u64()
            .unwrap_or(0);
        if arm_name == "builtin-only" {
            assert_eq!(discovery, 0, "{id}: {r}");
        } else {
            assert!(discovery >= 1, "{id}: no tool_search counted: {r}");
        }
        assert_eq!(
            r["transcripts"]["total"]["discovery_calls"],
            json!(discovery),
            "{id}: {r}"
        );
        assert_eq!(
            r["transcripts"]["total"]["work_calls"],
            json!(2),
            "{id}: {r}"
        );
        assert!(interfaces["other"].is_null(), "{id}: {r}");
        assert_eq!(r["transcripts"]["inputs"]["malformed_lines"], 0);

        // The trial's stdout is the `--json` event stream: read alone it gives the same work
        // calls (it shows no discovery); read beside the session file of its thread, each call
        // is counted once.
        let agent_out = out.join("trials").join(&id).join("agent.out");
        let by_tool = |files: &[&Path]| -> Value {
            let mut args: Vec<&OsStr> = vec![OsStr::new("report"), OsStr::new("--transcripts")];
            args.extend(files.iter().map(|f| f.as_os_str()));
            args.extend([OsStr::new("--format"), OsStr::new("json")]);
            let o = filesystem(&user_home, &args);
            serde_json::from_slice(&o.stdout).expect("the report is JSON")
        };
        let stream = by_tool(&[&agent_out]);
        let both = by_tool(&[&sessions[0], &agent_out]);
        for (interface, tools) in expected.as_object().expect("an object") {
            for r in [&stream, &both] {
                assert_eq!(
                    &r["transcripts"]["total"]["interfaces"][interface]["by_tool"], tools,
                    "{id}: {r}"
                );
            }
        }
        for class in ["other", "discovery"] {
            assert!(
                stream["transcripts"]["total"]["interfaces"][class].is_null(),
                "{stream}"
            );
        }
        assert_eq!(
            both["transcripts"]["inputs"]["duplicate_tool_uses"], 2,
            "{both}"
        );
        assert_eq!(both["transcripts"]["sessions"], 1, "{both}");
    }
}

/// A model Codex has no metadata for, as a local model is: the server's tools are offered with
/// their schemas from the first request (no `tool_search`, no `apply_patch`). The study names
/// only `{codex_config}` (in a variable of its own) and no `CODEX_HOME`: the runner sets it.
#[test]
fn a_local_model_is_offered_the_namespace_up_front_and_the_runner_sets_codex_home() {
    const LOCAL: &str = "local-scripted-model";
    let arms = ["filesystem", "builtin-only"];
    let log = std::fs::read_to_string(fixture(&format!("study/tasks/{TASK}/workspace/app.log")))
        .expect("read app.log");
    let summary = summary(&log);
    let model = ScriptedModel::start(scripts(&summary, &arms, BuiltinWrite::Shell))
        .expect("start the scripted model");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().canonicalize().expect("canonical");
    let (command, env) = agent(&model.openai_base_url(), LOCAL);
    assert!(env.contains_key("CODEX_HOME"));
    let env = BTreeMap::from([(
        "STUDY_CODEX_CONFIG".to_string(),
        "{codex_config}".to_string(),
    )]);
    let study = write_study(&dir, &command, &env, &arms);
    let user_home = dir.join("user-home");
    let out = dir.join("run");
    filesystem(
        &user_home,
        &[
            OsStr::new("study"),
            OsStr::new("run"),
            study.as_os_str(),
            OsStr::new("--out"),
            out.as_os_str(),
        ],
    );

    let records = model.records();
    for r in &records {
        assert!(r.diverged.is_none(), "a trial left the script: {r:?}");
    }
    for arm_name in arms {
        let first = records
            .iter()
            .find(|r| r.kind == Kind::Turn && r.script.as_deref() == Some(arm_name))
            .unwrap_or_else(|| panic!("no turn of arm {arm_name}"));
        assert!(!first
            .offered
            .iter()
            .any(|o| o.name == "tool_search" || o.name == "apply_patch"));
        let offered = |tool: &str| {
            first
                .offered
                .iter()
                .any(|o| o.name == tool && o.namespace.as_deref() == Some("mcp__filesystem"))
        };
        assert_eq!(
            offered("read_text_file") && offered("write_file"),
            arm_name == "filesystem",
            "{arm_name}: {:?}",
            first.offered
        );
    }
    let trials = test_support::logs::json_lines(&out.join("trials.jsonl"));
    assert_eq!(trials.len() as u64, TRIALS * arms.len() as u64);
    for t in &trials {
        let id = t["id"].as_str().expect("an id");
        let home = out.join("trials").join(id).join("home/.codex");
        assert_eq!(session_files(&home.join("sessions")).len(), 1, "{id}");
        assert_eq!(t["success"], true, "{id}: {t}");
    }

    let o = filesystem(
        &user_home,
        &[
            OsStr::new("study"),
            OsStr::new("report"),
            out.as_os_str(),
            OsStr::new("--format"),
            OsStr::new("json"),
        ],
    );
    let report: Value = serde_json::from_slice(&o.stdout).expect("the report is JSON");
    let fs_arm = arm(&report, "filesystem");
    assert_eq!(fs_arm["reads_by_interface"], json!({"filesystem": TRIALS}));
    assert_eq!(fs_arm["writes_by_interface"], json!({"filesystem": TRIALS}));
    // No discovery: two calls a trial, the read and the write.
    assert_eq!(fs_arm["calls_per_trial"]["mean"], 2.0, "{fs_arm}");
    // The built-in arm worked through the shell alone, which is never counted as a read or a write.
    let builtin = arm(&report, "builtin-only");
    assert_eq!(builtin["writes_by_interface"], json!({}), "{builtin}");
    assert_eq!(builtin["reads_by_interface"], json!({}), "{builtin}");
    assert_eq!(builtin["calls_per_trial"]["mean"], 2.0, "{builtin}");
    assert_eq!(builtin["success"]["count"], TRIALS);
}
