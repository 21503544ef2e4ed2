//! One series (one protocol in one profile × workload cell): what its runs say.
//!
//! Rules, applied in this order:
//! 1. **Invalid runs are excluded entirely.** They are measurement failures (wrong protocol on
//!    the wire, short body, emulator overload…), not outcomes of the protocol; they are only
//!    counted (`n_invalid`).
//! 2. **DNF majority.** A run that did not finish in time (DNF) *is* an outcome of the protocol.
//!    If DNF runs are more than half of the valid + DNF runs (`2·n_dnf > n_valid + n_dnf`), the
//!    series reports DNF: every number is `None`. Exactly half is not a majority.
//! 3. Otherwise the numbers describe the valid runs only (DNF runs have no duration to add):
//!    min/max, type-7 quartiles, median, IQR, and a percentile-bootstrap CI of the median when
//!    there are at least [`MIN_VALID_FOR_INFERENCE`] valid runs.
//! 4. No valid run and no DNF (e.g. every run invalid): every number is `None`,
//!    `dnf_majority = false`; `n_valid = 0` says why.

use serde::{Deserialize, Serialize};

use super::bootstrap::{median_ci, BootstrapConfig};
use super::error::StatsError;
use super::sample::SortedSample;

/// Below this many valid runs a series gets no confidence interval and a comparison no
/// verdict: a bootstrap of 1–2 values says nothing about the population.
pub const MIN_VALID_FOR_INFERENCE: usize = 3;

/// The outcomes of one series' runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SeriesInput {
    /// The measured value (ms) of every valid, finished run.
    pub values: Vec<f64>,
    /// Runs rejected as measurement failures.
    pub invalid: usize,
    /// Runs that did not finish within the timeout.
    pub dnf: usize,
}

impl SeriesInput {
    /// True when DNF runs are more than half of the valid + DNF runs.
    pub fn dnf_majority(&self) -> bool {
        2 * self.dnf > self.values.len() + self.dnf
    }
}

/// What a series reports (see the module docs for when the numbers are `None`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    pub n_valid: usize,
    pub n_invalid: usize,
    pub n_dnf: usize,
    pub median: Option<f64>,
    pub q1: Option<f64>,
    pub q3: Option<f64>,
    pub iqr: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Bootstrap CI of the median at the configured level (`None` below
    /// [`MIN_VALID_FOR_INFERENCE`] valid runs).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub dnf_majority: bool,
}

/// Summarizes one series. Errors on a non-finite value (naming its index in `values`) or on
/// an invalid bootstrap configuration.
pub fn summarize(
    input: &SeriesInput,
    bootstrap: &BootstrapConfig,
) -> Result<SeriesSummary, StatsError> {
    bootstrap.validate()?;
    let mut summary = SeriesSummary {
        n_valid: input.values.len(),
        n_invalid: input.invalid,
        n_dnf: input.dnf,
        median: None,
        q1: None,
        q3: None,
        iqr: None,
        min: None,
        max: None,
        ci_low: None,
        ci_high: None,
        dnf_majority: input.dnf_majority(),
    };
    if input.values.is_empty() {
        return Ok(summary);
    }
    // Validate even when the numbers will not be reported: bad data is a bug upstream.
    let sorted = SortedSample::new(&input.values, "series values")?;
    if summary.dnf_majority {
        return Ok(summary);
    }
    let d = sorted.describe();
    summary.median = Some(d.median);
    summary.q1 = Some(d.q1);
    summary.q3 = Some(d.q3);
    summary.iqr = Some(d.iqr);
    summary.min = Some(d.min);
    summary.max = Some(d.max);
    if sorted.len() >= MIN_VALID_FOR_INFERENCE {
        let ci = median_ci(sorted.as_slice(), bootstrap);
        summary.ci_low = Some(ci.low);
        summary.ci_high = Some(ci.high);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::fixtures;

    fn input(values: &[f64], invalid: usize, dnf: usize) -> SeriesInput {
        SeriesInput {
            values: values.to_vec(),
            invalid,
            dnf,
        }
    }

    #[test]
    fn numbers_match_numpy_and_the_bootstrap_ci() {
        let case = fixtures::descriptive()
            .cases
            .into_iter()
            .find(|c| c.name == "lognormal_101")
            .unwrap();
        let config = BootstrapConfig::default().with_seed(17);
        let s = summarize(&input(&case.values, 4, 2), &config).unwrap();
        assert_eq!((s.n_valid, s.n_invalid, s.n_dnf), (101, 4, 2));
        assert!(!s.dnf_majority);
        assert_eq!(s.median, Some(case.median));
        assert_eq!((s.q1, s.q3), (Some(case.q1), Some(case.q3)));
        assert_eq!((s.min, s.max), (Some(case.min), Some(case.max)));
        assert_eq!(s.iqr, Some(case.q3 - case.q1));
        let ci =
            crate::stats::bootstrap_median_ci(&case.values, 0.95, config.resamples, 17).unwrap();
        assert_eq!((s.ci_low, s.ci_high), (Some(ci.low), Some(ci.high)));
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
    fn dnf_majority_reports_no_numbers_and_half_is_not_a_majority() {
        let config = BootstrapConfig::default();
        let majority = summarize(&input(&[900.0, 950.0], 3, 3), &config).unwrap();
        assert!(majority.dnf_majority);
        assert_eq!(
            (majority.n_valid, majority.n_dnf, majority.n_invalid),
            (2, 3, 3)
        );
        assert!(majority.median.is_none() && majority.min.is_none() && majority.ci_low.is_none());
        let half = summarize(&input(&[900.0, 950.0, 990.0], 0, 3), &config).unwrap();
        assert!(!half.dnf_majority);
        assert_eq!(half.median, Some(950.0));
        // Invalid runs do not count towards the majority either way.
        let all_dnf = summarize(&input(&[], 5, 1), &config).unwrap();
        assert!(all_dnf.dnf_majority && all_dnf.median.is_none());
    }

    #[test]
    fn small_and_empty_series() {
        let config = BootstrapConfig::default();
        let nothing = summarize(&input(&[], 10, 0), &config).unwrap();
        assert!(!nothing.dnf_majority && nothing.median.is_none() && nothing.n_valid == 0);
        let one = summarize(&input(&[412.0], 0, 0), &config).unwrap();
        assert_eq!(
            (one.median, one.iqr, one.min, one.max),
            (Some(412.0), Some(0.0), Some(412.0), Some(412.0))
        );
        assert_eq!((one.ci_low, one.ci_high), (None, None));
        let two = summarize(&input(&[400.0, 420.0], 0, 0), &config).unwrap();
        assert_eq!((two.median, two.ci_low), (Some(410.0), None));
        let equal = summarize(&input(&[250.0; 5], 0, 0), &config).unwrap();
        assert_eq!(
            (equal.ci_low, equal.ci_high, equal.iqr),
            (Some(250.0), Some(250.0), Some(0.0))
        );
    }

    #[test]
    fn rejects_nan_even_in_a_dnf_series_and_bad_configs() {
        let config = BootstrapConfig::default();
        let err = summarize(&input(&[1.0, f64::NAN], 0, 5), &config).unwrap_err();
        assert!(err.to_string().contains("series values[1] is NaN"), "{err}");
        let bad = BootstrapConfig {
            level: 95.0,
            ..config
        };
        assert!(summarize(&input(&[1.0, 2.0, 3.0], 0, 0), &bad).is_err());
    }

    #[test]
    fn serializes_missing_numbers_as_null() {
        let s = summarize(&input(&[], 0, 2), &BootstrapConfig::default()).unwrap();
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["median"], serde_json::Value::Null);
        assert_eq!(json["dnf_majority"], true);
        let back: SeriesSummary = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
    }
}
