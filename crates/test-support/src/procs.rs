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

/// Peak resident memory (`VmHWM`) of a live process in KiB, or `None` when the process is gone
/// or the kernel does not report it.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}
