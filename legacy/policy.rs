//! TEMPORARY STAND-IN (branch pipeexec): turns stages into a plan with no option checks.
//! Replaced wholesale by the real policy at merge.

use std::path::Path;

use super::plan::{CommandName, GuardReason, Plan, Refusal, Stage, Step};
use super::tools::ToolPaths;
use crate::guard::PathGuard;

/// What checking needs to know.
pub struct PolicyContext<'a> {
    /// The workspace guard.
    pub guard: &'a PathGuard,
    /// The directory relative paths start from (absolute, inside the root).
    pub cwd: &'a Path,
    /// Where each command lives.
    pub tools: &'a ToolPaths,
}

fn guarded(
    cx: &PolicyContext<'_>,
    word: &str,
    follow: bool,
) -> Result<std::path::PathBuf, Refusal> {
    let joined = cx.cwd.join(word);
    let text = joined.to_string_lossy();
    let r = if follow {
        cx.guard.resolve(&text)
    } else {
        cx.guard.resolve_no_follow(&text)
    };
    r.map(|r| r.path).map_err(|e| {
        Refusal::new(
            GuardReason::PathEscape,
            word,
            e.to_string(),
            "Stay inside the workspace.",
        )
    })
}

/// Checks nothing; builds the plan.
pub fn check(stages: &[Stage], cx: &PolicyContext<'_>) -> Result<Plan, Refusal> {
    let words = |s: &Stage| s.words.iter().map(|w| w.text.clone()).collect::<Vec<_>>();
    if stages.len() == 1 {
        let w = words(&stages[0]);
        match w[0].as_str() {
            "pwd" => return Ok(Plan::Pwd),
            "cd" => {
                let target = w.get(1).map(String::as_str).unwrap_or(".");
                return Ok(Plan::Cd(guarded(cx, target, true)?));
            }
            "ls" if w.len() <= 2 => {
                let target = w.get(1).map(String::as_str).unwrap_or(".");
                return Ok(Plan::BuiltinLs {
                    target: guarded(cx, target, true)?,
                    all: false,
                    long: false,
                });
            }
            _ => {}
        }
    }
    let mut steps = Vec::new();
    for stage in stages {
        let w = words(stage);
        let Some(command) = CommandName::parse(&w[0]) else {
            return Err(Refusal::new(
                GuardReason::DisallowedCmd,
                &w[0],
                format!("'{}' is not allowed.", w[0]),
                "Use one of the pipeline commands.",
            ));
        };
        if command == CommandName::Tee {
            let append = w.iter().any(|a| a == "-a");
            let mut targets = Vec::new();
            for t in w[1..].iter().filter(|a| *a != "-a") {
                targets.push(guarded(cx, t, false)?);
            }
            steps.push(Step::Tee { append, targets });
            continue;
        }
        let Some(path) = cx.tools.get(command) else {
            return Err(Refusal::new(
                GuardReason::MissingTool,
                &w[0],
                format!("'{}' is not installed.", w[0]),
                "Install it.",
            ));
        };
        let mut argv = vec![path.as_os_str().to_os_string()];
        argv.extend(w[1..].iter().map(Into::into));
        steps.push(Step::Run {
            command,
            argv,
            cwd: cx.cwd.to_path_buf(),
        });
    }
    Ok(Plan::Pipeline(steps))
}
