//! The approval gate: how much a tee may write without the caller confirming it.

use super::TeeError;

/// The write limits of the tee path.
#[derive(Clone, Copy, Debug)]
pub struct TeeLimits {
    /// Writes larger than this need `confirm_oversize: true`.
    pub approve_above: u64,
    /// Writes are cut to this many bytes (and reported `truncated`).
    pub hard_limit: usize,
}

/// The approval gate: `size` bytes may be written only below the threshold or when confirmed.
pub fn gate(
    size: u64,
    confirmed: bool,
    limits: &TeeLimits,
    first_target: &str,
) -> Result<(), TeeError> {
    if size > limits.approve_above && !confirmed {
        return Err(TeeError::ApprovalRequired {
            size,
            threshold: limits.approve_above,
            path: first_target.to_string(),
        });
    }
    Ok(())
}
