//! `search_content`: a regular-expression (or fixed-string) search of file contents, built on
//! ripgrep's own libraries (`grep-regex` compiles the pattern, `grep-searcher` reads each file
//! line by line with binary detection and context, `ignore` supplies `.gitignore` and glob
//! semantics), not on a subprocess.
//!
//! The tree is not walked by `ignore`'s walker, which reads directories and opens ignore files by
//! path and so could be led out of the root by a directory swapped for a symlink mid-walk.
//! Instead the walk is the workspace layer's [`Tree`]: every directory is opened relative to its
//! parent's descriptor without following links, and every file (and every `.gitignore`) is opened
//! relative to the directory holding it, `O_NOFOLLOW`, and only if it is a regular file. A symlink
//! is never followed, so nothing outside the root is ever read, and the server's state
//! directories are skipped at every depth.
//!
//! The walk runs on a few threads (one per core, as ripgrep's), each searching the files it
//! meets and handing subdirectories to the others when they run short of work. Results are put
//! in path order (name order, depth first) however the threads met them, and the result cap
//! keeps the first matches in that order, so the same tree gives the same answer every time.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::{Override, OverrideBuilder};
use rustix::fs::{FileType, Mode, OFlags};
use serde_json::{json, Map, Value};

mod ignores;

use self::ignores::{Budget, IgnoreLevel};
use super::error::FsError;
use super::list::HIDDEN_DIRS;
use super::paging;
use super::schema::{cursor_property, object, PAGED};
use super::target;
use super::tools::SEARCH_CONTENT;
use super::{reject_unknown, FsContext};
use mcp_core::budget::{cursor_note, entry_digest, json_len, Cursor, CursorError, CURSOR_ARG};
use mcp_core::toolset::{Args, CallContext, Effects, Stop, ToolDef, ToolOutput};
use workspace::guard::{display_relative, Resolved};
use workspace::walk::{self, Tree};

/// The number of matching lines returned when `maxResults` is not given: enough to see where
/// something is used, few enough not to flood the model's context.
pub const DEFAULT_MAX_RESULTS: u64 = 200;

/// The most matching lines one call returns, whatever `maxResults` asks.
pub const MAX_RESULTS: u64 = 2000;

/// The most context lines before and after each match.
pub const MAX_CONTEXT_LINES: u64 = 10;

/// The most bytes of text one call returns (lines and context together); past it the answer is
/// cut and says so, so a pattern matching every long line of a tree cannot flood the context.
pub const MAX_OUTPUT_BYTES: usize = 512 * 1024;

/// The most bytes of one line shown; a longer line (minified code, a data file) is cut with a
/// note of how much was left out.
pub const MAX_LINE_BYTES: usize = 500;

/// The least the answer adds to a line besides its path and text: two separators, a one-digit
/// line number and the line ending. Counted low on purpose: the walk's count must never exceed
/// the answer it stands for, so the answer's own cut falls at or before the walk's.
const LINE_FRAME_BYTES: usize = 4;

/// The longest pattern accepted.
const MAX_PATTERN_BYTES: usize = 4096;

/// The most `include` or `exclude` globs.
const MAX_GLOBS: usize = 100;

/// How large the compiled pattern may grow (grep-regex's own default is 100 MiB): bounded so a
/// pattern like `\w{1000}{1000}` is refused at once instead of taking the server's memory.
const REGEX_SIZE_LIMIT: usize = 16 * 1024 * 1024;

/// The most walker threads (each searches the files it meets).
const MAX_WORKERS: usize = 8;

/// The definition of `search_content`.
pub fn definition() -> ToolDef {
    ToolDef {
        name: SEARCH_CONTENT.into(),
        title: "Search File Contents".into(),
        description: format!(
            "Search file contents for a regular expression (Rust/ripgrep syntax) or, with fixedStrings, a literal text, \
             below a directory (or in one file). Answers one line per match as `path:line:text` (root-relative path, \
             1-based line number); with contextLines, surrounding lines are shown as `path-line-text` and separate \
             groups are divided by `--`, as ripgrep does. Case: smart by default (case-insensitive when the pattern \
             has no uppercase letter); caseSensitive true or false forces it. include/exclude are globs matched \
             against paths relative to `path` (a glob without '/' matches names at any depth, e.g. \"*.rs\"; \
             an excluded directory is not searched). Binary files, symlinks, build/cache directories \
             (.git, node_modules, target, …) and .gitignore'd entries are skipped. At most maxResults matching lines \
             (default {DEFAULT_MAX_RESULTS}, at most {MAX_RESULTS}) in all pages together; an answer cut by that cap ends with a \
             [truncated: …] note. {PAGED} (With contextLines, a page's first match brings its leading context again.)"
        ),
        input_schema: object(
            json!({
                "pattern": {"type": "string", "maxLength": MAX_PATTERN_BYTES, "description": "The regular expression to search for (or the literal text, with fixedStrings)"},
                "path": {"type": "string", "default": ".", "description": "The directory to search below, or one file, relative to the workspace root (or absolute inside it)"},
                "fixedStrings": {"type": "boolean", "default": false, "description": "Treat pattern as literal text, not a regular expression"},
                "caseSensitive": {"type": "boolean", "description": "true: match case exactly; false: ignore case; omitted: smart case (ignore case unless the pattern has an uppercase letter)"},
                "include": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_GLOBS, "default": [], "description": "Only search files matching one of these globs, e.g. [\"*.rs\", \"docs/**/*.md\"]"},
                "exclude": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_GLOBS, "default": [], "description": "Skip files and directories matching any of these globs, e.g. [\"*.min.js\", \"vendor\"]"},
                "contextLines": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT_LINES, "default": 0, "description": "Lines of context to show before and after each match"},
                "maxResults": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": DEFAULT_MAX_RESULTS, "description": "The most matching lines to return (over all pages)"},
                "cursor": cursor_property(),
            }),
            &["pattern"],
        ),
        output_schema: Some(json!({
            "type": "object",
            "properties": {
                "matches": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string", "description": "Root-relative path of the file"},
                            "line": {"type": "integer", "description": "1-based line number"},
                            "text": {"type": "string", "description": "The matching line, without its line ending"},
                        },
                        "required": ["path", "line", "text"],
                    },
                },
                "truncated": {"type": "boolean", "description": "True when more matches exist than were returned"},
                "next_cursor": {"type": "string", "description": "Present when the answer was cut at the result budget: pass it as cursor for the next page"},
            },
            "required": ["matches", "truncated"],
        })),
        effects: Effects::READ_ONLY,
    }
}

/// What one call asks for, checked.
struct Query {
    matcher: RegexMatcher,
    context: usize,
    max_results: usize,
    include: Override,
    exclude: Override,
}

/// `search_content`.
pub fn search_content(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(
        args,
        &[
            "pattern",
            "path",
            "fixedStrings",
            "caseSensitive",
            "include",
            "exclude",
            "contextLines",
            "maxResults",
            CURSOR_ARG,
        ],
    )?;
    let a = Args(args);
    let pattern = a.str("pattern")?;
    let path = a.opt_str("path")?.unwrap_or(".");
    let query = Query {
        matcher: matcher(
            pattern,
            a.opt_bool("fixedStrings")?.unwrap_or(false),
            a.opt_bool("caseSensitive")?,
        )?,
        context: bounded(&a, "contextLines", 0, 0, MAX_CONTEXT_LINES)?,
        max_results: bounded(&a, "maxResults", DEFAULT_MAX_RESULTS, 1, MAX_RESULTS)?,
        include: globs(&a, "include", false)?,
        exclude: globs(&a, "exclude", true)?,
    };
    let page = SearchPage {
        from: paging::cursor(SEARCH_CONTENT, args)?,
        room: cx.options.result_budget.for_entries(),
    };
    let resolved = cx.guard.resolve(path)?;
    let fd = match cx.guard.open_beneath(
        &resolved,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            return search_one_file(cx, &resolved, &query, ctx, page, args)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(target::not_found(&resolved.relative))
        }
        Err(e) => return Err(target::io_error("cannot open", &resolved.relative, e)),
    };
    let budget = Budget::default();
    let ignores = ignores::ancestors(&cx.guard, &resolved, &budget);
    let mut results = Results::new(&query, page);
    // The start is listed here, so a directory that cannot be read is an error, not an empty
    // answer (below it, such a directory is simply not searched).
    let tree = Tree::new(fd)
        .map_err(|e| target::io_error("cannot read directory", &resolved.relative, e))?;
    let walk = Walk {
        start: &resolved,
        query: &query,
        budget: &budget,
        ctx,
    };
    run(tree, ignores, &walk, &mut results).map_err(|stop| FsError::Stopped {
        stop,
        what: format!("search_content in '{}'", resolved.display()),
    })?;
    results.note = budget.note();
    results.finish(args)
}

/// A named file: searched whatever its name (the filters choose among a directory's entries, and
/// this one was asked for), but still only if it is a regular text file.
fn search_one_file(
    cx: &FsContext,
    resolved: &Resolved,
    query: &Query,
    ctx: &CallContext,
    page: SearchPage,
    args: &Map<String, Value>,
) -> Result<ToolOutput, FsError> {
    let file = target::open_for_reading(&cx.guard, resolved)?;
    workspace::require_regular(&file).map_err(|e| {
        FsError::InvalidArgument(format!("'{}' cannot be searched: {e}", resolved.display()))
    })?;
    let what = || format!("search_content in '{}'", resolved.display());
    FsError::check(ctx, what)?;
    let mut results = Results::new(query, page);
    let shown = display_relative(&resolved.relative);
    let hits = search_file(&mut searcher(query), query, &file, shown.len(), ctx);
    FsError::check(ctx, what)?;
    results.add(&shown, hits);
    results.finish(args)
}

/// The compiled pattern, or `InvalidArgument` saying what is wrong with it.
fn matcher(
    pattern: &str,
    fixed: bool,
    case_sensitive: Option<bool>,
) -> Result<RegexMatcher, FsError> {
    if pattern.is_empty() {
        return Err(FsError::InvalidArgument(
            "'pattern' is empty; give the text or regular expression to search for".into(),
        ));
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(FsError::InvalidArgument(format!(
            "'pattern' is {} bytes, more than the {MAX_PATTERN_BYTES} accepted; search for a shorter, distinctive part",
            pattern.len()
        )));
    }
    let mut b = RegexMatcherBuilder::new();
    b.fixed_strings(fixed)
        .line_terminator(Some(b'\n'))
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT);
    match case_sensitive {
        None => b.case_smart(true),
        Some(yes) => b.case_insensitive(!yes),
    };
    b.build(pattern).map_err(|e| {
        let hint = if fixed {
            ""
        } else {
            "; to search for literal text containing characters like ( [ . * set fixedStrings to true"
        };
        FsError::InvalidArgument(format!(
            "'pattern' is not a valid regular expression: {}{hint}",
            e.to_string().trim_end()
        ))
    })
}

/// An optional whole-number argument between `min` and `max`, `default` when absent.
fn bounded(a: &Args, name: &str, default: u64, min: u64, max: u64) -> Result<usize, FsError> {
    let n = a.opt_u64(name)?.unwrap_or(default);
    if n < min || n > max {
        return Err(FsError::InvalidArgument(format!(
            "'{name}' is {n}; give a number from {min} to {max}"
        )));
    }
    Ok(n as usize)
}

/// `include` or `exclude` as ripgrep's `--glob` sees them: gitignore-style globs on paths relative
/// to the search's start. Excludes are negated so that a match means "leave out".
fn globs(a: &Args, name: &str, negate: bool) -> Result<Override, FsError> {
    let list = a.opt_str_list(name)?.unwrap_or_default();
    if list.len() > MAX_GLOBS {
        return Err(FsError::InvalidArgument(format!(
            "'{name}' has {} globs; give at most {MAX_GLOBS}",
            list.len()
        )));
    }
    let mut b = OverrideBuilder::new(".");
    for raw in list {
        let p = raw.trim();
        let p = p.strip_prefix("./").unwrap_or(p);
        if p.is_empty() {
            continue;
        }
        if p.starts_with('!') {
            return Err(FsError::InvalidArgument(format!(
                "'{name}' entry '{raw}' starts with '!'; put globs to leave out in 'exclude' instead"
            )));
        }
        let glob = if negate {
            format!("!{p}")
        } else {
            p.to_string()
        };
        b.add(&glob).map_err(|e| {
            FsError::InvalidArgument(format!(
                "'{name}' entry '{raw}' is not a valid glob ({e}); use patterns like \"*.rs\", \"src/**/*.md\" or \"vendor\""
            ))
        })?;
    }
    b.build()
        .map_err(|e| FsError::InvalidArgument(format!("'{name}': {e}")))
}

/// One line of a file's answer.
#[derive(Debug)]
enum Hit {
    /// A matching line: its number and text.
    Match(u64, String),
    /// A context line.
    Context(u64, String),
    /// A gap between groups of lines (only with context).
    Break,
}

/// What searching one file found: its lines in order (none for a binary file), with how many
/// of them match and how many bytes they take in the answer (each with its path, which may be
/// far longer than the line: a tree can be thousands of levels deep), so the answer's bounds,
/// and the memory of files kept for it, are kept before the file's turn comes.
#[derive(Debug, Default)]
struct FileHits {
    lines: Vec<Hit>,
    matches: usize,
    bytes: usize,
}

/// A searcher configured for `query`.
fn searcher(query: &Query) -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .before_context(query.context)
        .after_context(query.context)
        // As ripgrep does for the files it finds: a NUL byte means binary, and the search stops.
        .binary_detection(BinaryDetection::quit(0))
        .build()
}

/// Collects one file's lines, stopping once more matches than the call can return were seen,
/// or more bytes than it can show.
struct Collect<'a> {
    hits: FileHits,
    limit: usize,
    /// Bytes the answer adds to each line besides its text: the path and the line number.
    per_line: usize,
    binary: bool,
    ctx: &'a CallContext,
}

impl Collect<'_> {
    /// True while the search of this file should go on.
    fn go_on(&self) -> bool {
        self.hits.matches <= self.limit
            && self.hits.bytes <= MAX_OUTPUT_BYTES
            && !self.ctx.cancel.is_cancelled()
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let text = line_text(m.bytes());
        self.hits.matches += 1;
        self.hits.bytes += self.per_line + text.len();
        self.hits
            .lines
            .push(Hit::Match(m.line_number().unwrap_or(0), text));
        Ok(self.go_on())
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        let text = line_text(c.bytes());
        self.hits.bytes += self.per_line + text.len();
        self.hits
            .lines
            .push(Hit::Context(c.line_number().unwrap_or(0), text));
        Ok(self.go_on())
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        self.hits.lines.push(Hit::Break);
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A line as shown: without its line ending, invalid UTF-8 replaced, at most [`MAX_LINE_BYTES`].
fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    if bytes.len() <= MAX_LINE_BYTES {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut cut = MAX_LINE_BYTES;
    // Cut on a character boundary (a UTF-8 continuation byte is 0b10xxxxxx).
    while cut > 0 && (bytes[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    format!(
        "{}… [{} more bytes]",
        String::from_utf8_lossy(&bytes[..cut]),
        bytes.len() - cut
    )
}

/// The lines of `file` that `query` finds; empty for a binary file (its earlier matches too: a
/// binary file is skipped whole), one that cannot be read, or one whose search was stopped
/// (cancelled or out of time: the caller's next check says so). `shown` is the length of the
/// path the answer puts before each of its lines, counted with them against the output bound.
fn search_file(
    searcher: &mut Searcher,
    query: &Query,
    file: &File,
    shown: usize,
    ctx: &CallContext,
) -> FileHits {
    let mut sink = Collect {
        hits: FileHits::default(),
        limit: query.max_results,
        per_line: shown + LINE_FRAME_BYTES,
        binary: false,
        ctx,
    };
    // What `search_file` would do with memory maps off (the default): read it in bounded
    // chunks, through a reader that stops once the call must.
    match searcher.search_reader(&query.matcher, Watched::new(file, ctx), &mut sink) {
        Ok(()) if !sink.binary => sink.hits,
        _ => FileHits::default(),
    }
}

/// How many bytes of a file are read between two looks at the call's cancel token and clock.
/// The searcher matches what it has read before it reads more, so however slowly a pattern
/// matches, a search stops within the time this many bytes take (about half a second for the
/// slowest patterns seen, in an unoptimised build); small files, checked by the walk before
/// their search, never look. A look is a clock read, nothing next to the read it comes with.
const CHECK_EVERY_BYTES: u64 = 256 * 1024;

/// A file read for a search that fails once the call was cancelled or ran out of time: the
/// searcher checks nothing while it matches, so without this a slow pattern over one large file
/// with no match would run long past the limit and hold its lane.
struct Watched<'a> {
    file: &'a File,
    ctx: &'a CallContext,
    /// Bytes read since the last look.
    unchecked: u64,
}

impl<'a> Watched<'a> {
    fn new(file: &'a File, ctx: &'a CallContext) -> Watched<'a> {
        Watched {
            file,
            ctx,
            unchecked: 0,
        }
    }
}

impl Read for Watched<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.unchecked >= CHECK_EVERY_BYTES {
            self.unchecked = 0;
            if self.ctx.stopped().is_some() {
                // The caller's own check turns this into the call's answer.
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the call was cancelled or ran out of time",
                ));
            }
        }
        let n = self.file.read(buf)?;
        self.unchecked += n as u64;
        Ok(n)
    }
}

/// Which page of matches one call answers: the matches after the cursor's position, as many as
/// fit in `room` bytes (text and structured copy together).
#[derive(Clone, Copy)]
struct SearchPage {
    from: Option<Cursor>,
    room: usize,
}

/// The answer being built, in walk order.
///
/// Every line is counted as the whole (unpaged) answer would hold it, so the caps (`maxResults`,
/// [`MAX_OUTPUT_BYTES`]) cut the same place on every page; only the lines of this page are kept.
struct Results {
    text: String,
    matches: Vec<Value>,
    /// Matches counted so far, those of earlier pages included.
    count: usize,
    limit: usize,
    context: bool,
    /// Why the answer was cut, once it was.
    cut: Option<String>,
    /// Said after the lines: what the search left out besides them (ignore files over budget).
    note: Option<String>,
    /// The bytes the whole answer would hold so far.
    whole: usize,
    /// The bytes of this page's structured copy so far.
    structured: usize,
    page: SearchPage,
    /// Context lines seen since the last match, before this page's first match: they lead it.
    lead: Vec<(u64, String, String)>,
    /// True once this page shows a match.
    showing: bool,
    /// Where the next page starts, once this one is full: the next match's number, and the
    /// digest of the last match shown.
    next: Option<(usize, u64)>,
    /// The digest of the last match shown.
    last: u64,
}

/// How a match is named in a cursor: its path and line.
fn match_key(path: &str, line: u64) -> Vec<u8> {
    format!("{path}:{line}").into_bytes()
}

impl Results {
    fn new(query: &Query, page: SearchPage) -> Results {
        Results {
            text: String::new(),
            matches: Vec::new(),
            count: 0,
            limit: query.max_results,
            context: query.context > 0,
            cut: None,
            note: None,
            whole: 0,
            structured: 0,
            page,
            lead: Vec::new(),
            showing: page.from.is_none(),
            next: None,
            last: 0,
        }
    }

    /// Where this page starts: the number of matches of earlier pages.
    fn skip(&self) -> usize {
        self.page
            .from
            .map_or(0, |c| usize::try_from(c.position).unwrap_or(usize::MAX))
    }

    /// True once nothing more can be added.
    fn full(&self) -> bool {
        self.cut.is_some() || self.next.is_some()
    }

    /// A separator line (`--`), counted in the whole answer and shown when this page is.
    fn separator(&mut self) {
        self.whole += 3;
        if self.showing {
            self.text.push_str("--\n");
        } else {
            self.lead.clear();
        }
    }

    /// Appends one file's lines, as far as the limits allow.
    fn add(&mut self, path: &str, hits: FileHits) {
        if hits.matches > 0 && self.count == self.limit {
            // Not even the context before this file's first match: none of it is shown.
            self.cut_at_limit();
            return;
        }
        if !self.showing {
            // Context of another file never leads this one's match.
            self.lead.clear();
        }
        let mut first = true;
        for hit in hits.lines {
            if self.full() {
                return;
            }
            let (sep, line, text) = match hit {
                Hit::Match(_, _) | Hit::Break if self.count == self.limit => {
                    // Another match, or a gap before the group of another match: there is
                    // more than the cap lets through.
                    self.cut_at_limit();
                    return;
                }
                Hit::Match(n, t) => (':', n, t),
                Hit::Context(n, t) => ('-', n, t),
                Hit::Break => {
                    self.separator();
                    continue;
                }
            };
            // Groups of different files are divided like groups within one, as ripgrep does.
            if first && self.context && self.whole > 0 {
                self.separator();
            }
            first = false;
            let len = path.len() + 2 + decimal_len(line) + text.len() + 1;
            if self.whole + len > MAX_OUTPUT_BYTES {
                self.cut = Some(format!(
                    "the answer reached {} KiB; the lines after this point are not shown. Narrow the pattern or the path, or add include/exclude globs",
                    MAX_OUTPUT_BYTES / 1024
                ));
                return;
            }
            let is_match = sep == ':';
            if !self.showing {
                self.whole += len;
                if !is_match {
                    self.lead.push((line, text, path.to_string()));
                    continue;
                }
                let number = self.count;
                self.count += 1;
                if number + 1 == self.skip() {
                    // The match the cursor continues after must still be where it was.
                    let key = entry_digest(&match_key(path, line));
                    if self.page.from.is_some_and(|c| c.anchor != key) {
                        self.cut = Some(STALE.into());
                        return;
                    }
                }
                if number < self.skip() {
                    self.lead.clear();
                    continue;
                }
                // This page's first match: its leading context first.
                self.showing = true;
                for (n, t, p) in std::mem::take(&mut self.lead) {
                    self.push_line(&p, '-', n, &t);
                }
                self.push_match(path, line, text);
                continue;
            }
            let item = is_match.then(|| json!({"path": path, "line": line, "text": text}));
            let cost = len + item.as_ref().map_or(0, |v| json_len(v) + 1);
            if !self.matches.is_empty() && self.text.len() + self.structured + cost > self.page.room
            {
                self.next = Some((self.count, self.last));
                return;
            }
            self.whole += len;
            match item {
                Some(item) => {
                    self.count += 1;
                    self.structured += json_len(&item) + 1;
                    self.last = entry_digest(&match_key(path, line));
                    self.matches.push(item);
                    self.push_line(path, sep, line, &text);
                }
                None => self.push_line(path, sep, line, &text),
            }
        }
    }

    /// Shows the first match of a page (counted already).
    fn push_match(&mut self, path: &str, line: u64, text: String) {
        let item = json!({"path": path, "line": line, "text": text});
        self.structured += json_len(&item) + 1;
        self.last = entry_digest(&match_key(path, line));
        self.push_line(path, ':', line, &text);
        self.matches.push(item);
    }

    /// Appends one line of the answer as `path<sep>line<sep>text`.
    fn push_line(&mut self, path: &str, sep: char, line: u64, text: &str) {
        self.text.push_str(path);
        self.text.push(sep);
        self.text.push_str(&line.to_string());
        self.text.push(sep);
        self.text.push_str(text);
        self.text.push('\n');
    }

    /// Ends the answer at the result cap.
    fn cut_at_limit(&mut self) {
        self.cut = Some(format!(
            "more than {} matching lines; only the first {} are shown. Narrow the pattern or the path, add include/exclude globs, or raise maxResults (at most {MAX_RESULTS})",
            self.limit, self.limit
        ));
    }

    fn finish(mut self, args: &Map<String, Value>) -> Result<ToolOutput, FsError> {
        if self.cut.as_deref() == Some(STALE) || (self.page.from.is_some() && !self.showing) {
            // The cursor's match is gone, or lies past the matches there are now.
            return Err(FsError::InvalidArgument(CursorError::Stale.to_string()));
        }
        if let Some((next, last)) = self.next {
            let cursor = Cursor {
                position: next as u64,
                anchor: last,
            }
            .encode(SEARCH_CONTENT, args);
            self.text.push_str(&cursor_note(
                "matches",
                self.skip() as u64 + 1,
                next as u64,
                None,
                &cursor,
            ));
            if let Some(note) = &self.note {
                self.text.push_str(&format!("\n[note: {note}]"));
            }
            return Ok(ToolOutput::structured(
                self.text,
                json!({"matches": self.matches, "truncated": true, "next_cursor": cursor}),
            ));
        }
        let truncated = self.cut.is_some();
        if self.count == 0 && !truncated {
            let mut text = "No matches found".to_string();
            if let Some(note) = &self.note {
                text.push_str(&format!("\n[note: {note}]"));
            }
            return Ok(ToolOutput::structured(
                text,
                json!({"matches": [], "truncated": false}),
            ));
        }
        if let Some(why) = &self.cut {
            self.text.push_str(&format!("[truncated: {why}]"));
        } else if self.text.ends_with('\n') {
            self.text.pop();
        }
        if let Some(note) = &self.note {
            self.text.push_str(&format!("\n[note: {note}]"));
        }
        Ok(ToolOutput::structured(
            self.text,
            json!({"matches": self.matches, "truncated": truncated}),
        ))
    }
}

/// What [`Results::cut`] holds when the cursor's match was not found where it was.
const STALE: &str = "stale cursor";

/// The digits of `n` in decimal.
fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// A subtree waiting for a walker: its directory, opened beneath the root without following
/// links, its path and depth below the search's start, and the `.gitignore` rules in force above
/// it (its own are read when it is walked).
struct Subtree {
    top: Top,
    path: PathBuf,
    depth: usize,
    ignores: Vec<Arc<IgnoreLevel>>,
}

/// A subtree's directory: the start, already listed, or one handed off, only opened (the walker
/// that takes it lists it).
enum Top {
    Listed(Tree),
    Open(OwnedFd),
}

/// The subtrees waiting for a walker, and how many walkers are at work.
struct Queue {
    waiting: VecDeque<Subtree>,
    busy: usize,
    /// Why the search stopped early (cancelled, out of time), once it did.
    stop: Option<Stop>,
}

/// The files with matching lines found so far, by path below the start, and the point after
/// which nothing more can be shown.
struct Collected {
    files: BTreeMap<PathBuf, (String, FileHits)>,
    matches: usize,
    bytes: usize,
    /// Set once `files` up to and including this path hold more than the answer can show:
    /// anything after it in path order (name order, depth first) is not needed.
    cutoff: Option<PathBuf>,
}

/// What one search walks with: where it starts, what it looks for, what its ignore rules may
/// cost, and the call's cancel token and clock.
#[derive(Clone, Copy)]
struct Walk<'a> {
    start: &'a Resolved,
    query: &'a Query,
    budget: &'a Budget,
    ctx: &'a CallContext,
}

/// What the walkers share.
struct Shared<'a> {
    query: &'a Query,
    start: &'a Resolved,
    budget: &'a Budget,
    ctx: &'a CallContext,
    workers: usize,
    queue: Mutex<Queue>,
    wake: Condvar,
    found: Mutex<Collected>,
    /// True once `found` has a cutoff, so the walkers look at it only then.
    cut: AtomicBool,
}

impl Shared<'_> {
    /// True when `path` comes after the cutoff in path order: neither it nor anything below it
    /// can be shown. A path is after a directory's path exactly when it is not inside it and
    /// sorts after it, so a directory past the cutoff holds nothing before it.
    fn beyond(&self, path: &Path) -> bool {
        if !self.cut.load(Ordering::Acquire) {
            return false;
        }
        lock(&self.found)
            .cutoff
            .as_deref()
            .is_some_and(|c| path > c)
    }

    /// Records one file's lines, then keeps only the files the answer can show (the first in
    /// path order up to and including the one that goes past the result cap or the output
    /// bound): the same files whatever order the walkers found them in.
    fn add(&self, path: PathBuf, hits: FileHits) {
        let mut found = lock(&self.found);
        if found.cutoff.as_deref().is_some_and(|c| path.as_path() > c) {
            return;
        }
        let shown = display_relative(&self.start.relative.join(&path));
        found.matches += hits.matches;
        found.bytes += hits.bytes;
        found.files.insert(path, (shown, hits));
        if found.matches <= self.query.max_results && found.bytes <= MAX_OUTPUT_BYTES {
            return;
        }
        // The counted bytes (each line's path, text and least framing) are never more than the
        // answer they make, so the answer is cut at this file or before it. And a file counts at
        // least its path once while its entry here holds it twice, so what is kept stays within a
        // small multiple of the output bound however deep the paths are.
        let (mut matches, mut bytes) = (0, 0);
        let mut last = None;
        for (p, (_, h)) in &found.files {
            matches += h.matches;
            bytes += h.bytes;
            if matches > self.query.max_results || bytes > MAX_OUTPUT_BYTES {
                last = Some(p.clone());
                break;
            }
        }
        let Some(last) = last else { return };
        let mut after = found.files.split_off(&last);
        if let Some(kept) = after.remove(&last) {
            found.files.insert(last.clone(), kept);
        }
        found.matches = matches;
        found.bytes = bytes;
        found.cutoff = Some(last);
        self.cut.store(true, Ordering::Release);
    }

    /// True when another walker could use a subtree: fewer are waiting than there are walkers.
    /// Keeps the queue (and the directories it holds open) that short.
    fn wants_work(&self) -> bool {
        self.workers > 1 && lock(&self.queue).waiting.len() < self.workers
    }

    fn hand_off(&self, subtree: Subtree) {
        lock(&self.queue).waiting.push_back(subtree);
        self.wake.notify_one();
    }

    /// The next subtree to walk; `None` when there is none and no walker could add one, or the
    /// search was stopped.
    fn take(&self) -> Option<Subtree> {
        let mut q = lock(&self.queue);
        loop {
            if q.stop.is_some() {
                return None;
            }
            if let Some(next) = q.waiting.pop_front() {
                q.busy += 1;
                return Some(next);
            }
            if q.busy == 0 {
                return None;
            }
            q = self.wake.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A walker finished a subtree, or was stopped in it.
    fn done(&self, outcome: Result<(), Stop>) {
        let mut q = lock(&self.queue);
        q.busy -= 1;
        if let Err(stop) = outcome {
            q.stop.get_or_insert(stop);
            q.waiting.clear();
        }
        if q.busy == 0 || q.stop.is_some() {
            self.wake.notify_all();
        }
    }
}

/// One walker's turn at a subtree; tells the others when it ends, however it ends.
struct Walking<'s, 'a> {
    shared: &'s Shared<'a>,
    outcome: Result<(), Stop>,
}

impl Drop for Walking<'_, '_> {
    fn drop(&mut self) {
        self.shared
            .done(std::mem::replace(&mut self.outcome, Ok(())));
    }
}

/// A mutex's guard, also after a walker panicked while holding it (what it guards stays
/// consistent between statements; the panic itself ends the call when the scope joins).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Walks the start directory `top` on a few threads, each of them searching the files it meets
/// (as ripgrep does), and adds what they find to `results` in path order. A walker hands a
/// subdirectory to the others while fewer subtrees wait than there are walkers, and goes into
/// it itself otherwise; so at most that many directories wait open besides each walker's own
/// path. `Err` when the call was cancelled or ran out of time.
fn run(
    top: Tree,
    ancestors: Vec<IgnoreLevel>,
    walk: &Walk,
    results: &mut Results,
) -> Result<(), Stop> {
    let Walk {
        start,
        query,
        budget,
        ctx,
    } = *walk;
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, MAX_WORKERS);
    let shared = Shared {
        query,
        start,
        budget,
        ctx,
        workers,
        queue: Mutex::new(Queue {
            waiting: VecDeque::from([Subtree {
                top: Top::Listed(top),
                path: PathBuf::new(),
                depth: 0,
                ignores: ancestors.into_iter().map(Arc::new).collect(),
            }]),
            busy: 0,
            stop: None,
        }),
        wake: Condvar::new(),
        found: Mutex::new(Collected {
            files: BTreeMap::new(),
            matches: 0,
            bytes: 0,
            cutoff: None,
        }),
        cut: AtomicBool::new(false),
    };
    let walker = |shared: &Shared| {
        let mut searcher = searcher(shared.query);
        while let Some(subtree) = shared.take() {
            // Reports the subtree done even if the walk panics, so the other walkers do not
            // wait for it forever (the panic then ends the call when the scope joins).
            let mut walking = Walking {
                shared,
                outcome: Ok(()),
            };
            walking.outcome = walk_subtree(subtree, shared, &mut searcher);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..workers {
            s.spawn(|| walker(&shared));
        }
        walker(&shared);
    });
    if let Some(stop) = lock(&shared.queue).stop.take() {
        return Err(stop);
    }
    let found = std::mem::replace(
        &mut *lock(&shared.found),
        Collected {
            files: BTreeMap::new(),
            matches: 0,
            bytes: 0,
            cutoff: None,
        },
    );
    for (_, (shown, hits)) in found.files {
        results.add(&shown, hits);
    }
    // A full answer is complete as it is, even if the clock ran out just after.
    if results.full() {
        return Ok(());
    }
    ctx.check()
}

/// Walks one subtree in name order, depth first, searching every file `query` admits and
/// handing subdirectories to other walkers when they could use one. A directory that cannot be
/// read, was swapped for a link or lies too deep is simply not searched.
fn walk_subtree(subtree: Subtree, shared: &Shared, searcher: &mut Searcher) -> Result<(), Stop> {
    let (query, ctx) = (shared.query, shared.ctx);
    if shared.beyond(&subtree.path) {
        return Ok(());
    }
    let mut tree = match subtree.top {
        Top::Listed(tree) => tree,
        Top::Open(fd) => match Tree::below(fd, subtree.depth) {
            Ok(tree) => tree,
            Err(_) => return Ok(()),
        },
    };
    let mut ignores = subtree.ignores;
    ignores.extend(
        ignores::own(
            &mut tree,
            subtree.depth,
            shared.start,
            &subtree.path,
            shared.budget,
        )
        .map(Arc::new),
    );
    while let Some(entry) = tree.next_entry() {
        ctx.check()?;
        // How far below the search's start the directory holding it is.
        let depth = subtree.depth + entry.depth;
        // Rules of directories the walk has climbed out of no longer apply.
        while ignores.last().is_some_and(|l| l.depth > depth) {
            ignores.pop();
        }
        let name = entry.name.as_bytes();
        let is_dir = match entry.kind {
            FileType::Directory => true,
            FileType::RegularFile => false,
            // Symlinks are never followed; FIFOs, sockets and devices hold no text.
            _ => continue,
        };
        if workspace::guard::STATE_DIRS
            .iter()
            .any(|s| s.as_bytes() == name)
            || workspace::temp::is_reserved(name)
            || (is_dir && HIDDEN_DIRS.iter().any(|h| h.as_bytes() == name))
        {
            continue;
        }
        let path = subtree.path.join(&entry.path);
        if query.exclude.matched(&path, is_dir).is_ignore() {
            continue;
        }
        let ignored = ignores
            .iter()
            .rev()
            .map(|l| l.verdict(&path, is_dir))
            .find(|m| !m.is_none())
            .is_some_and(|m| m.is_ignore());
        if ignored || shared.beyond(&path) {
            continue;
        }
        if is_dir {
            // Handed off only where this walk could go in itself (the depth limit of one walk
            // of the whole tree), opened as going in would open it.
            if depth < walk::MAX_DEPTH && shared.wants_work() {
                if let Some(fd) = tree
                    .current()
                    .and_then(|dir| walk::open_dir_at(dir, &entry.name).ok())
                {
                    shared.hand_off(Subtree {
                        top: Top::Open(fd),
                        path,
                        depth: depth + 1,
                        ignores: ignores.clone(),
                    });
                }
                continue;
            }
            if tree.descend().is_ok() {
                ignores.extend(
                    ignores::own(&mut tree, depth + 1, shared.start, &path, shared.budget)
                        .map(Arc::new),
                );
            }
            continue;
        }
        if query.include.matched(&path, false).is_ignore() {
            continue;
        }
        let Some(dir) = tree.current() else { continue };
        // An empty file has no line to match: one `statat` instead of opening, reading and
        // closing it (a tree of many small files has many empty ones). A file written between
        // the look and the search would be missed either way.
        if walk::stat_at(dir, &entry.name).is_ok_and(|st| st.is_some_and(|st| st.size == 0)) {
            continue;
        }
        // Gone, swapped for something else, or unreadable since it was listed: skipped.
        let Ok(file) = walk::open_file_at(dir, &entry.name) else {
            continue;
        };
        // The length of the path as the answer shows it (the start's, a separator, then this
        // one), without building it for every file searched.
        let shown = match shared.start.relative.as_os_str().len() {
            0 => path.as_os_str().len(),
            start => start + 1 + path.as_os_str().len(),
        };
        let hits = search_file(searcher, query, &file, shown, ctx);
        if !hits.lines.is_empty() {
            shared.add(path, hits);
        }
    }
    Ok(())
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn query(pattern: &str, max: usize, context: usize) -> Query {
        Query {
            matcher: matcher(pattern, false, None).expect("valid"),
            context,
            max_results: max,
            include: OverrideBuilder::new(".").build().expect("empty"),
            exclude: OverrideBuilder::new(".").build().expect("empty"),
        }
    }

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let line = "é".repeat(MAX_LINE_BYTES);
        let shown = line_text(line.as_bytes());
        assert!(
            shown.starts_with(&"é".repeat(MAX_LINE_BYTES / 2)),
            "{shown}"
        );
        assert!(shown.ends_with(&format!("… [{} more bytes]", MAX_LINE_BYTES)));
        assert_eq!(line_text(b"a\r\n"), "a");
    }

    #[test]
    fn the_cap_keeps_the_first_matches_and_says_so() {
        let q = query("x", 2, 0);
        let mut r = Results::new(
            &q,
            SearchPage {
                from: None,
                room: usize::MAX,
            },
        );
        let hits = |lines: Vec<Hit>| FileHits {
            matches: lines.len(),
            bytes: 0,
            lines,
        };
        r.add(
            "a",
            hits(vec![Hit::Match(1, "x".into()), Hit::Match(2, "x".into())]),
        );
        r.add("b", hits(vec![Hit::Match(3, "x".into())]));
        let out = r.finish(&Map::new()).expect("an answer");
        assert!(
            out.text
                .starts_with("a:1:x\na:2:x\n[truncated: more than 2"),
            "{}",
            out.text
        );
        assert_eq!(out.structured.expect("structured")["truncated"], true);
    }

    #[test]
    fn a_cancelled_or_timed_out_search_stops() {
        use mcp_core::toolset::Toolset;
        let tmp = tempfile::tempdir().expect("tmp");
        std::fs::write(tmp.path().join("f.txt"), "needle\n").expect("write");
        let tools = crate::FsToolset::extended_for_test(tmp.path());
        let Value::Object(args) = json!({"pattern": "needle"}) else {
            unreachable!("an object")
        };
        let calm = tools.call(SEARCH_CONTENT, &args, &CallContext::default());
        assert_eq!(calm.text, "f.txt:1:needle");
        let cancelled = CallContext::default();
        cancelled.cancel.cancel();
        let out = tools.call(SEARCH_CONTENT, &args, &cancelled);
        assert_eq!(out.error_kind.as_deref(), Some("Cancelled"), "{}", out.text);
        let late = CallContext::with_timeout(Default::default(), Some(std::time::Duration::ZERO));
        let out = tools.call(SEARCH_CONTENT, &args, &late);
        assert_eq!(out.error_kind.as_deref(), Some("Timeout"), "{}", out.text);
    }

    #[test]
    fn the_parallel_walk_answers_in_path_order_and_cuts_at_the_same_files_every_time() {
        use mcp_core::toolset::Toolset;
        let tmp = tempfile::tempdir().expect("tmp");
        // Enough directories that the walkers share them; each file matches twice.
        for d in 0..40 {
            for s in 0..3 {
                let dir = tmp.path().join(format!("d{d:02}/s{s}"));
                std::fs::create_dir_all(&dir).expect("mkdir");
                std::fs::write(dir.join("f.txt"), "hit one\nmiss\nhit two\n").expect("write");
            }
            std::fs::write(tmp.path().join(format!("d{d:02}/top.txt")), "hit\n").expect("write");
        }
        let tools = crate::FsToolset::extended_for_test(tmp.path());
        let ask = |max: u64| {
            let Value::Object(args) = json!({"pattern": "hit", "maxResults": max}) else {
                unreachable!("an object")
            };
            tools
                .call(SEARCH_CONTENT, &args, &CallContext::default())
                .text
        };
        let whole = ask(2000);
        let paths: Vec<&str> = whole
            .lines()
            .map(|l| l.split(':').next().unwrap_or(""))
            .collect();
        let mut sorted = paths.clone();
        sorted.sort_by(|a, b| Path::new(a).cmp(Path::new(b)));
        assert_eq!(paths, sorted, "{whole}");
        assert_eq!(paths.len(), 40 * 7);
        assert_eq!(paths[..3], ["d00/s0/f.txt", "d00/s0/f.txt", "d00/s1/f.txt"]);
        for _ in 0..20 {
            let cut = ask(5);
            assert_eq!(
                cut,
                format!(
                    "{}\n[truncated: more than 5 matching lines; only the first 5 are shown. Narrow the pattern or the path, add include/exclude globs, or raise maxResults (at most {MAX_RESULTS})]",
                    whole.lines().take(5).collect::<Vec<_>>().join("\n")
                )
            );
        }
    }
}
