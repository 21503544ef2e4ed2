//! Head-of-line blocking measured from what the link saw (pure).
//!
//! TCP: per connection and direction, bytes that reached the receiver beyond a hole waited —
//! whichever HTTP/2 stream they belonged to — until the hole was filled. QUIC (with the TLS
//! keys, packets decrypted by [`super::quic`]): per stream, only the stream whose data was lost
//! waits; bytes of the connection's other streams delivered meanwhile did not wait (TCP would
//! have held them: `unblocked_bytes`). Each episode names the drops that made its hole.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};

use super::packet::{self, Transport};
use super::quic::{Frame, KeyLog, QuicFlow, Sender};
use super::reassembly::{Arrival, Episode, Reassembly};
use crate::link::{Direction, DropCause, PacketTrace};

/// Episodes kept per transport in a record (the totals count every one).
pub const EPISODES_KEPT: usize = 100;

/// What head-of-line blocking cost one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HolReport {
    /// `None`: no TCP data in the run.
    pub tcp: Option<HolSide>,
    /// `None`: no QUIC traffic in the run.
    pub quic: Option<HolSide>,
}

/// One transport's blocking in one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HolSide {
    /// TCP connections / QUIC connections (UDP flows) with data.
    pub connections: usize,
    /// QUIC streams with data (`None` for TCP: one byte stream per direction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<usize>,
    /// Payload bytes delivered (TCP: segment payload; QUIC: STREAM frame data).
    pub delivered_bytes: u64,
    /// Bytes that waited behind a hole (distinct bytes, summed over episodes).
    pub blocked_bytes: u64,
    /// Sum of the episodes' waits: first byte behind the hole → hole filled.
    pub blocked_ms: f64,
    /// Wall time during which any byte waited (the union of the episodes: parallel QUIC
    /// streams or TCP connections waiting at once count once).
    #[serde(default)]
    pub blocked_wall_ms: f64,
    /// QUIC: bytes of other streams delivered while a stream waited — bytes TCP would have
    /// blocked. Always 0 for TCP.
    pub unblocked_bytes: u64,
    /// Packets of these connections the link dropped, by cause (QUIC: every datagram, MTU
    /// probes and ACKs included).
    pub drops: DropCounts,
    /// Of those, the ones that carried data (TCP payload, QUIC STREAM frames).
    #[serde(default)]
    pub dropped_data_packets: u64,
    pub episodes_total: usize,
    /// The first [`EPISODES_KEPT`] episodes, in time order.
    pub episodes: Vec<HolEpisode>,
    /// QUIC packets that could not be decrypted (no key, unknown version): their data is not
    /// counted. Non-zero means the QUIC figures are a lower bound.
    #[serde(default)]
    pub undecrypted_packets: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounts {
    pub loss: u64,
    pub queue: u64,
    #[serde(default)]
    pub injected: u64,
    /// Packets lost to an outage or to a NAT mapping the rebinding ended.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outage: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl DropCounts {
    fn add(&mut self, cause: DropCause) {
        match cause {
            DropCause::Loss => self.loss += 1,
            // CoDel's drops are the queue's too.
            DropCause::Queue | DropCause::Aqm => self.queue += 1,
            DropCause::Injected => self.injected += 1,
            DropCause::Outage | DropCause::Nat => self.outage += 1,
            DropCause::NotForPeer => {}
        }
    }

    pub fn total(&self) -> u64 {
        self.loss + self.queue + self.injected + self.outage
    }
}

/// One time bytes waited behind a hole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HolEpisode {
    /// `sender → receiver` of the waiting bytes.
    pub flow: String,
    /// The QUIC stream that waited (`None` for TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// From the start of the run's capture (just before the navigation).
    pub start_ms: f64,
    pub duration_ms: f64,
    /// `false`: still open when the load ended.
    pub filled: bool,
    pub blocked_bytes: u64,
    /// QUIC: other streams' bytes delivered during the wait.
    pub unblocked_bytes: u64,
    /// The drops whose data made the hole (empty: a reordering, not a loss).
    pub causes: DropCounts,
}

impl HolReport {
    pub fn blocked_bytes(&self) -> u64 {
        self.sides().map(|s| s.blocked_bytes).sum()
    }

    pub fn blocked_ms(&self) -> f64 {
        self.sides().map(|s| s.blocked_ms).sum()
    }

    /// The union of both transports' waits (a run has one, normally).
    pub fn blocked_wall_ms(&self) -> f64 {
        self.sides().map(|s| s.blocked_wall_ms).sum()
    }

    pub fn unblocked_bytes(&self) -> u64 {
        self.sides().map(|s| s.unblocked_bytes).sum()
    }

    fn sides(&self) -> impl Iterator<Item = &HolSide> {
        self.tcp.iter().chain(self.quic.iter())
    }
}

/// Analyses a run's packets; `keys` decrypt its QUIC packets.
pub fn analyse(trace: &PacketTrace, keys: &KeyLog) -> HolReport {
    let end_ns = trace.packets.iter().map(|p| p.seen_ns()).max().unwrap_or(0);
    HolReport {
        tcp: tcp(trace, end_ns),
        quic: quic(trace, keys, end_ns),
    }
}

/// Packet indices in the order their receiver saw them (drops at the time they were dropped).
fn seen_order(trace: &PacketTrace) -> Vec<usize> {
    let mut order: Vec<usize> = (0..trace.packets.len()).collect();
    order.sort_by_key(|&i| (trace.packets[i].seen_ns(), i));
    order
}

fn flow_name(src: SocketAddrV4, dst: SocketAddrV4) -> String {
    format!("{src} → {dst}")
}

/// A lost range of a byte stream.
struct Lost {
    start: u64,
    end: u64,
    cause: DropCause,
    at_ns: u64,
}

/// The drops, before `now`, whose range overlaps the hole `[from, to)`.
fn causes(lost: &[Lost], from: u64, to: u64, now: u64) -> DropCounts {
    let mut c = DropCounts::default();
    for l in lost {
        if l.at_ns <= now && l.start < to && l.end > from {
            c.add(l.cause);
        }
    }
    c
}

/// One byte stream being reassembled, with its losses and its open episode's causes.
#[derive(Default)]
struct Stream {
    r: Reassembly,
    lost: Vec<Lost>,
    open_causes: DropCounts,
    open_unblocked: u64,
    /// Lost ranges not yet delivered in order (QUIC: the stream waits for them).
    pending: Vec<(u64, u64, u64)>,
    /// Since when the stream waits for a retransmission: from the first delivery, after the
    /// drop, of a packet sent later on the same connection (the lost one would be in by then).
    waiting_since: Option<u64>,
}

/// Totals of one transport while streams are walked.
#[derive(Default)]
struct Tally {
    side: HolSide,
    /// Every episode's (start, end), for the union.
    spans: Vec<(u64, u64)>,
}

impl Tally {
    fn closed(&mut self, flow: String, stream: Option<u64>, ep: Episode, s: &mut Stream) {
        self.spans.push((ep.start_ns, ep.end_ns));
        let side = &mut self.side;
        side.blocked_bytes += ep.blocked_bytes;
        side.blocked_ms += ep.duration_ns() as f64 / 1e6;
        side.episodes_total += 1;
        if side.episodes.len() < EPISODES_KEPT {
            side.episodes.push(HolEpisode {
                flow,
                stream,
                start_ms: ep.start_ns as f64 / 1e6,
                duration_ms: ep.duration_ns() as f64 / 1e6,
                filled: ep.filled,
                blocked_bytes: ep.blocked_bytes,
                unblocked_bytes: s.open_unblocked,
                causes: s.open_causes,
            });
        }
        s.open_causes = DropCounts::default();
        s.open_unblocked = 0;
    }

    fn finish(mut self) -> HolSide {
        self.spans.sort_unstable();
        let mut wall = 0u64;
        let mut current: Option<(u64, u64)> = None;
        for &(a, b) in &self.spans {
            current = match current {
                Some((s, e)) if a <= e => Some((s, e.max(b))),
                Some((s, e)) => {
                    wall += e - s;
                    Some((a, b))
                }
                None => Some((a, b)),
            };
        }
        if let Some((s, e)) = current {
            wall += e - s;
        }
        self.side.blocked_wall_ms = wall as f64 / 1e6;
        self.side
            .episodes
            .sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        self.side
    }
}

/// Opens the causes of an episode the arrival `a` at `[start, …)` started.
fn note_opened(s: &mut Stream, a: &Arrival, hole_from: u64, start: u64, now: u64) {
    if a.opened {
        s.open_causes = causes(&s.lost, hole_from, start, now);
        s.open_unblocked = 0;
    }
}

fn tcp(trace: &PacketTrace, end_ns: u64) -> Option<HolSide> {
    struct Conn {
        /// Sequence number of the stream's first byte.
        base: u32,
        s: Stream,
    }
    // Each direction's first sequence number, from the first segment its sender sent (a
    // dropped segment is seen early, by the time it was dropped, before the SYN arrives).
    let mut bases: HashMap<(SocketAddrV4, SocketAddrV4), u32> = HashMap::new();
    let sent = trace.sent_order();
    for &i in &sent {
        if let Some(parsed) = packet::parse(&trace.packets[i].data) {
            if let Transport::Tcp { seq, syn, .. } = parsed.transport {
                bases.entry((parsed.src, parsed.dst)).or_insert(if syn {
                    seq.wrapping_add(1)
                } else {
                    seq
                });
            }
        }
    }
    let mut flows: HashMap<(SocketAddrV4, SocketAddrV4), Conn> = HashMap::new();
    let mut order: Vec<(SocketAddrV4, SocketAddrV4)> = Vec::new();
    let mut tally = Tally::default();
    let mut connections = std::collections::BTreeSet::new();
    for i in seen_order(trace) {
        let p = &trace.packets[i];
        let Some(parsed) = packet::parse(&p.data) else {
            continue;
        };
        let Transport::Tcp {
            seq,
            syn,
            fin,
            payload,
        } = parsed.transport
        else {
            continue;
        };
        let key = (parsed.src, parsed.dst);
        let conn = flows.entry(key).or_insert_with(|| {
            order.push(key);
            Conn {
                base: bases.get(&key).copied().unwrap_or(seq),
                s: Stream::default(),
            }
        });
        if syn {
            continue;
        }
        let len = payload.len() as u64 + u64::from(fin);
        if len == 0 {
            continue;
        }
        let start = u64::from(seq.wrapping_sub(conn.base));
        let end = start + len;
        let now = p.seen_ns();
        if let Some(cause) = p.dropped {
            if cause != DropCause::NotForPeer {
                tally.side.drops.add(cause);
                tally.side.dropped_data_packets += u64::from(!payload.is_empty());
                conn.s.lost.push(Lost {
                    start,
                    end,
                    cause,
                    at_ns: now,
                });
            }
            continue;
        }
        if !payload.is_empty() {
            connections.insert(if p.dir == Direction::Up {
                key
            } else {
                (key.1, key.0)
            });
        }
        let hole_from = conn.s.r.next();
        let a = conn.s.r.receive(start, end, now);
        tally.side.delivered_bytes += a.delivered;
        note_opened(&mut conn.s, &a, hole_from, start, now);
        if let Some(ep) = a.closed {
            tally.closed(flow_name(key.0, key.1), None, ep, &mut conn.s);
        }
    }
    for key in order {
        if let Some(conn) = flows.get_mut(&key) {
            if let Some(ep) = conn.s.r.finish(end_ns) {
                tally.closed(flow_name(key.0, key.1), None, ep, &mut conn.s);
            }
        }
    }
    if connections.is_empty() {
        return None;
    }
    tally.side.connections = connections.len();
    Some(tally.finish())
}

fn quic(trace: &PacketTrace, keys: &KeyLog, end_ns: u64) -> Option<HolSide> {
    // Decrypt in the order the packets were sent (packet numbers decode against the largest
    // seen so far), dropped ones included: their frames are what was lost.
    let mut decoders: BTreeMap<(SocketAddrV4, SocketAddrV4), QuicFlow> = BTreeMap::new();
    let mut frames: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); trace.packets.len()];
    let mut undecrypted = 0u64;
    let sent = trace.sent_order();
    for &i in &sent {
        let p = &trace.packets[i];
        if p.dropped == Some(DropCause::NotForPeer) {
            continue;
        }
        let Some(parsed) = packet::parse(&p.data) else {
            continue;
        };
        let Transport::Udp { payload } = parsed.transport else {
            continue;
        };
        let (client, server, from) = match p.dir {
            Direction::Up => (parsed.src, parsed.dst, Sender::Client),
            Direction::Down => (parsed.dst, parsed.src, Sender::Server),
        };
        let flow = decoders.entry((client, server)).or_default();
        for q in flow.feed(from, payload, keys) {
            if let Some(why) = &q.undecryptable {
                tracing::debug!(
                    "QUIC packet {i} ({:?}, entered {} ns, {} B) not decrypted: {why}",
                    p.dir,
                    p.entered_ns,
                    p.data.len()
                );
                undecrypted += 1;
                continue;
            }
            for f in q.frames {
                if let Frame::Stream {
                    id,
                    offset,
                    len,
                    fin,
                } = f
                {
                    frames[i].push((id, offset, offset + len + u64::from(fin && len == 0)));
                }
            }
        }
    }
    if decoders.is_empty() {
        return None;
    }
    let mut side = quic_streams(trace, &frames, end_ns);
    side.connections = side.connections.max(1);
    side.undecrypted_packets = undecrypted;
    Some(side)
}

/// QUIC head-of-line blocking from each packet's STREAM frames (`frames[i]`: stream id and
/// byte range of packet `i`), delivered in the order the receivers saw the packets.
fn quic_streams(trace: &PacketTrace, frames: &[Vec<(u64, u64, u64)>], end_ns: u64) -> HolSide {
    type Key = (SocketAddrV4, SocketAddrV4, u64);
    let mut streams: BTreeMap<Key, Stream> = BTreeMap::new();
    let mut tally = Tally::default();
    let mut flows_with_data = std::collections::BTreeSet::new();
    for i in seen_order(trace) {
        let p = &trace.packets[i];
        let Some(parsed) = packet::parse(&p.data) else {
            continue;
        };
        if !matches!(parsed.transport, Transport::Udp { .. }) {
            continue;
        }
        let now = p.seen_ns();
        if let Some(cause) = p.dropped {
            // Every dropped datagram of the connection counts, data or not.
            tally.side.drops.add(cause);
            tally.side.dropped_data_packets += u64::from(!frames[i].is_empty());
            for &(id, start, end) in &frames[i] {
                let s = streams.entry((parsed.src, parsed.dst, id)).or_default();
                s.lost.push(Lost {
                    start,
                    end,
                    cause,
                    at_ns: now,
                });
                s.pending.push((start, end, now));
            }
            continue;
        }
        // Streams whose lost data would have arrived by now start waiting.
        for (_, s) in
            streams.range_mut((parsed.src, parsed.dst, 0)..=(parsed.src, parsed.dst, u64::MAX))
        {
            if s.waiting_since.is_none() && s.pending.iter().any(|&(_, _, at)| at < now) {
                s.waiting_since = Some(now);
            }
        }
        flows_with_data.insert(match p.dir {
            Direction::Up => (parsed.src, parsed.dst),
            Direction::Down => (parsed.dst, parsed.src),
        });
        for &(id, start, end) in &frames[i] {
            let key = (parsed.src, parsed.dst, id);
            let s = streams.entry(key).or_default();
            let was_waiting = s.waiting_since.is_some() || s.r.blocked();
            let hole_from = s.r.next();
            let a = s.r.receive(start, end, now);
            tally.side.delivered_bytes += a.delivered;
            note_opened(s, &a, hole_from, start, now);
            if let Some(ep) = a.closed {
                tally.closed(flow_name(key.0, key.1), Some(id), ep, s);
            }
            let next = s.r.next();
            s.pending.retain(|&(_, e, _)| e > next);
            if s.pending.is_empty() {
                s.waiting_since = None;
            }
            if a.delivered > 0 && !was_waiting {
                // Other streams of this connection and direction waiting now: these bytes
                // passed them.
                let mut passed = false;
                for (k, other) in streams.range_mut((key.0, key.1, 0)..=(key.0, key.1, u64::MAX)) {
                    if k.2 != id && (other.waiting_since.is_some() || other.r.blocked()) {
                        other.open_unblocked += a.delivered;
                        passed = true;
                    }
                }
                if passed {
                    tally.side.unblocked_bytes += a.delivered;
                }
            }
        }
    }
    let keys_: Vec<Key> = streams.keys().copied().collect();
    for key in &keys_ {
        if let Some(s) = streams.get_mut(key) {
            if let Some(ep) = s.r.finish(end_ns) {
                tally.closed(flow_name(key.0, key.1), Some(key.2), ep, s);
            }
        }
    }
    tally.side.connections = flows_with_data.len();
    tally.side.streams = Some(streams.iter().filter(|(_, s)| s.r.next() > 0).count());
    tally.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::TracedPacket;
    use crate::packets::packet::build;

    const MS: u64 = 1_000_000;

    fn addrs() -> (SocketAddrV4, SocketAddrV4) {
        (
            "10.1.0.1:40000".parse().unwrap(),
            "10.1.0.2:443".parse().unwrap(),
        )
    }

    fn down(data: Vec<u8>, entered: u64, left: Option<u64>) -> TracedPacket {
        TracedPacket {
            dir: Direction::Down,
            entered_ns: entered,
            left_ns: left,
            dropped: left.is_none().then_some(DropCause::Loss),
            data,
        }
    }

    /// A server sends ten 1000-byte segments 1 ms apart (25 ms in the link); segment `lost`
    /// is dropped and retransmitted at `retransmit_ms`.
    fn tcp_trace(lost: Option<u32>, retransmit_ms: u64) -> PacketTrace {
        let (c, s) = addrs();
        let isn = u32::MAX - 3_000; // the stream wraps around 2^32 at its fourth segment
        let mut packets = vec![down(build::tcp(s, c, isn, 0x12, 0), 0, Some(25 * MS))];
        for k in 0..10u32 {
            let seq = isn.wrapping_add(1 + k * 1000);
            let t = (k as u64 + 1) * MS;
            let left = (Some(k) != lost).then_some(t + 25 * MS);
            packets.push(down(build::tcp(s, c, seq, 0x10, 1000), t, left));
        }
        if let Some(k) = lost {
            let seq = isn.wrapping_add(1 + k * 1000);
            let t = retransmit_ms * MS;
            packets.push(down(
                build::tcp(s, c, seq, 0x10, 1000),
                t,
                Some(t + 25 * MS),
            ));
        }
        PacketTrace {
            start_unix_ns: 0,
            packets,
        }
    }

    #[test]
    fn a_lost_tcp_segment_blocks_every_later_byte_until_it_is_retransmitted() {
        let r = analyse(&tcp_trace(Some(2), 60), &KeyLog::default());
        let t = r.tcp.clone().unwrap();
        assert_eq!(t.connections, 1);
        assert_eq!(t.delivered_bytes, 10_000);
        // Segments 3..9 arrived behind the hole.
        assert_eq!(t.blocked_bytes, 7_000);
        assert_eq!(t.episodes_total, 1);
        let ep = &t.episodes[0];
        // From the first byte behind the hole (segment 3 left at 4 + 25 ms) to the fill
        // (retransmission left at 60 + 25 ms).
        assert!((ep.start_ms - 29.0).abs() < 1e-9, "{ep:?}");
        assert!((ep.duration_ms - 56.0).abs() < 1e-9, "{ep:?}");
        assert!(ep.filled);
        assert_eq!(ep.causes.loss, 1);
        assert_eq!(t.drops.loss, 1);
        assert!((r.blocked_ms() - 56.0).abs() < 1e-9);
        assert_eq!(r.unblocked_bytes(), 0);
        assert!(r.quic.is_none());
    }

    #[test]
    fn without_loss_nothing_waits_and_the_last_segment_lost_blocks_nothing() {
        let clean = analyse(&tcp_trace(None, 0), &KeyLog::default())
            .tcp
            .unwrap();
        assert_eq!((clean.blocked_bytes, clean.episodes_total), (0, 0));
        assert_eq!(clean.delivered_bytes, 10_000);
        let last = analyse(&tcp_trace(Some(9), 80), &KeyLog::default())
            .tcp
            .unwrap();
        assert_eq!(last.blocked_bytes, 0, "no byte came after the hole");
        assert_eq!(last.drops.loss, 1);
    }

    /// A QUIC server sends streams 0, 4, 8 interleaved, 1000 bytes per packet (3 packets each);
    /// the first packet of stream 4 is lost and resent after the rest.
    #[test]
    fn a_lost_quic_packet_blocks_its_stream_only_and_the_others_pass_it() {
        let (c, s) = addrs();
        let mut packets = Vec::new();
        let mut frames = Vec::new();
        let mut send = |t: u64, lost: bool, id: u64, k: u64| {
            let data = build::udp(s, c, &[0x40; 1000]);
            let left = (!lost).then_some(t + 25 * MS);
            packets.push(down(data, t, left));
            frames.push(vec![(id, k * 1000, (k + 1) * 1000)]);
        };
        let mut t = 0;
        for k in 0..3 {
            for id in [0, 4, 8] {
                t += MS;
                send(t, id == 4 && k == 0, id, k);
            }
        }
        send(40 * MS, false, 4, 0); // the retransmission
        let trace = PacketTrace {
            start_unix_ns: 0,
            packets,
        };
        let q = quic_streams(&trace, &frames, 100 * MS);
        assert_eq!(q.connections, 1);
        assert_eq!(q.streams, Some(3));
        assert_eq!(q.delivered_bytes, 9_000);
        // Stream 4's later 2000 bytes waited for its first 1000…
        assert_eq!(q.blocked_bytes, 2_000);
        assert_eq!(q.episodes_total, 1);
        assert_eq!(q.episodes[0].stream, Some(4));
        assert_eq!(q.episodes[0].causes.loss, 1);
        // …from its arrival (packet 5 left at 5 + 25 ms) to the retransmission's (40 + 25).
        assert!((q.blocked_ms - 35.0).abs() < 1e-9, "{q:?}");
        assert!((q.blocked_wall_ms - 35.0).abs() < 1e-9, "{q:?}");
        // Streams 0 and 8 delivered everything sent after the loss (6 packets) past it.
        assert_eq!(q.unblocked_bytes, 6_000);
        assert_eq!((q.drops.loss, q.dropped_data_packets), (1, 1));
    }

    #[test]
    fn the_wall_time_counts_overlapping_waits_once() {
        let mut t = Tally::default();
        let mut s = Stream::default();
        for (a, b) in [(0, 10), (5, 20), (30, 40)] {
            let ep = Episode {
                hole_at: 0,
                start_ns: a * MS,
                end_ns: b * MS,
                filled: true,
                blocked_bytes: 1,
            };
            t.closed("f".into(), Some(a), ep, &mut s);
        }
        let side = t.finish();
        assert!((side.blocked_ms - 35.0).abs() < 1e-9);
        assert!((side.blocked_wall_ms - 30.0).abs() < 1e-9);
        assert_eq!(side.episodes_total, 3);
    }

    #[test]
    fn a_hole_never_filled_waits_until_the_trace_ends() {
        let mut trace = tcp_trace(Some(5), 0);
        trace.packets.pop(); // the retransmission never came
        let t = analyse(&trace, &KeyLog::default()).tcp.unwrap();
        assert_eq!(t.blocked_bytes, 4_000);
        let ep = &t.episodes[0];
        assert!(!ep.filled);
        // Until the last packet the trace has (segment 9 left at 10 + 25 ms).
        assert!((ep.duration_ms - (35.0 - 32.0)).abs() < 1e-9, "{ep:?}");
    }
}
