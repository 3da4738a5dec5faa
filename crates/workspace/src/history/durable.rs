//! The few questions about the disk the store asks in more than one place, answered through the
//! workspace layer. Atomic replacement, no-replace renames and directory creation themselves live
//! in [`crate::workspace`], the one place every file operation goes through.

use std::path::Path;

use crate::Workspace;

pub use crate::temp::is_temp_name;

/// True when something (a file, directory, or even a dangling symlink) is at root-relative
/// `rel`. A path that cannot be inspected (a component swapped for a symlink) counts as
/// occupied: the caller then refuses instead of acting.
pub fn occupied(ws: &Workspace, rel: &Path) -> bool {
    !matches!(ws.stat(rel), Ok(None))
}
