//! Fitting `newText` to the file's indentation after a whitespace-tolerant match.
//!
//! Each new line is paired with an old line (see [`pair_lines`]) and so with the file line that
//! old line matched; it gets that file line's indentation, shifted by how much more or less it
//! is indented than its old line. The pairing is deterministic and bounded: what is written never
//! depends on how fast the machine is or how much time the call has left.

use std::collections::HashMap;

use similar::DiffOp;

/// Up to this many lines (oldText and newText together) new lines are paired with old ones
/// through a minimal diff (Myers), whose cost grows with lines × differences, here at most
/// 2,000 × 2,000 steps. Larger edits are paired through the lines that occur once on each side,
/// which costs n log n whatever the edit.
const MYERS_LINES: usize = 2_000;

/// The re-indented text would exceed the size the caller allows (a file indented by a huge run
/// of spaces, times many new lines, would otherwise exhaust memory).
#[derive(Debug, PartialEq, Eq)]
pub struct TooLarge;

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

/// One new line's indentation: the first `keep` bytes of the file line's indentation, then
/// `extra` repeated `times`. Sized before it is built, so an oversized result is refused without
/// being allocated. Indentation is spaces and tabs only, so any byte count is a char boundary.
struct Indent<'a> {
    base: &'a str,
    keep: usize,
    extra: &'a str,
    times: usize,
}

impl Indent<'_> {
    fn len(&self) -> usize {
        self.keep
            .saturating_add(self.extra.len().saturating_mul(self.times))
    }

    fn write_to(&self, out: &mut String) {
        out.push_str(&self.base[..self.keep]);
        for _ in 0..self.times {
            out.push_str(self.extra);
        }
    }
}

/// Re-indents `new` to the file (`matched` are the file lines `old` matched). When the edit and
/// the file use different indentation styles (tabs vs spaces) the shift is counted in the edit's
/// units and applied in the file's. Fails when the result would exceed `max_len` bytes.
pub fn reindent(
    matched: &[&str],
    old: &[&str],
    new: &[&str],
    max_len: usize,
) -> Result<String, TooLarge> {
    let pairs = pair_lines(old, new);
    let file_unit = unit_of(matched.iter().copied());
    let edit_unit = unit_of(old.iter().chain(new.iter()).copied());
    let styles_differ = matches!(
        (file_unit, edit_unit),
        (Some(Unit::Tab), Some(Unit::Spaces(_))) | (Some(Unit::Spaces(_)), Some(Unit::Tab))
    );
    let file_piece = match file_unit {
        Some(Unit::Spaces(w)) => " ".repeat(w),
        _ => "\t".to_owned(),
    };
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
        let indent = if styles_differ {
            let units = |s: &str| -> isize {
                match edit_unit {
                    Some(Unit::Spaces(w)) => (s.len() / w.max(1)) as isize,
                    _ => s.len() as isize,
                }
            };
            let delta = units(new_indent) - units(old_indent);
            shifted(file_indent, delta, &file_piece)
        } else {
            let delta = new_indent.len() as isize - old_indent.len() as isize;
            if delta > 0 {
                // The extra part of the new indentation, in the edit's own characters (when
                // the two do not share a prefix, in the file's first indentation character).
                let (extra, times) = match new_indent.strip_prefix(old_indent) {
                    Some(extra) => (extra, 1),
                    None if file_indent.starts_with('\t') => ("\t", delta as usize),
                    None => (" ", delta as usize),
                };
                Indent {
                    base: file_indent,
                    keep: file_indent.len(),
                    extra,
                    times,
                }
            } else {
                shifted(file_indent, delta, " ")
            }
        };
        let needed = out
            .len()
            .saturating_add(indent.len())
            .saturating_add(body.len());
        if needed > max_len {
            return Err(TooLarge);
        }
        indent.write_to(&mut out);
        out.push_str(body);
    }
    Ok(out)
}

/// `base` with `delta` copies of `piece` added, or `-delta` of them removed (counted in bytes of
/// the piece), never below nothing.
fn shifted<'a>(base: &'a str, delta: isize, piece: &'a str) -> Indent<'a> {
    if delta >= 0 {
        Indent {
            base,
            keep: base.len(),
            extra: piece,
            times: delta as usize,
        }
    } else {
        let remove = delta.unsigned_abs().saturating_mul(piece.len().max(1));
        Indent {
            base,
            keep: base.len().saturating_sub(remove),
            extra: "",
            times: 0,
        }
    }
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
    let ops = if old.len() + new.len() <= MYERS_LINES {
        similar::capture_diff_slices(similar::Algorithm::Myers, &old_trim, &new_trim)
    } else {
        anchored_ops(&old_trim, &new_trim)
    };
    let mut pairs = vec![0; new.len()];
    for op in ops {
        match op {
            DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for t in 0..len {
                    pairs[new_index + t] = old_index + t;
                }
            }
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                for t in 0..new_len {
                    pairs[new_index + t] = old_index + t.min(old_len.saturating_sub(1));
                }
            }
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => {
                let anchor = old_index.saturating_sub(1).min(last);
                for t in 0..new_len {
                    pairs[new_index + t] = anchor;
                }
            }
            DiffOp::Delete { .. } => {}
        }
    }
    pairs
}

/// A line diff for large edits, in n log n: the lines that occur exactly once in `old` and once
/// in `new` are candidate anchors; the longest run of them in the same order on both sides is
/// kept as equal lines (patience diff's first step), and between two anchors the common leading
/// and trailing lines are equal and the rest is replaced.
fn anchored_ops(old: &[&str], new: &[&str]) -> Vec<DiffOp> {
    // Per distinct line: (count in old, where in old, count in new, where in new).
    let mut seen: HashMap<&str, (u32, usize, u32, usize)> = HashMap::with_capacity(old.len());
    for (i, line) in old.iter().enumerate() {
        let e = seen.entry(line).or_default();
        e.0 = e.0.saturating_add(1);
        e.1 = i;
    }
    for (j, line) in new.iter().enumerate() {
        if let Some(e) = seen.get_mut(line) {
            e.2 = e.2.saturating_add(1);
            e.3 = j;
        }
    }
    let mut candidates: Vec<(usize, usize)> = seen
        .values()
        .filter(|e| e.0 == 1 && e.2 == 1)
        .map(|e| (e.3, e.1))
        .collect();
    candidates.sort_unstable();
    let mut ops = Vec::new();
    let (mut a, mut b) = (0, 0);
    for (j, i) in longest_increasing(&candidates) {
        gap_ops(old, new, a..i, b..j, &mut ops);
        ops.push(DiffOp::Equal {
            old_index: i,
            new_index: j,
            len: 1,
        });
        a = i + 1;
        b = j + 1;
    }
    gap_ops(old, new, a..old.len(), b..new.len(), &mut ops);
    ops
}

/// The ops between two anchors: common leading and trailing lines are equal, the middle is a
/// replacement (or a pure insertion or deletion).
fn gap_ops(
    old: &[&str],
    new: &[&str],
    a: std::ops::Range<usize>,
    b: std::ops::Range<usize>,
    ops: &mut Vec<DiffOp>,
) {
    let most = a.len().min(b.len());
    let prefix = old[a.clone()]
        .iter()
        .zip(&new[b.clone()])
        .take_while(|(x, y)| x == y)
        .count();
    let suffix = old[a.clone()]
        .iter()
        .rev()
        .zip(new[b.clone()].iter().rev())
        .take(most - prefix)
        .take_while(|(x, y)| x == y)
        .count();
    if prefix > 0 {
        ops.push(DiffOp::Equal {
            old_index: a.start,
            new_index: b.start,
            len: prefix,
        });
    }
    let (old_index, old_len) = (a.start + prefix, a.len() - prefix - suffix);
    let (new_index, new_len) = (b.start + prefix, b.len() - prefix - suffix);
    match (old_len, new_len) {
        (0, 0) => {}
        (_, 0) => ops.push(DiffOp::Delete {
            old_index,
            old_len,
            new_index,
        }),
        (0, _) => ops.push(DiffOp::Insert {
            old_index,
            new_index,
            new_len,
        }),
        _ => ops.push(DiffOp::Replace {
            old_index,
            old_len,
            new_index,
            new_len,
        }),
    }
    if suffix > 0 {
        ops.push(DiffOp::Equal {
            old_index: a.end - suffix,
            new_index: b.end - suffix,
            len: suffix,
        });
    }
}

/// The longest subsequence of `pairs` (sorted by their first element) whose second elements
/// increase, by patience sorting with back links: n log n.
fn longest_increasing(pairs: &[(usize, usize)]) -> Vec<(usize, usize)> {
    // tails[l] is the pair ending the best run of length l + 1 found so far.
    let mut tails: Vec<usize> = Vec::new();
    let mut back: Vec<Option<usize>> = vec![None; pairs.len()];
    for (at, &(_, value)) in pairs.iter().enumerate() {
        let len = tails.partition_point(|&t| pairs[t].1 < value);
        if len > 0 {
            back[at] = Some(tails[len - 1]);
        }
        if len == tails.len() {
            tails.push(at);
        } else {
            tails[len] = at;
        }
    }
    let mut run = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied();
    while let Some(i) = at {
        run.push(pairs[i]);
        at = back[i];
    }
    run.reverse();
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_edits_are_paired_through_their_unique_lines() {
        // More lines than the Myers limit: an inserted line lines up with its neighbour, a
        // changed line keeps its own indentation, repeated lines in between stay paired.
        let count = MYERS_LINES;
        let matched: Vec<String> = (0..count)
            .map(|i| {
                if i % 2 == 0 {
                    format!("\tline {i}")
                } else {
                    "\t\t}".to_owned()
                }
            })
            .collect();
        let matched: Vec<&str> = matched.iter().map(String::as_str).collect();
        let old: Vec<&str> = matched.iter().map(|l| l.trim()).collect();
        let mut new: Vec<String> = old.iter().map(|l| l.to_string()).collect();
        new[10] = "changed".into();
        new.insert(701, "  inserted".into());
        let new: Vec<&str> = new.iter().map(String::as_str).collect();
        let out = reindent(&matched, &old, &new, usize::MAX).expect("fits");
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines.len(), count + 1);
        assert_eq!(lines[10], "\tchanged");
        assert_eq!(lines[700], "\tline 700");
        assert_eq!(lines[701], "\t\tinserted");
        assert_eq!(lines[702], "\t\t}");
        assert_eq!(lines[703], "\tline 702");
        assert_eq!(lines[count], "\t\t}");
    }

    #[test]
    fn a_huge_reindent_is_refused_before_it_is_built() {
        let wide = format!("{}x", " ".repeat(100_000));
        let new: Vec<&str> = vec!["\t\t\t\ty"; 1000];
        assert_eq!(
            reindent(&[wide.as_str()], &["x"], &new, 1 << 20),
            Err(TooLarge)
        );
        assert!(reindent(&[wide.as_str()], &["x"], &["y"], 1 << 20).is_ok());
    }

    #[test]
    fn the_longest_increasing_run_is_found() {
        let pairs = [(0, 5), (1, 1), (2, 2), (3, 9), (4, 3), (5, 4)];
        assert_eq!(longest_increasing(&pairs), [(1, 1), (2, 2), (4, 3), (5, 4)]);
        assert!(longest_increasing(&[]).is_empty());
    }
}
