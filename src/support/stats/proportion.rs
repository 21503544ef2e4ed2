//! A proportion's confidence interval: Wilson's score interval (the formula of
//! `statsmodels.stats.proportion.proportion_confint(k, n, method='wilson')`). Used where a rate is
//! estimated by counting (how often a simulated rule calls a difference that is not there).

use super::error::StatsError;

/// The standard normal quantile of 0.975: a two-sided 95 % interval.
const Z_95: f64 = 1.959_963_984_540_054;

/// The 95 % Wilson score interval of `events` in `trials` (within [0, 1]). Unlike the normal
/// approximation it stays inside [0, 1] and is not degenerate at 0 or `trials` events. Errors
/// on no trials and on more events than trials.
pub fn wilson_interval(events: u64, trials: u64) -> Result<(f64, f64), StatsError> {
    if trials == 0 || events > trials {
        return Err(StatsError::InvalidCount {
            what: format!("a rate of {events} events in {trials} trials"),
        });
    }
    let (k, n, z2) = (events as f64, trials as f64, Z_95 * Z_95);
    let p = k / n;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    Ok(((centre - half).max(0.0), (centre + half).min(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::fixtures::assert_close;

    #[test]
    fn matches_the_score_formula() {
        // The score formula evaluated in Python (float64); 5 of 100 is the textbook
        // 0.0215–0.1118 that statsmodels' proportion_confint(5, 100, method='wilson') gives.
        for (k, n, low, high) in [
            (5, 100, 0.02154367915436796, 0.11175046923191913),
            (100, 2000, 0.04128123361873174, 0.0604441089343959),
            (0, 20, 0.0, 0.16112515805281938),
            (20, 20, 0.8388748419471806, 1.0),
        ] {
            let (lo, hi) = wilson_interval(k, n).unwrap();
            assert_close(lo, low, 1e-12, &format!("{k}/{n} low"));
            assert_close(hi, high, 1e-12, &format!("{k}/{n} high"));
        }
    }

    #[test]
    fn rejects_no_trials_and_impossible_counts() {
        assert!(wilson_interval(0, 0).is_err());
        let e = wilson_interval(3, 2).unwrap_err().to_string();
        assert!(e.contains("3 events in 2 trials"), "{e}");
    }
}
