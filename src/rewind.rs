//! `filesystem log`, `filesystem log show OP` and `filesystem revert`: reading the operation log
//! (`.filesystem/.operations`) and rewinding what was done. The log, its reader and the revert
//! live in the workspace layer (`workspace::history::oplog`); this module parses the command
//! line and prints.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};

use workspace::history::oplog::file::NewestFirst;
use workspace::history::oplog::record::{field_to_path, Operation, State};
use workspace::history::oplog::revert::{parse_since, select, Outcome, Selection};
use workspace::history::oplog::Origin;
use workspace::history::{LockWait, Store};
use workspace::terminal::escape_text;

/// The most entries one `filesystem log` prints.
pub const MAX_LIMIT: usize = 1_000_000;

/// How the log is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Lines for a person: one per operation (`log`), one per path (`revert`).
    Text,
    /// JSON for a script: `log` prints the entries as stored, one per line; `revert` one object.
    Json,
}

/// `filesystem log` flags.
#[derive(Args, Debug, Clone)]
pub struct LogArgs {
    /// Only operations of this session (the id `filesystem log` shows after `s:`).
    #[arg(long)]
    pub session: Option<String>,
    /// Only operations at or after this time: RFC 3339 (2026-05-01T12:00:00Z) or an age such as
    /// 30m, 2h, 1d.
    #[arg(long)]
    pub since: Option<String>,
    /// Only operations that touched this path or something inside it (root-relative).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// At most this many operations, newest first.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// text (one line each) or json (the entries as stored).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(subcommand)]
    pub command: Option<LogCommand>,
}

/// `filesystem log show`.
#[derive(Subcommand, Debug, Clone)]
pub enum LogCommand {
    /// One operation in full, with a unified diff of each file it changed (from the versions kept
    /// with --backup; without them, what can be shown).
    Show {
        /// The operation's id.
        id: u64,
    },
}

/// `filesystem revert` flags.
#[derive(Args, Debug, Clone)]
pub struct RevertArgs {
    /// The operations to revert, by id.
    #[arg(required_unless_present_any = ["session", "since"], conflicts_with_all = ["session", "since"])]
    pub ids: Vec<u64>,
    /// Revert every operation of this session.
    #[arg(long, conflicts_with = "since")]
    pub session: Option<String>,
    /// Revert every operation at or after this time (RFC 3339, or an age such as 30m, 2h, 1d).
    #[arg(long)]
    pub since: Option<String>,
    /// Say what would be done, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also put back paths changed since (by another operation, client or by hand), saving what
    /// is there first: as a version of the file, or to the trash.
    #[arg(long)]
    pub force: bool,
    /// text or json.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// The store of the root the command names.
fn open_store(root: Option<&Path>, allow_root_slash: bool, backup: bool) -> Result<Store, String> {
    let opened =
        workspace::root::resolve_opened(root, allow_root_slash).map_err(|e| e.to_string())?;
    Ok(Store::new(opened.into_workspace(), backup))
}

/// One operation as a line of `filesystem log`.
pub fn line(op: &Operation) -> String {
    let client = match (&op.session.client, &op.session.version) {
        (Some(c), Some(v)) => format!("{c} {v}, "),
        (Some(c), None) => format!("{c}, "),
        _ => String::new(),
    };
    let time = op.time.get(..19).unwrap_or(&op.time).replace('T', " ");
    let tool = if op.tool.is_empty() { "-" } else { &op.tool };
    format!(
        "{:>6}  {time}  s:{} ({client}{})  {tool}  {}",
        op.id,
        op.session.id,
        op.session.mode,
        op.summary()
    )
}

/// `filesystem log`: exit 0, or 2 when the log cannot be read.
pub fn run_log(root: Option<&Path>, allow_root_slash: bool, args: &LogArgs) -> i32 {
    let result = open_store(root, allow_root_slash, true).and_then(|store| match &args.command {
        Some(LogCommand::Show { id }) => show(&store, *id),
        None => list(&store, args),
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", escape_text(&format!("filesystem log: {e}")));
            2
        }
    }
}

fn list(store: &Store, args: &LogArgs) -> Result<i32, String> {
    let since = args.since.as_deref().map(parse_since).transpose()?;
    let limit = args.limit.min(MAX_LIMIT);
    let mut entries = NewestFirst::new(
        store.workspace(),
        Path::new(workspace::guard::STATE_DIRS[0]),
    );
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut shown = 0;
    while shown < limit {
        let Some(op) = entries
            .next_entry()
            .map_err(|e| format!("cannot read .filesystem/.operations: {e}"))?
        else {
            break;
        };
        if since.as_deref().is_some_and(|t| op.time.as_str() < t) {
            break;
        }
        if args.session.as_deref().is_some_and(|s| s != op.session.id)
            || args.path.as_deref().is_some_and(|p| !op.touches(p))
        {
            continue;
        }
        let text = match args.format {
            Format::Text => escape_text(&line(&op)).into_owned(),
            Format::Json => serde_json::to_string(&op).map_err(|e| e.to_string())?,
        };
        if writeln!(out, "{text}").is_err() {
            return Ok(0); // The reader went away (`| head`): nothing more to say.
        }
        shown += 1;
    }
    let _ = out.flush();
    if entries.skipped > 0 {
        eprintln!("filesystem log: {} line(s) of the log are not entries and were skipped; `filesystem check` says more", entries.skipped);
    }
    Ok(0)
}

/// The entry with id `id`.
fn find(store: &Store, id: u64) -> Result<Operation, String> {
    match select(store, &Selection::Ids(vec![id])) {
        Ok(mut ops) if !ops.is_empty() => Ok(ops.remove(0)),
        Ok(_) => Err(format!("no operation {id} in the log")),
        Err(e) => Err(e.to_string()),
    }
}

/// How many newer entries `log show` reads to follow a file's later moves to its history.
const FOLLOW_LIMIT: usize = 100_000;

/// Where the history of what was at `rel` after operation `id` is now: `rel` moved along by
/// each later move of it (a move carries the history). `None` when a later delete took it to
/// the trash.
fn where_now(store: &Store, rel: &Path, id: u64) -> Option<PathBuf> {
    let mut newer = Vec::new();
    let mut entries = NewestFirst::new(
        store.workspace(),
        Path::new(workspace::guard::STATE_DIRS[0]),
    );
    while let Ok(Some(op)) = entries.next_entry() {
        if op.id <= id || newer.len() == FOLLOW_LIMIT {
            break;
        }
        newer.push(op);
    }
    let mut at = rel.to_path_buf();
    for op in newer.iter().rev() {
        for c in &op.changes {
            if c.rel() != at {
                continue;
            }
            match &c.after {
                State::Moved { to } => at = field_to_path(to),
                State::Trashed { .. } => return None,
                _ => {}
            }
        }
    }
    Some(at)
}

fn show(store: &Store, id: u64) -> Result<i32, String> {
    let op = find(store, id)?;
    let mut text = format!("{}\n", line(&op));
    for c in &op.changes {
        let rel = where_now(store, &c.rel(), op.id).unwrap_or_else(|| c.rel());
        text.push_str(&format!(
            "  {}: {} → {}\n",
            c.path,
            state_words(&c.before),
            state_words(&c.after)
        ));
        let content = |s: &State| match s {
            State::File {
                sha256, version, ..
            } => store
                .content_with_hash(&rel, sha256, *version)
                .ok()
                .flatten()
                .map(Some),
            s if s.is_absent() => Some(None),
            _ => None,
        };
        let (before, after) = (&c.before, &c.after);
        if !matches!(before, State::File { .. }) && !matches!(after, State::File { .. }) {
            continue;
        }
        // A move or restore carries content unchanged; only an edit has a diff.
        if before.matches(after) || c.moved_from.is_some() || c.restored_from.is_some() {
            continue;
        }
        if matches!(after, State::Moved { .. } | State::Trashed { .. }) {
            continue;
        }
        match (content(before), content(after)) {
            (Some(old), Some(new)) => {
                let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
                let (old, new) = (String::from_utf8_lossy(&old), String::from_utf8_lossy(&new));
                let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
                text.push_str(
                    &diff
                        .unified_diff()
                        .header(&format!("a/{}", c.path), &format!("b/{}", c.path))
                        .to_string(),
                );
            }
            _ => text.push_str("    (no diff: the content is in no version; the server keeps versions with --backup)\n"),
        }
    }
    Ok(crate::cli::print_out(&escape_text(&text)))
}

/// A state in a few words.
fn state_words(s: &State) -> String {
    match s {
        State::Absent => "nothing".into(),
        State::File {
            size,
            mode,
            version,
            ..
        } => {
            let v = version.map(|v| format!(", v{v}")).unwrap_or_default();
            format!("file of {size} bytes (mode {mode:o}{v})")
        }
        State::Dir { mode } => format!("directory (mode {mode:o})"),
        State::Link { target } => format!("link to {target}"),
        State::Other => "special file".into(),
        State::Trashed { id } => format!("trash entry {id}"),
        State::Moved { to } => format!("moved to {}", field_to_path(to).display()),
    }
}

/// `filesystem revert`: 0 when every path was put back (or already was), 1 when some were left
/// alone (changed since, or without a version), 2 when the revert could not run.
pub fn run_revert(root: Option<&Path>, allow_root_slash: bool, args: &RevertArgs) -> i32 {
    match revert(root, allow_root_slash, args) {
        Ok(outcome) => {
            let printed = crate::cli::print_out(&escape_text(&render(&outcome, args.format)));
            if outcome.refused.is_empty() && outcome.cannot.is_empty() {
                printed
            } else {
                1
            }
        }
        Err(e) => {
            eprintln!("{}", escape_text(&format!("filesystem revert: {e}")));
            2
        }
    }
}

fn revert(
    root: Option<&Path>,
    allow_root_slash: bool,
    args: &RevertArgs,
) -> Result<Outcome, String> {
    // Versions are kept of what a revert writes, so a revert of it can put the content back.
    let store = open_store(root, allow_root_slash, true)?;
    let selection = match (&args.session, &args.since) {
        (Some(s), _) => Selection::Session(s.clone()),
        (None, Some(t)) => Selection::Since(parse_since(t)?),
        (None, None) => Selection::Ids(args.ids.clone()),
    };
    store
        .revert_chosen(
            &LockWait::patient(),
            &Origin::command("revert"),
            &selection,
            args.dry_run,
            args.force,
        )
        .map_err(|e| e.to_string())
}

/// The outcome as text or JSON.
pub fn render(o: &Outcome, format: Format) -> String {
    if format == Format::Json {
        let steps = |s: &[workspace::history::oplog::revert::Step]| {
            s.iter()
                .map(|s| serde_json::json!({"path": s.path.to_string_lossy(), "what": s.what}))
                .collect::<Vec<_>>()
        };
        return format!(
            "{}\n",
            serde_json::json!({
                "dry_run": o.dry_run,
                "reverted": o.reverted,
                "done": steps(&o.done),
                "refused": steps(&o.refused),
                "cannot": steps(&o.cannot),
                "already": o.already,
                "operation": o.entry,
            })
        );
    }
    let mut t = String::new();
    if o.reverted.is_empty() {
        t.push_str("no operation matched; nothing to revert\n");
        return t;
    }
    let verb = if o.dry_run {
        "would revert"
    } else {
        "reverted"
    };
    t.push_str(&format!("{verb} {} operation(s)", o.reverted.len()));
    if let Some(id) = o.entry {
        t.push_str(&format!(
            " as operation {id} (`filesystem revert {id}` takes it back)"
        ));
    }
    t.push('\n');
    let would = if o.dry_run { "would: " } else { "" };
    for s in &o.done {
        t.push_str(&format!("  {would}{}\n", s.what));
    }
    for s in &o.refused {
        t.push_str(&format!("  left alone {}: {}\n", s.path.display(), s.what));
    }
    for s in &o.cannot {
        t.push_str(&format!(
            "  cannot put back {}: {}\n",
            s.path.display(),
            s.what
        ));
    }
    if o.already > 0 {
        t.push_str(&format!("  {} path(s) were already as before\n", o.already));
    }
    t
}
