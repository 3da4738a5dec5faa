//! The output directory: started fresh, or taken up again with `--resume`.
//!
//! A run is the study file it was started with (`study.toml`), its plan (`plan.json`) and the
//! records of the trials that finished (`trials.jsonl`, appended and synced one line per trial).
//! Taking it up again checks the first two are unchanged, keeps every record, and removes the
//! directories of trials that started but left no record, so they run again from scratch.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::record::{PlannedTrial, TrialRecord, PLAN_FILE, STUDY_FILE, TRIALS_DIR, TRIALS_FILE};
use crate::spec::Study;

/// Longest line accepted in `trials.jsonl` (a record is a few hundred bytes; an error text in
/// it is bounded by the system's messages).
const MAX_RECORD_LINE: u64 = 1024 * 1024;

/// Why the output directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A read or write in it failed.
    #[error("{path}: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// It holds something and `--resume` was not given.
    #[error(
        "{0} is not empty; use --resume to continue the study run in it, or choose an empty --out"
    )]
    NotEmpty(PathBuf),
    /// `--resume` on a directory that is not a study run.
    #[error("{0} holds files but no {STUDY_FILE}, so it is not a study run to resume; choose an empty --out")]
    NotARun(PathBuf),
    /// `--resume` with a study file that differs from the one the run started with.
    #[error("the study file {study} differs from {copy}, which this run was started with; a resumed run must run the same study. Restore the study file (e.g. copy {copy} back), or give a new --out to start a new run")]
    StudyChanged {
        /// The study file given.
        study: PathBuf,
        /// The run's copy.
        copy: PathBuf,
    },
    /// Another runner is using the directory.
    #[error("another `filesystem study run` is using {0}; wait for it to end (or stop it), then run again")]
    Busy(PathBuf),
    /// The directory lies inside a fixture, which would copy the run into its own trials.
    #[error("the --out directory {out} lies inside the fixture of task {task:?} ({fixture}), which every trial copies; choose an --out outside it")]
    InsideFixture {
        /// The output directory.
        out: PathBuf,
        /// The task.
        task: String,
        /// Its fixture.
        fixture: PathBuf,
    },
    /// `plan.json` does not match the plan of the (same) study: written by another version.
    #[error("{0} does not match the plan of this study (was the run started by another version of filesystem?); give a new --out")]
    PlanChanged(PathBuf),
    /// A line of `trials.jsonl` is not a record of this plan.
    #[error("{path} line {line}: {what}; the file holds one JSON record per finished trial. Remove the line to run that trial again")]
    BadRecord {
        /// `trials.jsonl`.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        what: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The output directory, ready for trials.
#[derive(Debug)]
pub struct Output {
    /// The directory (absolute).
    pub dir: PathBuf,
    /// Ids of trials already recorded.
    pub recorded: HashSet<String>,
    /// `trials.jsonl`, open for appending.
    trials: File,
    trials_path: PathBuf,
    /// The directory, held open with an exclusive lock for as long as the run lasts, so two
    /// runners never run the same trials into one directory.
    _lock: File,
}

impl Output {
    /// Prepares `dir` for `study` run in the order `plan`: a fresh run in an empty or missing
    /// directory, or with `resume` the continuation of the run already in it.
    pub fn prepare(
        dir: &Path,
        study: &Study,
        plan: &[PlannedTrial],
        resume: bool,
    ) -> Result<Output, OutputError> {
        // Checked before anything is created, so a refused --out leaves no trace in a fixture.
        let resolved = resolve(dir).map_err(io(dir))?;
        for task in &study.tasks {
            let fixture = fs::canonicalize(&task.fixture).map_err(io(&task.fixture))?;
            if resolved.starts_with(&fixture) {
                return Err(OutputError::InsideFixture {
                    out: resolved,
                    task: task.name.clone(),
                    fixture,
                });
            }
        }
        fs::create_dir_all(dir).map_err(io(dir))?;
        let dir = fs::canonicalize(dir).map_err(io(dir))?;
        let lock = File::open(&dir).map_err(io(&dir))?;
        match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Err(OutputError::Busy(dir)),
            Err(e) => return Err(io(&dir)(e.into())),
        }
        let empty = fs::read_dir(&dir).map_err(io(&dir))?.next().is_none();
        let study_copy = dir.join(STUDY_FILE);
        let plan_path = dir.join(PLAN_FILE);
        let trials_path = dir.join(TRIALS_FILE);
        if empty {
            write_synced(&study_copy, &study.source)?;
            let mut plan_json = serde_json::to_vec_pretty(plan).map_err(|e| OutputError::Io {
                path: plan_path.clone(),
                source: e.into(),
            })?;
            plan_json.push(b'\n');
            write_synced(&plan_path, &plan_json)?;
            write_synced(&trials_path, b"")?;
        } else if !resume {
            return Err(OutputError::NotEmpty(dir));
        } else {
            let copy = match fs::read(&study_copy) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(OutputError::NotARun(dir))
                }
                Err(e) => return Err(io(&study_copy)(e)),
            };
            if copy != study.source {
                return Err(OutputError::StudyChanged {
                    study: study.file.clone(),
                    copy: study_copy,
                });
            }
            let written: Vec<PlannedTrial> = File::open(&plan_path)
                .map_err(io(&plan_path))
                .and_then(|f| {
                    serde_json::from_reader(BufReader::new(f).take(64 * 1024 * 1024))
                        .map_err(|_| OutputError::PlanChanged(plan_path.clone()))
                })?;
            if written != plan {
                return Err(OutputError::PlanChanged(plan_path));
            }
        }
        let recorded = read_recorded(&trials_path, plan)?;
        let trials = OpenOptions::new()
            .append(true)
            .open(&trials_path)
            .map_err(io(&trials_path))?;
        let out = Output {
            dir,
            recorded,
            trials,
            trials_path,
            _lock: lock,
        };
        out.remove_unfinished(plan)?;
        Ok(out)
    }

    /// Removes the directory of every planned trial without a record: a run cut short left it
    /// half-done, and a trial reruns from a fresh copy.
    fn remove_unfinished(&self, plan: &[PlannedTrial]) -> Result<(), OutputError> {
        let trials_dir = self.dir.join(TRIALS_DIR);
        for t in plan {
            if !self.recorded.contains(&t.id) {
                let d = trials_dir.join(&t.id);
                super::copy::remove_tree(&d).map_err(io(&d))?;
            }
        }
        Ok(())
    }

    /// Appends `record` to `trials.jsonl` and syncs it, so a record written is a trial that
    /// will not run again, even after a power cut.
    pub fn append(&mut self, record: &TrialRecord) -> Result<(), OutputError> {
        let mut line = serde_json::to_vec(record).map_err(|e| OutputError::Io {
            path: self.trials_path.clone(),
            source: e.into(),
        })?;
        line.push(b'\n');
        // One write of the whole line: a crash leaves at most a partial last line, which the
        // next --resume drops.
        self.trials
            .write_all(&line)
            .and_then(|()| self.trials.sync_data())
            .map_err(io(&self.trials_path))?;
        self.recorded.insert(record.id.clone());
        Ok(())
    }
}

/// `path` made absolute with symlinks resolved as far as it exists: its deepest existing
/// ancestor canonicalized, the missing rest appended.
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let path = std::path::absolute(path)?;
    let mut missing = Vec::new();
    let mut existing = path.as_path();
    loop {
        match fs::canonicalize(existing) {
            Ok(mut real) => {
                real.extend(missing.iter().rev());
                return Ok(real);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                    return Err(e);
                };
                missing.push(name.to_os_string());
                existing = parent;
            }
            Err(e) => return Err(e),
        }
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let mut f = File::create(path).map_err(io(path))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(io(path))
}

/// The ids in `trials.jsonl`. A last line without its newline is what a runner killed while
/// writing leaves: it is cut off (that trial runs again). Any other bad line is an error.
fn read_recorded(path: &Path, plan: &[PlannedTrial]) -> Result<HashSet<String>, OutputError> {
    let planned: HashSet<&str> = plan.iter().map(|t| t.id.as_str()).collect();
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io(path))?;
    let mut reader = BufReader::new(&mut file);
    let mut recorded = HashSet::new();
    let mut good_len = 0u64;
    let mut line_no = 0;
    let mut line = Vec::new();
    let bad = |line: usize, what: String| OutputError::BadRecord {
        path: path.to_path_buf(),
        line,
        what,
    };
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_RECORD_LINE + 1)
            .read_until(b'\n', &mut line)
            .map_err(io(path))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line.last() != Some(&b'\n') {
            if n as u64 > MAX_RECORD_LINE {
                return Err(bad(line_no, format!("longer than {MAX_RECORD_LINE} bytes")));
            }
            // The partial last line of an interrupted append.
            break;
        }
        let record: TrialRecord = serde_json::from_slice(&line)
            .map_err(|e| bad(line_no, format!("not a trial record ({e})")))?;
        if !planned.contains(record.id.as_str()) {
            return Err(bad(
                line_no,
                format!("trial {:?} is not in this study's plan", record.id),
            ));
        }
        if !recorded.insert(record.id.clone()) {
            return Err(bad(
                line_no,
                format!("trial {:?} is recorded twice", record.id),
            ));
        }
        good_len += n as u64;
    }
    drop(reader);
    if file.metadata().map_err(io(path))?.len() != good_len {
        file.set_len(good_len).map_err(io(path))?;
        file.seek(SeekFrom::End(0)).map_err(io(path))?;
    }
    Ok(recorded)
}
