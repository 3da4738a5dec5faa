//! The result budget: the most bytes one tool answer may carry, in every mode.
//!
//! Agent harnesses do not pass a large tool result to the model: above a few tens of KB they
//! save it to a file of their own and tell the model to read that file with a built-in tool,
//! which leads the model out of this server (its guard, its call log). So every answer is kept
//! under one budget, and a tool that has more to say answers with what fits, cut at a natural
//! boundary (a line, an entry, a match), and says exactly how to get the rest.
//!
//! This module is the one mechanism behind that: the budget and how an answer is measured
//! ([`ResultBudget::cost`]: the text plus the structured copy, as sent), the opaque cursor a
//! listing resumes from ([`Cursor`]), the fitting of entries into a page ([`Page`]), the note
//! that says how to continue, and the last resort the core applies to any answer that still
//! does not fit ([`ResultBudget::enforce`]). The tools decide where their natural boundaries are;
//! the numbers and the words are decided here, once.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value};

use crate::toolset::ToolOutput;

/// The default result budget in bytes. Claude Code passes a 40 KB tool result to the model
/// whole and saves a 61 KB one to a file instead; this stays under the smaller.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 40_000;

/// The environment variable that sets the budget when `--max-result-bytes` is not given.
pub const MAX_RESULT_BYTES_ENV: &str = "FILESYSTEM_MAX_RESULT_BYTES";

/// The smallest budget accepted: room for a few lines and the note that says how to go on.
pub const MIN_RESULT_BYTES: usize = 1024;

/// Bytes kept free in a page for the continuation note and the structured fields that say how to
/// continue (`next_cursor`, `next_offset`, `truncated`, …), so that adding them never pushes a
/// page over the budget.
pub const NOTE_RESERVE: usize = 400;

/// The most bytes one tool answer carries: its text plus its structured content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultBudget(usize);

impl Default for ResultBudget {
    fn default() -> Self {
        ResultBudget(DEFAULT_MAX_RESULT_BYTES)
    }
}

impl ResultBudget {
    /// A budget of `bytes`, never less than [`MIN_RESULT_BYTES`].
    pub fn new(bytes: usize) -> Self {
        ResultBudget(bytes.max(MIN_RESULT_BYTES))
    }

    /// The budget in bytes.
    pub fn bytes(self) -> usize {
        self.0
    }

    /// What a page's entries may take: the budget less [`NOTE_RESERVE`].
    pub fn for_entries(self) -> usize {
        self.0 - NOTE_RESERVE
    }

    /// What `output` costs against the budget: the bytes of its text plus those of its
    /// structured content as compact JSON (both as they are sent, before the JSON-RPC framing
    /// escapes the text). Media blocks (images, sounds) are not text a harness measures and are
    /// not counted.
    pub fn cost(output: &ToolOutput) -> usize {
        output.text.len() + output.structured.as_ref().map_or(0, json_len)
    }

    /// True when `output` is within the budget. Costs at most about a budget's worth of
    /// serialising: the structured copy is measured only until it is known not to fit.
    pub fn fits(self, output: &ToolOutput) -> bool {
        let Some(room) = self.0.checked_sub(output.text.len()) else {
            return false;
        };
        match &output.structured {
            None => true,
            Some(v) if upper_bound(v) <= room => true,
            Some(v) => json_len_within(v, room).is_some(),
        }
    }

    /// The last resort for an answer that is still over the budget (a tool with no natural
    /// boundary of its own, such as a large diff): its text is cut at the last line ending that
    /// fits (or within a line when none does), a note says so, and its structured copy is left
    /// out when it would not fit beside the cut text. An answer within the budget is returned as
    /// it is, untouched.
    pub fn enforce(self, mut output: ToolOutput) -> ToolOutput {
        if self.fits(&output) {
            return output;
        }
        let total = output.text.len();
        let structured = output.structured.as_ref().map_or(0, json_len);
        let keep_structured = structured + NOTE_RESERVE + 64 <= self.0 / 2;
        let room = self.for_entries() - if keep_structured { structured } else { 0 };
        let cut = cut_at_line(&output.text, room);
        output.text.truncate(cut);
        if !output.text.is_empty() && !output.text.ends_with('\n') {
            output.text.push('\n');
        }
        output.text.push_str(&format!(
            "[answer cut at the result budget of {} bytes: {} of its {} bytes shown; ask for less (a narrower path, pattern or range)]",
            thousands(self.0 as u64),
            thousands(cut as u64),
            thousands(total as u64),
        ));
        if !keep_structured {
            output.structured = None;
        }
        output
    }
}

/// The length of `value` as compact JSON.
pub fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Counting bytes cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The length of `value` as compact JSON, or `None` as soon as it is known to exceed `limit`
/// (the serialising stops there).
pub fn json_len_within(value: &Value, limit: usize) -> Option<usize> {
    struct Count(usize, usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            if self.0 > self.1 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0, limit);
    serde_json::to_writer(&mut count, value).ok()?;
    Some(count.0)
}

/// A bound the compact JSON of `value` never exceeds, found without writing it: every string
/// byte counted as the six of a `\u00XX` escape. Cheap, for answers far under the budget.
fn upper_bound(value: &Value) -> usize {
    let mut total = 0usize;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        total += match v {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(_) => 24,
            Value::String(s) => 2 + 6 * s.len(),
            Value::Array(items) => {
                stack.extend(items.iter());
                2 + items.len()
            }
            Value::Object(members) => {
                for (k, item) in members {
                    total += 3 + 6 * k.len();
                    stack.push(item);
                }
                2 + members.len()
            }
        };
    }
    total
}

/// The longest prefix of `text` of at most `room` bytes that ends after a line ending, or, when
/// no line ending is in reach, the longest that ends on a character boundary.
pub fn cut_at_line(text: &str, room: usize) -> usize {
    if text.len() <= room {
        return text.len();
    }
    let head = &text.as_bytes()[..room];
    match memchr::memrchr(b'\n', head) {
        Some(i) => i + 1,
        None => floor_char_boundary(text, room),
    }
}

/// The largest character boundary of `text` at or below `at`.
pub fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `n` with commas between thousands (`20,000`), as the notes write counts.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Where a cut listing resumes: the position of the next entry in the listing's order, a digest
/// of the entry shown last (so a listing that changed underneath is noticed instead of silently
/// skipping or repeating entries) and a tag over both and the call's other arguments (so a
/// cursor is only taken back by the call it was made for).
///
/// A cursor names no path: a tool lists again from its arguments, each re-resolved through the
/// guard like any argument, and skips to the position. Editing a cursor can at most move within
/// a listing the caller may see anyway, and the tag refuses most such edits. The digests are
/// those of the binary that wrote them; a cursor kept across an upgrade is refused as stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// How many entries of the listing were shown before this page.
    pub position: u64,
    /// [`entry_digest`] of the entry just before `position`.
    pub anchor: u64,
}

/// Why a cursor was not taken back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CursorError {
    /// Not a cursor this server wrote, or not for these arguments.
    #[error("'cursor' is not one this tool gave for these arguments; call it again without a cursor to start from the beginning")]
    Foreign,
    /// The listing changed since the cursor was given.
    #[error("the listing changed since this cursor was given (the entry it continues after is gone or moved); call the tool again without a cursor to start from the beginning")]
    Stale,
}

/// The argument a paged tool takes its cursor from.
pub const CURSOR_ARG: &str = "cursor";

impl Cursor {
    /// The cursor string for resuming `tool` called with `args` at this position.
    pub fn encode(self, tool: &str, args: &Map<String, Value>) -> String {
        format!(
            "{}.{:016x}.{:016x}",
            self.position,
            self.anchor,
            tag(tool, args, self.position, self.anchor)
        )
    }

    /// The cursor in `args` of a call of `tool`, if one was given. `Err` when it is not one this
    /// server gave for the same tool and the same other arguments.
    pub fn decode(tool: &str, args: &Map<String, Value>) -> Result<Option<Cursor>, CursorError> {
        let raw = match args.get(CURSOR_ARG) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(s)) if s.is_empty() => return Ok(None),
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(CursorError::Foreign),
        };
        let mut parts = raw.split('.');
        let (Some(position), Some(anchor), Some(tagged), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(CursorError::Foreign);
        };
        let position: u64 = position.parse().map_err(|_| CursorError::Foreign)?;
        let anchor = u64::from_str_radix(anchor, 16).map_err(|_| CursorError::Foreign)?;
        let tagged = u64::from_str_radix(tagged, 16).map_err(|_| CursorError::Foreign)?;
        if position == 0 || tagged != tag(tool, args, position, anchor) {
            return Err(CursorError::Foreign);
        }
        Ok(Some(Cursor { position, anchor }))
    }

    /// `Ok` when `entry` (the listing's entry at `position - 1` now) is the one the cursor was
    /// given after; [`CursorError::Stale`] otherwise.
    pub fn check_anchor(self, entry: Option<&[u8]>) -> Result<(), CursorError> {
        match entry {
            Some(e) if entry_digest(e) == self.anchor => Ok(()),
            _ => Err(CursorError::Stale),
        }
    }
}

/// The digest that identifies an entry of a listing (its shown text) in a cursor.
pub fn entry_digest(entry: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    entry.hash(&mut h);
    h.finish()
}

/// The tag over a cursor's fields and the call's arguments other than the cursor itself (and a
/// gateway's `root`, which the daemon consumes), taken in key order so that a client that sends
/// the same arguments in another order still resumes.
fn tag(tool: &str, args: &Map<String, Value>, position: u64, anchor: u64) -> u64 {
    let mut h = DefaultHasher::new();
    "cursor-v1".hash(&mut h);
    tool.hash(&mut h);
    position.hash(&mut h);
    anchor.hash(&mut h);
    let mut keys: Vec<&String> = args
        .keys()
        .filter(|k| k.as_str() != CURSOR_ARG && k.as_str() != "root")
        .collect();
    keys.sort();
    for key in keys {
        key.hash(&mut h);
        args[key].to_string().hash(&mut h);
    }
    h.finish()
}

/// The text note of a listing cut by the budget: which entries were shown (of how many, when the
/// tool knows) and the cursor that continues it (`continue with cursor="…"`), which a model
/// copies into its next call.
pub fn cursor_note(what: &str, first: u64, last: u64, total: Option<u64>, cursor: &str) -> String {
    let of = total.map_or(String::new(), |t| format!(" of {}", thousands(t)));
    format!(
        "[{what} {}–{}{of} shown; continue with cursor=\"{cursor}\"]",
        thousands(first),
        thousands(last)
    )
}

/// Fits entries into a page: takes entries while their cost keeps the page within `room`.
///
/// `cost` is what one entry adds (its text and structured copy); the page always takes at least
/// one entry when it is empty, so that a listing advances even past an entry larger than the
/// budget (the tool cuts that entry itself).
#[derive(Debug)]
pub struct Page {
    room: usize,
    used: usize,
    taken: usize,
    full: bool,
}

impl Page {
    /// An empty page of `room` bytes.
    pub fn new(room: usize) -> Self {
        Page {
            room,
            used: 0,
            taken: 0,
            full: false,
        }
    }

    /// True when an entry of `cost` bytes fits; counts it when it does. Once an entry did not
    /// fit the page is full and takes nothing more, so the page is a prefix of the listing.
    pub fn take(&mut self, cost: usize) -> bool {
        if self.full {
            return false;
        }
        if self.taken > 0 && self.used + cost > self.room {
            self.full = true;
            return false;
        }
        self.used += cost;
        self.taken += 1;
        true
    }

    /// True once an entry was refused.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// How many entries were taken.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// The bytes taken so far.
    pub fn used(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("object"),
        }
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(20_000), "20,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn a_cursor_round_trips_only_with_the_same_arguments() {
        let a = args(json!({"path": ".", "pattern": "*.rs"}));
        let c = Cursor {
            position: 42,
            anchor: entry_digest(b"src/x.rs"),
        };
        let s = c.encode("find_files", &a);
        let mut with = a.clone();
        with.insert(CURSOR_ARG.into(), json!(s));
        assert_eq!(Cursor::decode("find_files", &with), Ok(Some(c)));
        assert_eq!(
            Cursor::decode("directory_tree", &with),
            Err(CursorError::Foreign)
        );
        let mut other = with.clone();
        other.insert("pattern".into(), json!("*.md"));
        assert_eq!(
            Cursor::decode("find_files", &other),
            Err(CursorError::Foreign)
        );
        let tampered = s.replacen("42.", "41.", 1);
        with.insert(CURSOR_ARG.into(), json!(tampered));
        assert_eq!(
            Cursor::decode("find_files", &with),
            Err(CursorError::Foreign)
        );
        with.insert(CURSOR_ARG.into(), json!("../../etc/passwd"));
        assert_eq!(
            Cursor::decode("find_files", &with),
            Err(CursorError::Foreign)
        );
        assert!(c.check_anchor(Some(b"src/x.rs")).is_ok());
        assert_eq!(c.check_anchor(Some(b"src/y.rs")), Err(CursorError::Stale));
    }

    #[test]
    fn enforce_cuts_at_a_line_and_stays_within_the_budget() {
        let budget = ResultBudget::new(2000);
        let text: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let out = budget.enforce(ToolOutput::text(text.clone()));
        assert!(ResultBudget::cost(&out) <= 2000, "{}", out.text.len());
        let (kept, note) = out.text.rsplit_once('\n').expect("note line");
        assert!(text.starts_with(&format!("{kept}\n")));
        assert!(
            note.starts_with("[answer cut at the result budget of 2,000 bytes"),
            "{note}"
        );
        let small = ToolOutput::text("short");
        assert_eq!(budget.enforce(small.clone()), small);
    }

    #[test]
    fn a_page_takes_a_prefix_and_always_one_entry() {
        let mut page = Page::new(10);
        assert!(page.take(25));
        assert!(!page.take(1));
        let mut page = Page::new(10);
        assert!(page.take(4) && page.take(6) && !page.take(1) && !page.take(0));
        assert_eq!(page.taken(), 2);
    }
}
