//! Facts about the machine a run happened on: versions for the metadata, and load average and
//! CPU steal sampled around each run (steal hiccups of ~100 ms happen on these VMs).

use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::support::procfs::{self, CpuTicks};

/// What the machine did during an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineSample {
    /// 1-minute load average at the end of the interval.
    pub load1: f64,
    /// CPU time stolen by the hypervisor, in ms summed over all CPUs.
    pub steal_ms: f64,
    /// Stolen share of all CPU time in the interval, in percent.
    pub steal_pct: f64,
    /// Busy share of all CPU time in the interval (all processes), in percent.
    pub busy_pct: f64,
}

/// The machine's CPU times now (all zero if `/proc/stat` cannot be read: the sample then
/// shows no steal rather than failing the run).
pub fn cpu_times() -> CpuTicks {
    procfs::cpu_ticks().unwrap_or_default()
}

/// Compares two `/proc/stat` readings.
pub fn sample_between(a: &CpuTicks, b: &CpuTicks) -> MachineSample {
    let hz = procfs::clock_ticks_per_second();
    let total = b.total().saturating_sub(a.total()).max(1) as f64;
    let steal = b.steal.saturating_sub(a.steal) as f64;
    MachineSample {
        load1: load1(),
        steal_ms: steal / hz * 1000.0,
        steal_pct: steal / total * 100.0,
        busy_pct: b.busy().saturating_sub(a.busy()) as f64 / total * 100.0,
    }
}

/// The 1-minute load average (NaN if unknown).
pub fn load1() -> f64 {
    procfs::load_average_1min().unwrap_or(f64::NAN)
}

/// Static facts recorded in a results directory's metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub memory_gib: f64,
    /// Each installed engine's version as it reported it, by the engine's name
    /// (`"chromium": "Chromium 156.0.…"`, `"firefox": "153.8.0esr"`): on disk, beside the other
    /// facts, as these files always had them.
    #[serde(flatten)]
    pub browsers: std::collections::BTreeMap<String, String>,
}

impl MachineInfo {
    /// This machine's facts, with the engines' versions the caller read (the browser
    /// registry's `installed_versions`).
    pub fn collect(browsers: std::collections::BTreeMap<String, String>) -> MachineInfo {
        // Descriptive metadata: an unreadable fact is left empty rather than failing the run.
        let mem_kb = procfs::memory_total_kib().unwrap_or(0) as f64;
        MachineInfo {
            hostname: procfs::hostname().unwrap_or_default(),
            kernel: procfs::kernel_release().unwrap_or_default(),
            cpu_model: procfs::cpu_model().unwrap_or_default(),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_gib: (mem_kb / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            browsers,
        }
    }
}

/// The git revision of the source tree the binary runs from, if it is a checkout.
pub fn git_revision() -> String {
    // A binary built away from its checkout (deploy/Containerfile) is told it at build time.
    if let Some(r) =
        option_env!("PAGEBENCH_GIT_REVISION").filter(|r| !r.is_empty() && *r != "unknown")
    {
        return r.to_string();
    }
    let dir = env!("CARGO_MANIFEST_DIR");
    let rev = Command::new("git")
        .args(["-C", dir, "rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let dirty = Command::new("git")
        .args(["-C", dir, "status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    match rev {
        Some(r) if dirty => format!("{r}-dirty"),
        Some(r) => r,
        None => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_an_interval() {
        let a = procfs::parse_stat_cpu("cpu  100 5 50 1000 10 1 2 30 0 0").unwrap();
        let b = CpuTicks {
            user: 200,
            idle: 1100,
            steal: 130,
            ..a
        };
        // 100 busy, 100 idle, 100 stolen ticks.
        let s = sample_between(&a, &b);
        assert!((s.steal_pct - 100.0 / 300.0 * 100.0).abs() < 1e-9);
        assert!((s.busy_pct - 100.0 / 300.0 * 100.0).abs() < 1e-9);
        let hz = procfs::clock_ticks_per_second();
        assert!((s.steal_ms - 100.0 / hz * 1000.0).abs() < 1e-9);
    }
}
