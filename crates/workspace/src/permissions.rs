//! Who may write where: the operator's rules (`--read-only`, `--read-only-dir`, `--writable-dir`)
//! and the one check every change passes.
//!
//! The rules are root-relative paths compared by components with the path a change acts on, the
//! root-relative path the guard resolved (every symlink spliced out, `.` and `..` folded). That
//! path is the one the workspace layer then acts on without following any symlink, so a link or a
//! `..` spelling cannot carry a change across a rule's boundary: a write through `src/link` where
//! the link leads into `migrations/` is checked as the write into `migrations/` it would be, and a
//! link swapped in after the check makes the act fail instead of landing elsewhere.
//!
//! The check is made where the change is made: by the guard when it resolves a path for a change
//! ([`crate::guard::PathGuard::resolve_for_change`]), again by the history store inside each of its
//! mutations, under the store lock ([`crate::history::Store::with_permissions`]), and by the pipe
//! mode's tee right before it writes. A change is checked as a whole tree: moving, deleting or
//! replacing a directory that holds a read-only part changes that part too, so it is refused.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::guard::{display_relative, normalize};

/// The rules in force for a server (every root it serves gets the same ones). Cloning shares them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permissions {
    inner: Arc<Rules>,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Rules {
    /// `--read-only`: nothing may change.
    read_only: bool,
    /// `--read-only-dir`: these subtrees may not change.
    read_only_dirs: Vec<RuleDir>,
    /// `--writable-dir`: when any is given, only these subtrees may change.
    writable_dirs: Vec<RuleDir>,
}

/// One rule directory: as the operator gave it (folded), and the places it stands for in one
/// root (the folded path, and where it leads when it is a symlink inside the root).
#[derive(Clone, Debug, PartialEq, Eq)]
struct RuleDir {
    given: PathBuf,
    forms: Vec<PathBuf>,
}

impl RuleDir {
    fn covers(&self, rel: &Path) -> bool {
        self.forms.iter().any(|f| rel.starts_with(f))
    }

    fn lies_below(&self, rel: &Path) -> bool {
        self.forms.iter().any(|f| f.starts_with(rel) && f != rel)
    }

    fn shown(&self) -> String {
        display_relative(&self.given)
    }
}

/// A rule directory the operator gave that cannot be a part of a workspace.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuleError {
    /// Empty, absolute, or climbing out of the root.
    #[error("{flag} '{given}' is not a directory inside the workspace; give it relative to the root, e.g. {flag} migrations")]
    NotInside {
        /// The flag it came with.
        flag: &'static str,
        /// What was given.
        given: String,
    },
    /// The whole root as a rule directory (`.`): say what is meant instead.
    #[error("{flag} '{given}' names the whole workspace; use --read-only for a server that changes nothing, or leave the rule out")]
    WholeRoot {
        /// The flag it came with.
        flag: &'static str,
        /// What was given.
        given: String,
    },
}

/// A change the rules refuse: the path as the caller sees it and the rule that refuses it.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("'{path}' is read-only ({rule})")]
pub struct ReadOnly {
    /// The root-relative path of the refused change.
    pub path: String,
    /// The rule, in the words of its flag (`--read-only-dir migrations`).
    pub rule: String,
}

/// What the model is told to do instead of a refused change (the kinds that carry a suggestion
/// of their own, such as the pipe mode's, show it apart).
pub const READ_ONLY_SUGGESTION: &str =
    "this server may not change it: change files the rules allow, or ask the user to lift the rule";

/// The flag of a read-only directory.
pub const READ_ONLY_DIR_FLAG: &str = "--read-only-dir";
/// The flag of a writable directory.
pub const WRITABLE_DIR_FLAG: &str = "--writable-dir";
/// The flag of a server that changes nothing.
pub const READ_ONLY_FLAG: &str = "--read-only";

fn rule_dir(flag: &'static str, given: &str) -> Result<RuleDir, RuleError> {
    let not_inside = || RuleError::NotInside {
        flag,
        given: given.to_string(),
    };
    if given.is_empty() || given.contains('\0') || Path::new(given).is_absolute() {
        return Err(not_inside());
    }
    let folded = normalize(Path::new(given));
    if folded
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(not_inside());
    }
    if folded.as_os_str().is_empty() {
        return Err(RuleError::WholeRoot {
            flag,
            given: given.to_string(),
        });
    }
    Ok(RuleDir {
        given: folded.clone(),
        forms: vec![folded],
    })
}

impl Permissions {
    /// The rules of a server: `read_only` for one that changes nothing, the directories of
    /// `--read-only-dir` and `--writable-dir` (relative to each root; `.` and `..` folded, a path
    /// that climbs out refused).
    pub fn new(
        read_only: bool,
        read_only_dirs: &[String],
        writable_dirs: &[String],
    ) -> Result<Permissions, RuleError> {
        let dirs = |flag, given: &[String]| -> Result<Vec<RuleDir>, RuleError> {
            let mut out: Vec<RuleDir> = Vec::new();
            for g in given {
                let d = rule_dir(flag, g)?;
                if !out.iter().any(|o| o.given == d.given) {
                    out.push(d);
                }
            }
            Ok(out)
        };
        Ok(Permissions {
            inner: Arc::new(Rules {
                read_only,
                read_only_dirs: dirs(READ_ONLY_DIR_FLAG, read_only_dirs)?,
                writable_dirs: dirs(WRITABLE_DIR_FLAG, writable_dirs)?,
            }),
        })
    }

    /// No rule at all: everything the guard admits may change.
    pub fn is_unrestricted(&self) -> bool {
        !self.inner.read_only
            && self.inner.read_only_dirs.is_empty()
            && self.inner.writable_dirs.is_empty()
    }

    /// `--read-only`: nothing may change, and the tools that change things are not served.
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The same rules for one root, each rule directory also standing for where it leads when it
    /// is a symlink inside that root: `resolve` is the guard's (following links, confined), so a
    /// write reaching the linked directory by its real path meets the same rule.
    pub fn for_root(&self, resolve: impl Fn(&Path) -> Option<PathBuf>) -> Permissions {
        if self.is_unrestricted() {
            return self.clone();
        }
        let with_links = |dirs: &[RuleDir]| -> Vec<RuleDir> {
            dirs.iter()
                .map(|d| {
                    let mut d = RuleDir {
                        given: d.given.clone(),
                        forms: vec![d.given.clone()],
                    };
                    if let Some(real) = resolve(&d.given) {
                        if !d.forms.contains(&real) && !real.as_os_str().is_empty() {
                            d.forms.push(real);
                        }
                    }
                    d
                })
                .collect()
        };
        Permissions {
            inner: Arc::new(Rules {
                read_only: self.inner.read_only,
                read_only_dirs: with_links(&self.inner.read_only_dirs),
                writable_dirs: with_links(&self.inner.writable_dirs),
            }),
        }
    }

    /// Whether the root-relative `rel` (as the guard resolved it), and everything below it, may
    /// change. A path inside a read-only part, outside every writable part, or holding a
    /// read-only part below it (a move or delete of it would change that part) is refused.
    pub fn check(&self, rel: &Path) -> Result<(), ReadOnly> {
        let rules = &*self.inner;
        let refuse = |rule: String| ReadOnly {
            path: display_relative(rel),
            rule,
        };
        if rules.read_only {
            return Err(refuse(READ_ONLY_FLAG.into()));
        }
        if let Some(d) = rules.read_only_dirs.iter().find(|d| d.covers(rel)) {
            return Err(refuse(format!("{READ_ONLY_DIR_FLAG} {}", d.shown())));
        }
        if !rules.writable_dirs.is_empty() && !rules.writable_dirs.iter().any(|d| d.covers(rel)) {
            let list: Vec<String> = rules.writable_dirs.iter().map(RuleDir::shown).collect();
            return Err(refuse(format!(
                "only {WRITABLE_DIR_FLAG} {} may change",
                list.join(", ")
            )));
        }
        if let Some(d) = rules.read_only_dirs.iter().find(|d| d.lies_below(rel)) {
            return Err(refuse(format!(
                "it holds {READ_ONLY_DIR_FLAG} {}",
                d.shown()
            )));
        }
        Ok(())
    }

    /// The rules in the words of their flags, one per line, for `filesystem tools`, `--help` and
    /// the instructions; empty when there are none.
    pub fn describe(&self) -> Vec<String> {
        let rules = &*self.inner;
        let mut lines = Vec::new();
        if rules.read_only {
            lines.push(format!("{READ_ONLY_FLAG}: nothing may change"));
        }
        if !rules.writable_dirs.is_empty() {
            let list: Vec<String> = rules.writable_dirs.iter().map(RuleDir::shown).collect();
            lines.push(format!(
                "{WRITABLE_DIR_FLAG}: only {} may change",
                list.join(", ")
            ));
        }
        if !rules.read_only_dirs.is_empty() {
            let list: Vec<String> = rules.read_only_dirs.iter().map(RuleDir::shown).collect();
            lines.push(format!(
                "{READ_ONLY_DIR_FLAG}: {} may not change",
                list.join(", ")
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(ro: &[&str], w: &[&str]) -> Permissions {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Permissions::new(false, &s(ro), &s(w)).expect("valid")
    }

    fn refused(p: &Permissions, rel: &str) -> Option<String> {
        p.check(Path::new(rel)).err().map(|e| e.to_string())
    }

    #[test]
    fn a_read_only_dir_refuses_itself_and_below_and_names_the_rule() {
        let p = rules(&["migrations"], &[]);
        assert_eq!(
            refused(&p, "migrations/0003.sql").as_deref(),
            Some("'migrations/0003.sql' is read-only (--read-only-dir migrations)")
        );
        assert!(refused(&p, "migrations").is_some());
        assert!(
            refused(&p, "migrations-old/x").is_none(),
            "components, not prefixes"
        );
        assert!(refused(&p, "src/x").is_none());
    }

    #[test]
    fn a_tree_holding_a_read_only_part_is_refused_whole() {
        let p = rules(&["src/gen"], &[]);
        assert_eq!(
            refused(&p, "src").as_deref(),
            Some("'src' is read-only (it holds --read-only-dir src/gen)")
        );
        assert!(refused(&p, "").is_some(), "the root holds every rule");
        assert!(refused(&p, "src/main.rs").is_none());
    }

    #[test]
    fn writable_dirs_admit_only_their_subtrees_and_read_only_dirs_subtract() {
        let p = rules(&["src/vendor"], &["src", "docs"]);
        assert!(refused(&p, "src/a.rs").is_none());
        assert!(refused(&p, "docs").is_none());
        assert_eq!(
            refused(&p, "README.md").as_deref(),
            Some("'README.md' is read-only (only --writable-dir src, docs may change)")
        );
        assert!(refused(&p, "src/vendor/x").is_some());
        assert!(refused(&p, "srcx/a").is_some());
    }

    #[test]
    fn read_only_refuses_everything() {
        let p = Permissions::new(true, &[], &[]).expect("valid");
        assert_eq!(
            refused(&p, "a").as_deref(),
            Some("'a' is read-only (--read-only)")
        );
        assert!(p.is_read_only() && !p.is_unrestricted());
    }

    #[test]
    fn rule_dirs_are_folded_and_must_stay_inside() {
        let p = rules(&["./a/../migrations/"], &[]);
        assert!(refused(&p, "migrations/x").is_some());
        for bad in ["", "/etc", "../x", "a/../../x"] {
            assert!(
                Permissions::new(false, &[bad.to_string()], &[]).is_err(),
                "{bad:?}"
            );
        }
        assert!(matches!(
            Permissions::new(false, &[], &[".".to_string()]),
            Err(RuleError::WholeRoot { .. })
        ));
    }

    #[test]
    fn a_linked_rule_dir_also_covers_where_it_leads() {
        let p = rules(&["migrations"], &[])
            .for_root(|d| (d == Path::new("migrations")).then(|| PathBuf::from("db/m")));
        assert!(refused(&p, "db/m/1.sql").is_some());
        assert!(refused(&p, "db/m").is_some());
        assert!(refused(&p, "db").is_some(), "db holds the linked rule dir");
        assert!(refused(&p, "db2").is_none());
    }
}
