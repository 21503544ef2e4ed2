//! Chromium as a [`Browser`]: a fresh [`ChromiumProcess`] per launch, loads driven over its
//! DevTools pipe ([`load`]).

use std::borrow::Cow;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

pub mod cdp;
pub mod har;
pub mod launch;
pub mod load;
pub mod network;
pub mod repeat;

use crate::config::identity::BrowserId;
use crate::config::workload::WorkloadKind;
use crate::evidence::engine_tells::EngineTells;
use crate::evidence::metrics::Observation;
use crate::evidence::run_record::BrowserOverhead;
use crate::evidence::validate::LoadEnd;
use crate::evidence::visual::VisualSource;
use crate::measure::browser::sandbox::Confinement;
use crate::measure::browser::video::VirtualDisplay;
use crate::measure::browser::{Browser, ClientSide, Engine, LaunchOptions};
use launch::{ChromiumProcess, CHROMIUM};

/// Chromium's name in flags and files, the default engine.
pub const ID: BrowserId = BrowserId::new("chromium");

/// Chromium in the browser registry.
pub static ENGINE: Engine = Engine {
    id: ID,
    make,
    installed,
    cannot: |_| None,
    har: har::entries,
    tells: EngineTells {
        devtools: Cow::Borrowed(network::PROTOCOL),
        connections: true,
        priorities: true,
        body_chunks: true,
        cannot_measure: Cow::Borrowed(&[]),
        forced_h3: None,
        primed_h3: None,
        har_lacks: None,
    },
    // Chromium 156 reads HTTPS records over plain DNS and opens QUIC first (docs/dns.md).
    https_records_since: Some(156),
};

fn make() -> Box<dyn Browser + Send> {
    Box::new(Chromium::default())
}

/// Debian's Chromium as it names its version (`Chromium 156.0.8078.73 built on Debian …`), or
/// an error naming the fix.
pub fn installed() -> Result<String> {
    anyhow::ensure!(
        std::path::Path::new(CHROMIUM).exists(),
        "{CHROMIUM} not found: install Debian's chromium package (./setup.sh does)"
    );
    let out = std::process::Command::new(CHROMIUM)
        .arg("--version")
        .output()
        .with_context(|| format!("{CHROMIUM} --version"))?;
    anyhow::ensure!(
        out.status.success(),
        "{CHROMIUM} --version failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Debian's Chromium; one process between `launch` and `close`.
#[derive(Default)]
pub struct Chromium {
    running: Option<ChromiumProcess>,
    /// Keep the response bodies of the loads (the launch options say).
    keep_bodies: bool,
    /// Run before the page's own scripts in every document (the launch options say).
    init_script: Option<String>,
    /// How each load's screen is recorded (the launch options say): Chromium records only its
    /// screencast itself; video is the testbed's.
    visual: Option<crate::evidence::visual::VisualSource>,
    /// The virtual display its window is on (`--visual`, video), from launch to close.
    display: Option<VirtualDisplay>,
    /// The CPU the browser gets (the launch options say): DevTools throttling is set per load.
    device: crate::config::device::Device,
    /// Time the page's CPU benchmark after each load (the launch options say).
    cpu_benchmark: bool,
    /// The version the last launch reported (kept after close).
    version: Option<String>,
    /// How the last launch's processes ran (kept after close).
    confinement: Option<Confinement>,
}

impl Browser for Chromium {
    fn id(&self) -> BrowserId {
        ID
    }

    fn launch(&mut self, client: &dyn ClientSide, opts: &LaunchOptions) -> Result<()> {
        self.close();
        if opts.visual == Some(VisualSource::Video) {
            self.display = Some(VirtualDisplay::start(client).context("Chromium's display")?);
        }
        let display = self.display.as_ref().map(VirtualDisplay::name);
        let cmd = client.command(CHROMIUM);
        let launched = ChromiumProcess::launch(cmd, opts, display.as_deref()).and_then(|mut p| {
            crate::measure::browser::returning_visitor::first_view(&mut p, opts)?;
            Ok(p)
        });
        let launched = launched.and_then(|p| {
            // The recording's first frame is the blank page, not a first view's.
            if let Some(d) = &self.display {
                d.wait_until_white(crate::measure::browser::video::WHITE_WAIT)?;
            }
            Ok(p)
        });
        let process = launched.context("Chromium did not start")?;
        self.version = process.version.clone();
        self.confinement = process.confinement.clone();
        self.running = Some(process);
        self.keep_bodies = opts.keep_bodies;
        self.init_script = opts.init_script.clone();
        self.visual = opts.visual;
        self.device = opts.device.clone();
        self.cpu_benchmark = opts.cpu_benchmark;
        Ok(())
    }

    fn version(&self) -> Option<String> {
        self.version.clone()
    }

    fn confinement(&self) -> Option<Confinement> {
        self.confinement.clone()
    }

    fn process_group(&self) -> Option<i32> {
        self.running.as_ref().map(|p| p.pgid())
    }

    fn load(
        &mut self,
        url: &str,
        kind: &WorkloadKind,
        expected_resources: usize,
        timeout: Duration,
    ) -> Result<(Observation, LoadEnd)> {
        let process = self
            .running
            .as_mut()
            .ok_or_else(|| anyhow!("Chromium is not running: launch it first"))?;
        let first_view = process.first_view.clone();
        let (mut obs, end) = load::load(
            process,
            url,
            kind,
            expected_resources,
            timeout,
            load::LoadExtras {
                keep_bodies: self.keep_bodies,
                init_script: self.init_script.as_deref(),
                screencast: self.visual == Some(VisualSource::Screencast),
                display: self.display.as_ref(),
                cpu_throttle: self.device.devtools_rate(),
                cpu_benchmark: self.cpu_benchmark.then(|| self.device.cpu_share()),
            },
        )?;
        obs.first_view = first_view;
        Ok((obs, end))
    }

    fn close(&mut self) -> BrowserOverhead {
        let overhead = match self.running.take() {
            Some(mut process) => {
                process.close();
                process.overhead.clone()
            }
            None => BrowserOverhead::default(),
        };
        // The window is gone: now its display.
        self.display = None;
        overhead
    }
}
