//! What the link did during a run ([`LinkStats`]) and whether it did what the profile asked
//! ([`self_check`]): achieved vs configured delay (from release lateness and FIFO hold), loss vs
//! the binomial 99 % interval, rate while saturated, packets the kernel dropped before the
//! emulator read them, and the CPU steal that usually explains a bad run. Pure functions.

use serde::{Deserialize, Serialize};
use statrs::function::gamma::ln_gamma;

use super::histogram::LatencySummary;
use super::model::Counters;
use super::tun::DeviceCounters;
use crate::profile::Profile;

/// Lateness p99 above this makes the self-check warn.
pub const LATENESS_P99_WARN_US: f64 = 1000.0;
/// A mean FIFO hold above this is noted as a delay skew.
pub const FIFO_HOLD_NOTE_MS: f64 = 0.5;
/// Achieved rate must be within this fraction of the configured rate when saturated.
pub const RATE_TOLERANCE: f64 = 0.05;
/// Saturated time needed before the rate is judged.
pub const MIN_BUSY_S: f64 = 0.2;
/// Steal above this share of the machine's CPU time during a snapshot is warned about.
pub const STEAL_WARN_PCT: f64 = 2.0;

/// Counters of one direction over a snapshot interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Packets/bytes the emulator read from the entry TUN device.
    pub packets_in: u64,
    pub bytes_in: u64,
    /// Packets/bytes it wrote to the exit TUN device.
    pub packets_out: u64,
    pub bytes_out: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    pub dropped_not_for_peer: u64,
    /// Packets released after a packet that arrived after them.
    pub reorders: u64,
    /// Actual release time − due time.
    pub lateness: LatencySummary,
    /// Mean time from leaving the rate limit (or arrival) to release: configured delay + mean
    /// jitter draw + FIFO hold + lateness.
    pub mean_delay_ms: f64,
    /// Mean extra wait imposed by FIFO order (the jitter skew at high packet rates).
    pub mean_fifo_hold_ms: f64,
    /// Mean time waiting for and being serialised by the rate limit.
    pub mean_wire_ms: f64,
    pub max_backlog_packets: u64,
    pub max_backlog_bytes: u64,
    /// Time the rate limit was saturated, and the bytes it released in that time.
    pub busy_s: f64,
    pub busy_bytes: u64,
    /// Packets inside the link when the snapshot was taken.
    pub in_flight: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    /// Reads that filled the whole buffer (truncated, dropped; impossible at MTU 1500).
    pub oversize: u64,
    /// The entry device's kernel counters: packets it handed to the emulator, and packets it
    /// dropped because the emulator did not read them in time.
    pub tun_tx_packets: u64,
    pub tun_tx_dropped: u64,
    /// The exit device's kernel count of packets the emulator wrote into it.
    pub tun_rx_packets: u64,
}

impl DirectionStats {
    pub(crate) fn new(
        c: &Counters,
        io: &super::emulator::IoCounters,
        in_flight: u64,
        entry: &DeviceCounters,
        exit: &DeviceCounters,
    ) -> DirectionStats {
        let per = |sum: u128| {
            if c.packets_out == 0 {
                0.0
            } else {
                sum as f64 / c.packets_out as f64 / 1e6
            }
        };
        DirectionStats {
            packets_in: c.packets_in,
            bytes_in: c.bytes_in,
            packets_out: c.packets_out,
            bytes_out: c.bytes_out,
            dropped_loss: c.dropped_loss,
            dropped_queue: c.dropped_queue,
            dropped_not_for_peer: c.dropped_not_for_peer,
            reorders: c.reorders,
            lateness: c.lateness.summary(),
            mean_delay_ms: per(c.delay_sum_ns),
            mean_fifo_hold_ms: per(c.fifo_hold_sum_ns),
            mean_wire_ms: per(c.wire_sum_ns),
            max_backlog_packets: c.max_backlog_packets,
            max_backlog_bytes: c.max_backlog_bytes,
            busy_s: c.busy_ns as f64 / 1e9,
            busy_bytes: c.busy_bytes,
            in_flight,
            read_errors: io.read_errors,
            write_errors: io.write_errors,
            oversize: io.oversize,
            tun_tx_packets: entry.tx_packets,
            tun_tx_dropped: entry.tx_dropped,
            tun_rx_packets: exit.rx_packets,
        }
    }

    /// Packets that reached the loss draw (not filtered as not-for-peer).
    pub fn loss_trials(&self) -> u64 {
        self.packets_in - self.dropped_not_for_peer
    }

    /// Achieved rate while the rate limit was saturated, in Mbit/s.
    pub fn busy_rate_mbit(&self) -> Option<f64> {
        (self.busy_s > 0.0).then(|| self.busy_bytes as f64 * 8.0 / self.busy_s / 1e6)
    }
}

/// Everything the link counted between two snapshots. `up` is client → server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkStats {
    /// Profile in force at the snapshot.
    pub profile: String,
    pub seed: u64,
    /// Length of the snapshot interval.
    pub elapsed_s: f64,
    pub up: DirectionStats,
    pub down: DirectionStats,
    /// CPU steal of the whole machine during the interval (all CPUs), and as a share of the
    /// machine's CPU time.
    pub steal_ms: f64,
    pub steal_pct: f64,
    /// CPU time of the emulator thread during the interval, and as a share of one CPU.
    pub emulator_cpu_ms: f64,
    pub emulator_cpu_pct: f64,
    /// Whether the emulator thread ran under SCHED_FIFO.
    pub realtime: bool,
    /// Whether idle CPUs were kept polling instead of halting.
    pub cpus_held_awake: bool,
}

/// How one direction compares with its configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionCheck {
    pub configured_delay_ms: f64,
    /// Mean achieved delay stage (see [`DirectionStats::mean_delay_ms`]).
    pub achieved_delay_ms: f64,
    /// Mean release lateness: the emulator's own delay error.
    pub delay_error_ms: f64,
    pub fifo_hold_ms: f64,
    pub lateness: LatencySummary,
    pub configured_loss_pct: f64,
    pub measured_loss_pct: f64,
    /// The binomial 99 % interval of the loss for this many packets.
    pub loss_low_pct: f64,
    pub loss_high_pct: f64,
    pub loss_trials: u64,
    pub configured_rate_mbit: Option<f64>,
    /// Achieved while saturated (only when saturated for at least [`MIN_BUSY_S`]).
    pub achieved_rate_mbit: Option<f64>,
    pub saturated_s: f64,
}

/// The link's verdict on a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SelfCheck {
    /// No warnings: the emulator did what the profile asked.
    pub ok: bool,
    pub profile: String,
    pub elapsed_s: f64,
    pub up: DirectionCheck,
    pub down: DirectionCheck,
    pub steal_ms: f64,
    pub emulator_cpu_pct: f64,
    /// Drift of the emulator from its configuration (late releases, loss outside its interval,
    /// wrong rate, kernel drops, errors, heavy CPU steal).
    pub warnings: Vec<String>,
    /// Expected effects worth knowing, not faults: the delay skew of FIFO jitter.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Compares what the link did with what `profile` asked for.
pub fn self_check(stats: &LinkStats, profile: &Profile) -> SelfCheck {
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let up = check_direction(
        "up",
        &stats.up,
        profile,
        profile.up_mbit,
        &mut warnings,
        &mut notes,
    );
    let down = check_direction(
        "down",
        &stats.down,
        profile,
        profile.down_mbit,
        &mut warnings,
        &mut notes,
    );
    if stats.steal_pct > STEAL_WARN_PCT {
        warnings.push(format!(
            "CPU steal {:.0} ms ({:.1} % of the machine's CPU time): the hypervisor paused this VM; \
             delays and drops during the run may come from that",
            stats.steal_ms, stats.steal_pct
        ));
    }
    SelfCheck {
        ok: warnings.is_empty(),
        profile: stats.profile.clone(),
        elapsed_s: stats.elapsed_s,
        up,
        down,
        steal_ms: stats.steal_ms,
        emulator_cpu_pct: stats.emulator_cpu_pct,
        warnings,
        notes,
    }
}

fn check_direction(
    label: &str,
    s: &DirectionStats,
    profile: &Profile,
    rate: Option<f64>,
    warnings: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> DirectionCheck {
    let configured_delay_ms = profile.one_way_ms();
    let delay_error_ms = s.lateness.mean_us / 1e3;
    if s.lateness.count > 0 && s.lateness.p99_us > LATENESS_P99_WARN_US {
        warnings.push(format!(
            "{label}: release lateness p99 {:.0} µs (> {:.0} µs): packets left the emulator late \
             (median {:.0} µs, max {:.0} µs)",
            s.lateness.p99_us, LATENESS_P99_WARN_US, s.lateness.median_us, s.lateness.max_us
        ));
    }
    if s.mean_fifo_hold_ms > FIFO_HOLD_NOTE_MS {
        notes.push(format!(
            "{label}: FIFO order added {:.2} ms to the mean delay (jitter ±{} ms with packets closer \
             together than that); set `reorder = true` for independent (reordering) jitter",
            s.mean_fifo_hold_ms, profile.jitter_ms
        ));
    }
    let configured_loss = profile.loss_pct / 100.0;
    let trials = s.loss_trials();
    let (lo, hi) = binomial_interval_99(trials, configured_loss);
    let measured_loss_pct = if trials == 0 {
        0.0
    } else {
        100.0 * s.dropped_loss as f64 / trials as f64
    };
    if trials > 0 && !(lo..=hi).contains(&s.dropped_loss) {
        warnings.push(format!(
            "{label}: {} of {} packets lost ({:.3} %), outside the 99 % interval [{lo}, {hi}] of \
             the configured {} %",
            s.dropped_loss, trials, measured_loss_pct, profile.loss_pct
        ));
    }
    let achieved_rate_mbit = s.busy_rate_mbit().filter(|_| s.busy_s >= MIN_BUSY_S);
    if let (Some(want), Some(got)) = (rate, achieved_rate_mbit) {
        if (got / want - 1.0).abs() > RATE_TOLERANCE {
            warnings.push(format!(
                "{label}: achieved {got:.3} Mbit/s while saturated, configured {want} Mbit/s"
            ));
        }
    }
    if s.tun_tx_dropped > 0 {
        warnings.push(format!(
            "{label}: the kernel dropped {} packets in the TUN queue before the emulator read them \
             (emulator stalled or overloaded)",
            s.tun_tx_dropped
        ));
    }
    if s.write_errors > 0 || s.read_errors > 0 || s.oversize > 0 {
        warnings.push(format!(
            "{label}: {} write errors, {} read errors, {} oversized packets",
            s.write_errors, s.read_errors, s.oversize
        ));
    }
    DirectionCheck {
        configured_delay_ms,
        achieved_delay_ms: s.mean_delay_ms,
        delay_error_ms,
        fifo_hold_ms: s.mean_fifo_hold_ms,
        lateness: s.lateness,
        configured_loss_pct: profile.loss_pct,
        measured_loss_pct,
        loss_low_pct: pct(lo, trials),
        loss_high_pct: pct(hi, trials),
        loss_trials: trials,
        configured_rate_mbit: rate,
        achieved_rate_mbit,
        saturated_s: s.busy_s,
    }
}

fn pct(count: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        100.0 * count as f64 / n as f64
    }
}

/// The central 99 % interval `[lo, hi]` of the number of losses among `n` packets with loss
/// probability `p`: exact binomial quantiles (the smallest k with CDF(k) ≥ 0.5 % and ≥ 99.5 %,
/// as scipy's `binom.ppf`). The pmf is summed in log space over mean ± 12 sd, where all but a
/// negligible mass lies, so large `n` neither underflows nor costs O(n).
pub fn binomial_interval_99(n: u64, p: f64) -> (u64, u64) {
    if n == 0 || p <= 0.0 || p.is_nan() {
        return (0, 0);
    }
    if p >= 1.0 {
        return (n, n);
    }
    let (nf, q) = (n as f64, 1.0 - p);
    let (mean, sd) = (nf * p, (nf * p * q).sqrt());
    let lo = (mean - 12.0 * sd - 10.0).floor().max(0.0) as u64;
    let hi = ((mean + 12.0 * sd + 10.0).ceil() as u64).min(n);
    let ln_n = ln_gamma(nf + 1.0);
    let pmf: Vec<f64> = (lo..=hi)
        .map(|k| {
            let kf = k as f64;
            (ln_n - ln_gamma(kf + 1.0) - ln_gamma(nf - kf + 1.0) + kf * p.ln() + (nf - kf) * q.ln())
                .exp()
        })
        .collect();
    let total: f64 = pmf.iter().sum();
    let quantile = |target: f64| {
        let mut acc = 0.0;
        for (i, m) in pmf.iter().enumerate() {
            acc += m / total;
            if acc >= target - 1e-12 {
                return lo + i as u64;
            }
        }
        hi
    };
    (quantile(0.005), quantile(0.995))
}

impl SelfCheck {
    /// A few lines for the terminal.
    pub fn render(&self) -> String {
        let mut out = format!(
            "link self-check: profile {}, {:.1} s, emulator CPU {:.1} %, CPU steal {:.0} ms\n",
            self.profile, self.elapsed_s, self.emulator_cpu_pct, self.steal_ms
        );
        for (label, d) in [("up  ", &self.up), ("down", &self.down)] {
            if d.lateness.count == 0 && d.loss_trials == 0 {
                out.push_str(&format!(
                    "  {label} no packets (delay {:.3} ms configured)\n",
                    d.configured_delay_ms
                ));
                continue;
            }
            out.push_str(&format!(
                "  {label} delay {:.3} ms configured, {:.3} ms achieved (lateness median {:.0} µs, p99 {:.0} µs, max {:.0} µs; FIFO hold {:.3} ms)\n",
                d.configured_delay_ms,
                d.achieved_delay_ms,
                d.lateness.median_us,
                d.lateness.p99_us,
                d.lateness.max_us,
                d.fifo_hold_ms
            ));
            out.push_str(&format!(
                "       loss {:.3} % of {} packets (configured {} %, 99 % interval {:.3}–{:.3} %)",
                d.measured_loss_pct,
                d.loss_trials,
                d.configured_loss_pct,
                d.loss_low_pct,
                d.loss_high_pct
            ));
            if let Some(r) = d.configured_rate_mbit {
                match d.achieved_rate_mbit {
                    Some(a) => out.push_str(&format!(
                        "; rate {a:.3} of {r} Mbit/s while saturated ({:.1} s)",
                        d.saturated_s
                    )),
                    None => out.push_str(&format!(
                        "; rate {r} Mbit/s (not saturated long enough to measure)"
                    )),
                }
            }
            out.push('\n');
        }
        for n in &self.notes {
            out.push_str(&format!("  note: {n}\n"));
        }
        if self.warnings.is_empty() {
            out.push_str("  OK: the link behaved as configured\n");
        } else {
            for w in &self.warnings {
                out.push_str(&format!("  WARNING: {w}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet_stats(n: u64) -> DirectionStats {
        DirectionStats {
            packets_in: n,
            packets_out: n,
            lateness: LatencySummary {
                count: n,
                mean_us: 20.0,
                median_us: 15.0,
                p99_us: 80.0,
                max_us: 300.0,
            },
            mean_delay_ms: 20.02,
            ..Default::default()
        }
    }

    fn stats(up: DirectionStats, down: DirectionStats) -> LinkStats {
        LinkStats {
            profile: "x".into(),
            elapsed_s: 10.0,
            up,
            down,
            ..Default::default()
        }
    }

    #[test]
    fn binomial_interval_matches_scipy() {
        // scipy.stats.binom.ppf(0.005 / 0.995, n, p).
        for (n, p, lo, hi) in [
            (20_000, 0.01, 165, 237),
            (20_000, 0.05, 921, 1080),
            (137, 0.01, 0, 5),
            (3, 0.05, 0, 2),
            (1, 0.03, 0, 1),
            (5000, 0.03, 120, 182),
            (1_000_000, 0.05, 49_439, 50_562),
            (57, 0.05, 0, 8),
        ] {
            assert_eq!(binomial_interval_99(n, p), (lo, hi), "n={n} p={p}");
        }
    }

    #[test]
    fn binomial_interval_matches_normal_approximation() {
        // n = 20000, p = 1 %: mean 200, sd ≈ 14.07, so about 200 ± 36.
        let (lo, hi) = binomial_interval_99(20_000, 0.01);
        assert!((162..=166).contains(&lo), "{lo}");
        assert!((235..=239).contains(&hi), "{hi}");
        assert_eq!(binomial_interval_99(100, 0.0), (0, 0));
        assert_eq!(binomial_interval_99(0, 0.5), (0, 0));
    }

    #[test]
    fn quiet_run_is_ok() {
        let p = Profile::simple("x", 40.0, 0.0, 0.0);
        let c = self_check(&stats(quiet_stats(1000), quiet_stats(1000)), &p);
        assert!(c.ok, "{:?}", c.warnings);
        assert_eq!(c.up.configured_delay_ms, 20.0);
        assert!((c.up.delay_error_ms - 0.02).abs() < 1e-9);
        assert!(c.render().contains("OK"));
    }

    #[test]
    fn drift_is_warned_about() {
        let p = Profile::simple("x", 40.0, 5.0, 1.0);
        let mut up = quiet_stats(20_000);
        up.dropped_loss = 300; // 1.5 %: outside [164, 237]
        up.lateness.p99_us = 2500.0;
        up.tun_tx_dropped = 12;
        up.mean_fifo_hold_ms = 1.2;
        let mut down = quiet_stats(20_000);
        down.dropped_loss = 200;
        let mut s = stats(up, down);
        s.steal_pct = 5.0;
        s.steal_ms = 1000.0;
        let c = self_check(&s, &p);
        assert!(!c.ok);
        let all = c.warnings.join("\n");
        for needle in ["outside the 99 %", "p99 2500", "TUN queue", "steal"] {
            assert!(all.contains(needle), "missing {needle:?} in {all}");
        }
        // The FIFO skew is an expected effect, noted rather than warned about.
        assert!(!all.contains("FIFO"), "{all}");
        assert!(c.notes[0].contains("FIFO order"), "{:?}", c.notes);
        assert!(all.starts_with("up:"), "the down direction is fine: {all}");
        assert!((c.up.measured_loss_pct - 1.5).abs() < 1e-9);
    }

    #[test]
    fn rate_is_judged_only_when_saturated() {
        let mut p = Profile::simple("x", 40.0, 0.0, 0.0);
        p.down_mbit = Some(10.0);
        p.queue_packets = Some(50);
        let mut down = quiet_stats(1000);
        down.busy_s = 0.1;
        down.busy_bytes = 100_000; // 8 Mbit/s, but too short to judge
        let c = self_check(&stats(quiet_stats(10), down.clone()), &p);
        assert!(c.ok && c.down.achieved_rate_mbit.is_none());
        down.busy_s = 1.0;
        down.busy_bytes = 1_000_000; // 8 Mbit/s for 1 s
        let c = self_check(&stats(quiet_stats(10), down), &p);
        assert_eq!(c.down.achieved_rate_mbit, Some(8.0));
        assert!(
            c.warnings[0].contains("configured 10 Mbit/s"),
            "{:?}",
            c.warnings
        );
    }
}
