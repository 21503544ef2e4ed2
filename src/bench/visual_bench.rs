//! `pagebench bench visual` and `bench capture`: what the screencast, or keeping the capture
//! files, costs the measurement. One testbed, one page, one protocol; runs with and without the
//! option alternate (ABBA, so neither arm always goes
//! first after a warm link), and the two arms' loadEventEnd are compared as any two series are
//! (medians, bootstrap CI of their ratio, Mann-Whitney). Every run is written to the results
//! directory as it finishes, as in a matrix.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::config::profile::Profile;
use crate::config::protocol::Variant;
use crate::config::workload::Manifest;
use crate::evidence::run_record::RunRecord;
use crate::evidence::validate::Outcome;
use crate::measure::runner::{run_counted, RunSpec};
use crate::measure::testbed::{ServerChoice, Testbed, TestbedConfig};
use crate::support::stats::{compare, BootstrapConfig, CompareConfig, Comparison, SeriesInput};

/// The option whose cost is measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Treatment {
    /// `--visual=HOW`.
    Visual(crate::evidence::visual::VisualSource),
    /// `--capture KINDS`.
    Capture(crate::packets::CaptureSet),
    /// The packet tap itself (the head-of-line analysis): the control arm runs without it.
    Tap,
}

impl Treatment {
    /// The option as a user types it.
    pub fn flag(&self) -> String {
        match self {
            Treatment::Visual(how) => format!("--visual={}", how.name()),
            Treatment::Capture(c) => format!("--capture {c}"),
            Treatment::Tap => "the packet tap".into(),
        }
    }

    /// Its word in run ids and file names.
    pub fn slug(&self) -> &'static str {
        match self {
            Treatment::Visual(_) => "visual",
            Treatment::Capture(_) => "capture",
            Treatment::Tap => "tap",
        }
    }

    /// Sets the option on a treated run's spec.
    fn apply(&self, spec: &mut RunSpec) {
        match self {
            Treatment::Visual(how) => spec.visual = Some(*how),
            Treatment::Capture(c) => spec.capture = c.clone(),
            Treatment::Tap => {}
        }
    }

    /// Sets the control arm's spec.
    fn control(&self, spec: &mut RunSpec) {
        if *self == Treatment::Tap {
            spec.packet_tap = false;
        }
    }
}

/// Run `i`'s arm (true: with the option): with, without, without, with, with, …
pub fn arm(i: usize) -> bool {
    matches!(i % 4, 0 | 3)
}

/// What the bench found.
#[derive(Debug, Clone, Serialize)]
pub struct VisualOverhead {
    /// The option measured (`--visual`, `--capture pcap,keys`).
    pub treatment: String,
    pub profile: String,
    pub workload: String,
    pub variant: String,
    /// loadEventEnd of the valid runs, per arm, in run order.
    pub with_ms: Vec<f64>,
    pub without_ms: Vec<f64>,
    /// Bytes the treated runs kept on disk (capture files), per run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept_bytes: Vec<u64>,
    /// The treated runs' Speed Index (`--visual`), in run order: on the four-block calibration
    /// page, the method's error against the analytic value.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub speed_index_ms: Vec<f64>,
    /// Runs of either arm that did not count (invalid after retries, or DNF).
    pub not_counted: usize,
    /// Attempts that failed as a measurement (the link gate: late releases…) and were run
    /// again, per arm: what the option does to the emulator's precision.
    pub retried_with: usize,
    pub retried_without: usize,
    /// median(with) ÷ median(without), its CI and the test.
    pub comparison: Comparison,
}

/// Compares the two arms (pure).
pub fn overhead(
    with: Vec<f64>,
    without: Vec<f64>,
    seed: u64,
) -> Result<(Vec<f64>, Vec<f64>, Comparison)> {
    let input = |v: &[f64]| SeriesInput {
        values: v.to_vec(),
        invalid: 0,
        dnf: 0,
        censor_at: f64::INFINITY,
    };
    let cfg = CompareConfig {
        alpha: 0.05,
        bootstrap: BootstrapConfig::default().with_seed(seed),
    };
    let c = compare(&input(&with), &input(&without), &cfg)?;
    Ok((with, without, c))
}

pub struct VisualBenchRequest {
    pub profile: Profile,
    pub manifest: Manifest,
    pub variant: Variant,
    /// Runs per arm.
    pub runs: usize,
    pub pages_root: PathBuf,
    pub out: PathBuf,
    pub timeout: Duration,
    pub seed: u64,
    pub treatment: Treatment,
    pub browser: crate::config::identity::BrowserId,
}

/// Runs the bench, writing each run's record to `out/runs/` before the next starts.
pub fn run(req: &VisualBenchRequest, stop: &dyn Fn() -> bool) -> Result<VisualOverhead> {
    if req.runs < 2 {
        bail!(
            "--runs {}: at least 2 runs per arm are needed to compare",
            req.runs
        );
    }
    let runs_dir = req.out.join("runs");
    std::fs::create_dir_all(&runs_dir)
        .with_context(|| format!("cannot create {}", runs_dir.display()))?;
    let mut tb = Testbed::start(&TestbedConfig {
        profile: req.profile.clone(),
        servers: vec![ServerChoice::embedded()],
        knobs: crate::embedded_server::ServerKnobs::default().with_default_tcp_congestion(),
        pages_root: req.pages_root.clone(),
        seed: req.seed,
        log_dir: None,
        steer_receive: true,
        extra_server_addresses: TestbedConfig::extra_addresses_for([&req.manifest]),
        dns: crate::config::name_lookup::DnsMode::None,
        site_hosts: TestbedConfig::hosts_for([&req.manifest]),
        site_ports: TestbedConfig::ports_for([&req.manifest]),
    })?;
    let server = ServerChoice::embedded().name();
    let (mut with, mut without, mut not_counted) = (Vec::new(), Vec::new(), 0);
    let (mut kept_bytes, mut speed_index_ms) = (Vec::new(), Vec::new());
    let (mut retried_with, mut retried_without) = (0, 0);
    // One warm-up of each arm: the first load after a testbed starts is slower.
    for i in 0..(2 * req.runs + 2) {
        if stop() {
            bail!("interrupted");
        }
        let treated = arm(i);
        let warm = i < 2;
        let (rec, failed) = bench_run(&mut tb, req, &server, i, &runs_dir)?;
        if !warm && treated {
            retried_with += failed;
        } else if !warm {
            retried_without += failed;
        }
        if warm {
            continue;
        }
        if let Some(si) = rec
            .metrics
            .speed_index_ms
            .filter(|_| rec.outcome == Outcome::Valid)
        {
            speed_index_ms.push(si);
        }
        if treated && !rec.captures.is_empty() {
            kept_bytes.push(rec.captures.iter().map(|c| c.bytes).sum());
        }
        match (rec.outcome, rec.metrics.load_event_end_ms) {
            (Outcome::Valid, Some(t)) if treated => with.push(t),
            (Outcome::Valid, Some(t)) => without.push(t),
            _ => not_counted += 1,
        }
    }
    drop(tb);
    let (with_ms, without_ms, comparison) = overhead(with, without, req.seed)?;
    Ok(VisualOverhead {
        treatment: req.treatment.flag(),
        profile: req.profile.name.clone(),
        workload: req.manifest.workload.name.clone(),
        variant: req.variant.name(),
        with_ms,
        without_ms,
        kept_bytes,
        speed_index_ms,
        not_counted,
        retried_with,
        retried_without,
        comparison,
    })
}

/// Run `i` of the bench (arm and warm-up from `i`), written to `runs_dir` (and its captures
/// beside it) before the next starts: its counted record and how many attempts failed first.
fn bench_run(
    tb: &mut Testbed,
    req: &VisualBenchRequest,
    server: &crate::config::identity::ServerId,
    i: usize,
    runs_dir: &std::path::Path,
) -> Result<(RunRecord, usize)> {
    let treated = arm(i);
    let id = format!(
        "{}-{}-{}{:02}-{}",
        req.profile.name,
        req.manifest.workload.name,
        if i < 2 { "w" } else { "r" },
        i,
        if treated {
            req.treatment.slug()
        } else {
            "plain"
        }
    );
    let mut spec = RunSpec::single(
        &id,
        &req.profile,
        &req.manifest,
        req.variant,
        server,
        req.timeout,
    );
    spec.browser = req.browser;
    if treated {
        req.treatment.apply(&mut spec);
    } else {
        req.treatment.control(&mut spec);
    }
    let mut attempts = run_counted(tb, &spec, 2)?;
    let rec: RunRecord = attempts
        .pop()
        .expect("run_counted makes at least one attempt");
    crate::support::atomic::write_file(
        &runs_dir.join(format!("{id}.json")),
        &serde_json::to_vec(&rec)?,
    )?;
    tracing::info!(
        "{id}: {:?} loadEventEnd {:?}",
        rec.outcome,
        rec.metrics.load_event_end_ms
    );
    if !rec.capture_files.is_empty() {
        crate::results::store::write_captures(
            &req.out.join(crate::results::store::CAPTURES_DIR).join(&id),
            &rec.capture_files,
        )?;
    }
    Ok((rec, attempts.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_alternate_abba() {
        let arms: Vec<bool> = (0..8).map(arm).collect();
        assert_eq!(arms, [true, false, false, true, true, false, false, true]);
        // Equal counts over any whole number of pairs, and each arm first after the other.
        assert_eq!(arms.iter().filter(|a| **a).count(), 4);
    }

    #[test]
    fn the_overhead_is_the_ratio_of_the_medians() {
        let with = vec![110.0, 112.0, 108.0, 111.0, 109.0, 113.0];
        let without = vec![100.0, 101.0, 99.0, 102.0, 98.0, 100.0];
        let (_, _, c) = overhead(with, without, 1).unwrap();
        assert!((c.ratio.unwrap() - 110.5 / 100.0).abs() < 1e-9);
        assert!(c.p.unwrap() < 0.01);
        let (_, _, same) = overhead(vec![100.0, 101.0, 99.0], vec![99.5, 100.5, 100.0], 1).unwrap();
        assert!(same.p.unwrap() > 0.05);
    }
}
