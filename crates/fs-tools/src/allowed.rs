//! `list_allowed_directories`, the reference server's tool for "where may I work": an opt-in
//! extra (`--tools extended`, or by name), so the default mode keeps exactly the 14 tools that
//! adoption studies compare.
//!
//! The answer has the reference server's format, `Allowed directories:` and then one directory
//! per line. The first is the root this toolset serves; after it come the other roots an MCP
//! client listed (see the binary's roots support), which are shown so a model knows they exist
//! but are not served: only the first is the workspace every path is confined to.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde_json::{json, Map, Value};

use super::error::FsError;
use super::tools::LIST_ALLOWED_DIRECTORIES;
use super::{reject_unknown, FsContext};
use mcp_core::toolset::{Effects, ToolDef, ToolOutput};

/// The most other roots listed: a client's roots list is bounded by the message size only, and
/// a model needs to see a handful, not thousands.
pub const MAX_LISTED: usize = 64;

/// The other directories a client named as roots, shared between whoever learns them (the
/// binary, from `roots/list`) and every toolset it builds: listed by `list_allowed_directories`
/// after the served root, never served. Empty when the root came from `--root`.
#[derive(Clone, Debug, Default)]
pub struct ListedRoots(Arc<RwLock<Vec<PathBuf>>>);

impl ListedRoots {
    /// Replaces the list (the client's latest answer), keeping at most [`MAX_LISTED`].
    pub fn set(&self, mut roots: Vec<PathBuf>) {
        roots.truncate(MAX_LISTED);
        if let Ok(mut list) = self.0.write() {
            *list = roots;
        }
    }

    /// The current list.
    pub fn get(&self) -> Vec<PathBuf> {
        self.0.read().map(|l| l.clone()).unwrap_or_default()
    }
}

/// The tool's definition.
pub fn definitions() -> Vec<ToolDef> {
    vec![ToolDef {
        name: LIST_ALLOWED_DIRECTORIES.into(),
        title: "List Allowed Directories".into(),
        description: "List the directories this server may access: `Allowed directories:` and one absolute \
                      path per line. The first is the workspace root every path is relative to; any others are \
                      roots the client also named, which are listed but not served."
            .into(),
        input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "directories": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["directories"],
        })),
        effects: Effects::READ_ONLY,
    }]
}

/// Lists the served root, then the other roots the client named.
pub fn list_allowed_directories(
    cx: &FsContext,
    args: &Map<String, Value>,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &[])?;
    let served = cx.guard.root().to_path_buf();
    let mut dirs = vec![served.clone()];
    dirs.extend(cx.options.listed.get().into_iter().filter(|d| *d != served));
    let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let text = format!("Allowed directories:\n{}", shown.join("\n"));
    Ok(ToolOutput::structured(text, json!({"directories": shown})))
}
