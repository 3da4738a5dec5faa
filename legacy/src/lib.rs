//! The shelpa generation (`--legacy-pipe`): a virtual pipeline shell.
//!
//! A call flows `parse` → `policy` (→ a [`plan::Plan`]) → `exec` / `tee` / `session` /
//! `listing`, and every failure is turned into shelpa's error object ([`failure`] is its shape,
//! `error` the mapping of each layer's errors to it). What shelpa shows (tool names and
//! descriptions, help, instructions, server name, which tools are served) is chosen in
//! [`surface`], with the reconstruction choices; `schema` assembles the definitions and the
//! result object they declare. This file is the toolset and the orchestration of its calls;
//! every tool of every set runs it, whatever the surface.

// A `Failure` is built at most once per call, at the edge, and carries the partial output the
// model needs; boxing it everywhere would cost clarity for no measurable gain.
#![allow(clippy::result_large_err)]

pub mod audit;
mod error;
pub mod exec;
pub mod failure;
pub mod fence;
pub mod help;
pub mod limits;
pub mod listing;
pub mod parse;
pub mod plan;
pub mod policy;
mod recorded;
mod schema;
pub mod scratch;
pub mod session;
mod stdout_budget;
pub mod surface;
pub mod tee;
pub mod tools;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use error::{bad_argument, guard_failure, not_a_tee, session_failure, stopped_write};
use exec::{ExecLimits, Outcome, RunResult};
use failure::Failure;
use limits::StageLimits;
use mcp_core::toolset::{Args, CallContext, ToolDef, ToolOutput, Toolset, ToolsetFactory};
use plan::{Plan, Step};
use schema::{builtin_step, step_json, success};
use session::Session;
use surface::{ShelpaTools, Surface};
use tee::{TeeError, TeeLimits, TeeMode, TeeReport};
use tools::ToolPaths;
use workspace::guard::PathGuard;

/// shelpa's table of tools (names and classes), for readers such as the adoption report.
pub use surface::TOOLS;

/// Settings of the legacy pipe mode.
#[derive(Clone, Debug)]
pub struct PipeOptions {
    /// Wall-clock limit of one call, in seconds.
    pub timeout_secs: u64,
    /// Writes larger than this many bytes need `confirm_oversize: true`.
    pub approve_above: u64,
    /// Writes are cut to this many bytes.
    pub max_write_bytes: usize,
    /// The returned stdout is cut to this many bytes.
    pub max_output_bytes: usize,
    /// The most bytes one answer carries (`--max-result-bytes`): stdout beyond what fits is cut
    /// and marked `truncated`, like stdout past `max_output_bytes`.
    pub result_budget: mcp_core::budget::ResultBudget,
    /// Memory limit of each pipeline stage, in bytes (`--stage-memory`; 0: none). It also
    /// bounds each stage's scratch files (see [`limits`]).
    pub stage_memory: u64,
    /// Which texts, names and server name shelpa shows (`--surface`); behaviour is the same.
    pub surface: Surface,
    /// Which of shelpa's tool sets is served (`--shelpa-tools`).
    pub tool_set: ShelpaTools,
    /// Who may write where: tee and shelpa_write refuse what these rules do not let change
    /// (`READ_ONLY`).
    pub permissions: workspace::permissions::Permissions,
}

impl Default for PipeOptions {
    fn default() -> Self {
        PipeOptions {
            timeout_secs: 30,
            approve_above: 2 * 1024,
            max_write_bytes: 1024 * 1024,
            max_output_bytes: 1024 * 1024,
            result_budget: Default::default(),
            stage_memory: limits::DEFAULT_STAGE_MEMORY,
            surface: Surface::default(),
            tool_set: ShelpaTools::default(),
            permissions: Default::default(),
        }
    }
}

/// Most bytes of each stage's stderr kept.
const STDERR_CAP: usize = 64 * 1024;

/// Builds legacy pipe toolsets.
pub struct PipeFactory {
    /// The mode's settings.
    pub options: PipeOptions,
    tools: Arc<ToolPaths>,
}

impl PipeFactory {
    /// Prepares the mode: resolves the pipeline commands once.
    pub fn new(options: PipeOptions) -> Self {
        PipeFactory {
            options,
            tools: Arc::new(ToolPaths::discover()),
        }
    }
}

/// shelpa's `--help` text in `surface`, for the tools of `set`, and after it what the write
/// rules `permissions` change.
pub fn help_text(
    surface: Surface,
    set: ShelpaTools,
    permissions: &workspace::permissions::Permissions,
) -> String {
    let mut text = help::help_for(surface, set, &ToolPaths::discover());
    text.push_str(&help::write_rules_note(permissions));
    text
}

/// One line for `filesystem tools` naming pipeline commands that are missing on this machine
/// (empty when all are present).
pub fn tool_status_line() -> String {
    help::status_line(&ToolPaths::discover())
}

impl ToolsetFactory<PathGuard> for PipeFactory {
    fn mode(&self) -> String {
        "legacy-pipe".into()
    }
    fn instructions(&self) -> String {
        help::instructions_with_rules(
            self.options.surface,
            self.options.tool_set,
            &self.options.permissions,
        )
    }
    fn definitions(&self) -> Vec<ToolDef> {
        schema::definitions(self.options.surface, self.options.tool_set)
    }
    fn build(&self, guard: PathGuard) -> std::io::Result<Box<dyn Toolset>> {
        Ok(Box::new(PipeToolset {
            guard: guard.with_permissions(&self.options.permissions),
            options: self.options.clone(),
            tools: self.tools.clone(),
            session: Session::new(),
        }))
    }
}

/// The pipe tools for one root: its guard, its session directory, the resolved commands.
pub struct PipeToolset {
    guard: PathGuard,
    options: PipeOptions,
    tools: Arc<ToolPaths>,
    session: Session,
}

/// What the call log records of a pipe-mode call beyond the core's fields (stage names), and the
/// note for the model when the session directory had to fall back.
#[derive(Default)]
struct CallFacts {
    stages: Vec<String>,
    /// Set when the session directory vanished and the call ran in its nearest existing
    /// ancestor: returned to the model as the result's `note` (success or failure alike).
    note: Option<String>,
}

/// Adds the call's `note` (see [`CallFacts::note`]) to its result: a new top-level field beside
/// `stdout`/`meta` or beside `error`, so clients that parse the recorded shape are unaffected.
fn with_note(result: Result<Value, Failure>, note: Option<String>) -> Result<Value, Failure> {
    let Some(note) = note else {
        return result;
    };
    match result {
        Ok(mut value) => {
            if let Some(obj) = value.as_object_mut() {
                obj.insert("note".into(), json!(note));
            }
            Ok(value)
        }
        Err(mut failure) => {
            failure.partial.insert("note".into(), json!(note));
            Err(failure)
        }
    }
}

impl Toolset for PipeToolset {
    fn mode(&self) -> String {
        "legacy-pipe".into()
    }
    /// Sweeps the scratch folders of pipe servers that ended mid-call, in the background and once
    /// per process: a server as it starts; the daemon, which starts no root's toolset, and a
    /// one-off `filesystem call` at their first pipe call (see [`scratch::sweep_in_background`]).
    fn started(&self) {
        scratch::sweep_in_background();
    }
    fn instructions(&self) -> String {
        help::instructions_with_rules(
            self.options.surface,
            self.options.tool_set,
            &self.options.permissions,
        )
    }
    fn tools(&self) -> Vec<ToolDef> {
        schema::definitions(self.options.surface, self.options.tool_set)
    }
    /// `shelpa-mcp` in the original surface, as shelpa announced itself.
    fn server_name(&self) -> String {
        match self.options.surface {
            Surface::Original => surface::ORIGINAL_SERVER_NAME.into(),
            Surface::Modern => "filesystem".into(),
        }
    }
    fn call(&self, name: &str, args: &Map<String, Value>, ctx: &CallContext) -> ToolOutput {
        scratch::sweep_in_background();
        let mut log = CallFacts::default();
        // Only the tools of the served set answer: the server checks too, but a one-off
        // `filesystem call` or a combined toolset must not reach a tool this set does not have.
        let served = self.options.tool_set.names();
        let result = match name {
            _ if !served.contains(&name) => Err(error::unknown_tool(name, served)),
            surface::PIPE => self.pipe(args, ctx, &mut log),
            surface::WRITE => {
                log.stages.push("tee".into());
                self.write(args, ctx, &mut log)
            }
            surface::TEE => {
                log.stages.push("tee".into());
                self.tee_tool(args, ctx, &mut log)
            }
            surface::NAV => self.navigate(args, ctx, &mut log),
            other => Err(error::unknown_tool(other, served)),
        };
        let result = with_note(result, log.note.take());
        let budget = self.options.result_budget;
        let mut output = match result {
            Ok(mut value) => {
                let surface = self.options.surface;
                let text_of = |v: &Value| match surface {
                    Surface::Original => recorded::text(v),
                    Surface::Modern => v.to_string(),
                };
                if let Value::Object(answer) = &mut value {
                    stdout_budget::fit(answer, budget, |a| {
                        let v = Value::Object(a.clone());
                        text_of(&v).len() + mcp_core::budget::json_len(&v)
                    });
                }
                ToolOutput::structured(text_of(&value), value)
            }
            Err(mut failure) => {
                let render = |f: &Failure| match self.options.surface {
                    Surface::Original => recorded::text(&recorded::wire(
                        f,
                        self.options.tool_set,
                        self.options.approve_above,
                    ))
                    .len(),
                    Surface::Modern => f.to_json().to_string().len(),
                };
                let mut partial = std::mem::take(&mut failure.partial);
                stdout_budget::fit(&mut partial, budget, |p| {
                    let mut probe = failure.clone();
                    probe.partial = p.clone();
                    render(&probe)
                });
                failure.partial = partial;
                let text = match self.options.surface {
                    Surface::Original => recorded::text(&recorded::wire(
                        &failure,
                        self.options.tool_set,
                        self.options.approve_above,
                    )),
                    Surface::Modern => failure.to_json().to_string(),
                };
                let mut out = ToolOutput::error(failure.reason.clone(), text);
                if let Some(token) = &failure.token {
                    out.log.insert("token".into(), json!(token));
                }
                out
            }
        };
        output
            .log
            .insert("stage_count".into(), json!(log.stages.len()));
        output.log.insert("stages".into(), json!(log.stages));
        output
    }
}

/// True for a lone `cd` or `pwd`: the commands that must work even when the session directory
/// cannot be entered.
fn is_navigation(stages: &[plan::Stage]) -> bool {
    matches!(stages, [only] if only.words.first().is_some_and(|w| w.text == "cd" || w.text == "pwd"))
}

/// Cuts `bytes` to `cap` and turns them into text for the model.
fn capped_text(bytes: &[u8], cap: usize) -> (String, bool) {
    let cut = bytes.len() > cap;
    let kept = &bytes[..bytes.len().min(cap)];
    (String::from_utf8_lossy(kept).into_owned(), cut)
}

impl PipeToolset {
    /// The root-relative form of a directory or file the policy checked (it works in absolute
    /// paths inside the root, for stage arguments); the server acts only on this form.
    fn relative_of(&self, checked: &std::path::Path) -> Result<std::path::PathBuf, Failure> {
        tee::relative_target(&self.guard, checked).map_err(|e| e.to_failure())
    }

    /// The session directory for a direct write (shelpa_write, shelpa_tee take no `cwd`), with
    /// the note for the call log when the session had to leave a vanished directory.
    fn session_dir(&self, log: &mut CallFacts) -> Result<session::Current, Failure> {
        let current = self
            .session
            .current(&self.guard, None)
            .map_err(session_failure)?;
        log.note = current.fallback.as_ref().map(session::Fallback::note);
        Ok(current)
    }

    fn limits(&self) -> TeeLimits {
        TeeLimits {
            approve_above: self.options.approve_above,
            hard_limit: self.options.max_write_bytes,
        }
    }

    fn pipe(
        &self,
        args: &Map<String, Value>,
        ctx: &CallContext,
        log: &mut CallFacts,
    ) -> Result<Value, Failure> {
        let started = Instant::now();
        let a = checked_args(args, &["command", "cwd", "confirm_oversize"])?;
        let command = a.str("command").map_err(bad_argument)?;
        let cwd_arg = a.opt_str("cwd").map_err(bad_argument)?;
        let confirmed = flag(&a, "confirm_oversize")?;

        let stages = parse::parse(command)?;
        log.stages = stages
            .iter()
            .filter_map(|s| s.words.first().map(|w| w.text.clone()))
            .collect();
        let cwd_rel = match self.session.current(&self.guard, cwd_arg) {
            Ok(current) => {
                log.note = current.fallback.as_ref().map(session::Fallback::note);
                current.relative
            }
            // The session directory cannot be entered (replaced by a symlink: refused, never
            // followed). `cd` and `pwd` must still work, or the session is stuck: they need the
            // directory only as a lexical base (the policy joins `cd`'s argument to it and the
            // guard then resolves the result like any path argument, refusing escapes), so they
            // run on the stored path and say why every other command is refused.
            Err(e) if cwd_arg.is_none() && is_navigation(&stages) => {
                log.note = Some(format!(
                    "{} Only `cd` and `pwd` work until the session leaves it (or pass `cwd`).",
                    session_failure(e).detail
                ));
                self.session.stored()
            }
            Err(e) => {
                let cwd_escaped =
                    cwd_arg.is_some() && matches!(e, session::SessionError::Escape(..));
                let mut f = session_failure(e);
                if cwd_escaped {
                    f.recorded_detail = Some(recorded::CWD_ESCAPE.into());
                }
                return Err(f);
            }
        };
        // The policy builds stage arguments relative to the session directory as an absolute
        // path (lexical work only); every operation the server itself does uses `cwd_rel`.
        let cwd = session::absolute(&self.guard, &cwd_rel);
        let cx = policy::PolicyContext {
            guard: &self.guard,
            cwd: &cwd,
            tools: &self.tools,
        };
        // The stage as written names the step of a built-in (`ls -la src`, `cd ..`).
        let written = |name| {
            stages
                .first()
                .map_or(name, |s: &plan::Stage| s.text.as_str())
        };
        match policy::check(&stages, &cx)? {
            Plan::Pwd => {
                let text = format!("{}\n", cwd.display());
                let step = builtin_step(written("pwd"), text.len() as u64, false, started);
                Ok(success(text, vec![step], Value::Null, ""))
            }
            Plan::Cd(dir) => {
                let rel = self.relative_of(&dir)?;
                self.session
                    .change(&self.guard, &rel)
                    .map_err(session_failure)?;
                let step = builtin_step(written("cd"), 0, false, started);
                Ok(success(String::new(), vec![step], Value::Null, ""))
            }
            Plan::BuiltinLs { target, all, long } => {
                let rel = self.relative_of(&target)?;
                let listing = listing::list(self.guard.workspace(), &rel, all, long)
                    .map_err(|e| error::ls_failure(&rel, &e))?;
                let (text, cut) = capped_text(listing.as_bytes(), self.options.max_output_bytes);
                let step = builtin_step(written("ls"), text.len() as u64, cut, started);
                Ok(success(text, vec![step], Value::Null, ""))
            }
            Plan::Pipeline(steps) => self.run_pipeline(&steps, &stages, confirmed, ctx),
        }
    }

    fn run_pipeline(
        &self,
        steps: &[Step],
        stages: &[plan::Stage],
        confirmed: bool,
        ctx: &CallContext,
    ) -> Result<Value, Failure> {
        // 0 is "no limit" for both, as for the call's own --timeout.
        let timeout =
            (self.options.timeout_secs > 0).then(|| Duration::from_secs(self.options.timeout_secs));
        let memory = (self.options.stage_memory > 0).then_some(self.options.stage_memory);
        let limits = ExecLimits {
            timeout,
            // The capture keeps its own cap: a pipeline that tees is not stopped early by the
            // result budget, which only cuts what the answer shows (see stdout_budget).
            output_cap: self.options.max_output_bytes,
            stderr_cap: STDERR_CAP,
            tee_limit: self.options.max_write_bytes,
            stage: StageLimits::new(memory, timeout),
        };
        let run =
            exec::run(steps, self.guard.workspace(), &limits, ctx).map_err(error::spawn_failure)?;
        let steps_json: Vec<Value> = run
            .steps
            .iter()
            .enumerate()
            .map(|(i, meta)| {
                // The policy makes one step of each stage; the name is only a fallback.
                let text = stages.get(i).map_or(meta.command.as_str(), |s| &s.text);
                step_json(meta, text)
            })
            .collect();
        let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
        let stderr: String = run.stderr.iter().map(|(_, s)| s.as_str()).collect();
        let partial = |tee: Value| {
            let mut m = Map::new();
            m.insert("stdout".into(), json!(stdout));
            m.insert("meta".into(), json!({"steps": steps_json, "tee": tee}));
            m
        };
        if let Some(mut f) = error::stopped_run(&run.outcome, timeout, memory, steps.len()) {
            f.partial = partial(Value::Null);
            return Err(f);
        }
        let reports = self.commit_tees(&run, confirmed, ctx)?;
        let tee_json = TeeReport::merged_json(&reports);
        if let Outcome::NonZeroExit(code) = run.outcome {
            let mut f = error::nonzero_exit(code, &run);
            f.partial = partial(tee_json);
            return Err(f);
        }
        Ok(success(
            stdout.clone(),
            steps_json.clone(),
            tee_json,
            &stderr,
        ))
    }

    /// The history store's lock for a call that writes, so its changes are one entry of the
    /// operation log (and no other server changes the files meanwhile); waits no longer than
    /// the call may run.
    fn change_lock(&self, ctx: &CallContext) -> Result<workspace::history::StoreLock, Failure> {
        let store = workspace::history::Store::new(self.guard.workspace().clone(), false);
        let gave_up = || ctx.cancel.is_cancelled();
        let origin = workspace::history::oplog::Origin {
            client: ctx.client.as_ref().and_then(|c| c.name.clone()),
            version: ctx.client.as_ref().and_then(|c| c.version.clone()),
            mode: "pipe".into(),
            tool: ctx.tool.clone(),
        };
        store
            .begin(
                &workspace::history::LockWait::new(ctx.deadline, &gave_up),
                &origin,
            )
            .map_err(|e| {
                TeeError::Io {
                    op: "lock the history store before writing",
                    path: ".filesystem".into(),
                    source: std::io::Error::other(e.to_string()),
                }
                .to_failure()
            })
    }

    /// Passes every tee through the approval gate, then writes them all: a refused gate leaves
    /// every file (and mirror) untouched.
    fn commit_tees(
        &self,
        run: &RunResult,
        confirmed: bool,
        ctx: &CallContext,
    ) -> Result<Vec<TeeReport>, Failure> {
        let limits = self.limits();
        let relative = |capture: &exec::TeeCapture| {
            capture
                .targets
                .iter()
                .map(|t| tee::relative_target(&self.guard, t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_failure())
        };
        for capture in run.tees.iter().filter(|c| !c.targets.is_empty()) {
            let targets = relative(capture)?;
            let first = targets
                .first()
                .map(|t| workspace::guard::display_relative(t))
                .unwrap_or_default();
            tee::gate(capture.total, confirmed, &limits, &first).map_err(|e| e.to_failure())?;
        }
        let mut reports = Vec::new();
        let mut lock = None;
        for capture in run.tees.iter().filter(|c| !c.targets.is_empty()) {
            let lock = match &lock {
                Some(l) => l,
                None => lock.insert(self.change_lock(ctx)?),
            };
            let mode = if capture.append {
                TeeMode::Append
            } else {
                TeeMode::Overwrite
            };
            let report = tee::commit(
                self.guard.workspace(),
                self.guard.permissions(),
                lock,
                &relative(capture)?,
                &capture.data,
                mode,
                capture.truncated,
            )
            .map_err(|e| e.to_failure())?;
            reports.push(report);
        }
        Ok(reports)
    }

    fn write(
        &self,
        args: &Map<String, Value>,
        ctx: &CallContext,
        log: &mut CallFacts,
    ) -> Result<Value, Failure> {
        let started = Instant::now();
        let a = checked_args(args, &["path", "content", "append", "confirm_oversize"])?;
        let path = a.str("path").map_err(bad_argument)?;
        let content = a.str("content").map_err(bad_argument)?;
        let write = DirectWrite::read(&a, content, started)?;

        let current = self.session_dir(log)?;
        let cwd_rel = current.relative;
        // Joined to the root-relative session directory (an absolute `path` replaces it), so
        // every refusal quotes a root-relative path or the caller's own, never the host's.
        let joined = cwd_rel.join(path);
        let resolved = self
            .guard
            .resolve_for_change(&joined.to_string_lossy())
            .map_err(|e| guard_failure(&e, path))?;
        let shown = resolved.display();
        self.write_content(&[resolved.relative], &shown, &write, ctx)
    }

    /// The last part of every direct write (shelpa_write, shelpa_tee), shared with the tees of a
    /// pipeline: the approval gate on the whole content, the cut at the hard limit, then
    /// [`tee::commit`] (the write and its `.shelpa/` mirror). `targets` are root-relative and
    /// already checked; `shown` names the first one in a refusal. A call cancelled or out of time
    /// by then writes nothing.
    fn write_content(
        &self,
        targets: &[std::path::PathBuf],
        shown: &str,
        write: &DirectWrite<'_>,
        ctx: &CallContext,
    ) -> Result<Value, Failure> {
        let limits = self.limits();
        let bytes = write.content.as_bytes();
        tee::gate(bytes.len() as u64, write.confirmed, &limits, shown)
            .map_err(|e| e.to_failure())?;
        let truncated = bytes.len() > limits.hard_limit;
        let data = &bytes[..bytes.len().min(limits.hard_limit)];
        ctx.check().map_err(stopped_write)?;
        let mode = if write.append {
            TeeMode::Append
        } else {
            TeeMode::Overwrite
        };
        let lock = self.change_lock(ctx)?;
        let report = tee::commit(
            self.guard.workspace(),
            self.guard.permissions(),
            &lock,
            targets,
            data,
            mode,
            truncated,
        )
        .map_err(|e: TeeError| e.to_failure())?;
        let step = builtin_step("tee", data.len() as u64, truncated, write.started);
        Ok(success(
            String::new(),
            vec![step],
            TeeReport::merged_json(&[report]),
            "",
        ))
    }

    /// shelpa_tee: `content` written to `paths` as the stage `tee [-a] -- PATH…` would write its
    /// input. The targets go through the policy as that stage (the same guard and target checks
    /// as a tee typed into shelpa_pipe: no globs, no symlink/directory/special targets, no append
    /// through a hard link, nothing protected), then through [`Self::write_content`]. The stage is
    /// built from words, never from a string, so no quoting of a path can change its meaning;
    /// `--` keeps a path that starts with `-` a path.
    fn tee_tool(
        &self,
        args: &Map<String, Value>,
        ctx: &CallContext,
        log: &mut CallFacts,
    ) -> Result<Value, Failure> {
        let started = Instant::now();
        let a = checked_args(args, &["content", "paths", "append", "confirm_oversize"])?;
        let content = a.str("content").map_err(bad_argument)?;
        let paths = tee_paths(args)?;
        let write = DirectWrite::read(&a, content, started)?;

        let word = |text: &str| plan::Word {
            text: text.to_string(),
            quoted: true,
            glob_chars: Vec::new(),
        };
        let mut words = vec![word("tee")];
        if write.append {
            words.push(word("-a"));
        }
        words.push(word("--"));
        words.extend(paths.iter().map(|p| word(p)));
        // What a model would have typed for the same write, for messages that quote the stage.
        let text = shell_words::join(words.iter().map(|w| w.text.as_str()));
        let stages = [plan::Stage { words, text }];

        let current = self.session_dir(log)?;
        let cwd = session::absolute(&self.guard, &current.relative);
        let cx = policy::PolicyContext {
            guard: &self.guard,
            cwd: &cwd,
            tools: &self.tools,
        };
        let targets = match policy::check(&stages, &cx)? {
            Plan::Pipeline(steps) => match steps.as_slice() {
                [Step::Tee { targets, .. }] => targets.clone(),
                _ => return Err(not_a_tee()),
            },
            _ => return Err(not_a_tee()),
        };
        let relative = targets
            .iter()
            .map(|t| self.relative_of(t))
            .collect::<Result<Vec<_>, _>>()?;
        let shown = relative
            .first()
            .map(|t| workspace::guard::display_relative(t))
            .unwrap_or_default();
        self.write_content(&relative, &shown, &write, ctx)
    }

    /// shelpa: one navigation command (`cd`, `pwd`, `ls`) on its own, run by the same code as
    /// through shelpa_pipe. A pipeline, or any other command, is refused before anything runs
    /// and pointed at shelpa_pipe.
    fn navigate(
        &self,
        args: &Map<String, Value>,
        ctx: &CallContext,
        log: &mut CallFacts,
    ) -> Result<Value, Failure> {
        let a = Args(args);
        a.check_names(&["command"]).map_err(bad_argument)?;
        let command = a.str("command").map_err(bad_argument)?;
        let stages = parse::parse(command)?;
        let first = |s: &plan::Stage| s.words.first().map(|w| w.text.clone()).unwrap_or_default();
        if stages.len() > 1 {
            return Err(plan::Refusal::new(
                plan::GuardReason::NavInPipeline,
                stages.first().map(first).unwrap_or_default(),
                "shelpa runs one navigation command (cd, pwd or ls) on its own, not a pipeline.",
                "Send pipelines to shelpa_pipe.",
            )
            .into());
        }
        let name = stages.first().map(first).unwrap_or_default();
        if !NAVIGATION_COMMANDS.contains(&name.as_str()) {
            return Err(plan::Refusal::new(
                plan::GuardReason::DisallowedCmd,
                name.as_str(),
                format!("shelpa runs only cd, pwd and ls; '{name}' is not a navigation command."),
                "Run other commands with shelpa_pipe.",
            )
            .into());
        }
        self.pipe(args, ctx, log)
    }
}

/// A direct write's request (shelpa_write, shelpa_tee): the bytes, the mode, the approval, and
/// when the call started (for the step's `execution_time_ms`).
struct DirectWrite<'a> {
    content: &'a str,
    append: bool,
    confirmed: bool,
    started: Instant,
}

impl<'a> DirectWrite<'a> {
    /// The request of shelpa_write and shelpa_tee alike: `content` (each reads it at its own
    /// point, so a call with several bad arguments is refused for the same one as before) with
    /// the `append` and `confirm_oversize` flags read here, in that order.
    fn read(a: &Args<'a>, content: &'a str, started: Instant) -> Result<Self, Failure> {
        Ok(DirectWrite {
            content,
            append: flag(a, "append")?,
            confirmed: flag(a, "confirm_oversize")?,
            started,
        })
    }
}

/// What the shelpa tool runs; the adoption report counts a pipeline of only these as
/// navigation, not a read.
pub const NAVIGATION_COMMANDS: [&str; 3] = ["cd", "pwd", "ls"];

/// A tool's arguments once their names are checked against what it takes: the first step of
/// shelpa_pipe, shelpa_write and shelpa_tee alike, so all three refuse a stray argument in the
/// same words.
fn checked_args<'a>(args: &'a Map<String, Value>, names: &[&str]) -> Result<Args<'a>, Failure> {
    let a = Args(args);
    a.check_names(names).map_err(bad_argument)?;
    Ok(a)
}

/// An optional boolean argument that is false when absent (`append`, `confirm_oversize`), read
/// the same way by every tool that takes one.
fn flag(a: &Args<'_>, name: &str) -> Result<bool, Failure> {
    Ok(a.opt_bool(name).map_err(bad_argument)?.unwrap_or(false))
}

/// shelpa_tee's `paths`: a non-empty array of strings (a lone string is refused with the fix, so
/// a model learns the declared shape rather than a tolerated one).
fn tee_paths(args: &Map<String, Value>) -> Result<Vec<String>, Failure> {
    let bad = |problem: &str| {
        bad_argument(mcp_core::toolset::ArgError::BadValue {
            name: "paths".into(),
            problem: problem.into(),
        })
    };
    match args.get("paths") {
        None => Err(bad_argument(mcp_core::toolset::ArgError::Missing(
            "paths".into(),
        ))),
        Some(Value::Array(items)) if items.is_empty() => {
            Err(bad("must name at least one file, e.g. [\"out.txt\"]"))
        }
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad("must be an array of strings, e.g. [\"out.txt\"]"))
            })
            .collect(),
        Some(_) => Err(bad("must be an array of strings, e.g. [\"out.txt\"]")),
    }
}
