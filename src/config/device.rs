//! Devices (pure): the CPU the whole browser gets — every one of its processes, the network
//! service and the GPU process included. A device is named by its target slowdown against this
//! machine's core (`desktop`: the machine as it is); the run records what it achieved
//! (`evidence::device`). Two ways to slow a browser down:
//!
//! - **a CPU cap** (`phone-*`, `cpu-<N>x`): the browser's cgroup gets one core
//!   (`cpuset`) and 1/N of it (`cpu.max` / `cpu.cfs_quota_us`) over a short period
//!   ([`QUOTA_PERIOD_US`]), the same for every engine;
//! - **DevTools' CPU throttling** (`devtools-<N>x`, `--cpu-throttle-devtools N`): what peers
//!   use — Chromium slows the page's main thread alone (not its network service, where QUIC
//!   runs); Firefox has no such switch.

use serde::{Deserialize, Serialize};

pub use crate::support::cpu_cap::CpuShare;

/// The device every run had before there was a choice: this machine, unthrottled.
pub const DESKTOP: &str = "desktop";

/// The CPU cap's quota period. The kernel's default, 100 ms, throttles in bursts (a browser
/// at 4× runs 25 ms and then stalls 75 ms — a pause the network sees); at 10 ms the longest
/// stall is the kernel's enforcement granularity (a tick and a 5 ms bandwidth slice, ~15 ms at
/// 4×) and the achieved slowdown is the target's (`pagebench devices --periods`; docs/devices.md).
pub const QUOTA_PERIOD_US: u64 = 10_000;

/// The kernel's smallest quota (1 ms): the largest slowdown a cap at [`QUOTA_PERIOD_US`] holds.
pub const MAX_SLOWDOWN: f64 = 10.0;

/// The built-in devices: name, target slowdown, how it is applied, what it stands for.
const BUILT_IN: [(&str, f64, &str); 4] = [
    (
        DESKTOP,
        1.0,
        "this machine as it is: every core at full speed",
    ),
    (
        "phone-high",
        2.0,
        "a recent high-end phone: half of one of this machine's cores for the whole browser",
    ),
    (
        "phone-mid",
        4.0,
        "a mid-tier phone: Lighthouse's mobile CPU slowdown (4×, its Moto G4-class default), \
         applied to the whole browser",
    ),
    (
        "phone-low",
        6.0,
        "a low-end phone: the 6× Lighthouse's calculator gives the fastest desktops for its \
         mobile target",
    ),
];

/// How a device slows the browser down.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Slowing {
    /// Unthrottled.
    None,
    /// One core, 1/slowdown of it, for every process of the browser.
    CpuCap,
    /// Chromium's DevTools CPU throttling at this rate (the page's main thread alone).
    DevTools,
}

/// A device: its name, target slowdown and what it stands for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub name: String,
    pub slowdown: f64,
    pub slowing: Slowing,
    pub stands_for: String,
}

impl Default for Device {
    fn default() -> Device {
        Device::desktop()
    }
}

impl Device {
    /// This machine as it is.
    pub fn desktop() -> Device {
        Device::built_in().remove(0)
    }

    /// Every built-in device, fastest first.
    pub fn built_in() -> Vec<Device> {
        BUILT_IN
            .iter()
            .map(|(name, slowdown, stands_for)| Device {
                name: name.to_string(),
                slowdown: *slowdown,
                slowing: if *slowdown > 1.0 {
                    Slowing::CpuCap
                } else {
                    Slowing::None
                },
                stands_for: stands_for.to_string(),
            })
            .collect()
    }

    /// The device `name`: a built-in one, `cpu-<N>x` (a cap at slowdown N) or `devtools-<N>x`
    /// (DevTools throttling at rate N); the error names every choice and the limits.
    pub fn named(name: &str) -> anyhow::Result<Device> {
        let name = name.trim();
        if let Some(d) = Device::built_in().into_iter().find(|d| d.name == name) {
            return Ok(d);
        }
        let custom = |prefix: &str| {
            name.strip_prefix(prefix)
                .and_then(|n| n.strip_suffix('x'))
                .map(|n| n.parse::<f64>().map_err(|_| n.to_string()))
        };
        let (slowdown, slowing) = match (custom("cpu-"), custom("devtools-")) {
            (Some(n), _) => (n, Slowing::CpuCap),
            (_, Some(n)) => (n, Slowing::DevTools),
            _ => anyhow::bail!(
                "unknown device {name:?}: {}, cpu-<N>x (the whole browser capped at 1/N of a \
                 core, e.g. cpu-3x) or devtools-<N>x (Chromium's DevTools CPU throttling)",
                Device::built_in()
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let slowdown = slowdown
            .map_err(|n| anyhow::anyhow!("device {name:?}: {n:?} is not a number (e.g. cpu-3x)"))?;
        Device::custom(name, slowdown, slowing)
    }

    fn custom(name: &str, slowdown: f64, slowing: Slowing) -> anyhow::Result<Device> {
        anyhow::ensure!(
            slowdown.is_finite() && slowdown >= 1.0,
            "device {name:?}: a slowdown of {slowdown} is below 1 — a device cannot be faster \
             than this machine's core; give 1 or more (e.g. cpu-2x)"
        );
        anyhow::ensure!(
            slowing == Slowing::DevTools || slowdown <= MAX_SLOWDOWN,
            "device {name:?}: a cap above {MAX_SLOWDOWN}× would need a quota below the \
             kernel's 1 ms at a {} ms period; give {MAX_SLOWDOWN} or less",
            QUOTA_PERIOD_US / 1000
        );
        let stands_for = match slowing {
            Slowing::DevTools => format!(
                "Chromium's DevTools CPU throttling at {slowdown}× (the page's main thread alone)"
            ),
            _ => format!("the whole browser capped at 1/{slowdown} of one core"),
        };
        Ok(Device {
            name: name.to_string(),
            slowdown,
            slowing: if slowdown > 1.0 || slowing == Slowing::DevTools {
                slowing
            } else {
                Slowing::None
            },
            stands_for,
        })
    }

    /// DevTools throttling at `rate` (`--cpu-throttle-devtools`).
    pub fn devtools(rate: f64) -> anyhow::Result<Device> {
        anyhow::ensure!(
            rate.is_finite() && rate >= 1.0,
            "--cpu-throttle-devtools {rate}: a rate below 1 would speed the page up; give 1 or \
             more (Lighthouse's mobile default is 4)"
        );
        Device::custom(
            &format!("devtools-{}x", trim_number(rate)),
            rate,
            Slowing::DevTools,
        )
    }

    /// The cgroup CPU cap this device runs under (None: uncapped).
    pub fn cap(&self) -> Option<CpuShare> {
        (self.slowing == Slowing::CpuCap).then(|| CpuShare {
            period_us: QUOTA_PERIOD_US,
            quota_us: (QUOTA_PERIOD_US as f64 / self.slowdown).round() as u64,
        })
    }

    /// The share of one core the whole browser may use (1: a core or more, uncapped).
    pub fn cpu_share(&self) -> f64 {
        self.cap().map_or(1.0, |c| c.cores())
    }

    /// The DevTools CPU throttling rate (None: none).
    pub fn devtools_rate(&self) -> Option<f64> {
        (self.slowing == Slowing::DevTools).then_some(self.slowdown)
    }

    pub fn id(&self) -> DeviceId {
        DeviceId(self.name.clone())
    }
}

/// `4` → "4", `2.5` → "2.5".
fn trim_number(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A device by its name, as plans, records and series carry it (`desktop` where a record
/// predates devices).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DeviceId(String);

impl DeviceId {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is `desktop` (ids and labels leave it out, so older names hold).
    pub fn is_desktop(&self) -> bool {
        self.0 == DESKTOP
    }

    /// The device it names (a record's name always parses: it was parsed to plan it).
    pub fn device(&self) -> anyhow::Result<Device> {
        Device::named(&self.0)
    }
}

impl Default for DeviceId {
    fn default() -> DeviceId {
        DeviceId(DESKTOP.to_string())
    }
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for DeviceId {
    fn from(name: &str) -> DeviceId {
        DeviceId(name.to_string())
    }
}

/// Whether `devices` compares devices (anything but desktop alone): runs then time the CPU
/// benchmarks.
pub fn compared(devices: &[Device]) -> bool {
    devices.iter().any(|d| d.slowing != Slowing::None) || devices.len() > 1
}

/// `--devices desktop,phone-mid` plus `--cpu-throttle-devtools N` → the devices, each once, in
/// the order given (the DevTools one last); errors name the flag.
pub fn parse_devices(list: &str, devtools_rate: Option<f64>) -> anyhow::Result<Vec<Device>> {
    let mut out: Vec<Device> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let d = Device::named(name).map_err(|e| anyhow::anyhow!("--devices: {e}"))?;
        anyhow::ensure!(
            !out.iter().any(|o| o.name == d.name),
            "--devices: {name} is listed twice"
        );
        out.push(d);
    }
    if let Some(rate) = devtools_rate {
        let d = Device::devtools(rate)?;
        if !out.iter().any(|o| o.name == d.name) {
            out.push(d);
        }
    }
    anyhow::ensure!(
        !out.is_empty(),
        "--devices: give at least one device (e.g. desktop,phone-mid)"
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_and_custom_devices_are_named_with_their_slowdown() {
        let d = Device::named("phone-mid").unwrap();
        assert_eq!((d.slowdown, d.slowing), (4.0, Slowing::CpuCap));
        assert_eq!(
            d.cap(),
            Some(CpuShare {
                period_us: 10_000,
                quota_us: 2_500
            })
        );
        assert_eq!(Device::named("desktop").unwrap().cap(), None);
        let c = Device::named("cpu-2.5x").unwrap();
        assert_eq!(c.cap().unwrap().quota_us, 4_000);
        let t = Device::named("devtools-4x").unwrap();
        assert_eq!((t.cap(), t.devtools_rate()), (None, Some(4.0)));
        assert_eq!(Device::devtools(4.0).unwrap(), t);
        assert_eq!(Device::named("cpu-1x").unwrap().slowing, Slowing::None);
    }

    #[test]
    fn bad_devices_get_one_error_naming_the_fix() {
        let err = |s: &str| parse_devices(s, None).unwrap_err().to_string();
        assert!(err("tablet").contains("unknown device \"tablet\": desktop, phone-high"));
        assert!(err("cpu-0.5x").contains("below 1"), "{}", err("cpu-0.5x"));
        assert!(err("cpu-fastx").contains("not a number"));
        assert!(err("cpu-20x").contains("10 or less"));
        assert!(err("desktop,desktop").contains("listed twice"));
        assert!(err("").contains("at least one"));
        let e = parse_devices("desktop", Some(0.5)).unwrap_err().to_string();
        assert!(e.starts_with("--cpu-throttle-devtools 0.5"), "{e}");
    }

    #[test]
    fn the_devtools_flag_adds_its_device_once() {
        let names = |l: &str, r| {
            parse_devices(l, r)
                .unwrap()
                .into_iter()
                .map(|d| d.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("desktop,phone-mid", Some(4.0)),
            ["desktop", "phone-mid", "devtools-4x"]
        );
        assert_eq!(names("devtools-4x", Some(4.0)), ["devtools-4x"]);
        assert_eq!(names("desktop", Some(2.5)), ["desktop", "devtools-2.5x"]);
    }
}
