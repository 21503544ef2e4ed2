//! `pagebench cleanup`: what killed pagebench processes left (namespaces, temporary
//! directories).

use std::process::ExitCode;

use anyhow::Result;

pub fn cleanup() -> Result<ExitCode> {
    let removed = crate::link::cleanup::remove_stale()?;
    if removed.is_empty() {
        println!("no stale pagebench namespaces");
    } else {
        for name in &removed {
            println!("removed {name}");
        }
    }
    for dir in crate::link::cleanup::remove_stale_temp_dirs() {
        println!("removed {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
