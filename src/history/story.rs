//! A path's story, told from the logs: where the thing once at a path went (moves, including
//! moves of a directory that contained it), whether it was deleted and restored, and where it
//! is now.

use std::path::{Path, PathBuf};

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

enum Event {
    Move {
        time: String,
        from: PathBuf,
        to: PathBuf,
    },
    Delete {
        time: String,
        id: u64,
        path: PathBuf,
    },
    Restore {
        time: String,
        id: u64,
        path: PathBuf,
    },
}

impl Event {
    fn time(&self) -> &str {
        match self {
            Event::Move { time, .. } | Event::Delete { time, .. } | Event::Restore { time, .. } => {
                time
            }
        }
    }

    /// True when this event takes the thing at `p` away from it.
    fn departs(&self, p: &Path) -> bool {
        match self {
            Event::Move { from, .. } => p.starts_with(from),
            Event::Delete { path, .. } => p.starts_with(path),
            Event::Restore { .. } => false,
        }
    }
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
    pub fn story(&self, rel: &Path) -> Result<Story, HistoryError> {
        super::layout::components(rel)?;
        let state = self.state_dir(false)?;
        let mut timeline: Vec<Event> = self
            .read_moves(&state)?
            .into_iter()
            .map(|m| Event::Move {
                time: m.time,
                from: m.from,
                to: m.to,
            })
            .collect();
        timeline.extend(self.read_deletes(&state)?.into_iter().map(|d| {
            if d.restore {
                Event::Restore {
                    time: d.time,
                    id: d.id,
                    path: d.path,
                }
            } else {
                Event::Delete {
                    time: d.time,
                    id: d.id,
                    path: d.path,
                }
            }
        }));
        // Both logs use fixed-width UTC timestamps; a stable sort keeps each log's own order.
        timeline.sort_by(|a, b| a.time().cmp(b.time()));

        let exists_now = super::durable::occupied(&self.ws, rel);
        let Some(start) = timeline.iter().rposition(|e| e.departs(rel)) else {
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
        for e in &timeline[start..] {
            match (e, &trashed) {
                (Event::Move { time, from, to }, None) if cur.starts_with(from) => {
                    let next = rebase(&cur, from, to);
                    events.push(StoryEvent::Moved {
                        time: time.clone(),
                        from: cur.clone(),
                        to: next.clone(),
                        moved: from.clone(),
                    });
                    cur = next;
                }
                (Event::Delete { time, id, path }, None) if cur.starts_with(path) => {
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
                (Event::Restore { time, id, path }, Some((tid, below))) if id == tid => {
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
