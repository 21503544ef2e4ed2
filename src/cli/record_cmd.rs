//! `pagebench record URL`: a real site recorded into a site archive.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use super::args::RecordArgs;

pub fn record(a: RecordArgs) -> Result<ExitCode> {
    let o = crate::measure::site_recorder::RecordOptions {
        url: a.url,
        out: a.out,
        wait: a.wait,
        network: crate::measure::browser::engines::chromium::launch::NaturalOptions {
            resolve: a.resolve,
            ignore_cert_errors: a.ignore_cert_errors,
            ignore_cert_spki: a.ignore_cert_spki,
            force_quic: a.force_quic,
            settle_max: Duration::from_secs(2),
        },
        timeout: a.timeout,
    };
    let (_, summary) = crate::measure::site_recorder::record(&o)?;
    print!("{}", summary.text_as("recorded", &o.out));
    Ok(ExitCode::SUCCESS)
}
