//! The queue disciplines of the rate limiter (pure): drop-tail, CoDel (RFC 8289) and FQ-CoDel
//! (RFC 8290). The bottleneck enqueues arrivals and dequeues at each service event; CoDel
//! decides its drops at dequeue from how long the packet waited (its sojourn time).
//!
//! - **drop-tail**: one FIFO; an arrival that does not fit the limit is dropped.
//! - **CoDel**: one FIFO with the same limit; once the sojourn time stayed above `target` for
//!   `interval`, it drops at dequeue, the drops coming closer as `interval / √count`, until the
//!   sojourn time falls below `target` (or at most one MTU is queued).
//! - **FQ-CoDel**: 1024 queues, a packet's by a seeded hash of its 5-tuple, each with its own
//!   CoDel state; deficit round robin with `quantum` bytes, new flows before old ones; above the
//!   limit the packet at the head of the queue with the most bytes is dropped.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::profile::{Aqm, QueueLimit};

/// Buckets of FQ-CoDel (RFC 8290's and Linux's default).
pub const FQ_FLOWS: usize = 1024;
/// CoDel never drops when at most this many bytes are queued (RFC 8289's MAXPACKET).
const MAX_PACKET: u64 = 1500;

/// A packet waiting in the bottleneck.
#[derive(Debug)]
pub struct Queued {
    pub data: Vec<u8>,
    /// Arrival order in the direction.
    pub seq: u64,
    pub arrived: Instant,
    pub enqueued: Instant,
    /// The extra-delay class of its server address (0: none).
    pub class: usize,
}

impl Queued {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
}

/// A discipline's configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AqmConfig {
    pub kind: Aqm,
    pub target: Duration,
    pub interval: Duration,
    pub quantum: u32,
}

impl Default for AqmConfig {
    fn default() -> Self {
        AqmConfig {
            kind: Aqm::Droptail,
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            quantum: crate::config::profile::FQ_QUANTUM_BYTES,
        }
    }
}

/// A FIFO with its byte count.
#[derive(Debug, Default)]
struct Fifo {
    q: VecDeque<Queued>,
    bytes: u64,
}

impl Fifo {
    fn push(&mut self, p: Queued) {
        self.bytes += p.len();
        self.q.push_back(p);
    }

    fn pop(&mut self) -> Option<Queued> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len();
        Some(p)
    }
}

/// CoDel's state for one queue (RFC 8289 §5).
#[derive(Debug, Default, Clone)]
struct Codel {
    first_above_time: Option<Instant>,
    drop_next: Option<Instant>,
    count: u32,
    lastcount: u32,
    dropping: bool,
}

impl Codel {
    fn control_law(t: Instant, interval: Duration, count: u32) -> Instant {
        t + interval.div_f64(f64::from(count.max(1)).sqrt())
    }

    /// `dodequeue`: the head packet and whether it may be dropped.
    fn dodequeue(&mut self, q: &mut Fifo, now: Instant, cfg: &AqmConfig) -> (Option<Queued>, bool) {
        let Some(p) = q.pop() else {
            self.first_above_time = None;
            return (None, false);
        };
        let sojourn = now.saturating_duration_since(p.enqueued);
        let mut ok_to_drop = false;
        if sojourn < cfg.target || q.bytes <= MAX_PACKET {
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + cfg.interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(p), ok_to_drop)
    }

    /// CoDel's dequeue: the packet to send, its drops pushed to `dropped`.
    fn dequeue(
        &mut self,
        q: &mut Fifo,
        now: Instant,
        cfg: &AqmConfig,
        dropped: &mut Vec<Queued>,
    ) -> Option<Queued> {
        let (mut p, mut ok) = self.dodequeue(q, now, cfg);
        if p.is_none() {
            self.dropping = false;
            return None;
        }
        if self.dropping {
            if !ok {
                self.dropping = false;
            }
            while self.dropping && self.drop_next.is_some_and(|d| now >= d) {
                dropped.extend(p.take());
                self.count += 1;
                (p, ok) = self.dodequeue(q, now, cfg);
                if !ok {
                    self.dropping = false;
                } else {
                    let next = self.drop_next.unwrap_or(now);
                    self.drop_next = Some(Self::control_law(next, cfg.interval, self.count));
                }
            }
        } else if ok {
            dropped.extend(p.take());
            (p, _) = self.dodequeue(q, now, cfg);
            self.dropping = true;
            // Start near the drop rate that controlled the queue last time (RFC 8289).
            let delta = self.count.saturating_sub(self.lastcount);
            self.count = 1;
            let recent = self
                .drop_next
                .is_some_and(|d| now.saturating_duration_since(d) < cfg.interval * 16);
            if delta > 1 && recent {
                self.count = delta;
            }
            self.drop_next = Some(Self::control_law(now, cfg.interval, self.count));
            self.lastcount = self.count;
        }
        p
    }
}

/// One FQ-CoDel flow queue.
#[derive(Debug, Default)]
struct Flow {
    fifo: Fifo,
    codel: Codel,
    deficit: i64,
    /// In the new or the old list (else inactive).
    listed: bool,
}

#[derive(Debug)]
struct FqCodel {
    flows: Vec<Flow>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    hash_key: u64,
}

/// The queue of a bottleneck under one discipline.
#[derive(Debug)]
pub struct Discipline {
    cfg: AqmConfig,
    limit: Option<QueueLimit>,
    kind: Kind,
    len: usize,
    bytes: u64,
}

#[derive(Debug)]
enum Kind {
    DropTail(Fifo),
    Codel(Fifo, Codel),
    FqCodel(Box<FqCodel>),
}

impl Discipline {
    /// A discipline bounded by `limit` (`None`: unbounded); `seed` keys FQ-CoDel's flow hash.
    pub fn new(cfg: AqmConfig, limit: Option<QueueLimit>, seed: u64) -> Discipline {
        let kind = match cfg.kind {
            Aqm::Droptail => Kind::DropTail(Fifo::default()),
            Aqm::Codel => Kind::Codel(Fifo::default(), Codel::default()),
            Aqm::FqCodel => Kind::FqCodel(Box::new(FqCodel {
                flows: (0..FQ_FLOWS).map(|_| Flow::default()).collect(),
                new_flows: VecDeque::new(),
                old_flows: VecDeque::new(),
                hash_key: seed | 1,
            })),
        };
        Discipline {
            cfg,
            limit,
            kind,
            len: 0,
            bytes: 0,
        }
    }

    pub fn config(&self) -> &AqmConfig {
        &self.cfg
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// More queued than the limit allows.
    fn over(&self) -> bool {
        match self.limit {
            Some(QueueLimit::Packets(n)) => self.len > n as usize,
            Some(QueueLimit::Bytes(b)) => self.bytes > b,
            None => false,
        }
    }

    /// Queues `p` at `now`. `Err(p)`: it did not fit (tail drop). FQ-CoDel instead makes room
    /// by dropping from the fattest flow's head; those packets go to `dropped`.
    pub fn enqueue(&mut self, p: Queued, dropped: &mut Vec<Queued>) -> Result<(), Queued> {
        let len = p.len();
        match &mut self.kind {
            Kind::DropTail(f) | Kind::Codel(f, _) => {
                if match self.limit {
                    Some(QueueLimit::Packets(n)) => self.len + 1 > n as usize,
                    Some(QueueLimit::Bytes(b)) => self.bytes + len > b,
                    None => false,
                } {
                    return Err(p);
                }
                f.push(p);
            }
            Kind::FqCodel(fq) => {
                let i = fq.flow_of(&p.data);
                let flow = &mut fq.flows[i];
                flow.fifo.push(p);
                if !flow.listed {
                    flow.listed = true;
                    flow.deficit = i64::from(self.cfg.quantum);
                    fq.new_flows.push_back(i);
                }
            }
        }
        self.len += 1;
        self.bytes += len;
        while self.over() {
            let Kind::FqCodel(fq) = &mut self.kind else {
                break;
            };
            let fattest = (0..fq.flows.len())
                .max_by_key(|i| fq.flows[*i].fifo.bytes)
                .expect("flows");
            let Some(d) = fq.flows[fattest].fifo.pop() else {
                break;
            };
            self.len -= 1;
            self.bytes -= d.len();
            dropped.push(d);
        }
        Ok(())
    }

    /// The packet to serve at `now` (`None`: nothing left); packets the AQM discards on the way
    /// go to `dropped`.
    pub fn dequeue(&mut self, now: Instant, dropped: &mut Vec<Queued>) -> Option<Queued> {
        let before = dropped.len();
        let p = match &mut self.kind {
            Kind::DropTail(f) => f.pop(),
            Kind::Codel(f, c) => c.dequeue(f, now, &self.cfg, dropped),
            Kind::FqCodel(fq) => fq.dequeue(now, &self.cfg, dropped),
        };
        for d in &dropped[before..] {
            self.len -= 1;
            self.bytes -= d.len();
        }
        if let Some(p) = &p {
            self.len -= 1;
            self.bytes -= p.len();
        }
        p
    }

    /// Every queued packet, in arrival order (a reconfiguration moves them to a new queue).
    pub fn drain(&mut self) -> Vec<Queued> {
        let mut out: Vec<Queued> = match &mut self.kind {
            Kind::DropTail(f) | Kind::Codel(f, _) => f.q.drain(..).collect(),
            Kind::FqCodel(fq) => fq
                .flows
                .iter_mut()
                .flat_map(|fl| fl.fifo.q.drain(..).collect::<Vec<_>>())
                .collect(),
        };
        out.sort_by_key(|p| p.seq);
        self.len = 0;
        self.bytes = 0;
        out
    }
}

impl FqCodel {
    /// The flow bucket of an IPv4 packet: a keyed hash of protocol, addresses and ports.
    fn flow_of(&self, data: &[u8]) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ self.hash_key;
        let mut eat = |b: &[u8]| {
            for x in b {
                h ^= u64::from(*x);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        if data.len() >= 20 {
            let ihl = usize::from(data[0] & 0x0f) * 4;
            eat(&data[9..10]);
            eat(&data[12..20]);
            if matches!(data[9], 6 | 17) && data.len() >= ihl + 4 {
                eat(&data[ihl..ihl + 4]);
            }
        }
        // Finalise (splitmix64) so the low bits mix too.
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((h ^ (h >> 31)) % FQ_FLOWS as u64) as usize
    }

    fn dequeue(
        &mut self,
        now: Instant,
        cfg: &AqmConfig,
        dropped: &mut Vec<Queued>,
    ) -> Option<Queued> {
        loop {
            let (i, from_new) = match self.new_flows.front() {
                Some(&i) => (i, true),
                None => (*self.old_flows.front()?, false),
            };
            let flow = &mut self.flows[i];
            if flow.deficit <= 0 {
                flow.deficit += i64::from(cfg.quantum);
                self.pop_front(from_new);
                self.old_flows.push_back(i);
                continue;
            }
            match flow.codel.dequeue(&mut flow.fifo, now, cfg, dropped) {
                Some(p) => {
                    flow.deficit -= p.data.len() as i64;
                    return Some(p);
                }
                None => {
                    self.pop_front(from_new);
                    // An emptied new flow goes to the old list once, so it cannot regain
                    // priority by emptying at every round (RFC 8290 §4.2).
                    if from_new && !self.old_flows.is_empty() {
                        self.old_flows.push_back(i);
                    } else {
                        self.flows[i].listed = false;
                    }
                }
            }
        }
    }

    fn pop_front(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(seq: u64, at: Instant, len: usize, sport: u16) -> Queued {
        let mut data = vec![0u8; len.max(28)];
        data[0] = 0x45;
        data[9] = 17;
        data[12..16].copy_from_slice(&[10, 0, 0, 2]);
        data[16..20].copy_from_slice(&[10, 0, 0, 1]);
        data[20..22].copy_from_slice(&sport.to_be_bytes());
        data[22..24].copy_from_slice(&443u16.to_be_bytes());
        Queued {
            data,
            seq,
            arrived: at,
            enqueued: at,
            class: 0,
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn cfg(kind: Aqm) -> AqmConfig {
        AqmConfig {
            kind,
            ..AqmConfig::default()
        }
    }

    #[test]
    fn droptail_keeps_order_and_drops_arrivals_over_the_limit() {
        let t0 = Instant::now();
        let mut d = Discipline::new(cfg(Aqm::Droptail), Some(QueueLimit::Packets(2)), 1);
        let mut dropped = Vec::new();
        assert!(d.enqueue(pkt(0, t0, 100, 1), &mut dropped).is_ok());
        assert!(d.enqueue(pkt(1, t0, 100, 2), &mut dropped).is_ok());
        assert_eq!(
            d.enqueue(pkt(2, t0, 100, 3), &mut dropped).unwrap_err().seq,
            2
        );
        assert_eq!((d.len(), d.bytes()), (2, 200));
        assert_eq!(d.dequeue(t0 + ms(500), &mut dropped).unwrap().seq, 0);
        assert_eq!(d.dequeue(t0 + ms(500), &mut dropped).unwrap().seq, 1);
        assert!(d.dequeue(t0, &mut dropped).is_none());
        assert!(dropped.is_empty() && d.is_empty());
    }

    #[test]
    fn codel_drops_only_after_an_interval_above_target_then_faster() {
        let t0 = Instant::now();
        let mut d = Discipline::new(cfg(Aqm::Codel), None, 1);
        let mut dropped = Vec::new();
        // A standing queue: 300 packets queued at t0, one dequeued every 2 ms.
        for i in 0..300 {
            d.enqueue(pkt(i, t0, 1500, 1), &mut dropped).unwrap();
        }
        let mut drop_times = Vec::new();
        let mut t = t0;
        while !d.is_empty() {
            t += ms(2);
            let before = dropped.len();
            d.dequeue(t, &mut dropped);
            drop_times.extend(std::iter::repeat_n(t, dropped.len() - before));
        }
        // Sojourn ≥ 5 ms from the third dequeue on: the first drop one interval later.
        let first = drop_times[0] - t0;
        assert!(first >= ms(100) && first <= ms(110), "{first:?}");
        // Then the next ones at interval/√count: 100 ms later, then ~71 ms, ~58 ms.
        assert!(drop_times.len() >= 4, "{drop_times:?}");
        let gap = |i: usize| (drop_times[i + 1] - drop_times[i]).as_secs_f64() * 1e3;
        assert!((gap(0) - 100.0).abs() <= 2.0, "{}", gap(0));
        assert!((gap(1) - 70.7).abs() <= 2.0, "{}", gap(1));
        assert!((gap(2) - 57.7).abs() <= 2.0, "{}", gap(2));
    }

    #[test]
    fn fq_codel_serves_flows_in_turn_and_a_new_sparse_flow_first() {
        let t0 = Instant::now();
        let mut d = Discipline::new(cfg(Aqm::FqCodel), Some(QueueLimit::Packets(1000)), 7);
        let mut dropped = Vec::new();
        for i in 0..10 {
            d.enqueue(pkt(i, t0, 1500, 1000), &mut dropped).unwrap();
        }
        for i in 10..20 {
            d.enqueue(pkt(i, t0, 1500, 2000), &mut dropped).unwrap();
        }
        let order: Vec<u64> = (0..6)
            .map(|_| d.dequeue(t0, &mut dropped).unwrap().seq)
            .collect();
        // Deficit round robin, quantum 1514: a new flow's first turn lets two 1500-byte
        // packets through (the deficit only has to be positive), then the flows alternate.
        assert_eq!(order, [0, 1, 10, 11, 2, 12], "{order:?}");
        // A sparse flow arriving now goes before both.
        d.enqueue(pkt(99, t0, 80, 3000), &mut dropped).unwrap();
        assert_eq!(d.dequeue(t0, &mut dropped).unwrap().seq, 99);
    }

    #[test]
    fn fq_codel_over_its_limit_drops_from_the_fattest_flow() {
        let t0 = Instant::now();
        let mut d = Discipline::new(cfg(Aqm::FqCodel), Some(QueueLimit::Packets(5)), 7);
        let mut dropped = Vec::new();
        for i in 0..5 {
            d.enqueue(pkt(i, t0, 1500, 1000), &mut dropped).unwrap();
        }
        // The sparse flow's packet gets in; the bulk flow loses its head.
        d.enqueue(pkt(5, t0, 100, 2000), &mut dropped).unwrap();
        assert_eq!(dropped.iter().map(|p| p.seq).collect::<Vec<_>>(), [0]);
        assert_eq!(d.len(), 5);
        let drained: Vec<u64> = d.drain().iter().map(|p| p.seq).collect();
        assert_eq!(drained, [1, 2, 3, 4, 5]);
    }
}
