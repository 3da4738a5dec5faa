#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Confinement under races: a directory inside the workspace is exchanged for a symlink to a
//! canary directory outside it between any two syscalls, while the real binary works in that
//! directory. A call may fail then; it must never be redirected: the canary stays byte for byte
//! and inode for inode as it was, no reply shows its path, names or content, and nothing of it is
//! copied into the workspace.
//!
//! Each race runs for at least `FILESYSTEM_RACE_SECS` seconds (default 2), and on until it has
//! seen what makes it count (below), giving up only at its cap (a minute more). Long runs:
//! `scripts/race`, or `FILESYSTEM_RACE_SECS=300 cargo test --test confinement_races --
//! --test-threads=1`.
//!
//! Every race also proves it was not vacuous: the swapper really exchanged the names (hundreds of
//! times at least), and every operation it raced both succeeded and was refused several times
//! (`race::MIN_EACH`), so a success could have been a redirected one and the race did hit it.

use std::os::fd::OwnedFd;
use std::time::Duration;

use serde_json::{json, Value};

use test_support::arena::{Arena, Screen, Snapshot};
use test_support::cli;
use test_support::mcp::{Client, Reply};
use test_support::race::{
    exists_at, open_dir, race_cap, until_met, write_at, Goal, Swapper, Tally, Turns, MIN_EACH,
};

/// Fewest exchanges a race must have seen to count.
const MIN_SWAPS: u64 = 100;

/// A workspace with a real directory `d` (holding `f`) and a symlink `s` to the canary, ready
/// to be exchanged; the canary's snapshot; and the screen and tally every call goes through.
struct Rig {
    arena: Arena,
    /// The real `d`, whatever name it has at the moment.
    dir: OwnedFd,
    before: Snapshot,
    screen: Screen,
    tally: Tally,
}

impl Rig {
    fn new() -> Rig {
        let arena = Arena::new();
        arena.write("d/f", "EDIT-ME\nstart\n");
        arena.write("a.txt", "line one\nline two\n");
        std::os::unix::fs::symlink(&arena.canary, arena.path("s")).expect("symlink");
        let dir = open_dir(&arena.path("d"));
        let before = Snapshot::of(&arena.canary);
        let screen = arena.screen();
        Rig {
            arena,
            dir,
            before,
            screen,
            tally: Tally::default(),
        }
    }

    /// Starts exchanging `d` and `s`.
    fn swap(&self) -> Swapper {
        Swapper::start(&self.arena.root, "d", "s")
    }

    /// Exchanges `d` and `s` in bursts with rests between, for racers that are whole processes
    /// (a CLI subcommand, a pipeline whose stages walk the directory).
    fn swap_with_rests(&self) -> Swapper {
        Swapper::start_with_rests(&self.arena.root, "d", "s", Duration::from_millis(15))
    }

    fn call(&mut self, c: &mut Client, op: &str, tool: &str, args: Value) -> Reply {
        c.run(op, tool, args, &mut self.screen, &mut self.tally)
    }

    /// Runs a CLI subcommand, screening and tallying it like a tool call.
    fn cli(&mut self, op: &str, args: &[&str]) -> (bool, String) {
        let (ok, text) = cli::run(&self.arena.root, args);
        self.screen.check(op, &text);
        self.tally.record_reply(op, ok, &text);
        (ok, text)
    }

    /// True once the race has seen enough to end: the swapper's exchanges and the goal.
    fn met(&self, swapper: &Swapper, goal: &Goal) -> bool {
        swapper.swaps() >= MIN_SWAPS && goal.met(&self.tally)
    }

    /// Stops the swapper and checks, in order of importance: the canary is untouched, no reply
    /// leaked it, nothing of it was copied in; then that the race was real.
    fn finish(self, swapper: Swapper, goal: &Goal) {
        let swaps = swapper.finish();
        self.arena.assert_canary_unchanged(&self.before);
        self.screen.assert_clean();
        self.arena.assert_no_secret_inside();
        assert!(
            swaps >= MIN_SWAPS,
            "the swapper made only {swaps} exchanges, so the race proved nothing"
        );
        goal.assert_met(&self.tally);
    }
}

fn pipe(command: &str) -> Value {
    json!({ "command": command })
}

fn pipe_in(command: &str, cwd: &str) -> Value {
    json!({ "command": command, "cwd": cwd })
}

#[test]
fn write_file_into_a_swapped_directory_never_writes_outside() {
    write_file_race(false);
}

#[test]
fn write_file_with_the_per_component_walk_never_writes_outside() {
    write_file_race(true);
}

fn write_file_race(walk: bool) {
    let mut rig = Rig::new();
    let mut c = Client::start_with(&rig.arena.root, &[], walk);
    let swapper = rig.swap();
    let goal = Goal::raced(&["write_file d/f"]);
    until_met(|i| {
        let content = format!("EDIT-ME\nw{i}\n");
        rig.call(
            &mut c,
            "write_file d/f",
            "write_file",
            json!({"path": "d/f", "content": content}),
        );
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn create_file_in_a_swapped_directory_never_creates_outside() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &[]);
    let swapper = rig.swap();
    let goal = Goal::raced(&["create_file d/newN"]);
    until_met(|i| {
        rig.call(
            &mut c,
            "create_file d/newN",
            "create_file",
            json!({"path": format!("d/new{i}"), "content": "new\n"}),
        );
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn edit_file_in_a_swapped_directory_never_edits_outside() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &[]);
    let swapper = rig.swap();
    let goal = Goal::raced(&["edit_file d/f"]);
    until_met(|i| {
        // The canary's files hold EDIT-ME too, so a redirected edit would match and change them.
        rig.call(
            &mut c,
            "edit_file d/f",
            "edit_file",
            json!({"path": "d/f", "edits": [{"oldText": "EDIT-ME", "newText": format!("EDIT-ME\ne{i}")}]}),
        );
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn moves_in_out_of_and_within_a_swapped_directory_never_move_outside_files() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &[]);
    let swapper = rig.swap();
    let goal = Goal::raced(&[
        "move_file within d",
        "move_file d/o -> top",
        "move_file p.txt -> d/inN",
    ]);
    until_met(|i| {
        // Within d: f <-> g (the canary has f but no g, so a redirected move changes it).
        if !exists_at(&rig.dir, "f") && !exists_at(&rig.dir, "g") {
            write_at(&rig.dir, "f", b"EDIT-ME\nrecreated\n");
        }
        let spare = format!("d/g{i}");
        let (from, to) = match (exists_at(&rig.dir, "f"), exists_at(&rig.dir, "g")) {
            (true, false) => ("d/f", "d/g"),
            (false, true) => ("d/g", "d/f"),
            _ => ("d/g", spare.as_str()),
        };
        rig.call(
            &mut c,
            "move_file within d",
            "move_file",
            json!({"source": from, "destination": to}),
        );
        // Out of d to the top (the canary has an `o` to steal).
        if !exists_at(&rig.dir, "o") {
            write_at(&rig.dir, "o", b"mine\n");
        }
        rig.call(
            &mut c,
            "move_file d/o -> top",
            "move_file",
            json!({"source": "d/o", "destination": format!("top{i}.txt")}),
        );
        // From the top into d (a redirected move plants a file outside).
        if !rig.arena.path("p.txt").exists() {
            rig.arena.write("p.txt", "planted\n");
        }
        rig.call(
            &mut c,
            "move_file p.txt -> d/inN",
            "move_file",
            json!({"source": "p.txt", "destination": format!("d/in{i}.txt")}),
        );
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn delete_and_restore_in_a_swapped_directory_never_take_or_put_outside_files() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &[]);
    let swapper = rig.swap();
    let mut pending: Vec<u64> = Vec::new();
    let goal = Goal::raced(&["delete_file d/x", "restore_file to d/yN"]);
    until_met(|i| {
        if let Some(&id) = pending.first() {
            // To a fresh name: the canary has none, so a redirected restore shows.
            let r = rig.call(
                &mut c,
                "restore_file to d/yN",
                "restore_file",
                json!({"id": id, "destination": format!("d/y{i}")}),
            );
            if r.ok {
                pending.remove(0);
            }
        } else {
            if !exists_at(&rig.dir, "x") {
                write_at(&rig.dir, "x", b"delete me\n");
            }
            let r = rig.call(
                &mut c,
                "delete_file d/x",
                "delete_file",
                json!({"path": "d/x"}),
            );
            if r.ok {
                pending.push(trash_id(&r.text));
            }
        }
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

/// The id in `... to the trash as id 7; ...`.
fn trash_id(text: &str) -> u64 {
    let at = text
        .find("as id ")
        .expect("delete reply names the trash id")
        + "as id ".len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .expect("trash id")
}

#[test]
fn write_and_undo_with_history_in_a_swapped_directory_never_write_outside() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &["--backup"]);
    let swapper = rig.swap();
    let goal = Goal::raced(&["write_file d/f (backup)", "undo_file d/f"]);
    until_met(|i| {
        rig.call(
            &mut c,
            "write_file d/f (backup)",
            "write_file",
            json!({"path": "d/f", "content": format!("EDIT-ME\nv{i}\n")}),
        );
        rig.call(&mut c, "undo_file d/f", "undo_file", json!({"path": "d/f"}));
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn reads_and_listings_of_a_swapped_directory_never_show_outside() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &[]);
    let swapper = rig.swap();
    let goal = Goal::raced(&["read_text_file d/f", "list_directory d", "directory_tree d"]);
    until_met(|_| {
        rig.call(
            &mut c,
            "read_text_file d/f",
            "read_text_file",
            json!({"path": "d/f"}),
        );
        rig.call(
            &mut c,
            "list_directory d",
            "list_directory",
            json!({"path": "d"}),
        );
        rig.call(
            &mut c,
            "directory_tree d",
            "directory_tree",
            json!({"path": "d"}),
        );
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn pipelines_on_a_swapped_directory_never_show_outside() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &["--legacy-pipe"]);
    let swapper = rig.swap_with_rests();
    let goal = Goal::raced(&[
        "ls -l d",
        "ls with cwd d",
        "head -n 5 f with cwd d",
        "head | sort with cwd d",
        "head -n 5 d/f",
        "rg over d",
        "fd in d",
    ]);
    until_met(|_| {
        rig.call(&mut c, "ls -l d", "shelpa_pipe", pipe("ls -l d"));
        rig.call(&mut c, "ls with cwd d", "shelpa_pipe", pipe_in("ls", "d"));
        rig.call(
            &mut c,
            "head -n 5 f with cwd d",
            "shelpa_pipe",
            pipe_in("head -n 5 f", "d"),
        );
        rig.call(
            &mut c,
            "head | sort with cwd d",
            "shelpa_pipe",
            pipe_in("head -n 5 f | sort", "d"),
        );
        rig.call(
            &mut c,
            "head -n 5 d/f",
            "shelpa_pipe",
            pipe("head -n 5 d/f"),
        );
        rig.call(
            &mut c,
            "rg over d",
            "shelpa_pipe",
            pipe("rg -n 'EDIT|SECRET' d"),
        );
        rig.call(&mut c, "fd in d", "shelpa_pipe", pipe("fd . d"));
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn a_session_inside_a_swapped_directory_never_lists_or_reads_outside() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &["--legacy-pipe"]);
    let swapper = rig.swap();
    let goal = Goal::raced(&[
        "cd d",
        "ls after cd d",
        "ls -l after cd d",
        "head after cd d",
    ]);
    until_met(|_| {
        if rig.call(&mut c, "cd d", "shelpa_pipe", pipe("cd d")).ok {
            rig.call(&mut c, "ls after cd d", "shelpa_pipe", pipe("ls"));
            rig.call(&mut c, "ls -l after cd d", "shelpa_pipe", pipe("ls -l"));
            rig.call(
                &mut c,
                "head after cd d",
                "shelpa_pipe",
                pipe("head -n 5 f"),
            );
        }
        // Back to the root by absolute path, so the next round starts from a known place. A
        // server may refuse while the session directory's name is a link; it must not refuse
        // forever (a refusal for as long as a race's cap means it never will).
        let root = rig.arena.root.display().to_string();
        let giving_up = std::time::Instant::now() + race_cap();
        while !c.call("shelpa_pipe", pipe(&format!("cd {root}"))).ok {
            assert!(
                std::time::Instant::now() < giving_up,
                "the session cannot return to the root, so its directory left the workspace"
            );
        }
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn tee_and_shelpa_write_into_a_swapped_directory_never_write_outside() {
    let mut rig = Rig::new();
    let mut c = Client::start(&rig.arena.root, &["--legacy-pipe"]);
    let swapper = rig.swap();
    let goal = Goal::raced(&[
        "shelpa_write d/f",
        "shelpa_write append d/t.txt",
        "head | tee d/f",
        "head | tee -a d/t.txt",
        "tee with cwd d",
    ]);
    until_met(|i| {
        rig.call(
            &mut c,
            "shelpa_write d/f",
            "shelpa_write",
            json!({"path": "d/f", "content": format!("EDIT-ME\nt{i}\n")}),
        );
        rig.call(
            &mut c,
            "shelpa_write append d/t.txt",
            "shelpa_write",
            json!({"path": "d/t.txt", "content": "more\n", "append": true}),
        );
        rig.call(
            &mut c,
            "head | tee d/f",
            "shelpa_pipe",
            pipe("head -n 1 a.txt | tee d/f"),
        );
        rig.call(
            &mut c,
            "head | tee -a d/t.txt",
            "shelpa_pipe",
            pipe("head -n 1 a.txt | tee -a d/t.txt"),
        );
        rig.call(
            &mut c,
            "tee with cwd d",
            "shelpa_pipe",
            pipe_in("head -n 1 ../a.txt | tee f", "d"),
        );
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

/// Gives `d/f` a `.shelpa/` mirror with two records, through the real tee.
fn mirror_d_f(rig: &mut Rig) {
    let mut pipe_client = Client::start(&rig.arena.root, &["--legacy-pipe"]);
    for content in ["EDIT-ME\nrecord one\n", "EDIT-ME\nrecord two\n"] {
        let r = pipe_client.call("shelpa_write", json!({"path": "d/f", "content": content}));
        assert!(r.ok, "building the mirror failed: {}", r.raw);
    }
    assert!(
        rig.arena.path(".shelpa/d/f").is_file(),
        "tee made no mirror"
    );
}

#[test]
fn audit_restore_into_a_swapped_directory_never_writes_outside() {
    let mut rig = Rig::new();
    mirror_d_f(&mut rig);
    let swapper = rig.swap_with_rests();
    let goal = Goal::raced(&["audit restore d/f", "audit restore --to d/rN"]);
    until_met(|i| {
        let record = if i % 2 == 0 { "#1" } else { "#2" };
        rig.cli(
            "audit restore d/f",
            &["audit", "restore", "d/f", record, "--force"],
        );
        let to = format!("d/r{i}");
        rig.cli(
            "audit restore --to d/rN",
            &["audit", "restore", "d/f", "#1", "--to", &to],
        );
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

#[test]
fn audit_import_over_a_swapped_directory_never_reads_or_writes_outside() {
    let mut rig = Rig::new();
    mirror_d_f(&mut rig);
    let mut c = Client::start(&rig.arena.root, &["--legacy-pipe"]);
    let swapper = rig.swap_with_rests();
    let goal = Goal::raced(&["shelpa_write d/f", "audit import"]);
    until_met(|i| {
        // A new record each round, so every import has something to take in.
        rig.call(
            &mut c,
            "shelpa_write d/f",
            "shelpa_write",
            json!({"path": "d/f", "content": format!("EDIT-ME\nimport {i}\n")}),
        );
        rig.cli("audit import", &["audit", "import"]);
        rig.met(&swapper, &goal)
    });
    rig.finish(swapper, &goal);
}

/// What the second session does while the first keeps moving `L` (a link to the canary) and `R`
/// (a real directory) in and out of the name `d`.
#[derive(Clone, Copy, PartialEq)]
enum Raid {
    /// Move `d/secret.txt` out of `d` and read it.
    Steal,
    /// Move a workspace file into `d` (creating `d` when it is missing).
    Plant,
}

/// The juggler's steps, round and round: after an even number of steps `d` is missing.
const STEPS: [(&str, &str); 4] = [("L", "d"), ("d", "L"), ("R", "d"), ("d", "R")];

/// Session one: L -> d, d -> L, R -> d, d -> R, round and round, until told to stop. A real `d`
/// the other session's move made (move_file creates missing parents) is moved aside to `spillN`.
/// After each step it hands over ([`Turns::stepped`]), so the raider sees every state.
fn juggle(
    root: std::path::PathBuf,
    turns: &Turns,
    mut screen: Screen,
    walk: bool,
) -> (Screen, Tally) {
    let mut c = Client::start_with(&root, &[], walk);
    let mut tally = Tally::default();
    let root_fd = open_dir(&root);
    let mut spill = 0;
    while !turns.stopped() {
        let (from, to) = STEPS[(turns.steps() % 4) as usize];
        if to == "d" && exists_at(&root_fd, "d") {
            spill += 1;
            c.run(
                "move stray d aside",
                "move_file",
                json!({"source": "d", "destination": format!("spill{spill}")}),
                &mut screen,
                &mut tally,
            );
        }
        let op = format!("move {from} -> {to}");
        if c.run(
            &op,
            "move_file",
            json!({"source": from, "destination": to}),
            &mut screen,
            &mut tally,
        )
        .ok
        {
            turns.stepped();
        }
    }
    (screen, tally)
}

fn two_session_race(raid: Raid, walk: bool) {
    let arena = Arena::new();
    let decoy = "inside decoy, fine to move\n";
    std::os::unix::fs::symlink(&arena.canary, arena.path("L")).expect("symlink");
    arena.write("R/secret.txt", decoy);
    arena.write("p.txt", "planted\n");
    let r_fd = open_dir(&arena.path("R"));
    let before = Snapshot::of(&arena.canary);

    let turns = Turns::new();
    let juggler = {
        let (root, turns, screen) = (arena.root.clone(), turns.clone(), arena.screen());
        std::thread::spawn(move || juggle(root, &turns, screen, walk))
    };
    let mut c = Client::start_with(&arena.root, &[], walk);
    let mut screen = arena.screen();
    let mut tally = Tally::default();
    let goal = match raid {
        Raid::Steal => {
            Goal::raced(&["move d/secret.txt -> stolenN"]).and_succeeded(&["read stolenN"])
        }
        Raid::Plant => Goal::raced(&["move p.txt -> d/plantedN"]),
    };
    // A plant into a missing `d` makes `d`, which the juggler must move aside before its next
    // step: while `d` should be missing the planter rests between tries, longer each time,
    // until the juggler has stepped.
    let mut rest_in: Option<(u64, std::time::Duration)> = None;
    until_met(|i| {
        let step = turns.steps();
        if raid == Raid::Plant && step.is_multiple_of(2) {
            match rest_in {
                Some((s, rest)) if s == step => {
                    rest_in = Some((s, turns.rest_until_step_after(s, rest)));
                }
                _ => rest_in = Some((step, std::time::Duration::from_millis(1))),
            }
        }
        turns.raid(|| match raid {
            Raid::Steal => {
                if !exists_at(&r_fd, "secret.txt") {
                    write_at(&r_fd, "secret.txt", decoy.as_bytes());
                }
                let name = format!("stolen{i}.txt");
                let moved = c.run(
                    "move d/secret.txt -> stolenN",
                    "move_file",
                    json!({"source": "d/secret.txt", "destination": name}),
                    &mut screen,
                    &mut tally,
                );
                if moved.ok {
                    c.run(
                        "read stolenN",
                        "read_text_file",
                        json!({"path": name}),
                        &mut screen,
                        &mut tally,
                    );
                }
            }
            Raid::Plant => {
                if !arena.path("p.txt").exists() {
                    arena.write("p.txt", "planted\n");
                }
                c.run(
                    "move p.txt -> d/plantedN",
                    "move_file",
                    json!({"source": "p.txt", "destination": format!("d/planted{i}.txt")}),
                    &mut screen,
                    &mut tally,
                );
            }
        });
        turns.steps() >= STEPS.len() as u64 * MIN_EACH && goal.met(&tally)
    });
    turns.stop();
    let (juggler_screen, juggler_tally) = juggler.join().expect("juggler");

    arena.assert_canary_unchanged(&before);
    screen.assert_clean();
    juggler_screen.assert_clean();
    arena.assert_no_secret_inside();
    let steps: Vec<String> = STEPS
        .iter()
        .map(|(f, t)| format!("move {f} -> {t}"))
        .collect();
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    Goal::default()
        .and_succeeded(&steps)
        .assert_met(&juggler_tally);
    goal.assert_met(&tally);
}

#[test]
fn a_move_racing_another_sessions_link_moves_never_takes_a_file_from_outside() {
    two_session_race(Raid::Steal, false);
}

#[test]
fn a_move_racing_another_sessions_link_moves_never_puts_a_file_outside() {
    two_session_race(Raid::Plant, false);
}

#[test]
fn with_the_per_component_walk_a_racing_move_never_takes_or_puts_outside_files() {
    two_session_race(Raid::Steal, true);
    two_session_race(Raid::Plant, true);
}
