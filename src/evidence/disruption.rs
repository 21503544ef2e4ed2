//! What a real network's disruptions did to a run (pure): the outages and the NAT rebinding as
//! they fell in the load, how long the transfer stalled (the longest time no data reached the
//! client, and the stall around each event), which of the server's connections survived the
//! rebinding, and what the competing flows carried. Made from the link's events and packets
//! and the server's per-connection statistics.

use serde::{Deserialize, Serialize};

use crate::embedded_server::{ConnectionStats, Transport};
use crate::link::link_stats::{CrossFlowBytes, LinkEvents};
use crate::link::nat::{REBIND_XOR, SINK_PORT};
use crate::link::{Direction, PacketTrace};

/// A packet to the client of at least this many IP bytes carries data (ACKs are far smaller).
pub const DATA_PACKET_MIN_BYTES: usize = 200;

/// The disruptions of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Disruption {
    /// Outages that overlapped the load: [start, end], ms from the mark.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outages_ms: Vec<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebind_at_ms: Option<f64>,
    /// The longest time no data reached the client during the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Stall>,
    /// The stall each event caused: the longest time without data that overlaps it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_stalls: Vec<EventStall>,
    /// The server's connections and what the rebinding did to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebind: Option<RebindOutcome>,
    /// The competing flows' bytes during the load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross: Vec<CrossFlowBytes>,
}

/// A time without data to the client, ms from the mark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    pub from_ms: f64,
    pub to_ms: f64,
    pub ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventStall {
    /// `outage` or `rebind`.
    pub event: String,
    pub at_ms: f64,
    /// None: no data flowed on both sides of it.
    pub stall: Option<Stall>,
}

/// The server's connections around a NAT rebinding (its own view).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RebindOutcome {
    /// Open when the NAT rebound.
    pub open_at_rebind: u64,
    /// …and went on after it: QUIC connections that moved to the new address.
    pub survived: u64,
    /// …and ended with an error after it (TCP: reset).
    pub broken: u64,
    /// …and neither: not used again during the load.
    pub unused: u64,
    /// Opened after the rebinding (the browser connecting again).
    pub opened_after: u64,
    pub connections: Vec<ConnectionFate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionFate {
    pub connection_id: u64,
    pub transport: Transport,
    /// ms from the mark.
    pub opened_ms: f64,
    pub closed_ms: Option<f64>,
    /// `survived`, `broken`, `unused` or `opened after`.
    pub fate: String,
    /// Its client address changed (QUIC connection migration).
    pub migrated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whether a packet belongs to the competing flows (their sink's port, before or after the
/// NAT's rewrite).
fn is_cross_traffic(data: &[u8]) -> bool {
    if data.len() < 24 || !matches!(data[9], 6 | 17) {
        return false;
    }
    let ihl = usize::from(data[0] & 0x0f) * 4;
    if data.len() < ihl + 4 {
        return false;
    }
    let port = |at: usize| u16::from_be_bytes([data[at], data[at + 1]]);
    [port(ihl), port(ihl + 2)]
        .iter()
        .any(|p| *p == SINK_PORT || *p == SINK_PORT ^ REBIND_XOR)
}

/// When data reached the client (ms on the trace's clock), the competing flows left out.
fn data_arrivals_ms(trace: &PacketTrace) -> Vec<f64> {
    let mut t: Vec<f64> = trace
        .packets
        .iter()
        .filter(|p| p.dir == Direction::Down && p.data.len() >= DATA_PACKET_MIN_BYTES)
        .filter(|p| !is_cross_traffic(&p.data))
        .filter_map(|p| p.left_ns)
        .map(|ns| ns as f64 / 1e6)
        .collect();
    t.sort_by(f64::total_cmp);
    t
}

/// The longest gap between data arrivals, shifted by `offset_ms` (trace clock → mark clock).
fn longest_gap(arrivals: &[f64], offset_ms: f64) -> Option<Stall> {
    arrivals
        .windows(2)
        .map(|w| Stall {
            from_ms: w[0] + offset_ms,
            to_ms: w[1] + offset_ms,
            ms: w[1] - w[0],
        })
        .max_by(|a, b| a.ms.total_cmp(&b.ms))
}

/// The longest gap between data arrivals that overlaps `[from_ms, to_ms]` (mark clock): the
/// stall an event caused. Packets already past the bottleneck when an outage begins still
/// arrive, so the gap begins a little after it and ends when recovery brings data again.
fn gap_overlapping(arrivals: &[f64], offset_ms: f64, from_ms: f64, to_ms: f64) -> Option<Stall> {
    let (from, to) = (from_ms - offset_ms, to_ms - offset_ms);
    arrivals
        .windows(2)
        .filter(|w| w[0] <= to && w[1] > from)
        .map(|w| Stall {
            from_ms: w[0] + offset_ms,
            to_ms: w[1] + offset_ms,
            ms: w[1] - w[0],
        })
        .max_by(|a, b| a.ms.total_cmp(&b.ms))
}

/// The disruptions of a run: `events` from the link (None: the profile has none),
/// `trace` the load's packets (its clock starts at the tap), `connections` the server's.
pub fn analyse(
    events: Option<&LinkEvents>,
    cross: &[CrossFlowBytes],
    trace: Option<&PacketTrace>,
    connections: Option<&[ConnectionStats]>,
    load_end_ms: f64,
) -> Option<Disruption> {
    if events.is_none() && cross.is_empty() {
        return None;
    }
    let mut d = Disruption {
        cross: cross.to_vec(),
        ..Disruption::default()
    };
    let Some(ev) = events else {
        return Some(d);
    };
    // Trace clock → mark clock.
    let offset_ms = trace.map_or(0.0, |t| {
        t.start_unix_ns as f64 / 1e6 - ev.timeline_start_unix_ms
    });
    let arrivals = trace.map(data_arrivals_ms).unwrap_or_default();
    let (first, last) = match (arrivals.first(), arrivals.last()) {
        (Some(f), Some(l)) => (f + offset_ms, l + offset_ms),
        _ => (0.0, 0.0),
    };
    d.outages_ms = ev
        .outages_ms
        .iter()
        .copied()
        .filter(|[_, e]| *e > 0.0)
        .collect();
    d.rebind_at_ms = ev.rebind_at_ms;
    d.stall = longest_gap(&arrivals, offset_ms);
    for [s, e] in &d.outages_ms {
        if *s >= first && *s <= last {
            d.event_stalls.push(EventStall {
                event: "outage".into(),
                at_ms: *s,
                stall: gap_overlapping(&arrivals, offset_ms, *s, *e),
            });
        }
    }
    if let Some(r) = ev.rebind_at_ms {
        d.event_stalls.push(EventStall {
            event: "rebind".into(),
            at_ms: r,
            stall: gap_overlapping(&arrivals, offset_ms, r, r),
        });
        d.rebind =
            connections.map(|c| rebind_outcome(c, ev.timeline_start_unix_ms, r, load_end_ms));
    }
    Some(d)
}

/// What became of each connection the server had around the rebinding at `rebind_ms`; the
/// load ended at `load_end_ms` (errors after it are the browser's teardown).
pub fn rebind_outcome(
    conns: &[ConnectionStats],
    timeline_start_unix_ms: f64,
    rebind_ms: f64,
    load_end_ms: f64,
) -> RebindOutcome {
    let mut out = RebindOutcome::default();
    for c in conns {
        let opened = c.opened_unix_ms as f64 - timeline_start_unix_ms;
        let closed = c.closed_unix_ms.map(|t| t as f64 - timeline_start_unix_ms);
        let migrated = c.client_last.is_some_and(|a| a != c.client);
        // Broken during the load: closed with an error, or (TCP) still retransmitting into the
        // old mapping when the load ended — the server never hears of the rebinding.
        let errored = c.error.is_some() && closed.is_some_and(|t| t <= load_end_ms);
        let stuck = c.tcp.as_ref().is_some_and(|t| t.retransmits > 0);
        let fate = if opened >= rebind_ms {
            out.opened_after += 1;
            "opened after"
        } else if closed.is_some_and(|t| t < rebind_ms) {
            // Closed before: not part of the rebinding.
            continue;
        } else {
            out.open_at_rebind += 1;
            if migrated {
                out.survived += 1;
                "survived"
            } else if errored || stuck {
                out.broken += 1;
                "broken"
            } else {
                out.unused += 1;
                "unused"
            }
        };
        out.connections.push(ConnectionFate {
            connection_id: c.connection_id,
            transport: c.transport,
            opened_ms: opened,
            closed_ms: closed,
            fate: fate.into(),
            migrated,
            error: c.error.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::TracedPacket;

    fn down(left_ms: f64, len: usize, dport: u16) -> TracedPacket {
        let mut data = vec![0u8; len];
        data[0] = 0x45;
        data[9] = 6;
        data[20..22].copy_from_slice(&443u16.to_be_bytes());
        data[22..24].copy_from_slice(&dport.to_be_bytes());
        TracedPacket {
            dir: Direction::Down,
            entered_ns: 0,
            left_ns: Some((left_ms * 1e6) as u64),
            dropped: None,
            data,
        }
    }

    fn conn(id: u64, transport: Transport, opened: u64, closed: Option<u64>) -> ConnectionStats {
        ConnectionStats {
            connection_id: id,
            transport,
            client: "10.1.0.1:40000".parse().unwrap(),
            client_last: None,
            protocol: None,
            opened_unix_ms: opened,
            closed_unix_ms: closed,
            handshake_ms: None,
            requests: 1,
            error: None,
            tcp: None,
            quic: None,
            tls_resumed: None,
        }
    }

    #[test]
    fn the_stall_is_the_longest_time_without_data_and_the_one_around_each_event() {
        // Data every 10 ms but 520–1700 ms (an outage from 500 ms, 1 s long: what was in
        // flight still arrives for 20 ms); ACK-sized packets and the competing flow's data in
        // the gap do not count.
        let mut packets: Vec<TracedPacket> = (0..300)
            .map(|i| i as f64 * 10.0)
            .filter(|t| *t <= 520.0 || *t >= 1700.0)
            .map(|t| down(t, 1500, 40_000))
            .collect();
        packets.push(down(900.0, 60, 40_000));
        packets.push(down(1000.0, 1500, SINK_PORT));
        let trace = PacketTrace {
            // The tap started 2 ms after the timeline.
            start_unix_ns: 1_000_000_002_000_000,
            packets,
        };
        let events = LinkEvents {
            timeline_offset_ms: 0.1,
            timeline_start_unix_ms: 1_000_000_000.0,
            outages_ms: vec![[502.0, 1502.0]],
            rebind_at_ms: None,
        };
        let d = analyse(Some(&events), &[], Some(&trace), None, 3000.0).unwrap();
        let s = d.stall.unwrap();
        assert!(
            (s.ms - 1180.0).abs() < 1e-6 && (s.from_ms - 522.0).abs() < 1e-6,
            "{s:?}"
        );
        assert_eq!(d.event_stalls.len(), 1);
        assert_eq!(d.event_stalls[0].stall, Some(s));
        // Without events or competing flows there is nothing to say.
        assert!(analyse(None, &[], Some(&trace), None, 3000.0).is_none());
    }

    #[test]
    fn connections_are_told_apart_by_what_the_rebinding_did_to_them() {
        // Timeline at 1 000 000 ms; rebinding at 2 s; the load ended at 5 s.
        let t = 1_000_000u64;
        let mut tcp_reset = conn(1, Transport::Tcp, t + 100, Some(t + 2100));
        tcp_reset.error = Some("connection reset by peer".into());
        let tcp_new = conn(2, Transport::Tcp, t + 2300, None);
        let mut quic = conn(3, Transport::Quic, t + 50, Some(t + 5200));
        quic.client_last = Some("10.1.0.1:7232".parse().unwrap());
        // The browser's teardown closes it with an error after the load: still survived.
        quic.error = Some("aborted by peer".into());
        let mut idle = conn(4, Transport::Quic, t + 60, Some(t + 5200));
        idle.error = Some("aborted by peer".into());
        let before = conn(5, Transport::Tcp, t + 10, Some(t + 900));
        let mut tcp_stuck = conn(6, Transport::Tcp, t + 120, None);
        tcp_stuck.tcp = Some(crate::embedded_server::TcpInfo {
            retransmits: 4,
            ..Default::default()
        });
        let all = [tcp_reset, tcp_new, quic, idle, before, tcp_stuck];
        let o = rebind_outcome(&all, t as f64, 2000.0, 5000.0);
        assert_eq!(
            (
                o.open_at_rebind,
                o.survived,
                o.broken,
                o.unused,
                o.opened_after
            ),
            (4, 1, 2, 1, 1)
        );
        let fates: Vec<(u64, &str)> = o
            .connections
            .iter()
            .map(|c| (c.connection_id, c.fate.as_str()))
            .collect();
        assert_eq!(
            fates,
            [
                (1, "broken"),
                (2, "opened after"),
                (3, "survived"),
                (4, "unused"),
                (6, "broken")
            ]
        );
        assert!(o.connections[2].migrated);
    }
}
