//! The frames of a decrypted QUIC payload (RFC 9000 §19): each frame's kind, the CRYPTO and
//! STREAM data, and the connection IDs NEW_CONNECTION_ID announces.

use super::decoded::Frame;
use super::header::MAX_CID_LEN;
use super::reader::Reader;

pub(super) struct ParsedFrames<'a> {
    pub(super) frames: Vec<Frame>,
    pub(super) crypto: Vec<(u64, &'a [u8])>,
    pub(super) new_cids: Vec<&'a [u8]>,
    /// Each STREAM frame's id, offset, data and FIN.
    pub(super) streams: Vec<(u64, u64, &'a [u8], bool)>,
}

pub(super) fn parse_frames(payload: &[u8]) -> ParsedFrames<'_> {
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
        0x02 | 0x03 => ack(frame_type, r)?,
        0x06 => {
            let offset = r.varint()?;
            let len = r.varint()?;
            let data = r.bytes(usize::try_from(len).ok()?)?;
            parsed.crypto.push((offset, data));
            Frame::Crypto { offset, len }
        }
        0x08..=0x0f => stream(frame_type, r, parsed)?,
        _ => return skipped(frame_type, r, parsed),
    };
    Some(Some(frame))
}

/// ACK (0x02) or ACK with ECN counts (0x03). `None`: it runs past the payload, or its ranges
/// go below packet number 0.
fn ack(frame_type: u64, r: &mut Reader<'_>) -> Option<Frame> {
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
    Some(Frame::Ack { largest, ranges })
}

/// A STREAM frame (0x08-0x0f: its type's bits say whether offset, length and FIN are there).
/// `None`: it runs past the payload.
fn stream<'a>(frame_type: u64, r: &mut Reader<'a>, parsed: &mut ParsedFrames<'a>) -> Option<Frame> {
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
    Some(Frame::Stream {
        id,
        offset,
        len: data.len() as u64,
        fin,
    })
}

/// A known frame type this decoder skips ([`Frame::Other`]), but for the connection IDs of
/// NEW_CONNECTION_ID. `None` and `Some(None)` as for [`parse_frame`].
fn skipped<'a>(
    frame_type: u64,
    r: &mut Reader<'a>,
    parsed: &mut ParsedFrames<'a>,
) -> Option<Option<Frame>> {
    match frame_type {
        0x04 => {
            r.varints(3)?;
        }
        0x05 | 0x11 | 0x15 => {
            r.varints(2)?;
        }
        0x07 => {
            let len = r.varint()?;
            r.bytes(usize::try_from(len).ok()?)?;
        }
        0x10 | 0x12 | 0x13 | 0x14 | 0x16 | 0x17 | 0x19 => {
            r.varint()?;
        }
        0x18 => {
            r.varints(2)?;
            let len = usize::from(r.u8()?);
            if len == 0 || len > MAX_CID_LEN {
                return None;
            }
            parsed.new_cids.push(r.bytes(len)?);
            r.bytes(16)?;
        }
        0x1a | 0x1b => {
            r.bytes(8)?;
        }
        0x1c | 0x1d => {
            r.varints(if frame_type == 0x1c { 2 } else { 1 })?;
            let len = r.varint()?;
            r.bytes(usize::try_from(len).ok()?)?;
        }
        // HANDSHAKE_DONE; IMMEDIATE_ACK (draft-ietf-quic-ack-frequency).
        0x1e | 0x1f => {}
        0x30 => {
            r.rest();
        }
        0x31 => {
            let len = r.varint()?;
            r.bytes(usize::try_from(len).ok()?)?;
        }
        // ACK_FREQUENCY (draft-ietf-quic-ack-frequency): four varints.
        0xaf => {
            r.varints(4)?;
        }
        _ => return Some(None),
    }
    Some(Some(Frame::Other(frame_type)))
}
