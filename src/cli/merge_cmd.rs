//! `pagebench merge`: shards of one plan into one results directory.

use std::process::ExitCode;

use anyhow::Result;

use super::after_runs::diagnosis_and_report;
use super::args::MergeArgs;

pub fn merge(a: MergeArgs) -> Result<ExitCode> {
    let out = crate::matrix::merge::merge(&crate::matrix::merge::MergeRequest {
        out: a.out,
        dirs: a.dirs,
        allow_mixed_machines: a.allow_mixed_machines,
        allow_incomplete: a.allow_incomplete,
        quiet: a.quiet,
    })?;
    if out.summarized {
        diagnosis_and_report(&out.out, !a.no_report);
    }
    for n in &out.notes {
        eprintln!("note: {n}");
    }
    eprintln!(
        "pagebench merge: {} shards, {} attempts in {}{}",
        out.shards,
        out.attempts,
        out.out.display(),
        if out.complete { "" } else { " — incomplete" }
    );
    Ok(ExitCode::SUCCESS)
}
