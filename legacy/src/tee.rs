//! `tee`: the only way shelpa writes, and the audit mirror every write leaves behind.
//!
//! Each write goes to the real file *and* is appended to `.shelpa/<path relative to the root>`.
//! The mirror format is line-oriented:
//!
//! ```text
//! --- shelpa:baseline ts=2026-02-25T13:17:30Z record_id=1772025450395572000 ---
//! <the file's content before shelpa first wrote to it>
//! --- shelpa:overwrite ts=2026-02-25T13:17:31Z record_id=1772025451000000000 ---
//! <the bytes of an overwrite>
//! <the bytes of appends, with no separator>
//! ```
//!
//! A separator always starts a line: when the mirror does not end with `\n`, one is written
//! first. So a version that lacked a final newline is read back with one — a known limit of the
//! format. Likewise, content that itself contains a line shaped like a separator cannot be told
//! apart from a real one by reading the mirror alone.
//!
//! Every file operation goes through the workspace layer ([`crate::workspace`]), relative to
//! directory descriptors opened beneath the root without following any symlink, and the target is
//! re-checked right before it is written, so a target swapped for a symlink, FIFO or hard link
//! after the policy checked it is refused, and a directory swapped for a symlink makes the write
//! fail instead of landing outside. An overwrite uses the layer's one temporary-file scheme;
//! mirror files are appended through [`Dir::open_append`], which refuses a hard-linked file.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use workspace::mirror::{format_separator, parse_separator, RecordKind};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use serde_json::{json, Value};

use super::failure::{Failure, EXEC_FAILED, GUARD_VIOLATION};
use workspace::guard::{display_relative, PathGuard, REPOSITORY_DIR};
use workspace::{is_swap, temp, Dir, Stat, Workspace};

/// The mirror directory, at the top of the root.
pub const MIRROR_DIR: &str = ".shelpa";

/// Mirror record ids further in the future than this are treated as forged content, not as ids
/// (the mirror holds whatever the model wrote, separator look-alikes included).
const MAX_CLOCK_SKEW_NANOS: u64 = 24 * 3600 * 1_000_000_000;

/// How much of a mirror's tail is searched for its last record id.
const ID_SCAN_BYTES: u64 = 4 * 1024 * 1024;

/// The write limits of the tee path.
#[derive(Clone, Copy, Debug)]
pub struct TeeLimits {
    /// Writes larger than this need `confirm_oversize: true`.
    pub approve_above: u64,
    /// Writes are cut to this many bytes (and reported `truncated`).
    pub hard_limit: usize,
}

/// Whether a tee replaces the file or adds to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TeeMode {
    /// Replace the whole file (atomically).
    Overwrite,
    /// Add to the end (`tee -a`).
    Append,
}

impl TeeMode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TeeMode::Overwrite => "overwrite",
            TeeMode::Append => "append",
        }
    }
}

/// What one tee wrote, as reported in `meta.tee`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeeReport {
    /// Targets, relative to the root.
    pub paths: Vec<String>,
    /// Bytes written to each target.
    pub bytes: u64,
    /// Overwrite or append.
    pub mode: TeeMode,
    /// Mirror files, relative to the root.
    pub mirror: Vec<String>,
    /// True when the input was longer than the hard limit and was cut.
    pub truncated: bool,
}

impl TeeReport {
    /// The `meta.tee` object. Several tees in one pipeline are merged into one report (paths and
    /// mirrors concatenated, the largest byte count, `mode: "mixed"` if they differ).
    pub fn merged_json(reports: &[TeeReport]) -> Value {
        let Some(first) = reports.first() else {
            return Value::Null;
        };
        let mode = if reports.iter().all(|r| r.mode == first.mode) {
            first.mode.as_str()
        } else {
            "mixed"
        };
        json!({
            "paths": reports.iter().flat_map(|r| r.paths.clone()).collect::<Vec<_>>(),
            "bytes": reports.iter().map(|r| r.bytes).max().unwrap_or(0),
            "mode": mode,
            "mirror": reports.iter().flat_map(|r| r.mirror.clone()).collect::<Vec<_>>(),
            "truncated": reports.iter().any(|r| r.truncated),
        })
    }
}

/// Why a tee write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum TeeError {
    /// Over the approval threshold without `confirm_oversize`.
    #[error("tee would write {size} bytes to '{path}', more than the approval threshold of {threshold} bytes; nothing was written.")]
    ApprovalRequired {
        /// The size that would have been written.
        size: u64,
        /// The threshold.
        threshold: u64,
        /// The (first) target.
        path: String,
    },
    /// A target inside the tool's state or `.git/`.
    #[error("'{0}' is inside a protected directory (.shelpa/, .filesystem/ or .git/) and cannot be written.")]
    Protected(String),
    /// A target that is not a plain, singly-linked regular file.
    #[error("'{path}' is {what} and cannot be written by tee.")]
    DisallowedTarget {
        /// The target.
        path: String,
        /// What it is (`a symlink`, `a directory`, …).
        what: &'static str,
    },
    /// A target outside the root, or whose directory became a symlink after checking.
    #[error("'{0}' is outside the workspace, or its directory is reached through a symlink.")]
    Escape(String),
    /// The target's directory does not exist.
    #[error("the directory of '{0}' does not exist; tee does not create directories.")]
    NoDirectory(String),
    /// The mirror under `.shelpa/` is a symlink or not a regular file: someone tampered with it.
    #[error("the audit mirror '{0}' (or a directory on its way) is a symlink or not a regular file, so the write was refused.")]
    MirrorUnsafe(String),
    /// Any other I/O failure.
    #[error("could not {op} '{path}': {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file concerned (relative to the root).
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl TeeError {
    /// The shelpa error object for this failure.
    pub fn to_failure(&self) -> Failure {
        let detail = self.to_string();
        let (code, reason, suggestion) = match self {
            TeeError::ApprovalRequired { .. } => (
                GUARD_VIOLATION,
                "APPROVAL_REQUIRED",
                "Check that this much content is intended, then repeat the same call with \"confirm_oversize\": true.".to_string(),
            ),
            TeeError::Protected(_) => (
                GUARD_VIOLATION,
                "PROTECTED_PATH",
                "Write to a file outside .shelpa/, .filesystem/ and .git/.".to_string(),
            ),
            TeeError::DisallowedTarget { .. } => (
                GUARD_VIOLATION,
                "DISALLOWED_TARGET",
                "Write to a regular file or a new name; a file with other hard links can be replaced with tee FILE, never appended to.".to_string(),
            ),
            TeeError::Escape(_) => (
                GUARD_VIOLATION,
                "PATH_ESCAPE",
                "Use a path inside the workspace.".to_string(),
            ),
            TeeError::NoDirectory(_) => (
                EXEC_FAILED,
                "WRITE_FAILED",
                "Write into an existing directory (list it with `ls`).".to_string(),
            ),
            TeeError::MirrorUnsafe(_) => (
                EXEC_FAILED,
                "WRITE_FAILED",
                "Ask the workspace owner to inspect .shelpa/; nothing was written.".to_string(),
            ),
            TeeError::Io { .. } => (
                EXEC_FAILED,
                "WRITE_FAILED",
                "Check the path and try again.".to_string(),
            ),
        };
        let mut f = Failure::new(code, reason, detail, suggestion);
        match self {
            TeeError::ApprovalRequired { path, size, .. } => {
                f.token = Some(path.clone());
                f.extra.insert("size".into(), json!(size));
            }
            TeeError::Protected(p)
            | TeeError::DisallowedTarget { path: p, .. }
            | TeeError::Escape(p)
            | TeeError::NoDirectory(p) => f.token = Some(p.clone()),
            _ => {}
        }
        f
    }
}

/// The approval gate: `size` bytes may be written only below the threshold or when confirmed.
pub fn gate(
    size: u64,
    confirmed: bool,
    limits: &TeeLimits,
    first_target: &str,
) -> Result<(), TeeError> {
    if size > limits.approve_above && !confirmed {
        return Err(TeeError::ApprovalRequired {
            size,
            threshold: limits.approve_above,
            path: first_target.to_string(),
        });
    }
    Ok(())
}

/// The root-relative form of a target the policy checked (it hands absolute paths inside the
/// root to the stages, and tee gets the same ones). Lexical only: the guard made the absolute
/// path by joining the root and the resolved relative path, so stripping the root gives that
/// relative path back; everything after this acts on it through the workspace layer.
pub fn relative_target(guard: &PathGuard, target: &Path) -> Result<PathBuf, TeeError> {
    target
        .strip_prefix(guard.root())
        .map(Path::to_path_buf)
        .map_err(|_| {
            // Never echo a path outside the root: only its last component.
            let name = target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            TeeError::Escape(name)
        })
}

/// Writes `data` to every target and its mirror. The gate must already have been passed; `data`
/// is already cut to the hard limit (`truncated` says whether it was). Targets are root-relative
/// (see [`relative_target`]); every operation goes through the workspace layer, relative to
/// directory descriptors opened beneath the root, so a directory swapped for a symlink after the
/// policy looked makes the write fail instead of landing elsewhere.
pub fn commit(
    ws: &Workspace,
    targets: &[PathBuf],
    data: &[u8],
    mode: TeeMode,
    truncated: bool,
) -> Result<TeeReport, TeeError> {
    // Check every target before writing any, so a bad second target does not leave a half-done
    // tee behind.
    let mut checked = Vec::with_capacity(targets.len());
    for target in targets {
        checked.push(check_target(target)?);
    }
    let mut report = TeeReport {
        paths: Vec::new(),
        bytes: data.len() as u64,
        mode,
        mirror: Vec::new(),
        truncated,
    };
    for target in &checked {
        write_one(ws, target, data, mode)?;
        report.paths.push(display_relative(&target.relative));
        report.mirror.push(format!(
            "{MIRROR_DIR}/{}",
            target.relative.to_string_lossy()
        ));
    }
    Ok(report)
}

/// A target that passed the static checks: root-relative, not protected, has a file name.
struct Target {
    relative: PathBuf,
    parent: PathBuf,
    name: OsString,
}

fn check_target(relative: &Path) -> Result<Target, TeeError> {
    let shown_path = display_relative(relative);
    let mut components = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(name) => components.push(name),
            _ => return Err(TeeError::Escape(shown_path)),
        }
    }
    let Some(name) = components.last() else {
        return Err(TeeError::DisallowedTarget {
            path: shown_path,
            what: "the workspace root (a directory)",
        });
    };
    // State directories at any depth (a nested workspace's mirror is as untouchable as this
    // one's), and a repository's `.git/` anywhere.
    if PathGuard::is_state_path(relative).is_some()
        || components.iter().any(|c| *c == REPOSITORY_DIR)
    {
        return Err(TeeError::Protected(shown_path));
    }
    if components.iter().any(|c| temp::is_reserved(c.as_bytes())) {
        return Err(TeeError::DisallowedTarget {
            path: shown_path,
            what:
                "in the server's temporary-file namespace (names starting with '.filesystem-tmp-')",
        });
    }
    let name = name.to_os_string();
    let parent = relative.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(Target {
        relative: relative.to_path_buf(),
        parent,
        name,
    })
}

fn kind_name(file_type: FileType) -> &'static str {
    match file_type {
        FileType::Symlink => "a symlink",
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Socket => "a socket",
        _ => "not a regular file",
    }
}

fn write_one(ws: &Workspace, target: &Target, data: &[u8], mode: TeeMode) -> Result<(), TeeError> {
    let shown_path = display_relative(&target.relative);
    let io_err = |op: &'static str| {
        let path = shown_path.clone();
        move |source: io::Error| TeeError::Io { op, path, source }
    };
    let dir = ws.dir(&target.parent).map_err(|e| {
        if is_swap(&e) {
            TeeError::Escape(shown_path.clone())
        } else if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) {
            TeeError::NoDirectory(shown_path.clone())
        } else {
            TeeError::Io {
                op: "open the directory of",
                path: shown_path.clone(),
                source: e,
            }
        }
    })?;
    // The re-check that closes the window since the policy looked.
    let existing = dir.stat(&target.name).map_err(io_err("inspect"))?;
    if let Some(st) = &existing {
        if !st.is_file() {
            return Err(TeeError::DisallowedTarget {
                path: shown_path,
                what: kind_name(st.kind),
            });
        }
        if mode == TeeMode::Append && st.nlink > 1 {
            return Err(TeeError::DisallowedTarget {
                path: shown_path,
                what: "a file with more than one hard link",
            });
        }
    }

    let mut mirror = Mirror::open(ws, target)?;
    if mirror.is_empty()? && existing.is_some() {
        let mut old = open_regular(&dir, &target.name, OFlags::RDONLY, &shown_path, mode)?;
        mirror.baseline(&mut old)?;
    }

    match mode {
        TeeMode::Append => {
            let mut file = open_regular(
                &dir,
                &target.name,
                OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
                &shown_path,
                mode,
            )?;
            mirror.append(data)?;
            file.write_all(data).map_err(io_err("append to"))?;
        }
        TeeMode::Overwrite => {
            // The record goes into the mirror before the file changes: if the replacement then
            // fails, the mirror holds a record of an attempt, which an auditor can see through;
            // the other order could leave a change the audit never saw. The replacement is the
            // layer's one temporary-file scheme (a `.filesystem-tmp-` file beside the target,
            // synced, renamed into place), which replaces a hard link instead of writing
            // through it and keeps the old permission bits.
            mirror.overwrite(data)?;
            let keep_mode = existing.map(|st| st.mode);
            dir.replace_file(&target.name, data, keep_mode, false)
                .map_err(io_err("replace"))?;
        }
    }
    Ok(())
}

/// Opens an existing-or-new target without following symlinks and without blocking on a FIFO,
/// then checks what was actually opened.
fn open_regular(
    dir: &Dir,
    name: &OsStr,
    flags: OFlags,
    shown_path: &str,
    mode: TeeMode,
) -> Result<std::fs::File, TeeError> {
    let fd = dir
        .open(name, flags | OFlags::NONBLOCK, Mode::from_raw_mode(0o666))
        .map_err(|e| {
            if is_swap(&e) {
                TeeError::DisallowedTarget {
                    path: shown_path.to_string(),
                    what: "a symlink",
                }
            } else if e.raw_os_error() == Some(libc::ENXIO) {
                TeeError::DisallowedTarget {
                    path: shown_path.to_string(),
                    what: "a FIFO",
                }
            } else {
                TeeError::Io {
                    op: "open",
                    path: shown_path.to_string(),
                    source: e,
                }
            }
        })?;
    let st = Stat::of(&fd).map_err(|e| TeeError::Io {
        op: "inspect",
        path: shown_path.to_string(),
        source: e,
    })?;
    if !st.is_file() {
        return Err(TeeError::DisallowedTarget {
            path: shown_path.to_string(),
            what: kind_name(st.kind),
        });
    }
    if mode == TeeMode::Append && st.nlink > 1 {
        return Err(TeeError::DisallowedTarget {
            path: shown_path.to_string(),
            what: "a file with more than one hard link",
        });
    }
    Ok(std::fs::File::from(fd))
}

/// One open, locked mirror file.
struct Mirror {
    file: std::fs::File,
    shown: String,
}

impl Mirror {
    /// Opens (creating as needed) `.shelpa/<relative>` through the workspace layer, refusing
    /// symlinks at every step and a mirror file with more than one link (a mirror hard-linked to
    /// a file elsewhere must never be written through), and takes an exclusive lock so two
    /// server processes cannot interleave records.
    fn open(ws: &Workspace, target: &Target) -> Result<Mirror, TeeError> {
        let shown = format!("{MIRROR_DIR}/{}", target.relative.to_string_lossy());
        let refused = |e: io::Error| {
            // A link on the way, a file where a directory is needed, a special or
            // multiply-linked mirror file: tampering, reported as such.
            if is_swap(&e)
                || matches!(
                    e.kind(),
                    io::ErrorKind::AlreadyExists | io::ErrorKind::InvalidData
                )
                || matches!(
                    e.raw_os_error(),
                    Some(libc::ENOTDIR) | Some(libc::EISDIR) | Some(libc::ENXIO)
                )
            {
                TeeError::MirrorUnsafe(shown.clone())
            } else {
                TeeError::Io {
                    op: "write the audit mirror",
                    path: shown.clone(),
                    source: e,
                }
            }
        };
        let mirror_dir = Path::new(MIRROR_DIR).join(&target.parent);
        ws.create_dirs(&mirror_dir).map_err(refused)?;
        let file = ws
            .dir(&mirror_dir)
            .and_then(|dir| dir.open_append(&target.name))
            .map_err(refused)?;
        rustix::fs::flock(&file, FlockOperation::LockExclusive).map_err(|e| TeeError::Io {
            op: "write the audit mirror",
            path: shown.clone(),
            source: e.into(),
        })?;
        Ok(Mirror { file, shown })
    }

    fn io_err(&self, source: io::Error) -> TeeError {
        TeeError::Io {
            op: "write the audit mirror",
            path: self.shown.clone(),
            source,
        }
    }

    fn len(&self) -> Result<u64, TeeError> {
        rustix::fs::fstat(self.file.as_fd())
            .map(|st| st.st_size as u64)
            .map_err(|e| self.io_err(e.into()))
    }

    fn is_empty(&self) -> Result<bool, TeeError> {
        Ok(self.len()? == 0)
    }

    /// Records the file's content from before shelpa's first write.
    fn baseline(&mut self, old: &mut impl Read) -> Result<(), TeeError> {
        self.separator(RecordKind::Baseline)?;
        io::copy(old, &mut self.file)
            .map(|_| ())
            .map_err(|e| self.io_err(e))
    }

    fn overwrite(&mut self, data: &[u8]) -> Result<(), TeeError> {
        self.separator(RecordKind::Overwrite)?;
        self.append(data)
    }

    fn append(&mut self, data: &[u8]) -> Result<(), TeeError> {
        self.file.write_all(data).map_err(|e| self.io_err(e))
    }

    /// Writes a separator line, starting a new line first if needed.
    fn separator(&mut self, kind: RecordKind) -> Result<(), TeeError> {
        let tail = self.tail().map_err(|e| self.io_err(e))?;
        let id = next_record_id(last_record_id(&tail)).ok_or_else(|| {
            self.io_err(io::Error::other(
                "the mirror's record ids have reached the largest 64-bit value, and an id is never reused; nothing was written (move the mirror aside to start a new one)",
            ))
        })?;
        let mut line = Vec::new();
        if tail.last().is_some_and(|b| *b != b'\n') {
            line.push(b'\n');
        }
        line.extend_from_slice(format_separator(kind, record_time(id), id).as_bytes());
        self.append(&line)
    }

    /// The last bytes of the mirror (enough to find its last record id).
    fn tail(&self) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let len = rustix::fs::fstat(self.file.as_fd())?.st_size as u64;
        let start = len.saturating_sub(ID_SCAN_BYTES);
        let mut buf = vec![0u8; (len - start) as usize];
        self.file.read_exact_at(&mut buf, start)?;
        Ok(buf)
    }
}

/// The record id of the last separator line in `tail`, if it is a plausible one. Separators are
/// recognised by the auditor's grammar, so writer and reader can never disagree on what one is.
fn last_record_id(tail: &[u8]) -> Option<u64> {
    let limit = now_nanos().saturating_add(MAX_CLOCK_SKEW_NANOS);
    tail.split(|b| *b == b'\n')
        .rev()
        .filter_map(|line| parse_separator(line).ok().flatten())
        .map(|sep| sep.id)
        .find(|id| *id <= limit)
}

/// Process-wide last id, so ids are strictly increasing even within one clock tick.
static LAST_ID: Mutex<u64> = Mutex::new(0);

/// The next record id: unix nanoseconds, strictly greater than any id this process handed out
/// and than `mirror_last` (the last id in the mirror, possibly written by another process).
/// `None` once ids are exhausted (the last one is `u64::MAX`): an id is never handed out twice,
/// so the write is refused rather than numbered with a repeat.
fn next_record_id(mirror_last: Option<u64>) -> Option<u64> {
    let mut last = match LAST_ID.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    let floor = (*last).max(mirror_last.unwrap_or(0)).checked_add(1)?;
    let id = now_nanos().max(floor);
    *last = id;
    Some(id)
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The time of a record id (unix nanoseconds), shown to the second in its separator.
fn record_time(id: u64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp((id / 1_000_000_000) as i64, 0).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_ids_strictly_increase_and_respect_the_mirror() {
        let a = next_record_id(None).expect("id");
        let b = next_record_id(None).expect("id");
        assert!(b > a);
        let c = next_record_id(Some(b + 1_000)).expect("id");
        assert!(c > b + 1_000);
        assert_eq!(next_record_id(Some(u64::MAX)), None, "never a repeat");
    }

    #[test]
    fn the_last_id_comes_from_real_separators_and_forged_future_ids_are_ignored() {
        let forged = format!(
            "--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id={} ---\n",
            u64::MAX - 1
        );
        let text = format!(
            "--- shelpa:baseline ts=2026-02-25T13:17:30Z record_id=5 ---\nhello\n\
             --- shelpa:other ts=2026-02-25T13:17:30Z record_id=9 ---\n{forged}"
        );
        assert_eq!(last_record_id(text.as_bytes()), Some(5));
    }

    #[test]
    fn separators_carry_utc_seconds() {
        let line = format_separator(
            RecordKind::Overwrite,
            record_time(1772025450395572000),
            1772025450395572000,
        );
        assert_eq!(
            line,
            "--- shelpa:overwrite ts=2026-02-25T13:17:30Z record_id=1772025450395572000 ---\n"
        );
    }
}
