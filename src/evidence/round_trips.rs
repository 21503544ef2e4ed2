//! Where a load's time went, in round trips (pure).
//!
//! **The critical path** is the chain of requests that ended last before the headline event:
//! its last step is the request whose response ended last (at or before the headline), each
//! step's predecessor the request whose response ended last before that step started — what
//! the browser was waiting for — and its first step the navigation. It is read from Resource
//! Timing alone, the same for every engine.
//!
//! **Each step's time** is split into what measured it: waiting in the browser (from the
//! predecessor's end to the request going out, connection set-up left out), connection set-up
//! (connectStart → connectEnd), the request's round trip and the server's time (requestStart →
//! responseStart: the server's own log says how long it took to answer, else it is what the
//! round trip leaves; beyond both, the response waited behind others — on its connection, in
//! the server's send buffer), and the transfer (responseStart → responseEnd): one round trip per
//! flight after the first (counted from the packets that reached the browser in that window,
//! [`crate::packets::flights`]) and the bytes' time at the link's rate.
//!
//! **The link's busy time.** On a link with a rate, its packets say when it was moving bytes
//! ([`crate::packets::link_busy`]). A step that waited while the link moved other responses'
//! bytes — for its set-up, its first byte, its transfer — waited for the link's rate, and that
//! time is counted once, as time at the rate: after each wait's own round trips (the lookup's,
//! the handshake's, the request's) and the server's logged time, before server time estimated
//! from the round trip, waiting behind other responses and flights. The downstream queue is
//! then that same busy time: only the upstream queue is counted per round trip.
//!
//! **A name lookup** (`--dns resolver`: domainLookupStart → domainLookupEnd of a step) is one
//! round trip to the resolver, at its own round trip (`resolver_rtt_ms`), not waiting in the
//! browser: `lookups × resolver RTT` is a term of its own.
//!
//! **The headline** is then written as `k × RTT + lookups × resolver RTT + server + behind +
//! wire + queue + browser + remainder`: `k` the round trips (set-up, one per request, the flights), `queue` the link's
//! median queueing delay on each of them, `browser` every wait in the browser and the time
//! from the last response to the headline, and the remainder what none of the measured terms
//! accounts for — kept, never spread over the others.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::evidence::metrics::{EntryTiming, ResourceMetrics};
use crate::packets::flights::{Sends, Window};
use crate::packets::link_busy::BusyPeriods;

/// What the accounting is made of, for one run.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub navigation: &'a EntryTiming,
    pub resources: &'a [ResourceMetrics],
    /// The headline time (loadEventEnd, or a transfer's completion), ms from navigation start.
    pub headline_ms: f64,
    /// The link's round trip without queueing (the profile's RTT as the link offered it), ms.
    pub rtt_ms: f64,
    /// The link's median queueing delay, both directions summed, ms (0 without a queue).
    pub queue_ms: f64,
    /// …of which the downstream's, ms: where the link's busy time is read from its packets,
    /// that queue is the bottleneck's busy time already counted at the rate, not again.
    pub down_queue_ms: f64,
    /// The bottleneck's downstream rate, Mbit/s (None: the link sets none).
    pub down_mbit: Option<f64>,
    /// The server's own time to answer each request, by path (from its log).
    pub server_ms: &'a BTreeMap<String, f64>,
    /// The server's data packets, with the trace time of the client's first packet.
    pub sends: Option<&'a Sends>,
    /// The round trip to the resolver, ms (the profile's `resolver_rtt_ms`, else its RTT);
    /// None: no resolver was asked, no lookup is counted.
    pub resolver_rtt_ms: Option<f64>,
    /// The request the path ends at, by URL path (a paint's render path says which; the
    /// navigation's full URL for the page alone); None: the response that ended last before
    /// the headline.
    pub ends_at: Option<&'a str>,
}

/// One step of the critical path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The URL path (the navigation's is the page's).
    pub path: String,
    pub start_ms: f64,
    pub end_ms: f64,
    /// Waiting in the browser before the request went out (set-up and lookup left out).
    pub wait_ms: f64,
    /// Connection set-up (0 on an open connection).
    pub setup_ms: f64,
    /// …of it, the link busy moving other bytes beyond the handshake's own round trips (not
    /// set-up round trips: time at the rate).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub setup_busy_ms: f64,
    /// The name lookup before it (0: none, or a hosts file's answer).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lookup_ms: f64,
    /// requestStart → responseStart.
    pub ttfb_ms: f64,
    /// The server's time to answer.
    pub server_ms: f64,
    /// Whether `server_ms` is the server's own figure (else: TTFB less one round trip).
    pub server_logged: bool,
    /// Waiting behind other responses: how much later than one round trip and the server's
    /// time the first byte came (0 without the server's own figure), and of the transfer what
    /// the round trips and the rate leave, in the share of the connection's bytes then that
    /// were other responses'.
    pub behind_ms: f64,
    /// responseStart → responseEnd.
    pub transfer_ms: f64,
    /// Flights that sent the response (None: no packets to count them from).
    pub flights: Option<u32>,
    /// Round trips they waited: one per flight after the first, less the round trips the
    /// bytes' time at the rate takes.
    #[serde(default)]
    pub flight_rtts: f64,
    /// The response's bytes' time at the link's rate.
    pub wire_ms: f64,
    /// The link's busy time with other bytes while this step waited for its lookup, set-up,
    /// first byte and transfer (beyond their own round trips and the server's logged time;
    /// 0 where the link's busy time is not read: no rate, or no packets).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub others_wire_ms: f64,
}

/// A run's headline in round trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundTrips {
    pub headline_ms: f64,
    pub rtt_ms: f64,
    /// The critical path, navigation first.
    pub steps: Vec<Step>,
    /// Round trips of connection set-up (set-up time ÷ RTT).
    pub setup_rtts: f64,
    /// One per request on the path.
    pub request_rtts: f64,
    /// One per flight after a response's first, less the round trips its bytes' time at the
    /// rate takes.
    pub flight_rtts: f64,
    /// Their sum: `k`.
    pub critical_rtts: f64,
    /// Name lookups on the path, each a round trip to the resolver (0: no lookup, names from
    /// a hosts file), that round trip, and the lookups' measured time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lookups: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resolver_rtt_ms: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lookup_ms: f64,
    pub server_ms: f64,
    /// Responses' first bytes waiting behind other responses.
    #[serde(default)]
    pub behind_ms: f64,
    /// Time at the link's rate: the path's own bytes, and the link busy with other bytes while
    /// the path waited (`others_wire_ms` of it).
    pub wire_ms: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub others_wire_ms: f64,
    /// The link's queueing on each of the `k` round trips (upstream only where the link's busy
    /// time is read: the downstream queue is that busy time).
    pub queue_ms: f64,
    /// Waiting in the browser, and from the last response to the headline.
    pub browser_ms: f64,
    /// `headline − (k × RTT + server + behind + wire + queue + browser)`.
    pub remainder_ms: f64,
}

/// A term that is not there (no lookup) is left out of the record.
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// A request as the path sees it: when it started and ended and how its time was spent.
#[derive(Debug, Clone)]
struct Node<'a> {
    path: &'a str,
    start_ms: f64,
    end_ms: f64,
    request_start_ms: f64,
    response_start_ms: f64,
    setup_ms: f64,
    lookup_ms: f64,
    bytes: f64,
    /// Round trips of its connection's handshake (QUIC: 1; TCP and TLS: 2).
    handshake_rtts: f64,
}

/// Round trips a handshake takes over `protocol` (an ALPN or `nextHopProtocol`).
fn handshake_rtts(protocol: &str) -> f64 {
    if protocol.starts_with("h3") {
        1.0
    } else {
        2.0
    }
}

impl<'a> Node<'a> {
    fn navigation(n: &'a EntryTiming) -> Node<'a> {
        Node {
            path: n.name.as_str(),
            start_ms: 0.0,
            end_ms: n.response_end,
            request_start_ms: n.request_start,
            response_start_ms: n.response_start,
            setup_ms: n.connect_ms().unwrap_or(0.0),
            lookup_ms: n.dns_ms().unwrap_or(0.0),
            bytes: n.transfer_size.max(n.encoded_body_size),
            handshake_rtts: handshake_rtts(&n.next_hop_protocol),
        }
    }

    fn resource(r: &'a ResourceMetrics) -> Node<'a> {
        Node {
            path: r.path.as_str(),
            start_ms: r.start_ms,
            end_ms: r.response_end_ms,
            request_start_ms: r.request_start_ms,
            response_start_ms: r.response_start_ms,
            setup_ms: r.connect_ms.unwrap_or(0.0),
            lookup_ms: r.dns_ms.unwrap_or(0.0),
            bytes: r.transfer_size.max(r.encoded_body_size),
            handshake_rtts: handshake_rtts(&r.protocol),
        }
    }
}

/// The critical path: indices into `nodes` (0 is the navigation), navigation first; ending at
/// the node whose path is `ends_at` when given (the navigation alone if none is).
fn critical_path(nodes: &[Node], headline_ms: f64, ends_at: Option<&str>) -> Vec<usize> {
    let spans: Vec<(f64, f64)> = nodes.iter().map(|n| (n.start_ms, n.end_ms)).collect();
    match ends_at {
        Some(path) => {
            let last = nodes.iter().rposition(|n| n.path == path).unwrap_or(0);
            crate::support::critical_path::chain_to(&spans, last)
        }
        None => crate::support::critical_path::chain(&spans, headline_ms),
    }
}

/// The server's time for a step, and whether its log said it.
fn server_time(
    node: &Node,
    ttfb_ms: f64,
    rtt_ms: f64,
    logged: &BTreeMap<String, f64>,
) -> (f64, bool) {
    let path = crate::config::workload::url_path(node.path);
    let key = if path.is_empty() {
        node.path
    } else {
        path.as_str()
    };
    match logged.get(key) {
        Some(ms) => (ms.clamp(0.0, ttfb_ms.max(0.0)), true),
        None => ((ttfb_ms - rtt_ms).max(0.0), false),
    }
}

/// When the navigation started on the packet trace's clock (ms), by [`trace_offset_ns`]'s rule.
pub fn navigation_on_trace_ms(navigation: &EntryTiming, sends: &Sends) -> Option<f64> {
    trace_offset_ns(navigation, sends).map(|ns| ns as f64 / 1e6)
}

/// Puts the browser's clock (ms from navigation start) on the packet trace's: the navigation's
/// first packet went out at its connectStart (or requestStart on an open connection).
fn trace_offset_ns(n: &EntryTiming, sends: &Sends) -> Option<i64> {
    let first = sends.first_client_ns? as i64;
    let at_ms = if n.connect_ms().is_some() {
        n.connect_start
    } else {
        n.request_start
    };
    Some(first - (at_ms * 1e6) as i64)
}

/// How long the link was busy (ms) in each network part of a step: its lookup, set-up,
/// wait for the first byte and transfer.
#[derive(Debug, Clone, Copy, Default)]
struct StepBusy {
    lookup: f64,
    setup: f64,
    ttfb: f64,
    transfer: f64,
}

impl StepBusy {
    /// `node`'s parts on `busy`, the browser's clock put on the trace's by `offset_ns`.
    fn of(node: &Node, busy: &BusyPeriods, offset_ns: i64) -> StepBusy {
        let at = |ms: f64| (offset_ns + (ms * 1e6) as i64).max(0) as u64;
        let ms = |from: f64, to: f64| busy.within(at(from), at(to)) as f64 / 1e6;
        let setup_start = node.request_start_ms - node.setup_ms;
        StepBusy {
            lookup: ms(setup_start - node.lookup_ms, setup_start),
            setup: ms(setup_start, node.request_start_ms),
            ttfb: ms(node.request_start_ms, node.response_start_ms),
            transfer: ms(node.response_start_ms, node.end_ms),
        }
    }
}

/// A step's terms. Where the link's busy time is read (`busy`), each network part's own
/// round trips come first (the lookup's, the handshake's, the request's; and the server's
/// logged time), then the link's busy time up to what they leave — on a link whose rate holds
/// the page back, a wait that overlaps the link moving other bytes is time at the rate, and
/// counted once — then what is left for the part's other terms.
fn step(
    node: &Node,
    before_ms: f64,
    inputs: &Inputs,
    window: Option<Window>,
    busy: Option<StepBusy>,
) -> Step {
    let rtt = inputs.rtt_ms;
    let b = busy.unwrap_or_default();
    let ttfb_ms = (node.response_start_ms - node.request_start_ms).max(0.0);
    let (server_ms, server_logged) = server_time(node, ttfb_ms, rtt, inputs.server_ms);
    let resolver_rtt = inputs.resolver_rtt_ms.unwrap_or(0.0);
    let lookup_busy = b.lookup.min((node.lookup_ms - resolver_rtt).max(0.0));
    let setup_busy = b
        .setup
        .min((node.setup_ms - node.handshake_rtts * rtt).max(0.0));
    let logged = if server_logged { server_ms } else { 0.0 };
    let ttfb_busy = b.ttfb.min((ttfb_ms - rtt - logged).max(0.0));
    let server_ms = if server_logged {
        server_ms
    } else {
        (server_ms - ttfb_busy).max(0.0)
    };
    let first_byte_behind = if server_logged {
        (ttfb_ms - rtt - server_ms - ttfb_busy).max(0.0)
    } else {
        0.0
    };
    let wait_ms = (node.request_start_ms - before_ms - node.setup_ms - node.lookup_ms).max(0.0);
    let transfer_ms = (node.end_ms - node.response_start_ms).max(0.0);
    let wire_ms = inputs
        .down_mbit
        .filter(|r| *r > 0.0)
        .map_or(0.0, |r| node.bytes * 8.0 / (r * 1000.0));
    // Other bytes the link moved while this response's arrived (its own already counted).
    let transfer_busy = (b.transfer - wire_ms).clamp(0.0, (transfer_ms - wire_ms).max(0.0));
    let flights = window.map(|w| w.flights);
    // Round trips the time at the rate already counts are not counted twice: a transfer the
    // link's rate held back spans a round per round trip too.
    let at_rate = wire_ms + transfer_busy;
    let flight_rtts = flights.map_or(0.0, |f| {
        (f.saturating_sub(1) as f64 - at_rate / rtt).max(0.0)
    });
    // What the round trips and the rate leave of the transfer went to other responses' bytes,
    // as far as the connection carried others' then.
    let others_share = window.map_or(0.0, |w| {
        (1.0 - node.bytes / (w.bytes as f64).max(1.0)).clamp(0.0, 1.0)
    });
    let transfer_left = (transfer_ms - flight_rtts * rtt - at_rate).max(0.0);
    Step {
        path: node.path.to_string(),
        start_ms: node.start_ms,
        end_ms: node.end_ms,
        wait_ms,
        setup_ms: node.setup_ms,
        setup_busy_ms: setup_busy,
        lookup_ms: node.lookup_ms,
        ttfb_ms,
        server_ms,
        server_logged,
        behind_ms: first_byte_behind + transfer_left * others_share,
        transfer_ms,
        flights,
        flight_rtts,
        wire_ms,
        others_wire_ms: lookup_busy + setup_busy + ttfb_busy + transfer_busy,
    }
}

/// The run's headline in round trips; None without a navigation entry or a round trip.
pub fn account(inputs: &Inputs) -> Option<RoundTrips> {
    let nav = inputs.navigation;
    if nav.response_end <= 0.0 || inputs.rtt_ms <= 0.0 || inputs.headline_ms <= 0.0 {
        return None;
    }
    let mut nodes: Vec<Node> = std::iter::once(Node::navigation(nav))
        .chain(inputs.resources.iter().map(Node::resource))
        .collect();
    if inputs.resolver_rtt_ms.is_none() {
        nodes.iter_mut().for_each(|n| n.lookup_ms = 0.0);
    }
    let offset = inputs.sends.and_then(|s| trace_offset_ns(nav, s));
    let rtt_ns = (inputs.rtt_ms * 1e6) as u64;
    let window_of = |n: &Node| {
        let (sends, offset) = (inputs.sends?, offset?);
        let at = |ms: f64| (offset + (ms * 1e6) as i64).max(0) as u64;
        sends.window(at(n.response_start_ms), at(n.end_ms), rtt_ns)
    };
    // When the link moved bytes at its rate: read where it has a rate and packets.
    let busy = inputs
        .sends
        .zip(inputs.down_mbit)
        .map(|(s, mbit)| BusyPeriods::at_rate(&s.down_arrivals, mbit))
        .filter(|b| !b.is_empty())
        .zip(offset);
    let mut steps: Vec<Step> = Vec::new();
    for i in critical_path(&nodes, inputs.headline_ms, inputs.ends_at) {
        let before = steps.last().map_or(0.0, |s| s.end_ms);
        let node = &nodes[i];
        let step_busy = busy
            .as_ref()
            .map(|(b, offset)| StepBusy::of(node, b, *offset));
        steps.push(step(node, before, inputs, window_of(node), step_busy));
    }
    Some(totals(inputs, steps, busy.is_some()))
}

/// The terms of a path's steps, and what they leave of the headline (`busy_read`: the link's
/// busy time was read from its packets).
fn totals(inputs: &Inputs, steps: Vec<Step>, busy_read: bool) -> RoundTrips {
    let rtt = inputs.rtt_ms;
    // A fold from +0: an empty f64 sum is −0, which the record would print as such.
    let sum = |f: fn(&Step) -> f64| steps.iter().map(f).fold(0.0, |a, b| a + b);
    let setup_rtts = sum(|s| s.setup_ms - s.setup_busy_ms) / rtt;
    let request_rtts = steps.len() as f64;
    let flight_rtts = sum(|s| s.flight_rtts);
    let critical_rtts = setup_rtts + request_rtts + flight_rtts;
    let lookups = steps.iter().filter(|s| s.lookup_ms > 0.0).count() as f64;
    let lookup_ms = sum(|s| s.lookup_ms);
    let last_end = steps.last().map_or(0.0, |s| s.end_ms);
    let browser_ms = sum(|s| s.wait_ms) + (inputs.headline_ms - last_end).max(0.0);
    let (server_ms, behind_ms, others_wire_ms) = (
        sum(|s| s.server_ms),
        sum(|s| s.behind_ms),
        sum(|s| s.others_wire_ms),
    );
    let wire_ms = sum(|s| s.wire_ms) + others_wire_ms;
    let queue_per_rtt = if busy_read {
        (inputs.queue_ms - inputs.down_queue_ms).max(0.0)
    } else {
        inputs.queue_ms
    };
    let queue_ms = (critical_rtts + lookups) * queue_per_rtt;
    let mut t = RoundTrips {
        headline_ms: inputs.headline_ms,
        rtt_ms: rtt,
        steps,
        setup_rtts,
        request_rtts,
        flight_rtts,
        critical_rtts,
        lookups,
        resolver_rtt_ms: inputs.resolver_rtt_ms.unwrap_or(0.0),
        lookup_ms,
        server_ms,
        behind_ms,
        wire_ms,
        others_wire_ms,
        queue_ms,
        browser_ms,
        remainder_ms: 0.0,
    };
    t.remainder_ms = t.headline_ms - t.accounted_ms();
    t
}

impl RoundTrips {
    /// What the terms account for: `k × RTT + lookups × resolver RTT + server + behind + at
    /// the rate + queueing + in the browser` (the headline less the remainder).
    pub fn accounted_ms(&self) -> f64 {
        self.critical_rtts * self.rtt_ms
            + self.lookups * self.resolver_rtt_ms
            + self.server_ms
            + self.behind_ms
            + self.wire_ms
            + self.queue_ms
            + self.browser_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nav(connect: (f64, f64), request: f64, response: (f64, f64)) -> EntryTiming {
        EntryTiming {
            name: "https://pagebench.test/page/index.html".into(),
            connect_start: connect.0,
            connect_end: connect.1,
            request_start: request,
            response_start: response.0,
            response_end: response.1,
            transfer_size: 1000.0,
            ..EntryTiming::default()
        }
    }

    fn res(path: &str, start: f64, request: f64, response: (f64, f64)) -> ResourceMetrics {
        ResourceMetrics::fixture(path, start, request, response)
    }

    fn inputs<'a>(
        n: &'a EntryTiming,
        r: &'a [ResourceMetrics],
        headline: f64,
        logged: &'a BTreeMap<String, f64>,
    ) -> Inputs<'a> {
        Inputs {
            navigation: n,
            resources: r,
            headline_ms: headline,
            rtt_ms: 40.0,
            queue_ms: 0.0,
            down_queue_ms: 0.0,
            down_mbit: None,
            server_ms: logged,
            sends: None,
            resolver_rtt_ms: Some(40.0),
            ends_at: None,
        }
    }

    #[test]
    fn a_lookup_is_a_round_trip_to_the_resolver_not_a_wait_in_the_browser() {
        // The page's name asked first (41 ms, the resolver 60 ms away is the profile's 40 here
        // plus its hold), then TCP + TLS (2 RTT) and the page (1 RTT).
        let mut n = nav((42.0, 122.0), 122.0, (162.0, 163.0));
        (n.domain_lookup_start, n.domain_lookup_end) = (1.0, 42.0);
        let logged = BTreeMap::new();
        let mut i = inputs(&n, &[], 170.0, &logged);
        i.resolver_rtt_ms = Some(41.0);
        let t = account(&i).unwrap();
        assert_eq!(t.lookups, 1.0);
        assert_eq!(t.lookup_ms, 41.0);
        assert_eq!(t.steps[0].wait_ms, 1.0, "the lookup is not browser time");
        assert_eq!(t.critical_rtts, 3.0, "k counts the link's round trips only");
        // 3 × 40 + 1 × 41 + browser (1 before, 7 after the last response) = 169: 1 ms left.
        assert!((t.remainder_ms - 1.0).abs() < 1e-9, "{t:?}");
        // Without a lookup (a hosts file's few µs), no lookup term; without a resolver none.
        (n.domain_lookup_start, n.domain_lookup_end) = (1.0, 1.01);
        let t = account(&inputs(&n, &[], 170.0, &logged)).unwrap();
        assert_eq!((t.lookups, t.lookup_ms), (0.0, 0.0));
        (n.domain_lookup_start, n.domain_lookup_end) = (1.0, 3.5);
        let mut i = inputs(&n, &[], 170.0, &logged);
        i.resolver_rtt_ms = None;
        assert_eq!(account(&i).unwrap().lookups, 0.0, "a slow hosts file");
    }

    #[test]
    fn a_chain_of_three_dependent_requests_is_the_path_and_each_costs_a_round_trip() {
        // TCP + TLS set-up (2 RTT), the page (1 RTT), then a.js → b.js → c.js, each requested
        // 2 ms after its predecessor arrived; a fourth file in parallel ends earlier.
        let n = nav((1.0, 81.0), 81.0, (121.0, 122.0));
        let r = vec![
            res("/a.js", 124.0, 124.0, (164.0, 165.0)),
            res("/img.png", 124.0, 124.0, (160.0, 161.0)),
            res("/b.js", 167.0, 167.0, (207.0, 208.0)),
            res("/c.js", 210.0, 210.0, (250.0, 251.0)),
        ];
        let none = BTreeMap::new();
        let rt = account(&inputs(&n, &r, 255.0, &none)).unwrap();
        let paths: Vec<&str> = rt.steps.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "https://pagebench.test/page/index.html",
                "/a.js",
                "/b.js",
                "/c.js"
            ]
        );
        assert!((rt.setup_rtts - 2.0).abs() < 1e-9, "{rt:?}");
        assert_eq!(rt.request_rtts, 4.0);
        assert_eq!(rt.flight_rtts, 0.0);
        assert!((rt.critical_rtts - 6.0).abs() < 1e-9);
        // Waits: 1 ms before the page's request, 2 ms before each script, 4 ms after the last.
        assert!((rt.browser_ms - 11.0).abs() < 1e-6, "{rt:?}");
        // Transfers of 1 ms each are what no term measures without packets or a rate.
        assert!((rt.remainder_ms - 4.0).abs() < 1e-6, "{rt:?}");
        let sum = rt.critical_rtts * rt.rtt_ms
            + rt.server_ms
            + rt.behind_ms
            + rt.wire_ms
            + rt.queue_ms
            + rt.browser_ms
            + rt.remainder_ms;
        assert!((sum - rt.headline_ms).abs() < 1e-9);
    }

    #[test]
    fn a_paint_s_path_ends_where_its_render_path_says() {
        // The page, then a.js → b.js → c.js; the paint at 215 ms waited for b.js (its render
        // path's last request), though c.js ended later than b.js and before the paint.
        let n = nav((1.0, 81.0), 81.0, (121.0, 122.0));
        let r = vec![
            res("/a.js", 124.0, 124.0, (164.0, 165.0)),
            res("/b.js", 167.0, 167.0, (207.0, 208.0)),
            res("/c.js", 170.0, 170.0, (210.0, 211.0)),
        ];
        let none = BTreeMap::new();
        let mut i = inputs(&n, &r, 215.0, &none);
        i.ends_at = Some("/b.js");
        let rt = account(&i).unwrap();
        let paths: Vec<&str> = rt.steps.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths[1..], ["/a.js", "/b.js"]);
        // From b.js's end to the paint: the browser's (rendering).
        assert!(
            (rt.browser_ms - (1.0 + 2.0 + 2.0 + 7.0)).abs() < 1e-6,
            "{rt:?}"
        );
        // Ending at the navigation: the page alone.
        i.ends_at = Some("https://pagebench.test/page/index.html");
        assert_eq!(account(&i).unwrap().steps.len(), 1);
        i.ends_at = None;
        assert_eq!(account(&i).unwrap().steps.last().unwrap().path, "/c.js");
    }

    #[test]
    fn the_servers_own_time_comes_from_its_log_and_else_from_the_round_trip() {
        // The page waited 100 ms in the server: TTFB 140 ms on a 40 ms link.
        let n = nav((0.0, 40.0), 40.0, (180.0, 181.0));
        let none = BTreeMap::new();
        let rt = account(&inputs(&n, &[], 181.0, &none)).unwrap();
        assert!((rt.server_ms - 100.0).abs() < 1e-9);
        assert!(!rt.steps[0].server_logged);
        let logged: BTreeMap<String, f64> = [("/page/index.html".to_string(), 99.5)].into();
        let rt = account(&inputs(&n, &[], 181.0, &logged)).unwrap();
        assert!((rt.server_ms - 99.5).abs() < 1e-9 && rt.steps[0].server_logged);
        // The half millisecond the server did not count: the first byte came that much later.
        assert!((rt.behind_ms - 0.5).abs() < 1e-6, "{rt:?}");
        assert!((rt.remainder_ms - 1.0).abs() < 1e-6, "{rt:?}");
    }

    #[test]
    fn on_a_busy_link_the_time_at_its_rate_is_counted_once_before_server_and_queue() {
        // 8 Mbit/s (1000 bytes a ms), 40 ms: the page, then a stylesheet requested at 125 ms
        // while other responses keep the link busy from 129 ms on; its first byte comes at
        // 425 ms (one round trip and 260 ms of the link moving other bytes), its 10 KB by 525.
        let n = nav((0.0, 80.0), 80.0, (120.0, 121.0));
        let r = vec![res("/late.css", 125.0, 125.0, (425.0, 525.0))];
        let none = BTreeMap::new();
        let sends = Sends {
            first_client_ns: Some(0),
            down_arrivals: (130..=525).map(|ms| (ms * 1_000_000, 1000)).collect(),
            ..Sends::default()
        };
        let mut i = inputs(&n, &r, 530.0, &none);
        i.down_mbit = Some(8.0);
        // The link's whole median queue is downstream: the page's own bytes standing in it.
        (i.queue_ms, i.down_queue_ms) = (98.0, 98.0);
        let blind = account(&i).unwrap();
        i.sends = Some(&sends);
        let rt = account(&i).unwrap();
        let css = &rt.steps[1];
        assert!(
            (css.others_wire_ms - (260.0 + 90.0)).abs() < 1e-6,
            "{css:?}"
        );
        assert_eq!((css.server_ms, css.behind_ms), (0.0, 0.0), "{css:?}");
        assert!((rt.wire_ms - (1.0 + 10.0 + 350.0)).abs() < 1e-6, "{rt:?}");
        assert_eq!(rt.queue_ms, 0.0, "the downstream queue is the busy time");
        assert!((rt.critical_rtts - 4.0).abs() < 1e-9, "{rt:?}");
        assert!(rt.remainder_ms.abs() < 1e-6, "{rt:?}");
        // Without the link's packets, the same wait is server time and a queue on every
        // round trip: terms that overshoot the headline.
        assert!((blind.server_ms - 260.0).abs() < 1e-6, "{blind:?}");
        assert!(blind.remainder_ms < -300.0, "{blind:?}");
    }

    #[test]
    fn busy_time_never_hides_a_handshake_s_or_a_request_s_own_round_trips() {
        // A link busy from the start: the set-up (2 RTT of TCP and TLS, 30 ms more queued)
        // keeps its two round trips, the page's request its one; the rest is at the rate.
        let n = nav((0.0, 110.0), 110.0, (170.0, 171.0));
        let none = BTreeMap::new();
        let sends = Sends {
            first_client_ns: Some(0),
            down_arrivals: (1..=171).map(|ms| (ms * 1_000_000, 1000)).collect(),
            ..Sends::default()
        };
        let mut i = inputs(&n, &[], 171.0, &none);
        i.down_mbit = Some(8.0);
        i.sends = Some(&sends);
        let rt = account(&i).unwrap();
        assert!((rt.setup_rtts - 2.0).abs() < 1e-9, "{rt:?}");
        assert!((rt.critical_rtts - 3.0).abs() < 1e-9, "{rt:?}");
        // 30 ms beyond the handshake, 20 ms beyond the request, 1 ms transfer (its own byte
        // count: 1000 bytes at 8 Mbit/s).
        assert!((rt.wire_ms - 51.0).abs() < 1e-6, "{rt:?}");
        assert!(rt.remainder_ms.abs() < 1e-6, "{rt:?}");
    }

    #[test]
    fn the_wire_time_and_a_queue_are_terms_of_their_own() {
        let n = nav((0.0, 40.0), 40.0, (80.0, 90.0));
        let none = BTreeMap::new();
        let mut i = inputs(&n, &[], 95.0, &none);
        i.down_mbit = Some(0.8); // 1000 bytes = 10 ms
        i.queue_ms = 2.0;
        let rt = account(&i).unwrap();
        assert!((rt.wire_ms - 10.0).abs() < 1e-9);
        assert!((rt.queue_ms - 2.0 * rt.critical_rtts).abs() < 1e-9);
        assert!(account(&inputs(&EntryTiming::default(), &[], 95.0, &none)).is_none());
    }
}
