//! Equivalence of two samples' medians: two one-sided tests (TOST) on the ratio of medians,
//! by the bootstrap. "Equivalent within ±m" means both null hypotheses — the ratio is at most
//! 1 − m, the ratio is at least 1 + m — are rejected at α; the 1 − 2α percentile interval of the
//! ratio then lies inside (1 − m, 1 + m). To call several pairs equivalent at once, each must
//! pass on its own (an intersection–union test needs no multiplicity correction).

use serde::{Deserialize, Serialize};

use super::bootstrap::{median_resamples, percentile_interval, ratio_resamples, BootstrapConfig};
use super::error::{check_positive, StatsError};
use super::ConfidenceInterval;

/// What the TOST found for one pair of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Equivalence {
    /// median(a) / median(b), or for pairs the median of a / b.
    pub ratio: f64,
    /// The ratio's 1 − 2α percentile interval (90 % at α = 0.05).
    pub ci: ConfidenceInterval,
    /// The margin m: equivalent means the ratio is within (1 − m, 1 + m).
    pub margin: f64,
    /// The larger of the two one-sided bootstrap p-values.
    pub p: f64,
    pub alpha: f64,
    pub equivalent: bool,
}

/// TOST of `median(a) / median(b)` against ±`margin` at `alpha`, with `config`'s resamples and
/// seed (its level is ignored: the interval reported is the 1 − 2α one). Durations: strictly
/// positive, finite.
pub fn ratio_equivalence(
    a: &[f64],
    b: &[f64],
    margin: f64,
    alpha: f64,
    config: BootstrapConfig,
) -> Result<Equivalence, StatsError> {
    check_positive(a, "sample a")?;
    check_positive(b, "sample b")?;
    let config = checked(margin, alpha, config)?;
    let ratios = ratio_resamples(a, b, &config);
    let ratio = super::median(a)? / super::median(b)?;
    Ok(judge(ratio, ratios, margin, alpha, config.level))
}

/// TOST of the median of `a[i] / b[i]` over pairs measured alike (the same draws, the same
/// round), resampling the pairs: far more sensitive than [`ratio_equivalence`] when the pairs'
/// common conditions explain most of the spread.
pub fn paired_ratio_equivalence(
    pairs: &[(f64, f64)],
    margin: f64,
    alpha: f64,
    config: BootstrapConfig,
) -> Result<Equivalence, StatsError> {
    let (a, b): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    check_positive(&a, "sample a")?;
    check_positive(&b, "sample b")?;
    let config = checked(margin, alpha, config)?;
    let ratios: Vec<f64> = pairs.iter().map(|(x, y)| x / y).collect();
    let medians = median_resamples(&ratios, &config);
    Ok(judge(
        super::median(&ratios)?,
        medians,
        margin,
        alpha,
        config.level,
    ))
}

/// The margin and α checked, and the config at the 1 − 2α level.
fn checked(
    margin: f64,
    alpha: f64,
    config: BootstrapConfig,
) -> Result<BootstrapConfig, StatsError> {
    for (what, v) in [
        ("equivalence margin", margin),
        ("equivalence alpha × 2", 2.0 * alpha),
    ] {
        if !(v > 0.0 && v < 1.0) {
            return Err(StatsError::OpenUnitIntervalRequired { what, value: v });
        }
    }
    let config = BootstrapConfig {
        level: 1.0 - 2.0 * alpha,
        ..config
    };
    config.validate()?;
    Ok(config)
}

/// The two one-sided bootstrap p-values from the statistic's resamples, and the verdict.
fn judge(ratio: f64, resamples: Vec<f64>, margin: f64, alpha: f64, level: f64) -> Equivalence {
    let n = resamples.len() as f64;
    // (count + 1) / (n + 1): a bootstrap p-value is never 0.
    let share = |f: &dyn Fn(f64) -> bool| {
        (resamples.iter().filter(|r| f(**r)).count() as f64 + 1.0) / (n + 1.0)
    };
    let p = share(&|r| r <= 1.0 - margin).max(share(&|r| r >= 1.0 + margin));
    Equivalence {
        ratio,
        ci: percentile_interval(resamples, level),
        margin,
        p,
        alpha,
        equivalent: p < alpha,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BootstrapConfig {
        BootstrapConfig {
            resamples: 4000,
            seed: 7,
            ..BootstrapConfig::default()
        }
    }

    /// `n` values around `center`, spread ±`spread` (deterministic).
    fn around(center: f64, spread: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| center + spread * (((i * 37) % n) as f64 / n as f64 - 0.5))
            .collect()
    }

    #[test]
    fn tight_equal_samples_are_equivalent_and_a_shifted_or_noisy_one_is_not() {
        let a = around(1000.0, 20.0, 20);
        let e = ratio_equivalence(&a, &around(1000.0, 20.0, 20), 0.05, 0.05, config()).unwrap();
        assert!(e.equivalent && e.p < 0.05, "{e:?}");
        assert!(e.ci.low > 0.95 && e.ci.high < 1.05, "{e:?}");
        assert!((e.ci.level - 0.9).abs() < 1e-12);
        // 8 % slower: not equivalent within ±5 %.
        let slower =
            ratio_equivalence(&around(1080.0, 20.0, 20), &a, 0.05, 0.05, config()).unwrap();
        assert!(!slower.equivalent && slower.ratio > 1.05, "{slower:?}");
        // Same median, far too noisy to tell: not equivalent either.
        let noisy = ratio_equivalence(&around(1000.0, 900.0, 6), &a, 0.05, 0.05, config()).unwrap();
        assert!(!noisy.equivalent, "{noisy:?}");
    }

    #[test]
    fn pairs_that_share_their_conditions_are_judged_on_their_ratios() {
        // Runs spread ±40 % by their draws, each pair within 1 % of each other: unpaired, the
        // spread hides any answer; paired, they are equivalent.
        let serial: Vec<f64> = (0..12).map(|i| 1000.0 * (0.6 + 0.07 * i as f64)).collect();
        let pairs: Vec<(f64, f64)> = serial
            .iter()
            .enumerate()
            .map(|(i, s)| (s * (1.0 + 0.01 * ((i % 3) as f64 - 1.0)), *s))
            .collect();
        let (a, b): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
        assert!(
            !ratio_equivalence(&a, &b, 0.05, 0.05, config())
                .unwrap()
                .equivalent
        );
        let paired = paired_ratio_equivalence(&pairs, 0.05, 0.05, config()).unwrap();
        assert!(
            paired.equivalent && (paired.ratio - 1.0).abs() < 0.011,
            "{paired:?}"
        );
        let slower: Vec<(f64, f64)> = pairs.iter().map(|(x, y)| (x * 1.1, *y)).collect();
        assert!(
            !paired_ratio_equivalence(&slower, 0.05, 0.05, config())
                .unwrap()
                .equivalent
        );
    }

    #[test]
    fn bad_input_is_refused() {
        let a = [1.0, 2.0, 3.0];
        assert!(ratio_equivalence(&a, &[], 0.05, 0.05, config()).is_err());
        assert!(ratio_equivalence(&a, &[0.0, 1.0], 0.05, 0.05, config()).is_err());
        assert!(ratio_equivalence(&a, &a, 0.0, 0.05, config()).is_err());
        assert!(ratio_equivalence(&a, &a, 0.05, 0.6, config()).is_err());
    }
}
