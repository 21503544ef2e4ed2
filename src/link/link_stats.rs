//! What the link did during a run ([`LinkStats`]) and whether it delivered what the profile
//! asked ([`self_check`]), as a gate: a run whose link failed any check ([`LinkFault`]) is not
//! a measurement of the profile and must not count. Checked per direction from the emulator's
//! per-packet sums: the delay the packets really got against the delay the model intended for
//! them (both directions summed: `achieved_rtt_ms` vs `model_rtt_ms`), loss against its 99.9 %
//! binomial interval, the time the emulator was behind its schedule (material only above a
//! share of the run and of its RTT; the lateness p99 alone is noted), packets the kernel dropped before the emulator read
//! them, the rate while saturated (a recorded trace's rate over the same periods), that the
//! events' timeline started at the run's mark, IO errors — and whether the emulator was still
//! running. Queue delays per discipline, outage time and drops by cause are reported.
//! CPU steal is reported as a warning (its effects show up in the checks). Pure functions.

use std::fmt;

use serde::{Deserialize, Serialize};
use statrs::function::gamma::ln_gamma;

use super::histogram::LatencySummary;
use super::io_counters::IoCounters;
use super::model::Counters;
use super::tun::DeviceCounters;
use crate::config::profile::{JitterModel, Profile};

/// The emulator's lateness is material when the time it was behind its schedule
/// (`link::behind`: the union of the spells in which released packets were later than its
/// ordinary precision) exceeds this share of the run's interval — what it can have added to
/// the load —, at least [`BEHIND_MIN_MS`] …
pub const BEHIND_MAX_SHARE: f64 = 0.01;
pub const BEHIND_MIN_MS: f64 = 1.0;
/// … or when one spell was longer than this share of the profile's RTT (at least
/// [`BEHIND_MIN_MS`]): long enough, near a round trip, to fire a protocol's loss timers.
pub const BEHIND_SPELL_MAX_RTT: f64 = 0.25;
/// Release lateness p99 above this is noted (not a fault: the time behind schedule says
/// whether it mattered).
pub const LATENESS_P99_NOTE_US: f64 = 1000.0;
/// Achieved RTT may differ from the model's by at most max(this, [`RTT_TOLERANCE_FRACTION`]).
pub const RTT_TOLERANCE_MS: f64 = 0.5;
pub const RTT_TOLERANCE_FRACTION: f64 = 0.01;
/// Two-sided coverage of the loss interval a run's loss must fall in.
pub const LOSS_COVERAGE: f64 = 0.999;
/// A mean FIFO hold above this is noted as a delay skew (`fifo` jitter model).
pub const FIFO_HOLD_NOTE_MS: f64 = 0.5;
/// Achieved rate must be within this fraction of the configured rate when saturated.
pub const RATE_TOLERANCE: f64 = 0.05;
/// Saturated time needed before the rate is judged.
pub const MIN_BUSY_S: f64 = 0.2;
/// Steal above this share of the machine's CPU time during a snapshot is warned about.
pub const STEAL_WARN_PCT: f64 = 2.0;
/// The events' timeline must start within this of the run's interval (the mark).
pub const TIMELINE_MARK_TOLERANCE_MS: f64 = 20.0;

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
    /// Packets a test hook chose to drop (not the profile's loss).
    #[serde(default)]
    pub dropped_injected: u64,
    /// Packets CoDel dropped at dequeue.
    #[serde(default)]
    pub dropped_aqm: u64,
    /// Packets that arrived during an outage (`drop` mode).
    #[serde(default)]
    pub dropped_outage: u64,
    /// Packets whose client port the NAT rewrote after rebinding.
    #[serde(default)]
    pub nat_rewritten: u64,
    /// Packets to the client for a mapping the rebinding ended.
    #[serde(default)]
    pub dropped_nat: u64,
    /// Time each packet waited in the bottleneck's queue (none without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_delay: Option<LatencySummary>,
    /// Time the link was down (outages) in the interval, seconds.
    #[serde(default)]
    pub outage_s: f64,
    /// Packets released after a packet that arrived after them.
    pub reorders: u64,
    /// Actual release time − due time.
    pub lateness: LatencySummary,
    /// How long the emulator was behind its schedule (absent in records from before).
    #[serde(default)]
    pub behind: super::behind::BehindSummary,
    /// Mean delay the model intended for the released packets (from leaving the rate limit, or
    /// arriving, to the due time): configured delay + jitter + any hold for order.
    #[serde(default)]
    pub mean_intended_ms: f64,
    /// Mean delay the released packets really got (to their release): intended + lateness.
    pub mean_delay_ms: f64,
    /// Mean delay the link offered over the interval, whatever the traffic (the time average
    /// of the model's delay; `None` when no time was accounted).
    #[serde(default)]
    pub mean_offered_ms: Option<f64>,
    /// Mean extra wait imposed by keeping order (the `fifo` model's skew), and how many packets
    /// waited at all.
    pub mean_fifo_hold_ms: f64,
    #[serde(default)]
    pub fifo_held: u64,
    /// Mean time waiting for and being serialised by the rate limit.
    pub mean_wire_ms: f64,
    pub max_backlog_packets: u64,
    pub max_backlog_bytes: u64,
    /// Time the rate limit was saturated, and the bytes it released in that time.
    pub busy_s: f64,
    pub busy_bytes: u64,
    /// The rate the rate limit or trace offered in those periods (Mbit/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_offered_mbit: Option<f64>,
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
        io: &IoCounters,
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
            dropped_injected: c.dropped_injected,
            dropped_aqm: c.dropped_aqm,
            dropped_outage: c.dropped_outage,
            nat_rewritten: c.nat_rewritten,
            dropped_nat: c.dropped_nat,
            queue_delay: (c.sojourn.count() > 0).then(|| c.sojourn.summary()),
            outage_s: c.outage_ns as f64 / 1e9,
            reorders: c.reorders,
            lateness: c.lateness.summary(),
            behind: c.behind.summary(),
            mean_intended_ms: per(c.intended_sum_ns),
            mean_delay_ms: per(c.delay_sum_ns),
            mean_offered_ms: (c.offered_span_ns > 0.0)
                .then(|| c.offered_integral / c.offered_span_ns / 1e6),
            mean_fifo_hold_ms: per(c.fifo_hold_sum_ns),
            fifo_held: c.fifo_held,
            mean_wire_ms: per(c.wire_sum_ns),
            max_backlog_packets: c.max_backlog_packets,
            max_backlog_bytes: c.max_backlog_bytes,
            busy_s: c.busy_ns as f64 / 1e9,
            busy_bytes: c.busy_bytes,
            busy_offered_mbit: (c.busy_exit_ns > 0 && c.busy_capacity_bytes > 0.0)
                .then(|| c.busy_capacity_bytes * 8.0 / (c.busy_exit_ns as f64 / 1e9) / 1e6),
            in_flight,
            read_errors: io.read_errors,
            write_errors: io.write_errors,
            oversize: io.oversize,
            tun_tx_packets: entry.tx_packets,
            tun_tx_dropped: entry.tx_dropped,
            tun_rx_packets: exit.rx_packets,
        }
    }

    /// Packets that reached the loss draw (not filtered as not-for-peer, injected or an
    /// outage's).
    pub fn loss_trials(&self) -> u64 {
        self.packets_in
            .saturating_sub(self.dropped_not_for_peer + self.dropped_injected + self.dropped_outage)
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
    /// The CPU the emulator was pinned to while the receiving stacks' work was steered to the
    /// others (`None`: not steered).
    #[serde(default)]
    pub emulator_cpu: Option<usize>,
    /// The profile's events as they fell in the interval (profiles with outages or NAT
    /// rebinding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<LinkEvents>,
    /// Bytes each competing flow delivered in the interval (profiles with `cross_traffic`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross: Vec<CrossFlowBytes>,
}

/// The events' timeline as it fell in an interval. Times are ms from the timeline's start (the
/// run's mark).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkEvents {
    /// The timeline's start minus the interval's start, ms (≈ 0 when the run protocol marked
    /// both together).
    pub timeline_offset_ms: f64,
    /// The timeline's start, Unix time in ms (to place the server's connection times on it).
    pub timeline_start_unix_ms: f64,
    /// Outages (scheduled and random) up to the end of the interval: [start, end] ms.
    pub outages_ms: Vec<[f64; 2]>,
    pub rebind_at_ms: Option<f64>,
}

/// The bytes one competing flow delivered to its sink in an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CrossFlowBytes {
    pub flow: u32,
    /// `tcp` or `udp-cbr`.
    pub protocol: String,
    /// `down` (server → client) or `up`.
    pub direction: String,
    pub bytes: u64,
    /// Times the flow had to connect again (a TCP flow broken by NAT rebinding or an outage).
    pub reconnects: u64,
}

/// How one direction compares with its configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionCheck {
    pub configured_delay_ms: f64,
    /// Mean delay the model intended for this run's packets.
    #[serde(default)]
    pub model_delay_ms: f64,
    /// Mean delay they got (see [`DirectionStats::mean_delay_ms`]).
    pub achieved_delay_ms: f64,
    /// Mean release lateness: the emulator's own delay error.
    pub delay_error_ms: f64,
    pub fifo_hold_ms: f64,
    pub lateness: LatencySummary,
    pub configured_loss_pct: f64,
    pub measured_loss_pct: f64,
    /// The binomial interval ([`LOSS_COVERAGE`]) of the loss for this many packets.
    pub loss_low_pct: f64,
    pub loss_high_pct: f64,
    pub loss_trials: u64,
    pub configured_rate_mbit: Option<f64>,
    /// Achieved while saturated (only when saturated for at least [`MIN_BUSY_S`]).
    pub achieved_rate_mbit: Option<f64>,
    /// What the rate or trace offered in the same saturated periods (a trace's varies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_rate_mbit: Option<f64>,
    pub saturated_s: f64,
    /// The queue discipline and the delays packets waited in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aqm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_delay: Option<LatencySummary>,
    #[serde(default)]
    pub dropped_aqm: u64,
    #[serde(default)]
    pub dropped_queue: u64,
    #[serde(default)]
    pub outage_s: f64,
    #[serde(default)]
    pub dropped_outage: u64,
}

/// Which way a fault was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    Up,
    Down,
}

impl fmt::Display for Way {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Way::Up => "up",
            Way::Down => "down",
        })
    }
}

/// A way in which the link did not deliver the profile during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum LinkFault {
    /// The packets got a different delay from the one the model intended for them.
    DelayMismatch {
        model_rtt_ms: f64,
        achieved_rtt_ms: f64,
        tolerance_ms: f64,
    },
    /// The loss is outside its binomial interval for the configured probability.
    LossOutsideInterval {
        way: Way,
        lost: u64,
        trials: u64,
        low: u64,
        high: u64,
        configured_pct: f64,
    },
    /// The kernel dropped packets in the TUN queue: the emulator did not read them in time.
    TunDrops { way: Way, dropped: u64 },
    /// Packets left the emulator late (the gate of results from before the time behind
    /// schedule was measured; never raised now).
    LateReleases {
        way: Way,
        p99_us: f64,
        median_us: f64,
        max_us: f64,
    },
    /// The emulator was behind its schedule long enough to change the run: in all, or in one
    /// spell.
    BehindSchedule {
        way: Way,
        behind_ms: f64,
        longest_ms: f64,
        interval_ms: f64,
        /// The most it may be behind in all, and in one spell.
        max_ms: f64,
        max_spell_ms: f64,
    },
    /// The rate while saturated differs from the configured rate (or what the trace offered).
    RateOff {
        way: Way,
        achieved_mbit: f64,
        configured_mbit: f64,
    },
    /// The events' timeline did not start at the run's mark: outages and rebinding fell at
    /// other times than the profile's.
    EventsOffMark { offset_ms: f64 },
    /// Reading or writing the TUN devices failed.
    IoErrors {
        way: Way,
        read: u64,
        write: u64,
        oversize: u64,
    },
    /// The emulator thread was not running (its counters could not be read).
    EmulatorStopped { detail: String },
}

impl fmt::Display for LinkFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkFault::DelayMismatch {
                model_rtt_ms,
                achieved_rtt_ms,
                tolerance_ms,
            } => write!(
                f,
                "achieved RTT {achieved_rtt_ms:.3} ms differs from the model's {model_rtt_ms:.3} ms by more than {tolerance_ms:.2} ms"
            ),
            LinkFault::LossOutsideInterval {
                way,
                lost,
                trials,
                low,
                high,
                configured_pct,
            } => write!(
                f,
                "{way}: {lost} of {trials} packets lost ({:.3} %), outside the {} % interval [{low}, {high}] of the configured {configured_pct} %",
                pct(*lost, *trials),
                LOSS_COVERAGE * 100.0
            ),
            LinkFault::TunDrops { way, dropped } => write!(
                f,
                "{way}: the kernel dropped {dropped} packets in the TUN queue before the emulator read them (emulator stalled or overloaded)"
            ),
            LinkFault::LateReleases {
                way,
                p99_us,
                median_us,
                max_us,
            } => write!(
                f,
                "{way}: release lateness p99 {p99_us:.0} µs (> 1000 µs): packets left the emulator late (median {median_us:.0} µs, max {max_us:.0} µs)"
            ),
            LinkFault::BehindSchedule {
                way,
                behind_ms,
                longest_ms,
                interval_ms,
                max_ms,
                max_spell_ms,
            } => write!(
                f,
                "{way}: the emulator was behind its schedule for {behind_ms:.1} ms of {interval_ms:.0} ms (at most {max_ms:.1} ms), its longest spell {longest_ms:.1} ms (at most {max_spell_ms:.1} ms): its lateness can have changed the load"
            ),
            LinkFault::RateOff {
                way,
                achieved_mbit,
                configured_mbit,
            } => write!(
                f,
                "{way}: achieved {achieved_mbit:.3} Mbit/s while saturated, configured {configured_mbit} Mbit/s"
            ),
            LinkFault::EventsOffMark { offset_ms } => write!(
                f,
                "the events' timeline started {offset_ms:.1} ms from the run's mark (> {TIMELINE_MARK_TOLERANCE_MS} ms): outages and rebinding did not fall at the profile's times"
            ),
            LinkFault::IoErrors {
                way,
                read,
                write,
                oversize,
            } => write!(
                f,
                "{way}: {write} write errors, {read} read errors, {oversize} oversized packets"
            ),
            LinkFault::EmulatorStopped { detail } => {
                write!(f, "the emulator stopped: {detail}")
            }
        }
    }
}

/// The link's verdict on a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SelfCheck {
    /// No faults: the link delivered the profile.
    pub ok: bool,
    pub profile: String,
    pub elapsed_s: f64,
    /// Mean delay the model intended for this run's packets, both directions summed.
    #[serde(default)]
    pub model_rtt_ms: f64,
    /// Mean delay the packets got, both directions summed.
    #[serde(default)]
    pub achieved_rtt_ms: f64,
    /// Mean RTT the link offered over the run, whatever the traffic (the model's time
    /// average): what equals the profile. The packets' means above are this weighted by when
    /// the endpoints sent, and window-limited flows send more while the delay is low.
    #[serde(default)]
    pub offered_rtt_ms: Option<f64>,
    pub up: DirectionCheck,
    pub down: DirectionCheck,
    pub steal_ms: f64,
    pub emulator_cpu_pct: f64,
    /// Why the run does not measure the profile (empty when `ok`).
    #[serde(default)]
    pub faults: Vec<LinkFault>,
    /// Worth knowing but not a fault by itself (heavy CPU steal: its effects are checked).
    pub warnings: Vec<String>,
    /// Expected effects of the chosen model (the delay skew of `fifo` jitter).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Compares what the link did with what `profile` asked for.
pub fn self_check(stats: &LinkStats, profile: &Profile) -> SelfCheck {
    let mut faults = Vec::new();
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let trace_mbit =
        |t: &Option<crate::config::profile::TraceFile>| t.as_ref().map(|t| t.mean_mbit);
    let interval_ms = stats.elapsed_s * 1e3;
    let up = check_direction(
        Way::Up,
        &stats.up,
        profile,
        profile.up_mbit.or(trace_mbit(&profile.up_trace)),
        interval_ms,
        &mut faults,
        &mut notes,
    );
    let down = check_direction(
        Way::Down,
        &stats.down,
        profile,
        profile.down_mbit.or(trace_mbit(&profile.down_trace)),
        interval_ms,
        &mut faults,
        &mut notes,
    );
    if let Some(e) = &stats.events {
        if e.timeline_offset_ms.abs() > TIMELINE_MARK_TOLERANCE_MS {
            faults.push(LinkFault::EventsOffMark {
                offset_ms: e.timeline_offset_ms,
            });
        }
    }
    let model_rtt_ms = up.model_delay_ms + down.model_delay_ms;
    let achieved_rtt_ms = up.achieved_delay_ms + down.achieved_delay_ms;
    let offered_rtt_ms = stats
        .up
        .mean_offered_ms
        .zip(stats.down.mean_offered_ms)
        .map(|(u, d)| u + d);
    let tolerance_ms = rtt_tolerance_ms(model_rtt_ms);
    if (achieved_rtt_ms - model_rtt_ms).abs() > tolerance_ms {
        faults.insert(
            0,
            LinkFault::DelayMismatch {
                model_rtt_ms,
                achieved_rtt_ms,
                tolerance_ms,
            },
        );
    }
    if stats.steal_pct > STEAL_WARN_PCT {
        warnings.push(format!(
            "CPU steal {:.0} ms ({:.1} % of the machine's CPU time): the hypervisor paused this VM",
            stats.steal_ms, stats.steal_pct
        ));
    }
    SelfCheck {
        ok: faults.is_empty(),
        profile: stats.profile.clone(),
        elapsed_s: stats.elapsed_s,
        model_rtt_ms,
        achieved_rtt_ms,
        offered_rtt_ms,
        up,
        down,
        steal_ms: stats.steal_ms,
        emulator_cpu_pct: stats.emulator_cpu_pct,
        faults,
        warnings,
        notes,
    }
}

/// The self-check of a run whose link counters could not be read: the emulator stopped.
pub fn stopped_check(profile: &Profile, detail: String) -> SelfCheck {
    SelfCheck {
        ok: false,
        profile: profile.name.clone(),
        faults: vec![LinkFault::EmulatorStopped { detail }],
        ..SelfCheck::default()
    }
}

/// How far achieved RTT may be from the model's: max(0.5 ms, 1 %).
pub fn rtt_tolerance_ms(model_rtt_ms: f64) -> f64 {
    RTT_TOLERANCE_MS.max(RTT_TOLERANCE_FRACTION * model_rtt_ms)
}

/// The most time behind schedule a run of `interval_ms` on `profile` may have, in all and in
/// one spell (see [`BEHIND_MAX_SHARE`], [`BEHIND_SPELL_MAX_RTT`]).
pub fn behind_bounds_ms(interval_ms: f64, profile: &Profile) -> (f64, f64) {
    (
        (BEHIND_MAX_SHARE * interval_ms).max(BEHIND_MIN_MS),
        (BEHIND_SPELL_MAX_RTT * profile.rtt_ms).max(BEHIND_MIN_MS),
    )
}

/// The emulator's lateness is a fault only when material; late releases that were not are a
/// note.
fn check_behind(
    way: Way,
    s: &DirectionStats,
    profile: &Profile,
    interval_ms: f64,
    faults: &mut Vec<LinkFault>,
    notes: &mut Vec<String>,
) {
    let (max_ms, max_spell_ms) = behind_bounds_ms(interval_ms, profile);
    let b = s.behind;
    if b.ms > max_ms || b.longest_ms > max_spell_ms {
        faults.push(LinkFault::BehindSchedule {
            way,
            behind_ms: b.ms,
            longest_ms: b.longest_ms,
            interval_ms,
            max_ms,
            max_spell_ms,
        });
    } else if s.lateness.count > 0 && s.lateness.p99_us > LATENESS_P99_NOTE_US {
        notes.push(format!(
            "{way}: release lateness p99 {:.0} µs (max {:.0} µs), but the emulator was behind its schedule for only {:.1} ms of {interval_ms:.0} ms (longest spell {:.1} ms): not material",
            s.lateness.p99_us, s.lateness.max_us, b.ms, b.longest_ms
        ));
    }
}

fn check_direction(
    way: Way,
    s: &DirectionStats,
    profile: &Profile,
    rate: Option<f64>,
    interval_ms: f64,
    faults: &mut Vec<LinkFault>,
    notes: &mut Vec<String>,
) -> DirectionCheck {
    let configured_delay_ms = profile.one_way_ms();
    let delay_error_ms = s.lateness.mean_us / 1e3;
    check_behind(way, s, profile, interval_ms, faults, notes);
    if s.mean_fifo_hold_ms > FIFO_HOLD_NOTE_MS {
        let why = match profile.jitter_model {
            JitterModel::Fifo => {
                "the `fifo` jitter model holds packets behind slower draws before them"
            }
            _ => "the delay fell faster than packets arrived (a profile change mid-run)",
        };
        notes.push(format!(
            "{way}: keeping packet order added {:.2} ms to the mean delay ({} of {} packets held): {why}",
            s.mean_fifo_hold_ms, s.fifo_held, s.packets_out
        ));
    }
    let configured_loss = profile.loss_pct / 100.0;
    let trials = s.loss_trials();
    let (lo, hi) = binomial_interval(trials, configured_loss, LOSS_COVERAGE);
    let measured_loss_pct = pct(s.dropped_loss, trials);
    if trials > 0 && !(lo..=hi).contains(&s.dropped_loss) {
        faults.push(LinkFault::LossOutsideInterval {
            way,
            lost: s.dropped_loss,
            trials,
            low: lo,
            high: hi,
            configured_pct: profile.loss_pct,
        });
    }
    let achieved_rate_mbit = s.busy_rate_mbit().filter(|_| s.busy_s >= MIN_BUSY_S);
    // A trace's rate varies: judge against what it offered in the saturated periods.
    let offered_rate_mbit = s.busy_offered_mbit.filter(|_| achieved_rate_mbit.is_some());
    let want = match (rate, offered_rate_mbit) {
        (Some(_), Some(offered)) => Some(offered),
        (r, _) => r,
    };
    if let (Some(want), Some(got)) = (want, achieved_rate_mbit) {
        if (got / want - 1.0).abs() > RATE_TOLERANCE {
            faults.push(LinkFault::RateOff {
                way,
                achieved_mbit: got,
                configured_mbit: (want * 1000.0).round() / 1000.0,
            });
        }
    }
    if s.tun_tx_dropped > 0 {
        faults.push(LinkFault::TunDrops {
            way,
            dropped: s.tun_tx_dropped,
        });
    }
    if s.write_errors > 0 || s.read_errors > 0 || s.oversize > 0 {
        faults.push(LinkFault::IoErrors {
            way,
            read: s.read_errors,
            write: s.write_errors,
            oversize: s.oversize,
        });
    }
    DirectionCheck {
        configured_delay_ms,
        model_delay_ms: s.mean_intended_ms,
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
        offered_rate_mbit,
        saturated_s: s.busy_s,
        aqm: (rate.is_some()).then(|| profile.aqm.name().to_string()),
        queue_delay: s.queue_delay,
        dropped_aqm: s.dropped_aqm,
        dropped_queue: s.dropped_queue,
        outage_s: s.outage_s,
        dropped_outage: s.dropped_outage,
    }
}

fn pct(count: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        100.0 * count as f64 / n as f64
    }
}

/// The central interval `[lo, hi]` holding `coverage` (e.g. 0.999) of the number of losses
/// among `n` packets with loss probability `p`: exact binomial quantiles (the smallest k with
/// CDF(k) ≥ (1 − coverage)/2 and ≥ (1 + coverage)/2, as scipy's `binom.ppf`). The pmf is summed
/// in log space over mean ± 12 sd, where all but a negligible mass lies, so large `n` neither
/// underflows nor costs O(n).
pub fn binomial_interval(n: u64, p: f64, coverage: f64) -> (u64, u64) {
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
    (
        quantile((1.0 - coverage) / 2.0),
        quantile((1.0 + coverage) / 2.0),
    )
}

impl SelfCheck {
    /// One line per fault, for records and messages.
    pub fn fault_text(&self) -> String {
        self.faults
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// A few lines for the terminal.
    pub fn render(&self) -> String {
        let mut out = format!(
            "link self-check: profile {}, {:.1} s, emulator CPU {:.1} %, CPU steal {:.0} ms\n",
            self.profile, self.elapsed_s, self.emulator_cpu_pct, self.steal_ms
        );
        out.push_str(&format!(
            "  RTT {:.3} ms achieved, {:.3} ms intended by the model for these packets; the link offered {} (profile {:.3} ms)\n",
            self.achieved_rtt_ms,
            self.model_rtt_ms,
            self.offered_rtt_ms
                .map_or("—".to_string(), |o| format!("{o:.3} ms")),
            self.up.configured_delay_ms + self.down.configured_delay_ms
        ));
        for (label, d) in [("up  ", &self.up), ("down", &self.down)] {
            if d.lateness.count == 0 && d.loss_trials == 0 {
                out.push_str(&format!(
                    "  {label} no packets (delay {:.3} ms configured)\n",
                    d.configured_delay_ms
                ));
                continue;
            }
            out.push_str(&format!(
                "  {label} delay {:.3} ms configured, {:.3} ms intended, {:.3} ms achieved (lateness median {:.0} µs, p99 {:.0} µs, max {:.0} µs; order hold {:.3} ms)\n",
                d.configured_delay_ms,
                d.model_delay_ms,
                d.achieved_delay_ms,
                d.lateness.median_us,
                d.lateness.p99_us,
                d.lateness.max_us,
                d.fifo_hold_ms
            ));
            out.push_str(&format!(
                "       loss {:.3} % of {} packets (configured {} %, {} % interval {:.3}–{:.3} %)",
                d.measured_loss_pct,
                d.loss_trials,
                d.configured_loss_pct,
                LOSS_COVERAGE * 100.0,
                d.loss_low_pct,
                d.loss_high_pct
            ));
            if let Some(r) = d.configured_rate_mbit {
                match d.achieved_rate_mbit {
                    Some(a) => out.push_str(&format!(
                        "; rate {a:.3} of {} Mbit/s while saturated ({:.1} s)",
                        d.offered_rate_mbit
                            .map_or(format!("{r}"), |o| format!("{o:.3} offered")),
                        d.saturated_s
                    )),
                    None => out.push_str(&format!(
                        "; rate {r} Mbit/s (not saturated long enough to measure)"
                    )),
                }
            }
            out.push('\n');
            if let (Some(aqm), Some(q)) = (&d.aqm, &d.queue_delay) {
                out.push_str(&format!(
                    "       queue ({aqm}): delay median {:.1} ms, p99 {:.1} ms, max {:.1} ms; {} dropped by the AQM, {} by the limit\n",
                    q.median_us / 1e3,
                    q.p99_us / 1e3,
                    q.max_us / 1e3,
                    d.dropped_aqm,
                    d.dropped_queue
                ));
            }
            if d.outage_s > 0.0 {
                out.push_str(&format!(
                    "       outages: down {:.2} s, {} packets arrived during them and were dropped\n",
                    d.outage_s, d.dropped_outage
                ));
            }
        }
        for n in &self.notes {
            out.push_str(&format!("  note: {n}\n"));
        }
        for w in &self.warnings {
            out.push_str(&format!("  warning: {w}\n"));
        }
        if self.faults.is_empty() {
            out.push_str("  OK: the link delivered the profile\n");
        } else {
            for f in &self.faults {
                out.push_str(&format!("  FAULT: {f}\n"));
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
            mean_intended_ms: 20.0,
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
        // scipy.stats.binom.ppf(0.005 / 0.995, n, p) and (0.0005 / 0.9995, n, p).
        for (n, p, lo, hi, lo3, hi3) in [
            (20_000, 0.01, 165, 237, 155, 248),
            (20_000, 0.05, 921, 1080, 900, 1103),
            (137, 0.01, 0, 5, 0, 6),
            (3, 0.05, 0, 2, 0, 2),
            (1, 0.03, 0, 1, 0, 1),
            (5000, 0.03, 120, 182, 112, 191),
            (1_000_000, 0.05, 49_439, 50_562, 49_284, 50_719),
            (57, 0.05, 0, 8, 0, 9),
            (300, 0.05, 6, 25, 4, 29),
        ] {
            assert_eq!(binomial_interval(n, p, 0.99), (lo, hi), "n={n} p={p}");
            assert_eq!(binomial_interval(n, p, 0.999), (lo3, hi3), "n={n} p={p}");
        }
    }

    #[test]
    fn binomial_interval_edges() {
        assert_eq!(binomial_interval(100, 0.0, LOSS_COVERAGE), (0, 0));
        assert_eq!(binomial_interval(0, 0.5, LOSS_COVERAGE), (0, 0));
        assert_eq!(binomial_interval(10, 1.0, LOSS_COVERAGE), (10, 10));
    }

    #[test]
    fn quiet_run_is_ok() {
        let p = Profile::simple("x", 40.0, 0.0, 0.0);
        let c = self_check(&stats(quiet_stats(1000), quiet_stats(1000)), &p);
        assert!(c.ok, "{:?}", c.faults);
        assert_eq!(c.up.configured_delay_ms, 20.0);
        assert!((c.up.delay_error_ms - 0.02).abs() < 1e-9);
        assert!((c.model_rtt_ms - 40.0).abs() < 1e-9);
        assert!((c.achieved_rtt_ms - 40.04).abs() < 1e-9);
        assert!(c.render().contains("OK"));
    }

    #[test]
    fn every_kind_of_drift_is_a_fault() {
        let p = Profile::simple("x", 40.0, 5.0, 1.0);
        let mut up = quiet_stats(20_000);
        up.dropped_loss = 300; // 1.5 %: outside [155, 248]
        up.lateness.p99_us = 2500.0;
        up.behind = crate::link::behind::BehindSummary {
            ms: 150.0,
            longest_ms: 4.0,
            spells: 40,
        };
        up.tun_tx_dropped = 12;
        up.write_errors = 1;
        let mut down = quiet_stats(20_000);
        down.dropped_loss = 200;
        let mut s = stats(up, down);
        s.steal_pct = 5.0;
        s.steal_ms = 1000.0;
        let c = self_check(&s, &p);
        assert!(!c.ok);
        let kinds: Vec<&str> = c
            .faults
            .iter()
            .map(|f| match f {
                LinkFault::BehindSchedule { way: Way::Up, .. } => "late",
                LinkFault::LossOutsideInterval { way: Way::Up, .. } => "loss",
                LinkFault::TunDrops { way: Way::Up, .. } => "tun",
                LinkFault::IoErrors { way: Way::Up, .. } => "io",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["late", "loss", "tun", "io"], "{:?}", c.faults);
        let text = c.fault_text();
        for needle in [
            "outside the 99.9 %",
            "behind its schedule for 150.0 ms of 10000 ms (at most 100.0 ms)",
            "TUN queue",
            "write errors",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in {text}");
        }
        // Steal is reported, not a fault by itself: its effects are what the checks see.
        assert!(c.warnings[0].contains("steal"), "{:?}", c.warnings);
        assert!((c.up.measured_loss_pct - 1.5).abs() < 1e-9);
    }

    #[test]
    fn lateness_is_a_fault_only_when_the_emulator_was_behind_long_enough_to_matter() {
        let p = Profile::simple("x", 40.0, 0.0, 0.0);
        // A 10 s interval: at most 100 ms behind in all, 10 ms (a quarter RTT) in one spell.
        assert_eq!(behind_bounds_ms(10_000.0, &p), (100.0, 10.0));
        assert_eq!(
            behind_bounds_ms(50.0, &Profile::simple("y", 0.0, 0.0, 0.0)),
            (1.0, 1.0)
        );
        let run = |ms: f64, longest_ms: f64, p99_us: f64| {
            let mut down = quiet_stats(20_000);
            down.lateness.p99_us = p99_us;
            down.behind = crate::link::behind::BehindSummary {
                ms,
                longest_ms,
                spells: 3,
            };
            self_check(&stats(quiet_stats(1000), down), &p)
        };
        // p99 of 3 ms (the old gate's fault), 12 ms behind in 10 s: not material, a note.
        let c = run(12.0, 5.0, 3000.0);
        assert!(c.ok, "{:?}", c.faults);
        assert!(c.notes[0].contains("not material"), "{:?}", c.notes);
        // Behind for 2 % of the interval, or one spell of 15 ms at 40 ms RTT: faults.
        for (ms, longest) in [(200.0, 5.0), (15.0, 15.0)] {
            let c = run(ms, longest, 3000.0);
            assert!(
                matches!(
                    c.faults[..],
                    [LinkFault::BehindSchedule { way: Way::Down, .. }]
                ),
                "{ms} {longest}: {:?}",
                c.faults
            );
        }
    }

    #[test]
    fn achieved_rtt_must_match_the_models_within_half_a_ms_or_one_percent() {
        let p = Profile::simple("x", 40.0, 5.0, 0.0);
        let run = |up_ms: f64, down_ms: f64| {
            let mut up = quiet_stats(1000);
            up.mean_intended_ms = 21.0;
            up.mean_delay_ms = up_ms;
            let mut down = quiet_stats(1000);
            down.mean_intended_ms = 19.5;
            down.mean_delay_ms = down_ms;
            self_check(&stats(up, down), &p)
        };
        // Model RTT 40.5 ms: tolerance max(0.5, 0.405) = 0.5 ms.
        assert!(run(21.2, 19.7).ok);
        let c = run(21.4, 19.7);
        assert!(
            matches!(
                c.faults[..],
                [LinkFault::DelayMismatch { tolerance_ms, .. }] if tolerance_ms == 0.5
            ),
            "{:?}",
            c.faults
        );
        assert!((c.achieved_rtt_ms - 41.1).abs() < 1e-9);
        assert_eq!(rtt_tolerance_ms(150.0), 1.5);
    }

    #[test]
    fn fifo_skew_is_a_note_not_a_fault() {
        let p = Profile {
            jitter_model: JitterModel::Fifo,
            ..Profile::simple("x", 40.0, 5.0, 0.0)
        };
        let mut up = quiet_stats(1000);
        up.mean_fifo_hold_ms = 1.2;
        up.fifo_held = 700;
        up.mean_intended_ms = 21.2;
        up.mean_delay_ms = 21.22;
        let c = self_check(&stats(up, quiet_stats(1000)), &p);
        assert!(c.ok, "{:?}", c.faults);
        assert!(c.notes[0].contains("`fifo` jitter model"), "{:?}", c.notes);
    }

    #[test]
    fn a_stopped_emulator_is_a_fault() {
        let c = stopped_check(&Profile::simple("x", 40.0, 0.0, 0.0), "gone".into());
        assert!(!c.ok);
        assert_eq!(c.fault_text(), "the emulator stopped: gone");
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
            c.fault_text().contains("configured 10 Mbit/s"),
            "{:?}",
            c.faults
        );
    }

    #[test]
    fn a_trace_is_judged_against_what_it_offered_while_saturated() {
        let mut p = Profile::simple("x", 40.0, 0.0, 0.0);
        let mut trace =
            crate::config::profile::TraceFile::unresolved("traces/TMobile-LTE-short.down");
        trace
            .resolve(crate::config::profile::TraceBase::BuiltIn)
            .unwrap();
        p.down_trace = Some(trace);
        p.queue_packets = Some(1000);
        let mut down = quiet_stats(1000);
        down.busy_s = 2.0;
        down.busy_bytes = 6_000_000; // 24 Mbit/s: far from the 16.7 mean…
        down.busy_offered_mbit = Some(24.5); // …but what the trace offered then
        let c = self_check(&stats(quiet_stats(10), down.clone()), &p);
        assert!(c.ok, "{:?}", c.faults);
        assert_eq!(c.down.configured_rate_mbit, Some(16.703));
        assert_eq!(c.down.offered_rate_mbit, Some(24.5));
        down.busy_offered_mbit = Some(27.0); // 11 % short of it
        let c = self_check(&stats(quiet_stats(10), down), &p);
        assert!(
            c.fault_text().contains("configured 27 Mbit/s"),
            "{:?}",
            c.faults
        );
    }

    #[test]
    fn events_must_start_at_the_run_s_mark_and_queues_are_reported() {
        let mut p = Profile::simple("x", 40.0, 0.0, 0.0);
        p.outages = vec![[1.0, 0.5]];
        let mut s = stats(quiet_stats(10), quiet_stats(10));
        s.events = Some(LinkEvents {
            timeline_offset_ms: 0.2,
            outages_ms: vec![[1000.0, 1500.0]],
            ..LinkEvents::default()
        });
        s.down.outage_s = 0.5;
        s.down.dropped_outage = 12;
        let c = self_check(&s, &p);
        assert!(c.ok, "{:?}", c.faults);
        assert!(
            c.render().contains("down 0.50 s, 12 packets"),
            "{}",
            c.render()
        );
        s.events.as_mut().unwrap().timeline_offset_ms = 250.0;
        let c = self_check(&s, &p);
        assert!(
            matches!(c.faults[..], [LinkFault::EventsOffMark { .. }]),
            "{:?}",
            c.faults
        );
        // A queue discipline's delays are in the render.
        let mut p = Profile::simple("x", 40.0, 0.0, 0.0);
        p.down_mbit = Some(10.0);
        p.queue_packets = Some(100);
        p.aqm = crate::config::profile::Aqm::Codel;
        let mut down = quiet_stats(100);
        down.queue_delay = Some(LatencySummary {
            count: 100,
            mean_us: 4000.0,
            median_us: 3500.0,
            p99_us: 9000.0,
            max_us: 12000.0,
        });
        down.dropped_aqm = 3;
        let c = self_check(&stats(quiet_stats(10), down), &p);
        assert!(
            c.render().contains("queue (codel): delay median 3.5 ms"),
            "{}",
            c.render()
        );
    }
}
