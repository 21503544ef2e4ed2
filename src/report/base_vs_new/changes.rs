//! One series of BASE against itself in NEW (`SeriesChange`: the ratio with its CI, the shift,
//! the failure and rejection rates), and the significance level of every test of `compare`.

use crate::results::attempts::Attempts;
use crate::results::summary::SeriesKey;
use crate::support::stats::{Comparison, RateTest, SeriesSummary, Shift};
use serde::Serialize;

/// The significance level of every test here (after Holm).
pub const ALPHA: f64 = 0.05;

/// One series in both directories.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesChange {
    pub key: SeriesKey,
    pub base: SeriesSummary,
    pub new: SeriesSummary,
    /// NEW against BASE: ratio = median(new) / median(base), Holm over every series.
    pub comparison: Comparison,
    /// NEW − BASE in ms: the Hodges–Lehmann shift of the finished runs with Moses' 95 % CI
    /// (None when a side has a DNF or no finished run).
    pub shift: Option<Shift>,
    /// Protocol failures of the counted runs that measured the protocol, NEW (a) against BASE
    /// (b); Holm over the series compared.
    pub failures: RateTest,
    /// Attempts rejected as measurements of all measured attempts, NEW (a) against BASE (b);
    /// Holm over the series compared.
    pub rejections: RateTest,
    pub attempts_base: Attempts,
    pub attempts_new: Attempts,
}
