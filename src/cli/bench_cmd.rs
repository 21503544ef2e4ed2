//! `pagebench bench …`: the emulator, the embedded server, the link gate, visual metrics,
//! captures, the packet tap, the stopping rule and lanes, each measured on this machine.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use super::after_runs::diagnosis_and_report;
use super::args::{
    refuse_h3_mode, BenchArgs, BenchConcurrencyArgs, BenchLinkArgs, BenchNetemArgs,
    BenchStoppingArgs, BenchTarget, BenchVisualArgs, CommonArgs,
};
use crate::embedded_server::ServerKnobs;
use crate::{config::profile, config::workload, support::signals};

pub fn bench(a: BenchArgs) -> Result<ExitCode> {
    signals::install();
    match a.target {
        BenchTarget::Netem(n) => bench_netem(n),
        BenchTarget::Link(l) => bench_link(l),
        BenchTarget::Visual(v) => {
            let how = v.common.visual.unwrap_or_default();
            bench_visual(v, crate::bench::visual_bench::Treatment::Visual(how))
        }
        BenchTarget::Capture(v) => {
            let kinds = v
                .common
                .capture
                .clone()
                .unwrap_or_else(|| "pcap,keys".parse().expect("a valid capture set"));
            bench_visual(v, crate::bench::visual_bench::Treatment::Capture(kinds))
        }
        BenchTarget::Tap(v) => bench_visual(v, crate::bench::visual_bench::Treatment::Tap),
        BenchTarget::Stopping(s) => bench_stopping(s),
        BenchTarget::Concurrency(c) => bench_concurrency(c),
        BenchTarget::Server(args) => {
            let report = crate::bench::server_bench::run(&args)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "loopback, {} bytes per transfer, a fresh connection each, protocols interleaved:",
                    report.size_bytes
                );
                print!("{}", crate::bench::server_bench::table(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn bench_link(a: BenchLinkArgs) -> Result<ExitCode> {
    use crate::bench::link_bench;
    use crate::results::{store, summary};
    let dir = match &a.from {
        Some(dir) => dir.clone(),
        None => {
            // A jitter model other than the profiles' own: the profiles' values with it.
            let (profiles, profiles_dir) = match &a.jitter_model {
                Some(m) => {
                    let model: profile::JitterModel = serde_json::from_value(
                        serde_json::Value::String(m.clone()),
                    )
                    .map_err(|_| {
                        anyhow::anyhow!("--jitter-model {m:?}: use varying, fifo or reorder")
                    })?;
                    let mut changed =
                        profile::select_from(&a.profiles, &a.common.profile_source())?;
                    for p in &mut changed {
                        if p.jitter_model != model {
                            // The coherence time belongs to the varying model only.
                            p.jitter_model = model;
                            p.jitter_coherence_ms = None;
                        }
                    }
                    let names: Vec<&str> = changed.iter().map(|p| p.name.as_str()).collect();
                    (
                        names.join(","),
                        profile::ProfileSource::Listed(changed.clone()),
                    )
                }
                None => (a.profiles.clone(), a.common.profile_source()),
            };
            let out = a.out.clone().unwrap_or_else(|| {
                PathBuf::from("results").join(format!(
                    "bench-link-{}",
                    chrono::Local::now().format("%Y%m%d-%H%M%S")
                ))
            });
            let req = crate::matrix::request::MatrixRequest {
                out: Some(out),
                runs: a.runs,
                seed: a.seed,
                timeout: a.timeout,
                visual: a.common.visual,
                capture: a.common.capture(),
                sites: a.common.site_options(),
                ..bench_matrix(
                    &a.common,
                    profiles,
                    profiles_dir,
                    &a.workloads,
                    &a.protocols,
                )?
            };
            let out = crate::matrix::request::run(&req)?;
            if out.summarized {
                diagnosis_and_report(&out.dir, false);
            }
            out.dir
        }
    };
    let meta = store::read_meta(&dir)?;
    let rows = summary::read_runs(&dir)?;
    let cells = link_bench::table(&rows, &meta.profiles);
    if cells.is_empty() {
        anyhow::bail!("{}: no run with link figures", dir.display());
    }
    let text = link_bench::render(&cells);
    crate::support::atomic::write_file(&dir.join("link-bench.md"), text.as_bytes())?;
    print!("{text}");
    println!("(from {}; also in link-bench.md there)", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// A bench's matrix: the embedded server and Chromium's first view, forced h3, one warm-up,
/// quiet and without a report, walked one run at a time; the bench sets what it varies.
pub fn bench_matrix(
    common: &CommonArgs,
    profiles: String,
    profiles_dir: profile::ProfileSource,
    workloads: &str,
    protocols: &str,
) -> Result<crate::matrix::request::MatrixRequest> {
    Ok(crate::matrix::request::MatrixRequest {
        profiles,
        profiles_dir,
        workloads: workloads.to_string(),
        protocols: protocols.to_string(),
        h3_mode: crate::config::protocol::H3Mode::Forced,
        servers: vec![crate::measure::testbed::ServerChoice::embedded()],
        browsers: vec![crate::config::identity::BrowserId::default()],
        views: vec![crate::config::identity::View::First],
        devices: vec![crate::config::device::Device::desktop()],
        repeat_cache: Default::default(),
        knobs: ServerKnobs::default().with_default_tcp_congestion(),
        runs: 10,
        warmup: 1,
        seed: 1,
        timeout: Duration::from_secs(120),
        settle_max: common.settle_max,
        pages_root: common.pages_root()?,
        out: None,
        resume: None,
        quiet: true,
        report: false,
        retry_invalid: 2,
        pages_seed: common.pages_seed,
        faults: vec![],
        steer_receive: true,
        visual: None,
        capture: Default::default(),
        sites: Default::default(),
        dns: common.dns.unwrap_or_default(),
        adaptive: None,
        shard: None,
        calibration_runs: 0,
        machine_check: Duration::ZERO,
        jobs: crate::matrix::lanes::Jobs::Fixed(1),
        share_below: crate::matrix::lanes::AUTO_LIGHT,
        until_round: None,
    })
}

pub fn bench_concurrency(a: BenchConcurrencyArgs) -> Result<ExitCode> {
    use crate::bench::concurrency_bench;
    if !(a.margin > 0.0 && a.margin < 50.0) {
        anyhow::bail!(
            "--margin {}: give a percentage above 0 and below 50 (e.g. 5)",
            a.margin
        );
    }
    let out = a.out.clone().unwrap_or_else(concurrency_bench::default_out);
    let matrix = crate::matrix::request::MatrixRequest {
        browsers: a.common.browsers()?,
        runs: a.runs,
        seed: a.seed,
        timeout: a.timeout,
        machine_check: a.machine_check,
        visual: a.common.visual,
        capture: a.common.capture(),
        sites: a.common.site_options(),
        ..bench_matrix(
            &a.common,
            a.profiles.clone(),
            a.common.profile_source(),
            &a.workloads,
            &a.protocols,
        )?
    };
    let req = concurrency_bench::ConcurrencyBenchRequest {
        matrix,
        jobs: a.jobs,
        margin: a.margin / 100.0,
        block_rounds: a.block_rounds,
    };
    let table = concurrency_bench::run(&req, &out)?;
    print!("{}", concurrency_bench::render(&table, req.margin));
    println!(
        "(both walks are results directories in {}; the table is also concurrency.md there)",
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn bench_stopping(a: BenchStoppingArgs) -> Result<ExitCode> {
    use crate::bench::stopping_bench::{self, Shape, SimConfig};
    let started = std::time::Instant::now();
    let mut results = Vec::new();
    for name in &a.shapes {
        let shape: Shape = name.parse()?;
        let cfg = SimConfig {
            shape,
            cells: a.cells,
            seed: a.seed,
            min_runs: a.min_runs,
            max_runs: a.max_runs,
            precisions: a.precision.clone(),
            fixed_runs: a.fixed_runs.clone(),
            resamples: a.resamples,
            true_ratio: a.true_ratio,
            threads: a.threads,
        };
        eprintln!(
            "pagebench bench stopping: {} cells of {} …",
            a.cells,
            shape.describe()
        );
        results.push(stopping_bench::simulate(&cfg)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        println!(
            "h3 against h2, median ratio {} (1: no true difference, so every difference called is a false positive); one comparison per cell (a Holm family of one); {} resamples; seed {}:\n",
            a.true_ratio, a.resamples, a.seed
        );
        print!("{}", stopping_bench::table(&results, a.max_runs));
        println!(
            "\n{} cells per distribution in {:.0} s",
            a.cells,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn bench_visual(
    a: BenchVisualArgs,
    treatment: crate::bench::visual_bench::Treatment,
) -> Result<ExitCode> {
    use crate::bench::visual_bench;
    let slug = treatment.slug();
    let flag = treatment.flag();
    let profiles = profile::select_from(&a.profile, &a.common.profile_source())?;
    if profiles.len() != 1 {
        anyhow::bail!(
            "--profile takes one profile, not a set ({} profiles)",
            profiles.len()
        );
    }
    let w: workload::Workload = a.workload.parse()?;
    let pages_root = a.common.pages_root()?;
    let manifest = workload::ensure(
        &pages_root,
        &w,
        a.common.pages_seed,
        a.common.site_options(),
    )?;
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "bench-{slug}-{}",
            chrono::Local::now().format("%Y%m%d-%H%M%S")
        ))
    });
    let req = visual_bench::VisualBenchRequest {
        treatment,
        profile: profiles[0].clone(),
        manifest,
        variant: {
            refuse_h3_mode(a.h3_mode, "--protocol")?;
            a.protocol
        },
        runs: a.runs,
        pages_root,
        out: out.clone(),
        timeout: a.timeout,
        seed: a.seed,
        browser: match a.common.browsers()?.as_slice() {
            [one] => *one,
            more => anyhow::bail!(
                "--browsers: bench {slug} measures one engine, not {}",
                more.len()
            ),
        },
    };
    let r = visual_bench::run(&req, &signals::interrupted)?;
    let json = serde_json::to_string_pretty(&r)?;
    let json_name = format!("bench-{slug}.json");
    crate::support::atomic::write_file(&out.join(&json_name), json.as_bytes())?;
    if a.json {
        println!("{json}");
    } else {
        print_visual(&r, &flag);
        println!("wrote {}", out.join(&json_name).display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The terminal's account of a visual bench: the load's median with and without the
/// treatment's `flag`, the retries, the Speed Index, what was kept on disk, and the ratio.
fn print_visual(r: &crate::bench::visual_bench::VisualOverhead, flag: &str) {
    let c = &r.comparison;
    let med =
        |v: &[f64]| crate::support::stats::median(v).map_or("–".into(), |m| format!("{m:.1} ms"));
    println!(
        "{} on {} over {}: loadEventEnd median {} without {flag} ({} runs), {} with it ({} runs), interleaved",
        r.workload,
        r.profile,
        r.variant,
        med(&r.without_ms),
        r.without_ms.len(),
        med(&r.with_ms),
        r.with_ms.len(),
    );
    println!(
        "attempts run again after failing as a measurement: {} with, {} without",
        r.retried_with, r.retried_without
    );
    if !r.speed_index_ms.is_empty() {
        println!(
            "Speed Index ({}): median {}, range {:.0}–{:.0} ms over {} runs",
            flag,
            med(&r.speed_index_ms),
            r.speed_index_ms
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min),
            r.speed_index_ms.iter().copied().fold(0.0, f64::max),
            r.speed_index_ms.len()
        );
    }
    if !r.kept_bytes.is_empty() {
        let kept: Vec<f64> = r.kept_bytes.iter().map(|b| *b as f64).collect();
        println!(
            "kept on disk per run: median {:.0} KB (captures/<run id>/)",
            crate::support::stats::median(&kept).unwrap_or(0.0) / 1000.0
        );
    }
    println!(
        "ratio with/without {} [95 % CI {} – {}], Mann-Whitney p = {}{}",
        c.ratio.map_or("–".into(), |x| format!("{x:.3}")),
        c.ratio_ci_low.map_or("–".into(), |x| format!("{x:.3}")),
        c.ratio_ci_high.map_or("–".into(), |x| format!("{x:.3}")),
        c.p.map_or("–".into(), |p| format!("{p:.3}")),
        if r.not_counted > 0 {
            format!(" ({} runs did not count)", r.not_counted)
        } else {
            String::new()
        }
    );
}

pub fn bench_netem(a: BenchNetemArgs) -> Result<ExitCode> {
    for (flag, v) in [("--seconds", a.seconds), ("--rate-seconds", a.rate_seconds)] {
        if !(v.is_finite() && (0.5..=600.0).contains(&v)) {
            anyhow::bail!("{flag} {v}: give a duration between 0.5 and 600 seconds");
        }
    }
    if let Some(d) = a
        .delays
        .iter()
        .find(|d| !(d.is_finite() && (0.0..=30_000.0).contains(*d)))
    {
        anyhow::bail!("--delays: {d} is not a one-way delay between 0 and 30000 ms");
    }
    let opts = crate::link::precision::BenchOptions {
        one_way_ms: a.delays,
        probe_seconds: a.seconds,
        rate_seconds: a.rate_seconds,
        realtime: !a.no_realtime,
        hold_cpus_awake: !a.let_cpus_sleep,
        steer_receive: !a.no_receive_steering,
        ..Default::default()
    };
    let report = crate::link::precision::run(&opts, |step| eprintln!("bench: {step} …"))?;
    print!("{}", crate::link::precision::render(&report));
    if let Some(path) = a.stats_json {
        crate::support::atomic::write_file(
            &path,
            (serde_json::to_string_pretty(&report)? + "\n").as_bytes(),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
