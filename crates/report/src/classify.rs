//! Which interface a tool call went through, and whether it wrote a file.
//!
//! Everything here is an allow-list: a tool is this project's only if its name is in one of the
//! toolsets' own tables of tools, a built-in counts as a file tool only if it is named below, and
//! a call counts as a write only if its tool is a known writer (for this project's tools, the
//! class its table gives). Anything else falls into the `other` buckets rather than being guessed
//! into a category that would flatter the numbers.

use mcp_core::toolset::{ToolClass, ToolEntry};
use serde::Serialize;

/// This project's tables of tools, each with the interface it is: shelpa's (every tool of every set
/// it can serve, `--shelpa-tools all`) and the filesystem mode's (all fourteen, `--backup` or
/// not, and the opt-in extras of `--tools`). The toolsets own the names and each tool's class;
/// the report reads only these tables.
const OUR_TABLES: [(Interface, &[ToolEntry]); 3] = [
    (Interface::Pipe, &shelpa::TOOLS),
    (Interface::Filesystem, &fs_tools::TOOLS),
    (Interface::Filesystem, &fs_tools::tools::EXTRAS),
];

/// The interface and class of one of this project's tools, or `None` for any other name.
fn our_tool(tool: &str) -> Option<(Interface, ToolClass)> {
    OUR_TABLES.iter().find_map(|(interface, table)| {
        table
            .iter()
            .find(|entry| entry.name == tool)
            .map(|entry| (*interface, entry.class))
    })
}

/// The client's own (built-in) tools that touch files. `Bash` is here because agents use it to
/// read and write files, but it is never counted as a write: what a shell command does cannot
/// be told from its text without guessing.
pub const BUILTIN_FILE_TOOLS: &[&str] = &[
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Glob",
    "Grep",
    "LS",
    "Bash",
];

/// The client's built-in tools whose every call is a file write or edit (this project's own
/// writers are the [`ToolClass::Write`] rows of its tables).
const BUILTIN_WRITING_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// Tools through which a harness loads the schemas of tools it offered by name only: Claude
/// Code's `ToolSearch`, Codex CLI's `tool_search`. A call of one is the harness's discovery, a
/// cost of how the tools were presented, not work on files: it is counted apart
/// ([`Interface::Discovery`]) and adoption is computed over work calls only.
pub const DISCOVERY_TOOLS: &[&str] = &["ToolSearch", CODEX_DISCOVERY_TOOL];

/// The prefix Claude Code gives to tools served by an MCP server: `mcp__<server>__<tool>`.
/// Codex CLI names the namespace it offers a server's tools in the same way: `mcp__<server>`.
const MCP_PREFIX: &str = "mcp__";

// ---- Codex CLI (read from 0.171.0: the tools it sent a model, see the README) ----

/// Codex CLI's built-in tools that touch files. `exec_command` runs a shell command line (Codex's
/// `Bash`: counted like it, never as a read or a write, see [`BUILTIN_FILE_TOOLS`]); `apply_patch`
/// adds, changes, moves and deletes files (a freeform tool, offered to the models Codex knows);
/// `view_image` reads an image file into the conversation.
pub const CODEX_BUILTIN_FILE_TOOLS: &[&str] = &["exec_command", "apply_patch", "view_image"];

/// Codex CLI's built-in tools whose every call writes or edits a file.
const CODEX_BUILTIN_WRITING_TOOLS: &[&str] = &["apply_patch"];

/// Codex CLI's built-in tools whose every call reads file contents.
const CODEX_BUILTIN_READING_TOOLS: &[&str] = &["view_image"];

/// Codex CLI's discovery tool: with a model it knows, it defers MCP tools behind it and loads their
/// schemas when the model searches. One of [`DISCOVERY_TOOLS`]: a call of it is `discovery`.
pub const CODEX_DISCOVERY_TOOL: &str = "tool_search";

/// Classifies a tool call as Codex CLI records it: a name and, for a namespace tool, the namespace
/// (`mcp__<server>` for an MCP server's tools). A namespace that is not an MCP server's
/// (`multi_agent_v1`) and a built-in outside [`CODEX_BUILTIN_FILE_TOOLS`] are `other`.
pub fn classify_codex_name(
    name: &str,
    namespace: Option<&str>,
    servers: &ServerFilter,
) -> ToolName {
    match namespace {
        Some(ns) if ns.starts_with(MCP_PREFIX) => {
            classify_transcript_name(&format!("{ns}__{name}"), servers)
        }
        Some(_) => ToolName {
            tool: name.to_string(),
            server: None,
            interface: Interface::Other,
        },
        None => ToolName {
            tool: name.to_string(),
            server: None,
            interface: if CODEX_BUILTIN_FILE_TOOLS.contains(&name) {
                Interface::Builtin
            } else if DISCOVERY_TOOLS.contains(&name) {
                Interface::Discovery
            } else {
                Interface::Other
            },
        },
    }
}

// ---- end of Codex CLI ----

// --- Gemini CLI (0.61.0) -------------------------------------------------------------------

/// Gemini CLI's own tools that touch files, as 0.61.0 offers them (`grep_search` was
/// `search_file_content` and `read_many_files` is offered by earlier versions; both kept so
/// their transcripts classify too). `run_shell_command` is here as `Bash` is for Claude Code, and
/// like it never counts as a write.
pub const GEMINI_BUILTIN_FILE_TOOLS: &[&str] = &[
    "read_file",
    "read_many_files",
    "write_file",
    "replace",
    "glob",
    "grep_search",
    "search_file_content",
    "list_directory",
    "run_shell_command",
];

/// Gemini CLI's built-ins whose every call writes or edits a file.
const GEMINI_BUILTIN_WRITING_TOOLS: &[&str] = &["write_file", "replace"];

/// Gemini CLI's built-ins whose every call reads file contents.
const GEMINI_BUILTIN_READING_TOOLS: &[&str] = &[
    "read_file",
    "read_many_files",
    "grep_search",
    "search_file_content",
];

/// The prefix Gemini CLI gives to an MCP server's tools: `mcp_<server>_<tool>`.
const GEMINI_MCP_PREFIX: &str = "mcp_";

/// Classifies a tool name as Gemini CLI records it. Its own tools have bare names, some the
/// same as this project's (`write_file`, `list_directory`), so they are told apart by the
/// `mcp_` prefix alone; an MCP name splits at the last `_` that leaves one of this project's
/// tool names behind it (server and tool names may both hold `_`), and a name no split explains
/// is another server's tool, kept whole.
pub fn classify_gemini_name(name: &str, servers: &ServerFilter) -> ToolName {
    let Some(rest) = name.strip_prefix(GEMINI_MCP_PREFIX) else {
        let interface = if GEMINI_BUILTIN_FILE_TOOLS.contains(&name) {
            Interface::Builtin
        } else {
            Interface::Other
        };
        return ToolName {
            tool: name.to_string(),
            server: None,
            interface,
        };
    };
    let split = rest.match_indices('_').find_map(|(at, _)| {
        let (server, tool) = (&rest[..at], &rest[at + 1..]);
        our_tool(tool).map(|(ours, _)| (server, tool, ours))
    });
    match split {
        Some((server, tool, ours)) => ToolName {
            tool: tool.to_string(),
            server: Some(server.to_string()),
            interface: if servers.admits(server) {
                ours
            } else {
                Interface::OtherMcp
            },
        },
        None => ToolName {
            tool: rest.to_string(),
            server: None,
            interface: Interface::OtherMcp,
        },
    }
}

// --- end of Gemini CLI ---------------------------------------------------------------------

/// The family of tools a call went through; the unit the whole report is broken down by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Interface {
    /// The client's built-in file tools (`Write`, `Edit`, `Read`, `Bash`…).
    Builtin,
    /// This project's legacy pipe tools.
    Pipe,
    /// This project's filesystem tools.
    Filesystem,
    /// Tools of any other MCP server.
    OtherMcp,
    /// Built-in tools that are not file tools (`Task`, `TodoWrite`, `WebFetch`…).
    Other,
    /// A harness's discovery tools ([`DISCOVERY_TOOLS`]): loading a schema, not work.
    Discovery,
}

impl Interface {
    /// Every interface, in report order.
    pub const ALL: [Interface; 6] = [
        Interface::Builtin,
        Interface::Pipe,
        Interface::Filesystem,
        Interface::OtherMcp,
        Interface::Other,
        Interface::Discovery,
    ];

    /// The name used in every output format.
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Builtin => "builtin",
            Interface::Pipe => "pipe",
            Interface::Filesystem => "filesystem",
            Interface::OtherMcp => "other_mcp",
            Interface::Other => "other",
            Interface::Discovery => "discovery",
        }
    }

    /// Whether this is one of this project's interfaces (what adoption counts).
    pub fn is_ours(self) -> bool {
        matches!(self, Interface::Pipe | Interface::Filesystem)
    }

    /// Whether a call of this interface is work (anything but a discovery call).
    pub fn is_work(self) -> bool {
        self != Interface::Discovery
    }
}

/// A tool name as the client spelled it, taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolName {
    /// The tool's own name (`edit_file`, `Write`).
    pub tool: String,
    /// The MCP server it came from, for `mcp__<server>__<tool>` names.
    pub server: Option<String>,
    /// The interface it belongs to.
    pub interface: Interface,
}

/// Which MCP server names count as this project. Empty means any server: the name is whatever
/// the user configured, so by default a tool counts as ours by its tool name alone.
#[derive(Clone, Debug, Default)]
pub struct ServerFilter {
    /// The allowed server names; empty allows all.
    pub names: Vec<String>,
}

impl ServerFilter {
    fn admits(&self, server: &str) -> bool {
        self.names.is_empty() || self.names.iter().any(|n| n == server)
    }
}

/// Classifies a tool name as it appears in a client transcript.
pub fn classify_transcript_name(name: &str, servers: &ServerFilter) -> ToolName {
    if let Some(rest) = name.strip_prefix(MCP_PREFIX) {
        // Server names may themselves contain "__"; the tool is what follows the last one.
        if let Some((server, tool)) = rest.rsplit_once("__") {
            let interface = match our_tool(tool) {
                Some((ours, _)) if servers.admits(server) => ours,
                _ => Interface::OtherMcp,
            };
            return ToolName {
                tool: tool.to_string(),
                server: Some(server.to_string()),
                interface,
            };
        }
        return ToolName {
            tool: name.to_string(),
            server: None,
            interface: Interface::OtherMcp,
        };
    }
    let interface = if BUILTIN_FILE_TOOLS.contains(&name) {
        Interface::Builtin
    } else if DISCOVERY_TOOLS.contains(&name) {
        Interface::Discovery
    } else {
        Interface::Other
    };
    ToolName {
        tool: name.to_string(),
        server: None,
        interface,
    }
}

/// Classifies a tool name as it appears in this server's call log (no prefix: the log only
/// ever records this server's own tools, so an unknown name is `other`, not a guess).
pub fn classify_log_name(tool: &str) -> Interface {
    our_tool(tool).map_or(Interface::Other, |(interface, _)| interface)
}

/// Whether a call wrote or edited a file. A pipe call writes only through `tee`: shelpa_write
/// and shelpa_tee always do, shelpa_pipe when one of its stages is `tee`, the navigation tool
/// `shelpa` never; `Bash` never counts (see [`BUILTIN_FILE_TOOLS`]).
pub fn is_write(interface: Interface, tool: &str, stages: &[String]) -> bool {
    match interface {
        // The names of the harnesses' tables do not overlap, and a name is `Builtin` only
        // through its own harness's table.
        Interface::Builtin => {
            BUILTIN_WRITING_TOOLS.contains(&tool)
                || CODEX_BUILTIN_WRITING_TOOLS.contains(&tool)
                || GEMINI_BUILTIN_WRITING_TOOLS.contains(&tool)
        }
        // The interface was found through the same table, so the tool's class is the one of the
        // table the interface names; a name of the other table is not this interface's write.
        Interface::Pipe | Interface::Filesystem => match our_tool(tool) {
            Some((ours, class)) if ours == interface => match class {
                ToolClass::Write => true,
                ToolClass::Pipeline => stages.iter().any(|s| s == "tee"),
                ToolClass::Read | ToolClass::Navigate | ToolClass::Arrange | ToolClass::History => {
                    false
                }
            },
            _ => false,
        },
        Interface::OtherMcp | Interface::Other | Interface::Discovery => false,
    }
}

/// The client's built-in tools whose every call reads file contents (`Grep` searches them, as
/// this project's `search_content` does, which its table classes as a read).
const BUILTIN_READING_TOOLS: &[&str] = &["Read", "NotebookRead", "Grep"];

/// Whether a call read file contents: this project's [`ToolClass::Read`] tools, a pipe command
/// line that does not write (no `tee`) and runs something besides navigation (`cd`, `pwd`,
/// `ls`), and the built-in readers. Like writes, `Bash` never counts, and a call is never both:
/// a pipeline that writes through `tee` counts as a write only. Used by `filesystem study
/// report` for adoption among reads.
pub fn is_read(interface: Interface, tool: &str, stages: &[String]) -> bool {
    match interface {
        Interface::Builtin => {
            BUILTIN_READING_TOOLS.contains(&tool)
                || CODEX_BUILTIN_READING_TOOLS.contains(&tool)
                || GEMINI_BUILTIN_READING_TOOLS.contains(&tool)
        }
        Interface::Pipe | Interface::Filesystem => match our_tool(tool) {
            Some((ours, class)) if ours == interface => match class {
                ToolClass::Read => true,
                ToolClass::Pipeline => {
                    !is_write(interface, tool, stages)
                        && stages
                            .iter()
                            .any(|s| !shelpa::NAVIGATION_COMMANDS.contains(&s.as_str()))
                }
                ToolClass::Write
                | ToolClass::Navigate
                | ToolClass::Arrange
                | ToolClass::History => false,
            },
            _ => false,
        },
        Interface::OtherMcp | Interface::Other | Interface::Discovery => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_names_tell_its_builtins_from_this_projects_tools() {
        let f = ServerFilter::default();
        let t = classify_gemini_name("mcp_filesystem_write_file", &f);
        assert_eq!(
            (t.tool.as_str(), t.server.as_deref(), t.interface),
            ("write_file", Some("filesystem"), Interface::Filesystem)
        );
        let t = classify_gemini_name("mcp_my_fs_read_text_file", &f);
        assert_eq!(t.server.as_deref(), Some("my_fs"));
        assert_eq!(t.tool, "read_text_file");
        let t = classify_gemini_name("write_file", &f);
        assert_eq!(t.interface, Interface::Builtin);
        assert!(is_write(t.interface, &t.tool, &[]));
        let t = classify_gemini_name("read_file", &f);
        assert!(is_read(t.interface, &t.tool, &[]));
        let t = classify_gemini_name("run_shell_command", &f);
        assert_eq!(t.interface, Interface::Builtin);
        assert!(!is_write(t.interface, &t.tool, &[]) && !is_read(t.interface, &t.tool, &[]));
        assert_eq!(
            classify_gemini_name("google_web_search", &f).interface,
            Interface::Other
        );
        assert_eq!(
            classify_gemini_name("mcp_github_get_issue", &f).interface,
            Interface::OtherMcp
        );
        let only = ServerFilter {
            names: vec!["filesystem".into()],
        };
        assert_eq!(
            classify_gemini_name("mcp_reference_write_file", &only).interface,
            Interface::OtherMcp
        );
    }

    #[test]
    fn mcp_names_split_on_the_last_double_underscore() {
        let t = classify_transcript_name("mcp__my__fs__edit_file", &ServerFilter::default());
        assert_eq!(t.tool, "edit_file");
        assert_eq!(t.server.as_deref(), Some("my__fs"));
        assert_eq!(t.interface, Interface::Filesystem);
    }

    #[test]
    fn server_filter_sends_lookalike_tools_to_other_mcp() {
        let only = ServerFilter {
            names: vec!["filesystem".into()],
        };
        let t = classify_transcript_name("mcp__reference__write_file", &only);
        assert_eq!(t.interface, Interface::OtherMcp);
        let t = classify_transcript_name("mcp__filesystem__write_file", &only);
        assert_eq!(t.interface, Interface::Filesystem);
    }

    #[test]
    fn discovery_tools_are_a_class_of_their_own_and_never_work() {
        for name in DISCOVERY_TOOLS {
            let t = classify_transcript_name(name, &ServerFilter::default());
            assert_eq!(t.interface, Interface::Discovery, "{name}");
            assert!(!t.interface.is_work());
            assert!(!is_write(t.interface, name, &[]));
            assert!(!is_read(t.interface, name, &[]));
        }
        assert!(Interface::Builtin.is_work());
    }

    #[test]
    fn builtin_non_file_tools_are_other() {
        let f = ServerFilter::default();
        assert_eq!(
            classify_transcript_name("Edit", &f).interface,
            Interface::Builtin
        );
        assert_eq!(
            classify_transcript_name("TodoWrite", &f).interface,
            Interface::Other
        );
    }

    #[test]
    fn every_shelpa_tool_is_the_pipe_interface_under_any_server_name() {
        let f = ServerFilter::default();
        for tool in ["shelpa_pipe", "shelpa_tee", "shelpa_write", "shelpa"] {
            for name in [
                format!("mcp__shelpa-mcp__{tool}"),
                format!("mcp__x__y__{tool}"),
            ] {
                let t = classify_transcript_name(&name, &f);
                assert_eq!(t.interface, Interface::Pipe, "{name}");
                assert_eq!(t.tool, tool);
            }
            assert_eq!(classify_log_name(tool), Interface::Pipe);
        }
        // Unprefixed, `shelpa` is no built-in of any client: not ours by a guess.
        assert_eq!(
            classify_transcript_name("shelpa", &f).interface,
            Interface::Other
        );
    }

    #[test]
    fn every_row_of_the_toolsets_tables_is_ours_and_its_class_decides_writes() {
        let f = ServerFilter::default();
        for (interface, table) in OUR_TABLES {
            for entry in table {
                assert_eq!(classify_log_name(entry.name), interface, "{}", entry.name);
                let t = classify_transcript_name(&format!("mcp__any__{}", entry.name), &f);
                assert_eq!(t.interface, interface, "{}", entry.name);
                assert_eq!(
                    is_write(interface, entry.name, &[]),
                    entry.class == ToolClass::Write,
                    "{}",
                    entry.name
                );
            }
        }
        // Every one of the four shelpa tools, the fourteen filesystem tools and the eleven
        // filesystem extras is known.
        assert_eq!(OUR_TABLES.map(|(_, t)| t.len()), [4, 14, 11]);
        assert_eq!(
            classify_log_name(fs_tools::tools::FIND_FILES),
            Interface::Filesystem
        );
    }

    #[test]
    fn shelpa_tee_writes_and_navigation_does_not() {
        assert!(is_write(Interface::Pipe, "shelpa_tee", &[]));
        assert!(!is_write(Interface::Pipe, "shelpa", &["cd".to_string()]));
        // A shelpa_tee name from another server is not ours, so not our write either.
        assert!(!is_write(Interface::OtherMcp, "shelpa_tee", &[]));
    }

    #[test]
    fn only_tee_pipelines_and_known_writers_are_writes() {
        let stages = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(is_write(
            Interface::Pipe,
            "shelpa_pipe",
            &stages(&["cat", "tee"])
        ));
        assert!(!is_write(
            Interface::Pipe,
            "shelpa_pipe",
            &stages(&["cat", "rg"])
        ));
        assert!(!is_write(Interface::Builtin, "Bash", &stages(&["tee"])));
        assert!(is_write(Interface::Builtin, "MultiEdit", &[]));
    }

    #[test]
    fn codex_names_are_classified_by_namespace_and_its_own_table() {
        let f = ServerFilter::default();
        let t = classify_codex_name("read_text_file", Some("mcp__filesystem"), &f);
        assert_eq!(
            (t.interface, t.server.as_deref()),
            (Interface::Filesystem, Some("filesystem"))
        );
        assert_eq!(t.tool, "read_text_file");
        let t = classify_codex_name("shelpa_pipe", Some("mcp__my__fs"), &f);
        assert_eq!(
            (t.interface, t.server.as_deref()),
            (Interface::Pipe, Some("my__fs"))
        );
        assert_eq!(
            classify_codex_name("spawn_agent", Some("multi_agent_v1"), &f).interface,
            Interface::Other
        );
        for (name, read, write) in [
            ("exec_command", false, false),
            ("apply_patch", false, true),
            ("view_image", true, false),
        ] {
            let t = classify_codex_name(name, None, &f);
            assert_eq!(t.interface, Interface::Builtin, "{name}");
            assert_eq!(is_write(t.interface, name, &[]), write, "{name}");
            assert_eq!(is_read(t.interface, name, &["cat".into()]), read, "{name}");
        }
        // Each harness's names are built-ins only in its own transcripts.
        assert_eq!(
            classify_codex_name("Write", None, &f).interface,
            Interface::Other
        );
        assert_eq!(
            classify_transcript_name("apply_patch", &f).interface,
            Interface::Other
        );
        assert_eq!(
            classify_codex_name(CODEX_DISCOVERY_TOOL, None, &f).interface,
            Interface::Discovery
        );
    }

    #[test]
    fn reads_are_the_read_class_non_writing_pipelines_and_builtin_readers() {
        let stages = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(is_read(Interface::Filesystem, "read_text_file", &[]));
        assert!(is_read(Interface::Filesystem, "search_content", &[]));
        assert!(!is_read(Interface::Filesystem, "write_file", &[]));
        assert!(!is_read(Interface::Filesystem, "list_directory", &[]));
        assert!(is_read(
            Interface::Pipe,
            "shelpa_pipe",
            &stages(&["head", "rg"])
        ));
        assert!(!is_read(
            Interface::Pipe,
            "shelpa_pipe",
            &stages(&["cat", "tee"])
        ));
        assert!(!is_read(Interface::Pipe, "shelpa_pipe", &stages(&["ls"])));
        assert!(!is_read(Interface::Pipe, "shelpa_pipe", &[]));
        assert!(is_read(Interface::Builtin, "Read", &[]));
        assert!(is_read(Interface::Builtin, "Grep", &[]));
        assert!(!is_read(Interface::Builtin, "Bash", &stages(&["cat"])));
        assert!(!is_read(Interface::OtherMcp, "read_text_file", &[]));
    }
}
