//! `pagebench run`: one series (a one-cell plan), each run described as it ends, with its
//! captures and HAR files when asked.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::args::{refuse_h3_mode, RunArgs};

/// `FILE.har` for one run, `FILE-i.har` for run i of several; a retried run's later attempts
/// get `.aN` (`FILE-2.a2.har`), so no attempt overwrites another.
pub fn har_path(base: &std::path::Path, round: u32, attempt: u32, total: u32) -> PathBuf {
    let stem = base.file_stem().and_then(|s| s.to_str()).unwrap_or("run");
    let ext = base.extension().and_then(|s| s.to_str()).unwrap_or("har");
    let mut name = stem.to_string();
    if total > 1 {
        name.push_str(&format!("-{round}"));
    }
    if attempt > 1 {
        name.push_str(&format!(".a{attempt}"));
    }
    if total <= 1 && attempt <= 1 {
        return base.to_path_buf();
    }
    base.with_file_name(format!("{name}.{ext}"))
}

pub fn run_cmd(a: RunArgs) -> Result<ExitCode> {
    refuse_h3_mode(a.h3_mode, "--protocol")?;
    let profile = crate::config::profile::select_from(&a.profile, &a.common.profile_source())?;
    if profile.len() != 1 {
        anyhow::bail!(
            "--profile takes one profile, not a set ({} profiles)",
            profile.len()
        );
    }
    let servers = a.server.servers()?;
    if servers.len() != 1 {
        anyhow::bail!("pagebench run tests one server: give one of --servers or --server-cmd");
    }
    let workload: crate::config::workload::Workload = a.workload.parse()?;
    if workload.kind.is_replayed() {
        servers[0].check_replay(&workload.name)?;
    }
    let variant = match a.protocol {
        Some(v) => {
            servers[0].check_protocol(v.protocol)?;
            servers[0].check_knobs(&a.server.knobs()?, v.protocol)?;
            v
        }
        None if matches!(
            workload.kind,
            crate::config::workload::WorkloadKind::Site { .. }
        ) =>
        {
            crate::config::protocol::Variant::AS_RECORDED
        }
        None => anyhow::bail!(
            "--as-recorded replays a recorded site: give --workload site:DIR, or --protocol"
        ),
    };
    let req = crate::matrix::one_cell::SeriesRequest {
        profile: profile[0].clone(),
        workload,
        variant,
        server: servers[0].clone(),
        browsers: a.common.browsers()?,
        views: a.common.views()?,
        devices: a.common.devices()?,
        repeat_cache: a.common.repeat_cache,
        knobs: a.server.knobs()?,
        runs: a.runs,
        timeout: a.timeout,
        settle_max: a.common.settle_max,
        pages_root: a.common.pages_root()?,
        pages_seed: a.common.pages_seed,
        seed: a.seed,
        retry_invalid: a.retry_invalid,
        keep_bodies: a.har.is_some(),
        visual: a.common.visual,
        capture: a.common.capture(),
        sites: a.common.site_options(),
        dns: a.common.dns_for(&a.workload)?,
    };
    if req.runs == 0 {
        anyhow::bail!("--runs must be at least 1");
    }
    for b in &req.browsers {
        crate::measure::browser::check_request(
            *b,
            &crate::measure::browser::Asked {
                visual: req.visual,
                capture: &req.capture,
                as_recorded: variant.as_recorded,
                repeat_view: req.views.contains(&crate::config::identity::View::Repeat),
                discovered_h3: variant == crate::config::protocol::Variant::H3_DISCOVERED,
                dns_h3: variant == crate::config::protocol::Variant::H3_DNS,
                devtools_throttle: req.devices.iter().any(|d| d.devtools_rate().is_some()),
            },
        )?;
    }
    crate::config::plan::check_views(&[variant], &req.views)?;
    crate::config::plan::check_dns(&[variant], req.dns)?;
    if a.har.is_some() {
        for b in &req.browsers {
            if let Some(lacks) = &crate::measure::browser::engine(*b)?.tells.har_lacks {
                eprintln!("pagebench run: {lacks}");
            }
        }
    }
    crate::matrix::one_cell::run_series(&req, |rec| report_run(&a, req.runs, rec))?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to standard output; a reader that went away (`| head -1`) ends the printing,
/// not the series: its runs still end cleanly (no panic, namespaces and processes removed).
fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// One run of the series as it ends: described (or as JSON), with its captures and its HAR
/// written where `a` asks (`runs`: the series' length, for the HAR's name).
fn report_run(a: &RunArgs, runs: u32, rec: &crate::evidence::run_record::RunRecord) -> Result<()> {
    if a.json {
        emit(&format!("{}\n", serde_json::to_string(rec)?))?;
    } else {
        emit(&crate::measure::runner::describe(rec))?;
    }
    if !rec.capture_files.is_empty() {
        let dir = a.capture_dir.join(&rec.id);
        crate::results::store::write_captures(&dir, &rec.capture_files)?;
        if !a.json {
            println!("  capture: {}", dir.display());
        }
    }
    if let Some(base) = &a.har {
        let path = har_path(base, rec.round, rec.attempt, runs);
        let har = run_har(rec)?;
        crate::support::atomic::write_file(&path, &serde_json::to_vec_pretty(&har)?)?;
        if !a.json {
            println!("  HAR: {}", path.display());
        }
    }
    Ok(())
}

/// The HAR of one run, made by its engine's adapter from the run's observation.
pub fn run_har(rec: &crate::evidence::run_record::RunRecord) -> Result<serde_json::Value> {
    let engine = crate::measure::browser::engine(rec.browser)?;
    let entries = (engine.har)(&rec.observation);
    let version = rec.browser_version.as_deref().unwrap_or_default();
    let label = rec.browser.label();
    Ok(crate::evidence::har_document::build(
        &rec.observation,
        entries,
        &rec.url,
        &label,
        version,
    ))
}

#[cfg(test)]
mod tests {
    use super::har_path;
    use std::path::Path;

    #[test]
    fn har_files_are_named_by_run_and_attempt() {
        let base = Path::new("/tmp/out/load.har");
        assert_eq!(har_path(base, 1, 1, 1), base);
        assert_eq!(har_path(base, 1, 2, 1), Path::new("/tmp/out/load.a2.har"));
        assert_eq!(har_path(base, 3, 1, 5), Path::new("/tmp/out/load-3.har"));
        assert_eq!(har_path(base, 3, 2, 5), Path::new("/tmp/out/load-3.a2.har"));
    }
}
