//! Reading an input file a line at a time with a bound on the line: a line longer than
//! [`MAX_LINE_BYTES`] is read past and reported as [`Line::TooLong`], never held whole.
//!
//! One transcript line is one JSON document parsed into a tree, which costs many times the
//! line's size; without a bound, one line of a hundred megabytes would take gigabytes. The
//! bound is far above any line a client or this server writes (a tool result with a large image
//! in it is a few megabytes), so only damaged or hostile input meets it, and the lines it skips
//! are counted in the report.

use std::io::{self, BufRead, BufReader, Read};

/// The longest line read, in bytes (8 MiB).
pub const MAX_LINE_BYTES: usize = 8 << 20;

/// One line of an input file.
pub enum Line<'a> {
    /// The line, without its newline.
    Text(&'a [u8]),
    /// A line longer than the limit, which was read past and dropped.
    TooLong,
}

/// The lines of a reader, each at most [`MAX_LINE_BYTES`] (or the limit given) long.
pub struct Lines<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    limit: usize,
}

impl<R: Read> Lines<R> {
    /// Lines of `reader`, each at most [`MAX_LINE_BYTES`].
    pub fn new(reader: R) -> Self {
        Lines::with_limit(reader, MAX_LINE_BYTES)
    }

    /// Lines of `reader`, each at most `limit` bytes: for inputs whose lines are known to be
    /// short (a study's trial records), so a damaged one costs no more than that.
    pub fn with_limit(reader: R, limit: usize) -> Self {
        Lines {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
            limit,
        }
    }

    /// The next line; `None` at the end of the input. The last line needs no newline.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.line.clear();
        let mut any = false;
        let mut too_long = false;
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            any = true;
            let (chunk, used, ended) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], i + 1, true),
                None => (buf, buf.len(), false),
            };
            if !too_long {
                if self.line.len() + chunk.len() > self.limit {
                    // Nothing more of this line is kept, and what was kept is let go.
                    too_long = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            self.reader.consume(used);
            if ended {
                break;
            }
        }
        Ok(match (any, too_long) {
            (false, _) => None,
            (true, true) => Some(Line::TooLong),
            (true, false) => Some(Line::Text(&self.line)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Vec<Option<Vec<u8>>> {
        let mut lines = Lines::new(input);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().expect("read") {
            out.push(match line {
                Line::Text(t) => Some(t.to_vec()),
                Line::TooLong => None,
            });
        }
        out
    }

    #[test]
    fn lines_split_on_newlines_and_the_last_needs_none() {
        assert_eq!(
            lines(b"a\n\nbc\nd"),
            vec![
                Some(b"a".to_vec()),
                Some(vec![]),
                Some(b"bc".to_vec()),
                Some(b"d".to_vec())
            ]
        );
        assert!(lines(b"").is_empty());
    }

    #[test]
    fn a_line_over_the_bound_is_skipped_and_the_next_is_read() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 1];
        input.extend_from_slice(b"\nok\n");
        input.extend(std::iter::repeat_n(b'y', MAX_LINE_BYTES));
        assert_eq!(
            lines(&input),
            vec![None, Some(b"ok".to_vec()), Some(vec![b'y'; MAX_LINE_BYTES])]
        );
    }
}
