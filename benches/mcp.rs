#![allow(clippy::disallowed_methods)] // The benchmark builds its fixture trees and reads its results by name, as a user would.
//! `cargo bench --bench mcp -- [OPTIONS]`: ours side by side with the reference server,
//! rust-mcp-filesystem, a no-validation floor and the raw shell; writes `BENCHMARKS.md`.
//!
//! `scripts/bench` installs the peers and calls this with their paths. With `--floor` the same
//! executable is the floor server instead, so the floor needs no target of its own.
//! With `--baseline` an earlier build of ours runs beside the current one in the same cases, and
//! the report says what the changes since it cost (`BENCH_BASELINE` in `scripts/bench`).

mod harness;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use harness::peers::{Kind, Peer};
use harness::{machine, report, Config, Sizes};

/// Options of the benchmark driver.
#[derive(Parser, Debug)]
#[command(
    name = "mcp-bench",
    about = "Benchmarks MCP filesystem servers side by side",
    args_override_self = true
)]
struct Opts {
    /// Serve MCP as the floor server (used by the harness itself).
    #[arg(long)]
    floor: bool,
    /// Tiny inputs and one repetition: checks that everything runs, measures nothing useful.
    #[arg(long)]
    smoke: bool,
    /// Our binary (default: the one cargo built alongside this bench).
    #[arg(long, value_name = "PATH")]
    ours: Option<PathBuf>,
    /// The reference server's entry script (`.../server-filesystem/dist/index.js`).
    #[arg(long, value_name = "PATH")]
    reference: Option<PathBuf>,
    /// The `node` that runs the reference server.
    #[arg(long, value_name = "PATH", default_value = "node")]
    node: PathBuf,
    /// The rust-mcp-filesystem executable.
    #[arg(long, value_name = "PATH")]
    rust_mcp: Option<PathBuf>,
    /// An earlier build of ours, measured beside the current one in every case ours takes part
    /// in, started the same way; the report then says what the changes since it cost.
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
    /// What that build is called: its rows are labelled `filesystem@NAME` (default: baseline).
    #[arg(long, value_name = "NAME", requires = "baseline")]
    baseline_label: Option<String>,
    /// Leave the floor out.
    #[arg(long)]
    no_floor: bool,
    /// Repetitions per case and subject.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Repetitions of the start-up case.
    #[arg(long, default_value_t = 61)]
    reps_startup: usize,
    /// Where to generate data (default: a temporary directory, removed afterwards).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Run only these cases (startup, read, tree, edit, write, pipeline, undo, story, find,
    /// find-top, multi, search, log, revert).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Markdown file to include as the report's findings section.
    #[arg(long, value_name = "FILE")]
    findings: Option<PathBuf>,
    /// Where to write the report.
    #[arg(long, value_name = "FILE", default_value = "BENCHMARKS.md")]
    out: PathBuf,
    /// cargo bench passes --bench; accepted and ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> ExitCode {
    let opts = Opts::parse();
    if opts.floor {
        return match harness::floor::serve() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("floor: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("bench: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// A `filesystem` binary as a peer: the current build, or the earlier one compared against.
fn build_of_ours(label: String, kind: Kind, program: PathBuf) -> Peer {
    Peer {
        label,
        kind,
        version: format!(
            "{}, {}",
            machine::first_line(&program, &["--version"]).unwrap_or_default(),
            machine::linkage(&program)
        ),
        program,
        leading: vec![],
    }
}

fn run(opts: &Opts) -> Result<(), String> {
    let ours = opts
        .ours
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_filesystem")));
    let mut peers = vec![build_of_ours("filesystem".into(), Kind::Ours, ours)];
    if let Some(exe) = &opts.baseline {
        let name = opts.baseline_label.as_deref().unwrap_or("baseline");
        peers.push(build_of_ours(
            format!("filesystem@{name}"),
            Kind::Baseline,
            exe.clone(),
        ));
    }
    if !opts.no_floor {
        let me =
            std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
        peers.push(Peer {
            label: "floor".into(),
            kind: Kind::Floor,
            version: format!("this harness (no validation), {}", machine::linkage(&me)),
            program: me,
            leading: vec![],
        });
    }
    if let Some(script) = &opts.reference {
        let package = script.parent().and_then(|d| d.parent());
        let version = package.and_then(machine::npm_version).unwrap_or_default();
        let node = machine::first_line(&opts.node, &["--version"]).unwrap_or_default();
        peers.push(Peer {
            label: "reference".into(),
            kind: Kind::Reference,
            program: opts.node.clone(),
            leading: vec![script.display().to_string()],
            version: format!("@modelcontextprotocol/server-filesystem {version} on Node {node}"),
        });
    }
    if let Some(exe) = &opts.rust_mcp {
        peers.push(Peer {
            label: "rust-mcp-filesystem".into(),
            kind: Kind::RustMcp,
            version: machine::first_line(exe, &["--version"]).unwrap_or_default(),
            program: exe.clone(),
            leading: vec![],
        });
    }
    for name in &opts.only {
        if !harness::CASES.contains(&name.as_str()) {
            return Err(format!(
                "unknown case '{name}'; choose from {}",
                harness::CASES.join(", ")
            ));
        }
    }
    let scratch;
    let data_dir = match &opts.data {
        Some(d) => {
            // Smoke and full runs keep apart so neither reuses the other's data.
            let d = d.join(if opts.smoke { "smoke" } else { "full" });
            std::fs::create_dir_all(&d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            d
        }
        None => {
            scratch = tempfile::tempdir().map_err(|e| format!("cannot make a temp dir: {e}"))?;
            scratch.path().to_path_buf()
        }
    };
    let (reps, reps_startup) = if opts.smoke {
        (1, 1)
    } else {
        (opts.reps, opts.reps_startup)
    };
    let cfg = Config {
        sizes: if opts.smoke {
            Sizes::smoke()
        } else {
            Sizes::full()
        },
        reps: reps.max(1),
        reps_startup: reps_startup.max(1),
        data_dir,
        peers: peers.clone(),
        only: opts.only.clone(),
    };
    let outcome = harness::run(&cfg).map_err(|e| e.to_string())?;
    let mut versions: Vec<(String, String)> = peers
        .iter()
        .map(|p| (p.label.clone(), p.version.clone()))
        .collect();
    versions.extend(machine::tool_versions());
    let findings = match &opts.findings {
        Some(f) => std::fs::read_to_string(f)
            .map_err(|e| format!("cannot read findings {}: {e}", f.display()))?,
        None => String::new(),
    };
    let preamble = report::Preamble {
        command: std::env::var("BENCH_COMMAND").unwrap_or_else(|_| "scripts/bench".into()),
        machine: machine::facts(),
        versions,
        reps: cfg.reps,
        reps_startup: cfg.reps_startup,
        findings,
    };
    let text = report::render(&preamble, &outcome);
    std::fs::write(&opts.out, text)
        .map_err(|e| format!("cannot write {}: {e}", opts.out.display()))?;
    eprintln!("bench: wrote {}", opts.out.display());
    Ok(())
}
