//! The command line: one subcommand per job, each a thin shell over the library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::{profile, report, workload, NotBuilt};

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
    Shell,
    /// Remove namespaces and TUN devices left behind by dead pagebench processes.
    Cleanup,
    /// Benchmarks (emulator precision and rate, server throughput).
    Bench,
    /// Turn a results directory into tables, charts and an HTML page.
    Report(ReportArgs),
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
pub struct ReportArgs {
    /// The results directory (as written by `pagebench matrix`).
    pub dir: PathBuf,
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
        Command::Shell => Err(NotBuilt("shell").into()),
        Command::Cleanup => Err(NotBuilt("cleanup").into()),
        Command::Bench => Err(NotBuilt("bench").into()),
        Command::Report(a) => report(a),
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

fn report(a: ReportArgs) -> Result<ExitCode> {
    let out = report::generate(&a.dir)?;
    if out.summary_computed {
        println!("computed {}", a.dir.join("summary.json").display());
    }
    for p in out.paths() {
        println!("wrote {}", p.display());
    }
    for w in &out.warnings {
        println!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}
