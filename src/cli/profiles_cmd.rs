//! `pagebench profiles`: the network profiles as a table.

use std::process::ExitCode;

use anyhow::Result;

use super::args::ProfilesArgs;
use crate::{config::locations, config::profile};

pub fn profiles(a: ProfilesArgs) -> Result<ExitCode> {
    let source = locations::profile_source(a.profiles_dir.as_deref());
    let selected = profile::select_from(&a.profiles, &source)?;
    print!("{}", profile::table(&selected));
    Ok(ExitCode::SUCCESS)
}
