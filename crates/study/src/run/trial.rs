//! One trial: a fresh workspace, its configuration, the agent under its limit, the verifier.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use workspace::Dir;

use crate::record::{names, PlannedTrial, TrialPaths, TrialRecord, TRIALS_DIR, TRIAL_MARKER_VAR};
use crate::spec::{Arm, Harness, Placeholder, Study, Task, Template, Values};

use super::codex_config::{self, CodexPaths};
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
    let (task, arm, harness) = find(study, trial).ok_or_else(|| {
        TrialError::Setup(RunError::Trial {
            path: study.file.clone(),
            what: format!(
                "the plan names trial {} whose task, arm or harness is not in the study",
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
    // The trial's own home, fresh like every file of the trial directory (the directory was
    // made anew above), with the temporary directory the runner points TMPDIR at.
    dir.mkdir(OsStr::new(names::HOME))
        .map_err(setup(&paths.home))?;
    dir.subdir(OsStr::new(names::HOME))
        .and_then(|home| home.mkdir(OsStr::new(super::home::TMP)))
        .map_err(setup(&paths.home))?;
    let config = super::config::mcp_config(arm, ctx.filesystem, &paths.workspace, &paths.call_log)
        .map_err(|e| {
            TrialError::Setup(RunError::Trial {
                path: paths.mcp_config.clone(),
                what: e.to_string(),
            })
        })?;
    let config = serde_json::to_vec_pretty(&config).unwrap_or_default();
    write_new(&dir, names::MCP_CONFIG, &config).map_err(setup(&paths.mcp_config))?;
    let codex = CodexPaths::new(&paths.dir);
    let agent = &harness.agent;
    let codex_wanted = codex_config::wanted(agent);
    if codex_wanted {
        let text =
            codex_config::codex_config(arm, ctx.filesystem, &paths.workspace, &paths.call_log)
                .map_err(|e| {
                    TrialError::Setup(RunError::Trial {
                        path: codex.config.clone(),
                        what: e.to_string(),
                    })
                })?;
        codex_config::write(&dir, &text).map_err(setup(&codex.config))?;
    }
    let gemini_home = super::gemini_settings::gemini_home(&paths.dir);
    let gemini = agent.uses(Placeholder::GeminiHome);
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

    // The recording relay, when the harness asks for one: started before the agent, stopped
    // after it, one per trial so its summary is this trial's alone.
    let relay = match &harness.agent.relay {
        Some(upstream) => Some(start_relay(upstream).map_err(|what| {
            TrialError::Setup(RunError::Trial {
                path: study.file.clone(),
                what,
            })
        })?),
        None => None,
    };
    let relay_url = relay
        .as_ref()
        .map(super::relay::Relay::url)
        .unwrap_or_default();
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
        codex_home: &codex.codex_home,
        codex_config: &codex.config,
        home: &paths.home,
        harness: &harness.name,
        relay_url: &relay_url,
        gemini_home: &gemini_home,
    };
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
        env: super::home::home_env(&paths.home, &agent.env)
            .into_iter()
            .chain(agent_env(
                agent,
                &values,
                codex_wanted.then_some(&codex.codex_home),
            ))
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
    let servers = report::classify::ServerFilter {
        names: vec![arm.server_name.clone()],
    };
    let relayed = relay.and_then(|r| r.finish(&servers));

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
    // What went over the wire when it was relayed, else what the harness's records say.
    let offered = relayed.or_else(|| super::offered::read(arm, &paths));
    if let Some(offered) = &offered {
        let json = serde_json::to_vec_pretty(offered).unwrap_or_default();
        write_new(&dir, names::OFFERED, &json).map_err(setup(&paths.offered))?;
    }
    Ok(TrialRecord {
        id: trial.id.clone(),
        task: trial.task.clone(),
        arm: trial.arm.clone(),
        harness: trial.harness.clone(),
        offered,
        rep: trial.rep,
        seed: trial.seed,
        order,
        started,
        agent: agent_end,
        verify: verify_end,
        success,
    })
}

/// The agent's own environment: the study's `env`, and `CODEX_HOME` at `codex_home` (when the
/// agent is Codex) unless the study sets it itself.
fn agent_env(
    agent: &crate::spec::Agent,
    values: &Values<'_>,
    codex_home: Option<&PathBuf>,
) -> Vec<(String, OsString)> {
    let mut env: Vec<(String, OsString)> = agent
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.expand(values)))
        .collect();
    if let Some(home) = codex_home {
        if !env.iter().any(|(k, _)| k == codex_config::CODEX_HOME_VAR) {
            env.push((codex_config::CODEX_HOME_VAR.into(), home.into()));
        }
    }
    env
}

/// Starts a relay to `upstream`: a URL, or `$VAR` for the URL in the runner's environment.
fn start_relay(upstream: &str) -> Result<super::relay::Relay, String> {
    let url = match upstream.strip_prefix('$') {
        Some(var) => std::env::var(var).map_err(|_| {
            format!("the relay's upstream is ${var}, which is not set in the environment of `filesystem study run`; set it to the model endpoint's URL")
        })?,
        None => upstream.to_string(),
    };
    let upstream = super::relay::Upstream::parse(&url).map_err(|e| e.to_string())?;
    super::relay::Relay::start(upstream).map_err(|e| e.to_string())
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
fn find<'s>(study: &'s Study, trial: &PlannedTrial) -> Option<(&'s Task, &'s Arm, &'s Harness)> {
    let task = study.tasks.iter().find(|t| t.name == trial.task)?;
    let arm = study.arms.iter().find(|a| a.name == trial.arm)?;
    let harness = study.harnesses.iter().find(|h| h.name == trial.harness)?;
    Some((task, arm, harness))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(env: &[(&str, &str)]) -> crate::spec::Agent {
        crate::spec::Agent {
            command: vec![Template::parse("codex").unwrap()],
            stdin: None,
            stdout: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), Template::parse(v).unwrap()))
                .collect(),
            relay: None,
        }
    }

    #[test]
    fn codex_home_is_set_for_codex_unless_the_study_sets_it() {
        let p = Path::new("/t");
        let values = Values {
            workspace: p,
            mcp_config: p,
            prompt_file: p,
            prompt: "",
            transcript_dir: p,
            task_dir: p,
            study_dir: p,
            task: "t",
            arm: "a",
            trial: "000-t-a",
            seed: 1,
            codex_home: Path::new("/t/home/.codex"),
            codex_config: Path::new("/t/home/.codex/config.toml"),
            home: Path::new("/t/home"),
            harness: "",
            relay_url: "",
            gemini_home: Path::new("/t/home"),
        };
        let home = PathBuf::from("/t/home/.codex");
        let env = agent_env(&agent(&[("A", "{arm}")]), &values, Some(&home));
        assert_eq!(
            env,
            [
                ("A".to_string(), OsString::from("a")),
                ("CODEX_HOME".to_string(), OsString::from("/t/home/.codex")),
            ]
        );
        let own = agent_env(&agent(&[("CODEX_HOME", "/mine")]), &values, Some(&home));
        assert_eq!(own, [("CODEX_HOME".to_string(), OsString::from("/mine"))]);
        assert!(agent_env(&agent(&[]), &values, None).is_empty());
    }
}
