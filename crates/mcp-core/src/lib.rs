//! The Model Context Protocol core: framing on the wire, the JSON-RPC lifecycle, and the contract a
//! set of tools fulfils ([`toolset::Toolset`]). It knows nothing about files, paths or any tool;
//! the crate has no dependency that could give it any.
//!
//! One job per module, in the order a message meets them: [`wire`] splits the byte stream into
//! frames, [`message`] classifies JSON-RPC messages, [`dispatch`] decides what each method does
//! (with [`protocol`] settling the revision, and [`batch`] bounding 2025-03-26's batches), [`schedule`] orders tool calls into lanes,
//! [`executor`] runs them on worker threads, [`reply`] writes a call's result, and [`output`]
//! batches replies and writes them after the call log has them; [`peer`] sends the server's own
//! requests to the client (`roots/list`) and routes their answers. [`server`] starts the threads
//! and joins them with channels.

pub mod batch;
pub mod budget;
pub mod buffer;
pub mod dispatch;
pub mod executor;
pub mod message;
pub mod output;
pub mod peer;
pub mod protocol;
pub mod reply;
pub mod schedule;
pub mod server;
#[cfg(test)]
mod testkit;
pub mod toolset;
pub mod wire;
