//! Every request stream found on the wire (`WireStreams`: per connection, each stream's request,
//! priority and its updates, and the response's DATA bytes as first sent), and the drafts the
//! HTTP/2 and HTTP/3 readers build them from.

use super::super::hpack::Field;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddrV4;

/// At most this many problem lines are kept (then one that says how many more there were).
pub(super) const PROBLEMS_KEPT: usize = 20;

/// Every request stream the wire showed in one load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireStreams {
    /// HTTP/2 and HTTP/3 connections with at least one stream, by when they opened.
    pub connections: Vec<WireConnection>,
    /// HTTP/1.1 connections (decrypted, not read further).
    #[serde(default)]
    pub http1_connections: usize,
    /// What could not be read (no key, a record that did not decrypt, a cut capture...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireProtocol {
    H2,
    H3,
}

/// One connection's streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireConnection {
    pub protocol: WireProtocol,
    pub client: SocketAddrV4,
    pub server: SocketAddrV4,
    /// When its first packet entered the link.
    pub opened_ms: f64,
    /// By stream id.
    pub streams: Vec<WireStream>,
}

/// One request stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireStream {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The request's `priority` header field (RFC 9218), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Why the request's fields are unknown (a QPACK dynamic table reference, an HPACK error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_unknown: Option<String>,
    /// When the request's header block was sent and when the server could read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrived_ms: Option<f64>,
    /// PRIORITY_UPDATE frames for this stream, in the order sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updates: Vec<PriorityUpdate>,
    /// The response's status (the final one; an informational one when no other came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The response's DATA payload bytes as first sent: (ms, bytes), one entry per µs (a
    /// packet), in time order. The analyses' input; a record keeps [`WireStream::spans`].
    #[serde(skip)]
    pub sends: Vec<(f64, u64)>,
    /// The sends as the record keeps them ([`WireConnection::compact`]): (from ms, to ms,
    /// bytes), each a run of sends no other stream of the connection sent between.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<(f64, f64, u64)>,
    pub body_bytes: u64,
}

/// A PRIORITY_UPDATE frame (RFC 9218 §7): its field value, when the client sent it and when
/// the server could read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorityUpdate {
    pub sent_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrived_ms: Option<f64>,
    pub value: String,
}

impl WireStream {
    /// The last body byte's time (from the sends, or the spans of a record).
    pub fn last_byte_ms(&self) -> Option<f64> {
        (self.sends.last().map(|s| s.0)).or(self.spans.last().map(|s| s.1))
    }

    pub fn first_byte_ms(&self) -> Option<f64> {
        (self.sends.first().map(|s| s.0)).or(self.spans.first().map(|s| s.0))
    }
}

impl WireConnection {
    /// Turns every stream's sends into spans: a run of one stream's sends with no other
    /// stream's send between them is one span. Lossless for the order between streams (a
    /// 3 MB download is one span, round-robin keeps every turn), and small enough for every
    /// run's record.
    pub fn compact(&mut self) {
        let mut all: Vec<(f64, usize, u64)> = Vec::new();
        for (i, s) in self.streams.iter().enumerate() {
            all.extend(s.sends.iter().map(|&(t, n)| (t, i, n)));
        }
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut last: Option<usize> = None;
        for (t, i, n) in all {
            let spans = &mut self.streams[i].spans;
            match spans.last_mut() {
                Some(span) if last == Some(i) => {
                    span.1 = t;
                    span.2 += n;
                }
                _ => spans.push((t, t, n)),
            }
            last = Some(i);
        }
        for s in &mut self.streams {
            s.sends = Vec::new();
        }
    }
}

/// What the transports' readers found.
#[derive(Default)]
pub(super) struct Found {
    pub(super) connections: Vec<WireConnection>,
    pub(super) http1: usize,
    pub(super) problems: Vec<String>,
}

impl Found {
    pub(super) fn problem(&mut self, client: SocketAddrV4, server: SocketAddrV4, what: &str) {
        let line = format!("{client} → {server}: {what}");
        if !self.problems.contains(&line) {
            self.problems.push(line);
        }
    }
}

/// ns on the trace's clock → ms, to the µs.
pub(super) fn ms(ns: u64) -> f64 {
    (ns / 1000) as f64 / 1000.0
}

/// A stream while its connection is read (times in ns).
#[derive(Debug, Default)]
pub(super) struct Draft {
    pub(super) fields: Option<Result<Vec<Field>, String>>,
    pub(super) requested_ns: Option<u64>,
    pub(super) arrived_ns: Option<u64>,
    /// (sent, arrived, value).
    pub(super) updates: Vec<(u64, Option<u64>, String)>,
    pub(super) status: Option<u16>,
    /// (sent, bytes) as the DATA frames came.
    pub(super) sends: Vec<(u64, u64)>,
}

impl Draft {
    /// The request's header block, decoded or not; when its last byte was sent and read.
    pub(super) fn request(
        &mut self,
        fields: Result<Vec<Field>, String>,
        sent: Option<u64>,
        read: Option<u64>,
    ) {
        // Trailers come later: the first block is the request.
        if self.fields.is_none() {
            self.fields = Some(fields);
            self.requested_ns = sent;
            self.arrived_ns = read;
        }
    }

    /// A response header block: its status, unless a final one is known.
    pub(super) fn response(&mut self, fields: &[Field]) {
        let status = fields
            .iter()
            .find(|(n, _)| n == ":status")
            .and_then(|(_, v)| v.parse::<u16>().ok());
        if self.status.is_none_or(|s| s < 200) {
            self.status = status.or(self.status);
        }
    }

    pub(super) fn finish(self, id: u64) -> WireStream {
        let Draft {
            fields,
            requested_ns,
            arrived_ns,
            updates,
            status,
            mut sends,
        } = self;
        let field = |name: &str| -> Option<String> {
            let fields = fields.as_ref()?.as_ref().ok()?;
            fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        sends.sort_by_key(|s| s.0);
        // One entry per µs: a packet's frames, and packets sent within the same µs.
        let mut merged: Vec<(f64, u64)> = Vec::new();
        for (ns, n) in sends {
            match merged.last_mut() {
                Some(m) if m.0 == ms(ns) => m.1 += n,
                _ => merged.push((ms(ns), n)),
            }
        }
        WireStream {
            id,
            method: field(":method"),
            authority: field(":authority").or_else(|| field("host")),
            path: field(":path"),
            priority: field("priority"),
            fields_unknown: fields.as_ref().and_then(|f| f.as_ref().err().cloned()),
            requested_ms: requested_ns.map(ms),
            arrived_ms: arrived_ns.map(ms),
            updates: updates
                .into_iter()
                .map(|(s, a, value)| PriorityUpdate {
                    sent_ms: ms(s),
                    arrived_ms: a.map(ms),
                    value,
                })
                .collect(),
            status,
            body_bytes: merged.iter().map(|s| s.1).sum(),
            sends: merged,
            spans: Vec::new(),
        }
    }
}

/// The connection's streams, by id.
pub(super) fn finish(drafts: BTreeMap<u64, Draft>) -> Vec<WireStream> {
    drafts.into_iter().map(|(id, d)| d.finish(id)).collect()
}
