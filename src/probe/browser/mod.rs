//! The measuring hand: one page load in a real browser, forced onto a protocol, observed
//! through its DevTools protocol. Two extension points: the [`Browser`] trait (what a run does
//! with a browser: launch, load, close) and the registry [`ENGINES`] (what pagebench knows of
//! each engine before it runs: its name, how to make one, whether it is installed, what it
//! cannot do, its HAR). Each engine lives in its own folder and turns its protocol's events
//! into the engine-neutral evidence (`metrics::Observation`: Resource Timing and paint entries,
//! a typed `NetworkView`; HAR entries): Chromium (CDP over a pipe) and Firefox (WebDriver BiDi
//! over a WebSocket). The run protocol (`testbed::measure`) drives them; [`make`] builds the
//! one a run names.

pub mod chromium;
#[cfg(test)]
pub mod fake;
pub mod firefox;
pub mod options;
pub mod prelaunch;
pub mod process;
pub mod repeat;
pub mod requests;
pub mod resolver;
pub mod rpc;
pub mod sandbox;
pub mod scripts;
pub mod video;

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use crate::config::identity::BrowserId;
use crate::config::workload::WorkloadKind;
use crate::probe::metrics::Observation;
use crate::probe::validate::LoadEnd;

pub use chromium::launch::{ChromiumProcess, CHROMIUM};
pub use chromium::Chromium;
pub use firefox::Firefox;
pub use options::{BrowserOverhead, LaunchOptions, HOST};

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
    /// Who the last launch's processes ran as and whether its sandbox was on (kept after
    /// close); None before a launch, or for a browser that is not a real engine (test fakes).
    fn confinement(&self) -> Option<sandbox::Confinement> {
        None
    }
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

/// One engine as the registry knows it: everything pagebench asks of an engine before and
/// after its runs (the runs themselves go through [`Browser`]).
pub struct Engine {
    /// Its name in flags and files.
    pub id: BrowserId,
    /// What its DevTools protocol, the network view's source, is called (`CDP`, `BiDi`).
    pub devtools: &'static str,
    /// A fresh browser of this engine (it may be launched on another thread: `prelaunch`).
    pub make: fn() -> Box<dyn Browser + Send>,
    /// Whether it is installed and recent enough: its version as `meta.json` records it, or an
    /// error naming the fix.
    pub installed: fn() -> Result<String>,
    /// What of a request it cannot do, in words that say why (None: it can do all of it).
    pub cannot: fn(&Asked) -> Option<&'static str>,
    /// The HAR entries of one of its loads (from the events its network view kept).
    pub har: fn(&Observation) -> Vec<crate::probe::har::Entry>,
    /// Its network view tells which connection carried each request.
    pub tells_connections: bool,
    /// What a run's `--har` file lacks with this engine, if anything.
    pub har_lacks: Option<&'static str>,
    /// How it reaches forced and primed HTTP/3, when that differs from Chromium's flags (the
    /// report's "HTTP/3 mode").
    pub forced_h3: Option<&'static str>,
    pub primed_h3: Option<&'static str>,
    /// The metrics (registry names) this engine has no way to measure, each with why: the
    /// report says so in their cells instead of leaving them empty.
    pub cannot_fill: &'static [Unfillable],
}

/// A metric an engine cannot measure, and why (an API it lacks).
pub struct Unfillable {
    pub metric: &'static str,
    pub why: &'static str,
}

impl Engine {
    /// Why this engine cannot measure `metric` (None: it can).
    pub fn cannot_fill(&self, metric: &str) -> Option<&'static str> {
        self.cannot_fill
            .iter()
            .find(|u| u.metric == metric)
            .map(|u| u.why)
    }
}

/// Every engine pagebench can drive, in the order reports list them.
pub static ENGINES: &[&Engine] = &[
    &chromium::ENGINE,
    &firefox::ENGINE,
    #[cfg(test)]
    &fake::ENGINE,
];

/// The registry's entry of `id`, or an error naming the engines there are.
pub fn engine(id: BrowserId) -> Result<&'static Engine> {
    ENGINES.iter().copied().find(|e| e.id == id).ok_or_else(|| {
        let names: Vec<&str> = ENGINES.iter().map(|e| e.id.name()).collect();
        anyhow::anyhow!("unknown browser {:?}: {}", id.name(), names.join(" or "))
    })
}

/// `chromium,firefox` → the engines, in the order given, each once.
pub fn parse_browsers(list: &str) -> Result<Vec<BrowserId>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let b = name
            .parse::<BrowserId>()
            .and_then(|b| engine(b).map(|e| e.id))
            .map_err(|e| anyhow::anyhow!("--browsers: {e}"))?;
        anyhow::ensure!(!out.contains(&b), "--browsers: {name} is listed twice");
        out.push(b);
    }
    let names: Vec<&str> = ENGINES.iter().map(|e| e.id.name()).collect();
    anyhow::ensure!(
        !out.is_empty(),
        "--browsers: give at least one of {}",
        names.join(", ")
    );
    Ok(out)
}

/// A fresh browser of engine `id` (it may be launched on another thread: `prelaunch`).
pub fn make(id: BrowserId) -> Result<Box<dyn Browser + Send>> {
    Ok((engine(id)?.make)())
}

/// What a run or matrix asks of its browsers beyond a load.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// A screencast of every load (`--visual`).
    pub visual: Option<crate::probe::visual::VisualSource>,
    pub capture: &'a crate::probe::capture::CaptureSet,
    /// The `as-recorded` arm of a replayed site.
    pub as_recorded: bool,
    /// Repeat views (`--views repeat`).
    pub repeat_view: bool,
    /// `h3-discovered`: the h3 a returning visitor learnt from the first view's Alt-Svc.
    pub discovered_h3: bool,
}

/// Refuses, before any run, an engine that is not installed or cannot do what is asked; the
/// error names the fix.
pub fn check_request(id: BrowserId, asked: &Asked) -> Result<()> {
    let e = engine(id)?;
    (e.installed)()?;
    match (e.cannot)(asked) {
        Some(what) => anyhow::bail!(
            "--browsers {id}: {what}; run it with --browsers {}",
            BrowserId::default()
        ),
        None => Ok(()),
    }
}

/// Each installed engine's version by its name, as `meta.json` records it.
pub fn installed_versions() -> std::collections::BTreeMap<String, String> {
    ENGINES
        .iter()
        .filter_map(|e| (e.installed)().ok().map(|v| (e.id.name().to_string(), v)))
        .collect()
}
