//! The server's view of every request: kept in memory (so a runner can collect exactly one run's
//! lines with a mark) and appended as JSON lines to a file, one `write` per line.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Records kept in memory; older ones are dropped (a mark older than that sees fewer lines).
const MAX_IN_MEMORY: usize = 1_000_000;

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// When the request head arrived (unix ms).
    pub time_unix_ms: u64,
    pub client: SocketAddr,
    /// `http/1.1`, `h2` or `h3`: the strings Chromium reports in `nextHopProtocol`.
    pub protocol: String,
    pub method: String,
    /// The request target as received (path and query).
    pub path: String,
    pub status: u16,
    /// Response body bytes handed to the transport (short when the client went away).
    pub bytes_sent: u64,
    /// Request body bytes read.
    pub bytes_received: u64,
    /// From the request head to the last body byte handed to the transport.
    pub duration_ms: f64,
    /// From the request head to the response head ready to go out (think time included): the
    /// server's own time to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_ms: Option<f64>,
    /// Unique per connection within one server (matches [`super::ConnectionStats`]).
    pub connection_id: u64,
    /// The QUIC stream id (h3 only; hyper does not expose h2 stream ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<u64>,
    /// 0 for the first request on its connection, 1 for the next…
    pub seq_on_connection: u64,
    /// Why the response did not complete, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The authority asked (`:authority` or `Host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
    /// It came over plain HTTP, without TLS (a replayed site's `http://` origin).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plain: bool,
    /// How a replayed request found its recorded response (replay of a site archive only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::config::site_archive::replay::ReplayMatch>,
    /// The request's `priority` header as received (RFC 9218; absent: it sent none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// The priority the scheduler served it at, when `--priorities` is not `ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<crate::config::priority::Priority>,
    /// From the request head to the first body byte handed to the transport (with
    /// `duration_ms`, the response's send window; under `--priorities` its turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_start_ms: Option<f64>,
    /// The `Link` values of the `103 Early Hints` sent before the response (`--early-hints`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub early_hints: Vec<String>,
}

struct Inner {
    records: VecDeque<RequestRecord>,
    /// Absolute index of `records[0]`.
    base: u64,
    file: Option<File>,
    file_failed: bool,
}

/// The request log of one server.
pub struct RequestLog {
    inner: Mutex<Inner>,
}

impl RequestLog {
    pub fn new(path: Option<&Path>) -> Result<RequestLog> {
        let file = match path {
            None => None,
            Some(p) => {
                if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("cannot create {}", dir.display()))?;
                }
                Some(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(p)
                        .with_context(|| format!("cannot open request log {}", p.display()))?,
                )
            }
        };
        Ok(RequestLog {
            inner: Mutex::new(Inner {
                records: VecDeque::new(),
                base: 0,
                file,
                file_failed: false,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn push(&self, rec: RequestRecord) {
        let mut g = self.lock();
        if let Some(f) = g.file.as_mut() {
            let mut line = serde_json::to_string(&rec).unwrap_or_default();
            line.push('\n');
            if let Err(e) = f.write_all(line.as_bytes()) {
                if !g.file_failed {
                    tracing::warn!("cannot write the request log: {e}");
                    g.file_failed = true;
                }
            }
        }
        g.records.push_back(rec);
        if g.records.len() > MAX_IN_MEMORY {
            g.records.pop_front();
            g.base += 1;
        }
    }

    /// A position in the log: [`since`](Self::since) returns what came after it.
    pub fn mark(&self) -> u64 {
        let g = self.lock();
        g.base + g.records.len() as u64
    }

    pub fn since(&self, mark: u64) -> Vec<RequestRecord> {
        let g = self.lock();
        let skip = mark.saturating_sub(g.base) as usize;
        g.records.iter().skip(skip).cloned().collect()
    }

    pub fn flush(&self) {
        let mut g = self.lock();
        if let Some(f) = g.file.as_mut() {
            let _ = f.sync_data();
        }
    }
}

pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Milliseconds since `t`, to the microsecond (plenty, and the log stays readable).
fn ms_since(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e6).round() / 1000.0
}

/// A request in progress: filled in as the response goes out and written to the log when
/// dropped, so that requests cut short (client gone, server stopped) are logged too.
pub(crate) struct PendingRecord {
    pub rec: RequestRecord,
    pub start: Instant,
    log: Arc<RequestLog>,
    complete: bool,
}

impl PendingRecord {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        log: Arc<RequestLog>,
        client: SocketAddr,
        protocol: &str,
        method: &str,
        path: &str,
        connection_id: u64,
        seq_on_connection: u64,
        stream_id: Option<u64>,
    ) -> PendingRecord {
        PendingRecord {
            rec: RequestRecord {
                time_unix_ms: unix_ms(SystemTime::now()),
                client,
                protocol: protocol.to_string(),
                method: method.to_string(),
                path: path.to_string(),
                status: 0,
                bytes_sent: 0,
                bytes_received: 0,
                duration_ms: 0.0,
                answer_ms: None,
                connection_id,
                stream_id,
                seq_on_connection,
                error: None,
                authority: None,
                plain: false,
                replay: None,
                priority: None,
                scheduled: None,
                body_start_ms: None,
                early_hints: Vec::new(),
            },
            start: Instant::now(),
            log,
            complete: false,
        }
    }

    /// The response's head is ready to go out: the server's time to answer ends here.
    pub fn answered(&mut self) {
        self.rec.answer_ms = Some(ms_since(self.start));
    }

    /// The first body byte is being handed to the transport.
    pub fn body_started(&mut self) {
        if self.rec.body_start_ms.is_none() {
            self.rec.body_start_ms = Some(ms_since(self.start));
        }
    }

    /// The response went out whole (unless `rec.error` says otherwise).
    pub fn set_complete(&mut self) {
        self.complete = true;
    }
}

impl Drop for PendingRecord {
    fn drop(&mut self) {
        if !self.complete && self.rec.error.is_none() {
            self.rec.error =
                Some("incomplete: the connection closed or the server stopped first".into());
        }
        self.rec.duration_ms = ms_since(self.start);
        self.log.push(self.rec.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u64) -> RequestRecord {
        let sink = Arc::new(RequestLog::new(None).unwrap());
        let mut p = PendingRecord::new(
            sink,
            "127.0.0.1:1".parse().unwrap(),
            "h2",
            "GET",
            &format!("/f{i}"),
            i,
            0,
            None,
        );
        p.rec.status = 200;
        p.set_complete();
        p.rec.clone()
    }

    #[test]
    fn marks_select_one_runs_lines_and_file_gets_every_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/requests.jsonl");
        let log = RequestLog::new(Some(&path)).unwrap();
        log.push(rec(1));
        let m = log.mark();
        assert_eq!(m, 1);
        log.push(rec(2));
        log.push(rec(3));
        let got: Vec<u64> = log.since(m).iter().map(|r| r.connection_id).collect();
        assert_eq!(got, vec![2, 3]);
        assert!(log.since(log.mark()).is_empty());
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<RequestRecord> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[2], log.since(0)[2]);
        assert!(!text.contains("stream_id"), "absent stream ids are omitted");
    }

    #[test]
    fn dropped_requests_are_logged_as_incomplete() {
        let log = Arc::new(RequestLog::new(None).unwrap());
        let mut p = PendingRecord::new(
            log.clone(),
            "127.0.0.1:1".parse().unwrap(),
            "h3",
            "GET",
            "/x",
            1,
            0,
            Some(0),
        );
        p.rec.bytes_sent = 10;
        drop(p);
        let got = log.since(0);
        assert_eq!(got.len(), 1);
        assert!(got[0].error.as_deref().unwrap().contains("incomplete"));
    }
}
