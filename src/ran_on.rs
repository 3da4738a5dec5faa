//! Which root the tool call running on this thread acted on, for that call's call-log line.
//!
//! When the root comes with each call (`--server`) or from the client (MCP roots), the root a call
//! ran on is known only to the toolset that chose it, and it may differ from whatever is served by
//! the time the call ends (the client switched roots meanwhile) or from where its path leads now.
//! The line must go to the log of the root the call ran on, opened through that root's own
//! descriptor. The MCP core knows nothing of roots, but it runs a call and then reports it to the
//! call log on the same worker thread, one call at a time (a batch's calls too, in turn); so the
//! toolset leaves the root here for the call log to take. [`clear`] at the start of every call
//! keeps a call that never reached a root from inheriting an earlier call's.

use std::cell::RefCell;

use workspace::Workspace;

thread_local! {
    static RAN_ON: RefCell<Option<Workspace>> = const { RefCell::new(None) };
}

/// Forgets the root of this thread's previous call: called as a call begins.
pub fn clear() {
    RAN_ON.with(|r| r.borrow_mut().take());
}

/// Records that this thread's current call runs on `ws`.
pub fn set(ws: &Workspace) {
    RAN_ON.with(|r| *r.borrow_mut() = Some(ws.clone()));
}

/// The root this thread's last call ran on, taken (so it is used for one line only).
pub fn take() -> Option<Workspace> {
    RAN_ON.with(|r| r.borrow_mut().take())
}
