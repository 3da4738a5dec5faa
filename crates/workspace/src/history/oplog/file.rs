//! The file `.filesystem/.operations` and its rotations: appending one entry (with the next id)
//! and reading entries newest first without reading the whole log.
//!
//! An entry is one JSON line written with one `write` on an `O_APPEND` descriptor and then
//! synced, under the store lock, as `.moves` and `.deletes` are: a crash leaves at worst one torn
//! last line, which readers skip and the next append cuts off. The log is rotated as the call log
//! is: once it has reached [`ROTATE_BYTES`] (or [`ROTATE_BYTES_ENV`]) it becomes
//! `.operations.1`, the older files moving up one, `.operations.`[`KEEP_ROTATED`] dropped.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::super::layout::{rotated_name, KEEP_ROTATED, OPERATIONS_LOG};
use super::record::Operation;
use crate::{PendingSync, Workspace};

/// The size at which the operation log is rotated.
pub const ROTATE_BYTES: u64 = 64 * 1024 * 1024;

/// Sets the rotation size in bytes instead of [`ROTATE_BYTES`] (for tests).
pub const ROTATE_BYTES_ENV: &str = "FILESYSTEM_OPERATIONS_ROTATE_BYTES";

/// The longest line read back as an entry; a longer one (no writer makes one) is skipped.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The most read at a time going backwards; the first read is [`FIRST_CHUNK`], and each next
/// one twice the last, so finding the last entry (every append does) reads a page or two.
const CHUNK: usize = 64 * 1024;
/// The first read going backwards: a few entries' worth.
const FIRST_CHUNK: usize = 4 * 1024;

fn rotate_bytes() -> u64 {
    static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var(ROTATE_BYTES_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&v| v > 0)
            .unwrap_or(ROTATE_BYTES)
    })
}

/// The log's files inside store `state`, newest first: `.operations`, `.operations.1`, …
pub fn files(state: &Path) -> Vec<PathBuf> {
    let name = OsString::from(OPERATIONS_LOG);
    let mut out = vec![state.join(&name)];
    out.extend((1..=KEEP_ROTATED).map(|n| state.join(rotated_name(&name, n))));
    out
}

/// Appends `op` to the log of store `state` with the next id, and returns that id. The caller
/// holds the store lock, so no other append runs meanwhile. `unsynced` are the directories of
/// the operation's last changes (see [`PendingSync`]): they are synced together with the entry,
/// after it is written, so that one flush of the file system's journal carries both. The call
/// is answered only once both are durable; a crash before that may leave either without the
/// other, as a crash between a change and its entry always could: an entry whose "after" the
/// disk does not show is one `revert` refuses to act on.
pub fn append(
    ws: &Workspace,
    state: &Path,
    op: &mut Operation,
    unsynced: Vec<PendingSync>,
) -> io::Result<u64> {
    let path = state.join(OPERATIONS_LOG);
    let mut file = ws.open_append(&path)?;
    let mut len = file.metadata()?.len();
    if len >= rotate_bytes() {
        drop(file);
        rotate(ws, state)?;
        file = ws.open_append(&path)?;
        len = file.metadata()?.len();
    }
    let (keep, last) = tail(&mut file, len)?;
    if keep != len {
        // A torn line from a crash: it was never acknowledged; cut it so nothing is glued to it.
        file.set_len(keep)?;
    }
    let last_id = match last {
        Some(id) => id,
        None => newest_rotated_id(ws, state)?,
    };
    op.id = last_id + 1;
    let mut line = serde_json::to_vec(op).map_err(io::Error::other)?;
    line.push(b'\n');
    file.write_all(&line)?;
    if unsynced.is_empty() {
        file.sync_data()?;
    } else {
        // The entry's sync and the directories' run at once: a journalling file system then
        // commits both in one flush (measured: a write with its entry costs 1.07x one without,
        // against 1.36x with the two syncs one after the other). The reply waits for both.
        let (entry, dirs) = std::thread::scope(|s| {
            let entry = s.spawn(|| file.sync_data());
            let dirs = super::journal::sync_all(unsynced);
            (entry.join(), dirs)
        });
        dirs?;
        entry.map_err(|_| io::Error::other("the operation log's sync thread panicked"))??;
    }
    Ok(op.id)
}

/// Opens one of the log's files for reading; `None` when it does not exist (a rotation not made
/// yet).
fn open_for_reading(ws: &Workspace, path: &Path) -> io::Result<Option<File>> {
    match ws.open_regular(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
        rustix::fs::Mode::empty(),
    ) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The id of the newest entry of the rotated files, 0 when there is none.
fn newest_rotated_id(ws: &Workspace, state: &Path) -> io::Result<u64> {
    for path in files(state).into_iter().skip(1) {
        let Some(mut file) = open_for_reading(ws, &path)? else {
            continue;
        };
        let len = file.metadata()?.len();
        if let (_, Some(id)) = tail(&mut file, len)? {
            return Ok(id);
        }
    }
    Ok(0)
}

/// Renames `.operations.N` to `.N+1` from the oldest down, then `.operations` to `.1`.
fn rotate(ws: &Workspace, state: &Path) -> io::Result<()> {
    let name = OsString::from(OPERATIONS_LOG);
    for n in (1..KEEP_ROTATED).rev() {
        let from = state.join(rotated_name(&name, n));
        match ws.rename_replace(&from, &state.join(rotated_name(&name, n + 1))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    ws.rename_replace(&state.join(&name), &state.join(rotated_name(&name, 1)))
}

/// The length of the file up to its last newline, and the id of its last complete entry that
/// parses (`None` when there is none), read backwards from `len`.
pub fn tail(file: &mut File, len: u64) -> io::Result<(u64, Option<u64>)> {
    let mut lines = Backwards::new(file, len);
    let keep = lines.complete_len()?;
    while let Some(line) = lines.next_line()? {
        if let Some(id) = id_of(&line) {
            return Ok((keep, Some(id)));
        }
    }
    Ok((keep, None))
}

/// The id of an entry line, without parsing the rest of it.
fn id_of(line: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: u64,
    }
    serde_json::from_slice::<Id>(line).ok().map(|i| i.id)
}

/// Reads a file's lines from the end towards the start, a chunk at a time.
pub struct Backwards<'f> {
    file: &'f mut File,
    /// Everything before this offset is still to be read.
    pos: u64,
    /// Bytes read but not yet split off, from `pos` on.
    buf: Vec<u8>,
    started: bool,
    /// The size of the next read.
    chunk: usize,
}

impl<'f> Backwards<'f> {
    /// Lines of `file`'s first `len` bytes, last first.
    pub fn new(file: &'f mut File, len: u64) -> Self {
        Backwards {
            file,
            pos: len,
            buf: Vec::new(),
            started: false,
            chunk: FIRST_CHUNK,
        }
    }

    /// Drops a torn last line (bytes after the last newline) and returns the length of what is
    /// left; must be called before the first [`Backwards::next_line`].
    pub fn complete_len(&mut self) -> io::Result<u64> {
        self.started = true;
        loop {
            if let Some(nl) = memchr::memrchr(b'\n', &self.buf) {
                self.buf.truncate(nl + 1);
                return Ok(self.pos + nl as u64 + 1);
            }
            if self.pos == 0 {
                self.buf.clear();
                return Ok(0);
            }
            self.buf.clear();
            self.fill()?;
        }
    }

    /// Reads the chunk before `pos` in front of `buf`.
    fn fill(&mut self) -> io::Result<()> {
        let start = self.pos.saturating_sub(self.chunk as u64);
        self.chunk = (self.chunk * 2).min(CHUNK);
        let mut chunk = vec![0u8; (self.pos - start) as usize];
        self.file.seek(SeekFrom::Start(start))?;
        self.file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&self.buf);
        self.buf = chunk;
        self.pos = start;
        Ok(())
    }

    /// The line before the ones returned so far (without its newline), `None` at the start.
    pub fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        if !self.started {
            self.complete_len()?;
        }
        // `buf` ends with a newline (or is empty); the line is what precedes it back to the
        // newline before, reading more until one is found or the file starts.
        loop {
            let end = match self.buf.last() {
                Some(b'\n') => self.buf.len() - 1,
                Some(_) => self.buf.len(),
                None if self.pos == 0 => return Ok(None),
                None => {
                    self.fill()?;
                    continue;
                }
            };
            if let Some(nl) = memchr::memrchr(b'\n', &self.buf[..end]) {
                let line = self.buf[nl + 1..end].to_vec();
                self.buf.truncate(nl + 1);
                return Ok(Some(line));
            }
            if self.pos == 0 {
                let line = self.buf[..end].to_vec();
                self.buf.clear();
                return Ok(Some(line));
            }
            if self.buf.len() > MAX_LINE {
                // Not an entry any writer made: skip to the previous newline.
                self.buf.clear();
                self.fill()?;
                if let Some(nl) = memchr::memrchr(b'\n', &self.buf) {
                    self.buf.truncate(nl + 1);
                }
                continue;
            }
            self.fill()?;
        }
    }
}

/// Where a [`Backwards`] reader stood, kept between the lines [`NewestFirst`] asks for.
struct Place {
    pos: u64,
    buf: Vec<u8>,
    started: bool,
    chunk: usize,
}

/// Entries of the log of store `state`, newest first, across its rotations. A line that does
/// not parse is counted in [`NewestFirst::skipped`] and passed over: the log is evidence, and
/// one bad line must not hide the rest.
pub struct NewestFirst {
    ws: Workspace,
    files: std::vec::IntoIter<PathBuf>,
    current: Option<(File, Place)>,
    /// Lines that were not entries.
    pub skipped: u64,
}

impl NewestFirst {
    /// The entries of store `state` (root-relative), newest first.
    pub fn new(ws: &Workspace, state: &Path) -> NewestFirst {
        NewestFirst {
            ws: ws.clone(),
            files: files(state).into_iter(),
            current: None,
            skipped: 0,
        }
    }

    /// The next older entry, `None` when the oldest kept has been returned.
    pub fn next_entry(&mut self) -> io::Result<Option<Operation>> {
        loop {
            if self.current.is_none() {
                let Some(path) = self.files.next() else {
                    return Ok(None);
                };
                let Some(file) = open_for_reading(&self.ws, &path)? else {
                    continue;
                };
                let len = file.metadata()?.len();
                let place = Place {
                    pos: len,
                    buf: Vec::new(),
                    started: false,
                    chunk: FIRST_CHUNK,
                };
                self.current = Some((file, place));
            }
            let Some((file, place)) = self.current.as_mut() else {
                continue;
            };
            // The reader borrows the file for one line at a time; its place is kept here
            // between calls.
            let mut back = Backwards {
                file,
                pos: place.pos,
                buf: std::mem::take(&mut place.buf),
                started: place.started,
                chunk: place.chunk,
            };
            let line = back.next_line()?;
            *place = Place {
                pos: back.pos,
                buf: back.buf,
                started: true,
                chunk: back.chunk,
            };
            match line {
                None => self.current = None,
                Some(l) if l.is_empty() => {}
                Some(l) => match serde_json::from_slice::<Operation>(&l) {
                    Ok(op) => return Ok(Some(op)),
                    Err(_) => self.skipped += 1,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // The test builds its log file by name.
    use super::*;

    fn lines_backwards(data: &[u8]) -> Vec<Vec<u8>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        std::fs::write(&p, data).expect("write");
        let mut f = File::open(&p).expect("open");
        let len = data.len() as u64;
        let mut b = Backwards::new(&mut f, len);
        let mut out = Vec::new();
        while let Some(l) = b.next_line().expect("line") {
            out.push(l);
        }
        out
    }

    #[test]
    fn lines_come_back_last_first_without_the_torn_tail() {
        assert_eq!(
            lines_backwards(b"a\nbb\nccc\ntorn"),
            vec![b"ccc".to_vec(), b"bb".to_vec(), b"a".to_vec()]
        );
        assert!(lines_backwards(b"").is_empty());
        assert!(lines_backwards(b"torn only").is_empty());
    }

    #[test]
    fn lines_longer_than_a_chunk_are_whole() {
        let long = vec![b'x'; CHUNK * 2 + 17];
        let mut data = b"first\n".to_vec();
        data.extend_from_slice(&long);
        data.extend_from_slice(b"\nlast\n");
        assert_eq!(
            lines_backwards(&data),
            vec![b"last".to_vec(), long, b"first".to_vec()]
        );
    }
}
