//! Store, mirror and log files that are FIFOs (or other special files) make the commands that
//! need them fail with a clear error; nothing waits forever on one.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_filesystem");

/// What a command did, once it finished (a command still running after a generous limit is a
/// hang, and fails the test).
struct Ran {
    ok: bool,
    text: String,
}

fn run(root: &Path, args: &[&str]) -> Ran {
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--root")
        .arg(root)
        .env_remove("FILESYSTEM_ROOT")
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
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().canonicalize().expect("canonical");
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
const TRASH: &[&str] = &["call", "list_trash", "{}"];
const IMPORT: &[&str] = &["audit", "import"];
const RESTORE: &[&str] = &["audit", "restore", "a.txt", "#1"];
const REPAIR: &[&str] = &["check", "--repair"];
const CHECK: &[&str] = &["check"];

#[test]
fn fifos_in_the_store_make_commands_fail_never_hang() {
    let versions = ".filesystem/files/a.txt/#versions";
    let head = format!("{versions}/head");
    let current = format!("{versions}/00002");
    // Each FIFO, with the commands that must read or write that very file (and so fail).
    let cases: Vec<(&str, Vec<&[&str]>)> = vec![
        (
            ".filesystem/.lock",
            vec![WRITE, UNDO, TRASH, IMPORT, RESTORE, REPAIR],
        ),
        (".filesystem/.imports", vec![IMPORT]),
        (
            ".filesystem/.pending-move",
            vec![WRITE, UNDO, TRASH, IMPORT, RESTORE, REPAIR],
        ),
        (
            ".filesystem/.pending-delete",
            vec![WRITE, UNDO, TRASH, IMPORT, RESTORE, REPAIR],
        ),
        (&head, vec![WRITE, UNDO, IMPORT, RESTORE]),
        (&current, vec![WRITE, RESTORE]),
    ];
    let all = [WRITE, UNDO, TRASH, IMPORT, RESTORE, REPAIR, CHECK];
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
            }
            // The FIFO is still a FIFO: nothing replaced or wrote through it.
            let kind = std::fs::symlink_metadata(root.join(fifo)).map(|m| m.file_type());
            if !matches!(cmd, REPAIR) {
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
