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
// The rows and series keys are read back here, and most users name them with the summary.
pub use super::rows::{final_attempts, read_runs, RunRow, SeriesKey};
// The same for the comparisons and how they read.
pub use super::comparison::{fmt_p, fmt_ratio, CellComparison};
use crate::config::identity::{BrowserId, Phase, ServerId, Setup, View};
use crate::config::protocol::Variant;
use crate::evidence::metric_registry::{self, Metric};
use crate::evidence::validate::{Outcome, ReasonKind};
use crate::support::atomic;
use crate::support::stats::{
    self, apply_holm, compare, derive_seed, smallest_attainable_p, summarize, BootstrapConfig,
    Censored, CompareConfig, Comparison, RatioBound, SeriesInput, SeriesSummary, Verdict,
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

/// The comparisons made within a cell, by series name: (a, b), ratio a/b.
fn protocol_pairs(variants: &[Variant]) -> Vec<(Variant, Variant)> {
    let has = |v: Variant| variants.contains(&v);
    let mut pairs = Vec::new();
    if has(Variant::H2) && has(Variant::H1) {
        pairs.push((Variant::H2, Variant::H1));
    }
    for h3 in [Variant::H3, Variant::H3_PRIMED, Variant::H3_DISCOVERED] {
        if has(h3) {
            for base in [Variant::H2, Variant::H1] {
                if has(base) {
                    pairs.push((h3, base));
                }
            }
        }
    }
    for h3 in [Variant::H3_PRIMED, Variant::H3_DISCOVERED] {
        if has(h3) && has(Variant::H3) {
            pairs.push((h3, Variant::H3));
        }
    }
    pairs
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

/// What a cell's series differ in: its servers (those of `server_order` first, then as first
/// seen), protocol variants (as first seen), engines and views (in their own order, the
/// default engine and the first view first).
struct CellAxes {
    servers: Vec<ServerId>,
    variants: Vec<Variant>,
    browsers: Vec<BrowserId>,
    views: Vec<View>,
}

impl CellAxes {
    fn of(in_cell: &[&SeriesKey], server_order: &[ServerId]) -> CellAxes {
        let mut servers: Vec<ServerId> = server_order
            .iter()
            .filter(|s| in_cell.iter().any(|k| &k.server == *s))
            .cloned()
            .collect();
        let mut variants: Vec<Variant> = Vec::new();
        for k in in_cell {
            if !servers.contains(&k.server) {
                servers.push(k.server.clone());
            }
            if !variants.contains(&k.variant) {
                variants.push(k.variant);
            }
        }
        // The engines' order puts the default engine, Chromium, first.
        let browsers: std::collections::BTreeSet<BrowserId> =
            in_cell.iter().map(|k| k.browser).collect();
        CellAxes {
            servers,
            variants,
            browsers: browsers.into_iter().collect(),
            views: View::ALL
                .into_iter()
                .filter(|v| in_cell.iter().any(|k| k.view == *v))
                .collect(),
        }
    }
}

/// The comparisons of one cell's series (`in_cell`, all of one profile and workload, in
/// first-seen order), unadjusted (Holm comes over the whole matrix): protocols within each
/// setup (server × browser), then servers per protocol against the first server (of
/// `server_order`, then first seen) within each browser, then engines per protocol against
/// Chromium within each server. Each comparison's bootstrap has its own seed from `seed` and
/// its label, so the same series give the same CI wherever they are compared.
pub fn cell_comparisons(
    in_cell: &[&SeriesKey],
    inputs: &BTreeMap<SeriesKey, SeriesInput>,
    server_order: &[ServerId],
    seed: u64,
    resamples: usize,
    alpha: f64,
) -> Result<Vec<CellComparison>> {
    let Some(first) = in_cell.first() else {
        return Ok(Vec::new());
    };
    let (profile, workload) = (&first.profile, &first.workload);
    let CellAxes {
        servers,
        variants,
        browsers,
        views,
    } = CellAxes::of(in_cell, server_order);
    let key = |setup: &Setup, variant: Variant| SeriesKey {
        profile: profile.clone(),
        workload: workload.clone(),
        server: setup.server.clone(),
        browser: setup.browser,
        view: setup.view,
        variant,
    };
    let mut comparisons = Vec::new();
    let mut push = |sa: &Setup, a: Variant, sb: &Setup, b: Variant| -> Result<()> {
        let (ka, kb) = (key(sa, a), key(sb, b));
        let (Some(ia), Some(ib)) = (inputs.get(&ka), inputs.get(&kb)) else {
            return Ok(());
        };
        let label = format!("{} vs {}", ka.label(), kb.label());
        let cfg = CompareConfig {
            alpha,
            bootstrap: BootstrapConfig {
                resamples,
                ..BootstrapConfig::default()
            }
            .with_seed(derive_seed(seed, &label)),
        };
        comparisons.push(CellComparison {
            profile: profile.clone(),
            workload: workload.clone(),
            server_a: sa.server.clone(),
            server_b: sb.server.clone(),
            browser_a: sa.browser,
            browser_b: sb.browser,
            view_a: sa.view,
            view_b: sb.view,
            a,
            b,
            comparison: compare(ia, ib, &cfg).with_context(|| label.clone())?,
            attrition: None,
        });
        Ok(())
    };
    for view in &views {
        for browser in &browsers {
            for server in &servers {
                let setup = Setup::new(server.clone(), *browser).on(*view);
                for (a, b) in protocol_pairs(&variants) {
                    push(&setup, a, &setup, b)?;
                }
            }
        }
    }
    // Setups that differ in one thing only, each against the first: servers within each
    // browser, then engines within each server.
    let mut against_first: Vec<(Setup, Setup)> = Vec::new();
    for view in &views {
        for browser in &browsers {
            let at = |s: &ServerId| Setup::new(s.clone(), *browser).on(*view);
            against_first.extend(servers[1..].iter().map(|s| (at(s), at(&servers[0]))));
        }
    }
    for view in &views {
        for server in &servers {
            let at = |b: &BrowserId| Setup::new(server.clone(), *b).on(*view);
            against_first.extend(browsers[1..].iter().map(|b| (at(b), at(&browsers[0]))));
        }
    }
    for (other, base) in &against_first {
        for v in &variants {
            push(other, *v, base, *v)?;
        }
    }
    // A returning visitor against a first visit, per protocol.
    for browser in &browsers {
        for server in &servers {
            let first = Setup::new(server.clone(), *browser);
            for view in views.iter().filter(|v| **v != View::First) {
                for v in &variants {
                    push(&first.clone().on(*view), *v, &first, *v)?;
                }
            }
        }
    }
    Ok(comparisons)
}

/// How precise a cell's estimates are: the widest 95 % CI half-width among its ratios, in
/// percent of the ratio (`max(high / ratio − 1, 1 − low / ratio)`), or — in a cell without
/// comparisons (one series per setup) — among its series' medians. `None` when one of them has
/// no CI (too few runs) or is only a bound: a ratio whose median is a DNF ([`RatioBound`] not
/// `Exact`), a ratio CI whose end depends on the time a DNF is counted at, a median or median
/// CI that is a DNF. A bound is not precise at any width. What `--runs auto` holds to
/// `--precision` (`matrix::adaptive`) and what the report states per cell.
pub fn widest_ci_pct(comparisons: &[&CellComparison], series: &[&SeriesSummary]) -> Option<f64> {
    let widths: Vec<Option<f64>> = if comparisons.is_empty() {
        series
            .iter()
            .map(|s| match (s.median, s.ci_low, s.ci_high) {
                (Some(Censored::Ms(m)), Some(Censored::Ms(lo)), Some(Censored::Ms(hi)))
                    if m > 0.0 =>
                {
                    Some(100.0 * (hi / m - 1.0).max(1.0 - lo / m))
                }
                _ => None,
            })
            .collect()
    } else {
        comparisons
            .iter()
            .map(|c| {
                let x = &c.comparison;
                if x.ratio_bound != RatioBound::Exact || x.ratio_ci_censored {
                    return None;
                }
                match (x.ratio, x.ratio_ci_low, x.ratio_ci_high) {
                    (Some(r), Some(lo), Some(hi)) if r > 0.0 => {
                        Some(100.0 * (hi / r - 1.0).max(1.0 - lo / r))
                    }
                    _ => None,
                }
            })
            .collect()
    };
    if widths.is_empty() {
        return None;
    }
    widths
        .into_iter()
        .try_fold(0.0f64, |acc, w| w.map(|w| acc.max(w)))
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

/// Comparisons per cell — protocols within each setup (server × browser), then servers per
/// protocol (against the first server, within each browser), then engines per protocol
/// (against Chromium, within each server) — with Holm over all of them.
fn all_comparisons(
    order: &[SeriesKey],
    inputs: &BTreeMap<SeriesKey, SeriesInput>,
    server_order: &[ServerId],
    seed: u64,
    resamples: usize,
    alpha: f64,
) -> Result<Vec<CellComparison>> {
    let mut cells: Vec<(String, String)> = Vec::new();
    for k in order {
        let c = (k.profile.clone(), k.workload.clone());
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    let mut comparisons = Vec::new();
    for (profile, workload) in &cells {
        let in_cell: Vec<&SeriesKey> = order
            .iter()
            .filter(|k| &k.profile == profile && &k.workload == workload)
            .collect();
        comparisons.extend(cell_comparisons(
            &in_cell,
            inputs,
            server_order,
            seed,
            resamples,
            alpha,
        )?);
    }
    let mut cmp: Vec<Comparison> = comparisons.iter().map(|c| c.comparison.clone()).collect();
    apply_holm(&mut cmp)?;
    for (c, adjusted) in comparisons.iter_mut().zip(cmp) {
        c.comparison = adjusted;
    }
    Ok(comparisons)
}

/// When the runs are too few for any comparison to survive Holm, says so.
fn too_few_runs_warning(comparisons: &[CellComparison], alpha: f64) -> Option<String> {
    let tested: Vec<&Comparison> = comparisons
        .iter()
        .map(|c| &c.comparison)
        .filter(|c| c.p.is_some())
        .collect();
    let family = tested.len();
    // The best any tested comparison could do: its sample sizes bound its p-value.
    let best = tested
        .iter()
        .map(|c| {
            let (a, b) = c.runs();
            smallest_attainable_p(a, b)
        })
        .fold(f64::INFINITY, f64::min);
    if family == 0 || best * (family as f64) < alpha {
        return None;
    }
    let n = tested
        .iter()
        .map(|c| {
            let (a, b) = c.runs();
            a.min(b)
        })
        .max()
        .unwrap_or(0);
    Some(format!(
        "with at most {n} runs per compared series the smallest possible p is {best:.2e}; Holm over {family} comparisons needs p < {:.1e} for the first one, so no difference can be called significant: use more --runs (10 or more)",
        alpha / family as f64
    ))
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
        "a",
        "server_b",
        "browser_b",
        "view_b",
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
            c.a.name(),
            c.server_b.to_string(),
            c.browser_b.name().to_string(),
            c.view_b.name().to_string(),
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
        let in_group: Vec<&SeriesStats> = s
            .series
            .iter()
            .filter(|x| &x.key.workload == workload && x.key.is(setup))
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
                            && &c.workload == workload
                            && c.within(setup)
                            && c.a == *a
                            && c.b == *b
                    })
                    .map(|c| {
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
                    })
                    .unwrap_or_default();
                row.push(cell);
            }
            rows.push(row);
        }
        out.push_str(&crate::support::textfmt::table(&rows));
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
mod tests {
    use super::*;
    use crate::results::store::RUNS_CSV;

    fn row(profile: &str, variant: &str, round: u32, outcome: Outcome, ms: f64) -> RunRow {
        let id = format!("{profile}-page10-r{round}-{variant}");
        use crate::evidence::metric_registry::*;
        let mut r = RunRow::measured(&id, profile, "page10", "embedded", variant, round);
        r.outcome = outcome;
        if outcome == Outcome::Invalid {
            r.invalid_kinds = vec![ReasonKind::ProtocolMismatch];
        }
        r.with_value(&COMPLETION_MS, (outcome == Outcome::Valid).then_some(ms))
            .with_value(&QUEUEING_MEDIAN_MS, Some(ms / 10.0))
            .with_value(&QUEUEING_P95_MS, Some(ms / 5.0))
            .with_value(&TTFB_MEDIAN_MS, Some(1.0))
            .with_value(&CONNECT_MS, Some(2.0))
            .with_value(&ONWIRE_MID, Some(3.0))
            .with_value(&ONWIRE_PEAK, Some(6.0))
            .with_value(&MODEL_RTT_MS, Some(40.0))
            .with_value(&ACHIEVED_RTT_MS, Some(40.05))
            .with_value(&OFFERED_RTT_MS, Some(40.0))
            .with_value(&STEAL_MS, Some(0.0))
    }

    const TIMEOUT_MS: f64 = 120_000.0;

    #[test]
    fn a_browser_without_its_sandbox_is_a_warning() {
        let row = |id: &str, sandboxed: Option<f64>| {
            RunRow::measured(id, "wired", "page10", "embedded", "h2", 1)
                .with_value(&metric_registry::BROWSER_SANDBOXED, sandboxed)
        };
        let all_in = [row("a", Some(1.0)), row("b", Some(1.0)), row("c", None)];
        assert_eq!(unsandboxed_warning(&all_in), None);
        let one_out = [row("a", Some(1.0)), row("b", Some(0.0)), row("c", None)];
        let w = unsandboxed_warning(&one_out).unwrap();
        assert!(w.starts_with("1 of 2 attempts' browsers"), "{w}");
        assert!(w.contains("--no-browser-sandbox"), "{w}");
    }

    #[test]
    fn engines_and_views_are_series_of_their_own_and_compared_per_protocol() {
        let mut rows = Vec::new();
        for r in 1..=10 {
            for (browser, view, base) in [
                (BrowserId::default(), View::First, 500.0),
                (BrowserId::new("firefox"), View::First, 600.0),
                (BrowserId::default(), View::Repeat, 400.0),
            ] {
                for (v, extra) in [("h2", 0.0), ("h3", 20.0)] {
                    let mut row = row("wired", v, r, Outcome::Valid, base + extra + r as f64);
                    row.browser = browser;
                    row.view = view;
                    row.run_id = format!("{}-{browser}-{view}", row.run_id);
                    row.plan_id = row.run_id.clone();
                    rows.push(row);
                }
            }
        }
        let s = summarize_runs(&rows, 1, 300, &[], TIMEOUT_MS).unwrap();
        assert_eq!(s.series.len(), 6);
        let labels: Vec<String> = s.comparisons.iter().map(|c| c.label()).collect();
        assert_eq!(
            labels,
            [
                "h3 vs h2",                  // Chromium, first view
                "h3 vs h2",                  // Firefox, first view
                "h3 vs h2",                  // Chromium, repeat view
                "firefox h2 vs chromium h2", // engines, first view
                "firefox h3 vs chromium h3",
                "repeat h2 vs first h2", // a returning visitor against a first visit
                "repeat h3 vs first h3",
            ]
        );
        let repeat = s
            .comparisons
            .iter()
            .find(|c| c.view_a == View::Repeat && c.view_b == View::First && c.a == Variant::H2)
            .unwrap();
        assert!(repeat.comparison.ratio.unwrap() < 0.85);
        assert_eq!(repeat.comparison.verdict, Verdict::Faster);
        // Only Chromium's first-view series keep the labels (and bootstrap seeds) they had.
        let keys: Vec<String> = s.series.iter().map(|x| x.key.label()).collect();
        assert!(keys.contains(&"wired/page10/embedded/h2".to_string()));
        assert!(keys.contains(&"wired/page10/embedded/firefox/h2".to_string()));
        assert!(keys.contains(&"wired/page10/embedded/repeat/h3".to_string()));
        let text = terminal(&s);
        assert!(
            text.contains("page10 on embedded in Firefox, first view"),
            "{text}"
        );
    }

    #[test]
    fn comparisons_and_invalid_runs() {
        let mut rows = Vec::new();
        for r in 1..=12 {
            rows.push(row("wired", "h1", r, Outcome::Valid, 500.0 + r as f64));
            rows.push(row("wired", "h2", r, Outcome::Valid, 300.0 + r as f64));
            rows.push(row(
                "wired",
                "h3",
                r,
                Outcome::Valid,
                301.0 + r as f64 * 0.5,
            ));
        }
        // An invalid run with an absurd time must not move anything.
        let mut bad = row("wired", "h2", 13, Outcome::Invalid, 1.0);
        bad.set(&crate::evidence::metric_registry::COMPLETION_MS, Some(1.0));
        rows.push(bad);
        let mut warm = row("wired", "h1", 1, Outcome::Valid, 99999.0);
        warm.phase = Phase::Warmup;
        rows.push(warm);
        let s = summarize_runs(&rows, 1, 2000, &[], TIMEOUT_MS).unwrap();
        assert_eq!(s.series.len(), 3);
        let h2 = s.series.iter().find(|x| x.key.variant == "h2").unwrap();
        assert_eq!(h2.completion.n_valid, 12);
        assert_eq!(h2.completion.n_invalid, 1);
        assert_eq!(h2.completion.median, Some(Censored::Ms(306.5)));
        assert_eq!(
            h2.invalid_reasons.get(&ReasonKind::ProtocolMismatch),
            Some(&1)
        );
        let h1 = s.series.iter().find(|x| x.key.variant == "h1").unwrap();
        assert_eq!(
            h1.completion.max,
            Some(Censored::Ms(512.0)),
            "warm-up runs are discarded"
        );
        assert_eq!(s.comparisons.len(), 3);
        let c = |a: &str, b: &str| s.comparisons.iter().find(|c| c.a == a && c.b == b).unwrap();
        assert_eq!(c("h2", "h1").comparison.verdict, Verdict::Faster);
        assert_eq!(c("h3", "h1").comparison.verdict, Verdict::Faster);
        assert!(c("h2", "h1").comparison.p_holm.unwrap() >= c("h2", "h1").comparison.p.unwrap());
        assert_eq!(s.holm_family, 3);
        assert!(s.warnings.is_empty());
        let t = terminal(&s);
        assert!(
            t.contains("page10 on embedded") && t.contains("h2/h1"),
            "{t}"
        );
    }

    #[test]
    fn few_runs_warn_that_nothing_can_be_significant() {
        let mut rows = Vec::new();
        for r in 1..=5 {
            for (p, base) in [
                ("a", 100.0),
                ("b", 200.0),
                ("c", 300.0),
                ("d", 400.0),
                ("e", 500.0),
                ("f", 600.0),
            ] {
                rows.push(row(p, "h1", r, Outcome::Valid, base * 2.0 + r as f64));
                rows.push(row(p, "h2", r, Outcome::Valid, base + r as f64));
                rows.push(row(p, "h3", r, Outcome::Valid, base * 1.5 + r as f64));
            }
        }
        let s = summarize_runs(&rows, 1, 500, &[], TIMEOUT_MS).unwrap();
        assert_eq!(s.holm_family, 18);
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(s
            .comparisons
            .iter()
            .all(|c| c.comparison.verdict == Verdict::NoSignificantDifference));
    }

    #[test]
    fn dnf_runs_are_slowest_observations_and_tested() {
        let mut rows = Vec::new();
        for r in 1..=6 {
            rows.push(row("cell-edge", "h2", r, Outcome::Valid, 1800.0 + r as f64));
            rows.push(row(
                "cell-edge",
                "h3",
                r,
                if r <= 4 { Outcome::Dnf } else { Outcome::Valid },
                9000.0,
            ));
        }
        let s = summarize_runs(&rows, 1, 500, &[], TIMEOUT_MS).unwrap();
        let h3 = s.series.iter().find(|x| x.key.variant == "h3").unwrap();
        assert!(h3.completion.median_is_dnf());
        assert_eq!(fmt_series(&h3.completion), "DNF (4 of 6 DNF)");
        let c = &s.comparisons[0];
        assert_eq!((c.a, c.b), (Variant::H3, Variant::H2));
        // Decided by the test, inside the Holm family (6 vs 6, fully separated: p ≈ 0.004).
        assert!(c.comparison.p.is_some());
        assert_eq!(s.holm_family, 1);
        assert_eq!(c.comparison.verdict, Verdict::Slower);
        assert_eq!(c.comparison.ratio_bound, RatioBound::AtLeast);
        assert!(terminal(&s).contains("≥"), "{}", terminal(&s));
    }

    #[test]
    fn only_the_last_attempt_of_a_retried_run_counts() {
        let mut rows = Vec::new();
        for r in 1..=5 {
            rows.push(row("wired", "h2", r, Outcome::Valid, 300.0 + r as f64));
        }
        // Round 1 failed on the link first (its time is absurd), then ran clean.
        let mut failed = row("wired", "h2", 1, Outcome::Invalid, 5.0);
        failed.invalid_kinds = vec![ReasonKind::Link];
        failed.measurement_failure = true;
        failed.set(&crate::evidence::metric_registry::COMPLETION_MS, Some(5.0));
        let mut retry = rows[0].clone();
        retry.run_id = format!("{}.a2", retry.plan_id);
        retry.attempt = 2;
        retry.set(
            &crate::evidence::metric_registry::COMPLETION_MS,
            Some(301.0),
        );
        rows[0] = failed;
        rows.push(retry);
        let s = summarize_runs(&rows, 1, 500, &[], TIMEOUT_MS).unwrap();
        let h2 = &s.series[0];
        assert_eq!((h2.completion.n_valid, h2.completion.n_invalid), (5, 0));
        assert_eq!(h2.retries, 1);
        assert_eq!(s.retries, 1);
        assert_eq!(s.invalid_by_reason.get(&ReasonKind::Link), Some(&1));
        assert_eq!(s.links[0].link_invalid, 1);
        assert_eq!(s.links[0].runs, 5, "the link-invalid attempt is left out");
        assert_eq!(s.links[0].achieved_rtt_median_ms, Some(40.05));
        assert!(s.is_current(&rows));
        // The summary of before the retry: same counted runs, but it is stale.
        let before: Vec<RunRow> = rows.iter().filter(|r| r.attempt == 1).cloned().collect();
        let old = summarize_runs(&before, 1, 500, &[], TIMEOUT_MS).unwrap();
        assert!(old.is_current(&before));
        assert!(
            !old.is_current(&rows),
            "a retry makes the older summary stale"
        );
    }

    #[test]
    fn valid_runs_without_the_headline_are_counted_and_said_not_dropped() {
        use crate::evidence::metric_registry::LCP_MS;
        let mut rows = Vec::new();
        for r in 1..=10 {
            let h2 = row("wired", "h2", r, Outcome::Valid, 500.0 + r as f64);
            rows.push(h2.with_value(&LCP_MS, Some(400.0 + r as f64)));
            // h3 recorded no LCP in 3 of its 10 valid runs.
            let h3 = row("wired", "h3", r, Outcome::Valid, 480.0 + r as f64);
            rows.push(h3.with_value(&LCP_MS, (r > 3).then_some(380.0 + r as f64)));
        }
        let s = summarize_runs_on(&LCP_MS, &rows, 1, 500, &[], TIMEOUT_MS).unwrap();
        let of = |v: &str| s.series.iter().find(|x| x.key.variant == v).unwrap();
        assert_eq!(
            (of("h3").without_headline, of("h3").completion.n_valid),
            (3, 7)
        );
        assert_eq!((of("h3").valid_runs(), of("h3").counted_runs()), (10, 10));
        assert_eq!(of("h2").without_headline, 0);
        assert!(s.is_current(&rows));
        let c = &s.comparisons[0];
        assert_eq!((c.comparison.n_valid_a, c.comparison.n_valid_b), (7, 10));
        let warning = s
            .warnings
            .iter()
            .find(|w| w.contains("without LCP"))
            .unwrap();
        assert!(
            warning.contains("wired/page10/embedded/h3 3 of 10") && !warning.contains("/h2"),
            "{warning}"
        );
        assert!(terminal(&s).contains("without LCP (lcp_ms)"));
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &s).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
        assert!(csv.lines().next().unwrap().contains(",n_without_metric,"));
        let h3 = csv.lines().find(|l| l.contains(",h3,")).unwrap();
        assert!(h3.contains(",7,0,0,3,"), "{h3}");
        let back = read(dir.path()).unwrap();
        assert_eq!(back.series[1].without_headline, 3);
        // On loadEventEnd every valid run has its figure: nothing to say, nothing written.
        let load = summarize_runs(&rows, 1, 500, &[], TIMEOUT_MS).unwrap();
        assert!(load.series.iter().all(|x| x.without_headline == 0));
        assert!(!load.warnings.iter().any(|w| w.contains("without")));
        assert!(!serde_json::to_string(&load)
            .unwrap()
            .contains("without_headline"));
    }

    #[test]
    fn reason_kinds_are_read_typed() {
        let tmp = crate::support::tempdir::create("summary-test").unwrap();
        let dir = tmp.path();
        let header = crate::results::csv::RUN_COLUMNS.join(",");
        let mut fields: Vec<String> = vec![String::new(); crate::results::csv::RUN_COLUMNS.len()];
        let set = |f: &mut Vec<String>, name: &str, v: &str| {
            let i = crate::results::csv::RUN_COLUMNS
                .iter()
                .position(|c| *c == name)
                .unwrap();
            f[i] = v.to_string();
        };
        for (k, v) in [
            ("run_id", "a"),
            ("plan_id", "a"),
            ("attempt", "1"),
            ("round", "1"),
            ("position", "1"),
            ("phase", "measure"),
            ("browser", "chromium"),
            ("view", "first"),
            ("variant", "h2"),
            ("outcome", "invalid"),
            ("invalid_kinds", "link"),
            ("measurement_failure", "true"),
            ("viewpoints", "3"),
        ] {
            set(&mut fields, k, v);
        }
        // The same run id twice (a row appended again by hand): read once, the last one kept.
        let first = fields.join(",");
        set(&mut fields, "invalid_kinds", "link server");
        std::fs::write(
            dir.join(RUNS_CSV),
            format!("{header}\n{first}\n{}\n", fields.join(",")),
        )
        .unwrap();
        let rows = read_runs(dir).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            rows[0].invalid_kinds,
            [ReasonKind::Link, ReasonKind::Server]
        );
        set(&mut fields, "invalid_kinds", "gremlins");
        std::fs::write(
            dir.join(RUNS_CSV),
            format!("{header}\n{}\n", fields.join(",")),
        )
        .unwrap();
        let e = format!("{:#}", read_runs(dir).unwrap_err());
        assert!(e.contains("row 2") && e.contains("gremlins"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
