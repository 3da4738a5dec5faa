//! `filesystem study run`: every trial of a study, in its seeded order, each in a fresh copy
//! of its task's fixture, each recorded as it ends so a run cut short can be resumed.
//!
//! One job per module: [`plan`] (order and seeds), [`copy`] (the fixture copy), [`config`]
//! (the MCP configuration), [`codex_config`] (Codex CLI's per-trial home), [`process`] (a process under a limit), [`trial`] (one trial),
//! [`resume`] (the output directory), [`progress`] (the stderr lines), [`signal`] (Ctrl-C);
//! this module drives them with `--jobs` threads.

pub mod codex_config;
pub mod config;
pub mod copy;
pub mod gemini_settings;
pub mod home;
pub mod offered;
pub mod orphans;
pub mod plan;
pub mod process;
pub mod progress;
pub mod relay;
pub mod resume;
pub mod signal;
pub mod trial;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use crate::record::TRIALS_FILE;
use crate::spec::{SpecError, Study};

/// The long help of `filesystem study run` (given where the subcommand is declared).
pub const RUN_LONG_ABOUT: &str = "\
Runs every trial of a study: each task under each arm, `trials` times, in an order fixed by the
study's seed and interleaved (every repetition runs all task/arm pairs shuffled), so drift in the
agent or the machine spreads over all arms.

Each trial gets its own copy of the task's fixture as workspace, its own MCP configuration
(mcp.json: this binary with the arm's arguments, --root on that workspace and --call-log in the
trial's directory), its own transcript directory and call log. The agent runs in the workspace in
a process group of its own; at the task's time limit the whole group is killed (the MCP server it
started too) and the trial is recorded as killed_at_limit. Then the task's verifier runs in the
workspace: exit 0 means the task was done.

Placeholders in the agent command, stdin, stdout, env values and the verifier: {workspace},
{mcp_config}, {prompt_file}, {prompt} (the text), {transcript_dir}, {task_dir}, {study_dir},
{task}, {arm}, {trial}, {seed}, {home}, {harness}, {relay_url}, {codex_home}, {codex_config},
{gemini_home}; {{ and }} are literal braces.
When a template names {codex_home} or {codex_config}, the runner writes the arm's server into
TRIAL/home/.codex/config.toml ([mcp_servers]) and sets CODEX_HOME to TRIAL/home/.codex; when it
names {gemini_home} (TRIAL/home), it writes Gemini CLI's .gemini/settings.json there, with the
arm's server, and sets GEMINI_CLI_HOME to it. A program named exactly
`filesystem` or `study-stand-in` is the binary beside this one.

Every finished trial appends one line to OUT/trials.jsonl. Ctrl-C kills the running agents and
keeps what was recorded; --resume then runs only the trials without a record.

Exit status: 0 when every trial was run and recorded (whatever their success), 1 on a study file
or output error, 2 on a usage error, 130 when interrupted.

Analyse the result with `filesystem study report OUT`.";

/// Arguments of `filesystem study run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The study file (TOML): tasks, arms, trials, seed and the agent command (see the README,
    /// "Running a study").
    #[arg(value_name = "STUDY.toml")]
    pub study: PathBuf,

    /// The output directory: created if missing; must be empty unless --resume.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Trials run at the same time (1 to 64).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,

    /// Continue the run in --out: keep the trials recorded there and run the others (the study
    /// file must be unchanged).
    #[arg(long)]
    pub resume: bool,

    /// Print nothing on stderr but errors.
    #[arg(long)]
    pub quiet: bool,
}

/// Why a run could not be done.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The study file is wrong.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The output directory cannot be used.
    #[error(transparent)]
    Output(#[from] resume::OutputError),
    /// A trial's directory could not be prepared.
    #[error("preparing a trial: {path}: {what}")]
    Trial {
        /// The path concerned.
        path: PathBuf,
        /// What went wrong.
        what: String,
    },
}

/// The server's own check of an arm's `args` (its argument parser): `Err` with its message.
pub type ServerArgsCheck<'a> = &'a dyn Fn(&[String]) -> Result<(), String>;

/// Runs `args`; `filesystem` is the running binary (the server the arms configure), whose
/// argument parser `check_server_args` is. Returns the exit status.
pub fn run(args: &RunArgs, filesystem: &Path, check_server_args: ServerArgsCheck<'_>) -> i32 {
    match drive(args, filesystem, check_server_args) {
        Ok(Ended::Complete) => 0,
        Ok(Ended::Interrupted) => 130,
        Err(e) => {
            eprintln!("filesystem study run: {e}");
            1
        }
    }
}

enum Ended {
    Complete,
    Interrupted,
}

fn drive(
    args: &RunArgs,
    filesystem: &Path,
    check_server_args: ServerArgsCheck<'_>,
) -> Result<Ended, RunError> {
    let study = Study::load(&args.study)?;
    study.check_runnable(filesystem, check_server_args)?;
    let plan = plan::plan(&study);
    let mut output = resume::Output::prepare(&args.out, &study, &plan, args.resume)?;
    let pending: Vec<(u32, &crate::record::PlannedTrial)> = plan
        .iter()
        .enumerate()
        .filter(|(_, t)| !output.recorded.contains(&t.id))
        .map(|(i, t)| (i as u32, t))
        .collect();
    let jobs = (args.jobs as usize).clamp(1, pending.len().max(1));
    let arms = study
        .arms
        .iter()
        .map(|a| {
            let total = study.tasks.len() * study.trials as usize;
            let done = plan
                .iter()
                .filter(|t| t.arm == a.name && output.recorded.contains(&t.id))
                .count();
            (a.name.clone(), done, total)
        })
        .collect();
    let mut progress = progress::Progress::new(plan.len(), arms, jobs);
    let say = |line: &str| {
        if !args.quiet {
            eprintln!("{line}");
        }
    };
    say(&format!(
        "study {:?}: {} trials ({} × {} × {}), {} to run, {}; output in {}",
        study.name,
        plan.len(),
        count(study.tasks.len(), "task"),
        count(study.arms.len(), "arm"),
        count(study.trials as usize, "trial"),
        pending.len(),
        count(jobs, "job"),
        output.dir.display()
    ));

    signal::install();
    let out_dir = output.dir.clone();
    let handle = output.handle.clone();
    let ctx = trial::Context {
        study: &study,
        out: &out_dir,
        handle: &handle,
        identity: output.identity,
        filesystem,
    };
    let next = AtomicUsize::new(0);
    let mut failure: Option<RunError> = None;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel();
        for _ in 0..jobs {
            let tx = tx.clone();
            let (ctx, next, pending) = (&ctx, &next, &pending);
            scope.spawn(move || loop {
                if signal::stopping() {
                    break;
                }
                let Some(&(order, planned)) = pending.get(next.fetch_add(1, Ordering::SeqCst))
                else {
                    break;
                };
                let began = Instant::now();
                let result = trial::run_trial(ctx, planned, order, &signal::STOP);
                if tx.send((result, began.elapsed())).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        // This thread alone writes records, so lines never interleave.
        for (result, took) in rx {
            match result {
                Ok(record) => match output.append(&record) {
                    Ok(()) => say(&progress.finished(&record, took)),
                    Err(e) => {
                        failure.get_or_insert(e.into());
                        signal::STOP.store(true, Ordering::SeqCst);
                    }
                },
                Err(trial::TrialError::Interrupted) => {}
                Err(trial::TrialError::Setup(e)) => {
                    failure.get_or_insert(e);
                    signal::STOP.store(true, Ordering::SeqCst);
                }
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let trials_file = output.dir.join(TRIALS_FILE);
    if progress.done() < plan.len() {
        eprintln!(
            "filesystem study run: interrupted; {} of {} trials are recorded in {}. Run again with --resume to continue.",
            progress.done(),
            plan.len(),
            trials_file.display()
        );
        return Ok(Ended::Interrupted);
    }
    say(&format!(
        "all {} trials recorded in {}; analyse them with `filesystem study report {}`",
        plan.len(),
        trials_file.display(),
        output.dir.display()
    ));
    Ok(Ended::Complete)
}

/// `1 task`, `2 tasks`.
fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}
