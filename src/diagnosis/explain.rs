//! Where a difference comes from (pure): a comparison's two series set side by side, term by
//! term of their headline's round-trip accounting (`evidence::round_trips`, summarised per
//! series: each term's median over the valid runs), and the few terms that account for most
//! of the difference named in a sentence a user can act on — "h3 is 109 ms faster than h2:
//! 1.0 RTT less in connection set-up (40 ms), 1.6 fewer round trips of flights (64 ms); 5 ms
//! remain".
//!
//! A term is named when it differs by at least a tenth of the difference (and 2 ms): first those
//! that make the difference, then, after "but", those that work against it. Medians of terms
//! need not add up to the median headline; what the named terms leave of the difference
//! between the medians is said as what remains.

use serde::{Deserialize, Serialize};

use crate::config::identity::Setup;
use crate::config::protocol::Variant;
use crate::evidence::metric_registry::{self, Metric};
use crate::results::comparison::CellComparison;
use crate::results::summary::{SeriesStats, Summary};
use crate::support::stats::Verdict;

/// A named term differs by at least this share of the difference, and this many ms.
const NAMED_SHARE: f64 = 0.1;
const NAMED_MIN_MS: f64 = 2.0;

/// One term of the accounting, on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Term {
    /// What it is, for people (`connection set-up`).
    pub name: String,
    pub a_ms: f64,
    pub b_ms: f64,
    /// In round trips, for the terms counted in them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_rtts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_rtts: Option<f64>,
}

impl Term {
    pub fn delta_ms(&self) -> f64 {
        self.a_ms - self.b_ms
    }
}

/// A comparison's difference, term by term.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// `wired/page10`, the setup when not the default one, and the sides (`h3 vs h2`).
    pub label: String,
    pub a: String,
    pub b: String,
    pub headline_a_ms: f64,
    pub headline_b_ms: f64,
    pub terms: Vec<Term>,
    /// The terms the sentence names: those that make the difference, largest first, then those
    /// that work against it.
    pub named: Vec<String>,
    /// The difference less what the named terms account for.
    pub remain_ms: f64,
    pub sentence: String,
    /// Each side's median run (what the report reads its render paths from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_run: Option<String>,
}

/// A headline's accounting: the metric of the round trip it counts in, and its terms — each a
/// name, the metric that measures it, and whether that metric counts round trips (then its
/// milliseconds are round trips × the series' RTT).
pub struct Accounting {
    rtt: &'static Metric,
    terms: [(&'static str, &'static Metric, bool); 9],
}

impl Accounting {
    /// The round trip it counts in, then each term's metric, "time no term measures" last.
    pub fn metrics(&self) -> Vec<&'static Metric> {
        std::iter::once(self.rtt)
            .chain(self.terms.iter().map(|(_, m, _)| *m))
            .collect()
    }

    pub fn rtt(&self) -> &'static Metric {
        self.rtt
    }

    /// What none of its terms measures.
    pub fn remainder(&self) -> &'static Metric {
        self.terms[self.terms.len() - 1].1
    }
}

/// The load's (the study's headline) and each paint's along its render path.
pub const LOAD: Accounting = Accounting {
    rtt: &metric_registry::CRITICAL_RTT_MS,
    terms: [
        (
            "connection set-up",
            &metric_registry::CRITICAL_SETUP_RTTS,
            true,
        ),
        (
            "requests on the critical path",
            &metric_registry::CRITICAL_REQUESTS,
            true,
        ),
        (
            "round trips of flights",
            &metric_registry::CRITICAL_FLIGHT_RTTS,
            true,
        ),
        ("server time", &metric_registry::CRITICAL_SERVER_MS, false),
        (
            "waiting behind other responses",
            &metric_registry::CRITICAL_BEHIND_MS,
            false,
        ),
        (
            "time at the link's rate",
            &metric_registry::CRITICAL_WIRE_MS,
            false,
        ),
        (
            "queueing in the network",
            &metric_registry::CRITICAL_QUEUE_MS,
            false,
        ),
        (
            "waiting in the browser",
            &metric_registry::CRITICAL_BROWSER_MS,
            false,
        ),
        (
            "time no term measures",
            &metric_registry::CRITICAL_REMAINDER_MS,
            false,
        ),
    ],
};
/// A paint's accounting: the load's terms, the path named `$path`, measured by the paint's
/// metrics (`$p`: the registry's prefix of them).
macro_rules! paint_accounting {
    ($name:ident, $path:literal, $rtt:ident, [$setup:ident, $requests:ident, $flights:ident,
     $server:ident, $behind:ident, $wire:ident, $queue:ident, $browser:ident, $rest:ident]) => {
        pub const $name: Accounting = Accounting {
            rtt: &metric_registry::$rtt,
            terms: [
                ("connection set-up", &metric_registry::$setup, true),
                ($path, &metric_registry::$requests, true),
                ("round trips of flights", &metric_registry::$flights, true),
                ("server time", &metric_registry::$server, false),
                (
                    "waiting behind other responses",
                    &metric_registry::$behind,
                    false,
                ),
                ("time at the link's rate", &metric_registry::$wire, false),
                ("queueing in the network", &metric_registry::$queue, false),
                ("waiting in the browser", &metric_registry::$browser, false),
                ("time no term measures", &metric_registry::$rest, false),
            ],
        };
    };
}

paint_accounting!(
    FCP,
    "requests on the render path",
    FCP_RTT_MS,
    [
        FCP_SETUP_RTTS,
        FCP_REQUESTS,
        FCP_FLIGHT_RTTS,
        FCP_SERVER_MS,
        FCP_BEHIND_MS,
        FCP_WIRE_MS,
        FCP_QUEUE_MS,
        FCP_BROWSER_MS,
        FCP_REMAINDER_MS
    ]
);
paint_accounting!(
    LCP,
    "requests on the render path",
    LCP_RTT_MS,
    [
        LCP_SETUP_RTTS,
        LCP_REQUESTS,
        LCP_FLIGHT_RTTS,
        LCP_SERVER_MS,
        LCP_BEHIND_MS,
        LCP_WIRE_MS,
        LCP_QUEUE_MS,
        LCP_BROWSER_MS,
        LCP_REMAINDER_MS
    ]
);
// Speed Index: each visual change's path, weighted by the share of the screen it completed.
paint_accounting!(
    SPEED_INDEX,
    "requests on the visual changes' paths",
    SI_RTT_MS,
    [
        SI_SETUP_RTTS,
        SI_REQUESTS,
        SI_FLIGHT_RTTS,
        SI_SERVER_MS,
        SI_BEHIND_MS,
        SI_WIRE_MS,
        SI_QUEUE_MS,
        SI_BROWSER_MS,
        SI_REMAINDER_MS
    ]
);
paint_accounting!(
    VISUALLY_COMPLETE,
    "requests on the last visual change's path",
    VC_RTT_MS,
    [
        VC_SETUP_RTTS,
        VC_REQUESTS,
        VC_FLIGHT_RTTS,
        VC_SERVER_MS,
        VC_BEHIND_MS,
        VC_WIRE_MS,
        VC_QUEUE_MS,
        VC_BROWSER_MS,
        VC_REMAINDER_MS
    ]
);

/// The accounting of the headline metric named `headline` (a summary's `metric`), if it has
/// one: the load's for the completion and loadEventEnd, each paint's for FCP, LCP, Speed Index
/// and visual completeness.
pub fn accounting_for(headline: &str) -> Option<&'static Accounting> {
    match headline {
        h if h == metric_registry::COMPLETION_MS.name
            || h == metric_registry::LOAD_EVENT_END_MS.name =>
        {
            Some(&LOAD)
        }
        h if h == metric_registry::FCP_MS.name => Some(&FCP),
        h if h == metric_registry::LCP_MS.name => Some(&LCP),
        h if h == metric_registry::SPEED_INDEX_MS.name => Some(&SPEED_INDEX),
        h if h == metric_registry::VISUAL_COMPLETE_MS.name => Some(&VISUALLY_COMPLETE),
        _ => None,
    }
}

fn median(s: &SeriesStats, m: &Metric) -> Option<f64> {
    s.breakdown.get(m.name)?.median?.ms()
}

/// Each term on both sides; None when a side has no accounting.
fn terms(acc: &Accounting, a: &SeriesStats, b: &SeriesStats) -> Option<Vec<Term>> {
    let rtt_a = median(a, acc.rtt)?;
    let rtt_b = median(b, acc.rtt)?;
    acc.terms
        .iter()
        .map(|(name, m, in_rtts)| {
            let (va, vb) = (median(a, m)?, median(b, m)?);
            let (a_ms, b_ms) = if *in_rtts {
                (va * rtt_a, vb * rtt_b)
            } else {
                (va, vb)
            };
            Some(Term {
                name: name.to_string(),
                a_ms,
                b_ms,
                a_rtts: in_rtts.then_some(va),
                b_rtts: in_rtts.then_some(vb),
            })
        })
        .collect()
}

/// The terms to name, largest first: those that differ in the direction of `delta` (`with`
/// true) or against it.
fn named(terms: &[Term], delta: f64, with: bool) -> Vec<&Term> {
    let mut out: Vec<&Term> = terms
        .iter()
        .filter(|t| {
            let d = t.delta_ms();
            d.abs() >= NAMED_MIN_MS
                && d.abs() >= NAMED_SHARE * delta.abs()
                && (d * delta > 0.0) == with
        })
        .collect();
    out.sort_by(|x, y| y.delta_ms().abs().total_cmp(&x.delta_ms().abs()));
    out
}

/// How a term reads in the sentence: "1.0 RTT less in connection set-up (40 ms)".
fn phrase(t: &Term) -> String {
    let less = t.delta_ms() < 0.0;
    let (less, fewer) = if less {
        ("less", "fewer")
    } else {
        ("more", "more")
    };
    let ms = t.delta_ms().abs();
    match (t.a_rtts, t.b_rtts) {
        (Some(a), Some(b)) => {
            let n = (a - b).abs();
            match t.name.as_str() {
                "connection set-up" => {
                    format!("{n:.1} RTT {less} in connection set-up ({ms:.0} ms)")
                }
                _ => format!("{n:.1} {fewer} {} ({ms:.0} ms)", t.name),
            }
        }
        _ => format!("{ms:.0} ms {less} {}", t.name),
    }
}

/// Why side `a` (named `a_name`) took another time than side `b`, by the load's accounting;
/// None when either side has no headline median or no accounting.
pub fn explain(
    label: &str,
    a: &SeriesStats,
    b: &SeriesStats,
    a_name: &str,
    b_name: &str,
) -> Option<Explanation> {
    explain_on(&LOAD, label, (a, a_name), (b, b_name))
}

/// Why side `a` took another time than side `b` by the accounting `acc` (the series' headline
/// is its headline); None when either side has no headline median or no accounting.
pub fn explain_on(
    acc: &Accounting,
    label: &str,
    (a, a_name): (&SeriesStats, &str),
    (b, b_name): (&SeriesStats, &str),
) -> Option<Explanation> {
    let (ha, hb) = (a.completion.median?.ms()?, b.completion.median?.ms()?);
    let terms = terms(acc, a, b)?;
    let delta = ha - hb;
    let (with, against) = (named(&terms, delta, true), named(&terms, delta, false));
    let remain_ms = delta
        - with
            .iter()
            .chain(&against)
            .map(|t| t.delta_ms())
            .sum::<f64>();
    let phrases = |ts: &[&Term]| ts.iter().map(|t| phrase(t)).collect::<Vec<_>>().join(", ");
    let mut why = if with.is_empty() {
        "no single term stands out".to_string()
    } else {
        phrases(&with)
    };
    if !against.is_empty() {
        why.push_str(&format!("; but {}", phrases(&against)));
    }
    let sentence = format!(
        "{a_name} is {:.0} ms {} than {b_name} ({ha:.0} vs {hb:.0} ms): {why}; {:.0} ms remain",
        delta.abs(),
        if delta < 0.0 { "faster" } else { "slower" },
        remain_ms.abs(),
    );
    let named = with
        .iter()
        .chain(&against)
        .map(|t| t.name.clone())
        .collect();
    Some(Explanation {
        label: label.to_string(),
        a: a_name.to_string(),
        b: b_name.to_string(),
        headline_a_ms: ha,
        headline_b_ms: hb,
        named,
        terms,
        remain_ms,
        sentence,
        a_run: a.median_run.clone(),
        b_run: b.median_run.clone(),
    })
}

/// The series of `summary` in `c`'s cell with `setup` and `variant`.
fn side<'s>(
    summary: &'s Summary,
    c: &CellComparison,
    setup: &Setup,
    v: Variant,
) -> Option<&'s SeriesStats> {
    summary.series.iter().find(|s| {
        s.key.profile == c.profile
            && s.key.workload == c.workload
            && s.key.is(setup)
            && s.key.variant == v
    })
}

/// Every significant comparison of `summary` (faster or slower), explained term by term of
/// its headline's accounting; in the summary's order (none for a headline without one).
pub fn differences(summary: &Summary) -> Vec<Explanation> {
    let Some(acc) = accounting_for(&summary.metric) else {
        return Vec::new();
    };
    summary
        .comparisons
        .iter()
        .filter(|c| matches!(c.comparison.verdict, Verdict::Faster | Verdict::Slower))
        .filter_map(|c| {
            let a = side(summary, c, &c.setup_a(), c.a)?;
            let b = side(summary, c, &c.setup_b(), c.b)?;
            let label = c.label();
            let (a_name, b_name) = label.split_once(" vs ")?;
            explain_on(acc, &cell_label(summary, c), (a, a_name), (b, b_name))
        })
        .collect()
}

/// `profile/workload`, and each part of the setup (server arm, browser, view) that the
/// summary's series differ in and both sides share, so two setups of one cell never read
/// alike (`cable/site · embedded:priorities=rfc9218`).
fn cell_label(summary: &Summary, c: &CellComparison) -> String {
    let varies = |part: fn(&SeriesStats) -> String| {
        let mut seen = summary.series.iter().map(part);
        seen.next()
            .is_some_and(|first| seen.any(|other| other != first))
    };
    let mut label = format!("{}/{}", c.profile, c.workload);
    let shared = [
        (
            varies(|s| s.key.server.to_string()),
            (c.server_a == c.server_b).then(|| c.server_a.to_string()),
        ),
        (
            varies(|s| s.key.browser.to_string()),
            (c.browser_a == c.browser_b).then(|| c.browser_a.to_string()),
        ),
        (
            varies(|s| s.key.view.to_string()),
            (c.view_a == c.view_b).then(|| c.view_a.to_string()),
        ),
        (
            varies(|s| s.key.device.to_string()),
            (c.device_a == c.device_b).then(|| c.device_a.to_string()),
        ),
    ];
    for (varies, part) in shared {
        if let (true, Some(part)) = (varies, part) {
            label.push_str(" · ");
            label.push_str(&part);
        }
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::protocol::Variant;
    use crate::results::rows::SeriesKey;
    use crate::support::stats::SeriesSummary;

    fn summary(median: f64) -> SeriesSummary {
        SeriesSummary::median_only(10, median)
    }

    /// A series with its headline and accounting medians: set-up, requests and flights in
    /// round trips of 40 ms, then server, behind, wire, queue, browser and remainder in ms.
    fn series(variant: Variant, headline: f64, terms: [f64; 9]) -> SeriesStats {
        let mut breakdown: std::collections::BTreeMap<String, SeriesSummary> = LOAD
            .terms
            .iter()
            .zip(terms)
            .map(|((_, m, _), v)| (m.name.to_string(), summary(v)))
            .collect();
        breakdown.insert(metric_registry::CRITICAL_RTT_MS.name.into(), summary(40.0));
        SeriesStats {
            key: SeriesKey {
                profile: "wired".into(),
                workload: "page10".into(),
                server: "embedded".into(),
                browser: Default::default(),
                view: Default::default(),
                device: Default::default(),
                variant,
            },
            completion: summary(headline),
            breakdown,
            invalid_reasons: Default::default(),
            retries: 0,
            attempts: Default::default(),
            without_headline: 0,
            values: vec![],
            median_run: None,
        }
    }

    #[test]
    fn the_terms_that_make_most_of_the_difference_are_named_with_what_remains() {
        // h3: 1 RTT of set-up instead of 2, 1.4 fewer flight round trips, the rest alike.
        let h3 = series(
            Variant::H3,
            387.0,
            [1.0, 2.0, 1.0, 3.0, 0.0, 0.0, 0.0, 60.0, 6.0],
        );
        let h2 = series(
            Variant::H2,
            496.0,
            [2.0, 2.0, 2.4, 3.5, 0.0, 0.0, 0.0, 61.0, 8.0],
        );
        let e = explain("wired/page10", &h3, &h2, "h3", "h2").unwrap();
        assert_eq!(e.named, ["round trips of flights", "connection set-up"]);
        assert_eq!(
            e.sentence,
            "h3 is 109 ms faster than h2 (387 vs 496 ms): 1.4 fewer round trips of flights (56 ms), \
1.0 RTT less in connection set-up (40 ms); 13 ms remain"
        );
        assert!((e.remain_ms - (-109.0 + 96.0)).abs() < 1e-9);
        // Seen from the other side, the same terms, the other way.
        let e = explain("wired/page10", &h2, &h3, "h2", "h3").unwrap();
        assert!(e.sentence.starts_with(
            "h2 is 109 ms slower than h3 (496 vs 387 ms): 1.4 more round trips of flights (56 ms), \
1.0 RTT more in connection set-up (40 ms)"
        ));
    }

    #[test]
    fn terms_that_work_against_the_difference_are_named_after_but() {
        // Forced h3 throttles the page's requests in the browser (300 ms more waiting) but saves
        // a round trip of set-up and waits less behind other responses.
        let h3 = series(
            Variant::H3,
            498.0,
            [1.0, 2.0, 0.0, 0.2, 7.0, 0.0, 0.0, 371.0, 1.0],
        );
        let h2 = series(
            Variant::H2,
            411.0,
            [2.0, 3.0, 0.0, 0.5, 133.0, 0.0, 0.0, 71.0, 1.0],
        );
        let e = explain("wired/page50", &h3, &h2, "h3", "h2").unwrap();
        assert_eq!(
            e.sentence,
            "h3 is 87 ms slower than h2 (498 vs 411 ms): 300 ms more waiting in the browser; but \
126 ms less waiting behind other responses, 1.0 RTT less in connection set-up (40 ms), 1.0 fewer \
requests on the critical path (40 ms); 7 ms remain"
        );
    }

    /// `h3 vs h2` on wired/page10 with server `server`, significant.
    fn h3_vs_h2(server: &str) -> CellComparison {
        let mut c = CellComparison::fixture("wired", "page10", 0.8, Verdict::Faster);
        c.server_a = crate::config::identity::ServerId::new(server);
        c.server_b = c.server_a.clone();
        c
    }

    fn summary_of(series: Vec<SeriesStats>, comparisons: Vec<CellComparison>) -> Summary {
        Summary {
            format: crate::results::summary::SUMMARY_FORMAT,
            metric: "load_event_end_ms".into(),
            alpha: 0.05,
            bootstrap_resamples: 100,
            holm_family: comparisons.len(),
            attrition_families: Default::default(),
            series,
            comparisons,
            links: vec![],
            viewpoints: Default::default(),
            invalid_by_reason: Default::default(),
            retries: 0,
            warnings: vec![],
        }
    }

    #[test]
    fn two_server_arms_of_one_cell_are_never_labelled_alike() {
        let arm = |server: &str, v, headline| {
            let mut s = series(v, headline, [1.0; 9]);
            s.key.server = crate::config::identity::ServerId::new(server);
            s
        };
        let (plain, rfc) = ("embedded", "embedded:priorities=rfc9218");
        let two = summary_of(
            vec![
                arm(plain, Variant::H3, 300.0),
                arm(plain, Variant::H2, 400.0),
                arm(rfc, Variant::H3, 350.0),
                arm(rfc, Variant::H2, 500.0),
            ],
            vec![h3_vs_h2(plain), h3_vs_h2(rfc)],
        );
        let labels: Vec<String> = differences(&two).into_iter().map(|e| e.label).collect();
        assert_eq!(
            labels,
            [
                "wired/page10 · embedded",
                "wired/page10 · embedded:priorities=rfc9218"
            ]
        );
        // One setup: the cell alone.
        let one = summary_of(
            vec![
                arm(plain, Variant::H3, 300.0),
                arm(plain, Variant::H2, 400.0),
            ],
            vec![h3_vs_h2(plain)],
        );
        assert_eq!(differences(&one)[0].label, "wired/page10");
    }

    #[test]
    fn a_paint_headline_is_explained_on_its_own_accounting_and_speed_index_on_none() {
        // FCP's terms only: the stylesheet waited 1.6 s behind other responses over h3.
        let paint = |v, headline, behind| {
            let mut s = series(v, headline, [0.0; 9]);
            s.breakdown.clear();
            for ((_, m, _), value) in FCP
                .terms
                .iter()
                .zip([2.0, 2.0, 0.0, 5.0, behind, 0.0, 0.0, 20.0, 0.0])
            {
                s.breakdown.insert(m.name.to_string(), summary(value));
            }
            s.breakdown
                .insert(metric_registry::FCP_RTT_MS.name.into(), summary(40.0));
            s
        };
        let mut fcp = summary_of(
            vec![
                paint(Variant::H3, 2180.0, 1600.0),
                paint(Variant::H2, 502.0, 0.0),
            ],
            vec![h3_vs_h2("embedded")],
        );
        fcp.comparisons[0].comparison.verdict = Verdict::Slower;
        fcp.metric = metric_registry::FCP_MS.name.into();
        let e = &differences(&fcp)[0];
        assert_eq!(e.named, ["waiting behind other responses"]);
        assert!(e.sentence.starts_with("h3 is 1678 ms slower than h2 (2180 vs 502 ms): 1600 ms more waiting behind other responses"), "{}", e.sentence);
        // The load's terms are not there: the load's accounting explains nothing of it.
        fcp.metric = metric_registry::COMPLETION_MS.name.into();
        assert!(differences(&fcp).is_empty());
        fcp.metric = metric_registry::SPEED_INDEX_MS.name.into();
        assert!(differences(&fcp).is_empty());
        assert!(accounting_for(metric_registry::FIRST_VISUAL_CHANGE_MS.name).is_none());
    }

    #[test]
    fn a_side_without_an_accounting_is_not_explained() {
        let h3 = series(Variant::H3, 387.0, [1.0; 9]);
        let mut h2 = series(Variant::H2, 496.0, [1.0; 9]);
        h2.breakdown.remove(metric_registry::CRITICAL_RTT_MS.name);
        assert!(explain("x", &h3, &h2, "h3", "h2").is_none());
        let e = explain("x", &h3, &series(Variant::H2, 400.0, [1.0; 9]), "h3", "h2").unwrap();
        assert!(
            e.sentence.contains("no single term stands out"),
            "{}",
            e.sentence
        );
    }
}
