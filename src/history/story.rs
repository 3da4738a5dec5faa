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
    /// instant). The story starts at the last event that took something away from the path or a
    /// directory containing it, and each next step is looked up in the index by the path the
    /// thing has then (or, while it is in the trash, by its trash id): the time taken grows with
    /// the length of the story and the depth of the path, not with the length of the logs. The
    /// walk is a loop, never a recursion, however long the chain of moves.
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
                    let m = &index.moves[at.n as usize];
                    let moved = rebase(&cur, &m.from, &m.to);
                    events.push(StoryEvent::Moved {
                        time: m.time.to_string(),
                        from: cur.clone(),
                        to: moved.clone(),
                        moved: m.from.to_path_buf(),
                    });
                    cur = moved;
                }
                Log::Deletes => {
                    let d = &index.deletes[at.n as usize];
                    if d.restore {
                        if let Some((_, below)) = trashed.take() {
                            cur = if below.as_os_str().is_empty() {
                                d.path.to_path_buf()
                            } else {
                                d.path.join(below)
                            };
                        }
                        events.push(StoryEvent::Restored {
                            time: d.time.to_string(),
                            id: d.id,
                            to: cur.clone(),
                        });
                    } else {
                        events.push(StoryEvent::Deleted {
                            time: d.time.to_string(),
                            id: d.id,
                            deleted: d.path.to_path_buf(),
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
