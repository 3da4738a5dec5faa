//! MCP roots: a server started without a root of its own takes it from its client.
//!
//! Desktop clients often start servers with `/` as the current directory and no arguments; a
//! client that declares the `roots` capability (Claude Code, VS Code, …) can name the
//! directories it works on. The rules, as the README states them:
//!
//! - `--root`, then `FILESYSTEM_ROOT`, then a usable current directory (readable, and not `/`
//!   unless `--allow-root-slash`) decide the root as always; only when all three fail does the
//!   server serve [`ClientRoots`], and an explicit root never sends `roots/list`.
//! - Once the handshake is complete (`notifications/initialized`), if the client declared
//!   `roots`, the server asks `roots/list`. Each root is a `file://` URI, percent-decoded and
//!   opened and validated like `--root` (it must exist, be a directory, not be or lie inside a
//!   `.filesystem/` or `.shelpa/` store, and `/` only with `--allow-root-slash`); other URIs are
//!   refused. The first usable root is served, on the very descriptor it was checked on: a path
//!   swapped for a link afterwards is not followed. The other usable ones are listed by
//!   `list_allowed_directories`, not served.
//! - `notifications/roots/list_changed` asks again. A new first root switches the served root
//!   (calls already running finish on the old one, and are logged in its call log); the same
//!   directory at the same place keeps the toolset as it is. An
//!   answer with no usable root (or an error) revokes the root: calls are refused, saying why,
//!   until a later answer names a usable one.
//! - Until a root is known, a tool call waits briefly while a `roots/list` is unanswered, then
//!   answers a tool error saying what is missing; it never hangs. A stateless (2026-07-28)
//!   client has no roots at all: its calls are told that `--root` is needed.
//!
//! The MCP core only carries the messages ([`mcp_core::peer`]); deciding what a root is, and
//! building the toolset for it, happens here.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use fs_tools::ListedRoots;
use mcp_core::peer::{ClientEvent, ClientReply, Peer};
use mcp_core::toolset::{CallContext, ToolDef, ToolOutput, Toolset, ToolsetFactory};
use workspace::guard::PathGuard;
use workspace::root::{self, DirId, OpenedRoot};
use workspace::Workspace;

/// How long a tool call waits for an unanswered `roots/list` before it is refused: long enough
/// for a client that answers on its own thread, short enough not to look hung.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// The most roots of one answer that are looked at (each costs an open).
const MAX_ROOTS: usize = 64;

/// Why a root URI from the client was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RootUriError {
    /// Not a `file://` URI.
    #[error("'{0}' is not a file:// URI; MCP roots name local directories as file:///path")]
    NotFile(String),
    /// A `file://` URI naming another host.
    #[error("'{0}' names the host '{1}'; only local roots (file:///path or file://localhost/path) can be served")]
    Remote(String, String),
    /// A `%` not followed by two hex digits, or a decoded NUL byte.
    #[error("'{0}' is not a valid URI: {1}")]
    Malformed(String, &'static str),
}

/// The local path a root's `file://` URI names: `file:///a%20b` is `/a b`. The host must be
/// empty or `localhost`; a query or fragment is not part of the path and is refused, as is a
/// percent-encoded NUL.
pub fn parse_file_uri(uri: &str) -> Result<PathBuf, RootUriError> {
    use std::os::unix::ffi::OsStringExt;
    let Some(rest) = uri
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("file://"))
        .map(|_| &uri[7..])
    else {
        return Err(RootUriError::NotFile(uri.to_string()));
    };
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
        return Err(RootUriError::Remote(uri.to_string(), host.to_string()));
    }
    if path.is_empty() {
        return Err(RootUriError::Malformed(uri.to_string(), "it has no path"));
    }
    if path.contains(['?', '#']) {
        return Err(RootUriError::Malformed(
            uri.to_string(),
            "a root has no query or fragment",
        ));
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) else {
                return Err(RootUriError::Malformed(
                    uri.to_string(),
                    "'%' must be followed by two hex digits",
                ));
            };
            decoded.push(byte);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    if decoded.contains(&0) {
        return Err(RootUriError::Malformed(
            uri.to_string(),
            "it contains a NUL byte",
        ));
    }
    Ok(PathBuf::from(std::ffi::OsString::from_vec(decoded)))
}

/// Where the session stands on its root.
enum Phase {
    /// No handshake completed: either it has not happened yet, or the client is stateless.
    NoHandshake,
    /// The handshake is complete, but the client did not declare `roots`.
    NoCapability,
    /// `roots/list` was sent and is unanswered.
    Asking,
    /// A root is served.
    Serving,
    /// The client's last answer named no usable root; why, for the tool error.
    Refused(String),
}

/// The root being served: its toolset, its workspace handle (for the call log), and which
/// directory it is at which place.
struct Serving {
    toolset: Arc<dyn Toolset>,
    ws: Workspace,
    id: DirId,
}

struct State {
    phase: Phase,
    serving: Option<Serving>,
    /// A `list_changed` came while a `roots/list` was unanswered: ask again once it is.
    ask_again: bool,
    /// A `roots/list` is unanswered (also while serving, on a refresh).
    asking: bool,
}

/// The toolset of a server whose root comes from its client: it lists the mode's tools from the
/// start, and builds the mode's toolset for the client's first root once it arrives.
pub struct ClientRoots {
    factory: Box<dyn ToolsetFactory<PathGuard>>,
    /// What `serverInfo.name` announces: asked for at `initialize`, before any toolset exists.
    server_name: String,
    allow_slash: bool,
    /// Why the server had no root of its own (the current directory's problem), for messages.
    why: String,
    listed: ListedRoots,
    state: Mutex<State>,
    changed: Condvar,
}

impl ClientRoots {
    /// A toolset serving `factory`'s mode on the client's roots, announced as `server_name`.
    /// `why` says why the current directory could not be the root; `listed` is the list the
    /// mode's `list_allowed_directories` shows.
    pub fn new(
        factory: Box<dyn ToolsetFactory<PathGuard>>,
        server_name: String,
        allow_slash: bool,
        why: String,
        listed: ListedRoots,
    ) -> Arc<ClientRoots> {
        Arc::new(ClientRoots {
            factory,
            server_name,
            allow_slash,
            why,
            listed,
            state: Mutex::new(State {
                phase: Phase::NoHandshake,
                serving: None,
                ask_again: false,
                asking: false,
            }),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `roots/list`, unless one is unanswered (then it is sent again after the answer).
    fn ask(self: &Arc<Self>, peer: &Peer) {
        {
            let mut state = self.lock();
            if state.asking {
                state.ask_again = true;
                return;
            }
            state.asking = true;
            if !matches!(state.phase, Phase::Serving) {
                state.phase = Phase::Asking;
            }
        }
        let me = self.clone();
        let sent = peer.request(
            "roots/list",
            None,
            Box::new(move |reply, peer| me.answered(reply, peer)),
        );
        if let Err(e) = sent {
            let mut state = self.lock();
            state.asking = false;
            if !matches!(state.phase, Phase::Serving) {
                state.phase = Phase::Refused(format!("roots/list could not be sent: {e}"));
            }
            self.changed.notify_all();
        }
    }

    /// The client's answer to `roots/list`: serve its first usable root, or revoke.
    fn answered(self: &Arc<Self>, reply: ClientReply, peer: &Peer) {
        let outcome = match reply {
            ClientReply::Result(result) => self.choose(&result),
            ClientReply::Error { code, message } => Err(format!(
                "the client answered roots/list with error {code} ({message})"
            )),
        };
        let again = {
            let mut state = self.lock();
            state.asking = false;
            match outcome {
                Ok((chosen, others)) => self.serve(&mut state, chosen, others),
                Err(why) => {
                    eprintln!("filesystem: no root served: {why}");
                    state.phase = Phase::Refused(why);
                    state.serving = None;
                    self.listed.set(Vec::new());
                }
            }
            std::mem::take(&mut state.ask_again)
        };
        self.changed.notify_all();
        if again {
            self.ask(peer);
        }
    }

    /// Serves `chosen` (building its toolset unless it is the directory served already, at the
    /// same place) and lists `others`.
    fn serve(&self, state: &mut State, chosen: OpenedRoot, others: Vec<PathBuf>) {
        self.listed.set(others);
        if let Some(serving) = &state.serving {
            if serving.id == chosen.id() && serving.ws.root() == chosen.real() {
                state.phase = Phase::Serving;
                return;
            }
        }
        let root = chosen.real().to_path_buf();
        let id = chosen.id();
        let spellings = chosen.spellings();
        let ws = chosen.into_workspace();
        let guard = PathGuard::for_workspace(ws.clone()).with_spellings(spellings);
        match self.factory.build(guard) {
            Ok(toolset) => {
                eprintln!("filesystem: serving the client's root {}", root.display());
                // What a server does for a toolset before its first call (clearing a crash's
                // leftovers, shelpa's scratch sweep), done for each root as it arrives.
                toolset.started();
                state.serving = Some(Serving {
                    toolset: Arc::from(toolset),
                    ws,
                    id,
                });
                state.phase = Phase::Serving;
            }
            Err(e) => {
                let why = format!("cannot serve the client's root '{}': {e}", root.display());
                eprintln!("filesystem: {why}");
                state.phase = Phase::Refused(why);
                state.serving = None;
            }
        }
    }

    /// The first usable root of a `roots/list` result and the other usable ones; or why there
    /// is none. Unusable roots are skipped (and reported on stderr).
    fn choose(&self, result: &Value) -> Result<(OpenedRoot, Vec<PathBuf>), String> {
        let Some(roots) = result.get("roots").and_then(Value::as_array) else {
            return Err("the client's roots/list answer has no 'roots' array".into());
        };
        if roots.is_empty() {
            return Err("the client lists no roots".into());
        }
        let mut usable: Vec<OpenedRoot> = Vec::new();
        let mut refused = Vec::new();
        for entry in roots.iter().take(MAX_ROOTS) {
            let uri = entry.get("uri").and_then(Value::as_str).unwrap_or("");
            match self.check(uri) {
                Ok(chosen) => {
                    if !usable.iter().any(|u| u.id() == chosen.id()) {
                        usable.push(chosen);
                    }
                }
                Err(why) => {
                    eprintln!("filesystem: skipping the client's root: {why}");
                    refused.push(why);
                }
            }
        }
        let mut usable = usable.into_iter();
        let Some(first) = usable.next() else {
            return Err(format!(
                "none of the client's roots can be served: {}",
                refused.join("; ")
            ));
        };
        Ok((first, usable.map(|c| c.real().to_path_buf()).collect()))
    }

    /// One root URI, parsed, opened and validated like `--root`.
    fn check(&self, uri: &str) -> Result<OpenedRoot, String> {
        let given = parse_file_uri(uri).map_err(|e| e.to_string())?;
        root::open_checked(&given, self.allow_slash).map_err(|e| match e {
            root::RootError::Slash => format!(
                "'{uri}' is '/', refused as a root unless the server runs with --allow-root-slash"
            ),
            other => format!("'{uri}': {other}"),
        })
    }

    /// The toolset to run a call on, waiting (boundedly) for an unanswered `roots/list`; or the
    /// tool error that says why there is none.
    fn current(&self, ctx: &CallContext) -> Result<(Arc<dyn Toolset>, Workspace), String> {
        let until = Instant::now() + ANSWER_WAIT;
        let mut state = self.lock();
        loop {
            if let (Phase::Serving, Some(serving)) = (&state.phase, &state.serving) {
                return Ok((serving.toolset.clone(), serving.ws.clone()));
            }
            let now = Instant::now();
            if !matches!(state.phase, Phase::Asking) || now >= until || ctx.check().is_err() {
                break;
            }
            // Short slices, so a cancelled or timed-out call is released promptly.
            let slice = (until - now).min(Duration::from_millis(100));
            state = self
                .changed
                .wait_timeout(state, slice)
                .map(|(s, _)| s)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let start = format!(
            "no workspace root: the server was started without --root or FILESYSTEM_ROOT, and the current directory cannot be the root ({})",
            self.why
        );
        let fix = "Restart the server with --root /path/to/project (or set FILESYSTEM_ROOT).";
        Err(match &state.phase {
            Phase::NoHandshake => format!(
                "{start}. MCP roots are asked for only after an initialize handshake (protocol 2024-11-05 to 2025-11-25) whose client declares the 'roots' capability; protocol 2026-07-28 deprecates roots, so there --root is needed. {fix}"
            ),
            Phase::NoCapability => format!(
                "{start}, and the client did not declare the 'roots' capability, so it cannot name one. {fix}"
            ),
            Phase::Asking => format!(
                "{start}; the client has not answered roots/list yet. Try again shortly, or: {fix}"
            ),
            Phase::Refused(why) => format!("{start}; {why}. Fix the client's roots, or: {fix}"),
            Phase::Serving => format!("{start}. {fix}"),
        })
    }
}

/// The toolset the server is given: it must be an `Arc<dyn Toolset>`, while the handlers need
/// an `Arc<ClientRoots>` of their own.
pub struct ClientRootsToolset(pub Arc<ClientRoots>);

impl Toolset for ClientRootsToolset {
    fn mode(&self) -> String {
        self.0.factory.mode()
    }
    fn instructions(&self) -> String {
        self.0.factory.instructions()
    }
    fn tools(&self) -> Vec<ToolDef> {
        self.0.factory.definitions()
    }
    fn server_name(&self) -> String {
        self.0.server_name.clone()
    }
    fn lane(&self, name: &str, args: &Map<String, Value>) -> String {
        match &self.0.lock().serving {
            Some(serving) => serving.toolset.lane(name, args),
            None => String::new(),
        }
    }
    fn call(&self, name: &str, args: &Map<String, Value>, ctx: &CallContext) -> ToolOutput {
        crate::ran_on::clear();
        match self.0.current(ctx) {
            Ok((toolset, ws)) => {
                // The call's line goes to the log of the root it ran on, whatever is served by
                // the time it is written.
                crate::ran_on::set(&ws);
                let out = toolset.call(name, args, ctx);
                workspace::park::park(workspace::park::Point::CallRan, ws.root());
                out
            }
            Err(why) => ToolOutput::error("NoRoot", why),
        }
    }
    fn client_event(&self, event: ClientEvent<'_>, peer: &Peer) {
        match event {
            ClientEvent::Initialized { capabilities, .. } => {
                if capabilities.get("roots").is_some_and(Value::is_object) {
                    self.0.ask(peer);
                } else {
                    let mut state = self.0.lock();
                    state.phase = Phase::NoCapability;
                    drop(state);
                    self.0.changed.notify_all();
                }
            }
            ClientEvent::Notification {
                method: "notifications/roots/list_changed",
                ..
            } => {
                // Only a client that declared roots can have told us about a change; one that did
                // not gets no request it would have to refuse.
                let declared = !matches!(
                    self.0.lock().phase,
                    Phase::NoHandshake | Phase::NoCapability
                );
                if declared {
                    self.0.ask(peer);
                }
            }
            ClientEvent::Notification { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_are_percent_decoded_to_local_paths() {
        assert_eq!(parse_file_uri("file:///a/b"), Ok(PathBuf::from("/a/b")));
        assert_eq!(
            parse_file_uri("file:///my%20project/%C3%A9t%c3%a9"),
            Ok(PathBuf::from("/my project/été"))
        );
        assert_eq!(
            parse_file_uri("FILE://localhost/srv"),
            Ok(PathBuf::from("/srv"))
        );
        // A non-UTF-8 name is a valid Unix path.
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(
            parse_file_uri("file:///x%FF")
                .expect("valid")
                .as_os_str()
                .as_bytes(),
            b"/x\xff"
        );
    }

    #[test]
    fn other_uris_hosts_and_bad_escapes_are_refused() {
        let refused = |u: &str| parse_file_uri(u).expect_err(u).to_string();
        assert!(refused("https://example.com/x").contains("not a file:// URI"));
        assert!(refused("/plain/path").contains("not a file:// URI"));
        assert!(refused("file://server/share").contains("names the host 'server'"));
        assert!(refused("file:///a%2").contains("two hex digits"));
        assert!(refused("file:///a%zz").contains("two hex digits"));
        assert!(refused("file:///a%00b").contains("NUL"));
        assert!(refused("file:///a?x=1").contains("query"));
        assert!(refused("file://").contains("no path"));
        assert!(refused("").contains("not a file:// URI"));
        assert!(refused("fi").contains("not a file:// URI"));
    }
}
