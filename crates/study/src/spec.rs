//! The study file: what to run (tasks, arms, trials, the agent), read and checked once, before
//! anything is started, so a mistake is found in seconds instead of halfway through a night.
//!
//! Paths in the file are relative to its directory. Every string the runner hands to a process
//! is a [`Template`] whose `{placeholders}` were checked at load; an unknown one is an error here,
//! never a literal `{typo}` reaching the agent.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Largest study file read (it is a few dozen lines in practice).
pub const MAX_STUDY_FILE_BYTES: u64 = 1024 * 1024;
/// Most tasks in one study.
pub const MAX_TASKS: usize = 100;
/// Most arms in one study.
pub const MAX_ARMS: usize = 20;
/// Most harnesses in one study.
pub const MAX_HARNESSES: usize = 10;
/// Most trials per task and arm.
pub const MAX_TRIALS: u32 = 1000;
/// Most trials in one study (tasks × arms × trials).
pub const MAX_TOTAL_TRIALS: u64 = 100_000;
/// Longest argument, template or value in the file, in bytes.
pub const MAX_ARG_BYTES: usize = 4096;
/// Most elements of one argv (agent command, verifier, arm args) and most `env` entries.
pub const MAX_ARGS: usize = 256;
/// Largest prompt file.
pub const MAX_PROMPT_BYTES: u64 = 1024 * 1024;
/// Longest single argument or environment string (`NAME=value`) Linux passes to a program,
/// without its terminating NUL: `MAX_ARG_STRLEN` (32 pages of 4 KiB) less one.
pub const MAX_ARG_STRLEN: usize = 128 * 1024 - 1;
/// What a path placeholder (`{workspace}`, `{prompt_file}`…) is counted as when the length of
/// an argument is checked at load, before the paths are known: `PATH_MAX`.
const PATH_BOUND: usize = 4096;
/// Longest time limit of a task, in seconds (one day).
pub const MAX_TIME_LIMIT: u64 = 86_400;

/// Why a study file cannot be run. Each message names the file or key and what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read the study file {path}: {source}")]
    Read {
        /// The study file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_STUDY_FILE_BYTES`].
    #[error("the study file {path} is larger than {MAX_STUDY_FILE_BYTES} bytes; a study file names tasks and arms, their content lives in the task directories")]
    TooLarge {
        /// The study file.
        path: PathBuf,
    },
    /// The TOML is malformed or has an unknown or mistyped key.
    #[error("{path}: {message}(see the README's \"Running a study\" for the keys a study file may hold)")]
    Toml {
        /// The study file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value is out of bounds or inconsistent with another.
    #[error("{path}: {what}")]
    Invalid {
        /// The study file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        what: String,
    },
}

/// The study file as written: the serde shape, checked by [`Study::load`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStudy {
    study: RawHeader,
    agent: Option<RawAgent>,
    #[serde(default)]
    harness: Vec<RawHarness>,
    #[serde(default)]
    task: Vec<RawTask>,
    #[serde(default)]
    arm: Vec<RawArm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeader {
    name: String,
    seed: u64,
    trials: u32,
    baseline: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    command: Vec<String>,
    stdin: Option<String>,
    stdout: Option<String>,
    relay: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// A `[[harness]]` table: an `[agent]` with a name, one of several a study compares.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHarness {
    name: String,
    command: Vec<String>,
    stdin: Option<String>,
    stdout: Option<String>,
    relay: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    name: String,
    dir: PathBuf,
    fixture: PathBuf,
    prompt: PathBuf,
    verify: Vec<String>,
    time_limit: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArm {
    name: String,
    args: Option<Vec<String>>,
    server: Option<bool>,
    server_name: Option<String>,
}

/// A checked study, with every path made absolute.
#[derive(Debug, Clone)]
pub struct Study {
    /// The study file (absolute).
    pub file: PathBuf,
    /// Its directory (absolute, symlinks resolved): `{study_dir}`, and the base of relative paths.
    pub dir: PathBuf,
    /// The study file's bytes as read: copied to the output so `--resume` can tell a change.
    pub source: Vec<u8>,
    /// Free text naming the study.
    pub name: String,
    /// Fixes the trial order and every trial's seed.
    pub seed: u64,
    /// Trials per task and arm.
    pub trials: u32,
    /// The arm the report compares the others with.
    pub baseline: String,
    /// The harnesses every task and arm is run under, in file order: one unnamed harness for a
    /// study with a single `[agent]`, else its `[[harness]]` tables.
    pub harnesses: Vec<Harness>,
    /// The tasks, in file order (their index feeds the trial seeds).
    pub tasks: Vec<Task>,
    /// The arms, in file order.
    pub arms: Vec<Arm>,
}

/// How the agent of every trial is started.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The argv; the first element names the program.
    pub command: Vec<Template>,
    /// A file fed to its stdin (default: nothing, /dev/null).
    pub stdin: Option<Template>,
    /// Where its stdout goes instead of the trial's `agent.out`.
    pub stdout: Option<Template>,
    /// Extra environment, on top of the runner's own.
    pub env: Vec<(String, Template)>,
    /// The model endpoint a recording relay forwards to (`http://…`, or `$VAR` for the URL in
    /// the runner's environment variable VAR), when the study records what the model was
    /// offered on the wire; the agent is pointed at the relay through `{relay_url}`.
    pub relay: Option<String>,
}

/// One harness: the agent program a trial is run with, a dimension of the study beside the arms
/// (whether a model adopts an interface depends on how its harness presents it).
#[derive(Debug, Clone)]
pub struct Harness {
    /// `[a-z0-9-]{1,40}`, unique in the study; empty for the single `[agent]` of a study
    /// without `[[harness]]` tables (its trial ids and records stay as they were).
    pub name: String,
    /// How it is started.
    pub agent: Agent,
}

impl Agent {
    /// True when any of the agent's templates (argv, stdin, stdout, environment) uses
    /// `placeholder`: what decides whether the runner prepares a harness's own files.
    pub fn uses(&self, placeholder: Placeholder) -> bool {
        self.command
            .iter()
            .chain(self.stdin.iter())
            .chain(self.stdout.iter())
            .chain(self.env.iter().map(|(_, t)| t))
            .any(|t| t.uses(placeholder))
    }

    /// True when the agent's environment sets `name` itself.
    pub fn sets(&self, name: &str) -> bool {
        self.env.iter().any(|(k, _)| k == name)
    }
}

/// One task: a fixture copied fresh for every trial, a prompt and a verifier.
#[derive(Debug, Clone)]
pub struct Task {
    /// `[a-z0-9-]{1,40}`, unique in the study.
    pub name: String,
    /// The task directory (absolute): `{task_dir}`.
    pub dir: PathBuf,
    /// The directory copied as each trial's workspace (absolute).
    pub fixture: PathBuf,
    /// The prompt file (absolute).
    pub prompt: PathBuf,
    /// The prompt's bytes, read once at load: every trial gets this copy (`prompt.md`,
    /// `{prompt}`), so a prompt changed during a run cannot make trials differ.
    pub prompt_text: Vec<u8>,
    /// The verifier's argv, run in the trial's workspace; exit 0 means the task was done.
    pub verify: Vec<Template>,
    /// Seconds the agent may run.
    pub time_limit: u64,
}

/// One arm: the server configuration an agent is given.
#[derive(Debug, Clone)]
pub struct Arm {
    /// `[a-z0-9-]{1,40}`, unique in the study.
    pub name: String,
    /// The server's arguments (without `--root`/`--call-log`, which the runner adds), or `None`
    /// for an arm without a server.
    pub server_args: Option<Vec<String>>,
    /// The key in `mcpServers`: the agent sees tools as `mcp__<server_name>__<tool>`.
    pub server_name: String,
}

/// A placeholder a template may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// `{workspace}`: the trial's workspace.
    Workspace,
    /// `{mcp_config}`: the MCP configuration file.
    McpConfig,
    /// `{prompt_file}`: the trial's copy of the prompt.
    PromptFile,
    /// `{prompt}`: the prompt text itself.
    Prompt,
    /// `{transcript_dir}`: where the agent writes its transcript.
    TranscriptDir,
    /// `{task_dir}`: the task directory.
    TaskDir,
    /// `{study_dir}`: the study file's directory.
    StudyDir,
    /// `{task}`: the task's name.
    Task,
    /// `{arm}`: the arm's name.
    Arm,
    /// `{trial}`: the trial's id.
    Trial,
    /// `{seed}`: the trial's seed.
    Seed,
    // Codex CLI: the trial's `CODEX_HOME` and the `config.toml` the runner writes in it.
    /// `{codex_home}`: `TRIAL_DIR/home/.codex`, Codex's home for the trial (the runner sets
    /// `CODEX_HOME` to it when a template names it or `{codex_config}`).
    CodexHome,
    /// `{codex_config}`: `{codex_home}/config.toml`, with the arm's `[mcp_servers]`.
    CodexConfig,
    /// `{relay_url}`: the recording relay's URL, with the upstream's path (needs `relay`).
    RelayUrl,
    // The per-trial home and the harness dimension.
    /// `{home}`: the trial's own empty home directory (the agent's `HOME` unless `env` sets it).
    Home,
    /// `{harness}`: the harness's name (empty for a study's single `[agent]`).
    Harness,
    // Gemini CLI's placeholders.
    /// `{gemini_home}`: the home the trial's Gemini CLI is given (`TRIAL_DIR/home`, its
    /// `GEMINI_CLI_HOME`); using it makes the runner write `.gemini/settings.json` there and set
    /// `GEMINI_CLI_HOME` to it unless the agent's env sets it (see
    /// [`crate::run::gemini_settings`]).
    GeminiHome,
}

impl Placeholder {
    const ALL: [(&'static str, Placeholder); 17] = [
        ("workspace", Placeholder::Workspace),
        ("mcp_config", Placeholder::McpConfig),
        ("prompt_file", Placeholder::PromptFile),
        ("prompt", Placeholder::Prompt),
        ("transcript_dir", Placeholder::TranscriptDir),
        ("task_dir", Placeholder::TaskDir),
        ("study_dir", Placeholder::StudyDir),
        ("task", Placeholder::Task),
        ("arm", Placeholder::Arm),
        ("trial", Placeholder::Trial),
        ("seed", Placeholder::Seed),
        // Codex CLI.
        ("codex_home", Placeholder::CodexHome),
        ("codex_config", Placeholder::CodexConfig),
        ("relay_url", Placeholder::RelayUrl),
        ("home", Placeholder::Home),
        ("harness", Placeholder::Harness),
        // Gemini CLI's placeholders.
        ("gemini_home", Placeholder::GeminiHome),
    ];
}

/// A piece of a template: text as written, or a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Var(Placeholder),
}

/// A string with `{placeholders}`, parsed once at load so a typo is an error before any trial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

/// The values a trial gives the placeholders.
#[derive(Debug, Clone)]
pub struct Values<'a> {
    /// `{workspace}`.
    pub workspace: &'a Path,
    /// `{mcp_config}`.
    pub mcp_config: &'a Path,
    /// `{prompt_file}`.
    pub prompt_file: &'a Path,
    /// `{prompt}`.
    pub prompt: &'a str,
    /// `{transcript_dir}`.
    pub transcript_dir: &'a Path,
    /// `{task_dir}`.
    pub task_dir: &'a Path,
    /// `{study_dir}`.
    pub study_dir: &'a Path,
    /// `{task}`.
    pub task: &'a str,
    /// `{arm}`.
    pub arm: &'a str,
    /// `{trial}`.
    pub trial: &'a str,
    /// `{seed}`.
    pub seed: u64,
    /// `{codex_home}`.
    pub codex_home: &'a Path,
    /// `{codex_config}`.
    pub codex_config: &'a Path,
    /// `{home}`.
    pub home: &'a Path,
    /// `{harness}`.
    pub harness: &'a str,
    /// `{relay_url}` (empty without a relay).
    pub relay_url: &'a str,
    /// `{gemini_home}`.
    pub gemini_home: &'a Path,
}

impl Template {
    /// Parses `text`: `{name}` is a placeholder, `{{` and `}}` are literal braces; anything else
    /// in braces, or a lone brace, is an error naming the placeholders there are.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(i) = rest.find(['{', '}']) {
            literal.push_str(&rest[..i]);
            let tail = &rest[i..];
            if let Some(after) = tail.strip_prefix("{{") {
                literal.push('{');
                rest = after;
            } else if let Some(after) = tail.strip_prefix("}}") {
                literal.push('}');
                rest = after;
            } else if tail.starts_with('}') {
                return Err(format!(
                    "a lone '}}' in {text:?}; write '}}}}' for a literal brace"
                ));
            } else {
                let Some(end) = tail.find('}') else {
                    return Err(format!(
                        "an unclosed '{{' in {text:?}; write '{{{{' for a literal brace"
                    ));
                };
                let name = &tail[1..end];
                let Some(&(_, var)) = Placeholder::ALL.iter().find(|(n, _)| *n == name) else {
                    let known: Vec<String> = Placeholder::ALL
                        .iter()
                        .map(|(n, _)| format!("{{{n}}}"))
                        .collect();
                    return Err(format!(
                        "unknown placeholder {{{name}}} in {text:?}; the placeholders are {} (write '{{{{' and '}}}}' for literal braces)",
                        known.join(", ")
                    ));
                };
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Var(var));
                rest = &tail[end + 1..];
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Template { pieces })
    }

    /// True when the template uses `placeholder`.
    pub fn uses(&self, placeholder: Placeholder) -> bool {
        self.pieces.contains(&Piece::Var(placeholder))
    }

    /// The longest the template can expand to with a prompt of `prompt_len` bytes, counting
    /// each path as [`PATH_BOUND`] and names as their own bounds.
    pub fn bound(&self, prompt_len: usize) -> usize {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Text(t) => t.len(),
                Piece::Var(Placeholder::Prompt) => prompt_len,
                Piece::Var(Placeholder::Task | Placeholder::Arm | Placeholder::Harness) => 40,
                // `{rep:03}-{task}-{arm}-{harness}`, a repetition below 1000.
                Piece::Var(Placeholder::Trial) => 3 + 1 + 40 + 1 + 40 + 1 + 40,
                Piece::Var(Placeholder::Seed) => 20,
                Piece::Var(_) => PATH_BOUND,
            })
            .sum()
    }

    /// The literal text, when the template has no placeholder.
    pub fn as_literal(&self) -> Option<&str> {
        match self.pieces.as_slice() {
            [] => Some(""),
            [Piece::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// The template with `values` filled in. Paths stay as the system gave them (not
    /// necessarily UTF-8), hence an `OsString`.
    pub fn expand(&self, values: &Values<'_>) -> OsString {
        let mut out = OsString::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push(t),
                Piece::Var(var) => match var {
                    Placeholder::Workspace => out.push(values.workspace),
                    Placeholder::McpConfig => out.push(values.mcp_config),
                    Placeholder::PromptFile => out.push(values.prompt_file),
                    Placeholder::Prompt => out.push(values.prompt),
                    Placeholder::TranscriptDir => out.push(values.transcript_dir),
                    Placeholder::TaskDir => out.push(values.task_dir),
                    Placeholder::StudyDir => out.push(values.study_dir),
                    Placeholder::Task => out.push(values.task),
                    Placeholder::Arm => out.push(values.arm),
                    Placeholder::Trial => out.push(values.trial),
                    Placeholder::Seed => out.push(values.seed.to_string()),
                    Placeholder::CodexHome => out.push(values.codex_home),
                    Placeholder::CodexConfig => out.push(values.codex_config),
                    Placeholder::Home => out.push(values.home),
                    Placeholder::Harness => out.push(values.harness),
                    Placeholder::RelayUrl => out.push(values.relay_url),
                    Placeholder::GeminiHome => out.push(values.gemini_home),
                },
            }
        }
        out
    }
}

impl Study {
    /// Reads and checks the study file at `path`: the TOML, every bound, every name, every
    /// placeholder, and that each task's directory, fixture and prompt exist.
    pub fn load(path: &Path) -> Result<Study, SpecError> {
        let read_err = |source| SpecError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = crate::named::canonical(path).map_err(read_err)?;
        let source = crate::named::read_regular(&file, MAX_STUDY_FILE_BYTES).map_err(read_err)?;
        if source.len() as u64 > MAX_STUDY_FILE_BYTES {
            return Err(SpecError::TooLarge { path: file });
        }
        let dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        Study::from_source(&file, &dir, source)
    }

    /// Checks the study in `source`, as if read from `file` in `dir`.
    fn from_source(file: &Path, dir: &Path, source: Vec<u8>) -> Result<Study, SpecError> {
        let invalid = |what: String| SpecError::Invalid {
            path: file.to_path_buf(),
            what,
        };
        let text = std::str::from_utf8(&source)
            .map_err(|_| invalid("the study file is not UTF-8 text; TOML must be".into()))?;
        let raw: RawStudy = toml::from_str(text).map_err(|e| SpecError::Toml {
            path: file.to_path_buf(),
            message: e.to_string(),
        })?;

        let header = raw.study;
        if header.name.len() > MAX_ARG_BYTES {
            return Err(invalid(format!(
                "study.name is longer than {MAX_ARG_BYTES} bytes"
            )));
        }
        if !(1..=MAX_TRIALS).contains(&header.trials) {
            return Err(invalid(format!(
                "study.trials = {} is out of range; give 1 to {MAX_TRIALS} trials per task and arm",
                header.trials
            )));
        }

        let harnesses = check_harnesses(raw.agent, raw.harness).map_err(invalid)?;

        if raw.task.is_empty() || raw.task.len() > MAX_TASKS {
            return Err(invalid(format!(
                "the study has {} tasks; give 1 to {MAX_TASKS} [[task]] tables",
                raw.task.len()
            )));
        }
        if raw.arm.is_empty() || raw.arm.len() > MAX_ARMS {
            return Err(invalid(format!(
                "the study has {} arms; give 1 to {MAX_ARMS} [[arm]] tables",
                raw.arm.len()
            )));
        }
        let mut tasks = Vec::with_capacity(raw.task.len());
        let mut names = HashSet::new();
        for t in raw.task {
            let task = check_task(t, dir).map_err(invalid)?;
            for harness in &harnesses {
                check_prompt_use(&harness.agent, &task).map_err(invalid)?;
            }
            if !names.insert(task.name.clone()) {
                return Err(invalid(format!(
                    "two tasks are named {:?}; give each [[task]] its own name",
                    task.name
                )));
            }
            tasks.push(task);
        }
        let mut arms = Vec::with_capacity(raw.arm.len());
        let mut names = HashSet::new();
        for a in raw.arm {
            let arm = check_arm(a).map_err(invalid)?;
            if !names.insert(arm.name.clone()) {
                return Err(invalid(format!(
                    "two arms are named {:?}; give each [[arm]] its own name",
                    arm.name
                )));
            }
            arms.push(arm);
        }
        if !arms.iter().any(|a| a.name == header.baseline) {
            let known: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
            return Err(invalid(format!(
                "study.baseline = {:?} names no arm; use one of: {}",
                header.baseline,
                known.join(", ")
            )));
        }
        let total = tasks.len() as u64
            * arms.len() as u64
            * harnesses.len() as u64
            * u64::from(header.trials);
        if total > MAX_TOTAL_TRIALS {
            return Err(invalid(format!(
                "{} tasks × {} arms × {} harnesses × {} trials = {total} trials, more than {MAX_TOTAL_TRIALS}; run fewer trials or split the study",
                tasks.len(),
                arms.len(),
                harnesses.len(),
                header.trials
            )));
        }
        // Trial ids join task, arm and harness with '-', which the names may contain: "a-b" × "c"
        // and "a" × "b-c" would share a directory.
        let mut ids: std::collections::HashMap<String, (&str, &str, &str)> = Default::default();
        for task in &tasks {
            for arm in &arms {
                for harness in &harnesses {
                    let id = crate::record::PlannedTrial::id_for(
                        0,
                        &task.name,
                        &arm.name,
                        &harness.name,
                    );
                    let this = (task.name.as_str(), arm.name.as_str(), harness.name.as_str());
                    if let Some((t, a, h)) = ids.insert(id.clone(), this) {
                        return Err(invalid(format!(
                            "task {t:?} under arm {a:?} (harness {h:?}) and task {:?} under arm {:?} (harness {:?}) give the same trial id ({id}); rename a task, an arm or a harness",
                            task.name, arm.name, harness.name
                        )));
                    }
                }
            }
        }

        Ok(Study {
            file: file.to_path_buf(),
            dir: dir.to_path_buf(),
            source,
            name: header.name,
            seed: header.seed,
            trials: header.trials,
            baseline: header.baseline,
            harnesses,
            tasks,
            arms,
        })
    }

    /// The number of trials the study runs.
    pub fn total_trials(&self) -> usize {
        self.tasks.len() * self.arms.len() * self.harnesses.len() * self.trials as usize
    }

    /// Checks what the study starts, before anything is created, so a study that could only
    /// fail every trial is refused instead: the agent's and each verifier's program can be found
    /// (`filesystem` is the running binary, beside which `study-stand-in` is looked for), and
    /// `check_server_args` (the server's own argument parser) accepts each arm's `args`, so a
    /// typo is not run as an arm without its server.
    pub fn check_runnable(
        &self,
        filesystem: &Path,
        check_server_args: &dyn Fn(&[String]) -> Result<(), String>,
    ) -> Result<(), SpecError> {
        let invalid = |what: String| SpecError::Invalid {
            path: self.file.clone(),
            what,
        };
        for arm in &self.arms {
            if let Some(args) = &arm.server_args {
                check_server_args(args).map_err(|e| {
                    invalid(format!(
                        "arm {:?}: the server refuses its args {args:?}: {}; fix the arm's args (`filesystem --help` lists the server's flags)",
                        arm.name,
                        e.trim_end()
                    ))
                })?;
            }
        }
        for harness in &self.harnesses {
            let Some(var) = harness
                .agent
                .relay
                .as_deref()
                .and_then(|r| r.strip_prefix('$'))
            else {
                continue;
            };
            let url = std::env::var(var).map_err(|_| {
                invalid(format!(
                    "the relay of harness {:?} forwards to ${var}, which is not set; set it to the model endpoint's URL (http://HOST:PORT/PATH)",
                    harness.name
                ))
            })?;
            crate::run::relay::Upstream::parse(&url)
                .map_err(|e| invalid(format!("harness {:?}: ${var}: {e}", harness.name)))?;
        }
        for task in &self.tasks {
            for harness in &self.harnesses {
                let agent = &harness.agent;
                let (Some(program), Some(verify)) = (agent.command.first(), task.verify.first())
                else {
                    continue;
                };
                let key = if harness.name.is_empty() {
                    "agent.command".to_string()
                } else {
                    format!("harness {:?}'s command", harness.name)
                };
                for (key, program) in [(key.as_str(), program), ("verify", verify)] {
                    if let Err(why) = find_program(program, &agent.env, task, self, filesystem) {
                        return Err(invalid(format!(
                            "task {:?}: {key} starts a program that cannot be found: {why}; install it, or give its full path",
                            task.name
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Looks for the program a trial will start (the first element of an argv), the way the runner
/// and `exec` will: the names `filesystem` and `study-stand-in` beside the running binary, a
/// bare name on the `PATH` the process gets (the agent's `env` may set it), a path with a slash
/// relative to the trial's workspace (a copy of the fixture). A program whose name holds a
/// placeholder other than `{study_dir}` and `{task_dir}` is known only per trial and left to it.
fn find_program(
    program: &Template,
    env: &[(String, Template)],
    task: &Task,
    study: &Study,
    filesystem: &Path,
) -> Result<(), String> {
    let fixed = [Placeholder::StudyDir, Placeholder::TaskDir];
    if program
        .pieces
        .iter()
        .any(|p| matches!(p, Piece::Var(v) if !fixed.contains(v)))
    {
        return Ok(());
    }
    let none = Path::new("");
    let values = Values {
        workspace: none,
        mcp_config: none,
        prompt_file: none,
        prompt: "",
        transcript_dir: none,
        task_dir: &task.dir,
        study_dir: &study.dir,
        task: &task.name,
        arm: "",
        trial: "",
        seed: 0,
        codex_home: none,
        codex_config: none,
        home: none,
        harness: "",
        relay_url: "",
        gemini_home: none,
    };
    let name = PathBuf::from(program.expand(&values));
    if let Some(beside) = crate::run::trial::special_program(&name, filesystem) {
        let beside = PathBuf::from(beside);
        return if crate::named::is_executable(&beside) {
            Ok(())
        } else {
            Err(format!(
                "{} is the binary beside this one, {}, which is not there (build it: cargo build --bins)",
                name.display(),
                beside.display()
            ))
        };
    }
    if name.as_os_str().is_empty() {
        return Err("is empty".into());
    }
    if name.components().count() > 1 || name.is_absolute() {
        let full = task.fixture.join(&name);
        return if crate::named::is_executable(&full) {
            Ok(())
        } else {
            Err(format!(
                "{} is not an executable file (a relative path is taken from the trial's workspace, a copy of {})",
                full.display(),
                task.fixture.display()
            ))
        };
    }
    let path_var: OsString = match env.iter().find(|(k, _)| k == "PATH") {
        Some((_, t)) => match t.as_literal() {
            Some(p) => p.into(),
            None => return Ok(()),
        },
        None => std::env::var_os("PATH").unwrap_or_default(),
    };
    if std::env::split_paths(&path_var).any(|d| crate::named::is_executable(&d.join(&name))) {
        Ok(())
    } else {
        Err(format!(
            "{} is not found on the PATH ({})",
            name.display(),
            path_var.to_string_lossy()
        ))
    }
}

/// What a run's copy of its study file (`DIR/study.toml`) says about its arms and tasks,
/// read without looking for the task directories (they lie beside the original, not the
/// copy): what an analysis of the run needs, e.g. each arm's `server_name` and the baseline.
#[derive(Debug, Clone)]
pub struct Outline {
    /// The study's name.
    pub name: String,
    /// Its seed.
    pub seed: u64,
    /// Trials per task and arm.
    pub trials: u32,
    /// The baseline arm.
    pub baseline: String,
    /// The task names, in file order.
    pub tasks: Vec<String>,
    /// The arms, in file order.
    pub arms: Vec<Arm>,
    /// The harnesses' names, in file order (one empty name for a study's single `[agent]`).
    pub harnesses: Vec<String>,
}

impl Outline {
    /// Reads the outline of the study file at `path` (the keys are checked as strictly as by
    /// [`Study::load`]; the files the tasks name are not looked at).
    pub fn load(path: &Path) -> Result<Outline, SpecError> {
        let read_err = |source| SpecError::Read {
            path: path.to_path_buf(),
            source,
        };
        let bytes = crate::named::read_regular(path, MAX_STUDY_FILE_BYTES).map_err(read_err)?;
        Outline::from_bytes(path, &bytes)
    }

    /// The outline of a study file's `bytes`, read from `path` (for messages).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Outline, SpecError> {
        if bytes.len() as u64 > MAX_STUDY_FILE_BYTES {
            return Err(SpecError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|_| SpecError::Invalid {
            path: path.to_path_buf(),
            what: "the study file is not UTF-8 text; TOML must be".into(),
        })?;
        let raw: RawStudy = toml::from_str(text).map_err(|e| SpecError::Toml {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let arms = raw
            .arm
            .into_iter()
            .map(check_arm)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|what| SpecError::Invalid {
                path: path.to_path_buf(),
                what,
            })?;
        let harnesses = if raw.harness.is_empty() {
            vec![String::new()]
        } else {
            raw.harness.into_iter().map(|h| h.name).collect()
        };
        Ok(Outline {
            harnesses,
            name: raw.study.name,
            seed: raw.study.seed,
            trials: raw.study.trials,
            baseline: raw.study.baseline,
            tasks: raw.task.into_iter().map(|t| t.name).collect(),
            arms,
        })
    }
}

/// Checks a name of a task or arm: it becomes part of directory names and tool names.
fn check_name(kind: &str, name: &str) -> Result<(), String> {
    let ok = (1..=40).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{kind} name {name:?} is not 1 to 40 of a-z, 0-9 and '-'; rename it (names become directory names)"
        ))
    }
}

/// Parses one argv of templates, with its bounds.
fn templates(key: &str, argv: &[String]) -> Result<Vec<Template>, String> {
    if argv.is_empty() {
        return Err(format!(
            "{key} is empty; give the program and its arguments, e.g. [\"sh\", \"verify.sh\"]"
        ));
    }
    if argv.len() > MAX_ARGS {
        return Err(format!("{key} has more than {MAX_ARGS} elements"));
    }
    argv.iter()
        .map(|a| template(key, a))
        .collect::<Result<Vec<_>, _>>()
}

/// Parses one template, with its bound.
fn template(key: &str, text: &str) -> Result<Template, String> {
    if text.len() > MAX_ARG_BYTES {
        return Err(format!(
            "an element of {key} is longer than {MAX_ARG_BYTES} bytes; put long text in a file"
        ));
    }
    if text.contains('\0') {
        return Err(format!("an element of {key} holds a NUL byte"));
    }
    Template::parse(text).map_err(|e| format!("{key}: {e}"))
}

/// The study's harnesses: its single `[agent]` as one unnamed harness, or its `[[harness]]`
/// tables (not both: which agent a trial ran would be ambiguous).
fn check_harnesses(agent: Option<RawAgent>, raw: Vec<RawHarness>) -> Result<Vec<Harness>, String> {
    match (agent, raw.is_empty()) {
        (Some(agent), true) => Ok(vec![Harness {
            name: String::new(),
            agent: check_agent(agent)?,
        }]),
        (Some(_), false) => Err(
            "the study has both [agent] and [[harness]] tables; give one [agent], or name each agent in its own [[harness]]".into(),
        ),
        (None, true) => Err(
            "the study has no agent; give an [agent] table, or [[harness]] tables with a name each".into(),
        ),
        (None, false) => {
            if raw.len() > MAX_HARNESSES {
                return Err(format!(
                    "the study has {} harnesses; give 1 to {MAX_HARNESSES} [[harness]] tables",
                    raw.len()
                ));
            }
            let mut out: Vec<Harness> = Vec::with_capacity(raw.len());
            for h in raw {
                check_name("harness", &h.name)?;
                if out.iter().any(|o| o.name == h.name) {
                    return Err(format!(
                        "two harnesses are named {:?}; give each [[harness]] its own name",
                        h.name
                    ));
                }
                let agent = check_agent(RawAgent {
                    command: h.command,
                    stdin: h.stdin,
                    stdout: h.stdout,
                    relay: h.relay,
                    env: h.env,
                })
                .map_err(|e| format!("harness {:?}: {e}", h.name))?;
                out.push(Harness {
                    name: h.name,
                    agent,
                });
            }
            Ok(out)
        }
    }
}

fn check_agent(raw: RawAgent) -> Result<Agent, String> {
    let command = templates("agent.command", &raw.command)?;
    if command[0].as_literal() == Some("") {
        return Err("agent.command starts with an empty program name".into());
    }
    let stdin = raw
        .stdin
        .as_deref()
        .map(|s| template("agent.stdin", s))
        .transpose()?;
    let stdout = raw
        .stdout
        .as_deref()
        .map(|s| template("agent.stdout", s))
        .transpose()?;
    if raw.env.len() > MAX_ARGS {
        return Err(format!("agent.env has more than {MAX_ARGS} entries"));
    }
    let mut env = Vec::with_capacity(raw.env.len());
    for (key, value) in raw.env {
        if key.is_empty() || key.contains(['=', '\0']) || key.len() > MAX_ARG_BYTES {
            return Err(format!(
                "agent.env key {key:?} is not a variable name (non-empty, no '=' or NUL)"
            ));
        }
        let value = template(&format!("agent.env.{key}"), &value)?;
        env.push((key, value));
    }
    if let Some(relay) = &raw.relay {
        match relay.strip_prefix('$') {
            Some(var) if !var.is_empty() && !var.contains(['=', '\0']) => {}
            Some(_) => {
                return Err(format!(
                    "relay = {relay:?} names no variable; write \"$VAR\""
                ))
            }
            None => {
                crate::run::relay::Upstream::parse(relay).map_err(|e| e.to_string())?;
            }
        }
    }
    let uses_relay = command
        .iter()
        .chain(stdin.iter())
        .chain(stdout.iter())
        .chain(env.iter().map(|(_, v)| v))
        .any(|t| t.uses(Placeholder::RelayUrl));
    if uses_relay && raw.relay.is_none() {
        return Err(
            "{relay_url} is used but no relay is set; give relay = \"http://HOST:PORT/PATH\" (the model endpoint) or relay = \"$VAR\"".into(),
        );
    }
    Ok(Agent {
        command,
        stdin,
        stdout,
        env,
        relay: raw.relay,
    })
}

fn check_task(raw: RawTask, study_dir: &Path) -> Result<Task, String> {
    use crate::named::{canonical, kind, read_regular, Kind};
    check_name("task", &raw.name)?;
    let name = raw.name;
    let dir = study_dir.join(&raw.dir);
    let dir = canonical(&dir)
        .map_err(|e| format!("task {name:?}: its dir {} cannot be opened ({e}); dir is relative to the study file's directory", dir.display()))?;
    if kind(&dir).ok() != Some(Kind::Dir) {
        return Err(format!(
            "task {name:?}: dir {} is not a directory",
            dir.display()
        ));
    }
    let fixture = dir.join(&raw.fixture);
    let fixture = match canonical(&fixture).and_then(|f| Ok((kind(&f)?, f))) {
        Ok((Kind::Dir, f)) => f,
        Ok(_) => {
            return Err(format!(
                "task {name:?}: the fixture {} is not a directory; fixture names the directory copied as each trial's workspace",
                fixture.display()
            ))
        }
        Err(e) => {
            return Err(format!(
                "task {name:?}: the fixture {} cannot be opened ({e}); fixture is relative to the task's dir",
                fixture.display()
            ))
        }
    };
    crate::run::copy::measure(&fixture).map_err(|e| format!("task {name:?}: {e}"))?;
    let prompt = dir.join(&raw.prompt);
    let prompt_text = read_regular(&prompt, MAX_PROMPT_BYTES).map_err(|e| {
        format!(
            "task {name:?}: the prompt {} cannot be read ({e}); prompt names a file relative to the task's dir",
            prompt.display()
        )
    })?;
    if prompt_text.len() as u64 > MAX_PROMPT_BYTES {
        return Err(format!(
            "task {name:?}: the prompt {} is larger than {MAX_PROMPT_BYTES} bytes",
            prompt.display()
        ));
    }
    let verify = templates(&format!("task {name:?} verify"), &raw.verify)?;
    if !(1..=MAX_TIME_LIMIT).contains(&raw.time_limit) {
        return Err(format!(
            "task {name:?}: time_limit = {} is out of range; give 1 to {MAX_TIME_LIMIT} seconds",
            raw.time_limit
        ));
    }
    Ok(Task {
        name,
        dir,
        fixture,
        prompt,
        prompt_text,
        verify,
        time_limit: raw.time_limit,
    })
}

/// Checks that `task`'s prompt can be handed over wherever a template of the agent or the
/// task's verifier uses `{prompt}`: as UTF-8 text without NUL bytes (an argument or variable
/// cannot hold a NUL, and `{prompt}` is text), and short enough for the system to pass it (each
/// argument and `NAME=value` string at most [`MAX_ARG_STRLEN`] bytes, all of them together
/// within `ARG_MAX`). Without this every trial of the task would fail to start.
fn check_prompt_use(agent: &Agent, task: &Task) -> Result<(), String> {
    let name = &task.name;
    // Each place a prompt can go: (what to call it, the template, bytes beside the template).
    let mut uses: Vec<(String, &Template, usize)> = Vec::new();
    for t in &agent.command {
        uses.push(("an argument of agent.command".into(), t, 0));
    }
    for (key, value) in &agent.env {
        uses.push((format!("agent.env.{key}"), value, key.len() + 1));
    }
    for t in agent.stdin.iter().chain(&agent.stdout) {
        uses.push(("agent.stdin or agent.stdout".into(), t, 0));
    }
    for t in &task.verify {
        uses.push((format!("an argument of task {name:?}'s verify"), t, 0));
    }
    if !uses.iter().any(|(_, t, _)| t.uses(Placeholder::Prompt)) {
        return Ok(());
    }
    let prompt = &task.prompt_text;
    let shown = task.prompt.display();
    let fix = "give the prompt as a file instead: {prompt_file}, or stdin = \"{prompt_file}\"";
    if let Some(at) = prompt.iter().position(|&b| b == 0) {
        return Err(format!(
            "task {name:?}: the prompt {shown} holds a NUL byte (at byte {at}), which {{prompt}} cannot pass (an argument or variable ends at a NUL); remove it, or {fix}"
        ));
    }
    if let Err(e) = std::str::from_utf8(prompt) {
        return Err(format!(
            "task {name:?}: the prompt {shown} is not UTF-8 text (byte {} is not), which {{prompt}} passes as text; save it as UTF-8, or {fix}",
            e.valid_up_to()
        ));
    }
    let mut agent_total = 0usize;
    for (what, template, beside) in &uses {
        let len = template.bound(prompt.len()) + beside;
        if template.uses(Placeholder::Prompt) && len > MAX_ARG_STRLEN {
            return Err(format!(
                "task {name:?}: with its prompt ({} bytes), {what} can reach {len} bytes, more than the {MAX_ARG_STRLEN} the system passes in one argument or variable (paths counted as {PATH_BOUND}); {fix}",
                prompt.len()
            ));
        }
        if !what.contains("verify") {
            // Each string also costs its NUL and its pointer.
            agent_total += len + 1 + std::mem::size_of::<usize>();
        }
    }
    let inherited: usize = std::env::vars_os()
        .map(|(k, v)| k.len() + v.len() + 2 + std::mem::size_of::<usize>())
        .sum();
    // SAFETY: sysconf only reads a system constant.
    let arg_max = unsafe { libc::sysconf(libc::_SC_ARG_MAX) };
    if arg_max > 0 && agent_total + inherited > arg_max as usize {
        return Err(format!(
            "task {name:?}: with its prompt ({} bytes), the agent's arguments and environment can reach {} bytes, more than the system's limit of {arg_max} (ARG_MAX); {fix}",
            prompt.len(),
            agent_total + inherited
        ));
    }
    Ok(())
}

/// The arguments the runner adds itself; an arm that gives them would serve another root or
/// log elsewhere, and trials would share files.
const RUNNER_ARGS: [&str; 4] = ["--root", "--call-log", "--no-call-log", "--server"];

fn check_arm(raw: RawArm) -> Result<Arm, String> {
    check_name("arm", &raw.name)?;
    let name = raw.name;
    let server_name = raw.server_name.unwrap_or_else(|| "filesystem".into());
    let name_ok = (1..=64).contains(&server_name.len())
        && server_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(format!(
            "arm {name:?}: server_name {server_name:?} is not 1 to 64 of A-Z, a-z, 0-9, '-' and '_'"
        ));
    }
    let server_args = match (raw.server.unwrap_or(true), raw.args) {
        (false, Some(_)) => {
            return Err(format!(
                "arm {name:?} has server = false and args; an arm without a server takes no args (remove one of them)"
            ))
        }
        (false, None) => None,
        (true, args) => {
            let args = args.unwrap_or_default();
            if args.len() > MAX_ARGS {
                return Err(format!("arm {name:?}: args has more than {MAX_ARGS} elements"));
            }
            for a in &args {
                if a.len() > MAX_ARG_BYTES || a.contains('\0') {
                    return Err(format!(
                        "arm {name:?}: an argument is longer than {MAX_ARG_BYTES} bytes or holds NUL"
                    ));
                }
                let flag = a.split('=').next().unwrap_or(a);
                if RUNNER_ARGS.contains(&flag) {
                    return Err(format!(
                        "arm {name:?}: args gives {flag}, which the runner sets for each trial (its own workspace and call log); remove it"
                    ));
                }
            }
            Some(args)
        }
    };
    Ok(Arm {
        name,
        server_args,
        server_name,
    })
}

#[cfg(test)]
// The tests build study directories by name, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn fixture_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("tasks/one");
        std::fs::create_dir_all(t.join("workspace")).unwrap();
        std::fs::write(t.join("workspace/a.txt"), "a").unwrap();
        std::fs::write(t.join("prompt.md"), "do it").unwrap();
        d
    }

    const GOOD: &str = r#"
[study]
name = "t"
seed = 7
trials = 2
baseline = "fs"
[agent]
command = ["agent", "{workspace}", "{{literal}}", "--seed={seed}"]
env = { A = "{trial}" }
[[task]]
name = "one"
dir = "tasks/one"
fixture = "workspace"
prompt = "prompt.md"
verify = ["true"]
time_limit = 5
[[arm]]
name = "fs"
args = ["--tools", "extended"]
[[arm]]
name = "none"
server = false
"#;

    fn load(text: &str) -> Result<Study, SpecError> {
        let d = fixture_dir();
        let file = d.path().join("study.toml");
        std::fs::write(&file, text).unwrap();
        Study::load(&file)
    }

    fn err(text: &str) -> String {
        load(text).expect_err("must be refused").to_string()
    }

    #[test]
    fn a_good_study_loads_with_absolute_paths() {
        let s = load(GOOD).unwrap();
        assert_eq!(s.total_trials(), 4);
        assert!(s.tasks[0].fixture.is_absolute());
        assert_eq!(
            s.arms[0].server_args.as_deref(),
            Some(&["--tools".to_string(), "extended".to_string()][..])
        );
        assert_eq!(s.arms[1].server_args, None);
        assert_eq!(s.arms[1].server_name, "filesystem");
    }

    #[test]
    fn harness_tables_name_each_agent_and_multiply_the_trials() {
        let two = GOOD.replace(
            "[agent]\ncommand = [\"agent\", \"{workspace}\", \"{{literal}}\", \"--seed={seed}\"]\nenv = { A = \"{trial}\" }",
            "[[harness]]\nname = \"cc\"\ncommand = [\"agent\", \"{home}\"]\n[[harness]]\nname = \"codex\"\ncommand = [\"other\", \"{harness}\"]\nenv = { HOME = \"{workspace}\" }",
        );
        assert_ne!(two, GOOD);
        let s = load(&two).unwrap();
        assert_eq!(s.total_trials(), 8);
        let names: Vec<&str> = s.harnesses.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["cc", "codex"]);
        assert!(s.harnesses[0].agent.command[1].uses(Placeholder::Home));
        // The single [agent] is one unnamed harness.
        let one = load(GOOD).unwrap();
        assert_eq!(one.harnesses.len(), 1);
        assert!(one.harnesses[0].name.is_empty());

        let both = format!("{two}\n[agent]\ncommand = [\"x\"]\n");
        assert!(
            err(&both).contains("both [agent] and [[harness]]"),
            "{}",
            err(&both)
        );
        let dup = two.replace("name = \"codex\"", "name = \"cc\"");
        assert!(err(&dup).contains("two harnesses are named"));
        let bad = two.replace("name = \"codex\"", "name = \"Codex\"");
        assert!(err(&bad).contains("harness name"));
    }

    #[test]
    fn a_relay_needs_an_http_upstream_and_its_variable_set() {
        let with = |relay: &str| {
            GOOD.replace(
                "env = { A = \"{trial}\" }",
                &format!("env = {{ A = \"{{relay_url}}\" }}\nrelay = {relay:?}"),
            )
        };
        assert!(err(&with("https://api.example.com/v1")).contains("https is not relayed"));
        assert!(err(&GOOD.replace("{trial}", "{relay_url}")).contains("no relay is set"));
        assert!(load(&with("http://127.0.0.1:8000/v1")).is_ok());
        let s = load(&with("$FILESYSTEM_STUDY_TEST_NEVER_SET")).unwrap();
        let refused = s
            .check_runnable(Path::new("/nonexistent/filesystem"), &|_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(refused.contains("which is not set"), "{refused}");
    }

    #[test]
    fn templates_expand_and_keep_escaped_braces() {
        let t = Template::parse("{{x}} {trial}-{seed}").unwrap();
        let p = Path::new("/p");
        let v = Values {
            workspace: p,
            mcp_config: p,
            prompt_file: p,
            prompt: "hi",
            transcript_dir: p,
            task_dir: p,
            study_dir: p,
            task: "t",
            arm: "a",
            trial: "000-t-a",
            seed: 9,
            codex_home: p,
            codex_config: p,
            home: Path::new("/h"),
            harness: "cc",
            relay_url: "",
            gemini_home: p,
        };
        assert_eq!(t.expand(&v), OsString::from("{x} 000-t-a-9"));
        assert!(Template::parse("{nope}")
            .unwrap_err()
            .contains("{workspace}"));
        assert!(Template::parse("a { b").is_err());
        assert!(Template::parse("a } b").is_err());
    }

    #[test]
    fn a_template_bound_counts_the_prompt_paths_and_names() {
        let t = Template::parse("--p={prompt} {workspace} {trial}").unwrap();
        assert_eq!(t.bound(10), "--p=".len() + 10 + 1 + PATH_BOUND + 1 + 126);
        assert_eq!(Template::parse("plain").unwrap().bound(1 << 20), 5);
    }

    #[test]
    fn unknown_keys_and_placeholders_are_refused_by_name() {
        assert!(
            err(&GOOD.replace("time_limit = 5", "time_limit = 5\ntimeout = 3")).contains("timeout")
        );
        assert!(err(&GOOD.replace("{workspace}", "{worksapce}"))
            .contains("unknown placeholder {worksapce}"));
        assert!(err(&GOOD.replace("\"true\"", "\"{prompt_fiel}\"")).contains("prompt_fiel"));
    }

    #[test]
    fn duplicates_bounds_and_missing_files_are_refused() {
        assert!(err(&GOOD.replace("name = \"none\"", "name = \"fs\""))
            .contains("two arms are named \"fs\""));
        assert!(err(&GOOD.replace("trials = 2", "trials = 0")).contains("1 to 1000"));
        assert!(
            err(&GOOD.replace("fixture = \"workspace\"", "fixture = \"gone\"")).contains("fixture")
        );
        assert!(
            err(&GOOD.replace("baseline = \"fs\"", "baseline = \"x\"")).contains("names no arm")
        );
        assert!(
            err(&GOOD.replace("server = false", "server = false\nargs = []"))
                .contains("server = false and args")
        );
        assert!(
            err(&GOOD.replace("\"extended\"]", "\"extended\", \"--root\"]")).contains("--root")
        );
        assert!(err(&GOOD.replace("name = \"one\"", "name = \"One\"")).contains("a-z"));
    }

    #[test]
    fn the_outline_reads_a_copy_away_from_its_tasks() {
        let d = tempfile::tempdir().unwrap();
        let copy = d.path().join("study.toml");
        std::fs::write(&copy, GOOD).unwrap();
        let o = Outline::load(&copy).unwrap();
        assert_eq!(o.baseline, "fs");
        assert_eq!(o.tasks, ["one"]);
        assert_eq!(o.arms.len(), 2);
        assert!(o.arms[1].server_args.is_none());
        assert!(
            Study::load(&copy).is_err(),
            "the full load looks for the task files"
        );
    }

    #[test]
    fn colliding_trial_ids_are_refused() {
        let text = GOOD
            .replace("name = \"one\"", "name = \"a-b\"")
            .replace("name = \"fs\"", "name = \"c\"")
            .replace("baseline = \"fs\"", "baseline = \"c\"");
        let mut text = text.clone();
        text.push_str(
            "[[task]]\nname = \"a\"\ndir = \"tasks/one\"\nfixture = \"workspace\"\nprompt = \"prompt.md\"\nverify = [\"true\"]\ntime_limit = 5\n[[arm]]\nname = \"b-c\"\n",
        );
        assert!(err(&text).contains("same trial id"));
    }

    /// The studies the repository ships load as they are: the stand-in's (run by the demo),
    /// Claude Code's and Codex CLI's (documented; tests/study_codex.rs runs Codex's command line
    /// with the scripted model), with the same tasks and arms.
    #[test]
    fn the_shipped_example_studies_load() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/study");
        let standin = Study::load(&fixtures.join("study.toml")).expect("study.toml loads");
        let claude =
            Study::load(&fixtures.join("claude-code.toml")).expect("claude-code.toml loads");
        let names = |s: &Study| {
            (
                s.tasks.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                s.arms.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(names(&standin), names(&claude));
        assert_eq!(standin.tasks.len(), 3);
        assert_eq!(standin.baseline, "filesystem");
        assert!(
            claude.harnesses[0].agent.stdout.is_some(),
            "Claude Code's stream goes to the transcript"
        );
        let codex = Study::load(&fixtures.join("codex.toml")).expect("codex.toml loads");
        assert_eq!(names(&standin), names(&codex));
        assert!(
            crate::run::codex_config::wanted(&codex.harnesses[0].agent),
            "Codex's study names its home, so the runner writes its config.toml"
        );
    }
    /// Gemini CLI's example study loads, with the stand-in's tasks and arms, and gives each
    /// trial's Gemini CLI its own home.
    #[test]
    fn the_gemini_example_study_loads() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/study");
        let standin = Study::load(&fixtures.join("study.toml")).expect("study.toml loads");
        let gemini = Study::load(&fixtures.join("gemini.toml")).expect("gemini.toml loads");
        let names = |s: &Study| {
            (
                s.tasks.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                s.arms.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(names(&standin), names(&gemini));
        assert!(gemini.harnesses[0].agent.uses(Placeholder::GeminiHome));
        assert!(gemini.harnesses[0].agent.stdout.is_some());
    }
}
