//! The checks a run's evidence goes through, as a table (like the metric registry): each check
//! is a named function over one [`Evidence`] that writes [`Findings`], with the reason kinds it
//! may give (their class — measurement or protocol — comes from the kind). `validate` runs them
//! in the table's order, so reasons and warnings come out in that order. Adding a check is one
//! entry in [`CHECKS`] and its function.

use std::collections::BTreeMap;

use serde_json::Value;

use super::inputs::{logged_key, Evidence, Unseen};
use super::reasons::{LoadEnd, Reason, ReasonKind};
use crate::config::protocol::H3Mode;
use crate::config::workload::WorkloadKind;
use crate::servers::ServerView;
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
    Check {
        name: "paint_order",
        kinds: &[],
        doc: "FCP before LCP, and on a generated page both before loadEventEnd (a warning)",
        run: paint_order,
    },
    Check {
        name: "capture",
        kinds: &[],
        doc: "what the capture could not do (a warning)",
        run: capture,
    },
    Check {
        name: "viewpoints",
        kinds: &[],
        doc: "a server without a log pagebench can read leaves two viewpoints (a warning)",
        run: viewpoints,
    },
    Check {
        name: "headline",
        kinds: &[ReasonKind::NavigationError, ReasonKind::CorruptBody],
        doc: "a load that passed every check above has its headline time",
        run: headline,
    },
    Check {
        name: "discovered_h3",
        kinds: &[ReasonKind::NotDiscovered],
        doc: "h3-discovered: every request on the HTTP/3 the first view learnt (any viewpoint)",
        run: discovered_h3,
    },
    Check {
        name: "dns_h3",
        kinds: &[ReasonKind::NotAnnounced],
        doc: "h3-dns: every request on the HTTP/3 the HTTPS record announced (any viewpoint)",
        run: dns_h3,
    },
    Check {
        name: "primed_h3",
        kinds: &[ReasonKind::NotPrimed],
        doc: "h3-primed: the load opened no TCP connection (it went straight to QUIC)",
        run: primed_h3,
    },
    Check {
        name: "link_gate",
        kinds: &[ReasonKind::Link],
        doc: "the link delivered the profile: its self-check found no fault",
        run: link_gate,
    },
    Check {
        name: "server_alive",
        kinds: &[ReasonKind::Server],
        doc: "the server under test did not stop during the run",
        run: server_alive,
    },
    Check {
        name: "harness_pace",
        kinds: &[ReasonKind::HarnessLimited],
        doc: "no part of pagebench (the link emulator, the embedded server) set the run's pace: \
              one of its threads on a core for the whole load measures pagebench, not the protocol",
        run: harness_pace,
    },
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
    use crate::config::site_archive::replay::ReplayMatch;
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

fn paint_order(ev: &Evidence, out: &mut Findings) {
    if *ev.end != LoadEnd::Completed {
        return;
    }
    let generated = matches!(
        ev.manifest.workload.kind,
        WorkloadKind::Page { .. } | WorkloadKind::Sharded { .. }
    );
    for p in crate::evidence::metrics::paint_order_problems(ev.run.metrics, generated) {
        out.warn(format!("run {}: {p}", ev.run.run_id));
    }
}

fn capture(ev: &Evidence, out: &mut Findings) {
    for w in ev.run.capture_warnings {
        out.warn(w.clone());
    }
}

fn viewpoints(ev: &Evidence, out: &mut Findings) {
    if ev.run.server_log.is_none() {
        out.warn("2 viewpoints: the server keeps no log pagebench can read, so the protocol and the files were cross-checked by Resource Timing and CDP only (give --server-log-format for a third)".into());
    }
}

/// A load that passed every check so far but has no headline time cannot be counted.
fn headline(ev: &Evidence, out: &mut Findings) {
    if !out.reasons.is_empty() || ev.timed_out() || ev.run.metrics.completion_ms.is_some() {
        return;
    }
    let kind = if ev.manifest.workload.kind.is_page() {
        ReasonKind::NavigationError
    } else {
        ReasonKind::CorruptBody
    };
    out.add(kind, "no completion time".into());
}

/// An `h3-discovered` repeat view counts only when the browser used HTTP/3 for everything:
/// any protocol mismatch found above, from any viewpoint, says it did not.
fn discovered_h3(ev: &Evidence, out: &mut Findings) {
    if ev.run.h3_mode == Some(H3Mode::Discovered) {
        h3_on_every_request(out, ReasonKind::NotDiscovered, "its first view learnt");
    }
}

/// An `h3-dns` first view counts only when the browser used HTTP/3 for everything, with
/// nothing but the HTTPS record to tell it: any protocol mismatch says it did not.
fn dns_h3(ev: &Evidence, out: &mut Findings) {
    if ev.run.h3_mode == Some(H3Mode::Dns) {
        h3_on_every_request(out, ReasonKind::NotAnnounced, "its HTTPS record announced");
    }
}

/// A variant that only hints at HTTP/3 (`how` the browser knew) fails as `kind` on any
/// protocol mismatch found above.
fn h3_on_every_request(out: &mut Findings, kind: ReasonKind, how: &str) {
    let mismatches = protocol_mismatches(out);
    if !mismatches.is_empty() {
        out.add(
            kind,
            format!(
                "the browser did not use the HTTP/3 {how} on every request ({})",
                mismatches.join(", ")
            ),
        );
    }
}

/// The protocol mismatches found so far, by kind name.
fn protocol_mismatches(out: &Findings) -> Vec<&'static str> {
    out.reasons
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                ReasonKind::ProtocolMismatch
                    | ReasonKind::CdpProtocolMismatch
                    | ReasonKind::ServerProtocolMismatch
            )
        })
        .map(|r| r.kind.name())
        .collect()
}

/// An `h3-primed` run must reach the server over QUIC only.
fn primed_h3(ev: &Evidence, out: &mut Findings) {
    let opened = ev.run.tcp_opened;
    if ev.run.h3_mode == Some(H3Mode::Primed) && opened > 0 {
        out.add(
            ReasonKind::NotPrimed,
            format!(
                "the primed browser opened {opened} TCP connection(s): it did not go straight to HTTP/3"
            ),
        );
    }
}

/// A run on a link that did not deliver the profile never counts.
fn link_gate(ev: &Evidence, out: &mut Findings) {
    for f in ev.run.link_faults {
        out.add(ReasonKind::Link, f.to_string());
    }
}

fn harness_pace(ev: &Evidence, out: &mut Findings) {
    if let Some(pace) = ev.run.pace.filter(|p| p.by_harness()) {
        out.add(
            ReasonKind::HarnessLimited,
            format!("{} for the whole load", pace.describe()),
        );
    }
}

fn server_alive(ev: &Evidence, out: &mut Findings) {
    if let Some(why) = ev.run.server_exit {
        out.add(ReasonKind::Server, why.to_string());
    }
}
