//! One series (one protocol in one profile × workload cell): what its runs say.
//!
//! Rules:
//! 1. **Invalid runs are excluded entirely.** They are measurement failures (wrong protocol on
//!    the wire, short body, a link that did not deliver the profile…), not outcomes of the
//!    protocol; they are only counted (`n_invalid`).
//! 2. **DNF runs are censored observations**, not dropped: a run that did not finish within the
//!    timeout is slower than every finished run, and DNFs tie with each other (see
//!    [`super::censored`]). The quartiles, the median and its bootstrap CI are taken over the
//!    finished and DNF runs together; any of them that lands on (or interpolates towards) a DNF
//!    is reported as DNF, e.g. the median of 5 finished + 5 DNF runs.
//! 3. A confidence interval needs at least [`MIN_RUNS_FOR_INFERENCE`] observations.
//! 4. No observation at all (every run invalid, or none ran): every number is `None`.

use serde::{Deserialize, Serialize};

use super::bootstrap::{censored_median_ci, BootstrapConfig};
use super::censored::{Censored, CensoredSample};
use super::error::StatsError;

/// Below this many observations (finished + DNF) a series gets no confidence interval and a
/// comparison no test: a bootstrap of 1–2 values says nothing about the population.
pub const MIN_RUNS_FOR_INFERENCE: usize = 3;

/// The outcomes of one series' runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SeriesInput {
    /// The measured value (ms) of every valid, finished run.
    pub values: Vec<f64>,
    /// Runs rejected as measurement failures.
    pub invalid: usize,
    /// Runs that did not finish within the timeout.
    pub dnf: usize,
    /// What a DNF stands for in ranks and ratios: the timeout (ms), above every finished run.
    pub censor_at: f64,
}

impl SeriesInput {
    /// Finished and DNF runs.
    pub fn observations(&self) -> usize {
        self.values.len() + self.dnf
    }

    pub(crate) fn sample(&self, what: &str) -> Result<CensoredSample, StatsError> {
        CensoredSample::new(&self.values, self.dnf, self.censor_at, what)
    }
}

/// What a series reports (see the module docs for when the numbers are `None` or DNF).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    pub n_valid: usize,
    pub n_invalid: usize,
    pub n_dnf: usize,
    pub median: Option<Censored>,
    pub q1: Option<Censored>,
    pub q3: Option<Censored>,
    /// `q3 − q1`; `None` when q3 is a DNF.
    pub iqr: Option<f64>,
    pub min: Option<Censored>,
    pub max: Option<Censored>,
    /// Bootstrap CI of the median at the configured level (`None` below
    /// [`MIN_RUNS_FOR_INFERENCE`] observations).
    pub ci_low: Option<Censored>,
    pub ci_high: Option<Censored>,
}

#[cfg(test)]
impl SeriesSummary {
    /// `n` valid observations with this median and nothing else: the base of tests that read
    /// medians only.
    pub(crate) fn median_only(n: usize, ms: f64) -> SeriesSummary {
        SeriesSummary {
            median: Some(Censored::Ms(ms)),
            ..SeriesSummary::counts_only(n, 0, 0)
        }
    }
}

impl SeriesSummary {
    /// The counts of a series and no statistic yet.
    fn counts_only(n_valid: usize, n_invalid: usize, n_dnf: usize) -> SeriesSummary {
        SeriesSummary {
            n_valid,
            n_invalid,
            n_dnf,
            median: None,
            q1: None,
            q3: None,
            iqr: None,
            min: None,
            max: None,
            ci_low: None,
            ci_high: None,
        }
    }

    /// True when the median is a DNF: at least half of the series' observations did not finish
    /// (an even count's median averages the middle two, so 5 DNFs of 10 already make it one).
    pub fn median_is_dnf(&self) -> bool {
        self.median.is_some_and(Censored::is_dnf)
    }
}

/// Summarizes one series. Errors on a non-finite value (naming its index in `values`), on a
/// finished value not below the timeout in a series with DNFs, or on an invalid bootstrap
/// configuration.
pub fn summarize(
    input: &SeriesInput,
    bootstrap: &BootstrapConfig,
) -> Result<SeriesSummary, StatsError> {
    bootstrap.validate()?;
    let mut summary = SeriesSummary::counts_only(input.values.len(), input.invalid, input.dnf);
    if input.observations() == 0 {
        return Ok(summary);
    }
    let sample = input.sample("series values")?;
    let (q1, q3) = (sample.quantile(0.25), sample.quantile(0.75));
    summary.median = Some(sample.median());
    summary.q1 = Some(q1);
    summary.q3 = Some(q3);
    summary.iqr = q1.ms().zip(q3.ms()).map(|(a, b)| b - a);
    summary.min = Some(sample.min());
    summary.max = Some(sample.max());
    if sample.len() >= MIN_RUNS_FOR_INFERENCE {
        let (low, high) = censored_median_ci(&sample, bootstrap);
        summary.ci_low = Some(low);
        summary.ci_high = Some(high);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::fixtures;

    fn input(values: &[f64], invalid: usize, dnf: usize) -> SeriesInput {
        SeriesInput {
            values: values.to_vec(),
            invalid,
            dnf,
            censor_at: 120_000.0,
        }
    }

    fn ms(v: f64) -> Option<Censored> {
        Some(Censored::Ms(v))
    }

    #[test]
    fn numbers_match_numpy_and_the_bootstrap_ci() {
        let case = fixtures::descriptive()
            .cases
            .into_iter()
            .find(|c| c.name == "lognormal_101")
            .unwrap();
        let config = BootstrapConfig::default().with_seed(17);
        let s = summarize(&input(&case.values, 4, 0), &config).unwrap();
        assert_eq!((s.n_valid, s.n_invalid, s.n_dnf), (101, 4, 0));
        assert_eq!(s.median, ms(case.median));
        assert_eq!((s.q1, s.q3), (ms(case.q1), ms(case.q3)));
        assert_eq!((s.min, s.max), (ms(case.min), ms(case.max)));
        assert_eq!(s.iqr, Some(case.q3 - case.q1));
        let ci =
            crate::support::stats::bootstrap_median_ci(&case.values, 0.95, config.resamples, 17)
                .unwrap();
        assert_eq!((s.ci_low, s.ci_high), (ms(ci.low), ms(ci.high)));
    }

    #[test]
    fn invalid_runs_never_change_the_numbers() {
        let config = BootstrapConfig::default();
        let values = [510.0, 498.0, 530.0, 505.0, 520.0];
        let clean = summarize(&input(&values, 0, 1), &config).unwrap();
        let noisy = summarize(&input(&values, 9, 1), &config).unwrap();
        assert_eq!(noisy.n_invalid, 9);
        assert_eq!(
            SeriesSummary {
                n_invalid: 0,
                ..noisy
            },
            clean
        );
    }

    #[test]
    fn dnf_runs_count_as_the_slowest_observations() {
        let config = BootstrapConfig::default();
        // 5 finished and 5 DNF: the median is a DNF, not the median of the 5 that finished.
        let five = [400.0, 410.0, 420.0, 430.0, 440.0];
        let half = summarize(&input(&five, 0, 5), &config).unwrap();
        assert_eq!(half.median, Some(Censored::Dnf));
        assert!(half.median_is_dnf());
        assert_eq!((half.min, half.max), (ms(400.0), Some(Censored::Dnf)));
        assert_eq!(half.q1, ms(422.5));
        assert_eq!(half.iqr, None);
        assert_eq!(half.ci_high, Some(Censored::Dnf));
        // 7 finished and 3 DNF: the median is finished but higher than without the DNFs.
        let seven = [400.0, 410.0, 420.0, 430.0, 440.0, 450.0, 460.0];
        let with = summarize(&input(&seven, 0, 3), &config).unwrap();
        let without = summarize(&input(&seven, 0, 0), &config).unwrap();
        assert_eq!(with.median, ms(445.0));
        assert_eq!(without.median, ms(430.0));
        // Only DNFs: every number is DNF.
        let all = summarize(&input(&[], 2, 4), &config).unwrap();
        assert_eq!(
            (all.median, all.min),
            (Some(Censored::Dnf), Some(Censored::Dnf))
        );
        assert_eq!(
            (all.ci_low, all.ci_high),
            (Some(Censored::Dnf), Some(Censored::Dnf))
        );
    }

    #[test]
    fn small_and_empty_series() {
        let config = BootstrapConfig::default();
        let nothing = summarize(&input(&[], 10, 0), &config).unwrap();
        assert!(nothing.median.is_none() && nothing.n_valid == 0);
        let one = summarize(&input(&[412.0], 0, 0), &config).unwrap();
        assert_eq!(
            (one.median, one.iqr, one.min, one.max),
            (ms(412.0), Some(0.0), ms(412.0), ms(412.0))
        );
        assert_eq!((one.ci_low, one.ci_high), (None, None));
        let two = summarize(&input(&[400.0, 420.0], 0, 0), &config).unwrap();
        assert_eq!((two.median, two.ci_low), (ms(410.0), None));
        let two_with_dnf = summarize(&input(&[400.0, 420.0], 0, 1), &config).unwrap();
        assert!(two_with_dnf.ci_low.is_some(), "3 observations");
        let equal = summarize(&input(&[250.0; 5], 0, 0), &config).unwrap();
        assert_eq!(
            (equal.ci_low, equal.ci_high, equal.iqr),
            (ms(250.0), ms(250.0), Some(0.0))
        );
    }

    #[test]
    fn rejects_nan_a_finished_run_above_the_timeout_and_bad_configs() {
        let config = BootstrapConfig::default();
        let err = summarize(&input(&[1.0, f64::NAN], 0, 5), &config).unwrap_err();
        assert!(err.to_string().contains("series values[1] is NaN"), "{err}");
        let err = summarize(&input(&[1.0, 200_000.0], 0, 1), &config).unwrap_err();
        assert!(err.to_string().contains("timeout"), "{err}");
        let bad = BootstrapConfig {
            level: 95.0,
            ..config
        };
        assert!(summarize(&input(&[1.0, 2.0, 3.0], 0, 0), &bad).is_err());
    }

    #[test]
    fn serializes_missing_numbers_as_null_and_dnf_as_dnf() {
        let s = summarize(&input(&[], 0, 0), &BootstrapConfig::default()).unwrap();
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["median"], serde_json::Value::Null);
        let s = summarize(&input(&[5.0], 0, 2), &BootstrapConfig::default()).unwrap();
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["median"], "dnf");
        let back: SeriesSummary = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
    }
}
