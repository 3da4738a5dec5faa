//! The private scratch folder of one pipeline call (`shelpa-home-*` in the system's temporary
//! directory), and the start-up sweep that removes those of servers that ended without removing
//! their own.
//!
//! Every stage gets the folder as its `HOME` and `TMPDIR` (sort's spill files land there), and
//! the call removes it when it ends. A server that is killed cannot, so each live folder is
//! marked: the server holds an exclusive `flock` on the folder itself for as long as the call
//! runs. The lock is on the directory, where no stage can reach it, and the kernel drops it when
//! the server's process ends however it ends. The sweep, run once when the pipe mode starts,
//! removes only folders of this user, with this prefix, that nobody holds: never the folder of a
//! live call of a concurrent server.
//!
//! A sweep may take a folder between its creation and its lock. The creator checks, once it holds
//! the lock, that the name still leads to the folder it locked, and otherwise starts over with a
//! new one.
//!
//! All of it goes through the workspace layer, with the temporary directory as its root: nothing
//! is opened by absolute path and no symlink is followed. The fence lets stages create only
//! regular files in the folder, so removing it is one flat pass; a deeper tree (a kernel without
//! Landlock) is removed iteratively, to a bounded depth.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Once;

use rustix::fs::FlockOperation;

use workspace::{Dir, Stat, Workspace};

/// The name prefix of every scratch folder.
pub const PREFIX: &str = "shelpa-home-";

/// Deepest tree inside a scratch folder that is removed; anything deeper is left (and reported).
const MAX_DEPTH: usize = 64;

/// How often a fresh folder is made again after losing it to a concurrent sweep.
const ATTEMPTS: usize = 8;

/// A live scratch folder: locked while this value exists, removed when it is dropped.
pub struct Home {
    path: PathBuf,
    name: OsString,
    parent: Dir,
    /// The folder itself; its descriptor holds the lock.
    dir: Dir,
}

/// The system's temporary directory as a workspace root (the layer needs it canonical).
// By name, once per call: the system's temporary directory is the server's own, outside every
// workspace, and everything in it is then done through the descriptor this opens.
#[allow(clippy::disallowed_methods)]
fn temp_root() -> io::Result<Workspace> {
    let tmp = std::env::temp_dir().canonicalize()?;
    Workspace::open(&tmp)
}

fn same_file(a: &Stat, b: &Stat) -> bool {
    a.dev == b.dev && a.ino == b.ino
}

/// Takes the lock on `dir` without waiting; false when someone else holds it.
fn try_lock(dir: &Dir) -> io::Result<bool> {
    match rustix::fs::flock(dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// True when `name` in `parent` is still the directory `dir` is open on.
fn still_there(parent: &Dir, name: &OsStr, dir: &Dir) -> io::Result<bool> {
    let mine = Stat::of(dir)?;
    Ok(mine.nlink > 0 && parent.stat(name)?.is_some_and(|s| same_file(&s, &mine)))
}

impl Home {
    /// Creates a fresh folder (mode 0700, a random name) in the system's temporary directory and
    /// takes its lock.
    pub fn create() -> io::Result<Home> {
        Home::create_in(&temp_root()?)
    }

    /// [`Home::create`] in the directory `root` is open on.
    pub fn create_in(root: &Workspace) -> io::Result<Home> {
        let parent = root.dir(Path::new(""))?;
        for _ in 0..ATTEMPTS {
            // tempfile picks the name and creates the folder 0700 in one step; its own removal
            // (recursive, by path) is switched off: the folder is removed below, by descriptor.
            // By name, in the system's temporary directory (the server's own, outside every
            // workspace): the folder is then opened beneath `parent` and kept only if it is the
            // one this name still leads to once it is locked.
            #[allow(clippy::disallowed_methods)]
            let path = tempfile::Builder::new()
                .prefix(PREFIX)
                .tempdir_in(root.root())?
                .keep();
            let Some(name) = path.file_name().map(OsStr::to_os_string) else {
                continue;
            };
            let dir = match parent.subdir(&name) {
                Ok(dir) => dir,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            // A concurrent sweep holds it (it found the folder unlocked): it is being removed.
            if !try_lock(&dir)? {
                continue;
            }
            if !still_there(&parent, &name, &dir)? {
                continue;
            }
            return Ok(Home {
                path,
                name,
                parent,
                dir,
            });
        }
        Err(io::Error::other(
            "could not create a scratch folder in the temporary directory: it kept being removed",
        ))
    }

    /// The folder's absolute path, for the stages' `HOME` and `TMPDIR` and the fence's rule.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder's open directory, which names it in the fence's rule without its path.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Bytes in the regular files directly in the folder (where stages put their scratch files).
    pub fn size(&self) -> u64 {
        self.dir.entries().map_or(0, |entries| {
            entries
                .iter()
                .filter(|e| e.stat.is_file())
                .map(|e| e.stat.size)
                .sum()
        })
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        // Emptied while still locked, so no sweep can take it half-removed.
        if empty(&self.dir).is_ok()
            && still_there(&self.parent, &self.name, &self.dir).unwrap_or(false)
        {
            let _ = self.parent.rmdir(&self.name);
        }
    }
}

/// Removes everything inside `top`, deepest first, without recursion: a stack of the open
/// subdirectories on the current path, at most [`MAX_DEPTH`] of them.
fn empty(top: &Dir) -> io::Result<()> {
    let mut path: Vec<(Dir, OsString)> = Vec::new();
    loop {
        let current = path.last().map_or(top, |(dir, _)| dir);
        let mut deeper = None;
        for entry in current.entries()? {
            if entry.stat.is_dir() {
                deeper = Some(entry.name);
                break;
            }
            match current.unlink(&entry.name) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        match deeper {
            Some(name) => {
                if path.len() >= MAX_DEPTH {
                    return Err(io::Error::other(format!(
                        "a scratch folder is nested more than {MAX_DEPTH} deep; it was left in place"
                    )));
                }
                let sub = current.subdir(&name)?;
                path.push((sub, name));
            }
            None => {
                let Some((_, name)) = path.pop() else {
                    return Ok(());
                };
                let parent = path.last().map_or(top, |(dir, _)| dir);
                match parent.rmdir(&name) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
        }
    }
}

/// Removes the scratch folders of this user in the temporary directory whose lock nobody holds:
/// those of calls whose server ended without removing them. Returns how many were removed.
pub fn sweep() -> io::Result<usize> {
    sweep_in(&temp_root()?)
}

/// [`sweep`] in the directory `root` is open on.
pub fn sweep_in(root: &Workspace) -> io::Result<usize> {
    let parent = root.dir(Path::new(""))?;
    let me = rustix::process::geteuid();
    let mut removed = 0;
    for entry in parent.entries()? {
        let ours = entry.name.to_str().is_some_and(|n| n.starts_with(PREFIX));
        if !ours || !entry.stat.is_dir() {
            continue;
        }
        // Anything may happen to one folder (another sweep, a racing server); the rest go on.
        let _ = remove_if_dead(&parent, &entry.name, me).map(|gone| removed += usize::from(gone));
    }
    Ok(removed)
}

/// Removes the folder `name` if it belongs to `owner` and is not locked; true when removed.
fn remove_if_dead(parent: &Dir, name: &OsStr, owner: rustix::process::Uid) -> io::Result<bool> {
    let dir = parent.subdir(name)?;
    if rustix::fs::fstat(&dir)?.st_uid != owner.as_raw() {
        return Ok(false);
    }
    if !try_lock(&dir)? || !still_there(parent, name, &dir)? {
        return Ok(false);
    }
    empty(&dir)?;
    parent.rmdir(name)?;
    Ok(true)
}

/// Runs [`sweep`] once per process, on its own thread, so that starting the server does not wait
/// for it; only a failure to look is reported (on stderr).
pub fn sweep_in_background() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("shelpa-sweep".into())
            .spawn(|| {
                // Quiet when it works: a one-off call's stderr is its result. What it removed is
                // only ever debris of processes that are gone.
                if let Err(e) = sweep() {
                    eprintln!("filesystem: could not look for old scratch folders: {e}");
                }
            });
    });
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// A private temporary directory (a sweep of the shared one could take the folders of
    /// servers of other builds, which do not lock theirs).
    fn private_tmp() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = Workspace::open(&tmp.path().canonicalize().expect("canonical")).expect("open");
        (tmp, ws)
    }

    #[test]
    fn a_live_folder_survives_a_sweep_and_a_dead_one_does_not() {
        let (tmp, root) = private_tmp();
        let live = Home::create_in(&root).expect("create");
        std::fs::write(live.path().join("spill"), b"data").expect("write");
        // A folder of a server that ended: nobody holds its lock.
        let dead = tmp.path().join(format!("{PREFIX}dead"));
        std::fs::create_dir(&dead).expect("create");
        std::fs::write(dead.join("spill"), b"data").expect("write");
        // Not ours by name: left alone.
        let other = tmp.path().join("other-home-x");
        std::fs::create_dir(&other).expect("create");
        assert_eq!(sweep_in(&root).expect("sweep"), 1);
        assert!(
            live.path().join("spill").exists(),
            "a live folder was swept"
        );
        assert!(!dead.exists(), "a dead folder was left");
        assert!(other.exists(), "a folder of another program was swept");
        let path = live.path().to_path_buf();
        drop(live);
        assert!(!path.exists(), "a finished call left its folder");
    }

    #[test]
    fn removal_is_iterative_and_bounded() {
        let (_tmp, root) = private_tmp();
        let home = Home::create_in(&root).expect("create");
        let mut deep = home.path().to_path_buf();
        for _ in 0..10 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).expect("mkdir");
        std::fs::write(deep.join("f"), b"x").expect("write");
        let path = home.path().to_path_buf();
        drop(home);
        assert!(!path.exists());
    }
}
