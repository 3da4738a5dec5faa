//! `filesystem study …`: the subcommands of the adoption experiment, as the binary wires them.

/// The subcommands of `filesystem study`.
#[derive(clap::Subcommand, Debug)]
pub enum StudyCommand {
    /// Report on a run: success, adoption of this project's tools for writes and reads, calls,
    /// errors, retries and pipe stages per arm, each arm against a baseline arm.
    Report(crate::report::StudyReportArgs),
}

/// Runs a `filesystem study` subcommand and returns the exit status. `filesystem_binary` is the
/// running `filesystem` executable, which a run puts in each trial's MCP configuration.
pub fn execute(command: StudyCommand, filesystem_binary: &std::path::Path) -> i32 {
    // Only a run starts servers; the report reads what a run left.
    let _ = filesystem_binary;
    match command {
        StudyCommand::Report(args) => crate::report::run(&args),
    }
}
