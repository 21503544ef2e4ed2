//! `pagebench devices`: the devices, each with the slowdown it achieves on this machine now;
//! `--periods`: the quota period's effect.

use std::process::ExitCode;

use anyhow::Result;

use super::args::DevicesArgs;
use crate::bench::device_bench;
use crate::config::device::{self, Device};

pub fn devices(a: DevicesArgs) -> Result<ExitCode> {
    crate::support::signals::install();
    let listed = match &a.devices {
        Some(list) => device::parse_devices(list, None)?,
        None => Device::built_in(),
    };
    anyhow::ensure!(a.pairs >= 1, "--pairs {}: give 1 or more", a.pairs);
    let rows = device_bench::measure(&listed, a.pairs)?;
    let study = match &a.periods {
        Some(list) => {
            let periods = parse_periods(list)?;
            let slowdowns: Vec<f64> = listed
                .iter()
                .filter(|d| d.cap().is_some())
                .map(|d| d.slowdown)
                .collect();
            device_bench::periods(&slowdowns, &periods, a.pairs)?
        }
        None => Vec::new(),
    };
    if a.json {
        let out = serde_json::json!({ "devices": rows, "periods": study });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "each cap's achieved slowdown: a fixed native benchmark free and capped, side by side, \
         median of {} pairs (the browser's own: `pagebench report` of a matrix with --devices)",
        a.pairs
    );
    print!("{}", device_bench::table(&rows));
    if !study.is_empty() {
        println!("\nthe quota period's effect (the devices' caps at each period):");
        print!("{}", device_bench::period_table(&study));
    }
    Ok(ExitCode::SUCCESS)
}

/// `100,10,5` → periods in ms; the error names the flag.
fn parse_periods(list: &str) -> Result<Vec<f64>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches("ms")
                .parse::<f64>()
                .ok()
                .filter(|p| (1.0..=1000.0).contains(p))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "--periods: {s:?} is not a period in ms from 1 to 1000 (e.g. 100,10,5)"
                    )
                })
        })
        .collect()
}
