//! The `filesystem` binary; everything lives in the library so tests and tools can reuse it.

fn main() {
    std::process::exit(filesystem_mcp::cli::main());
}
