//! The share of its CPU a SCHED_FIFO emulator leaves to the machine's other threads.
//!
//! Linux keeps real-time threads from starving the normal ones: since 6.12 a deadline server
//! gives the normal tasks of a CPU 50 ms of every second in which a real-time thread held that
//! CPU through the rest (earlier kernels throttle real-time threads for the last 50 ms of each
//! second by `sched_rt_runtime_us`). An emulator that spins through a long transfer — at
//! 1 Gbit/s its packets are due every 12 µs, closer than its spin margin, so it never sleeps —
//! holds its CPU for a whole second, and the kernel then takes the CPU from it for 50 ms at
//! once: every packet due meanwhile leaves up to 50 ms late. Measured here (fast-link study,
//! 100 MB downloads at 100 and 1000 Mbit/s): the longest spell behind schedule of the runs the
//! link gate rejected clustered at 41–52 ms.
//!
//! The cure is to give the CPU back in small pieces before the kernel takes it in a large one.
//! The emulator keeps a credit of the time it spent blocked (off its CPU) against
//! [`LEFT_SHARE`] of the time passed; once the credit is spent it pauses for [`PAUSE`] — a
//! sleep, not a wait on its devices, which at such rates are always readable. A pause delays a
//! due packet by about its length (under the link's 0.5 ms precision floor) instead of 50 ms.
//! Pure: fed with time passed and time blocked.

use std::time::{Duration, Instant};

/// The least share of its CPU's time the emulator leaves to other threads: twice what the
/// kernel's guard needs them to get (50 ms a second), so the guard never fires.
pub const LEFT_SHARE: f64 = 0.10;
/// How long the emulator sleeps when its credit is spent: short enough that a packet due
/// meanwhile is not late beyond the link's precision floor (`link::behind`, 0.5 ms) with a
/// wake-up's delay added; long enough to be worth a context switch.
pub const PAUSE: Duration = Duration::from_micros(200);
/// The most credit kept (a quiet spell earns no licence to spin through a later second) and
/// the most owed (a spell too busy to leave the share is not paid back for long).
pub const CREDIT_CAP: Duration = Duration::from_millis(20);

/// The emulator's account of the CPU time it left to others.
#[derive(Debug, Clone, Copy)]
pub struct FairShare {
    credit_ns: i64,
    last: Instant,
}

impl FairShare {
    /// An account opened at `now`, with full credit.
    pub fn new(now: Instant) -> FairShare {
        FairShare {
            credit_ns: cap_ns(),
            last: now,
        }
    }

    /// How long the emulator must pause now (None: it has credit left).
    pub fn pause_due(&self) -> Option<Duration> {
        (self.credit_ns <= 0).then_some(PAUSE)
    }

    /// Since the last call, up to `now`, the emulator was blocked for `blocked`.
    pub fn account(&mut self, now: Instant, blocked: Duration) {
        let passed = now.saturating_duration_since(self.last);
        self.last = now;
        let blocked = blocked.min(passed).as_nanos() as i64;
        let owed = (passed.as_nanos() as f64 * LEFT_SHARE) as i64;
        self.credit_ns = (self.credit_ns + blocked - owed).clamp(-cap_ns(), cap_ns());
    }
}

fn cap_ns() -> i64 {
    CREDIT_CAP.as_nanos() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(x: u64) -> Duration {
        Duration::from_micros(x)
    }

    /// A thread that never blocks of itself, running `turn` per loop turn and pausing when
    /// told, for `secs`: the share of the time it left, its first busy stretch and its longest
    /// later one.
    fn always_busy(turn: Duration, secs: f64) -> (f64, Duration, Duration) {
        let start = Instant::now();
        let mut now = start;
        let mut fair = FairShare::new(now);
        let (mut off, mut stretch) = (Duration::ZERO, Duration::ZERO);
        let (mut first, mut later) = (None, Duration::ZERO);
        while (now - start).as_secs_f64() < secs {
            now += turn;
            stretch += turn;
            fair.account(now, Duration::ZERO);
            if let Some(p) = fair.pause_due() {
                match first {
                    None => first = Some(stretch),
                    Some(_) => later = later.max(stretch),
                }
                stretch = Duration::ZERO;
                now += p;
                off += p;
                fair.account(now, p);
            }
        }
        let left = off.as_secs_f64() / (now - start).as_secs_f64();
        (left, first.unwrap_or(stretch), later)
    }

    #[test]
    fn a_thread_that_never_blocks_is_paused_once_its_credit_is_spent() {
        let t0 = Instant::now();
        let mut fair = FairShare::new(t0);
        assert_eq!(fair.pause_due(), None);
        // Full credit (20 ms) lasts 200 ms of running at a 10 % share.
        fair.account(t0 + Duration::from_millis(150), Duration::ZERO);
        assert_eq!(fair.pause_due(), None);
        fair.account(t0 + Duration::from_millis(201), Duration::ZERO);
        assert_eq!(fair.pause_due(), Some(PAUSE));
    }

    #[test]
    fn a_busy_emulator_leaves_the_share_in_short_pauses() {
        // 12 s of 12 µs turns (1 Gbit/s), of which the first 0.2 s spend the opening credit.
        let (left, first, later) = always_busy(us(12), 12.0);
        assert!(left >= LEFT_SHARE * 0.95, "{left}");
        assert!(left <= LEFT_SHARE * 1.1, "{left}");
        // The opening credit lasts 200 ms; after it, no stretch is longer than 2 ms.
        assert!(first <= Duration::from_millis(201), "{first:?}");
        assert!(later <= Duration::from_millis(2), "{later:?}");
    }

    #[test]
    fn a_mostly_idle_emulator_is_never_paused() {
        let t0 = Instant::now();
        let mut fair = FairShare::new(t0);
        let mut now = t0;
        for _ in 0..10_000 {
            now += us(30);
            fair.account(now, Duration::ZERO);
            now += us(90);
            fair.account(now, us(90));
            assert_eq!(fair.pause_due(), None);
        }
    }

    #[test]
    fn credit_and_debt_are_bounded() {
        let t0 = Instant::now();
        let mut fair = FairShare::new(t0);
        // Ten idle seconds earn no more than the cap: 201 ms of running spends it.
        fair.account(t0 + Duration::from_secs(10), Duration::from_secs(10));
        fair.account(t0 + Duration::from_millis(10_201), Duration::ZERO);
        assert!(fair.pause_due().is_some());
        // Ten busy seconds owe no more than the cap: 23 ms blocked pays it back.
        let t1 = t0 + Duration::from_secs(20);
        fair.account(t1, Duration::ZERO);
        fair.account(t1 + Duration::from_millis(23), Duration::from_millis(23));
        assert_eq!(fair.pause_due(), None);
    }
}
