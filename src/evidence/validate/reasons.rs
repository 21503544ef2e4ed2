//! What a run's verdict is made of: its [`Outcome`], the typed reasons it does not count
//! ([`ReasonKind`], each of a [`ReasonClass`]: measurement or protocol), how its load ended
//! ([`LoadEnd`]) and the [`Verdict`] the checks give.

use serde::{Deserialize, Serialize};

/// The outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Valid,
    Invalid,
    /// Did not finish within the timeout (a protocol outcome, kept apart from invalid runs).
    Dnf,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Valid => "valid",
            Outcome::Invalid => "invalid",
            Outcome::Dnf => "dnf",
        }
    }
}

/// Why a run is not valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    Timeout,
    BrowserCrash,
    NavigationError,
    /// Resource Timing's nextHopProtocol differs from the forced protocol.
    ProtocolMismatch,
    /// CDP's `response.protocol` differs.
    CdpProtocolMismatch,
    /// The server saw another protocol.
    ServerProtocolMismatch,
    /// The server's log lacks requests the browser made (or has none at all).
    ServerLogMismatch,
    MissingResource,
    DuplicateResource,
    ShortResource,
    HttpError,
    /// The download/upload body was not whole (length or hash).
    CorruptBody,
    /// The server served a file more than once in one load.
    DuplicateRequest,
    /// An `h3-primed` browser opened a TCP connection (it did not go straight to QUIC).
    NotPrimed,
    /// An `h3-discovered` repeat view did not use the HTTP/3 its first view advertised, on
    /// every resource.
    NotDiscovered,
    /// An `h3-dns` first view did not use the HTTP/3 its HTTPS record announced, on every
    /// resource.
    NotAnnounced,
    /// The emulated link did not deliver the profile (see `link::LinkFault`; the `link_gate` check).
    Link,
    /// A reference server exited during the run.
    Server,
    /// A replayed page asked for more URLs the site archive lacks than `--max-misses` allows.
    ReplayMiss,
    /// A part of pagebench (the link emulator, the embedded server) set the run's pace: one of
    /// its threads ran on a core for the whole load (`evidence::cpu_pace`).
    HarnessLimited,
}

/// Whether an invalid run says something about the protocol or only about the measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonClass {
    /// The setup failed to measure (link, server, browser crash, a viewpoint missing): the
    /// matrix runs it again.
    Measurement,
    /// What the browser and server did (fallback, short body, failed request): data, not
    /// retried.
    Protocol,
}

impl std::fmt::Display for ReasonKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl ReasonKind {
    pub fn name(self) -> &'static str {
        match self {
            ReasonKind::Timeout => "timeout",
            ReasonKind::BrowserCrash => "browser_crash",
            ReasonKind::NavigationError => "navigation_error",
            ReasonKind::ProtocolMismatch => "protocol_mismatch",
            ReasonKind::CdpProtocolMismatch => "cdp_protocol_mismatch",
            ReasonKind::ServerProtocolMismatch => "server_protocol_mismatch",
            ReasonKind::ServerLogMismatch => "server_log_mismatch",
            ReasonKind::MissingResource => "missing_resource",
            ReasonKind::DuplicateResource => "duplicate_resource",
            ReasonKind::ShortResource => "short_resource",
            ReasonKind::HttpError => "http_error",
            ReasonKind::CorruptBody => "corrupt_body",
            ReasonKind::DuplicateRequest => "duplicate_request",
            ReasonKind::NotPrimed => "not_primed",
            ReasonKind::NotDiscovered => "not_discovered",
            ReasonKind::NotAnnounced => "not_announced",
            ReasonKind::Link => "link",
            ReasonKind::Server => "server",
            ReasonKind::ReplayMiss => "replay_miss",
            ReasonKind::HarnessLimited => "harness_limited",
        }
    }

    /// Every kind, for parsing and documentation.
    pub const ALL: [ReasonKind; 20] = [
        ReasonKind::Timeout,
        ReasonKind::BrowserCrash,
        ReasonKind::NavigationError,
        ReasonKind::ProtocolMismatch,
        ReasonKind::CdpProtocolMismatch,
        ReasonKind::ServerProtocolMismatch,
        ReasonKind::ServerLogMismatch,
        ReasonKind::MissingResource,
        ReasonKind::DuplicateResource,
        ReasonKind::ShortResource,
        ReasonKind::HttpError,
        ReasonKind::CorruptBody,
        ReasonKind::DuplicateRequest,
        ReasonKind::NotPrimed,
        ReasonKind::NotDiscovered,
        ReasonKind::NotAnnounced,
        ReasonKind::Link,
        ReasonKind::Server,
        ReasonKind::ReplayMiss,
        ReasonKind::HarnessLimited,
    ];

    pub fn class(self) -> ReasonClass {
        match self {
            ReasonKind::Link
            | ReasonKind::HarnessLimited
            | ReasonKind::Server
            | ReasonKind::BrowserCrash
            | ReasonKind::ServerLogMismatch => ReasonClass::Measurement,
            _ => ReasonClass::Protocol,
        }
    }
}

impl std::str::FromStr for ReasonKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ReasonKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown invalid-run reason {s:?}"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub kind: ReasonKind,
    pub detail: String,
}

/// How the load ended, as the runner saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "end", content = "detail", rename_all = "snake_case")]
pub enum LoadEnd {
    Completed,
    TimedOut(String),
    Crashed(String),
    NavigationFailed(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    pub reasons: Vec<Reason>,
    /// Oddities that do not invalidate the run (e.g. an unexpected extra request).
    pub warnings: Vec<String>,
    /// What the browser asked for on its own (a favicon), by manifest name: answered, and left
    /// out of the checks.
    pub browser_initiated: Vec<String>,
}

impl Verdict {
    /// `kind: detail; kind: detail` — the form written to runs.csv.
    pub fn reason_text(&self) -> String {
        reason_text(&self.reasons)
    }
}

/// `kind: detail; kind: detail`.
pub fn reason_text(reasons: &[Reason]) -> String {
    reasons
        .iter()
        .map(|r| format!("{}: {}", r.kind.name(), r.detail))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether an invalid run failed as a measurement (worth running again): any measurement
/// failure does, because what else the run saw (a fallback on a stalled link, say) cannot be
/// trusted either.
pub fn is_measurement_failure(reasons: &[Reason]) -> bool {
    reasons
        .iter()
        .any(|r| r.kind.class() == ReasonClass::Measurement)
}
