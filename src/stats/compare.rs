//! Comparing two series (e.g. h2 against h1 in one profile × workload cell), and the
//! matrix-wide Holm step that turns per-comparison p-values into verdicts.
//!
//! Values are durations: lower is better, so "a is faster" means a's times are lower.
//!
//! Decision rules, in order:
//! 1. Either side without valid runs and without DNF (e.g. all runs invalid):
//!    `Undetermined(NoRuns)`.
//! 2. Both sides DNF-majority (see [`SeriesInput::dnf_majority`]): `Undetermined(BothDnf)`.
//! 3. Exactly one side DNF-majority: that side is `Slower` (it did not finish), the other
//!    `Faster`; `decided_by_dnf = true`, no test, no ratio.
//! 4. Fewer than [`MIN_VALID_FOR_INFERENCE`] valid runs on a side: `Undetermined(TooFewValid)`.
//! 5. Otherwise: ratio of medians `median(a) / median(b)` with a percentile-bootstrap CI, and
//!    the two-sided Mann-Whitney U test. The comparison's p-value is Holm-adjusted over the
//!    family of all tested comparisons ([`apply_holm`]; [`compare`] alone treats the comparison
//!    as a family of one, `p_holm = p`). Verdict:
//!    - `Faster` when `p_holm < alpha` **and** the whole ratio CI is below 1 (so `ratio < 1`);
//!    - `Slower` when `p_holm < alpha` **and** the whole ratio CI is above 1;
//!    - otherwise `NoSignificantDifference`.
//!
//!    Requiring both is deliberate: the U test asks "does one tend to be lower?", the CI asks
//!    "is the typical (median) time different?". A verdict claims both; when they disagree (e.g.
//!    distributions of different shape with equal medians) there is no verdict to print.
//!
//! Note for small series: with the exact U test, `n` runs per side cannot give p below
//! `2 / C(2n, n)` (n = 5: 0.0079), and Holm over m comparisons needs the smallest p below
//! `alpha / m` (54 comparisons: 0.00093) — see [`smallest_attainable_p`].
//!
//! [`smallest_attainable_p`]: super::smallest_attainable_p

use std::fmt;

use serde::{Deserialize, Serialize};

use super::bootstrap::{ratio_ci, BootstrapConfig};
use super::error::{check_finite, check_open_unit, check_positive, StatsError};
use super::holm::holm;
use super::mann_whitney::{mann_whitney_u, MwuMethod};
use super::sample::SortedSample;
use super::series::{SeriesInput, MIN_VALID_FOR_INFERENCE};

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
    /// Both sides did not finish in most runs.
    BothDnf,
    /// Not enough valid runs for a test.
    TooFewValid {
        side: Side,
        n_valid: usize,
        needed: usize,
    },
}

impl fmt::Display for UndeterminedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoRuns { side } => write!(f, "{side} has no valid or DNF runs"),
            Self::BothDnf => f.write_str("both did not finish in most runs"),
            Self::TooFewValid {
                side,
                n_valid,
                needed,
            } => write!(f, "{side} has {n_valid} valid runs, {needed} needed"),
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
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Faster => f.write_str("faster"),
            Self::Slower => f.write_str("slower"),
            Self::NoSignificantDifference => f.write_str("no significant difference"),
            Self::Undetermined(reason) => write!(f, "undetermined ({reason})"),
        }
    }
}

/// Series a against series b. Statistical fields are `None` when no test was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub n_valid_a: usize,
    pub n_valid_b: usize,
    /// `median(a) / median(b)`: below 1 means a is faster.
    pub ratio: Option<f64>,
    pub ratio_ci_low: Option<f64>,
    pub ratio_ci_high: Option<f64>,
    /// Mann-Whitney U of a (scipy's statistic).
    pub u: Option<f64>,
    /// Unadjusted two-sided p-value.
    pub p: Option<f64>,
    pub test_method: Option<MwuMethod>,
    /// Holm-adjusted p-value over the family of tested comparisons.
    pub p_holm: Option<f64>,
    /// The significance level the verdict was decided at.
    pub alpha: f64,
    /// True when the verdict comes from one side not finishing (rule 3), not from a test.
    pub decided_by_dnf: bool,
    pub verdict: Verdict,
}

impl Comparison {
    fn untested(a: &SeriesInput, b: &SeriesInput, alpha: f64, verdict: Verdict) -> Self {
        Self {
            n_valid_a: a.values.len(),
            n_valid_b: b.values.len(),
            ratio: None,
            ratio_ci_low: None,
            ratio_ci_high: None,
            u: None,
            p: None,
            test_method: None,
            p_holm: None,
            alpha,
            decided_by_dnf: false,
            verdict,
        }
    }
}

/// Compares series `a` against series `b` (see the module docs for the rules). Errors on
/// non-finite values (even in a DNF-majority series), on non-positive values when a ratio is
/// computed, and on an invalid configuration.
pub fn compare(
    a: &SeriesInput,
    b: &SeriesInput,
    config: &CompareConfig,
) -> Result<Comparison, StatsError> {
    check_open_unit(config.alpha, "significance level alpha")?;
    config.bootstrap.validate()?;
    for (series, what) in [(a, "series a values"), (b, "series b values")] {
        if !series.values.is_empty() {
            check_finite(&series.values, what)?;
        }
    }
    let alpha = config.alpha;
    let undetermined = |reason| Comparison::untested(a, b, alpha, Verdict::Undetermined(reason));

    for (series, side) in [(a, Side::A), (b, Side::B)] {
        if series.values.is_empty() && series.dnf == 0 {
            return Ok(undetermined(UndeterminedReason::NoRuns { side }));
        }
    }
    match (a.dnf_majority(), b.dnf_majority()) {
        (true, true) => return Ok(undetermined(UndeterminedReason::BothDnf)),
        (true, false) | (false, true) => {
            let verdict = if a.dnf_majority() {
                Verdict::Slower
            } else {
                Verdict::Faster
            };
            let mut comparison = Comparison::untested(a, b, alpha, verdict);
            comparison.decided_by_dnf = true;
            return Ok(comparison);
        }
        (false, false) => {}
    }
    for (series, side) in [(a, Side::A), (b, Side::B)] {
        if series.values.len() < MIN_VALID_FOR_INFERENCE {
            return Ok(undetermined(UndeterminedReason::TooFewValid {
                side,
                n_valid: series.values.len(),
                needed: MIN_VALID_FOR_INFERENCE,
            }));
        }
    }

    check_positive(&a.values, "series a values")?;
    check_positive(&b.values, "series b values")?;
    let ratio = SortedSample::new(&a.values, "series a values")?.median()
        / SortedSample::new(&b.values, "series b values")?.median();
    let ci = ratio_ci(&a.values, &b.values, &config.bootstrap);
    let test = mann_whitney_u(&a.values, &b.values)?;
    let mut comparison = Comparison {
        n_valid_a: a.values.len(),
        n_valid_b: b.values.len(),
        ratio: Some(ratio),
        ratio_ci_low: Some(ci.low),
        ratio_ci_high: Some(ci.high),
        u: Some(test.u),
        p: Some(test.p_two_sided),
        test_method: Some(test.method),
        p_holm: Some(test.p_two_sided),
        alpha,
        decided_by_dnf: false,
        verdict: Verdict::NoSignificantDifference,
    };
    comparison.verdict = decide(&comparison);
    Ok(comparison)
}

/// Holm-adjusts the p-values of every tested comparison in `comparisons` as one family (the
/// whole matrix) and re-derives their verdicts. Untested comparisons (DNF-decided or
/// undetermined) are left as they are and do not count towards the family size.
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

/// The verdict of a tested comparison from its Holm p-value and ratio CI (rule 5).
fn decide(c: &Comparison) -> Verdict {
    let (Some(p_holm), Some(ratio), Some(low), Some(high)) =
        (c.p_holm, c.ratio, c.ratio_ci_low, c.ratio_ci_high)
    else {
        return Verdict::NoSignificantDifference;
    };
    let significant = p_holm < c.alpha;
    if significant && ratio < 1.0 && high < 1.0 {
        Verdict::Faster
    } else if significant && ratio > 1.0 && low > 1.0 {
        Verdict::Slower
    } else {
        Verdict::NoSignificantDifference
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::bootstrap::tests::normal_sample;
    use crate::stats::fixtures::assert_close;
    use crate::stats::{holm, mann_whitney_u, ratio_of_medians_ci};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn series(values: &[f64], invalid: usize, dnf: usize) -> SeriesInput {
        SeriesInput {
            values: values.to_vec(),
            invalid,
            dnf,
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
    fn clear_difference_is_faster_one_way_and_slower_the_other() {
        let (fast, slow) = (normal_series(1, 10, 400.0), normal_series(2, 10, 500.0));
        let c = compare(&fast, &slow, &config(9)).unwrap();
        assert_eq!(c.verdict, Verdict::Faster);
        // Every field is what the underlying functions give on the same data.
        let test = mann_whitney_u(&fast.values, &slow.values).unwrap();
        let ci = ratio_of_medians_ci(&fast.values, &slow.values, 0.95, 10_000, 9).unwrap();
        let ratio = crate::stats::median(&fast.values).unwrap()
            / crate::stats::median(&slow.values).unwrap();
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
        assert!(!c.decided_by_dnf);

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
    fn dnf_majority_decides_without_a_test() {
        let finished = series(&[500.0, 510.0, 520.0, 530.0], 0, 1);
        let stuck = series(&[9000.0, 9100.0], 2, 3);
        let c = compare(&stuck, &finished, &config(0)).unwrap();
        assert_eq!(c.verdict, Verdict::Slower);
        assert!(c.decided_by_dnf && c.p.is_none() && c.ratio.is_none() && c.p_holm.is_none());
        let c = compare(&finished, &stuck, &config(0)).unwrap();
        assert_eq!(c.verdict, Verdict::Faster);
        assert!(c.decided_by_dnf);
        let c = compare(&stuck, &stuck, &config(0)).unwrap();
        assert_eq!(
            c.verdict,
            Verdict::Undetermined(UndeterminedReason::BothDnf)
        );
        // A non-DNF side with a single valid run still finished: DNF decides.
        let c = compare(&series(&[700.0], 4, 0), &stuck, &config(0)).unwrap();
        assert_eq!(c.verdict, Verdict::Faster);
    }

    #[test]
    fn too_few_or_no_valid_runs_are_undetermined() {
        let ok = series(&[500.0, 510.0, 520.0], 0, 0);
        let c = compare(&ok, &series(&[400.0, 410.0], 3, 1), &config(0)).unwrap();
        let expected = UndeterminedReason::TooFewValid {
            side: Side::B,
            n_valid: 2,
            needed: 3,
        };
        assert_eq!(c.verdict, Verdict::Undetermined(expected));
        assert_eq!(
            c.verdict.to_string(),
            "undetermined (b has 2 valid runs, 3 needed)"
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
        let dnf = series(&[900.0], 0, 4);
        matrix.push(compare(&dnf, &marginal_b, &config(0)).unwrap());
        let before = matrix.clone();
        apply_holm(&mut matrix).unwrap();

        let tested_p: Vec<f64> = before.iter().filter_map(|c| c.p).collect();
        assert_eq!(
            tested_p.len(),
            10,
            "the DNF-decided comparison is not in the family"
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
        assert_eq!(
            json["verdict"]["undetermined"]["too_few_valid"]["side"],
            "a"
        );
        assert_eq!(serde_json::from_value::<Comparison>(json).unwrap(), c);
        assert_eq!(serde_json::to_value(Verdict::Faster).unwrap(), "faster");
        assert_eq!(
            Verdict::NoSignificantDifference.to_string(),
            "no significant difference"
        );
    }
}
