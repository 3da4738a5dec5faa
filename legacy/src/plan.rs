//! The types that cross from checking a pipeline to running it.
//!
//! `parse` turns a command string into [`Stage`]s of [`Word`]s; `policy` turns each stage into a
//! [`Step`] (or a [`Refusal`]); `exec` runs the steps. Nothing that reaches `exec` has not been
//! through the policy: a [`Step::Run`] carries the final argv, forced safety flags included.

use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::{json, Value};

/// One word of a stage after shell-style quote removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// The word with quotes removed.
    pub text: String,
    /// True if any part of the word was quoted or escaped (so `'|'` is data, and a quoted `*` is
    /// not a glob).
    pub quoted: bool,
    /// Byte offsets (into `text`) of unquoted glob characters `*`, `?`, `[`.
    pub glob_chars: Vec<usize>,
}

/// One stage of a pipeline: the words between two unquoted `|`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    /// The words; the first is the command name.
    pub words: Vec<Word>,
    /// The stage exactly as the caller wrote it (quotes and inner spacing kept, surrounding
    /// whitespace trimmed): what `meta.steps[].command` reports, so a step reads as it was sent.
    pub text: String,
}

/// The pipeline commands this mode knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommandName {
    /// `tail`
    Tail,
    /// `rg`
    Rg,
    /// `awk` (GNU awk)
    Awk,
    /// `sed` (GNU sed)
    Sed,
    /// `tr`
    Tr,
    /// `jq`
    Jq,
    /// `wc`
    Wc,
    /// `tee` (built in)
    Tee,
    /// `fd` (`fdfind` on Debian)
    Fd,
    /// `ls`
    Ls,
    /// `head`
    Head,
    /// `sort`
    Sort,
}

impl CommandName {
    /// Every pipeline command, in the order help texts list them.
    pub const ALL: [CommandName; 12] = [
        CommandName::Tail,
        CommandName::Rg,
        CommandName::Awk,
        CommandName::Sed,
        CommandName::Tr,
        CommandName::Jq,
        CommandName::Wc,
        CommandName::Tee,
        CommandName::Fd,
        CommandName::Ls,
        CommandName::Head,
        CommandName::Sort,
    ];

    /// The name a caller types.
    pub fn as_str(self) -> &'static str {
        match self {
            CommandName::Tail => "tail",
            CommandName::Rg => "rg",
            CommandName::Awk => "awk",
            CommandName::Sed => "sed",
            CommandName::Tr => "tr",
            CommandName::Jq => "jq",
            CommandName::Wc => "wc",
            CommandName::Tee => "tee",
            CommandName::Fd => "fd",
            CommandName::Ls => "ls",
            CommandName::Head => "head",
            CommandName::Sort => "sort",
        }
    }

    /// Looks a typed name up.
    pub fn parse(name: &str) -> Option<CommandName> {
        CommandName::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// A checked stage, ready to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An external program: `argv[0]` is the absolute path resolved at start-up; the rest are
    /// the final arguments (forced safety flags first, path operands already guarded and made
    /// relative to `cwd`, with `..` for a path above it, never absolute).
    Run {
        /// Which command this is (for metadata and SIGPIPE/exit-code rules).
        command: CommandName,
        /// The full argument vector.
        argv: Vec<OsString>,
        /// The directory the process starts in (inside the root).
        cwd: PathBuf,
    },
    /// The built-in `tee`: passes its input on and writes it to each target.
    Tee {
        /// Append instead of overwrite (`-a`).
        append: bool,
        /// Targets, already through the guard and the target checks, as absolute paths.
        targets: Vec<PathBuf>,
    },
}

/// A whole command after checking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// A pipeline of one or more steps.
    Pipeline(Vec<Step>),
    /// `ls` alone (optionally with a path): the built-in, workspace-restricted listing.
    BuiltinLs {
        /// Directory or file to list, already guarded.
        target: PathBuf,
        /// `-a`: include dotfiles.
        all: bool,
        /// `-l`: one detailed line per entry.
        long: bool,
    },
    /// `cd PATH`: change the session directory to this guarded directory.
    Cd(PathBuf),
    /// `pwd`.
    Pwd,
}

/// Why a command was refused before anything ran (`code: GUARD_VIOLATION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardReason {
    /// The command is not one of the pipeline commands.
    DisallowedCmd,
    /// An option not on the command's allow-list.
    DisallowedOption,
    /// Unquoted shell syntax (`;`, `&&`, `||`, `&`, backticks, `$(`…).
    DisallowedSyntax,
    /// An unquoted redirection.
    Redirect,
    /// A path outside the workspace.
    PathEscape,
    /// A write into `.shelpa/`, `.filesystem/` or `.git/`.
    ProtectedPath,
    /// A write target that is a symlink, FIFO, device, directory, or a multiply-linked file.
    DisallowedTarget,
    /// `cd`/`pwd` inside a pipeline.
    NavInPipeline,
    /// A write over the approval threshold without `confirm_oversize`.
    ApprovalRequired,
    /// The command string could not be parsed (unbalanced quotes, empty stage…).
    ParseError,
    /// The command is allowed but not installed here.
    MissingTool,
    /// More stages than [`crate::limits::MAX_STAGES`].
    TooManyStages,
    /// A write the operator's rules refuse (`--read-only`, `--read-only-dir`, `--writable-dir`).
    ReadOnly,
}

impl GuardReason {
    /// The wire spelling (`DISALLOWED_CMD`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            GuardReason::DisallowedCmd => "DISALLOWED_CMD",
            GuardReason::DisallowedOption => "DISALLOWED_OPTION",
            GuardReason::DisallowedSyntax => "DISALLOWED_SYNTAX",
            GuardReason::Redirect => "REDIRECT",
            GuardReason::PathEscape => "PATH_ESCAPE",
            GuardReason::ProtectedPath => "PROTECTED_PATH",
            GuardReason::DisallowedTarget => "DISALLOWED_TARGET",
            GuardReason::NavInPipeline => "NAV_IN_PIPELINE",
            GuardReason::ApprovalRequired => "APPROVAL_REQUIRED",
            GuardReason::ParseError => "PARSE_ERROR",
            GuardReason::MissingTool => "MISSING_TOOL",
            GuardReason::TooManyStages => "TOO_MANY_STAGES",
            GuardReason::ReadOnly => "READ_ONLY",
        }
    }
}

/// A refusal: what was wrong, the token that was wrong, and what to do instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail} {suggestion}")]
pub struct Refusal {
    /// The reason code.
    pub reason: GuardReason,
    /// The offending token as the caller wrote it (for logs and reports).
    pub token: String,
    /// What was wrong, e.g. `'rm' is not allowed.`
    pub detail: String,
    /// The allowed way, e.g. `Use tee to write files instead.`
    pub suggestion: String,
}

impl Refusal {
    /// Builds a refusal.
    pub fn new(
        reason: GuardReason,
        token: impl Into<String>,
        detail: impl Into<String>,
        suggestion: impl Into<String>,
    ) -> Self {
        Refusal {
            reason,
            token: token.into(),
            detail: detail.into(),
            suggestion: suggestion.into(),
        }
    }

    /// The shelpa error object: `{"error":{"code":"GUARD_VIOLATION","reason",…}}`.
    pub fn to_json(&self) -> Value {
        json!({"error": {
            "code": "GUARD_VIOLATION",
            "reason": self.reason.as_str(),
            "detail": self.detail,
            "suggestion": self.suggestion,
            "token": self.token,
        }})
    }
}
