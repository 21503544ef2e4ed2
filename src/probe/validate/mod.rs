//! Run validation (pure): a run counts only if the protocol was the forced one from every
//! viewpoint (Resource Timing, CDP, and the server's log when the server keeps one we can
//! read), every manifest file arrived exactly once with its exact size and the server served it
//! once, and the download/upload body was whole. Anything else is kept as an invalid run with
//! its reasons. A run that timed out is "did not finish" (DNF, a protocol outcome) only when
//! nothing went wrong before the timeout: a wrong protocol, a failed request, a short body or a
//! server mismatch seen before it make the run invalid, whatever happened next.
//!
//! The checks are a table ([`checks::CHECKS`]); this module holds what they judge with and
//! what they give: outcomes, typed reasons and their classes.

pub mod checks;

use serde::{Deserialize, Serialize};

pub use checks::{Check, CHECKED_ELSEWHERE, CHECKS};
use checks::{Evidence, Findings};

use crate::config::workload::Manifest;
use crate::origin::servers::ServerView;
use crate::probe::metrics::Observation;

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
    /// What `url` must have come over (`?` for a host the recording lacks): a replayed site's
    /// `http://` origin HTTP/1.1 whatever the run's protocol.
    fn for_url<'m>(&'m self, manifest: &'m Manifest, url: &str) -> &'m str {
        let site = manifest.site.as_ref();
        if site
            .and_then(|s| s.origin_of_url(url))
            .is_some_and(|o| !o.is_tls())
        {
            return crate::config::protocol::Protocol::H1.alpn();
        }
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

/// Validates one run: runs every check of [`CHECKS`] in order over its evidence. `expected` is
/// the ALPN name (`http/1.1`, `h2`, `h3`); `server` is the server's log for the run, when the
/// server keeps one.
pub fn validate<'a>(
    expected: impl Into<Expected<'a>>,
    manifest: &Manifest,
    obs: &Observation,
    end: &LoadEnd,
    server: Option<&[ServerView]>,
) -> Verdict {
    let evidence = Evidence::new(expected.into(), manifest, obs, end, server);
    let mut found = Findings::default();
    for check in CHECKS {
        let before = found.reasons.len();
        (check.run)(&evidence, &mut found);
        debug_assert!(
            found.reasons[before..]
                .iter()
                .all(|r| check.kinds.contains(&r.kind)),
            "check {} gave a kind its entry does not list: {:?}",
            check.name,
            &found.reasons[before..]
        );
    }
    // A timeout is the outcome only when nothing else went wrong before it.
    let outcome =
        if evidence.timed_out() && found.reasons.iter().all(|r| r.kind == ReasonKind::Timeout) {
            Outcome::Dnf
        } else if found.reasons.is_empty() {
            Outcome::Valid
        } else {
            Outcome::Invalid
        };
    Verdict {
        outcome,
        reasons: found.reasons,
        warnings: found.warnings,
        browser_initiated: evidence.browser_initiated.iter().cloned().collect(),
    }
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
    use crate::config::workload::{FileEntry, FileKind, Workload, WorkloadKind};

    use crate::probe::metrics::tests::fixture;
    use crate::probe::metrics::{EntryTiming, NetworkRequest};

    /// The table names each check once, and every reason kind has a place that gives it: a
    /// check of the table or one of the run's other checks, never both.
    #[test]
    fn every_reason_kind_is_given_by_the_table_or_elsewhere() {
        let names: std::collections::BTreeSet<&str> = CHECKS.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), CHECKS.len());
        for kind in ReasonKind::ALL {
            let in_table = CHECKS.iter().any(|c| c.kinds.contains(&kind));
            let elsewhere = CHECKED_ELSEWHERE.contains(&kind);
            assert!(
                in_table != elsewhere,
                "{kind}: in the table {in_table}, elsewhere {elsewhere}"
            );
        }
        assert!(CHECKS
            .iter()
            .all(|c| !c.kinds.is_empty() && !c.doc.is_empty()));
    }

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
        let nav = EntryTiming::parse(obs.navigation.as_ref().unwrap());
        let page = crate::probe::metrics::url_path(nav.name.as_str());
        let mut v = vec![ServerView::logged(proto, "GET", page, 200, 1)];
        for e in obs.resources.iter().map(EntryTiming::parse) {
            v.push(ServerView::logged(
                proto,
                "GET",
                e.path(),
                200,
                e.encoded_body_size as u64,
            ));
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
    fn a_response_from_the_browser_s_cache_went_over_no_protocol() {
        // Firefox's tab icon, the page's own image again: BiDi says `fromCache` and a default
        // protocol.
        let mut obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let log = server_view(&obs, "h2");
        let mut again = obs.network.requests[1].clone();
        again.request_id = "again".into();
        again.protocol = Some("http/1.1".into());
        again.from_cache = true;
        obs.network.requests.push(again);
        let v = validate("h2", &m, &obs, &LoadEnd::Completed, Some(&log));
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        obs.network.requests.last_mut().unwrap().from_cache = false;
        let v = validate("h2", &m, &obs, &LoadEnd::Completed, Some(&log));
        assert_eq!(v.reasons[0].kind, ReasonKind::CdpProtocolMismatch);
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
        failed.network.requests.push(NetworkRequest {
            request_id: "x1".into(),
            url: format!("https://pagebench.test{lost}"),
            method: "GET".into(),
            failed: Some("net::ERR_QUIC_PROTOCOL_ERROR".into()),
            ..NetworkRequest::default()
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
        use crate::config::site::BodyRef;
        use crate::config::workload::site::{manifest, SiteOptions};
        let entry = |url: &str, size: u64, proto: &str, ip: &str| crate::config::site::Entry {
            body: Some(BodyRef {
                sha256: format!("{size:064x}"),
                size,
            }),
            protocol: Some(proto.into()),
            server_address: Some(ip.into()),
            ..crate::config::site::tests::entry(url, 200)
        };
        let archive = crate::config::site::SiteArchive {
            format: 1,
            source: crate::config::site::Source {
                kind: "record".into(),
                from: "https://www.a.test/".into(),
                creator: String::new(),
                started: None,
                browser_confinement: None,
                load_ms: None,
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
            url: Some(url.into()),
            replay: Some(crate::config::site::replay::ReplayMatch::Exact),
            ..ServerView::logged(p, "GET", crate::probe::metrics::url_path(url), 200, bytes)
        };
        let views = vec![
            view("https://www.a.test/", "h2", 100),
            view("https://cdn.a.test/x.css", "http/1.1", 300),
        ];
        (m, obs, views)
    }

    #[test]
    fn a_cross_origin_size_resource_timing_hides_is_the_server_log_s_to_check() {
        let (m, mut obs, mut views) = site_manifest();
        // Firefox: an opaque cross-origin response has no body size and no status.
        obs.resources[0]["encodedBodySize"] = 0.into();
        let v = as_recorded(&m, &obs, &views);
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        assert!(
            v.warnings
                .iter()
                .any(|w| w.contains("sizes Resource Timing hides")),
            "{:?}",
            v.warnings
        );
        // The server log still says whether it went whole.
        views[1].bytes_sent = 120;
        let v = as_recorded(&m, &obs, &views);
        assert_eq!(
            v.reasons[0].kind,
            ReasonKind::ShortResource,
            "{}",
            v.reason_text()
        );
        // A same-origin response is never hidden: 0 bytes of it is short.
        let (m, mut obs, views) = site_manifest();
        obs.navigation.as_mut().unwrap()["name"] = "https://cdn.a.test/".into();
        obs.resources[0]["encodedBodySize"] = 0.into();
        let v = as_recorded(&m, &obs, &views);
        assert!(
            v.reason_text().contains("0 of 300 bytes"),
            "{}",
            v.reason_text()
        );
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
        miss.replay = Some(crate::config::site::replay::ReplayMatch::Miss);
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
    fn what_the_browser_asks_for_on_its_own_is_answered_and_left_out() {
        use crate::config::site::replay::ReplayMatch;
        let (m, mut obs, mut views) = site_manifest();
        let icon = "https://www.a.test/favicon.ico";
        // Chromium: Resource Timing and CDP both call it `other`; the archive lacks it (404),
        // and even its protocol is not the page's to check.
        obs.resources
            .push(serde_json::json!({"name": icon, "initiatorType": "other",
            "nextHopProtocol": "http/1.1", "responseStatus": 404}));
        obs.network.requests.push(NetworkRequest {
            request_id: "9".into(),
            url: icon.into(),
            method: "GET".into(),
            protocol: Some("http/1.1".into()),
            status: Some(404),
            initiator: Some("other".into()),
            ..NetworkRequest::default()
        });
        let mut miss = views[0].clone();
        miss.url = Some(icon.into());
        miss.path = "/favicon.ico".into();
        miss.status = 404;
        miss.replay = Some(ReplayMatch::Miss);
        views.push(miss);
        let v = as_recorded(&m, &obs, &views);
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        assert_eq!(v.browser_initiated, [icon]);
        // Only the server saw it (an engine whose views leave icons out): the browser's still.
        let (only_server, no_views) = (views.clone(), site_manifest().1);
        let v = as_recorded(&m, &no_views, &only_server);
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        assert_eq!(v.browser_initiated, [icon]);
        // The same request made by the page (an image) is the page's: a miss, and its protocol.
        obs.resources.last_mut().unwrap()["initiatorType"] = "img".into();
        let v = as_recorded(&m, &obs, &views);
        let kinds: Vec<ReasonKind> = v.reasons.iter().map(|r| r.kind).collect();
        assert!(kinds.contains(&ReasonKind::ReplayMiss), "{kinds:?}");
        assert!(kinds.contains(&ReasonKind::ProtocolMismatch), "{kinds:?}");
        assert!(v.browser_initiated.is_empty());
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
