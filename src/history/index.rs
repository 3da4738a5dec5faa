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
//! the same way and the index is rebuilt from scratch, so nothing on disk needs repairing when
//! the index is lost: a new process simply builds a new one.
//!
//! Questions are asked under the store lock, so the logs do not change while they are read.
//! Memory is proportional to the logs' content (each path is kept once per line it appears on).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use super::layout;
use super::log::{field_path, unescape};
use crate::workspace::{Stat, Workspace};

/// How much of a log is read at a time while catching up.
const CHUNK: usize = 64 * 1024;

/// A move-log line.
#[derive(Debug, Clone)]
pub(crate) struct Move {
    pub time: Arc<str>,
    pub from: Arc<Path>,
    pub to: Arc<Path>,
}

/// A delete-log line: a delete or a restore.
#[derive(Debug, Clone)]
pub(crate) struct Deletion {
    pub time: Arc<str>,
    pub restore: bool,
    pub id: u64,
    pub path: Arc<Path>,
}

/// Which log an event is in; moves sort before deletes at the same instant, as the two logs
/// were always merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Log {
    Moves,
    Deletes,
}

/// One event: its log and its position (0-based line) in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct At {
    pub log: Log,
    pub n: u32,
}

/// The independent parts of the index: the moves and deletes (one timeline), and the ledger of
/// imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
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
pub(crate) struct Index {
    seen: [Seen; 3],
    /// Every move, in log order.
    pub moves: Vec<Move>,
    /// Every delete and restore, in log order.
    pub deletes: Vec<Deletion>,
    /// The events that take something away from a path (a move *from* it, a delete *of* it),
    /// by that path, in timeline order.
    departures: HashMap<Arc<Path>, Vec<At>>,
    /// Restores by trash id, in log order.
    restores: HashMap<u64, Vec<u32>>,
    /// Deletes by trash id, in log order.
    deletions: HashMap<u64, Vec<u32>>,
    /// Deletes whose id has no restore: what may still be in the trash, in log order.
    pub in_trash: BTreeMap<u32, u64>,
    /// The largest trash id any line names.
    pub max_id: Option<u64>,
    /// Imported keys, by workspace path (as logged).
    imports: HashMap<Vec<u8>, HashSet<Vec<u8>>>,
    /// Sizes of trashed directories already measured: id → (device, inode, bytes).
    pub sizes: HashMap<u64, (u64, u64, u64)>,
}

impl Index {
    /// The time of an event.
    fn time(&self, at: At) -> &str {
        match at.log {
            Log::Moves => &self.moves[at.n as usize].time,
            Log::Deletes => &self.deletes[at.n as usize].time,
        }
    }

    /// The order of the merged timeline: by time (fixed-width UTC stamps sort as strings), then
    /// moves before deletes, then log order.
    pub fn key(&self, at: At) -> (&str, Log, u32) {
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
        let mut reader = file.take(st.size - seen.consumed);
        let mut carry: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            let mut chunk = &buf[..n];
            while let Some(i) = memchr::memchr(b'\n', chunk) {
                if carry.is_empty() {
                    self.line(which, &chunk[..i]);
                    seen.consumed += i as u64 + 1;
                } else {
                    carry.extend_from_slice(&chunk[..i]);
                    self.line(which, &carry);
                    seen.consumed += carry.len() as u64 + 1;
                    carry.clear();
                }
                chunk = &chunk[i + 1..];
            }
            carry.extend_from_slice(chunk);
        }
        // Whatever follows the last newline is a torn line (or one being appended right now):
        // not read, so it is read whole once it is complete.
        self.seen[which] = seen;
        Ok(())
    }

    /// Takes in one complete line of log `which`. Lines that do not parse are skipped, as every
    /// reader of the logs does.
    fn line(&mut self, which: usize, line: &[u8]) {
        if line.is_empty() {
            return;
        }
        let Some(fields) = line
            .split(|&b| b == b'\t')
            .map(unescape)
            .collect::<Option<Vec<_>>>()
        else {
            return;
        };
        match which {
            0 => {
                if let [time, from, to] = fields.as_slice() {
                    self.add_move(Move {
                        time: Arc::from(String::from_utf8_lossy(time).as_ref()),
                        from: Arc::from(field_path(from).as_path()),
                        to: Arc::from(field_path(to).as_path()),
                    });
                }
            }
            1 => {
                if let [time, action, id, path] = fields.as_slice() {
                    let restore = match action.as_slice() {
                        b"delete" => false,
                        b"restore" => true,
                        _ => return,
                    };
                    let Some(id) = std::str::from_utf8(id).ok().and_then(|s| s.parse().ok()) else {
                        return;
                    };
                    self.add_deletion(Deletion {
                        time: Arc::from(String::from_utf8_lossy(time).as_ref()),
                        restore,
                        id,
                        path: Arc::from(field_path(path).as_path()),
                    });
                }
            }
            _ => {
                if let [path, key] = fields.as_slice() {
                    self.imports
                        .entry(path.clone())
                        .or_default()
                        .insert(key.clone());
                }
            }
        }
    }

    fn add_move(&mut self, m: Move) {
        let at = At {
            log: Log::Moves,
            n: self.moves.len() as u32,
        };
        let from = m.from.clone();
        self.moves.push(m);
        self.depart(from, at);
    }

    fn add_deletion(&mut self, d: Deletion) {
        let n = self.deletes.len() as u32;
        let (id, restore, path) = (d.id, d.restore, d.path.clone());
        self.deletes.push(d);
        self.max_id = Some(self.max_id.map_or(id, |m| m.max(id)));
        if restore {
            self.restores.entry(id).or_default().push(n);
            if let Some(gone) = self.deletions.get(&id) {
                for n in gone {
                    self.in_trash.remove(n);
                }
            }
            self.sizes.remove(&id);
        } else {
            self.deletions.entry(id).or_default().push(n);
            if !self.restores.contains_key(&id) {
                self.in_trash.insert(n, id);
            }
            self.depart(
                path,
                At {
                    log: Log::Deletes,
                    n,
                },
            );
        }
    }

    /// Files `at` under `path`, keeping each list in timeline order (appends almost always go
    /// last; a clock that stepped back puts one earlier).
    fn depart(&mut self, path: Arc<Path>, at: At) {
        let mut list = self.departures.remove(&path).unwrap_or_default();
        let key = self.key(at);
        let pos = list.partition_point(|&other| self.key(other) <= key);
        list.insert(pos, at);
        self.departures.insert(path, list);
    }

    /// The last event that took something away from `path` or from a directory containing it.
    pub fn last_departure(&self, path: &Path) -> Option<At> {
        path.ancestors()
            .filter_map(|a| self.departures.get(a).and_then(|l| l.last().copied()))
            .max_by(|a, b| self.key(*a).cmp(&self.key(*b)))
    }

    /// The first event after `after` that takes something away from `path` or from a directory
    /// containing it.
    pub fn next_departure(&self, path: &Path, after: At) -> Option<At> {
        let bound = self.key(after);
        path.ancestors()
            .filter_map(|a| {
                let list = self.departures.get(a)?;
                let pos = list.partition_point(|&e| self.key(e) <= bound);
                list.get(pos).copied()
            })
            .min_by(|a, b| self.key(*a).cmp(&self.key(*b)))
    }

    /// The first restore of trash entry `id` after `after` in the timeline.
    pub fn next_restore(&self, id: u64, after: At) -> Option<At> {
        let bound = self.key(after);
        self.restores
            .get(&id)?
            .iter()
            .map(|&n| At {
                log: Log::Deletes,
                n,
            })
            .filter(|&at| self.key(at) > bound)
            .min_by(|a, b| self.key(*a).cmp(&self.key(*b)))
    }

    /// The first delete of trash entry `id`, in log order.
    pub fn first_delete(&self, id: u64) -> Option<&Deletion> {
        let n = *self.deletions.get(&id)?.first()?;
        self.deletes.get(n as usize)
    }

    /// The first restore of trash entry `id`, in log order.
    pub fn first_restore(&self, id: u64) -> Option<&Deletion> {
        let n = *self.restores.get(&id)?.first()?;
        self.deletes.get(n as usize)
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
