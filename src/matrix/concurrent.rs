//! The plan walked on concurrent lanes (`--jobs`): the IO side of [`super::lanes`]. Each lane
//! is a thread with its own testbed — its own namespaces, link, servers and browsers — built in
//! that thread before any run starts (a testbed's start-up would otherwise burst the CPU under
//! another lane's load); the main thread asks the scheduler which units start, hands them
//! out, and waits for lanes to come back. A lane walks its unit with the
//! serial loop ([`run_plan`]): its runs in their seeded order, retries, a rebuilt testbed,
//! the next browser launched during a run's teardown. Every attempt goes to the one results
//! directory under a lock, on disk before that lane's next attempt starts; the needs the
//! scheduler decides by are read from the same records.

use std::sync::mpsc;
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use indicatif::ProgressBar;

use super::execute::{run_plan, Executor, PlanContext, PlanEnd, RunLog, Tally};
use super::lanes::{units, Assignment, Needs, Policy, Scheduler};
use crate::config::identity::Phase;
use crate::config::plan::PlannedRun;
use crate::config::profile::Profile;
use crate::evidence::run_record::{LaneRun, RunRecord};
use crate::results::store::Attempts;

/// Builds lane `lane`'s executor with `profile` (in the lane's own thread).
pub type LaneFactory<'a> = dyn Fn(usize, &Profile) -> Result<Box<dyn Executor + 'a>> + Sync + 'a;

/// The results directory (or any [`RunLog`]) shared by the lanes, and the needs its records
/// tell.
struct Shared<'a> {
    log: Mutex<&'a mut (dyn RunLog + Send)>,
    needs: Mutex<Needs>,
}

/// One lane's handle on [`Shared`].
struct LaneLog<'s, 'a>(&'s Shared<'a>);

impl RunLog for LaneLog<'_, '_> {
    fn attempts(&self, plan_id: &str) -> Attempts {
        lock(&self.0.log).attempts(plan_id)
    }

    fn append(&mut self, rec: &RunRecord) -> Result<()> {
        lock(&self.0.log).append(rec)?;
        lock(&self.0.needs).record(rec);
        Ok(())
    }
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a lane reports when its unit is done.
struct Done {
    lane: usize,
    end: Result<PlanEnd>,
}

/// Walks `todo` on the lanes `policy` allows, `make` building each lane's executor, from the
/// needs already known (a resumed walk's records tell them: [`Needs::record`]).
pub fn run_lanes<'f>(
    policy: Policy,
    needs: Needs,
    make: &LaneFactory<'f>,
    ctx: &PlanContext,
    todo: &[&PlannedRun],
    log: &mut (dyn RunLog + Send),
    pb: &ProgressBar,
) -> Result<PlanEnd> {
    let units = units(todo);
    let shared = Shared {
        log: Mutex::new(log),
        needs: Mutex::new(needs),
    };
    let warmups = units.iter().map(|u| u[0].phase == Phase::Warmup).collect();
    let mut sched = Scheduler::new(policy, warmups);
    let mut tally = Tally::default();
    let mut interrupted = false;
    let mut failed: Option<anyhow::Error> = None;
    let Some(first) = units.first().map(|u| u[0].profile.clone()) else {
        return Ok(PlanEnd::Done(tally));
    };
    let first = profile_named(ctx, &first)?;
    std::thread::scope(|scope| {
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let mut lanes: Vec<mpsc::Sender<Assignment>> = Vec::new();
        for lane in 0..policy.jobs.max(1) {
            let (tx, rx) = mpsc::channel::<Assignment>();
            lanes.push(tx);
            let (done_tx, shared, units, first) = (done_tx.clone(), &shared, &units, &first);
            std::thread::Builder::new()
                .name(format!("lane-{lane}"))
                .spawn_scoped(scope, move || {
                    lane_loop(lane, first, rx, done_tx, make, ctx, units, shared, pb)
                })
                .expect("a lane thread starts");
        }
        // Every lane says it is ready (or why it is not) before the first run.
        for _ in 0..lanes.len() {
            match done_rx.recv() {
                Ok(Done { end: Err(e), .. }) => {
                    failed.get_or_insert(e);
                    sched.stop();
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        loop {
            let needs = lock(&shared.needs).clone();
            for a in sched.start(|u| needs.of_unit(&units[u])) {
                tracing::debug!(
                    "lane {} takes {} round {} ({})",
                    a.lane,
                    units[a.unit][0].cell(),
                    units[a.unit][0].round,
                    if a.shared { "shared" } else { "alone" }
                );
                if lanes[a.lane].send(a).is_err() {
                    failed.get_or_insert_with(|| anyhow!("lane {} is gone", a.lane));
                    sched.stop();
                }
            }
            if sched.is_done() {
                break;
            }
            let Ok(d) = done_rx.recv() else { break };
            sched.finished(d.lane);
            match d.end {
                Ok(PlanEnd::Done(t)) => tally.add(&t),
                Ok(PlanEnd::Interrupted) => {
                    interrupted = true;
                    sched.stop();
                }
                Err(e) => {
                    failed.get_or_insert(e);
                    sched.stop();
                }
            }
            if (ctx.stop)() {
                interrupted = true;
                sched.stop();
            }
        }
        // Closing the lanes' channels ends their threads (and drops their testbeds).
        lanes.clear();
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(if interrupted {
        PlanEnd::Interrupted
    } else {
        PlanEnd::Done(tally)
    })
}

fn profile_named(ctx: &PlanContext, name: &str) -> Result<Profile> {
    ctx.profiles
        .iter()
        .find(|p| p.name == name)
        .cloned()
        .ok_or_else(|| anyhow!("profile {name} is not planned"))
}

/// One lane: build its executor with `first` and say it is ready, then walk each unit it is
/// given with the serial loop and say when it is done.
#[allow(clippy::too_many_arguments)]
fn lane_loop<'f>(
    lane: usize,
    first: &Profile,
    work: mpsc::Receiver<Assignment>,
    done: mpsc::Sender<Done>,
    make: &LaneFactory<'f>,
    ctx: &PlanContext,
    units: &[Vec<&PlannedRun>],
    shared: &Shared,
    pb: &ProgressBar,
) {
    let (mut exec, ready) = match make(lane, first) {
        Ok(e) => (Some(e), Ok(PlanEnd::Done(Tally::default()))),
        Err(e) => (None, Err(e.context(format!("lane {lane}'s testbed")))),
    };
    let mut current = first.name.clone();
    if done.send(Done { lane, end: ready }).is_err() || exec.is_none() {
        return;
    }
    for a in work {
        let end = walk_unit(
            lane,
            a,
            &mut exec,
            &mut current,
            make,
            ctx,
            units,
            shared,
            pb,
        );
        if done.send(Done { lane, end }).is_err() {
            break;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn walk_unit<'f>(
    lane: usize,
    a: Assignment,
    exec: &mut Option<Box<dyn Executor + 'f>>,
    current: &mut String,
    make: &LaneFactory<'f>,
    ctx: &PlanContext,
    units: &[Vec<&PlannedRun>],
    shared: &Shared,
    pb: &ProgressBar,
) -> Result<PlanEnd> {
    let unit = &units[a.unit];
    if exec.is_none() {
        *exec = Some(make(lane, &profile_named(ctx, &unit[0].profile)?)?);
        current.clone_from(&unit[0].profile);
    }
    let ctx = PlanContext {
        lane: Some(LaneRun {
            lane: lane as u32,
            shared: a.shared,
        }),
        // The unit expected next on this lane: its first browser may start during this unit's
        // last teardown, as a serial walk's next run's does.
        then: a.then.and_then(|u| units.get(u)).map(|u| u[0]),
        ..ctx.clone()
    };
    let exec = exec.as_mut().expect("built above");
    let end = run_plan(exec.as_mut(), &ctx, current, unit, &mut LaneLog(shared), pb);
    *current = unit[unit.len() - 1].profile.clone();
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::identity::{BrowserId, View};
    use crate::config::plan::{self, PlanSpec};
    use crate::config::protocol::{parse_variants, H3Mode};
    use crate::config::workload::Manifest;
    use crate::measure::runner::RunSpec;
    use crate::support::contention::{Contention, Usage};
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    /// What the fake lanes did: per attempt, its id, lane and when it ran.
    type Trace = Mutex<Vec<Ran>>;

    /// A testbed that takes 15 ms a run and says the page needs 0.8 CPU-s/s, the download 0.05.
    struct FakeLane<'t> {
        trace: &'t Trace,
        /// The run it was told comes next (whose browser it may launch ahead).
        next: Option<String>,
    }

    impl Executor for FakeLane<'_> {
        fn set_profile(&mut self, _: &Profile) -> Result<()> {
            Ok(())
        }

        fn expect_next(&mut self, next: Option<&RunSpec>) {
            self.next = next.map(|n| n.id.clone());
        }

        fn execute(&mut self, spec: &RunSpec) -> Result<RunRecord> {
            let start = Instant::now();
            std::thread::sleep(Duration::from_millis(15));
            let need = if spec.manifest.workload.name == "download" {
                0.05
            } else {
                0.8
            };
            let told = self.next.clone();
            lock(self.trace).push((spec.id.clone(), spec.lane, start, Instant::now(), told));
            Ok(RunRecord {
                plan_id: spec.plan_id.clone(),
                attempt: spec.attempt,
                profile: spec.profile.name.clone(),
                workload: spec.manifest.workload.name.clone(),
                lane: spec.lane,
                contention: Some(Contention {
                    window_ms: 1000.0,
                    browser: Usage {
                        cpu_ms: need * 1000.0,
                        ..Usage::default()
                    },
                    ..Contention::default()
                }),
                ..RunRecord::fixture(&spec.id)
            })
        }

        fn recover(&mut self, _: &Profile) -> Result<Option<String>> {
            Ok(None)
        }
    }

    /// Attempts kept in memory.
    #[derive(Default)]
    struct Kept(Vec<RunRecord>);

    impl RunLog for Kept {
        fn attempts(&self, plan_id: &str) -> Attempts {
            let mut a = Attempts::default();
            for r in self.0.iter().filter(|r| r.plan_id == plan_id) {
                a.record(r.attempt, r.is_measurement_failure());
            }
            a
        }

        fn append(&mut self, rec: &RunRecord) -> Result<()> {
            self.0.push(rec.clone());
            Ok(())
        }
    }

    /// An attempt: its id, lane, start and end, and the run it was told comes next.
    type Ran = (String, Option<LaneRun>, Instant, Instant, Option<String>);

    /// wired × page10, download × h1, h2: 4 rounds and a warm-up.
    fn planned() -> Vec<PlannedRun> {
        plan::plan(&PlanSpec {
            profiles: vec!["wired".into()],
            workloads: vec!["page10".into(), "download".into()],
            servers: vec!["embedded".into()],
            browsers: vec![BrowserId::default()],
            views: vec![View::First],
            devices: vec![Default::default()],
            variants: parse_variants("h1,h2", H3Mode::Forced).unwrap(),
            runs: 4,
            warmup: 1,
            seed: 3,
            adaptive: None,
        })
    }

    const POLICY: Policy = Policy {
        jobs: 3,
        light: 0.25,
        budget: 0.5,
        warmups: 2,
    };

    /// Walks `todo` on fake lanes from `needs` into `kept`, every attempt valid: when each ran.
    fn walk(todo: &[&PlannedRun], needs: Needs, kept: &mut Kept) -> Vec<Ran> {
        let profiles = vec![Profile::simple("wired", 40.0, 5.0, 0.0)];
        let mut download = Manifest::empty_page10();
        download.workload = "download".parse().unwrap();
        let manifests: BTreeMap<String, Manifest> = [
            ("page10".to_string(), Manifest::empty_page10()),
            ("download".to_string(), download),
        ]
        .into_iter()
        .collect();
        let ctx = PlanContext::quiet(&profiles, &manifests, Duration::from_secs(1), 0, &[]);
        let trace = Trace::default();
        let make = |_: usize, _: &Profile| -> Result<Box<dyn Executor + '_>> {
            Ok(Box::new(FakeLane {
                trace: &trace,
                next: None,
            }))
        };
        let hidden = ProgressBar::hidden();
        let end = run_lanes(POLICY, needs, &make, &ctx, todo, kept, &hidden).unwrap();
        let PlanEnd::Done(t) = end else {
            panic!("{end:?}")
        };
        assert_eq!(t.valid, todo.len());
        let runs = std::mem::take(&mut *lock(&trace));
        runs
    }

    #[test]
    fn warm_ups_first_side_by_side_then_light_rounds_share_and_heavy_ones_run_alone() {
        let planned = planned();
        let todo: Vec<&PlannedRun> = planned.iter().collect();
        let mut kept = Kept::default();
        let runs = walk(&todo, Needs::new(&POLICY), &mut kept);
        let mut ids: Vec<&str> = kept.0.iter().map(|r| r.plan_id.as_str()).collect();
        ids.sort();
        let mut want: Vec<&str> = planned.iter().map(|p| p.id.as_str()).collect();
        want.sort();
        assert_eq!(ids, want, "every planned run once, on record");
        let overlaps = |a: &Ran, b: &Ran| a.2 < b.3 && b.2 < a.3;
        let warm = |r: &Ran| r.0.contains("-w1-");
        for a in &runs {
            let lane = a.1.expect("every run says its lane");
            if warm(a) {
                // Warm-ups (not measured yet) run beside warm-ups only, and before every
                // counted run.
                assert!(lane.shared, "{} alone", a.0);
                for b in runs.iter().filter(|b| !warm(b)) {
                    assert!(a.3 <= b.2, "{} ended after {} started", a.0, b.0);
                }
            } else if a.0.contains("page10") {
                // Pages (heavy) have the machine.
                assert!(!lane.shared, "{} shared", a.0);
                for b in runs.iter().filter(|b| b.0 != a.0) {
                    assert!(!overlaps(a, b), "{} overlapped {}", a.0, b.0);
                }
            } else {
                assert!(lane.shared, "{} alone", a.0);
            }
        }
        let warm_overlap = runs
            .iter()
            .any(|a| warm(a) && runs.iter().any(|b| b.0 != a.0 && warm(b) && overlaps(a, b)));
        assert!(warm_overlap, "the warm-ups ran side by side");
        let shared_overlap = runs.iter().any(|a| {
            runs.iter()
                .any(|b| a.1.map(|l| l.lane) != b.1.map(|l| l.lane) && overlaps(a, b))
        });
        assert!(shared_overlap, "the download rounds ran side by side");
    }

    #[test]
    fn a_lane_that_runs_heavy_rounds_alone_is_told_each_next_round_ahead() {
        let planned = planned();
        let todo: Vec<&PlannedRun> = planned.iter().collect();
        let mut runs = walk(&todo, Needs::new(&POLICY), &mut Kept::default());
        runs.retain(|r| r.0.contains("page10") && !r.0.contains("-w1-"));
        runs.sort_by_key(|r| r.2);
        assert_eq!(runs.len(), 8, "four rounds of two protocols");
        // Each heavy run was told the one that ran after it — within a round as in a serial
        // walk, and across rounds (the next round alone on the same lane) — so its browser
        // could start during this one's teardown; the last was told none.
        for (a, b) in runs.iter().zip(runs.iter().skip(1)) {
            assert_eq!(a.4.as_deref(), Some(b.0.as_str()), "{} then {}", a.0, b.0);
            assert_eq!(a.1.map(|l| l.lane), b.1.map(|l| l.lane), "one lane");
        }
        assert_eq!(runs[7].4, None);
    }

    #[test]
    fn a_resumed_walk_starts_from_the_needs_its_records_tell() {
        let planned = planned();
        let (warm, counted): (Vec<&PlannedRun>, Vec<&PlannedRun>) =
            planned.iter().partition(|p| p.phase == Phase::Warmup);
        let mut kept = Kept::default();
        walk(&warm, Needs::new(&POLICY), &mut kept);
        // Resumed from nothing known, each download series' first round runs alone to learn
        // its need; from the warm-ups' records, every download round shares from the start.
        let mut needs = Needs::new(&POLICY);
        kept.0.iter().for_each(|r| needs.record(r));
        let alone = |runs: &[Ran]| {
            runs.iter()
                .filter(|r| r.0.contains("download") && !r.1.unwrap().shared)
                .count()
        };
        assert_eq!(alone(&walk(&counted, needs, &mut Kept::default())), 0);
        let relearnt = walk(&counted, Needs::new(&POLICY), &mut Kept::default());
        assert!(alone(&relearnt) > 0, "the fake lanes tell needs apart");
    }
}
