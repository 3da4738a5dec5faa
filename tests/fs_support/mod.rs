//! Shared helpers for the filesystem-mode integration tests: a temporary workspace and a way to
//! run one tool call through the real binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A temporary workspace root (canonical) beside an `outside/` directory the tools must never
/// reach.
pub struct Ws {
    _tmp: tempfile::TempDir,
    /// The workspace root.
    pub root: PathBuf,
    /// A sibling directory outside the root.
    pub outside: PathBuf,
}

/// What one `filesystem call` printed.
#[derive(Debug)]
pub struct Outcome {
    /// The tool succeeded (exit 0).
    pub ok: bool,
    /// The result text (stdout on success, stderr on failure).
    pub text: String,
}

impl Outcome {
    /// Asserts success and returns the text.
    pub fn expect_ok(self) -> String {
        assert!(self.ok, "expected success, got: {}", self.text);
        self.text
    }

    /// Asserts a failure of `kind` and returns the text.
    pub fn expect_err(self, kind: &str) -> String {
        assert!(!self.ok, "expected {kind}, got success: {}", self.text);
        assert!(
            self.text.starts_with(&format!("{kind}: ")),
            "expected {kind}, got: {}",
            self.text
        );
        self.text
    }
}

impl Ws {
    pub fn new() -> Ws {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).expect("mkdir ws");
        std::fs::create_dir_all(&outside).expect("mkdir outside");
        Ws {
            _tmp: tmp,
            root,
            outside,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, content).expect("write");
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).expect("read")
    }

    pub fn call(&self, tool: &str, args: serde_json::Value) -> Outcome {
        self.call_with(tool, args, &[])
    }

    pub fn call_with(&self, tool: &str, args: serde_json::Value, flags: &[&str]) -> Outcome {
        let out = Command::new(env!("CARGO_BIN_EXE_filesystem"))
            .arg("call")
            .arg(tool)
            .arg(args.to_string())
            .arg("--root")
            .arg(&self.root)
            .args(flags)
            .env_remove("FILESYSTEM_ROOT")
            .output()
            .expect("run filesystem");
        let ok = out.status.success();
        let text = if ok { out.stdout } else { out.stderr };
        Outcome {
            ok,
            text: String::from_utf8(text).expect("utf8 output"),
        }
    }
}

/// True when `p` exists (a dangling symlink counts).
pub fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}
