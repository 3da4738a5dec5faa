//! Choosing and validating a workspace root.
//!
//! Every subcommand that works on one root (serving, `tools`, `call`, `check`, `audit`) chooses it
//! with [`resolve`]: `--root`, else `$FILESYSTEM_ROOT`, else the current directory. One function,
//! so the precedence the help promises cannot drift between subcommands. The `--server` daemon
//! does not call it: it has no root of its own and takes one from each call
//! ([`validate_absolute`]).
//!
//! The root is the one directory everything is confined to, so it is checked before anything is
//! served: it must exist, be a directory, and is canonicalised once (the guard compares resolved
//! paths against this exact spelling). `/` is refused unless explicitly allowed, because desktop
//! MCP clients often start servers with `/` as their working directory, and a server that silently
//! adopted it would expose the whole machine.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

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
    /// Neither `--root` nor `FILESYSTEM_ROOT` was given and the current directory is unreadable
    /// (deleted, or not searchable).
    #[error("cannot read the current directory ({0}); pass --root DIR")]
    CurrentDir(io::Error),
}

/// The environment variable naming the root when `--root` is not given.
pub const ROOT_ENV: &str = "FILESYSTEM_ROOT";

/// The root a command works on, as chosen by [`resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenRoot {
    /// The root as it was given (`--root`, `FILESYSTEM_ROOT` or the current directory), before
    /// links were resolved: the spelling a client may use in absolute paths.
    pub given: PathBuf,
    /// The validated, canonical root that everything is confined to.
    pub canonical: PathBuf,
}

impl ChosenRoot {
    /// The other spellings of the root a guard on it should accept (see [`spellings`]).
    pub fn spellings(&self) -> Spellings {
        Spellings::of(&self.given, &self.canonical)
    }
}

/// Chooses and validates the root of a command: `given` (the `--root` flag), else
/// [`ROOT_ENV`] when set and not empty, else the current directory. `/` is refused unless
/// `allow_slash`.
pub fn resolve(given: Option<&Path>, allow_slash: bool) -> Result<ChosenRoot, RootError> {
    choose(
        given,
        std::env::var_os(ROOT_ENV),
        std::env::current_dir,
        allow_slash,
    )
}

/// [`resolve`] with the environment and the current directory passed in, so the precedence can
/// be tested without changing the process's own.
fn choose(
    flag: Option<&Path>,
    from_env: Option<OsString>,
    current_dir: impl FnOnce() -> io::Result<PathBuf>,
    allow_slash: bool,
) -> Result<ChosenRoot, RootError> {
    // An empty FILESYSTEM_ROOT (`FILESYSTEM_ROOT= filesystem …`) reads as unset, as in a shell.
    let given = match (flag, from_env.filter(|v| !v.is_empty())) {
        (Some(flag), _) => flag.to_path_buf(),
        (None, Some(env)) => PathBuf::from(env),
        (None, None) => current_dir().map_err(RootError::CurrentDir)?,
    };
    let canonical = validate(&given, allow_slash)?;
    Ok(ChosenRoot { given, canonical })
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

/// The most other spellings of one root a server accepts: the given one, the shell's and
/// `$HOME`'s, and in `--server` those the calls named the root by.
const MAX_SPELLINGS: usize = 8;

/// The other spellings of one root, shared between its guard and whoever learns new ones (the
/// daemon, from the `root` a call names). Bounded: past [`MAX_SPELLINGS`] the oldest learnt one
/// makes room.
#[derive(Debug, Clone, Default)]
pub struct Spellings(Arc<RwLock<Vec<PathBuf>>>);

impl Spellings {
    /// The spellings of `canonical` found from how it was `given` (see [`spellings`]).
    pub fn of(given: &Path, canonical: &Path) -> Spellings {
        Spellings(Arc::new(RwLock::new(spellings(given, canonical))))
    }

    /// Adds `given`, a spelling a caller named the root by, if it is new and leads to
    /// `canonical` (checked here, once per new spelling).
    pub fn learn(&self, given: &Path, canonical: &Path) {
        if !given.is_absolute() {
            return;
        }
        let spelling = crate::guard::normalize(given);
        if spelling == canonical || self.0.read().map_or(true, |l| l.contains(&spelling)) {
            return;
        }
        if spelling.canonicalize().ok().as_deref() != Some(canonical) {
            return;
        }
        let Ok(mut list) = self.0.write() else { return };
        if !list.contains(&spelling) {
            if list.len() >= MAX_SPELLINGS {
                list.remove(0);
            }
            list.push(spelling);
        }
    }

    /// `absolute` relative to the first spelling it starts with.
    pub fn strip(&self, absolute: &Path) -> Option<PathBuf> {
        let list = self.0.read().ok()?;
        list.iter()
            .find_map(|root| absolute.strip_prefix(root).ok())
            .map(Path::to_path_buf)
    }
}

/// Other absolute spellings of the canonical root `canonical`, reached through symlinks, that a
/// client may use in absolute paths: the root as it was given (`--root /tmp/ws` where `/tmp` is a
/// link, as on macOS), as the shell spells the current directory (`$PWD`), and through `$HOME`
/// when the home directory is itself a link. Each is kept only if it still leads to `canonical`
/// now. The guard uses them as plain strings, rewriting a leading spelling to the root and then
/// resolving beneath the root's descriptor, so a link re-pointed later changes nothing about what
/// can be reached: at worst a path is taken as inside that no longer would be.
pub fn spellings(given: &Path, canonical: &Path) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    if given.is_absolute() {
        candidates.push(crate::guard::normalize(given));
    }
    // A directory spelled through links, and the real directory it names: the root under it may
    // be written from that spelling.
    let anchors = [std::env::var_os("PWD"), std::env::var_os("HOME")];
    for spelled in anchors.into_iter().flatten() {
        let spelled = Path::new(&spelled);
        if !spelled.is_absolute() {
            continue;
        }
        let spelled = crate::guard::normalize(spelled);
        if let Ok(real) = spelled.canonicalize() {
            if let Ok(rest) = canonical.strip_prefix(&real) {
                candidates.push(spelled.join(rest));
            }
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for candidate in candidates {
        if candidate != canonical
            && !out.contains(&candidate)
            && candidate.canonicalize().ok().as_deref() == Some(canonical)
        {
            out.push(candidate);
        }
    }
    out.truncate(MAX_SPELLINGS);
    out
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

    #[test]
    fn the_flag_wins_over_the_environment_which_wins_over_the_current_directory() {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = tmp.path().canonicalize().expect("c");
        for name in ["flag", "env", "cwd"] {
            std::fs::create_dir(base.join(name)).expect("mkdir");
        }
        let cwd = || Ok(base.join("cwd"));
        let env = || Some(base.join("env").into_os_string());
        let flag = base.join("flag");
        let chosen = |flag: Option<&Path>, env: Option<OsString>| {
            choose(flag, env, cwd, false).expect("valid").canonical
        };
        assert_eq!(chosen(Some(&flag), env()), base.join("flag"));
        assert_eq!(chosen(None, env()), base.join("env"));
        assert_eq!(chosen(None, None), base.join("cwd"));
        assert_eq!(chosen(None, Some(OsString::new())), base.join("cwd"));
        // The current directory is only asked for when nothing else names the root.
        let unreadable = || Err(io::Error::from(io::ErrorKind::NotFound));
        assert!(choose(None, env(), unreadable, false).is_ok());
        assert!(matches!(
            choose(None, None, unreadable, false),
            Err(RootError::CurrentDir(_))
        ));
        // What was given is kept beside the canonical root, for its spellings.
        let odd = base.join("env/../flag");
        let chosen = choose(Some(&odd), None, cwd, false).expect("valid");
        assert_eq!(chosen.given, odd);
        assert_eq!(chosen.canonical, base.join("flag"));
        // The environment's root is validated like the flag's.
        let missing = Some(base.join("gone").into_os_string());
        assert!(matches!(
            choose(None, missing, cwd, false),
            Err(RootError::Missing(_))
        ));
        assert!(matches!(
            choose(None, Some("/".into()), cwd, false),
            Err(RootError::Slash)
        ));
    }

    #[test]
    fn a_root_given_through_a_link_keeps_that_spelling() {
        let tmp = tempfile::tempdir().expect("tmp");
        let real = tmp.path().canonicalize().expect("c").join("real");
        std::fs::create_dir_all(real.join("ws")).expect("mkdir");
        let link = tmp.path().canonicalize().expect("c").join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let given = link.join("ws");
        let canonical = validate(&given, false).expect("valid");
        assert_eq!(canonical, real.join("ws"));
        assert!(spellings(&given, &canonical).contains(&given));
        // The canonical spelling itself is not an extra spelling.
        assert!(!spellings(&canonical, &canonical).contains(&canonical));
        // A spelling that no longer leads to the root is dropped.
        let elsewhere = tmp.path().canonicalize().expect("c").join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        assert!(!spellings(&elsewhere, &canonical).contains(&elsewhere));
    }
}
