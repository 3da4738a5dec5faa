//! The Model Context Protocol core: framing on the wire and the JSON-RPC lifecycle. It knows
//! nothing about files; tools come from a [`crate::toolset::Toolset`].

pub mod message;
pub mod output;
pub mod reply;
pub mod schedule;
pub mod server;
pub mod wire;
