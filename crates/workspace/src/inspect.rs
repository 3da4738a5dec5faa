//! Describing a path without opening it: `lstat` with the times (and the birth time where the
//! kernel and the file system record it), relative to the parent's descriptor opened beneath the
//! root like every other operation of this layer.

use std::ffi::OsStr;
use std::path::Path;

use rustix::fs::FileType;

use crate::Workspace;

/// What a path is, read without following a final symlink: for tools that describe a file
/// (`get_file_info`) rather than open it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// File, directory, symlink or special.
    pub kind: FileType,
    /// Size in bytes (of the link itself for a symlink).
    pub size: u64,
    /// Permission bits (and setuid, setgid, sticky).
    pub mode: u32,
    /// Modification time: seconds and nanoseconds since the epoch.
    pub modified: (i64, u32),
    /// Access time, as `modified`.
    pub accessed: (i64, u32),
    /// The birth time, when the file system records it.
    pub created: Option<(i64, u32)>,
}

/// `lstat` with the times, but no birth time: where `statx` is missing.
// The field types of `struct stat` differ between targets.
#[allow(clippy::unnecessary_cast)]
fn at_stat(dir: impl std::os::fd::AsFd, name: &OsStr, root: bool) -> std::io::Result<FileInfo> {
    use rustix::fs::AtFlags;
    let st = if root {
        rustix::fs::fstat(dir)?
    } else {
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?
    };
    Ok(FileInfo {
        kind: FileType::from_raw_mode(st.st_mode as _),
        size: st.st_size as u64,
        mode: (st.st_mode as u32) & 0o7777,
        modified: (st.st_mtime as i64, st.st_mtime_nsec as u32),
        accessed: (st.st_atime as i64, st.st_atime_nsec as u32),
        created: None,
    })
}

/// `lstat` of `rel` with its times, relative to its parent's descriptor; `None` when nothing is
/// there. `statx` on Linux, for the birth time.
pub(crate) fn inspect(ws: &Workspace, rel: &Path) -> std::io::Result<Option<FileInfo>> {
    #[cfg(target_os = "linux")]
    fn at(dir: impl std::os::fd::AsFd, name: &OsStr, root: bool) -> std::io::Result<FileInfo> {
        use rustix::fs::{statx, AtFlags, StatxFlags};
        let flags = if root {
            AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW
        } else {
            AtFlags::SYMLINK_NOFOLLOW
        };
        let st = match statx(
            &dir,
            name,
            flags,
            StatxFlags::BASIC_STATS | StatxFlags::BTIME,
        ) {
            Ok(st) => st,
            // Kernels before 4.11, and sandboxes that filter the call: plain stat, no birth time.
            Err(rustix::io::Errno::NOSYS) | Err(rustix::io::Errno::PERM) => {
                return at_stat(dir, name, root)
            }
            Err(e) => return Err(e.into()),
        };
        let created = (st.stx_mask & StatxFlags::BTIME.bits() != 0)
            .then_some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec));
        Ok(FileInfo {
            kind: FileType::from_raw_mode(st.stx_mode.into()),
            size: st.stx_size,
            mode: u32::from(st.stx_mode) & 0o7777,
            modified: (st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec),
            accessed: (st.stx_atime.tv_sec, st.stx_atime.tv_nsec),
            created,
        })
    }
    #[cfg(not(target_os = "linux"))]
    fn at(dir: impl std::os::fd::AsFd, name: &OsStr, root: bool) -> std::io::Result<FileInfo> {
        at_stat(dir, name, root)
    }
    let found = if rel.as_os_str().is_empty() {
        at(ws.root_fd(), OsStr::new(""), true)
    } else {
        match ws.parent(rel) {
            Ok((dir, name)) => at(&dir, name, false),
            Err(e) => Err(e),
        }
    };
    match found {
        Ok(info) => Ok(Some(info)),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_stat_fallback_agrees_with_statx_but_for_the_birth_time() {
        let tmp = tempfile::tempdir().expect("tmp");
        std::fs::write(tmp.path().join("f"), "12345").expect("write");
        let ws = Workspace::open(tmp.path()).expect("ws");
        let full = inspect(&ws, Path::new("f")).expect("stat").expect("there");
        let dir = ws.dir(Path::new("")).expect("dir");
        let plain = at_stat(&dir, OsStr::new("f"), false).expect("stat");
        assert_eq!(
            (plain.kind, plain.size, plain.mode),
            (full.kind, 5, full.mode)
        );
        assert_eq!(plain.modified, full.modified);
        assert!(plain.created.is_none());
        assert!(inspect(&ws, Path::new("nope/f")).expect("stat").is_none());
    }
}
