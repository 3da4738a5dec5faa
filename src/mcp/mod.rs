//! The Model Context Protocol core: framing on the wire and the JSON-RPC lifecycle. It knows
//! nothing about files; tools come from a [`crate::toolset::Toolset`].

pub mod dispatch;
pub mod executor;
pub mod message;
pub mod output;
pub mod protocol;
pub mod reply;
pub mod schedule;
pub mod server;
#[cfg(test)]
mod testkit;
pub mod wire;
