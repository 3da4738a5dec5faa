//! The filesystem toolset (the default mode).

pub mod error;
pub mod recovery;

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
        let mut defs = stand_in::definitions();
        defs.extend(recovery::definitions(&self.options));
        defs
    }
    fn build(&self, guard: PathGuard) -> Box<dyn Toolset> {
        let store = crate::history::Store::new(guard.root(), self.options.backup);
        Box::new(FsToolset {
            cx: FsContext {
                guard,
                store,
                options: self.options.clone(),
            },
        })
    }
}

/// The filesystem tools for one root.
pub struct FsToolset {
    cx: FsContext,
}

impl Toolset for FsToolset {
    fn mode(&self) -> String {
        "filesystem".into()
    }
    fn instructions(&self) -> String {
        String::new()
    }
    fn tools(&self) -> Vec<ToolDef> {
        let mut defs = stand_in::definitions();
        defs.extend(recovery::definitions(&self.cx.options));
        defs
    }
    fn call(&self, name: &str, args: &Map<String, Value>, _ctx: &CallContext) -> ToolOutput {
        recovery::call(&self.cx, name, args)
            .or_else(|| stand_in::call(&self.cx, name, args))
            .unwrap_or_else(|| ToolOutput::error("InvalidArgument", format!("unknown tool {name}")))
    }
}

/// A minimal `write_file` so the recovery tools can be exercised on this branch before the real
/// tool layer lands; the merge replaces this module with the real `write_file`.
mod stand_in {
    use super::error::FsError;
    use super::FsContext;
    use crate::toolset::{Args, Effects, ToolDef, ToolOutput};
    use serde_json::{json, Map, Value};

    pub(super) fn definitions() -> Vec<ToolDef> {
        vec![ToolDef {
            name: "write_file".into(),
            title: "Write file".into(),
            description: "Create or overwrite a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
            output_schema: None,
            effects: Effects {
                read_only: false,
                destructive: true,
                idempotent: true,
            },
        }]
    }

    pub(super) fn call(
        cx: &FsContext,
        name: &str,
        args: &Map<String, Value>,
    ) -> Option<ToolOutput> {
        if name != "write_file" {
            return None;
        }
        let run = || -> Result<ToolOutput, FsError> {
            let path = cx.guard.resolve_no_follow(Args(args).str("path")?)?;
            let content = Args(args).str("content")?;
            let lock = cx.store.lock()?;
            let r = cx
                .store
                .write(&lock, &path.relative, content.as_bytes(), false)?;
            let version = r
                .version
                .map(|v| format!(" (version {v})"))
                .unwrap_or_default();
            Ok(ToolOutput::text(format!(
                "Wrote {} bytes to {}{version}.",
                r.bytes,
                path.display()
            )))
        };
        Some(run().unwrap_or_else(FsError::into_output))
    }
}
