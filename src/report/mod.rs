//! The report: a results directory in, `report.md`, `charts/*.png` and a self-contained
//! `report.html` out. Pure layers (tables, chart data, the document) with a thin IO shell here:
//! read the metadata, the statistics (computed when missing or stale) and the median runs'
//! records, render, write.

pub mod adaptive_runs;
pub mod base_vs_new;
pub mod build;
pub mod chart_data;
pub mod device_tables;
pub mod doc;
pub mod draw;
pub mod filmstrip;
pub mod findings;
pub mod glyph;
pub mod left_out;
pub mod machine_load;
pub mod machines;
pub mod render_paths;
pub mod report_data;
pub mod server_knobs;
pub mod sharding;
pub mod sites;
pub mod study;
pub mod tables;
pub mod wire_tables;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::config::identity::ServerId;
use crate::evidence::metrics::ResourceMetrics;
use crate::results::store::{self, read_meta, read_record};
use crate::results::summary::{self, Summary};
use crate::support::atomic;

pub use chart_data::Chart;
pub use doc::Table;
pub use report_data::ReportData;

/// Bootstrap resamples when the report has to compute the statistics itself.
pub const RESAMPLES: usize = 10_000;
pub const MARKDOWN: &str = "report.md";
pub const HTML: &str = "report.html";
pub const CHARTS_DIR: &str = "charts";

/// A chart as written: its file and the data the renderer was given.
#[derive(Debug, Clone)]
pub struct WrittenChart {
    pub path: PathBuf,
    pub chart: Chart,
}

/// What [`generate`] wrote, and what it was made of.
#[derive(Debug, Clone)]
pub struct ReportOutput {
    pub markdown: PathBuf,
    pub html: PathBuf,
    pub charts: Vec<WrittenChart>,
    /// The tables, as printed.
    pub tables: Vec<Table>,
    /// True when `summary.json` was (re)computed from `runs.csv`.
    pub summary_computed: bool,
    /// The warnings printed in the report (the matrix's and the report's own).
    pub warnings: Vec<String>,
}

impl ReportOutput {
    /// Every file written.
    pub fn paths(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> = vec![&self.markdown, &self.html];
        v.extend(self.charts.iter().map(|c| c.path.as_path()));
        v
    }

    pub fn table(&self, id: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.id == id)
    }
}

/// Reads `summary.json`, or computes and writes it when it is missing, unreadable or older than
/// `runs.csv`. Returns the summary, whether it was computed, and the number of planned runs on
/// record (retried attempts count once).
pub fn load_summary(
    dir: &Path,
    seed: u64,
    servers: &[ServerId],
    timeout_ms: f64,
) -> Result<(Summary, bool, usize)> {
    let rows = summary::read_runs(dir)?;
    let n = summary::final_attempts(&rows).len();
    if rows
        .iter()
        .all(|r| r.phase != crate::config::identity::Phase::Measure)
    {
        anyhow::bail!(
            "{} has no measured runs yet: nothing to report (run or resume the matrix first)",
            dir.join(store::RUNS_CSV).display()
        );
    }
    if dir.join("summary.json").exists() {
        match summary::read(dir) {
            Ok(s) if s.is_current(&rows) => return Ok((s, false, n)),
            Ok(_) => tracing::info!("summary.json is older than runs.csv: recomputing it"),
            Err(e) => tracing::info!("{e:#}: recomputing it"),
        }
    }
    let s = summary::summarize_runs(&rows, seed, RESAMPLES, servers, timeout_ms)
        .with_context(|| format!("computing the statistics of {}", dir.display()))?;
    summary::write(dir, &s)?;
    Ok((s, true, n))
}

/// Renders every chart (two threads: the machine has two cores).
fn render_all(charts: &[Chart]) -> Result<Vec<Vec<u8>>> {
    let half = charts.len().div_ceil(2);
    let (a, b) = charts.split_at(half);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| b.iter().map(draw::render_png).collect::<Result<Vec<_>>>());
        let mut first: Vec<Vec<u8>> = a.iter().map(draw::render_png).collect::<Result<_>>()?;
        let second = other
            .join()
            .map_err(|_| anyhow::anyhow!("a chart-drawing thread panicked"))??;
        first.extend(second);
        Ok(first)
    })
}

/// A run's screencast frames from `frames/<id>/`, shrunk for a filmstrip.
fn read_thumbnails(
    dir: &Path,
    id: &str,
    evidence: &crate::evidence::visual::VisualEvidence,
) -> Result<Vec<crate::evidence::visual::Rgb>> {
    let (w, h) = filmstrip::THUMB;
    evidence
        .frames
        .iter()
        .map(|f| {
            let path = dir.join(store::FRAMES_DIR).join(id).join(&f.file);
            let jpeg =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let frame = crate::evidence::visual::decode_jpeg(&jpeg)
                .with_context(|| format!("{} is not a readable JPEG", path.display()))?;
            crate::evidence::visual::thumbnail(&frame, w, h)
        })
        .collect()
}

/// What a report decides on (`report --metric`): a registry metric flagged `headline`, by its
/// short name — `load` (the study's loadEventEnd; a transfer's completion), `load-event-end`,
/// `fcp`, `lcp`, `speed-index` (runs made with --visual). A new headline is one flag in the
/// registry.
#[derive(Debug, Clone, Copy)]
pub struct HeadlineMetric(&'static crate::evidence::metric_registry::Metric);

impl HeadlineMetric {
    /// The study's: each run's completion.
    pub const LOAD: HeadlineMetric =
        HeadlineMetric(&crate::evidence::metric_registry::COMPLETION_MS);

    pub fn metric(self) -> &'static crate::evidence::metric_registry::Metric {
        self.0
    }

    pub fn is_load(self) -> bool {
        self == HeadlineMetric::LOAD
    }

    /// `load`, or the metric's name without `_ms`, dashed (`speed-index`).
    pub fn short_name(self) -> String {
        if self.is_load() {
            return "load".into();
        }
        self.0.name.trim_end_matches("_ms").replace('_', "-")
    }

    /// Every metric the registry allows as a headline.
    pub fn all() -> impl Iterator<Item = HeadlineMetric> {
        crate::evidence::metric_registry::ALL
            .iter()
            .filter(|m| m.headline)
            .map(|m| HeadlineMetric(m))
    }

    /// Where its report goes: the results directory itself for `load`, `by-<metric>/` in it
    /// for the others (with their own `summary.json`, so the study's stays as it is).
    pub fn out_dir(self, dir: &Path) -> PathBuf {
        if self.is_load() {
            dir.to_path_buf()
        } else {
            dir.join(format!("by-{}", self.short_name()))
        }
    }
}

impl Default for HeadlineMetric {
    fn default() -> Self {
        HeadlineMetric::LOAD
    }
}

impl PartialEq for HeadlineMetric {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for HeadlineMetric {}

impl std::fmt::Display for HeadlineMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.short_name())
    }
}

impl std::str::FromStr for HeadlineMetric {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        HeadlineMetric::all()
            .find(|h| h.short_name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<String> = HeadlineMetric::all().map(|h| h.short_name()).collect();
                format!(
                    "unknown headline metric {s:?}: use one of {}",
                    names.join(", ")
                )
            })
    }
}

/// Writes the report of the results directory `dir`: `report.md`, `charts/*.png`,
/// `report.html` (computing `summary.json` first when it is missing or stale).
pub fn generate(dir: &Path) -> Result<ReportOutput> {
    generate_as(dir, HeadlineMetric::LOAD)
}

/// The report of `dir` deciding on `headline`: for `load`, [`generate`]; for another metric
/// its statistics (series, comparisons, Holm) are computed on that metric and the report is
/// written to [`HeadlineMetric::out_dir`].
pub fn generate_as(dir: &Path, headline: HeadlineMetric) -> Result<ReportOutput> {
    let meta = read_meta(dir)?;
    let out_dir = headline.out_dir(dir);
    let (summary, summary_computed, rows) = if headline.is_load() {
        load_summary(
            dir,
            meta.plan.seed,
            &meta.plan.servers,
            meta.timeout_s * 1e3,
        )?
    } else {
        headline_summary(dir, &meta, headline, &out_dir)?
    };
    let mut warnings: Vec<String> = summary.warnings.clone();
    warnings.extend(matrix_warnings(dir, &meta, rows));
    let mut data = ReportData::new(meta, summary);
    read_median_evidence(dir, &mut data);
    let (records, frames) = median_runs(dir, &data, &mut warnings);
    let mut charts = chart_data::all(&data, &records);
    charts.extend(filmstrip::charts(&data, &frames)?);
    let pngs = render_all(&charts)?;
    let written = write_charts(&out_dir, &charts, &pngs)?;
    let placed: Vec<build::PlacedChart> = charts
        .iter()
        .zip(&pngs)
        .map(|(chart, png)| build::PlacedChart { chart, png })
        .collect();
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_else(|| dir.display().to_string());
    let title = format!("pagebench report — {name}");
    let diagnosis = match crate::diagnosis::slow_transfers::analyze(dir) {
        // Another headline's differences are its own summary's, on its own accounting.
        Ok(mut d) if !headline.is_load() => {
            d.differences = crate::diagnosis::explain::differences(&data.summary);
            Some(d)
        }
        Ok(d) => Some(d),
        Err(e) => {
            warnings.push(format!("the diagnostics could not be computed: {e:#}"));
            None
        }
    };
    let (document, tables) = build::document(&data, &title, &placed, &warnings, diagnosis.as_ref());
    let markdown = out_dir.join(MARKDOWN);
    atomic::write_file(&markdown, doc::to_markdown(&document).as_bytes())?;
    let html = out_dir.join(HTML);
    atomic::write_file(&html, doc::to_html(&document, glyph::FONT_TTF).as_bytes())?;
    Ok(ReportOutput {
        markdown,
        html,
        charts: written,
        tables,
        summary_computed,
        warnings,
    })
}

/// The statistics on another headline than the load (`report --metric`), written under
/// `out_dir`: the summary, that it was computed, and how many runs are on record.
fn headline_summary(
    dir: &Path,
    meta: &store::Meta,
    headline: HeadlineMetric,
    out_dir: &Path,
) -> Result<(summary::Summary, bool, usize)> {
    let rows = summary::read_runs(dir)?;
    let n = summary::final_attempts(&rows).len();
    let metric = headline.metric();
    if !rows.iter().any(|r| r.value(metric).is_some()) {
        anyhow::bail!(
            "{}: no run has {} ({}){}",
            dir.join(store::RUNS_CSV).display(),
            metric.label,
            metric.name,
            if headline.metric().name == crate::evidence::metric_registry::SPEED_INDEX_MS.name {
                ": Speed Index needs runs made with --visual"
            } else {
                ""
            }
        );
    }
    let s = summary::summarize_runs_on(
        metric,
        &rows,
        meta.plan.seed,
        RESAMPLES,
        &meta.plan.servers,
        meta.timeout_s * 1e3,
    )
    .with_context(|| {
        format!(
            "computing the statistics of {} on {}",
            dir.display(),
            metric.name
        )
    })?;
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    summary::write(out_dir, &s)?;
    Ok((s, true, n))
}

/// What the report must say about the matrix itself: unfinished, runs missing, a machine that
/// was not quiet before the runs.
fn matrix_warnings(dir: &Path, meta: &store::Meta, rows: usize) -> Vec<String> {
    let mut warnings = Vec::new();
    if meta.status != "complete" {
        warnings.push(format!(
            "the matrix's status is {:?}: the tables show the runs that finished (resume it with \
`pagebench matrix --resume {}`)",
            meta.status,
            dir.display()
        ));
    }
    if rows < meta.planned_runs && meta.plan.adaptive.is_none() {
        warnings.push(format!(
            "{rows} of the {} planned runs (warm-ups included) are on record",
            meta.planned_runs
        ));
    }
    let unsaid: Vec<&str> = meta
        .plan
        .browsers
        .iter()
        .map(|b| b.name())
        .filter(|b| !meta.engines.contains_key(*b))
        .collect();
    if !unsaid.is_empty() {
        warnings.push(format!(
            "meta.json does not say what {} can tell of a run (made before pagebench kept it): \
cells an engine cannot fill read as missing, and the HTTP/3 mode leaves out how it was reached",
            unsaid.join(" and ")
        ));
    }
    for c in meta.machine_checks.iter().filter(|c| !c.quiet()) {
        warnings.push(format!(
            "the machine was not quiet before the runs ({}): see \"Machine during the run\"",
            c.problems.join("; ")
        ));
    }
    warnings
}

/// What the report reads from each series' median run's record, each record read once: a
/// replayed site's fidelity, the render paths and the visual changes (what a record lacks, or
/// a record that cannot be read, is left out: its rows are then not shown).
fn read_median_evidence(dir: &Path, data: &mut ReportData) {
    let ids: Vec<(String, bool)> = data
        .summary
        .series
        .iter()
        .filter_map(|s| {
            let site = data.meta.sites.contains_key(&s.key.workload);
            Some((s.median_run.clone()?, site))
        })
        .collect();
    for (id, site) in ids {
        let Ok(record) = read_record(dir, &id) else {
            continue;
        };
        if let Some(f) = record.replay_fidelity.filter(|_| site) {
            data.median_replays.insert(id.clone(), f);
        }
        if let Some(p) = record.render_paths {
            data.median_render_paths.insert(id.clone(), p);
        }
        if let Some(p) = record
            .paint_round_trips
            .filter(|p| !p.visual_changes.is_empty())
        {
            data.median_visual_changes.insert(id, p.visual_changes);
        }
    }
}

/// The median runs' per-resource metrics and screencast frames (for the waterfalls, on-wire
/// lines and filmstrips); what cannot be read is said in `warnings`.
fn median_runs(
    dir: &Path,
    data: &ReportData,
    warnings: &mut Vec<String>,
) -> (
    BTreeMap<String, Vec<ResourceMetrics>>,
    BTreeMap<String, filmstrip::RunFrames>,
) {
    let mut records: BTreeMap<String, Vec<ResourceMetrics>> = BTreeMap::new();
    let mut frames: BTreeMap<String, filmstrip::RunFrames> = BTreeMap::new();
    let needed = chart_data::needed_runs(data);
    let mut unreadable = Vec::new();
    for id in &needed {
        let id = id.clone();
        match read_record(dir, &id) {
            Ok(r) => {
                if let Some(evidence) = r.visual {
                    match read_thumbnails(dir, &id, &evidence) {
                        Ok(thumbs) => {
                            frames.insert(
                                id.clone(),
                                filmstrip::RunFrames {
                                    evidence,
                                    thumbs,
                                    load_ms: r.metrics.load_event_end_ms,
                                },
                            );
                        }
                        Err(e) => warnings.push(format!(
                            "run {id}'s screencast frames are unreadable ({e:#}): its filmstrip row is left out"
                        )),
                    }
                }
                records.insert(id, r.resources);
            }
            Err(e) => unreadable.push(format!("{e:#}")),
        }
    }
    // One line, not one per series: a results directory whose raw records were trimmed
    // (committed examples keep runs.csv only) misses them all.
    if let Some(first) = unreadable.first() {
        warnings.push(format!(
            "{} of the {} median runs' records are unreadable (first: {first}): their waterfalls and on-wire lines are left out",
            unreadable.len(),
            needed.len()
        ));
    }
    (records, frames)
}

/// Writes the charts' PNGs under `out_dir`, removing an earlier report's charts this one does
/// not draw (they would mislead).
fn write_charts(out_dir: &Path, charts: &[Chart], pngs: &[Vec<u8>]) -> Result<Vec<WrittenChart>> {
    let charts_dir = out_dir.join(CHARTS_DIR);
    std::fs::create_dir_all(&charts_dir)
        .with_context(|| format!("cannot create {}", charts_dir.display()))?;
    if let Ok(entries) = std::fs::read_dir(&charts_dir) {
        for e in entries.flatten() {
            let name = format!("{CHARTS_DIR}/{}", e.file_name().to_string_lossy());
            if name.ends_with(".png") && !charts.iter().any(|c| c.file == name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let mut written = Vec::new();
    for (c, png) in charts.iter().zip(pngs) {
        let path = out_dir.join(&c.file);
        atomic::write_file(&path, png)?;
        written.push(WrittenChart {
            path,
            chart: c.clone(),
        });
    }
    Ok(written)
}

#[cfg(test)]
mod headline_tests {
    use super::*;

    #[test]
    fn headlines_come_from_the_registry_with_their_old_names_and_directories() {
        let names: Vec<String> = HeadlineMetric::all().map(|h| h.short_name()).collect();
        for n in ["load", "lcp", "fcp", "speed-index"] {
            assert!(names.contains(&n.to_string()), "{names:?}");
        }
        let dir = Path::new("/r");
        let out = |n: &str| n.parse::<HeadlineMetric>().unwrap().out_dir(dir);
        assert_eq!(out("load"), dir);
        assert_eq!(out("lcp"), dir.join("by-lcp"));
        assert_eq!(out("speed-index"), dir.join("by-speed-index"));
        assert_eq!(HeadlineMetric::default(), HeadlineMetric::LOAD);
        let err = "ttfb".parse::<HeadlineMetric>().unwrap_err();
        assert!(err.contains("ttfb") && err.contains("speed-index"), "{err}");
    }
}
