//! The opt-in tools (`--tools extended`) that users of the reference filesystem server expect:
//! `read_multiple_files`, `get_file_info` and `find_files` (the reference's `search_files`),
//! here with their definitions; `list_directory_with_sizes` lives with the other listings in
//! `list`. Names and argument names are the reference server's, so a client configuration moves
//! over unchanged; every path goes through the guard and the workspace layer like the default
//! tools, and a symlink never leads a result (or its target's name) out of the workspace.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;

use chrono::{DateTime, SecondsFormat, Utc};
use globset::{Glob, GlobBuilder};
use rustix::fs::FileType;
use serde_json::{json, Map, Value};

use super::error::FsError;
use super::list;
use super::paging;
use super::read::into_text;
use super::schema::{cursor_property, object, path_property, PAGED};
use super::target;
use super::tools::{FIND_FILES, GET_FILE_INFO, LIST_DIRECTORY_WITH_SIZES, READ_MULTIPLE_FILES};
use super::{reject_unknown, FsContext};
use mcp_core::budget::{
    cursor_note, cut_at_line, entry_digest, json_len, thousands, Cursor, Page, ResultBudget,
    CURSOR_ARG,
};
use mcp_core::toolset::{Args, CallContext, Effects, ToolDef, ToolOutput};
use workspace::guard::{display_relative, Resolved};
use workspace::walk::Tree;

/// The most paths one `read_multiple_files` call takes: enough for any batch a model plans,
/// few enough that one call cannot open thousands of files.
pub const MAX_FILES: usize = 100;

/// The most paths one `find_files` call returns; past it the answer says it was cut, so a
/// pattern like `**` on a large tree neither floods the model nor looks complete.
pub const MAX_MATCHES: usize = 1000;

/// The most bytes of paths one `find_files` call returns. Counting paths is not enough: a tree
/// thousands of levels deep has paths of hundreds of KiB, and a thousand of them would make one
/// answer (and the memory that builds it) hundreds of MiB.
pub const MAX_FOUND_BYTES: usize = 512 * 1024;

/// The definitions of the extras, in [`super::tools::EXTRAS`] order.
pub fn definitions() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: READ_MULTIPLE_FILES.into(),
            title: "Read Multiple Files".into(),
            description: format!(
                "Read several UTF-8 text files in one call (1 to {MAX_FILES} paths). Each result is labelled with its path, \
                 in the order given (`path:` then the content, parts separated by `---`); a file that cannot be read \
                 is reported as `path: Error - reason` and does not fail the others. All files together are bounded \
                 like one read_text_file; read a large file alone with head or tail. {PAGED} A file larger than one answer \
                 is shown cut after a whole line, with the read_text_file offset that continues it."
            ),
            input_schema: object(
                json!({
                    "paths": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "maxItems": MAX_FILES,
                        "description": "The files to read, relative to the workspace root (or absolute inside it)",
                    },
                    "cursor": cursor_property(),
                }),
                &["paths"],
            ),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "files": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "path": {"type": "string"},
                                "content": {"type": "string"},
                                "error": {"type": "string"},
                                "truncated": {"type": "boolean"},
                                "next_offset": {"type": "integer"},
                                "total_lines": {"type": "integer"},
                            },
                            "required": ["path"],
                        },
                    },
                    "next_cursor": {"type": "string"},
                    "truncated": {"type": "boolean"},
                },
                "required": ["files"],
            })),
            effects: Effects::READ_ONLY,
        },
        ToolDef {
            name: GET_FILE_INFO.into(),
            title: "Get File Info".into(),
            description: "Describe a file or directory without reading it: type, size, permissions (octal), created/modified/accessed \
                          times (RFC 3339, UTC), and with version history the number of versions and the current one. A symlink \
                          is described as itself, with the workspace path it points to (a target outside the workspace is not shown)."
                .into(),
            input_schema: object(json!({"path": path_property("The file or directory to describe")}), &["path"]),
            output_schema: None,
            effects: Effects::READ_ONLY,
        },
        ToolDef {
            name: LIST_DIRECTORY_WITH_SIZES.into(),
            title: "List Directory with Sizes".into(),
            description: "List a directory's entries with file sizes, one per line as `[FILE] name size` or `[DIR] name`, then the \
                          number of files and directories and their combined size. sortBy `name` (default) or `size` (largest first). \
                          A symlink counts with its target's size only when the target is a file inside the workspace. \
                          Build/cache directories and the root .gitignore's matches are left out, as in list_directory. \
                          The totals follow the last page. "
                .to_string()
                + PAGED,
            input_schema: object(
                json!({
                    "path": path_property("The directory to list (\".\" for the root)"),
                    "cursor": cursor_property(),
                    "sortBy": {"type": "string", "enum": ["name", "size"], "default": "name", "description": "Sort entries by name or by size (largest first)"},
                }),
                &["path"],
            ),
            output_schema: None,
            effects: Effects::READ_ONLY,
        },
        ToolDef {
            name: FIND_FILES.into(),
            title: "Find Files".into(),
            description: format!(
                "Find files and directories whose path matches a glob, below a directory: the pattern is matched against the \
                 path relative to that directory, so `*.rs` finds only its direct entries and `**/*.rs` finds them at any depth \
                 (case-sensitive; `*` does not cross `/`). excludePatterns leave entries out and are not descended into (a pattern \
                 without '/' matches names at any depth). Matches by name, not content. Answers root-relative paths, one per line, \
                 at most {MAX_MATCHES} (and {} KiB of paths) in all pages together. {PAGED}",
                MAX_FOUND_BYTES / 1024
            ),
            input_schema: object(
                json!({
                    "path": path_property("The directory to search below (\".\" for the root)"),
                    "pattern": {"type": "string", "description": "Glob matched against paths relative to `path`, e.g. \"**/*.md\""},
                    "excludePatterns": {"type": "array", "items": {"type": "string"}, "default": [], "description": "Glob patterns to leave out"},
                    "cursor": cursor_property(),
                }),
                &["path", "pattern"],
            ),
            output_schema: None,
            effects: Effects::READ_ONLY,
        },
    ]
}

/// `read_multiple_files`.
pub fn read_multiple_files(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["paths", CURSOR_ARG])?;
    let from = paging::cursor(READ_MULTIPLE_FILES, args)?;
    let Some(paths) = Args(args).opt_str_list("paths")? else {
        return Err(FsError::InvalidArgument(
            "'paths' is required: an array of the files to read".into(),
        ));
    };
    if paths.is_empty() || paths.len() > MAX_FILES {
        return Err(FsError::InvalidArgument(format!(
            "'paths' has {} entries; give 1 to {MAX_FILES} files per call (split a longer list into several calls)",
            paths.len()
        )));
    }
    let outcomes = read_all(cx, &paths, ctx)?;
    // The text is written once into a string of its final size: with a part per file joined
    // at the end, every file's content was copied twice more and the allocator grew the heap
    // a page at a time for the parts, which cost more than the reads of small files (profile
    // in benches/FINDINGS.md). Each content then moves, uncopied, into the structured answer.
    let size: usize = paths
        .iter()
        .zip(&outcomes)
        .map(|(path, outcome)| {
            // ":\n" and "\n" around a content, ": Error - " before a message.
            let body = match outcome {
                Ok(content) => content.len() + 3,
                Err(message) => message.len() + 10,
            };
            path.len() + body + SEPARATOR.len()
        })
        .sum();
    let budget = cx.options.result_budget;
    // The structured copy holds every content again: an answer whose text alone is over half
    // the budget cannot fit, and goes to the pager without being built whole.
    if from.is_some() || size.saturating_mul(2) > budget.bytes() {
        return page_files(&paths, outcomes, from, budget, args);
    }
    let mut text = String::with_capacity(size);
    let mut files = Vec::with_capacity(outcomes.len());
    for (i, (path, outcome)) in paths.iter().zip(outcomes).enumerate() {
        if i > 0 {
            text.push_str(SEPARATOR);
        }
        text.push_str(path);
        match outcome {
            Ok(content) => {
                text.push_str(":\n");
                text.push_str(&content);
                text.push('\n');
                files.push(json!({"path": path, "content": content}));
            }
            Err(message) => {
                text.push_str(": Error - ");
                text.push_str(&message);
                files.push(json!({"path": path, "error": message}));
            }
        }
    }
    let whole = ToolOutput::structured(text, json!({ "files": files }));
    if budget.fits(&whole) {
        return Ok(whole);
    }
    // Escaping made it larger than it looked: page the same outcomes, taken back.
    let outcomes = files
        .into_iter()
        .map(|mut f| match f.get_mut("content").map(Value::take) {
            Some(Value::String(content)) => Ok(content),
            _ => Err(f["error"].as_str().unwrap_or_default().to_string()),
        })
        .collect();
    page_files(&paths, outcomes, None, budget, args)
}

/// One page of `read_multiple_files`: the files from the cursor's position whose parts fit in
/// the budget, in the order given, and a cursor for the rest. A file whose content alone is
/// larger than a page is shown cut after a whole line, with the `read_text_file` offset that
/// continues it, and the next page starts at the file after it.
fn page_files(
    paths: &[&str],
    outcomes: Vec<Result<String, String>>,
    from: Option<Cursor>,
    budget: ResultBudget,
    args: &Map<String, Value>,
) -> Result<ToolOutput, FsError> {
    let start = match from {
        None => 0,
        Some(c) => {
            let at = usize::try_from(c.position).unwrap_or(usize::MAX);
            let before = at.checked_sub(1).and_then(|i| paths.get(i));
            paging::check_anchor(c, before.map(|p| p.as_bytes()))?;
            at
        }
    };
    let mut page = Page::new(budget.for_entries());
    let mut text = String::new();
    let mut files = Vec::new();
    let mut end = start;
    for (i, (path, outcome)) in paths.iter().zip(outcomes).enumerate().skip(start) {
        let (part, item) = file_part(path, outcome, None);
        let sep = if files.is_empty() { 0 } else { SEPARATOR.len() };
        let cost = sep + part.len() + json_len(&item) + 1;
        if page.taken() == 0 && cost > page_room(budget) {
            // Alone too large for a page: shown cut, and the page ends with it.
            let (part, item) = fit_alone(path, &item, budget);
            text.push_str(&part);
            files.push(item);
            end = i + 1;
            page.take(usize::MAX / 2);
            continue;
        }
        if !page.take(cost) {
            break;
        }
        if sep > 0 {
            text.push_str(SEPARATOR);
        }
        text.push_str(&part);
        files.push(item);
        end = i + 1;
    }
    let mut structured = json!({ "files": files });
    if end < paths.len() {
        let cursor = Cursor {
            position: end as u64,
            anchor: entry_digest(paths[end - 1].as_bytes()),
        }
        .encode(READ_MULTIPLE_FILES, args);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&cursor_note(
            "files",
            start as u64 + 1,
            end as u64,
            Some(paths.len() as u64),
            &cursor,
        ));
        structured["next_cursor"] = json!(cursor);
        structured["truncated"] = json!(true);
    } else {
        structured["truncated"] = json!(false);
    }
    Ok(ToolOutput::structured(text, structured))
}

/// What one page may hold of a single file.
fn page_room(budget: ResultBudget) -> usize {
    budget.for_entries()
}

/// One file's part of the text and its structured entry; with `cut`, only that many bytes of
/// its content (the caller chose a line boundary).
fn file_part(path: &str, outcome: Result<String, String>, cut: Option<usize>) -> (String, Value) {
    match outcome {
        Ok(mut content) => {
            if let Some(at) = cut {
                content.truncate(at);
            }
            let part = format!("{path}:\n{content}\n");
            (part, json!({"path": path, "content": content}))
        }
        Err(message) => (
            format!("{path}: Error - {message}"),
            json!({"path": path, "error": message}),
        ),
    }
}

/// The part of a file too large for a page by itself: its content cut after the last whole line
/// that fits (text and structured copy together), with a note of the offset that continues it.
fn fit_alone(path: &str, item: &Value, budget: ResultBudget) -> (String, Value) {
    let content = item["content"].as_str().unwrap_or_default();
    let total = content.lines().count() as u64;
    // The content is sent twice (and escaped once more in the copy): start from a third of the
    // room and shrink until the part fits.
    let mut room = page_room(budget) / 3;
    loop {
        let keep = cut_at_line(content, room);
        let kept = &content[..keep];
        let whole_lines = memchr::memchr_iter(b'\n', kept.as_bytes()).count() as u64;
        let next = whole_lines + 1;
        let note = format!(
            "[lines 1–{} of {} of this file shown (it is larger than one answer holds); read the rest with read_text_file path=\"{path}\" offset={next}]",
            thousands(whole_lines),
            thousands(total)
        );
        let part = format!("{path}:\n{kept}\n{note}");
        let entry = json!({
            "path": path,
            "content": kept,
            "truncated": true,
            "next_offset": next,
            "total_lines": total,
        });
        if part.len() + json_len(&entry) <= page_room(budget) || room < 64 {
            return (part, entry);
        }
        room = room * 3 / 4;
    }
}

/// What separates the files in `read_multiple_files`' text, as in the reference server.
const SEPARATOR: &str = "\n---\n";

/// The most threads one `read_multiple_files` call reads on: a read is a few system calls, so
/// more threads than cores only add their start-up.
const MAX_READERS: usize = 4;

/// From how many bytes in all a call's files are read on several threads. Starting and joining
/// a thread cost 0.2–2 ms on the shared two-core machine of the benchmarks, more than opening,
/// sizing and reading 100 files of 2 KiB one after another (1.3 ms): below this the reads stay on
/// the calling thread (profile in benches/FINDINGS.md).
const PARALLEL_FROM: u64 = 4 << 20;

/// Each path's content or the message saying why it cannot be given, in input order.
///
/// The files are opened and sized in input order and given their part of the call's one read
/// budget in that order (a file larger than what the files before it left is refused), then read,
/// each at most its part — on a few threads when there is much to read: a file that grew since
/// it was sized is given as it was when sized. So the same files give the same answer however the
/// threads ran. `Err` when the call was cancelled or ran out of time.
fn read_all(
    cx: &FsContext,
    paths: &[&str],
    ctx: &CallContext,
) -> Result<Vec<Result<String, String>>, FsError> {
    let stopped = || FsError::check(ctx, || "read_multiple_files".to_string());
    // One budget for the whole call: many files must not return more than one large read could.
    let mut left = cx.options.max_read_bytes;
    let mut sized = Vec::with_capacity(paths.len());
    for path in paths {
        FsError::check(ctx, || format!("read_multiple_files at '{path}'"))?;
        let outcome = match open_one(cx, path) {
            Err(e) => Err(e.to_string()),
            Ok(opened) if opened.len > left => Err(FsError::InvalidArgument(format!(
                "'{}' is {} bytes, more than the {left} bytes left of this call's read limit; read it alone with read_text_file (head/tail for a large file)",
                opened.resolved.display(),
                opened.len
            ))
            .to_string()),
            Ok(opened) => {
                left -= opened.len;
                Ok(opened)
            }
        };
        sized.push(outcome);
    }
    stopped()?;
    let threads = if cx.options.max_read_bytes - left >= PARALLEL_FROM {
        MAX_READERS
    } else {
        1
    };
    let read = in_parallel(sized, threads, |outcome| {
        let opened = outcome?;
        let mut buf = Vec::with_capacity(opened.len as usize);
        (&opened.file)
            .take(opened.len)
            .read_to_end(&mut buf)
            .map_err(|e| {
                target::io_error("cannot read", &opened.resolved.relative, e).to_string()
            })?;
        into_text(buf, &opened.resolved, "this tool only returns text").map_err(|e| e.to_string())
    });
    stopped()?;
    Ok(read)
}

/// A file of `read_multiple_files`, open and sized.
struct Opened {
    resolved: Resolved,
    file: std::fs::File,
    len: u64,
}

/// Opens the regular file at `path` beneath the root and sizes it.
fn open_one(cx: &FsContext, path: &str) -> Result<Opened, FsError> {
    let (resolved, file, meta) = target::open_regular_for_reading(
        &cx.guard,
        path,
        "use list_directory to see what is in it",
    )?;
    Ok(Opened {
        resolved,
        file,
        len: meta.len(),
    })
}

/// `work` applied to each item, on up to `threads` threads (no more than the cores; the calling
/// one among them), each taking one contiguous run of the items; the results in the items' order.
fn in_parallel<T: Send, U: Send>(
    items: Vec<T>,
    threads: usize,
    work: impl Fn(T) -> U + Sync,
) -> Vec<U> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, threads.max(1))
        .min(items.len().max(1));
    if threads == 1 {
        return items.into_iter().map(work).collect();
    }
    let per = items.len().div_ceil(threads);
    let mut runs: Vec<Vec<T>> = Vec::with_capacity(threads);
    let mut items = items.into_iter();
    for _ in 0..threads {
        runs.push(items.by_ref().take(per).collect());
    }
    let work = &work;
    std::thread::scope(|s| {
        let mut runs = runs.into_iter();
        let mine = runs.next().unwrap_or_default();
        let others: Vec<_> = runs
            .map(|run| s.spawn(move || run.into_iter().map(work).collect::<Vec<U>>()))
            .collect();
        let mut out: Vec<U> = mine.into_iter().map(work).collect();
        for other in others {
            match other.join() {
                Ok(done) => out.extend(done),
                // A panic in a reader is a bug; carry it to the caller as one would be carried
                // from a read on this thread.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

/// A time as RFC 3339 in UTC, to the second.
fn rfc3339((secs, nanos): (i64, u32)) -> String {
    DateTime::<Utc>::from_timestamp(secs, nanos)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_else(|| "unknown".into())
}

fn type_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::BlockDevice | FileType::CharacterDevice => "device",
        _ => "unknown",
    }
}

/// `get_file_info`.
pub fn get_file_info(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path"])?;
    let path = Args(args).str("path")?;
    // Links on the way are followed (and checked); a final link is described as itself.
    let resolved = cx.guard.resolve_no_follow(path)?;
    let info = cx
        .guard
        .workspace()
        .inspect(&resolved.relative)
        .map_err(|e| target::io_error("cannot inspect", &resolved.relative, e))?
        .ok_or_else(|| target::not_found(&resolved.relative))?;
    let mut out = format!(
        "path: {}\ntype: {}\n",
        resolved.display(),
        type_name(info.kind)
    );
    if info.kind == FileType::Symlink {
        out.push_str(&format!("target: {}\n", link_target(cx, path)));
    }
    let created = info
        .created
        .map(rfc3339)
        .unwrap_or_else(|| "unknown (not recorded by this file system)".into());
    out.push_str(&format!(
        "size: {}\ncreated: {created}\nmodified: {}\naccessed: {}\nisDirectory: {}\nisFile: {}\npermissions: {:03o}",
        info.size,
        rfc3339(info.modified),
        rfc3339(info.accessed),
        info.kind == FileType::Directory,
        info.kind == FileType::RegularFile,
        info.mode & 0o777,
    ));
    if cx.options.backup && info.kind == FileType::RegularFile {
        out.push_str(&format!(
            "\nversions: {}",
            versions_line(cx, &resolved, ctx)?
        ));
    }
    Ok(ToolOutput::text(out))
}

/// Where the symlink at `path` points, as a workspace path; never the name of anything outside.
fn link_target(cx: &FsContext, path: &str) -> String {
    match cx.guard.resolve(path) {
        Ok(target) => match cx.guard.workspace().stat(&target.relative) {
            Ok(Some(_)) => target.display(),
            _ => format!("{} (missing)", target.display()),
        },
        Err(e) if e.is_escape() => "outside the workspace (not shown, never followed)".into(),
        Err(_) => "cannot be resolved (a loop or an unreadable link)".into(),
    }
}

/// `N (current: C)` for a file with version history, `none` for one without.
fn versions_line(
    cx: &FsContext,
    resolved: &Resolved,
    ctx: &CallContext,
) -> Result<String, FsError> {
    let Some(lock) = cx.lock_for_reading(ctx)? else {
        return Ok("none".into());
    };
    Ok(
        match cx.store.version_position(&lock, &resolved.relative)? {
            Some((current, newest)) => format!("{newest} (current: {current})"),
            None => "none".into(),
        },
    )
}

/// `find_files`: the reference server's `search_files`, as a bounded, cancellable walk through
/// directory descriptors that never follows a symlink and never enters the server's state.
pub fn find_files(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", "pattern", "excludePatterns", CURSOR_ARG])?;
    paging::cursor(FIND_FILES, args)?;
    let a = Args(args);
    let path = a.str("path")?;
    let pattern = a.str("pattern")?;
    let excludes = a.opt_str_list("excludePatterns")?.unwrap_or_default();
    let matcher = glob(pattern)?.compile_matcher();
    let (exclude_names, exclude_paths) = list::exclude_sets(&excludes)?;
    let resolved = cx.guard.resolve(path)?;
    let fd = list::open_dir(
        cx,
        &resolved,
        "find_files searches below a directory; use get_file_info to describe a file",
    )?;
    let mut tree = Tree::new(fd)
        .map_err(|e| target::io_error("cannot read directory", &resolved.relative, e))?;
    let mut found: Vec<String> = Vec::new();
    let mut found_bytes = 0usize;
    let mut truncated = None;
    let mut seen = 0usize;
    while let Some(entry) = tree.next_entry() {
        seen += 1;
        if seen.is_multiple_of(4096) {
            if let Err(stop) = ctx.check() {
                return Ok(ToolOutput::stopped(stop, "find_files"));
            }
        }
        let name = entry.name.as_bytes();
        if workspace::guard::STATE_DIRS
            .iter()
            .any(|s| s.as_bytes() == name)
            || workspace::temp::is_reserved(name)
        {
            continue;
        }
        if exclude_names.is_match(&entry.name) || exclude_paths.is_match(&entry.path) {
            continue;
        }
        if matcher.is_match(&entry.path) {
            let rel = resolved.relative.join(&entry.path);
            // A link is a match only when it stays inside: its target is not shown either way,
            // but a link out must not even be offered as something to open.
            let inside = entry.kind != FileType::Symlink
                || rel.to_str().is_some_and(|p| cx.guard.resolve(p).is_ok());
            if inside {
                if found.len() == MAX_MATCHES {
                    truncated = Some(format!(
                        "more than {MAX_MATCHES} matches; only the first {MAX_MATCHES} are shown"
                    ));
                    break;
                }
                // Measured before it is copied: the path itself may be larger than the answer.
                let len = rel.as_os_str().len().max(1) + 1;
                if found_bytes + len > MAX_FOUND_BYTES {
                    truncated = Some(format!(
                        "the answer reached {} KiB; only the first {} matches are shown",
                        MAX_FOUND_BYTES / 1024,
                        found.len()
                    ));
                    break;
                }
                found_bytes += len;
                found.push(display_relative(&rel));
            }
        }
        if entry.kind == FileType::Directory {
            if let Err(stop) = ctx.check() {
                return Ok(ToolOutput::stopped(stop, "find_files"));
            }
            // Unreadable, moved away or too deep: its entries are simply not searched.
            let _ = tree.descend();
        }
    }
    let mut footer = String::new();
    if let Some(why) = truncated {
        if !found.is_empty() {
            footer.push('\n');
        }
        footer.push_str(&format!(
            "[truncated: {why}. Narrow the pattern, the path or add excludePatterns]"
        ));
    } else if found.is_empty() && !args.contains_key(CURSOR_ARG) {
        return Ok(ToolOutput::text("No matches found"));
    }
    let whole = ToolOutput::text(format!("{}{footer}", found.join("\n")));
    paging::Listing {
        tool: FIND_FILES,
        args,
        header: String::new(),
        lines: found,
        items: None,
        footer,
        noun: "paths",
    }
    .answer(whole, cx.options.result_budget)
}

/// The `pattern` of `find_files` as a glob on relative paths (`*` stays within one component).
fn glob(pattern: &str) -> Result<Glob, FsError> {
    let p = pattern.trim();
    let p = p.strip_prefix("./").unwrap_or(p);
    if p.is_empty() {
        return Err(FsError::InvalidArgument(
            "'pattern' is empty; give a glob such as \"*.md\" or \"**/*.rs\"".into(),
        ));
    }
    GlobBuilder::new(p)
        .literal_separator(true)
        .build()
        .map_err(|e| {
            FsError::InvalidArgument(format!(
                "'pattern' is not a valid glob ({e}); use patterns like \"*.md\", \"src/*.rs\" or \"**/test_*\""
            ))
        })
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_matches_relative_paths_one_component_per_star() {
        let m = glob("*.txt").expect("valid").compile_matcher();
        assert!(m.is_match("a.txt") && m.is_match(".hidden.txt"));
        assert!(!m.is_match("d/a.txt"));
        let deep = glob("**/*.txt").expect("valid").compile_matcher();
        assert!(deep.is_match("a.txt") && deep.is_match("d/e/a.txt"));
        assert!(glob("a[b").is_err() && glob(" ").is_err());
    }

    #[test]
    fn find_files_and_read_multiple_files_stop_when_cancelled() {
        use mcp_core::toolset::Toolset;
        let tmp = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(tmp.path().join("a/b")).expect("mkdir");
        std::fs::write(tmp.path().join("a/b/f.txt"), "x").expect("write");
        let tools = crate::FsToolset::extended_for_test(tmp.path());
        let find = json!({"path": ".", "pattern": "**/*.txt"});
        let read = json!({"paths": ["a/b/f.txt"]});
        let (Value::Object(find), Value::Object(read)) = (find, read) else {
            unreachable!("objects")
        };
        let calm = CallContext::default();
        assert_eq!(tools.call(FIND_FILES, &find, &calm).text, "a/b/f.txt");
        assert!(!tools.call(READ_MULTIPLE_FILES, &read, &calm).is_error);
        let cancelled = CallContext::default();
        cancelled.cancel.cancel();
        for (name, args) in [(FIND_FILES, &find), (READ_MULTIPLE_FILES, &read)] {
            let out = tools.call(name, args, &cancelled);
            assert!(out.is_error, "{name}: {}", out.text);
            assert_eq!(out.error_kind.as_deref(), Some("Cancelled"), "{name}");
        }
    }

    #[test]
    fn parallel_reads_keep_input_order_and_spend_the_budget_in_that_order() {
        use mcp_core::toolset::Toolset;
        let tmp = tempfile::tempdir().expect("tmp");
        // 40 files of 10 to 88 bytes against the test toolset's 1024-byte budget, a missing
        // path among them: which are refused depends only on the order of the paths.
        let sizes: Vec<usize> = (0..40).map(|i| 10 + (i * 37) % 79).collect();
        let mut paths = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            let name = format!("f{i:02}.txt");
            std::fs::write(tmp.path().join(&name), "x".repeat(*size)).expect("write");
            paths.push(name);
            if i == 3 {
                paths.push("missing.txt".into());
            }
        }
        let mut left = 1024;
        let mut want = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            if *size <= left {
                left -= size;
                want.push(format!("f{i:02}.txt:\n{}\n", "x".repeat(*size)));
            } else {
                want.push(format!("f{i:02}.txt: Error - InvalidArgument: 'f{i:02}.txt' is {size} bytes, more than the {left} bytes left"));
            }
            if i == 3 {
                want.push("missing.txt: Error - NotFound".into());
            }
        }
        let tools = crate::FsToolset::extended_for_test(tmp.path());
        let Value::Object(args) = json!({ "paths": paths }) else {
            unreachable!("an object")
        };
        for _ in 0..10 {
            let text = tools
                .call(READ_MULTIPLE_FILES, &args, &CallContext::default())
                .text;
            let parts: Vec<&str> = text.split(SEPARATOR).collect();
            assert_eq!(parts.len(), want.len(), "{text}");
            for (part, want) in parts.iter().zip(&want) {
                assert!(
                    part.starts_with(want.as_str()),
                    "{part:?} should start {want:?}"
                );
            }
        }
    }

    #[test]
    fn many_bytes_are_read_on_several_threads_in_input_order() {
        use mcp_core::toolset::Toolset;
        let tmp = tempfile::tempdir().expect("tmp");
        // 12 files of 400 KiB against a 4.5 MiB budget: the first 11 (4.3 MiB, enough to read
        // on several threads) fit, the last does not.
        let size = 400 << 10;
        let names: Vec<String> = (0..12).map(|i| format!("f{i:02}.txt")).collect();
        for (i, name) in names.iter().enumerate() {
            let letter = char::from(b'a' + i as u8).to_string();
            std::fs::write(tmp.path().join(name), letter.repeat(size)).expect("write");
        }
        let budget = (4 << 20) + (512 << 10);
        assert!(11 * size as u64 >= PARALLEL_FROM && 12 * size as u64 > budget);
        let tools = crate::FsToolset::new(
            workspace::guard::PathGuard::new(tmp.path()).expect("guard"),
            crate::FsOptions {
                backup: false,
                max_read_bytes: budget,
                result_budget: mcp_core::budget::ResultBudget::new(64 << 20),
                structured_paging: false,
                tools: crate::tools::Selection::Extended,
                listed: Default::default(),
                permissions: Default::default(),
            },
        );
        let Value::Object(args) = json!({ "paths": names }) else {
            unreachable!("an object")
        };
        let text = tools
            .call(READ_MULTIPLE_FILES, &args, &CallContext::default())
            .text;
        let parts: Vec<&str> = text.split(SEPARATOR).collect();
        assert_eq!(parts.len(), 12);
        for (i, part) in parts[..11].iter().enumerate() {
            let letter = char::from(b'a' + i as u8).to_string();
            assert_eq!(*part, format!("f{i:02}.txt:\n{}\n", letter.repeat(size)));
        }
        assert!(
            parts[11].starts_with("f11.txt: Error - InvalidArgument: 'f11.txt' is 409600 bytes"),
            "{}",
            parts[11]
        );
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339((0, 0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339((1_700_000_000, 5)), "2023-11-14T22:13:20Z");
    }
}
