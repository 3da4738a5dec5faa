//! The filesystem toolset (the default mode): the reference server's file API, confined by the
//! shared guard, with every mutation going through the history store so that it can be undone.
//!
//! This module only dispatches; each tool family lives in its own module (`read`, `write`,
//! `edit`, `list`), their names in the table of `tools`, their definitions in `schema`, and the
//! recovery tools (move, trash, restore, search, undo, redo) in `recovery`.

mod allowed;
mod append;
mod copy;
mod edit;
pub mod error;
mod extra;
mod list;
mod media;
mod operations;
mod paging;
mod read;
pub mod recovery;
mod schema;
mod search;
mod target;
pub mod tools;
mod write;

use error::FsError;
use mcp_core::toolset::{Args, CallContext, ToolDef, ToolOutput, Toolset, ToolsetFactory};
use serde_json::{Map, Value};
use workspace::guard::PathGuard;
use workspace::history::{LockWait, StoreLock};

pub use allowed::ListedRoots;
pub use tools::TOOLS;

/// Settings of the filesystem mode.
#[derive(Clone, Debug)]
pub struct FsOptions {
    /// Keep a version history of every write (`--backup`), enabling undo and redo.
    pub backup: bool,
    /// Largest file `read_text_file` returns whole, and the most bytes one
    /// `read_multiple_files` call returns in all.
    pub max_read_bytes: u64,
    /// The most bytes one answer carries (`--max-result-bytes`): what does not fit is paged.
    pub result_budget: mcp_core::budget::ResultBudget,
    /// Keep the structured paging fields (`next_offset`, `next_cursor`, …) on the answers of
    /// tools that declare no output schema (`--structured-paging`). Off by default: Claude Code
    /// and Codex CLI show the model a result's `structuredContent` in place of its text whenever
    /// it is present (the spec has the text be a copy of it), so a page of a file would reach the
    /// model as its paging fields alone. The text always carries the note that says how to go on.
    pub structured_paging: bool,
    /// Which tools are served (`--tools`).
    pub tools: tools::Selection,
    /// Other roots an MCP client named, shown by `list_allowed_directories` (empty with
    /// `--root`).
    pub listed: ListedRoots,
    /// Who may write where (`--read-only`, `--read-only-dir`, `--writable-dir`); under
    /// `--read-only` the tools that change anything are not served at all.
    pub permissions: workspace::permissions::Permissions,
}

/// Everything a filesystem tool needs: the root's guard, its history store, the mode's settings.
pub struct FsContext {
    /// Confines every path argument.
    pub guard: PathGuard,
    /// Performs and records every mutation.
    pub store: workspace::history::Store,
    /// The mode's settings.
    pub options: FsOptions,
}

impl FsContext {
    /// The store's lock for the call `ctx`: waits no longer than the call may run and stops
    /// waiting when the client cancels it, so a call queued behind another process's long hold
    /// (a conversion, `audit import`, `check --repair`) fails in time instead of hanging its lane.
    pub(crate) fn lock(&self, ctx: &CallContext) -> Result<StoreLock, FsError> {
        let gave_up = || ctx.cancel.is_cancelled();
        let origin = workspace::history::oplog::Origin {
            client: ctx.client.as_ref().and_then(|c| c.name.clone()),
            version: ctx.client.as_ref().and_then(|c| c.version.clone()),
            mode: "filesystem".into(),
            tool: ctx.tool.clone(),
        };
        self.store
            .begin(&LockWait::new(ctx.deadline, &gave_up), &origin)
            .map_err(|e| lock_error(e, ctx))
    }

    /// [`FsContext::lock`] for a call that only reads the store (`None` when there is none).
    pub(crate) fn lock_for_reading(&self, ctx: &CallContext) -> Result<Option<StoreLock>, FsError> {
        let gave_up = || ctx.cancel.is_cancelled();
        self.store
            .lock_for_reading_within(&LockWait::new(ctx.deadline, &gave_up))
            .map_err(|e| lock_error(e, ctx))
    }
}

/// A cancelled wait for the lock is a cancelled call; any other failure says what it was.
fn lock_error(e: workspace::history::HistoryError, ctx: &CallContext) -> FsError {
    match ctx.stopped() {
        Some(stop @ mcp_core::toolset::Stop::Cancelled) => FsError::Stopped {
            stop,
            what: "waiting for the history store's lock".into(),
        },
        _ => e.into(),
    }
}

/// What the model is told about this toolset, so it knows when to prefer it over a shell.
const INSTRUCTIONS: &str = "\
File access confined to one workspace, with nothing lost: prefer these tools over shell commands \
for reading, creating and changing files here. Paths are relative to the workspace root.
- Read with read_text_file (head/tail, or offset/limit, for part of a file); explore with \
list_directory and directory_tree (build/cache directories and .gitignore'd entries are left out).
- A large answer comes in pages: it ends with a note saying how to get the rest (offset=N for a \
file, cursor=\"…\" for a listing or search); call the same tool again with it, not another tool.
- Change part of a file with edit_file (oldText must match one place; dryRun previews the diff); \
create new files with create_file; replace whole files with write_file. Writes are atomic.
- delete_file moves to a trash (list_trash, restore_file bring it back); move_file and \
delete_file are logged, so search_file can tell where a path went.
- With version history enabled, every write is a version: undo_file and redo_file step through them.
- .filesystem/ and .shelpa/ hold the server's own history and cannot be touched; symlinks are \
never written through and never lead outside the workspace.";

/// The instructions for `options`: [`INSTRUCTIONS`], and a line naming the opt-in tools that
/// are served, so a model learns they exist before it reaches for a shell.
fn instructions(options: &FsOptions) -> String {
    let base = served_instructions(options);
    let rules = options.permissions.describe();
    if rules.is_empty() {
        return base;
    }
    let read_only = if options.permissions.is_read_only() {
        " This server is read-only: the tools that change files are not served."
    } else {
        " A change they refuse fails with ReadOnly."
    };
    format!(
        "{base}\n- This server's write rules: {}.{read_only}",
        rules.join("; ")
    )
}

/// [`instructions`] without the write rules.
fn served_instructions(options: &FsOptions) -> String {
    if options.tools == tools::Selection::Default {
        return INSTRUCTIONS.into();
    }
    let what = |name: &str| match name {
        tools::READ_MULTIPLE_FILES => "several files in one read",
        tools::GET_FILE_INFO => "a path's type, size, permissions and times",
        tools::LIST_DIRECTORY_WITH_SIZES => "a listing with sizes",
        tools::READ_MEDIA_FILE => "an image or audio file as image/audio content",
        tools::LIST_ALLOWED_DIRECTORIES => "the workspace root and the client's other roots",
        tools::SEARCH_CONTENT => "a regex or text search of file contents",
        tools::COPY_FILE => "a file or directory copied, links never followed",
        tools::APPEND_FILE => "text added at the end of a file, atomically",
        tools::LIST_OPERATIONS => "the log of every change made through this server",
        tools::REVERT_OPERATION => "putting back what logged operations changed",
        _ => "paths by glob",
    };
    let extras: Vec<String> = tools::EXTRAS
        .iter()
        .filter(|t| options.tools.serves(t.name))
        .map(|t| format!("{} ({})", t.name, what(t.name)))
        .collect();
    if extras.is_empty() {
        return INSTRUCTIONS.into();
    }
    format!("{INSTRUCTIONS}\n- Also served: {}.", extras.join(", "))
}

/// Every tool this mode serves with `options`: the file tools, then the recovery tools, then
/// the opt-in extras, less what `--tools` did not select.
fn all_definitions(options: &FsOptions) -> Vec<ToolDef> {
    let mut defs = schema::definitions();
    defs.extend(recovery::definitions(options));
    if options.tools != tools::Selection::Default {
        defs.extend(extra::definitions());
        defs.push(media::definition());
        defs.extend(allowed::definitions());
        defs.push(search::definition());
        defs.push(copy::definition());
        defs.push(append::definition());
        defs.extend(operations::definitions());
    }
    defs.retain(|d| serves(options, &d.name, d.effects.read_only));
    defs
}

/// True when `name` is served with `options`: selected by `--tools`, and under `--read-only`
/// only if it changes nothing (`read_only`, its definition's own annotation).
fn serves(options: &FsOptions, name: &str, read_only: bool) -> bool {
    options.tools.serves(name) && (read_only || !options.permissions.is_read_only())
}

/// Refuses arguments the tool does not know, so a typo (`old_text`) is reported, not ignored:
/// the core's one checker ([`Args::check_names`]) in this mode's `InvalidArgument` kind.
pub(crate) fn reject_unknown(args: &Map<String, Value>, known: &[&str]) -> Result<(), FsError> {
    Ok(Args(args).check_names(known)?)
}

/// The argument a gateway injects into every call: meaningful in `--server` mode (where the
/// daemon consumes it before the toolset sees the call), ignored here, where `--root` alone
/// decides the workspace.
const GATEWAY_ROOT: &str = "root";

/// `args` without a gateway's `root`, or `None` when there is none (the common case, so no copy
/// is made). Done once, before dispatch, so every tool's unknown-argument check sees the same
/// arguments; any other unknown argument is still refused.
fn without_gateway_root(args: &Map<String, Value>) -> Option<Map<String, Value>> {
    if !args.contains_key(GATEWAY_ROOT) {
        return None;
    }
    let mut args = args.clone();
    args.remove(GATEWAY_ROOT);
    Some(args)
}

/// Builds filesystem toolsets.
pub struct FsFactory {
    /// The mode's settings.
    pub options: FsOptions,
}

impl ToolsetFactory<PathGuard> for FsFactory {
    fn mode(&self) -> String {
        "filesystem".into()
    }
    fn instructions(&self) -> String {
        instructions(&self.options)
    }
    fn definitions(&self) -> Vec<ToolDef> {
        all_definitions(&self.options)
    }
    fn build(&self, guard: PathGuard) -> std::io::Result<Box<dyn Toolset>> {
        Ok(Box::new(FsToolset::new(guard, self.options.clone())))
    }
}

/// The filesystem tools for one root.
pub struct FsToolset {
    cx: FsContext,
    /// The tools that declare an output schema, worked out at the first answer that needs it
    /// (building every definition at start-up would slow `initialize`).
    with_schema: std::sync::OnceLock<Vec<String>>,
}

impl FsToolset {
    /// The toolset for `guard`'s root, with that root's history store.
    pub fn new(guard: PathGuard, options: FsOptions) -> Self {
        let guard = guard.with_permissions(&options.permissions);
        let store = workspace::history::Store::new(guard.workspace().clone(), options.backup)
            .with_permissions(guard.permissions().clone());
        // Tool definitions are built when asked for (the server asks once and keeps them):
        // building their schemas was a tenth of the time from exec to the `initialize` answer.
        FsToolset {
            cx: FsContext {
                guard,
                store,
                options,
            },
            with_schema: std::sync::OnceLock::new(),
        }
    }

    /// For unit tests of the extras: every tool served on `root`, a 1 KiB read limit, no history.
    #[cfg(test)]
    pub(crate) fn extended_for_test(root: &std::path::Path) -> Self {
        let guard = PathGuard::new(root).expect("guard");
        FsToolset::new(
            guard,
            FsOptions {
                backup: false,
                max_read_bytes: 1024,
                result_budget: Default::default(),
                structured_paging: false,
                tools: tools::Selection::Extended,
                listed: Default::default(),
                permissions: Default::default(),
            },
        )
    }
}

impl FsToolset {
    /// Whether `name` declares an output schema: only those answers keep structured content
    /// unless `--structured-paging` asks for it everywhere.
    fn declares_schema(&self, name: &str) -> bool {
        self.with_schema
            .get_or_init(|| {
                all_definitions(&self.cx.options)
                    .into_iter()
                    .filter(|d| d.output_schema.is_some())
                    .map(|d| d.name)
                    .collect()
            })
            .iter()
            .any(|n| n == name)
    }
}

impl Toolset for FsToolset {
    fn mode(&self) -> String {
        "filesystem".into()
    }
    fn instructions(&self) -> String {
        instructions(&self.cx.options)
    }
    fn tools(&self) -> Vec<ToolDef> {
        all_definitions(&self.cx.options)
    }
    fn call(&self, name: &str, args: &Map<String, Value>, ctx: &CallContext) -> ToolOutput {
        let cx = &self.cx;
        let stripped;
        let args = match without_gateway_root(args) {
            Some(a) => {
                stripped = a;
                &stripped
            }
            None => args,
        };
        // A tool left out by `--tools` (or by `--read-only`) is as unknown as a misspelt one.
        let read_only = || {
            all_definitions(&cx.options)
                .iter()
                .any(|d| d.name == name && d.effects.read_only)
        };
        if !cx.options.tools.serves(name) || (cx.options.permissions.is_read_only() && !read_only())
        {
            return FsError::InvalidArgument(format!(
                "unknown tool '{name}'; call tools/list for the tools of this mode"
            ))
            .into_output();
        }
        let result = match name {
            tools::READ_MULTIPLE_FILES => extra::read_multiple_files(cx, args, ctx),
            tools::GET_FILE_INFO => extra::get_file_info(cx, args, ctx),
            tools::LIST_DIRECTORY_WITH_SIZES => list::list_directory_with_sizes(cx, args),
            tools::FIND_FILES => extra::find_files(cx, args, ctx),
            tools::READ_MEDIA_FILE => media::read_media_file(cx, args, ctx),
            tools::LIST_ALLOWED_DIRECTORIES => allowed::list_allowed_directories(cx, args),
            tools::SEARCH_CONTENT => search::search_content(cx, args, ctx),
            tools::COPY_FILE => copy::copy_file(cx, args, ctx),
            tools::APPEND_FILE => append::append_file(cx, args, ctx),
            tools::LIST_OPERATIONS => operations::list_operations(cx, args, ctx),
            tools::REVERT_OPERATION => operations::revert_operation(cx, args, ctx),
            tools::READ_TEXT_FILE => read::read_text_file(cx, args, ctx),
            tools::CREATE_FILE => write::create_file(cx, args, ctx),
            tools::WRITE_FILE => write::write_file(cx, args, ctx),
            tools::EDIT_FILE => edit::edit_file(cx, args, ctx),
            tools::CREATE_DIRECTORY => write::create_directory(cx, args, ctx),
            tools::LIST_DIRECTORY => list::list_directory(cx, args),
            tools::DIRECTORY_TREE => list::directory_tree(cx, args, ctx),
            _ => match recovery::call(cx, name, args, ctx) {
                Some(output) => Ok(output),
                None => Err(FsError::InvalidArgument(format!(
                    "unknown tool '{name}'; call tools/list for the tools of this mode"
                ))),
            },
        };
        let mut output = result.unwrap_or_else(FsError::into_output);
        if output.structured.is_some()
            && !cx.options.structured_paging
            && !self.declares_schema(name)
        {
            output.structured = None;
        }
        output
    }
}
