//! A small log-linear histogram of durations (nanoseconds), for release lateness: 32 linear
//! sub-buckets per power of two, so any quantile is within ~3 % of the true value, in constant
//! memory and O(1) per sample — cheap enough to record every packet.

use serde::{Deserialize, Serialize};

/// Sub-buckets per power of two (2^5): the relative resolution is 1/32.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Values up to 2^42 ns (~73 min) get their own bucket; larger ones land in the last.
const MAX_EXP: u32 = 42;
const BUCKETS: usize = (SUB + (MAX_EXP as u64 - SUB_BITS as u64 + 1) * SUB) as usize;

/// Counts of durations in nanoseconds, with exact count, sum and max.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("summary", &self.summary())
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: vec![0; BUCKETS],
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    if exp > MAX_EXP {
        return BUCKETS - 1;
    }
    let sub = (v >> (exp - SUB_BITS)) & (SUB - 1);
    (SUB + (exp - SUB_BITS) as u64 * SUB + sub) as usize
}

/// The smallest value that lands in bucket `i`, and the bucket's width.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let exp = (i - SUB) / SUB + SUB_BITS as u64;
    let sub = (i - SUB) % SUB;
    let width = 1u64 << (exp - SUB_BITS as u64);
    ((SUB + sub) * width, width)
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        self.buckets[index(ns)] += 1;
        self.count += 1;
        self.sum_ns += ns as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The `q` quantile (0..=1) in nanoseconds: the middle of the bucket holding it, capped at
    /// the exact maximum. 0 when empty.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = bucket_range(i);
                return (lo + width / 2).min(self.max_ns);
            }
        }
        self.max_ns
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.count,
            mean_us: self.mean_ns() / 1e3,
            median_us: self.quantile_ns(0.5) as f64 / 1e3,
            p99_us: self.quantile_ns(0.99) as f64 / 1e3,
            max_us: self.max_ns as f64 / 1e3,
        }
    }
}

/// Median, p99 and max of a histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        let mut last = 0;
        for v in [
            0u64,
            1,
            31,
            32,
            33,
            63,
            64,
            1000,
            1_000_000,
            123_456_789,
            1 << 40,
        ] {
            let i = index(v);
            assert!(i >= last, "index not monotonic at {v}");
            last = i;
            let (lo, w) = bucket_range(i);
            assert!(lo <= v && v < lo + w, "{v} not in [{lo}, {})", lo + w);
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_within_resolution() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000); // 1 µs .. 10 ms
        }
        let med = h.quantile_ns(0.5) as f64;
        assert!((med - 5_000_000.0).abs() / 5_000_000.0 < 0.035, "{med}");
        let p99 = h.quantile_ns(0.99) as f64;
        assert!((p99 - 9_900_000.0).abs() / 9_900_000.0 < 0.035, "{p99}");
        assert_eq!(h.max_ns(), 10_000_000);
        assert_eq!(h.count(), 10_000);
        assert!((h.mean_ns() - 5_000_500.0).abs() < 1.0);
        let s = h.summary();
        assert!((s.median_us - 5000.0).abs() < 175.0);
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Histogram::default();
        let mut b = Histogram::default();
        a.record(10);
        b.record(2_000);
        b.record(3_000);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.max_ns(), 3_000);
        assert_eq!(Histogram::default().quantile_ns(0.5), 0);
    }
}
