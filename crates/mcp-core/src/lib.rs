//! The Model Context Protocol core: framing on the wire, the JSON-RPC lifecycle, and the contract a
//! set of tools fulfils ([`toolset::Toolset`]). It knows nothing about files, paths or any tool;
//! the crate has no dependency that could give it any.

pub mod buffer;
pub mod message;
pub mod output;
pub mod reply;
pub mod schedule;
pub mod server;
pub mod toolset;
pub mod wire;
