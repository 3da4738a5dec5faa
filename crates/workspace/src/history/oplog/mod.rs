//! The operation log, `.filesystem/.operations`: every call that changed the workspace, in
//! every mode, as one entry (an id that never repeats, the time, the session, the tool, and for
//! each path it touched what was there before and after), and the revert that puts the paths of
//! chosen entries back, itself an entry, so a revert can be reverted.
//!
//! The entries are gathered by the store lock's [`Journal`] (every mutation goes through the
//! store and takes its lock), written by [`file::append`] under that lock, and read newest
//! first by [`file::NewestFirst`].

pub mod file;
pub mod journal;
pub mod record;
pub mod revert;

#[cfg(test)]
mod props;

pub use journal::{observe, session_id, Journal, Origin};
pub use record::{Operation, PathChange, Session, State};
