//! `pagebench bench concurrency`: does walking a plan on concurrent lanes measure what a serial
//! walk does? The same plan twice — into `serial/` one run at a time, into `concurrent/` on
//! lanes (`--jobs N`: N lanes sharing the machine whatever their need, what sharing does;
//! `--jobs auto`: as `matrix --jobs auto` walks, rounds sharing by their measured need, what a
//! user gets) — interleaved in blocks of `--block-rounds` rounds (warm-ups first; then the
//! first block serial then concurrent, the second concurrent then serial, …, so a drifting
//! machine weighs on both alike). A planned attempt meets the same link
//! draws (loss, jitter) in both walks, so each round of a series is a pair: per series, the
//! median of the pairs' ratios (concurrent ÷ serial headline), its 90 % interval and a two
//! one-sided test of equivalence within ±`margin`
//! ([`crate::support::stats::paired_ratio_equivalence`]); the unpaired ratio of medians beside
//! it. Both directories are ordinary results directories (`report`, `compare` read them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Serialize;

use crate::evidence::validate::Outcome;
use crate::matrix::lanes::{Jobs, MAX_JOBS};
use crate::matrix::request::{self, MatrixRequest};
use crate::results::rows::{final_attempts, RunRow, SeriesKey};
use crate::results::summary;
use crate::support::stats::{self, BootstrapConfig, Equivalence};

/// What to measure: the matrix to walk both ways (its `out` is the bench's directory, its
/// `jobs` unused), and how.
pub struct ConcurrencyBenchRequest {
    pub matrix: MatrixRequest,
    /// The concurrent walk's lanes: [`Jobs::Forced`] or [`Jobs::Auto`] ([`parse_jobs`]).
    pub jobs: Jobs,
    /// ±margin of the equivalence test (0.05: ±5 %).
    pub margin: f64,
    /// Measured rounds per block: more put more light rounds side by side on `--jobs auto`
    /// (a block of one round has one light unit per light cell).
    pub block_rounds: u32,
}

/// One series, serially and concurrently.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesEquivalence {
    pub series: String,
    pub serial_valid: usize,
    pub serial_median_ms: Option<f64>,
    pub concurrent_valid: usize,
    pub concurrent_median_ms: Option<f64>,
    /// Rounds measured both ways.
    pub pairs: usize,
    /// The paired TOST; None with fewer than 3 pairs.
    pub equivalence: Option<Equivalence>,
}

/// The bench's `--jobs`: `auto` (the lanes `matrix --jobs auto` walks on) or 2 to
/// [`MAX_JOBS`] lanes that share whatever their need.
pub fn parse_jobs(s: &str) -> Result<Jobs, String> {
    match s.trim() {
        "auto" => Ok(Jobs::Auto),
        n => match n.parse::<usize>() {
            Ok(n @ 2..=MAX_JOBS) => Ok(Jobs::Forced(n)),
            _ => Err(format!(
                "--jobs {n:?}: give 2 to {MAX_JOBS} lanes that share the machine whatever their \
                 need, or auto (rounds share as `matrix --jobs auto` lets them)"
            )),
        },
    }
}

/// A sentence naming how the concurrent walk shared the machine.
fn describe(jobs: Jobs) -> String {
    match jobs {
        Jobs::Forced(n) => format!("{n} lanes that shared the machine whatever their need"),
        _ => "`--jobs auto`: rounds shared the machine by their measured CPU need, as a matrix \
              walks them"
            .into(),
    }
}

/// The blocks, each walked serially and concurrently: warm-ups (0), then the measured rounds
/// `per_block` at a time; each as the last round it walks to.
fn blocks(runs: u32, per_block: u32) -> impl Iterator<Item = (u32, [bool; 2])> {
    let per_block = per_block.max(1);
    (0..=runs.div_ceil(per_block)).map(move |b| {
        // true: concurrent. Alternate which goes first from round to round.
        let order = if b % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        ((b * per_block).min(runs), order)
    })
}

/// Walks the blocks into `<out>/serial` and `<out>/concurrent`; returns the table.
pub fn run(req: &ConcurrencyBenchRequest, out: &Path) -> Result<Vec<SeriesEquivalence>> {
    let dirs = [out.join("serial"), out.join("concurrent")];
    for (b, order) in blocks(req.matrix.runs, req.block_rounds) {
        for concurrent in order {
            let dir = &dirs[usize::from(concurrent)];
            let m = MatrixRequest {
                out: Some(dir.clone()),
                resume: dir
                    .join(crate::results::store::META)
                    .is_file()
                    .then(|| dir.clone()),
                jobs: if concurrent { req.jobs } else { Jobs::Fixed(1) },
                until_round: Some(b),
                // The machine is checked once, before the first block.
                machine_check: if b == 0 && !concurrent {
                    req.matrix.machine_check
                } else {
                    std::time::Duration::ZERO
                },
                ..req.matrix.clone()
            };
            request::run(&m)?;
            if crate::support::signals::interrupted() {
                anyhow::bail!(
                    "interrupted: the blocks so far are in {} (run the bench again for a new one)",
                    out.display()
                );
            }
        }
    }
    let serial = summary::read_runs(&dirs[0])?;
    let concurrent = summary::read_runs(&dirs[1])?;
    let table = analyse(
        &serial,
        &concurrent,
        req.margin,
        req.matrix.seed,
        req.matrix.timeout.as_secs_f64() * 1e3,
    );
    let text = format!(
        "Concurrent walk: {}; blocks of {} measured round(s), each walked both ways, \
         alternating which goes first.\n\n{}",
        describe(req.jobs),
        req.block_rounds.max(1),
        render(&table, req.margin)
    );
    crate::support::atomic::write_file(&out.join("concurrency.md"), text.as_bytes())?;
    crate::support::atomic::write_file(
        &out.join("concurrency.json"),
        serde_json::to_string_pretty(&table)?.as_bytes(),
    )?;
    Ok(table)
}

/// Each series' measured headline times by planned run (a DNF at `timeout_ms`), final
/// attempts only.
fn samples(rows: &[RunRow], timeout_ms: f64) -> BTreeMap<String, BTreeMap<String, f64>> {
    let mut out: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for r in final_attempts(rows) {
        if r.phase != crate::config::identity::Phase::Measure {
            continue;
        }
        let v = match r.outcome {
            Outcome::Valid => r.completion_ms(),
            Outcome::Dnf => Some(timeout_ms),
            Outcome::Invalid => None,
        };
        if let Some(v) = v.filter(|v| *v > 0.0) {
            out.entry(SeriesKey::of(r).label())
                .or_default()
                .insert(r.plan_id.clone(), v);
        }
    }
    out
}

/// The table (pure): every series of either walk.
pub fn analyse(
    serial: &[RunRow],
    concurrent: &[RunRow],
    margin: f64,
    seed: u64,
    timeout_ms: f64,
) -> Vec<SeriesEquivalence> {
    let (s, c) = (samples(serial, timeout_ms), samples(concurrent, timeout_ms));
    let empty = BTreeMap::new();
    let mut names: Vec<&String> = s.keys().chain(c.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let (ser, con) = (s.get(name).unwrap_or(&empty), c.get(name).unwrap_or(&empty));
            let pairs: Vec<(f64, f64)> = con
                .iter()
                .filter_map(|(id, v)| ser.get(id).map(|w| (*v, *w)))
                .collect();
            let config = BootstrapConfig::default().with_seed(stats::derive_seed(seed, name));
            let equivalence = (pairs.len() >= 3)
                .then(|| stats::paired_ratio_equivalence(&pairs, margin, 0.05, config).ok())
                .flatten();
            let values = |m: &BTreeMap<String, f64>| m.values().copied().collect::<Vec<f64>>();
            SeriesEquivalence {
                series: name.clone(),
                serial_valid: ser.len(),
                serial_median_ms: stats::median(&values(ser)).ok(),
                concurrent_valid: con.len(),
                concurrent_median_ms: stats::median(&values(con)).ok(),
                pairs: pairs.len(),
                equivalence,
            }
        })
        .collect()
}

/// The table as Markdown, and the verdict over every series.
pub fn render(table: &[SeriesEquivalence], margin: f64) -> String {
    let pct = margin * 100.0;
    let mut out = format!(
        "| series | serial: runs, median (ms) | concurrent: runs, median (ms) | pairs | concurrent ÷ serial, median of pairs [90 % CI] | TOST p (±{pct:.0} %) | equivalent |\n|---|---|---|---|---|---|---|\n"
    );
    let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.0}"));
    for r in table {
        let (ratio, p, verdict) = match &r.equivalence {
            Some(e) => (
                format!("{:.3} [{:.3}, {:.3}]", e.ratio, e.ci.low, e.ci.high),
                format!("{:.3}", e.p),
                if e.equivalent { "yes" } else { "**no**" },
            ),
            None => ("–".into(), "–".into(), "undetermined (< 3 pairs)"),
        };
        out.push_str(&format!(
            "| {} | {}, {} | {}, {} | {} | {ratio} | {p} | {verdict} |\n",
            r.series,
            r.serial_valid,
            ms(r.serial_median_ms),
            r.concurrent_valid,
            ms(r.concurrent_median_ms),
            r.pairs,
        ));
    }
    let passed = table
        .iter()
        .filter(|r| r.equivalence.is_some_and(|e| e.equivalent))
        .count();
    out.push_str(&format!(
        "\n{passed} of {} series equivalent within ±{pct:.0} % (each a TOST at α = 0.05 on the median of the rounds' ratios, the two walks of a round meeting the same link draws; every series must pass on its own, so no correction applies).\n",
        table.len()
    ));
    out
}

/// Where a bench without `--out` writes.
pub fn default_out() -> PathBuf {
    PathBuf::from("results").join(format!(
        "bench-concurrency-{}",
        chrono::Local::now().format("%Y%m%d-%H%M%S")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(series: &[(&str, &[f64])]) -> Vec<RunRow> {
        let mut out = Vec::new();
        for (variant, values) in series {
            for (i, v) in values.iter().enumerate() {
                let id = format!("wired-download-r{:02}-{variant}", i + 1);
                out.push(
                    RunRow::measured(&id, "wired", "download", "embedded", variant, i as u32 + 1)
                        .with_value(&crate::evidence::metric_registry::COMPLETION_MS, Some(*v)),
                );
            }
        }
        out
    }

    #[test]
    fn equal_series_are_equivalent_a_slower_one_is_not_and_a_thin_one_undetermined() {
        let base: Vec<f64> = (0..12).map(|i| 1000.0 + (i % 5) as f64 * 4.0).collect();
        let slower: Vec<f64> = base.iter().map(|v| v * 1.12).collect();
        let serial = rows(&[("h2", &base), ("h3", &base), ("h1", &base[..2])]);
        let concurrent = rows(&[("h2", &base), ("h3", &slower), ("h1", &base[..2])]);
        let t = analyse(&serial, &concurrent, 0.05, 1, 120_000.0);
        let by = |v: &str| t.iter().find(|r| r.series.ends_with(v)).unwrap();
        assert!(by("/h2").equivalence.unwrap().equivalent);
        let h3 = by("/h3").equivalence.unwrap();
        assert!(!h3.equivalent && (h3.ratio - 1.12).abs() < 0.01, "{h3:?}");
        assert!(by("/h1").equivalence.is_none());
        let text = render(&t, 0.05);
        assert!(
            text.contains("1 of 3 series equivalent within ±5 %"),
            "{text}"
        );
        assert!(text.contains("undetermined"), "{text}");
    }

    #[test]
    fn jobs_are_auto_or_lanes_that_share_whatever_their_need() {
        assert_eq!(parse_jobs("auto"), Ok(Jobs::Auto));
        assert_eq!(parse_jobs("3"), Ok(Jobs::Forced(3)));
        for bad in ["1", "0", "17", "three"] {
            let e = parse_jobs(bad).unwrap_err();
            assert!(e.contains("--jobs") && e.contains("auto"), "{e}");
        }
        assert!(describe(Jobs::Auto).contains("measured CPU need"));
        assert!(describe(Jobs::Forced(6)).starts_with("6 lanes"));
    }

    #[test]
    fn blocks_of_two_rounds_end_at_the_last_round() {
        let b: Vec<(u32, [bool; 2])> = blocks(5, 2).collect();
        assert_eq!(
            b,
            [
                (0, [false, true]),
                (2, [true, false]),
                (4, [false, true]),
                (5, [true, false])
            ]
        );
    }

    #[test]
    fn blocks_start_with_the_warm_ups_and_alternate_who_goes_first() {
        let b: Vec<(u32, [bool; 2])> = blocks(3, 1).collect();
        assert_eq!(
            b,
            [
                (0, [false, true]),
                (1, [true, false]),
                (2, [false, true]),
                (3, [true, false])
            ]
        );
    }
}
