//! The processes alive on the machine, so a test can find pipeline stages a server left behind.

use std::path::PathBuf;

/// Every process directory in `/proc`: its pid and its path (processes that vanish while being
/// looked at are simply missing from what the caller reads next).
pub fn proc_entries() -> Vec<(i32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            Some((pid, entry.path()))
        })
        .collect()
}
