//! The filesystem toolset (the default mode).

pub mod error;

use crate::guard::PathGuard;
use crate::toolset::{CallContext, ToolDef, ToolOutput, Toolset, ToolsetFactory};
use serde_json::{Map, Value};

/// Settings of the filesystem mode.
#[derive(Clone, Debug)]
pub struct FsOptions {
    /// Keep a version history of every write (`--backup`), enabling undo and redo.
    pub backup: bool,
    /// Largest file `read_text_file` returns whole.
    pub max_read_bytes: u64,
}

/// Everything a filesystem tool needs: the root's guard, its history store, the mode's settings.
pub struct FsContext {
    /// Confines every path argument.
    pub guard: PathGuard,
    /// Performs and records every mutation.
    pub store: crate::history::Store,
    /// The mode's settings.
    pub options: FsOptions,
}

/// Builds filesystem toolsets.
pub struct FsFactory {
    /// The mode's settings.
    pub options: FsOptions,
}

impl ToolsetFactory for FsFactory {
    fn mode(&self) -> String {
        "filesystem".into()
    }
    fn instructions(&self) -> String {
        String::new()
    }
    fn definitions(&self) -> Vec<ToolDef> {
        Vec::new()
    }
    fn build(&self, guard: PathGuard) -> Box<dyn Toolset> {
        Box::new(FsToolset {
            _guard: guard,
            _options: self.options.clone(),
        })
    }
}

/// The filesystem tools for one root.
pub struct FsToolset {
    _guard: PathGuard,
    _options: FsOptions,
}

impl Toolset for FsToolset {
    fn mode(&self) -> String {
        "filesystem".into()
    }
    fn instructions(&self) -> String {
        String::new()
    }
    fn tools(&self) -> Vec<ToolDef> {
        Vec::new()
    }
    fn call(&self, name: &str, _args: &Map<String, Value>, _ctx: &CallContext) -> ToolOutput {
        ToolOutput::error("InvalidArgument", format!("unknown tool {name}"))
    }
}
