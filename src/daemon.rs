//! The `--server` daemon: one process, many workspaces.
//!
//! A gateway in front of many users starts one server and names the workspace in every call. Each
//! distinct root gets its own toolset (its own guard, its own history store), created on first use
//! and kept for the life of the process, so calls for one root can never see another's files.
//!
//! Which roots may be named at all is settled by [`ServedRoots`]: only directories at or below
//! the daemon's allowed places, and never a store directory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use crate::allow::ServedRoots;
use crate::guard::PathGuard;
use crate::toolset::{CallContext, ToolDef, ToolOutput, Toolset, ToolsetFactory};

/// A toolset that routes each call to the toolset of the root named in its `root` argument.
pub struct PerRoot {
    factory: Box<dyn ToolsetFactory>,
    tools: Vec<ToolDef>,
    served: Arc<ServedRoots>,
    roots: Mutex<HashMap<PathBuf, Arc<dyn Toolset>>>,
}

impl PerRoot {
    /// Serves `factory`'s mode for the roots a caller names, as far as `served` allows them. The
    /// same `served` is shared with the call log, so a refused root gets no log either.
    pub fn new(factory: Box<dyn ToolsetFactory>, served: Arc<ServedRoots>) -> Self {
        let tools = factory
            .definitions()
            .into_iter()
            .map(with_root_argument)
            .collect();
        PerRoot {
            factory,
            tools,
            served,
            roots: Mutex::new(HashMap::new()),
        }
    }

    fn toolset_for(&self, given: &str) -> Result<Arc<dyn Toolset>, String> {
        // Resolved on every call, before the table is consulted: a root accepted once is judged
        // again by where it points now, so swapping a symlink later cannot redirect it.
        let canonical = self.served.resolve(given).map_err(|e| e.to_string())?;
        let mut roots = self
            .roots
            .lock()
            .map_err(|_| "internal error: root table poisoned".to_string())?;
        if let Some(existing) = roots.get(&canonical) {
            return Ok(existing.clone());
        }
        let guard =
            PathGuard::new(&canonical).map_err(|e| format!("cannot open root '{given}': {e}"))?;
        let toolset: Arc<dyn Toolset> = Arc::from(self.factory.build(guard));
        roots.insert(canonical, toolset.clone());
        Ok(toolset)
    }
}

/// Adds the required `root` argument to a tool's input schema.
fn with_root_argument(mut def: ToolDef) -> ToolDef {
    let schema = &mut def.input_schema;
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema["properties"] = json!({});
    }
    schema["properties"]["root"] = json!({
        "type": "string",
        "description": "Absolute path of the workspace this call acts on. Every call names its workspace; calls for different roots are isolated from each other."
    });
    let mut required: Vec<Value> = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    required.insert(0, json!("root"));
    schema["required"] = Value::Array(required);
    def
}

impl Toolset for PerRoot {
    fn mode(&self) -> String {
        format!("{} (server: one root per call)", self.factory.mode())
    }

    fn instructions(&self) -> String {
        format!(
            "{}\n\nThis server serves many workspaces: every tool call must include `root`, the absolute path of the workspace it acts on. Roots are served only at or below {}, and never inside a .filesystem/ or .shelpa/ store.",
            self.factory.instructions(),
            self.served.describe()
        )
    }

    fn tools(&self) -> Vec<ToolDef> {
        self.tools.clone()
    }

    fn call(&self, name: &str, args: &Map<String, Value>, ctx: &CallContext) -> ToolOutput {
        let given = match args.get("root") {
            Some(Value::String(r)) => r.clone(),
            Some(_) => {
                return ToolOutput::error(
                    "InvalidArgument",
                    "InvalidArgument: argument 'root' must be a string: the absolute path of the workspace",
                )
            }
            None => {
                return ToolOutput::error(
                    "InvalidArgument",
                    "InvalidArgument: missing required argument 'root': this server runs in --server mode, so every call must name its workspace as an absolute path",
                )
            }
        };
        let toolset = match self.toolset_for(&given) {
            Ok(t) => t,
            Err(msg) => {
                return ToolOutput::error("InvalidArgument", format!("InvalidArgument: {msg}"))
            }
        };
        let mut inner = args.clone();
        inner.remove("root");
        toolset.call(name, &inner, ctx)
    }
}
