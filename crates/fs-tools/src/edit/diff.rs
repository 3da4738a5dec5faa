//! The unified diff `edit_file` answers with, in bounded time.
//!
//! The diff is for the reader: the edit itself is decided before it is drawn. So its cost is
//! capped: only the changed region (plus context) is diffed; a change whose smallest diff would
//! take long to find is shown as one block (every old line removed, every new line added), which
//! is still a valid unified diff that `patch` and `git apply` accept.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use similar::TextDiff;

use mcp_core::toolset::{CallContext, Stop};

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// How long the diff algorithm may search for the smallest diff before the change is shown as
/// one block (less if the call's own time limit comes first).
pub const DIFF_BUDGET: Duration = Duration::from_secs(1);

/// Steps of the diff algorithm beyond which the smallest diff is not searched for at all.
/// Myers' algorithm needs at least D²/4 steps for a diff of D changed lines, and D is at least
/// the number of lines one side has that the other lacks; when that alone passes this bound
/// (about 14,000 changed lines) the block is shown at once instead of after the whole budget.
const DIFF_WORK: u64 = 50_000_000;

/// A unified diff (3 lines of context) between two LF texts, found within [`DIFF_BUDGET`];
/// `Err` when the call was cancelled or ran out of time meanwhile.
///
/// Only the region between the texts' common prefix and suffix (plus context) is handed to the
/// diff algorithm, and its hunk headers are shifted back to whole-file line numbers: an edit
/// near the end of a 10 MiB file then costs two linear scans instead of a line diff of the
/// whole file.
pub fn unified_diff(old: &str, new: &str, name: &str, ctx: &CallContext) -> Result<String, Stop> {
    unified_diff_within(old, new, name, ctx, DIFF_BUDGET)
}

fn unified_diff_within(
    old: &str,
    new: &str,
    name: &str,
    ctx: &CallContext,
    budget: Duration,
) -> Result<String, Stop> {
    ctx.check()?;
    let (start, skipped) = window_start(old, new);
    let end_trim = window_end_trim(old, new, start);
    let old_win = &old[start..old.len() - end_trim];
    let new_win = &new[start..new.len() - end_trim];
    if old_win == new_win {
        return Ok(String::new());
    }
    let now = Instant::now();
    let deadline = match ctx.deadline {
        Some(limit) => limit.min(now + budget),
        None => now + budget,
    };
    let smallest = if least_work(old_win, new_win) > DIFF_WORK {
        None
    } else {
        let diff = TextDiff::configure()
            .deadline(deadline)
            .diff_lines(old_win, new_win);
        // Past the deadline the algorithm settles for a coarse diff; show the plain block then.
        (Instant::now() < deadline).then(|| {
            diff.unified_diff()
                .context_radius(CONTEXT)
                .header(name, name)
                .to_string()
        })
    };
    ctx.check()?;
    let diff = smallest.unwrap_or_else(|| whole_block(old_win, new_win, name));
    if skipped == 0 {
        return Ok(diff);
    }
    let mut out = String::with_capacity(diff.len() + 16);
    for line in diff.split_inclusive('\n') {
        match shift_hunk_header(line, skipped) {
            Some(shifted) => out.push_str(&shifted),
            None => out.push_str(line),
        }
    }
    Ok(out)
}

/// A lower bound on the steps Myers' algorithm takes to diff two texts by lines: D²/4, where D
/// is at least the number of lines (with their endings) one side has more of than the other.
fn least_work(old: &str, new: &str) -> u64 {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut lines = 0usize;
    for line in old.split_inclusive('\n') {
        *counts.entry(line).or_default() += 1;
        lines += 1;
    }
    let mut common = 0usize;
    for line in new.split_inclusive('\n') {
        lines += 1;
        if let Some(left) = counts.get_mut(line) {
            if *left > 0 {
                *left -= 1;
                common += 1;
            }
        }
    }
    let d = (lines - 2 * common) as u64;
    d.saturating_mul(d) / 4
}

/// The change between two windows as one hunk: up to [`CONTEXT`] common lines, every other old
/// line removed, every other new line added, up to [`CONTEXT`] common lines. Line numbers are
/// relative to the windows.
fn whole_block(old: &str, new: &str, name: &str) -> String {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let (n, m) = (old_lines.len(), new_lines.len());
    let prefix = old_lines
        .iter()
        .zip(&new_lines)
        .take_while(|(a, b)| a == b)
        .count();
    let suffix = old_lines[prefix..]
        .iter()
        .rev()
        .zip(new_lines[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let first = prefix - prefix.min(CONTEXT);
    let after = suffix.min(CONTEXT);
    let (old_end, new_end) = (n - suffix + after, m - suffix + after);
    let mut out = String::with_capacity(old.len() + new.len() + 64);
    out.push_str(&format!(
        "--- {name}\n+++ {name}\n@@ -{} +{} @@\n",
        range(first, old_end),
        range(first, new_end)
    ));
    let mut emit = |mark: char, line: &str| {
        out.push(mark);
        out.push_str(line);
        if !line.ends_with('\n') {
            out.push_str("\n\\ No newline at end of file\n");
        }
    };
    for line in &old_lines[first..prefix] {
        emit(' ', line);
    }
    for line in &old_lines[prefix..n - suffix] {
        emit('-', line);
    }
    for line in &new_lines[prefix..m - suffix] {
        emit('+', line);
    }
    for line in &old_lines[n - suffix..old_end] {
        emit(' ', line);
    }
    out
}

/// A hunk range of 0-based lines `start..end` as unified diffs write it: `first,count`, just
/// `first` for one line, and for no lines the line before (`0,0` at the top).
fn range(start: usize, end: usize) -> String {
    match end - start {
        1 => (start + 1).to_string(),
        0 => format!("{start},0"),
        len => format!("{},{len}", start + 1),
    }
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

    fn diff(old: &str, new: &str) -> String {
        unified_diff(old, new, "f", &CallContext::default()).expect("not stopped")
    }

    fn similar_diff(old: &str, new: &str) -> String {
        TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(CONTEXT)
            .header("f", "f")
            .to_string()
    }

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
            assert_eq!(
                diff(&old, &new),
                similar_diff(&old, &new),
                "{from:?} -> {to:?}"
            );
        }
    }

    /// Cases where the smallest diff is itself one block, so the fallback must draw exactly it.
    const ONE_BLOCK: &[(&str, &str)] = &[
        ("a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nX\nY\nZ\nf\ng\nh\n"),
        ("a\nb\nc\n", "x\ny\n"),
        ("a\nb\n", ""),
        ("", "x\n"),
        ("a\nb\nc", "a\nb\nC"),
        ("a\nb\nc", "a\nb\nc\n"),
        ("a\nb\nc\n", "a\nb\nc"),
        ("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\n5\n6\n7\n8\n"),
        ("only", "other"),
        ("a\nb", "A\nb"),
    ];

    #[test]
    fn the_whole_block_is_the_diff_when_the_change_is_one_block() {
        for &(old, new) in ONE_BLOCK {
            let (start, _) = window_start(old, new);
            let end = window_end_trim(old, new, start);
            let block = whole_block(
                &old[start..old.len() - end],
                &new[start..new.len() - end],
                "f",
            );
            let expected = similar_diff(&old[start..old.len() - end], &new[start..new.len() - end]);
            assert_eq!(block, expected, "{old:?} -> {new:?}");
        }
    }

    #[test]
    fn past_the_budget_the_change_is_one_block_with_whole_file_line_numbers() {
        let old: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let new = old
            .replacen("line 20\n", "twenty\n", 1)
            .replacen("line 22\n", "22\n", 1);
        let out = unified_diff_within(&old, &new, "f", &CallContext::default(), Duration::ZERO)
            .expect("not stopped");
        assert!(
            out.starts_with("--- f\n+++ f\n@@ -18,9 +18,9 @@\n line 17\n"),
            "{out}"
        );
        assert!(
            out.contains("-line 20\n-line 21\n-line 22\n+twenty\n+line 21\n+22\n line 23\n"),
            "{out}"
        );
        // The smallest diff when time allows.
        assert_eq!(diff(&old, &new), similar_diff(&old, &new));
    }

    #[test]
    fn a_change_too_large_to_diff_is_shown_as_one_block_at_once() {
        let old: String = (0..30_000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..30_000).map(|i| format!("new {i}\n")).collect();
        assert!(least_work(&old, &new) > DIFF_WORK);
        let started = Instant::now();
        let out = diff(&old, &new);
        assert!(started.elapsed() < DIFF_BUDGET * 10);
        assert!(out.starts_with("--- f\n+++ f\n@@ -1,30000 +1,30000 @@\n-old 0\n"));
        assert_eq!(out.lines().count(), 60_003);
    }

    #[test]
    fn a_stopped_call_gets_no_diff() {
        let cancel = mcp_core::toolset::CancelToken::default();
        cancel.cancel();
        let ctx = CallContext::with_timeout(cancel, None);
        assert_eq!(unified_diff("a\n", "b\n", "f", &ctx), Err(Stop::Cancelled));
    }

    #[test]
    fn the_fence_is_wider_than_any_backtick_run() {
        assert!(fence("+ ```rust\n").starts_with("````diff\n"));
        assert!(fence("+ x\n").starts_with("```diff\n"));
        assert!(fence("+ x\n").ends_with("\n```\n"));
    }
}
