//! Taking a command string apart into pipeline stages, the way a shell reader would see it.
//!
//! Transcripts hold the command text the model wrote, not the stages the server parsed, so the
//! report splits it itself: on every `|` outside quotes, honouring backslash escapes. The split
//! is for counting only; it never decides what runs.

/// The stages of the command line a call of a pipe or shell tool carries in `input` under one of
/// `keys` (the pipe tools' and Claude Code's Bash `command`, Codex's `exec_command` `cmd`); empty
/// for every other call, whose writes the tool's name alone decides.
pub fn call_stages(
    interface: crate::classify::Interface,
    input: Option<&serde_json::Value>,
    keys: &[&str],
) -> Vec<String> {
    use crate::classify::Interface;
    match (interface, input) {
        (Interface::Pipe | Interface::Builtin, Some(input)) => keys
            .iter()
            .find_map(|k| input.get(*k).and_then(serde_json::Value::as_str))
            .map(stage_commands)
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The command names of the stages of `command`, in order. Empty stages (from `||` or a trailing
/// `|`) are left out, and leading `NAME=value` environment assignments are skipped.
pub fn stage_commands(command: &str) -> Vec<String> {
    split_unquoted_pipes(command)
        .iter()
        .filter_map(|stage| first_word(stage))
        .collect()
}

fn split_unquoted_pipes(command: &str) -> Vec<String> {
    let mut stages = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in command.chars() {
        if escaped {
            current.push(c);
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '|') => {
                stages.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    stages.push(current);
    stages
}

/// The first word of a stage that is not an environment assignment, unquoted when it can be.
fn first_word(stage: &str) -> Option<String> {
    let words = shell_words::split(stage)
        .unwrap_or_else(|_| stage.split_whitespace().map(str::to_string).collect());
    words.into_iter().find(|w| !is_assignment(w))
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::stage_commands;

    #[test]
    fn splits_only_on_unquoted_pipes() {
        assert_eq!(
            stage_commands(r#"tail -n 100 app.log | rg 'a|b' | awk "{print \$3}" | sort -u"#),
            vec!["tail", "rg", "awk", "sort"]
        );
    }

    #[test]
    fn escaped_pipe_is_not_a_stage_break() {
        assert_eq!(stage_commands(r"echo a\|b | wc -l"), vec!["echo", "wc"]);
    }

    #[test]
    fn unbalanced_quotes_still_yield_the_first_words() {
        assert_eq!(stage_commands("cat a | rg 'oops"), vec!["cat", "rg"]);
    }

    #[test]
    fn assignments_and_empty_stages_are_skipped() {
        assert_eq!(
            stage_commands("LC_ALL=C sort x || | head"),
            vec!["sort", "head"]
        );
    }
}
