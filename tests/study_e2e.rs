#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem study run` and `filesystem study report` end to end, with the scripted stand-in
//! agent (`study-stand-in`, found by the runner beside `filesystem`) and the example study's
//! tasks: the report recovers the probabilities the stand-in draws from, a seed replays a study,
//! a hung trial is killed and recorded, `--resume` repeats no trial, and every trial works in a
//! workspace of its own while the fixtures stay untouched.
//!
//! Each test writes a small study of its own into a temporary directory, with copies of the task
//! directories of `fixtures/study/tasks` and a policy file giving the stand-in's probabilities.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use study::report::stats::{newcombe_at, wilson_at};
use test_support::fixtures::fixture;
use test_support::study::{arm, comparison};

/// The stand-in's command line, as in the example study.
const AGENT: &str = r#"command = ["study-stand-in",
           "--config", "{mcp_config}", "--workspace", "{workspace}", "--prompt", "{prompt_file}",
           "--transcript", "{transcript_dir}", "--arm", "{arm}", "--plan", "{task_dir}/plan.toml",
           "--policy", "{study_dir}/stand-in.toml", "--seed", "{seed}", "--session", "{trial}"]"#;

/// A study in a temporary directory: copies of example tasks, a study file and a policy file.
struct Study {
    _tmp: tempfile::TempDir,
    /// The directory (canonical, so paths compare with what the runner prints and writes).
    dir: PathBuf,
}

impl Study {
    /// Writes a study of `tasks` (each with its time limit) and the `arms` (TOML `[[arm]]`
    /// tables), `trials` per task and arm, baseline `filesystem`, and the stand-in's `policy`.
    fn new(seed: u64, trials: u32, tasks: &[(&str, u64)], arms: &str, policy: &str) -> Study {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().canonicalize().expect("canonical");
        let mut text = format!(
            "[study]\nname = \"e2e\"\nseed = {seed}\ntrials = {trials}\nbaseline = \"filesystem\"\n\n\
             [agent]\n{AGENT}\n\n"
        );
        for (task, limit) in tasks {
            copy_tree(
                &fixture(&format!("study/tasks/{task}")),
                &dir.join("tasks").join(task),
            );
            text.push_str(&format!(
                "[[task]]\nname = \"{task}\"\ndir = \"tasks/{task}\"\nfixture = \"workspace\"\n\
                 prompt = \"prompt.md\"\nverify = [\"sh\", \"{{task_dir}}/verify.sh\"]\n\
                 time_limit = {limit}\n\n"
            ));
        }
        text.push_str(arms);
        std::fs::write(dir.join("study.toml"), text).expect("write study.toml");
        std::fs::write(dir.join("stand-in.toml"), policy).expect("write stand-in.toml");
        Study { _tmp: tmp, dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.join("study.toml")
    }

    fn out(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn command(&self, out: &Path, extra: &[&str]) -> Command {
        let mut cmd = Command::new(test_support::filesystem());
        cmd.args(["study", "run"])
            .arg(self.file())
            .arg("--out")
            .arg(out)
            .args(extra)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs the study into `out`; the runner must succeed.
    fn run(&self, out: &Path, extra: &[&str]) -> Output {
        let o = self
            .command(out, extra)
            .output()
            .expect("run filesystem study run");
        assert!(o.status.success(), "study run: {}", stderr(&o));
        o
    }
}

/// Copies a directory tree of regular files and directories (what the example tasks hold).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let kind = entry.file_type().expect("file type");
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            assert!(
                kind.is_file(),
                "{}: only files expected",
                entry.path().display()
            );
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `filesystem study report OUT --format json`.
fn report_json(out: &Path) -> Value {
    let o = Command::new(test_support::filesystem())
        .args(["study", "report"])
        .arg(out)
        .args(["--format", "json"])
        .output()
        .expect("run filesystem study report");
    assert!(o.status.success(), "study report: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("the report is JSON")
}

fn records(out: &Path) -> Vec<Value> {
    test_support::logs::json_lines(&out.join("trials.jsonl"))
}

fn plan(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("plan.json")).expect("plan.json");
    serde_json::from_str(&text).expect("plan.json is JSON")
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} of {v} is a string"))
}

fn count(rate: &Value) -> u64 {
    rate["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("count of {rate}"))
}

fn total(rate: &Value) -> u64 {
    rate["total"]
        .as_u64()
        .unwrap_or_else(|| panic!("total of {rate}"))
}

/// z of a two-sided 99.9% interval.
const Z_999: f64 = 3.2905;

/// Asserts that `truth` lies in the 99.9% Wilson interval of the report's `rate`, and that the
/// report's own 95% interval lies inside that one around its value.
///
/// Why not the report's 95% interval itself: this test checks about a dozen intervals, and at
/// 95% each, one of them misses the truth in roughly every second study by chance alone. At
/// 99.9% each (Bonferroni over the dozen) the whole test fails by chance in about 1 study of
/// 80, while a wrong quantity (a probability the report does not estimate) still misses by far.
fn assert_covers(rate: &Value, truth: f64, what: &str) {
    let (low, high) = wilson_at(count(rate), total(rate), Z_999).expect("a rate of something");
    assert!(
        low <= truth && truth <= high,
        "{what}: the 99.9% interval [{low:.3}, {high:.3}] misses the known {truth} ({rate})"
    );
    let (value, l95, h95) = (f(rate, "value"), f(rate, "low"), f(rate, "high"));
    assert!(
        low <= l95 && l95 <= value && value <= h95 && h95 <= high,
        "{what}: {rate}"
    );
}

/// Asserts that the known difference `truth` (arm − baseline) lies in the 99.9% Newcombe
/// hybrid score interval of the two rates (see [`assert_covers`] for the level), and that the
/// report's 95% interval of the difference lies inside it.
fn assert_diff_covers(arm: &Value, base: &Value, diff: &Value, truth: f64, what: &str) {
    let d = f(arm, "value") - f(base, "value");
    let (low, high) = newcombe_at(count(arm), total(arm), count(base), total(base), Z_999)
        .expect("two rates of something");
    assert!(
        low <= truth && truth <= high,
        "{what}: the 99.9% interval [{low:.3}, {high:.3}] misses the known {truth} ({diff})"
    );
    assert!((f(diff, "diff") - d).abs() < 1e-9, "{what}: {diff}");
    assert!(
        low <= f(diff, "low") && f(diff, "high") <= high,
        "{what}: {diff}"
    );
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} of {v}"))
}

/// The stand-in's summary of a trial (its stdout, kept in `agent.out`).
fn stand_in_summary(out: &Path, id: &str) -> Value {
    let path = out.join("trials").join(id).join("agent.out");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

/// The report recovers what the stand-in was told: success = 1 − fail (nothing hangs here),
/// write adoption = ours_write, read adoption = ours_read.
///
/// Why these are the right quantities: every read step is one draw with `ours_read` and every
/// write or edit step one draw with `ours_write`, independent of each other and of the trial's
/// fate (drawn first); a step the stand-in does not reach is simply not counted. A rename is
/// drawn with `ours_write` too but is neither a read nor a write for the report (`move_file`
/// arranges, a `Bash` `mv` is never counted), so it does not enter adoption. A wrong call is
/// always followed by its retry on the same file, and adoption counts that choice once, so
/// `error` does not move adoption. Giving up happens before the last step, and every example
/// task's verifier needs its last step, so a trial succeeds exactly when it does not give up.
#[test]
fn the_report_recovers_the_known_probabilities() {
    let policy = "\
[arm.filesystem]
ours_read = 0.9
ours_write = 0.8
fail = 0.1
error = 0.3

[arm.pipe-original]
ours_read = 0.3
ours_write = 0.2
fail = 0.5

# No server: whatever these say, every step is built-in and no call can fail.
[arm.builtin-only]
ours_read = 0.9
ours_write = 0.9
fail = 0.2
error = 0.5
";
    let arms = "\
[[arm]]\nname = \"filesystem\"\nargs = []\n\n\
[[arm]]\nname = \"pipe-original\"\nargs = [\"--legacy-pipe\", \"--surface\", \"original\"]\n\n\
[[arm]]\nname = \"builtin-only\"\nserver = false\n";
    let trials = 30;
    let s = Study::new(
        2026,
        trials,
        &[
            ("fix-script", 30),
            ("summarize-log", 30),
            ("rename-module", 30),
        ],
        arms,
        policy,
    );
    let out = s.out("run");
    s.run(&out, &["--jobs", "2", "--quiet"]);
    let recs = records(&out);
    assert_eq!(recs.len(), 3 * 3 * trials as usize);
    for r in &recs {
        assert_eq!(r["agent"]["end"], "exited", "{r}");
        assert_eq!(r["agent"]["code"], 0, "the stand-in failed: {r}");
        // Success is exactly the trials the stand-in did not give up: the quantity whose
        // probability is 1 − fail.
        let summary = stand_in_summary(&out, str_of(r, "id"));
        assert_eq!(
            r["success"] == true,
            summary["gave_up"] == false,
            "{r} {summary}"
        );
    }
    let report = report_json(&out);
    assert_eq!(report["baseline"], "filesystem");

    // (arm, fail, ours_write, ours_read, whether its server calls can fail)
    let known = [
        ("filesystem", 0.1, 0.8, 0.9, true),
        ("pipe-original", 0.5, 0.2, 0.3, false),
        ("builtin-only", 0.2, 0.0, 0.0, false),
    ];
    for (name, fail, ours_write, ours_read, errors) in known {
        let a = arm(&report, name);
        assert_eq!(a["trials"], 3 * trials, "{name}");
        assert_eq!(a["trials_with_transcript"], 3 * trials, "{name}");
        assert_eq!(count(&a["timeouts"]), 0, "{name}: nothing hangs");
        assert_eq!(count(&a["crashes"]), 0, "{name}");
        assert_covers(&a["success"], 1.0 - fail, &format!("{name} success"));
        // A trial carried out to the end made every step, and each task reads and writes at
        // least once (a trial that gave up may have made none).
        let done = count(&a["success"]);
        assert!(
            total(&a["write_adoption"]) >= done,
            "{name}: {}",
            a["write_adoption"]
        );
        assert!(
            total(&a["read_adoption"]) >= done,
            "{name}: {}",
            a["read_adoption"]
        );
        if name == "builtin-only" {
            assert_eq!(
                count(&a["write_adoption"]),
                0,
                "{name}: {}",
                a["write_adoption"]
            );
            assert_eq!(
                count(&a["read_adoption"]),
                0,
                "{name}: {}",
                a["read_adoption"]
            );
            assert_eq!(a["server_names"], serde_json::json!([]));
        } else {
            assert_covers(
                &a["write_adoption"],
                ours_write,
                &format!("{name} write adoption"),
            );
            assert_covers(
                &a["read_adoption"],
                ours_read,
                &format!("{name} read adoption"),
            );
            assert_eq!(a["server_names"], serde_json::json!(["filesystem"]));
        }
        // Every wrong call is retried by the next call; an arm that sends none has no error.
        let error_rate = &a["error_rate"];
        let retried = &a["retry_after_error"];
        if errors {
            assert!(count(error_rate) > 0, "{name}: {error_rate}");
            assert_eq!(total(retried), count(error_rate), "{name}: {retried}");
            assert_eq!(count(retried), total(retried), "{name}: {retried}");
        } else {
            assert_eq!(count(error_rate), 0, "{name}: {error_rate}");
            assert_eq!(total(retried), 0, "{name}: {retried}");
        }
    }

    // The pipe arm's call logs hold its pipe calls: a read is `tail` on the file, a write is
    // shelpa_write (a `tee` stage); without wrong calls, one per read and write counted.
    let pipe_arm = arm(&report, "pipe-original");
    let pipe = &pipe_arm["pipe"];
    let pipe_reads = pipe_arm["reads_by_interface"]["pipe"]
        .as_u64()
        .expect("pipe reads");
    let pipe_writes = pipe_arm["writes_by_interface"]["pipe"]
        .as_u64()
        .expect("pipe writes");
    assert!(pipe_reads > 0 && pipe_writes > 0, "{pipe_arm}");
    assert_eq!(pipe["pipe_calls"], pipe_reads + pipe_writes, "{pipe}");
    let top: HashMap<&str, u64> = pipe["top_commands"]
        .as_array()
        .expect("top_commands")
        .iter()
        .map(|c| (str_of(c, "command"), c["count"].as_u64().expect("count")))
        .collect();
    assert_eq!(top.get("tail"), Some(&pipe_reads), "{pipe}");
    assert_eq!(top.get("tee"), Some(&pipe_writes), "{pipe}");
    assert_eq!(arm(&report, "filesystem")["pipe"]["pipe_calls"], 0);
    assert_eq!(
        arm(&report, "builtin-only")["pipe"]["trials_with_call_log"],
        0
    );

    // Against the baseline (filesystem): each known difference inside its interval, and where
    // it is large, the interval wholly on its side and the exact test significant.
    let base = known[0];
    for (name, fail, ours_write, ours_read, _) in &known[1..] {
        let c = comparison(&report, name);
        assert_eq!(c["baseline"], "filesystem");
        for (metric, diff) in [
            ("success", base.1 - fail),
            ("write_adoption", ours_write - base.2),
            ("read_adoption", ours_read - base.3),
        ] {
            let entry = &c[metric];
            assert_diff_covers(
                &arm(&report, name)[metric],
                &arm(&report, "filesystem")[metric],
                entry,
                diff,
                &format!("{name} − filesystem, {metric}"),
            );
            let high = entry["high"].as_f64().expect("high");
            let p = entry["p_value"].as_f64().expect("p_value");
            if diff <= -0.3 {
                assert!(high < 0.0, "{name} {metric}: {entry}");
                assert!(p < 0.01, "{name} {metric}: {entry}");
            }
        }
    }
}

/// Two runs of one study file give the same plan, the same trials and the same report.
#[test]
fn the_same_seed_gives_the_same_study() {
    let policy = "\
[arm.filesystem]
ours_read = 0.5
ours_write = 0.5
fail = 0.3
error = 0.3

[arm.pipe-original]
ours_read = 0.5
ours_write = 0.5
fail = 0.3
error = 0.3
";
    let arms = "\
[[arm]]\nname = \"filesystem\"\nargs = []\n\n\
[[arm]]\nname = \"pipe-original\"\nargs = [\"--legacy-pipe\", \"--surface\", \"original\"]\n";
    let s = Study::new(
        7,
        3,
        &[("fix-script", 30), ("summarize-log", 30)],
        arms,
        policy,
    );
    let (first, second) = (s.out("first"), s.out("second"));
    s.run(&first, &["--jobs", "2", "--quiet"]);
    s.run(&second, &["--jobs", "2", "--quiet"]);
    assert_eq!(
        std::fs::read(first.join("plan.json")).expect("plan"),
        std::fs::read(second.join("plan.json")).expect("plan")
    );
    let outcomes = |out: &Path| -> BTreeMap<String, (Value, Value, Value)> {
        records(out)
            .into_iter()
            .map(|r| {
                let id = str_of(&r, "id").to_string();
                let summary = stand_in_summary(out, &id);
                (
                    id,
                    (r["success"].clone(), r["agent"]["end"].clone(), summary),
                )
            })
            .collect()
    };
    let (a, b) = (outcomes(&first), outcomes(&second));
    assert_eq!(a.len(), 12);
    assert_eq!(a, b, "the trials, their ends and what the stand-in did");
    // The draws did something: some trials gave up, some did not.
    let successes = a.values().filter(|(s, _, _)| *s == true).count();
    assert!(
        0 < successes && successes < 12,
        "{successes} successes of 12"
    );

    let (ra, rb) = (report_json(&first), report_json(&second));
    assert_eq!(ra["arms"], rb["arms"]);
    assert_eq!(ra["comparisons"], rb["comparisons"]);
    assert_eq!(ra["inputs"], rb["inputs"]);
}

/// The processes whose command line or working directory mentions `dir`.
fn processes_mentioning(dir: &Path) -> Vec<(i32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    test_support::procs::proc_entries()
        .into_iter()
        .filter_map(|(pid, path)| {
            let cmdline = std::fs::read(path.join("cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default();
            let cwd = std::fs::read_link(path.join("cwd"))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            (cmdline.contains(&needle) || cwd.contains(&needle))
                .then(|| (pid, format!("{cmdline} (cwd {cwd})")))
        })
        .collect()
}

/// A policy in which the arm `stuck` hangs in every trial and `filesystem` never fails.
const HANG_POLICY: &str = "\
[arm.filesystem]
ours_read = 1.0
ours_write = 1.0

[arm.stuck]
ours_read = 1.0
ours_write = 1.0
hang = 1.0
";

const HANG_ARMS: &str = "\
[[arm]]\nname = \"filesystem\"\nargs = []\n\n\
[[arm]]\nname = \"stuck\"\nargs = []\n";

#[test]
fn a_hung_trial_is_killed_at_its_limit_and_recorded() {
    // The limit applies to both arms, and the filesystem arm must finish inside it: 10 s is far
    // more than its trials take even on a loaded machine (a fraction of a second), so only the
    // hang reaches it.
    let s = Study::new(3, 2, &[("summarize-log", 10)], HANG_ARMS, HANG_POLICY);
    let out = s.out("run");
    s.run(&out, &["--jobs", "2", "--quiet"]);
    let recs = records(&out);
    assert_eq!(recs.len(), 4);
    for r in &recs {
        let id = str_of(r, "id");
        if r["arm"] == "stuck" {
            assert_eq!(r["agent"]["end"], "killed_at_limit", "{r}");
            assert_eq!(
                r["success"], false,
                "a hang before the summary is written: {r}"
            );
            let err = std::fs::read_to_string(out.join("trials").join(id).join("agent.err"))
                .expect("agent.err");
            assert!(err.contains("hanging before step"), "{id}: {err}");
        } else {
            assert_eq!(r["agent"]["end"], "exited", "{r}");
            assert_eq!(r["agent"]["code"], 0, "{r}");
            assert_eq!(r["success"], true, "{r}");
        }
    }
    // The hung agent had started its server; neither outlives the run.
    let left = processes_mentioning(&out);
    assert!(
        left.is_empty(),
        "processes of the run survived it: {left:?}"
    );

    let report = report_json(&out);
    let stuck = arm(&report, "stuck");
    assert_eq!(
        (count(&stuck["timeouts"]), total(&stuck["timeouts"])),
        (2, 2)
    );
    assert_eq!(count(&stuck["success"]), 0, "{}", stuck["success"]);
    assert_eq!(count(&stuck["crashes"]), 0);
    let fine = arm(&report, "filesystem");
    assert_eq!((count(&fine["success"]), total(&fine["success"])), (2, 2));
    assert_eq!(count(&fine["timeouts"]), 0);
}

/// Every file under `dir` (not directories): its path, content and modification time.
fn file_states(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, i64, i64)> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let entry = entry.expect("entry");
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                let content = if meta.is_file() {
                    std::fs::read(entry.path()).expect("read")
                } else {
                    Vec::new()
                };
                files.insert(entry.path(), (content, meta.mtime(), meta.mtime_nsec()));
            }
        }
    }
    files
}

#[test]
fn resume_after_ctrl_c_runs_each_trial_once() {
    // One at a time, and half the trials hang for their 1 s limit: the run lasts several
    // seconds, so it is interrupted well before its end.
    let s = Study::new(5, 4, &[("summarize-log", 1)], HANG_ARMS, HANG_POLICY);
    let out = s.out("run");
    let mut child = s
        .command(&out, &["--jobs", "1", "--quiet"])
        .stderr(Stdio::null())
        .spawn()
        .expect("start the runner");
    let trials_file = out.join("trials.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&trials_file)
        .map(|t| t.lines().count())
        .unwrap_or(0)
        < 2
    {
        assert!(Instant::now() < deadline, "no two trials finished in 60 s");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the runner ended before two trials were recorded"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "the run was interrupted");
    let planned = plan(&out);
    assert_eq!(planned.len(), 8);
    let before_text = std::fs::read_to_string(&trials_file).expect("trials.jsonl");
    let before = records(&out);
    assert!(
        (2..8).contains(&before.len()),
        "interrupted before the end: {} of 8 recorded",
        before.len()
    );
    let left = processes_mentioning(&out);
    assert!(
        left.is_empty(),
        "Ctrl-C left processes of the run: {left:?}"
    );

    let o = s.run(&out, &["--resume", "--jobs", "2"]);
    let progress = stderr(&o);
    assert!(
        progress.contains(&format!("{} to run", 8 - before.len())),
        "{progress}"
    );
    let after_text = std::fs::read_to_string(&trials_file).expect("trials.jsonl");
    assert!(
        after_text.starts_with(&before_text),
        "the earlier lines are kept byte for byte"
    );
    let after = records(&out);
    assert_eq!(after.len(), 8);
    let ids: Vec<&str> = after.iter().map(|r| str_of(r, "id")).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), 8, "no trial recorded twice: {ids:?}");
    let planned_ids: HashSet<&str> = planned.iter().map(|t| str_of(t, "id")).collect();
    assert_eq!(unique, planned_ids);
    for early in &before {
        let now = after
            .iter()
            .find(|r| r["id"] == early["id"])
            .expect("still recorded");
        assert_eq!(
            now["started"], early["started"],
            "{} ran again",
            early["id"]
        );
    }
    // Every trial's directory is that of its one recorded run.
    for r in &after {
        let dir = out.join("trials").join(str_of(r, "id"));
        assert!(dir.join("workspace").is_dir(), "{}", dir.display());
    }

    // Resuming the finished run runs nothing and changes nothing.
    let files = file_states(&out);
    let o = s.run(&out, &["--resume"]);
    assert!(stderr(&o).contains(" 0 to run"), "{}", stderr(&o));
    assert_eq!(
        file_states(&out),
        files,
        "a second --resume changed the run"
    );
}

/// A directory tree, path by path (relative): a file's bytes, a directory, a link's target.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    File(Vec<u8>),
    Dir,
    Link(PathBuf),
}

fn snapshot(root: &Path) -> BTreeMap<String, Node> {
    let mut nodes = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let entry = entry.expect("entry");
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .expect("below the root")
                .to_string_lossy()
                .into_owned();
            let kind = entry.file_type().expect("file type");
            let node = if kind.is_symlink() {
                Node::Link(std::fs::read_link(&path).expect("readlink"))
            } else if kind.is_dir() {
                stack.push(path.clone());
                Node::Dir
            } else {
                Node::File(std::fs::read(&path).expect("read"))
            };
            nodes.insert(rel, node);
        }
    }
    nodes
}

/// The fixture as the first `steps` steps of `plan` leave it (reads change nothing).
fn apply_plan(
    fixture: &BTreeMap<String, Node>,
    plan: &Path,
    steps: usize,
) -> BTreeMap<String, Node> {
    let text = std::fs::read_to_string(plan).expect("plan.toml");
    let parsed: toml::Value = toml::from_str(&text).expect("plan.toml is TOML");
    let mut files = fixture.clone();
    let field = |step: &toml::Value, key: &str| -> Option<String> {
        step.get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_string)
    };
    for step in parsed["step"]
        .as_array()
        .expect("[[step]]")
        .iter()
        .take(steps)
    {
        if let (Some(path), Some(content)) = (field(step, "write"), field(step, "content")) {
            files.insert(path, Node::File(content.into_bytes()));
        } else if let Some(path) = field(step, "edit") {
            let (old, new) = (
                field(step, "old").expect("old"),
                field(step, "new").expect("new"),
            );
            let Some(Node::File(bytes)) = files.get(&path) else {
                panic!("edit of {path}, which is no file")
            };
            let text = String::from_utf8(bytes.clone()).expect("utf-8");
            assert_eq!(text.matches(&old).count(), 1, "{path}: {old:?}");
            files.insert(path, Node::File(text.replacen(&old, &new, 1).into_bytes()));
        } else if let Some(from) = field(step, "rename") {
            let node = files.remove(&from).expect("the renamed file");
            files.insert(field(step, "to").expect("to"), node);
        } else {
            assert!(field(step, "read").is_some(), "unknown step {step}");
        }
    }
    files
}

/// What the server keeps in a workspace it serves (its store and shelpa's), not the task's.
const SERVER_STATE: [&str; 2] = [".filesystem", ".shelpa"];

#[test]
fn every_trial_works_in_its_own_workspace_and_the_fixtures_stay_untouched() {
    let policy = "\
[arm.filesystem]
ours_read = 0.6
ours_write = 0.6
fail = 0.4
error = 0.3

[arm.builtin-only]
fail = 0.4
";
    let arms = "\
[[arm]]\nname = \"filesystem\"\nargs = [\"--call-log-args\"]\n\n\
[[arm]]\nname = \"builtin-only\"\nserver = false\n";
    let tasks = ["summarize-log", "rename-module"];
    let s = Study::new(11, 3, &[(tasks[0], 30), (tasks[1], 30)], arms, policy);
    let fixtures: BTreeMap<&str, BTreeMap<String, Node>> = tasks
        .iter()
        .map(|t| (*t, snapshot(&s.dir.join("tasks").join(t))))
        .collect();
    let out = s.out("run");
    s.run(&out, &["--jobs", "2", "--quiet"]);
    let recs = records(&out);
    assert_eq!(recs.len(), 12);

    let mut inodes = HashSet::new();
    let mut sessions = HashSet::new();
    let (mut successes, mut failures) = (0, 0);
    let all_ids: Vec<String> = recs.iter().map(|r| str_of(r, "id").to_string()).collect();
    for r in &recs {
        let id = str_of(r, "id");
        let task = str_of(r, "task");
        let trial = out.join("trials").join(id);
        let ws = trial.join("workspace");
        let meta = std::fs::metadata(&ws).expect("workspace");
        assert!(
            inodes.insert((meta.dev(), meta.ino())),
            "{id} shares a workspace"
        );
        assert_eq!(r["agent"]["code"], 0, "{r}");

        // The workspace is the fixture plus exactly the steps this trial's stand-in carried out.
        let summary = stand_in_summary(&out, id);
        let done = summary["steps_done"].as_u64().expect("steps_done") as usize;
        let mut found = snapshot(&ws);
        let served = r["arm"] == "filesystem";
        for state in SERVER_STATE {
            let had = found
                .keys()
                .any(|k| k == state || k.starts_with(&format!("{state}/")));
            assert!(served || !had, "{id}: {state} in a trial without a server");
            found.retain(|k, _| k != state && !k.starts_with(&format!("{state}/")));
        }
        let task_dir = s.dir.join("tasks").join(task);
        let fixture_ws: BTreeMap<String, Node> = fixtures[task]
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix("workspace/")
                    .map(|k| (k.to_string(), v.clone()))
            })
            .collect();
        let expected = apply_plan(&fixture_ws, &task_dir.join("plan.toml"), done);
        assert_eq!(found, expected, "{id}: {done} step(s) done");
        if task == "summarize-log" {
            assert_eq!(
                found.contains_key("summary.txt"),
                r["success"] == true,
                "{id}: summary.txt exactly when the task was done ({r})"
            );
        }
        if r["success"] == true {
            successes += 1;
        } else {
            failures += 1;
        }

        // The server's configuration and call log are the trial's own.
        if served {
            let config: Value = serde_json::from_str(
                &std::fs::read_to_string(trial.join("mcp.json")).expect("mcp.json"),
            )
            .expect("JSON");
            let args = &config["mcpServers"]["filesystem"]["args"];
            let root = args
                .as_array()
                .expect("args")
                .iter()
                .position(|a| a == "--root");
            assert_eq!(args[root.expect("--root") + 1], ws.to_str().expect("utf-8"));
            let transcript = std::fs::read_to_string(trial.join("transcript/stand-in.jsonl"))
                .expect("transcript");
            let server_calls = transcript.matches("\"name\":\"mcp__filesystem__").count();
            let log_path = trial.join("calls.jsonl");
            let log = test_support::logs::json_lines(&log_path);
            assert_eq!(
                log.len(),
                server_calls,
                "{id}: one log record per server call"
            );
            let log_text = std::fs::read_to_string(&log_path).unwrap_or_default();
            for other in all_ids.iter().filter(|o| *o != id) {
                assert!(
                    !log_text.contains(other.as_str()),
                    "{id}'s log names {other}"
                );
            }
            let plan_text = std::fs::read_to_string(task_dir.join("plan.toml")).expect("plan");
            for rec in &log {
                sessions.insert(str_of(rec, "session").to_string());
                for key in ["path", "source", "destination"] {
                    if let Some(p) = rec["args"][key].as_str() {
                        // Paths are the plan's, relative to this trial's root.
                        assert!(
                            plan_text.contains(&format!("\"{p}\"")),
                            "{id}: {key} {p:?} is none of its plan's paths ({rec})"
                        );
                    }
                }
                assert!(
                    !rec.to_string().contains(s.dir.to_str().expect("utf-8")),
                    "{id}: an absolute path in its call log: {rec}"
                );
            }
            if !log.is_empty() {
                assert!(
                    log.iter().any(|rec| rec["args"].is_object()),
                    "{id}: {log:?}"
                );
            }
        } else {
            assert!(
                !trial.join("calls.jsonl").exists(),
                "{id}: no server, no log"
            );
        }
    }
    assert!(
        successes > 0 && failures > 0,
        "{successes} done, {failures} not"
    );
    // One server per trial: no session shows up in two trials' logs (a log of one trial has one
    // session, so the sessions are at most the trials with a log).
    let logged = recs
        .iter()
        .filter(|r| {
            out.join("trials")
                .join(str_of(r, "id"))
                .join("calls.jsonl")
                .is_file()
        })
        .count();
    assert_eq!(sessions.len(), logged, "{sessions:?}");

    // The fixtures are as they were.
    for task in tasks {
        assert_eq!(
            snapshot(&s.dir.join("tasks").join(task)),
            fixtures[task],
            "{task}"
        );
        let ws = std::fs::metadata(s.dir.join("tasks").join(task).join("workspace")).expect("ws");
        assert!(
            !inodes.contains(&(ws.dev(), ws.ino())),
            "a trial ran in the fixture"
        );
    }
}
