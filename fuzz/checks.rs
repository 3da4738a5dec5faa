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
use filesystem_mcp::toolset::{Combined, Toolset};

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

/// The whole JSON-RPC loop answers or skips whatever arrives and returns at the end of input.
pub fn dispatch(data: &[u8]) {
    let toolset: Arc<dyn Toolset> = Arc::new(Combined::new(Vec::new()));
    let config = ServerConfig {
        max_message_bytes: 64 * 1024,
        page_size: 2,
    };
    let _ = serve(toolset, config, None, data, std::io::sink());
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
