//! `study-stand-in`: a scripted agent for `filesystem study`.
//!
//! The adoption experiment asks which interface an agent picks for which work. To test the
//! experiment itself (runner, records, report) without a model, this stand-in plays the agent:
//! it reads the MCP configuration the runner wrote, starts the server and speaks MCP to it, and
//! carries out the task's plan, choosing for each step between the server's tools and built-in
//! file work with probabilities known in advance (the policy), drawn from a seeded generator so
//! every trial can be replayed. It writes a Claude Code-shaped transcript, which the report reads
//! as it reads a real agent's, and can give up or hang on purpose, so the runner's handling of
//! both is exercised. `--help` documents the plan and policy formats.

mod args;
mod builtin;
mod error;
mod input;
mod mcp;
mod plan;
mod policy;
mod rng;
mod run;
mod transcript;

use std::io::Write;

use error::StandInError;

fn main() {
    let code = match args::parse(std::env::args_os().skip(1)) {
        Ok(args::Command::Help) => {
            print!("{}", args::HELP);
            0
        }
        Ok(args::Command::Run(args)) => match run::run(&args) {
            Ok(summary) => {
                let line = serde_json::to_string(&summary).unwrap_or_default();
                let mut out = std::io::stdout().lock();
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_ok() {
                    0
                } else {
                    1
                }
            }
            Err(e) => report(&e),
        },
        Err(e) => report(&e),
    };
    std::process::exit(code);
}

/// Prints the error; the exit code: 2 for usage, 1 for the rest.
fn report(e: &StandInError) -> i32 {
    eprintln!("study-stand-in: {e}");
    match e {
        StandInError::Usage(_) => 2,
        _ => 1,
    }
}
