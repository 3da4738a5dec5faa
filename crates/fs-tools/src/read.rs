//! `read_text_file`: the whole text, or its first or last lines, read through a handle the
//! kernel opened beneath the root. Binary content and files too large to return whole are
//! refused with a hint, because either would only flood the model's context.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use serde_json::{Map, Value};

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
    reject_unknown(args, &["path", "head", "tail"])?;
    let a = Args(args);
    let path = a.str("path")?;
    // As in the reference server, 0 means "not given": agents send `head: 0` for "no limit".
    let head = a.opt_u64("head")?.filter(|&n| n > 0);
    let tail = a.opt_u64("tail")?.filter(|&n| n > 0);
    if head.is_some() && tail.is_some() {
        return Err(FsError::InvalidArgument(
            "'head' and 'tail' cannot be used together; read the start with head, or the end with tail, in separate calls".into(),
        ));
    }
    let (resolved, mut file, meta) = target::open_regular_for_reading(
        &cx.guard,
        path,
        "use list_directory or directory_tree to see what is in it",
    )?;
    let limit = cx.options.max_read_bytes;
    let bytes = match (head, tail) {
        (Some(n), _) => read_head(&mut file, n, limit, &resolved)?,
        (_, Some(n)) => read_tail(&mut file, meta.len(), n, limit, &resolved, ctx)?,
        _ => {
            if meta.len() > limit {
                return Err(FsError::InvalidArgument(format!(
                    "'{}' is {} bytes, more than the {limit} bytes returned whole; read part of it with head or tail (line counts)",
                    resolved.display(),
                    meta.len()
                )));
            }
            let mut buf = Vec::with_capacity(meta.len() as usize);
            file.by_ref()
                .take(limit + 1)
                .read_to_end(&mut buf)
                .map_err(|e| target::io_error("cannot read", &resolved.relative, e))?;
            if buf.len() as u64 > limit {
                return Err(FsError::InvalidArgument(format!(
                    "'{}' grew past {limit} bytes while being read; read part of it with head or tail",
                    resolved.display()
                )));
            }
            buf
        }
    };
    // A read that ran past the limit (a slow disk, a huge tail walk) is answered as stopped
    // rather than late; the clock read costs nothing next to the read itself.
    FsError::check(ctx, || {
        format!("read_text_file of '{}'", resolved.display())
    })?;
    let text = into_text(bytes, &resolved, "this tool only returns text")?;
    Ok(ToolOutput::text(text))
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
