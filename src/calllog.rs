//! The call log: one JSON line per tool call, the raw material of the adoption study.
//!
//! Which interface a model picks, how often its calls fail and why, can only be measured if every
//! call is recorded the same way in every mode. Argument and file contents stay out of the log
//! unless explicitly asked for (`--call-log-args`): the log must be safe to share.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::allow::ServedRoots;
use crate::mcp::server::{CallObserver, CallRecord};
use crate::workspace::Workspace;

/// The log file's name inside a root's `.filesystem/` store.
pub const DEFAULT_LOG_NAME: &str = ".calls.jsonl";

/// Where the log goes.
#[derive(Clone, Debug)]
pub enum LogTarget {
    /// `<root>/.filesystem/.calls.jsonl` of the server's one root.
    Root(PathBuf),
    /// `<root>/.filesystem/.calls.jsonl` of the root each call names (`--server` mode), resolved
    /// by the same rules the daemon serves roots by: a root the daemon refuses gets no log, so a
    /// call cannot make the server create a store in, say, `/etc`.
    RootOfEachCall(Arc<ServedRoots>),
    /// One file chosen with `--call-log`.
    File(PathBuf),
}

/// Appends one line per tool call.
///
/// Lines are collected as calls finish and written when the server core is about to send their
/// replies ([`CallObserver::release`]): a client that pipelines calls gets many lines per
/// `write(2)` instead of one each, and no reply ever reaches a client before its call's line is
/// in the log.
pub struct CallLog {
    destination: Destination,
    session: String,
    mode: String,
    include_args: bool,
    /// Log files already opened, kept open (reopening per call cost a third of the time of a small
    /// read), each with the lines waiting to be appended to it.
    open: Mutex<HashMap<PathBuf, LogFile>>,
}

/// Where lines go, as settled when the log is created.
enum Destination {
    /// One file the operator chose, for every call: a plain path, the operator's to pick.
    Fixed(PathBuf),
    /// The log inside the one root's store, for every call.
    Root(PathBuf),
    /// The log of the root each call names (daemon mode), if the daemon serves that root.
    RootOfEachCall(Arc<ServedRoots>),
}

/// Where one call's line goes.
enum Place<'a> {
    /// The operator's `--call-log FILE`.
    File(&'a Path),
    /// `<root>/.filesystem/.calls.jsonl`, opened through the workspace layer.
    InRoot(Cow<'a, Path>),
}

impl Place<'_> {
    /// The log file's path: the key of the open-file table and the name in the operator's
    /// messages (never used to open a file inside a root).
    fn key(&self) -> PathBuf {
        match self {
            Place::File(path) => path.to_path_buf(),
            Place::InRoot(root) => root.join(STORE_DIR).join(DEFAULT_LOG_NAME),
        }
    }

    fn open(&self) -> std::io::Result<File> {
        match self {
            Place::File(path) => open_log(path),
            Place::InRoot(root) => open_root_log(root),
        }
    }
}

/// One open log file and its lines not yet written.
struct LogFile {
    file: File,
    pending: Vec<u8>,
}

impl CallLog {
    /// A log for one server process. `mode` is the toolset's mode name.
    pub fn new(target: LogTarget, mode: String, include_args: bool) -> Self {
        // A fixed root has a fixed log: worked out once, not on every call.
        let destination = match target {
            LogTarget::File(path) => Destination::Fixed(path),
            LogTarget::Root(root) => Destination::Root(root),
            LogTarget::RootOfEachCall(served) => Destination::RootOfEachCall(served),
        };
        CallLog {
            destination,
            session: session_id(),
            mode,
            include_args,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The per-process session id written on every line.
    pub fn session(&self) -> &str {
        &self.session
    }

    fn place_for(&self, args: &Map<String, Value>) -> Option<Place<'_>> {
        match &self.destination {
            Destination::Fixed(p) => Some(Place::File(p)),
            Destination::Root(root) => Some(Place::InRoot(Cow::Borrowed(root))),
            // Daemon mode: the call names its root; an invalid or disallowed root was refused by the
            // toolset and the call still deserves a line, but there is no workspace to put it in.
            Destination::RootOfEachCall(served) => {
                let root = args.get("root")?.as_str()?;
                let root = served.resolve(root).ok()?;
                Some(Place::InRoot(Cow::Owned(root)))
            }
        }
    }

    /// Builds the line for one call (exposed for tests of the format).
    pub fn line(&self, record: &CallRecord<'_>) -> Value {
        serde_json::to_value(self.entry(record)).unwrap_or(Value::Null)
    }

    /// The line as a borrowing struct: serialised straight to bytes, it costs no intermediate
    /// map per call (the log is written on every call, so this is on the hot path).
    fn entry<'a>(&'a self, record: &'a CallRecord<'a>) -> LogLine<'a> {
        let output = record.output;
        let mut counter = ByteCounter(0);
        let input_bytes = match serde_json::to_writer(&mut counter, record.args) {
            Ok(()) => counter.0,
            Err(_) => 0,
        };
        LogLine {
            ts: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            session: &self.session,
            mode: &self.mode,
            client: ClientEntry {
                name: record.client.name.as_deref(),
                version: record.client.version.as_deref(),
            },
            protocol: &record.client.protocol_version,
            tool: record.tool,
            outcome: if output.is_error { "error" } else { "ok" },
            error_kind: output.error_kind.as_deref(),
            duration_ms: record.duration.as_millis() as u64,
            input_bytes,
            output_bytes: output.text.len(),
            extra: &output.log,
            args: self.include_args.then_some(record.args),
        }
    }
}

/// One call-log line.
#[derive(serde::Serialize)]
struct LogLine<'a> {
    ts: String,
    session: &'a str,
    mode: &'a str,
    client: ClientEntry<'a>,
    protocol: &'a str,
    tool: &'a str,
    outcome: &'static str,
    error_kind: Option<&'a str>,
    duration_ms: u64,
    input_bytes: usize,
    output_bytes: usize,
    /// Facts the toolset adds (pipe stages, the refused token…).
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<&'a Map<String, Value>>,
}

#[derive(serde::Serialize)]
struct ClientEntry<'a> {
    name: Option<&'a str>,
    version: Option<&'a str>,
}

/// Counts the bytes of a serialisation without keeping them.
struct ByteCounter(usize);

impl Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CallObserver for CallLog {
    fn observe(&self, record: &CallRecord<'_>) {
        let Some(place) = self.place_for(record.args) else {
            return;
        };
        let path = place.key();
        let Ok(mut files) = self.open.lock() else {
            return;
        };
        if !files.contains_key(&path) {
            match place.open() {
                Ok(file) => {
                    let log = LogFile {
                        file,
                        pending: Vec::new(),
                    };
                    files.insert(path.clone(), log);
                }
                Err(err) => {
                    // A broken log must never break the call it describes.
                    eprintln!("filesystem: cannot open call log {}: {err}", path.display());
                    return;
                }
            }
        }
        if let Some(log) = files.get_mut(&path) {
            if serde_json::to_writer(&mut log.pending, &self.entry(record)).is_ok() {
                log.pending.push(b'\n');
            }
        }
    }

    fn release(&self) {
        let Ok(mut files) = self.open.lock() else {
            return;
        };
        for (path, log) in files.iter_mut() {
            if log.pending.is_empty() {
                continue;
            }
            if let Err(e) = append_lines(&log.file, &log.pending) {
                eprintln!(
                    "filesystem: cannot append to call log {}: {e}",
                    path.display()
                );
            }
            crate::buffer::recycle(&mut log.pending);
        }
        // A daemon serving many roots would otherwise keep one descriptor per root it ever saw;
        // past a few, every log is closed once written and reopened when next needed.
        if files.len() > OPEN_LOGS {
            files.clear();
        }
    }
}

/// Log files kept open between calls (the daemon's many roots each have one).
const OPEN_LOGS: usize = 16;

/// Opens (creating it and its directory) the operator's `--call-log FILE` for appending, and cuts
/// a torn last line a killed server may have left.
fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    prepare(file)
}

/// Opens the log inside the store of `root` through the workspace layer: the store directory is
/// created beneath the root's descriptor, nothing on the way may be a symlink, and a log file with
/// more than one link is refused, so neither a swapped-in link nor a planted hard link can carry
/// the server's appends to a file outside the workspace.
fn open_root_log(root: &Path) -> std::io::Result<File> {
    let ws = Workspace::open(root)?;
    ws.create_dirs(Path::new(STORE_DIR))?;
    let file = ws.open_append(&Path::new(STORE_DIR).join(DEFAULT_LOG_NAME))?;
    prepare(file)
}

/// Cuts a torn last line of a freshly opened log under its lock.
fn prepare(file: File) -> std::io::Result<File> {
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    let cut = cut_torn_tail(&file);
    rustix::fs::flock(&file, rustix::fs::FlockOperation::Unlock)?;
    cut?;
    Ok(file)
}

/// Appends whole lines with a single `write` on an `O_APPEND` descriptor under an exclusive lock,
/// so concurrent servers sharing a log never interleave or tear lines.
fn append_lines(mut file: &File, bytes: &[u8]) -> std::io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)?;
    let written = file.write_all(bytes);
    rustix::fs::flock(file, rustix::fs::FlockOperation::Unlock)?;
    written
}

/// A server killed in the middle of an append can leave a partial last line (a write that spans
/// a page boundary can be cut there); the first append of the next process cuts it off, so it
/// is neither glued to the next line nor left in the middle of the log.
fn cut_torn_tail(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            end = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    if end != len {
        file.set_len(end)?;
    }
    Ok(())
}

/// The store directory the per-root log lives in.
const STORE_DIR: &str = crate::guard::STATE_DIRS[0];

/// A session id unique enough to tell processes apart: start time and pid.
fn session_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}-{:x}", nanos, std::process::id())
}
