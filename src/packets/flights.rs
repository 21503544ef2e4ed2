//! Flights: the rounds of round trips a server sends its data in (pure).
//!
//! The rule, the same for TCP and QUIC, for bursty senders and paced ones: a server's data
//! packet belongs to round k + 1 of its connection when a packet of round k was acknowledged
//! before it was sent — the client sent a packet on the connection after that one reached it
//! (every TCP segment and every QUIC packet of the client can carry the acknowledgement), and
//! that packet reached the server before this one left; otherwise to the latest round it can
//! follow. Acknowledgements are the client's real packets, so a delayed acknowledgement delays
//! the round as it did the sender. Slow start's bursts (the initial window, then about twice as much each round) are
//! one round each; a paced sender (quinn spreads each window over the round trip) has as many
//! rounds as round trips it spans; a response multiplexed with others on one connection counts
//! the rounds its own packets fall in. A response's *flights* are the rounds its bytes came in
//! (a round that turns over within half a round trip of the current one's start is an older
//! packet's late acknowledgement, not one: [`Sends::window`]). On a link whose rate holds the sender back, a continuous transfer spans one round per round
//! trip too; the accounting counts those round trips as the bytes' time at the rate instead
//! (`evidence::round_trips`). A data packet is a TCP segment with payload, or a QUIC datagram
//! larger than an acknowledgement ([`QUIC_ACK_MAX`] bytes of UDP payload). When a packet was
//! sent is when it entered the link (the server's namespace hands it over at once); when it
//! arrived, when the link released it to the client.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddrV4;

use super::packet::{self, Transport};
use crate::link::{Direction, PacketTrace};

/// A QUIC datagram of at most this many bytes of UDP payload carries acknowledgements (and
/// perhaps a few bytes of control frames), not a response's data: a short header, an ACK frame
/// and the AEAD tag come to 30–60 bytes; a data packet of a response is near the path MTU.
pub const QUIC_ACK_MAX: usize = 100;

/// A response's bytes count as arriving in its window this close after it (the browser stamps
/// responseEnd a little after the last packet's arrival).
pub const ARRIVAL_SLACK_NS: u64 = 2_000_000;

/// …and up to this long before it: the browser learns of a response's headers some
/// milliseconds after their packet arrived (its network service hands them on), a quarter of
/// the round trip at most, so that a round a whole round trip earlier stays out.
pub fn lead_slack_ns(rtt_ns: u64) -> u64 {
    (rtt_ns / 4).clamp(ARRIVAL_SLACK_NS, 10_000_000)
}

/// One connection's data packets from the server, in the order they were sent.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSends {
    pub server: SocketAddrV4,
    pub client: SocketAddrV4,
    pub quic: bool,
    /// When each data packet entered the link, ns on the trace's clock, ascending.
    pub sent_ns: Vec<u64>,
    /// When each reached the client (None: the link dropped it).
    pub arrived_ns: Vec<Option<u64>>,
    /// Each one's payload (TCP) or datagram payload (QUIC), bytes.
    pub bytes: Vec<u32>,
    /// Each one's round (1: the first).
    pub rounds: Vec<u32>,
}

/// What a connection delivered while one response's bytes arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The rounds its packets fell in.
    pub flights: u32,
    /// The payload bytes the connection delivered (every response's).
    pub bytes: u64,
}

/// One packet of the client on a connection: when it left the client and when it reached the
/// server, ns on the trace's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    pub sent_ns: u64,
    pub arrived_ns: u64,
}

/// Every connection's server data packets of one run, and when the client sent its first
/// packet (what puts the browser's clock on the trace's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sends {
    pub flows: Vec<FlowSends>,
    /// The first packet from the client, ns on the trace's clock (None: the client sent none).
    pub first_client_ns: Option<u64>,
    /// Every packet the link delivered to the client (any connection's, acknowledgements too):
    /// when it arrived, ns on the trace's clock, and its IP bytes (what keeps the bottleneck
    /// busy: [`super::link_busy`]).
    pub down_arrivals: Vec<(u64, u32)>,
}

/// A connection: the server's address, the client's, QUIC or TCP.
type FlowKey = (SocketAddrV4, SocketAddrV4, bool);

/// The server's data packets of every connection in `trace`, with their rounds.
pub fn server_sends(trace: &PacketTrace) -> Sends {
    type Packets = (Vec<u64>, Vec<Option<u64>>, Vec<u32>);
    let mut flows: BTreeMap<FlowKey, Packets> = BTreeMap::new();
    let mut acks: BTreeMap<FlowKey, Vec<Ack>> = BTreeMap::new();
    let mut first_client_ns = None;
    let mut down_arrivals = Vec::new();
    for i in trace.sent_order() {
        let p = &trace.packets[i];
        if let (Direction::Down, Some(at)) = (p.dir, p.left_ns) {
            down_arrivals.push((at, p.data.len() as u32));
        }
        let Some(parsed) = packet::parse(&p.data) else {
            continue;
        };
        let quic = matches!(parsed.transport, Transport::Udp { .. });
        if p.dir == Direction::Up {
            first_client_ns.get_or_insert(p.entered_ns);
            if let Some(arrived_ns) = p.left_ns {
                acks.entry((parsed.dst, parsed.src, quic))
                    .or_default()
                    .push(Ack {
                        sent_ns: p.entered_ns,
                        arrived_ns,
                    });
            }
            continue;
        }
        let (data, len) = match parsed.transport {
            Transport::Tcp { payload, .. } => (!payload.is_empty(), payload.len()),
            Transport::Udp { payload } => (payload.len() > QUIC_ACK_MAX, payload.len()),
        };
        if data {
            let f = flows.entry((parsed.src, parsed.dst, quic)).or_default();
            f.0.push(p.entered_ns);
            f.1.push(p.left_ns);
            f.2.push(len as u32);
        }
    }
    Sends {
        flows: flows
            .into_iter()
            .map(|(key, (sent_ns, arrived_ns, bytes))| {
                let acks = acks.remove(&key).unwrap_or_default();
                let (server, client, quic) = key;
                FlowSends {
                    rounds: rounds(&sent_ns, &arrived_ns, &acks),
                    server,
                    client,
                    quic,
                    sent_ns,
                    arrived_ns,
                    bytes,
                }
            })
            .collect(),
        first_client_ns,
        down_arrivals,
    }
}

/// Each packet's round, for packets sent at `sent_ns` (ascending) that reached the client at
/// `arrived_ns`, given the client's packets `acks` on the connection (the module's rule).
pub fn rounds(sent_ns: &[u64], arrived_ns: &[Option<u64>], acks: &[Ack]) -> Vec<u32> {
    let mut by_arrival: Vec<Ack> = acks.to_vec();
    by_arrival.sort_by_key(|a| (a.arrived_ns, a.sent_ns));
    let mut next_ack = 0;
    // What reached the client, soonest first, with its round; the latest round the client had
    // received when it sent an acknowledgement; the latest round acknowledged at the server.
    let mut reached: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let (mut received, mut acked) = (0, 0);
    let mut out = Vec::with_capacity(sent_ns.len());
    for (i, &sent) in sent_ns.iter().enumerate() {
        while next_ack < by_arrival.len() && by_arrival[next_ack].arrived_ns <= sent {
            let ack = by_arrival[next_ack];
            while let Some(Reverse((at, round))) = reached.peek().copied() {
                if at > ack.sent_ns {
                    break;
                }
                received = received.max(round);
                reached.pop();
            }
            acked = acked.max(received);
            next_ack += 1;
        }
        let round = acked + 1;
        out.push(round);
        if let Some(a) = arrived_ns[i] {
            reached.push(Reverse((a, round)));
        }
    }
    out
}

impl FlowSends {
    /// The rounds `packets` (indices, in send order) span. A window's next round follows an
    /// acknowledgement of its current one, so it leaves about a round trip after that round's
    /// first packet at the soonest; a round that turns over within half a round trip of it
    /// was opened by the acknowledgement of older bytes (sent before the window, and acked
    /// late) and costs the window no round trip.
    fn flights_of(&self, packets: &[usize], rtt_ns: u64) -> u32 {
        let mut flights = 0;
        let mut current: Option<(u32, u64)> = None;
        for &i in packets {
            let (round, sent) = (self.rounds[i], self.sent_ns[i]);
            match current {
                None => (flights, current) = (1, Some((round, sent))),
                Some((r, start)) if round > r && sent >= start + rtt_ns / 2 => {
                    flights += round - r;
                    current = Some((round, sent));
                }
                Some((r, start)) if round > r => current = Some((round, start)),
                Some(_) => {}
            }
        }
        flights
    }

    /// Its packets that reached the client in `[from_ns − lead, to_ns + ARRIVAL_SLACK_NS]`,
    /// by index.
    fn arrived_in(&self, from_ns: u64, to_ns: u64, lead: u64) -> impl Iterator<Item = usize> + '_ {
        let (from, to) = (from_ns.saturating_sub(lead), to_ns + ARRIVAL_SLACK_NS);
        (0..self.sent_ns.len())
            .filter(move |&i| self.arrived_ns[i].is_some_and(|a| (from..=to).contains(&a)))
    }
}

impl Sends {
    /// What reached the client in `[from_ns, to_ns]` (trace clock, with the slack of a
    /// browser's stamps on a link of `rtt_ns`) on the connection whose data packets arrived
    /// most in that window: the rounds they fell in and their bytes; None when none did.
    pub fn window(&self, from_ns: u64, to_ns: u64, rtt_ns: u64) -> Option<Window> {
        let lead = lead_slack_ns(rtt_ns);
        let busiest = self
            .flows
            .iter()
            .map(|f| (f.arrived_in(from_ns, to_ns, lead).count(), f))
            .filter(|(n, _)| *n > 0)
            .max_by_key(|(n, _)| *n)?
            .1;
        let packets: Vec<usize> = busiest.arrived_in(from_ns, to_ns, lead).collect();
        Some(Window {
            flights: busiest.flights_of(&packets, rtt_ns),
            bytes: packets.iter().map(|&i| u64::from(busiest.bytes[i])).sum(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::TracedPacket;
    use crate::packets::packet::build;

    const MS: u64 = 1_000_000;

    fn addr(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    /// A packet sent at `at_ms` that the link delivers 20 ms later.
    fn packet(dir: Direction, at_ms: u64, data: Vec<u8>) -> TracedPacket {
        TracedPacket {
            dir,
            entered_ns: at_ms * MS,
            left_ns: Some(at_ms * MS + 20 * MS),
            dropped: None,
            data,
        }
    }

    /// Slow start on an idle 40 ms link: bursts of 10, 20 and 40 segments, each sent when the
    /// client's acknowledgement of the one before (sent as its last segment arrived) is back.
    fn slow_start() -> PacketTrace {
        let (srv, cli) = (addr("10.0.0.2:443"), addr("10.0.0.1:5000"));
        let mut packets = vec![packet(Direction::Up, 0, build::tcp(cli, srv, 1, 0x02, 0))];
        // The server's SYN-ACK carries no payload: not data.
        let syn_ack = build::tcp(srv, cli, 1, 0x12, 0);
        packets.push(packet(Direction::Down, 20, syn_ack));
        packets.push(packet(Direction::Up, 40, build::tcp(cli, srv, 2, 0x10, 0)));
        let mut t = 60;
        for burst in [10u64, 20, 40] {
            for i in 0..burst {
                let segment = build::tcp(srv, cli, 2, 0x10, 1448);
                packets.push(packet(Direction::Down, t + i / 4, segment));
            }
            let last = t + (burst - 1) / 4;
            let ack = build::tcp(cli, srv, 3, 0x10, 0);
            packets.push(packet(Direction::Up, last + 20, ack));
            t = last + 40;
        }
        PacketTrace {
            start_unix_ns: 0,
            packets,
        }
    }

    #[test]
    fn slow_start_bursts_are_three_rounds() {
        let s = server_sends(&slow_start());
        assert_eq!(s.first_client_ns, Some(0));
        assert_eq!(s.flows.len(), 1);
        let f = &s.flows[0];
        assert_eq!(f.sent_ns.len(), 70);
        let count = |r: u32| f.rounds.iter().filter(|x| **x == r).count();
        assert_eq!(
            (count(1), count(2), count(3)),
            (10, 20, 40),
            "{:?}",
            f.rounds
        );
        // The rounds arrive at 80–82, 122–126 and 166–175 ms: from 80 to 200 ms all three;
        // from 170 ms on, the last.
        let rtt = 40 * MS;
        let flights = |from: u64, to: u64| s.window(from * MS, to * MS, rtt).map(|w| w.flights);
        assert_eq!(flights(80, 200), Some(3));
        assert_eq!(flights(170, 200), Some(1));
        // Stamped 8 ms after the last round's first packets arrived: still that round alone.
        assert_eq!(flights(168, 200), Some(1));
        assert_eq!(flights(0, 50), None);
        assert_eq!(s.window(80 * MS, 200 * MS, rtt).unwrap().bytes, 70 * 1448);
        assert_eq!(lead_slack_ns(rtt), 10 * MS);
        assert_eq!(lead_slack_ns(4 * MS), ARRIVAL_SLACK_NS);
    }

    #[test]
    fn a_paced_sender_has_a_round_per_round_trip_it_spans() {
        // One packet every 2 ms for 100 ms over a 40 ms link (20 ms each way), each acknowledged
        // at once: a packet sent 40 ms after another could follow that one's acknowledgement.
        let sent: Vec<u64> = (0..50).map(|i| i * 2 * MS).collect();
        let arrived: Vec<Option<u64>> = sent.iter().map(|t| Some(t + 20 * MS)).collect();
        let acks: Vec<Ack> = sent
            .iter()
            .map(|t| Ack {
                sent_ns: t + 20 * MS,
                arrived_ns: t + 40 * MS,
            })
            .collect();
        let r = rounds(&sent, &arrived, &acks);
        assert_eq!(r[0], 1);
        assert_eq!(r[19], 1, "sent at 38 ms: no acknowledgement back yet");
        assert_eq!(
            r[20], 2,
            "sent at 40 ms: the first packet's acknowledgement is back"
        );
        assert_eq!(*r.last().unwrap(), 3);
        // A dropped packet is never acknowledged: it starts no round.
        let mut lost = arrived.clone();
        lost[0] = None;
        assert_eq!(rounds(&sent, &lost, &acks)[20], 1);
        // Acknowledgements the client delayed by 25 ms delay the rounds as much.
        let delayed: Vec<Ack> = acks
            .iter()
            .map(|a| Ack {
                sent_ns: a.sent_ns + 25 * MS,
                arrived_ns: a.arrived_ns + 25 * MS,
            })
            .collect();
        let r = rounds(&sent, &arrived, &delayed);
        assert_eq!((r[32], r[33]), (1, 2), "sent at 64 and 66 ms");
        // Without acknowledgements nothing follows a round: one round.
        assert!(rounds(&sent, &arrived, &[]).iter().all(|x| *x == 1));
    }

    #[test]
    fn a_round_that_turns_over_within_a_response_costs_it_no_round_trip() {
        // A packet at 0 ms, acknowledged late: its acknowledgement reaches the server at 100.5
        // ms, between the two packets of a response sent at 100 and 101 ms.
        let sent = [0, 100 * MS, 101 * MS];
        let arrived: Vec<Option<u64>> = sent.iter().map(|t| Some(t + 20 * MS)).collect();
        let acks = [Ack {
            sent_ns: 60 * MS,
            arrived_ns: 100 * MS + MS / 2,
        }];
        let flow = FlowSends {
            server: addr("10.0.0.2:443"),
            client: addr("10.0.0.1:5000"),
            quic: true,
            rounds: rounds(&sent, &arrived, &acks),
            sent_ns: sent.to_vec(),
            arrived_ns: arrived,
            bytes: vec![1200; 3],
        };
        assert_eq!(flow.rounds, [1, 1, 2], "the rule, as it is");
        let s = Sends {
            flows: vec![flow],
            first_client_ns: Some(0),
            down_arrivals: Vec::new(),
        };
        let w = s.window(120 * MS, 121 * MS, 40 * MS).unwrap();
        assert_eq!(
            (w.flights, w.bytes),
            (1, 2400),
            "one flight of the response"
        );
    }

    #[test]
    fn quic_acks_are_not_data_and_each_flow_is_its_own() {
        let (srv, cli) = (addr("10.0.0.2:443"), addr("10.0.0.1:5000"));
        let other = addr("10.0.0.1:5001");
        let packets = vec![
            packet(Direction::Up, 0, build::udp(cli, srv, &[0; 1200])),
            packet(Direction::Down, 20, build::udp(srv, cli, &[0; 40])),
            packet(Direction::Down, 21, build::udp(srv, cli, &[0; 1200])),
            packet(Direction::Down, 22, build::udp(srv, other, &[0; 1200])),
        ];
        let s = server_sends(&PacketTrace {
            start_unix_ns: 0,
            packets,
        });
        assert_eq!(s.flows.len(), 2);
        assert!(s.flows.iter().all(|f| f.quic && f.sent_ns.len() == 1));
        assert!(s
            .flows
            .iter()
            .all(|f| f.arrived_ns == [Some(f.sent_ns[0] + 20 * MS)] && f.rounds == [1]));
    }
}
