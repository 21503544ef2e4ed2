//! A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe`: JSON messages
//! separated by NUL bytes, commands written to the browser's fd 3, replies and events read from
//! its fd 4. A pipe needs no port, so it works the same inside a network namespace, and it has no
//! schema to drift from Chromium's (events stay `serde_json::Value`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

/// One CDP event as received: method, params, the session it belongs to (if any) and when it
/// was read (monotonic, for ordering with our own clock).
#[derive(Debug, Clone)]
pub struct Event {
    pub method: String,
    pub params: Value,
    pub session_id: Option<String>,
    pub received: Instant,
}

type Pending = Arc<Mutex<HashMap<u64, Sender<Result<Value>>>>>;

/// The connection to one browser process.
pub struct Cdp {
    writer: Arc<Mutex<File>>,
    pending: Pending,
    events: Mutex<Receiver<Event>>,
    next_id: AtomicU64,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

/// Why a CDP call failed: the browser said no, or the pipe is gone.
#[derive(Debug, thiserror::Error)]
pub enum CdpError {
    #[error("CDP {method} failed: {message}")]
    Command { method: String, message: String },
    #[error("CDP {method}: no answer within {timeout:?}")]
    Timeout { method: String, timeout: Duration },
    #[error("the browser closed the DevTools pipe (it exited or crashed)")]
    Closed,
}

impl Cdp {
    /// Wraps the parent's ends of the two pipes: `to_browser` (the browser reads it as fd 3) and
    /// `from_browser` (the browser writes it as fd 4). Starts the reader thread.
    pub fn new(to_browser: OwnedFd, from_browser: OwnedFd) -> Result<Cdp> {
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let (tx, rx) = mpsc::channel();
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = BufReader::with_capacity(1 << 20, File::from(from_browser));
        let p = pending.clone();
        let c = closed.clone();
        let writer = Arc::new(Mutex::new(File::from(to_browser)));
        let w = writer.clone();
        std::thread::Builder::new()
            .name("cdp-reader".into())
            .spawn(move || read_loop(reader, p, tx, c, w))
            .context("cannot start the CDP reader thread")?;
        Ok(Cdp {
            writer,
            pending,
            events: Mutex::new(rx),
            next_id: AtomicU64::new(1),
            closed,
        })
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Sends a command and waits for its result.
    pub fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CdpError> {
        if self.is_closed() {
            return Err(CdpError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s.to_string());
        }
        let (tx, rx) = mpsc::channel();
        self.pending.lock().expect("pending lock").insert(id, tx);
        let mut bytes = serde_json::to_vec(&msg).expect("a Value always serialises");
        bytes.push(0);
        {
            let mut w = self.writer.lock().expect("writer lock");
            if w.write_all(&bytes).and_then(|_| w.flush()).is_err() {
                self.pending.lock().expect("pending lock").remove(&id);
                return Err(CdpError::Closed);
            }
        }
        match rx.recv_timeout(timeout) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(CdpError::Command {
                method: method.to_string(),
                message: e.to_string(),
            }),
            Err(RecvTimeoutError::Timeout) => {
                self.pending.lock().expect("pending lock").remove(&id);
                Err(CdpError::Timeout {
                    method: method.to_string(),
                    timeout,
                })
            }
            Err(RecvTimeoutError::Disconnected) => Err(CdpError::Closed),
        }
    }

    /// All events received so far (non-blocking).
    pub fn drain_events(&self) -> Vec<Event> {
        let rx = self.events.lock().expect("events lock");
        rx.try_iter().collect()
    }

    /// Waits up to `timeout` for the next event.
    pub fn next_event(&self, timeout: Duration) -> Option<Event> {
        let rx = self.events.lock().expect("events lock");
        rx.recv_timeout(timeout).ok()
    }
}

/// Ids of the acks the reader sends itself (their answers match no pending call). Chromium
/// reads a command id as a 32-bit int and ignores a command with a larger one.
const ACK_IDS: u64 = 1 << 30;

fn read_loop(
    mut reader: BufReader<File>,
    pending: Pending,
    events: Sender<Event>,
    closed: Arc<std::sync::atomic::AtomicBool>,
    writer: Arc<Mutex<File>>,
) {
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
            let tx = pending.lock().expect("pending lock").remove(&id);
            if let Some(tx) = tx {
                let result = match msg.get("error") {
                    Some(e) => Err(anyhow!(
                        "{}",
                        e.get("message").and_then(Value::as_str).unwrap_or("error")
                    )),
                    None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                };
                let _ = tx.send(result);
            }
        } else if let Some(method) = msg.get("method").and_then(Value::as_str) {
            if method == "Page.screencastFrame" {
                // Chromium sends the next frame only after an ack: acking here, as each frame
                // arrives, keeps frames coming while the caller waits on something else.
                acks += 1;
                ack_frame(&writer, &msg, acks);
            }
            let _ = events.send(Event {
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
    closed.store(true, Ordering::SeqCst);
    // Wake every waiting caller: their senders are dropped with the map entries.
    pending.lock().expect("pending lock").clear();
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
/// (`returnByValue`, promises awaited). A thrown exception is an error with its text.
pub fn evaluate(cdp: &Cdp, session: &str, expression: &str, timeout: Duration) -> Result<Value> {
    let r = cdp.call(
        Some(session),
        "Runtime.evaluate",
        json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        timeout,
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
