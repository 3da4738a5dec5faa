//! `audit import`: turns every mirror into `.filesystem/` version history, oldest record first,
//! so `undo_file` in filesystem mode can walk back through edits made in the shelpa era.

use std::collections::HashMap;
use std::io::Write;

use serde_json::json;

use super::context::{load_all, Audit};
use super::error::AuditError;
use super::render::table;
use workspace::history::Store;

/// Imports every readable mirror; running it again adds nothing (each record is keyed by its
/// record id, and the store remembers which keys it has imported per path).
pub fn import(audit: &Audit, json_out: bool, out: &mut dyn Write) -> Result<i32, AuditError> {
    let (loaded, hostile) = load_all(audit)?;
    let store = Store::new(audit.guard.workspace().clone(), true);
    let mut rows = Vec::new();
    let mut items = Vec::new();
    let mut refused = 0;
    for l in &loaded {
        // The history is keyed by workspace path, so that path must be one the guard accepts
        // for a change (a mirror of a path that now leads outside the root, or into `.git/`, is
        // left alone), and the store is handed the resolved, link-free path the workspace layer
        // acts on.
        let resolved = match audit.guard.resolve_for_change(&l.display) {
            Ok(resolved) => resolved,
            Err(e) => {
                refused += 1;
                rows.push(vec![
                    l.display.clone(),
                    "-".into(),
                    "-".into(),
                    format!("skipped: {e}"),
                ]);
                items.push(json!({"path": l.display, "skipped": e.to_string()}));
                continue;
            }
        };
        let versions = keyed_versions(&l.mirror.records);
        let report = store
            .begin(
                &workspace::history::LockWait::patient(),
                &workspace::history::oplog::Origin::command("audit import"),
            )
            .and_then(|lock| {
                let report = store.import_versions(&lock, &resolved.relative, &versions)?;
                lock.commit()?;
                Ok(report)
            })
            .map_err(|e| AuditError::History(e.to_string()))?;
        rows.push(vec![
            l.display.clone(),
            report.added.to_string(),
            report.skipped.to_string(),
            report
                .newest
                .map(|v| format!("version {v}"))
                .unwrap_or_else(|| "-".into()),
        ]);
        items.push(json!({
            "path": l.display,
            "added": report.added,
            "skipped": report.skipped,
            "newest_version": report.newest,
        }));
    }
    let added: usize = items
        .iter()
        .filter_map(|i| i["added"].as_u64())
        .sum::<u64>() as usize;
    if json_out {
        let doc = json!({"files": items, "added": added, "hostile_entries": hostile, "skipped_files": refused});
        writeln!(out, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default())
    } else {
        writeln!(
            out,
            "{}{} version(s) imported from {} mirror(s) into .filesystem/ history{}",
            table(&["path", "added", "already imported", "head"], &rows),
            added,
            loaded.len(),
            if hostile > 0 {
                format!("; {hostile} hostile entries under .shelpa/ were not read (see `filesystem audit verify`)")
            } else {
                String::new()
            }
        )
    }
    .map_err(|source| AuditError::Io {
        what: "cannot write the output".into(),
        source,
    })?;
    Ok(if refused > 0 { 1 } else { 0 })
}

/// Each record with a key stable across runs: its record id, `appends` for content written before
/// any separator, and a position suffix where a damaged mirror repeats an id.
fn keyed_versions(records: &[workspace::mirror::Record]) -> Vec<(String, Vec<u8>)> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let base =
                r.id.map(|id| id.to_string())
                    .unwrap_or_else(|| "appends".to_string());
            let count = seen.entry(base.clone()).or_insert(0);
            *count += 1;
            let key = if *count == 1 {
                base
            } else {
                format!("{base}#{}", i + 1)
            };
            (key, r.content.clone())
        })
        .collect()
}
