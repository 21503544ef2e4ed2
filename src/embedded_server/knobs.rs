//! The server's knobs: one struct that is a `[server]` TOML table and a set of CLI flags at once,
//! its validation, and the defaults each unset knob falls back to (the library's own defaults,
//! stated here so the run metadata can say exactly what was in force).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// hyper's h2 server defaults (hyper 1.x `proto/h2/server.rs`), applied explicitly.
pub const DEFAULT_H2_MAX_CONCURRENT_STREAMS: u32 = 200;
pub const DEFAULT_H2_STREAM_WINDOW: u64 = 1024 * 1024;
pub const DEFAULT_H2_CONNECTION_WINDOW: u64 = 1024 * 1024;
/// quinn 0.11 `TransportConfig::default()` values, applied explicitly.
pub const DEFAULT_H3_MAX_CONCURRENT_STREAMS: u64 = 100;
pub const DEFAULT_H3_STREAM_RECEIVE_WINDOW: u64 = 1_250_000;
/// QUIC's largest variable-length integer: quinn's default connection receive window (no
/// connection-level limit beyond the per-stream windows).
pub const QUIC_VARINT_MAX: u64 = (1 << 62) - 1;
pub const DEFAULT_H3_CONNECTION_RECEIVE_WINDOW: u64 = QUIC_VARINT_MAX;
/// quinn's default `send_window` (8 × 1.25 MB), connection-wide.
pub const DEFAULT_QUIC_SEND_WINDOW: u64 = 10_000_000;

/// h2's largest legal flow-control window (RFC 9113 §6.9.1).
const H2_MAX_WINDOW: u64 = (1 << 31) - 1;
/// h2's connection window starts at 65535 and can only grow by WINDOW_UPDATE.
const H2_MIN_CONNECTION_WINDOW: u64 = 65_535;
const MIN_SOCKET_BUFFER: u64 = 1024;
const MAX_SOCKET_BUFFER: u64 = 1 << 30;

pub use super::response_order::Priorities;
pub use crate::config::protocol::Protocol;

/// QUIC congestion controller (quinn's three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum QuicCongestion {
    Cubic,
    Newreno,
    /// quinn marks its BBR as experimental.
    Bbr,
}

impl QuicCongestion {
    pub fn name(self) -> &'static str {
        match self {
            QuicCongestion::Cubic => "cubic",
            QuicCongestion::Newreno => "newreno",
            QuicCongestion::Bbr => "bbr",
        }
    }
}

/// Linux TCP congestion control, set per socket with `TCP_CONGESTION`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TcpCongestion {
    Cubic,
    Reno,
    Bbr,
}

impl TcpCongestion {
    /// The kernel's name (as in `tcp_available_congestion_control`).
    pub fn kernel_name(self) -> &'static str {
        match self {
            TcpCongestion::Cubic => "cubic",
            TcpCongestion::Reno => "reno",
            TcpCongestion::Bbr => "bbr",
        }
    }
}

/// A byte count written as `65536`, `64KiB`, `1.25MB`, `4MiB`… (KB/MB/GB decimal, KiB/MiB/GiB
/// binary). In TOML either an integer or such a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" | "k" => 1_000,
            "mb" | "m" => 1_000_000,
            "gb" | "g" => 1_000_000_000,
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            other => {
                return Err(format!(
                    "{s:?}: unknown unit {other:?} (use bytes, or KB/MB/GB (×1000) or KiB/MiB/GiB (×1024), e.g. 64KiB)"
                ))
            }
        };
        let value: f64 = num
            .parse()
            .map_err(|_| format!("{s:?} is not a byte count (e.g. 65536, 64KiB or 1.25MB)"))?;
        let bytes = value * mult as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 || bytes.fract() != 0.0 {
            return Err(format!("{s:?} is not a whole number of bytes"));
        }
        Ok(ByteSize(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a byte count: an integer or a string like \"64KiB\" or \"1.25MB\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("{v} is negative: a byte count must be ≥ 0")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Every knob of the embedded server. `None` means "the library default" (see [`effective`]
/// for the values). The same struct is the `[server]` table of a TOML file and the flags of
/// `pagebench serve` / `bench server`; flags override the file ([`ServerKnobs::overlay`]).
///
/// [`effective`]: ServerKnobs::effective
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ServerKnobs {
    /// Protocols offered, comma-separated subset of h1,h2,h3 [default: h1,h2,h3]. Without h3 no
    /// UDP socket is opened and no Alt-Svc is sent; without h1 and h2 no TCP listener.
    #[arg(
        id = "server_protocols",
        long = "server-protocols",
        value_delimiter = ',',
        value_name = "LIST"
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<Protocol>>,

    /// h2 SETTINGS_MAX_CONCURRENT_STREAMS [default: 200].
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2_max_concurrent_streams: Option<u32>,
    /// h2 initial stream flow-control window the server grants (bounds a client's upload per
    /// stream) [default: 1MiB].
    #[arg(long, value_name = "BYTES")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2_initial_stream_window: Option<ByteSize>,
    /// h2 connection flow-control window the server grants [default: 1MiB].
    #[arg(long, value_name = "BYTES")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2_initial_connection_window: Option<ByteSize>,
    /// h2: bytes the server holds in memory per stream: hyper's send buffer per stream
    /// (`max_send_buf_size`) in the embedded server, `H2StreamMaxMemSize` in Apache [default:
    /// the server's own: hyper 400KiB, Apache 64KiB].
    #[arg(long, value_name = "BYTES")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2_stream_buffer: Option<ByteSize>,

    /// h3: bidirectional (request) streams the client may have open at once [default: 100].
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h3_max_concurrent_streams: Option<u64>,
    /// h3: per-stream receive window (QUIC initial_max_stream_data) [default: 1.25MB].
    #[arg(long, value_name = "BYTES")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h3_stream_receive_window: Option<ByteSize>,
    /// h3: connection receive window (QUIC initial_max_data) [default: unlimited].
    #[arg(long, value_name = "BYTES")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h3_connection_receive_window: Option<ByteSize>,
    /// h3: per-stream send buffer, bounding bytes written but not yet acknowledged, so one
    /// stream moves at most BYTES per round trip. Applied as quinn's send_window =
    /// BYTES × active request streams [default: quinn's 10MB connection-wide send_window].
    #[arg(long, value_name = "BYTES")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h3_send_buffer: Option<ByteSize>,

    /// QUIC congestion controller [default: cubic].
    #[arg(long, value_name = "CC")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_congestion: Option<QuicCongestion>,
    /// TCP congestion control set on every socket (TCP_CONGESTION) [default: the system's].
    #[arg(long, value_name = "CC")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_congestion: Option<TcpCongestion>,

    /// UDP socket SO_RCVBUF request (the kernel doubles it; as root it may exceed
    /// net.core.rmem_max) [default: the kernel's].
    #[arg(long, value_name = "BYTES")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_recv_buffer: Option<ByteSize>,
    /// UDP socket SO_SNDBUF request [default: the kernel's].
    #[arg(long, value_name = "BYTES")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_send_buffer: Option<ByteSize>,
    /// UDP generic segmentation offload for QUIC sends: true/false [default: true].
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso: Option<bool>,
    /// Also send `Alt-Svc` on HTTP/3 responses: true/false [default: false, as Caddy/quic-go].
    /// Chromium learns the origin's QUIC alternative service from such a header even on a
    /// forced-QUIC load, and then stops throttling low-priority requests (the study's h3
    /// penalty); servers that advertise only over TCP leave the forced load throttled.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt_svc_over_h3: Option<bool>,
    /// TLS session resumption: issue session tickets (TLS 1.3, TCP and QUIC) and take them back
    /// on a returning client: true/false [default: true, as real servers].
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resumption: Option<bool>,
    /// QUIC 0-RTT: accept a resuming client's early data (its requests in its first flight):
    /// true/false [default: true]. Needs `tls_resumption`.
    #[arg(long = "quic-0rtt", value_name = "BOOL", action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    #[serde(default, rename = "quic_0rtt", skip_serializing_if = "Option::is_none")]
    pub quic_0rtt: Option<bool>,
    /// How a connection's responses share the wire (h2, h3): `ignore` (as the transport
    /// interleaves them), `fifo` (one at a time in request order) or `rfc9218` (by the request's
    /// `priority` header: urgency first, then incremental round-robin) [default: ignore].
    #[arg(long, value_name = "POLICY")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priorities: Option<Priorities>,
    /// Send `103 Early Hints` before a page's final response, over h2 and h3: `Link` preloads
    /// of the page's render-blocking stylesheets and scripts and its first image, and
    /// preconnects to their other origins (see `early_hints`), or the list of
    /// `early_hints_links`: true/false [default: false]. Not over HTTP/1.1 (Chromium ignores
    /// 103 there, and hyper cannot send it): measure h2, h3.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_hints: Option<bool>,
    /// With `early_hints`: the hints to send, page by page, from FILE (one a line: the page —
    /// a target like /index.html or an https:// URL — then its Link value) instead of those
    /// read from the page.
    #[arg(long, value_name = "FILE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_hints_links: Option<PathBuf>,
    /// How long the server thinks before answering a page (an HTML response), as a dynamic
    /// page's back end would, in ms (a replayed page's recorded think time adds to it): what
    /// `103 Early Hints` are sent to cover [default: 0].
    #[arg(long, value_name = "MS")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_think_ms: Option<u64>,
}

/// The knobs with every default filled in: what the server is told to do. The kernel's answers
/// (buffer sizes, congestion control per socket) are in [`super::AppliedKnobs`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectiveKnobs {
    pub protocols: Vec<Protocol>,
    pub h2_max_concurrent_streams: u32,
    pub h2_initial_stream_window: u64,
    pub h2_initial_connection_window: u64,
    /// `None`: the server's own default (hyper's 400 KiB send buffer per stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2_stream_buffer: Option<u64>,
    pub h3_max_concurrent_streams: u64,
    pub h3_stream_receive_window: u64,
    pub h3_connection_receive_window: u64,
    /// `None`: quinn's connection-wide default send window ([`DEFAULT_QUIC_SEND_WINDOW`]).
    pub h3_send_buffer: Option<u64>,
    pub quic_congestion: QuicCongestion,
    /// `None`: the system default (see the applied report for which one that was).
    pub tcp_congestion: Option<TcpCongestion>,
    pub udp_recv_buffer: Option<u64>,
    pub udp_send_buffer: Option<u64>,
    pub gso: bool,
    pub alt_svc_over_h3: bool,
    /// Metadata from before the knob: rustls resumed by default, and accepted no 0-RTT.
    #[serde(default = "resumed_before_the_knob")]
    pub tls_resumption: bool,
    #[serde(default, rename = "quic_0rtt")]
    pub quic_0rtt: bool,
    /// Absent from metadata of before the knob (and of `ignore`, which is what they ran).
    #[serde(default, skip_serializing_if = "Priorities::is_ignore")]
    pub priorities: Priorities,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub early_hints: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_hints_links: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub page_think_ms: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn resumed_before_the_knob() -> bool {
    true
}

impl EffectiveKnobs {
    pub fn offers(&self, p: Protocol) -> bool {
        self.protocols.contains(&p)
    }

    pub fn offers_tcp(&self) -> bool {
        self.offers(Protocol::H1) || self.offers(Protocol::H2)
    }
}

/// A knob whose value is out of range: names the field both ways (flag and TOML key).
#[derive(Debug, thiserror::Error)]
#[error("--{flag} (server.{field}) = {value}: {why}")]
pub struct KnobError {
    pub field: &'static str,
    pub flag: String,
    pub value: String,
    pub why: String,
}

fn knob_error(field: &'static str, value: impl fmt::Display, why: impl Into<String>) -> KnobError {
    KnobError {
        field,
        flag: field.replace('_', "-"),
        value: value.to_string(),
        why: why.into(),
    }
}

/// A config file: the `[server]` table is ours; other tables belong to other parts of pagebench
/// and are ignored here.
#[derive(Deserialize)]
struct ConfigFile {
    server: Option<ServerKnobs>,
}

impl ServerKnobs {
    /// Reads the `[server]` table of a TOML file. Errors name the file, the line and the field.
    pub fn load_toml(path: &Path) -> Result<ServerKnobs> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read server config {}", path.display()))?;
        Self::from_toml_str(&text).map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))
    }

    /// Parses the `[server]` table of a TOML document (errors say line and field).
    pub fn from_toml_str(text: &str) -> Result<ServerKnobs> {
        // toml's own errors carry the line, the column and the offending key.
        let file: ConfigFile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        let Some(knobs) = file.server else {
            bail!("no [server] table: put the server knobs under a `[server]` header");
        };
        if let Err(e) = knobs.validate() {
            let line = key_line(text, e.field)
                .map(|l| format!("line {l}: "))
                .unwrap_or_default();
            bail!("{line}server.{} = {}: {}", e.field, e.value, e.why);
        }
        Ok(knobs)
    }

    /// TCP congestion control defaults to cubic (like quinn's default QUIC controller), so h2
    /// and h3 differ by protocol and not by controller: this machine class's system default is
    /// bbr. Every command that starts the embedded server applies it.
    pub fn with_default_tcp_congestion(mut self) -> ServerKnobs {
        if self.tcp_congestion.is_none() {
            self.tcp_congestion = Some(TcpCongestion::Cubic);
        }
        self
    }

    /// `self` with every knob that `over` sets replaced by `over`'s value (flags over a file).
    pub fn overlay(&self, over: &ServerKnobs) -> ServerKnobs {
        macro_rules! pick {
            ($($f:ident),*) => { ServerKnobs { $($f: over.$f.clone().or_else(|| self.$f.clone()),)* } };
        }
        pick!(
            protocols,
            h2_max_concurrent_streams,
            h2_initial_stream_window,
            h2_initial_connection_window,
            h2_stream_buffer,
            h3_max_concurrent_streams,
            h3_stream_receive_window,
            h3_connection_receive_window,
            h3_send_buffer,
            quic_congestion,
            tcp_congestion,
            udp_recv_buffer,
            udp_send_buffer,
            gso,
            alt_svc_over_h3,
            tls_resumption,
            quic_0rtt,
            priorities,
            early_hints,
            early_hints_links,
            page_think_ms
        )
    }

    /// Checks every set knob's range.
    pub fn validate(&self) -> Result<(), KnobError> {
        if let Some(p) = &self.protocols {
            if p.is_empty() {
                return Err(knob_error(
                    "protocols",
                    "[]",
                    "offer at least one of h1, h2, h3",
                ));
            }
        }
        self.check_h2()?;
        self.check_h3()?;
        self.check_udp_buffers()?;
        self.check_combinations()
    }

    /// The h2 knobs' ranges: streams, flow-control windows and the stream buffer.
    fn check_h2(&self) -> Result<(), KnobError> {
        if let Some(n) = self.h2_max_concurrent_streams {
            if n == 0 {
                return Err(knob_error(
                    "h2_max_concurrent_streams",
                    n,
                    "must be at least 1 (0 would refuse every request)",
                ));
            }
        }
        if let Some(ByteSize(w)) = self.h2_initial_stream_window {
            if w == 0 || w > H2_MAX_WINDOW {
                return Err(knob_error(
                    "h2_initial_stream_window",
                    w,
                    format!("must be 1 to {H2_MAX_WINDOW} bytes (RFC 9113 §6.9.1)"),
                ));
            }
        }
        if let Some(ByteSize(w)) = self.h2_initial_connection_window {
            if !(H2_MIN_CONNECTION_WINDOW..=H2_MAX_WINDOW).contains(&w) {
                return Err(knob_error(
                    "h2_initial_connection_window",
                    w,
                    format!(
                        "must be {H2_MIN_CONNECTION_WINDOW} to {H2_MAX_WINDOW} bytes (an h2 connection \
                         window starts at 65535 and can only grow)"
                    ),
                ));
            }
        }
        if let Some(ByteSize(b)) = self.h2_stream_buffer {
            if !(1024..=H2_MAX_WINDOW).contains(&b) {
                return Err(knob_error(
                    "h2_stream_buffer",
                    b,
                    format!(
                        "must be 1024 to {H2_MAX_WINDOW} bytes (Apache refuses less than 1024)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The h3 knobs' ranges: streams, receive windows and the send buffer.
    fn check_h3(&self) -> Result<(), KnobError> {
        if let Some(n) = self.h3_max_concurrent_streams {
            if n == 0 || n > (1 << 60) {
                return Err(knob_error(
                    "h3_max_concurrent_streams",
                    n,
                    "must be 1 to 2^60 (0 would refuse every request)",
                ));
            }
        }
        for (field, v) in [
            ("h3_stream_receive_window", self.h3_stream_receive_window),
            (
                "h3_connection_receive_window",
                self.h3_connection_receive_window,
            ),
        ] {
            if let Some(ByteSize(w)) = v {
                if w == 0 || w > QUIC_VARINT_MAX {
                    return Err(knob_error(
                        field,
                        w,
                        format!("must be 1 to {QUIC_VARINT_MAX} bytes"),
                    ));
                }
            }
        }
        if let Some(ByteSize(b)) = self.h3_send_buffer {
            if b < 1200 {
                return Err(knob_error(
                    "h3_send_buffer",
                    b,
                    "must be at least 1200 bytes (one QUIC packet)",
                ));
            }
        }
        Ok(())
    }

    /// The UDP socket buffers' range.
    fn check_udp_buffers(&self) -> Result<(), KnobError> {
        for (field, v) in [
            ("udp_recv_buffer", self.udp_recv_buffer),
            ("udp_send_buffer", self.udp_send_buffer),
        ] {
            if let Some(ByteSize(b)) = v {
                if !(MIN_SOCKET_BUFFER..=MAX_SOCKET_BUFFER).contains(&b) {
                    return Err(knob_error(
                        field,
                        b,
                        format!("must be {MIN_SOCKET_BUFFER} to {MAX_SOCKET_BUFFER} bytes"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The rules that span knobs.
    fn check_combinations(&self) -> Result<(), KnobError> {
        if let Some(ms) = self.page_think_ms.filter(|ms| *ms > 60_000) {
            return Err(knob_error(
                "page_think_ms",
                ms,
                "must be 0 to 60000 ms (a page's back end time)",
            ));
        }
        if let Some(file) = &self.early_hints_links {
            let shown = file.display();
            if self.early_hints != Some(true) {
                return Err(knob_error(
                    "early_hints_links",
                    shown,
                    "the list is sent only with --early-hints true: add it",
                ));
            }
            if let Err(e) = super::hint_list::HintList::read(file) {
                return Err(knob_error("early_hints_links", shown, format!("{e:#}")));
            }
        }
        if self.quic_0rtt == Some(true) && self.tls_resumption == Some(false) {
            return Err(KnobError {
                field: "quic_0rtt",
                flag: "quic-0rtt".into(),
                value: "true".into(),
                why: "0-RTT needs TLS resumption: a client sends early data only with a ticket \
(drop --tls-resumption false, or set --quic-0rtt false)"
                    .into(),
            });
        }
        Ok(())
    }

    /// The knobs with defaults filled in, protocols sorted and deduplicated.
    pub fn effective(&self) -> EffectiveKnobs {
        let mut protocols = self
            .protocols
            .clone()
            .unwrap_or_else(|| Protocol::ALL.to_vec());
        protocols.sort();
        protocols.dedup();
        EffectiveKnobs {
            protocols,
            h2_max_concurrent_streams: self
                .h2_max_concurrent_streams
                .unwrap_or(DEFAULT_H2_MAX_CONCURRENT_STREAMS),
            h2_initial_stream_window: self
                .h2_initial_stream_window
                .map_or(DEFAULT_H2_STREAM_WINDOW, |b| b.0),
            h2_initial_connection_window: self
                .h2_initial_connection_window
                .map_or(DEFAULT_H2_CONNECTION_WINDOW, |b| b.0),
            h2_stream_buffer: self.h2_stream_buffer.map(|b| b.0),
            h3_max_concurrent_streams: self
                .h3_max_concurrent_streams
                .unwrap_or(DEFAULT_H3_MAX_CONCURRENT_STREAMS),
            h3_stream_receive_window: self
                .h3_stream_receive_window
                .map_or(DEFAULT_H3_STREAM_RECEIVE_WINDOW, |b| b.0),
            h3_connection_receive_window: self
                .h3_connection_receive_window
                .map_or(DEFAULT_H3_CONNECTION_RECEIVE_WINDOW, |b| b.0),
            h3_send_buffer: self.h3_send_buffer.map(|b| b.0),
            quic_congestion: self.quic_congestion.unwrap_or(QuicCongestion::Cubic),
            tcp_congestion: self.tcp_congestion,
            udp_recv_buffer: self.udp_recv_buffer.map(|b| b.0),
            udp_send_buffer: self.udp_send_buffer.map(|b| b.0),
            gso: self.gso.unwrap_or(true),
            alt_svc_over_h3: self.alt_svc_over_h3.unwrap_or(false),
            tls_resumption: self.tls_resumption.unwrap_or(true),
            quic_0rtt: self.quic_0rtt.unwrap_or(true) && self.tls_resumption.unwrap_or(true),
            priorities: self.priorities.unwrap_or_default(),
            early_hints: self.early_hints.unwrap_or(false),
            early_hints_links: self.early_hints_links.clone(),
            page_think_ms: self.page_think_ms.unwrap_or(0),
        }
    }
}

/// The 1-based line of `key = …` inside the `[server]` table, if it can be found.
fn key_line(text: &str, key: &str) -> Option<usize> {
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = t.trim_start_matches('[').trim_end_matches(']').trim() == "server";
            continue;
        }
        if inside {
            if let Some(rest) = t.strip_prefix(key) {
                if rest.trim_start().starts_with('=') {
                    return Some(i + 1);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn byte_sizes() {
        assert_eq!("65536".parse::<ByteSize>().unwrap().0, 65536);
        assert_eq!("64KiB".parse::<ByteSize>().unwrap().0, 65536);
        assert_eq!("64 kib".parse::<ByteSize>().unwrap().0, 65536);
        assert_eq!("1.25MB".parse::<ByteSize>().unwrap().0, 1_250_000);
        assert_eq!("4MiB".parse::<ByteSize>().unwrap().0, 4 << 20);
        assert_eq!("2k".parse::<ByteSize>().unwrap().0, 2000);
        for bad in ["", "abc", "1.5", "64XB", "-3", "1.0000001KB"] {
            assert!(
                bad.parse::<ByteSize>().is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn toml_table_parses_with_defaults_for_the_rest() {
        let k = ServerKnobs::from_toml_str(
            "[matrix]\nruns = 3\n\n[server]\nprotocols = [\"h2\", \"h3\"]\n\
             h3_send_buffer = \"64KiB\"\nh2_initial_stream_window = 65535\nquic_congestion = \"bbr\"\n\
             tcp_congestion = \"reno\"\ngso = false\n",
        )
        .unwrap();
        assert_eq!(k.protocols, Some(vec![Protocol::H2, Protocol::H3]));
        assert_eq!(k.h3_send_buffer, Some(ByteSize(65536)));
        assert_eq!(k.h2_initial_stream_window, Some(ByteSize(65535)));
        let e = k.effective();
        assert_eq!(e.quic_congestion, QuicCongestion::Bbr);
        assert_eq!(e.tcp_congestion, Some(TcpCongestion::Reno));
        assert!(!e.gso);
        assert_eq!(
            e.h3_max_concurrent_streams,
            DEFAULT_H3_MAX_CONCURRENT_STREAMS
        );
        assert!(!e.offers(Protocol::H1));
    }

    #[test]
    fn page_think_and_the_hints_list_are_checked() {
        let k = ServerKnobs::from_toml_str("[server]\npage_think_ms = 200\n").unwrap();
        assert_eq!(k.effective().page_think_ms, 200);
        let err = ServerKnobs::from_toml_str("[server]\n\npage_think_ms = 90000\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("page_think_ms") && err.contains("line 3"),
            "{err}"
        );
        let lonely = ServerKnobs {
            early_hints_links: Some("hints.txt".into()),
            ..Default::default()
        };
        let err = lonely.validate().unwrap_err().to_string();
        assert!(err.contains("--early-hints true"), "{err}");
        let missing = ServerKnobs {
            early_hints: Some(true),
            early_hints_links: Some("/nonexistent/hints.txt".into()),
            ..Default::default()
        };
        let err = missing.validate().unwrap_err().to_string();
        assert!(err.contains("/nonexistent/hints.txt"), "{err}");
    }

    #[test]
    fn unknown_field_names_field_and_line() {
        let err = ServerKnobs::from_toml_str("[server]\ngso = true\nh3_send_bufer = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("h3_send_bufer"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn bad_value_names_field_and_line() {
        let err = ServerKnobs::from_toml_str("[server]\n\nquic_congestion = \"vegas\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("vegas") && err.contains("line 3"), "{err}");
        let err = ServerKnobs::from_toml_str("[server]\nh3_send_buffer = \"12 parsecs\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("parsecs") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn out_of_range_names_field_and_line() {
        let err = ServerKnobs::from_toml_str(
            "[server]\ngso = true\nh2_initial_connection_window = 100\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("line 3") && err.contains("server.h2_initial_connection_window"),
            "{err}"
        );
        let err = ServerKnobs::from_toml_str("[server]\nprotocols = []\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("protocols") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn missing_server_table_is_an_error() {
        let err = ServerKnobs::from_toml_str("gso = true\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("[server]"), "{err}");
    }

    #[derive(Parser)]
    struct TestCli {
        #[command(flatten)]
        knobs: ServerKnobs,
    }

    #[test]
    fn flags_parse_and_override_the_file() {
        let cli = TestCli::try_parse_from([
            "x",
            "--server-protocols",
            "h1,h3",
            "--h3-send-buffer",
            "32KiB",
            "--gso",
            "off",
            "--tcp-congestion",
            "bbr",
        ])
        .unwrap();
        let file = ServerKnobs::from_toml_str(
            "[server]\nh3_send_buffer = 1000000\nh2_max_concurrent_streams = 7\n",
        )
        .unwrap();
        let k = file.overlay(&cli.knobs);
        assert_eq!(k.h3_send_buffer, Some(ByteSize(32 * 1024)));
        assert_eq!(k.h2_max_concurrent_streams, Some(7));
        assert_eq!(k.gso, Some(false));
        assert_eq!(k.protocols, Some(vec![Protocol::H1, Protocol::H3]));
        assert!(TestCli::try_parse_from(["x", "--quic-congestion", "vegas"]).is_err());
        assert!(TestCli::try_parse_from(["x", "--h3-send-buffer", "lots"]).is_err());
    }

    #[test]
    fn knobs_round_trip_through_toml() {
        let k = ServerKnobs {
            protocols: Some(vec![Protocol::H3]),
            h3_send_buffer: Some(ByteSize(65536)),
            quic_congestion: Some(QuicCongestion::Newreno),
            ..Default::default()
        };
        let text = format!("[server]\n{}", toml::to_string(&k).unwrap());
        assert_eq!(ServerKnobs::from_toml_str(&text).unwrap(), k);
    }
}
