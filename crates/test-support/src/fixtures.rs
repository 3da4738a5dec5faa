//! The repository's `fixtures/` directory (sample workspaces, an old `.shelpa/` mirror, call logs,
//! transcripts).

use std::path::{Path, PathBuf};

/// The path of `rel` under the repository's `fixtures/`. This crate lives at
/// `crates/test-support/`, two levels below the repository root, so the directory is found from
/// this crate's manifest; it is canonicalised so that paths printed by the binary read the same as
/// when tests built them from the root package's own manifest directory.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .canonicalize()
        .expect("the repository's fixtures/ directory")
        .join(rel)
}
