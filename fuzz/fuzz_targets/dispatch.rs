//! Fuzz target: see `checks::dispatch`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::dispatch(data));
