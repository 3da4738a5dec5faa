//! Recording a tee in the target's `.shelpa/` mirror, through the workspace layer's one mirror
//! writer ([`MirrorAppender`]), with its failures told as tee failures.

use std::io;

use super::target::Target;
use super::TeeError;
use workspace::is_swap;
use workspace::mirror::{AppendError, MirrorAppender, RecordKind, MIRROR_DIR};
use workspace::Workspace;

/// The open, locked mirror of one target.
pub(super) struct TargetMirror {
    appender: MirrorAppender,
    shown: String,
}

impl TargetMirror {
    /// Opens the target's mirror. A link on the way, a file where a directory is needed, a
    /// special or multiply-linked mirror file: tampering, reported as such.
    pub(super) fn open(ws: &Workspace, target: &Target) -> Result<TargetMirror, TeeError> {
        let shown = format!("{MIRROR_DIR}/{}", target.relative.to_string_lossy());
        match MirrorAppender::open(ws, &target.relative) {
            Ok(appender) => Ok(TargetMirror { appender, shown }),
            Err(e)
                if is_swap(&e)
                    || matches!(
                        e.kind(),
                        io::ErrorKind::AlreadyExists | io::ErrorKind::InvalidData
                    )
                    || matches!(
                        e.raw_os_error(),
                        Some(libc::ENOTDIR) | Some(libc::EISDIR) | Some(libc::ENXIO)
                    ) =>
            {
                Err(TeeError::MirrorUnsafe(shown))
            }
            Err(source) => Err(TeeError::Io {
                op: "write the audit mirror",
                path: shown,
                source,
            }),
        }
    }

    fn io_err(&self, source: io::Error) -> TeeError {
        TeeError::Io {
            op: "write the audit mirror",
            path: self.shown.clone(),
            source,
        }
    }

    /// Whether nothing was recorded for this target yet.
    pub(super) fn is_empty(&self) -> Result<bool, TeeError> {
        self.appender.is_empty().map_err(|e| self.io_err(e))
    }

    /// Records the file's content from before shelpa's first write.
    pub(super) fn baseline(&mut self, old: &mut impl io::Read) -> Result<(), TeeError> {
        self.begin(RecordKind::Baseline)?;
        self.appender
            .append_from(old)
            .map(|_| ())
            .map_err(|e| self.io_err(e))
    }

    /// Records an overwrite with its content.
    pub(super) fn overwrite(&mut self, data: &[u8]) -> Result<(), TeeError> {
        self.begin(RecordKind::Overwrite)?;
        self.append(data)
    }

    /// Adds appended bytes to the current record.
    pub(super) fn append(&mut self, data: &[u8]) -> Result<(), TeeError> {
        self.appender.append(data).map_err(|e| self.io_err(e))
    }

    fn begin(&mut self, kind: RecordKind) -> Result<u64, TeeError> {
        self.appender.begin(kind).map_err(|e| match e {
            AppendError::Io(source) => self.io_err(source),
            exhausted @ AppendError::IdsExhausted => {
                self.io_err(io::Error::other(exhausted.to_string()))
            }
        })
    }
}
