//! The link model of one direction: a pure, deterministic state machine in the style of
//! quinn-proto. It never touches a clock or a socket: the caller hands it packets with the time
//! they arrived ([`LinkDirection::offer`]), asks for packets that are due
//! ([`LinkDirection::poll_release`]) and sleeps until [`LinkDirection::next_deadline`]. The same
//! inputs and seed always give the same outputs, so it is unit-tested with time passed in.
//!
//! Per packet, in this order:
//! 1. **destination filter**: only IPv4 packets to the peer go on (others: `NotForPeer`);
//! 2. **i.i.d. loss** with probability `loss`;
//! 3. **rate limit** (optional): the packet is serialised at `rate_bps` bits/s (IP bytes, no
//!    layer-2 overhead) behind the packets before it; a drop-tail queue of packets or bytes
//!    bounds how many may wait for the wire (the one being serialised does not count);
//! 4. **delay**: one-way `delay` plus the jitter offset of the configured [`JitterModel`]:
//!    - `Varying` (default): the offset of a smoothly varying process at the packet's time
//!      ([`VaryingDelay`]): packets close together see nearly the same delay, never reorder, and
//!      the mean delay is the profile's at any packet rate;
//!    - `Fifo`: an independent uniform draw in `±jitter`, held back behind the packet before it.
//!      Once packets arrive closer together than the jitter range, each waits for the slowest
//!      recent draw, so the mean delay rises with the packet rate (counted in
//!      [`Counters::fifo_hold_sum_ns`]);
//!    - `Reorder`: an independent uniform draw that may overtake others, as netem does.
//!
//! Every model but `Reorder` keeps arrival order; under `Varying` the hold is zero by
//! construction (it only guards a reconfiguration to a shorter delay).
//!
//! The delay the model intends for a packet (`due − wire exit`) and the delay it really got
//! (`release − wire exit`) are both summed, so a run can be checked against its own model.
//!
//! **Reconfiguration** applies to packets offered afterwards; packets already scheduled keep
//! their release time (and, except under `Reorder`, later packets still leave after them).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::histogram::Histogram;
use super::jitter::VaryingDelay;
use crate::profile::{JitterModel, Profile, QueueLimit};

/// Which way a packet travels. `Up` is client → server, `Down` is server → client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    Up,
    Down,
}

/// The behaviour of one direction of the link.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionConfig {
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
    /// Drop-tail limit of the queue in front of the rate limit; `None` means unbounded.
    pub queue: Option<QueueLimit>,
    /// Accept only IPv4 packets to these addresses (empty: accept everything). The server side
    /// may have several (one per replayed origin address).
    pub peers: Vec<Ipv4Addr>,
}

impl DirectionConfig {
    /// A direction without delay, loss or rate limit.
    pub fn transparent() -> Self {
        DirectionConfig {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_model: JitterModel::Varying,
            jitter_interval: Duration::ZERO,
            loss: 0.0,
            rate_bps: None,
            queue: None,
            peers: Vec::new(),
        }
    }

    /// The configuration of one direction of a (validated) profile; `peers` are the addresses
    /// packets in this direction may be sent to.
    pub fn from_profile(p: &Profile, dir: Direction, peers: Vec<Ipv4Addr>) -> Self {
        let rate_mbit = match dir {
            Direction::Up => p.up_mbit,
            Direction::Down => p.down_mbit,
        };
        DirectionConfig {
            delay: duration_ms(p.one_way_ms()),
            jitter: duration_ms(p.jitter_ms),
            jitter_model: p.jitter_model,
            jitter_interval: duration_ms(p.jitter_interval_ms()),
            loss: (p.loss_pct / 100.0).clamp(0.0, 1.0),
            rate_bps: rate_mbit.map(|m| m * 1e6),
            queue: rate_mbit.and(p.queue_limit()),
            peers,
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
    /// The drop-tail queue in front of the rate limit was full.
    Queue,
    /// Not an IPv4 packet to the peer's address.
    NotForPeer,
    /// A test hook dropped this chosen packet ([`LinkDirection::drop_chosen`]).
    Injected,
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
    /// Scheduled for release at its due time.
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
    /// When the rate limit finished serialising it (= `arrived` without a rate limit).
    pub wire_exit: Instant,
    /// When it is to be released.
    pub due: Instant,
    /// How much later than its own delay the kept order made it.
    pub fifo_hold: Duration,
    /// It had to wait for the wire behind an earlier packet (the link was saturated).
    pub queued: bool,
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
    /// Packets released after a packet that arrived later than them.
    pub reorders: u64,
    /// Release time minus due time of every released packet.
    pub lateness: Histogram,
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
    /// Most packets / bytes seen waiting in the rate-limit queue at once.
    pub max_backlog_packets: u64,
    pub max_backlog_bytes: u64,
    /// Saturated periods (back-to-back serialisation), measured at release: their length and
    /// the bytes released in them after their first packet — i.e. the achieved rate when busy.
    pub busy_ns: u64,
    pub busy_bytes: u64,
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
    /// Latest due time handed out (FIFO order keeps later packets behind it).
    last_due: Option<Instant>,
    /// When the rate limit's wire is free again.
    wire_free_at: Option<Instant>,
    /// Packets waiting for the wire: (serialisation start, length).
    waiting: VecDeque<(Instant, u64)>,
    waiting_bytes: u64,
    highest_released_seq: Option<u64>,
    /// The saturated period in progress at the release side: (first release, last release, bytes).
    busy_run: Option<(Instant, Instant, u64)>,
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
            cfg,
            loss_rng,
            jitter_rng,
            varying,
            offered_since: None,
            next_seq: 0,
            scheduled: BinaryHeap::new(),
            last_due: None,
            wire_free_at: None,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            highest_released_seq: None,
            busy_run: None,
            chosen_drop: None,
            counters: Counters::default(),
        }
    }

    pub fn config(&self) -> &DirectionConfig {
        &self.cfg
    }

    /// Accounts the delay the link offered up to `now`: the configured delay plus the varying
    /// model's offset, integrated over time — the mean a packet sent at a random moment would
    /// get, whatever the traffic. (`fifo` and `reorder` have no time structure: their offered
    /// mean is the configured delay; the `fifo` hold is the traffic's doing and shows only in
    /// the packets' intended delays.)
    pub fn account_offered(&mut self, now: Instant) {
        let since = *self.offered_since.get_or_insert(now);
        if now <= since {
            return;
        }
        let span = (now - since).as_nanos() as f64;
        let jitter = self.varying.as_mut().map_or(0.0, |v| v.take_integral(now));
        self.counters.offered_integral += self.cfg.delay.as_nanos() as f64 * span + jitter;
        self.counters.offered_span_ns += span;
        self.offered_since = Some(now);
    }

    /// Applies a new behaviour to packets offered from now on (scheduled ones keep their time).
    /// Call [`LinkDirection::account_offered`] first to close the old behaviour's accounting.
    pub fn reconfigure(&mut self, cfg: DirectionConfig) {
        if cfg.rate_bps.is_none() {
            self.waiting.clear();
            self.waiting_bytes = 0;
            self.wire_free_at = None;
        }
        let same_jitter = (cfg.jitter, cfg.jitter_model, cfg.jitter_interval)
            == (
                self.cfg.jitter,
                self.cfg.jitter_model,
                self.cfg.jitter_interval,
            );
        if !same_jitter {
            self.varying = varying_process(&cfg, &mut self.jitter_rng);
        }
        self.cfg = cfg;
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

    /// [`LinkDirection::offer`] that hands a dropped packet back (a capture records it).
    pub fn offer_keeping_drops(
        &mut self,
        now: Instant,
        data: Vec<u8>,
    ) -> Result<(), (DropCause, Vec<u8>)> {
        // The offered delay is accounted from the first packet (or accounting) on.
        self.offered_since.get_or_insert(now);
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
        if self.cfg.loss > 0.0 && self.loss_rng.random::<f64>() < self.cfg.loss {
            self.counters.dropped_loss += 1;
            return Err((DropCause::Loss, data));
        }
        let (wire_exit, queued) = match self.cfg.rate_bps {
            None => (now, false),
            Some(rate) => match self.serialise(now, len, rate) {
                Some(x) => x,
                None => {
                    self.counters.dropped_queue += 1;
                    return Err((DropCause::Queue, data));
                }
            },
        };
        let own_due = wire_exit + self.delay_at(wire_exit);
        let keep_order = self.cfg.jitter_model != JitterModel::Reorder;
        let due = match self.last_due {
            Some(last) if keep_order && last > own_due => last,
            _ => own_due,
        };
        self.last_due = Some(self.last_due.map_or(due, |l| l.max(due)));
        let seq = self.next_seq;
        self.next_seq += 1;
        self.scheduled.push(Scheduled(Packet {
            data,
            seq,
            arrived: now,
            wire_exit,
            due,
            fifo_hold: due - own_due,
            queued,
        }));
        Ok(())
    }

    /// Rate stage: when the packet leaves the wire and whether it had to wait; `None` if the
    /// drop-tail queue is full.
    fn serialise(&mut self, now: Instant, len: u64, rate_bps: f64) -> Option<(Instant, bool)> {
        while let Some(&(start, l)) = self.waiting.front() {
            if start > now {
                break;
            }
            self.waiting.pop_front();
            self.waiting_bytes -= l;
        }
        let full = match self.cfg.queue {
            Some(QueueLimit::Packets(n)) => self.waiting.len() as u64 >= n as u64,
            Some(QueueLimit::Bytes(b)) => self.waiting_bytes + len > b,
            None => false,
        };
        if full {
            return None;
        }
        let start = match self.wire_free_at {
            Some(free) if free > now => free,
            _ => now,
        };
        let serialisation =
            Duration::from_nanos((len as f64 * 8.0 / rate_bps * 1e9).round() as u64);
        let exit = start + serialisation;
        self.wire_free_at = Some(exit);
        let queued = start > now;
        if queued {
            self.waiting.push_back((start, len));
            self.waiting_bytes += len;
            let c = &mut self.counters;
            c.max_backlog_packets = c.max_backlog_packets.max(self.waiting.len() as u64);
            c.max_backlog_bytes = c.max_backlog_bytes.max(self.waiting_bytes);
        }
        Some((exit, queued))
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
    /// difference to the due time is recorded as lateness.
    pub fn poll_release(&mut self, now: Instant) -> Option<Packet> {
        if self.scheduled.peek()?.0.due > now {
            return None;
        }
        let p = self.scheduled.pop()?.0;
        let len = p.data.len() as u64;
        let c = &mut self.counters;
        c.packets_out += 1;
        c.bytes_out += len;
        c.lateness.record((now - p.due).as_nanos() as u64);
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
            Some((first, _, bytes)) if p.queued => Some((first, now, bytes + len)),
            previous => {
                close_run(c, previous);
                Some((now, now, 0))
            }
        };
        Some(p)
    }

    /// When the earliest scheduled packet is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.scheduled.peek().map(|s| s.0.due)
    }

    /// Packets scheduled but not yet released.
    pub fn in_flight(&self) -> usize {
        self.scheduled.len()
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
        self.busy_run = self.busy_run.map(|(_, last, _)| (last, last, 0));
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

fn close_run(c: &mut Counters, run: Option<(Instant, Instant, u64)>) {
    if let Some((first, last, bytes)) = run {
        if bytes > 0 {
            c.busy_ns += (last - first).as_nanos() as u64;
            c.busy_bytes += bytes;
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
    /// clock), and returns (seq, release time offset) pairs.
    fn drain(d: &mut LinkDirection, t0: Instant, until: Duration) -> Vec<(u64, Duration)> {
        let mut out = Vec::new();
        while let Some(due) = d.next_deadline() {
            if due > t0 + until {
                break;
            }
            let p = d
                .poll_release(due)
                .expect("due packet is released at its deadline");
            out.push((p.seq, due - t0));
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
        DirectionConfig::from_profile(&p, Direction::Up, vec![PEER])
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
                let p = d.poll_release(due).expect("due");
                delays.push((p.due - p.wire_exit).as_nanos() as f64 / 1e6);
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
        let down = DirectionConfig::from_profile(&p, Direction::Down, vec![PEER]);
        assert_eq!(down.delay, ms(20));
        assert_eq!(down.jitter, ms(5));
        assert!((down.loss - 0.01).abs() < 1e-12);
        assert_eq!(down.rate_bps, Some(12e6));
        assert_eq!(down.queue, Some(QueueLimit::Packets(100)));
        let up = DirectionConfig::from_profile(&p, Direction::Up, vec![]);
        assert_eq!((up.rate_bps, up.queue), (None, None));
    }
}
