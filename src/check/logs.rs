//! The append-only logs: `.moves`, `.deletes`, `.imports`, the operation log `.operations` (and
//! its rotations) and the call log `.calls.jsonl`.
//!
//! A crash can leave one torn last line (an append that was never acknowledged); that is a
//! warning, and `--repair` cuts it off, exactly as the next append would. A bad line anywhere
//! else did not come from a crash of this server — the store's appends cut a torn line before
//! writing — so it is reported and left for a person.

use std::io::{BufRead, BufReader};
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use workspace::history::layout::{self, DELETES_LOG, IMPORTS_LOG, MOVES_LOG};
use workspace::history::log::unescape;

use super::repair::Fixer;
use super::{CheckReport, CheckSeverity, Fix};

/// What a line of one log must look like.
#[derive(Clone, Copy)]
enum Grammar {
    /// time, from, to
    Moves,
    /// time, delete|restore, id, path
    Deletes,
    /// path, key
    Imports,
    /// one JSON object
    Calls,
    /// one operation-log entry, its id above the one before
    Operations,
}

/// Checks every log that exists.
pub(crate) fn check(state: &Path, fixer: &mut Fixer, report: &mut CheckReport) {
    for (name, grammar) in [
        (MOVES_LOG, Grammar::Moves),
        (DELETES_LOG, Grammar::Deletes),
        (IMPORTS_LOG, Grammar::Imports),
        (workspace::history::layout::DEFAULT_LOG_NAME, Grammar::Calls),
    ] {
        check_one(state, name, grammar, fixer, report);
    }
    // Oldest rotation first, so the ids must rise from one file into the next.
    let mut last_id = 0;
    let mut trash_ids = std::collections::BTreeMap::new();
    for rel in workspace::history::oplog::file::files(Path::new(""))
        .iter()
        .rev()
    {
        let name = rel.to_string_lossy();
        last_id = check_operations(state, &name, last_id, &mut trash_ids, fixer, report);
    }
    check_trash_ids(&trash_ids, fixer, report);
}

/// The most trash ids of the operation log compared with `.deletes`; beyond it the rest are not
/// compared, so the check stays bounded in memory.
const MAX_TRASH_IDS: usize = 1_000_000;

/// Verifies the operation log against the store: every trash entry it names (deleted as, or
/// restored from) was recorded by `.deletes`, which the store writes before the entry is made.
fn check_trash_ids(
    ids: &std::collections::BTreeMap<u64, String>,
    fixer: &Fixer,
    report: &mut CheckReport,
) {
    if ids.is_empty() {
        return;
    }
    let log = workspace::history::log::HistoryLog::new(
        fixer.workspace().clone(),
        Path::new(workspace::guard::STATE_DIRS[0]).join(DELETES_LOG),
    );
    let Ok(events) = workspace::history::trash::read_deletes(&log) else {
        return; // Reported by the check of `.deletes` itself.
    };
    let known: std::collections::HashSet<u64> = events.iter().map(|e| e.id).collect();
    for (id, place) in ids {
        if !known.contains(id) {
            report.push(
                CheckSeverity::Error,
                place.clone(),
                format!("names trash entry {id}, which .filesystem/.deletes never recorded: the trash or its log was changed by hand, so a revert cannot bring that entry back"),
                Fix::Manual("compare .filesystem/.trash and .filesystem/.deletes by hand; put back what was removed from them".into()),
            );
        }
    }
}

/// Checks one file of the operation log: each entry parses, names plain root-relative paths
/// and has an id above the one before (`last_id`, the newest of the older files); returns the
/// newest id seen. A torn last line is cut by `--repair`, as for the other logs.
fn check_operations(
    state: &Path,
    name: &str,
    mut last_id: u64,
    trash_ids: &mut std::collections::BTreeMap<u64, String>,
    fixer: &Fixer,
    report: &mut CheckReport,
) -> u64 {
    let rel = Path::new(workspace::guard::STATE_DIRS[0]).join(name);
    match fixer.workspace().stat(&rel) {
        Ok(Some(m)) if m.is_file() => {}
        _ => return last_id,
    }
    check_one(state, name, Grammar::Operations, fixer, report);
    let place = format!(".filesystem/{name}");
    let Ok(file) = fixer
        .workspace()
        .open_regular(&rel, OFlags::RDONLY, Mode::empty())
    else {
        return last_id;
    };
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let mut n = 0usize;
    while matches!(reader.read_until(b'\n', &mut line), Ok(k) if k > 0) {
        n += 1;
        if line.last() == Some(&b'\n') {
            if let Ok(op) = serde_json::from_slice::<workspace::history::oplog::Operation>(&line) {
                if op.id <= last_id {
                    report.push(
                        CheckSeverity::Error,
                        format!("{place}:{n}"),
                        format!("operation id {} is not above the one before it ({last_id}): ids must never repeat, so reverting by id could pick the wrong entry", op.id),
                        Fix::Manual("inspect the log by hand; no writer of this server puts ids out of order".into()),
                    );
                }
                last_id = last_id.max(op.id);
                for c in &op.changes {
                    let named = match (&c.after, c.restored_from) {
                        (workspace::history::oplog::State::Trashed { id }, _) => Some(*id),
                        (_, Some(id)) => Some(id),
                        _ => None,
                    };
                    if let Some(id) = named.filter(|_| trash_ids.len() < MAX_TRASH_IDS) {
                        trash_ids
                            .entry(id)
                            .or_insert_with(|| format!("{place}:{n}"));
                    }
                }
            }
        }
        line.clear();
    }
    last_id
}

fn check_one(state: &Path, name: &str, grammar: Grammar, fixer: &Fixer, report: &mut CheckReport) {
    let path = state.join(name);
    let rel = Path::new(workspace::guard::STATE_DIRS[0]).join(name);
    let place = format!(".filesystem/{name}");
    let ws = fixer.workspace();
    match ws.stat(&rel) {
        Ok(Some(m)) if m.is_file() => {}
        // Links and other odd types at these names are reported by the store walk.
        _ => return,
    }
    let cannot_read = |report: &mut CheckReport, e: std::io::Error| {
        report.push(
            CheckSeverity::Error,
            place.clone(),
            format!("cannot be read: {e}"),
            Fix::Manual("check its permissions".into()),
        )
    };
    let file = match ws.open_regular(&rel, OFlags::RDONLY, Mode::empty()) {
        Ok(f) => f,
        Err(e) => return cannot_read(report, e),
    };
    // One line at a time: a log can be large, and only its longest line is ever held.
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let (mut lines, mut complete, mut torn) = (0usize, 0u64, 0u64);
    loop {
        line.clear();
        let n = match reader.read_until(b'\n', &mut line) {
            Ok(n) => n,
            Err(e) => return cannot_read(report, e),
        };
        if n == 0 {
            break;
        }
        let Some(body) = line.strip_suffix(b"\n") else {
            torn = n as u64;
            break;
        };
        lines += 1;
        complete += n as u64;
        if let Err(why) = parse_line(body, grammar) {
            // The call log is written without cutting a torn line first, so a line glued onto a
            // torn one is a known (harmless) leftover there; in the store's logs it is not.
            let severity = match grammar {
                Grammar::Calls => CheckSeverity::Warning,
                _ => CheckSeverity::Error,
            };
            report.push(
                severity,
                format!("{place}:{lines}"),
                format!("line does not parse ({why}); readers skip it"),
                Fix::Manual(
                    "inspect it by hand; it did not come from an interrupted append of this server"
                        .into(),
                ),
            );
        }
    }
    if torn > 0 {
        let fix = fixer.truncate(&path, complete, format!("cut the {torn} torn byte(s) off"));
        report.push(
            CheckSeverity::Warning,
            format!("{place}:{}", lines + 1),
            "the last line is torn (an append cut short by a crash; it was never acknowledged, and readers ignore it)".into(),
            fix,
        );
    }
}

/// Checks one complete line (without its newline) against `grammar`.
fn parse_line(line: &[u8], grammar: Grammar) -> Result<(), String> {
    if let Grammar::Operations = grammar {
        let op = serde_json::from_slice::<workspace::history::oplog::Operation>(line)
            .map_err(|e| format!("not an operation entry: {e}"))?;
        chrono::DateTime::parse_from_rfc3339(&op.time)
            .map_err(|_| "the time is not an RFC 3339 timestamp".to_string())?;
        for c in &op.changes {
            let paths = std::iter::once(c.rel()).chain(
                c.moved_from
                    .as_deref()
                    .map(workspace::history::oplog::record::field_to_path),
            );
            for p in paths {
                layout::components(&p)
                    .map_err(|_| "a path is not a plain root-relative path".to_string())?;
            }
        }
        return Ok(());
    }
    if let Grammar::Calls = grammar {
        return match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(_)) => Ok(()),
            Ok(_) => Err("not a JSON object".into()),
            Err(e) => Err(format!("not JSON: {e}")),
        };
    }
    let fields: Vec<Vec<u8>> = line
        .split(|&b| b == b'\t')
        .map(|f| unescape(f).ok_or_else(|| "a field has an invalid escape".to_string()))
        .collect::<Result<_, _>>()?;
    let want = match grammar {
        Grammar::Moves => 3,
        Grammar::Deletes => 4,
        Grammar::Imports => 2,
        Grammar::Calls | Grammar::Operations => 1,
    };
    if fields.len() != want {
        return Err(format!("{} field(s), expected {want}", fields.len()));
    }
    let time = |f: &[u8]| {
        std::str::from_utf8(f)
            .ok()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|_| ())
            .ok_or_else(|| "the time is not an RFC 3339 timestamp".to_string())
    };
    let path = |f: &[u8]| {
        layout::components(&workspace::history::log::field_path(f))
            .map(|_| ())
            .map_err(|_| "a path is not a plain root-relative path".to_string())
    };
    match grammar {
        Grammar::Moves => {
            time(&fields[0])?;
            path(&fields[1])?;
            path(&fields[2])
        }
        Grammar::Deletes => {
            time(&fields[0])?;
            if fields[1] != b"delete" && fields[1] != b"restore" {
                return Err("the action is neither delete nor restore".into());
            }
            std::str::from_utf8(&fields[2])
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .filter(|&id| id >= 1)
                .ok_or_else(|| "the trash id is not a positive number".to_string())?;
            path(&fields[3])
        }
        Grammar::Imports => path(&fields[0]),
        Grammar::Calls | Grammar::Operations => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_log_lines_are_checked_field_by_field() {
        let t = "2024-01-01T00:00:00.000000Z";
        assert!(parse_line(format!("{t}\ta\tb").as_bytes(), Grammar::Moves).is_ok());
        assert!(parse_line(format!("{t}\tdelete\t3\ta").as_bytes(), Grammar::Deletes).is_ok());
        assert!(parse_line(format!("{t}\tdelete\tx\ta").as_bytes(), Grammar::Deletes).is_err());
        assert!(parse_line(format!("{t}\tpurge\t3\ta").as_bytes(), Grammar::Deletes).is_err());
        assert!(parse_line(format!("{t}\t../x\tb").as_bytes(), Grammar::Moves).is_err());
        assert!(parse_line(b"yesterday\ta\tb", Grammar::Moves).is_err());
        assert!(parse_line(b"a\tkey", Grammar::Imports).is_ok());
        assert!(parse_line(b"{\"tool\":1}", Grammar::Calls).is_ok());
        assert!(parse_line(b"{\"to", Grammar::Calls).is_err());
    }
}
