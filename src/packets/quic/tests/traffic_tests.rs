//! End-to-end tests of QUIC decoding against quinn-proto's traffic: every packet decrypts,
//! packet numbers increase, STREAM frames add up to what each side wrote; key updates, 0-RTT,
//! losses, missing or wrong key log lines, and garbage.

use std::collections::{BTreeMap, HashMap};

use super::super::decoded::{Frame, PacketKind, QuicPacket, Sender};
use super::super::flow::QuicFlow;
use super::super::frames::parse_frames;
use super::super::header::LongHeader;
use super::super::key_log::KeyLog;
use super::super::protection::{initial_keys, CipherSuite};
use super::*;

// -----------------------------------------------------------------------------------------
// Checks on decoded traffic

#[derive(Debug)]
struct Decoded {
    index: usize,
    from: Sender,
    packet: QuicPacket,
}

fn decode(record: &[Datagram], key_log: &str, include_dropped: bool) -> (QuicFlow, Vec<Decoded>) {
    let keys = KeyLog::parse(key_log).unwrap();
    let mut flow = QuicFlow::new();
    let mut decoded = Vec::new();
    for (index, datagram) in record.iter().enumerate() {
        if datagram.dropped && !include_dropped {
            continue;
        }
        let packets = flow.feed(datagram.from, &datagram.bytes, &keys);
        assert_eq!(
            packets.iter().map(|p| p.len).sum::<usize>(),
            datagram.bytes.len(),
            "packets of datagram {index} do not tile it"
        );
        decoded.extend(packets.into_iter().map(|packet| Decoded {
            index,
            from: datagram.from,
            packet,
        }));
    }
    (flow, decoded)
}

fn assert_all_decrypted(decoded: &[Decoded]) {
    for d in decoded {
        assert_eq!(
            d.packet.undecryptable, None,
            "datagram {} from {:?}: {:?}",
            d.index, d.from, d.packet
        );
        assert!(d.packet.packet_number.is_some());
        assert!(!d.packet.frames.is_empty(), "{:?}", d.packet);
        for frame in &d.packet.frames {
            assert!(
                !matches!(frame, Frame::Unknown(_) | Frame::Malformed { .. }),
                "datagram {}: {frame:?}",
                d.index
            );
        }
    }
}

fn space_of(kind: PacketKind) -> usize {
    match kind {
        PacketKind::Initial => 0,
        PacketKind::Handshake => 1,
        _ => 2,
    }
}

fn assert_packet_numbers_increase(decoded: &[Decoded]) {
    let mut last: HashMap<(Sender, usize), u64> = HashMap::new();
    for d in decoded {
        let pn = d.packet.packet_number.unwrap();
        if let Some(prev) = last.insert((d.from, space_of(d.packet.kind)), pn) {
            assert!(
                pn > prev,
                "{:?} {:?}: pn {pn} after {prev}",
                d.from,
                d.packet.kind
            );
        }
    }
}

fn stream_frames(decoded: &[Decoded], from: Sender) -> BTreeMap<u64, Vec<(u64, u64, bool)>> {
    let mut streams: BTreeMap<u64, Vec<(u64, u64, bool)>> = BTreeMap::new();
    for d in decoded.iter().filter(|d| d.from == from) {
        for frame in &d.packet.frames {
            if let Frame::Stream {
                id,
                offset,
                len,
                fin,
            } = *frame
            {
                streams
                    .entry(id)
                    .or_default()
                    .push((offset, offset + len, fin));
            }
        }
    }
    streams
}

/// The union of the STREAM frames of each stream is exactly 0..written, with a FIN at the end.
fn assert_streams_cover(
    frames: &BTreeMap<u64, Vec<(u64, u64, bool)>>,
    written: &BTreeMap<u64, u64>,
) {
    assert_eq!(
        frames.keys().collect::<Vec<_>>(),
        written.keys().collect::<Vec<_>>(),
        "stream ids"
    );
    for (id, ranges) in frames {
        let total = written[id];
        let mut sorted = ranges.clone();
        sorted.sort();
        let mut covered = 0;
        for &(start, end, fin) in &sorted {
            assert!(start <= covered, "stream {id}: gap {covered}..{start}");
            assert!(
                end <= total,
                "stream {id}: frame ends at {end} past {total}"
            );
            if fin {
                assert_eq!(end, total, "stream {id}: FIN before the end");
            }
            covered = covered.max(end);
        }
        assert_eq!(covered, total, "stream {id}");
        assert!(
            sorted.iter().any(|r| r.2 && r.1 == total),
            "stream {id}: no FIN"
        );
    }
}

fn run_and_check(opts: Options) -> (Harness, QuicFlow, Vec<Decoded>) {
    let mut harness = Harness::new(opts);
    harness.run();
    let (flow, decoded) = check(&harness);
    (harness, flow, decoded)
}

/// Every packet decrypts, packet numbers increase, and the STREAM frames of each side add
/// up to exactly what its application wrote.
fn check(harness: &Harness) -> (QuicFlow, Vec<Decoded>) {
    let (flow, decoded) = decode(&harness.record, &harness.key_log.text(), false);
    assert_all_decrypted(&decoded);
    assert_packet_numbers_increase(&decoded);
    for kind in [
        PacketKind::Initial,
        PacketKind::Handshake,
        PacketKind::OneRtt,
    ] {
        assert!(
            decoded.iter().any(|d| d.packet.kind == kind),
            "no {kind:?} packet"
        );
    }
    let expected: BTreeMap<u64, u64> = harness.server_written.clone();
    assert_eq!(expected.len(), harness.opts.streams * harness.opts.rounds);
    assert!(expected
        .values()
        .all(|n| *n == harness.opts.response_len as u64));
    assert_streams_cover(&stream_frames(&decoded, Sender::Server), &expected);
    assert_streams_cover(
        &stream_frames(&decoded, Sender::Client),
        &harness.client_written,
    );
    (flow, decoded)
}

// -----------------------------------------------------------------------------------------
// End-to-end tests against quinn-proto traffic

#[test]
fn decodes_every_packet_of_a_quinn_transfer() {
    let (_, flow, decoded) = run_and_check(Options::default());
    assert!(flow.client_random().is_some());
    let frames: Vec<&Frame> = decoded.iter().flat_map(|d| &d.packet.frames).collect();
    assert!(frames.iter().any(|f| matches!(f, Frame::Ack { .. })));
    assert!(frames.iter().any(|f| matches!(f, Frame::Crypto { .. })));
    assert!(frames.iter().any(|f| matches!(f, Frame::Padding { .. })));
    // HANDSHAKE_DONE, NEW_CONNECTION_ID and the flow-control frames the small windows cause.
    for frame_type in [0x1e, 0x18, 0x11] {
        assert!(
            frames.contains(&&Frame::Other(frame_type)),
            "no frame of type {frame_type:#x}"
        );
    }
    // Coalesced: some datagram holds more than one packet.
    let mut per_datagram: HashMap<usize, usize> = HashMap::new();
    for d in &decoded {
        *per_datagram.entry(d.index).or_default() += 1;
    }
    assert!(per_datagram.values().any(|n| *n > 1));
}

#[test]
fn zero_bytes_after_the_packets_of_a_datagram_are_padding() {
    // Firefox pads the datagrams of its Initials with zero bytes outside any packet.
    let mut harness = Harness::new(Options::default());
    harness.run();
    // Pad the datagrams whose last packet has a long header (its length is explicit).
    let (_, plain) = decode(&harness.record, &harness.key_log.text(), false);
    let mut last_kind: BTreeMap<usize, PacketKind> = BTreeMap::new();
    for d in &plain {
        last_kind.insert(d.index, d.packet.kind);
    }
    let mut padded = 0;
    for (i, d) in harness.record.iter_mut().enumerate() {
        if !d.dropped
            && matches!(
                last_kind.get(&i),
                Some(PacketKind::Initial | PacketKind::Handshake)
            )
        {
            d.bytes.extend([0u8; 37]);
            padded += 1;
        }
    }
    assert!(padded > 0, "no long-header datagram from the client to pad");
    let (_, decoded) = decode(&harness.record, &harness.key_log.text(), false);
    let (pads, packets): (Vec<Decoded>, Vec<Decoded>) = decoded
        .into_iter()
        .partition(|d| d.packet.kind == PacketKind::Padding);
    assert_all_decrypted(&packets);
    assert_eq!(pads.len(), padded);
    assert!(pads.iter().all(|d| d.packet.len == 37));
    // A datagram of zeros alone is not padding of anything: it is not QUIC.
    let mut flow = QuicFlow::new();
    let keys = KeyLog::parse(&harness.key_log.text()).unwrap();
    let lone = flow.feed(Sender::Client, &[0u8; 20], &keys);
    assert_ne!(lone[0].kind, PacketKind::Padding);
}

#[test]
fn decodes_zero_rtt_of_a_resumed_connection() {
    let mut harness = Harness::new(Options::default());
    harness.run();
    let (first_flow, first) = check(&harness);
    harness.reconnect();
    harness.run();
    let (flow, decoded) = check(&harness);
    assert_ne!(flow.client_random(), None);
    // The handshakes say so on the wire: a full one first, then a resumed one whose early
    // data the server accepted.
    let full = first_flow.handshake();
    assert_eq!(
        (
            full.resumed,
            full.certificate_sent,
            full.early_data_accepted
        ),
        (Some(false), Some(true), Some(false))
    );
    let resumed = flow.handshake();
    assert!(resumed.client_offered_resumption && resumed.client_offered_early_data);
    assert_eq!(
        (
            resumed.resumed,
            resumed.certificate_sent,
            resumed.early_data_accepted
        ),
        (Some(true), Some(false), Some(true))
    );
    let zero_rtt: Vec<&Decoded> = decoded
        .iter()
        .filter(|d| d.packet.kind == PacketKind::ZeroRtt)
        .collect();
    assert!(!zero_rtt.is_empty());
    assert!(zero_rtt.iter().all(|d| d.from == Sender::Client));
    // The requests went out as 0-RTT STREAM frames.
    let early_streams: Vec<u64> = zero_rtt
        .iter()
        .flat_map(|d| &d.packet.frames)
        .filter_map(|f| match f {
            Frame::Stream { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(early_streams.len(), 3, "{zero_rtt:?}");
    assert!(first.iter().all(|d| d.packet.kind != PacketKind::ZeroRtt));
}

#[test]
fn decodes_aes_256_gcm() {
    let (_, flow, _) = run_and_check(Options {
        suite: cipher_suite::TLS13_AES_256_GCM_SHA384,
        ..Options::default()
    });
    assert_eq!(flow.suite_hint, Some(CipherSuite::Aes256Gcm));
}

#[test]
fn decodes_chacha20_poly1305() {
    let (_, flow, _) = run_and_check(Options {
        suite: cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        ..Options::default()
    });
    assert_eq!(flow.suite_hint, Some(CipherSuite::ChaCha20Poly1305));
}

#[test]
fn decodes_zero_length_client_connection_id() {
    // run_and_check decoded every server short header with an empty DCID.
    let (_, flow, decoded) = run_and_check(Options {
        client_cid_len: 0,
        ..Options::default()
    });
    assert_eq!(flow.cids[Sender::Client.index()], vec![Vec::<u8>::new()]);
    assert!(flow.cids[Sender::Server.index()]
        .iter()
        .all(|cid| cid.len() == 8));
    assert!(decoded
        .iter()
        .any(|d| d.from == Sender::Server && d.packet.kind == PacketKind::OneRtt));
}

#[test]
fn follows_key_updates() {
    let (_, flow, _) = run_and_check(Options {
        rounds: 3,
        key_updates: true,
        ..Options::default()
    });
    assert_eq!(flow.key_updates(Sender::Server), 2);
    assert_eq!(flow.key_updates(Sender::Client), 2);
}

#[test]
fn late_packets_use_the_previous_key_generation() {
    let (harness, mut flow, decoded) = run_and_check(Options {
        rounds: 3,
        key_updates: true,
        ..Options::default()
    });
    let keys = KeyLog::parse(&harness.key_log.text()).unwrap();
    let carrying_stream_in = |round: usize| {
        let (start, end) = (harness.round_starts[round - 1], harness.round_starts[round]);
        decoded
            .iter()
            .find(|d| {
                d.from == Sender::Server
                    && (start..end).contains(&d.index)
                    && d.packet
                        .frames
                        .iter()
                        .any(|f| matches!(f, Frame::Stream { .. }))
            })
            .unwrap()
    };
    // Round 2 went out under generation 1, the one before the current: still readable.
    let late = carrying_stream_in(2);
    let again = flow.feed(Sender::Server, &harness.record[late.index].bytes, &keys);
    assert_eq!(again, vec![late.packet.clone()]);
    // Round 1 used generation 0, which was dropped two updates ago.
    let too_late = carrying_stream_in(1);
    let again = flow.feed(Sender::Server, &harness.record[too_late.index].bytes, &keys);
    assert!(again[0]
        .undecryptable
        .as_deref()
        .unwrap()
        .contains("AEAD tag did not verify"));
    assert_eq!(flow.key_updates(Sender::Server), 2);
}

#[test]
fn dropped_datagram_is_retransmitted_later() {
    let mut harness = Harness::new(Options::default());
    // Drop the 4th server datagram carrying stream data, chosen by decoding it.
    let mut flow = QuicFlow::new();
    let mut seen = 0;
    harness.drop_rule = Box::new(move |from, bytes, key_log| {
        let keys = KeyLog::parse(key_log).unwrap();
        let packets = flow.feed(from, bytes, &keys);
        let carries_stream = packets.iter().any(|p| {
            p.frames
                .iter()
                .any(|f| matches!(f, Frame::Stream { len, .. } if *len > 0))
        });
        if from == Sender::Server && carries_stream {
            seen += 1;
            return seen == 4;
        }
        false
    });
    harness.run();
    let dropped_index = harness.record.iter().position(|d| d.dropped).unwrap();
    assert_eq!(harness.record.iter().filter(|d| d.dropped).count(), 1);

    // The link emulator never forwarded it: the delivered traffic alone is complete.
    let (mut flow, delivered) = decode(&harness.record, &harness.key_log.text(), false);
    assert_all_decrypted(&delivered);
    let frames = stream_frames(&delivered, Sender::Server);
    assert_streams_cover(&frames, &harness.server_written);

    // Fed late, the dropped datagram still decodes, to the frames that were lost.
    let keys = KeyLog::parse(&harness.key_log.text()).unwrap();
    let lost = flow.feed(Sender::Server, &harness.record[dropped_index].bytes, &keys);
    assert_eq!(lost.len(), 1);
    assert_eq!(lost[0].undecryptable, None);
    let lost_pn = lost[0].packet_number.unwrap();
    let lost_ranges: Vec<(u64, u64, u64)> = lost[0]
        .frames
        .iter()
        .filter_map(|f| match *f {
            Frame::Stream {
                id, offset, len, ..
            } if len > 0 => Some((id, offset, offset + len)),
            _ => None,
        })
        .collect();
    assert!(!lost_ranges.is_empty());
    // Every lost byte shows up again in a later server packet.
    for (id, start, end) in lost_ranges {
        let mut later: Vec<(u64, u64)> = delivered
            .iter()
            .filter(|d| d.from == Sender::Server && d.index > dropped_index)
            .filter(|d| d.packet.packet_number.unwrap() > lost_pn)
            .flat_map(|d| &d.packet.frames)
            .filter_map(|f| match *f {
                Frame::Stream {
                    id: other,
                    offset,
                    len,
                    ..
                } if other == id => Some((offset, offset + len)),
                _ => None,
            })
            .filter(|(s, e)| *s < end && *e > start)
            .collect();
        later.sort();
        let mut covered = start;
        for (s, e) in later {
            if s <= covered {
                covered = covered.max(e);
            }
        }
        assert!(
            covered >= end,
            "stream {id} {start}..{end}: retransmitted only to {covered}"
        );
    }
    // And in the full capture, the dropped packet decodes in place too.
    let (_, all) = decode(&harness.record, &harness.key_log.text(), true);
    assert_all_decrypted(&all);
}

#[test]
fn missing_key_log_lines_make_packets_undecryptable() {
    let mut harness = Harness::new(Options::default());
    harness.run();
    let full = harness.key_log.text();
    // Without the 1-RTT lines: Initial and Handshake decode, 1-RTT names what is missing.
    let partial: String = full
        .lines()
        .filter(|l| !l.contains("_TRAFFIC_SECRET_0"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (flow, decoded) = decode(&harness.record, &partial, false);
    let random = hex::encode(flow.client_random().unwrap());
    for d in &decoded {
        match d.packet.kind {
            PacketKind::Initial | PacketKind::Handshake => {
                assert_eq!(d.packet.undecryptable, None)
            }
            PacketKind::OneRtt => {
                let reason = d.packet.undecryptable.as_deref().unwrap();
                assert!(reason.contains(&random), "{reason}");
                assert!(reason.contains("TRAFFIC_SECRET_0"), "{reason}");
                assert!(d.packet.frames.is_empty());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // With an empty key log only Initial packets decode.
    let (_, decoded) = decode(&harness.record, "", false);
    assert!(decoded
        .iter()
        .any(|d| d.packet.kind == PacketKind::Handshake));
    for d in &decoded {
        assert_eq!(
            d.packet.undecryptable.is_none(),
            d.packet.kind == PacketKind::Initial,
            "{:?}",
            d.packet
        );
    }
    // Keys arriving later (the key log is read again) are used from then on.
    let keys = KeyLog::parse(&full).unwrap();
    let mut flow = QuicFlow::new();
    let empty = KeyLog::default();
    let half = harness.record.len() / 2;
    for (i, datagram) in harness.record.iter().enumerate() {
        let log = if i < half { &empty } else { &keys };
        for packet in flow.feed(datagram.from, &datagram.bytes, log) {
            if i >= half {
                assert_eq!(packet.undecryptable, None, "datagram {i}");
            }
        }
    }
}

/// Chromium's chaos protection: the ClientHello split into CRYPTO frames that arrive out
/// of order across Initial packets. Rebuilt here from quinn's real ClientHello.
#[test]
fn client_hello_split_and_shuffled_across_initials() {
    let mut harness = Harness::new(Options::default());
    harness.run();
    let keys = KeyLog::parse(&harness.key_log.text()).unwrap();
    let (reference, _) = decode(&harness.record, &harness.key_log.text(), false);

    let first = &harness.record[0];
    assert_eq!(first.from, Sender::Client);
    let header = LongHeader::parse(&first.bytes).unwrap();
    let (dcid, scid) = (header.dcid.to_vec(), header.scid.to_vec());
    let [mut client_keys, _] = initial_keys(&dcid);
    let Ok(opened) = client_keys.open(&first.bytes[..header.end], header.pn_offset, false, None)
    else {
        panic!("first client Initial did not decrypt");
    };
    let mut crypto = Vec::new();
    for (offset, data) in parse_frames(&opened.payload).crypto {
        assert_eq!(offset as usize, crypto.len());
        crypto.extend(data);
    }
    assert!(crypto.len() > 200);

    // Five pieces; the packet sent first carries the tail, pieces reversed in each packet.
    let cuts = [0, 9, 30, 100, 170, crypto.len()];
    let frame = |i: usize| {
        let (start, end) = (cuts[i], cuts[i + 1]);
        let mut f = vec![0x06, 0x80, 0, 0, 0];
        f[2..5].copy_from_slice(&(start as u32).to_be_bytes()[1..]);
        f.extend((0x4000 | (end - start) as u16).to_be_bytes());
        f.extend(&crypto[start..end]);
        f
    };
    let payload = |pieces: &[usize]| {
        let mut p = vec![0x01]; // PING
        for &i in pieces {
            p.extend(frame(i));
        }
        p.extend([0; 300]);
        p
    };
    let tail = seal_initial(&client_keys, &dcid, &scid, 0, &payload(&[4, 3, 2]));
    let head = seal_initial(&client_keys, &dcid, &scid, 1, &payload(&[1, 0]));

    let mut flow = QuicFlow::new();
    let packets = flow.feed(Sender::Client, &tail, &keys);
    assert_eq!(packets[0].undecryptable, None);
    assert_eq!(
        packets[0].frames[1..4],
        [
            Frame::Crypto {
                offset: 170,
                len: crypto.len() as u64 - 170
            },
            Frame::Crypto {
                offset: 100,
                len: 70
            },
            Frame::Crypto {
                offset: 30,
                len: 70
            },
        ]
    );
    assert_eq!(
        flow.client_random(),
        None,
        "random lies in the first 38 bytes"
    );
    let packets = flow.feed(Sender::Client, &head, &keys);
    assert_eq!(packets[0].packet_number, Some(1));
    assert_eq!(flow.client_random(), reference.client_random());
    assert!(flow.client_random().is_some());

    // The rest of the real capture decodes on top of it.
    for (i, datagram) in harness.record.iter().enumerate().skip(1) {
        for packet in flow.feed(datagram.from, &datagram.bytes, &keys) {
            assert_eq!(packet.undecryptable, None, "datagram {i}");
        }
    }
}

#[test]
fn wrong_secret_is_reported_not_trusted() {
    let mut harness = Harness::new(Options::default());
    harness.run();
    let wrong: String = harness
        .key_log
        .text()
        .lines()
        .map(|l| {
            let mut fields: Vec<String> = l.split(' ').map(str::to_string).collect();
            if fields[0] == "SERVER_TRAFFIC_SECRET_0" {
                fields[2] = "11".repeat(fields[2].len() / 2);
            }
            fields.join(" ") + "\n"
        })
        .collect();
    let (_, decoded) = decode(&harness.record, &wrong, false);
    let server_1rtt: Vec<&Decoded> = decoded
        .iter()
        .filter(|d| d.from == Sender::Server && d.packet.kind == PacketKind::OneRtt)
        .collect();
    assert!(!server_1rtt.is_empty());
    for d in server_1rtt {
        let reason = d.packet.undecryptable.as_deref().unwrap();
        assert!(reason.contains("AEAD tag did not verify"), "{reason}");
    }
}

#[test]
fn garbage_and_truncated_datagrams_never_panic() {
    let mut harness = Harness::new(Options::default());
    harness.run();
    let keys = KeyLog::parse(&harness.key_log.text()).unwrap();
    let mut flow = QuicFlow::new();
    // A cheap deterministic PRNG (xorshift) for mutations.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for datagram in &harness.record {
        let bytes = &datagram.bytes;
        // Every prefix length would be slow; a spread of cuts covers headers and bodies.
        for cut in [
            0,
            1,
            2,
            5,
            6,
            7,
            20,
            21,
            40,
            60,
            bytes.len() / 2,
            bytes.len() - 1,
        ] {
            let cut = cut.min(bytes.len());
            flow.feed(datagram.from, &bytes[..cut], &keys);
        }
        let mut flipped = bytes.clone();
        for _ in 0..3 {
            let at = random() as usize % flipped.len();
            flipped[at] ^= 1 << (random() % 8);
        }
        for packet in flow.feed(datagram.from, &flipped, &keys) {
            assert!(packet.len > 0);
        }
        // The real datagram still decodes after the noise.
        let packets = flow.feed(datagram.from, bytes, &keys);
        assert_eq!(packets.iter().map(|p| p.len).sum::<usize>(), bytes.len());
    }
    for len in 0..300 {
        let noise: Vec<u8> = (0..len).map(|_| random() as u8).collect();
        for from in [Sender::Client, Sender::Server] {
            let packets = flow.feed(from, &noise, &keys);
            assert_eq!(packets.iter().map(|p| p.len).sum::<usize>(), len);
            let mut fresh = QuicFlow::new();
            fresh.feed(from, &noise, &keys);
        }
    }
    // Frame parser on random payloads.
    for len in 0..2000 {
        let noise: Vec<u8> = (0..len % 97).map(|_| random() as u8).collect();
        parse_frames(&noise);
    }
}

#[test]
fn other_quic_versions_are_undecryptable_with_the_version() {
    let mut flow = QuicFlow::new();
    let keys = KeyLog::default();
    let mut v2 = vec![0xc0, 0x6b, 0x33, 0x43, 0xcf, 8];
    v2.extend([0; 60]);
    let packets = flow.feed(Sender::Client, &v2, &keys);
    assert_eq!(packets.len(), 1);
    assert_eq!(packets[0].kind, PacketKind::UnknownVersion(0x6b33_43cf));
    assert!(packets[0]
        .undecryptable
        .as_deref()
        .unwrap()
        .contains("0x6b3343cf"));
    let vn = [0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let packets = flow.feed(Sender::Server, &vn, &keys);
    assert_eq!(packets[0].kind, PacketKind::VersionNegotiation);
    assert_eq!(packets[0].undecryptable, None);
    let packets = flow.feed(Sender::Server, &[0x40, 1, 2, 3], &keys);
    assert!(packets[0]
        .undecryptable
        .as_deref()
        .unwrap()
        .contains("connection ID length unknown"));
}
