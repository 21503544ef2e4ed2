//! Runs a matrix: resolves the request, builds the testbed once, walks the plan (skipping runs a
//! resumed directory already holds), reconfigures the link between profiles, persists each run
//! before the next, shows progress, and summarises at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::plan::{self, Phase, PlanSpec, PlannedRun, Variant};
use super::store::{self, Meta, Store};
use super::summary;
use crate::browser::H3Mode;
use crate::profile::{self, Profile};
use crate::runner::{self, RunSpec};
use crate::server::ServerKnobs;
use crate::signals;
use crate::sysinfo::{self, MachineInfo};
use crate::testbed::{ServerChoice, Testbed, TestbedConfig};
use crate::validate::Outcome;
use crate::workload::{self, Manifest, Workload};

/// Everything `pagebench matrix` was asked.
#[derive(Debug, Clone)]
pub struct MatrixRequest {
    pub profiles: String,
    pub profiles_dir: PathBuf,
    pub workloads: String,
    pub protocols: String,
    pub h3_mode: H3Mode,
    pub servers: Vec<ServerChoice>,
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
    /// Write the report at the end (the report module's entry point).
    pub report: bool,
}

/// What a finished (or interrupted) matrix left.
pub struct MatrixOutcome {
    pub dir: PathBuf,
    pub completed: bool,
    pub runs_done: usize,
    pub planned: usize,
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
    let profiles = profile::select(&req.profiles, &req.profiles_dir)?;
    let workloads = workload::parse_list(&req.workloads)?;
    let variants = plan::parse_variants(&req.protocols, req.h3_mode)?;
    req.knobs.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    for s in &req.servers {
        for v in &variants {
            s.check_protocol(v.protocol)?;
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
        pagebench_version: env!("CARGO_PKG_VERSION").into(),
        git_revision: sysinfo::git_revision(),
        machine: MachineInfo::collect(),
        started_at: chrono::Utc::now().to_rfc3339(),
        ended_at: None,
        status: "running".into(),
        planned_runs: planned,
        plan: spec.clone(),
        profiles: r.profiles.clone(),
        servers,
        timeout_s: req.timeout.as_secs_f64(),
        pages_seed: workload::DEFAULT_SEED,
        servers_applied: serde_json::Value::Null,
        resumed_at: vec![],
    }
}

/// The server part of the meta identity: what was asked (the applied details are added to
/// meta after the servers started, under `servers_applied` of each run's record).
fn servers_identity(req: &MatrixRequest) -> serde_json::Value {
    serde_json::json!({
        "servers": req.servers.iter().map(|s| match s {
            ServerChoice::Command(c) => format!("custom: {c}"),
            other => other.name().to_string(),
        }).collect::<Vec<_>>(),
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
    crate::netem::cleanup::remove_stale().ok();
    crate::netem::cleanup::remove_stale_temp_dirs();
    let r = resolve(req)?;
    let spec = PlanSpec {
        profiles: r.profiles.iter().map(|p| p.name.clone()).collect(),
        workloads: r.workloads.iter().map(|w| w.name.clone()).collect(),
        servers: req.servers.iter().map(|s| s.name().to_string()).collect(),
        variants: r.variants.clone(),
        runs: req.runs,
        warmup: req.warmup,
        seed: req.seed,
    };
    let planned = plan::plan(&spec);
    let requested = meta_for(req, &r, &spec, planned.len(), servers_identity(req));
    let (dir, mut store, mut meta) = match &req.resume {
        Some(dir) => {
            let (store, meta) = Store::resume(dir, &requested)?;
            (dir.clone(), store, meta)
        }
        None => {
            let dir = req.out.clone().unwrap_or_else(default_out);
            let store = Store::create(&dir, &requested)?;
            (dir, store, requested)
        }
    };
    if !std::path::Path::new(crate::browser::CHROMIUM).exists() {
        bail!(
            "{} not found: run ./setup.sh (installs Debian's chromium)",
            crate::browser::CHROMIUM
        );
    }
    let mut manifests: BTreeMap<String, Manifest> = BTreeMap::new();
    for w in &r.workloads {
        manifests.insert(
            w.name.clone(),
            workload::ensure(&req.pages_root, w, workload::DEFAULT_SEED)?,
        );
    }
    let todo: Vec<&PlannedRun> = planned.iter().filter(|p| !store.is_done(&p.id)).collect();
    let outcome_dir = dir.clone();
    if todo.is_empty() {
        tracing::info!(
            "{}: all {} planned runs are already done",
            dir.display(),
            planned.len()
        );
    } else {
        let ran = run_plan(
            req,
            &r,
            &todo,
            &manifests,
            &mut store,
            planned.len(),
            &mut meta,
        );
        if let Err(e) = ran {
            // Every finished run is on disk; say in the metadata that the matrix stopped.
            meta.status = "failed".into();
            meta.ended_at = Some(chrono::Utc::now().to_rfc3339());
            store::write_meta(&dir, &meta)?;
            return Err(e.context(format!(
                "the matrix stopped; its finished runs are in {} (continue with --resume)",
                dir.display()
            )));
        }
    }
    let done = store::committed_ids(&dir)?.len();
    let completed = done >= planned.len();
    meta.status = if completed {
        "complete".into()
    } else if signals::interrupted() {
        "interrupted".into()
    } else {
        "incomplete".into()
    };
    meta.ended_at = Some(chrono::Utc::now().to_rfc3339());
    store::write_meta(&dir, &meta)?;
    if done > 0 {
        let rows = summary::read_runs(&dir)?;
        let s = summary::summarize_runs(
            &rows,
            req.seed,
            crate::stats::DEFAULT_RESAMPLES,
            &meta.plan.servers,
        )?;
        summary::write(&dir, &s)?;
        if !req.quiet {
            println!("{}", summary::terminal(&s));
        }
        if req.report {
            report_hook(&dir)?;
        }
    }
    Ok(MatrixOutcome {
        dir: outcome_dir,
        completed,
        runs_done: done,
        planned: planned.len(),
    })
}

/// Writes the report (tables, charts, HTML); a failure here does not lose any run.
fn report_hook(dir: &Path) -> Result<()> {
    match crate::report::generate(dir) {
        Ok(out) => {
            eprintln!("report: {}", out.html.display());
            Ok(())
        }
        Err(e) => {
            eprintln!("pagebench: the report could not be written ({e:#}); the runs are safe: retry with `pagebench report {}`", dir.display());
            Ok(())
        }
    }
}

fn run_plan(
    req: &MatrixRequest,
    r: &Resolved,
    todo: &[&PlannedRun],
    manifests: &BTreeMap<String, Manifest>,
    store: &mut Store,
    total: usize,
    meta: &mut Meta,
) -> Result<()> {
    let profile_of = |name: &str| {
        r.profiles
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .expect("planned profile exists")
    };
    let first = profile_of(&todo[0].profile);
    let mut tb = Testbed::start(&TestbedConfig {
        profile: first.clone(),
        servers: req.servers.clone(),
        knobs: req.knobs.clone(),
        pages_root: req.pages_root.clone(),
        seed: req.seed,
        log_dir: Some(store.dir().to_path_buf()),
    })
    .context("cannot build the testbed")?;
    // Record what the servers really applied.
    meta.servers_applied = tb.describe();
    store::write_meta(store.dir(), meta)?;
    for s in &req.servers {
        let slot = tb.server_mut(s.name()).expect("started");
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
    let mut current = first.name.clone();
    let pb = progress_bar(total, store.done_count(), req.quiet);
    let (mut valid, mut invalid, mut dnf) = (0usize, 0usize, 0usize);
    for p in todo {
        if signals::interrupted() {
            pb.abandon_with_message("interrupted: finished runs are saved; continue with --resume");
            return Ok(());
        }
        if p.profile != current {
            tb.link.set_profile(&profile_of(&p.profile))?;
            current = p.profile.clone();
        }
        pb.set_message(format!(
            "{}/{}/{} {} {} · valid {valid} invalid {invalid} DNF {dnf}",
            p.profile,
            p.workload,
            p.server,
            p.variant,
            match p.phase {
                Phase::Warmup => format!("warm-up {}", p.round),
                Phase::Measure => format!("round {}", p.round),
            }
        ));
        let spec = RunSpec {
            id: p.id.clone(),
            profile: profile_of(&p.profile),
            manifest: manifests[&p.workload].clone(),
            variant: p.variant,
            server: p.server.clone(),
            phase: p.phase.name().into(),
            round: p.round,
            position: p.position,
            timeout: req.timeout,
            settle_max: req.settle_max,
        };
        let rec = match runner::run_once(&mut tb, &spec) {
            Ok(rec) => rec,
            Err(e) if signals::interrupted() => {
                tracing::info!("run {} interrupted: {e:#}", p.id);
                pb.abandon_with_message(
                    "interrupted: finished runs are saved; continue with --resume",
                );
                return Ok(());
            }
            Err(e) => return Err(e.context(format!("run {}", p.id))),
        };
        store.append(&rec)?;
        match rec.outcome {
            Outcome::Valid => valid += 1,
            Outcome::Invalid => {
                invalid += 1;
                pb.suspend(|| {
                    if !req.quiet {
                        eprintln!(
                            "invalid: {} — {}",
                            rec.id,
                            rec.reasons
                                .iter()
                                .map(|r| format!("{}: {}", r.kind.name(), r.detail))
                                .collect::<Vec<_>>()
                                .join("; ")
                        );
                    }
                });
            }
            Outcome::Dnf => dnf += 1,
        }
        pb.inc(1);
    }
    pb.finish_with_message(format!("done · valid {valid} invalid {invalid} DNF {dnf}"));
    drop(tb);
    Ok(())
}
