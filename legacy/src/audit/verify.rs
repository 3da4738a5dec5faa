//! `audit verify`: reporting damage and tampering in `.shelpa/` instead of tripping over it.
//!
//! Checks, per mirror: separator-like lines that break the grammar, record ids that do not grow,
//! truncated tails, non-UTF-8 content (all from [`workspace::mirror::verify`], which finds what
//! `Mirror::parse` finds while holding one line at a time);
//! and across the tree: links and special files inside `.shelpa/`, and mirrors whose workspace
//! path would resolve outside the root or into the server's own state. Nothing found is ever
//! followed or opened beyond what is safe. An error makes the exit status 1; warnings (near-miss
//! separator lines, odd time stamps, non-UTF-8 content: the history still reads exactly) are
//! printed but leave it 0, so a script stops only on damage.

use std::io::Write;

use serde_json::json;

use super::context::Audit;
use super::error::AuditError;
use super::render::table;
use super::tree;
use workspace::mirror::{Severity, MIRROR_DIR};

/// One problem, located.
pub struct Problem {
    /// How bad it is.
    pub severity: Severity,
    /// `.shelpa/<mirrored path>`.
    pub path: String,
    /// 1-based line in the mirror, 0 when the problem is not about one line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Checks every mirror and returns how many were read and what is wrong with them; shared by
/// `audit verify` and `filesystem check`, so both judge mirrors the same way.
pub fn problems(audit: &Audit) -> Result<(usize, Vec<Problem>), AuditError> {
    let scan = tree::scan(audit.workspace()).map_err(|source| AuditError::Io {
        what: "cannot walk .shelpa/".into(),
        source,
    })?;
    let mut problems = Vec::new();
    for h in &scan.hostile {
        problems.push(Problem {
            severity: Severity::Error,
            path: format!("{MIRROR_DIR}/{}", h.display),
            line: 0,
            message: h.message.clone(),
        });
    }
    let mut checked = 0;
    for m in &scan.mirrors {
        let shown = format!("{MIRROR_DIR}/{}", m.display);
        if let Err(e) = audit.guard.resolve(&m.display) {
            problems.push(Problem {
                severity: Severity::Error,
                path: shown.clone(),
                line: 0,
                message: format!("its workspace path would not be accepted by the guard ({e}); audit commands will not read or write that workspace path"),
            });
        }
        // Read as a stream: memory is bounded by the longest line, whatever the mirror's size.
        let findings = tree::open_file_nofollow(
            audit.workspace(),
            &std::path::Path::new(MIRROR_DIR).join(&m.relative),
        )
        .and_then(|f| {
            workspace::mirror::verify(std::io::BufReader::new(f)).map_err(tree::OpenError::Io)
        });
        let findings = match findings {
            Ok(f) => f,
            Err(e) => {
                problems.push(Problem {
                    severity: Severity::Error,
                    path: shown,
                    line: 0,
                    message: format!("the mirror {e}; it was not read"),
                });
                continue;
            }
        };
        checked += 1;
        for f in findings {
            problems.push(Problem {
                severity: f.severity,
                path: shown.clone(),
                line: f.line,
                message: f.message,
            });
        }
    }
    Ok((checked, problems))
}

/// Checks every mirror; prints every finding and returns 1 if any is an error, else 0 (warnings
/// alone do not fail).
pub fn verify(audit: &Audit, json_out: bool, out: &mut dyn Write) -> Result<i32, AuditError> {
    let (checked, problems) = problems(audit)?;
    let errors = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .count();
    let warnings = problems.len() - errors;
    let text = if json_out {
        let findings: Vec<_> = problems
            .iter()
            .map(|p| {
                json!({
                    "severity": p.severity.as_str(),
                    "path": p.path,
                    "line": if p.line == 0 { None } else { Some(p.line) },
                    "message": p.message,
                })
            })
            .collect();
        let value = json!({
            // Agrees with the exit status: warnings alone are ok.
            "ok": errors == 0,
            "mirrors_checked": checked,
            "errors": errors,
            "warnings": warnings,
            "findings": findings,
        });
        format!(
            "{}\n",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )
    } else {
        let rows: Vec<Vec<String>> = problems
            .iter()
            .map(|p| {
                vec![
                    p.severity.as_str().to_string(),
                    p.path.clone(),
                    if p.line == 0 {
                        "-".into()
                    } else {
                        p.line.to_string()
                    },
                    p.message.clone(),
                ]
            })
            .collect();
        let mut text = if rows.is_empty() {
            String::new()
        } else {
            table(&["SEVERITY", "MIRROR", "LINE", "PROBLEM"], &rows)
        };
        text.push_str(&format!(
            "{checked} mirror(s) checked: {errors} error(s), {warnings} warning(s)\n"
        ));
        text
    };
    out.write_all(text.as_bytes())
        .map_err(|source| AuditError::Io {
            what: "cannot write the output".into(),
            source,
        })?;
    Ok(if errors == 0 { 0 } else { 1 })
}
