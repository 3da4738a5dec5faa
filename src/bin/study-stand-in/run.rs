//! Carrying out a plan: for each step, draw the interface from the policy, do the work through
//! it, record the call in the transcript and count it the way the report will.
//!
//! One step is one logical call (plus, when drawn, one wrong call before it): a read step reads,
//! a write or edit step writes, a rename moves. So the report's read and write counts are the
//! plan's steps, and its adoption shares estimate the policy's `ours_read` and `ours_write`. An
//! edit through the pipe tools writes the whole new text with shelpa_write, starting from the
//! file as it is: the plans read a file before they edit it, as an agent would, so that edit
//! records no second read.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::args::Args;
use crate::builtin::{replace_once, shell_quote, Builtin};
use crate::error::StandInError;
use crate::input::read_text;
use crate::mcp::{read_config, Client, ToolResult};
use crate::plan::{self, Step};
use crate::policy::ArmPolicy;
use crate::rng::Rng;
use crate::transcript::Transcript;

/// The largest prompt read.
const MAX_PROMPT_BYTES: u64 = 1 << 20;
/// shelpa asks for `confirm_oversize` above this many bytes of one write (its default
/// `--approve-above`); the stand-in confirms such writes, as a model told so would.
const PIPE_APPROVAL_BYTES: usize = 2048;

/// The filesystem toolset's tool names (and the arguments the stand-in sends each).
const READ_TEXT_FILE: (&str, &[&str]) = ("read_text_file", &["path", "head", "tail"]);
const WRITE_FILE: (&str, &[&str]) = ("write_file", &["path", "content"]);
const EDIT_FILE: (&str, &[&str]) = ("edit_file", &["path", "edits"]);
const MOVE_FILE: (&str, &[&str]) = ("move_file", &["source", "destination"]);
/// shelpa's tool names.
const SHELPA_PIPE: (&str, &[&str]) = ("shelpa_pipe", &["command"]);
const SHELPA_WRITE: (&str, &[&str]) = ("shelpa_write", &["path", "content"]);

/// The interface one call went through (the report's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Builtin,
    Pipe,
    Filesystem,
}

impl Via {
    fn as_str(self) -> &'static str {
        match self {
            Via::Builtin => "builtin",
            Via::Pipe => "pipe",
            Via::Filesystem => "filesystem",
        }
    }
}

/// Which of the tools the stand-in uses the server serves, each with the arguments it is sent
/// among its schema's properties (found in tools/list, not assumed from the arm's flags).
#[derive(Default, Debug)]
struct Toolbox {
    fs_read: bool,
    fs_write: bool,
    fs_edit: bool,
    fs_move: bool,
    pipe_read: bool,
    pipe_write: bool,
    /// shelpa_write takes `confirm_oversize`.
    pipe_confirm: bool,
}

impl Toolbox {
    fn from_list(tools: &[Value]) -> Self {
        let has = |(name, keys): (&str, &[&str])| {
            tools.iter().any(|t| {
                t.get("name").and_then(Value::as_str) == Some(name)
                    && keys
                        .iter()
                        .all(|k| t.pointer(&format!("/inputSchema/properties/{k}")).is_some())
            })
        };
        Toolbox {
            fs_read: has(READ_TEXT_FILE),
            fs_write: has(WRITE_FILE),
            fs_edit: has(EDIT_FILE),
            fs_move: has(MOVE_FILE),
            pipe_read: has(SHELPA_PIPE),
            pipe_write: has(SHELPA_WRITE),
            pipe_confirm: has(("shelpa_write", &["confirm_oversize"])),
        }
    }
}

/// What one interface saw, in the report's terms (`filesystem report --format json`, per
/// interface): calls, calls of a writing tool, errors, errors retried by the next call, calls by
/// tool.
#[derive(Default, Debug, Serialize)]
pub struct InterfaceCount {
    calls: u64,
    writes: u64,
    errors: u64,
    retried_after_error: u64,
    by_tool: BTreeMap<String, u64>,
}

/// What the stand-in did, printed on stdout as JSON when it ends: what the report must find.
#[derive(Debug, Serialize)]
pub struct Summary {
    arm: String,
    seed: u64,
    session: String,
    /// The server's key, or null without one.
    server: Option<String>,
    /// Steps in the plan.
    steps: usize,
    /// Steps carried out.
    steps_done: usize,
    /// Whether it gave up by policy before the last step.
    gave_up: bool,
    /// Per interface (builtin, pipe, filesystem).
    interfaces: BTreeMap<&'static str, InterfaceCount>,
}

/// A call about to be made through the server.
struct ServerCall {
    via: Via,
    tool: &'static str,
    args: Value,
    /// The wrong call sent first when the policy draws an error (`None`: this call gets none).
    wrong: Option<Value>,
    writes: bool,
}

struct Agent {
    rng: Rng,
    policy: ArmPolicy,
    server: Option<Client>,
    tools: Toolbox,
    builtin: Builtin,
    transcript: Transcript,
    summary: Summary,
}

/// Carries out the plan of `args`; `Ok` with the summary when done or given up by policy.
/// A hang drawn by the policy never returns.
pub fn run(args: &Args) -> Result<Summary, StandInError> {
    let steps = plan::load(&args.plan)?;
    let policy = ArmPolicy::load(&args.policy, &args.arm)?;
    let config = read_config(&args.config)?;
    let prompt = read_text(&args.prompt, "prompt", MAX_PROMPT_BYTES)?;
    // By name, once: the workspace named on the command line, canonicalised for the transcript's
    // paths; all work in it goes through its descriptor (see `Builtin`).
    #[allow(clippy::disallowed_methods)]
    let canonical = std::fs::canonicalize(&args.workspace);
    let not_a_dir = || {
        StandInError::Usage(format!(
            "--workspace '{}' is not a directory",
            args.workspace.display()
        ))
    };
    let workspace = canonical.map_err(|_| not_a_dir())?;
    let builtin = Builtin::new(&workspace).map_err(|_| not_a_dir())?;
    let mut transcript =
        Transcript::create(&args.transcript, &args.session, &workspace, args.seed)?;
    transcript.prompt(&prompt)?;
    let (server, tools) = match &config {
        Some(config) => {
            let mut client = Client::start(config, &workspace)?;
            let tools = Toolbox::from_list(&client.list_tools()?);
            (Some(client), tools)
        }
        None => (None, Toolbox::default()),
    };
    let interfaces = [Via::Builtin, Via::Pipe, Via::Filesystem]
        .into_iter()
        .map(|v| (v.as_str(), InterfaceCount::default()))
        .collect();
    let mut agent = Agent {
        rng: Rng::new(args.seed),
        policy,
        server,
        tools,
        builtin,
        transcript,
        summary: Summary {
            arm: args.arm.clone(),
            seed: args.seed,
            session: args.session.clone(),
            server: config.map(|c| c.name),
            steps: steps.len(),
            steps_done: 0,
            gave_up: false,
            interfaces,
        },
    };
    agent.carry_out(&steps)?;
    Ok(agent.summary)
}

impl Agent {
    fn carry_out(&mut self, steps: &[Step]) -> Result<(), StandInError> {
        // The trial's fate is drawn first, in a fixed order, whatever the policy says.
        let fail = self.rng.chance(self.policy.fail);
        let fail_before = self.rng.below(steps.len());
        let hang = self.rng.chance(self.policy.hang);
        let hang_before = self.rng.below(steps.len());
        for (i, step) in steps.iter().enumerate() {
            if hang && i == hang_before {
                self.transcript.say("(thinking)")?;
                eprintln!(
                    "study-stand-in: hanging before step {} of {} as the policy drew (hang = {})",
                    i + 1,
                    steps.len(),
                    self.policy.hang
                );
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
            }
            if fail && i == fail_before {
                self.summary.gave_up = true;
                return self.transcript.say(&format!(
                    "I could not finish the task: I stopped after {i} of {} steps.",
                    steps.len()
                ));
            }
            self.step(i + 1, step)?;
            self.summary.steps_done += 1;
        }
        self.transcript.say("Done.")
    }

    /// Draws the interface of a step: through the server with the policy's probability (and,
    /// when both toolsets could do it, the pipe tools with probability `pipe`), else built-in.
    /// Both draws are made for every step, so the stream does not depend on what is served.
    fn choose(&mut self, step: &Step) -> Via {
        let p = if step.is_read() {
            self.policy.ours_read
        } else {
            self.policy.ours_write
        };
        let ours = self.rng.chance(p);
        let pipe_first = self.rng.chance(self.policy.pipe);
        if !ours {
            return Via::Builtin;
        }
        let t = &self.tools;
        let (pipe, fs) = match step {
            Step::Read { .. } => (t.pipe_read, t.fs_read),
            Step::Write { .. } => (t.pipe_write, t.fs_write),
            Step::Edit { .. } => (t.pipe_write, t.fs_edit),
            // shelpa has no way to move a file.
            Step::Rename { .. } => (false, t.fs_move),
        };
        match (pipe, fs) {
            (true, true) if pipe_first => Via::Pipe,
            (_, true) => Via::Filesystem,
            (true, false) => Via::Pipe,
            (false, false) => Via::Builtin,
        }
    }

    fn step(&mut self, number: usize, step: &Step) -> Result<(), StandInError> {
        let via = self.choose(step);
        let step_err = |message: String| StandInError::Step {
            step: number,
            message,
        };
        if via == Via::Builtin {
            return self.builtin_step(step).map_err(|e| match e {
                StandInError::Step { message, .. } => step_err(message),
                other => other,
            });
        }
        let call = match (via, step) {
            (Via::Filesystem, Step::Read { path }) => ServerCall {
                via,
                tool: READ_TEXT_FILE.0,
                args: json!({"path": path}),
                wrong: Some(json!({"path": path, "head": 1, "tail": 1})),
                writes: false,
            },
            (Via::Filesystem, Step::Write { path, content }) => ServerCall {
                via,
                tool: WRITE_FILE.0,
                args: json!({"path": path, "content": content}),
                wrong: Some(json!({"path": path})),
                writes: true,
            },
            (Via::Filesystem, Step::Edit { path, old, new }) => ServerCall {
                via,
                tool: EDIT_FILE.0,
                args: json!({"path": path, "edits": [{"oldText": old, "newText": new}]}),
                wrong: Some(json!({"path": path, "edits": [{"oldText": old}]})),
                writes: true,
            },
            (Via::Filesystem, Step::Rename { from, to }) => ServerCall {
                via,
                tool: MOVE_FILE.0,
                args: json!({"source": from, "destination": to}),
                wrong: None,
                writes: false,
            },
            (Via::Pipe, Step::Read { path }) => ServerCall {
                via,
                tool: SHELPA_PIPE.0,
                args: json!({"command": format!("tail -n +1 {}", shell_quote(path))}),
                wrong: Some(
                    json!({"command": format!("tail -n +1 {}", shell_quote(&format!("{path}.missing")))}),
                ),
                writes: false,
            },
            (Via::Pipe, Step::Write { path, content }) => self.pipe_write(path, content),
            (Via::Pipe, Step::Edit { path, old, new }) => {
                let text = self.builtin.read(path)?;
                let content = replace_once(&text, old, new).map_err(step_err)?;
                self.pipe_write(path, &content)
            }
            (via, step) => {
                return Err(step_err(format!(
                    "no way to do {step:?} through the {} tools",
                    via.as_str()
                )))
            }
        };
        self.server_call(call).map_err(|e| match e {
            StandInError::Step { message, .. } => step_err(message),
            other => other,
        })
    }

    fn pipe_write(&self, path: &str, content: &str) -> ServerCall {
        let mut args = json!({"path": path, "content": content});
        if self.tools.pipe_confirm && content.len() > PIPE_APPROVAL_BYTES {
            args["confirm_oversize"] = json!(true);
        }
        ServerCall {
            via: Via::Pipe,
            tool: SHELPA_WRITE.0,
            args,
            wrong: Some(json!({"path": path})),
            writes: true,
        }
    }

    /// Makes a call through the server, preceded by its wrong call when the policy draws an
    /// error (one draw per call, made even for a call that has no wrong form).
    fn server_call(&mut self, call: ServerCall) -> Result<(), StandInError> {
        let inject = self.rng.chance(self.policy.error);
        let Some(client) = self.server.as_mut() else {
            return Err(StandInError::Step {
                step: 0,
                message: "no server is configured".into(),
            });
        };
        let name = format!("mcp__{}__{}", client.name(), call.tool);
        let mut made: Vec<(Value, ToolResult)> = Vec::new();
        if let (true, Some(wrong)) = (inject, call.wrong) {
            let result = client.call_tool(call.tool, &wrong)?;
            made.push((wrong, result));
        }
        let result = client.call_tool(call.tool, &call.args)?;
        made.push((call.args, result));
        let last = made.len() - 1;
        for (i, (input, result)) in made.iter().enumerate() {
            self.transcript
                .call(&name, input, &result.content, result.is_error)?;
            let count = self.count(call.via, call.tool, call.writes);
            if result.is_error {
                count.errors += 1;
                if i < last {
                    count.retried_after_error += 1;
                }
            }
        }
        if last == 1 && !made[0].1.is_error {
            return Err(StandInError::Step {
                step: 0,
                message: format!(
                    "the wrong call to {} was not refused ({}); the stand-in's wrong calls no longer fit this server",
                    call.tool,
                    made[0].1.text()
                ),
            });
        }
        let (_, result) = &made[last];
        if result.is_error {
            return Err(StandInError::Step {
                step: 0,
                message: format!("{} refused the call: {}", call.tool, result.text()),
            });
        }
        Ok(())
    }

    fn builtin_step(&mut self, step: &Step) -> Result<(), StandInError> {
        let b = &self.builtin;
        let (tool, input, result, writes) = match step {
            Step::Read { path } => {
                let text = b.read(path)?;
                (
                    "Read",
                    json!({"file_path": b.display_path(path)}),
                    text,
                    false,
                )
            }
            Step::Write { path, content } => {
                let existed = b.write(path, content)?;
                let shown = b.display_path(path);
                let result = if existed {
                    format!("The file {shown} has been updated.")
                } else {
                    format!("File created successfully at: {shown}")
                };
                (
                    "Write",
                    json!({"file_path": shown, "content": content}),
                    result,
                    true,
                )
            }
            Step::Edit { path, old, new } => {
                let text = b.read(path)?;
                let edited =
                    replace_once(&text, old, new).map_err(|message| StandInError::Step {
                        step: 0,
                        message: format!("{path}: {message}"),
                    })?;
                b.write(path, &edited)?;
                let shown = b.display_path(path);
                (
                    "Edit",
                    json!({"file_path": shown, "old_string": old, "new_string": new}),
                    format!("The file {shown} has been updated."),
                    true,
                )
            }
            Step::Rename { from, to } => {
                b.rename(from, to)?;
                (
                    "Bash",
                    json!({"command": format!("mv {} {}", shell_quote(from), shell_quote(to)),
                           "description": format!("Rename {from} to {to}")}),
                    String::new(),
                    false,
                )
            }
        };
        self.transcript.call(tool, &input, &json!(result), false)?;
        self.count(Via::Builtin, tool, writes);
        Ok(())
    }

    /// Counts one call of `tool` through `via`; the counter, for its outcome.
    fn count(&mut self, via: Via, tool: &str, writes: bool) -> &mut InterfaceCount {
        let count = self.summary.interfaces.entry(via.as_str()).or_default();
        count.calls += 1;
        count.writes += u64::from(writes);
        *count.by_tool.entry(tool.to_string()).or_default() += 1;
        count
    }
}
