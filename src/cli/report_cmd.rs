//! `pagebench report DIR`: the report of a results directory (or its statistics on another
//! headline).

use std::process::ExitCode;

use anyhow::Result;

use super::args::ReportArgs;
use crate::report;

pub fn report(a: ReportArgs) -> Result<ExitCode> {
    let out = report::generate_as(&a.dir, a.metric)?;
    if out.summary_computed {
        println!(
            "computed {}",
            a.metric.out_dir(&a.dir).join("summary.json").display()
        );
    }
    for p in out.paths() {
        println!("wrote {}", p.display());
    }
    for w in &out.warnings {
        println!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}
