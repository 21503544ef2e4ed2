//! The replayed sites (pure): per site workload its page, and each origin with the server
//! address it was given, its recorded responses and bytes, the protocol it used when recorded,
//! and how many runs of each protocol counted on replay (every resource of each verified).

use super::doc::{Cell, Table};
use super::report_data::ReportData;
use crate::config::site_archive::distances::Distances;
use crate::config::site_archive::origins::AddressMode;
use crate::config::site_archive::replay::ThinkTime;
use crate::config::workload::site_plan::SitePlan;
use crate::config::workload::url_path;
use crate::evidence::fidelity::ReplayFidelity;
use crate::evidence::metric_registry::{
    self, REPLAY_BYTES, REPLAY_CONNECTIONS, REPLAY_EXTRA, REPLAY_FIDELITY, REPLAY_MISSING,
    REPLAY_PATH, REPLAY_REPLAYED,
};
use crate::results::summary::SeriesStats;

fn fmt_kb(b: u64) -> String {
    format!("{:.1} KB", b as f64 / 1000.0)
}

/// The replayed recorded (or imported) sites the results hold, in the plan's order (sharded
/// pages are replayed too, but belong to the sharding section).
pub fn recorded_sites(data: &ReportData) -> Vec<String> {
    data.workloads
        .iter()
        .filter(|w| {
            data.meta.sites.contains_key(*w)
                && !matches!(
                    super::report_data::workload_kind(w),
                    Some(crate::config::workload::WorkloadKind::Sharded { .. })
                )
        })
        .cloned()
        .collect()
}

/// One table per replayed site the results hold, in the plan's order.
pub fn tables(data: &ReportData) -> Vec<Table> {
    let mut out = Vec::new();
    for w in &data.workloads {
        let Some(plan) = data.meta.sites.get(w) else {
            continue;
        };
        let mode = match plan.options.addresses {
            AddressMode::Recorded => "as recorded",
            AddressMode::PerOrigin => "one per origin",
            AddressMode::Single => "all on one",
        };
        let think = match plan.options.think {
            ThinkTime::None => "none",
            ThinkTime::Recorded => "recorded",
        };
        let distances = match plan.options.distances {
            Distances::Profile => "every origin at the profile's round trip",
            Distances::Recorded => {
                "each origin at its recorded round trip instead of the profile's (never nearer)"
            }
        };
        // Valid runs per variant over every profile and server: each checked resource by
        // resource on every origin.
        let counted: Vec<String> = data
            .variants
            .iter()
            .map(|v| {
                let (valid, all) = data
                    .summary
                    .series
                    .iter()
                    .filter(|s| s.key.workload == *w && s.key.variant == *v)
                    .fold((0, 0), |(a, b), s| {
                        (a + s.valid_runs(), b + s.counted_runs())
                    });
                format!("{v} {valid}/{all}")
            })
            .collect();
        let mut t = Table {
            id: format!("site-{w}"),
            title: format!("{w}: {}", plan.page_url),
            intro: vec![format!(
                "From `{}`: {} origin(s) on {} server address(es) ({mode}), {distances}, think \
                 time {think}{}; runs that counted: {}.",
                plan.dir.display(),
                plan.origins.len(),
                plan.addresses,
                if plan.options.deterministic {
                    ", deterministic clock and random"
                } else {
                    ""
                },
                counted.join(", ")
            )],
            header: [
                "origin",
                "address",
                "responses",
                "bytes",
                "recorded over",
                "recorded round trip",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
            notes: vec![
                "A counted run had every resource of every origin on its protocol by Resource \
                 Timing, CDP and the server log, and every response the page asked for whole."
                    .into(),
            ],
        };
        for o in &plan.origins {
            t.rows.push(vec![
                Cell::label(o.origin.clone()),
                Cell::text(format!("#{}", o.address + 1)),
                Cell::text(o.responses.to_string()),
                Cell::text(fmt_kb(o.bytes)),
                Cell::text(o.recorded_protocol.clone().unwrap_or_else(|| "-".into())),
                Cell::text(o.recorded_rtt.map_or("-".into(), |r| {
                    format!("{:.0} ms ({})", r.rtt_ms, r.basis.describe())
                })),
            ]);
        }
        out.push(t);
    }
    out
}

/// How faithful each replay of a recorded site was, one table per site: per series the median
/// recorded requests replayed, not made and the requests the archive lacked, connections and
/// load time beside the recording's, and the fidelity figure (`evidence::fidelity`).
pub fn fidelity_tables(data: &ReportData) -> Vec<Table> {
    let mut out = Vec::new();
    for w in recorded_sites(data) {
        let Some(plan) = data.meta.sites.get(&w) else {
            continue;
        };
        let series: Vec<&SeriesStats> = data
            .summary
            .series
            .iter()
            .filter(|s| s.key.workload == w && s.breakdown.contains_key(REPLAY_FIDELITY.name))
            .collect();
        if series.is_empty() {
            continue;
        }
        let recorded: usize = plan.origins.iter().map(|o| o.responses).sum();
        let at_distance = plan.options.distances == Distances::Recorded;
        let mut t = Table {
            id: format!("fidelity-{w}"),
            title: format!("{w}: how faithful the replay was"),
            intro: vec![format!(
                "Against the recording ({recorded} requests, {} connections, load event {}): \
                 medians over each series' counted runs. Bytes: the body bytes the server sent ÷ \
                 the recording's. Critical path shared: the share of the recorded critical \
                 path's steps (the chain of requests that ended last before the load event) on \
                 the replay's. Fidelity = recorded requests replayed ÷ (recorded requests + \
                 requests the recording lacks): 1 when the replay asked for exactly what was \
                 recorded.{}",
                plan.recorded_connections
                    .map_or("?".into(), |c| c.to_string()),
                plan.recorded_load_ms
                    .map_or("not recorded".into(), |l| format!("{l:.0} ms")),
                if at_distance {
                    " Each origin sat at its recorded round trip, so the load times compare."
                } else {
                    " The origins sat at the profile's round trip, not the recording's: the \
                     load times do not compare (`--distances recorded` puts them back)."
                }
            )],
            header: [
                "series",
                "replayed",
                "not made",
                "not recorded",
                "connections",
                "bytes ÷ recorded",
                "critical path shared",
                "load (ms)",
                "fidelity",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
            notes: recorded_path_note(plan).into_iter().collect(),
        };
        for s in series {
            let m = |metric: &metric_registry::Metric| {
                s.breakdown.get(metric.name).and_then(|b| b.median?.ms())
            };
            let count = |metric| m(metric).map_or("-".into(), |v| format!("{v:.0}"));
            let share = |metric| m(metric).map_or("-".into(), |v| format!("{v:.2}"));
            let load = s.completion.median.and_then(|c| c.ms());
            let load_text = match (load, plan.recorded_load_ms) {
                (Some(l), Some(r)) if at_distance => format!("{l:.0} ({:.2}×)", l / r),
                (Some(l), _) => format!("{l:.0}"),
                _ => "-".into(),
            };
            t.rows.push(vec![
                Cell::label(format!(
                    "{} · {} · {}",
                    s.key.profile, s.key.variant, s.key.browser
                )),
                Cell::text(count(&REPLAY_REPLAYED)),
                Cell::text(count(&REPLAY_MISSING)),
                Cell::text(count(&REPLAY_EXTRA)),
                Cell::text(count(&REPLAY_CONNECTIONS)),
                Cell::text(share(&REPLAY_BYTES)),
                Cell::text(share(&REPLAY_PATH)),
                Cell::text(load_text),
                Cell::text(m(&REPLAY_FIDELITY).map_or("-".into(), |f| format!("{f:.2}"))),
            ]);
        }
        t.notes.extend(url_notes(data, &w));
        out.push(t);
    }
    out
}

/// The URLs the series' median replays of site `w` did not make, or made though the recording
/// had not, as notes (at most ten of each named).
fn url_notes(data: &ReportData, w: &str) -> Vec<String> {
    let mut missing = std::collections::BTreeSet::new();
    let mut extra = std::collections::BTreeSet::new();
    for s in data.summary.series.iter().filter(|s| s.key.workload == w) {
        if let Some(f) = s
            .median_run
            .as_ref()
            .and_then(|id| data.median_replays.get(id))
        {
            missing.extend(f.missing_urls.iter().cloned());
            extra.extend(f.extra_urls.iter().cloned());
        }
    }
    let list = |urls: &std::collections::BTreeSet<String>| {
        let mut names: Vec<&str> = urls.iter().map(String::as_str).take(10).collect();
        let more = urls.len().saturating_sub(10);
        if more > 0 {
            names.push("…");
        }
        format!(
            "{}{}",
            names.join(", "),
            if more > 0 {
                format!(" ({more} more)")
            } else {
                String::new()
            }
        )
    };
    let mut notes = Vec::new();
    if !missing.is_empty() {
        notes.push(format!(
            "Recorded, not made in a median replay: {}.",
            list(&missing)
        ));
    }
    if !extra.is_empty() {
        notes.push(format!(
            "Made in a median replay, not recorded (answered 404): {}.",
            list(&extra)
        ));
    }
    notes
}

/// The recorded critical path, as a note under the fidelity table.
fn recorded_path_note(plan: &SitePlan) -> Option<String> {
    (!plan.recorded_critical_path.is_empty()).then(|| {
        let steps: Vec<String> = plan
            .recorded_critical_path
            .iter()
            .map(|u| url_path(u))
            .collect();
        format!("The recorded critical path: {}.", steps.join(" → "))
    })
}

/// Each origin of each replayed site in its series' median run beside the recording: requests,
/// body bytes and connections, replayed (recorded), and that run's critical path.
pub fn origin_tables(data: &ReportData) -> Vec<Table> {
    let mut out = Vec::new();
    for w in recorded_sites(data) {
        let Some(plan) = data.meta.sites.get(&w) else {
            continue;
        };
        let mut t = Table {
            id: format!("fidelity-origins-{w}"),
            title: format!("{w}: each origin in the median replays"),
            intro: vec![
                "Each series' median run (its load time closest to the series' median), per \
                 origin: replayed (recorded). Bytes are the bodies the server sent; \
                 connections are the browser's own count (not told by every engine: -)."
                    .into(),
            ],
            header: [
                "series",
                "origin",
                "requests",
                "bytes",
                "connections",
                "critical path",
            ]
            .map(String::from)
            .to_vec(),
            rows: Vec::new(),
            notes: vec![],
        };
        let medians: Vec<(&SeriesStats, &ReplayFidelity)> = data
            .summary
            .series
            .iter()
            .filter(|s| s.key.workload == w)
            .filter_map(|s| Some((s, data.median_replays.get(s.median_run.as_ref()?)?)))
            .collect();
        // Lookups only where a replay asked a resolver.
        let lookups = medians
            .iter()
            .any(|(_, f)| f.origins.iter().any(|o| o.lookup_ms.is_some()));
        if lookups {
            t.header.insert(4, "lookup (ms)".into());
            t.intro.push(
                "Lookup: the browser's time to resolve the origin's host through the \
                 resolver (`--dns resolver`), replayed (recorded)."
                    .into(),
            );
        }
        for (s, f) in medians {
            t.rows.extend(origin_rows(s, plan, f, lookups));
        }
        if !t.rows.is_empty() {
            out.push(t);
        }
    }
    out
}

/// One series' rows: each origin's figures, the run's critical path on the first.
fn origin_rows(
    s: &SeriesStats,
    plan: &SitePlan,
    f: &ReplayFidelity,
    lookups: bool,
) -> Vec<Vec<Cell>> {
    let series = format!("{} · {} · {}", s.key.profile, s.key.variant, s.key.browser);
    let path = f
        .critical_path
        .as_ref()
        .map_or("-".into(), |p| p.join(" → "));
    f.origins
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let recorded = plan.origins.iter().find(|r| r.origin == o.origin);
            let rec = |v: Option<String>| v.unwrap_or_else(|| "?".into());
            let ms = |v: Option<f64>| v.map(|v| format!("{v:.0}"));
            let lookup = Cell::text(format!(
                "{} ({})",
                ms(o.lookup_ms).unwrap_or_else(|| "-".into()),
                ms(recorded.and_then(|r| r.recorded_lookup_ms)).unwrap_or_else(|| "-".into())
            ));
            let mut row = vec![
                Cell::label(if i == 0 {
                    series.clone()
                } else {
                    String::new()
                }),
                Cell::text(o.origin.clone()),
                Cell::text(format!(
                    "{} ({})",
                    o.requests,
                    rec(recorded.map(|r| r.responses.to_string()))
                )),
                Cell::text(format!(
                    "{} ({})",
                    fmt_kb(o.bytes),
                    rec(recorded.map(|r| fmt_kb(r.bytes)))
                )),
                Cell::text(format!(
                    "{} ({})",
                    o.connections.map_or("-".into(), |c| c.to_string()),
                    rec(recorded
                        .and_then(|r| r.recorded_connections)
                        .map(|c| c.to_string()))
                )),
                Cell::text(if i == 0 { path.clone() } else { String::new() }),
            ];
            if lookups {
                row.insert(4, lookup);
            }
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::site_archive::distances::{RecordedRtt, RttBasis};
    use crate::config::workload::site_plan::{SiteOptions, SiteOrigin, SitePlan};
    use crate::report::sharding::tests::{data, row};

    #[test]
    fn every_origin_of_a_replayed_site_is_listed_with_the_runs_that_counted() {
        let rows: Vec<_> = (1..=3)
            .flat_map(|r| {
                [
                    row("wired", "site-shop", "h1", r, 900.0),
                    row("wired", "site-shop", "h2", r, 700.0),
                ]
            })
            .collect();
        let mut d = data(&rows, &["site-shop"]);
        let origin = |o: &str, address, responses, bytes, p: &str| SiteOrigin {
            origin: format!("https://{o}"),
            host: o.into(),
            port: 443,
            address,
            recorded_protocol: Some(p.into()),
            responses,
            bytes,
            recorded_rtt: None,
            recorded_lookup_ms: None,
            recorded_connections: Some(1),
        };
        d.meta.sites.insert(
            "site-shop".into(),
            SitePlan {
                dir: "/a/shop".into(),
                page_url: "https://www.shop.test/".into(),
                origins: vec![
                    origin("www.shop.test", 0, 3, 12_000, "h2"),
                    SiteOrigin {
                        recorded_rtt: Some(RecordedRtt {
                            rtt_ms: 81.4,
                            basis: RttBasis::Handshake,
                            samples: 4,
                        }),
                        ..origin("cdn.shop.test", 1, 60, 420_000, "h3")
                    },
                ],
                addresses: 2,
                options: SiteOptions {
                    distances: Distances::Recorded,
                    ..SiteOptions::default()
                },
                recorded_start_ms: 0.0,
                recorded_load_ms: None,
                recorded_connections: None,
                recorded_critical_path: vec![],
                recorded_requests: Default::default(),
            },
        );
        let t = tables(&d);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].title, "site-shop: https://www.shop.test/");
        assert!(t[0].intro[0].contains("2 origin(s) on 2 server address(es) (as recorded)"));
        assert!(t[0].intro[0].contains("each origin at its recorded round trip"));
        assert!(
            t[0].intro[0].contains("h1 3/3, h2 3/3"),
            "{}",
            t[0].intro[0]
        );
        let cdn = &t[0].rows[1];
        let texts: Vec<&str> = cdn.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "https://cdn.shop.test",
                "#2",
                "60",
                "420.0 KB",
                "h3",
                "81 ms (a connection set-up)"
            ]
        );
        assert_eq!(t[0].rows[0].last().unwrap().text, "-");
        // A results directory without sites has no such table.
        d.meta.sites.clear();
        assert!(tables(&d).is_empty());
    }

    #[test]
    fn the_fidelity_tables_give_bytes_the_critical_path_and_each_origin() {
        use crate::evidence::fidelity::{OriginReplay, ReplayFidelity};
        let rows: Vec<_> = (1..=3)
            .map(|r| {
                row("wired", "site-doc", "h2", r, 300.0 + r as f64)
                    .with_value(&REPLAY_FIDELITY, Some(1.0))
                    .with_value(&REPLAY_BYTES, Some(0.98))
                    .with_value(&REPLAY_PATH, Some(2.0 / 3.0))
            })
            .collect();
        let mut d = data(&rows, &["site-doc"]);
        d.meta.sites.insert(
            "site-doc".into(),
            SitePlan {
                dir: "/a/doc".into(),
                page_url: "https://docs.test/".into(),
                origins: vec![
                    SiteOrigin::fixture("docs.test", 2, 10_000),
                    SiteOrigin::fixture("cdn.test", 1, 5_000),
                ],
                addresses: 1,
                options: SiteOptions::default(),
                recorded_start_ms: 0.0,
                recorded_load_ms: Some(250.0),
                recorded_connections: Some(2),
                recorded_critical_path: vec![
                    "https://docs.test/".into(),
                    "https://docs.test/a.css".into(),
                    "https://cdn.test/f.woff2".into(),
                ],
                recorded_requests: Default::default(),
            },
        );
        let all = fidelity_tables(&d);
        let fidelity = tables_with_id(&all, "fidelity-site-doc");
        let texts: Vec<&str> = fidelity.rows[0].iter().map(|c| c.text.as_str()).collect();
        assert_eq!(&texts[5..7], ["0.98", "0.67"]);
        assert_eq!(
            fidelity.notes,
            ["The recorded critical path: / → /a.css → /f.woff2."]
        );
        // Without the median run's record there are no per-origin rows.
        assert!(origin_tables(&d).is_empty());
        let median = d.summary.series[0].median_run.clone().unwrap();
        let replay = |o: &str, requests, bytes, connections| OriginReplay {
            origin: format!("https://{o}"),
            requests,
            bytes,
            connections,
            lookup_ms: None,
        };
        d.median_replays.insert(
            median,
            ReplayFidelity {
                recorded: 3,
                replayed: 3,
                missing: 0,
                extra: 0,
                recorded_bytes: 15_000,
                recorded_path_steps: 3,
                origins: vec![
                    replay("docs.test", 2, 9_800, Some(1)),
                    replay("cdn.test", 1, 5_000, Some(2)),
                ],
                critical_path: Some(vec!["/".into(), "/a.css".into(), "/hero.jpg".into()]),
                path_shared: Some(2),
                missing_urls: vec!["https://cdn.test/f.woff2".into()],
                extra_urls: vec!["https://docs.test/new.js".into()],
            },
        );
        let all = fidelity_tables(&d);
        assert_eq!(
            tables_with_id(&all, "fidelity-site-doc").notes[1..],
            [
                "Recorded, not made in a median replay: https://cdn.test/f.woff2.",
                "Made in a median replay, not recorded (answered 404): https://docs.test/new.js."
            ]
        );
        let origins = origin_tables(&d);
        let text = |r: usize| -> Vec<String> {
            origins[0].rows[r].iter().map(|c| c.text.clone()).collect()
        };
        assert_eq!(
            text(0),
            [
                "wired · h2 · chromium",
                "https://docs.test",
                "2 (2)",
                "9.8 KB (10.0 KB)",
                "1 (1)",
                "/ → /a.css → /hero.jpg"
            ]
        );
        assert_eq!(text(1)[2..5], ["1 (1)", "5.0 KB (5.0 KB)", "2 (1)"]);
        // A replay that asked a resolver: each origin's lookup, replayed (recorded).
        assert!(!origins[0].header.iter().any(|h| h.starts_with("lookup")));
        let median = d.summary.series[0].median_run.clone().unwrap();
        let f = d.median_replays.get_mut(&median).unwrap();
        f.origins[0].lookup_ms = Some(31.6);
        d.meta.sites.get_mut("site-doc").unwrap().origins[0].recorded_lookup_ms = Some(30.2);
        let origins = origin_tables(&d);
        assert_eq!(origins[0].header[4], "lookup (ms)");
        let row: Vec<&str> = origins[0].rows[0].iter().map(|c| c.text.as_str()).collect();
        assert_eq!(row[4], "32 (30)");
        let row: Vec<&str> = origins[0].rows[1].iter().map(|c| c.text.as_str()).collect();
        assert_eq!(row[4], "- (-)");
    }

    fn tables_with_id<'a>(t: &'a [Table], id: &str) -> &'a Table {
        t.iter().find(|t| t.id == id).unwrap()
    }
}
