//! Output: aligned tables for people, JSON for scripts, and the time and text formats both share.

use chrono::{DateTime, Local, Utc};

use workspace::terminal::{escape_controls, escape_text};

/// Shows a record time in local time (people read their own clock).
pub fn local(ts: Option<DateTime<Utc>>) -> String {
    match ts {
        Some(t) => t
            .with_timezone(&Local)
            .format("%Y-%m-%d %H:%M:%S %:z")
            .to_string(),
        None => "-".into(),
    }
}

/// Shows the UTC stamp exactly as the separator wrote it, so it can be matched against the mirror.
pub fn utc(stamp: Option<&str>) -> String {
    stamp.unwrap_or("-").to_string()
}

/// A first line or matching line made safe for one table cell: lossy UTF-8, control characters
/// escaped (a hostile file must not be able to move the cursor), long lines cut.
pub fn cell_text(bytes: &[u8], max_chars: usize) -> String {
    let lossy = String::from_utf8_lossy(bytes);
    let text = escape_controls(&lossy);
    if text.chars().count() > max_chars {
        let cut: String = text.chars().take(max_chars.saturating_sub(3)).collect();
        format!("{cut}...")
    } else {
        text.into_owned()
    }
}

/// A name (a mirrored path, a label naming one) made safe to print: control characters and
/// direction overrides escaped by the one function every printed name goes through.
pub fn name(s: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(s)
}

/// Text of many lines taken from records (a diff's body) made safe to print: control
/// characters escaped as in [`name`], so a record cannot erase or rewrite a line of the review
/// it is shown in; line feeds and tabs kept, so the lines and columns read as they are.
pub fn body(text: &str) -> std::borrow::Cow<'_, str> {
    escape_text(text)
}

/// A message for people that names mirrored paths: each of its lines shown through [`name`],
/// its line breaks kept.
pub fn message(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.strip_suffix('\n') {
            Some(body) => format!("{}\n", name(body)),
            None => name(line).into_owned(),
        })
        .collect()
}

/// The first line of some content, without its newline.
pub fn first_line(content: &[u8]) -> &[u8] {
    match content.iter().position(|&b| b == b'\n') {
        Some(i) => &content[..i],
        None => content,
    }
}

/// Lays out rows under headers with columns padded to their widest cell; the last column is not
/// padded so lines carry no trailing blanks. Every cell is shown through [`name`], so no table
/// can carry a control character to the terminal, whichever column a mirrored name lands in.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let escaped: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| name(c).into_owned()).collect())
        .collect();
    let rows = &escaped;
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_row).chain(rows.iter()) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_cells_escape_control_characters() {
        let t = table(
            &["A", "LONG HEADER", "C"],
            &[
                vec!["xyz".into(), "1".into(), "tail".into()],
                vec!["q".into(), "22".into(), "".into()],
            ],
        );
        assert_eq!(t, "A    LONG HEADER  C\nxyz  1            tail\nq    22\n");
        assert_eq!(cell_text(b"a\x1b[2Jb\tc", 80), "a\\u{1b}[2Jb\\tc");
        assert_eq!(cell_text("é".repeat(10).as_bytes(), 5), "éé...");
    }
}
