//! `filesystem study`: run the adoption experiment (agents given tasks under each tool interface)
//! and report on it.
//!
//! The runner and the report meet only in [`record`]: the output directory's layout and the one
//! record each finished trial leaves. Nothing else of the run is needed to analyse it, so a study
//! run elsewhere (or by an earlier build) is reported the same way.

pub mod command;
mod named;
pub mod record;
pub mod report;
pub mod run;
pub mod spec;
