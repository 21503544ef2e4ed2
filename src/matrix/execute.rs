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
    /// Whether to stop (checked between attempts, and when an attempt fails): a signal
    /// arrived, for the real loop ([`signals::interrupted`]).
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
mod tests {
    use super::*;
    use crate::config::plan::PlanSpec;
    use crate::config::protocol::H3Mode;
    use crate::evidence::metrics::RunMetrics;
    use crate::evidence::validate::{Reason, ReasonKind};
    use crate::results::store::Meta;
    use crate::results::summary;
    use std::cell::RefCell;
    use std::path::{Path, PathBuf};
    use std::rc::Rc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A fake testbed: outcomes scripted per attempt id, everything it did written down.
    #[derive(Default)]
    struct FakeExecutor {
        script: BTreeMap<String, (Outcome, Vec<ReasonKind>)>,
        /// The next `recover` reports a rebuild (as after a stopped emulator).
        broken: bool,
        log: Vec<String>,
        /// Attempts started so far (shared with a test's stop flag).
        started: Arc<AtomicUsize>,
        /// A results directory that must hold every earlier attempt when one starts.
        check_store: Option<PathBuf>,
        /// An attempt that cannot be attempted at all (`execute` fails).
        fail: Option<String>,
        /// The run announced as the next one (`expect_next`), and per attempt started:
        /// `<attempt> then <announced next or ->`.
        hint: Option<String>,
        hints: Vec<String>,
    }

    impl FakeExecutor {
        fn then(mut self, id: &str, outcome: Outcome, kinds: &[ReasonKind]) -> Self {
            self.script
                .insert(id.to_string(), (outcome, kinds.to_vec()));
            self
        }
    }

    impl Executor for FakeExecutor {
        fn set_profile(&mut self, profile: &Profile) -> Result<()> {
            self.log.push(format!("profile {}", profile.name));
            Ok(())
        }

        fn expect_next(&mut self, next: Option<&RunSpec>) {
            self.hint = next.map(|s| s.id.clone());
        }

        fn execute(&mut self, spec: &RunSpec) -> Result<RunRecord> {
            self.log.push(format!("run {}", spec.id));
            self.hints.push(format!(
                "{} then {}",
                spec.id,
                self.hint.take().unwrap_or_else(|| "-".into())
            ));
            if let Some(dir) = &self.check_store {
                let on_disk = ids_on_disk(dir);
                let before: Vec<String> = self.log[..self.log.len() - 1]
                    .iter()
                    .filter_map(|l| l.strip_prefix("run ").map(str::to_string))
                    .collect();
                assert_eq!(
                    on_disk, before,
                    "{} started before the last attempt was on disk",
                    spec.id
                );
            }
            self.started.fetch_add(1, Ordering::SeqCst);
            if self.fail.as_deref() == Some(spec.id.as_str()) {
                anyhow::bail!("Chromium is missing");
            }
            let (outcome, kinds) = self
                .script
                .get(&spec.id)
                .cloned()
                .unwrap_or((Outcome::Valid, vec![]));
            self.broken = kinds.contains(&ReasonKind::Link);
            Ok(record(spec, outcome, &kinds))
        }

        fn recover(&mut self, _profile: &Profile) -> Result<Option<String>> {
            if std::mem::take(&mut self.broken) {
                self.log.push("rebuild".into());
                return Ok(Some("the link emulator stopped".into()));
            }
            Ok(None)
        }
    }

    fn record(spec: &RunSpec, outcome: Outcome, kinds: &[ReasonKind]) -> RunRecord {
        RunRecord {
            plan_id: spec.plan_id.clone(),
            attempt: spec.attempt,
            protocol: spec.variant.protocol,
            h3_mode: spec.variant.h3_mode,
            variant: spec.variant,
            workload: spec.manifest.workload.name.clone(),
            profile: spec.profile.name.clone(),
            server: spec.server.clone(),
            phase: spec.phase,
            round: spec.round,
            position: spec.position,
            outcome,
            reasons: kinds
                .iter()
                .map(|k| Reason {
                    kind: *k,
                    detail: "scripted".into(),
                })
                .collect(),
            metrics: RunMetrics {
                completion_ms: (outcome == Outcome::Valid).then_some(100.0),
                ..RunMetrics::default()
            },
            wall_ms: 1.0,
            ..RunRecord::fixture(&spec.id)
        }
    }

    struct Fixture {
        dir: PathBuf,
        /// Owns `dir`: removed when the fixture drops.
        _tmp: crate::support::tempdir::TempDir,
        profiles: Vec<Profile>,
        manifests: BTreeMap<String, Manifest>,
        plan: Vec<PlannedRun>,
    }

    impl Fixture {
        /// The loop's context over this fixture: 1 s timeouts, quiet, no bodies kept.
        fn context<'a>(
            &'a self,
            retry_invalid: u32,
            faults: &'a [FaultInjection],
            stop: &'a (dyn Fn() -> bool + Sync),
        ) -> PlanContext<'a> {
            PlanContext {
                stop,
                ..PlanContext::quiet(
                    &self.profiles,
                    &self.manifests,
                    Duration::from_secs(1),
                    retry_invalid,
                    faults,
                )
            }
        }
    }

    fn fixture() -> Fixture {
        fixture_of(2, 0)
    }

    /// wired and mobile × page10 × h1, h2: `runs` rounds after `warmup` warm-ups.
    fn fixture_of(runs: u32, warmup: u32) -> Fixture {
        let tmp = crate::support::tempdir::create("exec-test").unwrap();
        let dir = tmp.path().to_path_buf();
        let manifest = Manifest::empty_page10();
        let spec = PlanSpec {
            profiles: vec!["wired".into(), "mobile".into()],
            workloads: vec!["page10".into()],
            servers: vec!["embedded".into()],
            browsers: vec![crate::config::identity::BrowserId::default()],
            views: vec![crate::config::identity::View::First],
            variants: crate::config::protocol::parse_variants("h1,h2", H3Mode::Forced).unwrap(),
            runs,
            warmup,
            seed: 1,
            adaptive: None,
        };
        Fixture {
            dir,
            _tmp: tmp,
            profiles: vec![
                Profile::simple("wired", 40.0, 5.0, 0.0),
                Profile::simple("mobile", 60.0, 15.0, 1.0),
            ],
            manifests: [("page10".to_string(), manifest)].into_iter().collect(),
            plan: plan::plan(&spec),
        }
    }

    fn meta(f: &Fixture, retry_invalid: u32) -> Meta {
        let plan = PlanSpec {
            profiles: vec![],
            workloads: vec![],
            servers: vec![],
            browsers: vec![crate::config::identity::BrowserId::default()],
            views: vec![crate::config::identity::View::First],
            variants: vec![],
            runs: 0,
            warmup: 0,
            seed: 0,
            adaptive: None,
        };
        Meta {
            profiles: f.profiles.clone(),
            timeout_s: 1.0,
            retry_invalid,
            ..Meta::new(plan, f.plan.len())
        }
    }

    fn walk(f: &Fixture, exec: &mut dyn Executor, store: &mut Store, retry: u32) -> PlanEnd {
        walk_until(f, exec, store, retry, &|| false).unwrap()
    }

    /// Walks what is left of the fixture's plan, stopping when `stop` says so.
    fn walk_until(
        f: &Fixture,
        exec: &mut dyn Executor,
        store: &mut Store,
        retry: u32,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<PlanEnd> {
        let ctx = f.context(retry, &[], stop);
        let todo: Vec<&PlannedRun> = f
            .plan
            .iter()
            .filter(|p| store.attempts(&p.id).next(p.retries(retry)).is_some())
            .collect();
        let current = todo.first().map(|p| p.profile.clone()).unwrap_or_default();
        run_plan(exec, &ctx, &current, &todo, store, &ProgressBar::hidden())
    }

    fn ids_on_disk(dir: &Path) -> Vec<String> {
        summary::read_runs(dir)
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .collect()
    }

    #[test]
    fn measurement_failures_are_retried_with_every_attempt_kept() {
        let f = fixture();
        let first = f.plan[0].id.clone();
        let mut exec = FakeExecutor::default().then(&first, Outcome::Invalid, &[ReasonKind::Link]);
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        let end = walk(&f, &mut exec, &mut store, 2);
        let PlanEnd::Done(t) = end else {
            panic!("{end:?}")
        };
        assert_eq!((t.valid, t.invalid, t.retries, t.rebuilds), (8, 1, 1, 1));
        let ids = ids_on_disk(&f.dir);
        assert_eq!(ids.len(), f.plan.len() + 1);
        assert_eq!(ids[0], first);
        assert_eq!(ids[1], format!("{first}.a2"));
        // The broken testbed is rebuilt before the retry.
        assert_eq!(
            &exec.log[..3],
            [
                "run ".to_string() + &first,
                "rebuild".into(),
                format!("run {first}.a2")
            ]
        );
        assert_eq!(store.finished(&f.plan, 2), f.plan.len());
        // Profiles switch once, between the cells.
        assert_eq!(
            exec.log.iter().filter(|l| l.starts_with("profile")).count(),
            1
        );
    }

    #[test]
    fn a_warm_up_is_never_run_again_a_measured_run_is() {
        let f = fixture_of(1, 1);
        let warm = f.plan.iter().find(|p| p.phase == Phase::Warmup).unwrap();
        let measured = f.plan.iter().find(|p| p.phase == Phase::Measure).unwrap();
        let (w, m) = (warm.id.clone(), measured.id.clone());
        let mut exec = FakeExecutor::default()
            .then(&w, Outcome::Invalid, &[ReasonKind::Link])
            .then(&m, Outcome::Invalid, &[ReasonKind::Link]);
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        walk(&f, &mut exec, &mut store, 2);
        let ids = ids_on_disk(&f.dir);
        assert_eq!(ids.iter().filter(|i| i.starts_with(&w)).count(), 1);
        assert_eq!(ids.iter().filter(|i| i.starts_with(&m)).count(), 2);
        // Nothing is left of it: a resumed walk does not run it again either.
        assert_eq!(store.finished(&f.plan, 2), f.plan.len());
    }

    #[test]
    fn protocol_failures_are_data_and_retries_are_capped() {
        let f = fixture();
        let (a, b) = (f.plan[0].id.clone(), f.plan[1].id.clone());
        let mut exec = FakeExecutor::default()
            .then(&a, Outcome::Invalid, &[ReasonKind::ProtocolMismatch])
            .then(&b, Outcome::Invalid, &[ReasonKind::BrowserCrash])
            .then(&format!("{b}.a2"), Outcome::Invalid, &[ReasonKind::Server])
            .then(
                &format!("{b}.a3"),
                Outcome::Invalid,
                &[ReasonKind::BrowserCrash],
            );
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        walk(&f, &mut exec, &mut store, 2);
        let ids = ids_on_disk(&f.dir);
        assert_eq!(
            ids.iter().filter(|i| i.starts_with(&a)).count(),
            1,
            "not retried"
        );
        assert_eq!(
            ids.iter().filter(|i| i.starts_with(&b)).count(),
            3,
            "the first attempt and two retries"
        );
        // A DNF is an outcome, not a failure: never retried.
        let f = fixture();
        let c = f.plan[2].id.clone();
        let mut exec = FakeExecutor::default().then(&c, Outcome::Dnf, &[ReasonKind::Timeout]);
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        walk(&f, &mut exec, &mut store, 2);
        assert_eq!(ids_on_disk(&f.dir).len(), f.plan.len());
    }

    #[test]
    fn a_resumed_matrix_retries_exactly_what_is_left() {
        let f = fixture();
        let first = f.plan[0].id.clone();
        // A previous session ended right after a measurement failure of the first run.
        {
            let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
            let p = &f.plan[0];
            let ctx = f.context(2, &[], &|| false);
            let spec = attempt_spec(&ctx, p, &f.profiles[0], 1);
            store
                .append(&record(&spec, Outcome::Invalid, &[ReasonKind::Link]))
                .unwrap();
        }
        let (mut store, _) = Store::resume(&f.dir, &meta(&f, 2)).unwrap();
        assert_eq!(store.attempts(&first).next(2), Some(2));
        let mut exec = FakeExecutor::default();
        walk(&f, &mut exec, &mut store, 2);
        assert_eq!(exec.log[0], format!("run {first}.a2"));
        let ids = ids_on_disk(&f.dir);
        assert_eq!(ids.len(), f.plan.len() + 1);
        let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        // Resuming again finds nothing to do.
        let (mut store, _) = Store::resume(&f.dir, &meta(&f, 2)).unwrap();
        let mut exec = FakeExecutor::default();
        walk(&f, &mut exec, &mut store, 2);
        assert!(exec.log.is_empty(), "{:?}", exec.log);
    }

    #[test]
    fn an_injected_fault_goes_to_the_first_attempt_only() {
        let f = fixture();
        let p = &f.plan[0];
        let faults = vec![format!("{}=stall:300ms@50ms", p.id)
            .parse::<FaultInjection>()
            .unwrap()];
        let ctx = f.context(2, &faults, &|| false);
        assert!(attempt_spec(&ctx, p, &f.profiles[0], 1).fault.is_some());
        assert!(attempt_spec(&ctx, p, &f.profiles[0], 2).fault.is_none());
    }

    /// The runs the fake was asked for, in order.
    fn runs(exec: &FakeExecutor) -> Vec<String> {
        exec.log
            .iter()
            .filter_map(|l| l.strip_prefix("run ").map(str::to_string))
            .collect()
    }

    fn plan_ids(f: &Fixture) -> Vec<String> {
        f.plan.iter().map(|p| p.id.clone()).collect()
    }

    #[test]
    fn the_plan_is_walked_in_order_with_the_profile_switched_between_cells() {
        let f = fixture();
        let mut exec = FakeExecutor::default();
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        let PlanEnd::Done(t) = walk(&f, &mut exec, &mut store, 2) else {
            panic!("interrupted")
        };
        assert_eq!(
            (t.valid, t.invalid, t.dnf, t.retries),
            (f.plan.len(), 0, 0, 0)
        );
        // What the fake saw: each planned run once, in plan order, the link switched to the
        // next profile right before that profile's first run, and never otherwise.
        let mut expected = Vec::new();
        let mut current = f.plan[0].profile.clone();
        for p in &f.plan {
            if p.profile != current {
                expected.push(format!("profile {}", p.profile));
                current = p.profile.clone();
            }
            expected.push(format!("run {}", p.id));
        }
        assert_eq!(exec.log, expected);
        assert_eq!(ids_on_disk(&f.dir), plan_ids(&f));
    }

    #[test]
    fn each_attempt_is_on_disk_before_the_next_starts() {
        let f = fixture();
        let first = f.plan[0].id.clone();
        let mut exec = FakeExecutor {
            check_store: Some(f.dir.clone()),
            ..FakeExecutor::default()
        }
        .then(&first, Outcome::Invalid, &[ReasonKind::BrowserCrash]);
        let mut store = Store::create(&f.dir, &meta(&f, 1)).unwrap();
        walk(&f, &mut exec, &mut store, 1);
        // The fake checked the directory at every start; at the end it holds every attempt.
        assert_eq!(exec.started.load(Ordering::SeqCst), f.plan.len() + 1);
        assert_eq!(ids_on_disk(&f.dir), runs(&exec));
    }

    #[test]
    fn an_interrupt_stops_between_runs_and_a_resume_finishes_exactly_the_plan() {
        let f = fixture();
        let started = Arc::new(AtomicUsize::new(0));
        let mut exec = FakeExecutor {
            started: started.clone(),
            ..FakeExecutor::default()
        };
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        // The signal arrives during the third run: it finishes, and nothing starts after it.
        let stop = || started.load(Ordering::SeqCst) >= 3;
        let end = walk_until(&f, &mut exec, &mut store, 2, &stop).unwrap();
        assert_eq!(end, PlanEnd::Interrupted);
        assert_eq!(runs(&exec), plan_ids(&f)[..3]);
        assert_eq!(ids_on_disk(&f.dir), plan_ids(&f)[..3]);
        drop(store);
        // Resumed: the rest, in plan order, and then the directory holds the plan exactly.
        let (mut store, _) = Store::resume(&f.dir, &meta(&f, 2)).unwrap();
        let mut exec = FakeExecutor::default();
        walk(&f, &mut exec, &mut store, 2);
        assert_eq!(runs(&exec), plan_ids(&f)[3..]);
        assert_eq!(ids_on_disk(&f.dir), plan_ids(&f));
        assert_eq!(store.finished(&f.plan, 2), f.plan.len());
    }

    #[test]
    fn a_run_that_fails_because_of_the_signal_is_an_interrupt_not_an_error() {
        let f = fixture();
        let stopping = Arc::new(AtomicBool::new(false));
        let mut exec = FakeExecutor {
            fail: Some(f.plan[1].id.clone()),
            ..FakeExecutor::default()
        };
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        let s = stopping.clone();
        let started = exec.started.clone();
        // The signal arrives while the second run is under way (its load then fails).
        let stop = move || {
            if started.load(Ordering::SeqCst) >= 2 {
                s.store(true, Ordering::SeqCst);
            }
            s.load(Ordering::SeqCst)
        };
        let end = walk_until(&f, &mut exec, &mut store, 2, &stop).unwrap();
        assert_eq!(end, PlanEnd::Interrupted);
        assert_eq!(ids_on_disk(&f.dir), plan_ids(&f)[..1]);
        assert!(stopping.load(Ordering::SeqCst));
    }

    #[test]
    fn a_run_that_cannot_be_attempted_stops_the_plan_naming_it() {
        let f = fixture();
        let bad = f.plan[2].id.clone();
        let mut exec = FakeExecutor {
            fail: Some(bad.clone()),
            ..FakeExecutor::default()
        };
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        let e = walk_until(&f, &mut exec, &mut store, 2, &|| false).unwrap_err();
        assert_eq!(format!("{e:#}"), format!("run {bad}: Chromium is missing"));
        // The runs before it are kept; nothing after it was started.
        assert_eq!(ids_on_disk(&f.dir), plan_ids(&f)[..2]);
        assert_eq!(runs(&exec), plan_ids(&f)[..3]);
    }

    #[test]
    fn a_resume_runs_only_the_unfinished_runs_in_plan_order() {
        let f = fixture();
        let done = [0, 2, 5];
        {
            let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
            let ctx = f.context(2, &[], &|| false);
            for i in done {
                let p = &f.plan[i];
                let profile = f.profiles.iter().find(|x| x.name == p.profile).unwrap();
                let spec = attempt_spec(&ctx, p, profile, 1);
                store.append(&record(&spec, Outcome::Valid, &[])).unwrap();
            }
        }
        let (mut store, _) = Store::resume(&f.dir, &meta(&f, 2)).unwrap();
        let mut exec = FakeExecutor::default();
        walk(&f, &mut exec, &mut store, 2);
        let rest: Vec<String> = f
            .plan
            .iter()
            .enumerate()
            .filter(|(i, _)| !done.contains(i))
            .map(|(_, p)| p.id.clone())
            .collect();
        assert_eq!(runs(&exec), rest);
        assert_eq!(store.finished(&f.plan, 2), f.plan.len());
    }

    /// A fake testbed built by a factory: it writes down when it is built and dropped, and
    /// breaks on the runs scripted to break it.
    struct FakeTestbed {
        n: usize,
        profile: String,
        breaks_on: Vec<String>,
        broken: Option<String>,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl RunTarget for FakeTestbed {
        fn set_profile(&mut self, profile: &Profile) -> Result<()> {
            self.profile = profile.name.clone();
            Ok(())
        }

        fn run(&mut self, spec: &RunSpec) -> Result<RunRecord> {
            assert_eq!(
                spec.profile.name, self.profile,
                "the link has the run's profile"
            );
            self.log
                .borrow_mut()
                .push(format!("testbed {} runs {}", self.n, spec.id));
            if self.breaks_on.contains(&spec.id) {
                self.broken = Some("the link emulator stopped".into());
                return Ok(record(spec, Outcome::Invalid, &[ReasonKind::Link]));
            }
            Ok(record(spec, Outcome::Valid, &[]))
        }

        fn broken(&mut self) -> Option<String> {
            self.broken.clone()
        }
    }

    impl Drop for FakeTestbed {
        fn drop(&mut self) {
            self.log
                .borrow_mut()
                .push(format!("testbed {} dropped", self.n));
        }
    }

    /// An executor whose factory builds fake testbeds (failing from build `fail_from` on).
    fn fake_testbeds(
        f: &Fixture,
        breaks_on: &[String],
        fail_from: usize,
    ) -> (TestbedExecutor<FakeTestbed>, Rc<RefCell<Vec<String>>>) {
        let log: Rc<RefCell<Vec<String>>> = Rc::default();
        let (l, breaks_on) = (log.clone(), breaks_on.to_vec());
        let mut built = 0;
        let exec = TestbedExecutor::with_factory(&f.profiles[0], move |profile| {
            built += 1;
            if built >= fail_from {
                anyhow::bail!("no CPU left for the emulator");
            }
            l.borrow_mut()
                .push(format!("testbed {built} built on {}", profile.name));
            Ok(FakeTestbed {
                n: built,
                profile: profile.name.clone(),
                breaks_on: breaks_on.clone(),
                broken: None,
                log: l.clone(),
            })
        })
        .unwrap();
        (exec, log)
    }

    #[test]
    fn a_broken_testbed_goes_before_its_rebuild_on_the_runs_profile() {
        let f = fixture();
        // The first run on the second profile breaks the testbed.
        let breaker = f
            .plan
            .iter()
            .find(|p| p.profile == "mobile")
            .unwrap()
            .id
            .clone();
        let (mut exec, log) = fake_testbeds(&f, std::slice::from_ref(&breaker), usize::MAX);
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        let PlanEnd::Done(t) = walk(&f, &mut exec, &mut store, 2) else {
            panic!("interrupted")
        };
        assert_eq!((t.rebuilds, t.retries), (1, 1));
        let log = log.borrow();
        let at = log
            .iter()
            .position(|l| *l == format!("testbed 1 runs {breaker}"))
            .unwrap();
        assert_eq!(
            log[at + 1..at + 4],
            [
                "testbed 1 dropped".to_string(),
                "testbed 2 built on mobile".into(),
                format!("testbed 2 runs {breaker}.a2"),
            ]
        );
        // Every later run is on the new testbed.
        assert!(log[at + 4..]
            .iter()
            .all(|l| l.starts_with("testbed 2 runs")));
        assert_eq!(ids_on_disk(&f.dir).len(), f.plan.len() + 1);
    }

    #[test]
    fn a_failed_rebuild_stops_the_plan_and_every_later_call() {
        let f = fixture();
        let first = f.plan[0].id.clone();
        let (mut exec, _log) = fake_testbeds(&f, std::slice::from_ref(&first), 2);
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        let e = walk_until(&f, &mut exec, &mut store, 2, &|| false).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "cannot rebuild the testbed after: the link emulator stopped: no CPU left for the emulator"
        );
        // The run that broke it is on disk; the executor refuses to go on without a testbed.
        assert_eq!(ids_on_disk(&f.dir), [first]);
        let e = exec.set_profile(&f.profiles[1]).unwrap_err();
        assert!(e.to_string().contains("rebuilding it failed"), "{e}");
    }

    #[test]
    fn each_run_announces_the_next_planned_one_for_its_browser() {
        let f = fixture();
        let first = f.plan[0].id.clone();
        let mut exec =
            FakeExecutor::default().then(&first, Outcome::Invalid, &[ReasonKind::BrowserCrash]);
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        walk(&f, &mut exec, &mut store, 2);
        let ids = plan_ids(&f);
        let mut expected = vec![
            format!("{} then {}", ids[0], ids[1]),
            // The retry was not known in advance: the next planned run is still announced.
            format!("{}.a2 then {}", ids[0], ids[1]),
        ];
        for i in 1..ids.len() {
            let next = ids.get(i + 1).cloned().unwrap_or_else(|| "-".into());
            expected.push(format!("{} then {next}", ids[i]));
        }
        assert_eq!(exec.hints, expected);
    }

    #[test]
    fn adaptive_cells_stop_when_precise_and_a_resume_decides_the_same() {
        // Up to 4 rounds, judged from round 2 on: wired is precise after 2, mobile never.
        let f = fixture_of(4, 1);
        let asked: std::sync::Mutex<Vec<String>> = Default::default();
        let judge = |cell: &plan::Cell, rounds: u32| {
            asked.lock().unwrap().push(format!("{cell} after {rounds}"));
            let precise = cell.profile == "wired";
            Ok(super::super::stopping_rule::Judgement {
                rounds,
                widest_pct: Some(if precise { 3.0 } else { 9.0 }),
                precise,
            })
        };
        let walk_adaptive = |exec: &mut FakeExecutor, store: &mut Store| {
            let mut ctx = f.context(2, &[], &|| false);
            ctx.adaptive = Some(AdaptiveGate {
                min_runs: 2,
                judge: &judge,
            });
            let todo: Vec<&PlannedRun> = f
                .plan
                .iter()
                .filter(|p| store.attempts(&p.id).next(2).is_some())
                .collect();
            run_plan(exec, &ctx, "wired", &todo, store, &ProgressBar::hidden()).unwrap()
        };
        let mut exec = FakeExecutor::default();
        let mut store = Store::create(&f.dir, &meta(&f, 2)).unwrap();
        let PlanEnd::Done(t) = walk_adaptive(&mut exec, &mut store) else {
            panic!("interrupted")
        };
        let ran = runs(&exec);
        let count = |p: &str, phase: &str| {
            ran.iter()
                .filter(|r| r.starts_with(p) && r.contains(phase))
                .count()
        };
        // Warm-ups always; wired 2 rounds, mobile all 4, two protocols each.
        assert_eq!((count("wired", "-w"), count("mobile", "-w")), (2, 2));
        assert_eq!((count("wired", "-r"), count("mobile", "-r")), (4, 8));
        assert_eq!((t.cells_stopped, t.skipped), (1, 4));
        assert_eq!(
            *asked.lock().unwrap(),
            [
                "wired/page10 after 2",
                "mobile/page10 after 2",
                "mobile/page10 after 3"
            ]
        );
        // The run after a round is announced before the rule has seen the round: the stopped
        // cell's third round was announced once (its browser is then ended unused), never after.
        assert_eq!(
            exec.hints
                .iter()
                .filter(|h| h.contains("then wired-page10-r03"))
                .count(),
            1
        );
        // Resumed: the rule says the same from the runs on disk; nothing more runs.
        asked.lock().unwrap().clear();
        drop(store);
        let (mut store, _) = Store::resume(&f.dir, &meta(&f, 2)).unwrap();
        let mut exec = FakeExecutor::default();
        let PlanEnd::Done(t) = walk_adaptive(&mut exec, &mut store) else {
            panic!("interrupted")
        };
        assert!(runs(&exec).is_empty(), "{:?}", exec.log);
        assert_eq!(*asked.lock().unwrap(), ["wired/page10 after 2"]);
        assert_eq!(t.skipped, 4);
    }
}
