//! The matrix's statistics: per series (profile, workload, server, browser, protocol variant) the
//! distribution of the headline time — DNF runs included as censored observations at the
//! timeout — and of the breakdown metrics, per cell the protocol comparisons (h2 vs h1, h3 vs
//! h2, h3 vs h1, …) within each server and browser, servers against the first server and
//! engines against Chromium per protocol, Holm-corrected across the whole matrix, and per
//! profile what the link
//! delivered. Reads `runs.csv` (only `measure` runs count; warm-ups are discarded; of a planned
//! run retried after a measurement failure only its last attempt counts), writes
//! `summary.json`, `summary.csv` and `comparisons.csv`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::attempts::{self, Attempts};
use super::attrition::{self, Attrition, Families};
use super::compare_cells::{all_comparisons, protocol_pairs, too_few_runs_warning};
// The rows and series keys are read back here, and most users name them with the summary.
pub use super::rows::{final_attempts, read_runs, RunRow, SeriesKey};
// The same for the comparisons: how they are made and how they read.
pub use super::compare_cells::{cell_comparisons, widest_ci_pct};
pub use super::comparison::{fmt_p, fmt_ratio, CellComparison};
use crate::config::identity::{Phase, ServerId, Setup};
use crate::config::protocol::Variant;
use crate::evidence::metric_registry::{self, Metric};
use crate::evidence::validate::{Outcome, ReasonKind};
use crate::support::atomic;
use crate::support::stats::{
    self, derive_seed, summarize, BootstrapConfig, Censored, RatioBound, SeriesInput,
    SeriesSummary, Verdict,
};

/// One series' statistics.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeriesStats {
    pub key: SeriesKey,
    /// The headline time (loadEventEnd / transfer completion), ms.
    pub completion: SeriesSummary,
    /// Median (and spread) of each breakdown metric over the valid runs.
    pub breakdown: BTreeMap<String, SeriesSummary>,
    /// Invalid-run reasons (kinds) with their counts, over the counted attempts.
    pub invalid_reasons: BTreeMap<ReasonKind, usize>,
    /// Attempts run again after a measurement failure (kept on disk, not counted).
    #[serde(default)]
    pub retries: usize,
    /// Every measured attempt of the series and what became of it.
    #[serde(default)]
    pub attempts: Attempts,
    /// Valid runs without a figure for the headline (`report --metric lcp`: no LCP recorded):
    /// not a value to invent, so left out of `completion` and the comparisons, and counted here
    /// (`completion.n_valid` are the others). Always 0 for loadEventEnd.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub without_headline: usize,
    /// The valid runs' headline times in run order (for CDFs).
    pub values: Vec<f64>,
    /// The run id whose headline time is closest to the median (for waterfalls).
    pub median_run: Option<String>,
}

impl SeriesStats {
    /// Valid runs, with or without a headline figure.
    pub fn valid_runs(&self) -> usize {
        self.completion.n_valid + self.without_headline
    }

    /// The counted measured runs: valid, invalid and DNF.
    pub fn counted_runs(&self) -> usize {
        self.valid_runs() + self.completion.n_invalid + self.completion.n_dnf
    }
}

/// What the link delivered on one profile: every attempt with link figures (warm-ups and
/// attempts retried for other reasons too — each is a sample of the link) that passed the gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileLink {
    pub profile: String,
    pub runs: usize,
    /// Median over runs of the RTT the link model intended, and of the RTT achieved.
    pub model_rtt_median_ms: Option<f64>,
    pub achieved_rtt_median_ms: Option<f64>,
    /// Mean over runs of the same.
    pub achieved_rtt_mean_ms: Option<f64>,
    /// Mean over runs of the RTT the link offered (its time average, whatever the traffic):
    /// the figure that must be the profile's.
    #[serde(default)]
    pub offered_rtt_mean_ms: Option<f64>,
    /// Attempts (all, retried ones included) the link gate rejected.
    pub link_invalid: usize,
}

/// What a summary holds; a summary of an older format is computed again from `runs.csv`.
/// 2: every attempt per series and each comparison's attrition. 3: a ratio CI whose end
/// depends on the DNFs' time is marked (`ratio_ci_censored`); valid runs without the headline
/// are counted (`without_headline`).
pub const SUMMARY_FORMAT: u32 = 3;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// [`SUMMARY_FORMAT`] when written (absent: 1).
    #[serde(default = "first_format")]
    pub format: u32,
    pub metric: String,
    pub alpha: f64,
    pub bootstrap_resamples: usize,
    /// Comparisons tested (the Holm family).
    pub holm_family: usize,
    /// The sizes of the attrition's three families: rejection rates, failure rates, first
    /// attempts (each Holm-adjusted on its own).
    #[serde(default)]
    pub attrition_families: Families,
    pub series: Vec<SeriesStats>,
    pub comparisons: Vec<CellComparison>,
    /// Per profile, what the link delivered.
    #[serde(default)]
    pub links: Vec<ProfileLink>,
    /// Per server, the fewest viewpoints any of its runs was cross-checked from (3: Resource
    /// Timing, CDP and the server's log; 2: no readable server log).
    #[serde(default)]
    pub viewpoints: BTreeMap<ServerId, u8>,
    /// Invalid attempts by reason kind (every attempt, measure and warm-up), and how many
    /// attempts were retries.
    #[serde(default)]
    pub invalid_by_reason: BTreeMap<ReasonKind, usize>,
    #[serde(default)]
    pub retries: usize,
    pub warnings: Vec<String>,
}

/// Attempts whose browser ran as root or without its sandbox (`--no-browser-sandbox`).
fn unsandboxed_warning(rows: &[RunRow]) -> Option<String> {
    let observed: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.value(&metric_registry::BROWSER_SANDBOXED))
        .collect();
    let unsandboxed = observed.iter().filter(|v| **v < 1.0).count();
    (unsandboxed > 0).then(|| {
        format!(
            "{unsandboxed} of {} attempts' browsers ran as root or without their sandbox (--no-browser-sandbox, or the sandbox did not come up: see browser_confinement in their records); the pages they loaded could reach this machine",
            observed.len()
        )
    })
}

/// The headline time of a series: valid runs' values, DNF runs censored at `timeout_ms`.
fn completion_input(rows: &[&RunRow], headline: &Metric, timeout_ms: f64) -> SeriesInput {
    SeriesInput {
        dnf: rows.iter().filter(|r| r.outcome == Outcome::Dnf).count(),
        censor_at: timeout_ms,
        ..breakdown_input(rows, |r| r.value(headline))
    }
}

/// A breakdown metric: valid runs only (a DNF run's partial queueing is not a censored value).
fn breakdown_input(rows: &[&RunRow], value: impl Fn(&RunRow) -> Option<f64>) -> SeriesInput {
    SeriesInput {
        values: rows
            .iter()
            .filter(|r| r.outcome == Outcome::Valid)
            .filter_map(|r| value(r))
            .filter(|v| v.is_finite())
            .collect(),
        invalid: rows
            .iter()
            .filter(|r| r.outcome == Outcome::Invalid)
            .count(),
        dnf: 0,
        censor_at: f64::INFINITY,
    }
}

fn mean_of(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn median_of(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    stats::median(&v).ok()
}

/// Per profile: what the link delivered over every attempt that passed the link gate, and how
/// many attempts the gate rejected.
fn profile_links(rows: &[RunRow], order: &[String]) -> Vec<ProfileLink> {
    order
        .iter()
        .map(|profile| {
            let mine: Vec<&RunRow> = rows.iter().filter(|r| &r.profile == profile).collect();
            let fine: Vec<&RunRow> = mine
                .iter()
                .copied()
                .filter(|r| !r.invalid_kinds.contains(&ReasonKind::Link))
                .collect();
            let achieved: Vec<f64> = fine
                .iter()
                .filter_map(|r| r.value(&crate::evidence::metric_registry::ACHIEVED_RTT_MS))
                .collect();
            let offered: Vec<f64> = fine
                .iter()
                .filter_map(|r| r.value(&crate::evidence::metric_registry::OFFERED_RTT_MS))
                .collect();
            ProfileLink {
                profile: profile.clone(),
                runs: achieved.len(),
                model_rtt_median_ms: median_of(
                    fine.iter()
                        .filter_map(|r| r.value(&crate::evidence::metric_registry::MODEL_RTT_MS))
                        .collect(),
                ),
                achieved_rtt_median_ms: median_of(achieved.clone()),
                achieved_rtt_mean_ms: mean_of(&achieved),
                offered_rtt_mean_ms: mean_of(&offered),
                link_invalid: mine.len() - fine.len(),
            }
        })
        .collect()
}

fn first_format() -> u32 {
    1
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Valid runs of `rows` without a (finite) value of `headline`.
fn without_value(rows: &[&RunRow], headline: &Metric) -> usize {
    rows.iter()
        .filter(|r| r.outcome == Outcome::Valid)
        .filter(|r| !r.value(headline).is_some_and(f64::is_finite))
        .count()
}

/// The metric's short name, as in "no LCP" (its label without the unit).
pub fn metric_word(name: &str) -> &'static str {
    metric_registry::by_name(name)
        .map_or("value", |m| m.label.split(" (").next().unwrap_or(m.label))
}

/// The warning for series with valid runs but no `headline` figure, naming each (None: every
/// valid run has one).
fn without_headline_warning(series: &[SeriesStats], headline: &Metric) -> Option<String> {
    let lacking: Vec<String> = series
        .iter()
        .filter(|x| x.without_headline > 0)
        .map(|x| {
            format!(
                "{} {} of {}",
                x.key.label(),
                x.without_headline,
                x.valid_runs()
            )
        })
        .collect();
    (!lacking.is_empty()).then(|| {
        format!(
            "valid runs without {word} ({name}) are left out of the medians and comparisons on {word}, which compare the others: {}",
            lacking.join(", "),
            word = metric_word(headline.name),
            name = headline.name
        )
    })
}

impl Summary {
    /// Whether this summary was computed from `rows`: the same counted measured runs and the
    /// same retried attempts (a retry replaces a counted run, so the run count alone cannot
    /// see it), in this version's format. A mismatch means the summary is older than
    /// `runs.csv` or than this pagebench.
    pub fn is_current(&self, rows: &[RunRow]) -> bool {
        let retries = rows.iter().filter(|r| r.attempt > 1).count();
        let measured = final_attempts(rows)
            .iter()
            .filter(|r| r.phase == Phase::Measure)
            .count();
        let summarized: usize = self.series.iter().map(SeriesStats::counted_runs).sum();
        self.format == SUMMARY_FORMAT && retries == self.retries && measured == summarized
    }
}

/// The headline inputs of every series in `rows` (the counted, measured attempts), and the
/// series in first-seen order: what [`cell_comparisons`] compares.
pub fn series_inputs(
    rows: &[RunRow],
    headline: &Metric,
    timeout_ms: f64,
) -> (Vec<SeriesKey>, BTreeMap<SeriesKey, SeriesInput>) {
    let mut order: Vec<SeriesKey> = Vec::new();
    let mut by_series: BTreeMap<SeriesKey, Vec<&RunRow>> = BTreeMap::new();
    for r in final_attempts(rows)
        .into_iter()
        .filter(|r| r.phase == Phase::Measure)
    {
        let key = SeriesKey::of(r);
        if !by_series.contains_key(&key) {
            order.push(key.clone());
        }
        by_series.entry(key).or_default().push(r);
    }
    let inputs = by_series
        .into_iter()
        .map(|(k, runs)| {
            let input = completion_input(&runs, headline, timeout_ms);
            (k, input)
        })
        .collect();
    (order, inputs)
}

/// Computes the matrix statistics from its runs. `seed` makes the bootstrap reproducible;
/// `server_order` (the plan's `--servers`) makes the first server the baseline of server
/// comparisons (servers not listed follow in first-seen order).
///
/// `timeout_ms` is the matrix's per-run timeout: what a DNF run stands for.
pub fn summarize_runs(
    rows: &[RunRow],
    seed: u64,
    resamples: usize,
    server_order: &[ServerId],
    timeout_ms: f64,
) -> Result<Summary> {
    summarize_runs_on(
        &metric_registry::COMPLETION_MS,
        rows,
        seed,
        resamples,
        server_order,
        timeout_ms,
    )
}

/// [`summarize_runs`] with another headline (`report --metric`): series, comparisons and Holm
/// all decide on `headline` (a metric of the registry that may be one).
pub fn summarize_runs_on(
    headline: &'static Metric,
    rows: &[RunRow],
    seed: u64,
    resamples: usize,
    server_order: &[ServerId],
    timeout_ms: f64,
) -> Result<Summary> {
    anyhow::ensure!(
        headline.headline,
        "{} cannot be a headline: it is not a time where lower is better",
        headline.name
    );
    let alpha = 0.05;
    let grouped = Grouped::of(rows);
    let accounts = attempts::per_series(rows);
    let settings = SeriesSettings {
        headline,
        seed,
        resamples,
        timeout_ms,
    };
    let mut series = Vec::new();
    let mut inputs: BTreeMap<SeriesKey, SeriesInput> = BTreeMap::new();
    for key in &grouped.order {
        let (stats, input) = series_stats(key, &grouped, &accounts, &settings)?;
        series.push(stats);
        inputs.insert(key.clone(), input);
    }
    let mut comparisons = all_comparisons(
        &grouped.order,
        &inputs,
        server_order,
        seed,
        resamples,
        alpha,
    )?;
    let attrition_families = attrition::annotate(
        &mut comparisons,
        rows,
        &attrition::Settings {
            headline,
            timeout_ms,
            seed,
            resamples,
            alpha,
        },
    )?;
    let family = comparisons
        .iter()
        .filter(|c| c.comparison.p.is_some())
        .count();
    let mut warnings: Vec<String> = too_few_runs_warning(&comparisons, alpha)
        .into_iter()
        .collect();
    warnings.extend(without_headline_warning(&series, headline));
    warnings.extend(attempts::busy_warning(&accounts));
    warnings.extend(unsandboxed_warning(rows));
    let mut viewpoints: BTreeMap<ServerId, u8> = BTreeMap::new();
    for r in rows {
        let v = viewpoints.entry(r.server.clone()).or_insert(r.viewpoints);
        *v = (*v).min(r.viewpoints);
    }
    Ok(Summary {
        format: SUMMARY_FORMAT,
        metric: headline.name.into(),
        alpha,
        bootstrap_resamples: resamples,
        holm_family: family,
        attrition_families,
        series,
        comparisons,
        links: profile_links(rows, &grouped.profiles),
        viewpoints,
        invalid_by_reason: invalid_kinds(rows.iter()),
        retries: rows.iter().filter(|r| r.attempt > 1).count(),
        warnings,
    })
}

/// The rows grouped for the statistics: each series' counted runs in the plan's first-seen
/// order, how many attempts it retried, and the profiles in order.
struct Grouped<'r> {
    by_series: BTreeMap<SeriesKey, Vec<&'r RunRow>>,
    order: Vec<SeriesKey>,
    retried: BTreeMap<SeriesKey, usize>,
    profiles: Vec<String>,
}

impl<'r> Grouped<'r> {
    fn of(rows: &'r [RunRow]) -> Self {
        let mut g = Grouped {
            by_series: BTreeMap::new(),
            order: Vec::new(),
            retried: BTreeMap::new(),
            profiles: Vec::new(),
        };
        for r in rows {
            if !g.profiles.contains(&r.profile) {
                g.profiles.push(r.profile.clone());
            }
        }
        for r in rows
            .iter()
            .filter(|r| r.phase == Phase::Measure && r.attempt > 1)
        {
            *g.retried.entry(SeriesKey::of(r)).or_default() += 1;
        }
        for r in final_attempts(rows)
            .into_iter()
            .filter(|r| r.phase == Phase::Measure)
        {
            let key = SeriesKey::of(r);
            if !g.by_series.contains_key(&key) {
                g.order.push(key.clone());
            }
            g.by_series.entry(key).or_default().push(r);
        }
        g
    }
}

/// What every series' statistics are computed with.
struct SeriesSettings {
    headline: &'static Metric,
    seed: u64,
    resamples: usize,
    timeout_ms: f64,
}

/// One series' statistics (the headline, every breakdown metric, its invalid runs, its median
/// run) and the headline's input for the comparisons.
fn series_stats(
    key: &SeriesKey,
    grouped: &Grouped,
    accounts: &BTreeMap<SeriesKey, attempts::Attempts>,
    settings: &SeriesSettings,
) -> Result<(SeriesStats, SeriesInput)> {
    let SeriesSettings {
        headline,
        seed,
        resamples,
        timeout_ms,
    } = *settings;
    let retried = &grouped.retried;
    let runs = &grouped.by_series[key];
    let boot = BootstrapConfig {
        resamples,
        ..BootstrapConfig::default()
    }
    .with_seed(derive_seed(seed, &key.label()));
    let input = completion_input(runs, headline, timeout_ms);
    let completion = summarize(&input, &boot).with_context(|| format!("series {}", key.label()))?;
    let mut breakdown = BTreeMap::new();
    for metric in metric_registry::breakdown() {
        let inp = breakdown_input(runs, |r| r.value(metric));
        if inp.values.is_empty() {
            continue;
        }
        let name = metric.name;
        let b = boot.with_seed(derive_seed(seed, &format!("{}/{name}", key.label())));
        breakdown.insert(name.to_string(), summarize(&inp, &b)?);
    }
    let invalid_reasons = invalid_kinds(runs.iter().copied());
    let median_run = completion.median.and_then(Censored::ms).and_then(|m| {
        runs.iter()
            .filter(|r| r.outcome == Outcome::Valid)
            .filter_map(|r| r.value(headline).map(|c| ((c - m).abs(), r.run_id.clone())))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, id)| id)
    });
    let stats = SeriesStats {
        key: key.clone(),
        completion,
        breakdown,
        invalid_reasons,
        retries: retried.get(key).copied().unwrap_or(0),
        attempts: accounts.get(key).cloned().unwrap_or_default(),
        without_headline: without_value(runs, headline),
        values: input.values.clone(),
        median_run,
    };
    Ok((stats, input))
}

/// A row's counts of invalid-run reason kinds, summed over `rows`.
fn invalid_kinds<'r>(rows: impl Iterator<Item = &'r RunRow>) -> BTreeMap<ReasonKind, usize> {
    let mut by_kind: BTreeMap<ReasonKind, usize> = BTreeMap::new();
    for r in rows.filter(|r| r.outcome == Outcome::Invalid) {
        for k in &r.invalid_kinds {
            *by_kind.entry(*k).or_default() += 1;
        }
    }
    by_kind
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_default()
}

/// A censored statistic for the CSV: ms with 3 decimals, `dnf`, or empty.
fn fmt_censored(v: Option<Censored>) -> String {
    match v {
        Some(Censored::Ms(x)) => format!("{x:.3}"),
        Some(Censored::Dnf) => "dnf".into(),
        None => String::new(),
    }
}

/// Writes `summary.json`, `summary.csv` (one row per series) and `comparisons.csv`.
pub fn write(dir: &Path, s: &Summary) -> Result<()> {
    atomic::write_file(
        &dir.join("summary.json"),
        (serde_json::to_string_pretty(s)? + "\n").as_bytes(),
    )?;
    atomic::write_file(&dir.join("summary.csv"), &summary_csv(s)?)?;
    atomic::write_file(&dir.join("comparisons.csv"), &comparisons_csv(s)?)?;
    Ok(())
}

/// `summary.csv`: one row per series.
fn summary_csv(s: &Summary) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = [
        "profile",
        "workload",
        "server",
        "browser",
        "view",
        "device",
        "variant",
        "n_valid",
        "n_invalid",
        "n_dnf",
        "n_without_metric",
        "retries",
        "attempts",
        "rejected",
        "failed",
        "unmeasured",
        "median_ms",
        "ci_low_ms",
        "ci_high_ms",
        "q1_ms",
        "q3_ms",
        "iqr_ms",
        "min_ms",
        "max_ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(metric_registry::breakdown().map(|m| format!("median_{}", m.name)));
    header.push("invalid_reasons".into());
    w.write_record(&header)?;
    for st in &s.series {
        let c = &st.completion;
        let mut row = vec![
            st.key.profile.clone(),
            st.key.workload.clone(),
            st.key.server.to_string(),
            st.key.browser.name().to_string(),
            st.key.view.name().to_string(),
            st.key.device.to_string(),
            st.key.variant.name(),
            c.n_valid.to_string(),
            c.n_invalid.to_string(),
            c.n_dnf.to_string(),
            st.without_headline.to_string(),
            st.retries.to_string(),
            st.attempts.attempts.to_string(),
            st.attempts.rejected.to_string(),
            st.attempts.failed.to_string(),
            st.attempts.unmeasured.to_string(),
            fmt_censored(c.median),
            fmt_censored(c.ci_low),
            fmt_censored(c.ci_high),
            fmt_censored(c.q1),
            fmt_censored(c.q3),
            fmt_opt(c.iqr),
            fmt_censored(c.min),
            fmt_censored(c.max),
        ];
        for m in metric_registry::breakdown() {
            row.push(fmt_censored(
                st.breakdown.get(m.name).and_then(|b| b.median),
            ));
        }
        row.push(
            st.invalid_reasons
                .iter()
                .map(|(k, n)| format!("{k}×{n}"))
                .collect::<Vec<_>>()
                .join(" "),
        );
        w.write_record(&row)?;
    }
    Ok(w.into_inner()?)
}

/// `comparisons.csv`: one row per comparison, with its attrition.
fn comparisons_csv(s: &Summary) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "profile",
        "workload",
        "server_a",
        "browser_a",
        "view_a",
        "device_a",
        "a",
        "server_b",
        "browser_b",
        "view_b",
        "device_b",
        "b",
        "n_valid_a",
        "n_dnf_a",
        "n_valid_b",
        "n_dnf_b",
        "ratio",
        "ratio_bound",
        "ratio_ci_low",
        "ratio_ci_high",
        "u",
        "p",
        "p_holm",
        "verdict",
        "attempts_a",
        "rejected_a",
        "attempts_b",
        "rejected_b",
        "rejection_p_holm",
        "measured_a",
        "failed_a",
        "measured_b",
        "failed_b",
        "failure_p_holm",
        "first_attempts_ratio",
        "first_attempts_verdict",
        "marks",
    ])?;
    for c in &s.comparisons {
        let x = &c.comparison;
        let mut row = vec![
            c.profile.clone(),
            c.workload.clone(),
            c.server_a.to_string(),
            c.browser_a.name().to_string(),
            c.view_a.name().to_string(),
            c.device_a.to_string(),
            c.a.name(),
            c.server_b.to_string(),
            c.browser_b.name().to_string(),
            c.view_b.name().to_string(),
            c.device_b.to_string(),
            c.b.name(),
            x.n_valid_a.to_string(),
            x.n_dnf_a.to_string(),
            x.n_valid_b.to_string(),
            x.n_dnf_b.to_string(),
            fmt_opt(x.ratio),
            ratio_bound_name(x.ratio_bound).into(),
            fmt_opt(x.ratio_ci_low),
            fmt_opt(x.ratio_ci_high),
            fmt_opt(x.u),
            x.p.map(|p| format!("{p:.3e}")).unwrap_or_default(),
            x.p_holm.map(|p| format!("{p:.3e}")).unwrap_or_default(),
            x.verdict.to_string(),
        ];
        row.extend(attrition_fields(c.attrition.as_ref()));
        w.write_record(&row)?;
    }
    Ok(w.into_inner()?)
}

/// The attrition columns of `comparisons.csv` (empty without one).
fn attrition_fields(a: Option<&Attrition>) -> Vec<String> {
    let Some(a) = a else {
        return vec![String::new(); 13];
    };
    let (r, f) = (&a.rejections, &a.failures);
    let first = &a.first_attempts;
    vec![
        r.trials_a.to_string(),
        r.events_a.to_string(),
        r.trials_b.to_string(),
        r.events_b.to_string(),
        format!("{:.3e}", r.p_holm),
        f.trials_a.to_string(),
        f.events_a.to_string(),
        f.trials_b.to_string(),
        f.events_b.to_string(),
        format!("{:.3e}", f.p_holm),
        fmt_opt(first.ratio),
        first.verdict.to_string(),
        a.marks
            .iter()
            .map(attrition::Mark::name)
            .collect::<Vec<_>>()
            .join(" "),
    ]
}

pub fn read(dir: &Path) -> Result<Summary> {
    let p = dir.join("summary.json");
    let text =
        std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a pagebench summary", p.display()))
}

/// A verdict as a short mark for tables: `faster`→`▼`, `slower`→`▲`, n.s.→`=`, else `?`.
pub fn verdict_mark(v: &Verdict) -> &'static str {
    match v {
        Verdict::Faster => "faster",
        Verdict::Slower => "slower",
        Verdict::NoSignificantDifference => "n.s.",
        Verdict::Undetermined(_) => "?",
        Verdict::FailsMore { .. } => "fails more",
    }
}

fn ratio_bound_name(b: RatioBound) -> &'static str {
    match b {
        RatioBound::Exact => "exact",
        RatioBound::AtLeast => "at_least",
        RatioBound::AtMost => "at_most",
        RatioBound::Unknown => "unknown",
    }
}

/// Formats a median with its CI, or the reason there is none: `412 [398–430]`, `2113 [1980–DNF]`,
/// `DNF (6 of 10 DNF)`.
pub fn fmt_series(s: &SeriesSummary) -> String {
    match (s.median, s.ci_low, s.ci_high) {
        (Some(Censored::Dnf), _, _) => {
            format!("DNF ({} of {} DNF)", s.n_dnf, s.n_dnf + s.n_valid)
        }
        (Some(m), Some(lo), Some(hi)) => format!("{m} [{lo}–{hi}]"),
        (Some(m), _, _) => format!("{m}"),
        _ => "—".into(),
    }
}

/// The terminal summary: one table per (workload, server, browser), profiles × variants, then
/// the comparisons with their verdicts.
pub fn terminal(s: &Summary) -> String {
    let mut out = String::new();
    let mut groups: Vec<(String, Setup)> = Vec::new();
    for st in &s.series {
        let g = (st.key.workload.clone(), st.key.setup());
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let several_browsers = s
        .series
        .iter()
        .any(|x| x.key.browser != s.series[0].key.browser);
    let several_views = s.series.iter().any(|x| x.key.view != s.series[0].key.view);
    for (workload, setup) in &groups {
        out.push_str(&terminal_table(
            s,
            workload,
            setup,
            several_browsers,
            several_views,
        ));
    }
    out.push_str(&format!(
        "\nratio = median(a)/median(b); verdict at α = {} after Holm over {} comparisons (faster/slower need the ratio's 95 % CI to exclude 1); DNF runs count as the slowest observations\n",
        s.alpha, s.holm_family
    ));
    if !s.invalid_by_reason.is_empty() || s.retries > 0 {
        out.push_str(&format!(
            "invalid attempts by reason: {} · retries after a measurement failure: {}\n",
            s.invalid_by_reason
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            s.retries
        ));
    }
    out.push_str(&attrition_lines(s));
    for w in &s.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

/// One table of the terminal summary, with its title: a workload on one setup, profiles ×
/// variants, then the protocol ratios with their verdicts.
fn terminal_table(
    s: &Summary,
    workload: &str,
    setup: &Setup,
    several_browsers: bool,
    several_views: bool,
) -> String {
    let mut out = String::new();
    let in_group: Vec<&SeriesStats> = s
        .series
        .iter()
        .filter(|x| x.key.workload == workload && x.key.is(setup))
        .collect();
    let mut variants: Vec<Variant> = Vec::new();
    let mut profiles: Vec<String> = Vec::new();
    for x in &in_group {
        if !variants.contains(&x.key.variant) {
            variants.push(x.key.variant);
        }
        if !profiles.contains(&x.key.profile) {
            profiles.push(x.key.profile.clone());
        }
    }
    variants.sort();
    let pairs: Vec<(Variant, Variant)> = protocol_pairs(&variants);
    let mut engine = if several_browsers {
        format!(" in {}", setup.browser.label())
    } else {
        String::new()
    };
    if several_views {
        engine.push_str(&format!(", {} view", setup.view));
    }
    if !setup.device.is_desktop() {
        engine.push_str(&format!(", on {}", setup.device));
    }
    out.push_str(&format!(
        "\n{workload} on {}{engine}: median ms [95 % CI] (valid/invalid/DNF)\n",
        setup.server
    ));
    let mut header = vec!["profile".to_string()];
    header.extend(variants.iter().map(Variant::name));
    header.extend(pairs.iter().map(|(a, b)| format!("{a}/{b}")));
    let mut rows = vec![header];
    for p in &profiles {
        let mut row = vec![p.clone()];
        for v in &variants {
            let cell = in_group
                .iter()
                .find(|x| &x.key.profile == p && x.key.variant == *v)
                .map(|x| {
                    let c = &x.completion;
                    format!(
                        "{} ({}/{}/{})",
                        fmt_series(c),
                        c.n_valid,
                        c.n_invalid,
                        c.n_dnf
                    )
                })
                .unwrap_or_default();
            row.push(cell);
        }
        for (a, b) in &pairs {
            let cell = s
                .comparisons
                .iter()
                .find(|c| {
                    &c.profile == p
                        && c.workload == workload
                        && c.within(setup)
                        && c.a == *a
                        && c.b == *b
                })
                .map(ratio_cell)
                .unwrap_or_default();
            row.push(cell);
        }
        rows.push(row);
    }
    out.push_str(&crate::support::textfmt::table(&rows));
    out
}

/// A comparison in a terminal table: its ratio and verdict, `†` when its attrition is marked.
fn ratio_cell(c: &CellComparison) -> String {
    let verdict = verdict_mark(&c.comparison.verdict);
    let mut cell = match c.comparison.ratio {
        Some(r) => {
            format!("{} {verdict}", fmt_ratio(r, c.comparison.ratio_bound))
        }
        None => verdict.to_string(),
    };
    if c.attrition.as_ref().is_some_and(|a| !a.marks.is_empty()) {
        cell.push_str(" †");
    }
    cell
}

/// The comparisons with protocol failures or a mark (†), each with what it leaves out.
fn attrition_lines(s: &Summary) -> String {
    let mut out = String::new();
    for c in &s.comparisons {
        let failures = attrition::words::failures(c);
        let why = attrition::words::explain(c);
        if failures.is_none() && why.is_empty() {
            continue;
        }
        let mark = if why.is_empty() { "" } else { " †" };
        out.push_str(&format!(
            "{}/{} {}{mark}: {}\n",
            c.profile,
            c.workload,
            c.label(),
            failures.unwrap_or_else(|| "no protocol failures".into())
        ));
        for w in why {
            out.push_str(&format!("  † {w}\n"));
        }
    }
    out
}

/// Re-exported for the report.
pub use stats::UndeterminedReason;

#[cfg(test)]
mod tests;
