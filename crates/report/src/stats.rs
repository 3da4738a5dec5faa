//! Turning sessions of calls into the report's numbers.
//!
//! Definitions (the README repeats them):
//! - *adoption share*: of all calls that write or edit a file (failed ones included: adoption is
//!   about which tool the model chose), the share made through this project's pipe or
//!   filesystem tools;
//! - *error rate*: failed calls over calls whose outcome is known (calls without a result are
//!   counted apart);
//! - *position*: a work call's index among its session's work calls (discovery calls such as
//!   `ToolSearch` left aside: they are the harness's cost of presenting tools, not a choice of
//!   tool); decile `d` holds the calls with `floor(10 * index / calls) == d`, so every session
//!   contributes to the deciles in proportion to its own length.
//! - *work calls*: every call but discovery calls, which are counted apart.

use std::collections::BTreeMap;

use serde::Serialize;

use super::classify::Interface;
use super::model::{Call, InputStats, Outcome, Session};
use super::retry::retried_flags;

/// Number of position buckets (deciles).
pub const BUCKETS: usize = 10;

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Numbers from client transcripts (what the model saw and chose).
    pub transcripts: Option<Section>,
    /// Numbers from this server's call logs (what the server did). Kept apart from the
    /// transcripts because the same call can appear in both.
    pub call_logs: Option<Section>,
}

/// The numbers of one kind of input.
#[derive(Debug, Serialize)]
pub struct Section {
    /// What was read and skipped.
    pub inputs: InputStats,
    /// Number of sessions.
    pub sessions: usize,
    /// All sessions together.
    pub total: Breakdown,
    /// Adoption by position in the session, one entry per decile.
    pub by_position: Vec<PositionBucket>,
    /// Each session on its own.
    pub per_session: Vec<SessionReport>,
}

/// Calls, errors, retries, pipelines and adoption of a set of calls.
#[derive(Debug, Default, Serialize)]
pub struct Breakdown {
    /// All calls.
    pub calls: usize,
    /// Calls that are work: all but [`Breakdown::discovery_calls`].
    pub work_calls: usize,
    /// Calls of a harness's discovery tools (`ToolSearch`, `tool_search`), which load a
    /// tool's schema: counted apart from work.
    pub discovery_calls: usize,
    /// Per interface (only interfaces with calls).
    pub interfaces: BTreeMap<&'static str, InterfaceStats>,
    /// Who made the file writes.
    pub adoption: Adoption,
}

/// The numbers of one interface.
#[derive(Debug, Default, Serialize)]
pub struct InterfaceStats {
    /// Calls.
    pub calls: usize,
    /// Calls by tool name.
    pub by_tool: BTreeMap<String, usize>,
    /// Calls that wrote or edited a file.
    pub writes: usize,
    /// Failed calls.
    pub errors: usize,
    /// Calls whose outcome is unknown.
    pub no_result: usize,
    /// `errors / (calls - no_result)`, when there were such calls.
    pub error_rate: Option<f64>,
    /// Failed calls by reason.
    pub errors_by_reason: BTreeMap<String, usize>,
    /// Pipe refusals by reason and the token refused (`DISALLOWED_OPTION` → `-i` → 3).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_tokens: BTreeMap<String, BTreeMap<String, usize>>,
    /// Failed calls that the next call retried (see `retry`).
    pub retried_after_error: usize,
    /// Calls that ran a command line, by their stage counts and commands.
    pub pipelines: PipelineStats,
}

/// Pipeline shapes of the calls that carried a command line.
#[derive(Debug, Default, Serialize)]
pub struct PipelineStats {
    /// Calls with at least one stage.
    pub count: usize,
    /// Calls by number of stages.
    pub by_length: BTreeMap<usize, usize>,
    /// Stages by command name.
    pub commands: BTreeMap<String, usize>,
}

/// Who made the file writes.
#[derive(Debug, Default, Serialize)]
pub struct Adoption {
    /// Calls that wrote or edited a file.
    pub writes: usize,
    /// Of those, the ones through this project's tools.
    pub ours: usize,
    /// `ours / writes`, when there were writes.
    pub share: Option<f64>,
    /// Writes by interface.
    pub writes_by_interface: BTreeMap<&'static str, usize>,
}

/// Adoption in one decile of session position.
#[derive(Debug, Serialize)]
pub struct PositionBucket {
    /// 0 for the first tenth of each session, 9 for the last.
    pub decile: usize,
    /// Calls in this decile, by interface.
    pub calls_by_interface: BTreeMap<&'static str, usize>,
    /// Who made the writes in this decile.
    pub adoption: Adoption,
}

/// One session's numbers.
#[derive(Debug, Serialize)]
pub struct SessionReport {
    /// The session's name.
    pub id: String,
    /// For a subagent, the session that started it.
    pub parent: Option<String>,
    /// Its numbers.
    #[serde(flatten)]
    pub breakdown: Breakdown,
}

/// Computes a section from sessions read from one kind of input.
pub fn section(sessions: &[Session], inputs: InputStats) -> Section {
    let mut total = Accumulator::default();
    let mut buckets: Vec<Accumulator> = (0..BUCKETS).map(|_| Accumulator::default()).collect();
    let mut per_session = Vec::new();
    for session in sessions {
        let retried = retried_flags(&session.calls);
        let mut own = Accumulator::default();
        let n = session
            .calls
            .iter()
            .filter(|c| c.interface.is_work())
            .count();
        let mut i = 0;
        for (call, &was_retried) in session.calls.iter().zip(&retried) {
            total.add(call, was_retried);
            own.add(call, was_retried);
            if call.interface.is_work() {
                buckets[i * BUCKETS / n].add(call, was_retried);
                i += 1;
            }
        }
        per_session.push(SessionReport {
            id: session.id.clone(),
            parent: session.parent.clone(),
            breakdown: own.finish(),
        });
    }
    let by_position = buckets
        .into_iter()
        .enumerate()
        .map(|(decile, acc)| {
            let b = acc.finish();
            PositionBucket {
                decile,
                calls_by_interface: b.interfaces.iter().map(|(k, v)| (*k, v.calls)).collect(),
                adoption: b.adoption,
            }
        })
        .collect();
    Section {
        inputs,
        sessions: sessions.len(),
        total: total.finish(),
        by_position,
        per_session,
    }
}

#[derive(Default)]
struct Accumulator {
    breakdown: Breakdown,
}

impl Accumulator {
    fn add(&mut self, call: &Call, retried: bool) {
        let b = &mut self.breakdown;
        b.calls += 1;
        if call.interface.is_work() {
            b.work_calls += 1;
        } else {
            b.discovery_calls += 1;
        }
        let name = call.interface.as_str();
        let s = b.interfaces.entry(name).or_default();
        s.calls += 1;
        *s.by_tool.entry(call.tool.clone()).or_default() += 1;
        match &call.outcome {
            Outcome::Ok => {}
            Outcome::Error(reason) => {
                s.errors += 1;
                *s.errors_by_reason.entry(reason.clone()).or_default() += 1;
                if let Some(token) = &call.refused_token {
                    *s.refused_tokens
                        .entry(reason.clone())
                        .or_default()
                        .entry(token.clone())
                        .or_default() += 1;
                }
            }
            Outcome::NoResult => s.no_result += 1,
        }
        if retried {
            s.retried_after_error += 1;
        }
        if !call.stages.is_empty() {
            s.pipelines.count += 1;
            *s.pipelines.by_length.entry(call.stages.len()).or_default() += 1;
            for stage in &call.stages {
                *s.pipelines.commands.entry(stage.clone()).or_default() += 1;
            }
        }
        if call.write {
            s.writes += 1;
            b.adoption.writes += 1;
            if call.interface.is_ours() {
                b.adoption.ours += 1;
            }
            *b.adoption.writes_by_interface.entry(name).or_default() += 1;
        }
    }

    fn finish(mut self) -> Breakdown {
        for s in self.breakdown.interfaces.values_mut() {
            s.error_rate = ratio(s.errors, s.calls - s.no_result);
        }
        let a = &mut self.breakdown.adoption;
        a.share = ratio(a.ours, a.writes);
        self.breakdown
    }
}

/// `part / whole` rounded to 4 places, or none when there is no whole.
fn ratio(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| (part as f64 / whole as f64 * 10_000.0).round() / 10_000.0)
}

/// The share of writes in one position bucket made through `interface`, for the curves.
pub fn interface_share(bucket: &PositionBucket, interface: Interface) -> Option<f64> {
    let writes = bucket.adoption.writes;
    let by = bucket
        .adoption
        .writes_by_interface
        .get(interface.as_str())
        .copied()
        .unwrap_or(0);
    ratio(by, writes)
}
