//! Visual evidence from video, the same for every engine (`--visual`, the default method): the
//! browser runs with a real window on a virtual display ([`display`]), and the screen is
//! recorded during the load ([`recorder`], reading Xvfb's screen file: [`xwd`]). The frames are
//! what Chromium's screencast would give — Unix-timed JPEGs — so `evidence::visual` analyses both.

pub mod display;
pub mod recorder;
pub mod xwd;

pub use display::VirtualDisplay;
pub use recorder::Recorder;

use crate::evidence::metrics::Observation;
use crate::evidence::visual::{TAIL_MAX, TAIL_QUIET};

/// The page a recording starts from: white, as the page's own background before it paints.
pub const WHITE_PAGE: &str = "data:text/html,<html style='background:%23fff'></html>";

/// How long the screen may take to show that page once the browser navigated to it.
pub const WHITE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts recording `display` (None: the run records no video). Engines call it right before
/// the navigation, as Chromium starts its screencast.
pub fn start(display: Option<&VirtualDisplay>) -> Option<anyhow::Result<Recorder>> {
    display.map(Recorder::start)
}

/// Ends a recording into `obs` (its frames, or why there are none). After a load that
/// completed (`tail`) the screen is recorded on until it is still — the engine reads the
/// page's entries after that, as after a screencast; after a failed load it stops at once.
pub fn finish_into(recording: Option<anyhow::Result<Recorder>>, obs: &mut Observation, tail: bool) {
    let (quiet, max) = if tail {
        (TAIL_QUIET, TAIL_MAX)
    } else {
        (std::time::Duration::ZERO, std::time::Duration::ZERO)
    };
    match recording.map(|r| r.and_then(|r| r.finish(quiet, max))) {
        Some(Ok(frames)) => obs.frames = frames,
        Some(Err(e)) => obs.frames_error = Some(format!("the video recording failed: {e:#}")),
        None => {}
    }
}
