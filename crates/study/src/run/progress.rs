//! The progress line printed on stderr as each trial finishes: how far the run is, how far
//! each arm is (so an arm that stalls is seen), and a rough time left.

use std::time::Duration;

use crate::record::{End, ProcessEnd, TrialRecord};

/// Counts for the progress lines.
#[derive(Debug)]
pub struct Progress {
    total: usize,
    done: usize,
    /// (arm, done, total), in the study file's order.
    arms: Vec<(String, usize, usize)>,
    jobs: usize,
    /// Seconds of the trials finished in this run (earlier runs' times are not comparable:
    /// another machine, another load).
    secs: f64,
    timed: usize,
}

impl Progress {
    /// Progress of a run of `total` trials, `arms` giving each arm's (name, recorded, total).
    pub fn new(total: usize, arms: Vec<(String, usize, usize)>, jobs: usize) -> Progress {
        let done = arms.iter().map(|a| a.1).sum();
        Progress {
            total,
            done,
            arms,
            jobs: jobs.max(1),
            secs: 0.0,
            timed: 0,
        }
    }

    /// Trials recorded so far.
    pub fn done(&self) -> usize {
        self.done
    }

    /// Counts `record` (which took `took`) and returns its line.
    pub fn finished(&mut self, record: &TrialRecord, took: Duration) -> String {
        self.done += 1;
        self.secs += took.as_secs_f64();
        self.timed += 1;
        if let Some(arm) = self.arms.iter_mut().find(|a| a.0 == record.arm) {
            arm.1 += 1;
        }
        let width = self.total.to_string().len();
        let arms: Vec<String> = self
            .arms
            .iter()
            .map(|(name, done, total)| format!("{name} {done}/{total}"))
            .collect();
        let remaining = self.total - self.done;
        let left = if remaining == 0 {
            "all done".to_string()
        } else {
            let mean = self.secs / self.timed as f64;
            format!(
                "~{} left",
                duration(mean * remaining as f64 / self.jobs as f64)
            )
        };
        format!(
            "[{:>width$}/{}] {}: {} ({:.1} s) | done per arm: {} | {left}",
            self.done,
            self.total,
            record.id,
            outcome(record),
            took.as_secs_f64(),
            arms.join(", ")
        )
    }
}

/// "success", or "not done" with what went wrong beyond the verifier's verdict.
fn outcome(record: &TrialRecord) -> String {
    let mut notes = Vec::new();
    match record.agent.end {
        End::Exited if record.agent.code == Some(0) => {}
        _ => notes.push(format!("agent {}", ended(&record.agent))),
    }
    match record.verify.end {
        End::Exited => {}
        _ => notes.push(format!("verifier {}", ended(&record.verify))),
    }
    let status = if record.success {
        "success"
    } else {
        "not done"
    };
    if notes.is_empty() {
        status.to_string()
    } else {
        format!("{status}, {}", notes.join(", "))
    }
}

fn ended(p: &ProcessEnd) -> String {
    match p.end {
        End::Exited => format!("exited {}", p.code.unwrap_or(-1)),
        End::KilledAtLimit => "killed at its time limit".into(),
        End::Signaled => format!("died of signal {}", p.signal.unwrap_or(0)),
        End::FailedToStart => format!(
            "failed to start ({})",
            p.error.as_deref().unwrap_or("unknown error")
        ),
    }
}

/// `12s`, `2m10s`, `1h05m`.
fn duration(secs: f64) -> String {
    let s = secs.round().max(0.0) as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(arm: &str, success: bool, agent: End) -> TrialRecord {
        let p = |end| ProcessEnd {
            end,
            code: (end == End::Exited).then_some(0),
            signal: None,
            secs: 1.0,
            error: None,
        };
        TrialRecord {
            id: format!("000-t-{arm}"),
            task: "t".into(),
            arm: arm.into(),
            harness: String::new(),
            offered: None,
            rep: 0,
            seed: 1,
            order: 0,
            started: "2026-01-01T00:00:00Z".into(),
            agent: p(agent),
            verify: p(End::Exited),
            success,
        }
    }

    #[test]
    fn line_counts_arms_and_estimates_time_left() {
        let mut p = Progress::new(12, vec![("a".into(), 1, 6), ("b".into(), 0, 6)], 2);
        let line = p.finished(&record("b", true, End::Exited), Duration::from_secs(20));
        assert_eq!(
            line,
            "[ 2/12] 000-t-b: success (20.0 s) | done per arm: a 1/6, b 1/6 | ~1m40s left"
        );
        let line = p.finished(
            &record("a", false, End::KilledAtLimit),
            Duration::from_secs(20),
        );
        assert!(
            line.contains("not done, agent killed at its time limit"),
            "{line}"
        );
        assert_eq!(duration(3725.0), "1h02m");
    }
}
