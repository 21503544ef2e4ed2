//! The checks a run's evidence goes through, as a table (like the metric registry): each check
//! is a named function over one [`Evidence`] that writes [`Findings`], with the reason kinds it
//! may give (their class — measurement or protocol — comes from the kind). `validate` runs them
//! in the table's order, so reasons and warnings come out in that order. Adding a check is one
//! entry in [`CHECKS`] and its function.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Expected, LoadEnd, Reason, ReasonKind};
use crate::config::workload::{Manifest, WorkloadKind};
use crate::origin::servers::ServerView;
use crate::probe::metrics::{EntryTiming, NetworkRequest, Observation};
use crate::support::textfmt::few;

/// One check of the table.
pub struct Check {
    /// Its name, as the documentation and tests call it.
    pub name: &'static str,
    /// The reason kinds it may give; nothing else.
    pub kinds: &'static [ReasonKind],
    /// What it checks, in a sentence.
    pub doc: &'static str,
    pub(super) run: fn(&Evidence, &mut Findings),
}

/// Every check, in the order it runs.
pub const CHECKS: &[Check] = &[
    Check {
        name: "load_end",
        kinds: &[
            ReasonKind::Timeout,
            ReasonKind::BrowserCrash,
            ReasonKind::NavigationError,
        ],
        doc: "the load completed: no timeout, crash or failed navigation",
        run: load_end,
    },
    Check {
        name: "resource_timing_protocol",
        kinds: &[
            ReasonKind::ProtocolMismatch,
            ReasonKind::HttpError,
            ReasonKind::NavigationError,
        ],
        doc: "Resource Timing: the navigation and every resource on the expected protocol",
        run: resource_timing_protocol,
    },
    Check {
        name: "devtools_protocol",
        kinds: &[ReasonKind::CdpProtocolMismatch],
        doc: "the browser's DevTools view (CDP, BiDi) of the same responses, same protocol",
        run: devtools_protocol,
    },
    Check {
        name: "manifest_files",
        kinds: &[
            ReasonKind::MissingResource,
            ReasonKind::DuplicateResource,
            ReasonKind::ShortResource,
            ReasonKind::HttpError,
        ],
        doc: "every manifest file exactly once (a site: as often as recorded), whole",
        run: manifest_files,
    },
    Check {
        name: "transfer_body",
        kinds: &[ReasonKind::CorruptBody],
        doc: "a download's or upload's body whole, as the page checked it",
        run: transfer_body,
    },
    Check {
        name: "server_view",
        kinds: &[
            ReasonKind::ServerLogMismatch,
            ReasonKind::DuplicateRequest,
            ReasonKind::ServerProtocolMismatch,
            ReasonKind::ShortResource,
            ReasonKind::CorruptBody,
        ],
        doc: "the server's log: same protocol, each file served once and whole",
        run: server_view,
    },
    Check {
        name: "replay_misses",
        kinds: &[ReasonKind::ReplayMiss],
        doc: "a replay: no more requests the archive lacks than --max-misses allows",
        run: replay_misses,
    },
];

/// The reason kinds given outside [`CHECKS`], by the run's other checks (the link's and the
/// server's health, the primed and discovered variants' checks).
pub const CHECKED_ELSEWHERE: &[ReasonKind] = &[
    ReasonKind::Link,
    ReasonKind::Server,
    ReasonKind::NotPrimed,
    ReasonKind::NotDiscovered,
];

/// What the checks write.
#[derive(Debug, Default)]
pub struct Findings {
    pub reasons: Vec<Reason>,
    /// Oddities that do not invalidate the run.
    pub warnings: Vec<String>,
}

impl Findings {
    fn add(&mut self, kind: ReasonKind, detail: String) {
        self.reasons.push(Reason { kind, detail });
    }

    fn warn(&mut self, text: String) {
        self.warnings.push(text);
    }
}

/// A run's evidence, and what every check derives from it, derived once.
pub struct Evidence<'a> {
    expected: Expected<'a>,
    manifest: &'a Manifest,
    obs: &'a Observation,
    end: &'a LoadEnd,
    /// The server's log, without what the browser asked for on its own.
    server: Option<Vec<ServerView>>,
    /// What the browser asked for on its own (see [`browser_initiated`]), by manifest name;
    /// left out of every view the checks read.
    pub browser_initiated: BTreeSet<String>,
    /// The load timed out.
    dnf: bool,
    /// A replayed site (many origins, recorded files).
    site: bool,
    nav: Option<EntryTiming>,
    entries: Vec<EntryTiming>,
    requests: Vec<&'a NetworkRequest>,
    /// Files whose request the DevTools view saw fail, with why.
    failed_paths: BTreeMap<String, String>,
    /// Resource Timing entries (indices into `entries`) by manifest file.
    seen: BTreeMap<String, Vec<usize>>,
    /// How often the download page fetched its file (≥ 1).
    attempts: usize,
}

/// Why a manifest file has no Resource Timing entry, and what that means.
enum Unseen {
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
    pub fn new(
        expected: Expected<'a>,
        manifest: &'a Manifest,
        obs: &'a Observation,
        end: &'a LoadEnd,
        server: Option<&'a [ServerView]>,
    ) -> Self {
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
    fn key(&self, url: &str) -> String {
        self.manifest.key(url)
    }

    /// The protocol `url` must have come over. A redirected file is named after its first URL
    /// but came from its target's origin.
    fn want(&self, url: &str) -> String {
        let file = self.manifest.file(&self.key(url)).map(|f| f.path.as_str());
        self.expected
            .for_url(self.manifest, file.unwrap_or(url))
            .to_string()
    }

    fn described(&self) -> String {
        self.expected.describe()
    }

    fn loads_of(&self, path: &str) -> Vec<&EntryTiming> {
        self.seen.get(path).map_or_else(Vec::new, |ix| {
            ix.iter().map(|&i| &self.entries[i]).collect()
        })
    }

    /// Whether `path` is the download the page fetched more than once.
    fn retried(&self, path: &str) -> bool {
        self.attempts > 1
            && matches!(self.manifest.workload.kind, WorkloadKind::Download { .. })
            && self.manifest.files.first().is_some_and(|f| f.path == path)
    }

    /// How often `path` may be loaded and served.
    fn expected_times(&self, path: &str) -> usize {
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
    fn unseen(&self, path: &str) -> Unseen {
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
    fn sizes_hidden(&self, e: &EntryTiming, url: &str) -> bool {
        let origin = crate::config::site::har_import::origin;
        self.site
            && e.encoded_body_size == 0.0
            && e.response_status == 0
            && self
                .nav
                .as_ref()
                .is_some_and(|n| origin(&n.name).is_some() && origin(&n.name) != origin(url))
    }

    /// Each manifest file once, in the manifest's order.
    fn distinct_files(&self) -> impl Iterator<Item = &'a crate::config::workload::FileEntry> + '_ {
        let mut checked = BTreeSet::new();
        self.manifest
            .files
            .iter()
            .filter(|f| !self.browser_initiated.contains(&f.path))
            .filter(move |f| checked.insert(f.path.as_str()))
    }

    /// The files only the DevTools view saw finish (see [`Evidence::unseen`]).
    fn devtools_only(&self) -> Vec<String> {
        self.distinct_files()
            .filter(|f| self.loads_of(&f.path).is_empty())
            .filter(|f| matches!(self.unseen(&f.path), Unseen::DevtoolsOnly))
            .map(|f| f.path.clone())
            .collect()
    }
}

fn load_end(ev: &Evidence, out: &mut Findings) {
    match ev.end {
        LoadEnd::Completed => {}
        LoadEnd::TimedOut(d) => out.add(ReasonKind::Timeout, d.clone()),
        LoadEnd::Crashed(d) => out.add(ReasonKind::BrowserCrash, d.clone()),
        LoadEnd::NavigationFailed(d) => out.add(ReasonKind::NavigationError, d.clone()),
    }
}

fn resource_timing_protocol(ev: &Evidence, out: &mut Findings) {
    match &ev.nav {
        Some(n) if n.next_hop_protocol != ev.want(&n.name) => out.add(
            ReasonKind::ProtocolMismatch,
            format!(
                "the page came over {:?}, not {}",
                n.next_hop_protocol,
                ev.want(&n.name)
            ),
        ),
        Some(n) if n.response_status != 0 && n.response_status != 200 => out.add(
            ReasonKind::HttpError,
            format!("the page answered {}", n.response_status),
        ),
        Some(_) => {}
        None if *ev.end == LoadEnd::Completed => out.add(
            ReasonKind::NavigationError,
            "no navigation timing entry".into(),
        ),
        None => {}
    }
    let wrong: Vec<String> = ev
        .entries
        .iter()
        .filter(|e| e.next_hop_protocol != ev.want(&e.name))
        .map(|e| format!("{} over {:?}", ev.key(&e.name), e.next_hop_protocol))
        .collect();
    if !wrong.is_empty() {
        out.add(
            ReasonKind::ProtocolMismatch,
            format!(
                "{} resource(s) not over {}: {}",
                wrong.len(),
                ev.described(),
                few(&wrong)
            ),
        );
    }
}

fn devtools_protocol(ev: &Evidence, out: &mut Findings) {
    let wrong: Vec<String> = ev
        .requests
        .iter()
        // A response from the browser's cache went over no protocol.
        .filter(|c| !c.url.starts_with("data:") && !c.from_cache)
        .filter_map(|c| match &c.protocol {
            Some(p) if *p != ev.want(&c.url) => Some(format!("{} over {p:?}", ev.key(&c.url))),
            _ => None,
        })
        .collect();
    if !wrong.is_empty() {
        out.add(
            ReasonKind::CdpProtocolMismatch,
            format!(
                "{} saw {} response(s) not over {}: {}",
                ev.obs.network.name(),
                wrong.len(),
                ev.described(),
                few(&wrong)
            ),
        );
    }
}

/// What [`manifest_files`] found, by kind.
#[derive(Default)]
struct FileFindings {
    missing: Vec<String>,
    dup: Vec<String>,
    short: Vec<String>,
    http: Vec<String>,
    not_requested: Vec<String>,
    sizes_hidden: Vec<String>,
}

fn manifest_files(ev: &Evidence, out: &mut Findings) {
    let mut found = FileFindings::default();
    for f in ev.distinct_files() {
        let loads = ev.loads_of(&f.path);
        if loads.is_empty() {
            match ev.unseen(&f.path) {
                Unseen::StillLoading | Unseen::DevtoolsOnly => {}
                Unseen::NotRequested => found.not_requested.push(f.path.clone()),
                Unseen::Missing => found.missing.push(f.path.clone()),
            }
        } else if loads.len() > ev.expected_times(&f.path) {
            found.dup.push(format!("{} ×{}", f.path, loads.len()));
        } else if ev.retried(&f.path) {
            // A retried download: the last attempt is the one that must be whole.
            if !loads.iter().any(|e| e.encoded_body_size as u64 == f.size) {
                found.short.push(format!(
                    "{} never whole in {} attempts",
                    f.path, ev.attempts
                ));
            }
        } else {
            for e in loads {
                if ev.sizes_hidden(e, &f.path) {
                    found.sizes_hidden.push(f.path.clone());
                } else if e.response_status != 0 && e.response_status != f.status {
                    found
                        .http
                        .push(format!("{} answered {}", f.path, e.response_status));
                } else if e.encoded_body_size as u64 != f.size {
                    found.short.push(format!(
                        "{} {} of {} bytes",
                        f.path, e.encoded_body_size, f.size
                    ));
                }
            }
        }
    }
    file_warnings(ev, &found, out);
    file_reasons(ev, found, out);
}

fn file_warnings(ev: &Evidence, found: &FileFindings, out: &mut Findings) {
    let devtools_only = ev.devtools_only();
    if !devtools_only.is_empty() {
        out.warn(format!(
            "{} file(s) not in Resource Timing, checked by {} and the server log: {}",
            devtools_only.len(),
            ev.obs.network.name(),
            few(&devtools_only)
        ));
    }
    if !found.sizes_hidden.is_empty() {
        out.warn(format!(
            "{} cross-origin file(s) whose sizes Resource Timing hides (no CORS), checked by the server log: {}",
            found.sizes_hidden.len(),
            few(&found.sizes_hidden)
        ));
    }
    if !found.not_requested.is_empty() {
        out.warn(format!(
            "{} recorded file(s) not requested on replay: {}",
            found.not_requested.len(),
            few(&found.not_requested)
        ));
    }
}

fn file_reasons(ev: &Evidence, found: FileFindings, out: &mut Findings) {
    if !found.missing.is_empty() {
        let mut detail = format!(
            "{} of {} file(s) never loaded: {}",
            found.missing.len(),
            ev.manifest.files.len(),
            few(&found.missing)
        );
        if ev.dnf {
            detail.push_str(" (their requests failed before the timeout)");
        }
        let failed: Vec<String> = ev
            .failed_paths
            .iter()
            .map(|(p, f)| format!("{p} ({f})"))
            .collect();
        if !failed.is_empty() {
            detail.push_str(&format!("; failed requests: {}", few(&failed)));
        }
        out.add(ReasonKind::MissingResource, detail);
    }
    if !found.dup.is_empty() {
        out.add(
            ReasonKind::DuplicateResource,
            format!("loaded more than once: {}", few(&found.dup)),
        );
    }
    if !found.short.is_empty() {
        out.add(
            ReasonKind::ShortResource,
            format!("wrong body size: {}", few(&found.short)),
        );
    }
    if !found.http.is_empty() {
        out.add(ReasonKind::HttpError, few(&found.http));
    }
    let extra: Vec<String> = ev
        .seen
        .keys()
        .filter(|p| ev.manifest.file(p).is_none() && **p != ev.manifest.entry)
        .cloned()
        .collect();
    if !extra.is_empty() {
        out.warn(format!("requests outside the manifest: {}", few(&extra)));
    }
    if ev.attempts > 1 {
        out.warn(format!(
            "the download was fetched {} times: earlier attempts failed with a network error ({})",
            ev.attempts,
            ev.obs
                .page_result
                .as_ref()
                .and_then(|p| p.get("errors"))
                .map_or(String::new(), |e| e.to_string())
        ));
    }
}

fn transfer_body(ev: &Evidence, out: &mut Findings) {
    let pb = ev.obs.page_result.as_ref();
    let field = |k: &str| pb.and_then(|p| p.get(k)).cloned().unwrap_or(Value::Null);
    if *ev.end != LoadEnd::Completed || field("ok") == Value::Bool(true) {
        return;
    }
    match ev.manifest.workload.kind {
        WorkloadKind::Download { bytes } => out.add(
            ReasonKind::CorruptBody,
            format!(
                "download of {bytes} bytes not whole: page saw {} bytes{}",
                field("bytes"),
                match field("error") {
                    Value::String(e) => format!(" ({e})"),
                    _ => String::new(),
                }
            ),
        ),
        WorkloadKind::Upload { bytes } => out.add(
            ReasonKind::CorruptBody,
            format!(
                "upload of {bytes} bytes: server counted {}",
                field("server_bytes")
            ),
        ),
        WorkloadKind::Page { .. }
        | WorkloadKind::Sharded { .. }
        | WorkloadKind::Site { .. }
        | WorkloadKind::LateStylesheet { .. } => {}
    }
}

/// The manifest's name of the request a server logged: a site's requests are told apart by
/// their whole URL (many origins).
fn served_key(ev: &Evidence, v: &ServerView) -> String {
    logged_key(ev.manifest, ev.site, v)
}

fn logged_key(manifest: &Manifest, site: bool, v: &ServerView) -> String {
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

/// The URL a server view names (its path when the server does not say the authority).
pub(super) fn server_key_of(v: &ServerView) -> String {
    v.url.clone().unwrap_or_else(|| v.path.clone())
}

fn server_view(ev: &Evidence, out: &mut Findings) {
    let Some(log) = ev.server.as_deref() else {
        return;
    };
    if log.is_empty() && ev.nav.is_some() {
        out.add(
            ReasonKind::ServerLogMismatch,
            "the server logged no request for this run".into(),
        );
    }
    server_duplicates(ev, log, out);
    let other: Vec<String> = log
        .iter()
        // The server saw each hop of a redirect itself, on its own origin.
        .filter(|s| s.protocol != ev.expected.for_url(ev.manifest, &server_key_of(s)))
        .map(|s| format!("{} {} over {:?}", s.method, s.path, s.protocol))
        .collect();
    if !other.is_empty() {
        out.add(
            ReasonKind::ServerProtocolMismatch,
            format!(
                "the server saw {} request(s) not over {}: {}",
                other.len(),
                ev.described(),
                few(&other)
            ),
        );
    }
    if *ev.end == LoadEnd::Completed {
        server_served_files(ev, log, out);
        server_upload(ev, log, out);
    }
}

fn server_duplicates(ev: &Evidence, log: &[ServerView], out: &mut Findings) {
    let mut served: BTreeMap<(&str, String), usize> = BTreeMap::new();
    for v in log {
        *served
            .entry((v.method.as_str(), served_key(ev, v)))
            .or_default() += 1;
    }
    let allowed = |p: &str| {
        ev.manifest
            .file(p)
            .map_or(1, |f| ev.expected_times(&f.path))
            .max(1)
    };
    let twice: Vec<String> = served
        .iter()
        .filter(|((_, p), n)| **n > allowed(p))
        .map(|((m, p), n)| format!("{m} {p} ×{n}"))
        .collect();
    if !twice.is_empty() {
        out.add(
            ReasonKind::DuplicateRequest,
            format!("the server served more than once: {}", few(&twice)),
        );
    }
}

/// Every file the browser loaded is in the log, and a file served once was sent whole.
fn server_served_files(ev: &Evidence, log: &[ServerView], out: &mut Findings) {
    let devtools_only = ev.devtools_only();
    let mut unlogged = Vec::new();
    let files = ev.manifest.files.iter();
    for f in files.filter(|f| !ev.browser_initiated.contains(&f.path)) {
        let served: Vec<&ServerView> = log.iter().filter(|s| served_key(ev, s) == f.path).collect();
        if served.is_empty() && (ev.seen.contains_key(&f.path) || devtools_only.contains(&f.path)) {
            unlogged.push(f.path.clone());
        } else if served.len() == 1
            && served[0].status == f.status
            && served[0].bytes_sent != f.size
        {
            out.add(
                ReasonKind::ShortResource,
                format!(
                    "server sent {} of {} bytes for {}",
                    served[0].bytes_sent, f.size, f.path
                ),
            );
        }
    }
    if !unlogged.is_empty() {
        out.add(
            ReasonKind::ServerLogMismatch,
            format!(
                "loaded by the browser but not in the server log: {}",
                few(&unlogged)
            ),
        );
    }
}

fn server_upload(ev: &Evidence, log: &[ServerView], out: &mut Findings) {
    let WorkloadKind::Upload { bytes } = ev.manifest.workload.kind else {
        return;
    };
    let up: Vec<&ServerView> = log.iter().filter(|s| s.method == "POST").collect();
    if up.len() != 1 || up[0].bytes_received != bytes {
        out.add(
            ReasonKind::CorruptBody,
            format!(
                "server log: {} upload(s), bytes received {:?}, expected one of {bytes}",
                up.len(),
                up.iter().map(|u| u.bytes_received).collect::<Vec<_>>()
            ),
        );
    }
}

fn replay_misses(ev: &Evidence, out: &mut Findings) {
    use crate::config::site::replay::ReplayMatch;
    let (Some(plan), Some(log)) = (&ev.manifest.site, ev.server.as_deref()) else {
        return;
    };
    let of = |m: ReplayMatch| -> Vec<String> {
        log.iter()
            .filter(|v| v.replay == Some(m))
            .map(|v| format!("{} {}", v.method, server_key_of(v)))
            .collect()
    };
    let misses = of(ReplayMatch::Miss);
    if misses.len() > plan.options.max_misses as usize {
        out.add(
            ReasonKind::ReplayMiss,
            format!(
                "{} request(s) not in the site archive (--max-misses {}): {}",
                misses.len(),
                plan.options.max_misses,
                few(&misses)
            ),
        );
    } else if !misses.is_empty() {
        out.warn(format!(
            "{} request(s) not in the site archive, answered 404: {}",
            misses.len(),
            few(&misses)
        ));
    }
    let approximate = of(ReplayMatch::SamePath);
    if !approximate.is_empty() {
        out.warn(format!(
            "{} request(s) answered with another query string's recording: {}",
            approximate.len(),
            few(&approximate)
        ));
    }
}
