//! The floor: the least work any MCP server can do to answer a `read_text_file` call.
//!
//! One thread parses each request line with serde_json, reads the named file with no
//! validation at all, and writes a minimal `CallToolResult`. No correct server can go below this,
//! so it is the yardstick for the fixed costs (start-up, per-call overhead) of ours. It is
//! deliberately unsafe to expose to a model: it reads any path it is given.

use std::io::{self, BufRead, BufReader, BufWriter, Write};

use serde_json::{json, Value};

/// Serves stdin to stdout until EOF.
pub fn serve() -> io::Result<()> {
    let stdin = io::stdin();
    let mut input = BufReader::with_capacity(64 * 1024, stdin.lock());
    let stdout = io::stdout();
    let mut output = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return output.flush();
        }
        let Ok(request) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let Some(id) = request.get("id") else {
            continue; // a notification
        };
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let result = match method {
            "initialize" => json!({
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "floor", "version": "0"}
            }),
            "tools/list" => json!({"tools": [{
                "name": "read_text_file",
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}
            }]}),
            "tools/call" => {
                let path = request["params"]["arguments"]["path"]
                    .as_str()
                    .unwrap_or("");
                match std::fs::read_to_string(path) {
                    Ok(text) => json!({"content": [{"type": "text", "text": text}]}),
                    Err(e) => {
                        json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true})
                    }
                }
            }
            _ => json!({}),
        };
        serde_json::to_writer(
            &mut output,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )?;
        output.write_all(b"\n")?;
        // Flush only when no further request is already buffered, like any server that batches
        // its writes under pipelined load.
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
}
