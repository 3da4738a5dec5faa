//! `read_text_file`: the whole text, or its first or last lines, read through a handle the
//! kernel opened beneath the root. Binary content and files too large to return whole are
//! refused with a hint, because either would only flood the model's context.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use serde_json::{json, Map, Value};

use mcp_core::budget::{thousands, ResultBudget};

use super::error::FsError;
use super::target;
use super::{reject_unknown, FsContext};
use mcp_core::toolset::{Args, CallContext, ToolOutput};
use workspace::guard::Resolved;

/// How much `tail` reads per step backwards from the end.
const TAIL_CHUNK: u64 = 64 * 1024;

/// `read_text_file`.
pub fn read_text_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", "head", "tail", "offset", "limit"])?;
    let a = Args(args);
    let path = a.str("path")?;
    // As in the reference server, 0 means "not given": agents send `head: 0` for "no limit".
    let head = a.opt_u64("head")?.filter(|&n| n > 0);
    let tail = a.opt_u64("tail")?.filter(|&n| n > 0);
    let offset = a.opt_u64("offset")?.filter(|&n| n > 0);
    let count = a.opt_u64("limit")?.filter(|&n| n > 0);
    if head.is_some() && tail.is_some() {
        return Err(FsError::InvalidArgument(
            "'head' and 'tail' cannot be used together; read the start with head, or the end with tail, in separate calls".into(),
        ));
    }
    if (offset.is_some() || count.is_some()) && (head.is_some() || tail.is_some()) {
        return Err(FsError::InvalidArgument(
            "'offset'/'limit' cannot be combined with 'head' or 'tail'; use offset and limit alone (offset=1 with limit=N reads what head=N reads), or head or tail alone".into(),
        ));
    }
    let (resolved, mut file, meta) = target::open_regular_for_reading(
        &cx.guard,
        path,
        "use list_directory or directory_tree to see what is in it",
    )?;
    let limit = cx.options.max_read_bytes;
    let budget = cx.options.result_budget;
    let what = || format!("read_text_file of '{}'", resolved.display());
    if offset.is_some() || count.is_some() {
        let first = offset.unwrap_or(1);
        return read_lines(&mut file, first, count, budget, &resolved, ctx);
    }
    let bytes = match (head, tail) {
        (Some(n), _) => read_head(&mut file, n, limit, &resolved)?,
        (_, Some(n)) => read_tail(&mut file, meta.len(), n, limit, &resolved, ctx)?,
        _ => {
            if meta.len() > limit {
                return Err(FsError::InvalidArgument(format!(
                    "'{}' is {} bytes, more than the {limit} bytes returned whole; read part of it with offset and limit, or head or tail (line counts)",
                    resolved.display(),
                    meta.len()
                )));
            }
            // A file larger than one answer is read a page at a time from its first line; one
            // that fits is read whole, as before paging existed, at no extra cost.
            if meta.len() > budget.bytes() as u64 {
                return read_lines(&mut file, 1, None, budget, &resolved, ctx);
            }
            let mut buf = Vec::with_capacity(meta.len() as usize);
            file.by_ref()
                .take(limit + 1)
                .read_to_end(&mut buf)
                .map_err(|e| target::io_error("cannot read", &resolved.relative, e))?;
            if buf.len() as u64 > limit {
                return Err(FsError::InvalidArgument(format!(
                    "'{}' grew past {limit} bytes while being read; read part of it with offset and limit, or head or tail",
                    resolved.display()
                )));
            }
            buf
        }
    };
    // A read that ran past the limit (a slow disk, a huge tail walk) is answered as stopped
    // rather than late; the clock read costs nothing next to the read itself.
    FsError::check(ctx, what)?;
    if bytes.len() > budget.bytes() {
        // head or tail asked for more lines than one answer carries: the same lines, from the
        // first of them, a page at a time.
        let first = match tail {
            Some(_) => {
                let total = count_lines(&mut file, &resolved, ctx)?;
                let shown = lines_in(&bytes);
                total.saturating_sub(shown) + 1
            }
            None => 1,
        };
        let wanted = lines_in(&bytes);
        return read_lines(&mut file, first, Some(wanted), budget, &resolved, ctx);
    }
    let text = into_text(bytes, &resolved, "this tool only returns text")?;
    Ok(ToolOutput::text(text))
}

/// How many lines `bytes` holds: its line endings, and one more for a last line without one.
fn lines_in(bytes: &[u8]) -> u64 {
    let ends = memchr::memchr_iter(b'\n', bytes).count() as u64;
    ends + u64::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// The lines of the file from line `first` (1-based), at most `count` of them, as many as fit in
/// the result budget. A cut answer ends with a note naming the lines shown and the `offset` that
/// continues it, and carries the same in its structured content (`next_offset`, `total_lines`);
/// a line longer than the whole budget is shown cut within itself, and said so.
///
/// Only what is shown is held in memory: the lines before `first` and after the page are
/// counted, not kept.
fn read_lines(
    file: &mut File,
    first: u64,
    count: Option<u64>,
    budget: ResultBudget,
    resolved: &Resolved,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    let io = |e| target::io_error("cannot read", &resolved.relative, e);
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut reader = BufReader::with_capacity(LINE_CHUNK, &mut *file);
    let before = skip_lines(&mut reader, first - 1, resolved, ctx)?;
    let room = budget.for_entries();
    let mut out = Vec::new();
    let mut taken = 0u64;
    // Set when the answer stops before the lines asked for are all shown.
    let mut cut = None;
    while count.is_none_or(|c| taken < c) {
        let start = out.len();
        let left = (room - start) as u64;
        let read = (&mut reader)
            .take(left + 1)
            .read_until(b'\n', &mut out)
            .map_err(io)?;
        if read == 0 {
            break;
        }
        let whole = out.ends_with(b"\n") && out.len() <= room;
        if whole || (out.len() <= room && read as u64 <= left && !out.ends_with(b"\n")) {
            // A whole line, or the last line of the file without a line ending.
            taken += 1;
            continue;
        }
        if taken > 0 {
            out.truncate(start);
            cut = Some(Cut::AtLine);
        } else {
            // Not even this one line fits: it is shown cut within itself.
            let keep = floor_utf8(&out, room);
            let line_bytes = if out.ends_with(b"\n") {
                read as u64
            } else {
                read as u64 + count_to_line_end(&mut reader, resolved, ctx)?
            };
            out.truncate(keep);
            taken = 1;
            cut = Some(Cut::WithinLine {
                shown: keep as u64,
                of: line_bytes,
            });
        }
        break;
    }
    drop(reader);
    if taken == 0 && first > 1 {
        return Err(FsError::InvalidArgument(format!(
            "'offset' is {first}, past the last line of '{}' ({} lines); give an offset from 1 to {}",
            resolved.display(),
            thousands(before),
            thousands(before.max(1))
        )));
    }
    FsError::check(ctx, || {
        format!("read_text_file of '{}'", resolved.display())
    })?;
    let Some(cut) = cut else {
        let text = into_text(out, resolved, "this tool only returns text")?;
        return Ok(ToolOutput::text(text));
    };
    let last = first + taken - 1;
    let total = count_lines(file, resolved, ctx)?;
    // Cut on a character boundary, so the part of a long line shown is text if the line is.
    let mut text = into_text(out, resolved, "this tool only returns text")?;
    let next = last + 1;
    let note = match cut {
        Cut::AtLine => format!(
            "[lines {}–{} of {} shown; continue with offset={next}]",
            thousands(first),
            thousands(last),
            thousands(total)
        ),
        Cut::WithinLine { shown, of } => {
            text.push('\n');
            format!(
                "[line {} of {} is {} bytes, longer than the result budget of {} bytes: its first {} bytes shown; the rest of this line cannot be shown in one answer (raise --max-result-bytes, or search it with search_content); {then}]",
                thousands(first),
                thousands(total),
                thousands(of),
                thousands(budget.bytes() as u64),
                thousands(shown),
                then = if next <= total {
                    format!("continue with offset={next}")
                } else {
                    "it is the last line of the file".to_string()
                }
            )
        }
    };
    text.push_str(&note);
    let structured = json!({
        "truncated": true,
        "first_line": first,
        "last_line": last,
        "total_lines": total,
        "next_offset": if next <= total { json!(next) } else { Value::Null },
        "line_cut": matches!(cut, Cut::WithinLine { .. }),
    });
    Ok(ToolOutput::structured(text, structured))
}

/// Where a page of lines was cut.
#[derive(Clone, Copy)]
enum Cut {
    /// After the last whole line that fits.
    AtLine,
    /// Within a line longer than the budget: `shown` of its `of` bytes.
    WithinLine { shown: u64, of: u64 },
}

/// How much a line read reads per step.
const LINE_CHUNK: usize = 64 * 1024;

/// Skips `n` lines; returns how many there were (fewer at the end of the file; a last line
/// without a line ending counts).
fn skip_lines(
    reader: &mut impl BufRead,
    n: u64,
    resolved: &Resolved,
    ctx: &CallContext,
) -> Result<u64, FsError> {
    let mut skipped = 0u64;
    let mut last = b'\n';
    while skipped < n {
        let buf = next_chunk(reader, resolved, ctx)?;
        if buf.is_empty() {
            skipped += u64::from(last != b'\n');
            break;
        }
        let mut used = buf.len();
        for i in memchr::memchr_iter(b'\n', buf) {
            skipped += 1;
            if skipped == n {
                used = i + 1;
                break;
            }
        }
        last = buf[used - 1];
        reader.consume(used);
    }
    Ok(skipped)
}

/// The reader's next buffered bytes (empty at the end), once the call may still go on: both
/// line scanners stop here when the call is cancelled or past its time.
fn next_chunk<'r>(
    reader: &'r mut impl BufRead,
    resolved: &Resolved,
    ctx: &CallContext,
) -> Result<&'r [u8], FsError> {
    FsError::check(ctx, || {
        format!("read_text_file of '{}'", resolved.display())
    })?;
    reader
        .fill_buf()
        .map_err(|e| target::io_error("cannot read", &resolved.relative, e))
}

/// Bytes to the end of the current line (its line ending included), consuming them.
fn count_to_line_end(
    reader: &mut impl BufRead,
    resolved: &Resolved,
    ctx: &CallContext,
) -> Result<u64, FsError> {
    let mut bytes = 0u64;
    loop {
        let buf = next_chunk(reader, resolved, ctx)?;
        if buf.is_empty() {
            return Ok(bytes);
        }
        if let Some(i) = memchr::memchr(b'\n', buf) {
            reader.consume(i + 1);
            return Ok(bytes + i as u64 + 1);
        }
        let n = buf.len();
        bytes += n as u64;
        reader.consume(n);
    }
}

/// How many lines the whole file has: its line endings, and one more for a last line without
/// one. Counted only when an answer is cut, for the note's "of N".
fn count_lines(file: &mut File, resolved: &Resolved, ctx: &CallContext) -> Result<u64, FsError> {
    let io = |e| target::io_error("cannot read", &resolved.relative, e);
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut reader = BufReader::with_capacity(LINE_CHUNK, &mut *file);
    let mut lines = 0u64;
    let mut last = b'\n';
    loop {
        FsError::check(ctx, || {
            format!("read_text_file of '{}'", resolved.display())
        })?;
        let buf = reader.fill_buf().map_err(io)?;
        if buf.is_empty() {
            return Ok(lines + u64::from(last != b'\n'));
        }
        lines += memchr::memchr_iter(b'\n', buf).count() as u64;
        last = buf[buf.len() - 1];
        let n = buf.len();
        reader.consume(n);
    }
}

/// The longest prefix of `bytes` of at most `at` bytes that does not end inside a UTF-8
/// character.
fn floor_utf8(bytes: &[u8], at: usize) -> usize {
    let mut at = at.min(bytes.len());
    // At most three continuation bytes precede a character's end.
    for _ in 0..3 {
        if at == 0 || at == bytes.len() || (bytes[at] & 0xC0) != 0x80 {
            break;
        }
        at -= 1;
    }
    at
}

/// Text or `InvalidArgument`: a NUL byte or invalid UTF-8 means the file is binary.
///
/// Shared by `read_text_file`, `read_multiple_files` and `edit_file`, which refuse a binary file in the same words;
/// `only` ends the message with what the calling tool does ("this tool only returns text",
/// "edit_file only edits text").
pub(crate) fn into_text(
    bytes: Vec<u8>,
    resolved: &Resolved,
    only: &str,
) -> Result<String, FsError> {
    let binary = || {
        FsError::InvalidArgument(format!(
            "'{}' is not UTF-8 text (it looks binary); {only}",
            resolved.display()
        ))
    };
    if bytes.contains(&0) {
        return Err(binary());
    }
    String::from_utf8(bytes).map_err(|_| binary())
}

fn too_long(resolved: &Resolved, limit: u64) -> FsError {
    FsError::InvalidArgument(format!(
        "the requested lines of '{}' are more than {limit} bytes; ask for fewer lines",
        resolved.display()
    ))
}

/// The first `n` lines, each with its line ending, reading no further than needed.
fn read_head(file: &mut File, n: u64, limit: u64, resolved: &Resolved) -> Result<Vec<u8>, FsError> {
    let mut reader = BufReader::with_capacity(64 * 1024, file.take(limit + 1));
    let mut out = Vec::new();
    for _ in 0..n {
        let read = reader
            .read_until(b'\n', &mut out)
            .map_err(|e| target::io_error("cannot read", &resolved.relative, e))?;
        if read == 0 {
            break;
        }
    }
    if out.len() as u64 > limit {
        return Err(too_long(resolved, limit));
    }
    Ok(out)
}

/// The last `n` lines, found by reading backwards from the end in chunks so a huge log costs
/// only what is returned. A final newline ends the last line; it does not start an empty one.
fn read_tail(
    file: &mut File,
    len: u64,
    n: u64,
    limit: u64,
    resolved: &Resolved,
    ctx: &CallContext,
) -> Result<Vec<u8>, FsError> {
    let io = |e| target::io_error("cannot read", &resolved.relative, e);
    // Chunks are collected back to front and joined once at the end.
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut end = len;
    let mut newlines = 0u64;
    let mut total = 0u64;
    let mut start_in_first: Option<usize> = None;
    'outer: while end > 0 {
        FsError::check(ctx, || {
            format!("read_text_file of '{}'", resolved.display())
        })?;
        let begin = end.saturating_sub(TAIL_CHUNK);
        let mut chunk = vec![0u8; (end - begin) as usize];
        file.seek(SeekFrom::Start(begin)).map_err(io)?;
        file.read_exact(&mut chunk).map_err(io)?;
        for i in (0..chunk.len()).rev() {
            let absolute = begin + i as u64;
            if chunk[i] == b'\n' && absolute + 1 != len {
                newlines += 1;
                if newlines == n {
                    start_in_first = Some(i + 1);
                    total += (chunk.len() - i - 1) as u64;
                    chunks.push(chunk);
                    break 'outer;
                }
            }
        }
        total += chunk.len() as u64;
        if total > limit {
            return Err(too_long(resolved, limit));
        }
        chunks.push(chunk);
        end = begin;
    }
    if total > limit {
        return Err(too_long(resolved, limit));
    }
    let mut out = Vec::with_capacity(total as usize);
    for (i, chunk) in chunks.iter().enumerate().rev() {
        let from = if i == chunks.len() - 1 {
            start_in_first.unwrap_or(0)
        } else {
            0
        };
        out.extend_from_slice(&chunk[from..]);
    }
    Ok(out)
}
