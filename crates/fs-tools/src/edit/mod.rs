//! `edit_file`: find-and-replace edits applied in order, all or nothing, answered with a unified
//! diff.
//!
//! Each `oldText` must match exactly one place. An exact substring match is tried first; only if
//! there is none does a line match that ignores leading and trailing whitespace run, and then the
//! replacement is re-indented to the file's indentation. Line endings are preserved: a CRLF file
//! is edited as LF and written back as CRLF; a missing final newline stays missing.
//!
//! Every step is bounded, because a client may send anything: both searches are linear, the
//! number and size of edits per call are capped, the diff has a time budget, and the work polls
//! the call's cancellation and time limit so that a stopped edit writes nothing.
//!
//! One job per module: this one is the tool (arguments, limits, reading, the one write);
//! `apply` applies the edits, `matching` finds where each goes, `reindent` fits replacement lines
//! to the file's indentation, `diff` draws the answer.

mod apply;
mod diff;
mod matching;
mod reindent;

use std::io::Read;

use serde_json::{Map, Value};

use super::error::FsError;
use super::target;
use super::write::{restore_mode, summary};
use super::{reject_unknown, FsContext};
use apply::{apply_edits, Edit, EditError};
use diff::{fence, unified_diff};
use mcp_core::toolset::{Args, CallContext, Stop, ToolOutput};

/// The largest file `edit_file` loads. Larger than `--max-read-bytes` on purpose: editing a big
/// file returns only a diff, not the file.
const MAX_EDIT_BYTES: u64 = 256 * 1024 * 1024;

/// The most edits one call takes. Each edit is applied to the whole text in turn, so a call
/// costs about edits × file size; a hundred covers any one coherent change, and more belongs in
/// several calls (or one `write_file`).
pub const MAX_EDITS: usize = 100;

/// The most `oldText` plus `newText` bytes, over all edits, one call takes: sixteen times the
/// largest edit the matching is tuned for (1 MiB), far below the message size limit, so one
/// call's memory stays a small multiple of the file's.
pub const MAX_EDIT_TEXT_BYTES: usize = 16 * 1024 * 1024;

/// Polls the call's cancellation and time limit every so much work: loops over lines count
/// their steps and read the clock once per [`Poll::EVERY`], so a stop is noticed within
/// milliseconds while the check costs nothing measurable.
pub struct Poll<'a> {
    ctx: &'a CallContext,
    done: usize,
}

impl<'a> Poll<'a> {
    /// Steps (lines) between two checks.
    const EVERY: usize = 1 << 16;

    /// A poller for `ctx`.
    pub fn new(ctx: &'a CallContext) -> Self {
        Poll { ctx, done: 0 }
    }

    /// Checks now (between phases).
    pub fn now(&mut self) -> Result<(), Stop> {
        self.done = 0;
        self.ctx.check()
    }

    /// Counts `steps` of work, checking once enough have been done since the last check.
    pub fn work(&mut self, steps: usize) -> Result<(), Stop> {
        self.done += steps;
        if self.done >= Self::EVERY {
            self.now()
        } else {
            Ok(())
        }
    }
}

/// `edit_file`.
pub fn edit_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", "edits", "dryRun"])?;
    let a = Args(args);
    let path = a.str("path")?;
    let dry_run = a.opt_bool("dryRun")?.unwrap_or(false);
    let edits = parse_edits(a.opt_array("edits")?)?;

    // The lock spans read-modify-write so a concurrent writer cannot be overwritten unseen; a dry
    // run changes nothing and must not even create the store.
    let lock = if dry_run { None } else { Some(cx.lock(ctx)?) };
    let target = target::writable(cx, path)?;
    let shown = target.resolved.display();
    let stopped = |stop| FsError::Stopped {
        stop,
        what: format!("edit_file on '{shown}'"),
    };
    if target.existing_mode.is_none() {
        return Err(FsError::NotFound(format!(
            "'{shown}' does not exist; create it with create_file"
        )));
    }
    let original = read_text(cx, &target.resolved)?;
    ctx.check().map_err(stopped)?;
    let crlf = is_crlf(&original);
    let normalized = if crlf {
        original.replace("\r\n", "\n")
    } else {
        original
    };
    let edited = apply_edits(
        &normalized,
        &edits,
        MAX_EDIT_BYTES as usize,
        &mut Poll::new(ctx),
    )
    .map_err(|e| match e {
        EditError::Stopped(stop) => stopped(stop),
        EditError::NotFound { .. } => FsError::NotFound(format!("in '{shown}', {e}")),
        _ => FsError::InvalidArgument(format!("in '{shown}', {e}")),
    })?;
    let diff = unified_diff(&normalized, &edited, &shown, ctx).map_err(stopped)?;
    let fenced = fence(&diff);
    let count = edits.len();
    let plural = if count == 1 { "" } else { "s" };
    let Some(lock) = lock else {
        return Ok(ToolOutput::text(format!(
            "Dry run: {count} edit{plural} to {shown} would change it as follows (nothing was written)\n{fenced}"
        )));
    };
    if edited == normalized {
        return Ok(ToolOutput::text(format!(
            "{shown} unchanged: the edits replace text with identical text"
        )));
    }
    let content = if crlf {
        edited.replace('\n', "\r\n")
    } else {
        edited
    };
    // The last moment to stop: past this the write commits.
    ctx.check().map_err(stopped)?;
    let report = cx
        .store
        .write(&lock, &target.resolved.relative, content.as_bytes(), false)?;
    let note = restore_mode(cx, &target);
    let line = summary(
        &format!("Edited ({count} edit{plural})"),
        &target.resolved.relative,
        &report,
        &note,
    );
    Ok(ToolOutput::text(format!("{line}\n{fenced}")))
}

fn parse_edits(raw: Option<&Vec<Value>>) -> Result<Vec<Edit>, FsError> {
    let raw = raw.ok_or_else(|| {
        FsError::InvalidArgument(
            "missing required argument 'edits': an array of {oldText, newText}".into(),
        )
    })?;
    if raw.is_empty() {
        return Err(FsError::InvalidArgument(
            "'edits' is empty; give at least one {oldText, newText}".into(),
        ));
    }
    if raw.len() > MAX_EDITS {
        return Err(FsError::InvalidArgument(format!(
            "'edits' has {} edits, more than the {MAX_EDITS} one call takes; split them over several edit_file calls (each applies all or nothing), or rewrite the file with write_file",
            raw.len()
        )));
    }
    let mut total = 0usize;
    raw.iter()
        .enumerate()
        .map(|(i, item)| {
            let index = i + 1;
            let obj = item.as_object().ok_or_else(|| {
                FsError::InvalidArgument(format!(
                    "edits[{i}] must be an object {{oldText, newText}}"
                ))
            })?;
            Args(obj)
                .check_names(&["oldText", "newText"])
                .map_err(|e| FsError::InvalidArgument(format!("edit {index}: {e}")))?;
            let field = |name: &str| {
                Args(obj).str(name).map_err(|e| {
                    FsError::InvalidArgument(format!("edit {index}: {e}"))
                })
            };
            let (old_text, new_text) = (field("oldText")?, field("newText")?);
            total = total
                .saturating_add(old_text.len())
                .saturating_add(new_text.len());
            if total > MAX_EDIT_TEXT_BYTES {
                return Err(FsError::InvalidArgument(format!(
                    "the edits' oldText and newText come to more than the {MAX_EDIT_TEXT_BYTES} bytes one call takes (passed at edit {index}); split them over several edit_file calls, or rewrite the file with write_file"
                )));
            }
            Ok(Edit {
                old_text: old_text.replace("\r\n", "\n"),
                new_text: new_text.replace("\r\n", "\n"),
            })
        })
        .collect()
}

fn read_text(cx: &FsContext, resolved: &workspace::guard::Resolved) -> Result<String, FsError> {
    let file = target::open_for_reading(&cx.guard, resolved)?;
    let len = file
        .metadata()
        .map_err(|e| target::io_error("cannot inspect", &resolved.relative, e))?
        .len();
    if len > MAX_EDIT_BYTES {
        return Err(FsError::InvalidArgument(format!(
            "'{}' is {len} bytes, more than the {MAX_EDIT_BYTES} bytes edit_file loads; split the file or rewrite it with write_file",
            resolved.display()
        )));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| target::io_error("cannot read", &resolved.relative, e))?;
    super::read::into_text(bytes, resolved, "edit_file only edits text")
}

/// True when CRLF line breaks outnumber bare LF ones.
fn is_crlf(text: &str) -> bool {
    // One vectorised pass over the line breaks; this runs on every edit of every file.
    let bytes = text.as_bytes();
    let (mut lf, mut crlf) = (0usize, 0usize);
    for at in memchr::memchr_iter(b'\n', bytes) {
        lf += 1;
        if at > 0 && bytes[at - 1] == b'\r' {
            crlf += 1;
        }
    }
    crlf > 0 && crlf * 2 > lf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_is_detected_by_majority() {
        assert!(is_crlf("a\r\nb\r\n"));
        assert!(!is_crlf("a\nb\nc\r\n"));
        assert!(!is_crlf("plain"));
    }
}
