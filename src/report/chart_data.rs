//! What each chart shows (pure): the numbers handed to the renderer, kept apart from drawing so
//! tests can check a chart's data points against the results directory.

use crate::config::identity::Setup;
use crate::config::protocol::Variant;
use std::collections::BTreeMap;

use serde::Serialize;

use super::report_data::{
    finite_ci, headline_label, ratio_text, workload_title, ReportData, VerdictClass,
};
use super::tables::sweep_workloads;
use crate::evidence::metrics::{onwire_timeline, ResourceMetrics};
use crate::evidence::visual::Rgb;
use crate::support::stats::Censored;

/// Width of every chart, px.
pub const WIDTH: u32 = 1200;

/// One chart: where it goes, what it says, its size and its data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// Path relative to the results directory, e.g. `charts/bars-page50.png`.
    pub file: String,
    pub title: String,
    pub caption: String,
    pub width: u32,
    pub height: u32,
    pub data: ChartData,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ChartData {
    Bars(Bars),
    Heatmap(Heatmap),
    Cdf(Cdf),
    Waterfall(Waterfall),
    Onwire(Onwire),
    Sweep(Sweep),
    Filmstrip(Filmstrip),
}

/// The filmstrip: each series' median run as the screen looked every `interval_ms` (laid out by
/// [`super::filmstrip`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Filmstrip {
    pub interval_ms: f64,
    /// How the rows' frames were taken (each way once, in row order).
    pub sources: Vec<crate::evidence::visual::VisualSource>,
    /// The time of each column, ms after navigation start.
    pub ticks_ms: Vec<f64>,
    pub rows: Vec<FilmRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilmRow {
    pub series: String,
    pub run_id: String,
    pub speed_index_ms: Option<f64>,
    pub visual_complete_ms: Option<f64>,
    pub load_ms: Option<f64>,
    /// Per column: the index into `thumbs` of the frame on screen.
    pub cells: Vec<usize>,
    /// Per column: the screen changed since the column before (WebPageTest's highlight).
    pub changed: Vec<bool>,
    /// Per column: the first column at or after visual complete.
    pub complete: Vec<bool>,
    #[serde(skip)]
    pub thumbs: Vec<Rgb>,
}

/// Grouped bars: one group per profile, one bar per series, CI whiskers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bars {
    pub y_label: String,
    pub groups: Vec<String>,
    /// Legend entries (series names, with the server when there are several).
    pub series: Vec<String>,
    pub bars: Vec<Bar>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bar {
    pub group: usize,
    pub series: usize,
    /// Median of the headline time, ms (`None`: the median is a DNF — at least half the
    /// observations did not finish — or there is no run).
    pub median: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub dnf: bool,
    pub n_valid: usize,
    pub n_invalid: usize,
    pub n_dnf: usize,
}

/// Ratio heatmap: panels (h2/h1, h3/h2…), rows = profiles, columns = workloads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Heatmap {
    /// Panels one above the other (many workloads) instead of side by side.
    pub stacked: bool,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub panels: Vec<HeatPanel>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeatPanel {
    pub a: String,
    pub b: String,
    pub cells: Vec<HeatCell>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeatCell {
    pub row: usize,
    pub col: usize,
    pub ratio: Option<f64>,
    pub verdict: VerdictClass,
    /// What is printed in the cell: the ratio, `DNF`, or `?`.
    pub text: String,
}

/// Empirical CDFs of the headline time, one panel per profile, one line per series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cdf {
    pub x_label: String,
    /// What the lines climb to 1 in ("fraction of runs"; "visual progress").
    pub y_label: String,
    pub panels: Vec<CdfPanel>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfPanel {
    pub title: String,
    pub lines: Vec<CdfLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfLine {
    pub series: String,
    /// (time ms, fraction of the valid + DNF runs finished by then), sorted by time; a series
    /// with DNF runs tops out below 1.
    pub points: Vec<(f64, f64)>,
    pub n_valid: usize,
    pub n_dnf: usize,
}

/// DevTools-style waterfall of the median run of each series in one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Waterfall {
    pub panels: Vec<WaterfallPanel>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaterfallPanel {
    pub series: String,
    pub run_id: String,
    pub completion_ms: Option<f64>,
    /// Resources by start time.
    pub rows: Vec<WaterfallRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaterfallRow {
    pub path: String,
    pub start: f64,
    /// Connection set-up inside the queueing time, when this request opened a connection.
    pub connect: Option<(f64, f64)>,
    /// The name lookup before it, when this request looked its host up (`--dns resolver`).
    pub lookup: Option<(f64, f64)>,
    pub request_start: f64,
    pub response_start: f64,
    pub response_end: f64,
    /// Chromium's priority when it made the request.
    pub priority: Option<String>,
    /// When its priority changed, and when each chunk of its body arrived.
    pub priority_changes: Vec<f64>,
    pub chunks: Vec<f64>,
    /// When the server sent its body (first and last byte, from the wire).
    pub server_sent: Option<(f64, f64)>,
}

/// Requests on the wire over time in the median runs, one panel per profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Onwire {
    pub panels: Vec<OnwirePanel>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OnwirePanel {
    pub title: String,
    pub lines: Vec<OnwireLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OnwireLine {
    pub series: String,
    pub run_id: String,
    /// (t ms, requests between requestStart and responseEnd) at every change.
    pub points: Vec<(f64, usize)>,
}

/// A metric against the file count, one panel per profile, one line per series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    pub x_label: String,
    pub y_label: String,
    pub panels: Vec<SweepPanel>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPanel {
    pub title: String,
    pub lines: Vec<SweepLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepLine {
    pub series: String,
    pub points: Vec<SweepPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    pub files: u32,
    pub median: f64,
    pub ci: Option<(f64, f64)>,
}

/// Height of one heatmap row, px.
pub const HEAT_ROW_PX: u32 = 46;

/// Height of a grid of panels (3 per row).
pub fn grid_height(panels: usize) -> u32 {
    let rows = panels.div_ceil(3).max(1) as u32;
    110 + rows * 330
}

pub fn server_suffix(data: &ReportData, setup: &Setup) -> String {
    if data.several_setups() {
        format!("-{}", setup.slug())
    } else {
        String::new()
    }
}

pub fn on_server(data: &ReportData, setup: &Setup) -> String {
    data.setup_name(setup)
        .map(|n| format!(" ({n})"))
        .unwrap_or_default()
}

/// File-name-safe form of a name.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Grouped bars of one workload: profiles × series (series × servers when several).
pub fn bars(data: &ReportData, workload: &str) -> Option<Chart> {
    let groups: Vec<String> = data
        .profiles
        .iter()
        .filter(|p| {
            data.summary
                .series
                .iter()
                .any(|s| &s.key.profile == *p && s.key.workload == workload)
        })
        .cloned()
        .collect();
    let mut combos: Vec<(Setup, Variant)> = Vec::new();
    for setup in &data.setups {
        for v in data.variants_in(workload, setup) {
            combos.push((setup.clone(), v));
        }
    }
    if groups.is_empty() || combos.is_empty() {
        return None;
    }
    let series: Vec<String> = combos
        .iter()
        .map(|(s, v)| match data.setup_name(s) {
            Some(n) => format!("{v} @ {}", n.trim_start_matches("server ")),
            None => v.name(),
        })
        .collect();
    let mut out = Vec::new();
    for (gi, p) in groups.iter().enumerate() {
        for (si, (setup, v)) in combos.iter().enumerate() {
            let Some(s) = data.series(p, workload, setup, *v) else {
                continue;
            };
            let c = &s.completion;
            out.push(Bar {
                group: gi,
                series: si,
                median: c.median.and_then(Censored::ms),
                ci: finite_ci(c),
                dnf: c.median_is_dnf(),
                n_valid: c.n_valid,
                n_invalid: c.n_invalid,
                n_dnf: c.n_dnf,
            });
        }
    }
    Some(Chart {
        file: format!("charts/bars-{}.png", slug(workload)),
        title: format!(
            "{} — median {} by profile",
            workload_title(workload),
            headline_label(&data.summary.metric, workload).trim_end_matches(" (ms)")
        ),
        caption: format!(
            "{}: median {} per profile and protocol; whiskers = 95 % bootstrap CI of the median; \
`DNF` = the median run did not finish (DNF runs count as the slowest); a whisker that reaches DNF is left out.",
            workload_title(workload),
            headline_label(&data.summary.metric, workload)
        ),
        width: WIDTH,
        height: 700,
        data: ChartData::Bars(Bars {
            y_label: headline_label(&data.summary.metric, workload).to_string(),
            groups,
            series,
            bars: out,
        }),
    })
}

/// Ratio heatmap for one server: h2/h1, h3/h2 (and h3-primed/h2) over profile × workload.
pub fn heatmap(data: &ReportData, setup: &Setup) -> Option<Chart> {
    let pairs: Vec<(Variant, Variant)> = [
        (Variant::H2, Variant::H1),
        (Variant::H3, Variant::H2),
        (Variant::H3_PRIMED, Variant::H2),
    ]
    .into_iter()
    .filter(|(a, b)| {
        data.summary
            .comparisons
            .iter()
            .any(|c| c.within(setup) && c.a == *a && c.b == *b)
    })
    .collect();
    if pairs.is_empty() {
        return None;
    }
    let has = |p: &str, w: &str| {
        pairs
            .iter()
            .any(|(a, b)| data.comparison(p, w, setup, *a, *b).is_some())
    };
    let cols: Vec<String> = data
        .workloads
        .iter()
        .filter(|w| data.profiles.iter().any(|p| has(p, w)))
        .cloned()
        .collect();
    let rows: Vec<String> = data
        .profiles
        .iter()
        .filter(|p| cols.iter().any(|w| has(p, w)))
        .cloned()
        .collect();
    // Side by side, each panel gets a third of the width: more than 5 columns would not fit.
    let stacked = cols.len() * pairs.len() > 15 || cols.len() > 5;
    let panels: Vec<HeatPanel> = pairs
        .iter()
        .map(|(a, b)| {
            let mut cells = Vec::new();
            for (ri, p) in rows.iter().enumerate() {
                for (ci, w) in cols.iter().enumerate() {
                    let Some(c) = data.comparison(p, w, setup, *a, *b) else {
                        continue;
                    };
                    let x = &c.comparison;
                    let verdict = VerdictClass::of(&x.verdict);
                    let text = match x.ratio {
                        Some(r) => ratio_text(r, x.ratio_bound),
                        None => "?".into(),
                    };
                    cells.push(HeatCell {
                        row: ri,
                        col: ci,
                        ratio: x.ratio,
                        verdict,
                        text,
                    });
                }
            }
            HeatPanel {
                a: a.to_string(),
                b: b.to_string(),
                cells,
            }
        })
        .collect();
    Some(Chart {
        file: format!("charts/heatmap{}.png", server_suffix(data, setup)),
        title: format!(
            "Ratios of medians by profile and workload{}",
            on_server(data, setup)
        ),
        caption: "Each cell: median(a) ÷ median(b) of the headline time; colour = verdict after \
Holm's correction over the whole matrix (green: a significantly faster, red: significantly \
slower, grey: no significant difference, yellow: undetermined)."
            .into(),
        width: WIDTH,
        height: if stacked {
            40 + 44 + panels.len() as u32 * (70 + rows.len().max(1) as u32 * HEAT_ROW_PX)
        } else {
            40 + 44 + 70 + rows.len().max(1) as u32 * HEAT_ROW_PX
        },
        data: ChartData::Heatmap(Heatmap {
            stacked,
            rows,
            cols,
            panels,
        }),
    })
}

/// Empirical CDFs of one workload's headline time on one server.
pub fn cdf(data: &ReportData, workload: &str, setup: &Setup) -> Option<Chart> {
    let panels: Vec<CdfPanel> = data
        .profiles_in(workload, setup)
        .iter()
        .map(|p| CdfPanel {
            title: p.clone(),
            lines: data
                .variants_in(workload, setup)
                .iter()
                .filter_map(|v| {
                    let s = data.series(p, workload, setup, *v)?;
                    let c = &s.completion;
                    let mut vals = s.values.clone();
                    vals.sort_by(f64::total_cmp);
                    let total = (c.n_valid + c.n_dnf).max(1) as f64;
                    let points = vals
                        .iter()
                        .enumerate()
                        .map(|(i, x)| (*x, (i + 1) as f64 / total))
                        .collect();
                    Some(CdfLine {
                        series: v.name(),
                        points,
                        n_valid: c.n_valid,
                        n_dnf: c.n_dnf,
                    })
                })
                .collect(),
        })
        .collect();
    if panels.is_empty() {
        return None;
    }
    Some(Chart {
        file: format!(
            "charts/cdf-{}{}.png",
            slug(workload),
            server_suffix(data, setup)
        ),
        title: format!(
            "{} — distribution of {} per profile{}",
            workload_title(workload),
            headline_label(&data.summary.metric, workload).trim_end_matches(" (ms)"),
            on_server(data, setup)
        ),
        caption: format!(
            "Empirical CDF of {} over the runs of each series: the fraction of valid + DNF runs \
finished by a time. A series with runs that did not finish stays below 1; invalid runs are left \
out.",
            headline_label(&data.summary.metric, workload)
        ),
        width: WIDTH,
        height: grid_height(panels.len()),
        data: ChartData::Cdf(Cdf {
            x_label: headline_label(&data.summary.metric, workload).to_string(),
            y_label: "fraction of runs".into(),
            panels,
        }),
    })
}

/// The page workloads that get waterfalls and on-wire charts: the study's pages (else the
/// largest page measured), and every replayed recorded site.
pub fn key_pages(data: &ReportData) -> Vec<String> {
    let mut pages: Vec<String> = ["page50", "page10"]
        .iter()
        .filter(|w| data.has_workload(w))
        .map(|w| w.to_string())
        .collect();
    if pages.is_empty() {
        pages.extend(sweep_workloads(data).last().map(|(_, w)| w.clone()));
    }
    pages.extend(super::sites::recorded_sites(data));
    pages
}

/// The median run of each series in a cell, with its resources (when its record is loaded).
fn median_runs<'a>(
    data: &ReportData,
    records: &'a BTreeMap<String, Vec<ResourceMetrics>>,
    profile: &str,
    workload: &str,
    setup: &Setup,
) -> Vec<(String, String, Option<f64>, &'a [ResourceMetrics])> {
    data.variants_in(workload, setup)
        .iter()
        .filter_map(|v| {
            let s = data.series(profile, workload, setup, *v)?;
            let id = s.median_run.as_ref()?;
            let res = records.get(id)?;
            Some((
                v.name(),
                id.clone(),
                s.completion.median.and_then(Censored::ms),
                res.as_slice(),
            ))
        })
        .collect()
}

/// One resource as a waterfall row: its phases on the page's clock.
fn waterfall_row(r: &ResourceMetrics) -> WaterfallRow {
    WaterfallRow {
        path: r.path.clone(),
        start: r.start_ms,
        connect: r
            .connect_ms
            .map(|c| ((r.request_start_ms - c).max(r.start_ms), r.request_start_ms)),
        lookup: r.dns_ms.map(|d| {
            let connect_start = r
                .connect_ms
                .map_or(r.request_start_ms, |c| r.request_start_ms - c);
            ((connect_start - d).max(r.start_ms), connect_start)
        }),
        request_start: r.request_start_ms,
        response_start: r.response_start_ms,
        response_end: r.response_end_ms,
        priority: r.initial_priority.clone(),
        priority_changes: r.priority_changes.iter().map(|c| c.t_ms).collect(),
        chunks: r.chunks.iter().map(|c| c.t_ms).collect(),
        server_sent: r.server_sent_ms,
    }
}

/// The waterfall of one cell: one panel per series, its median run.
pub fn waterfall(
    data: &ReportData,
    records: &BTreeMap<String, Vec<ResourceMetrics>>,
    profile: &str,
    workload: &str,
    setup: &Setup,
) -> Option<Chart> {
    let runs = median_runs(data, records, profile, workload, setup);
    let panels: Vec<WaterfallPanel> = runs
        .into_iter()
        .filter(|(_, _, _, res)| !res.is_empty())
        .map(|(v, id, median, res)| {
            let mut rows: Vec<WaterfallRow> = res.iter().map(waterfall_row).collect();
            rows.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.path.cmp(&b.path)));
            WaterfallPanel {
                series: v,
                run_id: id,
                completion_ms: median,
                rows,
            }
        })
        .collect();
    if panels.is_empty() {
        return None;
    }
    let n = panels.iter().map(|p| p.rows.len()).max().unwrap_or(0);
    let row_px = (520 / n.max(1)).clamp(8, 22) as u32;
    Some(Chart {
        file: format!(
            "charts/waterfall-{}-{}{}.png",
            slug(workload),
            slug(profile),
            server_suffix(data, setup)
        ),
        title: format!(
            "{} on {profile} — the median run of each protocol{}",
            workload_title(workload),
            on_server(data, setup)
        ),
        caption: format!(
            "Waterfall (the DevTools view) of the run closest to each series' median, {} on \
{profile}: per resource, queueing in the browser (grey; connection set-up in orange), waiting \
for the first byte (TTFB, green) and download (blue); the red line is {}.{}{}{}",
            workload_title(workload),
            headline_label(&data.summary.metric, workload).trim_end_matches(" (ms)"),
            if panels
                .iter()
                .any(|p| p.rows.iter().any(|r| r.priority.is_some()))
            {
                " The square before each bar is Chromium's priority for the request (VeryHigh … \
VeryLow; a black dot where it changed), the black ticks on a bar are when chunks of its body \
reached the browser (`Network.dataReceived`)."
            } else {
                ""
            },
            if panels
                .iter()
                .any(|p| p.rows.iter().any(|r| r.server_sent.is_some()))
            {
                " The thin purple bar under a request is when the server sent its body, read \
off the wire (its first to its last byte leaving the server): the server's order beside the \
browser's priorities."
            } else {
                ""
            },
            if panels
                .iter()
                .any(|p| p.rows.iter().any(|r| r.lookup.is_some()))
            {
                " In teal before a connection's set-up: the lookup of its host's name \
(`--dns resolver`)."
            } else {
                ""
            }
        ),
        width: WIDTH,
        height: 150 + (n as u32 + 1) * row_px,
        data: ChartData::Waterfall(Waterfall { panels }),
    })
}

/// On-wire concurrency over time in the median runs of one workload, one panel per profile.
pub fn onwire(
    data: &ReportData,
    records: &BTreeMap<String, Vec<ResourceMetrics>>,
    workload: &str,
    setup: &Setup,
) -> Option<Chart> {
    let panels: Vec<OnwirePanel> = data
        .profiles_in(workload, setup)
        .iter()
        .filter_map(|p| {
            let lines: Vec<OnwireLine> = median_runs(data, records, p, workload, setup)
                .into_iter()
                .filter(|(_, _, _, res)| !res.is_empty())
                .map(|(v, id, _, res)| OnwireLine {
                    series: v,
                    run_id: id,
                    points: onwire_timeline(res),
                })
                .collect();
            (!lines.is_empty()).then(|| OnwirePanel {
                title: p.clone(),
                lines,
            })
        })
        .collect();
    if panels.is_empty() {
        return None;
    }
    Some(Chart {
        file: format!(
            "charts/onwire-{}{}.png",
            slug(workload),
            server_suffix(data, setup)
        ),
        title: format!(
            "{} — requests on the wire over time (median runs){}",
            workload_title(workload),
            on_server(data, setup)
        ),
        caption: format!(
            "Requests between requestStart and responseEnd at each instant of the median run of \
each series, {}. HTTP/2 puts every request on the wire at once; a throttled origin (HTTP/1.1, \
forced HTTP/3) keeps fewer in flight and the rest wait in the browser.",
            workload_title(workload)
        ),
        width: WIDTH,
        height: grid_height(panels.len()),
        data: ChartData::Onwire(Onwire { panels }),
    })
}

/// Queueing median against the file count (the sweep), one panel per profile.
pub fn sweep(data: &ReportData, setup: &Setup) -> Option<Chart> {
    if !super::tables::has_sweep(data) || !super::tables::setup_has_sweep(data, setup) {
        return None;
    }
    let pages = sweep_workloads(data);
    let panels: Vec<SweepPanel> = data
        .profiles
        .iter()
        .filter_map(|p| {
            let lines: Vec<SweepLine> = data
                .variants
                .iter()
                .filter_map(|v| {
                    let points: Vec<SweepPoint> = pages
                        .iter()
                        .filter_map(|(files, w)| {
                            let s = data.series(p, w, setup, *v)?;
                            if s.completion.median_is_dnf() {
                                return None;
                            }
                            let b = s
                                .breakdown
                                .get(crate::evidence::metric_registry::QUEUEING_MEDIAN_MS.name)?;
                            Some(SweepPoint {
                                files: *files,
                                median: b.median?.ms()?,
                                ci: finite_ci(b),
                            })
                        })
                        .collect();
                    (!points.is_empty()).then(|| SweepLine {
                        series: v.name(),
                        points,
                    })
                })
                .collect();
            // A profile measured at fewer than three file counts has no sweep to show.
            lines
                .iter()
                .any(|l| l.points.len() >= 3)
                .then(|| SweepPanel {
                    title: p.clone(),
                    lines,
                })
        })
        .collect();
    if panels.is_empty() {
        return None;
    }
    Some(Chart {
        file: format!("charts/sweep-queueing{}.png", server_suffix(data, setup)),
        title: format!(
            "Queueing in the browser against the file count{}",
            on_server(data, setup)
        ),
        caption: "Median per-run queueing median (requestStart − startTime) for pages of 10, 20, \
30, 50… files; whiskers = 95 % CI. A line that climbs with the file count means requests wait for \
a free slot (a stream or connection limit, or Chromium's throttling)."
            .into(),
        width: WIDTH,
        height: grid_height(panels.len()),
        data: ChartData::Sweep(Sweep {
            x_label: "files on the page".into(),
            y_label: "queueing median (ms)".into(),
            panels,
        }),
    })
}

/// Every chart of the report, in presentation order.
pub fn all(data: &ReportData, records: &BTreeMap<String, Vec<ResourceMetrics>>) -> Vec<Chart> {
    let mut out = Vec::new();
    for setup in &data.setups {
        out.extend(heatmap(data, setup));
    }
    for w in &data.workloads {
        out.extend(bars(data, w));
    }
    for w in &data.workloads {
        for setup in &data.setups {
            out.extend(cdf(data, w, setup));
        }
    }
    for w in key_pages(data) {
        for setup in &data.setups {
            out.extend(onwire(data, records, &w, setup));
            for p in data.profiles_in(&w, setup) {
                out.extend(waterfall(data, records, &p, &w, setup));
            }
        }
    }
    for setup in &data.setups {
        out.extend(sweep(data, setup));
    }
    for w in &data.workloads {
        out.extend(goodput_by_rate(data, w));
    }
    out
}

/// A transfer's median goodput against the link's rate, one panel per engine and device, one
/// line per protocol: where a protocol stops following the rate, something else set the pace
/// (the report's machine table says whose CPU). Needs two or more rated profiles.
pub fn goodput_by_rate(data: &ReportData, workload: &str) -> Option<Chart> {
    let metric = crate::evidence::metric_registry::GOODPUT_MBIT.name;
    let rated: Vec<(u32, &str)> = data
        .meta
        .profiles
        .iter()
        .filter(|p| data.profiles.contains(&p.name))
        .filter_map(|p| Some((p.down_mbit?.round() as u32, p.name.as_str())))
        .collect();
    if rated.len() < 2 {
        return None;
    }
    let panels: Vec<SweepPanel> = data
        .setups
        .iter()
        .filter_map(|setup| {
            let lines: Vec<SweepLine> = data
                .variants
                .iter()
                .filter_map(|v| {
                    let points: Vec<SweepPoint> = rated
                        .iter()
                        .filter_map(|(rate, p)| {
                            let b = data.series(p, workload, setup, *v)?.breakdown.get(metric)?;
                            Some(SweepPoint {
                                files: *rate,
                                median: b.median?.ms()?,
                                ci: finite_ci(b),
                            })
                        })
                        .collect();
                    (points.len() >= 2).then(|| SweepLine {
                        series: v.name(),
                        points,
                    })
                })
                .collect();
            let title = data
                .setup_name(setup)
                .unwrap_or_else(|| workload.to_string());
            (!lines.is_empty()).then_some(SweepPanel { title, lines })
        })
        .collect();
    if panels.is_empty() {
        return None;
    }
    Some(Chart {
        file: format!("charts/goodput-by-rate-{}.png", slug(workload)),
        title: format!("{workload}: goodput against the link's rate"),
        caption: "Median goodput per series at each profile's rate (whiskers: 95 % CI), one \
panel per engine and device, one line per protocol. A line below the others at the fast rates \
stopped following the link: see \"Machine during the run\" for whose CPU was busiest."
            .into(),
        width: WIDTH,
        height: grid_height(panels.len()),
        data: ChartData::Sweep(Sweep {
            x_label: "link rate (Mbit/s)".into(),
            y_label: "goodput (Mbit/s)".into(),
            panels,
        }),
    })
}

/// The median runs whose records the charts need: (profile, workload, server, series, run id).
pub fn needed_runs(data: &ReportData) -> Vec<String> {
    let mut ids = Vec::new();
    for w in key_pages(data) {
        for s in &data.summary.series {
            if s.key.workload == w {
                if let Some(id) = &s.median_run {
                    ids.push(id.clone());
                }
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(connect_ms: Option<f64>, dns_ms: Option<f64>) -> ResourceMetrics {
        let mut r: ResourceMetrics = serde_json::from_value(serde_json::json!({
            "path": "/b.png", "initiator": "img", "protocol": "h2", "start_ms": 100.0,
            "request_start_ms": 300.0, "response_start_ms": 340.0, "response_end_ms": 350.0,
            "queueing_ms": 200.0, "ttfb_ms": 40.0, "download_ms": 10.0, "transfer_size": 1.0,
            "encoded_body_size": 1.0, "status": 200, "connection_id": null,
            "connection_reused": null
        }))
        .unwrap();
        r.connect_ms = connect_ms;
        r.dns_ms = dns_ms;
        r
    }

    #[test]
    fn a_lookup_is_drawn_before_its_connection_and_never_before_the_request() {
        let row = waterfall_row(&resource(Some(80.0), Some(60.0)));
        assert_eq!(row.connect, Some((220.0, 300.0)));
        assert_eq!(row.lookup, Some((160.0, 220.0)));
        let on_open = waterfall_row(&resource(None, Some(60.0)));
        assert_eq!(on_open.lookup, Some((240.0, 300.0)));
        let clipped = waterfall_row(&resource(Some(80.0), Some(500.0)));
        assert_eq!(clipped.lookup, Some((100.0, 220.0)));
        assert_eq!(waterfall_row(&resource(Some(80.0), None)).lookup, None);
    }
}
