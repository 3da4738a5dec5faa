//! The junctions between two external stages: the server moves the bytes from one stage's stdout
//! pipe into the next stage's stdin pipe with `splice(2)` and counts them, so every stage's
//! `output_size` is measured without the bytes ever being copied into the server's memory.
//!
//! Why this shape:
//!
//! - **`splice`, not `tee`.** `tee(2)` duplicates pipe buffers without consuming them, so the
//!   counting would still need a `splice` (or a read) to empty the source pipe: two system calls
//!   per chunk where `splice` alone moves and counts in one. Between two pipes `splice` moves page
//!   references, it copies nothing.
//! - **One thread for every junction**, waiting in `poll`, like the stderr collector (see the
//!   module docs of `exec`): a pipeline of 32 stages adds one thread, not 31, and the thread starts
//!   after the last stage was spawned, so no `fork` copies its stack.
//! - **Nothing changes for the stages.** Splicing never blocks (`SPLICE_F_NONBLOCK`); a junction
//!   waits either for input or for room, never both. Its output side is always watched for the
//!   reader going away (`POLLERR`): then the junction closes its input at once, so the upstream
//!   stage's next write fails with SIGPIPE/EPIPE exactly as on a direct pipe (`… | head -1` stops
//!   the upstream promptly). End of input is passed on by closing the output. A kill of the
//!   process group ends every writer, so the relay drains what is left and ends too.
//! - **Batches for busy streams.** A producer that writes 4 KiB at a time into a pipe whose reader
//!   is faster wakes that reader on every write; a relay in the middle doubled the context
//!   switches and cost 1.2× on the 200 MB benchmark pipeline. A junction that has moved 1 MiB
//!   therefore grows both its pipes to 1 MiB (`F_SETPIPE_SZ`, at most [`MAX_BIG_JUNCTIONS`] per
//!   run: every pipe counts against the user's kernel allowance) and, after each batch, rests
//!   [`REST`] before it watches its input again, while still watching for its reader going away.
//!   Short outputs never wait: a junction rests only right after it moved bytes, on big pipes.
//!   Measurements are in `benches/FINDINGS.md`.
//! - **What counts.** A junction counts what it moved plus, when the downstream reader went away,
//!   what was still waiting in the input pipe: every byte the upstream stage managed to write.
//! - **Fallback.** Where `splice` answers `EINVAL` (a kernel or file type that cannot splice), that
//!   junction is copied through a buffer by a thread of its own.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most bytes one `splice` call asks for: more than any pipe holds, so one call empties it.
const SPLICE_LEN: usize = 1 << 20;
/// Buffer of the copying fallback.
const COPY_CHUNK: usize = 64 * 1024;
/// A junction that has moved this much is a stream worth batching: its pipes grow.
const GROW_AFTER: u64 = 1 << 20;
/// The size the pipes of a busy junction grow to (the default `pipe-max-size`).
const BIG_PIPE: usize = 1 << 20;
/// At most this many junctions of one run get big pipes: they count against the user's kernel
/// pipe allowance (`pipe-user-pages-soft`, 64 MiB by default), shared with every other pipe.
const MAX_BIG_JUNCTIONS: usize = 4;
/// How long a junction with big pipes rests after a batch before it watches its input again.
const REST: Duration = Duration::from_micros(200);

/// One junction: the upstream stage's stdout (read end) and the downstream stage's stdin (write
/// end), and the count of bytes the upstream stage wrote.
pub struct Junction {
    from: os_pipe::PipeReader,
    to: os_pipe::PipeWriter,
    moved: Arc<AtomicU64>,
}

impl Junction {
    /// A junction from `from` to `to`; returns it and the counter the runner reads at any time.
    pub fn new(from: os_pipe::PipeReader, to: os_pipe::PipeWriter) -> (Junction, Arc<AtomicU64>) {
        let moved = Arc::new(AtomicU64::new(0));
        let junction = Junction {
            from,
            to,
            moved: moved.clone(),
        };
        (junction, moved)
    }
}

/// What a junction waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Bytes (or the end) in its input pipe.
    Input,
    /// Room in its output pipe.
    Room,
}

/// What one round of moving ended with.
enum Pumped {
    /// Nothing more can move now; wait for this.
    Wait(Wait),
    /// The junction is finished (end of input passed on, or the reader went away).
    Done,
    /// `splice` cannot move these pipes: copy instead.
    Unsupported,
}

/// One junction the relay still serves.
struct Open {
    j: Junction,
    wait: Wait,
    /// Its pipes were offered [`BIG_PIPE`] (whether or not the kernel agreed).
    grow_tried: bool,
    /// Its pipes are [`BIG_PIPE`]: it moves in batches, resting [`REST`] after each.
    big: bool,
    /// While resting after a batch: the input is not watched before this.
    rest_until: Option<Instant>,
}

/// What the relay loop carries from one junction to the next.
struct Relay {
    open: Vec<Open>,
    copiers: Vec<JoinHandle<()>>,
    /// How many more junctions of this run may get big pipes.
    grow_budget: usize,
}

impl Relay {
    /// Moves what can move across `o` now and files it by what it waits for next.
    fn serve(&mut self, mut o: Open) {
        let (pumped, moved) = pump(&o.j);
        match pumped {
            Pumped::Wait(wait) => {
                if !o.grow_tried
                    && self.grow_budget > 0
                    && o.j.moved.load(Ordering::Relaxed) >= GROW_AFTER
                {
                    o.grow_tried = true;
                    o.big = grow(&o.j);
                    self.grow_budget -= usize::from(o.big);
                }
                o.wait = wait;
                o.rest_until =
                    (o.big && moved && wait == Wait::Input).then(|| Instant::now() + REST);
                self.open.push(o);
            }
            Pumped::Done => {}
            Pumped::Unsupported => {
                let j = o.j;
                self.copiers.push(std::thread::spawn(move || copy(j)));
            }
        }
    }
}

/// Offers both pipes of `j` [`BIG_PIPE`] bytes; true if the kernel gave both.
fn grow(j: &Junction) -> bool {
    [j.from.as_raw_fd(), j.to.as_raw_fd()].iter().all(|fd| {
        // SAFETY: F_SETPIPE_SZ on an open pipe descriptor owned by `j`. It fails (EPERM) rather
        // than take the user past the kernel's per-user pipe allowance; the pipe then stays.
        unsafe { libc::fcntl(*fd, libc::F_SETPIPE_SZ, BIG_PIPE as libc::c_int) >= 0 }
    })
}

/// Moves bytes across every junction until each one is finished. Returns when all are.
pub fn relay_all(junctions: Vec<Junction>) {
    let mut relay = Relay {
        open: Vec::with_capacity(junctions.len()),
        copiers: Vec::new(),
        grow_budget: MAX_BIG_JUNCTIONS,
    };
    // First round: move what is already there.
    for j in junctions {
        relay.serve(Open {
            j,
            wait: Wait::Input,
            grow_tried: false,
            big: false,
            rest_until: None,
        });
    }
    while !relay.open.is_empty() {
        // Two entries per junction: its input (watched only while waiting for input and not
        // resting, or a writer that exited would wake the loop at once for nothing) and its
        // output (always watched: POLLERR is reported whatever is asked, and says the reader
        // went away, so a resting junction still closes its input at once).
        let now = Instant::now();
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(relay.open.len() * 2);
        let mut wake: Option<Instant> = None;
        for o in &relay.open {
            let resting = o.rest_until.filter(|t| *t > now);
            if let Some(t) = resting {
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
            fds.push(libc::pollfd {
                fd: if o.wait == Wait::Input && resting.is_none() {
                    o.j.from.as_raw_fd()
                } else {
                    -1
                },
                events: libc::POLLIN,
                revents: 0,
            });
            fds.push(libc::pollfd {
                fd: o.j.to.as_raw_fd(),
                events: if o.wait == Wait::Room {
                    libc::POLLOUT
                } else {
                    0
                },
                revents: 0,
            });
        }
        let timeout = wake.map(|t| {
            let d = t.saturating_duration_since(now);
            libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        });
        let timeout_ptr = timeout
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs the kernel fills in; the
        // timeout is null (no limit) or points at a live timespec; the signal mask is kept.
        let ready = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                timeout_ptr,
                std::ptr::null(),
            )
        };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // Cannot wait: give up; dropping the pipes ends the stages as a closed pipe would.
            return;
        }
        let now = Instant::now();
        let open = std::mem::take(&mut relay.open);
        for (i, o) in open.into_iter().enumerate() {
            let rested = o.rest_until.is_some_and(|t| t <= now);
            if fds[2 * i].revents == 0 && fds[2 * i + 1].revents == 0 && !rested {
                relay.open.push(o);
            } else {
                relay.serve(o);
            }
        }
    }
    for c in relay.copiers {
        let _ = c.join();
    }
}

/// Moves what can move across `j` now, without blocking; says whether any byte moved.
fn pump(j: &Junction) -> (Pumped, bool) {
    let mut moved = false;
    let pumped = loop {
        // SAFETY: both descriptors are open pipe ends owned by `j`; null offsets are required
        // for pipes.
        let n = unsafe {
            libc::splice(
                j.from.as_raw_fd(),
                std::ptr::null_mut(),
                j.to.as_raw_fd(),
                std::ptr::null_mut(),
                SPLICE_LEN,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if n > 0 {
            j.moved.fetch_add(n as u64, Ordering::Relaxed);
            moved = true;
            continue;
        }
        if n == 0 {
            // End of input, everything moved: dropping the junction closes the output (EOF).
            break Pumped::Done;
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            // Either side is not ready. Bytes waiting mean the output is full.
            Some(libc::EAGAIN) => {
                break Pumped::Wait(if pending(j.from.as_fd()) > 0 {
                    Wait::Room
                } else {
                    Wait::Input
                })
            }
            // The reader went away: what the upstream wrote and nobody read still counts; the
            // junction closes its input, so the upstream's next write gets SIGPIPE.
            Some(libc::EPIPE) => {
                j.moved
                    .fetch_add(pending(j.from.as_fd()), Ordering::Relaxed);
                break Pumped::Done;
            }
            Some(libc::EINVAL) => break Pumped::Unsupported,
            _ => break Pumped::Done,
        }
    };
    (pumped, moved)
}

/// Bytes waiting in the pipe behind `fd` (0 if that cannot be known).
fn pending(fd: BorrowedFd<'_>) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which points at `n`.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) };
    if r < 0 {
        0
    } else {
        n.max(0) as u64
    }
}

/// One read of a copying loop: how many bytes came, retrying a read a signal interrupted; `None`
/// at the end of the input or on an error, either of which ends the copy. Serves this relay's
/// fallback and the capture of the last stage's stdout.
pub(super) fn read_some(from: &mut impl Read, buf: &mut [u8]) -> Option<usize> {
    loop {
        return match from.read(buf) {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => None,
        };
    }
}

/// The fallback: copies `j` through a buffer, blocking, until the end of its input or its reader.
fn copy(j: Junction) {
    let Junction {
        mut from,
        mut to,
        moved,
    } = j;
    let mut buf = vec![0u8; COPY_CHUNK];
    loop {
        let Some(n) = read_some(&mut from, &mut buf) else {
            return;
        };
        moved.fetch_add(n as u64, Ordering::Relaxed);
        if to.write_all(&buf[..n]).is_err() {
            moved.fetch_add(pending(from.as_fd()), Ordering::Relaxed);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_and_counts_everything_and_passes_the_end_on() {
        let (a_r, mut a_w) = os_pipe::pipe().expect("pipe");
        let (b_r, b_w) = os_pipe::pipe().expect("pipe");
        let (j, moved) = Junction::new(a_r, b_w);
        let relay = std::thread::spawn(move || relay_all(vec![j]));
        let writer = std::thread::spawn(move || {
            for i in 0..1000u32 {
                a_w.write_all(&vec![b'a' + (i % 26) as u8; 1000 + i as usize])
                    .expect("write");
            }
        });
        let mut got = Vec::new();
        let mut b_r = b_r;
        b_r.read_to_end(&mut got).expect("read to EOF");
        writer.join().expect("writer");
        relay.join().expect("relay");
        let expected: usize = (0..1000).map(|i| 1000 + i).sum();
        assert_eq!(got.len(), expected);
        assert_eq!(moved.load(Ordering::Relaxed), expected as u64);
        assert!(got.starts_with(&[b'a'; 1000]));
    }

    #[test]
    fn a_reader_that_goes_away_closes_the_input() {
        let (a_r, mut a_w) = os_pipe::pipe().expect("pipe");
        let (b_r, b_w) = os_pipe::pipe().expect("pipe");
        let (j, moved) = Junction::new(a_r, b_w);
        let relay = std::thread::spawn(move || relay_all(vec![j]));
        a_w.write_all(b"first\n").expect("write");
        drop(b_r);
        // The writer's next writes fail once the relay saw the reader gone (SIGPIPE is ignored
        // in test binaries too, so it is EPIPE here).
        let mut written = 6u64;
        let failed = (0..10_000).any(|_| match a_w.write(&[b'x'; 4096]) {
            Ok(n) => {
                written += n as u64;
                std::thread::sleep(std::time::Duration::from_millis(1));
                false
            }
            Err(e) => e.kind() == io::ErrorKind::BrokenPipe,
        });
        assert!(failed, "the upstream never saw its reader go away");
        relay.join().expect("relay");
        // Everything up to the reader's departure counts; a write racing the close may not.
        let moved = moved.load(Ordering::Relaxed);
        assert!((6..=written).contains(&moved), "{moved} of {written}");
    }
}
