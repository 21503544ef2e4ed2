//! pagebench: is HTTP/1.1, HTTP/2 or HTTP/3 faster for this page on this network — and why?
//!
//! Real Chromium, a real packet-level link emulator between two network namespaces, and an
//! embedded h1/h2/h3 server. Pure cores (link model, metric derivation, statistics) with thin IO
//! shells around them; `ARCHITECTURE.md` has the pipeline, each module's job and the recipes.

pub mod atomic;
pub mod baseline;
pub mod browser;
pub mod capacity;
pub mod capture;
pub mod cli;
pub mod contention;
pub mod diagnose;
pub mod disruption;
pub mod fault;
pub mod har;
pub mod identity;
pub mod locations;
pub mod machine_check;
pub mod matrix;
pub mod metrics;
pub mod netem;
pub mod plan;
pub mod procfs;
pub mod profile;
pub mod protocol;
pub mod record;
pub mod recording;
pub mod registry;
pub mod report;
pub mod results;
pub mod runner;
pub mod server;
pub mod servers;
pub mod signals;
pub mod site;
pub mod snmp;
pub mod stats;
pub mod sysinfo;
pub mod tempdir;
pub mod testbed;
pub mod textfmt;
pub mod validate;
pub mod visual;
pub mod workload;

/// An error that means "this part of pagebench does not exist yet"; the CLI exits with 2.
#[derive(Debug, thiserror::Error)]
#[error("`pagebench {0}` is not built yet (see the open issues); nothing was run")]
pub struct NotBuilt(pub &'static str);

#[cfg(test)]
mod architecture;
