//! `scripted-model SCRIPTS.json [--record FILE.jsonl]`: the scripted model endpoint as a process,
//! for a demo or study that starts a harness outside the test suite.
//!
//! It prints its base URL (`http://127.0.0.1:PORT`) as the first line of stdout, answers until
//! its stdin closes (so the process that started it decides how long it lives, and it never
//! outlives that process), and writes every request's record as one JSON line to `--record`.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Mutex;

use scripted_model::{Record, Script, ScriptedModel};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("scripted-model: {message}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: scripted-model SCRIPTS.json [--record FILE.jsonl]";
    let (scripts_path, record_path) = match args.as_slice() {
        [s] if s != "--help" => (s.clone(), None),
        [s, flag, r] if flag == "--record" => (s.clone(), Some(r.clone())),
        _ => return Err(usage.into()),
    };
    let scripts = read_scripts(&scripts_path)?;
    let sink = match record_path {
        Some(path) => Some(record_sink(&path)?),
        None => None,
    };
    let model = ScriptedModel::start_with(scripts, sink).map_err(|e| e.to_string())?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", model.base_url()).map_err(|e| format!("writing stdout: {e}"))?;
    stdout.flush().map_err(|e| format!("writing stdout: {e}"))?;
    // Serve until stdin closes; what arrives on it is ignored.
    let mut stdin = std::io::stdin().lock();
    let mut sink_buf = [0u8; 4096];
    while stdin
        .read(&mut sink_buf)
        .map_err(|e| format!("reading stdin: {e}"))?
        > 0
    {}
    drop(model);
    Ok(())
}

/// The scripts: a JSON array of [`Script`]s, or one script.
// The file is the one the user named on the command line, read once by name as any tool would.
#[allow(clippy::disallowed_methods)]
fn read_scripts(path: &str) -> Result<Vec<Script>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("opening {path}: {e}"))?;
    let mut text = String::new();
    std::io::BufReader::new(file)
        .take(16 * 1024 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| format!("reading {path}: {e}"))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{path} is not JSON: {e}"))?;
    let scripts = if value.is_array() {
        serde_json::from_value(value)
    } else {
        serde_json::from_value(value).map(|s: Script| vec![s])
    };
    scripts.map_err(|e| format!("{path} is not a script (or a list of them): {e}"))
}

/// A sink appending each record to `path` as a JSON line.
// The record file is the one the user named on the command line; it is created by name once.
#[allow(clippy::disallowed_methods)]
fn record_sink(path: &str) -> Result<scripted_model::server::RecordSink, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("opening {path}: {e}"))?;
    let file = Mutex::new(std::io::LineWriter::new(file));
    Ok(Box::new(move |record: &Record| {
        if let Ok(line) = serde_json::to_string(record) {
            let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "{line}");
        }
    }))
}
