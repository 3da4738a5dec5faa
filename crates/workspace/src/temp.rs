//! The one temporary-file scheme of the whole program, and the registry that lets the next
//! server clear away the temporaries a crashed one left.
//!
//! Every atomic replacement (a tool's write, a snapshot in the history store, tee's target and
//! mirror, `audit restore`) writes a temporary beside its target and renames it into place.
//! Temporaries are named `.filesystem-tmp-` followed by the writing handle's token and random
//! characters. The guard refuses every path with a component that starts with [`TEMP_PREFIX`],
//! for reading, writing, moving and listing, so no tool can create one, move a file to one, read
//! a half-written one, or make a user's file look like a leftover.
//!
//! # Crash leftovers
//!
//! A process killed between creating a temporary and renaming it leaves the temporary behind, in
//! the user's workspace. Finding such files by walking the workspace at start-up would cost time
//! in proportion to its size on every start, so each workspace handle that makes temporaries
//! keeps a *registry* instead: `.filesystem/.live/<token>`, a file that lists (NUL-terminated,
//! root-relative) every directory the handle has made a temporary in, locked with `flock` for as
//! long as the handle lives and removed when it is dropped. A lock that is free therefore means
//! its owner is gone. At start-up a server takes every registry whose lock it can get, removes
//! the temporaries carrying that registry's token from the directories it lists, and then the
//! registry; a registry whose lock is held belongs to a live server and is left alone, and so
//! are its temporaries, which carry another token. The token in the name is what proves a
//! temporary was made by the dead handle, so even one that had already been given its real
//! permission bits (a crash between `fchmod` and `rename`) is removed; a file of the old shape
//! (six random characters, no token) is only ever cleared by `check --repair`.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::{Dir, Workspace};

/// The name prefix of every temporary. Reserved: the guard refuses any path component that
/// starts with it.
pub const TEMP_PREFIX: &str = ".filesystem-tmp-";

/// How many random characters end a temporary's name.
pub const TEMP_RANDOM_LEN: usize = 6;

/// How many characters the token of the handle that made a temporary has (it comes between the
/// prefix and the random part, and names that handle's registry).
pub const TOKEN_LEN: usize = 12;

/// The store directory the registries live in (every mode uses the same one, so whichever mode
/// starts next clears what any mode left).
const STORE_DIR: &str = ".filesystem";

/// The directory inside `.filesystem/` that holds the registries of live handles.
pub const LIVE_DIR: &str = ".live";

/// How many registries one start-up sweep looks at; the rest wait for the next start. Only
/// crashed processes leave registries, so this is never reached in practice, but a planted
/// directory of a million names must not stall a start.
pub const SWEEP_MAX_REGISTRIES: usize = 256;

/// How much of a registry a sweep reads (a handle lists each directory once).
const REGISTRY_MAX_BYTES: u64 = 4 * 1024 * 1024;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// The root-relative directory that holds the registries.
pub fn live_dir() -> PathBuf {
    Path::new(STORE_DIR).join(LIVE_DIR)
}

/// True when `name` has exactly the shape of a temporary: the prefix, then either a token and
/// [`TEMP_RANDOM_LEN`] characters, or (as earlier versions named them) the random characters
/// alone, all ASCII letters or digits. `check` uses it to recognise leftovers of an interrupted
/// write.
pub fn is_temp_name(name: &[u8]) -> bool {
    match name.strip_prefix(TEMP_PREFIX.as_bytes()) {
        Some(rest) => {
            (rest.len() == TEMP_RANDOM_LEN || rest.len() == TOKEN_LEN + TEMP_RANDOM_LEN)
                && rest.iter().all(u8::is_ascii_alphanumeric)
        }
        None => false,
    }
}

/// The token of the handle that made the temporary `name`, for names of the current shape.
pub fn temp_owner(name: &[u8]) -> Option<&[u8]> {
    let rest = name.strip_prefix(TEMP_PREFIX.as_bytes())?;
    (is_temp_name(name) && rest.len() == TOKEN_LEN + TEMP_RANDOM_LEN).then(|| &rest[..TOKEN_LEN])
}

/// True when an entry is provably a temporary this program left: the name has the exact shape,
/// and the file still has the permission bits `0000` every temporary is created with (its real
/// bits are only set right before it is renamed into place) and a single link. A user's file that
/// merely has such a name is never taken for one.
pub fn is_leftover(name: &[u8], stat: &super::Stat) -> bool {
    is_temp_name(name) && stat.is_file() && stat.mode == 0 && stat.nlink == 1
}

/// True when a path component is in the reserved temporary namespace (any name that starts with
/// the prefix, not only the exact shape): what the guard refuses.
pub fn is_reserved(name: &[u8]) -> bool {
    name.starts_with(TEMP_PREFIX.as_bytes())
}

/// True for a name a registry could have: a token.
fn is_token(name: &[u8]) -> bool {
    name.len() == TOKEN_LEN && name.iter().all(u8::is_ascii_alphanumeric)
}

/// `n` characters from [`ALPHABET`]. Creation is `O_CREAT | O_EXCL`, so names need to be
/// unlikely to collide, not unguessable; a collision only costs another try.
fn random_chars(n: usize) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut out = String::with_capacity(n);
    while out.len() < n {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u32(std::process::id());
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            hasher.write_u128(t.as_nanos());
        }
        let mut bits = hasher.finish();
        // 62^10 < 2^64: ten characters per hash, all drawn from its bits.
        for _ in 0..10.min(n - out.len()) {
            out.push(ALPHABET[(bits % ALPHABET.len() as u64) as usize] as char);
            bits /= ALPHABET.len() as u64;
        }
    }
    out
}

/// A fresh token for a workspace handle.
pub fn fresh_token() -> String {
    random_chars(TOKEN_LEN)
}

/// A fresh candidate name for a temporary of the handle with `token`.
pub fn fresh_name(token: &str) -> String {
    let mut name = String::with_capacity(TEMP_PREFIX.len() + TOKEN_LEN + TEMP_RANDOM_LEN);
    name.push_str(TEMP_PREFIX);
    name.push_str(token);
    name.push_str(&random_chars(TEMP_RANDOM_LEN));
    name
}

/// One workspace handle's registry of the directories it made temporaries in (see the module
/// documentation). Created on the first temporary, so a handle that only reads writes nothing.
#[derive(Debug, Default)]
pub(super) struct Live {
    token: OnceLock<String>,
    state: Mutex<LiveState>,
}

#[derive(Debug, Default)]
enum LiveState {
    /// No temporary made yet.
    #[default]
    Unopened,
    /// The registry is open and locked; `dirs` are already listed in it.
    Open { file: File, dirs: HashSet<PathBuf> },
    /// The registry could not be made (say `.filesystem` is a file): temporaries are still made,
    /// and a crash's leftovers are then left to `check --repair`.
    Unavailable,
}

impl Live {
    /// This handle's token.
    pub(super) fn token(&self) -> &str {
        self.token.get_or_init(fresh_token)
    }

    /// Lists `dir` (root-relative) in the registry before a temporary is made there. Never
    /// fails: a registry that cannot be kept only means leftovers of a crash are not cleared
    /// automatically, which must not stop a write.
    pub(super) fn register(&self, ws: &Workspace, dir: &Path) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if matches!(*state, LiveState::Unopened) {
            *state = match self.open(ws) {
                Ok(file) => LiveState::Open {
                    file,
                    dirs: HashSet::new(),
                },
                Err(e) => {
                    eprintln!(
                        "filesystem: cannot keep a registry of temporary files in {}: {e}; the leftovers of a crash will not be cleared at the next start (`filesystem check --repair` clears them)",
                        live_dir().display()
                    );
                    LiveState::Unavailable
                }
            };
        }
        if let LiveState::Open { file, dirs } = &mut *state {
            if !dirs.contains(dir) {
                let mut entry = dir.as_os_str().as_bytes().to_vec();
                entry.push(0);
                // One write on an O_APPEND descriptor: a crash leaves the entry whole or absent,
                // and absent only if the temporary was never made either.
                if file.write_all(&entry).is_ok() {
                    dirs.insert(dir.to_path_buf());
                }
            }
        }
    }

    /// Creates (or, after a sweep removed it, recreates) this handle's registry and locks it.
    fn open(&self, ws: &Workspace) -> io::Result<File> {
        ws.create_dirs(&live_dir())?;
        let dir = ws.dir(&live_dir())?;
        let name = OsStr::new(self.token());
        for _ in 0..8 {
            let file = dir.open_regular(
                name,
                OFlags::RDWR | OFlags::APPEND | OFlags::CREATE,
                Mode::from_raw_mode(0o600),
            )?;
            rustix::fs::flock(&file, FlockOperation::LockExclusive)?;
            // A sweep may have taken the file in the instant between its creation and the
            // lock, found it empty and removed it: only a locked file that still has the name
            // is a registry.
            if same_file(&dir, name, &file) {
                return Ok(file);
            }
        }
        Err(io::Error::other(
            "the registry kept being removed while it was being created",
        ))
    }

    /// Called when the handle is dropped: the registry goes (its lock with it), unless a
    /// temporary of this handle may still be on disk.
    pub(super) fn close(&self, ws_root: std::os::fd::BorrowedFd<'_>, keep: bool) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if let LiveState::Open { file, .. } = std::mem::take(&mut *state) {
            if !keep {
                if let Ok(fd) = super::beneath::open_beneath(
                    ws_root,
                    &live_dir(),
                    OFlags::RDONLY | OFlags::DIRECTORY,
                    Mode::empty(),
                ) {
                    let dir = Dir::bare(fd);
                    let name = OsStr::new(self.token());
                    if same_file(&dir, name, &file) {
                        let _ = dir.unlink(name);
                    }
                }
            }
            drop(file);
        }
    }
}

/// True when `name` in `dir` is the very file `file` is open on.
fn same_file(dir: &Dir, name: &OsStr, file: &File) -> bool {
    match (dir.stat(name), super::Stat::of(file)) {
        (Ok(Some(named)), Ok(open)) => named.dev == open.dev && named.ino == open.ino,
        _ => false,
    }
}

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// Registries of handles that are gone, cleared and removed.
    pub registries: usize,
    /// Temporaries removed.
    pub removed: usize,
    /// Registries left alone because their handle is alive.
    pub live: usize,
}

impl Workspace {
    /// Clears the temporaries of handles that are gone (see [`temp`](self)): what a server does
    /// as it starts. Costs one failed open when there is nothing to do; never touches a
    /// temporary of a live handle, whatever process it is in.
    pub fn sweep_leftovers(&self) -> io::Result<SweepReport> {
        let mut report = SweepReport::default();
        let dir = match self.dir(&live_dir()) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(report),
            Err(e) => return Err(e),
        };
        let own = self.inner.live.token.get().map(String::as_bytes);
        for name in dir.names(SWEEP_MAX_REGISTRIES)? {
            let bytes = name.as_bytes();
            if !is_token(bytes) || Some(bytes) == own {
                continue;
            }
            match self.sweep_registry(&dir, &name)? {
                Some(n) => {
                    report.registries += 1;
                    report.removed += n;
                }
                None => report.live += 1,
            }
        }
        Ok(report)
    }

    /// Whether the handle that made the temporary `name` is still running: `Some(true)` while
    /// its registry is locked (a write of a live server: leave it alone), `Some(false)` when its
    /// handle is gone, `None` for a name without a token (made by an earlier version). For
    /// `check`, which must not take a live server's temporary for a leftover.
    pub fn temp_owner_alive(&self, name: &[u8]) -> Option<bool> {
        let token = temp_owner(name)?;
        if Some(token) == self.inner.live.token.get().map(String::as_bytes) {
            return Some(true);
        }
        let Ok(dir) = self.dir(&live_dir()) else {
            return Some(false);
        };
        let Ok(file) = dir.open_regular(OsStr::from_bytes(token), OFlags::RDONLY, Mode::empty())
        else {
            return Some(false);
        };
        // Taking the lock only to learn it was free; closing the file gives it back.
        Some(matches!(
            rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared),
            Err(Errno::WOULDBLOCK)
        ))
    }

    /// Clears one registry if its handle is gone: `Some(temporaries removed)`, or `None` when
    /// the handle is alive (or the entry is not a registry this program would have made).
    fn sweep_registry(&self, dir: &Dir, name: &OsStr) -> io::Result<Option<usize>> {
        let mut file = match dir.open_regular(name, OFlags::RDWR, Mode::empty()) {
            Ok(f) => f,
            // Gone meanwhile (swept by another server), or not a regular file (`check` reports
            // that): nothing to do here.
            Err(_) => return Ok(None),
        };
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(Errno::WOULDBLOCK) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        if !same_file(dir, name, &file) {
            return Ok(None);
        }
        let mut listed = Vec::new();
        (&mut file)
            .take(REGISTRY_MAX_BYTES)
            .read_to_end(&mut listed)?;
        let token = name.as_bytes();
        let mut removed = 0;
        // Only whole entries: a crash in the middle of one leaves a tail without its NUL.
        let whole = match listed.iter().rposition(|&b| b == 0) {
            Some(end) => &listed[..end],
            None => &[][..],
        };
        if !listed.is_empty() {
            for entry in whole.split(|&b| b == 0) {
                removed += self.clear_dir(Path::new(OsStr::from_bytes(entry)), token);
            }
        }
        dir.unlink(name)?;
        Ok(Some(removed))
    }

    /// Removes the temporaries of `token` from the directory `rel`; returns how many. A
    /// directory that is gone or cannot be opened beneath the root (a symlink now) is skipped.
    fn clear_dir(&self, rel: &Path, token: &[u8]) -> usize {
        let Ok(dir) = self.dir(rel) else {
            return 0;
        };
        let Ok(names) = dir.names(usize::MAX) else {
            return 0;
        };
        let mut removed = 0;
        for name in names {
            if temp_owner(name.as_bytes()) != Some(token) {
                continue;
            }
            // A regular file with a single name: a temporary is never linked elsewhere, so one
            // that is could be someone's file under a forged name.
            let ours = dir
                .stat(&name)
                .ok()
                .flatten()
                .is_some_and(|st| st.is_file() && st.nlink == 1);
            if ours && dir.unlink(&name).is_ok() {
                removed += 1;
            }
        }
        if removed > 0 {
            let _ = dir.sync();
        }
        removed
    }
}

impl Dir {
    /// The names in this directory (not `.` and `..`), at most `max`, without inspecting any of
    /// them.
    pub(super) fn names(&self, max: usize) -> io::Result<Vec<OsString>> {
        let mut dir = self.reader()?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            if out.len() >= max {
                break;
            }
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            out.push(OsStr::from_bytes(name).to_os_string());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_names_have_the_temporary_shape_and_differ() {
        let token = fresh_token();
        let a = fresh_name(&token);
        let b = fresh_name(&token);
        assert!(is_temp_name(a.as_bytes()), "{a}");
        assert_ne!(a, b);
        assert_eq!(temp_owner(a.as_bytes()), Some(token.as_bytes()));
        assert!(is_temp_name(b".filesystem-tmp-abc123"), "the old shape");
        assert_eq!(temp_owner(b".filesystem-tmp-abc123"), None);
        assert!(is_reserved(b".filesystem-tmp-anything-longer"));
        assert!(!is_temp_name(b".filesystem-tmp-anything-longer"));
        assert!(!is_reserved(b".filesystem-notes"));
        assert_ne!(fresh_token(), fresh_token());
    }

    #[test]
    fn a_handles_registry_lives_as_long_as_it_and_tells_others_it_is_alive() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().canonicalize().expect("canonical");
        let writer = Workspace::open(&root).expect("open");
        let other = Workspace::open(&root).expect("open");
        writer
            .replace_file(Path::new("f"), b"x", None, false)
            .expect("write");
        let token = writer.inner.live.token().to_string();
        let name = fresh_name(&token);
        assert!(root.join(live_dir()).join(&token).exists());
        assert_eq!(other.temp_owner_alive(name.as_bytes()), Some(true));
        assert_eq!(
            other.sweep_leftovers().expect("sweep"),
            SweepReport {
                live: 1,
                ..SweepReport::default()
            }
        );
        assert_eq!(other.temp_owner_alive(b".filesystem-tmp-abc123"), None);
        drop(writer);
        assert!(!root.join(live_dir()).join(&token).exists());
        assert_eq!(other.temp_owner_alive(name.as_bytes()), Some(false));
    }
}
