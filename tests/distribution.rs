#![allow(clippy::disallowed_methods)] // Integration tests build and inspect fixtures by name, as a user would.

//! The files that describe the server to the places users install it from say what this build
//! is: `server.json` (the MCP Registry entry) and the bundle's `manifest.json` name the version in
//! Cargo.toml and this package, and offer only the flags `filesystem --help` knows and the
//! environment variables it names; README carries the registry's ownership line; every path
//! dependency carries the version `cargo publish` needs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use test_support::bin;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn json_file(rel: &str) -> Value {
    let text = std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"))
}

fn server_json() -> Value {
    json_file("server.json")
}

/// What `--help` says of one long option: whether it takes a value, the values clap lists for
/// it, and its default.
#[derive(Debug, Default)]
struct HelpFlag {
    takes_value: bool,
    choices: Vec<String>,
    default: Option<String>,
}

/// The long help of the binary, and its options parsed from it: a line that starts (after
/// indentation) with `--name` or `-x, --name` begins an option, `<VALUE>` after it means it takes
/// one, and the lines until the next option hold its `- value:` choices and `[default: …]`.
fn help() -> (String, BTreeMap<String, HelpFlag>) {
    let out = bin::command()
        .arg("--help")
        .output()
        .expect("run filesystem --help");
    assert!(out.status.success(), "filesystem --help failed: {out:?}");
    let text = String::from_utf8(out.stdout).expect("help is UTF-8");
    let mut flags: BTreeMap<String, HelpFlag> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let option = trimmed
            .strip_prefix("-h, ")
            .or_else(|| trimmed.strip_prefix("-V, "))
            .unwrap_or(trimmed);
        if line.starts_with("  ") && option.starts_with("--") {
            let mut words = option.split_whitespace();
            let name = words.next().unwrap_or_default().to_string();
            let takes_value = words.next().is_some_and(|w| w.starts_with('<'));
            flags.insert(
                name.clone(),
                HelpFlag {
                    takes_value,
                    ..HelpFlag::default()
                },
            );
            current = Some(name);
            continue;
        }
        let Some(flag) = current.as_ref().and_then(|n| flags.get_mut(n)) else {
            continue;
        };
        if let Some(choice) = trimmed.strip_prefix("- ") {
            if let Some((value, _)) = choice.split_once(':') {
                flag.choices.push(value.trim().to_string());
            }
        }
        if let Some(rest) = trimmed.strip_prefix("[default: ") {
            flag.default = rest.strip_suffix(']').map(str::to_string);
        }
    }
    assert!(
        flags.contains_key("--root") && flags.contains_key("--backup"),
        "the help parser found no options in: {text}"
    );
    (text, flags)
}

#[test]
fn server_json_names_this_version_package_and_repository() {
    let server = server_json();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(server["version"], version, "server.json's version");
    assert_eq!(
        server["$schema"],
        "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "server.json follows the registry's current released schema"
    );
    assert_eq!(server["repository"]["url"], env!("CARGO_PKG_REPOSITORY"));
    assert_eq!(server["repository"]["source"], "github");

    // The registry's rules for the name: reverse DNS, one slash; a GitHub login proves only the
    // namespace io.github.<owner>, so the owner is the repository's.
    let name = server["name"].as_str().expect("name is a string");
    let (namespace, short) = name.split_once('/').expect("name has one slash");
    assert!(
        !short.contains('/')
            && namespace
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            && short
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c)),
        "{name} is not of the registry's form"
    );
    let owner = env!("CARGO_PKG_REPOSITORY")
        .strip_prefix("https://github.com/")
        .and_then(|rest| rest.split('/').next())
        .expect("a GitHub repository");
    assert_eq!(namespace, format!("io.github.{owner}"));

    let description = server["description"].as_str().expect("description");
    let chars = description.chars().count();
    assert!(
        (1..=100).contains(&chars),
        "the registry takes 1 to 100 characters of description, this is {chars}"
    );

    let packages = server["packages"].as_array().expect("packages");
    assert_eq!(packages.len(), 1, "one package: the crate");
    let package = &packages[0];
    assert_eq!(package["registryType"], "cargo");
    assert_eq!(package["registryBaseUrl"], "https://crates.io");
    assert_eq!(package["identifier"], env!("CARGO_PKG_NAME"));
    assert_eq!(package["version"], version, "the package's version");
    assert_eq!(package["transport"]["type"], "stdio");
}

#[test]
fn server_json_offers_only_what_help_knows() {
    let (text, flags) = help();
    let package = &server_json()["packages"][0];

    let arguments = package["packageArguments"]
        .as_array()
        .expect("packageArguments");
    for argument in ["--root", "--backup", "--legacy-pipe"] {
        assert!(
            arguments.iter().any(|a| a["name"] == argument),
            "server.json offers {argument}"
        );
    }
    for argument in arguments {
        assert_eq!(argument["type"], "named", "{argument}");
        let name = argument["name"].as_str().expect("a named argument's name");
        let flag = flags
            .get(name)
            .unwrap_or_else(|| panic!("server.json offers {name}, which --help does not know"));
        // In server.json a switch is an entry with nothing to fill in; a flag with a value has
        // a format, a default or choices.
        let has_value = ["format", "default", "choices"]
            .iter()
            .any(|k| argument.get(k).is_some());
        assert_eq!(
            has_value, flag.takes_value,
            "{name}: server.json and --help disagree on whether it takes a value"
        );
        if let Some(choices) = argument["choices"].as_array() {
            let choices: Vec<&str> = choices.iter().filter_map(Value::as_str).collect();
            assert_eq!(choices, flag.choices, "{name}: the values --help lists");
        }
        if let (Some(default), Some(help_default)) =
            (argument["default"].as_str(), flag.default.as_deref())
        {
            assert_eq!(default, help_default, "{name}: the default --help shows");
        }
    }

    let variables = package["environmentVariables"]
        .as_array()
        .expect("environmentVariables");
    assert!(variables.iter().any(|v| v["name"] == "FILESYSTEM_ROOT"));
    for variable in variables {
        let name = variable["name"].as_str().expect("a variable's name");
        assert!(
            text.contains(&format!("${name}")) || text.contains(&format!("{name}=")),
            "server.json offers ${name}, which --help does not name"
        );
    }
}

#[test]
fn readme_shows_the_registry_name_as_visible_text() {
    let name = server_json()["name"].as_str().expect("name").to_string();
    let readme = std::fs::read_to_string(repo("README.md")).expect("README.md");
    // crates.io drops HTML comments when it renders a README, so the registry only sees the
    // line when it is ordinary text, outside a comment.
    let visible: String = readme
        .split("<!--")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part
            } else {
                part.split_once("-->").map_or("", |(_, after)| after)
            }
        })
        .collect();
    let line = format!("mcp-name: {name}");
    assert!(
        visible.lines().any(|l| l.trim().trim_matches('`') == line),
        "README.md has no visible line `{line}`"
    );
}

#[test]
fn bundle_manifest_names_this_version_and_asks_for_the_workspace() {
    let manifest = json_file("packaging/mcpb/manifest.json");
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["server"]["type"], "binary");
    assert_eq!(manifest["repository"]["url"], env!("CARGO_PKG_REPOSITORY"));
    let config = &manifest["user_config"];
    assert_eq!(config["workspace"]["type"], "directory");
    assert_eq!(config["workspace"]["required"], true);
    assert_eq!(config["backup"]["type"], "boolean");
    assert_eq!(config["legacy_pipe"]["type"], "boolean");
    // Each setting reaches the command line, in the order the launcher reads them.
    assert_eq!(
        manifest["server"]["mcp_config"]["args"],
        serde_json::json!([
            "${user_config.workspace}",
            "${user_config.backup}",
            "${user_config.legacy_pipe}"
        ])
    );
}

#[test]
fn every_path_dependency_carries_the_workspace_version() {
    let text = std::fs::read_to_string(repo("Cargo.toml")).expect("Cargo.toml");
    let manifest: toml::Table = toml::from_str(&text).expect("Cargo.toml is TOML");
    let version = manifest["workspace"]["package"]["version"]
        .as_str()
        .expect("workspace version");
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    let dependencies = manifest["workspace"]["dependencies"]
        .as_table()
        .expect("workspace dependencies");
    let mut ours = 0;
    for (key, dependency) in dependencies {
        let Some(path) = dependency.get("path").and_then(|p| p.as_str()) else {
            continue;
        };
        let member_text = std::fs::read_to_string(repo(path).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{path}/Cargo.toml: {e}"));
        let member: toml::Table = toml::from_str(&member_text).expect("member manifest");
        let package = &member["package"];
        if package.get("publish").and_then(|p| p.as_bool()) == Some(false) {
            continue;
        }
        ours += 1;
        let name = package["name"].as_str().expect("package name");
        assert!(
            name.starts_with("filesystem-mcp-"),
            "{key}: published as {name}, outside the project's filesystem-mcp- names"
        );
        assert_eq!(
            dependency.get("package").and_then(|p| p.as_str()),
            Some(name),
            "{key}: the dependency names the package {name}"
        );
        assert_eq!(
            dependency.get("version").and_then(|v| v.as_str()),
            Some(version),
            "{key}: cargo publish needs the version on the path dependency"
        );
    }
    assert!(ours >= 6, "found only {ours} of our published crates");
}
