//! The transcript: `stand-in.jsonl` in Claude Code's shape, so the report reads the stand-in's
//! trials exactly as it reads a real agent's.
//!
//! Each call is an assistant line with one `tool_use` block (`id`, `name`, `input`) and a user
//! line with its `tool_result` (`tool_use_id`, `is_error`, `content`); the prompt is the first
//! user line, as typed text. Tools of a server are named `mcp__<server>__<tool>`, built-in work
//! `Read`, `Write`, `Edit`, `Bash`. The envelope fields Claude Code writes (`uuid`, `parentUuid`,
//! `sessionId`, `timestamp`, `cwd`…) are written too, though the report reads only `type`,
//! `message` and the blocks: other readers of transcripts expect them.
//!
//! Ids are derived from the seed and the session, not drawn from the policy's stream: they must be
//! unique across trials (the report counts a `tool_use` id once over all files it reads) without
//! changing what the policy draws. Every line is flushed as written, so a trial killed at its
//! limit leaves the calls it made.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::error::StandInError;

/// The transcript's file name inside `{transcript_dir}`.
pub const FILE_NAME: &str = "stand-in.jsonl";
/// The most text of one result kept in the transcript (the report reads results only for their
/// error text).
const MAX_RESULT_TEXT: usize = 256 << 10;

/// The transcript being written.
pub struct Transcript {
    out: BufWriter<File>,
    path: PathBuf,
    session: String,
    cwd: String,
    /// Mixed from the seed and the session: the root of every id.
    id_root: u64,
    lines: u64,
    last_uuid: Option<String>,
}

impl Transcript {
    /// Creates `dir/stand-in.jsonl` (and `dir`), replacing an older one.
    pub fn create(dir: &Path, session: &str, cwd: &Path, seed: u64) -> Result<Self, StandInError> {
        let io = |source| StandInError::Io {
            action: "cannot create the transcript",
            path: dir.join(FILE_NAME),
            source,
        };
        let path = dir.join(FILE_NAME);
        // By name: the transcript directory the runner names on the command line (the trial's
        // own, outside its workspace), made and written once as a client writes its log.
        #[allow(clippy::disallowed_methods)]
        let file = std::fs::create_dir_all(dir).and_then(|()| File::create(&path));
        let out = BufWriter::new(file.map_err(io)?);
        let id_root = session
            .bytes()
            .fold(mix(seed), |h, b| mix(h ^ u64::from(b)));
        Ok(Transcript {
            out,
            path,
            session: session.to_string(),
            cwd: cwd.to_string_lossy().into_owned(),
            id_root,
            lines: 0,
            last_uuid: None,
        })
    }

    /// The prompt, as the user's first message.
    pub fn prompt(&mut self, text: &str) -> Result<(), StandInError> {
        self.line("user", json!({"role": "user", "content": text}))
    }

    /// A text message of the agent (how it ends, or why it gives up).
    pub fn say(&mut self, text: &str) -> Result<(), StandInError> {
        self.line(
            "assistant",
            json!({"role": "assistant", "content": [{"type": "text", "text": text}]}),
        )
    }

    /// One call: the `tool_use` and its `tool_result`.
    pub fn call(
        &mut self,
        name: &str,
        input: &Value,
        content: &Value,
        is_error: bool,
    ) -> Result<(), StandInError> {
        let id = format!("toolu_{:016x}{:04}", mix(self.id_root ^ 0x7001), self.lines);
        self.line(
            "assistant",
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": name, "input": input}
            ]}),
        )?;
        self.line(
            "user",
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "is_error": is_error, "content": bounded(content)}
            ]}),
        )
    }

    fn line(&mut self, kind: &str, message: Value) -> Result<(), StandInError> {
        self.lines += 1;
        let a = mix(self.id_root ^ self.lines);
        let b = mix(a ^ 0x55);
        let uuid = format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        );
        let line = json!({
            "parentUuid": self.last_uuid,
            "isSidechain": false,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session,
            "version": concat!("study-stand-in ", env!("CARGO_PKG_VERSION")),
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": now_rfc3339(),
        });
        self.last_uuid = Some(uuid);
        let mut text = line.to_string();
        text.push('\n');
        self.out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|source| StandInError::Io {
                action: "cannot write the transcript",
                path: self.path.clone(),
                source,
            })
    }
}

/// A result's content with every text block cut to [`MAX_RESULT_TEXT`] bytes.
fn bounded(content: &Value) -> Value {
    let cut = |s: &str| -> String {
        if s.len() <= MAX_RESULT_TEXT {
            return s.to_string();
        }
        let mut end = MAX_RESULT_TEXT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}\n[cut at {MAX_RESULT_TEXT} bytes]", &s[..end])
    };
    match content {
        Value::String(s) => Value::String(cut(s)),
        Value::Array(blocks) => Value::Array(
            blocks
                .iter()
                .map(|b| match (b.get("text").and_then(Value::as_str), b) {
                    (Some(text), Value::Object(map)) => {
                        let mut map = map.clone();
                        map.insert("text".into(), Value::String(cut(text)));
                        Value::Object(map)
                    }
                    _ => b.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// splitmix64's finaliser: a well-spread 64-bit hash of `x`.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The current time as `YYYY-MM-DDTHH:MM:SS.mmmZ`, the form Claude Code writes.
fn now_rfc3339() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format_utc(since.as_secs(), since.subsec_millis())
}

/// Formats seconds since the epoch in UTC (the civil-from-days conversion of the proleptic
/// Gregorian calendar).
fn format_utc(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::format_utc;

    #[test]
    fn utc_times_format_like_claude_codes() {
        assert_eq!(format_utc(0, 0), "1970-01-01T00:00:00.000Z");
        // 2024-02-29 (a leap day) 12:34:56.789
        assert_eq!(format_utc(1_709_210_096, 789), "2024-02-29T12:34:56.789Z");
        assert_eq!(format_utc(951_782_400, 5), "2000-02-29T00:00:00.005Z");
    }
}
