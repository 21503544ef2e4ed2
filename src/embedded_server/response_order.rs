//! Response scheduling by request priority (pure): the `--priorities` knob, RFC 9218's
//! `priority` header, and the order in which a connection's responses get the wire.
//!
//! Three policies:
//! - `ignore`: every response sends as soon as the transport takes it (hyper's h2 and quinn
//!   interleave all streams round-robin) — the embedded server's behaviour before the knob;
//! - `fifo`: one response at a time, in the order the requests arrived on the connection;
//! - `rfc9218`: the lowest urgency first, strictly; within an urgency, non-incremental responses
//!   one after another in request order, then incremental ones round-robin (RFC 9218 §10). A
//!   request without a usable header is `u=3`, not incremental (§4).
//!
//! Over h3 the order is quinn's own stream scheduler, fed [`quic_priority`] (higher first, equal
//! values round-robin); over h2 the server feeds one response body at a time to hyper
//! ([`Scheduler`]), so its order holds for every chunk it hands over.

use serde::{Deserialize, Serialize};

use crate::config::priority::Priority;

/// The `--priorities` knob.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Priorities {
    #[default]
    Ignore,
    Fifo,
    Rfc9218,
}

impl Priorities {
    pub fn name(self) -> &'static str {
        match self {
            Priorities::Ignore => "ignore",
            Priorities::Fifo => "fifo",
            Priorities::Rfc9218 => "rfc9218",
        }
    }

    pub fn is_ignore(&self) -> bool {
        *self == Priorities::Ignore
    }
}

/// A request's `priority` header as sent (several fields joined as one list, §4).
pub fn header(headers: &http::HeaderMap) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all("priority")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// quinn's priority for a request stream (higher first; equal priorities share round-robin).
/// `seq` is the request's position on its connection (0 first).
pub fn quic_priority(policy: Priorities, p: Priority, seq: u64) -> i32 {
    // Room for a million requests per connection in order; later ones share the last slot.
    const SLOTS: i64 = 1 << 20;
    let order = (SLOTS - 1 - (seq as i64).min(SLOTS - 2)) as i32; // 1..SLOTS-1, earlier higher
    match policy {
        Priorities::Ignore => 0,
        Priorities::Fifo => order,
        Priorities::Rfc9218 => {
            let level = (7 - i32::from(p.urgency.min(7))) * SLOTS as i32;
            if p.incremental {
                level
            } else {
                level + order
            }
        }
    }
}

/// HTTP/3 PRIORITY_UPDATE for a request stream (RFC 9218 §7.2).
const PRIORITY_UPDATE_REQUEST: u64 = 0xf0700;

/// Reads the PRIORITY_UPDATE frames out of a client's unidirectional stream as its bytes come
/// (the bytes themselves go on to h3 untouched). Anything but the control stream is left alone.
#[derive(Debug, Default)]
pub struct PriorityUpdates {
    buf: Vec<u8>,
    stream_type: Option<u64>,
}

/// A QUIC variable-length integer at the start of `b`, and its length (None: incomplete).
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(..len)?;
    let v = bytes[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |v, x| (v << 8) | u64::from(*x));
    Some((v, len))
}

impl PriorityUpdates {
    /// The stream's next bytes; returns each (request stream id, priority) they update.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<(u64, Priority)> {
        if self.stream_type.is_some_and(|t| t != 0) {
            return Vec::new(); // not the control stream
        }
        self.buf.extend_from_slice(bytes);
        let mut at = 0;
        if self.stream_type.is_none() {
            let Some((t, n)) = varint(&self.buf) else {
                return Vec::new();
            };
            self.stream_type = Some(t);
            at = n;
            if t != 0 {
                self.buf = Vec::new();
                return Vec::new();
            }
        }
        let mut updates = Vec::new();
        while let Some((kind, a)) = varint(&self.buf[at..]) {
            let Some((len, b)) = varint(&self.buf[at + a..]) else {
                break;
            };
            let start = at + a + b;
            let Some(payload) = self.buf.get(start..start + len as usize) else {
                break;
            };
            if kind == PRIORITY_UPDATE_REQUEST {
                if let Some((id, c)) = varint(payload) {
                    let value = String::from_utf8_lossy(&payload[c..]);
                    updates.push((id, Priority::parse(&value)));
                }
            }
            at = start + len as usize;
        }
        self.buf.drain(..at);
        updates
    }
}

/// One response waiting to send or sending.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u64,
    seq: u64,
    priority: Priority,
    /// When it last sent a chunk ([`Scheduler::sent`]'s clock): round-robin among incremental
    /// responses serves the one that waited longest.
    served_at: u64,
}

/// Which of a connection's open responses sends its next chunk (h2).
#[derive(Debug, Clone)]
pub struct Scheduler {
    policy: Priorities,
    open: Vec<Entry>,
    next_id: u64,
    clock: u64,
}

impl Scheduler {
    pub fn new(policy: Priorities) -> Scheduler {
        Scheduler {
            policy,
            open: Vec::new(),
            next_id: 0,
            clock: 0,
        }
    }

    /// A response that has its body ready; returns its ticket.
    pub fn open(&mut self, seq: u64, priority: Priority) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.open.push(Entry {
            id,
            seq,
            priority,
            served_at: 0,
        });
        id
    }

    /// A response that ended (sent all, or its stream went away).
    pub fn close(&mut self, id: u64) {
        self.open.retain(|e| e.id != id);
    }

    /// `id` handed a chunk to the transport.
    pub fn sent(&mut self, id: u64) {
        self.clock += 1;
        if let Some(e) = self.open.iter_mut().find(|e| e.id == id) {
            e.served_at = self.clock;
        }
    }

    /// Whether `id` may hand its next chunk over now.
    pub fn may_send(&self, id: u64) -> bool {
        self.policy == Priorities::Ignore || self.chosen() == Some(id)
    }

    /// The response whose turn it is (`None`: none open).
    pub fn chosen(&self) -> Option<u64> {
        let first = |it: &mut dyn Iterator<Item = &Entry>| it.min_by_key(|e| e.seq).map(|e| e.id);
        match self.policy {
            Priorities::Ignore | Priorities::Fifo => first(&mut self.open.iter()),
            Priorities::Rfc9218 => {
                let urgency = self.open.iter().map(|e| e.priority.urgency).min()?;
                let level = || {
                    self.open
                        .iter()
                        .filter(move |e| e.priority.urgency == urgency)
                };
                first(&mut level().filter(|e| !e.priority.incremental))
                    .or_else(|| level().min_by_key(|e| (e.served_at, e.seq)).map(|e| e.id))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn p(urgency: u8, incremental: bool) -> Priority {
        Priority::new(urgency, incremental)
    }

    #[test]
    fn priority_updates_are_read_from_the_control_stream_in_any_pieces() {
        // Stream type 0 (control), SETTINGS (4) of 2 bytes, a grease frame, then
        // PRIORITY_UPDATE (0xf0700, a 4-byte varint) for stream 8: "u=1, i".
        let mut bytes = vec![0x00, 0x04, 0x02, 0x01, 0x40, 0x21, 0x01, 0xff];
        let update = |id: u8, v: &str| {
            let mut f = vec![0x80, 0x0f, 0x07, 0x00, (1 + v.len()) as u8, id];
            f.extend_from_slice(v.as_bytes());
            f
        };
        bytes.extend(update(8, "u=1, i"));
        bytes.extend(update(12, "u=0"));
        for piece in [1, 3, 64] {
            let mut r = PriorityUpdates::default();
            let got: Vec<(u64, Priority)> = bytes.chunks(piece).flat_map(|c| r.feed(c)).collect();
            assert_eq!(
                got,
                vec![(8, p(1, true)), (12, p(0, false))],
                "pieces of {piece}"
            );
        }
        // Another stream (QPACK encoder, type 2) is left alone.
        let mut r = PriorityUpdates::default();
        assert!(r
            .feed(&[0x02, 0x80, 0x0f, 0x07, 0x00, 0x02, 0x08, b'i'])
            .is_empty());
        assert!(r.buf.is_empty());
    }

    #[test]
    fn quinn_priorities_order_urgency_then_request_order() {
        let r = Priorities::Rfc9218;
        let css = quic_priority(r, p(0, false), 40);
        let img_early = quic_priority(r, p(4, true), 1);
        let img_late = quic_priority(r, p(4, true), 39);
        let script = quic_priority(r, p(1, false), 2);
        assert!(css > script && script > img_early);
        // Incremental responses of one urgency share the wire.
        assert_eq!(img_early, img_late);
        // Non-incremental ones go one after another, and before the incremental ones.
        assert!(quic_priority(r, p(4, false), 1) > quic_priority(r, p(4, false), 2));
        assert!(quic_priority(r, p(4, false), 99) > img_early);
        // The lowest urgency's first request stays above the next urgency's.
        assert!(quic_priority(r, p(3, true), 0) > quic_priority(r, p(4, false), 0));
        assert!(
            quic_priority(Priorities::Fifo, css_p(), 1)
                > quic_priority(Priorities::Fifo, css_p(), 2)
        );
        assert_eq!(quic_priority(Priorities::Ignore, p(0, false), 5), 0);
        assert!(quic_priority(r, p(0, false), u64::MAX) > quic_priority(r, p(1, false), 0));
    }

    fn css_p() -> Priority {
        p(0, false)
    }

    /// The order a scheduler lets chunks out: each response needs `chunks[i]` chunks.
    fn schedule(policy: Priorities, reqs: &[(u64, Priority, usize)]) -> Vec<u64> {
        let mut s = Scheduler::new(policy);
        let mut left: Vec<(u64, usize)> = reqs
            .iter()
            .map(|&(seq, pr, n)| (s.open(seq, pr), n))
            .collect();
        let mut order = Vec::new();
        while let Some(id) = s.chosen() {
            assert!(s.may_send(id));
            let entry = left.iter_mut().find(|(i, _)| *i == id).unwrap();
            entry.1 -= 1;
            order.push(reqs[id as usize].0);
            s.sent(id);
            if entry.1 == 0 {
                s.close(id);
            }
        }
        order
    }

    #[test]
    fn rfc9218_serves_urgency_first_then_round_robin() {
        let reqs = [
            (0, p(4, true), 2),
            (1, p(4, true), 2),
            (2, p(0, false), 2),
            (3, p(4, false), 1),
        ];
        // The stylesheet (u=0) whole, the non-incremental u=4, then the images alternating.
        assert_eq!(
            schedule(Priorities::Rfc9218, &reqs),
            vec![2, 2, 3, 0, 1, 0, 1]
        );
        assert_eq!(schedule(Priorities::Fifo, &reqs), vec![0, 0, 1, 1, 2, 2, 3]);
    }

    #[test]
    fn ignore_lets_everyone_send() {
        let mut s = Scheduler::new(Priorities::Ignore);
        let a = s.open(0, p(7, false));
        let b = s.open(1, p(0, false));
        assert!(s.may_send(a) && s.may_send(b));
        let mut r = Scheduler::new(Priorities::Rfc9218);
        let a = r.open(0, p(7, false));
        let b = r.open(1, p(0, false));
        assert!(!r.may_send(a) && r.may_send(b));
        r.close(b);
        assert!(r.may_send(a));
    }
}
