//! Fisher's exact test of two proportions (a 2 × 2 table), as
//! `scipy.stats.fisher_exact(table, alternative='two-sided')`, and [`RateTest`]: how often
//! something happened on each side of a comparison (a rejected attempt, a failed load), tested
//! for equal rates and Holm-adjusted over a family of its own.

use serde::{Deserialize, Serialize};
use statrs::function::gamma::ln_gamma;

use super::compare::Side;
use super::error::StatsError;
use super::holm::holm;

/// scipy's relative tolerance when it collects the tables "as or more extreme" than the one
/// observed (their probabilities may differ from the observed one's by rounding only).
const RELATIVE_TOLERANCE: f64 = 1.0 + 1e-7;

fn ln_choose(n: u64, k: u64) -> f64 {
    ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0)
}

/// The two-sided p-value of Fisher's exact test for `events_a` of `trials_a` against
/// `events_b` of `trials_b`: the probability, with the margins fixed (hypergeometric), of every
/// table no more likely than the observed one. 1 when a margin is empty (nothing to test).
/// Errors when events exceed trials.
pub fn fisher_exact(
    events_a: u64,
    trials_a: u64,
    events_b: u64,
    trials_b: u64,
) -> Result<f64, StatsError> {
    for (events, trials, side) in [(events_a, trials_a, "a"), (events_b, trials_b, "b")] {
        if events > trials {
            return Err(StatsError::InvalidCount {
                what: format!("side {side}: {events} events of {trials} trials"),
            });
        }
    }
    let total = trials_a + trials_b;
    let events = events_a + events_b;
    if trials_a == 0 || trials_b == 0 || events == 0 || events == total {
        return Ok(1.0);
    }
    // Given the margins, the count of events on side a is hypergeometric.
    let ln_pmf = |k: u64| {
        ln_choose(trials_a, k) + ln_choose(trials_b, events - k) - ln_choose(total, events)
    };
    let low = events.saturating_sub(trials_b);
    let high = events.min(trials_a);
    let observed = ln_pmf(events_a).exp();
    let p: f64 = (low..=high)
        .map(|k| ln_pmf(k).exp())
        .filter(|&pk| pk <= observed * RELATIVE_TOLERANCE)
        .sum();
    Ok(p.min(1.0))
}

/// How often something happened on each side of a comparison, and whether the rates differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateTest {
    pub events_a: u64,
    pub trials_a: u64,
    pub events_b: u64,
    pub trials_b: u64,
    /// Fisher's exact two-sided p-value.
    pub p: f64,
    /// Holm-adjusted over the family the caller tested together ([`apply_holm_rates`]; alone,
    /// the unadjusted p).
    pub p_holm: f64,
}

impl RateTest {
    /// Tests `events_a` of `trials_a` against `events_b` of `trials_b`.
    pub fn new(
        events_a: u64,
        trials_a: u64,
        events_b: u64,
        trials_b: u64,
    ) -> Result<RateTest, StatsError> {
        let p = fisher_exact(events_a, trials_a, events_b, trials_b)?;
        Ok(RateTest {
            events_a,
            trials_a,
            events_b,
            trials_b,
            p,
            p_holm: p,
        })
    }

    /// The share of side a's trials with the event (0 without trials).
    pub fn rate_a(&self) -> f64 {
        share(self.events_a, self.trials_a)
    }

    pub fn rate_b(&self) -> f64 {
        share(self.events_b, self.trials_b)
    }

    /// Whether the rates differ at `alpha` after Holm.
    pub fn differs(&self, alpha: f64) -> bool {
        self.p_holm < alpha
    }

    /// The side whose rate is significantly higher at `alpha` (None: the rates do not differ).
    pub fn higher(&self, alpha: f64) -> Option<Side> {
        if !self.differs(alpha) {
            None
        } else if self.rate_a() > self.rate_b() {
            Some(Side::A)
        } else {
            Some(Side::B)
        }
    }

    /// Whether anything happened on either side (a test where nothing did is not part of a
    /// family: it cannot be significant).
    pub fn any(&self) -> bool {
        self.events_a + self.events_b > 0
    }
}

fn share(events: u64, trials: u64) -> f64 {
    if trials == 0 {
        0.0
    } else {
        events as f64 / trials as f64
    }
}

/// Holm-adjusts the tests in which anything happened as one family (those where nothing did
/// keep p = 1 and do not count towards its size). Returns the family's size.
pub fn apply_holm_rates<'a>(tests: impl IntoIterator<Item = &'a mut RateTest>) -> usize {
    let mut family: Vec<&mut RateTest> = tests.into_iter().filter(|t| t.any()).collect();
    let p: Vec<f64> = family.iter().map(|t| t.p).collect();
    // Fisher's p-values are probabilities: holm cannot refuse them.
    let adjusted = holm(&p).unwrap_or_else(|_| vec![1.0; p.len()]);
    for (t, a) in family.iter_mut().zip(adjusted) {
        t.p_holm = a;
    }
    family.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::fixtures::{self, assert_close};

    #[test]
    fn matches_scipy_on_every_fixture_case() {
        let fixture = fixtures::fisher();
        assert!(fixture.cases.len() >= 10);
        for c in &fixture.cases {
            let [[a, b], [c2, d]] = c.table;
            let p = fisher_exact(a, a + b, c2, c2 + d).unwrap();
            assert_close(p, c.p, 1e-9, &format!("{} p", c.name));
            // The test is symmetric in its sides.
            let swapped = fisher_exact(c2, c2 + d, a, a + b).unwrap();
            assert_close(swapped, c.p, 1e-9, &format!("{} swapped", c.name));
        }
    }

    #[test]
    fn empty_margins_test_nothing_and_bad_counts_are_refused() {
        assert_eq!(fisher_exact(0, 10, 0, 10).unwrap(), 1.0);
        assert_eq!(fisher_exact(10, 10, 7, 7).unwrap(), 1.0);
        assert_eq!(fisher_exact(0, 0, 3, 10).unwrap(), 1.0);
        let e = fisher_exact(11, 10, 0, 10).unwrap_err().to_string();
        assert!(e.contains("11 events of 10 trials"), "{e}");
    }

    #[test]
    fn the_higher_side_only_when_significant_after_holm() {
        let mut tests = [
            RateTest::new(9, 30, 0, 30).unwrap(),
            RateTest::new(1, 10, 2, 10).unwrap(),
            RateTest::new(0, 10, 0, 10).unwrap(),
        ];
        assert!(tests[0].p < 0.01, "{}", tests[0].p);
        assert_eq!(
            apply_holm_rates(tests.iter_mut()),
            2,
            "nothing happened in the third"
        );
        assert_eq!(tests[0].higher(0.05), Some(Side::A));
        assert_eq!(tests[1].higher(0.05), None);
        assert_eq!(tests[2].p_holm, 1.0);
        assert!((tests[0].p_holm - 2.0 * tests[0].p).abs() < 1e-12);
    }
}
