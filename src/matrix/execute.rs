//! Walks a matrix's plan (skipping runs a resumed directory already finished), reconfigures the
//! link between profiles, persists each attempt before the next, runs an attempt again when it
//! failed as a measurement (and builds a new testbed when the run broke it), and shows progress.
//! [`super::request`] resolves the request into the plan and summarises at the end;
//! [`super::one_cell`] walks a one-cell plan.
//!
//! The loop talks to the world through [`Executor`] — the real testbed, or a fake in the unit
//! tests below, as hyperfine tests its scheduler through a mock executor.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::ProgressBar;

use crate::config::identity::Phase;
use crate::config::plan::{self, PlannedRun};
use crate::config::profile::Profile;
use crate::config::workload::Manifest;
use crate::evidence::run_record::{self, RunRecord};
use crate::evidence::validate::Outcome;
use crate::measure::fault::FaultInjection;
use crate::measure::runner::{self, RunSpec};
use crate::measure::testbed::{Testbed, TestbedConfig};
use crate::results::store::{Attempts, Store};

/// Where finished attempts go and what was attempted so far: the results directory
/// ([`Store`]), or a callback that prints them ([`Printed`], `pagebench run`).
pub trait RunLog {
    fn attempts(&self, plan_id: &str) -> Attempts;
    /// Keeps a finished attempt (on disk before the next starts, for the store).
    fn append(&mut self, rec: &RunRecord) -> Result<()>;
}

impl RunLog for Store {
    fn attempts(&self, plan_id: &str) -> Attempts {
        Store::attempts(self, plan_id)
    }

    fn append(&mut self, rec: &RunRecord) -> Result<()> {
        Store::append(self, rec)
    }
}

/// Attempts kept in memory, each handed to a callback as it finishes.
pub struct Printed<F: FnMut(&RunRecord) -> Result<()>> {
    attempts: BTreeMap<String, Attempts>,
    each: F,
}

impl<F: FnMut(&RunRecord) -> Result<()>> Printed<F> {
    pub fn new(each: F) -> Self {
        Printed {
            attempts: BTreeMap::new(),
            each,
        }
    }
}

impl<F: FnMut(&RunRecord) -> Result<()>> RunLog for Printed<F> {
    fn attempts(&self, plan_id: &str) -> Attempts {
        self.attempts.get(plan_id).copied().unwrap_or_default()
    }

    fn append(&mut self, rec: &RunRecord) -> Result<()> {
        (self.each)(rec)?;
        self.attempts
            .entry(rec.plan_id.clone())
            .or_default()
            .record(rec.attempt, rec.is_measurement_failure());
        Ok(())
    }
}

/// What the matrix loop needs from the world.
pub trait Executor {
    /// Switches the link to `profile` for the runs that follow.
    fn set_profile(&mut self, profile: &Profile) -> Result<()>;
    /// Performs one run (errors only when it could not be attempted, or on a signal).
    fn execute(&mut self, spec: &RunSpec) -> Result<RunRecord>;
    /// After a run: if it left the testbed broken (stopped emulator, exited server), builds a
    /// new one with `profile` and says why.
    fn recover(&mut self, profile: &Profile) -> Result<Option<String>>;
    /// The run expected after the next one `execute`s (None: none, or not known): its browser
    /// may be started once that run's measured window is over.
    fn expect_next(&mut self, _next: Option<&RunSpec>) {}
}

/// What the executor performs attempts on: the testbed (or a fake one in the tests).
pub trait RunTarget {
    /// Switches the link to `profile`.
    fn set_profile(&mut self, profile: &Profile) -> Result<()>;
    /// Performs one run (errors only when it could not be attempted, or on a signal).
    fn run(&mut self, spec: &RunSpec) -> Result<RunRecord>;
    /// What makes it unusable for further runs, if anything.
    fn broken(&mut self) -> Option<String>;
    /// See [`Executor::expect_next`].
    fn expect_next(&mut self, _next: Option<&RunSpec>) {}
}

impl RunTarget for Testbed {
    fn set_profile(&mut self, profile: &Profile) -> Result<()> {
        Testbed::set_profile(self, profile)
    }

    fn run(&mut self, spec: &RunSpec) -> Result<RunRecord> {
        runner::run_once(self, spec)
    }

    fn broken(&mut self) -> Option<String> {
        Testbed::broken(self)
    }

    fn expect_next(&mut self, next: Option<&RunSpec>) {
        Testbed::expect_next(self, next.map(runner::load_request).as_ref());
    }
}

/// Builds a testbed with a profile (the first one, and each rebuild).
type Factory<T> = Box<dyn FnMut(&Profile) -> Result<T>>;

/// The real executor: a testbed (a link and the servers under test), rebuilt by its factory
/// when a run broke it.
pub struct TestbedExecutor<T: RunTarget = Testbed> {
    build: Factory<T>,
    /// None only after a rebuild failed (the error was returned; every later call fails too).
    testbed: Option<T>,
}

impl TestbedExecutor<Testbed> {
    pub fn start(config: TestbedConfig) -> Result<TestbedExecutor> {
        let first = config.profile.clone();
        TestbedExecutor::with_factory(&first, move |profile| {
            Testbed::start(&TestbedConfig {
                profile: profile.clone(),
                ..config.clone()
            })
        })
    }
}

impl<T: RunTarget> TestbedExecutor<T> {
    /// Builds the first testbed with `profile`; `build` makes each one.
    pub fn with_factory(
        profile: &Profile,
        mut build: impl FnMut(&Profile) -> Result<T> + 'static,
    ) -> Result<TestbedExecutor<T>> {
        let testbed = build(profile).context("cannot build the testbed")?;
        Ok(TestbedExecutor {
            build: Box::new(build),
            testbed: Some(testbed),
        })
    }

    pub fn testbed(&mut self) -> Result<&mut T> {
        self.testbed
            .as_mut()
            .context("no testbed: rebuilding it failed after an earlier run")
    }
}

impl<T: RunTarget> Executor for TestbedExecutor<T> {
    fn set_profile(&mut self, profile: &Profile) -> Result<()> {
        self.testbed()?.set_profile(profile)
    }

    fn execute(&mut self, spec: &RunSpec) -> Result<RunRecord> {
        self.testbed()?.run(spec)
    }

    fn expect_next(&mut self, next: Option<&RunSpec>) {
        if let Ok(t) = self.testbed() {
            t.expect_next(next);
        }
    }

    fn recover(&mut self, profile: &Profile) -> Result<Option<String>> {
        let Some(why) = self.testbed()?.broken() else {
            return Ok(None);
        };
        // The old testbed goes first: its emulator, namespaces and servers must not overlap
        // the new one's (one real-time emulator per CPU, one writer per request log).
        drop(self.testbed.take());
        let fresh = (self.build)(profile)
            .with_context(|| format!("cannot rebuild the testbed after: {why}"))?;
        self.testbed = Some(fresh);
        Ok(Some(why))
    }
}

/// What the plan loop needs besides the executor and the store. Shared by the lanes of a
/// concurrent walk (`--jobs`), each with its own copy's `lane`.
#[derive(Clone)]
pub struct PlanContext<'a> {
    pub profiles: &'a [Profile],
    pub manifests: &'a BTreeMap<String, Manifest>,
    pub timeout: Duration,
    pub settle_max: Duration,
    pub retry_invalid: u32,
    pub faults: &'a [FaultInjection],
    pub quiet: bool,
    /// Keep the response bodies of every run (`run --har`).
    pub keep_bodies: bool,
    /// Record a screencast of every load (`--visual`).
    pub visual: Option<crate::evidence::visual::VisualSource>,
    /// What every run keeps beside its record (`--capture`).
    pub capture: &'a crate::packets::CaptureSet,
    /// What a repeat view does with the HTTP cache (`--repeat-cache`).
    pub repeat_cache: crate::config::identity::RepeatCache,
    /// Devices are compared (`--devices` other than desktop alone): every run times the CPU
    /// benchmarks, natively and in the browser, so each device's achieved slowdown is on record.
    pub cpu_benchmark: bool,
    /// Whether to stop (checked between attempts, and when an attempt fails): a signal
    /// arrived, for the real loop ([`crate::support::signals::interrupted`]).
    pub stop: &'a (dyn Fn() -> bool + Sync),
    /// `--runs auto`: whether a cell needs more rounds (None: every planned round runs).
    pub adaptive: Option<AdaptiveGate<'a>>,
    /// The lane these runs go on, in a concurrent walk.
    pub lane: Option<crate::evidence::run_record::LaneRun>,
    /// Each attempt's link draws come from this seed and its id ([`draws_seed`]); None: the
    /// link's stream goes on from run to run.
    pub draws_seed: Option<u64>,
    /// The run expected after the last of these on the same executor (a lane's next unit,
    /// [`super::lanes::Assignment::then`]): its browser may start as a next run's does.
    pub then: Option<&'a PlannedRun>,
}

#[cfg(test)]
impl<'a> PlanContext<'a> {
    /// A context for the loop's tests: quiet, a 1 s settle, no bodies, screencast or capture,
    /// never stopped, every planned round run.
    pub(crate) fn quiet(
        profiles: &'a [Profile],
        manifests: &'a BTreeMap<String, Manifest>,
        timeout: Duration,
        retry_invalid: u32,
        faults: &'a [FaultInjection],
    ) -> PlanContext<'a> {
        PlanContext {
            profiles,
            manifests,
            timeout,
            settle_max: Duration::from_secs(1),
            retry_invalid,
            faults,
            quiet: true,
            keep_bodies: false,
            visual: None,
            capture: &crate::packets::NO_CAPTURE,
            repeat_cache: Default::default(),
            cpu_benchmark: false,
            stop: &|| false,
            adaptive: None,
            lane: None,
            draws_seed: None,
            then: None,
        }
    }
}

/// How the plan loop asks the stopping rule of `--runs auto` (`matrix::adaptive`).
#[derive(Clone, Copy)]
pub struct AdaptiveGate<'a> {
    /// Rounds every cell runs before the rule is asked.
    pub min_runs: u32,
    /// The rule: the cell after this many measured rounds (all of them on disk).
    pub judge: &'a (dyn Fn(&plan::Cell, u32) -> Result<super::stopping_rule::Judgement> + Sync),
}

/// Outcomes of the attempts made by one [`run_plan`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub valid: usize,
    pub invalid: usize,
    pub dnf: usize,
    /// Attempts made again because the one before failed as a measurement.
    pub retries: usize,
    /// Testbeds rebuilt after a run broke one.
    pub rebuilds: usize,
    /// Planned runs left out because their cell was already precise (`--runs auto`).
    pub skipped: usize,
    /// Cells that stopped before their last planned round (`--runs auto`).
    pub cells_stopped: usize,
}

/// How the plan loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanEnd {
    Done(Tally),
    Interrupted,
}

/// The spec of attempt `attempt` of planned run `p`.
fn attempt_spec(ctx: &PlanContext, p: &PlannedRun, profile: &Profile, attempt: u32) -> RunSpec {
    let id = run_record::attempt_id(&p.id, attempt);
    RunSpec {
        fault: FaultInjection::for_attempt(ctx.faults, &p.id, attempt).cloned(),
        id,
        plan_id: p.id.clone(),
        attempt,
        profile: profile.clone(),
        manifest: ctx.manifests[&p.workload].clone(),
        variant: p.variant,
        server: p.server.clone(),
        browser: p.browser,
        view: p.view,
        device: p
            .device
            .device()
            .unwrap_or_else(|_| crate::config::device::Device::desktop()),
        cpu_benchmark: ctx.cpu_benchmark,
        repeat_cache: ctx.repeat_cache,
        phase: p.phase,
        round: p.round,
        position: p.position,
        timeout: ctx.timeout,
        settle_max: ctx.settle_max,
        keep_bodies: ctx.keep_bodies,
        visual: ctx.visual,
        capture: ctx.capture.clone(),
        packet_tap: true,
        trace_start: p.trace_start,
        lane: ctx.lane,
        draws: ctx
            .draws_seed
            .map(|s| draws_seed(s, &id_for_draws(p, attempt))),
    }
}

/// The seed of an attempt's link draws: the matrix's seed and the attempt's name, so the same
/// planned attempt meets the same loss, jitter and outages whichever lane runs it and whatever
/// ran before (`bench concurrency` pairs the walks on it).
pub fn draws_seed(seed: u64, attempt_name: &str) -> u64 {
    crate::support::stats::derive_seed(seed, attempt_name)
}

fn id_for_draws(p: &PlannedRun, attempt: u32) -> String {
    format!("{}#{attempt}", p.id)
}

/// The planned profile called `name`.
fn planned_profile(ctx: &PlanContext, p: &PlannedRun) -> Result<Profile> {
    let profile = ctx
        .profiles
        .iter()
        .find(|x| x.name == p.profile)
        .cloned()
        .expect("planned profile exists");
    match ctx.manifests.get(&p.workload).and_then(|m| m.site.as_ref()) {
        Some(site) => site.profile_for(&profile),
        None => Ok(profile),
    }
}

/// What tells the link's settings apart: the profile's name, and the per-address delays a
/// replayed site's `--distances recorded` adds to it.
fn link_key(p: &Profile) -> String {
    if p.origin_delay_ms.is_empty() {
        p.name.clone()
    } else {
        format!("{} {:?}", p.name, p.origin_delay_ms)
    }
}

/// `--runs auto` over one walk: the cells that need no more rounds, and the rounds the rule
/// was asked about (once each, though every planned run of a round comes to the question).
#[derive(Default)]
struct Precision {
    stopped: BTreeSet<plan::Cell>,
    asked: BTreeSet<(plan::Cell, u32)>,
}

impl Precision {
    /// Whether `p` is left out: a measured round of a cell that is already precise.
    fn leaves_out(&self, ctx: &PlanContext, p: &PlannedRun) -> bool {
        ctx.adaptive.is_some() && p.phase == Phase::Measure && self.stopped.contains(&p.cell())
    }

    /// Before a measured round past the minimum: asks the rule whether `p`'s cell is precise
    /// after the rounds before it, and stops the cell if it is.
    fn judge(&mut self, gate: &AdaptiveGate, p: &PlannedRun, t: &mut Tally) -> Result<()> {
        if p.phase == Phase::Measure
            && p.round > gate.min_runs
            && !self.stopped.contains(&p.cell())
            && self.asked.insert((p.cell(), p.round))
        {
            // Every earlier round of the cell is finished: the walk is in plan order.
            let j = (gate.judge)(&p.cell(), p.round - 1)
                .with_context(|| format!("judging the precision of {}", p.cell()))?;
            if j.precise {
                tracing::info!(
                    "{}: after {} rounds every ratio's 95 % CI is within ±{:.1} %: no more rounds",
                    p.cell(),
                    j.rounds,
                    j.widest_pct.unwrap_or(f64::NAN)
                );
                self.stopped.insert(p.cell());
                t.cells_stopped += 1;
            }
        }
        Ok(())
    }
}

impl Tally {
    /// Adds another walk's counts (a lane's unit).
    pub fn add(&mut self, o: &Tally) {
        self.valid += o.valid;
        self.invalid += o.invalid;
        self.dnf += o.dnf;
        self.retries += o.retries;
        self.rebuilds += o.rebuilds;
        self.skipped += o.skipped;
        self.cells_stopped += o.cells_stopped;
    }

    /// Counts attempt `attempt`'s record: its outcome, and whether it was a retry.
    fn count(&mut self, rec: &RunRecord, attempt: u32) {
        if attempt > 1 {
            self.retries += 1;
        }
        match rec.outcome {
            Outcome::Valid => self.valid += 1,
            Outcome::Dnf => self.dnf += 1,
            Outcome::Invalid => self.invalid += 1,
        }
    }
}

/// The progress bar's line for attempt `attempt` of `p`, with the tally so far.
fn progress_message(p: &PlannedRun, attempt: u32, t: &Tally) -> String {
    format!(
        "{}/{}/{} {} {}{} · valid {} invalid {} DNF {} retried {}",
        p.profile,
        p.workload,
        p.server,
        p.variant,
        match p.phase {
            Phase::Warmup => format!("warm-up {}", p.round),
            Phase::Measure => format!("round {}", p.round),
        },
        if attempt > 1 {
            format!(" (attempt {attempt})")
        } else {
            String::new()
        },
        t.valid,
        t.invalid,
        t.dnf,
        t.retries
    )
}

/// Says why an attempt was invalid, above the progress bar.
fn show_invalid(pb: &ProgressBar, rec: &RunRecord) {
    pb.suspend(|| {
        eprintln!(
            "invalid: {}{} — {}",
            rec.id,
            if rec.is_measurement_failure() {
                " (measurement failure)"
            } else {
                ""
            },
            crate::evidence::validate::reason_text(&rec.reasons)
        )
    });
}

/// Walks `todo` (whose link currently has profile `current`): each planned run gets its next
/// attempt, and another while it failed as a measurement and retries remain; every attempt is
/// on disk before the next starts.
pub fn run_plan(
    exec: &mut dyn Executor,
    ctx: &PlanContext,
    current: &str,
    todo: &[&PlannedRun],
    store: &mut dyn RunLog,
    pb: &ProgressBar,
) -> Result<PlanEnd> {
    let mut current = current.to_string();
    let mut t = Tally::default();
    let mut precision = Precision::default();
    for (i, p) in todo.iter().enumerate() {
        if let Some(gate) = &ctx.adaptive {
            precision.judge(gate, p, &mut t)?;
            if precision.leaves_out(ctx, p) {
                t.skipped += 1;
                pb.inc(1);
                continue;
            }
        }
        let profile = planned_profile(ctx, p)?;
        if link_key(&profile) != current {
            exec.set_profile(&profile)?;
            current = link_key(&profile);
        }
        // The run after this one, as far as it is known now (a retry of this one, or a cell
        // that turns out precise, makes it another): its browser may start early.
        let next = todo[i + 1..]
            .iter()
            .copied()
            .find(|q| !precision.leaves_out(ctx, q))
            .or(ctx.then)
            .and_then(|q| {
                let attempt = store
                    .attempts(&q.id)
                    .next(q.retries(ctx.retry_invalid))
                    .unwrap_or(1);
                Some(attempt_spec(
                    ctx,
                    q,
                    &planned_profile(ctx, q).ok()?,
                    attempt,
                ))
            });
        while let Some(attempt) = store.attempts(&p.id).next(p.retries(ctx.retry_invalid)) {
            if (ctx.stop)() {
                return Ok(PlanEnd::Interrupted);
            }
            pb.set_message(progress_message(p, attempt, &t));
            let spec = attempt_spec(ctx, p, &profile, attempt);
            exec.expect_next(next.as_ref());
            let rec = match exec.execute(&spec) {
                Ok(rec) => rec,
                Err(e) if (ctx.stop)() => {
                    tracing::info!("run {} interrupted: {e:#}", spec.id);
                    return Ok(PlanEnd::Interrupted);
                }
                Err(e) => return Err(e.context(format!("run {}", spec.id))),
            };
            store.append(&rec)?;
            t.count(&rec, attempt);
            if rec.outcome == Outcome::Invalid && !ctx.quiet {
                show_invalid(pb, &rec);
            }
            if let Some(why) = exec.recover(&profile)? {
                t.rebuilds += 1;
                tracing::warn!("rebuilt the testbed after run {}: {why}", rec.id);
            }
        }
        pb.inc(1);
    }
    Ok(PlanEnd::Done(t))
}

#[cfg(test)]
mod tests;
