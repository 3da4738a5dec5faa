//! A workspace beside a canary directory it must never reach: the [`Arena`], a [`Snapshot`] of
//! a directory to compare before and after, and a [`Screen`] that collects replies leaking what
//! lies outside the workspace.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A temp dir holding `ws/` (the workspace root) and `canary/` (outside it, on the same file
/// system so hard links work), both canonical. The canary holds files with the names the tests
/// aim at inside the workspace ([`CANARY_DECOYS`]), so any redirected write, move or delete
/// changes it, but none of the names the tests create (so a redirected creation shows, too), plus
/// one name and one content found nowhere else, so a redirected read or listing shows in the
/// reply.
pub struct Arena {
    _tmp: tempfile::TempDir,
    /// The temp dir holding both (canonical).
    pub base: PathBuf,
    /// The workspace root.
    pub root: PathBuf,
    /// The directory outside the root that nothing may change or reveal.
    pub canary: PathBuf,
    /// Content of every canary file; it must never appear in a reply or inside the workspace.
    pub secret: String,
    /// A file name only the canary has.
    pub canary_name: String,
}

impl Default for Arena {
    fn default() -> Arena {
        Arena::new()
    }
}

/// Names the canary holds that the workspace operations aim at, too.
pub const CANARY_DECOYS: [&str; 5] = ["f", "o", "x", "t.txt", "secret.txt"];

impl Arena {
    /// An empty workspace and a filled canary, with a secret unique to this run.
    pub fn new() -> Arena {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        let root = base.join("ws");
        let canary = base.join("canary-outside");
        std::fs::create_dir(&root).expect("mkdir ws");
        std::fs::create_dir(&canary).expect("mkdir canary");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        let secret = format!("CANARY-SECRET-{}-{nanos}", std::process::id());
        let canary_name = format!("canary-only-{nanos}.txt");
        // EDIT-ME lets a redirected edit_file match; the secret shows any redirected read.
        let body = format!("EDIT-ME\n{secret}\n");
        for name in CANARY_DECOYS.iter().copied().chain([canary_name.as_str()]) {
            std::fs::write(canary.join(name), &body).expect("write canary");
        }
        std::fs::create_dir(canary.join("sub")).expect("mkdir canary/sub");
        std::fs::write(canary.join("sub/deep.txt"), &body).expect("write canary");
        Arena {
            _tmp: tmp,
            base,
            root,
            canary,
            secret,
            canary_name,
        }
    }

    /// The absolute path of `rel` inside the workspace.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file in the workspace, making its parent directories.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        crate::temp::write_under(&self.root, rel, content);
    }

    /// What must never appear in a reply: the canary's path, its content, its own name.
    pub fn forbidden(&self) -> Vec<String> {
        vec![
            self.canary.display().to_string(),
            self.secret.clone(),
            self.canary_name.clone(),
        ]
    }

    /// A leak screen for this arena.
    pub fn screen(&self) -> Screen {
        Screen::new(self.forbidden())
    }

    /// Fails unless the canary is exactly as `before`, naming every difference.
    pub fn assert_canary_unchanged(&self, before: &Snapshot) {
        let after = Snapshot::of(&self.canary);
        before.assert_same(&after, "the canary directory outside the workspace");
    }

    /// Fails if any file in the workspace (state directories included, links not followed)
    /// holds the canary's secret: content copied in from outside.
    pub fn assert_no_secret_inside(&self) {
        let copies: Vec<String> = Snapshot::of(&self.root)
            .entries
            .iter()
            .filter(|(_, e)| {
                e.content
                    .as_ref()
                    .is_some_and(|c| contains(c, self.secret.as_bytes()))
            })
            .map(|(p, _)| p.clone())
            .collect();
        assert!(
            copies.is_empty(),
            "content from outside the workspace was copied into it: {copies:?}"
        );
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// One entry of a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `dir`, `file`, `symlink` or `other`.
    pub kind: &'static str,
    /// Size in bytes.
    pub size: u64,
    /// Type and permission bits.
    pub mode: u32,
    /// Inode number (a replaced file shows even with the same bytes).
    pub ino: u64,
    /// Hard link count (a link made to it from elsewhere shows).
    pub nlink: u64,
    /// Modification time in nanoseconds.
    pub mtime_ns: i128,
    /// A regular file's bytes.
    pub content: Option<Vec<u8>>,
    /// A symlink's target.
    pub link: Option<PathBuf>,
}

/// Every entry under a directory (itself included as ""), never following a link: kind, size,
/// mode, inode, link count, mtime, and content or link target. A directory's mtime changes when
/// an entry is created or removed in it, so even a temporary made and removed again shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Entries by path relative to the snapshot's directory.
    pub entries: BTreeMap<String, Entry>,
}

impl Snapshot {
    /// Takes a snapshot of everything under `dir`.
    pub fn of(dir: &Path) -> Snapshot {
        let mut entries = BTreeMap::new();
        let mut stack = vec![(dir.to_path_buf(), String::new())];
        while let Some((path, rel)) = stack.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let ft = meta.file_type();
            let kind = if ft.is_dir() {
                "dir"
            } else if ft.is_file() {
                "file"
            } else if ft.is_symlink() {
                "symlink"
            } else {
                "other"
            };
            let entry = Entry {
                kind,
                size: meta.len(),
                mode: meta.mode(),
                ino: meta.ino(),
                nlink: meta.nlink(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                content: ft
                    .is_file()
                    .then(|| std::fs::read(&path).unwrap_or_default()),
                link: ft
                    .is_symlink()
                    .then(|| std::fs::read_link(&path).unwrap_or_default()),
            };
            if ft.is_dir() {
                if let Ok(list) = std::fs::read_dir(&path) {
                    for e in list.flatten() {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let child = if rel.is_empty() {
                            name
                        } else {
                            format!("{rel}/{name}")
                        };
                        stack.push((e.path(), child));
                    }
                }
            }
            entries.insert(rel, entry);
        }
        Snapshot { entries }
    }

    /// Names in this snapshot that look like a temporary file (ours or anyone's).
    pub fn temporaries(&self) -> Vec<&str> {
        self.entries
            .keys()
            .map(String::as_str)
            .filter(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                name.contains("tmp") || name.contains(".audit-restore.") || name.starts_with(".#")
            })
            .collect()
    }

    /// Fails unless `after` holds exactly these entries and no temporaries, naming every
    /// difference; `what` names the directory in the message.
    pub fn assert_same(&self, after: &Snapshot, what: &str) {
        let temps = after.temporaries();
        assert!(temps.is_empty(), "{what}: temporary files left: {temps:?}");
        let mut diffs = Vec::new();
        for (path, e) in &self.entries {
            match after.entries.get(path) {
                None => diffs.push(format!("'{path}' disappeared")),
                Some(a) if a != e => diffs.push(format!(
                    "'{path}' changed: {} -> {}",
                    describe(e),
                    describe(a)
                )),
                Some(_) => {}
            }
        }
        for path in after.entries.keys() {
            if !self.entries.contains_key(path) {
                diffs.push(format!("'{path}' appeared"));
            }
        }
        assert!(
            diffs.is_empty(),
            "{what} changed:\n  {}",
            diffs.join("\n  ")
        );
    }
}

fn describe(e: &Entry) -> String {
    format!(
        "{} size {} mode {:o} ino {} nlink {} mtime {} {}",
        e.kind,
        e.size,
        e.mode,
        e.ino,
        e.nlink,
        e.mtime_ns,
        e.content
            .as_ref()
            .map(|c| format!("{:?}", String::from_utf8_lossy(&c[..c.len().min(80)])))
            .or_else(|| e.link.as_ref().map(|l| format!("-> {}", l.display())))
            .unwrap_or_default()
    )
}

/// Collects replies that contain a forbidden string (at most a few, for the failure message).
pub struct Screen {
    forbidden: Vec<String>,
    /// What leaked (the first few).
    pub leaks: Vec<String>,
    /// How many replies were screened.
    pub screened: u64,
}

impl Screen {
    /// A screen for replies that must not contain any of `forbidden`.
    pub fn new(forbidden: Vec<String>) -> Screen {
        Screen {
            forbidden,
            leaks: Vec::new(),
            screened: 0,
        }
    }

    /// Screens one reply; `what` names the operation in the report.
    pub fn check(&mut self, what: &str, reply: &str) {
        self.screened += 1;
        for f in &self.forbidden {
            if reply.contains(f.as_str()) && self.leaks.len() < 5 {
                let shown: String = reply.chars().take(400).collect();
                self.leaks
                    .push(format!("{what}: reply contains {f:?}: {shown}"));
            }
        }
    }

    /// Fails if any screened reply leaked.
    pub fn assert_clean(&self) {
        assert!(
            self.leaks.is_empty(),
            "replies leaked what lies outside the workspace:\n  {}",
            self.leaks.join("\n  ")
        );
    }
}
