//! The link's events on a timeline that starts at the run's mark (the start of the measured
//! navigation): outages — scheduled ones and a random on/off process — and the time the client's
//! NAT rebinds. Pure: built from a configuration, a start instant and a seed, so both directions
//! (each holds its own copy) see exactly the same outages.
//!
//! The on/off process starts "on" at the mark; on and off periods are drawn from exponential
//! distributions with the configured means, from a generator seeded by the link's seed and the
//! mark's index (each run its own draw, the same for the same seed and run).

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::capacity::TraceStart;
use crate::config::profile::{OutageMode, Profile};

/// The events of a profile, relative to the mark.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventsConfig {
    /// Scheduled outages: (start, duration), in time order, not overlapping.
    pub outages: Vec<(Duration, Duration)>,
    /// Mean on and off durations of the random process.
    pub on_off: Option<(Duration, Duration)>,
    pub mode: OutageMode,
    /// When the client's NAT maps its ports anew.
    pub rebind_at: Option<Duration>,
    /// Seeds the on/off draws: the same for both directions.
    pub seed: u64,
}

fn secs(s: f64) -> Duration {
    Duration::from_nanos((s.max(0.0) * 1e9).round() as u64)
}

impl EventsConfig {
    /// The events of a (validated) profile; `seed` is the link's.
    pub fn from_profile(p: &Profile, seed: u64) -> EventsConfig {
        EventsConfig {
            outages: p
                .outages
                .iter()
                .map(|[s, d]| (secs(*s), secs(*d)))
                .collect(),
            on_off: p.on_off.map(|o| (secs(o.mean_on_s), secs(o.mean_off_s))),
            mode: p.outage_mode.unwrap_or_default(),
            rebind_at: p.nat_rebind_at_s.map(secs),
            seed,
        }
    }

    pub fn has_outages(&self) -> bool {
        !self.outages.is_empty() || self.on_off.is_some()
    }
}

/// The events of one timeline (from one mark to the next).
#[derive(Debug, Clone)]
pub struct Timeline {
    cfg: EventsConfig,
    epoch: Instant,
    /// Off periods of the random process, ns from the epoch, in order.
    random: Vec<(u64, u64)>,
    /// The random process is drawn up to here (ns from the epoch).
    drawn_until: u64,
    rng: Option<ChaCha8Rng>,
    /// Where a capacity trace starts at the epoch.
    trace_start: TraceStart,
}

impl Timeline {
    /// The timeline starting at `epoch`; `index` counts the marks (each its own random draw).
    pub fn new(cfg: EventsConfig, epoch: Instant, index: u64) -> Timeline {
        let rng = cfg.on_off.map(|_| {
            ChaCha8Rng::seed_from_u64(cfg.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        });
        Timeline {
            cfg,
            epoch,
            random: Vec::new(),
            drawn_until: 0,
            rng,
            trace_start: TraceStart::default(),
        }
    }

    /// The same timeline with a capacity trace starting at `start` at the epoch.
    pub fn with_trace_start(mut self, start: TraceStart) -> Timeline {
        self.trace_start = start;
        self
    }

    pub fn trace_start(&self) -> TraceStart {
        self.trace_start
    }

    pub fn config(&self) -> &EventsConfig {
        &self.cfg
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    pub fn mode(&self) -> OutageMode {
        self.cfg.mode
    }

    pub fn has_outages(&self) -> bool {
        self.cfg.has_outages()
    }

    /// When the NAT rebinds, if it does.
    pub fn rebind_at(&self) -> Option<Instant> {
        self.cfg.rebind_at.map(|d| self.epoch + d)
    }

    fn ns(&self, t: Instant) -> Option<u64> {
        (t >= self.epoch).then(|| (t - self.epoch).as_nanos() as u64)
    }

    /// Draws the random process until it covers `until_ns`.
    fn draw(&mut self, until_ns: u64) {
        let (Some((on, off)), Some(rng)) = (self.cfg.on_off, self.rng.as_mut()) else {
            return;
        };
        let exp = |rng: &mut ChaCha8Rng, mean: Duration| -> u64 {
            let u: f64 = rng.random::<f64>();
            // -ln(1 − u) ∈ [0, ∞): never ln(0).
            (-(1.0 - u).ln() * mean.as_nanos() as f64).round() as u64
        };
        while self.drawn_until <= until_ns {
            let start = self.drawn_until + exp(rng, on);
            let end = start + exp(rng, off).max(1);
            self.random.push((start, end));
            self.drawn_until = end;
        }
    }

    /// The off period containing `t_ns` (half-open), in either list.
    fn window_at(&mut self, t_ns: u64) -> Option<(u64, u64)> {
        let scheduled = self.cfg.outages.iter().find_map(|(s, d)| {
            let (s, e) = (s.as_nanos() as u64, (*s + *d).as_nanos() as u64);
            (s <= t_ns && t_ns < e).then_some((s, e))
        });
        if scheduled.is_some() {
            return scheduled;
        }
        self.draw(t_ns);
        let i = self.random.partition_point(|(_, e)| *e <= t_ns);
        self.random.get(i).copied().filter(|(s, _)| *s <= t_ns)
    }

    /// If the link is down at `t`: when it is up again (adjacent periods joined).
    pub fn down_until(&mut self, t: Instant) -> Option<Instant> {
        if !self.has_outages() {
            return None;
        }
        let mut at = self.ns(t)?;
        let mut down = false;
        while let Some((_, end)) = self.window_at(at) {
            at = end;
            down = true;
        }
        down.then(|| self.epoch + Duration::from_nanos(at))
    }

    /// The off periods that overlap `[epoch, until]`, ns from the epoch, in order, clipped.
    pub fn windows_until(&mut self, until: Instant) -> Vec<(Duration, Duration)> {
        let Some(end) = self.ns(until) else {
            return Vec::new();
        };
        self.draw(end);
        let mut all: Vec<(u64, u64)> = self
            .cfg
            .outages
            .iter()
            .map(|(s, d)| (s.as_nanos() as u64, (*s + *d).as_nanos() as u64))
            .chain(self.random.iter().copied())
            .filter(|(s, _)| *s < end)
            .collect();
        all.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (s, e) in all {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        merged
            .into_iter()
            .map(|(s, e)| (Duration::from_nanos(s), Duration::from_nanos(e.min(end))))
            .collect()
    }

    /// How long the link was down in `[from, to]`.
    pub fn down_time_between(&mut self, from: Instant, to: Instant) -> Duration {
        if !self.has_outages() || to <= from {
            return Duration::ZERO;
        }
        let from = from.max(self.epoch) - self.epoch;
        self.windows_until(to)
            .into_iter()
            .map(|(s, e)| e.saturating_sub(s.max(from)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn scheduled_outages_are_half_open_and_joined() {
        let t0 = Instant::now();
        let cfg = EventsConfig {
            outages: vec![(ms(100), ms(50)), (ms(150), ms(20)), (ms(400), ms(1))],
            ..EventsConfig::default()
        };
        let mut tl = Timeline::new(cfg, t0, 0);
        assert_eq!(tl.down_until(t0 + ms(99)), None);
        // 100–150 and 150–170 touch: down until 170.
        assert_eq!(tl.down_until(t0 + ms(100)), Some(t0 + ms(170)));
        assert_eq!(tl.down_until(t0 + ms(160)), Some(t0 + ms(170)));
        assert_eq!(tl.down_until(t0 + ms(170)), None);
        // Before the epoch nothing is down.
        assert_eq!(tl.down_until(t0 - ms(1)), None);
        assert_eq!(
            tl.windows_until(t0 + ms(160)),
            vec![(ms(100), ms(160))],
            "clipped at `until`, joined"
        );
        assert_eq!(tl.down_time_between(t0 + ms(120), t0 + ms(500)), ms(51));
    }

    #[test]
    fn the_random_process_has_its_means_and_is_the_same_for_the_same_seed_and_mark() {
        let t0 = Instant::now();
        let cfg = EventsConfig {
            on_off: Some((ms(900), ms(100))),
            seed: 11,
            ..EventsConfig::default()
        };
        let mut a = Timeline::new(cfg.clone(), t0, 3);
        let span = Duration::from_secs(2000);
        let down = a.down_time_between(t0, t0 + span).as_secs_f64();
        // Off 10 % of the time; ~2000 cycles: the share is within ±1.5 points.
        assert!((down / span.as_secs_f64() - 0.1).abs() < 0.015, "{down}");
        let windows = a.windows_until(t0 + span);
        let n = windows.len() as f64;
        assert!((n - 2000.0).abs() < 200.0, "{n} periods");
        // Both directions build the same timeline.
        let mut b = Timeline::new(cfg.clone(), t0, 3);
        assert_eq!(b.windows_until(t0 + span), windows);
        let mut c = Timeline::new(cfg, t0, 4);
        assert_ne!(
            c.windows_until(t0 + span),
            windows,
            "another mark, another draw"
        );
        // Starts "on".
        let first = windows[0];
        assert!(first.0 > Duration::ZERO);
        assert_eq!(a.down_until(t0 + first.0), Some(t0 + first.1));
    }

    #[test]
    fn rebinding_is_relative_to_the_epoch() {
        let t0 = Instant::now();
        let tl = Timeline::new(
            EventsConfig {
                rebind_at: Some(ms(2500)),
                ..EventsConfig::default()
            },
            t0,
            0,
        );
        assert_eq!(tl.rebind_at(), Some(t0 + ms(2500)));
        assert!(!tl.has_outages());
    }
}
