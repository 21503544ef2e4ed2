//! Drawing the charts with plotters into an RGB buffer, and encoding them as PNG. Text uses the
//! bundled DejaVu Sans subset (registered once; no system fonts, no fontconfig).

use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};

use super::chart_data::{
    Bar, Bars, Cdf, Chart, ChartData, Filmstrip, Heatmap, Onwire, Sweep, Waterfall, WaterfallPanel,
};
use super::glyph::{self, GlyphBackend, FONT_TTF};
use super::report_data::VerdictClass;

const FAMILY: &str = "sans-serif";

type Area<'a> = DrawingArea<GlyphBackend<'a>, Shift>;

/// A chart with both axes in `f64` (the line charts, the bars and the waterfall).
type XyChart<'a, 'b> = ChartContext<
    'a,
    GlyphBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        [FontStyle::Normal, FontStyle::Bold]
            .into_iter()
            .all(|s| register_font(FAMILY, s, FONT_TTF).is_ok())
    });
    if !ok || !glyph::font_ok() {
        bail!("the bundled chart font (src/support/assets/DejaVuSans-subset.ttf) is not a valid TrueType font");
    }
    Ok(())
}

fn font(size: u32) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

fn bold(size: u32) -> TextStyle<'static> {
    (FAMILY, size)
        .into_font()
        .style(FontStyle::Bold)
        .color(&BLACK)
}

fn anchored(style: TextStyle<'_>, h: HPos, v: VPos) -> TextStyle<'_> {
    style.pos(Pos::new(h, v))
}

/// The colour of a series by its protocol (Okabe–Ito palette, readable by colour-blind
/// readers); `h2 @ caddy` takes the colour of `h2`.
pub fn series_color(series: &str) -> RGBColor {
    let variant = series.split_once(" @ ").map(|(v, _)| v).unwrap_or(series);
    match variant {
        "h1" => RGBColor(230, 159, 0),
        "h2" => RGBColor(0, 114, 178),
        "h3" => RGBColor(213, 94, 0),
        "h3-primed" => RGBColor(0, 158, 115),
        _ => RGBColor(120, 120, 120),
    }
}

/// Series on a server other than the first are drawn lighter.
fn bar_color(series: &str, first_server: &str) -> RGBColor {
    let c = series_color(series);
    match series.split_once(" @ ") {
        Some((_, s)) if s != first_server => lighten(c, 0.45),
        _ => c,
    }
}

fn lighten(c: RGBColor, f: f64) -> RGBColor {
    let m = |x: u8| (x as f64 + (255.0 - x as f64) * f).round() as u8;
    RGBColor(m(c.0), m(c.1), m(c.2))
}

pub fn verdict_color(v: VerdictClass) -> RGBColor {
    match v {
        VerdictClass::Faster => RGBColor(120, 190, 120),
        VerdictClass::Slower => RGBColor(225, 110, 100),
        VerdictClass::NotSignificant => RGBColor(205, 205, 205),
        VerdictClass::Undetermined => RGBColor(250, 225, 120),
        VerdictClass::FailsMore => RGBColor(200, 150, 220),
    }
}

const GRID_LIGHT: RGBColor = RGBColor(238, 238, 238);
const GRID_BOLD: RGBColor = RGBColor(214, 214, 214);
const QUEUE: RGBColor = RGBColor(190, 190, 190);
const CONNECT: RGBColor = RGBColor(240, 150, 40);
const LOOKUP: RGBColor = RGBColor(0, 150, 150);
const TTFB: RGBColor = RGBColor(60, 170, 90);
const DOWNLOAD: RGBColor = RGBColor(40, 110, 200);
const LOAD_LINE: RGBColor = RGBColor(210, 30, 30);
/// The server sending a response, from the wire (a thin bar under the request's).
const SERVER_SENT: RGBColor = RGBColor(120, 40, 160);

/// Axes and grid of the line charts (CDF, on-wire, sweep): six labels per axis, x without
/// decimals, y with `y_decimals`.
fn draw_line_mesh(
    chart: &mut XyChart<'_, '_>,
    x_desc: &str,
    y_desc: &str,
    y_decimals: usize,
) -> Result<()> {
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(6)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(font(13))
        .axis_desc_style(font(14))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.y_decimals$}"))
        .max_light_lines(1)
        .light_line_style(GRID_LIGHT)
        .bold_line_style(GRID_BOLD)
        .draw()
        .map_err(err)
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart failed: {e:?}")
}

/// Renders a chart into an RGB buffer (`width × height × 3` bytes).
pub fn render_rgb(chart: &Chart) -> Result<Vec<u8>> {
    ensure_font()?;
    let (w, h) = (chart.width, chart.height);
    let mut buf = vec![255u8; (w * h * 3) as usize];
    if let ChartData::Filmstrip(f) = &chart.data {
        draw_filmstrip(&mut buf, chart, f)?;
        return Ok(buf);
    }
    {
        let root = GlyphBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let body = root
            .titled(&chart.title, anchored(bold(22), HPos::Center, VPos::Top))
            .map_err(err)?;
        match &chart.data {
            ChartData::Bars(b) => draw_bars(&body, b)?,
            ChartData::Heatmap(hm) => draw_heatmap(&body, hm)?,
            ChartData::Cdf(c) => draw_cdf(&body, c)?,
            ChartData::Waterfall(wf) => draw_waterfall(&body, wf)?,
            ChartData::Onwire(o) => draw_onwire(&body, o)?,
            ChartData::Sweep(s) => draw_sweep(&body, s)?,
            ChartData::Filmstrip(_) => unreachable!("drawn above"),
        }
        root.present().map_err(err)?;
    }
    Ok(buf)
}

/// Encodes an RGB buffer as PNG.
pub fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Default);
        enc.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
        let mut w = enc.write_header().context("PNG header")?;
        w.write_image_data(rgb).context("PNG data")?;
    }
    Ok(out)
}

/// Renders and encodes a chart.
pub fn render_png(chart: &Chart) -> Result<Vec<u8>> {
    let rgb = render_rgb(chart).with_context(|| format!("chart {}", chart.file))?;
    encode_png(&rgb, chart.width, chart.height)
}

#[derive(Clone, Copy)]
enum Swatch {
    Box,
    Line,
}

/// A centred legend row: swatch + label per item.
fn legend_row(area: &Area, items: &[(String, RGBColor, Swatch)]) -> Result<()> {
    let style = font(15);
    let (w, h) = area.dim_in_pixel();
    let widths: Vec<i32> = items
        .iter()
        .map(|(t, _, _)| {
            area.estimate_text_size(t, &style)
                .map(|(w, _)| w as i32)
                .unwrap_or(8 * t.len() as i32)
        })
        .collect();
    let total: i32 = widths.iter().map(|w| 22 + w + 26).sum();
    let mut x = ((w as i32 - total) / 2).max(4);
    let y = h as i32 / 2;
    for ((text, color, kind), tw) in items.iter().zip(widths) {
        match kind {
            Swatch::Box => area
                .draw(&Rectangle::new(
                    [(x, y - 7), (x + 16, y + 7)],
                    color.filled(),
                ))
                .map_err(err)?,
            Swatch::Line => area
                .draw(&PathElement::new(
                    vec![(x, y), (x + 18, y)],
                    color.stroke_width(3),
                ))
                .map_err(err)?,
        }
        area.draw(&Text::new(
            text.clone(),
            (x + 22, y),
            anchored(style.clone(), HPos::Left, VPos::Center),
        ))
        .map_err(err)?;
        x += 22 + tw + 26;
    }
    Ok(())
}

/// Draws text at an absolute backend position on `area` (which may be offset).
fn text_at(area: &Area, text: &str, abs: (i32, i32), style: TextStyle<'_>) -> Result<()> {
    let base = area.get_base_pixel();
    area.draw(&Text::new(
        text.to_string(),
        (abs.0 - base.0, abs.1 - base.1),
        style,
    ))
    .map_err(err)
}

/// A "nice" upper bound for an axis.
fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

fn draw_bars(area: &Area, b: &Bars) -> Result<()> {
    let (legend, plot) = area.split_vertically(40);
    let first_server = b
        .series
        .first()
        .and_then(|s| s.split_once(" @ ").map(|(_, s)| s.to_string()))
        .unwrap_or_default();
    let items: Vec<(String, RGBColor, Swatch)> = b
        .series
        .iter()
        .map(|s| (s.clone(), bar_color(s, &first_server), Swatch::Box))
        .collect();
    legend_row(&legend, &items)?;
    let top = b
        .bars
        .iter()
        .filter_map(|x| x.ci.map(|c| c.1).or(x.median))
        .fold(0.0, f64::max);
    let ymax = nice_max(top * 1.12);
    let ng = b.groups.len().max(1);
    let ns = b.series.len().max(1);
    let mut chart = ChartBuilder::on(&plot)
        .margin_left(10)
        .margin_right(24)
        .margin_top(8)
        .margin_bottom(6)
        .x_label_area_size(58)
        .y_label_area_size(84)
        .build_cartesian_2d(0f64..ng as f64, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .y_desc(b.y_label.as_str())
        .x_desc("network profile")
        .label_style(font(15))
        .axis_desc_style(font(16))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .max_light_lines(1)
        .light_line_style(GRID_LIGHT)
        .bold_line_style(GRID_BOLD)
        .draw()
        .map_err(err)?;
    let slot = 0.8 / ns as f64;
    let slot_px = chart.backend_coord(&(slot, 0.0)).0 - chart.backend_coord(&(0.0, 0.0)).0;
    let layout = BarLayout {
        slot,
        slot_px,
        label_size: if slot_px >= 44 { 13 } else { 11 },
        ymax,
    };
    for bar in &b.bars {
        let color = bar_color(&b.series[bar.series], &first_server);
        draw_bar(&mut chart, bar, color, &layout)?;
    }
    for (gi, g) in b.groups.iter().enumerate() {
        let p = chart.backend_coord(&(gi as f64 + 0.5, 0.0));
        text_at(
            &plot,
            g,
            (p.0, p.1 + 8),
            anchored(font(16), HPos::Center, VPos::Top),
        )?;
    }
    Ok(())
}

/// How wide a bar chart's bars are and how they are labelled, once its scale is known.
struct BarLayout {
    /// One series' share of a group (groups are 1 wide), and that width in pixels.
    slot: f64,
    slot_px: i32,
    label_size: u32,
    ymax: f64,
}

/// One bar at its group and series: the median with its CI and value, or a low stub saying
/// why there is none.
fn draw_bar(chart: &mut XyChart<'_, '_>, bar: &Bar, color: RGBColor, l: &BarLayout) -> Result<()> {
    let x0 = bar.group as f64 + 0.1 + bar.series as f64 * l.slot + l.slot * 0.06;
    let x1 = x0 + l.slot * 0.88;
    let xc = (x0 + x1) / 2.0;
    if bar.dnf || bar.median.is_none() {
        let label = if bar.dnf { "DNF" } else { "no data" };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, l.ymax * 0.04)],
                color.mix(0.35).filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                label.to_string(),
                (xc, l.ymax * 0.05),
                anchored(bold(l.label_size), HPos::Center, VPos::Bottom),
            )))
            .map_err(err)?;
        return Ok(());
    }
    let m = bar.median.unwrap_or(0.0);
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(x0, 0.0), (x1, m)],
            color.filled(),
        )))
        .map_err(err)?;
    let mut label_y = m;
    if let Some((lo, hi)) = bar.ci {
        let cap = l.slot * 0.18;
        let black = BLACK.stroke_width(2);
        chart
            .draw_series([
                PathElement::new(vec![(xc, lo), (xc, hi)], black),
                PathElement::new(vec![(xc - cap, lo), (xc + cap, lo)], black),
                PathElement::new(vec![(xc - cap, hi), (xc + cap, hi)], black),
            ])
            .map_err(err)?;
        label_y = hi;
    }
    // Values only where a bar is wide enough to carry one.
    if l.slot_px >= 26 {
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{m:.0}"),
                (xc, label_y + l.ymax * 0.008),
                anchored(font(l.label_size), HPos::Center, VPos::Bottom),
            )))
            .map_err(err)?;
    }
    Ok(())
}

fn draw_heatmap(area: &Area, hm: &Heatmap) -> Result<()> {
    let (body, legend) = area.split_vertically(area.dim_in_pixel().1 as i32 - 44);
    let fails_more = hm
        .panels
        .iter()
        .flat_map(|p| &p.cells)
        .any(|c| c.verdict == VerdictClass::FailsMore);
    let items: Vec<(String, RGBColor, Swatch)> = VerdictClass::ALL
        .iter()
        .chain(fails_more.then_some(&VerdictClass::FailsMore))
        .map(|v| (v.legend().to_string(), verdict_color(*v), Swatch::Box))
        .collect();
    legend_row(&legend, &items)?;
    let n = hm.panels.len().max(1);
    let panels = if hm.stacked {
        body.split_evenly((n, 1))
    } else {
        body.split_evenly((1, n))
    };
    let row_label_w = 110;
    let ncols = hm.cols.len().max(1) as i32;
    for (panel, area) in hm.panels.iter().zip(panels.iter()) {
        let (pw, _) = area.dim_in_pixel();
        let cell_w = ((pw as i32 - row_label_w - 20) / ncols).clamp(10, 150);
        let cell_h = super::chart_data::HEAT_ROW_PX as i32;
        let grid_w = row_label_w + cell_w * ncols;
        let left = ((pw as i32 - grid_w) / 2).max(0);
        let grid_x = left + row_label_w;
        let centre = grid_x + cell_w * ncols / 2;
        area.draw(&Text::new(
            format!("{} / {}", panel.a, panel.b),
            (centre, 2),
            anchored(bold(16), HPos::Center, VPos::Top),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            format!("below 1: {} faster", panel.a),
            (centre, 22),
            anchored(font(12), HPos::Center, VPos::Top),
        ))
        .map_err(err)?;
        let top = 62;
        let col_font = if cell_w >= 90 { 14 } else { 12 };
        for (ci, c) in hm.cols.iter().enumerate() {
            area.draw(&Text::new(
                c.clone(),
                (grid_x + ci as i32 * cell_w + cell_w / 2, top - 5),
                anchored(font(col_font), HPos::Center, VPos::Bottom),
            ))
            .map_err(err)?;
        }
        for (ri, r) in hm.rows.iter().enumerate() {
            area.draw(&Text::new(
                r.clone(),
                (grid_x - 8, top + ri as i32 * cell_h + cell_h / 2),
                anchored(font(14), HPos::Right, VPos::Center),
            ))
            .map_err(err)?;
        }
        for ri in 0..hm.rows.len() {
            for ci in 0..hm.cols.len() {
                let x0 = grid_x + ci as i32 * cell_w;
                let y0 = top + ri as i32 * cell_h;
                let cell = panel.cells.iter().find(|c| c.row == ri && c.col == ci);
                let (fill, text, size) = match cell {
                    Some(c) => (
                        verdict_color(c.verdict),
                        c.text.clone(),
                        if cell_w >= 70 { 16 } else { 12 },
                    ),
                    None => (RGBColor(248, 248, 248), "—".to_string(), 12),
                };
                area.draw(&Rectangle::new(
                    [(x0 + 1, y0 + 1), (x0 + cell_w - 1, y0 + cell_h - 1)],
                    fill.filled(),
                ))
                .map_err(err)?;
                let style = if cell.is_some() {
                    bold(size)
                } else {
                    font(size)
                };
                area.draw(&Text::new(
                    text,
                    (x0 + cell_w / 2, y0 + cell_h / 2),
                    anchored(style, HPos::Center, VPos::Center),
                ))
                .map_err(err)?;
            }
        }
    }
    Ok(())
}

/// Splits an area into a grid of up to 3 panels per row.
fn grid<'a>(area: &Area<'a>, n: usize) -> Vec<Area<'a>> {
    let cols = n.clamp(1, 3);
    let rows = n.div_ceil(3).max(1);
    let mut v = area.split_evenly((rows, cols));
    v.truncate(n);
    v
}

fn series_legend(area: &Area, names: &[String]) -> Result<()> {
    let items: Vec<(String, RGBColor, Swatch)> = names
        .iter()
        .map(|s| (s.clone(), series_color(s), Swatch::Line))
        .collect();
    legend_row(area, &items)
}

/// Draws a legend row of the distinct series on top of `area`; returns the area below it.
fn with_series_legend<'a, 'n>(
    area: &Area<'a>,
    names: impl Iterator<Item = &'n String>,
) -> Result<Area<'a>> {
    let (legend, body) = area.split_vertically(40);
    series_legend(&legend, &distinct_series(names))?;
    Ok(body)
}

fn distinct_series<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for n in names {
        if !v.contains(n) {
            v.push(n.clone());
        }
    }
    v
}

fn draw_cdf(area: &Area, c: &Cdf) -> Result<()> {
    let body = with_series_legend(
        area,
        c.panels
            .iter()
            .flat_map(|p| p.lines.iter().map(|l| &l.series)),
    )?;
    for (panel, pa) in c.panels.iter().zip(grid(&body, c.panels.len())) {
        let xs = || {
            panel
                .lines
                .iter()
                .flat_map(|l| l.points.iter().map(|p| p.0))
        };
        let hi = xs().fold(0.0, f64::max);
        let lo = xs().fold(f64::INFINITY, f64::min);
        let (xmin, xmax) = padded_range(lo, hi);
        let dnf: Vec<String> = panel
            .lines
            .iter()
            .filter(|l| l.n_dnf > 0)
            .map(|l| format!("{}: {}/{} DNF", l.series, l.n_dnf, l.n_dnf + l.n_valid))
            .collect();
        let caption = if dnf.is_empty() {
            panel.title.clone()
        } else {
            format!("{} ({})", panel.title, dnf.join(", "))
        };
        let mut chart = ChartBuilder::on(&pa)
            .caption(caption, bold(16))
            .margin(8)
            .margin_right(18)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(xmin..xmax, 0f64..1.0)
            .map_err(err)?;
        draw_line_mesh(&mut chart, c.x_label.as_str(), c.y_label.as_str(), 1)?;
        for line in &panel.lines {
            let color = series_color(&line.series);
            let mut pts: Vec<(f64, f64)> = Vec::new();
            let mut prev = 0.0;
            for (x, y) in &line.points {
                push_distinct(&mut pts, (*x, prev));
                push_distinct(&mut pts, (*x, *y));
                prev = *y;
            }
            if let Some(last) = line.points.last() {
                push_distinct(&mut pts, (xmax, last.1));
            }
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(3)))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// An axis range around `[lo, hi]` with some room, starting at 0 when `lo` is near it.
fn padded_range(lo: f64, hi: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) || hi <= 0.0 {
        return (0.0, 1.0);
    }
    let span = (hi - lo).max(hi * 0.05);
    let max = nice_max(hi + span * 0.08);
    let raw_min = lo - span * 0.15;
    if raw_min <= max * 0.25 {
        return (0.0, max);
    }
    let step = nice_max(span) / 10.0;
    ((raw_min / step).floor() * step, max)
}

/// Frames first (copied into the buffer), then the text over the same buffer.
fn draw_filmstrip(buf: &mut [u8], chart: &Chart, f: &Filmstrip) -> Result<()> {
    use super::filmstrip::{GAP, HEADER_H, LABEL_W, ROW_LABEL_H, THUMB};
    let (w, h) = (chart.width, chart.height);
    let (tw, th) = THUMB;
    let fill = |buf: &mut [u8], x0: u32, y0: u32, rw: u32, rh: u32, c: [u8; 3]| {
        for y in y0..(y0 + rh).min(h) {
            for x in x0..(x0 + rw).min(w) {
                let i = ((y * w + x) * 3) as usize;
                buf[i..i + 3].copy_from_slice(&c);
            }
        }
    };
    let row_y = |r: usize| HEADER_H + r as u32 * (th + GAP + ROW_LABEL_H);
    let col_x = |c: usize| LABEL_W + c as u32 * (tw + GAP);
    for (r, row) in f.rows.iter().enumerate() {
        let y0 = row_y(r) + ROW_LABEL_H;
        for (c, &cell) in row.cells.iter().enumerate() {
            let x0 = col_x(c);
            let border = if row.complete[c] {
                [213, 94, 0]
            } else if row.changed[c] {
                [240, 170, 30]
            } else {
                [200, 200, 200]
            };
            let b = if row.complete[c] || row.changed[c] {
                3
            } else {
                1
            };
            fill(buf, x0 - b, y0 - b, tw + 2 * b, th + 2 * b, border);
            fill(buf, x0, y0, tw, th, [255, 255, 255]);
            let t = &row.thumbs[cell];
            let (ox, oy) = (
                x0 + (tw - t.width.min(tw)) / 2,
                y0 + (th - t.height.min(th)) / 2,
            );
            for y in 0..t.height.min(th) {
                for x in 0..t.width.min(tw) {
                    let src = ((y * t.width + x) * 3) as usize;
                    let dst = (((oy + y) * w + ox + x) * 3) as usize;
                    buf[dst..dst + 3].copy_from_slice(&t.pixels[src..src + 3]);
                }
            }
        }
    }
    let root = GlyphBackend::with_buffer(buf, (w, h)).into_drawing_area();
    let text = |s: String, x: i32, y: i32, style: TextStyle| {
        root.draw(&Text::new(s, (x, y), style)).map_err(err)
    };
    text(
        chart.title.clone(),
        (w / 2) as i32,
        10,
        anchored(bold(20), HPos::Center, VPos::Top),
    )?;
    for (c, t) in f.ticks_ms.iter().enumerate() {
        text(
            format!("{:.1} s", t / 1000.0),
            (col_x(c) + tw / 2) as i32,
            HEADER_H as i32 - 22,
            anchored(font(13), HPos::Center, VPos::Top),
        )?;
    }
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0} ms"));
    for (r, row) in f.rows.iter().enumerate() {
        let y = row_y(r) as i32;
        text(
            row.series.clone(),
            10,
            y + (ROW_LABEL_H + th / 2) as i32 - 10,
            bold(18).color(&series_color(&row.series)),
        )?;
        text(
            format!(
                "SI {} · VC {} · loadEventEnd {} · run {}",
                ms(row.speed_index_ms),
                ms(row.visual_complete_ms),
                ms(row.load_ms),
                row.run_id
            ),
            LABEL_W as i32,
            y + 3,
            font(13),
        )?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Chromium's request priorities, highest first, with their colours.
const PRIORITIES: [(&str, RGBColor); 5] = [
    ("VeryHigh", RGBColor(128, 0, 38)),
    ("High", RGBColor(213, 94, 0)),
    ("Medium", RGBColor(230, 159, 0)),
    ("Low", RGBColor(86, 180, 233)),
    ("VeryLow", RGBColor(170, 170, 170)),
];

fn priority_color(p: &str) -> RGBColor {
    PRIORITIES
        .iter()
        .find(|(n, _)| *n == p)
        .map_or(RGBColor(90, 90, 90), |(_, c)| *c)
}

fn draw_waterfall(area: &Area, wf: &Waterfall) -> Result<()> {
    let body = waterfall_legends(area, wf)?;
    let (xmax, n) = waterfall_extent(wf);
    let panels = body.split_evenly((1, wf.panels.len().max(1)));
    for (panel, pa) in wf.panels.iter().zip(panels.iter()) {
        draw_waterfall_panel(pa, panel, xmax, n)?;
    }
    Ok(())
}

/// The phases' legend on top of `area`, and the priorities' below it when any request has
/// one; returns the area below them.
fn waterfall_legends<'a>(area: &Area<'a>, wf: &Waterfall) -> Result<Area<'a>> {
    let (legend, body) = area.split_vertically(40);
    legend_row(
        &legend,
        &[
            ("queueing".into(), QUEUE, Swatch::Box),
            ("connection set-up".into(), CONNECT, Swatch::Box),
            ("TTFB".into(), TTFB, Swatch::Box),
            ("download".into(), DOWNLOAD, Swatch::Box),
            ("median of the series".into(), LOAD_LINE, Swatch::Line),
        ],
    )?;
    let body = if wf
        .panels
        .iter()
        .any(|p| p.rows.iter().any(|r| r.server_sent.is_some()))
    {
        let (legend, body) = body.split_vertically(28);
        legend_row(
            &legend,
            &[(
                "server sending (from the wire)".into(),
                SERVER_SENT,
                Swatch::Box,
            )],
        )?;
        body
    } else {
        body
    };
    let has_priorities = wf
        .panels
        .iter()
        .any(|p| p.rows.iter().any(|r| r.priority.is_some()));
    if !has_priorities {
        return Ok(body);
    }
    let (legend, body) = body.split_vertically(28);
    let items: Vec<(String, RGBColor, Swatch)> = PRIORITIES
        .iter()
        .map(|(n, c)| (format!("priority {n}"), *c, Swatch::Box))
        .collect();
    legend_row(&legend, &items)?;
    Ok(body)
}

/// The panels' shared scales, so that they compare at a glance: the time axis's end (past
/// every response and load line) and the row count (the longest panel's, at least 1).
fn waterfall_extent(wf: &Waterfall) -> (f64, usize) {
    let xmax = nice_max(
        wf.panels
            .iter()
            .flat_map(|p| p.rows.iter().map(|r| r.response_end).chain(p.completion_ms))
            .fold(0.0, f64::max)
            * 1.03,
    );
    let n = wf
        .panels
        .iter()
        .map(|p| p.rows.len())
        .max()
        .unwrap_or(1)
        .max(1);
    (xmax, n)
}

/// One series' median run: its requests top-down by start on `n` rows over `0..xmax` ms.
fn draw_waterfall_panel(pa: &Area, panel: &WaterfallPanel, xmax: f64, n: usize) -> Result<()> {
    let caption = format!(
        "{} — median run {}",
        panel.series,
        short_id(&panel.run_id, &panel.series)
    );
    let mut chart = ChartBuilder::on(pa)
        .caption(caption, bold(15).color(&series_color(&panel.series)))
        .margin(6)
        .margin_right(16)
        .x_label_area_size(44)
        .y_label_area_size(46)
        .build_cartesian_2d(0f64..xmax, 0f64..n as f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_labels(5)
        .y_labels(6)
        .x_desc("time since navigation start (ms)")
        .y_desc("resource (by start)")
        .label_style(font(12))
        .axis_desc_style(font(13))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{}", n as i64 - *v as i64))
        .max_light_lines(1)
        .light_line_style(GRID_LIGHT)
        .bold_line_style(GRID_BOLD)
        .draw()
        .map_err(err)?;
    // Bars first, the marks over them, the load line over everything.
    chart.draw_series(phase_bars(panel, xmax, n)).map_err(err)?;
    chart.draw_series(server_bars(panel, n)).map_err(err)?;
    chart.draw_series(chunk_ticks(panel, n)).map_err(err)?;
    chart
        .draw_series(priority_change_dots(panel, n))
        .map_err(err)?;
    if let Some(c) = panel.completion_ms {
        draw_load_line(&mut chart, c, xmax, n)?;
    }
    Ok(())
}

/// Row `i` of `n` (row 0 at the top) from bottom to top, a little narrower than the row so
/// that neighbours stay apart.
fn row_band(n: usize, i: usize) -> (f64, f64) {
    let y1 = n as f64 - i as f64 - 0.12;
    let y0 = n as f64 - i as f64 - 0.88;
    (y0, y1)
}

/// Each request's phases (queueing, name lookup and connection set-up inside it, TTFB,
/// download) as bars on
/// its row, and its priority as a small box just before its start.
fn phase_bars(panel: &WaterfallPanel, xmax: f64, n: usize) -> Vec<Rectangle<(f64, f64)>> {
    let mut rects = Vec::new();
    for (i, r) in panel.rows.iter().enumerate() {
        let (y0, y1) = row_band(n, i);
        let seg =
            |a: f64, b: f64, c: RGBColor| Rectangle::new([(a, y0), (b.max(a), y1)], c.filled());
        rects.push(seg(r.start, r.request_start, QUEUE));
        if let Some((a, b)) = r.connect {
            rects.push(seg(a, b, CONNECT));
        }
        if let Some((a, b)) = r.lookup {
            rects.push(seg(a, b, LOOKUP));
        }
        rects.push(seg(r.request_start, r.response_start, TTFB));
        rects.push(seg(r.response_start, r.response_end, DOWNLOAD));
        if let Some(p) = &r.priority {
            let side = xmax * 0.008;
            let (a, b) = (
                (r.start - 1.6 * side).max(0.0),
                (r.start - 0.4 * side).max(0.0),
            );
            rects.push(Rectangle::new(
                [(a, y0), (b.max(a + side * 0.5), y1)],
                priority_color(p).filled(),
            ));
        }
    }
    rects
}

/// When the server sent each response (from the wire): a thin bar along the bottom of its row.
fn server_bars(panel: &WaterfallPanel, n: usize) -> Vec<Rectangle<(f64, f64)>> {
    let mut rects = Vec::new();
    for (i, r) in panel.rows.iter().enumerate() {
        if let Some((a, b)) = r.server_sent {
            let (y0, y1) = row_band(n, i);
            let top = y0 + (y1 - y0) * 0.3;
            rects.push(Rectangle::new(
                [(a, y0), (b.max(a), top)],
                SERVER_SENT.filled(),
            ));
        }
    }
    rects
}

/// A tick across its row where each chunk of a request's body arrived.
fn chunk_ticks(panel: &WaterfallPanel, n: usize) -> Vec<PathElement<(f64, f64)>> {
    let mut marks = Vec::new();
    for (i, r) in panel.rows.iter().enumerate() {
        let (y0, y1) = row_band(n, i);
        for t in &r.chunks {
            marks.push(PathElement::new(
                vec![(*t, y0), (*t, y1)],
                BLACK.stroke_width(1),
            ));
        }
    }
    marks
}

/// A dot in the middle of its row where a request's priority changed.
fn priority_change_dots(panel: &WaterfallPanel, n: usize) -> Vec<Circle<(f64, f64), i32>> {
    let mut dots = Vec::new();
    for (i, r) in panel.rows.iter().enumerate() {
        let (y0, y1) = row_band(n, i);
        for t in &r.priority_changes {
            dots.push(Circle::new((*t, (y0 + y1) / 2.0), 3, BLACK.filled()));
        }
    }
    dots
}

/// The series' median completion time as a line across every row, labelled at its top (to
/// its left when near the right edge, so that the label stays inside).
fn draw_load_line(chart: &mut XyChart<'_, '_>, c: f64, xmax: f64, n: usize) -> Result<()> {
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(c, 0.0), (c, n as f64)],
            LOAD_LINE.stroke_width(2),
        )))
        .map_err(err)?;
    chart
        .draw_series(std::iter::once(Text::new(
            format!(" {c:.0} ms "),
            (c, n as f64),
            anchored(
                bold(13).color(&LOAD_LINE),
                if c > xmax * 0.8 {
                    HPos::Right
                } else {
                    HPos::Left
                },
                VPos::Top,
            ),
        )))
        .map_err(err)?;
    Ok(())
}

/// A step path of the most requests in flight within each of `bins` slices of `[0, xmax]`:
/// notches narrower than a pixel (one request ends as the next starts) would otherwise draw as
/// specks.
fn envelope(points: &[(f64, usize)], xmax: f64, bins: usize) -> Vec<(f64, f64)> {
    let Some(last_t) = points.last().map(|p| p.0) else {
        return vec![];
    };
    let width = xmax / bins as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut current = 0usize;
    let mut i = 0;
    for b in 0..bins {
        let (x0, x1) = (b as f64 * width, (b + 1) as f64 * width);
        if x0 > last_t {
            break;
        }
        let mut peak = current;
        while i < points.len() && points[i].0 < x1 {
            current = points[i].1;
            peak = peak.max(current);
            i += 1;
        }
        let y = peak as f64;
        let before = out.last().map(|p| p.1);
        if before != Some(y) {
            push_distinct(&mut out, (x0, before.unwrap_or(0.0)));
            push_distinct(&mut out, (x0, y));
        }
        push_distinct(&mut out, (x1.min(last_t.max(x0)), y));
        if out.len() >= 2 {
            // Merge collinear horizontal runs.
            let n = out.len();
            if n >= 3 && out[n - 1].1 == out[n - 2].1 && out[n - 2].1 == out[n - 3].1 {
                out.remove(n - 2);
            }
        }
    }
    if let (Some(&(_, y)), Some(&(_, fin))) = (out.last(), points.last()) {
        push_distinct(&mut out, (last_t, y));
        push_distinct(&mut out, (last_t, fin as f64));
    }
    out
}

/// Appends a point unless it repeats the last one (zero-length segments of thick lines leave
/// specks in plotters' polygon outline).
fn push_distinct(pts: &mut Vec<(f64, f64)>, p: (f64, f64)) {
    if pts.last() != Some(&p) {
        pts.push(p);
    }
}

/// The part of a run id that tells runs of one cell apart: `wired-page50-r03-h2` → `r03`
/// (profile, workload and series are in the chart already); long remainders are cut.
fn short_id(id: &str, series: &str) -> String {
    let core = id.strip_suffix(&format!("-{series}")).unwrap_or(id);
    let tag = core.rsplit('-').find(|p| {
        p.len() >= 2
            && (p.starts_with('r') || p.starts_with('w'))
            && p[1..].chars().all(|c| c.is_ascii_digit())
    });
    match tag {
        Some(t) => t.to_string(),
        None if id.chars().count() > 24 => {
            let c: Vec<char> = id.chars().collect();
            format!("…{}", c[c.len() - 22..].iter().collect::<String>())
        }
        None => id.to_string(),
    }
}

fn draw_onwire(area: &Area, o: &Onwire) -> Result<()> {
    let body = with_series_legend(
        area,
        o.panels
            .iter()
            .flat_map(|p| p.lines.iter().map(|l| &l.series)),
    )?;
    for (panel, pa) in o.panels.iter().zip(grid(&body, o.panels.len())) {
        let xmax = nice_max(
            panel
                .lines
                .iter()
                .flat_map(|l| l.points.iter().map(|p| p.0))
                .fold(0.0, f64::max)
                * 1.03,
        );
        let ymax = panel
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .max()
            .unwrap_or(1)
            .max(1) as f64
            * 1.1;
        let mut chart = ChartBuilder::on(&pa)
            .caption(&panel.title, bold(16))
            .margin(8)
            .margin_right(18)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax.ceil())
            .map_err(err)?;
        draw_line_mesh(
            &mut chart,
            "time since navigation start (ms)",
            "requests on the wire",
            0,
        )?;
        for line in &panel.lines {
            let pts = envelope(&line.points, xmax, 500);
            chart
                .draw_series(LineSeries::new(
                    pts,
                    series_color(&line.series).stroke_width(2),
                ))
                .map_err(err)?;
        }
    }
    Ok(())
}

fn draw_sweep(area: &Area, s: &Sweep) -> Result<()> {
    let body = with_series_legend(
        area,
        s.panels
            .iter()
            .flat_map(|p| p.lines.iter().map(|l| &l.series)),
    )?;
    let xmax = s
        .panels
        .iter()
        .flat_map(|p| {
            p.lines
                .iter()
                .flat_map(|l| l.points.iter().map(|x| x.files))
        })
        .max()
        .unwrap_or(10) as f64
        * 1.08;
    for (panel, pa) in s.panels.iter().zip(grid(&body, s.panels.len())) {
        let ymax = nice_max(
            panel
                .lines
                .iter()
                .flat_map(|l| {
                    l.points
                        .iter()
                        .map(|p| p.ci.map(|c| c.1).unwrap_or(p.median))
                })
                .fold(0.0, f64::max)
                * 1.1,
        );
        let mut chart = ChartBuilder::on(&pa)
            .caption(&panel.title, bold(16))
            .margin(8)
            .margin_right(18)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(err)?;
        draw_line_mesh(&mut chart, s.x_label.as_str(), s.y_label.as_str(), 0)?;
        for line in &panel.lines {
            let color = series_color(&line.series);
            let pts: Vec<(f64, f64)> = line
                .points
                .iter()
                .map(|p| (p.files as f64, p.median))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(3)))
                .map_err(err)?;
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 5, color.filled())))
                .map_err(err)?;
            let cap = xmax * 0.012;
            for p in &line.points {
                if let Some((lo, hi)) = p.ci {
                    let x = p.files as f64;
                    chart
                        .draw_series([
                            PathElement::new(vec![(x, lo), (x, hi)], color.stroke_width(2)),
                            PathElement::new(
                                vec![(x - cap, lo), (x + cap, lo)],
                                color.stroke_width(2),
                            ),
                            PathElement::new(
                                vec![(x - cap, hi), (x + cap, hi)],
                                color.stroke_width(2),
                            ),
                        ])
                        .map_err(err)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_bounds() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(95.0), 100.0);
        assert_eq!(nice_max(101.0), 120.0);
        assert_eq!(nice_max(2289.0 * 1.12), 3000.0);
    }

    #[test]
    fn envelope_keeps_peaks_and_drops_notches() {
        // 0..10 ms: 1 in flight; at 10.2 one ends and at 10.3 the next starts (a notch).
        let pts = vec![(0.0, 1), (5.0, 2), (10.2, 1), (10.3, 2), (20.0, 0)];
        let e = envelope(&pts, 40.0, 40);
        assert_eq!(e.iter().map(|p| p.1).fold(0.0, f64::max), 2.0);
        // No dip to 1 between 5 and 20 ms.
        assert!(
            e.iter().all(|p| !(p.0 > 5.5 && p.0 < 19.5 && p.1 < 2.0)),
            "{e:?}"
        );
        assert_eq!(e.last().unwrap().0, 20.0);
    }

    #[test]
    fn second_server_is_lighter() {
        assert_eq!(series_color("h2"), RGBColor(0, 114, 178));
        assert_eq!(
            bar_color("h2 @ embedded", "embedded"),
            RGBColor(0, 114, 178)
        );
        assert_ne!(bar_color("h2 @ caddy", "embedded"), RGBColor(0, 114, 178));
    }
}
