//! Telling a retry from a new call.
//!
//! A failed call counts as *retried* when the very next call of the same session is the same
//! tool with similar input:
//! - both inputs name a file (`file_path`, `path` or `notebook_path`): the same file;
//! - otherwise both carry a `command` line: the same stage commands in the same order, or
//!   command texts at least [`COMMAND_SIMILARITY`] alike (character diff ratio);
//! - otherwise both have inputs: the inputs are equal;
//! - a call log without `--call-log-args` has no inputs: the same first stage command when both
//!   are pipelines, else the same tool alone (the most the log can tell).

use serde_json::Value;
use similar::TextDiff;

use super::model::{Call, Outcome};

/// How alike two command texts must be (0..1) for the second to count as a retry of the first.
pub const COMMAND_SIMILARITY: f32 = 0.6;

/// The keys that name the file a call acts on.
const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path"];

/// For each call of a session, whether it failed and was retried by the next call.
pub fn retried_flags(calls: &[Call]) -> Vec<bool> {
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            matches!(call.outcome, Outcome::Error(_))
                && calls.get(i + 1).is_some_and(|next| is_retry_of(call, next))
        })
        .collect()
}

fn is_retry_of(failed: &Call, next: &Call) -> bool {
    if failed.tool != next.tool || failed.interface != next.interface {
        return false;
    }
    match (&failed.input, &next.input) {
        (Some(a), Some(b)) => similar_input(a, b, &failed.stages, &next.stages),
        _ => match (failed.stages.first(), next.stages.first()) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        },
    }
}

fn similar_input(a: &Value, b: &Value, stages_a: &[String], stages_b: &[String]) -> bool {
    let path = |v: &Value| {
        PATH_KEYS
            .iter()
            .find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_string))
    };
    if let (Some(pa), Some(pb)) = (path(a), path(b)) {
        return pa == pb;
    }
    let command = |v: &Value| v.get("command").and_then(Value::as_str).map(str::to_string);
    if let (Some(ca), Some(cb)) = (command(a), command(b)) {
        return (!stages_a.is_empty() && stages_a == stages_b)
            || TextDiff::from_chars(ca.as_str(), cb.as_str()).ratio() >= COMMAND_SIMILARITY;
    }
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Interface;
    use serde_json::json;

    fn call(tool: &str, input: Value, ok: bool) -> Call {
        Call {
            tool: tool.into(),
            interface: Interface::Builtin,
            write: false,
            outcome: if ok {
                Outcome::Ok
            } else {
                Outcome::Error("x".into())
            },
            stages: Vec::new(),
            input: Some(input),
            refused_token: None,
        }
    }

    #[test]
    fn same_file_next_is_a_retry_other_file_is_not() {
        let calls = [
            call("Edit", json!({"file_path": "a"}), false),
            call("Edit", json!({"file_path": "a", "x": 1}), true),
            call("Edit", json!({"file_path": "b"}), false),
            call("Edit", json!({"file_path": "c"}), true),
        ];
        assert_eq!(retried_flags(&calls), vec![true, false, false, false]);
    }

    #[test]
    fn a_different_tool_next_is_not_a_retry() {
        let calls = [
            call("Edit", json!({"file_path": "a"}), false),
            call("Write", json!({"file_path": "a"}), true),
        ];
        assert_eq!(retried_flags(&calls), vec![false, false]);
    }
}
