//! What a paint waited for (pure): the render path of first contentful paint — the requests
//! the browser marked render-blocking (Chromium's Resource Timing `renderBlockingStatus`), the
//! head's stylesheets and synchronous scripts (the early-hints rule: what Firefox, which marks
//! nothing, has) and every stylesheet (one in the body blocks what follows it) — and of
//! largest contentful paint — the LCP element's own request. Each request on a path with the
//! priority the browser gave it (its own and on the wire: the `priority` header and every
//! PRIORITY_UPDATE), when the server sent it, and what the server sent ahead of it on the same
//! connection — other responses' bytes sent after it could read the request and before the
//! response's last byte — by urgency as last signalled: ahead because the browser's signal
//! said so (more urgent) or because the server chose to (as or less urgent).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evidence::metrics::{EntryTiming, Observation, PriorityChange, ResourceMetrics};
use crate::packets::streams::{WireConnection, WireStream};
use crate::packets::WireEvidence;

/// RFC 9218's urgency when a request says none.
pub const DEFAULT_URGENCY: u8 = 3;

/// Both paints' paths (None: the run has no such paint, or nothing tells its path), and the
/// screen's: what its visual changes followed (`--visual`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RenderPaths {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fcp: Option<RenderPath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lcp: Option<RenderPath>,
    /// Visual completeness (`paint_ms`) and, in the order they ended, the responses the
    /// screen's changes followed: for each change the response that ended last at or before
    /// it (the page itself when none had: not listed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visual: Option<RenderPath>,
}

/// One paint and the requests it waited for, in the order they ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenderPath {
    /// When it painted, ms from navigation start.
    pub paint_ms: f64,
    pub requests: Vec<PathRequest>,
}

/// A request a paint waited for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathRequest {
    /// The URL path.
    pub path: String,
    pub start_ms: f64,
    pub response_start_ms: f64,
    pub end_ms: f64,
    /// The browser's own priority when it asked, and each change after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_priority: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub browser_priority_changes: Vec<PriorityChange>,
    /// The wire: the request's `priority` header and its PRIORITY_UPDATE values, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_priority: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wire_updates: Vec<String>,
    /// When the server sent its first and last body byte (ms from navigation start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_sent_ms: Option<(f64, f64)>,
    /// What the server sent on the same connection after it could read this request and
    /// before this response's last byte (None: the wire was not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<Ahead>,
}

/// Responses the server sent ahead of one, by why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ahead {
    /// More urgent by the browser's last signal: the browser's order.
    pub more_urgent: Group,
    /// As or less urgent: the server's own order.
    pub not_more_urgent: Group,
}

/// A count of responses and their bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub responses: usize,
    pub bytes: u64,
    /// Of them, those a PRIORITY_UPDATE made more urgent than their request said.
    #[serde(default)]
    pub raised: usize,
}

impl RenderPath {
    /// The request that ended last: what the paint waited for longest.
    pub fn last(&self) -> Option<&PathRequest> {
        self.requests.last()
    }
}

impl PathRequest {
    /// Its urgency as last signalled: the last PRIORITY_UPDATE's, else its header's.
    pub fn urgency(&self) -> u8 {
        self.wire_updates
            .last()
            .or(self.wire_priority.as_ref())
            .map_or(DEFAULT_URGENCY, |v| urgency(v))
    }
}

/// The urgency of an RFC 9218 priority field value (the default when absent or malformed).
pub fn urgency(field: &str) -> u8 {
    crate::config::priority::Priority::parse(field).urgency
}

/// The paths of one run; `changes_at`: when the screencast saw the screen change (ms, in
/// order; empty without `--visual`).
pub fn of(
    obs: &Observation,
    resources: &[ResourceMetrics],
    wire: Option<&WireEvidence>,
    changes_at: &[f64],
) -> RenderPaths {
    let visual = visual_path(resources, wire, changes_at);
    let Some(paint) = obs.paint.as_ref() else {
        return RenderPaths {
            visual,
            ..RenderPaths::default()
        };
    };
    let request = |r: &ResourceMetrics| path_request(r, wire);
    let fcp = paint.first_contentful_paint.and_then(|fcp| {
        let mut blocking = render_blocking_paths(&obs.resources);
        blocking.extend(
            paint
                .head_blocking
                .iter()
                .map(|u| crate::config::workload::url_path(u)),
        );
        let mut on: Vec<&ResourceMetrics> = resources
            .iter()
            .filter(|r| blocking.contains(&r.path) && r.response_end_ms <= fcp)
            .collect();
        on.sort_by(|a, b| a.response_end_ms.total_cmp(&b.response_end_ms));
        (!on.is_empty()).then(|| RenderPath {
            paint_ms: fcp,
            requests: on.into_iter().map(request).collect(),
        })
    });
    let lcp = paint.largest_contentful_paint.last().and_then(|c| {
        let path = crate::config::workload::url_path(&c.url);
        let r = resources
            .iter()
            .find(|r| !c.url.is_empty() && r.path == path)?;
        Some(RenderPath {
            paint_ms: c.start_time,
            requests: vec![request(r)],
        })
    });
    RenderPaths { fcp, lcp, visual }
}

/// What the screen's changes followed: for each change the response that ended last at or
/// before it, each once, in the order they ended; ending at the last change.
fn visual_path(
    resources: &[ResourceMetrics],
    wire: Option<&WireEvidence>,
    changes_at: &[f64],
) -> Option<RenderPath> {
    let mut followed: Vec<&ResourceMetrics> = Vec::new();
    for &at in changes_at {
        let before = resources
            .iter()
            .filter(|r| r.response_end_ms <= at)
            .max_by(|a, b| a.response_end_ms.total_cmp(&b.response_end_ms));
        if let Some(r) = before.filter(|r| !followed.iter().any(|f| std::ptr::eq(*f, *r))) {
            followed.push(r);
        }
    }
    followed.sort_by(|a, b| a.response_end_ms.total_cmp(&b.response_end_ms));
    Some(RenderPath {
        paint_ms: *changes_at.last()?,
        requests: followed
            .into_iter()
            .map(|r| path_request(r, wire))
            .collect(),
    })
    .filter(|p| !p.requests.is_empty())
}

/// Whether the engine marks which requests block rendering (Chromium's Resource Timing has
/// `renderBlockingStatus`; Firefox's has not).
pub fn marks_render_blocking(raw: &[Value]) -> bool {
    raw.iter()
        .any(|v| EntryTiming::parse(v).render_blocking_status.is_some())
}

/// The URL paths of the resources the engine marked render-blocking, and of every
/// stylesheet: one in the body blocks what follows it (Chromium marks it `non-blocking`, yet a
/// page hidden until its late stylesheet applies paints nothing before it).
fn render_blocking_paths(raw: &[Value]) -> Vec<String> {
    raw.iter()
        .map(EntryTiming::parse)
        .filter(|t| {
            t.render_blocking_status.as_deref() == Some("blocking")
                || t.content_type.starts_with("text/css")
        })
        .map(|t| t.path())
        .collect()
}

fn path_request(r: &ResourceMetrics, wire: Option<&WireEvidence>) -> PathRequest {
    let found = wire.and_then(|w| Some((w, stream_of(w, &r.path)?)));
    PathRequest {
        path: r.path.clone(),
        start_ms: r.start_ms,
        response_start_ms: r.response_start_ms,
        end_ms: r.response_end_ms,
        browser_priority: r.initial_priority.clone(),
        browser_priority_changes: r.priority_changes.clone(),
        wire_priority: found.and_then(|(_, (_, s))| s.priority.clone()),
        wire_updates: found.map_or(Vec::new(), |(_, (_, s))| {
            s.updates.iter().map(|u| u.value.clone()).collect()
        }),
        server_sent_ms: r.server_sent_ms,
        ahead: found.map(|(_, (c, s))| ahead_of(c, s)),
    }
}

/// The first stream on the wire that asked for `path`, and its connection.
fn stream_of<'w>(w: &'w WireEvidence, path: &str) -> Option<(&'w WireConnection, &'w WireStream)> {
    w.streams.connections.iter().find_map(|c| {
        c.streams
            .iter()
            .find(|s| s.path.as_deref().and_then(|p| p.split('?').next()) == Some(path))
            .map(|s| (c, s))
    })
}

/// What `c`'s server sent after it could read `s`'s request and before `s`'s last byte (a
/// round-robin server's turns count, not only what went before its first byte), by whether
/// the browser's last signal made each response more urgent than `s`.
pub fn ahead_of(c: &WireConnection, s: &WireStream) -> Ahead {
    let mut ahead = Ahead::default();
    let (Some(from), Some(to)) = (s.arrived_ms.or(s.requested_ms), s.last_byte_ms()) else {
        return ahead;
    };
    let mine = stream_urgency(s);
    for t in c.streams.iter().filter(|t| t.id != s.id) {
        let bytes = bytes_between(t, from, to);
        if bytes == 0 {
            continue;
        }
        let group = if stream_urgency(t) < mine {
            &mut ahead.more_urgent
        } else {
            &mut ahead.not_more_urgent
        };
        group.responses += 1;
        group.bytes += bytes;
        if raised(t) {
            group.raised += 1;
        }
    }
    ahead
}

/// A stream's urgency as last signalled (its last PRIORITY_UPDATE, else its header).
fn stream_urgency(s: &WireStream) -> u8 {
    s.updates
        .last()
        .map(|u| u.value.as_str())
        .or(s.priority.as_deref())
        .map_or(DEFAULT_URGENCY, urgency)
}

/// Whether a PRIORITY_UPDATE made the stream more urgent than its request said.
fn raised(s: &WireStream) -> bool {
    let asked = s.priority.as_deref().map_or(DEFAULT_URGENCY, urgency);
    s.updates.iter().any(|u| urgency(&u.value) < asked)
}

/// `t`'s body bytes sent in `[from, to)`, by its spans (a span's bytes spread evenly over it).
fn bytes_between(t: &WireStream, from: f64, to: f64) -> u64 {
    t.spans
        .iter()
        .map(|&(a, b, n)| {
            if b <= a {
                return if a >= from && a < to { n } else { 0 };
            }
            let overlap = (b.min(to) - a.max(from)).max(0.0);
            (n as f64 * overlap / (b - a)).round() as u64
        })
        .sum()
}

#[cfg(test)]
mod tests;
