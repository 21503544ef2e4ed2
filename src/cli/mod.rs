//! The command line: the arguments ([`args`]) and one module per subcommand, each a thin shell
//! over the layers below (`*_cmd`); [`main`] parses, runs the command and picks the exit code.

pub mod after_runs;
pub mod args;
pub mod bench_cmd;
pub mod cleanup_cmd;
pub mod compare_cmd;
pub mod devices_cmd;
pub mod diagnose_cmd;
pub mod import_cmd;
pub mod matrix_cmd;
pub mod merge_cmd;
pub mod pages_cmd;
pub mod profiles_cmd;
pub mod record_cmd;
pub mod report_cmd;
pub mod run_cmd;
pub mod serve_cmd;
pub mod shell_cmd;

use crate::NotBuilt;
use anyhow::Result;
use args::{Cli, Command};
use bench_cmd::bench;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use cleanup_cmd::cleanup;
use compare_cmd::compare;
use devices_cmd::devices;
use diagnose_cmd::diagnose;
use import_cmd::import;
use matrix_cmd::{matrix, typed_matrix_options};
use merge_cmd::merge;
use pages_cmd::pages;
use profiles_cmd::profiles;
use record_cmd::record;
use report_cmd::report;
use run_cmd::run_cmd;
use serve_cmd::serve;
use shell_cmd::shell;
use std::process::ExitCode;

/// Entry point of the binary: runs the command, prints one clear error, picks the exit code.
pub fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_tracing();
    match run(cli, &matches) {
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
        // Colours only for a terminal: a log file keeps plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

fn run(cli: Cli, matches: &ArgMatches) -> Result<ExitCode> {
    let launches_browsers = matches!(
        cli.command,
        Command::Matrix(_) | Command::Run(_) | Command::Record(_) | Command::Bench(_)
    );
    if launches_browsers {
        crate::measure::browser::sandbox::configure(cli.no_browser_sandbox)?;
    }
    match cli.command {
        Command::Pages(a) => pages(a),
        Command::Profiles(a) => profiles(a),
        Command::Devices(a) => devices(a),
        Command::Matrix(a) => {
            let typed = matches
                .subcommand_matches("matrix")
                .map(typed_matrix_options)
                .unwrap_or_default();
            matrix(a, &typed)
        }
        Command::Run(a) => run_cmd(a),
        Command::Serve(a) => serve(a),
        Command::Shell(a) => shell(a),
        Command::Cleanup => cleanup(),
        Command::Bench(a) => bench(a),
        Command::Report(a) => report(a),
        Command::Diagnose(a) => diagnose(a),
        Command::Import(a) => import(a),
        Command::Record(a) => record(a),
        Command::Merge(a) => merge(a),
        Command::Compare(a) => compare(a),
    }
}
