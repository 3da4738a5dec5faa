//! Reading a run directory: the trial records, each trial's MCP configuration, transcript (and
//! Codex CLI's session files in the trial's home, [`crate::run::codex_config`]) and
//! call log, reduced trial by trial to counts ([`TrialNumbers`]).
//!
//! Paths come only from [`crate::record`] (and Codex CLI's, from [`crate::run::codex_config`]). The run directory is opened once; its own files
//! (`study.toml`, `trials.jsonl`, each trial's `mcp.json`) are opened relative to that
//! descriptor, without blocking and only if they are regular files, so a FIFO left in a run
//! cannot hang the report. Damage is reported, not fatal, wherever the rest can still be read:
//! a corrupt line of `trials.jsonl` is skipped and counted, a trial whose transcript cannot be
//! read counts as one without a transcript, and every trial file that is missing or cannot be
//! read is counted ([`InputSummary::unreadable_files`]) and warned about. What makes the whole
//! report meaningless (no directory, no records) is an error.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use workspace::Dir;

use report::call_log_reader::read_call_logs;
use report::classify::{Interface, ServerFilter};
use report::model::Session;
use report::transcript::read_transcripts;
use serde::Serialize;
use serde_json::Value;

use super::metrics::TrialNumbers;
use super::StudyReportError;
use crate::record::{names, TrialPaths, TrialRecord, STUDY_FILE, TRIALS_DIR, TRIALS_FILE};
use crate::spec::Outline;

/// The most trial records read: the study file's own bound on the trials of a run.
pub const MAX_RECORDS: usize = 100_000;
/// The longest line of `trials.jsonl` read; a record is a few hundred bytes, so a longer line
/// is damage and is skipped as corrupt.
pub const MAX_RECORD_LINE: usize = 64 * 1024;
/// The largest `mcp.json` read (`study.toml` has the study file's own bound).
pub const MAX_SMALL_FILE: u64 = 1024 * 1024;
/// How many warnings are printed one by one before the rest are only counted.
const WARNINGS_SHOWN: usize = 20;

/// What was read, and what was skipped and why: part of every output, so that skipped input is
/// never silent.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputSummary {
    /// Trial records read.
    pub records: u64,
    /// Lines of `trials.jsonl` that were not a trial record (skipped).
    pub corrupt_lines: u64,
    /// Records whose id had been read already (the first is kept).
    pub duplicate_records: u64,
    /// Trials without a transcript to count (they count in success, not in calls).
    pub trials_without_transcript: u64,
    /// Transcript files read.
    pub transcript_files: u64,
    /// Transcript lines that were not JSON objects of the expected shape.
    pub transcript_malformed_lines: u64,
    /// Call-log files read.
    pub call_log_files: u64,
    /// Call-log lines that were not records.
    pub call_log_malformed_lines: u64,
    /// Trial files (a trial's directory, `mcp.json`, transcript or call log) that were missing
    /// or could not be read, each skipped with a warning.
    pub unreadable_files: u64,
}

/// One arm's trials, read.
#[derive(Debug)]
pub struct ArmTrials {
    /// The arm's name.
    pub name: String,
    /// The MCP server names of its configuration ([`super::metrics::ArmNumbers::server_names`]).
    pub server_names: Option<Vec<String>>,
    /// Its trials, in record order.
    pub trials: Vec<(TrialRecord, TrialNumbers)>,
}

/// A run directory, read.
#[derive(Debug)]
pub struct Loaded {
    /// The arms: those of `study.toml` in its order (with or without trials), then any other
    /// arm the records name, in order of first record.
    pub arms: Vec<ArmTrials>,
    /// The baseline `study.toml` names, if it names one.
    pub study_baseline: Option<String>,
    /// The harnesses `study.toml` names, in its order (one empty name for a single `[agent]`;
    /// none without a study file).
    pub harnesses: Vec<String>,
    /// What was read and skipped.
    pub inputs: InputSummary,
}

/// Prints warnings on stderr, the first few one by one, then only a count.
#[derive(Default)]
struct Warnings {
    count: usize,
}

impl Warnings {
    fn warn(&mut self, message: String) {
        self.count += 1;
        if self.count <= WARNINGS_SHOWN {
            eprintln!("filesystem study report: warning: {message}");
        }
    }

    fn finish(self) {
        if self.count > WARNINGS_SHOWN {
            eprintln!(
                "filesystem study report: warning: {} more warning(s) not shown",
                self.count - WARNINGS_SHOWN
            );
        }
    }
}

/// Reads the run directory `dir`.
pub fn load(dir: &Path) -> Result<Loaded, StudyReportError> {
    let handle = crate::named::canonical(dir)
        .and_then(|real| crate::run::resume::open_dir(&real))
        .map_err(|_| StudyReportError::NotADirectory(dir.to_path_buf()))?;
    let mut warnings = Warnings::default();
    let outline = read_outline(&handle, &dir.join(STUDY_FILE))?;
    let mut inputs = InputSummary::default();
    let records = read_records(&handle, &dir.join(TRIALS_FILE), &mut inputs, &mut warnings)?;
    let trials = match handle.subdir(OsStr::new(TRIALS_DIR)) {
        Ok(d) => Some(d),
        Err(e) => {
            warnings.warn(format!(
                "cannot open '{}' ({e}); every trial is counted without its files",
                dir.join(TRIALS_DIR).display()
            ));
            None
        }
    };

    // Arms in the study's order, then any the records add.
    let mut order: Vec<String> = outline
        .as_ref()
        .map(|o| o.arms.iter().map(|a| a.name.clone()).collect())
        .unwrap_or_default();
    for r in &records {
        if !order.contains(&r.arm) {
            order.push(r.arm.clone());
        }
    }
    let mut by_arm: BTreeMap<String, Vec<TrialRecord>> = BTreeMap::new();
    for r in records {
        by_arm.entry(r.arm.clone()).or_default().push(r);
    }
    let mut arms = Vec::new();
    for name in order {
        let records = by_arm.remove(&name).unwrap_or_default();
        arms.push(read_arm(
            dir,
            trials.as_ref(),
            name,
            records,
            &mut inputs,
            &mut warnings,
        ));
    }
    warnings.finish();
    Ok(Loaded {
        arms,
        harnesses: outline
            .as_ref()
            .map(|o| o.harnesses.clone())
            .unwrap_or_default(),
        study_baseline: outline.map(|o| o.baseline),
        inputs,
    })
}

/// The outline of the run's copy of the study file (its arms and baseline), read by the same
/// reader as the runner's; `None` when the run has no study file (a directory put together by
/// hand): the records then give the arms.
fn read_outline(handle: &Dir, path: &Path) -> Result<Option<Outline>, StudyReportError> {
    let name = OsStr::new(STUDY_FILE);
    let read_err = |source| StudyReportError::Read {
        path: path.to_path_buf(),
        source,
    };
    if handle.stat(name).map_err(read_err)?.is_none() {
        return Ok(None);
    }
    let bytes = read_small(handle, name, crate::spec::MAX_STUDY_FILE_BYTES).map_err(read_err)?;
    Outline::from_bytes(path, &bytes)
        .map(Some)
        .map_err(StudyReportError::StudyFile)
}

/// The regular file `name` of `dir`, at most `limit` bytes (opened without blocking: a FIFO is
/// refused, not waited on).
fn read_small(dir: &Dir, name: &OsStr, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = dir.open_regular(name, OFlags::RDONLY, Mode::empty())?;
    let bytes = crate::named::read_file(file, limit)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!("larger than {limit} bytes")));
    }
    Ok(bytes)
}

/// Whether a record's id can name its trial directory: one plain path component.
fn is_safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 255
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Reads `trials.jsonl`: every record, skipping (and counting) lines that are not one.
fn read_records(
    handle: &Dir,
    path: &Path,
    inputs: &mut InputSummary,
    warnings: &mut Warnings,
) -> Result<Vec<TrialRecord>, StudyReportError> {
    let file = handle
        .open_regular(OsStr::new(TRIALS_FILE), OFlags::RDONLY, Mode::empty())
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                StudyReportError::NoTrialsFile(path.to_path_buf())
            } else {
                StudyReportError::Read {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
    let mut lines = report::lines::Lines::with_limit(file, MAX_RECORD_LINE);
    let mut records = Vec::new();
    let mut seen = HashSet::new();
    let mut number = 0u64;
    loop {
        let line = lines.next_line().map_err(|source| StudyReportError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let Some(line) = line else { break };
        number += 1;
        let parsed = match line {
            report::lines::Line::Text(text) if text.iter().all(u8::is_ascii_whitespace) => continue,
            report::lines::Line::Text(text) => {
                serde_json::from_slice::<TrialRecord>(text).map_err(|e| e.to_string())
            }
            report::lines::Line::TooLong => Err(format!("longer than {MAX_RECORD_LINE} bytes")),
        };
        let record = match parsed {
            Ok(r) if is_safe_id(&r.id) => r,
            Ok(r) => {
                let shown: String = r.id.chars().take(80).collect();
                let why = format!("the id {shown:?} cannot name a trial directory");
                warn_corrupt(warnings, inputs, path, number, &why);
                continue;
            }
            Err(why) => {
                warn_corrupt(warnings, inputs, path, number, &why);
                continue;
            }
        };
        if !seen.insert(record.id.clone()) {
            inputs.duplicate_records += 1;
            warnings.warn(format!(
                "{}:{number}: trial {} is recorded again; the first record is kept",
                path.display(),
                record.id
            ));
            continue;
        }
        if records.len() >= MAX_RECORDS {
            return Err(StudyReportError::TooManyRecords(path.to_path_buf()));
        }
        records.push(record);
    }
    inputs.records = records.len() as u64;
    if records.is_empty() {
        return Err(StudyReportError::NoRecords {
            path: path.to_path_buf(),
            corrupt: inputs.corrupt_lines,
        });
    }
    Ok(records)
}

fn warn_corrupt(
    warnings: &mut Warnings,
    inputs: &mut InputSummary,
    path: &Path,
    number: u64,
    why: &str,
) {
    inputs.corrupt_lines += 1;
    warnings.warn(format!(
        "{}:{number}: not a trial record ({why}); line skipped",
        path.display()
    ));
}

/// The server names of a trial's `mcp.json` (`mcpServers` keys); `None` when it is absent or
/// unreadable (warned and counted).
fn server_names(
    trial: Option<&Dir>,
    path: &Path,
    inputs: &mut InputSummary,
    warnings: &mut Warnings,
) -> Option<Vec<String>> {
    // A trial without its directory was counted and warned about already.
    let dir = trial?;
    let parsed = read_small(dir, OsStr::new(names::MCP_CONFIG), MAX_SMALL_FILE)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).map_err(|e| e.to_string()))
        .and_then(|v| match v.get("mcpServers") {
            Some(Value::Object(servers)) => Ok(servers.keys().cloned().collect()),
            _ => Err("it has no \"mcpServers\" object".to_string()),
        });
    match parsed {
        Ok(names) => Some(names),
        Err(why) => {
            inputs.unreadable_files += 1;
            warnings.warn(format!(
                "cannot read the MCP configuration '{}' ({why}); its trial is counted with its arm's servers, or any server's tools as this project's",
                path.display()
            ));
            None
        }
    }
}

/// Opens trial `id`'s directory; `None` (warned and counted) when it is missing or cannot be
/// opened.
fn open_trial(
    trials: Option<&Dir>,
    dir: &Path,
    id: &str,
    inputs: &mut InputSummary,
    warnings: &mut Warnings,
) -> Option<Dir> {
    let opened = trials?.subdir(OsStr::new(id));
    match opened {
        Ok(d) => Some(d),
        Err(e) => {
            inputs.unreadable_files += 1;
            warnings.warn(format!(
                "cannot open the directory of trial {id} in '{}' ({e}); the trial counts in success only",
                dir.display()
            ));
            None
        }
    }
}

fn read_arm(
    dir: &Path,
    trials_dir: Option<&Dir>,
    name: String,
    records: Vec<TrialRecord>,
    inputs: &mut InputSummary,
    warnings: &mut Warnings,
) -> ArmTrials {
    let mut configured: Vec<Option<Vec<String>>> = Vec::with_capacity(records.len());
    let mut opened: Vec<Option<Dir>> = Vec::with_capacity(records.len());
    for r in &records {
        let trial = open_trial(trials_dir, dir, &r.id, inputs, warnings);
        let path = TrialPaths::new(dir, &r.id).mcp_config;
        configured.push(server_names(trial.as_ref(), &path, inputs, warnings));
        opened.push(trial);
    }
    // Every trial of an arm has the same configuration; one without a readable file takes
    // the arm's.
    let arm_names = configured.iter().flatten().next().cloned();
    let mut trials = Vec::with_capacity(records.len());
    for ((record, own), trial) in records.into_iter().zip(configured).zip(opened) {
        let names = own.or_else(|| arm_names.clone());
        let paths = TrialPaths::new(dir, &record.id);
        let mut numbers = TrialNumbers::default();
        let Some(trial) = trial else {
            inputs.trials_without_transcript += 1;
            trials.push((record, numbers));
            continue;
        };
        let has_transcripts = trial
            .stat(OsStr::new(names::TRANSCRIPT_DIR))
            .ok()
            .flatten()
            .is_some_and(|s| s.is_dir());
        // Codex CLI keeps its own record of the session in the trial's CODEX_HOME; it is read
        // beside whatever the agent left in the transcript directory.
        let mut places = Vec::new();
        if has_transcripts {
            places.push(paths.transcript_dir.clone());
        }
        if crate::run::codex_config::has_sessions(&trial) {
            places.push(crate::run::codex_config::CodexPaths::new(&paths.dir).sessions);
        }
        let sessions = (!places.is_empty())
            .then(|| read_transcript(&places, names.as_deref(), inputs, warnings))
            .flatten();
        if let Some(sessions) = sessions {
            numbers.add_transcript(&sessions);
        } else {
            inputs.trials_without_transcript += 1;
        }
        if trial
            .stat(OsStr::new(names::CALL_LOG))
            .ok()
            .flatten()
            .is_some()
        {
            match read_call_logs(std::slice::from_ref(&paths.call_log)) {
                Ok((sessions, stats)) => {
                    inputs.call_log_files += stats.files as u64;
                    inputs.call_log_malformed_lines += stats.malformed_lines as u64;
                    numbers.add_call_log(&sessions);
                }
                Err(e) => {
                    inputs.unreadable_files += 1;
                    warnings.warn(format!(
                        "trial {}: {e}; its pipe calls are not counted",
                        record.id
                    ));
                }
            }
        }
        trials.push((record, numbers));
    }
    ArmTrials {
        name,
        server_names: arm_names,
        trials,
    }
}

/// A trial's transcript sessions from its transcript directory (and Codex's session directory),
/// classified with its server names; `None` when it left no transcript file (or none that could
/// be read, warned).
fn read_transcript(
    places: &[std::path::PathBuf],
    names: Option<&[String]>,
    inputs: &mut InputSummary,
    warnings: &mut Warnings,
) -> Option<Vec<Session>> {
    let filter = ServerFilter {
        names: names.map(<[String]>::to_vec).unwrap_or_default(),
    };
    match read_transcripts(places, &filter) {
        Ok((mut sessions, stats)) => {
            inputs.transcript_files += stats.files as u64;
            inputs.transcript_malformed_lines += stats.malformed_lines as u64;
            if stats.files == 0 {
                return None;
            }
            if names.is_some_and(<[String]>::is_empty) {
                // No server was configured, so no call can have gone through this project: a
                // tool that merely shares a name with ours came from elsewhere.
                for call in sessions.iter_mut().flat_map(|s| s.calls.iter_mut()) {
                    if call.interface.is_ours() {
                        call.interface = Interface::OtherMcp;
                        call.write = false;
                    }
                }
            }
            Some(sessions)
        }
        Err(e) => {
            inputs.unreadable_files += 1;
            warnings.warn(format!(
                "{e}; the trial is counted as one without a transcript"
            ));
            None
        }
    }
}
