//! The command line: one subcommand per job, each a thin shell over the library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::{profile, workload, NotBuilt};

#[derive(Parser, Debug)]
#[command(
    name = "pagebench",
    version,
    about = "Is HTTP/1.1, HTTP/2 or HTTP/3 faster for this page on this network — and why?",
    long_about = "Loads generated pages in real headless Chromium, forced onto h1, h2 or h3 and verified \
on every resource, through a userspace packet-level link emulator between two network namespaces, \
from a server that speaks all three protocols on one port; then says which differences are real."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// (Re)generate the workloads under pages/ and list them.
    Pages(PagesArgs),
    /// List the network profiles.
    Profiles(ProfilesArgs),
    /// Run the study matrix: profiles × workloads × protocols, interleaved and resumable.
    Matrix,
    /// One or more page loads of one protocol, workload and profile.
    Run,
    /// Serve the workloads over h1/h2 (TCP) and h3 (QUIC) on one port.
    Serve,
    /// Build the emulated link, run a server command and a client command through it.
    Shell(ShellArgs),
    /// Remove namespaces and TUN devices left behind by dead pagebench processes.
    Cleanup,
    /// Benchmarks (emulator precision and rate, server throughput).
    Bench(BenchArgs),
    /// Turn a results directory into tables, charts and an HTML page.
    Report,
    /// Explain slow transfers in a results directory (windows, buffers, losses).
    Diagnose,
}

#[derive(Args, Debug)]
pub struct PagesArgs {
    /// Workloads to generate (default: the standard set). E.g. page10 page50x900 download.
    pub workloads: Vec<String>,
    /// Where the workload trees go.
    #[arg(long, default_value = "pages")]
    pub root: PathBuf,
    /// Generation seed (the same seed always gives the same bytes).
    #[arg(long, default_value_t = workload::DEFAULT_SEED)]
    pub seed: u64,
}

#[derive(Args, Debug)]
pub struct ProfilesArgs {
    /// Which profiles: names, sets (all, extended, every) or TOML paths, comma-separated.
    #[arg(long, default_value = "every")]
    pub profiles: String,
    /// Directory of the shipped profiles.
    #[arg(long, default_value = "profiles")]
    pub dir: PathBuf,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Both commands see PAGEBENCH_CLIENT_IP, PAGEBENCH_SERVER_IP, PAGEBENCH_CLIENT_NS and \
PAGEBENCH_SERVER_NS. Example:\n  pagebench shell --profile wired --server-cmd 'python3 -m http.server \
--bind $PAGEBENCH_SERVER_IP 8000' --wait-tcp 8000 -- sh -c 'curl -so /dev/null -w \"%{time_total}\\n\" \
http://$PAGEBENCH_SERVER_IP:8000/'"
)]
pub struct ShellArgs {
    /// Network profile: a name from the profiles directory or a path to a TOML file.
    #[arg(long)]
    pub profile: String,
    /// Directory of the shipped profiles.
    #[arg(long, default_value = "profiles")]
    pub profiles_dir: PathBuf,
    /// Command run with `sh -c` in the server namespace while the client command runs.
    #[arg(long, value_name = "CMD")]
    pub server_cmd: Option<String>,
    /// Start the client command only once the server accepts TCP connections on this port.
    #[arg(long, value_name = "PORT")]
    pub wait_tcp: Option<u16>,
    /// Seed of the link's loss and jitter draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the emulator at normal priority instead of SCHED_FIFO.
    #[arg(long)]
    pub no_realtime: bool,
    /// Let idle CPUs halt while the link runs (less host CPU, slower wake-ups on VMs).
    #[arg(long)]
    pub let_cpus_sleep: bool,
    /// Also write the link's counters and self-check as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub stats_json: Option<PathBuf>,
    /// The command to run in the client namespace (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub target: BenchTarget,
}

/// What to benchmark.
#[derive(Subcommand, Debug)]
pub enum BenchTarget {
    /// The link emulator: delay error at 0/20/75 ms (idle and under bulk TCP), forwarding rate.
    Netem(BenchNetemArgs),
}

#[derive(Args, Debug)]
pub struct BenchNetemArgs {
    /// Probing time per delay and load, in seconds.
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    /// Blasting time of each forwarding-rate test, in seconds.
    #[arg(long, default_value_t = 3.0)]
    pub rate_seconds: f64,
    /// One-way delays to measure at, in ms, comma-separated.
    #[arg(long, default_value = "0,20,75", value_delimiter = ',')]
    pub delays: Vec<f64>,
    /// Run the emulator at normal priority instead of SCHED_FIFO.
    #[arg(long)]
    pub no_realtime: bool,
    /// Let idle CPUs halt during the benchmark (less host CPU, slower wake-ups on VMs).
    #[arg(long)]
    pub let_cpus_sleep: bool,
    /// Also write the figures as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// Entry point of the binary: runs the command, prints one clear error, picks the exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if let Some(nb) = e.downcast_ref::<NotBuilt>() {
                eprintln!("pagebench: {nb}");
                return ExitCode::from(2);
            }
            eprintln!("pagebench: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PAGEBENCH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,pagebench=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Pages(a) => pages(a),
        Command::Profiles(a) => profiles(a),
        Command::Matrix => Err(NotBuilt("matrix").into()),
        Command::Run => Err(NotBuilt("run").into()),
        Command::Serve => Err(NotBuilt("serve").into()),
        Command::Shell(a) => shell(a),
        Command::Cleanup => cleanup(),
        Command::Bench(a) => match a.target {
            BenchTarget::Netem(n) => bench_netem(n),
        },
        Command::Report => Err(NotBuilt("report").into()),
        Command::Diagnose => Err(NotBuilt("diagnose").into()),
    }
}

fn pages(a: PagesArgs) -> Result<ExitCode> {
    let names: Vec<String> = if a.workloads.is_empty() {
        workload::STANDARD_WORKLOADS
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.workloads
    };
    let mut manifests = Vec::new();
    for name in names {
        let w: workload::Workload = name.parse()?;
        manifests.push(workload::generate(&a.root, &w, a.seed)?);
    }
    print!("{}", workload::listing(&manifests));
    println!("(generated under {}, seed {})", a.root.display(), a.seed);
    Ok(ExitCode::SUCCESS)
}

fn profiles(a: ProfilesArgs) -> Result<ExitCode> {
    let selected = profile::select(&a.profiles, &a.dir)?;
    print!("{}", profile::table(&selected));
    Ok(ExitCode::SUCCESS)
}

fn shell(a: ShellArgs) -> Result<ExitCode> {
    let profile = single_profile(&a.profile, &a.profiles_dir)?;
    let outcome = crate::netem::shell::run(&crate::netem::shell::ShellOptions {
        profile,
        server_cmd: a.server_cmd,
        wait_tcp: a.wait_tcp,
        command: a.command,
        link: crate::netem::LinkOptions {
            seed: a.seed,
            realtime: !a.no_realtime,
            hold_cpus_awake: !a.let_cpus_sleep,
        },
        stats_json: a.stats_json,
    })?;
    Ok(ExitCode::from(outcome.exit_code.clamp(0, 255) as u8))
}

/// Exactly one profile from a `--profile` value.
fn single_profile(spec: &str, dir: &std::path::Path) -> Result<profile::Profile> {
    let mut selected = profile::select(spec, dir)?;
    if selected.len() != 1 {
        anyhow::bail!(
            "--profile {spec:?} selects {} profiles; give exactly one name or TOML path",
            selected.len()
        );
    }
    Ok(selected.remove(0))
}

fn cleanup() -> Result<ExitCode> {
    let removed = crate::netem::cleanup::remove_stale()?;
    if removed.is_empty() {
        println!("no stale pagebench namespaces");
    } else {
        for name in &removed {
            println!("removed {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_netem(a: BenchNetemArgs) -> Result<ExitCode> {
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
    let opts = crate::netem::bench::BenchOptions {
        one_way_ms: a.delays,
        probe_seconds: a.seconds,
        rate_seconds: a.rate_seconds,
        realtime: !a.no_realtime,
        hold_cpus_awake: !a.let_cpus_sleep,
        ..Default::default()
    };
    let report = crate::netem::bench::run(&opts, |step| eprintln!("bench: {step} …"))?;
    print!("{}", crate::netem::bench::render(&report));
    if let Some(path) = a.json {
        std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
