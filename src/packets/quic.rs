//! Decrypts captured QUIC v1 packets (RFC 9000/9001) with a TLS key log, to see which STREAM
//! frames each packet carried.
//!
//! Pure: the caller feeds UDP payloads of one flow in capture order and gets decoded packets
//! back. Nothing here does IO or reads a clock. Any input (garbage, truncated, missing keys)
//! yields packets marked `undecryptable` with the reason, never a panic.

use std::collections::HashMap;
use std::fmt;
use std::ops::RangeInclusive;

use ring::aead::{self, quic as hp};
use ring::hkdf;

const QUIC_V1: u32 = 0x0000_0001;
/// RFC 9001 §5.2.
const INITIAL_SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];
const MAX_CID_LEN: usize = 20;
const SAMPLE_LEN: usize = 16;
const TAG_LEN: usize = 16;
/// Handshake type (1), 3 length bytes, legacy_version (2), random (32): RFC 8446 §4.1.2.
use super::reassembly::Prefix as CryptoPrefix;

// ---------------------------------------------------------------------------------------------
// Key log

/// NSS key log: lines `LABEL <client_random hex> <secret hex>`; '#' comments and blank lines
/// skipped.
#[derive(Debug, Clone, Default)]
pub struct KeyLog {
    /// Several secrets per (client_random, label) are kept when logs disagree: the AEAD tag
    /// decides which one is right.
    secrets: HashMap<([u8; 32], String), Vec<Vec<u8>>>,
}

/// A key log line that is not `LABEL <client_random hex> <secret hex>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key log line {line}: {problem}")]
pub struct KeyLogError {
    /// 1-based line number.
    pub line: usize,
    pub problem: String,
}

impl KeyLog {
    pub fn parse(text: &str) -> Result<KeyLog, KeyLogError> {
        let mut log = KeyLog::default();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let error = |problem: String| KeyLogError {
                line: index + 1,
                problem,
            };
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let [label, random, secret] = fields[..] else {
                return Err(error(format!(
                    "expected `LABEL <client_random hex> <secret hex>`, found {} field(s)",
                    fields.len()
                )));
            };
            if !label
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            {
                return Err(error(format!(
                    "label `{label}` is not an NSS key log label (A-Z, 0-9 and '_' only)"
                )));
            }
            let random =
                hex::decode(random).map_err(|e| error(format!("client_random is not hex: {e}")))?;
            let random: [u8; 32] = random.as_slice().try_into().map_err(|_| {
                error(format!(
                    "client_random has {} bytes, expected 32",
                    random.len()
                ))
            })?;
            let secret =
                hex::decode(secret).map_err(|e| error(format!("secret is not hex: {e}")))?;
            if secret.is_empty() {
                return Err(error("secret is empty".to_string()));
            }
            log.insert(random, label.to_string(), secret);
        }
        Ok(log)
    }

    pub fn merge(&mut self, other: KeyLog) {
        for ((random, label), secrets) in other.secrets {
            for secret in secrets {
                self.insert(random, label.clone(), secret);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    fn insert(&mut self, random: [u8; 32], label: String, secret: Vec<u8>) {
        let entry = self.secrets.entry((random, label)).or_default();
        if !entry.contains(&secret) {
            entry.push(secret);
        }
    }

    /// Whether the log has a `label` line for the connection of `random`.
    pub fn has(&self, random: &[u8; 32], label: &str) -> bool {
        !self.get(random, label).is_empty()
    }

    /// Every secret of `label` for the connection of `random`.
    pub(super) fn get(&self, random: &[u8; 32], label: &str) -> &[Vec<u8>] {
        self.secrets
            .get(&(*random, label.to_string()))
            .map_or(&[], Vec::as_slice)
    }
}

// ---------------------------------------------------------------------------------------------
// Public packet model

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sender {
    Client,
    Server,
}

impl Sender {
    fn index(self) -> usize {
        self as usize
    }
    fn peer(self) -> Sender {
        match self {
            Sender::Client => Sender::Server,
            Sender::Server => Sender::Client,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Sender::Client => "client",
            Sender::Server => "server",
        }
    }
}

/// What kind of QUIC packet this was. Retry and Version Negotiation have no packet number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    Initial,
    ZeroRtt,
    Handshake,
    OneRtt,
    Retry,
    VersionNegotiation,
    /// A long header with a version other than v1: its layout is unknown.
    UnknownVersion(u32),
    /// Bytes that are not a QUIC packet (a long header cut short or with impossible fields).
    NotQuic,
    /// Zero bytes after the last packet of a datagram: padding outside any packet, as Firefox's
    /// neqo pads the datagrams of its Initials (RFC 9000 §14.1 lets a receiver ignore it).
    Padding,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicPacket {
    pub kind: PacketKind,
    /// Full packet number (decoded against the largest seen); None until header protection
    /// was removed.
    pub packet_number: Option<u64>,
    pub frames: Vec<Frame>,
    /// Why the payload could not be read (missing key, wrong version, bad tag...).
    pub undecryptable: Option<String>,
    /// Bytes of the datagram this packet occupied.
    pub len: usize,
    /// The STREAM frames' data, in frame order (empty unless the flow was made
    /// [`QuicFlow::with_stream_data`]).
    pub stream_data: Vec<StreamChunk>,
}

/// The data of one STREAM frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamChunk {
    pub id: u64,
    pub offset: u64,
    pub data: Vec<u8>,
    pub fin: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A run of consecutive PADDING bytes.
    Padding {
        len: usize,
    },
    Ping,
    /// `ranges` are acknowledged packet numbers, highest first.
    Ack {
        largest: u64,
        ranges: Vec<RangeInclusive<u64>>,
    },
    Crypto {
        offset: u64,
        len: u64,
    },
    Stream {
        id: u64,
        offset: u64,
        len: u64,
        fin: bool,
    },
    /// A known frame type this decoder skips (RESET_STREAM, MAX_DATA, NEW_CONNECTION_ID, ...).
    Other(u64),
    /// An unknown frame type: its length is unknown, so the rest of the packet is not parsed.
    Unknown(u64),
    /// A frame running past the end of the packet; the rest of the packet is not parsed.
    Malformed {
        frame_type: u64,
    },
}

// ---------------------------------------------------------------------------------------------
// Crypto

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CipherSuite {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
}

impl CipherSuite {
    /// The key log does not name the suite: the secret length narrows it down (SHA-256 → 32
    /// bytes, SHA-384 → 48), the AEAD tag picks among the rest.
    pub(super) fn candidates(secret_len: usize) -> &'static [CipherSuite] {
        match secret_len {
            32 => &[CipherSuite::Aes128Gcm, CipherSuite::ChaCha20Poly1305],
            48 => &[CipherSuite::Aes256Gcm],
            _ => &[],
        }
    }
    pub(super) fn aead(self) -> &'static aead::Algorithm {
        match self {
            CipherSuite::Aes128Gcm => &aead::AES_128_GCM,
            CipherSuite::Aes256Gcm => &aead::AES_256_GCM,
            CipherSuite::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
    fn header_protection(self) -> &'static hp::Algorithm {
        match self {
            CipherSuite::Aes128Gcm => &hp::AES_128,
            CipherSuite::Aes256Gcm => &hp::AES_256,
            CipherSuite::ChaCha20Poly1305 => &hp::CHACHA20,
        }
    }
    pub(super) fn hkdf(self) -> hkdf::Algorithm {
        match self {
            CipherSuite::Aes256Gcm => hkdf::HKDF_SHA384,
            _ => hkdf::HKDF_SHA256,
        }
    }
}

impl fmt::Display for CipherSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CipherSuite::Aes128Gcm => "AES-128-GCM",
            CipherSuite::Aes256Gcm => "AES-256-GCM",
            CipherSuite::ChaCha20Poly1305 => "ChaCha20-Poly1305",
        })
    }
}

struct OkmLen(usize);

impl hkdf::KeyType for OkmLen {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
pub(super) fn expand_label(
    hash: hkdf::Algorithm,
    secret: &[u8],
    label: &[u8],
    len: usize,
) -> Vec<u8> {
    let prk = hkdf::Prk::new_less_safe(hash, secret);
    expand_label_prk(&prk, label, len)
}

fn expand_label_prk(prk: &hkdf::Prk, label: &[u8], len: usize) -> Vec<u8> {
    let out_len = (len as u16).to_be_bytes();
    let label_len = [(b"tls13 ".len() + label.len()) as u8];
    let info: [&[u8]; 5] = [&out_len, &label_len, b"tls13 ", label, &[0]];
    let mut out = vec![0; len];
    // Lengths here are at most 48 bytes, far below HKDF's 255 * hash length limit.
    prk.expand(&info, OkmLen(len))
        .and_then(|okm| okm.fill(&mut out))
        .expect("HKDF-Expand-Label output of at most 48 bytes");
    out
}

/// Packet protection keys of one key phase generation.
struct Generation {
    secret: Vec<u8>,
    key: aead::LessSafeKey,
    iv: [u8; 12],
}

impl Generation {
    fn new(suite: CipherSuite, secret: Vec<u8>) -> Generation {
        let key_bytes = expand_label(suite.hkdf(), &secret, b"quic key", suite.aead().key_len());
        let key = aead::UnboundKey::new(suite.aead(), &key_bytes)
            .expect("key length matches the AEAD algorithm");
        let iv_bytes = expand_label(suite.hkdf(), &secret, b"quic iv", 12);
        let mut iv = [0; 12];
        iv.copy_from_slice(&iv_bytes);
        Generation {
            secret,
            key: aead::LessSafeKey::new(key),
            iv,
        }
    }

    /// RFC 9001 §6.1: the next generation after a key update.
    fn next(&self, suite: CipherSuite) -> Generation {
        let secret = expand_label(suite.hkdf(), &self.secret, b"quic ku", self.secret.len());
        Generation::new(suite, secret)
    }

    fn open(&self, header: &[u8], ciphertext: &[u8], pn: u64) -> Option<Vec<u8>> {
        let mut nonce = self.iv;
        for (n, p) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= p;
        }
        let mut buf = ciphertext.to_vec();
        let len = self
            .key
            .open_in_place(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(header),
                &mut buf,
            )
            .ok()?
            .len();
        buf.truncate(len);
        Some(buf)
    }
}

/// Keys for one direction of one encryption level.
struct DirectionKeys {
    suite: CipherSuite,
    header: hp::HeaderProtectionKey,
    current: Generation,
    /// Key phase bit of `current` (1-RTT only).
    phase: bool,
    next: Option<Generation>,
    /// Kept after a key update for packets that were reordered across it.
    previous: Option<Generation>,
    key_updates: u64,
}

impl DirectionKeys {
    fn new(suite: CipherSuite, secret: Vec<u8>) -> DirectionKeys {
        let hp_bytes = expand_label(
            suite.hkdf(),
            &secret,
            b"quic hp",
            suite.header_protection().key_len(),
        );
        let header = hp::HeaderProtectionKey::new(suite.header_protection(), &hp_bytes)
            .expect("header protection key length matches the algorithm");
        DirectionKeys {
            suite,
            header,
            current: Generation::new(suite, secret),
            phase: false,
            next: None,
            previous: None,
            key_updates: 0,
        }
    }

    /// Removes header protection and the AEAD. `packet` ends where this packet ends.
    fn open(
        &mut self,
        packet: &[u8],
        pn_offset: usize,
        short: bool,
        largest: Option<u64>,
    ) -> Result<Opened, OpenError> {
        let sample_at = pn_offset + 4;
        let Some(sample) = packet.get(sample_at..sample_at + SAMPLE_LEN) else {
            return Err(OpenError::TooShort);
        };
        let mask = self
            .header
            .new_mask(sample)
            .map_err(|_| OpenError::TooShort)?;
        let mut first = packet[0];
        first ^= mask[0] & if short { 0x1f } else { 0x0f };
        let pn_len = usize::from(first & 0x03) + 1;
        let mut header = packet[..pn_offset + pn_len].to_vec();
        header[0] = first;
        let mut truncated = 0u64;
        for i in 0..pn_len {
            header[pn_offset + i] ^= mask[1 + i];
            truncated = truncated << 8 | u64::from(header[pn_offset + i]);
        }
        let pn = decode_packet_number(largest, truncated, pn_len * 8);
        let ciphertext = &packet[pn_offset + pn_len..];
        if ciphertext.len() < TAG_LEN {
            return Err(OpenError::TooShort);
        }
        let phase = first & 0x04 != 0;
        if !short || phase == self.phase {
            return match self.current.open(&header, ciphertext, pn) {
                Some(payload) => Ok(Opened { pn, payload }),
                None => Err(OpenError::BadTag),
            };
        }
        // Flipped key phase: a key update, or a packet from before the last one.
        let suite = self.suite;
        let next = self.next.get_or_insert_with(|| self.current.next(suite));
        if let Some(payload) = next.open(&header, ciphertext, pn) {
            let next = self.next.take().expect("just inserted");
            self.previous = Some(std::mem::replace(&mut self.current, next));
            self.phase = !self.phase;
            self.key_updates += 1;
            return Ok(Opened { pn, payload });
        }
        if let Some(payload) = self
            .previous
            .as_ref()
            .and_then(|prev| prev.open(&header, ciphertext, pn))
        {
            return Ok(Opened { pn, payload });
        }
        Err(OpenError::BadTag)
    }
}

struct Opened {
    pn: u64,
    payload: Vec<u8>,
}

enum OpenError {
    TooShort,
    BadTag,
}

/// RFC 9000 §A.3.
fn decode_packet_number(largest: Option<u64>, truncated: u64, bits: usize) -> u64 {
    let expected = largest.map_or(0, |l| l + 1);
    let window = 1u64 << bits;
    let half = window / 2;
    let candidate = (expected & !(window - 1)) | truncated;
    if candidate + half <= expected && candidate < (1 << 62) - window {
        candidate + window
    } else if candidate > expected + half && candidate >= window {
        candidate - window
    } else {
        candidate
    }
}

fn initial_keys(dcid: &[u8]) -> [DirectionKeys; 2] {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &INITIAL_SALT_V1).extract(dcid);
    let client = expand_label_prk(&prk, b"client in", 32);
    let server = expand_label_prk(&prk, b"server in", 32);
    [
        DirectionKeys::new(CipherSuite::Aes128Gcm, client),
        DirectionKeys::new(CipherSuite::Aes128Gcm, server),
    ]
}

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

// ---------------------------------------------------------------------------------------------
// Flow

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
    cids: [Vec<Vec<u8>>; 2],
    /// Largest packet number per sender per number space (Initial, Handshake, application).
    largest_pn: [[Option<u64>; 3]; 2],
    keys: [[KeySlot; 3]; 2],
    /// The suite a tag confirmed: tried first for the other levels.
    suite_hint: Option<CipherSuite>,
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
    pub fn handshake(&self) -> super::tls::HandshakeFacts {
        let [client, server] = [Sender::Client, Sender::Server].map(|s| &self.crypto[s.index()]);
        super::tls::facts(
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
    fn key_updates(&self, from: Sender) -> u64 {
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

/// A short header does not carry its DCID length: use the longest connection ID of the
/// receiver this packet starts with, else the length all its known IDs share.
fn short_header_dcid_len(
    receiver_cids: &[Vec<u8>],
    after_first_byte: &[u8],
) -> Result<usize, String> {
    if let Some(cid) = receiver_cids
        .iter()
        .filter(|cid| after_first_byte.starts_with(cid))
        .max_by_key(|cid| cid.len())
    {
        return Ok(cid.len());
    }
    match receiver_cids.first() {
        Some(first) if receiver_cids.iter().all(|cid| cid.len() == first.len()) => Ok(first.len()),
        Some(_) => Err("short header with an unknown connection ID of unknown length".to_string()),
        None => {
            Err("short header before any long header: connection ID length unknown".to_string())
        }
    }
}

struct LongHeader<'a> {
    kind: PacketKind,
    dcid: &'a [u8],
    scid: &'a [u8],
    pn_offset: usize,
    /// Where this packet ends in the datagram.
    end: usize,
}

impl<'a> LongHeader<'a> {
    fn parse(data: &'a [u8]) -> Result<LongHeader<'a>, String> {
        let truncated = || "long header cut short".to_string();
        let mut r = Reader::new(data);
        let first = r.u8().ok_or_else(truncated)?;
        let version = r.u32().ok_or_else(truncated)?;
        let kind = match version {
            0 => PacketKind::VersionNegotiation,
            QUIC_V1 => match (first >> 4) & 0x03 {
                0 => PacketKind::Initial,
                1 => PacketKind::ZeroRtt,
                2 => PacketKind::Handshake,
                _ => PacketKind::Retry,
            },
            other => PacketKind::UnknownVersion(other),
        };
        let whole = |kind| LongHeader {
            kind,
            dcid: &[],
            scid: &[],
            pn_offset: 0,
            end: data.len(),
        };
        if !matches!(
            kind,
            PacketKind::Initial | PacketKind::ZeroRtt | PacketKind::Handshake | PacketKind::Retry
        ) {
            return Ok(whole(kind));
        }
        // The fixed bit is not checked: peers may grease it (RFC 9287).
        let dcid_len = usize::from(r.u8().ok_or_else(truncated)?);
        if dcid_len > MAX_CID_LEN {
            return Err(format!(
                "destination connection ID of {dcid_len} bytes (max 20)"
            ));
        }
        let dcid = r.bytes(dcid_len).ok_or_else(truncated)?;
        let scid_len = usize::from(r.u8().ok_or_else(truncated)?);
        if scid_len > MAX_CID_LEN {
            return Err(format!("source connection ID of {scid_len} bytes (max 20)"));
        }
        let scid = r.bytes(scid_len).ok_or_else(truncated)?;
        if kind == PacketKind::Retry {
            return Ok(LongHeader {
                scid,
                dcid,
                ..whole(kind)
            });
        }
        if kind == PacketKind::Initial {
            let token_len = r.varint().ok_or_else(truncated)?;
            r.bytes(usize::try_from(token_len).map_err(|_| truncated())?)
                .ok_or_else(truncated)?;
        }
        let length = r.varint().ok_or_else(truncated)?;
        let pn_offset = r.pos;
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| pn_offset.checked_add(l))
            .filter(|end| *end <= data.len())
            .ok_or_else(|| {
                format!(
                    "length field says {length} bytes but only {} remain in the datagram",
                    data.len() - pn_offset
                )
            })?;
        Ok(LongHeader {
            kind,
            dcid,
            scid,
            pn_offset,
            end,
        })
    }
}

/// The ClientHello's random, once its first 38 bytes are in and it is a ClientHello (the
/// client's Initial CRYPTO stream, gathered from frames in any order: Chromium splits and
/// shuffles its ClientHello across frames and packets).
fn client_random(hello: &[u8]) -> Option<[u8; 32]> {
    if hello.len() < 38 || hello[0] != 1 {
        return None;
    }
    hello[6..38].try_into().ok()
}

// ---------------------------------------------------------------------------------------------
// Frames

struct ParsedFrames<'a> {
    frames: Vec<Frame>,
    crypto: Vec<(u64, &'a [u8])>,
    new_cids: Vec<&'a [u8]>,
    /// Each STREAM frame's id, offset, data and FIN.
    streams: Vec<(u64, u64, &'a [u8], bool)>,
}

fn parse_frames(payload: &[u8]) -> ParsedFrames<'_> {
    let mut parsed = ParsedFrames {
        frames: Vec::new(),
        crypto: Vec::new(),
        new_cids: Vec::new(),
        streams: Vec::new(),
    };
    let mut r = Reader::new(payload);
    while !r.is_empty() {
        let Some(frame_type) = r.varint() else {
            parsed.frames.push(Frame::Malformed { frame_type: 0 });
            break;
        };
        match parse_frame(frame_type, &mut r, &mut parsed) {
            Some(Some(frame)) => parsed.frames.push(frame),
            Some(None) => {
                parsed.frames.push(Frame::Unknown(frame_type));
                break;
            }
            None => {
                parsed.frames.push(Frame::Malformed { frame_type });
                break;
            }
        }
    }
    parsed
}

/// `None`: the frame runs past the payload. `Some(None)`: unknown frame type.
fn parse_frame<'a>(
    frame_type: u64,
    r: &mut Reader<'a>,
    parsed: &mut ParsedFrames<'a>,
) -> Option<Option<Frame>> {
    let frame = match frame_type {
        0x00 => {
            let mut len = 1;
            while r.peek() == Some(0) {
                r.pos += 1;
                len += 1;
            }
            Frame::Padding { len }
        }
        0x01 => Frame::Ping,
        0x02 | 0x03 => {
            let largest = r.varint()?;
            let _delay = r.varint()?;
            let count = r.varint()?;
            let first = r.varint()?;
            let mut smallest = largest.checked_sub(first)?;
            let mut ranges = vec![smallest..=largest];
            for _ in 0..count {
                let gap = r.varint()?;
                let len = r.varint()?;
                let high = smallest.checked_sub(gap)?.checked_sub(2)?;
                smallest = high.checked_sub(len)?;
                ranges.push(smallest..=high);
            }
            if frame_type == 0x03 {
                r.varints(3)?;
            }
            Frame::Ack { largest, ranges }
        }
        0x04 => {
            r.varints(3)?;
            Frame::Other(frame_type)
        }
        0x05 | 0x11 | 0x15 => {
            r.varints(2)?;
            Frame::Other(frame_type)
        }
        0x06 => {
            let offset = r.varint()?;
            let len = r.varint()?;
            let data = r.bytes(usize::try_from(len).ok()?)?;
            parsed.crypto.push((offset, data));
            Frame::Crypto { offset, len }
        }
        0x07 => {
            let len = r.varint()?;
            r.bytes(usize::try_from(len).ok()?)?;
            Frame::Other(frame_type)
        }
        0x08..=0x0f => {
            let id = r.varint()?;
            let offset = if frame_type & 0x04 != 0 {
                r.varint()?
            } else {
                0
            };
            let data = if frame_type & 0x02 != 0 {
                let len = r.varint()?;
                r.bytes(usize::try_from(len).ok()?)?
            } else {
                r.rest()
            };
            let fin = frame_type & 0x01 != 0;
            parsed.streams.push((id, offset, data, fin));
            Frame::Stream {
                id,
                offset,
                len: data.len() as u64,
                fin,
            }
        }
        0x10 | 0x12 | 0x13 | 0x14 | 0x16 | 0x17 | 0x19 => {
            r.varint()?;
            Frame::Other(frame_type)
        }
        0x18 => {
            r.varints(2)?;
            let len = usize::from(r.u8()?);
            if len == 0 || len > MAX_CID_LEN {
                return None;
            }
            parsed.new_cids.push(r.bytes(len)?);
            r.bytes(16)?;
            Frame::Other(frame_type)
        }
        0x1a | 0x1b => {
            r.bytes(8)?;
            Frame::Other(frame_type)
        }
        0x1c | 0x1d => {
            r.varints(if frame_type == 0x1c { 2 } else { 1 })?;
            let len = r.varint()?;
            r.bytes(usize::try_from(len).ok()?)?;
            Frame::Other(frame_type)
        }
        // HANDSHAKE_DONE; IMMEDIATE_ACK (draft-ietf-quic-ack-frequency).
        0x1e | 0x1f => Frame::Other(frame_type),
        0x30 => {
            r.rest();
            Frame::Other(frame_type)
        }
        0x31 => {
            let len = r.varint()?;
            r.bytes(usize::try_from(len).ok()?)?;
            Frame::Other(frame_type)
        }
        // ACK_FREQUENCY (draft-ietf-quic-ack-frequency): four varints.
        0xaf => {
            r.varints(4)?;
            Frame::Other(frame_type)
        }
        _ => return Some(None),
    };
    Some(Some(frame))
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }
    fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }
    fn u8(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }
    fn u32(&mut self) -> Option<u32> {
        let bytes = self.bytes(4)?;
        Some(u32::from_be_bytes(bytes.try_into().ok()?))
    }
    fn bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(len)?;
        let bytes = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }
    fn rest(&mut self) -> &'a [u8] {
        let rest = &self.data[self.pos.min(self.data.len())..];
        self.pos = self.data.len();
        rest
    }
    /// RFC 9000 §16.
    fn varint(&mut self) -> Option<u64> {
        let first = self.u8()?;
        let len = 1usize << (first >> 6);
        let mut value = u64::from(first & 0x3f);
        for byte in self.bytes(len - 1)? {
            value = value << 8 | u64::from(*byte);
        }
        Some(value)
    }
    fn varints(&mut self, count: usize) -> Option<()> {
        for _ in 0..count {
            self.varint()?;
        }
        Some(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::{BTreeMap, VecDeque};
    use std::net::{Ipv6Addr, SocketAddr};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
    use quinn_proto::{
        Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig,
        RandomConnectionIdGenerator, ReadError, StreamId, TransportConfig, VarInt, WriteError,
    };
    use rustls::crypto::ring::cipher_suite;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use rustls::SupportedCipherSuite;

    // -----------------------------------------------------------------------------------------
    // Fixture: a real quinn-proto client and server pumped in memory with a fake clock.

    /// rustls KeyLog writing NSS key log lines in memory.
    #[derive(Debug, Default)]
    pub(crate) struct MemoryKeyLog(Mutex<String>);

    impl rustls::KeyLog for MemoryKeyLog {
        fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
            let line = format!(
                "{label} {} {}\n",
                hex::encode(client_random),
                hex::encode(secret)
            );
            self.0.lock().unwrap().push_str(&line);
        }
    }

    impl MemoryKeyLog {
        pub(crate) fn text(&self) -> String {
            self.0.lock().unwrap().clone()
        }
    }

    pub(crate) struct Options {
        suite: SupportedCipherSuite,
        client_cid_len: usize,
        streams: usize,
        response_len: usize,
        /// Rounds of `streams` requests, 1 s apart; the server forces a key update before
        /// every round after the first when `key_updates` is set.
        rounds: usize,
        key_updates: bool,
    }

    impl Default for Options {
        fn default() -> Self {
            Options {
                suite: cipher_suite::TLS13_AES_128_GCM_SHA256,
                client_cid_len: 8,
                streams: 3,
                response_len: 20_000,
                rounds: 1,
                key_updates: false,
            }
        }
    }

    pub(crate) struct Datagram {
        pub(crate) from: Sender,
        pub(crate) bytes: Vec<u8>,
        pub(crate) dropped: bool,
    }

    struct Side {
        endpoint: Endpoint,
        addr: SocketAddr,
        conn: Option<(ConnectionHandle, Connection)>,
        inbox: VecDeque<(Instant, Vec<u8>)>,
        timeout: Option<Instant>,
    }

    type DropRule = Box<dyn FnMut(Sender, &[u8], &str) -> bool>;

    pub(crate) struct Harness {
        opts: Options,
        client: Side,
        server: Side,
        now: Instant,
        latency: Duration,
        pub(crate) record: Vec<Datagram>,
        pub(crate) key_log: Arc<MemoryKeyLog>,
        drop_rule: DropRule,
        // Client application: requests per round, responses received.
        round: usize,
        next_round_at: Option<Instant>,
        /// Index in `record` where each round began, and its end.
        round_starts: Vec<usize>,
        /// For a second connection resuming the first one's TLS session.
        client_config: quinn_proto::ClientConfig,
        /// Connections are being closed: losing them is expected.
        closing: bool,
        /// Set by the client application, done by the server's connection.
        key_update_due: bool,
        client_streams: Vec<StreamId>,
        client_received: BTreeMap<u64, (u64, bool)>,
        // Server application: requests read, response bytes still to write, bytes written.
        server_requests: BTreeMap<u64, (StreamId, bool)>,
        server_pending: BTreeMap<u64, (StreamId, usize)>,
        server_written: BTreeMap<u64, u64>,
        client_written: BTreeMap<u64, u64>,
    }

    fn self_signed() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
        (certified.cert.der().clone(), key.into())
    }

    fn provider(suite: SupportedCipherSuite) -> Arc<rustls::crypto::CryptoProvider> {
        let mut provider = rustls::crypto::ring::default_provider();
        provider.cipher_suites = vec![suite];
        Arc::new(provider)
    }

    /// Initial packets always use AES-128-GCM, whatever the negotiated suite.
    fn initial_suite() -> rustls::quic::Suite {
        cipher_suite::TLS13_AES_128_GCM_SHA256
            .tls13()
            .unwrap()
            .quic_suite()
            .unwrap()
    }

    impl Harness {
        pub(crate) fn new(opts: Options) -> Harness {
            let key_log = Arc::new(MemoryKeyLog::default());
            let (cert, key) = self_signed();

            let mut server_tls = rustls::ServerConfig::builder_with_provider(provider(opts.suite))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![cert.clone()], key)
                .unwrap();
            server_tls.alpn_protocols = vec![b"h3".to_vec()];
            server_tls.key_log = key_log.clone();
            server_tls.max_early_data_size = u32::MAX;
            let server_crypto =
                QuicServerConfig::with_initial(Arc::new(server_tls), initial_suite()).unwrap();
            let server_config = quinn_proto::ServerConfig::with_crypto(Arc::new(server_crypto));

            let mut roots = rustls::RootCertStore::empty();
            roots.add(cert).unwrap();
            let mut client_tls = rustls::ClientConfig::builder_with_provider(provider(opts.suite))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            client_tls.alpn_protocols = vec![b"h3".to_vec()];
            client_tls.key_log = key_log.clone();
            client_tls.enable_early_data = true;
            let client_crypto =
                QuicClientConfig::with_initial(Arc::new(client_tls), initial_suite()).unwrap();
            let mut client_config = quinn_proto::ClientConfig::new(Arc::new(client_crypto));
            // Small windows make the client send MAX_STREAM_DATA / MAX_DATA mid-transfer.
            let mut transport = TransportConfig::default();
            transport
                .stream_receive_window(VarInt::from_u32(8_000))
                .receive_window(VarInt::from_u32(24_000));
            client_config.transport_config(Arc::new(transport));
            let reconnect_config = client_config.clone();

            let mut client_endpoint_config = EndpointConfig::default();
            let cid_len = opts.client_cid_len;
            client_endpoint_config
                .cid_generator(move || Box::new(RandomConnectionIdGenerator::new(cid_len)));
            let server_endpoint = Endpoint::new(
                Arc::new(EndpointConfig::default()),
                Some(Arc::new(server_config)),
                false,
                Some([7; 32]),
            );
            let mut client_endpoint =
                Endpoint::new(Arc::new(client_endpoint_config), None, false, Some([9; 32]));

            let now = Instant::now();
            let client_addr = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 40_000);
            let server_addr = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 4433);
            let conn = client_endpoint
                .connect(now, client_config.clone(), server_addr, "localhost")
                .unwrap();
            Harness {
                opts,
                client: Side {
                    endpoint: client_endpoint,
                    addr: client_addr,
                    conn: Some(conn),
                    inbox: VecDeque::new(),
                    timeout: None,
                },
                server: Side {
                    endpoint: server_endpoint,
                    addr: server_addr,
                    conn: None,
                    inbox: VecDeque::new(),
                    timeout: None,
                },
                now,
                latency: Duration::from_millis(10),
                record: Vec::new(),
                key_log,
                drop_rule: Box::new(|_, _, _| false),
                round: 0,
                next_round_at: None,
                key_update_due: false,
                client_config: reconnect_config,
                closing: false,
                round_starts: Vec::new(),
                client_streams: Vec::new(),
                client_received: BTreeMap::new(),
                server_requests: BTreeMap::new(),
                server_pending: BTreeMap::new(),
                server_written: BTreeMap::new(),
                client_written: BTreeMap::new(),
            }
        }

        /// Closes the connection, then opens a new one from another client port resuming the
        /// TLS session (so with 0-RTT). `record` and the applications start afresh.
        pub(crate) fn reconnect(&mut self) {
            self.closing = true;
            let now = self.now;
            let conn = &mut self.client.conn.as_mut().unwrap().1;
            conn.close(now, VarInt::from_u32(0), bytes::Bytes::new());
            for _ in 0..10_000 {
                self.step();
                let closed = self.client.conn.as_ref().unwrap().1.is_drained();
                if closed && self.client.inbox.is_empty() && self.server.inbox.is_empty() {
                    break;
                }
            }
            assert!(self.record.iter().any(|d| d.from == Sender::Client));
            self.closing = false;
            self.record.clear();
            self.round = 0;
            self.next_round_at = None;
            self.round_starts.clear();
            self.client_streams.clear();
            self.client_received.clear();
            self.client_written.clear();
            self.server_requests.clear();
            self.server_written.clear();
            self.server.conn = None;
            self.client.addr.set_port(self.client.addr.port() + 1);
            let server_addr = self.server.addr;
            let conn = self
                .client
                .endpoint
                .connect(
                    self.now,
                    self.client_config.clone(),
                    server_addr,
                    "localhost",
                )
                .unwrap();
            assert!(conn.1.has_0rtt(), "session not resumable");
            self.client.conn = Some(conn);
        }

        fn done(&self) -> bool {
            self.round == self.opts.rounds
                && self.next_round_at.is_none()
                && self.client_received.len() == self.opts.streams * self.opts.rounds
                && self.client_received.values().all(|(_, fin)| *fin)
        }

        /// Runs until every response arrived and the link went quiet.
        pub(crate) fn run(&mut self) {
            for _ in 0..100_000 {
                self.step();
                if self.done() && self.client.inbox.is_empty() && self.server.inbox.is_empty() {
                    self.round_starts.push(self.record.len());
                    return;
                }
            }
            panic!(
                "transfer did not finish after {} datagrams: received {:?}",
                self.record.len(),
                self.client_received
            );
        }

        fn step(&mut self) {
            for from in [Sender::Client, Sender::Server] {
                self.deliver(from);
            }
            for from in [Sender::Client, Sender::Server] {
                self.drive(from);
            }
            let next = [
                self.client.inbox.front().map(|d| d.0),
                self.server.inbox.front().map(|d| d.0),
                self.client.timeout,
                self.server.timeout,
                self.next_round_at,
            ]
            .into_iter()
            .flatten()
            .min();
            if let Some(next) = next {
                self.now = self.now.max(next);
            }
        }

        fn side(&mut self, who: Sender) -> &mut Side {
            match who {
                Sender::Client => &mut self.client,
                Sender::Server => &mut self.server,
            }
        }

        fn send(&mut self, from: Sender, bytes: Vec<u8>) {
            let text = self.key_log.text();
            let dropped = (self.drop_rule)(from, &bytes, &text);
            let at = self.now + self.latency;
            if !dropped {
                self.side(from.peer()).inbox.push_back((at, bytes.clone()));
            }
            self.record.push(Datagram {
                from,
                bytes,
                dropped,
            });
        }

        fn deliver(&mut self, to: Sender) {
            let now = self.now;
            let remote = self.side(to.peer()).addr;
            let mut out = Vec::new();
            let side = self.side(to);
            while side.inbox.front().is_some_and(|d| d.0 <= now) {
                let (_, bytes) = side.inbox.pop_front().unwrap();
                let mut buf = Vec::new();
                let event = side.endpoint.handle(
                    now,
                    remote,
                    None,
                    None,
                    bytes::BytesMut::from(&bytes[..]),
                    &mut buf,
                );
                match event {
                    Some(DatagramEvent::NewConnection(incoming)) => {
                        let conn = side
                            .endpoint
                            .accept(incoming, now, &mut buf, None)
                            .unwrap_or_else(|e| panic!("accept failed: {:?}", e.cause));
                        side.conn = Some(conn);
                    }
                    Some(DatagramEvent::ConnectionEvent(_, event)) => {
                        side.conn.as_mut().unwrap().1.handle_event(event);
                    }
                    Some(DatagramEvent::Response(transmit)) => {
                        out.push(buf[..transmit.size].to_vec());
                    }
                    None => {}
                }
            }
            for bytes in out {
                self.send(to, bytes);
            }
        }

        fn drive(&mut self, who: Sender) {
            let now = self.now;
            if self.side(who).conn.is_none() {
                return;
            }
            let (ch, mut conn) = self.side(who).conn.take().unwrap();
            if self.side(who).timeout.is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
            self.endpoint_events(who, ch, &mut conn);
            while let Some(event) = conn.poll() {
                if let quinn_proto::Event::ConnectionLost { reason } = event {
                    assert!(self.closing, "{who:?} lost the connection: {reason}");
                }
            }
            match who {
                Sender::Client => self.client_app(&mut conn),
                Sender::Server => self.server_app(&mut conn),
            }
            let mut buf = Vec::new();
            while let Some(transmit) = conn.poll_transmit(now, 1, &mut buf) {
                let bytes = buf[..transmit.size].to_vec();
                buf.clear();
                self.send(who, bytes);
            }
            self.endpoint_events(who, ch, &mut conn);
            let side = self.side(who);
            side.timeout = conn.poll_timeout();
            side.conn = Some((ch, conn));
        }

        fn endpoint_events(&mut self, who: Sender, ch: ConnectionHandle, conn: &mut Connection) {
            while let Some(event) = conn.poll_endpoint_events() {
                if let Some(event) = self.side(who).endpoint.handle_event(ch, event) {
                    conn.handle_event(event);
                }
            }
        }

        fn client_app(&mut self, conn: &mut Connection) {
            if self.closing || (conn.is_handshaking() && !conn.has_0rtt()) {
                return;
            }
            let round_done = self.client_received.len() == self.client_streams.len()
                && self.client_received.values().all(|(_, fin)| *fin);
            if round_done && self.next_round_at.is_none() && self.round < self.opts.rounds {
                let gap = if self.round == 0 { 0 } else { 1 };
                self.next_round_at = Some(self.now + Duration::from_secs(gap));
            }
            if self.next_round_at.is_some_and(|t| t <= self.now) {
                self.next_round_at = None;
                self.round += 1;
                self.key_update_due = self.opts.key_updates && self.round > 1;
                self.round_starts.push(self.record.len());
                for n in 0..self.opts.streams {
                    let id = conn.streams().open(Dir::Bi).unwrap();
                    let request = format!("GET /{}/{n}", self.round);
                    let mut stream = conn.send_stream(id);
                    assert_eq!(stream.write(request.as_bytes()).unwrap(), request.len());
                    stream.finish().unwrap();
                    self.client_written.insert(id.into(), request.len() as u64);
                    self.client_streams.push(id);
                }
            }
            for &id in &self.client_streams {
                let entry = self.client_received.entry(id.into()).or_insert((0, false));
                if entry.1 {
                    continue;
                }
                let mut stream = conn.recv_stream(id);
                let Ok(mut chunks) = stream.read(true) else {
                    continue;
                };
                loop {
                    match chunks.next(usize::MAX) {
                        Ok(Some(chunk)) => entry.0 += chunk.bytes.len() as u64,
                        Ok(None) => {
                            entry.1 = true;
                            break;
                        }
                        Err(ReadError::Blocked) => break,
                        Err(e) => panic!("client read failed: {e}"),
                    }
                }
                let _ = chunks.finalize();
            }
        }

        fn server_app(&mut self, conn: &mut Connection) {
            if std::mem::take(&mut self.key_update_due) {
                conn.force_key_update();
            }
            while let Some(id) = conn.streams().accept(Dir::Bi) {
                self.server_requests.insert(id.into(), (id, false));
            }
            for (&n, (id, fin)) in self.server_requests.iter_mut() {
                if *fin {
                    continue;
                }
                let mut stream = conn.recv_stream(*id);
                let Ok(mut chunks) = stream.read(true) else {
                    continue;
                };
                loop {
                    match chunks.next(usize::MAX) {
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            *fin = true;
                            self.server_pending.insert(n, (*id, self.opts.response_len));
                            break;
                        }
                        Err(ReadError::Blocked) => break,
                        Err(e) => panic!("server read failed: {e}"),
                    }
                }
                let _ = chunks.finalize();
            }
            let body = vec![0x5a; 4096];
            let mut finished = Vec::new();
            for (&n, (id, remaining)) in self.server_pending.iter_mut() {
                let mut stream = conn.send_stream(*id);
                while *remaining > 0 {
                    match stream.write(&body[..(*remaining).min(body.len())]) {
                        Ok(written) => {
                            *remaining -= written;
                            *self.server_written.entry(n).or_default() += written as u64;
                        }
                        Err(WriteError::Blocked) => break,
                        Err(e) => panic!("server write failed: {e}"),
                    }
                }
                if *remaining == 0 {
                    stream.finish().unwrap();
                    finished.push(n);
                }
            }
            for n in finished {
                self.server_pending.remove(&n);
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Checks on decoded traffic

    #[derive(Debug)]
    struct Decoded {
        index: usize,
        from: Sender,
        packet: QuicPacket,
    }

    fn decode(
        record: &[Datagram],
        key_log: &str,
        include_dropped: bool,
    ) -> (QuicFlow, Vec<Decoded>) {
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

    /// QUIC packets sealed by hand, for the other modules' tests.
    pub(crate) mod seal {
        use super::super::*;

        /// An Initial packet of `from` on the connection whose client first chose `odcid`.
        pub(crate) fn initial(
            from: Sender,
            odcid: &[u8],
            dcid: &[u8],
            scid: &[u8],
            pn: u32,
            payload: &[u8],
        ) -> Vec<u8> {
            let keys = &initial_keys(odcid)[from.index()];
            super::seal_initial(keys, dcid, scid, pn, payload)
        }

        /// A 1-RTT packet (key phase 0, 4-byte packet number) sealed with AES-128-GCM keys
        /// of `secret`.
        pub(crate) fn short(secret: &[u8], dcid: &[u8], pn: u32, payload: &[u8]) -> Vec<u8> {
            let keys = DirectionKeys::new(CipherSuite::Aes128Gcm, secret.to_vec());
            let mut packet = vec![0x43];
            packet.extend(dcid);
            let pn_offset = packet.len();
            packet.extend(pn.to_be_bytes());
            let mut nonce = keys.current.iv;
            for (n, p) in nonce[4..].iter_mut().zip(u64::from(pn).to_be_bytes()) {
                *n ^= p;
            }
            let mut body = payload.to_vec();
            keys.current
                .key
                .seal_in_place_append_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(&packet[..]),
                    &mut body,
                )
                .unwrap();
            packet.extend(body);
            let sample = &packet[pn_offset + 4..pn_offset + 4 + SAMPLE_LEN];
            let mask = keys.header.new_mask(sample).unwrap();
            packet[0] ^= mask[0] & 0x1f;
            for i in 0..4 {
                packet[pn_offset + i] ^= mask[1 + i];
            }
            packet
        }

        /// A STREAM frame with offset, length and FIN as given.
        pub(crate) fn stream_frame(id: u64, offset: u64, data: &[u8], fin: bool) -> Vec<u8> {
            let mut f = vec![0x0e | u8::from(fin)];
            for v in [id, offset, data.len() as u64] {
                f.extend((0x8000_0000 | v as u32).to_be_bytes());
            }
            f.extend(data);
            f
        }

        /// A CRYPTO frame at offset 0.
        pub(crate) fn crypto_frame(data: &[u8]) -> Vec<u8> {
            let mut f = vec![0x06, 0x00];
            f.extend((0x4000 | data.len() as u16).to_be_bytes());
            f.extend(data);
            f
        }
    }

    /// Protects `payload` as a client Initial packet with a 4-byte packet number.
    fn seal_initial(
        keys: &DirectionKeys,
        dcid: &[u8],
        scid: &[u8],
        pn: u32,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut packet = vec![0xc3, 0, 0, 0, 1, dcid.len() as u8];
        packet.extend(dcid);
        packet.push(scid.len() as u8);
        packet.extend(scid);
        packet.push(0); // token length
        let length = 4 + payload.len() + TAG_LEN;
        packet.extend((0x4000 | length as u16).to_be_bytes());
        let pn_offset = packet.len();
        packet.extend(pn.to_be_bytes());
        let mut nonce = keys.current.iv;
        for (n, p) in nonce[4..].iter_mut().zip(u64::from(pn).to_be_bytes()) {
            *n ^= p;
        }
        let mut body = payload.to_vec();
        keys.current
            .key
            .seal_in_place_append_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&packet[..]),
                &mut body,
            )
            .unwrap();
        packet.extend(body);
        let mask = keys
            .header
            .new_mask(&packet[pn_offset + 4..pn_offset + 4 + SAMPLE_LEN])
            .unwrap();
        packet[0] ^= mask[0] & 0x0f;
        for i in 0..4 {
            packet[pn_offset + i] ^= mask[1 + i];
        }
        packet
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
        let Ok(opened) =
            client_keys.open(&first.bytes[..header.end], header.pn_offset, false, None)
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

    // -----------------------------------------------------------------------------------------
    // Known answers (RFC 9001 Appendix A) and pieces

    #[test]
    fn initial_keys_match_rfc_9001_a1() {
        let dcid = hex::decode("8394c8f03e515708").unwrap();
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &INITIAL_SALT_V1).extract(&dcid);
        let client = expand_label_prk(&prk, b"client in", 32);
        let server = expand_label_prk(&prk, b"server in", 32);
        let sha256 = hkdf::HKDF_SHA256;
        let hexed = |secret: &[u8], label: &[u8], len| {
            hex::encode(expand_label(sha256, secret, label, len))
        };
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
            hex::decode("9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b")
                .unwrap();
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
        let payload = hex::decode(concat!(
            "0000", // 2 × PADDING
            "01",   // PING
            "03",
            "0a",
            "00",
            "01",
            "02",
            "01",
            "01",
            "01",
            "02",
            "03", // ACK+ECN: 10, [8..10], gap 1 → [4..5]
            "04",
            "01",
            "02",
            "03", // RESET_STREAM
            "05",
            "01",
            "02", // STOP_SENDING
            "06",
            "00",
            "02",
            "abcd", // CRYPTO 0..2
            "07",
            "02",
            "eeee", // NEW_TOKEN
            "0e",
            "04",
            "4010",
            "03",
            "010203", // STREAM id 4, off 16, len 3 (LEN|OFF)
            "10",
            "01",
            "11",
            "01",
            "02",
            "12",
            "01",
            "13",
            "01",
            "14",
            "01",
            "15",
            "01",
            "02",
            "16",
            "01",
            "17",
            "01",
            "18",
            "01",
            "00",
            "04",
            "01020304",
            "00000000000000000000000000000000",
            "19",
            "01",
            "1a",
            "0102030405060708",
            "1b",
            "0102030405060708",
            "1c",
            "01",
            "02",
            "01",
            "41",
            "1d",
            "01",
            "00",
            "1e",
            "31",
            "02",
            "ffff",
            "09",
            "08",
            "aabbcc" // STREAM id 8, no OFF/LEN, FIN: to the end
        ))
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
}
