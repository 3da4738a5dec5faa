//! The `.gitignore` rules a content search applies, and the bound on what they may cost.
//!
//! Compiled ignore rules cost far more memory than their text: a glob that is not a plain name
//! or extension becomes part of one large regular expression, a few KiB each, so 64 KiB of short
//! globs take tens of MiB. A tree that puts such a file in every directory on a long path would
//! make one call hold gigabytes. So one call applies at most [`MAX_RULES`] rules and
//! [`MAX_RULE_BYTES`] bytes of them, counted over every `.gitignore` it reads; a file that would
//! go past either (or is itself larger than [`MAX_FILE_BYTES`]) is not applied, and the answer
//! says how many were left out and names the first, so the model knows why ignored files may
//! show up. Real projects stay far below both: their rules, all files together, number in the
//! hundreds or few thousands.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use workspace::guard::{PathGuard, Resolved};
use workspace::walk::{self, Tree};

/// The largest `.gitignore` applied; a bigger one is not a real ignore file.
pub const MAX_FILE_BYTES: usize = 256 * 1024;

/// The most ignore rules one call applies, all `.gitignore` files together.
pub const MAX_RULES: usize = 10_000;

/// The most bytes of ignore rules one call applies, all `.gitignore` files together (a few long
/// globs cost as much as many short ones).
pub const MAX_RULE_BYTES: usize = 1024 * 1024;

/// What one call may still spend on ignore rules, and the files it left out. Shared by the
/// walkers; a file is counted whole or not at all.
#[derive(Default)]
pub struct Budget {
    rules: AtomicUsize,
    bytes: AtomicUsize,
    /// How many `.gitignore` files were not applied, and the first of them in path order.
    skipped: Mutex<(usize, Option<PathBuf>)>,
}

impl Budget {
    /// Takes `rules` rules of `bytes` bytes from what is left; false (taking nothing) when they
    /// do not fit.
    fn take(&self, rules: usize, bytes: usize) -> bool {
        let fits = |used: &AtomicUsize, n: usize, max: usize| {
            used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= max)
            })
            .is_ok()
        };
        if !fits(&self.rules, rules, MAX_RULES) {
            return false;
        }
        if !fits(&self.bytes, bytes, MAX_RULE_BYTES) {
            self.rules.fetch_sub(rules, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Notes that the `.gitignore` at `path` (root-relative) was not applied.
    fn skip(&self, path: PathBuf) {
        let mut skipped = self.skipped.lock().unwrap_or_else(|p| p.into_inner());
        skipped.0 += 1;
        if skipped.1.as_ref().is_none_or(|first| path < *first) {
            skipped.1 = Some(path);
        }
    }

    /// The note for the answer when files were left out; `None` when every one was applied.
    pub fn note(&self) -> Option<String> {
        let skipped = self.skipped.lock().unwrap_or_else(|p| p.into_inner());
        let (count, first) = (skipped.0, skipped.1.as_ref()?);
        let files = if count == 1 {
            "1 .gitignore file was".to_string()
        } else {
            format!("{count} .gitignore files were")
        };
        Some(format!(
            "{files} not applied (the first: '{}'), so files they ignore may be listed: one search applies at most {MAX_RULES} ignore rules and {} KiB of them, from files of at most {} KiB. Search a smaller path, or exclude what they ignore with 'exclude'",
            walk::shorten(first),
            MAX_RULE_BYTES / 1024,
            MAX_FILE_BYTES / 1024
        ))
    }
}

/// One `.gitignore` in force, and how to name an entry relative to the directory holding it.
pub struct IgnoreLevel {
    /// It applies to walk entries at this depth and deeper.
    pub depth: usize,
    /// Leading components of an entry's walk path to drop (the way down to its directory).
    skip: usize,
    /// Put before the rest (the way from its directory down to the walk's start).
    prefix: PathBuf,
    rules: Gitignore,
}

impl IgnoreLevel {
    /// Ignore, keep (a `!` rule), or no opinion, for the entry at walk path `path`.
    pub fn verdict(&self, path: &Path, is_dir: bool) -> Match<()> {
        let below: PathBuf = path.components().skip(self.skip).collect();
        let rel = if self.prefix.as_os_str().is_empty() {
            below
        } else {
            self.prefix.join(below)
        };
        match self.rules.matched(&rel, is_dir) {
            Match::None => Match::None,
            Match::Ignore(_) => Match::Ignore(()),
            Match::Whitelist(_) => Match::Whitelist(()),
        }
    }
}

/// The rules of the `.gitignore` read from `file`, if the budget has room for them; `None` when
/// there are none, or they were left out (noted under `shown`, its root-relative path). Lines
/// that are not valid patterns are skipped rather than failing the search.
fn parse(file: File, shown: impl FnOnce() -> PathBuf, budget: &Budget) -> Option<Gitignore> {
    let mut text = String::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .ok()?;
    // Blank lines and comments are no rules.
    let lines = || {
        text.lines().filter(|l| {
            let l = l.trim_end();
            !l.is_empty() && !l.starts_with('#')
        })
    };
    let (rules, bytes) = lines().fold((0, 0), |(n, b), l| (n + 1, b + l.len()));
    if rules == 0 {
        return None;
    }
    if text.len() > MAX_FILE_BYTES || !budget.take(rules, bytes) {
        budget.skip(shown());
        return None;
    }
    let mut b = GitignoreBuilder::new(".");
    for line in lines() {
        let _ = b.add_line(None, line);
    }
    b.build().ok().filter(|g| !g.is_empty())
}

/// The `.gitignore` files of the directories from the root down to the start's parent, which
/// apply below the start too (as in git and ripgrep). Read through the workspace layer; one that
/// is missing, a link or unreadable is simply not used.
pub fn ancestors(guard: &PathGuard, start: &Resolved, budget: &Budget) -> Vec<IgnoreLevel> {
    let parts: Vec<_> = start.relative.components().collect();
    let mut out = Vec::new();
    for cut in 0..parts.len() {
        let dir: PathBuf = parts[..cut].iter().collect();
        let path = dir.join(".gitignore");
        let Ok(file) = guard.workspace().open_read(&path) else {
            continue;
        };
        if workspace::require_regular(&file).is_err() {
            continue;
        }
        if let Some(rules) = parse(file, || path.clone(), budget) {
            out.push(IgnoreLevel {
                depth: 0,
                skip: 0,
                prefix: parts[cut..].iter().collect(),
                rules,
            });
        }
    }
    out
}

/// The `.gitignore` of the directory the walk has just entered, `depth` levels below the start
/// `start`, at walk path `path`, if it has one the budget has room for.
pub fn own(
    tree: &mut Tree,
    depth: usize,
    start: &Resolved,
    path: &Path,
    budget: &Budget,
) -> Option<IgnoreLevel> {
    let dir = tree.current()?;
    let file = walk::open_file_at(dir, OsStr::new(".gitignore")).ok()?;
    let shown = || start.relative.join(path).join(".gitignore");
    Some(IgnoreLevel {
        depth,
        skip: depth,
        prefix: PathBuf::new(),
        rules: parse(file, shown, budget)?,
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, Write};

    use super::*;

    /// `text` as a `.gitignore` read from a file.
    fn file(text: &str) -> File {
        let tmp = tempfile::tempfile().expect("tmp");
        (&tmp).write_all(text.as_bytes()).expect("write");
        (&tmp).seek(std::io::SeekFrom::Start(0)).expect("seek");
        tmp
    }

    #[test]
    fn rules_are_applied_while_the_budget_lasts_and_the_first_left_out_is_named() {
        let budget = Budget::default();
        let rules = |n: usize| (0..n).map(|i| format!("r{i}\n")).collect::<String>();
        // Comments and blank lines cost nothing.
        let small = parse(file("# c\n\n*.log\n"), || "a/.gitignore".into(), &budget);
        assert!(small.is_some_and(|g| g.num_ignores() == 1));
        assert!(budget.note().is_none());
        let most = parse(
            file(&rules(MAX_RULES - 2)),
            || "b/.gitignore".into(),
            &budget,
        );
        assert!(most.is_some());
        // One rule is left: a file of two is not applied, one of one still is.
        assert!(parse(file(&rules(2)), || "z/.gitignore".into(), &budget).is_none());
        assert!(parse(file(&rules(2)), || "c/.gitignore".into(), &budget).is_none());
        assert!(parse(file(&rules(1)), || "d/.gitignore".into(), &budget).is_some());
        // A file over the size bound is left out whatever is left.
        let fresh = Budget::default();
        let huge = format!("{}\n", "x".repeat(MAX_FILE_BYTES));
        assert!(parse(file(&huge), || "e/.gitignore".into(), &fresh).is_none());
        assert!(fresh.note().is_some_and(
            |n| n.starts_with("1 .gitignore file was not applied (the first: 'e/.gitignore')")
        ));
        let note = budget.note().expect("a note");
        assert!(
            note.starts_with("2 .gitignore files were not applied (the first: 'c/.gitignore')"),
            "{note}"
        );
    }
}
