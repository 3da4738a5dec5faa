#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Started by hand in a terminal, the server says what it is waiting for, and Ctrl-D ends it.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};

use test_support::bin::command;
use test_support::temp::temp_dir;

#[test]
fn a_person_at_a_terminal_is_told_what_the_server_is_waiting_for() {
    let root = temp_dir();
    let master: OwnedFd = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().expect("utf8 pty name"))
        .expect("open pty slave");
    let mut child = command()
        .arg("--root")
        .arg(root.path())
        .stdin(Stdio::from(slave))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = child.stderr.take().expect("stderr");
    let mut said = Vec::new();
    let mut buf = [0u8; 512];
    while !said.contains(&b'\n') {
        let n = stderr.read(&mut buf).expect("read stderr");
        assert!(n > 0, "stderr closed before the greeting");
        said.extend_from_slice(&buf[..n]);
    }
    let said = String::from_utf8_lossy(&said);
    assert!(said.contains("waiting for an MCP client"), "{said}");
    assert!(
        said.contains("12 tools") && said.contains("mode: filesystem"),
        "{said}"
    );

    // Ctrl-D at the start of a line is end of input for a terminal.
    let mut master = std::fs::File::from(master);
    master.write_all(b"\x04").expect("send EOF");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit on Ctrl-D"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---- Text from files never reaches a terminal raw ----
//
// Each test below plants an escape sequence where a file's text (a name, a line type, a
// command an agent chose, a record's content) reaches stdout or stderr, runs the real binary,
// and checks that what it printed carries no raw control character, and shows the planted text
// escaped (so the check is not passing because the text was never printed).

/// The planted sequence: set the window title, clear the screen, return to the line's start,
/// and a direction override.
const EVIL: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\rX\u{202e}";
/// How the planted sequence reads once escaped.
const EVIL_SHOWN: &str = "\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\rX\\u{202e}";

/// The first raw control character or direction override in `text`, if any (line feeds and
/// tabs, which cannot hide or rewrite text, are allowed).
fn raw_control(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

fn assert_escaped(what: &str, text: &str) {
    if let Some(c) = raw_control(text) {
        panic!("{what} printed the raw control character {c:?}: {text:?}");
    }
    assert!(
        text.contains(EVIL_SHOWN),
        "{what} did not show the planted text: {text:?}"
    );
}

fn output_of(cmd: &mut std::process::Command) -> (bool, String, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("run filesystem");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn report_shows_skipped_line_types_escaped() {
    let dir = temp_dir();
    let line = serde_json::json!({"type": EVIL, "message": "x"});
    std::fs::write(dir.path().join("s.jsonl"), format!("{line}\n")).expect("transcript");
    let (ok, out, err) = output_of(command().arg("report").arg("--transcripts").arg(dir.path()));
    assert!(ok, "{err}");
    assert!(out.contains("skipped line types"), "{out}");
    assert_escaped("report's skipped line types", &out);
}

#[test]
fn report_warnings_and_errors_show_file_and_folder_names_escaped() {
    let dir = temp_dir();
    // A transcript over the report's size bound (sparse: it takes no room) is skipped with a
    // warning that names it.
    let big = std::fs::File::create(dir.path().join(format!("{EVIL}.jsonl"))).expect("create");
    big.set_len(report::input::MAX_INPUT_BYTES + 1)
        .expect("set_len");
    let (ok, _, err) = output_of(command().arg("report").arg("--transcripts").arg(dir.path()));
    assert!(ok, "{err}");
    assert!(err.contains("warning"), "{err}");
    assert_escaped("report's warning", &err);

    // A log that does not exist is an error that names it.
    let missing = dir.path().join(format!("{EVIL}-calls.jsonl"));
    let (ok, _, err) = output_of(command().arg("report").arg("--log").arg(&missing));
    assert!(!ok);
    assert_escaped("report's error", &err);
}

#[test]
fn study_report_shows_pipe_command_names_escaped() {
    use study::record::{End, ProcessEnd, TrialPaths, TrialRecord, TRIALS_FILE};
    let dir = temp_dir();
    let id = "000-fix-pipe";
    let ended = |code| ProcessEnd {
        end: End::Exited,
        code: Some(code),
        signal: None,
        secs: 1.0,
        error: None,
    };
    let record = TrialRecord {
        id: id.into(),
        task: "fix".into(),
        arm: "pipe".into(),
        harness: String::new(),
        offered: None,
        rep: 0,
        seed: 1,
        order: 0,
        started: "2026-12-01T13:00:00Z".into(),
        agent: ended(0),
        verify: ended(0),
        success: true,
    };
    std::fs::write(
        dir.path().join(TRIALS_FILE),
        format!("{}\n", serde_json::to_string(&record).expect("record")),
    )
    .expect("trials.jsonl");
    let paths = TrialPaths::new(dir.path(), id);
    std::fs::create_dir_all(&paths.dir).expect("trial dir");
    // The call log as the server writes it, with a stage command the agent named.
    let line = serde_json::json!({"ts": "2026-12-01T13:00:01.000Z", "session": "s", "mode": "legacy-pipe",
        "tool": "shelpa_pipe", "outcome": "ok", "stage_count": 2, "stages": ["cat", EVIL]});
    std::fs::write(&paths.call_log, format!("{line}\n")).expect("call log");
    for format in ["text", "csv"] {
        let (ok, out, err) = output_of(
            command()
                .args(["study", "report"])
                .arg(dir.path())
                .args(["--format", format]),
        );
        assert!(ok, "{err}");
        assert_escaped(&format!("study report --format {format}"), &out);
    }
}

#[test]
fn audit_diff_shows_a_records_lines_escaped() {
    let dir = temp_dir();
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(root.join(".shelpa")).expect("mkdir");
    // The second record carries a line that, printed raw, would move up and erase the line
    // before it, hiding it from whoever reviews the diff before `audit restore --force`.
    let hidden = format!("rm -rf ~\n\u{1b}[1A\u{1b}[2K{EVIL}\n");
    std::fs::write(
        root.join(".shelpa").join("notes.txt"),
        format!(
            "--- shelpa:overwrite ts=2026-01-01T00:00:00Z record_id=1767225600000000000 ---\nsafe\n\
             --- shelpa:overwrite ts=2026-01-01T00:00:01Z record_id=1767225601000000000 ---\n{hidden}"
        ),
    )
    .expect("mirror");
    std::fs::write(root.join("notes.txt"), "safe\n").expect("workspace file");
    let (ok, out, err) = output_of(
        command()
            .args(["audit", "diff", "notes.txt", "#1", "#2", "--root"])
            .arg(&root),
    );
    assert!(ok, "{err}");
    assert!(out.contains("+rm -rf ~\n"), "{out}");
    // (The diff splits lines at the CR too, so the planted text is checked up to it.)
    assert!(
        out.contains("+\\u{1b}[1A\\u{1b}[2K\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\r"),
        "{out}"
    );
    assert!(
        raw_control(&out).is_none(),
        "audit diff printed a raw control: {out:?}"
    );
}

/// Runs the binary with `args`, its stdout and stderr on a new pseudo-terminal as when a user
/// runs it at a terminal, and returns whether it succeeded and all it printed. Output processing
/// is off on the terminal, so the bytes read are the bytes the program wrote.
fn on_terminal(args: &[&std::ffi::OsStr]) -> (bool, String) {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    use rustix::termios::{tcgetattr, tcsetattr, OptionalActions, OutputModes};
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    let master =
        openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(std::ffi::OsStr::from_bytes(name.as_bytes()))
        .expect("open the terminal");
    let mut modes = tcgetattr(&terminal).expect("tcgetattr");
    modes.output_modes.remove(OutputModes::OPOST);
    tcsetattr(&terminal, OptionalActions::Now, &modes).expect("tcsetattr");
    let mut cmd = command();
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(terminal.try_clone().expect("dup"))
        .stderr(terminal);
    let mut child = cmd.spawn().expect("run filesystem");
    // The child holds the only ends of the terminal now, so reading ends (EIO) when it exits.
    drop(cmd);
    let mut printed = Vec::new();
    let mut master = std::fs::File::from(master);
    let mut chunk = [0u8; 4096];
    loop {
        match master.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => printed.extend_from_slice(&chunk[..n]),
            Err(e) if e.raw_os_error() == Some(libc_eio()) => break,
            Err(e) => panic!("reading the terminal: {e}"),
        }
    }
    let status = child.wait().expect("wait");
    (
        status.success(),
        String::from_utf8_lossy(&printed).into_owned(),
    )
}

/// EIO, what reading a pseudo-terminal whose other side has closed returns on Linux.
fn libc_eio() -> i32 {
    rustix::io::Errno::IO.raw_os_error()
}

#[test]
fn filesystem_call_shows_file_contents_escaped_on_a_terminal_and_unchanged_elsewhere() {
    let dir = temp_dir();
    let root = dir.path().canonicalize().expect("canonical");
    let content = format!("line one\n\tindented {EVIL}\n");
    std::fs::write(root.join("a.txt"), &content).expect("file");
    std::fs::write(root.join(format!("{EVIL}.txt")), "x").expect("file");
    let call = |tool: &str, args: &str| {
        let args: Vec<&std::ffi::OsStr> = ["call", tool, args, "--no-call-log", "--root"]
            .into_iter()
            .map(std::ffi::OsStr::new)
            .chain([root.as_os_str()])
            .collect();
        on_terminal(&args)
    };
    let (ok, out) = call("read_text_file", r#"{"path":"a.txt"}"#);
    assert!(ok, "{out}");
    assert!(out.starts_with("line one\n\tindented "), "{out:?}");
    assert_escaped("call read_text_file", &out);
    let (ok, out) = call("list_directory", r#"{"path":"."}"#);
    assert!(ok, "{out}");
    assert_escaped("call list_directory", &out);
    // A failed call's message names the path given: on the terminal's stderr, escaped too.
    let (ok, err) = call(
        "read_text_file",
        &serde_json::json!({"path": format!("{EVIL}/none")}).to_string(),
    );
    assert!(!ok);
    assert_escaped("a failed call", &err);
    // Into a pipe the answer is what the tool gave, byte for byte: a script reading a file through
    // `filesystem call` gets the file, and pipe mode's JSON stays JSON.
    let (ok, out, err) = output_of(
        command()
            .args([
                "call",
                "read_text_file",
                r#"{"path":"a.txt"}"#,
                "--no-call-log",
                "--root",
            ])
            .arg(&root),
    );
    assert!(ok, "{err}");
    assert_eq!(out, content, "a piped answer was changed");
}

#[test]
fn report_text_prints_a_table_cell_longer_than_a_format_width() {
    let dir = temp_dir();
    let name = format!("{}{EVIL}", "T".repeat(70_000));
    let call = serde_json::json!({"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "t1", "name": name, "input": {}}]}});
    std::fs::write(dir.path().join("s.jsonl"), format!("{call}\n")).expect("transcript");
    let (ok, out, err) = output_of(command().arg("report").arg("--transcripts").arg(dir.path()));
    assert!(ok, "report failed: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.contains("Calls by tool"), "{out}");
    assert!(
        out.lines().all(|l| l.chars().count() < 1_000),
        "a cell is cut"
    );
    assert!(raw_control(&out).is_none(), "{out:?}");
}
