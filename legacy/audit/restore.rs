//! `audit restore`: writing a recorded version back into the workspace.
//!
//! The destination goes through the path guard without following a final link, is replaced
//! atomically (a temporary file in the same directory, then a rename), and the restore is appended
//! to the destination's mirror as an overwrite record exactly as `tee` writes one, so the restore
//! itself can be audited and undone. Content that exists in no record is never replaced without
//! `--force`, and even then it is first kept in the mirror as a baseline record.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use serde_json::json;

use super::commands::{record_name, select, Audit};
use super::mirror::{format_separator, Mirror, RecordKind};
use super::tree::{self, OpenError, MIRROR_DIR};
use super::AuditError;

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

fn errno(what: String) -> impl FnOnce(rustix::io::Errno) -> AuditError {
    move |e| AuditError::Io {
        what,
        source: e.into(),
    }
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
    let dest = audit.guard.resolve_no_follow(dest_input)?;
    let name = match (dest.relative.file_name(), dest.is_root()) {
        (Some(n), false) => n.to_os_string(),
        _ => return Err(AuditError::DestinationNotFile(dest_input.to_string())),
    };
    let shown = dest.display();

    let existing = match std::fs::symlink_metadata(&dest.path) {
        Ok(meta) if meta.file_type().is_file() => Some(meta),
        Ok(_) => return Err(AuditError::DestinationNotFile(dest_input.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(format!("cannot inspect '{shown}'"))(e)),
    };
    let current = match existing {
        Some(_) => {
            let mut f = tree::open_file_nofollow(&audit.root_fd, &dest.relative)
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
        let dest_mirror = match tree::read_mirror(&audit.root_fd, &dest.relative) {
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

    // Write the new content beside the destination first, so a failure leaves the workspace as it
    // was; then record it; then swap it in.
    let parent_rel = dest.relative.parent().unwrap_or(Path::new(""));
    let dir = tree::open_dir_nofollow(&audit.root_fd, parent_rel, true).map_err(open_err(
        format!("cannot open the directory of '{shown}'"),
        &shown,
    ))?;
    let mode = existing
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
        .unwrap_or(0o644);
    let tmp_name = format!(
        ".{}.audit-restore.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        now_nanos()
    );
    let tmp = rustix::fs::openat(
        &dir,
        tmp_name.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )
    .map_err(errno(format!(
        "cannot create a temporary file beside '{shown}'"
    )))?;
    let written = write_and_sync(tmp, &version)
        .map_err(io(format!(
            "cannot write a temporary file beside '{shown}'"
        )))
        .and_then(|_| {
            let keep = if unrecorded { current.as_deref() } else { None };
            record_restore(audit, &dest.relative, &shown, keep, &version)
        });
    let ids = match written {
        Ok(ids) => ids,
        Err(e) => {
            let _ = rustix::fs::unlinkat(&dir, tmp_name.as_str(), rustix::fs::AtFlags::empty());
            return Err(e);
        }
    };
    // A workspace that has a `.filesystem/` history gets the restore as a version there too (the
    // store swaps the file in itself), so `undo_file` can take the restore back.
    let history_version = if audit.root.join(crate::guard::STATE_DIRS[0]).is_dir() {
        let _ = rustix::fs::unlinkat(&dir, tmp_name.as_str(), rustix::fs::AtFlags::empty());
        let store = crate::history::Store::new(audit.guard.workspace().clone(), true);
        let report = store
            .lock()
            .and_then(|lock| store.write(&lock, &dest.relative, &version, false))
            .map_err(|e| AuditError::History(e.to_string()))?;
        report.version
    } else {
        if let Err(e) = rustix::fs::renameat(&dir, tmp_name.as_str(), &dir, name.as_os_str()) {
            let _ = rustix::fs::unlinkat(&dir, tmp_name.as_str(), rustix::fs::AtFlags::empty());
            return Err(errno(format!(
                "cannot move the restored content into '{shown}'"
            ))(e));
        }
        let _ = rustix::fs::fsync(&dir);
        None
    };

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
        human.to_string()
    };
    out.write_all(text.as_bytes())
        .map_err(io("cannot write the output".into()))?;
    Ok(0)
}

fn write_and_sync(fd: OwnedFd, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.sync_all()
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Record ids written for one restore.
struct Ids {
    baseline: Option<u64>,
    overwrite: u64,
}

/// Appends the restore to `.shelpa/<dest>` under an exclusive lock, as tee would: first a
/// baseline record of `unrecorded` (the destination's content when no record holds it, e.g. it
/// existed before any mirror or was edited outside tee), then the overwrite; a separator always
/// starts a new line, and ids are strictly greater than any already in the file.
fn record_restore(
    audit: &Audit,
    dest_rel: &Path,
    shown: &str,
    unrecorded: Option<&[u8]>,
    version: &[u8],
) -> Result<Ids, AuditError> {
    let mirror_rel = Path::new(MIRROR_DIR).join(dest_rel);
    let parent = mirror_rel.parent().unwrap_or(Path::new(MIRROR_DIR));
    let what = format!("cannot record the restore in .shelpa/{shown}");
    let dir = tree::open_dir_nofollow(&audit.root_fd, parent, true)
        .map_err(open_err(what.clone(), shown))?;
    let name = mirror_rel.file_name().unwrap_or_default();
    let fd = rustix::fs::openat(
        &dir,
        name,
        OFlags::RDWR
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => AuditError::HostileMirror {
            path: shown.to_string(),
            why: "is a symlink".into(),
        },
        other => errno(what.clone())(other),
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(errno(what.clone()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(AuditError::HostileMirror {
            path: shown.to_string(),
            why: "is not a regular file".into(),
        });
    }
    rustix::fs::flock(&fd, FlockOperation::LockExclusive).map_err(errno(what.clone()))?;
    let mut file = std::fs::File::from(fd);
    let mut existing = Vec::new();
    file.read_to_end(&mut existing).map_err(io(what.clone()))?;
    let parsed = Mirror::parse(&existing);

    let now = Utc::now();
    let mut next_id = now_nanos().max(parsed.max_id().map_or(0, |m| m.saturating_add(1)));
    let mut buf = Vec::new();
    let mut baseline = None;
    if !existing.is_empty() && !existing.ends_with(b"\n") {
        buf.push(b'\n');
    }
    if let Some(prev) = unrecorded {
        push_record(&mut buf, RecordKind::Baseline, now, next_id, prev);
        baseline = Some(next_id);
        next_id = next_id.saturating_add(1);
    }
    push_record(&mut buf, RecordKind::Overwrite, now, next_id, version);
    file.write_all(&buf).map_err(io(what.clone()))?;
    file.sync_all().map_err(io(what))?;
    Ok(Ids {
        baseline,
        overwrite: next_id,
    })
}

fn push_record(buf: &mut Vec<u8>, kind: RecordKind, ts: DateTime<Utc>, id: u64, content: &[u8]) {
    if !buf.is_empty() && !buf.ends_with(b"\n") {
        buf.push(b'\n');
    }
    buf.extend_from_slice(format_separator(kind, ts, id).as_bytes());
    buf.extend_from_slice(content);
}
