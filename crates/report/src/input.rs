//! Opening what the user named on the command line (`--log FILE`, `--transcripts DIR|FILE`): the
//! one place the report opens anything by its name.
//!
//! Everything else is reached from what this opens: a transcript below a named directory is
//! opened relative to the directory holding it ([`workspace::walk`]), never by a path the kernel
//! would resolve again. Only regular files are read (a FIFO or a device such as `/dev/zero` is
//! refused before any read, so it can neither block the report nor feed it without end), and
//! each file has a size bound ([`MAX_INPUT_BYTES`]).

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};
use workspace::{NotRegular, Stat};

/// The largest input file read, in bytes (1 GiB). A call log is rotated long before this and a
/// Claude Code transcript of a very long session stays well below it; a file past it is
/// refused, not cut, so that no figure silently stands for part of a file.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Which option named an input, for messages that say what it should have been.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// `--log FILE` (or a rotated file beside it).
    Log,
    /// `--transcripts DIR|FILE` (or a transcript found below it).
    Transcripts,
}

impl Flag {
    /// What the option takes, said as advice.
    pub fn takes(self) -> &'static str {
        match self {
            Flag::Log => "--log takes the call logs the server writes (<root>/.filesystem/.calls.jsonl) or copies of them",
            Flag::Transcripts => "--transcripts takes directories of Claude Code transcripts (e.g. ~/.claude/projects) or Codex CLI sessions (~/.codex/sessions), or single .jsonl transcripts",
        }
    }
}

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flag::Log => "--log",
            Flag::Transcripts => "--transcripts",
        })
    }
}

/// Why an input file was not read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// It could not be opened (missing, no permission…).
    #[error("it cannot be opened ({0})")]
    Open(io::Error),
    /// It is a FIFO, a device, a socket (or, where a file is wanted, a directory).
    #[error("it is {0}, not a regular file, so it was not read")]
    NotRegular(&'static str),
    /// It is larger than [`MAX_INPUT_BYTES`].
    #[error("it is {0} bytes, more than the {MAX_INPUT_BYTES} bytes one input file may have, so it was not read")]
    TooLarge(u64),
    /// Reading it failed part-way.
    #[error("reading it failed ({0})")]
    Read(io::Error),
}

impl InputError {
    /// What to do about it, for an input named by `flag`.
    pub fn advice(&self, flag: Flag) -> String {
        match self {
            InputError::Open(e) if e.kind() == io::ErrorKind::NotFound => {
                format!("check the path: {}", flag.takes())
            }
            InputError::Open(_) | InputError::Read(_) => {
                "check the path and its permissions".to_string()
            }
            InputError::NotRegular(_) => format!("{}: name one of those", flag.takes()),
            InputError::TooLarge(_) => {
                "split it into smaller files (e.g. `split -l 1000000 FILE part.`) and name each"
                    .to_string()
            }
        }
    }
}

/// What a name given on the command line turned out to be.
pub enum Named {
    /// A regular file within the size bound, open for reading.
    File(File),
    /// A directory, open for listing.
    Directory(OwnedFd),
}

/// Opens `path`, which the user named, and tells a regular file (within [`MAX_INPUT_BYTES`])
/// from a directory; anything else is refused. The kind is read from the open descriptor, so
/// nothing can be swapped in between the check and the read.
pub fn open_named(path: &Path) -> Result<Named, InputError> {
    let fd = open_by_name(path).map_err(InputError::Open)?;
    let stat = Stat::of(&fd).map_err(InputError::Open)?;
    if stat.kind == FileType::Directory {
        return Ok(Named::Directory(fd));
    }
    let file = File::from(fd);
    check_file(&file)?;
    Ok(Named::File(file))
}

/// Refuses an open file unless it is regular and within [`MAX_INPUT_BYTES`]: the check every
/// input file passes, whether named or found in a walk.
pub fn check_file(file: &File) -> Result<(), InputError> {
    let stat = workspace::require_regular(file).map_err(|e| match not_regular(&e) {
        Some(what) => InputError::NotRegular(what),
        None => InputError::Open(e),
    })?;
    if stat.size > MAX_INPUT_BYTES {
        return Err(InputError::TooLarge(stat.size));
    }
    Ok(())
}

/// What a file refused as not regular is instead ("a FIFO", "a device"…), if that was the
/// refusal.
pub fn not_regular(e: &io::Error) -> Option<&'static str> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<NotRegular>())
        .map(|n| n.what)
}

/// Opens `path` read-only by its name: the report's one by-name open.
// Allowed by name here, and safe: the path is one the user typed on the command line (or the
// rotated sibling of a call log they named), opened read-only and never written, and it is not
// a workspace path an agent chose. `NONBLOCK` keeps a FIFO from blocking the open and `NOCTTY`
// a terminal from becoming ours; what was opened is checked on the descriptor (`open_named`).
#[allow(clippy::disallowed_methods)]
fn open_by_name(path: &Path) -> io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)
}
