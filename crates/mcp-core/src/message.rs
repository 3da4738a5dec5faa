//! JSON-RPC 2.0 messages as MCP uses them: classifying what arrives, building what leaves.

use serde_json::{json, Map, Value};

/// Standard JSON-RPC and MCP error codes this server sends.
pub mod code {
    /// The bytes were not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON, but not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method (including an unknown tool or a bad cursor).
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The request names a protocol revision this server does not speak (2026-07-28).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A request id: MCP allows strings and integers, never null.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RequestId {
    /// A numeric id (kept as JSON so huge integers round-trip exactly).
    Number(String),
    /// A string id.
    Text(String),
}

impl RequestId {
    /// Reads an id, or `None` if it is not a string or an integer.
    pub fn from_json(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Some(RequestId::Text(s.clone())),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(RequestId::Number(n.to_string())),
            _ => None,
        }
    }

    /// The id as it goes back on the wire.
    pub fn to_json(&self) -> Value {
        match self {
            RequestId::Text(s) => Value::String(s.clone()),
            RequestId::Number(n) => serde_json::from_str(n).unwrap_or(Value::Null),
        }
    }
}

/// A message after classification.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A request that expects a response.
    Request {
        id: RequestId,
        method: String,
        params: Map<String, Value>,
    },
    /// A notification: no response, ever.
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A response to a request this server sent (see [`crate::peer`]): its id, and its
    /// `result` (`Ok`) or `error` (`Err`).
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    /// Not a valid JSON-RPC message; answer with this error (id is null when unreadable).
    Invalid { id: Value, message: String },
}

/// Classifies one parsed JSON value (not a batch).
pub fn classify(value: Value) -> Incoming {
    let Value::Object(mut obj) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            message: "a JSON-RPC message must be an object".into(),
        };
    };
    let raw_id = obj.remove("id");
    let has_id = raw_id.is_some();
    let id_json = raw_id.clone().unwrap_or(Value::Null);
    let reply_id = if RequestId::from_json(&id_json).is_some() {
        id_json.clone()
    } else {
        Value::Null
    };
    let Some(method) = obj.remove("method") else {
        if let Some(result) = obj.remove("result") {
            return Incoming::Response {
                id: id_json,
                outcome: Ok(result),
            };
        }
        if let Some(error) = obj.remove("error") {
            return Incoming::Response {
                id: id_json,
                outcome: Err(error),
            };
        }
        return Incoming::Invalid {
            id: reply_id,
            message: "a request needs a \"method\"".into(),
        };
    };
    let Value::String(method) = method else {
        return Incoming::Invalid {
            id: reply_id,
            message: "\"method\" must be a string".into(),
        };
    };
    if obj.get("jsonrpc") != Some(&json!("2.0")) {
        if !has_id {
            // Notifications never get a reply, not even an error.
            return Incoming::Notification {
                method,
                params: Map::new(),
            };
        }
        return Incoming::Invalid {
            id: reply_id,
            message: "\"jsonrpc\" must be \"2.0\"".into(),
        };
    }
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) if has_id => {
            return Incoming::Invalid {
                id: reply_id,
                message: "\"params\" must be an object".into(),
            }
        }
        Some(_) => Map::new(),
    };
    if !has_id {
        return Incoming::Notification { method, params };
    }
    match RequestId::from_json(&id_json) {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Invalid {
            id: Value::Null,
            message: "\"id\" must be a string or an integer (MCP forbids null ids)".into(),
        },
    }
}

/// A success response.
pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: &Value, code: i64, message: impl Into<String>, data: Option<Value>) -> Value {
    let mut err = json!({"code": code, "message": message.into()});
    if let Some(data) = data {
        err["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": err})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let r = classify(json!({"jsonrpc":"2.0","id":7,"method":"ping"}));
        assert!(matches!(r, Incoming::Request { ref method, .. } if method == "ping"));
        let n = classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        assert!(matches!(n, Incoming::Notification { .. }));
        assert_eq!(
            classify(json!({"jsonrpc":"2.0","id":1,"result":{}})),
            Incoming::Response {
                id: json!(1),
                outcome: Ok(json!({}))
            }
        );
        assert_eq!(
            classify(json!({"jsonrpc":"2.0","id":"s","error":{"code":-32601}})),
            Incoming::Response {
                id: json!("s"),
                outcome: Err(json!({"code":-32601}))
            }
        );
    }

    #[test]
    fn malformed_requests_are_invalid_with_the_best_id_available() {
        match classify(json!({"jsonrpc":"2.0","id":null,"method":"ping"})) {
            Incoming::Invalid { id, .. } => assert_eq!(id, Value::Null),
            other => panic!("{other:?}"),
        }
        match classify(json!({"jsonrpc":"2.0","id":"a","method":5})) {
            Incoming::Invalid { id, .. } => assert_eq!(id, json!("a")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(classify(json!([1])), Incoming::Invalid { .. }));
        assert!(matches!(
            classify(json!({"jsonrpc":"1.0","id":1,"method":"ping"})),
            Incoming::Invalid { .. }
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":1.5,"method":"ping"})),
            Incoming::Invalid { .. }
        ));
    }

    #[test]
    fn huge_integer_ids_round_trip_exactly() {
        let v: Value = serde_json::from_str("18446744073709551615").expect("json");
        let id = RequestId::from_json(&v).expect("id");
        assert_eq!(id.to_json().to_string(), "18446744073709551615");
    }
}
