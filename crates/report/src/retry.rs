//! Telling a retry from a new call.
//!
//! A failed call counts as *retried* when the very next call of the same session is the same
//! tool with similar input:
//! - both inputs name a file (`file_path`, `path` or `notebook_path`): the same file;
//! - otherwise both carry a `command` line (`cmd` for Codex CLI's `exec_command`): the same stage commands in the same order, the same
//!   command text, or command texts at least [`COMMAND_SIMILARITY`] alike;
//! - otherwise both have inputs: the inputs are equal;
//! - a call log without `--call-log-args` has no inputs: the same first stage command when both
//!   are pipelines, else the same tool alone (the most the log can tell).
//!
//! How alike two commands are is the Sørensen–Dice coefficient of their character pairs (twice
//! the pairs they share over the pairs of both), over the first [`COMMAND_HEAD_CHARS`]
//! characters of each: linear in that bounded head, so two commands of any length are compared
//! in bounded time. (A character diff, which this replaced, takes time in the product of the
//! lengths: minutes for two long heredocs.) Whole commands are compared by a digest.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use serde_json::Value;

use super::model::{Call, Outcome};

/// How alike two command texts must be (0..1) for the second to count as a retry of the first.
pub const COMMAND_SIMILARITY: f64 = 0.6;

/// How many characters of a command are kept and compared.
pub const COMMAND_HEAD_CHARS: usize = 4096;

/// The keys that name the file a call acts on.
const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path"];

/// What of a call's arguments tells a retry from a new call: kept in place of the arguments,
/// which may hold whole files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputKey {
    /// A digest of the file the input names (the first of [`PATH_KEYS`] that is a string).
    pub file: Option<u64>,
    /// Its `command` line, when it has one.
    pub command: Option<CommandKey>,
    /// A digest of the whole input.
    pub digest: u64,
}

/// A command line as it is compared: its head and a digest of the whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandKey {
    /// Its first [`COMMAND_HEAD_CHARS`] characters.
    pub head: String,
    /// A digest of the whole text.
    pub digest: u64,
}

impl InputKey {
    /// The key of the arguments `input`.
    pub fn of(input: &Value) -> InputKey {
        let file = PATH_KEYS
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .map(digest_str);
        // Codex CLI's `exec_command` names its command line `cmd`.
        let command = input
            .get("command")
            .or_else(|| input.get("cmd"))
            .and_then(Value::as_str)
            .map(|c| CommandKey {
                head: c.chars().take(COMMAND_HEAD_CHARS).collect(),
                digest: digest_str(c),
            });
        let mut hasher = DigestWriter(std::collections::hash_map::DefaultHasher::new());
        // Writing into a hasher cannot fail; a value serde cannot write would hash as empty.
        let _ = serde_json::to_writer(&mut hasher, input);
        InputKey {
            file,
            command,
            digest: hasher.0.finish(),
        }
    }
}

/// A digest of a string: equal strings always agree, different ones collide with a chance of
/// about 2^-64, which cannot move a figure.
fn digest_str(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// Feeds what serde writes into a hasher, so an input is digested without being written out.
struct DigestWriter(std::collections::hash_map::DefaultHasher);

impl std::io::Write for DigestWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

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

fn similar_input(a: &InputKey, b: &InputKey, stages_a: &[String], stages_b: &[String]) -> bool {
    if let (Some(fa), Some(fb)) = (a.file, b.file) {
        return fa == fb;
    }
    if let (Some(ca), Some(cb)) = (&a.command, &b.command) {
        return (!stages_a.is_empty() && stages_a == stages_b)
            || ca.digest == cb.digest
            || similarity(&ca.head, &cb.head) >= COMMAND_SIMILARITY;
    }
    a.digest == b.digest
}

/// The Sørensen–Dice coefficient of the character pairs of `a` and `b` (each pair counted as
/// often as it occurs): 1 for equal texts, 0 for texts without a pair in common. Linear in the
/// lengths.
pub fn similarity(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let mut counts: HashMap<(char, char), usize> = HashMap::new();
    let mut total = 0usize;
    for pair in pairs(a) {
        *counts.entry(pair).or_default() += 1;
        total += 1;
    }
    let mut shared = 0usize;
    for pair in pairs(b) {
        total += 1;
        if let Some(n) = counts.get_mut(&pair).filter(|n| **n > 0) {
            *n -= 1;
            shared += 1;
        }
    }
    if total == 0 {
        return 0.0;
    }
    (2 * shared) as f64 / total as f64
}

/// The character pairs of `s`, in order (`"abc"`: `ab`, `bc`).
fn pairs(s: &str) -> impl Iterator<Item = (char, char)> + '_ {
    s.chars().zip(s.chars().skip(1))
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
            input: Some(InputKey::of(&input)),
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

    fn bash(command: &str, ok: bool) -> Call {
        call("Bash", json!({ "command": command }), ok)
    }

    #[test]
    fn a_reworded_command_is_a_retry_a_new_one_is_not() {
        let calls = [
            bash("grep -rn TODO src | head -20", false),
            bash("rg -n TODO src | head -20", true),
            bash("cargo build --release", false),
            bash("ls -la /tmp", true),
        ];
        assert_eq!(retried_flags(&calls), vec![true, false, false, false]);
    }

    #[test]
    fn long_commands_are_compared_by_their_head_and_whole() {
        let long = "x".repeat(1_000_000);
        let calls = [
            bash(&long, false),
            bash(&long, false),
            bash(&"y".repeat(1_000_000), true),
        ];
        assert_eq!(retried_flags(&calls), vec![true, false, false]);
        assert!(similarity(&"ab".repeat(3000), &"ba".repeat(3000)) > 0.99);
        assert_eq!(similarity("abc", "xyz"), 0.0);
        assert_eq!(similarity("", "a"), 0.0);
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
