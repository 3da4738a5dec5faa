//! `copy_file` (opt-in): a file, or a directory with everything in it, copied to a new place
//! without following any symlink. The source tree is planned whole first
//! ([`workspace::copy::plan`], bounded in entries, bytes and depth), every link checked where the
//! copy puts it, and only then is anything created: each file through the history store (so
//! under `--backup` it starts its own history), directories and links through the workspace
//! layer, all under the store lock and inside the write rules.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::error::FsError;
use super::schema::{object, path_property};
use super::target;
use super::tools::COPY_FILE;
use super::{reject_unknown, FsContext};
use mcp_core::toolset::{Args, CallContext, Effects, ToolDef, ToolOutput};
use workspace::copy::{self, CopyError, CopyItem, CopyLimits};
use workspace::guard::display_relative;

/// The most entries (files, directories, links) one copy creates.
pub const MAX_COPY_ENTRIES: usize = 10_000;

/// The most bytes of file content one copy writes (each file is read whole, one at a time).
pub const MAX_COPY_BYTES: u64 = 256 * 1024 * 1024;

/// The definition of `copy_file`.
pub fn definition() -> ToolDef {
    ToolDef {
        name: COPY_FILE.into(),
        title: "Copy File or Directory".into(),
        description: format!(
            "Copy a file, or a directory with everything in it, to a new path. Symlinks are never followed: a link is \
             copied as a link when it still leads inside the workspace from its new place, and the copy is refused \
             otherwise. Fails with AlreadyExists if the destination exists (nothing is overwritten). Missing parent \
             directories are created. With version history each copied file starts its own history. At most \
             {MAX_COPY_ENTRIES} entries and {} MiB per call.",
            MAX_COPY_BYTES / (1024 * 1024)
        ),
        input_schema: object(
            json!({
                "source": path_property("What to copy"),
                "destination": path_property("Where to put the copy; must not exist yet"),
            }),
            &["source", "destination"],
        ),
        output_schema: None,
        effects: Effects {
            read_only: false,
            destructive: false,
            idempotent: false,
        },
    }
}

/// `base` and below it `rel` (`base` itself for the copy's top, without the trailing separator
/// `Path::join("")` would add).
fn under(base: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}

fn plan_error(e: CopyError) -> FsError {
    match e {
        CopyError::Missing(_) => FsError::NotFound(format!(
            "{e}; check the name with list_directory, or search_file to find where it went"
        )),
        CopyError::Protected(_) => FsError::PathEscape(e.to_string()),
        CopyError::Io { .. } => FsError::IoError(e.to_string()),
        _ => FsError::InvalidArgument(e.to_string()),
    }
}

/// `copy_file`.
pub fn copy_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["source", "destination"])?;
    let a = Args(args);
    let (source, destination) = (a.str("source")?, a.str("destination")?);
    let lock = cx.lock(ctx)?;
    // The source is only read: any readable path, not following a final link (a link is
    // copied as itself).
    let src = cx.guard.resolve_no_follow(source)?;
    let dst = cx.guard.resolve_for_change(destination)?;
    if dst.is_root() {
        return Err(FsError::AlreadyExists(
            "the destination is the workspace root, which exists; name a new path inside it".into(),
        ));
    }
    if target::inspect(&cx.guard, &dst)?.is_some() {
        return Err(FsError::AlreadyExists(format!(
            "'{}' already exists; copy_file never overwrites, so choose a new destination or move what is there first",
            dst.display()
        )));
    }
    if dst.relative.starts_with(&src.relative) {
        return Err(FsError::InvalidArgument(format!(
            "cannot copy '{}' into itself ('{}'); choose a destination outside it",
            src.display(),
            dst.display()
        )));
    }
    let ws = cx.guard.workspace();
    let limits = CopyLimits {
        entries: MAX_COPY_ENTRIES,
        bytes: MAX_COPY_BYTES,
    };
    let plan = copy::plan(ws, &src.relative, &dst.relative, limits).map_err(plan_error)?;
    for item in &plan.items {
        if let CopyItem::Link { rel, target } = item {
            if !copy::link_stays_inside(&cx.guard, &under(&dst.relative, rel), target) {
                return Err(FsError::PathEscape(format!(
                    "'{}' is a symlink that would lead outside the workspace (or into the server's own state) from '{}', so it is not copied; copy the parts around it, or the file it points to by its real path",
                    display_relative(&under(&src.relative, rel)),
                    display_relative(&under(&dst.relative, rel))
                )));
            }
        }
    }
    // The last moment to stop: from here on the call changes the workspace.
    FsError::check(ctx, || format!("copy_file of '{}'", src.display()))?;
    if let Some(parent) = dst.relative.parent() {
        target::make_dirs(&cx.store, &lock, parent)?;
    }
    let (mut files, mut dirs, mut links) = (0u64, 0u64, 0u64);
    let mut versions = 0u64;
    for item in &plan.items {
        match item {
            CopyItem::Dir { rel, .. } => {
                target::make_dirs(&cx.store, &lock, &under(&dst.relative, rel))?;
                dirs += 1;
            }
            CopyItem::File { rel, mode, .. } => {
                let from = under(&src.relative, rel);
                let to = under(&dst.relative, rel);
                let content = ws
                    .read(&from)
                    .map_err(|e| target::io_error("cannot read", &from, e))?;
                let report = cx.store.write(&lock, &to, &content, true)?;
                if report.version.is_some() {
                    versions += 1;
                }
                ws.set_mode(&to, *mode)
                    .map_err(|e| target::io_error("cannot set permissions of", &to, e))?;
                files += 1;
            }
            CopyItem::Link { rel, target: says } => {
                let to = under(&dst.relative, rel);
                // Not written through the store: the operation log is told before it appears.
                lock.touch(&to);
                ws.symlink(&to, says)
                    .map_err(|e| target::io_error("cannot create the link", &to, e))?;
                links += 1;
            }
        }
    }
    // Directories get their bits last, deepest first, so a read-only one did not stop its own
    // contents from being created.
    for item in plan.items.iter().rev() {
        if let CopyItem::Dir { rel, mode } = item {
            let to = under(&dst.relative, rel);
            ws.set_mode(&to, *mode)
                .map_err(|e| target::io_error("cannot set permissions of", &to, e))?;
        }
    }
    let what = match plan.items.first() {
        Some(CopyItem::Dir { .. }) => format!(
            "directory {} to {}: {files} file{}, {dirs} director{}, {links} link{}, {} bytes",
            src.display(),
            dst.display(),
            if files == 1 { "" } else { "s" },
            if dirs == 1 { "y" } else { "ies" },
            if links == 1 { "" } else { "s" },
            plan.bytes
        ),
        Some(CopyItem::Link { .. }) => {
            format!("symlink {} to {}", src.display(), dst.display())
        }
        _ => format!(
            "file {} to {}: {} bytes",
            src.display(),
            dst.display(),
            plan.bytes
        ),
    };
    let history = if versions > 0 {
        format!(" ({versions} new version histories)")
    } else {
        String::new()
    };
    Ok(ToolOutput::text(format!("Copied {what}{history}.")))
}
