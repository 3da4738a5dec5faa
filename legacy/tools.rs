//! TEMPORARY STAND-IN (branch pipeexec): resolves each pipeline command's absolute path once.
//! Replaced wholesale by the real module from the policy branch at merge.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::plan::CommandName;

/// The absolute path of every pipeline command found on this machine, resolved once at start-up
/// so that no stage is ever looked up in a `PATH` the workspace could influence.
#[derive(Clone, Debug, Default)]
pub struct ToolPaths {
    paths: HashMap<CommandName, PathBuf>,
}

impl ToolPaths {
    /// Looks every command up in `/usr/bin` and `/bin` (fd as `fdfind` too, awk as `gawk`).
    pub fn discover() -> ToolPaths {
        let mut paths = HashMap::new();
        for command in CommandName::ALL {
            let names: &[&str] = match command {
                CommandName::Tee => continue,
                CommandName::Fd => &["fd", "fdfind"],
                CommandName::Awk => &["gawk"],
                other => &[other.as_str()],
            };
            'found: for dir in ["/usr/bin", "/bin"] {
                for name in names {
                    let p = Path::new(dir).join(name);
                    if p.is_file() {
                        paths.insert(command, p);
                        break 'found;
                    }
                }
            }
        }
        ToolPaths { paths }
    }

    /// The resolved path of `command`, if installed (`tee` is built in and never has one).
    pub fn get(&self, command: CommandName) -> Option<&Path> {
        self.paths.get(&command).map(PathBuf::as_path)
    }
}
