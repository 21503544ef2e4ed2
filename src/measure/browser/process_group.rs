//! A browser's process tree: its own process group (so the whole tree is ended by the group we
//! created), the wait for its start-up CPU burst to end, the wait for it to be gone, and the
//! tail of its stderr for crash reports. Shared by Chromium and Firefox.

use std::io::Read;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::evidence::run_record::BrowserOverhead;
use crate::support::procfs;

/// The last lines a browser wrote to its stderr file (for crash reports).
pub fn stderr_tail(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let lines: Vec<&str> = s.lines().rev().take(8).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// Ends a browser's process tree: waits up to `grace` for it to exit on its own (after the
/// caller asked it to close), then SIGTERM and SIGKILL to the group; then waits until no
/// process of the group is left.
pub fn end_group(child: &mut Child, pgid: i32, grace: Duration) {
    if !wait_exit(child, grace) {
        // SAFETY: signalling the process group we created.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        if !wait_exit(child, Duration::from_secs(2)) {
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
        }
    }
    // Helpers (zygote, content and utility processes) leave with the browser; make sure.
    wait_group_gone(pgid, Duration::from_secs(3));
}

pub fn wait_exit(child: &mut Child, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Waits until no process of the group is left, killing stragglers at the end.
pub fn wait_group_gone(pgid: i32, timeout: Duration) {
    let end = Instant::now() + timeout;
    loop {
        if group_members(pgid).is_empty() {
            return;
        }
        if Instant::now() >= end {
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            std::thread::sleep(Duration::from_millis(50));
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live (non-zombie) processes whose process group is `pgid`, with their CPU ticks.
fn group_members(pgid: i32) -> Vec<(i32, u64)> {
    let Ok(pids) = procfs::pids() else {
        return Vec::new();
    };
    pids.into_iter()
        .filter_map(|pid| {
            // Gone since listed, or unreadable: not a member to wait for.
            let s = procfs::pid_stat(pid).ok()?;
            (!s.is_zombie() && s.pgrp == pgid).then_some((pid, s.cpu_ticks()))
        })
        .collect()
}

fn group_cpu_ticks(pgid: i32) -> u64 {
    group_members(pgid).iter().map(|(_, t)| t).sum()
}

pub struct Settle {
    pub waited: Duration,
    pub settled: bool,
    pub last_cpu: f64,
}

impl Settle {
    /// Counts this settle wait (the launch's, or a repeat view's second) into a run's overhead.
    pub fn count_into(&self, overhead: &mut BrowserOverhead) {
        overhead.settle_ms += self.waited.as_secs_f64() * 1e3;
        overhead.settled = self.settled;
        overhead.settle_cpu = self.last_cpu;
    }
}

/// Waits until the browser's processes used less than 15 % of a core over the last 80 ms (the
/// start-up burst is over), at most `max` — for a device capped at `cpu_share` of a core, less
/// than 15 % of the larger of that share and half a core (a capped browser's burst runs at its
/// whole share; a quiet one keeps a few % of a core of background work). The group's CPU time is sampled every 20 ms, so the
/// wait ends within 20 ms of the browser becoming idle for 80 ms (a whole 80 ms window of at
/// most one scheduler tick: the kernel counts CPU time in 10 ms ticks). Chromium's burst is
/// ~0.8 s of 1.5 cores that stops at once (measured at 50 ms steps on this machine class:
/// 1.1–2.3 cores, then 0.00 in every later step), so a shorter quiet window ends the wait
/// sooner without starting a load inside it.
pub fn settle(pgid: i32, max: Duration, cpu_share: f64) -> Settle {
    const SAMPLE: Duration = Duration::from_millis(20);
    const QUIET_FOR: Duration = Duration::from_millis(80);
    let quiet_cores = 0.15 * cpu_share.clamp(0.5, 1.0);
    let hz = procfs::clock_ticks_per_second();
    let start = Instant::now();
    // (when, group CPU ticks) of every sample so far.
    let mut samples: Vec<(Instant, u64)> = vec![(start, group_cpu_ticks(pgid))];
    let mut last_cpu = f64::NAN;
    while start.elapsed() < max {
        std::thread::sleep(SAMPLE);
        let now = Instant::now();
        samples.push((now, group_cpu_ticks(pgid)));
        // The oldest sample at least QUIET_FOR back, if the wait is that long yet.
        let Some(&(then, ticks_then)) = samples
            .iter()
            .rev()
            .find(|(t, _)| now.duration_since(*t) >= QUIET_FOR)
        else {
            continue;
        };
        let ticks = samples.last().map_or(0, |s| s.1).saturating_sub(ticks_then);
        last_cpu = ticks as f64 / hz / now.duration_since(then).as_secs_f64();
        if last_cpu < quiet_cores {
            return Settle {
                waited: start.elapsed(),
                settled: true,
                last_cpu,
            };
        }
    }
    Settle {
        waited: start.elapsed(),
        settled: false,
        last_cpu,
    }
}
