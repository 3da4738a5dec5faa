#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! After a crash, the next server to start clears the temporaries of the writes the crash cut
//! short, and nothing else: never a live server's temporary, never a user's file.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use test_support::mcp::Session;
use test_support::temp::canonical_temp_dir;

const TEMP_PREFIX: &str = ".filesystem-tmp-";

/// The registries under `.filesystem/.live/`.
fn registries(root: &Path) -> Vec<String> {
    match std::fs::read_dir(root.join(".filesystem/.live")) {
        Ok(entries) => entries
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The temporaries directly inside `dir`.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(TEMP_PREFIX))
        })
        .collect()
}

/// Waits (generously) until `done` holds.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A temporary of the handle `token`, with `mode`, in `dir`.
fn plant_temp(dir: &Path, token: &str, random: &str, mode: u32) -> PathBuf {
    let p = dir.join(format!("{TEMP_PREFIX}{token}{random}"));
    std::fs::write(&p, "half a write").expect("plant");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    p
}

/// A registry of a handle that is gone: unlocked, listing `dirs`.
fn plant_dead_registry(root: &Path, token: &str, dirs: &[&str]) {
    let live = root.join(".filesystem/.live");
    std::fs::create_dir_all(&live).expect("mkdir");
    let mut listed = Vec::new();
    for d in dirs {
        listed.extend_from_slice(d.as_bytes());
        listed.push(0);
    }
    std::fs::write(live.join(token), listed).expect("registry");
}

#[test]
fn a_server_killed_mid_write_leaves_nothing_once_the_next_one_starts() {
    let (_dir, root) = canonical_temp_dir();
    std::fs::create_dir(root.join("big")).expect("mkdir");
    // Large enough that writing and syncing it takes a while; caught by polling the directory.
    let content = "x".repeat(48 * 1024 * 1024);
    // Each try kills the server as soon as its temporary shows; it may have renamed it by then.
    // Try until one kill lands before the rename, for up to two minutes (on a working machine
    // the first few tries do).
    let mut caught = None;
    let giving_up = Instant::now() + Duration::from_secs(120);
    let mut attempt = 0;
    while caught.is_none() && Instant::now() < giving_up {
        attempt += 1;
        let mut s = Session::start_in(&root, &["--no-call-log"]);
        s.initialize("2025-11-25");
        s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "write_file", "arguments": {"path": "big/file.bin", "content": content}}}));
        let deadline = Instant::now() + Duration::from_secs(60);
        let found = loop {
            let temps = temporaries(&root.join("big"));
            if !temps.is_empty() {
                break Some(temps);
            }
            if Instant::now() > deadline || s.child.try_wait().expect("wait").is_some() {
                break None;
            }
            std::thread::yield_now();
        };
        s.child.kill().expect("SIGKILL");
        let _ = s.child.wait();
        if let Some(temps) = found {
            // Still there after the kill (the write had not finished renaming it)?
            if temps.iter().any(|t| t.exists()) {
                caught = Some(attempt);
                continue;
            }
        }
        let _ = std::fs::remove_file(root.join("big/file.bin"));
    }
    assert!(
        caught.is_some(),
        "never caught the server between creating its temporary and renaming it ({attempt} tries)"
    );
    assert!(!temporaries(&root.join("big")).is_empty());
    assert_eq!(registries(&root).len(), 1, "the dead server's registry");

    let mut next = Session::start_in(&root, &["--no-call-log"]);
    next.initialize("2025-11-25");
    wait_for("the leftover to be cleared", || {
        temporaries(&root.join("big")).is_empty() && registries(&root).is_empty()
    });
    let listing = test_support::mcp::text(&next.call(3, "list_directory", json!({"path": "big"})));
    assert!(!listing.contains(TEMP_PREFIX), "{listing}");
    assert!(next.close_and_wait().success());
}

#[test]
fn a_live_servers_temporaries_are_left_alone_while_a_dead_ones_are_cleared() {
    let (_dir, root) = canonical_temp_dir();
    std::fs::create_dir_all(root.join("d")).expect("mkdir");
    std::fs::create_dir_all(root.join("e/f")).expect("mkdir");

    // A live server that has written into d/: its registry is held for as long as it runs.
    let mut live = Session::start_in(&root, &["--no-call-log"]);
    live.initialize("2025-11-25");
    let r = live.call(
        2,
        "write_file",
        json!({"path": "d/one.txt", "content": "one"}),
    );
    assert_ne!(r["isError"], json!(true), "{r}");
    let live_token = registries(&root).pop().expect("the live server's registry");
    // As if it were in the middle of another write in d/.
    let live_temp = plant_temp(&root.join("d"), &live_token, "inwork", 0);

    // A dead server's leftovers: a fresh temporary and one that already had its real bits.
    let dead = "deadserver01";
    plant_dead_registry(&root, dead, &["d", "e/f", ""]);
    let dead_temps = [
        plant_temp(&root.join("d"), dead, "aaaaaa", 0),
        plant_temp(&root.join("e/f"), dead, "bbbbbb", 0o644),
        plant_temp(&root, dead, "cccccc", 0),
    ];
    // Files that only look like temporaries: another token, a second link.
    let other = plant_temp(&root.join("d"), "someoneelse1", "dddddd", 0);
    let linked = plant_temp(&root.join("e/f"), dead, "eeeeee", 0);
    std::fs::hard_link(&linked, root.join("e/keep.txt")).expect("link");

    let mut next = Session::start_in(&root, &["--no-call-log"]);
    next.initialize("2025-11-25");
    wait_for("the dead server's leftovers to be cleared", || {
        dead_temps.iter().all(|t| !t.exists()) && !registries(&root).iter().any(|r| r == dead)
    });
    assert!(live_temp.exists(), "a live server's temporary was removed");
    assert!(registries(&root).contains(&live_token));
    assert!(other.exists() && linked.exists());
    assert_eq!(
        std::fs::read_to_string(root.join("d/one.txt")).expect("read"),
        "one"
    );

    // The live server goes on working, and leaves no registry when it ends normally.
    let r = live.call(
        3,
        "write_file",
        json!({"path": "d/two.txt", "content": "two"}),
    );
    assert_ne!(r["isError"], json!(true), "{r}");
    assert!(live.close_and_wait().success());
    assert!(!registries(&root).contains(&live_token));
    assert!(next.close_and_wait().success());
}

#[test]
fn a_registry_that_is_a_fifo_or_lists_a_symlink_is_not_followed() {
    let (_dir, base) = canonical_temp_dir();
    let root = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    let token = "deadserver02";
    let victim = plant_temp(&outside, token, "zzzzzz", 0);
    std::os::unix::fs::symlink(&outside, root.join("link")).expect("symlink");
    plant_dead_registry(&root, token, &["link", "../outside"]);
    let fifo = root.join(".filesystem/.live/deadserver03");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");

    let mut s = Session::start_in(&root, &["--no-call-log"]);
    s.initialize("2025-11-25");
    wait_for("the planted registry to be swept", || {
        !registries(&root).iter().any(|r| r == token)
    });
    assert!(victim.exists(), "a file outside the root was removed");
    // The FIFO did not hang the start-up: the server answers.
    let r = s.call(2, "list_directory", json!({"path": "."}));
    assert_ne!(r["isError"], json!(true), "{r}");
    assert!(s.close_and_wait().success());
}
