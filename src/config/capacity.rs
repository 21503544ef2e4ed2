//! Recorded link capacity in mahimahi's trace format (`mm-link`): one line per delivery
//! opportunity, a timestamp in milliseconds from the start of the trace; each opportunity lets
//! [`OPPORTUNITY_BYTES`] leave the bottleneck queue, and the trace repeats when it ends. Parsed
//! and counted here (pure); the traces shipped with pagebench are compiled in ([`BUILT_IN`]).
//!
//! Two choices differ from mahimahi, both documented in `docs/profiles.md`:
//! - **Sub-millisecond release.** mahimahi's clock ticks in milliseconds, so the k opportunities
//!   of one millisecond leave as one burst. Here they are spread evenly over it: the i-th of k at
//!   `m + i/k` ms (the first at the millisecond itself, as in mahimahi).
//! - **Strictly periodic.** A trace repeats every `T` ms, `T` its last timestamp (as mahimahi's
//!   wrap-around); lines stamped `T` are the next repetition's millisecond 0, so every
//!   repetition, the first included, is the same `(t mod T)` schedule.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

/// Bytes one delivery opportunity lets through (mahimahi's `PACKET_SIZE`).
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// A parsed capacity trace: the opportunities of one repetition, in nanoseconds from its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityTrace {
    period_ns: u64,
    /// Sorted, distinct, each in `[0, period_ns)`.
    offsets_ns: Vec<u64>,
}

/// Why a trace's text is not a trace (1-based line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TraceError {
    pub line: usize,
    pub message: String,
}

impl CapacityTrace {
    /// Parses mahimahi's format: one non-negative integer (ms) per line, non-decreasing, the last
    /// above 0. Blank lines are skipped.
    pub fn parse(text: &str) -> Result<CapacityTrace, TraceError> {
        let mut stamps: Vec<u64> = Vec::new();
        let mut last_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let v: u64 = line.parse().map_err(|_| TraceError {
                line: i + 1,
                message: format!(
                    "{line:?} is not a timestamp: each line is one delivery opportunity, a whole number of milliseconds"
                ),
            })?;
            if let Some(&prev) = stamps.last() {
                if v < prev {
                    return Err(TraceError {
                        line: i + 1,
                        message: format!(
                            "{v} ms comes after {prev} ms: timestamps must not decrease"
                        ),
                    });
                }
            }
            stamps.push(v);
            last_line = i + 1;
        }
        let period_ms = match stamps.last() {
            None => {
                return Err(TraceError {
                    line: 1,
                    message: "no delivery opportunities: the trace is empty".into(),
                })
            }
            Some(0) => {
                return Err(TraceError {
                    line: last_line,
                    message: "the trace lasts 0 ms: its last timestamp must be above 0".into(),
                })
            }
            Some(&t) => t,
        };
        // Opportunities per millisecond of one repetition (stamp T is the next one's 0).
        let mut per_ms: BTreeMap<u64, u64> = BTreeMap::new();
        for s in stamps {
            *per_ms.entry(s % period_ms).or_default() += 1;
        }
        let mut offsets_ns = Vec::new();
        for (ms, k) in per_ms {
            for i in 0..k {
                offsets_ns.push(ms * 1_000_000 + i * 1_000_000 / k);
            }
        }
        Ok(CapacityTrace {
            period_ns: period_ms * 1_000_000,
            offsets_ns,
        })
    }

    /// One repetition's length.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Delivery opportunities per repetition.
    pub fn opportunities(&self) -> usize {
        self.offsets_ns.len()
    }

    /// The opportunities of one repetition, ns from its start.
    pub fn offsets_ns(&self) -> &[u64] {
        &self.offsets_ns
    }

    /// The trace's mean rate, bits per second (IP bytes).
    pub fn mean_rate_bps(&self) -> f64 {
        self.offsets_ns.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0
            / (self.period_ns as f64 / 1e9)
    }

    /// The first opportunity at or after `t_ns` (ns from the trace's start; it repeats).
    pub fn next_at_or_after(&self, t_ns: u64) -> u64 {
        let (rep, within) = (t_ns / self.period_ns, t_ns % self.period_ns);
        let i = self.offsets_ns.partition_point(|o| *o < within);
        match self.offsets_ns.get(i) {
            Some(o) => rep * self.period_ns + o,
            None => (rep + 1) * self.period_ns + self.offsets_ns[0],
        }
    }

    /// Opportunities at or before `t_ns`.
    fn up_to(&self, t_ns: u64) -> u64 {
        let (rep, within) = (t_ns / self.period_ns, t_ns % self.period_ns);
        rep * self.offsets_ns.len() as u64
            + self.offsets_ns.partition_point(|o| *o <= within) as u64
    }

    /// Opportunities in `(from_ns, to_ns]`.
    pub fn count_between(&self, from_ns: u64, to_ns: u64) -> u64 {
        if to_ns <= from_ns {
            return 0;
        }
        self.up_to(to_ns) - self.up_to(from_ns)
    }

    /// The mean rate the trace offers over `(from_ns, to_ns]`, bits per second.
    pub fn rate_between_bps(&self, from_ns: u64, to_ns: u64) -> f64 {
        if to_ns <= from_ns {
            return 0.0;
        }
        self.count_between(from_ns, to_ns) as f64 * OPPORTUNITY_BYTES as f64 * 8.0
            / ((to_ns - from_ns) as f64 / 1e9)
    }
}

/// Where in a trace a run's load starts, as a share of the trace's period in parts per million.
/// A matrix draws one per round from its seed, the same for every protocol, server and browser
/// of that round: comparisons stay paired, and the rounds together sample the whole trace
/// instead of replaying its first seconds every time.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct TraceStart(pub u32);

impl TraceStart {
    const PARTS: u64 = 1_000_000;

    /// A start drawn from a 64-bit hash: uniform over the period (to 1 ppm).
    pub fn from_hash(h: u64) -> TraceStart {
        TraceStart((((h >> 32) * Self::PARTS) >> 32) as u32)
    }

    /// The offset into a trace of period `period_ns`.
    pub fn offset_ns(self, period_ns: u64) -> u64 {
        (u128::from(period_ns) * u128::from(self.0) / u128::from(Self::PARTS)) as u64
    }
}

/// The capacity a trace offered one run: where the run started in it and the mean rate over the
/// run's window (from its mark to the end of its load).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    pub offset_ms: f64,
    pub mbit: f64,
}

impl Offered {
    /// What `trace` offered a window of `window_ns` starting at `start` (pure).
    pub fn of(trace: &CapacityTrace, start: TraceStart, window_ns: u64) -> Offered {
        let from = start.offset_ns(trace.period_ns());
        Offered {
            offset_ms: from as f64 / 1e6,
            mbit: trace.rate_between_bps(from, from + window_ns) / 1e6,
        }
    }
}

/// What a trace profile's traces offered one run (per direction; None where that direction
/// has no trace).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TraceWindow {
    pub start: TraceStart,
    pub down: Option<Offered>,
    pub up: Option<Offered>,
}

impl TraceWindow {
    /// None when neither direction has a trace (pure).
    pub fn of(
        down: Option<&CapacityTrace>,
        up: Option<&CapacityTrace>,
        start: TraceStart,
        window_ns: u64,
    ) -> Option<TraceWindow> {
        let offered = |t: Option<&CapacityTrace>| t.map(|t| Offered::of(t, start, window_ns));
        (down.is_some() || up.is_some()).then(|| TraceWindow {
            start,
            down: offered(down),
            up: offered(up),
        })
    }
}

/// The traces shipped in `profiles/traces/`, compiled in: (file name, text). A unit test checks
/// that this table is exactly that directory's traces.
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "TMobile-LTE-short.down",
        include_str!("../../profiles/traces/TMobile-LTE-short.down"),
    ),
    (
        "TMobile-LTE-short.up",
        include_str!("../../profiles/traces/TMobile-LTE-short.up"),
    ),
    (
        "Verizon-LTE-short.down",
        include_str!("../../profiles/traces/Verizon-LTE-short.down"),
    ),
    (
        "Verizon-LTE-short.up",
        include_str!("../../profiles/traces/Verizon-LTE-short.up"),
    ),
];

/// The compiled-in trace of this file name, parsed once per process.
pub fn built_in(name: &str) -> Option<(Arc<CapacityTrace>, &'static str)> {
    static PARSED: OnceLock<Mutex<BTreeMap<&'static str, Arc<CapacityTrace>>>> = OnceLock::new();
    let (file, text) = BUILT_IN.iter().find(|(f, _)| *f == name)?;
    let mut cache = PARSED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let trace = cache
        .entry(file)
        .or_insert_with(|| {
            Arc::new(CapacityTrace::parse(text).expect("shipped traces are valid (unit-tested)"))
        })
        .clone();
    Some((trace, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opportunities_of_a_millisecond_are_spread_over_it() {
        let t = CapacityTrace::parse("0\n0\n1\n4\n4\n4\n10\n").unwrap();
        assert_eq!(t.period_ns(), 10_000_000);
        // The stamp 10 is the next repetition's 0: three opportunities in millisecond 0.
        assert_eq!(
            t.offsets_ns(),
            [0, 333_333, 666_666, 1_000_000, 4_000_000, 4_333_333, 4_666_666]
        );
        assert_eq!(t.next_at_or_after(0), 0);
        assert_eq!(t.next_at_or_after(1), 333_333);
        assert_eq!(t.next_at_or_after(4_700_000), 10_000_000);
        assert_eq!(t.next_at_or_after(21_000_000), 21_000_000);
        assert_eq!(t.count_between(0, 10_000_000), 7);
        // (0, 20 ms]: the 6 after 0 in the first repetition, 7 in the second, 20 ms itself.
        assert_eq!(t.count_between(0, 20_000_000), 6 + 7 + 1);
        assert_eq!(t.count_between(5_000_000, 5_000_000), 0);
        // 7 × 1500 B per 10 ms = 8.4 Mbit/s.
        assert!((t.mean_rate_bps() - 8.4e6).abs() < 1e-6);
    }

    #[test]
    fn a_trace_start_is_a_share_of_the_period_and_offered_is_the_window_s_rate() {
        assert_eq!(TraceStart(0).offset_ns(10_000_000), 0);
        assert_eq!(TraceStart(500_000).offset_ns(10_000_000), 5_000_000);
        assert!(TraceStart::from_hash(u64::MAX).0 < 1_000_000);
        let spread: Vec<u32> = (0..1000u64)
            .map(|i| TraceStart::from_hash(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).0)
            .collect();
        let low = spread.iter().filter(|x| **x < 500_000).count();
        assert!((400..600).contains(&low), "{low} of 1000 in the first half");
        // Opportunities at 0, 1 ms, 4 ms (…) of a 10 ms period: (4 ms, 14 ms] holds 4.333,
        // 4.666, 10, 10.333, 10.666, 11 and 14: 7 × 1500 B in 10 ms.
        let t = CapacityTrace::parse("0\n0\n1\n4\n4\n4\n10\n").unwrap();
        let o = Offered::of(&t, TraceStart(400_000), 10_000_000);
        assert_eq!(o.offset_ms, 4.0);
        assert!((o.mbit - 8.4).abs() < 1e-9, "{o:?}");
        let late = Offered::of(&t, TraceStart(500_000), 4_000_000);
        assert_eq!(late.mbit, 0.0, "(5 ms, 9 ms] has no opportunity");
    }

    #[test]
    fn bad_traces_name_the_line() {
        for (text, line, needle) in [
            ("", 1, "empty"),
            ("0\n0\n", 2, "0 ms"),
            ("0\n5\n3\n", 3, "must not decrease"),
            ("0\nx\n", 2, "not a timestamp"),
            ("0\n-4\n", 2, "not a timestamp"),
        ] {
            let e = CapacityTrace::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn shipped_traces_parse_and_have_their_documented_rates() {
        for (name, lines, mbit) in [
            ("TMobile-LTE-short.down", 194_846, 16.70),
            ("TMobile-LTE-short.up", 155_381, 13.32),
            ("Verizon-LTE-short.down", 58_655, 5.03),
            ("Verizon-LTE-short.up", 69_367, 5.95),
        ] {
            let (t, _) = built_in(name).unwrap();
            assert_eq!(t.opportunities(), lines, "{name}");
            assert!((t.mean_rate_bps() / 1e6 - mbit).abs() < 0.01, "{name}");
        }
        assert!(built_in("nosuch").is_none());
    }

    #[test]
    fn built_in_traces_are_exactly_the_shipped_files() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/traces");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n != "README.md")
            .collect();
        files.sort();
        let built: Vec<String> = BUILT_IN.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(
            built, files,
            "profiles/traces changed: update capacity::BUILT_IN"
        );
        for (name, text) in BUILT_IN {
            assert_eq!(*text, std::fs::read_to_string(dir.join(name)).unwrap());
        }
    }
}
