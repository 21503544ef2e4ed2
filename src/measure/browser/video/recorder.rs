//! Recording a virtual display during one load: a thread reads the screen file
//! [`FRAMES_PER_SECOND`] times a second and keeps every frame that differs from the one before
//! (at half size, with its Unix time); after the load it goes on until the screen has been
//! still for a while, then the frames are encoded as JPEG — the same evidence Chromium's
//! screencast gives, so one visual analysis serves every engine.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, Context, Result};

use super::display::VirtualDisplay;
use super::xwd::Layout;
use crate::evidence::metrics::ScreencastFrame;
use crate::evidence::visual::Rgb;

/// How often the screen is read: browsertime's default frame rate. A paint is seen at most one
/// interval late (on average half of it).
pub const FRAMES_PER_SECOND: u32 = 30;
/// JPEG quality of the kept frames (the screencast's).
const QUALITY: u8 = 70;

/// A frame as recorded: Unix time (seconds) and the half-size image.
struct Shot {
    unix_s: f64,
    image: Rgb,
}

/// A recording in progress.
pub struct Recorder {
    stop: Arc<AtomicBool>,
    /// When the screen last changed, ms after `started`.
    changed_ms: Arc<AtomicU64>,
    started: Instant,
    /// Taken by `finish`; a recording dropped unfinished (a failed load) stops in `drop`.
    thread: Option<JoinHandle<Result<Vec<Shot>>>>,
}

impl Recorder {
    /// Starts reading `display`'s screen. The first frame is read before this returns, so the
    /// recording's baseline is what the screen showed before the navigation.
    pub fn start(display: &VirtualDisplay) -> Result<Recorder> {
        let screen = Screen::open(&display.screen_file())?;
        let mut first = vec![0u8; screen.layout.pixel_bytes()];
        let unix_s = screen.read(&mut first)?;
        let shots = vec![Shot {
            unix_s,
            image: screen.layout.half_size(&first)?,
        }];
        let stop = Arc::new(AtomicBool::new(false));
        let changed_ms = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let (s, c) = (stop.clone(), changed_ms.clone());
        let thread = std::thread::Builder::new()
            .name("video".into())
            .spawn(move || record(&screen, first, shots, &s, &c, started))
            .context("starting the video recorder")?;
        Ok(Recorder {
            stop,
            changed_ms,
            started,
            thread: Some(thread),
        })
    }

    /// After the load: records on until the screen has not changed for `quiet` (at most `max`
    /// more), then stops and returns the frames as JPEG.
    pub fn finish(mut self, quiet: Duration, max: Duration) -> Result<Vec<ScreencastFrame>> {
        let thread = self.thread.take().expect("a recording is finished once");
        let end = Instant::now() + max;
        loop {
            let changed_ms = self.changed_ms.load(Ordering::Relaxed);
            let changed = self.started + Duration::from_millis(changed_ms);
            let now = Instant::now();
            if now >= end || now.duration_since(changed) >= quiet || thread.is_finished() {
                break;
            }
            std::thread::sleep((changed + quiet).min(end).saturating_duration_since(now));
        }
        self.stop.store(true, Ordering::Relaxed);
        let shots = thread
            .join()
            .map_err(|_| anyhow!("the video recorder panicked"))??;
        shots
            .into_iter()
            .map(|s| {
                Ok(ScreencastFrame {
                    timestamp: s.unix_s,
                    jpeg: encode_jpeg(&s.image)?,
                })
            })
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Xvfb's screen file, its layout read once.
struct Screen {
    file: File,
    layout: Layout,
}

impl Screen {
    fn open(path: &std::path::Path) -> Result<Screen> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut header = vec![0u8; 4096];
        let n = file
            .read_at(&mut header, 0)
            .context("reading the screen file's header")?;
        let layout = Layout::parse(&header[..n])?;
        Ok(Screen { file, layout })
    }

    /// The pixels now into `buf` (`layout.pixel_bytes()` long); the Unix time of the read.
    fn read(&self, buf: &mut [u8]) -> Result<f64> {
        let unix_s = unix_now();
        self.file
            .read_exact_at(buf, self.layout.pixels_at as u64)
            .context("reading the screen")?;
        Ok(unix_s)
    }
}

/// The recorder's loop: a frame every tick, kept when it differs from the last kept one
/// (`previous`, the last of `shots`).
fn record(
    screen: &Screen,
    mut previous: Vec<u8>,
    mut shots: Vec<Shot>,
    stop: &AtomicBool,
    changed_ms: &AtomicU64,
    started: Instant,
) -> Result<Vec<Shot>> {
    let interval = Duration::from_secs(1) / FRAMES_PER_SECOND;
    let mut current = vec![0u8; previous.len()];
    let mut tick = Instant::now() + interval;
    loop {
        let now = Instant::now();
        if tick < now {
            // Behind (a busy machine): the next read is now, not a burst of catch-up reads.
            tick = now;
        }
        std::thread::sleep(tick - now);
        tick += interval;
        if stop.load(Ordering::Relaxed) {
            return Ok(shots);
        }
        let unix_s = screen.read(&mut current)?;
        if current != previous {
            shots.push(Shot {
                unix_s,
                image: screen.layout.half_size(&current)?,
            });
            changed_ms.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            std::mem::swap(&mut current, &mut previous);
        }
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One frame as a JPEG, as the store keeps screencast frames.
pub fn encode_jpeg(frame: &Rgb) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let (w, h) = (
        u16::try_from(frame.width).context("frame too wide for JPEG")?,
        u16::try_from(frame.height).context("frame too tall for JPEG")?,
    );
    jpeg_encoder::Encoder::new(&mut out, QUALITY)
        .encode(&frame.pixels, w, h, jpeg_encoder::ColorType::Rgb)
        .with_context(|| format!("encoding a {w}×{h} frame as JPEG"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jpeg_frame_decodes_to_its_colours() {
        let mut frame = Rgb::solid(64, 32, [255, 255, 255]);
        frame.fill_rect(0, 0, 32, 32, [0x33, 0x66, 0xcc]);
        let back = crate::evidence::visual::decode_jpeg(&encode_jpeg(&frame).unwrap()).unwrap();
        assert_eq!((back.width, back.height), (64, 32));
        let [r, g, b] = back.pixel(8, 8).unwrap();
        assert!(r.abs_diff(0x33) < 8 && g.abs_diff(0x66) < 8 && b.abs_diff(0xcc) < 8);
        assert!(back.pixel(56, 8).unwrap().iter().all(|&c| c > 245));
    }

    #[test]
    fn a_still_screen_is_one_frame_and_a_change_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Xvfb_screen0");
        std::fs::write(&path, super::super::xwd::tests::xvfb_file(8, 8, [255; 3])).unwrap();
        let screen = Screen::open(&path).unwrap();
        let mut first = vec![0u8; screen.layout.pixel_bytes()];
        screen.read(&mut first).unwrap();
        let (stop, changed) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (s, c) = (stop.clone(), changed.clone());
        let started = Instant::now();
        let t = std::thread::spawn(move || record(&screen, first, Vec::new(), &s, &c, started));
        std::thread::sleep(Duration::from_millis(200));
        // In place, as Xvfb paints: the reader never sees a shorter file.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .write_all_at(&super::super::xwd::tests::xvfb_file(8, 8, [0, 0, 0]), 0)
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        let shots = t.join().unwrap().unwrap();
        // The still white screen was the first frame (not kept again); the black one is new.
        assert_eq!(shots.len(), 1);
        assert_eq!(shots[0].image.pixel(0, 0), Some([0; 3]));
        assert!(changed.load(Ordering::Relaxed) >= 150);
    }
}
