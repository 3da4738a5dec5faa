//! The built-in `ls` used when `ls` is the whole command.
//!
//! It runs inside the server, so it lists through the workspace layer: the directory is opened
//! beneath the root's descriptor without following any symlink and its entries are read from that
//! descriptor. A directory swapped for a symlink after the guard admitted it makes the call fail
//! instead of listing whatever the link points at. The tool's own state directories (at any
//! depth) and the server's temporaries are never listed, and `-l` shows where a symlink points
//! only when that stays inside the workspace and out of the state directories.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::FileType;

use workspace::guard::{display_relative, normalize, PathGuard, STATE_DIRS};
use workspace::{swapped, temp, Dir, Stat, Workspace};

/// Shown instead of a symlink's target when the target lies outside the workspace or in its
/// state: the listing must not become a way to read where links lead on the host.
const HIDDEN_TARGET: &str = "(outside the workspace)";

/// One listing line per entry of the root-relative `target` (or the entry itself when it is not
/// a directory). Directories get a trailing `/` so a model can tell them apart without `-l`.
pub fn list(ws: &Workspace, target: &Path, all: bool, long: bool) -> io::Result<String> {
    let Some(stat) = ws.stat(target)? else {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    };
    // The guard splices every symlink out of the path it admits (it follows a final one for
    // listing), so a link here was swapped in after the check: fail, as the layer does.
    if stat.is_symlink() {
        return Err(swapped());
    }
    if !stat.is_dir() {
        let (dir, name) = ws.parent(target)?;
        let link = long
            .then(|| link_target(ws, &dir, target.parent().unwrap_or(Path::new("")), name))
            .flatten();
        return Ok(line(&name.to_string_lossy(), &stat, long, link.as_deref()));
    }
    let dir = ws.dir(target)?;
    let mut entries = Vec::new();
    for entry in dir.entries()? {
        let bytes = entry.name.as_bytes();
        if !all && bytes.starts_with(b".") {
            continue;
        }
        // State directories are hidden at every depth, like the guard protects them at every
        // depth; a temporary is a half-written file no one should read.
        if STATE_DIRS.iter().any(|s| bytes == s.as_bytes()) || temp::is_reserved(bytes) {
            continue;
        }
        let link = (long && entry.stat.is_symlink())
            .then(|| link_target(ws, &dir, target, &entry.name))
            .flatten();
        entries.push((entry.name.to_string_lossy().into_owned(), entry.stat, link));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries
        .iter()
        .map(|(name, stat, link)| line(name, stat, long, link.as_deref()))
        .collect())
}

/// What `-l` shows after `->` for the symlink `name` in `dir` (the root-relative `dir_rel`): the
/// link's own text when, resolved lexically against its directory, it stays inside the root and
/// out of the state directories and temporaries; [`HIDDEN_TARGET`] otherwise. An absolute target
/// inside is shown root-relative, so no host path appears in the output. `None` for anything
/// that is not a symlink (or whose target cannot be read).
fn link_target(ws: &Workspace, dir: &Dir, dir_rel: &Path, name: &OsStr) -> Option<String> {
    if !dir.stat(name).ok().flatten()?.is_symlink() {
        return None;
    }
    let target = dir.read_link(name).ok()?;
    let joined = if target.is_absolute() {
        normalize(&target)
    } else {
        normalize(&ws.root().join(dir_rel).join(&target))
    };
    let Ok(inside) = joined.strip_prefix(ws.root()) else {
        return Some(HIDDEN_TARGET.to_string());
    };
    let hidden = PathGuard::is_state_path(inside).is_some()
        || inside
            .components()
            .any(|c| temp::is_reserved(c.as_os_str().as_bytes()));
    Some(if hidden {
        HIDDEN_TARGET.to_string()
    } else if target.is_absolute() {
        display_relative(inside)
    } else {
        target.to_string_lossy().into_owned()
    })
}

fn line(name: &str, stat: &Stat, long: bool, link: Option<&str>) -> String {
    let suffix = if stat.is_dir() { "/" } else { "" };
    if !long {
        return format!("{name}{suffix}\n");
    }
    let kind = match stat.kind {
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        FileType::Fifo => 'p',
        FileType::CharacterDevice => 'c',
        FileType::BlockDevice => 'b',
        FileType::Socket => 's',
        _ => '-',
    };
    let mtime = chrono::DateTime::from_timestamp(stat.mtime, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default();
    let arrow = link.map(|t| format!(" -> {t}")).unwrap_or_default();
    format!(
        "{kind}{:o} {:>10} {mtime} {name}{suffix}{arrow}\n",
        stat.mode, stat.size
    )
}

#[cfg(test)]
// Tests build their fixtures by name in a temporary directory of their own, as a user would.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_swapped_for_a_link_is_not_listed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(base.join("ws/a")).expect("mkdir");
        std::fs::write(base.join("ws/a/inside"), "").expect("write");
        std::fs::create_dir_all(base.join("out")).expect("mkdir");
        std::fs::write(base.join("out/outside"), "").expect("write");
        let ws = Workspace::open(&base.join("ws")).expect("open");
        assert_eq!(
            list(&ws, Path::new("a"), false, false).expect("list"),
            "inside\n"
        );
        std::fs::rename(base.join("ws/a"), base.join("ws/b")).expect("park");
        std::os::unix::fs::symlink(base.join("out"), base.join("ws/a")).expect("link");
        for long in [false, true] {
            let err = list(&ws, Path::new("a"), true, long).expect_err("refused");
            assert!(workspace::is_swap(&err), "{err}");
        }
    }
}
