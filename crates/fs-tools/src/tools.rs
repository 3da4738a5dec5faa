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

const fn entry(name: &'static str, class: ToolClass) -> ToolEntry {
    ToolEntry { name, class }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{all_definitions, FsOptions};

    fn served(backup: bool) -> Vec<String> {
        let options = FsOptions {
            backup,
            max_read_bytes: 1,
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
    fn only_content_writers_are_writes() {
        let writers: Vec<&str> = TOOLS
            .iter()
            .filter(|t| t.class == ToolClass::Write)
            .map(|t| t.name)
            .collect();
        assert_eq!(writers, [CREATE_FILE, WRITE_FILE, EDIT_FILE]);
    }
}
