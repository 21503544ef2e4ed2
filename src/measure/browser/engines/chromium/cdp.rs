//! A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe`: JSON messages
//! separated by NUL bytes, commands written to the browser's fd 3, replies and events read from
//! its fd 4. A pipe needs no port, so it works the same inside a network namespace, and it has no
//! schema to drift from Chromium's (events stay `serde_json::Value`).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::measure::browser::rpc::Calls;
pub use crate::measure::browser::rpc::{Event, RpcError as CdpError};

/// The connection to one browser process.
pub struct Cdp {
    writer: Arc<Mutex<File>>,
    calls: Arc<Calls>,
}

impl Cdp {
    /// Wraps the parent's ends of the two pipes: `to_browser` (the browser reads it as fd 3) and
    /// `from_browser` (the browser writes it as fd 4). Starts the reader thread.
    pub fn new(to_browser: OwnedFd, from_browser: OwnedFd) -> Result<Cdp> {
        let calls = Arc::new(Calls::default());
        let reader = BufReader::with_capacity(1 << 20, File::from(from_browser));
        let writer = Arc::new(Mutex::new(File::from(to_browser)));
        let (c, w) = (calls.clone(), writer.clone());
        std::thread::Builder::new()
            .name("cdp-reader".into())
            .spawn(move || read_loop(reader, &c, &w))
            .context("cannot start the CDP reader thread")?;
        Ok(Cdp { writer, calls })
    }

    pub fn is_closed(&self) -> bool {
        self.calls.is_closed()
    }

    /// Sends a command and waits for its result.
    pub fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CdpError> {
        self.call_until(session, method, params, timeout, &|| false)
    }

    /// [`Cdp::call`] that gives up when `stop` says so (a signal).
    pub fn call_until(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Value, CdpError> {
        self.calls.call(method, timeout, stop, |id| {
            let mut msg = json!({ "id": id, "method": method, "params": params });
            if let Some(s) = session {
                msg["sessionId"] = Value::String(s.to_string());
            }
            let mut bytes = serde_json::to_vec(&msg).expect("a Value always serialises");
            bytes.push(0);
            let mut w = self.writer.lock().expect("writer lock");
            w.write_all(&bytes).and_then(|_| w.flush()).is_ok()
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

/// Ids of the acks the reader sends itself (their answers match no pending call). Chromium
/// reads a command id as a 32-bit int and ignores a command with a larger one.
const ACK_IDS: u64 = 1 << 30;

fn read_loop(mut reader: BufReader<File>, calls: &Calls, writer: &Mutex<File>) {
    let mut acks = ACK_IDS;
    let mut buf = Vec::with_capacity(1 << 16);
    loop {
        buf.clear();
        match reader.read_until(0, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if buf.last() == Some(&0) {
            buf.pop();
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&buf) else {
            tracing::debug!("CDP: unparsable message of {} bytes", buf.len());
            continue;
        };
        if let Some(id) = msg.get("id").and_then(Value::as_u64) {
            if id > ACK_IDS {
                if let Some(e) = msg.get("error") {
                    tracing::warn!("screencast frame ack {id} refused: {e}");
                }
                continue;
            }
            calls.resolve(
                id,
                match msg.get("error") {
                    Some(e) => Err(e
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("error")
                        .to_string()),
                    None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                },
            );
        } else if let Some(method) = msg.get("method").and_then(Value::as_str) {
            if method == "Page.screencastFrame" {
                // Chromium sends the next frame only after an ack: acking here, as each frame
                // arrives, keeps frames coming while the caller waits on something else.
                acks += 1;
                ack_frame(writer, &msg, acks);
            }
            calls.event(Event {
                method: method.to_string(),
                params: msg.get("params").cloned().unwrap_or(Value::Null),
                session_id: msg
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                received: Instant::now(),
            });
        }
    }
    calls.close();
}

fn ack_frame(writer: &Mutex<File>, frame: &Value, id: u64) {
    let mut ack = json!({
        "id": id,
        "method": "Page.screencastFrameAck",
        "params": { "sessionId": frame.pointer("/params/sessionId").cloned().unwrap_or(Value::Null) },
    });
    if let Some(s) = frame.get("sessionId") {
        ack["sessionId"] = s.clone();
    }
    let mut bytes = serde_json::to_vec(&ack).expect("a Value always serialises");
    bytes.push(0);
    let mut w = writer.lock().expect("writer lock");
    let _ = w.write_all(&bytes).and_then(|_| w.flush());
}

/// Evaluates a JavaScript expression in a page session and returns its JSON value
/// (`returnByValue`, promises awaited). A thrown exception is an error with its text; a signal
/// ends the wait ([`CdpError::Interrupted`]).
pub fn evaluate(cdp: &Cdp, session: &str, expression: &str, timeout: Duration) -> Result<Value> {
    let r = cdp.call_until(
        Some(session),
        "Runtime.evaluate",
        json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        timeout,
        &crate::support::signals::interrupted,
    )?;
    if let Some(ex) = r.get("exceptionDetails") {
        let text = ex
            .pointer("/exception/description")
            .or_else(|| ex.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("exception");
        bail!("JavaScript error: {text}");
    }
    Ok(r.pointer("/result/value").cloned().unwrap_or(Value::Null))
}
