//! Run validation (pure): a run counts only if the protocol was the forced one from every
//! viewpoint (Resource Timing, CDP, and the server's log when the server keeps one we can
//! read), every manifest file arrived exactly once with its exact size and the server served it
//! once, and the download/upload body was whole. Anything else is kept as an invalid run with
//! its reasons. A run that timed out is "did not finish" (DNF, a protocol outcome) only when
//! nothing went wrong before the timeout: a wrong protocol, a failed request, a short body or a
//! server mismatch seen before it make the run invalid, whatever happened next.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::metrics::{network_requests, EntryTiming, Observation};
use crate::textfmt::few;
use crate::workload::{Manifest, WorkloadKind};

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
    /// The emulated link did not deliver the profile (see `netem::LinkFault`).
    Link,
    /// A reference server exited during the run.
    Server,
    /// A replayed page asked for more URLs the site archive lacks than `--max-misses` allows.
    ReplayMiss,
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
            ReasonKind::Link => "link",
            ReasonKind::Server => "server",
            ReasonKind::ReplayMiss => "replay_miss",
        }
    }

    /// Every kind, for parsing and documentation.
    pub const ALL: [ReasonKind; 18] = [
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
        ReasonKind::Link,
        ReasonKind::Server,
        ReasonKind::ReplayMiss,
    ];

    pub fn class(self) -> ReasonClass {
        match self {
            ReasonKind::Link
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

/// One request as the server logged it (from the embedded server or an external one's log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerView {
    /// As Chromium names it: `http/1.1`, `h2`, `h3`.
    pub protocol: String,
    pub method: String,
    pub path: String,
    /// The whole URL asked, when the server says which authority was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// How a replayed request was matched (site replay only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::site::replay::ReplayMatch>,
    pub status: u16,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Whether the request came on a resumed TLS session, where the server's log says (Caddy
    /// over TCP); None: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resumed: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    pub reasons: Vec<Reason>,
    /// Oddities that do not invalidate the run (e.g. an unexpected extra request).
    pub warnings: Vec<String>,
}

impl Verdict {
    /// `kind: detail; kind: detail` — the form written to runs.csv.
    pub fn reason_text(&self) -> String {
        reason_text(&self.reasons)
    }

    /// Adds a reason found outside validation (the link's or the server's health): the run is
    /// invalid, also if it timed out.
    pub fn invalidate(&mut self, kind: ReasonKind, detail: String) {
        self.reasons.push(Reason { kind, detail });
        self.outcome = Outcome::Invalid;
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

/// The protocol every response must have come over (as ALPN names, `http/1.1`, `h2`, `h3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected<'a> {
    /// One protocol for all (the forced variants).
    All(&'a str),
    /// A replayed site's `as-recorded` arm: each origin's recorded protocol.
    AsRecorded,
}

impl<'a> From<&'a str> for Expected<'a> {
    fn from(alpn: &'a str) -> Expected<'a> {
        Expected::All(alpn)
    }
}

impl Expected<'_> {
    /// What `url` must have come over (`?` for a host the recording lacks).
    fn for_url<'m>(&'m self, manifest: &'m Manifest, url: &str) -> &'m str {
        match self {
            Expected::All(p) => p,
            Expected::AsRecorded => {
                let host = url.split('/').nth(2).unwrap_or("");
                let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
                manifest
                    .site
                    .as_ref()
                    .and_then(|s| s.origin_of_host(host))
                    .and_then(|o| o.recorded_protocol.as_deref())
                    .unwrap_or("?")
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Expected::All(p) => p.to_string(),
            Expected::AsRecorded => "its origin's recorded protocol".into(),
        }
    }
}

/// Validates one run. `expected` is the ALPN name (`http/1.1`, `h2`, `h3`); `server` is the
/// server's log for the run, when the server keeps one.
pub fn validate<'a>(
    expected: impl Into<Expected<'a>>,
    manifest: &Manifest,
    obs: &Observation,
    end: &LoadEnd,
    server: Option<&[ServerView]>,
) -> Verdict {
    let mut reasons: Vec<Reason> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut add = |kind: ReasonKind, detail: String| reasons.push(Reason { kind, detail });
    let expected: Expected = expected.into();
    // A redirected file is named after its first URL but came from its target's origin.
    let want = |url: &str| {
        let file = manifest.file(&manifest.key(url)).map(|f| f.path.as_str());
        expected.for_url(manifest, file.unwrap_or(url)).to_string()
    };
    let described = expected.describe();

    let dnf = matches!(end, LoadEnd::TimedOut(_));
    match end {
        LoadEnd::Completed => {}
        LoadEnd::TimedOut(d) => add(ReasonKind::Timeout, d.clone()),
        LoadEnd::Crashed(d) => add(ReasonKind::BrowserCrash, d.clone()),
        LoadEnd::NavigationFailed(d) => add(ReasonKind::NavigationError, d.clone()),
    }

    // 1. Resource Timing: the navigation and every resource on the forced protocol.
    let nav = obs.navigation.as_ref().map(EntryTiming::parse);
    match &nav {
        Some(n) if n.next_hop_protocol != want(&n.name) => add(
            ReasonKind::ProtocolMismatch,
            format!(
                "the page came over {:?}, not {}",
                n.next_hop_protocol,
                want(&n.name)
            ),
        ),
        Some(n) if n.response_status != 0 && n.response_status != 200 => add(
            ReasonKind::HttpError,
            format!("the page answered {}", n.response_status),
        ),
        Some(_) => {}
        None if *end == LoadEnd::Completed => add(
            ReasonKind::NavigationError,
            "no navigation timing entry".into(),
        ),
        None => {}
    }
    let entries: Vec<EntryTiming> = obs.resources.iter().map(EntryTiming::parse).collect();
    let key = |url: &str| manifest.key(url);
    let wrong: Vec<String> = entries
        .iter()
        .filter(|e| e.next_hop_protocol != want(&e.name))
        .map(|e| format!("{} over {:?}", key(&e.name), e.next_hop_protocol))
        .collect();
    if !wrong.is_empty() {
        add(
            ReasonKind::ProtocolMismatch,
            format!(
                "{} resource(s) not over {described}: {}",
                wrong.len(),
                few(&wrong)
            ),
        );
    }

    // 2. The DevTools view of the same responses (CDP for Chromium, BiDi for Firefox).
    let cdp = network_requests(obs);
    let devtools = obs.devtools_name();
    let cdp_wrong: Vec<String> = cdp
        .iter()
        .filter(|c| !c.url.starts_with("data:"))
        .filter_map(|c| match &c.protocol {
            Some(p) if *p != want(&c.url) => Some(format!("{} over {p:?}", key(&c.url))),
            _ => None,
        })
        .collect();
    if !cdp_wrong.is_empty() {
        add(
            ReasonKind::CdpProtocolMismatch,
            format!(
                "{devtools} saw {} response(s) not over {described}: {}",
                cdp_wrong.len(),
                few(&cdp_wrong)
            ),
        );
    }
    let failed_paths: BTreeMap<String, String> = cdp
        .iter()
        .filter_map(|c| c.failed.as_ref().map(|f| (key(&c.url), f.clone())))
        .collect();
    let failed: Vec<String> = failed_paths
        .iter()
        .map(|(p, f)| format!("{p} ({f})"))
        .collect();

    // 3. Every manifest file exactly once (a site: as often as recorded), with its exact size.
    let site = manifest.site.is_some();
    let mut seen: BTreeMap<String, Vec<&EntryTiming>> = BTreeMap::new();
    for e in &entries {
        // A redirected file is named after its first URL: count it under the file's own.
        let k = key(&e.name);
        let k = manifest.file(&k).map_or(k, |f| f.path.clone());
        seen.entry(k).or_default().push(e);
    }
    // The download page fetches its file again after a network error (a connection broken
    // by an outage or NAT rebinding): each attempt may be loaded and served once.
    let attempts = obs
        .page_result
        .as_ref()
        .and_then(|p| p.get("attempts"))
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, 1 + u64::from(crate::workload::DOWNLOAD_RETRIES)) as usize;
    let retried = |path: &str| {
        attempts > 1
            && matches!(manifest.workload.kind, WorkloadKind::Download { .. })
            && manifest.files.first().is_some_and(|f| f.path == path)
    };
    let expected_times = |path: &str| {
        let n = manifest.files.iter().filter(|f| f.path == path).count();
        if retried(path) {
            n * attempts
        } else {
            n
        }
    };
    let (mut missing, mut dup, mut short, mut http) = (vec![], vec![], vec![], vec![]);
    let mut not_requested = Vec::new();
    // Chromium leaves some cross-origin loads out of Resource Timing (a font a cross-origin
    // stylesheet asked for): on a site, CDP's finished response then stands in for it, and the
    // server's byte count below checks it arrived whole.
    let cdp_finished: BTreeMap<String, &crate::metrics::NetworkRequest> = cdp
        .iter()
        .filter(|c| c.failed.is_none() && c.encoded_data_length.is_some())
        .map(|c| (key(&c.url), c))
        .collect();
    let mut cdp_only = Vec::new();
    let mut checked = std::collections::BTreeSet::new();
    for f in manifest
        .files
        .iter()
        .filter(|f| checked.insert(f.path.as_str()))
    {
        let times = expected_times(&f.path);
        match seen.get(&f.path).map(Vec::as_slice) {
            // After a timeout a file still loading is expected; one whose request failed is not.
            None | Some([]) if dnf && !failed_paths.contains_key(&f.path) => {}
            // A replayed page need not ask for all it asked for when recorded (the report
            // says what it skipped); what it asks for must arrive whole.
            None | Some([]) if site && cdp_finished.contains_key(&f.path) => {
                cdp_only.push(f.path.clone())
            }
            None | Some([]) if site && !failed_paths.contains_key(&f.path) => {
                not_requested.push(f.path.clone())
            }
            None | Some([]) => missing.push(f.path.clone()),
            Some(many) if many.len() > times => dup.push(format!("{} ×{}", f.path, many.len())),
            // A retried download: the last attempt is the one that must be whole.
            Some(loads) if retried(&f.path) => {
                if !loads.iter().any(|e| e.encoded_body_size as u64 == f.size) {
                    short.push(format!("{} never whole in {attempts} attempts", f.path));
                }
            }
            Some(loads) => {
                for e in loads {
                    if e.response_status != 0 && e.response_status != f.status {
                        http.push(format!("{} answered {}", f.path, e.response_status));
                    } else if e.encoded_body_size as u64 != f.size {
                        short.push(format!(
                            "{} {} of {} bytes",
                            f.path, e.encoded_body_size, f.size
                        ));
                    }
                }
            }
        }
    }
    if !cdp_only.is_empty() {
        warnings.push(format!(
            "{} file(s) not in Resource Timing, checked by {devtools} and the server log: {}",
            cdp_only.len(),
            few(&cdp_only)
        ));
    }
    if !not_requested.is_empty() {
        warnings.push(format!(
            "{} recorded file(s) not requested on replay: {}",
            not_requested.len(),
            few(&not_requested)
        ));
    }
    if !missing.is_empty() {
        let mut detail = format!(
            "{} of {} file(s) never loaded: {}",
            missing.len(),
            manifest.files.len(),
            few(&missing)
        );
        if dnf {
            detail.push_str(" (their requests failed before the timeout)");
        }
        if !failed.is_empty() {
            detail.push_str(&format!("; failed requests: {}", few(&failed)));
        }
        add(ReasonKind::MissingResource, detail);
    }
    if !dup.is_empty() {
        add(
            ReasonKind::DuplicateResource,
            format!("loaded more than once: {}", few(&dup)),
        );
    }
    if !short.is_empty() {
        add(
            ReasonKind::ShortResource,
            format!("wrong body size: {}", few(&short)),
        );
    }
    if !http.is_empty() {
        add(ReasonKind::HttpError, few(&http));
    }
    let extra: Vec<String> = seen
        .keys()
        .filter(|p| manifest.file(p).is_none() && **p != manifest.entry)
        .cloned()
        .collect();
    if !extra.is_empty() {
        warnings.push(format!("requests outside the manifest: {}", few(&extra)));
    }

    if attempts > 1 {
        warnings.push(format!(
            "the download was fetched {attempts} times: earlier attempts failed with a network error ({})",
            obs.page_result
                .as_ref()
                .and_then(|p| p.get("errors"))
                .map_or(String::new(), |e| e.to_string())
        ));
    }

    // 4. The transfer workloads' bodies, as the page checked them.
    let pb = obs.page_result.as_ref();
    let pb_field = |k: &str| pb.and_then(|p| p.get(k)).cloned().unwrap_or(Value::Null);
    let body_whole = pb_field("ok") == Value::Bool(true);
    if *end == LoadEnd::Completed && !body_whole {
        match manifest.workload.kind {
            WorkloadKind::Download { bytes } => add(
                ReasonKind::CorruptBody,
                format!(
                    "download of {bytes} bytes not whole: page saw {} bytes{}",
                    pb_field("bytes"),
                    match pb_field("error") {
                        Value::String(e) => format!(" ({e})"),
                        _ => String::new(),
                    }
                ),
            ),
            WorkloadKind::Upload { bytes } => add(
                ReasonKind::CorruptBody,
                format!(
                    "upload of {bytes} bytes: server counted {}",
                    pb_field("server_bytes")
                ),
            ),
            WorkloadKind::Page { .. }
            | WorkloadKind::Sharded { .. }
            | WorkloadKind::Site { .. } => {}
        }
    }

    // 5. The server's view: same protocol, and it served what the browser loaded.
    if let Some(log) = server {
        if log.is_empty() && nav.is_some() {
            add(
                ReasonKind::ServerLogMismatch,
                "the server logged no request for this run".into(),
            );
        }
        // A site's requests are told apart by their whole URL (many origins).
        let server_key = |v: &ServerView| -> String {
            match (&v.url, site) {
                (Some(u), true) => key(u),
                _ => v.path.clone(),
            }
        };
        let mut served: BTreeMap<(&str, String), usize> = BTreeMap::new();
        for v in log {
            *served
                .entry((v.method.as_str(), server_key(v)))
                .or_default() += 1;
        }
        let allowed = |p: &str| {
            manifest
                .file(p)
                .map_or(1, |f| expected_times(&f.path))
                .max(1)
        };
        let twice: Vec<String> = served
            .iter()
            .filter(|((_, p), n)| **n > allowed(p))
            .map(|((m, p), n)| format!("{m} {p} ×{n}"))
            .collect();
        if !twice.is_empty() {
            add(
                ReasonKind::DuplicateRequest,
                format!("the server served more than once: {}", few(&twice)),
            );
        }
        let other: Vec<String> = log
            .iter()
            // The server saw each hop of a redirect itself, on its own origin.
            .filter(|s| s.protocol != expected.for_url(manifest, &server_key_of(s)))
            .map(|s| format!("{} {} over {:?}", s.method, s.path, s.protocol))
            .collect();
        if !other.is_empty() {
            add(
                ReasonKind::ServerProtocolMismatch,
                format!(
                    "the server saw {} request(s) not over {described}: {}",
                    other.len(),
                    few(&other)
                ),
            );
        }
        if *end == LoadEnd::Completed {
            let mut unlogged = Vec::new();
            for f in &manifest.files {
                let served: Vec<&ServerView> =
                    log.iter().filter(|s| server_key(s) == f.path).collect();
                if served.is_empty() && (seen.contains_key(&f.path) || cdp_only.contains(&f.path)) {
                    unlogged.push(f.path.clone());
                } else if served.len() == 1
                    && served[0].status == f.status
                    && served[0].bytes_sent != f.size
                {
                    add(
                        ReasonKind::ShortResource,
                        format!(
                            "server sent {} of {} bytes for {}",
                            served[0].bytes_sent, f.size, f.path
                        ),
                    );
                }
            }
            if !unlogged.is_empty() {
                add(
                    ReasonKind::ServerLogMismatch,
                    format!(
                        "loaded by the browser but not in the server log: {}",
                        few(&unlogged)
                    ),
                );
            }
            if let WorkloadKind::Upload { bytes } = manifest.workload.kind {
                let up: Vec<&ServerView> = log.iter().filter(|s| s.method == "POST").collect();
                if up.len() != 1 || up[0].bytes_received != bytes {
                    add(
                        ReasonKind::CorruptBody,
                        format!(
                            "server log: {} upload(s), bytes received {:?}, expected one of {bytes}",
                            up.len(),
                            up.iter().map(|u| u.bytes_received).collect::<Vec<_>>()
                        ),
                    );
                }
            }
        }
    }

    // 6. A replay: requests the archive did not have.
    if let (Some(plan), Some(log)) = (&manifest.site, server) {
        let of = |m: crate::site::replay::ReplayMatch| -> Vec<String> {
            log.iter()
                .filter(|v| v.replay == Some(m))
                .map(|v| format!("{} {}", v.method, server_key_of(v)))
                .collect()
        };
        let misses = of(crate::site::replay::ReplayMatch::Miss);
        if misses.len() > plan.options.max_misses as usize {
            reasons.push(Reason {
                kind: ReasonKind::ReplayMiss,
                detail: format!(
                    "{} request(s) not in the site archive (--max-misses {}): {}",
                    misses.len(),
                    plan.options.max_misses,
                    few(&misses)
                ),
            });
        } else if !misses.is_empty() {
            warnings.push(format!(
                "{} request(s) not in the site archive, answered 404: {}",
                misses.len(),
                few(&misses)
            ));
        }
        let approximate = of(crate::site::replay::ReplayMatch::SamePath);
        if !approximate.is_empty() {
            warnings.push(format!(
                "{} request(s) answered with another query string's recording: {}",
                approximate.len(),
                few(&approximate)
            ));
        }
    }

    // A timeout is the outcome only when nothing else went wrong before it.
    let outcome = if dnf && reasons.iter().all(|r| r.kind == ReasonKind::Timeout) {
        Outcome::Dnf
    } else if reasons.is_empty() {
        Outcome::Valid
    } else {
        Outcome::Invalid
    };
    Verdict {
        outcome,
        reasons,
        warnings,
    }
}

/// The URL a server view names (its path when the server does not say the authority).
fn server_key_of(v: &ServerView) -> String {
    v.url.clone().unwrap_or_else(|| v.path.clone())
}

/// An `h3-discovered` repeat view counts only when the browser used HTTP/3 for everything:
/// `mismatches` are the protocol mismatches validation found (any viewpoint).
pub fn check_discovered(mismatches: &[&Reason]) -> Option<Reason> {
    (!mismatches.is_empty()).then(|| Reason {
        kind: ReasonKind::NotDiscovered,
        detail: format!(
            "the browser did not use the HTTP/3 its first view learnt on every request ({})",
            mismatches
                .iter()
                .map(|r| r.kind.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// An `h3-primed` run must reach the server over QUIC only: `tcp_opened` is the number of TCP
/// connections the browser opened during the load (its namespace's `Tcp: ActiveOpens`).
pub fn check_primed(tcp_opened: u64) -> Option<Reason> {
    (tcp_opened > 0).then(|| Reason {
        kind: ReasonKind::NotPrimed,
        detail: format!(
            "the primed browser opened {tcp_opened} TCP connection(s): it did not go straight to HTTP/3"
        ),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::workload::{FileEntry, FileKind, Workload};

    use crate::metrics::tests::fixture;
    use crate::metrics::CdpEvent;

    /// The manifest the fixture was recorded with, rebuilt from its entries.
    pub(crate) fn manifest_of(obs: &Observation, workload: &str) -> Manifest {
        let files: Vec<FileEntry> = obs
            .resources
            .iter()
            .map(EntryTiming::parse)
            .map(|e| FileEntry {
                path: e.path(),
                kind: FileKind::Image,
                content_type: String::new(),
                size: e.encoded_body_size as u64,
                sha256: String::new(),
                status: 200,
                aliases: vec![],
            })
            .collect();
        Manifest {
            workload: workload.parse::<Workload>().unwrap(),
            generator_version: 1,
            seed: 1,
            entry: format!("/{workload}/index.html"),
            entry_size: 1,
            subresource_bytes: files.iter().map(|f| f.size).sum(),
            files,
            upload_bytes: None,
            site: None,
        }
    }

    pub(crate) fn server_view(obs: &Observation, proto: &str) -> Vec<ServerView> {
        let mut v = vec![ServerView {
            url: None,
            replay: None,
            protocol: proto.into(),
            method: "GET".into(),
            path: crate::metrics::url_path(
                EntryTiming::parse(obs.navigation.as_ref().unwrap())
                    .name
                    .as_str(),
            ),
            status: 200,
            bytes_sent: 1,
            bytes_received: 0,
            tls_resumed: None,
        }];
        for e in obs.resources.iter().map(EntryTiming::parse) {
            v.push(ServerView {
                url: None,
                replay: None,
                protocol: proto.into(),
                method: "GET".into(),
                path: e.path(),
                status: 200,
                bytes_sent: e.encoded_body_size as u64,
                bytes_received: 0,
                tls_resumed: None,
            });
        }
        v
    }

    #[test]
    fn recorded_loads_are_valid_for_their_protocol_only() {
        for (name, alpn) in [
            ("h1-page10", "http/1.1"),
            ("h2-page10", "h2"),
            ("h3-page10", "h3"),
        ] {
            let obs = fixture(name);
            let m = manifest_of(&obs, "page10");
            let log = server_view(&obs, alpn);
            let v = validate(alpn, &m, &obs, &LoadEnd::Completed, Some(&log));
            assert_eq!(v.outcome, Outcome::Valid, "{name}: {}", v.reason_text());
            let other = if alpn == "h2" { "h3" } else { "h2" };
            let v = validate(other, &m, &obs, &LoadEnd::Completed, None);
            assert_eq!(v.outcome, Outcome::Invalid);
            let kinds: Vec<_> = v.reasons.iter().map(|r| r.kind).collect();
            assert!(kinds.contains(&ReasonKind::ProtocolMismatch), "{kinds:?}");
            assert!(
                kinds.contains(&ReasonKind::CdpProtocolMismatch),
                "{kinds:?}"
            );
        }
    }

    #[test]
    fn server_seeing_another_protocol_invalidates() {
        let obs = fixture("h3-page10");
        let m = manifest_of(&obs, "page10");
        let mut log = server_view(&obs, "h3");
        log[3].protocol = "h2".into();
        let v = validate("h3", &m, &obs, &LoadEnd::Completed, Some(&log));
        assert_eq!(v.outcome, Outcome::Invalid);
        assert_eq!(v.reasons[0].kind, ReasonKind::ServerProtocolMismatch);
        assert!(validate("h3", &m, &obs, &LoadEnd::Completed, Some(&[]))
            .reasons
            .iter()
            .any(|r| r.kind == ReasonKind::ServerLogMismatch));
    }

    #[test]
    fn short_missing_and_duplicate_files() {
        let obs = fixture("h2-page10");
        let mut m = manifest_of(&obs, "page10");
        m.files[0].size += 1;
        let v = validate("h2", &m, &obs, &LoadEnd::Completed, None);
        assert_eq!(
            v.reasons[0].kind,
            ReasonKind::ShortResource,
            "{}",
            v.reason_text()
        );
        let mut m = manifest_of(&obs, "page10");
        m.files.push(FileEntry {
            path: "/page10/img/extra.png".into(),
            kind: FileKind::Image,
            content_type: String::new(),
            size: 10,
            sha256: String::new(),
            status: 200,
            aliases: vec![],
        });
        let v = validate("h2", &m, &obs, &LoadEnd::Completed, None);
        assert_eq!(v.reasons[0].kind, ReasonKind::MissingResource);
        let mut dup = obs.clone();
        dup.resources.push(dup.resources[0].clone());
        let v = validate(
            "h2",
            &manifest_of(&obs, "page10"),
            &dup,
            &LoadEnd::Completed,
            None,
        );
        assert_eq!(v.reasons[0].kind, ReasonKind::DuplicateResource);
    }

    #[test]
    fn timeout_is_dnf_and_crash_is_invalid() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let v = validate("h2", &m, &obs, &LoadEnd::TimedOut("120 s".into()), None);
        assert_eq!(v.outcome, Outcome::Dnf);
        let v = validate("h2", &m, &obs, &LoadEnd::Crashed("gone".into()), None);
        assert_eq!(v.outcome, Outcome::Invalid);
        assert_eq!(v.reasons[0].kind, ReasonKind::BrowserCrash);
        let v = validate(
            "h2",
            &m,
            &Observation::default(),
            &LoadEnd::NavigationFailed("net::ERR_QUIC_PROTOCOL_ERROR".into()),
            None,
        );
        assert_eq!(v.outcome, Outcome::Invalid);
        assert!(v.reason_text().contains("ERR_QUIC_PROTOCOL_ERROR"));
    }

    /// The fixture with its last `n` resources still loading at the timeout.
    fn cut_short(obs: &Observation, n: usize) -> Observation {
        let mut o = obs.clone();
        o.resources.truncate(o.resources.len() - n);
        o
    }

    #[test]
    fn a_timeout_with_files_still_loading_is_dnf() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let end = LoadEnd::TimedOut("120 s".into());
        let v = validate("h2", &m, &cut_short(&obs, 3), &end, None);
        assert_eq!(v.outcome, Outcome::Dnf, "{}", v.reason_text());
        assert_eq!(v.reasons.len(), 1);
    }

    #[test]
    fn a_timeout_never_hides_what_went_wrong_before_it() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let end = LoadEnd::TimedOut("120 s".into());
        // Wrong protocol, then a timeout: invalid, with both reasons on record.
        let v = validate("h3", &m, &cut_short(&obs, 3), &end, None);
        assert_eq!(v.outcome, Outcome::Invalid);
        let kinds: Vec<ReasonKind> = v.reasons.iter().map(|r| r.kind).collect();
        assert!(kinds.contains(&ReasonKind::Timeout), "{kinds:?}");
        assert!(kinds.contains(&ReasonKind::ProtocolMismatch), "{kinds:?}");
        // A request that failed (so its file will never arrive), then a timeout: invalid.
        let mut failed = cut_short(&obs, 3);
        let lost = &m.files.last().unwrap().path;
        failed.cdp_events.push(CdpEvent {
            method: "Network.requestWillBeSent".into(),
            params: serde_json::json!({"requestId": "x1", "request": {"url": format!("https://pagebench.test{lost}"), "method": "GET"}}),
        });
        failed.cdp_events.push(CdpEvent {
            method: "Network.loadingFailed".into(),
            params: serde_json::json!({"requestId": "x1", "errorText": "net::ERR_QUIC_PROTOCOL_ERROR"}),
        });
        let v = validate("h2", &m, &failed, &end, None);
        assert_eq!(v.outcome, Outcome::Invalid, "{}", v.reason_text());
        assert!(v.reason_text().contains("ERR_QUIC_PROTOCOL_ERROR"));
        // A short body seen before the timeout: invalid.
        let mut short = manifest_of(&obs, "page10");
        short.files[0].size += 7;
        let v = validate("h2", &short, &cut_short(&obs, 3), &end, None);
        assert_eq!(v.outcome, Outcome::Invalid);
        // A link or server failure found afterwards invalidates a DNF too.
        let mut v = validate("h2", &m, &cut_short(&obs, 3), &end, None);
        v.invalidate(ReasonKind::Link, "the emulator stopped".into());
        assert_eq!(v.outcome, Outcome::Invalid);
        assert!(is_measurement_failure(&v.reasons));
    }

    #[test]
    fn a_file_the_server_served_twice_is_a_duplicate_request() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let mut log = server_view(&obs, "h2");
        log.push(log[2].clone());
        let v = validate("h2", &m, &obs, &LoadEnd::Completed, Some(&log));
        assert_eq!(v.outcome, Outcome::Invalid);
        assert_eq!(v.reasons[0].kind, ReasonKind::DuplicateRequest);
        assert!(v.reasons[0].detail.contains("×2"), "{}", v.reason_text());
    }

    #[test]
    fn primed_runs_must_not_open_tcp() {
        assert_eq!(check_primed(0), None);
        let r = check_primed(2).unwrap();
        assert_eq!(r.kind, ReasonKind::NotPrimed);
        assert!(r.detail.contains("2 TCP"));
    }

    #[test]
    fn measurement_failures_are_told_apart_from_protocol_outcomes() {
        let r = |kind| Reason {
            kind,
            detail: String::new(),
        };
        for kind in [
            ReasonKind::Link,
            ReasonKind::Server,
            ReasonKind::BrowserCrash,
        ] {
            assert!(is_measurement_failure(&[r(kind)]), "{kind:?}");
            assert!(is_measurement_failure(&[
                r(ReasonKind::ProtocolMismatch),
                r(kind)
            ]));
        }
        for kind in [
            ReasonKind::ProtocolMismatch,
            ReasonKind::ShortResource,
            ReasonKind::NavigationError,
            ReasonKind::NotPrimed,
        ] {
            assert!(!is_measurement_failure(&[r(kind)]), "{kind:?}");
        }
        assert!(!is_measurement_failure(&[r(ReasonKind::Timeout)]));
        for k in ReasonKind::ALL {
            assert_eq!(k.name().parse::<ReasonKind>(), Ok(k));
        }
        assert!("nonsense".parse::<ReasonKind>().is_err());
    }

    /// A two-origin site whose page came over h2 and whose CDN over h1 when recorded.
    fn site_manifest() -> (Manifest, Observation, Vec<ServerView>) {
        use crate::site::BodyRef;
        use crate::workload::site::{manifest, SiteOptions};
        let entry = |url: &str, size: u64, proto: &str, ip: &str| crate::site::Entry {
            body: Some(BodyRef {
                sha256: format!("{size:064x}"),
                size,
            }),
            protocol: Some(proto.into()),
            server_address: Some(ip.into()),
            ..crate::site::tests::entry(url, 200)
        };
        let archive = crate::site::SiteArchive {
            format: 1,
            source: crate::site::Source {
                kind: "record".into(),
                from: "https://www.a.test/".into(),
                creator: String::new(),
                started: None,
            },
            page_url: "https://www.a.test/".into(),
            entries: vec![
                entry("https://www.a.test/", 100, "h2", "192.0.2.1"),
                entry("https://cdn.a.test/x.css", 300, "http/1.1", "192.0.2.2"),
            ],
        };
        let w = Workload {
            name: "site-a".into(),
            kind: WorkloadKind::Site { dir: "/a".into() },
        };
        let m = manifest(
            &w,
            std::path::Path::new("/a"),
            &archive,
            SiteOptions::default(),
        )
        .unwrap();
        let timing = |url: &str, p: &str, size: u64| serde_json::json!({"name": url, "nextHopProtocol": p, "encodedBodySize": size});
        let obs = Observation {
            navigation: Some(timing("https://www.a.test/", "h2", 100)),
            resources: vec![timing("https://cdn.a.test/x.css", "http/1.1", 300)],
            ..Observation::default()
        };
        let view = |url: &str, p: &str, bytes: u64| ServerView {
            protocol: p.into(),
            method: "GET".into(),
            path: crate::metrics::url_path(url),
            url: Some(url.into()),
            replay: Some(crate::site::replay::ReplayMatch::Exact),
            status: 200,
            bytes_sent: bytes,
            bytes_received: 0,
            tls_resumed: None,
        };
        let views = vec![
            view("https://www.a.test/", "h2", 100),
            view("https://cdn.a.test/x.css", "http/1.1", 300),
        ];
        (m, obs, views)
    }

    fn as_recorded(m: &Manifest, obs: &Observation, views: &[ServerView]) -> Verdict {
        validate(
            Expected::AsRecorded,
            m,
            obs,
            &LoadEnd::Completed,
            Some(views),
        )
    }

    #[test]
    fn as_recorded_expects_each_origin_on_its_recorded_protocol() {
        let (m, obs, views) = site_manifest();
        let v = as_recorded(&m, &obs, &views);
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        // Forced onto h2, the CDN's HTTP/1.1 is a mismatch from every viewpoint.
        let v = validate("h2", &m, &obs, &LoadEnd::Completed, Some(&views));
        let kinds: Vec<ReasonKind> = v.reasons.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [
                ReasonKind::ProtocolMismatch,
                ReasonKind::ServerProtocolMismatch
            ]
        );
        assert!(
            v.reasons[0].detail.contains("https://cdn.a.test/x.css"),
            "{}",
            v.reasons[0].detail
        );
    }

    #[test]
    fn replay_misses_above_the_limit_invalidate() {
        let (mut m, obs, mut views) = site_manifest();
        let mut miss = views[1].clone();
        miss.url = Some("https://cdn.a.test/beacon?t=1".into());
        miss.path = "/beacon".into();
        miss.status = 404;
        miss.replay = Some(crate::site::replay::ReplayMatch::Miss);
        views.push(miss);
        let v = as_recorded(&m, &obs, &views);
        assert_eq!(v.outcome, Outcome::Invalid);
        assert_eq!(v.reasons[0].kind, ReasonKind::ReplayMiss);
        assert!(v.reasons[0]
            .detail
            .contains("GET https://cdn.a.test/beacon?t=1"));
        m.site.as_mut().unwrap().options.max_misses = 1;
        let v = as_recorded(&m, &obs, &views);
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        assert!(
            v.warnings.iter().any(|w| w.contains("answered 404")),
            "{:?}",
            v.warnings
        );
    }

    #[test]
    fn corrupt_download_is_invalid() {
        let obs = fixture("h2-download");
        let m = manifest_of(&obs, "download");
        assert_eq!(
            validate("h2", &m, &obs, &LoadEnd::Completed, None).outcome,
            Outcome::Valid
        );
        let mut bad = obs.clone();
        bad.page_result = Some(serde_json::json!({"done": true, "ok": false, "bytes": 12}));
        let v = validate("h2", &m, &bad, &LoadEnd::Completed, None);
        assert_eq!(v.reasons[0].kind, ReasonKind::CorruptBody);
    }

    #[test]
    fn a_download_fetched_again_after_a_network_error_counts_its_attempts() {
        let obs = fixture("h2-download");
        let m = manifest_of(&obs, "download");
        let file = m.files[0].clone();
        let log = server_view(&obs, "h2");
        // The server served the file twice: the first attempt broken after 1 MB.
        let mut twice = log.clone();
        let mut broken = twice.last().unwrap().clone();
        broken.bytes_sent = 1_000_000;
        twice.push(broken);
        let v = validate("h2", &m, &obs, &LoadEnd::Completed, Some(&twice));
        assert_eq!(
            v.reasons[0].kind,
            ReasonKind::DuplicateRequest,
            "one attempt"
        );
        let mut retried = obs.clone();
        let mut pb = retried.page_result.clone().unwrap();
        pb["attempts"] = serde_json::json!(2);
        pb["errors"] = serde_json::json!(["TypeError: Failed to fetch"]);
        retried.page_result = Some(pb);
        let v = validate("h2", &m, &retried, &LoadEnd::Completed, Some(&twice));
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        assert!(
            v.warnings.iter().any(|w| w.contains("fetched 2 times")),
            "{:?}",
            v.warnings
        );
        // Three servings for two attempts are still too many.
        let mut thrice = twice.clone();
        thrice.push(twice.last().unwrap().clone());
        let v = validate("h2", &m, &retried, &LoadEnd::Completed, Some(&thrice));
        assert_eq!(v.reasons[0].kind, ReasonKind::DuplicateRequest);
        assert_eq!(file.path, "/download/download.bin");
    }
}
