//! A minimal WebDriver BiDi client: JSON commands, replies and events over the WebSocket
//! Firefox opens with `--remote-debugging-port` (no geckodriver). The socket is made by the
//! caller — inside the client namespace, where Firefox listens on its loopback — and handed
//! over; events stay `serde_json::Value` (the load keeps the network events it needs).

use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Value};
use tungstenite::protocol::{Role, WebSocket};
use tungstenite::Message;

use crate::measure::browser::rpc::Calls;
pub use crate::measure::browser::rpc::{Event, RpcError as BidiError};

/// A BiDi session's connection.
pub struct Bidi {
    writer: Mutex<WebSocket<TcpStream>>,
    calls: Arc<Calls>,
}

impl Bidi {
    /// Opens the WebSocket at `url` (`ws://127.0.0.1:PORT/session`) over `stream` and starts
    /// the reader thread.
    pub fn connect(stream: TcpStream, url: &str) -> Result<Bidi> {
        stream.set_nodelay(true).ok();
        let (socket, _) = tungstenite::client(url, stream)
            .map_err(|e| anyhow::anyhow!("WebSocket handshake with {url} failed: {e}"))?;
        // One socket, two halves: the reader thread reads, callers write. A BiDi peer sends
        // no pings, so the reading half never needs to write.
        let raw = socket
            .get_ref()
            .try_clone()
            .context("duplicating the BiDi socket")?;
        let writer = WebSocket::from_raw_socket(raw, Role::Client, None);
        let calls = Arc::new(Calls::default());
        let c = calls.clone();
        std::thread::Builder::new()
            .name("bidi-reader".into())
            .spawn(move || read_loop(socket, &c))
            .context("cannot start the BiDi reader thread")?;
        Ok(Bidi {
            writer: Mutex::new(writer),
            calls,
        })
    }

    pub fn is_closed(&self) -> bool {
        self.calls.is_closed()
    }

    /// Sends a command and waits for its result.
    pub fn call(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, BidiError> {
        self.call_until(method, params, timeout, &|| false)
    }

    /// [`Bidi::call`] that gives up when `stop` says so (a signal).
    pub fn call_until(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Value, BidiError> {
        self.calls.call(method, timeout, stop, |id| {
            let msg = json!({ "id": id, "method": method, "params": params });
            self.writer
                .lock()
                .expect("writer lock")
                .send(Message::text(msg.to_string()))
                .is_ok()
        })
    }

    /// All events received so far (non-blocking).
    pub fn drain_events(&self) -> Vec<Event> {
        self.calls.drain_events()
    }

    /// Waits up to `timeout` for the next event.
    pub fn next_event(&self, timeout: Duration) -> Option<Event> {
        self.calls.next_event(timeout)
    }
}

impl Drop for Bidi {
    fn drop(&mut self) {
        // Ends the reader thread (its read fails) whether or not the browser is still there.
        let w = self.writer.lock().expect("writer lock");
        let _ = w.get_ref().shutdown(std::net::Shutdown::Both);
    }
}

/// What one BiDi message is.
#[derive(Debug, PartialEq)]
enum Incoming {
    Reply {
        id: u64,
        result: Result<Value, String>,
    },
    Event {
        method: String,
        params: Value,
    },
    Other,
}

/// Reads one message: `{"type":"success","id",…,"result"}`, `{"type":"error","id",…,"error",
/// "message"}` or `{"type":"event","method","params"}`.
fn classify(msg: Value) -> Incoming {
    let id = msg.get("id").and_then(Value::as_u64);
    match (msg.get("type").and_then(Value::as_str), id) {
        (Some("success"), Some(id)) => Incoming::Reply {
            id,
            result: Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
        },
        (Some("error"), Some(id)) => {
            let text = |k: &str| msg.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            Incoming::Reply {
                id,
                result: Err(format!("{}: {}", text("error"), text("message"))),
            }
        }
        (Some("event"), _) => match msg.get("method").and_then(Value::as_str) {
            Some(m) => Incoming::Event {
                method: m.to_string(),
                params: msg.get("params").cloned().unwrap_or(Value::Null),
            },
            None => Incoming::Other,
        },
        _ => Incoming::Other,
    }
}

fn read_loop(mut socket: WebSocket<TcpStream>, calls: &Calls) {
    loop {
        let text = match socket.read() {
            Ok(Message::Text(t)) => t,
            Ok(Message::Binary(b)) => match String::from_utf8(b.to_vec()) {
                Ok(t) => t.into(),
                Err(_) => continue,
            },
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        let Ok(msg) = serde_json::from_str::<Value>(&text) else {
            tracing::debug!("BiDi: unparsable message of {} bytes", text.len());
            continue;
        };
        match classify(msg) {
            Incoming::Reply { id, result } => calls.resolve(id, result),
            Incoming::Event { method, params } => calls.event(Event {
                method,
                params,
                session_id: None,
                received: Instant::now(),
            }),
            Incoming::Other => {}
        }
    }
    calls.close();
}

/// Evaluates a JavaScript expression in a browsing context (promises awaited) and returns its
/// value as JSON. The expression must produce a string, a number, a boolean or null (the
/// callers `JSON.stringify` what they need). A thrown exception is an error with its text; a
/// signal ends the wait ([`BidiError::Interrupted`]).
pub fn evaluate(bidi: &Bidi, context: &str, expression: &str, timeout: Duration) -> Result<Value> {
    let r = bidi.call_until(
        "script.evaluate",
        json!({
            "expression": expression,
            "target": { "context": context },
            "awaitPromise": true,
            "resultOwnership": "none",
        }),
        timeout,
        &crate::support::signals::interrupted,
    )?;
    remote_value(&r)
}

/// The JSON value of a `script.evaluate` result (a primitive `RemoteValue`).
fn remote_value(r: &Value) -> Result<Value> {
    if r.get("type").and_then(Value::as_str) == Some("exception") {
        let text = r
            .pointer("/exceptionDetails/text")
            .and_then(Value::as_str)
            .unwrap_or("exception");
        anyhow::bail!("JavaScript error: {text}");
    }
    let result = &r["result"];
    Ok(match result.get("type").and_then(Value::as_str) {
        Some("string") | Some("boolean") => result["value"].clone(),
        Some("number") => match &result["value"] {
            // NaN, Infinity and -0 come as strings.
            Value::String(_) => Value::Null,
            v => v.clone(),
        },
        _ => Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        assert_eq!(
            classify(json!({"type": "success", "id": 3, "result": {"a": 1}})),
            Incoming::Reply {
                id: 3,
                result: Ok(json!({"a": 1}))
            }
        );
        assert_eq!(
            classify(json!({"type": "error", "id": 4, "error": "unknown error",
                             "message": "Address rejected"})),
            Incoming::Reply {
                id: 4,
                result: Err("unknown error: Address rejected".into())
            }
        );
        assert_eq!(
            classify(
                json!({"type": "event", "method": "network.responseCompleted",
                             "params": {"x": 1}})
            ),
            Incoming::Event {
                method: "network.responseCompleted".into(),
                params: json!({"x": 1})
            }
        );
        assert_eq!(classify(json!({"type": "event"})), Incoming::Other);
        assert_eq!(classify(json!({"id": 1})), Incoming::Other);
    }

    #[test]
    fn evaluation_results_become_json() {
        let ok = |v: Value| remote_value(&json!({"type": "success", "result": v})).unwrap();
        assert_eq!(ok(json!({"type": "string", "value": "{}"})), json!("{}"));
        assert_eq!(ok(json!({"type": "number", "value": 2.5})), json!(2.5));
        assert_eq!(ok(json!({"type": "number", "value": "NaN"})), Value::Null);
        assert_eq!(ok(json!({"type": "boolean", "value": true})), json!(true));
        assert_eq!(ok(json!({"type": "undefined"})), Value::Null);
        let e = remote_value(&json!({"type": "exception",
            "exceptionDetails": {"text": "ReferenceError: x is not defined"}}))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "JavaScript error: ReferenceError: x is not defined"
        );
    }

    #[test]
    fn a_reply_over_a_real_websocket_reaches_the_caller() {
        // A one-connection BiDi peer on loopback: answers the first command, sends an event.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut ws = tungstenite::accept(s).unwrap();
            let cmd: Value = match ws.read().unwrap() {
                Message::Text(t) => serde_json::from_str(&t).unwrap(),
                m => panic!("unexpected {m:?}"),
            };
            assert_eq!(cmd["method"], "session.status");
            ws.send(Message::text(
                json!({"type": "event", "method": "log.entryAdded", "params": {}}).to_string(),
            ))
            .unwrap();
            ws.send(Message::text(
                json!({"type": "success", "id": cmd["id"], "result": {"ready": false}}).to_string(),
            ))
            .unwrap();
            // Wait for the client to go away.
            let _ = ws.read();
        });
        let stream = TcpStream::connect(addr).unwrap();
        let bidi = Bidi::connect(stream, &format!("ws://{addr}/session")).unwrap();
        let r = bidi
            .call("session.status", json!({}), Duration::from_secs(10))
            .unwrap();
        assert_eq!(r, json!({"ready": false}));
        let e = bidi.next_event(Duration::from_secs(10)).unwrap();
        assert_eq!(e.method, "log.entryAdded");
        drop(bidi);
        peer.join().unwrap();
    }
}
