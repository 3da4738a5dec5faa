//! The definitions (names, descriptions, schemas, annotations) of the file tools this module
//! implements (their names come from the table in `tools`). Argument names follow the reference filesystem server (`oldText`, `dryRun`,
//! `excludePatterns`) so agents that know it need nothing new.

use serde_json::{json, Value};

use crate::tools::{
    CREATE_DIRECTORY, CREATE_FILE, DIRECTORY_TREE, EDIT_FILE, LIST_DIRECTORY, READ_TEXT_FILE,
    WRITE_FILE,
};
use mcp_core::toolset::{Effects, ToolDef};

/// A path argument's schema: the same wording for every tool.
pub(crate) fn path_property(what: &str) -> Value {
    json!({
        "type": "string",
        "description": format!("{what}, relative to the workspace root (or absolute inside it)")
    })
}

/// The `cursor` argument of a paged tool: the same wording everywhere.
pub(crate) fn cursor_property() -> Value {
    json!({
        "type": "string",
        "description": "Continue a cut answer: the cursor its last line gave (continue with cursor=\"…\"); omit it to start from the beginning"
    })
}

/// What a paged tool's description says about a cut answer.
pub(crate) const PAGED: &str = "An answer larger than the result budget ends after a whole entry with `[… shown; continue with cursor=\"…\"]` (and `next_cursor` in the structured content of tools that declare an output schema): call again with the same arguments and that cursor for the rest.";

/// A tool's argument object: these properties, these required, nothing else.
pub(crate) fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

const WRITE_TOOL: Effects = Effects {
    read_only: false,
    destructive: true,
    idempotent: true,
};

/// The seven file tools, in the order clients should see them.
pub fn definitions() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: READ_TEXT_FILE.into(),
            title: "Read Text File".into(),
            description: "Read a UTF-8 text file. Use `head` for the first N lines or `tail` for the last N lines (not both), \
                          or `offset` (first line, 1-based) and `limit` (number of lines) for any range. An answer larger than the \
                          result budget is cut after a whole line and ends with `[lines A–B of N shown; continue with offset=B+1]`: \
                          call again with that offset for the rest. Binary files and directories are refused."
                .into(),
            input_schema: object(
                json!({
                    "path": path_property("The file to read"),
                    "head": {"type": "integer", "minimum": 0, "description": "Return only the first N lines"},
                    "tail": {"type": "integer", "minimum": 0, "description": "Return only the last N lines"},
                    "offset": {"type": "integer", "minimum": 1, "description": "The first line to return (1-based); not with head or tail"},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to return from offset (default: to the end, as far as one answer holds); not with head or tail"},
                }),
                &["path"],
            ),
            // Plain text, not structured data: a `{content}` copy would send every file twice
            // (and double the JSON escaping, the hottest cost of a read).
            output_schema: None,
            effects: Effects::READ_ONLY,
        },
        ToolDef {
            name: CREATE_FILE.into(),
            title: "Create File".into(),
            description: "Create a new file with the given content, creating missing parent directories. \
                          Fails if anything already exists at the path (use write_file or edit_file to change an existing file)."
                .into(),
            input_schema: object(
                json!({
                    "path": path_property("The file to create"),
                    "content": {"type": "string", "description": "The complete file content"},
                }),
                &["path", "content"],
            ),
            output_schema: None,
            effects: Effects {
                read_only: false,
                destructive: false,
                idempotent: false,
            },
        },
        ToolDef {
            name: WRITE_FILE.into(),
            title: "Write File".into(),
            description: "Create a file or replace its whole content, atomically (never half-written) and keeping its permissions. \
                          Prefer edit_file for changing part of a file. Never writes through a symlink or onto a directory."
                .into(),
            input_schema: object(
                json!({
                    "path": path_property("The file to write"),
                    "content": {"type": "string", "description": "The complete new file content"},
                }),
                &["path", "content"],
            ),
            output_schema: None,
            effects: WRITE_TOOL,
        },
        ToolDef {
            name: EDIT_FILE.into(),
            title: "Edit File".into(),
            description: "Replace text in a file: each edit's oldText must match exactly one place (exactly, or line by line ignoring \
                          indentation, in which case the file's indentation is kept). Edits apply in order and all-or-nothing; \
                          line endings are preserved. Returns a unified diff; dryRun previews it without writing."
                .into(),
            input_schema: object(
                json!({
                    "path": path_property("The file to edit"),
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": super::edit::MAX_EDITS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "oldText": {"type": "string", "description": "Text to find; include enough context to match one place only"},
                                "newText": {"type": "string", "description": "Text to put in its place"},
                            },
                            "required": ["oldText", "newText"],
                            "additionalProperties": false,
                        },
                    },
                    "dryRun": {"type": "boolean", "default": false, "description": "Show the diff without writing"},
                }),
                &["path", "edits"],
            ),
            output_schema: None,
            effects: Effects {
                read_only: false,
                destructive: true,
                idempotent: false,
            },
        },
        ToolDef {
            name: CREATE_DIRECTORY.into(),
            title: "Create Directory".into(),
            description: "Create a directory and any missing parents; succeeds if it already exists.".into(),
            input_schema: object(
                json!({"path": path_property("The directory to create")}),
                &["path"],
            ),
            output_schema: None,
            effects: Effects {
                read_only: false,
                destructive: false,
                idempotent: true,
            },
        },
        ToolDef {
            name: LIST_DIRECTORY.into(),
            title: "List Directory".into(),
            description: format!(
                "List a directory's entries, one per line as `[DIR] name` or `[FILE] name`, sorted by name. \
                 Build/cache directories (.git, node_modules, target, …) and the root .gitignore's matches are left out. {PAGED}"
            ),
            input_schema: object(
                json!({"path": path_property("The directory to list (\".\" for the root)"), "cursor": cursor_property()}),
                &["path"],
            ),
            output_schema: None,
            effects: Effects::READ_ONLY,
        },
        ToolDef {
            name: DIRECTORY_TREE.into(),
            title: "Directory Tree".into(),
            description: "A recursive listing as a JSON array of {name, type: \"file\"|\"directory\"|\"symlink\", children}; \
                          only directories have children. Symlinks (to files or directories) are shown as \"symlink\" and not followed. Use maxDepth to limit the size (1 = direct entries only) and \
                          excludePatterns (globs; a pattern without '/' matches names at any depth) to skip entries. \
                          Build/cache directories and the root .gitignore's matches are left out. A cut answer's next page \
                          starts with the directories that hold its first entry, marked \"continued\": true. "
                .to_string()
                + PAGED,
            input_schema: object(
                json!({
                    "path": path_property("The directory to start from (\".\" for the root)"),
                    "cursor": cursor_property(),
                    "excludePatterns": {"type": "array", "items": {"type": "string"}, "default": [], "description": "Glob patterns to leave out"},
                    "maxDepth": {"type": "integer", "minimum": 1, "description": "How many levels to descend; omitted means unlimited"},
                }),
                &["path"],
            ),
            output_schema: None,
            effects: Effects::READ_ONLY,
        },
    ]
}
