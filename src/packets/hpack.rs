//! HPACK (RFC 7541): decoding the header blocks of one direction of an HTTP/2 connection, with
//! its dynamic table (pure; a bad block is an error, never a panic). The integer and string
//! primitives serve QPACK too ([`super::qpack`]).
//!
//! Written here rather than taken from a crate: QPACK needs the same primitives with other
//! prefixes, and the crates.io decoders (`hpack` 0.3, unmaintained since 2016; its forks) hide
//! them, panic-freedom on arbitrary captured bytes is easier to hold in 200 lines of our own,
//! and `hpack` 0.3's static table misnames entry 15 (`accept-` for `accept-charset`).

use std::collections::VecDeque;

use super::huffman::{self, HuffmanError};

/// One header field: name and value (bytes that are not UTF-8 are replaced).
pub type Field = (String, String);

/// The protocol's initial dynamic table size (SETTINGS_HEADER_TABLE_SIZE's default).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// A larger table size update than this is refused (no browser or server asks for one).
const MAX_TABLE_SIZE: u64 = 1 << 24;

/// Why a header block could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    #[error("header block cut short")]
    Truncated,
    #[error("integer too large")]
    IntegerOverflow,
    #[error("{0}")]
    Huffman(#[from] HuffmanError),
    #[error("index {0} is in neither the static nor the dynamic table")]
    BadIndex(u64),
    #[error("dynamic table size update to {0} bytes")]
    BadTableSize(u64),
}

/// RFC 7541 Appendix A.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Reads an integer with an `prefix`-bit prefix at `*pos` (RFC 7541 §5.1), moving past it.
pub fn integer(buf: &[u8], pos: &mut usize, prefix: u32) -> Result<u64, HpackError> {
    let first = *buf.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let max = (1u64 << prefix) - 1;
    let mut value = u64::from(first) & max;
    if value < max {
        return Ok(value);
    }
    for shift in (0..).step_by(7) {
        let byte = *buf.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        if shift > 56 {
            return Err(HpackError::IntegerOverflow);
        }
        value += u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    Ok(value)
}

/// Reads a string literal whose length has a `prefix`-bit prefix and whose Huffman flag is the
/// bit just above it (RFC 7541 §5.2; QPACK uses other prefixes).
pub fn string(buf: &[u8], pos: &mut usize, prefix: u32) -> Result<String, HpackError> {
    let huffman = buf.get(*pos).ok_or(HpackError::Truncated)? & (1 << prefix) != 0;
    let len = integer(buf, pos, prefix)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| pos.checked_add(len))
        .filter(|end| *end <= buf.len())
        .ok_or(HpackError::Truncated)?;
    let raw = &buf[*pos..end];
    *pos = end;
    let bytes = if huffman {
        huffman::decode(raw)?
    } else {
        raw.to_vec()
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The decoding state of one direction of a connection.
#[derive(Debug, Clone)]
pub struct Decoder {
    /// Newest first.
    table: VecDeque<Field>,
    size: usize,
    max: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: DEFAULT_TABLE_SIZE,
        }
    }
}

fn entry_size(f: &Field) -> usize {
    f.0.len() + f.1.len() + 32
}

impl Decoder {
    /// Decodes one complete header block (HEADERS + CONTINUATION payloads).
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<Field>, HpackError> {
        let mut fields = Vec::new();
        let mut pos = 0;
        while pos < block.len() {
            let first = block[pos];
            if first & 0x80 != 0 {
                let index = integer(block, &mut pos, 7)?;
                fields.push(self.get(index)?);
            } else if first & 0xc0 == 0x40 {
                let field = self.literal(block, &mut pos, 6)?;
                self.insert(field.clone());
                fields.push(field);
            } else if first & 0xe0 == 0x20 {
                let size = integer(block, &mut pos, 5)?;
                if size > MAX_TABLE_SIZE {
                    return Err(HpackError::BadTableSize(size));
                }
                self.max = size as usize;
                self.evict(0);
            } else {
                fields.push(self.literal(block, &mut pos, 4)?);
            }
        }
        Ok(fields)
    }

    /// A literal field: an index for its name (0: a literal name follows), then its value.
    fn literal(&self, block: &[u8], pos: &mut usize, prefix: u32) -> Result<Field, HpackError> {
        let index = integer(block, pos, prefix)?;
        let name = match index {
            0 => string(block, pos, 7)?,
            i => self.get(i)?.0,
        };
        Ok((name, string(block, pos, 7)?))
    }

    fn get(&self, index: u64) -> Result<Field, HpackError> {
        let bad = || HpackError::BadIndex(index);
        let i = usize::try_from(index).map_err(|_| bad())?;
        if let Some((n, v)) = i.checked_sub(1).and_then(|i| STATIC.get(i)) {
            return Ok((n.to_string(), v.to_string()));
        }
        let dynamic = i.checked_sub(STATIC.len() + 1).ok_or_else(bad)?;
        self.table.get(dynamic).cloned().ok_or_else(bad)
    }

    fn insert(&mut self, field: Field) {
        let size = entry_size(&field);
        self.evict(size);
        // An entry larger than the whole table empties it and is not added (§4.4).
        if size <= self.max {
            self.size += size;
            self.table.push_front(field);
        }
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some(old) = self.table.pop_back() else {
                self.size = 0;
                break;
            };
            self.size -= entry_size(&old);
        }
    }
}

/// Test helpers: encoding the representations by hand.
#[cfg(test)]
pub mod encode {
    /// An integer with a `prefix`-bit prefix, `flags` in the bits above it.
    pub fn integer(value: u64, prefix: u32, flags: u8) -> Vec<u8> {
        let max = (1u64 << prefix) - 1;
        if value < max {
            return vec![flags | value as u8];
        }
        let mut out = vec![flags | max as u8];
        let mut rest = value - max;
        while rest >= 0x80 {
            out.push(0x80 | (rest & 0x7f) as u8);
            rest >>= 7;
        }
        out.push(rest as u8);
        out
    }

    /// A string literal with a 7-bit length prefix, Huffman-coded when `huffman`.
    pub fn string(s: &str, huffman: bool) -> Vec<u8> {
        let bytes = if huffman {
            super::huffman::encode(s.as_bytes())
        } else {
            s.as_bytes().to_vec()
        };
        let mut out = integer(bytes.len() as u64, 7, if huffman { 0x80 } else { 0 });
        out.extend(bytes);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(list: &[(&str, &str)]) -> Vec<Field> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// RFC 7541 C.4: three requests with Huffman coding, sharing one dynamic table.
    #[test]
    fn decodes_the_rfc_7541_request_examples_with_their_dynamic_table() {
        let mut d = Decoder::default();
        let first = hex::decode("828684418cf1e3c2e5f23a6ba0ab90f4ff").unwrap();
        assert_eq!(
            d.decode(&first).unwrap(),
            fields(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ])
        );
        assert_eq!(d.size, 57);
        let second = hex::decode("828684be5886a8eb10649cbf").unwrap();
        assert_eq!(
            d.decode(&second).unwrap(),
            fields(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache"),
            ])
        );
        let third = hex::decode("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf").unwrap();
        assert_eq!(
            d.decode(&third).unwrap(),
            fields(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ])
        );
        assert_eq!(d.size, 164);
    }

    #[test]
    fn evicts_the_oldest_entries_and_obeys_size_updates() {
        let mut d = Decoder::default();
        // Size update to 100 bytes, then two literals with indexing of 32 + 10 bytes each.
        let mut block = encode::integer(100, 5, 0x20);
        for name in ["aaaaa", "bbbbb", "ccccc"] {
            block.push(0x40);
            block.extend(encode::string(name, false));
            block.extend(encode::string("12345", true));
        }
        d.decode(&block).unwrap();
        // Only two fit: "aaaaa" was evicted; 62 is the newest.
        assert_eq!(d.get(62).unwrap().0, "ccccc");
        assert_eq!(d.get(63).unwrap().0, "bbbbb");
        assert_eq!(d.decode(&[0x80 | 64]), Err(HpackError::BadIndex(64)));
        assert_eq!(d.decode(&[0x80]), Err(HpackError::BadIndex(0)));
        // Shrinking to zero empties the table.
        d.decode(&[0x20]).unwrap();
        assert_eq!(d.decode(&[0x80 | 62]), Err(HpackError::BadIndex(62)));
        assert_eq!(
            d.decode(&encode::integer(1 << 30, 5, 0x20)),
            Err(HpackError::BadTableSize(1 << 30))
        );
    }

    #[test]
    fn integers_round_trip_and_garbage_never_panics() {
        for v in [0, 1, 30, 31, 127, 128, 1337, u64::from(u32::MAX)] {
            let e = encode::integer(v, 5, 0);
            let mut pos = 0;
            assert_eq!(integer(&e, &mut pos, 5), Ok(v));
            assert_eq!(pos, e.len());
        }
        let mut pos = 0;
        assert_eq!(
            integer(
                &[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1],
                &mut pos,
                5
            ),
            Err(HpackError::IntegerOverflow)
        );
        let mut state = 0x9e37_79b9_u32;
        for _ in 0..2000 {
            let block: Vec<u8> = (0..24)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    state as u8
                })
                .collect();
            let mut d = Decoder::default();
            for cut in [block.len(), 7, 1] {
                let _ = d.decode(&block[..cut]);
            }
        }
        // The static table is RFC 7541's.
        assert_eq!(Decoder::default().get(15).unwrap().0, "accept-charset");
        assert_eq!(Decoder::default().get(61).unwrap().0, "www-authenticate");
    }
}
