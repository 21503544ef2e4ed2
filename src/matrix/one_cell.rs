//! `pagebench run`: one series as a one-cell plan walked by the matrix loop, so a run that
//! failed as a measurement is run again and a broken testbed rebuilt, as in a matrix.

use std::time::Duration;

use anyhow::Result;

use super::execute::{run_plan, Executor, PlanContext, Printed, TestbedExecutor};
use crate::config::plan::{self, PlanSpec};
use crate::config::profile::Profile;
use crate::config::protocol::Variant;
use crate::evidence::run_record::RunRecord;
use crate::support::signals;

/// What `pagebench run` asks: several runs of one series on a fresh testbed.
#[derive(Debug, Clone)]
pub struct SeriesRequest {
    pub profile: Profile,
    pub workload: crate::config::workload::Workload,
    pub variant: Variant,
    pub server: crate::measure::testbed::ServerChoice,
    /// The engines, interleaved in each round (`--browsers`).
    pub browsers: Vec<crate::config::identity::BrowserId>,
    /// First and/or repeat views, interleaved in each round (`--views`).
    pub views: Vec<crate::config::identity::View>,
    /// The devices, interleaved in each round (`--devices`).
    pub devices: Vec<crate::config::device::Device>,
    /// What a repeat view does with the HTTP cache (`--repeat-cache`).
    pub repeat_cache: crate::config::identity::RepeatCache,
    pub knobs: crate::embedded_server::ServerKnobs,
    pub runs: u32,
    pub timeout: Duration,
    pub settle_max: Duration,
    pub pages_root: std::path::PathBuf,
    pub pages_seed: u64,
    pub seed: u64,
    /// Retries of a run that failed as a measurement (as `matrix --retry-invalid`).
    pub retry_invalid: u32,
    /// How a site workload is replayed.
    pub sites: crate::config::workload::site_plan::SiteOptions,
    /// `--dns`.
    pub dns: crate::config::name_lookup::DnsMode,
    /// Keep every response body (for `--har`: a HAR with content).
    pub keep_bodies: bool,
    /// Record a screencast of every load (`--visual`).
    pub visual: Option<crate::evidence::visual::VisualSource>,
    /// What every run keeps (`--capture`); `each` gets the files in `capture_files`.
    pub capture: crate::packets::CaptureSet,
}

/// Runs a series — a one-cell plan walked by the matrix loop, so failed measurements are run
/// again and a broken testbed rebuilt — and hands each attempt to `each` as it finishes (so it
/// is printed before the next starts). Returns the number of attempts; stops early on a signal.
pub fn run_series(
    req: &SeriesRequest,
    mut each: impl FnMut(&RunRecord) -> Result<()>,
) -> Result<usize> {
    signals::install();
    let manifest =
        crate::config::workload::ensure(&req.pages_root, &req.workload, req.pages_seed, req.sites)?;
    if !req.dns.is_none() {
        crate::config::name_lookup::check_site_names([&manifest])?;
    }
    if let Some(site) = &manifest.site {
        site.profile_for(&req.profile)?;
        site.warn_nearer(&req.workload.name, &req.profile);
    }
    if req.variant.as_recorded {
        match &manifest.site {
            Some(site) => site.check_as_recorded(&req.workload.name)?,
            None => anyhow::bail!(
                "--as-recorded replays a recorded site: {} is not one",
                req.workload.name
            ),
        }
    }
    let planned = plan::plan(&PlanSpec {
        profiles: vec![req.profile.name.clone()],
        workloads: vec![req.workload.name.clone()],
        servers: vec![req.server.name()],
        browsers: req.browsers.clone(),
        views: req.views.clone(),
        devices: req.devices.iter().map(|d| d.id()).collect(),
        variants: vec![req.variant],
        runs: req.runs,
        warmup: 0,
        seed: req.seed,
        adaptive: None,
    });
    let mut exec = TestbedExecutor::start(crate::measure::testbed::TestbedConfig {
        profile: req.profile.clone(),
        servers: vec![req.server.clone()],
        knobs: req.knobs.clone(),
        pages_root: req.pages_root.clone(),
        seed: req.seed,
        log_dir: None,
        steer_receive: true,
        extra_server_addresses: crate::measure::testbed::TestbedConfig::extra_addresses_for([
            &manifest,
        ]),
        site_hosts: crate::measure::testbed::TestbedConfig::hosts_for([&manifest]),
        dns: req.dns,
        site_ports: crate::measure::testbed::TestbedConfig::ports_for([&manifest]),
    })?;
    exec.set_profile(&req.profile)?;
    let manifests = [(req.workload.name.clone(), manifest)]
        .into_iter()
        .collect();
    let profiles = [req.profile.clone()];
    let ctx = PlanContext {
        profiles: &profiles,
        manifests: &manifests,
        timeout: req.timeout,
        settle_max: req.settle_max,
        retry_invalid: req.retry_invalid,
        faults: &[],
        quiet: true,
        keep_bodies: req.keep_bodies,
        visual: req.visual,
        capture: &req.capture,
        repeat_cache: req.repeat_cache,
        cpu_benchmark: crate::config::device::compared(&req.devices),
        stop: &signals::interrupted,
        adaptive: None,
        lane: None,
        draws_seed: Some(req.seed),
        then: None,
    };
    let mut attempts = 0usize;
    let mut log = Printed::new(|rec: &RunRecord| {
        attempts += 1;
        each(rec)
    });
    let todo: Vec<&plan::PlannedRun> = planned.iter().collect();
    run_plan(
        &mut exec,
        &ctx,
        &req.profile.name,
        &todo,
        &mut log,
        &indicatif::ProgressBar::hidden(),
    )?;
    drop(log);
    Ok(attempts)
}
