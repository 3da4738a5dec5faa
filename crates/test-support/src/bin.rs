//! Where the binary under test is.
//!
//! A library cannot read `env!("CARGO_BIN_EXE_filesystem")`: Cargo sets it only while compiling
//! the package's own integration tests and benches. Passing it into every helper from every test
//! would put the same line back into each file, so the path is found at run time instead, beside
//! the test executable: Cargo builds a test to `target/<profile>/deps/<name>-<hash>` and the
//! package's binaries, which it always builds before running integration tests, to
//! `target/<profile>/filesystem`. That holds for `--release`, `--target` and any
//! `CARGO_TARGET_DIR`, because the binary and the test always share `target/<profile>/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `filesystem` binary beside the running test executable (see the module documentation).
///
/// Panics with the path it looked at when the binary is missing, e.g. when a test executable was
/// copied elsewhere and run by hand.
pub fn filesystem() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("the path of the test executable");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test executable lies in target/<profile>/deps/");
        let bin = profile_dir.join(format!("filesystem{}", std::env::consts::EXE_SUFFIX));
        assert!(
            bin.is_file(),
            "the filesystem binary is not at {} (beside {})",
            bin.display(),
            exe.display()
        );
        bin
    })
}

/// A command that runs the binary under test, with nothing else set: the start of every
/// hand-built invocation.
pub fn command() -> Command {
    Command::new(filesystem())
}
