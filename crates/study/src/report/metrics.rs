//! What one trial's calls add up to, and what an arm's trials add up to.
//!
//! A trial is reduced to counts as soon as it is read ([`TrialNumbers`]), so a study of many
//! trials is reported in memory proportional to its arms, not its calls. The classification of
//! each call (interface, write, read, retry) is the `report` crate's, the same as
//! `filesystem report` uses.

use std::collections::BTreeMap;

use report::classify::{is_read, Interface};
use report::model::{Outcome, Session};
use report::retry::retried_flags;
use serde::Serialize;

use super::stats::{mean_interval, Mean, Rate};
use crate::record::{End, TrialRecord};

/// How many pipe commands the report lists per arm, most used first.
pub const TOP_COMMANDS: usize = 5;

/// One trial's calls, counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrialNumbers {
    /// Whether the trial left any transcript to count.
    pub transcript: bool,
    /// Tool calls in its transcript.
    pub calls: u64,
    /// Of those, calls of a harness's discovery tools (`ToolSearch`, `tool_search`), which
    /// load a schema and are no work: counted apart, and in no adoption.
    pub discovery_calls: u64,
    /// Work calls (every call but discovery) by interface, retries included: which interface
    /// the work went through, whether or not it touched a file (Codex's shell is neither a read
    /// nor a write).
    pub work_by_interface: BTreeMap<&'static str, u64>,
    /// Calls whose result the transcript holds (the error rate's denominator).
    pub with_result: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Failed calls the next call retried.
    pub retried: u64,
    /// File writes, and of those the ones through this project's tools.
    pub writes: u64,
    /// See [`TrialNumbers::writes`].
    pub writes_ours: u64,
    /// Writes by interface.
    pub writes_by_interface: BTreeMap<&'static str, u64>,
    /// File reads, and of those the ones through this project's tools.
    pub reads: u64,
    /// See [`TrialNumbers::reads`].
    pub reads_ours: u64,
    /// Reads by interface.
    pub reads_by_interface: BTreeMap<&'static str, u64>,
    /// Whether the trial's server left a call log.
    pub call_log: bool,
    /// Pipe calls in the call log that ran a command line (not those refused before anything ran).
    pub pipe_calls: u64,
    /// Pipe calls the server refused before running anything (their stages are not counted).
    pub pipe_refused: u64,
    /// Their stages, all together.
    pub stages: u64,
    /// Stages by command name.
    pub commands: BTreeMap<String, u64>,
}

impl TrialNumbers {
    /// Counts the calls of a trial's transcript sessions (all of them: a subagent's calls are
    /// the trial's too).
    pub fn add_transcript(&mut self, sessions: &[Session]) {
        self.transcript = true;
        for session in sessions {
            let retried = retried_flags(&session.calls);
            for (call, was_retried) in session.calls.iter().zip(retried) {
                self.calls += 1;
                if call.interface.is_work() {
                    *self
                        .work_by_interface
                        .entry(call.interface.as_str())
                        .or_default() += 1;
                } else {
                    self.discovery_calls += 1;
                }
                match call.outcome {
                    Outcome::Ok => self.with_result += 1,
                    Outcome::Error(_) => {
                        self.with_result += 1;
                        self.errors += 1;
                    }
                    Outcome::NoResult => {}
                }
                self.retried += u64::from(was_retried);
                // Adoption counts choices: a failed call that the next call retried is one
                // choice with its retry, so only the retry is counted. Otherwise an interface
                // whose calls fail more often would look more adopted.
                if was_retried {
                    continue;
                }
                let name = call.interface.as_str();
                if call.write {
                    self.writes += 1;
                    self.writes_ours += u64::from(call.interface.is_ours());
                    *self.writes_by_interface.entry(name).or_default() += 1;
                } else if is_read(call.interface, &call.tool, &call.stages) {
                    self.reads += 1;
                    self.reads_ours += u64::from(call.interface.is_ours());
                    *self.reads_by_interface.entry(name).or_default() += 1;
                }
            }
        }
    }

    /// Counts the pipe calls of a trial's call log: only those that ran, with their stages; a
    /// call the server refused before anything ran is counted apart, its stages not at all (they
    /// are what the agent asked for, not what the server did).
    pub fn add_call_log(&mut self, sessions: &[Session]) {
        self.call_log = true;
        for call in sessions.iter().flat_map(|s| &s.calls) {
            if call.interface == Interface::Pipe && !call.stages.is_empty() {
                if !ran(&call.outcome) {
                    self.pipe_refused += 1;
                    continue;
                }
                self.pipe_calls += 1;
                self.stages += call.stages.len() as u64;
                for stage in &call.stages {
                    *self.commands.entry(stage.clone()).or_default() += 1;
                }
            }
        }
    }
}

/// The reasons of a pipe call that failed after its command line started (the pipe mode's
/// `EXEC_FAILED` reasons, and a run stopped by its limit or the client): every other failure
/// (`GUARD_VIOLATION` and `INVALID_ARGUMENT` reasons, such as `DISALLOWED_OPTION` or
/// `PARSE_ERROR`) was refused before anything ran. Named by what ran, so a refusal reason added
/// later is never counted as a run.
const RAN_REASONS: [&str; 6] = [
    "NONZERO_EXIT",
    "TIMEOUT",
    "CANCELLED",
    "RESOURCE_LIMIT",
    "WRITE_FAILED",
    "SPAWN_FAILED",
];

/// Whether a pipe call with `outcome` ran its command line.
fn ran(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Ok | Outcome::NoResult => true,
        Outcome::Error(reason) => RAN_REASONS.contains(&reason.as_str()),
    }
}

/// A pipe command and how many stages ran it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommandCount {
    /// The command's name.
    pub command: String,
    /// Stages that ran it.
    pub count: u64,
}

/// An arm's pipe use, from its trials' call logs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PipeNumbers {
    /// Trials whose server left a call log.
    pub trials_with_call_log: u64,
    /// Pipe calls that ran a command line.
    pub pipe_calls: u64,
    /// Pipe calls refused before anything ran (not in `pipe_calls`, `stages` or the commands).
    pub pipe_refused: u64,
    /// The stages of the calls that ran, all together.
    pub stages: u64,
    /// `stages / pipe_calls`, when there were pipe calls.
    pub mean_stages: Option<f64>,
    /// The most used commands (at most [`TOP_COMMANDS`]), most used first, ties by name.
    pub top_commands: Vec<CommandCount>,
}

/// Everything the report says about one arm.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmNumbers {
    /// The arm's name.
    pub arm: String,
    /// The harness, for a row of one arm under one harness (absent for the arm over all its
    /// harnesses, and for a study with a single unnamed agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    /// The MCP server names its trials were configured with (`[]` for an arm without a server;
    /// `null` when no trial's configuration could be read, and then any server counted).
    pub server_names: Option<Vec<String>>,
    /// Finished trials.
    pub trials: u64,
    /// Trials with a transcript: the ones calls, adoption, errors and retries come from.
    pub trials_with_transcript: u64,
    /// Trials whose verifier passed, over trials.
    pub success: Rate,
    /// Trials whose agent was killed at the time limit, over trials.
    pub timeouts: Rate,
    /// Trials whose agent died of a signal or could not start, over trials.
    pub crashes: Rate,
    /// File writes through this project's tools, over all file writes.
    pub write_adoption: Rate,
    /// Writes by interface.
    pub writes_by_interface: BTreeMap<&'static str, u64>,
    /// File reads through this project's tools, over all file reads.
    pub read_adoption: Rate,
    /// Reads by interface.
    pub reads_by_interface: BTreeMap<&'static str, u64>,
    /// Tool calls per trial with a transcript, with a 95% t interval (its lower end cut at 0).
    pub calls_per_trial: Mean,
    /// Failed calls over calls with a result.
    pub error_rate: Rate,
    /// Failed calls that the next call retried, over failed calls.
    pub retry_after_error: Rate,
    /// Pipe use from the call logs.
    pub pipe: PipeNumbers,
    /// Calls of every kind, of work and of discovery, summed over the trials.
    pub calls: CallCounts,
    /// How this project's tools were offered to the model, over the trials whose harness
    /// records tell.
    pub offered: OfferedNumbers,
}

/// Calls summed over trials, discovery calls apart from work calls.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CallCounts {
    /// Every call.
    pub all: u64,
    /// Work calls: every call but discovery calls (what adoption is computed over).
    pub work: u64,
    /// Discovery calls (`ToolSearch`, `tool_search`): the cost of tools offered by name only.
    pub discovery: u64,
    /// The work calls by interface (they add up to `work`).
    pub work_by_interface: BTreeMap<&'static str, u64>,
}

/// What the trials' models were offered, summed ([`report::offered::Offered`] per trial).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OfferedNumbers {
    /// Trials whose harness records (or the relay) told what was offered.
    pub trials_known: u64,
    /// Trials by how this project's tools were presented (`up_front`, `deferred`,
    /// `namespaced`, `mixed`, `not_offered`).
    pub presentation: BTreeMap<&'static str, u64>,
    /// Trials in which this project's server instructions reached the model.
    pub instructions_seen: u64,
    /// The mean characters of system text in a trial's first request.
    pub mean_system_chars: Option<f64>,
    /// The sources read (`claude_code_transcript`, `relay`).
    pub sources: Vec<String>,
}

fn offered_numbers(trials: &[(TrialRecord, TrialNumbers)]) -> OfferedNumbers {
    let mut out = OfferedNumbers::default();
    let mut chars = 0u64;
    for offered in trials.iter().filter_map(|(r, _)| r.offered.as_ref()) {
        out.trials_known += 1;
        *out.presentation
            .entry(offered.presentation.as_str())
            .or_default() += 1;
        out.instructions_seen += u64::from(offered.instructions_seen);
        chars += offered.system_chars;
        if !out.sources.contains(&offered.source) {
            out.sources.push(offered.source.clone());
        }
    }
    out.mean_system_chars = (out.trials_known > 0).then(|| chars as f64 / out.trials_known as f64);
    out
}

/// Adds up the trials of one arm.
pub fn arm_numbers(
    arm: &str,
    server_names: Option<Vec<String>>,
    trials: &[(TrialRecord, TrialNumbers)],
) -> ArmNumbers {
    let n = trials.len() as u64;
    let count = |f: &dyn Fn(&TrialRecord) -> bool| trials.iter().filter(|(r, _)| f(r)).count();
    let successes = count(&|r| r.success) as u64;
    let timeouts = count(&|r| r.agent.end == End::KilledAtLimit) as u64;
    let crashes = count(&|r| matches!(r.agent.end, End::Signaled | End::FailedToStart)) as u64;
    let mut sum = TrialNumbers::default();
    let mut calls_per_trial = Vec::new();
    let mut with_transcript = 0;
    for (_, t) in trials {
        if t.transcript {
            with_transcript += 1;
            calls_per_trial.push(t.calls as f64);
        }
        sum.calls += t.calls;
        sum.discovery_calls += t.discovery_calls;
        sum.with_result += t.with_result;
        sum.errors += t.errors;
        sum.retried += t.retried;
        sum.writes += t.writes;
        sum.writes_ours += t.writes_ours;
        sum.reads += t.reads;
        sum.reads_ours += t.reads_ours;
        for (k, v) in &t.writes_by_interface {
            *sum.writes_by_interface.entry(k).or_default() += v;
        }
        for (k, v) in &t.reads_by_interface {
            *sum.reads_by_interface.entry(k).or_default() += v;
        }
        for (k, v) in &t.work_by_interface {
            *sum.work_by_interface.entry(k).or_default() += v;
        }
        sum.call_log |= t.call_log;
        sum.pipe_calls += t.pipe_calls;
        sum.pipe_refused += t.pipe_refused;
        sum.stages += t.stages;
        for (k, v) in &t.commands {
            *sum.commands.entry(k.clone()).or_default() += v;
        }
    }
    let mut top: Vec<CommandCount> = sum
        .commands
        .into_iter()
        .map(|(command, count)| CommandCount { command, count })
        .collect();
    top.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.command.cmp(&b.command))
    });
    top.truncate(TOP_COMMANDS);
    ArmNumbers {
        arm: arm.to_string(),
        harness: None,
        server_names,
        trials: n,
        trials_with_transcript: with_transcript,
        success: Rate::new(successes, n),
        timeouts: Rate::new(timeouts, n),
        crashes: Rate::new(crashes, n),
        write_adoption: Rate::new(sum.writes_ours, sum.writes),
        writes_by_interface: sum.writes_by_interface,
        read_adoption: Rate::new(sum.reads_ours, sum.reads),
        reads_by_interface: sum.reads_by_interface,
        calls_per_trial: {
            // A count cannot be negative: the symmetric t interval is cut at 0.
            let mut m = mean_interval(&calls_per_trial);
            m.low = m.low.map(|l| l.max(0.0));
            m
        },
        error_rate: Rate::new(sum.errors, sum.with_result),
        retry_after_error: Rate::new(sum.retried, sum.errors),
        pipe: PipeNumbers {
            trials_with_call_log: trials.iter().filter(|(_, t)| t.call_log).count() as u64,
            pipe_calls: sum.pipe_calls,
            pipe_refused: sum.pipe_refused,
            stages: sum.stages,
            mean_stages: (sum.pipe_calls > 0).then(|| sum.stages as f64 / sum.pipe_calls as f64),
            top_commands: top,
        },
        calls: CallCounts {
            all: sum.calls,
            work: sum.calls - sum.discovery_calls,
            discovery: sum.discovery_calls,
            work_by_interface: sum.work_by_interface,
        },
        offered: offered_numbers(trials),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use report::model::Call;

    fn pipe(outcome: Outcome, stages: &[&str]) -> Call {
        Call {
            tool: "shelpa_pipe".into(),
            interface: Interface::Pipe,
            write: false,
            outcome,
            stages: stages.iter().map(|s| s.to_string()).collect(),
            input: None,
            refused_token: None,
        }
    }

    #[test]
    fn only_pipe_calls_that_ran_count_with_their_stages() {
        let calls = vec![
            pipe(Outcome::Ok, &["head", "wc"]),
            pipe(Outcome::Error("NONZERO_EXIT".into()), &["rg"]),
            pipe(Outcome::Error("DISALLOWED_OPTION".into()), &["sed"]),
            pipe(Outcome::Error("PARSE_ERROR".into()), &["awk", "sort"]),
            pipe(Outcome::Error("unclassified".into()), &["jq"]),
        ];
        let mut n = TrialNumbers::default();
        n.add_call_log(&[Session {
            id: "s".into(),
            parent: None,
            calls,
        }]);
        assert_eq!((n.pipe_calls, n.pipe_refused, n.stages), (2, 3, 3));
        let names: Vec<&str> = n.commands.keys().map(String::as_str).collect();
        assert_eq!(names, ["head", "rg", "wc"]);
    }
}
