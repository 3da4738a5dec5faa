//! `filesystem`: an MCP server that gives an agent confined, recoverable access to one workspace.
//!
//! This crate is the binary's own part: the command line ([`cli`]), the `--server` daemon
//! ([`daemon`]) and its allowed roots ([`allow`]), the call log ([`call_log_writer`]), `check`
//! ([`check`]) and the MCP roots a client names when the server has no root of its own
//! ([`roots`]). It alone depends on every layer: the MCP core ([`mcp_core`]), the workspace layer
//! ([`workspace`]), the filesystem toolset ([`fs_tools`]), shelpa ([`shelpa`]) and the adoption
//! report ([`report`]). Data flows one way: stdin → wire → server → a toolset → workspace layer →
//! disk or subprocess → result → server → wire → stdout. See docs/ARCHITECTURE.md.

pub mod allow;
pub mod call_log_writer;
pub mod check;
pub mod cli;
pub mod daemon;
mod lru;
pub mod ran_on;
pub mod rewind;
pub mod root_opener;
pub mod roots;
pub mod write_rules;
