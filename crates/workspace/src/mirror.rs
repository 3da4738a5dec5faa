//! The `.shelpa/` mirror format: reading one mirror file into records, and writing a separator.
//!
//! A mirror holds every byte ever written to one workspace file through `tee`, appended. A line
//! that matches the whole grammar
//! `--- shelpa:(overwrite|baseline) ts=<RFC3339 UTC> record_id=<digits> ---` starts a record; its
//! content is every byte after that line up to the start of the next separator line. Bytes before
//! the first separator are appends to a file that was never overwritten (a record of kind
//! `appends`, without an id). Every other line is content, even one that almost looks like a
//! separator: the parser never guesses, it reports such near-misses so `audit verify` can show
//! them.
//!
//! Limit of the format: because a separator always starts on a new line, a version that lacked a
//! final newline and was followed by another record reads back with one.
//!
//! This module reads the format; [`append`] is its one writer and [`record_id`] the rule that
//! numbers its records.

pub mod append;
pub mod findings;
pub mod record_id;

use std::fmt;
use std::sync::OnceLock;

use chrono::{DateTime, SecondsFormat, Utc};
use regex::bytes::Regex;

pub use append::{AppendError, MirrorAppender};
pub use findings::verify;

/// The directory, at the top of the root, that holds one mirror per file written through `tee`
/// (`.shelpa/<path relative to the root>`).
pub const MIRROR_DIR: &str = ".shelpa";

/// What started a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// Content that predates every separator: appends to a file `tee` never overwrote.
    Appends,
    /// `tee` (or `audit restore`) replaced the whole file.
    Overwrite,
    /// The content a file had before shelpa first wrote to it.
    Baseline,
}

impl RecordKind {
    /// The kind as it is spelled in separators and output.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Appends => "appends",
            RecordKind::Overwrite => "overwrite",
            RecordKind::Baseline => "baseline",
        }
    }
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One version of a file as the mirror recorded it: a separator (or the start of the file) and
/// everything written after it up to the next separator, later appends included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// How the record started.
    pub kind: RecordKind,
    /// The separator's `record_id` (unix nanoseconds); `None` for the leading `appends` record.
    pub id: Option<u64>,
    /// The separator's time; `None` for the leading `appends` record.
    pub ts: Option<DateTime<Utc>>,
    /// The time stamp exactly as the separator spelled it, so output can show the original.
    pub utc: Option<String>,
    /// 1-based line number of the separator in the mirror (1 for the leading `appends` record).
    pub line: usize,
    /// The reconstructed file content as of this record.
    pub content: Vec<u8>,
}

/// How serious a parse finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Suspicious but readable: the content is still reconstructed exactly per the format.
    Warning,
    /// Evidence of damage or tampering: some history may be lost or misattributed.
    Error,
}

impl Severity {
    /// The severity as output spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Something about a mirror that is not as `tee` would have written it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// How serious it is.
    pub severity: Severity,
    /// 1-based line in the mirror it concerns (0 when it concerns the whole file).
    pub line: usize,
    /// What is wrong and what it means for the history.
    pub message: String,
}

/// A parsed mirror file.
#[derive(Clone, Debug, Default)]
pub struct Mirror {
    /// The records in file order (oldest first).
    pub records: Vec<Record>,
    /// Near-miss separators, ids going backwards, truncation, non-UTF-8 content.
    pub findings: Vec<Finding>,
}

/// What a record holds, without where it stands or when: the view the parser's tests and the
/// appender's tests both compare against what they wrote.
#[cfg(test)]
pub(crate) type RecordView = (RecordKind, Option<u64>, Vec<u8>);

#[cfg(test)]
impl Mirror {
    /// Every record as a [`RecordView`], in file order.
    pub(crate) fn record_views(&self) -> Vec<RecordView> {
        self.records
            .iter()
            .map(|r| (r.kind, r.id, r.content.clone()))
            .collect()
    }
}

/// One reconstructed version, the shape `audit import` consumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The separator's id (`None` only for a leading `appends` record).
    pub record_id: Option<u64>,
    /// When it was written (`None` only for a leading `appends` record).
    pub ts: Option<DateTime<Utc>>,
    /// What the file held.
    pub kind: RecordKind,
    /// The full content of the file as of this version.
    pub content: Vec<u8>,
}

/// Every version a mirror holds, oldest first: the reconstruction `audit import` turns into
/// history snapshots.
pub fn versions(mirror: &[u8]) -> Vec<Version> {
    Mirror::parse(mirror)
        .records
        .into_iter()
        .map(|r| Version {
            record_id: r.id,
            ts: r.ts,
            kind: r.kind,
            content: r.content,
        })
        .collect()
}

/// The exact separator grammar. The time is checked again by chrono (the regex admits 2026-13-45).
fn separator_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"^--- shelpa:(overwrite|baseline) ts=([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|\+00:00)) record_id=([0-9]+) ---$",
        )
        .unwrap_or_else(|e| unreachable!("the separator grammar is a valid regex: {e}"))
    })
}

/// A separator line that matched the grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Separator {
    /// Overwrite or baseline.
    pub kind: RecordKind,
    /// The parsed time.
    pub ts: DateTime<Utc>,
    /// The time as written.
    pub utc: String,
    /// The record id.
    pub id: u64,
}

/// Parses one line (without its `\n`) as a separator. `Err` carries why a line that looks like
/// one is not; `Ok(None)` means the line is ordinary content.
pub fn parse_separator(line: &[u8]) -> Result<Option<Separator>, String> {
    if let Some(caps) = separator_regex().captures(line) {
        let kind = if &caps[1] == b"overwrite" {
            RecordKind::Overwrite
        } else {
            RecordKind::Baseline
        };
        // The regex only admits ASCII, so these conversions cannot fail; map them anyway.
        let utc = String::from_utf8_lossy(&caps[2]).into_owned();
        let ts = DateTime::parse_from_rfc3339(&utc)
            .map_err(|e| format!("timestamp '{utc}' is not a valid RFC 3339 time ({e})"))?
            .with_timezone(&Utc);
        let digits = String::from_utf8_lossy(&caps[3]);
        let id = digits
            .parse::<u64>()
            .map_err(|_| format!("record_id={digits} does not fit in 64 bits"))?;
        return Ok(Some(Separator { kind, ts, utc, id }));
    }
    if looks_like_separator(line) {
        return Err(diagnose(line));
    }
    Ok(None)
}

/// Lines close enough to a separator that a reader should be told they are not one. Asked of
/// every line of every mirror, so it allocates nothing.
fn looks_like_separator(line: &[u8]) -> bool {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let trimmed = &line[start..];
    let starts = |p: &[u8]| trimmed.len() >= p.len() && trimmed[..p.len()].eq_ignore_ascii_case(p);
    let contains = |p: &[u8]| line.windows(p.len()).any(|w| w.eq_ignore_ascii_case(p));
    starts(b"--- shelpa")
        || starts(b"---shelpa")
        || contains(b"shelpa:overwrite")
        || contains(b"shelpa:baseline")
}

/// Says which part of a near-miss line breaks the grammar.
fn diagnose(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    if text.ends_with('\r') {
        return "ends with a carriage return (CRLF line ending); separators end with a bare newline"
            .into();
    }
    if !text.starts_with("--- shelpa:") {
        return "does not start with exactly '--- shelpa:'".into();
    }
    if !text.ends_with(" ---") {
        return "does not end with ' ---'".into();
    }
    let body = &text["--- shelpa:".len()..text.len() - " ---".len()];
    let fields: Vec<&str> = body.split(' ').collect();
    if fields.len() != 3 {
        return format!(
            "has {} space-separated fields, expected 3 (kind, ts=, record_id=)",
            fields.len()
        );
    }
    if fields[0] != "overwrite" && fields[0] != "baseline" {
        return format!(
            "unknown record kind '{}' (expected overwrite or baseline)",
            fields[0]
        );
    }
    match fields[1].strip_prefix("ts=") {
        None => return "the second field is not ts=<time>".into(),
        Some(ts) => {
            if DateTime::parse_from_rfc3339(ts).is_err() {
                return format!("timestamp '{ts}' is not a valid RFC 3339 time");
            }
            if !ts.ends_with('Z') && !ts.ends_with("+00:00") {
                return format!("timestamp '{ts}' is not in UTC (expected a trailing Z)");
            }
        }
    }
    match fields[2].strip_prefix("record_id=") {
        None => "the third field is not record_id=<digits>".into(),
        Some(id) if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) => {
            format!("record_id '{id}' is not a run of digits")
        }
        Some(_) => "does not match the separator grammar exactly".into(),
    }
}

/// Formats a separator line (with its trailing newline) exactly as `tee` writes it.
pub fn format_separator(kind: RecordKind, ts: DateTime<Utc>, id: u64) -> String {
    format!(
        "--- shelpa:{} ts={} record_id={} ---\n",
        kind.as_str(),
        ts.to_rfc3339_opts(SecondsFormat::Secs, true),
        id
    )
}

/// Shows a line for a finding: lossy, control characters escaped, long lines cut.
fn excerpt(line: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(line)
        .chars()
        .flat_map(|c| c.escape_debug())
        .collect();
    if text.chars().count() > 80 {
        let cut: String = text.chars().take(77).collect();
        format!("{cut}...")
    } else {
        text
    }
}

impl Mirror {
    /// Splits a mirror into records. Never fails: whatever cannot be a separator is content, and
    /// everything unusual becomes a [`Finding`] (the same ones [`verify`] finds, capped the same).
    pub fn parse(bytes: &[u8]) -> Mirror {
        let mut mirror = Mirror::default();
        let mut scanner = findings::Scanner::default();
        // (separator, its line number, content start)
        let mut open: Option<(Separator, usize, usize)> = None;
        let mut leading_end: Option<usize> = None;
        let mut pos = 0;
        let mut line_no = 0;
        while pos < bytes.len() {
            line_no += 1;
            let (end, next) = match memchr::memchr(b'\n', &bytes[pos..]) {
                Some(i) => (pos + i, pos + i + 1),
                None => (bytes.len(), bytes.len()),
            };
            if let Some(sep) = scanner.line(&bytes[pos..end], next > end) {
                match open.take() {
                    Some((prev, prev_line, start)) => {
                        mirror.push(prev, prev_line, &bytes[start..pos])
                    }
                    None => leading_end = Some(pos),
                }
                open = Some((sep, line_no, next));
            }
            pos = next;
        }
        let leading = &bytes[..leading_end.unwrap_or(bytes.len())];
        if !leading.is_empty() {
            mirror.records.insert(
                0,
                Record {
                    kind: RecordKind::Appends,
                    id: None,
                    ts: None,
                    utc: None,
                    line: 1,
                    content: leading.to_vec(),
                },
            );
        }
        if let Some((sep, line, start)) = open {
            mirror.push(sep, line, &bytes[start..]);
        }
        mirror.findings = scanner.finish();
        mirror
    }

    fn push(&mut self, sep: Separator, line: usize, content: &[u8]) {
        self.records.push(Record {
            kind: sep.kind,
            id: Some(sep.id),
            ts: Some(sep.ts),
            utc: Some(sep.utc),
            line,
            content: content.to_vec(),
        });
    }

    /// The largest record id in the mirror; a new record must use a larger one.
    pub fn max_id(&self) -> Option<u64> {
        self.records.iter().filter_map(|r| r.id).max()
    }
}

/// What a streaming reader of a mirror knows of a record when it starts: everything but its
/// content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordStart {
    /// How the record started.
    pub kind: RecordKind,
    /// The separator's `record_id`; `None` for the leading `appends` record.
    pub id: Option<u64>,
    /// The separator's time.
    pub ts: Option<DateTime<Utc>>,
    /// The time stamp exactly as written.
    pub utc: Option<String>,
    /// 1-based line of the separator in the mirror (1 for the leading `appends` record).
    pub line: usize,
    /// 0-based position of the record in the mirror.
    pub position: usize,
}

/// What [`stream`] reports as it reads a mirror.
pub trait RecordVisitor {
    /// A record starts.
    fn start(&mut self, record: &RecordStart) -> std::io::Result<()>;
    /// Line `n` (1-based) of the current record's content, without its newline. The lines are
    /// those of `content.split('\n')` for the record [`Mirror::parse`] would build, including
    /// the empty piece after a final newline.
    fn line(&mut self, n: usize, text: &[u8]) -> std::io::Result<()>;
    /// The current record ends; `size` is its content's length in bytes.
    fn end(&mut self, size: u64) -> std::io::Result<()>;
}

/// Reads a mirror one line at a time and reports its records as [`Mirror::parse`] splits them,
/// without ever holding more than one line: how `audit grep` searches a mirror of millions of
/// records in bounded memory (the longest line is the bound).
pub fn stream(
    mut reader: impl std::io::BufRead,
    visitor: &mut impl RecordVisitor,
) -> std::io::Result<()> {
    struct Open {
        lines: usize,
        size: u64,
        ends_with_newline: bool,
    }
    fn finish(open: Option<Open>, visitor: &mut impl RecordVisitor) -> std::io::Result<()> {
        if let Some(o) = open {
            // `split` yields an empty last piece after a final newline, or for empty content.
            if o.size == 0 || o.ends_with_newline {
                visitor.line(o.lines + 1, b"")?;
            }
            visitor.end(o.size)?;
        }
        Ok(())
    }
    let mut buf = Vec::new();
    let mut open: Option<Open> = None;
    let mut line_no = 0;
    let mut position = 0;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let newline = buf.last() == Some(&b'\n');
        let text = if newline {
            &buf[..buf.len() - 1]
        } else {
            &buf[..]
        };
        if let Ok(Some(sep)) = parse_separator(text) {
            finish(open.take(), visitor)?;
            visitor.start(&RecordStart {
                kind: sep.kind,
                id: Some(sep.id),
                ts: Some(sep.ts),
                utc: Some(sep.utc),
                line: line_no,
                position,
            })?;
            position += 1;
            open = Some(Open {
                lines: 0,
                size: 0,
                ends_with_newline: false,
            });
            continue;
        }
        let o = match &mut open {
            Some(o) => o,
            None => {
                visitor.start(&RecordStart {
                    kind: RecordKind::Appends,
                    id: None,
                    ts: None,
                    utc: None,
                    line: 1,
                    position,
                })?;
                position += 1;
                open.insert(Open {
                    lines: 0,
                    size: 0,
                    ends_with_newline: false,
                })
            }
        };
        o.lines += 1;
        o.size += n as u64;
        o.ends_with_newline = newline;
        visitor.line(o.lines, text)?;
    }
    finish(open, visitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).expect("valid time")
    }

    #[test]
    fn separators_match_the_whole_grammar_only() {
        let good =
            b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=1772025450395572000 ---";
        let sep = parse_separator(good).expect("ok").expect("separator");
        assert_eq!(sep.kind, RecordKind::Overwrite);
        assert_eq!(sep.id, 1772025450395572000);
        assert_eq!(sep.utc, "2026-02-25T13:17:30Z");
        for bad in [
            &b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=12 ---\r"[..],
            b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=12 --- ",
            b" --- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=12 ---",
            b"--- shelpa:rewrite ts=2026-02-25T13:17:30Z record_id=12 ---",
            b"--- shelpa:overwrite ts=2026-02-25T13:17:30+01:00 record_id=12 ---",
            b"--- shelpa:overwrite ts=2026-13-25T13:17:30Z record_id=12 ---",
            b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=-12 ---",
            b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=99999999999999999999999 ---",
            b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z ---",
            b"--- shelpa: notes on the old mirror",
        ] {
            assert!(
                parse_separator(bad).is_err(),
                "{:?} must be a near-miss",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_separator(b"--- a markdown rule"), Ok(None));
        assert_eq!(parse_separator(b""), Ok(None));
    }

    #[test]
    fn leading_bytes_are_an_appends_record_and_contents_run_to_the_next_separator() {
        let text = "log 1\nlog 2\n--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=5 ---\nnew\n--- shelpa:overwrite tS=bad ---\nstill new\n--- shelpa:baseline ts=2026-02-25T13:17:31Z record_id=6 ---\nno newline";
        let m = Mirror::parse(text.as_bytes());
        assert_eq!(m.records.len(), 3);
        assert_eq!(m.records[0].kind, RecordKind::Appends);
        assert_eq!(m.records[0].content, b"log 1\nlog 2\n");
        assert_eq!(m.records[1].id, Some(5));
        assert_eq!(
            m.records[1].content,
            b"new\n--- shelpa:overwrite tS=bad ---\nstill new\n"
        );
        assert_eq!(m.records[1].line, 3);
        assert_eq!(m.records[2].kind, RecordKind::Baseline);
        assert_eq!(m.records[2].content, b"no newline");
        assert_eq!(m.findings.len(), 1);
        assert_eq!(m.findings[0].line, 5);
        assert_eq!(m.findings[0].severity, Severity::Warning);
    }

    #[test]
    fn backwards_ids_truncation_and_bad_utf8_are_findings() {
        let mut bytes =
            b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=9 ---\n\xff\xfe\n".to_vec();
        bytes.extend_from_slice(
            b"--- shelpa:overwrite ts=2026-02-25T13:17:31Z record_id=9 ---\nx\n--- shelpa:over",
        );
        let m = Mirror::parse(&bytes);
        let messages: Vec<&str> = m.findings.iter().map(|f| f.message.as_str()).collect();
        assert!(messages.iter().any(|m| m.contains("ids go backwards")));
        assert!(messages.iter().any(|m| m.contains("looks truncated")));
        assert!(messages.iter().any(|m| m.contains("not valid UTF-8")));
        assert_eq!(m.records[1].content, b"x\n--- shelpa:over");
        let cut = Mirror::parse(b"a\n--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=9 ---");
        assert_eq!(cut.records.len(), 2);
        assert!(cut.findings[0].message.contains("truncated"));
        assert_eq!(verify(&bytes[..]).expect("verify"), m.findings);
        let zeros = Mirror::parse(b"abc\0\0\0");
        assert!(zeros.findings[0].message.contains("3 NUL"));
        assert!(Mirror::parse(b"").findings[0].message.contains("empty"));
    }

    /// A tiny deterministic generator, so the property test needs no extra dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Content lines a real file might hold, near-miss separators and awkward bytes included.
    const LINES: [&[u8]; 10] = [
        b"plain text",
        b"",
        b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=12 ---\r",
        b"--- shelpa: a note about the mirror",
        b"---",
        b"  --- shelpa:baseline ts=2026-02-25T13:17:30Z record_id=1 ---",
        b"\xff\xfe binary",
        b"record_id=5 ---",
        b"\t\tindented",
        b"--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=1x ---",
    ];

    fn content(rng: &mut Rng) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..rng.below(5) {
            out.extend_from_slice(LINES[rng.below(LINES.len() as u64) as usize]);
            out.push(b'\n');
        }
        if rng.below(3) == 0 {
            out.extend_from_slice(b"no final newline");
        }
        out
    }

    /// Writes records the way tee does: a separator always starts on a new line.
    fn write(leading: &[u8], records: &[(RecordKind, i64, u64, Vec<u8>)]) -> Vec<u8> {
        let mut out = leading.to_vec();
        for (kind, secs, id, body) in records {
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(format_separator(*kind, ts(*secs), *id).as_bytes());
            out.extend_from_slice(body);
        }
        out
    }

    #[test]
    fn any_sequence_of_records_written_in_the_format_parses_back_to_the_same_records() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..500 {
            let leading = if rng.below(2) == 0 {
                content(&mut rng)
            } else {
                Vec::new()
            };
            let mut id = 1_772_025_450_000_000_000u64;
            let mut secs = 1_772_025_450i64;
            let records: Vec<(RecordKind, i64, u64, Vec<u8>)> = (0..rng.below(8))
                .map(|_| {
                    id += 1 + rng.below(1_000_000_000);
                    secs += rng.below(100_000) as i64;
                    let kind = if rng.below(4) == 0 {
                        RecordKind::Baseline
                    } else {
                        RecordKind::Overwrite
                    };
                    (kind, secs, id, content(&mut rng))
                })
                .collect();
            let bytes = write(&leading, &records);
            let parsed = Mirror::parse(&bytes);

            // What the format promises: every version, with a newline added to a non-final
            // version that lacked one.
            let mut expected: Vec<RecordView> = Vec::new();
            let last = records.len();
            let fix = |body: &[u8], is_last: bool| {
                let mut b = body.to_vec();
                if !is_last && !b.is_empty() && !b.ends_with(b"\n") {
                    b.push(b'\n');
                }
                b
            };
            if !leading.is_empty() {
                expected.push((RecordKind::Appends, None, fix(&leading, last == 0)));
            }
            for (i, (kind, _, id, body)) in records.iter().enumerate() {
                expected.push((*kind, Some(*id), fix(body, i + 1 == last)));
            }
            assert_eq!(
                parsed.record_views(),
                expected,
                "mirror {:?}",
                String::from_utf8_lossy(&bytes)
            );
            for (r, (_, secs, _, _)) in parsed
                .records
                .iter()
                .filter(|r| r.id.is_some())
                .zip(&records)
            {
                assert_eq!(r.ts, Some(ts(*secs)));
            }
            assert!(parsed
                .findings
                .iter()
                .all(|f| !f.message.contains("backwards") && !f.message.contains("truncated")));
            // Verified as a stream, it gives the same findings.
            assert_eq!(verify(&bytes[..]).expect("verify"), parsed.findings);
            // Streamed, the same mirror gives the same records, line by line.
            let mut streamed = Collect::default();
            stream(&bytes[..], &mut streamed).expect("stream");
            let whole: Vec<_> = parsed
                .records
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    (
                        (r.kind, r.id, r.line, i),
                        r.content
                            .split(|&b| b == b'\n')
                            .map(<[u8]>::to_vec)
                            .collect::<Vec<_>>(),
                        r.content.len() as u64,
                    )
                })
                .collect();
            assert_eq!(streamed.records, whole);
        }
    }

    /// A record as a stream reports it: (kind, id, separator line, position), its lines, size.
    type Streamed = ((RecordKind, Option<u64>, usize, usize), Vec<Vec<u8>>, u64);

    /// Every record a stream reports, with its lines and size.
    #[derive(Default)]
    struct Collect {
        records: Vec<Streamed>,
    }

    impl RecordVisitor for Collect {
        fn start(&mut self, r: &RecordStart) -> std::io::Result<()> {
            self.records
                .push(((r.kind, r.id, r.line, r.position), Vec::new(), 0));
            Ok(())
        }
        fn line(&mut self, n: usize, text: &[u8]) -> std::io::Result<()> {
            let last = self.records.last_mut().expect("a record");
            assert_eq!(n, last.1.len() + 1);
            last.1.push(text.to_vec());
            Ok(())
        }
        fn end(&mut self, size: u64) -> std::io::Result<()> {
            self.records.last_mut().expect("a record").2 = size;
            Ok(())
        }
    }

    #[test]
    fn a_flood_of_near_miss_lines_is_listed_up_to_the_cap_and_counted_after_it() {
        let mut bytes = Vec::new();
        for _ in 0..10_000 {
            bytes.extend_from_slice(b"--- shelpa: not a separator\n");
        }
        bytes.extend_from_slice(b"\xff\n");
        let parsed = Mirror::parse(&bytes);
        assert_eq!(parsed.findings.len(), findings::MAX_LISTED + 2);
        let summary = &parsed.findings[findings::MAX_LISTED];
        assert_eq!(summary.line, findings::MAX_LISTED + 1);
        assert!(
            summary
                .message
                .contains(&format!("{} more", 10_000 - findings::MAX_LISTED)),
            "{}",
            summary.message
        );
        assert!(parsed.findings[findings::MAX_LISTED + 1]
            .message
            .contains("not valid UTF-8"));
        assert_eq!(verify(&bytes[..]).expect("verify"), parsed.findings);
    }

    #[test]
    fn streaming_a_mirror_with_near_misses_and_a_torn_tail_matches_parsing_it() {
        let text = "lead\n\n--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=5 ---\n--- shelpa:overwrite tS=bad ---\n--- shelpa:baseline ts=2026-02-25T13:17:31Z record_id=6 ---\n\nx\n--- shelpa:overwrite ts=2026-02-25T13:17:32Z record_id=7 ---";
        let parsed = Mirror::parse(text.as_bytes());
        let mut streamed = Collect::default();
        stream(text.as_bytes(), &mut streamed).expect("stream");
        assert_eq!(streamed.records.len(), parsed.records.len());
        for (s, r) in streamed.records.iter().zip(&parsed.records) {
            assert_eq!(s.0 .1, r.id);
            assert_eq!(s.2, r.content.len() as u64);
            let lines: Vec<Vec<u8>> = r
                .content
                .split(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect();
            assert_eq!(s.1, lines);
        }
    }
}
