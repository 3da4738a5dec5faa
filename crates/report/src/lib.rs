//! `filesystem report`: which tool interface did the models pick, how often did their calls
//! fail and why, and did adoption fade as the conversation grew.
//!
//! Reads this server's call logs and agent transcripts (Claude Code's, Codex CLI's) into one shape ([`model`]), then
//! computes the numbers ([`stats`]) and renders them as text, JSON or CSV ([`render`]) and,
//! optionally, an SVG chart of adoption by position ([`chart`]). The two kinds of input are
//! reported in separate sections: a call through this server appears in both, and adding them
//! up would count it twice.

pub mod call_log_reader;
pub mod call_log_record;
pub mod chart;
pub mod classify;
pub mod codex;
pub mod gemini;
pub mod input;
pub mod lines;
pub mod model;
pub mod offered;
pub mod pipeline;
pub mod reason;
pub mod render;
pub mod retry;
pub mod stats;
pub mod transcript;

use std::path::PathBuf;

use clap::ValueEnum;

use classify::ServerFilter;

/// Arguments of `filesystem report`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Call logs written by the server (`<root>/.filesystem/.calls.jsonl`).
    #[arg(long = "log", value_name = "FILE", num_args = 1..)]
    pub logs: Vec<PathBuf>,

    /// Directories of Claude Code transcripts (e.g. ~/.claude/projects) or Codex CLI sessions
    /// (~/.codex/sessions, or saved `codex exec --json` output), searched recursively for
    /// *.jsonl; each file's first line tells which; subagent transcripts count as their own
    /// sessions.
    #[arg(long = "transcripts", value_name = "DIR", num_args = 1..)]
    pub transcripts: Vec<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Also draw adoption by position in the session, per interface, into this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// MCP server names (as configured in the client) that are this project; by default any
    /// server whose tool names are this project's counts. Give it when another server with
    /// look-alike tool names (write_file, edit_file…) is configured too.
    #[arg(long = "mcp-server", value_name = "NAME")]
    pub mcp_servers: Vec<String>,
}

/// How the report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned tables for reading.
    Text,
    /// One JSON document, for tools.
    Json,
    /// Long-format CSV, one figure a row (`filesystem report`: section, session, interface,
    /// metric, key, value; `filesystem study report`: arm, metric, count, total, value, low,
    /// high, baseline, diff, diff_low, diff_high, p_value).
    Csv,
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Nothing to read.
    #[error("nothing to report on: give call logs with --log FILE and/or transcript directories with --transcripts DIR")]
    NoInputs,
    /// A directory could not be listed.
    #[error("cannot list '{path}': {source}; check the path given to --transcripts")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file or directory named on the command line could not be read.
    #[error("cannot read '{}' given to {flag}: {source}; {}", .path.display(), .source.advice(*.flag))]
    Input {
        /// The path as given.
        path: PathBuf,
        /// The option that named it.
        flag: input::Flag,
        /// Why.
        source: input::InputError,
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

/// Builds the report from the inputs the arguments name.
pub fn build(args: &ReportArgs) -> Result<stats::Report, ReportError> {
    if args.logs.is_empty() && args.transcripts.is_empty() {
        return Err(ReportError::NoInputs);
    }
    let servers = ServerFilter {
        names: args.mcp_servers.clone(),
    };
    let transcripts = if args.transcripts.is_empty() {
        None
    } else {
        let (sessions, inputs) = transcript::read_transcripts(&args.transcripts, &servers)?;
        Some(stats::section(&sessions, inputs))
    };
    let call_logs = if args.logs.is_empty() {
        None
    } else {
        let (sessions, inputs) = call_log_reader::read_call_logs(&args.logs)?;
        Some(stats::section(&sessions, inputs))
    };
    Ok(stats::Report {
        transcripts,
        call_logs,
    })
}

/// Runs `filesystem report` and returns the exit status (2 when the inputs cannot be read).
pub fn run(args: &ReportArgs) -> i32 {
    match run_inner(args) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            // The message names the paths given, which may hold any character.
            eprintln!(
                "filesystem report: {}",
                workspace::terminal::escape_controls(&e.to_string())
            );
            2
        }
    }
}

/// Prints a warning about input that was skipped, on stderr; the names in it (file and folder
/// names, which anyone may have chosen) are shown escaped, so they cannot drive the terminal.
pub(crate) fn warn(message: std::fmt::Arguments<'_>) {
    eprintln!(
        "filesystem report: warning: {}",
        workspace::terminal::escape_controls(&message.to_string())
    );
}

fn run_inner(args: &ReportArgs) -> Result<String, ReportError> {
    let report = build(args)?;
    if let Some(path) = &args.svg {
        chart::draw_adoption(&report, path)?;
    }
    Ok(match args.format {
        Format::Text => render::text(&report),
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&report)?),
        Format::Csv => render::csv(&report),
    })
}
