//! `audit restore`: writing a recorded version back into the workspace.
//!
//! The destination goes through the path guard as a change (a final link is not followed, `.git/`
//! is refused), every read and write goes through the workspace layer (relative to descriptors
//! opened beneath the root, so a swapped-in link makes the restore fail rather than write
//! elsewhere), the file is replaced with the layer's one temporary-file scheme (or by the history
//! store when the workspace has one), and the restore is appended to the destination's mirror
//! as an overwrite record by the same writer and record-id rule as `tee`'s, so the restore
//! itself can be audited and undone. Content that exists in no record is never replaced without
//! `--force`, and even then it is first kept in the mirror as a baseline record.

use std::io::{Read, Write};
use std::path::Path;

use serde_json::json;

use workspace::is_swap;

use super::context::{record_name, select, Audit};
use super::error::AuditError;
use super::tree::{self, OpenError};
use workspace::mirror::{AppendError, Mirror, MirrorAppender, RecordKind};

/// The arguments of one restore.
pub struct Request<'a> {
    /// Workspace path whose mirror holds the version.
    pub path: &'a str,
    /// Record id or `#N`.
    pub record: &'a str,
    /// Another destination, if any.
    pub to: Option<&'a str>,
    /// Overwrite unrecorded content.
    pub force: bool,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> AuditError {
    move |source| AuditError::Io { what, source }
}

fn open_err(what: String, shown: &str) -> impl FnOnce(OpenError) -> AuditError + '_ {
    move |e| match e {
        OpenError::Io(source) => AuditError::Io { what, source },
        other => AuditError::HostileMirror {
            path: shown.to_string(),
            why: other.to_string(),
        },
    }
}

/// Restores a version; prints what was done and returns the exit status.
pub fn restore(
    audit: &Audit,
    req: &Request<'_>,
    json_out: bool,
    out: &mut dyn Write,
) -> Result<i32, AuditError> {
    let source = audit.load(req.path)?;
    let index = select(&source, req.record)?;
    let record = &source.mirror.records[index];
    let version = record.content.clone();
    let dest_input = req.to.unwrap_or(&source.display);
    // A restore is a change: the final link is not followed and `.git/` is refused, so a
    // hostile mirror of `.git/hooks/pre-commit` cannot plant a hook.
    let dest = audit.guard.resolve_for_change(dest_input)?;
    if dest.is_root() || dest.relative.file_name().is_none() {
        return Err(AuditError::DestinationNotFile(dest_input.to_string()));
    }
    let shown = dest.display();
    let ws = audit.workspace();

    let existing = match ws.stat(&dest.relative) {
        Ok(Some(st)) if st.is_file() => Some(st),
        Ok(Some(_)) => return Err(AuditError::DestinationNotFile(dest_input.to_string())),
        Ok(None) => None,
        Err(e) => return Err(io(format!("cannot inspect '{shown}'"))(e)),
    };
    let current = match existing {
        Some(_) => {
            let mut f = tree::open_file_nofollow(ws, &dest.relative)
                .map_err(open_err(format!("cannot read '{shown}'"), &shown))?;
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)
                .map_err(io(format!("cannot read '{shown}'")))?;
            Some(bytes)
        }
        None => None,
    };
    if current.as_deref() == Some(version.as_slice()) {
        let msg = format!(
            "'{shown}' already holds record {} of '{}'; nothing was written\n",
            record_name(record, index),
            source.display
        );
        return finish(
            out,
            json_out,
            &msg,
            json!({"restored": false, "dest": shown, "reason": "already at this version"}),
        );
    }
    // Forced or not, content no record holds is kept as a baseline record before it is replaced.
    let mut unrecorded = false;
    if let Some(cur) = &current {
        let dest_mirror = match tree::read_mirror(ws, &dest.relative) {
            Ok(bytes) => Mirror::parse(&bytes),
            Err(OpenError::NotFound) => Mirror::default(),
            Err(e) => {
                return Err(open_err(
                    format!("cannot read the mirror of '{shown}'"),
                    &shown,
                )(e))
            }
        };
        let recorded = dest_mirror.records.iter().any(|r| &r.content == cur);
        if !recorded && !req.force {
            return Err(AuditError::Unrecorded(shown));
        }
        unrecorded = !recorded;
    }

    // Missing directories of the destination are made (a deleted file comes back with its
    // directory), one at a time beneath the root's descriptor; a swapped-in link fails here,
    // before anything is recorded.
    let parent_rel = dest.relative.parent().unwrap_or(Path::new(""));
    // A workspace that has a `.filesystem/` history gets the restore as a version there too (the
    // store swaps the file in itself), so `undo_file` can take the restore back. Either way the
    // restore is made under the store's lock, as one entry of the operation log.
    let has_store = ws
        .stat(Path::new(workspace::guard::STATE_DIRS[0]))
        .ok()
        .flatten()
        .is_some_and(|st| st.is_dir());
    let store = workspace::history::Store::new(ws.clone(), has_store);
    let lock = store
        .begin(
            &workspace::history::LockWait::patient(),
            &workspace::history::oplog::Origin::command("audit restore"),
        )
        .map_err(|e| AuditError::History(e.to_string()))?;
    store.create_dirs(&lock, parent_rel).map_err(|e| {
        open_err(format!("cannot create the directory of '{shown}'"), &shown)(e.into())
    })?;
    // Record first, then change the file: if the change then fails, the mirror holds a record of
    // an attempt, which an auditor can see through; the other order could leave a change the
    // audit never saw.
    let keep = if unrecorded { current.as_deref() } else { None };
    let ids = record_restore(audit, &dest.relative, &shown, keep, &version)?;
    let history_version = if has_store {
        let report = store
            .write(&lock, &dest.relative, &version, false)
            .map_err(|e| AuditError::History(e.to_string()))?;
        report.version
    } else {
        // The layer's one temporary-file scheme: a temporary beside the destination, synced,
        // renamed into place; the old permission bits are kept.
        lock.touch(&dest.relative);
        ws.replace_file(&dest.relative, &version, existing.map(|st| st.mode), false)
            .map_err(io(format!(
                "cannot move the restored content into '{shown}'"
            )))?;
        None
    };
    lock.commit()
        .map_err(|e| AuditError::History(e.to_string()))?;

    let mut msg = format!(
        "restored '{}' record {} ({} bytes) to '{shown}'; recorded in .shelpa/{shown} as record {}",
        source.display,
        record_name(record, index),
        version.len(),
        ids.overwrite
    );
    if let Some(b) = ids.baseline {
        msg.push_str(&format!(
            " (its previous content was kept as baseline record {b})"
        ));
    }
    if let Some(v) = history_version {
        msg.push_str(&format!(
            "; also version {v} of its .filesystem history (undo_file takes it back)"
        ));
    }
    msg.push('\n');
    finish(
        out,
        json_out,
        &msg,
        json!({
            "restored": true,
            "path": source.display,
            "record_id": record.id,
            "position": index + 1,
            "dest": shown,
            "bytes": version.len(),
            "new_record_id": ids.overwrite,
            "baseline_record_id": ids.baseline,
            "history_version": history_version,
        }),
    )
}

fn finish(
    out: &mut dyn Write,
    json_out: bool,
    human: &str,
    value: serde_json::Value,
) -> Result<i32, AuditError> {
    let text = if json_out {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )
    } else {
        super::render::message(human)
    };
    out.write_all(text.as_bytes())
        .map_err(io("cannot write the output".into()))?;
    Ok(0)
}

/// Record ids written for one restore.
struct Ids {
    baseline: Option<u64>,
    overwrite: u64,
}

/// Appends the restore to `.shelpa/<dest>` through the workspace layer's one mirror writer, as
/// tee would (same lock, same record-id rule): first a baseline record of `unrecorded` (the
/// destination's content when no record holds it, e.g. it existed before any mirror or was
/// edited outside tee), then the overwrite; the mirror is synced before the file is touched.
fn record_restore(
    audit: &Audit,
    dest_rel: &Path,
    shown: &str,
    unrecorded: Option<&[u8]>,
    version: &[u8],
) -> Result<Ids, AuditError> {
    let what = format!("cannot record the restore in .shelpa/{shown}");
    let hostile = |e: std::io::Error| {
        if is_swap(&e) || e.raw_os_error() == Some(libc::ENOTDIR) {
            AuditError::HostileMirror {
                path: shown.to_string(),
                why: "goes through a symlink, which is not followed here".into(),
            }
        } else if e.kind() == std::io::ErrorKind::InvalidData {
            // What the layer's append refuses: a special file, or one with another name that
            // could be a file anywhere else.
            AuditError::HostileMirror {
                path: shown.to_string(),
                why: "is not a regular file with a single link".into(),
            }
        } else if e.kind() == std::io::ErrorKind::AlreadyExists {
            AuditError::HostileMirror {
                path: shown.to_string(),
                why: "has a file where a directory of .shelpa/ belongs".into(),
            }
        } else {
            AuditError::Io {
                what: what.clone(),
                source: e,
            }
        }
    };
    let mut mirror = MirrorAppender::open(audit.workspace(), dest_rel).map_err(hostile)?;
    // Ids only grow and never repeat: past the largest one there is no id left to give, and
    // the restore is refused before anything more is written.
    let begin = |mirror: &mut MirrorAppender, kind| {
        mirror.begin(kind).map_err(|e| match e {
            AppendError::IdsExhausted => AuditError::RecordIdsExhausted(shown.to_string()),
            AppendError::Io(source) => AuditError::Io {
                what: what.clone(),
                source,
            },
        })
    };
    let mut baseline = None;
    if let Some(prev) = unrecorded {
        baseline = Some(begin(&mut mirror, RecordKind::Baseline)?);
        mirror.append(prev).map_err(io(what.clone()))?;
    }
    let overwrite = begin(&mut mirror, RecordKind::Overwrite)?;
    mirror.append(version).map_err(io(what.clone()))?;
    mirror.sync().map_err(io(what))?;
    Ok(Ids {
        baseline,
        overwrite,
    })
}
