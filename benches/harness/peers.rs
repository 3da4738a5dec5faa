//! The servers being compared, how to start each on a workspace, and how each names its tools.
//!
//! Peers are told apart by what they are, not by how they are started: the harness adapts to
//! each one's tool and argument names as discovered through `tools/list`, so a peer that renames
//! a tool in a later release is still measured (or reported as not serving the case).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::client::Launch;

/// What a peer is; decides how it is started and which cases it takes part in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// This repository's `filesystem` binary.
    Ours,
    /// An earlier build of ours (`--baseline`), started exactly like ours, so that what the changes
    /// since then cost is measured in the same run as everything else.
    Baseline,
    /// The bare loop of [`super::floor`]: the cost no correct server can go below.
    Floor,
    /// The official TypeScript reference server (Node).
    Reference,
    /// `rust-mcp-filesystem`.
    RustMcp,
}

/// One server under comparison.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Column/row label in the report.
    pub label: String,
    /// What it is.
    pub kind: Kind,
    /// The executable (`node` for the reference server).
    pub program: PathBuf,
    /// Arguments before the workspace-specific ones (the script path for the reference server).
    pub leading: Vec<String>,
    /// Version string for the report.
    pub version: String,
}

impl Peer {
    /// How to start this peer on `root`; `extra` are flags only ours understands (`--backup`…).
    pub fn launch(&self, root: &Path, extra: &[&str], stderr_log: Option<PathBuf>) -> Launch {
        let mut args = self.leading.clone();
        let root = root.display().to_string();
        match self.kind {
            Kind::Ours | Kind::Baseline => {
                args.push("--root".into());
                args.push(root);
                args.extend(extra.iter().map(|s| s.to_string()));
            }
            Kind::Floor => args.push("--floor".into()),
            Kind::Reference => args.push(root),
            Kind::RustMcp => {
                args.push("--allow-write".into());
                args.push(root);
            }
        }
        Launch {
            label: self.label.clone(),
            program: self.program.clone(),
            args,
            stderr_log,
        }
    }
}

/// Other names a peer may use for one of the tools the cases call.
fn aliases(tool: &str) -> &'static [&'static str] {
    match tool {
        "read_text_file" => &["read_text_file", "read_file"],
        "directory_tree" => &["directory_tree"],
        "edit_file" => &["edit_file"],
        "write_file" => &["write_file"],
        "undo_file" => &["undo_file"],
        "redo_file" => &["redo_file"],
        "shelpa_pipe" => &["shelpa_pipe"],
        "move_file" => &["move_file"],
        "search_file" => &["search_file"],
        // Ours names the reference server's `search_files` `find_files`, and rust-mcp-filesystem
        // calls its batch read `read_multiple_text_files`.
        "find_files" => &["find_files", "search_files"],
        "read_multiple_files" => &["read_multiple_files", "read_multiple_text_files"],
        "search_content" => &["search_content"],
        _ => &[],
    }
}

/// The name under which a server offers `tool` (from its `tools/list`), provided its schema
/// takes every argument in `needs`; `Err` says why the case cannot run on it.
pub fn find_tool(tools: &[Value], tool: &str, needs: &[&str]) -> Result<String, String> {
    for name in aliases(tool) {
        let Some(def) = tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
        else {
            continue;
        };
        let props = def.pointer("/inputSchema/properties");
        let missing: Vec<&str> = needs
            .iter()
            .copied()
            .filter(|arg| props.and_then(|p| p.get(*arg)).is_none())
            .collect();
        if missing.is_empty() {
            return Ok((*name).to_string());
        }
        return Err(format!(
            "its `{name}` takes no {} argument",
            missing.join("/")
        ));
    }
    Err(format!("does not serve `{tool}`"))
}
