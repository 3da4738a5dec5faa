//! Why an audit subcommand failed, and the exit status each failure gives: one enum shared by
//! every subcommand module, kept apart from the dispatcher so they need nothing above them.

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
