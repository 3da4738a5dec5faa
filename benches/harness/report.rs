//! Renders a run as Markdown (`BENCHMARKS.md`).

use std::fmt::Write as _;

use super::cases::CaseResult;
use super::stats::{fmt_kib, fmt_ratio, fmt_secs};
use super::Outcome;

/// Header facts the report starts with.
pub struct Preamble {
    /// How the run was started.
    pub command: String,
    /// Machine facts.
    pub machine: Vec<(String, String)>,
    /// Peer and tool versions.
    pub versions: Vec<(String, String)>,
    /// Repetitions per case.
    pub reps: usize,
    /// Repetitions of the start-up case.
    pub reps_startup: usize,
    /// Free text for the findings section (kept across runs by the caller).
    pub findings: String,
}

fn cell(v: Option<String>) -> String {
    v.unwrap_or_else(|| "—".into())
}

fn case_table(out: &mut String, case: &CaseResult) {
    let _ = writeln!(out, "### {}\n", case.title);
    let _ = writeln!(out, "Timed: {}.\n", case.what);
    let throughput = case.calls.is_some();
    let _ = write!(out, "| subject | median | min | max | runs |");
    if throughput {
        let _ = write!(out, " calls/s (median) |");
    }
    let _ = writeln!(out, " time ÷ `{}` | peak RSS (median) |", case.baseline);
    let _ = write!(out, "|---|---:|---:|---:|---:|");
    if throughput {
        let _ = write!(out, "---:|");
    }
    let _ = writeln!(out, "---:|---:|");
    for row in &case.rows {
        if let Some(err) = &row.error {
            let cols = if throughput { 7 } else { 6 };
            let _ = writeln!(
                out,
                "| {} | {} |{}",
                row.label,
                err.replace('|', "\\|").replace('\n', " "),
                " |".repeat(cols - 1)
            );
            continue;
        }
        let median = row.time.median();
        let _ = write!(
            out,
            "| {} | {} | {} | {} | {} |",
            row.label,
            cell(median.map(fmt_secs)),
            cell(row.time.min().map(fmt_secs)),
            cell(row.time.max().map(fmt_secs)),
            row.time.len()
        );
        if let Some(calls) = case.calls {
            let _ = write!(
                out,
                " {} |",
                cell(
                    median
                        .filter(|m| *m > 0.0)
                        .map(|m| format!("{:.0}", calls as f64 / m))
                )
            );
        }
        let _ = writeln!(
            out,
            " {} | {} |",
            cell(case.ratio(&row.label).map(fmt_ratio)),
            cell(row.rss_kib.median().map(fmt_kib))
        );
    }
    if !case.notes.is_empty() {
        out.push('\n');
    }
    for note in &case.notes {
        let _ = writeln!(out, "- {note}");
    }
    out.push('\n');
}

/// The whole report.
pub fn render(pre: &Preamble, outcome: &Outcome) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Produced by `{}`. Every case runs against every peer in the same run, alternating peers \
         within each repetition; each server is a fresh process per repetition, spoken to over \
         MCP stdio (line-delimited JSON: `initialize`, `notifications/initialized`, then the \
         calls). Absolute times are noise on a shared machine: **the ratios, measured in one run, \
         are the figures that count**. \"time ÷ X\" is a row's median time divided by X's \
         (above 1: X is faster).\n",
        pre.command
    );
    let _ = writeln!(
        out,
        "Repetitions: {} per subject ({} for start-up). Data generation took {:.1} s, the whole \
         run {:.0} s.\n",
        pre.reps, pre.reps_startup, outcome.setup_secs, outcome.total_secs
    );
    let _ = writeln!(out, "## Machine\n");
    for (k, v) in &pre.machine {
        let _ = writeln!(out, "- {k}: {v}");
    }
    let _ = writeln!(out, "\n## Versions\n");
    for (k, v) in &pre.versions {
        let _ = writeln!(out, "- {k}: {v}");
    }
    let _ = writeln!(out, "\n## Targets\n");
    let _ = writeln!(out, "| case | target | measured | |");
    let _ = writeln!(out, "|---|---|---|---|");
    for c in &outcome.checks {
        let verdict = match c.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not judged",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {verdict} |",
            c.case, c.target, c.measured
        );
    }
    let _ = writeln!(out, "\n## Results\n");
    for case in &outcome.results {
        case_table(&mut out, case);
    }
    if !outcome.notes.is_empty() {
        let _ = writeln!(out, "## Notes\n");
        for n in &outcome.notes {
            let _ = writeln!(out, "- {n}");
        }
        out.push('\n');
    }
    if !pre.findings.trim().is_empty() {
        let _ = writeln!(out, "## Findings\n\n{}", pre.findings.trim());
    }
    out
}
