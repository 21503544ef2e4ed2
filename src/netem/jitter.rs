//! Jitter as a delay that varies smoothly over time — the `varying` model, the default.
//!
//! Real jitter is queueing that changes over time: packets sent close together see nearly the
//! same delay and never overtake each other. Drawing every packet's delay independently either
//! reorders packets (netem) or, when order is then forced (FIFO), makes each packet wait for the
//! slowest draw before it, which raises the mean delay with the packet rate — by 10–28 % of the
//! RTT on the study's profiles, and by different amounts for h1, h2 and h3.
//!
//! Here the jitter offset is a function of time, the same for every packet rate:
//! - **knots** every `interval` (the coherence time, one RTT by default) take values in `±J`
//!   from the arcsine distribution (`−J·cos(π·u)`, u uniform): the distribution of a sine
//!   wave's value, which the ramps between knots turn into a marginal close to the profile's
//!   uniform `±J` (p5–p95 ≈ 1.84 J against 1.8 J; both symmetric, mean 0);
//! - **half-cosine ramps** join the knots, so the offset changes smoothly and its slope is at
//!   most `π·J / interval`: with `interval ≥ π·J` a later packet is never due before an earlier
//!   one (no reordering, no FIFO hold), see [`min_interval`];
//! - **stratified blocks**: every [`STRATA`] consecutive knots take one value from each quarter
//!   of the distribution, in random order. The delay still wanders (any order of quarters), but
//!   it cannot stay high or low for long, so the mean over a page load (~25 knots) stays close
//!   to the profile instead of drifting with the luck of a few draws;
//! - the grid of knots starts at a random phase, so the process is stationary.
//!
//! Pure and deterministic: the caller passes time in; the seed fixes every draw.

use std::f64::consts::PI;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Knots per stratified block.
pub const STRATA: usize = 4;

/// Gaps longer than this many knot intervals restart the process at the new time instead of
/// drawing every knot in between (no packet saw them; the draws stay deterministic).
const MAX_SKIPPED_KNOTS: u64 = 4096;

/// The shortest knot interval that keeps packets in order for jitter `±J`: the offset's slope
/// is at most `π·J / interval`, and a slope above −1 can never let a later packet overtake.
pub fn min_interval(jitter: Duration) -> Duration {
    Duration::from_nanos((PI * jitter.as_nanos() as f64).ceil() as u64)
}

/// The jitter offset of one direction as a function of time.
#[derive(Debug, Clone)]
pub struct VaryingDelay {
    amplitude_ns: f64,
    interval_ns: f64,
    rng: ChaCha8Rng,
    /// Time of knot 0 (set at the first evaluation, a random phase before it).
    origin: Option<Instant>,
    /// Index of the current segment's first knot.
    segment: u64,
    /// Unit knot values (in ±1) at both ends of the current segment.
    from: f64,
    to: f64,
    strata: [usize; STRATA],
    next_stratum: usize,
}

impl VaryingDelay {
    /// A process with offsets in `±amplitude` and knots every `interval` (which must be at least
    /// [`min_interval`] of the amplitude for the no-reordering guarantee; the profile checks it).
    pub fn new(amplitude: Duration, interval: Duration, rng: ChaCha8Rng) -> Self {
        let mut v = VaryingDelay {
            amplitude_ns: amplitude.as_nanos() as f64,
            interval_ns: interval.as_nanos().max(1) as f64,
            rng,
            origin: None,
            segment: 0,
            from: 0.0,
            to: 0.0,
            strata: std::array::from_fn(|i| i),
            next_stratum: STRATA,
        };
        v.from = v.next_knot();
        v.to = v.next_knot();
        v
    }

    /// The amplitude `J` and knot interval.
    pub fn shape(&self) -> (Duration, Duration) {
        (
            Duration::from_nanos(self.amplitude_ns as u64),
            Duration::from_nanos(self.interval_ns as u64),
        )
    }

    /// The offset (ns, in `±J`) at time `t`. Times must not go backwards across calls; an
    /// earlier time is evaluated at the start of the current segment.
    pub fn offset_ns(&mut self, t: Instant) -> f64 {
        let origin = *self.origin.get_or_insert_with(|| {
            let phase: f64 = self.rng.random();
            t - Duration::from_nanos((phase * self.interval_ns) as u64)
        });
        let x = t.saturating_duration_since(origin).as_nanos() as f64 / self.interval_ns;
        let k = x.floor() as u64;
        if k > self.segment + MAX_SKIPPED_KNOTS {
            self.segment = k;
            self.from = self.next_knot();
            self.to = self.next_knot();
        }
        while k > self.segment {
            self.segment += 1;
            self.from = self.to;
            self.to = self.next_knot();
        }
        let s = (x - self.segment as f64).clamp(0.0, 1.0);
        let w = (1.0 - (PI * s).cos()) / 2.0;
        self.amplitude_ns * (self.from + (self.to - self.from) * w)
    }

    /// The next unit knot: arcsine-distributed in ±1, one per quarter in every block.
    fn next_knot(&mut self) -> f64 {
        if self.next_stratum == STRATA {
            self.strata.shuffle(&mut self.rng);
            self.next_stratum = 0;
        }
        let stratum = self.strata[self.next_stratum];
        self.next_stratum += 1;
        let u = (stratum as f64 + self.rng.random::<f64>()) / STRATA as f64;
        -(PI * u).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn process(jitter_ms: u64, interval_ms: u64, seed: u64) -> VaryingDelay {
        VaryingDelay::new(
            Duration::from_millis(jitter_ms),
            Duration::from_millis(interval_ms),
            ChaCha8Rng::seed_from_u64(seed),
        )
    }

    #[test]
    fn offsets_stay_in_range_and_vary_smoothly() {
        let mut p = process(15, 60, 1);
        let t0 = Instant::now();
        let step = Duration::from_micros(100);
        let mut prev = p.offset_ns(t0);
        let mut max_slope: f64 = 0.0;
        for i in 1..200_000u32 {
            let v = p.offset_ns(t0 + step * i);
            assert!(v.abs() <= 15e6 + 1.0, "{v}");
            max_slope = max_slope.max((v - prev).abs() / step.as_nanos() as f64);
            prev = v;
        }
        // π·J / interval = π·15/60 ≈ 0.785: never as steep as a packet's own spacing.
        assert!(max_slope <= PI * 15.0 / 60.0 + 1e-6, "{max_slope}");
        assert!(max_slope > 0.3, "it does vary: {max_slope}");
    }

    #[test]
    fn same_seed_same_offsets_other_seed_other_offsets() {
        let t0 = Instant::now();
        let run = |seed| {
            let mut p = process(10, 40, seed);
            (0..1000u32)
                .map(|i| p.offset_ns(t0 + Duration::from_millis(3) * i) as i64)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn a_long_gap_restarts_without_drawing_every_knot() {
        let mut p = process(10, 40, 2);
        let t0 = Instant::now();
        p.offset_ns(t0);
        let later = t0 + Duration::from_secs(3600 * 24);
        let v = p.offset_ns(later);
        assert!(v.abs() <= 10e6);
        assert!(p.offset_ns(later + Duration::from_millis(1)).abs() <= 10e6);
    }

    #[test]
    fn min_interval_is_pi_times_the_jitter() {
        assert_eq!(
            min_interval(Duration::from_millis(20)),
            Duration::from_nanos(62_831_854)
        );
        assert_eq!(min_interval(Duration::ZERO), Duration::ZERO);
    }
}
