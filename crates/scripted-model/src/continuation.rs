//! Reading how a cut answer says to go on.
//!
//! A tool of this project that cuts an answer at the result budget ends it with a note that names
//! the argument to pass next: `continue with offset=813` for a file read, `continue with
//! cursor="…"` for a listing. The scripted model reads the note as a model would, from the text
//! the harness passed back (harnesses pass the text content on; structured content may not reach
//! the model at all), and the last note in the text counts: the note ends the answer, so a file
//! that happens to contain the words earlier does not steer the paging.

use serde_json::Value;

/// What a cut answer says to pass to get the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Continuation {
    /// `continue with offset=N`: read on from line N.
    Offset(u64),
    /// `continue with cursor="C"`: list on from the opaque cursor C.
    Cursor(String),
}

const OFFSET_NOTE: &str = "continue with offset=";
const CURSOR_NOTE: &str = "continue with cursor=\"";
const OFFSET_FIELD: &str = "\"next_offset\":";
const CURSOR_FIELD: &str = "\"next_cursor\":";

/// Where the last `marker` is, and the text after it.
fn last_after<'a>(text: &'a str, marker: &str) -> Option<(usize, &'a str)> {
    text.rfind(marker)
        .map(|at| (at, &text[at + marker.len()..]))
}

/// [`last_after`] for a JSON field name, past the blanks after its colon.
fn last_field<'a>(text: &'a str, field: &str) -> Option<(usize, &'a str)> {
    last_after(text, field).map(|(at, rest)| (at, rest.trim_start()))
}

/// A line number at the start of `rest` (thousands separators allowed).
fn offset(rest: &str) -> Option<Continuation> {
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok().map(Continuation::Offset)
}

/// A cursor up to the closing quote.
fn cursor(rest: &str) -> Option<Continuation> {
    rest.find('"')
        .map(|end| Continuation::Cursor(rest[..end].to_string()))
}

impl Continuation {
    /// The continuation a result names, if any: the last of its notes (`continue with
    /// offset=N`, `continue with cursor="C"`) or, where a harness showed the model the result's
    /// structured content in place of its text (Claude Code and Codex do whenever a result has
    /// one), the last `"next_offset": N` or `"next_cursor": "C"` field in it.
    pub fn find(text: &str) -> Option<Continuation> {
        [
            last_after(text, OFFSET_NOTE).and_then(|(at, rest)| offset(rest).map(|c| (at, c))),
            last_after(text, CURSOR_NOTE).and_then(|(at, rest)| cursor(rest).map(|c| (at, c))),
            last_field(text, OFFSET_FIELD).and_then(|(at, rest)| offset(rest).map(|c| (at, c))),
            last_field(text, CURSOR_FIELD)
                .and_then(|(at, rest)| rest.strip_prefix('"').and_then(cursor).map(|c| (at, c))),
        ]
        .into_iter()
        .flatten()
        .max_by_key(|(at, _)| *at)
        .map(|(_, found)| found)
    }

    /// The arguments of the next page: the previous call's, with the offset or cursor set.
    pub fn apply(&self, previous: &Value) -> Value {
        let mut next = match previous {
            Value::Object(map) => map.clone(),
            _ => serde_json::Map::new(),
        };
        match self {
            Continuation::Offset(n) => next.insert("offset".into(), Value::from(*n)),
            Continuation::Cursor(c) => next.insert("cursor".into(), Value::from(c.as_str())),
        };
        Value::Object(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_offset_note_is_read_with_or_without_thousands_separators() {
        let text = "a\nb\n[lines 1–812 of 20,000 shown; continue with offset=813]";
        assert_eq!(Continuation::find(text), Some(Continuation::Offset(813)));
        let text = "[lines 1–2 of 20,000 shown; continue with offset=12,813]";
        assert_eq!(Continuation::find(text), Some(Continuation::Offset(12813)));
    }

    #[test]
    fn a_cursor_note_is_read_up_to_its_closing_quote() {
        let text = "x\ny\n[2 of 9 shown; continue with cursor=\"abc-12_=\"]";
        assert_eq!(
            Continuation::find(text),
            Some(Continuation::Cursor("abc-12_=".into()))
        );
    }

    #[test]
    fn the_last_note_counts_and_a_text_without_one_has_none() {
        let text = "continue with offset=5 appears in the file\n[continue with cursor=\"c\"]";
        assert_eq!(
            Continuation::find(text),
            Some(Continuation::Cursor("c".into()))
        );
        assert_eq!(Continuation::find("all shown"), None);
        assert_eq!(Continuation::find("continue with offset=]"), None);
    }

    #[test]
    fn a_structured_result_continues_by_its_next_fields() {
        let text = "Wall time: 0.1 seconds\nOutput:\n{\"next_offset\":708,\"truncated\":true}";
        assert_eq!(Continuation::find(text), Some(Continuation::Offset(708)));
        let text = r#"{"matches": [], "next_cursor": "396.ab", "truncated": true}"#;
        assert_eq!(
            Continuation::find(text),
            Some(Continuation::Cursor("396.ab".into()))
        );
        assert_eq!(
            Continuation::find(r#"{"matches": [], "next_cursor": null}"#),
            None
        );
    }

    #[test]
    fn applying_keeps_the_other_arguments() {
        let next = Continuation::Offset(9).apply(&json!({"path": "a", "offset": 1, "limit": 8}));
        assert_eq!(next, json!({"path": "a", "offset": 9, "limit": 8}));
        let next = Continuation::Cursor("k".into()).apply(&json!({"path": "."}));
        assert_eq!(next, json!({"path": ".", "cursor": "k"}));
    }
}
