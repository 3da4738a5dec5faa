//! The call log's writer: one JSON line per tool call, the raw material of the adoption study.
//!
//! A line is the serde serialisation of [`CallLogRecord`], the record type the report reads the
//! log back with (`report::call_log_reader`): the fields are defined once, there.
//!
//! Which interface a model picks, how often its calls fail and why, can only be measured if every
//! call is recorded the same way in every mode. Argument and file contents stay out of the log
//! unless explicitly asked for (`--call-log-args`): the log must be safe to share.
//!
//! The log is bounded two ways. Nothing the client sends is copied into a line at more than a
//! documented length: the client's name and version (from `initialize` or a 2026-07-28 request's
//! `_meta`) and every token a toolset echoes (pipe stage words, the refused token) are cut to
//! [`TOKEN_MAX_BYTES`] with a marker saying how much was left out, lists to
//! [`LIST_MAX_ITEMS`], and logged arguments to [`ARGS_MAX_BYTES`]. And the file is rotated by
//! size: once it has reached [`DEFAULT_ROTATE_BYTES`] it becomes `.calls.jsonl.1` (the older ones
//! moving up to `.calls.jsonl.`[`KEEP_ROTATED`], the oldest dropped), so the log of a root never
//! holds much more than `(KEEP_ROTATED + 1) × DEFAULT_ROTATE_BYTES`. `filesystem report --log
//! FILE` reads the rotated files before FILE, oldest first.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::lru::least_recently_used;
use mcp_core::server::{CallObserver, CallRecord};
use report::call_log_record::{CallLogRecord, CallOutcome, RecordedClient};
use workspace::history::layout::{rotated_name, DEFAULT_LOG_NAME, KEEP_ROTATED};
use workspace::root::DirId;
use workspace::{Dir, Stat, Workspace};

/// The longest client-supplied string copied into a line (client name and version, each stage
/// word, the refused token…), in bytes; longer ones keep this many bytes (cut on a character
/// boundary) followed by `…[+N bytes]`.
pub const TOKEN_MAX_BYTES: usize = 256;

/// The most items of a list (pipe stages) copied into a line; the rest are replaced by one
/// `…[+N more]` item.
pub const LIST_MAX_ITEMS: usize = 64;

/// With `--call-log-args`, arguments whose JSON is longer than this are replaced by a note of
/// their size.
pub const ARGS_MAX_BYTES: usize = 1024 * 1024;

/// The size at which the log is rotated.
pub const DEFAULT_ROTATE_BYTES: u64 = 64 * 1024 * 1024;

/// Sets the rotation size in bytes instead of [`DEFAULT_ROTATE_BYTES`] (for tests, and for an
/// operator who wants smaller files).
pub const ROTATE_BYTES_ENV: &str = "FILESYSTEM_CALL_LOG_ROTATE_BYTES";

/// Where the log goes.
#[derive(Clone, Debug)]
pub enum LogTarget {
    /// `<root>/.filesystem/.calls.jsonl` of the server's one root, opened beneath that root's
    /// descriptor (the one its tools use), wherever its path leads by then.
    Root(Workspace),
    /// `<root>/.filesystem/.calls.jsonl` of the root each call ran on (`--server` mode, or the
    /// MCP client's roots), as the toolset that chose it records it ([`crate::ran_on`]): a call
    /// refused before it had a root gets no line, so a call cannot make the server create a store
    /// in, say, `/etc`, and a call that ran on one root is never logged in another's log.
    RootOfEachCall,
    /// One file chosen with `--call-log`.
    File(PathBuf),
}

/// Appends one line per tool call.
///
/// Lines are collected as calls finish and written when the server core is about to send their
/// replies ([`CallObserver::release`]): a client that pipelines calls gets many lines per
/// `write(2)` instead of one each, and no reply ever reaches a client before its call's line is
/// in the log.
pub struct CallLogWriter {
    destination: Destination,
    session: String,
    mode: String,
    include_args: bool,
    /// Log files already opened, kept open (reopening per call cost a third of the time of a small
    /// read), each with the lines waiting to be appended to it.
    open: Mutex<OpenLogs>,
}

/// The most log files kept open at once. In `--server` mode each root has its own log; beyond
/// this many, the one used least recently is closed (its lines written first) and reopened when
/// a call needs it again, so the descriptors the log holds stay bounded however many roots are
/// served.
pub const MAX_OPEN_LOGS: usize = 16;

/// The open log files, each with when it was last used.
#[derive(Default)]
struct OpenLogs {
    files: HashMap<LogKey, CallLogFile>,
    tick: u64,
}

impl OpenLogs {
    /// Makes room for one more file, closing the least recently used.
    fn make_room(&mut self) {
        if self.files.len() < MAX_OPEN_LOGS {
            return;
        }
        let Some(oldest) = least_recently_used(&self.files, |log| log.last_used) else {
            return;
        };
        if let Some(mut log) = self.files.remove(&oldest) {
            write_pending(&mut log);
        }
    }
}

/// Appends a log's pending lines, reporting (never propagating) a failure: a broken log must
/// never break the calls it describes.
fn write_pending(log: &mut CallLogFile) {
    if log.pending.is_empty() {
        return;
    }
    if let Err(e) = log.append_pending(rotate_bytes()) {
        eprintln!(
            "filesystem: cannot append to call log {}: {e}",
            log.shown.display()
        );
    }
    mcp_core::buffer::recycle(&mut log.pending);
}

/// Where lines go, as settled when the log is created.
enum Destination {
    /// One file the operator chose, for every call: a plain path, the operator's to pick.
    Fixed(PathBuf),
    /// The log inside the one root's store, for every call.
    Root(Workspace),
    /// The log of the root each call ran on, if it ran on one.
    RootOfEachCall,
}

/// Which open log a line goes to: the operator's file by its path, a root's log by the root's
/// identity (two toolsets of one directory share one log).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum LogKey {
    File(PathBuf),
    Root(DirId),
}

/// Where one call's line goes.
enum LogPlace<'a> {
    /// The operator's `--call-log FILE`.
    File(&'a Path),
    /// `<root>/.filesystem/.calls.jsonl`, opened beneath the root's descriptor.
    InRoot(Cow<'a, Workspace>),
}

impl LogPlace<'_> {
    /// The key of the open-file table.
    fn key(&self) -> std::io::Result<LogKey> {
        Ok(match self {
            LogPlace::File(path) => LogKey::File(path.to_path_buf()),
            LogPlace::InRoot(ws) => LogKey::Root(DirId::of(&ws.root_fd())?),
        })
    }

    /// The log file's name in the operator's messages (never used to open anything).
    fn shown(&self) -> PathBuf {
        match self {
            LogPlace::File(path) => path.to_path_buf(),
            LogPlace::InRoot(ws) => ws.root().join(STORE_DIR).join(DEFAULT_LOG_NAME),
        }
    }

    fn open(&self) -> std::io::Result<CallLogFile> {
        let mut log = match self {
            LogPlace::File(path) => open_log(path)?,
            LogPlace::InRoot(ws) => open_root_log(ws)?,
        };
        log.shown = self.shown();
        Ok(log)
    }
}

/// One open log file, the directory it is named in (rotation renames relative to it), and its
/// lines not yet written.
struct CallLogFile {
    /// Its name in the operator's messages.
    shown: PathBuf,
    dir: Dir,
    name: OsString,
    file: File,
    pending: Vec<u8>,
    /// When a call last used it (see [`OpenLogs`]).
    last_used: u64,
}

impl CallLogWriter {
    /// A log for one server process. `mode` is the toolset's mode name.
    pub fn new(target: LogTarget, mode: String, include_args: bool) -> Self {
        // A fixed root has a fixed log: worked out once, not on every call.
        let destination = match target {
            LogTarget::File(path) => Destination::Fixed(path),
            LogTarget::Root(ws) => Destination::Root(ws),
            LogTarget::RootOfEachCall => Destination::RootOfEachCall,
        };
        CallLogWriter {
            destination,
            session: session_id(),
            mode,
            include_args,
            open: Mutex::new(OpenLogs::default()),
        }
    }

    fn place_for(&self) -> Option<LogPlace<'_>> {
        // Taken whatever the destination, so a worker thread does not keep a root open for no log.
        let ran_on = crate::ran_on::take();
        match &self.destination {
            Destination::Fixed(p) => Some(LogPlace::File(p)),
            Destination::Root(ws) => Some(LogPlace::InRoot(Cow::Borrowed(ws))),
            // The root the call ran on; a call refused before it had one (an invalid or
            // disallowed root, no client root yet) still deserves a line, but there is no
            // workspace to put it in.
            Destination::RootOfEachCall => ran_on.map(|ws| LogPlace::InRoot(Cow::Owned(ws))),
        }
    }

    /// The record of one call, borrowing from the call and the log: serialised straight to
    /// bytes, it costs no intermediate map per call (the log is written on every call, so this is
    /// on the hot path).
    fn record<'a>(&'a self, call: &'a CallRecord<'a>) -> CallLogRecord<'a> {
        let output = call.output;
        let mut counter = ByteCounter(0);
        let input_bytes = match serde_json::to_writer(&mut counter, call.args) {
            Ok(()) => counter.0,
            Err(_) => 0,
        };
        let args = self.include_args.then(|| {
            if input_bytes <= ARGS_MAX_BYTES {
                Cow::Borrowed(call.args)
            } else {
                let mut note = Map::new();
                note.insert(
                    "_omitted".into(),
                    Value::String(format!(
                        "arguments of {input_bytes} bytes, over the call log's limit of {ARGS_MAX_BYTES}"
                    )),
                );
                Cow::Owned(note)
            }
        });
        CallLogRecord {
            ts: Cow::Owned(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            session: Cow::Borrowed(&self.session),
            mode: Cow::Borrowed(&self.mode),
            client: RecordedClient {
                name: call.client.name.as_deref().map(cut_token),
                version: call.client.version.as_deref().map(cut_token),
            },
            protocol: cut_token(call.client.revision.as_str()),
            tool: Cow::Borrowed(call.tool),
            outcome: if output.is_error {
                CallOutcome::Error
            } else {
                CallOutcome::Ok
            },
            error_kind: output.error_kind.as_deref().map(cut_token),
            duration_ms: call.duration.as_millis() as u64,
            input_bytes,
            output_bytes: output.text.len(),
            extra: bounded(&output.log),
            args,
        }
    }
}

/// `s` cut to at most `max` bytes on a character boundary, followed by `…[+N bytes]` naming what
/// was left out; `s` itself when it fits.
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…[+{} bytes]", &s[..end], s.len() - end))
}

/// A client-supplied string as a line carries it: at most [`TOKEN_MAX_BYTES`].
fn cut_token(s: &str) -> Cow<'_, str> {
    cut(s, TOKEN_MAX_BYTES)
}

/// The toolset's facts for a line with every string cut to [`TOKEN_MAX_BYTES`] and every list
/// to [`LIST_MAX_ITEMS`]; borrowed as they are when nothing needs cutting (the usual case, and
/// this runs on every call). Both walks use an explicit stack, not recursion.
fn bounded(extra: &Map<String, Value>) -> Cow<'_, Map<String, Value>> {
    let mut stack: Vec<&Value> = extra.values().collect();
    let mut fits = true;
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.len() > TOKEN_MAX_BYTES => fits = false,
            Value::Array(a) if a.len() > LIST_MAX_ITEMS => fits = false,
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
        if !fits {
            break;
        }
    }
    if fits {
        return Cow::Borrowed(extra);
    }
    let mut owned = extra.clone();
    let mut stack: Vec<&mut Value> = owned.values_mut().collect();
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => {
                if let Cow::Owned(short) = cut_token(s) {
                    *s = short;
                }
            }
            Value::Array(a) => {
                if a.len() > LIST_MAX_ITEMS {
                    let more = a.len() - LIST_MAX_ITEMS;
                    a.truncate(LIST_MAX_ITEMS);
                    a.push(Value::String(format!("…[+{more} more]")));
                }
                stack.extend(a.iter_mut());
            }
            Value::Object(m) => stack.extend(m.values_mut()),
            _ => {}
        }
    }
    Cow::Owned(owned)
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

impl CallObserver for CallLogWriter {
    fn observe(&self, record: &CallRecord<'_>) {
        let Some(place) = self.place_for() else {
            return;
        };
        let key = match place.key() {
            Ok(key) => key,
            Err(err) => {
                eprintln!(
                    "filesystem: cannot open call log {}: {err}",
                    place.shown().display()
                );
                return;
            }
        };
        let Ok(mut open) = self.open.lock() else {
            return;
        };
        open.tick += 1;
        let tick = open.tick;
        if !open.files.contains_key(&key) {
            match place.open() {
                Ok(log) => {
                    open.make_room();
                    open.files.insert(key.clone(), log);
                }
                Err(err) => {
                    // A broken log must never break the call it describes.
                    eprintln!(
                        "filesystem: cannot open call log {}: {err}",
                        place.shown().display()
                    );
                    return;
                }
            }
        }
        if let Some(log) = open.files.get_mut(&key) {
            log.last_used = tick;
            if serde_json::to_writer(&mut log.pending, &self.record(record)).is_ok() {
                log.pending.push(b'\n');
            }
        }
    }

    fn release(&self) {
        let Ok(mut open) = self.open.lock() else {
            return;
        };
        for log in open.files.values_mut() {
            write_pending(log);
        }
    }
}

/// Opens (creating it and its directory) the operator's `--call-log FILE` for appending, and cuts
/// a torn last line a killed server may have left. The file's directory is the operator's to
/// choose (links on the way are followed, once, by [`workspace::root::open_operator_dir`]); from
/// there on, the file is opened, and rotated, through the workspace layer relative to that
/// directory.
fn open_log(path: &Path) -> std::io::Result<CallLogFile> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "--call-log needs a file name, not a directory",
        )
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::env::current_dir()?,
    };
    let ws = workspace::root::open_operator_dir(&parent)?;
    CallLogFile::open(ws.dir(Path::new(""))?, name)
}

/// Opens the log inside the store of the root `ws` through the workspace layer: the store
/// directory is created beneath the root's descriptor (the one the root's tools use, not its
/// path), nothing on the way may be a symlink, and a log file with more than one link is refused,
/// so neither a swapped-in link nor a planted hard link can carry the server's appends to a file
/// outside the workspace.
fn open_root_log(ws: &Workspace) -> std::io::Result<CallLogFile> {
    ws.create_dirs(Path::new(STORE_DIR))?;
    CallLogFile::open(ws.dir(Path::new(STORE_DIR))?, OsStr::new(DEFAULT_LOG_NAME))
}

/// The rotation size: [`ROTATE_BYTES_ENV`] if set to a number, else [`DEFAULT_ROTATE_BYTES`].
fn rotate_bytes() -> u64 {
    static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var(ROTATE_BYTES_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_ROTATE_BYTES)
    })
}

impl CallLogFile {
    /// Opens `name` in `dir` for appending (a regular file with a single link, created if
    /// missing) and cuts a torn last line under its lock.
    fn open(dir: Dir, name: &OsStr) -> std::io::Result<CallLogFile> {
        let file = dir.open_append(name)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
        let cut = cut_torn_tail(&file);
        rustix::fs::flock(&file, rustix::fs::FlockOperation::Unlock)?;
        cut?;
        Ok(CallLogFile {
            shown: PathBuf::from(name),
            // Only the directory and the file stay open, not the workspace's root as well: two
            // descriptors per log.
            dir: dir.detached(),
            name: name.to_os_string(),
            file,
            pending: Vec::new(),
            last_used: 0,
        })
    }

    /// Appends the pending lines with a single `write` on an `O_APPEND` descriptor under the
    /// file's exclusive lock, so concurrent servers sharing a log never interleave or tear lines,
    /// rotating the file first when it has reached `limit`.
    ///
    /// The lock is the file's own `flock`; whoever holds it may rotate. So after taking it, a
    /// writer checks that its descriptor is still the file under the log's name: if another
    /// server rotated it meanwhile, the writer opens the new file and tries again, and no line
    /// goes into a file that has already been rotated away.
    fn append_pending(&mut self, limit: u64) -> std::io::Result<()> {
        use rustix::fs::FlockOperation::{LockExclusive, Unlock};
        for _ in 0..8 {
            rustix::fs::flock(&self.file, LockExclusive)?;
            let current = self.is_current();
            let size = Stat::of(&self.file).map(|st| st.size);
            let outcome = match (current, size) {
                (true, Ok(size)) if size < limit || size == 0 => {
                    let written = (&self.file).write_all(&self.pending);
                    rustix::fs::flock(&self.file, Unlock)?;
                    return written;
                }
                (true, Ok(_)) => self.rotate(),
                (true, Err(e)) => Err(e),
                (false, _) => Ok(()),
            };
            rustix::fs::flock(&self.file, Unlock)?;
            if let Err(e) = outcome {
                // A log that cannot be rotated still takes its lines: losing them would be
                // worse than a file past its size.
                eprintln!(
                    "filesystem: cannot rotate call log {}: {e}",
                    Path::new(&self.name).display()
                );
                rustix::fs::flock(&self.file, LockExclusive)?;
                let written = (&self.file).write_all(&self.pending);
                rustix::fs::flock(&self.file, Unlock)?;
                return written;
            }
            self.file = self.dir.open_append(&self.name)?;
        }
        Err(std::io::Error::other(
            "the log kept being rotated away by other servers; its lines were not written",
        ))
    }

    /// True when the log's name still names the file this descriptor is open on.
    fn is_current(&self) -> bool {
        match (self.dir.stat(&self.name), Stat::of(&self.file)) {
            (Ok(Some(named)), Ok(open)) => named.dev == open.dev && named.ino == open.ino,
            _ => false,
        }
    }

    /// Moves `.N` to `.N+1` from the oldest down (dropping the oldest), then the log to `.1`;
    /// the next append creates a fresh log. Called with the log's lock held. A crash between two
    /// renames leaves a gap in the numbers, never two files out of order, so the next rotation
    /// and `report` carry on from it.
    fn rotate(&self) -> std::io::Result<()> {
        for n in (1..KEEP_ROTATED).rev() {
            let from = rotated_name(&self.name, n);
            match self
                .dir
                .rename_replace(&from, &self.dir, &rotated_name(&self.name, n + 1))
            {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        self.dir
            .rename_replace(&self.name, &self.dir, &rotated_name(&self.name, 1))?;
        self.dir.sync()
    }
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
const STORE_DIR: &str = workspace::guard::STATE_DIRS[0];

/// A session id unique enough to tell processes apart: start time and pid.
fn session_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}-{:x}", nanos, std::process::id())
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use mcp_core::server::ClientInfo;
    use mcp_core::toolset::ToolOutput;

    /// The keys of a line, in the order they are written: the format `report`, the fixtures and
    /// anyone's scripts read.
    const KEYS: [&str; 15] = [
        "ts",
        "session",
        "mode",
        "client",
        "protocol",
        "tool",
        "outcome",
        "error_kind",
        "duration_ms",
        "input_bytes",
        "output_bytes",
        "stage_count",
        "stages",
        "token",
        "args",
    ];

    #[test]
    fn the_written_line_is_the_serde_serialisation_of_the_record() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("calls.jsonl");
        let writer = CallLogWriter::new(LogTarget::File(path.clone()), "legacy-pipe".into(), true);
        let mut output = ToolOutput::text("refused");
        output.is_error = true;
        output.error_kind = Some("DISALLOWED_OPTION".into());
        output.log.insert("token".into(), "-i".into());
        output
            .log
            .insert("stages".into(), serde_json::json!(["sed"]));
        output.log.insert("stage_count".into(), 1.into());
        let args = serde_json::json!({"command": "sed -i s/a/b/ f"});
        let Value::Object(args) = args else {
            unreachable!("an object literal")
        };
        let client = ClientInfo {
            name: Some("claude-code".into()),
            version: None,
            revision: mcp_core::protocol::Revision::V2025_11_25,
        };
        let call = CallRecord {
            tool: "shelpa_pipe",
            args: &args,
            output: &output,
            client: &client,
            duration: std::time::Duration::from_millis(3),
        };
        writer.observe(&call);
        writer.release();

        let written = std::fs::read(&path).expect("the log");
        let line = written.strip_suffix(b"\n").expect("one whole line");
        assert!(!line.contains(&b'\n'), "exactly one line");
        // What the reader makes of the line is what the writer built, but for the clock.
        let read = CallLogRecord::parse(line).expect("the reader takes the writer's line");
        let mut built = writer.record(&call);
        assert_ne!(read.ts, "", "the line has a time");
        built.ts = read.ts.clone();
        assert_eq!(read, built);
        // And the writer's bytes are exactly serde's bytes of that record.
        assert_eq!(
            std::str::from_utf8(line).expect("utf-8"),
            serde_json::to_string(&built).expect("serialise")
        );
        // In the format's key order.
        let text = std::str::from_utf8(line).expect("utf-8");
        let mut at = 0;
        for key in KEYS {
            let found = text[at..]
                .find(&format!("\"{key}\":"))
                .unwrap_or_else(|| panic!("{key} missing or out of order in {text}"));
            at += found;
        }
    }
}
