//! What every audit subcommand works against: the [`Audit`] context (the root's guard and
//! workspace layer), the mirrors it loads, and how a RECORD argument picks one of their records.
//! It lives apart from the dispatcher so that the subcommand modules depend on it, and on
//! nothing above them.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::error::AuditError;
use super::tree::{self, OpenError};
use workspace::guard::{display_relative, PathGuard};
use workspace::mirror::{Mirror, Record, MIRROR_DIR};
use workspace::Workspace;

/// The workspace an audit runs against: the shared path guard for everything that names a
/// workspace file, and through it the workspace layer (one handle on the root) that every read
/// and write goes through.
pub struct Audit {
    /// The guard every workspace path goes through; its workspace does every operation.
    pub guard: PathGuard,
}

/// One mirror loaded for a command.
pub struct Loaded {
    /// Root-relative workspace path the mirror belongs to.
    pub relative: PathBuf,
    /// How output shows that path.
    pub display: String,
    /// The parsed mirror.
    pub mirror: Mirror,
}

/// What the workspace currently holds at a mirrored path.
#[derive(Debug, PartialEq, Eq)]
pub enum Current {
    /// A regular file with this content.
    File(Vec<u8>),
    /// Nothing there (deleted or never created).
    Missing,
    /// A directory or special file.
    NotAFile,
    /// The path leads outside the root (or into state) through a link; it was not read.
    Unsafe,
}

impl Current {
    /// The content, if there is a readable file.
    pub fn content(&self) -> Option<&[u8]> {
        match self {
            Current::File(c) => Some(c),
            _ => None,
        }
    }
}

impl Audit {
    /// Chooses the root (`--root`, else `FILESYSTEM_ROOT`, else the current directory), validates
    /// it and opens handles on it.
    pub fn open(root: Option<&Path>, allow_root_slash: bool) -> Result<Audit, AuditError> {
        let chosen = workspace::root::resolve(root, allow_root_slash)
            .map_err(|e| AuditError::Root(e.to_string()))?;
        let root = chosen.canonical.clone();
        let guard = PathGuard::new(&root)
            .map_err(|source| AuditError::Io {
                what: format!("cannot open the root '{}'", root.display()),
                source,
            })?
            .with_spellings(chosen.spellings());
        Ok(Audit { guard })
    }

    /// The canonical root, for lexical work on PATH arguments and for reports; never for an
    /// operation.
    pub fn root(&self) -> &Path {
        self.guard.root()
    }

    /// The workspace layer every read and write of the audit goes through.
    pub fn workspace(&self) -> &Workspace {
        self.guard.workspace()
    }

    /// Opens the mirror of a root-relative path: a regular file reached without any link.
    pub fn open_relative(&self, relative: &Path, shown: &str) -> Result<std::fs::File, AuditError> {
        match tree::open_file_nofollow(self.workspace(), &Path::new(MIRROR_DIR).join(relative)) {
            Ok(file) => Ok(file),
            Err(OpenError::NotFound) => Err(AuditError::NoMirror(shown.to_string())),
            Err(OpenError::Io(source)) => Err(AuditError::Io {
                what: format!("cannot read the mirror of '{shown}'"),
                source,
            }),
            Err(other) => Err(AuditError::HostileMirror {
                path: shown.to_string(),
                why: other.to_string(),
            }),
        }
    }

    /// Reads and parses the mirror of a root-relative path.
    fn load_relative(&self, relative: &Path, shown: &str) -> Result<Loaded, AuditError> {
        let mut bytes = Vec::new();
        self.open_relative(relative, shown)?
            .read_to_end(&mut bytes)
            .map_err(|source| AuditError::Io {
                what: format!("cannot read the mirror of '{shown}'"),
                source,
            })?;
        Ok(Loaded {
            relative: relative.to_path_buf(),
            display: display_relative(relative),
            mirror: Mirror::parse(&bytes),
        })
    }

    /// Finds the mirror for a user's PATH: first by the path as written (a deleted file or one
    /// under a since-replaced directory is still found), then by where the guard resolves it
    /// (tee names mirrors after the resolved real path, so a link in the workspace leads to its
    /// target's mirror). Returns the mirror's workspace path and the open mirror.
    pub fn locate(&self, input: &str) -> Result<(PathBuf, std::fs::File), AuditError> {
        let lexical = tree::lexical_relative(&self.guard, input)
            .ok_or_else(|| AuditError::BadPath(input.to_string()))?;
        match self.open_relative(&lexical, input) {
            Err(AuditError::NoMirror(_)) => {}
            other => return other.map(|f| (lexical, f)),
        }
        match self.guard.resolve(&display_relative(&lexical)) {
            Ok(resolved) if resolved.relative != lexical && !resolved.is_root() => self
                .open_relative(&resolved.relative, input)
                .map(|f| (resolved.relative, f)),
            _ => Err(AuditError::NoMirror(input.to_string())),
        }
    }

    /// Finds (see [`Audit::locate`]), reads and parses the mirror for a user's PATH.
    pub fn load(&self, input: &str) -> Result<Loaded, AuditError> {
        let (relative, mut file) = self.locate(input)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|source| AuditError::Io {
                what: format!("cannot read the mirror of '{input}'"),
                source,
            })?;
        Ok(Loaded {
            display: display_relative(&relative),
            relative,
            mirror: Mirror::parse(&bytes),
        })
    }

    /// Reads the workspace file a mirror belongs to, through the guard (links are followed only
    /// while they stay inside the root).
    pub fn current(&self, relative: &Path) -> Result<Current, AuditError> {
        let resolved = match self.guard.resolve(&display_relative(relative)) {
            Ok(r) => r,
            Err(e) if e.is_escape() => return Ok(Current::Unsafe),
            Err(e) => return Err(AuditError::Guard(e)),
        };
        match tree::open_file_nofollow(self.workspace(), &resolved.relative) {
            Ok(mut f) => {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).map_err(|source| AuditError::Io {
                    what: format!("cannot read '{}'", display_relative(relative)),
                    source,
                })?;
                Ok(Current::File(bytes))
            }
            Err(OpenError::NotFound) => Ok(Current::Missing),
            Err(OpenError::Symlink) => Ok(Current::Unsafe),
            Err(OpenError::NotAFile) => Ok(Current::NotAFile),
            Err(OpenError::Io(source)) => Err(AuditError::Io {
                what: format!("cannot read '{}'", display_relative(relative)),
                source,
            }),
        }
    }
}

/// Finds a record by id (digits) or position (`#N`, 1 = oldest). Returns its index.
pub fn select(loaded: &Loaded, given: &str) -> Result<usize, AuditError> {
    let unknown = || AuditError::UnknownRecord {
        path: loaded.display.clone(),
        given: given.to_string(),
    };
    let records = &loaded.mirror.records;
    if let Some(n) = given.strip_prefix('#') {
        let n: usize = n.parse().map_err(|_| unknown())?;
        return if n >= 1 && n <= records.len() {
            Ok(n - 1)
        } else {
            Err(unknown())
        };
    }
    let id: u64 = given.parse().map_err(|_| unknown())?;
    let hits: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.id == Some(id))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [] => Err(unknown()),
        [one] => Ok(*one),
        [first, ..] => Err(AuditError::AmbiguousRecord {
            path: loaded.display.clone(),
            given: given.to_string(),
            count: hits.len(),
            first: first + 1,
        }),
    }
}

/// How a record is named in output: its id, or `#N` for the id-less appends record.
pub fn record_name(record: &Record, index: usize) -> String {
    match record.id {
        Some(id) => id.to_string(),
        None => format!("#{}", index + 1),
    }
}

/// Walks `.shelpa/` for its mirror files and the entries that may not be read.
pub fn scan(audit: &Audit) -> Result<tree::Scan, AuditError> {
    tree::scan(audit.workspace()).map_err(|source| AuditError::Io {
        what: "cannot walk .shelpa/".into(),
        source,
    })
}

/// Every readable mirror with its parse; hostile entries are left to `verify`.
pub fn load_all(audit: &Audit) -> Result<(Vec<Loaded>, usize), AuditError> {
    let scan = scan(audit)?;
    let mut loaded = Vec::new();
    for m in &scan.mirrors {
        match audit.load_relative(&m.relative, &m.display) {
            Ok(l) => loaded.push(l),
            Err(AuditError::HostileMirror { .. }) | Err(AuditError::NoMirror(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok((loaded, scan.hostile.len()))
}
