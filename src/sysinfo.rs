//! Facts about the machine a run happened on: versions for the metadata, and load average and
//! CPU steal sampled around each run (steal hiccups of ~100 ms happen on these VMs).

use std::process::Command;

use serde::{Deserialize, Serialize};

/// Aggregate CPU times from the first line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub busy: u64,
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    pub fn read() -> CpuTimes {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| s.lines().next().map(parse_cpu_line))
            .unwrap_or_default()
    }

    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }
}

/// Parses `cpu  user nice system idle iowait irq softirq steal …`.
pub fn parse_cpu_line(line: &str) -> CpuTimes {
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    CpuTimes {
        busy: get(0) + get(1) + get(2) + get(5) + get(6),
        idle: get(3) + get(4),
        steal: get(7),
    }
}

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

/// Compares two `/proc/stat` readings.
pub fn sample_between(a: &CpuTimes, b: &CpuTimes) -> MachineSample {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let total = b.total().saturating_sub(a.total()).max(1) as f64;
    let steal = b.steal.saturating_sub(a.steal) as f64;
    MachineSample {
        load1: load1(),
        steal_ms: steal / hz * 1000.0,
        steal_pct: steal / total * 100.0,
        busy_pct: b.busy.saturating_sub(a.busy) as f64 / total * 100.0,
    }
}

pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// Static facts recorded in a results directory's metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub memory_gib: f64,
    pub chromium: String,
}

impl MachineInfo {
    pub fn collect() -> MachineInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let mem_kb: f64 = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
            })
            .unwrap_or(0.0);
        MachineInfo {
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap_or_default()
                .trim()
                .to_string(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            cpu_model,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_gib: (mem_kb / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            chromium: chromium_version(),
        }
    }
}

/// `Chromium 156.0.8078.108 …` → the version string, or "not installed".
pub fn chromium_version() -> String {
    Command::new(crate::browser::CHROMIUM)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "not installed".into())
}

/// The git revision of the source tree the binary runs from, if it is a checkout.
pub fn git_revision() -> String {
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
    fn parses_proc_stat() {
        let c = parse_cpu_line("cpu  100 5 50 1000 10 1 2 30 0 0");
        assert_eq!(
            c,
            CpuTimes {
                busy: 158,
                idle: 1010,
                steal: 30
            }
        );
        let b = CpuTimes {
            busy: 258,
            idle: 1110,
            steal: 130,
        };
        let s = sample_between(&c, &b);
        assert!((s.steal_pct - 100.0 / 300.0 * 100.0).abs() < 1e-9);
    }
}
