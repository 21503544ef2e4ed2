//! `pagebench matrix`: the flags → a matrix request (or a resumed one), the walk, then the
//! diagnosis and the report.

use std::process::ExitCode;

use anyhow::Result;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};

use super::after_runs::diagnosis_and_report;
use super::args::{refuse_h3_mode, MatrixArgs, RunsArg};
use crate::embedded_server::ServerKnobs;
use crate::{config::locations, support::signals};

/// Which matrix options the command line typed (clap filled in the others).
pub fn typed_matrix_options(m: &ArgMatches) -> crate::matrix::resume::Typed {
    let typed: std::collections::BTreeSet<String> = m
        .ids()
        .filter(|id| m.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect();
    let knob_ids: Vec<String> = <ServerKnobs as Args>::augment_args(clap::Command::new("knobs"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    let t = |id: &str| typed.contains(id);
    crate::matrix::resume::Typed {
        profiles: t("profiles"),
        profiles_dir: t("profiles_dir"),
        workloads: t("workloads"),
        protocols: t("protocols"),
        h3_mode: t("h3_mode"),
        servers: ["servers", "server_cmd", "server_log_format", "server_log"]
            .iter()
            .any(|id| t(id)),
        browsers: t("browsers"),
        views: t("views"),
        devices: t("devices") || t("cpu_throttle_devtools"),
        repeat_cache: t("repeat_cache"),
        knobs: t("server_config") || knob_ids.iter().any(|id| t(id)),
        runs: t("runs"),
        adaptive: ["min_runs", "max_runs", "precision"].iter().any(|id| t(id)),
        shard: t("shard"),
        warmup: t("warmup"),
        seed: t("seed"),
        timeout: t("timeout"),
        settle_max: t("settle_max"),
        retry_invalid: t("retry_invalid"),
        pages_seed: t("pages_seed"),
        no_receive_steering: t("no_receive_steering"),
        pages: t("pages"),
        visual: t("visual"),
        capture: t("capture"),
    }
}

/// `--runs N`, or `--runs auto` with its bounds: the rounds the plan holds and the rule.
fn runs_of(a: &MatrixArgs) -> Result<(u32, Option<crate::config::plan::Adaptive>)> {
    Ok(match a.runs {
        RunsArg::Fixed(n) => (n, None),
        RunsArg::Auto => (
            a.max_runs,
            Some(crate::config::plan::Adaptive::new(
                a.min_runs,
                a.max_runs,
                a.precision,
            )?),
        ),
    })
}

pub fn matrix(a: MatrixArgs, typed: &crate::matrix::resume::Typed) -> Result<ExitCode> {
    let dns = a.common.dns_for(&a.workloads)?;
    let (runs, adaptive) = runs_of(&a)?;
    let mut req = crate::matrix::request::MatrixRequest {
        profiles: a.profiles,
        profiles_dir: a.common.profile_source(),
        workloads: a.workloads,
        protocols: a.protocols,
        h3_mode: {
            refuse_h3_mode(a.h3_mode, "--protocols")?;
            crate::config::protocol::H3Mode::Forced
        },
        servers: a.server.servers()?,
        browsers: a.common.browsers()?,
        views: a.common.views()?,
        devices: a.common.devices()?,
        repeat_cache: a.common.repeat_cache,
        knobs: a.server.knobs()?,
        runs,
        adaptive,
        shard: a.shard,
        calibration_runs: a.calibration_runs,
        machine_check: a.machine_check,
        jobs: a.jobs,
        share_below: a.share_below,
        until_round: None,
        warmup: a.warmup,
        seed: a.seed,
        timeout: a.timeout,
        settle_max: a.common.settle_max,
        // Filled in below: the default depends on the pages seed, which a resume may restore.
        pages_root: a.common.pages.clone().unwrap_or_default(),
        out: a.out,
        resume: a.resume,
        quiet: a.quiet,
        report: !a.no_report,
        retry_invalid: a.retry_invalid,
        pages_seed: a.common.pages_seed,
        faults: a
            .inject_fault
            .iter()
            .map(|f| f.parse())
            .collect::<Result<_>>()?,
        steer_receive: !a.no_receive_steering,
        visual: a.common.visual,
        capture: a.common.capture(),
        sites: a.common.site_options(),
        dns,
    };
    if let Some(dir) = &req.resume {
        let stored = crate::results::store::read_meta(dir)?;
        req = crate::matrix::resume::resumed_request(dir, &stored, &req, typed)?;
    }
    if req.pages_root.as_os_str().is_empty() {
        req.pages_root = locations::pages_root(None, req.pages_seed)?;
    }
    if a.runs != RunsArg::Auto && typed.adaptive && req.adaptive.is_none() && req.resume.is_none() {
        anyhow::bail!(
            "--min-runs, --max-runs and --precision go with --runs auto; give --runs auto, or leave them out"
        );
    }
    let out = crate::matrix::request::run(&req)?;
    if out.summarized {
        diagnosis_and_report(&out.dir, req.report);
    }
    let interrupted = signals::interrupted() && !out.completed;
    eprintln!(
        "pagebench matrix: {} of {} planned runs{} in {}{}",
        out.runs_done,
        out.planned,
        if out.adaptive {
            " (--runs auto: the most it could take)"
        } else {
            ""
        },
        out.dir.display(),
        if out.completed {
            String::new()
        } else {
            format!(
                " — incomplete: continue with `pagebench matrix --resume {}`",
                out.dir.display()
            )
        }
    );
    // Interrupted: 130, as a shell reports Ctrl-C, so scripts know the matrix is incomplete.
    Ok(if interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
