//! Running the binary's subcommands (`call`, `audit restore`, ...) once and reading what they
//! printed. The runners remove `FILESYSTEM_ROOT` from the environment so the `--root` they pass
//! is the only root in play, whatever the developer's shell exports.

use std::path::Path;
use std::process::{Command, Output};

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

/// `filesystem ARGS --root ROOT`, without `FILESYSTEM_ROOT` in its environment: the start of a
/// subcommand run that the caller finishes (more flags, environment, how to run it).
pub fn in_root(root: &Path, args: &[&str]) -> Command {
    let mut cmd = crate::bin::command();
    cmd.args(args)
        .arg("--root")
        .arg(root)
        .env_remove("FILESYSTEM_ROOT");
    cmd
}

/// `filesystem call TOOL ARGS --root ROOT FLAGS...`: one tool call through the real binary.
pub fn call(root: &Path, tool: &str, args: &str, flags: &[&str]) -> Outcome {
    let out = in_root(root, &["call", tool, args])
        .args(flags)
        .output()
        .expect("run filesystem");
    let ok = out.status.success();
    let text = if ok { out.stdout } else { out.stderr };
    Outcome {
        ok,
        text: String::from_utf8(text).expect("utf8 output"),
    }
}

/// Runs `filesystem ARGS --root ROOT` (a subcommand such as `audit restore`) in UTC and returns
/// (success, stdout + stderr).
pub fn run(root: &Path, args: &[&str]) -> (bool, String) {
    let out = in_root(root, args)
        .env("TZ", "UTC")
        .output()
        .expect("run filesystem");
    (out.status.success(), printed(&out))
}

/// Everything a finished run printed: its stdout, then its stderr (lossily decoded), for tests
/// that look for a message wherever it went.
pub fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
