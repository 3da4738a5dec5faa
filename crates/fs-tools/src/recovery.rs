//! The recovery tools: `move_file`, `delete_file`, `list_trash`, `restore_file`, `search_file`,
//! and under `--backup` `undo_file` and `redo_file`.
//!
//! This layer parses arguments, passes every path through the guard (never following a final
//! symlink: these tools act on a link itself), and turns the store's reports into one short line
//! a model can act on. Everything durable happens in [`workspace::history`].

use serde_json::{json, Map, Value};

use super::error::FsError;
use super::paging;
use super::schema::{cursor_property, PAGED};
use super::{reject_unknown, FsContext, FsOptions};
use crate::tools::{
    DELETE_FILE, LIST_TRASH, MOVE_FILE, REDO_FILE, RESTORE_FILE, SEARCH_FILE, UNDO_FILE,
};
use mcp_core::budget::CURSOR_ARG;
use mcp_core::toolset::{Args, CallContext, Effects, ToolDef, ToolOutput};
use workspace::guard::{display_relative, Resolved};
use workspace::history::{Story, StoryEvent, TrashEntry, Whereabouts};

/// The recovery tools' definitions; `undo_file`/`redo_file` only when `options.backup`.
pub fn definitions(options: &FsOptions) -> Vec<ToolDef> {
    let path_arg = |what: &str| json!({"type": "string", "description": what});
    let mut defs = vec![
        ToolDef {
            name: MOVE_FILE.into(),
            title: "Move or rename".into(),
            description: "Move or rename a file or directory (a symlink is moved itself, not its target). Fails with AlreadyExists if the destination exists. The version history moves with it and the move is logged, so search_file can find it from the old path.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "source": path_arg("What to move (relative to the workspace root)."),
                    "destination": path_arg("Where to put it; must not exist yet. Missing parent directories are created.")
                },
                "required": ["source", "destination"],
                "additionalProperties": false
            }),
            output_schema: None,
            effects: Effects { read_only: false, destructive: false, idempotent: false },
        },
        ToolDef {
            name: DELETE_FILE.into(),
            title: "Delete to trash".into(),
            description: "Delete a file, directory or symlink by moving it to the trash (nothing is ever permanently deleted). Returns the trash id; restore_file brings it back with its history.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": path_arg("What to delete (relative to the workspace root).")},
                "required": ["path"],
                "additionalProperties": false
            }),
            output_schema: None,
            effects: Effects { read_only: false, destructive: false, idempotent: false },
        },
        ToolDef {
            name: LIST_TRASH.into(),
            title: "List trash".into(),
            description: format!("List everything in the trash: id, original path, when it was deleted, file or directory, size. Use an id with restore_file. {PAGED}"),
            input_schema: json!({"type": "object", "properties": {"cursor": cursor_property()}, "additionalProperties": false}),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "entries": {"type": "array", "items": trash_entry_schema()},
                    "next_cursor": {"type": "string", "description": "Present when the answer was cut: pass it as cursor for the rest"},
                    "truncated": {"type": "boolean"},
                    "total": {"type": "integer"},
                },
                "required": ["entries"]
            })),
            effects: Effects::READ_ONLY,
        },
        ToolDef {
            name: RESTORE_FILE.into(),
            title: "Restore from trash".into(),
            description: "Put a trash entry back at its original path, or at 'destination', with its version history. Fails with AlreadyExists if the place is occupied, NotFound for an unknown or already restored id.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "id": {"type": ["integer", "string"], "description": "Trash id from list_trash or delete_file (e.g. 3 or \"00003\")."},
                    "destination": path_arg("Optional other place to restore to; must not exist yet.")
                },
                "required": ["id"],
                "additionalProperties": false
            }),
            output_schema: None,
            effects: Effects { read_only: false, destructive: false, idempotent: false },
        },
        ToolDef {
            name: SEARCH_FILE.into(),
            title: "Find where a path went".into(),
            description: "Tell the story of a path from the move and delete logs: whether it exists now, where it was moved (following every move, including moves of a containing directory), whether it was deleted (trash id, when) and restored. A path never seen is a normal answer, not an error.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": path_arg("The path to look up, old or current (relative to the workspace root).")},
                "required": ["path"],
                "additionalProperties": false
            }),
            output_schema: Some(story_schema()),
            effects: Effects::READ_ONLY,
        },
    ];
    if options.backup {
        for (name, title, description) in [
            (UNDO_FILE, "Undo file changes", "Take a file back 'steps' versions (default 1). If the file was changed outside the server since its last version, that content is saved as a new version first, so redo_file can bring it back. Going past the first version is InvalidArgument (the message says how many steps are possible)."),
            (REDO_FILE, "Redo file changes", "Take a file forward 'steps' versions (default 1) after undo_file. Going past the newest version is InvalidArgument (the message says how many steps are possible)."),
        ] {
            defs.push(ToolDef {
                name: name.into(),
                title: title.into(),
                description: description.into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": path_arg("The file (relative to the workspace root)."),
                        "steps": {"type": "integer", "minimum": 1, "default": 1, "description": "How many versions to step."}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
                output_schema: None,
                effects: Effects { read_only: false, destructive: false, idempotent: false },
            });
        }
    }
    defs
}

/// Runs `name` if it is one of the recovery tools; `None` otherwise, so the caller can try its
/// own tools.
pub fn call(
    cx: &FsContext,
    name: &str,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Option<ToolOutput> {
    let result = match name {
        MOVE_FILE => move_file(cx, args, ctx),
        DELETE_FILE => delete_file(cx, args, ctx),
        LIST_TRASH => list_trash(cx, args, ctx),
        RESTORE_FILE => restore_file(cx, args, ctx),
        SEARCH_FILE => search_file(cx, args, ctx),
        UNDO_FILE | REDO_FILE if cx.options.backup => step(cx, args, ctx, name == REDO_FILE),
        _ => return None,
    };
    Some(result.unwrap_or_else(FsError::into_output))
}

/// A path argument through the guard for a change (not following a final symlink, nothing in
/// `.git/`), and not the root itself. Callers resolve under the store lock, so no other server
/// on the root changes the store between the check and the change it allows.
fn target(cx: &FsContext, args: &Map<String, Value>, name: &str) -> Result<Resolved, FsError> {
    let raw = Args(args).str(name)?;
    let resolved = cx.guard.resolve_for_change(raw)?;
    if resolved.is_root() {
        return Err(FsError::InvalidArgument(format!(
            "'{name}' names the workspace root itself; name a file or directory inside it"
        )));
    }
    Ok(resolved)
}

fn move_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["source", "destination"])?;
    let lock = cx.lock(ctx)?;
    let from = target(cx, args, "source")?;
    let to = target(cx, args, "destination")?;
    let report = cx.store.rename(&lock, &from.relative, &to.relative)?;
    let history = if report.history_moved {
        " (its version history moved along)"
    } else {
        ""
    };
    Ok(ToolOutput::text(format!(
        "Moved {} {} to {}{history}.",
        report.kind.name(),
        from.display(),
        to.display()
    )))
}

fn delete_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path"])?;
    let lock = cx.lock(ctx)?;
    let path = target(cx, args, "path")?;
    let entry = cx.store.trash(&lock, &path.relative)?;
    Ok(ToolOutput::text(format!(
        "Moved {} {} ({} bytes) to the trash as id {}; restore_file {{\"id\": {}}} brings it back.",
        entry.kind.name(),
        path.display(),
        entry.size,
        entry.id,
        entry.id
    )))
}

fn trash_entry_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "path": {"type": "string"},
            "deletedAt": {"type": "string", "description": "RFC 3339, UTC"},
            "kind": {"type": "string", "enum": ["file", "directory", "symlink", "special file"]},
            "size": {"type": "integer", "description": "bytes (a directory: total of its files)"}
        },
        "required": ["id", "path", "deletedAt", "kind", "size"]
    })
}

fn trash_entry_json(e: &TrashEntry) -> Value {
    json!({
        "id": e.id,
        "path": display_relative(&e.path),
        "deletedAt": e.deleted_at,
        "kind": e.kind.name(),
        "size": e.size,
    })
}

fn list_trash(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &[CURSOR_ARG])?;
    paging::cursor(LIST_TRASH, args)?;
    let _lock = cx.lock_for_reading(ctx)?;
    let entries = cx.store.list_trash()?;
    let items: Vec<Value> = entries.iter().map(trash_entry_json).collect();
    if entries.is_empty() {
        let structured = json!({ "entries": items });
        if let Some(c) = paging::cursor(LIST_TRASH, args)? {
            // Nothing is left of the listing the cursor was given for.
            paging::check_anchor(c, None)?;
        }
        return Ok(ToolOutput::structured("The trash is empty.", structured));
    }
    let header = format!(
        "{} entr{} in the trash (restore_file takes the id):\n",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" }
    );
    let lines: Vec<String> = entries
        .iter()
        .map(|e| {
            format!(
                "id {}  {}  {}  {} bytes  deleted {}",
                e.id,
                display_relative(&e.path),
                e.kind.name(),
                e.size,
                e.deleted_at
            )
        })
        .collect();
    let mut text = header.clone();
    for line in &lines {
        text.push_str(line);
        text.push('\n');
    }
    let whole = ToolOutput::structured(text, json!({ "entries": items }));
    paging::Listing {
        tool: LIST_TRASH,
        args,
        header,
        lines,
        items: Some(("entries", items)),
        footer: "\n".into(),
        noun: "entries",
    }
    .answer(whole, cx.options.result_budget)
}

/// A trash id as clients send it: a number, or digits in a string (`"00003"`).
fn trash_id(args: &Map<String, Value>) -> Result<u64, FsError> {
    let bad = || {
        FsError::InvalidArgument(
            "argument 'id' must be a trash id such as 3 or \"00003\"; list_trash shows them".into(),
        )
    };
    match args.get("id") {
        None | Some(Value::Null) => Err(FsError::InvalidArgument(
            "missing required argument 'id'; list_trash shows the ids".into(),
        )),
        Some(Value::Number(_)) => Args(args).opt_u64("id")?.ok_or_else(bad),
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse().map_err(|_| bad())
        }
        Some(_) => Err(bad()),
    }
}

fn restore_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["id", "destination"])?;
    let id = trash_id(args)?;
    let lock = cx.lock(ctx)?;
    let destination = match Args(args).opt_str("destination")? {
        Some(_) => Some(target(cx, args, "destination")?),
        None => None,
    };
    let report = cx.store.restore(
        &lock,
        id,
        destination.as_ref().map(|d| d.relative.as_path()),
    )?;
    let history = if report.history_restored {
        " with its version history"
    } else {
        ""
    };
    Ok(ToolOutput::text(format!(
        "Restored trash entry {} ({}) to {}{history}.",
        report.id,
        report.kind.name(),
        display_relative(&report.path)
    )))
}

fn story_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "existsNow": {"type": "boolean"},
            "status": {"type": "string", "enum": ["exists", "moved", "in_trash", "missing", "never_seen"],
                       "description": "where the last thing that left the path is now (exists: nothing ever left it)"},
            "currentPath": {"type": "string"},
            "trashId": {"type": "integer"},
            "events": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "event": {"type": "string", "enum": ["moved", "deleted", "restored"]},
                    "time": {"type": "string"},
                    "from": {"type": "string"},
                    "to": {"type": "string"},
                    "via": {"type": "string", "description": "the path the move or delete named (the file itself or a containing directory)"},
                    "id": {"type": "integer"}
                },
                "required": ["event", "time"]
            }}
        },
        "required": ["path", "existsNow", "status", "events"]
    })
}

fn story_output(story: &Story) -> ToolOutput {
    let shown = display_relative(&story.path);
    let mut lines = Vec::new();
    let mut events = Vec::new();
    for e in &story.events {
        match e {
            StoryEvent::Moved {
                time,
                from,
                to,
                moved,
            } => {
                let via = if moved == from {
                    String::new()
                } else {
                    format!(" (its directory {} was moved)", display_relative(moved))
                };
                lines.push(format!(
                    "{time}: moved {} → {}{via}",
                    display_relative(from),
                    display_relative(to)
                ));
                events.push(json!({"event": "moved", "time": time, "from": display_relative(from), "to": display_relative(to), "via": display_relative(moved)}));
            }
            StoryEvent::Deleted { time, id, deleted } => {
                lines.push(format!(
                    "{time}: deleted {} → trash id {id}",
                    display_relative(deleted)
                ));
                events.push(json!({"event": "deleted", "time": time, "id": id, "via": display_relative(deleted)}));
            }
            StoryEvent::Restored { time, id, to } => {
                lines.push(format!(
                    "{time}: restored from trash id {id} → {}",
                    display_relative(to)
                ));
                events.push(json!({"event": "restored", "time": time, "id": id, "to": display_relative(to)}));
            }
        }
    }
    let mut structured = json!({"path": shown, "existsNow": story.exists_now, "events": events});
    let summary = match &story.now {
        Whereabouts::NeverSeen => {
            structured["status"] = json!("never_seen");
            format!("{shown} does not exist and the history logs never mention it (it was never moved or deleted through this server).")
        }
        Whereabouts::Exists(p) if story.events.is_empty() => {
            structured["status"] = json!("exists");
            structured["currentPath"] = json!(display_relative(p));
            format!("{shown} exists; it was never moved or deleted through this server.")
        }
        Whereabouts::Exists(p) => {
            structured["status"] = json!("moved");
            structured["currentPath"] = json!(display_relative(p));
            let restored = story
                .events
                .iter()
                .any(|e| matches!(e, StoryEvent::Restored { .. }));
            let how = if restored {
                " (deleted and restored on the way)"
            } else {
                ""
            };
            if *p == story.path {
                format!("What was at {shown} is back at {shown}{how}.")
            } else {
                format!(
                    "What was at {shown} is now at {}{how}.",
                    display_relative(p)
                )
            }
        }
        Whereabouts::InTrash(id) => {
            structured["status"] = json!("in_trash");
            structured["trashId"] = json!(id);
            format!("What was at {shown} is in the trash as id {id}; restore_file {{\"id\": {id}}} brings it back.")
        }
        Whereabouts::Missing(p) => {
            structured["status"] = json!("missing");
            structured["currentPath"] = json!(display_relative(p));
            format!(
                "What was at {shown} was last moved to {}, but nothing is there now (changed outside this server).",
                display_relative(p)
            )
        }
    };
    let mut text = summary;
    // The thing the story follows may have come back to the path (restored there, or moved
    // away and back): then what is there is that thing, not something else.
    let came_back = story.now == Whereabouts::Exists(story.path.clone());
    if story.exists_now && !story.events.is_empty() && !came_back {
        text.push_str(&format!(" Something else is at {shown} now."));
    }
    for l in lines {
        text.push('\n');
        text.push_str(&l);
    }
    ToolOutput::structured(text, structured)
}

fn search_file(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path"])?;
    let _lock = cx.lock_for_reading(ctx)?;
    // A question, not a change: a path inside .git/ may be asked about.
    let path = cx.guard.resolve_no_follow(Args(args).str("path")?)?;
    if path.is_root() {
        return Err(FsError::InvalidArgument(
            "'path' names the workspace root itself; name a file or directory inside it".into(),
        ));
    }
    let story = cx.store.story(&path.relative)?;
    Ok(story_output(&story))
}

fn step(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
    forward: bool,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["path", "steps"])?;
    let steps = Args(args).opt_u64("steps")?.unwrap_or(1);
    let lock = cx.lock(ctx)?;
    let path = target(cx, args, "path")?;
    let report = if forward {
        cx.store.redo(&lock, &path.relative, steps)?
    } else {
        cx.store.undo(&lock, &path.relative, steps)?
    };
    let verb = if forward { "Redid" } else { "Undid" };
    let saved = match report.saved_outside_change {
        Some(v) => {
            format!(" Its outside change was saved first as version {v}; redo_file brings it back.")
        }
        None => String::new(),
    };
    Ok(ToolOutput::text(format!(
        "{verb} {steps} step{} of {}: now at version {} of {} ({} bytes).{saved}",
        if steps == 1 { "" } else { "s" },
        path.display(),
        report.version,
        report.newest,
        report.bytes
    )))
}
