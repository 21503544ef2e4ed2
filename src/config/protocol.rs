//! The three HTTP versions pagebench compares: what the browser is forced onto, what a server
//! offers, the names each viewpoint uses for them, and the series a matrix compares
//! ([`Variant`]: a protocol, for h3 in a mode). The bottom of the vocabulary: depends on nothing
//! else in pagebench.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Result};
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

/// How HTTP/3 is reached: `forced` is the study's cold `--origin-to-force-quic-on`; `primed`
/// also pre-seeds the profile with the origin's QUIC alternative service, as a returning
/// visitor's browser knows it (Chromium then treats the origin as supporting request priorities
/// and stops throttling low-priority requests); `discovered` forces nothing: a repeat view's
/// first navigation goes over TCP and learns the server's Alt-Svc, and the measured one uses
/// HTTP/3 as the browser decides.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum H3Mode {
    Forced,
    Primed,
    Discovered,
    /// Nothing forced, nothing primed: the browser learns h3 from the HTTPS DNS record
    /// (RFC 9460) pagebench's resolver publishes for each TLS origin.
    Dns,
}

impl H3Mode {
    pub fn name(self) -> &'static str {
        match self {
            H3Mode::Forced => "forced",
            H3Mode::Primed => "primed",
            H3Mode::Discovered => "discovered",
            H3Mode::Dns => "dns",
        }
    }
}

/// A protocol as a series: h1, h2, or h3 in a given mode — or, for a replayed site,
/// `as-recorded`: each origin on the protocol it used when the site was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Variant {
    /// The protocol every request is forced onto (for `as-recorded`, what the page's own
    /// origin used, set per run from the recording; h2 in the plan).
    pub protocol: Protocol,
    /// Only for h3.
    pub h3_mode: Option<H3Mode>,
    /// Each origin of a replayed site on its recorded protocol (nothing forced).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_recorded: bool,
}

impl Variant {
    pub fn new(protocol: Protocol, mode: H3Mode) -> Variant {
        Variant {
            protocol,
            h3_mode: (protocol == Protocol::H3).then_some(mode),
            as_recorded: false,
        }
    }

    /// `h1`, `h2`, `h3` (forced, the study's), `h3-primed`, `h3-discovered`, `h3-dns` or
    /// `as-recorded`.
    pub fn name(&self) -> String {
        if self.as_recorded {
            return AS_RECORDED_NAME.into();
        }
        match self.h3_mode {
            Some(H3Mode::Primed) => "h3-primed".into(),
            Some(H3Mode::Discovered) => "h3-discovered".into(),
            Some(H3Mode::Dns) => "h3-dns".into(),
            _ => self.protocol.name().into(),
        }
    }
}

const AS_RECORDED_NAME: &str = "as-recorded";

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A series compared with its name (`h3-primed`), as the files and tests spell it.
impl PartialEq<&str> for Variant {
    fn eq(&self, name: &&str) -> bool {
        self.name() == *name
    }
}

impl From<&Variant> for String {
    fn from(v: &Variant) -> String {
        v.name()
    }
}

impl FromStr for Variant {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Variant> {
        Ok(match s.trim() {
            AS_RECORDED_NAME => Variant::AS_RECORDED,
            "h3-forced" => Variant::new(Protocol::H3, H3Mode::Forced),
            "h3-primed" => Variant::new(Protocol::H3, H3Mode::Primed),
            "h3-discovered" => Variant::new(Protocol::H3, H3Mode::Discovered),
            "h3-dns" => Variant::new(Protocol::H3, H3Mode::Dns),
            other => Variant::new(
                other.parse().map_err(|_| {
                    anyhow::anyhow!("unknown protocol {other:?} in --protocols: use h1, h2, h3, h3-forced, h3-primed, h3-discovered (repeat view), h3-dns (with --dns resolver) or (for site workloads) as-recorded")
                })?,
                H3Mode::Forced,
            ),
        })
    }
}

impl Variant {
    pub const H1: Variant = Variant {
        protocol: Protocol::H1,
        h3_mode: None,
        as_recorded: false,
    };
    pub const H2: Variant = Variant {
        protocol: Protocol::H2,
        h3_mode: None,
        as_recorded: false,
    };
    /// The study's h3: forced onto QUIC without Alt-Svc knowledge.
    pub const H3: Variant = Variant {
        protocol: Protocol::H3,
        h3_mode: Some(H3Mode::Forced),
        as_recorded: false,
    };
    pub const H3_PRIMED: Variant = Variant {
        protocol: Protocol::H3,
        h3_mode: Some(H3Mode::Primed),
        as_recorded: false,
    };
    /// Nothing forced: HTTP/3 as the browser finds it from a first visit's Alt-Svc.
    pub const H3_DISCOVERED: Variant = Variant {
        protocol: Protocol::H3,
        h3_mode: Some(H3Mode::Discovered),
        as_recorded: false,
    };
    /// Nothing forced: HTTP/3 as the browser finds it from the HTTPS record of a first lookup.
    pub const H3_DNS: Variant = Variant {
        protocol: Protocol::H3,
        h3_mode: Some(H3Mode::Dns),
        as_recorded: false,
    };
    /// A replayed site's origins each on their recorded protocol.
    pub const AS_RECORDED: Variant = Variant {
        protocol: Protocol::H2,
        h3_mode: None,
        as_recorded: true,
    };
}

/// Serde as the series name (`h1`, `h2`, `h3`, `h3-primed`), for the files that name series
/// (`runs.csv`, `summary.json`); the plan in `meta.json` keeps the structured form.
pub mod variant_name {
    use super::Variant;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Variant, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Variant, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses `--protocols`; plain `h3` takes `default_mode`.
pub fn parse_variants(spec: &str, default_mode: H3Mode) -> Result<Vec<Variant>> {
    let mut out: Vec<Variant> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut v: Variant = item.parse()?;
        if item == "h3" {
            v.h3_mode = Some(default_mode);
        }
        if out.contains(&v) {
            bail!("protocol {item:?} is listed twice in --protocols");
        }
        out.push(v);
    }
    if out.is_empty() {
        bail!("--protocols is empty: give e.g. h1,h2,h3");
    }
    Ok(out)
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

    #[test]
    fn variants_parse() {
        let v = parse_variants("h2,h3-primed,h3-forced", H3Mode::Forced).unwrap();
        assert_eq!(
            v.iter().map(|v| v.name()).collect::<Vec<_>>(),
            ["h2", "h3-primed", "h3"]
        );
        let v = parse_variants("h1,as-recorded", H3Mode::Forced).unwrap();
        assert_eq!(v[1], Variant::AS_RECORDED);
        assert_eq!(v[1].name(), "as-recorded");
        assert_eq!(
            "as-recorded".parse::<Variant>().unwrap(),
            Variant::AS_RECORDED
        );
        let v = parse_variants("h3", H3Mode::Primed).unwrap();
        assert_eq!(v[0].name(), "h3-primed");
        let v = parse_variants("h3-discovered,h2", H3Mode::Forced).unwrap();
        assert_eq!(v[0], Variant::H3_DISCOVERED);
        assert_eq!(v[0].name().parse::<Variant>().unwrap(), v[0]);
        assert!(parse_variants("h2,h2", H3Mode::Forced).is_err());
        assert!(parse_variants("h4", H3Mode::Forced)
            .unwrap_err()
            .to_string()
            .contains("h4"));
    }
}
