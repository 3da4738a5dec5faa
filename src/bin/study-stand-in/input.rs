//! Reading the stand-in's small input files with a bound, so a wrong path (a log, a device)
//! cannot make it read without end.

use std::io::Read;
use std::path::Path;

use crate::error::StandInError;

/// Reads `path` as UTF-8 text of at most `limit` bytes; `what` names the input in errors.
pub fn read_text(path: &Path, what: &'static str, limit: u64) -> Result<String, StandInError> {
    let read_err = |source| StandInError::Read {
        what,
        path: path.to_path_buf(),
        source,
    };
    // By name: an input the runner names on the command line (the plan, policy, prompt and MCP
    // configuration, outside the workspace), read once, without blocking and only if it is a
    // regular file.
    let file = workspace::open_regular_path(path, std::fs::OpenOptions::new().read(true))
        .map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(StandInError::TooLarge {
            what,
            path: path.to_path_buf(),
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|_| StandInError::Invalid {
        what,
        path: path.to_path_buf(),
        message: "is not UTF-8 text; save it as UTF-8".into(),
    })
}
