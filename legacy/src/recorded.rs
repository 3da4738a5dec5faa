//! The error object as the original surface sends it: the shape and the words the design records
//! give it.
//!
//! Why it exists: what a model gets back from a refused call is part of the interface under
//! study, and the records quote it (record 000, lines 246-253: the error object; record 001,
//! lines 63, 75 and 88-89: the messages of the cwd and path fixes and of the approval gate).
//! The layers below say in this reconstruction's words what was wrong (the modern surface sends
//! those unchanged); this module is the one place that turns a [`Failure`] into the recorded
//! wording, at the edge, so behaviour stays the same in both surfaces and only the text differs.
//!
//! - A refusal (`GUARD_VIOLATION`) is the recorded object, exactly `code`, `reason`, `detail`
//!   and `suggestion`: the offending token and the extra fields of this reconstruction stay in
//!   the call log. Fields beside `error` (a session `note`) are kept. Failures the records never
//!   show (`EXEC_FAILED`, `INVALID_ARGUMENT`) keep their extra fields.
//! - A command that is not allowed: `'rm' is not allowed.` with `Use tee to write files
//!   instead.`, and the same kind of one-line suggestion for other commands (RECONSTRUCTED).
//! - The approval gate: `tee would write N bytes, exceeding the 2048-byte threshold. Re-invoke
//!   with confirm_oversize=true to proceed.`
//! - A `cwd` outside the workspace: `cwd must be within workspace root`; any other path outside
//!   it (a stage's operand, a tee target, a `cd`, a write's path): `Path is outside workspace`.
//!
//! The text the model reads, of a result and of a failure alike, lists the keys in the order the
//! records show them (`stdout`, `meta`; `steps`, `tee`; `command`, `output_size`, `truncated`,
//! `execution_time_ms`; `code`, `reason`, `detail`, `suggestion`), then the others in name
//! order: [`text`].

use serde_json::{json, Map, Value};

use crate::failure::{Failure, GUARD_VIOLATION};
use crate::surface::{ShelpaTools, WRITE};

/// The detail of a refused `cwd` (001, line 63).
pub(crate) const CWD_ESCAPE: &str = "cwd must be within workspace root";

/// The detail of any other path outside the workspace (001, line 75).
pub(crate) const PATH_ESCAPE: &str = "Path is outside workspace";

/// The suggestion the records give for `rm` (000, line 251).
const USE_TEE: &str = "Use tee to write files instead.";

/// `failure` as the original surface sends it, for a server serving `set` whose approval
/// threshold is `threshold` bytes.
pub(crate) fn wire(failure: &Failure, set: ShelpaTools, threshold: u64) -> Value {
    let token = failure.token.as_deref().unwrap_or_default();
    let detail = failure
        .recorded_detail
        .clone()
        .or_else(|| recorded_detail(failure, token, threshold))
        .unwrap_or_else(|| failure.detail.clone());
    let suggestion = match failure.reason.as_str() {
        "DISALLOWED_CMD" if failure.detail == not_allowed(token) => {
            disallowed_suggestion(token, set).to_string()
        }
        "APPROVAL_REQUIRED" => {
            "Check that this much content is intended before re-invoking.".to_string()
        }
        _ => failure.suggestion.clone(),
    };
    let mut error = Map::new();
    error.insert("code".into(), json!(failure.code));
    error.insert("reason".into(), json!(failure.reason));
    error.insert("detail".into(), json!(detail));
    error.insert("suggestion".into(), json!(suggestion));
    if failure.code != GUARD_VIOLATION {
        if let Some(token) = &failure.token {
            error.insert("token".into(), json!(token));
        }
        for (k, v) in &failure.extra {
            error.insert(k.clone(), v.clone());
        }
    }
    let mut out = Map::new();
    out.insert("error".into(), Value::Object(error));
    for (k, v) in &failure.partial {
        out.insert(k.clone(), v.clone());
    }
    Value::Object(out)
}

/// The JSON text of a result or error object with the keys in the records' order (see the module
/// documentation), compact as `serde_json` writes it.
pub(crate) fn text(value: &Value) -> String {
    let mut out = String::new();
    write_ordered(value, &[ERROR, STDOUT, META], &mut out);
    out
}

const ERROR: &str = "error";
const STDOUT: &str = "stdout";
const META: &str = "meta";
const STEPS: &str = "steps";

/// The order the records give the keys of an object found under `key`.
fn order_under(key: &str) -> &'static [&'static str] {
    match key {
        ERROR => &["code", "reason", "detail", "suggestion"],
        META => &[STEPS, "tee"],
        STEPS => &["command", "output_size", "truncated", "execution_time_ms"],
        _ => &[],
    }
}

fn write_ordered(value: &Value, order: &[&str], out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            // Recorded keys first, in their order; the rest in name order (the map's own order).
            keys.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(order.len()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_ordered(&map[key], order_under(key), out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // The items of an array are ordered as the array's key says (`steps`).
                write_ordered(item, order, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The policy's detail for a command that is not on the whitelist, which is the recorded one.
fn not_allowed(name: &str) -> String {
    format!("'{name}' is not allowed.")
}

/// The recorded detail that replaces this reconstruction's, when the records have one.
fn recorded_detail(failure: &Failure, token: &str, threshold: u64) -> Option<String> {
    match failure.reason.as_str() {
        "APPROVAL_REQUIRED" => {
            let size = failure.extra.get("size").and_then(Value::as_u64)?;
            Some(format!(
                "tee would write {size} bytes, exceeding the {threshold}-byte threshold. \
                 Re-invoke with confirm_oversize=true to proceed."
            ))
        }
        // Every layer names an escape by the path as typed: the guard's words, the policy's, the
        // session's and tee's all start so. Other PATH_ESCAPE refusals (a protected directory read,
        // a reserved name, a symlink loop) have their own causes and keep their words.
        "PATH_ESCAPE" if !token.is_empty() => {
            let outside = [
                format!("'{token}' is outside the workspace"),
                format!("'{token}' goes through a symlink that points outside the workspace"),
            ];
            outside
                .iter()
                .any(|p| failure.detail.starts_with(p.as_str()))
                .then(|| PATH_ESCAPE.to_string())
        }
        _ => None,
    }
}

/// The one-line suggestion for a command that is not allowed, in the words the records give for
/// `rm` (writing commands) and, RECONSTRUCTED, in the same form for the others.
fn disallowed_suggestion(name: &str, set: ShelpaTools) -> &'static str {
    match name {
        "rm" | "mv" | "cp" | "touch" | "mkdir" | "chmod" | "ln" | "truncate" | "dd" => USE_TEE,
        "echo" | "printf" if set.names().contains(&WRITE) => {
            "Use shelpa_write to write files instead."
        }
        "echo" | "printf" => USE_TEE,
        "cat" | "less" | "more" => "Use head or sed -n to read files instead.",
        "grep" | "egrep" | "fgrep" | "ag" => "Use rg to search instead.",
        "find" | "locate" => "Use fd to find files instead.",
        "cut" => "Use awk to pick fields instead.",
        "uniq" => "Use sort -u instead.",
        _ => "Use the allowed pipeline commands instead.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionError;
    use crate::tee::TeeError;
    use workspace::guard::GuardError;

    fn detail_of(f: &Failure) -> String {
        wire(f, ShelpaTools::Help, 2048)["error"]["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn every_layers_escape_is_named_in_the_recorded_words() {
        let token = "../x";
        let escapes = [
            crate::error::session_failure(SessionError::Escape(
                token.into(),
                GuardError::Outside(token.into()),
            )),
            crate::error::guard_failure(&GuardError::Outside(token.into()), token),
            crate::error::guard_failure(&GuardError::SymlinkEscape(token.into()), token),
            TeeError::Escape(token.into()).to_failure(),
        ];
        for f in escapes {
            assert_eq!(f.reason, "PATH_ESCAPE", "{f:?}");
            assert_eq!(detail_of(&f), PATH_ESCAPE, "{f:?}");
        }
    }

    #[test]
    fn a_refusal_has_the_four_recorded_keys_and_nothing_else() {
        let mut f = TeeError::ApprovalRequired {
            size: 4096,
            threshold: 2048,
            path: "big.txt".into(),
        }
        .to_failure();
        f.partial.insert("note".into(), json!("moved"));
        let v = wire(&f, ShelpaTools::Help, 2048);
        let mut keys: Vec<&String> = v["error"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        keys.sort();
        assert_eq!(keys, ["code", "detail", "reason", "suggestion"]);
        assert_eq!(v["note"], "moved");
        assert_eq!(
            v["error"]["detail"],
            "tee would write 4096 bytes, exceeding the 2048-byte threshold. Re-invoke with confirm_oversize=true to proceed."
        );
    }

    #[test]
    fn the_text_lists_the_keys_in_the_records_order() {
        let value = json!({
            "stdout": "a\n",
            "note": "n",
            "meta": {"tee": null, "steps": [
                {"exit_code": 0, "truncated": false, "execution_time_ms": 1, "output_size": 2, "command": "ls"}
            ]}
        });
        assert_eq!(
            text(&value),
            r#"{"stdout":"a\n","meta":{"steps":[{"command":"ls","output_size":2,"truncated":false,"execution_time_ms":1,"exit_code":0}],"tee":null},"note":"n"}"#
        );
        let error =
            json!({"error": {"suggestion": "s", "detail": "d", "reason": "r", "code": "c"}});
        assert_eq!(
            text(&error),
            r#"{"error":{"code":"c","reason":"r","detail":"d","suggestion":"s"}}"#
        );
        // The same value, whatever the order: only the text's order differs.
        let parsed: Value = serde_json::from_str(&text(&value)).expect("valid JSON");
        assert_eq!(parsed, value);
    }

    #[test]
    fn a_recorded_detail_set_by_the_caller_wins() {
        let mut f = crate::error::session_failure(SessionError::Escape(
            "..".into(),
            GuardError::Outside("..".into()),
        ));
        f.recorded_detail = Some(CWD_ESCAPE.into());
        assert_eq!(detail_of(&f), CWD_ESCAPE);
    }

    #[test]
    fn other_path_refusals_keep_their_own_words() {
        let f = crate::error::guard_failure(&GuardError::SymlinkLoop("a".into()), "a");
        assert_eq!(detail_of(&f), f.detail);
    }
}
