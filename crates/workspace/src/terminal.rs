//! Showing names that others wrote (file names from a mirror, paths and tool names from a
//! transcript) on a person's terminal without letting them drive it.
//!
//! A name may hold any character. Sent raw, ESC starts a terminal control sequence (move the
//! cursor, rewrite what is on screen, set the window title), CR returns to the start of the line
//! so the rest overwrites what came before, and the Unicode direction overrides reorder what is
//! shown. Every name the audit commands and the report print goes through [`escape_controls`]
//! first, and every longer text from a file (a diff, a tool's answer) through [`escape_text`]:
//! the one place that decides how such characters look.

use std::borrow::Cow;

/// True for the characters a name may not carry to a terminal as they are: the C0 and C1
/// control characters and DEL, and the Unicode bidirectional formatting characters (which can
/// make text read in another order than it is stored).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character (ESC, CR, LF, TAB, DEL, C1…) and bidirectional override
/// written as a visible escape (`\u{1b}`, `\r`, `\n`, `\t`, `\u{202e}`); `s` itself when it
/// has none, which is the usual case. A backslash is kept as it is: the result is for reading,
/// not for parsing back.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    escape_where(s, is_unsafe)
}

/// Text of many lines (a file's content, a diff, a tool's answer) made safe for a terminal the
/// same way as [`escape_controls`], except that line feeds and tabs are kept: they only move the
/// cursor down or forward, so they cannot hide or rewrite what is already shown, and the text
/// keeps its lines and columns. A CR is still escaped: it would let a line overwrite itself.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c != '\n' && c != '\t' && is_unsafe(c))
}

/// `s` with each character that `unsafe_here` picks written as its visible escape.
fn escape_where(s: &str, unsafe_here: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&unsafe_here) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_here(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_direction_overrides_are_shown_escaped() {
        assert_eq!(escape_controls("plain/name.txt"), "plain/name.txt");
        assert!(matches!(escape_controls("ünïcode"), Cow::Borrowed(_)));
        assert_eq!(escape_controls("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape_controls("x\ry\tz\n"), "x\\ry\\tz\\n");
        assert_eq!(escape_controls("\u{7f}\u{9b}"), "\\u{7f}\\u{9b}");
        assert_eq!(escape_controls("abc\u{202e}txt.exe"), "abc\\u{202e}txt.exe");
    }

    #[test]
    fn text_keeps_its_lines_and_tabs_but_nothing_else() {
        assert!(matches!(escape_text("a\tb\nc\n"), Cow::Borrowed(_)));
        assert_eq!(
            escape_text("ok\n\u{1b}[1A\u{1b}[2Kgone\rx\u{202e}\n"),
            "ok\n\\u{1b}[1A\\u{1b}[2Kgone\\rx\\u{202e}\n"
        );
    }
}
