//! The generated workspace every case runs in, built once per run and reused by every peer.
//!
//! Layout under the data directory:
//! - `ws/` — the workspace root every server is started on;
//! - `ws/read.txt` — 4 KiB of text;
//! - `ws/tree/` — `dirs` directories holding `files_per_dir` empty files each;
//! - `ws/edit/big.txt` — a large text file with one unique line near its end (restored from
//!   `pristine/big.txt`, outside the root, before every edit);
//! - `ws/logs/app.log`, `ws/logs/app-small.log` — synthetic access logs (the small one is a tenth
//!   of the size, to show that server memory does not follow the input).

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{BenchError, Sizes};

/// The line the edit case replaces; it occurs exactly once, near the end of `big.txt`.
pub const EDIT_OLD: &str = "needle: the value to change = 4242";
/// What the edit case replaces it with.
pub const EDIT_NEW: &str = "needle: the value to change = 4343";

/// Paths of the generated data.
#[derive(Clone, Debug)]
pub struct Data {
    /// The workspace root (canonical).
    pub root: PathBuf,
    /// The 4 KiB file.
    pub read_file: PathBuf,
    /// The generated tree.
    pub tree: PathBuf,
    /// The file the edit case edits.
    pub edit_file: PathBuf,
    /// Its original content, outside the root.
    pub edit_pristine: PathBuf,
    /// The large log.
    pub log: PathBuf,
    /// The small log.
    pub small_log: PathBuf,
    /// Files in the tree.
    pub tree_files: u64,
    /// Directories in the tree (its root excluded).
    pub tree_dirs: u64,
}

fn io_err(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let context = format!("{what} {}", path.display());
    move |e| BenchError::io(context, e)
}

/// A small deterministic generator, so every run measures the same bytes.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Builds everything under `dir` (which must exist and be empty or hold a previous run's data).
pub fn generate(dir: &Path, sizes: &Sizes) -> Result<Data, BenchError> {
    let root = dir.join("ws");
    fs::create_dir_all(&root).map_err(io_err("create", &root))?;
    let root = fs::canonicalize(&root).map_err(io_err("resolve", &root))?;
    // State left by an earlier run on the same directory would change what is measured (a
    // history twice as long, a call log to append to): start those parts afresh.
    for stale in [".filesystem", ".shelpa", "undo", "write"] {
        let path = root.join(stale);
        if path.exists() {
            fs::remove_dir_all(&path).map_err(io_err("remove", &path))?;
        }
    }
    let pristine_dir = dir.join("pristine");
    fs::create_dir_all(&pristine_dir).map_err(io_err("create", &pristine_dir))?;

    let read_file = root.join("read.txt");
    write_text(&read_file, 4096, &mut Lcg(1))?;

    let tree = root.join("tree");
    let marker = dir.join(format!(
        "tree-complete-{}-{}",
        sizes.tree_dirs, sizes.tree_files_per_dir
    ));
    let (tree_dirs, tree_files) =
        make_tree(&tree, &marker, sizes.tree_dirs, sizes.tree_files_per_dir)?;

    let edit_pristine = pristine_dir.join("big.txt");
    make_edit_file(&edit_pristine, sizes.edit_bytes)?;
    let edit_dir = root.join("edit");
    fs::create_dir_all(&edit_dir).map_err(io_err("create", &edit_dir))?;
    let edit_file = edit_dir.join("big.txt");
    restore(&edit_pristine, &edit_file)?;

    let logs = root.join("logs");
    fs::create_dir_all(&logs).map_err(io_err("create", &logs))?;
    let log = logs.join("app.log");
    make_log(&log, sizes.log_bytes)?;
    let small_log = logs.join("app-small.log");
    make_log(&small_log, sizes.log_bytes / 10)?;

    Ok(Data {
        root,
        read_file,
        tree,
        edit_file,
        edit_pristine,
        log,
        small_log,
        tree_files,
        tree_dirs,
    })
}

/// Puts the edit file back to its original content (outside any timing).
pub fn restore(pristine: &Path, target: &Path) -> Result<(), BenchError> {
    fs::copy(pristine, target)
        .map(|_| ())
        .map_err(io_err("copy to", target))
}

fn text_line(rng: &mut Lcg, out: &mut Vec<u8>) {
    const WORDS: [&str; 12] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ];
    let n = 6 + rng.next() % 8;
    for i in 0..n {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(WORDS[(rng.next() % 12) as usize].as_bytes());
    }
    out.push(b'\n');
}

fn write_text(path: &Path, bytes: usize, rng: &mut Lcg) -> Result<(), BenchError> {
    let mut out = Vec::with_capacity(bytes + 128);
    while out.len() < bytes {
        text_line(rng, &mut out);
    }
    out.truncate(bytes - 1);
    out.push(b'\n');
    fs::write(path, &out).map_err(io_err("write", path))
}

fn make_tree(
    tree: &Path,
    marker: &Path,
    dirs: u64,
    files_per_dir: u64,
) -> Result<(u64, u64), BenchError> {
    // Reuse a complete tree from an earlier run on the same data directory (the marker lives
    // outside the root): creating 100k files is the slowest part of the set-up.
    if marker.exists() {
        return Ok((dirs, dirs * files_per_dir));
    }
    // Top-level directories each hold sub-directories, so the tree has depth as well as width.
    let top = ((dirs as f64).sqrt().ceil() as u64).max(1);
    let mut made = 0u64;
    let mut files = 0u64;
    let mut t = 0u64;
    while made < dirs {
        let top_dir = tree.join(format!("pkg{t:03}"));
        fs::create_dir_all(&top_dir).map_err(io_err("create", &top_dir))?;
        made += 1;
        let mut in_dir = vec![top_dir.clone()];
        let mut s = 0u64;
        while made < dirs && s + 1 < top {
            let sub = top_dir.join(format!("mod{s:03}"));
            fs::create_dir(&sub)
                .or_else(ignore_exists)
                .map_err(io_err("create", &sub))?;
            in_dir.push(sub);
            made += 1;
            s += 1;
        }
        for d in &in_dir {
            for f in 0..files_per_dir {
                let file = d.join(format!("file{f:02}.rs"));
                fs::File::create(&file).map_err(io_err("create", &file))?;
                files += 1;
            }
        }
        t += 1;
    }
    fs::File::create(marker).map_err(io_err("create", marker))?;
    Ok((made, files))
}

fn ignore_exists(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::AlreadyExists {
        Ok(())
    } else {
        Err(e)
    }
}

fn make_edit_file(path: &Path, bytes: usize) -> Result<(), BenchError> {
    let mut out = Vec::with_capacity(bytes + 256);
    let mut rng = Lcg(7);
    let tail = 2048.min(bytes / 4);
    while out.len() < bytes - tail {
        text_line(&mut rng, &mut out);
    }
    out.extend_from_slice(EDIT_OLD.as_bytes());
    out.push(b'\n');
    while out.len() < bytes {
        text_line(&mut rng, &mut out);
    }
    fs::write(path, &out).map_err(io_err("write", path))
}

fn make_log(path: &Path, bytes: usize) -> Result<(), BenchError> {
    // Reuse a log from an earlier run of the same size (generation writes whole lines, so it
    // ends within one line of `bytes`).
    if fs::metadata(path).is_ok_and(|m| (bytes..bytes + 256).contains(&(m.len() as usize))) {
        return Ok(());
    }
    let file = fs::File::create(path).map_err(io_err("create", path))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut rng = Lcg(42);
    let mut written = 0usize;
    let mut line = String::with_capacity(160);
    let mut sec = 0u64;
    while written < bytes {
        line.clear();
        let r = rng.next();
        let level = match r % 20 {
            0 | 1 => "ERROR",
            2..=4 => "WARN",
            5 => "DEBUG",
            _ => "INFO",
        };
        sec += r % 3;
        use std::fmt::Write as _;
        let _ = writeln!(
            line,
            "2026-11-30T{:02}:{:02}:{:02}Z {level} svc-{:02} user={} req={:08x} took={}ms path=/api/v1/items/{}",
            (sec / 3600) % 24,
            (sec / 60) % 60,
            sec % 60,
            rng.next() % 48,
            rng.next() % 10_000,
            rng.next(),
            rng.next() % 2_000,
            rng.next() % 100_000,
        );
        out.write_all(line.as_bytes())
            .map_err(io_err("write", path))?;
        written += line.len();
    }
    out.flush().map_err(io_err("write", path))
}
