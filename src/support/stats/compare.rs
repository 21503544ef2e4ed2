//! Comparing two series (e.g. h2 against h1 in one profile × workload cell), and the
//! matrix-wide Holm step that turns per-comparison p-values into verdicts.
//!
//! Values are durations: lower is better, so "a is faster" means a's times are lower. Runs that
//! did not finish (DNF) are censored observations at the timeout: they take part in every step,
//! ranked above every finished run and tied with each other (see [`super::censored`]).
//!
//! Decision rules, in order:
//! 1. Either side without observations (every run invalid, or none ran): `Undetermined(NoRuns)`.
//! 2. Fewer than [`MIN_RUNS_FOR_INFERENCE`] observations on a side: `Undetermined(TooFewRuns)`.
//! 3. Every observation on both sides a DNF (nothing to rank): `Undetermined(AllDnf)`.
//! 4. Otherwise: the two-sided Mann-Whitney U test over all observations (DNFs as tied
//!    maxima), and the ratio of medians `median(a) / median(b)` with a percentile-bootstrap CI,
//!    a DNF counted at the timeout — so a DNF median gives a bound, not a value
//!    ([`RatioBound`]). The p-value is Holm-adjusted over the family of all tested comparisons
//!    ([`apply_holm`]; [`compare`] alone treats the comparison as a family of one). Verdict:
//!    - `Faster` when `p_holm < alpha` **and** the whole ratio CI is below 1;
//!    - `Slower` when `p_holm < alpha` **and** the whole ratio CI is above 1;
//!    - otherwise `NoSignificantDifference`.
//!
//!    Requiring both is deliberate: the U test asks "does one tend to be lower?", the CI asks
//!    "is the typical (median) time different?". A verdict claims both; when they disagree there
//!    is no verdict to print. Every verdict comes from a test: DNFs never decide on their own.
//!
//! Note for small series: with the exact U test, `n` runs per side cannot give p below
//! `2 / C(2n, n)` (n = 5: 0.0079), and Holm over m comparisons needs the smallest p below
//! `alpha / m` (54 comparisons: 0.00093) — see [`smallest_attainable_p`].
//!
//! [`smallest_attainable_p`]: super::smallest_attainable_p

use std::fmt;

use serde::{Deserialize, Serialize};

use super::bootstrap::{ratio_ci, BootstrapConfig, ConfidenceInterval};
use super::censored::{Censored, CensoredSample};
use super::error::{check_open_unit, check_positive, StatsError};
use super::holm::holm;
use super::mann_whitney::{mann_whitney_u, MwuMethod};
use super::sample::median_of_sorted;
use super::series::{SeriesInput, MIN_RUNS_FOR_INFERENCE};

/// Settings of [`compare`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompareConfig {
    /// Family-wise significance level for the Holm-adjusted p-value (default 0.05).
    pub alpha: f64,
    /// Bootstrap of the ratio of medians (level 0.95 by default; give each comparison its own
    /// seed, e.g. with [`derive_seed`](super::derive_seed)).
    pub bootstrap: BootstrapConfig,
}

impl Default for CompareConfig {
    fn default() -> Self {
        Self {
            alpha: 0.05,
            bootstrap: BootstrapConfig::default(),
        }
    }
}

/// Which side of a comparison a reason is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::A => "a",
            Side::B => "b",
        })
    }
}

/// Why a comparison has no verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndeterminedReason {
    /// The side had neither a valid run nor a DNF (every run invalid, or none ran).
    NoRuns { side: Side },
    /// Every run on both sides did not finish: nothing to rank.
    AllDnf,
    /// Not enough observations (finished + DNF runs) for a test.
    TooFewRuns {
        side: Side,
        n_runs: usize,
        needed: usize,
    },
}

impl UndeterminedReason {
    /// The same reason with the sides swapped.
    pub fn inverted(&self) -> UndeterminedReason {
        match self {
            Self::NoRuns { side } => Self::NoRuns { side: side.other() },
            Self::AllDnf => Self::AllDnf,
            Self::TooFewRuns {
                side,
                n_runs,
                needed,
            } => Self::TooFewRuns {
                side: side.other(),
                n_runs: *n_runs,
                needed: *needed,
            },
        }
    }
}

impl fmt::Display for UndeterminedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoRuns { side } => write!(f, "{side} has no valid or DNF runs"),
            Self::AllDnf => f.write_str("no run of either finished"),
            Self::TooFewRuns {
                side,
                n_runs,
                needed,
            } => write!(f, "{side} has {n_runs} valid or DNF runs, {needed} needed"),
        }
    }
}

/// The outcome for "a against b".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    NoSignificantDifference,
    Undetermined(UndeterminedReason),
    /// The side that would be called faster failed significantly more often as a load of its
    /// protocol (fell back, a failed request, a short body): it is not called faster
    /// (`results::attrition` decides this; [`compare`] never does).
    FailsMore {
        side: Side,
    },
}

impl Verdict {
    /// The same verdict seen from the other side (b against a).
    pub fn inverted(&self) -> Verdict {
        match self {
            Self::Faster => Self::Slower,
            Self::Slower => Self::Faster,
            Self::NoSignificantDifference => Self::NoSignificantDifference,
            Self::Undetermined(r) => Self::Undetermined(r.inverted()),
            Self::FailsMore { side } => Self::FailsMore { side: side.other() },
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Faster => f.write_str("faster"),
            Self::Slower => f.write_str("slower"),
            Self::NoSignificantDifference => f.write_str("no significant difference"),
            Self::Undetermined(reason) => write!(f, "undetermined ({reason})"),
            Self::FailsMore { side } => write!(f, "{side} fails more often"),
        }
    }
}

/// What the ratio of medians is when a median is a DNF (counted at the timeout).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioBound {
    /// Both medians finished: the ratio is a value.
    #[default]
    Exact,
    /// a's median did not finish: the true ratio is at least this.
    AtLeast,
    /// b's median did not finish: the true ratio is at most this.
    AtMost,
    /// Neither median finished: no ratio can be told.
    Unknown,
}

/// Series a against series b. Statistical fields are `None` when no test was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Valid (finished) runs per side.
    pub n_valid_a: usize,
    pub n_valid_b: usize,
    /// DNF runs per side (observations too).
    #[serde(default)]
    pub n_dnf_a: usize,
    #[serde(default)]
    pub n_dnf_b: usize,
    /// `median(a) / median(b)`: below 1 means a is faster (see `ratio_bound` when a median
    /// is a DNF).
    pub ratio: Option<f64>,
    #[serde(default)]
    pub ratio_bound: RatioBound,
    pub ratio_ci_low: Option<f64>,
    pub ratio_ci_high: Option<f64>,
    /// An end of the ratio's CI depends on the time a DNF is counted at: it is a bound, not a
    /// value (absent: false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ratio_ci_censored: bool,
    /// Mann-Whitney U of a (scipy's statistic).
    pub u: Option<f64>,
    /// Unadjusted two-sided p-value.
    pub p: Option<f64>,
    pub test_method: Option<MwuMethod>,
    /// Holm-adjusted p-value over the family of tested comparisons.
    pub p_holm: Option<f64>,
    /// The significance level the verdict was decided at.
    pub alpha: f64,
    pub verdict: Verdict,
}

impl Comparison {
    /// The same comparison seen from the other side: b against a (ratio and CI inverted, U
    /// mirrored, faster and slower swapped).
    pub fn inverted(&self) -> Comparison {
        let mut x = self.clone();
        std::mem::swap(&mut x.n_valid_a, &mut x.n_valid_b);
        std::mem::swap(&mut x.n_dnf_a, &mut x.n_dnf_b);
        x.ratio = x.ratio.map(|r| 1.0 / r);
        x.ratio_bound = match x.ratio_bound {
            RatioBound::AtLeast => RatioBound::AtMost,
            RatioBound::AtMost => RatioBound::AtLeast,
            b => b,
        };
        x.ratio_ci_low = self.ratio_ci_high.map(|h| 1.0 / h);
        x.ratio_ci_high = self.ratio_ci_low.map(|l| 1.0 / l);
        let (na, nb) = self.runs();
        x.u = x.u.map(|u| (na * nb) as f64 - u);
        x.verdict = self.verdict.inverted();
        x
    }

    /// Observations (finished + DNF) per side.
    pub fn runs(&self) -> (usize, usize) {
        (self.n_valid_a + self.n_dnf_a, self.n_valid_b + self.n_dnf_b)
    }

    fn untested(a: &SeriesInput, b: &SeriesInput, alpha: f64, verdict: Verdict) -> Self {
        Self {
            n_valid_a: a.values.len(),
            n_valid_b: b.values.len(),
            n_dnf_a: a.dnf,
            n_dnf_b: b.dnf,
            ratio: None,
            ratio_bound: RatioBound::Exact,
            ratio_ci_low: None,
            ratio_ci_high: None,
            ratio_ci_censored: false,
            u: None,
            p: None,
            test_method: None,
            p_holm: None,
            alpha,
            verdict,
        }
    }
}

/// Compares series `a` against series `b` (see the module docs for the rules). Errors on
/// non-finite values, on non-positive finished values, on a finished value not below the
/// timeout in a series with DNFs, and on an invalid configuration.
pub fn compare(
    a: &SeriesInput,
    b: &SeriesInput,
    config: &CompareConfig,
) -> Result<Comparison, StatsError> {
    check_open_unit(config.alpha, "significance level alpha")?;
    config.bootstrap.validate()?;
    // Both sides' DNFs stand for the same time: the later of the two timeouts.
    let censor_at = a.censor_at.max(b.censor_at);
    let with_timeout = |s: &SeriesInput| SeriesInput {
        censor_at,
        ..s.clone()
    };
    let (a, b) = (&with_timeout(a), &with_timeout(b));
    for (series, what) in [(a, "series a values"), (b, "series b values")] {
        if series.observations() > 0 {
            series.sample(what)?;
        }
    }
    let alpha = config.alpha;
    let undetermined = |reason| Comparison::untested(a, b, alpha, Verdict::Undetermined(reason));

    for (series, side) in [(a, Side::A), (b, Side::B)] {
        if series.observations() == 0 {
            return Ok(undetermined(UndeterminedReason::NoRuns { side }));
        }
    }
    for (series, side) in [(a, Side::A), (b, Side::B)] {
        if series.observations() < MIN_RUNS_FOR_INFERENCE {
            return Ok(undetermined(UndeterminedReason::TooFewRuns {
                side,
                n_runs: series.observations(),
                needed: MIN_RUNS_FOR_INFERENCE,
            }));
        }
    }
    if a.values.is_empty() && b.values.is_empty() {
        return Ok(undetermined(UndeterminedReason::AllDnf));
    }
    for (series, what) in [(a, "series a values"), (b, "series b values")] {
        if !series.values.is_empty() {
            check_positive(&series.values, what)?;
        }
    }
    let (sa, sb) = (a.sample("series a values")?, b.sample("series b values")?);
    let (obs_a, obs_b) = (sa.at_timeout(), sb.at_timeout());
    let ratio = median_of_sorted(&obs_a) / median_of_sorted(&obs_b);
    let ratio_bound = match (sa.median(), sb.median()) {
        (Censored::Ms(_), Censored::Ms(_)) => RatioBound::Exact,
        (Censored::Dnf, Censored::Ms(_)) => RatioBound::AtLeast,
        (Censored::Ms(_), Censored::Dnf) => RatioBound::AtMost,
        (Censored::Dnf, Censored::Dnf) => RatioBound::Unknown,
    };
    let ci = ratio_ci(&obs_a, &obs_b, &config.bootstrap);
    let ratio_ci_censored = ci_depends_on_dnf_time(&sa, &sb, &config.bootstrap, ci);
    let test = mann_whitney_u(&obs_a, &obs_b)?;
    let mut comparison = Comparison {
        n_valid_a: a.values.len(),
        n_valid_b: b.values.len(),
        n_dnf_a: a.dnf,
        n_dnf_b: b.dnf,
        ratio: Some(ratio),
        ratio_bound,
        ratio_ci_low: Some(ci.low),
        ratio_ci_high: Some(ci.high),
        ratio_ci_censored,
        u: Some(test.u),
        p: Some(test.p_two_sided),
        test_method: Some(test.method),
        p_holm: Some(test.p_two_sided),
        alpha,
        verdict: Verdict::NoSignificantDifference,
    };
    comparison.verdict = decide(&comparison);
    Ok(comparison)
}

/// Whether an end of `ci` (DNFs at the timeout) moves when the DNFs stand for other, later
/// times — a's at twice the timeout, b's at three times, so that a resample whose two medians
/// are both DNFs moves too. The same seed draws the same resamples: only the censored draws
/// change.
fn ci_depends_on_dnf_time(
    a: &CensoredSample,
    b: &CensoredSample,
    config: &BootstrapConfig,
    ci: ConfidenceInterval,
) -> bool {
    if a.dnf() + b.dnf() == 0 {
        return false;
    }
    let at = a.censor_at().max(b.censor_at());
    let moved = ratio_ci(&a.observations(2.0 * at), &b.observations(3.0 * at), config);
    moved.low != ci.low || moved.high != ci.high
}

/// Holm-adjusts the p-values of every tested comparison in `comparisons` as one family (the
/// whole matrix) and re-derives their verdicts. Untested (undetermined) comparisons are left
/// as they are and do not count towards the family size.
pub fn apply_holm(comparisons: &mut [Comparison]) -> Result<(), StatsError> {
    let tested: Vec<usize> = (0..comparisons.len())
        .filter(|&i| comparisons[i].p.is_some())
        .collect();
    let pvalues: Vec<f64> = tested.iter().filter_map(|&i| comparisons[i].p).collect();
    let adjusted = holm(&pvalues)?;
    for (&i, p_holm) in tested.iter().zip(adjusted) {
        comparisons[i].p_holm = Some(p_holm);
        comparisons[i].verdict = decide(&comparisons[i]);
    }
    Ok(())
}

/// The verdict of a tested comparison from its Holm p-value and ratio CI (rule 4). The point
/// ratio must point the same way: a percentile CI can miss its own estimate (more so when
/// the ratio is a DNF bound), and a verdict must never contradict the printed ratio.
fn decide(c: &Comparison) -> Verdict {
    let (Some(p_holm), Some(low), Some(high)) = (c.p_holm, c.ratio_ci_low, c.ratio_ci_high) else {
        return Verdict::NoSignificantDifference;
    };
    let significant = p_holm < c.alpha;
    let ratio_below = c.ratio.is_none_or(|r| r < 1.0);
    let ratio_above = c.ratio.is_none_or(|r| r > 1.0);
    if significant && high < 1.0 && ratio_below {
        Verdict::Faster
    } else if significant && low > 1.0 && ratio_above {
        Verdict::Slower
    } else {
        Verdict::NoSignificantDifference
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::bootstrap::tests::normal_sample;
    use crate::support::stats::fixtures::assert_close;
    use crate::support::stats::{holm, mann_whitney_u, ratio_of_medians_ci};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn series(values: &[f64], invalid: usize, dnf: usize) -> SeriesInput {
        SeriesInput {
            values: values.to_vec(),
            invalid,
            dnf,
            censor_at: 120_000.0,
        }
    }

    fn normal_series(seed: u64, n: usize, mean: f64) -> SeriesInput {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        series(&normal_sample(&mut rng, n, mean, mean * 0.05), 0, 0)
    }

    fn config(seed: u64) -> CompareConfig {
        CompareConfig {
            bootstrap: BootstrapConfig::default().with_seed(seed),
            ..CompareConfig::default()
        }
    }

    #[test]
    fn a_verdict_never_contradicts_the_point_ratio() {
        let c = |ratio: f64, low: f64, high: f64| Comparison {
            n_valid_a: 10,
            n_valid_b: 10,
            n_dnf_a: 0,
            n_dnf_b: 0,
            ratio: Some(ratio),
            ratio_bound: RatioBound::AtLeast,
            ratio_ci_low: Some(low),
            ratio_ci_high: Some(high),
            ratio_ci_censored: false,
            u: Some(5.0),
            p: Some(1e-4),
            test_method: Some(MwuMethod::Asymptotic),
            p_holm: Some(1e-3),
            alpha: 0.05,
            verdict: Verdict::NoSignificantDifference,
        };
        assert_eq!(decide(&c(0.9, 0.8, 0.97)), Verdict::Faster);
        assert_eq!(
            decide(&c(1.02, 0.8, 0.97)),
            Verdict::NoSignificantDifference
        );
        assert_eq!(decide(&c(1.2, 1.05, 1.3)), Verdict::Slower);
        assert_eq!(
            decide(&c(0.99, 1.05, 1.3)),
            Verdict::NoSignificantDifference
        );
    }

    #[test]
    fn clear_difference_is_faster_one_way_and_slower_the_other() {
        let (fast, slow) = (normal_series(1, 10, 400.0), normal_series(2, 10, 500.0));
        let c = compare(&fast, &slow, &config(9)).unwrap();
        assert_eq!(c.verdict, Verdict::Faster);
        // Every field is what the underlying functions give on the same data.
        let test = mann_whitney_u(&fast.values, &slow.values).unwrap();
        let ci = ratio_of_medians_ci(&fast.values, &slow.values, 0.95, 10_000, 9).unwrap();
        let ratio = crate::support::stats::median(&fast.values).unwrap()
            / crate::support::stats::median(&slow.values).unwrap();
        assert_eq!(c.ratio, Some(ratio));
        assert_eq!(
            (c.ratio_ci_low, c.ratio_ci_high),
            (Some(ci.low), Some(ci.high))
        );
        assert_eq!(
            (c.u, c.p, c.p_holm),
            (Some(test.u), Some(test.p_two_sided), Some(test.p_two_sided))
        );
        assert_eq!(c.test_method, Some(MwuMethod::Asymptotic));
        assert!(c.p.unwrap() < 0.001 && c.ratio_ci_high.unwrap() < 1.0);
        assert_eq!(c.ratio_bound, RatioBound::Exact);

        let reverse = compare(&slow, &fast, &config(9)).unwrap();
        assert_eq!(reverse.verdict, Verdict::Slower);
        assert_eq!(reverse.p, c.p);
    }

    #[test]
    fn identical_and_overlapping_series_show_no_difference() {
        let a = normal_series(3, 10, 450.0);
        let same = compare(&a, &a, &config(1)).unwrap();
        assert_eq!(same.verdict, Verdict::NoSignificantDifference);
        assert_eq!((same.ratio, same.p), (Some(1.0), Some(1.0)));
        let b = normal_series(4, 10, 450.0);
        let c = compare(&a, &b, &config(1)).unwrap();
        assert_eq!(c.verdict, Verdict::NoSignificantDifference, "{c:?}");
        assert!(c.ratio_ci_low.unwrap() < 1.0 && c.ratio_ci_high.unwrap() > 1.0);
    }

    #[test]
    fn significant_test_but_ratio_ci_straddling_one_gives_no_verdict() {
        let mut c = compare(
            &normal_series(5, 10, 400.0),
            &normal_series(6, 10, 500.0),
            &config(2),
        )
        .unwrap();
        assert_eq!(c.verdict, Verdict::Faster);
        c.ratio_ci_high = Some(1.01);
        assert_eq!(decide(&c), Verdict::NoSignificantDifference);
        c.ratio_ci_high = Some(0.99);
        c.p_holm = Some(0.05); // not below alpha
        assert_eq!(decide(&c), Verdict::NoSignificantDifference);
    }

    #[test]
    fn half_dnf_is_not_faster_than_all_finished() {
        // 5 fast finished + 5 DNF against 10 finished: dropping the DNFs read "faster"
        // (p = 6.7e-4); as censored observations the series is not faster.
        let fast = [300.0, 305.0, 310.0, 315.0, 320.0];
        let stuck = series(&fast, 0, 5);
        let steady = normal_series(12, 10, 400.0);
        let c = compare(&stuck, &steady, &config(1)).unwrap();
        assert_ne!(c.verdict, Verdict::Faster, "{c:?}");
        assert_eq!(c.verdict, Verdict::NoSignificantDifference, "{c:?}");
        assert!(c.p.unwrap() > 0.5, "{c:?}");
        assert_eq!(c.ratio_bound, RatioBound::AtLeast);
        assert_eq!(c.runs(), (10, 10));
        // The same finished runs without DNFs are faster: the DNFs are what changed the answer.
        let clean = compare(&series(&fast, 0, 0), &steady, &config(1)).unwrap();
        assert_eq!(clean.verdict, Verdict::Faster);
    }

    #[test]
    fn a_ratio_ci_that_reaches_a_dnf_is_marked_censored() {
        let steady = normal_series(21, 10, 400.0);
        // 6 finished and 4 DNF of 10: the median finished, but many resamples' medians do not.
        let a = series(&[300.0, 305.0, 310.0, 315.0, 320.0, 325.0], 0, 4);
        let c = compare(&a, &steady, &config(1)).unwrap();
        assert_eq!(c.ratio_bound, RatioBound::Exact);
        assert!(c.ratio_ci_censored, "{c:?}");
        assert!(compare(&steady, &a, &config(1)).unwrap().ratio_ci_censored);
        // One DNF in 30: no resample median gets near it.
        let mut rng = ChaCha8Rng::seed_from_u64(22);
        let one = series(&normal_sample(&mut rng, 29, 400.0, 20.0), 0, 1);
        let c = compare(&one, &normal_series(23, 30, 400.0), &config(1)).unwrap();
        assert!(!c.ratio_ci_censored, "{c:?}");
        assert!(
            !compare(&steady, &steady, &config(1))
                .unwrap()
                .ratio_ci_censored
        );
    }

    #[test]
    fn one_dnf_against_one_valid_run_has_no_verdict() {
        let c = compare(&series(&[], 0, 1), &series(&[500.0], 0, 0), &config(0)).unwrap();
        assert_eq!(
            c.verdict,
            Verdict::Undetermined(UndeterminedReason::TooFewRuns {
                side: Side::A,
                n_runs: 1,
                needed: 3
            })
        );
        assert!(c.p.is_none() && c.ratio.is_none());
    }

    #[test]
    fn six_against_five_dnf_of_ten_is_tested_not_decided() {
        let a = series(&[500.0, 510.0, 520.0, 530.0], 0, 6);
        let b = series(&[505.0, 515.0, 525.0, 535.0, 545.0], 0, 5);
        let c = compare(&a, &b, &config(3)).unwrap();
        assert!(c.p.is_some(), "a test was made");
        assert_eq!(c.verdict, Verdict::NoSignificantDifference, "{c:?}");
        assert_eq!(c.ratio_bound, RatioBound::Unknown);
    }

    #[test]
    fn a_series_that_never_finishes_is_slower_by_the_test() {
        // 10 DNF against 10 finished: the ranks separate completely, the test decides.
        let stuck = series(&[], 0, 10);
        let done = normal_series(4, 10, 2000.0);
        let c = compare(&stuck, &done, &config(2)).unwrap();
        assert_eq!(c.verdict, Verdict::Slower, "{c:?}");
        assert!(c.p.unwrap() < 1e-3);
        assert!(c.ratio_ci_low.unwrap() > 1.0);
        assert_eq!(c.ratio_bound, RatioBound::AtLeast);
        // Nothing finished on either side: nothing to rank.
        let c = compare(&stuck, &series(&[], 0, 4), &config(2)).unwrap();
        assert_eq!(c.verdict, Verdict::Undetermined(UndeterminedReason::AllDnf));
    }

    #[test]
    fn censored_tests_and_medians_match_scipy_with_dnf_as_infinity() {
        let fixture = crate::support::stats::fixtures::censored();
        assert!(fixture.cases.len() >= 5);
        for case in &fixture.cases {
            let (a, b) = (
                series(&case.a, 0, case.a_dnf),
                series(&case.b, 0, case.b_dnf),
            );
            let c = compare(&a, &b, &config(1)).unwrap();
            let name = &case.name;
            assert_eq!(c.u, Some(case.u), "{name}: U");
            assert_close(c.p.unwrap(), case.p, 1e-10, &format!("{name}: p"));
            let method = match c.test_method {
                Some(MwuMethod::Exact) => "exact",
                _ => "asymptotic",
            };
            assert_eq!(method, case.method, "{name}");
            let median = |s: &SeriesInput| s.sample("s").unwrap().median().ms();
            assert_eq!(median(&a), case.median_a, "{name}: median a");
            assert_eq!(median(&b), case.median_b, "{name}: median b");
        }
    }

    #[test]
    fn too_few_or_no_runs_are_undetermined() {
        let ok = series(&[500.0, 510.0, 520.0], 0, 0);
        let c = compare(&ok, &series(&[400.0, 410.0], 3, 0), &config(0)).unwrap();
        let expected = UndeterminedReason::TooFewRuns {
            side: Side::B,
            n_runs: 2,
            needed: 3,
        };
        assert_eq!(c.verdict, Verdict::Undetermined(expected));
        assert_eq!(
            c.verdict.to_string(),
            "undetermined (b has 2 valid or DNF runs, 3 needed)"
        );
        let c = compare(&series(&[], 10, 0), &ok, &config(0)).unwrap();
        assert_eq!(
            c.verdict,
            Verdict::Undetermined(UndeterminedReason::NoRuns { side: Side::A })
        );
        let c = compare(&series(&[1.0], 0, 0), &series(&[2.0], 0, 0), &config(0)).unwrap();
        assert!(matches!(c.verdict, Verdict::Undetermined(_)));
    }

    #[test]
    fn rejects_bad_values_and_settings() {
        let ok = series(&[500.0, 510.0, 520.0], 0, 0);
        let err = compare(&ok, &series(&[1.0, f64::NAN], 0, 5), &config(0)).unwrap_err();
        assert!(
            err.to_string().contains("series b values[1] is NaN"),
            "{err}"
        );
        let err = compare(&series(&[0.0, 1.0, 2.0], 0, 0), &ok, &config(0)).unwrap_err();
        assert!(
            matches!(err, StatsError::NonPositive { index: 0, .. }),
            "{err}"
        );
        let bad_alpha = CompareConfig {
            alpha: 5.0,
            ..config(0)
        };
        let err = compare(&ok, &ok, &bad_alpha).unwrap_err();
        assert!(err.to_string().contains("alpha"), "{err}");
    }

    #[test]
    fn holm_over_the_matrix_demotes_a_marginal_difference() {
        // Alone, 5 fully separated runs per side give p = 2/252 ≈ 0.0079 < 0.05: faster.
        let marginal_a = series(&[100.0, 101.0, 102.0, 103.0, 104.0], 0, 0);
        let marginal_b = series(&[110.0, 111.0, 112.0, 113.0, 114.0], 0, 0);
        let alone = compare(&marginal_a, &marginal_b, &config(0)).unwrap();
        assert_eq!(alone.verdict, Verdict::Faster);
        assert_eq!(alone.test_method, Some(MwuMethod::Exact));

        // In a family of 10 tested comparisons with two clear differences and seven null ones it
        // has the third smallest p: Holm multiplies it by 8 → ≈ 0.063, no longer significant.
        let mut matrix = vec![alone];
        for i in 0..2 {
            let (fast, slow) = (
                normal_series(100 + i, 12, 300.0),
                normal_series(200 + i, 12, 420.0),
            );
            matrix.push(compare(&fast, &slow, &config(i)).unwrap());
        }
        for i in 0..7 {
            let (x, y) = (
                normal_series(300 + i, 10, 300.0),
                normal_series(400 + i, 10, 300.0),
            );
            matrix.push(compare(&x, &y, &config(i)).unwrap());
        }
        let too_few = series(&[900.0], 0, 1);
        matrix.push(compare(&too_few, &marginal_b, &config(0)).unwrap());
        let before = matrix.clone();
        apply_holm(&mut matrix).unwrap();

        let tested_p: Vec<f64> = before.iter().filter_map(|c| c.p).collect();
        assert_eq!(
            tested_p.len(),
            10,
            "the untested comparison is not in the family"
        );
        let expected = holm(&tested_p).unwrap();
        let got: Vec<f64> = matrix.iter().filter_map(|c| c.p_holm).collect();
        assert_eq!(got, expected);
        assert_close(
            matrix[0].p_holm.unwrap(),
            8.0 * 2.0 / 252.0,
            1e-12,
            "marginal p_holm",
        );
        assert_eq!(
            matrix[0].verdict,
            Verdict::NoSignificantDifference,
            "{:?}",
            matrix[0]
        );
        assert!(
            matrix[1..3].iter().all(|c| c.verdict == Verdict::Faster),
            "{matrix:?}"
        );
        assert!(matrix[3..10]
            .iter()
            .all(|c| c.verdict == Verdict::NoSignificantDifference));
        assert_eq!(
            matrix[10], before[10],
            "untested comparisons stay untouched"
        );
    }

    #[test]
    fn verdicts_serialize_readably_and_round_trip() {
        let c = compare(
            &series(&[1.0], 0, 0),
            &series(&[2.0, 3.0, 4.0], 0, 0),
            &config(0),
        )
        .unwrap();
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["verdict"]["undetermined"]["too_few_runs"]["side"], "a");
        assert_eq!(serde_json::from_value::<Comparison>(json).unwrap(), c);
        assert_eq!(serde_json::to_value(Verdict::Faster).unwrap(), "faster");
        assert_eq!(
            Verdict::NoSignificantDifference.to_string(),
            "no significant difference"
        );
    }
}
