#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.

//! The desktop bundle as a host runs it: `scripts/mcpb` builds it, this test unpacks it with the
//! official CLI, resolves the manifest's command line for a user's settings with the official
//! library's own substitution (`packaging/mcpb/resolve.mjs`), starts that command from `/` (where
//! desktop hosts start servers) on a directory of its choosing, and talks MCP to it.
//!
//! It needs the bundle, so it is ignored in a plain `cargo test`; `scripts/test` builds the bundle
//! and runs it: `FILESYSTEM_MCPB=target/mcpb/filesystem-<version>-linux-x64.mcpb cargo test
//! --test mcpb_bundle -- --ignored`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use test_support::mcp::{outcome, Session};

const NEEDS: &str = "needs the bundle scripts/mcpb builds (FILESYSTEM_MCPB=path cargo test --test mcpb_bundle -- --ignored)";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn node_tools() -> PathBuf {
    repo("packaging/mcpb")
}

/// The bundle named by `FILESYSTEM_MCPB`, unpacked by the official CLI into a fresh directory.
fn unpacked() -> (tempfile::TempDir, PathBuf) {
    let bundle = PathBuf::from(
        std::env::var_os("FILESYSTEM_MCPB").unwrap_or_else(|| panic!("this test {NEEDS}")),
    );
    let file_name = bundle
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert_eq!(
        file_name,
        format!("filesystem-{}-linux-x64.mcpb", env!("CARGO_PKG_VERSION")),
        "the bundle is named for this version"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("bundle");
    let status = Command::new(node_tools().join("node_modules/.bin/mcpb"))
        .arg("unpack")
        .arg(&bundle)
        .arg(&out)
        .status()
        .expect("run mcpb unpack (scripts/mcpb installs the CLI)");
    assert!(status.success(), "mcpb unpack {} failed", bundle.display());
    (dir, out)
}

/// The command line a host starts the unpacked bundle with for these settings.
fn resolve(bundle: &Path, settings: Value) -> (String, Vec<String>, Vec<(String, String)>) {
    let out = Command::new("node")
        .arg(node_tools().join("resolve.mjs"))
        .arg(bundle)
        .arg(settings.to_string())
        .output()
        .expect("run node resolve.mjs");
    assert!(
        out.status.success(),
        "resolve.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config: Value = serde_json::from_slice(&out.stdout).expect("resolve.mjs prints JSON");
    let command = config["command"].as_str().expect("command").to_string();
    let args = config["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().expect("string arg").to_string())
                .collect()
        })
        .unwrap_or_default();
    let env = config["env"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("string env").to_string()))
                .collect()
        })
        .unwrap_or_default();
    (command, args, env)
}

/// A server started as a host starts the bundle: its resolved command, from `/`, without the
/// variables that would choose a root for it.
fn start(bundle: &Path, settings: Value) -> Session {
    let (command, args, env) = resolve(bundle, settings);
    assert!(
        Path::new(&command).starts_with(bundle),
        "the command {command} lies inside the bundle"
    );
    let mut cmd = Command::new(&command);
    cmd.args(&args)
        .envs(env)
        .env_remove("FILESYSTEM_ROOT")
        .current_dir("/");
    Session::from_command(cmd)
}

fn tool_names(session: &mut Session) -> Vec<String> {
    let reply = session.request(2, "tools/list", json!({}));
    reply["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list answered {reply}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// The directory the user picks; its name has a space, which must reach the binary as one
/// argument through the host and the launcher.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("chosen workspace ")
        .tempdir()
        .expect("tempdir");
    std::fs::write(dir.path().join("chosen.txt"), "in the chosen directory\n").expect("write");
    dir
}

#[test]
#[ignore = "needs the bundle scripts/mcpb builds (FILESYSTEM_MCPB=path cargo test --test mcpb_bundle -- --ignored)"]
fn the_bundle_carries_the_manifest_and_a_static_binary() {
    let (_dir, bundle) = unpacked();
    let text = std::fs::read_to_string(bundle.join("manifest.json")).expect("manifest.json");
    let packed: Value = serde_json::from_str(&text).expect("manifest.json is JSON");
    let source: Value = serde_json::from_str(
        &std::fs::read_to_string(repo("packaging/mcpb/manifest.json")).expect("manifest"),
    )
    .expect("JSON");
    assert_eq!(
        packed, source,
        "the bundle carries packaging/mcpb/manifest.json"
    );

    let binary = bundle.join("server/filesystem");
    let out = Command::new("readelf")
        .arg("-d")
        .arg(&binary)
        .output()
        .expect("run readelf");
    assert!(out.status.success(), "readelf -d {}", binary.display());
    let dynamic = String::from_utf8_lossy(&out.stdout);
    assert!(
        !dynamic.contains("(NEEDED)"),
        "the bundled binary needs shared libraries:\n{dynamic}"
    );
    let version = Command::new(&binary)
        .arg("--version")
        .output()
        .expect("run the bundled binary");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("filesystem {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
#[ignore = "needs the bundle scripts/mcpb builds (FILESYSTEM_MCPB=path cargo test --test mcpb_bundle -- --ignored)"]
fn the_manifest_command_serves_the_chosen_directory() {
    let (_dir, bundle) = unpacked();
    let chosen = workspace();
    let mut session = start(&bundle, json!({"workspace": chosen.path()}));
    let reply = session.initialize("2025-06-18");
    assert_eq!(
        reply["result"]["serverInfo"]["version"],
        env!("CARGO_PKG_VERSION"),
        "initialize answered: {reply}"
    );
    let tools = tool_names(&mut session);
    assert!(tools.iter().any(|t| t == "read_text_file"), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t == "undo_file" || t == "shelpa_pipe"),
        "the defaults (no history, file tools) were not what served: {tools:?}"
    );
    let (is_error, text) =
        outcome(&session.call(3, "read_text_file", json!({"path": "chosen.txt"})));
    assert!(!is_error, "{text}");
    assert_eq!(text, "in the chosen directory\n");
    assert!(session.close_and_wait().success());
}

#[test]
#[ignore = "needs the bundle scripts/mcpb builds (FILESYSTEM_MCPB=path cargo test --test mcpb_bundle -- --ignored)"]
fn the_bundle_settings_turn_on_history_and_the_pipe_mode() {
    let (_dir, bundle) = unpacked();
    let chosen = workspace();

    let mut session = start(&bundle, json!({"workspace": chosen.path(), "backup": true}));
    session.initialize("2025-06-18");
    let tools = tool_names(&mut session);
    assert!(
        tools.iter().any(|t| t == "undo_file") && tools.iter().any(|t| t == "redo_file"),
        "version history on, yet: {tools:?}"
    );
    assert!(session.close_and_wait().success());

    let mut session = start(
        &bundle,
        json!({"workspace": chosen.path(), "legacy_pipe": true}),
    );
    session.initialize("2025-06-18");
    let tools = tool_names(&mut session);
    assert!(
        tools.iter().any(|t| t == "shelpa_pipe") && !tools.iter().any(|t| t == "read_text_file"),
        "the legacy pipe mode on, yet: {tools:?}"
    );
    let result = session.call(3, "shelpa_pipe", json!({"command": "head -n 1 chosen.txt"}));
    let (is_error, text) = outcome(&result);
    assert!(
        !is_error && text.contains("in the chosen directory"),
        "{text}"
    );
    assert!(session.close_and_wait().success());
}

#[test]
#[ignore = "needs the bundle scripts/mcpb builds (FILESYSTEM_MCPB=path cargo test --test mcpb_bundle -- --ignored)"]
fn a_setting_that_is_not_a_boolean_stops_the_launcher() {
    let (_dir, bundle) = unpacked();
    let chosen = workspace();
    let out = Command::new(bundle.join("server/launch"))
        .arg(chosen.path())
        .arg("yes")
        .arg("false")
        .output()
        .expect("run the launcher");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("backup must be true or false, not 'yes'"),
        "{out:?}"
    );
}
