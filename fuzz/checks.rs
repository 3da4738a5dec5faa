//! The properties each fuzz target checks, shared with `tests/fuzz_regressions.rs`, which replays
//! every saved crash input through the same code in the normal test suite.
#![allow(dead_code)]

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use filesystem_mcp::guard::PathGuard;
use filesystem_mcp::legacy::plan::{CommandName, Plan, Step};
use filesystem_mcp::legacy::policy::{check, PolicyContext, ToolPaths};
use filesystem_mcp::mcp::server::{serve, ServerConfig};
use filesystem_mcp::mcp::wire::{Frame, FrameReader};
use filesystem_mcp::toolset::{CallContext, Effects, ToolDef, ToolOutput, Toolset};

/// The frame reader never panics, never returns more than its limit, and always reaches the end.
pub fn framing(data: &[u8]) {
    let limit = 4096;
    let mut reader = FrameReader::new(data, limit);
    // Each frame consumes at least one byte, so this many reads always reach the end.
    for _ in 0..=data.len() {
        match reader.read_frame() {
            Ok(Some(Frame::Message(bytes))) => assert!(bytes.len() <= limit),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
    panic!("reader did not reach the end of its input");
}

/// The whole JSON-RPC loop answers or skips whatever arrives, returns at the end of input, and
/// everything it writes in line framing is JSON — including tool results carrying whatever text
/// the input smuggled into a call (the hand-written reply path).
pub fn dispatch(data: &[u8]) {
    let toolset: Arc<dyn Toolset> = Arc::new(Echo);
    let config = ServerConfig {
        max_message_bytes: 64 * 1024,
        page_size: 2,
    };
    let out = SharedOut::default();
    let _ = serve(toolset, config, None, data, out.clone());
    let written = out.0.lock().map(|b| b.clone()).unwrap_or_default();
    if written.starts_with(b"Content-Length") {
        return; // header framing: each body is checked by the same code, framed differently
    }
    for line in written.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(line) {
            panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(line));
        }
    }
}

/// One tool, `echo`, whose text is the `text` argument as given (or the arguments as JSON), and
/// whose structured content is the arguments: client-chosen strings, escaped on the way out.
struct Echo;

impl Toolset for Echo {
    fn mode(&self) -> String {
        "echo".into()
    }
    fn instructions(&self) -> String {
        String::new()
    }
    fn tools(&self) -> Vec<ToolDef> {
        vec![ToolDef {
            name: "echo".into(),
            title: "Echo".into(),
            description: "Returns its arguments.".into(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            effects: Effects::READ_ONLY,
        }]
    }
    fn call(
        &self,
        _name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
        _ctx: &CallContext,
    ) -> ToolOutput {
        let text = match args.get("text") {
            Some(serde_json::Value::String(t)) => t.clone(),
            _ => serde_json::Value::Object(args.clone()).to_string(),
        };
        ToolOutput {
            text,
            structured: Some(serde_json::Value::Object(args.clone())),
            is_error: args.contains_key("fail"),
            ..ToolOutput::default()
        }
    }
}

/// An output the fuzz target can read back after the server (which owns its writer) is done.
#[derive(Clone, Default)]
struct SharedOut(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut out) => out.extend_from_slice(buf),
            Err(_) => return Err(std::io::Error::other("poisoned")),
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    guard: PathGuard,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
        std::fs::create_dir_all(base.join("outside")).expect("mkdir");
        symlink(base.join("outside"), root.join("out")).expect("link");
        symlink("../../..", root.join("a/b/up")).expect("link");
        symlink("b", root.join("a/in")).expect("link");
        symlink("/", root.join("slash")).expect("link");
        let guard = PathGuard::new(&root).expect("guard");
        Tree {
            _tmp: tmp,
            root,
            guard,
        }
    })
}

/// A path the guard accepts is always inside the root, in a tree with escaping symlinks.
pub fn guard(data: &[u8]) {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let t = tree();
    for resolved in [t.guard.resolve(input), t.guard.resolve_no_follow(input)]
        .into_iter()
        .flatten()
    {
        assert!(
            resolved.path.starts_with(&t.root),
            "{input:?} -> {:?}",
            resolved.path
        );
    }
}

/// A pipeline string the lexer and policy accept becomes a plan whose programs are absolute,
/// whose directories and tee targets are inside the root (never in `.shelpa/`), and whose every
/// absolute-path operand is inside the root. Operands are what follows the `--` the policy always
/// inserts; option values before it (`tail -n /t`) are not paths and the tool itself rejects them.
/// For rg, fd, awk and sed the first operand may be a pattern or program rather than a path, so it
/// is left out; tr's and jq's operands are not paths at all (sets, `--args` strings). Leaving data
/// out only weakens the check, never makes it wrong.
pub fn pipeline(data: &[u8]) {
    static TOOLS: OnceLock<ToolPaths> = OnceLock::new();
    let Ok(command) = std::str::from_utf8(data) else {
        return;
    };
    let t = tree();
    let tools = TOOLS.get_or_init(ToolPaths::discover);
    let Ok(stages) = filesystem_mcp::legacy::parse::parse(command) else {
        return;
    };
    let cx = PolicyContext {
        guard: &t.guard,
        cwd: &t.root,
        tools,
    };
    let Ok(Plan::Pipeline(steps)) = check(&stages, &cx) else {
        return;
    };
    for step in steps {
        match step {
            Step::Run {
                argv,
                cwd,
                command: name,
            } => {
                assert!(PathBuf::from(&argv[0]).is_absolute(), "{command:?}");
                assert!(cwd.starts_with(&t.root), "{command:?}");
                let skip = match name {
                    CommandName::Tr | CommandName::Jq => usize::MAX,
                    CommandName::Rg | CommandName::Fd | CommandName::Awk | CommandName::Sed => 2,
                    _ => 1,
                };
                let operands = argv.iter().skip_while(|a| a.as_os_str() != "--").skip(skip);
                for arg in operands {
                    let p = PathBuf::from(arg);
                    if p.is_absolute() {
                        assert!(p.starts_with(&t.root), "{command:?} passes {p:?}");
                    }
                }
            }
            Step::Tee { targets, .. } => {
                for target in targets {
                    assert!(target.starts_with(&t.root), "{command:?}");
                    assert!(!target.starts_with(t.root.join(".shelpa")), "{command:?}");
                }
            }
        }
    }
}
