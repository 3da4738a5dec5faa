//! What is wrong with a mirror, found one line at a time: near-miss separators, record ids that
//! do not grow, a truncated separator, a zero-filled or empty file, and records that are not
//! UTF-8. [`Mirror::parse`](super::Mirror::parse) and [`verify`] both feed their lines to one
//! [`Scanner`], so the two never disagree; `verify` holds one line at a time, so `audit verify`
//! and `check` read a mirror of any size in memory bounded by its longest line.
//!
//! The findings of each kind are capped at [`MAX_LISTED`]: a mirror of millions of lines that
//! merely look like separators yields that many findings and one that counts the rest, instead
//! of a message per line (which once cost a hundred times the mirror's size).

use std::io::BufRead;

use super::{parse_separator, Finding, Separator, Severity};

/// How many findings of one kind (line findings, UTF-8 findings) are listed one by one.
pub const MAX_LISTED: usize = 50;

/// Findings of one kind: the first [`MAX_LISTED`], and a count of the rest by severity.
#[derive(Default)]
struct Capped {
    listed: Vec<Finding>,
    errors: usize,
    warnings: usize,
    /// The line of the first finding not listed.
    first_unlisted: usize,
}

impl Capped {
    fn push(&mut self, f: Finding) {
        if self.listed.len() < MAX_LISTED {
            self.listed.push(f);
            return;
        }
        if self.errors + self.warnings == 0 {
            self.first_unlisted = f.line;
        }
        match f.severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
        }
    }

    /// The listed findings, then one that counts the rest (if any) with the worst severity.
    fn into_findings(self, what: &str, out: &mut Vec<Finding>) {
        out.extend(self.listed);
        let rest = self.errors + self.warnings;
        if rest == 0 {
            return;
        }
        out.push(Finding {
            severity: if self.errors > 0 {
                Severity::Error
            } else {
                Severity::Warning
            },
            line: self.first_unlisted,
            message: format!(
                "{rest} more {what} from this line on ({} error(s), {} warning(s)) are not listed one by one; the first {MAX_LISTED} are",
                self.errors, self.warnings
            ),
        });
    }
}

/// The record whose content is being read, for its UTF-8 check.
struct Open {
    /// Its separator's id (`None` for the leading appends record).
    id: Option<u64>,
    /// Its separator's line (1 for the leading record).
    line: usize,
    /// Bytes of its content read so far.
    offset: u64,
    /// Where its content first stops being UTF-8, if it does.
    bad_at: Option<u64>,
}

/// Findings about one mirror, fed one line at a time.
#[derive(Default)]
pub(crate) struct Scanner {
    lines: Capped,
    utf8: Capped,
    last_id: Option<u64>,
    line_no: usize,
    total: u64,
    trailing_zeros: u64,
    open: Option<Open>,
}

impl Scanner {
    /// Takes the next line (`text` without its newline; `newline` when it had one) and returns
    /// the separator it is, if it is one.
    pub(crate) fn line(&mut self, text: &[u8], newline: bool) -> Option<Separator> {
        self.line_no += 1;
        let n = self.line_no;
        self.total += text.len() as u64 + u64::from(newline);
        self.trailing_zeros = if newline {
            0
        } else {
            text.iter().rev().take_while(|&&b| b == 0).count() as u64
        };
        match parse_separator(text) {
            Ok(Some(sep)) => {
                if !newline {
                    self.lines.push(Finding {
                        severity: Severity::Error,
                        line: n,
                        message: "the mirror ends inside this separator line (no newline after it): the file was truncated while a write was being recorded".into(),
                    });
                }
                if let Some(prev) = self.last_id {
                    if sep.id <= prev {
                        self.lines.push(Finding {
                            severity: Severity::Error,
                            line: n,
                            message: format!(
                                "record_id {} is not greater than the previous record_id {prev}: ids go backwards, so records were reordered, spliced or forged",
                                sep.id
                            ),
                        });
                    }
                }
                self.last_id = Some(sep.id);
                self.end_record();
                self.open = Some(Open {
                    id: Some(sep.id),
                    line: n,
                    offset: 0,
                    bad_at: None,
                });
                return Some(sep);
            }
            Ok(None) => {}
            Err(why) => {
                let truncated_tail = !newline;
                self.lines.push(Finding {
                    severity: if truncated_tail {
                        Severity::Error
                    } else {
                        Severity::Warning
                    },
                    line: n,
                    message: if truncated_tail {
                        format!("the mirror ends in an incomplete separator-like line \"{}\" ({why}): the file looks truncated; it is kept as content", super::excerpt(text))
                    } else {
                        format!("\"{}\" looks like a separator but is not one ({why}); it is read as content", super::excerpt(text))
                    },
                });
            }
        }
        let open = self.open.get_or_insert(Open {
            id: None,
            line: 1,
            offset: 0,
            bad_at: None,
        });
        if open.bad_at.is_none() {
            if let Err(e) = std::str::from_utf8(text) {
                open.bad_at = Some(open.offset + e.valid_up_to() as u64);
            }
        }
        open.offset += text.len() as u64 + u64::from(newline);
        None
    }

    fn end_record(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        if let Some(at) = open.bad_at {
            let name = match open.id {
                Some(id) => format!("record {id}"),
                None => "the leading appends record".into(),
            };
            self.utf8.push(Finding {
                severity: Severity::Warning,
                line: open.line,
                message: format!("{name} is not valid UTF-8 (first bad byte at offset {at}): it is restored byte for byte, but shown lossily"),
            });
        }
    }

    /// Every finding, in the order `audit verify` shows them: the lines', the file's, the
    /// records' UTF-8.
    pub(crate) fn finish(mut self) -> Vec<Finding> {
        self.end_record();
        let mut out = Vec::new();
        self.lines
            .into_findings("findings about separator lines", &mut out);
        if self.total == 0 {
            out.push(Finding {
                severity: Severity::Warning,
                line: 0,
                message: "the mirror is empty: it holds no record of any write".into(),
            });
        } else if self.trailing_zeros > 0 {
            out.push(Finding {
                severity: Severity::Error,
                line: 0,
                message: format!("the mirror ends with {} NUL byte(s), the usual trace of a crash before data reached the disk: the newest record is probably truncated", self.trailing_zeros),
            });
        }
        self.utf8
            .into_findings("records that are not valid UTF-8", &mut out);
        out
    }
}

/// Everything [`Mirror::parse`](super::Mirror::parse) would find wrong with the mirror `reader`
/// reads, holding one line at a time.
pub fn verify(mut reader: impl BufRead) -> std::io::Result<Vec<Finding>> {
    let mut scanner = Scanner::default();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let newline = buf.last() == Some(&b'\n');
        let text = if newline {
            &buf[..buf.len() - 1]
        } else {
            &buf[..]
        };
        scanner.line(text, newline);
    }
    Ok(scanner.finish())
}
