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
//! The process also keeps its own time integral ([`VaryingDelay::take_integral`]): the delay the
//! link *offered* over an interval, whatever the traffic. That is what must equal the profile:
//! the mean over a flow's packets is the offered delay weighted by the flow's own sending rate,
//! and a window-limited TCP or QUIC flow sends more while the delay is low (rate ∝ 1/RTT), so
//! its packets' mean sits a little below the offered one on high-jitter profiles — as on a real
//! path whose queueing varies.
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
    /// Position (in knot intervals since `origin`) up to which `integral` is accumulated, and
    /// the integral of the offset over time since the last take (ns·ns).
    integrated_to: f64,
    integral: f64,
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
            integrated_to: 0.0,
            integral: 0.0,
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
        let x = self.advance_to(t);
        let s = (x - self.segment as f64).clamp(0.0, 1.0);
        self.amplitude_ns * (self.from + (self.to - self.from) * ramp(s))
    }

    /// The time integral of the offset (ns·ns) from the last take (or the first use) to `t`,
    /// and start a new one: divided by the span it is the mean offset the link offered.
    pub fn take_integral(&mut self, t: Instant) -> f64 {
        self.advance_to(t);
        std::mem::take(&mut self.integral)
    }

    /// Moves the process to `t` (drawing the knots it passes), integrating on the way; returns
    /// `t`'s position in knot intervals.
    fn advance_to(&mut self, t: Instant) -> f64 {
        let origin = *self.origin.get_or_insert_with(|| {
            let phase: f64 = self.rng.random();
            let start = t - Duration::from_nanos((phase * self.interval_ns) as u64);
            self.integrated_to = phase;
            start
        });
        let x = t.saturating_duration_since(origin).as_nanos() as f64 / self.interval_ns;
        let k = x.floor() as u64;
        if k > self.segment + MAX_SKIPPED_KNOTS {
            // A long idle gap: restart there; its integral is the process's mean, 0.
            self.segment = k;
            self.from = self.next_knot();
            self.to = self.next_knot();
            self.integrated_to = k as f64;
        }
        while k > self.segment {
            self.integrate_segment_to((self.segment + 1) as f64);
            self.segment += 1;
            self.from = self.to;
            self.to = self.next_knot();
        }
        self.integrate_segment_to(x);
        x
    }

    /// Adds the integral over `[integrated_to, x]`, both within the current segment.
    fn integrate_segment_to(&mut self, x: f64) {
        let base = self.segment as f64;
        let (a, b) = (
            (self.integrated_to - base).clamp(0.0, 1.0),
            (x - base).clamp(0.0, 1.0),
        );
        if b > a {
            // ∫ from + (to − from)·(1 − cos πs)/2 ds over [a, b], in knot intervals.
            let ramp_area = ((b - a) - ((PI * b).sin() - (PI * a).sin()) / PI) / 2.0;
            let unit = self.from * (b - a) + (self.to - self.from) * ramp_area;
            self.integral += unit * self.amplitude_ns * self.interval_ns;
        }
        self.integrated_to = self.integrated_to.max(x);
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

/// The half-cosine ramp from 0 (s = 0) to 1 (s = 1).
fn ramp(s: f64) -> f64 {
    (1.0 - (PI * s).cos()) / 2.0
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
    fn the_integral_is_the_area_under_the_offsets() {
        // Against a fine Riemann sum of the same process.
        let t0 = Instant::now();
        let mut exact = process(15, 60, 4);
        let mut sampled = process(15, 60, 4);
        let step = Duration::from_micros(10);
        let n = 300_000u32; // 3 s
        let mut sum = 0.0;
        for i in 0..n {
            sum += sampled.offset_ns(t0 + step * i) * step.as_nanos() as f64;
        }
        exact.offset_ns(t0);
        let integral = exact.take_integral(t0 + step * n);
        assert!(
            (integral - sum).abs() < 1e-3 * 15e6 * 3e9,
            "{integral} vs {sum}"
        );
        // A take restarts the integral; over a long span the mean offset is about 0.
        let later = t0 + Duration::from_secs(600);
        let mean = exact.take_integral(later) / (600e9 - 3e9);
        assert!(mean.abs() < 0.05e6, "mean offset {mean} ns");
        assert_eq!(exact.take_integral(later), 0.0);
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
