//! The audit subcommands: each one loads what it needs through [`Audit`] and prints a table or
//! JSON through [`render`](super::render).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::mirror::{Mirror, Record};
use super::render::{cell_text, first_line, local, table, utc};
use super::tree::{self, OpenError};
use super::{AuditArgs, AuditCommand, AuditError};
use crate::guard::{display_relative, PathGuard};
use crate::workspace::Workspace;

/// The workspace an audit runs against: the shared path guard for everything that names a
/// workspace file, and through it the workspace layer (one handle on the root) that every read
/// and write goes through.
pub struct Audit {
    /// The guard every workspace path goes through; its workspace does every operation.
    pub guard: PathGuard,
}

/// One mirror loaded for a command.
pub struct Loaded {
    /// Root-relative workspace path the mirror belongs to.
    pub relative: PathBuf,
    /// How output shows that path.
    pub display: String,
    /// The parsed mirror.
    pub mirror: Mirror,
}

/// What the workspace currently holds at a mirrored path.
#[derive(Debug, PartialEq, Eq)]
pub enum Current {
    /// A regular file with this content.
    File(Vec<u8>),
    /// Nothing there (deleted or never created).
    Missing,
    /// A directory or special file.
    NotAFile,
    /// The path leads outside the root (or into state) through a link; it was not read.
    Unsafe,
}

impl Current {
    /// The content, if there is a readable file.
    pub fn content(&self) -> Option<&[u8]> {
        match self {
            Current::File(c) => Some(c),
            _ => None,
        }
    }
}

impl Audit {
    /// Validates the root (default: the current directory) and opens handles on it.
    pub fn open(root: Option<&Path>, allow_root_slash: bool) -> Result<Audit, AuditError> {
        let given = match root {
            Some(r) => r.to_path_buf(),
            None => std::env::current_dir().map_err(|e| {
                AuditError::Root(format!(
                    "cannot read the current directory ({e}); pass --root DIR"
                ))
            })?,
        };
        let root = crate::root::validate(&given, allow_root_slash)
            .map_err(|e| AuditError::Root(e.to_string()))?;
        let guard = PathGuard::new(&root).map_err(|source| AuditError::Io {
            what: format!("cannot open the root '{}'", root.display()),
            source,
        })?;
        Ok(Audit { guard })
    }

    /// The canonical root, for lexical work on PATH arguments and for reports; never for an
    /// operation.
    pub fn root(&self) -> &Path {
        self.guard.root()
    }

    /// The workspace layer every read and write of the audit goes through.
    pub fn workspace(&self) -> &Workspace {
        self.guard.workspace()
    }

    /// Reads and parses the mirror of a root-relative path.
    fn load_relative(&self, relative: &Path, shown: &str) -> Result<Loaded, AuditError> {
        match tree::read_mirror(self.workspace(), relative) {
            Ok(bytes) => Ok(Loaded {
                relative: relative.to_path_buf(),
                display: display_relative(relative),
                mirror: Mirror::parse(&bytes),
            }),
            Err(OpenError::NotFound) => Err(AuditError::NoMirror(shown.to_string())),
            Err(OpenError::Io(source)) => Err(AuditError::Io {
                what: format!("cannot read the mirror of '{shown}'"),
                source,
            }),
            Err(other) => Err(AuditError::HostileMirror {
                path: shown.to_string(),
                why: other.to_string(),
            }),
        }
    }

    /// Finds the mirror for a user's PATH: first by the path as written (a deleted file or one
    /// under a since-replaced directory is still found), then by where the guard resolves it
    /// (tee names mirrors after the resolved real path, so a link in the workspace leads to its
    /// target's mirror).
    pub fn load(&self, input: &str) -> Result<Loaded, AuditError> {
        let lexical = tree::lexical_relative(self.root(), input)
            .ok_or_else(|| AuditError::BadPath(input.to_string()))?;
        match self.load_relative(&lexical, input) {
            Err(AuditError::NoMirror(_)) => {}
            other => return other,
        }
        match self.guard.resolve(&display_relative(&lexical)) {
            Ok(resolved) if resolved.relative != lexical && !resolved.is_root() => {
                self.load_relative(&resolved.relative, input)
            }
            _ => Err(AuditError::NoMirror(input.to_string())),
        }
    }

    /// Reads the workspace file a mirror belongs to, through the guard (links are followed only
    /// while they stay inside the root).
    pub fn current(&self, relative: &Path) -> Result<Current, AuditError> {
        let resolved = match self.guard.resolve(&display_relative(relative)) {
            Ok(r) => r,
            Err(e) if e.is_escape() => return Ok(Current::Unsafe),
            Err(e) => return Err(AuditError::Guard(e)),
        };
        match tree::open_file_nofollow(self.workspace(), &resolved.relative) {
            Ok(mut f) => {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).map_err(|source| AuditError::Io {
                    what: format!("cannot read '{}'", display_relative(relative)),
                    source,
                })?;
                Ok(Current::File(bytes))
            }
            Err(OpenError::NotFound) => Ok(Current::Missing),
            Err(OpenError::Symlink) => Ok(Current::Unsafe),
            Err(OpenError::NotAFile) => Ok(Current::NotAFile),
            Err(OpenError::Io(source)) => Err(AuditError::Io {
                what: format!("cannot read '{}'", display_relative(relative)),
                source,
            }),
        }
    }
}

/// Finds a record by id (digits) or position (`#N`, 1 = oldest). Returns its index.
pub fn select(loaded: &Loaded, given: &str) -> Result<usize, AuditError> {
    let unknown = || AuditError::UnknownRecord {
        path: loaded.display.clone(),
        given: given.to_string(),
    };
    let records = &loaded.mirror.records;
    if let Some(n) = given.strip_prefix('#') {
        let n: usize = n.parse().map_err(|_| unknown())?;
        return if n >= 1 && n <= records.len() {
            Ok(n - 1)
        } else {
            Err(unknown())
        };
    }
    let id: u64 = given.parse().map_err(|_| unknown())?;
    let hits: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.id == Some(id))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [] => Err(unknown()),
        [one] => Ok(*one),
        [first, ..] => Err(AuditError::AmbiguousRecord {
            path: loaded.display.clone(),
            given: given.to_string(),
            count: hits.len(),
            first: first + 1,
        }),
    }
}

/// How a record is named in output: its id, or `#N` for the id-less appends record.
pub fn record_name(record: &Record, index: usize) -> String {
    match record.id {
        Some(id) => id.to_string(),
        None => format!("#{}", index + 1),
    }
}

/// The JSON fields every command uses to describe a record.
fn record_json(record: &Record, index: usize) -> Value {
    json!({
        "position": index + 1,
        "record_id": record.id,
        "kind": record.kind.as_str(),
        "utc": record.utc,
        "local": record.ts.map(|t| local(Some(t))),
        "size": record.content.len(),
        "mirror_line": record.line,
    })
}

fn write_out(out: &mut dyn Write, text: &[u8]) -> Result<(), AuditError> {
    out.write_all(text).map_err(|source| AuditError::Io {
        what: "cannot write the output".into(),
        source,
    })
}

fn print_json(out: &mut dyn Write, value: &Value) -> Result<(), AuditError> {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
    text.push('\n');
    write_out(out, text.as_bytes())
}

/// Runs one subcommand and returns the exit status.
pub fn dispatch(audit: &Audit, args: &AuditArgs, out: &mut dyn Write) -> Result<i32, AuditError> {
    let json = args.json;
    match &args.command {
        AuditCommand::List => list(audit, json, out),
        AuditCommand::Log { path } => log(audit, path, json, out),
        AuditCommand::Show { path, record } => show(audit, path, record.as_deref(), json, out),
        AuditCommand::Grep { pattern, path } => grep(audit, pattern, path.as_deref(), json, out),
        AuditCommand::Diff {
            path,
            record,
            record2,
        } => diff(audit, path, record, record2.as_deref(), json, out),
        AuditCommand::Restore {
            path,
            record,
            to,
            force,
        } => super::restore::restore(
            audit,
            &super::restore::Request {
                path,
                record,
                to: to.as_deref(),
                force: *force,
            },
            json,
            out,
        ),
        AuditCommand::Verify => super::verify::verify(audit, json, out),
        AuditCommand::Import => super::import::import(audit, args.json, out),
    }
}

fn scan(audit: &Audit) -> Result<tree::Scan, AuditError> {
    tree::scan(audit.workspace()).map_err(|source| AuditError::Io {
        what: "cannot walk .shelpa/".into(),
        source,
    })
}

/// Every readable mirror with its parse; hostile entries are left to `verify`.
pub fn load_all(audit: &Audit) -> Result<(Vec<Loaded>, usize), AuditError> {
    let scan = scan(audit)?;
    let mut loaded = Vec::new();
    for m in &scan.mirrors {
        match audit.load_relative(&m.relative, &m.display) {
            Ok(l) => loaded.push(l),
            Err(AuditError::HostileMirror { .. }) | Err(AuditError::NoMirror(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok((loaded, scan.hostile.len()))
}

fn list(audit: &Audit, json: bool, out: &mut dyn Write) -> Result<i32, AuditError> {
    let (loaded, hostile) = load_all(audit)?;
    let mut rows = Vec::new();
    let mut items = Vec::new();
    for l in &loaded {
        let records = &l.mirror.records;
        let first = records.iter().find(|r| r.ts.is_some());
        let last = records.iter().rev().find(|r| r.ts.is_some());
        let current = audit.current(&l.relative)?;
        let newest = records.last().map(|r| r.content.as_slice());
        let (exists, matches, state) = match (&current, newest) {
            (Current::File(c), Some(n)) if c == n => (true, Some(true), "same as newest"),
            (Current::File(_), _) => (true, Some(false), "differs"),
            (Current::Missing, _) => (false, None, "missing"),
            (Current::NotAFile, _) => (true, None, "not a file"),
            (Current::Unsafe, _) => (false, None, "outside root (not read)"),
        };
        rows.push(vec![
            l.display.clone(),
            records.len().to_string(),
            local(first.and_then(|r| r.ts)),
            local(last.and_then(|r| r.ts)),
            utc(last.and_then(|r| r.utc.as_deref())),
            state.to_string(),
        ]);
        items.push(json!({
            "path": l.display,
            "records": records.len(),
            "first_write": {"local": first.map(|r| local(r.ts)), "utc": first.and_then(|r| r.utc.clone())},
            "last_write": {"local": last.map(|r| local(r.ts)), "utc": last.and_then(|r| r.utc.clone())},
            "workspace_exists": exists,
            "matches_newest": matches,
            "workspace": state,
        }));
    }
    if json {
        print_json(
            out,
            &json!({"root": audit.root().display().to_string(), "files": items, "skipped_hostile_entries": hostile}),
        )?;
    } else if rows.is_empty() {
        write_out(out, b"no mirrored files under .shelpa/\n")?;
    } else {
        let text = table(
            &[
                "PATH",
                "RECORDS",
                "FIRST WRITE (local)",
                "LAST WRITE (local)",
                "LAST WRITE (UTC)",
                "WORKSPACE",
            ],
            &rows,
        );
        write_out(out, text.as_bytes())?;
    }
    if hostile > 0 && !json {
        eprintln!("filesystem audit: {hostile} entries under .shelpa/ were skipped (links or special files); run `filesystem audit verify` for details");
    }
    Ok(0)
}

fn log(audit: &Audit, path: &str, json: bool, out: &mut dyn Write) -> Result<i32, AuditError> {
    let l = audit.load(path)?;
    if json {
        let records: Vec<Value> = l
            .mirror
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut v = record_json(r, i);
                v["first_line"] = json!(String::from_utf8_lossy(first_line(&r.content)));
                v
            })
            .collect();
        return print_json(out, &json!({"path": l.display, "records": records})).map(|_| 0);
    }
    let rows: Vec<Vec<String>> = l
        .mirror
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                format!("#{}", i + 1),
                r.id.map(|id| id.to_string()).unwrap_or_else(|| "-".into()),
                r.kind.to_string(),
                local(r.ts),
                utc(r.utc.as_deref()),
                r.content.len().to_string(),
                cell_text(first_line(&r.content), 60),
            ]
        })
        .collect();
    let text = table(
        &[
            "#",
            "RECORD",
            "KIND",
            "TIME (local)",
            "TIME (UTC)",
            "SIZE",
            "FIRST LINE",
        ],
        &rows,
    );
    write_out(out, text.as_bytes())?;
    Ok(0)
}

fn show(
    audit: &Audit,
    path: &str,
    record: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<i32, AuditError> {
    let l = audit.load(path)?;
    let index = match record {
        Some(r) => select(&l, r)?,
        None => match l.mirror.records.len() {
            0 => {
                return Err(AuditError::UnknownRecord {
                    path: l.display.clone(),
                    given: "(newest)".into(),
                })
            }
            n => n - 1,
        },
    };
    let r = &l.mirror.records[index];
    if json {
        let mut v = record_json(r, index);
        v["path"] = json!(l.display);
        v["utf8"] = json!(std::str::from_utf8(&r.content).is_ok());
        v["content"] = json!(String::from_utf8_lossy(&r.content));
        return print_json(out, &v).map(|_| 0);
    }
    write_out(out, &r.content)?;
    Ok(0)
}

fn grep(
    audit: &Audit,
    pattern: &str,
    path: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<i32, AuditError> {
    let re =
        regex::bytes::Regex::new(pattern).map_err(|e| AuditError::BadPattern(e.to_string()))?;
    let mirrors = match path {
        Some(p) => vec![audit.load(p)?],
        None => load_all(audit)?.0,
    };
    let mut hits = Vec::new();
    let mut text = String::new();
    for l in &mirrors {
        for (i, r) in l.mirror.records.iter().enumerate() {
            let lines: Vec<(usize, &[u8])> = r
                .content
                .split(|&b| b == b'\n')
                .enumerate()
                .filter(|(_, line)| re.is_match(line))
                .map(|(n, line)| (n + 1, line))
                .collect();
            if lines.is_empty() {
                continue;
            }
            text.push_str(&format!(
                "{}  record {}  {}  {}  {}\n",
                l.display,
                record_name(r, i),
                r.kind,
                local(r.ts),
                utc(r.utc.as_deref())
            ));
            for (n, line) in &lines {
                text.push_str(&format!("  {n:>5}: {}\n", cell_text(line, 200)));
            }
            let mut v = record_json(r, i);
            v["path"] = json!(l.display);
            v["lines"] = json!(lines
                .iter()
                .map(|(n, line)| json!({"line": n, "text": String::from_utf8_lossy(line)}))
                .collect::<Vec<_>>());
            hits.push(v);
        }
    }
    if json {
        print_json(out, &json!({"pattern": pattern, "matches": hits}))?;
    } else if hits.is_empty() {
        write_out(out, b"no record has a matching line\n")?;
    } else {
        write_out(out, text.as_bytes())?;
    }
    Ok(0)
}

fn diff(
    audit: &Audit,
    path: &str,
    record: &str,
    record2: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<i32, AuditError> {
    let l = audit.load(path)?;
    let a = select(&l, record)?;
    let old = &l.mirror.records[a];
    let old_label = format!(
        "a/{}@{} ({})",
        l.display,
        record_name(old, a),
        utc(old.utc.as_deref())
    );
    let (new_content, new_label): (Vec<u8>, String) = match record2 {
        Some(r2) => {
            let b = select(&l, r2)?;
            let new = &l.mirror.records[b];
            (
                new.content.clone(),
                format!(
                    "b/{}@{} ({})",
                    l.display,
                    record_name(new, b),
                    utc(new.utc.as_deref())
                ),
            )
        }
        None => match audit.current(&l.relative)? {
            Current::File(c) => (c, format!("b/{} (workspace)", l.display)),
            Current::Missing => (Vec::new(), format!("b/{} (workspace: missing)", l.display)),
            Current::NotAFile => {
                return Err(AuditError::DestinationNotFile(l.display.clone()));
            }
            Current::Unsafe => {
                return Err(AuditError::HostileMirror {
                    path: l.display.clone(),
                    why: "belongs to a workspace path that leads outside the root".into(),
                })
            }
        },
    };
    let old_text = String::from_utf8_lossy(&old.content);
    let new_text = String::from_utf8_lossy(&new_content);
    let diff = similar::TextDiff::from_lines(old_text.as_ref(), new_text.as_ref());
    let identical = old.content == new_content;
    let unified = if identical {
        String::new()
    } else {
        diff.unified_diff()
            .context_radius(3)
            .header(&old_label, &new_label)
            .to_string()
    };
    if json {
        print_json(
            out,
            &json!({"path": l.display, "from": old_label, "to": new_label, "identical": identical, "diff": unified}),
        )?;
    } else if identical {
        write_out(
            out,
            format!("{old_label} and {new_label} are identical\n").as_bytes(),
        )?;
    } else {
        write_out(out, unified.as_bytes())?;
    }
    Ok(0)
}
