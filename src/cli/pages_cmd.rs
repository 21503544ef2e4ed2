//! `pagebench pages`: (re)generate the workloads and list them.

use std::process::ExitCode;

use anyhow::Result;

use super::args::PagesArgs;
use crate::{config::locations, config::workload};

pub fn pages(a: PagesArgs) -> Result<ExitCode> {
    let names: Vec<String> = if a.workloads.is_empty() {
        workload::STANDARD_WORKLOADS
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.workloads
    };
    let root = locations::pages_root(a.pages.as_deref(), a.pages_seed)?;
    let mut manifests = Vec::new();
    for name in names {
        let w: workload::Workload = name.parse()?;
        manifests.push(workload::generate(&root, &w, a.pages_seed)?);
    }
    print!("{}", workload::listing(&manifests));
    println!(
        "(generated under {}, seed {})",
        root.display(),
        a.pages_seed
    );
    Ok(ExitCode::SUCCESS)
}
