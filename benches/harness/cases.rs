//! The cases of the benchmark, each run against every peer it applies to, alternating peers
//! within every repetition so that drift on a shared machine hits all of them alike.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::client::{Server, ToolReply};
use super::data::{self, Data, EDIT_NEW, EDIT_OLD};
use super::peers::{find_tool, Kind, Peer};
use super::stats::{fmt_kib, fmt_ratio, fmt_secs, Samples};
use super::{BenchError, Config};

mod oplog;

/// One measured subject of a case: a peer, possibly with extra flags.
#[derive(Clone, Debug)]
pub struct Subject {
    /// Row label.
    pub label: String,
    /// The server, or `None` for the raw shell.
    pub peer: Option<Peer>,
    /// Flags appended for ours.
    pub extra: Vec<&'static str>,
}

/// The measurements of one subject.
#[derive(Clone, Debug, Default)]
pub struct Row {
    /// Row label.
    pub label: String,
    /// Seconds per repetition (per call or per step where the case says so).
    pub time: Samples,
    /// Peak RSS per repetition, KiB.
    pub rss_kib: Samples,
    /// Why the subject could not be measured.
    pub error: Option<String>,
}

/// A target from the issue and whether this run met it (`None`: could not be judged).
#[derive(Clone, Debug)]
pub struct Check {
    /// The case it belongs to.
    pub case: String,
    /// The target as stated.
    pub target: String,
    /// What was measured.
    pub measured: String,
    /// Met, missed, or not measurable.
    pub met: Option<bool>,
}

/// The issue's limit on what the changes since the `--baseline` build may cost: the current build's
/// median time at most this many times the baseline build's, where a case is bound by it.
pub const COST_LIMIT: f64 = 1.10;

/// A row of the current build and the row of the same subject (same flags, same inputs) on the
/// `--baseline` build, whose ratio is what the changes since then cost.
#[derive(Clone, Debug)]
pub struct Twin {
    /// Label of the current build's row.
    pub current: String,
    /// Label of the baseline build's row.
    pub previous: String,
}

/// Everything one case produced.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// Short name.
    pub title: String,
    /// What is timed, precisely.
    pub what: String,
    /// Label of the row ratios are taken against.
    pub baseline: String,
    /// Calls per repetition, when a throughput (calls/s) column makes sense.
    pub calls: Option<u64>,
    /// The rows.
    pub rows: Vec<Row>,
    /// Facts noticed while measuring (mismatches, truncated output…).
    pub notes: Vec<String>,
    /// Current rows paired with their `--baseline` rows (empty without a baseline build).
    pub twins: Vec<Twin>,
    /// The limit on the twins' time ratio in this case ([`COST_LIMIT`]), or `None` when the
    /// case's cost is reported without one.
    pub cost_limit: Option<f64>,
}

impl CaseResult {
    /// The row with this label.
    pub fn row(&self, label: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.label == label)
    }

    /// Median time of `label` divided by the baseline's: how many times faster ours is.
    pub fn ratio(&self, label: &str) -> Option<f64> {
        let base = self.row(&self.baseline)?.time.median()?;
        let other = self.row(label)?.time.median()?;
        (base > 0.0).then(|| other / base)
    }

    /// Median peak RSS of `label`, KiB.
    pub fn rss(&self, label: &str) -> Option<f64> {
        self.row(label)?.rss_kib.median()
    }

    /// Median time of the twin's current row divided by its baseline row's (above 1: the
    /// changes since the baseline made it slower).
    pub fn time_cost(&self, twin: &Twin) -> Option<f64> {
        let now = self.row(&twin.current)?.time.median()?;
        let then = self.row(&twin.previous)?.time.median()?;
        (then > 0.0).then(|| now / then)
    }

    /// The same ratio for median peak RSS, where both rows measured it.
    pub fn rss_cost(&self, twin: &Twin) -> Option<f64> {
        let (now, then) = (self.rss(&twin.current)?, self.rss(&twin.previous)?);
        (then > 0.0).then(|| now / then)
    }
}

/// The label of the baseline build's twin of the row `current`: the current build's label swapped
/// for the baseline's when the row is named after it (`filesystem --backup` becomes
/// `filesystem@abc1234 --backup`), else the baseline's label appended (`10 versions
/// (filesystem@abc1234)`).
fn twin_label(current: &str, ours: &str, previous: &str) -> String {
    match current.strip_prefix(ours) {
        Some(rest) if !ours.is_empty() => format!("{previous}{rest}"),
        _ => format!("{current} ({previous})"),
    }
}

/// A label made safe for a file name.
fn slug(label: &str) -> String {
    label.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
}

/// One repetition's measurement.
struct Measure {
    secs: f64,
    rss_kib: Option<u64>,
}

impl Measure {
    /// One tool call timed from sending it to reading its answer, then the session ended with
    /// its peak RSS: the measure of every case timed as one call in a fresh session. The answer
    /// is returned for the checks a case makes on it.
    fn one_call(
        mut server: Server,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<(ToolReply, Measure), BenchError> {
        let start = Instant::now();
        let reply = server.call_tool(tool, args)?;
        let secs = start.elapsed().as_secs_f64();
        let rss_kib = server.finish_with_peak_rss()?;
        Ok((reply, Measure { secs, rss_kib }))
    }

    /// The mean time of one of `calls` calls that took `total` together, with the session's
    /// peak RSS, ending the session: the measure of every case timed as a mean per call.
    fn per_call(server: Server, total: Duration, calls: u64) -> Result<Measure, BenchError> {
        let rss_kib = server.finish_with_peak_rss()?;
        Ok(Measure {
            secs: total.as_secs_f64() / calls as f64,
            rss_kib,
        })
    }
}

/// Shared state of the cases.
pub struct Bench<'a> {
    /// Settings.
    pub cfg: &'a Config,
    /// Generated data.
    pub data: &'a Data,
    /// Every peer available in this run.
    pub peers: &'a [Peer],
    /// Results gathered so far.
    pub results: Vec<CaseResult>,
    /// Targets judged so far.
    pub checks: Vec<Check>,
}

/// How long one server session may take before it is killed.
const SESSION_LIMIT: Duration = Duration::from_secs(300);
/// The label of the sessions that make a case's data (never timed), and how long they may take.
const SETUP_LABEL: &str = "setup";
const SETUP_LIMIT: Duration = Duration::from_secs(3600);

/// Runs `one` for every subject `reps` times, rotating the order each repetition; a subject that
/// fails once is dropped from later repetitions and its row carries the error.
fn alternate(
    subjects: &[Subject],
    reps: usize,
    mut one: impl FnMut(&Subject, usize) -> Result<Measure, BenchError>,
) -> Vec<Row> {
    let mut rows: Vec<Row> = subjects
        .iter()
        .map(|s| Row {
            label: s.label.clone(),
            ..Default::default()
        })
        .collect();
    let n = subjects.len();
    for rep in 0..reps {
        for k in 0..n {
            let i = (k + rep) % n;
            if rows[i].error.is_some() {
                continue;
            }
            match one(&subjects[i], rep) {
                Ok(m) => {
                    rows[i].time.push(m.secs);
                    if let Some(kib) = m.rss_kib {
                        rows[i].rss_kib.push(kib as f64);
                    }
                }
                Err(e) => rows[i].error = Some(e.to_string()),
            }
        }
    }
    rows
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

impl<'a> Bench<'a> {
    fn peer(&self, kind: Kind) -> Option<&Peer> {
        self.peers.iter().find(|p| p.kind == kind)
    }

    fn subject(&self, kind: Kind) -> Option<Subject> {
        self.peer(kind).map(|p| Subject {
            label: p.label.clone(),
            peer: Some(p.clone()),
            extra: vec![],
        })
    }

    fn subjects(&self, kinds: &[Kind]) -> Vec<Subject> {
        kinds.iter().filter_map(|k| self.subject(*k)).collect()
    }

    fn ours(&self) -> Option<&Peer> {
        self.peer(Kind::Ours)
    }

    fn ours_with(&self, label: &str, extra: Vec<&'static str>) -> Option<Subject> {
        self.ours().map(|p| Subject {
            label: label.to_string(),
            peer: Some(p.clone()),
            extra,
        })
    }

    /// `subjects` with the baseline build's twin right after each subject run on our binary,
    /// launched with the same flags, and the pairs; unchanged when there is no baseline build.
    /// Twins take part in the same alternation as every peer, so drift hits both builds alike.
    fn with_twins(&self, subjects: Vec<Subject>) -> (Vec<Subject>, Vec<Twin>) {
        let Some(previous) = self.peer(Kind::Baseline) else {
            return (subjects, Vec::new());
        };
        let ours = self.ours_label();
        let mut all = Vec::with_capacity(subjects.len() * 2);
        let mut twins = Vec::new();
        for subject in subjects {
            let on_ours = subject.peer.as_ref().is_some_and(|p| p.kind == Kind::Ours);
            if on_ours {
                let twin = Subject {
                    label: twin_label(&subject.label, &ours, &previous.label),
                    peer: Some(previous.clone()),
                    extra: subject.extra.clone(),
                };
                twins.push(Twin {
                    current: subject.label.clone(),
                    previous: twin.label.clone(),
                });
                all.push(subject);
                all.push(twin);
            } else {
                all.push(subject);
            }
        }
        (all, twins)
    }

    fn start(&self, subject: &Subject) -> Result<Server, BenchError> {
        self.start_at(subject, &self.data.root)
    }

    /// A server on another root than the shared data (a case whose state must not mix).
    fn start_at(&self, subject: &Subject, root: &std::path::Path) -> Result<Server, BenchError> {
        let peer = subject
            .peer
            .as_ref()
            .ok_or_else(|| BenchError::Protocol("no server for this subject".into()))?;
        let log = self
            .cfg
            .data_dir
            .join(format!("stderr-{}.log", slug(&subject.label)));
        // A set-up session is not timed and may have 100,000 calls to make on a loaded machine.
        let limit = if subject.label == SETUP_LABEL {
            SETUP_LIMIT
        } else {
            SESSION_LIMIT
        };
        Server::spawn(&peer.launch(root, &subject.extra, Some(log)), limit)
    }

    /// Starts the subject, shakes hands and finds `tool` (taking `needs`) in its list.
    fn session_with_tool(
        &self,
        subject: &Subject,
        tool: &str,
        needs: &[&str],
    ) -> Result<(Server, String), BenchError> {
        self.session_with_tool_at(subject, &self.data.root, tool, needs)
    }

    fn session_with_tool_at(
        &self,
        subject: &Subject,
        root: &std::path::Path,
        tool: &str,
        needs: &[&str],
    ) -> Result<(Server, String), BenchError> {
        let mut server = self.start_at(subject, root)?;
        server.initialize()?;
        let tools = server.list_tools()?;
        let name = find_tool(&tools, tool, needs).map_err(BenchError::NotServed)?;
        Ok((server, name))
    }

    /// Judges the case just pushed by the ratio of its row `row` to its baseline row: met when
    /// at most `limit`. `measured` words the ratio (already formatted) for the report.
    fn check_last_ratio(
        &mut self,
        row: &str,
        target: &str,
        limit: f64,
        measured: impl FnOnce(String) -> String,
    ) {
        let Some(result) = self.results.last() else {
            return;
        };
        let title = result.title.clone();
        match result.ratio(row) {
            Some(r) => self.check(&title, target, measured(fmt_ratio(r)), Some(r <= limit)),
            None => self.check(&title, target, "not measured".into(), None),
        }
    }

    fn check(&mut self, case: &str, target: &str, measured: String, met: Option<bool>) {
        self.checks.push(Check {
            case: case.into(),
            target: target.into(),
            measured,
            met,
        });
    }

    /// A "peer takes N× ours' time" check: met when the ratio is at least `at_least`.
    fn check_faster(&mut self, case: usize, peer: Kind, at_least: f64, target: &str) {
        let Some(label) = self.peer(peer).map(|p| p.label.clone()) else {
            return self.check(
                &self.results[case].title.clone(),
                target,
                "peer not in this run".into(),
                None,
            );
        };
        let title = self.results[case].title.clone();
        match self.results[case].ratio(&label) {
            Some(r) => self.check(
                &title,
                target,
                format!("{label} takes {} ours' time", fmt_ratio(r)),
                Some(r >= at_least),
            ),
            None => self.check(&title, target, "not measured".into(), None),
        }
    }

    /// Process start to an answered `initialize`.
    pub fn startup(&mut self) {
        let subjects = self.subjects(&[Kind::Ours, Kind::Floor, Kind::Reference, Kind::RustMcp]);
        let (subjects, twins) = self.with_twins(subjects);
        let rows = alternate(&subjects, self.cfg.reps_startup, |s, _| {
            let mut server = self.start(s)?;
            server.initialize()?;
            let secs = server.started().elapsed().as_secs_f64();
            let rss_kib = server.finish_with_peak_rss()?;
            Ok(Measure { secs, rss_kib })
        });
        let i = self.push_compared(
            self.compared_case(
                "start-up",
                "from spawning the process to reading the answer to `initialize`",
                rows,
                twins,
            ),
            &[
                (Kind::Reference, 100.0, "≥ 100× faster than the reference"),
                (Kind::RustMcp, 1.0, "no slower than rust-mcp-filesystem"),
            ],
        );
        self.check_within_floor(i, 1.5, "within 1.5× of the floor");
    }

    /// A case measured against the peers with ours as the baseline, no throughput column, no
    /// notes and no cost limit: what every compared case starts from (one that has any of these
    /// sets it over this).
    fn compared_case(
        &self,
        title: impl Into<String>,
        what: impl Into<String>,
        rows: Vec<Row>,
        twins: Vec<Twin>,
    ) -> CaseResult {
        CaseResult {
            title: title.into(),
            what: what.into(),
            baseline: self.ours_label(),
            calls: None,
            rows,
            notes: vec![],
            twins,
            cost_limit: None,
        }
    }

    /// Records a case measured against the peers and checks it against its targets, each "the
    /// peer takes at least N× ours' time", in order; returns the case's index for further checks.
    fn push_compared(&mut self, result: CaseResult, targets: &[(Kind, f64, &str)]) -> usize {
        self.push_result(result);
        let i = self.results.len() - 1;
        for &(peer, at_least, target) in targets {
            self.check_faster(i, peer, at_least, target);
        }
        i
    }

    fn check_within_floor(&mut self, case: usize, factor: f64, target: &str) {
        let title = self.results[case].title.clone();
        let Some(label) = self.peer(Kind::Floor).map(|p| p.label.clone()) else {
            return self.check(&title, target, "floor not in this run".into(), None);
        };
        match self.results[case].ratio(&label) {
            Some(r) if r > 0.0 => self.check(
                &title,
                target,
                format!("ours takes {} the floor's time", fmt_ratio(1.0 / r)),
                Some(1.0 / r <= factor),
            ),
            _ => self.check(&title, target, "not measured".into(), None),
        }
    }

    fn ours_label(&self) -> String {
        self.ours().map(|p| p.label.clone()).unwrap_or_default()
    }

    fn push_result(&mut self, result: CaseResult) {
        eprintln!("bench: {} done", result.title);
        for row in &result.rows {
            match (&row.error, row.time.median()) {
                (Some(e), _) => eprintln!("  {:<32} {e}", row.label),
                (None, _) if row.time.is_empty() => eprintln!("  {:<32} no data", row.label),
                (None, m) => eprintln!(
                    "  {:<32} median {}",
                    row.label,
                    m.map(fmt_secs).unwrap_or_default()
                ),
            }
        }
        self.results.push(result);
    }

    /// Pipelined `read_text_file` calls in one session.
    pub fn read(&mut self) {
        let n = self.cfg.sizes.read_calls;
        let mut subjects = self.subjects(&[Kind::Ours]);
        subjects.extend(self.ours_with("filesystem --no-call-log", vec!["--no-call-log"]));
        subjects.extend(self.subjects(&[Kind::Floor, Kind::Reference, Kind::RustMcp]));
        let (subjects, twins) = self.with_twins(subjects);
        let path = self.data.read_file.display().to_string();
        let expected = std::fs::read_to_string(&self.data.read_file).unwrap_or_default();
        let rows = alternate(&subjects, self.cfg.reps, |s, _| {
            let (mut server, tool) = self.session_with_tool(s, "read_text_file", &["path"])?;
            let args = obj(json!({"path": path}));
            let first = server.call_tool(&tool, &args)?;
            if !first.text.contains(expected.lines().next().unwrap_or("")) {
                return Err(BenchError::ToolFailed(format!(
                    "{}: read_text_file did not return the file's text",
                    s.label
                )));
            }
            let calls = vec![args; n as usize];
            let secs = server.pipelined_calls(&tool, &calls)?.as_secs_f64();
            let rss_kib = server.finish_with_peak_rss()?;
            Ok(Measure { secs, rss_kib })
        });
        let i = self.push_compared(
            CaseResult {
                calls: Some(n),
                cost_limit: Some(COST_LIMIT),
                ..self.compared_case(
                    "read_text_file ×N pipelined",
                    format!(
                        "{n} `read_text_file` calls on a 4 KiB file in one session, all requests \
                         written by a writer thread while the driver reads; first byte sent to last \
                         answer read"
                    ),
                    rows,
                    twins,
                )
            },
            &[(Kind::Reference, 10.0, "≥ 10× the reference's throughput"), (Kind::RustMcp, 4.0, "≥ 4× rust-mcp-filesystem's throughput")],
        );
        self.check_within_floor(i, 1.3, "within 1.3× of the floor");
    }

    /// A message with this machine's directories replaced by placeholders, so the report says what
    /// happened without naming where the run took place.
    fn without_machine_paths(&self, text: &str) -> String {
        let mut out = text.replace(&self.data.root.display().to_string(), "<workspace>");
        if let Ok(cwd) = std::env::current_dir() {
            out = out.replace(&cwd.display().to_string(), "<cwd>");
        }
        out
    }

    /// Relative paths: does each server accept a path relative to its root?
    pub fn relative_paths(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        for kind in [Kind::Reference, Kind::RustMcp, Kind::Ours] {
            let Some(subject) = self.subject(kind) else {
                continue;
            };
            let outcome = self
                .session_with_tool(&subject, "read_text_file", &["path"])
                .and_then(|(mut server, tool)| {
                    let reply = server.call_tool(&tool, &obj(json!({"path": "read.txt"})));
                    let _ = server.finish();
                    reply
                });
            notes.push(match outcome {
                Ok(_) => format!(
                    "{}: a path relative to the root (`read.txt`) works",
                    subject.label
                ),
                Err(e) => format!(
                    "{}: a relative path does not work ({})",
                    subject.label,
                    self.without_machine_paths(&e.to_string())
                ),
            });
        }
        notes
    }

    /// `directory_tree` over the generated tree: time and peak memory.
    pub fn tree(&mut self) {
        let subjects = self.subjects(&[Kind::Ours, Kind::Reference, Kind::RustMcp]);
        let (subjects, twins) = self.with_twins(subjects);
        let path = self.data.tree.display().to_string();
        let files = self.data.tree_files;
        let mut notes = Vec::new();
        let rows = alternate(&subjects, self.cfg.reps, |s, rep| {
            let (server, tool) = self.session_with_tool(s, "directory_tree", &["path"])?;
            let (reply, measure) = Measure::one_call(server, &tool, &obj(json!({"path": path})))?;
            if rep == 0 {
                // Every generated file name ends in `.rs`; names are all the tree reports
                // verbatim whatever its format, so this counts files listed.
                let listed = reply.text.matches(".rs\"").count() as u64;
                if listed < files {
                    notes.push(format!(
                        "{} listed {listed} of {files} files (output capped or truncated?)",
                        s.label
                    ));
                }
                notes.push(format!("{}: answer of {} bytes", s.label, reply.text.len()));
            }
            Ok(measure)
        });
        let i = self.push_compared(
            CaseResult {
                notes,
                cost_limit: Some(COST_LIMIT),
                ..self.compared_case(
                    "directory_tree",
                    format!(
                        "one `directory_tree` call on {} files in {} directories (call sent to \
                         answer read); peak RSS is the server's VmHWM read from /proc before it \
                         exits",
                        self.data.tree_files, self.data.tree_dirs
                    ),
                    rows,
                    twins,
                )
            },
            &[
                (Kind::Reference, 10.0, "≥ 10× faster than the reference"),
                (Kind::RustMcp, 3.0, "≥ 3× faster than rust-mcp-filesystem"),
            ],
        );
        let title = self.results[i].title.clone();
        let ours = self.results[i].rss(&self.ours_label());
        let others: Vec<(String, Option<f64>)> = [Kind::Reference, Kind::RustMcp]
            .iter()
            .filter_map(|k| self.peer(*k))
            .map(|p| (p.label.clone(), self.results[i].rss(&p.label)))
            .collect();
        let measured = std::iter::once(format!(
            "ours {}",
            ours.map(fmt_kib).unwrap_or_else(|| "?".into())
        ))
        .chain(
            others
                .iter()
                .map(|(l, r)| format!("{l} {}", r.map(fmt_kib).unwrap_or_else(|| "?".into()))),
        )
        .collect::<Vec<_>>()
        .join(", ");
        let met = match ours {
            Some(o) if others.iter().all(|(_, r)| r.is_some()) && !others.is_empty() => {
                Some(others.iter().all(|(_, r)| r.is_some_and(|r| o < r)))
            }
            _ => None,
        };
        self.check(&title, "lower peak memory than both", measured, met);
    }

    /// One `search_content` call over the workspace's tree and text (the big logs left out, so
    /// the 100k-file tree dominates) vs `rg` run directly with the same pattern and exclusion.
    pub fn search(&mut self) {
        let ours = self.ours_label();
        let mut subjects: Vec<Subject> = self
            .ours_with(&ours, vec!["--tools", "extended"])
            .into_iter()
            .collect();
        subjects.push(Subject {
            label: "rg".into(),
            peer: None,
            extra: vec![],
        });
        let (subjects, twins) = self.with_twins(subjects);
        // A regex with a literal part, matching once (the edit file's marked line): the time is
        // the walk and the scan, not the printing. Exact case on both sides (ours is smart by
        // default, rg exact); `logs` left out on both sides by name at any depth, and `story`
        // too: the story case's 100,000 moved files would double the tree when the cases run
        // together, so both sides search the tree case's tree and the text files, whichever
        // cases ran before.
        let pattern = r"value to change = \d+";
        let args = obj(json!({
            "pattern": pattern,
            "path": ".",
            "caseSensitive": true,
            "exclude": ["logs", "story"],
            "maxResults": 2000,
        }));
        let shell = format!("rg --no-config -n --glob '!logs' --glob '!story' -e '{pattern}' .");
        let mut outputs: Vec<(String, String)> = Vec::new();
        let rows = alternate(&subjects, self.cfg.reps, |s, rep| {
            if s.peer.is_none() {
                let (secs, out) = run_shell(&shell, &self.data.root)?;
                if rep == 0 {
                    outputs.push((s.label.clone(), sorted_lines(&out, "./")));
                }
                return Ok(Measure {
                    secs,
                    rss_kib: None,
                });
            }
            let (server, tool) = self.session_with_tool(s, "search_content", &["pattern"])?;
            let (reply, measure) = Measure::one_call(server, &tool, &args)?;
            if rep == 0 {
                outputs.push((s.label.clone(), sorted_lines(&reply.text, "")));
            }
            Ok(measure)
        });
        let mut notes = vec![
            format!("search_content: `{}`", Value::Object(args.clone())),
            format!("rg: `{shell}`"),
        ];
        notes.extend(compare_outputs(&outputs));
        let i = self.push_compared(
            CaseResult {
                notes,
                cost_limit: Some(COST_LIMIT),
                ..self.compared_case(
                    "search_content",
                    format!(
                        "one `search_content` call (sent to answer read, server already started) \
                         vs `rg` of the same pattern (spawn to exit) over the workspace: the tree \
                         of {} files in {} directories and the text files, the logs and the story \
                         case's files left out",
                        self.data.tree_files, self.data.tree_dirs
                    ),
                    rows,
                    twins,
                )
            },
            &[],
        );
        let title = self.results[i].title.clone();
        let target = "within 1.3× of `rg`";
        match self.results[i].ratio("rg") {
            Some(r) if r > 0.0 => self.check(
                &title,
                target,
                format!("ours takes {} rg's time", fmt_ratio(1.0 / r)),
                Some(1.0 / r <= 1.3),
            ),
            _ => self.check(&title, target, "not measured".into(), None),
        }
    }

    /// One `edit_file` near the end of a large file.
    pub fn edit(&mut self) {
        let subjects = self.subjects(&[Kind::Ours, Kind::Reference, Kind::RustMcp]);
        let (subjects, twins) = self.with_twins(subjects);
        let path = self.data.edit_file.display().to_string();
        let rows = alternate(&subjects, self.cfg.reps, |s, _| {
            data::restore(&self.data.edit_pristine, &self.data.edit_file)?;
            let (server, tool) = self.session_with_tool(s, "edit_file", &["path", "edits"])?;
            let args = obj(json!({
                "path": path,
                "edits": [{"oldText": EDIT_OLD, "newText": EDIT_NEW}]
            }));
            let (_, measure) = Measure::one_call(server, &tool, &args)?;
            let after = std::fs::read_to_string(&self.data.edit_file)
                .map_err(|e| BenchError::io("read the edited file".into(), e))?;
            if !after.contains(EDIT_NEW) || after.contains(EDIT_OLD) {
                return Err(BenchError::ToolFailed(format!(
                    "{}: edit_file answered but the file was not changed",
                    s.label
                )));
            }
            Ok(measure)
        });
        let _ = data::restore(&self.data.edit_pristine, &self.data.edit_file);
        self.push_compared(
            self.compared_case(
                "edit_file",
                format!(
                    "one `edit_file` call replacing one line {} bytes before the end of a {} file \
                     (call sent to answer read; the file is restored between runs)",
                    2048,
                    human_bytes(self.cfg.sizes.edit_bytes as u64)
                ),
                rows,
                twins,
            ),
            &[
                (Kind::Reference, 5.0, "≥ 5× faster than the reference"),
                (Kind::RustMcp, 3.0, "≥ 3× faster than rust-mcp-filesystem"),
            ],
        );
    }

    /// `write_file` with and without `--backup` (ours only).
    pub fn write(&mut self) {
        let subjects: Vec<Subject> = [
            self.ours_with("filesystem", vec![]),
            self.ours_with("filesystem --backup", vec!["--backup"]),
        ]
        .into_iter()
        .flatten()
        .collect();
        let (subjects, twins) = self.with_twins(subjects);
        let bytes = self.cfg.sizes.write_bytes;
        let writes = self.cfg.sizes.writes_per_session;
        let dir = self.data.root.join("write");
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("bench: cannot create {}: {e}", dir.display());
        }
        let rows = alternate(&subjects, self.cfg.reps, |s, rep| {
            let (mut server, tool) =
                self.session_with_tool(s, "write_file", &["path", "content"])?;
            // One file per subject and repetition: every session writes a new file.
            let path = dir
                .join(format!("{}-{rep}.txt", slug(&s.label)))
                .display()
                .to_string();
            let mut total = Duration::ZERO;
            for w in 0..writes {
                let content = filler(bytes, w);
                let args = obj(json!({"path": path, "content": content}));
                let start = Instant::now();
                server.call_tool(&tool, &args)?;
                total += start.elapsed();
            }
            Measure::per_call(server, total, writes)
        });
        self.push_result(CaseResult {
            title: "write_file, --backup vs not".into(),
            what: format!(
                "mean time of one `write_file` of {} over {writes} successive writes to a new \
                 file in one session (each write different, so each makes a version)",
                human_bytes(bytes as u64)
            ),
            baseline: "filesystem".into(),
            calls: None,
            rows,
            notes: vec![],
            twins,
            cost_limit: Some(COST_LIMIT),
        });
        let i = self.results.len() - 1;
        let title = self.results[i].title.clone();
        match self.results[i].ratio("filesystem --backup") {
            Some(r) => self.check(
                &title,
                "overhead of --backup ≤ 1.5×",
                format!("--backup takes {} the time", fmt_ratio(r)),
                Some(r <= 1.5),
            ),
            None => self.check(
                &title,
                "overhead of --backup ≤ 1.5×",
                "not measured".into(),
                None,
            ),
        }
        // The operation log's cost is what a write costs against a build from before the log
        // (BENCH_BASELINE=9fa19d7 or earlier); against a later baseline this is every change's.
        let result = &self.results[i];
        let cost = result
            .twins
            .iter()
            .find(|t| t.current == "filesystem")
            .and_then(|t| result.time_cost(t).map(|c| (c, t.previous.clone())));
        if let Some((c, previous)) = cost {
            self.check(
                &title,
                "a write with the operation log ≤ 1.05× one without (baseline from before the log)",
                format!("{} the time of {previous}", fmt_ratio(c)),
                Some(c <= 1.05),
            );
        }
    }

    /// The 5-stage legacy pipeline against `bash -c`, on the large and the small log.
    pub fn pipeline(&mut self) {
        let mut rss_by_size = Vec::new();
        for (log, label) in [
            (
                self.data.log.clone(),
                human_bytes(self.cfg.sizes.log_bytes as u64),
            ),
            (
                self.data.small_log.clone(),
                human_bytes(self.cfg.sizes.log_bytes as u64 / 10),
            ),
        ] {
            let rel = log
                .strip_prefix(&self.data.root)
                .unwrap_or(&log)
                .display()
                .to_string();
            let command = format!(
                "tail -n 2000000 {rel} | rg ERROR | awk '{{print $3}}' | sort | head -n 20"
            );
            // The shell runs the same programs with the switches the server forces on them
            // (rg --no-config, gawk --sandbox) and the same kind of cleared environment.
            let shell = format!(
                "tail -n 2000000 {rel} | rg --no-config ERROR | gawk --sandbox '{{print $3}}' | sort | head -n 20"
            );
            let mut subjects: Vec<Subject> = self
                .ours_with("filesystem --legacy-pipe", vec!["--legacy-pipe"])
                .into_iter()
                .collect();
            subjects.push(Subject {
                label: "bash -c".into(),
                peer: None,
                extra: vec![],
            });
            let (subjects, twins) = self.with_twins(subjects);
            let mut outputs: Vec<(String, String)> = Vec::new();
            let rows = alternate(&subjects, self.cfg.reps, |s, rep| {
                if s.peer.is_none() {
                    let (secs, out) = run_shell(&shell, &self.data.root)?;
                    if rep == 0 {
                        outputs.push((s.label.clone(), out));
                    }
                    return Ok(Measure {
                        secs,
                        rss_kib: None,
                    });
                }
                let (server, tool) = self.session_with_tool(s, "shelpa_pipe", &["command"])?;
                let (reply, measure) =
                    Measure::one_call(server, &tool, &obj(json!({"command": command})))?;
                if rep == 0 {
                    outputs.push((s.label.clone(), pipe_stdout(&reply)));
                }
                Ok(measure)
            });
            let mut notes = vec![
                format!("pipeline: `{command}`"),
                format!("shell: `{shell}`"),
            ];
            notes.extend(compare_outputs(&outputs));
            let result = CaseResult {
                title: format!("legacy pipeline, {label} log"),
                what: format!(
                    "one `shelpa_pipe` call (sent to answer read, server already started) vs \
                     `bash -c` of the same pipeline (spawn to exit) over a {label} log"
                ),
                baseline: "filesystem --legacy-pipe".into(),
                calls: None,
                rows,
                notes,
                twins,
                cost_limit: Some(COST_LIMIT),
            };
            rss_by_size.push((label.clone(), result.rss("filesystem --legacy-pipe")));
            self.push_result(result);
        }
        let Some(big) = self.results.len().checked_sub(2) else {
            return;
        };
        let title = self.results[big].title.clone();
        match self.results[big].ratio("bash -c") {
            Some(r) if r > 0.0 => self.check(
                &title,
                "wall time ≤ 1.15× `bash -c`",
                format!("ours takes {} the shell's time", fmt_ratio(1.0 / r)),
                Some(1.0 / r <= 1.15),
            ),
            _ => self.check(
                &title,
                "wall time ≤ 1.15× `bash -c`",
                "not measured".into(),
                None,
            ),
        }
        let measured = rss_by_size
            .iter()
            .map(|(l, r)| format!("{l} log: {}", r.map(fmt_kib).unwrap_or_else(|| "?".into())))
            .collect::<Vec<_>>()
            .join(", ");
        let met = if rss_by_size.iter().all(|(_, r)| r.is_some()) {
            Some(
                rss_by_size
                    .iter()
                    .all(|(_, r)| r.is_some_and(|k| k <= 32.0 * 1024.0)),
            )
        } else {
            None
        };
        self.check(
            &title,
            "server peak RSS ≤ 32 MiB whatever the input size",
            measured,
            met,
        );
    }

    /// Undo/redo step time on a file with many versions vs one with few.
    pub fn undo(&mut self) {
        let (many, few) = (self.cfg.sizes.versions_many, self.cfg.sizes.versions_few);
        let dir = self.data.root.join("undo");
        let files = [
            (
                format!("{many} versions"),
                dir.join(format!("v{many}.txt")),
                many,
            ),
            (
                format!("{few} versions"),
                dir.join(format!("v{few}.txt")),
                few,
            ),
        ];
        let Some(backup) = self.ours_with(SETUP_LABEL, vec!["--backup"]) else {
            return;
        };
        let setup = self.make_versions(&backup, &files);
        let steps = self.cfg.sizes.undo_steps;
        let span = 5.min(few.saturating_sub(1)).max(1);
        let subjects: Vec<Subject> = files
            .iter()
            .filter_map(|(label, _, _)| self.ours_with(label, vec!["--backup"]))
            .collect();
        let (subjects, twins) = self.with_twins(subjects);
        let rows = match setup {
            Err(e) => failed_rows(&subjects, &e),
            Ok(()) => alternate(&subjects, self.cfg.reps, |s, _| {
                // A baseline twin works on the file of the row it mirrors.
                let path = mirrored_input(&files, &twins, &s.label)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let (mut server, undo) = self.session_with_tool(s, "undo_file", &["path"])?;
                let tools = server.list_tools()?;
                let redo =
                    find_tool(&tools, "redo_file", &["path"]).map_err(BenchError::NotServed)?;
                let args = obj(json!({"path": path, "steps": 1}));
                let start = Instant::now();
                let mut done = 0u64;
                'outer: loop {
                    for tool in [&undo, &redo] {
                        for _ in 0..span {
                            if done == steps {
                                break 'outer;
                            }
                            server.call_tool(tool, &args)?;
                            done += 1;
                        }
                    }
                }
                let secs = start.elapsed().as_secs_f64() / steps as f64;
                // Leave the file at its newest version for the next repetition.
                let pos = done % (2 * span);
                let pending = if pos <= span { pos } else { 2 * span - pos };
                for _ in 0..pending {
                    server.call_tool(&redo, &args)?;
                }
                let rss_kib = server.finish_with_peak_rss()?;
                Ok(Measure { secs, rss_kib })
            }),
        };
        self.push_result(CaseResult {
            title: "undo/redo step".into(),
            what: format!(
                "mean time of one `undo_file`/`redo_file` step (steps: 1) over {steps} steps \
                 ({span} undos then {span} redos, repeated), file with {many} versions vs {few}"
            ),
            baseline: format!("{few} versions"),
            calls: None,
            rows,
            notes: vec![],
            twins,
            cost_limit: None,
        });
        self.check_last_ratio(
            &format!("{many} versions"),
            "each step O(1) in the number of versions (ratio ≤ 1.5×)",
            1.5,
            |r| format!("a step with {many} versions takes {r} the time of one with {few}"),
        );
    }

    /// `search_file` time after many logged moves vs after few: the story of a path must not
    /// cost a rescan of the logs.
    pub fn story(&mut self) {
        let (many, few) = (self.cfg.sizes.story_moves, 10);
        let dir = self.data.root.join("story");
        let roots = [
            (format!("{many} moves"), dir.join(format!("m{many}")), many),
            (format!("{few} moves"), dir.join(format!("m{few}")), few),
        ];
        let setup = roots
            .iter()
            .try_for_each(|(_, root, moves)| self.make_moves(root, *moves));
        let subjects: Vec<Subject> = roots
            .iter()
            .filter_map(|(label, _, _)| self.ours_with(label, vec![]))
            .collect();
        let (subjects, twins) = self.with_twins(subjects);
        let calls = self.cfg.sizes.story_calls;
        let rows = match setup {
            Err(e) => failed_rows(&subjects, &e),
            Ok(()) => alternate(&subjects, self.cfg.reps, |s, _| {
                // A baseline twin works on the root of the row it mirrors.
                let root = mirrored_input(&roots, &twins, &s.label)
                    .cloned()
                    .unwrap_or_default();
                let (mut server, tool) =
                    self.session_with_tool_at(s, &root, "search_file", &["path"])?;
                // One path moved early (its story is in the log), one never seen.
                let asks: Vec<Map<String, Value>> = (0..calls)
                    .map(|i| {
                        let path = if i % 2 == 0 {
                            "a1.txt"
                        } else {
                            "never-seen.txt"
                        };
                        obj(json!({"path": root.join(path).display().to_string()}))
                    })
                    .collect();
                let took = server.pipelined_calls(&tool, &asks)?;
                Measure::per_call(server, took, calls)
            }),
        };
        self.push_result(CaseResult {
            title: "search_file after many moves".into(),
            what: format!(
                "mean time of one `search_file` ({calls} pipelined, alternating a moved path and \
                 one never seen) in a workspace whose move log holds {many} moves vs {few}"
            ),
            baseline: format!("{few} moves"),
            calls: Some(calls),
            rows,
            notes: vec![],
            twins,
            cost_limit: None,
        });
        self.check_last_ratio(
            &format!("{many} moves"),
            "within 2× of the time after 10 moves",
            2.0,
            |r| format!("after {many} moves a call takes {r} the time of one after {few}"),
        );
    }

    /// `find_files` (the peers' `search_files`) over the tree case's tree, one call in a fresh
    /// session, against `fd` run directly with the same glob (spawn to exit).
    pub fn find(&mut self) {
        let tree = self.data.tree.clone();
        self.find_below(tree, "find_files", true);
    }

    /// The find case below one top directory of the tree (1,100 entries): rust-mcp-filesystem's
    /// `search_files` keeps a descriptor per entry it walks and runs out of them on the whole
    /// tree, so this is where it can be compared at all.
    pub fn find_top(&mut self) {
        let top = self.data.tree.join("pkg000");
        self.find_below(top, "find_files, one top directory", false);
    }

    /// One `find_files` call for [`FIND_GLOB`] below `dir` in a fresh session per subject, and
    /// `fd` with the same glob; `fd_target` checks the issue's 1.3× bound against `fd` (the
    /// whole tree's case only: on a small directory `fd`'s start-up is all there is).
    fn find_below(&mut self, dir: PathBuf, title: &str, fd_target: bool) {
        let mut subjects: Vec<Subject> = self
            .ours_with(&self.extended_label(), vec!["--tools", "extended"])
            .into_iter()
            .collect();
        subjects.extend(self.subjects(&[Kind::Reference, Kind::RustMcp]));
        subjects.push(Subject {
            label: "fd".into(),
            peer: None,
            extra: vec![],
        });
        let (subjects, twins) = self.with_twins(subjects);
        let tree = dir;
        let path = tree.display().to_string();
        // Each top directory of the tree with more than one sub-directory holds a `mod001` (all
        // 100 of the full tree): the glob has to walk all of the tree, yet its matches stay far
        // below ours' cap of 1000 results, so no
        // subject stops early or answers with a flood. Every subject's syntax reads it the same
        // way: a path glob relative to the search directory (ours, the reference), a glob on the
        // full path (`fd --full-path`) and, for rust-mcp-filesystem, a glob on each name, where
        // `**/` also matches nothing.
        let expected = count_dirs_named(&tree, FIND_NAME);
        let fd = fd_program();
        let rows = alternate(&subjects, self.cfg.reps, |s, _| {
            let (listed, measure) = match &s.peer {
                None => {
                    let Some((program, _)) = &fd else {
                        return Err(BenchError::NotServed("neither fdfind nor fd found".into()));
                    };
                    let (secs, out) = run_fd(program, &tree)?;
                    let measure = Measure {
                        secs,
                        rss_kib: None,
                    };
                    (ends_named(&out, FIND_NAME), measure)
                }
                Some(_) => {
                    let (server, tool) =
                        self.session_with_tool(s, "find_files", &["path", "pattern"])?;
                    let args = obj(json!({"path": path, "pattern": FIND_GLOB}));
                    let (reply, measure) = Measure::one_call(server, &tool, &args)?;
                    (ends_named(&reply.text, FIND_NAME), measure)
                }
            };
            if listed != expected {
                return Err(BenchError::ToolFailed(format!(
                    "{}: listed {listed} of the {expected} directories named {FIND_NAME}",
                    s.label
                )));
            }
            Ok(measure)
        });
        let mut notes = vec![format!(
            "glob `{FIND_GLOB}` ({expected} matches); fd: `{} {} '{FIND_GLOB}' <tree>`",
            fd.as_ref().map_or("fd", |(p, _)| p.as_str()),
            FD_FLAGS.join(" ")
        )];
        notes.extend(fd.map(|(_, version)| format!("fd version: {version}")));
        let i = self.push_compared(
            CaseResult {
                notes,
                baseline: self.extended_label(),
                ..self.compared_case(
                    title,
                    format!(
                        "one `find_files` call (the reference's and rust-mcp-filesystem's \
                         `search_files`) for `{FIND_GLOB}` below {} (call sent to answer read, \
                         server already started) vs `fd` with the same glob (spawn to exit)",
                        if fd_target {
                            format!(
                                "the tree of {} files in {} directories",
                                self.data.tree_files, self.data.tree_dirs
                            )
                        } else {
                            format!(
                                "`{}`, one top directory of that tree",
                                relative_to(&tree, &self.data.root)
                            )
                        }
                    ),
                    rows,
                    twins,
                )
            },
            &[
                (
                    Kind::Reference,
                    1.0,
                    "ahead of the reference's search_files",
                ),
                (
                    Kind::RustMcp,
                    1.0,
                    "ahead of rust-mcp-filesystem's search_files",
                ),
            ],
        );
        if !fd_target {
            return;
        }
        let title = self.results[i].title.clone();
        let target = "within 1.3× of `fd` with the same glob";
        match self.results[i].ratio("fd") {
            Some(r) if r > 0.0 => self.check(
                &title,
                target,
                format!("ours takes {} fd's time", fmt_ratio(1.0 / r)),
                Some(1.0 / r <= 1.3),
            ),
            _ => self.check(&title, target, "not measured".into(), None),
        }
    }

    /// `read_multiple_files` (rust-mcp-filesystem's `read_multiple_text_files`) of 100 small
    /// files, one call in a fresh session.
    pub fn multi(&mut self) {
        let mut subjects: Vec<Subject> = self
            .ours_with(&self.extended_label(), vec!["--tools", "extended"])
            .into_iter()
            .collect();
        subjects.extend(self.subjects(&[Kind::Reference, Kind::RustMcp]));
        let (subjects, twins) = self.with_twins(subjects);
        let dir = self.data.root.join("multi");
        let setup = make_small_files(&dir);
        let rows = match &setup {
            Err(e) => failed_rows(&subjects, e),
            Ok(paths) => alternate(&subjects, self.cfg.reps, |s, _| {
                let (server, tool) =
                    self.session_with_tool(s, "read_multiple_files", &["paths"])?;
                let args = obj(json!({ "paths": paths }));
                let (reply, measure) = Measure::one_call(server, &tool, &args)?;
                // Each file's text carries its own number: all must be in the answer.
                let missing = (0..MULTI_FILES)
                    .filter(|&n| !reply.text.contains(&small_file_marker(n)))
                    .count();
                if missing > 0 {
                    return Err(BenchError::ToolFailed(format!(
                        "{}: {missing} of the {MULTI_FILES} files are not in the answer",
                        s.label
                    )));
                }
                Ok(measure)
            }),
        };
        self.push_compared(
            CaseResult {
                baseline: self.extended_label(),
                ..self.compared_case(
                    "read_multiple_files",
                    format!(
                        "one `read_multiple_files` call (rust-mcp-filesystem: \
                         `read_multiple_text_files`) of {MULTI_FILES} files of {} each (call sent \
                         to answer read, server already started)",
                        human_bytes(MULTI_BYTES as u64)
                    ),
                    rows,
                    twins,
                )
            },
            &[
                (Kind::Reference, 1.0, "ahead of the reference"),
                (Kind::RustMcp, 1.0, "ahead of rust-mcp-filesystem"),
            ],
        );
    }

    /// The label of ours started with the opt-in tools, which the cases of those tools need.
    fn extended_label(&self) -> String {
        format!("{} --tools extended", self.ours_label())
    }

    /// A workspace whose move log holds `moves` moves, made through the server itself (so the
    /// log is in whatever format the build writes): files `aN.txt` renamed to `bN.txt`. Kept
    /// across runs once complete.
    fn make_moves(&self, root: &std::path::Path, moves: u64) -> Result<(), BenchError> {
        let done = root.join(".bench-moves-done");
        if done.exists() {
            return Ok(());
        }
        if root.exists() {
            std::fs::remove_dir_all(root)
                .map_err(|e| BenchError::io(format!("clear {}", root.display()), e))?;
        }
        std::fs::create_dir_all(root)
            .map_err(|e| BenchError::io(format!("create {}", root.display()), e))?;
        for n in 0..moves {
            let file = root.join(format!("a{n}.txt"));
            std::fs::write(&file, b"x\n")
                .map_err(|e| BenchError::io(format!("write {}", file.display()), e))?;
        }
        let Some(ours) = self.ours_with(SETUP_LABEL, vec![]) else {
            return Err(BenchError::NotServed("no build of ours".into()));
        };
        let (mut server, tool) =
            self.session_with_tool_at(&ours, root, "move_file", &["source", "destination"])?;
        let calls: Vec<Map<String, Value>> = (0..moves)
            .map(|n| {
                obj(json!({
                    "source": root.join(format!("a{n}.txt")).display().to_string(),
                    "destination": root.join(format!("b{n}.txt")).display().to_string(),
                }))
            })
            .collect();
        for chunk in calls.chunks(10_000) {
            server.pipelined_calls(&tool, chunk)?;
        }
        server.finish()?;
        std::fs::write(&done, b"")
            .map_err(|e| BenchError::io(format!("write {}", done.display()), e))
    }

    fn make_versions(
        &self,
        backup: &Subject,
        files: &[(String, std::path::PathBuf, u64)],
    ) -> Result<(), BenchError> {
        if let Some(dir) = files.first().and_then(|(_, p, _)| p.parent()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| BenchError::io(format!("create {}", dir.display()), e))?;
        }
        let (mut server, tool) =
            self.session_with_tool(backup, "write_file", &["path", "content"])?;
        for (_, path, versions) in files {
            let calls: Vec<Map<String, Value>> = (0..*versions)
                .map(|v| {
                    obj(json!({
                        "path": path.display().to_string(),
                        "content": format!("version {v}\n{}", filler(1024, v)),
                    }))
                })
                .collect();
            server.pipelined_calls(&tool, &calls)?;
        }
        server.finish()
    }
}

/// The name every match of the find case ends in, and the glob that finds it at any depth.
const FIND_NAME: &str = "mod001";
const FIND_GLOB: &str = "**/mod001";
/// `fd` told to search everything (no ignore files, hidden entries too, as `find_files` does)
/// and to match the glob against the whole path, as the servers match it against paths.
const FD_FLAGS: [&str; 3] = ["--unrestricted", "--glob", "--full-path"];

/// Files the batch-read case reads in one call, and the size of each.
const MULTI_FILES: u64 = 100;
const MULTI_BYTES: usize = 2048;

/// Directories named `name` at any depth below `dir` (how many matches a find case must get).
fn count_dirs_named(dir: &Path, name: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| u64::from(e.file_name() == name) + count_dirs_named(&e.path(), name))
        .sum()
}

/// `path` relative to `base` for a case's description (the data directory differs per machine).
fn relative_to(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Lines of a listing that name an entry `name` (fd ends a directory with `/`).
fn ends_named(listing: &str, name: &str) -> u64 {
    listing
        .lines()
        .map(|l| l.trim_end().trim_end_matches('/'))
        .filter(|l| l.rsplit('/').next() == Some(name))
        .count() as u64
}

/// The `fd` on this machine (Debian calls it `fdfind`, as `fd` is another program there) and
/// its version line.
fn fd_program() -> Option<(String, String)> {
    ["fdfind", "fd"].iter().find_map(|p| {
        let version = super::machine::first_line(p, &["--version"])?;
        version.starts_with("fd").then(|| (p.to_string(), version))
    })
}

/// Runs `fd` for the find case's glob below `tree`; wall time (spawn to exit) and stdout.
fn run_fd(program: &str, tree: &Path) -> Result<(f64, String), BenchError> {
    let start = Instant::now();
    let out = Command::new(program)
        .args(FD_FLAGS)
        .arg(FIND_GLOB)
        .arg(tree)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| BenchError::io(format!("run {program}"), e))?;
    let secs = start.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(BenchError::ToolFailed(format!(
            "{program} exited with {}",
            out.status
        )));
    }
    Ok((secs, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// The text that only small file `n` of the batch-read case holds.
fn small_file_marker(n: u64) -> String {
    format!("version {n:06} ")
}

/// The batch-read case's files under `dir` (rewritten each run: a hundred small writes), as
/// absolute paths, which every peer accepts.
fn make_small_files(dir: &Path) -> Result<Vec<String>, BenchError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("create {}", dir.display()), e))?;
    (0..MULTI_FILES)
        .map(|n| {
            let file = dir.join(format!("small{n:03}.txt"));
            std::fs::write(&file, filler(MULTI_BYTES, n))
                .map_err(|e| BenchError::io(format!("write {}", file.display()), e))?;
            Ok(file.display().to_string())
        })
        .collect()
}

/// The rows of a case whose set-up failed: each says why (a tool not served is reported as such,
/// anything else as a failed set-up).
fn failed_rows(subjects: &[Subject], e: &BenchError) -> Vec<Row> {
    subjects
        .iter()
        .map(|s| Row {
            label: s.label.clone(),
            error: Some(match e {
                BenchError::NotServed(_) => e.to_string(),
                _ => format!("set-up failed: {e}"),
            }),
            ..Default::default()
        })
        .collect()
}

/// The row whose inputs the subject `label` works on: its own, or for a baseline twin the row of
/// the current build it mirrors.
fn mirrored_row<'a>(twins: &'a [Twin], label: &'a String) -> &'a String {
    twins
        .iter()
        .find(|t| &t.previous == label)
        .map_or(label, |t| &t.current)
}

/// The input (a file, a root) that the subject `label` works on, out of `inputs` given as
/// (row label, input, size) per row: its own row's, or a baseline twin's mirrored row's. Serves
/// every case whose rows each prepare their own input.
fn mirrored_input<'a, T, N>(
    inputs: &'a [(String, T, N)],
    twins: &[Twin],
    label: &String,
) -> Option<&'a T> {
    let row = mirrored_row(twins, label);
    inputs.iter().find(|(l, _, _)| l == row).map(|(_, t, _)| t)
}

/// `out`'s lines with `prefix` taken off each, sorted: a search's matches compared whatever
/// order its threads printed them in and however it spells the start directory.
fn sorted_lines(out: &str, prefix: &str) -> String {
    let mut lines: Vec<&str> = out
        .lines()
        .map(|l| l.strip_prefix(prefix).unwrap_or(l))
        .collect();
    lines.sort_unstable();
    lines.join("\n")
}

/// Whether the subjects of the pipeline case printed the same thing (the first repetition's
/// output of each); two subjects keep the wording the report has always had.
fn compare_outputs(outputs: &[(String, String)]) -> Option<String> {
    let (_, first) = outputs.first()?;
    if outputs.len() < 2 {
        return None;
    }
    let same = outputs.iter().all(|(_, out)| out == first);
    Some(match (same, outputs.len()) {
        (true, 2) => format!("both produced the same {} bytes of output", first.len()),
        (true, n) => format!("all {n} produced the same {} bytes of output", first.len()),
        (false, _) => format!(
            "outputs differ: {}",
            outputs
                .iter()
                .map(|(label, out)| format!("{label} gave {} bytes", out.len()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// `bytes` of printable text that differ with `seed`.
fn filler(bytes: usize, seed: u64) -> String {
    let line = format!("line of filler text for version {seed:06} abcdefghijklmnopqrstuvwxyz\n");
    let mut s = line.repeat(bytes / line.len() + 1);
    s.truncate(bytes);
    s
}

/// Sizes as people say them.
pub fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 {
        let mib = b as f64 / (1u64 << 20) as f64;
        if b.is_multiple_of(1 << 20) {
            format!("{mib:.0} MiB")
        } else {
            format!("{:.0} MB", b as f64 / 1e6)
        }
    } else if b >= 1 << 10 {
        format!("{:.0} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// The `stdout` of a shelpa result (JSON text), or the text itself.
fn pipe_stdout(reply: &ToolReply) -> String {
    let structured = reply.result.get("structuredContent").cloned();
    let parsed = structured.or_else(|| serde_json::from_str::<Value>(&reply.text).ok());
    parsed
        .as_ref()
        .and_then(|v| v.get("stdout"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| reply.text.clone())
}

/// Runs `script` with `bash -c` in `dir` with a cleared environment; wall time and stdout.
fn run_shell(script: &str, dir: &Path) -> Result<(f64, String), BenchError> {
    let start = Instant::now();
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LC_ALL", "C.UTF-8")
        .env("HOME", "")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| BenchError::io("run bash".into(), e))?;
    let secs = start.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(BenchError::ToolFailed(format!(
            "bash -c exited with {}",
            out.status
        )));
    }
    Ok((secs, String::from_utf8_lossy(&out.stdout).into_owned()))
}
