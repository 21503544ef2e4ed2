//! `pagebench compare BASE NEW`: the same cells measured twice — before and after a server
//! change, a new browser, another machine — series by series. For each series in both
//! directories: the ratio of medians NEW / BASE with its bootstrap 95 % CI, the Mann-Whitney U
//! test, Holm over every series compared, and a verdict by the matrix's own rule (significant
//! after Holm *and* the CI on one side of 1). Writes `compare.md`, `compare.html`,
//! `compare.csv` and `compare.json`, and gives CI an exit code: with `--fail-if-slower PCT`,
//! pagebench exits 3 when a series is slower (its verdict) by more than PCT % (its ratio).
//!
//! Each series is compared with itself only; the runs of BASE and NEW were not interleaved
//! with each other, so a drift of the machine between the two matrices shows up as a change —
//! the report says so, and lists every way the two matrices' setups differ.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::atomic;
use crate::registry;
use crate::report::doc::{self, Block, Cell, CellClass, Document, Table};
use crate::results::shards::Fingerprint;
use crate::results::store::{read_meta, Meta};
use crate::results::summary::{self, fmt_ratio, fmt_series, SeriesKey};
use crate::stats::{
    self, apply_holm, compare, derive_seed, BootstrapConfig, CompareConfig, Comparison,
    SeriesInput, SeriesSummary, Verdict,
};

/// The exit code of `compare --fail-if-slower` when a series got slower.
pub const SLOWER_EXIT: u8 = 3;

/// One series in both directories.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesChange {
    pub key: SeriesKey,
    pub base: SeriesSummary,
    pub new: SeriesSummary,
    /// NEW against BASE: ratio = median(new) / median(base), Holm over every series.
    pub comparison: Comparison,
}

/// What `compare` found.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub base: String,
    pub new: String,
    pub changes: Vec<SeriesChange>,
    /// Series in one directory only (not compared).
    pub only_base: Vec<SeriesKey>,
    pub only_new: Vec<SeriesKey>,
    /// How the two matrices' setups differ (plan, knobs, machine): the change under test and
    /// anything else that changed with it.
    pub setup_differences: Vec<String>,
    pub machine_differences: Vec<String>,
    /// Tested comparisons (the Holm family).
    pub holm_family: usize,
    pub fail_if_slower_pct: Option<f64>,
    /// The series that make `--fail-if-slower` fail.
    pub failing: Vec<SeriesKey>,
}

/// The headline inputs of `rows`' series (counted, measured attempts; DNFs censored at the
/// timeout), as the summary makes them.
fn inputs(
    rows: &[summary::RunRow],
    timeout_ms: f64,
) -> (Vec<SeriesKey>, BTreeMap<SeriesKey, SeriesInput>) {
    summary::series_inputs(rows, &registry::COMPLETION_MS, timeout_ms)
}

/// Compares every series present in both row sets (pure).
pub fn compare_rows(
    base: &[summary::RunRow],
    new: &[summary::RunRow],
    base_timeout_ms: f64,
    new_timeout_ms: f64,
    seed: u64,
    resamples: usize,
) -> Result<(Vec<SeriesChange>, Vec<SeriesKey>, Vec<SeriesKey>)> {
    let (base_order, base_in) = inputs(base, base_timeout_ms);
    let (new_order, new_in) = inputs(new, new_timeout_ms);
    let boot = |label: &str| {
        BootstrapConfig {
            resamples,
            ..BootstrapConfig::default()
        }
        .with_seed(derive_seed(seed, label))
    };
    let mut changes = Vec::new();
    for key in &new_order {
        let Some(b) = base_in.get(key) else { continue };
        let n = &new_in[key];
        let label = format!("compare {}", key.label());
        let cfg = CompareConfig {
            alpha: 0.05,
            bootstrap: boot(&label),
        };
        changes.push(SeriesChange {
            key: key.clone(),
            base: stats::summarize(b, &boot(&format!("base {}", key.label())))?,
            new: stats::summarize(n, &boot(&format!("new {}", key.label())))?,
            comparison: compare(n, b, &cfg).with_context(|| label.clone())?,
        });
    }
    let mut cmp: Vec<Comparison> = changes.iter().map(|c| c.comparison.clone()).collect();
    apply_holm(&mut cmp)?;
    for (c, adjusted) in changes.iter_mut().zip(cmp) {
        c.comparison = adjusted;
    }
    let only_base = base_order
        .into_iter()
        .filter(|k| !new_in.contains_key(k))
        .collect();
    let only_new = new_order
        .into_iter()
        .filter(|k| !base_in.contains_key(k))
        .collect();
    Ok((changes, only_base, only_new))
}

/// The series `--fail-if-slower pct` fails on: slower by the verdict, and by more than `pct` %
/// by the ratio.
pub fn failing(changes: &[SeriesChange], pct: f64) -> Vec<SeriesKey> {
    changes
        .iter()
        .filter(|c| {
            c.comparison.verdict == Verdict::Slower
                && c.comparison.ratio.is_some_and(|r| r > 1.0 + pct / 100.0)
        })
        .map(|c| c.key.clone())
        .collect()
}

/// How the setups of two matrices differ: the plan (each option), server knobs one by one,
/// the stored options.
fn setup_differences(base: &Meta, new: &Meta) -> Vec<String> {
    let mut out: Vec<String> = base
        .plan_mismatch(new)
        .map(|d| d.split("; ").map(str::to_string).collect())
        .unwrap_or_default();
    // The knobs, named (plan_mismatch says only that they differ).
    if let (Some(b), Some(n)) = (&base.options, &new.options) {
        let map = |k: &crate::server::ServerKnobs| match serde_json::to_value(k) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        let (b, n) = (map(&b.knobs), map(&n.knobs));
        let mut keys: Vec<&String> = b.keys().chain(n.keys()).collect();
        keys.sort();
        keys.dedup();
        let show = |v: Option<&serde_json::Value>| v.map_or("unset".to_string(), |v| v.to_string());
        for k in keys {
            if b.get(k) != n.get(k) {
                out.push(format!(
                    "server knob {k}: {} (base) vs {} (new)",
                    show(b.get(k)),
                    show(n.get(k))
                ));
            }
        }
    }
    // Named knobs say more than the plan's generic line about them.
    if out.iter().any(|d| d.starts_with("server knob")) {
        out.retain(|d| d != "server configuration (server or knobs) differs");
    }
    out
}

/// Compares the results directories `base` and `new`.
pub fn baseline(base: &Path, new: &Path, fail_if_slower_pct: Option<f64>) -> Result<Baseline> {
    let (bm, nm) = (read_meta(base)?, read_meta(new)?);
    let (br, nr) = (summary::read_runs(base)?, summary::read_runs(new)?);
    let (changes, only_base, only_new) = compare_rows(
        &br,
        &nr,
        bm.timeout_s * 1e3,
        nm.timeout_s * 1e3,
        nm.plan.seed,
        stats::DEFAULT_RESAMPLES,
    )?;
    if changes.is_empty() {
        anyhow::bail!(
            "{} and {} have no series in common (profile, workload, server, browser and protocol): compare two matrices of the same cells",
            base.display(),
            new.display()
        );
    }
    let machine_differences = Fingerprint::of(&bm)
        .differences(&Fingerprint::of(&nm))
        .into_iter()
        .map(|(f, a, b)| format!("{f}: {a} (base) vs {b} (new)"))
        .collect();
    Ok(Baseline {
        base: base.display().to_string(),
        new: new.display().to_string(),
        holm_family: changes.iter().filter(|c| c.comparison.p.is_some()).count(),
        failing: fail_if_slower_pct.map_or(Vec::new(), |p| failing(&changes, p)),
        changes,
        only_base,
        only_new,
        setup_differences: setup_differences(&bm, &nm),
        machine_differences,
        fail_if_slower_pct,
    })
}

fn verdict_cell(c: &Comparison) -> Cell {
    match &c.verdict {
        Verdict::Faster => Cell::new("faster", CellClass::Faster),
        Verdict::Slower => Cell::new("slower", CellClass::Slower),
        Verdict::NoSignificantDifference => Cell::new("n.s.", CellClass::NotSignificant),
        Verdict::Undetermined(r) => {
            Cell::new(format!("undetermined ({r})"), CellClass::Undetermined)
        }
        Verdict::FailsMore { side } => {
            Cell::new(format!("{side} fails more often"), CellClass::Slower)
        }
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |x| format!("{x:.digits$}"))
}

/// The comparison as a document (the page `compare.md` / `compare.html`).
pub fn document(b: &Baseline) -> Document {
    let mut d = Document {
        title: "pagebench compare".into(),
        blocks: Vec::new(),
    };
    let count = |v: &Verdict| {
        b.changes
            .iter()
            .filter(|c| &c.comparison.verdict == v)
            .count()
    };
    d.para(format!(
        "`{}` (new) against `{}` (base): {} series compared, {} faster, {} slower, {} without a significant difference (Mann-Whitney U, Holm over the {} tested series, and the ratio's 95 % CI on one side of 1).",
        b.new,
        b.base,
        b.changes.len(),
        count(&Verdict::Faster),
        count(&Verdict::Slower),
        count(&Verdict::NoSignificantDifference),
        b.holm_family
    ));
    if let Some(p) = b.fail_if_slower_pct {
        d.para(if b.failing.is_empty() {
            format!("`--fail-if-slower {p}`: no series is slower by more than {p} %: passed.")
        } else {
            format!(
                "`--fail-if-slower {p}`: **failed** — slower by more than {p} %: {}.",
                b.failing
                    .iter()
                    .map(|k| format!("`{}`", k.label()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
    }
    d.heading(2, "What differs between the two", "differences");
    let mut diffs: Vec<String> = b.setup_differences.clone();
    diffs.extend(
        b.machine_differences
            .iter()
            .map(|m| format!("machine: {m}")),
    );
    if diffs.is_empty() {
        diffs.push("Nothing in the plan, the servers' knobs or the machine: a change between the two is the machine drifting, or chance.".into());
    }
    diffs.push("The runs of the two matrices were not interleaved with each other: a machine that drifted between them shows up as a change in every series.".into());
    d.blocks.push(Block::List(diffs));
    d.heading(2, "Series", "series");
    let rows = b
        .changes
        .iter()
        .map(|c| {
            let x = &c.comparison;
            let mut row = vec![
                Cell::label(&c.key.profile),
                Cell::label(&c.key.workload),
                Cell::label(c.key.server.to_string()),
            ];
            row.push(Cell::label(c.key.browser.name()));
            row.push(Cell::label(c.key.variant.name()));
            row.push(Cell::text(fmt_series(&c.base)));
            row.push(Cell::text(fmt_series(&c.new)));
            row.push(Cell::text(
                x.ratio.map_or("—".into(), |r| fmt_ratio(r, x.ratio_bound)),
            ));
            row.push(Cell::text(match (x.ratio_ci_low, x.ratio_ci_high) {
                (Some(lo), Some(hi)) => format!("{lo:.2}–{hi:.2}"),
                _ => "—".into(),
            }));
            row.push(Cell::text(opt(x.p, 4)));
            row.push(Cell::text(opt(x.p_holm, 4)));
            row.push(verdict_cell(x));
            row
        })
        .collect();
    d.blocks.push(Block::Table(Table {
        id: "compare-series".into(),
        title: "New against base, per series".into(),
        intro: vec!["Medians of loadEventEnd (a transfer's completion) in ms with their 95 % CI; ratio = new / base (below 1: new is faster).".into()],
        header: [
            "profile", "workload", "server", "browser", "protocol", "base (ms)", "new (ms)",
            "ratio", "95 % CI", "p", "p (Holm)", "verdict",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows,
        notes: vec![],
    }));
    if !b.only_base.is_empty() || !b.only_new.is_empty() {
        d.heading(2, "Not compared", "not-compared");
        let mut l: Vec<String> = b
            .only_base
            .iter()
            .map(|k| format!("`{}`: in base only", k.label()))
            .collect();
        l.extend(
            b.only_new
                .iter()
                .map(|k| format!("`{}`: in new only", k.label())),
        );
        d.blocks.push(Block::List(l));
    }
    d
}

/// `compare.csv`: one row per series compared.
fn csv_bytes(b: &Baseline) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "profile",
        "workload",
        "server",
        "browser",
        "variant",
        "n_base",
        "n_new",
        "median_base_ms",
        "median_new_ms",
        "ratio",
        "ratio_bound",
        "ratio_ci_low",
        "ratio_ci_high",
        "p",
        "p_holm",
        "verdict",
    ])?;
    let med = |s: &SeriesSummary| match s.median {
        Some(stats::Censored::Ms(x)) => format!("{x:.3}"),
        Some(stats::Censored::Dnf) => "dnf".into(),
        None => String::new(),
    };
    let f = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
    for c in &b.changes {
        let x = &c.comparison;
        w.write_record([
            c.key.profile.clone(),
            c.key.workload.clone(),
            c.key.server.to_string(),
            c.key.browser.name().to_string(),
            c.key.variant.name(),
            (c.base.n_valid + c.base.n_dnf).to_string(),
            (c.new.n_valid + c.new.n_dnf).to_string(),
            med(&c.base),
            med(&c.new),
            f(x.ratio),
            serde_json::to_value(x.ratio_bound)?
                .as_str()
                .unwrap_or_default()
                .to_string(),
            f(x.ratio_ci_low),
            f(x.ratio_ci_high),
            f(x.p),
            f(x.p_holm),
            x.verdict.to_string(),
        ])?;
    }
    Ok(w.into_inner()?)
}

/// Writes `compare.{md,html,csv,json}` into `out`; returns their paths.
pub fn write(out: &Path, b: &Baseline) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let d = document(b);
    let files = [
        ("compare.md", doc::to_markdown(&d).into_bytes()),
        (
            "compare.html",
            doc::to_html(&d, crate::report::draw::FONT_TTF).into_bytes(),
        ),
        ("compare.csv", csv_bytes(b)?),
        (
            "compare.json",
            (serde_json::to_string_pretty(b)? + "\n").into_bytes(),
        ),
    ];
    let mut paths = Vec::new();
    for (name, bytes) in files {
        let p = out.join(name);
        atomic::write_file(&p, &bytes)?;
        paths.push(p);
    }
    Ok(paths)
}

/// The comparison for the terminal: one line per series.
pub fn terminal(b: &Baseline) -> String {
    let mut out = String::new();
    for c in &b.changes {
        let x = &c.comparison;
        out.push_str(&format!(
            "{:<48} {:>12} → {:<12} ratio {} [{}–{}] p_holm {}  {}\n",
            c.key.label(),
            c.base.median.map_or("—".into(), |m| m.to_string()),
            c.new.median.map_or("—".into(), |m| m.to_string()),
            x.ratio.map_or("—".into(), |r| fmt_ratio(r, x.ratio_bound)),
            opt(x.ratio_ci_low, 2),
            opt(x.ratio_ci_high, 2),
            opt(x.p_holm, 4),
            x.verdict
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::summary::RunRow;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// 10 rounds of h2 and h3 on wired page10 and mobile download, h3's download at `h3_dl`
    /// times its base.
    fn rows(seed: u64, h3_download: f64) -> Vec<RunRow> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        for round in 1..=10 {
            for (profile, workload, base) in
                [("wired", "page10", 280.0), ("mobile", "download", 9000.0)]
            {
                for v in ["h2", "h3"] {
                    let factor = if v == "h3" && workload == "download" {
                        h3_download
                    } else {
                        1.0
                    };
                    let noise = 1.0 + 0.04 * (rng.random::<f64>() - 0.5);
                    let id = format!("{profile}-{workload}-r{round:02}-{v}");
                    out.push(
                        RunRow::measured(&id, profile, workload, "embedded", v, round)
                            .with_value(&registry::COMPLETION_MS, Some(base * factor * noise)),
                    );
                }
            }
        }
        out
    }

    #[test]
    fn a_faster_series_is_found_and_the_rest_are_not_significant() {
        let (changes, ob, on) =
            compare_rows(&rows(1, 1.0), &rows(2, 0.2), 120e3, 120e3, 1, 2_000).unwrap();
        assert!(ob.is_empty() && on.is_empty());
        assert_eq!(changes.len(), 4);
        for c in &changes {
            let expected = if c.key.workload == "download" && c.key.variant.name() == "h3" {
                Verdict::Faster
            } else {
                Verdict::NoSignificantDifference
            };
            assert_eq!(c.comparison.verdict, expected, "{}", c.key.label());
        }
        let dl = changes
            .iter()
            .find(|c| c.key.workload == "download" && c.key.variant.name() == "h3")
            .unwrap();
        assert!((dl.comparison.ratio.unwrap() - 0.2).abs() < 0.02);
        // Holm over the four.
        assert!(dl.comparison.p_holm.unwrap() >= dl.comparison.p.unwrap());
        assert!(failing(&changes, 5.0).is_empty());
    }

    #[test]
    fn fail_if_slower_needs_the_verdict_and_the_size() {
        let (changes, _, _) =
            compare_rows(&rows(1, 1.0), &rows(2, 1.3), 120e3, 120e3, 1, 2_000).unwrap();
        let slow: Vec<String> = failing(&changes, 10.0).iter().map(|k| k.label()).collect();
        assert_eq!(slow, ["mobile/download/embedded/h3"]);
        // Slower, but by less than asked.
        assert!(failing(&changes, 40.0).is_empty());
    }

    #[test]
    fn series_in_one_directory_only_are_listed_not_compared() {
        let base = rows(1, 1.0);
        let new: Vec<RunRow> = rows(2, 1.0)
            .into_iter()
            .filter(|r| r.workload == "page10")
            .collect();
        let (changes, only_base, only_new) =
            compare_rows(&base, &new, 120e3, 120e3, 1, 500).unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(only_base.len(), 2);
        assert!(only_new.is_empty());
        let b = Baseline {
            base: "a".into(),
            new: "b".into(),
            holm_family: 2,
            failing: vec![],
            changes,
            only_base,
            only_new,
            setup_differences: vec![
                "server knob quic_congestion: \"cubic\" (base) vs \"bbr\" (new)".into(),
            ],
            machine_differences: vec![],
            fail_if_slower_pct: Some(5.0),
        };
        let md = doc::to_markdown(&document(&b));
        assert!(
            md.contains("in base only") && md.contains("quic_congestion") && md.contains("passed"),
            "{md}"
        );
        let csv = String::from_utf8(csv_bytes(&b).unwrap()).unwrap();
        assert_eq!(csv.lines().count(), 3);
    }
}
