//! Descriptive statistics of one sample: order statistics, numpy-compatible quantiles.

use serde::{Deserialize, Serialize};

use super::error::{check_finite, StatsError};

/// A validated (non-empty, all finite), ascending copy of a sample. Sort once, ask many
/// questions.
#[derive(Debug, Clone, PartialEq)]
pub struct SortedSample {
    values: Vec<f64>,
}

impl SortedSample {
    /// Validates and sorts `values`; `what` names the input in errors (e.g. "series h2").
    pub fn new(values: &[f64], what: &str) -> Result<Self, StatsError> {
        check_finite(values, what)?;
        let mut values = values.to_vec();
        values.sort_by(f64::total_cmp);
        Ok(Self { values })
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Always false: construction rejects empty input. Present for clippy's `len` convention.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn as_slice(&self) -> &[f64] {
        &self.values
    }

    pub fn min(&self) -> f64 {
        self.values[0]
    }

    pub fn max(&self) -> f64 {
        self.values[self.values.len() - 1]
    }

    /// The middle value, or the mean of the two middle values (as `numpy.median`).
    pub fn median(&self) -> f64 {
        median_of_sorted(&self.values)
    }

    /// numpy's default `linear` quantile (Hyndman–Fan type 7): the value at virtual index
    /// `h = (n − 1)·p`, interpolated linearly between its two neighbours.
    pub fn quantile(&self, p: f64) -> Result<f64, StatsError> {
        if !(0.0..=1.0).contains(&p) {
            return Err(StatsError::ProbabilityOutOfRange {
                what: "quantile probability".into(),
                value: p,
            });
        }
        Ok(quantile_of_sorted(&self.values, p))
    }

    /// Interquartile range `q(0.75) − q(0.25)`.
    pub fn iqr(&self) -> f64 {
        quantile_of_sorted(&self.values, 0.75) - quantile_of_sorted(&self.values, 0.25)
    }

    pub fn describe(&self) -> Descriptive {
        let q1 = quantile_of_sorted(&self.values, 0.25);
        let q3 = quantile_of_sorted(&self.values, 0.75);
        Descriptive {
            n: self.len(),
            min: self.min(),
            q1,
            median: self.median(),
            q3,
            max: self.max(),
            iqr: q3 - q1,
        }
    }
}

/// The usual five numbers plus n and the IQR.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Descriptive {
    pub n: usize,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
    pub iqr: f64,
}

/// Median of `values` (as `numpy.median`).
pub fn median(values: &[f64]) -> Result<f64, StatsError> {
    Ok(SortedSample::new(values, "values")?.median())
}

/// Quantile `p` ∈ [0, 1] of `values`, numpy's default `linear` method (type 7).
pub fn quantile(values: &[f64], p: f64) -> Result<f64, StatsError> {
    SortedSample::new(values, "values")?.quantile(p)
}

/// Interquartile range of `values` (type-7 quartiles).
pub fn iqr(values: &[f64]) -> Result<f64, StatsError> {
    Ok(SortedSample::new(values, "values")?.iqr())
}

/// n, min, quartiles, median, max and IQR of `values` in one sort.
pub fn describe(values: &[f64]) -> Result<Descriptive, StatsError> {
    Ok(SortedSample::new(values, "values")?.describe())
}

/// Median of an ascending, non-empty slice.
pub(crate) fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Type-7 quantile of an ascending, non-empty slice, `p` ∈ [0, 1].
pub(crate) fn quantile_of_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let h = (n - 1) as f64 * p;
    if h >= (n - 1) as f64 {
        return sorted[n - 1];
    }
    let lo = h.floor();
    lerp(sorted[lo as usize], sorted[lo as usize + 1], h - lo)
}

/// `a + (b − a)·γ`, written exactly as numpy's `_lerp` (which switches to `b − (b − a)(1 − γ)`
/// at γ ≥ ½) so quantiles match numpy to the last bit.
fn lerp(a: f64, b: f64, gamma: f64) -> f64 {
    let diff = b - a;
    if gamma >= 0.5 {
        b - diff * (1.0 - gamma)
    } else {
        a + diff * gamma
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::fixtures::{self, assert_close};

    #[test]
    fn matches_numpy_on_every_fixture_case() {
        let fixture = fixtures::descriptive();
        assert!(fixture.cases.len() >= 10);
        for case in &fixture.cases {
            let s = SortedSample::new(&case.values, &case.name).unwrap();
            let d = s.describe();
            let ctx = |field: &str| format!("{} {field}", case.name);
            assert_eq!(d.n, case.n, "{}", ctx("n"));
            assert_close(d.min, case.min, 0.0, &ctx("min"));
            assert_close(d.max, case.max, 0.0, &ctx("max"));
            assert_close(d.median, case.median, 1e-12, &ctx("median"));
            assert_close(d.q1, case.q1, 1e-12, &ctx("q1"));
            assert_close(d.q3, case.q3, 1e-12, &ctx("q3"));
            assert_close(d.iqr, case.iqr, 1e-12, &ctx("iqr"));
            for q in &case.quantiles {
                let got = s.quantile(q.p).unwrap();
                assert_close(got, q.value, 1e-12, &ctx(&format!("quantile({})", q.p)));
            }
            // The free functions agree with the sorted-sample methods.
            assert_eq!(median(&case.values).unwrap(), d.median);
            assert_eq!(iqr(&case.values).unwrap(), d.iqr);
            assert_eq!(
                quantile(&case.values, 0.9).unwrap(),
                s.quantile(0.9).unwrap()
            );
        }
    }

    #[test]
    fn rejects_nan_infinity_and_empty_input_naming_the_index() {
        let err = median(&[1.0, f64::NAN, 3.0]).unwrap_err();
        assert!(
            matches!(err, StatsError::NonFinite { index: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("values[1] is NaN"), "{err}");
        let err = quantile(&[1.0, f64::INFINITY], 0.5).unwrap_err();
        assert!(
            matches!(err, StatsError::NonFinite { index: 1, .. }),
            "{err}"
        );
        let err = iqr(&[]).unwrap_err();
        assert_eq!(
            err,
            StatsError::Empty {
                what: "values".into()
            }
        );
        assert!(describe(&[]).is_err());
    }

    #[test]
    fn rejects_probabilities_outside_the_unit_interval() {
        for p in [-0.01, 1.01, f64::NAN] {
            let err = quantile(&[1.0, 2.0], p).unwrap_err();
            assert!(
                matches!(err, StatsError::ProbabilityOutOfRange { .. }),
                "{err}"
            );
        }
    }
}
