//! `.shelpa/` mirrors, judged by the audit's own verifier so `check` and `audit verify` never
//! disagree. Mirrors are evidence: nothing here is ever repaired.

use std::path::Path;

use shelpa::audit::context::Audit;
use shelpa::audit::verify;
use workspace::mirror::Severity as MirrorSeverity;
use workspace::mirror::MIRROR_DIR;

use super::{CheckReport, CheckSeverity, Fix};

/// Adds the verifier's findings about the mirrors under `root` to `report`.
pub(crate) fn check(
    root: &Path,
    ws: &workspace::Workspace,
    allow_root_slash: bool,
    report: &mut CheckReport,
) {
    if !matches!(ws.stat(Path::new(MIRROR_DIR)), Ok(Some(_))) {
        return;
    }
    let result = Audit::open(Some(root), allow_root_slash).and_then(|a| verify::problems(&a));
    let (checked, problems) = match result {
        Ok(r) => r,
        Err(e) => {
            report.push(
                CheckSeverity::Error,
                MIRROR_DIR.into(),
                format!("the mirrors could not be checked: {e}"),
                Fix::Manual("run `filesystem audit verify` for details".into()),
            );
            return;
        }
    };
    report.mirrors_checked = checked;
    for p in problems {
        let place = if p.line == 0 {
            p.path
        } else {
            format!("{}:{}", p.path, p.line)
        };
        let severity = match p.severity {
            MirrorSeverity::Error => CheckSeverity::Error,
            MirrorSeverity::Warning => CheckSeverity::Warning,
        };
        report.push(
            severity,
            place,
            p.message,
            Fix::Manual("mirrors are evidence and are never changed by check; `filesystem audit` reads around the damage".into()),
        );
    }
}
