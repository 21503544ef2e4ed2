//! `pagebench compare BASE NEW`: the same cells measured twice — before and after a server
//! change, a new browser, another machine — series by series. For each series in both
//! directories: the ratio of medians NEW / BASE with its bootstrap 95 % CI, the Mann-Whitney U
//! test, Holm over every series compared, and a verdict by the matrix's own rule (significant
//! after Holm *and* the CI on one side of 1); as the effect size in ms, the Hodges–Lehmann shift
//! NEW − BASE with its distribution-free 95 % CI (finished runs; none when a side has a DNF,
//! whose difference is only bounded). Every attempt counts too: per series, NEW's protocol
//! failures and rejected attempts against BASE's (Fisher's exact test, each a Holm family of
//! its own). Writes `compare.md`, `compare.html`, `compare.csv` and `compare.json`.
//!
//! With `--fail-if-slower PCT` the comparison is a gate for CI ([`gate`]): exit 4 when a series
//! of BASE could not be judged (missing from NEW, no valid or DNF run in NEW, undetermined;
//! `--allow-missing` makes these warnings), exit 3 when a series is slower with the lower bound
//! of its ratio's 95 % CI above `1 + PCT/100`, or fails significantly more often in NEW.
//!
//! Each series is compared with itself only; the runs of BASE and NEW were not interleaved
//! with each other, so a drift of the machine between the two matrices shows up as a change —
//! the report says so, and lists every way the two matrices' setups differ.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::evidence::metric_registry;
use crate::report::doc::{self, Block, Cell, CellClass, Document, Table};
use crate::results::attempts::{self};
use crate::results::store::{read_meta, Meta};
use crate::results::summary::{self, fmt_p, fmt_ratio, fmt_series, SeriesKey};
use crate::support::atomic;
use crate::support::stats::{
    self, apply_holm, apply_holm_rates, compare, derive_seed, hodges_lehmann, BootstrapConfig,
    CompareConfig, Comparison, RateTest, SeriesInput, SeriesSummary, Shift, Verdict,
};

pub mod busy;
pub mod changes;
pub mod gate;

pub use changes::{SeriesChange, ALPHA};

pub use gate::{Gate, GateOutcome, MISSING_EXIT, SLOWER_EXIT};

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
    /// Each side's busyness, and the line the page gives when either was busy.
    pub busy_base: busy::Busyness,
    pub busy_new: busy::Busyness,
    pub busy_difference: Option<String>,
    /// Tested comparisons (the Holm family).
    pub holm_family: usize,
    /// Series with a failure, and with a rejection (their Holm families).
    pub failure_family: usize,
    pub rejection_family: usize,
    /// The `--fail-if-slower` gate's decision (None: not asked).
    pub gate: Option<GateOutcome>,
}

/// The series compared and those in one row set only.
#[derive(Debug, Clone)]
pub struct Compared {
    pub changes: Vec<SeriesChange>,
    pub only_base: Vec<SeriesKey>,
    pub only_new: Vec<SeriesKey>,
    pub failure_family: usize,
    pub rejection_family: usize,
}

/// The headline inputs of `rows`' series (counted, measured attempts; DNFs censored at the
/// timeout), as the summary makes them.
fn inputs(
    rows: &[summary::RunRow],
    timeout_ms: f64,
) -> (Vec<SeriesKey>, BTreeMap<SeriesKey, SeriesInput>) {
    summary::series_inputs(rows, &metric_registry::COMPLETION_MS, timeout_ms)
}

/// NEW − BASE over finished runs, when neither side has a DNF.
fn shift(new: &SeriesInput, base: &SeriesInput) -> Result<Option<Shift>> {
    if new.dnf + base.dnf > 0 || new.values.is_empty() || base.values.is_empty() {
        return Ok(None);
    }
    Ok(Some(hodges_lehmann(&new.values, &base.values, 0.95)?))
}

/// NEW's rate against BASE's.
fn rate(new: (usize, usize), base: (usize, usize)) -> Result<RateTest> {
    Ok(RateTest::new(
        new.0 as u64,
        new.1 as u64,
        base.0 as u64,
        base.1 as u64,
    )?)
}

/// Compares every series present in both row sets (pure).
pub fn compare_rows(
    base: &[summary::RunRow],
    new: &[summary::RunRow],
    base_timeout_ms: f64,
    new_timeout_ms: f64,
    seed: u64,
    resamples: usize,
) -> Result<Compared> {
    let (base_order, base_in) = inputs(base, base_timeout_ms);
    let (new_order, new_in) = inputs(new, new_timeout_ms);
    let (base_acc, new_acc) = (attempts::per_series(base), attempts::per_series(new));
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
            alpha: ALPHA,
            bootstrap: boot(&label),
        };
        let (ab, an) = (
            base_acc.get(key).cloned().unwrap_or_default(),
            new_acc.get(key).cloned().unwrap_or_default(),
        );
        changes.push(SeriesChange {
            key: key.clone(),
            base: stats::summarize(b, &boot(&format!("base {}", key.label())))?,
            new: stats::summarize(n, &boot(&format!("new {}", key.label())))?,
            comparison: compare(n, b, &cfg).with_context(|| label.clone())?,
            shift: shift(n, b).with_context(|| format!("shift of {label}"))?,
            failures: rate(
                (an.failed, an.measured_runs()),
                (ab.failed, ab.measured_runs()),
            )?,
            rejections: rate((an.rejected, an.attempts), (ab.rejected, ab.attempts))?,
            attempts_base: ab,
            attempts_new: an,
        });
    }
    let mut cmp: Vec<Comparison> = changes.iter().map(|c| c.comparison.clone()).collect();
    apply_holm(&mut cmp)?;
    for (c, adjusted) in changes.iter_mut().zip(cmp) {
        c.comparison = adjusted;
    }
    let failure_family = apply_holm_rates(changes.iter_mut().map(|c| &mut c.failures));
    let rejection_family = apply_holm_rates(changes.iter_mut().map(|c| &mut c.rejections));
    let only_base = base_order
        .into_iter()
        .filter(|k| !new_in.contains_key(k))
        .collect();
    let only_new = new_order
        .into_iter()
        .filter(|k| !base_in.contains_key(k))
        .collect();
    Ok(Compared {
        changes,
        only_base,
        only_new,
        failure_family,
        rejection_family,
    })
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
        let map = |k: &crate::embedded_server::ServerKnobs| match serde_json::to_value(k) {
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

/// The comparison of `compared` (BASE at `base`, NEW at `new`), with the gate's decision
/// when one is asked (pure; the setups' differences are left empty).
pub fn assemble(base: &str, new: &str, compared: Compared, gate: Option<Gate>) -> Baseline {
    let mut b = Baseline {
        base: base.into(),
        new: new.into(),
        holm_family: compared
            .changes
            .iter()
            .filter(|c| c.comparison.p.is_some())
            .count(),
        failure_family: compared.failure_family,
        rejection_family: compared.rejection_family,
        changes: compared.changes,
        only_base: compared.only_base,
        only_new: compared.only_new,
        setup_differences: Vec::new(),
        machine_differences: Vec::new(),
        busy_base: busy::Busyness::default(),
        busy_new: busy::Busyness::default(),
        busy_difference: None,
        gate: None,
    };
    b.gate = gate.map(|g| g.decide(&b.changes, &b.only_base));
    b
}

/// Compares the results directories `base` and `new` (and decides `gate`, if given).
pub fn baseline(base: &Path, new: &Path, gate: Option<Gate>) -> Result<Baseline> {
    let (bm, nm) = (read_meta(base)?, read_meta(new)?);
    let (br, nr) = (summary::read_runs(base)?, summary::read_runs(new)?);
    let compared = compare_rows(
        &br,
        &nr,
        bm.timeout_s * 1e3,
        nm.timeout_s * 1e3,
        nm.plan.seed,
        stats::DEFAULT_RESAMPLES,
    )?;
    if compared.changes.is_empty() {
        anyhow::bail!(
            "{} and {} have no series in common (profile, workload, server, browser and protocol): compare two matrices of the same cells",
            base.display(),
            new.display()
        );
    }
    let mut b = assemble(
        &base.display().to_string(),
        &new.display().to_string(),
        compared,
        gate,
    );
    b.machine_differences = bm
        .fingerprint()
        .differences(&nm.fingerprint())
        .into_iter()
        .map(|(f, a, b)| format!("{f}: {a} (base) vs {b} (new)"))
        .collect();
    b.setup_differences = setup_differences(&bm, &nm);
    b.busy_base = busy::Busyness::of(&attempts::per_series(&br), &bm.machine_checks);
    b.busy_new = busy::Busyness::of(&attempts::per_series(&nr), &nm.machine_checks);
    b.busy_difference = busy::difference(&b.busy_base, &b.busy_new);
    Ok(b)
}

fn verdict_cell(c: &Comparison) -> Cell {
    match &c.verdict {
        Verdict::Faster => Cell::new("faster", CellClass::Faster),
        Verdict::Slower => Cell::new("slower", CellClass::Slower),
        Verdict::NoSignificantDifference => Cell::new("n.s.", CellClass::NotSignificant),
        Verdict::Undetermined(r) => Cell::new(
            format!("undetermined ({})", gate::undetermined_words(r)),
            CellClass::Undetermined,
        ),
        Verdict::FailsMore { side } => {
            Cell::new(format!("{side} fails more often"), CellClass::Slower)
        }
    }
}

/// The verdict with an undetermined reason's sides named new and base.
fn verdict_words(v: &Verdict) -> String {
    match v {
        Verdict::Undetermined(r) => format!("undetermined ({})", gate::undetermined_words(r)),
        v => v.to_string(),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |x| format!("{x:.digits$}"))
}

/// `+12.3 [+8.1, +15.0]` (ms), `+12.3 [no CI]`, `—` without a shift.
fn fmt_shift(s: Option<&Shift>) -> String {
    match s {
        None => "—".into(),
        Some(s) => match (s.ci_low, s.ci_high) {
            (Some(lo), Some(hi)) => format!("{:+.1} [{lo:+.1}, {hi:+.1}]", s.estimate),
            _ => format!("{:+.1} [no CI]", s.estimate),
        },
    }
}

/// `0/10 → 5/10` (base → new), with the Holm p when anything happened.
fn fmt_rates(t: &RateTest) -> String {
    let counts = format!(
        "{}/{} → {}/{}",
        t.events_b, t.trials_b, t.events_a, t.trials_a
    );
    if t.any() {
        format!("{counts} (p {})", fmt_p(t.p_holm))
    } else {
        counts
    }
}

/// The gate's paragraphs: its decision, then why it failed and what to read.
fn gate_blocks(d: &mut Document, g: &GateOutcome) {
    let flag = format!(
        "`--fail-if-slower {}{}`",
        g.slower_pct,
        if g.allow_missing {
            " --allow-missing"
        } else {
            ""
        }
    );
    let limit = 1.0 + g.slower_pct / 100.0;
    let unjudged = if g.allow_missing {
        "is a warning (`--allow-missing`)"
    } else {
        "fails it with exit 4, which comes before 3"
    };
    let rule = format!(
        "A series fails the gate with exit 3 when it is slower with the lower bound of the ratio's 95 % CI above {limit:.3} (slower by more than {} % even at the CI's lower end), or when its counted runs in new failed as loads of the protocol significantly more often than in base (Fisher's exact test, Holm). A series of base that could not be judged (missing from new, no valid or DNF run in new, undetermined) {unjudged}.",
        g.slower_pct
    );
    d.para(if g.passed() {
        format!("{flag}: passed. {rule}")
    } else {
        format!("{flag}: **failed** (exit {}). {rule}", g.exit_code)
    });
    let list = |v: &[gate::SeriesFinding]| {
        v.iter()
            .map(|f| format!("`{}`: {}", f.series.label(), f.words))
            .collect()
    };
    if !g.failures.is_empty() {
        d.para("Failed on:");
        d.blocks.push(Block::List(list(&g.failures)));
    }
    if !g.warnings.is_empty() {
        d.para("Warnings (not failing the gate):");
        d.blocks.push(Block::List(list(&g.warnings)));
    }
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
        "`{}` (new) against `{}` (base): {} series compared, {} faster, {} slower, {} without a significant difference (Mann-Whitney U, Holm over the {} tested series, and the ratio's 95 % CI on one side of 1), {} undetermined.",
        b.new,
        b.base,
        b.changes.len(),
        count(&Verdict::Faster),
        count(&Verdict::Slower),
        count(&Verdict::NoSignificantDifference),
        b.holm_family,
        b.changes.len() - b.holm_family
    ));
    if let Some(g) = &b.gate {
        gate_blocks(&mut d, g);
    }
    d.heading(2, "What differs between the two", "differences");
    let mut diffs: Vec<String> = b.setup_differences.clone();
    diffs.extend(
        b.machine_differences
            .iter()
            .map(|m| format!("machine: {m}")),
    );
    diffs.extend(b.busy_difference.clone());
    if diffs.is_empty() {
        diffs.push("Nothing in the plan, the servers' knobs or the machine: a change between the two is the machine drifting, or chance.".into());
    }
    diffs.push("The runs of the two matrices were not interleaved with each other: a machine that drifted between them shows up as a change in every series.".into());
    d.blocks.push(Block::List(diffs));
    d.heading(2, "Series", "series");
    d.blocks.push(Block::Table(series_table(b)));
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

fn series_table(b: &Baseline) -> Table {
    let rows = b
        .changes
        .iter()
        .map(|c| {
            let x = &c.comparison;
            vec![
                Cell::label(&c.key.profile),
                Cell::label(&c.key.workload),
                Cell::label(c.key.server.to_string()),
                Cell::label(c.key.browser.name()),
                Cell::label(c.key.variant.name()),
                Cell::text(fmt_series(&c.base)),
                Cell::text(fmt_series(&c.new)),
                Cell::text(x.ratio.map_or("—".into(), |r| fmt_ratio(r, x.ratio_bound))),
                Cell::text(match (x.ratio_ci_low, x.ratio_ci_high) {
                    (Some(lo), Some(hi)) => format!("{lo:.2}–{hi:.2}"),
                    _ => "—".into(),
                }),
                Cell::text(fmt_shift(c.shift.as_ref())),
                Cell::text(opt(x.p, 4)),
                Cell::text(opt(x.p_holm, 4)),
                verdict_cell(x),
                Cell::text(fmt_rates(&c.failures)),
                Cell::text(fmt_rates(&c.rejections)),
            ]
        })
        .collect();
    Table {
        id: "compare-series".into(),
        title: "New against base, per series".into(),
        intro: vec![
            "Medians of loadEventEnd (a transfer's completion) in ms with their 95 % CI; ratio = new / base (below 1: new is faster).".into(),
            "Shift: the Hodges–Lehmann estimate of new − base in ms (the median of every difference between a new and a base run) with its distribution-free 95 % CI (Moses; the Mann–Whitney critical value from the normal approximation); finished runs only, and none when a side has a DNF (its difference is only bounded).".into(),
            format!(
                "Failed: counted runs that failed as loads of the protocol, of those that measured it; rejected: attempts rejected as measurements, of all attempts; base → new, with Fisher's exact p after Holm over the series with any (failures: {}, rejections: {}).",
                b.failure_family, b.rejection_family
            ),
        ],
        header: [
            "profile", "workload", "server", "browser", "protocol", "base (ms)", "new (ms)",
            "ratio", "95 % CI", "shift (ms) [95 % CI]", "p", "p (Holm)", "verdict", "failed",
            "rejected",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows,
        notes: vec![],
    }
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
        "shift_ms",
        "shift_ci_low_ms",
        "shift_ci_high_ms",
        "failed_base",
        "measured_base",
        "failed_new",
        "measured_new",
        "failures_p_holm",
        "rejected_base",
        "attempts_base",
        "rejected_new",
        "attempts_new",
        "rejections_p_holm",
    ])?;
    let med = |s: &SeriesSummary| match s.median {
        Some(stats::Censored::Ms(x)) => format!("{x:.3}"),
        Some(stats::Censored::Dnf) => "dnf".into(),
        None => String::new(),
    };
    let f = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
    for c in &b.changes {
        let x = &c.comparison;
        let (fl, rj) = (&c.failures, &c.rejections);
        let mut record = vec![
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
            f(c.shift.map(|s| s.estimate)),
            f(c.shift.and_then(|s| s.ci_low)),
            f(c.shift.and_then(|s| s.ci_high)),
        ];
        record.extend([fl.events_b, fl.trials_b, fl.events_a, fl.trials_a].map(|n| n.to_string()));
        record.push(f(Some(fl.p_holm)));
        record.extend([rj.events_b, rj.trials_b, rj.events_a, rj.trials_a].map(|n| n.to_string()));
        record.push(f(Some(rj.p_holm)));
        w.write_record(&record)?;
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
            doc::to_html(&d, crate::report::glyph::FONT_TTF).into_bytes(),
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

/// The comparison for the terminal: one line per series, then the gate's decision.
pub fn terminal(b: &Baseline) -> String {
    let mut out = String::new();
    for c in &b.changes {
        let x = &c.comparison;
        out.push_str(&format!(
            "{:<48} {:>12} → {:<12} ratio {} [{}–{}] shift {} ms p_holm {}  failed {}  {}\n",
            c.key.label(),
            c.base.median.map_or("—".into(), |m| m.to_string()),
            c.new.median.map_or("—".into(), |m| m.to_string()),
            x.ratio.map_or("—".into(), |r| fmt_ratio(r, x.ratio_bound)),
            opt(x.ratio_ci_low, 2),
            opt(x.ratio_ci_high, 2),
            fmt_shift(c.shift.as_ref()),
            opt(x.p_holm, 4),
            fmt_rates(&c.failures),
            verdict_words(&x.verdict)
        ));
    }
    if let Some(g) = &b.gate {
        out.push_str(&gate_terminal(g));
    }
    out
}

/// `gate: failed (exit 4)` and a line per finding.
pub fn gate_terminal(g: &GateOutcome) -> String {
    let mut out = if g.passed() {
        format!(
            "gate --fail-if-slower {}: passed (no series slower by more than {} % at the lower bound of the ratio's 95 % CI, none failing more often{})\n",
            g.slower_pct,
            g.slower_pct,
            if g.allow_missing { "" } else { ", every series of base judged" }
        )
    } else {
        format!(
            "gate --fail-if-slower {}: FAILED (exit {})\n",
            g.slower_pct, g.exit_code
        )
    };
    for f in &g.failures {
        out.push_str(&format!("  failed: {}\n", f.line()));
    }
    for f in &g.warnings {
        out.push_str(&format!("  warning: {}\n", f.line()));
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
                        RunRow::measured(&id, profile, workload, "embedded", v, round).with_value(
                            &metric_registry::COMPLETION_MS,
                            Some(base * factor * noise),
                        ),
                    );
                }
            }
        }
        out
    }

    #[test]
    fn a_faster_series_is_found_and_the_rest_are_not_significant() {
        let c = compare_rows(&rows(1, 1.0), &rows(2, 0.2), 120e3, 120e3, 1, 2_000).unwrap();
        assert!(c.only_base.is_empty() && c.only_new.is_empty());
        let changes = &c.changes;
        assert_eq!(changes.len(), 4);
        for c in changes {
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
        // The shift in ms: 9000 → 1800.
        let s = dl.shift.unwrap();
        assert!((s.estimate + 7200.0).abs() < 300.0, "{s:?}");
        assert!(s.ci_low.unwrap() <= s.estimate && s.estimate <= s.ci_high.unwrap());
        let g = gate(5.0, false).decide(&assemble("a", "b", c, None).changes, &[]);
        assert!(g.passed() && g.warnings.is_empty(), "{g:?}");
    }

    fn gate(pct: f64, allow_missing: bool) -> Gate {
        Gate::new(pct, allow_missing)
    }

    #[test]
    fn fail_if_slower_needs_the_verdict_and_the_size() {
        let c = compare_rows(&rows(1, 1.0), &rows(2, 1.3), 120e3, 120e3, 1, 2_000).unwrap();
        let b = assemble("a", "b", c, Some(gate(10.0, false)));
        let g = b.gate.as_ref().unwrap();
        let slow: Vec<String> = g.failures.iter().map(|f| f.series.label()).collect();
        assert_eq!(slow, ["mobile/download/embedded/h3"]);
        assert_eq!(g.exit_code, SLOWER_EXIT);
        // Slower, but by less than asked: a warning.
        let g = gate(40.0, false).decide(&b.changes, &b.only_base);
        assert!(g.passed() && g.warnings.len() == 1, "{g:?}");
    }

    #[test]
    fn series_in_one_directory_only_are_listed_not_compared() {
        let base = rows(1, 1.0);
        let new: Vec<RunRow> = rows(2, 1.0)
            .into_iter()
            .filter(|r| r.workload == "page10")
            .collect();
        let c = compare_rows(&base, &new, 120e3, 120e3, 1, 500).unwrap();
        assert_eq!(c.changes.len(), 2);
        assert_eq!(c.only_base.len(), 2);
        assert!(c.only_new.is_empty());
        let mut b = assemble("a", "b", c, Some(gate(5.0, true)));
        b.setup_differences =
            vec!["server knob quic_congestion: \"cubic\" (base) vs \"bbr\" (new)".into()];
        let md = doc::to_markdown(&document(&b));
        assert!(
            md.contains("in base only")
                && md.contains("quic_congestion")
                && md.contains("passed")
                && md.contains("missing in new"),
            "{md}"
        );
        let csv = String::from_utf8(csv_bytes(&b).unwrap()).unwrap();
        assert_eq!(csv.lines().count(), 3);
    }
}
