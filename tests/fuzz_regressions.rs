#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Replays every saved fuzz input (`fuzz/regressions/TARGET/*`) through the property its target
//! checks, so a crash once found stays fixed.

#[path = "../fuzz/checks.rs"]
mod checks;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("regressions dir") {
        let path = entry.expect("entry").path();
        let data = std::fs::read(&path).expect("read input");
        check(&data);
        count += 1;
    }
    assert!(count > 0, "no saved inputs in {}", dir.display());
}

#[test]
fn saved_framing_inputs_still_pass() {
    replay("framing", checks::framing);
}

#[test]
fn saved_dispatch_inputs_still_pass() {
    replay("dispatch", checks::dispatch);
}

#[test]
fn saved_guard_inputs_still_pass() {
    replay("guard", checks::guard);
}

#[test]
fn saved_pipeline_inputs_still_pass() {
    replay("pipeline", checks::pipeline);
}

#[test]
fn saved_workspace_inputs_still_pass() {
    replay("workspace", checks::workspace);
}
