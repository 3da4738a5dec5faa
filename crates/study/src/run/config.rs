//! The MCP configuration each trial's agent is given (`mcp.json`), in the `mcpServers` shape
//! Claude Code (`--mcp-config`), Claude Desktop and most clients read.

use std::path::Path;

use serde_json::{json, Map, Value};

use crate::spec::Arm;

/// A path the configuration must hold is not UTF-8, which JSON cannot carry faithfully.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not UTF-8, which the MCP configuration (JSON, or Codex CLI's TOML) cannot hold; use an --out path (and a build directory) with UTF-8 names")]
pub struct NotUtf8(pub String);

fn utf8(path: &Path) -> Result<&str, NotUtf8> {
    path.to_str()
        .ok_or_else(|| NotUtf8(path.display().to_string()))
}

/// How the server of an arm is started in one trial, whatever file of which harness says it.
pub struct ServerCommand<'a> {
    /// The `filesystem` binary.
    pub command: &'a str,
    /// The arm's arguments, then `--root` and `--call-log` of the trial.
    pub args: Vec<&'a str>,
}

/// The command of `arm`'s server for one trial (`None` for an arm without a server): this
/// binary, started with the arm's arguments, serving the trial's own workspace and logging to
/// the trial's own call log.
pub fn server_command<'a>(
    arm: &'a Arm,
    server: &'a Path,
    workspace: &'a Path,
    call_log: &'a Path,
) -> Result<Option<ServerCommand<'a>>, NotUtf8> {
    let Some(args) = &arm.server_args else {
        return Ok(None);
    };
    let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
    argv.extend(["--root", utf8(workspace)?, "--call-log", utf8(call_log)?]);
    Ok(Some(ServerCommand {
        command: utf8(server)?,
        args: argv,
    }))
}

/// The configuration of `arm` for one trial ([`server_command`]). An arm without a server gets
/// an empty `mcpServers`, so the agent is started the same way in every arm.
pub fn mcp_config(
    arm: &Arm,
    server: &Path,
    workspace: &Path,
    call_log: &Path,
) -> Result<Value, NotUtf8> {
    let mut servers = Map::new();
    if let Some(cmd) = server_command(arm, server, workspace, call_log)? {
        servers.insert(
            arm.server_name.clone(),
            json!({"command": cmd.command, "args": cmd.args, "env": {}}),
        );
    }
    Ok(json!({ "mcpServers": servers }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_arm_and_builtin_arm() {
        let arm = Arm {
            name: "pipe".into(),
            server_args: Some(vec!["--legacy-pipe".into()]),
            server_name: "fs".into(),
        };
        let v = mcp_config(
            &arm,
            Path::new("/b/filesystem"),
            Path::new("/w"),
            Path::new("/c.jsonl"),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"mcpServers": {"fs": {"command": "/b/filesystem",
                "args": ["--legacy-pipe", "--root", "/w", "--call-log", "/c.jsonl"], "env": {}}}})
        );
        let none = Arm {
            server_args: None,
            ..arm
        };
        let v = mcp_config(
            &none,
            Path::new("/b/filesystem"),
            Path::new("/w"),
            Path::new("/c"),
        )
        .unwrap();
        assert_eq!(v, json!({"mcpServers": {}}));
    }
}
