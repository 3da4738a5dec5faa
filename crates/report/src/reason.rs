//! Recovering an error's reason from the text a client saw.
//!
//! Transcripts keep only the tool result's text, so the reason is read back from this project's
//! two error shapes: the pipe mode's JSON object (`{"error":{"reason":"PARSE_ERROR",…}}`) and the
//! filesystem mode's kind prefix (`NotFound: …`). Only known kinds are accepted; any other text
//! is `unclassified` rather than a guessed reason.

use serde_json::Value;

/// The filesystem mode's error kinds, as the first word of its error text.
const FILESYSTEM_KINDS: &[&str] = &[
    "PathEscape",
    "NotFound",
    "AlreadyExists",
    "IoError",
    "InvalidArgument",
];

/// The reason given to an error whose text matches neither of this project's shapes.
pub const UNCLASSIFIED: &str = "unclassified";

/// The reason of an error result whose text is `text`.
pub fn reason_from_text(text: &str) -> String {
    let trimmed = text.trim_start();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        if let Some(reason) = value
            .get("error")
            .and_then(|e| e.get("reason"))
            .and_then(Value::as_str)
            .filter(|r| is_reason_code(r))
        {
            return reason.to_string();
        }
    }
    if let Some((kind, _)) = trimmed.split_once(':') {
        if FILESYSTEM_KINDS.contains(&kind) {
            return kind.to_string();
        }
    }
    UNCLASSIFIED.to_string()
}

/// The offending token of a pipe refusal (`{"error":{"token":"-i",…}}`), if the text is one.
/// Cut to [`TOKEN_LIMIT`] characters: it is model-written text and only needs to be recognised.
pub fn token_from_text(text: &str) -> Option<String> {
    let value = serde_json::from_str::<Value>(text.trim_start()).ok()?;
    let token = value.get("error")?.get("token")?.as_str()?;
    Some(clip_token(token))
}

/// The longest refused token the report shows.
pub const TOKEN_LIMIT: usize = 40;

/// Cuts a token to [`TOKEN_LIMIT`] characters, marking the cut.
pub fn clip_token(token: &str) -> String {
    if token.chars().count() > TOKEN_LIMIT {
        format!("{}…", token.chars().take(TOKEN_LIMIT).collect::<String>())
    } else {
        token.to_string()
    }
}

/// Pipe reasons are upper-case codes (`DISALLOWED_CMD`); anything else is not a code we know
/// the shape of, and is not echoed into the report.
fn is_reason_code(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_shapes_and_refuses_to_guess() {
        assert_eq!(
            reason_from_text(r#"{"error":{"code":"GUARD_VIOLATION","reason":"PARSE_ERROR"}}"#),
            "PARSE_ERROR"
        );
        assert_eq!(
            reason_from_text("NotFound: no such text in a.rs"),
            "NotFound"
        );
        assert_eq!(
            reason_from_text("Error: File has not been read yet"),
            UNCLASSIFIED
        );
        assert_eq!(
            reason_from_text(r#"{"error":{"reason":"rm -rf /"}}"#),
            UNCLASSIFIED
        );
    }
}
