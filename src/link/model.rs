//! The link model of one direction: a pure, deterministic state machine in the style of
//! quinn-proto. It never touches a clock or a socket: the caller hands it packets with the time
//! they arrived ([`LinkDirection::offer`]), asks for packets that are due
//! ([`LinkDirection::poll_release`]) and sleeps until [`LinkDirection::next_deadline`]. The same
//! inputs and seed always give the same outputs, so it is unit-tested with time passed in.
//!
//! Per packet, in this order:
//! 1. **destination filter**: only IPv4 packets to the peer go on (others: `NotForPeer`);
//! 2. **NAT rebinding** (from its time on, packets from the client): the client's port is
//!    rewritten ([`super::nat`]); packets to the client are rewritten back when released;
//! 3. **outage** in `drop` mode: a packet arriving while the link is down is lost (`Outage`);
//! 4. **i.i.d. loss** with probability `loss`;
//! 5. **bottleneck** (optional, [`super::bottleneck`]): a queue discipline (drop-tail, CoDel,
//!    FQ-CoDel; [`super::aqm`]) bounded by packets or bytes, served at `rate_bps` bits/s (IP
//!    bytes, no layer-2 overhead) or by a recorded capacity trace, not at all while the link is
//!    down (a `hold` outage without a rate limit still queues here);
//! 6. **delay**: one-way `delay` plus the extra delay of the packet's server address plus the
//!    jitter offset of the configured [`JitterModel`]:
//!    - `Varying` (default): the offset of a smoothly varying process at the packet's time
//!      ([`VaryingDelay`]): packets close together see nearly the same delay, never reorder, and
//!      the mean delay is the profile's at any packet rate;
//!    - `Fifo`: an independent uniform draw in `±jitter`, held back behind the packet before it.
//!      Once packets arrive closer together than the jitter range, each waits for the slowest
//!      recent draw, so the mean delay rises with the packet rate (counted in
//!      [`Counters::fifo_hold_sum_ns`]);
//!    - `Reorder`: an independent uniform draw that may overtake others, as netem does.
//!
//! Every model but `Reorder` keeps arrival order (per server address: addresses with their own
//! extra delay are separate paths); under `Varying` the hold is zero by construction (it only
//! guards a reconfiguration to a shorter delay). FQ-CoDel reorders packets of different flows by
//! design.
//!
//! **Events** (outages, NAT rebinding, a trace's position) are on a timeline that starts at
//! [`LinkDirection::start_timeline`] — the run's mark — so each run meets them at the same times.
//! The bottleneck is event-driven: [`LinkDirection::next_deadline`] is also the time of its next
//! dequeue, at which [`LinkDirection::poll_release`] may release nothing.
//!
//! The delay the model intends for a packet (`due − wire exit`) and the delay it really got
//! (`release − wire exit`) are both summed, so a run can be checked against its own model.
//!
//! **Reconfiguration** applies to packets offered afterwards; packets already scheduled keep
//! their release time (and, except under `Reorder`, later packets still leave after them).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::aqm::{AqmConfig, Discipline, Queued};
use super::bottleneck::{Bottleneck, Departure, Dropped, Service};
use super::events::{EventsConfig, Timeline};
use super::histogram::Histogram;
use super::jitter::VaryingDelay;
use super::nat;
use crate::config::capacity::{CapacityTrace, TraceStart};
use crate::config::profile::{JitterModel, OutageMode, Profile, QueueLimit};

/// Which way a packet travels. `Up` is client → server, `Down` is server → client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    Up,
    Down,
}

/// The behaviour of one direction of the link.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionConfig {
    /// Which way this is (the NAT rewrites the client's port: source going up, destination
    /// coming down; an address's extra delay keys on the destination going up, the source
    /// coming down).
    pub way: Direction,
    /// One-way delay (half the profile's RTT).
    pub delay: Duration,
    /// Jitter amplitude: each packet's delay lies in `delay ± jitter`.
    pub jitter: Duration,
    /// How the jitter varies between packets.
    pub jitter_model: JitterModel,
    /// Knot interval (coherence time) of the `Varying` model.
    pub jitter_interval: Duration,
    /// Probability (0..=1) that a packet is lost, independently of all others.
    pub loss: f64,
    /// Serialisation rate in bits per second; `None` means no rate limit.
    pub rate_bps: Option<f64>,
    /// Capacity from a recorded trace (instead of `rate_bps`).
    pub trace: Option<Arc<CapacityTrace>>,
    /// Limit of the queue in front of the rate limit or trace; `None` means unbounded.
    pub queue: Option<QueueLimit>,
    /// The queue's discipline.
    pub aqm: AqmConfig,
    /// Outages and NAT rebinding (the same for both directions).
    pub events: EventsConfig,
    /// Extra one-way delay of packets to (up) or from (down) these server addresses.
    pub extra_delay: Vec<(Ipv4Addr, Duration)>,
    /// Accept only IPv4 packets to these addresses (empty: accept everything). The server side
    /// may have several (one per replayed origin address).
    pub peers: Vec<Ipv4Addr>,
}

impl DirectionConfig {
    /// A direction without delay, loss or rate limit.
    pub fn transparent() -> Self {
        DirectionConfig {
            way: Direction::Up,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_model: JitterModel::Varying,
            jitter_interval: Duration::ZERO,
            loss: 0.0,
            rate_bps: None,
            trace: None,
            queue: None,
            aqm: AqmConfig::default(),
            events: EventsConfig::default(),
            extra_delay: Vec::new(),
            peers: Vec::new(),
        }
    }

    /// The configuration of one direction of a (validated) profile; `peers` are the addresses
    /// packets in this direction may be sent to, `server_ips` the server's addresses (its own
    /// first: `origin_delay_ms` is in this order), `seed` the link's (shared by both
    /// directions' events).
    pub fn from_profile(
        p: &Profile,
        dir: Direction,
        peers: Vec<Ipv4Addr>,
        server_ips: &[Ipv4Addr],
        seed: u64,
    ) -> Self {
        let (rate_mbit, trace) = match dir {
            Direction::Up => (p.up_mbit, &p.up_trace),
            Direction::Down => (p.down_mbit, &p.down_trace),
        };
        let trace = trace.as_ref().and_then(|t| t.trace().cloned());
        let bottleneck = rate_mbit.is_some() || trace.is_some();
        DirectionConfig {
            way: dir,
            delay: duration_ms(p.one_way_ms()),
            jitter: duration_ms(p.jitter_ms),
            jitter_model: p.jitter_model,
            jitter_interval: duration_ms(p.jitter_interval_ms()),
            loss: (p.loss_pct / 100.0).clamp(0.0, 1.0),
            rate_bps: rate_mbit.map(|m| m * 1e6),
            trace,
            queue: p.queue_limit().filter(|_| bottleneck),
            aqm: AqmConfig {
                kind: if bottleneck {
                    p.aqm
                } else {
                    Default::default()
                },
                target: duration_ms(p.codel_target()),
                interval: duration_ms(p.codel_interval()),
                quantum: p
                    .fq_quantum_bytes
                    .unwrap_or(crate::config::profile::FQ_QUANTUM_BYTES),
            },
            events: EventsConfig::from_profile(p, seed),
            extra_delay: server_ips
                .iter()
                .zip(&p.origin_delay_ms)
                .filter(|(_, d)| **d > 0.0)
                .map(|(a, d)| (*a, duration_ms(*d)))
                .collect(),
            peers,
        }
    }

    /// Whether packets go through a bottleneck queue: a rate, a trace, or outages that hold.
    fn has_bottleneck(&self) -> bool {
        self.rate_bps.is_some()
            || self.trace.is_some()
            || (self.events.has_outages() && self.events.mode == OutageMode::Hold)
    }

    fn service(&self) -> Service {
        match (&self.trace, self.rate_bps) {
            (Some(t), _) => Service::Trace(t.clone()),
            (None, Some(r)) => Service::Rate(r),
            (None, None) => Service::Unlimited,
        }
    }
}

fn duration_ms(ms: f64) -> Duration {
    Duration::from_nanos((ms.max(0.0) * 1e6).round() as u64)
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DropCause {
    /// The random loss draw.
    Loss,
    /// The queue in front of the rate limit was full.
    Queue,
    /// Not an IPv4 packet to the peer's address.
    NotForPeer,
    /// A test hook dropped this chosen packet ([`LinkDirection::drop_chosen`]).
    Injected,
    /// CoDel dropped it at dequeue (its queue's delay stayed above target).
    Aqm,
    /// It arrived during an outage (`outage_mode = "drop"`).
    Outage,
    /// It reached the client's NAT for a mapping the rebinding ended.
    Nat,
}

/// A test hook's choice of one packet to drop: the `skip + 1`-th packet of at least `min_len`
/// bytes offered from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChosenDrop {
    pub skip: u32,
    pub min_len: usize,
}

/// What happened to an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Scheduled for release at its due time (or queued at the bottleneck).
    Queued,
    Dropped(DropCause),
}

/// A packet inside the link.
#[derive(Debug)]
pub struct Packet {
    pub data: Vec<u8>,
    /// Arrival order in this direction (0, 1, 2, …).
    pub seq: u64,
    pub arrived: Instant,
    /// When it left the bottleneck (= `arrived` without one).
    pub wire_exit: Instant,
    /// When it is to be released.
    pub due: Instant,
    /// How much later than its own delay the kept order made it.
    pub fifo_hold: Duration,
    /// It had to wait for the wire behind an earlier packet (the link was saturated).
    pub queued: bool,
    /// What the bottleneck offered since the packet before it left (bytes; 0 unless `queued`).
    pub capacity_bytes: f64,
}

/// A packet the link dropped after accepting it (an AQM drop at dequeue, or a queued packet
/// pushed out by FQ-CoDel's limit): a capture records it.
#[derive(Debug)]
pub struct LateDrop {
    pub cause: DropCause,
    pub arrived: Instant,
    pub data: Vec<u8>,
}

/// Ordering for the release heap: earliest due first, then arrival order.
struct Scheduled(Packet);

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse so that the earliest (due, seq) is on top.
        (other.0.due, other.0.seq).cmp(&(self.0.due, self.0.seq))
    }
}

/// Everything counted in one direction since creation or the last [`LinkDirection::take_counters`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    pub dropped_not_for_peer: u64,
    /// Packets a test hook chose to drop ([`LinkDirection::drop_chosen`]).
    pub dropped_injected: u64,
    /// Packets CoDel dropped at dequeue.
    pub dropped_aqm: u64,
    /// Packets that arrived during an outage (`drop` mode).
    pub dropped_outage: u64,
    /// Packets whose client port the NAT rewrote (after rebinding).
    pub nat_rewritten: u64,
    /// Packets to the client for a mapping the rebinding ended (dropped at release).
    pub dropped_nat: u64,
    /// Packets released after a packet that arrived later than them.
    pub reorders: u64,
    /// Release time minus due time of every released packet.
    pub lateness: Histogram,
    /// The spells the emulator was behind its schedule (lateness beyond its precision).
    pub behind: super::behind::Behind,
    /// Time each packet waited in the bottleneck's queue (dequeue − enqueue).
    pub sojourn: Histogram,
    /// Sum over released packets of (due − wire exit): the delay the model intended.
    pub intended_sum_ns: u128,
    /// Sum over released packets of (release − wire exit): the delay achieved.
    pub delay_sum_ns: u128,
    /// Sum over released packets of the extra wait the kept order imposed, and how many
    /// packets waited at all.
    pub fifo_hold_sum_ns: u128,
    pub fifo_held: u64,
    /// Sum over released packets of the time spent waiting for and being serialised on the wire.
    pub wire_sum_ns: u128,
    /// The delay the link offered, integrated over time (ns·ns), and the span it covers (ns):
    /// their ratio is the mean delay whatever the traffic (see [`LinkDirection::account_offered`]).
    pub offered_integral: f64,
    pub offered_span_ns: f64,
    /// Time the link was down (outages) within the accounted span.
    pub outage_ns: u64,
    /// Most packets / bytes seen waiting in the rate-limit queue at once.
    pub max_backlog_packets: u64,
    pub max_backlog_bytes: u64,
    /// Saturated periods (back-to-back serialisation), measured at release: their length and
    /// the bytes released in them after their first packet — i.e. the achieved rate when busy.
    pub busy_ns: u64,
    pub busy_bytes: u64,
    /// What the rate or trace offered in the same periods, measured when packets left the
    /// bottleneck: bytes, and the periods' length (their ratio is the rate to expect).
    pub busy_capacity_bytes: f64,
    pub busy_exit_ns: u64,
}

/// A saturated period in progress at the release side.
#[derive(Debug, Clone, Copy)]
struct BusyRun {
    first_release: Instant,
    last_release: Instant,
    bytes: u64,
    first_exit: Instant,
    last_exit: Instant,
    capacity: f64,
}

/// One direction of the link.
pub struct LinkDirection {
    cfg: DirectionConfig,
    loss_rng: ChaCha8Rng,
    jitter_rng: ChaCha8Rng,
    /// The `Varying` model's process (None for the other models or without jitter).
    varying: Option<VaryingDelay>,
    /// Until when the offered delay is accounted (None before the first accounting).
    offered_since: Option<Instant>,
    next_seq: u64,
    /// Packets scheduled for release (ordered by due time, then arrival).
    scheduled: BinaryHeap<Scheduled>,
    /// Latest due time handed out per extra-delay class (order is kept within each).
    last_due: Vec<Option<Instant>>,
    /// Events from the last mark (the timeline starts at the first packet until one is set).
    timeline: Option<Timeline>,
    /// Marks so far (each timeline draws its own random outages).
    marks: u64,
    /// The queue and its service, when the direction has one.
    bottleneck: Option<Bottleneck>,
    departures: Vec<Departure>,
    dropped_inside: Vec<Dropped>,
    /// Late drops kept for a capture (only while `keep_late_drops`).
    late_drops: Vec<LateDrop>,
    keep_late_drops: bool,
    highest_released_seq: Option<u64>,
    busy_run: Option<BusyRun>,
    /// A test hook's packet to drop, until it is dropped.
    chosen_drop: Option<ChosenDrop>,
    counters: Counters,
}

impl LinkDirection {
    /// A direction with the given behaviour; `seed` fixes every random draw.
    pub fn new(cfg: DirectionConfig, seed: u64) -> Self {
        let loss_rng = ChaCha8Rng::seed_from_u64(seed);
        let mut jitter_rng = ChaCha8Rng::seed_from_u64(seed);
        jitter_rng.set_stream(1);
        let varying = varying_process(&cfg, &mut jitter_rng);
        LinkDirection {
            last_due: vec![None; cfg.extra_delay.len() + 1],
            cfg,
            loss_rng,
            jitter_rng,
            varying,
            offered_since: None,
            next_seq: 0,
            scheduled: BinaryHeap::new(),
            timeline: None,
            marks: 0,
            bottleneck: None,
            departures: Vec::new(),
            dropped_inside: Vec::new(),
            late_drops: Vec::new(),
            keep_late_drops: false,
            highest_released_seq: None,
            busy_run: None,
            chosen_drop: None,
            counters: Counters::default(),
        }
    }

    pub fn config(&self) -> &DirectionConfig {
        &self.cfg
    }

    /// Draws every random number from `seed` from now on — loss, jitter (a new `Varying`
    /// process) and the next timeline's outages — as if the direction had been made with it:
    /// a run's network then depends on its own seed alone, not on the runs the link carried
    /// before (a resumed matrix, another lane). Call it at a mark, before
    /// [`LinkDirection::start_timeline`].
    pub fn reseed(&mut self, seed: u64) {
        self.loss_rng = ChaCha8Rng::seed_from_u64(seed);
        let mut jitter_rng = ChaCha8Rng::seed_from_u64(seed);
        jitter_rng.set_stream(1);
        self.varying = varying_process(&self.cfg, &mut jitter_rng);
        self.jitter_rng = jitter_rng;
        self.cfg.events.seed = seed;
        self.marks = 0;
    }

    /// Starts the events' timeline at `now` (the run's mark): outages, NAT rebinding and a
    /// trace's position count from here, the trace from `trace_start`.
    pub fn start_timeline(&mut self, now: Instant, trace_start: TraceStart) {
        self.advance(now);
        self.marks += 1;
        self.timeline = Some(
            Timeline::new(self.cfg.events.clone(), now, self.marks).with_trace_start(trace_start),
        );
        match (self.bottleneck.as_mut(), self.timeline.as_mut()) {
            // The queue stays as it is (its packets, CoDel's state); its service follows the
            // new timeline (a trace restarts, outages are the new ones).
            (Some(b), Some(tl)) => b.schedule(tl),
            _ if self.cfg.has_bottleneck() => self.rebuild_bottleneck(now),
            _ => {}
        }
    }

    /// A timeline without events, from `now`: the link between runs (its start, a new profile)
    /// has a trace's capacity but no outages or rebinding — those belong to a run's mark, and
    /// one falling in a browser's launch would only disturb it (and be counted in the next
    /// run's interval if it straddled the mark).
    pub fn start_idle_timeline(&mut self, now: Instant) {
        let events = EventsConfig {
            mode: self.cfg.events.mode,
            seed: self.cfg.events.seed,
            ..EventsConfig::default()
        };
        self.advance(now);
        self.timeline = Some(Timeline::new(events, now, self.marks));
        match (self.bottleneck.as_mut(), self.timeline.as_mut()) {
            (Some(b), Some(tl)) => b.schedule(tl),
            _ if self.cfg.has_bottleneck() => self.rebuild_bottleneck(now),
            _ => {}
        }
    }

    /// The timeline, started at `now` if none was.
    fn timeline(&mut self, now: Instant) -> &mut Timeline {
        let (events, marks) = (&self.cfg.events, self.marks);
        self.timeline
            .get_or_insert_with(|| Timeline::new(events.clone(), now, marks))
    }

    /// The outages so far on the current timeline, relative to its start, and that start.
    pub fn outage_windows(&mut self, now: Instant) -> (Instant, Vec<(Duration, Duration)>) {
        let tl = self.timeline(now);
        (tl.epoch(), tl.windows_until(now))
    }

    /// When the NAT rebinds on the current timeline (None: it does not).
    pub fn rebind_at(&self) -> Option<Instant> {
        self.timeline.as_ref().and_then(|t| t.rebind_at())
    }

    /// A new bottleneck for the configuration (packets of the old one move into it).
    fn rebuild_bottleneck(&mut self, now: Instant) {
        let mut old: Vec<Queued> = self
            .bottleneck
            .as_mut()
            .map(|b| b.drain())
            .unwrap_or_default();
        let epoch = self.timeline(now).epoch();
        self.bottleneck = self.cfg.has_bottleneck().then(|| {
            let qdisc = Discipline::new(self.cfg.aqm, self.cfg.queue, self.cfg.events.seed);
            Bottleneck::new(self.cfg.service(), qdisc, epoch)
        });
        for mut p in old.drain(..) {
            p.enqueued = now;
            match self.bottleneck.as_mut() {
                Some(b) => {
                    let tl = self.timeline.as_mut().expect("timeline set above");
                    let mut dropped = std::mem::take(&mut self.dropped_inside);
                    if let Err(p) = b.enqueue(now, p, tl, &mut dropped) {
                        dropped.push((p, false));
                    }
                    self.dropped_inside = dropped;
                }
                None => self.schedule_release(p, now, false, 0.0),
            }
        }
        if let (Some(b), Some(tl)) = (self.bottleneck.as_mut(), self.timeline.as_mut()) {
            b.schedule(tl);
        }
        self.settle_inside();
    }

    /// Accounts the delay the link offered up to `now`: the configured delay plus the varying
    /// model's offset, integrated over time — the mean a packet sent at a random moment would
    /// get, whatever the traffic. (`fifo` and `reorder` have no time structure: their offered
    /// mean is the configured delay; the `fifo` hold is the traffic's doing and shows only in
    /// the packets' intended delays.) Also the time the link was down.
    pub fn account_offered(&mut self, now: Instant) {
        let since = *self.offered_since.get_or_insert(now);
        if now <= since {
            return;
        }
        let span = (now - since).as_nanos() as f64;
        let jitter = self.varying.as_mut().map_or(0.0, |v| v.take_integral(now));
        self.counters.offered_integral += self.cfg.delay.as_nanos() as f64 * span + jitter;
        self.counters.offered_span_ns += span;
        if self.cfg.events.has_outages() {
            let down = self.timeline(now).down_time_between(since, now);
            self.counters.outage_ns += down.as_nanos() as u64;
        }
        self.offered_since = Some(now);
    }

    /// Applies a new behaviour to packets offered from now on (scheduled ones keep their time;
    /// queued ones move to the new queue). Call [`LinkDirection::account_offered`] first to
    /// close the old behaviour's accounting, and [`LinkDirection::start_timeline`] after.
    pub fn reconfigure(&mut self, cfg: DirectionConfig) {
        let same_jitter = (cfg.jitter, cfg.jitter_model, cfg.jitter_interval)
            == (
                self.cfg.jitter,
                self.cfg.jitter_model,
                self.cfg.jitter_interval,
            );
        if !same_jitter {
            self.varying = varying_process(&cfg, &mut self.jitter_rng);
        }
        let classes = cfg.extra_delay.len() + 1;
        let keep = self.last_due.iter().flatten().max().copied();
        self.last_due = vec![keep; classes];
        self.cfg = cfg;
        let now = self
            .offered_since
            .or(self.timeline.as_ref().map(|t| t.epoch()));
        if let Some(now) = now {
            // A new configuration has new events: its timeline restarts with it.
            self.timeline = Some(Timeline::new(self.cfg.events.clone(), now, self.marks));
            self.rebuild_bottleneck(now);
        } else {
            self.timeline = None;
            self.bottleneck = None;
        }
    }

    /// A packet arrived at `now`.
    pub fn offer(&mut self, now: Instant, data: Vec<u8>) -> Verdict {
        match self.offer_keeping_drops(now, data) {
            Ok(()) => Verdict::Queued,
            Err((cause, _)) => Verdict::Dropped(cause),
        }
    }

    /// Arms a test hook: drop exactly one chosen packet from now on.
    pub fn drop_chosen(&mut self, choice: ChosenDrop) {
        self.chosen_drop = Some(choice);
    }

    /// Keep the packets dropped inside the link (after they were accepted) for
    /// [`LinkDirection::take_late_drops`] (a capture); off, they are freed at once.
    pub fn keep_late_drops(&mut self, keep: bool) {
        self.keep_late_drops = keep;
        if !keep {
            self.late_drops.clear();
        }
    }

    /// Packets dropped inside the link since the last call (see [`LinkDirection::keep_late_drops`]).
    pub fn take_late_drops(&mut self) -> Vec<LateDrop> {
        std::mem::take(&mut self.late_drops)
    }

    /// [`LinkDirection::offer`] that hands a dropped packet back (a capture records it).
    pub fn offer_keeping_drops(
        &mut self,
        now: Instant,
        mut data: Vec<u8>,
    ) -> Result<(), (DropCause, Vec<u8>)> {
        // The offered delay is accounted from the first packet (or accounting) on.
        self.offered_since.get_or_insert(now);
        self.timeline(now);
        if self.bottleneck.is_none() && self.cfg.has_bottleneck() {
            self.rebuild_bottleneck(now);
        }
        self.advance(now);
        let len = data.len() as u64;
        self.counters.packets_in += 1;
        self.counters.bytes_in += len;
        if !self.cfg.peers.is_empty() {
            let to_peer = ipv4_destination(&data).is_some_and(|d| self.cfg.peers.contains(&d));
            if !to_peer {
                self.counters.dropped_not_for_peer += 1;
                return Err((DropCause::NotForPeer, data));
            }
        }
        if self.cfg.way == Direction::Up
            && self.rebind_at().is_some_and(|t| now >= t)
            && nat::outbound(&mut data)
        {
            self.counters.nat_rewritten += 1;
        }
        if let Some(c) = &mut self.chosen_drop {
            if data.len() >= c.min_len {
                if c.skip == 0 {
                    self.chosen_drop = None;
                    self.counters.dropped_injected += 1;
                    return Err((DropCause::Injected, data));
                }
                c.skip -= 1;
            }
        }
        let drop_mode = self.cfg.events.mode == OutageMode::Drop;
        if drop_mode && self.timeline(now).down_until(now).is_some() {
            self.counters.dropped_outage += 1;
            return Err((DropCause::Outage, data));
        }
        if self.cfg.loss > 0.0 && self.loss_rng.random::<f64>() < self.cfg.loss {
            self.counters.dropped_loss += 1;
            return Err((DropCause::Loss, data));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let class = self.class_of(&data);
        let p = Queued {
            data,
            seq,
            arrived: now,
            enqueued: now,
            class,
        };
        match self.bottleneck.as_mut() {
            None => {
                self.schedule_release(p, now, false, 0.0);
                Ok(())
            }
            Some(b) => {
                let tl = self.timeline.as_mut().expect("set above");
                let r = b.enqueue(now, p, tl, &mut self.dropped_inside);
                let backlog = (b.qdisc().len() as u64, b.qdisc().bytes());
                let c = &mut self.counters;
                c.max_backlog_packets = c.max_backlog_packets.max(backlog.0);
                c.max_backlog_bytes = c.max_backlog_bytes.max(backlog.1);
                // Service starts at once if the bottleneck was idle.
                self.advance(now);
                match r {
                    Ok(()) => Ok(()),
                    Err(p) => {
                        self.counters.dropped_queue += 1;
                        Err((DropCause::Queue, p.data))
                    }
                }
            }
        }
    }

    /// The extra-delay class of a packet: its server address's place in `extra_delay`, plus 1.
    fn class_of(&self, data: &[u8]) -> usize {
        if self.cfg.extra_delay.is_empty() || data.len() < 20 {
            return 0;
        }
        let at = match self.cfg.way {
            Direction::Up => 16,
            Direction::Down => 12,
        };
        let addr = Ipv4Addr::new(data[at], data[at + 1], data[at + 2], data[at + 3]);
        self.cfg
            .extra_delay
            .iter()
            .position(|(a, _)| *a == addr)
            .map_or(0, |i| i + 1)
    }

    /// Runs the bottleneck's events up to `now`: what left it goes on to the delay stage.
    fn advance(&mut self, now: Instant) {
        if let (Some(b), Some(tl)) = (self.bottleneck.as_mut(), self.timeline.as_mut()) {
            if b.next_event().is_some_and(|t| t <= now) {
                b.advance(now, tl, &mut self.departures, &mut self.dropped_inside);
            }
        }
        self.settle_inside();
    }

    /// Moves departures to the delay stage and counts the drops inside the bottleneck.
    fn settle_inside(&mut self) {
        for d in std::mem::take(&mut self.departures) {
            self.counters
                .sojourn
                .record((d.dequeued - d.packet.enqueued).as_nanos() as u64);
            self.schedule_release(d.packet, d.exit, d.back_to_back, d.capacity_bytes);
        }
        for (p, aqm) in self.dropped_inside.drain(..) {
            let cause = if aqm {
                self.counters.dropped_aqm += 1;
                DropCause::Aqm
            } else {
                self.counters.dropped_queue += 1;
                DropCause::Queue
            };
            if self.keep_late_drops {
                self.late_drops.push(LateDrop {
                    cause,
                    arrived: p.arrived,
                    data: p.data,
                });
            }
        }
    }

    /// Schedules a packet that left the bottleneck (or arrived, without one) at `wire_exit`.
    fn schedule_release(
        &mut self,
        p: Queued,
        wire_exit: Instant,
        queued: bool,
        capacity_bytes: f64,
    ) {
        let extra = match p.class {
            0 => Duration::ZERO,
            c => self.cfg.extra_delay[c - 1].1,
        };
        let own_due = wire_exit + self.delay_at(wire_exit) + extra;
        let keep_order = self.cfg.jitter_model != JitterModel::Reorder;
        let class = p.class.min(self.last_due.len() - 1);
        let last = &mut self.last_due[class];
        let due = match *last {
            Some(l) if keep_order && l > own_due => l,
            _ => own_due,
        };
        *last = Some(last.map_or(due, |l| l.max(due)));
        self.scheduled.push(Scheduled(Packet {
            data: p.data,
            seq: p.seq,
            arrived: p.arrived,
            wire_exit,
            due,
            fifo_hold: due - own_due,
            queued,
            capacity_bytes,
        }));
    }

    /// The delay stage of a packet leaving the rate limit (or arriving) at `t`.
    fn delay_at(&mut self, t: Instant) -> Duration {
        let base = self.cfg.delay.as_nanos() as f64;
        let j = self.cfg.jitter.as_nanos() as f64;
        if j == 0.0 {
            return self.cfg.delay;
        }
        let offset = match &mut self.varying {
            Some(v) => v.offset_ns(t),
            None => self.jitter_rng.random_range(-j..=j),
        };
        Duration::from_nanos((base + offset).max(0.0).round() as u64)
    }

    /// The next packet due at or before `now`, if any. `now` is the actual release time: the
    /// difference to the due time is recorded as lateness. Runs the bottleneck's events up to
    /// `now` first (a deadline may be a dequeue that releases nothing yet).
    pub fn poll_release(&mut self, now: Instant) -> Option<Packet> {
        self.advance(now);
        let p = loop {
            if self.scheduled.peek()?.0.due > now {
                return None;
            }
            let mut p = self.scheduled.pop()?.0;
            // The client's NAT, at the client's end of the link.
            if self.cfg.way == Direction::Down && self.rebind_at().is_some_and(|t| p.due >= t) {
                match nat::inbound(&mut p.data) {
                    nat::Inbound::Unchanged => {}
                    nat::Inbound::Rewritten => self.counters.nat_rewritten += 1,
                    nat::Inbound::Unmapped => {
                        self.counters.dropped_nat += 1;
                        if self.keep_late_drops {
                            self.late_drops.push(LateDrop {
                                cause: DropCause::Nat,
                                arrived: p.arrived,
                                data: p.data,
                            });
                        }
                        continue;
                    }
                }
            }
            break p;
        };
        let len = p.data.len() as u64;
        let c = &mut self.counters;
        c.packets_out += 1;
        c.bytes_out += len;
        c.lateness.record((now - p.due).as_nanos() as u64);
        c.behind.released(p.due, now);
        c.intended_sum_ns += (p.due - p.wire_exit).as_nanos();
        c.delay_sum_ns += (now - p.wire_exit).as_nanos();
        c.fifo_hold_sum_ns += p.fifo_hold.as_nanos();
        c.fifo_held += u64::from(!p.fifo_hold.is_zero());
        c.wire_sum_ns += (p.wire_exit - p.arrived).as_nanos();
        match self.highest_released_seq {
            Some(h) if p.seq < h => c.reorders += 1,
            _ => self.highest_released_seq = Some(p.seq),
        }
        self.busy_run = match self.busy_run {
            Some(mut run) if p.queued => {
                run.last_release = now;
                run.bytes += len;
                run.last_exit = p.wire_exit;
                run.capacity += p.capacity_bytes;
                Some(run)
            }
            previous => {
                close_run(c, previous);
                Some(BusyRun {
                    first_release: now,
                    last_release: now,
                    bytes: 0,
                    first_exit: p.wire_exit,
                    last_exit: p.wire_exit,
                    capacity: 0.0,
                })
            }
        };
        Some(p)
    }

    /// When the direction next needs attention: the earliest scheduled release or the
    /// bottleneck's next dequeue.
    pub fn next_deadline(&self) -> Option<Instant> {
        let release = self.scheduled.peek().map(|s| s.0.due);
        let dequeue = self.bottleneck.as_ref().and_then(|b| b.next_event());
        match (release, dequeue) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Packets inside the link: scheduled, and waiting at the bottleneck.
    pub fn in_flight(&self) -> usize {
        self.scheduled.len() + self.bottleneck.as_ref().map_or(0, |b| b.len())
    }

    /// The counters so far (the saturated period in progress included).
    pub fn counters(&self) -> Counters {
        let mut c = self.counters.clone();
        close_run(&mut c, self.busy_run);
        c
    }

    /// The counters so far, and start counting from zero.
    pub fn take_counters(&mut self) -> Counters {
        let c = self.counters();
        self.counters = Counters::default();
        // A saturated period in progress continues from its latest release.
        self.busy_run = self.busy_run.map(|r| BusyRun {
            first_release: r.last_release,
            last_release: r.last_release,
            bytes: 0,
            first_exit: r.last_exit,
            last_exit: r.last_exit,
            capacity: 0.0,
        });
        c
    }
}

/// The `Varying` process for a configuration that uses it.
fn varying_process(cfg: &DirectionConfig, rng: &mut ChaCha8Rng) -> Option<VaryingDelay> {
    (cfg.jitter_model == JitterModel::Varying && !cfg.jitter.is_zero()).then(|| {
        let interval = cfg
            .jitter_interval
            .max(super::jitter::min_interval(cfg.jitter));
        VaryingDelay::new(cfg.jitter, interval, ChaCha8Rng::from_rng(rng))
    })
}

fn close_run(c: &mut Counters, run: Option<BusyRun>) {
    if let Some(r) = run {
        if r.bytes > 0 {
            c.busy_ns += (r.last_release - r.first_release).as_nanos() as u64;
            c.busy_bytes += r.bytes;
            c.busy_exit_ns += (r.last_exit - r.first_exit).as_nanos() as u64;
            c.busy_capacity_bytes += r.capacity;
        }
    }
}

/// The destination of an IPv4 packet (`None` if it is not one).
pub fn ipv4_destination(packet: &[u8]) -> Option<Ipv4Addr> {
    if packet.len() < 20 || packet[0] >> 4 != 4 {
        return None;
    }
    Some(Ipv4Addr::new(
        packet[16], packet[17], packet[18], packet[19],
    ))
}

#[cfg(test)]
mod tests;
