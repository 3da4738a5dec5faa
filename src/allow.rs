//! Which roots a `--server` daemon may serve.
//!
//! In daemon mode the workspace is named by the caller, in every tool call. Without a limit the
//! caller could name `/etc`, or another workspace's `.filesystem/` store and read or forge its call
//! log and history. So the daemon is given its allowed places once, at start-up — `--allow-root`
//! (repeatable), else `FILESYSTEM_ALLOW_ROOTS` (colon-separated), else the home directory of the
//! user running it — and every per-call root must resolve, symlinks and all, to one of them or a
//! directory beneath one, and must not be or lie inside a store.
//!
//! Every root still goes through the one root opener, [`OpenedRoot::open`]: the call's root is
//! opened once, and these rules are checked on where the opened directory is, so the directory
//! checked is the directory served. This module only adds the daemon's extra rules on top.

use std::ffi::{CStr, OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use workspace::root::{self, OpenedRoot, RootError};

/// The environment variable holding the allowed places when no `--allow-root` is given.
pub const ALLOW_ROOTS_ENV: &str = "FILESYSTEM_ALLOW_ROOTS";

/// Directory names that hold the server's own state. A root that is, or lies inside, one of them
/// would let one tenant read or forge another's history, trash and call log.
pub const STORE_DIRS: [&str; 2] = workspace::guard::STATE_DIRS;

/// System trees a home directory may not be in. Service accounts often have homes such as `/`,
/// `/usr/sbin`, `/var/lib/postgresql` or `/nonexistent`; serving "the home directory" of such an
/// account would expose the system rather than a user's files, so the home default refuses them
/// and asks for an explicit `--allow-root` instead. `/root` is deliberately absent: it is a real
/// home, private to its user.
const SYSTEM_TREES: [&str; 18] = [
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev",
    "/proc", "/sys", "/run", "/var", "/opt", "/srv", "/snap", "/nix",
];

/// Directories that may not be a home themselves, though a home may lie beneath them: each is
/// shared by many users (`/home` holds every user's home, `/tmp` everyone's scratch files).
const SHARED_PARENTS: [&str; 4] = ["/home", "/tmp", "/mnt", "/media"];

/// Where the allowed places came from; named in messages so the user knows what to fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// One or more `--allow-root` flags.
    Flag,
    /// The `FILESYSTEM_ALLOW_ROOTS` environment variable.
    Env,
    /// `$HOME`, the default when neither of the above is given.
    HomeEnv,
    /// The passwd entry of the running user, when `$HOME` is unset.
    Passwd,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Flag => "--allow-root",
            Origin::Env => ALLOW_ROOTS_ENV,
            Origin::HomeEnv => "$HOME",
            Origin::Passwd => "the passwd entry of the user running the server",
        })
    }
}

/// Why the daemon refuses to start: its allowed places are unusable. Each message says which
/// setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum AllowListError {
    /// An allowed directory does not exist.
    #[error("allowed root '{dir}' (from {origin}) does not exist; create it or name an existing directory")]
    Missing { dir: String, origin: Origin },
    /// An allowed path is not a directory.
    #[error("allowed root '{dir}' (from {origin}) is not a directory; name the directory that holds the workspaces")]
    NotADirectory { dir: String, origin: Origin },
    /// An allowed directory could not be inspected.
    #[error("cannot use allowed root '{dir}' (from {origin}): {source}")]
    Io {
        dir: String,
        origin: Origin,
        source: io::Error,
    },
    /// `/` was allowed without `--allow-root-slash`.
    #[error("allowed root '/' (from {origin}) would let every call name any directory on the machine; name the directory that holds the workspaces, or add --allow-root-slash if you really mean it")]
    Slash { origin: Origin },
    /// An allowed directory is, or lies inside, a store: every root under it would be refused.
    #[error("allowed root '{dir}' (from {origin}) is inside a '{store}' store directory, which is never served; name the directory that holds the workspaces")]
    InsideStore {
        dir: String,
        origin: Origin,
        store: String,
    },
    /// The list named no directory at all (e.g. `FILESYSTEM_ALLOW_ROOTS=":"`).
    #[error("{origin} names no directory; set it to the directories that hold the workspaces, separated by ':'")]
    Empty { origin: Origin },
    /// No allow-list was given and the home default cannot be used.
    #[error("--server was started without --allow-root or {ALLOW_ROOTS_ENV}, so it would serve only roots under the home directory of the user running it, but {reason}. Start it with --allow-root DIR (repeatable) or set {ALLOW_ROOTS_ENV}=DIR[:DIR...] to the directories that hold the workspaces")]
    NoHome { reason: String },
}

/// Why one tool call's root is refused. The message is returned to the caller as the tool's
/// error, so it says what to name instead.
#[derive(Debug, thiserror::Error)]
pub enum RootRefused {
    /// The root is relative or unreadable.
    #[error(transparent)]
    Invalid(#[from] RootError),
    /// The root does not exist. (The root module's own message suggests `--root`, which a
    /// daemon's caller cannot pass.)
    #[error("root '{0}' does not exist; name the existing directory of the workspace")]
    Missing(String),
    /// The root is not a directory.
    #[error(
        "root '{0}' is not a directory; name the directory of the workspace, not a file in it"
    )]
    NotADirectory(String),
    /// The root is `/` and the daemon was not started with `--allow-root-slash`.
    #[error("root '/' is the whole filesystem and is never served unless the server is started with --allow-root / --allow-root-slash; name the workspace directory instead")]
    Slash,
    /// The root is not at or below any allowed place.
    #[error("root '{given}'{via_links} is outside the roots this server may serve ({allowed}); name a directory under one of them, or start the server with --allow-root DIR or {ALLOW_ROOTS_ENV}")]
    Outside {
        given: String,
        /// `" (once its symlinks are resolved)"` when symlinks decided it, else empty. Where the
        /// links lead is not named: like the path guard, a refusal never describes what lies
        /// outside what the caller may see.
        via_links: &'static str,
        allowed: String,
    },
    /// The root is, or lies inside, a store directory.
    #[error("root '{given}'{via_links} is inside a '{store}' store directory, which holds a workspace's own history and call log and is never served; {instead}")]
    InsideStore {
        given: String,
        via_links: &'static str,
        store: String,
        /// What to name instead: the workspace, when the caller's own spelling shows it.
        instead: String,
    },
}

/// The places a daemon may serve: canonical directories, fixed at start-up.
#[derive(Debug, Clone)]
pub struct ServedRoots {
    allowed: Vec<PathBuf>,
    origin: Origin,
    allow_slash: bool,
}

impl ServedRoots {
    /// Settles the allowed places from the command line and the environment: `--allow-root` flags
    /// win, then `FILESYSTEM_ALLOW_ROOTS`, then the home directory. Flag over environment, as with
    /// `--root` over `FILESYSTEM_ROOT`, so one command line can narrow what a shell exported.
    pub fn from_settings(flags: &[PathBuf], allow_slash: bool) -> Result<Self, AllowListError> {
        if !flags.is_empty() {
            return Self::new(flags, Origin::Flag, allow_slash);
        }
        if let Some(list) = std::env::var_os(ALLOW_ROOTS_ENV).filter(|v| !v.is_empty()) {
            return Self::new(&split_list(&list), Origin::Env, allow_slash);
        }
        Self::home(std::env::var_os("HOME"), allow_slash)
    }

    /// Allows exactly `dirs`, each canonicalised once here so per-call checks compare resolved
    /// paths with resolved paths.
    pub fn new(
        dirs: &[PathBuf],
        origin: Origin,
        allow_slash: bool,
    ) -> Result<Self, AllowListError> {
        let mut allowed = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let canonical = allowed_dir(dir, origin, allow_slash)?;
            if !allowed.contains(&canonical) {
                allowed.push(canonical);
            }
        }
        if allowed.is_empty() {
            // Only reachable through an environment variable made of colons: say so rather than
            // serve nothing (or, worse, fall back to something the user did not ask for).
            return Err(AllowListError::Empty { origin });
        }
        Ok(ServedRoots {
            allowed,
            origin,
            allow_slash,
        })
    }

    /// The home default: `$HOME` when set (it is what the user sees as their home, and a set but
    /// unusable `$HOME` is reported rather than silently replaced), else the passwd entry of the
    /// running uid. The home must be a private directory, never `/`, a system tree or a directory
    /// shared by all users.
    pub fn home(home_env: Option<OsString>, allow_slash: bool) -> Result<Self, AllowListError> {
        let (home, origin) = match home_env.filter(|h| !h.is_empty()) {
            Some(h) => (PathBuf::from(h), Origin::HomeEnv),
            None => match passwd_home() {
                Some(h) => (h, Origin::Passwd),
                None => return Err(AllowListError::NoHome {
                    reason:
                        "$HOME is not set and the user has no home directory in the passwd database"
                            .into(),
                }),
            },
        };
        let shown = home.display().to_string();
        if !home.is_absolute() {
            return Err(AllowListError::NoHome {
                reason: format!(
                    "the home directory '{shown}' (from {origin}) is not an absolute path"
                ),
            });
        }
        if let Some(why) = unusable_home(&home) {
            return Err(AllowListError::NoHome {
                reason: format!("the home directory '{shown}' (from {origin}) {why}"),
            });
        }
        // `/` is never a usable home, even with --allow-root-slash: that flag is for a user who
        // names `/` on purpose, not for a default nobody chose.
        let canonical = allowed_dir(&home, origin, false).map_err(|e| AllowListError::NoHome {
            reason: match e {
                AllowListError::Missing { .. } => {
                    format!("the home directory '{shown}' (from {origin}) does not exist")
                }
                AllowListError::NotADirectory { .. } => {
                    format!("the home directory '{shown}' (from {origin}) is not a directory")
                }
                AllowListError::Slash { .. } => {
                    format!("the home directory '{shown}' (from {origin}) is the whole filesystem")
                }
                other => other.to_string(),
            },
        })?;
        if canonical != home {
            if let Some(why) = unusable_home(&canonical) {
                return Err(AllowListError::NoHome {
                    reason: format!(
                        "the home directory '{shown}' (from {origin}) resolves to '{}', which {why}",
                        canonical.display()
                    ),
                });
            }
        }
        Ok(ServedRoots {
            allowed: vec![canonical],
            origin,
            allow_slash,
        })
    }

    /// The canonical allowed directories, for messages and the start-up banner.
    pub fn allowed(&self) -> &[PathBuf] {
        &self.allowed
    }

    /// Where the allowed directories came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Opens the root a tool call names and says whether it may be served. The root is opened
    /// once (links followed) and judged by where the opened directory is, so a symlink under an
    /// allowed directory that points elsewhere is judged by where it points, and a path swapped
    /// after the open changes nothing: the descriptor returned is the directory that was checked.
    pub fn resolve(&self, given: &str) -> Result<OpenedRoot, RootRefused> {
        let path = root::require_absolute(given)?;
        workspace::park::park(workspace::park::Point::RootOpen, path);
        let opened = match OpenedRoot::open(path) {
            Ok(o) => o,
            // Outside the allowed places, "does not exist" and "is not a directory" would tell a
            // caller about paths it may not see: there, every failure is "outside".
            Err(_) if !self.admits(&lexical(path)) => return Err(self.outside(given, "")),
            Err(RootError::Missing(_)) => return Err(RootRefused::Missing(given.to_string())),
            Err(RootError::NotADirectory(_)) => {
                return Err(RootRefused::NotADirectory(given.to_string()))
            }
            Err(e) => return Err(e.into()),
        };
        let canonical = opened.real();
        // `/` is judged here rather than by the root module so the message fits a daemon (which
        // has no --root to suggest).
        if canonical == Path::new("/") && !self.allow_slash {
            return Err(RootRefused::Slash);
        }
        // Compared with the lexically folded spelling, so `a/../b` alone does not count as links.
        let via_links = if lexical(path) == canonical {
            ""
        } else {
            " (once its symlinks are resolved)"
        };
        // Containment first: for a root outside the allowed places, nothing else is said.
        if !self.admits(canonical) {
            return Err(self.outside(given, via_links));
        }
        if let Some((store, _)) = opened.store() {
            let instead = match root::store_in(&lexical(path)) {
                Some((_, workspace)) => {
                    format!("name the workspace itself ('{}')", workspace.display())
                }
                None => "name the workspace itself, not its store".to_string(),
            };
            return Err(RootRefused::InsideStore {
                given: given.to_string(),
                via_links,
                store,
                instead,
            });
        }
        Ok(opened)
    }

    /// True when `path` is at or below an allowed directory.
    fn admits(&self, path: &Path) -> bool {
        self.allowed.iter().any(|dir| is_within(path, dir))
    }

    fn outside(&self, given: &str, via_links: &'static str) -> RootRefused {
        RootRefused::Outside {
            given: given.to_string(),
            via_links,
            allowed: self.describe(),
        }
    }

    /// The allowed directories as one human-readable list.
    pub fn describe(&self) -> String {
        self.allowed
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// True when `path` is `dir` or lies beneath it. Both must be canonical. Compared component by
/// component (what [`Path::starts_with`] does), never as strings, so `/home/a` does not admit
/// `/home/ab`.
pub fn is_within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// `path` with `.` and `..` folded without touching the filesystem (`..` at `/` stays at `/`),
/// and trailing slashes gone: the spelling a caller meant before any symlink is followed.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Splits a colon-separated list. Empty entries (a trailing colon, `a::b`) are skipped: unlike
/// `$PATH`, an empty entry must never mean "the current directory".
fn split_list(list: &OsStr) -> Vec<PathBuf> {
    list.as_bytes()
        .split(|&b| b == b':')
        .filter(|entry| !entry.is_empty())
        .map(|entry| PathBuf::from(OsStr::from_bytes(entry)))
        .collect()
}

/// Opens one allowed directory with the one root opener and returns where it is.
fn allowed_dir(dir: &Path, origin: Origin, allow_slash: bool) -> Result<PathBuf, AllowListError> {
    let shown = dir.display().to_string();
    let opened = OpenedRoot::open(dir).map_err(|e| match e {
        RootError::Missing(_) => AllowListError::Missing {
            dir: shown.clone(),
            origin,
        },
        RootError::NotADirectory(_) => AllowListError::NotADirectory {
            dir: shown.clone(),
            origin,
        },
        RootError::Io { source, .. } => AllowListError::Io {
            dir: shown.clone(),
            origin,
            source,
        },
        other => AllowListError::Io {
            dir: shown.clone(),
            origin,
            source: io::Error::other(other.to_string()),
        },
    })?;
    let canonical = opened.real().to_path_buf();
    if canonical == Path::new("/") && !allow_slash {
        return Err(AllowListError::Slash { origin });
    }
    if let Some((store, _)) = opened.store() {
        return Err(AllowListError::InsideStore {
            dir: shown,
            origin,
            store,
        });
    }
    Ok(canonical)
}

/// Why a home directory (absolute, not necessarily canonical) cannot be the default allowed
/// place, or `None` if it can.
fn unusable_home(home: &Path) -> Option<String> {
    if home == Path::new("/") {
        return Some("is the whole filesystem".into());
    }
    if let Some(tree) = SYSTEM_TREES.iter().find(|t| is_within(home, Path::new(t))) {
        return Some(format!("is in the system directory {tree}"));
    }
    if let Some(shared) = SHARED_PARENTS.iter().find(|s| home == Path::new(s)) {
        return Some(format!("is {shared}, which is shared by every user"));
    }
    None
}

/// The home directory of the running uid from the passwd database (`getpwuid_r`), for a server
/// started with no `$HOME` (some service managers start processes with an empty environment).
fn passwd_home() -> Option<PathBuf> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut buf: Vec<u8> = vec![0; 1024];
    loop {
        // SAFETY: an all-zero passwd is a valid value of this plain C struct (null pointers,
        // zero ids); getpwuid_r fills it in.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the duration of the call and `buf.len()` is the
        // true size of the buffer the strings are written into.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || found.is_null() || entry.pw_dir.is_null() {
            return None;
        }
        // SAFETY: on success pw_dir points to a NUL-terminated string inside `buf`, which is
        // alive here; the bytes are copied out before `buf` is dropped.
        let dir = unsafe { CStr::from_ptr(entry.pw_dir) };
        let dir = OsStr::from_bytes(dir.to_bytes());
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn containment_is_by_components_not_by_string_prefix() {
        assert!(is_within(Path::new("/home/a"), Path::new("/home/a")));
        assert!(is_within(Path::new("/home/a/x/y"), Path::new("/home/a")));
        assert!(!is_within(Path::new("/home/ab"), Path::new("/home/a")));
        assert!(!is_within(
            Path::new("/home/a-evil/x"),
            Path::new("/home/a")
        ));
        assert!(!is_within(Path::new("/home"), Path::new("/home/a")));
        assert!(!is_within(Path::new("/etc"), Path::new("/home/a")));
        assert!(is_within(Path::new("/anything"), Path::new("/")));
    }

    #[test]
    fn store_directories_are_found_at_any_depth() {
        assert_eq!(root::store_in(Path::new("/w/x")), None);
        assert_eq!(
            root::store_in(Path::new("/w/.filesystem")),
            Some((".filesystem".into(), PathBuf::from("/w")))
        );
        assert_eq!(
            root::store_in(Path::new("/w/a/.shelpa/x")),
            Some((".shelpa".into(), PathBuf::from("/w/a")))
        );
        assert_eq!(root::store_in(Path::new("/w/.filesystem-not")), None);
    }

    #[test]
    fn lists_skip_empty_entries() {
        assert_eq!(
            split_list(OsStr::new(":/a::/b:")),
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
    }

    #[test]
    fn homes_in_system_trees_or_shared_are_unusable() {
        for home in [
            "/",
            "/etc",
            "/usr/sbin",
            "/var/lib/postgresql",
            "/home",
            "/tmp",
        ] {
            assert!(unusable_home(Path::new(home)).is_some(), "{home}");
        }
        for home in ["/root", "/home/u", "/tmp/t", "/data/users/u", "/variable"] {
            assert!(unusable_home(Path::new(home)).is_none(), "{home}");
        }
    }

    fn served(dirs: &[&Path]) -> ServedRoots {
        let dirs: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
        ServedRoots::new(&dirs, Origin::Flag, false).expect("allowed")
    }

    #[test]
    fn roots_resolve_only_inside_allowed_places_and_outside_stores() {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = tmp.path().canonicalize().expect("canonical");
        for d in ["a/ws/.filesystem", "a/ws/.shelpa/x", "ab", "outside"] {
            std::fs::create_dir_all(base.join(d)).expect("mkdir");
        }
        std::os::unix::fs::symlink(base.join("outside"), base.join("a/link")).expect("symlink");
        let roots = served(&[&base.join("a")]);
        let ok = |p: &str| roots.resolve(base.join(p).to_str().expect("utf8"));
        assert_eq!(ok("a").expect("itself").real(), base.join("a"));
        assert_eq!(ok("a/ws").expect("below").real(), base.join("a/ws"));
        assert!(matches!(ok("ab"), Err(RootRefused::Outside { .. })));
        assert!(matches!(ok("outside"), Err(RootRefused::Outside { .. })));
        let through_link = ok("a/link");
        assert!(
            matches!(&through_link, Err(RootRefused::Outside { via_links, .. }) if !via_links.is_empty()),
            "{through_link:?}"
        );
        let target = base.join("outside").display().to_string();
        let msg = through_link
            .map_err(|e| e.to_string())
            .expect_err("refused");
        assert!(
            !msg.contains(&target),
            "the message must not say where the link leads: {msg}"
        );
        assert!(
            matches!(
                ok("a/ws/../../ab"),
                Err(RootRefused::Outside { via_links: "", .. })
            ),
            "'..' alone is not a symlink"
        );
        assert!(matches!(
            ok("a/ws/.filesystem"),
            Err(RootRefused::InsideStore { .. })
        ));
        assert!(matches!(
            ok("a/ws/.shelpa/x"),
            Err(RootRefused::InsideStore { .. })
        ));
        assert!(matches!(roots.resolve("/"), Err(RootRefused::Slash)));
        assert!(matches!(ok("a/missing"), Err(RootRefused::Missing(_))));
        // Outside the allowed places, existence is not revealed.
        assert!(matches!(ok("missing"), Err(RootRefused::Outside { .. })));
        assert!(matches!(
            roots.resolve("/no/such/dir"),
            Err(RootRefused::Outside { .. })
        ));
        assert!(matches!(
            roots.resolve("relative"),
            Err(RootRefused::Invalid(RootError::Relative(_)))
        ));
    }

    #[test]
    fn allowed_places_are_checked_at_start_up() {
        let tmp = tempfile::tempdir().expect("tmp");
        std::fs::write(tmp.path().join("f"), "x").expect("write");
        std::fs::create_dir_all(tmp.path().join("w/.filesystem")).expect("mkdir");
        let try_new = |p: PathBuf| ServedRoots::new(&[p], Origin::Env, false);
        assert!(matches!(
            try_new(tmp.path().join("nope")),
            Err(AllowListError::Missing { .. })
        ));
        assert!(matches!(
            try_new(tmp.path().join("f")),
            Err(AllowListError::NotADirectory { .. })
        ));
        assert!(matches!(
            try_new(tmp.path().join("w/.filesystem")),
            Err(AllowListError::InsideStore { .. })
        ));
        assert!(matches!(
            try_new(PathBuf::from("/")),
            Err(AllowListError::Slash { .. })
        ));
        assert!(ServedRoots::new(&[PathBuf::from("/")], Origin::Flag, true).is_ok());
    }

    #[test]
    fn the_home_default_refuses_unusable_homes() {
        for home in ["/", "/etc", "/no/such/home", "relative"] {
            let err = ServedRoots::home(Some(home.into()), true).expect_err(home);
            let msg = err.to_string();
            assert!(msg.contains("--allow-root DIR"), "{msg}");
            assert!(msg.contains(ALLOW_ROOTS_ENV), "{msg}");
        }
        let tmp = tempfile::tempdir().expect("tmp");
        let roots = ServedRoots::home(Some(tmp.path().into()), false).expect("usable");
        assert_eq!(
            roots.allowed(),
            [tmp.path().canonicalize().expect("canonical")]
        );
        assert_eq!(roots.origin(), Origin::HomeEnv);
    }
}
