//! `list_directory` and `directory_tree`.
//!
//! Both read directories through handles the kernel opened beneath the root without following
//! symlinks: the start directory passes the guard once, and every directory below it is opened
//! relative to its parent's handle with `O_NOFOLLOW`, so the walk can never leave the root and
//! needs no per-entry guard check (which is what keeps a 100k-file tree fast). Both leave out
//! build/cache directories and what the root's `.gitignore` ignores, because those entries drown
//! the model in noise it did not ask for.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{Dir, FileType, Mode, OFlags};
use serde_json::{Map, Value};

use super::error::FsError;
use super::paging;
use super::target;
use super::tools::{DIRECTORY_TREE, LIST_DIRECTORY, LIST_DIRECTORY_WITH_SIZES};
use super::{reject_unknown, FsContext};
use mcp_core::budget::{cursor_note, entry_digest, Cursor, CursorError, CURSOR_ARG};
use mcp_core::toolset::{Args, CallContext, Stop, ToolOutput};
use serde_json::json;
use workspace::guard::{PathGuard, Resolved};
use workspace::walk::{self, Descent, MAX_DEPTH};

/// Directories never listed: the server's own state, version-control internals, and
/// dependency/build/cache trees that are regenerated rather than edited. Naming one as the
/// `path` of a listing still lists it; only entries are left out.
pub(crate) const HIDDEN_DIRS: &[&str] = &[
    ".filesystem",
    ".shelpa",
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "target",
    "__pycache__",
    ".venv",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".gradle",
    ".next",
    ".nuxt",
    ".terraform",
];

/// The largest root `.gitignore` that is read; anything bigger is not a real ignore file.
const MAX_GITIGNORE_BYTES: u64 = 1024 * 1024;

/// One directory entry as the listings need it.
#[derive(Clone, Copy)]
struct Entry {
    /// Byte range of the name in the directory's name arena.
    start: usize,
    end: usize,
    /// A real directory (a symlink to one is not).
    is_dir: bool,
    /// A symlink, whatever it points to: `directory_tree` names it as one instead of calling
    /// it a file, so a model does not try to read a link to a directory.
    is_link: bool,
}

/// A directory's entries, with their names in one buffer instead of one allocation each.
struct Listing {
    names: Vec<u8>,
    entries: Vec<Entry>,
}

impl Listing {
    fn name(&self, e: &Entry) -> &[u8] {
        &self.names[e.start..e.end]
    }
}

/// Reads and sorts (by name bytes) the entries of the open directory `dir`.
fn read_dir(dir: &mut Dir) -> std::io::Result<Listing> {
    let mut names = Vec::new();
    let mut entries = Vec::new();
    let mut pending = Vec::new();
    walk::each_entry(dir, |name, kind| {
        let start = names.len();
        names.extend_from_slice(name);
        if kind == FileType::Unknown {
            pending.push(entries.len());
        }
        entries.push(Entry {
            start,
            end: names.len(),
            is_dir: kind == FileType::Directory,
            is_link: kind == FileType::Symlink,
        });
    })?;
    // File systems that do not report types in readdir need one lstat per entry.
    for i in pending {
        let e = entries[i];
        let name = OsStr::from_bytes(&names[e.start..e.end]);
        if let Ok(Some(stat)) = walk::stat_at(dir, name) {
            entries[i].is_dir = stat.is_dir();
            entries[i].is_link = stat.is_symlink();
        }
    }
    entries.sort_unstable_by(|a, b| names[a.start..a.end].cmp(&names[b.start..b.end]));
    Ok(Listing { names, entries })
}

/// Decides which entries a listing leaves out.
struct Filter {
    gitignore: Gitignore,
    /// `excludePatterns` without a `/`: matched against the entry's name at any depth.
    exclude_names: GlobSet,
    /// `excludePatterns` with a `/`: matched against the path relative to the listing's start.
    exclude_paths: GlobSet,
}

impl Filter {
    /// `rel` is the entry's root-relative path, `start` the listing's root-relative start.
    fn hides(&self, name: &[u8], is_dir: bool, rel: &Path, start: &Path) -> bool {
        if is_dir && HIDDEN_DIRS.iter().any(|h| h.as_bytes() == name) {
            return true;
        }
        // State directories at any depth (a nested workspace's store too) and the server's
        // temporaries: the guard refuses them, so a listing never offers them.
        if workspace::guard::STATE_DIRS
            .iter()
            .any(|h| h.as_bytes() == name)
            || workspace::temp::is_reserved(name)
        {
            return true;
        }
        if !self.gitignore.is_empty() && self.gitignore.matched(rel, is_dir).is_ignore() {
            return true;
        }
        if !self.exclude_names.is_empty() && self.exclude_names.is_match(OsStr::from_bytes(name)) {
            return true;
        }
        if !self.exclude_paths.is_empty() {
            let below = rel.strip_prefix(start).unwrap_or(rel);
            if self.exclude_paths.is_match(below) {
                return true;
            }
        }
        false
    }
}

/// The root's `.gitignore`, read through the guard (a link to outside is simply not used).
/// Lines that are not valid patterns are skipped rather than failing every listing.
fn root_gitignore(guard: &PathGuard) -> Gitignore {
    let Ok(resolved) = guard.resolve(".gitignore") else {
        return Gitignore::empty();
    };
    let Ok(file) = target::open_for_reading(guard, &resolved) else {
        return Gitignore::empty();
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Gitignore::empty();
    }
    let mut text = String::new();
    if file
        .take(MAX_GITIGNORE_BYTES)
        .read_to_string(&mut text)
        .is_err()
    {
        return Gitignore::empty();
    }
    let mut builder = GitignoreBuilder::new(guard.root());
    for line in text.lines() {
        let _ = builder.add_line(None, line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

pub(crate) fn exclude_sets(patterns: &[&str]) -> Result<(GlobSet, GlobSet), FsError> {
    let mut names = GlobSetBuilder::new();
    let mut paths = GlobSetBuilder::new();
    for raw in patterns {
        let p = raw.trim();
        let p = p.strip_prefix("./").unwrap_or(p);
        let p = p.trim_end_matches('/');
        if p.is_empty() {
            continue;
        }
        let glob = GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                FsError::InvalidArgument(format!(
                    "excludePatterns entry '{raw}' is not a valid glob ({e}); use patterns like \"*.log\", \"build\" or \"src/**/*.tmp\""
                ))
            })?;
        if p.contains('/') {
            paths.add(glob);
        } else {
            names.add(glob);
        }
    }
    let build = |b: GlobSetBuilder| {
        b.build()
            .map_err(|e| FsError::InvalidArgument(format!("excludePatterns: {e}")))
    };
    Ok((build(names)?, build(paths)?))
}

/// Opens a guarded path as a directory for listing; a file is `InvalidArgument`.
pub(crate) fn open_dir(
    cx: &FsContext,
    resolved: &Resolved,
    tool_hint: &str,
) -> Result<OwnedFd, FsError> {
    match cx
        .guard
        .open_beneath(resolved, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
    {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            Err(FsError::InvalidArgument(format!(
                "'{}' is a file, not a directory; {tool_hint}",
                resolved.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(target::not_found(&resolved.relative))
        }
        Err(e) => Err(target::io_error(
            "cannot open directory",
            &resolved.relative,
            e,
        )),
    }
}

/// `list_directory`.
pub fn list_directory(cx: &FsContext, args: &Map<String, Value>) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", CURSOR_ARG])?;
    let path = Args(args).str("path")?;
    paging::cursor(LIST_DIRECTORY, args)?;
    let resolved = cx.guard.resolve(path)?;
    let fd = open_dir(cx, &resolved, "read it with read_text_file")?;
    let listing = Dir::new(fd)
        .map_err(std::io::Error::from)
        .and_then(|mut dir| read_dir(&mut dir))
        .map_err(|e| target::io_error("cannot read directory", &resolved.relative, e))?;
    let filter = Filter {
        gitignore: root_gitignore(&cx.guard),
        exclude_names: GlobSet::empty(),
        exclude_paths: GlobSet::empty(),
    };
    let mut rel = resolved.relative.clone();
    let mut lines = Vec::with_capacity(listing.entries.len());
    for e in &listing.entries {
        let name = listing.name(e);
        rel.push(OsStr::from_bytes(name));
        let hidden = filter.hides(name, e.is_dir, &rel, &resolved.relative);
        rel.pop();
        if hidden {
            continue;
        }
        let kind = if e.is_dir { "[DIR] " } else { "[FILE] " };
        lines.push(format!("{kind}{}", String::from_utf8_lossy(name)));
    }
    let whole = ToolOutput::text(lines.join("\n"));
    paging::Listing {
        tool: LIST_DIRECTORY,
        args,
        header: String::new(),
        lines,
        items: None,
        footer: String::new(),
        noun: "entries",
    }
    .answer(whole, cx.options.result_budget)
}

/// `list_directory_with_sizes`: the reference server's format (`[FILE] name` padded to 30,
/// its size right-aligned in 10; `[DIR] name`; then the totals), over the same entries
/// `list_directory` shows. A size is looked up relative to the listed directory's descriptor
/// without following links; a symlink counts with its target's size only when the guard admits
/// the target and it is a regular file, so nothing outside the workspace is ever measured.
pub fn list_directory_with_sizes(
    cx: &FsContext,
    args: &Map<String, Value>,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", "sortBy", CURSOR_ARG])?;
    paging::cursor(LIST_DIRECTORY_WITH_SIZES, args)?;
    let a = Args(args);
    let path = a.str("path")?;
    let by_size = match a.opt_str("sortBy")? {
        None | Some("name") => false,
        Some("size") => true,
        Some(other) => {
            return Err(FsError::InvalidArgument(format!(
                "'sortBy' is '{other}'; give \"name\" or \"size\""
            )))
        }
    };
    let resolved = cx.guard.resolve(path)?;
    let fd = open_dir(cx, &resolved, "use get_file_info for a file's size")?;
    let io = |e| target::io_error("cannot read directory", &resolved.relative, e);
    let mut dir = Dir::new(fd).map_err(|e| io(e.into()))?;
    let listing = read_dir(&mut dir).map_err(io)?;
    let filter = Filter {
        gitignore: root_gitignore(&cx.guard),
        exclude_names: GlobSet::empty(),
        exclude_paths: GlobSet::empty(),
    };
    let mut rel = resolved.relative.clone();
    // (name, is_dir, size)
    let mut rows: Vec<(String, bool, u64)> = Vec::with_capacity(listing.entries.len());
    for e in &listing.entries {
        let name = listing.name(e);
        rel.push(OsStr::from_bytes(name));
        if filter.hides(name, e.is_dir, &rel, &resolved.relative) {
            rel.pop();
            continue;
        }
        let size = if e.is_link {
            link_target_size(cx, &rel)
        } else {
            walk::stat_at(&dir, OsStr::from_bytes(name))
                .ok()
                .flatten()
                .map(|st| st.size)
                // Gone or unreadable since the listing: counted as empty, as the reference does.
                .unwrap_or(0)
        };
        rel.pop();
        rows.push((String::from_utf8_lossy(name).into_owned(), e.is_dir, size));
    }
    if by_size {
        rows.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    } else {
        // Close to the reference's `localeCompare`: case folded first, then exact.
        rows.sort_by(|a, b| {
            a.0.to_lowercase()
                .cmp(&b.0.to_lowercase())
                .then_with(|| a.0.cmp(&b.0))
        });
    }
    let mut lines = Vec::with_capacity(rows.len());
    let (mut files, mut dirs, mut total) = (0u64, 0u64, 0u64);
    for (name, is_dir, size) in &rows {
        if *is_dir {
            dirs += 1;
            lines.push(format!("[DIR] {} ", pad_end(name, 30)));
        } else {
            files += 1;
            total += size;
            lines.push(format!(
                "[FILE] {} {:>10}",
                pad_end(name, 30),
                format_size(*size)
            ));
        }
    }
    let footer = format!(
        "\n\nTotal: {files} files, {dirs} directories\nCombined size: {}",
        format_size(total)
    );
    let whole = if lines.is_empty() {
        // No rows: the totals alone, as before paging (which starts them with one line ending).
        ToolOutput::text(footer[1..].to_string())
    } else {
        ToolOutput::text(format!("{}{footer}", lines.join("\n")))
    };
    paging::Listing {
        tool: LIST_DIRECTORY_WITH_SIZES,
        args,
        header: String::new(),
        lines,
        items: None,
        footer,
        noun: "entries",
    }
    .answer(whole, cx.options.result_budget)
}

/// The size of the file a symlink at root-relative `rel` points to, or 0 when the target is
/// outside the workspace, missing, or not a regular file.
fn link_target_size(cx: &FsContext, rel: &Path) -> u64 {
    let Some(path) = rel.to_str() else {
        return 0;
    };
    match cx.guard.resolve(path) {
        Ok(target) => match cx.guard.workspace().stat(&target.relative) {
            Ok(Some(st)) if st.is_file() => st.size,
            _ => 0,
        },
        Err(_) => 0,
    }
}

/// `name` padded with spaces to `width` characters (never cut), like JavaScript's `padEnd`.
fn pad_end(name: &str, width: usize) -> String {
    let len = name.chars().count();
    let mut s = name.to_string();
    s.extend(std::iter::repeat_n(' ', width.saturating_sub(len)));
    s
}

/// A size as the reference server writes it: `N B` below 1 KiB, otherwise 1024-based with two
/// decimals in KB, MB, GB or TB.
pub(crate) fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut unit = 0;
    let mut scaled = bytes as f64;
    while scaled >= 1024.0 && unit < UNITS.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    format!("{scaled:.2} {}", UNITS[unit])
}

/// `directory_tree`.
///
/// The walk is a [`Descent`]: no recursion and a bounded number of open directories however deep
/// the tree, at most [`MAX_DEPTH`] levels shown (a directory at the limit carries a `truncated`
/// note instead of its children), and the call's time limit and cancellation polled at every
/// directory.
pub fn directory_tree(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", "excludePatterns", "maxDepth", CURSOR_ARG])?;
    let a = Args(args);
    let from = paging::cursor(DIRECTORY_TREE, args)?;
    let path = a.str("path")?;
    let patterns = a.opt_str_list("excludePatterns")?.unwrap_or_default();
    let max_depth = match a.opt_u64("maxDepth")? {
        Some(0) => {
            return Err(FsError::InvalidArgument(
                "'maxDepth' must be at least 1 (1 lists only the direct entries); omit it for the whole tree".into(),
            ))
        }
        Some(n) => n,
        None => u64::MAX,
    };
    let (exclude_names, exclude_paths) = exclude_sets(&patterns)?;
    let resolved = cx.guard.resolve(path)?;
    let fd = open_dir(cx, &resolved, "use read_text_file for a file")?;
    let filter = Filter {
        gitignore: root_gitignore(&cx.guard),
        exclude_names,
        exclude_paths,
    };
    let budget = cx.options.result_budget;
    let page = TreePage {
        from,
        room: budget.for_entries(),
    };
    let (out, next) = match tree_json(fd, &filter, &resolved.relative, max_depth, ctx, &page) {
        Ok(out) => out,
        Err(TreeStop::Call(stop)) => return Ok(ToolOutput::stopped(stop, "directory_tree")),
        Err(TreeStop::Failed(e)) => return Err(e),
    };
    let mut text = String::from_utf8(out)
        .map_err(|_| FsError::IoError("the tree could not be rendered as UTF-8 text".into()))?;
    let Some(next) = next else {
        if from.is_none() {
            return Ok(ToolOutput::text(text));
        }
        return Ok(ToolOutput::structured(text, json!({"truncated": false})));
    };
    let first = from.map_or(0, |c| c.position) + 1;
    let cursor = next.encode(DIRECTORY_TREE, args);
    text.push('\n');
    text.push_str(&cursor_note(
        "tree entries",
        first,
        next.position,
        None,
        &cursor,
    ));
    Ok(ToolOutput::structured(
        text,
        json!({"truncated": true, "next_cursor": cursor}),
    ))
}

/// Which part of a tree one answer shows: the entries after the cursor's position (counted
/// depth first, in the order the tree is written), as many as fit in `room` bytes.
pub(crate) struct TreePage {
    /// Where the page starts; `None` for the first.
    pub from: Option<Cursor>,
    /// The bytes the page's JSON may take.
    pub room: usize,
}

/// What is shown in place of the children of a directory at [`MAX_DEPTH`].
fn truncated_note() -> String {
    format!(
        "not listed: deeper than {MAX_DEPTH} levels below the listed directory (the depth limit of directory_tree); call directory_tree on a directory further down to see more"
    )
}

/// Why a tree walk ended early.
enum TreeStop {
    /// The call was cancelled or ran out of time.
    Call(Stop),
    /// A directory could not be read.
    Failed(FsError),
}

/// One directory being written: its entries and how many are done.
struct Frame {
    listing: Listing,
    next: usize,
    /// No entry written yet (no comma before the next one).
    first: bool,
}

/// Writes the compact JSON tree of the directory open at `fd` (root-relative `start`), entries
/// to `max_depth` levels (and never more than [`MAX_DEPTH`]), as far as `page` allows.
///
/// Entries are numbered depth first. A page that starts after the first entry begins with the
/// directories that hold its first entry, marked `"continued":true` (they were shown on an
/// earlier page); a page that ends early closes what it opened, so every page is a JSON tree.
/// Returns the JSON and, when the page ended before the tree did, the cursor that continues after
/// it (its position is the number of the last entry shown).
fn tree_json(
    fd: OwnedFd,
    filter: &Filter,
    start: &Path,
    max_depth: u64,
    ctx: &CallContext,
    page: &TreePage,
) -> Result<(Vec<u8>, Option<Cursor>), TreeStop> {
    // A limit the caller asked for is honoured silently, as always; the walk's own limit is
    // marked where it cut, so a deep tree is never mistaken for a complete one.
    let limit = max_depth.min(MAX_DEPTH as u64);
    let marked = max_depth > limit;
    let note = truncated_note();
    let failed = |rel: &Path, e: std::io::Error| {
        TreeStop::Failed(target::io_error("cannot read directory", rel, e))
    };
    let skip = page.from.map_or(0, |c| c.position);
    let stale = || TreeStop::Failed(FsError::InvalidArgument(CursorError::Stale.to_string()));
    // The root-relative path of the entry being visited (pushed and popped, never rebuilt).
    let mut rel = start.to_path_buf();
    let mut walk = Descent::new(fd).map_err(|e| failed(&rel, e))?;
    let mut out = Vec::with_capacity(64 * 1024);
    let first = match walk.current() {
        Some(dir) => read_dir(dir).map_err(|e| failed(&rel, e))?,
        None => Listing {
            names: Vec::new(),
            entries: Vec::new(),
        },
    };
    let mut stack = vec![Frame {
        listing: first,
        next: 0,
        first: true,
    }];
    // Entries seen so far (depth first), and whether this page has started writing.
    let mut index = 0u64;
    let mut writing = skip == 0;
    let mut next = None;
    // The path of the last entry written: the entry a cursor continues after.
    let mut last: Vec<u8> = Vec::new();
    if writing {
        out.push(b'[');
    }
    loop {
        let depth = stack.len();
        let Some((frame, below)) = stack.split_last_mut() else {
            break;
        };
        // The entries of this frame are at depth `level`; its subdirectories' at one more.
        let level = walk.depth() as u64 + 1;
        let Some(&e) = frame.listing.entries.get(frame.next) else {
            // This directory's array ends, and with it the entry that holds it.
            if writing {
                out.push(b']');
            }
            stack.pop();
            if stack.is_empty() {
                break;
            }
            walk.leave();
            if writing {
                out.push(b'}');
            }
            rel.pop();
            continue;
        };
        frame.next += 1;
        let name = frame.listing.name(&e);
        rel.push(OsStr::from_bytes(name));
        if filter.hides(name, e.is_dir, &rel, start) {
            rel.pop();
            continue;
        }
        let this = index;
        index += 1;
        if !writing {
            if this + 1 == skip {
                // The entry the cursor continues after must still be where it was.
                if let Some(c) = page.from {
                    c.check_anchor(Some(rel.as_os_str().as_bytes()))
                        .map_err(|_| stale())?;
                }
            }
            if this == skip {
                writing = true;
                out.push(b'[');
                // The directories that hold this entry, shown on an earlier page, open again.
                let inner = rel.strip_prefix(start).unwrap_or(&rel);
                let holders: Vec<_> = inner.components().collect();
                for holder in &holders[..holders.len().saturating_sub(1)] {
                    out.extend_from_slice(b"{\"name\":");
                    push_json_string(&mut out, holder.as_os_str().as_bytes());
                    out.extend_from_slice(
                        b",\"type\":\"directory\",\"continued\":true,\"children\":[",
                    );
                }
                for f in below.iter_mut() {
                    f.first = false;
                }
            }
        }
        let mark = out.len();
        if writing {
            if !frame.first {
                out.push(b',');
            }
            frame.first = false;
            out.extend_from_slice(b"{\"name\":");
            push_json_string(&mut out, name);
        }
        if !e.is_dir {
            if writing {
                // Links are never followed, so they have no `children` either.
                out.extend_from_slice(if e.is_link {
                    b",\"type\":\"symlink\"}".as_slice()
                } else {
                    b",\"type\":\"file\"}".as_slice()
                });
                if out.len() + 2 * depth > page.room && this > skip {
                    out.truncate(mark);
                    next = Some(this);
                    break;
                }
                remember(&mut last, &rel);
            }
            rel.pop();
            continue;
        }
        if writing {
            out.extend_from_slice(b",\"type\":\"directory\",\"children\":");
        }
        if level >= limit {
            if writing {
                out.extend_from_slice(b"[]");
                if marked {
                    out.extend_from_slice(b",\"truncated\":");
                    push_json_string(&mut out, note.as_bytes());
                }
                out.push(b'}');
                if out.len() + 2 * depth > page.room && this > skip {
                    out.truncate(mark);
                    next = Some(this);
                    break;
                }
                remember(&mut last, &rel);
            }
            rel.pop();
            continue;
        }
        if writing {
            if out.len() + 2 + 2 * depth > page.room && this > skip {
                out.truncate(mark);
                next = Some(this);
                break;
            }
            remember(&mut last, &rel);
        }
        ctx.check().map_err(TreeStop::Call)?;
        // An unreadable (or swapped-out, or moved-away) directory is shown empty rather than
        // failing the whole tree.
        if walk.enter(OsStr::from_bytes(name)).is_err() {
            if writing {
                out.extend_from_slice(b"[]}");
            }
            rel.pop();
            continue;
        }
        let listing = match walk.current() {
            Some(dir) => read_dir(dir).map_err(|e| failed(&rel, e))?,
            None => Listing {
                names: Vec::new(),
                entries: Vec::new(),
            },
        };
        if writing {
            out.push(b'[');
        }
        stack.push(Frame {
            listing,
            next: 0,
            first: true,
        });
    }
    if !writing {
        // The cursor points past the end: the tree has fewer entries than when it was given.
        return Err(stale());
    }
    let Some(cut) = next else {
        return Ok((out, None));
    };
    // Close what the page opened: each directory's array and object, then the top array.
    for _ in 1..stack.len() {
        out.extend_from_slice(b"]}");
    }
    out.push(b']');
    Ok((
        out,
        Some(Cursor {
            position: cut,
            anchor: entry_digest(&last),
        }),
    ))
}

/// Keeps `rel` as the last entry written, in a buffer reused for every entry.
fn remember(last: &mut Vec<u8>, rel: &Path) {
    last.clear();
    last.extend_from_slice(rel.as_os_str().as_bytes());
}

/// Appends `name` as a JSON string. Most names need no escaping and are copied as they are; a
/// name that is not UTF-8 is shown with replacement characters.
fn push_json_string(out: &mut Vec<u8>, name: &[u8]) {
    match std::str::from_utf8(name) {
        Ok(s) if !s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) => {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
        _ => {
            let lossy = String::from_utf8_lossy(name);
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, lossy.as_ref());
        }
    }
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn json_names_are_escaped_only_when_needed() {
        let mut out = Vec::new();
        push_json_string(&mut out, b"plain.txt");
        push_json_string(&mut out, b"q\"uote\n");
        push_json_string(&mut out, b"bad\xff");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "\"plain.txt\"\"q\\\"uote\\n\"\"bad\u{fffd}\""
        );
    }

    #[test]
    fn a_tree_walk_stops_at_the_deadline_and_on_cancel_before_entering_a_directory() {
        let tmp = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(tmp.path().join("a/b")).expect("mkdir");
        let open = || {
            rustix::fs::open(
                tmp.path(),
                OFlags::RDONLY | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .expect("open")
        };
        let filter = Filter {
            gitignore: Gitignore::empty(),
            exclude_names: GlobSet::empty(),
            exclude_paths: GlobSet::empty(),
        };
        let whole = TreePage {
            from: None,
            room: usize::MAX,
        };
        let walk = |ctx: &CallContext| {
            tree_json(open(), &filter, Path::new(""), u64::MAX, ctx, &whole).map(|(out, _)| out)
        };
        let late = CallContext {
            deadline: Some(std::time::Instant::now()),
            timeout: Some(std::time::Duration::from_secs(1)),
            ..CallContext::default()
        };
        assert!(matches!(
            walk(&late),
            Err(TreeStop::Call(Stop::TimedOut(_)))
        ));
        let cancelled = CallContext::default();
        cancelled.cancel.cancel();
        assert!(matches!(
            walk(&cancelled),
            Err(TreeStop::Call(Stop::Cancelled))
        ));
        let Ok(out) = walk(&CallContext::default()) else {
            panic!("an unhurried walk finishes");
        };
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            r#"[{"name":"a","type":"directory","children":[{"name":"b","type":"directory","children":[]}]}]"#
        );
    }

    #[test]
    fn sizes_are_written_like_the_reference() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1.00 KB");
        assert_eq!(format_size(1536), "1.50 KB");
        assert_eq!(format_size(5 * 1024 * 1024), "5.00 MB");
        assert_eq!(format_size(3 << 50), "3072.00 TB");
        assert_eq!(pad_end("ab", 4), "ab  ");
        assert_eq!(pad_end("abcdef", 4), "abcdef");
    }

    #[test]
    fn exclude_patterns_split_into_names_and_paths() {
        let (names, paths) = exclude_sets(&["*.log", "./build/", "src/*.tmp"]).expect("valid");
        assert!(names.is_match("deep.log") && names.is_match("build"));
        assert!(paths.is_match("src/a.tmp") && !paths.is_match("src/x/a.tmp"));
        assert!(exclude_sets(&["a[b"]).is_err());
    }
}
