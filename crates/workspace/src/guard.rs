//! The one path guard both toolsets share.
//!
//! Every path a client names passes through [`PathGuard`] before anything touches the disk. The guard
//! first folds `.` and `..` lexically and refuses anything that lands outside the root; then it walks
//! the path one component at a time (`fstatat` relative to the root's descriptor), splicing in every
//! symlink it meets and re-checking containment after each one, so a link inside the workspace that
//! points outside is never followed (dangling ones included). Containment is decided on path
//! components, never on string prefixes.
//!
//! What the guard returns is a root-relative path with every symlink spliced out. The guard only
//! decides; the [`crate::workspace`] layer acts, and it refuses every symlink it meets on such a
//! path, so a directory swapped for a symlink between the check and the act makes the call fail
//! instead of redirecting it.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::permissions::Permissions;
use crate::{temp, Workspace};

/// Directories inside the workspace that hold the tool's own state. No tool may read, write, list,
/// move or delete inside them: an agent that could edit its own audit trail or undo history could
/// erase the evidence of what it did.
pub const STATE_DIRS: [&str; 2] = [".filesystem", ".shelpa"];

/// A repository's own directory: readable by every tool, changed by none.
pub const REPOSITORY_DIR: &str = ".git";

/// How many symlinks one resolution may follow before it is treated as a loop (Linux uses 40 too).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a path was refused. Each variant carries the caller's own spelling of the path and never
/// what lies outside the root (not even a symlink's target), so error text cannot be used to probe
/// the host.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The caller sent an empty string.
    #[error("the path is empty; name a file or directory relative to the workspace root, e.g. \"src/main.rs\" (\".\" is the root itself)")]
    Empty,
    /// The path contains a NUL byte, which no file name can hold.
    #[error("the path contains a NUL byte; file names cannot contain NUL")]
    Nul,
    /// After `.`/`..` folding the path is outside the root.
    #[error("'{0}' is outside the workspace; use a path relative to the workspace root, or an absolute path inside it")]
    Outside(String),
    /// A symlink on the way points outside the root.
    #[error("'{0}' goes through a symlink that points outside the workspace, which is not followed; use the real path inside the workspace")]
    SymlinkEscape(String),
    /// The path names the tool's own state directory (at any depth).
    #[error("'{path}' is inside {dir}/, the server's own history and audit store, which no tool may touch; use the history tools (undo_file, list_trash, restore_file, search_file) instead")]
    Protected { path: String, dir: &'static str },
    /// The path names a temporary file of the server's own (see [`crate::temp`]).
    #[error("'{0}' is in the server's temporary-file namespace (names starting with '.filesystem-tmp-'), which no tool may create, read or move to; choose another name")]
    Reserved(String),
    /// A change (write, move, delete) inside a repository's `.git/`.
    #[error("'{0}' is inside .git/, which tools may read but never change (a hook written there would run on the user's next git command); use git itself for repository changes")]
    Repository(String),
    /// Symlinks chain into each other more deeply than any sane tree needs.
    #[error("'{0}' has too many levels of symbolic links")]
    SymlinkLoop(String),
    /// A change the operator's rules refuse (see [`crate::permissions`]).
    #[error("{0}")]
    ReadOnly(crate::permissions::ReadOnly),
    /// Inspecting a component failed for a reason other than "does not exist".
    #[error("could not inspect '{path}': {source}")]
    Io { path: String, source: io::Error },
}

impl GuardError {
    /// True for refusals that are about confinement (as opposed to malformed input or I/O trouble),
    /// so toolsets can map them to their `PathEscape` kind.
    pub fn is_escape(&self) -> bool {
        matches!(
            self,
            GuardError::Outside(_)
                | GuardError::SymlinkEscape(_)
                | GuardError::Protected { .. }
                | GuardError::Repository(_)
                | GuardError::SymlinkLoop(_)
        )
    }

    /// True for input that could never name a file (empty, NUL) or names one no tool may use
    /// (the server's temporaries).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            GuardError::Empty | GuardError::Nul | GuardError::Reserved(_)
        )
    }
}

/// Whether the last component of a path is followed if it is a symlink.
///
/// Readers follow it (the target is checked like any other path). Writers, movers and deleters act
/// on the link itself, so that writing through a link can never reach a file the caller did not
/// name, and deleting a link never deletes its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalLink {
    /// Follow a final symlink (reading, listing).
    Follow,
    /// Stop at a final symlink and return the link's own path (writing, moving, deleting).
    NoFollow,
}

/// A path that passed the guard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute path with every symlink resolved (except a final one under [`FinalLink::NoFollow`]).
    pub path: PathBuf,
    /// The same path relative to the root; empty for the root itself.
    pub relative: PathBuf,
}

impl Resolved {
    /// The relative path as the server shows it to clients: `.` for the root, `/`-separated.
    pub fn display(&self) -> String {
        display_relative(&self.relative)
    }

    /// True when this is the workspace root itself.
    pub fn is_root(&self) -> bool {
        self.relative.as_os_str().is_empty()
    }
}

/// Shows a root-relative path the way clients see it: `.` for the root.
pub fn display_relative(relative: &Path) -> String {
    if relative.as_os_str().is_empty() {
        ".".to_string()
    } else {
        relative.to_string_lossy().into_owned()
    }
}

/// Confines paths to one workspace root.
#[derive(Debug)]
pub struct PathGuard {
    root: PathBuf,
    /// Other absolute spellings of the root (see [`crate::root::spellings`]), accepted in client
    /// paths and in absolute symlink targets as if they were the canonical one.
    spellings: crate::root::Spellings,
    ws: Workspace,
    /// Who may write where; checked on every path resolved for a change.
    permissions: Permissions,
}

impl PathGuard {
    /// Builds a guard for `root`, which must already be canonical (see [`crate::root`]): the guard
    /// compares resolved paths against it component by component, so a non-canonical root would
    /// refuse paths that are inside.
    pub fn new(root: &Path) -> io::Result<Self> {
        Ok(Self::for_workspace(Workspace::open(root)?))
    }

    /// The guard of an opened workspace.
    pub fn for_workspace(ws: Workspace) -> Self {
        PathGuard {
            root: ws.root().to_path_buf(),
            spellings: crate::root::Spellings::default(),
            ws,
            permissions: Permissions::default(),
        }
    }

    /// The same guard, refusing every change `permissions` does not allow. Each rule directory
    /// that is a symlink inside this root also stands for where it leads (see
    /// [`Permissions::for_root`]), so a write by the real path meets the same rule.
    pub fn with_permissions(mut self, permissions: &Permissions) -> Self {
        self.permissions = permissions.for_root(|dir| {
            self.resolve(&dir.to_string_lossy())
                .ok()
                .map(|r| r.relative)
        });
        self
    }

    /// The rules this guard enforces, for the history store and tee, which check them again
    /// inside the call that acts.
    pub fn permissions(&self) -> &Permissions {
        &self.permissions
    }

    /// The same guard, also accepting absolute paths written with another spelling of the root
    /// (the root reached through a symlink). Only spellings that lead to the root belong here;
    /// [`crate::root::Spellings::of`] finds them.
    pub fn with_spellings(mut self, spellings: crate::root::Spellings) -> Self {
        self.spellings = spellings;
        self
    }

    /// `absolute` (lexically normalised) relative to the root, under the canonical spelling or
    /// another one; `None` when it is outside.
    fn inside(&self, absolute: &Path) -> Option<PathBuf> {
        match absolute.strip_prefix(&self.root) {
            Ok(rel) => Some(rel.to_path_buf()),
            Err(_) => self.spellings.strip(absolute),
        }
    }

    /// Another guard for the same root (sharing the root's descriptor), for toolsets served
    /// together.
    pub fn try_clone(&self) -> io::Result<Self> {
        let mut guard = Self::for_workspace(self.ws.clone()).with_spellings(self.spellings.clone());
        guard.permissions = self.permissions.clone();
        Ok(guard)
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace layer every operation on a resolved path goes through.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// Resolves a client path for a change (write, create, move, delete): the final symlink is
    /// not followed, nothing inside a repository's `.git/` may be changed, and the resolved path
    /// (and everything below it) must be one the operator's rules let change.
    pub fn resolve_for_change(&self, input: &str) -> Result<Resolved, GuardError> {
        let resolved = self.resolve_with(input, FinalLink::NoFollow)?;
        if resolved
            .relative
            .components()
            .any(|c| c.as_os_str() == REPOSITORY_DIR)
        {
            return Err(GuardError::Repository(input.to_string()));
        }
        self.permissions
            .check(&resolved.relative)
            .map_err(GuardError::ReadOnly)?;
        Ok(resolved)
    }

    /// Resolves a client path, following a final symlink (for reading and listing).
    pub fn resolve(&self, input: &str) -> Result<Resolved, GuardError> {
        self.resolve_with(input, FinalLink::Follow)
    }

    /// Resolves `input` for reading and opens it in one step when no symlink lies on its way,
    /// or `None` (nothing opened) when that did not work.
    ///
    /// The component walk of [`PathGuard::resolve`] exists to follow symlinks that stay inside
    /// the root; a path without any needs none of it. So the lexical step and the state-directory
    /// check run first, then one `openat2` beneath the root that refuses every symlink
    /// ([`Workspace::open_read`], the same open every read ends in). If it succeeds, no link was
    /// on the path and the kernel kept the open beneath the root: the result is the one the
    /// walk would give, without its four system calls per path. Any failure (a link on the way,
    /// nothing there, no permission) is left to the caller's full walk and open, which follows
    /// the links inside the root or reports exactly what is wrong.
    pub fn open_read_direct(
        &self,
        input: &str,
    ) -> Result<Option<(Resolved, std::fs::File)>, GuardError> {
        let relative = self.lexical(input)?;
        self.check_state_dir(&relative, input)?;
        Ok(self.ws.open_read(&relative).ok().map(|file| {
            let resolved = Resolved {
                path: self.root.join(&relative),
                relative,
            };
            (resolved, file)
        }))
    }

    /// Resolves a client path without following a final symlink (for writing, moving, deleting).
    pub fn resolve_no_follow(&self, input: &str) -> Result<Resolved, GuardError> {
        self.resolve_with(input, FinalLink::NoFollow)
    }

    /// Resolves a client path: lexical confinement first, then a component walk that follows
    /// symlinks and re-checks confinement after each one, then a check that the result is not
    /// inside the tool's own state directories.
    pub fn resolve_with(&self, input: &str, final_link: FinalLink) -> Result<Resolved, GuardError> {
        let mut relative = self.lexical(input)?;
        self.check_state_dir(&relative, input)?;

        // Walk from the root; `done` is the resolved prefix, `todo` the components still to visit.
        let mut hops = 0;
        'restart: loop {
            let mut done = PathBuf::new();
            let mut todo: Vec<OsString> = relative
                .components()
                .map(|c| c.as_os_str().to_os_string())
                .collect();
            todo.reverse();
            while let Some(name) = todo.pop() {
                let candidate = done.join(&name);
                let is_last = todo.is_empty();
                let meta = match self.ws.stat(&candidate) {
                    Ok(Some(meta)) => meta,
                    Ok(None) => {
                        // Nothing below a missing component exists, so nothing below it can be a
                        // symlink: the rest of the path is already resolved.
                        done = candidate;
                        while let Some(rest) = todo.pop() {
                            done.push(rest);
                        }
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        // Nothing below a missing component exists, so nothing below it can be a
                        // symlink: the rest of the path is already resolved.
                        done = candidate;
                        while let Some(rest) = todo.pop() {
                            done.push(rest);
                        }
                        break;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                        // A file used as a directory: the operation itself will report it.
                        done = candidate;
                        while let Some(rest) = todo.pop() {
                            done.push(rest);
                        }
                        break;
                    }
                    Err(source) => {
                        return Err(GuardError::Io {
                            path: input.to_string(),
                            source,
                        })
                    }
                };
                if !meta.is_symlink() || (is_last && final_link == FinalLink::NoFollow) {
                    done = candidate;
                    continue;
                }
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(GuardError::SymlinkLoop(input.to_string()));
                }
                let target = match self.ws.read_link(&candidate) {
                    Ok(target) => target,
                    // The link was exchanged for a real file or directory between the stat and
                    // the readlink: walk again from the start (the hop count bounds how often a
                    // racing peer can make us), rather than report an I/O error.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => continue 'restart,
                    Err(source) => {
                        return Err(GuardError::Io {
                            path: input.to_string(),
                            source,
                        })
                    }
                };
                let mut spliced = if target.is_absolute() {
                    target
                } else {
                    self.root.join(&done).join(target)
                };
                while let Some(rest) = todo.pop() {
                    spliced.push(rest);
                }
                let spliced = normalize(&spliced);
                relative = match self.inside(&spliced) {
                    Some(rel) => rel,
                    None => return Err(GuardError::SymlinkEscape(input.to_string())),
                };
                self.check_state_dir(&relative, input)?;
                continue 'restart;
            }
            self.check_state_dir(&done, input)?;
            return Ok(Resolved {
                path: self.root.join(&done),
                relative: done,
            });
        }
    }

    /// The lexical step of the guard alone: `input` (relative to the root, or absolute under any
    /// spelling of the root) as a root-relative path with `.` and `..` folded, or why not. Nothing
    /// on disk is consulted, so this says where a name points, not what is there: for finding a
    /// record kept under the name a client used (an audit mirror of a since-deleted file), never
    /// for an operation.
    pub fn lexical(&self, input: &str) -> Result<PathBuf, GuardError> {
        if input.is_empty() {
            return Err(GuardError::Empty);
        }
        if input.contains('\0') {
            return Err(GuardError::Nul);
        }
        let given = Path::new(input);
        let absolute = if given.is_absolute() {
            normalize(given)
        } else {
            normalize(&self.root.join(given))
        };
        self.inside(&absolute)
            .ok_or_else(|| GuardError::Outside(input.to_string()))
    }

    /// Opens a path that passed the guard through the workspace layer: relative to the root's
    /// descriptor, refusing every symlink on the way, so a swap between check and use makes the
    /// open fail instead of leaving the root.
    pub fn open_beneath(
        &self,
        resolved: &Resolved,
        flags: OFlags,
        mode: Mode,
    ) -> io::Result<OwnedFd> {
        self.ws.open_at(&resolved.relative, flags, mode)
    }

    /// The state directory a root-relative path lies inside, if any. Any component counts, not
    /// only the first: `.filesystem/` and `.shelpa/` are untouchable at every depth
    /// (`sub/.filesystem/x` too), because a nested copy can hold another root's state.
    pub fn is_state_path(relative: &Path) -> Option<&'static str> {
        relative
            .components()
            .find_map(|c| STATE_DIRS.iter().copied().find(|dir| c.as_os_str() == *dir))
    }

    fn check_state_dir(&self, relative: &Path, input: &str) -> Result<(), GuardError> {
        if let Some(dir) = Self::is_state_path(relative) {
            return Err(GuardError::Protected {
                path: input.to_string(),
                dir,
            });
        }
        if relative
            .components()
            .any(|c| temp::is_reserved(c.as_os_str().as_bytes()))
        {
            return Err(GuardError::Reserved(input.to_string()));
        }
        Ok(())
    }
}

/// Folds `.` and `..` without touching the filesystem. `..` at the top of an absolute path stays at
/// `/`, as the kernel does. Relative input keeps leading `..` components so the caller can see that
/// it climbs out.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                let popped = match out.components().next_back() {
                    Some(Component::Normal(_)) => out.pop(),
                    _ => false,
                };
                if !popped && !out.has_root() {
                    out.push("..");
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _tmp: tempfile::TempDir,
        base: PathBuf,
        guard: PathGuard,
    }

    /// A temp dir holding `ws/` (the root, with `src/main.rs`) and siblings `ws-evil/` and
    /// `outside/secret.txt`.
    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical tmp");
        std::fs::create_dir_all(base.join("ws/src")).expect("mkdir");
        std::fs::write(base.join("ws/src/main.rs"), "fn main() {}\n").expect("write");
        std::fs::create_dir_all(base.join("ws-evil")).expect("mkdir");
        std::fs::write(base.join("ws-evil/x"), "evil").expect("write");
        std::fs::create_dir_all(base.join("outside")).expect("mkdir");
        std::fs::write(base.join("outside/secret.txt"), "secret").expect("write");
        let guard = PathGuard::new(&base.join("ws")).expect("guard");
        Fixture {
            _tmp: tmp,
            base,
            guard,
        }
    }

    fn escape(r: Result<Resolved, GuardError>) -> bool {
        matches!(r, Err(ref e) if e.is_escape())
    }

    /// The one-step open gives what the walk gives for a path without links, and leaves every
    /// other path to the walk: a link inside the root, a link out of it, nothing there. The
    /// lexical and state-directory refusals come first, as in the walk.
    #[test]
    fn the_direct_open_agrees_with_the_walk_or_steps_aside() {
        use std::io::Read;
        let f = fixture();
        let root = f.base.join("ws");
        symlink("src/main.rs", root.join("alias")).expect("link");
        symlink(f.base.join("outside/secret.txt"), root.join("leak")).expect("link");
        std::fs::create_dir_all(root.join(".filesystem")).expect("mkdir");
        std::fs::write(root.join(".filesystem/x"), "state").expect("write");

        for input in [
            "src/main.rs",
            "./src/../src/main.rs",
            &format!("{}/src/main.rs", root.display()),
        ] {
            let (direct, mut file) = f
                .guard
                .open_read_direct(input)
                .expect("no guard error")
                .expect("opened in one step");
            assert_eq!(direct, f.guard.resolve(input).expect("walk"), "{input}");
            let mut text = String::new();
            file.read_to_string(&mut text).expect("read");
            assert_eq!(text, "fn main() {}\n");
        }
        for input in ["alias", "leak", "missing.txt", "src/main.rs/x"] {
            assert!(
                f.guard
                    .open_read_direct(input)
                    .expect("no guard error")
                    .is_none(),
                "{input} must go through the walk"
            );
        }
        assert!(matches!(
            f.guard.open_read_direct(".filesystem/x"),
            Err(GuardError::Protected { .. })
        ));
        assert!(
            matches!(f.guard.open_read_direct("../outside/secret.txt"), Err(ref e) if e.is_escape())
        );
    }

    #[test]
    fn plain_relative_and_absolute_paths_inside_resolve() {
        let f = fixture();
        let r = f.guard.resolve("src/main.rs").expect("inside");
        assert_eq!(r.relative, PathBuf::from("src/main.rs"));
        let abs = f.base.join("ws/src/main.rs");
        let r2 = f
            .guard
            .resolve(abs.to_str().expect("utf8"))
            .expect("inside");
        assert_eq!(r, r2);
        assert!(f.guard.resolve(".").expect("root").is_root());
        assert!(f
            .guard
            .resolve(f.base.join("ws").to_str().expect("utf8"))
            .expect("root")
            .is_root());
    }

    #[test]
    fn traversal_is_refused() {
        let f = fixture();
        for p in [
            "../x",
            "a/../../x",
            "src/../../outside/secret.txt",
            "./../../etc/passwd",
            "..",
        ] {
            assert!(escape(f.guard.resolve(p)), "{p} must be refused");
        }
        let deep = format!("{}{}", "a/".repeat(1000), "../".repeat(1001));
        assert!(escape(f.guard.resolve(&deep)));
        let deep_ok = format!("{}{}x", "a/".repeat(50), "../".repeat(50));
        assert_eq!(
            f.guard.resolve(&deep_ok).expect("stays inside").relative,
            PathBuf::from("x")
        );
    }

    #[test]
    fn traversal_that_comes_back_inside_is_allowed() {
        let f = fixture();
        let p = f.base.join("ws/../ws/src/main.rs");
        let r = f.guard.resolve(p.to_str().expect("utf8")).expect("inside");
        assert_eq!(r.relative, PathBuf::from("src/main.rs"));
    }

    #[test]
    fn absolute_paths_outside_and_sibling_prefixes_are_refused() {
        let f = fixture();
        for p in [
            "/etc/passwd".to_string(),
            "/".to_string(),
            f.base.to_string_lossy().into_owned(),
            f.base.join("ws-evil/x").to_string_lossy().into_owned(),
            format!("{}-evil", f.base.join("ws").display()),
            f.base.join("wsx").to_string_lossy().into_owned(),
        ] {
            assert!(escape(f.guard.resolve(&p)), "{p} must be refused");
        }
    }

    #[test]
    fn symlink_inside_pointing_outside_is_refused_for_files_dirs_chains_and_dangling() {
        let f = fixture();
        let ws = f.base.join("ws");
        symlink(f.base.join("outside/secret.txt"), ws.join("file-link")).expect("link");
        symlink(f.base.join("outside"), ws.join("dir-link")).expect("link");
        symlink("file-link", ws.join("chain2")).expect("link");
        symlink("chain2", ws.join("chain3")).expect("link");
        symlink(f.base.join("outside/missing"), ws.join("dangling-out")).expect("link");
        symlink("../outside/secret.txt", ws.join("rel-out")).expect("link");
        for p in [
            "file-link",
            "dir-link",
            "dir-link/secret.txt",
            "dir-link/new-file",
            "chain3",
            "dangling-out",
            "rel-out",
        ] {
            assert!(escape(f.guard.resolve(p)), "{p} must be refused");
        }
        // Not following the final link is fine: the link itself lives inside.
        assert_eq!(
            f.guard
                .resolve_no_follow("file-link")
                .expect("link itself")
                .relative,
            PathBuf::from("file-link")
        );
        // But a link in the middle is always followed, so this still escapes.
        assert!(escape(f.guard.resolve_no_follow("dir-link/secret.txt")));
    }

    #[test]
    fn symlink_inside_pointing_inside_is_followed() {
        let f = fixture();
        let ws = f.base.join("ws");
        symlink("src", ws.join("code")).expect("link");
        symlink(ws.join("src/main.rs"), ws.join("abs-main")).expect("link");
        symlink("missing-target", ws.join("dangling-in")).expect("link");
        assert_eq!(
            f.guard.resolve("code/main.rs").expect("inside").relative,
            PathBuf::from("src/main.rs")
        );
        assert_eq!(
            f.guard.resolve("abs-main").expect("inside").relative,
            PathBuf::from("src/main.rs")
        );
        assert_eq!(
            f.guard.resolve("dangling-in").expect("inside").relative,
            PathBuf::from("missing-target")
        );
    }

    #[test]
    fn symlink_loops_are_refused() {
        let f = fixture();
        let ws = f.base.join("ws");
        symlink("loop-b", ws.join("loop-a")).expect("link");
        symlink("loop-a", ws.join("loop-b")).expect("link");
        assert!(matches!(
            f.guard.resolve("loop-a"),
            Err(GuardError::SymlinkLoop(_))
        ));
    }

    #[test]
    fn a_symlinked_root_is_canonicalised_by_the_caller_and_then_works() {
        let f = fixture();
        let link = f.base.join("ws-link");
        symlink(f.base.join("ws"), &link).expect("link");
        let canonical = link.canonicalize().expect("canonical");
        let guard = PathGuard::new(&canonical).expect("guard");
        assert_eq!(guard.root(), f.base.join("ws"));
        // Without the link's spelling registered it is outside the canonical root lexically:
        // refused, never followed.
        let via_link = link.join("src/main.rs");
        assert!(escape(guard.resolve(via_link.to_str().expect("utf8"))));
        assert!(guard.resolve("src/main.rs").is_ok());

        // Registered as a spelling of the root, it is rewritten to the root, not followed.
        let guard = guard.with_spellings(crate::root::Spellings::of(&link, &canonical));
        let resolved = guard
            .resolve(via_link.to_str().expect("utf8"))
            .expect("the root's other spelling is inside");
        assert_eq!(resolved.relative, Path::new("src/main.rs"));
        // An absolute symlink target written with that spelling stays inside too.
        symlink(link.join("src"), f.base.join("ws/src-abs")).expect("link");
        assert_eq!(
            guard.resolve("src-abs/main.rs").expect("inside").relative,
            Path::new("src/main.rs")
        );
        // A sibling that merely shares the spelling's prefix is still outside, and so is a
        // climb out of it.
        std::fs::create_dir(f.base.join("ws-link-evil")).expect("mkdir");
        for outside in [
            f.base.join("ws-link-evil/x"),
            link.join("../ws-link-evil/x"),
            link.join(".."),
        ] {
            assert!(escape(guard.resolve(outside.to_str().expect("utf8"))));
        }
        // The tool's own state is refused under either spelling.
        assert!(guard
            .resolve(link.join(".filesystem/x").to_str().expect("utf8"))
            .is_err());
    }

    #[test]
    fn nul_and_empty_are_invalid_input() {
        let f = fixture();
        assert!(matches!(f.guard.resolve(""), Err(GuardError::Empty)));
        assert!(matches!(f.guard.resolve("a\0b"), Err(GuardError::Nul)));
        assert!(f
            .guard
            .resolve("a\0b")
            .err()
            .is_some_and(|e| e.is_invalid_input()));
    }

    #[test]
    fn state_directories_are_refused_however_they_are_reached() {
        let f = fixture();
        let ws = f.base.join("ws");
        std::fs::create_dir_all(ws.join(".filesystem")).expect("mkdir");
        std::fs::create_dir_all(ws.join(".shelpa")).expect("mkdir");
        symlink(".filesystem", ws.join("hist")).expect("link");
        for p in [
            ".filesystem",
            ".filesystem/x",
            ".shelpa/notes.txt",
            "src/../.shelpa",
            "./.filesystem/.moves",
            "hist",
            "hist/x",
            "docs/.shelpa",
            "sub/.filesystem/x",
            "a/b/.filesystem/x",
            "a/.shelpa/y/z",
        ] {
            assert!(
                matches!(f.guard.resolve(p), Err(GuardError::Protected { .. })),
                "{p} must be refused"
            );
        }
        // Names that merely start like the state dirs are ordinary.
        assert!(f.guard.resolve(".filesystem-notes").is_ok());
        assert!(f.guard.resolve("docs/.shelpa-old").is_ok());
    }

    #[test]
    fn dot_names_and_percent_encodings_are_ordinary_names() {
        let f = fixture();
        for p in [
            "..test",
            "test..",
            "te..st",
            "...",
            "....",
            "%2e%2e",
            "%2e%2e/x",
            "file%20name",
        ] {
            let r = f.guard.resolve(p).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(r.relative, PathBuf::from(p));
        }
    }

    #[test]
    fn messages_never_mention_what_is_outside() {
        let f = fixture();
        let ws = f.base.join("ws");
        symlink(f.base.join("outside/secret.txt"), ws.join("leak")).expect("link");
        let msg = f.guard.resolve("leak").expect_err("refused").to_string();
        assert!(!msg.contains("outside/secret"), "{msg}");
        assert!(!msg.contains(f.base.to_string_lossy().as_ref()), "{msg}");
    }

    #[test]
    fn open_beneath_refuses_a_symlink_swapped_in_after_the_check() {
        let f = fixture();
        let ws = f.base.join("ws");
        std::fs::create_dir(ws.join("dir")).expect("mkdir");
        std::fs::write(ws.join("dir/f"), "x").expect("write");
        std::fs::write(f.base.join("outside/f"), "secret").expect("write");
        let checked = f.guard.resolve("dir/f").expect("inside");
        // The race: the directory becomes a link to the outside after the guard said yes.
        std::fs::remove_dir_all(ws.join("dir")).expect("rm");
        symlink(f.base.join("outside"), ws.join("dir")).expect("link");
        let opened = f
            .guard
            .open_beneath(&checked, OFlags::RDONLY, Mode::empty());
        assert!(opened.is_err(), "the kernel must refuse to leave the root");
    }

    #[test]
    fn temporaries_are_reserved_and_git_is_read_only() {
        let f = fixture();
        for p in [
            ".filesystem-tmp-abc123",
            "src/.filesystem-tmp-x",
            ".filesystem-tmp-",
        ] {
            assert!(
                matches!(f.guard.resolve(p), Err(GuardError::Reserved(_))),
                "{p}"
            );
        }
        std::fs::create_dir_all(f.base.join("ws/.git/hooks")).expect("mkdir");
        assert!(f.guard.resolve(".git/config").is_ok());
        for p in [".git", ".git/hooks/pre-commit", "sub/.git/x"] {
            assert!(
                matches!(
                    f.guard.resolve_for_change(p),
                    Err(GuardError::Repository(_))
                ),
                "{p}"
            );
        }
        assert!(f.guard.resolve_for_change("src/.gitignore").is_ok());
    }

    #[test]
    fn normalize_folds_dots_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../..")), PathBuf::from("/"));
        assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
    }
}
