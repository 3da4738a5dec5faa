//! `append_file` (opt-in): bytes added at the end of a file, exactly as given (no newline added),
//! the file created if it does not exist. Done as a whole-file write through the history store
//! (the old content and the new bytes, to a temporary renamed into place), so a crash leaves the
//! old or the new content, never a torn one, a hard link is replaced rather than written through,
//! and under `--backup` the result is a new version.

use serde_json::{json, Map, Value};

use super::error::FsError;
use super::schema::{object, path_property};
use super::target;
use super::tools::APPEND_FILE;
use super::write::{restore_mode, summary};
use super::{reject_unknown, FsContext};
use mcp_core::toolset::{Args, CallContext, Effects, ToolDef, ToolOutput};

/// The largest file an append may leave: each append rewrites the whole file (that is what
/// makes it atomic), so a file past this size is better split or written with write_file.
pub const MAX_APPEND_RESULT: u64 = 64 * 1024 * 1024;

/// The definition of `append_file`.
pub fn definition() -> ToolDef {
    ToolDef {
        name: APPEND_FILE.into(),
        title: "Append to File".into(),
        description: format!(
            "Append text to the end of a file exactly as given (no newline is added: end `content` with one if the next \
             append should start a line). Creates the file (and missing parent directories) if it does not exist. \
             Atomic like every write; with version history the result is a new version. Files up to {} MiB.",
            MAX_APPEND_RESULT / (1024 * 1024)
        ),
        input_schema: object(
            json!({
                "path": path_property("The file to append to"),
                "content": {"type": "string", "description": "The text to add at the end"},
            }),
            &["path", "content"],
        ),
        output_schema: None,
        effects: Effects {
            read_only: false,
            destructive: false,
            idempotent: false,
        },
    }
}

/// `append_file`.
pub fn append_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", "content"])?;
    let a = Args(args);
    let (path, content) = (a.str("path")?, a.str("content")?);
    let lock = cx.lock(ctx)?;
    let target = target::writable(cx, path)?;
    let rel = &target.resolved.relative;
    let ws = cx.guard.workspace();
    let mut data = match target.existing_mode {
        Some(_) => ws
            .read(rel)
            .map_err(|e| target::io_error("cannot read", rel, e))?,
        None => Vec::new(),
    };
    let total = data.len() as u64 + content.len() as u64;
    if total > MAX_APPEND_RESULT {
        return Err(FsError::InvalidArgument(format!(
            "appending would make '{}' {total} bytes, more than the {} MiB an append rewrites atomically; start a new file, or use write_file",
            target.resolved.display(),
            MAX_APPEND_RESULT / (1024 * 1024)
        )));
    }
    // The last moment to stop: from here on the call changes the workspace.
    FsError::check(ctx, || {
        format!("append_file to '{}'", target.resolved.display())
    })?;
    if target.existing_mode.is_none() {
        if let Some(parent) = rel.parent() {
            target::make_dirs(&cx.store, &lock, parent)?;
        }
    }
    let before = data.len();
    data.extend_from_slice(content.as_bytes());
    let report = cx.store.write(&lock, rel, &data, false)?;
    let note = restore_mode(cx, &target);
    let verb = if report.created {
        "Created"
    } else {
        "Appended to"
    };
    let line = summary(verb, rel, &report, &note);
    Ok(ToolOutput::text(format!(
        "{line} ({} bytes added after {before})",
        content.len()
    )))
}
