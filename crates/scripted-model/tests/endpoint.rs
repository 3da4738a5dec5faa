//! The endpoint over a real socket, as a harness reaches it: a streamed Messages API turn, a
//! Responses API turn on the same kept-alive connection, a token count and a side request, and
//! the records they leave; Gemini API turns, streamed and whole; and the binary, which prints its URL and stops when its stdin closes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use scripted_model::record::Kind;
use scripted_model::{Script, ScriptedModel, Step, ToolRef};
use serde_json::{json, Value};

fn script() -> Script {
    Script {
        name: "one-read".into(),
        when: Some("marker-7".into()),
        steps: vec![
            Step::Call {
                tool: ToolRef::mcp("fs", "read_text_file"),
                args: json!({"path": "a.txt"}),
            },
            Step::Finish {
                text: "finished".into(),
            },
        ],
    }
}

/// Sends one request on `stream` and reads the whole answer (its length is in its head).
fn exchange(stream: &mut TcpStream, path: &str, body: &Value) -> (u16, String) {
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let code = status.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut len = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut answer = vec![0; len];
    reader.read_exact(&mut answer).unwrap();
    (code, String::from_utf8(answer).unwrap())
}

#[test]
fn both_apis_are_answered_from_the_script_on_one_connection_and_recorded() {
    let model = ScriptedModel::start(vec![script()]).unwrap();
    let addr = model.base_url().trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();

    let anthropic = json!({
        "model": "m", "stream": true,
        "tools": [{"name": "mcp__fs__read_text_file"}],
        "messages": [{"role": "user", "content": "do marker-7"}]
    });
    let (code, sse) = exchange(&mut stream, "/v1/messages?beta=true", &anthropic);
    assert_eq!(code, 200);
    assert!(sse.contains(r#""name":"mcp__fs__read_text_file""#), "{sse}");
    assert!(sse.contains("event: message_stop"), "{sse}");

    let openai = json!({
        "model": "m", "stream": true,
        "tools": [{"type": "namespace", "name": "mcp__fs", "tools": [{"type": "function", "name": "read_text_file"}]}],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "marker-7"}]},
            {"type": "function_call", "name": "read_text_file", "namespace": "mcp__fs", "arguments": "{\"path\":\"a.txt\"}", "call_id": "c9"},
            {"type": "function_call_output", "call_id": "c9", "output": "the text"}
        ]
    });
    let (code, sse) = exchange(&mut stream, "/v1/responses", &openai);
    assert_eq!(code, 200);
    assert!(sse.contains(r#""text":"finished""#), "{sse}");

    let (code, count) = exchange(
        &mut stream,
        "/v1/messages/count_tokens",
        &json!({"messages": []}),
    );
    assert_eq!(code, 200);
    assert!(count.contains("input_tokens"));
    let side = json!({"model": "haiku", "messages": [{"role": "user", "content": "title?"}]});
    let (code, title) = exchange(&mut stream, "/v1/messages", &side);
    assert_eq!(code, 200);
    assert!(title.contains("Scripted session"), "{title}");
    let (code, _) = exchange(&mut stream, "/v2/other", &json!({}));
    assert_eq!(code, 404);

    let kinds: Vec<Kind> = model.records().iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::Turn,
            Kind::Turn,
            Kind::CountTokens,
            Kind::Auxiliary,
            Kind::Unknown
        ]
    );
    let results = model.tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].parts, ["the text"]);
    assert_eq!(results[0].input, json!({"path": "a.txt"}));
}

#[test]
fn the_gemini_api_is_answered_streamed_and_whole_and_counts_tokens() {
    let model = ScriptedModel::start(vec![script()]).unwrap();
    let addr = model.base_url().trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let first = json!({
        "tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "mcp_fs_read_text_file"}]}],
        "contents": [{"role": "user", "parts": [{"text": "do marker-7"}]}]
    });
    let (code, sse) = exchange(
        &mut stream,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        &first,
    );
    assert_eq!(code, 200);
    let event: Value = serde_json::from_str(sse.strip_prefix("data: ").unwrap().trim()).unwrap();
    let call = &event["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call["name"], "mcp_fs_read_text_file");
    let id = call["id"].as_str().unwrap().to_string();
    let second = json!({
        "tools": first["tools"],
        "contents": [
            {"role": "user", "parts": [{"text": "do marker-7"}]},
            {"role": "model", "parts": [{"functionCall": {"id": id, "name": "mcp_fs_read_text_file", "args": {"path": "a.txt"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": id, "name": "mcp_fs_read_text_file",
                "response": {"output": "the text"}}}]}
        ]
    });
    let (code, whole) = exchange(
        &mut stream,
        "/v1beta/models/gemini-2.5-flash:generateContent",
        &second,
    );
    assert_eq!(code, 200);
    let whole: Value = serde_json::from_str(&whole).unwrap();
    assert_eq!(
        whole["candidates"][0]["content"]["parts"][0]["text"],
        "finished"
    );
    let (code, count) = exchange(
        &mut stream,
        "/v1beta/models/gemini-2.5-flash:countTokens",
        &json!({"contents": []}),
    );
    assert_eq!(code, 200);
    assert!(count.contains("totalTokens"), "{count}");
    let kinds: Vec<Kind> = model.records().iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [Kind::Turn, Kind::Turn, Kind::CountTokens]);
    assert_eq!(
        model.records()[0].model.as_deref(),
        Some("gemini-2.5-flash")
    );
    let results = model.tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].parts, ["the text"]);
}

#[test]
fn a_conversation_no_script_is_for_ends_with_a_text_that_says_so() {
    let model = ScriptedModel::start(vec![script()]).unwrap();
    let addr = model.base_url().trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    let body = json!({"model": "m", "tools": [{"name": "Read"}],
        "messages": [{"role": "user", "content": "another task"}]});
    let (_, answer) = exchange(&mut stream, "/v1/messages", &body);
    assert!(answer.contains("no script"), "{answer}");
    assert!(model.records()[0].diverged.is_some());
}

#[test]
fn the_binary_prints_its_url_records_requests_and_stops_when_stdin_closes() {
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("scripts.json");
    let records = dir.path().join("records.jsonl");
    #[allow(clippy::disallowed_methods)] // The test writes its own fixture by name.
    std::fs::write(&scripts, serde_json::to_string(&vec![script()]).unwrap()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-model"))
        .arg(&scripts)
        .arg("--record")
        .arg(&records)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let addr = url.trim().trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    let body = json!({"model": "m", "tools": [{"name": "mcp__fs__read_text_file"}],
        "messages": [{"role": "user", "content": "marker-7"}]});
    let (code, _) = exchange(&mut stream, "/v1/messages", &body);
    assert_eq!(code, 200);
    drop(child.stdin.take());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("scripted-model did not stop within a minute of its stdin closing");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    #[allow(clippy::disallowed_methods)] // The test reads the record file the binary wrote.
    let lines = std::fs::read_to_string(&records).unwrap();
    let record: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(record["kind"], "turn");
    assert_eq!(record["answer"]["name"], "mcp__fs__read_text_file");
}
