//! What the checks judge: a run's evidence ([`RunEvidence`]: the load from every viewpoint,
//! and the run around it — its metrics, variant, link, server and capture) and what every
//! check derives from it, once ([`Evidence`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::reasons::LoadEnd;
use crate::config::protocol::H3Mode;
use crate::config::workload::{Manifest, WorkloadKind};
use crate::evidence::metrics::{EntryTiming, NetworkRequest, Observation, RunMetrics};
use crate::link::LinkFault;
use crate::servers::ServerView;

/// Everything a run's checks judge.
pub struct RunEvidence<'a> {
    /// The protocol every response must have come over.
    pub expected: Expected<'a>,
    pub manifest: &'a Manifest,
    /// What the browser observed.
    pub observation: &'a Observation,
    pub end: &'a LoadEnd,
    /// The server's log of the run, when the server keeps one pagebench can read.
    pub server_log: Option<&'a [ServerView]>,
    /// The run's id (warnings name it).
    pub run_id: &'a str,
    /// The metrics derived from the observation (the headline, the paints).
    pub metrics: &'a RunMetrics,
    /// `h3-primed` or `h3-discovered`: the variant has a check of its own.
    pub h3_mode: Option<H3Mode>,
    /// TCP connections the load opened: the client namespace's active opens or the
    /// connections the server accepted, whichever is more.
    pub tcp_opened: u64,
    /// Why the link did not deliver the profile (its self-check's faults).
    pub link_faults: &'a [LinkFault],
    /// Why the server under test stopped during the run, if it did.
    pub server_exit: Option<&'a str>,
    /// What the capture could not do.
    pub capture_warnings: &'a [String],
    /// Whose CPU set the run's pace, when one thread's did (`evidence::cpu_pace`).
    pub pace: Option<&'a crate::evidence::cpu_pace::Pace>,
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
    pub(super) fn for_url<'m>(&'m self, manifest: &'m Manifest, url: &str) -> &'m str {
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

/// A run's evidence, and what every check derives from it, derived once.
pub struct Evidence<'a> {
    /// The run as given.
    pub(super) run: &'a RunEvidence<'a>,
    pub(super) expected: Expected<'a>,
    pub(super) manifest: &'a Manifest,
    pub(super) obs: &'a Observation,
    pub(super) end: &'a LoadEnd,
    /// The server's log, without what the browser asked for on its own.
    pub(super) server: Option<Vec<ServerView>>,
    /// What the browser asked for on its own (see [`browser_initiated`]), by manifest name;
    /// left out of every view the checks read.
    pub browser_initiated: BTreeSet<String>,
    /// The load timed out.
    pub(super) dnf: bool,
    /// A replayed site (many origins, recorded files).
    pub(super) site: bool,
    pub(super) nav: Option<EntryTiming>,
    pub(super) entries: Vec<EntryTiming>,
    pub(super) requests: Vec<&'a NetworkRequest>,
    /// Files whose request the DevTools view saw fail, with why.
    pub(super) failed_paths: BTreeMap<String, String>,
    /// Resource Timing entries (indices into `entries`) by manifest file.
    pub(super) seen: BTreeMap<String, Vec<usize>>,
    /// How often the download page fetched its file (≥ 1).
    pub(super) attempts: usize,
}

/// Why a manifest file has no Resource Timing entry, and what that means.
pub(super) enum Unseen {
    /// Still loading when the load timed out: expected.
    StillLoading,
    /// Left out of Resource Timing but finished in the DevTools view (a site's cross-origin
    /// font, say): the server log checks it.
    DevtoolsOnly,
    /// A replayed page did not ask for it this time.
    NotRequested,
    Missing,
}

impl<'a> Evidence<'a> {
    pub fn new(run: &'a RunEvidence<'a>) -> Self {
        let (expected, manifest, obs, end) = (run.expected, run.manifest, run.observation, run.end);
        let server = run.server_log;
        let site = manifest.site.is_some();
        let nav = obs.navigation.as_ref().map(EntryTiming::parse);
        let mut entries: Vec<EntryTiming> = obs.resources.iter().map(EntryTiming::parse).collect();
        let mut requests: Vec<&NetworkRequest> = obs.network.requests.iter().collect();
        let mut server: Option<Vec<ServerView>> = server.map(<[ServerView]>::to_vec);
        let own = browser_initiated(&Views {
            manifest,
            nav: nav.as_ref(),
            entries: &entries,
            requests: &requests,
            server: server.as_deref(),
            site,
        });
        entries.retain(|e| !own.contains(&manifest.key(&e.name)));
        requests.retain(|c| !own.contains(&manifest.key(&c.url)));
        if let Some(log) = server.as_mut() {
            log.retain(|v| !own.contains(&logged_key(manifest, site, v)));
        }
        let failed_paths = requests
            .iter()
            .filter_map(|c| c.failed.as_ref().map(|f| (manifest.key(&c.url), f.clone())))
            .collect();
        let mut seen: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            // A redirected file is named after its first URL: count it under the file's own.
            let k = manifest.key(&e.name);
            let k = manifest.file(&k).map_or(k, |f| f.path.clone());
            seen.entry(k).or_default().push(i);
        }
        // The download page fetches its file again after a network error (a connection broken
        // by an outage or NAT rebinding): each attempt may be loaded and served once.
        let attempts = obs
            .page_result
            .as_ref()
            .and_then(|p| p.get("attempts"))
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .clamp(1, 1 + u64::from(crate::config::workload::DOWNLOAD_RETRIES))
            as usize;
        Evidence {
            run,
            expected,
            manifest,
            obs,
            end,
            server,
            browser_initiated: own,
            dnf: matches!(end, LoadEnd::TimedOut(_)),
            site,
            nav,
            entries,
            requests,
            failed_paths,
            seen,
            attempts,
        }
    }

    /// Whether the load timed out.
    pub fn timed_out(&self) -> bool {
        self.dnf
    }

    /// The manifest's name for `url`.
    pub(super) fn key(&self, url: &str) -> String {
        self.manifest.key(url)
    }

    /// The protocol `url` must have come over. A redirected file is named after its first URL
    /// but came from its target's origin.
    pub(super) fn want(&self, url: &str) -> String {
        let file = self.manifest.file(&self.key(url)).map(|f| f.path.as_str());
        self.expected
            .for_url(self.manifest, file.unwrap_or(url))
            .to_string()
    }

    pub(super) fn described(&self) -> String {
        self.expected.describe()
    }

    pub(super) fn loads_of(&self, path: &str) -> Vec<&EntryTiming> {
        self.seen.get(path).map_or_else(Vec::new, |ix| {
            ix.iter().map(|&i| &self.entries[i]).collect()
        })
    }

    /// Whether `path` is the download the page fetched more than once.
    pub(super) fn retried(&self, path: &str) -> bool {
        self.attempts > 1
            && matches!(self.manifest.workload.kind, WorkloadKind::Download { .. })
            && self.manifest.files.first().is_some_and(|f| f.path == path)
    }

    /// How often `path` may be loaded and served.
    pub(super) fn expected_times(&self, path: &str) -> usize {
        let n = self
            .manifest
            .files
            .iter()
            .filter(|f| f.path == path)
            .count();
        if self.retried(path) {
            n * self.attempts
        } else {
            n
        }
    }

    /// What a file without a Resource Timing entry means. Chromium leaves some cross-origin
    /// loads out of Resource Timing: on a site, the DevTools view's finished response stands
    /// in for it.
    pub(super) fn unseen(&self, path: &str) -> Unseen {
        let failed = self.failed_paths.contains_key(path);
        let finished = || {
            self.requests.iter().any(|c| {
                c.failed.is_none() && c.encoded_data_length.is_some() && self.key(&c.url) == path
            })
        };
        if self.dnf && !failed {
            Unseen::StillLoading
        } else if self.site && finished() {
            Unseen::DevtoolsOnly
        } else if self.site && !failed {
            Unseen::NotRequested
        } else {
            Unseen::Missing
        }
    }

    /// Whether Resource Timing hides the body size and status of `e`, a load of file `url`: a
    /// site's response from another origin (a redirect's target included) fetched without
    /// CORS is opaque, and the Fetch standard gives it no body sizes whatever its
    /// `Timing-Allow-Origin` (Firefox follows it; Chromium still shows them). Its size is then
    /// the server log's to check ([`server_served_files`]).
    pub(super) fn sizes_hidden(&self, e: &EntryTiming, url: &str) -> bool {
        let origin = crate::config::site_archive::har_import::origin;
        self.site
            && e.encoded_body_size == 0.0
            && e.response_status == 0
            && self
                .nav
                .as_ref()
                .is_some_and(|n| origin(&n.name).is_some() && origin(&n.name) != origin(url))
    }

    /// Each manifest file once, in the manifest's order.
    pub(super) fn distinct_files(
        &self,
    ) -> impl Iterator<Item = &'a crate::config::workload::FileEntry> + '_ {
        let mut checked = BTreeSet::new();
        self.manifest
            .files
            .iter()
            .filter(|f| !self.browser_initiated.contains(&f.path))
            .filter(move |f| checked.insert(f.path.as_str()))
    }

    /// The files only the DevTools view saw finish (see [`Evidence::unseen`]).
    pub(super) fn devtools_only(&self) -> Vec<String> {
        self.distinct_files()
            .filter(|f| self.loads_of(&f.path).is_empty())
            .filter(|f| matches!(self.unseen(&f.path), Unseen::DevtoolsOnly))
            .map(|f| f.path.clone())
            .collect()
    }
}

pub(super) fn logged_key(manifest: &Manifest, site: bool, v: &ServerView) -> String {
    match (&v.url, site) {
        (Some(u), true) => manifest.key(u),
        _ => v.path.clone(),
    }
}

/// A load's three views, as [`browser_initiated`] reads them.
struct Views<'v> {
    manifest: &'v Manifest,
    nav: Option<&'v EntryTiming>,
    entries: &'v [EntryTiming],
    requests: &'v [&'v NetworkRequest],
    server: Option<&'v [ServerView]>,
    site: bool,
}

/// The requests the browser made on its own, not the page (icons for its own UI: the
/// `/favicon.ico` browsers ask for when a page names no icon), by manifest name: those the
/// DevTools view says `other` made (CDP does), and every [`FAVICON`], unless a view attributes
/// them to the page. Resource Timing attributes an entry whose initiator is not `other`; the
/// DevTools view a document, or a request whose initiator it names and is not `other`. The
/// navigation is always the page's, and so is any other request (a beacon only the server saw,
/// a font whose initiator the engine does not tell).
fn browser_initiated(v: &Views) -> BTreeSet<String> {
    let key = |url: &str| v.manifest.key(url);
    let web = |url: &str| url.starts_with("https://") || url.starts_with("http://");
    let mut page: BTreeSet<String> = BTreeSet::from([v.manifest.entry.clone()]);
    page.extend(v.nav.map(|n| key(&n.name)));
    let mut candidates: BTreeSet<String> = BTreeSet::new();
    // Resource Timing's `other` says nothing: Firefox gives it to a stylesheet's fonts too.
    for e in v.entries.iter().filter(|e| web(&e.name)) {
        if e.initiator_type != "other" {
            page.insert(key(&e.name));
        }
    }
    // An initiator the engine does not tell (Firefox's for a font) attributes nothing.
    for c in v.requests.iter().filter(|c| web(&c.url)) {
        match c.initiator.as_deref() {
            _ if c.document => page.insert(key(&c.url)),
            Some("other") => candidates.insert(key(&c.url)),
            Some(_) => page.insert(key(&c.url)),
            None => false,
        };
    }
    // A favicon is the browser's in any engine, whatever its views tell or leave out.
    let icons = v.server.unwrap_or_default().iter();
    for s in icons.filter(|s| s.method == "GET" && s.path == FAVICON) {
        candidates.insert(logged_key(v.manifest, v.site, s));
    }
    let named: Vec<&str> = v.entries.iter().map(|e| e.name.as_str()).collect();
    for url in named
        .into_iter()
        .chain(v.requests.iter().map(|c| c.url.as_str()))
    {
        if web(url) && crate::config::workload::url_path(url) == FAVICON {
            candidates.insert(key(url));
        }
    }
    candidates.retain(|k| !page.contains(k));
    candidates
}

/// What browsers ask every origin for when its page names no icon.
const FAVICON: &str = "/favicon.ico";
