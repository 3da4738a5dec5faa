//! The command line: choosing a mode and a root, then serving MCP or running one call by hand.

use std::io::{BufReader, IsTerminal};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;

use std::ffi::OsString;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::{Map, Value};

use crate::allow::ServedRoots;
use crate::call_log_writer::{CallLogWriter, LogTarget};
use crate::daemon::PerRoot;
use crate::roots::{ClientRoots, ClientRootsToolset};
use fs_tools::{FsFactory, FsOptions};
use mcp_core::server::CallObserver;
use mcp_core::server::{serve, ServerConfig};
use mcp_core::toolset::{CallContext, CombinedFactory, Toolset, ToolsetFactory};
use shelpa::surface::{ShelpaTools, Surface};
use shelpa::{PipeFactory, PipeOptions};
use workspace::guard::PathGuard;
use workspace::root;

const ABOUT: &str =
    "An MCP server (stdio) that gives an AI agent confined, recoverable access to one workspace.";

const LONG_ABOUT: &str = "\
An MCP server (stdio) that gives an AI agent confined, recoverable access to one workspace.

Modes:
  (default, --mcp)  the filesystem toolset: read, write, edit, list, move, delete to trash,
                    restore, search the history of a path; with --backup also undo/redo.
  --legacy-pipe     shelpa, the retired pipeline shell: whitelisted commands joined by pipes,
                    writes only through tee (mirrored under .shelpa/). By default it shows the
                    surface the design notes record (--surface original, server shelpa-mcp, the
                    tools of --shelpa-tools help); started as `shelpa-mcp` (a symlink to this
                    binary) it is `filesystem --legacy-pipe`.
  --server          one daemon for many workspaces: every tool call names its `root`.

Every path is confined to the root by one shared guard: '..' and symlinks cannot leave it,
.filesystem/ and .shelpa/ (the server's own state, at any depth) cannot be touched by tools,
and .git/ can be read but never changed. Every operation is done relative to directory
descriptors opened beneath the root, so a symlink swapped in mid-call makes it fail, never
escape.

The root is --root, else $FILESYSTEM_ROOT, else the current directory. When serving with none
of them usable (the current directory is '/' or unreadable), a client that declares MCP roots is
asked for them: its first file:// root is served, and roots/list_changed switches it. However it
is named, a root is opened once and served (tools, history, call log) through that descriptor,
never followed to wherever its path leads later; a root in a .filesystem/ or .shelpa/ store is
refused.

With --server, a call's root must be at or below an allowed directory: each --allow-root DIR,
else the ':'-separated list in $FILESYSTEM_ALLOW_ROOTS, else the home directory of the user
running the server ($HOME, or the passwd entry when HOME is unset; never '/' or a system
directory such as /etc or /usr). Symlinks are resolved first, and a root that is or lies inside
a .filesystem/ or .shelpa/ store is refused. Nested roots are fine.

Examples:
  filesystem --root ~/project                 serve MCP on stdin/stdout
  filesystem --root ~/project --backup        ... with undo/redo history
  filesystem tools --root ~/project           list the tools
  filesystem call read_text_file '{\"path\":\"README.md\"}' --root ~/project
  filesystem --server --allow-root /srv/ws    a daemon for the workspaces under /srv/ws";

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(name = "filesystem", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    #[command(flatten)]
    pub options: Options,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The flags: mode, root, limits. Global, so they work before or after a subcommand; under a
/// heading of their own, so a subcommand's help shows its own options first and apart.
#[derive(Args, Debug)]
#[command(next_help_heading = "Server and workspace options")]
pub struct Options {
    /// Serve the filesystem toolset over MCP on stdio (the default; accepted for explicitness).
    #[arg(long, global = true)]
    pub mcp: bool,

    /// Workspace root (default: $FILESYSTEM_ROOT, then the current directory).
    #[arg(long, value_name = "DIR", global = true)]
    pub root: Option<PathBuf>,

    /// Keep a version history of every write under .filesystem/ and offer undo_file/redo_file.
    #[arg(long, global = true)]
    pub backup: bool,

    /// Daemon mode for gateways: no fixed root; every tool call carries a `root` argument.
    #[arg(long, global = true, conflicts_with = "root")]
    pub server: bool,

    /// Serve the legacy shelpa pipeline toolset instead of the filesystem toolset.
    #[arg(long, global = true)]
    pub legacy_pipe: bool,

    /// With --legacy-pipe: serve the filesystem tools too, so an agent can choose between the
    /// pipe and the file API in one session (the call log records which it chose).
    #[arg(long, global = true, requires = "legacy_pipe")]
    pub with_filesystem: bool,

    /// With --legacy-pipe: `original` shows the names, descriptions, help and server name
    /// (shelpa-mcp) the design notes record; `modern` this reconstruction's rewritten texts. The
    /// tools behave the same in both.
    #[arg(
        long,
        value_enum,
        value_name = "SURFACE",
        default_value_t = Surface::Original,
        global = true,
        requires = "legacy_pipe"
    )]
    pub surface: Surface,

    /// With --legacy-pipe: which of shelpa's tool sets to serve: `pipe` (shelpa_pipe, the first
    /// version), `help` (shelpa_pipe and shelpa_write, the two the recorded help lists) or `all`
    /// (also shelpa_tee and shelpa).
    #[arg(
        long,
        value_enum,
        value_name = "SET",
        default_value_t = ShelpaTools::Help,
        global = true,
        requires = "legacy_pipe"
    )]
    pub shelpa_tools: ShelpaTools,

    /// Which filesystem tools to serve: `default` (the 14-tool API), `extended` (those and the
    /// extras read_multiple_files, get_file_info, list_directory_with_sizes, find_files,
    /// read_media_file, list_allowed_directories, search_content), or a comma-separated list of
    /// tool names from both.
    #[arg(
        long,
        value_name = "SET|NAME,NAME,…",
        value_parser = fs_tools::tools::Selection::parse,
        global = true
    )]
    pub tools: Option<fs_tools::tools::Selection>,

    /// Change nothing: the tools that write, move, delete or restore are not served, pipe mode
    /// refuses tee (READ_ONLY), no history store is created, and the call log is kept only with
    /// --call-log FILE. Also FILESYSTEM_READ_ONLY=1.
    #[arg(
        long,
        global = true,
        env = crate::write_rules::READ_ONLY_ENV,
        value_parser = clap::builder::BoolishValueParser::new(),
        hide_env_values = true
    )]
    pub read_only: bool,

    /// Refuse every change inside DIR (relative to the root; repeatable; also the ':'-separated
    /// list in $FILESYSTEM_READ_ONLY_DIRS), and moves into or out of it (error ReadOnly).
    #[arg(long, value_name = "DIR", global = true)]
    pub read_only_dir: Vec<String>,

    /// Let only DIR change (relative to the root; repeatable; also the ':'-separated list in
    /// $FILESYSTEM_WRITABLE_DIRS); --read-only-dir subtracts from it.
    #[arg(long, value_name = "DIR", global = true)]
    pub writable_dir: Vec<String>,

    /// Write the call log to this file instead of <root>/.filesystem/.calls.jsonl.
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        conflicts_with = "no_call_log"
    )]
    pub call_log: Option<PathBuf>,

    /// Do not log tool calls.
    #[arg(long, global = true)]
    pub no_call_log: bool,

    /// Include tool arguments (and so file contents) in the call log.
    #[arg(long, global = true)]
    pub call_log_args: bool,

    /// With --server: serve roots at or below DIR (repeatable). Default: the ':'-separated list in
    /// $FILESYSTEM_ALLOW_ROOTS, else the home directory of the user running the server.
    #[arg(long, value_name = "DIR", global = true, requires = "server")]
    pub allow_root: Vec<PathBuf>,

    /// Allow '/' as the workspace root (refused by default: desktop clients start servers in '/');
    /// with --server, allow `--allow-root /` and calls naming '/'.
    #[arg(long, global = true)]
    pub allow_root_slash: bool,

    /// Largest MCP message accepted, in bytes; larger ones are refused without being buffered.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024, global = true)]
    pub max_message_bytes: usize,

    /// Largest file read_text_file returns whole (without head/tail), in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024, global = true)]
    pub max_read_bytes: u64,

    /// The most bytes one tool answer carries (its text plus its structured copy), in every mode.
    /// A tool with more to say answers with what fits, cut at a line, an entry or a match, and
    /// says how to get the rest: read_text_file with `offset=`, the listings and searches with
    /// `cursor=`; pipe-mode stdout is cut with `truncated: true`. Agent harnesses save larger
    /// results to files of their own instead of showing them to the model. --max-read-bytes
    /// still bounds what a whole read may open.
    #[arg(
        long,
        value_name = "BYTES",
        env = mcp_core::budget::MAX_RESULT_BYTES_ENV,
        default_value_t = mcp_core::budget::DEFAULT_MAX_RESULT_BYTES,
        value_parser = parse_result_budget,
        global = true
    )]
    pub max_result_bytes: usize,

    /// Also put the paging fields (next_offset, next_cursor, truncated) of a cut answer in its
    /// structured content for tools that declare no output schema, for clients that read both.
    /// Off by default because Claude Code and Codex CLI show the model the structured content
    /// instead of the text when it is present, so the page itself would never reach the model;
    /// the text always ends with the note that says how to continue.
    #[arg(long, global = true)]
    pub structured_paging: bool,

    /// Wall-clock limit of every tool call, in seconds (0: no limit). A call past it stops before
    /// its next effect and is answered as a timeout having changed nothing.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, global = true)]
    pub timeout: u64,

    /// In --legacy-pipe mode, writes larger than this need `confirm_oversize: true`.
    #[arg(long, value_name = "BYTES", default_value_t = 2048, global = true)]
    pub approve_above: u64,

    /// In --legacy-pipe mode, writes are cut to this many bytes (reported as truncated).
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024, global = true)]
    pub max_write_bytes: usize,

    /// In --legacy-pipe mode, a pipeline's returned stdout is cut to this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024, global = true)]
    pub max_output_bytes: usize,

    /// In --legacy-pipe mode, the memory each pipeline stage may use (and the most its scratch
    /// files may hold): bytes, or with a suffix (512M, 2G); 0 for no limit. A stage past it is
    /// stopped with RESOURCE_LIMIT.
    #[arg(
        long,
        value_name = "BYTES",
        default_value = "1G",
        value_parser = shelpa::limits::parse_size,
        global = true
    )]
    pub stage_memory: u64,

    /// Tools per tools/list page (clients follow nextCursor for the rest).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100,
        global = true,
        hide = true
    )]
    pub page_size: usize,
}

/// Things to do instead of serving MCP.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one tool call without an MCP client and print its result (exit 1 if the tool failed).
    Call {
        /// Tool name, as listed by `filesystem tools`.
        tool: String,
        /// Arguments as a JSON object, e.g. '{"path":"README.md"}'.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// List the tools of the selected mode with one-line descriptions.
    Tools,
    /// Read, search, verify, restore and import old .shelpa/ mirrors (flags go after the subcommand).
    Audit(shelpa::audit::AuditArgs),
    /// Report tool adoption, errors and retries from call logs and client transcripts.
    Report(report::ReportArgs),
    /// Verify .filesystem/ and .shelpa/ after a crash; --repair fixes what is safe (exit 1 if an
    /// error remains; warnings only with --strict).
    Check(crate::check::CheckArgs),
    /// The operation log: every change made through the server, newest first; `log show OP`
    /// for one with its diffs.
    Log(crate::rewind::LogArgs),
    /// Put back what chosen operations changed (by id, --session or --since); never over a
    /// change they did not make unless --force. The revert is itself an operation.
    Revert(crate::rewind::RevertArgs),
    /// Run the adoption experiment: agents given tasks under each tool interface (see
    /// `filesystem study run --help`).
    Study {
        #[command(subcommand)]
        command: study::command::StudyCommand,
    },
}

/// Names that make a command line more than "serve with these flags": the subcommands (and
/// clap's `help`) and the help and version flags. Kept in step with [`Command`] by a test.
const NOT_LEAN: [&str; 13] = [
    "call",
    "log",
    "revert",
    "tools",
    "audit",
    "report",
    "check",
    "study",
    "help",
    "-h",
    "--help",
    "-V",
    "--version",
];

impl Cli {
    /// Parses a command line. Starting the server is what every MCP client does at the start of
    /// every session, so that case is parsed by a command that holds only the flags: building the
    /// whole tree (five subcommands, each given every global flag) was a fifth of the time from
    /// exec to the answer to `initialize`. Anything else, and anything the lean parse refuses,
    /// goes through the full command, so help, errors and suggestions are the same either way.
    pub fn parse_args(argv: Vec<OsString>) -> Cli {
        let lean = argv
            .iter()
            .skip(1)
            .all(|a| a.to_str().is_some_and(|a| !NOT_LEAN.contains(&a)));
        if lean {
            let command = Options::augment_args(clap::Command::new("filesystem"));
            if let Ok(options) = command
                .try_get_matches_from(&argv)
                .and_then(|m| Options::from_arg_matches(&m))
            {
                return Cli {
                    options,
                    command: None,
                };
            }
        }
        // The full parse also serves --help, which says how this system opens paths beneath the
        // root: that is only known at run time.
        let rules = crate::write_rules::from_argv(&argv)
            .map(|p| crate::write_rules::summary(&p))
            .unwrap_or_default();
        let command = Cli::command().after_long_help(format!(
            "Confinement on this system: every file operation is done relative to the root's descriptor, opening paths with {} (set FILESYSTEM_NO_OPENAT2=1 to force the per-component walk).\n\n{rules}",
            workspace::resolution_method()
        ));
        let matches = command.get_matches_from(argv);
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

/// Reads `--max-result-bytes`: a byte count no smaller than the least a page needs.
fn parse_result_budget(value: &str) -> Result<usize, String> {
    let min = mcp_core::budget::MIN_RESULT_BYTES;
    match value.trim().parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        Ok(n) => Err(format!(
            "{n} bytes is too small for an answer and its continuation note; give at least {min}"
        )),
        Err(_) => Err(format!(
            "'{value}' is not a number of bytes; give e.g. 40000"
        )),
    }
}

impl Options {
    /// The one result budget every toolset and the core share (`--max-result-bytes`).
    fn result_budget(&self) -> mcp_core::budget::ResultBudget {
        mcp_core::budget::ResultBudget::new(self.max_result_bytes)
    }

    /// The wall-clock limit of every call (`--timeout`; 0 means none).
    fn call_timeout(&self) -> Option<std::time::Duration> {
        (self.timeout > 0).then(|| std::time::Duration::from_secs(self.timeout))
    }

    /// The write rules of these flags and the environment (see [`crate::write_rules`]).
    pub fn permissions(&self) -> Result<workspace::permissions::Permissions, String> {
        crate::write_rules::permissions(self.read_only, &self.read_only_dir, &self.writable_dir)
    }

    fn factory(
        &self,
        listed: &fs_tools::ListedRoots,
    ) -> Result<Box<dyn ToolsetFactory<PathGuard>>, String> {
        let permissions = self.permissions()?;
        let fs = || -> Box<dyn ToolsetFactory<PathGuard>> {
            Box::new(FsFactory {
                options: FsOptions {
                    backup: self.backup,
                    max_read_bytes: self.max_read_bytes,
                    result_budget: self.result_budget(),
                    structured_paging: self.structured_paging,
                    tools: self.tools.clone().unwrap_or_default(),
                    listed: listed.clone(),
                    permissions: permissions.clone(),
                },
            })
        };
        if !self.legacy_pipe {
            return Ok(fs());
        }
        let pipe = Box::new(PipeFactory::new(PipeOptions {
            timeout_secs: self.timeout,
            approve_above: self.approve_above,
            max_write_bytes: self.max_write_bytes,
            max_output_bytes: self.max_output_bytes,
            result_budget: self.result_budget(),
            stage_memory: self.stage_memory,
            surface: self.surface,
            tool_set: self.shelpa_tools,
            permissions: permissions.clone(),
        }));
        Ok(if self.with_filesystem {
            Box::new(CombinedFactory::new(vec![pipe, fs()], PathGuard::try_clone))
        } else {
            pipe
        })
    }

    /// The call log for a server or a one-off call, unless turned off.
    fn call_log(&self, mode: String, scope: Scope) -> Option<Arc<dyn CallObserver>> {
        // A read-only server writes nothing into the workspace: its log goes only to a file
        // the operator named.
        if self.no_call_log || (self.read_only && self.call_log.is_none()) {
            return None;
        }
        let target = match (&self.call_log, scope) {
            (Some(file), _) => LogTarget::File(file.clone()),
            (None, Scope::Root(ws)) => LogTarget::Root(ws),
            (None, Scope::EachCall(_) | Scope::ClientRoots) => LogTarget::RootOfEachCall,
        };
        Some(Arc::new(CallLogWriter::new(
            target,
            mode,
            self.call_log_args,
        )))
    }

    /// The toolset for the chosen mode and root, and what it is confined to.
    fn toolset(&self) -> Result<(Arc<dyn Toolset>, Scope), String> {
        self.toolset_or_roots(false)
    }

    /// The toolset of a served session: as [`Options::toolset`], except that when neither
    /// `--root` nor `FILESYSTEM_ROOT` is given and the current directory cannot be the root
    /// (unreadable, or `/` without `--allow-root-slash`), the root comes from the client's MCP
    /// roots (see [`crate::roots`]) instead of the server refusing to start. One-off commands
    /// have no client to ask, so they keep the error.
    fn server_toolset(&self) -> Result<(Arc<dyn Toolset>, Scope), String> {
        self.toolset_or_roots(true)
    }

    /// The flag combinations the server refuses although they parse.
    fn flag_conflicts(&self) -> Result<(), String> {
        // `--tools` picks filesystem tools: the pipe alone has none, and a flag that silently
        // did nothing would leave the user believing the tools were served.
        if self.tools.is_some() && self.legacy_pipe && !self.with_filesystem {
            return Err(
                "--tools selects filesystem tools; with --legacy-pipe add --with-filesystem, or leave --tools out".into(),
            );
        }
        Ok(())
    }

    fn toolset_or_roots(&self, client_roots: bool) -> Result<(Arc<dyn Toolset>, Scope), String> {
        self.flag_conflicts()?;
        let listed = fs_tools::ListedRoots::default();
        let factory: Box<dyn ToolsetFactory<PathGuard>> =
            Box::new(ClearsLeftovers(self.factory(&listed)?));
        if self.server {
            // Settled before serving anything: a daemon with no usable allowed place must not
            // start, rather than start and refuse every call.
            let served = ServedRoots::from_settings(&self.allow_root, self.allow_root_slash)
                .map(Arc::new)
                .map_err(|e| e.to_string())?;
            let toolset = Arc::new(PerRoot::new(factory, served.clone()));
            return Ok((toolset, Scope::EachCall(served)));
        }
        // FILESYSTEM_ROOT is read by the resolver rather than by clap, so that one exported in a
        // shell does not collide with --server, which takes its roots from each call (above).
        let explicit =
            self.root.is_some() || std::env::var_os(root::ROOT_ENV).is_some_and(|v| !v.is_empty());
        let opened = match root::resolve_opened(self.root.as_deref(), self.allow_root_slash) {
            Ok(chosen) => chosen,
            // Only the current directory gives way to the client's roots: an explicit root that
            // does not work is the operator's mistake to hear about.
            Err(e) if client_roots && !explicit && !self.server => {
                // The toolsets announce their own name; this one must say it before any exists:
                // shelpa alone in its original surface is `shelpa-mcp`, every other mode (the
                // combined one too) `filesystem`.
                let name = if self.legacy_pipe
                    && !self.with_filesystem
                    && self.surface == Surface::Original
                {
                    shelpa::surface::ORIGINAL_SERVER_NAME
                } else {
                    "filesystem"
                };
                let roots = ClientRoots::new(
                    factory,
                    name.into(),
                    self.allow_root_slash,
                    e.to_string(),
                    listed,
                );
                return Ok((Arc::new(ClientRootsToolset(roots)), Scope::ClientRoots));
            }
            Err(e) => return Err(e.to_string()),
        };
        // The root is served on the descriptor it was checked on; its call log is opened beneath
        // the same one.
        let spellings = opened.spellings();
        let ws = opened.into_workspace();
        let guard = PathGuard::for_workspace(ws.clone()).with_spellings(spellings);
        let toolset = factory
            .build(guard)
            .map_err(|e| format!("cannot serve root '{}': {e}", ws.root().display()))?;
        Ok((Arc::from(toolset), Scope::Root(ws)))
    }
}

/// Builds each root's toolset through the mode's factory, clearing first the temporaries crashed
/// servers left in that root (see [`workspace::temp`]): every server, in every mode, and
/// the daemon for each root it opens. The sweep costs one failed open when there is nothing to
/// clear, and runs once per toolset, before its first call: for a server, right after it has
/// answered `initialize` ([`Toolset::started`]), so start-up does not wait for it and no call can
/// see a leftover.
struct ClearsLeftovers(Box<dyn ToolsetFactory<PathGuard>>);

impl ToolsetFactory<PathGuard> for ClearsLeftovers {
    fn mode(&self) -> String {
        self.0.mode()
    }
    fn instructions(&self) -> String {
        self.0.instructions()
    }
    fn definitions(&self) -> Vec<mcp_core::toolset::ToolDef> {
        self.0.definitions()
    }
    fn build(&self, guard: PathGuard) -> std::io::Result<Box<dyn Toolset>> {
        let ws = guard.workspace().clone();
        Ok(Box::new(SweptFirst {
            inner: self.0.build(guard)?,
            ws,
            swept: std::sync::Once::new(),
        }))
    }
}

/// A toolset whose root is swept of crash leftovers once, before anything else happens in it.
struct SweptFirst {
    inner: Box<dyn Toolset>,
    ws: workspace::Workspace,
    swept: std::sync::Once,
}

impl SweptFirst {
    fn sweep(&self) {
        self.swept.call_once(|| {
            if let Err(e) = self.ws.sweep_leftovers() {
                eprintln!(
                    "filesystem: cannot clear temporary files left by a crash: {e}; `filesystem check --repair` clears them"
                );
            }
        });
    }
}

impl Toolset for SweptFirst {
    fn mode(&self) -> String {
        self.inner.mode()
    }
    fn instructions(&self) -> String {
        self.inner.instructions()
    }
    fn tools(&self) -> Vec<mcp_core::toolset::ToolDef> {
        self.inner.tools()
    }
    fn server_name(&self) -> String {
        self.inner.server_name()
    }
    fn started(&self) {
        self.sweep();
        self.inner.started();
    }
    fn lane(&self, name: &str, args: &serde_json::Map<String, serde_json::Value>) -> String {
        self.inner.lane(name, args)
    }
    fn call(
        &self,
        name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
        ctx: &CallContext,
    ) -> mcp_core::toolset::ToolOutput {
        self.sweep();
        self.inner.call(name, args, ctx)
    }
}

/// What a server is confined to: its one root, or (daemon mode) the root each call names, within
/// the allowed places.
enum Scope {
    /// The one root, opened.
    Root(workspace::Workspace),
    EachCall(Arc<ServedRoots>),
    /// The first root the MCP client lists, once it has (see [`crate::roots`]).
    ClientRoots,
}

impl Scope {
    /// For the start-up banner and `tools`.
    fn describe(&self) -> String {
        match self {
            Scope::Root(ws) => ws.root().display().to_string(),
            Scope::EachCall(served) => {
                format!("named by each call, at or below {}", served.describe())
            }
            Scope::ClientRoots => "the first of the client's MCP roots (roots/list)".into(),
        }
    }
}

/// The program name under which the binary is shelpa: `shelpa-mcp [--root <ROOT>] [--help]`.
pub const SHELPA_NAME: &str = "shelpa-mcp";

/// Reads a started-as-shelpa command line as the `filesystem` command line it stands for: when
/// the program's file name (argv[0], e.g. a symlink `shelpa-mcp -> filesystem`) is
/// [`SHELPA_NAME`], `--legacy-pipe` is added (once), so the original surface, the default, is
/// served. Every other flag and subcommand of `filesystem` keeps working (`--timeout`,
/// `--surface modern`, `tools`, `call`…), as the README says.
pub fn shelpa_argv(mut argv: Vec<OsString>) -> Vec<OsString> {
    let as_shelpa = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|name| name == SHELPA_NAME);
    if as_shelpa && !argv.iter().any(|a| a == "--legacy-pipe") {
        argv.insert(1.min(argv.len()), OsString::from("--legacy-pipe"));
    }
    argv
}

/// The `--surface` and `--shelpa-tools` a command line asks for (defaults when absent), read
/// without clap for the `--legacy-pipe --help` shortcut, which must print shelpa's own help
/// rather than clap's. A value that is not one of the choices is an error to print.
fn legacy_help_choice(argv: &[OsString]) -> Result<(Surface, ShelpaTools), String> {
    use clap::ValueEnum;
    fn value_of<'a>(argv: &'a [OsString], flag: &str) -> Option<&'a str> {
        let prefix = format!("{flag}=");
        let mut found = None;
        for (i, a) in argv.iter().enumerate() {
            let Some(a) = a.to_str() else { continue };
            if a == flag {
                found = argv.get(i + 1).and_then(|v| v.to_str());
            } else if let Some(v) = a.strip_prefix(&prefix) {
                found = Some(v);
            }
        }
        found
    }
    fn choose<T: ValueEnum + Default>(value: Option<&str>, flag: &str) -> Result<T, String> {
        let Some(v) = value else {
            return Ok(T::default());
        };
        T::from_str(v, false).map_err(|_| {
            let choices: Vec<String> = T::value_variants()
                .iter()
                .filter_map(|c| c.to_possible_value().map(|p| p.get_name().to_string()))
                .collect();
            format!(
                "invalid value '{v}' for {flag}; use one of: {}",
                choices.join(", ")
            )
        })
    }
    Ok((
        choose(value_of(argv, "--surface"), "--surface")?,
        choose(value_of(argv, "--shelpa-tools"), "--shelpa-tools")?,
    ))
}

/// Runs the program and returns its exit status.
pub fn main() -> i32 {
    let argv = shelpa_argv(std::env::args_os().collect());
    // shelpa had its own help; `--legacy-pipe --help` prints it, in the chosen surface.
    if argv.iter().any(|a| a == "--legacy-pipe") && argv.iter().any(|a| a == "--help" || a == "-h")
    {
        return match legacy_help_choice(&argv) {
            Ok((surface, set)) => print_out(&shelpa::help_text(
                surface,
                set,
                &crate::write_rules::from_argv(&argv).unwrap_or_default(),
            )),
            Err(msg) => {
                eprintln!("filesystem: {msg}");
                2
            }
        };
    }
    let Cli { options, command } = Cli::parse_args(argv);
    let opts = &options;
    match command {
        None => run_server(opts),
        Some(Command::Tools) => list_tools(opts),
        Some(Command::Call { tool, args }) => call_once(opts, &tool, &args),
        Some(Command::Audit(args)) => {
            shelpa::audit::run(opts.root.as_deref(), opts.allow_root_slash, &args)
        }
        Some(Command::Report(args)) => report::run(&args),
        Some(Command::Check(args)) => {
            crate::check::run(opts.root.as_deref(), opts.allow_root_slash, &args)
        }
        Some(Command::Log(args)) => {
            crate::rewind::run_log(opts.root.as_deref(), opts.allow_root_slash, &args)
        }
        Some(Command::Revert(args)) => {
            crate::rewind::run_revert(opts.root.as_deref(), opts.allow_root_slash, &args)
        }
        Some(Command::Study { command }) => match std::env::current_exe() {
            // The study's arms serve this very binary, and the stand-in agent lies beside it.
            Ok(exe) => study::command::execute(command, &exe, &check_server_args),
            Err(e) => {
                eprintln!("filesystem study: cannot find the path of this executable: {e}");
                1
            }
        },
    }
}

/// Whether `args` (a study arm's) are flags this binary accepts as an MCP server, parsed by the
/// same definition as a real start (with the `--root` and `--call-log` the study runner adds),
/// and checked for the conflicts the server refuses when it starts. A study checks each arm
/// with this before any trial, so a typo is refused instead of every trial running serverless.
fn check_server_args(args: &[String]) -> Result<(), String> {
    let argv = std::iter::once("filesystem")
        .chain(args.iter().map(String::as_str))
        .chain(["--root", "/", "--call-log", "/dev/null"]);
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    if cli.command.is_some() {
        return Err("it names a subcommand; give only server flags".into());
    }
    cli.options.flag_conflicts()
}

fn run_server(cli: &Options) -> i32 {
    let (toolset, scope) = match cli.server_toolset() {
        Ok(t) => t,
        Err(msg) => {
            eprintln!("filesystem: {msg}");
            return 2;
        }
    };
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!(
            "filesystem: waiting for an MCP client on stdin (mode: {}, root: {}, {} tools). This is a server: configure it in an MCP client, or try `filesystem tools`. Ctrl-D exits.",
            toolset.mode(),
            scope.describe(),
            toolset.tools().len()
        );
    }
    // Raw descriptors with our own buffers: std's stdout is line-buffered, which would cost one
    // syscall per reply when a client pipelines requests.
    let input = match stdin.as_fd().try_clone_to_owned() {
        Ok(fd) => BufReader::with_capacity(64 * 1024, std::fs::File::from(fd)),
        Err(e) => {
            eprintln!("filesystem: cannot read stdin: {e}");
            return 1;
        }
    };
    let output = match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) => {
            eprintln!("filesystem: cannot write stdout: {e}");
            return 1;
        }
    };
    let config = ServerConfig {
        max_message_bytes: cli.max_message_bytes,
        page_size: cli.page_size,
        call_timeout: cli.call_timeout(),
        result_budget: cli.result_budget(),
        workers: if cli.server {
            crate::daemon::WORKERS
        } else {
            1
        },
    };
    let observer = cli.call_log(toolset.mode(), scope);
    match serve(toolset, config, observer, input, output) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            eprintln!("filesystem: stopped: {e}");
            1
        }
        Err(e) => {
            eprintln!("filesystem: stopped reading stdin: {e}");
            1
        }
    }
}

fn list_tools(cli: &Options) -> i32 {
    let (toolset, scope) = match cli.toolset() {
        Ok(t) => t,
        Err(msg) => {
            eprintln!("filesystem: {msg}");
            return 2;
        }
    };
    let tools = toolset.tools();
    let mut text = format!(
        "{} tools (mode: {}, root: {})\n",
        tools.len(),
        toolset.mode(),
        scope.describe()
    );
    let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in &tools {
        let first = t.description.lines().next().unwrap_or("");
        text.push_str(&format!("  {:width$}  {first}\n", t.name));
    }
    if let Ok(permissions) = cli.permissions() {
        text.push_str(&crate::write_rules::summary(&permissions));
        text.push('\n');
    }
    if cli.legacy_pipe {
        let status = shelpa::tool_status_line();
        if !status.is_empty() {
            text.push_str(&status);
            text.push('\n');
        }
    }
    print_out(&text)
}

fn call_once(cli: &Options, tool: &str, raw_args: &str) -> i32 {
    let args: Map<String, Value> = match serde_json::from_str(raw_args) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            eprintln!("filesystem: tool arguments must be a JSON object, e.g. '{{\"path\":\"README.md\"}}'");
            return 2;
        }
        Err(e) => {
            eprintln!("filesystem: tool arguments are not valid JSON ({e}); quote them for your shell, e.g. '{{\"path\":\"README.md\"}}'");
            return 2;
        }
    };
    let (toolset, _) = match cli.toolset() {
        Ok(t) => t,
        Err(msg) => {
            eprintln!("filesystem: {msg}");
            return 2;
        }
    };
    let tools = toolset.tools();
    if !tools.iter().any(|t| t.name == tool) {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        eprintln!(
            "filesystem: unknown tool '{tool}' in mode {}; available: {}",
            toolset.mode(),
            names.join(", ")
        );
        return 2;
    }
    // A one-off call has the same wall-clock limit as a served one.
    let mut ctx = CallContext::with_timeout(Default::default(), cli.call_timeout());
    ctx.tool = tool.to_string();
    let output = cli.result_budget().enforce(toolset.call(tool, &args, &ctx));
    // The answer carries file contents and names an agent may have written: shown on a
    // terminal, their control characters are escaped so they cannot drive it. Sent anywhere else
    // (a pipe, a file) it stays byte for byte what the tool answered, so a script gets the file's
    // contents and pipe mode's JSON stays JSON.
    let shown = |text: &str, to_terminal: bool| -> String {
        if to_terminal {
            workspace::terminal::escape_text(text).into_owned()
        } else {
            text.to_owned()
        }
    };
    use std::io::IsTerminal;
    if output.is_error {
        eprintln!("{}", shown(&output.text, std::io::stderr().is_terminal()));
        1
    } else {
        let mut text = shown(&output.text, std::io::stdout().is_terminal());
        if !text.ends_with('\n') {
            text.push('\n');
        }
        print_out(&text)
    }
}

/// Prints to stdout. A reader that stops early (`filesystem call … | head`) is not an error, and
/// must not make the program panic the way `print!` does on a closed pipe.
pub(crate) fn print_out(text: &str) -> i32 {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("filesystem: cannot write stdout: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn argv(args: &[&str]) -> Vec<OsString> {
        std::iter::once("filesystem")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn every_subcommand_leaves_the_lean_path() {
        let command = Cli::command();
        for sub in command.get_subcommands() {
            let name = sub.get_name();
            assert!(NOT_LEAN.contains(&name), "NOT_LEAN lacks subcommand {name}");
            for alias in sub.get_all_aliases() {
                assert!(NOT_LEAN.contains(&alias), "NOT_LEAN lacks alias {alias}");
            }
        }
        assert!(NOT_LEAN.contains(&"help"), "clap adds a help subcommand");
    }

    #[test]
    fn lean_and_full_parses_agree() {
        let lines: [&[&str]; 9] = [
            &[],
            &["--root", "/tmp/x", "--backup", "--no-call-log"],
            &["--legacy-pipe", "--with-filesystem", "--timeout=5"],
            &["--legacy-pipe", "--surface", "modern", "--shelpa-tools=all"],
            &[
                "--server",
                "--call-log",
                "/tmp/log",
                "--max-read-bytes",
                "10",
            ],
            &["--root", "/w", "--page-size", "3", "--call-log-args"],
            &["--mcp", "--allow-root-slash", "--root=/"],
            &[
                "--server",
                "--allow-root",
                "/a",
                "--allow-root=/b",
                "--backup",
            ],
            &["--server", "--allow-root", "/", "--allow-root-slash"],
        ];
        for line in lines {
            let lean = format!("{:?}", Cli::parse_args(argv(line)));
            let full = format!("{:?}", Cli::parse_from(argv(line)));
            assert_eq!(lean, full, "for {line:?}");
        }
    }

    #[test]
    fn subcommands_still_parse() {
        let cli = Cli::parse_args(argv(&["--root", "/w", "call", "read_text_file"]));
        assert!(
            matches!(cli.command, Some(Command::Call { ref tool, .. }) if tool == "read_text_file")
        );
        assert_eq!(
            cli.options.root.as_deref(),
            Some(std::path::Path::new("/w"))
        );
        let cli = Cli::parse_args(argv(&["tools", "--legacy-pipe"]));
        assert!(matches!(cli.command, Some(Command::Tools)));
        assert!(cli.options.legacy_pipe);
    }

    #[test]
    fn started_as_shelpa_mcp_it_serves_the_pipe_with_the_original_surface() {
        let shelpa = |args: &[&str]| -> Vec<OsString> {
            std::iter::once("/opt/bin/shelpa-mcp")
                .chain(args.iter().copied())
                .map(OsString::from)
                .collect()
        };
        let cli = Cli::parse_args(shelpa_argv(shelpa(&["--root", "/w"])));
        assert!(cli.options.legacy_pipe);
        assert_eq!(cli.options.surface, Surface::Original);
        assert_eq!(cli.options.shelpa_tools, ShelpaTools::Help);
        assert_eq!(
            cli.options.root.as_deref(),
            Some(std::path::Path::new("/w"))
        );
        // Given again, the flag is not doubled (clap refuses a repeated flag).
        let cli = Cli::parse_args(shelpa_argv(shelpa(&["--legacy-pipe", "tools"])));
        assert!(cli.options.legacy_pipe && matches!(cli.command, Some(Command::Tools)));
        // Any other name is left alone.
        assert_eq!(
            shelpa_argv(argv(&["--root", "/w"])),
            argv(&["--root", "/w"])
        );
        assert_eq!(
            shelpa_argv(vec![OsString::from("shelpa-mcp-old")]),
            vec![OsString::from("shelpa-mcp-old")]
        );
    }

    #[test]
    fn the_legacy_help_shortcut_reads_surface_and_set() {
        assert_eq!(
            legacy_help_choice(&argv(&["--legacy-pipe", "--help"])),
            Ok((Surface::Original, ShelpaTools::Help))
        );
        assert_eq!(
            legacy_help_choice(&argv(&[
                "--legacy-pipe",
                "--surface",
                "modern",
                "--shelpa-tools=all",
                "-h"
            ])),
            Ok((Surface::Modern, ShelpaTools::All))
        );
        let wrong = legacy_help_choice(&argv(&["--legacy-pipe", "--surface=retro", "--help"]));
        assert!(wrong.is_err_and(|e| e.contains("original, modern")));
    }

    #[test]
    fn surface_and_tool_set_need_the_pipe_mode() {
        for flag in [["--surface", "modern"], ["--shelpa-tools", "all"]] {
            assert!(Cli::command().try_get_matches_from(argv(&flag)).is_err());
        }
    }

    #[test]
    fn allow_root_is_repeatable_and_only_for_the_daemon() {
        let cli = Cli::parse_args(argv(&[
            "--server",
            "--allow-root",
            "/a",
            "--allow-root",
            "/b",
        ]));
        assert_eq!(
            cli.options.allow_root,
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        for parse in [
            Cli::command().try_get_matches_from(argv(&["--allow-root", "/a"])),
            Options::augment_args(clap::Command::new("filesystem"))
                .try_get_matches_from(argv(&["--allow-root", "/a"])),
        ] {
            assert!(
                parse.is_err(),
                "--allow-root without --server must be refused"
            );
        }
    }

    #[test]
    fn a_flag_the_lean_parse_refuses_gets_the_full_error() {
        // Conflicting flags: the lean parse fails, the full parse reports it.
        let lean = Cli::command().try_get_matches_from(argv(&["--server", "--root", "/w"]));
        assert!(lean.is_err());
        let options = Options::augment_args(clap::Command::new("filesystem"))
            .try_get_matches_from(argv(&["--server", "--root", "/w"]));
        assert!(
            options.is_err(),
            "conflicts are enforced by the lean command too"
        );
    }
}
