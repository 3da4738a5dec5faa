//! Ctrl-C (and SIGTERM, and SIGHUP when the terminal goes) during a run: the handler only raises a flag; the trial threads see it
//! within a poll, kill their agents' process groups and return, and the records already
//! written stay. Agents lead their own process groups, so the terminal's SIGINT does not reach
//! them: without this, they would outlive the runner.

use std::sync::atomic::{AtomicBool, Ordering};

/// Raised by SIGINT, SIGTERM or SIGHUP, or by the runner itself when it must stop (an output error).
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: the one thing a signal handler may safely do here.
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP (a closed terminal would otherwise end
/// the runner without killing its agents). It resets itself after one signal, so a second
/// Ctrl-C ends the runner at once, the way a user insisting expects.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is a valid value to fill in; the handler is an
        // `extern "C" fn(c_int)` that only stores to an atomic, which is async-signal-safe;
        // sigemptyset and sigaction are given pointers to live, owned values.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// True once a stop was asked for.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}
