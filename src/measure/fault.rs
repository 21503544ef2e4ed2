//! Fault injection, a test hook: stall or stop the emulator, or kill the reference server, a
//! given time into one run — so tests can prove that a run measured wrong is caught, kept on
//! disk as invalid and run again (`pagebench matrix --inject-fault`, hidden from `--help`).
//!
//! Syntax: `TARGET=FAULT@AFTER`. FAULT is `stall:DURATION`, `stall-every:DURATION/PERIOD`
//! (the emulator stalls DURATION every PERIOD from AFTER until the load ends: what a starved
//! CPU does to it), `stop-emulator`, `kill-server` or `drop-down:N` (the link drops the N-th
//! server → client packet of at least [`DROP_MIN_LEN`] bytes after AFTER: one chosen data
//! packet, for head-of-line tests), e.g. `wired-page10-r01-embedded-h2=stall:400ms@100ms`.
//! TARGET is one attempt's id — a planned run's id hits its first attempt only (the retry
//! runs clean), `<id>.a2` its second — or a pattern of planned ids with `*` for any text,
//! hitting the first attempt of each planned run it matches (`*-h3`), optionally only a share
//! of them chosen by their ids (`*-h3%30`: about 30 %, the same runs every time). A target the
//! plan cannot produce is an error, not a silent no-op.

use std::str::FromStr;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use crate::link::emulator::FaultHandle;

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The emulator sleeps this long without reading or releasing packets.
    StallEmulator(Duration),
    /// The emulator sleeps `stall` every `period` until the load ends.
    StallEvery { stall: Duration, period: Duration },
    /// The emulator thread ends (its TUN devices go with it).
    StopEmulator,
    /// The reference server's process group gets SIGKILL.
    KillServer,
    /// The link drops the N-th (1-based) server → client packet of at least [`DROP_MIN_LEN`]
    /// bytes from then on.
    DropDown(u32),
    /// A thread counted as the server's spins on a core from then until the load ends: a
    /// server pinned at a full core (the run is then limited by the harness).
    BusyServer,
}

/// A chosen drop picks data packets: full-sized segments and QUIC packets, not ACKs.
pub const DROP_MIN_LEN: usize = 1000;

/// Which attempts a fault hits.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// One attempt: `<plan id>` (its first) or `<plan id>.aN`.
    Attempt(String),
    /// The first attempts of the planned runs whose ids match `glob` (`*`: any text), of
    /// `share_pct` % of them when given (chosen by id).
    Pattern {
        glob: String,
        share_pct: Option<f64>,
    },
}

impl Target {
    fn parse(s: &str) -> Result<Target> {
        if !s.contains('*') {
            return Ok(Target::Attempt(s.to_string()));
        }
        let (glob, share_pct) = match s.rsplit_once('%') {
            Some((g, pct)) => {
                let pct: f64 = pct.parse().map_err(|_| {
                    anyhow!("--inject-fault {s:?}: {pct:?} after '%' is not a percentage")
                })?;
                if !(pct > 0.0 && pct <= 100.0) {
                    bail!("--inject-fault {s:?}: the share must be above 0 and at most 100 %");
                }
                (g, Some(pct))
            }
            None => (s, None),
        };
        Ok(Target::Pattern {
            glob: glob.to_string(),
            share_pct,
        })
    }

    /// Whether attempt `attempt` of planned run `plan_id` is hit.
    pub fn hits(&self, plan_id: &str, attempt: u32) -> bool {
        match self {
            Target::Attempt(id) => *id == crate::evidence::run_record::attempt_id(plan_id, attempt),
            Target::Pattern { glob, share_pct } => {
                attempt == 1
                    && glob_matches(glob, plan_id)
                    && share_pct.is_none_or(|pct| chosen(plan_id, pct))
            }
        }
    }
}

/// `*` matches any text (possibly none); everything else itself.
fn glob_matches(glob: &str, text: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return glob == text;
    }
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `plan_id` is among the `pct` % a share chooses: a hash of the id (FNV-1a), so the
/// same runs every time.
fn chosen(plan_id: &str, pct: f64) -> bool {
    let hash = plan_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    ((hash % 10_000) as f64) < pct * 100.0
}

/// Every fault names attempts the plan can run: a planned id, `<id>.aN` with N within the
/// retries allowed, or a pattern that matches a planned id.
pub fn check_targets<'a>(
    faults: &[FaultInjection],
    plan_ids: impl IntoIterator<Item = &'a str>,
    retry_invalid: u32,
) -> Result<()> {
    let ids: std::collections::BTreeSet<&str> = plan_ids.into_iter().collect();
    let example = ids
        .iter()
        .next()
        .copied()
        .unwrap_or("wired-page10-r01-embedded-h2");
    for f in faults {
        let Target::Attempt(run_id) = &f.target else {
            if !ids.iter().any(|id| f.target.hits(id, 1)) {
                bail!(
                    "--inject-fault {}: the pattern hits no planned run (planned ids look like {example})",
                    f.spec
                );
            }
            continue;
        };
        // `<id>.aN` (N ≥ 2, as `record::attempt_id` writes it) or a plain planned id.
        let (plan_id, attempt) = match run_id.rsplit_once(".a") {
            Some((p, n)) if n.parse::<u32>().is_ok_and(|n| n >= 2) => {
                (p, n.parse::<u32>().unwrap_or(2))
            }
            _ => (run_id.as_str(), 1),
        };
        if !ids.contains(plan_id) {
            bail!(
                "--inject-fault {run_id}: no planned run or attempt has that id (planned ids look like {example}; a retry is <id>.a2)"
            );
        }
        if attempt > retry_invalid + 1 {
            bail!("--inject-fault {run_id}: attempt {attempt} cannot happen with --retry-invalid {retry_invalid}");
        }
    }
    Ok(())
}

/// One fault for the attempts of a target.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultInjection {
    /// As given (for messages).
    pub spec: String,
    pub target: Target,
    pub fault: Fault,
    /// How long after the load starts.
    pub after: Duration,
}

impl FaultInjection {
    /// The fault of `faults` that hits attempt `attempt` of planned run `plan_id`, if any.
    pub fn for_attempt<'a>(
        faults: &'a [FaultInjection],
        plan_id: &str,
        attempt: u32,
    ) -> Option<&'a FaultInjection> {
        faults.iter().find(|f| f.target.hits(plan_id, attempt))
    }
}

impl FromStr for FaultInjection {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let usage = "use TARGET=stall:DURATION@AFTER, TARGET=stall-every:DURATION/PERIOD@AFTER, TARGET=stop-emulator@AFTER, TARGET=kill-server@AFTER, TARGET=busy-server@AFTER or TARGET=drop-down:N@AFTER, where TARGET is a run id or a pattern like *-h3 or *-h3%30 (e.g. wired-page10-r01-embedded-h2=stall:400ms@100ms)";
        let (target, rest) = s
            .split_once('=')
            .ok_or_else(|| anyhow!("--inject-fault {s:?}: no '='; {usage}"))?;
        let (what, after) = rest
            .rsplit_once('@')
            .ok_or_else(|| anyhow!("--inject-fault {s:?}: no '@AFTER'; {usage}"))?;
        let duration = |d: &str| {
            humantime::parse_duration(d)
                .map_err(|e| anyhow!("--inject-fault {s:?}: {d:?} is not a duration ({e})"))
        };
        let fault = match what.split_once(':') {
            Some(("stall", d)) => Fault::StallEmulator(duration(d)?),
            Some(("stall-every", spec)) => {
                let (stall, period) = spec.split_once('/').ok_or_else(|| {
                    anyhow!("--inject-fault {s:?}: stall-every needs DURATION/PERIOD; {usage}")
                })?;
                let (stall, period) = (duration(stall)?, duration(period)?);
                if period <= stall {
                    bail!("--inject-fault {s:?}: the period must be longer than the stall");
                }
                Fault::StallEvery { stall, period }
            }
            Some(("drop-down", n)) => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Fault::DropDown(n),
                _ => bail!("--inject-fault {s:?}: drop-down:N needs N ≥ 1 (which data packet to drop); {usage}"),
            },
            None if what == "stop-emulator" => Fault::StopEmulator,
            None if what == "kill-server" => Fault::KillServer,
            None if what == "busy-server" => Fault::BusyServer,
            _ => bail!("--inject-fault {s:?}: unknown fault {what:?}; {usage}"),
        };
        if target.trim().is_empty() {
            bail!("--inject-fault {s:?}: the target is empty; {usage}");
        }
        Ok(FaultInjection {
            spec: s.to_string(),
            target: Target::parse(target.trim())?,
            fault,
            after: duration(after)?,
        })
    }
}

/// How to reach what a fault hits.
pub struct Targets {
    pub emulator: FaultHandle,
    /// The reference server's process group, if the run's server is one.
    pub server_group: Option<i32>,
}

/// A fault armed for one run: fires `after` into the load unless disarmed first.
pub struct Armed {
    cancel: Sender<()>,
    thread: Option<JoinHandle<Result<bool>>>,
    /// `busy-server`: the thread that spins (counted as the server's).
    busy_thread: Option<i32>,
}

impl Armed {
    pub fn arm(injection: &FaultInjection, targets: Targets) -> Armed {
        if injection.fault == Fault::BusyServer {
            return Armed::busy(injection.after);
        }
        let (cancel, cancelled) = mpsc::channel::<()>();
        let (fault, after) = (injection.fault, injection.after);
        let thread = std::thread::spawn(move || -> Result<bool> {
            if cancelled.recv_timeout(after).is_ok() {
                return Ok(false);
            }
            tracing::warn!("injecting fault {fault:?}");
            match fault {
                Fault::StallEmulator(d) => targets.emulator.stall(d)?,
                Fault::StallEvery { stall, period } => loop {
                    targets.emulator.stall(stall)?;
                    if cancelled.recv_timeout(period).is_ok() {
                        break;
                    }
                },
                Fault::StopEmulator => targets.emulator.kill()?,
                Fault::DropDown(n) => targets.emulator.drop_chosen(
                    crate::link::Direction::Down,
                    crate::link::ChosenDrop {
                        skip: n - 1,
                        min_len: DROP_MIN_LEN,
                    },
                )?,
                Fault::KillServer => {
                    let pgid = targets.server_group.ok_or_else(|| {
                        anyhow!("kill-server: the run's server is not a process of ours")
                    })?;
                    // SAFETY: signalling the process group pagebench started for this server.
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                }
                Fault::BusyServer => unreachable!("armed by Armed::busy"),
            }
            Ok(true)
        });
        Armed {
            cancel,
            thread: Some(thread),
            busy_thread: None,
        }
    }

    /// `busy-server`: a thread that spins from `after` until disarmed; its id is known at once.
    fn busy(after: Duration) -> Armed {
        let (cancel, cancelled) = mpsc::channel::<()>();
        let (tid_tx, tid_rx) = mpsc::sync_channel::<i32>(1);
        let thread = std::thread::spawn(move || -> Result<bool> {
            // SAFETY: gettid(2) has no preconditions.
            let _ = tid_tx.send(unsafe { libc::gettid() });
            if !matches!(
                cancelled.recv_timeout(after),
                Err(mpsc::RecvTimeoutError::Timeout)
            ) {
                return Ok(false);
            }
            tracing::warn!("injecting fault BusyServer");
            let mut x = 1u64;
            while matches!(cancelled.try_recv(), Err(mpsc::TryRecvError::Empty)) {
                for _ in 0..10_000 {
                    x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005) | 1);
                }
            }
            Ok(true)
        });
        Armed {
            cancel,
            busy_thread: tid_rx.recv().ok(),
            thread: Some(thread),
        }
    }

    /// The thread a `busy-server` fault spins on (to be counted as the server's).
    pub fn busy_thread(&self) -> Option<i32> {
        self.busy_thread
    }

    /// Stops a fault that has not fired yet; returns whether it fired.
    pub fn disarm(mut self) -> bool {
        let _ = self.cancel.send(());
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Ok(fired))) => fired,
            Some(Ok(Err(e))) => {
                tracing::warn!("fault injection failed: {e:#}");
                false
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_faults() {
        let f: FaultInjection = "a-b-r01-h2=stall:400ms@100ms".parse().unwrap();
        assert_eq!(f.target, Target::Attempt("a-b-r01-h2".into()));
        assert_eq!(f.fault, Fault::StallEmulator(Duration::from_millis(400)));
        assert_eq!(f.after, Duration::from_millis(100));
        let f: FaultInjection = "x=stop-emulator@1s".parse().unwrap();
        assert_eq!(
            (f.fault, f.after),
            (Fault::StopEmulator, Duration::from_secs(1))
        );
        let f: FaultInjection = "x=kill-server@0ms".parse().unwrap();
        assert_eq!(f.fault, Fault::KillServer);
        let f: FaultInjection = "x=busy-server@0ms".parse().unwrap();
        assert_eq!(f.fault, Fault::BusyServer);
        let f: FaultInjection = "x=drop-down:3@20ms".parse().unwrap();
        assert_eq!(f.fault, Fault::DropDown(3));
        assert!("x=drop-down:0@20ms".parse::<FaultInjection>().is_err());
        let f: FaultInjection = "*-h3%30=stall-every:5ms/100ms@0ms".parse().unwrap();
        assert_eq!(
            f.fault,
            Fault::StallEvery {
                stall: Duration::from_millis(5),
                period: Duration::from_millis(100)
            }
        );
        assert_eq!(
            f.target,
            Target::Pattern {
                glob: "*-h3".into(),
                share_pct: Some(30.0)
            }
        );
        assert!("*%0=kill-server@1s".parse::<FaultInjection>().is_err());
        assert!("x=stall-every:5ms/5ms@1s"
            .parse::<FaultInjection>()
            .is_err());
    }

    #[test]
    fn a_pattern_hits_first_attempts_of_matching_runs_and_a_share_of_them() {
        let hits =
            |target: &str, id: &str, attempt: u32| Target::parse(target).unwrap().hits(id, attempt);
        assert!(hits("*-h3", "wired-page10-r01-embedded-h3", 1));
        assert!(!hits("*-h3", "wired-page10-r01-embedded-h3", 2));
        assert!(!hits("*-h3", "wired-page10-r01-embedded-h2", 1));
        assert!(hits("wired-*-h3", "wired-page10-r01-embedded-h3", 1));
        assert!(!hits("mobile-*", "wired-page10-r01-embedded-h3", 1));
        assert!(hits("*page10*h3", "wired-page10-r01-embedded-h3", 1));
        assert!(hits(
            "wired-page10-r01-embedded-h3.a2",
            "wired-page10-r01-embedded-h3",
            2
        ));
        // About 30 % of 1000 ids, the same ones every time.
        let ids: Vec<String> = (0..1000).map(|i| format!("w-p-r{i:03}-e-h3")).collect();
        let chosen: Vec<&String> = ids.iter().filter(|id| hits("*-h3%30", id, 1)).collect();
        assert!((250..350).contains(&chosen.len()), "{}", chosen.len());
        let again: Vec<&String> = ids.iter().filter(|id| hits("*-h3%30", id, 1)).collect();
        assert_eq!(chosen, again);
    }

    #[test]
    fn faults_must_name_an_attempt_the_plan_runs() {
        let plan = ["w-p-r01-e-h2", "w-p-r02-e-h2"];
        let f = |s: &str| vec![s.parse::<FaultInjection>().unwrap()];
        assert!(check_targets(&f("w-p-r01-e-h2=kill-server@1s"), plan, 2).is_ok());
        assert!(check_targets(&f("w-p-r02-e-h2.a3=kill-server@1s"), plan, 2).is_ok());
        assert!(check_targets(&f("*-h2=kill-server@1s"), plan, 2).is_ok());
        for (bad, why) in [
            ("*-h3=kill-server@1s", "hits no planned run"),
            ("w-p-r03-e-h2=kill-server@1s", "no planned run"),
            ("w-p-r01-e-h2.a1=kill-server@1s", "no planned run"),
            ("w-p-r01-e-h2.a4=kill-server@1s", "attempt 4 cannot happen"),
        ] {
            let e = check_targets(&f(bad), plan, 2).unwrap_err().to_string();
            assert!(
                e.contains(why) && e.contains("--inject-fault"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn bad_specs_say_what_to_write() {
        for bad in [
            "x",
            "x=stall:400ms",
            "x=melt@1s",
            "x=stall:soon@1s",
            "=stop-emulator@1s",
        ] {
            let e = bad.parse::<FaultInjection>().unwrap_err().to_string();
            assert!(e.contains("--inject-fault"), "{bad}: {e}");
        }
    }
}
