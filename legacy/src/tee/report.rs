//! What a tee did, as the `meta.tee` object reports it.

use serde_json::{json, Value};

/// Whether a tee replaces the file or adds to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TeeMode {
    /// Replace the whole file (atomically).
    Overwrite,
    /// Add to the end (`tee -a`).
    Append,
}

impl TeeMode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TeeMode::Overwrite => "overwrite",
            TeeMode::Append => "append",
        }
    }
}

/// What one tee wrote, as reported in `meta.tee`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeeReport {
    /// Targets, relative to the root.
    pub paths: Vec<String>,
    /// Bytes written to each target.
    pub bytes: u64,
    /// Overwrite or append.
    pub mode: TeeMode,
    /// Mirror files, relative to the root.
    pub mirror: Vec<String>,
    /// True when the input was longer than the hard limit and was cut.
    pub truncated: bool,
}

impl TeeReport {
    /// The `meta.tee` object. Several tees in one pipeline are merged into one report (paths and
    /// mirrors concatenated, the largest byte count, `mode: "mixed"` if they differ).
    pub fn merged_json(reports: &[TeeReport]) -> Value {
        let Some(first) = reports.first() else {
            return Value::Null;
        };
        let mode = if reports.iter().all(|r| r.mode == first.mode) {
            first.mode.as_str()
        } else {
            "mixed"
        };
        json!({
            "paths": reports.iter().flat_map(|r| r.paths.clone()).collect::<Vec<_>>(),
            "bytes": reports.iter().map(|r| r.bytes).max().unwrap_or(0),
            "mode": mode,
            "mirror": reports.iter().flat_map(|r| r.mirror.clone()).collect::<Vec<_>>(),
            "truncated": reports.iter().any(|r| r.truncated),
        })
    }
}
