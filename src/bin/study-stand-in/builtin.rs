//! Built-in file work: what a client's own tools (Read, Write, Edit, Bash `mv`) would do, done
//! with plain file operations on the workspace.
//!
//! Confined by construction: a plan path is relative without `.`/`..` (checked when the plan is
//! read), and before each operation every existing component below the workspace is looked at
//! without following it, so a symbolic link inside the workspace cannot lead the work out of it.
//! (The workspace is a fresh copy only this trial's agent touches: the check and the use cannot
//! be raced by anyone the experiment does not already trust.)

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::StandInError;

/// The largest file read by built-in work.
const MAX_READ_BYTES: u64 = 16 << 20;

/// The workspace, and built-in work on it.
pub struct Builtin {
    root: PathBuf,
}

impl Builtin {
    /// Built-in work inside `root`.
    pub fn new(root: &Path) -> Self {
        Builtin {
            root: root.to_path_buf(),
        }
    }

    /// The absolute path of `rel`, as Claude Code's tools name files (`file_path`).
    pub fn display_path(&self, rel: &str) -> String {
        self.root.join(rel).to_string_lossy().into_owned()
    }

    /// `rel` under the root, after checking that no existing component is a symbolic link.
    fn confined(&self, rel: &str) -> Result<PathBuf, StandInError> {
        let mut path = self.root.clone();
        for component in rel.split('/') {
            path.push(component);
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(StandInError::Io {
                        action: "refused to follow a symbolic link at",
                        path,
                        source: std::io::Error::other("built-in work stays inside the workspace"),
                    })
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(source) => {
                    return Err(StandInError::Io {
                        action: "cannot look at",
                        path,
                        source,
                    })
                }
            }
        }
        Ok(self.root.join(rel))
    }

    /// The text of `rel` (at most 16 MiB, UTF-8).
    pub fn read(&self, rel: &str) -> Result<String, StandInError> {
        let path = self.confined(rel)?;
        let io = |source| StandInError::Io {
            action: "cannot read",
            path: path.clone(),
            source,
        };
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_READ_BYTES + 1).read_to_end(&mut bytes))
            .map_err(io)?;
        if bytes.len() as u64 > MAX_READ_BYTES {
            return Err(io(std::io::Error::other(format!(
                "larger than {MAX_READ_BYTES} bytes, more than a task file should be"
            ))));
        }
        String::from_utf8(bytes).map_err(|_| io(std::io::Error::other("not UTF-8 text")))
    }

    /// Writes `content` to `rel`, making missing parent directories; whether it existed before.
    pub fn write(&self, rel: &str, content: &str) -> Result<bool, StandInError> {
        let path = self.confined(rel)?;
        let existed = path.exists();
        let io = |source| StandInError::Io {
            action: "cannot write",
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&path, content).map_err(io)?;
        Ok(existed)
    }

    /// Moves `from` to `to` (which must not exist), making missing parent directories.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), StandInError> {
        let source = self.confined(from)?;
        let target = self.confined(to)?;
        let io = |e| StandInError::Io {
            action: "cannot rename",
            path: source.clone(),
            source: e,
        };
        if std::fs::symlink_metadata(&target).is_ok() {
            return Err(io(std::io::Error::other(format!(
                "'{to}' exists already; a rename step must not replace a file"
            ))));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::rename(&source, &target).map_err(io)
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
