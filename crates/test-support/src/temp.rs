//! Temporary directories and workspaces: what almost every test starts from.

use std::path::{Path, PathBuf};

use crate::cli::Outcome;

/// A fresh temporary directory, removed when dropped (a test that cannot make one cannot run).
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Writes `rel` under `root`, making its parent directories: the one body of the `write` method
/// every kind of test workspace has (`TempRoot`, and so `Ws`, and the arena).
pub fn write_under(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(p, content).expect("write");
}

/// A temporary workspace root (canonical) beside an `outside/` directory the tools must never
/// reach. It is a [`TempRoot`] with a sibling: `root`, `path`, `write` and `read` are the
/// `TempRoot`'s (through `Deref`), so the two kinds of workspace cannot drift apart.
pub struct Ws {
    dir: TempRoot,
    /// A sibling directory outside the root.
    pub outside: PathBuf,
}

impl std::ops::Deref for Ws {
    type Target = TempRoot;

    fn deref(&self) -> &TempRoot {
        &self.dir
    }
}

impl Ws {
    /// A new empty workspace and its empty `outside/` sibling.
    pub fn new() -> Ws {
        let tmp = temp_dir();
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).expect("mkdir ws");
        std::fs::create_dir_all(&outside).expect("mkdir outside");
        Ws {
            dir: TempRoot::inside(tmp, root),
            outside,
        }
    }

    /// Runs one tool through `filesystem call` on this workspace.
    pub fn call(&self, tool: &str, args: serde_json::Value) -> Outcome {
        self.call_with(tool, args, &[])
    }

    /// Runs one tool through `filesystem call` with extra flags (e.g. `--backup`).
    pub fn call_with(&self, tool: &str, args: serde_json::Value, flags: &[&str]) -> Outcome {
        crate::cli::call(&self.root, tool, &args.to_string(), flags)
    }
}

impl Default for Ws {
    fn default() -> Ws {
        Ws::new()
    }
}

/// A canonical temporary directory that is itself the workspace root (for tests with no use for
/// an `outside/` sibling, or that make their own).
pub struct TempRoot {
    _tmp: tempfile::TempDir,
    /// The workspace root.
    pub root: PathBuf,
}

impl TempRoot {
    /// A new empty root.
    pub fn new() -> TempRoot {
        let (tmp, root) = canonical_temp_dir();
        TempRoot { _tmp: tmp, root }
    }

    /// A root somewhere inside `tmp` (kept alive with it), for tests that put something above
    /// the root, such as a repository's `.gitignore`.
    pub fn inside(tmp: tempfile::TempDir, root: PathBuf) -> TempRoot {
        TempRoot { _tmp: tmp, root }
    }

    /// The absolute path of `rel` inside the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file under the root, making its parent directories.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        write_under(&self.root, rel, content);
    }

    /// Reads a file under the root as text.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).expect("read")
    }
}

impl Default for TempRoot {
    fn default() -> TempRoot {
        TempRoot::new()
    }
}

/// True when `p` exists (a dangling symlink counts).
pub fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// A fresh temporary directory and its canonical path (macOS `/tmp` is `/private/tmp`), for tests
/// that compare paths the server prints with the root they gave it.
pub fn canonical_temp_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = temp_dir();
    let path = dir.path().canonicalize().expect("canonical");
    (dir, path)
}
