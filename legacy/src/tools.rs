//! Where the pipeline commands live on this machine, found once at start-up.
//!
//! Stage binaries are resolved to absolute paths from a fixed, system-only search path and never
//! from the workspace or the server's own `PATH`: a workspace file called `rg` must never run,
//! and a later change of directory or environment must not change which program a name means.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::plan::{CommandName, GuardReason, Refusal};

/// The only directories searched for stage binaries.
pub const SEARCH_PATH: [&str; 3] = ["/usr/local/bin", "/usr/bin", "/bin"];

/// The absolute path of each external pipeline command, or `None` when it is not installed
/// (or not the implementation the policy was written for).
#[derive(Clone, Debug, Default)]
pub struct ToolPaths {
    paths: HashMap<CommandName, PathBuf>,
}

impl ToolPaths {
    /// Searches [`SEARCH_PATH`] for every external command.
    ///
    /// `fd` is `fdfind` on Debian. `awk` must be GNU awk and `sed` GNU sed, because the policy
    /// relies on their `--sandbox` switches: `gawk` is preferred, and a plain `awk`/`sed` is
    /// accepted only if its `--version` says it is the GNU one.
    pub fn discover() -> Self {
        let mut tools = ToolPaths::default();
        for command in CommandName::ALL {
            let found = match command {
                // Built in: nothing to find.
                CommandName::Tee => None,
                CommandName::Fd => find_first(&["fd", "fdfind"]),
                CommandName::Awk => find_first(&["gawk"])
                    .or_else(|| find_first(&["awk"]).filter(|p| version_says(p, "GNU Awk"))),
                CommandName::Sed => find_first(&["sed"]).filter(|p| version_says(p, "GNU sed")),
                other => find_first(&[other.as_str()]),
            };
            if let Some(path) = found {
                tools.paths.insert(command, path);
            }
        }
        tools
    }

    /// The resolved binary of `command`, if any.
    pub fn get(&self, command: CommandName) -> Option<&Path> {
        self.paths.get(&command).map(PathBuf::as_path)
    }

    /// The resolved binary, or the `MISSING_TOOL` refusal that says how to install it.
    pub fn require(&self, command: CommandName) -> Result<&Path, Refusal> {
        self.get(command).ok_or_else(|| {
            Refusal::new(
                GuardReason::MissingTool,
                command.as_str(),
                format!(
                    "'{}' is allowed but not installed on this machine (searched {}).",
                    command.as_str(),
                    SEARCH_PATH.join(":")
                ),
                format!(
                    "Install it ({}) and restart the server.",
                    install_hint(command)
                ),
            )
        })
    }

    /// The external commands that were not found, for help texts and `filesystem tools`.
    pub fn missing(&self) -> Vec<CommandName> {
        CommandName::ALL
            .into_iter()
            .filter(|c| *c != CommandName::Tee && !self.paths.contains_key(c))
            .collect()
    }
}

/// Commands the original shelpa whitelist also named: companion tools of the same toolkit
/// (code-tree checks and generation, a symbol finder), which this reconstruction does not ship.
/// They are recognised so that a pipeline written for the original is answered `MISSING_TOOL`
/// (allowed, but not available here) rather than `DISALLOWED_CMD`, which would tell a model
/// that the command was never part of the interface.
pub const COMPANION_TOOLS: [&str; 3] = ["ctree_check", "ctree_generate", "serena_find_symbol"];

/// The `MISSING_TOOL` refusal for a [`COMPANION_TOOLS`] name, or `None` for any other name.
/// Given at the command-name stage, before any option is looked at: their arguments are not
/// modelled, and nothing of them would run anyway.
pub fn companion_refusal(name: &str) -> Option<Refusal> {
    COMPANION_TOOLS.contains(&name).then(|| {
        Refusal::new(
            GuardReason::MissingTool,
            name,
            format!(
                "'{name}' is a companion tool of the original shelpa toolkit; it is not available in this reconstruction."
            ),
            "Do the work with the pipeline commands (rg to find symbols, fd and ls to see the tree).",
        )
    })
}

/// How to get a missing command on a Debian-like system.
pub fn install_hint(command: CommandName) -> &'static str {
    match command {
        CommandName::Rg => "apt-get install ripgrep",
        CommandName::Fd => "apt-get install fd-find",
        CommandName::Awk => "apt-get install gawk; GNU awk is required for its --sandbox",
        CommandName::Sed => "apt-get install sed; GNU sed is required for its --sandbox",
        CommandName::Jq => "apt-get install jq",
        _ => "apt-get install coreutils",
    }
}

fn find_first(names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|name| {
        SEARCH_PATH.iter().find_map(|dir| {
            let candidate = Path::new(dir).join(name);
            is_executable(&candidate).then_some(candidate)
        })
    })
}

// By name: `path` is a program in a fixed system directory (`SEARCH_PATH`), never in a workspace.
#[allow(clippy::disallowed_methods)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs `path --version` with an empty environment and checks its first line.
fn version_says(path: &Path, needle: &str) -> bool {
    Command::new(path)
        .arg("--version")
        .env_clear()
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).contains(needle))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovered_paths_are_absolute_and_from_the_fixed_search_path() {
        let tools = ToolPaths::discover();
        for command in CommandName::ALL {
            if let Some(path) = tools.get(command) {
                assert!(path.is_absolute());
                assert!(SEARCH_PATH.iter().any(|d| path.starts_with(d)), "{path:?}");
            }
        }
        assert!(tools.get(CommandName::Tee).is_none());
    }

    #[test]
    fn a_missing_tool_is_refused_with_an_install_hint() {
        let tools = ToolPaths::default();
        let r = tools.require(CommandName::Fd).expect_err("missing");
        assert_eq!(r.reason, GuardReason::MissingTool);
        assert!(r.suggestion.contains("fd-find"), "{}", r.suggestion);
        assert!(tools.missing().contains(&CommandName::Rg));
    }

    #[test]
    fn companion_tools_are_missing_and_nothing_else_is_a_companion() {
        for name in COMPANION_TOOLS {
            let r = companion_refusal(name).expect("companion");
            assert_eq!(r.reason, GuardReason::MissingTool);
            assert!(r.detail.contains("companion tool"), "{}", r.detail);
        }
        assert!(companion_refusal("rg").is_none());
        assert!(companion_refusal("ctree").is_none());
    }
}
