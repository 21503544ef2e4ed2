//! `pagebench matrix`: resolves the request into a plan and a results directory (new, or
//! resumed), checks the machine, describes a shard's machine (with its calibration), builds the
//! testbed and walks the plan ([`super::execute`]), then writes the statistics.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::config::identity::{BrowserId, Phase, View};
use crate::config::plan::{self, PlanSpec, PlannedRun};
use crate::config::profile::{self, Profile, ProfileSource};
use crate::config::protocol::H3Mode;
use crate::config::protocol::Variant;
use crate::measure::fault::FaultInjection;

use crate::config::workload::{self, Manifest, Workload};
use crate::embedded_server::ServerKnobs;
use crate::measure::testbed::{ServerChoice, TestbedConfig};
use crate::results::store::{self, Meta, Store};
use crate::results::summary;
use crate::support::signals;
use crate::support::sysinfo::{self, MachineInfo};

use super::execute::{run_plan, AdaptiveGate, PlanContext, PlanEnd, TestbedExecutor};

/// Everything `pagebench matrix` was asked.
#[derive(Debug, Clone)]
pub struct MatrixRequest {
    pub profiles: String,
    /// Where `profiles` names are looked up.
    pub profiles_dir: ProfileSource,
    pub workloads: String,
    pub protocols: String,
    pub h3_mode: H3Mode,
    pub servers: Vec<ServerChoice>,
    /// The engines, interleaved like servers (`--browsers`).
    pub browsers: Vec<BrowserId>,
    /// First and/or repeat views, interleaved (`--views`).
    pub views: Vec<View>,
    /// The devices, interleaved (`--devices`, `--cpu-throttle-devtools`).
    pub devices: Vec<crate::config::device::Device>,
    /// What a repeat view does with the HTTP cache (`--repeat-cache`).
    pub repeat_cache: crate::config::identity::RepeatCache,
    pub knobs: ServerKnobs,
    pub runs: u32,
    pub warmup: u32,
    pub seed: u64,
    pub timeout: Duration,
    pub settle_max: Duration,
    pub pages_root: PathBuf,
    pub out: Option<PathBuf>,
    pub resume: Option<PathBuf>,
    pub quiet: bool,
    /// Whether the command writes the report after the matrix (`--no-report`: not); the
    /// matrix itself ends with the statistics.
    pub report: bool,
    /// Retries of a run that failed as a measurement (link, server, browser crash).
    pub retry_invalid: u32,
    /// Seed of the generated pages.
    pub pages_seed: u64,
    /// Faults to inject (test hook).
    pub faults: Vec<FaultInjection>,
    /// Steer receive processing off the emulator's CPU (see `LinkOptions::steer_receive`).
    pub steer_receive: bool,
    /// Record a screencast of every load (`--visual`): Speed Index, Visually Complete, frames.
    pub visual: Option<crate::evidence::visual::VisualSource>,
    /// What every run keeps beside its record (`--capture`), in `captures/<run id>/`.
    pub capture: crate::packets::CaptureSet,
    /// How site workloads are replayed.
    pub sites: workload::site_plan::SiteOptions,
    /// `--dns`.
    pub dns: crate::config::name_lookup::DnsMode,
    /// `--runs auto`: rounds per cell until precise (`runs` is then its maximum).
    pub adaptive: Option<plan::Adaptive>,
    /// `--shard K/N`: only this part of the plan's cells.
    pub shard: Option<super::shard::ShardSpec>,
    /// Runs of the reference series a shard calibrates its machine with (0: none).
    pub calibration_runs: u32,
    /// How long to watch the machine before the first run (zero: no check).
    pub machine_check: Duration,
    /// `--jobs`: the lanes the plan may walk on at once (a walking choice, not stored: a
    /// resume may take another).
    pub jobs: super::lanes::Jobs,
    /// `--share-below`: the need (CPU-s per s of load) up to which a round shares the machine
    /// on `--jobs` lanes.
    pub share_below: f64,
    /// Walk only the warm-ups and the measured rounds up to this one (`bench concurrency`'s
    /// blocks; None: the whole plan).
    pub until_round: Option<u32>,
}

/// What a finished (or interrupted) matrix left.
pub struct MatrixOutcome {
    pub dir: PathBuf,
    pub completed: bool,
    pub runs_done: usize,
    pub planned: usize,
    /// `--runs auto`: `planned` is the most rounds could take.
    pub adaptive: bool,
    /// The statistics were written (some attempt ran): the diagnosis and the report can
    /// follow (the command composes them: running a matrix does not depend on drawing it).
    pub summarized: bool,
}

struct Resolved {
    profiles: Vec<Profile>,
    workloads: Vec<Workload>,
    variants: Vec<Variant>,
}

fn resolve(req: &MatrixRequest) -> Result<Resolved> {
    if req.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if req.timeout.is_zero() {
        bail!("--timeout must be above 0 (e.g. 120s)");
    }
    let profiles = profile::select_from(&req.profiles, &req.profiles_dir)?;
    let workloads = workload::parse_list(&req.workloads)?;
    let variants = crate::config::protocol::parse_variants(&req.protocols, req.h3_mode)?;
    plan::check_views(&variants, &req.views)?;
    plan::check_dns(&variants, req.dns)?;
    req.knobs.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    for s in &req.servers {
        for v in &variants {
            if v.as_recorded {
                for p in crate::config::protocol::Protocol::ALL {
                    s.check_protocol(p)?;
                }
            } else {
                s.check_protocol(v.protocol)?;
                s.check_knobs(&req.knobs, v.protocol)?;
            }
        }
    }
    for w in workloads.iter().filter(|w| w.kind.is_replayed()) {
        for s in &req.servers {
            s.check_replay(&w.name)?;
        }
    }
    for b in &req.browsers {
        crate::measure::browser::check_request(
            *b,
            &crate::measure::browser::Asked {
                visual: req.visual,
                capture: &req.capture,
                as_recorded: variants.iter().any(|v| v.as_recorded),
                repeat_view: req.views.contains(&View::Repeat),
                discovered_h3: variants.contains(&Variant::H3_DISCOVERED),
                dns_h3: variants.contains(&Variant::H3_DNS),
                devtools_throttle: req.devices.iter().any(|d| d.devtools_rate().is_some()),
            },
        )?;
    }
    if variants.iter().any(|v| v.as_recorded) {
        if let Some(w) = workloads
            .iter()
            .find(|w| !matches!(w.kind, workload::WorkloadKind::Site { .. }))
        {
            bail!(
                "--protocols as-recorded gives each origin of a recorded site its protocol: workload {} is not a site archive (give only site:DIR workloads with as-recorded)",
                w.name
            );
        }
    }
    Ok(Resolved {
        profiles,
        workloads,
        variants,
    })
}

fn default_out() -> PathBuf {
    PathBuf::from("results").join(chrono::Local::now().format("%Y%m%d-%H%M%S").to_string())
}

fn meta_for(
    req: &MatrixRequest,
    r: &Resolved,
    spec: &PlanSpec,
    planned: usize,
    servers: serde_json::Value,
) -> Meta {
    Meta {
        git_revision: sysinfo::git_revision(),
        machine: MachineInfo::collect(crate::measure::browser::installed_versions()),
        started_at: chrono::Utc::now().to_rfc3339(),
        profiles: r.profiles.clone(),
        servers,
        timeout_s: req.timeout.as_secs_f64(),
        pages_seed: req.pages_seed,
        retry_invalid: req.retry_invalid,
        options: Some(crate::results::resume_options::StoredOptions::of(req)),
        engines: crate::measure::browser::tells_of(&spec.browsers),
        ..Meta::new(spec.clone(), planned)
    }
}

/// The server part of the meta identity: what was asked (the applied details are added to
/// meta after the servers started, under `servers_applied` of each run's record).
fn servers_identity(req: &MatrixRequest) -> serde_json::Value {
    serde_json::json!({
        "servers": req.servers.iter().map(ServerChoice::identity).collect::<Vec<_>>(),
        "knobs": req.knobs,
    })
}

fn progress_bar(total: usize, done: usize, quiet: bool) -> ProgressBar {
    let pb = ProgressBar::new(total as u64);
    if quiet {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        pb.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        pb.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} eta {eta} · {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
    }
    pb.set_position(done as u64);
    pb
}

/// Runs (or resumes) a matrix.
pub fn run(req: &MatrixRequest) -> Result<MatrixOutcome> {
    signals::install();
    // What killed earlier runs left behind (their namespaces, browser profiles).
    crate::link::cleanup::remove_stale().ok();
    crate::link::cleanup::remove_stale_temp_dirs();
    let r = resolve(req)?;
    let spec = plan_spec(req, &r);
    let mut planned = plan::plan(&spec);
    let shard = req
        .shard
        .map(|s| shard_part(&spec, &r, s, &mut planned))
        .transpose()?;
    crate::measure::fault::check_targets(
        &req.faults,
        planned.iter().map(|p| p.id.as_str()),
        req.retry_invalid,
    )?;
    let mut requested = meta_for(req, &r, &spec, planned.len(), servers_identity(req));
    requested.shard = shard;
    requested.plan_hash = requested.plan_hash();
    let (dir, mut store, mut meta) = open_store(req, requested)?;
    let manifests = manifests_of(req, &r)?;
    meta.sites = manifests
        .iter()
        .filter_map(|(w, m)| m.site.clone().map(|s| (w.clone(), s)))
        .collect();
    let todo: Vec<&PlannedRun> = planned
        .iter()
        .filter(|p| {
            let retries = p.retries(req.retry_invalid);
            store.attempts(&p.id).next(retries).is_some()
        })
        .filter(|p| {
            req.until_round
                .is_none_or(|r| p.phase == Phase::Warmup || p.round <= r)
        })
        .collect();
    let walked = if todo.is_empty() {
        tracing::info!(
            "{}: all {} planned runs are already done",
            dir.display(),
            planned.len()
        );
        None
    } else {
        let walk = Walk {
            r: &r,
            todo: &todo,
            manifests: &manifests,
            planned: &planned,
        };
        Some(walk_plan(req, &dir, walk, &mut store, &mut meta)?)
    };
    let done = store.finished(&planned, req.retry_invalid);
    // With `--runs auto` a cell may stop before its last planned round: the walk over what was
    // left is what says the matrix is complete.
    let completed = done >= planned.len()
        || (req.adaptive.is_some() && matches!(walked, Some(PlanEnd::Done(_))));
    finish(req, &dir, &store, &mut meta, completed)?;
    Ok(MatrixOutcome {
        dir,
        completed,
        runs_done: done,
        planned: planned.len(),
        adaptive: req.adaptive.is_some(),
        summarized: store.attempt_count() > 0,
    })
}

/// The plan the request asks for.
fn plan_spec(req: &MatrixRequest, r: &Resolved) -> PlanSpec {
    PlanSpec {
        profiles: r.profiles.iter().map(|p| p.name.clone()).collect(),
        workloads: r.workloads.iter().map(|w| w.name.clone()).collect(),
        servers: req.servers.iter().map(ServerChoice::name).collect(),
        browsers: req.browsers.clone(),
        views: req.views.clone(),
        devices: req.devices.iter().map(|d| d.id()).collect(),
        variants: r.variants.clone(),
        // `--runs auto`: the plan holds the most rounds a cell may take.
        runs: req.adaptive.map_or(req.runs, |a| a.max_runs),
        warmup: req.warmup,
        seed: req.seed,
        adaptive: req.adaptive,
    }
}

/// `--shard K/N`: keeps this shard's cells of `planned`.
fn shard_part(
    spec: &PlanSpec,
    r: &Resolved,
    s: super::shard::ShardSpec,
    planned: &mut Vec<PlannedRun>,
) -> Result<super::shard::ShardInfo> {
    let (cells, cost) = super::shard::cells_of(spec, &r.profiles, &r.workloads, s)?;
    planned.retain(|p| cells.contains(&p.cell()));
    tracing::info!(
        "shard {s}: {} of {} cells ({}), {} runs, roughly {:.0} min on this machine class",
        cells.len(),
        spec.cells().len(),
        cells
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        planned.len(),
        cost / 60.0
    );
    Ok(super::shard::ShardInfo { spec: s, cells })
}

/// The results directory: a new one, or the one `--resume` names (checked to be this matrix).
fn open_store(req: &MatrixRequest, requested: Meta) -> Result<(PathBuf, Store, Meta)> {
    Ok(match &req.resume {
        Some(dir) => {
            let (store, meta) = Store::resume(dir, &requested)?;
            (dir.clone(), store, meta)
        }
        None => {
            let dir = req.out.clone().unwrap_or_else(default_out);
            let store = Store::create(&dir, &requested)?;
            (dir, store, requested)
        }
    })
}

/// Each workload's manifest (generated or read), checked against the engines and variants
/// that will load it.
fn manifests_of(req: &MatrixRequest, r: &Resolved) -> Result<BTreeMap<String, Manifest>> {
    let mut manifests: BTreeMap<String, Manifest> = BTreeMap::new();
    for w in &r.workloads {
        manifests.insert(
            w.name.clone(),
            workload::ensure(&req.pages_root, w, req.pages_seed, req.sites)?,
        );
    }
    for (w, m) in &manifests {
        let Some(site) = &m.site else { continue };
        if r.variants.iter().any(|v| v.as_recorded) {
            site.check_as_recorded(w)?;
        }
        for p in &r.profiles {
            site.profile_for(p)
                .with_context(|| format!("workload {w} on profile {}", p.name))?;
            site.warn_nearer(w, p);
        }
    }
    if !req.dns.is_none() {
        crate::config::name_lookup::check_site_names(manifests.values())?;
    }
    Ok(manifests)
}

/// What the walk over the plan needs besides the request and the store.
struct Walk<'a> {
    r: &'a Resolved,
    todo: &'a [&'a PlannedRun],
    manifests: &'a BTreeMap<String, Manifest>,
    planned: &'a [PlannedRun],
}

/// The machine check, then the runs left; a failure leaves the finished runs on disk and the
/// matrix marked failed.
fn walk_plan(
    req: &MatrixRequest,
    dir: &Path,
    walk: Walk,
    store: &mut Store,
    meta: &mut Meta,
) -> Result<PlanEnd> {
    if !req.machine_check.is_zero() {
        meta.machine_checks.push(check_machine(req));
        store::write_meta(dir, meta)?;
    }
    if meta.shard.is_some() {
        describe_machine(req, dir)?;
    }
    let Walk {
        r,
        todo,
        manifests,
        planned,
    } = walk;
    start_and_run(req, r, todo, manifests, store, planned, meta).or_else(|e| {
        // Every finished run is on disk; say in the metadata that the matrix stopped.
        meta.status = "failed".into();
        meta.ended_at = Some(chrono::Utc::now().to_rfc3339());
        store::write_meta(dir, meta)?;
        Err(e.context(format!(
            "the matrix stopped; its finished runs are in {} (continue with --resume)",
            dir.display()
        )))
    })
}

/// The matrix's status and end, then its statistics (when any attempt is on disk).
fn finish(
    req: &MatrixRequest,
    dir: &Path,
    store: &Store,
    meta: &mut Meta,
    completed: bool,
) -> Result<()> {
    meta.status = if completed {
        "complete".into()
    } else if signals::interrupted() {
        "interrupted".into()
    } else {
        "incomplete".into()
    };
    meta.ended_at = Some(chrono::Utc::now().to_rfc3339());
    store::write_meta(dir, meta)?;
    if store.attempt_count() > 0 {
        let rows = summary::read_runs(dir)?;
        let s = summary::summarize_runs(
            &rows,
            req.seed,
            crate::support::stats::DEFAULT_RESAMPLES,
            &meta.plan.servers,
            req.timeout.as_secs_f64() * 1e3,
        )?;
        summary::write(dir, &s)?;
        if !req.quiet {
            println!("{}", summary::terminal(&s));
        }
    }
    Ok(())
}

/// Watches the machine for `--machine-check` before the first run, and says when it is not
/// quiet.
fn check_machine(req: &MatrixRequest) -> crate::support::machine_check::MachineCheck {
    let c = crate::support::machine_check::check(req.machine_check);
    tracing::info!("machine check: {}", c.describe());
    if !c.quiet() {
        eprintln!(
            "warning: the machine is not quiet — {}. Its runs will be disturbed (each run's contention is recorded and the report says how many met a busy machine); for published figures run on a quiet machine. Measured {}.",
            c.problems.join("; "),
            c.describe()
        );
    }
    c
}

/// A shard's `machine.json`: the machine's fingerprint, and its calibration the first time (a
/// resumed shard keeps the one it made; `--calibration-runs 0` makes none).
fn describe_machine(req: &MatrixRequest, dir: &Path) -> Result<()> {
    use crate::results::shards::{read_machine, write_machine, MachineFile};
    let meta = store::read_meta(dir)?;
    let old = read_machine(dir)?;
    let calibration = match old.and_then(|m| m.calibration) {
        Some(c) => Some(c),
        None if req.calibration_runs > 0 => {
            if !req.quiet {
                eprintln!(
                    "calibrating this machine: emulator precision and rate, {} runs of page10 over h2 on wired …",
                    req.calibration_runs
                );
            }
            let c = super::calibration::calibrate(
                req.calibration_runs,
                &req.pages_root,
                req.pages_seed,
                req.settle_max,
            );
            for p in &c.problems {
                tracing::warn!("calibration: {p}");
            }
            if signals::interrupted() {
                // Half a calibration says nothing: the resumed shard makes it again.
                return Ok(());
            }
            Some(c)
        }
        None => None,
    };
    write_machine(
        dir,
        &MachineFile {
            hostname: meta.machine.hostname.clone(),
            fingerprint: meta.fingerprint(),
            calibration,
        },
    )
}

/// Lane `lane`'s testbed, with `profile`: lane 0's servers log into the results directory as
/// a serial walk's do, another lane's into `lanes/<lane>/`.
fn lane_executor(
    config: &TestbedConfig,
    lane: usize,
    profile: &crate::config::profile::Profile,
) -> Result<Box<dyn super::execute::Executor + 'static>> {
    let log_dir = config.log_dir.as_ref().map(|d| match lane {
        0 => d.clone(),
        n => d.join("lanes").join(n.to_string()),
    });
    Ok(Box::new(TestbedExecutor::start(TestbedConfig {
        profile: profile.clone(),
        log_dir,
        ..config.clone()
    })?))
}

/// Builds the testbed, records what the servers applied, and walks the plan.
fn start_and_run(
    req: &MatrixRequest,
    r: &Resolved,
    todo: &[&PlannedRun],
    manifests: &BTreeMap<String, Manifest>,
    store: &mut Store,
    planned: &[PlannedRun],
    meta: &mut Meta,
) -> Result<PlanEnd> {
    let first = r
        .profiles
        .iter()
        .find(|p| p.name == todo[0].profile)
        .cloned()
        .expect("planned profile exists");
    let config = TestbedConfig {
        profile: first.clone(),
        servers: req.servers.clone(),
        knobs: req.knobs.clone(),
        pages_root: req.pages_root.clone(),
        seed: req.seed,
        log_dir: Some(store.dir().to_path_buf()),
        steer_receive: req.steer_receive,
        extra_server_addresses: TestbedConfig::extra_addresses_for(manifests.values()),
        site_hosts: TestbedConfig::hosts_for(manifests.values()),
        dns: req.dns,
        site_ports: TestbedConfig::ports_for(manifests.values()),
    };
    let mut exec = TestbedExecutor::start(config.clone())?;
    // Record what the servers really applied.
    let tb = exec.testbed()?;
    meta.servers_applied = tb.describe();
    store::write_meta(store.dir(), meta)?;
    warn_unoffered(req, r, tb);
    let pb = progress_bar(
        planned.len(),
        store.finished(planned, req.retry_invalid),
        req.quiet,
    );
    let rule = req
        .adaptive
        .map(|adaptive| super::stopping_rule::RuleContext {
            adaptive,
            server_order: meta.plan.servers.clone(),
            seed: req.seed,
            resamples: crate::support::stats::DEFAULT_RESAMPLES,
            timeout_ms: req.timeout.as_secs_f64() * 1e3,
        });
    let results_dir = store.dir().to_path_buf();
    let judge = |cell: &plan::Cell, rounds: u32| {
        let rule = rule.as_ref().expect("asked only with --runs auto");
        super::stopping_rule::judge_dir(&results_dir, cell, rounds, rule)
    };
    let gate = rule.as_ref().map(|r| AdaptiveGate {
        min_runs: r.adaptive.min_runs,
        judge: &judge,
    });
    let ctx = PlanContext {
        profiles: &r.profiles,
        manifests,
        timeout: req.timeout,
        settle_max: req.settle_max,
        retry_invalid: req.retry_invalid,
        faults: &req.faults,
        quiet: req.quiet,
        keep_bodies: false,
        visual: req.visual,
        capture: &req.capture,
        repeat_cache: req.repeat_cache,
        cpu_benchmark: crate::config::device::compared(&req.devices),
        stop: &signals::interrupted,
        adaptive: gate,
        lane: None,
        draws_seed: Some(req.seed),
        then: None,
    };
    let policy = lane_policy(req);
    let result = if policy.jobs > 1 {
        // Every lane builds its own testbed in its own thread.
        drop(exec);
        let make = |lane: usize, profile: &crate::config::profile::Profile| {
            lane_executor(&config, lane, profile)
        };
        // A resumed walk (each block of `bench concurrency` is one) starts from the needs its
        // records tell, not from nothing: its rounds need not run alone again to learn them.
        let mut needs = super::lanes::Needs::new(&policy);
        if let Err(e) = store.each_record(|rec| needs.record(rec)) {
            tracing::warn!("the needs of earlier runs are learnt again: {e:#}");
        }
        super::concurrent::run_lanes(policy, needs, &make, &ctx, todo, store, &pb)
    } else {
        run_plan(&mut exec, &ctx, &first.name, todo, store, &pb)
    };
    finish_progress(&pb, &result, req.adaptive.is_some());
    result
}

/// Warns of every measured protocol a server does not offer (its runs will be invalid).
fn warn_unoffered(req: &MatrixRequest, r: &Resolved, tb: &crate::measure::testbed::Testbed) {
    for s in &req.servers {
        let slot = tb.server(&s.name()).expect("started");
        for v in &r.variants {
            if !slot.offers(v.protocol) {
                tracing::warn!(
                    "server {} does not offer {}: its {} runs will be invalid (the browser is caught falling back)",
                    s.name(),
                    v.protocol,
                    v.name()
                );
            }
        }
    }
}

/// The lanes `--jobs` and `--share-below` give this machine (one with `--runs auto`).
fn lane_policy(req: &MatrixRequest) -> super::lanes::Policy {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let policy = req.jobs.policy(cpus, req.share_below);
    if req.adaptive.is_some() && policy.jobs > 1 {
        // The stopping rule judges a cell between its rounds, in order: one lane.
        tracing::info!("--runs auto walks one run at a time: --jobs is not used");
        return super::lanes::Policy::serial();
    }
    if crate::config::device::compared(&req.devices) && policy.jobs > 1 {
        // A device is a share of one core, and its benchmarks compare with a free core:
        // another lane's browser on that core would be part of the device.
        tracing::info!("devices are compared one run at a time: --jobs is not used");
        return super::lanes::Policy::serial();
    }
    policy
}

/// The progress bar's last line: interrupted, or what the walk counted.
fn finish_progress(pb: &ProgressBar, result: &Result<PlanEnd>, adaptive: bool) {
    match result {
        Ok(PlanEnd::Interrupted) => {
            pb.abandon_with_message("interrupted: finished runs are saved; continue with --resume")
        }
        Ok(PlanEnd::Done(t)) => pb.finish_with_message(format!(
            "done · valid {} invalid {} DNF {} · retried {}{}",
            t.valid,
            t.invalid,
            t.dnf,
            t.retries,
            if adaptive {
                format!(
                    " · {} cells precise before their last round, {} runs not needed",
                    t.cells_stopped, t.skipped
                )
            } else {
                String::new()
            }
        )),
        Err(_) => pb.abandon(),
    }
}
