//! QPACK (RFC 9204) field sections of HTTP/3 HEADERS frames, decoded with the static table
//! alone (pure). A section that references the dynamic table (a non-zero Required Insert
//! Count) is reported as such, not guessed: its fields depend on the peer's encoder stream.

use super::hpack::{self, Field, HpackError};

/// Why a field section could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QpackError {
    #[error("the field section references the QPACK dynamic table")]
    DynamicTable,
    #[error("static table index {0} does not exist")]
    BadIndex(u64),
    #[error("{0}")]
    Primitive(#[from] HpackError),
}

/// RFC 9204 Appendix A.
const STATIC: [(&str, &str); 99] = [
    (":authority", ""),
    (":path", "/"),
    ("age", "0"),
    ("content-disposition", ""),
    ("content-length", "0"),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("referer", ""),
    ("set-cookie", ""),
    (":method", "CONNECT"),
    (":method", "DELETE"),
    (":method", "GET"),
    (":method", "HEAD"),
    (":method", "OPTIONS"),
    (":method", "POST"),
    (":method", "PUT"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "103"),
    (":status", "200"),
    (":status", "304"),
    (":status", "404"),
    (":status", "503"),
    ("accept", "*/*"),
    ("accept", "application/dns-message"),
    ("accept-encoding", "gzip, deflate, br"),
    ("accept-ranges", "bytes"),
    ("access-control-allow-headers", "cache-control"),
    ("access-control-allow-headers", "content-type"),
    ("access-control-allow-origin", "*"),
    ("cache-control", "max-age=0"),
    ("cache-control", "max-age=2592000"),
    ("cache-control", "max-age=604800"),
    ("cache-control", "no-cache"),
    ("cache-control", "no-store"),
    ("cache-control", "public, max-age=31536000"),
    ("content-encoding", "br"),
    ("content-encoding", "gzip"),
    ("content-type", "application/dns-message"),
    ("content-type", "application/javascript"),
    ("content-type", "application/json"),
    ("content-type", "application/x-www-form-urlencoded"),
    ("content-type", "image/gif"),
    ("content-type", "image/jpeg"),
    ("content-type", "image/png"),
    ("content-type", "text/css"),
    ("content-type", "text/html; charset=utf-8"),
    ("content-type", "text/plain"),
    ("content-type", "text/plain;charset=utf-8"),
    ("range", "bytes=0-"),
    ("strict-transport-security", "max-age=31536000"),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains",
    ),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains; preload",
    ),
    ("vary", "accept-encoding"),
    ("vary", "origin"),
    ("x-content-type-options", "nosniff"),
    ("x-xss-protection", "1; mode=block"),
    (":status", "100"),
    (":status", "204"),
    (":status", "206"),
    (":status", "302"),
    (":status", "400"),
    (":status", "403"),
    (":status", "421"),
    (":status", "425"),
    (":status", "500"),
    ("accept-language", ""),
    ("access-control-allow-credentials", "FALSE"),
    ("access-control-allow-credentials", "TRUE"),
    ("access-control-allow-headers", "*"),
    ("access-control-allow-methods", "get"),
    ("access-control-allow-methods", "get, post, options"),
    ("access-control-allow-methods", "options"),
    ("access-control-expose-headers", "content-length"),
    ("access-control-request-headers", "content-type"),
    ("access-control-request-method", "get"),
    ("access-control-request-method", "post"),
    ("alt-svc", "clear"),
    ("authorization", ""),
    (
        "content-security-policy",
        "script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    ("early-data", "1"),
    ("expect-ct", ""),
    ("forwarded", ""),
    ("if-range", ""),
    ("origin", ""),
    ("purpose", "prefetch"),
    ("server", ""),
    ("timing-allow-origin", "*"),
    ("upgrade-insecure-requests", "1"),
    ("user-agent", ""),
    ("x-forwarded-for", ""),
    ("x-frame-options", "deny"),
    ("x-frame-options", "sameorigin"),
];

fn get(index: u64) -> Result<Field, QpackError> {
    let (n, v) = usize::try_from(index)
        .ok()
        .and_then(|i| STATIC.get(i))
        .ok_or(QpackError::BadIndex(index))?;
    Ok((n.to_string(), v.to_string()))
}

/// Decodes one field section (a HEADERS frame's payload).
pub fn decode(section: &[u8]) -> Result<Vec<Field>, QpackError> {
    let mut pos = 0;
    let required_insert_count = hpack::integer(section, &mut pos, 8)?;
    let _delta_base = hpack::integer(section, &mut pos, 7)?;
    if required_insert_count != 0 {
        return Err(QpackError::DynamicTable);
    }
    let mut fields = Vec::new();
    while let Some(&first) = section.get(pos) {
        let field = if first & 0x80 != 0 {
            // Indexed field line: T (0x40) says static.
            if first & 0x40 == 0 {
                return Err(QpackError::DynamicTable);
            }
            get(hpack::integer(section, &mut pos, 6)?)?
        } else if first & 0xc0 == 0x40 {
            // Literal with a name reference (N 0x20, T 0x10).
            if first & 0x10 == 0 {
                return Err(QpackError::DynamicTable);
            }
            let name = get(hpack::integer(section, &mut pos, 4)?)?.0;
            (name, hpack::string(section, &mut pos, 7)?)
        } else if first & 0xe0 == 0x20 {
            // Literal with a literal name (N 0x10, H 0x08, 3-bit length).
            let name = hpack::string(section, &mut pos, 3)?;
            (name, hpack::string(section, &mut pos, 7)?)
        } else {
            // Post-base index or post-base name reference: the dynamic table.
            return Err(QpackError::DynamicTable);
        };
        fields.push(field);
    }
    Ok(fields)
}

/// Test helpers: field sections encoded by hand.
#[cfg(test)]
pub mod encode {
    use super::super::hpack::encode::{integer, string};
    use super::super::huffman;

    /// The section prefix of a section that uses no dynamic table.
    pub const NO_DYNAMIC: [u8; 2] = [0, 0];

    pub fn indexed(index: u64) -> Vec<u8> {
        integer(index, 6, 0xc0)
    }

    pub fn with_name_ref(index: u64, value: &str, huffman: bool) -> Vec<u8> {
        let mut out = integer(index, 4, 0x50);
        out.extend(string(value, huffman));
        out
    }

    pub fn with_literal_name(name: &str, value: &str) -> Vec<u8> {
        let coded = huffman::encode(name.as_bytes());
        let mut out = integer(coded.len() as u64, 3, 0x28);
        out.extend(coded);
        out.extend(string(value, true));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_static_references_and_literals_with_huffman() {
        let mut s = encode::NO_DYNAMIC.to_vec();
        s.extend(encode::indexed(17)); // :method GET
        s.extend(encode::indexed(23)); // :scheme https
        s.extend(encode::with_name_ref(0, "example.test", true)); // :authority
        s.extend(encode::with_name_ref(1, "/style.css", false)); // :path
        s.extend(encode::with_literal_name("priority", "u=0"));
        let fields = decode(&s).unwrap();
        let pairs: Vec<(&str, &str)> = fields.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        assert_eq!(
            pairs,
            [
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "example.test"),
                (":path", "/style.css"),
                ("priority", "u=0"),
            ]
        );
        assert_eq!(
            get(98).unwrap(),
            ("x-frame-options".into(), "sameorigin".into())
        );
        assert_eq!(get(99), Err(QpackError::BadIndex(99)));
    }

    #[test]
    fn dynamic_table_references_are_reported_not_guessed() {
        // A non-zero Required Insert Count.
        assert_eq!(
            decode(&[0x02, 0x00, 0xc0 | 17]),
            Err(QpackError::DynamicTable)
        );
        // Indexed field line with T = 0, post-base index, post-base name reference.
        for line in [0x80u8, 0x10, 0x00] {
            assert_eq!(
                decode(&[0, 0, line]),
                Err(QpackError::DynamicTable),
                "{line:#x}"
            );
        }
        assert!(decode(&[0]).is_err());
        assert_eq!(decode(&[0, 0]).unwrap(), vec![]);
        for n in 0..=255u8 {
            let _ = decode(&[0, 0, n, n, 0xff, n]);
        }
    }
}
