//! `filesystem check [--repair]`: verifying the server's own state after a crash, a careless copy
//! or tampering, and repairing only what can be repaired without losing anything.
//!
//! The store is designed so that a process killed at any instant leaves it usable; this command
//! is how a person (or a test) confirms that, and how the few harmless leftovers of a crash —
//! a torn last log line, a temporary file that was never renamed, a head that names a snapshot
//! that is not there — are cleaned up. Each area has its own module: [`logs`] (the append-only
//! logs), [`store`] (histories, trash, counter, links and debris inside `.filesystem/`),
//! [`workspace`] (temporary files beside workspace files) and [`mirrors`] (`.shelpa/`, judged by
//! the audit's own verifier). [`render`] prints the report.
//!
//! Repairs are an allow-list: cutting a torn last log line, lowering a head to the newest
//! snapshot that exists, raising a trash counter, removing temporaries that are provably ours and
//! stale, and moving unexplained store debris into `.filesystem/.orphans/`. Nothing a user wrote
//! is ever deleted; everything else is reported with what to do by hand.

mod leftovers;
mod logs;
mod mirrors;
mod render;
mod repair;
mod store;

use std::path::Path;

use clap::Args;

use workspace::history::Store;

/// What `check --help` says about the exit status, so scripts can rely on it.
const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  the store is consistent: nothing needs doing, or only warnings and notes remain (they are
     printed; warnings are harmless leftovers such as temporaries of interrupted writes)
  1  an error remains (something the server may trip over, or lost or tampered data); with
     --strict, also when a warning remains
  2  the check could not run (the root is unusable, the lock for --repair cannot be taken, or
     the store cannot be listed)";

/// `filesystem check` flags.
#[derive(Args, Debug, Clone)]
#[command(after_help = EXIT_STATUS_HELP)]
pub struct CheckArgs {
    /// Repair what can be repaired safely (takes the store lock); report the rest.
    #[arg(long)]
    pub repair: bool,

    /// Print JSON for scripts instead of one line per finding.
    #[arg(long)]
    pub json: bool,

    /// Count warnings as errors for the exit status (exit 1 when a warning remains).
    #[arg(long)]
    pub strict: bool,
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckSeverity {
    /// A leftover the store already handles by design; nothing needs doing.
    Info,
    /// Harmless to the data, but something should be cleaned up or looked at.
    Warning,
    /// Something the server may trip over, or that may mean lost or tampered data.
    Error,
}

impl CheckSeverity {
    /// The word the report shows.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckSeverity::Info => "info",
            CheckSeverity::Warning => "warning",
            CheckSeverity::Error => "error",
        }
    }
}

/// What `--repair` does (or did) about a finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fix {
    /// Nothing is needed.
    Nothing,
    /// `--repair` would do this (the check ran without it).
    WouldRepair(String),
    /// `--repair` did this.
    Repaired(String),
    /// `--repair` tried and failed; the text says why.
    Failed(String),
    /// Not safe to repair automatically; the text says what a person should do.
    Manual(String),
}

impl Fix {
    /// The machine-readable name of the kind of fix.
    pub fn kind(&self) -> &'static str {
        match self {
            Fix::Nothing => "none",
            Fix::WouldRepair(_) => "would_repair",
            Fix::Repaired(_) => "repaired",
            Fix::Failed(_) => "failed",
            Fix::Manual(_) => "manual",
        }
    }
}

/// One problem found, located.
#[derive(Clone, Debug)]
pub struct CheckFinding {
    /// How bad it is.
    pub severity: CheckSeverity,
    /// Where, relative to the workspace root (`.filesystem/.moves:12`, `src/.x.shelpa-tmp-…`).
    pub place: String,
    /// What is wrong.
    pub problem: String,
    /// What repair did, would do, or what to do by hand.
    pub fix: Fix,
}

impl CheckFinding {
    /// True when this finding still needs attention after the run (it is not merely informative
    /// and was not repaired).
    pub fn remains(&self) -> bool {
        self.severity != CheckSeverity::Info && !matches!(self.fix, Fix::Repaired(_))
    }
}

/// Everything one run found.
#[derive(Debug, Default)]
pub struct CheckReport {
    /// The findings, in the order the areas were checked.
    pub findings: Vec<CheckFinding>,
    /// Whether repairs were attempted.
    pub repair: bool,
    /// How many `.shelpa/` mirrors were read.
    pub mirrors_checked: usize,
    /// How many version histories were read.
    pub histories_checked: usize,
}

impl CheckReport {
    /// True when nothing needs attention any more.
    pub fn clean(&self) -> bool {
        !self.findings.iter().any(CheckFinding::remains)
    }

    /// The exit status of a run that found this: 1 when an error remains (or, with `strict`, a
    /// warning), else 0. Notes never count; warnings are printed but, by default, do not make
    /// a consistent store fail (a crash's harmless leftovers are warnings).
    pub fn exit_status(&self, strict: bool) -> i32 {
        let worst = self
            .findings
            .iter()
            .filter(|f| f.remains())
            .map(|f| f.severity)
            .max();
        match worst {
            Some(CheckSeverity::Error) => 1,
            Some(CheckSeverity::Warning) if strict => 1,
            _ => 0,
        }
    }

    /// Findings of `severity`.
    pub fn count(&self, severity: CheckSeverity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    pub(crate) fn push(
        &mut self,
        severity: CheckSeverity,
        place: String,
        problem: String,
        fix: Fix,
    ) {
        self.findings.push(CheckFinding {
            severity,
            place,
            problem,
            fix,
        });
    }
}

/// Why the check itself could not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The root is unusable.
    #[error("{0}")]
    Root(String),
    /// The store lock could not be taken for `--repair`.
    #[error("cannot take the history store's lock for --repair ({0}); rerun without --repair to only report")]
    Lock(String),
    /// Reading something failed outright.
    #[error("{what}: {source}; check permissions and rerun")]
    Io {
        /// What was being read.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Checks (and with `repair`, repairs) the state of the workspace at canonical `root`.
pub fn check(root: &Path, allow_root_slash: bool, repair: bool) -> Result<CheckReport, CheckError> {
    let mut report = CheckReport {
        repair,
        ..CheckReport::default()
    };
    let state = root.join(workspace::guard::STATE_DIRS[0]);
    let ws = workspace::Workspace::open(root).map_err(|source| CheckError::Io {
        what: "cannot open the workspace root".into(),
        source,
    })?;
    let store_dir = Path::new(workspace::guard::STATE_DIRS[0]);
    let found = ws.stat(store_dir);
    let has_store = matches!(&found, Ok(Some(m)) if m.is_dir());
    // Holding the lock means no server is between the steps of a mutation, so a temporary file
    // older than this moment cannot belong to a write still in progress.
    let _lock = if repair && has_store {
        Some(
            Store::new(ws.clone(), false)
                .lock()
                .map_err(|e| CheckError::Lock(e.to_string()))?,
        )
    } else {
        None
    };
    let mut fixer = repair::Fixer::new(ws.clone(), repair);
    match found {
        Ok(Some(m)) if m.is_dir() => {
            logs::check(&state, &mut fixer, &mut report);
            store::check(&state, &mut fixer, &mut report)?;
        }
        Ok(Some(_)) => report.push(
            CheckSeverity::Error,
            ".filesystem".into(),
            "is not a plain directory (a symlink or a file); the server refuses to use it".into(),
            Fix::Manual("move it out of the workspace so the server can create its own".into()),
        ),
        Ok(None) | Err(_) => {}
    }
    leftovers::check(root, &mut fixer, &mut report)?;
    mirrors::check(root, &ws, allow_root_slash, &mut report);
    Ok(report)
}

/// Runs `filesystem check` for the root [`workspace::root::resolve`] chooses (`--root`, else
/// `FILESYSTEM_ROOT`, else the current directory); returns the exit status
/// described by [`EXIT_STATUS_HELP`]: 0 consistent (warnings may be printed), 1 an error remains
/// (with `--strict`, a warning too), 2 the check could not run.
pub fn run(root: Option<&Path>, allow_root_slash: bool, args: &CheckArgs) -> i32 {
    let root = match workspace::root::resolve(root, allow_root_slash) {
        Ok(chosen) => chosen.canonical,
        Err(e) => {
            eprintln!("filesystem check: {e}");
            return 2;
        }
    };
    match check(&root, allow_root_slash, args.repair) {
        Ok(report) => {
            let text = if args.json {
                render::json(&root, &report)
            } else {
                render::text(&report)
            };
            let printed = crate::cli::print_out(&text);
            report.exit_status(args.strict).max(printed)
        }
        Err(e) => {
            eprintln!("filesystem check: {e}");
            2
        }
    }
}

// The tests build their fixtures by path inside their own temporary directories.
#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        (dir, root)
    }

    fn write(root: &Path, rel: &str, content: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }

    fn find<'a>(r: &'a CheckReport, place: &str) -> &'a CheckFinding {
        r.findings
            .iter()
            .find(|f| f.place.starts_with(place))
            .unwrap_or_else(|| panic!("no finding at {place}: {:#?}", r.findings))
    }

    #[test]
    fn a_head_past_the_newest_snapshot_is_lowered_and_a_gap_is_only_reported() {
        let (_d, root) = root();
        write(&root, ".filesystem/a/00001", "1");
        write(&root, ".filesystem/a/00002", "2");
        write(&root, ".filesystem/a/.head", "4\n");
        write(&root, ".filesystem/b/00001", "1");
        write(&root, ".filesystem/b/00003", "3");
        write(&root, ".filesystem/b/.head", "3\n");
        let r = check(&root, false, false).expect("check");
        assert!(matches!(
            find(&r, ".filesystem/a/.head").fix,
            Fix::WouldRepair(_)
        ));
        assert!(matches!(find(&r, ".filesystem/b").fix, Fix::Manual(_)));
        let r = check(&root, false, true).expect("repair");
        assert!(!r.clean(), "the gap in b remains");
        let head = std::fs::read_to_string(root.join(".filesystem/a/.head"));
        assert_eq!(head.expect("head"), "2\n");
    }

    #[test]
    fn a_store_in_the_previous_layout_is_reported_as_to_be_converted_not_as_damage() {
        let (_d, root) = root();
        write(&root, ".filesystem/files/a/#versions/00001", "1");
        write(&root, ".filesystem/files/a/#versions/head", "1 1\n");
        let r = check(&root, false, false).expect("check");
        let f = find(&r, ".filesystem/files");
        assert_eq!(f.severity, CheckSeverity::Info);
        assert!(
            f.problem.contains("converted on next open"),
            "{}",
            f.problem
        );
        assert!(r.clean(), "{:#?}", r.findings);
    }

    #[test]
    fn escapes_and_names_in_history_trees_are_checked() {
        let (_d, root) = root();
        write(&root, ".filesystem/d/%00001/00001", "1");
        write(&root, ".filesystem/d/%00001/.head", "1\n");
        write(&root, ".filesystem/%%x/.head", "1\n");
        write(&root, ".filesystem/%%x/00001", "1");
        // `%y` needs no escape, so no encoder wrote it; a loose file is not a snapshot.
        write(&root, ".filesystem/%y/00001", "1");
        write(&root, ".filesystem/d/notes.txt", "?");
        let r = check(&root, false, false).expect("check");
        assert_eq!(r.histories_checked, 2, "{:#?}", r.findings);
        assert_eq!(find(&r, ".filesystem/%y").severity, CheckSeverity::Warning);
        assert_eq!(
            find(&r, ".filesystem/d/notes.txt").severity,
            CheckSeverity::Warning
        );
    }

    #[test]
    fn a_torn_log_line_is_cut_and_a_bad_middle_line_is_left() {
        let (_d, root) = root();
        let t = "2024-01-01T00:00:00.000000Z";
        write(
            &root,
            ".filesystem/.moves",
            &format!("{t}\ta\tb\ngarbage\n{t}\tb\tc\n{t}\tc\t"),
        );
        let r = check(&root, false, true).expect("repair");
        assert_eq!(
            find(&r, ".filesystem/.moves:2").severity,
            CheckSeverity::Error
        );
        assert!(matches!(
            find(&r, ".filesystem/.moves:4").fix,
            Fix::Repaired(_)
        ));
        let log = std::fs::read_to_string(root.join(".filesystem/.moves")).expect("log");
        assert_eq!(log, format!("{t}\ta\tb\ngarbage\n{t}\tb\tc\n"));
    }

    #[test]
    fn trash_and_delete_log_disagreements_are_reported_and_the_counter_raised() {
        let (_d, root) = root();
        let t = "2024-01-01T00:00:00.000000Z";
        write(
            &root,
            ".filesystem/.deletes",
            &format!("{t}\tdelete\t1\tgone.txt\n{t}\tdelete\t2\tkept.txt\n"),
        );
        write(&root, ".filesystem/.trash/00002", "kept");
        write(&root, ".filesystem/.trash/00007", "nobody logged me");
        write(&root, ".filesystem/.trash/00009.history/00001", "v1");
        write(&root, ".filesystem/.next-trash-id", "3\n");
        let r = check(&root, false, true).expect("repair");
        assert_eq!(
            find(&r, ".filesystem/.trash/00001").severity,
            CheckSeverity::Info
        );
        assert!(matches!(
            find(&r, ".filesystem/.trash/00007").fix,
            Fix::Manual(_)
        ));
        assert!(r
            .findings
            .iter()
            .any(|f| f.place == ".filesystem/.trash/00009.history"
                && matches!(f.fix, Fix::Repaired(_))));
        let counter = std::fs::read_to_string(root.join(".filesystem/.next-trash-id"));
        assert_eq!(counter.expect("counter"), "10\n");
        // User data in the trash is never touched; the orphaned history was moved, not deleted.
        assert!(root.join(".filesystem/.trash/00007").exists());
        assert!(!root.join(".filesystem/.trash/00009.history").exists());
    }

    #[test]
    fn links_are_reported_never_followed_and_temporaries_are_cleared() {
        let (_d, root) = root();
        let outside = tempfile::tempdir().expect("outside");
        write(&root, ".filesystem/a/.head", "1\n");
        write(&root, ".filesystem/a/00001", "1");
        write(&root, ".filesystem/a/.filesystem-tmp-Ab12Cd", "half");
        write(&root, "src/.filesystem-tmp-Zz9Yy8", "half");
        // A leftover of ours still has the bits every temporary is created with.
        std::fs::set_permissions(
            root.join("src/.filesystem-tmp-Zz9Yy8"),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )
        .expect("chmod");
        write(&root, "src/.filesystem-tmp-User01", "a user's own file");
        write(&root, "src/.main.rs.shelpa-tmp-4000000-17-0", "half");
        std::os::unix::fs::symlink(outside.path(), root.join(".filesystem/a/evil")).expect("link");
        let r = check(&root, false, true).expect("repair");
        assert_eq!(
            find(&r, ".filesystem/a/evil").severity,
            CheckSeverity::Error
        );
        assert!(!root.join(".filesystem/a/.filesystem-tmp-Ab12Cd").exists());
        assert!(!root.join("src/.filesystem-tmp-Zz9Yy8").exists());
        assert!(
            root.join("src/.filesystem-tmp-User01").exists(),
            "a file without the temporary's mark is a user's and stays"
        );
        // Tee no longer makes these and nothing marks one as ours: reported, never moved.
        assert!(root.join("src/.main.rs.shelpa-tmp-4000000-17-0").exists());
        assert!(std::fs::read_dir(outside.path())
            .expect("outside")
            .next()
            .is_none());
        assert!(!r.clean(), "the link still needs a person");
    }
}
