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
pub mod inputs;
pub mod reasons;

use checks::Findings;
pub use checks::{Check, CHECKS};
use inputs::Evidence;
pub use inputs::{Expected, RunEvidence};
pub use reasons::{
    is_measurement_failure, reason_text, LoadEnd, Outcome, Reason, ReasonClass, ReasonKind, Verdict,
};

/// Validates one run: runs every check of [`CHECKS`] in order over its evidence.
pub fn validate(run: &RunEvidence) -> Verdict {
    let evidence = Evidence::new(run);
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::protocol::H3Mode;
    use crate::config::workload::Manifest;
    use crate::config::workload::{FileEntry, FileKind, Workload, WorkloadKind};
    use crate::evidence::metrics::Observation;
    use crate::servers::ServerView;

    use crate::evidence::metrics::tests::fixture;
    use crate::evidence::metrics::{EntryTiming, NetworkRequest};

    /// The table names each check once, and every reason kind has exactly one check that
    /// gives it: a run's verdict has one rule per reason, in one place.
    #[test]
    fn every_reason_kind_is_given_by_one_check_of_the_table() {
        let names: std::collections::BTreeSet<&str> = CHECKS.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), CHECKS.len());
        for kind in ReasonKind::ALL {
            let givers: Vec<&str> = CHECKS
                .iter()
                .filter(|c| c.kinds.contains(&kind))
                .map(|c| c.name)
                .collect();
            assert!(!givers.is_empty(), "{kind}: no check gives it");
            let shared = [
                ReasonKind::NavigationError,
                ReasonKind::HttpError,
                ReasonKind::ShortResource,
                ReasonKind::CorruptBody,
            ];
            assert!(
                givers.len() == 1 || shared.contains(&kind),
                "{kind}: given by {givers:?}"
            );
        }
        assert!(CHECKS.iter().all(|c| !c.doc.is_empty()));
    }

    /// A run's verdict as `validate` gives it, the run around the load quiet: its metrics
    /// derived from the observation, a healthy link and server, no variant of its own.
    pub(crate) fn judge<'a>(
        expected: impl Into<Expected<'a>>,
        m: &Manifest,
        obs: &Observation,
        end: &LoadEnd,
        server: Option<&[ServerView]>,
    ) -> Verdict {
        judge_with(expected, m, obs, end, server, Around::default())
    }

    /// The run around the load, where a test changes it.
    #[derive(Default)]
    pub(crate) struct Around<'a> {
        pub metrics: Option<&'a crate::evidence::metrics::RunMetrics>,
        pub h3_mode: Option<H3Mode>,
        pub tcp_opened: u64,
        pub link_faults: &'a [crate::link::LinkFault],
        pub server_exit: Option<&'a str>,
        pub capture_warnings: &'a [String],
        pub pace: Option<&'a crate::evidence::cpu_pace::Pace>,
    }

    /// [`judge`] with the run around the load as `around` says.
    pub(crate) fn judge_with<'a>(
        expected: impl Into<Expected<'a>>,
        m: &Manifest,
        obs: &Observation,
        end: &LoadEnd,
        server: Option<&[ServerView]>,
        around: Around,
    ) -> Verdict {
        let (mut derived, _) = crate::evidence::metrics::derive(obs, &m.workload.kind, 0.0);
        // A synthetic load without timing entries still has a headline: what these tests
        // judge is the load's own checks (`headline` has a test of its own).
        derived.completion_ms = derived.completion_ms.or(Some(1.0));
        validate(&RunEvidence {
            expected: expected.into(),
            manifest: m,
            observation: obs,
            end,
            server_log: server,
            run_id: "test-r01-h2",
            metrics: around.metrics.unwrap_or(&derived),
            h3_mode: around.h3_mode,
            tcp_opened: around.tcp_opened,
            link_faults: around.link_faults,
            server_exit: around.server_exit,
            capture_warnings: around.capture_warnings,
            pace: around.pace,
        })
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
        let page = crate::config::workload::url_path(nav.name.as_str());
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
            let v = judge(alpn, &m, &obs, &LoadEnd::Completed, Some(&log));
            assert_eq!(v.outcome, Outcome::Valid, "{name}: {}", v.reason_text());
            let other = if alpn == "h2" { "h3" } else { "h2" };
            let v = judge(other, &m, &obs, &LoadEnd::Completed, None);
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
        let v = judge("h2", &m, &obs, &LoadEnd::Completed, Some(&log));
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        obs.network.requests.last_mut().unwrap().from_cache = false;
        let v = judge("h2", &m, &obs, &LoadEnd::Completed, Some(&log));
        assert_eq!(v.reasons[0].kind, ReasonKind::CdpProtocolMismatch);
    }

    #[test]
    fn server_seeing_another_protocol_invalidates() {
        let obs = fixture("h3-page10");
        let m = manifest_of(&obs, "page10");
        let mut log = server_view(&obs, "h3");
        log[3].protocol = "h2".into();
        let v = judge("h3", &m, &obs, &LoadEnd::Completed, Some(&log));
        assert_eq!(v.outcome, Outcome::Invalid);
        assert_eq!(v.reasons[0].kind, ReasonKind::ServerProtocolMismatch);
        assert!(judge("h3", &m, &obs, &LoadEnd::Completed, Some(&[]))
            .reasons
            .iter()
            .any(|r| r.kind == ReasonKind::ServerLogMismatch));
    }

    #[test]
    fn short_missing_and_duplicate_files() {
        let obs = fixture("h2-page10");
        let mut m = manifest_of(&obs, "page10");
        m.files[0].size += 1;
        let v = judge("h2", &m, &obs, &LoadEnd::Completed, None);
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
        let v = judge("h2", &m, &obs, &LoadEnd::Completed, None);
        assert_eq!(v.reasons[0].kind, ReasonKind::MissingResource);
        let mut dup = obs.clone();
        dup.resources.push(dup.resources[0].clone());
        let v = judge(
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
        let v = judge("h2", &m, &obs, &LoadEnd::TimedOut("120 s".into()), None);
        assert_eq!(v.outcome, Outcome::Dnf);
        let v = judge("h2", &m, &obs, &LoadEnd::Crashed("gone".into()), None);
        assert_eq!(v.outcome, Outcome::Invalid);
        assert_eq!(v.reasons[0].kind, ReasonKind::BrowserCrash);
        let v = judge(
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
        let v = judge("h2", &m, &cut_short(&obs, 3), &end, None);
        assert_eq!(v.outcome, Outcome::Dnf, "{}", v.reason_text());
        assert_eq!(v.reasons.len(), 1);
    }

    #[test]
    fn a_timeout_never_hides_what_went_wrong_before_it() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let end = LoadEnd::TimedOut("120 s".into());
        // Wrong protocol, then a timeout: invalid, with both reasons on record.
        let v = judge("h3", &m, &cut_short(&obs, 3), &end, None);
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
        let v = judge("h2", &m, &failed, &end, None);
        assert_eq!(v.outcome, Outcome::Invalid, "{}", v.reason_text());
        assert!(v.reason_text().contains("ERR_QUIC_PROTOCOL_ERROR"));
        // A short body seen before the timeout: invalid.
        let mut short = manifest_of(&obs, "page10");
        short.files[0].size += 7;
        let v = judge("h2", &short, &cut_short(&obs, 3), &end, None);
        assert_eq!(v.outcome, Outcome::Invalid);
        // A link or server failure found afterwards invalidates a DNF too.
        let stopped = [crate::link::LinkFault::EmulatorStopped {
            detail: "the emulator stopped".into(),
        }];
        let v = judge_with(
            "h2",
            &m,
            &cut_short(&obs, 3),
            &end,
            None,
            Around {
                link_faults: &stopped,
                ..Default::default()
            },
        );
        assert_eq!(v.outcome, Outcome::Invalid);
        assert!(is_measurement_failure(&v.reasons));
    }

    #[test]
    fn a_file_the_server_served_twice_is_a_duplicate_request() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let mut log = server_view(&obs, "h2");
        log.push(log[2].clone());
        let v = judge("h2", &m, &obs, &LoadEnd::Completed, Some(&log));
        assert_eq!(v.outcome, Outcome::Invalid);
        assert_eq!(v.reasons[0].kind, ReasonKind::DuplicateRequest);
        assert!(v.reasons[0].detail.contains("×2"), "{}", v.reason_text());
    }

    #[test]
    fn primed_runs_must_not_open_tcp() {
        let obs = fixture("h3-page10");
        let m = manifest_of(&obs, "page10");
        let primed = |tcp| {
            judge_with(
                "h3",
                &m,
                &obs,
                &LoadEnd::Completed,
                None,
                Around {
                    h3_mode: Some(H3Mode::Primed),
                    tcp_opened: tcp,
                    ..Default::default()
                },
            )
        };
        assert_eq!(
            primed(0).outcome,
            Outcome::Valid,
            "{}",
            primed(0).reason_text()
        );
        let v = primed(2);
        assert_eq!(v.reasons.len(), 1);
        assert_eq!(v.reasons[0].kind, ReasonKind::NotPrimed);
        assert!(v.reasons[0].detail.contains("2 TCP"));
        // Forced h3 may open TCP (Chromium races a connection it does not use).
        let forced = judge_with(
            "h3",
            &m,
            &obs,
            &LoadEnd::Completed,
            None,
            Around {
                tcp_opened: 2,
                ..Default::default()
            },
        );
        assert_eq!(forced.outcome, Outcome::Valid);
    }

    #[test]
    fn a_discovered_view_that_fell_back_is_not_discovered() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let v = judge_with(
            "h3",
            &m,
            &obs,
            &LoadEnd::Completed,
            None,
            Around {
                h3_mode: Some(H3Mode::Discovered),
                ..Default::default()
            },
        );
        let kinds: Vec<ReasonKind> = v.reasons.iter().map(|r| r.kind).collect();
        assert_eq!(kinds.last(), Some(&ReasonKind::NotDiscovered), "{kinds:?}");
        assert!(kinds.contains(&ReasonKind::ProtocolMismatch));
        let h3 = fixture("h3-page10");
        let m3 = manifest_of(&h3, "page10");
        let v = judge_with(
            "h3",
            &m3,
            &h3,
            &LoadEnd::Completed,
            None,
            Around {
                h3_mode: Some(H3Mode::Discovered),
                ..Default::default()
            },
        );
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
    }

    #[test]
    fn the_link_and_the_server_are_checked_in_the_table() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let late = [crate::link::LinkFault::EmulatorStopped {
            detail: "the emulator stopped".into(),
        }];
        let v = judge_with(
            "h2",
            &m,
            &obs,
            &LoadEnd::Completed,
            None,
            Around {
                link_faults: &late,
                server_exit: Some("caddy exited with status 1"),
                ..Default::default()
            },
        );
        let kinds: Vec<ReasonKind> = v.reasons.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, [ReasonKind::Link, ReasonKind::Server]);
        assert!(is_measurement_failure(&v.reasons));
        assert!(v.reasons[1].detail.contains("caddy exited"));
    }

    #[test]
    fn a_clean_load_without_its_headline_time_does_not_count() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let (mut metrics, _) = crate::evidence::metrics::derive(&obs, &m.workload.kind, 0.0);
        metrics.completion_ms = None;
        let v = judge_with(
            "h2",
            &m,
            &obs,
            &LoadEnd::Completed,
            None,
            Around {
                metrics: Some(&metrics),
                ..Default::default()
            },
        );
        assert_eq!(v.reasons.len(), 1, "{}", v.reason_text());
        assert_eq!(v.reasons[0].kind, ReasonKind::NavigationError);
        assert_eq!(v.reasons[0].detail, "no completion time");
    }

    #[test]
    fn warnings_say_what_the_capture_and_the_paints_and_the_viewpoints_were() {
        let obs = fixture("h2-page10");
        let m = manifest_of(&obs, "page10");
        let (mut metrics, _) = crate::evidence::metrics::derive(&obs, &m.workload.kind, 0.0);
        metrics.fcp_ms = Some(300.0);
        metrics.lcp_ms = Some(250.0);
        let capture = ["the capture kept no keys".to_string()];
        let v = judge_with(
            "h2",
            &m,
            &obs,
            &LoadEnd::Completed,
            None,
            Around {
                metrics: Some(&metrics),
                capture_warnings: &capture,
                ..Default::default()
            },
        );
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        let w = &v.warnings;
        let at = |s: &str| {
            w.iter()
                .position(|x| x.contains(s))
                .unwrap_or_else(|| panic!("{s}: {w:?}"))
        };
        assert!(at("LCP (250 ms) before FCP") < at("kept no keys"));
        assert!(at("kept no keys") < at("2 viewpoints"));
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
        use crate::config::site_archive::BodyRef;
        use crate::config::workload::from_archive::manifest;
        use crate::config::workload::site_plan::SiteOptions;
        let entry =
            |url: &str, size: u64, proto: &str, ip: &str| crate::config::site_archive::Entry {
                body: Some(BodyRef {
                    sha256: format!("{size:064x}"),
                    size,
                }),
                protocol: Some(proto.into()),
                server_address: Some(ip.into()),
                ..crate::config::site_archive::tests::entry(url, 200)
            };
        let archive = crate::config::site_archive::SiteArchive {
            format: 1,
            source: crate::config::site_archive::Source {
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
            replay: Some(crate::config::site_archive::replay::ReplayMatch::Exact),
            ..ServerView::logged(p, "GET", crate::config::workload::url_path(url), 200, bytes)
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
        judge(
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
        let v = judge("h2", &m, &obs, &LoadEnd::Completed, Some(&views));
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
        miss.replay = Some(crate::config::site_archive::replay::ReplayMatch::Miss);
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
        use crate::config::site_archive::replay::ReplayMatch;
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
            judge("h2", &m, &obs, &LoadEnd::Completed, None).outcome,
            Outcome::Valid
        );
        let mut bad = obs.clone();
        bad.page_result = Some(serde_json::json!({"done": true, "ok": false, "bytes": 12}));
        let v = judge("h2", &m, &bad, &LoadEnd::Completed, None);
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
        let v = judge("h2", &m, &obs, &LoadEnd::Completed, Some(&twice));
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
        let v = judge("h2", &m, &retried, &LoadEnd::Completed, Some(&twice));
        assert_eq!(v.outcome, Outcome::Valid, "{}", v.reason_text());
        assert!(
            v.warnings.iter().any(|w| w.contains("fetched 2 times")),
            "{:?}",
            v.warnings
        );
        // Three servings for two attempts are still too many.
        let mut thrice = twice.clone();
        thrice.push(twice.last().unwrap().clone());
        let v = judge("h2", &m, &retried, &LoadEnd::Completed, Some(&thrice));
        assert_eq!(v.reasons[0].kind, ReasonKind::DuplicateRequest);
        assert_eq!(file.path, "/download/download.bin");
    }
}
