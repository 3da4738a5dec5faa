#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The stand-in agent of `filesystem study`, run for real: the `study-stand-in` binary on a
//! fresh copy of each example task (fixtures/study/tasks), with an mcpServers file like the
//! runner's that starts the real `filesystem` binary under each arm's arguments. What it did is
//! checked three ways: the server's call log, the task's own verifier, and the real
//! `filesystem report` over its transcript.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use test_support::bin::filesystem;
use test_support::fixtures::fixture;
use test_support::temp::temp_dir;

const TASKS: [&str; 3] = ["fix-script", "summarize-log", "rename-module"];

/// The example study's arms: name and server arguments (`None`: no server).
const ARMS: [(&str, Option<&[&str]>); 5] = [
    (
        "pipe-original",
        Some(&["--legacy-pipe", "--surface", "original"]),
    ),
    (
        "pipe-modern",
        Some(&["--legacy-pipe", "--surface", "modern"]),
    ),
    ("filesystem", Some(&[])),
    ("both", Some(&["--legacy-pipe", "--with-filesystem"])),
    ("builtin-only", None),
];

fn stand_in() -> &'static str {
    env!("CARGO_BIN_EXE_study-stand-in")
}

fn task_dir(task: &str) -> PathBuf {
    fixture("study/tasks").join(task)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// One trial laid out as the runner lays it out: a fresh workspace, mcp.json, the call log, the
/// transcript directory; and the policy file the test writes.
struct Trial {
    _tmp: tempfile::TempDir,
    task: String,
    arm: String,
    dir: PathBuf,
    workspace: PathBuf,
}

impl Trial {
    fn new(task: &str, arm: &str, policy: &str) -> Self {
        let tmp = temp_dir();
        let dir = tmp.path().canonicalize().expect("canonical");
        let workspace = dir.join("workspace");
        copy_tree(&task_dir(task).join("workspace"), &workspace);
        let args = ARMS
            .iter()
            .find(|(name, _)| *name == arm)
            .expect("a known arm")
            .1;
        let servers = match args {
            Some(args) => {
                let mut argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
                argv.extend([
                    "--root".into(),
                    workspace.display().to_string(),
                    "--call-log".into(),
                    dir.join("calls.jsonl").display().to_string(),
                ]);
                json!({"filesystem": {"command": filesystem(), "args": argv, "env": {}}})
            }
            None => json!({}),
        };
        std::fs::write(
            dir.join("mcp.json"),
            json!({ "mcpServers": servers }).to_string(),
        )
        .expect("mcp.json");
        std::fs::write(dir.join("policy.toml"), format!("[arm.{arm}]\n{policy}\n"))
            .expect("policy");
        Trial {
            _tmp: tmp,
            task: task.into(),
            arm: arm.into(),
            dir,
            workspace,
        }
    }

    fn command(&self, seed: u64) -> Command {
        let task = task_dir(&self.task);
        let mut cmd = Command::new(stand_in());
        cmd.current_dir(&self.workspace)
            .arg("--config")
            .arg(self.dir.join("mcp.json"))
            .arg("--workspace")
            .arg(&self.workspace)
            .arg("--prompt")
            .arg(task.join("prompt.md"))
            .arg("--transcript")
            .arg(self.transcript_dir())
            .args(["--arm", &self.arm])
            .arg("--plan")
            .arg(task.join("plan.toml"))
            .arg("--policy")
            .arg(self.dir.join("policy.toml"))
            .args(["--seed", &seed.to_string()])
            .stdin(Stdio::null());
        cmd
    }

    /// Runs the stand-in to its end; its summary (stdout), checked to have exited 0.
    fn run(&self, seed: u64) -> Value {
        let out = self.command(seed).output().expect("run the stand-in");
        assert!(
            out.status.success(),
            "{} {} seed {seed}: {}\n{}",
            self.task,
            self.arm,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("a JSON summary on stdout")
    }

    fn transcript_dir(&self) -> PathBuf {
        self.dir.join("transcript")
    }

    /// Whether the task's verifier passes on the workspace.
    fn verified(&self) -> bool {
        Command::new("sh")
            .arg(task_dir(&self.task).join("verify.sh"))
            .current_dir(&self.workspace)
            .output()
            .expect("run verify.sh")
            .status
            .success()
    }

    /// The tools called through the server, from its call log (none when it was never started
    /// or nothing was called).
    fn logged_tools(&self) -> Vec<String> {
        let Ok(text) = std::fs::read_to_string(self.dir.join("calls.jsonl")) else {
            return Vec::new();
        };
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON call-log line"))
            .filter_map(|v| v["tool"].as_str().map(str::to_string))
            .collect()
    }

    /// `filesystem report --transcripts` on the trial's transcript directory.
    fn report(&self) -> Value {
        let out = Command::new(filesystem())
            .arg("report")
            .arg("--transcripts")
            .arg(self.transcript_dir())
            .args(["--format", "json"])
            .output()
            .expect("run filesystem report");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("report JSON")
    }

    /// The transcript's calls as (name, input), with the workspace path replaced by `WS` so two
    /// workspaces compare equal.
    fn calls(&self) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(self.transcript_dir().join("stand-in.jsonl"))
            .expect("the transcript");
        let ws = self.workspace.display().to_string();
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON transcript line"))
            .filter(|v| v["type"] == "assistant")
            .filter_map(|v| {
                let block = v["message"]["content"].get(0)?.clone();
                (block["type"] == "tool_use").then(|| {
                    (
                        block["name"].as_str().unwrap_or_default().to_string(),
                        block["input"].to_string().replace(&ws, "WS"),
                    )
                })
            })
            .collect()
    }
}

/// The server arms' names.
fn server_arms() -> impl Iterator<Item = &'static str> {
    ARMS.iter().filter(|(_, a)| a.is_some()).map(|(n, _)| *n)
}

fn count(summary: &Value, interface: &str, key: &str) -> u64 {
    summary["interfaces"][interface][key]
        .as_u64()
        .expect("a count")
}

const WRITING_TOOLS: [&str; 3] = ["write_file", "edit_file", "shelpa_write"];

#[test]
fn with_every_step_through_the_server_the_writes_arrive_in_its_call_log_and_the_task_is_done() {
    for task in TASKS {
        for arm in server_arms() {
            let trial = Trial::new(task, arm, "ours_read = 1\nours_write = 1");
            let summary = trial.run(1);
            assert!(trial.verified(), "{task} {arm}: the verifier failed");
            let logged = trial.logged_tools();
            let logged_writes = logged
                .iter()
                .filter(|t| WRITING_TOOLS.contains(&t.as_str()))
                .count() as u64;
            let ours = count(&summary, "pipe", "calls") + count(&summary, "filesystem", "calls");
            let ours_writes =
                count(&summary, "pipe", "writes") + count(&summary, "filesystem", "writes");
            assert!(ours_writes > 0, "{task} {arm}: {summary}");
            assert_eq!(logged.len() as u64, ours, "{task} {arm}: {logged:?}");
            assert_eq!(logged_writes, ours_writes, "{task} {arm}: {logged:?}");
            // Only a rename under the pipe tools alone (shelpa cannot move) is left built-in.
            let builtin = &summary["interfaces"]["builtin"]["by_tool"];
            let expected_builtin = if task == "rename-module" && arm.starts_with("pipe-") {
                json!({"Bash": 1})
            } else {
                json!({})
            };
            assert_eq!(builtin, &expected_builtin, "{task} {arm}");
        }
    }
}

#[test]
fn with_nothing_through_the_server_no_call_reaches_it_and_the_files_are_still_right() {
    for task in TASKS {
        for (arm, _) in ARMS {
            let trial = Trial::new(task, arm, "ours_read = 0\nours_write = 0\nerror = 1");
            let summary = trial.run(2);
            assert!(trial.verified(), "{task} {arm}: the verifier failed");
            assert_eq!(trial.logged_tools(), Vec::<String>::new(), "{task} {arm}");
            assert_eq!(count(&summary, "pipe", "calls"), 0);
            assert_eq!(count(&summary, "filesystem", "calls"), 0);
            assert!(count(&summary, "builtin", "writes") > 0, "{task} {arm}");
        }
    }
}

#[test]
fn the_untouched_workspace_fails_every_verifier() {
    for task in TASKS {
        let trial = Trial::new(task, "builtin-only", "");
        assert!(
            !trial.verified(),
            "{task}: the verifier passes before any work"
        );
    }
}

#[test]
fn giving_up_at_any_step_leaves_every_task_undone() {
    for task in TASKS {
        for arm in ["builtin-only", "filesystem"] {
            let mut stops_seen = std::collections::BTreeSet::new();
            let mut steps = None;
            // The stop is drawn uniformly over the steps; seeds are tried until every stop
            // point has been seen (a plan has at most six steps here).
            for seed in 0..200u64 {
                let trial = Trial::new(task, arm, "ours_read = 0.5\nours_write = 0.5\nfail = 1");
                let summary = trial.run(seed);
                assert_eq!(summary["gave_up"], true, "{task} {arm} seed {seed}");
                let done = summary["steps_done"].as_u64().expect("steps_done");
                let total = summary["steps"].as_u64().expect("steps");
                assert!(done < total, "{task} {arm}: gave up after the last step");
                assert!(
                    !trial.verified(),
                    "{task} {arm}: the verifier passes after {done} of {total} steps"
                );
                stops_seen.insert(done);
                steps = Some(total);
                if stops_seen.len() as u64 == total {
                    break;
                }
            }
            assert_eq!(Some(stops_seen.len() as u64), steps, "{task} {arm}");
        }
    }
}

#[test]
fn the_report_counts_exactly_what_the_stand_in_did() {
    let policy = "ours_read = 0.5\nours_write = 0.5\npipe = 0.5\nerror = 0.5";
    let mut totals = [0u64; 3];
    for task in TASKS {
        for (arm, _) in ARMS {
            for seed in [3u64, 4] {
                let trial = Trial::new(task, arm, policy);
                let summary = trial.run(seed);
                assert!(trial.verified(), "{task} {arm} seed {seed}");
                let report = trial.report();
                let reported = &report["transcripts"]["total"]["interfaces"];
                for (i, interface) in ["builtin", "pipe", "filesystem"].into_iter().enumerate() {
                    let did = &summary["interfaces"][interface];
                    let calls = did["calls"].as_u64().expect("calls");
                    totals[i] += calls;
                    if calls == 0 {
                        assert!(
                            reported[interface]["calls"].as_u64().unwrap_or(0) == 0,
                            "{task} {arm} {interface}"
                        );
                        continue;
                    }
                    for key in [
                        "calls",
                        "writes",
                        "errors",
                        "retried_after_error",
                        "by_tool",
                    ] {
                        assert_eq!(
                            reported[interface][key], did[key],
                            "{task} {arm} seed {seed} {interface} {key}"
                        );
                    }
                }
                let inputs = &report["transcripts"]["inputs"];
                assert_eq!(inputs["malformed_lines"], 0);
                assert_eq!(inputs["results_without_call"], 0);
                assert_eq!(inputs["duplicate_tool_uses"], 0);
            }
        }
    }
    // The mixed policy really mixed: every interface was used somewhere.
    assert!(totals.iter().all(|&n| n > 0), "{totals:?}");
}

#[test]
fn an_error_on_every_call_shows_as_an_error_then_a_retry_for_each_call_but_moves() {
    for task in TASKS {
        for arm in server_arms() {
            let trial = Trial::new(task, arm, "ours_read = 1\nours_write = 1\nerror = 1");
            let summary = trial.run(5);
            assert!(trial.verified(), "{task} {arm}");
            let report = trial.report();
            for interface in ["pipe", "filesystem"] {
                let calls = count(&summary, interface, "calls");
                if calls == 0 {
                    continue;
                }
                let moves = summary["interfaces"][interface]["by_tool"]["move_file"]
                    .as_u64()
                    .unwrap_or(0);
                let reported = &report["transcripts"]["total"]["interfaces"][interface];
                let errors = reported["errors"].as_u64().expect("errors");
                // Each call but a move is a wrong call and its retry.
                assert_eq!(errors * 2 + moves, calls, "{task} {arm} {interface}");
                assert!(errors > 0);
                assert_eq!(reported["retried_after_error"], json!(errors));
            }
            // The server saw the wrong calls too, each refused.
            let log = std::fs::read_to_string(trial.dir.join("calls.jsonl")).expect("call log");
            let refused = log
                .lines()
                .filter(|l| serde_json::from_str::<Value>(l).expect("json")["outcome"] == "error")
                .count() as u64;
            let errors =
                count(&summary, "pipe", "errors") + count(&summary, "filesystem", "errors");
            assert_eq!(refused, errors, "{task} {arm}");
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_calls_and_another_seed_other_calls() {
    let policy = "ours_read = 0.5\nours_write = 0.5\npipe = 0.5\nerror = 0.3";
    let calls = |seed| {
        let trial = Trial::new("rename-module", "both", policy);
        trial.run(seed);
        trial.calls()
    };
    let first = calls(11);
    assert!(!first.is_empty());
    assert_eq!(first, calls(11));
    // Six steps with two draws each: another seed choosing exactly the same is unlikely, and
    // among three other seeds practically impossible.
    assert!([12, 13, 14].into_iter().any(|s| calls(s) != first));
}

#[test]
fn a_drawn_hang_keeps_it_running_until_it_is_killed() {
    let trial = Trial::new("summarize-log", "filesystem", "ours_read = 1\nhang = 1");
    let mut child = trial
        .command(1)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the stand-in exited although the policy drew a hang"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The whole group, as the runner does: the server it started dies with it.
    let pid = i32::try_from(child.id()).expect("pid");
    assert_eq!(unsafe { libc::kill(-pid, libc::SIGKILL) }, 0);
    let out = child.wait_with_output().expect("wait");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("hanging before step"));
    assert!(!trial.verified());
}

/// The stand-in's command line for `trial` with the value of `option` replaced, run to its end.
fn run_with(trial: &Trial, option: &str, value: &std::ffi::OsStr) -> Output {
    let mut args: Vec<std::ffi::OsString> = trial.command(1).get_args().map(Into::into).collect();
    let at = args.iter().position(|a| a == option).expect("the option") + 1;
    args[at] = value.into();
    Command::new(stand_in())
        .args(&args)
        .output()
        .expect("run the stand-in")
}

#[test]
fn bad_inputs_are_refused_with_what_to_do() {
    let trial = Trial::new("summarize-log", "filesystem", "ours_read = 1");
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();

    let out = trial
        .command(1)
        .args(["--seed", "2"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--seed is given twice"),
        "{}",
        stderr(&out)
    );

    let out = run_with(&trial, "--seed", "-1".as_ref());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a whole number"),
        "{}",
        stderr(&out)
    );

    let policy = trial.dir.join("other-policy.toml");
    std::fs::write(&policy, "[arm.elsewhere]\nfail = 0.5\n").expect("write");
    let out = run_with(&trial, "--policy", policy.as_os_str());
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("has no [arm.filesystem]") && err.contains("elsewhere"),
        "{err}"
    );

    let plan = trial.dir.join("escape.toml");
    std::fs::write(&plan, "[[step]]\nread = \"../calls.jsonl\"\n").expect("write");
    let out = run_with(&trial, "--plan", plan.as_os_str());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("must be relative to the workspace"),
        "{}",
        stderr(&out)
    );
    assert!(trial.logged_tools().is_empty(), "nothing ran");
}
