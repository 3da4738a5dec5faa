//! The `--server` daemon: one process, many workspaces.
//!
//! A gateway in front of many users starts one server and names the workspace in every call. Each
//! distinct root gets its own toolset (its own guard, its own history store), so calls for one
//! root can never see another's files. Toolsets are created on first use and kept for the
//! [`OPEN_ROOTS`] most recently used roots; an older one is closed (its descriptors with it) and
//! opened again when next named, so twenty thousand tenants cost no more descriptors than
//! [`OPEN_ROOTS`]. Each root is its own lane: its calls run in order, other roots' beside them.
//!
//! Which roots may be named at all is settled by [`ServedRoots`]: only directories at or below
//! the daemon's allowed places, and never a store directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use crate::allow::ServedRoots;
use crate::lru::least_recently_used;
use mcp_core::toolset::{CallContext, ToolDef, ToolOutput, Toolset, ToolsetFactory};
use workspace::guard::PathGuard;

/// Threads running calls in `--server` mode: calls for one root run one at a time in the order
/// received, calls for different roots side by side, so one tenant's slow call does not hold up
/// the others (up to this many slow tenants at once).
pub const WORKERS: usize = 4;

/// Roots whose toolsets (two or three descriptors each) are kept open at most; the least
/// recently used beyond this is closed. A low descriptor limit lowers it (see [`open_roots`]).
pub const OPEN_ROOTS: usize = 64;

/// Descriptors left for the calls themselves (files being read or written, a pipeline's pipes)
/// when the open roots are budgeted.
const CALL_DESCRIPTORS: u64 = 64;

/// How many roots to keep open under this process's descriptor limit: about four descriptors
/// each (root, store, call log, slack), after [`CALL_DESCRIPTORS`], between 4 and [`OPEN_ROOTS`].
pub fn open_roots() -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let budget = soft.saturating_sub(CALL_DESCRIPTORS) / 4;
    usize::try_from(budget)
        .unwrap_or(OPEN_ROOTS)
        .clamp(4, OPEN_ROOTS)
}

/// A root's toolset and when it was last used (a counter, not a clock).
struct OpenRoot {
    toolset: Arc<dyn Toolset>,
    /// The spellings the root's guard accepts, learnt from the calls that named it.
    spellings: workspace::root::Spellings,
    used: u64,
}

/// The open toolsets, least recently used first out.
struct OpenRoots {
    map: HashMap<PathBuf, OpenRoot>,
    clock: u64,
    limit: usize,
}

impl OpenRoots {
    fn get(&mut self, root: &Path) -> Option<(Arc<dyn Toolset>, workspace::root::Spellings)> {
        self.clock += 1;
        let now = self.clock;
        self.map.get_mut(root).map(|open| {
            open.used = now;
            (open.toolset.clone(), open.spellings.clone())
        })
    }

    /// Closes the least recently used half.
    fn shed(&mut self) {
        let mut by_age: Vec<(u64, PathBuf)> = self
            .map
            .iter()
            .map(|(root, open)| (open.used, root.clone()))
            .collect();
        by_age.sort_unstable();
        let half = by_age.len().div_ceil(2);
        for (_, root) in by_age.into_iter().take(half) {
            self.map.remove(&root);
        }
    }

    /// Keeps `toolset` for `root`, closing the least recently used beyond [`OPEN_ROOTS`]. A call
    /// still running on a closed toolset keeps it alive until it ends: the table holds one
    /// reference, each call another.
    fn insert(
        &mut self,
        root: PathBuf,
        toolset: Arc<dyn Toolset>,
        spellings: workspace::root::Spellings,
    ) {
        while self.map.len() >= self.limit {
            let Some(oldest) = least_recently_used(&self.map, |open| open.used) else {
                break;
            };
            self.map.remove(&oldest);
        }
        self.clock += 1;
        let used = self.clock;
        self.map.insert(
            root,
            OpenRoot {
                toolset,
                spellings,
                used,
            },
        );
    }
}

/// A toolset that routes each call to the toolset of the root named in its `root` argument.
pub struct PerRoot {
    factory: Box<dyn ToolsetFactory<PathGuard>>,
    tools: Vec<ToolDef>,
    served: Arc<ServedRoots>,
    roots: Mutex<OpenRoots>,
}

impl PerRoot {
    /// Serves `factory`'s mode for the roots a caller names, as far as `served` allows them. The
    /// same `served` is shared with the call log, so a refused root gets no log either.
    pub fn new(factory: Box<dyn ToolsetFactory<PathGuard>>, served: Arc<ServedRoots>) -> Self {
        let tools = factory
            .definitions()
            .into_iter()
            .map(with_root_argument)
            .collect();
        PerRoot {
            factory,
            tools,
            served,
            roots: Mutex::new(OpenRoots {
                map: HashMap::new(),
                clock: 0,
                limit: open_roots(),
            }),
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
        if let Some((existing, spellings)) = roots.get(&canonical) {
            spellings.learn(Path::new(given), &canonical);
            return Ok(existing);
        }
        // Only a whole toolset is kept: one that failed is built again on the next call instead
        // of being served with parts missing. Out of descriptors (a low `ulimit -n`), the older
        // half of the open roots is closed and the root tried once more.
        workspace::park::park(workspace::park::Point::RootOpened, Path::new(given));
        let spellings = workspace::root::Spellings::of(Path::new(given), &canonical);
        let toolset = match self.open(&canonical, &spellings) {
            Err(e) if out_of_descriptors(&e) => {
                roots.shed();
                self.open(&canonical, &spellings)
            }
            other => other,
        }
        .map_err(|e| format!("cannot open root '{given}': {e}"))?;
        roots.insert(canonical, toolset.clone(), spellings);
        Ok(toolset)
    }

    /// Builds the toolset of canonical `root`, whose guard accepts `spellings` (the spellings of
    /// the root the calls name it by, shared with the table so later calls can add theirs).
    fn open(
        &self,
        root: &Path,
        spellings: &workspace::root::Spellings,
    ) -> std::io::Result<Arc<dyn Toolset>> {
        let guard = PathGuard::new(root)?.with_spellings(spellings.clone());
        Ok(Arc::from(self.factory.build(guard)?))
    }
}

/// True for the errors of a process (or system) out of descriptors.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    let raw = e.raw_os_error();
    raw == Some(rustix::io::Errno::MFILE.raw_os_error())
        || raw == Some(rustix::io::Errno::NFILE.raw_os_error())
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

    /// Each root is a lane, named by where it resolves now, so two spellings of one root are
    /// ordered together. A root that does not resolve gets its spelling as lane: its call only
    /// fails.
    fn lane(&self, _name: &str, args: &Map<String, Value>) -> String {
        match args.get("root") {
            Some(Value::String(given)) => match self.served.resolve(given) {
                Ok(canonical) => canonical.to_string_lossy().into_owned(),
                Err(_) => given.clone(),
            },
            _ => String::new(),
        }
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
