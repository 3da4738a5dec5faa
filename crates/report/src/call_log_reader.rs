//! Reading this server's call logs (`.filesystem/.calls.jsonl`): one JSON object per tool call.
//!
//! Each line is read as the one record type the server writes ([`CallLogRecord`]). Calls are
//! grouped by the log's `session` field (one per server process) in the order their lines
//! appear; several files may be given and a session may span them. A line that is not a record
//! (not JSON, no string `tool`, an `outcome` other than `ok` or `error`, a field of the wrong
//! type) is counted as malformed and skipped.
//!
//! The server rotates a log by size (`.calls.jsonl` → `.calls.jsonl.1` → … `.4`), so each file
//! given is read after the rotated files beside it, oldest first: a session that spans a rotation
//! reads as one, in order. Each file is read a line at a time; only regular files are read (a FIFO
//! named as a log is refused instead of blocking the report).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use serde_json::Value;

use super::call_log_record::{CallLogRecord, CallOutcome};
use super::classify::{classify_log_name, is_write};
use super::model::{Call, InputStats, Outcome, Session};
use super::reason::{clip_token, UNCLASSIFIED};
use super::ReportError;

/// The session name used for lines that carry none.
const NO_SESSION: &str = "(no session)";

/// Reads every call log into sessions, in order of first appearance.
pub fn read_call_logs(files: &[PathBuf]) -> Result<(Vec<Session>, InputStats), ReportError> {
    let mut stats = InputStats::default();
    let mut sessions: Vec<Session> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for path in &with_rotated(files) {
        let file = workspace::open_regular_path(path, std::fs::OpenOptions::new().read(true))
            .map_err(|source| ReportError::ReadFile {
                path: path.clone(),
                source,
            })?;
        stats.files += 1;
        for line in BufReader::new(file).split(b'\n') {
            let line = line.map_err(|source| ReportError::ReadFile {
                path: path.clone(),
                source,
            })?;
            stats.lines += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Some((session, call)) = parse_entry(&line) else {
                stats.malformed_lines += 1;
                continue;
            };
            let at = *index.entry(session.clone()).or_insert_with(|| {
                sessions.push(Session {
                    id: session,
                    parent: None,
                    calls: Vec::new(),
                });
                sessions.len() - 1
            });
            sessions[at].calls.push(call);
        }
    }
    Ok((sessions, stats))
}

/// The files to read for `files`: each preceded by its rotated files that exist, oldest first
/// (gaps, which a crash in the middle of a rotation can leave, are skipped); a file named twice,
/// by itself and as another's rotated file, is read once, where it first comes.
pub fn with_rotated(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen = HashSet::new();
    for path in files {
        let rotated = path.file_name().map(|name| {
            (1..=workspace::history::layout::KEEP_ROTATED)
                .rev()
                .map(|n| path.with_file_name(workspace::history::layout::rotated_name(name, n)))
                .filter(|p| p.exists())
                .collect::<Vec<_>>()
        });
        for p in rotated
            .unwrap_or_default()
            .into_iter()
            .chain([path.clone()])
        {
            let id = p.canonicalize().unwrap_or_else(|_| p.clone());
            if seen.insert(id) {
                out.push(p);
            }
        }
    }
    out
}

/// The session and the report's view of one line, or `None` when the line is not a record.
fn parse_entry(line: &[u8]) -> Option<(String, Call)> {
    let record = CallLogRecord::parse(line)?;
    let stages = record.stages();
    let refused_token = record.refused_token().map(clip_token);
    let session = if record.session.is_empty() {
        NO_SESSION.to_string()
    } else {
        record.session.into_owned()
    };
    let outcome = match record.outcome {
        CallOutcome::Ok => Outcome::Ok,
        CallOutcome::Error => Outcome::Error(
            record
                .error_kind
                .as_deref()
                .unwrap_or(UNCLASSIFIED)
                .to_string(),
        ),
    };
    let tool = record.tool.into_owned();
    let interface = classify_log_name(&tool);
    let write = is_write(interface, &tool, &stages);
    Some((
        session,
        Call {
            tool,
            interface,
            write,
            outcome,
            stages,
            input: record.args.map(|args| Value::Object(args.into_owned())),
            refused_token,
        },
    ))
}
