//! The `filesystem study` subcommands, defined here so the binary only wires them in.

/// The subcommands of `filesystem study`.
#[derive(clap::Subcommand, Debug)]
pub enum StudyCommand {
    /// Run a study: every task under every arm, in fresh workspaces, recorded trial by trial.
    #[command(long_about = crate::run::RUN_LONG_ABOUT)]
    Run(crate::run::RunArgs),
    /// Report on a run: success, adoption of this project's tools for writes and reads, calls,
    /// errors, retries and pipe stages per arm, each arm against a baseline arm.
    Report(crate::report::StudyReportArgs),
}

/// Runs `command`; `filesystem_binary` is the running executable, the MCP server the study's
/// arms configure and the directory where `study-stand-in` is looked for, and
/// `check_server_args` its own parser of server arguments, which each arm's `args` must pass
/// (a report needs none of them: it reads what a run left). Returns the exit status.
pub fn execute(
    command: StudyCommand,
    filesystem_binary: &std::path::Path,
    check_server_args: crate::run::ServerArgsCheck<'_>,
) -> i32 {
    match command {
        StudyCommand::Run(args) => crate::run::run(&args, filesystem_binary, check_server_args),
        StudyCommand::Report(args) => crate::report::run(&args),
    }
}
