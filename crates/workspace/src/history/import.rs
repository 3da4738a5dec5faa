//! Bringing versions recorded elsewhere (the shelpa era's `.shelpa/` mirrors) into a file's
//! history, so `undo_file` can walk back through edits made before this store existed.

use std::collections::HashSet;
use std::path::Path;

use super::layout::IMPORTS_LOG;
use super::log::path_field;
use super::versions::{self, Head};
use super::{io_err, HistoryError, Store, StoreLock};

/// What importing one file's outside versions did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Versions added to the history.
    pub added: usize,
    /// Versions skipped because an earlier import already added them.
    pub skipped: usize,
    /// The history's newest version number afterwards (None if it has none).
    pub newest: Option<u64>,
}

impl Store {
    /// Appends `versions` (oldest first, each with a key unique within this path, such as a
    /// record id) after the newest version of `rel`, and moves the head to the last one. The
    /// workspace file is not touched: if it differs from the head, the next undo or redo records
    /// it first, as for any outside change. Keys already imported for `rel` are skipped, so
    /// importing twice adds nothing. Nothing is dropped, not even an undone future.
    pub fn import_versions(
        &self,
        lock: &StoreLock,
        rel: &Path,
        versions: &[(String, Vec<u8>)],
    ) -> Result<ImportReport, HistoryError> {
        let state = self.state_dir(true)?;
        let ledger = self.log(&state, IMPORTS_LOG);
        let rel_field = path_field(rel);
        // From the index: the ledger is read once per process and then only its new lines, so
        // importing many files does not read it once per file.
        let done: HashSet<Vec<u8>> = self
            .index_part(&state, super::index::Part::Imports)?
            .imported(rel);
        let history = versions::for_path(&self.ws, &state, self.checked(rel)?)?;
        // After the top of the redo chain: nothing is dropped, not even an undone future.
        let mut head = match history.head()? {
            Some(h) => Some(Head {
                current: history.newest(h)?,
            }),
            None => None,
        };
        let mut report = ImportReport::default();
        for (key, content) in versions {
            if done.contains(key.as_bytes()) {
                report.skipped += 1;
                continue;
            }
            head = Some(history.append(head, content)?);
            // The snapshot is durable before the ledger says so: a crash in between imports
            // that version again next time, which duplicates a version but loses nothing.
            ledger
                .append(&[rel_field, key.as_bytes()])
                .map_err(io_err(format!("cannot append to {IMPORTS_LOG}")))?;
            report.added += 1;
        }
        report.newest = head.map(|h| h.current);
        if report.added > 0 {
            // The workspace file is as it was; its history gained versions.
            lock.touch(rel);
            lock.journal().versions(rel, None, report.newest);
        }
        Ok(report)
    }
}
