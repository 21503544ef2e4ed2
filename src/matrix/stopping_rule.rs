//! `--runs auto`: how many interleaved rounds a cell gets.
//!
//! The rule: a cell runs `--min-runs` measured rounds; after each round from there on, the
//! statistics of the cell are computed exactly as the summary computes them (the same series
//! inputs, comparisons and bootstrap seeds), and the cell stops when the 95 % CI of every ratio
//! in it (protocols within each server and browser, servers and engines per protocol) is within
//! ±`--precision` % of the ratio — in a cell with no comparison, every series' median CI within
//! ±`--precision` % of its median — or when it has run `--max-runs` rounds.
//!
//! It looks at the width of the intervals only, never at a p-value or at which way a ratio
//! points. That still leaves an optional-stopping bias: a cell stops when its intervals happen
//! to be narrow, and an interval narrow by chance excludes 1 more often. `bench stopping`
//! (`bench::stopping_bench`) measures it: with no true difference, about 4 % of cells get a
//! verdict where the rule stops them anywhere between the minimum and the maximum, against
//! 2–3 % of the same cells at a fixed 10 or 30 runs (`docs/scale.md`, "Adaptive runs"). A ratio or a
//! median that is only a DNF bound never counts as precise ([`summary::widest_ci_pct`]). The
//! rule is a function of the runs on disk and the seed, so a resumed matrix makes the same
//! decisions as one that was never interrupted.

use std::path::Path;

use anyhow::Result;

use crate::config::identity::{Phase, ServerId};
use crate::config::plan::{Adaptive, Cell};
use crate::evidence::metric_registry;
use crate::results::summary::{self, RunRow, SeriesKey};
use crate::support::stats::{self, derive_seed, BootstrapConfig};

/// What the rule saw in a cell after some rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub rounds: u32,
    /// The widest CI half-width in percent (None: some estimate has no CI yet).
    pub widest_pct: Option<f64>,
    /// Whether that is within the precision asked: the cell needs no more rounds.
    pub precise: bool,
}

/// What the statistics need besides the rows.
#[derive(Debug, Clone)]
pub struct RuleContext {
    pub adaptive: Adaptive,
    pub server_order: Vec<ServerId>,
    pub seed: u64,
    pub resamples: usize,
    pub timeout_ms: f64,
}

/// Judges `cell` on its measured rounds up to `rounds` among `rows` (any rows: other cells' and
/// later rounds' are left out). Pure.
pub fn judge(rows: &[RunRow], cell: &Cell, rounds: u32, ctx: &RuleContext) -> Result<Judgement> {
    let mine: Vec<RunRow> = rows
        .iter()
        .filter(|r| {
            r.profile == cell.profile
                && r.workload == cell.workload
                && r.phase == Phase::Measure
                && r.round <= rounds
        })
        .cloned()
        .collect();
    let (order, inputs) =
        summary::series_inputs(&mine, &metric_registry::COMPLETION_MS, ctx.timeout_ms);
    let keys: Vec<&SeriesKey> = order.iter().collect();
    let comparisons = summary::cell_comparisons(
        &keys,
        &inputs,
        &ctx.server_order,
        ctx.seed,
        ctx.resamples,
        0.05,
    )?;
    let compared: Vec<&summary::CellComparison> = comparisons.iter().collect();
    let mut series = Vec::new();
    if compared.is_empty() {
        for k in &order {
            let boot = BootstrapConfig {
                resamples: ctx.resamples,
                ..BootstrapConfig::default()
            }
            .with_seed(derive_seed(ctx.seed, &k.label()));
            series.push(stats::summarize(&inputs[k], &boot)?);
        }
    }
    let series_refs: Vec<&stats::SeriesSummary> = series.iter().collect();
    let widest_pct = summary::widest_ci_pct(&compared, &series_refs);
    Ok(Judgement {
        rounds,
        widest_pct,
        precise: widest_pct.is_some_and(|w| w <= ctx.adaptive.precision_pct),
    })
}

/// The rule over a results directory: judges from its `runs.csv` (the runs on disk are what a
/// resume sees too).
pub fn judge_dir(dir: &Path, cell: &Cell, rounds: u32, ctx: &RuleContext) -> Result<Judgement> {
    let rows = summary::read_runs(dir)?;
    judge(&rows, cell, rounds, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::validate::Outcome;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn ctx(precision_pct: f64) -> RuleContext {
        RuleContext {
            adaptive: Adaptive::new(5, 30, precision_pct).unwrap(),
            server_order: vec!["embedded".into()],
            seed: 1,
            resamples: 2_000,
            timeout_ms: 120_000.0,
        }
    }

    fn cell() -> Cell {
        Cell {
            profile: "wired".into(),
            workload: "page10".into(),
        }
    }

    /// `rounds` rounds of h1, h2, h3 with medians 300/250/250 ms and a relative spread `cv`.
    fn rows(rounds: u32, cv: f64, seed: u64) -> Vec<RunRow> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        for round in 1..=rounds {
            for (v, mean) in [("h1", 300.0), ("h2", 250.0), ("h3", 250.0)] {
                let noise: f64 = (0..6).map(|_| rng.random::<f64>() - 0.5).sum::<f64>();
                let id = format!("wired-page10-r{round:02}-{v}");
                out.push(
                    RunRow::measured(&id, "wired", "page10", "embedded", v, round).with_value(
                        &metric_registry::COMPLETION_MS,
                        Some(mean * (1.0 + cv * noise)),
                    ),
                );
            }
        }
        out
    }

    #[test]
    fn a_quiet_cell_is_precise_and_a_noisy_one_is_not() {
        let quiet = rows(8, 0.02, 1);
        let j = judge(&quiet, &cell(), 8, &ctx(5.0)).unwrap();
        assert!(j.precise, "{j:?}");
        assert!(j.widest_pct.unwrap() < 5.0);
        let noisy = rows(8, 0.5, 1);
        let j = judge(&noisy, &cell(), 8, &ctx(5.0)).unwrap();
        assert!(!j.precise && j.widest_pct.unwrap() > 5.0, "{j:?}");
    }

    #[test]
    fn more_rounds_make_a_cell_more_precise() {
        let all = rows(30, 0.15, 2);
        let w = |r| {
            judge(&all, &cell(), r, &ctx(5.0))
                .unwrap()
                .widest_pct
                .unwrap()
        };
        assert!(w(30) < w(5), "{} vs {}", w(30), w(5));
    }

    #[test]
    fn only_the_cells_own_rounds_up_to_the_asked_one_count() {
        let mut all = rows(10, 0.5, 3);
        // Rounds 6–10 of the cell wildly noisy; another cell's rows anything at all.
        let quiet = rows(5, 0.01, 4);
        all.retain(|r| r.round > 5);
        all.extend(quiet);
        all.extend(rows(5, 0.9, 5).into_iter().map(|mut r| {
            r.profile = "mobile".into();
            r.run_id = format!("m-{}", r.run_id);
            r.plan_id = r.run_id.clone();
            r
        }));
        let j = judge(&all, &cell(), 5, &ctx(5.0)).unwrap();
        assert!(j.precise, "{j:?}");
        assert!(!judge(&all, &cell(), 10, &ctx(5.0)).unwrap().precise);
        // Warm-ups never count.
        let mut warm = rows(5, 0.01, 6);
        warm.extend(rows(1, 0.9, 7).into_iter().map(|mut r| {
            r.phase = Phase::Warmup;
            r.run_id = format!("w-{}", r.run_id);
            r.plan_id = r.run_id.clone();
            r
        }));
        assert!(judge(&warm, &cell(), 5, &ctx(5.0)).unwrap().precise);
    }

    #[test]
    fn the_rule_never_looks_at_p_values_or_the_direction() {
        // Two cells with the same spread: h3 equal to h2 in one, 20 % faster in the other.
        // Their CIs are as wide, so the rule says the same of both.
        let same = rows(8, 0.05, 8);
        let faster: Vec<RunRow> = same
            .iter()
            .cloned()
            .map(|r| {
                if r.variant.name() == "h3" {
                    let v = r.completion_ms().unwrap() * 0.8;
                    r.with_value(&metric_registry::COMPLETION_MS, Some(v))
                } else {
                    r
                }
            })
            .collect();
        let a = judge(&same, &cell(), 8, &ctx(5.0)).unwrap();
        let b = judge(&faster, &cell(), 8, &ctx(5.0)).unwrap();
        assert_eq!(a.precise, b.precise);
        assert!((a.widest_pct.unwrap() - b.widest_pct.unwrap()).abs() < 1.0);
    }

    #[test]
    fn too_few_runs_or_invalid_ones_are_never_precise_and_it_is_deterministic() {
        let two = rows(2, 0.0001, 9);
        let j = judge(&two, &cell(), 2, &ctx(5.0)).unwrap();
        assert_eq!((j.widest_pct, j.precise), (None, false));
        let mut bad = rows(6, 0.01, 10);
        for r in bad.iter_mut().filter(|r| r.variant.name() == "h2") {
            r.outcome = Outcome::Invalid;
        }
        assert!(!judge(&bad, &cell(), 6, &ctx(5.0)).unwrap().precise);
        let x = rows(7, 0.1, 11);
        assert_eq!(
            judge(&x, &cell(), 7, &ctx(5.0)).unwrap(),
            judge(&x, &cell(), 7, &ctx(5.0)).unwrap()
        );
    }

    /// `rows` with `variant`'s runs of the rounds `dnf` made DNFs.
    fn with_dnfs(rows: Vec<RunRow>, variant: &str, dnf: impl Fn(u32) -> bool) -> Vec<RunRow> {
        rows.into_iter()
            .map(|mut r| {
                if r.variant.name() == variant && dnf(r.round) {
                    r.outcome = Outcome::Dnf;
                    r.set(&metric_registry::COMPLETION_MS, None);
                }
                r
            })
            .collect()
    }

    #[test]
    fn a_dnf_bound_is_never_precise() {
        // h3 never finishes: its ratios are bounds (≥ timeout / h2), as narrow as h2's spread.
        let stuck = with_dnfs(rows(10, 0.01, 13), "h3", |_| true);
        let (order, inputs) =
            summary::series_inputs(&stuck, &metric_registry::COMPLETION_MS, 120_000.0);
        let keys: Vec<&SeriesKey> = order.iter().collect();
        let cmp = summary::cell_comparisons(&keys, &inputs, &[], 1, 2_000, 0.05).unwrap();
        let h3 = cmp.iter().find(|c| c.a.name() == "h3").unwrap();
        let x = &h3.comparison;
        assert_eq!(x.ratio_bound, stats::RatioBound::AtLeast);
        assert!(x.ratio_ci_high.unwrap() / x.ratio.unwrap() < 1.05, "{x:?}");
        for rounds in [5, 10] {
            let j = judge(&stuck, &cell(), rounds, &ctx(5.0)).unwrap();
            assert_eq!((j.widest_pct, j.precise), (None, false), "{rounds}: {j:?}");
        }
        // 4 of 10 DNF: the median finished, but the CI reaches the DNFs.
        let some = with_dnfs(rows(10, 0.01, 14), "h3", |r| r % 5 < 2);
        let j = judge(&some, &cell(), 10, &ctx(5.0)).unwrap();
        assert_eq!((j.widest_pct, j.precise), (None, false), "{j:?}");
        // A cell of one series whose median is a DNF.
        let one: Vec<RunRow> = with_dnfs(rows(8, 0.01, 15), "h2", |r| r > 2)
            .into_iter()
            .filter(|r| r.variant.name() == "h2")
            .collect();
        let j = judge(&one, &cell(), 8, &ctx(5.0)).unwrap();
        assert_eq!((j.widest_pct, j.precise), (None, false), "{j:?}");
    }

    #[test]
    fn a_cell_of_one_series_is_judged_on_its_median() {
        let one: Vec<RunRow> = rows(6, 0.02, 12)
            .into_iter()
            .filter(|r| r.variant.name() == "h2")
            .collect();
        let j = judge(&one, &cell(), 6, &ctx(5.0)).unwrap();
        assert!(j.precise && j.widest_pct.is_some(), "{j:?}");
    }
}
