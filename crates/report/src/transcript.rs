//! Reading Claude Code transcripts: JSONL files under a projects directory.
//!
//! Each line is one content block of the conversation. Assistant lines carry `tool_use` blocks
//! (`id`, `name`, `input`), user lines carry `tool_result` blocks (`tool_use_id`, `is_error`,
//! `content`). A call is counted once by its `tool_use` id, because the client writes some lines
//! more than once. Lines of other types, and lines that are not JSON, are counted and skipped.
//!
//! A subagent's transcript (`<session>/subagents/<agent>.jsonl`) is its own session, with the
//! session that started it as its parent: a subagent starts with a fresh context, so its
//! position in its own conversation is what matters for adoption-by-position, and mixing its
//! calls into the parent's order would smear both curves.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Dir, FileType, Mode, OFlags};
use serde_json::Value;

use workspace::walk::{self, DescendError, Tree, MAX_DEPTH};

use super::classify::{classify_transcript_name, is_write, Interface, ServerFilter};
use super::model::{Call, InputStats, Outcome, Session};
use super::pipeline::stage_commands;
use super::reason::{reason_from_text, token_from_text};
use super::ReportError;

/// The directory component under which Claude Code stores a session's subagent transcripts.
const SUBAGENTS_DIR: &str = "subagents";

/// Reads every `*.jsonl` file under each directory (recursively, not following symlinks) into
/// sessions, in path order. A path that is itself a file is read as one transcript.
///
/// A folder that cannot be listed, or that lies more than [`MAX_DEPTH`] levels below the
/// directory given, is skipped with a warning on stderr and the rest is reported: one odd folder
/// must not cost the whole report.
pub fn read_transcripts(
    dirs: &[PathBuf],
    servers: &ServerFilter,
) -> Result<(Vec<Session>, InputStats), ReportError> {
    let mut reader = TranscriptReader {
        servers,
        stats: InputStats::default(),
        sessions: Vec::new(),
        seen: HashSet::new(),
        by_id: HashMap::new(),
    };
    for dir in dirs {
        if dir.is_file() {
            let name = dir.file_name().map(PathBuf::from).unwrap_or_default();
            let file = std::fs::File::open(dir).map_err(|source| ReportError::ReadFile {
                path: dir.to_path_buf(),
                source,
            })?;
            reader.read_file(file, dir, &name)?;
            continue;
        }
        reader.read_tree(dir)?;
    }
    Ok((reader.sessions, reader.stats))
}

/// True for a transcript's file name.
fn is_transcript(name: &OsStr) -> bool {
    Path::new(name).extension().is_some_and(|e| e == "jsonl")
}

/// Opens the transcript `name` in `dir` without following a symlink or blocking on a FIFO;
/// `None` when it is no longer a regular file.
fn open_transcript(dir: &Dir, name: &OsStr) -> std::io::Result<Option<std::fs::File>> {
    let fd = rustix::fs::openat(
        dir.fd()?,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    );
    let fd = match fd {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) | Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let file = std::fs::File::from(fd);
    Ok(file.metadata()?.is_file().then_some(file))
}

/// The session name of a transcript file and, for a subagent file, its parent's name: paths
/// relative to the directory given, without `.jsonl`.
fn session_names(relative: &Path) -> (String, Option<String>) {
    let id = relative.with_extension("").to_string_lossy().into_owned();
    let components: Vec<Component> = relative.components().collect();
    let parent = components
        .iter()
        .position(|c| c.as_os_str() == SUBAGENTS_DIR)
        .filter(|&i| i > 0)
        .map(|i| {
            components[..i]
                .iter()
                .collect::<PathBuf>()
                .to_string_lossy()
                .into_owned()
        });
    (id, parent)
}

struct TranscriptReader<'a> {
    servers: &'a ServerFilter,
    stats: InputStats,
    sessions: Vec<Session>,
    /// Every `tool_use` id counted so far, across all files.
    seen: HashSet<String>,
    /// Where each call is: (session index, call index).
    by_id: HashMap<String, (usize, usize)>,
}

impl TranscriptReader<'_> {
    /// Reads every transcript below `dir` as a depth-first [`Tree`] walk with entries in name
    /// order, which is the order of their paths: no recursion, a bounded number of open
    /// directories, and files opened relative to their directory, so a transcript deeper than
    /// any path the kernel accepts is still read.
    fn read_tree(&mut self, dir: &Path) -> Result<(), ReportError> {
        let unlisted = |source: std::io::Error| ReportError::ReadDir {
            path: dir.to_path_buf(),
            source,
        };
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| unlisted(e.into()))?;
        let mut tree = Tree::new(fd).map_err(unlisted)?;
        let mut too_deep: Vec<PathBuf> = Vec::new();
        while let Some(found) = tree.next_entry() {
            match found.kind {
                FileType::Directory => match tree.descend() {
                    Ok(()) => {}
                    Err(DescendError::TooDeep) => too_deep.push(found.path),
                    Err(e) => eprintln!(
                        "filesystem report: warning: skipped '{}': it cannot be listed ({e}); the rest is reported",
                        walk::shorten(&dir.join(&found.path))
                    ),
                },
                // A symlink is never followed: it cannot lead the walk in circles or out of the
                // directory the user named.
                FileType::RegularFile if is_transcript(&found.name) => {
                    let path = dir.join(&found.path);
                    let file = tree
                        .current()
                        .ok_or_else(|| std::io::Error::other(DescendError::Lost))
                        .and_then(|d| open_transcript(d, &found.name));
                    match file {
                        Ok(Some(file)) => self.read_file(file, &path, &found.path)?,
                        // Swapped for something else since it was listed.
                        Ok(None) => {}
                        Err(source) => return Err(ReportError::ReadFile { path, source }),
                    }
                }
                _ => {}
            }
        }
        if let Some(first) = too_deep.first() {
            eprintln!(
                "filesystem report: warning: skipped {} folder(s) under '{}' that lie more than {MAX_DEPTH} levels deep (the depth limit of every walk), the first at '{}'; the rest is reported",
                too_deep.len(),
                dir.display(),
                walk::shorten(first)
            );
        }
        Ok(())
    }

    fn read_file(
        &mut self,
        file: std::fs::File,
        path: &Path,
        relative: &Path,
    ) -> Result<(), ReportError> {
        self.stats.files += 1;
        let (id, parent) = session_names(relative);
        self.sessions.push(Session {
            id,
            parent,
            calls: Vec::new(),
        });
        let session = self.sessions.len() - 1;
        for line in BufReader::new(file).split(b'\n') {
            let line = line.map_err(|source| ReportError::ReadFile {
                path: path.to_path_buf(),
                source,
            })?;
            self.stats.lines += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(&line) {
                Ok(Value::Object(obj)) => self.read_line(session, &Value::Object(obj)),
                _ => self.stats.malformed_lines += 1,
            }
        }
        Ok(())
    }

    fn read_line(&mut self, session: usize, line: &Value) {
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("(none)");
        let content = line.get("message").and_then(|m| m.get("content"));
        match kind {
            "assistant" => {
                for block in content.and_then(Value::as_array).into_iter().flatten() {
                    if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                        self.tool_use(session, block);
                    }
                }
            }
            "user" => {
                // A user line's content is a plain string when the person typed it.
                for block in content.and_then(Value::as_array).into_iter().flatten() {
                    if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                        self.tool_result(block);
                    }
                }
            }
            other => {
                *self
                    .stats
                    .skipped_line_types
                    .entry(other.to_string())
                    .or_default() += 1;
            }
        }
    }

    fn tool_use(&mut self, session: usize, block: &Value) {
        let (Some(id), Some(name)) = (
            block.get("id").and_then(Value::as_str),
            block.get("name").and_then(Value::as_str),
        ) else {
            self.stats.malformed_lines += 1;
            return;
        };
        if !self.seen.insert(id.to_string()) {
            self.stats.duplicate_tool_uses += 1;
            return;
        }
        let name = classify_transcript_name(name, self.servers);
        let input = block.get("input").cloned();
        let stages = match (name.interface, &input) {
            (Interface::Pipe | Interface::Builtin, Some(input)) => input
                .get("command")
                .and_then(Value::as_str)
                .map(stage_commands)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let write = is_write(name.interface, &name.tool, &stages);
        let calls = &mut self.sessions[session].calls;
        calls.push(Call {
            tool: name.tool,
            interface: name.interface,
            write,
            outcome: Outcome::NoResult,
            stages,
            input,
            refused_token: None,
        });
        self.by_id
            .insert(id.to_string(), (session, calls.len() - 1));
    }

    fn tool_result(&mut self, block: &Value) {
        let Some(&(session, index)) = block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .and_then(|id| self.by_id.get(id))
        else {
            self.stats.results_without_call += 1;
            return;
        };
        let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
        let call = &mut self.sessions[session].calls[index];
        if is_error {
            let text = result_text(block.get("content"));
            call.outcome = Outcome::Error(reason_from_text(&text));
            call.refused_token = token_from_text(&text);
        } else {
            call.outcome = Outcome::Ok;
            call.refused_token = None;
        }
    }
}

/// The text of a tool result: a plain string, or the `text` of each text block joined.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::{read_transcripts, session_names, ServerFilter};
    use std::path::Path;

    #[test]
    fn a_line_nested_past_serde_jsons_recursion_limit_is_malformed_not_a_crash() {
        let tmp = tempfile::tempdir().expect("tmp");
        let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        let ok = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]}}"#;
        std::fs::write(tmp.path().join("s.jsonl"), format!("{deep}\n{ok}\n")).expect("write");
        let (sessions, stats) =
            read_transcripts(&[tmp.path().to_path_buf()], &ServerFilter::default()).expect("read");
        assert_eq!(stats.malformed_lines, 1);
        assert_eq!(sessions[0].calls.len(), 1);
    }

    #[test]
    fn subagent_files_name_their_parent_session() {
        let (id, parent) = session_names(Path::new("proj/abc/subagents/agent-1.jsonl"));
        assert_eq!(id, "proj/abc/subagents/agent-1");
        assert_eq!(parent.as_deref(), Some("proj/abc"));
        let (id, parent) = session_names(Path::new("proj/abc.jsonl"));
        assert_eq!(id, "proj/abc");
        assert_eq!(parent, None);
    }
}
