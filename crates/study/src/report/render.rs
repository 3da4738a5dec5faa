//! The study report as aligned text tables and as long-format CSV (JSON is the serde form of
//! [`StudyReport`]).

use workspace::terminal::escape_controls;

use super::compare::COMPARED;
use super::metrics::ArmNumbers;
use super::stats::{Difference, Mean, Rate};
use super::StudyReport;

/// The CSV header; the README documents each column.
pub const CSV_HEADER: &str =
    "arm,metric,count,total,value,low,high,baseline,diff,diff_low,diff_high,p_value";

/// A table: a header row and rows of cells. `align` has one letter per column: `l` for text
/// (left-aligned), `r` for numbers (right-aligned, so digits line up).
fn table(header: &[&str], align: &str, rows: &[Vec<String>]) -> String {
    let left: Vec<bool> = align.chars().map(|c| c == 'l').collect();
    let columns = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, cell) in cells.enumerate() {
            let pad = width[i].saturating_sub(cell.chars().count());
            if i > 0 {
                out.push_str("  ");
            }
            if left.get(i).copied().unwrap_or(false) {
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    };
    let mut out = line(&mut header.iter().copied());
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

fn pct(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

/// `75.0% [46.8, 91.1] 9/12`, or `- 0/0` when there is nothing to divide by.
fn rate(r: &Rate) -> String {
    match (r.value, r.low, r.high) {
        (Some(v), Some(lo), Some(hi)) => format!(
            "{}% [{}, {}] {}/{}",
            pct(v),
            pct(lo),
            pct(hi),
            r.count,
            r.total
        ),
        _ => format!("- {}/{}", r.count, r.total),
    }
}

/// `12.5 [10.1, 14.9]`, `3.0` for one value, `-` for none.
fn mean(m: &Mean) -> String {
    match (m.mean, m.low, m.high) {
        (Some(v), Some(lo), Some(hi)) => format!("{v:.2} [{lo:.2}, {hi:.2}]"),
        (Some(v), _, _) => format!("{v:.2}"),
        _ => "-".into(),
    }
}

/// `+12.5 pts [-3.0, 28.1]`.
fn difference(d: &Difference) -> String {
    format!(
        "{:+.1} [{:+.1}, {:+.1}]",
        d.diff * 100.0,
        d.low * 100.0,
        d.high * 100.0
    )
}

fn p_value(p: f64) -> String {
    if p < 0.0001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

/// The text report.
pub fn text(report: &StudyReport) -> String {
    let i = &report.inputs;
    let with_transcript: u64 = report.arms.iter().map(|a| a.trials_with_transcript).sum();
    let mut out = format!("study report: {}\n", report.dir);
    out.push_str(&format!(
        "{} trial record(s) in {} arm(s); baseline arm: {}\n",
        i.records,
        report.arms.len(),
        report.baseline
    ));
    let mut skipped = Vec::new();
    if i.corrupt_lines > 0 {
        skipped.push(format!(
            "{} corrupt line(s) of trials.jsonl",
            i.corrupt_lines
        ));
    }
    if i.duplicate_records > 0 {
        skipped.push(format!("{} repeated record(s)", i.duplicate_records));
    }
    if i.transcript_malformed_lines > 0 {
        skipped.push(format!(
            "{} malformed transcript line(s)",
            i.transcript_malformed_lines
        ));
    }
    if i.call_log_malformed_lines > 0 {
        skipped.push(format!(
            "{} malformed call-log line(s)",
            i.call_log_malformed_lines
        ));
    }
    if i.unreadable_files > 0 {
        skipped.push(format!(
            "{} trial file(s) missing or unreadable (see the warnings)",
            i.unreadable_files
        ));
    }
    if !skipped.is_empty() {
        out.push_str(&format!("skipped: {}\n", skipped.join(", ")));
    }
    out.push_str(&format!(
        "calls, adoption, errors and retries come from the {with_transcript} trial(s) with a transcript; the {} without one count in success, timeouts and crashes only\n",
        i.trials_without_transcript
    ));
    out.push_str("rates: share [95% Wilson score interval] count/total; calls per trial: mean [95% t interval]\n");

    out.push_str("\n== trials\n");
    let rows: Vec<Vec<String>> = report
        .arms
        .iter()
        .map(|a| {
            vec![
                a.arm.clone(),
                a.trials.to_string(),
                rate(&a.success),
                rate(&a.timeouts),
                rate(&a.crashes),
                (a.trials - a.trials_with_transcript).to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "arm",
            "trials",
            "success",
            "timeouts",
            "crashes",
            "no transcript",
        ],
        "lrrrrr",
        &rows,
    ));

    out.push_str(
        "\n== adoption: calls through this project's tools over all file writes / reads\n",
    );
    let by = |m: &std::collections::BTreeMap<&'static str, u64>| {
        if m.is_empty() {
            "-".to_string()
        } else {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let rows: Vec<Vec<String>> = report
        .arms
        .iter()
        .map(|a| {
            vec![
                a.arm.clone(),
                servers(a),
                rate(&a.write_adoption),
                by(&a.writes_by_interface),
                rate(&a.read_adoption),
                by(&a.reads_by_interface),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "arm",
            "server",
            "write adoption",
            "writes by interface",
            "read adoption",
            "reads by interface",
        ],
        "llrlrl",
        &rows,
    ));

    out.push_str("\n== calls\n");
    let rows: Vec<Vec<String>> = report
        .arms
        .iter()
        .map(|a| {
            vec![
                a.arm.clone(),
                mean(&a.calls_per_trial),
                rate(&a.error_rate),
                rate(&a.retry_after_error),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "arm",
            "calls per trial",
            "error rate",
            "retried after error",
        ],
        "lrrr",
        &rows,
    ));

    out.push_str("\n== pipe stages (from the call logs)\n");
    let rows: Vec<Vec<String>> = report
        .arms
        .iter()
        .map(|a| {
            let p = &a.pipe;
            vec![
                a.arm.clone(),
                p.trials_with_call_log.to_string(),
                p.pipe_calls.to_string(),
                p.stages.to_string(),
                p.mean_stages.map_or("-".into(), |m| format!("{m:.2}")),
                if p.top_commands.is_empty() {
                    "-".into()
                } else {
                    p.top_commands
                        .iter()
                        // The agent chose the command names: escaped, they cannot drive the
                        // terminal the table is read in.
                        .map(|c| format!("{} {}", escape_controls(&c.command), c.count))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "arm",
            "call logs",
            "pipe calls",
            "stages",
            "stages per call",
            "top commands",
        ],
        "lrrrrl",
        &rows,
    ));

    out.push_str(&harness_section(report));

    out.push_str(&format!(
        "\n== against the baseline ({}): difference in points [95% Newcombe hybrid score interval], two-sided Fisher exact p\n",
        report.baseline
    ));
    if report.comparisons.is_empty() {
        out.push_str("(no other arm)\n");
    } else {
        let mut rows = Vec::new();
        for c in &report.comparisons {
            for metric in COMPARED {
                let (d, p) = match c.get(metric) {
                    Some(d) => (difference(d), p_value(d.p_value)),
                    None => ("- (no data on one side)".into(), "-".into()),
                };
                rows.push(vec![c.arm.clone(), metric.to_string(), d, p]);
            }
        }
        out.push_str(&table(&["arm", "metric", "difference", "p"], "llrr", &rows));
    }
    out
}

/// The rows per arm and harness (the arms themselves for a study with one unnamed agent): how
/// this project's tools were offered, and the work and discovery calls.
fn harness_section(report: &StudyReport) -> String {
    let (title, rows): (&str, &[ArmNumbers]) = if report.cells.is_empty() {
        (
            "\n== per arm: what the model was offered, work and discovery calls\n",
            &report.arms,
        )
    } else {
        (
            "\n== per arm and harness: success, write adoption (over work calls), what the model was offered, work and discovery calls\n",
            &report.cells,
        )
    };
    let mut out = title.to_string();
    let per_harness = !report.cells.is_empty();
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|a| {
            let o = &a.offered;
            let presentation = if o.trials_known == 0 {
                "unknown".to_string()
            } else {
                o.presentation
                    .iter()
                    .map(|(k, n)| format!("{k} {n}/{}", o.trials_known))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let instructions = if o.trials_known == 0 {
                "-".to_string()
            } else {
                format!("{}/{}", o.instructions_seen, o.trials_known)
            };
            let mut row = vec![a.arm.clone()];
            if per_harness {
                row.extend([
                    a.harness.clone().unwrap_or_default(),
                    a.trials.to_string(),
                    rate(&a.success),
                    rate(&a.write_adoption),
                ]);
            }
            row.extend([
                a.calls.work.to_string(),
                a.calls.discovery.to_string(),
                presentation,
                instructions,
                o.mean_system_chars
                    .map_or("-".into(), |c| format!("{c:.0}")),
            ]);
            row
        })
        .collect();
    let mut header = vec!["arm"];
    let mut align = String::from("l");
    if per_harness {
        header.extend(["harness", "trials", "success", "write adoption"]);
        align.push_str("lrrr");
    }
    header.extend([
        "work calls",
        "discovery calls",
        "our tools offered",
        "instructions seen",
        "system chars",
    ]);
    align.push_str("rrlrr");
    out.push_str(&table(&header, &align, &table_rows));
    out
}

/// The arm's server names as the text shows them.
fn servers(a: &ArmNumbers) -> String {
    match &a.server_names {
        None => "(unknown)".into(),
        Some(names) if names.is_empty() => "(none)".into(),
        Some(names) => names.join(", "),
    }
}

/// A CSV cell, quoted when it holds a comma, quote or line break.
fn cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v:.6}"))
}

/// One CSV row: arm, metric, then the ten numeric cells in header order.
struct Row<'a> {
    arm: &'a str,
    metric: String,
    count: Option<u64>,
    total: Option<u64>,
    value: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
    baseline: Option<&'a str>,
    diff: Option<&'a Difference>,
}

impl Row<'_> {
    fn write(&self, out: &mut String) {
        let int = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        let cells = [
            cell(self.arm),
            cell(&self.metric),
            int(self.count),
            int(self.total),
            num(self.value),
            num(self.low),
            num(self.high),
            self.baseline.map(cell).unwrap_or_default(),
            num(self.diff.map(|d| d.diff)),
            num(self.diff.map(|d| d.low)),
            num(self.diff.map(|d| d.high)),
            num(self.diff.map(|d| d.p_value)),
        ];
        out.push_str(&cells.join(","));
        out.push('\n');
    }
}

/// The long-format CSV: one row per arm and metric (see [`CSV_HEADER`]).
pub fn csv(report: &StudyReport) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    let labels: Vec<(String, &ArmNumbers)> = report
        .arms
        .iter()
        .map(|a| (a.arm.clone(), a))
        .chain(report.cells.iter().map(|a| {
            // A row of one arm under one harness: `arm@harness` (names hold no '@').
            (
                format!("{}@{}", a.arm, a.harness.as_deref().unwrap_or("")),
                a,
            )
        }))
        .collect();
    for (label, a) in &labels {
        let arm = label.as_str();
        let comparison = report
            .comparisons
            .iter()
            .find(|c| c.arm == a.arm)
            .filter(|_| a.harness.is_none());
        let blank = |metric: &str| Row {
            arm,
            metric: metric.to_string(),
            count: None,
            total: None,
            value: None,
            low: None,
            high: None,
            baseline: None,
            diff: None,
        };
        let rate_row = |metric: &str, r: &Rate| {
            let compared = COMPARED.contains(&metric);
            Row {
                count: Some(r.count),
                total: Some(r.total),
                value: r.value,
                low: r.low,
                high: r.high,
                baseline: comparison.filter(|_| compared).map(|c| c.baseline.as_str()),
                diff: comparison.and_then(|c| c.get(metric)),
                ..blank(metric)
            }
        };
        Row {
            count: Some(a.trials),
            ..blank("trials")
        }
        .write(&mut out);
        Row {
            count: Some(a.trials_with_transcript),
            total: Some(a.trials),
            ..blank("trials_with_transcript")
        }
        .write(&mut out);
        for (metric, r) in [
            ("success", &a.success),
            ("timeouts", &a.timeouts),
            ("crashes", &a.crashes),
            ("write_adoption", &a.write_adoption),
            ("read_adoption", &a.read_adoption),
            ("error_rate", &a.error_rate),
            ("retry_after_error", &a.retry_after_error),
        ] {
            rate_row(metric, r).write(&mut out);
        }
        for (k, v) in &a.writes_by_interface {
            Row {
                count: Some(*v),
                total: Some(a.write_adoption.total),
                ..blank(&format!("writes:{k}"))
            }
            .write(&mut out);
        }
        for (k, v) in &a.reads_by_interface {
            Row {
                count: Some(*v),
                total: Some(a.read_adoption.total),
                ..blank(&format!("reads:{k}"))
            }
            .write(&mut out);
        }
        let m = &a.calls_per_trial;
        Row {
            total: Some(m.n),
            value: m.mean,
            low: m.low,
            high: m.high,
            ..blank("calls_per_trial")
        }
        .write(&mut out);
        let p = &a.pipe;
        Row {
            count: Some(p.pipe_calls),
            total: Some(p.trials_with_call_log),
            ..blank("pipe_calls")
        }
        .write(&mut out);
        Row {
            count: Some(p.stages),
            total: Some(p.pipe_calls),
            value: p.mean_stages,
            ..blank("pipe_stages")
        }
        .write(&mut out);
        for c in &p.top_commands {
            Row {
                count: Some(c.count),
                total: Some(p.stages),
                ..blank(&format!("pipe_command:{}", escape_controls(&c.command)))
            }
            .write(&mut out);
        }
        for (metric, n) in [
            ("work_calls", a.calls.work),
            ("discovery_calls", a.calls.discovery),
        ] {
            Row {
                count: Some(n),
                total: Some(a.calls.all),
                ..blank(metric)
            }
            .write(&mut out);
        }
        for (interface, n) in &a.calls.work_by_interface {
            Row {
                count: Some(*n),
                total: Some(a.calls.work),
                ..blank(&format!("work_calls:{interface}"))
            }
            .write(&mut out);
        }
        let o = &a.offered;
        Row {
            count: Some(o.trials_known),
            total: Some(a.trials),
            ..blank("offered_known")
        }
        .write(&mut out);
        for (k, n) in &o.presentation {
            Row {
                count: Some(*n),
                total: Some(o.trials_known),
                ..blank(&format!("offered:{k}"))
            }
            .write(&mut out);
        }
        Row {
            count: Some(o.instructions_seen),
            total: Some(o.trials_known),
            ..blank("instructions_seen")
        }
        .write(&mut out);
        Row {
            total: Some(o.trials_known),
            value: o.mean_system_chars,
            ..blank("system_chars")
        }
        .write(&mut out);
    }
    out
}
