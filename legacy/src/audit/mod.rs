//! `filesystem audit`: reading, searching and restoring from old `.shelpa/` mirrors.
//!
//! The mirror was the part of shelpa that proved its worth: after an agent overwrote a file, its
//! earlier versions could be found by pattern and brought back. This module gives that a proper
//! command line. [`workspace::mirror`] reads the format, [`tree`] finds and opens mirror files without
//! following links, [`context`] is what every subcommand works against and [`error`] how each
//! fails; [`commands`] answers the reading subcommands, [`restore`] writes a version back,
//! [`verify`] looks for damage and tampering, [`import`] turns mirrors into version history, and
//! [`render`] prints tables or JSON. This file parses the command line and dispatches; the
//! subcommand modules depend only on the modules below them, never on each other.

pub mod commands;
pub mod context;
pub mod error;
pub mod import;
pub mod render;
pub mod restore;
pub mod tree;
pub mod verify;

use std::io::Write;
use std::path::Path;

use clap::{Args, Subcommand};

use context::Audit;
pub use error::AuditError;
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
    /// Convert the mirrors into .filesystem/ version history, oldest record first, so
    /// `undo_file` can walk back through shelpa-era edits; running it again adds nothing.
    Import,
}

/// Runs `filesystem audit`. `root` is `--root`; `FILESYSTEM_ROOT`, then the current directory,
/// otherwise (see `workspace::root::resolve`). Returns the process exit status.
pub fn run(root: Option<&Path>, allow_root_slash: bool, args: &AuditArgs) -> i32 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result =
        Audit::open(root, allow_root_slash).and_then(|audit| dispatch(&audit, args, &mut out));
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

/// Runs one subcommand and returns the exit status.
pub fn dispatch(audit: &Audit, args: &AuditArgs, out: &mut dyn Write) -> Result<i32, AuditError> {
    let json = args.json;
    match &args.command {
        AuditCommand::List => commands::list(audit, json, out),
        AuditCommand::Log { path } => commands::log(audit, path, json, out),
        AuditCommand::Show { path, record } => {
            commands::show(audit, path, record.as_deref(), json, out)
        }
        AuditCommand::Grep { pattern, path } => {
            commands::grep(audit, pattern, path.as_deref(), json, out)
        }
        AuditCommand::Diff {
            path,
            record,
            record2,
        } => commands::diff(audit, path, record, record2.as_deref(), json, out),
        AuditCommand::Restore {
            path,
            record,
            to,
            force,
        } => restore::restore(
            audit,
            &restore::Request {
                path,
                record,
                to: to.as_deref(),
                force: *force,
            },
            json,
            out,
        ),
        AuditCommand::Verify => verify::verify(audit, json, out),
        AuditCommand::Import => import::import(audit, args.json, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_offers_import_as_a_working_subcommand() {
        let cmd = AuditArgs::augment_args(clap::Command::new("audit"));
        let import = cmd
            .get_subcommands()
            .find(|c| c.get_name() == "import")
            .expect("import is a subcommand");
        let about = import
            .get_about()
            .map(|a| a.to_string())
            .unwrap_or_default();
        assert!(about.contains(".filesystem/ version history"), "{about}");
        assert!(!about.contains("not available"), "{about}");
    }
}
