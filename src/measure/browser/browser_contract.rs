//! What a browser is to pagebench: the [`Browser`] trait (launch through a [`ClientSide`],
//! load, close), what a run asks of it beyond a load ([`Asked`], a repeat view's first
//! navigation), and an engine's entry in the registry ([`Engine`]). Each engine
//! (`engines/`) implements it; nothing here names an engine.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use crate::config::identity::BrowserId;
use crate::config::workload::WorkloadKind;
use crate::evidence::engine_tells::EngineTells;
use crate::evidence::metrics::Observation;
use crate::evidence::run_record::BrowserOverhead;
use crate::evidence::validate::LoadEnd;
use crate::measure::browser::launch_options::LaunchOptions;
use crate::measure::browser::sandbox;

/// The client's side of the link as a browser needs it: programs and sockets inside the
/// client namespace (where the browser runs, and where its DevTools port is visible).
pub trait ClientSide {
    /// A command that runs `program` inside the client namespace.
    fn command(&self, program: &str) -> Command;
    /// A TCP connection to `addr`, made from inside the client namespace.
    fn connect(&self, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream>;
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
    /// A fresh browser of this engine (it may be launched on another thread: `prelaunch`).
    pub make: fn() -> Box<dyn Browser + Send>,
    /// Whether it is installed and recent enough: its version as `meta.json` records it, or an
    /// error naming the fix.
    pub installed: fn() -> Result<String>,
    /// What of a request it cannot do, in words that say why (None: it can do all of it).
    pub cannot: fn(&Asked) -> Option<&'static str>,
    /// The HAR entries of one of its loads (from the events its network view kept).
    pub har: fn(&Observation) -> Vec<crate::evidence::har_document::Entry>,
    /// What it can tell of a run, as every record and `meta.json` keep it.
    pub tells: EngineTells,
    /// The oldest major version seen to open its first connection over h3 from an HTTPS
    /// record's `alpn` (`h3-dns`; docs/dns.md); None: it does not act on HTTPS records.
    pub https_records_since: Option<u32>,
}

/// What a run or matrix asks of its browsers beyond a load.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// A screencast of every load (`--visual`).
    pub visual: Option<crate::evidence::visual::VisualSource>,
    pub capture: &'a crate::packets::CaptureSet,
    /// The `as-recorded` arm of a replayed site.
    pub as_recorded: bool,
    /// Repeat views (`--views repeat`).
    pub repeat_view: bool,
    /// `h3-discovered`: the h3 a returning visitor learnt from the first view's Alt-Svc.
    pub discovered_h3: bool,
    /// `h3-dns`: the h3 a first visit learnt from an HTTPS record.
    pub dns_h3: bool,
    /// A `devtools-<N>x` device (`--cpu-throttle-devtools`): DevTools' CPU throttling.
    pub devtools_throttle: bool,
}
