//! Byte buffers reused from one message to the next.
//!
//! The hot loops (reply bodies, call-log lines) keep one buffer each instead of growing a fresh
//! vector per call; a single large message must not pin its size for the rest of the session.

/// The largest capacity a reused buffer keeps between messages.
pub const KEEP: usize = 1 << 20;

/// Empties `buf` for reuse, or replaces it with a new one if a large message grew it past [`KEEP`].
pub fn recycle(buf: &mut Vec<u8>) {
    if buf.capacity() > KEEP {
        *buf = Vec::new();
    } else {
        buf.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_keep_their_memory_large_ones_give_it_back() {
        let mut small = Vec::with_capacity(100);
        small.extend_from_slice(b"abc");
        recycle(&mut small);
        assert!(small.is_empty() && small.capacity() >= 100);
        let mut large = vec![0u8; KEEP + 1];
        recycle(&mut large);
        assert!(large.is_empty() && large.capacity() <= KEEP);
    }
}
