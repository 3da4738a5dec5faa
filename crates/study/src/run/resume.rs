//! The output directory: started fresh, or taken up again with `--resume`.
//!
//! A run is the study file it was started with (`study.toml`), its plan (`plan.json`) and the
//! records of the trials that finished (`trials.jsonl`, appended and synced one line per trial).
//! Taking it up again checks the first two are unchanged, keeps every record, and removes the
//! directories of trials that started but left no record, so they run again from scratch.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};
use workspace::{Dir, Stat};

use crate::record::{PlannedTrial, TrialRecord, PLAN_FILE, STUDY_FILE, TRIALS_DIR, TRIALS_FILE};
use crate::spec::{Study, MAX_STUDY_FILE_BYTES};

/// Largest `plan.json` read back (a plan entry is ~100 bytes, a study at most 100,000 trials).
const MAX_PLAN_BYTES: u64 = 64 * 1024 * 1024;

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
    /// `trials.jsonl` has a second name: something (an agent) linked it elsewhere, through which
    /// the records could be changed or emptied.
    #[error("{0} has more than one hard link, so another name could change or empty the run's records; nothing more was written. Remove the extra link (find it with `find -samefile`), check the records, then continue with --resume")]
    Linked(PathBuf),
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
    /// The directory (absolute), for messages and for the paths handed to the agents.
    pub dir: PathBuf,
    /// The directory's descriptor, opened once: every file of the run is made, read and removed
    /// relative to it. Held with an exclusive lock for as long as the run lasts, so two runners
    /// never run the same trials into one directory.
    pub handle: Arc<Dir>,
    /// The directory's device and inode, which mark the processes of its trials.
    pub identity: (u64, u64),
    /// Ids of trials already recorded.
    pub recorded: HashSet<String>,
    /// `trials.jsonl`, open for appending.
    trials: File,
    trials_path: PathBuf,
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
            if resolved.starts_with(&task.fixture) {
                return Err(OutputError::InsideFixture {
                    out: resolved,
                    task: task.name.clone(),
                    fixture: task.fixture.clone(),
                });
            }
        }
        let dir = create_and_resolve(dir).map_err(io(dir))?;
        let handle = open_dir(&dir).map_err(io(&dir))?;
        match rustix::fs::flock(
            &handle,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        ) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Err(OutputError::Busy(dir)),
            Err(e) => return Err(io(&dir)(e.into())),
        }
        let identity = Stat::of(&handle)
            .map(|s| (s.dev, s.ino))
            .map_err(io(&dir))?;
        let empty = handle.entries().map_err(io(&dir))?.is_empty();
        let study_copy = dir.join(STUDY_FILE);
        let plan_path = dir.join(PLAN_FILE);
        let trials_path = dir.join(TRIALS_FILE);
        if empty {
            write_new(&handle, STUDY_FILE, &study.source).map_err(io(&study_copy))?;
            let mut plan_json = serde_json::to_vec_pretty(plan).map_err(|e| OutputError::Io {
                path: plan_path.clone(),
                source: e.into(),
            })?;
            plan_json.push(b'\n');
            write_new(&handle, PLAN_FILE, &plan_json).map_err(io(&plan_path))?;
            write_new(&handle, TRIALS_FILE, b"").map_err(io(&trials_path))?;
        } else if !resume {
            return Err(OutputError::NotEmpty(dir));
        } else {
            let copy = match read_bounded(&handle, STUDY_FILE, MAX_STUDY_FILE_BYTES) {
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
            let written: Vec<PlannedTrial> = read_bounded(&handle, PLAN_FILE, MAX_PLAN_BYTES)
                .map_err(io(&plan_path))
                .and_then(|bytes| {
                    serde_json::from_slice(&bytes)
                        .map_err(|_| OutputError::PlanChanged(plan_path.clone()))
                })?;
            if written != plan {
                return Err(OutputError::PlanChanged(plan_path));
            }
        }
        let trials = open_records(&handle, &trials_path)?;
        let recorded = read_recorded(&trials, &trials_path, plan)?;
        let out = Output {
            dir,
            handle: Arc::new(handle),
            identity,
            recorded,
            trials,
            trials_path,
        };
        out.remove_unfinished(plan)?;
        Ok(out)
    }

    /// Removes the directory of every planned trial without a record: a run cut short left it
    /// half-done, and a trial reruns from a fresh copy. What such a trial still has running (a
    /// runner killed outright cannot kill its agents' children) is killed first, so nothing of
    /// the earlier attempt writes into the new one.
    fn remove_unfinished(&self, plan: &[PlannedTrial]) -> Result<(), OutputError> {
        let unfinished: Vec<&PlannedTrial> = plan
            .iter()
            .filter(|t| !self.recorded.contains(&t.id))
            .collect();
        let markers: HashSet<String> = unfinished
            .iter()
            .map(|t| crate::record::trial_marker(self.identity, &t.id))
            .collect();
        super::orphans::kill_marked(&markers);
        let trials_dir = self.dir.join(TRIALS_DIR);
        let trials = match self.handle.subdir(OsStr::new(TRIALS_DIR)) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(&trials_dir)(e)),
        };
        for t in unfinished {
            super::copy::remove_entry(&trials, OsStr::new(&t.id))
                .map_err(io(&trials_dir.join(&t.id)))?;
        }
        Ok(())
    }

    /// Appends `record` to `trials.jsonl` and syncs it, so a record written is a trial that
    /// will not run again, even after a power cut. A file that gained a second name since it
    /// was opened is refused: an agent could have linked it into its workspace.
    pub fn append(&mut self, record: &TrialRecord) -> Result<(), OutputError> {
        let mut line = serde_json::to_vec(record).map_err(|e| OutputError::Io {
            path: self.trials_path.clone(),
            source: e.into(),
        })?;
        line.push(b'\n');
        let links = Stat::of(&self.trials).map_err(io(&self.trials_path))?.nlink;
        if links > 1 {
            return Err(OutputError::Linked(self.trials_path.clone()));
        }
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

/// Creates the output directory the user named (and its missing parents) and returns its
/// canonical path.
fn create_and_resolve(dir: &Path) -> std::io::Result<PathBuf> {
    // By name, once: `--out` is the user's own directory, named on the command line. Everything
    // after this is relative to the descriptor `open_dir` returns.
    #[allow(clippy::disallowed_methods)]
    let made = std::fs::create_dir_all(dir).and_then(|()| std::fs::canonicalize(dir));
    made
}

/// Opens the directory at the canonical path `dir` as a descriptor.
pub fn open_dir(dir: &Path) -> std::io::Result<Dir> {
    Ok(workspace::Workspace::open(dir)?
        .dir(Path::new(""))?
        .detached())
}

/// Creates `name` in `dir` (which must not hold it) with `bytes`, synced.
fn write_new(dir: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = File::from(dir.open(
        OsStr::new(name),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        Mode::from_raw_mode(0o644),
    )?);
    f.write_all(bytes)?;
    f.sync_all()
}

/// Reads the regular file `name` of `dir`, refusing one larger than `limit` bytes.
fn read_bounded(dir: &Dir, name: &str, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = dir.open_regular(OsStr::new(name), OFlags::RDONLY, Mode::empty())?;
    let mut out = Vec::new();
    file.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::other(format!("larger than {limit} bytes")));
    }
    Ok(out)
}

/// Opens `trials.jsonl` for reading and appending, refusing anything but a regular file with a
/// single link.
fn open_records(dir: &Dir, path: &Path) -> Result<File, OutputError> {
    let file = dir
        .open_regular(
            OsStr::new(TRIALS_FILE),
            OFlags::RDWR | OFlags::APPEND | OFlags::CREATE,
            Mode::from_raw_mode(0o644),
        )
        .map_err(io(path))?;
    if Stat::of(&file).map_err(io(path))?.nlink > 1 {
        return Err(OutputError::Linked(path.to_path_buf()));
    }
    Ok(file)
}

/// `path` made absolute with symlinks resolved as far as it exists: its deepest existing
/// ancestor canonicalized, the missing rest appended.
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let path = std::path::absolute(path)?;
    let mut missing = Vec::new();
    let mut existing = path.as_path();
    loop {
        // By name: the user's --out, resolved only to compare it with the fixtures before
        // anything is created; nothing is opened here.
        #[allow(clippy::disallowed_methods)]
        let real = std::fs::canonicalize(existing);
        match real {
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

/// The ids in `trials.jsonl`. A last line without its newline is what a runner killed while
/// writing leaves: it is cut off (that trial runs again). Any other bad line is an error.
fn read_recorded(
    file: &File,
    path: &Path,
    plan: &[PlannedTrial],
) -> Result<HashSet<String>, OutputError> {
    let planned: HashSet<&str> = plan.iter().map(|t| t.id.as_str()).collect();
    let mut reader = BufReader::new(file);
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
    // Appends go to the end whatever the position (O_APPEND), so trimming is enough.
    if Stat::of(file).map_err(io(path))?.size != good_len {
        file.set_len(good_len).map_err(io(path))?;
    }
    Ok(recorded)
}
