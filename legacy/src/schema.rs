//! What shelpa's tools declare and return: their definitions for `tools/list` (the names, from
//! [`crate::surface::TOOLS`], and the texts chosen per surface in [`crate::surface`]) with the
//! output schema every tool shares, and the success object that schema describes, built in one
//! place so a result cannot drift from its declaration. Failures take the shape of
//! [`crate::failure`].

use std::time::Instant;

use serde_json::{json, Value};

use crate::exec::StepMeta;
use crate::surface::{self, ShelpaTools, Surface};
use mcp_core::toolset::ToolDef;

/// The tools of `set` in `surface`'s words (see [`surface::definitions`]); the output schema
/// below is shared by every tool and surface. The recorded definition has no output schema, so in
/// the original surface it carries no prose of this reconstruction: only its shape.
pub(crate) fn definitions(surface: Surface, set: ShelpaTools) -> Vec<ToolDef> {
    let describe = |schema: Value, text: &str| match (surface, schema) {
        (Surface::Modern, Value::Object(mut m)) => {
            m.insert("description".into(), json!(text));
            Value::Object(m)
        }
        (_, other) => other,
    };
    let step = json!({
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "output_size": describe(json!({"type": "integer"}), "bytes the stage wrote to its stdout"),
            "truncated": {"type": "boolean"},
            "execution_time_ms": {"type": "integer"},
            "exit_code": {"type": ["integer", "null"]}
        },
        "required": ["command", "output_size", "truncated", "execution_time_ms", "exit_code"]
    });
    let tee = json!({
        "anyOf": [
            {"type": "null"},
            {"type": "object",
             "properties": {
                "paths": {"type": "array", "items": {"type": "string"}},
                "bytes": {"type": "integer"},
                "mode": {"type": "string", "enum": ["overwrite", "append", "mixed"]},
                "mirror": {"type": "array", "items": {"type": "string"}},
                "truncated": {"type": "boolean"}
             },
             "required": ["paths", "bytes", "mode", "mirror", "truncated"]}
        ]
    });
    let output = json!({
        "type": "object",
        "properties": {
            "stdout": {"type": "string"},
            "stderr": describe(json!({"type": "string"}), "the stages' stderr, when any wrote some"),
            "meta": {
                "type": "object",
                "properties": {"steps": {"type": "array", "items": step}, "tee": tee},
                "required": ["steps", "tee"]
            }
        },
        "required": ["stdout", "meta"]
    });
    surface::definitions(surface, set, &output)
}

/// A step's metadata; `command` is the stage as the caller wrote it (`text`).
pub(crate) fn step_json(meta: &StepMeta, text: &str) -> Value {
    json!({
        "command": text,
        "output_size": meta.output_size,
        "truncated": meta.truncated,
        "execution_time_ms": meta.execution_time_ms,
        "exit_code": meta.exit_code,
    })
}

/// Metadata of a single built-in step (`pwd`, `cd`, `ls`, `shelpa_write`'s tee).
pub(crate) fn builtin_step(
    command: &str,
    output_size: u64,
    truncated: bool,
    started: Instant,
) -> Value {
    json!({
        "command": command,
        "output_size": output_size,
        "truncated": truncated,
        "execution_time_ms": started.elapsed().as_millis() as u64,
        "exit_code": 0,
    })
}

/// A successful call's object: `stdout`, `meta` (its steps and tee report) and `stderr` when any
/// stage wrote some, as the output schema above declares.
pub(crate) fn success(stdout: String, steps: Vec<Value>, tee: Value, stderr: &str) -> Value {
    let mut out = json!({"stdout": stdout, "meta": {"steps": steps, "tee": tee}});
    if !stderr.is_empty() {
        out["stderr"] = json!(stderr);
    }
    out
}
