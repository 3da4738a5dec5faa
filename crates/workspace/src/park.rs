//! A test hook that parks the process at a named point of a root's life until a test lets it go.
//!
//! Some attacks need an outside process to act between two steps of the server (a directory
//! swapped for a symlink after a root was opened and before it was checked; a client's roots
//! switched while a call runs). A test cannot win such a race by luck and still be reliable, so
//! the server offers the points by name: with [`PARK_ENV`] set to `POINT:ROOT`, the server stops
//! at `POINT` whenever it reaches it for the root spelled `ROOT`, by opening the FIFO named in
//! [`FIFO_ENV`] for reading. That open returns only once the test has opened the FIFO for writing,
//! which tells the test the server is parked; the server then reads until the test closes its end,
//! and goes on. Unset (always, outside tests), the hook costs one look at a cached variable.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `POINT:ROOT`: park at `POINT` for the root spelled `ROOT` (see [`Point`]).
pub const PARK_ENV: &str = "FILESYSTEM_TEST_PARK";

/// The FIFO the parked server opens for reading; the test opens it for writing to learn that the
/// server is parked, and closes it to let it go on.
pub const FIFO_ENV: &str = "FILESYSTEM_TEST_PARK_FIFO";

/// Where the server can be parked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// Before a root named by a `--server` call is opened: a tenant whose root is slow to open.
    RootOpen,
    /// After a root's path has been followed once, before anything about the root is derived
    /// from it (its checks, its toolset): where a path swapped now must not redirect the root.
    RootOpened,
    /// After a tool call ran on a root, before its call-log line is made: where the client's roots
    /// may change under a finished call.
    CallRan,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::RootOpen => "root-open",
            Point::RootOpened => "root-opened",
            Point::CallRan => "call-ran",
        }
    }
}

/// The point, root spelling and FIFO the environment names, read once.
fn configured() -> Option<&'static (String, PathBuf, PathBuf)> {
    static PARK: OnceLock<Option<(String, PathBuf, PathBuf)>> = OnceLock::new();
    PARK.get_or_init(|| {
        let spec = std::env::var_os(PARK_ENV)?.into_string().ok()?;
        let fifo = PathBuf::from(std::env::var_os(FIFO_ENV)?);
        let (point, root) = spec.split_once(':')?;
        Some((point.to_string(), PathBuf::from(root), fifo))
    })
    .as_ref()
}

/// Parks at `point` if the environment asks for it for `root` (see the module doc). A FIFO that
/// cannot be opened parks nothing: the hook must never turn into a hang of its own.
pub fn park(point: Point, root: &Path) {
    let Some((at, spelled, fifo)) = configured() else {
        return;
    };
    if at != point.name() || spelled != root {
        return;
    }
    // The test's own FIFO, named in its environment: opened by name on purpose.
    if let Ok(mut f) = std::fs::File::open(fifo) {
        let mut sink = Vec::new();
        let _ = f.read_to_end(&mut sink);
    }
}
