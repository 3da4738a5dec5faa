//! The bytes of a `tools/call` response, written by hand.
//!
//! Every call ends here, and most of a reply is one string: a file's text. serde_json escapes a
//! string one byte at a time, which was the hottest user-space symbol when a client reads files
//! in a loop; the text is escaped with SIMD kernels instead, and the few fixed fields around it
//! are written directly. Everything that is not the text (the id, structured content) still goes
//! through serde_json, so only the one string takes the fast path.

use serde_json::Value;

use super::protocol::Revision;
use crate::toolset::ToolOutput;

/// The first revision whose `CallToolResult` has `structuredContent`.
const STRUCTURED_SINCE: Revision = Revision::V2025_06_18;

/// Appends the JSON-RPC success response that carries `output` as the result of request `id`.
///
/// `revision` decides whether `structuredContent` is included and, for the stateless revision,
/// adds its `resultType`. The output is one JSON object with no trailing newline.
pub fn write_call_response(out: &mut Vec<u8>, id: &Value, output: &ToolOutput, revision: Revision) {
    // Headroom for the escaped text and the fixed fields, so the text is escaped in place.
    out.reserve(output.text.len() + 160);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    write_value(out, id);
    out.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    json_escape_simd::escape_into(&output.text, out);
    out.extend_from_slice(b"}]");
    if let Some(structured) = &output.structured {
        if revision >= STRUCTURED_SINCE {
            out.extend_from_slice(br#","structuredContent":"#);
            write_value(out, structured);
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

/// Appends `value` as JSON. Writing a `Value` into a `Vec` cannot fail: its keys are strings and
/// its numbers finite, and a `Vec` never refuses bytes.
fn write_value(out: &mut Vec<u8>, value: &Value) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
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
