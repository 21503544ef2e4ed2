//! Is the machine quiet? A short check before a matrix (and each resume of one): for a few
//! seconds while pagebench itself is idle, what share of the machine's CPU time other
//! processes use, what share the hypervisor steals, and how late a thread that sleeps 1 ms at
//! a time wakes up (timer stalls: what a starved emulator, browser and server meet). A machine
//! that is not quiet is said — a warning with the figures, and the figures in `meta.json` and
//! the report — never hidden.
//!
//! [`MachineCheck::judge`] is pure; [`check`] is the IO shell (it reads `/proc/stat` and
//! sleeps).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::support::procfs::{self, CpuTicks};

/// Other processes' CPU use above this share of the machine is not quiet.
pub const BUSY_PCT: f64 = 10.0;
/// Steal above this share of the machine is not quiet.
pub const STEAL_PCT: f64 = 2.0;
/// A 1 ms sleep that wakes up later than this is a timer stall.
pub const STALL_US: f64 = 1000.0;
/// More than this share of sleeps stalled is not quiet.
pub const STALLED_PCT: f64 = 1.0;

/// What the check saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineCheck {
    /// When it ran (RFC 3339) and for how long.
    pub at: String,
    pub seconds: f64,
    pub cpus: usize,
    /// CPU time used by everything (pagebench idle) and stolen, as shares of the machine's.
    pub busy_pct: f64,
    pub steal_pct: f64,
    /// The 1-minute load average at the end.
    pub load1: f64,
    /// How late 1 ms sleeps woke up: median, p99, max (µs), and how many of how many were
    /// later than [`STALL_US`].
    pub wake_late_median_us: f64,
    pub wake_late_p99_us: f64,
    pub wake_late_max_us: f64,
    pub stalls: usize,
    pub sleeps: usize,
    /// Why the machine is not quiet (empty: it is).
    pub problems: Vec<String>,
}

impl MachineCheck {
    pub fn quiet(&self) -> bool {
        self.problems.is_empty()
    }

    /// The check's figures from two `/proc/stat` readings and the wake-up lateness of each
    /// sleep, in µs (pure).
    pub fn judge(a: &CpuTicks, b: &CpuTicks, mut late_us: Vec<f64>, cpus: usize) -> MachineCheck {
        let total = b.total().saturating_sub(a.total()).max(1) as f64;
        let busy_pct = 100.0 * b.busy().saturating_sub(a.busy()) as f64 / total;
        let steal_pct = 100.0 * b.steal.saturating_sub(a.steal) as f64 / total;
        late_us.sort_by(f64::total_cmp);
        let at = |q: f64| {
            if late_us.is_empty() {
                0.0
            } else {
                late_us[((late_us.len() - 1) as f64 * q).round() as usize]
            }
        };
        let stalls = late_us.iter().filter(|&&l| l > STALL_US).count();
        let mut check = MachineCheck {
            cpus,
            busy_pct,
            steal_pct,
            wake_late_median_us: at(0.5),
            wake_late_p99_us: at(0.99),
            wake_late_max_us: late_us.last().copied().unwrap_or(0.0),
            stalls,
            sleeps: late_us.len(),
            ..MachineCheck::default()
        };
        check.problems = problems(&check);
        check
    }

    /// One line for the terminal and the report.
    pub fn describe(&self) -> String {
        format!(
            "over {:.0} s with pagebench idle: CPU in use {:.1} % of {} CPUs, steal {:.1} %, load average {:.2}; 1 ms sleeps woke {:.0} µs late (median), {:.0} µs (p99), {:.0} µs (max), {} of {} later than {:.0} ms",
            self.seconds,
            self.busy_pct,
            self.cpus,
            self.steal_pct,
            self.load1,
            self.wake_late_median_us,
            self.wake_late_p99_us,
            self.wake_late_max_us,
            self.stalls,
            self.sleeps,
            STALL_US / 1e3
        )
    }
}

fn problems(c: &MachineCheck) -> Vec<String> {
    let mut out = Vec::new();
    if c.busy_pct > BUSY_PCT {
        out.push(format!(
            "other processes used {:.0} % of the machine's CPU time (quiet: ≤ {BUSY_PCT:.0} %)",
            c.busy_pct
        ));
    }
    if c.steal_pct > STEAL_PCT {
        out.push(format!(
            "the hypervisor stole {:.1} % of the CPU time (quiet: ≤ {STEAL_PCT:.0} %)",
            c.steal_pct
        ));
    }
    let stalled = 100.0 * c.stalls as f64 / c.sleeps.max(1) as f64;
    if stalled > STALLED_PCT {
        out.push(format!(
            "{} of {} timer wake-ups were more than {:.0} ms late (quiet: ≤ {STALLED_PCT:.0} %)",
            c.stalls,
            c.sleeps,
            STALL_US / 1e3
        ));
    }
    out
}

/// Watches the machine for `length` (pagebench must be idle meanwhile).
pub fn check(length: Duration) -> MachineCheck {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    let a = procfs::cpu_ticks().unwrap_or_default();
    let mut late_us = Vec::new();
    while start.elapsed() < length {
        let asked = Instant::now();
        std::thread::sleep(Duration::from_millis(1));
        let late = asked.elapsed().saturating_sub(Duration::from_millis(1));
        late_us.push(late.as_secs_f64() * 1e6);
    }
    let b = procfs::cpu_ticks().unwrap_or_default();
    MachineCheck {
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        seconds: start.elapsed().as_secs_f64(),
        load1: procfs::load_average_1min().unwrap_or(f64::NAN),
        ..MachineCheck::judge(&a, &b, late_us, cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks(busy: u64, idle: u64, steal: u64) -> CpuTicks {
        CpuTicks {
            user: busy,
            idle,
            steal,
            ..CpuTicks::default()
        }
    }

    #[test]
    fn a_quiet_machine_has_no_problems() {
        let c = MachineCheck::judge(&ticks(0, 0, 0), &ticks(10, 590, 0), vec![60.0; 1000], 2);
        assert!(c.quiet(), "{:?}", c.problems);
        assert!((c.busy_pct - 10.0 / 6.0).abs() < 1e-9);
        assert_eq!((c.stalls, c.sleeps), (0, 1000));
    }

    #[test]
    fn a_busy_machine_is_said_with_its_figures() {
        let mut late = vec![80.0; 900];
        late.extend(vec![4000.0; 100]);
        let c = MachineCheck::judge(&ticks(0, 0, 0), &ticks(400, 150, 50), late, 2);
        assert_eq!(c.problems.len(), 3, "{:?}", c.problems);
        assert!(c.problems[0].contains("67 %"), "{}", c.problems[0]);
        assert!(c.problems[1].contains("8.3 %"), "{}", c.problems[1]);
        assert!(c.problems[2].contains("100 of 1000"), "{}", c.problems[2]);
        assert_eq!(c.wake_late_max_us, 4000.0);
        assert_eq!(c.wake_late_p99_us, 4000.0);
        assert!(c.describe().contains("steal 8.3 %"));
    }
}
