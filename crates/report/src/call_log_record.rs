//! The one call-log line: the record the server writes for every tool call and the report reads
//! back.
//!
//! Both sides use this type, so a field added, renamed or moved here changes the writer and the
//! reader together; there is no second list of keys to keep in step. It lives in the report crate
//! because the report is the log's reader and the binary, which writes the log, already depends on
//! it: neither needs a dependency pointing up the crate graph.
//!
//! The on-disk format is the serde serialisation of [`CallLogRecord`], one JSON object per line:
//! the keys in the order of the struct's fields, the toolset's own facts ([`CallLogRecord::extra`])
//! in place of the flattened field, and `args` last and only when arguments are logged.
//!
//! Strings are [`Cow`]s so that the writer, which builds one record per call on the server's hot
//! path, borrows everything it can instead of copying it; the reader gets owned strings.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One call as the call log records it.
///
/// Only `tool` and `outcome` are required to read a line: a line without them is not one the
/// server wrote. The other fields default when absent, so the report still counts lines from a
/// hand-made or trimmed log; a field of the wrong type makes the line malformed.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CallLogRecord<'a> {
    /// When the call finished, RFC 3339 in UTC with milliseconds.
    #[serde(default)]
    pub ts: Cow<'a, str>,
    /// The server process that served the call (the report's unit of a session).
    #[serde(default)]
    pub session: Cow<'a, str>,
    /// The toolset's mode name (`filesystem`, `legacy-pipe`, `legacy-pipe+filesystem`…).
    #[serde(default)]
    pub mode: Cow<'a, str>,
    /// The client as it introduced itself.
    #[serde(default)]
    pub client: RecordedClient<'a>,
    /// The protocol revision the call was served under.
    #[serde(default)]
    pub protocol: Cow<'a, str>,
    /// The tool called, by the name the client used.
    pub tool: Cow<'a, str>,
    /// Whether the call succeeded.
    pub outcome: CallOutcome,
    /// Why it failed (`PathEscape`, `DISALLOWED_CMD`…); `null` when it succeeded.
    #[serde(default)]
    pub error_kind: Option<Cow<'a, str>>,
    /// Wall-clock time of the call.
    #[serde(default)]
    pub duration_ms: u64,
    /// Size of the arguments as JSON.
    #[serde(default)]
    pub input_bytes: usize,
    /// Size of the result text.
    #[serde(default)]
    pub output_bytes: usize,
    /// Facts the toolset adds (pipe `stages`, `stage_count`, the refused `token`…), written as
    /// top-level keys of the line; reading gathers every key not named above into it.
    #[serde(flatten)]
    pub extra: Cow<'a, Map<String, Value>>,
    /// The call's arguments, only with `--call-log-args` (or a note of their size when too big).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Cow<'a, Map<String, Value>>>,
}

/// The client's name and version as a line records them (`null` when the client gave none).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct RecordedClient<'a> {
    /// The client's name.
    pub name: Option<Cow<'a, str>>,
    /// The client's version.
    pub version: Option<Cow<'a, str>>,
}

/// How a call ended, as the `outcome` key spells it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CallOutcome {
    /// `"ok"`: the tool returned a result.
    Ok,
    /// `"error"`: the tool returned an error result (`isError: true`).
    Error,
}

impl CallLogRecord<'_> {
    /// A line of the log, without its newline, parsed; `None` for anything that is not a record
    /// (not JSON, not an object, no string `tool`, an `outcome` other than `ok` or `error`).
    pub fn parse(line: &[u8]) -> Option<CallLogRecord<'static>> {
        serde_json::from_slice(line).ok()
    }

    /// The pipe stages the toolset recorded (its `stages` fact), empty when there are none.
    pub fn stages(&self) -> Vec<String> {
        self.extra
            .get("stages")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The token a refusal named (its `token` fact), if any.
    pub fn refused_token(&self) -> Option<&str> {
        self.extra.get("token").and_then(Value::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line as the fixtures and the server spell it, every field present.
    const LINE: &str = r#"{"ts":"2026-11-30T09:00:53.000Z","session":"s-1","mode":"legacy-pipe","client":{"name":"claude-code","version":null},"protocol":"2025-11-25","tool":"shelpa_pipe","outcome":"error","error_kind":"DISALLOWED_OPTION","duration_ms":3,"input_bytes":120,"output_bytes":512,"stage_count":1,"stages":["sed"],"token":"-i","args":{"command":"sed -i s/a/b/ f"}}"#;

    #[test]
    fn a_line_reads_into_the_record_and_writes_back_byte_for_byte() {
        let record = CallLogRecord::parse(LINE.as_bytes()).expect("a record");
        assert_eq!(record.tool, "shelpa_pipe");
        assert_eq!(record.outcome, CallOutcome::Error);
        assert_eq!(record.error_kind.as_deref(), Some("DISALLOWED_OPTION"));
        assert_eq!(record.client.name.as_deref(), Some("claude-code"));
        assert_eq!(record.client.version, None);
        assert_eq!(record.stages(), ["sed"]);
        assert_eq!(record.refused_token(), Some("-i"));
        assert_eq!(
            record.extra.len(),
            3,
            "only the toolset's facts: {record:?}"
        );
        assert!(record.args.is_some());
        let written = serde_json::to_string(&record).expect("serialise");
        assert_eq!(written, LINE);
    }

    #[test]
    fn without_arguments_the_args_key_is_left_out() {
        let mut record = CallLogRecord::parse(LINE.as_bytes()).expect("a record");
        record.args = None;
        let written = serde_json::to_string(&record).expect("serialise");
        assert!(!written.contains("\"args\""), "{written}");
        assert!(written.ends_with(r#""token":"-i"}"#), "{written}");
    }

    #[test]
    fn lines_the_server_did_not_write_are_not_records() {
        for bad in [
            "{not json",
            "[1,2]",
            r#"{"outcome":"ok"}"#,
            r#"{"tool":7,"outcome":"ok"}"#,
            r#"{"tool":"read_text_file"}"#,
            r#"{"tool":"read_text_file","outcome":"weird"}"#,
            r#"{"tool":"read_text_file","outcome":"ok","duration_ms":"slow"}"#,
        ] {
            assert_eq!(CallLogRecord::parse(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn a_trimmed_line_still_reads_with_defaults() {
        let record =
            CallLogRecord::parse(br#"{"tool":"read_text_file","outcome":"ok"}"#).expect("record");
        assert_eq!(record.session, "");
        assert_eq!(record.error_kind, None);
        assert!(record.extra.is_empty() && record.args.is_none());
    }
}
