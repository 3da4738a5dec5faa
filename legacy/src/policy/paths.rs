//! Path operands: every one goes through the shared guard (relative to the session directory),
//! unquoted globs are expanded inside the workspace the way a shell would, and `tee` targets get
//! the stricter checks a write needs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use rustix::fs::{FileType, Mode, OFlags};

use super::PolicyContext;
use crate::plan::{GuardReason, Refusal, Word};
use workspace::guard::{FinalLink, GuardError, Resolved, STATE_DIRS};
use workspace::walk;

/// The most paths one glob may expand to; more is almost certainly a mistake and would make a
/// huge argv.
const MAX_GLOB_MATCHES: usize = 10_000;

/// Directory names a write may never go into: the tool's own state, and `.git/` (its hooks and
/// config give code execution to the user's own git later).
const WRITE_PROTECTED: [&str; 3] = [".shelpa", ".filesystem", ".git"];

/// Resolves a read operand (expanding an unquoted glob) into the arguments to pass on.
pub(super) fn read_operand(cx: &PolicyContext, word: &Word) -> Result<Vec<OsString>, Refusal> {
    if word.glob_chars.is_empty() {
        return Ok(vec![read_path(cx, &word.text)?]);
    }
    expand_glob(cx, word)?
        .iter()
        .map(|typed| read_path(cx, typed))
        .collect()
}

/// Resolves one typed path for reading, refusing escapes and files that would hang a reader.
pub(super) fn read_path(cx: &PolicyContext, typed: &str) -> Result<OsString, Refusal> {
    let resolved = guard(cx, typed, FinalLink::Follow, false)?;
    // The guard spliced every symlink out of `relative`, so what is there is the file itself.
    if let Ok(Some(stat)) = cx.guard.workspace().stat(&resolved.relative) {
        if let Some(kind) = special_kind(stat.kind) {
            return Err(Refusal::new(
                GuardReason::DisallowedTarget,
                typed,
                format!("'{typed}' is {kind}; reading it could hang the call."),
                "Pass regular files or directories only.",
            ));
        }
    }
    Ok(pass_on(cx, &resolved.path))
}

/// Resolves a directory for `cd` or the built-in `ls`.
pub(super) fn resolve_dir(cx: &PolicyContext, typed: &str) -> Result<Resolved, Refusal> {
    guard(cx, typed, FinalLink::Follow, false)
}

/// The form in which a checked path is handed to a tool: relative to the stage's directory, with
/// `..` for each level above it (`../a.txt`). Never absolute: tools print the paths they are
/// given, and an absolute one would start with the workspace's host path, which no result shows;
/// a relative one also resolves from the stage's directory, which the stage enters by descriptor,
/// rather than from the root's path again. A relative path starting with `-` or `+` gets `./` so
/// no parser can take it for an option or an obsolete `+N` count.
pub(super) fn pass_on(cx: &PolicyContext, path: &Path) -> OsString {
    if let Ok(rel) = path.strip_prefix(cx.cwd) {
        if rel.as_os_str().is_empty() {
            return OsString::from(".");
        }
        let s = rel.as_os_str();
        let b = s.as_encoded_bytes();
        return if b.first().is_some_and(|c| *c == b'-' || *c == b'+') {
            let mut out = OsString::from("./");
            out.push(s);
            out
        } else {
            s.to_os_string()
        };
    }
    // Both are absolute, folded and free of symlinks (the guard made them so), and inside the
    // root: the way from one to the other is up to their common ancestor, then down.
    let mut up = cx.cwd.components().peekable();
    let mut down = path.components().peekable();
    while let (Some(a), Some(b)) = (up.peek(), down.peek()) {
        if a != b {
            break;
        }
        up.next();
        down.next();
    }
    let mut out = PathBuf::new();
    for _ in up {
        out.push("..");
    }
    out.extend(down);
    out.into_os_string()
}

/// Resolves a `tee` target: inside the workspace, not in a protected directory, and not a
/// symlink, directory, FIFO, socket or device, nor (for an `append`) a multiply-linked file.
///
/// A file with more than one hard link is refused for appends only, as the contract says: an
/// append writes the inode in place, so it would change the file under its other names too. An
/// overwrite is a temporary file renamed over the name (a new inode), so the other names keep
/// the old content; `shelpa_write` behaves the same way. The executor checks again right before
/// it writes.
pub(super) fn tee_target(
    cx: &PolicyContext,
    word: &Word,
    append: bool,
) -> Result<PathBuf, Refusal> {
    let typed = word.text.as_str();
    if !word.glob_chars.is_empty() {
        return Err(Refusal::new(
            GuardReason::DisallowedTarget,
            typed,
            format!("The tee target '{typed}' contains an unquoted glob; tee writes exactly the files it is given."),
            "Name the file exactly (quote it if the * or ? is part of the name).",
        ));
    }
    let resolved = guard(cx, typed, FinalLink::NoFollow, true)?;
    cx.guard
        .permissions()
        .check(&resolved.relative)
        .map_err(|refused| read_only(typed, &refused))?;
    if let Some(dir) = resolved.relative.components().find_map(|c| {
        WRITE_PROTECTED
            .iter()
            .find(|p| c.as_os_str() == **p)
            .copied()
    }) {
        return Err(protected(typed, dir));
    }
    let stat = match cx.guard.workspace().stat(&resolved.relative) {
        Ok(Some(stat)) => stat,
        _ => return Ok(resolved.path),
    };
    let kind = if stat.is_symlink() {
        Some("a symlink")
    } else if stat.is_dir() {
        Some("a directory")
    } else {
        special_kind(stat.kind)
    };
    if let Some(kind) = kind {
        return Err(Refusal::new(
            GuardReason::DisallowedTarget,
            typed,
            format!("The tee target '{typed}' is {kind}; tee only writes regular files."),
            "Write to a regular file (a new name is fine).",
        ));
    }
    if append && stat.nlink > 1 {
        return Err(Refusal::new(
            GuardReason::DisallowedTarget,
            typed,
            format!(
                "The tee -a target '{typed}' has {} hard links; appending would change a file known by another name.",
                stat.nlink
            ),
            "Use tee FILE to replace it (its other names keep the old content), or append to a new file.",
        ));
    }
    Ok(resolved.path)
}

fn protected(typed: &str, dir: &str) -> Refusal {
    Refusal::new(
        GuardReason::ProtectedPath,
        typed,
        format!("'{typed}' is inside {dir}/, which no pipeline may write."),
        "Write somewhere else in the workspace.",
    )
}

/// Runs the shared guard on a path typed relative to the session directory, turning its errors
/// into refusals that quote the caller's own spelling (never an absolute path, never a target).
fn guard(
    cx: &PolicyContext,
    typed: &str,
    final_link: FinalLink,
    write: bool,
) -> Result<Resolved, Refusal> {
    let joined = if Path::new(typed).is_absolute() {
        PathBuf::from(typed)
    } else {
        cx.cwd.join(typed)
    };
    let Some(joined) = joined.to_str() else {
        return Err(Refusal::new(
            GuardReason::PathEscape,
            typed,
            format!("'{typed}' is not valid UTF-8."),
            "Use UTF-8 file names.",
        ));
    };
    cx.guard
        .resolve_with(joined, final_link)
        .map_err(|e| match e {
            GuardError::Empty => Refusal::new(
                GuardReason::ParseError,
                typed,
                "An empty path was given.",
                "Name a file relative to the current directory, e.g. src/main.rs.",
            ),
            GuardError::Nul => Refusal::new(
                GuardReason::ParseError,
                typed,
                "The path contains a NUL byte.",
                "File names cannot contain NUL.",
            ),
            GuardError::Protected { dir, .. } if write => protected(typed, dir),
            GuardError::Protected { dir, .. } => Refusal::new(
                GuardReason::PathEscape,
                typed,
                format!("'{typed}' is inside {dir}/, the server's own state, which pipelines may not read."),
                "Read files elsewhere in the workspace.",
            ),
            GuardError::Reserved(_) => Refusal::new(
                GuardReason::PathEscape,
                typed,
                format!("'{typed}' is in the server's temporary-file namespace ('.filesystem-tmp-…')."),
                "Choose a name that does not start with '.filesystem-tmp-'.",
            ),
            GuardError::Repository(_) => protected(typed, ".git"),
            GuardError::SymlinkEscape(_) => Refusal::new(
                GuardReason::PathEscape,
                typed,
                format!("'{typed}' goes through a symlink that points outside the workspace."),
                "Use the real path inside the workspace.",
            ),
            GuardError::SymlinkLoop(_) => Refusal::new(
                GuardReason::PathEscape,
                typed,
                format!("'{typed}' has too many levels of symbolic links."),
                "Use the real path inside the workspace.",
            ),
            GuardError::Outside(_) => Refusal::new(
                GuardReason::PathEscape,
                typed,
                format!("'{typed}' is outside the workspace."),
                "Use a path relative to the current directory (see pwd) that stays inside the workspace.",
            ),
            GuardError::Io { .. } => Refusal::new(
                GuardReason::PathEscape,
                typed,
                format!("'{typed}' could not be inspected."),
                "Check the path with ls or fd.",
            ),
            GuardError::ReadOnly(refused) => read_only(typed, &refused),
        })
}

/// A write target the operator's rules refuse: `READ_ONLY`, naming the rule.
pub(crate) fn read_only(typed: &str, refused: &workspace::permissions::ReadOnly) -> Refusal {
    Refusal::new(
        GuardReason::ReadOnly,
        typed,
        format!("{refused}."),
        "This server may not change it: write somewhere the rules allow, or ask the user to lift the rule.",
    )
}

/// Expands an unquoted glob like a shell: component by component, sorted, hidden names only
/// when the component's pattern starts with `.`, never into the state directories, and only
/// inside the workspace. No match is an error rather than a literal `*` passed on.
pub(super) fn expand_glob(cx: &PolicyContext, word: &Word) -> Result<Vec<String>, Refusal> {
    let typed = word.text.as_str();
    let absolute = typed.starts_with('/');
    let mut candidates: Vec<String> = vec![if absolute { "/".into() } else { String::new() }];
    let mut offset = 0;
    // Once a component has been matched against a listing, candidates are names that exist; one
    // that leads through an escaping symlink is dropped, as a shell drops a non-match. Before
    // that, the literal base directory must itself be inside the workspace.
    let mut expanded = false;
    for component in typed.split('/') {
        let start = offset;
        offset += component.len() + 1;
        if component.is_empty() {
            continue;
        }
        let globby: Vec<bool> = component
            .char_indices()
            .map(|(i, _)| word.glob_chars.contains(&(start + i)))
            .collect();
        if !globby.contains(&true) {
            for c in &mut candidates {
                join(c, component);
            }
            continue;
        }
        let pattern = glob_pattern(component, &globby);
        let matcher = GlobBuilder::new(&pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                Refusal::new(
                    GuardReason::ParseError,
                    typed,
                    format!("'{typed}' is not a valid glob: {e}."),
                    "Quote the word if the *, ? or [ is data.",
                )
            })?
            .compile_matcher();
        let show_hidden = component.starts_with('.');
        let mut next = Vec::new();
        for dir in &candidates {
            let dir_typed = if dir.is_empty() { "." } else { dir.as_str() };
            let resolved = match guard(cx, dir_typed, FinalLink::Follow, false) {
                Ok(r) => r,
                Err(_) if expanded => continue,
                Err(e) => return Err(e),
            };
            let Ok(entries) = list_names(cx, &resolved) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .into_iter()
                .filter(|n| show_hidden || !n.starts_with('.'))
                .filter(|n| !STATE_DIRS.contains(&n.as_str()))
                .filter(|n| matcher.is_match(n))
                .collect();
            names.sort();
            for n in names {
                let mut c = dir.clone();
                join(&mut c, &n);
                next.push(c);
                if next.len() > MAX_GLOB_MATCHES {
                    return Err(Refusal::new(
                        GuardReason::ParseError,
                        typed,
                        format!("'{typed}' matches more than {MAX_GLOB_MATCHES} paths."),
                        "Narrow the pattern, or pass a directory to a tool that recurses (rg, fd).",
                    ));
                }
            }
        }
        candidates = next;
        expanded = true;
        if candidates.is_empty() {
            break;
        }
    }
    candidates.retain(|c| {
        guard(cx, c, FinalLink::NoFollow, false).is_ok_and(|r| {
            cx.guard
                .workspace()
                .stat(&r.relative)
                .is_ok_and(|s| s.is_some())
        })
    });
    if candidates.is_empty() {
        return Err(Refusal::new(
            GuardReason::ParseError,
            typed,
            format!("No file matches the pattern '{typed}'."),
            "Check the names with ls or fd; quote the word if the *, ? or [ is data (e.g. rg 'a*b').",
        ));
    }
    if typed.ends_with('/') {
        for c in &mut candidates {
            c.push('/');
        }
    }
    Ok(candidates)
}

/// The UTF-8 names in a directory that passed the guard, read through a descriptor opened beneath
/// the root (a directory swapped for a symlink since the guard's walk fails to open, it is not
/// followed). Names that are not UTF-8 cannot be typed in a command, so a glob never yields them.
fn list_names(cx: &PolicyContext, dir: &Resolved) -> std::io::Result<Vec<String>> {
    let fd = cx.guard.open_beneath(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut reader = rustix::fs::Dir::new(fd)?;
    let mut names = Vec::new();
    walk::each_entry(&mut reader, |name, _| {
        if let Ok(name) = std::str::from_utf8(name) {
            names.push(name.to_owned());
        }
    })?;
    Ok(names)
}

fn join(base: &mut String, name: &str) {
    if !base.is_empty() && !base.ends_with('/') {
        base.push('/');
    }
    base.push_str(name);
}

/// Builds a globset pattern for one component: unquoted glob characters stay special,
/// everything else that globset would treat specially is escaped.
fn glob_pattern(component: &str, globby: &[bool]) -> String {
    let mut out = String::new();
    let mut in_class = false;
    for ((_, c), special) in component.char_indices().zip(globby) {
        if *special {
            if c == '[' {
                in_class = true;
            }
            out.push(c);
        } else if in_class && c == ']' {
            in_class = false;
            out.push(c);
        } else if in_class && (c == '!' || c == '-' || c == '^') {
            out.push(c);
        } else if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('\\');
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out
}

/// What a special file is (FIFO, socket, device), named for a message; `None` for anything else.
/// Reading one can hang a stage and writing one reaches beyond the workspace, so both the operand
/// check and the tee target check refuse them.
fn special_kind(kind: FileType) -> Option<&'static str> {
    match kind {
        FileType::Fifo => Some("a FIFO"),
        FileType::Socket => Some("a socket"),
        FileType::CharacterDevice | FileType::BlockDevice => Some("a device"),
        _ => None,
    }
}
