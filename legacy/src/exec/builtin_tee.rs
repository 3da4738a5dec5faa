//! The built-in `tee` stage: a thread that passes its input on at once and keeps (up to the hard
//! write limit) what it saw, for the caller to gate and write once the run is over.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Instant;

use super::{elapsed_ms, TeeCapture, CHUNK};

/// One started tee.
pub(super) struct TeeThread {
    /// Its position in the pipeline.
    pub(super) index: usize,
    /// The thread, which returns what it kept and how long it ran.
    pub(super) handle: JoinHandle<(TeeCapture, u64)>,
}

/// Starts a built-in tee; returns its thread and the reader of what it passes on.
pub(super) fn spawn_tee(
    append: bool,
    targets: Vec<PathBuf>,
    input: Option<os_pipe::PipeReader>,
    limit: usize,
) -> io::Result<(JoinHandle<(TeeCapture, u64)>, os_pipe::PipeReader)> {
    let (out_r, out_w) = os_pipe::pipe()?;
    let handle = std::thread::spawn(move || {
        let started = Instant::now();
        let capture = tee_copy(input, out_w, limit, append, targets);
        (capture, elapsed_ms(started))
    });
    Ok((handle, out_r))
}

/// The body of the built-in tee: pass everything on, keep up to `limit` bytes.
pub(super) fn tee_copy(
    input: Option<os_pipe::PipeReader>,
    out: os_pipe::PipeWriter,
    limit: usize,
    append: bool,
    targets: Vec<PathBuf>,
) -> TeeCapture {
    let mut capture = TeeCapture {
        append,
        targets,
        ..Default::default()
    };
    let Some(mut input) = input else {
        return capture;
    };
    let mut out = Some(out);
    let mut buf = vec![0u8; CHUNK];
    let mut eof = false;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        capture.total += n as u64;
        let room = limit.saturating_sub(capture.data.len());
        capture.data.extend_from_slice(&buf[..n.min(room)]);
        if let Some(w) = out.as_mut() {
            if w.write_all(&buf[..n]).is_err() {
                // The reader went away: stop passing on, keep filling the file.
                out = None;
            }
        }
        if out.is_none() && capture.data.len() >= limit {
            break;
        }
    }
    capture.truncated = !eof || capture.total > limit as u64;
    capture
}
