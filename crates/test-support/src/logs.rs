//! Reading the JSON-lines logs the binary writes (the call log under `.filesystem/`).

use std::path::Path;

use serde_json::Value;

/// Every line of a JSON-lines file, parsed; a missing file has none, and a line that is not JSON
/// (a torn write) fails the test.
pub fn json_lines(path: &Path) -> Vec<Value> {
    let raw = std::fs::read_to_string(path).unwrap_or_default();
    raw.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("torn line {l:?}: {e}")))
        .collect()
}
