//! The bytes of a `tools/call` response, written by hand.
//!
//! Every call ends here, and most of a reply is one string: a file's text. serde_json escapes a
//! string one byte at a time, which was the hottest user-space symbol when a client reads files
//! in a loop; the text is escaped with SIMD kernels instead, and the few fixed fields around it
//! are written directly. Everything that is not the text (the id, structured content) still goes
//! through serde_json, so only the one string takes the fast path.

use serde_json::Value;

use super::protocol::Revision;
use crate::toolset::{ContentBlock, ToolOutput};

/// The first revision whose `CallToolResult` has `structuredContent`.
const STRUCTURED_SINCE: Revision = Revision::V2025_06_18;

/// The first revision with `audio` content blocks.
const AUDIO_SINCE: Revision = Revision::V2025_03_26;

/// Appends the JSON-RPC success response that carries `output` as the result of request `id`.
///
/// `revision` decides whether `structuredContent` is included and, for the stateless revision,
/// adds its `resultType`. The output is one JSON object with no trailing newline.
pub fn write_call_response(out: &mut Vec<u8>, id: &Value, output: &ToolOutput, revision: Revision) {
    // Headroom for the escaped text and the fixed fields, so the text is escaped in place.
    let blocks: usize = output.blocks.iter().map(|b| b.data_len() + 80).sum();
    // The structured copy of an answer usually carries the same text again (file contents,
    // matches, entries): room for it too, so a large answer is not grown (and copied by
    // `mremap`) halfway through. A guess: a smaller copy only leaves capacity unused.
    let structured = match &output.structured {
        Some(_) if revision >= STRUCTURED_SINCE => output.text.len() + 64,
        _ => 0,
    };
    out.reserve(output.text.len() + blocks + structured + 160);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    write_value(out, id);
    out.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    json_escape_simd::escape_into(&output.text, out);
    out.extend_from_slice(b"}");
    for block in &output.blocks {
        out.push(b',');
        write_block(out, block, revision);
    }
    out.extend_from_slice(b"]");
    if let Some(structured) = &output.structured {
        if revision >= STRUCTURED_SINCE {
            out.extend_from_slice(br#","structuredContent":"#);
            write_structured(out, structured);
        }
    }
    out.extend_from_slice(if output.is_error {
        br#","isError":true"#
    } else {
        br#","isError":false"#
    });
    if revision.is_stateless() {
        out.extend_from_slice(br#","resultType":"complete""#);
    }
    out.extend_from_slice(b"}}");
}

/// Appends one non-text content block. Its data is escaped like the text although base64 needs
/// no escaping: the core does not trust a toolset to have encoded it, and the scan is cheap.
///
/// An audio block for a client whose revision has none becomes a text block that says so:
/// sending it would break that client's schema, and leaving it out silently would look like an
/// answer without content.
fn write_block(out: &mut Vec<u8>, block: &ContentBlock, revision: Revision) {
    let (kind, data, mime_type) = match block {
        ContentBlock::Image { data, mime_type } => ("image", data, mime_type),
        ContentBlock::Audio { mime_type, .. } if revision < AUDIO_SINCE => {
            out.extend_from_slice(br#"{"type":"text","text":"#);
            let note = format!(
                "[{mime_type} audio left out: protocol revision {} has no audio content; \
                 a client on 2025-03-26 or later receives it]",
                revision.as_str()
            );
            json_escape_simd::escape_into(&note, out);
            out.push(b'}');
            return;
        }
        ContentBlock::Audio { data, mime_type } => ("audio", data, mime_type),
    };
    out.extend_from_slice(br#"{"type":""#);
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(br#"","data":"#);
    json_escape_simd::escape_into(data, out);
    out.extend_from_slice(br#","mimeType":"#);
    json_escape_simd::escape_into(mime_type, out);
    out.push(b'}');
}

/// Appends `value` as JSON. Writing a `Value` into a `Vec` cannot fail: its keys are strings and
/// its numbers finite, and a `Vec` never refuses bytes.
fn write_value(out: &mut Vec<u8>, value: &Value) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// One step of [`write_structured`]'s walk: a value still to write, or the punctuation that
/// follows the members of a container.
enum Pending<'a> {
    Value(&'a Value),
    Key(&'a str),
    Byte(u8),
}

/// Appends structured content, escaping its strings with the same SIMD kernels as the text.
///
/// Tools that return file contents (`read_multiple_files`) carry them in the structured content
/// as well as the text, and serde_json's byte-at-a-time escaping of that copy was over a quarter
/// of such a call. The walk keeps its own stack, so no depth of structure recurses; numbers and
/// the other scalars still go through serde_json, so their spelling is exactly serde's.
fn write_structured(out: &mut Vec<u8>, value: &Value) {
    let mut stack = vec![Pending::Value(value)];
    while let Some(step) = stack.pop() {
        match step {
            Pending::Byte(b) => out.push(b),
            Pending::Key(key) => {
                json_escape_simd::escape_into(key, out);
                out.push(b':');
            }
            Pending::Value(Value::String(s)) => json_escape_simd::escape_into(s, out),
            Pending::Value(Value::Array(items)) => {
                out.push(b'[');
                stack.push(Pending::Byte(b']'));
                for (i, item) in items.iter().enumerate().rev() {
                    stack.push(Pending::Value(item));
                    if i > 0 {
                        stack.push(Pending::Byte(b','));
                    }
                }
            }
            Pending::Value(Value::Object(members)) => {
                out.push(b'{');
                stack.push(Pending::Byte(b'}'));
                let members: Vec<_> = members.iter().collect();
                for (i, (key, item)) in members.into_iter().enumerate().rev() {
                    stack.push(Pending::Value(item));
                    stack.push(Pending::Key(key));
                    if i > 0 {
                        stack.push(Pending::Byte(b','));
                    }
                }
            }
            Pending::Value(scalar) => write_value(out, scalar),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Any JSON value: scalars, strings of any characters, and nested arrays and objects.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn structured_content_is_written_as_serde_writes_it(value in any_json()) {
            let mut ours = Vec::new();
            write_structured(&mut ours, &value);
            let theirs = serde_json::to_vec(&value).expect("serialisable");
            prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
        }

        #[test]
        fn any_text_survives(text in any::<String>()) {
            let got = reply(&ToolOutput::text(text.clone()), Revision::V2025_06_18);
            prop_assert_eq!(&got["result"]["content"][0]["text"], &json!(text));
        }
    }

    fn reply(output: &ToolOutput, revision: Revision) -> Value {
        let mut out = Vec::new();
        write_call_response(&mut out, &json!(7), output, revision);
        serde_json::from_slice(&out).expect("the reply is valid JSON")
    }

    #[test]
    fn text_round_trips_through_escaping() {
        let nasty: String =
            (0u8..0x80).map(char::from).collect::<String>() + "\u{2028}\u{2029}é漢🙂\"\\/";
        let got = reply(&ToolOutput::text(nasty.clone()), Revision::V2025_06_18);
        assert_eq!(
            got,
            json!({"jsonrpc": "2.0", "id": 7, "result": {
                "content": [{"type": "text", "text": nasty}], "isError": false}})
        );
    }

    #[test]
    fn structured_content_only_from_2025_06_18() {
        let output = ToolOutput {
            structured: Some(json!({"a": [1, "two"]})),
            is_error: true,
            ..ToolOutput::text("x")
        };
        let new = reply(&output, Revision::V2026_07_28);
        assert_eq!(new["result"]["structuredContent"], json!({"a": [1, "two"]}));
        assert_eq!(new["result"]["isError"], json!(true));
        assert_eq!(new["result"]["resultType"], json!("complete"));
        let old = reply(&output, Revision::V2025_03_26);
        assert!(old["result"].get("structuredContent").is_none());
        assert!(old["result"].get("resultType").is_none());
    }

    #[test]
    fn blocks_follow_the_text_block() {
        let output = ToolOutput::with_blocks(
            "two",
            vec![
                ContentBlock::Image {
                    data: "iVBORw==".into(),
                    mime_type: "image/png".into(),
                },
                ContentBlock::Audio {
                    data: "UklGRg==".into(),
                    mime_type: "audio/wav".into(),
                },
            ],
        );
        let got = reply(&output, Revision::V2025_03_26);
        assert_eq!(
            got["result"]["content"],
            json!([
                {"type": "text", "text": "two"},
                {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            ])
        );
        assert_eq!(got["result"]["isError"], json!(false));
    }

    #[test]
    fn audio_before_2025_03_26_is_a_note_not_a_block_the_client_cannot_read() {
        let output = ToolOutput::with_blocks(
            "a sound",
            vec![ContentBlock::Audio {
                data: "UklGRg==".into(),
                mime_type: "audio/wav".into(),
            }],
        );
        let got = reply(&output, Revision::V2024_11_05);
        let content = got["result"]["content"].as_array().expect("content array");
        assert_eq!(content.len(), 2);
        assert_eq!(content[1]["type"], json!("text"));
        let note = content[1]["text"].as_str().expect("note text");
        assert!(
            note.contains("audio/wav")
                && note.contains("2024-11-05")
                && note.contains("2025-03-26"),
            "{note}"
        );
    }

    #[test]
    fn string_ids_are_escaped() {
        let mut out = Vec::new();
        write_call_response(
            &mut out,
            &json!("a\"b"),
            &ToolOutput::text(""),
            Revision::V2024_11_05,
        );
        let v: Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(v["id"], json!("a\"b"));
    }
}
