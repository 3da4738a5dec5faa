//! The operation log's cases: how long `filesystem log` takes to show its first page of a long
//! log, and how a revert's time grows with the number of operations it takes back.
//!
//! Both are commands a person runs, so they are timed as a person sees them: spawn to exit. The
//! baseline build, if any, has no operation log, so neither case has twins; what the log costs
//! a write is the write case's cost row against a build from before the log.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::{alternate, failed_rows, obj, Bench, CaseResult, Measure, Subject};
use crate::harness::stats::fmt_secs;
use crate::harness::BenchError;

/// The size at which the writer rotates the log (`workspace::history::oplog::file::ROTATE_BYTES`).
const ROTATE_BYTES: usize = 64 * 1024 * 1024;
/// The rotated files the writer keeps beside `.operations` (`layout::KEEP_ROTATED`).
const KEEP_ROTATED: usize = 4;
/// Entries `log` is asked for: one screen.
const PAGE: &str = "20";

impl Bench<'_> {
    /// `filesystem log --limit 20` on a log of many operations vs one of 1,000.
    pub fn log_page(&mut self) {
        let (many, few) = (self.cfg.sizes.log_operations, 1_000u64);
        let dir = self.data.root.join("oplog");
        let roots = [
            (
                format!("{many} operations"),
                dir.join(format!("log{many}")),
                many,
            ),
            (
                format!("{few} operations"),
                dir.join(format!("log{few}")),
                few,
            ),
        ];
        let setup: Result<Vec<u64>, BenchError> = roots
            .iter()
            .map(|(_, root, n)| self.make_log(root, *n))
            .collect();
        let subjects: Vec<Subject> = roots
            .iter()
            .filter_map(|(label, _, _)| self.ours_with(label, vec![]))
            .collect();
        let mut notes = Vec::new();
        let rows = match &setup {
            Err(e) => failed_rows(&subjects, e),
            Ok(kept) => {
                notes.push(format!(
                    "the long log holds {} entries (one real entry of the server's, repeated with fresh ids) in files rotated at 64 MiB as the server rotates them; the short one {}",
                    kept[0], kept[1]
                ));
                alternate(&subjects, self.cfg.reps, |s, _| {
                    let root = roots
                        .iter()
                        .find(|(l, _, _)| *l == s.label)
                        .map(|(_, r, _)| r.clone())
                        .unwrap_or_default();
                    let (secs, out) = self.run_ours(&root, &["log", "--limit", PAGE])?;
                    if out.lines().count() < 20 {
                        return Err(BenchError::ToolFailed(format!(
                            "log printed {} lines, not a page of 20",
                            out.lines().count()
                        )));
                    }
                    Ok(Measure {
                        secs,
                        rss_kib: None,
                    })
                })
            }
        };
        self.push_result(CaseResult {
            title: "filesystem log, first page".into(),
            what: format!(
                "wall time of `filesystem log --limit {PAGE}` (spawn to exit) on a store whose \
                 operation log holds {many} operations vs {few}"
            ),
            baseline: format!("{few} operations"),
            calls: None,
            rows,
            notes,
            twins: vec![],
            cost_limit: None,
        });
        let title = self.results[self.results.len() - 1].title.clone();
        let median = self.results[self.results.len() - 1]
            .row(&format!("{many} operations"))
            .and_then(|r| r.time.median());
        let target = format!("first page of {many} operations in under 100 ms");
        match median {
            Some(t) => self.check(&title, &target, fmt_secs(t), Some(t < 0.100)),
            None => self.check(&title, &target, "not measured".into(), None),
        }
    }

    /// `filesystem revert --session` of a session of many creates vs few, per operation.
    pub fn revert(&mut self) {
        let (many, few) = (
            self.cfg.sizes.revert_operations,
            self.cfg.sizes.revert_operations / 10,
        );
        let dir = self.data.root.join("revert");
        let roots = [
            (
                format!("{many} operations"),
                dir.join(format!("r{many}")),
                many,
            ),
            (
                format!("{few} operations"),
                dir.join(format!("r{few}")),
                few,
            ),
        ];
        let setup: Result<Vec<String>, BenchError> = roots
            .iter()
            .map(|(_, root, n)| self.make_session(root, *n))
            .collect();
        let subjects: Vec<Subject> = roots
            .iter()
            .filter_map(|(label, _, _)| self.ours_with(label, vec![]))
            .collect();
        // Each repetition reverts the whole session and then (untimed) reverts that revert, which
        // brings every file back for the next one.
        let reps = self.cfg.reps.min(3);
        let rows = match &setup {
            Err(e) => failed_rows(&subjects, e),
            Ok(sessions) => alternate(&subjects, reps, |s, _| {
                let i = roots
                    .iter()
                    .position(|(l, _, _)| *l == s.label)
                    .unwrap_or(0);
                let (root, n) = (&roots[i].1, roots[i].2);
                let (secs, out) = self.run_ours(
                    root,
                    &["revert", "--session", &sessions[i], "--format", "json"],
                )?;
                let done: Value = serde_json::from_str(&out)
                    .map_err(|e| BenchError::Protocol(format!("revert printed no JSON: {e}")))?;
                let (reverted, entry) = (
                    done["reverted"].as_array().map_or(0, Vec::len) as u64,
                    done["operation"].as_u64(),
                );
                let Some(entry) = entry.filter(|_| reverted == n) else {
                    return Err(BenchError::ToolFailed(format!(
                        "revert took back {reverted} operations of {n}: {out:.300}"
                    )));
                };
                self.run_ours(root, &["revert", &entry.to_string()])?;
                Ok(Measure {
                    secs: secs / n as f64,
                    rss_kib: None,
                })
            }),
        };
        self.push_result(CaseResult {
            title: "revert --session".into(),
            what: format!(
                "wall time of `filesystem revert --session S` (spawn to exit) per operation, for a \
                 session of {many} `write_file` creates (in 100 directories) vs {few}"
            ),
            baseline: format!("{few} operations"),
            calls: None,
            rows,
            notes: vec![],
            twins: vec![],
            cost_limit: None,
        });
        self.check_last_ratio(
            &format!("{many} operations"),
            "linear in the number of operations (time per operation within 1.5×)",
            1.5,
            |r| format!("per operation, {many} take {r} the time of {few}"),
        );
        let title = self.results[self.results.len() - 1].title.clone();
        let per_op = self.results[self.results.len() - 1]
            .row(&format!("{many} operations"))
            .and_then(|r| r.time.median());
        let target = format!("a revert of {many} operations runs in seconds (≤ 10 s)");
        match per_op {
            Some(t) => {
                let total = t * many as f64;
                self.check(&title, &target, fmt_secs(total), Some(total <= 10.0))
            }
            None => self.check(&title, &target, "not measured".into(), None),
        }
    }

    /// Runs our binary's command `args` on `root`; wall time and stdout.
    fn run_ours(&self, root: &Path, args: &[&str]) -> Result<(f64, String), BenchError> {
        let ours = self
            .ours()
            .ok_or_else(|| BenchError::NotServed("no build of ours".into()))?;
        let start = Instant::now();
        let out = Command::new(&ours.program)
            .args(args)
            .arg("--root")
            .arg(root)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| BenchError::io(format!("run {}", ours.program.display()), e))?;
        let secs = start.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(BenchError::ToolFailed(format!(
                "filesystem {} exited with {}: {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok((secs, String::from_utf8_lossy(&out.stdout).into_owned()))
    }

    /// A store at `root` whose operation log holds `n` operations (as many as the writer's
    /// rotation keeps): one real entry, made by our server, repeated with fresh ids and
    /// written in files of the size the writer rotates at. Returns the entries kept.
    fn make_log(&self, root: &Path, n: u64) -> Result<u64, BenchError> {
        let done = root.join(".bench-log-done");
        if let Ok(text) = std::fs::read_to_string(&done) {
            if let Ok(kept) = text.trim().parse() {
                return Ok(kept);
            }
        }
        reset(root)?;
        self.make_session(root, 1)?;
        let state = root.join(".filesystem");
        let log = state.join(".operations");
        let first = std::fs::read_to_string(&log)
            .map_err(|e| BenchError::io(format!("read {}", log.display()), e))?;
        let mut entry: Value = serde_json::from_str(first.lines().next().unwrap_or(""))
            .map_err(|e| BenchError::Protocol(format!("the server's entry is not JSON: {e}")))?;
        // The writer rotates once a file has reached ROTATE_BYTES: files of `per` entries each,
        // the newest in `.operations`, the older in `.operations.1` … `.4`, the rest dropped.
        entry["id"] = json!(n);
        let longest = serde_json::to_vec(&entry)
            .map_err(|e| BenchError::Protocol(format!("entry: {e}")))?
            .len()
            + 1;
        let per = (ROTATE_BYTES / longest).max(1) as u64;
        let oldest = n.saturating_sub(per * (KEEP_ROTATED as u64 + 1)) + 1;
        let mut kept = 0u64;
        for k in 0..=KEEP_ROTATED as u64 {
            let top = n.saturating_sub(k * per);
            if top < oldest {
                break;
            }
            let bottom = top.saturating_sub(per - 1).max(oldest);
            let mut lines = Vec::with_capacity(((top - bottom + 1) as usize) * longest);
            for id in bottom..=top {
                entry["id"] = json!(id);
                serde_json::to_writer(&mut lines, &entry)
                    .map_err(|e| BenchError::Protocol(format!("entry: {e}")))?;
                lines.push(b'\n');
            }
            let path = if k == 0 {
                log.clone()
            } else {
                state.join(format!(".operations.{k}"))
            };
            std::fs::write(&path, &lines)
                .map_err(|e| BenchError::io(format!("write {}", path.display()), e))?;
            kept += top - bottom + 1;
        }
        std::fs::write(&done, kept.to_string())
            .map_err(|e| BenchError::io(format!("write {}", done.display()), e))?;
        Ok(kept)
    }

    /// A workspace at `root` with one session of `n` `write_file` creates in 100 directories;
    /// returns the session's id.
    fn make_session(&self, root: &Path, n: u64) -> Result<String, BenchError> {
        let done = root.join(".bench-session-done");
        if let Ok(id) = std::fs::read_to_string(&done) {
            return Ok(id.trim().to_string());
        }
        reset(root)?;
        let Some(ours) = self.ours_with(super::SETUP_LABEL, vec![]) else {
            return Err(BenchError::NotServed("no build of ours".into()));
        };
        let (mut server, tool) =
            self.session_with_tool_at(&ours, root, "write_file", &["path", "content"])?;
        let calls: Vec<Map<String, Value>> = (0..n)
            .map(|i| {
                let path: PathBuf = root.join(format!("d{}/f{i}.txt", i % 100));
                obj(json!({"path": path.display().to_string(), "content": format!("file {i}\n")}))
            })
            .collect();
        for chunk in calls.chunks(5_000) {
            server.pipelined_calls(&tool, chunk)?;
        }
        server.finish()?;
        let (_, out) = self.run_ours(root, &["log", "--limit", "1", "--format", "json"])?;
        let newest: Value = serde_json::from_str(out.trim())
            .map_err(|e| BenchError::Protocol(format!("log printed no JSON: {e}")))?;
        let id = newest["session"]["id"]
            .as_str()
            .ok_or_else(|| BenchError::Protocol("the newest entry names no session".into()))?
            .to_string();
        // Kept out of the workspace's tree, which the revert puts back.
        std::fs::write(&done, &id)
            .map_err(|e| BenchError::io(format!("write {}", done.display()), e))?;
        Ok(id)
    }
}

/// An empty directory at `root`.
fn reset(root: &Path) -> Result<(), BenchError> {
    if root.exists() {
        std::fs::remove_dir_all(root)
            .map_err(|e| BenchError::io(format!("clear {}", root.display()), e))?;
    }
    std::fs::create_dir_all(root)
        .map_err(|e| BenchError::io(format!("create {}", root.display()), e))
}
