//! Durations with runs that did not finish (DNF): right-censored data. A DNF is an observation
//! at the timeout — slower than every finished run — and DNFs tie with each other. So a series
//! of 10 runs with 4 DNFs has 10 observations, its median may itself be "did not finish", and
//! a test ranks its DNFs as tied maxima; nothing is dropped.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::{check_finite, StatsError};
use super::sample::SortedSample;

/// A statistic of censored durations: a number of ms, or "did not finish" (at or beyond the
/// timeout, so no number can be given).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Censored {
    Ms(f64),
    Dnf,
}

impl Censored {
    /// The number, unless it is a DNF.
    pub fn ms(self) -> Option<f64> {
        match self {
            Censored::Ms(v) => Some(v),
            Censored::Dnf => None,
        }
    }

    pub fn is_dnf(self) -> bool {
        self == Censored::Dnf
    }

    /// `+∞` for a DNF: the order in which DNFs rank above every finished run.
    pub fn or_infinity(self) -> f64 {
        self.ms().unwrap_or(f64::INFINITY)
    }

    pub(crate) fn from_extended(v: f64) -> Censored {
        if v.is_infinite() {
            Censored::Dnf
        } else {
            Censored::Ms(v)
        }
    }
}

impl fmt::Display for Censored {
    /// `412` (ms, no decimals) or `DNF`; `{:.1}` gives decimals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Censored::Ms(v) => write!(f, "{:.*}", f.precision().unwrap_or(0), v),
            Censored::Dnf => f.write_str("DNF"),
        }
    }
}

/// In JSON: a number, or the string `"dnf"`.
impl Serialize for Censored {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Censored::Ms(v) => s.serialize_f64(*v),
            Censored::Dnf => s.serialize_str("dnf"),
        }
    }
}

impl<'de> Deserialize<'de> for Censored {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Ms(f64),
            Word(String),
        }
        match Repr::deserialize(d)? {
            Repr::Ms(v) => Ok(Censored::Ms(v)),
            Repr::Word(w) if w.eq_ignore_ascii_case("dnf") => Ok(Censored::Dnf),
            Repr::Word(w) => Err(serde::de::Error::custom(format!(
                "expected a number of ms or \"dnf\", got {w:?}"
            ))),
        }
    }
}

/// A validated sample of finished durations plus a number of DNFs, censored at `censor_at`
/// (the timeout, above every finished value).
#[derive(Debug, Clone, PartialEq)]
pub struct CensoredSample {
    finished: Vec<f64>,
    dnf: usize,
    censor_at: f64,
}

impl CensoredSample {
    /// Errors on non-finite values, on no observations at all, and — when there are DNFs — on
    /// a finished value not below `censor_at` (a run that finished cannot be slower than the
    /// timeout).
    pub fn new(values: &[f64], dnf: usize, censor_at: f64, what: &str) -> Result<Self, StatsError> {
        if values.is_empty() && dnf == 0 {
            return Err(StatsError::Empty { what: what.into() });
        }
        let finished = if values.is_empty() {
            Vec::new()
        } else {
            SortedSample::new(values, what)?.as_slice().to_vec()
        };
        if dnf > 0 {
            check_finite(&[censor_at], "the timeout DNFs stand for")?;
            if let Some(index) = values.iter().position(|v| *v >= censor_at) {
                return Err(StatsError::NotBelowTimeout {
                    what: what.into(),
                    index,
                    value: values[index],
                    timeout: censor_at,
                });
            }
        }
        Ok(CensoredSample {
            finished,
            dnf,
            censor_at,
        })
    }

    /// Observations: finished runs and DNFs.
    pub fn len(&self) -> usize {
        self.finished.len() + self.dnf
    }

    /// Always false: construction rejects an empty sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dnf(&self) -> usize {
        self.dnf
    }

    /// Finished values, ascending.
    pub fn finished(&self) -> &[f64] {
        &self.finished
    }

    /// Every observation ascending, a DNF as `dnf_value` (`censor_at` for ranks and bounds,
    /// `+∞` for order only).
    pub fn observations(&self, dnf_value: f64) -> Vec<f64> {
        let mut v = self.finished.clone();
        v.extend(std::iter::repeat_n(dnf_value, self.dnf));
        v
    }

    /// Every observation ascending, a DNF at the timeout (finite: for tests and ratios).
    pub fn at_timeout(&self) -> Vec<f64> {
        self.observations(self.censor_at)
    }

    pub fn censor_at(&self) -> f64 {
        self.censor_at
    }

    /// numpy's type-7 quantile over the observations; DNF when it lands on a DNF or
    /// interpolates towards one.
    pub fn quantile(&self, p: f64) -> Censored {
        Censored::from_extended(extended_quantile(&self.observations(f64::INFINITY), p))
    }

    pub fn median(&self) -> Censored {
        self.quantile(0.5)
    }

    pub fn min(&self) -> Censored {
        self.finished
            .first()
            .map_or(Censored::Dnf, |v| Censored::Ms(*v))
    }

    pub fn max(&self) -> Censored {
        match (self.dnf, self.finished.last()) {
            (0, Some(v)) => Censored::Ms(*v),
            _ => Censored::Dnf,
        }
    }
}

/// Type-7 quantile of an ascending slice that may end in `+∞`: a virtual index that falls on a
/// finite value (weight 0 on its neighbour) stays finite, any weight on `+∞` gives `+∞`.
pub(crate) fn extended_quantile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let h = (n - 1) as f64 * p;
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    if frac == 0.0 || lo + 1 >= n {
        return sorted[lo.min(n - 1)];
    }
    if sorted[lo + 1].is_infinite() {
        return f64::INFINITY;
    }
    super::sample::quantile_of_sorted(sorted, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(values: &[f64], dnf: usize) -> CensoredSample {
        CensoredSample::new(values, dnf, 120_000.0, "s").unwrap()
    }

    #[test]
    fn without_dnfs_it_is_numpy() {
        let s = sample(&[5.0, 1.0, 3.0, 2.0], 0);
        assert_eq!(s.median(), Censored::Ms(2.5));
        assert_eq!(s.quantile(0.25), Censored::Ms(1.75));
        assert_eq!((s.min(), s.max()), (Censored::Ms(1.0), Censored::Ms(5.0)));
    }

    #[test]
    fn dnfs_rank_above_every_finished_run() {
        // 6 finished + 4 DNF: the median (positions 4 and 5) is finished.
        let s = sample(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0], 4);
        assert_eq!(s.median(), Censored::Ms(55.0));
        assert_eq!(s.max(), Censored::Dnf);
        assert_eq!(s.quantile(0.75), Censored::Dnf);
        // 5 + 5: the median interpolates towards a DNF, so it is one.
        let s = sample(&[10.0, 20.0, 30.0, 40.0, 50.0], 5);
        assert_eq!(s.median(), Censored::Dnf);
        assert_eq!(s.quantile(0.4), Censored::Ms(46.0));
        // All DNF.
        let s = sample(&[], 3);
        assert_eq!(
            (s.min(), s.median(), s.len()),
            (Censored::Dnf, Censored::Dnf, 3)
        );
        assert_eq!(s.at_timeout(), [120_000.0; 3]);
    }

    #[test]
    fn a_finished_run_cannot_be_slower_than_the_timeout() {
        let e = CensoredSample::new(&[10.0, 130_000.0], 1, 120_000.0, "series h3").unwrap_err();
        assert!(e.to_string().contains("series h3[1]"), "{e}");
        // Without DNFs the timeout plays no part.
        assert!(CensoredSample::new(&[130_000.0], 0, 120_000.0, "s").is_ok());
        assert!(CensoredSample::new(&[], 0, 1.0, "s").is_err());
    }

    #[test]
    fn serializes_as_a_number_or_dnf() {
        let v = serde_json::to_value([Censored::Ms(412.5), Censored::Dnf]).unwrap();
        assert_eq!(v, serde_json::json!([412.5, "dnf"]));
        let back: Vec<Censored> = serde_json::from_value(v).unwrap();
        assert_eq!(back, [Censored::Ms(412.5), Censored::Dnf]);
        assert!(serde_json::from_str::<Censored>("\"slow\"").is_err());
        assert_eq!(format!("{}", Censored::Ms(412.46)), "412");
        assert_eq!(format!("{:.1}", Censored::Ms(412.46)), "412.5");
        assert_eq!(Censored::Dnf.to_string(), "DNF");
    }
}
