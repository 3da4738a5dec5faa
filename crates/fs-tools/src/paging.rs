//! Listings cut by the result budget and continued by cursor: the one pager the line-per-entry
//! tools share (`list_directory`, `list_directory_with_sizes`, `find_files`, `list_trash`).
//!
//! A tool lists everything it would answer, in its usual order, and hands the entries here. An
//! answer that fits and was not asked to continue is sent exactly as the tool made it. Otherwise
//! the page holds the entries from the cursor's position that fit, and, when more follow, a note
//! `continue with cursor="…"` and `next_cursor` in the structured content. A cursor is a position
//! in the listing (see [`Cursor`]): each page lists again from the call's own arguments, through
//! the guard, so a cursor can never name a path.

use mcp_core::budget::{cursor_note, entry_digest, json_len, Cursor, Page, ResultBudget};
use mcp_core::toolset::ToolOutput;
use serde_json::{json, Map, Value};

use super::error::FsError;

/// The cursor a call of `tool` continues from, or `None` for the first page; a cursor this tool
/// did not give for these arguments is `InvalidArgument` saying to start again without one.
pub(crate) fn cursor(tool: &str, args: &Map<String, Value>) -> Result<Option<Cursor>, FsError> {
    Cursor::decode(tool, args).map_err(|e| FsError::InvalidArgument(e.to_string()))
}

/// Checks that the entry before `cursor`'s position is the one it was given after.
pub(crate) fn check_anchor(cursor: Cursor, before: Option<&[u8]>) -> Result<(), FsError> {
    cursor
        .check_anchor(before)
        .map_err(|e| FsError::InvalidArgument(e.to_string()))
}

/// One listing, as a tool would answer it whole.
pub(crate) struct Listing<'a> {
    /// The tool's name (cursors are only taken back by the tool that gave them).
    pub tool: &'a str,
    /// The call's arguments (the cursor is tied to them).
    pub args: &'a Map<String, Value>,
    /// What each page starts with (a count, a heading); may be empty.
    pub header: String,
    /// The entries, one line each, without line endings.
    pub lines: Vec<String>,
    /// The structured copy of each entry, when the tool has one (`list_trash`).
    pub items: Option<(&'static str, Vec<Value>)>,
    /// What follows the last entry on the last page (totals, a cap's note); may be empty.
    pub footer: String,
    /// What the entries are called in the note (`entries`, `paths`).
    pub noun: &'static str,
}

impl Listing<'_> {
    /// The answer for this call: `whole` (the tool's usual answer) when it fits and no cursor
    /// was given, else the page the cursor (or the start) asks for.
    pub(crate) fn answer(
        self,
        whole: ToolOutput,
        budget: ResultBudget,
    ) -> Result<ToolOutput, FsError> {
        let from = cursor(self.tool, self.args)?;
        if from.is_none() && budget.fits(&whole) {
            return Ok(whole);
        }
        let start = match from {
            None => 0,
            Some(c) => {
                let at = usize::try_from(c.position).unwrap_or(usize::MAX);
                check_anchor(
                    c,
                    at.checked_sub(1)
                        .and_then(|i| self.lines.get(i))
                        .map(|l| l.as_bytes()),
                )?;
                at
            }
        };
        let fixed = self.header.len() + self.footer.len();
        let mut page = Page::new(budget.for_entries().saturating_sub(fixed));
        let mut end = start;
        for (i, line) in self.lines.iter().enumerate().skip(start) {
            let item = self
                .items
                .as_ref()
                .and_then(|(_, v)| v.get(i))
                .map_or(0, |v| json_len(v) + 1);
            if !page.take(line.len() + 1 + item) {
                break;
            }
            end = i + 1;
        }
        let mut text = self.header;
        text.push_str(&self.lines[start..end].join("\n"));
        let mut structured = Map::new();
        if let Some((key, items)) = &self.items {
            structured.insert((*key).into(), json!(items[start..end]));
        }
        if end < self.lines.len() {
            let next = Cursor {
                position: end as u64,
                anchor: entry_digest(self.lines[end - 1].as_bytes()),
            }
            .encode(self.tool, self.args);
            text.push('\n');
            text.push_str(&cursor_note(
                self.noun,
                start as u64 + 1,
                end as u64,
                Some(self.lines.len() as u64),
                &next,
            ));
            structured.insert("next_cursor".into(), json!(next));
            structured.insert("truncated".into(), json!(true));
        } else {
            text.push_str(&self.footer);
            structured.insert("truncated".into(), json!(false));
        }
        structured.insert("total".into(), json!(self.lines.len()));
        Ok(ToolOutput::structured(text, Value::Object(structured)))
    }
}
