//! How close one replay of a site came to its recording (pure): the recorded requests it made
//! again, those it did not, the requests the recording lacks, each origin's requests, bytes
//! and connections, and its critical path beside the recorded one — from the server's log
//! (every origin's requests, whichever engine), the browser's view (connections, where the
//! engine tells them) and the run's round-trip accounting (the path).
//!
//! The fidelity figure is the share of the two loads' requests they had in common: requests
//! replayed from the archive ÷ (recorded requests + requests the archive lacked), a Jaccard
//! index of the two request sets — 1 when the replay asked for exactly what was recorded.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::config::site_archive::har_import::origin;
use crate::config::site_archive::replay::ReplayMatch;
use crate::config::workload::site_plan::{request_key, SitePlan};
use crate::config::workload::url_path;
use crate::evidence::metrics::NetworkRequest;
use crate::servers::server_view::ServerView;

/// One replay against its recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayFidelity {
    /// Requests in the recording.
    pub recorded: usize,
    /// Distinct recorded requests the replay made again (same URL, or same path with another
    /// query string).
    pub replayed: usize,
    /// Recorded requests the replay did not make.
    pub missing: usize,
    /// Requests the archive lacked (answered 404), the browser's own left out.
    pub extra: usize,
    /// The recorded URLs (query left out) not made as often as recorded, once each (records
    /// from before them, or plans without the recorded counts: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_urls: Vec<String>,
    /// The URLs the archive lacked, once each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_urls: Vec<String>,
    /// The recording's body bytes, all origins (records from before it: 0).
    #[serde(default)]
    pub recorded_bytes: u64,
    /// Steps of the recorded critical path (0: not recorded).
    #[serde(default)]
    pub recorded_path_steps: usize,
    /// Each recorded origin in the replay (records from before it: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<OriginReplay>,
    /// The replay's critical path (URL paths, the page first; None: not accounted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_path: Option<Vec<String>>,
    /// Steps of the recorded critical path on the replayed one (by URL path; None: either
    /// path unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_shared: Option<usize>,
}

/// One origin of a replay beside its recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OriginReplay {
    /// `https://host[:port]`.
    pub origin: String,
    /// Requests the server answered for it (the browser's own left out).
    pub requests: usize,
    /// Body bytes the server sent for them.
    pub bytes: u64,
    /// Connections the browser used to it (None: its engine does not tell connections).
    pub connections: Option<usize>,
    /// Its host's lookup as the browser timed it, ms (None: no resolver asked, or no request
    /// of it timed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup_ms: Option<f64>,
}

impl ReplayFidelity {
    /// Replayed ÷ (recorded + extra): 1 when the replay asked for exactly what was recorded.
    pub fn score(&self) -> f64 {
        let all = self.recorded + self.extra;
        if all == 0 {
            return 1.0;
        }
        self.replayed as f64 / all as f64
    }

    /// Body bytes the replay's server sent ÷ the recording's (None: nothing recorded or no
    /// origin figures).
    pub fn bytes_ratio(&self) -> Option<f64> {
        let replayed: u64 = self.origins.iter().map(|o| o.bytes).sum();
        (self.recorded_bytes > 0 && !self.origins.is_empty())
            .then(|| replayed as f64 / self.recorded_bytes as f64)
    }

    /// The share of the recorded critical path's steps that were on the replayed one.
    pub fn path_share(&self) -> Option<f64> {
        let steps = self.recorded_path_steps;
        Some(self.path_shared? as f64 / steps as f64).filter(|_| steps > 0)
    }
}

/// What a replay left to judge it by: the server's log, the browser's own requests (a
/// favicon: neither missing nor extra), the engine's requests and the run's critical path.
pub struct ReplayEvidence<'a> {
    pub views: &'a [ServerView],
    pub browser_initiated: &'a [String],
    /// The engine's view of each request (connections; None: its engine does not tell them).
    pub network: Option<&'a [NetworkRequest]>,
    /// The run's critical path, each step's URL or path, the navigation first.
    pub critical_path: Option<Vec<&'a str>>,
    /// Each request that looked its host up, by URL, and the lookup's time (Resource and
    /// Navigation Timing's; empty when no resolver was asked).
    pub lookups: &'a [(String, f64)],
}

/// The fidelity of a replay of `site`.
pub fn of(site: &SitePlan, e: &ReplayEvidence) -> ReplayFidelity {
    let recorded: usize = site.origins.iter().map(|o| o.responses).sum();
    let own = |url: Option<&str>| url.is_some_and(|u| e.browser_initiated.iter().any(|b| b == u));
    let page: Vec<&ServerView> = e.views.iter().filter(|v| !own(v.url.as_deref())).collect();
    let (replayed, missing_urls) = replayed(site, &page);
    let replayed = replayed.min(recorded);
    let misses: Vec<&str> = page
        .iter()
        .filter(|v| v.replay == Some(ReplayMatch::Miss))
        .map(|v| v.url.as_deref().unwrap_or(&v.path))
        .collect();
    let extra_urls: BTreeSet<&str> = misses.iter().copied().collect();
    let critical_path: Option<Vec<String>> = e
        .critical_path
        .as_ref()
        .map(|p| p.iter().map(|s| url_path(s)).collect());
    ReplayFidelity {
        recorded,
        replayed,
        missing: recorded - replayed,
        extra: misses.len(),
        missing_urls,
        extra_urls: extra_urls.into_iter().map(str::to_string).collect(),
        recorded_bytes: site.origins.iter().map(|o| o.bytes).sum(),
        recorded_path_steps: site.recorded_critical_path.len(),
        origins: origins(
            site,
            &page,
            e.network.map(|n| page_requests(n, &own)),
            e.lookups,
        ),
        path_shared: critical_path
            .as_deref()
            .and_then(|p| shared_steps(&site.recorded_critical_path, p)),
        critical_path,
    }
}

/// Recorded requests the replay made again: per URL (query left out) as many times as
/// recorded at most; a recording from before the counts were kept, distinct URLs.
fn replayed(site: &SitePlan, page: &[&ServerView]) -> (usize, Vec<String>) {
    let matched = page
        .iter()
        .filter(|v| matches!(v.replay, Some(ReplayMatch::Exact | ReplayMatch::SamePath)))
        .map(|v| v.url.as_deref().unwrap_or(&v.path));
    if site.recorded_requests.is_empty() {
        return (matched.collect::<BTreeSet<&str>>().len(), Vec::new());
    }
    let mut made: BTreeMap<String, usize> = BTreeMap::new();
    for url in matched {
        *made.entry(request_key(url)).or_insert(0) += 1;
    }
    let count = |k: &String| made.get(k).copied().unwrap_or(0);
    let replayed = site
        .recorded_requests
        .iter()
        .map(|(k, n)| count(k).min(*n))
        .sum();
    let missing = site
        .recorded_requests
        .iter()
        .filter(|(k, n)| count(k) < **n)
        .map(|(k, _)| k.clone())
        .collect();
    (replayed, missing)
}

/// The engine's requests that were the page's (not the browser's own).
fn page_requests<'a>(
    network: &'a [NetworkRequest],
    own: &impl Fn(Option<&str>) -> bool,
) -> Vec<&'a NetworkRequest> {
    network.iter().filter(|r| !own(Some(&r.url))).collect()
}

/// Each recorded origin's requests, bytes, connections and lookup in the replay.
fn origins(
    site: &SitePlan,
    page: &[&ServerView],
    network: Option<Vec<&NetworkRequest>>,
    lookups: &[(String, f64)],
) -> Vec<OriginReplay> {
    let origin_of = |url: Option<&str>| url.and_then(origin);
    site.origins
        .iter()
        .map(|o| {
            let mine = || {
                page.iter()
                    .filter(|v| origin_of(v.url.as_deref()).as_deref() == Some(&o.origin))
            };
            let connections = network.as_ref().map(|n| {
                n.iter()
                    .filter(|r| origin(&r.url).as_deref() == Some(&o.origin))
                    .filter_map(|r| r.connection_id)
                    .collect::<BTreeSet<u64>>()
                    .len()
            });
            OriginReplay {
                origin: o.origin.clone(),
                requests: mine().count(),
                bytes: mine().map(|v| v.bytes_sent).sum(),
                connections,
                lookup_ms: lookups
                    .iter()
                    .filter(|(url, _)| origin(url).as_deref() == Some(&o.origin))
                    .map(|(_, ms)| *ms)
                    .max_by(f64::total_cmp),
            }
        })
        .collect()
}

/// How many of the recorded path's steps (URLs) the replayed path (URL paths) took too.
fn shared_steps(recorded: &[String], replayed: &[String]) -> Option<usize> {
    if recorded.is_empty() || replayed.is_empty() {
        return None;
    }
    let on: BTreeSet<&str> = replayed.iter().map(String::as_str).collect();
    Some(
        recorded
            .iter()
            .filter(|u| on.contains(url_path(u).as_str()))
            .count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::workload::site_plan::{SiteOptions, SiteOrigin};

    fn site(responses: usize) -> SitePlan {
        SitePlan {
            dir: "/a".into(),
            page_url: "https://www.a.test/".into(),
            origins: vec![SiteOrigin::fixture("www.a.test", responses, 0)],
            addresses: 1,
            options: SiteOptions::default(),
            recorded_start_ms: 0.0,
            recorded_load_ms: None,
            recorded_connections: None,
            recorded_critical_path: vec![],
            recorded_requests: BTreeMap::new(),
        }
    }

    fn view(url: &str, m: ReplayMatch) -> ServerView {
        let path = url.rsplit_once(".test").map_or("/", |(_, p)| p);
        let status = if m == ReplayMatch::Miss { 404 } else { 200 };
        ServerView {
            url: Some(url.into()),
            replay: Some(m),
            ..ServerView::logged("h2", "GET", path, status, 0)
        }
    }

    fn evidence<'a>(views: &'a [ServerView], own: &'a [String]) -> ReplayEvidence<'a> {
        ReplayEvidence {
            views,
            browser_initiated: own,
            network: None,
            critical_path: None,
            lookups: &[],
        }
    }

    #[test]
    fn an_exact_replay_scores_one() {
        let views = [
            view("https://www.a.test/", ReplayMatch::Exact),
            view("https://www.a.test/a.css", ReplayMatch::Exact),
            view("https://www.a.test/b.js?v=2", ReplayMatch::SamePath),
        ];
        let f = of(&site(3), &evidence(&views, &[]));
        assert_eq!((f.replayed, f.missing, f.extra), (3, 0, 0));
        assert_eq!(f.score(), 1.0);
    }

    #[test]
    fn missing_and_extra_requests_lower_it_and_the_browser_s_own_do_not() {
        let icon = "https://www.a.test/favicon.ico";
        let views = [
            view("https://www.a.test/", ReplayMatch::Exact),
            view("https://www.a.test/", ReplayMatch::Exact),
            view("https://www.a.test/new.js", ReplayMatch::Miss),
            view(icon, ReplayMatch::Miss),
        ];
        let f = of(&site(4), &evidence(&views, &[icon.to_string()]));
        assert_eq!((f.recorded, f.replayed, f.missing, f.extra), (4, 1, 3, 1));
        assert!((f.score() - 0.2).abs() < 1e-9);
    }

    #[test]
    fn a_url_asked_twice_when_recorded_counts_twice_when_replayed() {
        // An icon and an image of one file: the recording asked for it twice.
        let mut plan = site(3);
        plan.recorded_requests = [
            ("https://www.a.test/".to_string(), 1),
            ("https://www.a.test/py.svg".to_string(), 2),
        ]
        .into();
        let views = [
            view("https://www.a.test/", ReplayMatch::Exact),
            view("https://www.a.test/py.svg", ReplayMatch::Exact),
            view("https://www.a.test/py.svg?v=2", ReplayMatch::SamePath),
        ];
        let f = of(&plan, &evidence(&views, &[]));
        assert_eq!((f.replayed, f.missing, f.extra), (3, 0, 0));
        // Asked for once more than recorded: the third is not a recorded request made again.
        let more = [
            views[0].clone(),
            views[1].clone(),
            views[1].clone(),
            views[1].clone(),
        ];
        let f = of(&plan, &evidence(&more, &[]));
        assert_eq!((f.replayed, f.missing), (3, 0));
        // Asked for once: one of the two recorded requests was not made.
        let f = of(&plan, &evidence(&views[..2], &[]));
        assert_eq!((f.replayed, f.missing), (2, 1));
        assert_eq!(f.missing_urls, ["https://www.a.test/py.svg"]);
        // What the archive lacked, by URL.
        let mut more = views.to_vec();
        more.push(view("https://www.a.test/new.js", ReplayMatch::Miss));
        let f = of(&plan, &evidence(&more, &[]));
        assert_eq!(
            (f.extra, f.extra_urls.as_slice()),
            (1, &["https://www.a.test/new.js".to_string()][..])
        );
        assert!(f.missing_urls.is_empty());
    }

    #[test]
    fn each_origin_has_its_requests_bytes_and_connections() {
        let mut plan = site(2);
        plan.origins[0].bytes = 1000;
        plan.origins
            .push(SiteOrigin::fixture("cdn.a.test", 1, 3000));
        let sized = |url: &str, bytes| ServerView {
            bytes_sent: bytes,
            ..view(url, ReplayMatch::Exact)
        };
        let views = [
            sized("https://www.a.test/", 600),
            sized("https://www.a.test/a.css", 400),
            sized("https://cdn.a.test/big.js", 3300),
        ];
        let request = |url: &str, connection| NetworkRequest {
            url: url.into(),
            connection_id: Some(connection),
            ..NetworkRequest::default()
        };
        let network = [
            request("https://www.a.test/", 7),
            request("https://www.a.test/a.css", 7),
            request("https://cdn.a.test/big.js", 9),
            request("https://cdn.a.test/big.js", 11),
        ];
        let lookups = [
            ("https://www.a.test/".to_string(), 41.5),
            ("https://cdn.a.test/big.js".to_string(), 12.0),
        ];
        let f = of(
            &plan,
            &ReplayEvidence {
                network: Some(&network),
                lookups: &lookups,
                ..evidence(&views, &[])
            },
        );
        let looked_up: Vec<Option<f64>> = f.origins.iter().map(|o| o.lookup_ms).collect();
        assert_eq!(looked_up, [Some(41.5), Some(12.0)]);
        let summary: Vec<(&str, usize, u64, Option<usize>)> = f
            .origins
            .iter()
            .map(|o| (o.origin.as_str(), o.requests, o.bytes, o.connections))
            .collect();
        assert_eq!(
            summary,
            [
                ("https://www.a.test", 2, 1000, Some(1)),
                ("https://cdn.a.test", 1, 3300, Some(2))
            ]
        );
        assert!((f.bytes_ratio().unwrap() - 1.075).abs() < 1e-9);
        // Without the engine's connections, none are claimed.
        let f = of(&plan, &evidence(&views, &[]));
        assert_eq!(f.origins[1].connections, None);
    }

    #[test]
    fn the_critical_path_is_compared_step_by_step() {
        let mut plan = site(3);
        plan.recorded_critical_path = vec![
            "https://www.a.test/".into(),
            "https://www.a.test/a.css?v=1".into(),
            "https://www.a.test/font.woff2".into(),
        ];
        // The replay's path: the page, the stylesheet, then an image instead of the font.
        let f = of(
            &plan,
            &ReplayEvidence {
                critical_path: Some(vec!["https://www.a.test/", "/a.css", "/hero.jpg"]),
                ..evidence(&[], &[])
            },
        );
        assert_eq!(
            f.critical_path.as_deref().unwrap(),
            ["/", "/a.css", "/hero.jpg"]
        );
        assert_eq!(f.path_shared, Some(2));
        assert!((f.path_share().unwrap() - 2.0 / 3.0).abs() < 1e-9);
        // No recorded path (an older recording): nothing to compare.
        plan.recorded_critical_path.clear();
        let f = of(
            &plan,
            &ReplayEvidence {
                critical_path: Some(vec!["/"]),
                ..evidence(&[], &[])
            },
        );
        assert_eq!((f.path_shared, f.path_share()), (None, None));
    }
}
