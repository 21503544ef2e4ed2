//! Down to the packet: what a run captures beside its measurements (`--capture`), and the
//! head-of-line blocking measured from the link's packets.
//!
//! - [`pcapng`]: the link's packets as each endpoint would have captured them;
//! - [`packet`], [`reassembly`]: headers and in-order delivery of a byte stream (pure);
//! - [`quic`]: QUIC packets decrypted with the TLS key log (pure);
//! - [`hol`]: head-of-line blocking per TCP connection and per QUIC stream (pure);
//! - [`flights`]: the server's data packets of each connection and their flights (pure);
//!   [`link_busy`]: when the link's bottleneck was moving bytes at its rate (pure);
//! - [`streams`]: every request stream on the wire — requests, priorities, response bytes as
//!   sent — from HTTP/2 ([`tls_records`], [`h2_frames`], [`hpack`]) and HTTP/3 ([`h3_frames`],
//!   [`qpack`]; both on [`huffman`] and [`wire_bytes`]); [`order`]: whether the server's send
//!   order followed the requests' urgency (pure).

pub mod flights;
pub mod h2_frames;
pub mod h3_frames;
pub mod handshake;
pub mod hol;
pub mod hpack;
pub mod huffman;
pub mod link_busy;
pub mod order;
pub mod packet;
pub mod pcapng;
pub mod qpack;
pub mod quic;
pub mod reassembly;
pub mod streams;
pub mod tls;
pub mod tls_records;
pub mod wire_bytes;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use hol::{HolEpisode, HolReport, HolSide};

use crate::link::PacketTrace;

/// One kind of file a run can keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CaptureKind {
    /// `client.pcapng.gz`, `server.pcapng.gz`: every packet of the load, as the link saw it.
    Pcap,
    /// `keys.log`: the TLS secrets of the browser and the embedded server (NSS key log).
    Keys,
    /// `netlog.json.gz`: Chromium's NetLog, without socket bytes.
    Netlog,
    /// The same with every socket byte (`--net-log-capture-mode=Everything`).
    NetlogBytes,
    /// `<connection>.sqlog.gz`: the embedded server's qlog per QUIC connection.
    Qlog,
}

const KINDS: [(CaptureKind, &str); 5] = [
    (CaptureKind::Pcap, "pcap"),
    (CaptureKind::Keys, "keys"),
    (CaptureKind::Netlog, "netlog"),
    (CaptureKind::NetlogBytes, "netlog-bytes"),
    (CaptureKind::Qlog, "qlog"),
];

impl fmt::Display for CaptureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = KINDS
            .iter()
            .find(|(k, _)| k == self)
            .map_or("?", |(_, n)| n);
        f.write_str(name)
    }
}

/// What `--capture` asked for (empty: nothing is kept).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CaptureSet(Vec<CaptureKind>);

/// Nothing kept, as a `'static` for contexts that borrow a set.
pub static NO_CAPTURE: CaptureSet = CaptureSet(Vec::new());

impl CaptureSet {
    pub fn none() -> Self {
        CaptureSet::default()
    }

    pub fn has(&self, k: CaptureKind) -> bool {
        self.0.contains(&k)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The NetLog mode asked for, if any.
    pub fn netlog(&self) -> Option<NetLogMode> {
        if self.has(CaptureKind::NetlogBytes) {
            Some(NetLogMode::Everything)
        } else if self.has(CaptureKind::Netlog) {
            Some(NetLogMode::Default)
        } else {
            None
        }
    }

    pub fn kinds(&self) -> &[CaptureKind] {
        &self.0
    }
}

impl fmt::Display for CaptureSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.0.iter().map(|k| k.to_string()).collect();
        f.write_str(&names.join(","))
    }
}

impl FromStr for CaptureSet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut kinds = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, _)) = KINDS.iter().find(|(_, n)| *n == part) else {
                let names: Vec<&str> = KINDS.iter().map(|(_, n)| *n).collect();
                return Err(format!(
                    "unknown capture {part:?}: give a comma-separated subset of {}",
                    names.join(", ")
                ));
            };
            if !kinds.contains(k) {
                kinds.push(*k);
            }
        }
        if kinds.is_empty() {
            return Err("give at least one of pcap, keys, netlog, netlog-bytes, qlog".into());
        }
        kinds.sort();
        Ok(CaptureSet(kinds))
    }
}

/// Chromium's `--net-log-capture-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetLogMode {
    Default,
    Everything,
}

impl NetLogMode {
    pub fn chromium_flag(self) -> &'static str {
        match self {
            NetLogMode::Default => "Default",
            NetLogMode::Everything => "Everything",
        }
    }
}

/// One file a run kept: its name in `captures/<run id>/` and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureFileRef {
    pub name: String,
    pub bytes: u64,
}

/// A file to write beside the record (the store writes it before the record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureFile {
    pub name: String,
    pub data: Vec<u8>,
}

impl CaptureFile {
    pub fn reference(&self) -> CaptureFileRef {
        CaptureFileRef {
            name: self.name.clone(),
            bytes: self.data.len() as u64,
        }
    }
}

/// What the run protocol collected for the capture and the head-of-line analysis.
#[derive(Debug, Default)]
pub struct CaptureParts {
    /// Every packet of the load (None: the link could not be tapped).
    pub trace: Option<PacketTrace>,
    /// Chromium's key log (`--ssl-key-log-file`), and the embedded server's.
    pub browser_keys: String,
    pub server_keys: String,
    /// Chromium's NetLog, when asked for.
    pub netlog: Option<Vec<u8>>,
    /// The server's qlog per QUIC connection (name, JSON-SEQ).
    pub qlogs: Vec<(String, Vec<u8>)>,
    /// What could not be collected, said as warnings.
    pub problems: Vec<String>,
}

/// The server's responses as the wire showed them (every run, from the link's packets and the
/// TLS keys): every h2 and h3 request stream with its priority and its bytes over time, and
/// how well their order followed urgency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireEvidence {
    pub order: order::OrderSummary,
    pub streams: streams::WireStreams,
    /// When the navigation started on the streams' clock (the trace's), ms: what puts them
    /// beside the browser's timings (None: not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub navigation_ms: Option<f64>,
}

impl WireEvidence {
    /// Reads the streams, checks their order, and keeps their sends as spans.
    pub fn analyse(trace: &PacketTrace, keys: &quic::KeyLog) -> WireEvidence {
        let mut streams = streams::analyse(trace, keys);
        let order = order::check_all(&streams);
        for c in &mut streams.connections {
            c.compact();
        }
        WireEvidence {
            order,
            streams,
            navigation_ms: None,
        }
    }
}

/// What a run keeps of its capture.
#[derive(Debug, Default)]
pub struct CaptureOutcome {
    pub hol: Option<HolReport>,
    pub wire: Option<WireEvidence>,
    /// The server's data packets of each connection (for the round-trip accounting).
    pub sends: Option<flights::Sends>,
    pub handshakes: Option<handshake::Handshakes>,
    pub files: Vec<CaptureFile>,
    pub warnings: Vec<String>,
}

/// Measures head-of-line blocking from the packets (always) and makes the files `asked` for.
pub fn finish(parts: CaptureParts, asked: &CaptureSet, description: &str) -> CaptureOutcome {
    let mut out = CaptureOutcome {
        warnings: parts.problems,
        ..Default::default()
    };
    let keys_text = format!("{}{}", parts.browser_keys, parts.server_keys);
    let keys = match quic::KeyLog::parse(&keys_text) {
        Ok(k) => k,
        Err(e) => {
            out.warnings.push(format!(
                "the TLS key log could not be read ({e}): QUIC packets are not decrypted"
            ));
            quic::KeyLog::default()
        }
    };
    if let Some(trace) = &parts.trace {
        let server_keys = quic::KeyLog::parse(&parts.server_keys).unwrap_or_default();
        out.handshakes = Some(handshake::analyse(trace, &keys, &server_keys));
        out.sends = Some(flights::server_sends(trace));
        let report = hol::analyse(trace, &keys);
        if let Some(q) = &report.quic {
            if q.undecrypted_packets > 0 {
                out.warnings.push(format!(
                    "{} QUIC packets could not be decrypted: the QUIC head-of-line figures count only the others",
                    q.undecrypted_packets
                ));
            }
        }
        out.hol = Some(report);
        let wire = WireEvidence::analyse(trace, &keys);
        if let Some(first) = wire.streams.problems.first() {
            out.warnings.push(format!(
                "the wire's streams: {} problem(s), the first: {first}",
                wire.streams.problems.len()
            ));
        }
        out.wire = Some(wire);
        if asked.has(CaptureKind::Pcap) {
            for v in [pcapng::Vantage::Client, pcapng::Vantage::Server] {
                out.files.push(CaptureFile {
                    name: format!("{}.gz", v.file_name()),
                    data: pcapng::gzip(&pcapng::write(trace, v, description)),
                });
            }
        }
    } else if asked.has(CaptureKind::Pcap) {
        out.warnings
            .push("no packets were captured: the link could not be tapped".into());
    }
    if asked.has(CaptureKind::Keys) {
        out.files.push(CaptureFile {
            name: "keys.log".into(),
            data: keys_text.into_bytes(),
        });
    }
    if asked.netlog().is_some() {
        match parts.netlog {
            Some(n) => out.files.push(CaptureFile {
                name: "netlog.json.gz".into(),
                data: pcapng::gzip(&n),
            }),
            None => out
                .warnings
                .push("Chromium wrote no NetLog for this run".into()),
        }
    }
    if asked.has(CaptureKind::Qlog) {
        for (name, q) in parts.qlogs {
            out.files.push(CaptureFile {
                name: format!("{name}.sqlog.gz"),
                data: pcapng::gzip(&q),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_sets_parse_in_any_order_and_bad_names_say_what_exists() {
        let s: CaptureSet = "qlog, pcap,keys,pcap".parse().unwrap();
        assert_eq!(s.to_string(), "pcap,keys,qlog");
        assert!(s.has(CaptureKind::Keys) && !s.has(CaptureKind::Netlog));
        assert_eq!(s.netlog(), None);
        let n: CaptureSet = "netlog-bytes".parse().unwrap();
        assert_eq!(n.netlog(), Some(NetLogMode::Everything));
        let e = "pcap,tcpdump".parse::<CaptureSet>().unwrap_err();
        assert!(
            e.contains("\"tcpdump\"") && e.contains("pcap, keys, netlog"),
            "{e}"
        );
        assert!("".parse::<CaptureSet>().is_err());
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, r#"["pcap","keys","qlog"]"#);
        assert_eq!(serde_json::from_str::<CaptureSet>(&json).unwrap(), s);
    }
}
