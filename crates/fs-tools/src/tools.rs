//! The filesystem mode's table of tools: every name it can serve, in the order clients see them,
//! with each tool's class.
//!
//! This is the one place a tool of this mode is named. The definitions (`schema`, `recovery`) and
//! the dispatch take their names from here, and the adoption report classifies calls through
//! [`TOOLS`], so renaming or adding a tool is one edit that every reader follows.

use mcp_core::toolset::{ToolClass, ToolEntry};

/// See [`TOOLS`].
pub const READ_TEXT_FILE: &str = "read_text_file";
/// See [`TOOLS`].
pub const CREATE_FILE: &str = "create_file";
/// See [`TOOLS`].
pub const WRITE_FILE: &str = "write_file";
/// See [`TOOLS`].
pub const EDIT_FILE: &str = "edit_file";
/// See [`TOOLS`].
pub const CREATE_DIRECTORY: &str = "create_directory";
/// See [`TOOLS`].
pub const LIST_DIRECTORY: &str = "list_directory";
/// See [`TOOLS`].
pub const DIRECTORY_TREE: &str = "directory_tree";
/// See [`TOOLS`].
pub const MOVE_FILE: &str = "move_file";
/// See [`TOOLS`].
pub const DELETE_FILE: &str = "delete_file";
/// See [`TOOLS`].
pub const LIST_TRASH: &str = "list_trash";
/// See [`TOOLS`].
pub const RESTORE_FILE: &str = "restore_file";
/// See [`TOOLS`].
pub const SEARCH_FILE: &str = "search_file";
/// See [`TOOLS`]; served only with version history (`--backup`).
pub const UNDO_FILE: &str = "undo_file";
/// See [`TOOLS`]; served only with version history (`--backup`).
pub const REDO_FILE: &str = "redo_file";

/// See [`EXTRAS`].
pub const READ_MULTIPLE_FILES: &str = "read_multiple_files";
/// See [`EXTRAS`].
pub const GET_FILE_INFO: &str = "get_file_info";
/// See [`EXTRAS`].
pub const LIST_DIRECTORY_WITH_SIZES: &str = "list_directory_with_sizes";
/// See [`EXTRAS`].
pub const FIND_FILES: &str = "find_files";
/// See [`EXTRAS`].
pub const READ_MEDIA_FILE: &str = "read_media_file";
pub const LIST_ALLOWED_DIRECTORIES: &str = "list_allowed_directories";
pub const SEARCH_CONTENT: &str = "search_content";
/// See [`EXTRAS`].
pub const COPY_FILE: &str = "copy_file";
/// See [`EXTRAS`].
pub const APPEND_FILE: &str = "append_file";
pub const LIST_OPERATIONS: &str = "list_operations";
/// See [`EXTRAS`].
pub const REVERT_OPERATION: &str = "revert_operation";

/// The tools served only with version history (`--backup`): without it there is nothing to step
/// through, so they are not offered.
pub const BACKUP_ONLY: [&str; 2] = [UNDO_FILE, REDO_FILE];

/// Every tool of this mode, in `tools/list` order under `--backup` (without it, the same order
/// less [`BACKUP_ONLY`]): the seven file tools, then the recovery tools.
///
/// Only the three tools that always change a file's content are [`ToolClass::Write`]: the report
/// counts writes by that class, and restoring, undoing or moving a file is recovery, not the
/// model choosing to write.
pub const TOOLS: [ToolEntry; 14] = [
    entry(READ_TEXT_FILE, ToolClass::Read),
    entry(CREATE_FILE, ToolClass::Write),
    entry(WRITE_FILE, ToolClass::Write),
    entry(EDIT_FILE, ToolClass::Write),
    entry(CREATE_DIRECTORY, ToolClass::Arrange),
    entry(LIST_DIRECTORY, ToolClass::Navigate),
    entry(DIRECTORY_TREE, ToolClass::Navigate),
    entry(MOVE_FILE, ToolClass::Arrange),
    entry(DELETE_FILE, ToolClass::Arrange),
    entry(LIST_TRASH, ToolClass::History),
    entry(RESTORE_FILE, ToolClass::History),
    entry(SEARCH_FILE, ToolClass::History),
    entry(UNDO_FILE, ToolClass::History),
    entry(REDO_FILE, ToolClass::History),
];

/// The opt-in tools (`--tools extended`, or picked by name with `--tools NAME,…`), after
/// [`TOOLS`] in `tools/list` order. They are a table of their own so that the default mode serves
/// exactly [`TOOLS`], which adoption studies compare; the report reads both tables.
///
/// `copy_file` and `append_file` change files (a copy and an append are versions like any
/// write), and `revert_operation` puts back what logged operations did; of the others,
/// `read_multiple_files`, `read_media_file` and `search_content` read content and the rest look
/// around.
pub const EXTRAS: [ToolEntry; 11] = [
    entry(READ_MULTIPLE_FILES, ToolClass::Read),
    entry(GET_FILE_INFO, ToolClass::Navigate),
    entry(LIST_DIRECTORY_WITH_SIZES, ToolClass::Navigate),
    entry(FIND_FILES, ToolClass::Navigate),
    entry(READ_MEDIA_FILE, ToolClass::Read),
    entry(LIST_ALLOWED_DIRECTORIES, ToolClass::Navigate),
    entry(SEARCH_CONTENT, ToolClass::Read),
    entry(COPY_FILE, ToolClass::Write),
    entry(APPEND_FILE, ToolClass::Write),
    entry(LIST_OPERATIONS, ToolClass::History),
    entry(REVERT_OPERATION, ToolClass::History),
];

/// Which tools a filesystem mode serves (`--tools`). Whatever is selected, the tools that need
/// version history are still served only with `--backup`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Selection {
    /// Exactly [`TOOLS`]: the interface adoption studies compare.
    #[default]
    Default,
    /// [`TOOLS`] and [`EXTRAS`].
    Extended,
    /// Only these names (each one of [`TOOLS`] or [`EXTRAS`]), served in table order.
    Only(Vec<&'static str>),
}

impl Selection {
    /// Reads a `--tools` value: `default`, `extended`, or a comma-separated list of tool names.
    /// An unknown name is refused with the list of valid ones, so a typo never silently serves
    /// fewer tools than intended.
    pub fn parse(value: &str) -> Result<Selection, String> {
        match value.trim() {
            "default" => return Ok(Selection::Default),
            "extended" => return Ok(Selection::Extended),
            _ => {}
        }
        let mut picked = Vec::new();
        for raw in value.split(',') {
            let name = raw.trim();
            if name.is_empty() {
                continue;
            }
            let Some(known) = every_tool().find(|t| t.name == name) else {
                let valid: Vec<&str> = every_tool().map(|t| t.name).collect();
                return Err(format!(
                    "unknown tool '{name}'; give `default`, `extended`, or a comma-separated list of: {}",
                    valid.join(", ")
                ));
            };
            if !picked.contains(&known.name) {
                picked.push(known.name);
            }
        }
        if picked.is_empty() {
            return Err(
                "no tool named; give `default`, `extended`, or a comma-separated list of tool names"
                    .into(),
            );
        }
        Ok(Selection::Only(picked))
    }

    /// True when `name` is one of the selected tools.
    pub fn serves(&self, name: &str) -> bool {
        match self {
            Selection::Default => TOOLS.iter().any(|t| t.name == name),
            Selection::Extended => every_tool().any(|t| t.name == name),
            Selection::Only(names) => names.contains(&name),
        }
    }
}

/// Every tool this mode can serve: [`TOOLS`], then [`EXTRAS`].
pub fn every_tool() -> impl Iterator<Item = &'static ToolEntry> {
    TOOLS.iter().chain(EXTRAS.iter())
}

const fn entry(name: &'static str, class: ToolClass) -> ToolEntry {
    ToolEntry { name, class }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{all_definitions, FsOptions};

    fn served(backup: bool) -> Vec<String> {
        served_with(backup, Selection::Default)
    }

    fn served_with(backup: bool, tools: Selection) -> Vec<String> {
        let options = FsOptions {
            backup,
            max_read_bytes: 1,
            result_budget: Default::default(),
            structured_paging: false,
            tools,
            listed: Default::default(),
            permissions: Default::default(),
        };
        all_definitions(&options)
            .into_iter()
            .map(|d| d.name)
            .collect()
    }

    #[test]
    fn tools_list_under_backup_is_the_table_in_order() {
        let table: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        assert_eq!(served(true), table);
    }

    #[test]
    fn without_backup_only_the_history_steppers_are_left_out() {
        let table: Vec<&str> = TOOLS
            .iter()
            .map(|t| t.name)
            .filter(|n| !BACKUP_ONLY.contains(n))
            .collect();
        assert_eq!(served(false), table);
        assert_eq!(table.len(), 12);
    }

    #[test]
    fn extended_serves_the_table_then_the_extras() {
        let all: Vec<&str> = every_tool().map(|t| t.name).collect();
        assert_eq!(served_with(true, Selection::Extended), all);
        assert_eq!(all.len(), 25);
    }

    #[test]
    fn a_pick_serves_only_the_named_tools_in_table_order() {
        let pick = Selection::parse("find_files, read_text_file,find_files").expect("valid");
        assert_eq!(pick, Selection::Only(vec![FIND_FILES, READ_TEXT_FILE]));
        assert_eq!(served_with(false, pick), [READ_TEXT_FILE, FIND_FILES]);
        // The history steppers still need --backup.
        let steppers = Selection::parse("undo_file").expect("valid");
        assert!(served_with(false, steppers.clone()).is_empty());
        assert_eq!(served_with(true, steppers), [UNDO_FILE]);
    }

    #[test]
    fn an_unknown_or_empty_pick_is_refused_with_the_valid_names() {
        let err = Selection::parse("read_text_file,search_files").expect_err("unknown");
        assert!(
            err.contains("'search_files'") && err.contains("find_files"),
            "{err}"
        );
        assert!(Selection::parse(" , ").is_err());
        assert_eq!(Selection::parse("default"), Ok(Selection::Default));
        assert_eq!(Selection::parse("extended"), Ok(Selection::Extended));
    }

    #[test]
    fn instructions_name_the_extras_only_when_served() {
        let with = |tools| {
            crate::instructions(&FsOptions {
                backup: false,
                max_read_bytes: 1,
                result_budget: Default::default(),
                structured_paging: false,
                tools,
                listed: Default::default(),
                permissions: Default::default(),
            })
        };
        assert_eq!(with(Selection::Default), crate::INSTRUCTIONS);
        let picked = with(Selection::Only(vec![READ_TEXT_FILE, FIND_FILES]));
        assert!(
            picked.ends_with("\n- Also served: find_files (paths by glob)."),
            "{picked}"
        );
        assert!(with(Selection::Extended)
            .contains("read_multiple_files (several files in one read), get_file_info"));
    }

    #[test]
    fn the_only_extra_writes_are_copy_and_append() {
        let writers: Vec<&str> = EXTRAS
            .iter()
            .filter(|t| t.class == ToolClass::Write)
            .map(|t| t.name)
            .collect();
        assert_eq!(writers, [COPY_FILE, APPEND_FILE]);
    }

    #[test]
    fn only_content_writers_are_writes() {
        let writers: Vec<&str> = TOOLS
            .iter()
            .filter(|t| t.class == ToolClass::Write)
            .map(|t| t.name)
            .collect();
        assert_eq!(writers, [CREATE_FILE, WRITE_FILE, EDIT_FILE]);
    }
}
