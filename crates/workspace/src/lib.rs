//! The workspace layer: every filesystem operation of every tool, of the history store, of tee
//! and the mirror, of the pipe mode's built-in `ls` and of the subcommands, done relative to
//! directory descriptors opened beneath the root, never by absolute path.
//!
//! The guard decides *which* root-relative path a call may act on; this layer makes sure the act
//! lands there. Each operation opens the parent directory of its path beneath the root's
//! descriptor without following any symlink ([`beneath`]), then acts on the final name relative to
//! that descriptor (`openat`, `mkdirat`, `renameat2`, `unlinkat`, `linkat`, `fchmod`). A directory
//! swapped for a symlink at any instant makes the operation fail; it can never redirect it,
//! neither for another session on the same root nor for an outside process. Files that the store,
//! the mirror and the logs append to are refused when they have more than one link, so a planted
//! hard link cannot carry an append to a file elsewhere.

// This crate is the layer: the path-based file APIs that `clippy.toml` forbids everywhere else are
// its building blocks (opening the root once, descriptor-relative calls), so it alone allows them.
#![allow(clippy::disallowed_methods)]

pub mod beneath;
pub mod copy;
pub mod guard;
pub mod history;
pub mod inspect;
pub mod mirror;
pub mod park;
pub mod permissions;
pub mod root;
pub mod temp;
pub mod terminal;
pub mod walk;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

pub use beneath::{is_swap, resolution_method, swapped};

/// One workspace root: its canonical path (for messages and for the guard's lexical checks) and
/// the descriptor every operation starts from. Cloning shares the descriptor.
#[derive(Clone, Debug)]
pub struct Workspace {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    fd: OwnedFd,
    /// The registry of directories this handle made temporaries in (see [`temp`]).
    live: temp::Live,
    /// Set when a temporary of this handle could not be removed after a failed write, so the
    /// registry is kept for the next start-up sweep instead of being removed with the handle.
    stray: std::sync::atomic::AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let keep = self.stray.load(std::sync::atomic::Ordering::Relaxed);
        self.live.close(self.fd.as_fd(), keep);
    }
}

/// What is at a path, without following a final symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// File, directory, symlink…
    pub kind: FileType,
    /// Bytes (a symlink's own length for a link).
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Hard links to the inode.
    pub nlink: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// Nanoseconds part of the modification time.
    pub mtime_nsec: i64,
    /// Device and inode, to tell one file from another.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
}

impl Stat {
    // The field types of `struct stat` differ between targets; the casts are identities only on
    // some of them.
    #[allow(clippy::unnecessary_cast)]
    fn from_raw(st: &rustix::fs::Stat) -> Stat {
        Stat {
            kind: FileType::from_raw_mode(st.st_mode),
            size: st.st_size as u64,
            mode: st.st_mode & 0o7777,
            nlink: st.st_nlink as u64,
            mtime: st.st_mtime as i64,
            mtime_nsec: st.st_mtime_nsec as i64,
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
        }
    }

    /// What an open file is.
    pub fn of(file: &impl AsFd) -> io::Result<Stat> {
        Ok(Stat::from_raw(&rustix::fs::fstat(file)?))
    }

    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileType::Directory
    }

    /// True for a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == FileType::RegularFile
    }

    /// True for a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.kind == FileType::Symlink
    }
}

/// One entry of a directory listing.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entry's name.
    pub name: OsString,
    /// What it is (not following a symlink).
    pub stat: Stat,
}

/// A change written but not yet durable: a directory whose new entry is not synced (what
/// [`Workspace::replace_file_sync_later`] and [`Workspace::rename_no_replace_sync_later`] leave)
/// or a file whose appended line is not (a store log's). The store syncs such changes together,
/// after everything that can share the flush is written (the operation's log entry, or the next
/// record of a long operation), so that on a journalling file system one commit carries them all
/// instead of one each in a row. Dropped unsynced, it syncs itself, so no path can forget it.
#[must_use = "the change must be synced to be durable"]
pub struct PendingSync(Option<Unsynced>);

/// What a [`PendingSync`] holds.
enum Unsynced {
    Dir(Dir),
    File(File),
}

impl PendingSync {
    /// A file of the store whose appended data is to be made durable (`fdatasync`).
    pub fn file(file: File) -> PendingSync {
        PendingSync(Some(Unsynced::File(file)))
    }

    /// Makes the change durable.
    pub fn sync(mut self) -> io::Result<()> {
        match self.0.take() {
            Some(Unsynced::Dir(dir)) => dir.sync(),
            Some(Unsynced::File(file)) => file.sync_data(),
            None => Ok(()),
        }
    }

    /// Syncs every one of `pending`, all of them even when one fails (the first failure is
    /// returned). All were written before, so on a journalling file system the first sync's
    /// commit carries the metadata of them all; each sync still costs the device a flush (ext4
    /// sends one for every `fsync`). They run at once, one thread each but the last (measured:
    /// a revert, whose steps sync four parts each, 1.0 ms per path against 1.27 ms one after the
    /// other), as the block layer merges flushes that wait together. A thread that cannot be
    /// started leaves its sync to this one.
    pub fn sync_all(pending: Vec<PendingSync>) -> io::Result<()> {
        let mut pending = pending.into_iter();
        let last = pending.next_back();
        let results: Vec<io::Result<()>> = std::thread::scope(|s| {
            let mut inline = Vec::new();
            let mut threads = Vec::new();
            for p in pending {
                let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(p)));
                let theirs = std::sync::Arc::clone(&slot);
                let started = std::thread::Builder::new().spawn_scoped(s, move || {
                    let p = theirs.lock().ok().and_then(|mut p| p.take());
                    p.map_or(Ok(()), PendingSync::sync)
                });
                match started {
                    Ok(t) => threads.push(t),
                    Err(_) => inline.push(slot),
                }
            }
            let mut all: Vec<io::Result<()>> = inline
                .into_iter()
                .filter_map(|slot| slot.lock().ok().and_then(|mut p| p.take()))
                .map(PendingSync::sync)
                .collect();
            all.push(last.map_or(Ok(()), PendingSync::sync));
            all.extend(threads.into_iter().map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(io::Error::other("a sync thread panicked")))
            }));
            all
        });
        results
            .into_iter()
            .find_map(Result::err)
            .map_or(Ok(()), Err)
    }
}

/// Changes waiting to be made durable together, with one sync for each file or directory they
/// touched. A batch of trash moves renames many entries out of one directory into another, and
/// one sync of each directory, run after all of them, makes every one of those renames durable;
/// a store log appended to many times needs one `fdatasync`, not one per line.
#[derive(Default)]
pub struct SyncQueue {
    /// Each file or directory to sync, by device and inode, with its sync.
    items: Vec<((u64, u64), PendingSync)>,
}

impl SyncQueue {
    /// Adds `pending`, unless a sync of the same file or directory is already waiting: that one
    /// runs after both changes, so it makes both durable. One whose identity cannot be read is
    /// synced now, which keeps it durable at the cost of its own flush.
    pub fn push(&mut self, mut pending: PendingSync) -> io::Result<()> {
        let identity = match &pending.0 {
            Some(Unsynced::Dir(dir)) => Stat::of(dir),
            Some(Unsynced::File(file)) => Stat::of(file),
            None => return Ok(()),
        };
        let Ok(st) = identity else {
            return pending.sync();
        };
        let key = (st.dev, st.ino);
        if self.items.iter().any(|(k, _)| *k == key) {
            // Covered by the one waiting: let go of it without a sync of its own.
            pending.0 = None;
            return Ok(());
        }
        self.items.push((key, pending));
        Ok(())
    }

    /// How many syncs are waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The syncs waiting, one per file or directory, for [`PendingSync::sync_all`].
    pub fn into_vec(self) -> Vec<PendingSync> {
        self.items.into_iter().map(|(_, p)| p).collect()
    }
}

impl Drop for PendingSync {
    fn drop(&mut self) {
        // Only reached when the owner did not sync it (an error path): best effort.
        if let Some(p) = self.0.take() {
            let _ = PendingSync(Some(p)).sync();
        }
    }
}

/// A directory opened beneath the root: operations on its entries by name, relative to its
/// descriptor. Holding one keeps acting on the same directory even if it is renamed meanwhile.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// The workspace it was opened in and its root-relative path, which the crash-leftover
    /// registry records before a temporary is made here; `None` only for the layer's own
    /// short-lived handles that never make one.
    origin: Option<(Workspace, PathBuf)>,
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The store directory, which gets a `.gitignore` when it is made.
const STORE: &str = ".filesystem";
/// The file in the store that makes git, ripgrep and fd leave it alone (the convention of
/// `.pytest_cache/` and `.mypy_cache/`), and what it says: everything here is ignored.
pub const STORE_GITIGNORE: &str = ".gitignore";
const STORE_GITIGNORE_TEXT: &[u8] = b"*\n";

/// Writes the store's `.gitignore` into the just-made store directory `store`. Written directly
/// (not through a temporary, whose registry lives in this very directory); a crash in between
/// leaves an empty file, which ignores nothing and harms nothing.
fn mark_ignored(store: &Dir) -> io::Result<()> {
    let fd = match store.open(
        OsStr::new(STORE_GITIGNORE),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    ) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(e),
    };
    File::from(fd).write_all(STORE_GITIGNORE_TEXT)
}

impl Dir {
    /// A handle on `fd` that records nothing (for the layer's own bookkeeping).
    fn bare(fd: OwnedFd) -> Dir {
        Dir { fd, origin: None }
    }

    /// This directory without its tie to the workspace handle it was opened from, for a holder
    /// that keeps it open for long and never writes temporaries in it (the call log): the handle's
    /// root descriptor is then not kept open along with it. A temporary made through a detached
    /// handle is not listed in any registry.
    pub fn detached(self) -> Dir {
        Dir::bare(self.fd)
    }

    /// What is at `name` in this directory, not following a symlink; `None` when nothing is.
    pub fn stat(&self, name: &OsStr) -> io::Result<Option<Stat>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Stat::from_raw(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens `name` in this directory without following a symlink there.
    pub fn open(&self, name: &OsStr, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        rustix::fs::openat(
            &self.fd,
            name,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            mode,
        )
        .map_err(|e| beneath::refusal(self.fd.as_fd(), name, e))
    }

    /// Opens the subdirectory `name` (never through a symlink).
    pub fn subdir(&self, name: &OsStr) -> io::Result<Dir> {
        let fd = self.open(name, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        let origin = self
            .origin
            .as_ref()
            .map(|(ws, rel)| (ws.clone(), rel.join(name)));
        Ok(Dir { fd, origin })
    }

    /// A fresh reader of this directory's entries (its own descriptor, so its position is its
    /// own and the directory's descriptor is never read through).
    pub(crate) fn reader(&self) -> io::Result<rustix::fs::Dir> {
        let fd = rustix::fs::openat(
            &self.fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(rustix::fs::Dir::read_from(&fd)?)
    }

    /// Every entry but `.` and `..`, with what it is. Entries that vanish while being listed are
    /// left out.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let mut dir = self.reader()?;
        let mut out = Vec::new();
        // The type the directory reports is not enough here: callers want the whole stat.
        for (name, _) in walk::read_entries(&mut dir)? {
            if let Some(stat) = self.stat(&name)? {
                out.push(Entry { name, stat });
            }
        }
        Ok(out)
    }

    /// Creates the directory `name`; false when a directory is already there.
    pub fn mkdir(&self, name: &OsStr) -> io::Result<bool> {
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o777)) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => match self.stat(name)? {
                Some(s) if s.is_dir() => Ok(false),
                Some(s) if s.is_symlink() => Err(swapped()),
                _ => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the file or symlink `name`.
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }

    /// Removes the empty directory `name`.
    pub fn rmdir(&self, name: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR)?)
    }

    /// The target of the symlink `name`.
    pub fn read_link(&self, name: &OsStr) -> io::Result<PathBuf> {
        let target = rustix::fs::readlinkat(&self.fd, name, Vec::new())?;
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }

    /// Creates the symlink `name` here saying `target` (never replacing anything at `name`).
    pub fn symlink(&self, target: &Path, name: &OsStr) -> io::Result<()> {
        match rustix::fs::symlinkat(target, &self.fd, name) {
            Err(Errno::EXIST) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
            other => other.map_err(io::Error::from),
        }
    }

    /// Makes this directory's entries durable.
    pub fn sync(&self) -> io::Result<()> {
        Ok(rustix::fs::fsync(&self.fd)?)
    }

    /// Creates a fresh temporary beside the entries of this directory (see [`temp`]) with no
    /// permission bits at all (the mark by which `check` knows it for a leftover of ours); the
    /// caller gives it its real bits before renaming it into place. The directory is listed in
    /// the handle's registry first, so a crash before the rename leaves nothing the next
    /// server's start-up sweep does not clear. Returns its name and the open file.
    pub fn create_temp(&self) -> io::Result<(OsString, File)> {
        let token = match &self.origin {
            Some((ws, rel)) => {
                ws.inner.live.register(ws, rel);
                ws.inner.live.token().to_string()
            }
            None => temp::fresh_token(),
        };
        for _ in 0..64 {
            let name = OsString::from(temp::fresh_name(&token));
            match rustix::fs::openat(
                &self.fd,
                &name,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => return Ok((name, File::from(fd))),
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "could not find a free temporary name",
        ))
    }

    /// Writes `content` to `name` so that a crash leaves either the old or the new file, never a
    /// torn one: a temporary beside it, synced, renamed into place, the directory synced. A hard
    /// link at `name` is replaced, not written through. `mode` sets exact permission bits; `None`
    /// gives a new file `0666 & !umask`. With `no_clobber`, anything at `name` makes this fail
    /// with `AlreadyExists`.
    pub fn replace_file(
        &self,
        name: &OsStr,
        content: &[u8],
        mode: Option<u32>,
        no_clobber: bool,
    ) -> io::Result<()> {
        self.replace_file_unsynced(name, content, mode, no_clobber)?;
        self.sync()
    }

    /// [`Dir::replace_file`] up to the rename: the new file's content is durable, its name in
    /// this directory not yet; the caller syncs the directory (see [`PendingSync`]).
    fn replace_file_unsynced(
        &self,
        name: &OsStr,
        content: &[u8],
        mode: Option<u32>,
        no_clobber: bool,
    ) -> io::Result<()> {
        let (tmp, mut file) = self.create_temp()?;
        let written = (|| {
            file.write_all(content)?;
            let bits = mode.unwrap_or_else(new_file_mode) & 0o7777;
            rustix::fs::fchmod(&file, Mode::from_raw_mode(bits))?;
            file.sync_all()?;
            drop(file);
            if no_clobber {
                self.rename_no_replace(&tmp, self, name)
            } else {
                Ok(rustix::fs::renameat(&self.fd, &tmp, &self.fd, name)?)
            }
        })();
        if let Err(e) = written {
            if self.unlink(&tmp).is_err() {
                // Left for the next start-up sweep, which needs the registry to find it.
                if let Some((ws, _)) = &self.origin {
                    ws.inner
                        .stray
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// Renames `from` here to `to` in `dest`, failing with `AlreadyExists` if anything is at `to`
    /// — even something another process put there a moment ago.
    pub fn rename_no_replace(&self, from: &OsStr, dest: &Dir, to: &OsStr) -> io::Result<()> {
        match rustix::fs::renameat_with(&self.fd, from, &dest.fd, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            // File systems that cannot refuse atomically: link-free check, then rename. Both
            // ends are still relative to descriptors, so a race can only make it fail.
            Err(Errno::INVAL) | Err(Errno::NOSYS) => {
                if dest.stat(to)?.is_some() {
                    return Err(io::Error::from(io::ErrorKind::AlreadyExists));
                }
                Ok(rustix::fs::renameat(&self.fd, from, &dest.fd, to)?)
            }
            Err(Errno::EXIST) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
            Err(e) => Err(e.into()),
        }
    }

    /// Renames `from` here to `to` in `dest`, replacing what is there.
    pub fn rename_replace(&self, from: &OsStr, dest: &Dir, to: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.fd, from, &dest.fd, to)?)
    }

    /// Gives `to` in `dest` a second name for the file `from` here (never a symlink's target).
    pub fn hard_link(&self, from: &OsStr, dest: &Dir, to: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::linkat(
            &self.fd,
            from,
            &dest.fd,
            to,
            AtFlags::empty(),
        )?)
    }

    /// Opens `name` for appending, creating it, and refuses a file with more than one link: an
    /// append must never reach a file elsewhere through a planted hard link.
    pub fn open_append(&self, name: &OsStr) -> io::Result<File> {
        let file = self.open_regular(
            name,
            OFlags::RDWR | OFlags::APPEND | OFlags::CREATE,
            Mode::from_raw_mode(0o644),
        )?;
        self.refuse_shared(&file, name)?;
        Ok(file)
    }

    /// Opens an existing `name` for reading and writing (not following a symlink), refusing a
    /// file with more than one link: for trimming a torn log line in place.
    pub fn open_for_update(&self, name: &OsStr) -> io::Result<File> {
        let file = self.open_regular(name, OFlags::RDWR, Mode::empty())?;
        self.refuse_shared(&file, name)?;
        Ok(file)
    }

    /// Reads the whole regular file `name` (never through a symlink, never a FIFO or device).
    pub fn read(&self, name: &OsStr) -> io::Result<Vec<u8>> {
        let mut file = self.open_regular(name, OFlags::RDONLY, Mode::empty())?;
        let mut out = Vec::new();
        file.read_to_end(&mut out)?;
        Ok(out)
    }

    /// Opens `name` here with `flags` (not following a symlink) and refuses it unless it is a
    /// regular file; see [`require_regular`]. How every store, mirror, registry and log file is
    /// opened.
    pub fn open_regular(&self, name: &OsStr, flags: OFlags, mode: Mode) -> io::Result<File> {
        open_regular_with(flags, |flags| self.open(name, flags, mode))
    }
}

/// Why a store, mirror, registry or log file was refused: it is a FIFO, a device, a socket or a
/// directory, which the server never creates there. Reading a FIFO would wait for a writer that
/// may never come, and writing one for a reader, so the file is refused before any read or
/// write, and the call fails instead of hanging.
#[derive(Debug, thiserror::Error)]
#[error("it is {what}, not a regular file, so it was neither read nor written (a FIFO or device could block or misbehave); remove it or move it out of the way, then try again (`filesystem check` lists such files)")]
pub struct NotRegular {
    /// What it is instead ("a FIFO", "a directory"…).
    pub what: &'static str,
}

/// The one check every store, mirror, registry and log file passes right after it is opened
/// (with `O_NONBLOCK`, so that opening a FIFO cannot block): `fstat` on the open descriptor, and
/// anything but a regular file is refused with [`NotRegular`] (kind `InvalidData`). Checking the
/// descriptor, not the name, leaves no window for a swap between the check and the use.
pub fn require_regular(file: &File) -> io::Result<Stat> {
    let st = Stat::of(file)?;
    if st.is_file() {
        return Ok(st);
    }
    let what = match st.kind {
        FileType::Fifo => "a FIFO",
        FileType::Directory => "a directory",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Socket => "a socket",
        FileType::Symlink => "a symbolic link",
        _ => "a special file",
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        NotRegular { what },
    ))
}

/// The one body of both `open_regular`s (by name in a [`Dir`], by path under a [`Workspace`]):
/// `open` is called with `flags` plus `NONBLOCK` (so a FIFO cannot block the open) and
/// `NOCTTY`, and what it opened is refused unless it is a regular file.
fn open_regular_with(
    flags: OFlags,
    open: impl FnOnce(OFlags) -> io::Result<OwnedFd>,
) -> io::Result<File> {
    let fd = open(flags | OFlags::NONBLOCK | OFlags::NOCTTY).map_err(fifo_without_reader)?;
    let file = File::from(fd);
    require_regular(&file)?;
    Ok(file)
}

/// `open(O_WRONLY | O_NONBLOCK)` of a FIFO that nobody reads fails with `ENXIO`: the same
/// refusal as any other FIFO.
fn fifo_without_reader(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ENXIO) {
        io::Error::new(io::ErrorKind::InvalidData, NotRegular { what: "a FIFO" })
    } else {
        e
    }
}

/// Opens a file the operator named by a plain path (`report --log FILE`, `--call-log FILE`
/// outside any workspace), following links as the operator's own paths may, and refuses it
/// unless it is a regular file, by the same [`require_regular`] check.
pub fn open_regular_path(path: &Path, options: &mut std::fs::OpenOptions) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = options
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(fifo_without_reader)?;
    require_regular(&file)?;
    Ok(file)
}

/// The permission bits a new file gets: what `open(2)` would give with mode 0666 under this
/// process's umask. Read once from `/proc` because `umask(2)` can only be read by setting it,
/// which would race with other threads.
pub fn new_file_mode() -> u32 {
    static MODE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| {
        let umask = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o022);
        0o666 & !umask
    })
}

impl Dir {
    /// Refuses an opened `name` unless it is a regular file whose one and only name is `name`
    /// here. The open file's link count alone is not enough: a planted link removed between the
    /// open and the count leaves 1, yet that one name is the file elsewhere. So one `statat` of
    /// the name must show this very inode *and* a single link (a link removed before the
    /// `fstat` and planted again before a separate name check would pass both apart). This
    /// narrows the race to the inside of that one `statat`; names cannot close it entirely.
    fn refuse_shared(&self, file: &File, name: &OsStr) -> io::Result<()> {
        let st = refuse_linked(file)?;
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(now) if now.st_dev == st.st_dev && now.st_ino == st.st_ino && now.st_nlink == 1 => {
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the file's name was removed or replaced while it was being opened, so writing to it could change a file elsewhere; nothing was written (try again)",
            )),
        }
    }
}

/// Refuses a regular file that has more than one name; returns what it is.
fn refuse_linked(file: &File) -> io::Result<rustix::fs::Stat> {
    require_regular(file)?;
    let st = rustix::fs::fstat(file)?;
    if st.st_nlink > 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the file has more than one hard link, so writing to it could change a file elsewhere; nothing was written (remove the extra link)",
        ));
    }
    Ok(st)
}

impl Workspace {
    /// Opens the workspace at `root`, which must already be canonical (see [`crate::root`]).
    pub fn open(root: &Path) -> io::Result<Workspace> {
        let fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Workspace {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
                fd,
                live: temp::Live::default(),
                stray: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The workspace of a root already opened as `fd`, which is at `root` (canonical): how every
    /// root a server serves becomes a workspace, so the descriptor its checks were made on is the
    /// one every operation starts from (see [`root::OpenedRoot`]).
    pub fn from_root_fd(fd: OwnedFd, root: PathBuf) -> Workspace {
        Workspace {
            inner: Arc::new(Inner {
                root,
                fd,
                live: temp::Live::default(),
                stray: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// The canonical root, for the guard's lexical checks and for the operator's own messages;
    /// never for an operation.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The root-relative form of an absolute path inside the root (as the pipe policy and the
    /// subcommands' walks build them), for handing to the operations below. Lexical only: what
    /// acts on the result is the layer, which follows no symlink.
    pub fn relative<'p>(&self, absolute: &'p Path) -> io::Result<&'p Path> {
        absolute.strip_prefix(self.root()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path is not inside the workspace",
            )
        })
    }

    /// The root's descriptor.
    pub fn root_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    /// Opens `rel` with `flags`, refusing any symlink on the way and at the end.
    pub fn open_at(&self, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        beneath::open_beneath(self.root_fd(), rel, flags, mode)
    }

    /// Opens the directory `rel` (the root for an empty path).
    pub fn dir(&self, rel: &Path) -> io::Result<Dir> {
        let fd = self.open_at(rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        Ok(Dir {
            fd,
            origin: Some((self.clone(), rel.to_path_buf())),
        })
    }

    /// Opens the parent of `rel` and returns it with the final name.
    pub fn parent<'a>(&self, rel: &'a Path) -> io::Result<(Dir, &'a OsStr)> {
        let name = rel.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "this needs a path inside the workspace, not the root itself",
            )
        })?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        Ok((self.dir(parent)?, name))
    }

    /// What is at `rel` with its times, not following a final symlink; `None` when nothing is
    /// (see [`inspect`]).
    pub fn inspect(&self, rel: &Path) -> io::Result<Option<inspect::FileInfo>> {
        inspect::inspect(self, rel)
    }

    /// What is at `rel`, not following a final symlink; `None` when nothing is (a missing parent
    /// counts as nothing).
    pub fn stat(&self, rel: &Path) -> io::Result<Option<Stat>> {
        if rel.as_os_str().is_empty() {
            let st = rustix::fs::fstat(self.root_fd())?;
            return Ok(Some(Stat::from_raw(&st)));
        }
        // An entry of the root itself is looked up on the root's own descriptor: nothing lies
        // between them, so there is nothing to open (the guard's walk asks this of every path).
        if let (Some(name), Some(parent)) = (rel.file_name(), rel.parent()) {
            if parent.as_os_str().is_empty() && beneath::plain_components(rel).is_ok() {
                return match rustix::fs::statat(self.root_fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => Ok(Some(Stat::from_raw(&st))),
                    Err(Errno::NOENT) => Ok(None),
                    Err(e) => Err(e.into()),
                };
            }
        }
        match self.parent(rel) {
            Ok((dir, name)) => dir.stat(name),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// True when anything (even a dangling symlink) is at `rel`.
    pub fn exists(&self, rel: &Path) -> io::Result<bool> {
        Ok(self.stat(rel)?.is_some())
    }

    /// Opens the file `rel` for reading (no symlink anywhere).
    pub fn open_read(&self, rel: &Path) -> io::Result<File> {
        Ok(File::from(self.open_at(
            rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?))
    }

    /// Reads the whole regular file `rel` (a store, mirror or log file: never a FIFO or device,
    /// see [`require_regular`]).
    pub fn read(&self, rel: &Path) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.open_regular(rel, OFlags::RDONLY, Mode::empty())?
            .read_to_end(&mut out)?;
        Ok(out)
    }

    /// Opens `rel` with `flags` (no symlink anywhere) and refuses it unless it is a regular file:
    /// the one way the store, the mirror, the logs and the subcommands open their own files
    /// (see [`require_regular`]).
    pub fn open_regular(&self, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<File> {
        open_regular_with(flags, |flags| self.open_at(rel, flags, mode))
    }

    /// Creates the directory `rel` and every missing parent, one component at a time relative
    /// to its parent's descriptor, syncing each parent that gained an entry. A component that
    /// exists must be a real directory. Returns true when anything was created.
    pub fn create_dirs(&self, rel: &Path) -> io::Result<bool> {
        let names = beneath::plain_components(rel)?;
        let mut dir = self.dir(Path::new(""))?;
        let mut created = false;
        for (depth, name) in names.into_iter().enumerate() {
            let mut made = false;
            match dir.mkdir(name) {
                Ok(true) => {
                    created = true;
                    made = true;
                    dir.sync()?;
                }
                Ok(false) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!(
                            "'{}' is not a directory, so nothing can be created inside it",
                            name.to_string_lossy()
                        ),
                    ))
                }
                Err(e) => return Err(e),
            }
            dir = dir.subdir(name)?;
            if made && depth == 0 && name == STORE {
                mark_ignored(&dir)?;
            }
        }
        Ok(created)
    }

    /// Atomically replaces (or creates) the file `rel`; see [`Dir::replace_file`].
    pub fn replace_file(
        &self,
        rel: &Path,
        content: &[u8],
        mode: Option<u32>,
        no_clobber: bool,
    ) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        dir.replace_file(name, content, mode, no_clobber)
    }

    /// [`Workspace::replace_file`] but for the last step: the directory that now names the new
    /// file is handed back unsynced, so that its sync can share the disk's flush with the
    /// operation log's entry (see [`PendingSync`]).
    pub fn replace_file_sync_later(
        &self,
        rel: &Path,
        content: &[u8],
        mode: Option<u32>,
        no_clobber: bool,
    ) -> io::Result<PendingSync> {
        let (dir, name) = self.parent(rel)?;
        dir.replace_file_unsynced(name, content, mode, no_clobber)?;
        Ok(PendingSync(Some(Unsynced::Dir(dir))))
    }

    /// Renames `from` to `to`, never replacing anything at `to`; both directories are synced.
    pub fn rename_no_replace(&self, from: &Path, to: &Path) -> io::Result<()> {
        PendingSync::sync_all(self.rename_no_replace_sync_later(from, to)?)
    }

    /// [`Workspace::rename_no_replace`] with the directories left to sync (see
    /// [`PendingSync`]): for a long operation's step, whose durability the next record's flush
    /// brings.
    pub fn rename_no_replace_sync_later(
        &self,
        from: &Path,
        to: &Path,
    ) -> io::Result<Vec<PendingSync>> {
        let (src, from_name) = self.parent(from)?;
        let (dst, to_name) = self.parent(to)?;
        src.rename_no_replace(from_name, &dst, to_name)?;
        let mut pending = vec![PendingSync(Some(Unsynced::Dir(dst)))];
        if from.parent() != to.parent() {
            pending.push(PendingSync(Some(Unsynced::Dir(src))));
        }
        Ok(pending)
    }

    /// Renames `from` to `to`, replacing what is at `to`; the directory is synced.
    pub fn rename_replace(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (src, from_name) = self.parent(from)?;
        let (dst, to_name) = self.parent(to)?;
        src.rename_replace(from_name, &dst, to_name)?;
        dst.sync()
    }

    /// Gives the file `from` the second name `to`.
    pub fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (src, from_name) = self.parent(from)?;
        let (dst, to_name) = self.parent(to)?;
        src.hard_link(from_name, &dst, to_name)
    }

    /// Removes the file or symlink `rel`; a missing one is fine.
    pub fn remove_file(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = match self.parent(rel) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        match dir.unlink(name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Creates the symlink `rel` saying `target` (stored as given, never followed here), relative
    /// to its parent's descriptor; the directory is synced. What it says is not looked at here:
    /// the caller (a copy, the operation log's revert) decides whether it may exist.
    pub fn symlink(&self, rel: &Path, target: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        dir.symlink(target, name)?;
        dir.sync()
    }

    /// Makes the entries of directory `rel` durable.
    pub fn sync_dir(&self, rel: &Path) -> io::Result<()> {
        self.dir(rel)?.sync()
    }

    /// The entries of directory `rel`.
    pub fn entries(&self, rel: &Path) -> io::Result<Vec<Entry>> {
        self.dir(rel)?.entries()
    }

    /// Sets the permission bits of the file `rel` (never through a symlink).
    pub fn set_mode(&self, rel: &Path, mode: u32) -> io::Result<()> {
        let handle = self.open_at(rel, OFlags::PATH, Mode::empty())?;
        let st = rustix::fs::fstat(&handle)?;
        if st.st_mode & 0o7777 == mode {
            return Ok(());
        }
        let fd = self.open_at(
            rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?;
        Ok(rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?)
    }

    /// Opens `rel` for appending (created if missing), refusing a hard-linked file.
    pub fn open_append(&self, rel: &Path) -> io::Result<File> {
        let (dir, name) = self.parent(rel)?;
        dir.open_append(name)
    }

    /// Opens the existing `rel` for an in-place update, refusing a hard-linked file.
    pub fn open_for_update(&self, rel: &Path) -> io::Result<File> {
        let (dir, name) = self.parent(rel)?;
        dir.open_for_update(name)
    }

    /// The target of the symlink `rel`.
    pub fn read_link(&self, rel: &Path) -> io::Result<PathBuf> {
        let (dir, name) = self.parent(rel)?;
        dir.read_link(name)
    }

    /// Bytes in a file, or in all files below a directory (symlinks count as their own length and
    /// are never followed). A [`walk::Tree`], with the number of entries visited bounded by
    /// `budget` and the depth by [`walk::MAX_DEPTH`], so neither a deep nor a huge tree can
    /// exhaust the stack or the descriptors, or stall the call: past either bound the size is
    /// given as it stands.
    pub fn tree_size(&self, rel: &Path, budget: usize) -> u64 {
        let Ok(Some(top)) = self.stat(rel) else {
            return 0;
        };
        if !top.is_dir() {
            return top.size;
        }
        // An unreadable directory, the top one included, counts as empty.
        let Ok(mut tree) = self
            .open_at(rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .and_then(walk::Tree::new)
        else {
            return 0;
        };
        let mut total = 0u64;
        let mut visited = 0;
        while let Some(found) = tree.next_entry() {
            visited += 1;
            if visited > budget {
                break;
            }
            if found.kind == FileType::Directory {
                // Too deep, unreadable or moved away: what is below is not counted.
                let _ = tree.descend();
            } else if let Some(dir) = tree.current() {
                let size = walk::stat_at(dir, &found.name)
                    .ok()
                    .flatten()
                    .map_or(0, |st| st.size);
                total = total.saturating_add(size);
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn ws() -> (tempfile::TempDir, Workspace, PathBuf) {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(base.join("ws/d")).expect("mkdir");
        std::fs::create_dir_all(base.join("out")).expect("mkdir");
        let w = Workspace::open(&base.join("ws")).expect("open");
        (tmp, w, base)
    }

    #[test]
    fn a_sync_queue_keeps_one_sync_per_directory_and_file() {
        let (_tmp, w, base) = ws();
        std::fs::create_dir_all(base.join("ws/e")).expect("mkdir");
        let mut q = SyncQueue::default();
        // Two renames out of d into e leave four directory syncs of two directories.
        for name in ["a", "b"] {
            std::fs::write(base.join("ws/d").join(name), "x").expect("write");
            let from = Path::new("d").join(name);
            let to = Path::new("e").join(name);
            for p in w.rename_no_replace_sync_later(&from, &to).expect("rename") {
                q.push(p).expect("queued");
            }
        }
        assert_eq!(q.len(), 2);
        // A file's appended data is a sync of its own, once however often it is appended to.
        for _ in 0..2 {
            let f = File::options()
                .append(true)
                .create(true)
                .open(base.join("ws/log"))
                .expect("open");
            q.push(PendingSync::file(f)).expect("queued");
        }
        assert_eq!(q.len(), 3);
        PendingSync::sync_all(q.into_vec()).expect("synced");
        assert!(base.join("ws/e/a").exists() && base.join("ws/e/b").exists());
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_makes_every_operation_fail_never_redirect() {
        let (_t, w, base) = ws();
        std::fs::remove_dir(base.join("ws/d")).expect("rm");
        symlink(base.join("out"), base.join("ws/d")).expect("link");
        let d = Path::new("d/f");
        assert!(w.replace_file(d, b"x", None, false).is_err());
        assert!(w.create_dirs(Path::new("d/e")).is_err());
        assert!(w.open_append(d).is_err());
        assert!(w.read(d).is_err());
        assert!(w.entries(Path::new("d")).is_err());
        assert!(
            w.rename_no_replace(Path::new("d"), Path::new("e")).is_ok(),
            "the link itself may move"
        );
        assert_eq!(std::fs::read_dir(base.join("out")).expect("ls").count(), 0);
    }

    #[test]
    fn appends_refuse_a_hard_linked_file_and_replacement_does_not_write_through() {
        let (_t, w, base) = ws();
        std::fs::write(base.join("out/log"), "outside\n").expect("write");
        std::fs::hard_link(base.join("out/log"), base.join("ws/log")).expect("link");
        assert!(w.open_append(Path::new("log")).is_err());
        assert!(w.open_for_update(Path::new("log")).is_err());
        w.replace_file(Path::new("log"), b"new", None, false)
            .expect("replace");
        assert_eq!(
            std::fs::read(base.join("out/log")).expect("read"),
            b"outside\n"
        );
        assert_eq!(std::fs::read(base.join("ws/log")).expect("read"), b"new");
    }

    #[test]
    fn replace_file_keeps_mode_and_no_clobber_refuses() {
        let (_t, w, base) = ws();
        let f = Path::new("d/f");
        w.replace_file(f, b"one", None, true).expect("create");
        let err = w.replace_file(f, b"two", None, true).expect_err("occupied");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        w.replace_file(f, b"two", Some(0o751), false)
            .expect("replace");
        assert_eq!(std::fs::read(base.join("ws/d/f")).expect("read"), b"two");
        assert_eq!(w.stat(f).expect("stat").expect("there").mode, 0o751);
        let leftovers = std::fs::read_dir(base.join("ws/d"))
            .expect("ls")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| temp::is_temp_name(e.file_name().as_bytes()))
            })
            .count();
        assert_eq!(leftovers, 0);
    }

    #[test]
    fn create_dirs_never_creates_through_a_link() {
        let (_t, w, base) = ws();
        symlink(base.join("out"), base.join("ws/l")).expect("link");
        assert!(w.create_dirs(Path::new("l/x")).is_err());
        assert!(!base.join("out/x").exists());
        assert!(w.create_dirs(Path::new("a/b/c")).expect("mkdir"));
        assert!(!w.create_dirs(Path::new("a/b/c")).expect("again"));
    }
}
