//! Real agent harnesses (Claude Code, Codex CLI, Gemini CLI) as the harness tests run them: where
//! `scripts/test` installed them, a home of their own for each run, and one run under a deadline.
//!
//! The harnesses come from npm, pinned in `tests/harness/package.json`, and `scripts/test`
//! installs them into `tests/harness/node_modules` (or `FILESYSTEM_HARNESS_DIR` names another
//! `node_modules`) as it installs the MCP SDKs for the interop tests. A test that cannot find
//! one fails and says to run `scripts/test`: a harness test that passed without its harness
//! would pass without testing anything.
//!
//! Every run is offline and private: its own `HOME` (so Claude Code's `~/.claude` and its
//! transcripts, `CODEX_HOME` and Gemini CLI's `~/.gemini`, are the test's), an environment cleared of everything but what
//! is set here, every optional network call the harnesses document switched off, and the model
//! at a scripted endpoint on 127.0.0.1.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one harness run may take before the test kills it and fails: generous, because
/// the machine may be busy; a run that finishes is never waited for longer than it takes.
pub const RUN_DEADLINE: Duration = Duration::from_secs(600);

/// The harness a test drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    /// Claude Code (`@anthropic-ai/claude-code`).
    ClaudeCode,
    /// Codex CLI (`@openai/codex`).
    Codex,
    /// Gemini CLI (`@google/gemini-cli`).
    Gemini,
}

impl Harness {
    fn bin_name(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "claude",
            Harness::Codex => "codex",
            Harness::Gemini => "gemini",
        }
    }

    /// The installed executable; fails the test, saying what to run, when it is missing.
    pub fn executable(self) -> PathBuf {
        let node_modules = std::env::var_os("FILESYSTEM_HARNESS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/harness/node_modules")
            });
        let bin = node_modules.join(".bin").join(self.bin_name());
        assert!(
            bin.exists(),
            "{} is not installed at {}: run scripts/test, which installs the pinned harnesses \
             from tests/harness/package.json (or `npm install` in tests/harness), or set \
             FILESYSTEM_HARNESS_DIR to a node_modules that holds them",
            self.bin_name(),
            bin.display()
        );
        bin
    }
}

/// One harness run's private directories: its home and, inside it, what the harness keeps.
pub struct Home {
    _dir: tempfile::TempDir,
    /// The run's `HOME`.
    pub path: PathBuf,
}

impl Home {
    /// A fresh, empty home.
    pub fn new() -> Home {
        let (dir, path) = crate::temp::canonical_temp_dir();
        Home { _dir: dir, path }
    }

    /// Claude Code's transcripts: `~/.claude/projects`.
    pub fn claude_projects(&self) -> PathBuf {
        self.path.join(".claude/projects")
    }

    /// Codex's `CODEX_HOME`.
    pub fn codex_home(&self) -> PathBuf {
        self.path.join(".codex")
    }

    /// Gemini CLI's user directory, `~/.gemini`: its `settings.json`, and its chat records under
    /// `tmp/<project>/chats/`.
    pub fn gemini_dir(&self) -> PathBuf {
        self.path.join(".gemini")
    }
}

impl Default for Home {
    fn default() -> Home {
        Home::new()
    }
}

/// What a finished run printed.
#[derive(Debug)]
pub struct Finished {
    /// It exited 0.
    pub ok: bool,
    /// Its stdout (Claude Code's stream-json, Codex's `--json` events).
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// The `mcpServers` entry both harnesses' configurations are made from: this binary, its
/// arguments.
pub struct Server<'a> {
    /// The name the harness knows it by (`mcp__<name>__…`).
    pub name: &'a str,
    /// The arguments after the binary (`--root`, `--call-log`, …).
    pub args: Vec<String>,
}

/// Runs Claude Code once in print mode on `workspace`, the model at `base_url`, with `server`
/// as its only MCP server and its tools allowed without asking (it refuses
/// `--dangerously-skip-permissions` as root, so the permission is given per tool).
pub fn run_claude(
    home: &Home,
    workspace: &Path,
    base_url: &str,
    server: &Server,
    prompt: &str,
) -> Finished {
    let config = serde_json::json!({"mcpServers": {server.name: {
        "command": crate::bin::filesystem(), "args": server.args}}});
    let config_path = home.path.join("mcp.json");
    std::fs::write(&config_path, config.to_string()).expect("write mcp.json");
    let mut cmd = Command::new(Harness::ClaudeCode.executable());
    cmd.args(["-p", prompt, "--mcp-config"])
        .arg(&config_path)
        .args([
            "--strict-mcp-config",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "default",
            "--allowedTools",
        ])
        .arg(format!("mcp__{}__*", server.name))
        .env_clear()
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "scripted-model-key")
        // Each switch turns off a call to the vendor the tests cannot make offline.
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_BUG_COMMAND", "1");
    finish(cmd, home, workspace)
}

/// Runs `codex exec` once on `workspace` with `model` served by `base_url` (a
/// `model_providers` entry of a `config.toml` in the run's `CODEX_HOME`) and `server` as its only
/// MCP server.
pub fn run_codex(
    home: &Home,
    workspace: &Path,
    base_url: &str,
    model: &str,
    server: &Server,
    prompt: &str,
) -> Finished {
    let codex_home = home.codex_home();
    std::fs::create_dir_all(&codex_home).expect("mkdir CODEX_HOME");
    let toml_str = |s: &str| serde_json::Value::from(s).to_string();
    let args: Vec<String> = server.args.iter().map(|a| toml_str(a)).collect();
    let config = format!(
        "model = {model}\nmodel_provider = \"scripted\"\ncheck_for_update_on_startup = false\n\n\
         [analytics]\nenabled = false\n\n\
         [model_providers.scripted]\nname = \"scripted model\"\nbase_url = {base_url}\n\
         wire_api = \"responses\"\n\n\
         [mcp_servers.{name}]\ncommand = {command}\nargs = [{args}]\n",
        model = toml_str(model),
        base_url = toml_str(base_url),
        name = server.name,
        command = toml_str(&crate::bin::filesystem().display().to_string()),
        args = args.join(", "),
    );
    std::fs::write(codex_home.join("config.toml"), config).expect("write config.toml");
    let mut cmd = Command::new(Harness::Codex.executable());
    cmd.args(["exec", "--json", "--skip-git-repo-check", prompt])
        .env_clear()
        .env("CODEX_HOME", &codex_home);
    finish(cmd, home, workspace)
}

/// The user settings Gemini CLI reads from `~/.gemini/settings.json`: `server` as its only MCP
/// server, the API-key auth chosen (so no sign-in dialog; the key and `GOOGLE_GEMINI_BASE_URL`
/// come from the environment), and usage statistics, telemetry, update checks and the IDE
/// companion switched off.
pub fn gemini_settings(command: &Path, server: &Server) -> serde_json::Value {
    serde_json::json!({
        "mcpServers": {server.name: {"command": command, "args": server.args}},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "ide": {"enabled": false},
    })
}

/// Runs Gemini CLI once in headless mode (`-p`) on `workspace` with `model` served by
/// `base_url` (`GOOGLE_GEMINI_BASE_URL`) and `server` as its only MCP server, printing
/// `stream-json`. `--approval-mode yolo` because headless Gemini CLI offers the model neither
/// MCP tools nor its own writing tools under the default approval mode (it cannot ask);
/// `GEMINI_CLI_TRUST_WORKSPACE` because it refuses to run headless in a folder not trusted.
pub fn run_gemini(
    home: &Home,
    workspace: &Path,
    base_url: &str,
    model: &str,
    server: &Server,
    prompt: &str,
) -> Finished {
    let dir = home.gemini_dir();
    std::fs::create_dir_all(&dir).expect("mkdir ~/.gemini");
    let settings = gemini_settings(crate::bin::filesystem(), server);
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("write settings.json");
    let mut cmd = Command::new(Harness::Gemini.executable());
    cmd.args(["-p", prompt, "-m", model])
        .args(["--approval-mode", "yolo", "--output-format", "stream-json"])
        .env_clear()
        .env("GOOGLE_GEMINI_BASE_URL", base_url)
        .env("GEMINI_API_KEY", "scripted-model-key")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    finish(cmd, home, workspace)
}

/// Gemini CLI's chat records under `dir` (a `~/.gemini`): every `tmp/<project>/chats/*.jsonl`,
/// sorted.
pub fn gemini_chats(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for project in std::fs::read_dir(dir.join("tmp"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let chats = project.path().join("chats");
        for entry in std::fs::read_dir(chats).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// What Gemini CLI passed back of an MCP result: the text without the
/// `<untrusted_context>\n…\n</untrusted_context>` it wraps every MCP tool's output in.
pub fn gemini_tool_text(parts: &[String]) -> String {
    let joined = parts.join("\n");
    joined
        .strip_prefix("<untrusted_context>\n")
        .and_then(|rest| rest.strip_suffix("\n</untrusted_context>"))
        .map_or(joined.clone(), String::from)
}

/// Starts the prepared command in `workspace` with the run's home and a `PATH` for the tools a
/// harness starts (its MCP server is named by absolute path), waits for it within
/// [`RUN_DEADLINE`] (killing it and failing the test past that), and collects what it printed.
fn finish(mut cmd: Command, home: &Home, workspace: &Path) -> Finished {
    let tmp = home.path.join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir tmp");
    cmd.current_dir(workspace)
        .env("HOME", &home.path)
        .env("TMPDIR", &tmp)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start the harness");
    // Drain both pipes on their own threads so a harness that prints much never blocks on them.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the harness") {
            break status;
        }
        if started.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the harness ran past {RUN_DEADLINE:?}; stderr so far: {}",
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Finished {
        ok: status.success(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// The last line of a cut answer: `[… continue with offset=N]` or `[… continue with
/// cursor="…"]`.
const NOTE_START: &str = "\n[";

/// A page's content and the continuation note it ends with, if any: the content keeps its own
/// final line feed, the note is the last line when it starts with `[` and says how to continue.
pub fn split_page_note(text: &str) -> (&str, Option<&str>) {
    match text.rfind(NOTE_START) {
        Some(at) if text[at..].contains("continue with ") && !text[at + 1..].contains('\n') => {
            (&text[..at + 1], Some(&text[at + 1..]))
        }
        _ => (text, None),
    }
}

/// What Codex passed back of an MCP result, without what it puts in front of every tool's output
/// (`Wall time: … seconds` and `Output:` lines, a text block of their own or the start of the
/// first one).
pub fn codex_tool_text(parts: &[String]) -> String {
    let joined = parts.join("\n");
    if !joined.starts_with("Wall time:") {
        return joined;
    }
    match joined.find("Output:") {
        Some(at) => {
            let rest = &joined[at + "Output:".len()..];
            rest.strip_prefix('\n').unwrap_or(rest).to_string()
        }
        None => joined,
    }
}

/// The match lines of one `search_content` page as the model got it, and whether it says to
/// continue: the text's lines without its note, or, where the harness showed the model the
/// structured content in place of the text, its `matches` as `path:line:text` and its
/// `next_cursor`.
pub fn search_page(text: &str) -> (Vec<String>, bool) {
    if let Ok(serde_json::Value::Object(page)) = serde_json::from_str(text.trim()) {
        let lines = page
            .get("matches")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| {
                format!(
                    "{}:{}:{}",
                    m["path"].as_str().unwrap_or(""),
                    m["line"],
                    m["text"].as_str().unwrap_or("")
                )
            })
            .collect();
        let more = page
            .get("next_cursor")
            .is_some_and(serde_json::Value::is_string);
        return (lines, more);
    }
    let (body, note) = split_page_note(text);
    (body.lines().map(String::from).collect(), note.is_some())
}

/// The answer `filesystem call` gives with no budget in the way: what the pages of a paged
/// answer must add up to.
pub fn unlimited_answer(
    root: &Path,
    tool: &str,
    args: &serde_json::Value,
    flags: &[&str],
) -> String {
    let mut all = vec!["--max-result-bytes", "1000000000", "--no-call-log"];
    all.extend_from_slice(flags);
    crate::cli::call(root, tool, &args.to_string(), &all).expect_ok()
}

/// Every path of a `directory_tree` answer (a JSON array of `{name, type, children}`), depth
/// first, leaving out the directories a later page repeats to say where it continues
/// (`"continued": true`): the pages' paths put together are the whole tree's.
pub fn tree_paths(json: &str) -> Vec<String> {
    let tree: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap_or_else(|e| {
        panic!("a directory_tree page the model got is not a JSON tree ({e}): {json:.300}")
    });
    let mut out = Vec::new();
    let mut stack: Vec<(String, &serde_json::Value)> = Vec::new();
    push_children(&mut stack, "", &tree);
    while let Some((path, node)) = stack.pop() {
        if node.get("continued").and_then(serde_json::Value::as_bool) != Some(true) {
            out.push(path.clone());
        }
        if let Some(children) = node.get("children") {
            push_children(&mut stack, &path, children);
        }
    }
    out
}

/// Pushes a tree level's nodes so that the first is popped first.
fn push_children<'a>(
    stack: &mut Vec<(String, &'a serde_json::Value)>,
    prefix: &str,
    nodes: &'a serde_json::Value,
) {
    for node in nodes.as_array().into_iter().flatten().rev() {
        let name = node["name"].as_str().unwrap_or("?");
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        };
        stack.push((path, node));
    }
}

/// The pages' contents put together (each page's text without its continuation note), checking
/// that every page but the last has a note and the last has none. `texts` are the texts the
/// model got, in order (each harness wraps a result its own way).
pub fn joined_pages(texts: &[String]) -> String {
    let mut joined = String::new();
    for (i, text) in texts.iter().enumerate() {
        let (body, note) = split_page_note(text);
        assert_eq!(
            note.is_some(),
            i + 1 < texts.len(),
            "page {i} of {}: the text the model got {} continuation note: {text:.300}",
            texts.len(),
            if note.is_some() {
                "ends with a"
            } else {
                "has no"
            }
        );
        joined.push_str(body);
    }
    joined
}

/// Asserts that the pages a model was given of one answer (their texts, each asked for with its
/// input) add up to `whole`, and that the server's call log at `log` holds exactly those calls of
/// `tool`, with those inputs, in order: the paging went through the harness untouched.
pub fn assert_pages_make(
    whole: &str,
    texts: &[String],
    inputs: &[&serde_json::Value],
    log: &Path,
    tool: &str,
) {
    assert!(
        joined_pages(texts) == whole,
        "the pages do not add up to the file"
    );
    let logged = logged_calls(log);
    assert_eq!(logged.len(), inputs.len());
    for (call, input) in logged.iter().zip(inputs) {
        assert_eq!(call.0, tool);
        assert_eq!(&call.1, *input);
    }
}

/// The calls of the server's call log at `log`, as (tool, args).
pub fn logged_calls(log: &Path) -> Vec<(String, serde_json::Value)> {
    crate::logs::json_lines(log)
        .into_iter()
        .map(|l| {
            (
                l["tool"].as_str().unwrap_or("").to_string(),
                l["args"].clone(),
            )
        })
        .collect()
}

/// 3,000 files in 60 directories under `tree/`; every other one holds a line that `needle`
/// finds: larger than one answer both as a tree and as a search.
pub fn large_tree(ws: &crate::temp::TempRoot) {
    for i in 0..3000 {
        let word = if i % 2 == 0 { "needle" } else { "hay" };
        ws.write(
            &format!("tree/dir{:02}/file_{i:05}.txt", i % 60),
            format!("{word} {i:05} {}\n", "payload ".repeat(12)),
        );
    }
}

/// This binary as the harness's MCP server `filesystem` on `root`, its call log (with
/// arguments) at `call_log`, and `flags` after those.
pub fn logging_server<'a>(root: &Path, call_log: &Path, flags: &[&str]) -> Server<'a> {
    let mut args = vec![
        "--root".to_string(),
        root.display().to_string(),
        "--call-log".into(),
        call_log.display().to_string(),
        "--call-log-args".into(),
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    Server {
        name: "filesystem",
        args,
    }
}
