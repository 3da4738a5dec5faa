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
//! reads as one, in order. Each file is read a line at a time, a line at most
//! [`crate::lines::MAX_LINE_BYTES`] long (a longer one is skipped and counted); only regular
//! files are read (a FIFO or device named as a log is refused instead of blocking the report or
//! feeding it without end; see [`crate::input`]).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;
use workspace::Stat;

use super::call_log_record::{CallLogRecord, CallOutcome};
use super::classify::{classify_log_name, is_write};
use super::input::{open_named, Flag, InputError, Named, MAX_INPUT_BYTES};
use super::lines::{Line, Lines};
use super::model::{Call, InputStats, Outcome, Session};
use super::reason::{clip_token, UNCLASSIFIED};
use super::retry::InputKey;
use super::{warn, ReportError};

/// The session name used for lines that carry none.
const NO_SESSION: &str = "(no session)";

/// Reads every call log into sessions, in order of first appearance.
///
/// A file named that cannot be read is an error (the name is likely wrong); a rotated file
/// beside it that cannot be read, or any file that fails part-way, is skipped with a warning
/// and counted ([`InputStats::unreadable_files`]), and the rest is reported.
pub fn read_call_logs(files: &[PathBuf]) -> Result<(Vec<Session>, InputStats), ReportError> {
    let mut stats = InputStats::default();
    let mut sessions: Vec<Session> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (path, file) in with_rotated(files, &mut stats)? {
        let mut lines = Lines::new(file.take(MAX_INPUT_BYTES));
        let mut whole = true;
        loop {
            let line = match lines.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => {
                    skip(&mut stats, &path, &InputError::Read(e));
                    whole = false;
                    break;
                }
            };
            stats.lines += 1;
            let line = match line {
                Line::Text(line) => line,
                Line::TooLong => {
                    stats.long_lines += 1;
                    continue;
                }
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Some((session, call)) = parse_entry(line) else {
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
        if whole {
            stats.files += 1;
        }
    }
    Ok((sessions, stats))
}

/// A file that cannot be read (or not to its end), warned and counted.
fn skip(stats: &mut InputStats, path: &Path, why: &InputError) {
    stats.unreadable_files += 1;
    warn(format_args!(
        "skipped '{}': {why}; {}; the rest is reported",
        path.display(),
        why.advice(Flag::Log)
    ));
}

/// The files to read for `files`, open: each preceded by its rotated files that exist, oldest
/// first (gaps, which a crash in the middle of a rotation can leave, are skipped); a file named
/// twice, by itself and as another's rotated file, is read once, where it first comes.
pub fn with_rotated(
    files: &[PathBuf],
    stats: &mut InputStats,
) -> Result<Vec<(PathBuf, File)>, ReportError> {
    let mut out: Vec<(PathBuf, File)> = Vec::new();
    let mut seen = HashSet::new();
    let mut keep = |path: PathBuf, file: File, out: &mut Vec<(PathBuf, File)>| {
        // The same file under two names is told by its identity, not by comparing names.
        let id = Stat::of(&file).map(|st| (st.dev, st.ino)).ok();
        if id.is_none_or(|id| seen.insert(id)) {
            out.push((path, file));
        }
    };
    for path in files {
        if let Some(name) = path.file_name() {
            for n in (1..=workspace::history::layout::KEEP_ROTATED).rev() {
                let rotated =
                    path.with_file_name(workspace::history::layout::rotated_name(name, n));
                match open_named(&rotated) {
                    Ok(Named::File(file)) => keep(rotated, file, &mut out),
                    Err(InputError::Open(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Ok(Named::Directory(_)) => {
                        skip(stats, &rotated, &InputError::NotRegular("a directory"))
                    }
                    Err(why) => skip(stats, &rotated, &why),
                }
            }
        }
        let file = match open_named(path) {
            Ok(Named::File(file)) => file,
            Ok(Named::Directory(_)) => {
                return Err(ReportError::Input {
                    path: path.clone(),
                    flag: Flag::Log,
                    source: InputError::NotRegular("a directory"),
                })
            }
            Err(source) => {
                return Err(ReportError::Input {
                    path: path.clone(),
                    flag: Flag::Log,
                    source,
                })
            }
        };
        keep(path.clone(), file, &mut out);
    }
    Ok(out)
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
            input: record
                .args
                .map(|args| InputKey::of(&Value::Object(args.into_owned()))),
            refused_token,
        },
    ))
}
