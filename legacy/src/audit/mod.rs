//! `filesystem audit`: reading, searching and restoring from old `.shelpa/` mirrors.
//!
//! The mirror was the part of shelpa that proved its worth: after an agent overwrote a file, its
//! earlier versions could be found by pattern and brought back. This module gives that a proper
//! command line. [`workspace::mirror`] reads the format, [`tree`] finds and opens mirror files without
//! following links, [`commands`] answers each subcommand, [`restore`] writes a version back,
//! [`verify`] looks for damage and tampering, and [`render`] prints tables or JSON.

pub mod commands;
pub mod import;
pub mod render;
pub mod restore;
pub mod tree;
pub mod verify;

use std::io::Write;
use std::path::Path;

use clap::{Args, Subcommand};

pub use workspace::mirror::{versions, Mirror, Record, RecordKind, Version};

/// `filesystem audit …`: the subcommand and the flags every subcommand shares.
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Print JSON for scripts instead of human-readable tables.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: AuditCommand,
}

/// What to do with the `.shelpa/` mirrors of the workspace root.
#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Every mirrored file: records, first and last write, and whether the workspace file still
    /// matches the newest version.
    List,
    /// The records of one file: id, time, kind, size, first line.
    Log {
        /// Workspace path of the file (e.g. notes/todo.md).
        path: String,
    },
    /// Print the file's content as of a record (default: the newest), byte for byte.
    Show {
        /// Workspace path of the file.
        path: String,
        /// A record id from `audit log`, or #N for the N-th record (1 = oldest).
        record: Option<String>,
    },
    /// Records whose content has a line matching a regular expression.
    Grep {
        /// Regular expression (Rust regex syntax), matched against each line.
        pattern: String,
        /// Only search this file's mirror.
        path: Option<String>,
    },
    /// Unified diff between two versions, or between a version and the current workspace file.
    Diff {
        /// Workspace path of the file.
        path: String,
        /// The older side: a record id or #N.
        record: String,
        /// The newer side (default: the current workspace file).
        record2: Option<String>,
    },
    /// Write a version back into the workspace; the restore is itself recorded in the mirror.
    Restore {
        /// Workspace path of the file whose mirror holds the version.
        path: String,
        /// The version: a record id or #N.
        record: String,
        /// Write to this workspace path instead of PATH.
        #[arg(long, value_name = "DEST")]
        to: Option<String>,
        /// Overwrite even if the destination holds content that no record has.
        #[arg(long)]
        force: bool,
    },
    /// Check every mirror for malformed separators, ids going backwards, truncation, links or
    /// paths leading outside the root, and non-UTF-8 content. Exit 1 if an error is found; warnings
    /// alone (near-miss separator lines, odd time stamps, non-UTF-8) are printed and exit 0.
    Verify,
    /// Convert the mirrors into .filesystem/ version history (not available in this build).
    Import,
}

/// Why an audit command failed. Every message says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The root could not be used.
    #[error("{0}")]
    Root(String),
    /// PATH is empty or lies outside the root.
    #[error("'{0}' is not a path inside the workspace; name the file relative to the root (e.g. notes/todo.md), as `filesystem audit list` shows it")]
    BadPath(String),
    /// No mirror exists for PATH.
    #[error("no mirror for '{0}' under .shelpa/; run `filesystem audit list` to see which files are mirrored")]
    NoMirror(String),
    /// The mirror exists but may not be read (link, special file).
    #[error(
        "the mirror of '{path}' {why}; it was not read. Run `filesystem audit verify` for details"
    )]
    HostileMirror {
        /// The workspace path.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// RECORD names no record.
    #[error("no record '{given}' in the mirror of '{path}'; run `filesystem audit log {path}` to see its record ids (or use #N for the N-th record)")]
    UnknownRecord {
        /// The workspace path.
        path: String,
        /// The RECORD argument.
        given: String,
    },
    /// RECORD names more than one record.
    #[error("record id {given} appears {count} times in the mirror of '{path}' (see `filesystem audit verify`); address the one you mean by position, e.g. #{first}, as `filesystem audit log {path}` numbers them")]
    AmbiguousRecord {
        /// The workspace path.
        path: String,
        /// The RECORD argument.
        given: String,
        /// How many records carry it.
        count: usize,
        /// Position of the first one.
        first: usize,
    },
    /// The grep pattern is not a regular expression.
    #[error("the pattern is not a valid regular expression: {0}; escape special characters (e.g. \\. for a dot) or quote the pattern for your shell")]
    BadPattern(String),
    /// The path guard refused a destination.
    #[error("{0}")]
    Guard(#[from] workspace::guard::GuardError),
    /// The destination exists but is not a regular file.
    #[error("'{0}' is not a regular file (a symlink, directory or special file); restore to a plain file path with --to DEST")]
    DestinationNotFile(String),
    /// Restoring would destroy content that no record holds.
    #[error("refused: '{0}' holds content that is in no record of its mirror; review it first (`filesystem audit diff PATH RECORD` shows what would change), then rerun with --force (its current content is kept in the mirror as a baseline record first), or restore to another file with --to DEST")]
    Unrecorded(String),
    /// Import needs the history store.
    /// The `.filesystem/` history store refused.
    #[error("the .filesystem history store refused: {0}; run `filesystem check` to inspect it")]
    History(String),
    /// The mirror already holds the largest possible record id, so no new record can follow it.
    #[error("the mirror of '{0}' already holds record id {max}, the largest a record id can be, and ids are never reused; nothing was recorded or restored. Move .shelpa/{0} aside (it stays readable with `filesystem audit`) so a new mirror starts, or restore to another file with --to DEST", max = u64::MAX)]
    RecordIdsExhausted(String),
    /// Reading or writing failed.
    #[error("{what}: {source}; check permissions and free space, then retry")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl AuditError {
    /// The exit status: 2 for usage errors (the command line names something that does not
    /// exist or is malformed), 1 for refusals and failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            AuditError::Root(_)
            | AuditError::BadPath(_)
            | AuditError::NoMirror(_)
            | AuditError::UnknownRecord { .. }
            | AuditError::AmbiguousRecord { .. }
            | AuditError::BadPattern(_) => 2,
            _ => 1,
        }
    }
}

/// Runs `filesystem audit`. `root` is `--root`; `FILESYSTEM_ROOT`, then the current directory,
/// otherwise (see `workspace::root::resolve`). Returns the process exit status.
pub fn run(root: Option<&Path>, allow_root_slash: bool, args: &AuditArgs) -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = commands::Audit::open(root, allow_root_slash)
        .and_then(|audit| commands::dispatch(&audit, args, &mut out));
    let _ = out.flush();
    match result {
        Ok(code) => code,
        Err(e) => {
            if args.json {
                let body = serde_json::json!({"error": e.to_string(), "exit_code": e.exit_code()});
                println!("{body}");
            }
            // Errors name mirrored paths and the user's own arguments: shown escaped.
            eprint!("{}", render::message(&format!("filesystem audit: {e}\n")));
            e.exit_code()
        }
    }
}
