//! The wire's view of every request stream of a load (pure): for each HTTP/2 (TLS 1.3 over TCP)
//! and HTTP/3 (QUIC v1) connection between the browser and a server, decrypted with the TLS key
//! log, each request's method, authority, path and priority with when it was sent and when the
//! server could read it, its PRIORITY_UPDATEs, and the DATA bytes of its response as the server
//! sent them. HTTP/1.1 connections are counted, not read.
//!
//! Times are ms from the start of the trace. A response byte's time is when its first
//! transmission entered the link from the server (retransmissions do not move it): the
//! server's send order. A request's `requested_ms` is when the last byte of its header block
//! first entered the link from the client, `arrived_ms` when the server could read that byte
//! in order (TCP: the whole record holding it; QUIC: the stream up to it).
//!
//! - [`h2`]: TCP connections: reassembly, TLS records ([`super::tls_records`]), HTTP/2 frames
//!   ([`super::h2_frames`]) and HPACK ([`super::hpack`]);
//! - [`h3`]: QUIC connections: STREAM data ([`super::quic`]), HTTP/3 frames
//!   ([`super::h3_frames`]) and QPACK ([`super::qpack`]).

mod h2;
mod h3;
pub mod wire_streams;

use super::quic::KeyLog;
use crate::link::PacketTrace;
use wire_streams::{Found, PROBLEMS_KEPT};

pub use wire_streams::{PriorityUpdate, WireConnection, WireProtocol, WireStream, WireStreams};

/// Reads every connection of `trace` with the secrets of `keys`.
pub fn analyse(trace: &PacketTrace, keys: &KeyLog) -> WireStreams {
    let mut found = Found::default();
    h2::analyse(trace, keys, &mut found);
    h3::analyse(trace, keys, &mut found);
    found.connections.sort_by(|a, b| {
        a.opened_ms
            .total_cmp(&b.opened_ms)
            .then((a.client, a.server).cmp(&(b.client, b.server)))
    });
    let mut problems = found.problems;
    if problems.len() > PROBLEMS_KEPT {
        let more = problems.len() - PROBLEMS_KEPT;
        problems.truncate(PROBLEMS_KEPT);
        problems.push(format!("… and {more} more problems"));
    }
    WireStreams {
        connections: found.connections,
        http1_connections: found.http1,
        problems,
    }
}

#[cfg(test)]
mod compact_tests {
    use super::*;

    fn stream(id: u64, sends: &[(f64, u64)]) -> WireStream {
        WireStream {
            id,
            body_bytes: sends.iter().map(|s| s.1).sum(),
            sends: sends.to_vec(),
            ..WireStream::default()
        }
    }

    #[test]
    fn runs_of_one_stream_become_spans_and_turns_stay_turns() {
        let mut c = WireConnection {
            protocol: WireProtocol::H2,
            client: "10.0.0.1:5000".parse().unwrap(),
            server: "10.0.0.2:443".parse().unwrap(),
            opened_ms: 0.0,
            streams: vec![
                stream(1, &[(1.0, 10), (2.0, 10), (3.0, 10), (6.0, 5)]),
                stream(3, &[(4.0, 7), (5.0, 7)]),
            ],
        };
        c.compact();
        assert_eq!(c.streams[0].spans, vec![(1.0, 3.0, 30), (6.0, 6.0, 5)]);
        assert_eq!(c.streams[1].spans, vec![(4.0, 5.0, 14)]);
        assert!(c.streams.iter().all(|s| s.sends.is_empty()));
        assert_eq!(c.streams[0].first_byte_ms(), Some(1.0));
        assert_eq!(c.streams[0].last_byte_ms(), Some(6.0));
        let json = serde_json::to_string(&c.streams[1]).unwrap();
        assert!(json.contains("\"spans\":[[4.0,5.0,14]]"), "{json}");
    }
}

/// What the transports' tests share: addresses, keys, packets on the link.
#[cfg(test)]
mod fixture {
    use std::net::SocketAddrV4;

    use super::super::quic::KeyLog;
    use crate::link::{Direction, DropCause, TracedPacket};

    pub const RANDOM: [u8; 32] = [7; 32];

    pub fn addrs(client_port: u16) -> (SocketAddrV4, SocketAddrV4) {
        (
            SocketAddrV4::new([10, 0, 0, 1].into(), client_port),
            "10.0.0.2:443".parse().unwrap(),
        )
    }

    pub fn key_log(random: [u8; 32], lines: &[(&str, &[u8])]) -> KeyLog {
        let text: String = lines
            .iter()
            .map(|(l, s)| format!("{l} {} {}\n", hex::encode(random), hex::encode(s)))
            .collect();
        KeyLog::parse(&text).unwrap()
    }

    pub fn ns(ms: f64) -> u64 {
        (ms * 1e6) as u64
    }

    /// A packet that entered the link at `entered` ms and left it `delay` ms later (None:
    /// dropped).
    pub fn on_link(up: bool, entered: f64, delay: Option<f64>, data: Vec<u8>) -> TracedPacket {
        TracedPacket {
            dir: if up { Direction::Up } else { Direction::Down },
            entered_ns: ns(entered),
            left_ns: delay.map(|d| ns(entered + d)),
            dropped: delay.is_none().then_some(DropCause::Loss),
            data,
        }
    }
}

/// Recorded loads (`tests/fixtures/wire/`): Chromium against the embedded server on the wired
/// profile, page10, the server side of the link and the key log.
#[cfg(test)]
mod recorded {
    use std::io::Read;

    use super::super::order;
    use super::super::pcapng::read::server_side;
    use super::super::quic::KeyLog;
    use super::*;

    fn load(name: &str) -> WireStreams {
        let dir = format!("{}/tests/fixtures/wire/{name}", env!("CARGO_MANIFEST_DIR"));
        let gz = std::fs::read(format!("{dir}/server.pcapng.gz")).unwrap();
        let mut file = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut file)
            .unwrap();
        let keys = KeyLog::parse(&std::fs::read_to_string(format!("{dir}/keys.log")).unwrap());
        analyse(&server_side(&file), &keys.unwrap())
    }

    /// page10's files in request order, their sizes (tshark agrees: `http2.length` of the
    /// DATA frames per stream) and the priority Chromium gave each.
    const PAGE10: [(&str, u64, Option<&str>); 11] = [
        ("index.html", 1061, Some("u=0, i")),
        ("css/style01.css", 3842, Some("u=0")),
        ("img/image003.png", 5501, Some("u=1, i")),
        ("js/script01.js", 6666, None),
        ("js/script02.js", 4663, None),
        ("img/image001.png", 5889, Some("i")),
        ("img/image002.png", 6712, Some("i")),
        ("img/image004.png", 14044, Some("i")),
        ("img/image005.png", 5817, Some("i")),
        ("img/image006.png", 9442, None),
        ("font/pb-sans.ttf", 17424, Some("u=0")),
    ];

    /// Every stream: its request, its status, its body whole, its times in order.
    fn check_page10(w: &WireStreams, protocol: WireProtocol, id_step: u64) -> &WireConnection {
        assert_eq!(w.problems, Vec::<String>::new());
        assert_eq!(w.http1_connections, 0);
        let [c] = &w.connections[..] else {
            panic!("{:?}", w.connections)
        };
        assert_eq!(c.protocol, protocol);
        assert_eq!(c.streams.len(), PAGE10.len());
        for (k, (s, (file, size, _))) in c.streams.iter().zip(PAGE10).enumerate() {
            assert_eq!(
                s.id,
                k as u64 * id_step + u64::from(protocol == WireProtocol::H2)
            );
            assert_eq!(s.path.as_deref(), Some(&*format!("/page10/{file}")));
            assert_eq!(
                (s.method.as_deref(), s.authority.as_deref()),
                (Some("GET"), Some("pagebench.test"))
            );
            assert_eq!((s.status, s.body_bytes), (Some(200), size), "{file}");
            assert_eq!(s.sends.iter().map(|x| x.1).sum::<u64>(), size);
            assert!(
                s.sends.windows(2).all(|w| w[0].0 < w[1].0),
                "{file}: {:?}",
                s.sends
            );
            let (sent, read) = (s.requested_ms.unwrap(), s.arrived_ms.unwrap());
            // Half the wired profile's 40 ms round trip, give or take the emulator.
            assert!(
                (15.0..25.0).contains(&(read - sent)),
                "{file}: {sent} → {read}"
            );
            assert!(read < s.first_byte_ms().unwrap(), "{file}");
        }
        c
    }

    #[test]
    fn a_recorded_h2_load_reads_whole() {
        let w = load("h2-page10");
        let c = check_page10(&w, WireProtocol::H2, 2);
        for (s, (file, _, priority)) in c.streams.iter().zip(PAGE10) {
            let expected = if file.ends_with("image006.png") {
                Some("i")
            } else {
                priority
            };
            assert_eq!(s.priority.as_deref(), expected, "{file}");
            assert!(s.updates.is_empty());
        }
        // The server ran `--priorities rfc9218`, yet the font (u=0, asked for last) waited
        // behind 20207 bytes of scripts and images the server had written to its socket: the
        // inverted bytes are those sent while the font waited.
        let order = order::check(c);
        assert_eq!(
            (order.inverted_bytes, order.contested_bytes),
            (20_207, 24_049)
        );
        let font = c.streams.last().unwrap();
        let before: u64 = c.streams[..10]
            .iter()
            .flat_map(|s| &s.sends)
            .filter(|(t, _)| *t >= font.arrived_ms.unwrap() && *t < font.last_byte_ms().unwrap())
            .map(|s| s.1)
            .sum();
        assert_eq!(before, 20_207);
        let urgencies: Vec<(u8, usize)> = order
            .by_urgency
            .iter()
            .map(|u| (u.urgency, u.streams))
            .collect();
        assert_eq!(urgencies, [(0, 3), (1, 1), (3, 7)]);
    }

    #[test]
    fn a_recorded_h3_load_reads_whole_with_its_priority_updates() {
        let w = load("h3-page10");
        let c = check_page10(&w, WireProtocol::H3, 4);
        for (s, (file, _, priority)) in c.streams.iter().zip(PAGE10) {
            let expected = if file.ends_with("image006.png") {
                Some("u=1, i")
            } else {
                priority
            };
            assert_eq!(s.priority.as_deref(), expected, "{file}");
            // Chromium repeats a request's priority on the control stream, in the same
            // packet, when it differs from the default.
            match &s.updates[..] {
                [] => assert_eq!(expected, None, "{file}"),
                [u] => {
                    assert_eq!(Some(&*u.value), expected, "{file}");
                    assert_eq!(
                        (Some(u.sent_ms), u.arrived_ms),
                        (s.requested_ms, s.arrived_ms)
                    );
                }
                more => panic!("{file}: {more:?}"),
            }
        }
        let order = order::check(c);
        assert!(order.inverted_share.unwrap() > 0.5, "{order:?}");
    }
}
