//! HTTP/3 over QUIC v1: each connection's packets decrypted, its streams' bytes gathered from
//! their STREAM frames, the client's request streams and control stream and the server's
//! response streams read.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use super::super::h3_frames::{self, Event, CONTROL_STREAM};
use super::super::packet::{self, Transport};
use super::super::qpack;
use super::super::quic::{KeyLog, QuicFlow, Sender};
use super::super::wire_bytes::WireBytes;
use super::wire_streams::{finish, ms, Draft, Found, WireConnection, WireProtocol};
use crate::link::{Direction, DropCause, PacketTrace};

struct Connection {
    opened_ns: u64,
    flow: QuicFlow,
    /// Each sender's streams (client: false, server: true), by id.
    streams: BTreeMap<(bool, u64), WireBytes>,
    undecrypted: u64,
}

type Key = (SocketAddrV4, SocketAddrV4);

/// Every QUIC connection's streams: first transmissions in the order sent (a retransmission
/// repeats an offset in a new packet: it counts once), arrivals in the order received.
fn gather(trace: &PacketTrace, keys: &KeyLog) -> BTreeMap<Key, Connection> {
    let mut conns: BTreeMap<Key, Connection> = BTreeMap::new();
    let mut arrivals = Vec::new();
    for i in trace.sent_order() {
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
        let (key, from) = match p.dir {
            Direction::Up => ((parsed.src, parsed.dst), Sender::Client),
            Direction::Down => ((parsed.dst, parsed.src), Sender::Server),
        };
        let conn = conns.entry(key).or_insert_with(|| Connection {
            opened_ns: p.entered_ns,
            flow: QuicFlow::with_stream_data(),
            streams: BTreeMap::new(),
            undecrypted: 0,
        });
        let server = from == Sender::Server;
        for q in conn.flow.feed(from, payload, keys) {
            conn.undecrypted += u64::from(q.undecryptable.is_some());
            for c in q.stream_data {
                let bytes = conn.streams.entry((server, c.id)).or_default();
                bytes.sent(c.offset, &c.data, p.entered_ns);
                if let Some(left) = p.left_ns {
                    let end = c.offset.saturating_add(c.data.len() as u64);
                    arrivals.push((left, key, server, c.id, c.offset, end));
                }
            }
        }
    }
    arrivals.sort_by_key(|a| a.0);
    for (at, key, server, id, start, end) in arrivals {
        if let Some(b) = conns
            .get_mut(&key)
            .and_then(|c| c.streams.get_mut(&(server, id)))
        {
            b.arrived(start, end, at);
        }
    }
    conns
}

/// Reads every QUIC connection of `trace` into `found`.
pub(super) fn analyse(trace: &PacketTrace, keys: &KeyLog, found: &mut Found) {
    for ((client, server), conn) in gather(trace, keys) {
        if conn.undecrypted > 0 {
            let what = format!(
                "{} QUIC packets not decrypted: their stream data is not read",
                conn.undecrypted
            );
            found.problem(client, server, &what);
        }
        let mut drafts = BTreeMap::new();
        for ((from_server, id), bytes) in &conn.streams {
            match (from_server, id % 4) {
                (false, 0) => request(*id, bytes, &mut drafts),
                (false, 2) => control(bytes, &mut drafts),
                (true, 0) => response(*id, bytes, &mut drafts),
                _ => {}
            }
        }
        if !drafts.is_empty() {
            found.connections.push(WireConnection {
                protocol: WireProtocol::H3,
                client,
                server,
                opened_ms: ms(conn.opened_ns),
                streams: finish(drafts),
            });
        }
    }
}

/// When the stream byte before `end` was first sent, and when the receiver could read it.
fn times(bytes: &WireBytes, end: u64) -> (Option<u64>, Option<u64>) {
    let last = end.saturating_sub(1);
    (bytes.sent_at(last), bytes.readable_at(last))
}

/// A client's request stream: its first HEADERS frame is the request.
fn request(id: u64, bytes: &WireBytes, drafts: &mut BTreeMap<u64, Draft>) {
    let data = bytes.contiguous();
    let first = h3_frames::events(&data, 0)
        .into_iter()
        .find_map(|e| match e {
            Event::Headers { section, end } => Some((section, end)),
            _ => None,
        });
    if let Some((section, end)) = first {
        let fields = qpack::decode(&section).map_err(|e| format!("QPACK: {e}"));
        let (sent, read) = times(bytes, end);
        drafts.entry(id).or_default().request(fields, sent, read);
    }
}

/// A client's unidirectional stream: if it is the control stream, its PRIORITY_UPDATEs.
fn control(bytes: &WireBytes, drafts: &mut BTreeMap<u64, Draft>) {
    let data = bytes.contiguous();
    let mut pos = 0;
    if h3_frames::varint(&data, &mut pos) != Some(CONTROL_STREAM) {
        return;
    }
    for e in h3_frames::events(&data, pos) {
        if let Event::PriorityUpdate {
            element,
            push: false,
            value,
            end,
        } = e
        {
            let (sent, read) = times(bytes, end);
            if let Some(sent) = sent {
                drafts
                    .entry(element)
                    .or_default()
                    .updates
                    .push((sent, read, value));
            }
        }
    }
}

/// A server's response stream: its status and DATA bytes.
fn response(id: u64, bytes: &WireBytes, drafts: &mut BTreeMap<u64, Draft>) {
    let data = bytes.contiguous();
    let draft = drafts.entry(id).or_default();
    for e in h3_frames::events(&data, 0) {
        match e {
            Event::Headers { section, .. } => {
                if let Ok(fields) = qpack::decode(&section) {
                    draft.response(&fields);
                }
            }
            Event::Data { payload } => draft
                .sends
                .extend(bytes.first_sent(payload.start, payload.end)),
            Event::PriorityUpdate { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::h3_frames::build::{frame, priority_update, varint};
    use super::super::super::packet::build::udp;
    use super::super::super::qpack::encode::{
        indexed, with_literal_name, with_name_ref, NO_DYNAMIC,
    };
    use super::super::super::quic::tests::seal::{crypto_frame, initial, short, stream_frame};
    use super::super::super::quic::Sender;
    use super::super::fixture::*;
    use super::super::{analyse as read_trace, PriorityUpdate, WireProtocol};
    use crate::link::{PacketTrace, TracedPacket};

    const ODCID: [u8; 8] = [1; 8];
    const CLIENT_CID: [u8; 8] = [2; 8];
    const SERVER_CID: [u8; 8] = [3; 8];
    const CLIENT_SECRET: [u8; 32] = [0x11; 32];
    const SERVER_SECRET: [u8; 32] = [0x22; 32];

    fn datagram(up: bool, at: f64, delay: Option<f64>, payload: Vec<u8>) -> TracedPacket {
        let (c, s) = addrs(50000);
        let data = if up {
            udp(c, s, &payload)
        } else {
            udp(s, c, &payload)
        };
        on_link(up, at, delay, data)
    }

    fn request(path: &str, priority: &str) -> Vec<u8> {
        let mut s = NO_DYNAMIC.to_vec();
        s.extend(indexed(17)); // :method GET
        s.extend(indexed(23)); // :scheme https
        s.extend(with_name_ref(0, "example.test", true));
        s.extend(with_name_ref(1, path, false));
        s.extend(with_literal_name("priority", priority));
        frame(0x01, &s)
    }

    /// The client: its Initial, then its control stream and three requests in 1-RTT packets.
    /// Stream 4's request is cut across two packets, the first arriving last (at 20 ms).
    fn client_packets() -> Vec<TracedPacket> {
        let mut hello = vec![1, 0, 0, 40, 3, 3];
        hello.extend(RANDOM);
        hello.extend([0; 6]);
        let first = initial(
            Sender::Client,
            &ODCID,
            &ODCID,
            &CLIENT_CID,
            0,
            &crypto_frame(&hello),
        );
        let mut control = varint(0);
        control.extend(frame(0x04, &[]));
        let mut p1 = stream_frame(2, 0, &control, false);
        p1.extend(stream_frame(0, 0, &request("/a.css", "u=1"), true));
        let four = request("/b.png", "u=4, i");
        let (head, tail) = four.split_at(10);
        let mut p2 = stream_frame(4, 0, head, false);
        // Stream 8's field section references the dynamic table (Required Insert Count 2).
        p2.extend(stream_frame(8, 0, &frame(0x01, &[0x02, 0x00, 0x80]), true));
        let mut p3 = stream_frame(4, 10, tail, true);
        p3.extend(stream_frame(
            2,
            control.len() as u64,
            &priority_update(4, "u=0"),
            false,
        ));
        let one_rtt = |pn, payload: &[u8]| short(&CLIENT_SECRET, &SERVER_CID, pn, payload);
        vec![
            datagram(true, 0.0, Some(10.0), first),
            datagram(true, 1.0, Some(10.0), one_rtt(1, &p1)),
            datagram(true, 2.0, Some(18.0), one_rtt(2, &p2)),
            datagram(true, 3.0, Some(10.0), one_rtt(3, &p3)),
        ]
    }

    fn response(status_index: u64, body: usize, fill: u8) -> Vec<u8> {
        let mut section = NO_DYNAMIC.to_vec();
        section.extend(indexed(status_index));
        let mut r = frame(0x01, &section);
        r.extend(frame(0x00, &vec![fill; body]));
        r
    }

    /// The server: its Initial, then 1000-byte pieces of its two responses taking turns from
    /// 20 ms, one per ms; the piece sent at 22 ms is lost and sent again at 30 ms.
    fn server_packets() -> Vec<TracedPacket> {
        let hello = initial(Sender::Server, &ODCID, &CLIENT_CID, &SERVER_CID, 0, &[0x01]);
        let zero = response(25, 3000, b'a'); // :status 200
        let four = response(27, 2000, b'b'); // :status 404
        let piece = |id: u64, s: &[u8], k: usize| {
            let end = if (k + 1) * 1000 + 8 >= s.len() {
                s.len()
            } else {
                (k + 1) * 1000
            };
            stream_frame(id, (k * 1000) as u64, &s[k * 1000..end], end == s.len())
        };
        let sends = [
            (20.0, piece(0, &zero, 0), Some(10.0)),
            (21.0, piece(4, &four, 0), Some(10.0)),
            (22.0, piece(0, &zero, 1), None),
            (23.0, piece(4, &four, 1), Some(10.0)),
            (24.0, piece(0, &zero, 2), Some(10.0)),
            (30.0, piece(0, &zero, 1), Some(10.0)),
        ];
        let mut out = vec![datagram(false, 0.5, Some(10.0), hello)];
        for (pn, (at, frames, delay)) in sends.into_iter().enumerate() {
            let packet = short(&SERVER_SECRET, &CLIENT_CID, pn as u32 + 1, &frames);
            out.push(datagram(false, at, delay, packet));
        }
        out
    }

    #[test]
    fn reads_requests_the_control_stream_and_first_sent_data_of_an_h3_connection() {
        let keys = key_log(
            RANDOM,
            &[
                ("CLIENT_TRAFFIC_SECRET_0", &CLIENT_SECRET),
                ("SERVER_TRAFFIC_SECRET_0", &SERVER_SECRET),
            ],
        );
        let mut packets = client_packets();
        packets.extend(server_packets());
        let trace = PacketTrace {
            start_unix_ns: 0,
            packets,
        };
        let wire = read_trace(&trace, &keys);
        assert_eq!(wire.problems, Vec::<String>::new());
        let [conn] = &wire.connections[..] else {
            panic!("{wire:?}")
        };
        assert_eq!(conn.protocol, WireProtocol::H3);
        let [zero, four, eight] = &conn.streams[..] else {
            panic!("{:?}", conn.streams)
        };
        assert_eq!(zero.id, 0);
        assert_eq!(zero.method.as_deref(), Some("GET"));
        assert_eq!(zero.authority.as_deref(), Some("example.test"));
        assert_eq!(zero.path.as_deref(), Some("/a.css"));
        assert_eq!(zero.priority.as_deref(), Some("u=1"));
        assert_eq!(
            (zero.requested_ms, zero.arrived_ms),
            (Some(1.0), Some(11.0))
        );
        assert_eq!(zero.status, Some(200));
        // Headers (5 bytes) and the DATA frame's header (3) are not body; the lost piece
        // counts at its first transmission, once.
        assert_eq!(zero.sends, vec![(20.0, 992), (22.0, 1000), (24.0, 1008)]);
        assert_eq!(zero.body_bytes, 3000);
        assert_eq!(four.path.as_deref(), Some("/b.png"));
        assert_eq!(four.priority.as_deref(), Some("u=4, i"));
        assert_eq!(
            (four.requested_ms, four.arrived_ms),
            (Some(3.0), Some(20.0))
        );
        assert_eq!(
            four.updates,
            vec![PriorityUpdate {
                sent_ms: 3.0,
                arrived_ms: Some(13.0),
                value: "u=0".into()
            }]
        );
        assert_eq!(four.status, Some(404));
        assert_eq!(four.sends, vec![(21.0, 992), (23.0, 1008)]);
        assert_eq!(eight.id, 8);
        assert_eq!(eight.path, None);
        assert!(eight
            .fields_unknown
            .as_deref()
            .unwrap()
            .contains("dynamic table"));
        assert_eq!(eight.requested_ms, Some(2.0));
    }

    #[test]
    fn without_keys_the_packets_are_a_problem_and_garbage_never_panics() {
        let mut packets = client_packets();
        packets.extend(server_packets());
        let trace = PacketTrace {
            start_unix_ns: 0,
            packets: packets.clone(),
        };
        let wire = read_trace(&trace, &Default::default());
        assert!(wire.connections.is_empty());
        assert!(
            wire.problems[0].contains("QUIC packets not decrypted"),
            "{:?}",
            wire.problems
        );
        // Every datagram cut and flipped.
        let keys = key_log(RANDOM, &[("SERVER_TRAFFIC_SECRET_0", &SERVER_SECRET)]);
        let mut mangled = Vec::new();
        for (k, p) in packets.iter().enumerate() {
            let mut q = p.clone();
            let cut = 28 + (k * 37) % (q.data.len() - 28);
            q.data.truncate(cut);
            if let Some(b) = q.data.get_mut(30 + k) {
                *b ^= 0x40;
            }
            mangled.push(q);
        }
        let _ = read_trace(
            &PacketTrace {
                start_unix_ns: 0,
                packets: mangled,
            },
            &keys,
        );
    }
}
