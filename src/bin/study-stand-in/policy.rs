//! The policy file: per arm, the known probabilities the stand-in draws its choices from.
//!
//! ```toml
//! [arm.filesystem]
//! ours_read = 0.9    # per read step: through the server's tools (else built-in)
//! ours_write = 0.7   # per write, edit or rename step: likewise
//! pipe = 0.5         # when both the pipe and the filesystem tools are served: share of "ours" steps on the pipe tools
//! fail = 0.1         # per trial: give up before the last step
//! hang = 0.05        # per trial: sleep forever before some step
//! error = 0.2        # per call through the server: send a wrong call first, then the right one
//! ```
//! Every key is optional (0, and 0.5 for `pipe`); an unknown key is an error, so a typo cannot
//! silently leave a probability at 0.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::StandInError;
use crate::input::read_text;

/// The largest policy file read.
const MAX_POLICY_BYTES: u64 = 1 << 20;

/// What the stand-in does in one arm: every probability it draws from.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmPolicy {
    /// Per read step: the probability it goes through the server's tools.
    #[serde(default)]
    pub ours_read: f64,
    /// Per write, edit or rename step: the probability it goes through the server's tools.
    #[serde(default)]
    pub ours_write: f64,
    /// When the pipe and the filesystem tools are both served: the probability that a step
    /// going through the server uses the pipe tools rather than the filesystem tools.
    #[serde(default = "half")]
    pub pipe: f64,
    /// Per trial: the probability of giving up before the last step.
    #[serde(default)]
    pub fail: f64,
    /// Per trial: the probability of hanging (sleeping forever) before some step.
    #[serde(default)]
    pub hang: f64,
    /// Per call through the server: the probability of sending a wrong call first.
    #[serde(default)]
    pub error: f64,
}

fn half() -> f64 {
    0.5
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    arm: BTreeMap<String, ArmPolicy>,
}

impl ArmPolicy {
    /// The policy of `arm` in the file `path`.
    pub fn load(path: &Path, arm: &str) -> Result<Self, StandInError> {
        let invalid = |message: String| StandInError::Invalid {
            what: "policy",
            path: path.to_path_buf(),
            message,
        };
        let text = read_text(path, "policy", MAX_POLICY_BYTES)?;
        let file: PolicyFile = toml::from_str(&text).map_err(|e| {
            invalid(format!(
                "{}; write one table per arm: [arm.NAME] with ours_read, ours_write, pipe, fail, hang, error",
                e.message()
            ))
        })?;
        let names: Vec<&str> = file.arm.keys().map(String::as_str).collect();
        let policy = file.arm.get(arm).cloned().ok_or_else(|| {
            invalid(format!(
                "has no [arm.{arm}] (it has: {}); add a table for this arm",
                names.join(", ")
            ))
        })?;
        for (key, p) in policy.fields() {
            if !(0.0..=1.0).contains(&p) {
                return Err(invalid(format!(
                    "[arm.{arm}] {key} = {p} is not a probability; give a number from 0 to 1"
                )));
            }
        }
        Ok(policy)
    }

    fn fields(&self) -> [(&'static str, f64); 6] {
        [
            ("ours_read", self.ours_read),
            ("ours_write", self.ours_write),
            ("pipe", self.pipe),
            ("fail", self.fail),
            ("hang", self.hang),
            ("error", self.error),
        ]
    }
}
