//! Whose CPU set a run's pace (pure): one thread runs on one core at a time, so a thread that
//! ran for nearly the whole of the run's window (from its mark to the end of its load) was the
//! limit — the browser's (by kind of process: its network service, where Chromium runs QUIC
//! and TLS; a renderer; the GPU process), the server's or the link emulator's. A run paced by
//! pagebench's own parts (the embedded server, the emulator) measures pagebench, not the
//! protocol; one paced by the browser's CPU is a finding about the browser.

use serde::{Deserialize, Serialize};

use crate::support::contention::Contention;

/// A thread that ran at least this share of the window set the pace.
pub const PACE_SHARE: f64 = 0.9;

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
    Server,
    Emulator,
}

/// The run's pace-setter and how much of the window its busiest thread ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    pub pacer: Pacer,
    /// The busiest thread's CPU time ÷ the window (0..=1, a little over on tick rounding).
    pub share: f64,
}

impl Pace {
    /// Whether pagebench's own parts set the pace (the run then measures pagebench).
    pub fn by_harness(&self) -> bool {
        !matches!(self.pacer, Pacer::Browser { .. })
    }

    /// "the browser's network service used 97 % of a core".
    pub fn describe(&self) -> String {
        let who = match &self.pacer {
            Pacer::Browser { process } => format!("the browser's {process}"),
            Pacer::Server => "the server".to_string(),
            Pacer::Emulator => "the link emulator".to_string(),
        };
        format!("{who} used {:.0} % of a core", self.share * 100.0)
    }
}

/// The side whose busiest thread ran the largest share of `c`'s window, if that share reaches
/// [`PACE_SHARE`] and the window [`MIN_WINDOW_MS`]; None otherwise.
pub fn of(c: &Contention) -> Option<Pace> {
    if c.window_ms < MIN_WINDOW_MS {
        return None;
    }
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
            of(&c),
            None,
            "no thread near a full core: nothing set the pace"
        );
        c.browser_processes[0].usage = busy(1940.0);
        let p = of(&c).unwrap();
        assert!(!p.by_harness());
        assert_eq!(
            p.describe(),
            "the browser's network service used 97 % of a core"
        );
        // The embedded server at a full core, busier still: the harness set the pace.
        c.server = Some(busy(1990.0));
        let p = of(&c).unwrap();
        assert_eq!((p.pacer.clone(), p.by_harness()), (Pacer::Server, true));
        assert_eq!(p.describe(), "the server used 100 % of a core");
        c.emulator = Some(busy(1999.0));
        assert_eq!(of(&c).unwrap().pacer, Pacer::Emulator);
    }

    #[test]
    fn a_short_window_is_not_judged() {
        let mut c = window(300.0);
        c.server = Some(busy(300.0));
        assert_eq!(of(&c), None);
    }
}
