//! The order check: whether a server's send order followed its requests' urgency (RFC 9218),
//! from the wire's view of a connection's streams ([`super::streams`]) (pure).
//!
//! The definitions, on the trace's clock (server send times, and when the server could read
//! what the client sent):
//!
//! - A stream's **priority** at time t: its request's `priority` field ([`Priority::parse`];
//!   u=3, not incremental when absent), replaced whole by each PRIORITY_UPDATE from when the
//!   server could read it (`arrived_ms`, else `sent_ms`) on.
//! - A stream is **waiting** over `[start, last)`: from when the server could read its
//!   request (`arrived_ms`; else `requested_ms`; else its first body byte) until its last body
//!   byte was sent. A server cannot send a response before its request arrived, so no stream
//!   waits before that; one without body bytes never waits. The server's think time counts as
//!   waiting (the server had the request).
//! - A body byte of stream B sent at t is **contested** when another stream of the same
//!   connection was waiting at t with an urgency other than B's at t: the server had a choice
//!   between urgencies. It is **inverted** when one of those was strictly more urgent (a lower
//!   u) than B.
//! - `inverted_share` = inverted bytes / contested bytes (None when none was contested): 0 for
//!   a server that always sends the most urgent response it has, about 1 − 1/n for one that
//!   round-robins n streams of which one is the most urgent. Incrementality does not enter:
//!   it orders streams of one urgency, which are never contested against each other.

use serde::{Deserialize, Serialize};

use super::streams::{WireConnection, WireStream, WireStreams};
use crate::config::priority::Priority;

/// How well the send order followed urgency (see the module's definitions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderSummary {
    /// inverted / contested; None when no byte was contested.
    pub inverted_share: Option<f64>,
    pub inverted_bytes: u64,
    pub contested_bytes: u64,
    /// Every body byte of the streams checked.
    pub body_bytes: u64,
    /// Per urgency (a stream's at its first body byte), most urgent first.
    pub by_urgency: Vec<UrgencyTimes>,
}

/// The streams of one urgency and when their bytes went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UrgencyTimes {
    pub urgency: u8,
    pub streams: usize,
    pub body_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_byte_ms: Option<f64>,
}

/// A stream with its priorities over time and when it waited.
struct Timed<'a> {
    stream: &'a WireStream,
    header: Priority,
    /// (from when, priority), in time order.
    updates: Vec<(f64, Priority)>,
    waiting: Option<(f64, f64)>,
}

impl<'a> Timed<'a> {
    fn new(stream: &'a WireStream) -> Self {
        let mut updates: Vec<(f64, Priority)> = stream
            .updates
            .iter()
            .map(|u| (u.arrived_ms.unwrap_or(u.sent_ms), Priority::parse(&u.value)))
            .collect();
        updates.sort_by(|a, b| a.0.total_cmp(&b.0));
        let start = stream
            .arrived_ms
            .or(stream.requested_ms)
            .or(stream.first_byte_ms());
        Timed {
            stream,
            header: stream
                .priority
                .as_deref()
                .map(Priority::parse)
                .unwrap_or_default(),
            updates,
            waiting: start.zip(stream.last_byte_ms()),
        }
    }

    fn urgency_at(&self, t: f64) -> u8 {
        let update = self.updates.iter().rev().find(|(at, _)| *at <= t);
        update.map_or(self.header, |u| u.1).urgency
    }

    fn waits_at(&self, t: f64) -> bool {
        self.waiting
            .is_some_and(|(start, last)| start <= t && t < last)
    }
}

/// The order check of one connection.
pub fn check(conn: &WireConnection) -> OrderSummary {
    let timed: Vec<Timed> = conn.streams.iter().map(Timed::new).collect();
    let mut out = OrderSummary::default();
    for (i, b) in timed.iter().enumerate() {
        for &(t, n) in &b.stream.sends {
            let mine = b.urgency_at(t);
            let others = timed
                .iter()
                .enumerate()
                .filter(|(j, a)| *j != i && a.waits_at(t))
                .map(|(_, a)| a.urgency_at(t));
            let (mut contested, mut inverted) = (false, false);
            for u in others {
                contested |= u != mine;
                inverted |= u < mine;
            }
            out.body_bytes += n;
            out.contested_bytes += if contested { n } else { 0 };
            out.inverted_bytes += if inverted { n } else { 0 };
        }
        add_urgency(&mut out.by_urgency, b);
    }
    out.finish()
}

/// The order check of every connection, summed (bytes are only contested within one).
pub fn check_all(wire: &WireStreams) -> OrderSummary {
    let mut out = OrderSummary::default();
    for c in &wire.connections {
        let one = check(c);
        out.inverted_bytes += one.inverted_bytes;
        out.contested_bytes += one.contested_bytes;
        out.body_bytes += one.body_bytes;
        for u in one.by_urgency {
            merge_urgency(&mut out.by_urgency, u);
        }
    }
    out.finish()
}

fn add_urgency(list: &mut Vec<UrgencyTimes>, s: &Timed) {
    let at = s.stream.first_byte_ms().or(s.waiting.map(|w| w.0));
    let urgency = at.map_or(s.header.urgency, |t| s.urgency_at(t));
    merge_urgency(
        list,
        UrgencyTimes {
            urgency,
            streams: 1,
            body_bytes: s.stream.body_bytes,
            first_byte_ms: s.stream.first_byte_ms(),
            last_byte_ms: s.stream.last_byte_ms(),
        },
    );
}

fn merge_urgency(list: &mut Vec<UrgencyTimes>, u: UrgencyTimes) {
    let Some(have) = list.iter_mut().find(|h| h.urgency == u.urgency) else {
        list.push(u);
        return;
    };
    have.streams += u.streams;
    have.body_bytes += u.body_bytes;
    let pick = |a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64| match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    };
    have.first_byte_ms = pick(have.first_byte_ms, u.first_byte_ms, f64::min);
    have.last_byte_ms = pick(have.last_byte_ms, u.last_byte_ms, f64::max);
}

impl OrderSummary {
    fn finish(mut self) -> Self {
        self.inverted_share = (self.contested_bytes > 0)
            .then(|| self.inverted_bytes as f64 / self.contested_bytes as f64);
        self.by_urgency.sort_by_key(|u| u.urgency);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::super::streams::{PriorityUpdate, WireProtocol};
    use super::*;

    fn stream(id: u64, priority: &str, arrived: f64, sends: &[(f64, u64)]) -> WireStream {
        WireStream {
            id,
            priority: (!priority.is_empty()).then(|| priority.to_string()),
            arrived_ms: Some(arrived),
            body_bytes: sends.iter().map(|s| s.1).sum(),
            sends: sends.to_vec(),
            ..Default::default()
        }
    }

    fn conn(streams: Vec<WireStream>) -> WireConnection {
        WireConnection {
            protocol: WireProtocol::H2,
            client: "10.0.0.1:5000".parse().unwrap(),
            server: "10.0.0.2:443".parse().unwrap(),
            opened_ms: 0.0,
            streams,
        }
    }

    /// One stylesheet (u=0) and three images (u=5, incremental), all requested at 1 ms.
    fn page(interleaved: bool) -> WireConnection {
        let mut css = Vec::new();
        let mut images: [Vec<(f64, u64)>; 3] = Default::default();
        for k in 0..12 {
            let t = 2.0 + f64::from(k);
            if interleaved {
                // Round-robin: css, img1, img2, img3, css, ...
                match k % 4 {
                    0 => css.push((t, 1000)),
                    n => images[n as usize - 1].push((t, 1000)),
                }
            } else if k < 3 {
                css.push((t, 1000));
            } else {
                images[((k - 3) / 3) as usize].push((t, 1000));
            }
        }
        let mut streams = vec![stream(1, "u=0", 1.0, &css)];
        for (n, sends) in images.iter().enumerate() {
            streams.push(stream(3 + 2 * n as u64, "u=5, i", 1.0, sends));
        }
        conn(streams)
    }

    #[test]
    fn strict_urgency_order_inverts_nothing() {
        let s = check(&page(false));
        assert_eq!(s.inverted_bytes, 0);
        // The stylesheet's bytes were the contested ones (images waited meanwhile).
        assert_eq!(s.contested_bytes, 3000);
        assert_eq!(s.inverted_share, Some(0.0));
        assert_eq!(s.body_bytes, 12_000);
        assert_eq!(s.by_urgency.len(), 2);
        let css = &s.by_urgency[0];
        assert_eq!((css.urgency, css.streams, css.body_bytes), (0, 1, 3000));
        assert_eq!(
            (css.first_byte_ms, css.last_byte_ms),
            (Some(2.0), Some(4.0))
        );
        let img = &s.by_urgency[1];
        assert_eq!(
            (
                img.urgency,
                img.streams,
                img.first_byte_ms,
                img.last_byte_ms
            ),
            (5, 3, Some(5.0), Some(13.0))
        );
    }

    #[test]
    fn round_robin_inverts_most_contested_bytes() {
        let s = check(&page(true));
        // Images' bytes before the stylesheet's last (at 10 ms): at 3,4,5 and 7,8,9 ms.
        assert_eq!(s.inverted_bytes, 6000);
        // …plus the stylesheet's own bytes while images waited (2, 6, 10 ms).
        assert_eq!(s.contested_bytes, 9000);
        assert_eq!(s.inverted_share, Some(6000.0 / 9000.0));
        let wire = WireStreams {
            connections: vec![page(true), page(false)],
            ..Default::default()
        };
        let all = check_all(&wire);
        assert_eq!((all.inverted_bytes, all.contested_bytes), (6000, 12_000));
        assert_eq!(all.by_urgency[1].streams, 6);
    }

    #[test]
    fn a_request_the_server_had_not_read_yet_is_not_waiting() {
        // The stylesheet arrives at 20 ms, after the image went.
        let late = conn(vec![
            stream(1, "u=0", 20.0, &[(21.0, 100)]),
            stream(3, "u=5", 1.0, &[(2.0, 100), (3.0, 100)]),
        ]);
        let s = check(&late);
        assert_eq!((s.inverted_bytes, s.contested_bytes), (0, 0));
        assert_eq!(s.inverted_share, None);
    }

    #[test]
    fn a_priority_update_counts_from_when_it_arrived() {
        // Two u=3 streams; stream 3 becomes u=1 at 5 ms: stream 1's bytes after that are
        // inverted, those before are not contested.
        let mut raised = stream(3, "", 1.0, &[(10.0, 100)]);
        raised.updates.push(PriorityUpdate {
            sent_ms: 4.0,
            arrived_ms: Some(5.0),
            value: "u=1".into(),
        });
        let c = conn(vec![
            stream(
                1,
                "",
                1.0,
                &[(2.0, 100), (4.0, 100), (6.0, 100), (8.0, 100)],
            ),
            raised,
        ]);
        let s = check(&c);
        assert_eq!((s.inverted_bytes, s.contested_bytes), (200, 200));
        // Stream 3's urgency at its first byte is the updated one.
        assert_eq!(
            s.by_urgency.iter().map(|u| u.urgency).collect::<Vec<_>>(),
            [1, 3]
        );
    }
}
