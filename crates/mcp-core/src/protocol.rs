//! Which revision of MCP a client speaks, and the handshake that settles it.
//!
//! Two eras are served. Handshake-era clients (2024-11-05 … 2025-11-25) open a session with
//! `initialize`; the server echoes the revision they ask for when it speaks it and otherwise
//! offers its latest, and that revision holds for the whole session. Stateless clients
//! (2026-07-28) send no `initialize`: every request names its revision and its client in `_meta`,
//! and `server/discover` tells them what this server speaks.
//!
//! Revisions are an ordered enum, so "2025-06-18 or later" is a comparison of values, never of
//! strings.

use std::fmt;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::message::code;
use crate::toolset::Toolset;

/// A revision of the MCP specification, oldest first: the derived order is the order in which
/// they were released, which is what every "since revision X" rule compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    /// The first released revision.
    V2024_11_05,
    /// Adds tool annotations and JSON-RPC batches (this revision only).
    V2025_03_26,
    /// Adds titles, `structuredContent` and output schemas; drops batches.
    V2025_06_18,
    /// The last revision opened with `initialize`.
    V2025_11_25,
    /// The stateless revision: no `initialize`, a `_meta` revision in every request.
    V2026_07_28,
}

impl Revision {
    /// The revisions a client may open a session with through `initialize`, oldest first.
    pub const HANDSHAKE: [Revision; 4] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
    ];

    /// The revision offered to a handshake that asks for one this server does not speak.
    pub const LATEST_HANDSHAKE: Revision = Revision::V2025_11_25;

    /// The revision served to clients that send `_meta` instead of `initialize`.
    pub const STATELESS: Revision = Revision::V2026_07_28;

    /// Every revision this server speaks, oldest first.
    pub const ALL: [Revision; 5] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
        Revision::V2026_07_28,
    ];

    /// Reads a revision as it is spelt on the wire (`"2025-06-18"`); `None` for one this server
    /// does not speak.
    pub fn parse(wire: &str) -> Option<Revision> {
        Revision::ALL.into_iter().find(|r| r.as_str() == wire)
    }

    /// The revision as it is spelt on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    /// True for the stateless revision, whose results carry `resultType` and whose requests
    /// each carry their own revision.
    pub fn is_stateless(self) -> bool {
        self == Revision::STATELESS
    }

    /// The revision a handshake answers a client that asks for `requested`: the same one when
    /// this server speaks it through `initialize`, otherwise the latest it does (the client then
    /// decides whether it can go on). The stateless revision is never negotiated this way.
    pub fn negotiate(requested: &str) -> Revision {
        Revision::HANDSHAKE
            .into_iter()
            .find(|r| r.as_str() == requested)
            .unwrap_or(Revision::LATEST_HANDSHAKE)
    }

    /// The handshake revisions as a human reads them in an error message.
    fn handshake_list() -> String {
        let names: Vec<&str> = Revision::HANDSHAKE.iter().map(|r| r.as_str()).collect();
        names.join(", ")
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `_meta` key that carries a 2026-07-28 request's protocol version.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key that carries a 2026-07-28 client's identity.
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The `_meta` key a 2026-07-28 server stamps its identity under.
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// How long 2026-07-28 clients may cache `tools/list` and `server/discover` answers. The tool list
/// is fixed for the life of the process.
pub const CACHE_TTL_MS: u64 = 60_000;

/// Who is on the other end, as learnt from `initialize` or a 2026-07-28 request's `_meta`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientInfo {
    /// `clientInfo.name`.
    pub name: Option<String>,
    /// `clientInfo.version`.
    pub version: Option<String>,
    /// The negotiated (or per-request) protocol revision.
    pub revision: Revision,
}

impl ClientInfo {
    /// Reads an MCP `Implementation` object (`clientInfo`), tolerating its absence.
    pub fn from_json(info: Option<&Value>, revision: Revision) -> Self {
        let field = |key: &str| {
            info.and_then(|i| i.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        ClientInfo {
            name: field("name"),
            version: field("version"),
            revision,
        }
    }
}

/// Why a request's `_meta` revision cannot be served. The text is what the client reads.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MetaError {
    /// A revision string this server does not speak statelessly.
    #[error("unsupported protocol version {0:?}; this server's stateless revision is {stateless}, or open the session with initialize for {handshake}", stateless = Revision::STATELESS, handshake = Revision::handshake_list())]
    Unsupported(String),
    /// Something other than a string where the revision belongs.
    #[error("_meta[\"{META_PROTOCOL_VERSION}\"] must be a string")]
    NotAString,
}

impl MetaError {
    /// The JSON-RPC error code this refusal is sent with.
    pub fn code(&self) -> i64 {
        match self {
            MetaError::Unsupported(_) => code::UNSUPPORTED_PROTOCOL_VERSION,
            MetaError::NotAString => code::INVALID_PARAMS,
        }
    }

    /// The error's `data`: what a client needs to pick a revision it can use.
    pub fn data(&self) -> Option<Value> {
        match self {
            MetaError::Unsupported(requested) => {
                Some(json!({"supported": [Revision::STATELESS.as_str()], "requested": requested}))
            }
            MetaError::NotAString => None,
        }
    }
}

/// The client of a stateless request, read from its `_meta`; `None` when the request names no
/// revision there (a handshake-era request, which belongs to the session).
pub fn stateless_client(params: &Map<String, Value>) -> Result<Option<ClientInfo>, MetaError> {
    let meta = params.get("_meta");
    match meta.and_then(|m| m.get(META_PROTOCOL_VERSION)) {
        None => Ok(None),
        Some(Value::String(v)) if v == Revision::STATELESS.as_str() => {
            let info = meta.and_then(|m| m.get(META_CLIENT_INFO));
            Ok(Some(ClientInfo::from_json(info, Revision::STATELESS)))
        }
        Some(Value::String(v)) => Err(MetaError::Unsupported(v.clone())),
        Some(_) => Err(MetaError::NotAString),
    }
}

/// What this server can do: tools, whose list never changes.
fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}})
}

/// The server's `Implementation` object as `revision` defines it (titles arrived in 2025-06-18).
fn server_info(toolset: &dyn Toolset, revision: Revision) -> Value {
    let name = toolset.server_name();
    let mut info = json!({"name": name, "version": env!("CARGO_PKG_VERSION")});
    if revision >= Revision::V2025_06_18 {
        info["title"] = json!(format!("{name} ({})", toolset.mode()));
    }
    info
}

/// Why an `initialize` is refused. The text is what the client reads.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HandshakeError {
    /// The session has a revision already; renegotiating mid-session would change what every
    /// queued call is answered in (and switch batches on or off under the client's feet).
    #[error("the session is already initialized (protocol {0}); initialize is allowed once per session — start a new server process to negotiate again")]
    AlreadyInitialized(Revision),
    /// No revision to negotiate from.
    #[error("initialize needs params.protocolVersion (a string such as \"2025-11-25\")")]
    NoVersion,
}

impl HandshakeError {
    /// The JSON-RPC error code this refusal is sent with.
    pub fn code(&self) -> i64 {
        match self {
            HandshakeError::AlreadyInitialized(_) => code::INVALID_REQUEST,
            HandshakeError::NoVersion => code::INVALID_PARAMS,
        }
    }
}

/// Settles a handshake: given the session so far and the `initialize` params, the session's
/// client and the `InitializeResult` to answer with.
pub fn initialize(
    session: Option<&ClientInfo>,
    params: &Map<String, Value>,
    toolset: &dyn Toolset,
    instructions: &str,
) -> Result<(Arc<ClientInfo>, Value), HandshakeError> {
    if let Some(session) = session {
        return Err(HandshakeError::AlreadyInitialized(session.revision));
    }
    let Some(Value::String(requested)) = params.get("protocolVersion") else {
        return Err(HandshakeError::NoVersion);
    };
    let revision = Revision::negotiate(requested);
    let client = Arc::new(ClientInfo::from_json(params.get("clientInfo"), revision));
    let result = json!({
        "protocolVersion": revision.as_str(),
        "capabilities": capabilities(),
        "serverInfo": server_info(toolset, revision),
        "instructions": instructions,
    });
    Ok((client, result))
}

/// The `server/discover` result: what a stateless client needs before its first request.
pub fn discover(toolset: &dyn Toolset, instructions: &str) -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": [Revision::STATELESS.as_str()],
        "capabilities": capabilities(),
        "instructions": instructions,
        "ttlMs": CACHE_TTL_MS,
        "cacheScope": "public",
        "_meta": {META_SERVER_INFO: server_info(toolset, Revision::STATELESS)},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{after_initialize, initialize, session, wire};

    #[test]
    fn revisions_parse_from_their_wire_spelling_and_order_by_release() {
        for revision in Revision::ALL {
            assert_eq!(Revision::parse(revision.as_str()), Some(revision));
            assert_eq!(revision.to_string(), revision.as_str());
        }
        assert_eq!(Revision::parse("2025-06-19"), None);
        assert_eq!(Revision::parse(""), None);
        assert!(Revision::V2025_03_26 < Revision::V2025_06_18);
        assert!(Revision::V2026_07_28 >= Revision::V2025_06_18);
        let stateless: Vec<Revision> = Revision::ALL
            .into_iter()
            .filter(|r| r.is_stateless())
            .collect();
        assert_eq!(stateless, [Revision::V2026_07_28]);
    }

    #[test]
    fn negotiation_echoes_a_handshake_revision_and_offers_the_latest_otherwise() {
        for revision in Revision::HANDSHAKE {
            assert_eq!(Revision::negotiate(revision.as_str()), revision);
        }
        // The stateless revision is not opened with initialize.
        assert_eq!(Revision::negotiate("2026-07-28"), Revision::V2025_11_25);
        assert_eq!(Revision::negotiate("1999-01-01"), Revision::V2025_11_25);
    }

    #[test]
    fn initialize_answers_each_handshake_revision_in_its_own_shape() {
        // Before 2025-06-18 serverInfo has no title.
        for revision in ["2024-11-05", "2025-03-26"] {
            assert_eq!(
                session(&initialize(revision)),
                wire(&[&format!(
                    r#"{{"id":0,"jsonrpc":"2.0","result":{{"capabilities":{{"tools":{{"listChanged":false}}}},"instructions":"Tools for tests.","protocolVersion":"{revision}","serverInfo":{{"name":"filesystem","version":"{{VERSION}}"}}}}}}"#
                )]),
            );
        }
        for revision in ["2025-06-18", "2025-11-25"] {
            assert_eq!(
                session(&initialize(revision)),
                wire(&[&format!(
                    r#"{{"id":0,"jsonrpc":"2.0","result":{{"capabilities":{{"tools":{{"listChanged":false}}}},"instructions":"Tools for tests.","protocolVersion":"{revision}","serverInfo":{{"name":"filesystem","title":"filesystem (tiny)","version":"{{VERSION}}"}}}}}}"#
                )]),
            );
        }
    }

    #[test]
    fn initialize_with_an_unknown_or_the_stateless_revision_is_answered_with_the_latest() {
        for requested in ["1999-01-01", "2026-07-28", ""] {
            assert_eq!(
                session(&initialize(requested)),
                wire(&[
                    r#"{"id":0,"jsonrpc":"2.0","result":{"capabilities":{"tools":{"listChanged":false}},"instructions":"Tools for tests.","protocolVersion":"2025-11-25","serverInfo":{"name":"filesystem","title":"filesystem (tiny)","version":"{VERSION}"}}}"#
                ]),
                "requested {requested:?}"
            );
        }
    }

    #[test]
    fn initialize_is_refused_a_second_time_and_without_a_version() {
        assert_eq!(
            after_initialize("2025-06-18", &initialize("2025-11-25")),
            wire(&[
                r#"{"error":{"code":-32600,"message":"the session is already initialized (protocol 2025-06-18); initialize is allowed once per session — start a new server process to negotiate again"},"id":0,"jsonrpc":"2.0"}"#
            ]),
        );
        assert_eq!(
            session("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\n"),
            wire(&[
                r#"{"error":{"code":-32602,"message":"initialize needs params.protocolVersion (a string such as \"2025-11-25\")"},"id":1,"jsonrpc":"2.0"}"#
            ]),
        );
    }

    #[test]
    fn server_discover_names_the_stateless_revision_and_the_server() {
        assert_eq!(
            session("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}\n"),
            wire(&[
                r#"{"id":1,"jsonrpc":"2.0","result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"filesystem","title":"filesystem (tiny)","version":"{VERSION}"}},"cacheScope":"public","capabilities":{"tools":{"listChanged":false}},"instructions":"Tools for tests.","resultType":"complete","supportedVersions":["2026-07-28"],"ttlMs":60000}}"#
            ]),
        );
    }

    #[test]
    fn a_stateless_request_naming_another_revision_is_refused_with_what_is_supported() {
        let input = r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2030-01-01"}}}
{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":5}}}
"#;
        assert_eq!(
            session(input),
            wire(&[
                r#"{"error":{"code":-32022,"data":{"requested":"2030-01-01","supported":["2026-07-28"]},"message":"unsupported protocol version \"2030-01-01\"; this server's stateless revision is 2026-07-28, or open the session with initialize for 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25"},"id":1,"jsonrpc":"2.0"}"#,
                r#"{"error":{"code":-32602,"message":"_meta[\"io.modelcontextprotocol/protocolVersion\"] must be a string"},"id":2,"jsonrpc":"2.0"}"#,
            ]),
        );
    }
}
