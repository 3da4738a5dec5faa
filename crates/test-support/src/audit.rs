//! Audit fixtures: a private copy of the hand-written `.shelpa/` mirror fixture and a way to run
//! `filesystem audit` on it through the real binary.

use std::path::{Path, PathBuf};

/// A temp dir holding `ws/` (a copy of fixtures/shelpa-mirror) and `outside/` (a sibling the
/// hostile cases point at).
pub struct Workspace {
    _tmp: tempfile::TempDir,
    /// The workspace root (the fixture copy).
    pub root: PathBuf,
    /// A sibling of the root holding `secret.txt`.
    pub outside: PathBuf,
}

/// Copies a directory tree of plain files and directories.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

impl Workspace {
    /// A fresh copy of the mirror fixture, with a secret outside it.
    pub fn fixture() -> Workspace {
        let tmp = crate::temp::temp_dir();
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        copy_tree(&crate::fixtures::fixture("shelpa-mirror"), &root);
        let outside = base.join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("secret.txt"), "TOP-SECRET outside the root\n").expect("write");
        Workspace {
            _tmp: tmp,
            root,
            outside,
        }
    }

    /// The absolute path of `rel` inside the workspace.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The bytes of a workspace file.
    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).expect("read")
    }

    /// Runs `filesystem audit ARGS --root ROOT` in UTC.
    pub fn audit(&self, args: &[&str]) -> Run {
        self.audit_tz(args, "UTC")
    }

    /// Runs `filesystem audit ARGS --root ROOT` in the time zone `tz` (times are shown in it).
    pub fn audit_tz(&self, args: &[&str], tz: &str) -> Run {
        let argv: Vec<&str> = ["audit"].iter().chain(args).copied().collect();
        let out = crate::cli::in_root(&self.root, &argv)
            .env("TZ", tz)
            .output()
            .expect("run binary");
        Run {
            code: out.status.code().expect("exit code"),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// What one `filesystem audit` run did.
pub struct Run {
    /// The exit code.
    pub code: i32,
    /// Stdout as bytes (`audit restore --stdout` prints file bytes).
    pub stdout: Vec<u8>,
    /// Stderr as text.
    pub stderr: String,
}

impl Run {
    /// Stdout as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Stdout parsed as JSON (failing with both streams when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.text(), self.stderr))
    }

    /// Fails unless the run exited 0, and returns it for reading.
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code,
            0,
            "stdout: {}\nstderr: {}",
            self.text(),
            self.stderr
        );
        self
    }
}
