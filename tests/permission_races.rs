#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! The write rules under races: the confinement tests' swapper pointed at a rule's boundary.
//! Inside the workspace, `src/d` (a real directory) is exchanged with `src/s`, a symlink into the
//! read-only `migrations/`, between any two syscalls, while the real binary writes through
//! `src/d`. A write may succeed (it landed in the real directory) or be refused (the guard saw
//! the link and the rule refused `migrations/…`, or the act met the link and failed); it must
//! never land in `migrations/`, which stays byte for byte and inode for inode as it was.
//!
//! Each race ends on what it has seen (`race::until_met`): every raced operation both succeeded
//! and was refused `race::MIN_EACH` times, and the swapper really exchanged the names.

use std::os::fd::OwnedFd;

use serde_json::{json, Value};

use test_support::arena::Snapshot;
use test_support::mcp::Client;
use test_support::race::{exists_at, open_dir, until_met, write_at, Goal, Swapper, Tally};
use test_support::temp::TempRoot;

/// Fewest exchanges a race must have seen to count.
const MIN_SWAPS: u64 = 100;

struct Rig {
    root: TempRoot,
    /// The real `src/d`, whatever name it has at the moment.
    dir: OwnedFd,
    before: Snapshot,
    tally: Tally,
}

impl Rig {
    fn new() -> Rig {
        let root = TempRoot::new();
        // The read-only side holds the names the racers aim at, so a redirected write, edit,
        // move or delete would change one of them.
        for name in ["f", "g", "o"] {
            root.write(&format!("migrations/{name}"), "EDIT-ME\nprotected\n");
        }
        root.write("src/d/f", "EDIT-ME\nstart\n");
        root.write("src/d/g", "delete me\n");
        root.write("src/d/o", "move me\n");
        std::os::unix::fs::symlink("../migrations", root.path("src/s")).expect("symlink");
        let dir = open_dir(&root.path("src/d"));
        let before = Snapshot::of(&root.path("migrations"));
        Rig {
            root,
            dir,
            before,
            tally: Tally::default(),
        }
    }

    fn swap(&self) -> Swapper {
        Swapper::start(&self.root.path("src"), "d", "s")
    }

    fn call(&mut self, c: &mut Client, op: &str, tool: &str, args: Value) {
        let reply = c.call(tool, args);
        self.tally.record_reply(op, reply.ok, &reply.text);
        if !reply.ok {
            // A refusal is a refusal of this race, never anything else going wrong.
            // The rule saw the link (ReadOnly, READ_ONLY), or the act met it and failed (a
            // swapped-in link, however the tool words it).
            let expected = [
                "ReadOnly",
                "READ_ONLY",
                "PathEscape",
                "PATH_ESCAPE",
                "symbolic link where a real directory",
                "is a symlink",
            ];
            // The store's create check counts a path it cannot look at (its directory is a link
            // now) as occupied.
            let create_refused = op == "create_file" && reply.text.starts_with("AlreadyExists");
            assert!(
                create_refused || expected.iter().any(|k| reply.text.contains(k)),
                "{op}: refused for another reason: {}",
                reply.text
            );
        }
    }

    fn finish(self, swapper: Swapper, goal: &Goal) {
        swapper.finish_checked(MIN_SWAPS);
        self.before
            .assert_same(&Snapshot::of(&self.root.path("migrations")), "migrations");
        goal.assert_met(&self.tally);
    }
}

#[test]
fn writes_through_a_directory_swapped_for_a_link_into_a_read_only_dir_never_land_there() {
    let mut rig = Rig::new();
    let mut c = Client::start(
        &rig.root.root,
        &["--read-only-dir", "migrations", "--backup"],
    );
    let swapper = rig.swap();
    let goal = Goal::raced(&[
        "write_file",
        "create_file",
        "edit_file",
        "move_file",
        "delete_file",
    ]);
    until_met(|i| {
        rig.call(
            &mut c,
            "write_file",
            "write_file",
            json!({"path": "src/d/f", "content": format!("EDIT-ME\nw{i}\n")}),
        );
        rig.call(
            &mut c,
            "create_file",
            "create_file",
            json!({"path": format!("src/d/new{i}"), "content": "new\n"}),
        );
        rig.call(
            &mut c,
            "edit_file",
            "edit_file",
            json!({"path": "src/d/f", "edits": [{"oldText": "EDIT-ME", "newText": format!("EDIT-ME\ne{i}")}]}),
        );
        if !exists_at(&rig.dir, "o") {
            write_at(&rig.dir, "o", b"move me\n");
        }
        rig.call(
            &mut c,
            "move_file",
            "move_file",
            json!({"source": "src/d/o", "destination": format!("src/out{i}")}),
        );
        if !exists_at(&rig.dir, "g") {
            write_at(&rig.dir, "g", b"delete me\n");
        }
        rig.call(
            &mut c,
            "delete_file",
            "delete_file",
            json!({"path": "src/d/g"}),
        );
        swapper.swaps() >= MIN_SWAPS && goal.met(&rig.tally)
    });
    c.close();
    rig.finish(swapper, &goal);
}

#[test]
fn tee_through_a_directory_swapped_for_a_link_into_a_read_only_dir_never_lands_there() {
    let mut rig = Rig::new();
    let mut c = Client::start(
        &rig.root.root,
        &[
            "--legacy-pipe",
            "--shelpa-tools",
            "all",
            "--read-only-dir",
            "migrations",
        ],
    );
    let swapper = rig.swap();
    let goal = Goal::raced(&["shelpa_write", "shelpa_tee"]);
    until_met(|i| {
        rig.call(
            &mut c,
            "shelpa_write",
            "shelpa_write",
            json!({"path": "src/d/f", "content": format!("w{i}\n")}),
        );
        rig.call(
            &mut c,
            "shelpa_tee",
            "shelpa_tee",
            json!({"paths": ["src/d/o"], "content": format!("t{i}\n"), "append": true}),
        );
        swapper.swaps() >= MIN_SWAPS && goal.met(&rig.tally)
    });
    c.close();
    rig.finish(swapper, &goal);
}
