//! The one shape every shelpa failure takes on the wire.
//!
//! shelpa's clients parse `{"error":{"code","reason","detail","suggestion"}}`, so refusals from
//! the policy, write-gate refusals from tee and run failures from the executor are all turned
//! into a [`Failure`] at the edge, in one place.

use serde_json::{json, Map, Value};

use super::plan::Refusal;

/// `code` of a refusal: nothing ran.
pub const GUARD_VIOLATION: &str = "GUARD_VIOLATION";
/// `code` of a run that started and failed.
pub const EXEC_FAILED: &str = "EXEC_FAILED";
/// `code` of a malformed tool call (wrong argument types, unknown arguments).
pub const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";

/// A failed call as shelpa reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// `GUARD_VIOLATION`, `EXEC_FAILED` or `INVALID_ARGUMENT`.
    pub code: &'static str,
    /// The specific reason (`DISALLOWED_CMD`, `NONZERO_EXIT`, …).
    pub reason: String,
    /// What was wrong.
    pub detail: String,
    /// What to do instead.
    pub suggestion: String,
    /// The offending token, when there is one (logged, and shown to the model).
    pub token: Option<String>,
    /// Extra fields inside the `error` object (`exit_code`, `stderr`, …).
    pub extra: Map<String, Value>,
    /// Extra top-level fields beside `error` (`stdout` and `meta` as far as the run got).
    pub partial: Map<String, Value>,
    /// The words the design records give this failure, when only the caller can tell which
    /// recorded case it is (a refused `cwd`): the original surface sends them as `detail`
    /// (see `crate::recorded`).
    pub recorded_detail: Option<String>,
}

impl Failure {
    /// A failure with no extra fields.
    pub fn new(
        code: &'static str,
        reason: impl Into<String>,
        detail: impl Into<String>,
        suggestion: impl Into<String>,
    ) -> Self {
        Failure {
            code,
            reason: reason.into(),
            detail: detail.into(),
            suggestion: suggestion.into(),
            token: None,
            extra: Map::new(),
            partial: Map::new(),
            recorded_detail: None,
        }
    }

    /// The same failure, naming the offending token.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The wire object in this reconstruction's words (the modern surface's; the original
    /// surface's is `crate::recorded::wire`).
    pub fn to_json(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), json!(self.code));
        error.insert("reason".into(), json!(self.reason));
        error.insert("detail".into(), json!(self.detail));
        error.insert("suggestion".into(), json!(self.suggestion));
        if let Some(token) = &self.token {
            error.insert("token".into(), json!(token));
        }
        for (k, v) in &self.extra {
            error.insert(k.clone(), v.clone());
        }
        let mut out = Map::new();
        out.insert("error".into(), Value::Object(error));
        for (k, v) in &self.partial {
            out.insert(k.clone(), v.clone());
        }
        Value::Object(out)
    }
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        Failure::new(GUARD_VIOLATION, r.reason.as_str(), r.detail, r.suggestion).with_token(r.token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::GuardReason;

    #[test]
    fn a_refusal_keeps_the_shelpa_shape() {
        let r = Refusal::new(
            GuardReason::DisallowedCmd,
            "rm",
            "'rm' is not allowed.",
            "Use tee to write files instead.",
        );
        let expected = r.to_json();
        assert_eq!(Failure::from(r).to_json(), expected);
    }
}
