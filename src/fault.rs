//! Fault injection, a test hook: stall or stop the emulator, or kill the reference server, a
//! given time into one run — so tests can prove that a run measured wrong is caught, kept on
//! disk as invalid and run again (`pagebench matrix --inject-fault`, hidden from `--help`).
//!
//! Syntax: `RUN_ID=FAULT@AFTER`, where FAULT is `stall:DURATION`, `stop-emulator`,
//! `kill-server` or `drop-down:N` (the link drops the N-th server → client packet of at least
//! [`DROP_MIN_LEN`] bytes after AFTER: one chosen data packet, for head-of-line tests), e.g. `wired-page10-r01-embedded-h2=stall:400ms@100ms`. RUN_ID is one
//! attempt's id: a planned run's id hits its first attempt only (the retry runs clean),
//! `<id>.a2` its second. An id the plan cannot produce is an error, not a silent no-op.

use std::str::FromStr;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use crate::netem::emulator::FaultHandle;

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The emulator sleeps this long without reading or releasing packets.
    StallEmulator(Duration),
    /// The emulator thread ends (its TUN devices go with it).
    StopEmulator,
    /// The reference server's process group gets SIGKILL.
    KillServer,
    /// The link drops the N-th (1-based) server → client packet of at least [`DROP_MIN_LEN`]
    /// bytes from then on.
    DropDown(u32),
}

/// A chosen drop picks data packets: full-sized segments and QUIC packets, not ACKs.
pub const DROP_MIN_LEN: usize = 1000;

/// Every fault names an attempt the plan can run: a planned id, or `<id>.aN` with N within
/// the retries allowed.
pub fn check_targets<'a>(
    faults: &[FaultInjection],
    plan_ids: impl IntoIterator<Item = &'a str>,
    retry_invalid: u32,
) -> Result<()> {
    let ids: std::collections::BTreeSet<&str> = plan_ids.into_iter().collect();
    for f in faults {
        // `<id>.aN` (N ≥ 2, as `record::attempt_id` writes it) or a plain planned id.
        let (plan_id, attempt) = match f.run_id.rsplit_once(".a") {
            Some((p, n)) if n.parse::<u32>().is_ok_and(|n| n >= 2) => {
                (p, n.parse::<u32>().unwrap_or(2))
            }
            _ => (f.run_id.as_str(), 1),
        };
        if !ids.contains(plan_id) {
            bail!(
                "--inject-fault {}: no planned run or attempt has that id (planned ids look like {}; a retry is <id>.a2)",
                f.run_id,
                ids.iter().next().copied().unwrap_or("wired-page10-r01-embedded-h2")
            );
        }
        if attempt > retry_invalid + 1 {
            bail!(
                "--inject-fault {}: attempt {attempt} cannot happen with --retry-invalid {retry_invalid}",
                f.run_id
            );
        }
    }
    Ok(())
}

/// One fault for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultInjection {
    pub run_id: String,
    pub fault: Fault,
    /// How long after the load starts.
    pub after: Duration,
}

impl FromStr for FaultInjection {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let usage = "use RUN_ID=stall:DURATION@AFTER, RUN_ID=stop-emulator@AFTER, RUN_ID=kill-server@AFTER or RUN_ID=drop-down:N@AFTER (e.g. wired-page10-r01-embedded-h2=stall:400ms@100ms)";
        let (run_id, rest) = s
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
            Some(("drop-down", n)) => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Fault::DropDown(n),
                _ => bail!("--inject-fault {s:?}: drop-down:N needs N ≥ 1 (which data packet to drop); {usage}"),
            },
            None if what == "stop-emulator" => Fault::StopEmulator,
            None if what == "kill-server" => Fault::KillServer,
            _ => bail!("--inject-fault {s:?}: unknown fault {what:?}; {usage}"),
        };
        if run_id.trim().is_empty() {
            bail!("--inject-fault {s:?}: the run id is empty; {usage}");
        }
        Ok(FaultInjection {
            run_id: run_id.trim().to_string(),
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
}

impl Armed {
    pub fn arm(injection: &FaultInjection, targets: Targets) -> Armed {
        let (cancel, cancelled) = mpsc::channel::<()>();
        let (fault, after) = (injection.fault, injection.after);
        let thread = std::thread::spawn(move || -> Result<bool> {
            if cancelled.recv_timeout(after).is_ok() {
                return Ok(false);
            }
            tracing::warn!("injecting fault {fault:?}");
            match fault {
                Fault::StallEmulator(d) => targets.emulator.stall(d)?,
                Fault::StopEmulator => targets.emulator.kill()?,
                Fault::DropDown(n) => targets.emulator.drop_chosen(
                    crate::netem::Direction::Down,
                    crate::netem::ChosenDrop {
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
            }
            Ok(true)
        });
        Armed {
            cancel,
            thread: Some(thread),
        }
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
        assert_eq!(f.run_id, "a-b-r01-h2");
        assert_eq!(f.fault, Fault::StallEmulator(Duration::from_millis(400)));
        assert_eq!(f.after, Duration::from_millis(100));
        let f: FaultInjection = "x=stop-emulator@1s".parse().unwrap();
        assert_eq!(
            (f.fault, f.after),
            (Fault::StopEmulator, Duration::from_secs(1))
        );
        let f: FaultInjection = "x=kill-server@0ms".parse().unwrap();
        assert_eq!(f.fault, Fault::KillServer);
        let f: FaultInjection = "x=drop-down:3@20ms".parse().unwrap();
        assert_eq!(f.fault, Fault::DropDown(3));
        assert!("x=drop-down:0@20ms".parse::<FaultInjection>().is_err());
    }

    #[test]
    fn faults_must_name_an_attempt_the_plan_runs() {
        let plan = ["w-p-r01-e-h2", "w-p-r02-e-h2"];
        let f = |s: &str| vec![s.parse::<FaultInjection>().unwrap()];
        assert!(check_targets(&f("w-p-r01-e-h2=kill-server@1s"), plan, 2).is_ok());
        assert!(check_targets(&f("w-p-r02-e-h2.a3=kill-server@1s"), plan, 2).is_ok());
        for (bad, why) in [
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
