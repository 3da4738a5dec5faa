//! A path's story, told from the logs: where the thing once at a path went (moves, including
//! moves of a directory that contained it), whether it was deleted and restored, and where it
//! is now.

use std::path::{Path, PathBuf};

use super::index::Log;
use super::{HistoryError, Store};

/// One step in a path's story.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoryEvent {
    /// It moved from `from` to `to` because `moved` (itself or a directory containing it) was
    /// moved.
    Moved {
        /// When (RFC 3339, UTC).
        time: String,
        /// Where it was.
        from: PathBuf,
        /// Where it went.
        to: PathBuf,
        /// The path the move named: the thing itself or a containing directory.
        moved: PathBuf,
    },
    /// It went to the trash because `deleted` (itself or a containing directory) was deleted.
    Deleted {
        /// When.
        time: String,
        /// The trash id.
        id: u64,
        /// The path the delete named.
        deleted: PathBuf,
    },
    /// It came back from the trash to `to`.
    Restored {
        /// When.
        time: String,
        /// The trash id.
        id: u64,
        /// Where it is after the restore.
        to: PathBuf,
    },
}

/// Where the thing is at the end of its story.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Whereabouts {
    /// Something is at this path now.
    Exists(PathBuf),
    /// In the trash under this id (`restore_file` brings it back).
    InTrash(u64),
    /// The logs lead here, but nothing is here now (changed outside the server).
    Missing(PathBuf),
    /// The logs never mention the path and nothing is there.
    NeverSeen,
}

/// What the store knows about one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Story {
    /// The path asked about.
    pub path: PathBuf,
    /// True when something is at the path now.
    pub exists_now: bool,
    /// What happened to the last thing that left the path, oldest first (empty if nothing
    /// ever left it).
    pub events: Vec<StoryEvent>,
    /// Where that thing is now (or, if nothing ever left, whether the path exists).
    pub now: Whereabouts,
}

/// `base` with the part of `p` below `prefix` appended (`a/x` moved by `a`→`b` is `b/x`).
fn rebase(p: &Path, prefix: &Path, base: &Path) -> PathBuf {
    match p.strip_prefix(prefix) {
        Ok(rest) if !rest.as_os_str().is_empty() => base.join(rest),
        _ => base.to_path_buf(),
    }
}

impl Store {
    /// The story of root-relative `rel`: exists now, moved (following the whole chain), deleted
    /// (and whether restored), or never seen. Reading only; takes no lock because the logs are
    /// append-only and a torn last line is ignored.
    ///
    /// The logs are one timeline (both use fixed-width UTC stamps; moves come first at the same
    /// instant). The story starts at the last event that took something away from the path: a
    /// move or delete of the path itself, or of a directory containing it while something was
    /// at the path (see `Index::last_departure`). Each next step is looked up in the index by
    /// the path the thing has then (or, while it is in the trash, by its trash id): the time
    /// taken grows with the length of the story, the depth of the path and the number of events
    /// naming the path or its directories, not with the length of the logs. The walk is a
    /// loop, never a recursion, however long the chain of moves.
    pub fn story(&self, rel: &Path) -> Result<Story, HistoryError> {
        super::layout::components(rel)?;
        let state = self.state_dir(false)?;
        let index = self.index(&state)?;

        let exists_now = super::durable::occupied(&self.ws, rel);
        let Some(start) = index.last_departure(rel) else {
            return Ok(Story {
                path: rel.to_path_buf(),
                exists_now,
                events: Vec::new(),
                now: if exists_now {
                    Whereabouts::Exists(rel.to_path_buf())
                } else {
                    Whereabouts::NeverSeen
                },
            });
        };
        let mut cur = rel.to_path_buf();
        // While in the trash: its id, and the part of the path below what was deleted.
        let mut trashed: Option<(u64, PathBuf)> = None;
        let mut events = Vec::new();
        let mut next = Some(start);
        while let Some(at) = next {
            match at.log {
                Log::Moves => {
                    let m = index.move_at(at.n);
                    let moved = rebase(&cur, &m.from, &m.to);
                    events.push(StoryEvent::Moved {
                        time: m.time,
                        from: cur.clone(),
                        to: moved.clone(),
                        moved: m.from,
                    });
                    cur = moved;
                }
                Log::Deletes => {
                    let d = index.deletion(at.n);
                    if d.restore {
                        if let Some((_, below)) = trashed.take() {
                            cur = if below.as_os_str().is_empty() {
                                d.path.clone()
                            } else {
                                d.path.join(below)
                            };
                        }
                        events.push(StoryEvent::Restored {
                            time: d.time,
                            id: d.id,
                            to: cur.clone(),
                        });
                    } else {
                        events.push(StoryEvent::Deleted {
                            time: d.time,
                            id: d.id,
                            deleted: d.path.clone(),
                        });
                        let below = cur
                            .strip_prefix(&d.path)
                            .unwrap_or(Path::new(""))
                            .to_path_buf();
                        trashed = Some((d.id, below));
                    }
                }
            }
            next = match &trashed {
                Some((id, _)) => index.next_restore(*id, at),
                None => index.next_departure(&cur, at),
            };
        }
        let now = match trashed {
            Some((id, _)) => Whereabouts::InTrash(id),
            None if super::durable::occupied(&self.ws, &cur) => Whereabouts::Exists(cur),
            None => Whereabouts::Missing(cur),
        };
        Ok(Story {
            path: rel.to_path_buf(),
            exists_now,
            events,
            now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::layout;
    use crate::history::log::{field_path, HistoryLog};
    use crate::Workspace;

    /// The story as the logs tell it read whole and merged by a stable sort: the reference the
    /// indexed walk must agree with.
    fn reference(store: &Store, rel: &Path) -> (Vec<StoryEvent>, Option<(u64, PathBuf)>, PathBuf) {
        enum E {
            M(String, PathBuf, PathBuf),
            D(String, bool, u64, PathBuf),
        }
        let state = Path::new(".filesystem");
        let log = |name| HistoryLog::new(store.ws.clone(), state.join(name));
        let mut timeline: Vec<E> = log(layout::MOVES_LOG)
            .read()
            .expect("moves")
            .into_iter()
            .filter_map(|f| match f.as_slice() {
                [t, a, b] => Some(E::M(
                    String::from_utf8_lossy(t).into_owned(),
                    field_path(a),
                    field_path(b),
                )),
                _ => None,
            })
            .collect();
        timeline.extend(
            log(layout::DELETES_LOG)
                .read()
                .expect("deletes")
                .into_iter()
                .filter_map(|f| match f.as_slice() {
                    [t, a, id, p] => Some(E::D(
                        String::from_utf8_lossy(t).into_owned(),
                        a.as_slice() == b"restore",
                        std::str::from_utf8(id).ok()?.parse().ok()?,
                        field_path(p),
                    )),
                    _ => None,
                }),
        );
        let time = |e: &E| match e {
            E::M(t, ..) | E::D(t, ..) => t.clone(),
        };
        timeline.sort_by_key(time);
        let departs = |e: &E| match e {
            E::M(_, from, _) => rel.starts_with(from),
            E::D(_, restore, _, p) => !restore && rel.starts_with(p),
        };
        // Whether something was at `p` right before `timeline[end]`: the last event before it
        // that left from or arrived at `p` or a directory containing it decides, following an
        // arrival at a containing directory back to where it came from.
        let occupied = |p: &Path, end: usize| -> bool {
            let (mut p, mut end) = (p.to_path_buf(), end);
            'back: loop {
                for j in (0..end).rev() {
                    match &timeline[j] {
                        E::M(_, from, _) if p.starts_with(from) => return false,
                        E::D(_, false, _, path) if p.starts_with(path) => return false,
                        E::M(_, from, to) if p.starts_with(to) => {
                            if p == *to {
                                return true;
                            }
                            p = rebase(&p, to, from);
                            end = j;
                            continue 'back;
                        }
                        E::D(_, true, id, to) if p.starts_with(to) => {
                            if p == *to {
                                return true;
                            }
                            let Some(k) = (0..j)
                                .rev()
                                .find(|&k| matches!(&timeline[k], E::D(_, false, i, _) if i == id))
                            else {
                                return true;
                            };
                            let E::D(_, _, _, from) = &timeline[k] else {
                                unreachable!()
                            };
                            p = rebase(&p, to, from);
                            end = k;
                            continue 'back;
                        }
                        _ => {}
                    }
                }
                return true;
            }
        };
        let mut cur = rel.to_path_buf();
        let mut trashed: Option<(u64, PathBuf)> = None;
        let mut events = Vec::new();
        let exact = |e: &E| match e {
            E::M(_, from, _) => rel == from,
            E::D(_, _, _, p) => rel == p,
        };
        let Some(start) = (0..timeline.len())
            .rev()
            .find(|&i| departs(&timeline[i]) && (exact(&timeline[i]) || occupied(rel, i)))
        else {
            return (events, trashed, cur);
        };
        for e in &timeline[start..] {
            match (e, &trashed) {
                (E::M(time, from, to), None) if cur.starts_with(from) => {
                    let next = rebase(&cur, from, to);
                    events.push(StoryEvent::Moved {
                        time: time.clone(),
                        from: cur.clone(),
                        to: next.clone(),
                        moved: from.clone(),
                    });
                    cur = next;
                }
                (E::D(time, false, id, path), None) if cur.starts_with(path) => {
                    events.push(StoryEvent::Deleted {
                        time: time.clone(),
                        id: *id,
                        deleted: path.clone(),
                    });
                    let below = cur
                        .strip_prefix(path)
                        .unwrap_or(Path::new(""))
                        .to_path_buf();
                    trashed = Some((*id, below));
                }
                (E::D(time, true, id, path), Some((tid, below))) if id == tid => {
                    cur = if below.as_os_str().is_empty() {
                        path.clone()
                    } else {
                        path.join(below)
                    };
                    events.push(StoryEvent::Restored {
                        time: time.clone(),
                        id: *id,
                        to: cur.clone(),
                    });
                    trashed = None;
                }
                _ => {}
            }
        }
        (events, trashed, cur)
    }

    #[test]
    fn the_indexed_story_agrees_with_reading_the_whole_logs_as_they_grow() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join(".filesystem")).expect("mkdir");
        let ws = Workspace::open(&root).expect("ws");
        let store = Store::new(ws.clone(), false);
        let state = Path::new(".filesystem");
        let moves = HistoryLog::new(ws.clone(), state.join(layout::MOVES_LOG));
        let deletes = HistoryLog::new(ws.clone(), state.join(layout::DELETES_LOG));
        let paths = [
            "a",
            "b",
            "a/x",
            "b/x",
            "c",
            "a/x/y",
            "c/y",
            "d",
            "t\tab",
            "t\tab/x\\y",
        ];
        // A small deterministic generator: the same sequence every run.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut id = 0u64;
        for round in 0..400 {
            // Times repeat now and then, and the two logs interleave.
            let t = format!("2026-01-01T00:00:{:02}.{:06}Z", round / 20, round % 20 / 3);
            match next(5) {
                0 | 1 => moves
                    .append(&[
                        t.as_bytes(),
                        paths[next(paths.len())].as_bytes(),
                        paths[next(paths.len())].as_bytes(),
                    ])
                    .expect("move"),
                2 | 3 => {
                    id += 1;
                    deletes
                        .append(&[
                            t.as_bytes(),
                            b"delete",
                            id.to_string().as_bytes(),
                            paths[next(paths.len())].as_bytes(),
                        ])
                        .expect("delete")
                }
                _ => deletes
                    .append(&[
                        t.as_bytes(),
                        b"restore",
                        (1 + next(id.max(1) as usize) as u64).to_string().as_bytes(),
                        paths[next(paths.len())].as_bytes(),
                    ])
                    .expect("restore"),
            }
            if round % 37 == 0 || round == 399 {
                for p in paths {
                    let story = store.story(Path::new(p)).expect("story");
                    let (events, trashed, cur) = reference(&store, Path::new(p));
                    assert_eq!(story.events, events, "{p} after {round} lines");
                    match (&story.now, trashed) {
                        (Whereabouts::InTrash(a), Some((b, _))) => assert_eq!(*a, b),
                        (Whereabouts::Missing(a) | Whereabouts::Exists(a), None) => {
                            if !events.is_empty() {
                                assert_eq!(*a, cur, "{p}")
                            }
                        }
                        (Whereabouts::NeverSeen, None) => assert!(events.is_empty()),
                        (now, t) => panic!("{p}: {now:?} vs {t:?}"),
                    }
                }
            }
        }
        // A log rewritten behind the index's back (as `check --repair` may) is read again.
        std::fs::write(
            root.join(".filesystem/.moves"),
            "2026-01-02T00:00:00.000000Z\ta\tz\n",
        )
        .expect("rewrite");
        std::fs::write(root.join(".filesystem/.deletes"), "").expect("rewrite");
        let story = store.story(Path::new("a/x")).expect("story");
        assert_eq!(story.now, Whereabouts::Missing(PathBuf::from("z/x")));
        assert_eq!(story.events.len(), 1);
    }
}
