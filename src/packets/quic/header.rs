//! QUIC packet headers: a long header's kind, connection IDs and length; the DCID length of a
//! short header.

use super::decoded::PacketKind;
use super::reader::Reader;

const QUIC_V1: u32 = 0x0000_0001;
pub(super) const MAX_CID_LEN: usize = 20;

/// A short header does not carry its DCID length: use the longest connection ID of the
/// receiver this packet starts with, else the length all its known IDs share.
pub(super) fn short_header_dcid_len(
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

pub(super) struct LongHeader<'a> {
    pub(super) kind: PacketKind,
    pub(super) dcid: &'a [u8],
    pub(super) scid: &'a [u8],
    pub(super) pn_offset: usize,
    /// Where this packet ends in the datagram.
    pub(super) end: usize,
}

impl<'a> LongHeader<'a> {
    pub(super) fn parse(data: &'a [u8]) -> Result<LongHeader<'a>, String> {
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
