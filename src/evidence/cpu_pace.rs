//! Whose CPU set a run's pace (pure): one thread runs on one core at a time, so a thread that
//! ran for nearly the whole of the run's window (from its mark to the end of its load) was the
//! limit — the browser's (by kind of process: its network service, where Chromium runs QUIC
//! and TLS; a renderer; the GPU process), the server's or the link emulator's. Failing that, a
//! run whose own processes kept every CPU busy through the window was paced by the machine
//! (the browser, the server and the emulator share its cores, which a user's device does not;
//! other processes' load is the machine check's business), and a browser capped to a slower
//! device's share of a core that used all of it was. A run paced by pagebench's own threads
//! (the embedded server, the emulator) measures pagebench, not the protocol, and is run again;
//! a series paced by the machine measures the machine (`diagnosis` says so); one paced by the
//! browser's CPU (a thread, or its device's cap) is a finding about the browser.

use serde::{Deserialize, Serialize};

use crate::support::contention::Contention;
use crate::support::cpu_cap::CpuShare;

/// A thread that ran at least this share of the window set the pace; so did a capped browser
/// that used this share of its cap.
pub const PACE_SHARE: f64 = 0.9;
/// A run whose own processes (pagebench, the browser, a reference server) kept the machine's
/// CPUs busy at least this share of the window (all of them together) was paced by the
/// machine. Higher than a thread's: a SCHED_FIFO emulator spins, and a busy browser reads in
/// bigger batches, so some of a busy machine's use is elastic.
pub const MACHINE_SHARE: f64 = 0.95;

/// Windows shorter than this are not judged: a short load is over before one thread's share
/// says anything (a handshake's burst of CPU fills a 50 ms window).
pub const MIN_WINDOW_MS: f64 = 500.0;

/// Which side's thread set the pace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pacer {
    /// The browser, by the kind of its process whose thread it was.
    Browser {
        process: String,
    },
    /// The whole browser, every process together, at its device's cap (in thousandths of a
    /// core, so the pacer stays comparable).
    DeviceCap {
        millicores: u32,
    },
    Server,
    Emulator,
    /// Every CPU of the machine (this many) busy.
    Machine {
        cpus: usize,
    },
}

/// The run's pace-setter and how much of the window it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    pub pacer: Pacer,
    /// The busiest thread's CPU time ÷ the window; for the machine, the run's CPU time ÷ the
    /// window × CPUs; for a device, the browser's ÷ the window × its cap (0..=1, a little over
    /// on tick rounding).
    pub share: f64,
}

impl Pace {
    /// Whether one of pagebench's own threads set the pace (the run then measures pagebench,
    /// not the protocol, and is run again). A busy machine is judged per series instead
    /// (`diagnosis`): h3 uses more CPU than h2, so rejecting its runs one by one would keep
    /// the ones that happened to use less.
    pub fn by_harness(&self) -> bool {
        matches!(self.pacer, Pacer::Server | Pacer::Emulator)
    }

    /// "the browser's network service used 97 % of a core".
    pub fn describe(&self) -> String {
        let pct = self.share * 100.0;
        match &self.pacer {
            Pacer::Browser { process } => {
                format!("the browser's {process} used {pct:.0} % of a core")
            }
            Pacer::DeviceCap { millicores } => format!(
                "the whole browser used {pct:.0} % of its device's {:.2} of a core",
                *millicores as f64 / 1000.0
            ),
            Pacer::Server => format!("the server used {pct:.0} % of a core"),
            Pacer::Emulator => format!("the link emulator used {pct:.0} % of a core"),
            Pacer::Machine { cpus } => format!("the machine's {cpus} CPUs were {pct:.0} % busy"),
        }
    }
}

/// What set the pace of `c`'s window, if anything did (and the window is at least
/// [`MIN_WINDOW_MS`]): the side whose busiest thread ran the largest share of it, if that
/// reaches [`PACE_SHARE`]; else the machine, which the run's own processes kept busy
/// [`MACHINE_SHARE`] of it on every CPU (judged only without sibling lanes, whose own gates judge
/// them); else the browser at its device's `cap`.
pub fn of(c: &Contention, cap: Option<CpuShare>) -> Option<Pace> {
    if c.window_ms < MIN_WINDOW_MS {
        return None;
    }
    busiest_thread(c)
        .or_else(|| busy_machine(c))
        .or_else(|| cap.and_then(|cap| at_cap(c, cap)))
}

fn busiest_thread(c: &Contention) -> Option<Pace> {
    let share = |busiest_ms: f64| busiest_ms / c.window_ms;
    let browser = c.browser_processes.iter().map(|p| Pace {
        pacer: Pacer::Browser {
            process: p.kind.clone(),
        },
        share: share(p.usage.busiest_thread_ms),
    });
    let harness = [
        c.server.map(|u| (Pacer::Server, u)),
        c.emulator.map(|u| (Pacer::Emulator, u)),
    ]
    .into_iter()
    .flatten()
    .map(|(pacer, u)| Pace {
        pacer,
        share: share(u.busiest_thread_ms),
    });
    browser
        .chain(harness)
        .filter(|p| p.share >= PACE_SHARE)
        .max_by(|a, b| a.share.total_cmp(&b.share))
}

fn busy_machine(c: &Contention) -> Option<Pace> {
    if c.cpus == 0 || c.siblings_cpu_ms > 0.0 {
        return None;
    }
    let share = c.ours_cpu_ms / (c.window_ms * c.cpus as f64);
    (share >= MACHINE_SHARE).then_some(Pace {
        pacer: Pacer::Machine { cpus: c.cpus },
        share,
    })
}

fn at_cap(c: &Contention, cap: CpuShare) -> Option<Pace> {
    let cores = cap.cores();
    if cores <= 0.0 || cores >= 1.0 {
        return None;
    }
    let share = c.browser.cpu_ms / (c.window_ms * cores);
    (share >= PACE_SHARE).then_some(Pace {
        pacer: Pacer::DeviceCap {
            millicores: (cores * 1000.0).round() as u32,
        },
        share,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::contention::{ProcessUsage, Usage};

    fn busy(busiest_thread_ms: f64) -> Usage {
        Usage {
            cpu_ms: busiest_thread_ms * 1.5,
            busiest_thread_ms,
            ..Usage::default()
        }
    }

    fn window(ms: f64) -> Contention {
        Contention {
            window_ms: ms,
            cpus: 2,
            browser_processes: vec![
                ProcessUsage {
                    kind: "network service".into(),
                    processes: 1,
                    usage: busy(0.5 * ms),
                },
                ProcessUsage {
                    kind: "renderer".into(),
                    processes: 1,
                    usage: busy(0.2 * ms),
                },
            ],
            server: Some(busy(0.3 * ms)),
            emulator: Some(busy(0.4 * ms)),
            ..Contention::default()
        }
    }

    #[test]
    fn the_thread_that_ran_nearly_the_whole_window_set_the_pace() {
        let mut c = window(2000.0);
        assert_eq!(
            of(&c, None),
            None,
            "no thread near a full core: nothing set the pace"
        );
        c.browser_processes[0].usage = busy(1940.0);
        let p = of(&c, None).unwrap();
        assert!(!p.by_harness());
        assert_eq!(
            p.describe(),
            "the browser's network service used 97 % of a core"
        );
        // The embedded server at a full core, busier still: the harness set the pace.
        c.server = Some(busy(1990.0));
        let p = of(&c, None).unwrap();
        assert_eq!((p.pacer.clone(), p.by_harness()), (Pacer::Server, true));
        assert_eq!(p.describe(), "the server used 100 % of a core");
        c.emulator = Some(busy(1999.0));
        assert_eq!(of(&c, None).unwrap().pacer, Pacer::Emulator);
    }

    #[test]
    fn a_machine_busy_on_every_cpu_is_the_harness_s_limit() {
        let mut c = window(2000.0);
        c.ours_cpu_ms = 0.9 * 4000.0;
        c.machine_busy_ms = 4000.0;
        assert_eq!(
            of(&c, None),
            None,
            "the run's own 90 % of 2 CPUs: not saturated"
        );
        c.ours_cpu_ms = 0.97 * 4000.0;
        let p = of(&c, None).unwrap();
        assert_eq!(p.pacer, Pacer::Machine { cpus: 2 });
        assert!(
            !p.by_harness(),
            "judged per series, never by rejecting runs"
        );
        assert_eq!(p.describe(), "the machine's 2 CPUs were 97 % busy");
        // A thread at a full core is the more specific answer.
        c.browser_processes[0].usage = busy(1950.0);
        assert!(matches!(of(&c, None).unwrap().pacer, Pacer::Browser { .. }));
        // Sibling lanes' load is judged by their own gates.
        c.browser_processes[0].usage = busy(100.0);
        c.siblings_cpu_ms = 1500.0;
        assert_eq!(of(&c, None), None);
    }

    #[test]
    fn a_capped_browser_that_used_its_whole_share_is_a_finding_about_the_browser() {
        let mut c = window(4000.0);
        let quarter = CpuShare {
            period_us: 10_000,
            quota_us: 2_500,
        };
        c.browser.cpu_ms = 0.5 * 1000.0;
        assert_eq!(of(&c, Some(quarter)), None, "half its share");
        c.browser.cpu_ms = 0.98 * 1000.0;
        let p = of(&c, Some(quarter)).unwrap();
        assert_eq!(p.pacer, Pacer::DeviceCap { millicores: 250 });
        assert!(!p.by_harness());
        assert_eq!(
            p.describe(),
            "the whole browser used 98 % of its device's 0.25 of a core"
        );
        assert_eq!(of(&c, None), None, "uncapped: a quarter core is nothing");
    }

    #[test]
    fn a_short_window_is_not_judged() {
        let mut c = window(300.0);
        c.server = Some(busy(300.0));
        assert_eq!(of(&c, None), None);
    }
}
