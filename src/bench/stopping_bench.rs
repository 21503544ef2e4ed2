//! `pagebench bench stopping`: how often `--runs auto` calls a difference that is not there.
//!
//! Each simulated cell has two series, h2 and h3, drawn from the same distribution (or h3
//! scaled by `true_ratio`, to see the rule find a real difference). Rounds are added until the
//! stopping rule of [`stopping_rule::judge`] — the one the matrix asks, on the same rows, with the
//! same statistics and bootstrap seeds — says the cell is precise, or until `--max-runs`; then
//! the summary's verdict of h3 against h2 at that point is taken, exactly as `summary.json`
//! would give it. Faster or slower under no true difference is a false positive. The same
//! cells cut at fixed run counts give the rate without optional stopping, so any inflation the
//! rule causes shows side by side. Pure and deterministic for a seed (any thread count).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::config::plan::{Adaptive, Cell};
use crate::evidence::metric_registry;
use crate::evidence::validate::Outcome;
use crate::matrix::stopping_rule::{self, RuleContext};
use crate::results::summary::{self, RunRow};
use crate::support::stats::{derive_seed, wilson_interval, Verdict};

/// The per-run timeout of the simulated matrix: a draw at or above it is a DNF.
const TIMEOUT_MS: f64 = 120_000.0;
/// The median load time of a simulated series.
const MEDIAN_MS: f64 = 1_000.0;
const SERVER: &str = "embedded";

/// How the load times of a series scatter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// Log-normal with this coefficient of variation (0.05: a quiet page on a clean link).
    LogNormal { cv: f64 },
    /// Log-normal with a 5 % CV, one run in ten stalled by a factor of 1.3 or more drawn from
    /// a Pareto tail (α = 1.5: infinite variance), as retransmission timeouts on a lossy link.
    Stalls,
}

impl Shape {
    /// The shapes the bench runs by default.
    pub const DEFAULT: [&'static str; 4] = ["lognormal5", "lognormal10", "lognormal20", "stalls"];

    /// One load time of a series whose median is `median`.
    fn draw(self, rng: &mut ChaCha8Rng, median: f64) -> f64 {
        let log_normal = |rng: &mut ChaCha8Rng, cv: f64| {
            let sigma = (1.0 + cv * cv).ln().sqrt();
            median * (sigma * standard_normal(rng)).exp()
        };
        match self {
            Shape::LogNormal { cv } => log_normal(rng, cv),
            Shape::Stalls => {
                let body = log_normal(rng, 0.05);
                if rng.random::<f64>() < 0.1 {
                    // Pareto(x_m = 1.3, α = 1.5) by inversion; 1 − u is in (0, 1].
                    body * 1.3 * (1.0 - rng.random::<f64>()).powf(-1.0 / 1.5)
                } else {
                    body
                }
            }
        }
    }

    /// Words for a table.
    pub fn describe(self) -> String {
        match self {
            Shape::LogNormal { cv } => format!("log-normal, CV {:.0} %", cv * 100.0),
            Shape::Stalls => "log-normal CV 5 %, 10 % stalls ×≥1.3 (Pareto α 1.5)".into(),
        }
    }
}

impl std::str::FromStr for Shape {
    type Err = anyhow::Error;

    /// `lognormal10` (CV in percent) or `stalls`.
    fn from_str(s: &str) -> Result<Shape> {
        if s == "stalls" {
            return Ok(Shape::Stalls);
        }
        let cv = s
            .strip_prefix("lognormal")
            .and_then(|pct| pct.parse::<f64>().ok())
            .filter(|pct| pct.is_finite() && *pct > 0.0 && *pct < 200.0);
        cv.map(|pct| Shape::LogNormal { cv: pct / 100.0 })
            .with_context(|| {
                format!(
                    "--shapes {s:?}: use lognormalCV (CV in percent, e.g. lognormal10) or stalls"
                )
            })
    }
}

/// A standard normal draw (Box–Muller).
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub shape: Shape,
    pub cells: usize,
    pub seed: u64,
    pub min_runs: u32,
    pub max_runs: u32,
    /// `--precision` values to run the rule with.
    pub precisions: Vec<f64>,
    /// Fixed run counts to compare with (each at most `max_runs`).
    pub fixed_runs: Vec<u32>,
    pub resamples: usize,
    /// median(h3) / median(h2) of the simulated distributions (1: no difference).
    pub true_ratio: f64,
    pub threads: usize,
}

/// A way of choosing the number of runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Design {
    Fixed { runs: u32 },
    Auto { precision_pct: f64 },
}

impl std::fmt::Display for Design {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Design::Fixed { runs } => write!(f, "fixed {runs} runs"),
            Design::Auto { precision_pct } => write!(f, "auto ±{precision_pct} %"),
        }
    }
}

/// How often a design called a difference, over the simulated cells.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesignRate {
    pub design: Design,
    pub cells: usize,
    /// Cells whose verdict was faster or slower.
    pub positives: usize,
    pub rate: f64,
    /// Wilson 95 % interval of the rate.
    pub rate_low: f64,
    pub rate_high: f64,
    /// Runs per series at the verdict, on average.
    pub mean_runs: f64,
    /// Cells that stopped before `max_runs` (auto only; fixed: 0).
    pub stopped_early: usize,
}

/// One shape's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeResult {
    pub shape: Shape,
    pub true_ratio: f64,
    pub designs: Vec<DesignRate>,
}

/// One simulated cell: per design, the runs at its verdict and whether it called a difference.
type CellOutcome = Vec<(u32, bool)>;

/// The designs of `cfg`, in order: fixed counts, then the rule per precision.
fn designs(cfg: &SimConfig) -> Vec<Design> {
    let fixed = cfg.fixed_runs.iter().map(|&runs| Design::Fixed { runs });
    let auto = cfg
        .precisions
        .iter()
        .map(|&precision_pct| Design::Auto { precision_pct });
    fixed.chain(auto).collect()
}

/// Simulates `cfg.cells` cells of `cfg.shape` and counts each design's verdicts.
pub fn simulate(cfg: &SimConfig) -> Result<ShapeResult> {
    anyhow::ensure!(cfg.cells > 0, "--cells 0: simulate at least one cell");
    anyhow::ensure!(
        cfg.true_ratio.is_finite() && cfg.true_ratio > 0.0,
        "--true-ratio {}: give a positive ratio (1: no difference)",
        cfg.true_ratio
    );
    if let Some(n) = cfg.fixed_runs.iter().find(|&&n| n < 3 || n > cfg.max_runs) {
        anyhow::bail!(
            "--fixed-runs {n}: give counts from 3 to --max-runs {}",
            cfg.max_runs
        );
    }
    let rules = cfg
        .precisions
        .iter()
        .map(|&p| Adaptive::new(cfg.min_runs, cfg.max_runs, p))
        .collect::<Result<Vec<_>>>()?;
    let threads = cfg.threads.clamp(1, cfg.cells);
    let outcomes: Vec<CellOutcome> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let rules = &rules;
                scope.spawn(move || {
                    (t..cfg.cells)
                        .step_by(threads)
                        .map(|i| simulate_cell(cfg, rules, i).map(|o| (i, o)))
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        let mut all = Vec::with_capacity(cfg.cells);
        for w in workers {
            let part = w
                .join()
                .map_err(|_| anyhow::anyhow!("a simulation thread panicked"))??;
            all.extend(part);
        }
        all.sort_by_key(|(i, _)| *i);
        Ok::<_, anyhow::Error>(all.into_iter().map(|(_, o)| o).collect())
    })?;
    let designs = designs(cfg)
        .into_iter()
        .enumerate()
        .map(|(d, design)| tally(design, &outcomes, d, cfg.max_runs))
        .collect::<Result<Vec<_>>>()?;
    Ok(ShapeResult {
        shape: cfg.shape,
        true_ratio: cfg.true_ratio,
        designs,
    })
}

/// Design `d`'s rate over the cells.
fn tally(design: Design, outcomes: &[CellOutcome], d: usize, max_runs: u32) -> Result<DesignRate> {
    let cells = outcomes.len();
    let positives = outcomes.iter().filter(|o| o[d].1).count();
    let (rate_low, rate_high) = wilson_interval(positives as u64, cells as u64)?;
    let runs: u32 = outcomes.iter().map(|o| o[d].0).sum();
    let stopped_early = match design {
        Design::Fixed { .. } => 0,
        Design::Auto { .. } => outcomes.iter().filter(|o| o[d].0 < max_runs).count(),
    };
    Ok(DesignRate {
        design,
        cells,
        positives,
        rate: positives as f64 / cells as f64,
        rate_low,
        rate_high,
        mean_runs: f64::from(runs) / cells as f64,
        stopped_early,
    })
}

/// The `max_runs` rounds of cell `i`: h2 and h3, one run each per round.
fn cell_rows(cfg: &SimConfig, i: usize) -> Vec<RunRow> {
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(cfg.seed, &format!("cell {i}")));
    let mut rows = Vec::new();
    for round in 1..=cfg.max_runs {
        for (variant, median) in [("h2", MEDIAN_MS), ("h3", MEDIAN_MS * cfg.true_ratio)] {
            let ms = cfg.shape.draw(&mut rng, median);
            let id = format!("sim-page-r{round:02}-{variant}");
            let mut row = RunRow::measured(&id, "sim", "page", SERVER, variant, round);
            if ms < TIMEOUT_MS {
                row.set(&metric_registry::COMPLETION_MS, Some(ms));
            } else {
                row.outcome = Outcome::Dnf;
            }
            rows.push(row);
        }
    }
    rows
}

/// Simulates cell `i`: every design's runs at its verdict and whether it called a difference.
fn simulate_cell(cfg: &SimConfig, rules: &[Adaptive], i: usize) -> Result<CellOutcome> {
    let rows = cell_rows(cfg, i);
    let seed = derive_seed(cfg.seed, &format!("statistics {i}"));
    let cell = Cell {
        profile: "sim".into(),
        workload: "page".into(),
    };
    let mut verdicts: BTreeMap<u32, bool> = BTreeMap::new();
    let mut called = |runs: u32| -> Result<bool> {
        if let Some(&v) = verdicts.get(&runs) {
            return Ok(v);
        }
        let v = difference_called(&rows, runs, seed, cfg.resamples)?;
        verdicts.insert(runs, v);
        Ok(v)
    };
    let mut out = Vec::new();
    for &runs in &cfg.fixed_runs {
        out.push((runs, called(runs)?));
    }
    for rule in rules {
        let ctx = RuleContext {
            adaptive: *rule,
            server_order: vec![SERVER.into()],
            seed,
            resamples: cfg.resamples,
            timeout_ms: TIMEOUT_MS,
        };
        let runs = stopping_round(&rows, &cell, &ctx)?;
        out.push((runs, called(runs)?));
    }
    Ok(out)
}

/// The rounds a cell runs under the rule, as the matrix asks it: after each round from
/// `min_runs` on, stop when precise; at `max_runs` stop anyway.
pub fn stopping_round(rows: &[RunRow], cell: &Cell, ctx: &RuleContext) -> Result<u32> {
    let a = ctx.adaptive;
    for rounds in a.min_runs..a.max_runs {
        if stopping_rule::judge(rows, cell, rounds, ctx)?.precise {
            return Ok(rounds);
        }
    }
    Ok(a.max_runs)
}

/// Whether the summary of the first `runs` rounds calls h3 faster or slower than h2.
fn difference_called(rows: &[RunRow], runs: u32, seed: u64, resamples: usize) -> Result<bool> {
    let upto: Vec<RunRow> = rows.iter().filter(|r| r.round <= runs).cloned().collect();
    let s = summary::summarize_runs(&upto, seed, resamples, &[SERVER.into()], TIMEOUT_MS)?;
    let c = s
        .comparisons
        .iter()
        .find(|c| c.a.name() == "h3" && c.b.name() == "h2")
        .context("the simulated cell has no h3 vs h2 comparison")?;
    Ok(matches!(
        c.comparison.verdict,
        Verdict::Faster | Verdict::Slower
    ))
}

/// The results as a Markdown table.
pub fn table(results: &[ShapeResult], max_runs: u32) -> String {
    let mut out = format!(
        "| distribution | design | differences called | rate [95 % CI] | mean runs per series | stopped before {max_runs} |\n|---|---|---|---|---|---|\n"
    );
    for r in results {
        for d in &r.designs {
            let early = match d.design {
                Design::Fixed { .. } => "—".to_string(),
                Design::Auto { .. } => {
                    format!("{:.0} %", 100.0 * d.stopped_early as f64 / d.cells as f64)
                }
            };
            out.push_str(&format!(
                "| {} | {} | {} of {} | {:.1} % [{:.1}–{:.1} %] | {:.1} | {early} |\n",
                r.shape.describe(),
                d.design,
                d.positives,
                d.cells,
                100.0 * d.rate,
                100.0 * d.rate_low,
                100.0 * d.rate_high,
                d.mean_runs
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(true_ratio: f64, threads: usize) -> SimConfig {
        SimConfig {
            shape: Shape::LogNormal { cv: 0.05 },
            cells: 12,
            seed: 7,
            min_runs: 5,
            max_runs: 12,
            precisions: vec![5.0],
            fixed_runs: vec![10],
            resamples: 500,
            true_ratio,
            threads,
        }
    }

    #[test]
    fn deterministic_whatever_the_threads() {
        let one = simulate(&config(1.0, 1)).unwrap();
        assert_eq!(one, simulate(&config(1.0, 2)).unwrap());
        assert_eq!(one.designs.len(), 2);
        assert_eq!(one.designs[0].design, Design::Fixed { runs: 10 });
        assert_eq!(one.designs[0].mean_runs, 10.0);
        let auto = &one.designs[1];
        assert!(auto.mean_runs >= 5.0 && auto.mean_runs <= 12.0, "{auto:?}");
        assert!(table(std::slice::from_ref(&one), 12).contains("| auto ±5 % |"));
    }

    #[test]
    fn a_true_difference_is_called_almost_always() {
        // h3 30 % faster with a 5 % spread: every design must see it.
        let r = simulate(&config(0.7, 2)).unwrap();
        for d in &r.designs {
            assert!(d.rate >= 0.9, "{d:?}");
        }
    }

    #[test]
    fn shapes_parse_and_bad_ones_name_the_flag() {
        assert_eq!(
            "lognormal10".parse::<Shape>().unwrap(),
            Shape::LogNormal { cv: 0.1 }
        );
        assert_eq!("stalls".parse::<Shape>().unwrap(), Shape::Stalls);
        let e = "normal".parse::<Shape>().unwrap_err().to_string();
        assert!(e.contains("--shapes"), "{e}");
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let draws: Vec<f64> = (0..2000)
            .map(|_| Shape::Stalls.draw(&mut rng, 1000.0))
            .collect();
        let stalled = draws.iter().filter(|&&x| x > 1250.0).count();
        assert!((150..=260).contains(&stalled), "{stalled}");
    }
}
