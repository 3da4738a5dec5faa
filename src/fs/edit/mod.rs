//! `edit_file`: find-and-replace edits applied in order, all or nothing, answered with a unified
//! diff.
//!
//! Each `oldText` must match exactly one place. An exact substring match is tried first (linear
//! time, so one edit near the end of a large file stays fast); only if there is none does a
//! line-by-line match that ignores leading and trailing whitespace run, and then the replacement
//! is re-indented to the file's indentation. Line endings are preserved: a CRLF file is edited as
//! LF and written back as CRLF; a missing final newline stays missing.

use std::io::Read;

use serde_json::{Map, Value};
use similar::TextDiff;

use super::error::FsError;
use super::target;
use super::write::{restore_mode, summary};
use super::{reject_unknown, FsContext};
use crate::toolset::{Args, ToolOutput};

/// The largest file `edit_file` loads. Larger than `--max-read-bytes` on purpose: editing a big
/// file returns only a diff, not the file.
const MAX_EDIT_BYTES: u64 = 256 * 1024 * 1024;

/// How much of an `oldText` an error message quotes.
const QUOTE_CHARS: usize = 200;

/// One requested replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The text to find.
    pub old_text: String,
    /// What to put in its place.
    pub new_text: String,
}

/// Why a set of edits could not be applied; the caller adds the file's name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EditError {
    /// `oldText` matches nowhere, not even ignoring whitespace.
    #[error("edit {index}: oldText was not found, not even ignoring indentation: {quoted}; re-read the file with read_text_file and copy the text exactly")]
    NotFound {
        /// 1-based edit number.
        index: usize,
        /// The start of the oldText.
        quoted: String,
    },
    /// `oldText` matches more than one place.
    #[error("edit {index}: oldText matches {count} places (lines {lines}); include more surrounding lines in oldText (and newText) so it matches exactly one")]
    Ambiguous {
        /// 1-based edit number.
        index: usize,
        /// How many matches were found (at least 2; counting stops early).
        count: usize,
        /// Where the first matches start.
        lines: String,
    },
    /// `oldText` is empty, which would match everywhere.
    #[error("edit {index}: oldText is empty; to insert text, include a neighbouring line in both oldText and newText")]
    Empty {
        /// 1-based edit number.
        index: usize,
    },
}

/// `edit_file`.
pub fn edit_file(cx: &FsContext, args: &Map<String, Value>) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", "edits", "dryRun"])?;
    let a = Args(args);
    let path = a.str("path")?;
    let dry_run = a.opt_bool("dryRun")?.unwrap_or(false);
    let edits = parse_edits(a.opt_array("edits")?)?;

    // The lock spans read-modify-write so a concurrent writer cannot be overwritten unseen; a dry
    // run changes nothing and must not even create the store.
    let lock = if dry_run {
        None
    } else {
        Some(cx.store.lock()?)
    };
    let target = target::writable(cx, path)?;
    let shown = target.resolved.display();
    if target.existing_mode.is_none() {
        return Err(FsError::NotFound(format!(
            "'{shown}' does not exist; create it with create_file"
        )));
    }
    let original = read_text(cx, &target.resolved)?;
    let crlf = is_crlf(&original);
    let normalized = if crlf {
        original.replace("\r\n", "\n")
    } else {
        original
    };
    let edited = apply_edits(&normalized, &edits).map_err(|e| match e {
        EditError::NotFound { .. } => FsError::NotFound(format!("in '{shown}', {e}")),
        _ => FsError::InvalidArgument(format!("in '{shown}', {e}")),
    })?;
    let diff = unified_diff(&normalized, &edited, &shown);
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
    raw.iter()
        .enumerate()
        .map(|(i, item)| {
            let index = i + 1;
            let obj = item.as_object().ok_or_else(|| {
                FsError::InvalidArgument(format!(
                    "edits[{i}] must be an object {{oldText, newText}}"
                ))
            })?;
            let unknown = Args(obj).unknown(&["oldText", "newText"]);
            if !unknown.is_empty() {
                return Err(FsError::InvalidArgument(format!(
                    "edit {index} has unknown field(s) {}; each edit takes only 'oldText' and 'newText'",
                    unknown.join(", ")
                )));
            }
            let field = |name: &str| {
                Args(obj).str(name).map(str::to_owned).map_err(|e| {
                    FsError::InvalidArgument(format!("edit {index}: {e}"))
                })
            };
            Ok(Edit {
                old_text: field("oldText")?.replace("\r\n", "\n"),
                new_text: field("newText")?.replace("\r\n", "\n"),
            })
        })
        .collect()
}

fn read_text(cx: &FsContext, resolved: &crate::guard::Resolved) -> Result<String, FsError> {
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
    let binary = || {
        FsError::InvalidArgument(format!(
            "'{}' is not UTF-8 text (it looks binary); edit_file only edits text",
            resolved.display()
        ))
    };
    if bytes.contains(&0) {
        return Err(binary());
    }
    String::from_utf8(bytes).map_err(|_| binary())
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

/// Applies `edits` in order to LF text; the first failure fails the whole set.
pub fn apply_edits(text: &str, edits: &[Edit]) -> Result<String, EditError> {
    // Each edit builds the next text from the previous one; the original is never copied first.
    let mut current: Option<String> = None;
    for (i, edit) in edits.iter().enumerate() {
        current = Some(apply_one(current.as_deref().unwrap_or(text), edit, i + 1)?);
    }
    Ok(current.unwrap_or_else(|| text.to_owned()))
}

fn apply_one(text: &str, edit: &Edit, index: usize) -> Result<String, EditError> {
    let old = edit.old_text.as_str();
    if old.trim().is_empty() {
        return Err(EditError::Empty { index });
    }
    // The whole file is scanned to prove the match unique, so the search is the vectorised one.
    let finder = memchr::memmem::Finder::new(old.as_bytes());
    if let Some(at) = finder.find(text.as_bytes()) {
        // A second, possibly overlapping, occurrence makes the edit ambiguous.
        let step = old.chars().next().map_or(1, char::len_utf8);
        if let Some(again) = finder.find(&text.as_bytes()[at + step..]) {
            let second = at + step + again;
            return Err(EditError::Ambiguous {
                index,
                count: 2,
                lines: format!("{} and {}", line_of(text, at), line_of(text, second)),
            });
        }
        let mut out = String::with_capacity(text.len() - old.len() + edit.new_text.len());
        out.push_str(&text[..at]);
        out.push_str(&edit.new_text);
        out.push_str(&text[at + old.len()..]);
        return Ok(out);
    }
    replace_lines_loosely(text, edit, index)
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Splits text into lines and says whether it ended with a newline.
fn split_lines(text: &str) -> (Vec<&str>, bool) {
    match text.strip_suffix('\n') {
        Some(body) => (body.split('\n').collect(), true),
        None => (text.split('\n').collect(), false),
    }
}

/// The whitespace-tolerant match: `oldText`'s lines equal a run of the file's lines after
/// trimming both ends. Exactly one run may match; it is replaced by `newText` re-indented.
fn replace_lines_loosely(text: &str, edit: &Edit, index: usize) -> Result<String, EditError> {
    let (old_lines, old_nl) = split_lines(&edit.old_text);
    let (new_lines, new_nl) = split_lines(&edit.new_text);
    let wanted: Vec<&str> = old_lines.iter().map(|l| l.trim()).collect();
    // Line start offsets, so the match can be spliced without rebuilding the file line by line.
    let mut starts = vec![0usize];
    starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
    let line = |i: usize| -> &str {
        let end = starts.get(i + 1).map_or(text.len(), |&s| s - 1);
        &text[starts[i]..end]
    };
    let mut lines_count = starts.len();
    if text.ends_with('\n') {
        lines_count -= 1;
    }
    let m = wanted.len();
    let mut found: Vec<usize> = Vec::new();
    if m <= lines_count {
        for s in 0..=(lines_count - m) {
            if line(s).trim() == wanted[0] && (1..m).all(|k| line(s + k).trim() == wanted[k]) {
                found.push(s);
                if found.len() == 3 {
                    break;
                }
            }
        }
    }
    match found.len() {
        0 => Err(EditError::NotFound {
            index,
            quoted: quote(&edit.old_text),
        }),
        1 => {
            let s = found[0];
            let matched: Vec<&str> = (s..s + m).map(line).collect();
            let replacement = reindent(&matched, &old_lines, &new_lines);
            let begin = starts[s];
            let last = s + m - 1;
            let mut end = starts.get(last + 1).map_or(text.len(), |&x| x - 1);
            let mut out = String::with_capacity(text.len() + edit.new_text.len());
            out.push_str(&text[..begin]);
            out.push_str(&replacement);
            // A final newline on both sides stands for the break the file already has (or
            // lacks, at the end of a file without one); only a difference between them changes it.
            if old_nl && !new_nl && end < text.len() {
                end += 1;
            }
            if new_nl && !old_nl {
                out.push('\n');
            }
            out.push_str(&text[end..]);
            Ok(out)
        }
        n => Err(EditError::Ambiguous {
            index,
            count: n,
            lines: found
                .iter()
                .map(|s| (s + 1).to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_CHARS).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    format!("{quoted:?}")
}

/// An indentation style: tabs, or spaces counted in runs of the narrowest width seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Tab,
    Spaces(usize),
}

fn indent_of(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

fn unit_of<'a>(lines: impl Iterator<Item = &'a str>) -> Option<Unit> {
    let mut narrowest: Option<usize> = None;
    for line in lines {
        let indent = indent_of(line);
        if indent.contains('\t') {
            return Some(Unit::Tab);
        }
        if !indent.is_empty() && !line.trim().is_empty() {
            narrowest = Some(narrowest.map_or(indent.len(), |n| n.min(indent.len())));
        }
    }
    narrowest.map(Unit::Spaces)
}

/// Re-indents `new` to the file: each new line j is paired with an old line k (see
/// [`pair_lines`]) and the file line k matched, and gets that file line's indentation shifted by
/// how much line j is indented relative to old line k. When the edit and the file use different
/// indentation styles (tabs vs spaces) the shift is counted in the edit's units and applied in
/// the file's.
fn reindent(matched: &[&str], old: &[&str], new: &[&str]) -> String {
    let pairs = pair_lines(old, new);
    let file_unit = unit_of(matched.iter().copied());
    let edit_unit = unit_of(old.iter().chain(new.iter()).copied());
    let mut out = String::new();
    for (j, line) in new.iter().enumerate() {
        if j > 0 {
            out.push('\n');
        }
        let body = line.trim_start_matches([' ', '\t']);
        if body.is_empty() {
            out.push_str(line);
            continue;
        }
        let k = pairs[j];
        let file_indent = indent_of(matched[k]);
        let old_indent = indent_of(old[k]);
        let new_indent = indent_of(line);
        let styles_differ = matches!(
            (file_unit, edit_unit),
            (Some(Unit::Tab), Some(Unit::Spaces(_))) | (Some(Unit::Spaces(_)), Some(Unit::Tab))
        );
        let mut indent = file_indent.to_owned();
        if styles_differ {
            let units = |s: &str| -> isize {
                match edit_unit {
                    Some(Unit::Spaces(w)) => (s.len() / w.max(1)) as isize,
                    _ => s.len() as isize,
                }
            };
            let delta = units(new_indent) - units(old_indent);
            let piece = match file_unit {
                Some(Unit::Spaces(w)) => " ".repeat(w),
                _ => "\t".to_owned(),
            };
            shift(&mut indent, delta, &piece);
        } else {
            let delta = new_indent.len() as isize - old_indent.len() as isize;
            if delta > 0 {
                // The extra part of the new indentation, in the edit's own characters.
                let extra = new_indent
                    .strip_prefix(old_indent)
                    .map(str::to_owned)
                    .unwrap_or_else(|| {
                        let c = file_indent.chars().next().unwrap_or(' ');
                        c.to_string().repeat(delta as usize)
                    });
                indent.push_str(&extra);
            } else {
                shift(&mut indent, delta, " ");
            }
        }
        out.push_str(&indent);
        out.push_str(body);
    }
    out
}

/// For each new line, the old line its indentation is measured against. Lines that survive the
/// edit (same text once trimmed) pair with themselves; lines that replace a run of old lines
/// pair with those by position; lines purely inserted pair with the old line just before them,
/// so an added statement lines up with its neighbour rather than with whatever old line happens
/// to share its index.
fn pair_lines(old: &[&str], new: &[&str]) -> Vec<usize> {
    let last = old.len().saturating_sub(1);
    let old_trim: Vec<&str> = old.iter().map(|l| l.trim()).collect();
    let new_trim: Vec<&str> = new.iter().map(|l| l.trim()).collect();
    let mut pairs = vec![0; new.len()];
    for op in similar::capture_diff_slices(similar::Algorithm::Myers, &old_trim, &new_trim) {
        match op {
            similar::DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for t in 0..len {
                    pairs[new_index + t] = old_index + t;
                }
            }
            similar::DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                for t in 0..new_len {
                    pairs[new_index + t] = old_index + t.min(old_len.saturating_sub(1));
                }
            }
            similar::DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => {
                let anchor = old_index.saturating_sub(1).min(last);
                for t in 0..new_len {
                    pairs[new_index + t] = anchor;
                }
            }
            similar::DiffOp::Delete { .. } => {}
        }
    }
    pairs
}

/// Adds `delta` copies of `piece` to an indentation, or removes `-delta` of them (counted in
/// characters for a one-character piece), never below nothing.
fn shift(indent: &mut String, delta: isize, piece: &str) {
    if delta >= 0 {
        indent.push_str(&piece.repeat(delta as usize));
    } else {
        let remove = (-delta) as usize * piece.len().max(1);
        let keep = indent.len().saturating_sub(remove);
        indent.truncate(keep);
    }
}

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// A unified diff (3 lines of context) between two LF texts.
///
/// Only the region between the texts' common prefix and suffix (plus context) is handed to the
/// diff algorithm, and its hunk headers are shifted back to whole-file line numbers: an edit
/// near the end of a 10 MiB file then costs two linear scans instead of a line diff of the
/// whole file.
pub fn unified_diff(old: &str, new: &str, name: &str) -> String {
    let (start, skipped) = window_start(old, new);
    let end_trim = window_end_trim(old, new, start);
    let old_win = &old[start..old.len() - end_trim];
    let new_win = &new[start..new.len() - end_trim];
    let diff = TextDiff::configure()
        .timeout(std::time::Duration::from_secs(5))
        .diff_lines(old_win, new_win)
        .unified_diff()
        .context_radius(CONTEXT)
        .header(name, name)
        .to_string();
    if skipped == 0 {
        return diff;
    }
    let mut out = String::with_capacity(diff.len() + 16);
    for line in diff.split_inclusive('\n') {
        match shift_hunk_header(line, skipped) {
            Some(shifted) => out.push_str(&shifted),
            None => out.push_str(line),
        }
    }
    out
}

/// Byte offset where the diff window starts (the beginning of a line `CONTEXT` lines before the
/// first difference) and how many lines precede it.
fn window_start(old: &str, new: &str) -> (usize, usize) {
    let common = common_prefix(old.as_bytes(), new.as_bytes());
    // Back to the start of the line holding the first difference, then CONTEXT more lines.
    let mut start = old[..common].rfind('\n').map_or(0, |i| i + 1);
    for _ in 0..CONTEXT {
        if start == 0 {
            break;
        }
        start = old[..start - 1].rfind('\n').map_or(0, |i| i + 1);
    }
    let skipped = memchr::memchr_iter(b'\n', &old.as_bytes()[..start]).count();
    (start, skipped)
}

/// Length of the common prefix of two byte strings, compared a block at a time (a 10 MiB file
/// edited near its end is compared in full on every edit).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let max = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= max && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..max]
        .iter()
        .zip(&b[at..max])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the common suffix of two byte strings, at most `max`, a block at a time.
fn common_suffix(a: &[u8], b: &[u8], max: usize) -> usize {
    const BLOCK: usize = 4096;
    let (la, lb) = (a.len(), b.len());
    let mut n = 0;
    while n + BLOCK <= max && a[la - n - BLOCK..la - n] == b[lb - n - BLOCK..lb - n] {
        n += BLOCK;
    }
    n + a[..la - n]
        .iter()
        .rev()
        .zip(b[..lb - n].iter().rev())
        .take(max - n)
        .take_while(|(x, y)| x == y)
        .count()
}

/// How many bytes at the end of both texts lie outside the diff window: whole common lines after
/// the last difference, minus `CONTEXT` lines of context.
fn window_end_trim(old: &str, new: &str, start: usize) -> usize {
    let max = old.len().min(new.len()) - start;
    let common = common_suffix(old.as_bytes(), new.as_bytes(), max);
    // The trimmed part must begin at a line start, and keep CONTEXT whole lines for context.
    let tail = &old[old.len() - common..];
    // The byte before the cut is inside the common suffix, so the cut is a line start in both.
    let Some(first_break) = tail.find('\n') else {
        return 0;
    };
    let mut cut = first_break + 1;
    for _ in 0..CONTEXT {
        match tail[cut..].find('\n') {
            Some(i) => cut += i + 1,
            None => return 0,
        }
    }
    common - cut
}

/// `@@ -a,b +c,d @@` with `skipped` added to both starts; `None` for any other line.
fn shift_hunk_header(line: &str, skipped: usize) -> Option<String> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, tail) = rest.split_once(" @@")?;
    let (old_range, new_range) = ranges.split_once(" +")?;
    let shift = |range: &str| -> Option<String> {
        let (first, len) = match range.split_once(',') {
            Some((f, l)) => (f, Some(l)),
            None => (range, None),
        };
        let first: usize = first.parse().ok()?;
        let first = first + skipped;
        Some(match len {
            Some(l) => format!("{first},{l}"),
            None => first.to_string(),
        })
    };
    Some(format!(
        "@@ -{} +{} @@{tail}",
        shift(old_range)?,
        shift(new_range)?
    ))
}

/// Wraps a diff in a ```diff fence, wider than any run of backticks inside it.
pub fn fence(diff: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in diff.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let ticks = "`".repeat((longest + 1).max(3));
    let mut out = format!("{ticks}diff\n{diff}");
    if !diff.ends_with('\n') && !diff.is_empty() {
        out.push('\n');
    }
    out.push_str(&ticks);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blockwise_common_prefix_and_suffix_agree_with_a_byte_by_byte_count() {
        let naive_prefix = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let naive_suffix = |a: &[u8], b: &[u8], max: usize| {
            a.iter()
                .rev()
                .zip(b.iter().rev())
                .take(max)
                .take_while(|(x, y)| x == y)
                .count()
        };
        let base: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for len in [0, 1, 4095, 4096, 4097, 8192, 9999] {
            for diff_at in [0, 1, 4095, 4096, 4097, 8191, 9998] {
                let a = &base[..len];
                let mut b = a.to_vec();
                if diff_at < len {
                    b[diff_at] ^= 0xff;
                }
                b.extend_from_slice(b"tail");
                assert_eq!(common_prefix(a, &b), naive_prefix(a, &b), "{len} {diff_at}");
                let mut c = a.to_vec();
                if diff_at < len {
                    c[len - 1 - diff_at] ^= 0xff;
                }
                c.insert(0, b'x');
                for max in [0, 3, 4096, len] {
                    let max = max.min(len);
                    assert_eq!(
                        common_suffix(a, &c, max),
                        naive_suffix(a, &c, max),
                        "{len} {diff_at} {max}"
                    );
                }
            }
        }
    }

    fn edit(old: &str, new: &str) -> Edit {
        Edit {
            old_text: old.into(),
            new_text: new.into(),
        }
    }

    #[test]
    fn exact_match_replaces_the_only_occurrence_literally() {
        let out = apply_edits("a $1 b\nc\n", &[edit("$1", "$&$$")]).expect("applies");
        assert_eq!(out, "a $&$$ b\nc\n");
    }

    #[test]
    fn repeated_and_overlapping_matches_are_ambiguous() {
        let err = apply_edits("x\ny\nx\n", &[edit("x", "z")]).expect_err("ambiguous");
        assert!(matches!(err, EditError::Ambiguous { ref lines, .. } if lines == "1 and 3"));
        assert!(apply_edits("aaa", &[edit("aa", "b")]).is_err());
    }

    #[test]
    fn loose_match_reindents_like_the_reference_example() {
        let file = "    if (a) {\n        b();\n    }\n";
        let out = apply_edits(
            file,
            &[edit("if (a) {\n  b();\n}", "if (a) {\n      c();\n  }")],
        )
        .expect("applies");
        assert_eq!(out, "    if (a) {\n            c();\n      }\n");
    }

    #[test]
    fn loose_match_converts_space_indents_to_a_tab_file() {
        let file = "fn f() {\n\tlet a = 1;\n\tlet b = 2;\n}\n";
        let out = apply_edits(
            file,
            &[edit(
                "let a = 1;\nlet b = 2;",
                "let a = 1;\nif a {\n    let b = 3;\n}",
            )],
        )
        .expect("applies");
        assert_eq!(
            out,
            "fn f() {\n\tlet a = 1;\n\tif a {\n\t\tlet b = 3;\n\t}\n}\n"
        );
    }

    #[test]
    fn dedent_clamps_at_zero() {
        let out = apply_edits("  x\n  y\n", &[edit("    x\n    y", "x\ny")]).expect("applies");
        assert_eq!(out, "x\ny\n");
    }

    #[test]
    fn loose_match_keeps_the_missing_final_newline() {
        let out = apply_edits("a\n  b  ", &[edit("b", "c")]).expect("exact");
        assert_eq!(out, "a\n  c  ");
        let out = apply_edits("a\n  b c", &[edit("b c  \n", "d\n")]).expect("loose");
        assert_eq!(out, "a\n  d");
    }

    #[test]
    fn a_failing_edit_fails_the_whole_set() {
        let err = apply_edits("a\nb\n", &[edit("a", "x"), edit("nope", "y")]).expect_err("fails");
        assert!(matches!(err, EditError::NotFound { index: 2, .. }));
    }

    #[test]
    fn crlf_is_detected_by_majority() {
        assert!(is_crlf("a\r\nb\r\n"));
        assert!(!is_crlf("a\nb\nc\r\n"));
        assert!(!is_crlf("plain"));
    }

    #[test]
    fn windowed_diffs_match_whole_file_diffs() {
        let old: String = (0..100).map(|i| format!("line {i}\n")).collect();
        for (from, to) in [
            ("line 50\n", "changed\n"),
            ("line 0\n", "first\n"),
            ("line 99\n", "last"),
            ("line 5\nline 6\n", ""),
            ("line 7\n", "line 7\nextra\n"),
        ] {
            let new = old.replacen(from, to, 1);
            let whole = TextDiff::from_lines(&old, &new)
                .unified_diff()
                .context_radius(CONTEXT)
                .header("f", "f")
                .to_string();
            assert_eq!(unified_diff(&old, &new, "f"), whole, "{from:?} -> {to:?}");
        }
    }

    #[test]
    fn the_fence_is_wider_than_any_backtick_run() {
        assert!(fence("+ ```rust\n").starts_with("````diff\n"));
        assert!(fence("+ x\n").starts_with("```diff\n"));
        assert!(fence("+ x\n").ends_with("\n```\n"));
    }
}
