//! Network profiles: what a link looks like (RTT, jitter, loss, optional rate and queue),
//! from the shipped `profiles/*.toml` (compiled into the binary, so it works from any
//! directory), a `--profiles-dir` or user files, validated with errors that name the file.
//!
//! Real networks (see `docs/profiles.md`): a recorded capacity per direction
//! (`down_trace`/`up_trace`, mahimahi format, paths relative to the profile file), the rate
//! limiter's queue discipline (`aqm`), outages (scheduled and a random on/off process), NAT
//! rebinding, competing traffic and an extra delay per server address. Times of events are
//! seconds from the run's mark (the start of the measured navigation).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::config::trace_file::{TraceBase, TraceFile};

/// The six profiles of the published study, in its order. `--profiles all` means exactly these.
pub const STUDY_PROFILES: [&str; 6] = [
    "datacenter",
    "wired",
    "intercontinental",
    "mobile",
    "bad-mobile",
    "cell-edge",
];

/// One network profile as written in a TOML file. All delays are per the whole round trip
/// (`rtt_ms`) or per direction (`jitter_ms`, `loss_pct`), as in the study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Round-trip time; each direction gets half of it.
    pub rtt_ms: f64,
    /// One-way delay varies within ±jitter_ms (per direction), as `jitter_model` says.
    #[serde(default)]
    pub jitter_ms: f64,
    /// How the delay varies: `varying` (default: a delay that changes smoothly over time, keeps
    /// order and the mean), `fifo` (an independent draw per packet, held behind the packet
    /// before it: raises the mean at high packet rates) or `reorder` (independent draws that
    /// may overtake each other, as Linux netem).
    #[serde(default)]
    pub jitter_model: JitterModel,
    /// Coherence time of the `varying` model: how long the delay takes to move from one random
    /// level to the next (default: one RTT, at least π × jitter_ms so packets never reorder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_coherence_ms: Option<f64>,
    /// Independent random loss per direction, in percent.
    #[serde(default)]
    pub loss_pct: f64,
    /// Server → client rate limit in Mbit/s (absent: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_mbit: Option<f64>,
    /// Client → server rate limit in Mbit/s (absent: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_mbit: Option<f64>,
    /// Drop-tail queue in front of a rate limit, in packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<u32>,
    /// Drop-tail queue in front of a rate limit, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_bytes: Option<u64>,
    /// Server → client capacity from a recorded trace (mahimahi format; instead of `down_mbit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_trace: Option<TraceFile>,
    /// Client → server capacity from a recorded trace (instead of `up_mbit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_trace: Option<TraceFile>,
    /// Queue discipline in front of a rate limit or trace.
    #[serde(default, skip_serializing_if = "Aqm::is_droptail")]
    pub aqm: Aqm,
    /// CoDel's target standing queue delay (RFC 8289: 5 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codel_target_ms: Option<f64>,
    /// CoDel's interval (RFC 8289: 100 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codel_interval_ms: Option<f64>,
    /// FQ-CoDel's DRR quantum in bytes (RFC 8290: 1514).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fq_quantum_bytes: Option<u32>,
    /// Scheduled outages, both directions: `[[start_s, duration_s], …]` from the run's mark.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outages: Vec<[f64; 2]>,
    /// A random on/off process: exponential on and off periods with these means (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_off: Option<OnOff>,
    /// What happens to packets during an outage: `drop` (default) or `hold` (queued until the
    /// link is back, within the queue limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage_mode: Option<OutageMode>,
    /// At this time (seconds from the mark) the client's NAT maps its ports anew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat_rebind_at_s: Option<f64>,
    /// Competing flows through the bottleneck, started by pagebench.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_traffic: Option<CrossTraffic>,
    /// Extra one-way delay per server address, in the order the testbed gives them (its own
    /// address first, then one per extra origin address).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origin_delay_ms: Vec<f64>,
    /// The round trip to the resolver (`--dns resolver`), ms; default: the profile's round
    /// trip. Never nearer than it: the resolver sits behind the same link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver_rtt_ms: Option<f64>,
}

/// The queue discipline of the rate limiter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aqm {
    /// One FIFO queue; arrivals beyond its limit are dropped.
    #[default]
    Droptail,
    /// One FIFO queue managed by CoDel (RFC 8289): drops at dequeue while the standing queue
    /// delay stays above `codel_target_ms` for an `codel_interval_ms`.
    Codel,
    /// A CoDel queue per flow (5-tuple), served by deficit round robin (RFC 8290).
    FqCodel,
}

impl Aqm {
    pub fn name(self) -> &'static str {
        match self {
            Aqm::Droptail => "droptail",
            Aqm::Codel => "codel",
            Aqm::FqCodel => "fq_codel",
        }
    }

    pub fn is_droptail(&self) -> bool {
        *self == Aqm::Droptail
    }
}

/// CoDel's and FQ-CoDel's standard parameters (RFC 8289, RFC 8290).
pub const CODEL_TARGET_MS: f64 = 5.0;
pub const CODEL_INTERVAL_MS: f64 = 100.0;
pub const FQ_QUANTUM_BYTES: u32 = 1514;

/// The random on/off process of `on_off`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnOff {
    pub mean_on_s: f64,
    pub mean_off_s: f64,
}

/// What an outage does to packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutageMode {
    /// A blackout: packets entering the link during it are lost.
    #[default]
    Drop,
    /// A handover that buffers: packets wait in the queue until the link is back.
    Hold,
}

/// Competing flows (`cross_traffic`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossTraffic {
    pub flows: u32,
    pub protocol: CrossProtocol,
    /// Per flow, for `udp-cbr` (TCP flows take what congestion control gives them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<f64>,
    /// `down` (default): sender in the server namespace, sink in the client's; `up`: reversed.
    #[serde(default)]
    pub direction: CrossDirection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrossProtocol {
    /// Bulk TCP (cubic), as fast as the link lets it.
    Tcp,
    /// UDP at a constant bit rate.
    UdpCbr,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CrossDirection {
    #[default]
    Down,
    Up,
}

/// How jitter turns into per-packet delays (see `link::jitter` and `link::model`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JitterModel {
    /// The delay varies smoothly over time: packets close together see nearly the same delay,
    /// never reorder, and the mean delay is the profile's at any packet rate.
    #[default]
    Varying,
    /// An independent uniform draw per packet, held back behind the packet before it (the
    /// emulator's behaviour before `varying`): the mean delay grows with the packet rate.
    Fifo,
    /// An independent uniform draw per packet that may overtake others (Linux netem).
    Reorder,
}

impl JitterModel {
    pub fn name(self) -> &'static str {
        match self {
            JitterModel::Varying => "varying",
            JitterModel::Fifo => "fifo",
            JitterModel::Reorder => "reorder",
        }
    }
}

/// The queue a rate or trace gets when the profile names none: 1000 packets, the default
/// `limit` of `tc netem` and Linux's default `txqueuelen`, so a profile with only a rate
/// behaves as `tc qdisc … netem rate R` would.
pub const DEFAULT_QUEUE_PACKETS: u32 = 1000;

/// Which queue limit applies in front of a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueLimit {
    Packets(u32),
    Bytes(u64),
}

impl Profile {
    /// A plain profile without rate limit, for tests and the API.
    pub fn simple(name: &str, rtt_ms: f64, jitter_ms: f64, loss_pct: f64) -> Profile {
        Profile {
            name: name.to_string(),
            description: String::new(),
            rtt_ms,
            jitter_ms,
            loss_pct,
            down_mbit: None,
            up_mbit: None,
            queue_packets: None,
            queue_bytes: None,
            jitter_model: JitterModel::Varying,
            jitter_coherence_ms: None,
            down_trace: None,
            up_trace: None,
            aqm: Aqm::Droptail,
            codel_target_ms: None,
            codel_interval_ms: None,
            fq_quantum_bytes: None,
            outages: Vec::new(),
            on_off: None,
            outage_mode: None,
            nat_rebind_at_s: None,
            cross_traffic: None,
            origin_delay_ms: Vec::new(),
            resolver_rtt_ms: None,
        }
    }

    /// Reads the profile's traces (see [`TraceFile::resolve`]); the error names the field.
    pub fn resolve_traces(&mut self, base: TraceBase) -> Result<(), String> {
        for (field, t) in [
            ("down_trace", &mut self.down_trace),
            ("up_trace", &mut self.up_trace),
        ] {
            if let Some(t) = t {
                t.resolve(base)
                    .map_err(|e| format!("field `{field}`: {e}"))?;
            }
        }
        Ok(())
    }

    /// Whether a direction has a bottleneck (a rate or a trace).
    pub fn has_bottleneck(&self) -> bool {
        self.down_mbit.is_some()
            || self.up_mbit.is_some()
            || self.down_trace.is_some()
            || self.up_trace.is_some()
    }

    /// Whether the profile has outages (scheduled or random).
    pub fn has_outages(&self) -> bool {
        !self.outages.is_empty() || self.on_off.is_some()
    }

    /// CoDel's target, ms (the RFC's 5 ms unless set).
    pub fn codel_target(&self) -> f64 {
        self.codel_target_ms.unwrap_or(CODEL_TARGET_MS)
    }

    /// CoDel's interval, ms (the RFC's 100 ms unless set).
    pub fn codel_interval(&self) -> f64 {
        self.codel_interval_ms.unwrap_or(CODEL_INTERVAL_MS)
    }

    /// Knot interval of the `varying` jitter model, ms: `jitter_coherence_ms`, or one RTT but
    /// at least π × jitter (the slope bound that keeps packets in order).
    pub fn jitter_interval_ms(&self) -> f64 {
        self.jitter_coherence_ms
            .unwrap_or_else(|| self.rtt_ms.max(std::f64::consts::PI * self.jitter_ms))
    }

    /// One-way delay of each direction, in milliseconds.
    pub fn one_way_ms(&self) -> f64 {
        self.rtt_ms / 2.0
    }

    /// The smallest round trip the link can produce (`RTT − 2 × jitter`), in milliseconds.
    pub fn min_rtt_ms(&self) -> f64 {
        (self.rtt_ms - 2.0 * self.jitter_ms).max(0.0)
    }

    /// The queue in front of the rate limits: the profile's, or [`DEFAULT_QUEUE_PACKETS`] when
    /// it has a bottleneck and names none (None without a bottleneck).
    pub fn queue_limit(&self) -> Option<QueueLimit> {
        if let Some(p) = self.queue_packets {
            return Some(QueueLimit::Packets(p));
        }
        if let Some(b) = self.queue_bytes {
            return Some(QueueLimit::Bytes(b));
        }
        self.has_bottleneck()
            .then_some(QueueLimit::Packets(DEFAULT_QUEUE_PACKETS))
    }

    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("field `name` is empty: give the profile a name".into());
        }
        if !self
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "field `name` = {:?}: use only letters, digits, '-' and '_'",
                self.name
            ));
        }
        check_finite("rtt_ms", self.rtt_ms)?;
        check_finite("jitter_ms", self.jitter_ms)?;
        check_finite("loss_pct", self.loss_pct)?;
        if self.rtt_ms < 0.0 {
            return Err(format!(
                "field `rtt_ms` = {}: a round-trip time cannot be negative",
                self.rtt_ms
            ));
        }
        if self.rtt_ms > 60_000.0 {
            return Err(format!(
                "field `rtt_ms` = {}: at most 60000 ms",
                self.rtt_ms
            ));
        }
        if self.jitter_ms < 0.0 {
            return Err(format!(
                "field `jitter_ms` = {}: jitter cannot be negative",
                self.jitter_ms
            ));
        }
        if self.jitter_ms > self.one_way_ms() {
            return Err(format!(
                "field `jitter_ms` = {}: at most half of rtt_ms ({}), or one-way delays would be negative",
                self.jitter_ms,
                self.one_way_ms()
            ));
        }
        if let Some(c) = self.jitter_coherence_ms {
            check_finite("jitter_coherence_ms", c)?;
            if self.jitter_model != JitterModel::Varying {
                return Err(format!(
                    "field `jitter_coherence_ms` applies to jitter_model = \"varying\" only, not {:?}: remove it",
                    self.jitter_model.name()
                ));
            }
            let min = std::f64::consts::PI * self.jitter_ms;
            if c <= 0.0 || c < min {
                return Err(format!(
                    "field `jitter_coherence_ms` = {c}: at least π × jitter_ms = {min:.1} ms, or a falling delay would let packets overtake each other"
                ));
            }
        }
        if !(0.0..=100.0).contains(&self.loss_pct) {
            return Err(format!(
                "field `loss_pct` = {}: loss is a percentage between 0 and 100",
                self.loss_pct
            ));
        }
        self.validate_capacity()?;
        self.validate_real_network()
    }

    /// Each direction's capacity, a rate or a trace, and the queue in front of it.
    fn validate_capacity(&self) -> Result<(), String> {
        for (field, rate) in [("down_mbit", self.down_mbit), ("up_mbit", self.up_mbit)] {
            if let Some(r) = rate {
                check_finite(field, r)?;
                if r <= 0.0 {
                    return Err(format!(
                        "field `{field}` = {r}: a rate must be above 0 Mbit/s (leave it out for no limit)"
                    ));
                }
            }
        }
        if self.queue_packets.is_some() && self.queue_bytes.is_some() {
            return Err("fields `queue_packets` and `queue_bytes` both set: choose one".into());
        }
        if self.queue_packets == Some(0) || self.queue_bytes == Some(0) {
            return Err("queue size 0 would drop every packet: give at least 1".into());
        }
        for (field, trace, rate, rate_field) in [
            ("down_trace", &self.down_trace, self.down_mbit, "down_mbit"),
            ("up_trace", &self.up_trace, self.up_mbit, "up_mbit"),
        ] {
            if let Some(t) = trace {
                if rate.is_some() {
                    return Err(format!(
                        "field `{field}` = {:?} and `{rate_field}` both set: a direction's capacity is a rate or a trace, remove one",
                        t.path
                    ));
                }
                if t.trace().is_none() {
                    return Err(format!(
                        "field `{field}` = {:?}: the trace was not read (load the profile from its file)",
                        t.path
                    ));
                }
            }
        }
        let has_rate = self.has_bottleneck();
        let has_queue = self.queue_packets.is_some() || self.queue_bytes.is_some();
        if has_queue && !has_rate {
            return Err(
                "a queue size without `down_mbit`, `up_mbit` or a trace has no effect: set a rate or remove the queue"
                    .into(),
            );
        }
        Ok(())
    }

    /// The real-network fields: queue discipline, outages, NAT rebinding, cross traffic,
    /// per-origin delay.
    fn validate_real_network(&self) -> Result<(), String> {
        self.validate_queue_discipline()?;
        self.validate_outages()?;
        if let Some(t) = self.nat_rebind_at_s {
            if !t.is_finite() || t < 0.0 {
                return Err(format!(
                    "field `nat_rebind_at_s` = {t}: give seconds ≥ 0 from the run's mark"
                ));
            }
        }
        self.validate_cross_traffic()?;
        if self.origin_delay_ms.len() > 1 + 62_500 {
            return Err("field `origin_delay_ms`: more entries than server addresses".into());
        }
        if let Some(r) = self.resolver_rtt_ms {
            if !r.is_finite() || r < self.rtt_ms || r > 60_000.0 {
                return Err(format!(
                    "field `resolver_rtt_ms` = {r}: give the resolver's round trip in ms, from the profile's rtt_ms ({}) to 60000 (the resolver sits behind the link)",
                    self.rtt_ms
                ));
            }
        }
        for (i, d) in self.origin_delay_ms.iter().enumerate() {
            if !d.is_finite() || *d < 0.0 || *d > 60_000.0 {
                return Err(format!(
                    "field `origin_delay_ms` entry {} = {d}: give 0 to 60000 ms of extra one-way delay",
                    i + 1
                ));
            }
        }
        Ok(())
    }

    /// The extra one-way delay that puts the resolver at its round trip.
    pub fn resolver_delay_ms(&self) -> f64 {
        self.resolver_rtt_ms
            .map_or(0.0, |r| ((r - self.rtt_ms) / 2.0).max(0.0))
    }

    /// The resolver's round trip: its own, or the profile's.
    pub fn resolver_rtt(&self) -> f64 {
        self.resolver_rtt_ms.unwrap_or(self.rtt_ms).max(self.rtt_ms)
    }

    /// `aqm` and its parameters: a discipline needs a bottleneck to queue at, CoDel's times and
    /// FQ-CoDel's quantum apply only to the disciplines they tune, and the target is below the
    /// interval.
    fn validate_queue_discipline(&self) -> Result<(), String> {
        if self.aqm != Aqm::Droptail && !self.has_bottleneck() {
            return Err(format!(
                "field `aqm` = {:?}: a queue discipline needs a bottleneck; set `down_mbit`/`up_mbit` or a trace, or remove `aqm`",
                self.aqm.name()
            ));
        }
        for (field, v) in [
            ("codel_target_ms", self.codel_target_ms),
            ("codel_interval_ms", self.codel_interval_ms),
        ] {
            if let Some(v) = v {
                check_finite(field, v)?;
                if self.aqm == Aqm::Droptail {
                    return Err(format!(
                        "field `{field}` applies to aqm = \"codel\" or \"fq_codel\": set `aqm` or remove it"
                    ));
                }
                if v <= 0.0 || v > 10_000.0 {
                    return Err(format!(
                        "field `{field}` = {v}: give a time above 0 and at most 10000 ms"
                    ));
                }
            }
        }
        if self.codel_target() >= self.codel_interval() {
            return Err(format!(
                "field `codel_target_ms` = {}: must be below `codel_interval_ms` ({}); RFC 8289 uses 5 and 100",
                self.codel_target(),
                self.codel_interval()
            ));
        }
        if let Some(q) = self.fq_quantum_bytes {
            if self.aqm != Aqm::FqCodel {
                return Err(
                    "field `fq_quantum_bytes` applies to aqm = \"fq_codel\" only: set it or remove the field"
                        .into(),
                );
            }
            if !(64..=65_536).contains(&q) {
                return Err(format!(
                    "field `fq_quantum_bytes` = {q}: give 64 to 65536 bytes (RFC 8290: 1514)"
                ));
            }
        }
        Ok(())
    }

    /// Scheduled outages (in time order, without overlaps), random ones (`on_off`) and what
    /// either does to packets (`outage_mode`, which needs one of them).
    fn validate_outages(&self) -> Result<(), String> {
        let mut last_end = 0.0f64;
        for (i, [start, dur]) in self.outages.iter().enumerate() {
            check_finite("outages", *start)?;
            check_finite("outages", *dur)?;
            if *start < 0.0 || *dur <= 0.0 {
                return Err(format!(
                    "field `outages` entry {} = [{start}, {dur}]: give [start_s ≥ 0, duration_s > 0] from the run's mark",
                    i + 1
                ));
            }
            if *start < last_end {
                return Err(format!(
                    "field `outages` entry {} starts at {start} s, before the one before it ends ({last_end} s): list outages in time order without overlaps",
                    i + 1
                ));
            }
            last_end = start + dur;
        }
        if let Some(o) = &self.on_off {
            for (name, v) in [("mean_on_s", o.mean_on_s), ("mean_off_s", o.mean_off_s)] {
                if !v.is_finite() || v <= 0.0 {
                    return Err(format!(
                        "field `on_off.{name}` = {v}: give a mean duration above 0 seconds"
                    ));
                }
            }
        }
        if self.outage_mode.is_some() && !self.has_outages() {
            return Err(
                "field `outage_mode` without `outages` or `on_off` has no effect: add an outage or remove it"
                    .into(),
            );
        }
        Ok(())
    }

    /// The competing flows: how many, and a rate for UDP flows only (TCP's congestion control
    /// sets its own).
    fn validate_cross_traffic(&self) -> Result<(), String> {
        if let Some(c) = &self.cross_traffic {
            if !(1..=64).contains(&c.flows) {
                return Err(format!(
                    "field `cross_traffic.flows` = {}: give 1 to 64 flows (remove `cross_traffic` for none)",
                    c.flows
                ));
            }
            match (c.protocol, c.rate_mbit) {
                (CrossProtocol::UdpCbr, None) => {
                    return Err(
                        "field `cross_traffic.rate_mbit` is missing: a \"udp-cbr\" flow needs its rate (Mbit/s per flow)"
                            .into(),
                    )
                }
                (CrossProtocol::UdpCbr, Some(r)) if !r.is_finite() || r <= 0.0 || r > 1000.0 => {
                    return Err(format!(
                        "field `cross_traffic.rate_mbit` = {r}: give above 0 and at most 1000 Mbit/s per flow"
                    ))
                }
                (CrossProtocol::Tcp, Some(_)) => {
                    return Err(
                        "field `cross_traffic.rate_mbit` does not apply to \"tcp\" flows (their congestion control sets the rate): remove it or use \"udp-cbr\""
                            .into(),
                    )
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Short one-line form for logs and tables.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "RTT {} ms ±{} ms, loss {} %",
            fmt_num(self.rtt_ms),
            fmt_num(self.jitter_ms),
            fmt_num(self.loss_pct)
        );
        if self.jitter_ms > 0.0 && self.jitter_model != JitterModel::Varying {
            s.push_str(&format!(" ({} jitter)", self.jitter_model.name()));
        }
        if self.has_bottleneck() {
            s.push_str(&format!(
                ", {}/{} Mbit/s",
                self.rate_label(true),
                self.rate_label(false)
            ));
            if self.aqm != Aqm::Droptail {
                s.push_str(&format!(" {}", self.aqm.name()));
            }
        }
        if !self.outages.is_empty() {
            s.push_str(&format!(", {} outage(s)", self.outages.len()));
        }
        if let Some(o) = &self.on_off {
            s.push_str(&format!(
                ", on/off {}/{} s",
                fmt_num(o.mean_on_s),
                fmt_num(o.mean_off_s)
            ));
        }
        if let Some(t) = self.nat_rebind_at_s {
            s.push_str(&format!(", NAT rebinding at {} s", fmt_num(t)));
        }
        if let Some(c) = &self.cross_traffic {
            s.push_str(&format!(
                ", {} competing {} flow(s)",
                c.flows,
                match c.protocol {
                    CrossProtocol::Tcp => "TCP",
                    CrossProtocol::UdpCbr => "UDP",
                }
            ));
        }
        s
    }

    /// A direction's capacity (`down`: server → client) for tables: its rate, `≈mean (trace)`
    /// or `∞`.
    pub fn rate_label(&self, down: bool) -> String {
        let (rate, trace) = if down {
            (self.down_mbit, &self.down_trace)
        } else {
            (self.up_mbit, &self.up_trace)
        };
        match (rate, trace) {
            (Some(r), _) => fmt_num(r),
            (None, Some(t)) => format!("≈{:.1} (trace)", t.mean_mbit),
            (None, None) => "∞".into(),
        }
    }
}

fn check_finite(field: &str, v: f64) -> Result<(), String> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!("field `{field}` = {v}: must be a finite number"))
    }
}

/// Formats a number without a trailing `.0`.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// An error about a profile, always naming where it came from.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("profile file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("profile file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("profile name {name:?} is defined twice: in {first} and in {second}; rename one")]
    Duplicate {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("unknown profile {name:?}: known profiles are {known} (or `all`, `extended`, `every`, or a path to a .toml file)")]
    Unknown { name: String, known: String },
    #[error(
        "{source_name} is missing profile {name:?}, which `all` needs (the six study profiles)"
    )]
    MissingStudy { source_name: String, name: String },
    #[error(
        "no profiles selected: give --profiles a name, a set (all, extended, every) or a path"
    )]
    Empty,
}

/// A profile together with the file it came from.
#[derive(Debug, Clone)]
pub struct LoadedProfile {
    pub profile: Profile,
    pub path: PathBuf,
}

/// Parses one TOML profile file's text; `path` names the file in errors, and its directory is
/// where relative trace paths are read from.
pub fn parse_profile(text: &str, path: &Path) -> Result<Profile, ProfileError> {
    let base = path.parent().unwrap_or(Path::new(""));
    parse_profile_in(text, path, TraceBase::Dir(base))
}

/// [`parse_profile`] with traces looked up in `base`.
pub fn parse_profile_in(text: &str, path: &Path, base: TraceBase) -> Result<Profile, ProfileError> {
    let mut profile: Profile = toml::from_str(text).map_err(|e| ProfileError::Parse {
        path: path.to_path_buf(),
        message: toml_error_message(text, &e),
    })?;
    profile
        .resolve_traces(base)
        .and_then(|()| profile.validate())
        .map_err(|message| ProfileError::Invalid {
            path: path.to_path_buf(),
            message: with_field_line(text, message),
        })?;
    Ok(profile)
}

/// Prefixes a validation message that names a field (`field `x`…`) with the line that sets it.
fn with_field_line(text: &str, message: String) -> String {
    let Some(rest) = message.strip_prefix("field `") else {
        return message;
    };
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let line = text.lines().position(|l| {
        let l = l.trim_start();
        l.strip_prefix(name.as_str()).is_some_and(|r| {
            let r = r.trim_start();
            r.starts_with('=') || r.starts_with('.')
        }) || l.starts_with(&format!("[{name}]"))
    });
    match line {
        Some(i) => format!("line {}: {message}", i + 1),
        None => message,
    }
}

/// Renders a TOML error as "line L, column C: message".
fn toml_error_message(text: &str, e: &toml::de::Error) -> String {
    let mut msg = e.message().trim().to_string();
    if msg.contains("unknown field `reorder`") {
        msg.push_str(
            " (`reorder = true` was replaced by `jitter_model = \"reorder\"`; the default is now \"varying\")",
        );
    }
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before
                .rsplit('\n')
                .next()
                .map(|l| l.chars().count())
                .unwrap_or(0)
                + 1;
            // Name the field the line sets when the message does not (a wrong value).
            let key = text
                .lines()
                .nth(line - 1)
                .and_then(|l| l.split_once('='))
                .map(|(k, _)| k.trim())
                .filter(|k| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
                .filter(|k| !msg.contains(&format!("`{k}`")));
            match key {
                Some(k) => format!("line {line}, column {col}, field `{k}`: {msg}"),
                None => format!("line {line}, column {col}: {msg}"),
            }
        }
        None => msg,
    }
}

/// Reads and validates one profile file.
pub fn load_profile_file(path: &Path) -> Result<LoadedProfile, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let profile = parse_profile(&text, path)?;
    Ok(LoadedProfile {
        profile,
        path: path.to_path_buf(),
    })
}

/// The shipped profiles as compiled in: (file name below `profiles/`, TOML text). A unit test
/// checks that this table is exactly the repository's `profiles/` directory.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("3g.toml", include_str!("../../profiles/3g.toml")),
    (
        "bad-mobile.toml",
        include_str!("../../profiles/bad-mobile.toml"),
    ),
    ("cable.toml", include_str!("../../profiles/cable.toml")),
    (
        "cell-edge.toml",
        include_str!("../../profiles/cell-edge.toml"),
    ),
    (
        "datacenter.toml",
        include_str!("../../profiles/datacenter.toml"),
    ),
    (
        "fast-100.toml",
        include_str!("../../profiles/fast-100.toml"),
    ),
    (
        "fast-1000.toml",
        include_str!("../../profiles/fast-1000.toml"),
    ),
    (
        "intercontinental.toml",
        include_str!("../../profiles/intercontinental.toml"),
    ),
    (
        "lte-tmobile-fq.toml",
        include_str!("../../profiles/lte-tmobile-fq.toml"),
    ),
    (
        "lte-tmobile.toml",
        include_str!("../../profiles/lte-tmobile.toml"),
    ),
    (
        "lte-verizon.toml",
        include_str!("../../profiles/lte-verizon.toml"),
    ),
    ("lte.toml", include_str!("../../profiles/lte.toml")),
    ("mobile.toml", include_str!("../../profiles/mobile.toml")),
    ("wired.toml", include_str!("../../profiles/wired.toml")),
];

/// Where profile names (and the sets `all`, `extended`, `every`) are looked up.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileSource {
    /// The `*.toml` files of a directory (`--profiles-dir`, or `profiles/` in a checkout).
    Dir(PathBuf),
    /// The shipped profiles compiled into the binary ([`BUILT_IN`]).
    BuiltIn,
    /// A fixed set of values, e.g. the profiles a results directory was made with.
    Listed(Vec<Profile>),
}

impl ProfileSource {
    /// What errors call this source.
    pub fn describe(&self) -> String {
        match self {
            ProfileSource::Dir(d) => format!("profile directory {}", d.display()),
            ProfileSource::BuiltIn => "the built-in profiles".into(),
            ProfileSource::Listed(_) => "the stored profile set".into(),
        }
    }

    /// Every profile of the source, by name; duplicate names are an error.
    pub fn load(&self) -> Result<BTreeMap<String, LoadedProfile>, ProfileError> {
        match self {
            ProfileSource::Dir(d) => load_dir(d),
            ProfileSource::BuiltIn => {
                let mut out = BTreeMap::new();
                for (file, text) in BUILT_IN {
                    // The built-in name keeps errors pointing at the file it was compiled from.
                    let path = Path::new("profiles").join(file);
                    let profile = parse_profile_in(text, &path, TraceBase::BuiltIn)?;
                    insert_unique(&mut out, LoadedProfile { profile, path })?;
                }
                Ok(out)
            }
            ProfileSource::Listed(list) => {
                let mut out = BTreeMap::new();
                for p in list {
                    let path = PathBuf::from(format!("stored profile {}", p.name));
                    let mut profile = p.clone();
                    // Stored profiles name where their traces were read from.
                    profile
                        .resolve_traces(TraceBase::BuiltIn)
                        .map_err(|message| ProfileError::Invalid {
                            path: path.clone(),
                            message,
                        })?;
                    insert_unique(&mut out, LoadedProfile { profile, path })?;
                }
                Ok(out)
            }
        }
    }
}

/// All profiles of a directory (`*.toml`), by name; duplicate names are an error.
pub fn load_dir(dir: &Path) -> Result<BTreeMap<String, LoadedProfile>, ProfileError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ProfileError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut out: BTreeMap<String, LoadedProfile> = BTreeMap::new();
    for path in paths {
        let loaded = load_profile_file(&path)?;
        insert_unique(&mut out, loaded)?;
    }
    Ok(out)
}

fn insert_unique(
    map: &mut BTreeMap<String, LoadedProfile>,
    loaded: LoadedProfile,
) -> Result<(), ProfileError> {
    if let Some(first) = map.get(&loaded.profile.name) {
        return Err(ProfileError::Duplicate {
            name: loaded.profile.name.clone(),
            first: first.path.clone(),
            second: loaded.path,
        });
    }
    map.insert(loaded.profile.name.clone(), loaded);
    Ok(())
}

/// Resolves a `--profiles` selection: comma-separated names, the sets `all` (the six study
/// profiles, in study order), `extended` (the rest of the directory), `every` (all of it), and
/// paths to TOML files. Order is kept; a profile named twice is an error.
pub fn select(spec: &str, dir: &Path) -> Result<Vec<Profile>, ProfileError> {
    select_from(spec, &ProfileSource::Dir(dir.to_path_buf()))
}

/// [`select`] with names looked up in `source`.
pub fn select_from(spec: &str, source: &ProfileSource) -> Result<Vec<Profile>, ProfileError> {
    let mut known: Option<BTreeMap<String, LoadedProfile>> = None;
    let mut chosen: Vec<LoadedProfile> = Vec::new();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let picked: Vec<LoadedProfile> = if item.ends_with(".toml") || item.contains('/') {
            vec![load_profile_file(Path::new(item))?]
        } else {
            if known.is_none() {
                known = Some(source.load()?);
            }
            let known = known.as_ref().expect("loaded above");
            match item {
                "all" | "study" => STUDY_PROFILES
                    .iter()
                    .map(|n| {
                        known
                            .get(*n)
                            .cloned()
                            .ok_or_else(|| ProfileError::MissingStudy {
                                source_name: source.describe(),
                                name: n.to_string(),
                            })
                    })
                    .collect::<Result<_, _>>()?,
                "extended" => known
                    .values()
                    .filter(|p| !STUDY_PROFILES.contains(&p.profile.name.as_str()))
                    .cloned()
                    .collect(),
                "every" => {
                    let mut v: Vec<LoadedProfile> = STUDY_PROFILES
                        .iter()
                        .filter_map(|n| known.get(*n).cloned())
                        .collect();
                    v.extend(
                        known
                            .values()
                            .filter(|p| !STUDY_PROFILES.contains(&p.profile.name.as_str()))
                            .cloned(),
                    );
                    v
                }
                name => vec![known
                    .get(name)
                    .cloned()
                    .ok_or_else(|| ProfileError::Unknown {
                        name: name.to_string(),
                        known: known.keys().cloned().collect::<Vec<_>>().join(", "),
                    })?],
            }
        };
        for p in picked {
            if let Some(first) = seen.get(&p.profile.name) {
                return Err(ProfileError::Duplicate {
                    name: p.profile.name.clone(),
                    first: first.clone(),
                    second: p.path,
                });
            }
            seen.insert(p.profile.name.clone(), p.path.clone());
            chosen.push(p);
        }
    }
    if chosen.is_empty() {
        return Err(ProfileError::Empty);
    }
    Ok(chosen.into_iter().map(|p| p.profile).collect())
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.summary())
    }
}

/// The profiles table printed by `pagebench profiles`.
pub fn table(profiles: &[Profile]) -> String {
    let mut rows = vec![[
        "name".to_string(),
        "RTT ms".into(),
        "jitter ms".into(),
        "loss %".into(),
        "down Mbit/s".into(),
        "up Mbit/s".into(),
        "queue".into(),
        "set".into(),
        "description".into(),
    ]];
    for p in profiles {
        let default = p.queue_packets.is_none() && p.queue_bytes.is_none();
        let queue = match p.queue_limit() {
            Some(QueueLimit::Packets(n)) if default => format!("{n} pkt (default)"),
            Some(QueueLimit::Packets(n)) => format!("{n} pkt"),
            Some(QueueLimit::Bytes(n)) => format!("{n} B"),
            None => "-".into(),
        };
        rows.push([
            p.name.clone(),
            fmt_num(p.rtt_ms),
            fmt_num(p.jitter_ms),
            fmt_num(p.loss_pct),
            table_rate(p, true),
            table_rate(p, false),
            if p.aqm == Aqm::Droptail || queue == "-" {
                queue
            } else {
                format!("{queue} {}", p.aqm.name())
            },
            if STUDY_PROFILES.contains(&p.name.as_str()) {
                "all".into()
            } else {
                "extended".into()
            },
            p.description.clone(),
        ]);
    }
    crate::support::textfmt::table(&rows)
}

fn table_rate(p: &Profile, down: bool) -> String {
    match p.rate_label(down).as_str() {
        "∞" => "-".into(),
        r => r.to_string(),
    }
}

#[cfg(test)]
mod tests;
