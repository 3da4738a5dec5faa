//! The output directory of a study run and the record each finished trial leaves in it.
//!
//! This module is the one place that names the files of a run: the runner writes them, the
//! report reads them, and neither spells a path of its own.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The copy of the study file a run was started with; `--resume` refuses a different one.
pub const STUDY_FILE: &str = "study.toml";
/// The ordered list of trials ([`PlannedTrial`]), written once when the run starts.
pub const PLAN_FILE: &str = "plan.json";
/// One [`TrialRecord`] per finished trial, one JSON object a line, appended as trials end.
pub const TRIALS_FILE: &str = "trials.jsonl";
/// The directory holding one subdirectory per trial.
pub const TRIALS_DIR: &str = "trials";
/// The environment variable set in every process of a trial (inherited by what it starts):
/// `<device>:<inode>:<trial id>` of the run directory, so `--resume` can find and kill what a
/// runner that died left running for a trial, and nothing else.
pub const TRIAL_MARKER_VAR: &str = "FILESYSTEM_STUDY_TRIAL";

/// The value of [`TRIAL_MARKER_VAR`] for trial `id` of the run directory with identity
/// `(dev, ino)`.
pub fn trial_marker(run_dir: (u64, u64), id: &str) -> String {
    format!("{}:{}:{id}", run_dir.0, run_dir.1)
}

/// The names of a trial's files in its directory (`trials/<id>/`), for the runner, which makes
/// them relative to that directory's descriptor.
pub mod names {
    /// The fresh copy of the task's fixture.
    pub const WORKSPACE: &str = "workspace";
    /// The MCP configuration.
    pub const MCP_CONFIG: &str = "mcp.json";
    /// The copy of the prompt.
    pub const PROMPT: &str = "prompt.md";
    /// The transcript directory.
    pub const TRANSCRIPT_DIR: &str = "transcript";
    /// The server's call log.
    pub const CALL_LOG: &str = "calls.jsonl";
    /// The agent's standard output.
    pub const AGENT_OUT: &str = "agent.out";
    /// The agent's standard error.
    pub const AGENT_ERR: &str = "agent.err";
    /// The verifier's output.
    pub const VERIFY_OUT: &str = "verify.out";
    /// The trial's own home directory, the agent's `HOME` (its harness's config and state).
    pub const HOME: &str = "home";
    /// What the model was offered, as read from the harness's records.
    pub const OFFERED: &str = "offered.json";
}

/// Where the pieces of one trial live, below the run's output directory.
///
/// Every trial has its own copy of the fixture, configuration, transcript directory and call
/// log, so nothing one trial does is seen by another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrialPaths {
    /// `trials/<id>/`: removed and made anew when a trial is (re)started.
    pub dir: PathBuf,
    /// The fresh copy of the task's fixture the agent works in.
    pub workspace: PathBuf,
    /// The MCP configuration (`mcpServers` JSON) given to the agent.
    pub mcp_config: PathBuf,
    /// The copy of the task's prompt.
    pub prompt: PathBuf,
    /// Where the agent writes its transcript(s) (`*.jsonl`).
    pub transcript_dir: PathBuf,
    /// The server's call log for this trial (absent when the arm has no server).
    pub call_log: PathBuf,
    /// The agent's standard output, unless the study redirects it.
    pub agent_out: PathBuf,
    /// The agent's standard error.
    pub agent_err: PathBuf,
    /// The verifier's standard output and error.
    pub verify_out: PathBuf,
    /// The trial's own empty home: `{home}`, the agent's `HOME` unless the study sets one.
    pub home: PathBuf,
    /// What the model was offered (`offered.json`), when the harness's records tell.
    pub offered: PathBuf,
}

impl TrialPaths {
    /// The paths of trial `id` in the run directory `out`.
    pub fn new(out: &Path, id: &str) -> Self {
        let dir = out.join(TRIALS_DIR).join(id);
        TrialPaths {
            workspace: dir.join(names::WORKSPACE),
            mcp_config: dir.join(names::MCP_CONFIG),
            prompt: dir.join(names::PROMPT),
            transcript_dir: dir.join(names::TRANSCRIPT_DIR),
            call_log: dir.join(names::CALL_LOG),
            agent_out: dir.join(names::AGENT_OUT),
            agent_err: dir.join(names::AGENT_ERR),
            verify_out: dir.join(names::VERIFY_OUT),
            home: dir.join(names::HOME),
            offered: dir.join(names::OFFERED),
            dir,
        }
    }
}

/// One entry of the plan: which task under which arm, which repetition, with which seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedTrial {
    /// `{rep:03}-{task}-{arm}` (`-{harness}` after it for a named harness): unique in a run,
    /// and the name of the trial's directory.
    pub id: String,
    /// The task's name in the study file.
    pub task: String,
    /// The arm's name in the study file.
    pub arm: String,
    /// The harness's name in the study file; empty for a study's single `[agent]` (and in
    /// plans written before studies had harnesses).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub harness: String,
    /// Which repetition of this task and arm (0-based).
    pub rep: u32,
    /// The trial's own seed, derived from the study's seed; given to the agent as `{seed}`.
    pub seed: u64,
}

impl PlannedTrial {
    /// The identifier of repetition `rep` of `task` under `arm` and `harness` (an unnamed
    /// harness adds nothing, so a study with one `[agent]` keeps the ids it always had).
    pub fn id_for(rep: u32, task: &str, arm: &str, harness: &str) -> String {
        if harness.is_empty() {
            format!("{rep:03}-{task}-{arm}")
        } else {
            format!("{rep:03}-{task}-{arm}-{harness}")
        }
    }
}

/// How a process of a trial (the agent or the verifier) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// It exited on its own with `code`.
    Exited,
    /// It was still running at its time limit: its whole process group was killed.
    KilledAtLimit,
    /// It died of a signal it was not sent by the runner (a crash).
    Signaled,
    /// It could not be started at all (`error` says why).
    FailedToStart,
}

/// What one process of a trial did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessEnd {
    /// How it ended.
    pub end: End,
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Wall-clock seconds from start to end.
    pub secs: f64,
    /// Why it could not be started, for [`End::FailedToStart`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The line a finished trial leaves in [`TRIALS_FILE`]: everything the report needs besides
/// the trial's transcript and call log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// The trial's identifier ([`PlannedTrial::id`]).
    pub id: String,
    /// The task's name.
    pub task: String,
    /// The arm's name.
    pub arm: String,
    /// The harness's name; empty for a study's single `[agent]`, and in records written
    /// before studies had harnesses.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub harness: String,
    /// What the model was offered, read from the harness's own records after the trial
    /// (absent when they do not tell, and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<report::offered::Offered>,
    /// Which repetition (0-based).
    pub rep: u32,
    /// The trial's seed.
    pub seed: u64,
    /// The trial's position in the plan (0-based).
    pub order: u32,
    /// When the trial started (RFC 3339, UTC).
    pub started: String,
    /// How the agent ended.
    pub agent: ProcessEnd,
    /// How the verifier ended.
    pub verify: ProcessEnd,
    /// True when the verifier exited 0: the task was done, however the agent ended.
    pub success: bool,
}
