//! `pagebench devices`: each device with the slowdown its CPU cap achieves on this machine
//! (the native benchmark free and capped, side by side, medians of several pairs), and the
//! quota period's effect (`--periods`): at each period, the achieved slowdown and the longest
//! stall the cap puts in a busy thread — a slower CPU has no stall, a long period long ones.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::config::device::{CpuShare, Device, Slowing};
use crate::support::native_benchmark::{self, NativeTiming};

/// One device as measured here.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceRow {
    pub device: Device,
    /// The native benchmark's achieved slowdown (None: not a cap, nothing to measure natively).
    pub achieved: Option<f64>,
    /// The median longest stall of the capped benchmark, ms.
    pub longest_stall_ms: Option<f64>,
}

/// One (slowdown, period) cell of the period study.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeriodRow {
    pub slowdown: f64,
    pub period_ms: f64,
    pub achieved: f64,
    pub longest_stall_ms: f64,
}

/// `pairs` (free, capped) timings at `share`, interleaved.
fn pairs(share: CpuShare, n: usize) -> Result<Vec<(NativeTiming, NativeTiming)>> {
    (0..n)
        .map(|_| {
            Ok((
                native_benchmark::time(None)?,
                native_benchmark::time(Some(share))?,
            ))
        })
        .collect()
}

fn median_stall(pairs: &[(NativeTiming, NativeTiming)]) -> Option<f64> {
    let stalls: Vec<f64> = pairs.iter().map(|(_, c)| c.longest_stall_ms).collect();
    crate::support::stats::median(&stalls).ok()
}

/// Every device of `devices`, its cap measured with `n` pairs.
pub fn measure(devices: &[Device], n: usize) -> Result<Vec<DeviceRow>> {
    devices
        .iter()
        .map(|d| {
            let Some(share) = d.cap() else {
                return Ok(DeviceRow {
                    device: d.clone(),
                    achieved: (d.slowing == Slowing::None).then_some(1.0),
                    longest_stall_ms: None,
                });
            };
            let p = pairs(share, n)?;
            Ok(DeviceRow {
                device: d.clone(),
                achieved: native_benchmark::achieved_slowdown(&p),
                longest_stall_ms: median_stall(&p),
            })
        })
        .collect()
}

/// The period study: each slowdown at each period (ms), `n` pairs per cell. A quota below the
/// kernel's 1 ms is skipped.
pub fn periods(slowdowns: &[f64], periods_ms: &[f64], n: usize) -> Result<Vec<PeriodRow>> {
    let mut out = Vec::new();
    for &slowdown in slowdowns {
        for &period_ms in periods_ms {
            let period_us = (period_ms * 1000.0).round() as u64;
            let quota_us = (period_us as f64 / slowdown).round() as u64;
            if quota_us < 1000 {
                continue;
            }
            let p = pairs(
                CpuShare {
                    period_us,
                    quota_us,
                },
                n,
            )?;
            out.push(PeriodRow {
                slowdown,
                period_ms,
                achieved: native_benchmark::achieved_slowdown(&p).unwrap_or(f64::NAN),
                longest_stall_ms: median_stall(&p).unwrap_or(f64::NAN),
            });
        }
    }
    Ok(out)
}

/// The devices as a table (pure).
pub fn table(rows: &[DeviceRow]) -> String {
    let mut out = format!(
        "{:<14} {:>7} {:>9} {:>10}  {:<9} {}\n",
        "device", "target", "achieved", "stall", "how", "stands for"
    );
    for r in rows {
        let d = &r.device;
        let how = match d.slowing {
            Slowing::None => "none",
            Slowing::CpuCap => "cgroup",
            Slowing::DevTools => "devtools",
        };
        let achieved = match (d.slowing, r.achieved) {
            (Slowing::DevTools, _) => "in page".to_string(),
            (_, Some(a)) => format!("{a:.2}×"),
            (_, None) => "—".to_string(),
        };
        let stall = r
            .longest_stall_ms
            .map_or("—".to_string(), |s| format!("{s:.1} ms"));
        out.push_str(&format!(
            "{:<14} {:>6}× {:>9} {:>10}  {:<9} {}\n",
            d.name,
            format!("{:.1}", d.slowdown),
            achieved,
            stall,
            how,
            d.stands_for
        ));
    }
    out
}

/// The period study as a table (pure).
pub fn period_table(rows: &[PeriodRow]) -> String {
    let mut out = format!(
        "{:>7} {:>10} {:>9} {:>15}\n",
        "target", "period", "achieved", "longest stall"
    );
    for r in rows {
        out.push_str(&format!(
            "{:>6.1}× {:>7.0} ms {:>8.2}× {:>12.1} ms\n",
            r.slowdown, r.period_ms, r.achieved, r.longest_stall_ms
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_device_with_its_target_and_achieved_slowdown() {
        let rows = vec![
            DeviceRow {
                device: Device::desktop(),
                achieved: Some(1.0),
                longest_stall_ms: None,
            },
            DeviceRow {
                device: Device::named("phone-mid").unwrap(),
                achieved: Some(4.05),
                longest_stall_ms: Some(15.2),
            },
            DeviceRow {
                device: Device::named("devtools-4x").unwrap(),
                achieved: None,
                longest_stall_ms: None,
            },
        ];
        let t = table(&rows);
        assert!(
            t.contains("phone-mid         4.0×     4.05×    15.2 ms  cgroup"),
            "{t}"
        );
        assert!(t.contains("devtools-4x       4.0×   in page"), "{t}");
        let p = period_table(&[PeriodRow {
            slowdown: 4.0,
            period_ms: 100.0,
            achieved: 3.9,
            longest_stall_ms: 75.1,
        }]);
        assert!(
            p.contains("4.0×     100 ms     3.90×         75.1 ms"),
            "{p}"
        );
    }
}
