//! Each arm against the baseline arm: the difference of its success rate and of its adoption
//! shares, with an interval and an exact test.

use serde::Serialize;

use super::metrics::ArmNumbers;
use super::stats::{difference, Difference, Rate};

/// The rates compared with the baseline, by the name every output uses.
pub const COMPARED: [&str; 3] = ["success", "write_adoption", "read_adoption"];

/// The rate named `metric` (one of [`COMPARED`]) of an arm.
pub fn compared_rate<'a>(arm: &'a ArmNumbers, metric: &str) -> Option<&'a Rate> {
    match metric {
        "success" => Some(&arm.success),
        "write_adoption" => Some(&arm.write_adoption),
        "read_adoption" => Some(&arm.read_adoption),
        _ => None,
    }
}

/// One arm against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The arm compared.
    pub arm: String,
    /// The baseline arm.
    pub baseline: String,
    /// Success rate: arm − baseline (`null` when either has no trials).
    pub success: Option<Difference>,
    /// Write adoption: arm − baseline (`null` when either made no writes).
    pub write_adoption: Option<Difference>,
    /// Read adoption: arm − baseline (`null` when either made no reads).
    pub read_adoption: Option<Difference>,
}

impl Comparison {
    /// The difference named `metric` (one of [`COMPARED`]).
    pub fn get(&self, metric: &str) -> Option<&Difference> {
        match metric {
            "success" => self.success.as_ref(),
            "write_adoption" => self.write_adoption.as_ref(),
            "read_adoption" => self.read_adoption.as_ref(),
            _ => None,
        }
    }
}

fn diff(arm: &Rate, base: &Rate) -> Option<Difference> {
    difference(arm.count, arm.total, base.count, base.total)
}

/// Compares every arm but the baseline with it, in arm order.
pub fn compare(arms: &[ArmNumbers], baseline: &ArmNumbers) -> Vec<Comparison> {
    arms.iter()
        .filter(|a| a.arm != baseline.arm)
        .map(|a| Comparison {
            arm: a.arm.clone(),
            baseline: baseline.arm.clone(),
            success: diff(&a.success, &baseline.success),
            write_adoption: diff(&a.write_adoption, &baseline.write_adoption),
            read_adoption: diff(&a.read_adoption, &baseline.read_adoption),
        })
        .collect()
}
