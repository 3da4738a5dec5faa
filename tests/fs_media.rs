#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.
//! `read_media_file` through the real binary: the type read from the content (not the name) and
//! sent as MCP image/audio content whose base64 gives back the file's bytes, and the refusals: a
//! file over the size cap, a text file (SVG included), a symlink out of the workspace.

use std::os::unix::fs::symlink;

use base64::Engine;
use serde_json::{json, Value};

use test_support::mcp::Session;
use test_support::temp::Ws;

/// A small PNG: the signature, then an IHDR chunk and some trailing bytes of every value, so
/// the round trip covers bytes that are not text.
fn png() -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00".to_vec();
    b.extend(0..=255u8);
    b
}

fn jpeg() -> Vec<u8> {
    let mut b = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01".to_vec();
    b.extend((0..=255u8).rev());
    b.extend_from_slice(b"\xff\xd9");
    b
}

/// A WAV header for 8 bytes of 8-bit mono samples.
fn wav() -> Vec<u8> {
    let mut b = b"RIFF\x2c\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x40\x1f\x00\x00\x01\x00\x08\x00data\x08\x00\x00\x00".to_vec();
    b.extend_from_slice(&[128, 160, 190, 160, 128, 96, 66, 96]);
    b
}

/// An MP3 frame header without an ID3 tag (MPEG-1 layer III, 128 kbit/s, 44.1 kHz).
fn mp3() -> Vec<u8> {
    let mut b = b"\xff\xfb\x90\x64".to_vec();
    b.extend(std::iter::repeat_n(0x55u8, 413));
    b
}

/// A server on `ws` with the extras, after the handshake at `version`.
fn session(ws: &Ws, version: &str) -> Session {
    let mut s = Session::start_in(&ws.root, &["--tools", "extended"]);
    s.initialize(version);
    s
}

/// The result of one `read_media_file` call.
fn read(s: &mut Session, path: &str) -> Value {
    s.call(2, "read_media_file", json!({ "path": path }))
}

/// The error text of a refused call, failing if the call succeeded.
fn refusal(result: &Value) -> String {
    assert_eq!(
        result["isError"],
        json!(true),
        "expected a refusal: {result}"
    );
    result["content"][0]["text"]
        .as_str()
        .expect("error text")
        .to_string()
}

#[test]
fn images_and_sounds_come_back_as_content_blocks_whose_base64_is_the_file() {
    let ws = Ws::new();
    let cases: [(&str, Vec<u8>, &str, &str); 4] = [
        ("pic.png", png(), "image", "image/png"),
        ("photo.jpg", jpeg(), "image", "image/jpeg"),
        ("sound.wav", wav(), "audio", "audio/wav"),
        ("song.mp3", mp3(), "audio", "audio/mpeg"),
    ];
    for (name, bytes, _, _) in &cases {
        ws.write(name, bytes);
    }
    let mut s = session(&ws, "2025-06-18");
    for (name, bytes, kind, mime) in &cases {
        let result = read(&mut s, name);
        assert_eq!(result["isError"], json!(false), "{name}: {result}");
        let content = result["content"].as_array().expect("content");
        assert_eq!(content.len(), 2, "{name}: a text block, then the media");
        assert_eq!(
            content[0]["text"],
            json!(format!("'{name}': {mime}, {} bytes", bytes.len()))
        );
        assert_eq!(content[1]["type"], json!(kind), "{name}");
        assert_eq!(content[1]["mimeType"], json!(mime), "{name}");
        let data = content[1]["data"].as_str().expect("data");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("standard base64");
        assert_eq!(&decoded, bytes, "{name}: the bytes round-trip");
        // The data is sent once, in the block: no structured copy of it.
        assert!(result.get("structuredContent").is_none(), "{name}");
    }
}

#[test]
fn the_type_comes_from_the_content_not_the_name() {
    let ws = Ws::new();
    ws.write("no-extension", png());
    ws.write("actually-text.png", "<html>not a picture</html>\n");
    let mut s = session(&ws, "2025-11-25");
    let result = read(&mut s, "no-extension");
    assert_eq!(
        result["content"][1]["mimeType"],
        json!("image/png"),
        "{result}"
    );
    let text = refusal(&read(&mut s, "actually-text.png"));
    assert!(
        text.starts_with(
            "InvalidArgument: 'actually-text.png' is UTF-8 text, not an image or audio file"
        ) && text.contains("read_text_file"),
        "{text}"
    );
}

#[test]
fn svg_is_refused_as_text_to_read_with_read_text_file() {
    let ws = Ws::new();
    ws.write(
        "logo.svg",
        "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"/>\n",
    );
    let mut s = session(&ws, "2025-06-18");
    let text = refusal(&read(&mut s, "logo.svg"));
    assert!(
        text.contains("'logo.svg' is an SVG image, which is XML text")
            && text.contains("read_text_file"),
        "{text}"
    );
}

#[test]
fn a_file_over_ten_mib_is_refused_with_the_cap() {
    let ws = Ws::new();
    let mut big = png();
    big.resize(10 * 1024 * 1024 + 1, 0);
    ws.write("big.png", &big);
    let mut exact = png();
    exact.resize(10 * 1024 * 1024, 0);
    ws.write("exact.png", &exact);
    let mut s = session(&ws, "2025-06-18");
    let text = refusal(&read(&mut s, "big.png"));
    assert!(
        text.contains("'big.png' is 10485761 bytes, more than the 10485760 bytes (10 MiB)"),
        "{text}"
    );
    let result = read(&mut s, "exact.png");
    assert_eq!(
        result["isError"],
        json!(false),
        "exactly at the cap is served"
    );
}

#[test]
fn a_symlink_out_of_the_workspace_is_refused_and_nothing_of_its_target_shows() {
    let ws = Ws::new();
    std::fs::write(ws.outside.join("secret.png"), png()).expect("write outside");
    symlink(ws.outside.join("secret.png"), ws.path("link.png")).expect("link");
    symlink("pic.png", ws.path("inside-link.png")).expect("link");
    ws.write("pic.png", png());
    let mut s = session(&ws, "2025-06-18");
    let result = read(&mut s, "link.png");
    let text = refusal(&result);
    assert!(text.starts_with("PathEscape: "), "{text}");
    let whole = result.to_string();
    assert!(
        !whole.contains(ws.outside.to_string_lossy().as_ref()),
        "{whole}"
    );
    assert!(!whole.contains("iVBOR"), "no image data: {whole}");
    // A link that stays inside is followed like any other read.
    let inside = read(&mut s, "inside-link.png");
    assert_eq!(inside["content"][1]["mimeType"], json!("image/png"));
}

#[test]
fn audio_for_a_2024_11_05_client_is_a_note_instead_of_a_block_it_cannot_read() {
    let ws = Ws::new();
    ws.write("sound.wav", wav());
    ws.write("pic.png", png());
    let mut s = session(&ws, "2024-11-05");
    let result = read(&mut s, "sound.wav");
    assert_eq!(result["isError"], json!(false), "{result}");
    let note = result["content"][1]["text"].as_str().expect("a text note");
    assert!(
        note.contains("audio/wav") && note.contains("2025-03-26"),
        "{note}"
    );
    // Images exist in every revision.
    let image = read(&mut s, "pic.png");
    assert_eq!(image["content"][1]["type"], json!("image"));
}

#[test]
fn the_tool_is_listed_only_with_the_extras_and_refuses_directories_and_unknown_arguments() {
    let ws = Ws::new();
    ws.write("dir/pic.png", png());
    let mut plain = Session::start_in(&ws.root, &[]);
    plain.initialize("2025-06-18");
    let listed = plain.request(3, "tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!names.contains(&"read_media_file"), "{names:?}");

    let mut s = session(&ws, "2025-06-18");
    let listed = s.request(3, "tools/list", json!({}));
    let tool = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == json!("read_media_file"))
        .cloned()
        .expect("read_media_file listed with --tools extended");
    assert_eq!(tool["annotations"]["readOnlyHint"], json!(true));
    assert!(tool.get("outputSchema").is_none());
    let text = refusal(&read(&mut s, "dir"));
    assert!(text.contains("'dir' is a directory"), "{text}");
    let text = refusal(&s.call(
        4,
        "read_media_file",
        json!({"path": "dir/pic.png", "mime": "x"}),
    ));
    assert!(text.contains("unknown argument 'mime'"), "{text}");
}
