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
//! - **What counts.** A junction counts what it moved plus, when the downstream reader went away,
//!   what was still waiting in the input pipe: every byte the upstream stage managed to write.
//! - **Fallback.** Where `splice` answers `EINVAL` (a kernel or file type that cannot splice), that
//!   junction is copied through a buffer by a thread of its own.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Most bytes one `splice` call asks for: more than any pipe holds, so one call empties it.
const SPLICE_LEN: usize = 1 << 20;
/// Buffer of the copying fallback.
const COPY_CHUNK: usize = 64 * 1024;

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

/// Moves bytes across every junction until each one is finished. Returns when all are.
pub fn relay_all(junctions: Vec<Junction>) {
    let mut open: Vec<(Junction, Wait)> = Vec::with_capacity(junctions.len());
    let mut copiers: Vec<JoinHandle<()>> = Vec::new();
    // First round: move what is already there.
    for j in junctions {
        match pump(&j) {
            Pumped::Wait(w) => open.push((j, w)),
            Pumped::Done => {}
            Pumped::Unsupported => copiers.push(std::thread::spawn(move || copy(j))),
        }
    }
    while !open.is_empty() {
        // Two entries per junction: its input (watched only while waiting for input, or a
        // writer that exited would wake the loop at once for nothing) and its output (always
        // watched: POLLERR is reported whatever is asked, and says the reader went away).
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(open.len() * 2);
        for (j, wait) in &open {
            fds.push(libc::pollfd {
                fd: if *wait == Wait::Input {
                    j.from.as_raw_fd()
                } else {
                    -1
                },
                events: libc::POLLIN,
                revents: 0,
            });
            fds.push(libc::pollfd {
                fd: j.to.as_raw_fd(),
                events: if *wait == Wait::Room {
                    libc::POLLOUT
                } else {
                    0
                },
                revents: 0,
            });
        }
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs the kernel fills in.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // Cannot wait: give up; dropping the pipes ends the stages as a closed pipe would.
            return;
        }
        let mut next = Vec::with_capacity(open.len());
        for (i, (j, wait)) in open.into_iter().enumerate() {
            if fds[2 * i].revents == 0 && fds[2 * i + 1].revents == 0 {
                next.push((j, wait));
                continue;
            }
            match pump(&j) {
                Pumped::Wait(w) => next.push((j, w)),
                Pumped::Done => {}
                Pumped::Unsupported => copiers.push(std::thread::spawn(move || copy(j))),
            }
        }
        open = next;
    }
    for c in copiers {
        let _ = c.join();
    }
}

/// Moves what can move across `j` now, without blocking.
fn pump(j: &Junction) -> Pumped {
    loop {
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
            continue;
        }
        if n == 0 {
            // End of input, everything moved: dropping the junction closes the output (EOF).
            return Pumped::Done;
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            // Either side is not ready. Bytes waiting mean the output is full.
            Some(libc::EAGAIN) => {
                return Pumped::Wait(if pending(j.from.as_fd()) > 0 {
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
                return Pumped::Done;
            }
            Some(libc::EINVAL) => return Pumped::Unsupported,
            _ => return Pumped::Done,
        }
    }
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

/// The fallback: copies `j` through a buffer, blocking, until the end of its input or its reader.
fn copy(j: Junction) {
    let Junction {
        mut from,
        mut to,
        moved,
    } = j;
    let mut buf = vec![0u8; COPY_CHUNK];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
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
