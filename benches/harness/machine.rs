//! What the run was measured on: the machine and the version of every program involved.

use std::path::Path;
use std::process::Command;

/// Facts about the machine, one `(name, value)` per line of the report.
pub fn facts() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "unknown".into());
    let kernel = first_line("uname", &["-sr"]).unwrap_or_else(|| "unknown".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    vec![
        ("CPU".into(), model),
        ("cores available".into(), cores),
        ("memory".into(), memory),
        ("kernel".into(), kernel),
        ("load average at start".into(), load),
    ]
}

/// The first line a command prints (stdout, else stderr), if it runs.
pub fn first_line(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

/// The `version` field of an npm package's `package.json`.
pub fn npm_version(package_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(package_dir.join("package.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("version")?.as_str().map(str::to_string)
}

/// Versions of the programs the pipeline case runs.
pub fn tool_versions() -> Vec<(String, String)> {
    [
        ("bash", "--version"),
        ("tail", "--version"),
        ("rg", "--version"),
        ("gawk", "--version"),
        ("sort", "--version"),
        ("head", "--version"),
    ]
    .iter()
    .map(|(p, a)| {
        (
            p.to_string(),
            first_line(p, &[a]).unwrap_or_else(|| "not found".into()),
        )
    })
    .collect()
}

/// How an executable is linked, read from its ELF program headers: a start-up ratio means little
/// unless both sides were linked the same way, so the report says how each was.
pub fn linkage(path: &Path) -> &'static str {
    const PT_INTERP: u32 = 3;
    let Ok(bytes) = std::fs::read(path) else {
        return "unknown linkage";
    };
    // 64-bit little-endian ELF only; anything else is reported as unknown.
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return "unknown linkage";
    }
    let word = |at: usize, len: usize| -> Option<u64> {
        let mut v = 0u64;
        for (i, b) in bytes.get(at..at + len)?.iter().enumerate() {
            v |= u64::from(*b) << (8 * i);
        }
        Some(v)
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (word(32, 8), word(54, 2), word(56, 2))
    else {
        return "unknown linkage";
    };
    let interp = (0..phnum).any(|i| {
        usize::try_from(phoff + i * phentsize)
            .ok()
            .and_then(|at| word(at, 4))
            == Some(u64::from(PT_INTERP))
    });
    if interp {
        "dynamically linked"
    } else {
        "statically linked"
    }
}
