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
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const PEER: Ipv4Addr = Ipv4Addr::new(10, 9, 8, 2);

    /// A minimal IPv4 packet of `len` bytes to `dst`.
    fn packet_to(dst: Ipv4Addr, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len.max(20)];
        p[0] = 0x45;
        p[16..20].copy_from_slice(&dst.octets());
        p
    }

    fn pkt(len: usize) -> Vec<u8> {
        packet_to(PEER, len)
    }

    fn cfg(delay_ms: u64) -> DirectionConfig {
        DirectionConfig {
            delay: Duration::from_millis(delay_ms),
            peers: vec![PEER],
            ..DirectionConfig::transparent()
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Releases everything due up to `until`, each packet exactly at its deadline (an ideal
    /// clock), and returns (seq, release time offset) pairs. A deadline may be a dequeue of the
    /// bottleneck that releases nothing.
    fn drain(d: &mut LinkDirection, t0: Instant, until: Duration) -> Vec<(u64, Duration)> {
        let mut out = Vec::new();
        while let Some(due) = d.next_deadline() {
            if due > t0 + until {
                break;
            }
            while let Some(p) = d.poll_release(due) {
                assert_eq!(p.due, due, "released exactly at its deadline");
                out.push((p.seq, due - t0));
            }
        }
        out
    }

    #[test]
    fn releases_exactly_at_due_time_not_before() {
        let t0 = Instant::now();
        let mut d = LinkDirection::new(cfg(20), 1);
        assert_eq!(d.offer(t0, pkt(100)), Verdict::Queued);
        assert_eq!(d.next_deadline(), Some(t0 + ms(20)));
        assert!(d
            .poll_release(t0 + ms(20) - Duration::from_nanos(1))
            .is_none());
        let p = d
            .poll_release(t0 + ms(20) + Duration::from_micros(30))
            .unwrap();
        assert_eq!(p.data.len(), 100);
        assert_eq!(p.due, t0 + ms(20));
        let c = d.counters();
        assert_eq!((c.packets_in, c.packets_out, c.bytes_out), (1, 1, 100));
        assert_eq!(c.lateness.max_ns(), 30_000);
        assert_eq!(d.next_deadline(), None);
    }

    #[test]
    fn a_chosen_drop_takes_exactly_the_nth_large_packet_and_hands_it_back() {
        let t0 = Instant::now();
        let mut d = LinkDirection::new(cfg(5), 1);
        d.drop_chosen(ChosenDrop {
            skip: 2,
            min_len: 1000,
        });
        let mut fates = Vec::new();
        for len in [60, 1200, 60, 1300, 1400, 1500, 1200] {
            fates.push(match d.offer_keeping_drops(t0, pkt(len)) {
                Ok(()) => None,
                Err((cause, data)) => Some((cause, data.len())),
            });
        }
        // Small packets are not counted; the third large one (1400 bytes) goes, once.
        assert_eq!(
            fates,
            [
                None,
                None,
                None,
                None,
                Some((DropCause::Injected, 1400)),
                None,
                None
            ]
        );
        let c = d.counters();
        assert_eq!((c.dropped_injected, c.dropped_loss), (1, 0));
    }

    #[test]
    fn not_for_peer_is_dropped_and_counted() {
        let t0 = Instant::now();
        let mut d = LinkDirection::new(cfg(0), 1);
        let other = packet_to(Ipv4Addr::new(8, 8, 8, 8), 60);
        assert_eq!(d.offer(t0, other), Verdict::Dropped(DropCause::NotForPeer));
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        assert_eq!(d.offer(t0, v6), Verdict::Dropped(DropCause::NotForPeer));
        assert_eq!(d.counters().dropped_not_for_peer, 2);
        assert_eq!(d.in_flight(), 0);
    }

    #[test]
    fn a_reseeded_direction_draws_as_a_fresh_one_with_that_seed() {
        let c = || DirectionConfig {
            loss: 0.3,
            jitter: ms(5),
            jitter_model: JitterModel::Fifo,
            ..cfg(20)
        };
        let t0 = Instant::now();
        // 300 packets 1 ms apart: which were lost, and when the others came out.
        let draws = |d: &mut LinkDirection, from: Instant| {
            let verdicts: Vec<Verdict> = (0..300u64)
                .map(|i| d.offer(from + ms(i), pkt(100)))
                .collect();
            let times: Vec<Duration> = drain(d, from, Duration::from_secs(1))
                .into_iter()
                .map(|(_, at)| at)
                .collect();
            (verdicts, times)
        };
        let mut fresh = LinkDirection::new(c(), 77);
        let mut used = LinkDirection::new(c(), 5);
        draws(&mut used, t0);
        used.reseed(77);
        let later = t0 + Duration::from_secs(10);
        assert_eq!(
            draws(&mut used, later),
            draws(&mut fresh, later),
            "history no longer matters"
        );
    }

    #[test]
    fn loss_rate_is_within_binomial_interval_and_seeded() {
        let n = 100_000u64;
        let run = |seed| {
            let t0 = Instant::now();
            let mut d = LinkDirection::new(
                DirectionConfig {
                    loss: 0.05,
                    ..cfg(0)
                },
                seed,
            );
            let verdicts: Vec<Verdict> = (0..n).map(|_| d.offer(t0, pkt(40))).collect();
            (d.counters().dropped_loss, verdicts)
        };
        let (lost, v1) = run(7);
        // 99 % interval of Binomial(100000, 0.05): 5000 ± 2.576·√(4750) ≈ ±178.
        assert!((4822..=5178).contains(&lost), "lost {lost}");
        let (_, v2) = run(7);
        assert_eq!(v1, v2, "same seed, same draws");
        let (_, v3) = run(8);
        assert_ne!(v1, v3, "another seed, other draws");
    }

    #[test]
    fn fifo_jitter_stays_in_range_never_reorders_and_skews_the_mean() {
        let t0 = Instant::now();
        let c = DirectionConfig {
            jitter: ms(5),
            jitter_model: JitterModel::Fifo,
            ..cfg(20)
        };
        let mut d = LinkDirection::new(c, 3);
        // One packet every 100 µs: far closer than the 10 ms jitter range.
        for i in 0..2000u64 {
            d.offer(t0 + Duration::from_micros(100 * i), pkt(1200));
        }
        let out = drain(&mut d, t0, Duration::from_secs(1));
        assert_eq!(out.len(), 2000);
        for w in out.windows(2) {
            assert!(w[0].0 < w[1].0, "FIFO order kept");
        }
        for (seq, at) in &out {
            let own = *at - Duration::from_micros(100 * seq);
            assert!(own >= ms(15), "{own:?}");
            assert!(own <= ms(25) + Duration::from_micros(100), "{own:?}");
        }
        let c = d.counters();
        assert_eq!(c.reorders, 0);
        // The documented skew: at this rate FIFO holds packets back (mean well above 0).
        assert!(
            c.fifo_hold_sum_ns / 2000 > 1_000_000,
            "{:?}",
            c.fifo_hold_sum_ns
        );
    }

    #[test]
    fn netem_style_jitter_reorders_and_counts_it_but_keeps_mean_delay() {
        let t0 = Instant::now();
        let c = DirectionConfig {
            jitter: ms(5),
            jitter_model: JitterModel::Reorder,
            ..cfg(20)
        };
        let mut d = LinkDirection::new(c, 3);
        for i in 0..2000u64 {
            d.offer(t0 + Duration::from_micros(1000 * i), pkt(1200));
        }
        let out = drain(&mut d, t0, Duration::from_secs(10));
        assert_eq!(out.len(), 2000);
        let reordered = d.counters().reorders;
        assert!(reordered > 100, "reorders {reordered}");
        let mean_ns: f64 = out
            .iter()
            .map(|(seq, at)| (*at - Duration::from_micros(1000 * seq)).as_nanos() as f64)
            .sum::<f64>()
            / 2000.0;
        // Uniform ±5 ms: the mean of 2000 draws is within ±0.2 ms of 20 ms (σ ≈ 0.065 ms).
        assert!((mean_ns - 20e6).abs() < 0.2e6, "{mean_ns}");
        assert_eq!(d.counters().fifo_hold_sum_ns, 0);
    }

    /// The `mobile` profile's direction: 30 ms one-way, ±15 ms, varying, knots every 60 ms.
    fn mobile(model: JitterModel) -> DirectionConfig {
        let p = Profile {
            jitter_model: model,
            ..Profile::simple("mobile", 60.0, 15.0, 0.0)
        };
        DirectionConfig::from_profile(&p, Direction::Up, vec![PEER], &[PEER], 1)
    }

    /// Offers a packet at every offset (ns from `t0`), releases each at its due time and
    /// returns the delays the model intended, in ms, with the direction's counters.
    fn intended_delays(
        cfg: DirectionConfig,
        seed: u64,
        offsets_ns: impl Iterator<Item = u64>,
    ) -> (Vec<f64>, Counters) {
        let t0 = Instant::now();
        let mut d = LinkDirection::new(cfg, seed);
        let mut delays = Vec::new();
        let mut release = |d: &mut LinkDirection, until: Instant| {
            while let Some(due) = d.next_deadline().filter(|due| *due <= until) {
                while let Some(p) = d.poll_release(due) {
                    delays.push((p.due - p.wire_exit).as_nanos() as f64 / 1e6);
                }
            }
        };
        for off in offsets_ns {
            let at = t0 + Duration::from_nanos(off);
            release(&mut d, at);
            d.offer(at, pkt(1200));
        }
        release(&mut d, t0 + Duration::from_secs(1 << 20));
        (delays, d.counters())
    }

    fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len() as f64
    }

    fn p5_p95_spread(v: &[f64]) -> f64 {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
        at(0.95) - at(0.05)
    }

    #[test]
    fn varying_jitter_keeps_mean_order_and_spread_at_any_packet_rate() {
        // Uniform ±15 ms implies a p5–p95 spread of 0.9 × 30 = 27 ms.
        let implied = 0.9 * 2.0 * 15.0;
        for (rate, packets) in [(10u64, 20_000u64), (1000, 200_000), (10_000, 200_000)] {
            let gap = 1_000_000_000 / rate;
            let (delays, c) = intended_delays(
                mobile(JitterModel::Varying),
                rate,
                (0..packets).map(|i| i * gap),
            );
            assert_eq!(delays.len() as u64, packets);
            let m = mean(&delays);
            assert!((m - 30.0).abs() < 0.3, "{rate}/s: mean {m}");
            assert_eq!(c.reorders, 0, "{rate}/s");
            assert_eq!(
                c.fifo_held, 0,
                "{rate}/s: order kept without holding anyone"
            );
            let spread = p5_p95_spread(&delays);
            assert!(
                (spread / implied - 1.0).abs() < 0.2,
                "{rate}/s: p5–p95 {spread} vs {implied}"
            );
            assert!(delays.iter().all(|d| (15.0..=45.0).contains(d)));
        }
    }

    #[test]
    fn fifo_jitter_raises_the_mean_with_the_packet_rate_varying_does_not() {
        let at = |model, rate: u64| {
            let gap = 1_000_000_000 / rate;
            mean(&intended_delays(mobile(model), 9, (0..20_000u64).map(|i| i * gap)).0)
        };
        let (slow, fast) = (at(JitterModel::Fifo, 10), at(JitterModel::Fifo, 10_000));
        assert!((slow - 30.0).abs() < 0.5, "{slow}");
        assert!(
            fast > 40.0,
            "FIFO at 10 000/s tends to delay + jitter: {fast}"
        );
        let fast = at(JitterModel::Varying, 10_000);
        assert!((fast - 30.0).abs() < 1.0, "{fast}");
    }

    #[test]
    fn the_mean_over_one_page_load_span_is_within_five_percent_in_most_seeds() {
        // ~1.5 s of a page50 load on `mobile`, packets spread over it; both directions.
        let span = (0..1500u64).map(|i| i * 1_000_000);
        let seeds = 1000;
        let within = (0..seeds)
            .filter(|&seed| {
                let up = mean(&intended_delays(mobile(JitterModel::Varying), seed, span.clone()).0);
                let down = mean(
                    &intended_delays(mobile(JitterModel::Varying), seed + 10_000, span.clone()).0,
                );
                ((up + down) / 60.0 - 1.0).abs() <= 0.05
            })
            .count();
        assert!(within * 100 >= seeds as usize * 95, "{within} of {seeds}");
    }

    #[test]
    fn the_offered_delay_is_the_profiles_even_when_the_traffic_follows_it() {
        // A window-limited flow sends faster while the delay is low (rate ∝ 1/delay): its
        // packets' mean delay falls below the profile's, the delay the link offered does not.
        let t0 = Instant::now();
        let mut d = LinkDirection::new(mobile(JitterModel::Varying), 21);
        let (mut t, mut sum, mut n) = (t0, 0.0, 0u64);
        while t < t0 + Duration::from_secs(300) {
            d.offer(t, pkt(1200));
            while let Some(due) = d.next_deadline() {
                let p = d.poll_release(due).unwrap();
                let delay = p.due - p.wire_exit;
                sum += delay.as_nanos() as f64 / 1e6;
                n += 1;
                // The next packet after a twentieth of this packet's delay.
                t = p.wire_exit + delay / 20;
            }
        }
        d.account_offered(t);
        let c = d.counters();
        let offered = c.offered_integral / c.offered_span_ns / 1e6;
        let packets = sum / n as f64;
        assert!((offered - 30.0).abs() < 0.3, "offered {offered}");
        assert!(
            packets < offered - 1.0,
            "packets {packets}, offered {offered}"
        );
        // Without jitter there is nothing to follow: both are the configured delay.
        let mut flat = LinkDirection::new(cfg(30), 1);
        flat.offer(t0, pkt(100));
        flat.account_offered(t0 + Duration::from_secs(1));
        let c = flat.counters();
        assert!((c.offered_integral / c.offered_span_ns / 1e6 - 30.0).abs() < 1e-9);
    }

    /// Real page50 loads on `mobile` (tests/fixtures/netem): arrival times per direction.
    fn recorded_loads() -> Vec<(String, Vec<u64>, Vec<u64>)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/netem/page50-mobile-timelines.json"
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let times = |x: &serde_json::Value| -> Vec<u64> {
            x.as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() * 1000)
                .collect()
        };
        let mut out = Vec::new();
        for (proto, loads) in v["loads"].as_object().unwrap() {
            for l in loads.as_array().unwrap() {
                out.push((proto.clone(), times(&l["up"]), times(&l["down"])));
            }
        }
        out
    }

    /// Mean model RTT over the recorded loads of each protocol, averaged over seeds, minus 60.
    fn rtt_bias_by_protocol(model: JitterModel, seeds: u64) -> BTreeMap<String, f64> {
        let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for seed in 0..seeds {
            for (i, (proto, up, down)) in recorded_loads().into_iter().enumerate() {
                let s = seed * 1000 + i as u64 * 2;
                let rtt = mean(&intended_delays(mobile(model), s, up.into_iter()).0)
                    + mean(&intended_delays(mobile(model), s + 1, down.into_iter()).0);
                let e = sums.entry(proto).or_default();
                e.0 += rtt - 60.0;
                e.1 += 1.0;
            }
        }
        sums.into_iter().map(|(k, (s, n))| (k, s / n)).collect()
    }

    #[test]
    fn recorded_page_loads_see_the_profile_rtt_whatever_the_protocol() {
        // The bias that made h1, h2 and h3 meet different links: FIFO's skew follows each
        // protocol's packet rate.
        let fifo = rtt_bias_by_protocol(JitterModel::Fifo, 20);
        assert!(fifo.values().all(|b| *b > 4.0), "{fifo:?}");
        let varying = rtt_bias_by_protocol(JitterModel::Varying, 200);
        assert_eq!(varying.len(), 3);
        for (proto, bias) in &varying {
            assert!(
                bias.abs() < 0.5,
                "{proto}: model RTT off by {bias} ms: {varying:?}"
            );
        }
    }

    #[test]
    fn rate_limit_serialises_back_to_back_and_queue_drops_tail() {
        let t0 = Instant::now();
        let c = DirectionConfig {
            rate_bps: Some(1e6), // 1250 B = 10 ms on the wire
            queue: Some(QueueLimit::Packets(3)),
            ..cfg(5)
        };
        let mut d = LinkDirection::new(c, 1);
        let verdicts: Vec<Verdict> = (0..6).map(|_| d.offer(t0, pkt(1250))).collect();
        // One on the wire, three waiting, the rest dropped at the tail.
        assert_eq!(&verdicts[..4], &[Verdict::Queued; 4]);
        assert_eq!(&verdicts[4..], &[Verdict::Dropped(DropCause::Queue); 2]);
        let out = drain(&mut d, t0, Duration::from_secs(1));
        let times: Vec<Duration> = out.iter().map(|x| x.1).collect();
        assert_eq!(times, vec![ms(15), ms(25), ms(35), ms(45)]);
        let c = d.counters();
        assert_eq!(c.dropped_queue, 2);
        assert_eq!(c.max_backlog_packets, 3);
        // Achieved rate while saturated: 3 × 1250 B in 30 ms = 1 Mbit/s.
        assert_eq!((c.busy_bytes, c.busy_ns), (3750, 30_000_000));
        // Once the wire drained, the queue accepts again.
        assert_eq!(d.offer(t0 + ms(40), pkt(1250)), Verdict::Queued);
    }

    #[test]
    fn byte_queue_limit_counts_waiting_bytes() {
        let t0 = Instant::now();
        let c = DirectionConfig {
            rate_bps: Some(1e6),
            queue: Some(QueueLimit::Bytes(3000)),
            ..cfg(0)
        };
        let mut d = LinkDirection::new(c, 1);
        let v: Vec<Verdict> = (0..4).map(|_| d.offer(t0, pkt(1000))).collect();
        // First on the wire, then 1000 + 1000 + 1000 ≤ 3000 waiting.
        assert!(v.iter().all(|x| *x == Verdict::Queued));
        assert_eq!(d.offer(t0, pkt(1000)), Verdict::Dropped(DropCause::Queue));
        // A small packet still fits? No: 3000 + 40 > 3000.
        assert_eq!(d.offer(t0, pkt(40)), Verdict::Dropped(DropCause::Queue));
        assert_eq!(d.counters().max_backlog_bytes, 3000);
    }

    #[test]
    fn saturated_rate_is_measured_at_release() {
        let t0 = Instant::now();
        let c = DirectionConfig {
            rate_bps: Some(10e6),
            queue: Some(QueueLimit::Packets(1000)),
            jitter: ms(2),
            ..cfg(10)
        };
        let mut d = LinkDirection::new(c, 9);
        // Offer 20 Mbit/s worth into a 10 Mbit/s link for 1 s (queue grows but does not fill).
        for i in 0..1666u64 {
            d.offer(t0 + Duration::from_micros(600 * i), pkt(1500));
        }
        drain(&mut d, t0, Duration::from_secs(10));
        let c = d.counters();
        let rate = c.busy_bytes as f64 * 8.0 / (c.busy_ns as f64 / 1e9);
        assert!((rate / 10e6 - 1.0).abs() < 0.01, "{rate}");
        assert_eq!(c.dropped_queue, 0);
    }

    #[test]
    fn counters_balance_and_take_resets() {
        let t0 = Instant::now();
        let c = DirectionConfig {
            loss: 0.3,
            ..cfg(10)
        };
        let mut d = LinkDirection::new(c, 5);
        for i in 0..1000u64 {
            d.offer(t0 + Duration::from_micros(50 * i), pkt(500));
        }
        drain(&mut d, t0, ms(20));
        let c = d.take_counters();
        assert_eq!(
            c.packets_in,
            c.packets_out + c.dropped_loss + d.in_flight() as u64
        );
        assert_eq!(c.bytes_in, 500 * 1000);
        assert_eq!(c.lateness.count(), c.packets_out);
        let again = d.counters();
        assert_eq!((again.packets_in, again.packets_out), (0, 0));
        assert_eq!(again.lateness.count(), 0);
    }

    #[test]
    fn reconfigure_applies_to_new_packets_only() {
        let t0 = Instant::now();
        let mut d = LinkDirection::new(cfg(20), 1);
        d.offer(t0, pkt(100));
        d.reconfigure(cfg(75));
        d.offer(t0 + ms(1), pkt(100));
        // Shorter delay again: FIFO keeps the new packet behind the 75 ms one.
        d.reconfigure(cfg(0));
        d.offer(t0 + ms(2), pkt(100));
        let out = drain(&mut d, t0, Duration::from_secs(1));
        let times: Vec<Duration> = out.iter().map(|x| x.1).collect();
        assert_eq!(times, vec![ms(20), ms(76), ms(76)]);
        assert_eq!(d.config().delay, Duration::ZERO);
    }

    #[test]
    fn same_seed_same_schedule() {
        let schedule = |seed| {
            let t0 = Instant::now();
            let c = DirectionConfig {
                jitter: ms(10),
                loss: 0.1,
                jitter_model: JitterModel::Reorder,
                ..cfg(30)
            };
            let mut d = LinkDirection::new(c, seed);
            for i in 0..500u64 {
                d.offer(t0 + Duration::from_micros(700 * i), pkt(64));
            }
            drain(&mut d, t0, Duration::from_secs(5))
        };
        assert_eq!(schedule(42), schedule(42));
        assert_ne!(schedule(42), schedule(43));
    }

    #[test]
    fn from_profile_halves_rtt_and_maps_rates() {
        let mut p = Profile::simple("x", 40.0, 5.0, 1.0);
        p.down_mbit = Some(12.0);
        p.queue_packets = Some(100);
        let down = DirectionConfig::from_profile(&p, Direction::Down, vec![PEER], &[PEER], 1);
        assert_eq!(down.delay, ms(20));
        assert_eq!(down.jitter, ms(5));
        assert!((down.loss - 0.01).abs() < 1e-12);
        assert_eq!(down.rate_bps, Some(12e6));
        assert_eq!(down.queue, Some(QueueLimit::Packets(100)));
        let up = DirectionConfig::from_profile(&p, Direction::Up, vec![], &[PEER], 1);
        assert_eq!((up.rate_bps, up.queue), (None, None));
    }

    /// A direction served by `trace` (no delay): every packet leaves at an opportunity.
    fn traced(trace: &str, queue: u32) -> DirectionConfig {
        DirectionConfig {
            trace: Some(Arc::new(CapacityTrace::parse(trace).unwrap())),
            queue: Some(QueueLimit::Packets(queue)),
            ..cfg(0)
        }
    }

    #[test]
    fn a_trace_s_delivery_opportunities_are_reproduced_exactly() {
        // The first 3 s of the shipped T-Mobile downlink, saturated with 1500-byte packets:
        // one packet per opportunity, each at its own sub-millisecond time.
        let (trace, _) = crate::config::capacity::built_in("TMobile-LTE-short.down").unwrap();
        let t0 = Instant::now();
        let mut d = LinkDirection::new(
            DirectionConfig {
                trace: Some(trace.clone()),
                queue: Some(QueueLimit::Packets(100_000)),
                ..cfg(0)
            },
            1,
        );
        d.start_timeline(t0, TraceStart::default());
        let span_ns = 3_000_000_000u64;
        let expected: Vec<u64> = trace
            .offsets_ns()
            .iter()
            .copied()
            .take_while(|o| *o < span_ns)
            .collect();
        for _ in 0..expected.len() + 100 {
            assert_eq!(d.offer(t0, pkt(1500)), Verdict::Queued);
        }
        let out = drain(&mut d, t0, Duration::from_nanos(span_ns - 1));
        let times: Vec<u64> = out.iter().map(|(_, at)| at.as_nanos() as u64).collect();
        assert_eq!(times.len(), expected.len(), "one packet per opportunity");
        assert_eq!(times, expected, "at exactly the opportunities' times");
        // Sub-millisecond: the opportunities of a busy millisecond are spread over it.
        let within_ms: std::collections::BTreeSet<u64> =
            times.iter().map(|t| t % 1_000_000).collect();
        assert!(within_ms.len() > 10, "{within_ms:?}");
        // In arrival order, and the achieved rate is the trace's over the span.
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
        let rate = trace.rate_between_bps(0, span_ns);
        let got = out.len() as f64 * 1500.0 * 8.0 / 3.0;
        assert!((got / rate - 1.0).abs() < 0.001, "{got} vs {rate}");
        // The saturated period's rate matches what the trace offered in it.
        let c = d.counters();
        let offered = c.busy_capacity_bytes / (c.busy_exit_ns as f64 / 1e9);
        let achieved = c.busy_bytes as f64 / (c.busy_ns as f64 / 1e9);
        assert!(
            (achieved / offered - 1.0).abs() < 0.01,
            "{achieved} vs {offered}"
        );
    }

    #[test]
    fn an_opportunity_carries_1500_bytes_of_small_packets_and_a_trace_repeats() {
        let t0 = Instant::now();
        // Opportunities at 0, 1 and 4 ms of every 10 ms.
        let mut d = LinkDirection::new(traced("0\n1\n4\n10\n", 100), 1);
        d.start_timeline(t0, TraceStart::default());
        // Queued just before the first opportunity (stamps 0 and 10 share millisecond 0: at 0
        // and 0.5 ms): 3 × 500 B share the first; 1000 B leaves at the second, and the next
        // 1000 B spans it and the one at 1 ms.
        for len in [500, 500, 500, 1000, 1000] {
            d.offer(t0 - Duration::from_micros(1), pkt(len));
        }
        let out = drain(&mut d, t0, ms(100));
        let at: Vec<Duration> = out.iter().map(|x| x.1).collect();
        assert_eq!(at, [ms(0), ms(0), ms(0), Duration::from_micros(500), ms(1)]);
        // Opportunities pass unused while the queue is empty: a packet at 5 ms waits for the
        // next repetition's first one (10 ms, which also holds the stamp 10).
        d.offer(t0 + ms(5), pkt(1500));
        let out = drain(&mut d, t0, ms(100));
        assert_eq!(out.iter().map(|x| x.1).collect::<Vec<_>>(), [ms(10)]);
        // A new timeline (the next run's mark) restarts the trace.
        d.start_timeline(t0 + ms(13), TraceStart::default());
        d.offer(t0 + ms(13), pkt(1500));
        let out = drain(&mut d, t0, ms(100));
        assert_eq!(out.iter().map(|x| x.1).collect::<Vec<_>>(), [ms(13)]);
    }

    #[test]
    fn a_trace_start_moves_the_mark_into_the_trace() {
        let t0 = Instant::now();
        // Opportunities at 0, 1 and 4 ms of every 10 ms; the mark at 4 ms into it (40 %).
        let mut d = LinkDirection::new(traced("0\n1\n4\n10\n", 100), 1);
        d.start_timeline(t0, TraceStart(400_000));
        for _ in 0..3 {
            d.offer(t0, pkt(1500));
        }
        let out = drain(&mut d, t0, ms(100));
        let at: Vec<Duration> = out.iter().map(|x| x.1).collect();
        // 4 ms → 0; the next repetition's 0 (and its second stamp at 0.5 ms) → 6 and 6.5 ms.
        assert_eq!(at, [ms(0), ms(6), Duration::from_micros(6_500)]);
    }

    /// A window-limited sender (Reno-like: slow start to the first drop, then +1 packet per
    /// window, halved at most once per round trip on a drop) saturating a 10 Mbit/s
    /// bottleneck, 20 ms base RTT, for 20 s. Returns the queue delays of the last 10 s.
    fn saturate(
        aqm: crate::config::profile::Aqm,
        queue: u32,
    ) -> crate::link::histogram::LatencySummary {
        let t0 = Instant::now();
        let mut d = LinkDirection::new(
            DirectionConfig {
                rate_bps: Some(10e6),
                queue: Some(QueueLimit::Packets(queue)),
                aqm: AqmConfig {
                    kind: aqm,
                    ..AqmConfig::default()
                },
                ..cfg(10)
            },
            3,
        );
        d.start_timeline(t0, TraceStart::default());
        d.keep_late_drops(true);
        let return_path = ms(10);
        let (mut cwnd, mut inflight, mut slow_start) = (10.0f64, 0u64, true);
        let mut acks: std::collections::VecDeque<Instant> = Default::default();
        let mut last_cut = t0;
        let mut now = t0;
        let mut measured = false;
        let end = t0 + Duration::from_secs(20);
        while now < end {
            let mut lost = 0;
            while (inflight as f64) < cwnd {
                if d.offer(now, pkt(1500)) != Verdict::Queued {
                    // Dropped on arrival: a loss, and no more sending until the next event.
                    lost += 1;
                    break;
                }
                inflight += 1;
            }
            // Dropped inside (CoDel): in flight until now.
            let late = d.take_late_drops().len() as u64;
            inflight -= late;
            lost += late;
            if lost > 0 && now - last_cut > ms(30) {
                cwnd = (cwnd / 2.0).max(2.0);
                last_cut = now;
                slow_start = false;
            }
            if !measured && now >= t0 + Duration::from_secs(10) {
                d.take_counters();
                measured = true;
            }
            // The next event: a release (its ack comes back later) or an ack.
            let next = [d.next_deadline(), acks.front().copied()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end);
            now = next;
            while let Some(p) = d.poll_release(now) {
                acks.push_back(p.due + return_path);
            }
            while acks.front().is_some_and(|a| *a <= now) {
                acks.pop_front();
                inflight -= 1;
                cwnd += if slow_start { 1.0 } else { 1.0 / cwnd };
            }
        }
        d.counters().sojourn.summary()
    }

    #[test]
    fn codel_keeps_the_standing_queue_near_its_target_where_droptail_grows_with_the_queue() {
        use crate::config::profile::Aqm;
        let codel = saturate(Aqm::Codel, 1000);
        let fq = saturate(Aqm::FqCodel, 1000);
        let (tail_small, tail_big) = (saturate(Aqm::Droptail, 250), saturate(Aqm::Droptail, 1000));
        // 5 ms target: the median queue delay stays near it (a few ms above while drops act).
        for q in [&codel, &fq] {
            assert!(q.median_us > 1_000.0 && q.median_us < 15_000.0, "{q:?}");
        }
        // Drop-tail fills its buffer, then saws between half and all of it (1.2 ms per packet
        // at 10 Mbit/s): the standing delay grows with the buffer.
        assert!(tail_small.median_us > 100_000.0, "{tail_small:?}");
        assert!(
            tail_big.median_us > 2.5 * tail_small.median_us,
            "{tail_big:?} vs {tail_small:?}"
        );
        assert!(tail_big.median_us > 40.0 * codel.median_us);
    }

    #[test]
    fn fq_codel_keeps_a_sparse_flow_out_of_a_bulk_flow_s_queue() {
        use crate::config::profile::Aqm;
        let run = |aqm| {
            let t0 = Instant::now();
            let mut d = LinkDirection::new(
                DirectionConfig {
                    rate_bps: Some(10e6),
                    queue: Some(QueueLimit::Packets(1000)),
                    aqm: AqmConfig {
                        kind: aqm,
                        ..AqmConfig::default()
                    },
                    ..cfg(0)
                },
                3,
            );
            d.start_timeline(t0, TraceStart::default());
            // A bulk flow 300 packets ahead, then a small packet of another flow.
            for _ in 0..300 {
                d.offer(t0, udp_pkt(1500, 1000));
            }
            d.offer(t0 + ms(1), udp_pkt(100, 2000));
            let mut sparse_at = None;
            while let Some(due) = d.next_deadline() {
                while let Some(p) = d.poll_release(due) {
                    if p.data.len() == 100 {
                        sparse_at = Some(due - t0);
                    }
                }
            }
            sparse_at.unwrap()
        };
        // Drop-tail: behind 300 × 1.2 ms. FQ-CoDel: next in turn (a new flow goes first).
        assert!(run(Aqm::Droptail) > ms(350), "{:?}", run(Aqm::Droptail));
        assert!(run(Aqm::FqCodel) < ms(4), "{:?}", run(Aqm::FqCodel));
    }

    /// A UDP packet of `len` bytes to the peer from client port `sport`.
    fn udp_pkt(len: usize, sport: u16) -> Vec<u8> {
        let mut p = pkt(len.max(28));
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 9, 8, 1]);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&443u16.to_be_bytes());
        p
    }

    fn events(outages: &[(u64, u64)], mode: OutageMode) -> EventsConfig {
        EventsConfig {
            outages: outages.iter().map(|(s, d)| (ms(*s), ms(*d))).collect(),
            mode,
            ..EventsConfig::default()
        }
    }

    #[test]
    fn a_drop_outage_loses_what_arrives_during_it_in_both_directions_alike() {
        let t0 = Instant::now();
        let c = DirectionConfig {
            events: events(&[(100, 50)], OutageMode::Drop),
            ..cfg(10)
        };
        let mut up = LinkDirection::new(c.clone(), 1);
        let mut down = LinkDirection::new(
            DirectionConfig {
                way: Direction::Down,
                ..c
            },
            2,
        );
        up.start_timeline(t0, TraceStart::default());
        down.start_timeline(t0, TraceStart::default());
        for d in [&mut up, &mut down] {
            let fates: Vec<Verdict> = [99, 100, 149, 150]
                .iter()
                .map(|t| d.offer(t0 + ms(*t), pkt(100)))
                .collect();
            assert_eq!(
                fates,
                [
                    Verdict::Queued,
                    Verdict::Dropped(DropCause::Outage),
                    Verdict::Dropped(DropCause::Outage),
                    Verdict::Queued
                ]
            );
            d.account_offered(t0 + ms(1000));
            let c = d.counters();
            assert_eq!((c.dropped_outage, c.outage_ns), (2, 50_000_000));
            // The packet already in flight at 100 ms still arrives (it left before).
            let out = drain(d, t0, Duration::from_secs(1));
            assert_eq!(
                out.iter().map(|x| x.1).collect::<Vec<_>>(),
                [ms(109), ms(160)]
            );
        }
    }

    #[test]
    fn outages_start_at_a_run_s_mark_not_when_the_link_starts_or_changes_profile() {
        let t0 = Instant::now();
        let c = DirectionConfig {
            events: events(&[(100, 50)], OutageMode::Drop),
            ..cfg(10)
        };
        let mut d = LinkDirection::new(c, 1);
        d.start_idle_timeline(t0);
        assert_eq!(d.offer(t0 + ms(120), pkt(100)), Verdict::Queued);
        d.account_offered(t0 + ms(300));
        d.start_timeline(t0 + ms(300), TraceStart::default());
        assert_eq!(
            d.offer(t0 + ms(420), pkt(100)),
            Verdict::Dropped(DropCause::Outage)
        );
        d.account_offered(t0 + ms(1000));
        assert_eq!(d.counters().outage_ns, 50_000_000);
    }

    #[test]
    fn a_hold_outage_queues_until_the_link_is_back_also_on_a_rate_limit() {
        let t0 = Instant::now();
        // Without a rate limit: held packets leave together when it ends.
        let mut d = LinkDirection::new(
            DirectionConfig {
                events: events(&[(100, 50)], OutageMode::Hold),
                ..cfg(10)
            },
            1,
        );
        d.start_timeline(t0, TraceStart::default());
        for t in [90, 120, 140] {
            assert_eq!(d.offer(t0 + ms(t), pkt(100)), Verdict::Queued);
        }
        let out = drain(&mut d, t0, Duration::from_secs(1));
        assert_eq!(
            out.iter().map(|x| x.1).collect::<Vec<_>>(),
            [ms(100), ms(160), ms(160)]
        );
        // With 1 Mbit/s (1250 B = 10 ms), the queue drains from the outage's end, in order.
        let mut d = LinkDirection::new(
            DirectionConfig {
                rate_bps: Some(1e6),
                queue: Some(QueueLimit::Packets(10)),
                events: events(&[(100, 50)], OutageMode::Hold),
                ..cfg(0)
            },
            1,
        );
        d.start_timeline(t0, TraceStart::default());
        for t in [95, 110, 120] {
            d.offer(t0 + ms(t), pkt(1250));
        }
        let out = drain(&mut d, t0, Duration::from_secs(1));
        // The first began at 95 ms and finishes; the others wait for 150 ms.
        assert_eq!(
            out.iter().map(|x| x.1).collect::<Vec<_>>(),
            [ms(105), ms(160), ms(170)]
        );
        // A saturated period does not run through an outage.
        assert_eq!(d.counters().busy_bytes, 1250);
    }

    #[test]
    fn nat_rebinding_rewrites_the_client_port_both_ways_from_its_time() {
        let t0 = Instant::now();
        let ev = EventsConfig {
            rebind_at: Some(ms(50)),
            ..EventsConfig::default()
        };
        let mut up = LinkDirection::new(
            DirectionConfig {
                events: ev.clone(),
                ..cfg(10)
            },
            1,
        );
        let mut down = LinkDirection::new(
            DirectionConfig {
                way: Direction::Down,
                events: ev,
                ..cfg(10)
            },
            2,
        );
        up.start_timeline(t0, TraceStart::default());
        down.start_timeline(t0, TraceStart::default());
        let port = |p: &[u8], at: usize| u16::from_be_bytes([p[20 + at], p[21 + at]]);
        up.offer(t0 + ms(49), udp_pkt(100, 40_000));
        up.offer(t0 + ms(50), udp_pkt(100, 40_000));
        let to = |dport: u16| {
            let mut p = udp_pkt(100, 443);
            p[22..24].copy_from_slice(&dport.to_be_bytes());
            p
        };
        down.offer(t0 + ms(35), to(40_000)); // released at 45 ms: before
        down.offer(t0 + ms(45), to(40_000 ^ 0x8000)); // at 55 ms, to the new mapping
        down.offer(t0 + ms(46), to(40_000)); // at 56 ms, to the old one: dropped
        let mut sources = Vec::new();
        while let Some(due) = up.next_deadline() {
            while let Some(p) = up.poll_release(due) {
                sources.push(port(&p.data, 0));
            }
        }
        assert_eq!(sources, [40_000, 40_000 ^ 0x8000]);
        let mut dests = Vec::new();
        while let Some(due) = down.next_deadline() {
            while let Some(p) = down.poll_release(due) {
                dests.push(port(&p.data, 2));
            }
        }
        assert_eq!(dests, [40_000, 40_000]);
        let c = down.counters();
        assert_eq!((c.nat_rewritten, c.dropped_nat, c.packets_out), (1, 1, 2));
        assert_eq!(up.counters().nat_rewritten, 1);
    }

    #[test]
    fn each_server_address_gets_its_extra_delay_and_keeps_its_own_order() {
        let t0 = Instant::now();
        let far = Ipv4Addr::new(10, 250, 0, 1);
        let mut d = LinkDirection::new(
            DirectionConfig {
                extra_delay: vec![(far, ms(30))],
                peers: vec![PEER, far],
                ..cfg(10)
            },
            1,
        );
        d.offer(t0, packet_to(far, 100));
        d.offer(t0 + ms(1), pkt(100));
        let out = drain(&mut d, t0, Duration::from_secs(1));
        // The near origin's packet is not held behind the far one's.
        assert_eq!(out, [(1, ms(11)), (0, ms(40))]);
        let p = Profile {
            origin_delay_ms: vec![0.0, 30.0],
            ..Profile::simple("x", 20.0, 0.0, 0.0)
        };
        let c = DirectionConfig::from_profile(&p, Direction::Down, vec![PEER], &[PEER, far], 1);
        assert_eq!(c.extra_delay, [(far, ms(30))]);
    }
}
