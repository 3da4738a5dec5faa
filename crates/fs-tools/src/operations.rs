//! `list_operations` and `revert_operation`: the operation log for the agent itself (opt-in,
//! `--tools extended` or by name). The same view as `filesystem log` and the same revert as
//! `filesystem revert`, through the workspace layer's one implementation of each; the agent
//! cannot force a revert over a change it did not make (a person can, with `--force`).

use std::path::Path;

use mcp_core::toolset::{Args, CallContext, Effects, ToolDef, ToolOutput};
use serde_json::{json, Map, Value};
use workspace::history::oplog::file::NewestFirst;
use workspace::history::oplog::revert::{parse_since, Selection};
use workspace::history::oplog::Origin;
use workspace::history::LockWait;

use super::error::FsError;
use super::schema::object;
use super::tools::{LIST_OPERATIONS, REVERT_OPERATION};
use super::{reject_unknown, FsContext};

/// The most operations one `list_operations` page holds.
pub const MAX_LIMIT: u64 = 500;
/// A page's size when `limit` is not given.
const DEFAULT_LIMIT: u64 = 50;

/// The definitions of the two tools, in table order.
pub fn definitions() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: LIST_OPERATIONS.into(),
            title: "List Operations".into(),
            description: format!(
                "List the operation log, newest first: every change made through this server, whatever client made it \
                 (one line each: id, time, session, tool, and what changed, such as `edit src/a.rs (v3 → v4)`). Filter by \
                 session, since (RFC 3339 time or an age such as 30m, 2h) or path; at most `limit` (1 to {MAX_LIMIT}) per \
                 page, and `cursor` (the nextCursor of the page before) for the next page."
            ),
            input_schema: object(
                json!({
                    "session": {"type": "string", "description": "Only this session's operations"},
                    "since": {"type": "string", "description": "Only operations at or after this time (RFC 3339, or an age: 30m, 2h, 1d)"},
                    "path": {"type": "string", "description": "Only operations that touched this path or something inside it"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                    "cursor": {"type": "string", "description": "nextCursor from the previous page"},
                }),
                &[],
            ),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "operations": {"type": "array", "items": {"type": "object"}},
                    "nextCursor": {"type": "string"},
                },
                "required": ["operations"],
            })),
            effects: Effects::READ_ONLY,
        },
        ToolDef {
            name: REVERT_OPERATION.into(),
            title: "Revert Operation".into(),
            description: "Put back what operations changed: one `id`, every operation of a `session`, or every operation \
                          `since` a time. Newest first; content comes from the versions, deletions from the trash, moves are \
                          moved back, created files go to the trash. A path changed since by anyone else is left alone and \
                          named. The revert is itself an operation, so it can be reverted. dryRun lists what would happen."
                .into(),
            input_schema: object(
                json!({
                    "id": {"type": "integer", "minimum": 1, "description": "The operation to revert (list_operations shows ids)"},
                    "session": {"type": "string", "description": "Revert every operation of this session"},
                    "since": {"type": "string", "description": "Revert every operation at or after this time (RFC 3339, or an age: 30m, 2h)"},
                    "dryRun": {"type": "boolean", "description": "Only say what would be done"},
                }),
                &[],
            ),
            output_schema: None,
            effects: Effects {
                read_only: false,
                destructive: false,
                idempotent: false,
            },
        },
    ]
}

/// `list_operations`.
pub fn list_operations(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["session", "since", "path", "limit", "cursor"])?;
    let a = Args(args);
    let session = a.opt_str("session")?;
    let since = a
        .opt_str("since")?
        .map(parse_since)
        .transpose()
        .map_err(FsError::InvalidArgument)?;
    let path = match a.opt_str("path")? {
        Some(p) => Some(cx.guard.resolve(p)?.relative),
        None => None,
    };
    let limit = a.opt_u64("limit")?.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(FsError::InvalidArgument(format!(
            "limit must be from 1 to {MAX_LIMIT}; ask for the next page with cursor"
        )));
    }
    let below = match a.opt_str("cursor")? {
        Some(c) => Some(c.parse::<u64>().map_err(|_| {
            FsError::InvalidArgument(format!(
                "cursor {c:?} is not one this tool gave; pass the nextCursor of the previous page, or leave it out for the first"
            ))
        })?),
        None => None,
    };
    // Read under the lock, so no entry is half-written while it is read.
    let _lock = cx.lock_for_reading(ctx)?;
    let mut entries = NewestFirst::new(
        cx.store.workspace(),
        Path::new(workspace::guard::STATE_DIRS[0]),
    );
    let (mut lines, mut ops) = (Vec::new(), Vec::new());
    let mut next = None;
    while let Some(op) = entries
        .next_entry()
        .map_err(|e| FsError::IoError(format!("cannot read the operation log: {e}")))?
    {
        FsError::check(ctx, || "list_operations".to_string())?;
        if below.is_some_and(|b| op.id >= b) {
            continue;
        }
        if since.as_deref().is_some_and(|t| op.time.as_str() < t) {
            break;
        }
        if session.is_some_and(|s| s != op.session.id)
            || path.as_deref().is_some_and(|p| !op.touches(p))
        {
            continue;
        }
        if ops.len() as u64 == limit {
            next = ops.last().map(|o: &Value| o["id"].to_string());
            break;
        }
        lines.push(format!(
            "{} {} s:{} {} {}",
            op.id,
            op.time,
            op.session.id,
            op.tool,
            op.summary()
        ));
        ops.push(serde_json::to_value(&op).map_err(|e| FsError::IoError(e.to_string()))?);
    }
    let mut text = if lines.is_empty() {
        "No operations match.".to_string()
    } else {
        lines.join("\n")
    };
    let mut structured = json!({ "operations": ops });
    if let Some(n) = next {
        text.push_str(&format!("\n(more: call again with cursor \"{n}\")"));
        structured["nextCursor"] = json!(n);
    }
    Ok(ToolOutput::structured(text, structured))
}

/// `revert_operation`.
pub fn revert_operation(
    cx: &FsContext,
    args: &Map<String, Value>,
    ctx: &CallContext,
) -> Result<ToolOutput, FsError> {
    reject_unknown(args, &["id", "session", "since", "dryRun"])?;
    let a = Args(args);
    let chosen = [
        a.opt_u64("id")?.map(|id| Selection::Ids(vec![id])),
        a.opt_str("session")?
            .map(|s| Selection::Session(s.to_string())),
        a.opt_str("since")?
            .map(|t| parse_since(t).map(Selection::Since))
            .transpose()
            .map_err(FsError::InvalidArgument)?,
    ];
    let mut chosen = chosen.into_iter().flatten();
    let (Some(selection), None) = (chosen.next(), chosen.next()) else {
        return Err(FsError::InvalidArgument(
            "give exactly one of id, session or since; list_operations shows them".into(),
        ));
    };
    let dry_run = a.opt_bool("dryRun")?.unwrap_or(false);
    if !dry_run {
        FsError::check(ctx, || "revert_operation".to_string())?;
    }
    let gave_up = || ctx.cancel.is_cancelled();
    let origin = Origin {
        client: ctx.client.as_ref().and_then(|c| c.name.clone()),
        version: ctx.client.as_ref().and_then(|c| c.version.clone()),
        mode: "filesystem".into(),
        tool: ctx.tool.clone(),
    };
    let out = cx.store.revert_chosen(
        &LockWait::new(ctx.deadline, &gave_up),
        &origin,
        &selection,
        dry_run,
        false,
    )?;
    let mut lines = Vec::new();
    if out.reverted.is_empty() {
        lines.push("No operation matched; nothing was reverted.".to_string());
    } else {
        let verb = if dry_run { "Would revert" } else { "Reverted" };
        let entry = out
            .entry
            .map(|e| format!(" as operation {e} (revert_operation {{\"id\": {e}}} takes it back)"))
            .unwrap_or_default();
        lines.push(format!(
            "{verb} {} operation(s){entry}.",
            out.reverted.len()
        ));
    }
    lines.extend(out.done.iter().map(|s| format!("- {}", s.what)));
    lines.extend(out.refused.iter().map(|s| {
        format!("- left alone {}: {}", s.path.display(), s.what.replace(
            "Revert with --force to save what is there (as a version, or to the trash) and put it back anyway",
            "ask the user whether to run `filesystem revert --force` for it",
        ))
    }));
    lines.extend(
        out.cannot
            .iter()
            .map(|s| format!("- cannot put back {}: {}", s.path.display(), s.what)),
    );
    if out.already > 0 {
        lines.push(format!("- {} path(s) were already as before", out.already));
    }
    Ok(ToolOutput::text(lines.join("\n")))
}
