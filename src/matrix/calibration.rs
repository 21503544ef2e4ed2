//! A shard's calibration: a short look at the machine before its first run, so that the
//! machines of a merged matrix can be compared on the same yardsticks — the link emulator's
//! delay error and forwarding rate (a short `bench netem`), and one reference series (page10
//! over h2 on the built-in `wired` profile, Chromium, the embedded server). It is written to
//! `machine.json` with the machine's fingerprint; `pagebench merge` lists it per shard.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::one_cell::{run_series, SeriesRequest};
use crate::config::identity::BrowserId;
use crate::config::protocol::{Protocol, Variant};
use crate::embedded_server::ServerKnobs;
use crate::evidence::validate::Outcome;
use crate::results::shards::{Calibration, NetemCalibration, ReferenceSeries};

/// What the reference series is: the same on every machine whatever the matrix.
pub const REFERENCE_PROFILE: &str = "wired";
pub const REFERENCE_WORKLOAD: &str = "page10";

/// Measures the calibration: `runs` loads of the reference series (after one warm-up), and the
/// emulator's precision and rate. A part that cannot be measured is a problem listed in the
/// result, not an error (the matrix itself will say what is wrong with the machine).
pub fn calibrate(
    runs: u32,
    pages_root: &Path,
    pages_seed: u64,
    settle_max: Duration,
) -> Calibration {
    let started = Instant::now();
    let at = chrono::Utc::now().to_rfc3339();
    let mut problems = Vec::new();
    let netem = match netem() {
        Ok(n) => Some(n),
        Err(e) => {
            problems.push(format!("the emulator benchmark failed: {e:#}"));
            None
        }
    };
    let reference = match reference(runs, pages_root, pages_seed, settle_max) {
        Ok(r) => Some(r),
        Err(e) => {
            problems.push(format!("the reference series failed: {e:#}"));
            None
        }
    };
    Calibration {
        at,
        seconds: started.elapsed().as_secs_f64(),
        netem,
        reference,
        problems,
    }
}

fn netem() -> Result<NetemCalibration> {
    let opts = crate::link::precision::BenchOptions {
        one_way_ms: vec![20.0],
        probe_seconds: 1.0,
        rate_seconds: 1.0,
        ..Default::default()
    };
    let r = crate::link::precision::run(&opts, |step| tracing::debug!("calibration: {step}"))?;
    let row = |load: &str| {
        r.precision
            .iter()
            .find(|p| p.load == load)
            .map(|p| p.rtt)
            .unwrap_or_default()
    };
    let (idle, bulk) = (row("idle"), row("bulk TCP"));
    Ok(NetemCalibration {
        one_way_ms: 20.0,
        rtt_error_median_ms: idle.median_ms,
        rtt_error_p99_ms: idle.p99_ms,
        bulk_rtt_error_median_ms: bulk.median_ms,
        bulk_rtt_error_p99_ms: bulk.p99_ms,
        udp_packets_per_s: r.udp_rate.packets_per_s,
        tcp_mbit_per_s: r.tcp_rate.delivered_mbit_per_s,
        realtime: r.realtime,
    })
}

fn reference(
    runs: u32,
    pages_root: &Path,
    pages_seed: u64,
    settle_max: Duration,
) -> Result<ReferenceSeries> {
    let profile = crate::config::profile::select_from(
        REFERENCE_PROFILE,
        &crate::config::profile::ProfileSource::BuiltIn,
    )?
    .remove(0);
    let req = SeriesRequest {
        profile,
        workload: REFERENCE_WORKLOAD.parse()?,
        variant: Variant::new(Protocol::H2, crate::config::protocol::H3Mode::Forced),
        server: crate::measure::testbed::ServerChoice::embedded(),
        browsers: vec![BrowserId::default()],
        views: vec![crate::config::identity::View::First],
        devices: vec![crate::config::device::Device::desktop()],
        repeat_cache: Default::default(),
        knobs: ServerKnobs::default().with_default_tcp_congestion(),
        // One warm-up first, left out.
        runs: runs + 1,
        timeout: Duration::from_secs(60),
        settle_max,
        pages_root: pages_root.to_path_buf(),
        pages_seed,
        seed: 1,
        retry_invalid: 2,
        sites: Default::default(),
        dns: crate::config::name_lookup::DnsMode::None,
        keep_bodies: false,
        visual: None,
        capture: crate::packets::CaptureSet::none(),
    };
    let mut loads = Vec::new();
    let mut overhead = Vec::new();
    let mut attempts = 0;
    let mut counted = 0;
    run_series(&req, |rec| {
        attempts += 1;
        // The last attempt of each round counts; the first round is the warm-up.
        if rec.round > 1 && !rec.is_measurement_failure() {
            counted += 1;
            if rec.outcome == Outcome::Valid {
                if let Some(ms) = rec.metrics.load_event_end_ms {
                    loads.push(ms);
                }
                overhead.push(rec.overhead.launch_ms + rec.overhead.settle_ms);
            }
        }
        Ok(())
    })?;
    let q = |v: &[f64], p: f64| crate::support::stats::quantile(v, p).ok();
    Ok(ReferenceSeries {
        profile: REFERENCE_PROFILE.into(),
        workload: REFERENCE_WORKLOAD.into(),
        protocol: "h2".into(),
        browser: "chromium".into(),
        runs: counted,
        valid: loads.len(),
        median_ms: q(&loads, 0.5),
        q1_ms: q(&loads, 0.25),
        q3_ms: q(&loads, 0.75),
        launch_settle_median_ms: q(&overhead, 0.5),
    })
}
