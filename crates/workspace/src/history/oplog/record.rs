//! One line of `.filesystem/.operations`: what one call changed, path by path, as states before
//! and after. No file contents are kept here, only what identifies them (size, SHA-256, and the
//! version that holds them under `--backup`), so the log stays small and holds nothing secret
//! that the workspace did not already show.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::super::log::{escape, unescape};

/// Who made an operation: one server process (or one command) talking to one client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// A token drawn once per process: every operation of one run shares it, and
    /// `revert --session` names it.
    pub id: String,
    /// The client's `clientInfo.name`, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The client's `clientInfo.version`, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `filesystem`, `pipe` or `cli`: which surface the change came through.
    pub mode: String,
}

/// What was at a path at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Nothing.
    Absent,
    /// A regular file.
    File {
        /// Its length in bytes.
        size: u64,
        /// SHA-256 of its content, lowercase hex.
        sha256: String,
        /// Permission bits.
        mode: u32,
        /// The version of its history that holds this content (`--backup`), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<u64>,
    },
    /// A directory (its entries are other paths' business).
    Dir {
        /// Permission bits.
        mode: u32,
    },
    /// A symbolic link (never followed).
    Link {
        /// Where it points, as a log field ([`escape`]d bytes).
        target: String,
    },
    /// A FIFO, socket or device: something the server never makes.
    Other,
    /// Nothing at the path: what was there went to the trash as this entry.
    Trashed {
        /// The trash id `restore_file` takes.
        id: u64,
    },
    /// Nothing at the path: what was there was moved to `to`.
    Moved {
        /// The destination, as a log field.
        to: String,
    },
}

impl State {
    /// True when nothing is at the path in this state.
    pub fn is_absent(&self) -> bool {
        matches!(
            self,
            State::Absent | State::Trashed { .. } | State::Moved { .. }
        )
    }

    /// True when `now` (as observed on the disk) is this state: the same kind, and for a file the
    /// same size, content and mode, for a directory the same mode, for a link the same target.
    /// Version numbers are bookkeeping and do not count.
    pub fn matches(&self, now: &State) -> bool {
        match (self, now) {
            (a, b) if a.is_absent() && b.is_absent() => true,
            (
                State::File {
                    size: s1,
                    sha256: h1,
                    mode: m1,
                    ..
                },
                State::File {
                    size: s2,
                    sha256: h2,
                    mode: m2,
                    ..
                },
            ) => s1 == s2 && h1 == h2 && m1 == m2,
            (State::Dir { mode: a }, State::Dir { mode: b }) => a == b,
            (State::Link { target: a }, State::Link { target: b }) => a == b,
            (State::Other, State::Other) => true,
            _ => false,
        }
    }

    /// A word for the kind of thing, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            State::File { .. } => "file",
            State::Dir { .. } => "directory",
            State::Link { .. } => "symbolic link",
            State::Other => "special file",
            _ => "nothing",
        }
    }

    /// The version, for a file state that has one.
    pub fn version(&self) -> Option<u64> {
        match self {
            State::File { version, .. } => *version,
            _ => None,
        }
    }
}

/// What one operation did to one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathChange {
    /// The root-relative path, as a log field.
    pub path: String,
    /// What was there before the operation touched it.
    pub before: State,
    /// What was there when the operation finished.
    pub after: State,
    /// Set when the entry now at `path` was moved here from this path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<String>,
    /// Set when the entry now at `path` came back from this trash entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<u64>,
}

impl PathChange {
    /// The root-relative path.
    pub fn rel(&self) -> PathBuf {
        field_to_path(&self.path)
    }
}

/// One entry of the operation log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// Never repeats within a store: one more than the newest entry's.
    pub id: u64,
    /// When it finished, UTC, RFC 3339 with microseconds (sorts as a string).
    pub time: String,
    /// Who made it.
    pub session: Session,
    /// The tool or command (`edit_file`, `tee`, `audit restore`, `revert`).
    pub tool: String,
    /// Each path it touched, in the order it touched them.
    pub changes: Vec<PathChange>,
    /// For a revert: the operations it undid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reverts: Vec<u64>,
    /// Set when a crash cut the operation short and the next lock wrote its entry from what
    /// was then on the disk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

impl Operation {
    /// A one-line account of what it did: `edit src/a.rs (v3 → v4)`, `move a → b`,
    /// `delete c (trash 12)`; a few changes, then how many more.
    pub fn summary(&self) -> String {
        const SHOWN: usize = 3;
        let parts: Vec<String> = self.changes.iter().filter_map(describe).collect();
        let mut out = if parts.is_empty() {
            "no change".to_string()
        } else {
            parts
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        };
        if parts.len() > SHOWN {
            out.push_str(&format!(" and {} more", parts.len() - SHOWN));
        }
        if !self.reverts.is_empty() {
            let ids: Vec<String> = self.reverts.iter().map(u64::to_string).collect();
            let which = if ids.len() <= SHOWN {
                ids.join(", ")
            } else {
                let (lo, hi) = (
                    self.reverts.iter().min().copied().unwrap_or_default(),
                    self.reverts.iter().max().copied().unwrap_or_default(),
                );
                format!("{} operations ({lo} … {hi})", ids.len())
            };
            out = format!("revert of {which}: {out}");
        }
        if self.interrupted {
            out.push_str(" (cut short by a crash)");
        }
        out
    }

    /// True when this operation touched `rel` or something inside it (or moved something there).
    pub fn touches(&self, rel: &Path) -> bool {
        self.changes.iter().any(|c| {
            c.rel().starts_with(rel)
                || c.moved_from
                    .as_deref()
                    .is_some_and(|f| field_to_path(f).starts_with(rel))
        })
    }
}

/// How one change reads in a summary; `None` for the half of a move its other half tells.
fn describe(c: &PathChange) -> Option<String> {
    let p = shown(&c.path);
    let versions = |b: &State, a: &State| match (b.version(), a.version()) {
        (Some(x), Some(y)) => format!(" (v{x} → v{y})"),
        (None, Some(y)) => format!(" (v{y})"),
        _ => String::new(),
    };
    Some(match (&c.before, &c.after) {
        (_, State::Moved { .. }) => return None,
        (_, State::Trashed { id }) => format!("delete {p} (trash {id})"),
        _ if c.moved_from.is_some() => format!(
            "move {} → {p}",
            shown(c.moved_from.as_deref().unwrap_or_default())
        ),
        _ if c.restored_from.is_some() => format!(
            "restore {p} (trash {})",
            c.restored_from.unwrap_or_default()
        ),
        (State::Absent, State::Dir { .. }) => format!("mkdir {p}"),
        (State::Absent, a @ State::File { .. }) => format!("create {p}{}", versions(&c.before, a)),
        (State::File { .. }, State::File { .. }) if c.before.matches(&c.after) => {
            format!("history of {p}{}", versions(&c.before, &c.after))
        }
        (State::File { .. }, State::File { .. }) => {
            format!("edit {p}{}", versions(&c.before, &c.after))
        }
        (b, a) if b == a => return None,
        (b, State::Absent) => format!("remove {} {p}", b.kind_name()),
        _ => format!("change {p}"),
    })
}

/// A path field as it reads in text: escaped bytes already, so it is printable.
fn shown(field: &str) -> &str {
    if field.is_empty() {
        "."
    } else {
        field
    }
}

/// A root-relative path as a log field: its bytes [`escape`]d, so the field is valid UTF-8 and
/// holds no control byte whatever the name.
pub fn path_to_field(p: &Path) -> String {
    bytes_to_field(p.as_os_str().as_bytes())
}

/// Any bytes as a log field (see [`path_to_field`]).
pub fn bytes_to_field(b: &[u8]) -> String {
    String::from_utf8_lossy(&escape(b)).into_owned()
}

/// A log field back into a path. A field no writer produced is taken as it is.
pub fn field_to_path(f: &str) -> PathBuf {
    let bytes = unescape(f.as_bytes()).unwrap_or_else(|| f.as_bytes().to_vec());
    PathBuf::from(OsString::from_vec(bytes))
}
