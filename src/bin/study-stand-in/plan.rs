//! The plan file: the task's steps, in order, which the stand-in carries out through whichever
//! interface its policy draws.
//!
//! ```toml
//! [[step]]
//! read = "app.log"                   # read a file
//! [[step]]
//! write = "summary.txt"              # write a whole file
//! content = "errors: 3\n"
//! [[step]]
//! edit = "process.py"                # replace the one occurrence of `old` by `new`
//! old = "if 'ERROR' in line:"
//! new = "if level == 'ERROR':"
//! [[step]]
//! rename = "textutil.py"             # move a file to a new name
//! to = "strutil.py"
//! ```
//! Paths are relative to the workspace, without `..`: the plan lives in the task directory, not
//! in the workspace the agent works on, so nothing the agent does can change it.

use std::path::Path;

use serde::Deserialize;

use crate::error::StandInError;
use crate::input::read_text;

/// The largest plan file read.
const MAX_PLAN_BYTES: u64 = 4 << 20;
/// The most steps a plan may have.
pub const MAX_STEPS: usize = 1000;

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Read the file.
    Read {
        /// Workspace-relative path.
        path: String,
    },
    /// Write the whole file (create or replace).
    Write {
        /// Workspace-relative path.
        path: String,
        /// The new content.
        content: String,
    },
    /// Replace the one occurrence of `old` by `new` in the file.
    Edit {
        /// Workspace-relative path.
        path: String,
        /// Text that occurs exactly once in the file.
        old: String,
        /// Its replacement.
        new: String,
    },
    /// Move a file to a new name (which must not exist).
    Rename {
        /// Workspace-relative path of the file.
        from: String,
        /// Its new workspace-relative path.
        to: String,
    },
}

impl Step {
    /// Whether the step reads (drawn with `ours_read`) rather than changes files (`ours_write`).
    pub fn is_read(&self) -> bool {
        matches!(self, Step::Read { .. })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    step: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    read: Option<String>,
    write: Option<String>,
    content: Option<String>,
    edit: Option<String>,
    old: Option<String>,
    new: Option<String>,
    rename: Option<String>,
    to: Option<String>,
}

/// Reads and checks the plan at `path`.
pub fn load(path: &Path) -> Result<Vec<Step>, StandInError> {
    let invalid = |message: String| StandInError::Invalid {
        what: "plan",
        path: path.to_path_buf(),
        message,
    };
    let text = read_text(path, "plan", MAX_PLAN_BYTES)?;
    let file: PlanFile = toml::from_str(&text).map_err(|e| {
        invalid(format!(
            "{}; write [[step]] tables (see `study-stand-in --help`)",
            e.message()
        ))
    })?;
    if file.step.is_empty() || file.step.len() > MAX_STEPS {
        return Err(invalid(format!(
            "has {} steps; give from 1 to {MAX_STEPS}",
            file.step.len()
        )));
    }
    file.step
        .into_iter()
        .enumerate()
        .map(|(i, raw)| step(raw).map_err(|m| invalid(format!("step {}: {m}", i + 1))))
        .collect()
}

fn step(raw: RawStep) -> Result<Step, String> {
    let RawStep {
        read,
        write,
        content,
        edit,
        old,
        new,
        rename,
        to,
    } = raw;
    let step = match (read, write, edit, rename) {
        (Some(path), None, None, None) if content.is_none() && old.is_none() && new.is_none() && to.is_none() => {
            Step::Read { path }
        }
        (None, Some(path), None, None) if old.is_none() && new.is_none() && to.is_none() => {
            let content = content.ok_or("a write step needs `content`")?;
            Step::Write { path, content }
        }
        (None, None, Some(path), None) if content.is_none() && to.is_none() => {
            let (Some(old), Some(new)) = (old, new) else {
                return Err("an edit step needs `old` and `new`".into());
            };
            if old.is_empty() {
                return Err("an edit step's `old` must not be empty; quote text that occurs once in the file".into());
            }
            Step::Edit { path, old, new }
        }
        (None, None, None, Some(from)) if content.is_none() && old.is_none() && new.is_none() => {
            let to = to.ok_or("a rename step needs `to`")?;
            check_path(&to)?;
            Step::Rename { from, to }
        }
        _ => {
            return Err("give exactly one of read, write (+ content), edit (+ old, new), rename (+ to), and only its own keys".into())
        }
    };
    let (Step::Read { path }
    | Step::Write { path, .. }
    | Step::Edit { path, .. }
    | Step::Rename { from: path, .. }) = &step;
    check_path(path)?;
    Ok(step)
}

/// Refuses a path that could leave the workspace or that no tool could name: empty, absolute,
/// with `..`, `.`, empty components or NUL, or longer than 4096 bytes.
pub fn check_path(path: &str) -> Result<(), String> {
    let ok = !path.is_empty()
        && path.len() <= 4096
        && !path.starts_with('/')
        && !path.contains('\0')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "path '{path}' must be relative to the workspace, like 'src/app.py': no leading '/', no '.' or '..', no empty parts"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{check_path, step, RawStep, Step};

    fn raw(toml_text: &str) -> RawStep {
        toml::from_str(toml_text).expect("toml")
    }

    #[test]
    fn each_kind_of_step_reads_and_a_mixed_step_is_refused() {
        assert_eq!(
            step(raw("read = 'a.log'")),
            Ok(Step::Read {
                path: "a.log".into()
            })
        );
        assert_eq!(
            step(raw("rename = 'a.py'\nto = 'b/c.py'")),
            Ok(Step::Rename {
                from: "a.py".into(),
                to: "b/c.py".into()
            })
        );
        assert!(step(raw("read = 'a'\ncontent = 'x'")).is_err());
        assert!(step(raw("write = 'a'")).is_err());
        assert!(step(raw("edit = 'a'\nold = ''\nnew = 'x'")).is_err());
        assert!(step(raw("read = 'a'\nwrite = 'b'\ncontent = ''")).is_err());
    }

    #[test]
    fn paths_that_could_leave_the_workspace_are_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a\0b",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_path("src/app.py").is_ok());
        assert!(step(raw("rename = 'a'\nto = '../b'")).is_err());
    }
}
