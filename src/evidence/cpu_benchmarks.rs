//! What a run's device achieved (pure): the fixed native benchmark timed free and on the
//! device side by side just before the run, and the fixed JavaScript benchmark timed in the
//! page after the load. The native pair gives the cap's achieved slowdown at once; the page's
//! time gives the engine's, against the desktop runs of the same engine (`slowdown_in_engine`).

use serde::{Deserialize, Serialize};

use crate::config::device::{Device, Slowing};
use crate::support::native_benchmark::NativeTiming;

/// A run's benchmarks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuBenchmarks {
    /// The device's target slowdown and how it was applied.
    pub target_slowdown: f64,
    pub slowing: Slowing,
    /// The native benchmark: free, on the device, their ratio and the device's longest stall
    /// (None when it could not run).
    pub native: Option<NativeCheck>,
    /// The page's JavaScript benchmark after the load, ms (None: the load did not complete,
    /// or the engine could not run it).
    pub js_ms: Option<f64>,
}

/// The native benchmark's pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NativeCheck {
    pub free_ms: f64,
    pub device_ms: f64,
    /// `device_ms ÷ free_ms`: a cap's achieved slowdown (DevTools throttling leaves native
    /// code alone: ≈ 1).
    pub achieved_slowdown: f64,
    /// The longest pause the device put in the busy benchmark, ms.
    pub longest_stall_ms: f64,
}

impl CpuBenchmarks {
    pub fn of(
        device: &Device,
        native: Option<(NativeTiming, NativeTiming)>,
        js_ms: Option<f64>,
    ) -> Self {
        CpuBenchmarks {
            target_slowdown: device.slowdown,
            slowing: device.slowing,
            native: native
                .filter(|(free, _)| free.ms > 0.0)
                .map(|(free, on)| NativeCheck {
                    free_ms: free.ms,
                    device_ms: on.ms,
                    achieved_slowdown: on.ms / free.ms,
                    longest_stall_ms: on.longest_stall_ms,
                }),
            js_ms,
        }
    }
}

/// The slowdown a device achieved in an engine: the median of its runs' page benchmarks ÷
/// the median of desktop's in the same engine (None without both).
pub fn slowdown_in_engine(device_js_ms: &[f64], desktop_js_ms: &[f64]) -> Option<f64> {
    let device = crate::support::stats::median(device_js_ms).ok()?;
    let desktop = crate::support::stats::median(desktop_js_ms).ok()?;
    (desktop > 0.0).then(|| device / desktop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_native_pair_gives_the_achieved_slowdown() {
        let t = |ms, stall| NativeTiming {
            ms,
            longest_stall_ms: stall,
        };
        let d = Device::named("phone-mid").unwrap();
        let b = CpuBenchmarks::of(&d, Some((t(100.0, 0.3), t(410.0, 15.0))), Some(420.0));
        let n = b.native.unwrap();
        assert!((n.achieved_slowdown - 4.1).abs() < 1e-9);
        assert_eq!((n.longest_stall_ms, b.target_slowdown), (15.0, 4.0));
        assert_eq!(
            CpuBenchmarks::of(&d, Some((t(0.0, 0.0), t(1.0, 0.0))), None).native,
            None
        );
    }

    #[test]
    fn the_engine_slowdown_is_a_ratio_of_medians() {
        assert_eq!(
            slowdown_in_engine(&[400.0, 420.0, 380.0], &[100.0, 90.0, 110.0]),
            Some(4.0)
        );
        assert_eq!(slowdown_in_engine(&[400.0], &[]), None);
    }
}
