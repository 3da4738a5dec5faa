//! A script: what the model does, step by step, and the replay that finds the next step.
//!
//! The answer to a request is worked out from the request alone. The conversation's tool calls
//! (discovery calls such as `ToolSearch` left aside) are matched against the script's steps in
//! order; the first step the conversation has not taken yet is the answer. A `page` step takes as
//! many calls as the results keep ending with a continuation note.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::continuation::Continuation;
use crate::conversation::{Call, Conversation};

/// The most pages one `page` step follows unless it says otherwise.
pub const DEFAULT_MAX_PAGES: usize = 1000;

/// Tools through which a harness loads the schemas of deferred tools: calls to them are the
/// harness's discovery, not steps of the script.
/// Claude Code's `ToolSearch` takes `select:<name>`; Codex's `tool_search` a free-text query.
pub const DISCOVERY_TOOLS: &[&str] = &["ToolSearch", "tool_search"];

/// A tool the script calls, named the way the script's author thinks of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolRef {
    /// A tool of an MCP server, by the server's configured name and the tool's own name:
    /// Claude Code calls it `mcp__<server>__<tool>`, Codex CLI `<tool>` in the namespace
    /// `mcp__<server>`, Gemini CLI `mcp_<server>_<tool>`.
    Mcp {
        /// The server's name in the harness's configuration.
        server: String,
        /// The tool's name as the server lists it.
        tool: String,
    },
    /// One of the harness's own tools (`Read`, `Bash`, `exec_command`, …), by its name.
    Builtin {
        /// The name the harness offers it by.
        builtin: String,
    },
}

impl ToolRef {
    /// The tool of `server` called `tool`.
    pub fn mcp(server: &str, tool: &str) -> ToolRef {
        ToolRef::Mcp {
            server: server.into(),
            tool: tool.into(),
        }
    }

    /// True when a call of `name` in `namespace` is a call of this tool, in either harness's
    /// naming.
    pub fn matches(&self, name: &str, namespace: Option<&str>) -> bool {
        match self {
            ToolRef::Mcp { server, tool } => {
                let prefix = format!("mcp__{server}");
                match namespace {
                    Some(ns) => ns == prefix && name == tool,
                    None => {
                        name == format!("{prefix}__{tool}") || name == gemini_name(server, tool)
                    }
                }
            }
            ToolRef::Builtin { builtin } => namespace.is_none() && name == builtin,
        }
    }

    /// The tool's name and namespace as this conversation offers it: inside a namespace if the
    /// harness offered one holding it, Gemini CLI's `mcp_<server>_<tool>` if offered, else the
    /// flat `mcp__<server>__<tool>` name.
    pub fn resolve(&self, conversation: &Conversation) -> (String, Option<String>) {
        match self {
            ToolRef::Mcp { server, tool } => {
                let ns = format!("mcp__{server}");
                let gemini = gemini_name(server, tool);
                if conversation.offers(tool, Some(&ns)) {
                    (tool.clone(), Some(ns))
                } else if conversation.offers(&gemini, None) {
                    (gemini, None)
                } else {
                    (format!("{ns}__{tool}"), None)
                }
            }
            ToolRef::Builtin { builtin } => (builtin.clone(), None),
        }
    }
}

/// The name Gemini CLI offers an MCP server's tool by (one underscore each side of the server's
/// name, where Claude Code has two).
fn gemini_name(server: &str, tool: &str) -> String {
    format!("mcp_{server}_{tool}")
}

/// One step of a script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Call the tool once with these arguments.
    Call {
        /// The tool.
        tool: ToolRef,
        /// Its arguments: an object for a function tool, a string for a freeform tool (Codex's
        /// `apply_patch`), which takes plain text.
        args: Value,
    },
    /// Call the tool, then re-call it with the offset or cursor each result's note names until
    /// a result ends without one (or `max_pages` calls were made, which ends the script).
    Page {
        /// The tool.
        tool: ToolRef,
        /// The first call's arguments.
        args: Value,
        /// The most calls this step makes.
        #[serde(default = "default_max_pages")]
        max_pages: usize,
    },
    /// Answer with this text and no tool call: the turn ends.
    Finish {
        /// The final answer.
        text: String,
    },
}

fn default_max_pages() -> usize {
    DEFAULT_MAX_PAGES
}

/// A named list of steps, chosen for a conversation whose user text contains `when` (or for
/// any conversation, without it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// A name for the records.
    pub name: String,
    /// Text the user's messages must contain for this script to play (e.g. a task's marker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// What the model answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// One tool call.
    Call {
        /// The name to call.
        name: String,
        /// The namespace to call it in (Codex's namespace tools), if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        /// The arguments.
        input: Value,
    },
    /// A final text.
    Text {
        /// The text.
        text: String,
    },
}

/// The answer to a request, and why the replay could not follow the script, if it could not.
#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    /// What to answer.
    pub action: Action,
    /// Set when the conversation left the script (the answer then ends the turn with a text
    /// that says so).
    pub diverged: Option<String>,
}

impl Next {
    fn act(action: Action) -> Next {
        Next {
            action,
            diverged: None,
        }
    }

    fn diverge(why: String) -> Next {
        Next {
            action: Action::Text {
                text: format!("scripted model: the conversation left the script: {why}"),
            },
            diverged: Some(why),
        }
    }
}

/// The next answer for this conversation under `script`.
pub fn next_action(script: &Script, conversation: &Conversation) -> Next {
    let calls: Vec<&Call> = conversation
        .calls
        .iter()
        .filter(|c| c.namespace.is_some() || !DISCOVERY_TOOLS.contains(&c.name.as_str()))
        .collect();
    let mut taken = 0;
    for (index, step) in script.steps.iter().enumerate() {
        match step {
            Step::Call { tool, args } => {
                let Some(call) = calls.get(taken) else {
                    return Next::act(call_action(tool, args.clone(), conversation));
                };
                if let Err(why) = expect(tool, call, index) {
                    return Next::diverge(why);
                }
                taken += 1;
            }
            Step::Page {
                tool,
                args,
                max_pages,
            } => {
                let mut next_args = args.clone();
                let mut pages = 0;
                loop {
                    let Some(call) = calls.get(taken) else {
                        return Next::act(call_action(tool, next_args, conversation));
                    };
                    if let Err(why) = expect(tool, call, index) {
                        return Next::diverge(why);
                    }
                    taken += 1;
                    pages += 1;
                    let Some(result) = &call.result else {
                        return Next::diverge(format!("call {} has no result", call.id));
                    };
                    let Some(more) = Continuation::find(&result.text()) else {
                        break;
                    };
                    if pages >= *max_pages {
                        return Next::diverge(format!(
                            "step {index} made {pages} calls and the last result still \
                             says to continue ({more:?})"
                        ));
                    }
                    next_args = more.apply(&call.input);
                }
            }
            Step::Finish { text } => return Next::act(Action::Text { text: text.clone() }),
        }
    }
    if let Some(extra) = calls.get(taken) {
        return Next::diverge(format!("a call past the script's end: {}", extra.name));
    }
    Next::act(Action::Text {
        text: "scripted model: the script is done".into(),
    })
}

/// Checks that the conversation's call is the one step `index` made.
fn expect(tool: &ToolRef, call: &Call, index: usize) -> Result<(), String> {
    if tool.matches(&call.name, call.namespace.as_deref()) {
        Ok(())
    } else {
        Err(format!(
            "step {index} calls {tool:?}, the conversation has {}{}",
            call.namespace
                .as_deref()
                .map(|ns| format!("{ns}/"))
                .unwrap_or_default(),
            call.name
        ))
    }
}

/// The call of `tool` with `args`, or, where the harness deferred the tool behind a discovery
/// tool it offers, the discovery call that loads its schema first (once: if the tool is still
/// not offered after that, it is called anyway and the harness's answer is what the model sees).
fn call_action(tool: &ToolRef, args: Value, conversation: &Conversation) -> Action {
    let (name, namespace) = tool.resolve(conversation);
    if !conversation.offers(&name, namespace.as_deref()) {
        for discovery in DISCOVERY_TOOLS {
            let query = match tool {
                _ if *discovery == "ToolSearch" => format!("select:{name}"),
                ToolRef::Mcp { server, tool } => format!("{server} {tool}"),
                ToolRef::Builtin { builtin } => builtin.clone(),
            };
            let asked = conversation.calls.iter().any(|c| {
                c.name == *discovery && c.input.get("query").and_then(Value::as_str) == Some(&query)
            });
            if conversation.offers(discovery, None) && !asked {
                return Action::Call {
                    name: (*discovery).to_string(),
                    namespace: None,
                    input: serde_json::json!({ "query": query }),
                };
            }
        }
    }
    Action::Call {
        name,
        namespace,
        input: args,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{CallResult, Offered};
    use serde_json::json;

    fn offered(names: &[&str]) -> Vec<Offered> {
        names
            .iter()
            .map(|n| Offered {
                name: n.to_string(),
                namespace: None,
            })
            .collect()
    }

    fn call(id: &str, name: &str, input: Value, text: &str) -> Call {
        Call {
            id: id.into(),
            name: name.into(),
            namespace: None,
            input,
            result: Some(CallResult {
                parts: vec![text.into()],
                is_error: false,
            }),
        }
    }

    fn paging_script() -> Script {
        Script {
            name: "t".into(),
            when: None,
            steps: vec![
                Step::Page {
                    tool: ToolRef::mcp("fs", "read_text_file"),
                    args: json!({"path": "big"}),
                    max_pages: 3,
                },
                Step::Finish { text: "ok".into() },
            ],
        }
    }

    #[test]
    fn a_deferred_tool_is_loaded_through_tool_search_once_then_called() {
        let script = paging_script();
        let mut conv = Conversation {
            offered: offered(&["Read", "ToolSearch"]),
            ..Conversation::default()
        };
        let first = next_action(&script, &conv).action;
        assert_eq!(
            first,
            Action::Call {
                name: "ToolSearch".into(),
                namespace: None,
                input: json!({"query": "select:mcp__fs__read_text_file"})
            }
        );
        conv.calls.push(call(
            "t1",
            "ToolSearch",
            json!({"query": "select:mcp__fs__read_text_file"}),
            "loaded",
        ));
        let second = next_action(&script, &conv).action;
        assert!(
            matches!(&second, Action::Call { name, input, .. }
                if name == "mcp__fs__read_text_file" && input == &json!({"path": "big"})),
            "{second:?}"
        );
    }

    #[test]
    fn paging_follows_each_note_and_stops_where_none_remains() {
        let script = paging_script();
        let mut conv = Conversation {
            offered: offered(&["mcp__fs__read_text_file"]),
            ..Conversation::default()
        };
        conv.calls.push(call(
            "a",
            "mcp__fs__read_text_file",
            json!({"path": "big"}),
            "1\n[lines 1–1 of 3 shown; continue with offset=2]",
        ));
        let next = next_action(&script, &conv);
        assert_eq!(
            next.action,
            Action::Call {
                name: "mcp__fs__read_text_file".into(),
                namespace: None,
                input: json!({"path": "big", "offset": 2})
            }
        );
        conv.calls.push(call(
            "b",
            "mcp__fs__read_text_file",
            json!({"path": "big", "offset": 2}),
            "2\n3\n",
        ));
        assert_eq!(
            next_action(&script, &conv).action,
            Action::Text { text: "ok".into() }
        );
    }

    #[test]
    fn a_page_step_past_its_limit_and_a_foreign_call_are_divergences() {
        let script = paging_script();
        let mut conv = Conversation::default();
        for (i, offset) in [2, 3, 4].iter().enumerate() {
            conv.calls.push(call(
                &format!("c{i}"),
                "mcp__fs__read_text_file",
                json!({"path": "big"}),
                &format!("[continue with offset={offset}]"),
            ));
        }
        assert!(next_action(&script, &conv).diverged.is_some());

        let mut conv = Conversation::default();
        conv.calls.push(call("x", "Read", json!({}), "text"));
        let next = next_action(&script, &conv);
        assert!(next.diverged.unwrap().contains("Read"));
    }

    #[test]
    fn a_namespace_tool_is_called_inside_its_namespace() {
        let script = paging_script();
        let conv = Conversation {
            offered: vec![Offered {
                name: "read_text_file".into(),
                namespace: Some("mcp__fs".into()),
            }],
            ..Conversation::default()
        };
        assert_eq!(
            next_action(&script, &conv).action,
            Action::Call {
                name: "read_text_file".into(),
                namespace: Some("mcp__fs".into()),
                input: json!({"path": "big"})
            }
        );
        assert!(ToolRef::mcp("fs", "read_text_file").matches("read_text_file", Some("mcp__fs")));
        assert!(!ToolRef::mcp("fs", "read_text_file").matches("read_text_file", None));
    }

    #[test]
    fn a_tool_gemini_offers_is_called_by_its_gemini_name() {
        let script = paging_script();
        let conv = Conversation {
            offered: offered(&["read_file", "mcp_fs_read_text_file"]),
            ..Conversation::default()
        };
        assert_eq!(
            next_action(&script, &conv).action,
            Action::Call {
                name: "mcp_fs_read_text_file".into(),
                namespace: None,
                input: json!({"path": "big"})
            }
        );
        let tool = ToolRef::mcp("fs", "read_text_file");
        assert!(tool.matches("mcp_fs_read_text_file", None));
        assert!(!tool.matches("mcp_fs_read_text_file", Some("mcp__fs")));
        assert!(!tool.matches("mcp_fs_list_directory", None));
    }
}
