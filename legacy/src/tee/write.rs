//! Writing the targets of a tee: each one checked again, recorded in its mirror, then appended
//! to or replaced.

use std::io::{self, Write};
use std::path::PathBuf;

use rustix::fs::OFlags;

use super::record::TargetMirror;
use super::target::{check_target, open_regular, recheck, Target};
use super::{TeeError, TeeMode, TeeReport};
use workspace::guard::display_relative;
use workspace::history::StoreLock;
use workspace::mirror::MIRROR_DIR;
use workspace::permissions::Permissions;
use workspace::{is_swap, Workspace};

/// Writes `data` to every target and its mirror, unless `permissions` refuse any of them, under the
/// history store's `lock` (whose operation-log entry records each target). The gate must already have been passed; `data`
/// is already cut to the hard limit (`truncated` says whether it was). Targets are root-relative
/// (see [`relative_target`](super::relative_target)); every operation goes through the workspace layer, relative to
/// directory descriptors opened beneath the root, so a directory swapped for a symlink after the
/// policy looked makes the write fail instead of landing elsewhere.
pub fn commit(
    ws: &Workspace,
    permissions: &Permissions,
    lock: &StoreLock,
    targets: &[PathBuf],
    data: &[u8],
    mode: TeeMode,
    truncated: bool,
) -> Result<TeeReport, TeeError> {
    // Check every target before writing any, so a bad second target does not leave a half-done
    // tee behind.
    let mut checked = Vec::with_capacity(targets.len());
    for target in targets {
        let target = check_target(target)?;
        // The operator's rules, checked in the call that writes, on the path it writes: the
        // policy's look happened before the pipeline ran.
        permissions
            .check(&target.relative)
            .map_err(TeeError::ReadOnly)?;
        checked.push(target);
    }
    let mut report = TeeReport {
        paths: Vec::new(),
        bytes: data.len() as u64,
        mode,
        mirror: Vec::new(),
        truncated,
    };
    for target in &checked {
        // Before the change, so the operation log records what was there.
        lock.touch(&target.relative);
        write_one(ws, target, data, mode)?;
        report.paths.push(display_relative(&target.relative));
        report.mirror.push(format!(
            "{MIRROR_DIR}/{}",
            target.relative.to_string_lossy()
        ));
    }
    Ok(report)
}

/// Writes one checked target and records it in its mirror.
fn write_one(ws: &Workspace, target: &Target, data: &[u8], mode: TeeMode) -> Result<(), TeeError> {
    let shown_path = display_relative(&target.relative);
    let io_err = |op: &'static str| {
        let path = shown_path.clone();
        move |source: io::Error| TeeError::Io { op, path, source }
    };
    let dir = ws.dir(&target.parent).map_err(|e| {
        if is_swap(&e) {
            TeeError::Escape(shown_path.clone())
        } else if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) {
            TeeError::NoDirectory(shown_path.clone())
        } else {
            TeeError::Io {
                op: "open the directory of",
                path: shown_path.clone(),
                source: e,
            }
        }
    })?;
    // The re-check that closes the window since the policy looked.
    let existing = dir.stat(&target.name).map_err(io_err("inspect"))?;
    if let Some(st) = &existing {
        recheck(st, &shown_path, mode)?;
    }

    let mut mirror = TargetMirror::open(ws, target)?;
    if mirror.is_empty()? && existing.is_some() {
        let mut old = open_regular(&dir, &target.name, OFlags::RDONLY, &shown_path, mode)?;
        mirror.baseline(&mut old)?;
    }

    match mode {
        TeeMode::Append => {
            let mut file = open_regular(
                &dir,
                &target.name,
                OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
                &shown_path,
                mode,
            )?;
            mirror.append(data)?;
            file.write_all(data).map_err(io_err("append to"))?;
        }
        TeeMode::Overwrite => {
            // The record goes into the mirror before the file changes: if the replacement then
            // fails, the mirror holds a record of an attempt, which an auditor can see through;
            // the other order could leave a change the audit never saw. The replacement is the
            // layer's one temporary-file scheme (a `.filesystem-tmp-` file beside the target,
            // synced, renamed into place), which replaces a hard link instead of writing
            // through it and keeps the old permission bits.
            mirror.overwrite(data)?;
            let keep_mode = existing.map(|st| st.mode);
            dir.replace_file(&target.name, data, keep_mode, false)
                .map_err(io_err("replace"))?;
        }
    }
    Ok(())
}
