#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Store, mirror and log files that are FIFOs (or other special files) make the commands that
//! need them fail with a clear error; nothing waits forever on one.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use test_support::bin::command;
use test_support::cli::in_root;
use test_support::cli::printed;
use test_support::temp::canonical_temp_dir;

/// What a command did, once it finished (a command still running after a generous limit is a
/// hang, and fails the test).
struct Ran {
    ok: bool,
    text: String,
}

fn run(root: &Path, args: &[&str]) -> Ran {
    let mut child = in_root(root, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`filesystem {}` hung", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut text = String::new();
    for pipe in [
        child.stdout.take().map(|p| Box::new(p) as Box<dyn Read>),
        child.stderr.take().map(|p| Box::new(p) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut pipe = pipe;
        let _ = pipe.read_to_string(&mut text);
    }
    Ran {
        ok: status.success(),
        text,
    }
}

fn mkfifo(path: &Path) {
    if path.exists() {
        std::fs::remove_file(path).expect("remove the regular file");
    }
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// A workspace with a two-version history of `a.txt`, a mirror of it with two records, and an
/// empty trash log.
fn fixture() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = canonical_temp_dir();
    for content in ["one\n", "two\n"] {
        let r = run(
            &root,
            &[
                "call",
                "write_file",
                &serde_json::json!({"path": "a.txt", "content": content}).to_string(),
                "--backup",
            ],
        );
        assert!(r.ok, "{}", r.text);
    }
    std::fs::create_dir_all(root.join(".shelpa")).expect("mkdir");
    std::fs::write(
        root.join(".shelpa/a.txt"),
        "--- shelpa:overwrite ts=2026-01-01T00:00:00Z record_id=1767225600000000000 ---\none\n\
         --- shelpa:overwrite ts=2026-01-01T00:00:01Z record_id=1767225601000000000 ---\ntwo\n",
    )
    .expect("mirror");
    (dir, root)
}

/// The commands tried against every planted FIFO.
const WRITE: &[&str] = &[
    "call",
    "write_file",
    r#"{"path":"a.txt","content":"three\n"}"#,
    "--backup",
];
const UNDO: &[&str] = &["call", "undo_file", r#"{"path":"a.txt"}"#, "--backup"];
const MOVE: &[&str] = &[
    "call",
    "move_file",
    r#"{"source":"a.txt","destination":"b.txt"}"#,
    "--backup",
];
const DELETE: &[&str] = &["call", "delete_file", r#"{"path":"a.txt"}"#, "--backup"];
const TRASH: &[&str] = &["call", "list_trash", "{}"];
const IMPORT: &[&str] = &["audit", "import"];
const RESTORE: &[&str] = &["audit", "restore", "a.txt", "#1"];
const REPAIR: &[&str] = &["check", "--repair"];
const CHECK: &[&str] = &["check"];

/// A FIFO where a pending note goes fails only the operation that writes that note; every other
/// command goes on working (a note that cannot be read must not disable the store).
#[test]
fn fifos_in_the_store_make_commands_fail_never_hang() {
    let versions = ".filesystem/a.txt";
    let head = format!("{versions}/.head");
    let current = format!("{versions}/00002");
    // Each FIFO, with the commands that must read or write that very file (and so fail).
    let cases: Vec<(&str, Vec<&[&str]>)> = vec![
        (
            ".filesystem/.lock",
            vec![WRITE, UNDO, MOVE, DELETE, TRASH, IMPORT, RESTORE, REPAIR],
        ),
        (".filesystem/.imports", vec![IMPORT]),
        (".filesystem/.pending-move", vec![MOVE]),
        (".filesystem/.pending-delete", vec![DELETE]),
        (&head, vec![WRITE, UNDO, IMPORT, RESTORE]),
        (&current, vec![WRITE, RESTORE]),
    ];
    let all = [
        WRITE, UNDO, MOVE, DELETE, TRASH, IMPORT, RESTORE, REPAIR, CHECK,
    ];
    for (fifo, failing) in &cases {
        for cmd in all {
            let (_dir, root) = fixture();
            mkfifo(&root.join(fifo));
            let r = run(&root, cmd);
            if failing.contains(&cmd) {
                assert!(!r.ok, "{fifo}: `{}` succeeded: {}", cmd.join(" "), r.text);
                assert!(
                    r.text.contains("FIFO"),
                    "{fifo}: `{}` does not say why: {}",
                    cmd.join(" "),
                    r.text
                );
            } else if fifo.contains(".pending-") && !matches!(cmd, REPAIR | CHECK) {
                assert!(r.ok, "{fifo}: `{}` failed: {}", cmd.join(" "), r.text);
            }
            // The FIFO is still a FIFO: nothing replaced or wrote through it.
            let kind = std::fs::symlink_metadata(root.join(fifo)).map(|m| m.file_type());
            // (A move or delete carries a FIFO inside a history along with the history.)
            let carried = fifo.starts_with(versions) && matches!(cmd, MOVE | DELETE);
            if !matches!(cmd, REPAIR) && !carried {
                use std::os::unix::fs::FileTypeExt;
                assert!(kind.is_ok_and(|k| k.is_fifo()), "{fifo} after {cmd:?}");
            }
        }
    }
}

#[test]
fn a_fifo_mirror_is_refused_by_every_audit_command() {
    let (_dir, root) = fixture();
    mkfifo(&root.join(".shelpa/a.txt"));
    for cmd in [
        &["audit", "log", "a.txt"][..],
        &["audit", "show", "a.txt"],
        &["audit", "grep", "one", "a.txt"],
        &["audit", "diff", "a.txt", "#1"],
        &["audit", "restore", "a.txt", "#1"],
    ] {
        let r = run(&root, cmd);
        assert!(!r.ok, "`{}` succeeded: {}", cmd.join(" "), r.text);
    }
    for cmd in [&["audit", "list"][..], &["audit", "grep", "one"], IMPORT] {
        let r = run(&root, cmd);
        assert!(r.ok, "`{}`: {}", cmd.join(" "), r.text);
    }
}

#[test]
fn a_fifo_as_the_call_log_costs_the_line_not_the_call() {
    let (_dir, root) = fixture();
    mkfifo(&root.join(".filesystem/.calls.jsonl"));
    let r = run(&root, &["call", "read_text_file", r#"{"path":"a.txt"}"#]);
    assert!(r.ok, "{}", r.text);
    assert!(r.text.contains("two"), "{}", r.text);
}

/// The control bytes that must never reach a terminal raw from a name.
fn has_raw_controls(text: &str) -> bool {
    text.bytes()
        .any(|b| matches!(b, 0x1b | b'\r' | 0x07 | 0x08 | 0x7f))
        || text.contains('\u{9b}')
        || text.contains('\u{202e}')
}

#[test]
fn names_with_control_characters_are_printed_escaped() {
    let (_dir, root) = canonical_temp_dir();
    let evil = "e\u{1b}]0;pwned\u{7}\u{1b}[2Jvil\rname\u{202e}txt.md";
    std::fs::create_dir_all(root.join(".shelpa")).expect("mkdir");
    std::fs::write(
        root.join(".shelpa").join(evil),
        "--- shelpa:overwrite ts=2026-01-01T00:00:00Z record_id=1767225600000000000 ---\nhit one\n\
         --- shelpa:overwrite ts=2026-01-01T00:00:01Z record_id=1767225601000000000 ---\nhit two\n",
    )
    .expect("mirror");
    std::fs::write(root.join(evil), "hit two\n").expect("workspace file");
    for cmd in [
        &["audit", "list"][..],
        &["audit", "grep", "hit"],
        &["audit", "log", evil],
        &["audit", "diff", evil, "#1"],
        &["audit", "diff", evil, "#1", "#2"],
        &["audit", "verify"],
        &["audit", "import"],
        &["audit", "restore", evil, "#1"],
        &["audit", "show", "no\u{1b}[2Jsuch"],
    ] {
        let r = run(&root, cmd);
        assert!(
            !has_raw_controls(&r.text),
            "`audit {}` printed a raw control character: {:?}",
            cmd[1],
            r.text
        );
        // Every command but `log` and `verify` (which have nothing to say about a clean
        // mirror's name) shows the name, escaped.
        assert!(
            r.text.contains("\\u{1b}") || ["log", "verify"].contains(&cmd[1]),
            "`audit {}`: {:?}",
            cmd[1],
            r.text
        );
    }

    // The report, from a call log whose session and tool names a client could have chosen.
    let log = root.join("calls.jsonl");
    let line = |session: &str, tool: &str| {
        serde_json::json!({"ts": "2026-01-01T00:00:00.000Z", "session": session, "mode": "filesystem",
            "tool": tool, "outcome": "error", "error_kind": "X\u{1b}[31m,\"q\"\r"})
        .to_string()
    };
    std::fs::write(
        &log,
        format!(
            "{}\n{}\n",
            line("s\u{1b}[2J,1", "read\u{1b}]0;x\u{7}"),
            line("plain", "=cmd|' /C calc'!A0")
        ),
    )
    .expect("log");
    for format in ["csv", "text"] {
        let r = run_plain(&[
            "report",
            "--format",
            format,
            "--log",
            log.to_str().expect("utf8"),
        ]);
        assert!(r.ok, "{}", r.text);
        assert!(!has_raw_controls(&r.text), "report {format}: {:?}", r.text);
        if format == "csv" {
            for row in r.text.lines() {
                assert_eq!(csv_fields(row), 6, "{row:?}");
            }
            assert!(r.text.contains("\"s\\u{1b}[2J,1\""), "{}", r.text);
        }
    }
}

/// A command outside any workspace.
fn run_plain(args: &[&str]) -> Ran {
    let out = command().args(args).output().expect("run");
    Ran {
        ok: out.status.success(),
        text: printed(&out),
    }
}

/// The number of fields of one RFC 4180 row (quoted fields may hold commas and doubled quotes).
fn csv_fields(row: &str) -> usize {
    let mut fields = 1;
    let mut quoted = false;
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields += 1,
            _ => {}
        }
    }
    assert!(!quoted, "unbalanced quotes in {row:?}");
    fields
}

#[test]
fn a_record_id_at_the_largest_value_is_never_reused() {
    let (_dir, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join(".shelpa")).expect("mkdir");
    let mirror = format!(
        "--- shelpa:overwrite ts=2026-01-01T00:00:00Z record_id=5 ---\nold\n\
         --- shelpa:overwrite ts=2026-01-01T00:00:01Z record_id={} ---\nnew\n",
        u64::MAX
    );
    std::fs::write(root.join(".shelpa/a.txt"), &mirror).expect("mirror");
    std::fs::write(root.join("a.txt"), "new\n").expect("file");

    // Both mirror writers, `audit restore` and tee, read a future id as forged content, not as
    // the id to follow (one record-id rule): each record gets a fresh id, and u64::MAX is still
    // there only once.
    let r = run(&root, &["audit", "restore", "a.txt", "#1"]);
    assert!(r.ok, "{}", r.text);
    let after = std::fs::read_to_string(root.join(".shelpa/a.txt")).expect("mirror");
    assert!(after.starts_with(&mirror), "{after}");
    assert!(after.ends_with("---\nold\n"), "{after}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).expect("file"),
        "old\n"
    );

    let r = run(
        &root,
        &[
            "--legacy-pipe",
            "call",
            "shelpa_write",
            r#"{"path":"a.txt","content":"newer\n"}"#,
        ],
    );
    assert!(r.ok, "{}", r.text);
    let after = std::fs::read_to_string(root.join(".shelpa/a.txt")).expect("mirror");
    assert_eq!(after.matches(&u64::MAX.to_string()).count(), 1, "{after}");
    assert!(after.ends_with("---\nnewer\n"), "{after}");
}

#[test]
fn audit_grep_streams_a_mirror_of_many_records_in_bounded_memory() {
    let (_dir, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join(".shelpa")).expect("mkdir");
    let records = 200_000u64;
    let mut mirror = Vec::with_capacity(24 << 20);
    for i in 0..records {
        use std::io::Write;
        writeln!(
            mirror,
            "--- shelpa:overwrite ts=2026-01-01T00:00:00Z record_id={} ---\nline {i} of the log",
            1_767_225_600_000_000_000 + i
        )
        .expect("format");
    }
    std::fs::write(root.join(".shelpa/log.txt"), &mirror).expect("mirror");
    let mirror_bytes = mirror.len();
    drop(mirror);

    // Reaped below by wait4, which also reports its own peak memory.
    #[allow(clippy::zombie_processes)]
    let child = command()
        .args(["audit", "grep", "--json", "^line (7|199999) "])
        .arg("--root")
        .arg(&root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.expect("stdout");
    let mut out = String::new();
    stdout.read_to_string(&mut out).expect("read");
    // The child's own peak resident size, from wait4 (not the test process's other children).
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let matches = v["matches"].as_array().expect("matches");
    assert_eq!(matches.len(), 2, "{out}");
    assert_eq!(
        matches[1]["record_id"],
        serde_json::json!(1_767_225_600_000_199_999u64)
    );
    assert_eq!(matches[1]["position"], serde_json::json!(records));
    let peak = usage.ru_maxrss as usize * 1024;
    // Reading the mirror whole took about three times its size; streaming takes a few MB.
    assert!(
        peak < mirror_bytes + (8 << 20),
        "peak RSS {peak} bytes for a {mirror_bytes}-byte mirror"
    );
}

#[test]
fn a_planted_version_number_near_u64_max_is_refused_as_damage_without_writing() {
    let (_d, root) = canonical_temp_dir();
    let max = u64::MAX.to_string();
    std::fs::write(root.join("f.txt"), "same").expect("file");
    std::fs::create_dir_all(root.join(".filesystem/f.txt")).expect("mkdir");
    std::fs::write(root.join(".filesystem/f.txt").join(&max), "same").expect("snapshot");
    std::fs::write(root.join(".filesystem/f.txt/.head"), format!("{max}\n")).expect("head");
    let out = run(
        &root,
        &[
            "call",
            "write_file",
            r#"{"path":"f.txt","content":"new"}"#,
            "--backup",
        ],
    );
    assert!(!out.ok, "{}", out.text);
    assert!(
        out.text.contains("damaged") && out.text.contains("from 1 to 999999999"),
        "{}",
        out.text
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".filesystem/f.txt/.head")).expect("head"),
        format!("{max}\n"),
        "the head is left as it was"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("f.txt")).expect("file"),
        "same"
    );
    let checked = run(&root, &["check"]);
    assert!(
        checked.text.contains("cannot be used") && checked.text.contains(".head"),
        "{}",
        checked.text
    );
}

/// `filesystem check` on `root` under an address-space limit of `kib` KiB: (exit code, output).
fn check_within(root: &Path, kib: u64) -> (Option<i32>, String) {
    let bin = command().get_program().to_owned();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(bin)
        .arg("check")
        .arg("--root")
        .arg(root)
        .env_remove("FILESYSTEM_ROOT")
        .output()
        .expect("run check");
    (out.status.code(), printed(&out))
}

#[test]
fn check_lists_a_huge_gap_below_a_head_in_memory_bounded_by_the_snapshots_present() {
    let (_d, root) = canonical_temp_dir();
    let top: u64 = 200_000_000;
    let dir = root.join(".filesystem/f.txt");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("00001"), "1").expect("snapshot");
    std::fs::write(dir.join("00003"), "3").expect("snapshot");
    std::fs::write(dir.join(top.to_string()), "top").expect("snapshot");
    std::fs::write(dir.join(".head"), format!("{top}\n")).expect("head");
    // One entry per missing version would need gigabytes; the runs need a few bytes.
    let (code, text) = check_within(&root, 1024 * 1024);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(&format!("2, 4-{}", top - 1))
            && text.contains(&format!("({} in all)", top - 3)),
        "{text}"
    );
}
