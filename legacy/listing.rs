//! The built-in `ls` used when `ls` is the whole command.
//!
//! It lists only what the guard already admitted, never shows where a symlink points (its target
//! may lie outside the workspace) and hides the tool's own state directories.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::guard::STATE_DIRS;

/// One listing line per entry of `target` (or the entry itself when it is not a directory).
/// Directories get a trailing `/` so a model can tell them apart without `-l`.
pub fn list(root: &Path, target: &Path, all: bool, long: bool) -> io::Result<String> {
    let meta = std::fs::symlink_metadata(target)?;
    if !meta.is_dir() {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(line(&name, &meta, long));
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(target)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !all && name.starts_with('.') {
            continue;
        }
        if target == root && STATE_DIRS.contains(&name.as_str()) {
            continue;
        }
        let meta = entry.metadata()?;
        entries.push((name, meta));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries
        .iter()
        .map(|(name, meta)| line(name, meta, long))
        .collect())
}

fn line(name: &str, meta: &std::fs::Metadata, long: bool) -> String {
    let ft = meta.file_type();
    let suffix = if ft.is_dir() { "/" } else { "" };
    if !long {
        return format!("{name}{suffix}\n");
    }
    let kind = if ft.is_dir() {
        'd'
    } else if ft.is_symlink() {
        'l'
    } else if ft.is_fifo() {
        'p'
    } else if ft.is_char_device() {
        'c'
    } else if ft.is_block_device() {
        'b'
    } else if ft.is_socket() {
        's'
    } else {
        '-'
    };
    let mtime = chrono::DateTime::from_timestamp(meta.mtime(), 0)
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default();
    format!(
        "{kind}{:o} {:>10} {mtime} {name}{suffix}\n",
        meta.mode() & 0o7777,
        meta.len()
    )
}
