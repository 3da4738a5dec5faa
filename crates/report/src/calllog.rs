//! Reading this server's call logs (`.filesystem/.calls.jsonl`): one JSON object per tool call.
//!
//! Calls are grouped by the log's `session` field (one per server process) in the order their
//! lines appear; several files may be given and a session may span them. A line that is not a
//! JSON object with a string `tool` is counted as malformed and skipped.
//!
//! The server rotates a log by size (`.calls.jsonl` → `.calls.jsonl.1` → … `.4`), so each file
//! given is read after the rotated files beside it, oldest first: a session that spans a rotation
//! reads as one, in order. Each file is read a line at a time; only regular files are read (a FIFO
//! named as a log is refused instead of blocking the report).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use serde_json::Value;

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
            let Some((session, call)) = serde_json::from_slice::<Value>(&line)
                .ok()
                .and_then(|v| parse_entry(&v))
            else {
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

fn parse_entry(entry: &Value) -> Option<(String, Call)> {
    let tool = entry.get("tool")?.as_str()?.to_string();
    let session = entry
        .get("session")
        .and_then(Value::as_str)
        .unwrap_or(NO_SESSION)
        .to_string();
    let outcome = match entry.get("outcome").and_then(Value::as_str) {
        Some("ok") => Outcome::Ok,
        Some("error") => Outcome::Error(
            entry
                .get("error_kind")
                .and_then(Value::as_str)
                .unwrap_or(UNCLASSIFIED)
                .to_string(),
        ),
        // The server writes one of the two; anything else is not a line it wrote.
        _ => return None,
    };
    let stages: Vec<String> = entry
        .get("stages")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
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
            input: entry.get("args").cloned(),
            refused_token: entry.get("token").and_then(Value::as_str).map(clip_token),
        },
    ))
}
