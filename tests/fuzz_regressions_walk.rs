#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! Replays the saved `workspace` fuzz inputs with the layer's per-component `O_NOFOLLOW` walk
//! instead of `openat2`. The layer reads `FILESYSTEM_NO_OPENAT2` once per process, which is why
//! this is its own test binary with one test: `checks::workspace_walk` sets the variable before
//! the first use of the layer and asserts that the walk is what was chosen.

#[path = "../fuzz/checks.rs"]
mod checks;

#[test]
fn saved_workspace_inputs_still_pass_with_the_o_nofollow_walk() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/workspace");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("regressions dir") {
        let data = std::fs::read(entry.expect("entry").path()).expect("read input");
        checks::workspace_walk(&data);
        count += 1;
    }
    assert!(count > 0, "no saved inputs in {}", dir.display());
}
