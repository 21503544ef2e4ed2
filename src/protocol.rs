//! The three HTTP versions pagebench compares: what the browser is forced onto, what a server
//! offers, and the names each viewpoint uses for them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// HTTP/1.1, HTTP/2 (both over TLS over TCP, by ALPN) or HTTP/3 (over QUIC).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP/1.1 over TLS over TCP (ALPN `http/1.1`).
    H1,
    /// HTTP/2 over TLS over TCP (ALPN `h2`).
    H2,
    /// HTTP/3 over QUIC over UDP (ALPN `h3`), on the same port number.
    H3,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::H1, Protocol::H2, Protocol::H3];

    /// The short name of the command line, TOML and results: `h1`, `h2`, `h3`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// The ALPN name: what Chromium reports in `nextHopProtocol` and CDP's `protocol`, and what
    /// the servers log.
    pub fn alpn(self) -> &'static str {
        match self {
            Protocol::H1 => "http/1.1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "h1" | "http/1.1" | "http1" => Ok(Protocol::H1),
            "h2" | "http2" => Ok(Protocol::H2),
            "h3" | "http3" | "quic" => Ok(Protocol::H3),
            other => anyhow::bail!("unknown protocol {other:?}: use h1, h2 or h3"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Protocol::H1.alpn(), "http/1.1");
        assert_eq!("HTTP/1.1".parse::<Protocol>().unwrap(), Protocol::H1);
        assert_eq!(serde_json::to_string(&Protocol::H3).unwrap(), "\"h3\"");
        assert!("h4"
            .parse::<Protocol>()
            .unwrap_err()
            .to_string()
            .contains("h4"));
    }
}
