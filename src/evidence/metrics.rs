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
    /// The page's fixed CPU benchmark after the load, ms (devices compared; see
    /// `measure::browser::scripts::CPU_BENCHMARK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_benchmark_ms: Option<f64>,
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
    /// The head's stylesheets and synchronous scripts (absolute URLs): what blocks the first
    /// render by the early-hints rule, for an engine that marks nothing render-blocking
    /// (records from before: empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub head_blocking: Vec<String>,
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

pub use crate::config::name_lookup::LOOKUP_FLOOR_MS;

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
    /// `blocking` or `non-blocking` (Chromium); None where the engine does not tell (Firefox).
    pub render_blocking_status: Option<String>,
    /// The response's MIME type (empty where the engine does not tell).
    pub content_type: String,
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

/// Each entry of the load (the navigation, then every resource) that timed a lookup: its URL
/// and the lookup's time.
pub fn timed_lookups(obs: &Observation) -> Vec<(String, f64)> {
    obs.navigation
        .iter()
        .chain(&obs.resources)
        .map(EntryTiming::parse)
        .filter_map(|t| Some((t.dns_ms()?, t.name)))
        .map(|(ms, url)| (url, ms))
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
impl ResourceMetrics {
    /// A resource for tests: `path` fetched from `start_ms`, its request out at `request_ms`,
    /// its response from `response.0` to `response.1`; 10 KB over h2, no connection data.
    pub fn fixture(path: &str, start_ms: f64, request_ms: f64, response: (f64, f64)) -> Self {
        ResourceMetrics {
            dns_ms: None,
            path: path.into(),
            initiator: "script".into(),
            protocol: "h2".into(),
            start_ms,
            request_start_ms: request_ms,
            response_start_ms: response.0,
            response_end_ms: response.1,
            queueing_ms: request_ms - start_ms,
            connect_ms: None,
            ttfb_ms: response.0 - request_ms,
            download_ms: response.1 - response.0,
            transfer_size: 10_000.0,
            encoded_body_size: 9_700.0,
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
}

#[cfg(test)]
pub(crate) mod tests;
