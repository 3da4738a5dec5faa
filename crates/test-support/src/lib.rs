//! What the integration tests in `tests/` share, in one library instead of support modules that
//! every test binary compiled whole (and then had to excuse with `allow(dead_code)`).
//!
//! Every helper here works on the real `filesystem` binary from outside: it starts the process,
//! speaks to it over stdio or runs a subcommand, and looks at the disk afterwards. Nothing links
//! the server's own code, so the tests see what a client sees.
//!
//! - [`bin`]: where the binary under test is.
//! - [`temp`]: temporary directories and workspaces (`Ws`: a root beside an `outside/` sibling;
//!   `TempRoot`: a temp dir that is the root).
//! - [`mcp`]: an MCP session over stdio to the real binary, and the messages a client sends.
//! - [`framing`]: reading `Content-Length` framed replies.
//! - [`harness`]: real agent harnesses (Claude Code, Codex CLI), installed by `scripts/test`, run
//!   offline in a home of their own.
//! - [`cli`]: running one subcommand (`call`, `audit`, ...) and reading what it printed.
//! - [`arena`]: a workspace beside a canary directory it must never reach, with snapshots and a
//!   reply screen for leaks.
//! - [`race`]: racing a server: a thread that swaps names, descriptor-relative helpers, timing.
//! - [`fixtures`]: the repository's `fixtures/` directory.
//! - [`logs`]: reading the JSON-lines call log.
//! - [`audit`]: a private copy of the `.shelpa/` mirror fixture and `filesystem audit` on it.
//! - [`procs`]: the processes alive on the machine, to find stages left behind.
//! - [`study`]: looking up arms and comparisons in a study report.

// Test support builds and inspects fixtures by name from outside, as a user would: the rule that
// keeps product code on the workspace layer (clippy.toml) does not apply to it.
#![allow(clippy::disallowed_methods)]
#![warn(missing_docs)]

pub mod arena;
pub mod audit;
pub mod bin;
pub mod cli;
pub mod fixtures;
pub mod framing;
pub mod harness;
pub mod logs;
pub mod mcp;
pub mod procs;
pub mod race;
pub mod study;
pub mod temp;

pub use bin::filesystem;
