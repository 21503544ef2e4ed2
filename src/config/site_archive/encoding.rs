//! Content codings (pure): a site archive keeps every body as it went over the wire, so a body
//! recorded decoded (a HAR's `content.text`) is encoded again with the coding its
//! `Content-Encoding` header names — byte counts on the emulated link stay the recording's.

use std::io::{Read, Write};

use anyhow::{bail, Context, Result};

/// A `Content-Encoding` pagebench can produce and check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Identity,
    Gzip,
    Deflate,
    Brotli,
}

impl Coding {
    /// The coding a `Content-Encoding` value names (`None`: no header).
    pub fn parse(header: Option<&str>) -> Result<Coding> {
        let Some(v) = header.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Coding::Identity);
        };
        Ok(match v.to_ascii_lowercase().as_str() {
            "identity" => Coding::Identity,
            "gzip" | "x-gzip" => Coding::Gzip,
            "deflate" => Coding::Deflate,
            "br" => Coding::Brotli,
            other => bail!(
                "Content-Encoding {other:?} is not supported (gzip, deflate, br or none); a body in it cannot be re-encoded"
            ),
        })
    }

    /// `decoded` as it goes over the wire in this coding.
    pub fn encode(self, decoded: &[u8]) -> Result<Vec<u8>> {
        Ok(match self {
            Coding::Identity => decoded.to_vec(),
            Coding::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
                e.write_all(decoded)?;
                e.finish()?
            }
            Coding::Deflate => {
                // HTTP's "deflate" is the zlib format (RFC 9110 §8.4.1.2).
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
                e.write_all(decoded)?;
                e.finish()?
            }
            Coding::Brotli => {
                let mut out = Vec::new();
                {
                    let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                    w.write_all(decoded)?;
                }
                out
            }
        })
    }

    /// The decoded body of `wire` (to check an archive and to count decoded bytes).
    pub fn decode(self, wire: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        match self {
            Coding::Identity => out.extend_from_slice(wire),
            Coding::Gzip => {
                flate2::read::GzDecoder::new(wire)
                    .read_to_end(&mut out)
                    .context("not valid gzip")?;
            }
            Coding::Deflate => {
                flate2::read::ZlibDecoder::new(wire)
                    .read_to_end(&mut out)
                    .context("not valid zlib (deflate)")?;
            }
            Coding::Brotli => {
                brotli::Decompressor::new(wire, 4096)
                    .read_to_end(&mut out)
                    .context("not valid brotli")?;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_coding_round_trips_and_text_shrinks() {
        let text = "body { color: #333; }\n".repeat(200);
        for (header, coding) in [
            (None, Coding::Identity),
            (Some("gzip"), Coding::Gzip),
            (Some("deflate"), Coding::Deflate),
            (Some("br"), Coding::Brotli),
        ] {
            let c = Coding::parse(header).unwrap();
            assert_eq!(c, coding);
            let wire = c.encode(text.as_bytes()).unwrap();
            assert_eq!(c.decode(&wire).unwrap(), text.as_bytes(), "{coding:?}");
            if c != Coding::Identity {
                assert!(wire.len() < text.len() / 10, "{coding:?}: {}", wire.len());
            }
        }
    }

    #[test]
    fn unknown_codings_and_corrupt_bodies_are_errors() {
        let e = Coding::parse(Some("zstd")).unwrap_err().to_string();
        assert!(e.contains("zstd") && e.contains("gzip, deflate, br"), "{e}");
        assert!(Coding::Gzip.decode(b"plain text").is_err());
        assert_eq!(Coding::parse(Some(" GZIP ")).unwrap(), Coding::Gzip);
    }
}
