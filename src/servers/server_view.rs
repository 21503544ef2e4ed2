//! What a server under test tells of one run: the requests as it logged them, its transport
//! figures summed over its connections. Validation checks the browser's view against these;
//! the record keeps them.

use serde::{Deserialize, Serialize};

use crate::embedded_server::ConnectionStats;

/// One request as the server logged it (from the embedded server or an external one's log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerView {
    /// As Chromium names it: `http/1.1`, `h2`, `h3`.
    pub protocol: String,
    pub method: String,
    pub path: String,
    /// The whole URL asked, when the server says which authority was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// How a replayed request was matched (site replay only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::config::site_archive::replay::ReplayMatch>,
    pub status: u16,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Whether the request came on a resumed TLS session, where the server's log says (Caddy
    /// over TCP); None: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resumed: Option<bool>,
    /// The server's own time from the request head to the response head (None: its log does
    /// not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_ms: Option<f64>,
    /// The request's `priority` header (RFC 9218) as the server received it (None: none, or
    /// its log does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// When the request's head arrived (Unix ms; None: the server's log does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_unix_ms: Option<u64>,
    /// The h2 or h3 stream it came on (None: HTTP/1.1, or the server's log does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<u64>,
    /// The `Link` values of the `103 Early Hints` sent before its response (`--early-hints`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub early_hints: Vec<String>,
}

impl ServerView {
    /// A request as an access log tells it at the least: its protocol, method, path, status and
    /// body bytes sent; the rest unknown.
    pub fn logged(
        protocol: impl Into<String>,
        method: impl Into<String>,
        path: impl Into<String>,
        status: u16,
        bytes_sent: u64,
    ) -> ServerView {
        ServerView {
            protocol: protocol.into(),
            method: method.into(),
            path: path.into(),
            url: None,
            replay: None,
            status,
            bytes_sent,
            bytes_received: 0,
            tls_resumed: None,
            server_ms: None,
            priority: None,
            received_unix_ms: None,
            stream_id: None,
            early_hints: Vec::new(),
        }
    }
}

/// The server's transport figures for one run, summed over its connections.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransportSummary {
    pub tcp_connections: u64,
    pub tcp_retransmits: u64,
    pub quic_connections: u64,
    pub quic_lost_packets: u64,
    pub quic_congestion_events: u64,
    /// Smoothed RTT the server measured (median over connections), ms.
    pub server_rtt_ms: Option<f64>,
    /// Congestion window at the end (largest over connections), bytes.
    pub cwnd_bytes: Option<u64>,
}

/// Sums a run's connections into the CSV's transport columns.
pub fn transport_summary(conns: &[ConnectionStats]) -> TransportSummary {
    let mut t = TransportSummary::default();
    let mut rtts = Vec::new();
    for c in conns {
        if let Some(tcp) = &c.tcp {
            t.tcp_connections += 1;
            t.tcp_retransmits += tcp.total_retrans as u64;
            rtts.push(tcp.rtt_us as f64 / 1000.0);
            let cwnd = tcp.snd_cwnd as u64 * tcp.snd_mss as u64;
            t.cwnd_bytes = Some(t.cwnd_bytes.unwrap_or(0).max(cwnd));
        }
        if let Some(q) = &c.quic {
            t.quic_connections += 1;
            t.quic_lost_packets += q.lost_packets;
            t.quic_congestion_events += q.congestion_events;
            rtts.push(q.rtt_us as f64 / 1000.0);
            t.cwnd_bytes = Some(t.cwnd_bytes.unwrap_or(0).max(q.cwnd));
        }
    }
    t.server_rtt_ms = crate::support::stats::median(&rtts).ok();
    t
}
