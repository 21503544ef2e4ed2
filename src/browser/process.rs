//! A browser's process tree: its own process group (so the whole tree is ended by the group we
//! created), the wait for its start-up CPU burst to end, the wait for it to be gone, and the
//! tail of its stderr for crash reports. Shared by Chromium and Firefox.

use std::io::Read;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::procfs;

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

/// Waits until the browser's processes use less than 15 % of a core over two consecutive
/// 100 ms windows (the start-up burst is over), at most `max`.
pub fn settle(pgid: i32, max: Duration) -> Settle {
    const WINDOW: Duration = Duration::from_millis(100);
    const QUIET_CORES: f64 = 0.15;
    let hz = procfs::clock_ticks_per_second();
    let start = Instant::now();
    let mut quiet = 0;
    let mut last_cpu = f64::NAN;
    let mut prev = group_cpu_ticks(pgid);
    while start.elapsed() < max {
        std::thread::sleep(WINDOW);
        let now = group_cpu_ticks(pgid);
        last_cpu = (now.saturating_sub(prev)) as f64 / hz / WINDOW.as_secs_f64();
        prev = now;
        if last_cpu < QUIET_CORES {
            quiet += 1;
            if quiet >= 2 {
                return Settle {
                    waited: start.elapsed(),
                    settled: true,
                    last_cpu,
                };
            }
        } else {
            quiet = 0;
        }
    }
    Settle {
        waited: start.elapsed(),
        settled: false,
        last_cpu,
    }
}
