//! Choosing, opening and validating a workspace root.
//!
//! Every subcommand that works on one root (serving, `tools`, `call`, `check`, `audit`) chooses it
//! with [`resolve`] or [`resolve_opened`]: `--root`, else `$FILESYSTEM_ROOT`, else the current
//! directory. One function, so the precedence the help promises cannot drift between subcommands.
//! The `--server` daemon and a client's MCP roots name their roots otherwise, but every root,
//! however it arrives, goes through [`OpenedRoot::open`].
//!
//! A root is opened once, as a descriptor, and everything about it is derived from that
//! descriptor, never from its path again: where it is (read back from the descriptor, see
//! [`OpenedRoot::real`]), whether it is allowed, whether it lies in a store, the workspace handle
//! the guard and the history work through, and the call log. A directory on the way to the root
//! swapped for a symlink after the open cannot redirect it: the descriptor is already the root,
//! and its checks are made on where *that* directory is.
//!
//! The root is the one directory everything is confined to, so it is checked before anything is
//! served: it must exist and be a directory; `/` is refused unless explicitly allowed, because
//! desktop MCP clients often start servers with `/` as their working directory, and a server that
//! silently adopted it would expose the whole machine; and a root that is, or lies inside, a
//! `.filesystem/` or `.shelpa/` store is refused, because serving it would let an agent read and
//! rewrite another workspace's history and call log.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustix::fs::{Mode, OFlags};

use crate::park::{park, Point};
use crate::{Stat, Workspace};

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
    /// The root is, or lies inside, a store directory (once its links are resolved).
    #[error("root '{given}' is inside a '{store}' store directory, which holds a workspace's own history and call log and is never served; name the workspace itself ('{workspace}') or another directory")]
    InsideStore {
        /// The root as it was given.
        given: String,
        /// The store's directory name (`.filesystem` or `.shelpa`).
        store: String,
        /// The workspace that owns the store.
        workspace: String,
    },
    /// The directory opened was moved or replaced before where it is could be read back.
    #[error("root '{0}' was moved or replaced while it was being opened; name it again once it stays put")]
    Moved(String),
}

/// The identity of a directory (device and inode): what tells the directory a path names now
/// from the one it named when a root was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DirId {
    /// The device.
    pub dev: u64,
    /// The inode on that device.
    pub ino: u64,
}

impl DirId {
    /// The identity of what `fd` is open on.
    pub fn of(fd: &impl std::os::fd::AsFd) -> io::Result<DirId> {
        let st = Stat::of(fd)?;
        Ok(DirId {
            dev: st.dev,
            ino: st.ino,
        })
    }
}

/// A root opened once: the descriptor of the directory, where that directory was when it was
/// opened (read back from the descriptor), and its identity. Nothing about the root is looked up
/// by its path again: [`OpenedRoot::into_workspace`] hands the same descriptor to the workspace
/// layer.
#[derive(Debug)]
pub struct OpenedRoot {
    /// The root as it was given (a spelling a client may use in absolute paths).
    pub given: PathBuf,
    fd: OwnedFd,
    real: PathBuf,
    id: DirId,
}

impl OpenedRoot {
    /// Opens the directory `given` names now (links followed: a root may be named through them),
    /// then reads back from the descriptor where that directory is. No check is made here but
    /// that it is a directory that exists; see [`open_checked`] for the rules every root obeys.
    pub fn open(given: &Path) -> Result<OpenedRoot, RootError> {
        let shown = given.display().to_string();
        let fd = rustix::fs::open(
            given,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOENT => RootError::Missing(shown.clone()),
            rustix::io::Errno::NOTDIR => RootError::NotADirectory(shown.clone()),
            other => RootError::Io {
                path: shown.clone(),
                source: other.into(),
            },
        })?;
        park(Point::RootOpened, given);
        let io = |source| RootError::Io {
            path: shown.clone(),
            source,
        };
        let id = DirId::of(&fd).map_err(io)?;
        let real = location(&fd, id, &shown)?;
        Ok(OpenedRoot {
            given: given.to_path_buf(),
            fd,
            real,
            id,
        })
    }

    /// Where the opened directory was when it was opened: a canonical path (no link, no `.` or
    /// `..`), read back from its descriptor. What every check of the root compares, and what the
    /// guard confines paths to.
    pub fn real(&self) -> &Path {
        &self.real
    }

    /// The opened directory's identity.
    pub fn id(&self) -> DirId {
        self.id
    }

    /// The other spellings of the root a guard on it should accept (see [`spellings`]).
    pub fn spellings(&self) -> Spellings {
        Spellings::of(&self.given, &self.real)
    }

    /// The store directory the root is or lies in (its name, and the workspace owning it), found
    /// on where the opened directory is.
    pub fn store(&self) -> Option<(String, PathBuf)> {
        store_in(&self.real)
    }

    /// The workspace handle of this root, on the very descriptor that was opened.
    pub fn into_workspace(self) -> Workspace {
        Workspace::from_root_fd(self.fd, self.real)
    }
}

/// Where the directory open on `fd` (of identity `id`) is now: the kernel's own name for it
/// (`/proc/self/fd/N`, one consistent reading even while directories are being renamed), checked
/// to name the same directory when opened again. A removed directory, a name from another mount
/// namespace, or a directory swapped at that name meanwhile fails the check rather than being
/// taken for the root's place.
fn location(fd: &OwnedFd, id: DirId, shown: &str) -> Result<PathBuf, RootError> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let real = std::fs::read_link(&link).map_err(|e| RootError::Io {
        path: shown.to_string(),
        source: io::Error::new(
            e.kind(),
            format!("cannot read where the opened directory is ({link}: {e}); the server needs /proc mounted"),
        ),
    })?;
    if !real.is_absolute()
        || real
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return Err(RootError::Moved(shown.to_string()));
    }
    let again = rustix::fs::open(
        &real,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    );
    match again.ok().map(|fd| DirId::of(&fd)) {
        Some(Ok(found)) if found == id => Ok(real),
        _ => Err(RootError::Moved(shown.to_string())),
    }
}

/// The first store directory among `path`'s components, and the workspace that owns it (the path
/// up to that component), or `None`.
pub fn store_in(path: &Path) -> Option<(String, PathBuf)> {
    let mut workspace = PathBuf::new();
    for component in path.components() {
        if let Component::Normal(name) = component {
            if let Some(store) = crate::guard::STATE_DIRS
                .iter()
                .find(|s| name == std::ffi::OsStr::new(s))
            {
                return Some((store.to_string(), workspace));
            }
        }
        workspace.push(component);
    }
    None
}

/// Opens `given` as a root and applies the rules every root obeys, to where the opened directory
/// is: not `/` unless `allow_slash`, and not in a store.
pub fn open_checked(given: &Path, allow_slash: bool) -> Result<OpenedRoot, RootError> {
    let opened = OpenedRoot::open(given)?;
    if opened.real() == Path::new("/") && !allow_slash {
        return Err(RootError::Slash);
    }
    if let Some((store, workspace)) = opened.store() {
        return Err(RootError::InsideStore {
            given: given.display().to_string(),
            store,
            workspace: workspace.display().to_string(),
        });
    }
    Ok(opened)
}

/// Opens (creating it and its parents first) a directory the operator named for the server's own
/// output, such as the directory of `--call-log FILE`: by name, following links, because the
/// operator chose it and it is not a workspace. Everything done inside it goes through the
/// returned handle.
pub fn open_operator_dir(path: &Path) -> io::Result<Workspace> {
    std::fs::create_dir_all(path)?;
    let fd = rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let real = location(&fd, DirId::of(&fd)?, &path.display().to_string())
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(Workspace::from_root_fd(fd, real))
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
/// `allow_slash`. For commands that only need the root's name; a server opens it with
/// [`resolve_opened`].
pub fn resolve(given: Option<&Path>, allow_slash: bool) -> Result<ChosenRoot, RootError> {
    let opened = resolve_opened(given, allow_slash)?;
    Ok(ChosenRoot {
        canonical: opened.real().to_path_buf(),
        given: opened.given,
    })
}

/// [`resolve`], keeping the opened root: what a server serves, derived from this descriptor.
pub fn resolve_opened(given: Option<&Path>, allow_slash: bool) -> Result<OpenedRoot, RootError> {
    let given = choose(given, std::env::var_os(ROOT_ENV), std::env::current_dir)?;
    open_checked(&given, allow_slash)
}

/// Which root a command names: the flag, else the environment, else the current directory,
/// with the environment and the current directory passed in, so the precedence can be tested
/// without changing the process's own.
fn choose(
    flag: Option<&Path>,
    from_env: Option<OsString>,
    current_dir: impl FnOnce() -> io::Result<PathBuf>,
) -> Result<PathBuf, RootError> {
    // An empty FILESYSTEM_ROOT (`FILESYSTEM_ROOT= filesystem …`) reads as unset, as in a shell.
    Ok(match (flag, from_env.filter(|v| !v.is_empty())) {
        (Some(flag), _) => flag.to_path_buf(),
        (None, Some(env)) => PathBuf::from(env),
        (None, None) => current_dir().map_err(RootError::CurrentDir)?,
    })
}

/// Validates `path` as a workspace root and returns where it is, canonical.
pub fn validate(path: &Path, allow_slash: bool) -> Result<PathBuf, RootError> {
    Ok(open_checked(path, allow_slash)?.real().to_path_buf())
}

/// Checks that a root named in a daemon-mode tool call is absolute: there is no meaningful
/// current directory for a gateway's caller.
pub fn require_absolute(given: &str) -> Result<&Path, RootError> {
    if given.is_empty() || !Path::new(given).is_absolute() {
        return Err(RootError::Relative(given.to_string()));
    }
    Ok(Path::new(given))
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
            require_absolute("rel/dir"),
            Err(RootError::Relative(_))
        ));
        std::fs::create_dir_all(tmp.path().join("w/.filesystem/x")).expect("mkdir");
        for inside in ["w/.filesystem", "w/.filesystem/x"] {
            assert!(matches!(
                validate(&tmp.path().join(inside), false),
                Err(RootError::InsideStore { .. })
            ));
        }
        std::os::unix::fs::symlink(tmp.path().join("w/.filesystem"), tmp.path().join("l"))
            .expect("symlink");
        assert!(matches!(
            validate(&tmp.path().join("l"), false),
            Err(RootError::InsideStore { .. })
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
            validate(&choose(flag, env, cwd).expect("chosen"), false).expect("valid")
        };
        assert_eq!(chosen(Some(&flag), env()), base.join("flag"));
        assert_eq!(chosen(None, env()), base.join("env"));
        assert_eq!(chosen(None, None), base.join("cwd"));
        assert_eq!(chosen(None, Some(OsString::new())), base.join("cwd"));
        // The current directory is only asked for when nothing else names the root.
        let unreadable = || Err(io::Error::from(io::ErrorKind::NotFound));
        assert!(choose(None, env(), unreadable).is_ok());
        assert!(matches!(
            choose(None, None, unreadable),
            Err(RootError::CurrentDir(_))
        ));
        // What was given is kept beside the canonical root, for its spellings.
        let odd = base.join("env/../flag");
        let opened =
            open_checked(&choose(Some(&odd), None, cwd).expect("chosen"), false).expect("valid");
        assert_eq!(opened.given, odd);
        assert_eq!(opened.real(), base.join("flag"));
        // The environment's root is validated like the flag's.
        let missing = choose(None, Some(base.join("gone").into_os_string()), cwd).expect("chosen");
        assert!(matches!(
            validate(&missing, false),
            Err(RootError::Missing(_))
        ));
    }

    #[test]
    fn where_an_opened_root_is_comes_from_its_descriptor() {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = tmp.path().canonicalize().expect("c");
        std::fs::create_dir_all(base.join("real/ws")).expect("mkdir");
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).expect("symlink");
        let opened = OpenedRoot::open(&base.join("link/ws")).expect("open");
        assert_eq!(opened.real(), base.join("real/ws"));
        assert_eq!(opened.given, base.join("link/ws"));
        // Moved after the open: the descriptor says where the directory is now, not where the
        // path leads (to another directory made there since).
        let ws = opened.into_workspace();
        let id = DirId::of(&ws.root_fd()).expect("id");
        std::fs::rename(base.join("real/ws"), base.join("moved")).expect("rename");
        std::fs::create_dir(base.join("real/ws")).expect("mkdir");
        let held = ws.root_fd().try_clone_to_owned().expect("dup");
        assert_eq!(
            location(&held, id, "moved").expect("where"),
            base.join("moved")
        );
        // Removed: there is nowhere it is, and that is an error, not a name.
        std::fs::remove_dir(base.join("moved")).expect("rmdir");
        assert!(matches!(
            location(&held, id, "moved"),
            Err(RootError::Moved(_))
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
