//! Visual metrics (pure): the screencast frames of one load in (JPEG, each with its time after
//! navigation start), WebPageTest's visual progress, First Visual Change, Speed Index and Visually
//! Complete out, plus the pixels a filmstrip needs (decoded frames, thumbnails, PNG). No IO, no
//! clock.
//!
//! Progress follows WebPageTest's `visualmetrics.py`: a frame is compared with the first (blank)
//! and the last (finished) frame by colour histograms, so it measures how much of the final
//! colour mass has arrived, not where; near-white pixels are page background and do not count.

use anyhow::{bail, ensure, Context, Result};
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// A pixel whose three channels all exceed this is page background ("nothing painted"), left out
/// of histograms as WebPageTest does.
pub const WHITE_ABOVE: u8 = 250;

/// How many histogram bins a colour may drift (JPEG noise, antialiasing) and still count as
/// the colour it is meant to be: WebPageTest's slop, applied either side of a bin.
const SLOP_BINS: usize = 5;

/// Progress at or above this is complete: it absorbs f64 rounding, not unfinished pages.
const COMPLETE: f64 = 0.9995;

/// The most ticks one filmstrip may ask for; more means the interval is a unit mistake.
const MAX_TICKS: usize = 100_000;

/// How a run's frames were taken (`--visual[=HOW]`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum VisualSource {
    /// Video of the browser's window on a virtual display (Xvfb), read 30 times a second: the
    /// same instrument for every engine, as browsertime's.
    #[default]
    Video,
    /// Chromium's screencast (DevTools `Page.startScreencast`): a frame per paint, headless,
    /// Chromium only.
    Screencast,
}

impl VisualSource {
    /// Its name in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            VisualSource::Video => "video",
            VisualSource::Screencast => "screencast",
        }
    }

    /// What took the frames, in a report's words.
    pub fn described(self) -> &'static str {
        match self {
            VisualSource::Video => "video of the screen (Xvfb, 30 frames a second)",
            VisualSource::Screencast => "Chromium's screencast",
        }
    }

    /// What records stored before the method was recorded meant: the screencast.
    pub fn before_video() -> VisualSource {
        VisualSource::Screencast
    }
}

/// After the load, the screen is recorded on until it has not changed for this long…
pub const TAIL_QUIET: std::time::Duration = std::time::Duration::from_millis(1000);
/// …or this long after the load (a page that never stops animating).
pub const TAIL_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// A decoded frame: RGB8, row-major, `pixels.len() == width * height * 3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

impl Rgb {
    /// A frame from raw RGB8 bytes; errors if their length does not match the size.
    pub fn new(width: u32, height: u32, pixels: Vec<u8>) -> Result<Rgb> {
        let expected = byte_len(width, height)?;
        ensure!(
            pixels.len() == expected,
            "an RGB frame of {width}×{height} needs {expected} bytes, got {}",
            pixels.len()
        );
        Ok(Rgb {
            width,
            height,
            pixels,
        })
    }

    /// A frame of one colour.
    pub fn solid(width: u32, height: u32, colour: [u8; 3]) -> Rgb {
        let pixels = colour.repeat(width as usize * height as usize);
        Rgb {
            width,
            height,
            pixels,
        }
    }

    /// Paints the `w`×`h` rectangle at (`x`, `y`) in `colour`; the part outside the frame is
    /// dropped.
    pub fn fill_rect(&mut self, x: u32, y: u32, w: u32, h: u32, colour: [u8; 3]) {
        let x_end = x.saturating_add(w).min(self.width);
        let y_end = y.saturating_add(h).min(self.height);
        for row in y.min(y_end)..y_end {
            for col in x.min(x_end)..x_end {
                let i = self.offset(col, row);
                self.pixels[i..i + 3].copy_from_slice(&colour);
            }
        }
    }

    /// The colour at (`x`, `y`), `None` outside the frame.
    pub fn pixel(&self, x: u32, y: u32) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = self.offset(x, y);
        Some([self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]])
    }

    fn offset(&self, x: u32, y: u32) -> usize {
        (y as usize * self.width as usize + x as usize) * 3
    }
}

fn byte_len(width: u32, height: u32) -> Result<usize> {
    (width as usize)
        .checked_mul(height as usize)
        .and_then(|n| n.checked_mul(3))
        .with_context(|| format!("an RGB frame of {width}×{height} does not fit in memory"))
}

/// Decodes a JPEG (a screencast frame) to RGB; grayscale and CMYK JPEGs are converted.
pub fn decode_jpeg(bytes: &[u8]) -> Result<Rgb> {
    let mut decoder = jpeg_decoder::Decoder::new(bytes);
    let data = decoder
        .decode()
        .with_context(|| format!("decoding a JPEG frame of {} bytes", bytes.len()))?;
    let info = decoder
        .info()
        .context("the JPEG decoder returned pixels but no image size")?;
    let pixels = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 => data,
        jpeg_decoder::PixelFormat::L8 => data.iter().flat_map(|&l| [l, l, l]).collect(),
        jpeg_decoder::PixelFormat::CMYK32 => data.chunks_exact(4).flat_map(cmyk_to_rgb).collect(),
        jpeg_decoder::PixelFormat::L16 => bail!(
            "the JPEG frame is 16-bit grayscale (lossless JPEG), which is not supported: \
             screencast frames are 8-bit"
        ),
    };
    Rgb::new(u32::from(info.width), u32::from(info.height), pixels)
        .context("the JPEG decoder returned the wrong number of pixels")
}

/// jpeg-decoder hands out CMYK as ink amounts (0 = no ink), Adobe's inversion already undone.
fn cmyk_to_rgb(cmyk: &[u8]) -> [u8; 3] {
    let paper = 255 - u16::from(cmyk[3]);
    let channel = |ink: u8| ((255 - u16::from(ink)) * paper / 255) as u8;
    [channel(cmyk[0]), channel(cmyk[1]), channel(cmyk[2])]
}

/// Decodes a base64 JPEG, as CDP's `Page.screencastFrame` carries it in `data`.
pub fn decode_base64_jpeg(b64: &str) -> Result<Rgb> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .context("a screencast frame's data is not valid base64")?;
    decode_jpeg(&bytes)
}

/// Per-channel 256-bin histograms of a frame, ignoring near-white pixels (all three channels
/// > 250), as WebPageTest's visualmetrics does: a white page background is "nothing painted".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    pub r: [u32; 256],
    pub g: [u32; 256],
    pub b: [u32; 256],
}

impl Histogram {
    /// The histograms of `frame`.
    pub fn of(frame: &Rgb) -> Histogram {
        let mut h = Histogram {
            r: [0; 256],
            g: [0; 256],
            b: [0; 256],
        };
        for px in frame.pixels.chunks_exact(3) {
            let (r, g, b) = (px[0], px[1], px[2]);
            if r > WHITE_ABOVE && g > WHITE_ABOVE && b > WHITE_ABOVE {
                continue;
            }
            h.r[usize::from(r)] += 1;
            h.g[usize::from(g)] += 1;
            h.b[usize::from(b)] += 1;
        }
        h
    }

    /// How many pixels were counted (the non-background ones).
    pub fn painted_pixels(&self) -> u64 {
        self.r.iter().map(|&n| u64::from(n)).sum()
    }

    fn channels(&self) -> [&[u32; 256]; 3] {
        [&self.r, &self.g, &self.b]
    }
}

/// How far `frame` has come from `start` to `end`, 0.0..=1.0 (WebPageTest's calculation): per
/// channel and bin, the mass that has to move (`|end − start|`) is matched greedily against the
/// mass that did move (`|frame − start|`) within ±5 bins of slop; the matched mass of the three
/// channels ÷ the mass that has to move. 1.0 when `start` and `end` are identical (nothing to
/// wait for). Unlike WebPageTest it is not floored to whole percent.
pub fn progress(frame: &Histogram, start: &Histogram, end: &Histogram) -> f64 {
    let mut to_move = 0u64;
    let mut matched = 0u64;
    for ((f, s), e) in frame
        .channels()
        .into_iter()
        .zip(start.channels())
        .zip(end.channels())
    {
        let mut moved: [u64; 256] = std::array::from_fn(|j| u64::from(f[j].abs_diff(s[j])));
        for i in 0..256 {
            let mut target = u64::from(e[i].abs_diff(s[i]));
            to_move += target;
            for slot in &mut moved[i.saturating_sub(SLOP_BINS)..=(i + SLOP_BINS).min(255)] {
                if target == 0 {
                    break;
                }
                let m = target.min(*slot);
                *slot -= m;
                target -= m;
                matched += m;
            }
        }
    }
    if to_move == 0 {
        1.0
    } else {
        matched as f64 / to_move as f64
    }
}

/// One frame of a load: ms after navigation start and its histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedHistogram {
    pub t_ms: f64,
    pub histogram: Histogram,
}

/// The visual metrics of one load (times in ms after navigation start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisualMetrics {
    /// (t_ms, progress 0..=100 %) at every frame whose progress changed, starting with the
    /// baseline at 0 (0 % unless the page never looked different from it).
    pub progress: Vec<(f64, f64)>,
    /// The first frame that differs from the baseline at all (WebPageTest's First Visual
    /// Change); `None` if none does.
    pub first_visual_change_ms: Option<f64>,
    /// ∫ (1 − progress) dt from 0 to visual complete.
    pub speed_index_ms: f64,
    /// The first frame whose progress is 100 % and stays 100 % to the end.
    pub visual_complete_ms: f64,
    /// How many frames the screencast delivered (all of them, any before the baseline too).
    pub frames: usize,
}

/// The visual metrics of one load from its frames in time order. The baseline is the blank page
/// before the navigation painted: the last frame at t ≤ 0, or the first frame if none is (held
/// from 0); frames before it are ignored. The last frame is the finished page. Progress is a step
/// function held from each frame to the next, as in WebPageTest. Errors if there are no frames,
/// a time is not finite, or times go backwards.
pub fn visual_metrics(frames: &[TimedHistogram]) -> Result<VisualMetrics> {
    ensure!(
        !frames.is_empty(),
        "no screencast frames: visual metrics need at least the blank frame before the page \
         painted and the finished one"
    );
    check_times(frames.iter().map(|f| f.t_ms), "screencast frame")?;
    let baseline = frames.iter().rposition(|f| f.t_ms <= 0.0).unwrap_or(0);
    let load = &frames[baseline..];
    let start = &load[0].histogram;
    let end = &load[load.len() - 1].histogram;

    // (t_ms, progress 0..=1) of every frame from the baseline on, the baseline at 0.
    let steps: Vec<(f64, f64)> = load
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let t = if k == 0 { 0.0 } else { f.t_ms };
            (t, progress(&f.histogram, start, end))
        })
        .collect();

    // The last frame is `end` itself, so its progress is exactly 1 and `complete` is in range.
    let complete = steps
        .iter()
        .rposition(|&(_, p)| p < COMPLETE)
        .map_or(0, |k| k + 1);
    let speed_index_ms = steps[..=complete]
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (1.0 - w[0].1))
        .sum();

    let mut timeline: Vec<(f64, f64)> = vec![(0.0, steps[0].1 * 100.0)];
    for &(t, p) in &steps[1..] {
        // Of two frames at one instant, the later one is what stayed on screen.
        if timeline.len() > 1 && timeline[timeline.len() - 1].0 == t {
            timeline.pop();
        }
        if timeline[timeline.len() - 1].1 != p * 100.0 {
            timeline.push((t, p * 100.0));
        }
    }

    let first_visual_change_ms = load[1..]
        .iter()
        .find(|f| f.histogram != *start)
        .map(|f| f.t_ms);

    Ok(VisualMetrics {
        progress: timeline,
        first_visual_change_ms,
        speed_index_ms,
        visual_complete_ms: steps[complete].0,
        frames: frames.len(),
    })
}

/// Errors unless every time is finite and none is before the one preceding it.
fn check_times(times: impl Iterator<Item = f64>, what: &str) -> Result<()> {
    let mut previous: Option<f64> = None;
    for (i, t) in times.enumerate() {
        ensure!(
            t.is_finite(),
            "{what} {i}: time {t} ms is not a finite number"
        );
        if let Some(p) = previous {
            ensure!(
                t >= p,
                "{what} {i}: time {t} ms is before the preceding frame's {p} ms; frames must be \
                 in time order"
            );
        }
        previous = Some(t);
    }
    Ok(())
}

/// For a filmstrip: the index of the frame on screen at each tick 0, interval, 2·interval … up
/// to and including `until_ms` — the last frame with t ≤ tick, the first frame (the baseline)
/// before any. Errors on no frames, unordered or non-finite times, an interval that is not a
/// positive number, or more than 100 000 ticks.
pub fn frames_at_ticks(times_ms: &[f64], interval_ms: f64, until_ms: f64) -> Result<Vec<usize>> {
    ensure!(!times_ms.is_empty(), "a filmstrip needs at least one frame");
    check_times(times_ms.iter().copied(), "filmstrip frame")?;
    ensure!(
        interval_ms.is_finite() && interval_ms > 0.0,
        "filmstrip interval {interval_ms} ms is not a positive number of ms"
    );
    ensure!(
        until_ms.is_finite(),
        "filmstrip end {until_ms} ms is not a finite number"
    );
    if until_ms < 0.0 {
        return Ok(Vec::new());
    }
    // A hair of tolerance so that e.g. 3 × 0.1 still counts as ≤ 0.3.
    let last_tick = (until_ms / interval_ms + 1e-9).floor();
    ensure!(
        last_tick < MAX_TICKS as f64,
        "a filmstrip every {interval_ms} ms up to {until_ms} ms has {} ticks, more than \
         {MAX_TICKS}: use a longer interval",
        last_tick + 1.0
    );
    Ok((0..=last_tick as usize)
        .map(|n| {
            let tick = n as f64 * interval_ms;
            times_ms.partition_point(|&t| t <= tick).saturating_sub(1)
        })
        .collect())
}

/// A thumbnail of `frame` fitting in `max_w`×`max_h` with its aspect ratio kept (each side
/// rounded, at least 1 pixel), by area averaging: every output pixel is the coverage-weighted mean
/// of the source pixels under it. Never enlarges: a frame that already fits is returned as is.
/// Errors on an empty frame or box.
pub fn thumbnail(frame: &Rgb, max_w: u32, max_h: u32) -> Result<Rgb> {
    ensure!(
        max_w > 0 && max_h > 0,
        "a thumbnail box of {max_w}×{max_h} has no pixels"
    );
    ensure!(
        frame.width > 0 && frame.height > 0,
        "cannot make a thumbnail of an empty {}×{} frame",
        frame.width,
        frame.height
    );
    ensure!(
        frame.pixels.len() == byte_len(frame.width, frame.height)?,
        "a {}×{} frame has {} bytes of pixels, not 3 per pixel",
        frame.width,
        frame.height,
        frame.pixels.len()
    );
    let scale = (f64::from(max_w) / f64::from(frame.width))
        .min(f64::from(max_h) / f64::from(frame.height))
        .min(1.0);
    if scale == 1.0 {
        return Ok(frame.clone());
    }
    let side = |src: u32, max: u32| ((f64::from(src) * scale).round() as u32).clamp(1, max);
    let (w, h) = (side(frame.width, max_w), side(frame.height, max_h));
    let xs = box_weights(frame.width, w);
    let ys = box_weights(frame.height, h);

    let mut pixels = Vec::with_capacity(byte_len(w, h)?);
    for y_taps in &ys {
        for x_taps in &xs {
            let mut sum = [0.0f64; 3];
            for &(sy, wy) in y_taps {
                for &(sx, wx) in x_taps {
                    let i = (sy * frame.width as usize + sx) * 3;
                    for (c, acc) in sum.iter_mut().enumerate() {
                        *acc += wy * wx * f64::from(frame.pixels[i + c]);
                    }
                }
            }
            pixels.extend(sum.map(|v| v.round().clamp(0.0, 255.0) as u8));
        }
    }
    Rgb::new(w, h, pixels)
}

/// For each of `dst` output pixels along one axis, the source pixels it covers and their share
/// of it (summing to 1).
fn box_weights(src: u32, dst: u32) -> Vec<Vec<(usize, f64)>> {
    let ratio = f64::from(src) / f64::from(dst);
    (0..dst)
        .map(|o| {
            let lo = f64::from(o) * ratio;
            let hi = (f64::from(o) + 1.0) * ratio;
            let first = lo.floor() as usize;
            let last = (hi.ceil() as usize).min(src as usize);
            (first..last)
                .filter_map(|s| {
                    let cover = hi.min(s as f64 + 1.0) - lo.max(s as f64);
                    (cover > 1e-12).then_some((s, cover / ratio))
                })
                .collect()
        })
        .collect()
}

/// Encodes `frame` as an 8-bit RGB PNG (for a filmstrip's thumbnails).
pub fn encode_png(frame: &Rgb) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, frame.width, frame.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().with_context(|| {
        format!(
            "writing the PNG header of a {}×{} frame",
            frame.width, frame.height
        )
    })?;
    writer
        .write_image_data(&frame.pixels)
        .with_context(|| format!("encoding a {}×{} frame as PNG", frame.width, frame.height))?;
    writer.finish().context("finishing a PNG")?;
    Ok(out)
}

/// What the screencast of a run showed (`--visual`): the visual progress and every frame, its
/// time and its image in `frames/<run id>/` of the results directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisualEvidence {
    /// How the frames were taken (records from before video: the screencast).
    #[serde(default = "VisualSource::before_video")]
    pub source: VisualSource,
    /// `None` when a frame could not be read (`error` says which).
    pub metrics: Option<VisualMetrics>,
    pub frames: Vec<FrameRef>,
    /// Why there are no visual metrics although frames came (an undecodable frame).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One stored frame: ms after navigation start, and its file in `frames/<run id>/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameRef {
    pub t_ms: f64,
    pub file: String,
}

/// The visual evidence of one load from its frames (`(t_ms, jpeg)`, in arrival order; t_ms
/// after navigation start). Frames are named `NNNN.jpg` in that order. Frames that arrive out
/// of order are sorted by time; an undecodable frame leaves the metrics out, with the reason.
pub fn evidence(source: VisualSource, frames: &[(f64, &[u8])]) -> Option<VisualEvidence> {
    if frames.is_empty() {
        return None;
    }
    let refs: Vec<FrameRef> = frames
        .iter()
        .enumerate()
        .map(|(i, (t_ms, _))| FrameRef {
            t_ms: *t_ms,
            file: format!("{i:04}.jpg"),
        })
        .collect();
    let mut order: Vec<usize> = (0..frames.len()).collect();
    order.sort_by(|&a, &b| frames[a].0.total_cmp(&frames[b].0));
    let timed: Result<Vec<TimedHistogram>> = order
        .iter()
        .map(|&i| {
            let (t_ms, jpeg) = frames[i];
            let frame = decode_jpeg(jpeg).with_context(|| format!("frame {}", refs[i].file))?;
            Ok(TimedHistogram {
                t_ms,
                histogram: Histogram::of(&frame),
            })
        })
        .collect();
    let (metrics, error) = match timed.and_then(|t| visual_metrics(&t)) {
        Ok(m) => (Some(m), None),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    Some(VisualEvidence {
        source,
        metrics,
        frames: refs,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHITE: [u8; 3] = [255, 255, 255];
    const BLUE: [u8; 3] = [0x33, 0x66, 0xcc];
    /// The fixtures' quadrant colours, in the order they appear (see make_fixtures.py).
    const COLOURS: [[u8; 3]; 4] = [
        [0x33, 0x66, 0xcc],
        [0xcc, 0x33, 0x33],
        [0x33, 0xaa, 0x55],
        [0xff, 0xcc, 0x00],
    ];
    const QUADRANTS: [(u32, u32); 4] = [(0, 0), (200, 0), (0, 150), (200, 150)];

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/tests/fixtures/visual/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// 400×300 white with the first `n` quadrants painted in `colours`.
    fn quadrants(n: usize, colours: [[u8; 3]; 4]) -> Rgb {
        let mut frame = Rgb::solid(400, 300, WHITE);
        for (&(x, y), &colour) in QUADRANTS.iter().zip(&colours).take(n) {
            frame.fill_rect(x, y, 200, 150, colour);
        }
        frame
    }

    /// The calibration load: quadrant k (1..=4) appears at k·500 ms, with unchanged duplicates
    /// in between, as (t_ms, quadrants painted).
    const CALIBRATION: [(f64, usize); 10] = [
        (0.0, 0),
        (250.0, 0),
        (500.0, 1),
        (700.0, 1),
        (1000.0, 2),
        (1500.0, 3),
        (1600.0, 3),
        (1800.0, 3),
        (2000.0, 4),
        (2600.0, 4),
    ];

    fn timed(t_ms: f64, frame: &Rgb) -> TimedHistogram {
        TimedHistogram {
            t_ms,
            histogram: Histogram::of(frame),
        }
    }

    fn assert_close(actual: f64, expected: f64, tolerance: f64, what: &str) {
        assert!(
            (actual - expected).abs() <= tolerance,
            "{what}: {actual} is not within {tolerance} of {expected}"
        );
    }

    #[test]
    fn calibration_quadrants_give_quarter_steps_and_speed_index_1250() {
        for colours in [COLOURS, [BLUE; 4]] {
            let frames: Vec<_> = CALIBRATION
                .iter()
                .map(|&(t, n)| timed(t, &quadrants(n, colours)))
                .collect();
            let m = visual_metrics(&frames).unwrap();
            let expected = [(0.0, 0.0), (500.0, 25.0), (1000.0, 50.0), (1500.0, 75.0)];
            assert_eq!(m.progress.len(), 5, "{:?}", m.progress);
            for (&(t, p), &(et, ep)) in m
                .progress
                .iter()
                .zip(expected.iter().chain(&[(2000.0, 100.0)]))
            {
                assert_eq!(t, et);
                assert_close(p, ep, 1e-9, "progress %");
            }
            assert_close(m.speed_index_ms, 1250.0, 0.5, "speed index");
            assert_eq!(m.visual_complete_ms, 2000.0);
            assert_eq!(m.first_visual_change_ms, Some(500.0));
            assert_eq!(m.frames, CALIBRATION.len());
        }
    }

    #[test]
    fn calibration_survives_jpeg_noise() {
        let decoded: Vec<Rgb> = ["blank", "step1", "step2", "step3", "step4"]
            .iter()
            .map(|name| decode_jpeg(&fixture(&format!("{name}.jpg"))).unwrap())
            .collect();
        // The fixtures are what they claim: quadrant centres near their colours, white elsewhere.
        for (n, frame) in decoded.iter().enumerate() {
            assert_eq!((frame.width, frame.height), (400, 300));
            for (k, &(x, y)) in QUADRANTS.iter().enumerate() {
                let expected = if k < n { COLOURS[k] } else { WHITE };
                let got = frame.pixel(x + 100, y + 75).unwrap();
                for c in 0..3 {
                    assert!(
                        got[c].abs_diff(expected[c]) <= 8,
                        "step{n} quadrant {k}: {got:?}"
                    );
                }
            }
        }
        let frames: Vec<_> = CALIBRATION
            .iter()
            .map(|&(t, n)| timed(t, &decoded[n]))
            .collect();
        let m = visual_metrics(&frames).unwrap();
        let times: Vec<f64> = m.progress.iter().map(|&(t, _)| t).collect();
        assert_eq!(times, [0.0, 500.0, 1000.0, 1500.0, 2000.0]);
        for (&(_, p), expected) in m.progress.iter().zip([0.0, 25.0, 50.0, 75.0, 100.0]) {
            assert_close(p, expected, 2.0, "progress % of a JPEG frame");
        }
        assert_close(
            m.speed_index_ms,
            1250.0,
            25.0,
            "speed index from JPEG frames",
        );
        assert_eq!(m.visual_complete_ms, 2000.0);
        assert_eq!(m.first_visual_change_ms, Some(500.0));
    }

    #[test]
    fn progress_runs_from_zero_at_start_to_one_at_end() {
        let start = Histogram::of(&quadrants(0, COLOURS));
        let end = Histogram::of(&quadrants(4, COLOURS));
        assert_eq!(progress(&start, &start, &end), 0.0);
        assert_eq!(progress(&end, &start, &end), 1.0);
        // From a non-blank start too (the end's exact match needs no slop).
        let half = Histogram::of(&quadrants(2, COLOURS));
        assert_eq!(progress(&half, &half, &end), 0.0);
        assert_eq!(progress(&end, &half, &end), 1.0);
    }

    #[test]
    fn progress_is_monotone_for_a_growing_block() {
        let start = Histogram::of(&Rgb::solid(100, 100, WHITE));
        let grown = |rows: u32| {
            let mut f = Rgb::solid(100, 100, WHITE);
            f.fill_rect(10, 10, 80, rows, BLUE);
            Histogram::of(&f)
        };
        let end = grown(80);
        let ps: Vec<f64> = (0..=80)
            .step_by(8)
            .map(|rows| progress(&grown(rows), &start, &end))
            .collect();
        assert_eq!(ps[0], 0.0);
        assert_eq!(ps[ps.len() - 1], 1.0);
        assert!(ps.windows(2).all(|w| w[1] > w[0]), "{ps:?}");
        assert_close(ps[5], 0.5, 1e-12, "half the rows");
    }

    #[test]
    fn identical_start_and_end_is_complete() {
        let blank = Histogram::of(&Rgb::solid(50, 50, [10, 20, 30]));
        let other = Histogram::of(&Rgb::solid(50, 50, BLUE));
        assert_eq!(progress(&blank, &blank, &blank), 1.0);
        assert_eq!(progress(&other, &blank, &blank), 1.0);
    }

    #[test]
    fn slop_matches_small_colour_shifts_only() {
        let start = Histogram::of(&Rgb::solid(40, 40, WHITE));
        let end = Histogram::of(&Rgb::solid(40, 40, [100, 100, 100]));
        let shifted = |d: u8| Histogram::of(&Rgb::solid(40, 40, [100 + d, 100 + d, 100 - d]));
        assert_eq!(progress(&shifted(3), &start, &end), 1.0);
        assert_eq!(
            progress(&shifted(5), &start, &end),
            1.0,
            "±5 bins is inside"
        );
        assert_eq!(
            progress(&shifted(6), &start, &end),
            0.0,
            "6 bins is outside"
        );
        assert_eq!(progress(&shifted(20), &start, &end), 0.0);
    }

    #[test]
    fn histograms_ignore_only_near_white() {
        assert_eq!(
            Histogram::of(&Rgb::solid(8, 8, [251, 251, 251])).painted_pixels(),
            0
        );
        let h = Histogram::of(&Rgb::solid(8, 8, [250, 255, 255]));
        assert_eq!(h.painted_pixels(), 64);
        assert_eq!((h.r[250], h.g[255], h.b[255]), (64, 64, 64));
        let mut f = Rgb::solid(4, 4, WHITE);
        f.fill_rect(1, 1, 2, 3, BLUE);
        let h = Histogram::of(&f);
        assert_eq!((h.r[0x33], h.g[0x66], h.b[0xcc]), (6, 6, 6));
        assert_eq!(h.painted_pixels(), 6);
    }

    #[test]
    fn visual_complete_waits_until_progress_stays_complete() {
        let frames = [
            timed(0.0, &quadrants(0, COLOURS)),
            timed(400.0, &quadrants(4, COLOURS)),
            // An overlay covers the finished page for a while: half of it white again.
            timed(1000.0, &quadrants(2, COLOURS)),
            timed(1600.0, &quadrants(4, COLOURS)),
        ];
        let m = visual_metrics(&frames).unwrap();
        assert_eq!(
            m.progress,
            [(0.0, 0.0), (400.0, 100.0), (1000.0, 50.0), (1600.0, 100.0)]
        );
        assert_eq!(m.visual_complete_ms, 1600.0);
        // 400 ms at 0 %, 600 ms at 100 %, 600 ms at 50 %.
        assert_close(m.speed_index_ms, 400.0 + 300.0, 1e-9, "speed index");
        assert_eq!(m.first_visual_change_ms, Some(400.0));
    }

    #[test]
    fn baseline_is_the_last_frame_at_or_before_navigation_start() {
        let frames = [
            timed(-300.0, &quadrants(4, COLOURS)), // the previous page
            timed(-10.0, &quadrants(0, COLOURS)),  // blank, navigation about to start
            timed(800.0, &quadrants(4, COLOURS)),
        ];
        let m = visual_metrics(&frames).unwrap();
        assert_eq!(m.progress, [(0.0, 0.0), (800.0, 100.0)]);
        assert_close(m.speed_index_ms, 800.0, 1e-9, "speed index");
        assert_eq!(m.frames, 3);

        // No frame before navigation start: the first one is the baseline, held from 0.
        let late = [
            timed(120.0, &quadrants(0, COLOURS)),
            timed(600.0, &quadrants(2, COLOURS)),
            timed(900.0, &quadrants(4, COLOURS)),
        ];
        let m = visual_metrics(&late).unwrap();
        assert_eq!(m.progress, [(0.0, 0.0), (600.0, 50.0), (900.0, 100.0)]);
        assert_close(m.speed_index_ms, 600.0 + 150.0, 1e-9, "speed index");
    }

    #[test]
    fn frames_at_one_instant_keep_the_later() {
        let frames = [
            timed(0.0, &quadrants(0, COLOURS)),
            timed(500.0, &quadrants(1, COLOURS)),
            timed(500.0, &quadrants(2, COLOURS)),
            timed(900.0, &quadrants(4, COLOURS)),
        ];
        let m = visual_metrics(&frames).unwrap();
        assert_eq!(m.progress, [(0.0, 0.0), (500.0, 50.0), (900.0, 100.0)]);
        assert_close(m.speed_index_ms, 500.0 + 200.0, 1e-9, "speed index");
    }

    #[test]
    fn a_page_that_never_changes_is_complete_at_once() {
        let blank = quadrants(0, COLOURS);
        let m = visual_metrics(&[timed(0.0, &blank), timed(700.0, &blank)]).unwrap();
        assert_eq!(m.progress, [(0.0, 100.0)]);
        assert_eq!(m.speed_index_ms, 0.0);
        assert_eq!(m.visual_complete_ms, 0.0);
        assert_eq!(m.first_visual_change_ms, None);

        let one = visual_metrics(&[timed(0.0, &blank)]).unwrap();
        assert_eq!(
            (one.speed_index_ms, one.visual_complete_ms, one.frames),
            (0.0, 0.0, 1)
        );
    }

    #[test]
    fn visual_metrics_rejects_bad_frame_lists() {
        let err = visual_metrics(&[]).unwrap_err().to_string();
        assert!(err.contains("no screencast frames"), "{err}");

        let h = Histogram::of(&quadrants(0, COLOURS));
        let at = |t| TimedHistogram {
            t_ms: t,
            histogram: h.clone(),
        };
        let err = visual_metrics(&[at(0.0), at(500.0), at(400.0)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("frame 2") && err.contains("400") && err.contains("500"),
            "{err}"
        );
        let err = visual_metrics(&[at(0.0), at(f64::NAN)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("frame 1") && err.contains("not a finite"),
            "{err}"
        );
    }

    #[test]
    fn ticks_pick_the_frame_on_screen() {
        let times = [0.0, 150.0, 300.0, 1000.0];
        // A tick exactly on a frame's time shows that frame.
        assert_eq!(
            frames_at_ticks(&times, 100.0, 500.0).unwrap(),
            [0, 0, 1, 2, 2, 2]
        );
        // Past the last frame: the last one stays on screen; `until` itself is a tick.
        assert_eq!(
            frames_at_ticks(&times, 500.0, 1500.0).unwrap(),
            [0, 2, 3, 3]
        );
        // Before the first frame: the baseline.
        assert_eq!(
            frames_at_ticks(&[40.0, 90.0], 30.0, 100.0).unwrap(),
            [0, 0, 0, 1]
        );
        // Float ticks: 3 × 0.1 is a tick of until = 0.3.
        assert_eq!(
            frames_at_ticks(&[0.0, 0.3], 0.1, 0.3).unwrap(),
            [0, 0, 0, 1]
        );
        assert_eq!(frames_at_ticks(&times, 100.0, 0.0).unwrap(), [0]);
        assert!(frames_at_ticks(&times, 100.0, -1.0).unwrap().is_empty());
    }

    #[test]
    fn ticks_reject_bad_input() {
        for (times, interval, until, needle) in [
            (&[][..], 100.0, 1000.0, "at least one frame"),
            (&[0.0, 50.0, 20.0][..], 100.0, 1000.0, "time order"),
            (&[0.0][..], 0.0, 1000.0, "positive"),
            (&[0.0][..], -5.0, 1000.0, "positive"),
            (&[0.0][..], f64::NAN, 1000.0, "positive"),
            (&[0.0][..], 100.0, f64::INFINITY, "finite"),
            (&[0.0][..], 0.001, 1e6, "more than"),
        ] {
            let err = frames_at_ticks(times, interval, until)
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn thumbnails_keep_the_aspect_ratio() {
        let wide = thumbnail(&Rgb::solid(400, 300, BLUE), 160, 160).unwrap();
        assert_eq!((wide.width, wide.height), (160, 120));
        assert!(wide.pixels.chunks_exact(3).all(|p| p == BLUE));
        let tall = thumbnail(&Rgb::solid(300, 400, BLUE), 160, 160).unwrap();
        assert_eq!((tall.width, tall.height), (120, 160));
        let strip = thumbnail(&Rgb::solid(1280, 720, BLUE), 200, 200).unwrap();
        assert_eq!((strip.width, strip.height), (200, 113));
        let sliver = thumbnail(&Rgb::solid(1000, 2, BLUE), 100, 100).unwrap();
        assert_eq!((sliver.width, sliver.height), (100, 1));
        // Never enlarged.
        let small = Rgb::solid(30, 20, BLUE);
        assert_eq!(thumbnail(&small, 160, 160).unwrap(), small);
    }

    #[test]
    fn thumbnails_average_areas() {
        let mut checker = Rgb::solid(2, 2, [0, 0, 0]);
        checker.fill_rect(1, 0, 1, 1, WHITE);
        checker.fill_rect(0, 1, 1, 1, WHITE);
        let grey = thumbnail(&checker, 1, 1).unwrap();
        assert_eq!((grey.width, grey.height), (1, 1));
        assert!(
            grey.pixels.iter().all(|&v| v == 127 || v == 128),
            "{grey:?}"
        );

        // Box boundaries stay sharp: left half black, right half white.
        let mut halves = Rgb::solid(8, 4, [0, 0, 0]);
        halves.fill_rect(4, 0, 4, 4, WHITE);
        let t = thumbnail(&halves, 2, 1).unwrap();
        assert_eq!(t.pixels, [0, 0, 0, 255, 255, 255]);

        // A fractional ratio weighs the shared pixel by its coverage: 3 → 2 pixels.
        let row = Rgb::new(3, 1, vec![0, 0, 0, 255, 255, 255, 0, 0, 0]).unwrap();
        let t = thumbnail(&row, 2, 2).unwrap();
        assert_eq!(t.pixels, [85, 85, 85, 85, 85, 85]);
    }

    #[test]
    fn thumbnails_reject_empty_boxes_and_frames() {
        let err = thumbnail(&Rgb::solid(10, 10, BLUE), 0, 10)
            .unwrap_err()
            .to_string();
        assert!(err.contains("0×10"), "{err}");
        let err = thumbnail(&Rgb::solid(0, 10, BLUE), 5, 5)
            .unwrap_err()
            .to_string();
        assert!(err.contains("empty"), "{err}");
        let broken = Rgb {
            width: 4,
            height: 4,
            pixels: vec![0; 5],
        };
        assert!(thumbnail(&broken, 2, 2).is_err());
    }

    #[test]
    fn decodes_grayscale_and_cmyk_jpegs_to_rgb() {
        let gray = decode_jpeg(&fixture("gray.jpg")).unwrap();
        assert_eq!((gray.width, gray.height), (24, 16));
        assert!(
            gray.pixels
                .chunks_exact(3)
                .all(|p| p[0] == p[1] && p[1] == p[2] && p[0].abs_diff(128) <= 2),
            "{:?}",
            &gray.pixels[..12]
        );
        let cmyk = decode_jpeg(&fixture("cmyk.jpg")).unwrap();
        assert_eq!((cmyk.width, cmyk.height), (24, 16));
        for p in cmyk.pixels.chunks_exact(3) {
            for (c, expected) in [204u8, 51, 51].into_iter().enumerate() {
                assert!(p[c].abs_diff(expected) <= 4, "{p:?}");
            }
        }
    }

    #[test]
    fn decodes_base64_like_cdp_sends_it() {
        let bytes = fixture("step2.jpg");
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        assert_eq!(
            decode_base64_jpeg(&b64).unwrap(),
            decode_jpeg(&bytes).unwrap()
        );
        let err = decode_base64_jpeg("not base64!").unwrap_err().to_string();
        assert!(err.contains("base64"), "{err}");
        let err = format!("{:#}", decode_base64_jpeg("aGVsbG8=").unwrap_err());
        assert!(err.contains("JPEG"), "{err}");
    }

    #[test]
    fn bad_jpegs_are_errors_not_panics() {
        assert!(decode_jpeg(&[]).is_err());
        assert!(decode_jpeg(b"GIF89a not a jpeg at all").is_err());
        // Cut anywhere short of the end marker: inside the headers, mid-scan.
        let frame = fixture("step3.jpg");
        for len in [2, 100, 600, frame.len() / 2, frame.len() - 100] {
            let err = decode_jpeg(&frame[..len]);
            assert!(err.is_err(), "step3.jpg cut to {len} bytes decoded");
        }
        let small = fixture("gray.jpg");
        for len in 0..small.len() - 2 {
            assert!(
                decode_jpeg(&small[..len]).is_err(),
                "gray.jpg cut to {len} bytes decoded"
            );
        }
        // A corrupt byte anywhere must not panic (some still decode: JPEG has no checksum).
        for i in 0..small.len() {
            for flip in [0x01, 0x5a, 0xff] {
                let mut bad = small.clone();
                bad[i] ^= flip;
                let _ = decode_jpeg(&bad);
            }
        }
    }

    #[test]
    fn png_round_trips_pixels() {
        let frame = quadrants(3, COLOURS);
        let png_bytes = encode_png(&thumbnail(&frame, 100, 100).unwrap()).unwrap();
        let decoder = png::Decoder::new(png_bytes.as_slice());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (100, 75));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(
            &buf[..info.buffer_size()],
            thumbnail(&frame, 100, 100).unwrap().pixels
        );
    }

    #[test]
    fn rgb_checks_its_length() {
        let err = Rgb::new(2, 2, vec![0; 11]).unwrap_err().to_string();
        assert!(err.contains("12 bytes") && err.contains("11"), "{err}");
        let f = Rgb::solid(3, 2, BLUE);
        assert_eq!(f.pixel(2, 1), Some(BLUE));
        assert_eq!(f.pixel(3, 0), None);
    }
}
