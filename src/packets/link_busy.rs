//! When the link's bottleneck was busy, as the client saw it (pure).
//!
//! A packet the link delivered took its size at the bottleneck's rate to leave the bottleneck,
//! then the one-way delay to arrive: on the client's clock it kept the link busy for
//! `size × 8 / rate` up to its arrival. The union of those intervals over every packet the
//! link delivered to the client (every connection's, acknowledgements included) is when the
//! link was moving bytes at its rate; the rest of the time it was idle — waiting for round
//! trips, for a server, for the browser. Arrivals are what the browser's timestamps follow,
//! so the intervals are on the arrival side (shifted by the one-way delay from the
//! bottleneck's own). On a link driven by a capacity trace the rate is the trace's mean over
//! the run (a moment below it shows as short idle gaps, one above it as overlapping packets).

/// Busy intervals `[start, end)` on the trace's clock, ns: ascending, disjoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BusyPeriods {
    periods: Vec<(u64, u64)>,
}

impl BusyPeriods {
    /// The busy periods of a link of `mbit` Mbit/s that delivered packets of `bytes` (IP)
    /// at `arrived_ns` (`arrivals`, in any order). Empty for a rate that is not positive.
    pub fn at_rate(arrivals: &[(u64, u32)], mbit: f64) -> BusyPeriods {
        if mbit.is_nan() || mbit <= 0.0 {
            return BusyPeriods::default();
        }
        let ns_per_byte = 8_000.0 / mbit;
        let mut spans: Vec<(u64, u64)> = arrivals
            .iter()
            .map(|&(at, bytes)| {
                let took = (f64::from(bytes) * ns_per_byte).round() as u64;
                (at.saturating_sub(took), at)
            })
            .collect();
        spans.sort_unstable();
        let mut periods: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
        for (start, end) in spans {
            match periods.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => periods.push((start, end)),
            }
        }
        BusyPeriods { periods }
    }

    /// How long the link was busy within `[from_ns, to_ns)`, ns.
    pub fn within(&self, from_ns: u64, to_ns: u64) -> u64 {
        if to_ns <= from_ns {
            return 0;
        }
        let first = self.periods.partition_point(|p| p.1 <= from_ns);
        self.periods[first..]
            .iter()
            .take_while(|p| p.0 < to_ns)
            .map(|p| p.1.min(to_ns) - p.0.max(from_ns))
            .sum()
    }

    /// Whether nothing was ever busy (no packets, or no rate).
    pub fn is_empty(&self) -> bool {
        self.periods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn back_to_back_packets_make_one_period_and_gaps_stay_idle() {
        // 1250 bytes at 10 Mbit/s take 1 ms: three back to back, then one after a 5 ms gap.
        let arrivals = [(MS, 1250), (2 * MS, 1250), (3 * MS, 1250), (9 * MS, 1250)];
        let b = BusyPeriods::at_rate(&arrivals, 10.0);
        assert_eq!(b.periods, [(0, 3 * MS), (8 * MS, 9 * MS)]);
        assert_eq!(b.within(0, 10 * MS), 4 * MS);
        assert_eq!(b.within(2 * MS, 8 * MS + MS / 2), MS + MS / 2);
        assert_eq!(b.within(3 * MS, 8 * MS), 0, "the gap");
        assert_eq!(b.within(5 * MS, 4 * MS), 0, "an empty window");
    }

    #[test]
    fn overlapping_packets_count_once_and_order_does_not_matter() {
        // A trace link's fast moment: two packets arriving 0.5 ms apart, 1 ms each at the mean.
        let b = BusyPeriods::at_rate(&[(3 * MS, 1250), (2 * MS + MS / 2, 1250)], 10.0);
        assert_eq!(b.within(0, 10 * MS), MS + MS / 2);
        assert!(BusyPeriods::at_rate(&[(MS, 1250)], 0.0).is_empty());
        assert!(BusyPeriods::at_rate(&[(MS, 1250)], f64::NAN).is_empty());
    }
}
