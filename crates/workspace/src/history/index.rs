//! An index of the store's append-only logs (`.moves`, `.deletes` and the `.imports` ledger), so
//! `search_file`, `list_trash`, `restore_file` and `audit import` answer in time that does not
//! grow with the length of the logs.
//!
//! The logs stay the only record; the index is derived from them and lives in memory, one per
//! [`Store`](super::Store). It is built the first time a question needs it and then kept up to
//! date by reading only what was appended since it last looked: each question first compares
//! the log's identity (device and inode) and size with what the index has read, and reads the
//! new complete lines, whether this process or another server on the same root appended them.
//! A log that was replaced, shortened or rewritten (by `check --repair`, or by hand) is noticed
//! the same way and its part of the index is rebuilt from scratch, so nothing on disk needs
//! repairing when the index is lost: a new process simply builds a new one.
//!
//! Questions are asked under the store lock, so the logs do not change while they are read.
//!
//! Memory stays close to the size of the logs: the fields are kept as the logs spell them
//! (escaped, see [`super::log::escape`]) in one byte arena, and events refer to them by offset.
//! Paths are compared in that escaped form: escaping never touches `/`, so the ancestors of an
//! escaped path are its prefixes that end before a `/`, exactly the escaped ancestors.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::layout;
use super::log::{escape, field_path, unescape};
use crate::{Stat, Workspace};

/// How much of a log is read at a time while catching up.
const CHUNK: usize = 64 * 1024;

/// The most the arena may hold: offsets are 32-bit to keep events small.
const ARENA_MAX: usize = u32::MAX as usize;

/// A field in the arena.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    off: u32,
    len: u32,
}

/// A move-log line.
#[derive(Debug, Clone, Copy)]
struct MoveLine {
    time: Span,
    from: Span,
    to: Span,
}

/// A delete-log line: a delete or a restore.
#[derive(Debug, Clone, Copy)]
struct DeleteLine {
    time: Span,
    path: Span,
    id: u64,
    restore: bool,
}

/// A move, as the story tells it.
#[derive(Debug, Clone)]
pub struct Move {
    pub time: String,
    pub from: PathBuf,
    pub to: PathBuf,
}

/// A delete or a restore, as the store reports it.
#[derive(Debug, Clone)]
pub struct Deletion {
    pub time: String,
    pub restore: bool,
    pub id: u64,
    pub path: PathBuf,
}

/// Which log an event is in; moves sort before deletes at the same instant, as the two logs
/// were always merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Log {
    Moves,
    Deletes,
}

/// One event: its log and its position (0-based line) in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct At {
    pub log: Log,
    pub n: u32,
}

/// A map from a 64-bit key to a list, kept small: the first value of each key inline (eight
/// bytes a key in the common case, a path left once), the rest, rarer, in a second map.
#[derive(Debug)]
struct Multi<T> {
    first: HashMap<u64, T, KeyHash>,
    more: HashMap<u64, Vec<T>, KeyHash>,
}

impl<T> Default for Multi<T> {
    fn default() -> Self {
        Multi {
            first: HashMap::default(),
            more: HashMap::default(),
        }
    }
}

impl<T: Copy> Multi<T> {
    /// The list of `key`, in order.
    fn get(&self, key: u64) -> impl Iterator<Item = T> + '_ {
        self.first
            .get(&key)
            .copied()
            .into_iter()
            .chain(self.more.get(&key).into_iter().flatten().copied())
    }

    /// The list of `key` as a vector (for the rare key with more than one value).
    fn list(&self, key: u64) -> Vec<T> {
        self.get(key).collect()
    }

    /// Appends `t` to the list of `key`.
    fn push(&mut self, key: u64, t: T) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.first.entry(key) {
            e.insert(t);
        } else {
            self.more.entry(key).or_default().push(t);
        }
    }

    /// Puts `t` at position `pos` of the list of `key`.
    fn insert(&mut self, key: u64, pos: usize, t: T) {
        match (pos, self.first.get(&key).copied()) {
            (0, Some(old)) => {
                self.first.insert(key, t);
                self.more.entry(key).or_default().insert(0, old);
            }
            (0, None) => {
                self.first.insert(key, t);
            }
            (_, _) => self.more.entry(key).or_default().insert(pos - 1, t),
        }
    }

    fn contains(&self, key: u64) -> bool {
        self.first.contains_key(&key)
    }
}

/// The map hasher for keys that are already hashes (or trash ids): no second hashing.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHash;

impl std::hash::BuildHasher for KeyHash {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

/// See [`KeyHash`]. Trash ids are small sequential numbers, so they are spread by one
/// multiplication; path hashes pass through that unchanged in quality.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The independent parts of the index: the moves and deletes (one timeline), and the ledger of
/// imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    History,
    Imports,
}

/// What the index has read of one log.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// Device and inode of the file read; `None` before the first read or when it was missing.
    file: Option<(u64, u64)>,
    /// Bytes read: always the end of a complete line.
    consumed: u64,
}

/// The index of one store's logs.
#[derive(Debug, Default)]
pub struct Index {
    seen: [Seen; 3],
    /// Every field the events refer to, escaped as in the logs.
    text: Vec<u8>,
    /// Every move, in log order.
    moves: Vec<MoveLine>,
    /// Every delete and restore, in log order.
    deletes: Vec<DeleteLine>,
    /// The events that take something away from a path (a move *from* it, a delete *of* it), by
    /// a hash of that path, in timeline order (a collision only adds entries to skip).
    departures: Multi<At>,
    /// The events that put something at a path (a move *to* it, a restore *to* it), by a hash
    /// of that path, in timeline order: what tells whether a path was occupied at a moment.
    arrivals: Multi<At>,
    /// Restores by trash id, in log order.
    restores: Multi<u32>,
    /// Deletes by trash id, in log order.
    deletions: Multi<u32>,
    /// The keys of the path hashes, random for each index, so paths cannot be chosen to collide.
    keys: std::collections::hash_map::RandomState,
    /// Deletes whose id has no restore: what may still be in the trash, in log order.
    pub in_trash: BTreeMap<u32, u64>,
    /// The largest trash id any line names.
    pub max_id: Option<u64>,
    /// Imported keys, by workspace path (as logged).
    imports: HashMap<Vec<u8>, HashSet<Vec<u8>>>,
    /// Sizes of trashed directories already measured: id → (device, inode, bytes).
    pub sizes: HashMap<u64, (u64, u64, u64)>,
}

/// `path` with `.` components and repeated or trailing slashes folded away, as `Path`
/// compares paths; unchanged (and not copied) in the usual case, a path the guard produced.
fn canonical(path: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    // One pass over the slashes (a path has few) instead of a scan per pattern: this runs for
    // every path of every logged line when an index is built.
    let odd = path.starts_with(b"./")
        || path == b"."
        || memchr::memchr_iter(b'/', path)
            .any(|i| matches!(&path[i + 1..], [] | [b'/', ..] | [b'.'] | [b'.', b'/', ..]));
    if !odd {
        return std::borrow::Cow::Borrowed(path);
    }
    let p = Path::new(std::ffi::OsStr::from_bytes(path));
    let rebuilt: PathBuf = p.components().collect();
    std::borrow::Cow::Owned(rebuilt.as_os_str().as_bytes().to_vec())
}

/// The escaped form of the path in one (still escaped) log field, canonical: the field itself
/// when it needs nothing (the usual case), `None` for a field no writer of the store produced.
/// `plain` says the whole line holds no escape (checked once per line, not per field).
fn path_field(field: &[u8], plain: bool) -> Option<std::borrow::Cow<'_, [u8]>> {
    if plain || memchr::memchr(b'\\', field).is_none() {
        return Some(match canonical(field) {
            std::borrow::Cow::Borrowed(b) => std::borrow::Cow::Borrowed(b),
            std::borrow::Cow::Owned(v) => std::borrow::Cow::Owned(escape(&v)),
        });
    }
    let raw = unescape(field)?;
    Some(std::borrow::Cow::Owned(escape(&canonical(&raw))))
}

/// `bytes` as lossy UTF-8 (how times were always compared), not copied when already valid, the
/// usual case: `std::str::from_utf8` validates far faster than the lossy decoder walks.
fn utf8_lossy(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match std::str::from_utf8(bytes) {
        Ok(_) => std::borrow::Cow::Borrowed(bytes),
        Err(_) => std::borrow::Cow::Owned(String::from_utf8_lossy(bytes).into_owned().into_bytes()),
    }
}

/// A text field (a time, an action) unescaped.
fn text_field(field: &[u8], plain: bool) -> Option<std::borrow::Cow<'_, [u8]>> {
    if plain || memchr::memchr(b'\\', field).is_none() {
        Some(std::borrow::Cow::Borrowed(field))
    } else {
        unescape(field).map(std::borrow::Cow::Owned)
    }
}

impl Index {
    fn span(&self, s: Span) -> &[u8] {
        &self.text[s.off as usize..(s.off + s.len) as usize]
    }

    /// Keeps `bytes` in the arena.
    fn keep(&mut self, bytes: &[u8]) -> Option<Span> {
        if self.text.len() + bytes.len() > ARENA_MAX {
            return None;
        }
        let span = Span {
            off: self.text.len() as u32,
            len: bytes.len() as u32,
        };
        self.text.extend_from_slice(bytes);
        Some(span)
    }

    /// The time of an event, as logged (lossy UTF-8, as it was always compared).
    fn time(&self, at: At) -> &[u8] {
        match at.log {
            Log::Moves => self.span(self.moves[at.n as usize].time),
            Log::Deletes => self.span(self.deletes[at.n as usize].time),
        }
    }

    /// The path an event takes something away from (escaped).
    fn departed(&self, at: At) -> &[u8] {
        match at.log {
            Log::Moves => self.span(self.moves[at.n as usize].from),
            Log::Deletes => self.span(self.deletes[at.n as usize].path),
        }
    }

    /// The path an event puts something at (escaped): the destination of a move, the path of
    /// a restore; `None` for a delete.
    fn arrived(&self, at: At) -> Option<&[u8]> {
        match at.log {
            Log::Moves => Some(self.span(self.moves[at.n as usize].to)),
            Log::Deletes => {
                let d = self.deletes[at.n as usize];
                d.restore.then(|| self.span(d.path))
            }
        }
    }

    /// The order of the merged timeline: by time (fixed-width UTC stamps sort as strings), then
    /// moves before deletes, then log order.
    fn key(&self, at: At) -> (&[u8], Log, u32) {
        (self.time(at), at.log, at.n)
    }

    /// Brings the `part` of the index up to date with its logs in `state` (root-relative
    /// `.filesystem`). Each part reads only its own logs, so a broken `.imports` does not stop
    /// `search_file`, nor a broken `.moves` an import.
    pub fn refresh(&mut self, ws: &Workspace, state: &Path, part: Part) -> io::Result<()> {
        let logs: &[usize] = match part {
            Part::History => &[0, 1],
            Part::Imports => &[2],
        };
        let names = [layout::MOVES_LOG, layout::DELETES_LOG, layout::IMPORTS_LOG];
        let mut open = Vec::with_capacity(logs.len());
        let mut rebuild = false;
        for &i in logs {
            let path = state.join(names[i]);
            let file = match ws.open_regular(&path, OFlags::RDONLY, Mode::empty()) {
                Ok(f) => Some(f),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            };
            let seen = self.seen[i];
            rebuild |= match &file {
                None => seen.consumed > 0,
                Some(f) => !still_the_same(f, seen)?,
            };
            open.push((i, file));
        }
        if rebuild {
            self.reset(part);
        }
        for (i, file) in open {
            if let Some(file) = file {
                self.catch_up(i, file)?;
            }
        }
        Ok(())
    }

    /// Forgets everything read for `part`, to read its logs again from the start.
    pub fn reset(&mut self, part: Part) {
        match part {
            Part::History => {
                let imports = std::mem::take(&mut self.imports);
                let seen = self.seen[2];
                *self = Index::default();
                self.imports = imports;
                self.seen[2] = seen;
            }
            Part::Imports => {
                self.imports.clear();
                self.seen[2] = Seen::default();
            }
        }
    }

    /// Reads the complete lines of log `which` past what was read before.
    fn catch_up(&mut self, which: usize, mut file: std::fs::File) -> io::Result<()> {
        use std::io::{Seek, SeekFrom};
        let st = Stat::of(&file)?;
        let mut seen = self.seen[which];
        if seen.file.is_none() {
            seen.file = Some((st.dev, st.ino));
        }
        if st.size <= seen.consumed {
            self.seen[which] = seen;
            return Ok(());
        }
        file.seek(SeekFrom::Start(seen.consumed))?;
        // What is appended to the arena is at most what is read: reserved up front, the arena
        // does not end up with up to twice the room it needs.
        let remaining = st.size - seen.consumed;
        let room = usize::try_from(remaining).unwrap_or(0).min(ARENA_MAX);
        if which != 2 && seen.consumed == 0 {
            self.text.reserve_exact(room);
        } else if which != 2 {
            self.text.reserve(room);
        }
        let mut reader = file.take(remaining);
        let mut carry: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        let mut full = false;
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            let mut chunk = &buf[..n];
            while let Some(i) = memchr::memchr(b'\n', chunk) {
                let ok = if carry.is_empty() {
                    let ok = self.line(which, &chunk[..i]);
                    seen.consumed += i as u64 + 1;
                    ok
                } else {
                    carry.extend_from_slice(&chunk[..i]);
                    let ok = self.line(which, &carry);
                    seen.consumed += carry.len() as u64 + 1;
                    carry.clear();
                    ok
                };
                full |= !ok;
                chunk = &chunk[i + 1..];
            }
            carry.extend_from_slice(chunk);
        }
        // Whatever follows the last newline is a torn line (or one being appended right now):
        // not read, so it is read whole once it is complete.
        self.seen[which] = seen;
        if full {
            return Err(io::Error::other(
                "the move and delete logs hold more than 4 GiB of paths, more than the index keeps; move .filesystem/ aside to start a new store",
            ));
        }
        Ok(())
    }

    /// Takes in one complete line of log `which`. Lines that do not parse are skipped, as every
    /// reader of the logs does. False only when the arena is full.
    fn line(&mut self, which: usize, line: &[u8]) -> bool {
        if line.is_empty() {
            return true;
        }
        // Most lines escape nothing: one search of the whole line spares one per field.
        let plain = memchr::memchr(b'\\', line).is_none();
        // Fields split at tabs with memchr rather than a byte-by-byte split: this runs once per
        // logged line when an index is built.
        let mut rest = Some(line);
        let mut next = || {
            let field = rest?;
            match memchr::memchr(b'\t', field) {
                Some(i) => {
                    rest = Some(&field[i + 1..]);
                    Some(&field[..i])
                }
                None => {
                    rest = None;
                    Some(field)
                }
            }
        };
        let (a, b, c, d, extra) = (next(), next(), next(), next(), next());
        if extra.is_some() {
            return true;
        }
        match (which, a, b, c, d) {
            (0, Some(time), Some(from), Some(to), None) => {
                let (Some(time), Some(from), Some(to)) = (
                    text_field(time, plain),
                    path_field(from, plain),
                    path_field(to, plain),
                ) else {
                    return true;
                };
                let time = utf8_lossy(&time);
                let (Some(time), Some(from), Some(to)) =
                    (self.keep(&time), self.keep(&from), self.keep(&to))
                else {
                    return false;
                };
                self.add_move(MoveLine { time, from, to });
            }
            (1, Some(time), Some(action), Some(id), Some(path)) => {
                let (Some(time), Some(action), Some(id), Some(path)) = (
                    text_field(time, plain),
                    text_field(action, plain),
                    text_field(id, plain),
                    path_field(path, plain),
                ) else {
                    return true;
                };
                let restore = match action.as_ref() {
                    b"delete" => false,
                    b"restore" => true,
                    _ => return true,
                };
                let Some(id) = std::str::from_utf8(&id).ok().and_then(|s| s.parse().ok()) else {
                    return true;
                };
                let time = utf8_lossy(&time);
                let (Some(time), Some(path)) = (self.keep(&time), self.keep(&path)) else {
                    return false;
                };
                self.add_deletion(DeleteLine {
                    time,
                    path,
                    id,
                    restore,
                });
            }
            (2, Some(path), Some(key), None, None) => {
                if let (Some(path), Some(key)) = (unescape(path), unescape(key)) {
                    self.imports.entry(path).or_default().insert(key);
                }
            }
            _ => {}
        }
        true
    }

    fn add_move(&mut self, m: MoveLine) {
        let at = At {
            log: Log::Moves,
            n: self.moves.len() as u32,
        };
        self.moves.push(m);
        self.depart(at);
        self.arrive(at);
    }

    fn add_deletion(&mut self, d: DeleteLine) {
        let n = self.deletes.len() as u32;
        let (id, restore) = (d.id, d.restore);
        self.deletes.push(d);
        self.max_id = Some(self.max_id.map_or(id, |m| m.max(id)));
        if restore {
            self.restores.push(id, n);
            self.arrive(At {
                log: Log::Deletes,
                n,
            });
            for gone in self.deletions.list(id) {
                self.in_trash.remove(&gone);
            }
            self.sizes.remove(&id);
        } else {
            self.deletions.push(id, n);
            if !self.restores.contains(id) {
                self.in_trash.insert(n, id);
            }
            self.depart(At {
                log: Log::Deletes,
                n,
            });
        }
    }

    /// A hash of an (escaped) path, keyed for this index.
    fn hash(&self, bytes: &[u8]) -> u64 {
        self.keys.hash_one(bytes)
    }

    /// Files `at` under the path it departs, keeping each list in timeline order (appends
    /// almost always go last; a clock that stepped back puts one earlier).
    fn depart(&mut self, at: At) {
        let h = self.hash(self.departed(at));
        self.file_under(|index| &mut index.departures, h, at);
    }

    /// Files `at` under the path it arrives at, as [`Index::depart`] does for departures.
    fn arrive(&mut self, at: At) {
        let Some(path) = self.arrived(at) else {
            return;
        };
        let h = self.hash(path);
        self.file_under(|index| &mut index.arrivals, h, at);
    }

    /// Files `at` under `h` in the map `which` picks (departures or arrivals), for both
    /// [`Index::depart`] and [`Index::arrive`]. The usual case, a path with no earlier event,
    /// needs no ordering (nor the map moved out of `self` for it).
    fn file_under(&mut self, which: fn(&mut Index) -> &mut Multi<At>, h: u64, at: At) {
        let map = which(self);
        if !map.contains(h) {
            map.push(h, at);
            return;
        }
        let mut map = std::mem::take(which(self));
        self.file_in_order(&mut map, h, at);
        *which(self) = map;
    }

    /// Puts `at` in the list of `h` in `map`, keeping the list in timeline order.
    fn file_in_order(&self, map: &mut Multi<At>, h: u64, at: At) {
        if !map.contains(h) {
            map.push(h, at);
            return;
        }
        let key = self.key(at);
        let list = map.list(h);
        let pos = list.partition_point(|&other| self.key(other) <= key);
        if pos == list.len() {
            map.push(h, at);
        } else {
            map.insert(h, pos, at);
        }
    }

    /// The last departure from `escaped` or a directory containing it before `bound`: the
    /// query both [`Index::occupied`] and [`Index::last_departure`] step back with.
    fn departure_before(&self, escaped: &[u8], bound: Option<At>) -> Option<At> {
        self.last_before(
            &self.departures,
            |i, at| Some(i.departed(at)),
            escaped,
            bound,
        )
    }

    /// The last event of `map` strictly before `bound` (or at all, without one) whose path
    /// (`departed` or `arrived`, as `path_of` says) is `path` or a directory containing it.
    fn last_before(
        &self,
        map: &Multi<At>,
        path_of: impl Fn(&Self, At) -> Option<&[u8]>,
        escaped: &[u8],
        bound: Option<At>,
    ) -> Option<At> {
        let bound = bound.map(|b| self.key(b));
        Self::ancestors(escaped)
            .filter_map(|a| {
                let h = self.hash(a);
                let list = map.list(h);
                let pos = match bound {
                    Some(b) => list.partition_point(|&e| self.key(e) < b),
                    None => list.len(),
                };
                list[..pos]
                    .iter()
                    .rev()
                    .copied()
                    .find(|&at| path_of(self, at) == Some(a))
            })
            .max_by(|a, b| self.key(*a).cmp(&self.key(*b)))
    }

    /// Whether, as far as the logs tell, something was at `escaped` right before event
    /// `bound`. The logs record every way something leaves a path (a move or a delete of it or
    /// of a directory containing it) and the logged ways something arrives (a move or a restore
    /// to it or to a containing directory); so the last such event before `bound` decides:
    /// after a departure the path is empty; after an arrival at the path itself it is occupied;
    /// after an arrival at a containing directory it is occupied if the corresponding path in
    /// what arrived was (the moved directory's path before the move, the deleted directory's
    /// path before the delete), asked the same way further back. With no event at all, the
    /// path is taken to be occupied (it was there before the logs began, or was created, which
    /// is not logged). A loop, never a recursion: each step goes strictly back in time.
    fn occupied(&self, escaped: &[u8], bound: At) -> bool {
        let mut path = escaped.to_vec();
        let mut bound = bound;
        loop {
            let gone = self.departure_before(&path, Some(bound));
            let came = self.last_before(&self.arrivals, Self::arrived, &path, Some(bound));
            let came = match (gone, came) {
                (None, None) => return true,
                (Some(_), None) => return false,
                // The same move can be both only in a log no server wrote; leaving wins.
                (Some(g), Some(c)) if self.key(g) >= self.key(c) => return false,
                (_, Some(c)) => c,
            };
            let dest = self.arrived(came).unwrap_or_default();
            if dest == path.as_slice() {
                return true;
            }
            // `dest` is a proper ancestor (escaped prefix ending before a `/`, or the root).
            let rest = if dest.is_empty() {
                path.clone()
            } else {
                path[dest.len() + 1..].to_vec()
            };
            let source = match came.log {
                Log::Moves => {
                    bound = came;
                    self.span(self.moves[came.n as usize].from).to_vec()
                }
                Log::Deletes => {
                    let id = self.deletes[came.n as usize].id;
                    let key = self.key(came);
                    let delete = self
                        .deletions
                        .get(id)
                        .map(|n| At {
                            log: Log::Deletes,
                            n,
                        })
                        .filter(|&at| self.key(at) < key)
                        .max_by(|a, b| self.key(*a).cmp(&self.key(*b)));
                    let Some(delete) = delete else {
                        return true;
                    };
                    bound = delete;
                    self.span(self.deletes[delete.n as usize].path).to_vec()
                }
            };
            path = if source.is_empty() {
                rest
            } else {
                let mut p = source;
                p.push(b'/');
                p.extend_from_slice(&rest);
                p
            };
        }
    }

    /// The escaped ancestors of `path` (itself first, the empty path last), as slices of its
    /// escaped form.
    fn ancestors(escaped: &[u8]) -> impl Iterator<Item = &[u8]> {
        std::iter::once(escaped)
            .chain(
                memchr::memrchr_iter(b'/', escaped)
                    .map(move |i| &escaped[..i])
                    .filter(|a| !a.is_empty()),
            )
            .chain((!escaped.is_empty()).then_some(&b""[..]))
    }

    /// The events departing exactly `ancestor`, in timeline order.
    fn departing<'a>(&'a self, ancestor: &'a [u8]) -> impl Iterator<Item = At> + 'a {
        self.departures
            .get(self.hash(ancestor))
            .filter(move |&at| self.departed(at) == ancestor)
    }

    /// The last event that took something away from `path`: a move or delete of the path
    /// itself, or of a directory containing it at a moment something was at the path (see
    /// [`Index::occupied`]). A directory moved after the file in it was renamed away carries
    /// nothing of that name; the story starts at the rename.
    pub fn last_departure(&self, path: &Path) -> Option<At> {
        let escaped = escape(path.as_os_str().as_bytes());
        let mut bound = None;
        loop {
            let at = self.departure_before(&escaped, bound)?;
            if self.departed(at) == escaped.as_slice() || self.occupied(&escaped, at) {
                return Some(at);
            }
            bound = Some(at);
        }
    }

    /// The first event after `after` that takes something away from `path` or from a directory
    /// containing it.
    pub fn next_departure(&self, path: &Path, after: At) -> Option<At> {
        let escaped = escape(path.as_os_str().as_bytes());
        let bound = self.key(after);
        Self::ancestors(&escaped)
            .filter_map(|a| {
                let h = self.hash(a);
                if !self.departures.more.contains_key(&h) {
                    // One event at most: no search needed.
                    return self.departing(a).find(|&at| self.key(at) > bound);
                }
                let list = self.departures.list(h);
                let pos = list.partition_point(|&e| self.key(e) <= bound);
                list[pos..]
                    .iter()
                    .copied()
                    .find(|&at| self.departed(at) == a)
            })
            .min_by(|a, b| self.key(*a).cmp(&self.key(*b)))
    }

    /// The first restore of trash entry `id` after `after` in the timeline.
    pub fn next_restore(&self, id: u64, after: At) -> Option<At> {
        let bound = self.key(after);
        self.restores
            .get(id)
            .map(|n| At {
                log: Log::Deletes,
                n,
            })
            .filter(|&at| self.key(at) > bound)
            .min_by(|a, b| self.key(*a).cmp(&self.key(*b)))
    }

    /// Move `n`.
    pub fn move_at(&self, n: u32) -> Move {
        let m = self.moves[n as usize];
        Move {
            time: String::from_utf8_lossy(self.span(m.time)).into_owned(),
            from: self.path(m.from),
            to: self.path(m.to),
        }
    }

    /// Delete-log line `n`.
    pub fn deletion(&self, n: u32) -> Deletion {
        let d = self.deletes[n as usize];
        Deletion {
            time: String::from_utf8_lossy(self.span(d.time)).into_owned(),
            restore: d.restore,
            id: d.id,
            path: self.path(d.path),
        }
    }

    fn path(&self, s: Span) -> PathBuf {
        field_path(&unescape(self.span(s)).unwrap_or_default())
    }

    /// The last move logged.
    pub fn last_move(&self) -> Option<Move> {
        self.moves
            .len()
            .checked_sub(1)
            .map(|n| self.move_at(n as u32))
    }

    /// The first delete of trash entry `id`, in log order.
    pub fn first_delete(&self, id: u64) -> Option<Deletion> {
        let n = self.deletions.get(id).next()?;
        Some(self.deletion(n))
    }

    /// The first restore of trash entry `id`, in log order.
    pub fn first_restore(&self, id: u64) -> Option<Deletion> {
        let n = self.restores.get(id).next()?;
        Some(self.deletion(n))
    }

    /// The keys imported for workspace path `rel`.
    pub fn imported(&self, rel: &Path) -> HashSet<Vec<u8>> {
        self.imports
            .get(rel.as_os_str().as_bytes())
            .cloned()
            .unwrap_or_default()
    }
}

/// True when `file` is the log the index read and it only grew since: the same inode, at least
/// as long, and still a newline right before where reading stopped (a log cut and refilled to
/// the same length would fail that).
fn still_the_same(file: &std::fs::File, seen: Seen) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let st = Stat::of(file)?;
    match seen.file {
        None => Ok(seen.consumed == 0),
        Some(id) if id != (st.dev, st.ino) || st.size < seen.consumed => Ok(false),
        Some(_) if seen.consumed == 0 => Ok(true),
        Some(_) => {
            let mut last = [0u8; 1];
            file.read_exact_at(&mut last, seen.consumed - 1)?;
            Ok(last[0] == b'\n')
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_of_an_escaped_path_are_its_prefixes_before_each_slash() {
        let got: Vec<&[u8]> = Index::ancestors(b"a/b\\tc/d").collect();
        assert_eq!(got, vec![&b"a/b\\tc/d"[..], b"a/b\\tc", b"a", b""]);
        // As `Path` compares them: a leading `.` stays, the rest folds away.
        assert_eq!(canonical(b"./a//b/./c/"), &b"./a/b/c"[..]);
        assert_eq!(canonical(b"a/b"), &b"a/b"[..]);
    }

    proptest::proptest! {
        /// The fast path (unchanged, not copied) is taken exactly when `Path` would fold
        /// nothing away.
        #[test]
        fn canonical_agrees_with_path_components(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["a", "b.c", ".", "..", "", ".x"]),
                1..6,
            ),
        ) {
            let joined = parts.join("/");
            let bytes = joined.as_bytes();
            let folded: PathBuf = Path::new(&joined).components().collect();
            let got = canonical(bytes);
            proptest::prop_assert_eq!(got.as_ref(), folded.as_os_str().as_bytes());
        }
    }
}
