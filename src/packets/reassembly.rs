//! In-order delivery of one byte stream (a TCP direction, a QUIC stream) as its receiver sees
//! it: bytes that arrive beyond a hole wait until the hole is filled. An *episode* is a time
//! during which some bytes waited; its blocked bytes are the bytes that waited in it (pure).

/// How much of a stream's beginning a [`Prefix`] keeps: enough for the handshake messages
/// pagebench reads (ClientHello, ServerHello, EncryptedExtensions, whether a Certificate
/// follows).
pub const PREFIX_BYTES: usize = 16 * 1024;

/// The first bytes of a byte stream (a QUIC CRYPTO stream, a TCP direction), gathered from
/// pieces in any order, overlapping or repeated.
#[derive(Debug, Default)]
pub struct Prefix {
    bytes: Vec<u8>,
    have: Vec<bool>,
}

impl Prefix {
    /// Takes `data` at stream offset `offset` (what lies beyond [`PREFIX_BYTES`] is dropped).
    pub fn insert(&mut self, offset: u64, data: &[u8]) {
        let Ok(start) = usize::try_from(offset) else {
            return;
        };
        if start >= PREFIX_BYTES {
            return;
        }
        let end = start.saturating_add(data.len()).min(PREFIX_BYTES);
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
            self.have.resize(end, false);
        }
        self.bytes[start..end].copy_from_slice(&data[..end - start]);
        self.have[start..end].fill(true);
    }

    /// The bytes from the start up to the first gap.
    pub fn contiguous(&self) -> &[u8] {
        let n = self.have.iter().position(|h| !h).unwrap_or(self.have.len());
        &self.bytes[..n]
    }
}

/// One time some bytes waited behind a hole.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// Where the hole began in the stream (the first byte not yet received).
    pub hole_at: u64,
    /// When the first byte behind the hole arrived, and when the hole was filled (ns on the
    /// trace's clock; `end_ns` = the end of the trace if it never was).
    pub start_ns: u64,
    pub end_ns: u64,
    pub filled: bool,
    /// Distinct bytes that arrived beyond the hole and waited.
    pub blocked_bytes: u64,
}

impl Episode {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

#[derive(Debug, Default)]
pub struct Reassembly {
    /// The first byte not yet delivered in order.
    next: u64,
    /// Disjoint ranges `[start, end)` received beyond `next`, sorted.
    pending: Vec<(u64, u64)>,
    open: Option<Episode>,
}

/// What one arrival did.
#[derive(Debug, Default, PartialEq)]
pub struct Arrival {
    /// New bytes delivered in order by this arrival (its own and the waiting ones it freed).
    pub delivered: u64,
    /// New bytes that now wait behind a hole.
    pub waiting: u64,
    /// The episode this arrival ended.
    pub closed: Option<Episode>,
    /// An episode this arrival started.
    pub opened: bool,
}

impl Reassembly {
    pub fn starting_at(next: u64) -> Self {
        Reassembly {
            next,
            ..Default::default()
        }
    }

    pub fn next(&self) -> u64 {
        self.next
    }

    /// Whether bytes are waiting behind a hole.
    pub fn blocked(&self) -> bool {
        self.open.is_some()
    }

    /// Bytes `[start, end)` arrived at `at_ns`.
    pub fn receive(&mut self, start: u64, end: u64, at_ns: u64) -> Arrival {
        let mut a = Arrival::default();
        if end <= self.next || end <= start {
            return a;
        }
        if start <= self.next {
            let before = self.next;
            self.next = end;
            // Waiting ranges now reachable go out too.
            while let Some(&(s, e)) = self.pending.first() {
                if s > self.next {
                    break;
                }
                self.next = self.next.max(e);
                self.pending.remove(0);
            }
            let freed: u64 = self.next - before;
            a.delivered = freed;
            if self.pending.is_empty() {
                if let Some(mut ep) = self.open.take() {
                    ep.end_ns = at_ns;
                    ep.filled = true;
                    a.closed = Some(ep);
                }
            } else if let Some(ep) = &mut self.open {
                // A partial fill: the rest still waits behind the next hole.
                ep.hole_at = self.next;
            }
            return a;
        }
        let added = insert(&mut self.pending, start, end);
        a.waiting = added;
        match &mut self.open {
            Some(ep) => ep.blocked_bytes += added,
            None => {
                a.opened = true;
                self.open = Some(Episode {
                    hole_at: self.next,
                    start_ns: at_ns,
                    end_ns: at_ns,
                    filled: false,
                    blocked_bytes: added,
                });
            }
        }
        a
    }

    /// The episode still open at the end of the trace (`end_ns`), if any.
    pub fn finish(&mut self, end_ns: u64) -> Option<Episode> {
        self.open.take().map(|mut ep| {
            ep.end_ns = end_ns.max(ep.start_ns);
            ep
        })
    }
}

/// Adds `[start, end)` to the sorted disjoint set; returns how many bytes were new.
fn insert(set: &mut Vec<(u64, u64)>, start: u64, end: u64) -> u64 {
    let mut s = start;
    let mut e = end;
    let mut covered = 0;
    let mut i = 0;
    while i < set.len() {
        let (a, b) = set[i];
        if b < s {
            i += 1;
            continue;
        }
        if a > e {
            break;
        }
        // Overlapping or touching: merge.
        covered += b.min(end).saturating_sub(a.max(start));
        s = s.min(a);
        e = e.max(b);
        set.remove(i);
    }
    set.insert(i, (s, e));
    (end - start) - covered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_gathered_in_any_order_up_to_its_first_gap_and_its_size() {
        let data: Vec<u8> = (0..=255).cycle().take(400).collect();
        let mut p = Prefix::default();
        for (a, b) in [(200, 400), (20, 60), (3, 25), (30, 31)] {
            p.insert(a as u64, &data[a..b]);
            assert!(p.contiguous().is_empty());
        }
        p.insert(0, &data[..3]);
        assert_eq!(p.contiguous(), &data[..60]);
        p.insert(50, &data[50..200]);
        assert_eq!(p.contiguous(), &data[..]);
        p.insert(u64::MAX, &[1, 2]);
        p.insert(PREFIX_BYTES as u64 - 1, &[9, 9, 9]);
        assert_eq!(p.contiguous(), &data[..]);
    }

    #[test]
    fn in_order_data_never_waits() {
        let mut r = Reassembly::default();
        for i in 0..10 {
            let a = r.receive(i * 100, (i + 1) * 100, i);
            assert_eq!(a.delivered, 100);
            assert_eq!(a.waiting, 0);
        }
        assert!(r.finish(99).is_none());
    }

    #[test]
    fn bytes_behind_a_hole_wait_until_it_is_filled() {
        let mut r = Reassembly::default();
        r.receive(0, 100, 0);
        // 100..200 is lost; 200..500 arrive and wait.
        assert!(r.receive(200, 300, 10).opened);
        r.receive(300, 400, 11);
        r.receive(350, 500, 12); // overlaps: only 400..500 is new
        let a = r.receive(100, 200, 50);
        assert_eq!(a.delivered, 400);
        let ep = a.closed.unwrap();
        assert_eq!(ep.hole_at, 100);
        assert_eq!((ep.start_ns, ep.end_ns, ep.duration_ns()), (10, 50, 40));
        assert_eq!(ep.blocked_bytes, 300);
        assert!(ep.filled);
        assert!(!r.blocked());
        // A duplicate changes nothing.
        assert_eq!(r.receive(0, 200, 60), Arrival::default());
    }

    #[test]
    fn a_partial_fill_keeps_the_episode_open_and_one_never_filled_ends_with_the_trace() {
        let mut r = Reassembly::default();
        r.receive(0, 10, 0);
        r.receive(20, 30, 1); // hole 10..20
        r.receive(40, 50, 2); // hole 30..40
        let a = r.receive(10, 20, 5);
        assert_eq!(a.delivered, 20);
        assert!(a.closed.is_none());
        assert!(r.blocked());
        let ep = r.finish(100).unwrap();
        assert_eq!(ep.hole_at, 30);
        assert_eq!(ep.blocked_bytes, 20);
        assert!(!ep.filled);
        assert_eq!(ep.end_ns, 100);
    }

    #[test]
    fn insert_counts_only_new_bytes() {
        let mut set = vec![(10, 20), (30, 40)];
        assert_eq!(insert(&mut set, 15, 35), 10);
        assert_eq!(set, vec![(10, 40)]);
        assert_eq!(insert(&mut set, 50, 60), 10);
        assert_eq!(insert(&mut set, 40, 50), 10);
        assert_eq!(set, vec![(10, 60)]);
    }
}
