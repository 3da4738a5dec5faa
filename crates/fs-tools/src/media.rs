//! `read_media_file`: an image or a sound as MCP image/audio content, so a model that can see or
//! hear gets the file itself rather than a refusal from `read_text_file`.
//!
//! The type comes from the content's first bytes (its magic number), never from the name: a
//! `.png` that holds HTML is not sent as an image, and a photo without an extension still is.
//! The reference server goes by the extension; sniffing is what lets this tool say what a file
//! really is when it refuses one.
//!
//! SVG is refused on purpose, with a pointer to `read_text_file`: it is XML text that a model
//! reads better as markup, and the models that accept images take raster formats only.

use std::io::Read;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::error::FsError;
use super::target;
use super::tools::READ_MEDIA_FILE;
use super::{reject_unknown, FsContext};
use mcp_core::toolset::{Args, CallContext, ContentBlock, Effects, ToolDef, ToolOutput};

/// The largest file `read_media_file` returns: 10 MiB, which is 13.3 MiB of base64 on the wire.
/// Larger media would fill a model's context (and most clients' message limits) for one call.
pub const MAX_MEDIA_BYTES: u64 = 10 * 1024 * 1024;

/// What the first bytes of a file say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniffed {
    /// An image sent as an MCP `image` block, with its MIME type.
    Image(&'static str),
    /// A sound sent as an MCP `audio` block, with its MIME type.
    Audio(&'static str),
    /// Anything else, named the way the refusal reads it ("a PDF document").
    Other(&'static str),
}

/// Names the content of a file from its first bytes (the whole file, or at least its first 64
/// bytes). Only formats with a distinctive signature are recognised; everything else is
/// `Other`, so nothing is sent as media on a guess.
pub fn sniff(bytes: &[u8]) -> Sniffed {
    let at = |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
    if bytes.is_empty() {
        return Sniffed::Other("an empty file");
    }
    if at(0, b"\x89PNG\r\n\x1a\n") {
        return Sniffed::Image("image/png");
    }
    if at(0, b"\xff\xd8\xff") {
        return Sniffed::Image("image/jpeg");
    }
    if at(0, b"GIF87a") || at(0, b"GIF89a") {
        return Sniffed::Image("image/gif");
    }
    if at(0, b"RIFF") && at(8, b"WEBP") {
        return Sniffed::Image("image/webp");
    }
    if at(0, b"BM") && is_bmp_header(bytes) {
        return Sniffed::Image("image/bmp");
    }
    if at(0, b"RIFF") && at(8, b"WAVE") {
        return Sniffed::Audio("audio/wav");
    }
    if at(0, b"fLaC") {
        return Sniffed::Audio("audio/flac");
    }
    if at(0, b"OggS") {
        // An Ogg stream whose first packet is Theora is a video; Vorbis, Opus, FLAC and
        // Speex streams are sound.
        if bytes.get(28..35) == Some(b"\x80theora") {
            return Sniffed::Other("an Ogg video (Theora)");
        }
        return Sniffed::Audio("audio/ogg");
    }
    if at(0, b"ID3") {
        return Sniffed::Audio("audio/mpeg");
    }
    if at(0, b"FORM") && (at(8, b"AIFF") || at(8, b"AIFC")) {
        return Sniffed::Audio("audio/aiff");
    }
    if at(4, b"ftyp") {
        return iso_media(bytes.get(8..12).unwrap_or_default());
    }
    if let [0xff, second, third, ..] = *bytes {
        // An MPEG audio frame without an ID3 tag: the sync bits, then version and layer bits.
        // Only layer III (MP3) with a valid version, bitrate and sample rate counts, which keeps
        // a UTF-16 byte-order mark (FF FE) and other 0xFF-led data out; layer bits 00 after a
        // twelve-bit sync is an AAC ADTS stream.
        let valid_rate = third >> 4 != 0xf && (third >> 2) & 0b11 != 0b11;
        if second & 0xe6 == 0xe2 && second & 0x18 != 0x08 && valid_rate {
            return Sniffed::Audio("audio/mpeg");
        }
        if second & 0xf6 == 0xf0 {
            return Sniffed::Audio("audio/aac");
        }
    }
    other(bytes)
}

/// True when a `BM` file carries a DIB header of one of the sizes BMP defines: two letters alone
/// would also start many text files.
fn is_bmp_header(bytes: &[u8]) -> bool {
    match bytes.get(14..18) {
        Some(&[a, b, c, d]) => matches!(
            u32::from_le_bytes([a, b, c, d]),
            12 | 16 | 40 | 52 | 56 | 64 | 108 | 124
        ),
        _ => false,
    }
}

/// An ISO base media file (MP4, M4A, QuickTime, HEIF…) by its major brand. Only the audio-only
/// brands are sound; an `isom`/`mp42` file may hold only audio too, but telling needs its track
/// list, so it is named a video and the message says to give it an `.m4a` brand.
fn iso_media(brand: &[u8]) -> Sniffed {
    match brand {
        b"M4A " | b"M4B " | b"M4P " | b"F4A " | b"F4B " => Sniffed::Audio("audio/mp4"),
        b"avif" | b"avis" => Sniffed::Image("image/avif"),
        b"heic" | b"heix" | b"mif1" | b"msf1" => Sniffed::Other("a HEIF/HEIC image"),
        b"qt  " => Sniffed::Other("a QuickTime video"),
        _ => Sniffed::Other(
            "an MP4 video (ISO media; audio-only MP4 is served when its brand is M4A)",
        ),
    }
}

/// Names content that is neither image nor audio, so the refusal says what the file is.
fn other(bytes: &[u8]) -> Sniffed {
    let at = |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
    let known: &[(&[u8], &str)] = &[
        (b"%PDF-", "a PDF document"),
        (
            b"PK\x03\x04",
            "a ZIP archive (or a format built on ZIP: docx, xlsx, jar, epub…)",
        ),
        (b"\x1f\x8b", "gzip-compressed data"),
        (b"\x7fELF", "an ELF executable or library"),
        (b"\x1a\x45\xdf\xa3", "a Matroska/WebM video"),
        (
            b"II*\x00",
            "a TIFF image, which this tool does not send (PNG, JPEG, GIF, WebP, BMP and AVIF are)",
        ),
        (
            b"MM\x00*",
            "a TIFF image, which this tool does not send (PNG, JPEG, GIF, WebP, BMP and AVIF are)",
        ),
    ];
    if let Some((_, what)) = known.iter().find(|(magic, _)| at(0, magic)) {
        return Sniffed::Other(what);
    }
    if !bytes.contains(&0) {
        if let Ok(text) = std::str::from_utf8(bytes) {
            return Sniffed::Other(if is_svg(text) {
                "an SVG image, which is XML text"
            } else {
                "UTF-8 text"
            });
        }
    }
    Sniffed::Other("binary data of no image or audio format this tool knows")
}

/// True when text opens with an `<svg` element, after any XML declaration, doctype, comments
/// and whitespace.
fn is_svg(text: &str) -> bool {
    let mut rest = text.trim_start_matches('\u{feff}').trim_start();
    loop {
        if rest.starts_with("<svg") {
            return true;
        }
        let end = if rest.starts_with("<?") {
            rest.find("?>").map(|i| i + 2)
        } else if rest.starts_with("<!--") {
            rest.find("-->").map(|i| i + 3)
        } else if rest.starts_with("<!") {
            rest.find('>').map(|i| i + 1)
        } else {
            None
        };
        match end {
            Some(i) => rest = rest[i..].trim_start(),
            None => return false,
        }
    }
}

/// The definition of `read_media_file`.
pub fn definition() -> ToolDef {
    ToolDef {
        name: READ_MEDIA_FILE.into(),
        title: "Read Media File".into(),
        description: format!(
            "Read an image or audio file as MCP image/audio content (base64 data with its MIME type), after a text block \
             naming the type and size. The type is taken from the content, not the name: PNG, JPEG, GIF, WebP, BMP, AVIF \
             images; MP3, WAV, OGG, FLAC, AAC, AIFF, M4A sounds. At most {MAX_MEDIA_BYTES} bytes (10 MiB). Any other file \
             (text, SVG, PDF, video…) is refused with what it is; read text, including SVG, with read_text_file."
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "The image or audio file, relative to the workspace root (or absolute inside it)",
                },
            },
            "required": ["path"],
            "additionalProperties": false,
        }),
        // No output schema: structured content would repeat megabytes of base64 that the
        // content block already carries.
        output_schema: None,
        effects: Effects::READ_ONLY,
    }
}

/// `read_media_file`.
pub fn read_media_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path"])?;
    let path = Args(args).str("path")?;
    let (resolved, file, meta) = target::open_regular_for_reading(
        &cx.guard,
        path,
        "use list_directory to find the file in it",
    )?;
    let too_large = |len: u64| {
        FsError::InvalidArgument(format!(
            "'{}' is {len} bytes, more than the {MAX_MEDIA_BYTES} bytes (10 MiB) read_media_file returns; \
             use a smaller or compressed copy of it",
            resolved.display()
        ))
    };
    if meta.len() > MAX_MEDIA_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_MEDIA_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| target::io_error("cannot read", &resolved.relative, e))?;
    if bytes.len() as u64 > MAX_MEDIA_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    let (block, mime_type) = match sniff(&bytes) {
        Sniffed::Image(mime) => (encode(&bytes, mime, true), mime),
        Sniffed::Audio(mime) => (encode(&bytes, mime, false), mime),
        Sniffed::Other(what) => {
            return Err(FsError::InvalidArgument(format!(
                "'{}' is {what}, not an image or audio file (the type is read from the content, not the name); \
                 read text with read_text_file",
                resolved.display()
            )))
        }
    };
    FsError::check(ctx, || {
        format!("read_media_file of '{}'", resolved.display())
    })?;
    let mut output = ToolOutput::with_blocks(
        format!(
            "'{}': {mime_type}, {} bytes",
            resolved.display(),
            bytes.len()
        ),
        vec![block],
    );
    output.log.insert("mime_type".into(), json!(mime_type));
    output.log.insert("media_bytes".into(), json!(bytes.len()));
    Ok(output)
}

/// The content block for `bytes`, base64-encoded.
fn encode(bytes: &[u8], mime: &'static str, image: bool) -> ContentBlock {
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mime_type = mime.to_string();
    if image {
        ContentBlock::Image { data, mime_type }
    } else {
        ContentBlock::Audio { data, mime_type }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn riff(kind: &[u8]) -> Vec<u8> {
        let mut b = b"RIFF\x24\x00\x00\x00".to_vec();
        b.extend_from_slice(kind);
        b.extend_from_slice(&[0; 16]);
        b
    }

    #[test]
    fn each_signature_names_its_type() {
        let mut bmp = b"BM".to_vec();
        bmp.extend_from_slice(&[0; 12]);
        bmp.extend_from_slice(&40u32.to_le_bytes());
        let mut m4a = b"\x00\x00\x00\x20ftypM4A ".to_vec();
        m4a.extend_from_slice(&[0; 8]);
        let cases: [(&[u8], Sniffed); 12] = [
            (
                b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR",
                Sniffed::Image("image/png"),
            ),
            (b"\xff\xd8\xff\xe0\0\x10JFIF", Sniffed::Image("image/jpeg")),
            (b"GIF89a\x01\0\x01\0", Sniffed::Image("image/gif")),
            (&riff(b"WEBPVP8 "), Sniffed::Image("image/webp")),
            (&bmp, Sniffed::Image("image/bmp")),
            (&riff(b"WAVEfmt "), Sniffed::Audio("audio/wav")),
            (b"ID3\x04\0\0\0\0\0\0", Sniffed::Audio("audio/mpeg")),
            (b"\xff\xfb\x90\x64\0\0", Sniffed::Audio("audio/mpeg")),
            (b"\xff\xf1\x50\x80\0\0", Sniffed::Audio("audio/aac")),
            (b"OggS\0\x02\0\0", Sniffed::Audio("audio/ogg")),
            (b"fLaC\0\0\0\x22", Sniffed::Audio("audio/flac")),
            (&m4a, Sniffed::Audio("audio/mp4")),
        ];
        for (bytes, want) in cases {
            assert_eq!(sniff(bytes), want, "{bytes:?}");
        }
    }

    #[test]
    fn what_is_not_media_is_named() {
        let svg = "<?xml version=\"1.0\"?>\n<!-- logo -->\n<!DOCTYPE svg>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>";
        assert_eq!(
            sniff(svg.as_bytes()),
            Sniffed::Other("an SVG image, which is XML text")
        );
        assert_eq!(
            sniff(b"BM is how this note starts"),
            Sniffed::Other("UTF-8 text")
        );
        assert_ne!(
            sniff(b"\xff\xfeh\0i\0"),
            Sniffed::Audio("audio/mpeg"),
            "UTF-16 text"
        );
        assert_eq!(sniff(b"%PDF-1.7\n"), Sniffed::Other("a PDF document"));
        assert_eq!(sniff(b""), Sniffed::Other("an empty file"));
        assert_eq!(
            sniff(b"\0\x01\x02\x03"),
            Sniffed::Other("binary data of no image or audio format this tool knows")
        );
        let mut mp4 = b"\x00\x00\x00\x20ftypisom".to_vec();
        mp4.extend_from_slice(&[0; 8]);
        assert!(matches!(sniff(&mp4), Sniffed::Other(w) if w.starts_with("an MP4 video")));
    }
}
