//! `pagebench diagnose DIR`: why transfers were slow, written beside the runs.

use std::process::ExitCode;

use anyhow::Result;

use super::args::DiagnoseArgs;

pub fn diagnose(a: DiagnoseArgs) -> Result<ExitCode> {
    let d = crate::diagnosis::slow_transfers::run(&a.dir)?;
    print!("{}", crate::diagnosis::slow_transfers::markdown(&d));
    println!(
        "wrote {} and {}",
        a.dir.join("diagnosis.md").display(),
        a.dir.join("diagnosis.json").display()
    );
    Ok(ExitCode::SUCCESS)
}
