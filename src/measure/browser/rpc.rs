//! What the two DevTools clients share (CDP over a pipe, WebDriver BiDi over a WebSocket): a
//! command gets an id, its reply is matched back to the waiting caller by that id, and
//! everything else the browser sends is an event queued for the reader of the load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One event as received: method, params, the CDP session it belongs to (BiDi has none) and
/// when it was read (monotonic, for ordering with our own clock).
#[derive(Debug, Clone)]
pub struct Event {
    pub method: String,
    pub params: Value,
    pub session_id: Option<String>,
    pub received: Instant,
}

/// Why a DevTools command failed: the browser said no, did not answer, or is gone.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("{method} failed: {message}")]
    Command { method: String, message: String },
    #[error("{method}: no answer within {timeout:?}")]
    Timeout { method: String, timeout: Duration },
    #[error("the browser closed its DevTools connection (it exited or crashed)")]
    Closed,
    /// The caller's stop condition (a signal) came first.
    #[error("{method}: interrupted")]
    Interrupted { method: String },
}

/// The commands waiting for their replies, and the queue of events.
pub struct Calls {
    pending: Mutex<HashMap<u64, Sender<Result<Value, String>>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    events_tx: Mutex<Option<Sender<Event>>>,
    events: Mutex<Receiver<Event>>,
}

impl Default for Calls {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        Calls {
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            events_tx: Mutex::new(Some(tx)),
            events: Mutex::new(rx),
        }
    }
}

/// A command sent and not answered yet.
struct Waiting {
    id: u64,
    rx: Receiver<Result<Value, String>>,
}

impl Calls {
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// A new command id with the channel its reply will come on.
    fn begin(&self) -> Result<Waiting, RpcError> {
        if self.is_closed() {
            return Err(RpcError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        self.pending.lock().expect("pending lock").insert(id, tx);
        Ok(Waiting { id, rx })
    }

    /// Sends a command with `send` (given its id; false: the connection is gone) and waits for
    /// its reply, giving up when `stop` says so.
    pub fn call(
        &self,
        method: &str,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
        send: impl FnOnce(u64) -> bool,
    ) -> Result<Value, RpcError> {
        let waiting = self.begin()?;
        if !send(waiting.id) {
            self.pending
                .lock()
                .expect("pending lock")
                .remove(&waiting.id);
            return Err(RpcError::Closed);
        }
        self.wait_until(waiting, method, timeout, stop)
    }

    #[cfg(test)]
    fn wait(&self, w: Waiting, method: &str, timeout: Duration) -> Result<Value, RpcError> {
        self.wait_until(w, method, timeout, &|| false)
    }

    /// Waits for the reply to `w`, giving up early when `stop` says so (checked every 100 ms:
    /// a load that takes a minute still ends promptly on Ctrl-C).
    fn wait_until(
        &self,
        w: Waiting,
        method: &str,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Value, RpcError> {
        let end = Instant::now() + timeout;
        loop {
            let slice = end
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100));
            match w.rx.recv_timeout(slice) {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(message)) => {
                    return Err(RpcError::Command {
                        method: method.to_string(),
                        message,
                    })
                }
                Err(RecvTimeoutError::Disconnected) => return Err(RpcError::Closed),
                Err(RecvTimeoutError::Timeout) => {}
            }
            let gave_up = if stop() {
                Some(RpcError::Interrupted {
                    method: method.to_string(),
                })
            } else if Instant::now() >= end {
                Some(RpcError::Timeout {
                    method: method.to_string(),
                    timeout,
                })
            } else {
                None
            };
            if let Some(e) = gave_up {
                self.pending.lock().expect("pending lock").remove(&w.id);
                return Err(e);
            }
        }
    }

    /// Hands a reply to the caller waiting for `id` (if it still waits).
    pub fn resolve(&self, id: u64, result: Result<Value, String>) {
        if let Some(tx) = self.pending.lock().expect("pending lock").remove(&id) {
            let _ = tx.send(result);
        }
    }

    /// Queues an event.
    pub fn event(&self, e: Event) {
        if let Some(tx) = self.events_tx.lock().expect("events lock").as_ref() {
            let _ = tx.send(e);
        }
    }

    /// The connection is gone: every waiting caller wakes with [`RpcError::Closed`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.pending.lock().expect("pending lock").clear();
    }

    /// All events received so far (non-blocking).
    pub fn drain_events(&self) -> Vec<Event> {
        self.events
            .lock()
            .expect("events lock")
            .try_iter()
            .collect()
    }

    /// Waits up to `timeout` for the next event.
    pub fn next_event(&self, timeout: Duration) -> Option<Event> {
        self.events
            .lock()
            .expect("events lock")
            .recv_timeout(timeout)
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn replies_find_their_callers_and_a_close_wakes_the_rest() {
        let calls = Arc::new(Calls::default());
        let a = calls.begin().unwrap();
        let b = calls.begin().unwrap();
        assert_ne!(a.id, b.id);
        calls.resolve(b.id, Ok(json!({"b": 1})));
        calls.resolve(a.id, Err("no such frame".into()));
        calls.resolve(999, Ok(Value::Null)); // nobody waits: ignored
        assert_eq!(
            calls.wait(b, "x.b", Duration::from_secs(1)).unwrap(),
            json!({"b": 1})
        );
        let e = calls.wait(a, "x.a", Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.to_string(), "x.a failed: no such frame");
        let c = calls.begin().unwrap();
        let e = calls.wait(c, "x.c", Duration::from_millis(10)).unwrap_err();
        assert!(matches!(e, RpcError::Timeout { .. }));
        // A stop condition ends a long wait within its 100 ms slice.
        let s = calls.begin().unwrap();
        let t = Instant::now();
        let e = calls
            .wait_until(s, "x.s", Duration::from_secs(60), &|| {
                t.elapsed() > Duration::from_millis(150)
            })
            .unwrap_err();
        assert!(matches!(e, RpcError::Interrupted { .. }), "{e}");
        assert!(t.elapsed() < Duration::from_secs(10));
        let d = calls.begin().unwrap();
        let closer = calls.clone();
        let t = std::thread::spawn(move || closer.close());
        assert!(matches!(
            calls.wait(d, "x.d", Duration::from_secs(5)),
            Err(RpcError::Closed)
        ));
        t.join().unwrap();
        assert!(matches!(calls.begin(), Err(RpcError::Closed)));
    }

    #[test]
    fn events_queue_in_order() {
        let calls = Calls::default();
        for m in ["a", "b"] {
            calls.event(Event {
                method: m.into(),
                params: Value::Null,
                session_id: None,
                received: Instant::now(),
            });
        }
        assert_eq!(
            calls.next_event(Duration::from_millis(10)).unwrap().method,
            "a"
        );
        let rest: Vec<String> = calls.drain_events().into_iter().map(|e| e.method).collect();
        assert_eq!(rest, ["b"]);
        assert!(calls.next_event(Duration::from_millis(1)).is_none());
    }
}
