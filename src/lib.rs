//! `filesystem`: an MCP server that gives an agent confined, recoverable access to one workspace.
//!
//! Data flows one way: stdin → [`mcp::wire`] → [`mcp::server`] → a [`toolset::Toolset`] →
//! [`guard`] → disk or subprocess → result → server → wire → stdout. The two generations of the
//! tool — the file API in [`fs`] and the shelpa pipeline shell in [`legacy`] — are toolsets behind
//! the same core and share the one path guard.

pub mod allow;
pub mod buffer;
pub mod calllog;
pub mod check;
pub mod cli;
pub mod daemon;
pub mod fs;
pub mod guard;
pub mod history;
#[path = "../legacy/mod.rs"]
pub mod legacy;
pub mod mcp;
pub mod report;
pub mod root;
pub mod toolset;
pub mod workspace;
