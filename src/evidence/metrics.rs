//! Metric derivation (pure): what the browser reported for one load (Navigation and Resource
//! Timing entries, the engine's own network view, the page's own result) in, the numbers out: per load
//! loadEventEnd (or the download's completion), per resource queueing = requestStart −
//! startTime (on a new connection it includes set-up, which is reported apart), TTFB and
//! download; on-wire = resources whose [requestStart, responseEnd] holds the load window's
//! midpoint (the [startTime, responseEnd] variant saturates and hides the effect). No IO, no
//! clock; tested with recorded fixtures.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::workload::WorkloadKind;

/// One event of an engine's DevTools protocol as the engine sent it (method and params): kept
/// in the record for a person reading it, and for the engine's adapter to make its HAR from.
/// No analysis reads it: the adapter types what pagebench needs into a [`NetworkView`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevtoolsEvent {
    pub method: String,
    pub params: Value,
}

/// The engine's own view of the load's requests, the second viewpoint beside Resource Timing:
/// typed by the engine's adapter from its DevTools protocol's events (Chromium's CDP,
/// Firefox's WebDriver BiDi).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkView {
    /// What the engine's protocol is called (`CDP`, `BiDi`): how reasons and reports name this
    /// viewpoint.
    pub protocol: String,
    /// Every request, in the order the engine first told of it.
    pub requests: Vec<NetworkRequest>,
    /// The events it was read from, as the engine sent them.
    pub events: Vec<DevtoolsEvent>,
}

impl NetworkView {
    /// The view an engine's `events` make, typed by its adapter's `requests` (the events kept
    /// as sent); `protocol` names the engine's DevTools protocol.
    pub fn typed(
        protocol: &str,
        events: Vec<DevtoolsEvent>,
        requests: fn(&[DevtoolsEvent]) -> Vec<NetworkRequest>,
    ) -> NetworkView {
        NetworkView {
            protocol: protocol.into(),
            requests: requests(&events),
            events,
        }
    }

    /// No engine told of anything (the browser never loaded).
    pub fn is_empty(&self) -> bool {
        self.protocol.is_empty() && self.requests.is_empty() && self.events.is_empty()
    }

    /// How this viewpoint is named in reasons and reports: its protocol's name.
    pub fn name(&self) -> &str {
        if self.protocol.is_empty() {
            "the browser's network view"
        } else {
            &self.protocol
        }
    }
}

/// What the browser reported for one load; the raw material of every metric.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// `performance.timeOrigin` (Unix ms): navigation start.
    pub time_origin: Option<f64>,
    /// The PerformanceNavigationTiming entry, as JSON.
    pub navigation: Option<Value>,
    /// Every PerformanceResourceTiming entry, as JSON.
    pub resources: Vec<Value>,
    /// `window.__pagebench` of the download/upload pages.
    pub page_result: Option<Value>,
    /// The engine's own view of every request of the load.
    #[serde(default, skip_serializing_if = "NetworkView::is_empty")]
    pub network: NetworkView,
    /// A repeat view's first navigation (None: a first visit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_view: Option<FirstView>,
    /// What the page painted: the buffered Paint, LCP, Layout Instability and Element Timing
    /// entries, read after the load.
    #[serde(default)]
    pub paint: Option<PaintEntries>,
    /// Each `Network.dataReceived`, compacted: when each chunk of each response arrived.
    #[serde(default)]
    pub chunks: Vec<DataChunk>,
    /// Response bodies by the network view's request id, when the run kept them (`run --har`);
    /// never written into the run record.
    #[serde(skip)]
    pub bodies: std::collections::BTreeMap<String, ResponseBody>,
    /// The frames of the load's screen (`--visual`: the video or the screencast), in arrival
    /// order; the record keeps what the frames showed (`record::VisualEvidence`), the store
    /// their images.
    #[serde(skip)]
    pub frames: Vec<ScreencastFrame>,
    /// Why the screen was not recorded although asked (the video recorder failed).
    #[serde(skip)]
    pub frames_error: Option<String>,
}

/// What a repeat view's first navigation (made during the launch, not measured) showed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FirstView {
    pub load_event_end_ms: Option<f64>,
    pub resources: usize,
    /// `nextHopProtocol` → entries (the page and its resources) that used it.
    pub protocols: BTreeMap<String, usize>,
    /// The HTTP cache was kept for the measured navigation (else cleared).
    pub cache_kept: bool,
}

impl FirstView {
    /// What a first navigation's observation shows (pure).
    pub fn of(obs: &Observation, cache_kept: bool) -> FirstView {
        let nav = obs.navigation.as_ref().map(EntryTiming::parse);
        let mut protocols = BTreeMap::new();
        for e in nav
            .iter()
            .cloned()
            .chain(obs.resources.iter().map(EntryTiming::parse))
        {
            *protocols.entry(e.next_hop_protocol).or_insert(0) += 1;
        }
        FirstView {
            load_event_end_ms: nav.map(|n| n.load_event_end).filter(|t| *t > 0.0),
            resources: obs.resources.len(),
            protocols,
            cache_kept,
        }
    }
}

/// One screencast frame: a JPEG and when the browser showed it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScreencastFrame {
    /// Unix time, seconds (the frame's `metadata.timestamp`).
    pub timestamp: f64,
    pub jpeg: Vec<u8>,
}

/// The page's paint entries as the browser buffered them (ms from navigation start).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PaintEntries {
    /// The entry types the engine has (`PerformanceObserver.supportedEntryTypes`); None in
    /// records from before it was read (Chromium's: all of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported: Option<Vec<String>>,
    pub first_paint: Option<f64>,
    pub first_contentful_paint: Option<f64>,
    /// Every LCP candidate in the order the browser reported them (the last one is the LCP).
    pub largest_contentful_paint: Vec<LcpCandidate>,
    pub layout_shifts: Vec<LayoutShift>,
    /// Element Timing entries (elements with an `elementtiming` attribute).
    pub elements: Vec<ElementPaint>,
}

impl PaintEntries {
    /// Whether the engine reports entries of `entry_type` (Firefox has no `layout-shift` and
    /// no `element`: their metrics are then unknown, not zero).
    pub fn supports(&self, entry_type: &str) -> bool {
        self.supported
            .as_ref()
            .is_none_or(|s| s.iter().any(|t| t == entry_type))
    }
}

/// One `largest-contentful-paint` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LcpCandidate {
    /// renderTime, or loadTime when the render time is hidden (a cross-origin image without
    /// Timing-Allow-Origin).
    pub start_time: f64,
    /// Painted area, px².
    pub size: f64,
    /// The image's URL; empty for text.
    pub url: String,
    /// A CSS selector of the element (`body > img:nth-of-type(1)`).
    pub selector: String,
}

/// One `layout-shift` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LayoutShift {
    pub start_time: f64,
    pub value: f64,
    pub had_recent_input: bool,
}

/// One `element` entry (Element Timing).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ElementPaint {
    /// The element's `elementtiming` attribute.
    pub identifier: String,
    /// 0 when hidden (cross-origin without Timing-Allow-Origin).
    pub render_time: f64,
    pub load_time: f64,
    pub url: String,
}

impl ElementPaint {
    /// When it was painted (renderTime, else loadTime).
    pub fn painted_ms(&self) -> Option<f64> {
        [self.render_time, self.load_time]
            .into_iter()
            .find(|t| *t > 0.0)
    }
}

/// One chunk of a response body as it arrived (Chromium: `Network.dataReceived`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataChunk {
    /// The network view's request id.
    pub request_id: String,
    /// On the engine's monotonic clock (the one of [`NetworkRequest::request_time`]), seconds.
    pub timestamp: f64,
    /// Decoded bytes.
    pub data_length: u64,
    /// Bytes on the wire, when the engine reports them per chunk (0 otherwise).
    pub encoded_data_length: u64,
}

pub use crate::config::workload::HERO_ELEMENT;

/// Cumulative Layout Shift: the largest session window of shifts without recent input (a
/// window ends after a 1 s gap or at 5 s), as web-vitals defines it.
pub fn cumulative_layout_shift(shifts: &[LayoutShift]) -> f64 {
    let mut best = 0.0f64;
    let (mut sum, mut first, mut last) = (0.0, f64::NEG_INFINITY, f64::NEG_INFINITY);
    let mut counted: Vec<&LayoutShift> = shifts.iter().filter(|s| !s.had_recent_input).collect();
    counted.sort_by(|a, b| a.start_time.total_cmp(&b.start_time));
    for s in counted {
        if s.start_time - last < 1000.0 && s.start_time - first < 5000.0 {
            sum += s.value;
        } else {
            sum = s.value;
            first = s.start_time;
        }
        last = s.start_time;
        best = best.max(sum);
    }
    best
}

/// A response body as the engine hands it out after the load (decoded; Chromium:
/// `Network.getResponseBody`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseBody {
    pub body: String,
    /// `body` is base64 (binary content).
    pub base64: bool,
}

/// A lookup shorter than this was answered on the machine (hosts file, rules, cache), not
/// asked of a resolver across a link.
pub const LOOKUP_FLOOR_MS: f64 = 1.0;

/// The timing fields this module reads from a Navigation/Resource Timing entry (ms from
/// navigation start; absent fields read 0, as the browser reports them).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EntryTiming {
    pub name: String,
    pub initiator_type: String,
    pub next_hop_protocol: String,
    pub start_time: f64,
    pub fetch_start: f64,
    pub domain_lookup_start: f64,
    pub domain_lookup_end: f64,
    pub connect_start: f64,
    pub secure_connection_start: f64,
    pub connect_end: f64,
    pub request_start: f64,
    pub response_start: f64,
    pub response_end: f64,
    pub transfer_size: f64,
    pub encoded_body_size: f64,
    pub decoded_body_size: f64,
    pub response_status: u16,
    pub dom_content_loaded_event_end: f64,
    pub load_event_end: f64,
}

impl EntryTiming {
    pub fn parse(v: &Value) -> EntryTiming {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }

    /// Connection set-up time, when this request opened a new connection.
    pub fn connect_ms(&self) -> Option<f64> {
        let d = self.connect_end - self.connect_start;
        (d > 0.0).then_some(d)
    }

    /// The name lookup's time, when this request made one (a hosts-file hit reads 0 or a few
    /// µs, a rule-mapped one in Chromium up to a few tenths of a ms: below [`LOOKUP_FLOOR_MS`] it
    /// is no lookup).
    pub fn dns_ms(&self) -> Option<f64> {
        let d = self.domain_lookup_end - self.domain_lookup_start;
        (d >= LOOKUP_FLOOR_MS).then_some(d)
    }

    /// The URL path (without scheme, host and query).
    pub fn path(&self) -> String {
        url_path(&self.name)
    }
}

use crate::config::workload::url_path;

/// The engine's view of one request (the second viewpoint beside Resource Timing). What an
/// engine does not tell stays unknown: Firefox's BiDi has no connection ids, priorities or
/// request timing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkRequest {
    pub request_id: String,
    pub url: String,
    pub method: String,
    pub protocol: Option<String>,
    pub status: Option<u16>,
    pub connection_id: Option<u64>,
    pub connection_reused: Option<bool>,
    /// When the request was sent and its response headers were in, ms after `request_time`.
    pub send_start_ms: Option<f64>,
    pub receive_headers_end_ms: Option<f64>,
    /// Bytes on the wire for this response.
    pub encoded_data_length: Option<f64>,
    pub failed: Option<String>,
    /// The base of the timing fields on the engine's monotonic clock, s.
    pub request_time: Option<f64>,
    /// The engine's priority when it made the request (Chromium: `VeryHigh` … `VeryLow`).
    pub initial_priority: Option<String>,
    /// Each later change: when (the engine's monotonic clock, s) and the new priority.
    pub priority_changes: Vec<(f64, String)>,
    /// Who asked for it, as the engine tells (CDP's `initiator.type`: `parser`, `script`,
    /// `other`…; BiDi's `request.initiatorType`: `link`, `img`…): `other` on a request for no
    /// document is the browser's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator: Option<String>,
    /// Whether it loads a document (the navigation, a frame).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub document: bool,
    /// Whether its response came from the browser's cache, not the network (BiDi's
    /// `fromCache`; CDP's `fromDiskCache`, `fromPrefetchCache`, `requestServedFromCache`): it
    /// went over no protocol.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_cache: bool,
}

/// Per-resource figures (ms from navigation start, or durations in ms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceMetrics {
    pub path: String,
    pub initiator: String,
    pub protocol: String,
    pub start_ms: f64,
    pub request_start_ms: f64,
    pub response_start_ms: f64,
    pub response_end_ms: f64,
    /// requestStart − startTime: waiting in the browser (plus set-up for a new connection).
    pub queueing_ms: f64,
    /// connectEnd − connectStart when this request opened a connection.
    pub connect_ms: Option<f64>,
    /// domainLookupEnd − domainLookupStart when this request looked its host up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_ms: Option<f64>,
    /// responseStart − requestStart.
    pub ttfb_ms: f64,
    /// responseEnd − responseStart.
    pub download_ms: f64,
    pub transfer_size: f64,
    pub encoded_body_size: f64,
    pub status: u16,
    /// From CDP: the connection that carried it and whether it was reused.
    pub connection_id: Option<u64>,
    pub connection_reused: Option<bool>,
    /// Chromium's priority for it when requested, and after its last change (HAR `_priority`).
    #[serde(default)]
    pub initial_priority: Option<String>,
    #[serde(default)]
    pub priority: Option<String>,
    /// Priority changes after the request was made (ms from navigation start).
    #[serde(default)]
    pub priority_changes: Vec<PriorityChange>,
    /// When each chunk of the body arrived in the browser (ms from navigation start).
    #[serde(default)]
    pub chunks: Vec<ChunkArrival>,
    /// When the server sent its body, read off the wire: its first and last byte (ms from
    /// navigation start; h2 and h3 only, see [`add_server_sends`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_sent_ms: Option<(f64, f64)>,
    /// Its priority as the wire carried it: the request's `priority` header, or the last
    /// PRIORITY_UPDATE's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_priority: Option<String>,
}

/// A priority change of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorityChange {
    pub t_ms: f64,
    pub priority: String,
}

/// One chunk of a response body in the browser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkArrival {
    pub t_ms: f64,
    /// Decoded bytes.
    pub bytes: u64,
}

/// Per-run figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    /// The run's headline time (ms from navigation start): loadEventEnd for pages, the
    /// download's body completion (responseEnd) or the upload's server answer for transfers.
    pub completion_ms: Option<f64>,
    pub load_event_end_ms: Option<f64>,
    pub dom_content_loaded_ms: Option<f64>,
    /// The navigation's connection set-up (TCP+TLS or QUIC handshake).
    pub nav_connect_ms: Option<f64>,
    /// The navigation's name lookup (`--dns resolver`; None: no lookup, a hosts file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nav_dns_ms: Option<f64>,
    pub nav_ttfb_ms: Option<f64>,
    /// nav_connect_ms ÷ the profile's RTT (1 for QUIC, 2 for TCP + TLS 1.3 when all goes well).
    pub handshake_rtts: Option<f64>,
    /// The navigation's first response byte, ms from navigation start: set-up, request and
    /// answer. What 0-RTT shortens (it sends the request before the handshake completes, which
    /// leaves the connect time as it was).
    pub first_byte_ms: Option<f64>,
    /// first_byte_ms ÷ the profile's RTT (3 for a new TCP + TLS 1.3 connection, 2 for QUIC, 1
    /// for QUIC with 0-RTT, plus the server's time).
    pub first_byte_rtts: Option<f64>,
    pub resources: usize,
    pub queueing_median_ms: Option<f64>,
    pub queueing_p95_ms: Option<f64>,
    pub ttfb_median_ms: Option<f64>,
    pub download_median_ms: Option<f64>,
    /// Connection set-ups among subresources (h1 opens up to 6).
    pub new_connections: usize,
    /// Distinct connections CDP saw (navigation included).
    pub connections: usize,
    /// Resources with requestStart ≤ mid ≤ responseEnd, mid = middle of the load window.
    pub onwire_mid: Option<usize>,
    /// Most resources between requestStart and responseEnd at any instant.
    pub onwire_peak: Option<usize>,
    /// Bytes moved by the transfer of a download/upload workload.
    pub transfer_bytes: Option<u64>,
    /// Duration of that transfer (request sent → body complete).
    pub transfer_ms: Option<f64>,
    pub goodput_mbit: Option<f64>,
    /// First Contentful Paint (ms from navigation start).
    #[serde(default)]
    pub fcp_ms: Option<f64>,
    /// Largest Contentful Paint: its time, its element (a selector) and, for an image, URL.
    #[serde(default)]
    pub lcp_ms: Option<f64>,
    #[serde(default)]
    pub lcp_element: Option<String>,
    #[serde(default)]
    pub lcp_url: Option<String>,
    /// Cumulative Layout Shift (unitless).
    #[serde(default)]
    pub cls: Option<f64>,
    /// Element Timing of the page's hero element (`elementtiming="hero"`).
    #[serde(default)]
    pub hero_ms: Option<f64>,
    /// From the screencast (`--visual`): Speed Index, Visually Complete, First Visual Change.
    #[serde(default)]
    pub speed_index_ms: Option<f64>,
    #[serde(default)]
    pub visual_complete_ms: Option<f64>,
    #[serde(default)]
    pub first_visual_change_ms: Option<f64>,
}

/// Quantile (numpy's linear method) of the finite values; `None` when there are none.
fn quantile(values: impl IntoIterator<Item = f64>, q: f64) -> Option<f64> {
    let v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    crate::support::stats::quantile(&v, q).ok()
}

/// On-wire concurrency: resources in flight at the middle of the load window, and the peak.
pub fn onwire(resources: &[ResourceMetrics]) -> (Option<usize>, Option<usize>) {
    if resources.is_empty() {
        return (None, None);
    }
    let first = resources
        .iter()
        .map(|r| r.start_ms)
        .fold(f64::INFINITY, f64::min);
    let last = resources
        .iter()
        .map(|r| r.response_end_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    let mid = (first + last) / 2.0;
    let at_mid = resources
        .iter()
        .filter(|r| r.request_start_ms <= mid && mid <= r.response_end_ms)
        .count();
    (Some(at_mid), Some(peak_overlap(resources)))
}

/// Largest number of `[requestStart, responseEnd]` intervals that overlap (closed intervals:
/// a start at the same instant as an end counts both).
fn peak_overlap(resources: &[ResourceMetrics]) -> usize {
    let mut edges: Vec<(f64, i32)> = Vec::with_capacity(resources.len() * 2);
    for r in resources {
        edges.push((r.request_start_ms, 1));
        edges.push((r.response_end_ms, -1));
    }
    // Starts before ends at equal times.
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    let (mut cur, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        cur += d;
        peak = peak.max(cur);
    }
    peak.max(0) as usize
}

/// On-wire count over time, for charts: `(t_ms, in_flight)` at every change.
pub fn onwire_timeline(resources: &[ResourceMetrics]) -> Vec<(f64, usize)> {
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for r in resources {
        edges.push((r.request_start_ms, 1));
        edges.push((r.response_end_ms, -1));
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut cur = 0i32;
    let mut out: Vec<(f64, usize)> = Vec::new();
    for (t, d) in edges {
        cur += d;
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 = cur.max(0) as usize,
            _ => out.push((t, cur.max(0) as usize)),
        }
    }
    out
}

/// What is wrong with the order of a run's paints: FCP ≤ LCP always, and on a generated page
/// (`generated`: its hero paints before its last file loads) both ≤ loadEventEnd. Each problem
/// is one sentence.
pub fn paint_order_problems(m: &RunMetrics, generated: bool) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(fcp), Some(lcp)) = (m.fcp_ms, m.lcp_ms) {
        if lcp < fcp {
            out.push(format!("LCP ({lcp:.0} ms) before FCP ({fcp:.0} ms)"));
        }
    }
    if let (true, Some(load)) = (generated, m.load_event_end_ms) {
        for (name, t) in [("FCP", m.fcp_ms), ("LCP", m.lcp_ms)] {
            if let Some(t) = t.filter(|t| *t > load) {
                out.push(format!(
                    "{name} ({t:.0} ms) after loadEventEnd ({load:.0} ms) on a generated page"
                ));
            }
        }
    }
    out
}

/// Where navigation start is on the engine's monotonic clock (ms). Resource Timing's
/// `requestStart` is the network view's `request_time + send_start` made relative to
/// navigation start (the same measurement), so each resource seen by both gives the offset;
/// the median is immune to one odd pairing.
fn navigation_start_on_engine_clock(
    timings: &[EntryTiming],
    by_path: &BTreeMap<String, Vec<&NetworkRequest>>,
) -> Option<f64> {
    let offsets: Vec<f64> = timings
        .iter()
        .filter_map(|t| {
            let c = by_path.get(&t.path())?.first()?;
            (t.request_start > 0.0)
                .then_some(c.request_time? * 1000.0 + c.send_start_ms? - t.request_start)
        })
        .collect();
    crate::support::stats::median(&offsets).ok()
}

/// Gives each resource the server's send window and the priority the wire carried for it, from
/// the stream of the same path (the query left out; several streams of one path are taken in
/// the order the resources started). Needs the navigation's place on the wire's clock.
pub fn add_server_sends(resources: &mut [ResourceMetrics], wire: &crate::packets::WireEvidence) {
    let Some(nav) = wire.navigation_ms else {
        return;
    };
    let mut streams: Vec<&crate::packets::streams::WireStream> = wire
        .streams
        .connections
        .iter()
        .flat_map(|c| &c.streams)
        .filter(|s| s.first_byte_ms().is_some())
        .collect();
    streams.sort_by(|a, b| {
        a.requested_ms
            .unwrap_or(0.0)
            .total_cmp(&b.requested_ms.unwrap_or(0.0))
    });
    let mut order: Vec<usize> = (0..resources.len()).collect();
    order.sort_by(|&a, &b| resources[a].start_ms.total_cmp(&resources[b].start_ms));
    let mut used = vec![false; streams.len()];
    for i in order {
        let r = &mut resources[i];
        let found = streams.iter().enumerate().find(|(k, s)| {
            !used[*k]
                && s.path
                    .as_deref()
                    .is_some_and(|p| p.split('?').next() == Some(r.path.as_str()))
        });
        let Some((k, s)) = found else { continue };
        used[k] = true;
        if let (Some(a), Some(b)) = (s.first_byte_ms(), s.last_byte_ms()) {
            r.server_sent_ms = Some((a - nav, b - nav));
        }
        r.wire_priority = s
            .updates
            .last()
            .map(|u| u.value.clone())
            .or_else(|| s.priority.clone());
    }
}

/// Derives per-resource and per-run metrics. `rtt_ms` is the profile's RTT (for handshake
/// round trips; 0 leaves them out).
pub fn derive(
    obs: &Observation,
    kind: &WorkloadKind,
    rtt_ms: f64,
) -> (RunMetrics, Vec<ResourceMetrics>) {
    let requests = &obs.network.requests;
    let resources = resource_metrics(obs, requests);
    let mut m = RunMetrics {
        resources: resources.len(),
        ..Default::default()
    };
    if let Some(n) = obs.navigation.as_ref().map(EntryTiming::parse) {
        navigation_metrics(&mut m, &n, rtt_ms);
    }
    m.queueing_median_ms = quantile(resources.iter().map(|r| r.queueing_ms), 0.5);
    m.queueing_p95_ms = quantile(resources.iter().map(|r| r.queueing_ms), 0.95);
    m.ttfb_median_ms = quantile(resources.iter().map(|r| r.ttfb_ms), 0.5);
    m.download_median_ms = quantile(resources.iter().map(|r| r.download_ms), 0.5);
    m.new_connections = resources.iter().filter(|r| r.connect_ms.is_some()).count();
    m.connections = requests
        .iter()
        .filter_map(|c| c.connection_id)
        .filter(|id| *id != 0)
        .collect::<BTreeSet<_>>()
        .len();
    (m.onwire_mid, m.onwire_peak) = onwire(&resources);
    if let Some(p) = &obs.paint {
        paint_metrics(&mut m, p);
    }
    completion(&mut m, obs, kind, &resources);
    if let (Some(b), Some(t)) = (m.transfer_bytes, m.transfer_ms) {
        if t > 0.0 && b > 0 {
            m.goodput_mbit = Some(b as f64 * 8.0 / (t * 1000.0));
        }
    }
    (m, resources)
}

/// Each resource's timings from Resource Timing, with its DevTools view's connection,
/// priorities and body chunks on the navigation's clock.
fn resource_metrics(obs: &Observation, requests: &[NetworkRequest]) -> Vec<ResourceMetrics> {
    let mut by_path: BTreeMap<String, Vec<&NetworkRequest>> = BTreeMap::new();
    for c in requests {
        by_path.entry(url_path(&c.url)).or_default().push(c);
    }
    let timings: Vec<EntryTiming> = obs.resources.iter().map(EntryTiming::parse).collect();
    let nav_start = navigation_start_on_engine_clock(&timings, &by_path);
    let to_ms = |ts: f64| nav_start.map(|n| ts * 1000.0 - n);
    let mut chunks_by_id: BTreeMap<&str, Vec<ChunkArrival>> = BTreeMap::new();
    // The last dataReceived of a body often carries no bytes.
    for c in obs.chunks.iter().filter(|c| c.data_length > 0) {
        if let Some(t_ms) = to_ms(c.timestamp) {
            chunks_by_id
                .entry(c.request_id.as_str())
                .or_default()
                .push(ChunkArrival {
                    t_ms,
                    bytes: c.data_length,
                });
        }
    }
    timings
        .into_iter()
        .map(|t| {
            let path = t.path();
            let c = by_path.get(&path).and_then(|v| v.first());
            let priority_changes: Vec<PriorityChange> = c
                .map(|c| {
                    c.priority_changes
                        .iter()
                        .filter_map(|(ts, p)| {
                            to_ms(*ts).map(|t_ms| PriorityChange {
                                t_ms,
                                priority: p.clone(),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            let initial_priority = c.and_then(|c| c.initial_priority.clone());
            let priority = c
                .and_then(|c| c.priority_changes.last().map(|(_, p)| p.clone()))
                .or_else(|| initial_priority.clone());
            ResourceMetrics {
                initiator: t.initiator_type.clone(),
                protocol: t.next_hop_protocol.clone(),
                start_ms: t.start_time,
                request_start_ms: t.request_start,
                response_start_ms: t.response_start,
                response_end_ms: t.response_end,
                queueing_ms: t.request_start - t.start_time,
                connect_ms: t.connect_ms(),
                dns_ms: t.dns_ms(),
                ttfb_ms: t.response_start - t.request_start,
                download_ms: t.response_end - t.response_start,
                transfer_size: t.transfer_size,
                encoded_body_size: t.encoded_body_size,
                status: t.response_status,
                connection_id: c.and_then(|c| c.connection_id),
                connection_reused: c.and_then(|c| c.connection_reused),
                initial_priority,
                priority,
                priority_changes,
                chunks: c
                    .and_then(|c| chunks_by_id.remove(c.request_id.as_str()))
                    .unwrap_or_default(),
                server_sent_ms: None,
                wire_priority: None,
                path,
            }
        })
        .collect()
}

/// Clears the lookup times of a run that asked no resolver (names from a hosts file, whose
/// answer a busy machine can take over [`LOOKUP_FLOOR_MS`] to give).
pub fn forget_lookups(m: &mut RunMetrics, resources: &mut [ResourceMetrics]) {
    m.nav_dns_ms = None;
    for r in resources {
        r.dns_ms = None;
    }
}

/// The navigation's own timings, and in round trips of the profile's RTT.
fn navigation_metrics(m: &mut RunMetrics, n: &EntryTiming, rtt_ms: f64) {
    m.load_event_end_ms = (n.load_event_end > 0.0).then_some(n.load_event_end);
    m.dom_content_loaded_ms =
        (n.dom_content_loaded_event_end > 0.0).then_some(n.dom_content_loaded_event_end);
    m.nav_connect_ms = n.connect_ms();
    m.nav_dns_ms = n.dns_ms();
    m.nav_ttfb_ms = (n.response_start > 0.0).then_some(n.response_start - n.request_start);
    m.first_byte_ms = (n.response_start > 0.0).then_some(n.response_start);
    if rtt_ms > 0.0 {
        m.handshake_rtts = m.nav_connect_ms.map(|c| c / rtt_ms);
        m.first_byte_rtts = m.first_byte_ms.map(|t| t / rtt_ms);
    }
}

/// FCP, LCP and its element, CLS (where the engine has layout shifts) and the hero's paint.
fn paint_metrics(m: &mut RunMetrics, p: &PaintEntries) {
    m.fcp_ms = p.first_contentful_paint.filter(|t| *t > 0.0);
    if let Some(lcp) = p.largest_contentful_paint.last() {
        m.lcp_ms = Some(lcp.start_time).filter(|t| *t > 0.0);
        m.lcp_element = Some(lcp.selector.clone()).filter(|s| !s.is_empty());
        m.lcp_url = Some(lcp.url.clone()).filter(|u| !u.is_empty());
    }
    m.cls = p
        .supports("layout-shift")
        .then(|| cumulative_layout_shift(&p.layout_shifts));
    m.hero_ms = p
        .elements
        .iter()
        .find(|e| e.identifier == HERO_ELEMENT)
        .and_then(ElementPaint::painted_ms);
}

/// The headline time: the load event for pages; for a transfer, the body's end once the page
/// checked it whole, with its bytes and time.
fn completion(
    m: &mut RunMetrics,
    obs: &Observation,
    kind: &WorkloadKind,
    resources: &[ResourceMetrics],
) {
    match kind {
        WorkloadKind::Page { .. }
        | WorkloadKind::Sharded { .. }
        | WorkloadKind::Site { .. }
        | WorkloadKind::LateStylesheet { .. } => m.completion_ms = m.load_event_end_ms,
        WorkloadKind::Download { bytes } => {
            // Only a body the page checked (length and SHA-256) counts as completed.
            let whole = obs
                .page_result
                .as_ref()
                .and_then(|p| p.get("ok"))
                .and_then(Value::as_bool)
                == Some(true);
            let fetched = resources
                .iter()
                .find(|r| r.initiator == "fetch" && r.response_end_ms > 0.0);
            if let (Some(r), true) = (fetched, whole) {
                m.completion_ms = Some(r.response_end_ms);
                m.transfer_bytes = Some(*bytes);
                m.transfer_ms = Some(r.response_end_ms - r.request_start_ms);
            }
        }
        WorkloadKind::Upload { bytes } => {
            let p = obs.page_result.as_ref();
            let f = |k: &str| p.and_then(|p| p.get(k)).and_then(Value::as_f64);
            let ok = p.and_then(|p| p.get("ok")).and_then(Value::as_bool) == Some(true);
            if let (Some(start), Some(end), true) = (f("start"), f("end"), ok) {
                m.completion_ms = Some(end);
                m.transfer_ms = Some(end - start);
                m.transfer_bytes = Some(*bytes);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A recorded load: `perf` (timeOrigin, nav, res, pb) and `events`.
    pub(crate) fn fixture(name: &str) -> Observation {
        let path = format!(
            "{}/tests/fixtures/browser/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        Observation {
            time_origin: v["perf"]["timeOrigin"].as_f64(),
            navigation: Some(v["perf"]["nav"].clone()),
            resources: v["perf"]["res"].as_array().unwrap().clone(),
            page_result: v["perf"].get("pb").cloned().filter(|p| !p.is_null()),
            network: crate::measure::browser::engines::chromium::network::view(
                serde_json::from_value(v["events"].clone()).unwrap(),
            ),
            paint: v["perf"]
                .get("paint")
                .map(|p| serde_json::from_value(p.clone()).unwrap()),
            chunks: v
                .get("chunks")
                .map(|c| serde_json::from_value(c.clone()).unwrap())
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    fn res(start: f64, req: f64, end: f64) -> ResourceMetrics {
        ResourceMetrics {
            dns_ms: None,
            path: "/x".into(),
            initiator: "img".into(),
            protocol: "h2".into(),
            start_ms: start,
            request_start_ms: req,
            response_start_ms: req,
            response_end_ms: end,
            queueing_ms: req - start,
            connect_ms: None,
            ttfb_ms: 0.0,
            download_ms: end - req,
            transfer_size: 0.0,
            encoded_body_size: 0.0,
            status: 200,
            connection_id: None,
            connection_reused: None,
            initial_priority: None,
            priority: None,
            priority_changes: vec![],
            chunks: vec![],
            server_sent_ms: None,
            wire_priority: None,
        }
    }

    #[test]
    fn onwire_counts_request_to_response_end() {
        // Window 0..100, mid 50. In flight at 50: b (40..60) and c (50..90); a ends at 30,
        // d is queued until 55 (its startTime variant would count it: that one saturates).
        let r = vec![
            res(0.0, 0.0, 30.0),
            res(0.0, 40.0, 60.0),
            res(0.0, 50.0, 90.0),
            res(0.0, 55.0, 100.0),
        ];
        assert_eq!(onwire(&r), (Some(2), Some(3)));
        let tl = onwire_timeline(&r);
        assert_eq!(tl.first(), Some(&(0.0, 1)));
        assert_eq!(tl.last(), Some(&(100.0, 0)));
        assert_eq!(tl.iter().map(|x| x.1).max(), Some(3));
    }

    #[test]
    fn url_paths() {
        assert_eq!(
            url_path("https://pagebench.test:8443/page10/a.css?x=1"),
            "/page10/a.css"
        );
        assert_eq!(url_path("https://pagebench.test"), "/");
    }

    #[test]
    fn h2_page10_fixture() {
        let obs = fixture("h2-page10");
        let kind = WorkloadKind::Page {
            files: 10,
            file_bytes: None,
        };
        let (m, r) = derive(&obs, &kind, 0.0);
        assert_eq!(m.resources, 10);
        assert_eq!(r.iter().filter(|r| r.protocol == "h2").count(), 10);
        assert_eq!(m.completion_ms, m.load_event_end_ms);
        assert!(m.load_event_end_ms.unwrap() > 0.0);
        // One h2 connection carries everything.
        assert_eq!(m.connections, 1);
        assert_eq!(m.new_connections, 0);
        assert!(m.nav_connect_ms.unwrap() > 0.0);
        assert_eq!(m.handshake_rtts, None);
        let q = m.queueing_median_ms.unwrap();
        assert!(q >= 0.0 && q <= m.queueing_p95_ms.unwrap());
        assert!(m.onwire_peak.unwrap() >= m.onwire_mid.unwrap());
        assert!(r.iter().all(|r| r.connection_id.is_some()));
    }

    #[test]
    fn h1_page10_fixture_opens_several_connections() {
        let obs = fixture("h1-page10");
        let (m, r) = derive(
            &obs,
            &WorkloadKind::Page {
                files: 10,
                file_bytes: None,
            },
            40.0,
        );
        assert!(r.iter().all(|r| r.protocol == "http/1.1"));
        assert!(m.connections > 1 && m.connections <= 6, "{}", m.connections);
        assert!(m.new_connections >= 1);
        assert!(m.handshake_rtts.is_some());
    }

    #[test]
    fn download_fixture() {
        let obs = fixture("h2-download");
        let (m, r) = derive(&obs, &WorkloadKind::Download { bytes: 3_000_000 }, 0.0);
        assert_eq!(r.len(), 1);
        assert_eq!(m.transfer_bytes, Some(3_000_000));
        let c = m.completion_ms.unwrap();
        assert_eq!(c, r[0].response_end_ms);
        let t = m.transfer_ms.unwrap();
        assert!((m.goodput_mbit.unwrap() - 3_000_000.0 * 8.0 / (t * 1000.0)).abs() < 1e-9);
        // A body the page found corrupt has no completion.
        let mut bad = obs.clone();
        bad.page_result = Some(serde_json::json!({"done": true, "ok": false}));
        let (m, _) = derive(&bad, &WorkloadKind::Download { bytes: 3_000_000 }, 0.0);
        assert_eq!(m.completion_ms, None);
    }

    #[test]
    fn cls_is_the_largest_session_window() {
        let shift = |t: f64, v: f64, input: bool| LayoutShift {
            start_time: t,
            value: v,
            had_recent_input: input,
        };
        assert_eq!(cumulative_layout_shift(&[]), 0.0);
        // 0.1 + 0.2 within a second; 1.5 s later a new window of 0.25; input shifts never count.
        let shifts = [
            shift(100.0, 0.1, false),
            shift(900.0, 0.2, false),
            shift(2400.0, 0.25, false),
            shift(2500.0, 0.5, true),
        ];
        assert!((cumulative_layout_shift(&shifts) - 0.3).abs() < 1e-12);
        // A window closes after 5 s even without a 1 s gap.
        let steady: Vec<LayoutShift> = (0..12)
            .map(|i| shift(i as f64 * 900.0, 0.1, false))
            .collect();
        assert!((cumulative_layout_shift(&steady) - 0.6).abs() < 1e-9);
    }

    #[test]
    fn paint_metrics_come_from_the_last_lcp_and_the_hero() {
        let mut obs = fixture("h2-page10");
        obs.paint = Some(PaintEntries {
            supported: None,
            first_paint: Some(80.0),
            first_contentful_paint: Some(96.0),
            largest_contentful_paint: vec![
                LcpCandidate {
                    start_time: 96.0,
                    size: 4000.0,
                    url: String::new(),
                    selector: "body > h1".into(),
                },
                LcpCandidate {
                    start_time: 120.0,
                    size: 204_800.0,
                    url: "https://pagebench.test/page10/img/image003.png".into(),
                    selector: "body > img:nth-of-type(1)".into(),
                },
            ],
            layout_shifts: vec![],
            elements: vec![ElementPaint {
                identifier: "hero".into(),
                render_time: 0.0,
                load_time: 118.0,
                url: String::new(),
            }],
        });
        let kind = WorkloadKind::Page {
            files: 10,
            file_bytes: None,
        };
        let (m, _) = derive(&obs, &kind, 0.0);
        assert_eq!((m.fcp_ms, m.lcp_ms), (Some(96.0), Some(120.0)));
        assert_eq!(m.lcp_element.as_deref(), Some("body > img:nth-of-type(1)"));
        assert!(m.lcp_url.unwrap().ends_with("image003.png"));
        // A hidden render time falls back to the load time.
        assert_eq!(m.hero_ms, Some(118.0));
        assert_eq!(m.cls, Some(0.0));
        // Without paint entries there are no paint metrics (not zeros).
        let (none, _) = derive(&fixture("h2-page10"), &kind, 0.0);
        assert_eq!((none.fcp_ms, none.lcp_ms, none.cls), (None, None, None));
        // An engine without Layout Instability (Firefox) has no CLS, not a CLS of 0.
        obs.paint.as_mut().unwrap().supported =
            Some(vec!["paint".into(), "largest-contentful-paint".into()]);
        let (ff, _) = derive(&obs, &kind, 0.0);
        assert_eq!((ff.lcp_ms, ff.cls), (Some(120.0), None));
    }

    #[test]
    fn paint_order_problems_name_what_is_out_of_order() {
        let m = RunMetrics {
            fcp_ms: Some(300.0),
            lcp_ms: Some(250.0),
            load_event_end_ms: Some(280.0),
            ..Default::default()
        };
        let p = paint_order_problems(&m, true);
        assert_eq!(
            p,
            [
                "LCP (250 ms) before FCP (300 ms)",
                "FCP (300 ms) after loadEventEnd (280 ms) on a generated page"
            ]
        );
        // A real site may paint after its load event.
        assert_eq!(paint_order_problems(&m, false).len(), 1);
        let fine = RunMetrics {
            fcp_ms: Some(100.0),
            lcp_ms: Some(200.0),
            load_event_end_ms: Some(280.0),
            ..Default::default()
        };
        assert!(paint_order_problems(&fine, true).is_empty());
    }

    #[test]
    fn priorities_and_chunks_are_placed_on_the_navigation_clock() {
        let mut obs = fixture("h2-page10");
        let kind = WorkloadKind::Page {
            files: 10,
            file_bytes: None,
        };
        let (_, before) = derive(&obs, &kind, 0.0);
        assert!(before.iter().all(|r| r.initial_priority.is_some()));
        assert!(before.iter().all(|r| r.chunks.is_empty()));
        // One chunk of a stylesheet 1 ms before its responseEnd on CDP's clock, and a change of
        // its priority at its requestStart.
        let css = before.iter().find(|r| r.path.ends_with(".css")).unwrap();
        let reqs = obs.network.requests.clone();
        let c = reqs.iter().find(|c| c.url.ends_with(".css")).unwrap();
        // Navigation start on CDP's clock, from this request alone.
        let nav =
            c.request_time.unwrap() * 1000.0 + c.send_start_ms.unwrap() - css.request_start_ms;
        let at = |t_ms: f64| (nav + t_ms) / 1000.0;
        obs.chunks.push(DataChunk {
            request_id: c.request_id.clone(),
            timestamp: at(css.response_end_ms - 1.0),
            data_length: 1234,
            encoded_data_length: 0,
        });
        obs.chunks.push(DataChunk {
            request_id: c.request_id.clone(),
            timestamp: at(css.response_end_ms),
            data_length: 0,
            encoded_data_length: 0,
        });
        let changed = obs
            .network
            .requests
            .iter_mut()
            .find(|r| r.request_id == c.request_id)
            .unwrap();
        changed
            .priority_changes
            .push((at(css.request_start_ms), "Low".into()));
        let (_, after) = derive(&obs, &kind, 0.0);
        let css2 = after.iter().find(|r| r.path == css.path).unwrap();
        // The median offset over all resources is within a millisecond of this one's.
        assert_eq!(css2.chunks.len(), 1, "the empty last chunk is left out");
        assert!((css2.chunks[0].t_ms - (css.response_end_ms - 1.0)).abs() < 1.0);
        assert_eq!(css2.chunks[0].bytes, 1234);
        assert_eq!(css2.priority.as_deref(), Some("Low"));
        assert_eq!(css2.initial_priority, css.initial_priority);
        assert!((css2.priority_changes[0].t_ms - css.request_start_ms).abs() < 1.0);
    }

    #[test]
    fn server_sends_join_by_path_in_start_order_on_the_navigation_clock() {
        use crate::packets::streams::{
            PriorityUpdate, WireConnection, WireProtocol, WireStream, WireStreams,
        };
        use crate::packets::WireEvidence;
        let stream = |id: u64, path: &str, at: f64, spans: Vec<(f64, f64, u64)>| WireStream {
            id,
            path: Some(path.into()),
            priority: Some("u=3".into()),
            requested_ms: Some(at),
            body_bytes: spans.iter().map(|s| s.2).sum(),
            spans,
            ..WireStream::default()
        };
        let mut late = stream(5, "/late.css?v=1", 30.0, vec![(140.0, 150.0, 10)]);
        late.updates.push(PriorityUpdate {
            sent_ms: 31.0,
            arrived_ms: None,
            value: "u=0".into(),
        });
        let wire = WireEvidence {
            order: Default::default(),
            streams: WireStreams {
                connections: vec![WireConnection {
                    protocol: WireProtocol::H2,
                    client: "10.0.0.1:5000".parse().unwrap(),
                    server: "10.0.0.2:443".parse().unwrap(),
                    opened_ms: 0.0,
                    streams: vec![
                        stream(1, "/a.png", 20.0, vec![(120.0, 125.0, 5)]),
                        stream(3, "/a.png", 25.0, vec![(126.0, 130.0, 5)]),
                        late,
                    ],
                }],
                ..Default::default()
            },
            navigation_ms: Some(100.0),
        };
        let mut first = res(1.0, 2.0, 40.0);
        first.path = "/a.png".into();
        let mut second = res(5.0, 6.0, 40.0);
        second.path = "/a.png".into();
        let mut css = res(8.0, 9.0, 60.0);
        css.path = "/late.css".into();
        let mut unseen = res(9.0, 10.0, 60.0);
        unseen.path = "/h1.js".into();
        let mut resources = vec![second.clone(), first.clone(), css, unseen];
        resources[0].start_ms = 5.0;
        add_server_sends(&mut resources, &wire);
        assert_eq!(
            resources[1].server_sent_ms,
            Some((20.0, 25.0)),
            "first started, first stream"
        );
        assert_eq!(resources[0].server_sent_ms, Some((26.0, 30.0)));
        assert_eq!(resources[2].server_sent_ms, Some((40.0, 50.0)));
        assert_eq!(
            resources[2].wire_priority.as_deref(),
            Some("u=0"),
            "the update wins"
        );
        assert_eq!(resources[1].wire_priority.as_deref(), Some("u=3"));
        assert_eq!(resources[3].server_sent_ms, None);
        // Without the navigation on the wire's clock nothing is placed.
        let mut again = vec![first];
        add_server_sends(
            &mut again,
            &WireEvidence {
                navigation_ms: None,
                ..wire
            },
        );
        assert_eq!(again[0].server_sent_ms, None);
    }
}
