//! The report as text (one line per finding) or JSON.

use std::path::Path;

use serde_json::json;

use super::{CheckReport, CheckSeverity, Fix};

fn fix_text(fix: &Fix, repair: bool) -> String {
    match fix {
        Fix::Nothing => "nothing to do".into(),
        Fix::WouldRepair(w) => format!("--repair would: {w}"),
        Fix::Repaired(w) => format!("repaired: {w}"),
        Fix::Failed(w) => format!("repair failed: {w}"),
        Fix::Manual(w) if repair => format!("not repaired: {w}"),
        Fix::Manual(w) => format!("by hand: {w}"),
    }
}

/// `SEVERITY  PLACE: PROBLEM — FIX` per finding, then a summary line.
pub(crate) fn text(report: &CheckReport) -> String {
    let mut out = String::new();
    for f in &report.findings {
        out.push_str(&format!(
            "{:<7} {}: {} — {}\n",
            f.severity.as_str(),
            f.place,
            f.problem,
            fix_text(&f.fix, report.repair)
        ));
    }
    let remaining = report.findings.iter().filter(|f| f.remains()).count();
    out.push_str(&format!(
        "{} version histories and {} mirror(s) checked: {} error(s), {} warning(s), {} note(s); {}\n",
        report.histories_checked,
        report.mirrors_checked,
        report.count(CheckSeverity::Error),
        report.count(CheckSeverity::Warning),
        report.count(CheckSeverity::Info),
        if remaining == 0 {
            "nothing left to do".to_string()
        } else if report.repair {
            format!("{remaining} problem(s) remain")
        } else {
            format!("{remaining} problem(s); `filesystem check --repair` fixes what is safe to fix")
        }
    ));
    out
}

/// The whole report as one pretty JSON object.
pub(crate) fn json(root: &Path, report: &CheckReport) -> String {
    let findings: Vec<_> = report
        .findings
        .iter()
        .map(|f| {
            json!({
                "severity": f.severity.as_str(),
                "place": f.place,
                "problem": f.problem,
                "fix": f.fix.kind(),
                "action": fix_text(&f.fix, report.repair),
                "remains": f.remains(),
            })
        })
        .collect();
    let value = json!({
        "root": root.display().to_string(),
        "repair": report.repair,
        "clean": report.clean(),
        "errors": report.count(CheckSeverity::Error),
        "warnings": report.count(CheckSeverity::Warning),
        "notes": report.count(CheckSeverity::Info),
        "remaining": report.findings.iter().filter(|f| f.remains()).count(),
        "histories_checked": report.histories_checked,
        "mirrors_checked": report.mirrors_checked,
        "findings": findings,
    });
    format!(
        "{}\n",
        serde_json::to_string_pretty(&value).unwrap_or_default()
    )
}
