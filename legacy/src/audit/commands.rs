//! The audit subcommands that read mirrors (`list`, `log`, `show`, `grep`, `diff`): each one
//! loads what it needs through the [`Audit`] context and prints a table or JSON through
//! [`render`](super::render).

use serde_json::{json, Value};
use std::io::Write;

use super::context::{load_all, record_name, scan, select, Audit, Current};
use super::error::AuditError;
use super::render::{self, cell_text, first_line, local, table, utc};
use workspace::guard::display_relative;
use workspace::mirror::Record;

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
/// `audit list`.
pub fn list(audit: &Audit, json: bool, out: &mut dyn Write) -> Result<i32, AuditError> {
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

/// `audit log`: the records of one mirror.
pub fn log(audit: &Audit, path: &str, json: bool, out: &mut dyn Write) -> Result<i32, AuditError> {
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

/// `audit show`: one record's content, byte for byte.
pub fn show(
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
/// `audit grep`: records with a line matching a pattern.
pub fn grep(
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

/// `audit diff`: a unified diff between two versions.
pub fn diff(
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
        // The body is the records' own text: shown escaped, so that one cannot hide its lines.
        write_out(out, render::body(&unified).as_bytes())?;
    }
    Ok(0)
}
