#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `filesystem report` on input built to cost it: a line far past the line bound, two long
//! commands it must compare, inputs that are not files, and a transcript it cannot read. Each
//! runs the real binary; memory is the child's own peak (`VmHWM`, read when it is done reading),
//! time only a cap that a bounded implementation never comes near.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use test_support::bin::command;
use test_support::temp::temp_dir;

/// What a finished report printed.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` to its end.
fn run(cmd: &mut Command) -> Ran {
    let out = cmd.stdin(Stdio::null()).output().expect("run filesystem");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `cmd` to its end and reads the child's peak resident memory in KiB (`VmHWM`) while it is
/// certainly alive and done reading: its stdout is a pipe shrunk to one page, which the report
/// writes only after it has read all its input, so once its first byte has come, the child
/// cannot exit before the rest of an output longer than the pipe is read. (The output's length
/// is checked, so the construction cannot silently fail.)
fn run_measured(cmd: &mut Command) -> (Ran, u64) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills in two descriptors, which are owned below.
    assert_eq!(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
        0,
        "pipe2"
    );
    // SAFETY: both were just opened and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: F_SETPIPE_SZ takes an int; the kernel rounds it up to one page.
    let size = unsafe { libc::fcntl(read.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    assert!(size > 0, "F_SETPIPE_SZ");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn filesystem");
    // The command keeps what it was given: let go of this side's copy of the write end, or
    // the pipe would never end.
    cmd.stdout(Stdio::null());
    let mut err = child.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).expect("read stderr");
        s
    });
    let mut out = std::fs::File::from(read);
    let mut first = [0u8; 1];
    let got = out.read(&mut first).expect("read stdout");
    let peak_kib = test_support::procs::peak_rss_kib(child.id()).expect("VmHWM of the child");
    let mut rest = Vec::new();
    out.read_to_end(&mut rest).expect("read stdout");
    let status = child.wait().expect("wait");
    let mut stdout = first[..got].to_vec();
    stdout.extend_from_slice(&rest);
    if status.success() {
        assert!(
            stdout.len() > 2 * size as usize,
            "the output ({} bytes) must be longer than the pipe for the measure to hold",
            stdout.len()
        );
    }
    let ran = Ran {
        code: status.code(),
        stdout: String::from_utf8(stdout).expect("utf-8"),
        stderr: errors.join().expect("stderr reader"),
    };
    (ran, peak_kib)
}

fn json_of(ran: &Ran) -> Value {
    assert_eq!(ran.code, Some(0), "report failed: {}", ran.stderr);
    serde_json::from_str(&ran.stdout).expect("report prints JSON")
}

/// An assistant line calling `name` with `input`.
fn tool_use(id: &str, name: &str, input: Value) -> String {
    json!({"type": "assistant", "message": {"role": "assistant",
        "content": [{"type": "tool_use", "id": id, "name": name, "input": input}]}})
    .to_string()
}

/// A user line with the result of call `id`.
fn tool_result(id: &str, error: bool) -> String {
    json!({"type": "user", "message": {"role": "user",
        "content": [{"type": "tool_result", "tool_use_id": id, "is_error": error,
                     "content": if error { "Error: exit 1" } else { "done" }}]}})
    .to_string()
}

/// A JSON array of `n` zeros: the shape that costs a JSON tree the most per byte.
fn zeros(n: usize) -> String {
    let mut s = String::with_capacity(2 * n + 2);
    s.push('[');
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push('0');
    }
    s.push(']');
    s
}

#[test]
fn a_line_past_the_bound_is_skipped_and_counted_without_being_held() {
    let dir = temp_dir();
    // Small sessions beside it make the output long enough to measure by (see run_measured).
    for i in 0..40 {
        std::fs::write(
            dir.path().join(format!("small-{i:02}.jsonl")),
            format!(
                "{}\n",
                tool_use(&format!("s{i}"), "Grep", json!({"pattern": "x"}))
            ),
        )
        .expect("transcript");
    }
    let path = dir.path().join("big.jsonl");
    let mut f = std::fs::File::create(&path).expect("create");
    // 52 MB of one line, over six times the line bound: parsed into a tree, it would take well over
    // a gigabyte.
    let pad = zeros(26_000_000);
    let big = format!(
        r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"big","name":"Bash","input":{{"command":"ls","pad":{pad}}}}}]}}}}"#
    );
    assert!(big.len() > 6 * report::lines::MAX_LINE_BYTES);
    writeln!(f, "{}", tool_use("t1", "Read", json!({"file_path": "a"}))).expect("write");
    writeln!(f, "{big}").expect("write");
    writeln!(f, "{}", tool_result("t1", false)).expect("write");
    drop(f);
    drop(big);
    let (ran, peak_kib) = run_measured(
        command()
            .arg("report")
            .arg("--transcripts")
            .arg(dir.path())
            .args(["--format", "json"]),
    );
    // Generous: the line bound is 8 MiB, the binary itself a few; holding the line whole would
    // be 52 MB before any parsing.
    assert!(
        peak_kib < 40 * 1024,
        "peak {peak_kib} KiB for a line that should never be held"
    );
    let json = json_of(&ran);
    let inputs = &json["transcripts"]["inputs"];
    assert_eq!(inputs["lines"], 43, "{inputs}");
    assert_eq!(inputs["long_lines"], 1, "{inputs}");
    // The lines around it are read: the call and its result.
    let by_tool = &json["transcripts"]["total"]["interfaces"]["builtin"]["by_tool"];
    assert_eq!(by_tool["Read"], 1, "{by_tool}");
    let big = json["transcripts"]["per_session"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == "big"))
        .expect("the big file's session");
    assert_eq!(big["calls"], 1, "{big}");
}

#[test]
fn a_call_log_line_past_the_bound_is_skipped_and_counted() {
    let dir = temp_dir();
    let path = dir.path().join("calls.jsonl");
    let ok = json!({"session": "s", "tool": "read_text_file", "outcome": "ok"}).to_string();
    let big = json!({"session": "s", "tool": "write_file", "outcome": "ok",
        "args": {"content": "x".repeat(report::lines::MAX_LINE_BYTES + 1)}})
    .to_string();
    std::fs::write(&path, format!("{ok}\n{big}\n{ok}\n")).expect("log");
    let ran = run(command()
        .arg("report")
        .arg("--log")
        .arg(&path)
        .args(["--format", "json"]));
    let json = json_of(&ran);
    assert_eq!(json["call_logs"]["inputs"]["long_lines"], 1);
    assert_eq!(json["call_logs"]["total"]["calls"], 2);
    let text = command()
        .arg("report")
        .arg("--log")
        .arg(&path)
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("1 line(s) over 8 MiB skipped"), "{text}");
}

/// A command of `len` characters from a fixed pseudo-random sequence: no two seeds share
/// long runs, which is what makes a character diff of two of them slow. It is one word, so
/// two of them are not the same stage commands, and their texts must be compared.
fn noise(seed: u64, len: usize) -> String {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'a' + ((x >> 33) % 26) as u8)
        })
        .collect()
}

#[test]
fn telling_a_retry_of_two_long_commands_finishes() {
    let dir = temp_dir();
    let path = dir.path().join("s.jsonl");
    let lines = [
        tool_use("t1", "Bash", json!({"command": noise(1, 128_000)})),
        tool_result("t1", true),
        tool_use("t2", "Bash", json!({"command": noise(2, 128_000)})),
        tool_result("t2", false),
        tool_use("t3", "Bash", json!({"command": noise(3, 1_000_000)})),
        tool_result("t3", true),
        tool_use("t4", "Bash", json!({"command": noise(4, 1_000_000)})),
        tool_result("t4", false),
    ];
    std::fs::write(&path, lines.join("\n")).expect("transcript");
    let mut child = command()
        .arg("report")
        .arg("--transcripts")
        .arg(&path)
        .args(["--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Read while it runs: its output names the commands, and is longer than a pipe holds.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).expect("read");
            v
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    // A cap, not a speed test: a comparison bounded in its input takes well under a second; a
    // character diff of these commands takes from minutes to hours.
    let cap = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > cap {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the report was still comparing two long commands after 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = std::process::Output {
        status,
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let builtin = &json["transcripts"]["total"]["interfaces"]["builtin"];
    assert_eq!(builtin["calls"], 4, "{builtin}");
    assert_eq!(builtin["errors"], 2, "{builtin}");
}

#[test]
fn a_device_or_fifo_given_as_a_log_is_refused_with_what_to_give() {
    let dir = temp_dir();
    let fifo = dir.path().join("calls.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("path");
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    for (given, what) in [
        (Path::new("/dev/zero"), "a device"),
        (fifo.as_path(), "a FIFO"),
    ] {
        let out = command()
            .arg("report")
            .arg("--log")
            .arg(given)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&given.display().to_string()), "{err}");
        assert!(
            err.contains(&format!("is {what}, not a regular file")),
            "{err}"
        );
        // What to do instead: name a call log, not "remove it".
        assert!(err.contains(".filesystem/.calls.jsonl"), "{err}");
        assert!(!err.contains("remove it"), "{err}");
    }
    // A directory where a log file is wanted says so too.
    let out = command()
        .arg("report")
        .arg("--log")
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a directory"));
}

#[test]
fn a_transcript_over_the_size_bound_is_skipped_with_the_reason() {
    let dir = temp_dir();
    std::fs::write(
        dir.path().join("a.jsonl"),
        format!(
            "{}\n{}\n",
            tool_use("t1", "Edit", json!({"file_path": "a"})),
            tool_result("t1", false)
        ),
    )
    .expect("transcript");
    // Sparse: it takes no room on disk, and would take minutes to read.
    let big = std::fs::File::create(dir.path().join("b.jsonl")).expect("create");
    big.set_len(report::input::MAX_INPUT_BYTES + 1)
        .expect("set_len");
    let ran = run(command()
        .arg("report")
        .arg("--transcripts")
        .arg(dir.path())
        .args(["--format", "json"]));
    let json = json_of(&ran);
    assert_eq!(json["transcripts"]["inputs"]["files"], 1);
    assert_eq!(json["transcripts"]["inputs"]["unreadable_files"], 1);
    assert!(
        ran.stderr.contains("b.jsonl") && ran.stderr.contains("bytes, more than"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("split it"), "{}", ran.stderr);
}

#[test]
fn an_unreadable_transcript_is_skipped_and_the_rest_counted() {
    let dir = temp_dir();
    let tree = dir.path().join("projects");
    std::fs::create_dir(&tree).expect("mkdir");
    for (file, tool) in [
        ("a.jsonl", "Edit"),
        ("b.jsonl", "Write"),
        ("c.jsonl", "Read"),
    ] {
        std::fs::write(
            tree.join(file),
            format!(
                "{}\n{}\n",
                tool_use(file, tool, json!({"file_path": file})),
                tool_result(file, false)
            ),
        )
        .expect("transcript");
    }
    let open = |p: &Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    open(dir.path(), 0o755);
    open(&tree, 0o755);
    for f in ["a.jsonl", "c.jsonl"] {
        open(&tree.join(f), 0o644);
    }
    open(&tree.join("b.jsonl"), 0o000);
    // A folder that cannot be listed, whose name would drive the terminal if printed raw.
    let folder = tree.join("\u{1b}[2J\u{1b}]0;pwned\u{7}");
    std::fs::create_dir(&folder).expect("mkdir");
    open(&folder, 0o000);
    let mut cmd = command();
    cmd.arg("report")
        .arg("--transcripts")
        .arg(&tree)
        .args(["--format", "json"]);
    unprivileged(&mut cmd);
    let ran = run(&mut cmd);
    let json = json_of(&ran);
    let inputs = &json["transcripts"]["inputs"];
    assert_eq!(inputs["files"], 2, "{inputs}");
    assert_eq!(inputs["unreadable_files"], 1, "{inputs}");
    let by_tool = &json["transcripts"]["total"]["interfaces"]["builtin"]["by_tool"];
    assert_eq!(by_tool["Edit"], 1, "{by_tool}");
    assert_eq!(by_tool["Read"], 1, "{by_tool}");
    assert!(by_tool["Write"].is_null(), "{by_tool}");
    assert!(
        ran.stderr.contains("b.jsonl") && ran.stderr.contains("ermission denied"),
        "the warning names the file and why: {}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("\\u{1b}[2J\\u{1b}]0;pwned\\u{7}': it cannot be listed"),
        "the folder's warning shows its name escaped: {}",
        ran.stderr
    );
    assert!(
        !ran.stderr.contains('\u{1b}') && !ran.stderr.contains('\u{7}'),
        "a raw escape reached stderr: {:?}",
        ran.stderr
    );
}

/// Makes `cmd` run as nobody when the test runs as root, whom permissions do not stop.
fn unprivileged(cmd: &mut Command) {
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    // SAFETY: setgroups, setgid and setuid are async-signal-safe, and nothing else runs
    // between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
