//! How long the emulator was behind its schedule: the union over released packets of the
//! time each waited beyond [`BEHIND_FLOOR`] past its due time, and the longest such spell.
//!
//! A stalled emulator (a starved CPU, a hypervisor pause) delays every packet due during the
//! stall; the load can finish at most that much later (unless a protocol's timers fire, which
//! takes a stall near a round trip). So the time behind, against the load's length, bounds
//! what the emulator's own lateness can have done to the headline time — what the link gate
//! calls material ([`super::link_stats::self_check`]). Lateness below the floor is the emulator's
//! normal release precision and never makes a spell. Pure: fed with due and release times in
//! release order.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Lateness up to this is the emulator's ordinary precision, not a stall.
pub const BEHIND_FLOOR: Duration = Duration::from_micros(500);

/// The spells behind schedule so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Behind {
    /// The end of the current spell (None before the first).
    until: Option<Instant>,
    /// When the current spell started.
    since: Option<Instant>,
    /// Union of the spells so far, the longest, and how many.
    pub total: Duration,
    pub longest: Duration,
    pub spells: u64,
}

impl Behind {
    /// A packet due at `due` left at `released` (releases come in due order, or close to it).
    pub fn released(&mut self, due: Instant, released: Instant) {
        let Some(start) = due.checked_add(BEHIND_FLOOR).filter(|s| *s < released) else {
            return;
        };
        match self.until {
            Some(until) if start <= until => {
                if released > until {
                    self.total += released - until;
                    self.until = Some(released);
                }
            }
            _ => {
                self.total += released - start;
                self.until = Some(released);
                self.since = Some(start);
                self.spells += 1;
            }
        }
        if let (Some(since), Some(until)) = (self.since, self.until) {
            self.longest = self.longest.max(until - since);
        }
    }

    pub fn summary(&self) -> BehindSummary {
        BehindSummary {
            ms: self.total.as_secs_f64() * 1e3,
            longest_ms: self.longest.as_secs_f64() * 1e3,
            spells: self.spells,
        }
    }
}

/// Time behind schedule in an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BehindSummary {
    /// Union of the spells, ms.
    pub ms: f64,
    /// The longest spell, ms.
    pub longest_ms: f64,
    pub spells: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn a_stall_is_one_spell_as_long_as_the_latest_packet_waited() {
        let t0 = Instant::now();
        let mut b = Behind::default();
        // Punctual packets make no spell.
        for i in 0..10 {
            b.released(t0 + ms(i), t0 + ms(i) + Duration::from_micros(80));
        }
        assert_eq!(b.summary().spells, 0);
        // A 10 ms stall from 20 ms: packets due at 20..30 all leave at 30.
        for i in 20..30 {
            b.released(t0 + ms(i), t0 + ms(30));
        }
        let s = b.summary();
        assert_eq!(s.spells, 1);
        // From the first packet's due + floor (20.5 ms) to 30 ms.
        assert!((s.ms - 9.5).abs() < 1e-9, "{s:?}");
        assert!((s.longest_ms - 9.5).abs() < 1e-9);
        // A second, shorter stall later.
        b.released(t0 + ms(50), t0 + ms(53));
        let s = b.summary();
        assert_eq!(s.spells, 2);
        assert!((s.ms - 12.0).abs() < 1e-9, "{s:?}");
        assert!((s.longest_ms - 9.5).abs() < 1e-9);
    }
}
