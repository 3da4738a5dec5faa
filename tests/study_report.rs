#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem study report` through the real binary, on run directories laid out by hand the
//! way `filesystem study run` lays them out: trial records, each trial's `mcp.json`, transcripts
//! in Claude Code's JSONL shape, and call logs written by really serving calls.

use std::io::Write;
use std::path::Path;
use std::process::Output;

use proptest::prelude::*;
use serde_json::{json, Value};
use study::record::{End, ProcessEnd, TrialPaths, TrialRecord, STUDY_FILE, TRIALS_FILE};
use test_support::bin::command;
use test_support::mcp::Client;
use test_support::study::{arm, comparison};
use test_support::temp::temp_dir;

/// One tool call of a transcript: the name as Claude Code spells it, its input, and its result
/// (`None`: the transcript ends before the result).
struct Use {
    name: &'static str,
    input: Value,
    error: Option<bool>,
}

fn ok(name: &'static str, input: Value) -> Use {
    Use {
        name,
        input,
        error: Some(false),
    }
}

fn failed(name: &'static str, input: Value) -> Use {
    Use {
        name,
        input,
        error: Some(true),
    }
}

/// A trial to lay out.
struct Trial<'a> {
    rep: u32,
    task: &'a str,
    arm: &'a str,
    success: bool,
    end: End,
    /// `mcpServers` keys of its configuration (`None`: no mcp.json at all).
    servers: Option<&'a [&'a str]>,
    /// Its transcript (`None`: the agent left none).
    transcript: Option<Vec<Use>>,
}

/// A run directory under construction.
struct RunDir {
    tmp: tempfile::TempDir,
    order: u32,
}

impl RunDir {
    fn new(study_toml: Option<&str>) -> RunDir {
        let tmp = temp_dir();
        if let Some(text) = study_toml {
            std::fs::write(tmp.path().join(STUDY_FILE), text).expect("study.toml");
        }
        std::fs::write(tmp.path().join(TRIALS_FILE), "").expect("trials.jsonl");
        RunDir { tmp, order: 0 }
    }

    fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Lays out one trial and appends its record; returns its paths.
    fn add(&mut self, t: Trial) -> TrialPaths {
        let id = format!("{:03}-{}-{}", t.rep, t.task, t.arm);
        let paths = TrialPaths::new(self.path(), &id);
        std::fs::create_dir_all(&paths.workspace).expect("workspace");
        if let Some(servers) = t.servers {
            let config: serde_json::Map<String, Value> = servers
                .iter()
                .map(|s| {
                    (
                        s.to_string(),
                        json!({"command": "/bin/filesystem", "args": [], "env": {}}),
                    )
                })
                .collect();
            std::fs::write(
                &paths.mcp_config,
                json!({ "mcpServers": config }).to_string(),
            )
            .expect("mcp.json");
        }
        std::fs::create_dir_all(&paths.transcript_dir).expect("transcript dir");
        if let Some(uses) = &t.transcript {
            write_transcript(&paths.transcript_dir.join("stand-in.jsonl"), &id, uses);
        }
        let agent_code = match t.end {
            End::Exited => Some(0),
            _ => None,
        };
        let record = TrialRecord {
            id: id.clone(),
            task: t.task.into(),
            arm: t.arm.into(),
            harness: String::new(),
            offered: None,
            rep: t.rep,
            seed: 7,
            order: self.order,
            started: "2026-12-01T13:00:00Z".into(),
            agent: ProcessEnd {
                end: t.end,
                code: agent_code,
                signal: (t.end == End::Signaled).then_some(11),
                secs: 1.5,
                error: (t.end == End::FailedToStart).then(|| "no such file".to_string()),
            },
            verify: ProcessEnd {
                end: End::Exited,
                code: Some(if t.success { 0 } else { 1 }),
                signal: None,
                secs: 0.01,
                error: None,
            },
            success: t.success,
        };
        self.order += 1;
        self.append_line(&serde_json::to_string(&record).expect("record"));
        paths
    }

    fn append_line(&self, line: &str) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.path().join(TRIALS_FILE))
            .expect("open trials.jsonl");
        writeln!(f, "{line}").expect("append");
    }

    fn report(&self, args: &[&str]) -> Output {
        command()
            .args(["study", "report"])
            .arg(self.path())
            .args(args)
            .output()
            .expect("run filesystem study report")
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        let out = self.report(&all);
        serde_json::from_slice(&stdout_of(&out)).expect("one JSON document")
    }
}

fn stdout_of(out: &Output) -> Vec<u8> {
    assert!(
        out.status.success(),
        "study report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout.clone()
}

/// Writes a transcript the way Claude Code does (and crates/report's fixtures hold): the prompt,
/// then per call an assistant line with a `tool_use` block and a user line with its
/// `tool_result`.
fn write_transcript(path: &Path, session: &str, uses: &[Use]) {
    let mut lines = Vec::new();
    let envelope = |kind: &str, n: usize, message: Value| {
        json!({
            "parentUuid": null, "isSidechain": false, "userType": "external",
            "cwd": "/work", "sessionId": session, "version": "2.1.0",
            "type": kind, "message": message,
            "uuid": format!("u-{n:04}"),
            "timestamp": format!("2026-12-01T13:00:{:02}.000Z", n % 60),
        })
    };
    lines.push(envelope(
        "user",
        0,
        json!({"role": "user", "content": "Do the task."}),
    ));
    for (i, u) in uses.iter().enumerate() {
        let id = format!("toolu_{i}");
        lines.push(envelope(
            "assistant",
            2 * i + 1,
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": u.name, "input": u.input}
            ]}),
        ));
        if let Some(error) = u.error {
            lines.push(envelope(
                "user",
                2 * i + 2,
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id, "is_error": error,
                     "content": if error { "NotFound: no such file" } else { "done" }}
                ]}),
            ));
        }
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("transcript");
}

/// Serves `commands` through the real server in pipe mode with `--call-log`, so the trial's
/// call log is the one the server writes.
fn serve_pipe_calls(paths: &TrialPaths, commands: &[&str]) {
    std::fs::write(
        paths.workspace.join("app.log"),
        "INFO start\nERROR disk\nERROR net\n",
    )
    .expect("fixture");
    let log = paths.call_log.to_str().expect("utf-8 path");
    let mut client = Client::start(&paths.workspace, &["--legacy-pipe", "--call-log", log]);
    for c in commands {
        let reply = client.call("shelpa_pipe", json!({ "command": c }));
        assert!(reply.ok, "{c}: {}", reply.text);
    }
    client.close();
    assert!(paths.call_log.is_file(), "the server wrote its call log");
}

const STUDY: &str = r#"
[study]
name = "test"
seed = 1
trials = 4
baseline = "filesystem"

[agent]
command = ["agent"]

[[task]]
name = "fix"
dir = "tasks/fix"
fixture = "workspace"
prompt = "prompt.md"
verify = ["true"]
time_limit = 5

[[arm]]
name = "filesystem"
args = []

[[arm]]
name = "pipe"
args = ["--legacy-pipe"]
server_name = "shelpa"

[[arm]]
name = "builtin-only"
server = false

[[arm]]
name = "never-run"
args = []
"#;

const FS: &[&str] = &["filesystem"];
const SHELPA: &[&str] = &["shelpa"];
const NONE: &[&str] = &[];

/// The run most tests read: three arms with known numbers, and one arm of the study that has
/// no finished trial.
fn example_run() -> RunDir {
    let mut run = RunDir::new(Some(STUDY));
    // filesystem: 4 trials, 3 successes, one timeout; one trial without a transcript.
    run.add(Trial {
        rep: 0,
        task: "fix",
        arm: "filesystem",
        success: true,
        end: End::Exited,
        servers: Some(FS),
        transcript: Some(vec![
            ok("mcp__filesystem__read_text_file", json!({"path": "a"})),
            ok(
                "mcp__filesystem__write_file",
                json!({"path": "a", "content": "x"}),
            ),
            ok(
                "mcp__filesystem__write_file",
                json!({"path": "b", "content": "y"}),
            ),
            ok("Write", json!({"file_path": "/w/c", "content": "z"})),
            ok("Read", json!({"file_path": "/w/c"})),
            ok("TodoWrite", json!({"todos": []})),
        ]),
    });
    run.add(Trial {
        rep: 1,
        task: "fix",
        arm: "filesystem",
        success: true,
        end: End::Exited,
        servers: Some(FS),
        transcript: Some(vec![
            failed(
                "mcp__filesystem__edit_file",
                json!({"path": "a", "edits": []}),
            ),
            ok(
                "mcp__filesystem__edit_file",
                json!({"path": "a", "edits": [1]}),
            ),
        ]),
    });
    run.add(Trial {
        rep: 2,
        task: "fix",
        arm: "filesystem",
        success: true,
        end: End::Exited,
        servers: Some(FS),
        transcript: None,
    });
    run.add(Trial {
        rep: 3,
        task: "fix",
        arm: "filesystem",
        success: false,
        end: End::KilledAtLimit,
        servers: Some(FS),
        transcript: Some(vec![Use {
            name: "mcp__filesystem__read_text_file",
            input: json!({"path": "big"}),
            error: None,
        }]),
    });
    // pipe: 2 trials, 1 success; reads and a write through shelpa; its call logs are real.
    let p = run.add(Trial {
        rep: 0,
        task: "fix",
        arm: "pipe",
        success: true,
        end: End::Exited,
        servers: Some(SHELPA),
        transcript: Some(vec![
            ok(
                "mcp__shelpa__shelpa_pipe",
                json!({"command": "head -n 5 app.log | rg ERROR | sort"}),
            ),
            ok(
                "mcp__shelpa__shelpa_pipe",
                json!({"command": "rg -c ERROR app.log"}),
            ),
            ok(
                "mcp__shelpa__shelpa_write",
                json!({"path": "out.txt", "content": "2"}),
            ),
            ok(
                "Edit",
                json!({"file_path": "/w/x", "old_string": "a", "new_string": "b"}),
            ),
        ]),
    });
    serve_pipe_calls(
        &p,
        &["head -n 5 app.log | rg ERROR | sort", "rg -c ERROR app.log"],
    );
    let p = run.add(Trial {
        rep: 1,
        task: "fix",
        arm: "pipe",
        success: false,
        end: End::Exited,
        servers: Some(SHELPA),
        transcript: Some(vec![ok(
            "mcp__shelpa__shelpa_pipe",
            json!({"command": "ls"}),
        )]),
    });
    serve_pipe_calls(&p, &["rg ERROR app.log"]);
    // builtin-only: no server; a stray tool named like ours is not this project's.
    run.add(Trial {
        rep: 0,
        task: "fix",
        arm: "builtin-only",
        success: false,
        end: End::Signaled,
        servers: Some(NONE),
        transcript: Some(vec![
            ok("Write", json!({"file_path": "/w/a", "content": "x"})),
            ok(
                "mcp__filesystem__write_file",
                json!({"path": "a", "content": "x"}),
            ),
            ok("Read", json!({"file_path": "/w/a"})),
        ]),
    });
    run.add(Trial {
        rep: 1,
        task: "fix",
        arm: "builtin-only",
        success: false,
        end: End::Exited,
        servers: Some(NONE),
        transcript: Some(vec![ok("Edit", json!({"file_path": "/w/a"}))]),
    });
    run
}

#[track_caller]
fn assert_close(v: &Value, want: f64) {
    let got = v.as_f64().unwrap_or_else(|| panic!("a number, got {v}"));
    assert!((got - want).abs() < 1e-4, "got {got}, want {want}");
}

#[track_caller]
fn assert_rate(r: &Value, count: u64, total: u64) {
    assert_eq!(
        (r["count"].as_u64(), r["total"].as_u64()),
        (Some(count), Some(total)),
        "{r}"
    );
}

#[test]
fn json_counts_rates_intervals_and_comparisons() {
    let run = example_run();
    let report = run.json(&[]);
    assert_eq!(report["baseline"], "filesystem");
    let names: Vec<&str> = report["arms"]
        .as_array()
        .expect("arms")
        .iter()
        .filter_map(|a| a["arm"].as_str())
        .collect();
    assert_eq!(names, ["filesystem", "pipe", "builtin-only", "never-run"]);
    assert_eq!(report["inputs"]["records"], 8);
    assert_eq!(report["inputs"]["trials_without_transcript"], 1);

    let fs = arm(&report, "filesystem");
    assert_eq!(fs["trials"], 4);
    assert_eq!(fs["trials_with_transcript"], 3);
    assert_rate(&fs["success"], 3, 4);
    // Wilson 3/4: 0.3006 to 0.9544.
    assert_close(&fs["success"]["low"], 0.3006);
    assert_close(&fs["success"]["high"], 0.9544);
    assert_rate(&fs["timeouts"], 1, 4);
    assert_rate(&fs["crashes"], 0, 4);
    // Writes: 2 write_file + 1 edit_file ours (the failed edit_file and its retry are one
    // choice), 1 built-in Write.
    assert_rate(&fs["write_adoption"], 3, 4);
    assert_eq!(
        fs["writes_by_interface"],
        json!({"builtin": 1, "filesystem": 3})
    );
    // Reads: 2 read_text_file (one without a result) ours, 1 built-in Read.
    assert_rate(&fs["read_adoption"], 2, 3);
    // Calls: 6, 2 and 1 in the three trials with a transcript.
    assert_eq!(fs["calls_per_trial"]["n"], 3);
    assert_close(&fs["calls_per_trial"]["mean"], 3.0);
    // sd = √7; t(0.975, 2) = 4.3027; half-width 4.3027·√7/√3 = 6.5724.
    // The lower end is cut at 0: a count is never negative.
    assert_close(&fs["calls_per_trial"]["low"], 0.0);
    assert_close(&fs["calls_per_trial"]["high"], 3.0 + 6.5724);
    // 1 failed of the 8 calls with a result; it was retried.
    assert_rate(&fs["error_rate"], 1, 8);
    assert_rate(&fs["retry_after_error"], 1, 1);
    assert_eq!(fs["pipe"]["pipe_calls"], 0);

    let pipe = arm(&report, "pipe");
    assert_eq!(pipe["server_names"], json!(["shelpa"]));
    assert_rate(&pipe["success"], 1, 2);
    assert_rate(&pipe["write_adoption"], 1, 2);
    // Two reading pipelines are reads; `ls` alone is navigation.
    assert_rate(&pipe["read_adoption"], 2, 2);
    assert_eq!(pipe["pipe"]["trials_with_call_log"], 2);
    assert_eq!(pipe["pipe"]["pipe_calls"], 3);
    assert_eq!(pipe["pipe"]["stages"], 5);
    assert_close(&pipe["pipe"]["mean_stages"], 5.0 / 3.0);
    assert_eq!(
        pipe["pipe"]["top_commands"],
        json!([{"command": "rg", "count": 3}, {"command": "head", "count": 1}, {"command": "sort", "count": 1}])
    );

    let builtin = arm(&report, "builtin-only");
    assert_eq!(builtin["server_names"], json!([]));
    assert_rate(&builtin["write_adoption"], 0, 2);
    assert_eq!(builtin["writes_by_interface"], json!({"builtin": 2}));
    assert_rate(&builtin["read_adoption"], 0, 1);
    assert_rate(&builtin["crashes"], 1, 2);
    assert_eq!(builtin["pipe"]["trials_with_call_log"], 0);

    let never = arm(&report, "never-run");
    assert_eq!(never["trials"], 0);
    assert!(never["success"]["value"].is_null() && never["success"]["low"].is_null());

    // builtin-only against filesystem: success 0/2 vs 3/4. Fisher on [[0,2],[3,1]]: the
    // tables with these margins have probabilities 0.2, 0.6, 0.2, so p = 0.4.
    let c = comparison(&report, "builtin-only");
    assert_eq!(c["baseline"], "filesystem");
    assert_close(&c["success"]["diff"], -0.75);
    assert_close(&c["success"]["p_value"], 0.4);
    let (lo, hi) = (
        c["success"]["low"].as_f64().expect("low"),
        c["success"]["high"].as_f64().expect("high"),
    );
    assert!(
        (-1.0..-0.75).contains(&lo) && (-0.75..=1.0).contains(&hi) && hi > -0.75,
        "{lo} {hi}"
    );
    assert_close(&c["write_adoption"]["diff"], -0.75);
    // An arm without trials cannot be compared: null, not a made-up number.
    assert!(comparison(&report, "never-run")["success"].is_null());
    assert_eq!(report["comparisons"].as_array().map(Vec::len), Some(3));
}

#[test]
fn text_has_aligned_tables_and_says_where_calls_come_from() {
    let run = example_run();
    let text = String::from_utf8(stdout_of(&run.report(&[]))).expect("utf-8");
    assert!(
        text.contains("8 trial record(s) in 4 arm(s); baseline arm: filesystem"),
        "{text}"
    );
    assert!(
        text.contains(
            "come from the 7 trial(s) with a transcript; the 1 without one count in success"
        ),
        "{text}"
    );
    assert!(text.contains("75.0% [30.1, 95.4] 3/4"), "{text}");
    // Success and write adoption of `filesystem` are both 3 of 4.
    assert_eq!(text.matches("75.0% [30.1, 95.4] 3/4").count(), 2, "{text}");
    assert!(
        text.contains("- 0/0"),
        "an arm without trials shows no rate: {text}"
    );
    assert!(text.contains("rg 3, head 1, sort 1"), "{text}");
    // In the trials table every row ends where the header ends (right-aligned last column).
    let table: Vec<&str> = text
        .split("== trials\n")
        .nth(1)
        .expect("trials table")
        .lines()
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 5, "{table:?}");
    let width = table[0].chars().count();
    assert!(
        table.iter().all(|l| l.chars().count() == width),
        "{table:?}"
    );
    assert!(text.contains("builtin-only  success"), "{text}");
    assert!(
        text.contains("0.4000"),
        "the Fisher p of builtin-only's success: {text}"
    );
}

#[test]
fn csv_is_long_format_with_the_fixed_columns() {
    let run = example_run();
    let csv = String::from_utf8(stdout_of(&run.report(&["--format", "csv"]))).expect("utf-8");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("arm,metric,count,total,value,low,high,baseline,diff,diff_low,diff_high,p_value")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 12), "{csv}");
    let row = |arm: &str, metric: &str| {
        rows.iter()
            .find(|r| r[0] == arm && r[1] == metric)
            .unwrap_or_else(|| panic!("{arm},{metric} in {csv}"))
    };
    let s = row("filesystem", "success");
    assert_eq!(&s[2..5], ["3", "4", "0.750000"]);
    assert_eq!(s[7], "", "the baseline is not compared with itself");
    let s = row("builtin-only", "success");
    assert_eq!(&s[2..5], ["0", "2", "0.000000"]);
    assert_eq!(s[7], "filesystem");
    assert_eq!(s[8], "-0.750000");
    assert_eq!(s[11], "0.400000");
    let t = row("filesystem", "timeouts");
    assert_eq!(&t[2..4], ["1", "4"]);
    assert_eq!(t[8], "", "only success and adoption are compared");
    let n = row("never-run", "success");
    assert_eq!(
        &n[2..],
        ["0", "0", "", "", "", "filesystem", "", "", "", ""]
    );
    assert_eq!(&row("pipe", "pipe_stages")[2..5], ["5", "3", "1.666667"]);
    assert_eq!(&row("pipe", "pipe_command:rg")[2..4], ["3", "5"]);
    assert_eq!(&row("builtin-only", "writes:builtin")[2..4], ["2", "2"]);
}

#[test]
fn svg_draws_every_arm_with_labelled_axes_and_legend() {
    let run = example_run();
    let svg_path = run.path().join("chart.svg");
    let out = run.report(&["--svg", svg_path.to_str().expect("utf-8")]);
    stdout_of(&out);
    let svg = std::fs::read_to_string(&svg_path).expect("the chart was written");
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    for needle in [
        "filesystem",
        "pipe",
        "builtin-only",
        "never-run",
        "write adoption",
        "read adoption",
        "task success rate",
        "% (of writes, reads or trials)",
    ] {
        assert!(svg.contains(needle), "{needle} missing from the chart");
    }
    // The x axis is labelled, and each arm names its slot (plotters puts a text on a line of
    // its own).
    let texts: Vec<&str> = svg.lines().map(str::trim).collect();
    for label in ["arm", "filesystem", "pipe", "builtin-only", "never-run"] {
        assert!(texts.contains(&label), "no text '{label}' in the chart");
    }
    // A point (circle) per rate that has one: filesystem 3, pipe 3, builtin-only 3, never-run
    // none; plus the three legend markers.
    assert_eq!(svg.matches("<circle").count(), 12, "{svg}");

    let bad = run.report(&["--svg", "/nonexistent-dir/x.svg"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("choose a writable --svg path"));
}

#[test]
fn the_baseline_is_chosen_by_flag_study_file_or_first_arm() {
    let run = example_run();
    let report = run.json(&["--baseline", "pipe"]);
    assert_eq!(report["baseline"], "pipe");
    assert_eq!(comparison(&report, "filesystem")["baseline"], "pipe");

    let out = run.report(&["--baseline", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("there is no arm 'nope'")
            && err.contains("filesystem, pipe, builtin-only, never-run"),
        "{err}"
    );

    // Without a study file, the first arm recorded is the baseline.
    let mut bare = RunDir::new(None);
    for (rep, arm) in [(0, "b"), (0, "a")] {
        bare.add(Trial {
            rep,
            task: "t",
            arm,
            success: true,
            end: End::Exited,
            servers: Some(FS),
            transcript: None,
        });
    }
    assert_eq!(bare.json(&[])["baseline"], "b");
}

#[test]
fn bad_directories_and_records_get_clear_errors() {
    let missing = command()
        .args(["study", "report", "/nonexistent/run"])
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("is not a directory"));

    let empty_dir = temp_dir();
    let out = command()
        .args(["study", "report"])
        .arg(empty_dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("trials.jsonl") && err.contains("--out directory"),
        "{err}"
    );

    let run = RunDir::new(Some(STUDY));
    let out = run.report(&[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no trial record") && err.contains("--resume"),
        "{err}"
    );

    let broken = RunDir::new(Some("[study\nbaseline = "));
    broken.append_line("{}");
    let out = broken.report(&[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("study file"),
        "{out:?}"
    );
}

#[test]
fn corrupt_lines_are_skipped_counted_and_warned() {
    let mut run = RunDir::new(Some(STUDY));
    run.append_line("{not json");
    run.add(Trial {
        rep: 0,
        task: "fix",
        arm: "filesystem",
        success: true,
        end: End::Exited,
        servers: Some(FS),
        transcript: Some(vec![ok(
            "mcp__filesystem__write_file",
            json!({"path": "a"}),
        )]),
    });
    run.append_line(r#"{"id":"../escape","task":"t","arm":"filesystem","rep":0,"seed":1,"order":0,"started":"","agent":{"end":"exited","code":0,"signal":null,"secs":1},"verify":{"end":"exited","code":0,"signal":null,"secs":1},"success":true}"#);
    run.append_line(&"x".repeat(100_000));
    // A trial recorded twice counts once.
    let first = std::fs::read_to_string(run.path().join(TRIALS_FILE))
        .expect("read")
        .lines()
        .nth(1)
        .expect("the record")
        .to_string();
    run.append_line(&first);
    let out = run.report(&["--format", "json"]);
    let report: Value = serde_json::from_slice(&stdout_of(&out)).expect("json");
    assert_eq!(report["inputs"]["corrupt_lines"], 3);
    assert_eq!(report["inputs"]["records"], 1);
    assert_eq!(report["inputs"]["duplicate_records"], 1);
    assert_rate(&arm(&report, "filesystem")["write_adoption"], 1, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":1: not a trial record"), "{err}");
    assert!(err.contains("cannot name a trial directory"), "{err}");
    assert!(err.contains("longer than"), "{err}");
    assert!(err.contains("is recorded again"), "{err}");
    let text = String::from_utf8(stdout_of(&run.report(&[]))).expect("utf-8");
    assert!(
        text.contains("skipped: 3 corrupt line(s) of trials.jsonl"),
        "{text}"
    );
}

/// The numbers of ours and built-in writes and reads one generated trial makes.
#[derive(Clone, Debug)]
struct Made {
    ours_writes: usize,
    builtin_writes: usize,
    ours_reads: usize,
    builtin_reads: usize,
}

fn made() -> impl Strategy<Value = Made> {
    (0..4usize, 0..4usize, 0..4usize, 0..4usize).prop_map(|(a, b, c, d)| Made {
        ours_writes: a,
        builtin_writes: b,
        ours_reads: c,
        builtin_reads: d,
    })
}

fn uses_of(m: &Made, server_tool: fn(&str) -> &'static str) -> Vec<Use> {
    let mut uses = Vec::new();
    for i in 0..m.ours_writes {
        uses.push(ok(
            server_tool("write"),
            json!({"path": format!("w{i}"), "content": "x"}),
        ));
    }
    for i in 0..m.builtin_writes {
        uses.push(ok(
            "Write",
            json!({"file_path": format!("/w/b{i}"), "content": "x"}),
        ));
    }
    for i in 0..m.ours_reads {
        uses.push(ok(server_tool("read"), json!({"path": format!("r{i}")})));
    }
    for i in 0..m.builtin_reads {
        uses.push(ok("Read", json!({"file_path": format!("/w/r{i}")})));
    }
    uses
}

fn fs_tool(kind: &str) -> &'static str {
    if kind == "write" {
        "mcp__filesystem__write_file"
    } else {
        "mcp__filesystem__read_text_file"
    }
}

fn pipe_tool(kind: &str) -> &'static str {
    if kind == "write" {
        "mcp__shelpa__shelpa_write"
    } else {
        "mcp__shelpa__shelpa_pipe"
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// For transcripts with known numbers of ours and built-in writes and reads per arm, the
    /// report's counts are those numbers.
    #[test]
    fn the_report_counts_what_the_transcripts_hold(
        fs_trials in proptest::collection::vec(made(), 1..4),
        pipe_trials in proptest::collection::vec(made(), 1..4),
    ) {
        let mut run = RunDir::new(Some(STUDY));
        for (arm, servers, trials, tool) in [
            ("filesystem", FS, &fs_trials, fs_tool as fn(&str) -> &'static str),
            ("pipe", SHELPA, &pipe_trials, pipe_tool),
        ] {
            for (rep, m) in trials.iter().enumerate() {
                let mut uses = uses_of(m, tool);
                if tool("read") == "mcp__shelpa__shelpa_pipe" {
                    for u in &mut uses {
                        if u.name == "mcp__shelpa__shelpa_pipe" {
                            u.input = json!({"command": "head -n 3 app.log"});
                        }
                    }
                }
                run.add(Trial {
                    rep: rep as u32,
                    task: "fix",
                    arm,
                    success: rep % 2 == 0,
                    end: End::Exited,
                    servers: Some(servers),
                    transcript: Some(uses),
                });
            }
        }
        let report = run.json(&[]);
        for (name, trials) in [("filesystem", &fs_trials), ("pipe", &pipe_trials)] {
            let a = arm(&report, name);
            let sum = |f: fn(&Made) -> usize| trials.iter().map(f).sum::<usize>() as u64;
            let ours_w = sum(|m| m.ours_writes);
            let all_w = ours_w + sum(|m| m.builtin_writes);
            let ours_r = sum(|m| m.ours_reads);
            let all_r = ours_r + sum(|m| m.builtin_reads);
            prop_assert_eq!(a["write_adoption"]["count"].as_u64(), Some(ours_w));
            prop_assert_eq!(a["write_adoption"]["total"].as_u64(), Some(all_w));
            prop_assert_eq!(a["read_adoption"]["count"].as_u64(), Some(ours_r));
            prop_assert_eq!(a["read_adoption"]["total"].as_u64(), Some(all_r));
            prop_assert_eq!(a["trials"].as_u64(), Some(trials.len() as u64));
            prop_assert_eq!(
                a["success"]["count"].as_u64(),
                Some(trials.len().div_ceil(2) as u64)
            );
            let calls = sum(|m| m.ours_writes + m.builtin_writes + m.ours_reads + m.builtin_reads);
            let mean = a["calls_per_trial"]["mean"].as_f64().unwrap_or(-1.0);
            prop_assert!((mean * trials.len() as f64 - calls as f64).abs() < 1e-9);
        }
    }
}
