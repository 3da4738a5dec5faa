#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The root reached through a symlink (issue #14, item 2): `--root /tmp/ws` where `/tmp` is a
//! link (as on macOS), a symlinked home, or a shell whose `$PWD` spells the current directory
//! through a link. Absolute paths written with that spelling are inside the workspace, in both
//! modes and as a pipe `cwd`; anything that merely shares its prefix is still outside.

use std::path::{Path, PathBuf};

use serde_json::json;

use test_support::bin::command;
use test_support::mcp::Session;
use test_support::temp::canonical_temp_dir;

/// `base/real/ws` (holding `a.txt` and `sub/b.txt`), `base/link -> base/real`, and a sibling
/// `base/real/ws-evil` with a secret in it.
struct Layout {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Layout {
    fn new() -> Layout {
        let (tmp, base) = canonical_temp_dir();
        std::fs::create_dir_all(base.join("real/ws/sub")).expect("mkdir");
        std::fs::create_dir_all(base.join("real/ws-evil")).expect("mkdir");
        std::fs::write(base.join("real/ws/a.txt"), "alpha\n").expect("write");
        std::fs::write(base.join("real/ws/sub/b.txt"), "beta\n").expect("write");
        std::fs::write(base.join("real/ws-evil/secret"), "secret\n").expect("write");
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).expect("symlink");
        Layout { _tmp: tmp, base }
    }

    /// The root as the user spells it, through the link.
    fn linked_root(&self) -> PathBuf {
        self.base.join("link/ws")
    }

    fn linked(&self, rel: &str) -> String {
        self.linked_root().join(rel).display().to_string()
    }
}

#[test]
fn filesystem_mode_accepts_the_linked_spelling_of_the_root() {
    let l = Layout::new();
    let mut s = Session::start_in(&l.linked_root(), &[]);
    s.initialize("2025-11-25");

    let (err, text) = s.call_text(1, "read_text_file", json!({"path": l.linked("a.txt")}));
    assert!(!err, "{text}");
    assert!(text.contains("alpha"), "{text}");

    let (err, text) = s.call_text(
        2,
        "write_file",
        json!({"path": l.linked("sub/new.txt"), "content": "new\n"}),
    );
    assert!(!err, "{text}");
    assert_eq!(
        std::fs::read_to_string(l.base.join("real/ws/sub/new.txt")).expect("written"),
        "new\n"
    );

    // The canonical spelling keeps working.
    let canonical = l.base.join("real/ws/a.txt").display().to_string();
    let (err, text) = s.call_text(3, "read_text_file", json!({"path": canonical}));
    assert!(!err, "{text}");

    // A sibling sharing the prefix, a climb out of the spelling, and the link's parent stay out.
    for (i, outside) in [
        l.base.join("link/ws-evil/secret"),
        l.base.join("link/ws/../ws-evil/secret"),
        l.base.join("link/ws-evil"),
    ]
    .iter()
    .enumerate()
    {
        let (err, text) = s.call_text(
            10 + i as i64,
            "read_text_file",
            json!({"path": outside.display().to_string()}),
        );
        assert!(err, "{} must be refused: {text}", outside.display());
        assert!(!text.contains("secret\n"), "{text}");
    }
    // The store is refused under this spelling too.
    let (err, _) = s.call_text(
        20,
        "write_file",
        json!({"path": l.linked(".filesystem/x"), "content": "x"}),
    );
    assert!(err);
}

#[test]
fn pipe_mode_accepts_the_linked_spelling_as_cwd_and_operand() {
    let l = Layout::new();
    let mut s = Session::start_in(&l.linked_root(), &["--legacy-pipe"]);
    s.initialize("2025-11-25");

    let (err, text) = s.call_text(
        1,
        "shelpa_pipe",
        json!({"command": "ls", "cwd": l.linked("sub")}),
    );
    assert!(!err, "{text}");
    assert!(text.contains("b.txt"), "{text}");

    let (err, text) = s.call_text(
        2,
        "shelpa_pipe",
        json!({"command": format!("head -n 1 {}", l.linked("a.txt"))}),
    );
    assert!(!err, "{text}");
    assert!(text.contains("alpha"), "{text}");

    let (err, text) = s.call_text(
        3,
        "shelpa_pipe",
        json!({"command": format!("cd {}", l.linked("sub"))}),
    );
    assert!(!err, "{text}");

    let (err, text) = s.call_text(
        4,
        "shelpa_pipe",
        json!({"command": "ls", "cwd": l.base.join("link/ws-evil").display().to_string()}),
    );
    assert!(err, "{text}");
    assert!(text.contains("PATH_ESCAPE"), "{text}");
}

/// The root given by its canonical path while `$HOME` is a link to its parent: paths through
/// `$HOME` are inside.
#[test]
fn a_symlinked_home_spells_the_root_too() {
    let l = Layout::new();
    let out = command()
        .args(["call", "read_text_file"])
        .arg(json!({"path": l.linked("a.txt")}).to_string())
        .arg("--root")
        .arg(l.base.join("real/ws"))
        .env("HOME", l.base.join("link"))
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("alpha"));

    // Without that home the same spelling is outside.
    let out = command()
        .args(["call", "read_text_file"])
        .arg(json!({"path": l.linked("a.txt")}).to_string())
        .arg("--root")
        .arg(l.base.join("real/ws"))
        .env("HOME", &l.base)
        .output()
        .expect("run");
    assert!(!out.status.success());
}

/// No `--root`: the current directory as the shell spells it (`$PWD`) is accepted.
#[test]
fn the_shells_spelling_of_the_current_directory_is_accepted() {
    let l = Layout::new();
    let run = |pwd: &Path| {
        command()
            .args(["call", "read_text_file"])
            .arg(json!({"path": l.linked("a.txt")}).to_string())
            .current_dir(l.base.join("real/ws"))
            .env("PWD", pwd)
            .env_remove("FILESYSTEM_ROOT")
            .env("HOME", &l.base)
            .output()
            .expect("run")
    };
    let out = run(&l.linked_root());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A `$PWD` that names another directory is ignored, so the spelling is outside again.
    let out = run(&l.base.join("real/ws-evil"));
    assert!(!out.status.success());
}

/// `--server`: a call that names its root through the link may use that spelling in its paths.
#[test]
fn the_daemon_accepts_the_spelling_a_call_names_its_root_by() {
    let l = Layout::new();
    let mut s = Session::spawn(
        &[
            "--server".as_ref(),
            "--allow-root".as_ref(),
            l.base.as_os_str(),
        ],
        &[],
    );
    s.initialize("2025-11-25");
    let root = l.linked_root().display().to_string();
    let (err, text) = s.call_text(
        1,
        "read_text_file",
        json!({"root": root, "path": l.linked("a.txt")}),
    );
    assert!(!err, "{text}");
    assert!(text.contains("alpha"), "{text}");
    let (err, text) = s.call_text(
        2,
        "read_text_file",
        json!({"root": root, "path": l.base.join("link/ws-evil/secret").display().to_string()}),
    );
    assert!(err, "{text}");
}

/// `--server`: a root first opened by its canonical path and then named through the link accepts
/// the link's spelling from that call on.
#[test]
fn the_daemon_learns_a_later_spelling_of_an_open_root() {
    let l = Layout::new();
    let mut s = Session::spawn(
        &[
            "--server".as_ref(),
            "--allow-root".as_ref(),
            l.base.as_os_str(),
        ],
        &[],
    );
    s.initialize("2025-11-25");
    let canonical = l.base.join("real/ws").display().to_string();
    let (err, text) = s.call_text(
        1,
        "read_text_file",
        json!({"root": canonical, "path": "a.txt"}),
    );
    assert!(!err, "{text}");
    let (err, text) = s.call_text(
        2,
        "read_text_file",
        json!({"root": l.linked_root().display().to_string(), "path": l.linked("sub/b.txt")}),
    );
    assert!(!err, "{text}");
    assert!(text.contains("beta"), "{text}");
}
