//! `tee`: the only way shelpa writes, and the audit mirror every write leaves behind.
//!
//! Each write goes to the real file *and* is appended to `.shelpa/<path relative to the root>`.
//! The mirror format is line-oriented:
//!
//! ```text
//! --- shelpa:baseline ts=2026-02-25T13:17:30Z record_id=1772025450395572000 ---
//! <the file's content before shelpa first wrote to it>
//! --- shelpa:overwrite ts=2026-02-25T13:17:31Z record_id=1772025451000000000 ---
//! <the bytes of an overwrite>
//! <the bytes of appends, with no separator>
//! ```
//!
//! A separator always starts a line: when the mirror does not end with `\n`, one is written
//! first. So a version that lacked a final newline is read back with one — a known limit of the
//! format. Likewise, content that itself contains a line shaped like a separator cannot be told
//! apart from a real one by reading the mirror alone. The format, its one writer and the rule
//! that numbers records live in the workspace layer ([`workspace::mirror`]), which `audit
//! restore` writes through too.
//!
//! One file per step of a tee: `gate` (how much may be written unconfirmed), `target` (which
//! paths may be written, and a re-check of what is there right before the write), `write`
//! (replacing or appending to each file), `record` (its record in the mirror), `report` (what
//! the call answers) and `error` (why a tee did not happen).
//!
//! Every file operation goes through the workspace layer ([`workspace`]), relative to
//! directory descriptors opened beneath the root without following any symlink, and the target is
//! re-checked right before it is written, so a target swapped for a symlink, FIFO or hard link
//! after the policy checked it is refused, and a directory swapped for a symlink makes the write
//! fail instead of landing outside. An overwrite uses the layer's one temporary-file scheme;
//! mirror files are appended through [`workspace::mirror::MirrorAppender`], which refuses a
//! hard-linked file.

mod error;
mod gate;
mod record;
mod report;
mod target;
mod write;

pub use error::TeeError;
pub use gate::{gate, TeeLimits};
pub use report::{TeeMode, TeeReport};
pub use target::relative_target;
pub use write::commit;
