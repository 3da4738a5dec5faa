//! The audit subcommands: each one loads what it needs through [`Audit`] and prints a table or
//! JSON through [`render`](super::render).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::render::{self, cell_text, first_line, local, table, utc};
use super::tree::{self, OpenError};
use super::{AuditArgs, AuditCommand, AuditError};
use workspace::guard::{display_relative, PathGuard};
use workspace::mirror::{Mirror, Record};
use workspace::Workspace;

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
    /// Chooses the root (`--root`, else `FILESYSTEM_ROOT`, else the current directory), validates
    /// it and opens handles on it.
    pub fn open(root: Option<&Path>, allow_root_slash: bool) -> Result<Audit, AuditError> {
        let chosen = workspace::root::resolve(root, allow_root_slash)
            .map_err(|e| AuditError::Root(e.to_string()))?;
        let root = chosen.canonical.clone();
        let guard = PathGuard::new(&root)
            .map_err(|source| AuditError::Io {
                what: format!("cannot open the root '{}'", root.display()),
                source,
            })?
            .with_spellings(chosen.spellings());
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

    /// Opens the mirror of a root-relative path: a regular file reached without any link.
    fn open_relative(&self, relative: &Path, shown: &str) -> Result<std::fs::File, AuditError> {
        match tree::open_file_nofollow(
            self.workspace(),
            &Path::new(tree::MIRROR_DIR).join(relative),
        ) {
            Ok(file) => Ok(file),
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

    /// Reads and parses the mirror of a root-relative path.
    fn load_relative(&self, relative: &Path, shown: &str) -> Result<Loaded, AuditError> {
        let mut bytes = Vec::new();
        self.open_relative(relative, shown)?
            .read_to_end(&mut bytes)
            .map_err(|source| AuditError::Io {
                what: format!("cannot read the mirror of '{shown}'"),
                source,
            })?;
        Ok(Loaded {
            relative: relative.to_path_buf(),
            display: display_relative(relative),
            mirror: Mirror::parse(&bytes),
        })
    }

    /// Finds the mirror for a user's PATH: first by the path as written (a deleted file or one
    /// under a since-replaced directory is still found), then by where the guard resolves it
    /// (tee names mirrors after the resolved real path, so a link in the workspace leads to its
    /// target's mirror). Returns the mirror's workspace path and the open mirror.
    pub fn locate(&self, input: &str) -> Result<(PathBuf, std::fs::File), AuditError> {
        let lexical = tree::lexical_relative(&self.guard, input)
            .ok_or_else(|| AuditError::BadPath(input.to_string()))?;
        match self.open_relative(&lexical, input) {
            Err(AuditError::NoMirror(_)) => {}
            other => return other.map(|f| (lexical, f)),
        }
        match self.guard.resolve(&display_relative(&lexical)) {
            Ok(resolved) if resolved.relative != lexical && !resolved.is_root() => self
                .open_relative(&resolved.relative, input)
                .map(|f| (resolved.relative, f)),
            _ => Err(AuditError::NoMirror(input.to_string())),
        }
    }

    /// Finds (see [`Audit::locate`]), reads and parses the mirror for a user's PATH.
    pub fn load(&self, input: &str) -> Result<Loaded, AuditError> {
        let (relative, mut file) = self.locate(input)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|source| AuditError::Io {
                what: format!("cannot read the mirror of '{input}'"),
                source,
            })?;
        Ok(Loaded {
            display: display_relative(&relative),
            relative,
            mirror: Mirror::parse(&bytes),
        })
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

/// `audit grep`: streams every mirror (or PATH's) one line at a time, printing each matching
/// record as it is found, so memory stays bounded by the longest line whatever the size of the
/// mirrors; with `--json` the document is written as it goes too.
fn grep(
    audit: &Audit,
    pattern: &str,
    path: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<i32, AuditError> {
    let re =
        regex::bytes::Regex::new(pattern).map_err(|e| AuditError::BadPattern(e.to_string()))?;
    let mut search = Grep {
        re,
        json,
        out,
        display: String::new(),
        record: None,
        matched: false,
        hits: 0,
    };
    if json {
        write!(search.out, "{{\"pattern\":{},\"matches\":[", json!(pattern)).map_err(output_err)?;
    }
    let mut one = |display: String, file: std::fs::File| -> Result<(), AuditError> {
        search.display = display;
        let shown = search.display.clone();
        workspace::mirror::stream(std::io::BufReader::new(file), &mut search).map_err(|source| {
            match source
                .get_ref()
                .and_then(|e| e.downcast_ref::<OutputError>())
            {
                Some(_) => output_err(source),
                None => AuditError::Io {
                    what: format!("cannot read the mirror of '{shown}'"),
                    source,
                },
            }
        })
    };
    match path {
        Some(p) => {
            let (relative, file) = audit.locate(p)?;
            one(display_relative(&relative), file)?;
        }
        None => {
            for m in &scan(audit)?.mirrors {
                match audit.open_relative(&m.relative, &m.display) {
                    Ok(file) => one(m.display.clone(), file)?,
                    // Hostile entries are left to `verify`, as every listing does.
                    Err(AuditError::HostileMirror { .. }) | Err(AuditError::NoMirror(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    if json {
        writeln!(search.out, "]}}").map_err(output_err)?;
    } else if search.hits == 0 {
        write_out(search.out, b"no record has a matching line\n")?;
    }
    Ok(0)
}

/// A failure to write the output, told apart from a failure to read a mirror while streaming.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the output")]
struct OutputError;

fn output_err(source: std::io::Error) -> AuditError {
    AuditError::Io {
        what: "cannot write the output".into(),
        source,
    }
}

/// The state of one streaming search.
struct Grep<'o> {
    re: regex::bytes::Regex,
    json: bool,
    out: &'o mut dyn Write,
    /// The mirrored path being searched, as shown.
    display: String,
    /// The record being read.
    record: Option<workspace::mirror::RecordStart>,
    /// True once the current record has printed its header.
    matched: bool,
    /// Records with a match so far.
    hits: usize,
}

impl Grep<'_> {
    fn emit(&mut self, text: &str) -> std::io::Result<()> {
        self.out
            .write_all(text.as_bytes())
            .map_err(|e| std::io::Error::new(e.kind(), OutputError))
    }
}

impl workspace::mirror::RecordVisitor for Grep<'_> {
    fn start(&mut self, record: &workspace::mirror::RecordStart) -> std::io::Result<()> {
        self.record = Some(record.clone());
        self.matched = false;
        Ok(())
    }

    fn line(&mut self, n: usize, text: &[u8]) -> std::io::Result<()> {
        if !self.re.is_match(text) {
            return Ok(());
        }
        let Some(r) = self.record.clone() else {
            return Ok(());
        };
        if !self.matched {
            self.matched = true;
            self.hits += 1;
            let name = match r.id {
                Some(id) => id.to_string(),
                None => format!("#{}", r.position + 1),
            };
            let header = if self.json {
                let fields = json!({
                    "path": self.display,
                    "position": r.position + 1,
                    "record_id": r.id,
                    "kind": r.kind.as_str(),
                    "utc": r.utc,
                    "local": r.ts.map(|t| local(Some(t))),
                    "mirror_line": r.line,
                })
                .to_string();
                // The object stays open for its lines; its size follows them at the record's end.
                let open = fields.strip_suffix('}').unwrap_or(&fields);
                format!(
                    "{}\n{open},\"lines\":[",
                    if self.hits > 1 { "," } else { "" }
                )
            } else {
                format!(
                    "{}  record {name}  {}  {}  {}\n",
                    render::name(&self.display),
                    r.kind,
                    local(r.ts),
                    utc(r.utc.as_deref())
                )
            };
            self.emit(&header)?;
        } else if self.json {
            self.emit(",")?;
        }
        let line = if self.json {
            json!({"line": n, "text": String::from_utf8_lossy(text)}).to_string()
        } else {
            format!("  {n:>5}: {}\n", cell_text(text, 200))
        };
        self.emit(&line)
    }

    fn end(&mut self, size: u64) -> std::io::Result<()> {
        if self.matched && self.json {
            self.emit(&format!("],\"size\":{size}}}"))?;
        }
        self.matched = false;
        Ok(())
    }
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
    // The labels carry the mirrored name: escaped in the text a terminal shows, as it is in
    // JSON (where the encoding escapes it).
    let (old_shown, new_shown) = if json {
        (old_label.clone(), new_label.clone())
    } else {
        (
            render::name(&old_label).into_owned(),
            render::name(&new_label).into_owned(),
        )
    };
    let unified = if identical {
        String::new()
    } else {
        diff.unified_diff()
            .context_radius(3)
            .header(&old_shown, &new_shown)
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
            format!("{old_shown} and {new_shown} are identical\n").as_bytes(),
        )?;
    } else {
        write_out(out, unified.as_bytes())?;
    }
    Ok(0)
}
