//! Reading Claude Code transcripts: JSONL files under a projects directory; and, told apart by
//! their first line, the files of other harnesses, each read by its own module ([`crate::codex`]
//! for Codex CLI's session files and `codex exec --json` output).
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
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::FileType;
use serde_json::Value;

use workspace::walk::{self, DescendError, Tree, MAX_DEPTH};

use super::classify::{classify_transcript_name, is_write, ServerFilter};
use super::codex::{self, CodexFile};
use super::gemini;
use super::input::{check_file, not_regular, open_named, Flag, InputError, Named, MAX_INPUT_BYTES};
use super::lines::{Line, Lines};
use super::model::{Call, InputStats, Outcome, Session};
use super::offered::{ClaudeRecords, Offered};
use super::pipeline::call_stages;
use super::reason::{clip_token, reason_from_text, token_from_text};
use super::retry::InputKey;
use super::{warn, ReportError};

/// The directory component under which Claude Code stores a session's subagent transcripts.
const SUBAGENTS_DIR: &str = "subagents";

/// Reads every `*.jsonl` file under each directory (recursively, not following symlinks) into
/// sessions, in path order. A path that is itself a file is read as one transcript.
///
/// A path given that cannot be read is an error (the name is likely wrong). Below it, a folder
/// that cannot be listed or lies more than [`MAX_DEPTH`] levels down, and a transcript that
/// cannot be read (or not to its end), are skipped with a warning on stderr (unreadable files
/// are counted, [`InputStats::unreadable_files`]) and the rest is reported: one odd file must
/// not cost the whole report.
pub fn read_transcripts(
    dirs: &[PathBuf],
    servers: &ServerFilter,
) -> Result<(Vec<Session>, InputStats), ReportError> {
    read_transcripts_offered(dirs, servers).map(|(sessions, stats, _)| (sessions, stats))
}

/// [`read_transcripts`], and what the model was offered as Claude Code's own request records in
/// the same files tell ([`ClaudeRecords`]; `None` when they hold none).
pub fn read_transcripts_offered(
    dirs: &[PathBuf],
    servers: &ServerFilter,
) -> Result<(Vec<Session>, InputStats, Option<Offered>), ReportError> {
    let mut reader = TranscriptReader {
        servers,
        stats: InputStats::default(),
        sessions: Vec::new(),
        seen: HashSet::new(),
        by_id: HashMap::new(),
        codex_threads: Vec::new(),
        offered: ClaudeRecords::default(),
    };
    for dir in dirs {
        match open_named(dir) {
            Ok(Named::File(file)) => {
                let name = dir.file_name().map(PathBuf::from).unwrap_or_default();
                reader.read_file(file, dir, &name);
            }
            Ok(Named::Directory(fd)) => reader.read_tree(dir, fd)?,
            Err(source) => {
                return Err(ReportError::Input {
                    path: dir.clone(),
                    flag: Flag::Transcripts,
                    source,
                })
            }
        }
    }
    reader.drop_streams_of_read_sessions();
    let offered = reader.offered.finish(servers);
    Ok((reader.sessions, reader.stats, offered))
}

/// True for a transcript's file name.
fn is_transcript(name: &OsStr) -> bool {
    Path::new(name).extension().is_some_and(|e| e == "jsonl")
}

/// True when an open failed because the entry is no longer the regular file the walk listed
/// (removed, or swapped for a symlink, a FIFO or a directory since): nothing to read, and
/// nothing to warn about.
fn swapped_since_listed(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
        || e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
        || not_regular(e).is_some()
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

/// What wrote a transcript file, told by its first line, and the reader of its lines.
enum Format {
    /// Claude Code (and anything else not recognised as another harness's).
    ClaudeCode,
    /// Codex CLI ([`crate::codex`]).
    Codex(CodexFile),
    /// Gemini CLI ([`crate::gemini`]): a chat file or its stream-json output.
    Gemini(gemini::Format),
}

struct TranscriptReader<'a> {
    servers: &'a ServerFilter,
    stats: InputStats,
    sessions: Vec<Session>,
    /// Every `tool_use` id counted so far, across all files.
    seen: HashSet<String>,
    /// Where each call is: (session index, call index).
    by_id: HashMap<String, (usize, usize)>,
    /// Codex files by the thread they record: (thread id, session index, is a session file).
    codex_threads: Vec<(String, usize, bool)>,
    /// Claude Code's records of its requests, read on the way.
    offered: ClaudeRecords,
}

impl TranscriptReader<'_> {
    /// Reads every transcript below `dir` as a depth-first [`Tree`] walk with entries in name
    /// order, which is the order of their paths: no recursion, a bounded number of open
    /// directories, and files opened relative to their directory, so a transcript deeper than
    /// any path the kernel accepts is still read.
    fn read_tree(&mut self, dir: &Path, fd: OwnedFd) -> Result<(), ReportError> {
        let mut tree = Tree::new(fd).map_err(|source| ReportError::ReadDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut too_deep: Vec<PathBuf> = Vec::new();
        while let Some(found) = tree.next_entry() {
            match found.kind {
                FileType::Directory => match tree.descend() {
                    Ok(()) => {}
                    Err(DescendError::TooDeep) => too_deep.push(found.path),
                    Err(e) => warn(format_args!(
                        "skipped '{}': it cannot be listed ({e}); the rest is reported",
                        walk::shorten(&dir.join(&found.path))
                    )),
                },
                // A symlink is never followed: it cannot lead the walk in circles or out of the
                // directory the user named.
                FileType::RegularFile if is_transcript(&found.name) => {
                    let path = dir.join(&found.path);
                    let file = tree
                        .current()
                        .ok_or_else(|| std::io::Error::other(DescendError::Lost))
                        .and_then(|d| walk::open_file_at(d, &found.name));
                    match file {
                        Ok(file) => self.read_file(file, &path, &found.path),
                        Err(e) if swapped_since_listed(&e) => {}
                        Err(e) => self.skip(&path, &InputError::Open(e)),
                    }
                }
                _ => {}
            }
        }
        if let Some(first) = too_deep.first() {
            warn(format_args!(
                "skipped {} folder(s) under '{}' that lie more than {MAX_DEPTH} levels deep (the depth limit of every walk), the first at '{}'; the rest is reported",
                too_deep.len(),
                dir.display(),
                walk::shorten(first)
            ));
        }
        Ok(())
    }

    /// Codex records a session twice when its `--json` stream was saved too: the calls of a
    /// stream whose thread's session file was read are counted once, from the session file (the
    /// fuller record), and the stream's as duplicates.
    fn drop_streams_of_read_sessions(&mut self) {
        let recorded: HashSet<&str> = self
            .codex_threads
            .iter()
            .filter(|(_, _, rollout)| *rollout)
            .map(|(id, _, _)| id.as_str())
            .collect();
        let dropped: HashSet<usize> = self
            .codex_threads
            .iter()
            .filter(|(id, _, rollout)| !rollout && recorded.contains(id.as_str()))
            .map(|&(_, session, _)| session)
            .collect();
        if dropped.is_empty() {
            return;
        }
        let mut index = 0;
        let stats = &mut self.stats;
        self.sessions.retain(|session| {
            let keep = !dropped.contains(&index);
            if !keep {
                stats.duplicate_tool_uses += session.calls.len();
            }
            index += 1;
            keep
        });
    }

    /// The format of the file at `path` (read into `session`) whose first JSON line is `first`.
    fn recognise(&mut self, first: &Value, path: &Path, session: usize) -> Format {
        if let Some(kind) = gemini::recognise(first) {
            return Format::Gemini(kind);
        }
        let Some(file) = CodexFile::recognise(first) else {
            return Format::ClaudeCode;
        };
        if let CodexFile::UnknownRollout(version) = &file {
            warn(format_args!(
                "'{}' is a Codex CLI session file written by version {version}, whose format this report was not checked against (it reads {}x); its lines are counted as skipped",
                walk::shorten(path),
                codex::KNOWN_ROLLOUT_VERSIONS.join("x, ")
            ));
        }
        if let Some(thread) = codex::thread_id(first) {
            self.codex_threads
                .push((thread.to_string(), session, file.is_read_session()));
        }
        Format::Codex(file)
    }

    /// A transcript that cannot be read (or not to its end), warned and counted.
    fn skip(&mut self, path: &Path, why: &InputError) {
        self.stats.unreadable_files += 1;
        warn(format_args!(
            "skipped the transcript '{}': {why}; {}; the rest is reported",
            walk::shorten(path),
            why.advice(Flag::Transcripts)
        ));
    }

    /// Reads one transcript, a line at a time, each line at most
    /// [`crate::lines::MAX_LINE_BYTES`] long (a longer one is counted and skipped unread).
    fn read_file(&mut self, file: std::fs::File, path: &Path, relative: &Path) {
        if let Err(why) = check_file(&file) {
            self.skip(path, &why);
            return;
        }
        let (id, parent) = session_names(relative);
        self.sessions.push(Session {
            id,
            parent,
            calls: Vec::new(),
        });
        let session = self.sessions.len() - 1;
        let mut lines = Lines::new(file.take(MAX_INPUT_BYTES));
        let mut format: Option<Format> = None;
        loop {
            let line = match lines.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => {
                    self.skip(path, &InputError::Read(e));
                    return;
                }
            };
            self.stats.lines += 1;
            let line = match line {
                Line::Text(line) => line,
                Line::TooLong => {
                    self.stats.long_lines += 1;
                    continue;
                }
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value = match serde_json::from_slice::<Value>(line) {
                Ok(value @ Value::Object(_)) => value,
                _ => {
                    self.stats.malformed_lines += 1;
                    continue;
                }
            };
            // The first object decides what the file is: the harness that wrote it, and for
            // Codex's session files the version.
            let format = format.get_or_insert_with(|| self.recognise(&value, path, session));
            match format {
                Format::ClaudeCode => self.read_line(session, &value),
                Format::Codex(file) => file.read_line(
                    &value,
                    &mut self.sessions[session].calls,
                    &mut self.stats,
                    self.servers,
                ),
                Format::Gemini(kind) => gemini::read_line(
                    *kind,
                    &value,
                    &mut gemini::Sink {
                        servers: self.servers,
                        stats: &mut self.stats,
                        seen: &mut self.seen,
                        by_id: &mut self.by_id,
                        sessions: &mut self.sessions,
                        session,
                    },
                ),
            }
        }
        self.stats.files += 1;
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
                // Claude Code's request records are no calls (they stay counted as skipped
                // lines) but tell what the model was offered.
                self.offered.line(line);
                // The type is the writer's text: cut like a refused token, it only needs
                // to be recognised.
                *self
                    .stats
                    .skipped_line_types
                    .entry(clip_token(other))
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
        let input = block.get("input");
        let stages = call_stages(name.interface, input, &["command"]);
        let write = is_write(name.interface, &name.tool, &stages);
        let calls = &mut self.sessions[session].calls;
        calls.push(Call {
            tool: name.tool,
            interface: name.interface,
            write,
            outcome: Outcome::NoResult,
            stages,
            input: input.map(InputKey::of),
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
pub(crate) fn result_text(content: Option<&Value>) -> String {
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
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
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
    fn a_codex_session_saved_twice_is_counted_once_and_an_unknown_version_not_at_all() {
        let tmp = tempfile::tempdir().expect("tmp");
        let meta = |version: &str| {
            format!(
                r#"{{"type":"session_meta","payload":{{"id":"t1","cli_version":"{version}"}}}}"#
            )
        };
        let call = r#"{"type":"response_item","payload":{"type":"function_call","name":"write_file","namespace":"mcp__filesystem","arguments":"{}","call_id":"c1"}}"#;
        let stream = [
            r#"{"type":"thread.started","thread_id":"t1"}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"mcp_tool_call","server":"filesystem","tool":"write_file","arguments":{},"status":"completed","error":null}}"#,
        ];
        std::fs::create_dir(tmp.path().join("s")).expect("mkdir");
        std::fs::write(
            tmp.path().join("s/rollout-a.jsonl"),
            format!("{}\n{call}\n", meta("0.171.0")),
        )
        .expect("write");
        std::fs::write(tmp.path().join("events.jsonl"), stream.join("\n")).expect("write");
        let (sessions, stats) =
            read_transcripts(&[tmp.path().to_path_buf()], &ServerFilter::default()).expect("read");
        let calls: usize = sessions.iter().map(|s| s.calls.len()).sum();
        assert_eq!(
            (sessions.len(), calls, stats.duplicate_tool_uses),
            (1, 1, 1)
        );
        assert_eq!(sessions[0].id, "s/rollout-a");

        // A session file of a version not checked against: skipped, and the stream is what counts.
        std::fs::write(
            tmp.path().join("s/rollout-a.jsonl"),
            format!("{}\n{call}\n", meta("9.0.0")),
        )
        .expect("write");
        let (sessions, stats) =
            read_transcripts(&[tmp.path().to_path_buf()], &ServerFilter::default()).expect("read");
        let calls: Vec<usize> = sessions.iter().map(|s| s.calls.len()).collect();
        assert_eq!(calls, [1, 0]);
        assert_eq!(
            stats
                .skipped_line_types
                .get("codex session of unknown version 9.0.0"),
            Some(&2)
        );
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
