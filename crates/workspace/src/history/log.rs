//! The append-only, tab-separated logs `.moves` and `.deletes`.
//!
//! A line is written with one `write` on an `O_APPEND` descriptor and then fsynced, so a crash
//! leaves at worst one torn final line, which readers skip (a line only counts once its newline is
//! on disk) and the next append cuts off. Fields are escaped (`\\`, `\t`, `\n`, `\r`,
//! other control bytes and non-UTF-8 bytes as `\xNN`), so a file name containing a tab or a
//! newline cannot forge a log entry.

use std::ffi::OsString;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::{PendingSync, Workspace};

/// The current time as logs record it: UTC, microseconds, fixed width, so that timestamps sort
/// as strings and the two logs can be merged into one timeline.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Escapes one field so it contains no tab, newline or other control byte.
pub fn escape(field: &[u8]) -> Vec<u8> {
    let keep_high = std::str::from_utf8(field).is_ok();
    let mut out = Vec::with_capacity(field.len());
    for &b in field {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x80.. if keep_high => out.push(b),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out
}

/// Reverses [`escape`]; `None` for a field no writer of this store produced.
pub fn unescape(field: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] != b'\\' {
            out.push(field[i]);
            i += 1;
            continue;
        }
        match field.get(i + 1)? {
            b'\\' => out.push(b'\\'),
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b'x' => {
                let hex = std::str::from_utf8(field.get(i + 2..i + 4)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            _ => return None,
        }
        i += 2;
    }
    Some(out)
}

/// One of the history store's append-only, tab-separated logs (`.moves`, `.deletes`…) at a
/// root-relative path, reached through the workspace layer.
pub struct HistoryLog {
    ws: Workspace,
    path: PathBuf,
}

impl HistoryLog {
    /// The log at root-relative `path` (created on first append).
    pub fn new(ws: Workspace, path: PathBuf) -> Self {
        HistoryLog { ws, path }
    }

    /// Appends one line made of `fields` and makes it durable before returning.
    pub fn append(&self, fields: &[&[u8]]) -> io::Result<()> {
        self.append_unsynced(fields)?.sync()
    }

    /// Appends one line made of `fields`; the caller makes it durable (see [`PendingSync`])
    /// before anything that relies on it, together with other changes that can share the flush.
    pub fn append_unsynced(&self, fields: &[&[u8]]) -> io::Result<PendingSync> {
        let mut line = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                line.push(b'\t');
            }
            line.extend_from_slice(&escape(f));
        }
        line.push(b'\n');
        // Refused when hard-linked: the append must not reach a file elsewhere.
        let mut file = self.ws.open_append(&self.path)?;
        // A crash mid-append can leave a torn last line (an operation that was never
        // acknowledged). Cut it off so it can neither be read as a truncated entry nor have this
        // line glued onto it.
        let len = file.metadata()?.len();
        let keep = complete_prefix_len(&mut file, len)?;
        if keep != len {
            file.set_len(keep)?;
        }
        file.write_all(&line)?;
        Ok(PendingSync::file(file))
    }

    /// Every complete line, split into unescaped fields. Lines that do not parse are skipped:
    /// the logs are evidence, and one bad line must not hide the rest.
    pub fn read(&self) -> io::Result<Vec<Vec<Vec<u8>>>> {
        let data = match self.ws.read(&self.path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let complete = match data.iter().rposition(|&b| b == b'\n') {
            Some(end) => &data[..end],
            None => return Ok(Vec::new()),
        };
        Ok(complete
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split(|&b| b == b'\t').map(unescape).collect())
            .collect())
    }
}

/// A one-line note of a multi-step operation in progress (a move, a delete), written before its
/// first step and cleared after its last, so a crash in between is finished under the next lock.
pub struct PendingNote {
    log: HistoryLog,
}

impl PendingNote {
    /// The note kept at root-relative `path`.
    pub fn new(ws: Workspace, path: PathBuf) -> Self {
        PendingNote {
            log: HistoryLog::new(ws, path),
        }
    }

    /// Records the operation (durably) before it starts.
    pub fn write(&self, fields: &[&[u8]]) -> io::Result<()> {
        self.log.append(fields)
    }

    /// [`PendingNote::write`] whose sync the caller makes, with others (see [`PendingSync`]),
    /// before the operation's first step.
    pub fn write_unsynced(&self, fields: &[&[u8]]) -> io::Result<PendingSync> {
        self.log.append_unsynced(fields)
    }

    /// The fields of an operation a crash cut short, if any.
    pub fn read(&self) -> io::Result<Option<Vec<Vec<u8>>>> {
        Ok(self.log.read()?.into_iter().next())
    }

    /// The fields of every line: a batch of operations cut short writes one line each.
    pub fn read_lines(&self) -> io::Result<Vec<Vec<Vec<u8>>>> {
        self.log.read()
    }

    /// Every line of a note that grows while its operation runs (the operation log's durable
    /// journal), in order; a torn last line is left out.
    pub fn read_all(&self) -> io::Result<Vec<Vec<u8>>> {
        Ok(self
            .log
            .read()?
            .into_iter()
            .filter_map(|fields| fields.into_iter().next())
            .collect())
    }

    /// Forgets the note (finished, or found never to have started).
    pub fn clear(&self) -> io::Result<()> {
        self.log.ws.remove_file(&self.log.path)
    }
}

/// Length of the file up to and including its last newline (0 if it has none), reading
/// backwards from `len` in small chunks so a long log is not read whole.
fn complete_prefix_len(file: &mut std::fs::File, len: u64) -> io::Result<u64> {
    let mut end = len;
    let mut buf = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(pos) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + pos as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// A path as a log field.
pub fn path_field(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

/// A log field back into a path.
pub fn field_path(f: &[u8]) -> PathBuf {
    PathBuf::from(OsString::from_vec(f.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips_and_removes_separators() {
        for raw in [
            &b"plain/path.txt"[..],
            b"tab\there",
            b"new\nline\r",
            b"back\\slash\\t",
            b"\xff\xfe not utf8",
            "ünïcode".as_bytes(),
        ] {
            let e = escape(raw);
            assert!(!e.contains(&b'\t') && !e.contains(&b'\n'), "{e:?}");
            assert_eq!(unescape(&e).as_deref(), Some(raw));
        }
    }

    #[test]
    fn torn_last_line_is_skipped_and_not_glued_onto() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let ws = Workspace::open(dir.path()).expect("ws");
        let log = HistoryLog::new(ws, PathBuf::from("log"));
        log.append(&[b"t1", b"a\tb"]).expect("append");
        // Simulate a crash in the middle of a second append.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(b"t2\thalf").expect("write");
        assert_eq!(log.read().expect("read").len(), 1);
        log.append(&[b"t3", b"c"]).expect("append");
        let lines = log.read().expect("read");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0][1], b"a\tb");
        assert_eq!(lines[1], vec![b"t3".to_vec(), b"c".to_vec()]);
    }
}
