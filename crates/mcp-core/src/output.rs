//! The writer side of a session: a bounded outbox for call replies and the thread that writes.
//!
//! Workers put finished replies in the [`Outbox`]; while more calls are queued (a client
//! pipelining requests) replies collect there and go out together — one wake-up and one
//! `write(2)` for many — but never later than [`REPLY_HOLD`] after they were ready. The outbox is
//! bounded: when the client stops reading, the writer blocks in `write`, the outbox fills, the
//! workers wait for room, the job queue fills and the reader stops reading requests. Memory stays
//! at about twice [`OUTBOX_LIMIT`] plus one reply however long the client stalls.
//!
//! When the output is gone (the client closed our stdout), the writer says so once through
//! `on_gone`: the session then cancels what runs, drops what waits, and ends.

use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::executor::CallObserver;
use super::wire::{write_frame, Framing};

/// Longest a finished reply may wait in the outbox for company before the writer sends it.
pub const REPLY_HOLD: Duration = Duration::from_millis(2);

/// Bytes of finished replies the outbox holds before workers wait for the writer.
pub const OUTBOX_LIMIT: usize = 8 * 1024 * 1024;

/// What the writer thread is asked to do.
pub enum Out {
    /// Write this framed message now.
    Frame(Vec<u8>),
    /// The outbox has replies; send them within [`REPLY_HOLD`] at the latest.
    Pending,
    /// Send the outbox now: no call is waiting, so nothing is gained by holding replies.
    Flush,
}

impl Out {
    /// What the writer must hear after a worker has put a reply in the outbox: send now when no
    /// call is waiting (nothing is gained by holding the reply), start the hold clock when the
    /// reply is the first in an empty outbox, and nothing when the clock is already running.
    pub fn after_append(was_empty: bool, queue_idle: bool) -> Option<Out> {
        if queue_idle {
            Some(Out::Flush)
        } else if was_empty {
            Some(Out::Pending)
        } else {
            None
        }
    }
}

/// Replies the workers have finished but the writer has not yet taken.
pub struct Outbox {
    buf: Mutex<Buffered>,
    room: Condvar,
    limit: usize,
    gone: AtomicBool,
}

/// The outbox's bytes and how many workers wait for room (a notify is a system call even with
/// nobody waiting, so it is made only when someone is).
#[derive(Default)]
struct Buffered {
    bytes: Vec<u8>,
    waiting: usize,
}

impl Default for Outbox {
    fn default() -> Self {
        Outbox {
            buf: Mutex::new(Buffered::default()),
            room: Condvar::new(),
            limit: OUTBOX_LIMIT,
            gone: AtomicBool::new(false),
        }
    }
}

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, Buffered> {
        self.buf.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Frames `body` into the outbox, first waiting while it is over its limit. Returns whether
    /// the outbox was empty before (the writer then needs telling), or `None` when the output is
    /// gone and the reply has nowhere to go.
    pub fn append(&self, framing: Framing, body: &[u8]) -> Option<bool> {
        let mut buf = self.lock();
        while buf.bytes.len() >= self.limit && !self.is_gone() {
            buf.waiting += 1;
            buf = self.room.wait(buf).unwrap_or_else(|p| p.into_inner());
            buf.waiting -= 1;
        }
        if self.is_gone() {
            return None;
        }
        let was_empty = buf.bytes.is_empty();
        // Writing into a vector cannot fail.
        let _ = write_frame(&mut buf.bytes, framing, body);
        Some(was_empty)
    }

    /// Takes everything finished so far, making room for the workers.
    fn take(&self) -> Vec<u8> {
        let mut buf = self.lock();
        let batch = std::mem::take(&mut buf.bytes);
        let wake = buf.waiting > 0;
        drop(buf);
        if wake {
            self.room.notify_all();
        }
        batch
    }

    /// Marks the output gone and wakes every worker waiting for room.
    pub fn close(&self) {
        self.gone.store(true, Ordering::SeqCst);
        // Taking the lock orders the flag before any waiter's next check.
        drop(self.lock());
        self.room.notify_all();
    }

    /// True once the client has stopped taking our output.
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }
}

/// Writes replies: framed messages from the reader at once, the outbox when asked or when its hold
/// time is up, and flushes whenever there is nothing more to do right now. The observer is
/// released before any reply it may have seen is written. On the first failed write, `on_gone`
/// runs and the writer stops.
pub fn write_loop<W: Write>(
    output: BufWriter<W>,
    rx: mpsc::Receiver<Out>,
    outbox: Arc<Outbox>,
    observer: Option<Arc<dyn CallObserver>>,
    on_gone: impl FnOnce(),
) {
    let mut out = output;
    if run_writer(&mut out, &rx, &outbox, observer.as_deref()).is_err() {
        outbox.close();
        on_gone();
    }
}

fn run_writer<W: Write>(
    out: &mut BufWriter<W>,
    rx: &mpsc::Receiver<Out>,
    outbox: &Outbox,
    observer: Option<&dyn CallObserver>,
) -> io::Result<()> {
    let mut deadline: Option<Instant> = None;
    let release = || {
        if let Some(observer) = observer {
            observer.release();
        }
    };
    let take = |out: &mut BufWriter<W>| -> io::Result<()> {
        let batch = outbox.take();
        if batch.is_empty() {
            return Ok(());
        }
        release();
        out.write_all(&batch)
    };
    loop {
        let first = match deadline {
            None => rx.recv().ok(),
            Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(msg) => Some(msg),
                Err(mpsc::RecvTimeoutError::Timeout) => Some(Out::Flush),
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        };
        let Some(first) = first else {
            // Every sender is gone: the session is over.
            take(out)?;
            return out.flush();
        };
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                Out::Frame(bytes) => {
                    // A batch's frame can hold call results.
                    release();
                    out.write_all(&bytes)?;
                }
                Out::Pending => {
                    deadline.get_or_insert_with(|| Instant::now() + REPLY_HOLD);
                }
                Out::Flush => {
                    deadline = None;
                    take(out)?;
                }
            }
            next = rx.try_recv().ok();
        }
        out.flush()?;
    }
}
