//! pagebench: is HTTP/1.1, HTTP/2 or HTTP/3 faster for this page on this network — and why?
//!
//! Real browsers, a real packet-level link emulator between two network namespaces, and real
//! servers. The modules are layers, from the top; a layer uses only the ones below it
//! (`tests/architecture` holds them to it), and `ARCHITECTURE.md` has the map, each module's
//! job and the recipes:
//!
//! - [`cli`]: the command line: the arguments, one thin module per command;
//! - [`report`]: what a reader sees (the answer first), and compare's page;
//! - [`bench`]: how precise and fast pagebench is on this machine;
//! - [`matrix`]: running a plan (retries, lanes, `--runs auto`, shards, merge, resume);
//! - [`diagnosis`]: why (slow transfers, where a difference comes from);
//! - [`results`]: a results directory and its statistics;
//! - [`measure`]: one measured load (browsers, testbed, the run protocol);
//! - [`evidence`]: what a run observed and what follows from it (metrics, validation, record);
//! - [`servers`]: the servers under test (contract, stacks, registry);
//! - [`embedded_server`]: pagebench's own h1/h2/h3 server;
//! - [`packets`]: the link's packets read back;
//! - [`link`]: the emulated network;
//! - [`config`]: what to run (protocols, ids, profiles, workloads, sites, the plan);
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
