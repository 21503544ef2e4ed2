//! How close one replay of a site came to its recording (pure): the recorded requests it made
//! again, those it did not, the requests the recording lacks, and the connections it used,
//! from the server's log (every origin's requests, whichever engine) and the browser's view.
//!
//! The fidelity figure is the share of the two loads' requests they had in common: requests
//! replayed from the archive ÷ (recorded requests + requests the archive lacked), a Jaccard
//! index of the two request sets — 1 when the replay asked for exactly what was recorded.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::config::site::replay::ReplayMatch;
use crate::config::workload::site::SitePlan;
use crate::origin::servers::evidence::ServerView;

/// One replay against its recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// The fidelity of a replay of `site` whose server logged `views`; `browser_initiated` are the
/// URLs the browser asked for on its own (a favicon), neither missing nor extra.
pub fn of(site: &SitePlan, views: &[ServerView], browser_initiated: &[String]) -> ReplayFidelity {
    let recorded: usize = site.origins.iter().map(|o| o.responses).sum();
    let own = |v: &ServerView| {
        v.url
            .as_deref()
            .is_some_and(|u| browser_initiated.iter().any(|b| b == u))
    };
    let page: Vec<&ServerView> = views.iter().filter(|v| !own(v)).collect();
    let matched: BTreeSet<&str> = page
        .iter()
        .filter(|v| matches!(v.replay, Some(ReplayMatch::Exact | ReplayMatch::SamePath)))
        .map(|v| v.url.as_deref().unwrap_or(&v.path))
        .collect();
    let replayed = matched.len().min(recorded);
    let extra = page
        .iter()
        .filter(|v| v.replay == Some(ReplayMatch::Miss))
        .count();
    ReplayFidelity {
        recorded,
        replayed,
        missing: recorded - replayed,
        extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::workload::site::{SiteOptions, SiteOrigin};

    fn site(responses: usize) -> SitePlan {
        SitePlan {
            dir: "/a".into(),
            page_url: "https://www.a.test/".into(),
            origins: vec![SiteOrigin {
                origin: "https://www.a.test".into(),
                host: "www.a.test".into(),
                port: 443,
                address: 0,
                recorded_protocol: Some("h2".into()),
                responses,
                bytes: 0,
                recorded_rtt: None,
            }],
            addresses: 1,
            options: SiteOptions::default(),
            recorded_start_ms: 0.0,
            recorded_load_ms: None,
            recorded_connections: None,
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

    #[test]
    fn an_exact_replay_scores_one() {
        let views = [
            view("https://www.a.test/", ReplayMatch::Exact),
            view("https://www.a.test/a.css", ReplayMatch::Exact),
            view("https://www.a.test/b.js?v=2", ReplayMatch::SamePath),
        ];
        let f = of(&site(3), &views, &[]);
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
        let f = of(&site(4), &views, &[icon.to_string()]);
        assert_eq!((f.recorded, f.replayed, f.missing, f.extra), (4, 1, 3, 1));
        assert!((f.score() - 0.2).abs() < 1e-9);
    }
}
