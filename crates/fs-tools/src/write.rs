//! `create_file`, `write_file` and `create_directory`: whole-file writes through the history
//! store (atomic, recorded, undoable) and race-free directory creation.

use std::path::Path;

use serde_json::{Map, Value};

use super::error::FsError;
use super::target::{self, WriteTarget};
use super::{reject_unknown, FsContext};
use mcp_core::toolset::{Args, CallContext, ToolOutput};
use workspace::guard::display_relative;
use workspace::history::{StoreLock, WriteReport};

/// The one line a writing tool answers with: what happened, to which path, how many bytes, and
/// the version the write became when history is kept.
pub fn summary(verb: &str, relative: &Path, report: &WriteReport, note: &str) -> String {
    let mut line = format!(
        "{verb} {}: {} bytes",
        display_relative(relative),
        report.bytes
    );
    if let Some(v) = report.version {
        line.push_str(&format!(", version {v}"));
    }
    line.push_str(note);
    line
}

/// Creates the missing parents of a file about to be written.
fn make_parents(cx: &FsContext, lock: &StoreLock, relative: &Path) -> Result<(), FsError> {
    if let Some(parent) = relative.parent() {
        target::make_dirs(&cx.store, lock, parent)?;
    }
    Ok(())
}

/// Puts the intended permission bits on a file the store just wrote. A failure does not undo
/// the write (the content is safely in place); it is reported on the answer line instead.
pub fn restore_mode(cx: &FsContext, target: &WriteTarget) -> String {
    let mode = target.existing_mode.unwrap_or_else(target::new_file_mode);
    match target::set_mode(&cx.guard, &target.resolved, mode) {
        Ok(()) => String::new(),
        Err(e) => format!(" (content written, but permissions {mode:o} not set: {e})"),
    }
}

/// The arguments of `create_file` and `write_file`, which take exactly the same two: checked
/// alike so that both tools refuse a stray or missing argument in the same words.
fn path_and_content(args: &Map<String, Value>) -> Result<(&str, &str), FsError> {
    reject_unknown(args, &["path", "content"])?;
    let a = Args(args);
    Ok((a.str("path")?, a.str("content")?))
}

/// `create_file`: a new file (and its missing parents); anything already at the path is
/// `AlreadyExists`, so it can never clobber work.
pub fn create_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    let (path, content) = path_and_content(args)?;
    let lock = cx.lock(ctx)?;
    let resolved = cx.guard.resolve_for_change(path)?;
    if let Some(meta) = target::inspect(&cx.guard, &resolved)? {
        return Err(FsError::AlreadyExists(format!(
            "'{}' already exists ({}); use write_file or edit_file to change a file, or choose a new path",
            resolved.display(),
            target::kind_name(&meta)
        )));
    }
    if resolved.is_root() {
        return Err(FsError::AlreadyExists(
            "the workspace root already exists; name a file inside it".into(),
        ));
    }
    // The last moment to stop: from here on the call changes the workspace.
    FsError::check(ctx, || format!("create_file of '{}'", resolved.display()))?;
    make_parents(cx, &lock, &resolved.relative)?;
    let report = cx
        .store
        .write(&lock, &resolved.relative, content.as_bytes(), true)?;
    let target = WriteTarget {
        resolved,
        existing_mode: None,
    };
    Ok(written(cx, &target, "Created", &report))
}

/// `write_file`: creates or replaces a whole file, atomically, keeping its permissions.
pub fn write_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    let (path, content) = path_and_content(args)?;
    let lock = cx.lock(ctx)?;
    let target = target::writable(cx, path)?;
    // The last moment to stop: from here on the call changes the workspace.
    FsError::check(ctx, || {
        format!("write_file of '{}'", target.resolved.display())
    })?;
    if target.existing_mode.is_none() {
        make_parents(cx, &lock, &target.resolved.relative)?;
    }
    let report = cx
        .store
        .write(&lock, &target.resolved.relative, content.as_bytes(), false)?;
    let verb = if report.created { "Created" } else { "Wrote" };
    Ok(written(cx, &target, verb, &report))
}

/// The end of a whole-file write, shared by `create_file` and `write_file`: puts the mode back
/// (or gives the new file its default) and answers with the one-line summary.
fn written(cx: &FsContext, target: &WriteTarget, verb: &str, report: &WriteReport) -> ToolOutput {
    let note = restore_mode(cx, target);
    ToolOutput::text(summary(verb, &target.resolved.relative, report, &note))
}

/// `create_directory`: `mkdir -p` that never creates through a symlink; an existing directory
/// is success, anything else at the path is `AlreadyExists`.
pub fn create_directory(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path"])?;
    let path = Args(args).str("path")?;
    let lock = cx.lock(ctx)?;
    let resolved = cx.guard.resolve_for_change(path)?;
    if resolved.is_root() {
        return Ok(ToolOutput::text(
            "Directory . already exists (the workspace root)",
        ));
    }
    match target::inspect(&cx.guard, &resolved)? {
        None => {}
        Some(meta) if meta.is_dir() => {
            return Ok(ToolOutput::text(format!(
                "Directory {} already exists",
                resolved.display()
            )))
        }
        Some(meta) if meta.is_symlink() => {
            return Err(FsError::InvalidArgument(format!(
                "'{}' is a symbolic link; directories are never created through links, use the real path",
                resolved.display()
            )))
        }
        Some(meta) => {
            return Err(FsError::AlreadyExists(format!(
                "'{}' already exists and is {}, not a directory; choose another path",
                resolved.display(),
                target::kind_name(&meta)
            )))
        }
    }
    FsError::check(ctx, || {
        format!("create_directory of '{}'", resolved.display())
    })?;
    let created = target::make_dirs(&cx.store, &lock, &resolved.relative)?;
    Ok(ToolOutput::text(if created {
        format!("Created directory {}", resolved.display())
    } else {
        format!("Directory {} already exists", resolved.display())
    }))
}
