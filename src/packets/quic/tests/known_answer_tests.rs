//! Known answers (RFC 9000 and RFC 9001 Appendix A) and single pieces of QUIC decoding:
//! key derivation, header protection, packet numbers, the ClientHello random, every frame
//! type, and the key log parser.

use ring::hkdf;

use super::super::decoded::Frame;
use super::super::flow::client_random;
use super::super::frames::parse_frames;
use super::super::key_log::KeyLog;
use super::super::protection::{
    decode_packet_number, expand_label, expand_label_prk, CipherSuite, DirectionKeys,
    INITIAL_SALT_V1,
};
use crate::packets::reassembly::Prefix as CryptoPrefix;

// -----------------------------------------------------------------------------------------
// Known answers (RFC 9001 Appendix A) and pieces

#[test]
fn initial_keys_match_rfc_9001_a1() {
    let dcid = hex::decode("8394c8f03e515708").unwrap();
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &INITIAL_SALT_V1).extract(&dcid);
    let client = expand_label_prk(&prk, b"client in", 32);
    let server = expand_label_prk(&prk, b"server in", 32);
    let sha256 = hkdf::HKDF_SHA256;
    let hexed =
        |secret: &[u8], label: &[u8], len| hex::encode(expand_label(sha256, secret, label, len));
    assert_eq!(
        hexed(&client, b"quic key", 16),
        "1f369613dd76d5467730efcbe3b1a22d"
    );
    assert_eq!(hexed(&client, b"quic iv", 12), "fa044b2f42a3fd3b46fb255c");
    assert_eq!(
        hexed(&client, b"quic hp", 16),
        "9f50449e04a0e810283a1e9933adedd2"
    );
    assert_eq!(
        hexed(&server, b"quic key", 16),
        "cf3a5331653c364c88f0f379b6067e37"
    );
    assert_eq!(hexed(&server, b"quic iv", 12), "0ac1493ca1905853b0bba03e");
    assert_eq!(
        hexed(&server, b"quic hp", 16),
        "c206b8d9b9f0f37644430b490eeaa314"
    );
}

#[test]
fn chacha_short_header_matches_rfc_9001_a5() {
    let secret =
        hex::decode("9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b").unwrap();
    let mut keys = DirectionKeys::new(CipherSuite::ChaCha20Poly1305, secret.clone());
    let packet = hex::decode("4cfe4189655e5cd55c41f69080575d7999c25a5bfb").unwrap();
    let Ok(opened) = keys.open(&packet, 1, true, Some(654_360_563)) else {
        panic!("RFC 9001 A.5 packet did not decrypt");
    };
    assert_eq!(opened.pn, 654_360_564);
    assert_eq!(opened.payload, vec![0x01]);
    let next = keys.current.next(CipherSuite::ChaCha20Poly1305);
    assert_eq!(
        hex::encode(next.secret),
        "1223504755036d556342ee9361d253421a826c9ecdf3c7148684b36b714881f9"
    );
}

#[test]
fn packet_numbers_decode_per_rfc_9000_a3() {
    // The RFC's example: largest 0xa82f30ea, truncated 0x9b32 in 16 bits.
    assert_eq!(
        decode_packet_number(Some(0xa82f_30ea), 0x9b32, 16),
        0xa82f_9b32
    );
    assert_eq!(decode_packet_number(None, 0, 8), 0);
    assert_eq!(decode_packet_number(Some(0xff), 0x01, 8), 0x101);
    assert_eq!(decode_packet_number(Some(0x101), 0xff, 8), 0xff);
    assert_eq!(decode_packet_number(Some(10), 5, 32), 5);
}

#[test]
fn client_hello_random_from_shuffled_crypto_frames() {
    let mut hello = vec![1, 0, 1, 0, 3, 3];
    let random: Vec<u8> = (100..132).collect();
    hello.extend(&random);
    hello.extend([0xaa; 300]);
    let mut prefix = CryptoPrefix::default();
    // Out of order, overlapping, one frame far past the prefix.
    for (offset, end) in [(200, 338), (20, 60), (3, 25), (30, 31)] {
        prefix.insert(offset as u64, &hello[offset..end]);
        assert_eq!(client_random(prefix.contiguous()), None);
    }
    prefix.insert(0, &hello[..3]);
    assert_eq!(client_random(prefix.contiguous()).unwrap().to_vec(), random);
    // Up to the first gap (60..200 never came).
    assert_eq!(prefix.contiguous(), &hello[..60]);
    assert_eq!(client_random(&[2; 40]), None);
}

#[test]
fn frames_of_every_rfc_9000_type_are_skipped() {
    let payload = hex::decode(
        [
            "0000",                             // 2 × PADDING
            "01",                               // PING
            "030a0001020101010203",             // ACK+ECN: 10, [8..10], gap 1 → [4..5]
            "04010203",                         // RESET_STREAM
            "050102",                           // STOP_SENDING
            "060002abcd",                       // CRYPTO 0..2
            "0702eeee",                         // NEW_TOKEN
            "0e04401003010203",                 // STREAM id 4, off 16, len 3 (LEN|OFF)
            "1001",                             // MAX_DATA
            "110102",                           // MAX_STREAM_DATA
            "1201",                             // MAX_STREAMS (bidi)
            "1301",                             // MAX_STREAMS (uni)
            "1401",                             // DATA_BLOCKED
            "150102",                           // STREAM_DATA_BLOCKED
            "1601",                             // STREAMS_BLOCKED (bidi)
            "1701",                             // STREAMS_BLOCKED (uni)
            "1801000401020304",                 // NEW_CONNECTION_ID seq 1, retire 0, id 01020304,
            "00000000000000000000000000000000", // … its reset token
            "1901",                             // RETIRE_CONNECTION_ID
            "1a0102030405060708",               // PATH_CHALLENGE
            "1b0102030405060708",               // PATH_RESPONSE
            "1c01020141",                       // CONNECTION_CLOSE (transport)
            "1d0100",                           // CONNECTION_CLOSE (application)
            "1e",                               // HANDSHAKE_DONE
            "3102ffff",                         // DATAGRAM with a length
            "0908aabbcc",                       // STREAM id 8, no OFF/LEN, FIN: to the end
        ]
        .concat(),
    )
    .unwrap();
    let parsed = parse_frames(&payload);
    let other = |t| Frame::Other(t);
    assert_eq!(
        parsed.frames,
        vec![
            Frame::Padding { len: 2 },
            Frame::Ping,
            Frame::Ack {
                largest: 10,
                ranges: vec![8..=10, 4..=5]
            },
            other(0x04),
            other(0x05),
            Frame::Crypto { offset: 0, len: 2 },
            other(0x07),
            Frame::Stream {
                id: 4,
                offset: 16,
                len: 3,
                fin: false
            },
            other(0x10),
            other(0x11),
            other(0x12),
            other(0x13),
            other(0x14),
            other(0x15),
            other(0x16),
            other(0x17),
            other(0x18),
            other(0x19),
            other(0x1a),
            other(0x1b),
            other(0x1c),
            other(0x1d),
            other(0x1e),
            other(0x31),
            Frame::Stream {
                id: 8,
                offset: 0,
                len: 3,
                fin: true
            },
        ]
    );
    assert_eq!(parsed.crypto, vec![(0, &[0xab, 0xcd][..])]);
    assert_eq!(parsed.new_cids, vec![&[1, 2, 3, 4][..]]);
}

#[test]
fn an_unknown_or_truncated_frame_ends_the_parse() {
    let frames_of = |hex_payload: &str| parse_frames(&hex::decode(hex_payload).unwrap()).frames;
    // PING, then an unknown type 0x21 whose length nobody knows.
    assert_eq!(frames_of("012101"), vec![Frame::Ping, Frame::Unknown(0x21)]);
    // STREAM with a length of 5 but 1 byte left.
    assert_eq!(
        frames_of("0e0440100501"),
        vec![Frame::Malformed { frame_type: 0x0e }]
    );
    assert_eq!(frames_of("30aabb"), vec![Frame::Other(0x30)]);
}

#[test]
fn key_log_parse_errors_name_the_line() {
    let random = "ab".repeat(32);
    let good = format!(
        "# comment\n\nCLIENT_TRAFFIC_SECRET_0 {random} {}\n",
        "cd".repeat(32)
    );
    let log = KeyLog::parse(&good).unwrap();
    assert!(!log.is_empty());
    assert_eq!(
        log.get(&[0xab; 32], "CLIENT_TRAFFIC_SECRET_0"),
        &[vec![0xcd; 32]]
    );
    assert!(KeyLog::parse("# nothing\n\n").unwrap().is_empty());

    let cases = [
        (
            format!("{good}CLIENT_RANDOM {random}\n"),
            4,
            "found 2 field(s)",
        ),
        (format!("{good}lower {random} cd\n"), 4, "label `lower`"),
        (
            format!("{good}X zz {random}\n"),
            4,
            "client_random is not hex",
        ),
        (
            format!("X {} cd\n", "ab".repeat(31)),
            1,
            "client_random has 31 bytes",
        ),
        (format!("\n\nX {random} xyz\n"), 3, "secret is not hex"),
    ];
    for (text, line, problem) in cases {
        let error = KeyLog::parse(&text).unwrap_err();
        assert_eq!(error.line, line, "{error}");
        assert!(error.to_string().contains(problem), "{error}");
        assert!(error
            .to_string()
            .starts_with(&format!("key log line {line}:")));
    }
}

#[test]
fn key_log_merge_keeps_both_secrets_when_logs_disagree() {
    let random = "01".repeat(32);
    let mut a = KeyLog::parse(&format!(
        "SERVER_TRAFFIC_SECRET_0 {random} {}",
        "aa".repeat(32)
    ))
    .unwrap();
    let b = KeyLog::parse(&format!(
        "SERVER_TRAFFIC_SECRET_0 {random} {}\nSERVER_TRAFFIC_SECRET_0 {random} {}",
        "aa".repeat(32),
        "bb".repeat(32)
    ))
    .unwrap();
    a.merge(b);
    assert_eq!(
        a.get(&[1; 32], "SERVER_TRAFFIC_SECRET_0"),
        &[vec![0xaa; 32], vec![0xbb; 32]]
    );
}
