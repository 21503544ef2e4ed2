//! pagebench: is HTTP/1.1, HTTP/2 or HTTP/3 faster for this page on this network — and why?
//!
//! Real browsers, a real packet-level link emulator between two network namespaces, and real
//! servers. The modules are layers in the order of the pipeline; a layer uses only the ones
//! below it (`tests/architecture` holds them to it), and `ARCHITECTURE.md` has the picture,
//! each module's job and the recipes:
//!
//! - [`cli`]: the command line and the jobs it composes (a matrix, a merge, compare);
//! - [`config`]: what to run (protocols, ids, profiles, workloads, sites, the plan);
//! - [`link`]: the emulated network;
//! - [`origin`]: the servers under test;
//! - [`probe`]: one measured load (browser, testbed, packets, metrics, validation, record);
//! - [`proof`]: what the runs prove (the results directory, statistics, diagnosis);
//! - [`report`]: the report, and compare's page;
//! - [`support`]: OS helpers and pure libraries every layer may use.

pub mod bench;
pub mod cli;
pub mod config;
pub mod diagnosis;
pub mod embedded_server;
pub mod evidence;
pub mod link;
pub mod matrix;
pub mod measure;
pub mod packets;
pub mod report;
pub mod results;
pub mod servers;
pub mod support;

/// An error that means "this part of pagebench does not exist yet"; the CLI exits with 2.
#[derive(Debug, thiserror::Error)]
#[error("`pagebench {0}` is not built yet (see the open issues); nothing was run")]
pub struct NotBuilt(pub &'static str);
