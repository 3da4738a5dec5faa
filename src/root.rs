//! Choosing and validating a workspace root.
//!
//! The root is the one directory everything is confined to, so it is checked before anything is
//! served: it must exist, be a directory, and is canonicalised once (the guard compares resolved
//! paths against this exact spelling). `/` is refused unless explicitly allowed, because desktop
//! MCP clients often start servers with `/` as their working directory, and a server that silently
//! adopted it would expose the whole machine.

use std::io;
use std::path::{Path, PathBuf};

/// Why a root was refused.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The directory does not exist.
    #[error("root '{0}' does not exist; create it or pass an existing directory with --root")]
    Missing(String),
    /// The path exists but is not a directory.
    #[error("root '{0}' is not a directory; pass the directory that contains your project")]
    NotADirectory(String),
    /// The root would be the whole filesystem.
    #[error("refusing to serve '/' as the workspace root: desktop MCP clients often start servers with the current directory set to '/', which would expose the whole machine. Pass --root /path/to/project (or set FILESYSTEM_ROOT), or add --allow-root-slash if you really mean it")]
    Slash,
    /// A daemon-mode root that is not absolute.
    #[error("root '{0}' must be an absolute path (e.g. \"/home/me/project\")")]
    Relative(String),
    /// The directory could not be inspected.
    #[error("cannot use root '{path}': {source}")]
    Io { path: String, source: io::Error },
}

/// Validates `path` as a workspace root and returns its canonical form.
pub fn validate(path: &Path, allow_slash: bool) -> Result<PathBuf, RootError> {
    let shown = path.display().to_string();
    let canonical = match path.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(RootError::Missing(shown)),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            return Err(RootError::NotADirectory(shown))
        }
        Err(source) => {
            return Err(RootError::Io {
                path: shown,
                source,
            })
        }
    };
    if !canonical.is_dir() {
        return Err(RootError::NotADirectory(shown));
    }
    if canonical == Path::new("/") && !allow_slash {
        return Err(RootError::Slash);
    }
    Ok(canonical)
}

/// Validates a root named in a daemon-mode tool call: like [`validate`], but it must be absolute
/// (there is no meaningful current directory for a gateway's caller) and `/` is refused unless the
/// daemon itself was started with `--allow-root-slash`.
pub fn validate_absolute(given: &str, allow_slash: bool) -> Result<PathBuf, RootError> {
    if given.is_empty() || !Path::new(given).is_absolute() {
        return Err(RootError::Relative(given.to_string()));
    }
    validate(Path::new(given), allow_slash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_canonicalised_and_checked() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("a");
        std::fs::create_dir(&dir).expect("mkdir");
        let odd = tmp.path().join("a/../a/.");
        assert_eq!(
            validate(&odd, false).expect("valid"),
            dir.canonicalize().expect("c")
        );
        std::fs::write(tmp.path().join("f"), "x").expect("write");
        assert!(matches!(
            validate(&tmp.path().join("f"), false),
            Err(RootError::NotADirectory(_))
        ));
        assert!(matches!(
            validate(&tmp.path().join("nope"), false),
            Err(RootError::Missing(_))
        ));
        assert!(matches!(
            validate(Path::new("/"), false),
            Err(RootError::Slash)
        ));
        assert!(validate(Path::new("/"), true).is_ok());
        assert!(matches!(
            validate_absolute("rel/dir", false),
            Err(RootError::Relative(_))
        ));
        assert!(matches!(
            validate_absolute("/", false),
            Err(RootError::Slash)
        ));
    }
}
