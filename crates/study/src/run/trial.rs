//! One trial: a fresh workspace, its configuration, the agent under its limit, the verifier.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use workspace::Dir;

use crate::record::{names, PlannedTrial, TrialPaths, TrialRecord, TRIALS_DIR, TRIAL_MARKER_VAR};
use crate::spec::{Arm, Placeholder, Study, Task, Template, Values};

use super::process::{self, Interrupted, Job, Place, Sink, LOG_CAP, REDIRECT_CAP};
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
    /// The output directory (absolute), for the paths handed to the agent.
    pub out: &'a Path,
    /// The output directory's descriptor: every file of a trial is made relative to it.
    pub handle: &'a Dir,
    /// The output directory's device and inode (see [`crate::record::trial_marker`]).
    pub identity: (u64, u64),
    /// The `filesystem` binary: the server of every arm, and where `study-stand-in` is found.
    pub filesystem: &'a Path,
}

/// The program of an argv: the names `filesystem` and `study-stand-in`, written exactly so,
/// are the binaries beside the running `filesystem`, so the example study runs from a build
/// tree without installing anything; every other name goes through PATH.
fn program(template: &Template, values: &Values<'_>, filesystem: &Path) -> OsString {
    let expanded = template.expand(values);
    special_program(Path::new(&expanded), filesystem).unwrap_or(expanded)
}

/// What a program written `filesystem` or `study-stand-in` stands for (see [`program`]);
/// `None` for any other.
pub fn special_program(name: &Path, filesystem: &Path) -> Option<OsString> {
    match name.to_str() {
        Some("filesystem") => Some(filesystem.as_os_str().to_owned()),
        Some(name @ "study-stand-in") => Some(
            filesystem
                .parent()
                .map(|d| d.join(name).into_os_string())
                .unwrap_or_else(|| name.into()),
        ),
        _ => None,
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
    let trials_path = ctx.out.join(TRIALS_DIR);
    ctx.handle
        .mkdir(OsStr::new(TRIALS_DIR))
        .map_err(setup(&trials_path))?;
    let trials = ctx
        .handle
        .subdir(OsStr::new(TRIALS_DIR))
        .map_err(setup(&trials_path))?;
    let id = OsStr::new(&trial.id);
    super::copy::remove_entry(&trials, id).map_err(setup(&paths.dir))?;
    trials.mkdir(id).map_err(setup(&paths.dir))?;
    let dir = Arc::new(trials.subdir(id).map_err(setup(&paths.dir))?);
    super::copy::copy_fixture(&task.fixture, &dir, OsStr::new(names::WORKSPACE)).map_err(|e| {
        TrialError::Setup(RunError::Trial {
            path: task.fixture.clone(),
            what: e.to_string(),
        })
    })?;
    write_new(&dir, names::PROMPT, &task.prompt_text).map_err(setup(&paths.prompt))?;
    let prompt = String::from_utf8_lossy(&task.prompt_text);
    dir.mkdir(OsStr::new(names::TRANSCRIPT_DIR))
        .map_err(setup(&paths.transcript_dir))?;
    let config = super::config::mcp_config(arm, ctx.filesystem, &paths.workspace, &paths.call_log)
        .map_err(|e| {
            TrialError::Setup(RunError::Trial {
                path: paths.mcp_config.clone(),
                what: e.to_string(),
            })
        })?;
    let config = serde_json::to_vec_pretty(&config).unwrap_or_default();
    write_new(&dir, names::MCP_CONFIG, &config).map_err(setup(&paths.mcp_config))?;
    let gemini_home = super::gemini_settings::gemini_home(&paths.dir);
    let gemini = study.agent.uses(Placeholder::GeminiHome);
    if gemini {
        write_gemini_settings(&dir, arm, ctx, &paths).map_err(|what| {
            TrialError::Setup(RunError::Trial {
                path: gemini_home.clone(),
                what,
            })
        })?;
    }
    let marker = (
        TRIAL_MARKER_VAR,
        crate::record::trial_marker(ctx.identity, &trial.id),
    );

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
        gemini_home: &gemini_home,
    };
    let agent = &study.agent;
    let stdout = match &agent.stdout {
        Some(t) => Sink {
            place: Place::Named(path_in(t, &values, &paths.workspace)),
            cap: REDIRECT_CAP,
            note_cut: false,
        },
        None => Sink {
            place: Place::Trial(dir.clone(), names::AGENT_OUT),
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
            .chain(
                (gemini && !agent.sets(super::gemini_settings::GEMINI_CLI_HOME)).then(|| {
                    (
                        super::gemini_settings::GEMINI_CLI_HOME.to_string(),
                        gemini_home.clone().into_os_string(),
                    )
                }),
            )
            .collect(),
        stdin: agent
            .stdin
            .as_ref()
            .map(|t| path_in(t, &values, &paths.workspace)),
        stdout,
        marker: marker.clone(),
        stderr: Some(Sink {
            place: Place::Trial(dir.clone(), names::AGENT_ERR),
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
        marker,
        stdout: Sink {
            place: Place::Trial(dir.clone(), names::VERIFY_OUT),
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

/// Writes Gemini CLI's `home/.gemini/settings.json` ([`Placeholder::GeminiHome`]) in the fresh trial directory `dir` (see
/// [`super::gemini_settings`]); the error says what failed.
fn write_gemini_settings(
    dir: &Dir,
    arm: &Arm,
    ctx: &Context<'_>,
    paths: &TrialPaths,
) -> Result<(), String> {
    use super::gemini_settings::{settings, GEMINI_DIR, HOME_DIR, SETTINGS_FILE};
    let settings = settings(arm, ctx.filesystem, &paths.workspace, &paths.call_log)
        .map_err(|e| e.to_string())?;
    let io = |e: std::io::Error| e.to_string();
    // The home may exist already when another harness's files were put there first.
    let home = OsStr::new(HOME_DIR);
    if dir.subdir(home).is_err() {
        dir.mkdir(home).map_err(io)?;
    }
    let home = dir.subdir(home).map_err(io)?;
    home.mkdir(OsStr::new(GEMINI_DIR)).map_err(io)?;
    let gemini = home.subdir(OsStr::new(GEMINI_DIR)).map_err(io)?;
    let bytes = serde_json::to_vec_pretty(&settings).unwrap_or_default();
    write_new(&gemini, SETTINGS_FILE, &bytes).map_err(io)
}

/// Creates `name` in the fresh trial directory `dir` with `bytes`.
fn write_new(dir: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    process::create_fresh(dir, OsStr::new(name))?.write_all(bytes)
}

/// The task and arm of a planned trial.
fn find<'s>(study: &'s Study, trial: &PlannedTrial) -> Option<(&'s Task, &'s Arm)> {
    let task = study.tasks.iter().find(|t| t.name == trial.task)?;
    let arm = study.arms.iter().find(|a| a.name == trial.arm)?;
    Some((task, arm))
}
