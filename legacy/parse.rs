//! TEMPORARY STAND-IN (branch pipeexec): splits a command on ` | ` and each stage with
//! shell-words, with no checks. Replaced wholesale by the real parser at merge.

use super::plan::{GuardReason, Refusal, Stage, Word};

/// Splits `command` into stages of words.
pub fn parse(command: &str) -> Result<Vec<Stage>, Refusal> {
    command
        .split(" | ")
        .map(|stage| {
            let words = shell_words::split(stage).map_err(|e| {
                Refusal::new(
                    GuardReason::ParseError,
                    stage,
                    format!("cannot parse '{stage}': {e}."),
                    "Balance the quotes.",
                )
            })?;
            if words.is_empty() {
                return Err(Refusal::new(
                    GuardReason::ParseError,
                    command,
                    "empty stage.",
                    "Remove the extra '|'.",
                ));
            }
            Ok(Stage {
                words: words
                    .into_iter()
                    .map(|text| Word {
                        text,
                        quoted: false,
                        glob_chars: Vec::new(),
                    })
                    .collect(),
            })
        })
        .collect()
}
