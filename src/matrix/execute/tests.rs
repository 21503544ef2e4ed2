//! Tests of the plan loop: runs, retries, rebuilds and stops, against scripted testbeds.

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
        devices: vec![Default::default()],
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
        devices: vec![Default::default()],
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
