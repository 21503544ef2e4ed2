//! One QUIC flow fed datagram by datagram: its connection IDs, its keys per encryption level
//! (Initial from the client's DCID, the others from the key log), its CRYPTO streams and the
//! packets it decodes.

use super::super::reassembly::Prefix as CryptoPrefix;
use super::decoded::{PacketKind, QuicPacket, Sender, StreamChunk};
use super::frames::parse_frames;
use super::header::{short_header_dcid_len, LongHeader};
use super::key_log::KeyLog;
use super::protection::{initial_keys, CipherSuite, DirectionKeys, OpenError, Opened};

/// Keys of one direction of Handshake, 0-RTT or 1-RTT, from the key log.
enum KeySlot {
    /// Not looked up yet, or not in the key log yet.
    Missing,
    /// Derived from the key log, suite not confirmed by a tag yet.
    Candidates(Vec<DirectionKeys>),
    Confirmed(Box<DirectionKeys>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Handshake,
    ZeroRtt,
    OneRtt,
}

impl Level {
    fn index(self) -> usize {
        self as usize
    }
    fn label(self, from: Sender) -> Option<&'static str> {
        match (self, from) {
            (Level::Handshake, Sender::Client) => Some("CLIENT_HANDSHAKE_TRAFFIC_SECRET"),
            (Level::Handshake, Sender::Server) => Some("SERVER_HANDSHAKE_TRAFFIC_SECRET"),
            (Level::ZeroRtt, Sender::Client) => Some("CLIENT_EARLY_TRAFFIC_SECRET"),
            (Level::ZeroRtt, Sender::Server) => None,
            (Level::OneRtt, Sender::Client) => Some("CLIENT_TRAFFIC_SECRET_0"),
            (Level::OneRtt, Sender::Server) => Some("SERVER_TRAFFIC_SECRET_0"),
        }
    }
}

/// One UDP flow (one client addr:port <-> server addr:port). Fed every UDP payload of the flow
/// in the order they were seen, both directions.
pub struct QuicFlow {
    /// DCID of the client's first Initial (or of a Retry's SCID): seeds the Initial keys.
    initial_dcid: Option<Vec<u8>>,
    initial: Option<[DirectionKeys; 2]>,
    /// Each sender's CRYPTO stream in the Initial and the Handshake space.
    crypto: [[CryptoPrefix; 2]; 2],
    client_random: Option<[u8; 32]>,
    /// Connection IDs each sender chose for itself (so its peer's short headers carry them).
    pub(super) cids: [Vec<Vec<u8>>; 2],
    /// Largest packet number per sender per number space (Initial, Handshake, application).
    largest_pn: [[Option<u64>; 3]; 2],
    keys: [[KeySlot; 3]; 2],
    /// The suite a tag confirmed: tried first for the other levels.
    pub(super) suite_hint: Option<CipherSuite>,
    /// Whether decoded packets carry their STREAM frames' data.
    keep_stream_data: bool,
}

impl Default for QuicFlow {
    fn default() -> Self {
        Self::new()
    }
}

impl QuicFlow {
    pub fn new() -> Self {
        let missing = || [KeySlot::Missing, KeySlot::Missing, KeySlot::Missing];
        QuicFlow {
            initial_dcid: None,
            initial: None,
            crypto: Default::default(),
            client_random: None,
            cids: [Vec::new(), Vec::new()],
            largest_pn: [[None; 3]; 2],
            keys: [missing(), missing()],
            suite_hint: None,
            keep_stream_data: false,
        }
    }

    /// A flow whose decoded packets carry their STREAM frames' data
    /// ([`QuicPacket::stream_data`]).
    pub fn with_stream_data() -> Self {
        QuicFlow {
            keep_stream_data: true,
            ..Self::new()
        }
    }

    /// The ClientHello random, once the client's Initial CRYPTO frames revealed it.
    pub fn client_random(&self) -> Option<[u8; 32]> {
        self.client_random
    }

    /// What the handshake showed so far: resumption and early data, from the ClientHello, the
    /// ServerHello and the server's EncryptedExtensions (decrypted with the key log).
    pub fn handshake(&self) -> super::super::tls::HandshakeFacts {
        let [client, server] = [Sender::Client, Sender::Server].map(|s| &self.crypto[s.index()]);
        super::super::tls::facts(
            client[0].contiguous(),
            server[0].contiguous(),
            server[1].contiguous(),
        )
    }

    /// Decodes every (coalesced) packet of one UDP payload.
    pub fn feed(&mut self, from: Sender, udp_payload: &[u8], keys: &KeyLog) -> Vec<QuicPacket> {
        let mut packets = Vec::new();
        let mut rest = udp_payload;
        while !rest.is_empty() {
            // No packet starts with a zero byte after another (the fixed bit is set).
            if !packets.is_empty() && rest.iter().all(|b| *b == 0) {
                packets.push(QuicPacket {
                    kind: PacketKind::Padding,
                    packet_number: None,
                    frames: Vec::new(),
                    undecryptable: None,
                    len: rest.len(),
                    stream_data: Vec::new(),
                });
                break;
            }
            let packet = self.decode_packet(from, rest, keys);
            // Every packet consumes at least one byte, so this loop ends.
            rest = &rest[packet.len.clamp(1, rest.len())..];
            packets.push(packet);
        }
        packets
    }

    fn decode_packet(&mut self, from: Sender, data: &[u8], keys: &KeyLog) -> QuicPacket {
        if data[0] & 0x80 != 0 {
            self.decode_long(from, data, keys)
        } else {
            self.decode_short(from, data, keys)
        }
    }

    fn decode_long(&mut self, from: Sender, data: &[u8], keys: &KeyLog) -> QuicPacket {
        let header = match LongHeader::parse(data) {
            Ok(header) => header,
            Err(reason) => return unreadable(PacketKind::NotQuic, data.len(), reason),
        };
        let kind = header.kind;
        if matches!(kind, PacketKind::VersionNegotiation) {
            return QuicPacket {
                kind,
                packet_number: None,
                frames: Vec::new(),
                undecryptable: None,
                len: data.len(),
                stream_data: Vec::new(),
            };
        }
        if let PacketKind::UnknownVersion(version) = kind {
            let reason = format!("QUIC version {version:#010x} is not supported (only v1)");
            return unreadable(kind, data.len(), reason);
        }
        remember_cid(&mut self.cids[from.index()], header.scid);
        if kind == PacketKind::Retry {
            // The client's next Initials use the Retry's SCID, and so do their keys.
            self.initial_dcid = Some(header.scid.to_vec());
            self.initial = Some(initial_keys(header.scid));
            return QuicPacket {
                kind,
                packet_number: None,
                frames: Vec::new(),
                undecryptable: None,
                len: data.len(),
                stream_data: Vec::new(),
            };
        }
        if kind == PacketKind::Initial && from == Sender::Client && self.initial_dcid.is_none() {
            self.initial_dcid = Some(header.dcid.to_vec());
            self.initial = Some(initial_keys(header.dcid));
        }
        let packet = &data[..header.end];
        let space = match kind {
            PacketKind::Initial => 0,
            PacketKind::Handshake => 1,
            _ => 2,
        };
        let largest = self.largest_pn[from.index()][space];
        let opened = match kind {
            PacketKind::Initial => match self.initial.as_mut() {
                Some(initial) => initial[from.index()]
                    .open(packet, header.pn_offset, false, largest)
                    .map_err(|e| describe(e, "Initial", from, CipherSuite::Aes128Gcm)),
                None => Err(format!(
                    "no client Initial seen before this {} Initial: initial keys unknown",
                    from.name()
                )),
            },
            PacketKind::Handshake => {
                self.open_with_key_log(from, Level::Handshake, packet, header.pn_offset, keys)
            }
            _ => self.open_with_key_log(from, Level::ZeroRtt, packet, header.pn_offset, keys),
        };
        self.finish(from, kind, space, opened, header.end)
    }

    fn decode_short(&mut self, from: Sender, data: &[u8], keys: &KeyLog) -> QuicPacket {
        // The fixed bit is not checked: peers may grease it (RFC 9287).
        let dcid_len = match short_header_dcid_len(&self.cids[from.peer().index()], &data[1..]) {
            Ok(len) => len,
            Err(reason) => return unreadable(PacketKind::OneRtt, data.len(), reason),
        };
        let opened = self.open_with_key_log(from, Level::OneRtt, data, 1 + dcid_len, keys);
        self.finish(from, PacketKind::OneRtt, 2, opened, data.len())
    }

    fn finish(
        &mut self,
        from: Sender,
        kind: PacketKind,
        space: usize,
        opened: Result<Opened, String>,
        len: usize,
    ) -> QuicPacket {
        let opened = match opened {
            Ok(opened) => opened,
            Err(reason) => return unreadable(kind, len, reason),
        };
        let largest = &mut self.largest_pn[from.index()][space];
        *largest = Some(largest.map_or(opened.pn, |l| l.max(opened.pn)));
        let parsed = parse_frames(&opened.payload);
        // Copied only for flows that keep stream data.
        let stream_data = match self.keep_stream_data {
            true => parsed
                .streams
                .iter()
                .map(|&(id, offset, data, fin)| StreamChunk {
                    id,
                    offset,
                    data: data.to_vec(),
                    fin,
                })
                .collect(),
            false => Vec::new(),
        };
        for cid in &parsed.new_cids {
            remember_cid(&mut self.cids[from.index()], cid);
        }
        if space < 2 {
            let stream = &mut self.crypto[from.index()][space];
            for (offset, bytes) in &parsed.crypto {
                stream.insert(*offset, bytes);
            }
        }
        if kind == PacketKind::Initial && from == Sender::Client && self.client_random.is_none() {
            self.client_random = client_random(self.crypto[from.index()][0].contiguous());
        }
        QuicPacket {
            kind,
            packet_number: Some(opened.pn),
            frames: parsed.frames,
            undecryptable: None,
            len,
            stream_data,
        }
    }

    fn open_with_key_log(
        &mut self,
        from: Sender,
        level: Level,
        packet: &[u8],
        pn_offset: usize,
        log: &KeyLog,
    ) -> Result<Opened, String> {
        let level_name = match level {
            Level::Handshake => "Handshake",
            Level::ZeroRtt => "0-RTT",
            Level::OneRtt => "1-RTT",
        };
        let Some(label) = level.label(from) else {
            return Err(format!(
                "{level_name} packet from the server is not allowed"
            ));
        };
        let Some(random) = self.client_random else {
            return Err(format!(
                "{level_name} packet before the ClientHello was seen: client_random unknown"
            ));
        };
        let largest = self.largest_pn[from.index()][if level == Level::Handshake { 1 } else { 2 }];
        let slot = &mut self.keys[from.index()][level.index()];
        if matches!(slot, KeySlot::Missing) {
            let mut candidates = Vec::new();
            for secret in log.get(&random, label) {
                let mut suites = CipherSuite::candidates(secret.len()).to_vec();
                if let Some(hint) = self.suite_hint {
                    suites.sort_by_key(|suite| *suite != hint);
                }
                for suite in suites {
                    candidates.push(DirectionKeys::new(suite, secret.clone()));
                }
            }
            if candidates.is_empty() {
                let lengths: Vec<usize> = log.get(&random, label).iter().map(Vec::len).collect();
                return Err(if lengths.is_empty() {
                    format!(
                        "no key for client_random {}: key log has no {label} line",
                        hex::encode(random)
                    )
                } else {
                    format!(
                        "{label} for client_random {} has {lengths:?} bytes, expected 32 or 48",
                        hex::encode(random)
                    )
                });
            }
            *slot = KeySlot::Candidates(candidates);
        }
        match slot {
            KeySlot::Missing => unreachable!("filled above"),
            KeySlot::Confirmed(keys) => keys
                .open(packet, pn_offset, level == Level::OneRtt, largest)
                .map_err(|e| describe(e, level_name, from, keys.suite)),
            KeySlot::Candidates(candidates) => {
                let mut too_short = false;
                for index in 0..candidates.len() {
                    match candidates[index].open(packet, pn_offset, level == Level::OneRtt, largest)
                    {
                        Ok(opened) => {
                            let keys = candidates.swap_remove(index);
                            self.suite_hint = Some(keys.suite);
                            *slot = KeySlot::Confirmed(Box::new(keys));
                            return Ok(opened);
                        }
                        Err(OpenError::TooShort) => too_short = true,
                        Err(OpenError::BadTag) => {}
                    }
                }
                let suites: Vec<String> = candidates.iter().map(|k| k.suite.to_string()).collect();
                Err(if too_short {
                    format!("{level_name} packet from the {} is too short", from.name())
                } else {
                    format!(
                        "{level_name} packet from the {}: AEAD tag did not verify with the {label} \
                         of the key log (tried {})",
                        from.name(),
                        suites.join(", ")
                    )
                })
            }
        }
    }

    #[cfg(test)]
    pub(super) fn key_updates(&self, from: Sender) -> u64 {
        match &self.keys[from.index()][Level::OneRtt.index()] {
            KeySlot::Confirmed(keys) => keys.key_updates,
            _ => 0,
        }
    }
}

fn describe(error: OpenError, level: &str, from: Sender, suite: CipherSuite) -> String {
    match error {
        OpenError::TooShort => format!("{level} packet from the {} is too short", from.name()),
        OpenError::BadTag => format!(
            "{level} packet from the {}: AEAD tag did not verify ({suite}); corrupted, a \
             stateless reset, or keys from another connection",
            from.name()
        ),
    }
}

fn unreadable(kind: PacketKind, len: usize, reason: String) -> QuicPacket {
    QuicPacket {
        kind,
        packet_number: None,
        frames: Vec::new(),
        undecryptable: Some(reason),
        len,
        stream_data: Vec::new(),
    }
}

fn remember_cid(cids: &mut Vec<Vec<u8>>, cid: &[u8]) {
    if !cids.iter().any(|known| known == cid) {
        cids.push(cid.to_vec());
    }
}

/// The ClientHello's random, once its first 38 bytes are in and it is a ClientHello (the
/// client's Initial CRYPTO stream, gathered from frames in any order: Chromium splits and
/// shuffles its ClientHello across frames and packets).
pub(super) fn client_random(hello: &[u8]) -> Option<[u8; 32]> {
    // Handshake type (1), 3 length bytes, legacy_version (2), random (32): RFC 8446 §4.1.2.
    if hello.len() < 38 || hello[0] != 1 {
        return None;
    }
    hello[6..38].try_into().ok()
}
