//! Fuzz target: see `checks::workspace_walk`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::workspace_walk(data));
