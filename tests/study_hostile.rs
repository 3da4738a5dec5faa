//! `filesystem study run` and `study report` against agents and run directories that try to
//! break them: a hard link or a FIFO left where the runner writes, FIFOs where the report reads,
//! a runner killed or hung up on while its agents run, refused pipe calls, and study files whose
//! arms, prompts or programs could only fail every trial. Every wait has a deadline the test
//! enforces: a regression fails the test instead of hanging the suite.

// The tests set up and inspect study and run directories by name, as a user or an agent would.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The longest any one runner or report may take here; each is expected in seconds.
const CAP: Duration = Duration::from_secs(90);

/// A study directory with one task (`alpha`, a fixture holding `seed.txt`) and a study file
/// written by [`Study::write`].
struct Study {
    dir: tempfile::TempDir,
}

impl Study {
    fn new() -> Study {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = dir.path().join("tasks/alpha");
        std::fs::create_dir_all(t.join("workspace")).expect("mkdir");
        std::fs::write(t.join("workspace/seed.txt"), "abc\n").expect("write");
        std::fs::write(t.join("prompt.md"), "Do alpha.\n").expect("write");
        Study { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    fn task_dir(&self) -> PathBuf {
        self.dir.path().join("tasks/alpha")
    }

    /// Writes `study.toml`: `[agent]` as given (TOML lines), the task with `verify` (a TOML
    /// array), `trials` repetitions, and `arms` (TOML `[[arm]]` tables).
    fn write(&self, agent: &str, verify: &str, trials: u32, arms: &str) -> PathBuf {
        let text = format!(
            "[study]\nname = \"hostile\"\nseed = 7\ntrials = {trials}\nbaseline = \"plain\"\n\n\
             [agent]\n{agent}\n\n\
             [[task]]\nname = \"alpha\"\ndir = \"tasks/alpha\"\nfixture = \"workspace\"\n\
             prompt = \"prompt.md\"\nverify = {verify}\ntime_limit = 60\n\n{arms}"
        );
        let file = self.path().join("study.toml");
        std::fs::write(&file, text).expect("write study");
        file
    }
}

/// One arm without a server.
const PLAIN: &str = "[[arm]]\nname = \"plain\"\nserver = false\n";
/// Two arms: `plain` and `files` (the server with its default flags).
const TWO_ARMS: &str = "[[arm]]\nname = \"plain\"\nserver = false\n\n[[arm]]\nname = \"files\"\n";

fn sh_agent(script: &str) -> String {
    format!("command = [\"sh\", \"-c\", {script:?}]")
}

fn runner(study: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(test_support::filesystem());
    cmd.args(["study", "run"])
        .arg(study)
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdin(Stdio::null());
    cmd
}

/// What a capped run gave: its status and its stderr.
struct Ran {
    status: ExitStatus,
    stderr: String,
    stdout: String,
}

/// Runs `cmd` to its end, killing it and failing the test if it takes longer than [`CAP`]. Its
/// output goes to files, so a chatty process cannot block on a full pipe.
fn run_capped(mut cmd: Command, what: &str) -> Ran {
    let logs = tempfile::tempdir().expect("tempdir");
    let out_path = logs.path().join("stdout");
    let err_path = logs.path().join("stderr");
    cmd.stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"));
    let mut child = cmd.spawn().expect("spawn");
    let status = wait_capped(&mut child, CAP)
        .unwrap_or_else(|| panic!("{what} was still running after {CAP:?} (it hangs): killed"));
    Ran {
        status,
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
    }
}

/// Waits for `child` at most `cap`; on the cap it is killed and `None` returned.
fn wait_capped(child: &mut Child, cap: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + cap;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `done` every 20 ms until it holds, failing the test with `what` after [`CAP`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + CAP;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {CAP:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn records(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("trials.jsonl")).expect("trials.jsonl");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a record ({e}): {l}")))
        .collect()
}

/// True while `pid` is a process that has not ended (a zombie has ended).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
        }
        Err(_) => false,
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Kills the processes whose pid files it names when the test ends, whatever happened, so a
/// failing test leaves nothing running.
struct KillOnDrop(Vec<PathBuf>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for f in &self.0 {
            if let Some(pid) = read_pid(f) {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
    }
}

fn report_json(out: &Path) -> Value {
    let mut cmd = Command::new(test_support::filesystem());
    cmd.args(["study", "report", "--format", "json"]).arg(out);
    let r = run_capped(cmd, "study report");
    assert!(r.status.success(), "{}", r.stderr);
    serde_json::from_str(&r.stdout).expect("JSON report")
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// An agent that hard-links the run's own `trials.jsonl` where the runner will write the
/// verifier's output does not get the records emptied: `verify.out` is made anew, every record
/// stays, and `--resume` accepts the run. The first trial to start does nothing; the other
/// (the last, so no other trial's record is appended while the link exists) waits until the
/// first one's record is written, then links.
#[test]
fn a_hard_link_to_the_records_left_at_verify_out_does_not_empty_them() {
    let s = Study::new();
    let d = s.path().display();
    let script = format!(
        "mkdir '{d}/first' 2>/dev/null && exit 0; \
         until test -s ../../../trials.jsonl; do sleep 0.01; done; \
         ln ../../../trials.jsonl ../verify.out"
    );
    let study = s.write(
        &sh_agent(&script),
        "[\"sh\", \"-c\", \"echo overwritten\"]",
        1,
        TWO_ARMS,
    );
    let r = run_capped(runner(&study, &s.out(), &[]), "study run");
    assert!(r.status.success(), "{}", r.stderr);
    let recs = records(&s.out());
    assert_eq!(recs.len(), 2, "{recs:?}");
    for rec in &recs {
        assert_eq!(rec["agent"]["code"], 0, "{rec}");
        assert_eq!(rec["verify"]["end"], "exited", "{rec}");
        assert_eq!(rec["success"], true, "{rec}");
    }
    let text = std::fs::read_to_string(s.out().join("trials.jsonl")).expect("records");
    assert!(!text.contains("overwritten"), "{text}");
    let r = run_capped(
        runner(&study, &s.out(), &["--resume"]),
        "study run --resume",
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stderr.contains("0 to run"), "{}", r.stderr);
}

/// A second name given to `trials.jsonl` (an agent linking it into its workspace) makes the
/// runner refuse to append through it: the run stops and says how to go on.
#[test]
fn the_records_are_not_appended_to_once_they_have_a_second_link() {
    let s = Study::new();
    let study = s.write(
        &sh_agent("ln ../../../trials.jsonl records-copy"),
        "[\"true\"]",
        1,
        PLAIN,
    );
    let r = run_capped(runner(&study, &s.out(), &[]), "study run");
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("more than one hard link"), "{}", r.stderr);
    assert!(r.stderr.contains("--resume"), "{}", r.stderr);
    assert_eq!(records(&s.out()).len(), 0);
    // While the link is there, --resume refuses too; once it is removed, the run goes on.
    let link = s
        .out()
        .join("trials/000-alpha-plain/workspace/records-copy");
    let r = run_capped(
        runner(&study, &s.out(), &["--resume"]),
        "study run --resume",
    );
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("more than one hard link"), "{}", r.stderr);
    std::fs::remove_file(&link).expect("remove the link");
    let fixed = s.write(&sh_agent("true"), "[\"true\"]", 1, PLAIN);
    std::fs::copy(&fixed, s.out().join("study.toml")).expect("same study file");
    let r = run_capped(
        runner(&fixed, &s.out(), &["--resume"]),
        "study run --resume",
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(records(&s.out()).len(), 1);
}

/// A FIFO an agent leaves at `verify.out` is replaced by the verifier's output instead of being
/// waited on.
#[test]
fn a_fifo_left_at_verify_out_does_not_hang_the_runner() {
    let s = Study::new();
    let study = s.write(
        &sh_agent("mkfifo ../verify.out"),
        "[\"sh\", \"-c\", \"echo verified\"]",
        1,
        PLAIN,
    );
    let r = run_capped(runner(&study, &s.out(), &[]), "study run");
    assert!(r.status.success(), "{}", r.stderr);
    let recs = records(&s.out());
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["success"], true, "{}", recs[0]);
    let out = std::fs::read_to_string(s.out().join("trials/000-alpha-plain/verify.out"))
        .expect("verify.out is a file again");
    assert_eq!(out, "verified\n");
}

/// `study report` refuses a FIFO where it reads the run's records or study file, and skips (and
/// counts) one at a trial's `mcp.json`, instead of waiting on them.
#[test]
fn fifos_in_a_run_directory_do_not_hang_the_report() {
    let s = Study::new();
    let study = s.write(&sh_agent("true"), "[\"true\"]", 2, PLAIN);
    let r = run_capped(runner(&study, &s.out(), &[]), "study run");
    assert!(r.status.success(), "{}", r.stderr);
    let report = |what: &str| {
        let mut cmd = Command::new(test_support::filesystem());
        cmd.args(["study", "report", "--format", "json"])
            .arg(s.out());
        run_capped(cmd, what)
    };

    let mcp = s.out().join("trials/000-alpha-plain/mcp.json");
    std::fs::remove_file(&mcp).expect("rm mcp.json");
    mkfifo(&mcp);
    let r = report("study report with a FIFO at mcp.json");
    assert!(r.status.success(), "{}", r.stderr);
    let json: Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(json["inputs"]["unreadable_files"], 1, "{}", json["inputs"]);
    assert!(r.stderr.contains("FIFO"), "{}", r.stderr);

    for name in ["study.toml", "trials.jsonl"] {
        let file = s.out().join(name);
        let kept = std::fs::read(&file).expect("read");
        std::fs::remove_file(&file).expect("rm");
        mkfifo(&file);
        let r = report(&format!("study report with a FIFO at {name}"));
        assert_eq!(r.status.code(), Some(1), "{name}: {}", r.stderr);
        assert!(r.stderr.contains("FIFO"), "{name}: {}", r.stderr);
        std::fs::remove_file(&file).expect("rm");
        std::fs::write(&file, kept).expect("restore");
    }
}

/// A trial whose directory is gone is counted and reported as skipped, and the report is
/// still made from the rest.
#[test]
fn a_missing_trial_directory_is_a_counted_skip() {
    let s = Study::new();
    let study = s.write(&sh_agent("true"), "[\"true\"]", 2, PLAIN);
    let r = run_capped(runner(&study, &s.out(), &[]), "study run");
    assert!(r.status.success(), "{}", r.stderr);
    std::fs::remove_dir_all(s.out().join("trials/001-alpha-plain")).expect("rm trial");
    let json = report_json(&s.out());
    assert_eq!(json["inputs"]["records"], 2);
    assert_eq!(json["inputs"]["unreadable_files"], 1, "{}", json["inputs"]);
    let mut cmd = Command::new(test_support::filesystem());
    cmd.args(["study", "report"]).arg(s.out());
    let text = run_capped(cmd, "study report").stdout;
    assert!(
        text.contains("1 trial file(s) missing or unreadable"),
        "{text}"
    );
}

/// The script of the orphan tests: the first attempt of the trial starts a background child
/// that keeps writing into the workspace by its absolute path, records both pids, and hangs;
/// a rerun (the attempt file exists) exits 7 if that child is still running (a zombie has
/// ended: it can write nothing).
fn orphan_script(s: &Study) -> String {
    let d = s.path().display();
    format!(
        "if test -e '{d}/attempted'; then \
           st=$(sed -n 's/^State:[[:space:]]*\\(.\\).*/\\1/p' \"/proc/$(cat '{d}/orphan.pid')/status\" 2>/dev/null); \
           case \"$st\" in ''|Z|X) exit 0 ;; *) exit 7 ;; esac; \
         fi; \
         touch '{d}/attempted'; \
         (while :; do echo x >> '{{workspace}}/orphan-wrote'; sleep 0.05; done) & \
         echo $! > '{d}/orphan.pid'; echo $$ > '{d}/agent.pid'; \
         sleep 1000"
    )
}

/// A runner killed outright takes its agent with it (the kernel's parent-death signal), and
/// `--resume` kills what the agent had started before the trial runs again: the rerun finds
/// the earlier attempt's background child dead.
#[test]
fn agents_die_with_a_killed_runner_and_resume_kills_what_they_left() {
    let s = Study::new();
    let study = s.write(&sh_agent(&orphan_script(&s)), "[\"true\"]", 1, PLAIN);
    let agent_pid = s.path().join("agent.pid");
    let orphan_pid = s.path().join("orphan.pid");
    let _cleanup = KillOnDrop(vec![agent_pid.clone(), orphan_pid.clone()]);
    let mut child = runner(&study, &s.out(), &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the runner");
    wait_until("the agent starting", || {
        read_pid(&agent_pid).is_some() && read_pid(&orphan_pid).is_some()
    });
    let agent = read_pid(&agent_pid).expect("agent pid");
    let orphan = read_pid(&orphan_pid).expect("orphan pid");
    child.kill().expect("SIGKILL the runner");
    child.wait().expect("reap the runner");
    wait_until("the agent dying with its runner", || !alive(agent));
    assert!(
        alive(orphan),
        "the agent's own child lives on until --resume"
    );

    let r = run_capped(
        runner(&study, &s.out(), &["--resume"]),
        "study run --resume",
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert!(
        !alive(orphan),
        "--resume killed the earlier attempt's child"
    );
    let recs = records(&s.out());
    assert_eq!(recs.len(), 1);
    assert_eq!(
        recs[0]["agent"]["code"], 0,
        "the rerun found the earlier attempt's child alive: {}",
        recs[0]
    );
    assert!(
        !s.out()
            .join("trials/000-alpha-plain/workspace/orphan-wrote")
            .exists(),
        "nothing of the earlier attempt wrote into the rerun's workspace"
    );
}

/// SIGHUP (the terminal closing) stops the runner as Ctrl-C does: its agents are killed and it
/// says how to resume.
#[test]
fn a_hangup_stops_the_runner_and_its_agents() {
    let s = Study::new();
    let study = s.write(&sh_agent(&orphan_script(&s)), "[\"true\"]", 1, PLAIN);
    let agent_pid = s.path().join("agent.pid");
    let orphan_pid = s.path().join("orphan.pid");
    let _cleanup = KillOnDrop(vec![agent_pid.clone(), orphan_pid.clone()]);
    let mut child = runner(&study, &s.out(), &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the runner");
    wait_until("the agent starting", || {
        read_pid(&agent_pid).is_some() && read_pid(&orphan_pid).is_some()
    });
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::HUP,
    )
    .expect("SIGHUP");
    let status = wait_capped(&mut child, CAP).expect("the runner ends on SIGHUP");
    assert_eq!(status.code(), Some(130), "{status:?}");
    for pid_file in [&agent_pid, &orphan_pid] {
        let pid = read_pid(pid_file).expect("pid");
        wait_until("the trial's processes ending", || !alive(pid));
    }
}

/// Pipe calls the server refused before running anything are not counted as pipe calls, nor
/// are their stages; the calls that ran are, with theirs.
#[test]
fn refused_pipe_calls_are_not_counted_as_run() {
    let s = Study::new();
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shelpa_pipe","arguments":{"command":"sed -i s/a/b/ seed.txt"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shelpa_pipe","arguments":{"command":"rm seed.txt | sort"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"shelpa_pipe","arguments":{"command":"head -n 1 seed.txt | wc -c"}}}"#,
    ];
    std::fs::write(
        s.task_dir().join("requests.jsonl"),
        requests.join("\n") + "\n",
    )
    .expect("requests");
    // The agent is the server itself, fed the requests on stdin, logging where the trial's
    // call log goes.
    let agent = "command = [\"filesystem\", \"--legacy-pipe\", \"--root\", \"{workspace}\", \
                 \"--call-log\", \"{workspace}/../calls.jsonl\"]\nstdin = \"{task_dir}/requests.jsonl\"";
    let arms = "[[arm]]\nname = \"plain\"\nargs = [\"--legacy-pipe\"]\n";
    let study = s.write(agent, "[\"true\"]", 1, arms);
    let r = run_capped(runner(&study, &s.out(), &[]), "study run");
    assert!(r.status.success(), "{}", r.stderr);
    let log = std::fs::read_to_string(s.out().join("trials/000-alpha-plain/calls.jsonl"))
        .expect("call log");
    assert_eq!(log.lines().count(), 3, "every call was logged: {log}");
    let json = report_json(&s.out());
    let pipe = &json["arms"][0]["pipe"];
    assert_eq!(pipe["pipe_calls"], 1, "{pipe}");
    assert_eq!(pipe["pipe_refused"], 2, "{pipe}");
    assert_eq!(pipe["stages"], 2, "{pipe}");
    let commands: Vec<&str> = pipe["top_commands"]
        .as_array()
        .expect("commands")
        .iter()
        .map(|c| c["command"].as_str().expect("name"))
        .collect();
    assert_eq!(commands, ["head", "wc"], "{pipe}");
}

/// Study files that could only fail every trial are refused before anything runs, each with a
/// message naming what is wrong and what to do: an arm whose args the server rejects, a
/// `{prompt}` too long for a variable or the verifier, a prompt with a NUL byte or not UTF-8
/// where `{prompt}` passes it, and an agent program that does not exist.
#[test]
fn study_files_that_could_only_fail_are_refused_at_load() {
    let s = Study::new();
    let prompt = s.task_dir().join("prompt.md");
    let refused = |study: &Path, expected: &[&str]| {
        let r = run_capped(runner(study, &s.out(), &[]), "study run");
        assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
        for e in expected {
            assert!(r.stderr.contains(e), "expected {e:?} in: {}", r.stderr);
        }
        assert!(!s.out().exists(), "nothing is created for a refused study");
    };

    let typo = "[[arm]]\nname = \"plain\"\nargs = [\"--tols\", \"extended\"]\n";
    refused(
        &s.write(&sh_agent("true"), "[\"true\"]", 1, typo),
        &["arm \"plain\"", "--tols"],
    );

    std::fs::write(&prompt, "p".repeat(200 * 1024)).expect("long prompt");
    let env_agent = format!("{}\nenv = {{ PROMPT = \"{{prompt}}\" }}", sh_agent("true"));
    refused(
        &s.write(&env_agent, "[\"true\"]", 1, PLAIN),
        &["agent.env.PROMPT", "{prompt_file}"],
    );
    std::fs::write(&prompt, "p".repeat(130 * 1024)).expect("long prompt");
    refused(
        &s.write(
            &sh_agent("true"),
            "[\"sh\", \"-c\", \"true\", \"{prompt}\"]",
            1,
            PLAIN,
        ),
        &["verify", "{prompt_file}"],
    );

    std::fs::write(&prompt, b"do\0it\n").expect("NUL prompt");
    let arg_agent = "command = [\"sh\", \"-c\", \"true\", \"{prompt}\"]";
    refused(
        &s.write(arg_agent, "[\"true\"]", 1, PLAIN),
        &["NUL byte", "{prompt_file}"],
    );
    std::fs::write(&prompt, b"caf\xe9\n").expect("Latin-1 prompt");
    refused(
        &s.write(arg_agent, "[\"true\"]", 1, PLAIN),
        &["not UTF-8", "{prompt_file}"],
    );

    std::fs::write(&prompt, "Do alpha.\n").expect("prompt");
    refused(
        &s.write(
            "command = [\"/nonexistent/agent\", \"{prompt_file}\"]",
            "[\"true\"]",
            1,
            PLAIN,
        ),
        &["/nonexistent/agent", "not an executable file"],
    );
    refused(
        &s.write(
            "command = [\"no-such-agent-on-any-path\"]",
            "[\"true\"]",
            1,
            PLAIN,
        ),
        &["no-such-agent-on-any-path", "not found on the PATH"],
    );
    refused(
        &s.write(&sh_agent("true"), "[\"./verify-missing.sh\"]", 1, PLAIN),
        &["verify", "verify-missing.sh"],
    );
}

/// A prompt that is not UTF-8 runs when no `{prompt}` needs it as text: each trial's copy is
/// the file's bytes as they are.
#[test]
fn a_prompt_that_is_not_utf8_runs_when_only_its_file_is_used() {
    let s = Study::new();
    let bytes = b"caf\xe9\n";
    std::fs::write(s.task_dir().join("prompt.md"), bytes).expect("prompt");
    let study = s.write(
        "command = [\"sh\", \"-c\", \"cat \\\"$0\\\" > got.md\", \"{prompt_file}\"]",
        "[\"true\"]",
        1,
        PLAIN,
    );
    let r = run_capped(runner(&study, &s.out(), &[]), "study run");
    assert!(r.status.success(), "{}", r.stderr);
    let got = std::fs::read(s.out().join("trials/000-alpha-plain/workspace/got.md")).expect("got");
    assert_eq!(got, bytes);
    assert_eq!(records(&s.out())[0]["agent"]["code"], 0);
}
