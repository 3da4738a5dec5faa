//! Collecting what the stages print: the last stage's stdout, capped, and every stderr, each
//! into a shared buffer the runner can read at any time, so after a kill it returns what was
//! produced so far without waiting for a thread a stray descendant might keep blocked.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::relay::{self, Junction};
use super::{ExecLimits, CHUNK};

/// How long the runner waits, after killing the pipeline, for the last stderr bytes.
const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// A byte buffer filled by a thread and read by the runner at any time.
pub(super) type Shared = Arc<Mutex<Vec<u8>>>;

/// A copy of what the buffer holds now (what a poisoned lock guarded, too).
pub(super) fn snapshot(buf: &Shared) -> Vec<u8> {
    match buf.lock() {
        Ok(b) => b.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// Reads the last stage's stdout into `buf` up to `cap` bytes; sets `hit` when there was more.
pub(super) fn capture_stdout(
    mut reader: os_pipe::PipeReader,
    buf: &Shared,
    cap: usize,
    hit: &AtomicBool,
) {
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let Some(n) = relay::read_some(&mut reader, &mut chunk) else {
            return;
        };
        let Ok(mut b) = buf.lock() else { return };
        let room = cap.saturating_sub(b.len());
        b.extend_from_slice(&chunk[..n.min(room)]);
        if n > room {
            hit.store(true, Ordering::SeqCst);
            // Dropping the reader makes the writer's next write fail (SIGPIPE).
            return;
        }
    }
}

/// Reads every stage's stderr pipe to its end, keeping the first `cap` bytes of each in its
/// buffer: a full stderr pipe would otherwise block its stage forever. One thread for all of
/// them (see the module docs on why not one per stage); it ends when every pipe is closed.
pub(super) fn drain_all(pipes: Vec<(os_pipe::PipeReader, Shared)>, cap: usize) {
    let mut open = pipes;
    let mut chunk = vec![0u8; 8 * 1024];
    while !open.is_empty() {
        let mut fds: Vec<libc::pollfd> = open
            .iter()
            .map(|(reader, _)| libc::pollfd {
                fd: reader.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs the kernel fills in.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let mut closed = vec![false; open.len()];
        for (i, fd) in fds.iter().enumerate() {
            if fd.revents == 0 {
                continue;
            }
            let (reader, buf) = &mut open[i];
            match reader.read(&mut chunk) {
                Ok(0) => closed[i] = true,
                Ok(n) => {
                    if let Ok(mut b) = buf.lock() {
                        let room = cap.saturating_sub(b.len());
                        b.extend_from_slice(&chunk[..n.min(room)]);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => closed[i] = true,
            }
        }
        let mut i = 0;
        open.retain(|_| {
            i += 1;
            !closed[i - 1]
        });
    }
}

/// The threads that move and collect the bytes once every stage runs: the stderr collector, the
/// relay of the counted junctions, and the capture of the last stage's stdout.
pub(super) struct Streams {
    collector: JoinHandle<()>,
    relay: Option<JoinHandle<()>>,
    capture: Option<JoinHandle<()>>,
    /// The last stage's stdout, at most the output cap.
    pub(super) captured: Shared,
    /// Set when the last stage wrote more than the cap.
    pub(super) cap_hit: Arc<AtomicBool>,
    /// Per step: the count of the junction its stdout feeds, if it feeds one.
    counted: Vec<Option<Arc<AtomicU64>>>,
}

impl Streams {
    /// Starts the threads, after the last spawn (no fork copies their stacks). A run `stopped`
    /// while starting moves nothing more and reads no stdout: dropping the junctions and the
    /// last reader closes both ends, as the sweep's kill would.
    pub(super) fn start(
        stderr_pipes: Vec<(os_pipe::PipeReader, Shared)>,
        junctions: Vec<Junction>,
        counted: Vec<Option<Arc<AtomicU64>>>,
        last_out: Option<os_pipe::PipeReader>,
        stopped: bool,
        limits: &ExecLimits,
    ) -> Streams {
        let cap = limits.stderr_cap;
        let collector = std::thread::spawn(move || drain_all(stderr_pipes, cap));
        let relay = (!stopped && !junctions.is_empty())
            .then(|| std::thread::spawn(move || relay::relay_all(junctions)));
        let captured: Shared = Arc::new(Mutex::new(Vec::new()));
        let cap_hit = Arc::new(AtomicBool::new(false));
        let capture = last_out.filter(|_| !stopped).map(|reader| {
            let buf = captured.clone();
            let hit = cap_hit.clone();
            let cap = limits.output_cap;
            std::thread::spawn(move || capture_stdout(reader, &buf, cap, &hit))
        });
        Streams {
            collector,
            relay,
            capture,
            captured,
            cap_hit,
            counted,
        }
    }

    /// The bytes the junction after step `index` moved (0 when its stdout feeds none).
    pub(super) fn moved_after(&self, index: usize) -> u64 {
        self.counted[index]
            .as_ref()
            .map_or(0, |moved| moved.load(Ordering::Relaxed))
    }

    /// Every thread has ended: all output was moved and read.
    pub(super) fn finished(&self) -> bool {
        self.collector.is_finished()
            && self.relay.as_ref().is_none_or(|r| r.is_finished())
            && self.capture.as_ref().is_none_or(|c| c.is_finished())
    }

    /// After the sweep's kill, waits up to [`DRAIN_GRACE`] for the collector to read what the
    /// killed stages wrote last (a memory limit's message, say) and for the relay to pass on,
    /// and so count, their last bytes.
    pub(super) fn drain(&self) {
        let drained_by = Instant::now() + DRAIN_GRACE;
        while !(self.collector.is_finished() && self.relay.as_ref().is_none_or(|r| r.is_finished()))
            && Instant::now() < drained_by
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The captured stdout and whether the cap cut it.
    pub(super) fn stdout(&self) -> (Vec<u8>, bool) {
        (
            snapshot(&self.captured),
            self.cap_hit.load(Ordering::SeqCst),
        )
    }
}
