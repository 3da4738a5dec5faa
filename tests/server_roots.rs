#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `--server` confinement: the daemon serves only roots at or below its allowed places
//! (`--allow-root`, `FILESYSTEM_ALLOW_ROOTS`, else the user's home), resolved through symlinks,
//! and never a root that is or lies inside a `.filesystem/` or `.shelpa/` store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use test_support::bin::command;
use test_support::mcp::{text, Session};
use test_support::temp::canonical_temp_dir;

/// A daemon command with a clean environment for the settings under test: no inherited allow-list
/// and a HOME that serves nothing useful unless a test sets it.
fn daemon(args: &[&str]) -> Command {
    let mut cmd = command();
    cmd.arg("--server")
        .args(args)
        .env_remove("FILESYSTEM_ALLOW_ROOTS")
        .env_remove("FILESYSTEM_ROOT")
        .env("HOME", "/");
    cmd
}

/// Starts a daemon and completes the handshake.
fn serve(cmd: Command) -> Session {
    let mut s = Session::from_command(cmd);
    s.initialize("2025-11-25");
    s
}

/// A daemon allowed exactly `dirs`.
fn serve_allowing(dirs: &[&Path], extra: &[&str]) -> Session {
    let mut cmd = daemon(extra);
    for d in dirs {
        cmd.arg("--allow-root").arg(d);
    }
    serve(cmd)
}

/// Runs a daemon command that is expected not to start.
fn start_refused(mut cmd: Command) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    assert!(
        !out.status.success(),
        "the daemon started: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A temp directory by its canonical name (the daemon reports canonical paths).
fn temp() -> (tempfile::TempDir, PathBuf) {
    let (dir, path) = canonical_temp_dir();
    (dir, path)
}

fn mkdirs(base: &Path, dirs: &[&str]) {
    for d in dirs {
        std::fs::create_dir_all(base.join(d)).expect("mkdir");
    }
}

/// Calls `name` for `root` (a path) and returns the result.
fn call_in(s: &mut Session, id: i64, root: impl AsRef<Path>, name: &str, mut args: Value) -> Value {
    args["root"] = json!(root.as_ref());
    s.call(id, name, args)
}

/// Lists `root` and returns the result.
fn list(s: &mut Session, id: i64, root: impl AsRef<Path>) -> Value {
    call_in(s, id, root, "list_directory", json!({"path": "."}))
}

/// Asserts a tool error (never a JSON-RPC error) whose text contains every one of `needles`.
fn assert_refused(result: &Value, needles: &[&str]) {
    assert_eq!(result["isError"], json!(true), "not refused: {result}");
    let msg = text(result);
    assert!(msg.starts_with("InvalidArgument"), "{msg}");
    for n in needles {
        assert!(msg.contains(n), "{n:?} missing from: {msg}");
    }
}

fn assert_served(result: &Value) {
    assert_ne!(result["isError"], json!(true), "refused: {result}");
}

/// Every file under `dir` with its contents, for before/after comparisons.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).expect("read"));
            }
        }
    }
    files
}

#[test]
fn roots_outside_the_allowed_places_are_refused() {
    let (_tmp, base) = temp();
    mkdirs(&base, &["a/ws", "ab", "outside"]);
    std::os::unix::fs::symlink(base.join("outside"), base.join("a/escape")).expect("symlink");
    let mut s = serve_allowing(&[&base.join("a")], &["--allow-root-slash"]);

    assert_served(&list(&mut s, 2, base.join("a/ws")));
    let allowed = base.join("a").display().to_string();
    let r = list(&mut s, 3, "/etc");
    assert_refused(
        &r,
        &[
            "root '/etc' is outside the roots this server may serve",
            &allowed,
            "--allow-root DIR or FILESYSTEM_ALLOW_ROOTS",
        ],
    );
    // A name that shares the allowed directory's prefix is not inside it.
    assert_refused(&list(&mut s, 4, base.join("ab")), &["outside the roots"]);
    // A symlink under the allowed directory is judged by where it points.
    let outside = base.join("outside").display().to_string();
    let r = call_in(
        &mut s,
        5,
        base.join("a/escape"),
        "write_file",
        json!({"path": "planted.txt", "content": "no"}),
    );
    assert_refused(&r, &["outside the roots", "once its symlinks are resolved"]);
    assert!(!text(&r).contains(&outside), "names the link's target: {r}");
    // `/` is outside the allowed place even with --allow-root-slash: that flag only permits
    // naming `/` as an allowed place.
    assert_refused(&list(&mut s, 6, "/"), &["outside the roots"]);
    assert!(s.close_and_wait().success());

    // Nothing was written where the refused roots point: not the file, not a call log.
    assert!(!base.join("outside/planted.txt").exists());
    assert!(!base.join("outside/.filesystem").exists());
    assert!(!base.join("ab/.filesystem").exists());
    assert!(base.join("a/ws/.filesystem/.calls.jsonl").exists());
}

#[test]
fn slash_is_never_a_root_without_allow_root_slash() {
    let (_tmp, base) = temp();
    let mut s = serve_allowing(&[&base], &[]);
    assert_refused(
        &list(&mut s, 2, "/"),
        &["root '/' is the whole filesystem", "--allow-root-slash"],
    );
    assert!(s.close_and_wait().success());

    let out = start_refused(daemon(&["--allow-root", "/"]));
    assert_eq!(out.status.code(), Some(2));
    let msg = stderr(&out);
    assert!(msg.contains("allowed root '/'"), "{msg}");
    assert!(msg.contains("--allow-root-slash"), "{msg}");

    // With the flag, `/` may be an allowed place, and anything under it is served.
    let mut s = serve(daemon(&["--allow-root", "/", "--allow-root-slash"]));
    assert_served(&list(&mut s, 2, &base));
    assert!(s.close_and_wait().success());
}

#[test]
fn roots_inside_stores_are_refused() {
    let (_tmp, base) = temp();
    let ws = base.join("ws");
    mkdirs(&base, &["ws/.shelpa/x", "ws/sub"]);
    let mut s = serve_allowing(&[&base], &["--backup"]);
    // A call on the workspace creates its store (call log, history).
    assert_served(&call_in(
        &mut s,
        2,
        &ws,
        "write_file",
        json!({"path": "a.txt", "content": "one\n"}),
    ));
    s.close_and_wait();
    let store = ws.join(".filesystem");
    assert!(store.join(".calls.jsonl").exists());
    let before = snapshot(&store);

    let mut s = serve_allowing(&[&base], &["--backup"]);
    let ws_shown = ws.display().to_string();
    for (id, root) in [
        (3, store.clone()),
        (4, ws.join(".shelpa/x")),
        (5, ws.join(".shelpa")),
        // Spelled through `..`, it is still the store.
        (6, ws.join("sub/../.filesystem")),
    ] {
        let r = call_in(
            &mut s,
            id,
            &root,
            "read_text_file",
            json!({"path": ".calls.jsonl"}),
        );
        assert_refused(
            &r,
            &[
                "store directory",
                &format!("name the workspace itself ('{ws_shown}')"),
            ],
        );
    }
    let r = call_in(
        &mut s,
        7,
        &store,
        "write_file",
        json!({"path": ".calls.jsonl", "content": "{\"forged\":true}\n"}),
    );
    assert_refused(&r, &["'.filesystem' store directory"]);
    // A link to the store is the store.
    std::os::unix::fs::symlink(&store, base.join("store-link")).expect("symlink");
    let r = call_in(
        &mut s,
        8,
        base.join("store-link"),
        "read_text_file",
        json!({"path": ".calls.jsonl"}),
    );
    assert_refused(
        &r,
        &[
            "once its symlinks are resolved",
            "'.filesystem' store directory",
        ],
    );
    assert!(s.close_and_wait().success());
    // The store is untouched, and no store was made inside it for the refused calls.
    assert_eq!(snapshot(&store), before);
    assert!(!ws.join(".shelpa/x/.filesystem").exists());
}

#[test]
fn nested_roots_are_served_each_with_its_own_store() {
    let (_tmp, base) = temp();
    let a = base.join("a");
    let b = a.join("b");
    mkdirs(&base, &["a/b"]);
    let mut s = serve_allowing(&[&base], &[]);
    assert_served(&call_in(
        &mut s,
        2,
        &a,
        "write_file",
        json!({"path": "in-a.txt", "content": "a\n"}),
    ));
    assert_served(&call_in(
        &mut s,
        3,
        &b,
        "write_file",
        json!({"path": "in-b.txt", "content": "b\n"}),
    ));
    // The outer root sees the inner workspace's files: they are inside it.
    let r = call_in(
        &mut s,
        4,
        &a,
        "read_text_file",
        json!({"path": "b/in-b.txt"}),
    );
    assert_served(&r);
    assert!(text(&r).contains('b'), "{r}");
    assert!(s.close_and_wait().success());
    assert!(a.join(".filesystem/.calls.jsonl").exists());
    assert!(b.join(".filesystem/.calls.jsonl").exists());
}

#[test]
fn an_outer_root_cannot_touch_a_nested_roots_store() {
    let (_tmp, base) = temp();
    let a = base.join("x");
    let b = a.join("b");
    mkdirs(&base, &["x/b"]);
    let mut s = serve_allowing(&[&base], &["--backup"]);
    for (id, content) in [(2, "one\n"), (3, "two\n")] {
        assert_served(&call_in(
            &mut s,
            id,
            &b,
            "write_file",
            json!({"path": "f.txt", "content": content}),
        ));
    }
    s.close_and_wait();
    let store = b.join(".filesystem");
    let before = snapshot(&store);
    assert!(!before.is_empty(), "B has a store");

    let mut s = serve_allowing(&[&base], &["--backup"]);
    let attempts = [
        (
            "read_text_file",
            json!({"path": "b/.filesystem/.calls.jsonl"}),
        ),
        (
            "write_file",
            json!({"path": "b/.filesystem/.calls.jsonl", "content": "{\"forged\":true}\n"}),
        ),
        (
            "write_file",
            json!({"path": "b/.filesystem/planted", "content": "x"}),
        ),
        ("delete_file", json!({"path": "b/.filesystem/.calls.jsonl"})),
        ("list_directory", json!({"path": "b/.filesystem"})),
    ];
    for (id, (tool, args)) in (10..).zip(attempts) {
        let r = call_in(&mut s, id, &a, tool, args.clone());
        assert_eq!(
            r["isError"],
            json!(true),
            "{tool} {args} for the outer root reached the inner store: {r}"
        );
    }
    assert!(s.close_and_wait().success());
    assert_eq!(snapshot(&store), before, "B's store changed");
}

#[test]
fn allow_root_can_be_repeated() {
    let (_tmp, base) = temp();
    mkdirs(&base, &["p/w", "q/w", "r"]);
    let mut s = serve_allowing(&[&base.join("p"), &base.join("q")], &[]);
    assert_served(&list(&mut s, 2, base.join("p/w")));
    assert_served(&list(&mut s, 3, base.join("q")));
    let both = format!("{}, {}", base.join("p").display(), base.join("q").display());
    assert_refused(
        &list(&mut s, 4, base.join("r")),
        &["outside the roots", &both],
    );
    assert!(s.close_and_wait().success());
}

#[test]
fn the_environment_names_allowed_places_as_a_colon_list() {
    let (_tmp, base) = temp();
    mkdirs(&base, &["p", "q", "r"]);
    let list_env = format!("{}:{}:", base.join("p").display(), base.join("q").display());

    let mut cmd = daemon(&[]);
    cmd.env("FILESYSTEM_ALLOW_ROOTS", &list_env);
    let mut s = serve(cmd);
    assert_served(&list(&mut s, 2, base.join("p")));
    assert_served(&list(&mut s, 3, base.join("q")));
    assert_refused(&list(&mut s, 4, base.join("r")), &["outside the roots"]);
    assert!(s.close_and_wait().success());

    // --allow-root wins over the environment, as --root wins over FILESYSTEM_ROOT.
    let mut cmd = daemon(&["--allow-root"]);
    cmd.arg(base.join("r"))
        .env("FILESYSTEM_ALLOW_ROOTS", &list_env);
    let mut s = serve(cmd);
    assert_served(&list(&mut s, 2, base.join("r")));
    assert_refused(&list(&mut s, 3, base.join("p")), &["outside the roots"]);
    assert!(s.close_and_wait().success());

    // A missing allowed directory stops the daemon before it serves anything.
    let mut cmd = daemon(&[]);
    cmd.env(
        "FILESYSTEM_ALLOW_ROOTS",
        format!(
            "{}:{}",
            base.join("p").display(),
            base.join("gone").display()
        ),
    );
    let msg = stderr(&start_refused(cmd));
    assert!(
        msg.contains("from FILESYSTEM_ALLOW_ROOTS") && msg.contains("does not exist"),
        "{msg}"
    );
}

#[test]
fn without_an_allow_list_the_home_directory_is_served() {
    let (_tmp, base) = temp();
    let home = base.join("home");
    mkdirs(&base, &["home/project", "elsewhere"]);
    let mut cmd = daemon(&[]);
    cmd.env("HOME", &home);
    let mut s = serve(cmd);
    assert_served(&list(&mut s, 2, home.join("project")));
    assert_refused(
        &list(&mut s, 3, base.join("elsewhere")),
        &["outside the roots", &format!("({})", home.display())],
    );
    assert_refused(&list(&mut s, 4, "/etc"), &["outside the roots"]);
    assert!(s.close_and_wait().success());
}

#[test]
fn without_an_allow_list_an_unusable_home_stops_the_daemon() {
    let (_tmp, base) = temp();
    for home in [
        "/".to_string(),
        "/etc".to_string(),
        "/usr/sbin".to_string(),
        base.join("missing").display().to_string(),
    ] {
        let mut cmd = daemon(&[]);
        cmd.env("HOME", &home);
        let out = start_refused(cmd);
        assert_eq!(out.status.code(), Some(2), "HOME={home}");
        let msg = stderr(&out);
        for needle in [
            "--server was started without --allow-root",
            &format!("'{home}'"),
            "--allow-root DIR",
            "FILESYSTEM_ALLOW_ROOTS",
        ] {
            assert!(
                msg.contains(needle),
                "HOME={home}: {needle:?} missing from {msg}"
            );
        }
    }
}

/// The passwd entry's home directory of `uid`, or `None` when the uid has no entry.
fn passwd_home(uid: libc::uid_t) -> Option<PathBuf> {
    // SAFETY: getpwuid returns null or a pointer to a static entry, read before any other call
    // to the passwd functions in this process (tests here call it from one thread each, and a
    // race would only make this test skip or compare a wrong path, never unsound memory use
    // beyond what libc documents).
    let entry = unsafe { libc::getpwuid(uid) };
    if entry.is_null() {
        return None;
    }
    // SAFETY: a non-null entry has a valid NUL-terminated pw_dir.
    let dir = unsafe { std::ffi::CStr::from_ptr((*entry).pw_dir) };
    use std::os::unix::ffi::OsStrExt;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
}

#[test]
fn with_home_unset_the_passwd_entry_is_used() {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let Some(home) = passwd_home(uid).and_then(|h| h.canonicalize().ok()) else {
        eprintln!("skipped: this user has no usable passwd home");
        return;
    };
    let mut cmd = daemon(&["tools"]);
    cmd.env_remove("HOME");
    let out = cmd.stdin(Stdio::null()).output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        assert!(
            stdout.contains(&format!("at or below {}", home.display())),
            "{stdout}"
        );
    } else {
        // A passwd home in a system tree (a service account) is refused like any other.
        let msg = stderr(&out);
        assert!(msg.contains("the passwd entry"), "{msg}");
    }
}

#[test]
fn with_home_unset_and_no_passwd_entry_the_daemon_does_not_start() {
    use std::os::unix::process::CommandExt;
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("skipped: needs root to run the server as a uid with no passwd entry");
        return;
    }
    let Some(uid) = (54_321..55_321).find(|&u| passwd_home(u).is_none()) else {
        eprintln!("skipped: no free uid");
        return;
    };
    let mut cmd = daemon(&[]);
    cmd.env_remove("HOME").uid(uid).gid(uid);
    let out = match cmd.stdin(Stdio::null()).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipped: cannot run the binary as uid {uid}: {e}");
            return;
        }
    };
    assert_eq!(out.status.code(), Some(2));
    let msg = stderr(&out);
    assert!(
        msg.contains("$HOME is not set and the user has no home directory"),
        "{msg}"
    );
    assert!(msg.contains("--allow-root DIR"), "{msg}");
    assert!(msg.contains("FILESYSTEM_ALLOW_ROOTS"), "{msg}");
}

#[test]
fn help_explains_the_allowed_roots() {
    let out = command().arg("--help").output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--allow-root <DIR>",
        "FILESYSTEM_ALLOW_ROOTS",
        "home directory",
    ] {
        assert!(help.contains(needle), "{needle:?} missing from --help");
    }
}
