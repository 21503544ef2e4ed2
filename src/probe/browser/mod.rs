//! The measuring hand: one page load in a real browser, forced onto a protocol, observed
//! through its DevTools protocol. [`Browser`] is the extension point: Chromium (CDP over a
//! pipe) and Firefox (WebDriver BiDi over a WebSocket); the run protocol (`testbed::measure`)
//! drives it, [`make`] builds the one a run names.

pub mod bidi;
pub mod cdp;
pub mod chromium;
pub mod firefox;
pub mod launch;
pub mod load;
pub mod prelaunch;
pub mod process;
pub mod repeat;
pub mod rpc;
pub mod scripts;

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use crate::config::identity::BrowserId;
use crate::config::workload::WorkloadKind;
use crate::probe::metrics::Observation;
use crate::probe::validate::LoadEnd;

pub use chromium::Chromium;
pub use firefox::Firefox;
pub use launch::{BrowserOverhead, ChromiumProcess, LaunchOptions, CHROMIUM};

/// The client's side of the link as a browser needs it: programs and sockets inside the
/// client namespace (where the browser runs, and where its DevTools port is visible).
pub trait ClientSide {
    /// A command that runs `program` inside the client namespace.
    fn command(&self, program: &str) -> Command;
    /// A TCP connection to `addr`, made from inside the client namespace.
    fn connect(&self, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream>;
}

/// What a repeat view does with the HTTP cache between its two navigations.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum RepeatCache {
    /// Cleared: the measured navigation fetches every file again (connections and TLS state
    /// are what it saves).
    #[default]
    Clear,
    /// Kept: what the first navigation cached is served from the cache.
    Keep,
}

/// A repeat view's first navigation, made during the launch (outside the measured window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatView {
    pub url: String,
    pub cache: RepeatCache,
}

/// The machine's own namespaces (`pagebench record`, tests on loopback).
pub struct HostSide;

impl ClientSide for HostSide {
    fn command(&self, program: &str) -> Command {
        Command::new(program)
    }

    fn connect(&self, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        TcpStream::connect_timeout(&addr, timeout)
    }
}

/// A browser that loads one page per launch: launched fresh (its own profile) for each run,
/// closed after it.
pub trait Browser {
    /// Which engine this is (what the run record names).
    fn id(&self) -> BrowserId;
    /// Starts the browser inside `client` for one load with `opts`, and waits until it is
    /// ready and settled.
    fn launch(&mut self, client: &dyn ClientSide, opts: &LaunchOptions) -> Result<()>;
    /// The engine's version (`Chromium 156.0.…`, `Firefox 153.8.0esr`), once launched.
    fn version(&self) -> Option<String>;
    /// The process group of the running browser (every process of the engine is in it), for
    /// the CPU a run costs it; None when it is not running.
    fn process_group(&self) -> Option<i32>;
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

/// A fresh browser of engine `id` (it may be launched on another thread: `prelaunch`).
pub fn make(id: BrowserId) -> Box<dyn Browser + Send> {
    match id {
        BrowserId::Chromium => Box::new(Chromium::default()),
        BrowserId::Firefox => Box::new(Firefox::default()),
    }
}

/// What a run or matrix asks of its browsers beyond a load.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// A screencast of every load (`--visual`).
    pub visual: bool,
    pub capture: &'a crate::probe::capture::CaptureSet,
    /// The `as-recorded` arm of a replayed site.
    pub as_recorded: bool,
    /// Repeat views (`--views repeat`).
    pub repeat_view: bool,
}

/// Refuses, before any run, an engine that is not installed or cannot do what is asked; the
/// error names the fix.
pub fn check_request(id: BrowserId, asked: &Asked) -> Result<()> {
    check_installed(id)?;
    if id == BrowserId::Firefox {
        let refuse = |what: &str| -> Result<()> {
            anyhow::bail!("--browsers firefox: {what}; run it with --browsers chromium")
        };
        if asked.visual {
            refuse("--visual needs Chromium's screencast (Firefox has none over WebDriver BiDi)")?;
        }
        if asked.capture.netlog().is_some() {
            refuse("--capture netlog is Chromium's NetLog (Firefox keeps none)")?;
        }
        if asked.as_recorded {
            refuse("the as-recorded arm forces single origins onto QUIC, which only Chromium's flags can")?;
        }
        if asked.repeat_view {
            refuse("a repeat view closes the browser's connections but keeps its TLS sessions, which only Chromium's --enable-net-benchmarking can (Firefox has no such call over BiDi)")?;
        }
    }
    Ok(())
}

/// Refuses, before any run, a replayed site engine `id` cannot load as planned (Firefox maps
/// every host to one address).
pub fn check_site(
    id: BrowserId,
    workload: &str,
    site: &crate::config::workload::site::SitePlan,
) -> Result<()> {
    match id {
        BrowserId::Chromium => Ok(()),
        BrowserId::Firefox => firefox::check_site(workload, site),
    }
}

/// Whether engine `id` is installed and recent enough; the error names the fix.
pub fn check_installed(id: BrowserId) -> Result<String> {
    match id {
        BrowserId::Chromium => {
            anyhow::ensure!(
                std::path::Path::new(CHROMIUM).exists(),
                "{CHROMIUM} not found: install Debian's chromium package (./setup.sh does)"
            );
            Ok("chromium".into())
        }
        BrowserId::Firefox => firefox::installed_version(),
    }
}
