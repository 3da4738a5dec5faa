//! The write rules of a command line: `--read-only`, `--read-only-dir` and `--writable-dir`, with
//! their environment variables, made into the one [`Permissions`] every root's toolset enforces
//! (the rule itself lives in the workspace crate, beside the guard).

use std::ffi::OsString;

use workspace::permissions::Permissions;

/// `FILESYSTEM_READ_ONLY=1` is `--read-only` (read by clap, beside the flag).
pub const READ_ONLY_ENV: &str = "FILESYSTEM_READ_ONLY";
/// A ':'-separated list of read-only directories, added to those of `--read-only-dir`.
pub const READ_ONLY_DIRS_ENV: &str = "FILESYSTEM_READ_ONLY_DIRS";
/// A ':'-separated list of writable directories, added to those of `--writable-dir`.
pub const WRITABLE_DIRS_ENV: &str = "FILESYSTEM_WRITABLE_DIRS";

/// The directories of `flags` and of the list in `env`: both count, so an environment that makes
/// a directory read-only is never silently undone by a flag (and neither is a flag by it).
fn with_env(flags: &[String], env: &str) -> Vec<String> {
    let mut all = flags.to_vec();
    if let Some(list) = std::env::var_os(env) {
        all.extend(
            list.to_string_lossy()
                .split(':')
                .filter(|d| !d.is_empty())
                .map(str::to_string),
        );
    }
    all
}

/// The rules of these flags and the environment, or the message that says which one is wrong.
pub fn permissions(
    read_only: bool,
    read_only_dirs: &[String],
    writable_dirs: &[String],
) -> Result<Permissions, String> {
    Permissions::new(
        read_only,
        &with_env(read_only_dirs, READ_ONLY_DIRS_ENV),
        &with_env(writable_dirs, WRITABLE_DIRS_ENV),
    )
    .map_err(|e| e.to_string())
}

/// The rules a command line asks for, read leniently (unknown words and subcommands left
/// alone), for help texts that are printed before the full parse: `--help` and the
/// `--legacy-pipe --help` shortcut. `None` when they cannot be read (the real parse reports why).
pub fn from_argv(argv: &[OsString]) -> Option<Permissions> {
    use clap::{Args, FromArgMatches};
    let command = crate::cli::Options::augment_args(clap::Command::new("filesystem"))
        .disable_help_flag(true)
        .disable_version_flag(true)
        .ignore_errors(true);
    // Help and version words are what brought us here; left in, the lenient parse would stop
    // at them and miss the flags after them.
    let argv = argv
        .iter()
        .filter(|a| !matches!(a.to_str(), Some("--help" | "-h" | "--version" | "-V")));
    let matches = command.try_get_matches_from(argv).ok()?;
    let options = crate::cli::Options::from_arg_matches(&matches).ok()?;
    options.permissions().ok()
}

/// The line `--help` and `filesystem tools` give: the rules in force, or that there are none.
pub fn summary(permissions: &Permissions) -> String {
    let rules = permissions.describe();
    if rules.is_empty() {
        return "Write rules in force: none (every path the guard admits may change; see --read-only, --read-only-dir, --writable-dir).".into();
    }
    format!("Write rules in force: {}.", rules.join("; "))
}
