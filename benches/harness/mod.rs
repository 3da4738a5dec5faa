//! The benchmark harness: drives MCP servers over stdio, compares ours with its peers and the
//! raw shell, and writes the Markdown report.
//!
//! It lives under `benches/` and is compiled twice: as the `mcp` bench target (`scripts/bench`,
//! release build, real sizes) and inside `tests/bench_smoke.rs` (debug build, tiny sizes, ours
//! only) so the test suite keeps it working without ever asserting on time.

pub mod cases;
pub mod client;
pub mod data;
pub mod floor;
pub mod machine;
pub mod peers;
pub mod report;
pub mod stats;

use std::path::PathBuf;

/// Why the harness (or one measurement) failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The operating system refused something.
    #[error("cannot {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A server broke the protocol, closed early or answered with a JSON-RPC error.
    #[error("{0}")]
    Protocol(String),
    /// A tool answered with `isError` or with output that shows it did not do the work.
    #[error("{0}")]
    ToolFailed(String),
    /// The server does not offer the tool a case needs (a normal outcome before a feature lands).
    #[error("not served: {0}")]
    NotServed(String),
}

impl BenchError {
    /// An I/O error with what was being attempted.
    pub fn io(context: String, source: std::io::Error) -> BenchError {
        BenchError::Io { context, source }
    }
}

/// Input sizes of one run.
#[derive(Clone, Debug)]
pub struct Sizes {
    /// Pipelined `read_text_file` calls per session.
    pub read_calls: u64,
    /// Directories in the tree.
    pub tree_dirs: u64,
    /// Files in each directory of the tree.
    pub tree_files_per_dir: u64,
    /// Size of the file `edit_file` edits.
    pub edit_bytes: usize,
    /// Size of one `write_file`.
    pub write_bytes: usize,
    /// Writes per session in the write case.
    pub writes_per_session: u64,
    /// Size of the large log (the small one is a tenth).
    pub log_bytes: usize,
    /// Versions of the long-history file.
    pub versions_many: u64,
    /// Versions of the short-history file.
    pub versions_few: u64,
    /// Undo/redo steps per session.
    pub undo_steps: u64,
    /// Logged moves in the long-log workspace of the story case (the short one has 10).
    pub story_moves: u64,
    /// `search_file` calls per session in the story case.
    pub story_calls: u64,
    /// Entries of the long operation log `filesystem log` pages (the short one has 1,000).
    pub log_operations: u64,
    /// Operations of the larger session `revert --session` takes back (the smaller a tenth).
    pub revert_operations: u64,
}

impl Sizes {
    /// The sizes the targets are stated for.
    pub fn full() -> Sizes {
        Sizes {
            read_calls: 10_000,
            tree_dirs: 10_000,
            tree_files_per_dir: 10,
            edit_bytes: 10 << 20,
            write_bytes: 1 << 20,
            writes_per_session: 5,
            log_bytes: 200_000_000,
            versions_many: 1_000,
            versions_few: 10,
            undo_steps: 100,
            story_moves: 100_000,
            story_calls: 2_000,
            log_operations: 1_000_000,
            revert_operations: 10_000,
        }
    }

    /// Tiny inputs that exercise every code path in seconds (`--smoke`, the test suite).
    pub fn smoke() -> Sizes {
        Sizes {
            read_calls: 50,
            tree_dirs: 12,
            tree_files_per_dir: 3,
            edit_bytes: 64 << 10,
            write_bytes: 16 << 10,
            writes_per_session: 2,
            log_bytes: 200_000,
            versions_many: 12,
            versions_few: 3,
            undo_steps: 8,
            story_moves: 200,
            story_calls: 20,
            log_operations: 2_000,
            revert_operations: 20,
        }
    }
}

/// Everything one run needs to know.
#[derive(Clone, Debug)]
pub struct Config {
    /// Input sizes.
    pub sizes: Sizes,
    /// Repetitions of each case per subject (start-up uses `reps_startup`).
    pub reps: usize,
    /// Repetitions of the start-up case (cheap, and the noisiest).
    pub reps_startup: usize,
    /// Where data, server stderr logs and scratch files go.
    pub data_dir: PathBuf,
    /// The servers to compare.
    pub peers: Vec<peers::Peer>,
    /// Which cases to run (all when empty).
    pub only: Vec<String>,
}

/// Every case name, in run order.
pub const CASES: [&str; 14] = [
    "startup", "read", "tree", "edit", "write", "pipeline", "undo", "story", "find", "find-top",
    "multi", "search", "log", "revert",
];

/// The outcome of a run.
pub struct Outcome {
    /// Per-case results.
    pub results: Vec<cases::CaseResult>,
    /// Targets, judged.
    pub checks: Vec<cases::Check>,
    /// Facts worth reporting that belong to no single case.
    pub notes: Vec<String>,
    /// Label of the earlier build of ours measured beside the current one (`--baseline`), if any.
    pub baseline: Option<String>,
    /// Seconds the data generation took.
    pub setup_secs: f64,
    /// Seconds the whole run took.
    pub total_secs: f64,
}

/// Generates the data and runs the selected cases.
pub fn run(cfg: &Config) -> Result<Outcome, BenchError> {
    let t0 = std::time::Instant::now();
    let data = data::generate(&cfg.data_dir, &cfg.sizes)?;
    let setup_secs = t0.elapsed().as_secs_f64();
    eprintln!(
        "bench: data ready in {setup_secs:.1} s under {}",
        cfg.data_dir.display()
    );
    let mut bench = cases::Bench {
        cfg,
        data: &data,
        peers: &cfg.peers,
        results: Vec::new(),
        checks: Vec::new(),
    };
    let wanted = |name: &str| cfg.only.is_empty() || cfg.only.iter().any(|o| o == name);
    let mut notes = Vec::new();
    if wanted("read") {
        notes.extend(bench.relative_paths());
    }
    for case in CASES {
        if !wanted(case) {
            continue;
        }
        match case {
            "startup" => bench.startup(),
            "read" => bench.read(),
            "tree" => bench.tree(),
            "edit" => bench.edit(),
            "write" => bench.write(),
            "pipeline" => bench.pipeline(),
            "story" => bench.story(),
            "find" => bench.find(),
            "find-top" => bench.find_top(),
            "multi" => bench.multi(),
            "search" => bench.search(),
            "log" => bench.log_page(),
            "revert" => bench.revert(),
            _ => bench.undo(),
        }
    }
    Ok(Outcome {
        results: bench.results,
        checks: bench.checks,
        notes,
        baseline: cfg
            .peers
            .iter()
            .find(|p| p.kind == peers::Kind::Baseline)
            .map(|p| p.label.clone()),
        setup_secs,
        total_secs: t0.elapsed().as_secs_f64(),
    })
}
