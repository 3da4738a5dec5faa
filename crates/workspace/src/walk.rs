//! Depth-first walks of directory trees that neither recurse nor keep a descriptor per level.
//!
//! A tree can be far deeper than anyone would make it on purpose: a client can nest directories
//! with `create_directory` and `move_file` until they are tens of thousands of levels deep, and a
//! mirror or transcript folder may come from anywhere. A walk that recursed per level would
//! overflow the thread's stack (killing the server, and in `--server` mode every root with it);
//! one that kept each level's directory open would run out of descriptors at a few thousand
//! levels, and in `--server` mode take them from every other root. So every walk in the project
//! goes through [`Descent`]: an explicit stack of levels whose open directories are capped at
//! [`KEEP_OPEN`], and which goes at most [`MAX_DEPTH`] levels below where it started. Walks that
//! visit entries in name order use [`Tree`], which keeps the per-level entries and the path
//! alongside the [`Descent`], so each caller only decides what to do with an entry and whether
//! to go into a directory.
//!
//! A level whose directory was closed to respect the cap is opened again, when the walk climbs
//! back to it, as `..` of the level below — and only kept if it is the very directory that was
//! left (same device and inode). If something renamed it meanwhile the level is *lost*: the walk
//! can finish the entries it already read but cannot enter any more of its subdirectories,
//! exactly as when a directory is swapped out under a walk that holds it. `..` never leads
//! anywhere the walk had not already been, so this cannot take the walk out of the tree.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

/// How many directory levels below its start any walk goes (`directory_tree`, `check`, `audit`,
/// `report`, the size of a trashed directory). Deeper than any real project (Linux cannot even
/// name a path more than 2,048 levels deep in one call), shallow enough that the walk's own
/// bookkeeping stays small. What lies deeper is left out with a note, never a crash.
pub const MAX_DEPTH: usize = 4096;

/// How many directories along the current path one walk keeps open. Beyond it, the shallower
/// ones are closed and reopened on the way back up, so a walk's descriptors do not grow with
/// depth (in `--server` mode all roots share one process's descriptor table).
pub const KEEP_OPEN: usize = 32;

/// Why [`Descent::enter`] did not enter a directory.
#[derive(Debug, thiserror::Error)]
pub enum DescendError {
    /// It lies more than [`MAX_DEPTH`] levels below the start.
    #[error("it lies more than {MAX_DEPTH} levels below where the walk started (the depth limit of every walk)")]
    TooDeep,
    /// The directory it is in was renamed or removed while the walk was below it.
    #[error("the directory holding it was moved or removed while it was being walked")]
    Lost,
    /// Opening it failed (a symlink swapped in is refused, not followed).
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// One level of the current path.
struct Level {
    /// Open while the level is among the deepest [`KEEP_OPEN`] (or was reopened); `None` when
    /// closed to respect the cap, or lost.
    dir: Option<Dir>,
    /// Device and inode, recorded when the directory is closed, to recognise it when reopened.
    id: Option<(u64, u64)>,
}

/// The current path of a depth-first walk: the start and each directory entered below it.
///
/// The caller keeps its own per-level state (the entries it read, where it is among them) in a
/// stack parallel to this one, pushing after a successful [`Descent::enter`] and popping with
/// [`Descent::leave`].
pub struct Descent {
    levels: Vec<Level>,
    /// How many levels below `top` it may go: [`MAX_DEPTH`], less for a walk that starts below
    /// the start of a larger one (see [`Tree::below`]).
    limit: usize,
}

impl Descent {
    /// A walk starting at the open directory `top` (opened for reading, as a directory).
    pub fn new(top: OwnedFd) -> io::Result<Descent> {
        Ok(Descent {
            levels: vec![Level {
                dir: Some(Dir::new(top)?),
                id: None,
            }],
            limit: MAX_DEPTH,
        })
    }

    /// How many levels below the start the walk is (0 at the start).
    pub fn depth(&self) -> usize {
        self.levels.len() - 1
    }

    /// The directory the walk is in, to read its entries or act on them by name; `None` when it
    /// was lost (see the module documentation).
    pub fn current(&mut self) -> Option<&mut Dir> {
        self.levels.last_mut().and_then(|l| l.dir.as_mut())
    }

    /// Enters the subdirectory `name` of the current directory, never through a symlink. On
    /// success [`Descent::current`] is that directory, one level deeper.
    pub fn enter(&mut self, name: &OsStr) -> Result<(), DescendError> {
        if self.depth() >= self.limit {
            return Err(DescendError::TooDeep);
        }
        let parent = self.current().ok_or(DescendError::Lost)?;
        let fd = open_dir_at(parent, name)?;
        self.levels.push(Level {
            dir: Some(Dir::new(fd).map_err(io::Error::from)?),
            id: None,
        });
        // Close the level that just fell out of the window of open ones, remembering which
        // directory it was.
        if let Some(at) = self.levels.len().checked_sub(KEEP_OPEN + 1) {
            let level = &mut self.levels[at];
            if let Some(dir) = level.dir.take() {
                level.id = dir
                    .fd()
                    .ok()
                    .and_then(|fd| rustix::fs::fstat(fd).ok())
                    .map(|st| identity(&st));
            }
        }
        Ok(())
    }

    /// Leaves the current directory for its parent, reopening the parent if it was closed.
    /// Returns false at the start (there is nothing to leave).
    pub fn leave(&mut self) -> bool {
        if self.levels.len() < 2 {
            return false;
        }
        let child = self.levels.pop().and_then(|l| l.dir);
        let Some(parent) = self.levels.last_mut() else {
            return false;
        };
        if parent.dir.is_none() {
            parent.dir = child
                .as_ref()
                .and_then(|c| reopen_parent(c, parent.id?))
                .and_then(|fd| Dir::new(fd).ok());
        }
        true
    }
}

/// One entry a [`Tree`] walk came to.
#[derive(Debug)]
pub struct Found {
    /// Its name in the directory holding it.
    pub name: OsString,
    /// Its path relative to where the walk started (its name, for an entry of the start).
    pub path: PathBuf,
    /// What it is, not following a symlink (never [`FileType::Unknown`]; see
    /// [`sorted_entries`]).
    pub kind: FileType,
    /// How many levels below the start the directory holding it is (0 for the start's own
    /// entries): a caller that keeps something per directory it went into (a name, a shown
    /// path) truncates it to this length.
    pub depth: usize,
}

/// A depth-first walk of a directory tree in name order, on a [`Descent`].
///
/// The walks of `check`, `audit`, `report` and a trashed directory's size all need the same
/// loop: read a directory's entries sorted, hand them out one by one with their path, go into a
/// subdirectory when asked, climb back when a level is done. Written once here, so each of them
/// is only its own policy: what to skip, what to report, what a too-deep directory means. The
/// walk never goes into anything by itself: [`Tree::descend`] enters the directory
/// [`Tree::next_entry`] just gave, and only when the caller asks.
pub struct Tree {
    descent: Descent,
    /// Per level of the current path: the entries not yet given out, in name order.
    levels: Vec<std::vec::IntoIter<(OsString, FileType)>>,
    /// The current directory's path relative to the start.
    at: PathBuf,
    /// The name of the entry just given out, which [`Tree::descend`] enters; taken by it, so
    /// a second call cannot enter a same-named directory one level further down.
    last: Option<OsString>,
}

impl Tree {
    /// A walk of the open directory `top` (opened for reading, as a directory). Fails when it
    /// cannot be listed: there would be nothing to walk.
    pub fn new(top: OwnedFd) -> io::Result<Tree> {
        Tree::below(top, 0)
    }

    /// A walk of the open directory `top`, which lies `depth` levels below the start of a larger
    /// walk (one that hands subtrees to several threads): it goes at most [`MAX_DEPTH`] levels
    /// below that start, as one walk of the whole tree would, and the [`Found::depth`] and
    /// [`Found::path`] it gives are relative to `top`.
    pub fn below(top: OwnedFd, depth: usize) -> io::Result<Tree> {
        let mut descent = Descent::new(top)?;
        descent.limit = MAX_DEPTH.saturating_sub(depth);
        let first = match descent.current() {
            Some(dir) => sorted_entries(dir)?,
            None => Vec::new(),
        };
        Ok(Tree {
            descent,
            levels: vec![first.into_iter()],
            at: PathBuf::new(),
            last: None,
        })
    }

    /// The next entry in depth-first name order, climbing out of every directory whose entries
    /// are all given out; `None` when the walk is done. Levels are left only here, so
    /// [`Tree::current`] is the directory holding the entry until the next call.
    pub fn next_entry(&mut self) -> Option<Found> {
        self.last = None;
        loop {
            let level = self.levels.last_mut()?;
            if let Some((name, kind)) = level.next() {
                self.last = Some(name.clone());
                return Some(Found {
                    path: self.at.join(&name),
                    name,
                    kind,
                    depth: self.descent.depth(),
                });
            }
            self.levels.pop();
            // At the start this leaves nothing and pops nothing; the loop then ends.
            self.descent.leave();
            self.at.pop();
        }
    }

    /// Goes into the directory [`Tree::next_entry`] just gave and reads its entries, so the
    /// next ones come from inside it. On an error the walk stays where it was (it carries on
    /// with the next entry) and the caller decides what the error means: [`DescendError::TooDeep`]
    /// at [`MAX_DEPTH`], [`DescendError::Lost`] when the directory holding it was moved away,
    /// [`DescendError::Io`] when it cannot be opened or listed (a symlink is refused, never
    /// followed), or when there is no entry just given to go into.
    pub fn descend(&mut self) -> Result<(), DescendError> {
        let name = self.last.take().ok_or_else(|| {
            DescendError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "there is no entry just walked to go into",
            ))
        })?;
        self.descent.enter(&name)?;
        let listed = self
            .descent
            .current()
            .ok_or(DescendError::Lost)
            .and_then(|dir| sorted_entries(dir).map_err(DescendError::Io));
        match listed {
            Ok(list) => {
                self.levels.push(list.into_iter());
                self.at.push(&name);
                Ok(())
            }
            Err(e) => {
                self.descent.leave();
                Err(e)
            }
        }
    }

    /// The directory the walk is in — the one holding the entry just given, or the one just
    /// entered — to look at or open its entries by name however deep it is; `None` when it was
    /// lost (see the module documentation).
    pub fn current(&mut self) -> Option<&mut Dir> {
        self.descent.current()
    }
}

/// Opens the subdirectory `name` of `dir` for reading, never through a symlink (one swapped in
/// is refused as swapped): how every walk goes one level down, and how a walk that shares its
/// work between threads opens a subtree it hands to another thread.
pub fn open_dir_at(dir: &Dir, name: &OsStr) -> io::Result<OwnedFd> {
    rustix::fs::openat(
        dir.fd()?,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => super::swapped(),
        e => io::Error::from(e),
    })
}

/// Device and inode of a stat result.
// The field types of `struct stat` differ between targets.
#[allow(clippy::unnecessary_cast)]
fn identity(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// `..` of `child`, if it is still the directory `id`.
fn reopen_parent(child: &Dir, id: (u64, u64)) -> Option<OwnedFd> {
    let fd = rustix::fs::openat(
        child.fd().ok()?,
        "..",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    (identity(&st) == id).then_some(fd)
}

/// The entries of `dir` (not `.` and `..`) with what they are, not following symlinks, sorted by
/// name. Types come from the directory itself; file systems that do not report them cost one
/// `lstat` per entry. An entry that vanishes before it can be looked at is left out.
pub fn sorted_entries(dir: &mut Dir) -> io::Result<Vec<(OsString, FileType)>> {
    let mut out = read_entries(dir)?;
    let fd = dir.fd()?;
    out.retain_mut(|(name, kind)| {
        if *kind != FileType::Unknown {
            return true;
        }
        match rustix::fs::statat(fd.as_fd(), name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                *kind = FileType::from_raw_mode(st.st_mode);
                true
            }
            Err(_) => false,
        }
    });
    out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The entries of `dir` (not `.` and `..`) in the order the directory gives them, with the type
/// it reports (possibly [`FileType::Unknown`]), collected.
pub(super) fn read_entries(dir: &mut Dir) -> io::Result<Vec<(OsString, FileType)>> {
    let mut out = Vec::new();
    each_entry(dir, |name, kind| {
        out.push((OsStr::from_bytes(name).to_os_string(), kind));
    })?;
    Ok(out)
}

/// Hands `seen` each entry of `dir` (not `.` and `..`) in the order the directory gives them,
/// with the type it reports (possibly [`FileType::Unknown`]): the one reading loop of the
/// workspace layer and of the listing tools. A callback rather than a list, so a caller that
/// keeps names its own way (`directory_tree` packs them into one buffer) allocates nothing more.
pub fn each_entry(dir: &mut Dir, mut seen: impl FnMut(&[u8], FileType)) -> io::Result<()> {
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        seen(name, entry.file_type());
    }
    Ok(())
}

/// The most components a path in a message shows whole (see [`shorten`]).
pub const SHOWN_LEVELS: usize = 64;

/// What is at `name` in `dir`, not following a symlink; `None` when nothing is. Lets a walk look
/// at an entry through the directory it holds, however deep that is.
pub fn stat_at(dir: &Dir, name: &OsStr) -> io::Result<Option<super::Stat>> {
    match rustix::fs::statat(dir.fd()?, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(super::Stat::from_raw(&st))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The target of the symlink `name` in `dir`: lets a walk read a link it meets through the
/// directory holding it, however deep (a tree copy copies links as links).
pub fn read_link_at(dir: &Dir, name: &OsStr) -> io::Result<PathBuf> {
    let target = rustix::fs::readlinkat(dir.fd()?, name, Vec::new())?;
    Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
}

/// Opens the regular file `name` in `dir` for reading, never through a symlink, never a FIFO,
/// device or directory (see [`super::require_regular`]). Lets a walk read the files it meets
/// through the directory holding them, however deep, without naming a path the kernel would
/// resolve again (a content search opens every file of a tree this way).
pub fn open_file_at(dir: &Dir, name: &OsStr) -> io::Result<std::fs::File> {
    let fd = rustix::fs::openat(
        dir.fd()?,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = std::fs::File::from(fd);
    super::require_regular(&file)?;
    Ok(file)
}

/// True when `path` is short enough to be acted on by path: the kernel refuses a path of
/// `PATH_MAX` bytes or more in one call. A walk can reach entries far
/// deeper (it goes one directory at a time); acting on those by path fails, so the walks say so
/// instead of trying.
pub fn fits_one_call(path: &Path) -> bool {
    path.as_os_str().len() < libc::PATH_MAX as usize
}

/// A path short enough for a message: one more than [`SHOWN_LEVELS`] levels deep is shown as its
/// first and last few components around the number left out; any other is shown whole.
pub fn shorten(path: &Path) -> String {
    const ENDS: usize = 8;
    let parts: Vec<_> = path.components().collect();
    if parts.len() <= SHOWN_LEVELS {
        return path.display().to_string();
    }
    let head: std::path::PathBuf = parts[..ENDS].iter().collect();
    let tail: std::path::PathBuf = parts[parts.len() - ENDS..].iter().collect();
    format!(
        "{}/…({} more levels)…/{}",
        head.display(),
        parts.len() - 2 * ENDS,
        tail.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Makes `levels` nested directories `d` under `base` without ever naming a long path.
    fn nest(base: &Path, levels: usize) {
        let mut fd = rustix::fs::open(base, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .expect("open base");
        for _ in 0..levels {
            rustix::fs::mkdirat(&fd, "d", Mode::from_raw_mode(0o755)).expect("mkdir");
            fd = rustix::fs::openat(&fd, "d", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
                .expect("open");
        }
    }

    fn open(p: &Path) -> OwnedFd {
        rustix::fs::open(p, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).expect("open")
    }

    impl Descent {
        fn open_levels(&self) -> usize {
            self.levels.iter().filter(|l| l.dir.is_some()).count()
        }
    }

    #[test]
    fn a_deep_walk_stops_at_the_limit_with_few_descriptors_and_climbs_back() {
        let tmp = tempfile::tempdir().expect("tmp");
        nest(tmp.path(), MAX_DEPTH + 10);
        let mut walk = Descent::new(open(tmp.path())).expect("walk");
        let mut most = 0;
        loop {
            match walk.enter(OsStr::new("d")) {
                Ok(()) => most = most.max(walk.open_levels()),
                Err(DescendError::TooDeep) => break,
                Err(e) => panic!("at {}: {e}", walk.depth()),
            }
        }
        assert_eq!(walk.depth(), MAX_DEPTH);
        assert_eq!(most, KEEP_OPEN);
        while walk.leave() {
            assert!(walk.current().is_some(), "lost at {}", walk.depth());
            assert!(walk.open_levels() <= KEEP_OPEN);
        }
        assert_eq!(walk.depth(), 0);
        let names = sorted_entries(walk.current().expect("start")).expect("entries");
        assert_eq!(names, vec![(OsString::from("d"), FileType::Directory)]);
    }

    #[test]
    fn a_level_renamed_away_while_closed_is_lost_not_replaced() {
        let tmp = tempfile::tempdir().expect("tmp");
        nest(tmp.path(), KEEP_OPEN + 5);
        let mut walk = Descent::new(open(tmp.path())).expect("walk");
        for _ in 0..KEEP_OPEN + 5 {
            walk.enter(OsStr::new("d")).expect("enter");
        }
        // The first level is closed by now; move the second out from under it and put an
        // impostor in its place.
        std::fs::rename(tmp.path().join("d/d"), tmp.path().join("moved")).expect("move");
        std::fs::create_dir(tmp.path().join("d/d")).expect("impostor");
        while walk.depth() > 2 {
            assert!(walk.leave());
            assert!(walk.current().is_some(), "reopened at {}", walk.depth());
        }
        // Level 2 is `moved` now, reopened by identity through its child; `..` of it is the
        // start, not level 1, so level 1 is lost rather than replaced by the impostor's parent.
        assert!(walk.leave());
        assert!(walk.current().is_none());
        assert!(matches!(
            walk.enter(OsStr::new("d")),
            Err(DescendError::Lost)
        ));
    }

    #[test]
    fn a_symlink_is_never_entered() {
        let tmp = tempfile::tempdir().expect("tmp");
        std::os::unix::fs::symlink("/", tmp.path().join("l")).expect("link");
        let mut walk = Descent::new(open(tmp.path())).expect("walk");
        assert!(matches!(
            walk.enter(OsStr::new("l")),
            Err(DescendError::Io(_))
        ));
        assert_eq!(walk.depth(), 0);
    }

    #[test]
    fn a_tree_gives_entries_in_path_order_and_enters_only_what_it_is_asked_to() {
        let tmp = tempfile::tempdir().expect("tmp");
        for d in ["a/x", "b/y/z", "c"] {
            std::fs::create_dir_all(tmp.path().join(d)).expect("mkdir");
        }
        std::fs::write(tmp.path().join("a/f"), "").expect("file");
        std::fs::write(tmp.path().join("b/y/g"), "").expect("file");
        let mut tree = Tree::new(open(tmp.path())).expect("tree");
        let mut seen = Vec::new();
        while let Some(found) = tree.next_entry() {
            let kind = found.kind;
            seen.push((found.path.display().to_string(), found.depth));
            // `c` is skipped, as a caller skips a state directory; `b/y/z` is empty.
            if kind == FileType::Directory && found.name != "c" {
                tree.descend().expect("descend");
                // Only the entry just given can be entered, and only once.
                assert!(tree.descend().is_err());
            }
        }
        let want = [
            ("a", 0),
            ("a/f", 1),
            ("a/x", 1),
            ("b", 0),
            ("b/y", 1),
            ("b/y/g", 2),
            ("b/y/z", 2),
            ("c", 0),
        ];
        let want: Vec<_> = want.iter().map(|(p, d)| (p.to_string(), *d)).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn a_tree_stops_at_the_depth_limit_and_carries_on() {
        let tmp = tempfile::tempdir().expect("tmp");
        nest(tmp.path(), MAX_DEPTH + 2);
        std::fs::write(tmp.path().join("e"), "").expect("file");
        let mut tree = Tree::new(open(tmp.path())).expect("tree");
        let mut too_deep = 0;
        let mut last = None;
        while let Some(found) = tree.next_entry() {
            if found.kind == FileType::Directory {
                match tree.descend() {
                    Ok(()) => {}
                    Err(DescendError::TooDeep) => too_deep += 1,
                    Err(e) => panic!("at {}: {e}", found.depth),
                }
            }
            last = Some((found.path, found.depth));
        }
        assert_eq!(too_deep, 1);
        // The walk climbed all the way back for the start's last entry.
        assert_eq!(last, Some((PathBuf::from("e"), 0)));
    }

    #[test]
    fn long_paths_are_shortened_for_messages() {
        assert_eq!(shorten(Path::new("a/b/c")), "a/b/c");
        let usual: std::path::PathBuf = std::iter::repeat_n("d", SHOWN_LEVELS).collect();
        assert_eq!(shorten(&usual), usual.display().to_string());
        let deep: std::path::PathBuf = std::iter::repeat_n("d", 100).collect();
        assert_eq!(
            shorten(&deep),
            "d/d/d/d/d/d/d/d/…(84 more levels)…/d/d/d/d/d/d/d/d"
        );
    }
}
