//! Placeholder for the recovery tools (move, delete to trash, restore, search, undo, redo), which
//! are built on the history store in their own branch; this file is replaced when that lands.

use super::{FsContext, FsOptions};
use crate::toolset::{ToolDef, ToolOutput};
use serde_json::{Map, Value};

/// The recovery tools' definitions (none until the history branch lands).
pub fn definitions(_options: &FsOptions) -> Vec<ToolDef> {
    Vec::new()
}

/// Runs a recovery tool, or `None` when `name` is not one.
pub fn call(_cx: &FsContext, _name: &str, _args: &Map<String, Value>) -> Option<ToolOutput> {
    None
}
