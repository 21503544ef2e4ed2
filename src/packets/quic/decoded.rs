//! What a decoded QUIC packet is: who sent it, its kind and packet number, its frames, and
//! the data of its STREAM frames.

use std::ops::RangeInclusive;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sender {
    Client,
    Server,
}

impl Sender {
    pub(super) fn index(self) -> usize {
        self as usize
    }
    pub(super) fn peer(self) -> Sender {
        match self {
            Sender::Client => Sender::Server,
            Sender::Server => Sender::Client,
        }
    }
    pub(super) fn name(self) -> &'static str {
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
    /// [`super::QuicFlow::with_stream_data`]).
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
