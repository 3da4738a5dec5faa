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
//!
//! A call's root is opened, as a descriptor, on every call, for the call's worker (never on the
//! reader thread, where a root slow to open would hold up every tenant) and within the call's
//! time limit ([`crate::root_opener`]); it is checked on where that opened directory is. A kept toolset serves the call
//! only if it is the toolset of that very directory (same device and inode) at that very place:
//! a directory replaced at the path gets a toolset of its own, checked afresh, and a kept one
//! that was moved elsewhere (into a store, say) is not used again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use crate::allow::ServedRoots;
use crate::lru::least_recently_used;
use crate::root_opener::{OpenError, RootOpener};
use mcp_core::toolset::{CallContext, ToolDef, ToolOutput, Toolset, ToolsetFactory};
use workspace::guard::PathGuard;
use workspace::root::{DirId, OpenedRoot};
use workspace::Workspace;

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

/// A root's toolset, where its directory was when it was opened, and when it was last used (a
/// counter, not a clock).
struct OpenRoot {
    toolset: Arc<dyn Toolset>,
    /// The root's workspace handle (the descriptor the toolset works through), for the call log.
    ws: Workspace,
    /// Where the directory was when its toolset was built: a call that finds it elsewhere does not
    /// use this toolset.
    real: PathBuf,
    /// The spellings the root's guard accepts, learnt from the calls that named it.
    spellings: workspace::root::Spellings,
    used: u64,
}

/// The open toolsets by the identity of their directory, least recently used first out.
struct OpenRoots {
    map: HashMap<DirId, OpenRoot>,
    clock: u64,
    limit: usize,
}

impl OpenRoots {
    /// The kept toolset of the directory `opened` is open on, if it was built for that directory
    /// at the place it is now.
    fn get(
        &mut self,
        opened: &OpenedRoot,
    ) -> Option<(Arc<dyn Toolset>, Workspace, workspace::root::Spellings)> {
        self.clock += 1;
        let now = self.clock;
        let open = self.map.get_mut(&opened.id())?;
        if open.real != opened.real() {
            return None;
        }
        open.used = now;
        Some((
            open.toolset.clone(),
            open.ws.clone(),
            open.spellings.clone(),
        ))
    }

    /// Closes the least recently used half.
    fn shed(&mut self) {
        let mut by_age: Vec<(u64, DirId)> =
            self.map.iter().map(|(id, open)| (open.used, *id)).collect();
        by_age.sort_unstable();
        let half = by_age.len().div_ceil(2);
        for (_, id) in by_age.into_iter().take(half) {
            self.map.remove(&id);
        }
    }

    /// Keeps `open` for the directory `id`, dropping what it replaces (the same directory kept at
    /// another place, or another directory kept at this place: neither is served again) and
    /// closing the least recently used beyond [`OPEN_ROOTS`]. A call still running on a closed
    /// toolset keeps it alive until it ends: the table holds one reference, each call another.
    fn insert(&mut self, id: DirId, mut open: OpenRoot) {
        self.map.remove(&id);
        self.map.retain(|_, kept| kept.real != open.real);
        while self.map.len() >= self.limit {
            let Some(oldest) = least_recently_used(&self.map, |open| open.used) else {
                break;
            };
            self.map.remove(&oldest);
        }
        self.clock += 1;
        open.used = self.clock;
        self.map.insert(id, open);
    }
}

/// A toolset that routes each call to the toolset of the root named in its `root` argument.
pub struct PerRoot {
    factory: Box<dyn ToolsetFactory<PathGuard>>,
    tools: Vec<ToolDef>,
    served: Arc<ServedRoots>,
    /// Opens each call's root within the call's time limit.
    opener: Arc<RootOpener>,
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
            opener: RootOpener::new(served.clone()),
            served,
            roots: Mutex::new(OpenRoots {
                map: HashMap::new(),
                clock: 0,
                limit: open_roots(),
            }),
        }
    }

    /// The toolset of the directory `opened` is open on, kept or built now, and its workspace.
    fn toolset_for(
        &self,
        opened: OpenedRoot,
        given: &str,
    ) -> Result<(Arc<dyn Toolset>, Workspace), String> {
        let mut roots = self
            .roots
            .lock()
            .map_err(|_| "internal error: root table poisoned".to_string())?;
        if let Some((existing, ws, spellings)) = roots.get(&opened) {
            spellings.learn(Path::new(given), opened.real());
            return Ok((existing, ws));
        }
        // Only a whole toolset is kept: one that failed is built again on the next call instead
        // of being served with parts missing. Out of descriptors (a low `ulimit -n`), the older
        // half of the open roots is closed and the root tried once more.
        let id = opened.id();
        let real = opened.real().to_path_buf();
        let spellings = opened.spellings();
        let ws = opened.into_workspace();
        let toolset = match self.open(&ws, &spellings) {
            Err(e) if out_of_descriptors(&e) => {
                roots.shed();
                self.open(&ws, &spellings)
            }
            other => other,
        }
        .map_err(|e| format!("cannot open root '{given}': {e}"))?;
        roots.insert(
            id,
            OpenRoot {
                toolset: toolset.clone(),
                ws: ws.clone(),
                real,
                spellings,
                used: 0,
            },
        );
        Ok((toolset, ws))
    }

    /// Builds the toolset of the root `ws`, whose guard accepts `spellings` (the spellings of the
    /// root the calls name it by, shared with the table so later calls can add theirs).
    fn open(
        &self,
        ws: &Workspace,
        spellings: &workspace::root::Spellings,
    ) -> std::io::Result<Arc<dyn Toolset>> {
        let guard = PathGuard::for_workspace(ws.clone()).with_spellings(spellings.clone());
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

    /// Each root is a lane, named by its spelling with `.` and `..` folded: decided on the reader
    /// thread, so nothing here touches the disk (a root slow to resolve must not hold up other
    /// tenants' calls). Two spellings of one root through links are two lanes; their calls may
    /// then run side by side, as two servers' calls on one root can, each mutation under the
    /// root's store lock.
    fn lane(&self, _name: &str, args: &Map<String, Value>) -> String {
        match args.get("root") {
            Some(Value::String(given)) => workspace::guard::normalize(Path::new(given))
                .to_string_lossy()
                .into_owned(),
            _ => String::new(),
        }
    }

    fn call(&self, name: &str, args: &Map<String, Value>, ctx: &CallContext) -> ToolOutput {
        crate::ran_on::clear();
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
        let opened = match self.opener.open(&given, ctx) {
            Ok(opened) => opened,
            Err(e) => {
                let kind = match &e {
                    OpenError::Stopped { stop, .. } => stop.kind(),
                    OpenError::Busy(_) | OpenError::NoThread { .. } => "IoError",
                    OpenError::Refused(_) => "InvalidArgument",
                };
                return ToolOutput::error(kind, format!("{kind}: {e}"));
            }
        };
        let (toolset, ws) = match self.toolset_for(opened, &given) {
            Ok(t) => t,
            Err(msg) => {
                return ToolOutput::error("InvalidArgument", format!("InvalidArgument: {msg}"))
            }
        };
        crate::ran_on::set(&ws);
        let mut inner = args.clone();
        inner.remove("root");
        toolset.call(name, &inner, ctx)
    }
}
