//! Percentile bootstrap confidence intervals for a median and for a ratio of medians.
//!
//! Deterministic: the only randomness is a ChaCha8 stream seeded with the caller's seed, and
//! resample indices are drawn from its raw 64-bit output with Lemire's unbiased method, so the
//! numbers depend on the seed and this code only (not on `rand`'s sampling internals).
//!
//! Method (as `scipy.stats.bootstrap(method='percentile')`): draw `resamples` resamples of the
//! same size with replacement, compute the statistic of each, and report the type-7 quantiles
//! `(1 − level)/2` and `(1 + level)/2` of those statistics. For a ratio of medians the two
//! samples are resampled independently (unpaired).

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::censored::{extended_quantile, Censored, CensoredSample};
use super::error::{check_finite, check_open_unit, check_positive, StatsError};
use super::sample::quantile_of_sorted;

/// Default number of bootstrap resamples (scipy uses 9 999): the Monte Carlo error of the
/// 2.5 % / 97.5 % endpoints is small next to the sampling error of 10-run series, at about
/// 1 ms per 10-run series in a release build (~10 ms in a debug build).
pub const DEFAULT_RESAMPLES: usize = 10_000;

/// Fewer resamples than this leave the tail quantiles to a handful of draws; rejected.
pub const MIN_RESAMPLES: usize = 100;

/// How to bootstrap: confidence level, number of resamples, seed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapConfig {
    /// Two-sided confidence level, strictly between 0 and 1 (default 0.95).
    pub level: f64,
    pub resamples: usize,
    pub seed: u64,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        Self {
            level: 0.95,
            resamples: DEFAULT_RESAMPLES,
            seed: 0,
        }
    }
}

impl BootstrapConfig {
    /// The same settings with another seed (e.g. one per series, see [`derive_seed`]).
    pub fn with_seed(self, seed: u64) -> Self {
        Self { seed, ..self }
    }

    pub(crate) fn validate(&self) -> Result<(), StatsError> {
        check_open_unit(self.level, "confidence level")?;
        if self.resamples < MIN_RESAMPLES {
            return Err(StatsError::TooFewResamples {
                got: self.resamples,
                min: MIN_RESAMPLES,
                default: DEFAULT_RESAMPLES,
            });
        }
        Ok(())
    }
}

/// A two-sided confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceInterval {
    pub level: f64,
    pub low: f64,
    pub high: f64,
}

impl ConfidenceInterval {
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }

    pub fn width(&self) -> f64 {
        self.high - self.low
    }
}

/// Percentile bootstrap CI of the median of `samples` (`level` e.g. 0.95, `resamples` ≥
/// [`MIN_RESAMPLES`], same `seed` ⇒ same interval).
pub fn bootstrap_median_ci(
    samples: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Result<ConfidenceInterval, StatsError> {
    let config = BootstrapConfig {
        level,
        resamples,
        seed,
    };
    config.validate()?;
    check_finite(samples, "bootstrap sample")?;
    Ok(median_ci(samples, &config))
}

/// Percentile bootstrap CI of `median(a) / median(b)`, resampling `a` and `b` independently.
/// Values must be strictly positive (durations), so every resampled ratio is finite.
pub fn ratio_of_medians_ci(
    a: &[f64],
    b: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Result<ConfidenceInterval, StatsError> {
    let config = BootstrapConfig {
        level,
        resamples,
        seed,
    };
    config.validate()?;
    check_positive(a, "sample a")?;
    check_positive(b, "sample b")?;
    Ok(ratio_ci(a, b, &config))
}

/// [`bootstrap_median_ci`] for input and config already validated by the caller.
pub(crate) fn median_ci(values: &[f64], config: &BootstrapConfig) -> ConfidenceInterval {
    percentile_interval(median_resamples(values, config), config.level)
}

/// `config.resamples` bootstrap draws of the median of `values`, in draw order.
pub(crate) fn median_resamples(values: &[f64], config: &BootstrapConfig) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut resampler = MedianResampler::new(values);
    (0..config.resamples)
        .map(|_| resampler.draw(&mut rng))
        .collect()
}

/// Percentile bootstrap CI of the median of a censored sample: every observation (finished or
/// DNF) is resampled; a resample whose median touches a DNF has a DNF median, and an endpoint
/// that lands on one is DNF. Without DNFs this is exactly [`median_ci`].
pub(crate) fn censored_median_ci(
    sample: &CensoredSample,
    config: &BootstrapConfig,
) -> (Censored, Censored) {
    if sample.dnf() == 0 {
        let ci = median_ci(sample.finished(), config);
        return (Censored::Ms(ci.low), Censored::Ms(ci.high));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut resampler = MedianResampler::new(&sample.observations(f64::INFINITY));
    let mut medians: Vec<f64> = (0..config.resamples)
        .map(|_| resampler.draw(&mut rng))
        .collect();
    medians.sort_by(f64::total_cmp);
    let tail = (1.0 - config.level) / 2.0;
    let at = |p| Censored::from_extended(extended_quantile(&medians, p));
    (at(tail), at(1.0 - tail))
}

/// [`ratio_of_medians_ci`] for input and config already validated by the caller.
pub(crate) fn ratio_ci(a: &[f64], b: &[f64], config: &BootstrapConfig) -> ConfidenceInterval {
    percentile_interval(ratio_resamples(a, b, config), config.level)
}

/// `config.resamples` bootstrap draws of `median(a) / median(b)` (a and b resampled
/// independently), in draw order.
pub(crate) fn ratio_resamples(a: &[f64], b: &[f64], config: &BootstrapConfig) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let (mut resample_a, mut resample_b) = (MedianResampler::new(a), MedianResampler::new(b));
    (0..config.resamples)
        .map(|_| {
            let numerator = resample_a.draw(&mut rng);
            numerator / resample_b.draw(&mut rng)
        })
        .collect()
}

/// A reproducible seed for one named item (series, comparison) of a run seeded with `base`:
/// FNV-1a of the label mixed with `base` through SplitMix64. Stable across versions.
pub fn derive_seed(base: u64, label: &str) -> u64 {
    splitmix64(base ^ splitmix64(fnv1a(label.as_bytes())))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Draws the median of a with-replacement resample without sorting it: count how often each
/// (pre-sorted) value is drawn and walk the counts to the middle rank(s). O(n) per resample.
struct MedianResampler {
    sorted: Vec<f64>,
    counts: Vec<u32>,
}

impl MedianResampler {
    fn new(values: &[f64]) -> Self {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let counts = vec![0; sorted.len()];
        Self { sorted, counts }
    }

    fn draw(&mut self, rng: &mut ChaCha8Rng) -> f64 {
        let n = self.sorted.len();
        self.counts.fill(0);
        for _ in 0..n {
            self.counts[uniform_index(rng, n)] += 1;
        }
        if n % 2 == 1 {
            self.value_at_rank(n / 2)
        } else {
            // A DNF (+∞) among the middle two makes the median +∞.
            (self.value_at_rank(n / 2 - 1) + self.value_at_rank(n / 2)) / 2.0
        }
    }

    /// The value at 0-based `rank` of the resample, in ascending order.
    fn value_at_rank(&self, rank: usize) -> f64 {
        let mut seen = 0usize;
        for (value, &count) in self.sorted.iter().zip(&self.counts) {
            seen += count as usize;
            if seen > rank {
                return *value;
            }
        }
        unreachable!("the counts sum to n > rank")
    }
}

/// Uniform index in `0..n` (n ≥ 1): Lemire's multiply-and-reject, unbiased.
fn uniform_index(rng: &mut ChaCha8Rng, n: usize) -> usize {
    let n = n as u64;
    let threshold = n.wrapping_neg() % n; // 2⁶⁴ mod n
    loop {
        let product = u128::from(rng.next_u64()) * u128::from(n);
        if product as u64 >= threshold {
            return (product >> 64) as usize;
        }
    }
}

pub(crate) fn percentile_interval(mut statistics: Vec<f64>, level: f64) -> ConfidenceInterval {
    statistics.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    ConfidenceInterval {
        level,
        low: quantile_of_sorted(&statistics, tail),
        high: quantile_of_sorted(&statistics, 1.0 - tail),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::support::stats::fixtures;
    use crate::support::stats::sample::median_of_sorted;

    /// `n` draws of Normal(mean, sd) by Box–Muller from a seeded stream.
    pub(crate) fn normal_sample(rng: &mut ChaCha8Rng, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        let unit =
            |rng: &mut ChaCha8Rng| ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        (0..n)
            .map(|_| {
                let (u1, u2) = (unit(rng), unit(rng));
                mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            })
            .collect()
    }

    #[test]
    fn same_seed_same_interval_other_seed_other_draws() {
        let values = fixtures::bootstrap().median.values;
        let first = bootstrap_median_ci(&values, 0.95, 2000, 7).unwrap();
        assert_eq!(first, bootstrap_median_ci(&values, 0.95, 2000, 7).unwrap());
        let a = fixtures::bootstrap().ratio.a;
        let b = fixtures::bootstrap().ratio.b;
        let ratio = ratio_of_medians_ci(&a, &b, 0.95, 2000, 7).unwrap();
        assert_eq!(ratio, ratio_of_medians_ci(&a, &b, 0.95, 2000, 7).unwrap());
        // The ratio's distribution is nearly continuous: another seed moves its endpoints.
        let other = ratio_of_medians_ci(&a, &b, 0.95, 2000, 8).unwrap();
        assert_ne!(ratio, other);
    }

    #[test]
    fn interval_contains_the_median_and_nests_by_level() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for n in [1, 2, 3, 5, 10, 31, 100] {
            let values = normal_sample(&mut rng, n, 500.0, 60.0);
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let ci95 = bootstrap_median_ci(&values, 0.95, 2000, n as u64).unwrap();
            let ci50 = bootstrap_median_ci(&values, 0.50, 2000, n as u64).unwrap();
            assert!(ci95.contains(median_of_sorted(&sorted)), "n={n}: {ci95:?}");
            assert!(ci95.low <= ci50.low && ci50.high <= ci95.high, "n={n}");
            assert!(ci95.low >= sorted[0] && ci95.high <= sorted[n - 1], "n={n}");
        }
    }

    #[test]
    fn degenerate_samples_give_a_point_interval() {
        let one = bootstrap_median_ci(&[412.0], 0.95, 500, 1).unwrap();
        assert_eq!((one.low, one.high), (412.0, 412.0));
        let equal = bootstrap_median_ci(&[3.5; 9], 0.95, 500, 1).unwrap();
        assert_eq!((equal.low, equal.high), (3.5, 3.5));
        let ratio = ratio_of_medians_ci(&[6.0; 4], &[3.0; 5], 0.95, 500, 1).unwrap();
        assert_eq!((ratio.low, ratio.high), (2.0, 2.0));
    }

    #[test]
    fn width_shrinks_as_the_sample_grows() {
        // A single small sample can happen to be tight, so average 10 series per size.
        // Theory: width ∝ 1/√n, so each 4× step should roughly halve the mean width.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mean_widths: Vec<f64> = [8, 32, 128, 512]
            .iter()
            .map(|&n| {
                let total: f64 = (0..10)
                    .map(|rep| {
                        let values = normal_sample(&mut rng, n, 100.0, 10.0);
                        bootstrap_median_ci(&values, 0.95, 500, rep)
                            .unwrap()
                            .width()
                    })
                    .sum();
                total / 10.0
            })
            .collect();
        for pair in mean_widths.windows(2) {
            let shrink = pair[1] / pair[0];
            assert!((0.3..0.75).contains(&shrink), "mean widths {mean_widths:?}");
        }
    }

    #[test]
    fn coverage_is_close_to_nominal_on_normal_data() {
        // 400 simulated series of 25 draws from Normal(100, 10) (true median 100). The whole
        // simulation is seeded, so the outcome is fixed; the margin is what a correct
        // percentile bootstrap of the median is expected to reach (≈ 0.93–0.96 at n = 25),
        // while a wrong tail quantile or a broken resampler lands far outside it.
        let mut rng = ChaCha8Rng::seed_from_u64(2024);
        let reps = 400;
        let covered = (0..reps)
            .filter(|&rep| {
                let values = normal_sample(&mut rng, 25, 100.0, 10.0);
                bootstrap_median_ci(&values, 0.95, 500, rep)
                    .unwrap()
                    .contains(100.0)
            })
            .count();
        let coverage = covered as f64 / reps as f64;
        assert!((0.90..=0.985).contains(&coverage), "coverage {coverage}");
    }

    #[test]
    fn bootstrap_distribution_of_the_median_matches_the_exact_binomial_law() {
        // For odd n with distinct values, P(median* ≤ x₍ₖ₎) = P(Bin(n, k/n) ≥ (n+1)/2)
        // (computed with scipy in the fixture). 20 000 resamples: standard error ≤ 0.0036.
        let fixture = fixtures::bootstrap().median;
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let mut resampler = MedianResampler::new(&fixture.values);
        let draws = 20_000;
        let mut at_or_below = vec![0usize; fixture.sorted.len()];
        for _ in 0..draws {
            let m = resampler.draw(&mut rng);
            let k = fixture
                .sorted
                .iter()
                .position(|&v| v == m)
                .expect("odd n: a data value");
            at_or_below[k] += 1;
        }
        let mut cumulative = 0;
        for (k, exact) in fixture.exact_bootstrap_cdf.iter().enumerate() {
            cumulative += at_or_below[k];
            let empirical = cumulative as f64 / draws as f64;
            assert!(
                (empirical - exact).abs() < 0.015,
                "k={k}: {empirical} vs {exact}"
            );
        }
    }

    #[test]
    fn median_interval_agrees_with_scipy_percentile_bootstrap() {
        // scipy's 10 seeds all give the same order statistics; ours must land on the same or
        // an adjacent order statistic (the bootstrap distribution of an odd-n median lives on
        // the data points).
        let fixture = fixtures::bootstrap();
        let reference = fixture.median;
        let ci = bootstrap_median_ci(&reference.values, 0.95, fixture.n_resamples, 1).unwrap();
        let rank = |x: f64| reference.sorted.iter().position(|&v| v == x);
        for (ours, scipy) in [
            (ci.low, &reference.scipy_low),
            (ci.high, &reference.scipy_high),
        ] {
            let ours_rank = rank(ours).expect("an endpoint of an odd-n median CI is a data value");
            for s in scipy {
                let scipy_rank = rank(*s).expect("scipy endpoint is a data value");
                assert!(
                    ours_rank.abs_diff(scipy_rank) <= 1,
                    "ours {ours}, scipy {s}"
                );
            }
        }
        assert!(ci.contains(reference.median));
    }

    #[test]
    fn ratio_interval_agrees_with_scipy_percentile_bootstrap() {
        // Tolerance: scipy's own spread over its 10 seeds, widened 2× and by 0.2 % of the value
        // (two independent random streams of 20 000 draws each).
        let fixture = fixtures::bootstrap();
        let reference = fixture.ratio;
        let ci =
            ratio_of_medians_ci(&reference.a, &reference.b, 0.95, fixture.n_resamples, 1).unwrap();
        for (ours, scipy) in [
            (ci.low, &reference.scipy_low),
            (ci.high, &reference.scipy_high),
        ] {
            let lo = scipy.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = scipy.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let margin = 2.0 * (hi - lo) + 0.002 * ours;
            assert!(
                ours >= lo - margin && ours <= hi + margin,
                "ours {ours}, scipy {lo}..{hi}"
            );
        }
        assert!(ci.contains(reference.ratio));
    }

    #[test]
    fn rejects_bad_levels_resample_counts_and_values() {
        for level in [0.0, 1.0, -0.5, f64::NAN] {
            let err = bootstrap_median_ci(&[1.0, 2.0], level, 1000, 0).unwrap_err();
            assert!(err.to_string().contains("confidence level"), "{err}");
        }
        let err = bootstrap_median_ci(&[1.0, 2.0], 0.95, 10, 0).unwrap_err();
        assert!(
            matches!(err, StatsError::TooFewResamples { got: 10, .. }),
            "{err}"
        );
        let err = bootstrap_median_ci(&[1.0, f64::NAN], 0.95, 1000, 0).unwrap_err();
        assert!(
            matches!(err, StatsError::NonFinite { index: 1, .. }),
            "{err}"
        );
        assert!(bootstrap_median_ci(&[], 0.95, 1000, 0).is_err());
        let err = ratio_of_medians_ci(&[1.0, 2.0], &[0.0, 3.0], 0.95, 1000, 0).unwrap_err();
        assert!(err.to_string().contains("sample b[0] is 0"), "{err}");
        assert!(ratio_of_medians_ci(&[-1.0], &[1.0], 0.95, 1000, 0).is_err());
    }

    #[test]
    fn uniform_index_is_unbiased_and_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut counts = [0usize; 3];
        for _ in 0..30_000 {
            counts[uniform_index(&mut rng, 3)] += 1;
        }
        // Expected 10 000 each, standard deviation ≈ 82.
        assert!(
            counts.iter().all(|&c| c.abs_diff(10_000) < 400),
            "{counts:?}"
        );
        assert!((0..1000).all(|_| uniform_index(&mut rng, 1) == 0));
    }

    #[test]
    fn derived_seeds_are_stable_and_distinct() {
        // Published test vectors: FNV-1a("a"), and SplitMix64's first output from state 0.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        let labels = ["wired/page50/h2", "wired/page50/h3", "mobile/page50/h2"];
        let seeds: Vec<u64> = labels.iter().map(|l| derive_seed(42, l)).collect();
        assert!(seeds[0] != seeds[1] && seeds[1] != seeds[2] && seeds[0] != seeds[2]);
        assert_ne!(derive_seed(42, labels[0]), derive_seed(43, labels[0]));
        assert_eq!(derive_seed(42, labels[0]), seeds[0]);
    }
}
