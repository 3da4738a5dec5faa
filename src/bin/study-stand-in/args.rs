//! The command line, parsed by hand: the stand-in depends on nothing beyond serde and toml, and
//! its options are a fixed list of `--name value` pairs that the study runner fills in.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::error::StandInError;

/// The help text: the options, the plan and policy formats, and how each step is carried out.
pub const HELP: &str = "\
study-stand-in: a scripted agent for `filesystem study`, so the adoption experiment runs without a model

Usage:
  study-stand-in --config MCP_JSON --workspace DIR --prompt FILE --transcript DIR --arm NAME
                 --plan PLAN_TOML --policy POLICY_TOML --seed N [--session ID]

Options:
  --config FILE     the mcpServers JSON the runner wrote ({mcp_config}); at most one server; empty
                    mcpServers means no server: every step is built-in file work
  --workspace DIR   the trial's workspace ({workspace}); built-in file work stays inside it
  --prompt FILE     the task's prompt ({prompt_file}); recorded as the first line of the transcript
  --transcript DIR  where stand-in.jsonl is written ({transcript_dir}), in Claude Code's transcript
                    shape, which `filesystem report --transcripts` and `filesystem study report` read
  --arm NAME        the arm ({arm}): selects [arm.NAME] in the policy
  --plan FILE       the task's plan (TOML, in the task directory, not in the workspace)
  --policy FILE     the probabilities per arm (TOML)
  --seed N          the trial's seed ({seed}): every draw comes from it, so a trial is reproducible
  --session ID      the transcript's sessionId (default: stand-in-SEED); the study passes {trial}
  --help            this text

Plan (ordered [[step]] tables; paths relative to the workspace, no '..'):
  [[step]]  read = \"app.log\"
  [[step]]  write = \"summary.txt\"   content = \"...\"
  [[step]]  edit = \"process.py\"     old = \"text found exactly once\"   new = \"...\"
  [[step]]  rename = \"old.py\"       to = \"new.py\"

Policy ([arm.NAME], every key optional, each a probability from 0 to 1):
  ours_read   per read step: through the server's tools (else built-in)
  ours_write  per write, edit or rename step: likewise
  pipe        when pipe and filesystem tools are both served: share of server steps on the pipe tools (0.5)
  fail        per trial: give up before the last step, at a uniformly drawn step (the verifier then fails)
  hang        per trial: sleep forever before a uniformly drawn step (the runner kills it at the limit)
  error       per call through the server: first a wrong call the server refuses, then the right one,
              on the same file, so the report sees an error followed by a retry

How a step is carried out (tools found in tools/list, each checked for the arguments it is sent):
  filesystem tools  read_text_file, write_file, edit_file, move_file
  pipe tools        read: shelpa_pipe `tail -n +1 FILE`; write: shelpa_write; edit: the whole new
                    text through shelpa_write (the plan has read the file before, so no second read
                    is recorded); rename: shelpa cannot move a file, so a rename goes to move_file
                    when the filesystem tools are served too, and is built-in otherwise
  built-in          done with plain file operations on the workspace (paths confined: relative, no
                    '..', no symbolic link followed) and recorded under Claude Code's names: Read,
                    Write, Edit, and Bash (`mv FROM TO`) for a rename
  wrong calls       read_text_file with both head and tail; write_file and shelpa_write without
                    content; edit_file without newText; shelpa_pipe on FILE.missing. A move gets no
                    wrong call: the report pairs a retry by the file its input names, and a move's
                    input names two.

Output: a JSON summary on stdout (calls per interface, writes, errors, retries, steps done, whether
it gave up or hung). Exit 0 when the plan was carried out or given up by policy, 1 on an error (bad
input, a server that died or refused a right call), 2 on a usage error.
";

/// The parsed command line.
#[derive(Debug)]
pub struct Args {
    /// The mcpServers JSON.
    pub config: PathBuf,
    /// The trial's workspace.
    pub workspace: PathBuf,
    /// The prompt file.
    pub prompt: PathBuf,
    /// Where the transcript goes.
    pub transcript: PathBuf,
    /// The arm's name.
    pub arm: String,
    /// The plan file.
    pub plan: PathBuf,
    /// The policy file.
    pub policy: PathBuf,
    /// The trial's seed.
    pub seed: u64,
    /// The transcript's sessionId.
    pub session: String,
}

/// What the command line asks for.
pub enum Command {
    /// Print [`HELP`].
    Help,
    /// Carry out a plan.
    Run(Args),
}

/// Parses the arguments after the program name.
pub fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Command, StandInError> {
    let mut values: [Option<OsString>; 9] = Default::default();
    const NAMES: [&str; 9] = [
        "--config",
        "--workspace",
        "--prompt",
        "--transcript",
        "--arm",
        "--plan",
        "--policy",
        "--seed",
        "--session",
    ];
    let mut argv = argv.into_iter();
    while let Some(arg) = argv.next() {
        if arg == "--help" || arg == "-h" {
            return Ok(Command::Help);
        }
        let Some(slot) = NAMES.iter().position(|n| arg == *n) else {
            return Err(StandInError::Usage(format!(
                "unknown argument '{}'",
                arg.to_string_lossy()
            )));
        };
        let value = argv
            .next()
            .ok_or_else(|| StandInError::Usage(format!("{} needs a value", NAMES[slot])))?;
        if values[slot].replace(value).is_some() {
            return Err(StandInError::Usage(format!(
                "{} is given twice; give it once",
                NAMES[slot]
            )));
        }
    }
    let [config, workspace, prompt, transcript, arm, plan, policy, seed, session] = values;
    let need = |v: Option<OsString>, name: &str| {
        v.ok_or_else(|| StandInError::Usage(format!("{name} is required")))
    };
    let text = |v: OsString, name: &str| {
        v.into_string()
            .map_err(|_| StandInError::Usage(format!("{name} must be UTF-8")))
    };
    let seed_text = text(need(seed, "--seed")?, "--seed")?;
    let seed: u64 = seed_text.parse().map_err(|_| {
        StandInError::Usage(format!(
            "--seed '{seed_text}' is not a whole number from 0 to {}",
            u64::MAX
        ))
    })?;
    let session = match session {
        Some(s) => text(s, "--session")?,
        None => format!("stand-in-{seed}"),
    };
    Ok(Command::Run(Args {
        config: need(config, "--config")?.into(),
        workspace: need(workspace, "--workspace")?.into(),
        prompt: need(prompt, "--prompt")?.into(),
        transcript: need(transcript, "--transcript")?.into(),
        arm: text(need(arm, "--arm")?, "--arm")?,
        plan: need(plan, "--plan")?.into(),
        policy: need(policy, "--policy")?.into(),
        seed,
        session,
    }))
}
