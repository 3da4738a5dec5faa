//! The `filesystem study` subcommands, defined here so the binary only wires them in.

/// The subcommands of `filesystem study`.
#[derive(clap::Subcommand, Debug)]
pub enum StudyCommand {
    /// Run a study: every task under every arm, in fresh workspaces, recorded trial by trial.
    #[command(long_about = crate::run::RUN_LONG_ABOUT)]
    Run(crate::run::RunArgs),
}

/// Runs `command`; `filesystem_binary` is the running executable, the MCP server the study's
/// arms configure and the directory where `study-stand-in` is looked for. Returns the exit
/// status.
pub fn execute(command: StudyCommand, filesystem_binary: &std::path::Path) -> i32 {
    match command {
        StudyCommand::Run(args) => crate::run::run(&args, filesystem_binary),
    }
}
