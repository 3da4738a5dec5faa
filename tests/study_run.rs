#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem study run` on the real binary, with agents that are small shell scripts: the
//! plan and its order, one fresh workspace per trial, the MCP configuration the real server
//! accepts, agents that hang, crash or cannot start, Ctrl-C and `--resume`, and the study
//! file's errors.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use test_support::mcp::Session;

/// A study directory: two tasks (`alpha`, `beta`), each a fixture holding `seed.txt`.
struct StudyDir {
    dir: tempfile::TempDir,
}

impl StudyDir {
    fn new() -> StudyDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for task in ["alpha", "beta"] {
            let t = dir.path().join("tasks").join(task);
            std::fs::create_dir_all(t.join("workspace/sub")).expect("mkdir");
            std::fs::write(t.join("workspace/seed.txt"), task).expect("write");
            std::os::unix::fs::symlink("../seed.txt", t.join("workspace/sub/link"))
                .expect("symlink");
            std::fs::write(t.join("prompt.md"), format!("Do {task}.\n")).expect("write");
        }
        StudyDir { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// Writes `study.toml`: the two tasks (as many as `tasks` says), arms `files` (a server
    /// with `--tools extended`) and `plain` (no server), `trials` each, the agent `sh -c
    /// SCRIPT` and the verifier `sh -c VERIFY`.
    fn write(&self, tasks: usize, trials: u32, limit: u64, script: &str, verify: &str) -> PathBuf {
        let mut text = format!(
            "[study]\nname = \"test\"\nseed = 42\ntrials = {trials}\nbaseline = \"files\"\n\n\
             [agent]\ncommand = [\"sh\", \"-c\", {script:?}]\n\n"
        );
        for task in ["alpha", "beta"].iter().take(tasks) {
            text.push_str(&format!(
                "[[task]]\nname = \"{task}\"\ndir = \"tasks/{task}\"\nfixture = \"workspace\"\n\
                 prompt = \"prompt.md\"\nverify = [\"sh\", \"-c\", {verify:?}]\ntime_limit = {limit}\n\n"
            ));
        }
        text.push_str(
            "[[arm]]\nname = \"files\"\nargs = [\"--tools\", \"extended\"]\n\n\
             [[arm]]\nname = \"plain\"\nserver = false\n",
        );
        self.write_text(&text)
    }

    fn write_text(&self, text: &str) -> PathBuf {
        let file = self.path().join("study.toml");
        std::fs::write(&file, text).expect("write study");
        file
    }
}

fn study_command(study: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(test_support::filesystem());
    cmd.args(["study", "run"])
        .arg(study)
        .arg("--out")
        .arg(out)
        .args(extra);
    cmd
}

fn run(study: &Path, out: &Path, extra: &[&str]) -> Output {
    study_command(study, out, extra)
        .stdin(Stdio::null())
        .output()
        .expect("run filesystem study run")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn records(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("trials.jsonl")).expect("trials.jsonl");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect()
}

fn plan(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("plan.json")).expect("plan.json");
    serde_json::from_str::<Vec<Value>>(&text).expect("plan is a list")
}

fn record<'a>(records: &'a [Value], id: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no record {id} in {records:?}"))
}

/// True while `pid` is a process that has not ended (a zombie has ended).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the command name in parentheses, which may hold spaces.
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
        }
        Err(_) => false,
    }
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .expect("a pid")
}

/// Each trial writes its own mark and refuses to run (exit 9) if any mark is already in its
/// workspace, so a file leaking from one trial into another shows as a failed agent.
const MARKING_AGENT: &str = "\
for f in mark-*; do test -e \"$f\" && exit 9; done
echo '{trial}' > mark-{trial}
printf '{{\"trial\":\"%s\",\"seed\":\"%s\",\"arm\":\"%s\"}}\\n' '{trial}' '{seed}' '{arm}' > '{transcript_dir}/t.jsonl'
cat '{prompt_file}' > prompt-seen
";

#[test]
fn every_trial_runs_once_in_the_seeded_interleaved_order_in_its_own_copy() {
    let s = StudyDir::new();
    let study = s.write(2, 2, 30, MARKING_AGENT, "test -f mark-{trial}");
    let o = run(&study, &s.out(), &["--jobs", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));

    let planned = plan(&s.out());
    assert_eq!(planned.len(), 8);
    // Interleaved: every repetition's four task/arm pairs run before the next repetition.
    for (i, t) in planned.iter().enumerate() {
        assert_eq!(t["rep"], (i / 4) as u64, "plan {planned:?}");
    }
    let ids: Vec<&str> = planned
        .iter()
        .map(|t| t["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 8);

    let recs = records(&s.out());
    assert_eq!(recs.len(), 8);
    for (order, id) in ids.iter().enumerate() {
        let r = record(&recs, id);
        assert_eq!(r["order"], order as u64);
        assert_eq!(r["agent"]["end"], "exited", "{r}");
        assert_eq!(r["agent"]["code"], 0, "a mark leaked into {id}: {r}");
        assert_eq!(r["success"], true, "{r}");
        let ws = s.out().join("trials").join(id).join("workspace");
        let marks: Vec<String> = std::fs::read_dir(&ws)
            .expect("workspace")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("mark-"))
            .collect();
        assert_eq!(marks, [format!("mark-{id}")], "{id}'s workspace");
        // The copy is fresh and whole: the fixture's file, and its symlink kept as a link.
        let task = r["task"].as_str().expect("task");
        assert_eq!(
            std::fs::read_to_string(ws.join("seed.txt")).expect("seed"),
            task
        );
        assert_eq!(
            std::fs::read_link(ws.join("sub/link")).expect("link"),
            Path::new("../seed.txt")
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("prompt-seen")).expect("prompt"),
            format!("Do {task}.\n")
        );
        let line =
            std::fs::read_to_string(s.out().join("trials").join(id).join("transcript/t.jsonl"))
                .expect("transcript");
        let t: Value = serde_json::from_str(&line).expect("transcript line");
        assert_eq!(
            t["seed"],
            r["seed"].to_string(),
            "{{seed}} is the record's seed"
        );
        assert_eq!(t["trial"], *id);
    }
    // The fixture itself is untouched.
    assert!(!s.path().join("tasks/alpha/workspace/prompt-seen").exists());
    assert_eq!(
        std::fs::read(s.path().join("study.toml")).expect("study"),
        std::fs::read(s.out().join("study.toml")).expect("copy")
    );
    let progress = stderr(&o);
    assert!(progress.contains("[8/8]"), "{progress}");
    assert!(
        progress.contains("done per arm: files 4/4, plain 4/4"),
        "{progress}"
    );

    // The same study file gives the same plan.
    let again = s.path().join("again");
    let o = run(&study, &again, &["--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "--quiet: {}", stderr(&o));
    assert_eq!(
        std::fs::read(s.out().join("plan.json")).expect("plan"),
        std::fs::read(again.join("plan.json")).expect("plan")
    );
}

#[test]
fn the_mcp_configuration_starts_the_real_server_on_the_trial_workspace() {
    let s = StudyDir::new();
    let study = s.write(1, 1, 30, "true", "true");
    let o = run(&study, &s.out(), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let trial = s.out().join("trials/000-alpha-files");
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(trial.join("mcp.json")).expect("mcp.json"))
            .expect("JSON");
    let server = &config["mcpServers"]["filesystem"];
    let ws = trial.join("workspace");
    let log = trial.join("calls.jsonl");
    let args: Vec<&str> = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string"))
        .collect();
    assert_eq!(
        args,
        [
            "--tools",
            "extended",
            "--root",
            ws.to_str().expect("utf-8"),
            "--call-log",
            log.to_str().expect("utf-8")
        ]
    );
    assert_eq!(
        Path::new(server["command"].as_str().expect("command")),
        test_support::filesystem()
    );

    // Start the server exactly as a client reading this file would, and use it.
    let mut cmd = Command::new(server["command"].as_str().expect("command"));
    cmd.args(&args);
    let mut session = Session::from_command(cmd);
    let reply = session.initialize("2025-06-18");
    assert!(reply["result"]["serverInfo"].is_object(), "{reply}");
    let (is_error, text) =
        session.call_text(2, "read_text_file", serde_json::json!({"path": "seed.txt"}));
    assert!(!is_error && text.contains("alpha"), "{text}");
    session.close_and_wait();
    assert!(log.is_file(), "the call log is the trial's own");

    let plain: Value = serde_json::from_str(
        &std::fs::read_to_string(s.out().join("trials/000-alpha-plain/mcp.json")).expect("json"),
    )
    .expect("JSON");
    assert_eq!(plain, serde_json::json!({"mcpServers": {}}));
}

#[test]
fn hanging_crashing_and_missing_agents_are_recorded_and_their_children_killed() {
    let s = StudyDir::new();
    // alpha hangs with a child of its own; beta starts a child and crashes on a signal.
    let script = "\
case {task} in
  alpha) sleep 1000 & echo $! > child.pid; echo $$ > agent.pid; wait ;;
  beta) sleep 1000 & echo $! > child.pid; kill -SEGV $$ ;;
esac";
    let study = s.write(2, 1, 1, script, "test -f seed.txt");
    let started = Instant::now();
    let o = run(&study, &s.out(), &["--jobs", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the limit ended the hang"
    );
    let recs = records(&s.out());
    assert_eq!(recs.len(), 4);
    for arm in ["files", "plain"] {
        let hung = record(&recs, &format!("000-alpha-{arm}"));
        assert_eq!(hung["agent"]["end"], "killed_at_limit", "{hung}");
        assert_eq!(hung["success"], true, "the verifier still runs: {hung}");
        let ws = s.out().join(format!("trials/000-alpha-{arm}/workspace"));
        for pid_file in ["child.pid", "agent.pid"] {
            let pid = read_pid(&ws.join(pid_file));
            assert!(!alive(pid), "{pid_file} {pid} survived the limit");
        }
        let crashed = record(&recs, &format!("000-beta-{arm}"));
        assert_eq!(crashed["agent"]["end"], "signaled", "{crashed}");
        assert_eq!(crashed["agent"]["signal"], libc::SIGSEGV, "{crashed}");
        // What an agent leaves running when it ends on its own ends with it.
        let ws = s.out().join(format!("trials/000-beta-{arm}/workspace"));
        let pid = read_pid(&ws.join("child.pid"));
        assert!(!alive(pid), "the crashed agent's child {pid} survived");
    }
    let progress = stderr(&o);
    assert!(progress.contains("killed at its time limit"), "{progress}");

    // An agent that does not exist is refused with the study file, before any trial.
    let t = StudyDir::new();
    let text = std::fs::read_to_string(&study).expect("study").replace(
        "command = [\"sh\", \"-c\"",
        "command = [\"/nonexistent/agent\", \"-c\"",
    );
    let missing = t.write_text(&text);
    let o = run(&missing, &t.out(), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent/agent"), "{}", stderr(&o));
    assert!(!t.out().exists(), "nothing is created for a refused study");
}

#[test]
fn ctrl_c_keeps_the_records_and_resume_runs_only_the_rest() {
    let s = StudyDir::new();
    // Repetition 0 is quick; repetition 1 hangs until the file `fast` exists in the study dir.
    let script = "echo $$ > agent.pid; case {trial} in 001-*) test -e '{study_dir}/fast' || sleep 1000 ;; esac";
    let study = s.write(2, 2, 60, script, "true");
    let mut child = study_command(&study, &s.out(), &[])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the runner");
    let trials = s.out().join("trials");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Wait for the first hanging trial's agent.
    let hanging = loop {
        assert!(
            Instant::now() < deadline,
            "the runner never reached repetition 1"
        );
        let found = std::fs::read_dir(&trials).ok().and_then(|d| {
            d.flatten().map(|e| e.path()).find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("001-"))
                    && p.join("workspace/agent.pid").is_file()
            })
        });
        if let Some(p) = found {
            std::thread::sleep(Duration::from_millis(50));
            break p;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let agent = read_pid(&hanging.join("workspace/agent.pid"));
    // A second runner on the same directory is refused while the first one runs.
    let o = run(&study, &s.out(), &["--resume"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("another"), "{}", stderr(&o));
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "interrupted");
    assert!(!alive(agent), "the running agent was killed");
    let before = records(&s.out());
    assert_eq!(
        before.len(),
        4,
        "repetition 0 recorded, nothing of repetition 1"
    );

    // Without --resume the directory is refused; with it, only the rest runs.
    let o = run(&study, &s.out(), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("use --resume"), "{}", stderr(&o));
    std::fs::write(s.path().join("fast"), "").expect("write");
    let o = run(&study, &s.out(), &["--resume", "--jobs", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("4 to run"), "{}", stderr(&o));
    let after = records(&s.out());
    assert_eq!(after.len(), 8);
    let ids: HashSet<&str> = after
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids.len(), 8, "no trial recorded twice");
    assert_eq!(
        after[..4],
        before[..],
        "the earlier records are kept as they were"
    );
    // Resuming a finished run runs nothing.
    let o = run(&study, &s.out(), &["--resume"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(records(&s.out()).len(), 8);

    // A changed study file is refused.
    let changed = std::fs::read_to_string(&study)
        .expect("study")
        .replace("seed = 42", "seed = 43");
    s.write_text(&changed);
    let o = run(&study, &s.out(), &["--resume"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("differs from"), "{}", stderr(&o));
    assert_eq!(records(&s.out()).len(), 8);
}

#[test]
fn bad_study_files_are_refused_with_what_to_do() {
    let s = StudyDir::new();
    let good = std::fs::read_to_string(s.write(2, 1, 5, "true", "true")).expect("study");
    let cases: [(String, &str); 6] = [
        (
            good.replace("time_limit = 5", "time_limit = 5\ntimeout = 3"),
            "unknown field `timeout`",
        ),
        (
            good.replace("\"true\"]", "\"{worksapce}\"]"),
            "unknown placeholder {worksapce}",
        ),
        (
            good.replace("name = \"beta\"", "name = \"alpha\""),
            "two tasks are named \"alpha\"",
        ),
        (
            good.replace("name = \"plain\"", "name = \"files\""),
            "two arms are named \"files\"",
        ),
        (
            good.replace(
                "dir = \"tasks/beta\"\nfixture = \"workspace\"",
                "dir = \"tasks/beta\"\nfixture = \"gone\"",
            ),
            "the fixture",
        ),
        (good.replace("trials = 1", "trials = 1001"), "1 to 1000"),
    ];
    for (text, expected) in cases {
        let study = s.write_text(&text);
        let o = run(&study, &s.out(), &[]);
        assert_eq!(o.status.code(), Some(1), "{text}");
        let err = stderr(&o);
        assert!(err.contains(expected), "expected {expected:?} in: {err}");
        assert!(!s.out().exists(), "nothing is created for a bad study");
    }
    // An output directory inside a fixture (every trial would copy the run) is refused.
    let study = s.write_text(&good);
    let inside = s.path().join("tasks/beta/workspace/out");
    let o = run(&study, &inside, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("inside the fixture of task \"beta\""),
        "{}",
        stderr(&o)
    );
    assert!(!inside.exists());
    // Usage errors are clap's.
    let o = run(&s.path().join("study.toml"), &s.out(), &["--jobs", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn the_programs_filesystem_and_study_stand_in_are_the_binaries_beside_the_runner() {
    let s = StudyDir::new();
    let study = s.write(1, 1, 30, "true", "true");
    let text = std::fs::read_to_string(&study).expect("study").replace(
        "command = [\"sh\", \"-c\", \"true\"]",
        "command = [\"filesystem\", \"tools\", \"--root\", \"{workspace}\"]",
    );
    let study = s.write_text(&text.replace(
        "verify = [\"sh\", \"-c\", \"true\"]",
        "verify = [\"study-stand-in\", \"--help\"]",
    ));
    let o = run(&study, &s.out(), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let trial = s.out().join("trials/000-alpha-files");
    let listed = std::fs::read_to_string(trial.join("agent.out")).expect("agent.out");
    assert!(listed.contains("read_text_file"), "{listed}");
    let r = records(&s.out());
    let verify = &record(&r, "000-alpha-files")["verify"];
    // The stand-in is looked for beside this binary, whether or not it was built.
    let beside = test_support::filesystem()
        .parent()
        .expect("a directory")
        .join("study-stand-in");
    if beside.is_file() {
        assert_eq!(verify["end"], "exited", "{verify}");
    } else {
        let error = verify["error"].as_str().expect("an error");
        assert!(error.contains(beside.to_str().expect("utf-8")), "{error}");
    }
}

/// An agent that leaves a symlink where the runner will write the verifier's output (beside its
/// workspace) does not get the runner to overwrite what the link names: the link is replaced by
/// the verifier's own output, and the file outside stays as it was.
#[test]
fn a_symlink_left_at_verify_out_is_not_written_through() {
    let s = StudyDir::new();
    let victim = s.path().join("victim.txt");
    std::fs::write(&victim, "keep me\n").expect("write victim");
    let script = format!("ln -s {} ../verify.out", victim.display());
    let study = s.write(1, 1, 30, &script, "echo overwritten");
    let o = run(&study, &s.out(), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let records = records(&s.out());
    assert_eq!(records.len(), 2, "{records:?}");
    for r in &records {
        assert_eq!(r["verify"]["end"], "exited", "{r}");
    }
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "keep me\n"
    );
    let out = s.out().join("trials/000-alpha-files/verify.out");
    assert_eq!(
        std::fs::read_to_string(out).expect("verify.out"),
        "overwritten\n",
        "verify.out is a file of its own"
    );
}
