//! Applying a list of edits to a text: in order, each to the previous result, all or nothing.
//!
//! Each `oldText` must match exactly one place. An exact substring match is tried first; only if
//! there is none does the line match that ignores leading and trailing whitespace run, and then
//! the replacement is re-indented to the file's indentation.

use super::matching;
use super::reindent::{reindent, TooLarge};
use super::Poll;
use mcp_core::toolset::Stop;

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
    /// Re-indenting `newText` to the file would make the text larger than a file edit_file
    /// loads (a file indented by a huge run of spaces, times many new lines).
    #[error("edit {index}: re-indenting newText to the file's indentation would make the file larger than {limit} bytes; send oldText and newText with the file's exact indentation, or rewrite the file with write_file")]
    TooLarge {
        /// 1-based edit number.
        index: usize,
        /// The size limit.
        limit: usize,
    },
    /// The call was cancelled or ran out of time; nothing was applied.
    #[error("{0}")]
    Stopped(Stop),
}

impl From<Stop> for EditError {
    fn from(stop: Stop) -> Self {
        EditError::Stopped(stop)
    }
}

/// Applies `edits` in order to LF text; the first failure fails the whole set. The result may be
/// at most `max_len` bytes when a re-indent would grow it.
pub fn apply_edits(
    text: &str,
    edits: &[Edit],
    max_len: usize,
    poll: &mut Poll,
) -> Result<String, EditError> {
    // Each edit builds the next text from the previous one; the original is never copied first.
    let mut current: Option<String> = None;
    for (i, edit) in edits.iter().enumerate() {
        // Every edit reads the whole text at least once: a natural point to stop.
        poll.now()?;
        let text = current.as_deref().unwrap_or(text);
        current = Some(apply_one(text, edit, i + 1, max_len, poll)?);
    }
    Ok(current.unwrap_or_else(|| text.to_owned()))
}

fn apply_one(
    text: &str,
    edit: &Edit,
    index: usize,
    max_len: usize,
    poll: &mut Poll,
) -> Result<String, EditError> {
    let old = edit.old_text.as_str();
    if old.trim().is_empty() {
        return Err(EditError::Empty { index });
    }
    match matching::exact(text, old) {
        (Some(first), Some(second)) => Err(EditError::Ambiguous {
            index,
            count: 2,
            lines: format!(
                "{} and {}",
                matching::line_of(text, first),
                matching::line_of(text, second)
            ),
        }),
        (Some(at), None) => {
            let mut out = String::with_capacity(text.len() - old.len() + edit.new_text.len());
            out.push_str(&text[..at]);
            out.push_str(&edit.new_text);
            out.push_str(&text[at + old.len()..]);
            Ok(out)
        }
        (None, _) => {
            poll.now()?;
            replace_lines_loosely(text, edit, index, max_len, poll)
        }
    }
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
fn replace_lines_loosely(
    text: &str,
    edit: &Edit,
    index: usize,
    max_len: usize,
    poll: &mut Poll,
) -> Result<String, EditError> {
    let (old_lines, old_nl) = split_lines(&edit.old_text);
    let (new_lines, new_nl) = split_lines(&edit.new_text);
    let wanted: Vec<&str> = old_lines.iter().map(|l| l.trim()).collect();
    let found = matching::loose_matches(text, &wanted, 3, poll)?;
    let m = wanted.len();
    match found.len() {
        0 => Err(EditError::NotFound {
            index,
            quoted: quote(&edit.old_text),
        }),
        1 => {
            let begin = found[0].start;
            let run: Vec<(usize, &str)> = matching::lines(&text[begin..]).take(m).collect();
            let matched: Vec<&str> = run.iter().map(|&(_, line)| line).collect();
            let mut end = run
                .last()
                .map_or(begin, |&(start, line)| begin + start + line.len());
            // What the text keeps around the replacement bounds how large it may grow.
            let room = max_len.saturating_sub(text.len() - (end - begin));
            let replacement =
                reindent(&matched, &old_lines, &new_lines, room).map_err(|TooLarge| {
                    EditError::TooLarge {
                        index,
                        limit: max_len,
                    }
                })?;
            poll.now()?;
            let mut out = String::with_capacity(text.len() + replacement.len());
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
                .map(|found| (found.line + 1).to_string())
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

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_core::toolset::CallContext;

    fn edit(old: &str, new: &str) -> Edit {
        Edit {
            old_text: old.into(),
            new_text: new.into(),
        }
    }

    fn apply(text: &str, edits: &[Edit]) -> Result<String, EditError> {
        let ctx = CallContext::default();
        apply_edits(text, edits, usize::MAX, &mut Poll::new(&ctx))
    }

    /// The check most tests make: the edits apply to `text`, and give exactly `want`.
    #[track_caller]
    fn assert_applies(text: &str, edits: &[Edit], want: &str) {
        match apply(text, edits) {
            Ok(out) => assert_eq!(out, want),
            Err(e) => panic!("the edits should apply to {text:?}: {e:?}"),
        }
    }

    #[test]
    fn exact_match_replaces_the_only_occurrence_literally() {
        assert_applies("a $1 b\nc\n", &[edit("$1", "$&$$")], "a $&$$ b\nc\n");
    }

    #[test]
    fn repeated_and_overlapping_matches_are_ambiguous() {
        let err = apply("x\ny\nx\n", &[edit("x", "z")]).expect_err("ambiguous");
        assert!(matches!(err, EditError::Ambiguous { ref lines, .. } if lines == "1 and 3"));
        assert!(apply("aaa", &[edit("aa", "b")]).is_err());
        let err = apply("  x\ny\n x\n\tx\n", &[edit("x ", "z")]).expect_err("ambiguous");
        assert!(
            matches!(err, EditError::Ambiguous { count: 3, ref lines, .. } if lines == "1, 3, 4"),
            "{err:?}"
        );
    }

    #[test]
    fn loose_match_reindents_like_the_reference_example() {
        let file = "    if (a) {\n        b();\n    }\n";
        assert_applies(
            file,
            &[edit("if (a) {\n  b();\n}", "if (a) {\n      c();\n  }")],
            "    if (a) {\n            c();\n      }\n",
        );
    }

    #[test]
    fn loose_match_converts_space_indents_to_a_tab_file() {
        let file = "fn f() {\n\tlet a = 1;\n\tlet b = 2;\n}\n";
        assert_applies(
            file,
            &[edit(
                "let a = 1;\nlet b = 2;",
                "let a = 1;\nif a {\n    let b = 3;\n}",
            )],
            "fn f() {\n\tlet a = 1;\n\tif a {\n\t\tlet b = 3;\n\t}\n}\n",
        );
    }

    #[test]
    fn dedent_clamps_at_zero() {
        assert_applies("  x\n  y\n", &[edit("    x\n    y", "x\ny")], "x\ny\n");
    }

    #[test]
    fn loose_match_keeps_the_missing_final_newline() {
        assert_applies("a\n  b  ", &[edit("b", "c")], "a\n  c  ");
        assert_applies("a\n  b c", &[edit("b c  \n", "d\n")], "a\n  d");
    }

    #[test]
    fn a_failing_edit_fails_the_whole_set() {
        let err = apply("a\nb\n", &[edit("a", "x"), edit("nope", "y")]).expect_err("fails");
        assert!(matches!(err, EditError::NotFound { index: 2, .. }));
    }

    #[test]
    fn a_reindent_past_the_size_limit_is_refused() {
        let file = format!("{}x\n", " ".repeat(10_000));
        let err = {
            let ctx = CallContext::default();
            apply_edits(
                &file,
                &[edit("x ", &"\t\ty\n".repeat(1000))],
                1 << 20,
                &mut Poll::new(&ctx),
            )
        }
        .expect_err("too large");
        assert_eq!(
            err,
            EditError::TooLarge {
                index: 1,
                limit: 1 << 20
            }
        );
    }

    #[test]
    fn a_timed_out_call_applies_nothing() {
        let ctx = CallContext::with_timeout(Default::default(), Some(std::time::Duration::ZERO));
        let err = apply_edits("a\n", &[edit("a", "b")], usize::MAX, &mut Poll::new(&ctx))
            .expect_err("stopped");
        assert!(matches!(err, EditError::Stopped(Stop::TimedOut(_))));
    }
}
