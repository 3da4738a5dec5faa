//! Which face shelpa shows: the surface the design notes record (`--surface original`, the
//! default) or this reconstruction's rewritten texts (`--surface modern`), and which of the tool
//! sets shelpa had over its life (`--shelpa-tools pipe|help|all`).
//!
//! Why it exists: adoption studies compare how models take to an interface. An interface whose
//! names, descriptions and help were rewritten is a different interface, so the one that was
//! retired must be reproducible as it was. Only texts, names and the set of tools change between
//! surfaces; every tool runs the same code in both (same policy, same guard, same results).
//!
//! # What is recorded and what is reconstructed
//!
//! The design records quote these texts, and the original surface serves them byte for byte
//! (`fixtures/recorded/` holds copies taken from the records by line range, and
//! `tests/recorded_surface.rs` compares what is served with them):
//!
//! - the help, all 17 lines (record 000, lines 186-202; record 001 quotes it again): `--help`
//!   prints it first and the `initialize` instructions are exactly it;
//! - the `shelpa_pipe` definition (000, lines 206-227): its description and the descriptions of
//!   `command`, `cwd` and `confirm_oversize`;
//! - `shelpa_write`'s description, as the help's `Tools:` section gives it (000, line 197);
//! - the server name `shelpa-mcp`, the four tool names and their roles (001, lines 24-28).
//!
//! The error words the records quote are the original surface's too; they are applied where
//! failures become the wire object, in `crate::recorded`.
//!
//! Reconstructed, in the recorded style, and marked `RECONSTRUCTED` below: the descriptions of
//! shelpa_tee and shelpa (from their roles and the help's navigation line) and the properties of
//! shelpa_write, shelpa_tee and shelpa (`confirm_oversize` reuses the recorded words of the same
//! property of shelpa_pipe). The README's "Recorded and reconstructed" table lists every text.
//!
//! # Reconstruction choices
//!
//! - The recorded help is the text of the two-tool version (`help`, the default). It is served
//!   unchanged with every set, so under `pipe` it still names shelpa_write and under `all` it
//!   does not name shelpa_tee or shelpa; `--help` says after its separator which tools are served.
//! - The help and the instructions keep the recorded words where this reconstruction differs:
//!   "cwd defaults to the workspace root" (here: the session directory, which is the root until a
//!   `cd`), "Allowed pipeline commands: tail rg awk sed tr jq wc tee fd" (here `ls`, `head` and
//!   `sort` run in pipelines too, as the `Tools:` line lists them), and the record's whitelist
//!   with its three companion tools (here: `MISSING_TOOL`). Whatever this reconstruction adds
//!   for people goes below the separator of `--help`, never into the instructions or a
//!   description.
//! - Tool titles: the recorded definition has none; the original surface sets each tool's title
//!   to its name, which is what clients show when a title is absent. Annotations are the same in
//!   both surfaces: they describe behaviour, which is shared. Clients that negotiate 2024-11-05
//!   are sent neither, and see exactly the recorded definition.
//! - shelpa_tee takes `content`, `paths` (one or more files, as `tee` takes several), `append`
//!   and `confirm_oversize`; it is checked exactly as a `tee` stage is (the policy's target
//!   checks), then passes the same approval gate and the same commit (write plus `.shelpa/`
//!   mirror) as pipeline tees and shelpa_write. Like shelpa_write it returns empty stdout.
//! - shelpa takes `command`: `cd DIR`, `pwd` or `ls …` alone, run by the same code as through
//!   shelpa_pipe; a pipeline is refused `NAV_IN_PIPELINE` and any other command
//!   `DISALLOWED_CMD`, both pointing to shelpa_pipe.

use serde_json::{json, Value};

use mcp_core::toolset::{Effects, ToolClass, ToolDef, ToolEntry};

/// The two surfaces (`--surface`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Surface {
    /// The names, descriptions, help and server name the design notes record.
    #[default]
    Original,
    /// This reconstruction's own, rewritten texts.
    Modern,
}

/// The tool sets shelpa had (`--shelpa-tools`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ShelpaTools {
    /// shelpa_pipe alone: the first version.
    Pipe,
    /// shelpa_pipe and shelpa_write: the two tools the recorded help lists.
    #[default]
    Help,
    /// shelpa_pipe, shelpa_tee, shelpa_write and shelpa: every tool the notes name.
    All,
}

impl ShelpaTools {
    /// The tool names of the set, in the order `tools/list` gives them.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            ShelpaTools::Pipe => &[PIPE],
            ShelpaTools::Help => &[PIPE, WRITE],
            ShelpaTools::All => &[PIPE, TEE, WRITE, NAV],
        }
    }

    /// The flag's spelling (`pipe`, `help`, `all`), for help texts.
    pub fn as_str(self) -> &'static str {
        match self {
            ShelpaTools::Pipe => "pipe",
            ShelpaTools::Help => "help",
            ShelpaTools::All => "all",
        }
    }
}

/// Pipelines and navigation.
pub const PIPE: &str = "shelpa_pipe";
/// File writes through tee.
pub const TEE: &str = "shelpa_tee";
/// Direct write, a tee wrapper.
pub const WRITE: &str = "shelpa_write";
/// Navigation: cd, pwd, ls alone.
pub const NAV: &str = "shelpa";

/// Every tool shelpa can serve (`--shelpa-tools all`, in that set's `tools/list` order) with its
/// class: the one table of shelpa's tool names, which the sets above draw from and the adoption
/// report classifies calls by. shelpa_pipe is a [`ToolClass::Pipeline`]: it writes only when a
/// stage is `tee`.
pub const TOOLS: [ToolEntry; 4] = [
    ToolEntry {
        name: PIPE,
        class: ToolClass::Pipeline,
    },
    ToolEntry {
        name: TEE,
        class: ToolClass::Write,
    },
    ToolEntry {
        name: WRITE,
        class: ToolClass::Write,
    },
    ToolEntry {
        name: NAV,
        class: ToolClass::Navigate,
    },
];

/// The server name (`serverInfo.name`) shelpa announced.
pub const ORIGINAL_SERVER_NAME: &str = "shelpa-mcp";

/// The help text, printed first by `--help` and sent, alone, as the `instructions` of
/// `initialize` in the original surface: the 17 lines the design records quote (000, lines
/// 186-202), byte for byte. Golden-tested against `fixtures/recorded/help.txt`.
pub const RECORDED_HELP: &str = "\
shelpa-mcp (MCP stdio server)
Usage:
  shelpa-mcp [--root <ROOT>] [--help]
Notes:
  - This binary speaks MCP over stdio. It does not serve HTTP.
  - Use your MCP client to call tools below.
  - --root sets the workspace root directory for all tool calls.
  - cwd defaults to the workspace root if not provided.
Tools:
  - shelpa_pipe    Execute a virtual safety pipeline
  (tail  rg  awk  sed  tr  jq  wc  tee  fd  ls  sort  head)
  - shelpa_write   Execute a virtual safety tee (auto guard, save override history)
Allowed pipeline commands: tail rg awk sed tr jq wc tee fd
Navigation commands (single-stage only): pwd  cd <path>  ls [path]
Pipes only. No redirects (> >>). No sed -i. No awk file output. Save via tee only.
CRITICAL: Never use standard file editing tools (such as write_file, replace, etc.)
  - always use the specified tool exclusively.
";

/// The recorded description of `confirm_oversize` (000, line 222), used for that property in
/// every tool that takes it.
const RECORDED_CONFIRM: &str = "Confirm large writes exceeding approval threshold";

/// The line `--help` prints between the recorded text and what only this machine can say
/// (missing commands, the kernel's fence): everything above it is fixed and golden-tested,
/// everything below it may differ between machines.
pub const STATUS_SEPARATOR: &str =
    "---- this reconstruction, on this machine (not part of the recorded help) ----";

/// The input schema of shelpa_pipe: the same properties in both surfaces (the calls are parsed
/// by one function), described in the surface's words.
fn pipe_input(surface: Surface) -> Value {
    let (command, cwd, confirm) = match surface {
        Surface::Modern => (
            "e.g. tail -n 100 app.log | rg ERROR | awk '{print $3}' | sort -u",
            "run in this directory for this call only (relative to the workspace root, or absolute inside it); the session directory is unchanged",
            "allow a tee write larger than the approval threshold",
        ),
        // Recorded (000, lines 214, 218, 222).
        Surface::Original => (
            "Pipeline command string",
            "Optional working directory within workspace",
            RECORDED_CONFIRM,
        ),
    };
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": command},
            "cwd": {"type": "string", "description": cwd},
            "confirm_oversize": {"type": "boolean", "description": confirm}
        },
        "required": ["command"]
    })
}

fn write_input(surface: Surface) -> Value {
    let (path, content, append, confirm) = match surface {
        Surface::Modern => (
            "file to write, relative to the session directory",
            None,
            "add to the end instead of replacing",
            "allow a write larger than the approval threshold",
        ),
        // RECONSTRUCTED in the words of shelpa_pipe's recorded properties.
        Surface::Original => (
            "File path within workspace",
            Some("Content to write"),
            "Append instead of overwrite",
            RECORDED_CONFIRM,
        ),
    };
    let mut content_schema = json!({"type": "string"});
    if let Some(text) = content {
        content_schema["description"] = json!(text);
    }
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": path},
            "content": content_schema,
            "append": {"type": "boolean", "description": append},
            "confirm_oversize": {"type": "boolean", "description": confirm}
        },
        "required": ["path", "content"]
    })
}

fn tee_input(surface: Surface) -> Value {
    let (content, paths, append, confirm) = match surface {
        Surface::Modern => (
            "the bytes tee writes (its input)",
            "the files, as tee FILE… names them: relative to the session directory",
            "add to the end of every file instead of replacing it (tee -a)",
            "allow a write larger than the approval threshold",
        ),
        // RECONSTRUCTED, as shelpa_write's.
        Surface::Original => (
            "Content to write",
            "File paths within workspace",
            "Append instead of overwrite",
            RECORDED_CONFIRM,
        ),
    };
    json!({
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": content},
            "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": paths},
            "append": {"type": "boolean", "description": append},
            "confirm_oversize": {"type": "boolean", "description": confirm}
        },
        "required": ["content", "paths"]
    })
}

fn nav_input(surface: Surface) -> Value {
    let command = match surface {
        Surface::Modern => "cd DIR, pwd, or ls [-a] [-l] [PATH], on its own",
        // RECONSTRUCTED, as shelpa_pipe's `command`.
        Surface::Original => "Navigation command string",
    };
    json!({
        "type": "object",
        "properties": {"command": {"type": "string", "description": command}},
        "required": ["command"]
    })
}

/// Writes files: may replace what was there.
const WRITES: Effects = Effects {
    read_only: false,
    destructive: true,
    idempotent: false,
};

/// Navigation changes no file, but `cd` with a relative path moves on every call.
const NAVIGATES: Effects = Effects {
    read_only: true,
    destructive: false,
    idempotent: false,
};

/// The tools of `set` in `surface`'s words. `output` is the shared output schema (stdout, meta
/// with steps and tee), identical for every tool and surface.
pub fn definitions(surface: Surface, set: ShelpaTools, output: &Value) -> Vec<ToolDef> {
    set.names()
        .iter()
        .map(|name| definition(surface, name, output))
        .collect()
}

fn definition(surface: Surface, name: &str, output: &Value) -> ToolDef {
    let (title, description, input, effects) = match (name, surface) {
        (PIPE, Surface::Modern) => (
            "Run a pipeline",
            "Run a command line in the workspace: whitelisted commands (tail rg awk sed tr jq wc tee fd ls head sort) joined by `|`, or `cd DIR` / `pwd` / `ls` alone. No shell: no redirections, `;`, `&&`. Save output with `tee FILE` or `tee -a FILE`; writes over 2 KiB need confirm_oversize.",
            pipe_input(surface),
            WRITES,
        ),
        (PIPE, Surface::Original) => (
            PIPE,
            "Execute a virtual pipeline string or navigation command",
            pipe_input(surface),
            WRITES,
        ),
        (WRITE, Surface::Modern) => (
            "Write a file (through tee)",
            "Write `content` to a file in the workspace (overwrite atomically, or append with append: true), through the same checks and audit mirror as tee. Writes over 2 KiB need confirm_oversize.",
            write_input(surface),
            WRITES,
        ),
        (WRITE, Surface::Original) => (
            WRITE,
            "Execute a virtual safety tee (auto guard, save override history)",
            write_input(surface),
            WRITES,
        ),
        (TEE, Surface::Modern) => (
            "Write files through tee",
            "Write `content` to one or more files exactly as `… | tee FILE…` would (overwrite atomically, or append with append: true): the same target checks, approval gate and .shelpa/ audit mirror. Writes over 2 KiB need confirm_oversize.",
            tee_input(surface),
            WRITES,
        ),
        // RECONSTRUCTED from its role (001, line 26: file writing through tee) in the words of
        // shelpa_write's recorded description.
        (TEE, Surface::Original) => (
            TEE,
            "Execute a virtual safety tee to files (auto guard, save override history)",
            tee_input(surface),
            WRITES,
        ),
        (NAV, Surface::Modern) => (
            "Navigate",
            "Run one navigation command on its own: `cd DIR` (the directory persists between calls), `pwd`, or `ls [-a] [-l] [PATH]`. Pipelines go to shelpa_pipe.",
            nav_input(surface),
            NAVIGATES,
        ),
        // RECONSTRUCTED from its role (001, line 28: navigation) and the help's navigation line
        // (000, line 199).
        (NAV, Surface::Original) => (
            NAV,
            "Execute a navigation command (single-stage only): pwd  cd <path>  ls [path]",
            nav_input(surface),
            NAVIGATES,
        ),
        // `names()` yields only the four names above.
        (other, _) => (other, "", json!({"type": "object"}), WRITES),
    };
    ToolDef {
        name: name.to_string(),
        title: title.to_string(),
        description: description.to_string(),
        input_schema: input,
        output_schema: Some(output.clone()),
        effects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_set_and_surface_defines_each_named_tool_with_a_description() {
        for surface in [Surface::Original, Surface::Modern] {
            for set in [ShelpaTools::Pipe, ShelpaTools::Help, ShelpaTools::All] {
                let defs = definitions(surface, set, &json!({"type": "object"}));
                let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
                assert_eq!(names, set.names());
                assert!(defs.iter().all(|d| !d.description.is_empty()));
            }
        }
    }

    #[test]
    fn every_set_is_drawn_from_the_table_in_its_order() {
        let table: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        assert_eq!(ShelpaTools::All.names(), table.as_slice());
        for set in [ShelpaTools::Pipe, ShelpaTools::Help] {
            let mut rows = table.iter();
            assert!(
                set.names().iter().all(|n| rows.any(|r| r == n)),
                "{set:?} names a tool outside the table, or out of its order"
            );
        }
    }

    #[test]
    fn both_surfaces_take_the_same_arguments() {
        let props = |v: Value| {
            let mut keys: Vec<String> = v["properties"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            keys.sort();
            (keys, v["required"].clone())
        };
        for f in [pipe_input, write_input, tee_input, nav_input] {
            assert_eq!(props(f(Surface::Original)), props(f(Surface::Modern)));
        }
    }

    #[test]
    fn the_recorded_help_is_seventeen_whole_lines_without_the_separator() {
        assert_eq!(RECORDED_HELP.lines().count(), 17);
        assert!(RECORDED_HELP.ends_with("  - always use the specified tool exclusively.\n"));
        assert!(!RECORDED_HELP.contains(STATUS_SEPARATOR));
    }
}
