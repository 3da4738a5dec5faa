//! What a trial gives Gemini CLI: a directory of its own (`TRIAL_DIR/home/.gemini`, found by
//! Gemini CLI through `GEMINI_CLI_HOME=TRIAL_DIR/home`) holding the `settings.json` the runner
//! writes, so no trial shares sessions, settings or caches with another or with the user's.
//!
//! The settings hold the arm's MCP server (the same `mcpServers` entry as `{mcp_config}`:
//! this binary with the arm's arguments, `--root` and `--call-log` of the trial) and switch off
//! what would reach out or ask: usage statistics, telemetry, update checks, the IDE companion.
//! They choose API-key auth, so a headless run never opens the sign-in dialog; the key and
//! the endpoint (`GEMINI_API_KEY`, `GOOGLE_GEMINI_BASE_URL`) come from the agent's
//! environment, as the study file sets it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::config::{mcp_config, NotUtf8};
use crate::spec::Arm;

/// The variable Gemini CLI (0.61.0) takes for the directory it puts `.gemini` in, in place of
/// the user's home.
pub const GEMINI_CLI_HOME: &str = "GEMINI_CLI_HOME";

/// The name of the trial's own home in its directory (`{home}`, the record's `names::HOME`).
pub const HOME_DIR: &str = crate::record::names::HOME;

/// The name of Gemini CLI's directory in a home.
pub const GEMINI_DIR: &str = ".gemini";

/// The name of its settings file there.
pub const SETTINGS_FILE: &str = "settings.json";

/// `{gemini_home}`: the home Gemini CLI is given, `TRIAL_DIR/home` (its `GEMINI_CLI_HOME`; it
/// keeps everything in `.gemini` there).
pub fn gemini_home(trial_dir: &Path) -> PathBuf {
    trial_dir.join(HOME_DIR)
}

/// The settings of `arm` for one trial.
pub fn settings(
    arm: &Arm,
    server: &Path,
    workspace: &Path,
    call_log: &Path,
) -> Result<Value, NotUtf8> {
    let mut settings = mcp_config(arm, server, workspace, call_log)?;
    if let Value::Object(map) = &mut settings {
        map.extend([
            (
                "security".to_string(),
                json!({"auth": {"selectedType": "gemini-api-key"}}),
            ),
            (
                "privacy".to_string(),
                json!({"usageStatisticsEnabled": false}),
            ),
            ("telemetry".to_string(), json!({"enabled": false})),
            (
                "general".to_string(),
                json!({"enableAutoUpdate": false, "enableAutoUpdateNotification": false}),
            ),
            ("ide".to_string(), json!({"enabled": false})),
        ]);
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arms_server_and_the_offline_switches() {
        let arm = Arm {
            name: "filesystem".into(),
            server_args: Some(vec![]),
            server_name: "filesystem".into(),
        };
        let v = settings(
            &arm,
            Path::new("/b/filesystem"),
            Path::new("/w"),
            Path::new("/c.jsonl"),
        )
        .unwrap();
        assert_eq!(
            v["mcpServers"]["filesystem"]["args"],
            json!(["--root", "/w", "--call-log", "/c.jsonl"])
        );
        assert_eq!(v["security"]["auth"]["selectedType"], "gemini-api-key");
        assert_eq!(v["privacy"]["usageStatisticsEnabled"], false);
        assert_eq!(v["telemetry"]["enabled"], false);
        assert_eq!(
            gemini_home(Path::new("/t/000-a-b")),
            Path::new("/t/000-a-b/home")
        );
        let builtin = Arm {
            server_args: None,
            ..arm
        };
        let v = settings(&builtin, Path::new("/b"), Path::new("/w"), Path::new("/c")).unwrap();
        assert_eq!(v["mcpServers"], json!({}));
    }
}
