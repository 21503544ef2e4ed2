//! The two-sided Mann-Whitney U test, matching `scipy.stats.mannwhitneyu(a, b,
//! alternative='two-sided')` with its defaults (scipy 1.17: `method='auto'`,
//! `use_continuity=True`).
//!
//! - Reported statistic: U of the first sample, `U_a = R_a − n_a(n_a+1)/2` with average ranks
//!   for ties (scipy's `statistic`). `U_b = n_a·n_b − U_a`.
//! - Method `auto`: the exact null distribution when at least one sample has ≤ 8 values and
//!   the pooled sample has no ties; otherwise the normal approximation with tie correction and
//!   continuity correction. p is computed from `U = max(U_a, U_b)` and clipped to 1.

use serde::{Deserialize, Serialize};
use statrs::function::erf::{erf, erfc};

use super::error::{check_finite, StatsError};

/// Which null distribution produced the p-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MwuMethod {
    /// Exact distribution of U (no ties, a sample of ≤ 8 values).
    Exact,
    /// Normal approximation with tie and continuity correction.
    Asymptotic,
}

/// Result of [`mann_whitney_u`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U statistic of the first sample (`a`), as scipy reports it.
    pub u: f64,
    pub p_two_sided: f64,
    pub method: MwuMethod,
}

/// scipy's `auto` rule: exact only when a sample is small (≤ 8) and nothing is tied.
const EXACT_MAX_SMALLER_SAMPLE: usize = 8;

/// Two-sided Mann-Whitney U test of `a` against `b` (see the module docs for the exact rules).
/// Errors on empty or non-finite input.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Result<MannWhitney, StatsError> {
    check_finite(a, "sample a")?;
    check_finite(b, "sample b")?;
    let (n1, n2) = (a.len(), b.len());
    let ranks = RankSums::of(a, b);
    let u1 = ranks.rank_sum_a - (n1 * (n1 + 1)) as f64 / 2.0;
    let u2 = (n1 * n2) as f64 - u1;
    let u = u1.max(u2);
    let method = choose_method(n1, n2, ranks.has_ties);
    let p = match method {
        // Without ties all ranks are integers, so `u` is an exact integer.
        MwuMethod::Exact => exact_p(n1, n2, u as usize),
        MwuMethod::Asymptotic => asymptotic_p(n1, n2, u, ranks.tie_term),
    };
    Ok(MannWhitney {
        u: u1,
        p_two_sided: p,
        method,
    })
}

/// The smallest two-sided p-value the test can produce for samples of these sizes (complete
/// separation, no ties). Useful to warn that a multiple-comparison threshold is out of reach
/// (e.g. n = 5 vs 5 cannot go below 2/252 ≈ 0.0079).
pub fn smallest_attainable_p(n_a: usize, n_b: usize) -> f64 {
    if n_a == 0 || n_b == 0 {
        return 1.0;
    }
    let u = n_a * n_b;
    match choose_method(n_a, n_b, false) {
        MwuMethod::Exact => exact_p(n_a, n_b, u),
        MwuMethod::Asymptotic => asymptotic_p(n_a, n_b, u as f64, 0.0),
    }
}

fn choose_method(n1: usize, n2: usize, has_ties: bool) -> MwuMethod {
    let both_large = n1 > EXACT_MAX_SMALLER_SAMPLE && n2 > EXACT_MAX_SMALLER_SAMPLE;
    if both_large || has_ties {
        MwuMethod::Asymptotic
    } else {
        MwuMethod::Exact
    }
}

/// Average ranks of the pooled sample, summed over `a`, plus the tie information.
struct RankSums {
    rank_sum_a: f64,
    has_ties: bool,
    /// Σ (t³ − t) over groups of t tied values.
    tie_term: f64,
}

impl RankSums {
    fn of(a: &[f64], b: &[f64]) -> Self {
        let mut pooled: Vec<(f64, bool)> = a
            .iter()
            .map(|&v| (v, true))
            .chain(b.iter().map(|&v| (v, false)))
            .collect();
        pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut rank_sum_a = 0.0;
        let mut tie_term = 0.0;
        let mut start = 0;
        while start < pooled.len() {
            // `==` (not total order) groups -0.0 with 0.0, as numpy does.
            let end = start
                + pooled[start..]
                    .iter()
                    .take_while(|(v, _)| *v == pooled[start].0)
                    .count();
            // 1-based ranks start+1 ..= end share their average.
            let average_rank = (start + 1 + end) as f64 / 2.0;
            let in_a = pooled[start..end]
                .iter()
                .filter(|(_, from_a)| *from_a)
                .count();
            rank_sum_a += average_rank * in_a as f64;
            let t = (end - start) as f64;
            tie_term += t * t * t - t;
            start = end;
        }
        Self {
            rank_sum_a,
            has_ties: tie_term > 0.0,
            tie_term,
        }
    }
}

/// Exact two-sided p for `u ≥ n1·n2/2`: `2·P(U ≥ u) = 2·P(U ≤ n1·n2 − u)`, clipped to 1.
fn exact_p(n1: usize, n2: usize, u: usize) -> f64 {
    let counts = u_null_counts(n1, n2);
    let total: f64 = counts.iter().sum();
    let lower_tail: f64 = counts[..=(n1 * n2 - u)].iter().sum();
    (2.0 * lower_tail / total).min(1.0)
}

/// Number of rank arrangements giving U = 0, 1, …, n1·n2 under the null hypothesis: the
/// coefficients of the Gaussian binomial ∏ᵢ₌₁..ₘ (1 − qⁿ⁺ⁱ)/(1 − qⁱ), m = min(n1, n2).
/// O(m²·n) additions. Counts are exact while they stay below 2⁵³ (e.g. every case with
/// m ≤ 8 and n ≤ 90); beyond that they are rounded like any f64, as scipy's own fallback is.
fn u_null_counts(n1: usize, n2: usize) -> Vec<f64> {
    let (m, n) = (n1.min(n2), n1.max(n2));
    let len = m * n + 1;
    let mut c = vec![0.0; len];
    c[0] = 1.0;
    for i in 1..=m {
        // Multiply by (1 − q^(n+i)) …
        let shift = n + i;
        for k in (shift..len).rev() {
            c[k] -= c[k - shift];
        }
        // … then divide by (1 − q^i) (exact: the product is divisible).
        for k in i..len {
            c[k] += c[k - i];
        }
    }
    c
}

/// Normal approximation with tie correction and continuity correction, for `u ≥ n1·n2/2`.
fn asymptotic_p(n1: usize, n2: usize, u: f64, tie_term: f64) -> f64 {
    let product = (n1 * n2) as f64;
    let mu = product / 2.0;
    let n = (n1 + n2) as f64;
    let variance = product / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if variance.is_nan() || variance <= 0.0 {
        // Every pooled value is equal: U sits at its mean, there is no evidence of a
        // difference (scipy reaches the same p = 1 through z = −∞).
        return 1.0;
    }
    let z = (u - mu - 0.5) / variance.sqrt();
    (2.0 * standard_normal_cdf(-z)).clamp(0.0, 1.0)
}

/// Φ(a), evaluated as Cephes' `ndtr` (erf near 0, erfc in the tails for accuracy).
fn standard_normal_cdf(a: f64) -> f64 {
    let x = a * std::f64::consts::FRAC_1_SQRT_2;
    let z = x.abs();
    if z < std::f64::consts::FRAC_1_SQRT_2 {
        0.5 + 0.5 * erf(x)
    } else {
        let tail = 0.5 * erfc(z);
        if x > 0.0 {
            1.0 - tail
        } else {
            tail
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::fixtures::{self, assert_close};

    fn method_name(m: MwuMethod) -> &'static str {
        match m {
            MwuMethod::Exact => "exact",
            MwuMethod::Asymptotic => "asymptotic",
        }
    }

    #[test]
    fn matches_scipy_on_every_fixture_case() {
        let fixture = fixtures::mann_whitney();
        assert!(fixture.cases.len() >= 15);
        for case in &fixture.cases {
            let got = mann_whitney_u(&case.a, &case.b).unwrap();
            let name = &case.name;
            assert_eq!(got.u, case.u, "{name}: U");
            assert_eq!(method_name(got.method), case.method, "{name}: method");
            assert_close(got.p_two_sided, case.p, 1e-10, &format!("{name}: p"));
        }
    }

    #[test]
    fn both_null_distributions_match_scipy_when_forced() {
        // Each case also checks the path `auto` did not pick, so both formulas are exercised
        // on ties, small and large samples alike.
        for case in &fixtures::mann_whitney().cases {
            let (n1, n2) = (case.a.len(), case.b.len());
            let ranks = RankSums::of(&case.a, &case.b);
            let u1 = ranks.rank_sum_a - (n1 * (n1 + 1)) as f64 / 2.0;
            let u = u1.max((n1 * n2) as f64 - u1);
            let asym = asymptotic_p(n1, n2, u, ranks.tie_term);
            assert_close(
                asym,
                case.p_asymptotic,
                1e-10,
                &format!("{}: asymptotic", case.name),
            );
            if !ranks.has_ties {
                let exact = exact_p(n1, n2, u as usize);
                assert_close(exact, case.p_exact, 1e-10, &format!("{}: exact", case.name));
            }
        }
    }

    #[test]
    fn swapping_the_samples_mirrors_u_and_keeps_p() {
        for case in &fixtures::mann_whitney().cases {
            let ab = mann_whitney_u(&case.a, &case.b).unwrap();
            let ba = mann_whitney_u(&case.b, &case.a).unwrap();
            let product = (case.a.len() * case.b.len()) as f64;
            assert_eq!(ab.u + ba.u, product, "{}", case.name);
            assert_eq!(ab.p_two_sided, ba.p_two_sided, "{}", case.name);
        }
    }

    #[test]
    fn null_counts_are_the_binomial_partition_of_all_arrangements() {
        // Σ counts = C(n1+n2, n1); symmetric around n1·n2/2; small table checked by hand:
        // n1 = 2, n2 = 3 → U = 0..6 has 1,1,2,2,2,1,1 arrangements.
        assert_eq!(u_null_counts(2, 3), vec![1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0]);
        let c = u_null_counts(8, 12);
        assert_eq!(c.iter().sum::<f64>(), 125_970.0); // C(20, 8)
        for k in 0..c.len() {
            assert_eq!(c[k], c[c.len() - 1 - k]);
        }
    }

    #[test]
    fn smallest_attainable_p_is_complete_separation() {
        assert_close(smallest_attainable_p(5, 5), 2.0 / 252.0, 1e-12, "5 vs 5");
        assert_close(smallest_attainable_p(3, 3), 0.1, 1e-12, "3 vs 3");
        let separated: Vec<f64> = (1..=20).map(f64::from).collect();
        let p = mann_whitney_u(&separated[..10], &separated[10..])
            .unwrap()
            .p_two_sided;
        assert_eq!(smallest_attainable_p(10, 10), p);
        assert_eq!(smallest_attainable_p(0, 4), 1.0);
    }

    #[test]
    fn rejects_nan_and_empty_samples() {
        let err = mann_whitney_u(&[1.0, 2.0], &[3.0, f64::NAN]).unwrap_err();
        assert!(err.to_string().contains("sample b[1] is NaN"), "{err}");
        let err = mann_whitney_u(&[], &[1.0]).unwrap_err();
        assert_eq!(
            err,
            StatsError::Empty {
                what: "sample a".into()
            }
        );
        assert!(mann_whitney_u(&[1.0], &[f64::NEG_INFINITY]).is_err());
    }
}
