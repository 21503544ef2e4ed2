//! A fixed native CPU benchmark, timed in a forked child — unthrottled, or inside a device's
//! CPU cap (`cpu_cap`): what the cap achieves, and the longest stall the kernel's bandwidth
//! control put in a busy thread (a slower CPU has none; a cap with a long period has long ones).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::support::cgroup::CpuGroup;
use crate::support::cpu_cap::CpuShare;

/// Rounds of the work (a multiply-add chain): about 110 ms on this machine's core — many quota
/// periods, so a cap's first full quota does not count — in an optimised build and in a debug
/// one (whose loop is 7× slower: it does fewer rounds).
const ROUNDS: u64 = if cfg!(debug_assertions) {
    15_000
} else {
    100_000
};
const STEPS_PER_ROUND: u64 = 1_000;

/// One timing of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NativeTiming {
    /// Wall time of the work.
    pub ms: f64,
    /// The longest gap between two of its progress checks (≈ 0.3 ms apart when it runs).
    pub longest_stall_ms: f64,
}

/// Times the benchmark in a forked child: in a new group capped at `share` (on one core), or
/// free (None: wherever the scheduler puts it, as an uncapped browser runs).
pub fn time(share: Option<CpuShare>) -> Result<NativeTiming> {
    let group = match share {
        Some(share) => {
            let mut g = CpuGroup::create()
                .context("a device's CPU cap needs a writable cgroup2 mount for its group")?;
            crate::support::cpu_cap::apply(&mut g, share)?;
            Some(g)
        }
        None => None,
    };
    let mut fds = [0; 2];
    // SAFETY: pipe(2) into a two-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    // SAFETY: the child calls only async-signal-safe functions (open/write/close in
    // `join_from_child`, clock_gettime, write, _exit) and allocates nothing.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let err = std::io::Error::last_os_error();
        // SAFETY: our own pipe's two ends.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        return Err(err).context("fork for the CPU benchmark");
    }
    if pid == 0 {
        let ok = group.as_ref().is_none_or(|g| g.join_from_child().is_ok());
        let out = if ok { work() } else { [-1.0, -1.0] };
        // SAFETY: as above.
        unsafe {
            libc::write(fds[1], out.as_ptr().cast(), 16);
            libc::_exit(0);
        }
    }
    // SAFETY: our own pipe's write end.
    unsafe { libc::close(fds[1]) };
    let mut out = [0f64; 2];
    // SAFETY: reading 16 bytes into a 16-byte buffer from our pipe; waiting for our child.
    let read = unsafe { libc::read(fds[0], out.as_mut_ptr().cast(), 16) };
    unsafe {
        libc::close(fds[0]);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    anyhow::ensure!(
        read == 16 && out[0] >= 0.0,
        "the CPU benchmark's child could not join its group"
    );
    Ok(NativeTiming {
        ms: out[0],
        longest_stall_ms: out[1],
    })
}

/// The fixed work: [wall ms, longest stall ms]. Async-signal-safe.
fn work() -> [f64; 2] {
    let start = now_ms();
    let (mut last, mut longest) = (start, 0.0f64);
    let mut x: u64 = 1;
    for round in 0..ROUNDS {
        for _ in 0..STEPS_PER_ROUND {
            // Through black_box every step: the optimiser can neither fold the chain nor drop it.
            x = std::hint::black_box(x)
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
        }
        if round % 64 == 0 {
            let t = now_ms();
            longest = longest.max(t - last);
            last = t;
        }
    }
    let end = now_ms();
    [end - start, longest.max(end - last)]
}

fn now_ms() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime into a timespec; async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
}

/// The quickest of `n` timings free and of `n` at `share`, interleaved: what each side can do
/// when nothing else on the machine (a browser starting for the next run) gets in its way.
/// Each round swaps which side goes first, so a load that fades between runs (the last run's
/// browser exiting) does not fall on one side only.
pub fn quickest_pair(share: Option<CpuShare>, n: usize) -> Result<(NativeTiming, NativeTiming)> {
    let quicker = |a: Option<NativeTiming>, b: NativeTiming| match a {
        Some(a) if a.ms <= b.ms => a,
        _ => b,
    };
    let (mut free, mut on) = (None, None);
    for round in 0..n.max(1) {
        if round % 2 == 0 {
            free = Some(quicker(free, time(None)?));
            on = Some(quicker(on, time(share)?));
        } else {
            on = Some(quicker(on, time(share)?));
            free = Some(quicker(free, time(None)?));
        }
    }
    Ok((free.expect("n ≥ 1"), on.expect("n ≥ 1")))
}

/// A device's achieved slowdown from `pairs` of (free, capped) timings side by side: the
/// median of their ratios (None without pairs).
pub fn achieved_slowdown(pairs: &[(NativeTiming, NativeTiming)]) -> Option<f64> {
    let ratios: Vec<f64> = pairs
        .iter()
        .filter(|(free, _)| free.ms > 0.0)
        .map(|(free, capped)| capped.ms / free.ms)
        .collect();
    crate::support::stats::median(&ratios).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: f64) -> NativeTiming {
        NativeTiming {
            ms,
            longest_stall_ms: 0.0,
        }
    }

    #[test]
    fn the_achieved_slowdown_is_the_median_ratio() {
        let pairs = [
            (t(50.0), t(200.0)),
            (t(50.0), t(210.0)),
            (t(40.0), t(400.0)),
        ];
        assert_eq!(achieved_slowdown(&pairs), Some(4.2));
        assert_eq!(achieved_slowdown(&[]), None);
    }

    /// A cap at 1/4 of a core makes the work 4× slower within 15 % (medians of 5 pairs, run
    /// side by side); unthrottled, the work runs without a stall of more than a few ms.
    #[test]
    fn a_capped_benchmark_is_slower_by_the_cap() {
        let share = CpuShare {
            period_us: 10_000,
            quota_us: 2_500,
        };
        let pairs: Vec<_> = (0..5)
            .map(|_| (time(None).unwrap(), time(Some(share)).unwrap()))
            .collect();
        let s = achieved_slowdown(&pairs).unwrap();
        assert!(
            (s / 4.0 - 1.0).abs() < 0.15,
            "achieved {s:.2}× of 4×: {pairs:?}"
        );
    }
}
