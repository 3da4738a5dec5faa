//! The report as aligned text tables (for people) or long-format CSV (for spreadsheets).

use std::fmt::Write as _;

use super::lines::MAX_LINE_BYTES;
use super::stats::{Breakdown, Report, Section};

/// The most characters a text table shows of one cell; a longer cell is cut, its end marked
/// with `…` (the JSON and CSV outputs carry it whole). A model names its tools: one name of a
/// megabyte would otherwise widen its column, and every line of the table, to a megabyte.
pub const MAX_CELL_CHARS: usize = 200;

/// The report as readable text: one block per input kind, aligned tables within.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    for (name, section) in sections(report) {
        text_section(&mut out, name, section);
    }
    out
}

fn sections(report: &Report) -> Vec<(&'static str, &Section)> {
    let mut v = Vec::new();
    if let Some(s) = &report.transcripts {
        v.push(("transcripts", s));
    }
    if let Some(s) = &report.call_logs {
        v.push(("call logs", s));
    }
    v
}

fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".into(), |s| format!("{:.1}%", s * 100.0))
}

fn text_section(out: &mut String, name: &str, s: &Section) {
    let i = &s.inputs;
    // Line types are the transcript writer's text: shown like every other name.
    let skipped: Vec<String> = i
        .skipped_line_types
        .iter()
        .map(|(k, v)| format!("{} {v}", printable(k)))
        .collect();
    let mut unread = String::new();
    if i.long_lines > 0 {
        let _ = write!(
            unread,
            "; {} line(s) over {} MiB skipped",
            i.long_lines,
            MAX_LINE_BYTES >> 20
        );
    }
    if i.unreadable_files > 0 {
        let _ = write!(
            unread,
            "; {} unreadable file(s) skipped",
            i.unreadable_files
        );
    }
    let _ = writeln!(
        out,
        "== {name}: {} files, {} lines; {} malformed, {} duplicate tool uses, {} results without a call{unread}{}",
        i.files,
        i.lines,
        i.malformed_lines,
        i.duplicate_tool_uses,
        i.results_without_call,
        if skipped.is_empty() {
            String::new()
        } else {
            format!("; skipped line types: {}", skipped.join(", "))
        }
    );
    let a = &s.total.adoption;
    let _ = writeln!(
        out,
        "sessions: {}  calls: {} (work: {}, discovery: {})  file writes: {}  through this project's tools: {} ({})\n",
        s.sessions,
        s.total.calls,
        s.total.work_calls,
        s.total.discovery_calls,
        a.writes,
        a.ours,
        percent(a.share)
    );

    let mut t = Table::new(&[
        "interface",
        "calls",
        "writes",
        "errors",
        "error rate",
        "retried",
        "no result",
    ]);
    for (iface, st) in &s.total.interfaces {
        t.row(vec![
            iface.to_string(),
            st.calls.to_string(),
            st.writes.to_string(),
            st.errors.to_string(),
            percent(st.error_rate),
            st.retried_after_error.to_string(),
            st.no_result.to_string(),
        ]);
    }
    t.print(out, "Calls by interface");

    let mut t = Table::new(&["interface", "tool", "calls"]);
    for (iface, st) in &s.total.interfaces {
        for (tool, n) in &st.by_tool {
            t.row(vec![iface.to_string(), tool.clone(), n.to_string()]);
        }
    }
    t.print(out, "Calls by tool");

    let mut t = Table::new(&["interface", "reason", "errors"]);
    for (iface, st) in &s.total.interfaces {
        for (reason, n) in &st.errors_by_reason {
            t.row(vec![iface.to_string(), reason.clone(), n.to_string()]);
        }
    }
    t.print(out, "Errors by reason");

    let mut t = Table::new(&["interface", "reason", "token", "refusals"]);
    for (iface, st) in &s.total.interfaces {
        for (reason, tokens) in &st.refused_tokens {
            for (token, n) in tokens {
                t.row(vec![
                    iface.to_string(),
                    reason.clone(),
                    token.clone(),
                    n.to_string(),
                ]);
            }
        }
    }
    t.print(out, "Refused tokens (pipe)");

    let mut t = Table::new(&["interface", "stages", "calls"]);
    let mut c = Table::new(&["interface", "command", "stages"]);
    for (iface, st) in &s.total.interfaces {
        for (len, n) in &st.pipelines.by_length {
            t.row(vec![iface.to_string(), len.to_string(), n.to_string()]);
        }
        for (cmd, n) in &st.pipelines.commands {
            c.row(vec![iface.to_string(), cmd.clone(), n.to_string()]);
        }
    }
    t.print(out, "Pipeline lengths");
    c.print(out, "Commands in pipelines");

    let mut t = Table::new(&[
        "decile",
        "calls",
        "writes",
        "ours",
        "share",
        "builtin",
        "pipe",
        "filesystem",
    ]);
    for b in &s.by_position {
        let w = |k: &str| {
            b.adoption
                .writes_by_interface
                .get(k)
                .copied()
                .unwrap_or(0)
                .to_string()
        };
        t.row(vec![
            b.decile.to_string(),
            b.calls_by_interface.values().sum::<usize>().to_string(),
            b.adoption.writes.to_string(),
            b.adoption.ours.to_string(),
            percent(b.adoption.share),
            w("builtin"),
            w("pipe"),
            w("filesystem"),
        ]);
    }
    t.print(
        out,
        "Adoption by position (decile of each session's calls; writes by interface)",
    );

    let mut t = Table::new(&[
        "session", "parent", "calls", "writes", "ours", "share", "errors", "retried",
    ]);
    for sess in &s.per_session {
        let b = &sess.breakdown;
        t.row(vec![
            sess.id.clone(),
            sess.parent.clone().unwrap_or_else(|| "-".into()),
            b.calls.to_string(),
            b.adoption.writes.to_string(),
            b.adoption.ours.to_string(),
            percent(b.adoption.share),
            b.interfaces
                .values()
                .map(|i| i.errors)
                .sum::<usize>()
                .to_string(),
            b.interfaces
                .values()
                .map(|i| i.retried_after_error)
                .sum::<usize>()
                .to_string(),
        ]);
    }
    t.print(out, "Sessions");
}

/// A table whose columns are as wide as their widest cell; numbers align right.
struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row. Names come from transcripts a model wrote: control characters (terminal
    /// escape sequences among them) are shown escaped, never sent to the terminal, and a cell
    /// is cut to [`MAX_CELL_CHARS`].
    fn row(&mut self, cells: Vec<String>) {
        self.rows
            .push(cells.into_iter().map(|c| cell_text(&c)).collect());
    }

    fn print(&self, out: &mut String, title: &str) {
        let _ = writeln!(out, "{title}");
        if self.rows.is_empty() {
            let _ = writeln!(out, "  (none)\n");
            return;
        }
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|c| {
                std::iter::once(&self.headers)
                    .chain(&self.rows)
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        // A column is numeric when every body cell looks like a number, a percentage or '-'.
        let numeric: Vec<bool> = (0..self.headers.len())
            .map(|c| {
                self.rows.iter().all(|r| {
                    r.get(c).is_some_and(|s| {
                        s == "-"
                            || s.trim_end_matches('%')
                                .chars()
                                .all(|ch| ch.is_ascii_digit() || ch == '.')
                    })
                })
            })
            .collect();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::from(" ");
            for (c, &w) in widths.iter().enumerate() {
                let cell = r.get(c).map_or("", String::as_str);
                // Padded by hand: a width given to `format!` must fit in 16 bits.
                let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
                line.push(' ');
                if numeric[c] {
                    line.push_str(&pad);
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.push_str(&pad);
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out.push('\n');
    }
}

fn printable(s: &str) -> String {
    workspace::terminal::escape_controls(s).into_owned()
}

/// A table cell: [`printable`], cut to [`MAX_CELL_CHARS`].
fn cell_text(s: &str) -> String {
    let shown = printable(s);
    match shown.char_indices().nth(MAX_CELL_CHARS) {
        Some((cut, _)) => format!("{}…", &shown[..cut]),
        None => shown,
    }
}

/// The report as long-format CSV: `section,session,interface,metric,key,value`, one number a
/// row. An empty session means all sessions; an empty interface means all interfaces.
pub fn csv(report: &Report) -> String {
    let mut out = String::from("section,session,interface,metric,key,value\n");
    for (name, s) in sections(report) {
        let name = name.replace(' ', "_");
        let mut row = |session: &str, iface: &str, metric: &str, key: &str, value: String| {
            let cells = [name.as_str(), session, iface, metric, key, value.as_str()];
            let line: Vec<String> = cells.iter().map(|c| csv_cell(c)).collect();
            out.push_str(&line.join(","));
            out.push('\n');
        };
        let i = &s.inputs;
        row("", "", "input_files", "", i.files.to_string());
        row("", "", "input_lines", "", i.lines.to_string());
        row("", "", "malformed_lines", "", i.malformed_lines.to_string());
        row("", "", "long_lines", "", i.long_lines.to_string());
        row(
            "",
            "",
            "unreadable_files",
            "",
            i.unreadable_files.to_string(),
        );
        row(
            "",
            "",
            "duplicate_tool_uses",
            "",
            i.duplicate_tool_uses.to_string(),
        );
        row(
            "",
            "",
            "results_without_call",
            "",
            i.results_without_call.to_string(),
        );
        for (k, v) in &i.skipped_line_types {
            row("", "", "skipped_line_type", k, v.to_string());
        }
        row("", "", "sessions", "", s.sessions.to_string());
        csv_breakdown(&mut row, "", &s.total);
        for b in &s.by_position {
            let d = b.decile.to_string();
            for (iface, n) in &b.calls_by_interface {
                row("", iface, "position_calls", &d, n.to_string());
            }
            for (iface, n) in &b.adoption.writes_by_interface {
                row("", iface, "position_writes", &d, n.to_string());
            }
            row("", "", "position_writes", &d, b.adoption.writes.to_string());
            row("", "", "position_ours", &d, b.adoption.ours.to_string());
            row("", "", "position_share", &d, opt(b.adoption.share));
        }
        for sess in &s.per_session {
            csv_breakdown(&mut row, &sess.id, &sess.breakdown);
        }
    }
    out
}

fn csv_breakdown(
    row: &mut impl FnMut(&str, &str, &str, &str, String),
    session: &str,
    b: &Breakdown,
) {
    row(session, "", "calls", "", b.calls.to_string());
    row(session, "", "work_calls", "", b.work_calls.to_string());
    row(
        session,
        "",
        "discovery_calls",
        "",
        b.discovery_calls.to_string(),
    );
    row(session, "", "writes", "", b.adoption.writes.to_string());
    row(session, "", "writes_ours", "", b.adoption.ours.to_string());
    row(session, "", "adoption_share", "", opt(b.adoption.share));
    for (iface, st) in &b.interfaces {
        row(session, iface, "calls", "", st.calls.to_string());
        row(session, iface, "writes", "", st.writes.to_string());
        row(session, iface, "errors", "", st.errors.to_string());
        row(session, iface, "no_result", "", st.no_result.to_string());
        row(session, iface, "error_rate", "", opt(st.error_rate));
        row(
            session,
            iface,
            "retried_after_error",
            "",
            st.retried_after_error.to_string(),
        );
        for (tool, n) in &st.by_tool {
            row(session, iface, "calls_by_tool", tool, n.to_string());
        }
        for (reason, n) in &st.errors_by_reason {
            row(session, iface, "errors_by_reason", reason, n.to_string());
        }
        for (reason, tokens) in &st.refused_tokens {
            for (token, n) in tokens {
                let key = format!("{reason} {token}");
                row(session, iface, "refused_token", &key, n.to_string());
            }
        }
        for (len, n) in &st.pipelines.by_length {
            row(
                session,
                iface,
                "pipeline_length",
                &len.to_string(),
                n.to_string(),
            );
        }
        for (cmd, n) in &st.pipelines.commands {
            row(session, iface, "pipeline_command", cmd, n.to_string());
        }
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// Escapes control characters, then quotes a cell when it holds a separator or a quote (RFC
/// 4180). Names come
/// from transcripts, which a model wrote: a cell that a spreadsheet would run as a formula
/// (`=`, `+`, `-`, `@`, tab, CR first) gets a leading `'` so it stays text.
fn csv_cell(s: &str) -> String {
    // Control characters are escaped first, as in every name printed: a CSV is as often read
    // in a terminal (`cat`, `column`) as in a spreadsheet. Quoting then applies to the result.
    let s = workspace::terminal::escape_controls(s);
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
