//! `pagebench import FILE.har`: a HAR into a site archive.

use std::process::ExitCode;

use anyhow::Result;

use super::args::ImportArgs;

pub fn import(a: ImportArgs) -> Result<ExitCode> {
    let (_, summary) =
        crate::config::site_archive::har_import::import_file(&a.har, &a.out, a.strict)?;
    print!("{}", summary.text(&a.out));
    Ok(ExitCode::SUCCESS)
}
