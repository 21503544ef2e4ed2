//! pagebench: is HTTP/1.1, HTTP/2 or HTTP/3 faster for this page on this network — and why?
//!
//! Real Chromium, a real packet-level link emulator between two network namespaces, and an
//! embedded h1/h2/h3 server. Pure cores (link model, metric derivation, statistics) with thin IO
//! shells around them; see `../shared/DESIGN.md` of the team for the architecture.

pub mod cli;
pub mod netem;
pub mod profile;
pub mod signals;
pub mod textfmt;
pub mod workload;

/// An error that means "this part of pagebench does not exist yet"; the CLI exits with 2.
#[derive(Debug, thiserror::Error)]
#[error("`pagebench {0}` is not built yet (see the open issues); nothing was run")]
pub struct NotBuilt(pub &'static str);
