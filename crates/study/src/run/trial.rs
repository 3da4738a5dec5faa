//! One trial: a fresh workspace, its configuration, the agent under its limit, the verifier.

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::record::{PlannedTrial, TrialPaths, TrialRecord};
use crate::spec::{Arm, Study, Task, Template, Values, MAX_PROMPT_BYTES};

use super::process::{self, Interrupted, Job, Sink, LOG_CAP, REDIRECT_CAP};
use super::RunError;

/// How long the verifier may run.
pub const VERIFY_LIMIT: Duration = Duration::from_secs(60);

/// Why a trial left no record.
#[derive(Debug)]
pub enum TrialError {
    /// The run was stopped while it ran.
    Interrupted,
    /// Its directory could not be prepared: a problem of the machine or the study, not of the
    /// agent, so the run stops.
    Setup(RunError),
}

impl From<Interrupted> for TrialError {
    fn from(_: Interrupted) -> Self {
        TrialError::Interrupted
    }
}

/// What a trial needs from the run.
pub struct Context<'a> {
    /// The study.
    pub study: &'a Study,
    /// The output directory (absolute).
    pub out: &'a Path,
    /// The `filesystem` binary: the server of every arm, and where `study-stand-in` is found.
    pub filesystem: &'a Path,
}

/// The program of an argv: the names `filesystem` and `study-stand-in`, written exactly so,
/// are the binaries beside the running `filesystem`, so the example study runs from a build
/// tree without installing anything; every other name goes through PATH.
fn program(template: &Template, values: &Values<'_>, filesystem: &Path) -> OsString {
    match template.as_literal() {
        Some("filesystem") => filesystem.as_os_str().to_owned(),
        Some(name @ "study-stand-in") => filesystem
            .parent()
            .map(|d| d.join(name).into_os_string())
            .unwrap_or_else(|| name.into()),
        _ => template.expand(values),
    }
}

fn argv(templates: &[Template], values: &Values<'_>, filesystem: &Path) -> Vec<OsString> {
    let mut out = Vec::with_capacity(templates.len());
    if let Some((first, rest)) = templates.split_first() {
        out.push(program(first, values, filesystem));
        out.extend(rest.iter().map(|t| t.expand(values)));
    }
    out
}

/// A path from a template; a relative one is taken from the agent's working directory.
fn path_in(template: &Template, values: &Values<'_>, cwd: &Path) -> PathBuf {
    cwd.join(PathBuf::from(template.expand(values)))
}

fn setup(path: &Path) -> impl FnOnce(std::io::Error) -> TrialError + '_ {
    move |source| {
        TrialError::Setup(RunError::Trial {
            path: path.to_path_buf(),
            what: source.to_string(),
        })
    }
}

/// Runs `trial` (position `order` in the plan) and returns its record.
pub fn run_trial(
    ctx: &Context<'_>,
    trial: &PlannedTrial,
    order: u32,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<TrialRecord, TrialError> {
    let study = ctx.study;
    let (task, arm) = find(study, trial).ok_or_else(|| {
        TrialError::Setup(RunError::Trial {
            path: study.file.clone(),
            what: format!(
                "the plan names trial {} whose task or arm is not in the study",
                trial.id
            ),
        })
    })?;
    let paths = TrialPaths::new(ctx.out, &trial.id);
    super::copy::remove_tree(&paths.dir).map_err(setup(&paths.dir))?;
    fs::create_dir_all(&paths.dir).map_err(setup(&paths.dir))?;
    super::copy::copy_fixture(&task.fixture, &paths.workspace).map_err(|e| {
        TrialError::Setup(RunError::Trial {
            path: task.fixture.clone(),
            what: e.to_string(),
        })
    })?;
    let mut prompt = String::new();
    fs::File::open(&task.prompt)
        .and_then(|f| f.take(MAX_PROMPT_BYTES).read_to_string(&mut prompt))
        .map_err(setup(&task.prompt))?;
    fs::write(&paths.prompt, &prompt).map_err(setup(&paths.prompt))?;
    fs::create_dir(&paths.transcript_dir).map_err(setup(&paths.transcript_dir))?;
    let config = super::config::mcp_config(arm, ctx.filesystem, &paths.workspace, &paths.call_log)
        .map_err(|e| {
            TrialError::Setup(RunError::Trial {
                path: paths.mcp_config.clone(),
                what: e.to_string(),
            })
        })?;
    let config = serde_json::to_vec_pretty(&config).unwrap_or_default();
    fs::write(&paths.mcp_config, config).map_err(setup(&paths.mcp_config))?;

    let values = Values {
        workspace: &paths.workspace,
        mcp_config: &paths.mcp_config,
        prompt_file: &paths.prompt,
        prompt: &prompt,
        transcript_dir: &paths.transcript_dir,
        task_dir: &task.dir,
        study_dir: &study.dir,
        task: &task.name,
        arm: &arm.name,
        trial: &trial.id,
        seed: trial.seed,
    };
    let agent = &study.agent;
    let stdout = match &agent.stdout {
        Some(t) => Sink {
            path: path_in(t, &values, &paths.workspace),
            cap: REDIRECT_CAP,
            note_cut: false,
        },
        None => Sink {
            path: paths.agent_out.clone(),
            cap: LOG_CAP,
            note_cut: true,
        },
    };
    let job = Job {
        argv: argv(&agent.command, &values, ctx.filesystem),
        cwd: paths.workspace.clone(),
        env: agent
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.expand(&values)))
            .collect(),
        stdin: agent
            .stdin
            .as_ref()
            .map(|t| path_in(t, &values, &paths.workspace)),
        stdout,
        stderr: Some(Sink {
            path: paths.agent_err.clone(),
            cap: LOG_CAP,
            note_cut: true,
        }),
        limit: Duration::from_secs(task.time_limit),
    };
    let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let agent_end = process::run(&job, stop)?;

    let verify = Job {
        argv: argv(&task.verify, &values, ctx.filesystem),
        cwd: paths.workspace.clone(),
        env: Vec::new(),
        stdin: None,
        stdout: Sink {
            path: paths.verify_out.clone(),
            cap: LOG_CAP,
            note_cut: true,
        },
        stderr: None,
        limit: VERIFY_LIMIT,
    };
    let verify_end = process::run(&verify, stop)?;
    let success = verify_end.end == crate::record::End::Exited && verify_end.code == Some(0);
    Ok(TrialRecord {
        id: trial.id.clone(),
        task: trial.task.clone(),
        arm: trial.arm.clone(),
        rep: trial.rep,
        seed: trial.seed,
        order,
        started,
        agent: agent_end,
        verify: verify_end,
        success,
    })
}

/// The task and arm of a planned trial.
fn find<'s>(study: &'s Study, trial: &PlannedTrial) -> Option<(&'s Task, &'s Arm)> {
    let task = study.tasks.iter().find(|t| t.name == trial.task)?;
    let arm = study.arms.iter().find(|a| a.name == trial.arm)?;
    Some((task, arm))
}
