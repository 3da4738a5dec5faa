//! Renders a run as Markdown (`BENCHMARKS.md`).

use std::fmt::Write as _;

use super::cases::{CaseResult, Twin, COST_LIMIT};
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

/// How one twin fares against its case's limit: the verdict cell and, when over it, a line for
/// the summary.
fn cost_verdict(case: &CaseResult, twin: &Twin) -> (&'static str, Option<String>) {
    let Some(limit) = case.cost_limit else {
        return ("", None);
    };
    match case.time_cost(twin) {
        Some(r) if r <= limit => ("met", None),
        Some(r) => (
            "**not met**",
            Some(format!(
                "{} / {} ({})",
                case.title,
                twin.current,
                fmt_ratio(r)
            )),
        ),
        None => ("not judged", None),
    }
}

fn cost_row(out: &mut String, case: &CaseResult, twin: &Twin) -> Option<String> {
    let median = |label: &str| case.row(label).and_then(|r| r.time.median());
    let (verdict, over) = cost_verdict(case, twin);
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} | {verdict} |",
        case.title,
        twin.current,
        cell(median(&twin.current).map(fmt_secs)),
        cell(median(&twin.previous).map(fmt_secs)),
        cell(case.time_cost(twin).map(fmt_ratio)),
        cell(case.rss_cost(twin).map(fmt_ratio)),
        case.cost_limit
            .map_or_else(|| "none".into(), |l| format!("≤ {}", fmt_ratio(l)))
    );
    over
}

/// "Cost of the changes since <label>": every current row beside its twin on the earlier build,
/// both from this run, judged against the limit where one applies.
fn cost_section(out: &mut String, label: &str, results: &[CaseResult]) {
    let _ = writeln!(out, "## Cost of the changes since {label}\n");
    // Which cases are bound is said by the cases themselves, so this text cannot drift from them.
    let titles = |bound: bool| {
        results
            .iter()
            .filter(|c| !c.twins.is_empty() && c.cost_limit.is_some() == bound)
            .map(|c| c.title.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let _ = writeln!(
        out,
        "Each row of the current build beside the same subject (same flags, same inputs) on \
         `{label}`, measured in this run and alternating with every other subject: \
         \"now ÷ then\" is the current build's median divided by `{label}`'s (above 1: the \
         changes made it slower or bigger). Limit: the current build takes at most {} the time \
         in {}. Listed without a limit: {}.\n",
        fmt_ratio(COST_LIMIT),
        cell(Some(titles(true)).filter(|t| !t.is_empty())),
        cell(Some(titles(false)).filter(|t| !t.is_empty())),
    );
    let _ = writeln!(
        out,
        "| case | subject | median now | median then | time now ÷ then | peak RSS now ÷ then | limit | |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---|---|");
    let mut over = Vec::new();
    let (mut judged, mut unjudged) = (0, 0);
    for case in results {
        for twin in &case.twins {
            if case.cost_limit.is_some() {
                match case.time_cost(twin) {
                    Some(_) => judged += 1,
                    None => unjudged += 1,
                }
            }
            over.extend(cost_row(out, case, twin));
        }
    }
    out.push('\n');
    let verdict = match (over.is_empty(), judged) {
        (_, 0) => "No row bound by the limit was measured.".to_string(),
        (true, n) => format!(
            "The limit is met: all {n} measured rows bound by it are within {}.",
            fmt_ratio(COST_LIMIT)
        ),
        (false, _) => format!("**The limit is not met** by {}.", over.join("; ")),
    };
    let _ = write!(out, "{verdict}");
    if unjudged > 0 && judged > 0 {
        let _ = write!(out, " {unjudged} rows bound by it could not be judged.");
    }
    out.push_str("\n\n");
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
    out.push('\n');
    if let Some(label) = &outcome.baseline {
        cost_section(&mut out, label, &outcome.results);
    }
    let _ = writeln!(out, "## Results\n");
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
