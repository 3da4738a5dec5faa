//! Each trial's own home: a fresh empty directory the agent's harness keeps its configuration,
//! sessions, caches and transcripts in, so trials never share state with each other or with the
//! user who runs the study (a harness that resumed a session or read a setting of the user's
//! would make trials differ for reasons no arm explains).

use std::ffi::OsString;
use std::path::Path;

use crate::spec::Template;

/// The directory under the home that is the agent's `TMPDIR`: harnesses keep per-session
/// files (shell snapshots, spooled output) in the temporary directory too.
pub const TMP: &str = ".tmp";

/// The variables the runner points into the trial's home, each relative to it, unless the
/// study's `env` sets the variable itself. `HOME` is what every harness derives its paths
/// from; the XDG base directories and the harnesses' own variables are set as well because
/// one inherited from the user's environment would win over `HOME` and lead back to the user's
/// own state.
const HOME_VARS: [(&str, &str); 7] = [
    ("HOME", ""),
    ("TMPDIR", TMP),
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_CACHE_HOME", ".cache"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_STATE_HOME", ".local/state"),
    // Claude Code keeps its settings, sessions and transcripts (`projects/`) and, with this
    // variable set, its `.claude.json` there.
    ("CLAUDE_CONFIG_DIR", ".claude"),
];

/// The environment the runner adds for a trial whose home is `home`, leaving out what the
/// study's `env` names.
pub fn home_env(home: &Path, study_env: &[(String, Template)]) -> Vec<(String, OsString)> {
    HOME_VARS
        .iter()
        .filter(|(name, _)| !study_env.iter().any(|(k, _)| k == name))
        .map(|(name, rel)| {
            let path = if rel.is_empty() {
                home.to_path_buf()
            } else {
                home.join(rel)
            };
            (name.to_string(), path.into_os_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_lies_in_the_home_and_the_study_env_wins() {
        let home = Path::new("/run/trials/000-t-a/home");
        let env = home_env(home, &[]);
        assert_eq!(env.len(), HOME_VARS.len());
        assert!(env.iter().all(|(_, v)| Path::new(v).starts_with(home)));
        let own = vec![("HOME".to_string(), Template::parse("/elsewhere").unwrap())];
        let env = home_env(home, &own);
        assert!(!env.iter().any(|(k, _)| k == "HOME"));
        assert!(env.iter().any(|(k, _)| k == "CLAUDE_CONFIG_DIR"));
    }
}
