//! Built-in file work: what a client's own tools (Read, Write, Edit, Bash `mv`) would do, done
//! through the workspace layer on the trial's workspace.
//!
//! Confined by construction: a plan path is relative without `.`/`..` (checked when the plan is
//! read), and every operation is made relative to the workspace's descriptor with no symbolic
//! link followed on the way or at the end, so a link inside the workspace cannot lead the work
//! out of it, nor a directory swapped for one while the work is done.

use std::io::Read;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use workspace::Workspace;

use crate::error::StandInError;

/// The largest file read by built-in work.
const MAX_READ_BYTES: u64 = 16 << 20;

/// The workspace, and built-in work on it.
pub struct Builtin {
    workspace: Workspace,
}

impl Builtin {
    /// Built-in work inside the canonical directory `root`.
    pub fn new(root: &Path) -> Result<Self, StandInError> {
        let workspace = Workspace::open(root).map_err(|source| StandInError::Io {
            action: "cannot open the workspace",
            path: root.to_path_buf(),
            source,
        })?;
        Ok(Builtin { workspace })
    }

    /// The absolute path of `rel`, as Claude Code's tools name files (`file_path`).
    pub fn display_path(&self, rel: &str) -> String {
        self.workspace
            .root()
            .join(rel)
            .to_string_lossy()
            .into_owned()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.workspace.root().join(rel)
    }

    /// The text of `rel` (at most 16 MiB, UTF-8).
    pub fn read(&self, rel: &str) -> Result<String, StandInError> {
        let io = |source| StandInError::Io {
            action: "cannot read",
            path: self.path(rel),
            source,
        };
        let mut bytes = Vec::new();
        self.workspace
            .open_regular(Path::new(rel), OFlags::RDONLY, Mode::empty())
            .and_then(|f| f.take(MAX_READ_BYTES + 1).read_to_end(&mut bytes))
            .map_err(io)?;
        if bytes.len() as u64 > MAX_READ_BYTES {
            return Err(io(std::io::Error::other(format!(
                "larger than {MAX_READ_BYTES} bytes, more than a task file should be"
            ))));
        }
        String::from_utf8(bytes).map_err(|_| io(std::io::Error::other("not UTF-8 text")))
    }

    /// Writes `content` to `rel` (replacing the file whole, keeping its mode), making missing
    /// parent directories; whether it existed before.
    pub fn write(&self, rel: &str, content: &str) -> Result<bool, StandInError> {
        let io = |source| StandInError::Io {
            action: "cannot write",
            path: self.path(rel),
            source,
        };
        let rel_path = Path::new(rel);
        let before = self.workspace.stat(rel_path).map_err(io)?;
        if let Some(parent) = rel_path.parent() {
            self.workspace.create_dirs(parent).map_err(io)?;
        }
        let (dir, name) = self.workspace.parent(rel_path).map_err(io)?;
        // Detached: the temporary's crash registry would add a `.filesystem/` to a workspace
        // that the client's own tools never touch.
        dir.detached()
            .replace_file(name, content.as_bytes(), before.map(|s| s.mode), false)
            .map_err(io)?;
        Ok(before.is_some())
    }

    /// Moves `from` to `to` (which must not exist), making missing parent directories.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), StandInError> {
        let io = |e| StandInError::Io {
            action: "cannot rename",
            path: self.path(from),
            source: e,
        };
        let target = Path::new(to);
        if self.workspace.exists(target).map_err(io)? {
            return Err(io(std::io::Error::other(format!(
                "'{to}' exists already; a rename step must not replace a file"
            ))));
        }
        if let Some(parent) = target.parent() {
            self.workspace.create_dirs(parent).map_err(io)?;
        }
        let (src_dir, src_name) = self.workspace.parent(Path::new(from)).map_err(io)?;
        let (dst_dir, dst_name) = self.workspace.parent(target).map_err(io)?;
        src_dir
            .rename_no_replace(src_name, &dst_dir, dst_name)
            .map_err(io)
    }
}

/// The one replacement an edit step makes: `old` must occur exactly once in `text`, as both the
/// client's Edit and a careful agent require.
pub fn replace_once(text: &str, old: &str, new: &str) -> Result<String, String> {
    match text.matches(old).count() {
        1 => Ok(text.replacen(old, new, 1)),
        0 => Err(format!("the text to replace is not in the file: {old:?}")),
        n => Err(format!(
            "the text to replace occurs {n} times; quote more of it so it occurs once: {old:?}"
        )),
    }
}

/// `word` quoted for a shell command line (as the Bash tool's `command` shows it).
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/-+,:@%".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::{replace_once, shell_quote};

    #[test]
    fn an_edit_needs_exactly_one_occurrence() {
        assert_eq!(replace_once("a b a", "b", "c"), Ok("a c a".into()));
        assert!(replace_once("a b a", "a", "c").is_err());
        assert!(replace_once("a b a", "x", "c").is_err());
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("src/a.py"), "src/a.py");
        assert_eq!(shell_quote("it's here"), r"'it'\''s here'");
    }
}
