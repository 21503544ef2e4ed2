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
}

/// A term: its name, the metric that measures it, and whether that metric counts round trips
/// (then its milliseconds are round trips × the series' RTT).
const TERMS: [(&str, &Metric, bool); 9] = [
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
];

fn median(s: &SeriesStats, m: &Metric) -> Option<f64> {
    s.breakdown.get(m.name)?.median?.ms()
}

/// Each term on both sides; None when a side has no accounting.
fn terms(a: &SeriesStats, b: &SeriesStats) -> Option<Vec<Term>> {
    let rtt_a = median(a, &metric_registry::CRITICAL_RTT_MS)?;
    let rtt_b = median(b, &metric_registry::CRITICAL_RTT_MS)?;
    TERMS
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

/// Why side `a` (named `a_name`) took another time than side `b`; None when either side has no
/// headline median or no accounting.
pub fn explain(
    label: &str,
    a: &SeriesStats,
    b: &SeriesStats,
    a_name: &str,
    b_name: &str,
) -> Option<Explanation> {
    let (ha, hb) = (a.completion.median?.ms()?, b.completion.median?.ms()?);
    let terms = terms(a, b)?;
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

/// Every significant comparison of `summary` (faster or slower), explained term by term; in
/// the summary's order.
pub fn differences(summary: &Summary) -> Vec<Explanation> {
    summary
        .comparisons
        .iter()
        .filter(|c| matches!(c.comparison.verdict, Verdict::Faster | Verdict::Slower))
        .filter_map(|c| {
            let a = side(summary, c, &c.setup_a(), c.a)?;
            let b = side(summary, c, &c.setup_b(), c.b)?;
            let label = c.label();
            let (a_name, b_name) = label.split_once(" vs ")?;
            explain(
                &format!("{}/{}", c.profile, c.workload),
                a,
                b,
                a_name,
                b_name,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::protocol::Variant;
    use crate::results::rows::SeriesKey;
    use crate::support::stats::{Censored, SeriesSummary};

    fn summary(median: f64) -> SeriesSummary {
        SeriesSummary {
            n_valid: 10,
            n_invalid: 0,
            n_dnf: 0,
            median: Some(Censored::Ms(median)),
            q1: None,
            q3: None,
            iqr: None,
            min: None,
            max: None,
            ci_low: None,
            ci_high: None,
        }
    }

    /// A series with its headline and accounting medians: set-up, requests and flights in
    /// round trips of 40 ms, then server, behind, wire, queue, browser and remainder in ms.
    fn series(variant: Variant, headline: f64, terms: [f64; 9]) -> SeriesStats {
        let mut breakdown: std::collections::BTreeMap<String, SeriesSummary> = TERMS
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
