//! The Hodges–Lehmann shift of two samples with its distribution-free confidence interval
//! (Moses' method): an effect size in the samples' own unit (ms), beside the ratio of medians.
//!
//! - Estimate: the median (numpy's: the mean of the middle two for an even count) of all
//!   `m·n` pairwise differences `a_i − b_j`. Positive means a is later (slower) than b.
//! - CI at `level`: the order statistics `d_(K)` and `d_(mn+1−K)` (1-based) of the sorted
//!   differences, where `K = ⌊mn/2 − z·√(mn(m+n+1)/12)⌋` and `z` is the standard normal
//!   quantile at `1 − (1 − level)/2`: the Mann–Whitney U test's critical value from the
//!   normal approximation of U's distribution, without tie or continuity correction (ties
//!   make U's variance smaller, so the interval is, if anything, a little wide). `K < 1` (e.g.
//!   3 against 3 at 95 %): the samples are too small for an interval, which is then `None`.
//!
//! Censored values (DNF) have no place here: a difference with a DNF is only bounded. The
//! caller decides what to do with them (`compare` gives no shift when a side has a DNF).

use serde::{Deserialize, Serialize};
use statrs::function::erf::erfc_inv;

use super::error::{check_finite, check_open_unit, StatsError};
use super::sample::median_of_sorted;

/// The Hodges–Lehmann shift `a − b` and its CI.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Shift {
    /// Median of the pairwise differences `a_i − b_j`.
    pub estimate: f64,
    /// The interval at `level` (`None` when the samples are too small for one).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub level: f64,
    /// `K`: the interval's 1-based order statistics are `K` and `m·n + 1 − K` (0: none).
    pub rank: usize,
}

/// The Hodges–Lehmann shift of `a` against `b` with Moses' CI at `level` (see the module
/// docs). Errors on empty or non-finite input and on a level outside (0, 1).
pub fn hodges_lehmann(a: &[f64], b: &[f64], level: f64) -> Result<Shift, StatsError> {
    check_finite(a, "sample a")?;
    check_finite(b, "sample b")?;
    check_open_unit(level, "confidence level")?;
    let mut diffs: Vec<f64> = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| x - y))
        .collect();
    diffs.sort_by(f64::total_cmp);
    let rank = moses_rank(a.len(), b.len(), level);
    let n = diffs.len();
    let (ci_low, ci_high) = if rank >= 1 {
        (Some(diffs[rank - 1]), Some(diffs[n - rank]))
    } else {
        (None, None)
    };
    Ok(Shift {
        estimate: median_of_sorted(&diffs),
        ci_low,
        ci_high,
        level,
        rank,
    })
}

/// `K = ⌊mn/2 − z·√(mn(m+n+1)/12)⌋`, 0 when that is below 1.
fn moses_rank(m: usize, n: usize, level: f64) -> usize {
    let (m, n) = (m as f64, n as f64);
    let z = normal_upper_quantile((1.0 - level) / 2.0);
    let k = (m * n / 2.0 - z * (m * n * (m + n + 1.0) / 12.0).sqrt()).floor();
    if k >= 1.0 {
        k as usize
    } else {
        0
    }
}

/// The standard normal `z` with `P(Z > z) = tail`.
fn normal_upper_quantile(tail: f64) -> f64 {
    std::f64::consts::SQRT_2 * erfc_inv(2.0 * tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::fixtures::{self, assert_close};

    #[test]
    fn matches_numpy_and_scipy_on_every_fixture_case() {
        let fixture = fixtures::hodges_lehmann();
        assert!(fixture.cases.len() >= 5);
        for c in &fixture.cases {
            let s = hodges_lehmann(&c.a, &c.b, c.level).unwrap();
            assert_close(
                s.estimate,
                c.estimate,
                1e-12,
                &format!("{} estimate", c.name),
            );
            assert_eq!(s.rank, c.rank, "{} rank", c.name);
            match (s.ci_low, s.ci_high, c.ci_low, c.ci_high) {
                (Some(lo), Some(hi), Some(want_lo), Some(want_hi)) => {
                    assert_close(lo, want_lo, 1e-12, &format!("{} low", c.name));
                    assert_close(hi, want_hi, 1e-12, &format!("{} high", c.name));
                }
                (None, None, None, None) => {}
                got => panic!("{}: {got:?}", c.name),
            }
        }
    }

    #[test]
    fn the_normal_quantile_is_scipys() {
        // scipy.stats.norm.ppf(0.975), norm.ppf(0.995)
        assert_close(
            normal_upper_quantile(0.025),
            1.959963984540054,
            1e-14,
            "z 95 %",
        );
        assert_close(
            normal_upper_quantile(0.005),
            2.5758293035489004,
            1e-14,
            "z 99 %",
        );
    }

    #[test]
    fn a_pure_shift_is_recovered_and_its_interval_holds_it() {
        let b: Vec<f64> = (0..10).map(|i| 100.0 + 7.0 * i as f64).collect();
        let a: Vec<f64> = b.iter().map(|x| x + 12.0).collect();
        let s = hodges_lehmann(&a, &b, 0.95).unwrap();
        assert_eq!(s.estimate, 12.0);
        assert_eq!(s.rank, 24);
        assert!(
            s.ci_low.unwrap() < 12.0 && s.ci_high.unwrap() > 12.0,
            "{s:?}"
        );
        // Swapping the samples negates the shift and mirrors the interval.
        let r = hodges_lehmann(&b, &a, 0.95).unwrap();
        assert_eq!(r.estimate, -12.0);
        assert_eq!(
            (r.ci_low, r.ci_high),
            (s.ci_high.map(|x| -x), s.ci_low.map(|x| -x))
        );
    }

    #[test]
    fn small_samples_get_no_interval_and_bad_input_is_refused() {
        let s = hodges_lehmann(&[1.0, 2.0, 3.0], &[1.5, 2.5, 3.5], 0.95).unwrap();
        assert_eq!((s.rank, s.ci_low, s.ci_high), (0, None, None));
        assert_eq!(s.estimate, -0.5);
        assert_eq!(moses_rank(4, 4, 0.95), 1);
        assert!(matches!(
            hodges_lehmann(&[], &[1.0], 0.95),
            Err(StatsError::Empty { .. })
        ));
        assert!(matches!(
            hodges_lehmann(&[1.0, f64::NAN], &[1.0], 0.95),
            Err(StatsError::NonFinite { index: 1, .. })
        ));
        assert!(hodges_lehmann(&[1.0], &[1.0], 1.0).is_err());
    }
}
