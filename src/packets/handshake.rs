//! Every connection's TLS handshake of a load, read from the link's packets (pure): whether it
//! resumed a session, whether early data was offered and accepted, and which requests went out
//! in 0-RTT, before the handshake completed. It is the wire's word, so it holds for any server
//! and any browser: TCP from the plaintext ClientHello and ServerHello, QUIC from the Initial
//! and Handshake CRYPTO streams decrypted with the key log.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};

use super::packet::{self, Transport};
use super::quic::{Frame, KeyLog, PacketKind, QuicFlow, Sender};
use super::reassembly::Prefix;
use super::tls;
use crate::link::{Direction, DropCause, PacketTrace};

/// The transport a connection ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Carrier {
    Tcp,
    Quic,
}

/// One connection's handshake.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionHandshake {
    pub transport: Carrier,
    /// `client ip:port → server ip:port`.
    pub flow: String,
    /// When its first packet entered the link, ms from the start of the measured load.
    pub start_ms: f64,
    /// The server resumed a session (None: no ServerHello seen).
    pub resumed: Option<bool>,
    /// The client announced early data (0-RTT) in its ClientHello.
    pub early_data_offered: bool,
    /// The server accepted it (QUIC: its EncryptedExtensions says so; None for TLS over TCP,
    /// whose EncryptedExtensions is encrypted, or when it was not seen).
    pub early_data_accepted: Option<bool>,
    /// QUIC packets the client sent as 0-RTT, and the request streams they carried data of:
    /// requests sent before the handshake completed.
    pub zero_rtt_packets: u32,
    pub early_requests: u32,
    /// The server's own key log has a resumption secret (`CLIENT_EARLY_TRAFFIC_SECRET`, which
    /// rustls derives on every resumption) for this ClientHello. None: the server keeps no key
    /// log (reference servers), or a TCP connection (its ClientHello random is not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_says_resumed: Option<bool>,
}

/// The handshakes of one load, and their tally.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Handshakes {
    pub connections: Vec<ConnectionHandshake>,
}

impl Handshakes {
    /// Connections whose handshake resumed a session.
    pub fn resumed(&self) -> usize {
        self.connections
            .iter()
            .filter(|c| c.resumed == Some(true))
            .count()
    }

    /// Connections whose early data the server accepted.
    pub fn zero_rtt_accepted(&self) -> usize {
        self.connections
            .iter()
            .filter(|c| c.early_data_accepted == Some(true))
            .count()
    }

    /// Requests sent in 0-RTT, over all connections.
    pub fn early_requests(&self) -> usize {
        self.connections
            .iter()
            .map(|c| c.early_requests as usize)
            .sum()
    }
}

/// The handshakes in `trace`. `keys` decrypts QUIC (browser and server secrets together);
/// `server_keys` is the server's own key log alone (empty: it keeps none).
pub fn analyse(trace: &PacketTrace, keys: &KeyLog, server_keys: &KeyLog) -> Handshakes {
    let (tcp, quic) = flows(trace, keys);
    let mut connections = tcp_handshakes(tcp);
    connections.extend(quic_handshakes(quic, server_keys));
    connections.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    Handshakes { connections }
}

/// Flows by `(client, server)` address.
type Flows<T> = BTreeMap<(SocketAddrV4, SocketAddrV4), T>;

/// Every TCP and QUIC connection of `trace`, its packets in the order they were sent: each TCP
/// direction's first bytes, each QUIC flow decoded with `keys` (its 0-RTT packets counted).
fn flows(trace: &PacketTrace, keys: &KeyLog) -> (Flows<TcpFlow>, Flows<QuicConn>) {
    let sent = trace.sent_order();
    let mut tcp: Flows<TcpFlow> = BTreeMap::new();
    let mut quic: Flows<QuicConn> = BTreeMap::new();
    for &i in &sent {
        let p = &trace.packets[i];
        if p.dropped == Some(DropCause::NotForPeer) {
            continue;
        }
        let Some(parsed) = packet::parse(&p.data) else {
            continue;
        };
        let (client, server) = match p.dir {
            Direction::Up => (parsed.src, parsed.dst),
            Direction::Down => (parsed.dst, parsed.src),
        };
        let up = p.dir == Direction::Up;
        match parsed.transport {
            Transport::Tcp {
                seq, syn, payload, ..
            } => {
                let flow = tcp.entry((client, server)).or_insert_with(|| TcpFlow {
                    start_ns: p.entered_ns,
                    dirs: Default::default(),
                });
                let d = &mut flow.dirs[usize::from(!up)];
                let base = *d
                    .base
                    .get_or_insert(if syn { seq.wrapping_add(1) } else { seq });
                if !payload.is_empty() {
                    d.bytes.insert(u64::from(seq.wrapping_sub(base)), payload);
                }
            }
            Transport::Udp { payload } => {
                let conn = quic.entry((client, server)).or_insert_with(|| QuicConn {
                    start_ns: p.entered_ns,
                    flow: QuicFlow::new(),
                    zero_rtt_packets: 0,
                    early_streams: BTreeSet::new(),
                });
                let from = if up { Sender::Client } else { Sender::Server };
                for q in conn.flow.feed(from, payload, keys) {
                    if q.kind != PacketKind::ZeroRtt || q.undecryptable.is_some() {
                        continue;
                    }
                    conn.zero_rtt_packets += 1;
                    for f in &q.frames {
                        // Client-initiated bidirectional streams are HTTP/3's requests.
                        if let Frame::Stream { id, .. } = f {
                            if id % 4 == 0 {
                                conn.early_streams.insert(*id);
                            }
                        }
                    }
                }
            }
        }
    }
    (tcp, quic)
}

/// Milliseconds from nanoseconds.
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The TLS handshake of each TCP connection that carried one.
fn tcp_handshakes(tcp: Flows<TcpFlow>) -> Vec<ConnectionHandshake> {
    let mut connections = Vec::new();
    for ((client, server), f) in tcp {
        let [c, s] = f.dirs.map(|d| tls::handshake_stream(d.bytes.contiguous()));
        let facts = tls::facts(&c, &s, &[]);
        // A connection that never carried TLS (none here) is not a handshake.
        if facts.resumed.is_none() && c.is_empty() {
            continue;
        }
        connections.push(ConnectionHandshake {
            transport: Carrier::Tcp,
            flow: format!("{client} → {server}"),
            start_ms: ms(f.start_ns),
            resumed: facts.resumed,
            early_data_offered: facts.client_offered_early_data,
            early_data_accepted: facts.early_data_accepted,
            zero_rtt_packets: 0,
            early_requests: 0,
            server_says_resumed: None,
        });
    }
    connections
}

/// The handshake of each QUIC connection; `server_keys` tells whether the server says it
/// resumed.
fn quic_handshakes(quic: Flows<QuicConn>, server_keys: &KeyLog) -> Vec<ConnectionHandshake> {
    let mut connections = Vec::new();
    for ((client, server), q) in quic {
        let facts = q.flow.handshake();
        let server_says_resumed = q
            .flow
            .client_random()
            .filter(|_| !server_keys.is_empty())
            .map(|random| server_keys.has(&random, "CLIENT_EARLY_TRAFFIC_SECRET"));
        connections.push(ConnectionHandshake {
            transport: Carrier::Quic,
            flow: format!("{client} → {server}"),
            start_ms: ms(q.start_ns),
            resumed: facts.resumed,
            early_data_offered: facts.client_offered_early_data,
            early_data_accepted: facts.early_data_accepted,
            zero_rtt_packets: q.zero_rtt_packets,
            early_requests: q.early_streams.len() as u32,
            server_says_resumed,
        });
    }
    connections
}

/// Both directions of a TCP connection: where each stream starts, its first bytes.
struct TcpFlow {
    start_ns: u64,
    /// Client → server, then server → client.
    dirs: [TcpDirection; 2],
}

#[derive(Default)]
struct TcpDirection {
    base: Option<u32>,
    bytes: Prefix,
}

struct QuicConn {
    start_ns: u64,
    flow: QuicFlow,
    zero_rtt_packets: u32,
    early_streams: BTreeSet<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::trace::TracedPacket;
    use crate::packets::packet::build;
    use crate::packets::tls::tests::{client_hello_with, server_hello_with};

    fn record(payload: &[u8]) -> Vec<u8> {
        let mut r = vec![22, 3, 3];
        r.extend((payload.len() as u16).to_be_bytes());
        r.extend(payload);
        r
    }

    fn tcp_packet(dir: Direction, at_ms: u64, seq: u32, flags: u8, data: &[u8]) -> TracedPacket {
        let c: SocketAddrV4 = "10.0.0.1:40000".parse().unwrap();
        let s: SocketAddrV4 = "10.0.0.2:443".parse().unwrap();
        let (src, dst) = match dir {
            Direction::Up => (c, s),
            Direction::Down => (s, c),
        };
        let mut p = build::tcp(src, dst, seq, flags, 0);
        p.extend(data);
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        TracedPacket {
            dir,
            entered_ns: at_ms * 1_000_000,
            left_ns: Some(at_ms * 1_000_000 + 20_000_000),
            dropped: None,
            data: p,
        }
    }

    /// A TLS 1.3 connection whose ServerHello took `psk`: its SYN, its ClientHello split over
    /// two segments that arrive out of order, the ServerHello.
    fn tls_connection(psk: bool) -> PacketTrace {
        let ch = record(&client_hello_with(&[1; 32], &[43, 41]));
        let sh = record(&server_hello_with(
            &[1; 32],
            if psk { &[43, 41] } else { &[43] },
        ));
        let (syn, ack) = (0x02, 0x10);
        PacketTrace {
            start_unix_ns: 0,
            packets: vec![
                tcp_packet(Direction::Up, 0, 999, syn, &[]),
                tcp_packet(Direction::Down, 20, 4999, syn | ack, &[]),
                tcp_packet(Direction::Up, 41, 1000 + 20, ack, &ch[20..]),
                tcp_packet(Direction::Up, 40, 1000, ack, &ch[..20]),
                tcp_packet(Direction::Down, 60, 5000, ack, &sh),
            ],
        }
    }

    #[test]
    fn tcp_handshakes_are_read_from_the_plaintext_hellos() {
        let none = KeyLog::default();
        for psk in [true, false] {
            let h = analyse(&tls_connection(psk), &none, &none);
            assert_eq!(h.connections.len(), 1);
            let c = &h.connections[0];
            assert_eq!(c.transport, Carrier::Tcp);
            assert_eq!(c.flow, "10.0.0.1:40000 → 10.0.0.2:443");
            assert_eq!(c.resumed, Some(psk));
            assert!(!c.early_data_offered);
            assert_eq!((c.early_data_accepted, c.server_says_resumed), (None, None));
            assert_eq!(h.resumed(), usize::from(psk));
        }
    }
}

#[cfg(test)]
mod quic_tests {
    use super::*;
    use crate::link::trace::TracedPacket;
    use crate::packets::packet::build;
    use crate::packets::quic::tests::{Harness, Options};

    /// quinn's datagrams of the harness as the link's packets, 1 ms apart.
    fn trace(h: &Harness) -> PacketTrace {
        let c: SocketAddrV4 = "10.0.0.1:50000".parse().unwrap();
        let s: SocketAddrV4 = "10.0.0.2:443".parse().unwrap();
        let packets = h
            .record
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let (dir, src, dst) = match d.from {
                    Sender::Client => (Direction::Up, c, s),
                    Sender::Server => (Direction::Down, s, c),
                };
                TracedPacket {
                    dir,
                    entered_ns: i as u64 * 1_000_000,
                    left_ns: (!d.dropped).then_some(i as u64 * 1_000_000 + 500_000),
                    dropped: d.dropped.then_some(DropCause::Loss),
                    data: build::udp(src, dst, &d.bytes),
                }
            })
            .collect();
        PacketTrace {
            start_unix_ns: 0,
            packets,
        }
    }

    #[test]
    fn a_full_handshake_then_a_resumed_one_with_its_requests_in_0rtt() {
        let mut h = Harness::new(Options::default());
        h.run();
        let keys = KeyLog::parse(&h.key_log.text()).unwrap();
        let first = analyse(&trace(&h), &keys, &keys);
        assert_eq!(first.connections.len(), 1);
        let c = &first.connections[0];
        assert_eq!(c.transport, Carrier::Quic);
        assert_eq!(
            (c.resumed, c.early_data_accepted),
            (Some(false), Some(false))
        );
        assert_eq!((c.zero_rtt_packets, c.early_requests), (0, 0));
        assert_eq!(c.server_says_resumed, Some(false));
        h.reconnect();
        h.run();
        let keys = KeyLog::parse(&h.key_log.text()).unwrap();
        let again = analyse(&trace(&h), &keys, &keys);
        let c = &again.connections[0];
        assert_eq!((c.resumed, c.early_data_accepted), (Some(true), Some(true)));
        assert!(c.early_data_offered && c.zero_rtt_packets > 0);
        // The harness's first round of 3 requests went out in 0-RTT.
        assert_eq!(c.early_requests, 3);
        assert_eq!(c.server_says_resumed, Some(true));
        assert_eq!(
            (
                again.resumed(),
                again.zero_rtt_accepted(),
                again.early_requests()
            ),
            (1, 1, 3)
        );
        // Without the server's own key log the server's view is unknown, not "no".
        let none = analyse(&trace(&h), &keys, &KeyLog::default());
        assert_eq!(none.connections[0].server_says_resumed, None);
    }
}
