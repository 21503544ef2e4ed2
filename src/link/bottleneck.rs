//! The bottleneck of one direction (pure): a queue discipline ([`Discipline`]) served by a
//! constant rate, by a recorded capacity trace, or (to hold packets through an outage) without a
//! rate limit. Event-driven: the caller offers packets in time order and asks for the events up
//! to a time ([`Bottleneck::advance`]); each event dequeues at its own instant, so CoDel sees the
//! sojourn time a real queue would give.
//!
//! - **Rate**: a packet is serialised at `rate` bits/s (IP bytes) behind the one before; the
//!   next dequeue is when the wire is free.
//! - **Trace**: at each delivery opportunity up to 1500 bytes leave (mahimahi's byte accounting:
//!   a packet may span opportunities, several small ones share one); unused opportunities are
//!   lost. A packet leaves at the opportunity that completes it.
//! - **Outages**: no service while the link is down (opportunities in an outage are lost).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::aqm::{Discipline, Queued};
use super::events::Timeline;
use crate::config::capacity::{CapacityTrace, OPPORTUNITY_BYTES};

/// What serves the queue.
#[derive(Debug, Clone, PartialEq)]
pub enum Service {
    /// No rate limit: every packet leaves when it may (after an outage).
    Unlimited,
    /// Constant rate, bits per second.
    Rate(f64),
    /// Delivery opportunities of a recorded trace, from the timeline's epoch and trace start.
    Trace(Arc<CapacityTrace>),
}

/// A packet leaving the bottleneck.
#[derive(Debug)]
pub struct Departure {
    pub packet: Queued,
    /// When it began to leave the queue (its sojourn ends here).
    pub dequeued: Instant,
    /// When its last byte left.
    pub exit: Instant,
    /// It was already queued when the packet before it left, no outage in between: the
    /// bottleneck was saturated from that departure to this one.
    pub back_to_back: bool,
    /// What the service offered between that departure and this one (bytes).
    pub capacity_bytes: f64,
}

/// A dropped packet and why: `true` for an AQM drop at dequeue, `false` for a queue overflow.
pub type Dropped = (Queued, bool);

#[derive(Debug)]
pub struct Bottleneck {
    service: Service,
    qdisc: Discipline,
    /// Rate: the wire is busy until then. Trace: opportunities before this are used or lost.
    free_at: Option<Instant>,
    /// Trace: a packet partly sent, and its bytes still to send.
    in_transit: Option<(Queued, u64, Instant)>,
    last_departure: Option<Instant>,
    /// An outage passed since the last departure (the saturated period is broken).
    outage_since_departure: bool,
    /// The next event, recomputed after every change.
    next: Option<Instant>,
    /// The timeline's start (the run's mark)…
    epoch: Instant,
    /// …is this far into a trace ([`crate::config::capacity::TraceStart`]).
    trace_offset_ns: u64,
    scratch: Vec<Queued>,
}

impl Bottleneck {
    pub fn new(service: Service, qdisc: Discipline, epoch: Instant) -> Bottleneck {
        Bottleneck {
            epoch,
            trace_offset_ns: 0,
            service,
            qdisc,
            free_at: None,
            in_transit: None,
            last_departure: None,
            outage_since_departure: false,
            next: None,
            scratch: Vec::new(),
        }
    }

    pub fn service(&self) -> &Service {
        &self.service
    }

    pub fn qdisc(&self) -> &Discipline {
        &self.qdisc
    }

    /// Packets inside (queued or partly sent).
    pub fn len(&self) -> usize {
        self.qdisc.len() + usize::from(self.in_transit.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes every packet out (partly sent first, then in arrival order): a reconfiguration
    /// moves them on.
    pub fn drain(&mut self) -> Vec<Queued> {
        let mut out: Vec<Queued> = self
            .in_transit
            .take()
            .map(|(p, _, _)| p)
            .into_iter()
            .collect();
        out.extend(self.qdisc.drain());
        self.next = None;
        out
    }

    /// When the next event is due (None: nothing queued).
    pub fn next_event(&self) -> Option<Instant> {
        self.next
    }

    /// Queues a packet that arrived at `now` (after [`Bottleneck::advance`] to `now`). `Err`:
    /// it did not fit. Packets dropped to make room go to `dropped`.
    pub fn enqueue(
        &mut self,
        now: Instant,
        p: Queued,
        tl: &mut Timeline,
        dropped: &mut Vec<Dropped>,
    ) -> Result<(), Queued> {
        let idle = self.is_empty();
        self.scratch.clear();
        let r = self.qdisc.enqueue(p, &mut self.scratch);
        dropped.extend(self.scratch.drain(..).map(|q| (q, false)));
        r?;
        if idle {
            // Service cannot have started before the packet was there.
            self.free_at = Some(self.free_at.map_or(now, |f| f.max(now)));
        }
        self.schedule(tl);
        Ok(())
    }

    /// Runs every event due at or before `now`, in time order: departures to `out`, the AQM's
    /// drops to `dropped`.
    pub fn advance(
        &mut self,
        now: Instant,
        tl: &mut Timeline,
        out: &mut Vec<Departure>,
        dropped: &mut Vec<Dropped>,
    ) {
        while let Some(t) = self.next.filter(|t| *t <= now) {
            self.serve(t, out, dropped);
            self.schedule(tl);
        }
    }

    /// The next event's time: the wire free or the next opportunity, outside outages. Also
    /// after a new timeline (a mark): a trace restarts from its beginning.
    pub fn schedule(&mut self, tl: &mut Timeline) {
        self.epoch = tl.epoch();
        self.trace_offset_ns = match &self.service {
            Service::Trace(trace) => tl.trace_start().offset_ns(trace.period_ns()),
            _ => 0,
        };
        if self.is_empty() {
            self.next = None;
            return;
        }
        let mut t = self.free_at.unwrap_or(self.epoch);
        loop {
            if let Service::Trace(trace) = &self.service {
                let since = self.trace_ns(t);
                t = self.epoch
                    + Duration::from_nanos(trace.next_at_or_after(since) - self.trace_offset_ns);
            }
            match tl.down_until(t) {
                Some(up) => {
                    t = up;
                    self.outage_since_departure = true;
                }
                None => break,
            }
        }
        self.next = Some(t);
    }

    /// `t` on the trace's clock.
    fn trace_ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64 + self.trace_offset_ns
    }

    fn depart(
        &mut self,
        packet: Queued,
        dequeued: Instant,
        exit: Instant,
        out: &mut Vec<Departure>,
    ) {
        let back_to_back = !self.outage_since_departure
            && !matches!(self.service, Service::Unlimited)
            && self.last_departure.is_some_and(|d| packet.enqueued <= d);
        let capacity_bytes = match (&self.service, self.last_departure) {
            (Service::Rate(bps), Some(d)) if back_to_back => (exit - d).as_secs_f64() * bps / 8.0,
            (Service::Trace(trace), Some(d)) if back_to_back => {
                // The opportunities in (d, exit], on the trace's clock.
                (trace.count_between(self.trace_ns(d), self.trace_ns(exit)) * OPPORTUNITY_BYTES)
                    as f64
            }
            _ => 0.0,
        };
        self.last_departure = Some(exit);
        self.outage_since_departure = false;
        out.push(Departure {
            packet,
            dequeued,
            exit,
            back_to_back,
            capacity_bytes,
        });
    }

    fn serve(&mut self, t: Instant, out: &mut Vec<Departure>, dropped: &mut Vec<Dropped>) {
        self.scratch.clear();
        match self.service.clone() {
            Service::Unlimited | Service::Rate(_) => {
                let p = self.qdisc.dequeue(t, &mut self.scratch);
                dropped.extend(self.scratch.drain(..).map(|q| (q, true)));
                match p {
                    Some(p) => {
                        let exit = match self.service {
                            Service::Rate(bps) => {
                                t + Duration::from_nanos(
                                    (p.data.len() as f64 * 8.0 / bps * 1e9).round() as u64,
                                )
                            }
                            _ => t,
                        };
                        self.free_at = Some(exit);
                        self.depart(p, t, exit, out);
                    }
                    None => self.free_at = Some(t),
                }
            }
            Service::Trace(_) => {
                let mut budget = OPPORTUNITY_BYTES;
                while budget > 0 {
                    let (p, left, dequeued) = match self.in_transit.take() {
                        Some(x) => x,
                        None => {
                            let p = self.qdisc.dequeue(t, &mut self.scratch);
                            dropped.extend(self.scratch.drain(..).map(|q| (q, true)));
                            match p {
                                Some(p) => {
                                    let len = p.data.len() as u64;
                                    (p, len, t)
                                }
                                None => break,
                            }
                        }
                    };
                    let take = budget.min(left);
                    budget -= take;
                    if left == take {
                        self.depart(p, dequeued, t, out);
                    } else {
                        self.in_transit = Some((p, left - take, dequeued));
                    }
                }
                // This opportunity is used (or lost): the next one is after it.
                self.free_at = Some(t + Duration::from_nanos(1));
            }
        }
    }
}
