//! One direction of a byte stream (a TCP direction, a QUIC stream) as the wire carried it
//! (pure): its bytes, gathered from segments or frames in any order, repeated or overlapping;
//! when each byte was first sent (a retransmission does not move it: the sender's order is its
//! first transmissions); and when each became readable in order at the receiver.

use std::collections::BTreeMap;

use super::reassembly::Reassembly;

/// Bytes first sent together.
#[derive(Debug)]
struct Piece {
    bytes: Vec<u8>,
    sent_ns: u64,
}

#[derive(Debug, Default)]
pub struct WireBytes {
    /// Disjoint pieces by their first offset.
    pieces: BTreeMap<u64, Piece>,
    order: Reassembly,
    /// (end of the bytes readable in order, since when), both ascending.
    readable: Vec<(u64, u64)>,
}

impl WireBytes {
    /// `data` at stream offset `offset` entered the link at `at_ns`. Call in the order the
    /// sender sent (ties: any): the bytes' first transmission is the one that counts.
    pub fn sent(&mut self, offset: u64, data: &[u8], at_ns: u64) {
        let Some(end) = offset.checked_add(data.len() as u64) else {
            return;
        };
        for (a, b) in self.uncovered(offset, end) {
            let bytes = data[(a - offset) as usize..(b - offset) as usize].to_vec();
            self.pieces.insert(
                a,
                Piece {
                    bytes,
                    sent_ns: at_ns,
                },
            );
        }
    }

    /// The parts of `[start, end)` no piece holds yet.
    fn uncovered(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let from = self
            .pieces
            .range(..=start)
            .next_back()
            .map_or(start, |(s, _)| *s);
        let mut out = Vec::new();
        let mut cursor = start;
        for (&s, p) in self.pieces.range(from..end) {
            let e = s + p.bytes.len() as u64;
            if e <= cursor {
                continue;
            }
            if s > cursor {
                out.push((cursor, s));
            }
            cursor = e;
            if cursor >= end {
                break;
            }
        }
        if cursor < end {
            out.push((cursor, end));
        }
        out
    }

    /// Bytes `[start, end)` reached the receiver at `at_ns`. Call in the order of arrival.
    pub fn arrived(&mut self, start: u64, end: u64, at_ns: u64) {
        if self.order.receive(start, end, at_ns).delivered > 0 {
            self.readable.push((self.order.next(), at_ns));
        }
    }

    /// The stream from its first byte up to the first byte missing.
    pub fn contiguous(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (&s, p) in &self.pieces {
            if s != out.len() as u64 {
                break;
            }
            out.extend_from_slice(&p.bytes);
        }
        out
    }

    /// Every byte held, contiguous or not.
    pub fn held(&self) -> u64 {
        self.pieces.values().map(|p| p.bytes.len() as u64).sum()
    }

    /// When the bytes of `[start, end)` were first sent: (ns, bytes) in stream order, bytes
    /// never seen left out.
    pub fn first_sent(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        if start >= end {
            return Vec::new();
        }
        let from = self
            .pieces
            .range(..=start)
            .next_back()
            .map_or(start, |(s, _)| *s);
        let mut out = Vec::new();
        for (&s, p) in self.pieces.range(from..end) {
            let e = s + p.bytes.len() as u64;
            let n = e.min(end).saturating_sub(s.max(start));
            if n > 0 {
                out.push((p.sent_ns, n));
            }
        }
        out
    }

    /// When the byte at `offset` was first sent.
    pub fn sent_at(&self, offset: u64) -> Option<u64> {
        let (&s, p) = self.pieces.range(..=offset).next_back()?;
        (offset < s + p.bytes.len() as u64).then_some(p.sent_ns)
    }

    /// When the byte at `offset` became readable in order at the receiver.
    pub fn readable_at(&self, offset: u64) -> Option<u64> {
        let i = self.readable.partition_point(|&(end, _)| end <= offset);
        self.readable.get(i).map(|&(_, at)| at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_transmissions_keep_their_time_and_bytes_assemble_in_any_order() {
        let data: Vec<u8> = (0..100).collect();
        let mut w = WireBytes::default();
        w.sent(0, &data[..40], 10);
        w.sent(60, &data[60..], 20); // 40..60 lost
        w.sent(30, &data[30..70], 30); // the retransmission overlaps both sides
        assert_eq!(w.contiguous(), data);
        assert_eq!(w.held(), 100);
        assert_eq!(w.first_sent(0, 100), vec![(10, 40), (30, 20), (20, 40)]);
        assert_eq!(w.first_sent(35, 45), vec![(10, 5), (30, 5)]);
        assert_eq!(
            (w.sent_at(39), w.sent_at(40), w.sent_at(99)),
            (Some(10), Some(30), Some(20))
        );
        assert_eq!(w.sent_at(100), None);
        // A gap ends the contiguous part.
        let mut g = WireBytes::default();
        g.sent(0, &data[..10], 1);
        g.sent(20, &data[20..30], 2);
        assert_eq!(g.contiguous(), &data[..10]);
        assert_eq!(g.first_sent(0, 30), vec![(1, 10), (2, 10)]);
        g.sent(u64::MAX - 1, &data, 3); // past the end of offsets: ignored
        assert_eq!(g.held(), 20);
    }

    #[test]
    fn bytes_become_readable_when_the_hole_before_them_fills() {
        let mut w = WireBytes::default();
        w.arrived(0, 10, 5);
        w.arrived(20, 30, 6); // waits for 10..20
        w.arrived(10, 20, 9);
        assert_eq!(w.readable_at(0), Some(5));
        assert_eq!(w.readable_at(9), Some(5));
        assert_eq!(w.readable_at(10), Some(9));
        assert_eq!(w.readable_at(29), Some(9));
        assert_eq!(w.readable_at(30), None);
    }
}
