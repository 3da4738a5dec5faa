//! `filesystem study report DIR`: per arm, how often the task was done, which interface the
//! agent chose for its reads and writes, how its calls went, and how each arm differs from the
//! baseline arm, every rate with a 95% interval.
//!
//! [`load`] reads the run directory into counts per trial, [`metrics`] adds them up per arm,
//! [`compare`] sets each arm against the baseline with the tests of [`stats`], and [`render`]
//! and [`svg`] print the result.

pub mod compare;
pub mod load;
pub mod metrics;
pub mod render;
pub mod stats;
pub mod svg;

use std::path::PathBuf;

use serde::Serialize;

use compare::Comparison;
use load::InputSummary;
use metrics::ArmNumbers;

/// Arguments of `filesystem study report`.
#[derive(clap::Args, Debug, Clone)]
pub struct StudyReportArgs {
    /// The run directory (the --out of `filesystem study run`).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Also draw adoption (writes, reads) and success per arm, with 95% intervals, into this
    /// SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// The arm the others are compared with (default: the study file's `baseline`, else its
    /// first arm).
    #[arg(long, value_name = "ARM")]
    pub baseline: Option<String>,
}

/// How the study report is printed: the same three forms as `filesystem report`'s (its CSV
/// columns are the study's own, listed in the README).
pub use report::Format;

/// Why a study report could not be made; each message says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum StudyReportError {
    /// The directory given is not one.
    #[error("'{0}' is not a directory; give the --out directory of `filesystem study run`")]
    NotADirectory(PathBuf),
    /// The run directory has no trial records file.
    #[error("'{0}' does not exist; give the --out directory of `filesystem study run` (it holds trials.jsonl once a trial has finished)")]
    NoTrialsFile(PathBuf),
    /// No trial record could be read.
    #[error("no trial record in '{path}' ({corrupt} corrupt line(s) skipped); wait for a trial to finish, or continue the run with `filesystem study run … --resume`")]
    NoRecords {
        /// The records file.
        path: PathBuf,
        /// Lines that were not records.
        corrupt: u64,
    },
    /// More records than any valid run can have.
    #[error("'{0}' holds more than {max} trial records, more than a study may have; is it a run directory?", max = load::MAX_RECORDS)]
    TooManyRecords(PathBuf),
    /// A file could not be read.
    #[error("cannot read '{path}': {source}; check the path and its permissions")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The run's copy of the study file cannot be read as a study file.
    #[error("{0}; the report takes the arms and the baseline from it: restore it from the study file the run was made with")]
    StudyFile(#[source] crate::spec::SpecError),
    /// The baseline named is not an arm of the run.
    #[error("there is no arm '{name}' in this run ({from}); choose --baseline from: {arms}")]
    UnknownBaseline {
        /// The name given.
        name: String,
        /// Where it was given (`--baseline` or the study file).
        from: &'static str,
        /// The arms there are, comma-separated.
        arms: String,
    },
    /// The chart could not be drawn or written.
    #[error("cannot draw the chart into '{path}': {detail}; choose a writable --svg path")]
    Chart {
        /// The SVG file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The JSON output could not be produced.
    #[error("cannot encode the report as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl StudyReportError {
    /// The exit status for this error: 2 for a wrong argument, 1 for a run that cannot be read.
    pub fn exit_code(&self) -> i32 {
        match self {
            StudyReportError::UnknownBaseline {
                from: "--baseline", ..
            } => 2,
            _ => 1,
        }
    }
}

/// The whole study report: the JSON document, and what the text, CSV and SVG are drawn from.
#[derive(Debug, Serialize)]
pub struct StudyReport {
    /// The run directory reported on.
    pub dir: String,
    /// The arm the others are compared with.
    pub baseline: String,
    /// What was read and skipped.
    pub inputs: InputSummary,
    /// Each arm's numbers, in the study file's order.
    pub arms: Vec<ArmNumbers>,
    /// Each other arm against the baseline, in the same order.
    pub comparisons: Vec<Comparison>,
    /// The harnesses of the run, in the study's order (empty for a study with one unnamed
    /// agent).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub harnesses: Vec<String>,
    /// One row per arm and harness, arms in their order, harnesses in theirs (empty for a
    /// study with one unnamed agent: its arms are its rows).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<ArmNumbers>,
}

/// Reads the run directory and computes the report.
pub fn build(args: &StudyReportArgs) -> Result<StudyReport, StudyReportError> {
    let loaded = load::load(&args.dir)?;
    let arms: Vec<ArmNumbers> = loaded
        .arms
        .iter()
        .map(|a| metrics::arm_numbers(&a.name, a.server_names.clone(), &a.trials))
        .collect();
    let (name, from) = match (&args.baseline, &loaded.study_baseline) {
        (Some(name), _) => (name.clone(), "--baseline"),
        (None, Some(name)) => (name.clone(), "the study file's baseline"),
        (None, None) => (
            arms.first().map(|a| a.arm.clone()).unwrap_or_default(),
            "the first arm",
        ),
    };
    let Some(baseline) = arms.iter().find(|a| a.arm == name) else {
        return Err(StudyReportError::UnknownBaseline {
            name,
            from,
            arms: arms
                .iter()
                .map(|a| a.arm.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let comparisons = compare::compare(&arms, baseline);
    let (harnesses, cells) = cells(&loaded);
    Ok(StudyReport {
        dir: args.dir.display().to_string(),
        baseline: name,
        inputs: loaded.inputs,
        arms,
        comparisons,
        harnesses,
        cells,
    })
}

/// The harnesses (the study file's, then any other the records name) and one row per arm and
/// harness; nothing when every record is of the single unnamed agent.
fn cells(loaded: &load::Loaded) -> (Vec<String>, Vec<ArmNumbers>) {
    let mut harnesses: Vec<String> = loaded
        .harnesses
        .iter()
        .filter(|h| !h.is_empty())
        .cloned()
        .collect();
    for arm in &loaded.arms {
        for (r, _) in &arm.trials {
            if !r.harness.is_empty() && !harnesses.contains(&r.harness) {
                harnesses.push(r.harness.clone());
            }
        }
    }
    if harnesses.is_empty() {
        return (harnesses, Vec::new());
    }
    let mut cells = Vec::new();
    for arm in &loaded.arms {
        for harness in &harnesses {
            let trials: Vec<_> = arm
                .trials
                .iter()
                .filter(|(r, _)| &r.harness == harness)
                .cloned()
                .collect();
            let mut row = metrics::arm_numbers(&arm.name, arm.server_names.clone(), &trials);
            row.harness = Some(harness.clone());
            cells.push(row);
        }
    }
    (harnesses, cells)
}

/// Runs `filesystem study report` and returns the exit status.
pub fn run(args: &StudyReportArgs) -> i32 {
    match run_inner(args) {
        Ok(text) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => 0,
                // A reader that stops early (`… | head`) is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
                Err(e) => {
                    eprintln!("filesystem study report: cannot write stdout: {e}");
                    1
                }
            }
        }
        Err(e) => {
            eprintln!("filesystem study report: {e}");
            e.exit_code()
        }
    }
}

fn run_inner(args: &StudyReportArgs) -> Result<String, StudyReportError> {
    let report = build(args)?;
    if let Some(path) = &args.svg {
        svg::draw(&report, path)?;
    }
    Ok(match args.format {
        Format::Text => render::text(&report),
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&report)?),
        Format::Csv => render::csv(&report),
    })
}
