//! The report's tables of what the link and its packets show, each a section with its own
//! paragraph: the capacity a trace profile offered, head-of-line blocking, the servers'
//! response order, the headline in round trips, and a returning visitor against a first visit
//! (resumed connections, 0-RTT). Pure, like the other tables, whose cells they share.

use super::doc::{Cell, Table};
use super::report_data::{comparison_text, headline_label, ReportData};
use super::tables::{
    metric_cell, series_cell, series_header, series_rows, table_id, title_suffix,
    verdict_cell_class, workload_phrase,
};
use crate::config::identity::Setup;
use crate::config::protocol::Variant;
use crate::evidence::metric_registry::{self, Metric, Scope};
use crate::results::summary::SeriesStats;

/// What the trace tables' columns mean (the section's paragraph).
pub const TRACE_INTRO: &str = "A trace profile's capacity varies over its trace. Each round of a cell starts the trace at its own seeded point, the same for every protocol, server and browser of the round, so comparisons stay paired and the rounds together sample the whole trace. Offered: the trace's mean capacity over each load (mark to end of load), median over the series' valid runs [min–max]; the profile column gives the trace's own mean.";

/// The median [min–max] of one trace metric over a series' valid runs.
fn spread_cell(s: &SeriesStats, metric: &Metric) -> Cell {
    let Some(b) = s.breakdown.get(metric.name) else {
        return Cell::missing();
    };
    let ms = |c: Option<crate::support::stats::Censored>| c.and_then(|c| c.ms());
    match (ms(b.median), ms(b.min), ms(b.max)) {
        (Some(m), Some(lo), Some(hi)) => Cell::text(format!("{m:.2} [{lo:.2}–{hi:.2}]")),
        _ => Cell::missing(),
    }
}

/// The mean capacity of a profile's traces, "down / up" Mbit/s (None: no trace or unreadable).
fn trace_means(data: &ReportData, profile: &str) -> Option<String> {
    let p = data.meta.profiles.iter().find(|q| q.name == profile)?;
    let mean = |t: &Option<crate::config::profile::TraceFile>| {
        let mut t = t.clone()?;
        t.resolve(crate::config::profile::TraceBase::BuiltIn).ok()?;
        t.trace().map(|t| format!("{:.2}", t.mean_rate_bps() / 1e6))
    };
    let (down, up) = (mean(&p.down_trace), mean(&p.up_trace));
    (down.is_some() || up.is_some()).then(|| {
        format!(
            "{} / {}",
            down.unwrap_or_else(|| "—".into()),
            up.unwrap_or_else(|| "—".into())
        )
    })
}

/// One workload on the trace profiles: per series the capacity its loads were offered, beside
/// the headline (and a transfer's goodput).
pub fn trace_capacity(data: &ReportData, workload: &str, setup: &Setup) -> Option<Table> {
    let metrics: Vec<&Metric> = metric_registry::breakdown_for(Scope::Trace).collect();
    let mut rows = Vec::new();
    for p in data.profiles_in(workload, setup) {
        let profile_cell = match trace_means(data, &p) {
            Some(m) => format!("{p} (trace mean {m} Mbit/s)"),
            None => p.clone(),
        };
        for v in data.variants_in(workload, setup) {
            let Some(s) = data.series(&p, workload, setup, v) else {
                continue;
            };
            if !metrics.iter().any(|m| s.breakdown.contains_key(m.name)) {
                continue;
            }
            let mut r = vec![
                Cell::label(profile_cell.clone()),
                Cell::label(v.name()),
                series_cell(data, &p, workload, setup, v),
            ];
            r.extend(metrics.iter().map(|m| spread_cell(s, m)));
            r.push(spread_cell(s, &metric_registry::GOODPUT_MBIT));
            rows.push(r);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut header = series_header(data, workload, &metrics);
    header.push(metric_registry::GOODPUT_MBIT.label.into());
    Some(Table {
        id: table_id(data, &format!("trace-{workload}"), setup),
        title: format!(
            "Trace capacity offered: {}{}",
            workload_phrase(workload),
            title_suffix(data, setup)
        ),
        intro: vec![],
        header,
        rows,
        notes: vec![],
    })
}

/// What the head-of-line tables' columns mean (the section's paragraph).
pub const HEAD_OF_LINE_INTRO: &str = "Medians over the valid runs [95 % CI] of what the link's packets show (every run is analysed; `--capture pcap,keys` keeps the files). HOL-blocked bytes: bytes that reached the receiver beyond a hole left by a dropped packet and waited for it — over TCP every later byte of the connection, whichever HTTP/2 stream it belonged to; over QUIC (packets decrypted with the run's TLS keys) only the later bytes of the stream whose data was lost. HOL stall: the sum of those waits (first byte behind the hole → hole filled), over every connection or stream; HOL wall time: the time during which any byte waited (parallel waits counted once). Bytes past a hole (QUIC): other streams' bytes delivered while a stream waited for a retransmission — bytes TCP would have held. Wall time ÷ headline: the median wall time against the median headline time.";

/// Head-of-line blocking on one workload, for the profiles that drop packets (random loss, or
/// a queue that overflowed): per protocol the bytes that waited behind a hole, the stall, and
/// for QUIC the bytes of other streams that went past it.
pub fn head_of_line(data: &ReportData, workload: &str, setup: &Setup) -> Option<Table> {
    let vs = data.variants_in(workload, setup);
    let metrics: Vec<&Metric> = metric_registry::breakdown_for(Scope::HeadOfLine).collect();
    let measured = |p: &str, v: Variant, m: &Metric| {
        data.series(p, workload, setup, v)
            .and_then(|s| s.breakdown.get(m.name))
            .and_then(|b| b.median)
            .and_then(|c| c.ms())
    };
    let mut rows = Vec::new();
    for p in data.profiles_in(workload, setup) {
        let loss = data
            .meta
            .profiles
            .iter()
            .find(|q| q.name == p)
            .map_or(0.0, |q| q.loss_pct);
        let blocked_somewhere = vs.iter().any(|v| {
            measured(&p, *v, &metric_registry::HOL_BLOCKED_BYTES).is_some_and(|b| b > 0.0)
        });
        if loss <= 0.0 && !blocked_somewhere {
            continue;
        }
        for v in &vs {
            if data.series(&p, workload, setup, *v).is_none() {
                continue;
            }
            let mut r = vec![
                Cell::label(format!("{p} (loss {loss} %)")),
                Cell::label(v.name()),
                series_cell(data, &p, workload, setup, *v),
            ];
            for m in &metrics {
                r.push(metric_cell(data, &p, workload, setup, *v, m));
            }
            let headline = data
                .series(&p, workload, setup, *v)
                .and_then(|s| s.completion.median)
                .and_then(|c| c.ms());
            let share = match (measured(&p, *v, &metric_registry::HOL_WALL_MS), headline) {
                (Some(stall), Some(h)) if h > 0.0 => {
                    Cell::text(format!("{:.0} %", 100.0 * stall / h))
                }
                _ => Cell::missing(),
            };
            r.push(share);
            rows.push(r);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut header = series_header(data, workload, &metrics);
    header.push("wall time ÷ headline".into());
    Some(Table {
        id: table_id(data, &format!("hol-{workload}"), setup),
        title: format!(
            "Head-of-line blocking: {}{}",
            workload_phrase(workload),
            title_suffix(data, setup)
        ),
        // The section's paragraph explains the columns once (`HEAD_OF_LINE_INTRO`).
        intro: vec![],
        header,
        rows,
        notes: vec![],
    })
}

/// What the response-order tables' columns mean (the section's paragraph).
pub const RESPONSE_ORDER_INTRO: &str = "How each server ordered its responses on a connection, read off the wire (every h2 and h3 run: the link's packets decrypted with the run's TLS keys; each request's `priority` header and PRIORITY_UPDATE frames as the browser sent them, each response's DATA bytes when they first left the server). Medians over the valid runs [95 % CI]. Sent against urgency: of the body bytes sent while a response of another urgency waited on the same connection (its request at the server, its last byte not yet sent: contested bytes), the share sent while a more urgent one waited — 0 for a server that always sends the most urgent response it has (RFC 9218), about 1 − 1/n for one that takes turns between n responses; bytes already in the server's buffers when a more urgent request arrived count against it, as on the wire. Most urgent sent by: when the last byte of the most urgent responses (u=0: Chromium's render-blocking stylesheets and fonts) left the server, on the navigation's clock.";

/// The servers' response order on one workload: per profile, every setup (server, arm) and
/// protocol that multiplexes, side by side.
pub fn response_order(data: &ReportData, workload: &str) -> Option<Table> {
    let metrics: Vec<&Metric> = metric_registry::breakdown_for(Scope::ResponseOrder).collect();
    let mut rows = Vec::new();
    for setup in &data.setups {
        for p in data.profiles_in(workload, setup) {
            for v in data.variants_in(workload, setup) {
                let Some(s) = data.series(&p, workload, setup, v) else {
                    continue;
                };
                if !s
                    .breakdown
                    .contains_key(metric_registry::ORDER_CONTESTED_BYTES.name)
                {
                    continue;
                }
                let mut r = vec![
                    Cell::label(&p),
                    Cell::label(
                        data.setup_name(setup)
                            .unwrap_or_else(|| setup.server.to_string()),
                    ),
                    Cell::label(v.name()),
                    series_cell(data, &p, workload, setup, v),
                ];
                for m in &metrics {
                    r.push(metric_cell(data, &p, workload, setup, v, m));
                }
                rows.push(r);
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut header: Vec<String> = vec![
        "profile".into(),
        "setup".into(),
        "protocol".into(),
        headline_label(&data.summary.metric, workload).into(),
    ];
    header.extend(metrics.iter().map(|m| m.label.to_string()));
    Some(Table {
        id: format!("order-{workload}"),
        title: format!("The servers' response order: {}", workload_phrase(workload)),
        intro: vec![],
        header,
        rows,
        notes: vec![],
    })
}

/// What the round-trip tables' columns mean (the section's paragraph).
pub const ROUND_TRIPS_INTRO: &str = "Where each series' headline went, along its critical path: the chain of requests that ended last before the headline (its last step the response that ended last, each step's predecessor the response that ended last before it started, the first the navigation; from Resource Timing, the same for every engine). Medians over the valid runs of each term: k = the round trips on the path (set-up + one per request + one per flight after a response's first; flights counted from the link's packets: the rounds of its connection its bytes came in, a server's packet following a round when the client acknowledged a packet of it before this one left), the RTT the link offered, then what is not round trips: the server's own time to answer (from its log; else TTFB less one RTT), waiting behind other responses (the first byte later than one RTT and the server's time, and of a transfer what its round trips leave, in the share of its connection's bytes then that were other responses'), the time at the link's rate (the path's own bytes, and on a link with a rate the time its packets show it moving other bytes while the path waited, beyond each wait's own round trips and the server's logged time: counted there once, not as server time, waiting or queueing), the link's queueing on each round trip (upstream only where that busy time is read: the downstream queue is that time), waiting in the browser (before each request went out, and from the last response to the headline), and what no term measures. k × RTT + server + behind + at the rate + queueing + in the browser + unexplained = the headline, run by run; unexplained ÷ headline says how much of a series' time the accounting leaves open.";

/// The headline in round trips on one workload, per profile and protocol: the accounting's
/// terms (medians) and what it leaves unexplained.
pub fn round_trips(data: &ReportData, workload: &str, setup: &Setup) -> Option<Table> {
    let vs = data.variants_in(workload, setup);
    // The load's terms (with k and the lookups), or a paint's along its render path when the
    // report decides on FCP or LCP.
    let (metrics, rtt, remainder): (Vec<&Metric>, &Metric, &Metric) =
        match crate::diagnosis::explain::accounting_for(&data.summary.metric) {
            Some(acc) if acc.rtt() != &metric_registry::CRITICAL_RTT_MS => {
                (acc.metrics(), acc.rtt(), acc.remainder())
            }
            _ => (
                metric_registry::breakdown_for(Scope::RoundTrips).collect(),
                &metric_registry::CRITICAL_RTTS,
                &metric_registry::CRITICAL_REMAINDER_MS,
            ),
        };
    let median = |s: &crate::results::summary::SeriesStats, m: &Metric| {
        s.breakdown
            .get(m.name)
            .and_then(|b| b.median)
            .and_then(|c| c.ms())
    };
    let mut rows = series_rows(data, workload, setup, &vs, &metrics);
    let mut shares = Vec::new();
    for p in data.profiles_in(workload, setup) {
        for v in &vs {
            if let Some(s) = data.series(&p, workload, setup, *v) {
                let share = match (
                    median(s, remainder),
                    s.completion.median.and_then(|c| c.ms()),
                ) {
                    (Some(r), Some(h)) if h > 0.0 => Some(100.0 * r / h),
                    _ => None,
                };
                shares.push((median(s, rtt).is_some(), share));
            }
        }
    }
    let mut kept = Vec::new();
    for (mut r, (accounted, share)) in rows.drain(..).zip(shares) {
        if accounted {
            r.push(share.map_or_else(Cell::missing, |s| Cell::text(format!("{s:.0} %"))));
            kept.push(r);
        }
    }
    if kept.is_empty() {
        return None;
    }
    let mut header = series_header(data, workload, &metrics);
    super::tables::drop_unmeasured(&mut header, &mut kept, &metrics);
    header.push("unexplained ÷ headline".into());
    Some(Table {
        id: table_id(data, &format!("round-trips-{workload}"), setup),
        title: format!(
            "Where the time went, in round trips: {}{}",
            workload_phrase(workload),
            title_suffix(data, setup)
        ),
        // The section's paragraph explains the columns once (`ROUND_TRIPS_INTRO`).
        intro: vec![],
        header,
        rows: kept,
        notes: vec![],
    })
}

pub const VIEWS_INTRO: &str = "A returning visitor against a first visit, the same page, link, server \
and browser. A repeat view loads the page once during the browser's launch (not measured), closes \
every connection while the TLS session cache, QUIC's resumption state and the Alt-Svc knowledge \
stay (Chromium: `chrome.benchmarking.closeConnections()`; Firefox: the `net:prune-all-connections` \
notification from privileged script, as its own shift-reload does, then 3 s for closed QUIC \
connections to drain), clears the HTTP cache (unless `--repeat-cache keep`), and measures a \
second navigation. Medians over the valid runs: the headline, \
the navigation's connection set-up and its round trips (connect ÷ the profile's RTT), then from the \
link's packets the connections whose handshake resumed a session, those whose 0-RTT data the server \
accepted, and the requests sent in 0-RTT, before the handshake completed. Saved = first − repeat \
handshake round trips.";

/// First visit against repeat view on one workload, per profile and protocol (one table per
/// server and browser that has both).
pub fn views(data: &ReportData, workload: &str, first: &Setup) -> Option<Table> {
    use crate::config::identity::View;
    if first.view != View::First {
        return None;
    }
    let repeat = first.clone().on(View::Repeat);
    let median = |p: &str, s: &Setup, v: Variant, m: &Metric| {
        data.series(p, workload, s, v)
            .and_then(|x| x.breakdown.get(m.name))
            .and_then(|b| b.median)
            .and_then(|c| c.ms())
    };
    let num = |x: Option<f64>, digits: usize| {
        x.map_or_else(Cell::missing, |x| Cell::text(format!("{x:.digits$}")))
    };
    let mut rows = Vec::new();
    for p in &data.profiles {
        for v in &data.variants {
            let (a, b) = (
                data.series(p, workload, first, *v),
                data.series(p, workload, &repeat, *v),
            );
            if b.is_none() {
                continue;
            }
            let rtts = |s: &Setup| median(p, s, *v, &metric_registry::HANDSHAKE_RTTS);
            // Saved before the first byte, not in the handshake: 0-RTT sends the request
            // before the handshake completes and leaves the connect time as it was.
            let to_first_byte = |s: &Setup| median(p, s, *v, &metric_registry::FIRST_BYTE_RTTS);
            let saved = match (to_first_byte(first), to_first_byte(&repeat)) {
                (Some(x), Some(y)) => Cell::text(format!("{:.2}", x - y)),
                _ => Cell::missing(),
            };
            let ratio = data
                .setup_comparison_either(p, workload, &repeat, *v, first, *v)
                .map_or_else(Cell::missing, |c| {
                    Cell::new(
                        comparison_text(&c),
                        verdict_cell_class(&c.comparison.verdict),
                    )
                });
            rows.push(vec![
                Cell::label(p),
                Cell::label(v.name()),
                a.map_or_else(Cell::missing, |_| series_cell(data, p, workload, first, *v)),
                series_cell(data, p, workload, &repeat, *v),
                ratio,
                num(median(p, first, *v, &metric_registry::CONNECT_MS), 0),
                num(median(p, &repeat, *v, &metric_registry::CONNECT_MS), 0),
                num(rtts(first), 2),
                num(rtts(&repeat), 2),
                num(to_first_byte(first), 2),
                num(to_first_byte(&repeat), 2),
                saved,
                num(
                    median(p, &repeat, *v, &metric_registry::RESUMED_CONNECTIONS),
                    0,
                ),
                num(
                    median(p, &repeat, *v, &metric_registry::ZERO_RTT_CONNECTIONS),
                    0,
                ),
                num(median(p, &repeat, *v, &metric_registry::EARLY_REQUESTS), 0),
            ]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let unit = headline_label(&data.summary.metric, workload);
    Some(Table {
        id: table_id(data, &format!("views-{workload}"), first),
        title: format!(
            "First visit and repeat view: {}{}",
            workload_phrase(workload),
            title_suffix(data, first)
        ),
        intro: vec![],
        header: vec![
            "profile".into(),
            "protocol".into(),
            format!("first: {unit}"),
            format!("repeat: {unit}"),
            "repeat/first".into(),
            "connect first (ms)".into(),
            "connect repeat (ms)".into(),
            "handshake RTTs first".into(),
            "handshake RTTs repeat".into(),
            "first byte RTTs first".into(),
            "first byte RTTs repeat".into(),
            "RTTs saved to the first byte".into(),
            "resumed connections".into(),
            "0-RTT connections".into(),
            "requests in 0-RTT".into(),
        ],
        rows,
        notes: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sharding::tests::{data, row};
    use crate::support::stats::SeriesSummary;

    fn median(ms: f64) -> SeriesSummary {
        SeriesSummary::median_only(3, ms)
    }

    #[test]
    fn a_paint_report_s_round_trip_table_shows_that_paint_s_terms() {
        let rows: Vec<_> = (1..=3)
            .map(|r| row("wired", "page50", "h2", r, 500.0))
            .collect();
        let mut d = data(&rows, &["page50"]);
        let acc = crate::diagnosis::explain::accounting_for(metric_registry::FCP_MS.name).unwrap();
        for m in acc.metrics() {
            d.summary.series[0].breakdown.insert(
                m.name.to_string(),
                median(if m == acc.rtt() { 40.0 } else { 25.0 }),
            );
        }
        let setup = d.setups[0].clone();
        // A load report: no load accounting in these series, no table.
        assert!(round_trips(&d, "page50", &setup).is_none());
        d.summary.metric = metric_registry::FCP_MS.name.into();
        let t = round_trips(&d, "page50", &setup).unwrap();
        assert!(
            t.header.iter().any(|h| h == "FCP: RTT (ms)"),
            "{:?}",
            t.header
        );
        assert!(!t.header.iter().any(|h| h.starts_with("round trips (k)")));
        // 25 ms unexplained of a 500 ms headline.
        assert_eq!(t.rows[0].last().unwrap().text, "5 %");
    }
}
