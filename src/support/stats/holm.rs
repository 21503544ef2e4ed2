//! Holm–Bonferroni step-down adjustment, as
//! `statsmodels.stats.multitest.multipletests(p, method='holm')[1]`.

use super::error::StatsError;

/// Holm-adjusted p-values, in the input order: sort ascending, multiply the i-th smallest
/// (0-based) by `m − i`, take the running maximum (so the adjustment is monotone in p), and cap
/// at one. pagebench calls a difference significant when `adjusted < α` (statsmodels' `reject`
/// uses `≤`; the two differ only on exact equality). Empty input gives an empty output.
pub fn holm(pvalues: &[f64]) -> Result<Vec<f64>, StatsError> {
    if let Some((index, &value)) = pvalues
        .iter()
        .enumerate()
        .find(|(_, p)| !(0.0..=1.0).contains(*p))
    {
        return Err(StatsError::ProbabilityOutOfRange {
            what: format!("p-value [{index}]"),
            value,
        });
    }
    let m = pvalues.len();
    let mut order: Vec<usize> = (0..m).collect();
    // Stable sort: tied p-values end up with equal adjusted values whatever their order.
    order.sort_by(|&x, &y| pvalues[x].total_cmp(&pvalues[y]));
    let mut adjusted = vec![0.0; m];
    let mut running_max = 0.0_f64;
    for (rank, &index) in order.iter().enumerate() {
        running_max = running_max.max(pvalues[index] * (m - rank) as f64);
        adjusted[index] = running_max.min(1.0);
    }
    Ok(adjusted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::fixtures::{self, assert_close};

    #[test]
    fn matches_statsmodels_on_every_fixture_case() {
        let fixture = fixtures::holm();
        assert!(fixture.cases.len() >= 8);
        for case in &fixture.cases {
            let got = holm(&case.p).unwrap();
            assert_eq!(got.len(), case.adjusted.len(), "{}", case.name);
            for (i, (g, w)) in got.iter().zip(&case.adjusted).enumerate() {
                assert_close(*g, *w, 1e-15, &format!("{}[{i}]", case.name));
            }
        }
    }

    #[test]
    fn adjusted_values_are_monotone_in_p_and_never_below_p() {
        for case in &fixtures::holm().cases {
            let adjusted = holm(&case.p).unwrap();
            for i in 0..case.p.len() {
                assert!(
                    adjusted[i] >= case.p[i] && adjusted[i] <= 1.0,
                    "{}",
                    case.name
                );
                for j in 0..case.p.len() {
                    if case.p[i] <= case.p[j] {
                        assert!(adjusted[i] <= adjusted[j], "{} {i} {j}", case.name);
                    }
                }
            }
        }
    }

    #[test]
    fn rejects_values_that_are_not_probabilities() {
        assert_eq!(holm(&[]).unwrap(), Vec::<f64>::new());
        for bad in [f64::NAN, -0.1, 1.5] {
            let err = holm(&[0.01, bad]).unwrap_err();
            assert!(err.to_string().contains("p-value [1]"), "{err}");
        }
    }
}
