//! Shared by the audit tests: a private copy of the hand-written mirror fixture and a way to run
//! `filesystem audit` on it through the real binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_filesystem");

/// A temp dir holding `ws/` (a copy of fixtures/shelpa-mirror) and `outside/` (a sibling the
/// hostile cases point at).
pub struct Workspace {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub outside: PathBuf,
}

fn copy_tree(from: &Path, to: &Path) {
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
    pub fn fixture() -> Workspace {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/shelpa-mirror"),
            &root,
        );
        let outside = base.join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("secret.txt"), "TOP-SECRET outside the root\n").expect("write");
        Workspace {
            _tmp: tmp,
            root,
            outside,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).expect("read")
    }

    /// Runs `filesystem audit ARGS --root ROOT` in UTC.
    pub fn audit(&self, args: &[&str]) -> Run {
        self.audit_tz(args, "UTC")
    }

    pub fn audit_tz(&self, args: &[&str], tz: &str) -> Run {
        let out = Command::new(BIN)
            .arg("audit")
            .args(args)
            .arg("--root")
            .arg(&self.root)
            .env("TZ", tz)
            .env_remove("FILESYSTEM_ROOT")
            .output()
            .expect("run binary");
        Run {
            code: out.status.code().expect("exit code"),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.text(), self.stderr))
    }

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
