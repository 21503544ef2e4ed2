//! HTTP/2 over TLS 1.3 over TCP: each connection's two byte streams reassembled from the
//! trace, their records decrypted, the client's header blocks and PRIORITY_UPDATEs and the
//! server's header blocks and DATA read.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use super::super::h2_frames::{self, Event, PREFACE};
use super::super::hpack;
use super::super::packet::{self, Transport};
use super::super::quic::{KeyLog, Sender};
use super::super::tls_records::{self, Plaintext};
use super::super::wire_bytes::WireBytes;
use super::wire_streams::{finish, ms, Draft, Found, WireConnection, WireProtocol};
use crate::link::{Direction, DropCause, PacketTrace};

/// One direction of a connection: where its sequence numbers start, its bytes.
#[derive(Default)]
struct Way {
    base: Option<u32>,
    bytes: WireBytes,
}

struct Connection {
    opened_ns: u64,
    /// Client → server, server → client.
    ways: [Way; 2],
}

type Key = (SocketAddrV4, SocketAddrV4);

/// Every TCP connection's bytes: first transmissions in the order sent, arrivals in the order
/// the receivers got them.
fn gather(trace: &PacketTrace) -> BTreeMap<Key, Connection> {
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
        let Transport::Tcp {
            seq, syn, payload, ..
        } = parsed.transport
        else {
            continue;
        };
        let up = p.dir == Direction::Up;
        let key = if up {
            (parsed.src, parsed.dst)
        } else {
            (parsed.dst, parsed.src)
        };
        let conn = conns.entry(key).or_insert_with(|| Connection {
            opened_ns: p.entered_ns,
            ways: Default::default(),
        });
        let way = &mut conn.ways[usize::from(!up)];
        // A SYN's data (TCP Fast Open) starts one after its sequence number.
        let first = seq.wrapping_add(u32::from(syn));
        let base = *way.base.get_or_insert(first);
        let offset = u64::from(first.wrapping_sub(base));
        // Half the sequence space away is before the start (a keepalive probe sits one byte
        // before what was sent): no byte of the stream.
        if payload.is_empty() || offset >= 1 << 31 {
            continue;
        }
        way.bytes.sent(offset, payload, p.entered_ns);
        if let Some(left) = p.left_ns {
            arrivals.push((left, key, usize::from(!up), offset, payload.len() as u64));
        }
    }
    arrivals.sort_by_key(|a| a.0);
    for (at, key, way, offset, len) in arrivals {
        if let Some(c) = conns.get_mut(&key) {
            c.ways[way].bytes.arrived(offset, offset + len, at);
        }
    }
    conns
}

/// Reads every TCP connection of `trace` into `found`.
pub(super) fn analyse(trace: &PacketTrace, keys: &KeyLog, found: &mut Found) {
    for ((client, server), conn) in gather(trace) {
        let mut problems = Vec::new();
        let got = read(&conn, keys, &mut problems);
        for p in problems {
            found.problem(client, server, &p);
        }
        match got {
            Read::H2(drafts) if !drafts.is_empty() => found.connections.push(WireConnection {
                protocol: WireProtocol::H2,
                client,
                server,
                opened_ms: ms(conn.opened_ns),
                streams: finish(drafts),
            }),
            Read::Http1 => found.http1 += 1,
            _ => {}
        }
    }
}

enum Read {
    H2(BTreeMap<u64, Draft>),
    Http1,
    Nothing,
}

/// One connection: its TLS, then its HTTP/2 frames.
fn read(conn: &Connection, keys: &KeyLog, problems: &mut Vec<String>) -> Read {
    let [up, down] = &conn.ways;
    let client_bytes = up.bytes.contiguous();
    if client_bytes.is_empty() {
        return Read::Nothing;
    }
    let Some(random) = tls_records::client_random(&client_bytes) else {
        problems.push("no ClientHello: not TLS, or opened before the capture".into());
        return Read::Nothing;
    };
    let server_bytes = down.bytes.contiguous();
    for (who, way, got) in [
        ("client", up, &client_bytes),
        ("server", down, &server_bytes),
    ] {
        let held = way.bytes.held();
        if held > got.len() as u64 {
            problems.push(format!(
                "the {who}'s bytes after offset {} were not all captured: {} bytes not read",
                got.len(),
                held - got.len() as u64
            ));
        }
    }
    let client = tls_records::decrypt(&client_bytes, Sender::Client, &random, keys);
    let server = tls_records::decrypt(&server_bytes, Sender::Server, &random, keys);
    for (who, p) in [("client", &client), ("server", &server)] {
        for problem in &p.problems {
            problems.push(format!("{who}: {problem}"));
        }
    }
    if !client.bytes.starts_with(PREFACE) {
        // HTTP/1.1 starts with a method; nothing decrypted says nothing.
        return match client.bytes.is_empty() {
            true => Read::Nothing,
            false => Read::Http1,
        };
    }
    let mut drafts = BTreeMap::new();
    requests(&client, &up.bytes, &mut drafts, problems);
    responses(&server, &down.bytes, &mut drafts, problems);
    Read::H2(drafts)
}

/// When the client sent the plaintext byte before `end`, and when the server could read it.
fn times(plain: &Plaintext, wire: &WireBytes, end: u64) -> (Option<u64>, Option<u64>) {
    let last = end.saturating_sub(1);
    let sent = plain.stream_offset(last).and_then(|o| wire.sent_at(o));
    let read = plain
        .record_end(last)
        .and_then(|e| wire.readable_at(e.saturating_sub(1)));
    (sent, read)
}

/// The client's side: requests and priority updates.
fn requests(
    plain: &Plaintext,
    wire: &WireBytes,
    drafts: &mut BTreeMap<u64, Draft>,
    problems: &mut Vec<String>,
) {
    let (events, problem) = h2_frames::events(&plain.bytes, PREFACE.len());
    if let Some(p) = problem {
        problems.push(format!("client: {p}"));
    }
    let mut decoder = hpack::Decoder::default();
    let mut lost: Option<String> = None;
    for e in events {
        match e {
            Event::Headers {
                stream, block, end, ..
            } => {
                let fields = match &lost {
                    Some(why) => Err(why.clone()),
                    None => decoder.decode(&block).map_err(|e| {
                        let why = format!("HPACK: {e}");
                        lost = Some(format!("HPACK table lost at an earlier error ({e})"));
                        why
                    }),
                };
                let (sent, read) = times(plain, wire, end);
                let draft = drafts.entry(u64::from(stream)).or_default();
                draft.request(fields, sent, read);
            }
            Event::PriorityUpdate { stream, value, end } => {
                let (sent, read) = times(plain, wire, end);
                if let Some(sent) = sent {
                    let draft = drafts.entry(u64::from(stream)).or_default();
                    draft.updates.push((sent, read, value));
                }
            }
            _ => {}
        }
    }
}

/// The server's side: response statuses and DATA bytes.
fn responses(
    plain: &Plaintext,
    wire: &WireBytes,
    drafts: &mut BTreeMap<u64, Draft>,
    problems: &mut Vec<String>,
) {
    let (events, problem) = h2_frames::events(&plain.bytes, 0);
    if let Some(p) = problem {
        problems.push(format!("server: {p}"));
    }
    let mut decoder = hpack::Decoder::default();
    let mut lost = false;
    for e in events {
        match e {
            Event::Headers { stream, block, .. } if !lost => match decoder.decode(&block) {
                Ok(fields) => drafts
                    .entry(u64::from(stream))
                    .or_default()
                    .response(&fields),
                Err(e) => {
                    problems.push(format!("server: HPACK: {e}; later statuses not read"));
                    lost = true;
                }
            },
            Event::PushPromise { block } if !lost => lost = decoder.decode(&block).is_err(),
            Event::Data {
                stream, payload, ..
            } => {
                let draft = drafts.entry(u64::from(stream)).or_default();
                for (a, b) in plain.stream_ranges(payload.start, payload.end) {
                    draft.sends.extend(wire.first_sent(a, b));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::h2_frames::build::{data, frame, headers, priority_update};
    use super::super::super::hpack::encode::{integer, string};
    use super::super::super::packet::build::tcp_with;
    use super::super::super::tls_records::seal::{client_hello, plain_record, Sealer};
    use super::super::fixture::*;
    use super::super::{analyse as read_trace, PriorityUpdate, WireProtocol};
    use crate::link::{PacketTrace, TracedPacket};

    const MSS: usize = 1000;

    /// The first request: a Huffman-coded authority and a new `priority` name, both added to
    /// the dynamic table.
    fn first_block() -> Vec<u8> {
        let mut b = vec![0x82, 0x87]; // :method GET, :scheme https
        b.push(0x41); // :authority, incremental indexing
        b.extend(string("example.test", true));
        b.push(0x04); // :path, without indexing
        b.extend(string("/a.css", false));
        b.push(0x40); // new name, incremental indexing
        b.extend(string("priority", true));
        b.extend(string("u=1", false));
        b
    }

    /// The second: the authority from the dynamic table (63), `priority`'s name from it (62).
    fn second_block() -> Vec<u8> {
        let mut b = vec![0x82, 0x87, 0x80 | 63, 0x04];
        b.extend(string("/b.png", false));
        b.extend(integer(62, 4, 0x00));
        b.extend(string("u=4, i", true));
        b
    }

    /// The segments of one direction's `stream` (sequence numbers from `isn`), cut at `cuts`,
    /// each entering the link at its time and arriving `delay` ms later (None: dropped).
    fn segments(
        up: bool,
        isn: u32,
        stream: &[u8],
        cuts: &[(usize, f64, Option<f64>)],
    ) -> Vec<TracedPacket> {
        let (c, s) = addrs(40000);
        let (src, dst) = if up { (c, s) } else { (s, c) };
        let mut out = vec![on_link(
            up,
            0.0,
            Some(1.0),
            tcp_with(src, dst, isn, 0x02, &[]),
        )];
        for (k, &(start, at, delay)) in cuts.iter().enumerate() {
            let end = cuts.get(k + 1).map_or(stream.len(), |c| c.0);
            let seq = isn.wrapping_add(1 + start as u32);
            let seg = tcp_with(src, dst, seq, 0x18, &stream[start..end]);
            out.push(on_link(up, at, delay, seg));
        }
        out
    }

    struct Client {
        packets: Vec<TracedPacket>,
        /// Where the second record starts in the stream.
        second_at: usize,
    }

    fn client(secret: &[u8]) -> Client {
        let mut hs = Sealer::new(&[0x33; 32]);
        let mut app = Sealer::new(secret);
        let mut up = client_hello(RANDOM);
        up.extend(plain_record(20, &[1]));
        up.extend(hs.record(22, &[20, 0, 0, 0], 0)); // Finished
        let mut first = super::PREFACE.to_vec();
        first.extend(frame(4, 0, 0, &[]));
        first.extend(headers(1, &first_block(), true));
        up.extend(app.data(&first));
        let second_at = up.len();
        let mut second = headers(3, &second_block(), true);
        second.extend(priority_update(3, "u=0"));
        up.extend(app.data(&second));
        // The second record in two segments, the first of them late: the server reads the
        // request when the late one arrives (30 ms); the header block ends in the second.
        let mid = second_at + 5 + 9 + 4;
        let cuts = [
            (0, 1.0, Some(10.0)),
            (second_at, 5.0, Some(25.0)),
            (mid, 6.0, Some(10.0)),
        ];
        Client {
            packets: segments(true, 1000, &up, &cuts),
            second_at,
        }
    }

    struct Server {
        packets: Vec<TracedPacket>,
        /// Where each response's body lies in the TCP stream.
        bodies: [(usize, usize); 2],
    }

    /// Segments of MSS bytes, the k-th sent at 20 + k ms; the third is lost and sent again at
    /// 40 ms.
    fn server(secret: &[u8]) -> Server {
        let mut hs = Sealer::new(&[0x44; 32]);
        let mut app = Sealer::new(secret);
        let mut down = plain_record(22, &[2, 0, 0, 4, 3, 3, 0, 0]);
        down.extend(plain_record(20, &[1]));
        down.extend(hs.record(22, &[8, 0, 0, 2, 0, 0], 0));
        let mut first = frame(4, 0, 0, &[]);
        first.extend(headers(1, &[0x88], false)); // :status 200
        down.extend(app.data(&first));
        let body1 = down.len() + 5 + 9;
        down.extend(app.data(&data(1, &[b'a'; 3000], true)));
        let mut third = headers(3, &[0x48, 0x03, b'2', b'0', b'6'], false);
        let body2 = down.len() + 5 + third.len() + 9;
        third.extend(data(3, &[b'b'; 2000], true));
        down.extend(app.data(&third));
        let cuts: Vec<(usize, f64, Option<f64>)> = (0..down.len().div_ceil(MSS))
            .map(|k| (k * MSS, 20.0 + k as f64, (k != 2).then_some(10.0)))
            .collect();
        let mut packets = segments(false, 5000, &down, &cuts);
        let (_, s) = addrs(40000);
        let again = tcp_with(
            s,
            addrs(40000).0,
            5001 + 2 * MSS as u32,
            0x18,
            &down[2 * MSS..3 * MSS],
        );
        packets.push(on_link(false, 40.0, Some(10.0), again));
        Server {
            packets,
            bodies: [(body1, body1 + 3000), (body2, body2 + 2000)],
        }
    }

    /// What the sends of TCP stream bytes `[start, end)` must be: per segment, its first time.
    fn expected((start, end): (usize, usize)) -> Vec<(f64, u64)> {
        (start / MSS..end.div_ceil(MSS))
            .map(|k| {
                let n = end.min((k + 1) * MSS) - start.max(k * MSS);
                (20.0 + k as f64, n as u64)
            })
            .collect()
    }

    #[test]
    fn reads_requests_priorities_and_first_sent_response_bytes() {
        let (cs, ss) = ([0x11; 32], [0x22; 32]);
        let keys = key_log(
            RANDOM,
            &[
                ("CLIENT_TRAFFIC_SECRET_0", &cs),
                ("SERVER_TRAFFIC_SECRET_0", &ss),
            ],
        );
        let c = client(&cs);
        let s = server(&ss);
        let mut packets = c.packets;
        packets.extend(s.packets);
        packets.reverse(); // the trace's order does not matter: times do
        let trace = PacketTrace {
            start_unix_ns: 0,
            packets,
        };
        let wire = read_trace(&trace, &keys);
        assert_eq!(wire.problems, Vec::<String>::new());
        assert_eq!(wire.connections.len(), 1);
        let conn = &wire.connections[0];
        assert_eq!(conn.protocol, WireProtocol::H2);
        assert_eq!((conn.client, conn.server), addrs(40000));
        let [one, three] = &conn.streams[..] else {
            panic!("{:?}", conn.streams)
        };
        assert_eq!(one.id, 1);
        assert_eq!(one.method.as_deref(), Some("GET"));
        assert_eq!(one.authority.as_deref(), Some("example.test"));
        assert_eq!(one.path.as_deref(), Some("/a.css"));
        assert_eq!(one.priority.as_deref(), Some("u=1"));
        assert_eq!((one.requested_ms, one.arrived_ms), (Some(1.0), Some(11.0)));
        assert_eq!(one.status, Some(200));
        assert_eq!(one.body_bytes, 3000);
        assert_eq!(one.sends, expected(s.bodies[0]));
        assert!(
            one.sends.iter().any(|s| s.0 == 22.0),
            "the lost segment's first time"
        );
        assert_eq!(three.authority.as_deref(), Some("example.test"));
        assert_eq!(three.path.as_deref(), Some("/b.png"));
        assert_eq!(three.priority.as_deref(), Some("u=4, i"));
        assert_eq!(
            (three.requested_ms, three.arrived_ms),
            (Some(6.0), Some(30.0))
        );
        assert_eq!(
            three.updates,
            vec![PriorityUpdate {
                sent_ms: 6.0,
                arrived_ms: Some(30.0),
                value: "u=0".into()
            }]
        );
        assert_eq!(three.status, Some(206));
        assert_eq!(three.body_bytes, 2000);
        assert_eq!(three.sends, expected(s.bodies[1]));
        assert!(c.second_at > 0);
    }

    #[test]
    fn http1_is_counted_and_missing_keys_or_garbage_are_problems() {
        let (cs, ss) = ([0x11; 32], [0x22; 32]);
        // Keys for the connection, but its client speaks HTTP/1.1.
        let keys = key_log(
            RANDOM,
            &[
                ("CLIENT_TRAFFIC_SECRET_0", &cs),
                ("SERVER_TRAFFIC_SECRET_0", &ss),
            ],
        );
        let mut app = Sealer::new(&cs);
        let mut up = client_hello(RANDOM);
        up.extend(app.data(b"GET / HTTP/1.1\r\nhost: example.test\r\n\r\n"));
        let packets = segments(true, 1, &up, &[(0, 1.0, Some(10.0))]);
        let trace = PacketTrace {
            start_unix_ns: 0,
            packets: packets.clone(),
        };
        let wire = read_trace(&trace, &keys);
        assert_eq!((wire.http1_connections, wire.connections.len()), (1, 0));
        // Without keys: a problem naming what is missing.
        let wire = read_trace(&trace, &Default::default());
        assert_eq!(wire.http1_connections, 0);
        assert!(
            wire.problems[0].contains("no CLIENT_TRAFFIC_SECRET_0"),
            "{:?}",
            wire.problems
        );
        assert!(wire.problems[0].starts_with("10.0.0.1:40000 → 10.0.0.2:443: "));
        // Garbage segments: no panic, a problem.
        let (c, s) = addrs(40000);
        let junk: Vec<TracedPacket> = (0..50u32)
            .map(|k| {
                let bytes: Vec<u8> = (0..k * 7).map(|i| (i * k) as u8).collect();
                on_link(
                    true,
                    f64::from(k),
                    Some(1.0),
                    tcp_with(c, s, k * 13, 0x18, &bytes),
                )
            })
            .collect();
        let wire = read_trace(
            &PacketTrace {
                start_unix_ns: 0,
                packets: junk,
            },
            &keys,
        );
        assert!(wire.connections.is_empty());
    }
}
