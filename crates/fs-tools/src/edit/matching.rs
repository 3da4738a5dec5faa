//! Where an `oldText` goes: the exact search and the whitespace-tolerant line search.
//!
//! Both run in time linear in the file plus the edit, whatever the input: an edit is answered
//! within the call's time limit even when a hostile or careless client sends a large `oldText`
//! made of lines that repeat all over the file (the line-by-line comparison at every position
//! this replaces took 23–28 s for a 180 KB edit of a 120,000-line file).

use std::collections::HashMap;

use super::Poll;
use mcp_core::toolset::Stop;

/// The byte offsets of the first and second (possibly overlapping) occurrences of `needle`.
///
/// The whole text is always searched to prove an edit unambiguous, so this is the vectorised
/// search, run at most twice over the text.
pub fn exact(text: &str, needle: &str) -> (Option<usize>, Option<usize>) {
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let Some(first) = finder.find(text.as_bytes()) else {
        return (None, None);
    };
    // The next occurrence may overlap the first: search again one character further on.
    let step = needle.chars().next().map_or(1, char::len_utf8);
    let second = finder
        .find(&text.as_bytes()[first + step..])
        .map(|at| first + step + at);
    (Some(first), second)
}

/// The 1-based line number of a byte offset.
pub fn line_of(text: &str, byte: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..byte]).count() + 1
}

/// Each line of `text` (without its newline) with the byte offset it starts at. A final newline
/// ends the last line; it does not start an empty one. Lines are found as they are walked, so a
/// search holds no per-line table of the file (a 256 MiB file of empty lines would need 2 GiB).
pub fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let start = at;
        match memchr::memchr(b'\n', &text.as_bytes()[start..]) {
            Some(len) => {
                at = start + len + 1;
                done = at == text.len();
                Some((start, &text[start..start + len]))
            }
            None => {
                done = true;
                Some((start, &text[start..]))
            }
        }
    })
}

/// Where a run of lines matched: its first line (0-based) and the byte offset that line starts at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineMatch {
    /// The first matched line, 0-based.
    pub line: usize,
    /// The byte offset of that line's start.
    pub start: usize,
}

/// Each run of the text's lines that equals `wanted` once every line is trimmed of leading and
/// trailing whitespace (`wanted` is already trimmed); at most `limit` runs, overlapping ones
/// included, in order.
///
/// Each distinct wanted line gets a small number and every file line is looked up once (lines
/// the edit does not contain have none), which turns the search into finding one number
/// sequence in another: Knuth–Morris–Pratt does that in one pass over the file whatever repeats
/// in either, and the numbers are exact, so a match needs no second comparison of the text. The
/// map's hash is keyed per process, so a client cannot choose lines that collide. Memory is
/// proportional to the edit, not the file.
pub fn loose_matches(
    text: &str,
    wanted: &[&str],
    limit: usize,
    poll: &mut Poll,
) -> Result<Vec<LineMatch>, Stop> {
    let m = wanted.len();
    let mut found = Vec::new();
    if m == 0 || limit == 0 {
        return Ok(found);
    }
    let mut ids: HashMap<&str, u32> = HashMap::with_capacity(m);
    let needle: Vec<u32> = wanted
        .iter()
        .map(|w| {
            let next = ids.len() as u32 + 1;
            *ids.entry(w).or_insert(next)
        })
        .collect();
    poll.work(m)?;
    let fail = failure_function(&needle);
    poll.work(m)?;
    // The starts of the last `m` lines, so a match's first line can be located when it ends.
    let mut starts = vec![0usize; m];
    // `q` is how many wanted lines the lines just scanned match.
    let mut q = 0usize;
    for (i, (start, line)) in lines(text).enumerate() {
        poll.work(1)?;
        starts[i % m] = start;
        let Some(&id) = ids.get(line.trim()) else {
            // A line the edit does not contain ends every partial match.
            q = 0;
            continue;
        };
        while q > 0 && needle[q] != id {
            q = fail[q - 1];
        }
        if needle[q] == id {
            q += 1;
        }
        if q == m {
            let first = i + 1 - m;
            found.push(LineMatch {
                line: first,
                start: starts[first % m],
            });
            if found.len() == limit {
                break;
            }
            q = fail[q - 1];
        }
    }
    Ok(found)
}

/// Knuth–Morris–Pratt's table: for each prefix of `needle`, the length of its longest proper
/// prefix that is also its suffix.
fn failure_function(needle: &[u32]) -> Vec<usize> {
    let mut fail = vec![0usize; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            k = fail[k - 1];
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        fail[i] = k;
    }
    fail
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_core::toolset::CallContext;

    /// The obvious search, for comparison.
    fn naive(text: &str, wanted: &[&str], limit: usize) -> Vec<LineMatch> {
        let all: Vec<(usize, &str)> = lines(text).collect();
        let m = wanted.len();
        let mut found = Vec::new();
        if m == 0 || m > all.len() {
            return found;
        }
        for s in 0..=all.len() - m {
            if (0..m).all(|k| all[s + k].1.trim() == wanted[k]) {
                found.push(LineMatch {
                    line: s,
                    start: all[s].0,
                });
                if found.len() == limit {
                    break;
                }
            }
        }
        found
    }

    #[test]
    fn the_linear_search_agrees_with_the_obvious_one() {
        let ctx = CallContext::default();
        // Small alphabets make many repeats, overlaps and near misses.
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let words = ["a", "  a", "b\t", " b ", "c", ""];
        let mut matched = 0;
        for _ in 0..2000 {
            let n = next() % 12;
            let mut text: String = (0..n).map(|_| format!("{}\n", words[next() % 6])).collect();
            if next() % 3 == 0 {
                text.push_str(words[next() % 6]);
            }
            let m = 1 + next() % 4;
            let wanted: Vec<&str> = (0..m).map(|_| words[next() % 6].trim()).collect();
            for limit in [1, 3, 100] {
                let mut poll = Poll::new(&ctx);
                let got = loose_matches(&text, &wanted, limit, &mut poll).expect("not stopped");
                assert_eq!(
                    got,
                    naive(&text, &wanted, limit),
                    "{text:?} {wanted:?} {limit}"
                );
                matched += got.len();
            }
        }
        assert!(matched > 1000, "the inputs rarely match: {matched}");
    }

    #[test]
    fn lines_are_split_on_newlines_and_a_final_newline_ends_the_last() {
        fn all(text: &str) -> Vec<(usize, &str)> {
            lines(text).collect()
        }
        assert_eq!(all("a\n\nb"), [(0, "a"), (2, ""), (3, "b")]);
        assert_eq!(all("a\n"), [(0, "a")]);
        assert_eq!(all("\n"), [(0, "")]);
        assert_eq!(all(""), [(0, "")]);
    }

    #[test]
    fn exact_finds_overlapping_second_occurrences() {
        assert_eq!(exact("aaa", "aa"), (Some(0), Some(1)));
        assert_eq!(exact("xay", "a"), (Some(1), None));
        assert_eq!(exact("xy", "a"), (None, None));
        assert_eq!(line_of("a\nb\nc", 4), 3);
    }

    #[test]
    fn a_cancelled_search_stops() {
        let cancel = mcp_core::toolset::CancelToken::default();
        cancel.cancel();
        let ctx = CallContext::with_timeout(cancel, None);
        let text = "x\n".repeat(200_000);
        let mut poll = Poll::new(&ctx);
        assert_eq!(
            loose_matches(&text, &["x", "y"], 3, &mut poll),
            Err(Stop::Cancelled)
        );
    }
}
