//! The measuring hand: one page load in a real browser, forced onto a protocol, observed
//! through its DevTools protocol. [`Browser`] is the extension point (Chromium now); the run
//! protocol (`testbed::measure`) drives it.

pub mod cdp;
pub mod chromium;
pub mod launch;
pub mod load;

use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use crate::identity::BrowserId;
use crate::metrics::Observation;
use crate::validate::LoadEnd;
use crate::workload::WorkloadKind;

pub use chromium::Chromium;
pub use launch::{BrowserOverhead, ChromiumProcess, LaunchOptions, CHROMIUM, HOST};

/// How a browser starts a program inside the client namespace.
pub type Spawn<'a> = &'a dyn Fn(&str) -> Command;

/// A browser that loads one page per launch: launched fresh (its own profile) for each run,
/// closed after it.
pub trait Browser {
    /// Which engine this is (what the run record names).
    fn id(&self) -> BrowserId;
    /// Starts the browser with `spawn` (which enters the client namespace) for one load with
    /// `opts`, and waits until it is ready and settled.
    fn launch(&mut self, spawn: Spawn, opts: &LaunchOptions) -> Result<()>;
    /// Loads `url` (a page of `kind` with `expected_resources` subresources) and returns what
    /// the browser observed and how the load ended. Errors only on a signal: every failure of
    /// the load itself is a [`LoadEnd`].
    fn load(
        &mut self,
        url: &str,
        kind: &WorkloadKind,
        expected_resources: usize,
        timeout: Duration,
    ) -> Result<(Observation, LoadEnd)>;
    /// Ends the browser (nothing of it left running) and returns the timings of its life.
    fn close(&mut self) -> BrowserOverhead;
}
