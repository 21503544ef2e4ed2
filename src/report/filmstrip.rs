//! The filmstrip (pure): the median run of each series of one page on one profile, side by side,
//! as the screen looked every 100 ms — WebPageTest's view of "when did the user see it". Frames
//! come from the runs' screencasts (`--visual`); the report's IO shell reads and shrinks them.

use anyhow::{ensure, Result};

use std::collections::BTreeMap;

use super::chart_data::{
    key_pages, on_server, server_suffix, slug, Cdf, CdfLine, CdfPanel, Chart, ChartData, FilmRow,
    Filmstrip,
};
use super::report_data::{workload_title, ReportData};
use crate::evidence::visual::{self, Rgb, VisualEvidence};

/// A median run's screencast as the report read it: its evidence, its frames shrunk to
/// [`THUMB`], and its loadEventEnd.
pub struct RunFrames {
    pub evidence: VisualEvidence,
    pub thumbs: Vec<Rgb>,
    pub load_ms: Option<f64>,
}

/// The visual progress of each series' median run over time, one panel per profile: how much
/// of the final screen was there when (the curve Speed Index is the area above).
pub fn progress_chart(
    data: &ReportData,
    frames: &BTreeMap<String, RunFrames>,
    workload: &str,
    setup: &crate::config::identity::Setup,
) -> Option<Chart> {
    let panels: Vec<CdfPanel> = data
        .profiles_in(workload, setup)
        .into_iter()
        .filter_map(|p| {
            let lines: Vec<CdfLine> = data
                .variants_in(workload, setup)
                .iter()
                .filter_map(|v| {
                    let id = data.series(&p, workload, setup, *v)?.median_run.as_ref()?;
                    let m = frames.get(id)?.evidence.metrics.as_ref()?;
                    Some(CdfLine {
                        series: v.name(),
                        points: m
                            .progress
                            .iter()
                            .map(|(t, pct)| (*t, pct / 100.0))
                            .collect(),
                        n_valid: 1,
                        n_dnf: 0,
                    })
                })
                .collect();
            (!lines.is_empty()).then_some(CdfPanel { title: p, lines })
        })
        .collect();
    if panels.is_empty() {
        return None;
    }
    Some(Chart {
        file: format!(
            "charts/progress-{}{}.png",
            slug(workload),
            server_suffix(data, setup)
        ),
        title: format!(
            "{} — visual progress of the median runs{}",
            workload_title(workload),
            on_server(data, setup)
        ),
        caption: format!(
            "Visual progress (WebPageTest's: how much of the final screen's colours had arrived) of the run closest to each series' median, {}, per profile; Speed Index is the area above the curve up to 1.",
            workload_title(workload)
        ),
        width: super::chart_data::WIDTH,
        height: super::chart_data::grid_height(panels.len()),
        data: ChartData::Cdf(Cdf {
            x_label: "time since navigation start (ms)".into(),
            y_label: "visual progress".into(),
            panels,
        }),
    })
}

/// Per key page: the visual progress chart, then one filmstrip per profile (and server), of
/// the median runs that have frames.
pub fn charts(data: &ReportData, frames: &BTreeMap<String, RunFrames>) -> Result<Vec<Chart>> {
    let mut out = Vec::new();
    for w in key_pages(data) {
        for setup in &data.setups {
            out.extend(progress_chart(data, frames, &w, setup));
            for p in data.profiles_in(&w, setup) {
                let inputs: Vec<FilmInput> = data
                    .variants_in(&w, setup)
                    .iter()
                    .filter_map(|v| {
                        let id = data.series(&p, &w, setup, *v)?.median_run.as_ref()?;
                        let f = frames.get(id)?;
                        Some(FilmInput {
                            series: v.name(),
                            run_id: id.clone(),
                            evidence: &f.evidence,
                            thumbs: f.thumbs.clone(),
                            load_ms: f.load_ms,
                        })
                    })
                    .collect();
                if inputs.is_empty() {
                    continue;
                }
                let strip = layout(inputs)?;
                out.push(chart(
                    strip,
                    &p,
                    &w,
                    &server_suffix(data, setup),
                    &on_server(data, setup),
                ));
            }
        }
    }
    Ok(out)
}

/// WebPageTest's filmstrip step.
pub const INTERVAL_MS: f64 = 100.0;
/// More columns than this and the step grows (200, 250, 500 ms, 1 s…): a strip stays readable.
pub const MAX_COLUMNS: usize = 40;
/// The size of one frame in the strip.
pub const THUMB: (u32, u32) = (160, 90);

/// One series' median run, ready for the strip.
pub struct FilmInput<'a> {
    pub series: String,
    pub run_id: String,
    pub evidence: &'a VisualEvidence,
    /// The frames' thumbnails, in the order of `evidence.frames`.
    pub thumbs: Vec<Rgb>,
    pub load_ms: Option<f64>,
}

/// The step that keeps `until_ms` within [`MAX_COLUMNS`] columns: 100 ms, else the next of
/// 200, 250, 500 ms, 1, 2, 2.5, 5, 10 s…
pub fn interval_for(until_ms: f64) -> f64 {
    let mut steps = [100.0, 200.0, 250.0, 500.0].to_vec();
    let mut decade = 1000.0;
    while steps.len() < 40 {
        steps.extend([decade, 2.0 * decade, 2.5 * decade, 5.0 * decade]);
        decade *= 10.0;
    }
    steps
        .into_iter()
        .find(|s| ((until_ms / s).floor() as usize) < MAX_COLUMNS)
        .unwrap_or(f64::MAX)
}

/// Lays out the strip: columns every [`INTERVAL_MS`] (or more, see [`interval_for`]) from 0 to
/// the latest visual complete of the rows (their last frame when there is none).
pub fn layout(inputs: Vec<FilmInput>) -> Result<Filmstrip> {
    ensure!(!inputs.is_empty(), "a filmstrip needs at least one run");
    let end_of = |i: &FilmInput| -> f64 {
        match &i.evidence.metrics {
            Some(m) => m.visual_complete_ms,
            None => i.evidence.frames.iter().map(|f| f.t_ms).fold(0.0, f64::max),
        }
    };
    let until = inputs.iter().map(end_of).fold(0.0, f64::max).max(0.0);
    let interval = interval_for(until);
    // The last column shows the finished page: round up to the next step.
    let columns = (until / interval).ceil() as usize + 1;
    let ticks_ms: Vec<f64> = (0..columns).map(|c| c as f64 * interval).collect();
    let mut rows = Vec::new();
    let mut sources = Vec::new();
    for input in inputs {
        if !sources.contains(&input.evidence.source) {
            sources.push(input.evidence.source);
        }
        ensure!(
            input.thumbs.len() == input.evidence.frames.len(),
            "run {}: {} thumbnails for {} frames",
            input.run_id,
            input.thumbs.len(),
            input.evidence.frames.len()
        );
        // Frames by time (they are stored in arrival order).
        let mut order: Vec<usize> = (0..input.thumbs.len()).collect();
        order.sort_by(|&a, &b| {
            input.evidence.frames[a]
                .t_ms
                .total_cmp(&input.evidence.frames[b].t_ms)
        });
        let times: Vec<f64> = order
            .iter()
            .map(|&i| input.evidence.frames[i].t_ms)
            .collect();
        let last = *ticks_ms.last().expect("at least one column");
        let at = visual::frames_at_ticks(&times, interval, last)?;
        let cells: Vec<usize> = at.iter().map(|&k| order[k]).collect();
        let changed: Vec<bool> = cells
            .iter()
            .enumerate()
            .map(|(c, &f)| c > 0 && differs(&input.thumbs[cells[c - 1]], &input.thumbs[f]))
            .collect();
        let vc = input
            .evidence
            .metrics
            .as_ref()
            .map(|m| m.visual_complete_ms);
        let first_complete = vc.and_then(|vc| ticks_ms.iter().position(|t| *t >= vc));
        rows.push(FilmRow {
            series: input.series,
            run_id: input.run_id,
            speed_index_ms: input.evidence.metrics.as_ref().map(|m| m.speed_index_ms),
            visual_complete_ms: vc,
            load_ms: input.load_ms,
            complete: (0..cells.len())
                .map(|c| Some(c) == first_complete)
                .collect(),
            cells,
            changed,
            thumbs: input.thumbs,
        });
    }
    Ok(Filmstrip {
        interval_ms: interval,
        sources,
        ticks_ms,
        rows,
    })
}

/// Two thumbnails differ when their mean absolute difference is above JPEG noise.
fn differs(a: &Rgb, b: &Rgb) -> bool {
    if (a.width, a.height) != (b.width, b.height) {
        return true;
    }
    let total: u64 = a
        .pixels
        .iter()
        .zip(&b.pixels)
        .map(|(x, y)| x.abs_diff(*y) as u64)
        .sum();
    total as f64 / a.pixels.len().max(1) as f64 > 0.5
}

/// Pixel layout of a drawn strip.
pub const LABEL_W: u32 = 170;
pub const GAP: u32 = 8;
pub const HEADER_H: u32 = 70;
pub const ROW_LABEL_H: u32 = 22;

/// The strip as a chart of the report.
pub fn chart(strip: Filmstrip, profile: &str, workload: &str, suffix: &str, on: &str) -> Chart {
    let sources = strip
        .sources
        .iter()
        .map(|s| s.described())
        .collect::<Vec<_>>()
        .join(" and of ");
    let (tw, th) = THUMB;
    let columns = strip.ticks_ms.len() as u32;
    let width = LABEL_W + columns * (tw + GAP) + GAP;
    let height = HEADER_H + strip.rows.len() as u32 * (th + GAP + ROW_LABEL_H) + 30;
    let step = if strip.interval_ms < 1000.0 {
        format!("{:.0} ms", strip.interval_ms)
    } else {
        format!("{} s", strip.interval_ms / 1000.0)
    };
    Chart {
        file: format!(
            "charts/filmstrip-{}-{}{suffix}.png",
            slug(workload),
            slug(profile)
        ),
        title: format!(
            "{} on {profile}: what the screen showed, every {step}{on}",
            workload_title(workload)
        ),
        caption: format!(
            "Filmstrip of the run closest to each series' median, {} on {profile}: the screen \
every {step} from navigation start (frames of {}, WebPageTest-style). An orange frame \
changed since the one before; the red one is the first at or after Visually Complete. Each row \
names its Speed Index (SI), Visually Complete (VC) and loadEventEnd.",
            workload_title(workload),
            sources
        ),
        width,
        height,
        data: ChartData::Filmstrip(strip),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::visual::{FrameRef, VisualMetrics};

    fn evidence(times: &[f64], vc: f64) -> VisualEvidence {
        VisualEvidence {
            source: crate::evidence::visual::VisualSource::Video,
            metrics: Some(VisualMetrics {
                progress: vec![(0.0, 0.0), (vc, 100.0)],
                first_visual_change_ms: Some(times[1]),
                speed_index_ms: vc * 0.5,
                visual_complete_ms: vc,
                frames: times.len(),
            }),
            frames: times
                .iter()
                .enumerate()
                .map(|(i, t)| FrameRef {
                    t_ms: *t,
                    file: format!("{i:04}.jpg"),
                })
                .collect(),
            error: None,
        }
    }

    fn shades(n: usize) -> Vec<Rgb> {
        (0..n)
            .map(|i| Rgb::solid(16, 9, [255 - 40 * i as u8; 3]))
            .collect()
    }

    #[test]
    fn steps_keep_the_strip_readable() {
        assert_eq!(interval_for(0.0), 100.0);
        assert_eq!(interval_for(3900.0), 100.0);
        assert_eq!(interval_for(4000.0), 200.0);
        assert_eq!(interval_for(9000.0), 250.0);
        assert_eq!(interval_for(15_000.0), 500.0);
        assert_eq!(interval_for(30_000.0), 1000.0);
        assert_eq!(interval_for(600_000.0), 20_000.0);
    }

    #[test]
    fn columns_show_the_frame_on_screen_and_mark_changes_and_completion() {
        // h2 finishes at 250 ms, h3 at 430 ms: columns 0…500 ms for both.
        let a = evidence(&[-5.0, 120.0, 250.0], 250.0);
        let b = evidence(&[-5.0, 300.0, 430.0], 430.0);
        let strip = layout(vec![
            FilmInput {
                series: "h2".into(),
                run_id: "r-h2".into(),
                evidence: &a,
                thumbs: shades(3),
                load_ms: Some(240.0),
            },
            FilmInput {
                series: "h3".into(),
                run_id: "r-h3".into(),
                evidence: &b,
                thumbs: shades(3),
                load_ms: Some(400.0),
            },
        ])
        .unwrap();
        assert_eq!(strip.interval_ms, 100.0);
        assert_eq!(strip.ticks_ms, [0.0, 100.0, 200.0, 300.0, 400.0, 500.0]);
        let h2 = &strip.rows[0];
        assert_eq!(h2.cells, [0, 0, 1, 2, 2, 2]);
        assert_eq!(h2.changed, [false, false, true, true, false, false]);
        assert_eq!(h2.complete, [false, false, false, true, false, false]);
        let h3 = &strip.rows[1];
        assert_eq!(h3.cells, [0, 0, 0, 1, 1, 2]);
        assert_eq!(h3.complete.iter().position(|c| *c), Some(5));
        let c = chart(strip, "wired", "page50", "", "");
        assert_eq!(c.file, "charts/filmstrip-page50-wired.png");
        assert_eq!(c.width, LABEL_W + 6 * (THUMB.0 + GAP) + GAP);
    }

    #[test]
    fn frames_out_of_order_and_missing_thumbnails() {
        // Arrival order 0, 2, 1 by time: the strip sorts them.
        let mut e = evidence(&[-5.0, 150.0, 60.0], 150.0);
        e.frames[1].t_ms = 150.0;
        let strip = layout(vec![FilmInput {
            series: "h1".into(),
            run_id: "r".into(),
            evidence: &e,
            thumbs: shades(3),
            load_ms: None,
        }])
        .unwrap();
        assert_eq!(strip.rows[0].cells, [0, 2, 1]);
        let bad = layout(vec![FilmInput {
            series: "h1".into(),
            run_id: "r".into(),
            evidence: &e,
            thumbs: shades(2),
            load_ms: None,
        }]);
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("2 thumbnails for 3 frames"));
        assert!(layout(vec![]).is_err());
    }
}
