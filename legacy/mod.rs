//! The shelpa generation (`--legacy-pipe`): a virtual pipeline shell.

pub mod parse;
pub mod plan;
pub mod policy;
pub mod tools;

use crate::guard::PathGuard;
use crate::toolset::{CallContext, ToolDef, ToolOutput, Toolset, ToolsetFactory};
use serde_json::{Map, Value};

/// Settings of the legacy pipe mode.
#[derive(Clone, Debug)]
pub struct PipeOptions {
    /// Wall-clock limit of one call, in seconds.
    pub timeout_secs: u64,
}

/// Builds legacy pipe toolsets.
pub struct PipeFactory {
    /// The mode's settings.
    pub options: PipeOptions,
}

impl PipeFactory {
    /// Prepares the mode (resolves the pipeline commands once).
    pub fn new(options: PipeOptions) -> Self {
        PipeFactory { options }
    }
}

/// shelpa's `--help` text.
pub fn help_text() -> String {
    "shelpa (filesystem --legacy-pipe)\n".into()
}

impl ToolsetFactory for PipeFactory {
    fn mode(&self) -> String {
        "legacy-pipe".into()
    }
    fn instructions(&self) -> String {
        String::new()
    }
    fn definitions(&self) -> Vec<ToolDef> {
        Vec::new()
    }
    fn build(&self, guard: PathGuard) -> Box<dyn Toolset> {
        Box::new(PipeToolset { _guard: guard })
    }
}

/// The pipe tools for one root.
pub struct PipeToolset {
    _guard: PathGuard,
}

impl Toolset for PipeToolset {
    fn mode(&self) -> String {
        "legacy-pipe".into()
    }
    fn instructions(&self) -> String {
        String::new()
    }
    fn tools(&self) -> Vec<ToolDef> {
        Vec::new()
    }
    fn call(&self, name: &str, _args: &Map<String, Value>, _ctx: &CallContext) -> ToolOutput {
        ToolOutput::error("DISALLOWED_CMD", format!("unknown tool {name}"))
    }
}

/// One line for `filesystem tools` naming pipeline commands that are missing on this machine
/// (empty when all are present).
pub fn tool_status_line() -> String {
    String::new()
}
