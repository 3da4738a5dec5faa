//! The one writer of `.shelpa/` mirrors: `tee` records every write through it and `audit restore`
//! every restore, so both produce the same bytes under the same record-id rule
//! ([`super::record_id`]).
//!
//! A mirror is opened through the workspace layer, relative to directory descriptors opened
//! beneath the root: no symlink is followed on the way, a file where a directory of `.shelpa/`
//! belongs is refused, and so is a mirror file that is special or has another link (a mirror
//! hard-linked to a file elsewhere must never be written through). It is then locked
//! exclusively, so two processes cannot interleave records; the lock is released when the
//! appender is dropped.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::FlockOperation;

use super::{format_separator, record_id, RecordKind, MIRROR_DIR};
use crate::Workspace;

/// Why a record could not be appended.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The mirror already holds the largest possible record id, and ids are never reused.
    #[error("the mirror's record ids have reached the largest 64-bit value, and an id is never reused; nothing was written (move the mirror aside to start a new one)")]
    IdsExhausted,
    /// Reading the mirror's tail or writing to it failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// One open, exclusively locked mirror file that records are appended to.
#[derive(Debug)]
pub struct MirrorAppender {
    file: File,
}

impl MirrorAppender {
    /// Opens (creating it and its directories as needed) the mirror of the root-relative
    /// `relative`, `.shelpa/<relative>`, and locks it. The errors are the layer's own: a link on
    /// the way is a swap ([`crate::is_swap`]), a file where a directory is needed is
    /// `AlreadyExists`, a special or multiply-linked mirror file is `InvalidData`.
    pub fn open(ws: &Workspace, relative: &Path) -> io::Result<MirrorAppender> {
        let mirror = Path::new(MIRROR_DIR).join(relative);
        let parent = mirror.parent().unwrap_or(Path::new(MIRROR_DIR));
        ws.create_dirs(parent)?;
        let file = ws.open_append(&mirror)?;
        rustix::fs::flock(&file, FlockOperation::LockExclusive)?;
        Ok(MirrorAppender { file })
    }

    /// Whether the mirror holds nothing yet (a file's first write records its baseline).
    pub fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Starts a record of `kind`: writes its separator line (on a new line when the mirror does
    /// not end with one) with the next record id, and returns that id. The record's content is
    /// whatever is appended after it.
    pub fn begin(&mut self, kind: RecordKind) -> Result<u64, AppendError> {
        let tail = self.tail()?;
        let id = record_id::next_for(&tail).ok_or(AppendError::IdsExhausted)?;
        let mut line = Vec::new();
        if tail.last().is_some_and(|b| *b != b'\n') {
            line.push(b'\n');
        }
        line.extend_from_slice(format_separator(kind, record_id::time_of(id), id).as_bytes());
        self.file.write_all(&line)?;
        Ok(id)
    }

    /// Appends content to the current record.
    pub fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)
    }

    /// Appends everything `source` yields to the current record (a baseline copied from the
    /// file it records).
    pub fn append_from(&mut self, source: &mut impl Read) -> io::Result<u64> {
        io::copy(source, &mut self.file)
    }

    /// Flushes the mirror to disk, for a writer that reports the record as durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(rustix::fs::fstat(self.file.as_fd())?.st_size as u64)
    }

    /// The last bytes of the mirror, enough to find its last record id.
    fn tail(&self) -> io::Result<Vec<u8>> {
        let len = self.len()?;
        let start = len.saturating_sub(record_id::TAIL_BYTES);
        let mut buf = vec![0u8; (len - start) as usize];
        self.file.read_exact_at(&mut buf, start)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::Mirror;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().canonicalize().expect("canonical");
        let ws = Workspace::open(&root).expect("open");
        (dir, ws)
    }

    #[test]
    fn records_land_in_the_mirror_of_the_path_with_growing_ids() {
        let (dir, ws) = workspace();
        std::fs::create_dir(dir.path().join("d")).expect("mkdir");
        let mut m = MirrorAppender::open(&ws, Path::new("d/f.txt")).expect("open");
        assert!(m.is_empty().expect("len"));
        let a = m.begin(RecordKind::Baseline).expect("begin");
        m.append(b"old").expect("append");
        let b = m.begin(RecordKind::Overwrite).expect("begin");
        m.append(b"new\n").expect("append");
        m.append(b"more\n").expect("append");
        drop(m);
        assert!(b > a);
        let bytes = std::fs::read(dir.path().join(".shelpa/d/f.txt")).expect("read");
        let parsed = Mirror::parse(&bytes);
        assert!(parsed.findings.is_empty(), "{:?}", parsed.findings);
        assert_eq!(
            parsed.record_views(),
            [
                (RecordKind::Baseline, Some(a), b"old\n".to_vec()),
                (RecordKind::Overwrite, Some(b), b"new\nmore\n".to_vec()),
            ],
            "a separator always starts a line"
        );
    }

    #[test]
    fn a_mirror_reached_through_a_link_or_with_another_link_is_refused() {
        let (dir, ws) = workspace();
        let outside = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(dir.path().join(".shelpa")).expect("mkdir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".shelpa/d")).expect("link");
        let err = MirrorAppender::open(&ws, Path::new("d/f.txt")).expect_err("refused");
        assert!(crate::is_swap(&err), "{err}");

        std::fs::write(outside.path().join("elsewhere"), "x").expect("write");
        std::fs::hard_link(
            outside.path().join("elsewhere"),
            dir.path().join(".shelpa/g.txt"),
        )
        .expect("hard link");
        let err = MirrorAppender::open(&ws, Path::new("g.txt")).expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert_eq!(
            std::fs::read(outside.path().join("elsewhere")).expect("read"),
            b"x"
        );
    }
}
