//! The report's tables (pure): the study's tables from our data, with the published numbers
//! beside ours, the 50-file breakdown, the file-count sweep, uploads, server against server and
//! every series. Tables skip what the matrix did not measure and mark missing cells `—`.

use super::doc::{Cell, CellClass, Table};
use super::report_data::{
    comparison_text, fmt_num, headline_label, series_text, workload_kind, workload_title,
    NumFormat, ReportData, VerdictClass,
};
use super::study::{study_ratio, study_value, StudyValue};
use crate::config::identity::Setup;
use crate::config::protocol::Variant;
use crate::config::workload::WorkloadKind;
use crate::evidence::metric_registry::{self, Metric, Precision, Scope};
use crate::results::summary::metric_word;

/// The protocol pairs compared within a cell, in presentation order (ratio = a / b).
pub const PAIRS: [(Variant, Variant); 6] = [
    (Variant::H2, Variant::H1),
    (Variant::H3, Variant::H2),
    (Variant::H3, Variant::H1),
    (Variant::H3_PRIMED, Variant::H2),
    (Variant::H3_PRIMED, Variant::H1),
    (Variant::H3_PRIMED, Variant::H3),
];

/// The comparisons a compact table shows: h2/h1, h3/h2, h3-primed/h2 (those measured).
fn main_pairs(vs: &[Variant]) -> Vec<(Variant, Variant)> {
    [
        (Variant::H2, Variant::H1),
        (Variant::H3, Variant::H2),
        (Variant::H3_PRIMED, Variant::H2),
    ]
    .into_iter()
    .filter(|(a, b)| vs.contains(a) && vs.contains(b))
    .collect()
}

/// A table id, with the setup appended when the matrix has several.
pub(super) fn table_id(data: &ReportData, base: &str, setup: &Setup) -> String {
    if data.several_setups() {
        format!("{base}-{}", setup.slug())
    } else {
        base.to_string()
    }
}

/// ` — server caddy, Firefox`: what varies of the setup, when something does.
pub(super) fn title_suffix(data: &ReportData, setup: &Setup) -> String {
    data.setup_name(setup)
        .map(|n| format!(" — {n}"))
        .unwrap_or_default()
}

pub fn series_cell(
    data: &ReportData,
    profile: &str,
    workload: &str,
    setup: &Setup,
    variant: Variant,
) -> Cell {
    match data.series(profile, workload, setup, variant) {
        None => Cell::missing(),
        Some(s) => {
            let class = if s.completion.median_is_dnf() {
                CellClass::Dnf
            } else {
                CellClass::Text
            };
            let mut text = series_text(&s.completion, NumFormat::Plain);
            if s.without_headline > 0 {
                text.push_str(&format!(
                    " · {} of {} valid without {}",
                    s.without_headline,
                    s.valid_runs(),
                    metric_word(&data.summary.metric)
                ));
            }
            Cell::new(text, class)
        }
    }
}

/// What a cell reads where the setup's engine cannot measure the metric.
const NOT_IN_ENGINE: &str = "n/a";

/// Why the setup's engine cannot measure `metric`, as `meta.json` says (None: it can, or the
/// directory does not say).
fn cannot_fill<'d>(data: &'d ReportData, setup: &Setup, metric: &Metric) -> Option<&'d str> {
    data.engine_tells(setup.browser)?
        .cannot_measure(metric.name)
}

/// The note under a table whose engine cannot fill some of its columns.
fn unfillable_note(data: &ReportData, setup: &Setup, metrics: &[&Metric]) -> Option<String> {
    let lacks: Vec<String> = metrics
        .iter()
        .filter_map(|m| cannot_fill(data, setup, m).map(|why| format!("{} ({why})", m.label)))
        .collect();
    (!lacks.is_empty()).then(|| {
        format!(
            "{} cannot measure {}: those cells read `{NOT_IN_ENGINE}`, not a missing measurement.",
            setup.browser.label(),
            lacks.join(", ")
        )
    })
}

pub(super) fn metric_cell(
    data: &ReportData,
    profile: &str,
    workload: &str,
    setup: &Setup,
    variant: Variant,
    metric: &Metric,
) -> Cell {
    let Some(s) = data.series(profile, workload, setup, variant) else {
        return Cell::missing();
    };
    if cannot_fill(data, setup, metric).is_some() {
        return Cell::new(NOT_IN_ENGINE, CellClass::Missing);
    }
    if s.completion.median_is_dnf() {
        return Cell::new("DNF", CellClass::Dnf);
    }
    match s.breakdown.get(metric.name) {
        Some(b) if b.median.is_some() => {
            let mut b = b.clone();
            // Counts are shown once, in the headline column.
            b.n_invalid = 0;
            b.n_dnf = 0;
            Cell::text(series_text(&b, num_format(metric)))
        }
        _ => Cell::missing(),
    }
}

pub fn comparison_cell(
    data: &ReportData,
    profile: &str,
    workload: &str,
    setup: &Setup,
    a: Variant,
    b: Variant,
) -> Cell {
    match data.comparison(profile, workload, setup, a, b) {
        None => Cell::missing(),
        Some(c) => Cell::new(
            comparison_text(c),
            verdict_cell_class(&c.comparison.verdict),
        ),
    }
}

pub(super) fn verdict_cell_class(v: &crate::support::stats::Verdict) -> CellClass {
    match VerdictClass::of(v) {
        VerdictClass::Faster => CellClass::Faster,
        VerdictClass::Slower => CellClass::Slower,
        VerdictClass::NotSignificant => CellClass::NotSignificant,
        VerdictClass::Undetermined => CellClass::Undetermined,
        VerdictClass::FailsMore => CellClass::Slower,
    }
}

fn study_cell(workload: &str, profile: &str, variant: &str) -> Cell {
    match study_value(workload, profile, variant) {
        Some(v) => Cell::new(v.text(), CellClass::Study),
        None => Cell::missing(),
    }
}

fn study_ratio_cell(workload: &str, profile: &str, a: &str, b: &str) -> Cell {
    match study_ratio(workload, profile, a, b) {
        Some(r) => Cell::new(format!("{r:.2}"), CellClass::Study),
        None => match (
            study_value(workload, profile, a),
            study_value(workload, profile, b),
        ) {
            (Some(StudyValue::DidNotFinish), Some(StudyValue::Ms(_))) => {
                Cell::new(format!("{a} DNF"), CellClass::Study)
            }
            _ => Cell::missing(),
        },
    }
}

/// Whether our verdict on `a` vs `b` reproduces the study's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// Same direction (or both: no real difference).
    Agrees,
    /// Opposite direction.
    Disagrees,
    /// The study saw a difference; we cannot call one significant.
    NotConfirmed,
    /// We see a significant difference where the study's numbers were within 5 %.
    Differs,
}

impl Agreement {
    pub fn text(self) -> &'static str {
        match self {
            Agreement::Agrees => "agrees",
            Agreement::Disagrees => "disagrees",
            Agreement::NotConfirmed => "not confirmed",
            Agreement::Differs => "differs (study ≈ equal)",
        }
    }
}

/// Study ratios within this of 1 count as "no difference" (the study gave no intervals).
const STUDY_EQUAL_BAND: f64 = 0.05;

/// Compares our verdict with the study's direction for `a` vs `b`; `None` when either side
/// has nothing to compare (not published, or our comparison is undetermined).
pub fn agreement(
    data: &ReportData,
    profile: &str,
    workload: &str,
    setup: &Setup,
    a: Variant,
    b: Variant,
) -> Option<Agreement> {
    let ours = VerdictClass::of(
        &data
            .comparison(profile, workload, setup, a, b)?
            .comparison
            .verdict,
    );
    // Study direction: -1 a faster, +1 a slower, 0 about equal.
    let dir = match (
        study_value(workload, profile, &a.name())?,
        study_value(workload, profile, &b.name())?,
    ) {
        (StudyValue::Ms(x), StudyValue::Ms(y)) => {
            let r = x / y;
            if (r - 1.0).abs() < STUDY_EQUAL_BAND {
                0
            } else if r < 1.0 {
                -1
            } else {
                1
            }
        }
        (StudyValue::DidNotFinish, StudyValue::Ms(_)) => 1,
        (StudyValue::Ms(_), StudyValue::DidNotFinish) => -1,
        _ => return None,
    };
    Some(match (ours, dir) {
        (VerdictClass::Undetermined | VerdictClass::FailsMore, _) => return None,
        (VerdictClass::NotSignificant, 0) => Agreement::Agrees,
        (VerdictClass::NotSignificant, _) => Agreement::NotConfirmed,
        (_, 0) => Agreement::Differs,
        (VerdictClass::Faster, -1) | (VerdictClass::Slower, 1) => Agreement::Agrees,
        _ => Agreement::Disagrees,
    })
}

fn agreement_cell(
    data: &ReportData,
    profile: &str,
    workload: &str,
    setup: &Setup,
    a: Variant,
    b: Variant,
) -> Cell {
    match agreement(data, profile, workload, setup, a, b) {
        Some(x) => Cell::text(x.text()),
        None => Cell::missing(),
    }
}

/// Why a study table is absent, for the reader.
pub struct Skipped {
    pub title: String,
    pub why: String,
}

/// Table 1: h1 → h2 on the 50-file page.
pub fn h2_vs_h1(data: &ReportData, setup: &Setup) -> Result<Table, Skipped> {
    let w = "page50";
    let title = format!("h1 → h2 on the 50-file page{}", title_suffix(data, setup));
    let vs = data.variants_in(w, setup);
    if !(vs.contains(&Variant::H1) && vs.contains(&Variant::H2)) {
        return Err(Skipped {
            title,
            why: "not measured (needs page50 with h1 and h2)".into(),
        });
    }
    let header = [
        "profile",
        "h1 (ms)",
        "h2 (ms)",
        "h2/h1",
        "study h1",
        "study h2",
        "study h2/h1",
        "vs study",
    ];
    let rows = data
        .profiles_in(w, setup)
        .iter()
        .map(|p| {
            vec![
                Cell::label(p),
                series_cell(data, p, w, setup, Variant::H1),
                series_cell(data, p, w, setup, Variant::H2),
                comparison_cell(data, p, w, setup, Variant::H2, Variant::H1),
                study_cell(w, p, "h1"),
                study_cell(w, p, "h2"),
                study_ratio_cell(w, p, "h2", "h1"),
                agreement_cell(data, p, w, setup, Variant::H2, Variant::H1),
            ]
        })
        .collect();
    Ok(Table {
        id: table_id(data, "h2-vs-h1-page50", setup),
        title,
        intro: vec![format!(
            "Median {} [95 % CI]; h2/h1 below 1 means h2 is faster (the study's \"gain\").",
            headline_label(&data.summary.metric, w)
        )],
        header: header.iter().map(|s| s.to_string()).collect(),
        rows,
        notes: vec![],
    })
}

/// Tables 2 and 3: h2 vs h3 on the 10- and 50-file pages (and primed h3 when measured).
pub fn h3_vs_h2(data: &ReportData, workload: &str, setup: &Setup) -> Result<Table, Skipped> {
    let title = format!(
        "h2 vs h3 on the {}{}",
        workload_title(workload),
        title_suffix(data, setup)
    );
    let vs = data.variants_in(workload, setup);
    let h3s: Vec<Variant> = [Variant::H3, Variant::H3_PRIMED]
        .into_iter()
        .filter(|h| vs.contains(h))
        .collect();
    if !vs.contains(&Variant::H2) || h3s.is_empty() {
        return Err(Skipped {
            title,
            why: format!("not measured (needs {workload} with h2 and h3)"),
        });
    }
    let mut header: Vec<String> = vec!["profile".into(), "h2 (ms)".into()];
    for h in &h3s {
        header.push(format!("{h} (ms)"));
    }
    for h in &h3s {
        header.push(format!("{h}/h2"));
    }
    header.extend(
        ["study h2", "study h3", "study h3/h2", "vs study (h3/h2)"]
            .iter()
            .map(|s| s.to_string()),
    );
    let rows = data
        .profiles_in(workload, setup)
        .iter()
        .map(|p| {
            let mut r = vec![
                Cell::label(p),
                series_cell(data, p, workload, setup, Variant::H2),
            ];
            for h in &h3s {
                r.push(series_cell(data, p, workload, setup, *h));
            }
            for h in &h3s {
                r.push(comparison_cell(data, p, workload, setup, *h, Variant::H2));
            }
            r.push(study_cell(workload, p, "h2"));
            r.push(study_cell(workload, p, "h3"));
            r.push(study_ratio_cell(workload, p, "h3", "h2"));
            r.push(agreement_cell(
                data,
                p,
                workload,
                setup,
                Variant::H3,
                Variant::H2,
            ));
            r
        })
        .collect();
    let mut intro = vec![format!(
        "Median {} [95 % CI]; h3/h2 below 1 means h3 is faster.",
        headline_label(&data.summary.metric, workload)
    )];
    if h3s.contains(&Variant::H3_PRIMED) {
        intro.push(
            "`h3` is forced cold (the study's method, which Chromium throttles like HTTP/1.1); \
`h3-primed` starts from a profile that already knows the origin speaks h3 (a returning visitor). \
The study measured forced h3 only."
                .into(),
        );
    }
    Ok(Table {
        id: table_id(data, &format!("h3-vs-h2-{workload}"), setup),
        title,
        intro,
        header,
        rows,
        notes: vec![],
    })
}

/// Table 4: the 3 MB download.
pub fn download(data: &ReportData, setup: &Setup) -> Result<Table, Skipped> {
    let w = "download";
    let title = format!("The 3 MB download{}", title_suffix(data, setup));
    let vs = data.variants_in(w, setup);
    if vs.is_empty() {
        return Err(Skipped {
            title,
            why: "not measured (no download series)".into(),
        });
    }
    let pairs = main_pairs(&vs);
    let mut header = transfer_header(&vs, &pairs);
    header.extend(
        ["study h1", "study h2", "study h3", "vs study (h3/h2)"]
            .iter()
            .map(|s| s.to_string()),
    );
    let rows = data
        .profiles_in(w, setup)
        .iter()
        .map(|p| {
            let mut r = transfer_row(data, p, w, setup, &vs, &pairs);
            for v in ["h1", "h2", "h3"] {
                r.push(study_cell(w, p, v));
            }
            r.push(agreement_cell(data, p, w, setup, Variant::H3, Variant::H2));
            r
        })
        .collect();
    Ok(Table {
        id: table_id(data, "download", setup),
        title,
        intro: vec![format!(
            "Median {} [95 % CI] of a page that `fetch()`es one 3 MB file; goodput = bytes ÷ \
(request sent → body complete), medians per protocol.",
            headline_label(&data.summary.metric, w)
        )],
        header,
        rows,
        notes: vec![],
    })
}

fn goodput_cell(data: &ReportData, p: &str, w: &str, setup: &Setup, vs: &[Variant]) -> Cell {
    let parts: Vec<String> = vs
        .iter()
        .filter_map(|v| {
            let s = data.series(p, w, setup, *v)?;
            if s.completion.median_is_dnf() {
                return Some(format!("{v} DNF"));
            }
            let g = s
                .breakdown
                .get(metric_registry::GOODPUT_MBIT.name)?
                .median?
                .ms()?;
            Some(format!("{v} {}", fmt_num(g)))
        })
        .collect();
    if parts.is_empty() {
        Cell::missing()
    } else {
        Cell::text(parts.join(" / "))
    }
}

/// `queueing median` → `Queueing median`.
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// How the report prints a metric's medians.
fn num_format(m: &Metric) -> NumFormat {
    match m.precision {
        Precision::Plain => NumFormat::Plain,
        Precision::Fine => NumFormat::Fine,
    }
}

/// A workload as a title names it: "the 50-file page", or a site's own name.
pub(super) fn workload_phrase(workload: &str) -> String {
    match workload_kind(workload) {
        Some(WorkloadKind::Site { .. }) | None => workload.to_string(),
        _ => format!("the {}", workload_title(workload)),
    }
}

/// Table 5: why — the breakdown of the 50-file page per protocol.
pub fn breakdown(data: &ReportData, workload: &str, setup: &Setup) -> Result<Table, Skipped> {
    let title = format!(
        "Breakdown of {}{}",
        workload_phrase(workload),
        title_suffix(data, setup)
    );
    let vs = data.variants_in(workload, setup);
    if vs.is_empty() {
        return Err(Skipped {
            title,
            why: format!("not measured (no {workload} series)"),
        });
    }
    let mut header: Vec<String> = vec![
        "profile".into(),
        "protocol".into(),
        "loadEventEnd (ms)".into(),
    ];
    let metrics: Vec<&Metric> = metric_registry::breakdown_for(Scope::Pages).collect();
    header.extend(metrics.iter().map(|m| m.label.to_string()));
    let mut rows = series_rows(data, workload, setup, &vs, &metrics);
    drop_unmeasured(&mut header, &mut rows, &metrics);
    Ok(Table {
        id: table_id(data, &format!("breakdown-{workload}"), setup),
        title,
        intro: vec![
            "Medians over the valid runs [95 % CI] of per-run figures: connect = the navigation's \
connection set-up; handshake RTTs = connect ÷ the profile's RTT; queueing = requestStart − \
startTime per resource (time waiting in the browser), its median and p95 within a run; TTFB = \
responseStart − requestStart; on-wire = resources between requestStart and responseEnd at the \
middle of the load window, and the most at any instant."
                .into(),
        ],
        header,
        rows,
        // The study's figures are of its 50-file page only.
        notes: if workload == "page50" {
            vec![super::study::STUDY_BREAKDOWN_NOTE.to_string()]
        } else {
            vec![]
        },
    })
}

/// Columns that only some plans measure: shown where any series has a figure.
const ONLY_WHERE_MEASURED: [&str; 2] = [
    metric_registry::DNS_MS.name,
    metric_registry::CRITICAL_LOOKUPS.name,
];

/// Takes out of a [`series_rows`] table (its `metrics` after three label columns) the columns
/// of [`ONLY_WHERE_MEASURED`] no row has a figure in (`--dns none`: no lookup column; a series
/// that did not finish has none).
pub(super) fn drop_unmeasured(
    header: &mut Vec<String>,
    rows: &mut [Vec<Cell>],
    metrics: &[&Metric],
) {
    for (i, m) in metrics.iter().enumerate().rev() {
        let col = 3 + i;
        let empty = rows
            .iter()
            .all(|r| r.get(col).is_none_or(|c| c.text == "—" || c.text == "DNF"));
        if ONLY_WHERE_MEASURED.contains(&m.name) && empty && col < header.len() {
            header.remove(col);
            for r in rows.iter_mut().filter(|r| r.len() > col) {
                r.remove(col);
            }
        }
    }
}

/// The header of [`series_rows`]: profile, protocol, the headline, then `metrics`.
pub(super) fn series_header(data: &ReportData, workload: &str, metrics: &[&Metric]) -> Vec<String> {
    let mut header: Vec<String> = vec![
        "profile".into(),
        "protocol".into(),
        headline_label(&data.summary.metric, workload).into(),
    ];
    header.extend(metrics.iter().map(|m| m.label.to_string()));
    header
}

/// One row per profile and series of a page: profile, protocol, the headline, then `metrics`.
pub(super) fn series_rows(
    data: &ReportData,
    workload: &str,
    setup: &Setup,
    variants: &[Variant],
    metrics: &[&Metric],
) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for p in data.profiles_in(workload, setup) {
        for v in variants {
            if data.series(&p, workload, setup, *v).is_none() {
                continue;
            }
            let mut r = vec![
                Cell::label(&p),
                Cell::label(v.name()),
                series_cell(data, &p, workload, setup, *v),
            ];
            for m in metrics {
                r.push(metric_cell(data, &p, workload, setup, *v, m));
            }
            rows.push(r);
        }
    }
    rows
}

/// What the user saw on one page: loadEventEnd beside the paint metrics (and, for `--visual`
/// runs, Speed Index and Visually Complete) per profile and protocol.
pub fn paint(data: &ReportData, workload: &str, setup: &Setup) -> Option<Table> {
    let vs = data.variants_in(workload, setup);
    let metrics: Vec<&Metric> = metric_registry::breakdown_for(Scope::Paint)
        .filter(|m| {
            data.summary
                .series
                .iter()
                .any(|s| s.key.workload == workload && s.breakdown.contains_key(m.name))
        })
        .collect();
    if vs.is_empty() || metrics.is_empty() {
        return None;
    }
    let header = series_header(data, workload, &metrics);
    let rows = series_rows(data, workload, setup, &vs, &metrics);
    Some(Table {
        id: table_id(data, &format!("paint-{workload}"), setup),
        title: format!(
            "What the user saw: {}{}",
            workload_phrase(workload),
            title_suffix(data, setup)
        ),
        intro: vec![
            "Medians over the valid runs [95 % CI], ms from navigation start: FCP = First Contentful Paint; LCP = Largest Contentful Paint (on the generated pages, the hero image); hero = the Element Timing of the page's `elementtiming=\"hero\"` image; with `--visual`, Speed Index (∫ (1 − visual progress) dt, WebPageTest's), Visually Complete and First Visual Change from the recorded screen (video of a virtual display for every engine; `--visual=screencast`: Chromium's screencast); CLS = Cumulative Layout Shift (unitless). `pagebench report --metric lcp|fcp|speed-index` makes one of them the headline of every comparison."
                .into(),
        ],
        header,
        rows,
        notes: unfillable_note(data, setup, &metrics)
            .into_iter()
            .collect(),
    })
}

/// The plain `pageN` workloads (file count, name), by file count.
pub fn sweep_workloads(data: &ReportData) -> Vec<(u32, String)> {
    let mut v: Vec<(u32, String)> = data
        .workloads
        .iter()
        .filter_map(|w| match workload_kind(w) {
            Some(WorkloadKind::Page {
                files,
                file_bytes: None,
            }) => Some((files, w.clone())),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

/// A sweep is present when a page other than the study's 10 and 50 files was measured.
pub fn has_sweep(data: &ReportData) -> bool {
    sweep_workloads(data)
        .iter()
        .any(|(n, _)| *n != 10 && *n != 50)
}

/// Whether a server measured at least three file counts (a line, not two points).
pub fn setup_has_sweep(data: &ReportData, setup: &Setup) -> bool {
    sweep_workloads(data)
        .iter()
        .filter(|(_, w)| data.setup_has(w, setup))
        .count()
        >= 3
}

/// Fixed-size pages (`page50x900`…): the "many streams, few bytes" companions of a sweep.
fn fixed_size_pages(data: &ReportData) -> Vec<String> {
    data.workloads
        .iter()
        .filter(|w| {
            matches!(
                workload_kind(w),
                Some(WorkloadKind::Page {
                    file_bytes: Some(_),
                    ..
                })
            )
        })
        .cloned()
        .collect()
}

/// Table 6: the file-count sweep, for one metric (`None`: the headline time).
pub fn sweep(data: &ReportData, setup: &Setup, metric: Option<&Metric>) -> Option<Table> {
    if !has_sweep(data) {
        return None;
    }
    if !setup_has_sweep(data, setup) {
        return None;
    }
    let mut cols: Vec<String> = sweep_workloads(data).into_iter().map(|(_, w)| w).collect();
    cols.extend(fixed_size_pages(data));
    cols.retain(|w| data.setup_has(w, setup));
    let mut header: Vec<String> = vec!["profile".into(), "protocol".into()];
    header.extend(cols.iter().map(|w| workload_title(w)));
    let mut rows = Vec::new();
    for p in &data.profiles {
        for v in &data.variants {
            if !cols.iter().any(|w| data.series(p, w, setup, *v).is_some()) {
                continue;
            }
            let mut r = vec![Cell::label(p), Cell::label(v)];
            for w in &cols {
                r.push(match metric {
                    Some(m) => metric_cell(data, p, w, setup, *v, m),
                    None => series_cell(data, p, w, setup, *v),
                });
            }
            rows.push(r);
        }
    }
    let (id, what) = match metric {
        Some(m) => (
            format!("sweep-{}", m.name.split('_').next().unwrap_or(m.name)),
            format!("{} by file count", capitalized(m.label)),
        ),
        None => (
            "sweep-load".to_string(),
            "loadEventEnd (ms) by file count".to_string(),
        ),
    };
    Some(Table {
        id: table_id(data, &id, setup),
        title: format!("{what}{}", title_suffix(data, setup)),
        intro: vec![
            "Medians [95 % CI]. Pages of N files keep the study's byte budget per file; pages of \
N × SIZE have equal small files (many streams, few bytes)."
                .into(),
        ],
        header,
        rows,
        notes: if metric.is_some() {
            vec![super::study::STUDY_SWEEP_NOTE.to_string()]
        } else {
            vec![]
        },
    })
}

/// What the link delivered per profile: the profile's RTT, the mean RTT the link offered over
/// the runs (its delay's time average, whatever the traffic), the median RTT the link model
/// intended for the runs' packets and the median they got, and how many attempts the link gate
/// rejected (each run again, see "Invalid and unfinished runs").
pub fn link_table(data: &ReportData) -> Option<Table> {
    let links = &data.summary.links;
    if links.is_empty() {
        return None;
    }
    let ms = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "—".into());
    let rows = links
        .iter()
        .map(|l| {
            let p = data.meta.profiles.iter().find(|p| p.name == l.profile);
            vec![
                Cell::label(&l.profile),
                Cell::text(p.map_or("—".into(), |p| fmt_num(p.rtt_ms))),
                Cell::text(p.map_or("—".into(), |p| {
                    if p.jitter_ms > 0.0 {
                        format!("±{} ({})", fmt_num(p.jitter_ms), p.jitter_model.name())
                    } else {
                        "none".into()
                    }
                })),
                Cell::text(ms(l.offered_rtt_mean_ms)),
                Cell::text(ms(l.model_rtt_median_ms)),
                Cell::text(ms(l.achieved_rtt_median_ms)),
                Cell::text(l.runs.to_string()),
                Cell::text(l.link_invalid.to_string()),
            ]
        })
        .collect();
    Some(Table {
        id: "link".into(),
        title: "The link as delivered".into(),
        intro: vec![
            "Per profile, over the runs whose link passed the gate: the mean RTT the link offered \
(the time average of its delay during each run, both directions, whatever the traffic), and the \
median of each run's mean RTT as the link model intended it for that run's packets and as the \
packets got it. The packets' figures sit a little below the offered one on high-jitter profiles: \
a window-limited flow sends more while the delay is low. A run whose achieved RTT is off its \
model's by more than max(0.5 ms, 1 %), whose loss is outside its 99.9 % interval, whose \
releases were late (p99 > 1 ms) or whose packets the kernel dropped is invalid and run again."
                .into(),
        ],
        header: [
            "profile",
            "RTT (ms)",
            "jitter (ms)",
            "offered RTT, mean (ms)",
            "packets' model RTT (ms)",
            "packets' achieved RTT (ms)",
            "runs",
            "rejected by the link gate",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect(),
        rows,
        notes: vec![],
    })
}

/// Upload workloads, one table each.
pub fn uploads(data: &ReportData, setup: &Setup) -> Vec<Table> {
    data.workloads
        .iter()
        .filter(|w| matches!(workload_kind(w), Some(WorkloadKind::Upload { .. })))
        .filter(|w| data.setup_has(w, setup))
        .map(|w| {
            let vs = data.variants_in(w, setup);
            let pairs = main_pairs(&vs);
            let header = transfer_header(&vs, &pairs);
            let rows = data
                .profiles_in(w, setup)
                .iter()
                .map(|p| transfer_row(data, p, w, setup, &vs, &pairs))
                .collect();
            Table {
                id: table_id(data, &format!("upload-{w}"), setup),
                title: format!("The {}{}", workload_title(w), title_suffix(data, setup)),
                intro: vec![format!(
                    "Median {} [95 % CI]: the page POSTs a generated body and waits for the \
server's answer. HTTP/2 uploads suffer from small flow-control windows, HTTP/3 uploads from UDP \
receive-buffer overflow (see `RcvbufErrors` in the run records).",
                    headline_label(&data.summary.metric, w)
                )],
                header,
                rows,
                notes: vec![],
            }
        })
        .collect()
}

/// Server against server: each other server vs the first, per protocol (within each engine).
pub fn servers(data: &ReportData) -> Vec<Table> {
    let Some(first) = data.servers.first() else {
        return vec![];
    };
    let mut out = Vec::new();
    for (view, browser) in views_and_browsers(data) {
        let base = Setup::new(first.clone(), browser).on(view);
        let what = data.engine_and_view(&base);
        let (engine, engine_id) = if what.is_empty() {
            (String::new(), String::new())
        } else {
            (
                format!(" ({})", what.join(", ")),
                format!("-{}", base.slug().trim_start_matches(first.as_str())),
            )
        };
        for other in data.servers.iter().skip(1) {
            let other = Setup::new(other.clone(), browser).on(view);
            let (o, b) = (&other.server, &base.server);
            out.extend(against(
                data,
                (&other, &base),
                format!("server-{o}-vs-{b}{engine_id}"),
                format!("Server {o} against server {b}{engine}"),
                (o.to_string(), b.to_string()),
            ));
        }
    }
    out
}

/// Engine against engine: each other browser vs Chromium, per protocol (within each server):
/// the same page, link and server, only the browser differs.
pub fn engines(data: &ReportData) -> Vec<Table> {
    let Some(first) = data.browsers.first() else {
        return vec![];
    };
    let mut out = Vec::new();
    for view in &data.views {
        for server in &data.servers {
            let base = Setup::new(server.clone(), *first).on(*view);
            let mut on = Vec::new();
            if data.servers.len() > 1 {
                on.push(format!("server {server}"));
            }
            if data.views.len() > 1 || *view != crate::config::identity::View::First {
                on.push(format!("{view} view"));
            }
            let (on, on_id) = if on.is_empty() {
                (String::new(), String::new())
            } else {
                (format!(" ({})", on.join(", ")), format!("-{}", base.slug()))
            };
            for other in data.browsers.iter().skip(1) {
                let other = Setup::new(server.clone(), *other).on(*view);
                let (o, b) = (other.browser, base.browser);
                out.extend(against(
                    data,
                    (&other, &base),
                    format!("browser-{o}-vs-{b}{on_id}"),
                    format!("{} against {}{on}", o.label(), b.label()),
                    (o.label().to_string(), b.label().to_string()),
                ));
            }
        }
    }
    out
}

/// Every (view, browser) of the matrix, views first.
fn views_and_browsers(
    data: &ReportData,
) -> Vec<(
    crate::config::identity::View,
    crate::config::identity::BrowserId,
)> {
    data.views
        .iter()
        .flat_map(|v| data.browsers.iter().map(move |b| (*v, *b)))
        .collect()
}

/// `other` against `base` for every profile, workload and protocol both have; `names` are
/// what the header calls them.
pub(super) fn against(
    data: &ReportData,
    (other, base): (&Setup, &Setup),
    id: String,
    title: String,
    (o, b): (String, String),
) -> Option<Table> {
    let mut rows = Vec::new();
    for w in &data.workloads {
        for p in &data.profiles {
            for v in &data.variants {
                let Some(c) = data.setup_comparison_either(p, w, other, *v, base, *v) else {
                    continue;
                };
                rows.push(vec![
                    Cell::label(p),
                    Cell::label(w),
                    Cell::label(v),
                    series_cell(data, p, w, base, *v),
                    series_cell(data, p, w, other, *v),
                    Cell::new(
                        comparison_text(&c),
                        verdict_cell_class(&c.comparison.verdict),
                    ),
                ]);
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        id,
        title,
        intro: vec![format!(
            "Same protocol, same profile and workload; ratio = {o} / {b}, below 1 means {o} is \
faster."
        )],
        header: vec![
            "profile".into(),
            "workload".into(),
            "protocol".into(),
            format!("{b} (ms)"),
            format!("{o} (ms)"),
            format!("{o}/{b}"),
        ],
        rows,
        notes: vec![],
    })
}

/// Every series of one workload in one setup, with every protocol comparison.
pub fn all_series(data: &ReportData, workload: &str, setup: &Setup) -> Option<Table> {
    let vs = data.variants_in(workload, setup);
    if vs.is_empty() {
        return None;
    }
    let pairs: Vec<(Variant, Variant)> = PAIRS
        .iter()
        .copied()
        .filter(|(a, b)| {
            data.profiles
                .iter()
                .any(|p| data.comparison(p, workload, setup, *a, *b).is_some())
        })
        .collect();
    let mut header: Vec<String> = vec!["profile".into()];
    header.extend(vs.iter().map(|v| format!("{v} (ms)")));
    header.extend(pairs.iter().map(|(a, b)| format!("{a}/{b}")));
    let rows = data
        .profiles_in(workload, setup)
        .iter()
        .map(|p| {
            let mut r = vec![Cell::label(p)];
            r.extend(vs.iter().map(|v| series_cell(data, p, workload, setup, *v)));
            r.extend(
                pairs
                    .iter()
                    .map(|(a, b)| comparison_cell(data, p, workload, setup, *a, *b)),
            );
            r
        })
        .collect();
    Some(Table {
        id: format!("all-{workload}-{}", setup.slug()),
        title: format!(
            "{} on {}",
            workload_title(workload),
            std::iter::once(setup.server.to_string())
                .chain(data.engine_and_view(setup))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        intro: vec![format!(
            "Median {} [95 % CI].",
            headline_label(&data.summary.metric, workload)
        )],
        header,
        rows,
        notes: vec![],
    })
}

/// One line per series with invalid or DNF runs, or valid runs without the headline figure:
/// what went wrong, how often.
pub fn problem_runs(data: &ReportData) -> Vec<String> {
    data.summary
        .series
        .iter()
        .filter(|s| s.completion.n_invalid > 0 || s.completion.n_dnf > 0 || s.without_headline > 0)
        .map(|s| {
            let c = &s.completion;
            let mut t = format!("`{}`:", s.key.label());
            if c.n_invalid > 0 || c.n_dnf > 0 {
                t.push_str(&format!(
                    " {} of {} runs valid, {} invalid, {} did not finish",
                    s.valid_runs(),
                    s.counted_runs(),
                    c.n_invalid,
                    c.n_dnf
                ));
            }
            if !s.invalid_reasons.is_empty() {
                let reasons: Vec<String> = s
                    .invalid_reasons
                    .iter()
                    .map(|(k, n)| format!("{k} × {n}"))
                    .collect();
                t.push_str(&format!(" (invalid: {})", reasons.join(", ")));
            }
            if s.retries > 0 {
                t.push_str(&format!(
                    " ({} retried after a measurement failure)",
                    s.retries
                ));
            }
            if c.median_is_dnf() {
                t.push_str(" — median did not finish");
            }
            if s.without_headline > 0 {
                let sep = if c.n_invalid > 0 || c.n_dnf > 0 { ";" } else { "" };
                t.push_str(&format!(
                    "{sep} {} of {} valid runs have no {}: left out of its median and comparisons, which use the other {}",
                    s.without_headline,
                    s.valid_runs(),
                    metric_word(&data.summary.metric),
                    c.n_valid
                ));
            }
            t
        })
        .collect()
}

/// Header of a transfer table (download, upload): the series, their ratios, goodput.
fn transfer_header(vs: &[Variant], pairs: &[(Variant, Variant)]) -> Vec<String> {
    let mut header: Vec<String> = vec!["profile".into()];
    header.extend(vs.iter().map(|v| format!("{v} (ms)")));
    header.extend(pairs.iter().map(|(a, b)| format!("{a}/{b}")));
    header.push("goodput (Mbit/s)".into());
    header
}

/// One profile's row of a transfer table, matching [`transfer_header`].
fn transfer_row(
    data: &ReportData,
    p: &str,
    w: &str,
    setup: &Setup,
    vs: &[Variant],
    pairs: &[(Variant, Variant)],
) -> Vec<Cell> {
    let mut r = vec![Cell::label(p)];
    r.extend(vs.iter().map(|v| series_cell(data, p, w, setup, *v)));
    r.extend(
        pairs
            .iter()
            .map(|(a, b)| comparison_cell(data, p, w, setup, *a, *b)),
    );
    r.push(goodput_cell(data, p, w, setup, vs));
    r
}

#[cfg(test)]
mod tests;
