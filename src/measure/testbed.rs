//! The testbed of a run or a matrix: the emulated link (client and server namespaces), the
//! certificate, and the servers under test running in the server namespace — the embedded
//! server and/or reference servers, each on its own port so they can be interleaved.
//!
//! The testbed owns the run protocol ([`measure`]): launch the browser, mark the server and the
//! link, load, take the link's counters, close the browser, collect the server's evidence. What
//! comes out ([`RunParts`]) is judged and assembled into a record elsewhere (`runner`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::config::capacity::TraceStart;
use crate::config::identity::{BrowserId, ServerId};
use crate::config::name_lookup::DnsMode;
use crate::config::profile::Profile;
use crate::config::protocol::{H3Mode, Variant};
use crate::config::site_archive::replay::{deterministic_script, Replay, ReplaySite};
use crate::config::workload::site_plan::SitePlan;
use crate::config::workload::Manifest;
use crate::config::workload::PAGE_HOST as HOST;
use crate::embedded_server::dns::Lookup;
use crate::embedded_server::{Certificate, ServerKnobs};
use crate::evidence::metrics::Observation;
use crate::evidence::run_record::BrowserOverhead;
use crate::evidence::validate::LoadEnd;
use crate::link::nat::PortMap;
use crate::link::{Link, LinkOptions, LinkStats, PacketTrace, Tap};
use crate::measure::browser::prelaunch::{self, Prelaunch, Ready};
use crate::measure::browser::sandbox::Confinement;
use crate::measure::browser::{Browser, ClientSide, LaunchOptions};
use crate::measure::fault::{self, FaultInjection};
use crate::packets::{CaptureKind, CaptureParts, CaptureSet};
use crate::servers::{
    NamespaceTcp, ServerDescription, ServerEvidence, ServerUnderTest, StartContext,
};
use crate::support::contention::{Contention, Snapshot, Tasks};
use crate::support::procfs::{self, CpuTicks};
use crate::support::signals;
use crate::support::snmp;
use crate::support::sysinfo::{cpu_times, sample_between, MachineSample};
use crate::support::tempdir::{self, TempDir};

use dns_side::TestbedResolver;

pub use crate::servers::server_view::transport_summary;
pub use crate::servers::{parse_servers, ServerChoice};

/// The port a replayed site's origins are served on, as its pages name them (whichever port
/// the server of the run listens on: the link maps it).
const SITE_PORT: u16 = 443;

/// The first server listens on 443, the next on 8443, 9443…
fn port_for(index: usize) -> u16 {
    match index {
        0 => 443,
        n => 7443 + 1000 * n as u16,
    }
}

/// What the testbed needs to start.
#[derive(Debug, Clone)]
pub struct TestbedConfig {
    pub profile: Profile,
    pub servers: Vec<ServerChoice>,
    pub knobs: ServerKnobs,
    pub pages_root: PathBuf,
    pub seed: u64,
    /// The embedded server's JSON-lines request log (optional).
    pub log_dir: Option<PathBuf>,
    /// See [`LinkOptions::steer_receive`] (on by default; off only to compare).
    pub steer_receive: bool,
    /// Server addresses beyond the namespace's own, for replayed sites' origins (the most any
    /// site workload of the plan needs, less one).
    pub extra_server_addresses: usize,
    /// How the browsers find their hosts (`--dns`).
    pub dns: DnsMode,
    /// The replayed sites' hosts, which the certificate names too.
    pub site_hosts: Vec<String>,
    /// The replayed sites' ports other than 443 (origins on another port, 80 for `http://`
    /// ones), which the embedded server listens on too.
    pub site_ports: Vec<u16>,
}

impl TestbedConfig {
    /// The extra server addresses the site workloads among `manifests` need.
    pub fn extra_addresses_for<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> usize {
        manifests
            .into_iter()
            .filter_map(|m| m.site.as_ref())
            .map(|s| s.addresses.saturating_sub(1))
            .max()
            .unwrap_or(0)
    }

    /// Every host of the site workloads among `manifests`, once.
    pub fn hosts_for<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> Vec<String> {
        let mut hosts: Vec<String> = manifests
            .into_iter()
            .filter_map(|m| m.site.as_ref())
            .flat_map(|s| s.origins.iter().map(|o| o.host.to_ascii_lowercase()))
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// Every port but 443 of the site workloads among `manifests`, once.
    pub fn ports_for<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> Vec<u16> {
        let mut ports: Vec<u16> = manifests
            .into_iter()
            .filter_map(|m| m.site.as_ref())
            .flat_map(|s| s.ports())
            .filter(|p| *p != SITE_PORT)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Refuses a site port that a server of the plan listens on itself (the first on 443, the
    /// next on 8443, 9443…): both would answer it.
    fn check_site_ports(&self) -> Result<()> {
        for (i, s) in self.servers.iter().enumerate().skip(1) {
            if self.site_ports.contains(&port_for(i)) {
                bail!(
                    "a replayed site has an origin on port {}, which server {} of --servers listens on: put {} first in --servers, or replay the site in a matrix of its own",
                    port_for(i),
                    s.name(),
                    s.name()
                );
            }
        }
        Ok(())
    }
}

/// The link, the certificate and the running servers.
pub struct Testbed {
    /// The runs' browsers (one may be launching for the next run); ended first on drop.
    browsers: Launcher,
    servers: Vec<Box<dyn ServerUnderTest>>,
    /// Site archives loaded for replay, by directory (loaded once, served by every run).
    sites: BTreeMap<PathBuf, Arc<ReplaySite>>,
    cert: Certificate,
    /// `--dns resolver`'s resolver (stopped before the link goes).
    resolver: Option<TestbedResolver>,
    /// The certificate and the reference servers' files; removed on drop (after the servers).
    work: TempDir,
    // Dropped last: servers must stop before their namespace goes.
    link: Link,
}

/// Makes the knob's TCP congestion control the namespaces' default, so that reference servers
/// (which do not set it per socket) use it too. Best effort: a child namespace may only default
/// to algorithms in the host's tcp_allowed_congestion_control.
fn namespace_tcp(link: &Link, knobs: &ServerKnobs) -> Result<NamespaceTcp> {
    let mut note = None;
    if let Some(cc) = knobs.tcp_congestion {
        for ns in [link.server(), link.client()] {
            let set = ns.run(move || procfs::set_tcp_congestion_default(cc.kernel_name()))?;
            if let Err(e) = set {
                note = Some(format!(
                    "could not make {} the namespace default ({e}; the host allows only: {}): reference servers use the namespace default",
                    cc.kernel_name(),
                    procfs::tcp_congestion_allowed().unwrap_or_default()
                ));
            }
        }
    }
    let congestion = link
        .server()
        .run(|| procfs::tcp_congestion_default().unwrap_or_default())?;
    Ok(NamespaceTcp { congestion, note })
}

impl Testbed {
    pub fn start(cfg: &TestbedConfig) -> Result<Testbed> {
        cfg.check_site_ports()?;
        // The resolver's address comes after every origin's.
        let resolver_index = (!cfg.dns.is_none()).then_some(cfg.extra_server_addresses + 1);
        let link = Link::new(
            &resolver_index.map_or(cfg.profile.clone(), |i| {
                dns_side::link_profile(&cfg.profile, i)
            }),
            LinkOptions {
                seed: cfg.seed,
                realtime: true,
                steer_receive: cfg.steer_receive,
                extra_server_addresses: cfg.extra_server_addresses
                    + usize::from(resolver_index.is_some()),
                ..LinkOptions::default()
            },
        )?;
        let resolver = match resolver_index {
            Some(i) => {
                let ip = IpAddr::V4(link.server_ips()[i]);
                Some(TestbedResolver::start(link.server(), ip, i)?)
            }
            None => None,
        };
        // Several addresses: the servers listen on all of them (the namespace has no others).
        let listen = if cfg.extra_server_addresses > 0 {
            IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(link.server_ip())
        };
        let ns_tcp = namespace_tcp(&link, &cfg.knobs)?;
        let work = tempdir::create("testbed")?;
        let mut cert = Certificate::generate_for(&cfg.site_hosts)?;
        cert.write_pem(&work.path().join("cert"))?;
        // A plan of site archives only generates nothing: its pages root may not exist yet.
        std::fs::create_dir_all(&cfg.pages_root).with_context(|| {
            format!("cannot create the pages root {}", cfg.pages_root.display())
        })?;
        let root = std::fs::canonicalize(&cfg.pages_root)
            .with_context(|| format!("pages root {}", cfg.pages_root.display()))?;
        let mut tb = Testbed {
            browsers: Launcher {
                // PAGEBENCH_PRELAUNCH=0: every browser at its run's start, as before (to compare).
                client: (std::env::var("PAGEBENCH_PRELAUNCH").as_deref() != Ok("0"))
                    .then(|| {
                        link.client()
                            .handle()
                            .map_err(|e| tracing::warn!("no browser will be launched ahead: {e:#}"))
                            .ok()
                    })
                    .flatten(),
                ..Launcher::default()
            },
            servers: Vec::new(),
            sites: BTreeMap::new(),
            cert,
            resolver,
            work,
            link,
        };
        for (i, choice) in cfg.servers.iter().enumerate() {
            let ctx = StartContext {
                ns: tb.link.server(),
                ip: listen,
                port: port_for(i),
                root: &root,
                cert: &tb.cert,
                knobs: &cfg.knobs,
                work: tb.work.path().join(choice.name().as_str()),
                log_dir: cfg.log_dir.as_deref(),
                namespace_tcp: &ns_tcp,
                site_ports: &cfg.site_ports,
            };
            let server = choice.start(&ctx)?;
            tb.servers.push(server);
        }
        Ok(tb)
    }

    /// What makes this testbed unusable for further runs, if anything: a stopped emulator or a
    /// server that exited. The matrix then builds a new one.
    pub fn broken(&mut self) -> Option<String> {
        if !self.link.is_running() {
            return Some("the link emulator stopped".into());
        }
        self.servers
            .iter_mut()
            .find_map(|s| s.exited().map(|why| format!("server {}: {why}", s.name())))
    }

    /// Switches the link to `profile` for the runs that follow.
    pub fn set_profile(&self, profile: &Profile) -> Result<()> {
        match &self.resolver {
            Some(r) => self.link.set_profile(&r.link_profile(profile)),
            None => self.link.set_profile(profile),
        }
    }

    /// The running server called `name`.
    pub fn server(&self, name: &ServerId) -> Option<&dyn ServerUnderTest> {
        self.servers
            .iter()
            .find(|s| s.name() == *name)
            .map(|s| s.as_ref())
    }

    /// The servers' descriptions by name, for the metadata.
    pub fn describe(&self) -> BTreeMap<ServerId, ServerDescription> {
        self.servers
            .iter()
            .map(|s| (s.name(), s.describe()))
            .collect()
    }

    pub fn spki(&self) -> &str {
        self.cert.spki_sha256_base64()
    }

    pub fn work_dir(&self) -> &Path {
        self.work.path()
    }

    /// The site of `plan`, loaded for replay (once per testbed).
    fn replay_site(&mut self, plan: &SitePlan) -> Result<Arc<ReplaySite>> {
        if let Some(s) = self.sites.get(&plan.dir) {
            return Ok(s.clone());
        }
        let archive = crate::config::site_archive::read(&plan.dir)?;
        let site = Arc::new(ReplaySite::load(&plan.dir, &archive, plan.options.think)?);
        self.sites.insert(plan.dir.clone(), site.clone());
        Ok(site)
    }

    /// The load expected after the next one [`Testbed::run`] makes (None: none, or not known):
    /// its browser is launched once that run's measured window is over. A run that turns out
    /// to need another browser launches its own (and ends the one launched ahead).
    pub fn expect_next(&mut self, next: Option<&LoadRequest>) {
        self.browsers.next = next.and_then(|req| {
            // A repeat view's launch navigates to the server: never during another run's
            // collection, whose server evidence it would join.
            if req.repeat.is_some() {
                return None;
            }
            let server = self.servers.iter().find(|s| s.name() == *req.server)?;
            let resolver = self.resolver.as_ref().map(TestbedResolver::ip);
            launch_options(&self.link, server.port(), &self.cert, req, resolver)
                .ok()
                .map(|(_, opts)| (req.browser, opts))
        });
    }

    /// Runs the protocol of one load on server `req.server` in a fresh browser of
    /// `req.browser` (see [`measure`]).
    pub fn run(&mut self, req: &LoadRequest) -> Result<RunParts> {
        let replay = match &req.manifest.site {
            Some(plan) => Some(Replay {
                site: self.replay_site(plan)?,
                as_recorded: req.variant.as_recorded.then(|| {
                    Arc::new(
                        plan.recorded_protocols()
                            .into_iter()
                            .map(|(h, p)| (h.to_ascii_lowercase(), p))
                            .collect(),
                    )
                }),
            }),
            None => None,
        };
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.name() == *req.server)
            .ok_or_else(|| anyhow::anyhow!("server {} is not running", req.server))?;
        // A replayed site's pages name port 443; a server of another arm listens on its own.
        let map = (replay.is_some() && server.port() != SITE_PORT).then(|| PortMap {
            public: SITE_PORT,
            server: server.port(),
        });
        self.link.map_port(map)?;
        server.replay(replay)?;
        let resolver = match &self.resolver {
            Some(r) => {
                let (_, opts) = launch_options(&self.link, server.port(), &self.cert, req, None)?;
                let holds = req
                    .manifest
                    .site
                    .as_ref()
                    .map_or(Vec::new(), |site| site.lookup_holds(&self.link.profile()));
                r.prepare(&opts, &holds)?;
                Some(r.ip())
            }
            None => None,
        };
        let mut parts = measure(
            &self.link,
            server.as_mut(),
            &mut self.browsers,
            &self.cert,
            req,
            resolver,
        )?;
        if let Some(r) = &self.resolver {
            parts.lookups = r.lookups();
        }
        Ok(parts)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // A browser launched ahead ends before anything it could use goes.
        self.browsers.pending = None;
        // Servers stop before their files go (`work` drops after this) and before the link.
        self.servers.clear();
    }
}

/// The URL of a workload's page on a server port.
pub fn page_url(port: u16, manifest: &Manifest) -> String {
    if port == 443 {
        format!("https://{HOST}{}", manifest.entry)
    } else {
        format!("https://{HOST}:{port}{}", manifest.entry)
    }
}

/// One load, as the testbed runs it.
pub struct LoadRequest<'a> {
    pub server: &'a ServerId,
    /// The engine that loads the page (a fresh browser).
    pub browser: BrowserId,
    pub variant: Variant,
    pub manifest: &'a Manifest,
    pub timeout: Duration,
    pub settle_max: Duration,
    /// A fault to inject into the load (test hook).
    pub fault: Option<&'a FaultInjection>,
    /// Keep the response bodies (`run --har`).
    pub keep_bodies: bool,
    /// Record a screencast of the load (`--visual`).
    pub visual: Option<crate::evidence::visual::VisualSource>,
    /// What the run keeps beside its record (`--capture`); the packets are always tapped for
    /// the head-of-line analysis.
    pub capture: &'a CaptureSet,
    /// Tap the link's packets (off only in `bench tap`'s control arm).
    pub packet_tap: bool,
    /// A repeat view (with what it does to the HTTP cache): a first navigation of the same
    /// page in the same browser during the launch; None: a first visit.
    pub repeat: Option<crate::config::identity::RepeatCache>,
    /// The CPU the whole browser gets.
    pub device: &'a crate::config::device::Device,
    /// Time the JavaScript CPU benchmark in the page after the load.
    pub cpu_benchmark: bool,
    /// Where a capacity trace starts at the mark.
    pub trace_start: TraceStart,
    /// The seed of every random draw of the link from the mark on (None: the link's stream
    /// goes on from the run before).
    pub draws: Option<u64>,
}

/// What one run produced, before it is judged: the browser's observation, the server's and
/// the link's evidence, the browser's overhead and the machine's state.
#[derive(Debug)]
pub struct RunParts {
    pub started_at: String,
    pub url: String,
    pub observation: Observation,
    pub end: LoadEnd,
    /// The engine that loaded the page, and its version (None: it never started).
    pub browser: BrowserId,
    pub browser_version: Option<String>,
    /// Who the browser's processes ran as and whether its sandbox was on (None: never started).
    pub browser_confinement: Option<Confinement>,
    pub overhead: BrowserOverhead,
    pub server: ServerEvidence,
    /// Why the server stopped during the run, if it did.
    pub server_exit: Option<String>,
    /// The link's counters over the load (an error: they could not be read, the emulator
    /// stopped).
    pub link_stats: Result<LinkStats>,
    /// UDP/TCP counters of the client and the server namespace, before and after the load.
    pub counters_before: (snmp::Counters, snmp::Counters),
    pub counters_after: (snmp::Counters, snmp::Counters),
    pub machine: MachineSample,
    /// Each side's CPU time and run-queue wait, and everything else's CPU time, from the mark
    /// to the end of the load.
    pub contention: Contention,
    /// Whole run, launch to collection, ms.
    pub wall_ms: f64,
    /// Packets, keys, NetLog and qlogs of the load.
    pub capture: CaptureParts,
    /// What the browser asked the resolver (`--dns resolver`), in order.
    pub lookups: Vec<Lookup>,
}

/// The link as the run protocol uses it: the emulated link, or a fake in the tests.
pub trait LinkSide {
    fn server_ip(&self) -> IpAddr;
    /// Every address of the server namespace, its own first.
    fn server_ips(&self) -> Vec<IpAddr> {
        vec![self.server_ip()]
    }
    /// Programs and sockets inside the client namespace (where the browser runs).
    fn client(&self) -> &dyn ClientSide;
    /// The counters since the last take (and resets them).
    fn take_stats(&self) -> Result<LinkStats>;
    /// Starts the link's events (outages, NAT rebinding, a trace's position) now: the run's
    /// mark.
    fn start_timeline(&self, trace_start: TraceStart, draws: Option<u64>);
    /// UDP/TCP counters of the client and the server namespace (empty where a namespace
    /// cannot be entered any more).
    fn namespace_counters(&self) -> (snmp::Counters, snmp::Counters);
    /// Arms `f` against the emulator or the server's process group.
    fn arm_fault(&self, f: &FaultInjection, server_group: Option<i32>) -> Option<fault::Armed>;
    /// The emulator's threads (none for a link without one).
    fn emulator_tasks(&self) -> Vec<Tasks> {
        Vec::new()
    }
    /// Starts handing every packet to a tap (None: this link cannot).
    fn start_tap(&self) -> Option<Tap> {
        None
    }
    /// Stops the tap and returns its packets.
    fn finish_tap(&self, _tap: Tap) -> Result<PacketTrace> {
        anyhow::bail!("this link has no tap")
    }
}

impl ClientSide for Link {
    fn command(&self, program: &str) -> Command {
        Link::client(self).command(program)
    }

    fn connect(
        &self,
        addr: std::net::SocketAddr,
        timeout: Duration,
    ) -> std::io::Result<std::net::TcpStream> {
        // The socket belongs for life to the namespace of the thread that made it.
        Link::client(self)
            .run(|| std::net::TcpStream::connect_timeout(&addr, timeout))
            .map_err(std::io::Error::other)?
    }
}

impl LinkSide for Link {
    fn emulator_tasks(&self) -> Vec<Tasks> {
        vec![Tasks::Threads {
            pid: std::process::id() as i32,
            tids: vec![self.emulator_thread()],
        }]
    }

    fn server_ip(&self) -> IpAddr {
        IpAddr::V4(Link::server_ip(self))
    }

    fn server_ips(&self) -> Vec<IpAddr> {
        Link::server_ips(self)
            .iter()
            .map(|a| IpAddr::V4(*a))
            .collect()
    }

    fn client(&self) -> &dyn ClientSide {
        self
    }

    fn take_stats(&self) -> Result<LinkStats> {
        Link::take_stats(self)
    }

    fn start_timeline(&self, trace_start: TraceStart, draws: Option<u64>) {
        // A link that cannot start it has stopped: the run's link gate says so.
        if let Err(e) = Link::start_run(self, trace_start, draws) {
            tracing::warn!("cannot start the link's timeline: {e:#}");
        }
    }

    fn namespace_counters(&self) -> (snmp::Counters, snmp::Counters) {
        let read = || procfs::thread_snmp().unwrap_or_default();
        let c = self.client().run(read).unwrap_or_default();
        let s = self.server().run(read).unwrap_or_default();
        (c, s)
    }

    fn arm_fault(&self, f: &FaultInjection, server_group: Option<i32>) -> Option<fault::Armed> {
        let emulator = match self.fault_handle() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("cannot inject {f:?}: {e:#}");
                return None;
            }
        };
        Some(fault::Armed::arm(
            f,
            fault::Targets {
                emulator,
                server_group,
            },
        ))
    }

    fn start_tap(&self) -> Option<Tap> {
        Link::start_tap(self)
            .map_err(|e| tracing::warn!("cannot tap the link: {e:#}"))
            .ok()
    }

    fn finish_tap(&self, tap: Tap) -> Result<PacketTrace> {
        Link::finish_tap(self, tap)
    }
}

/// Where a run's browser comes from: the testbed launches it at the run's start, or hands over
/// the one it started during the previous run's teardown (a fake in the tests).
pub trait BrowserSource {
    /// A fresh browser of engine `id`, launched with `opts` inside `client` (its files' paths
    /// are its own: see [`Ready`]). Errors only when none can be made at all.
    fn acquire(
        &mut self,
        id: BrowserId,
        client: &dyn ClientSide,
        opts: &LaunchOptions,
    ) -> Result<Ready>;
    /// The run's measured window is over (the link's counters taken): from here on the next
    /// run's browser may start.
    fn window_closed(&mut self) {}
}

/// Launches every browser at its run's start.
pub struct LaunchEach;

impl BrowserSource for LaunchEach {
    fn acquire(
        &mut self,
        id: BrowserId,
        client: &dyn ClientSide,
        opts: &LaunchOptions,
    ) -> Result<Ready> {
        prelaunch::launch_now(crate::measure::browser::make(id)?, client, opts)
    }
}

/// The testbed's browsers: each launched at its run's start, or — when the matrix said which
/// run comes next ([`Testbed::expect_next`]) — launched right after the previous run's
/// measured window, during its teardown, collection and disk writes.
#[derive(Default)]
struct Launcher {
    /// The client namespace, for launches on another thread.
    client: Option<crate::link::netns::NamespaceHandle>,
    /// The browser the next run will want, if known.
    next: Option<(BrowserId, LaunchOptions)>,
    pending: Option<Prelaunch>,
}

impl BrowserSource for Launcher {
    fn acquire(
        &mut self,
        id: BrowserId,
        client: &dyn ClientSide,
        opts: &LaunchOptions,
    ) -> Result<Ready> {
        if let Some(p) = self.pending.take() {
            if p.fits(id, opts) {
                return Ok(p.join());
            }
            // Launched for a run that did not come (a retry came first, or a cell stopped):
            // ended here, on this run's time.
            drop(p);
        }
        prelaunch::launch_now(crate::measure::browser::make(id)?, client, opts)
    }

    fn window_closed(&mut self) {
        let Some((id, opts)) = self.next.take() else {
            return;
        };
        let Some(client) = self.client.as_ref().and_then(|c| {
            c.duplicate()
                .map_err(|e| tracing::warn!("cannot launch the next browser ahead: {e:#}"))
                .ok()
        }) else {
            return;
        };
        let started = crate::measure::browser::engine(id)
            .and_then(|e| Prelaunch::start(e, (e.make)(), Box::new(client), &opts));
        match started {
            Ok(p) => self.pending = Some(p),
            Err(e) => tracing::warn!("cannot launch the next browser ahead: {e:#}"),
        }
    }
}

impl ClientSide for crate::link::netns::NamespaceHandle {
    fn command(&self, program: &str) -> Command {
        crate::link::netns::NamespaceHandle::command(self, program)
    }

    fn connect(
        &self,
        addr: std::net::SocketAddr,
        timeout: Duration,
    ) -> std::io::Result<std::net::TcpStream> {
        // The socket belongs for life to the namespace of the thread that made it.
        self.run(|| std::net::TcpStream::connect_timeout(&addr, timeout))
            .map_err(std::io::Error::other)?
    }
}

/// Where the page of `req` is and how its browser is launched (its files' paths left for
/// [`BrowserSource::acquire`]).
fn launch_options(
    link: &dyn LinkSide,
    port: u16,
    cert: &Certificate,
    req: &LoadRequest,
    resolver: Option<IpAddr>,
) -> Result<(String, LaunchOptions)> {
    let port = if req.manifest.site.is_some() {
        SITE_PORT
    } else {
        port
    };
    let (url, hosts, init_script) = match &req.manifest.site {
        Some(site) => {
            let ips = link.server_ips();
            let mut hosts = Vec::new();
            for o in &site.origins {
                let ip = ips.get(o.address).copied().with_context(|| {
                    format!(
                        "origin {} needs server address {} of {}",
                        o.origin,
                        o.address + 1,
                        ips.len()
                    )
                })?;
                // One rule per host, though it may have origins on several ports.
                if !hosts.iter().any(|(h, _): &(String, IpAddr)| *h == o.host) {
                    hosts.push((o.host.clone(), ip));
                }
            }
            let script = site
                .options
                .deterministic
                .then(|| deterministic_script(site.recorded_start_ms));
            (site.page_url.clone(), hosts, script)
        }
        None => (page_url(port, req.manifest), Vec::new(), None),
    };
    let opts = LaunchOptions {
        protocol: req.variant.protocol,
        h3_mode: req.variant.h3_mode.unwrap_or(H3Mode::Forced),
        server_ip: link.server_ip(),
        port,
        spki: cert.spki_sha256_base64().to_string(),
        cert_pem: cert.cert_pem().to_string(),
        key_log: None,
        net_log: req
            .capture
            .netlog()
            .map(|mode| (std::path::PathBuf::new(), mode)),
        settle_max: req.settle_max,
        extra_args: Vec::new(),
        keep_bodies: req.keep_bodies,
        visual: req.visual,
        hosts,
        init_script,
        repeat: req.repeat.map(|cache| crate::measure::browser::RepeatView {
            url: url.clone(),
            cache,
        }),
        as_recorded: match &req.manifest.site {
            Some(site) if req.variant.as_recorded => site.recorded_protocols(),
            _ => Vec::new(),
        },
        tls_origins: req
            .manifest
            .site
            .as_ref()
            .map(|s| s.tls_origins())
            .unwrap_or_default(),
        resolver,
        device: req.device.clone(),
        cpu_benchmark: req.cpu_benchmark,
    };
    Ok((url, opts))
}

/// The CPUs this process may run on.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The run protocol: get the run's browser (a fresh one, launched and settled), then mark the
/// server and the link so that only the load is measured, load, end the link's interval with
/// the load (and read the kernel's counters and the machine's), let the next run's browser
/// start, close this one, collect the server's evidence. Errors only on a signal; every
/// failure of the browser is a [`LoadEnd`].
pub fn measure(
    link: &dyn LinkSide,
    server: &mut dyn ServerUnderTest,
    browsers: &mut dyn BrowserSource,
    cert: &Certificate,
    req: &LoadRequest,
    resolver: Option<IpAddr>,
) -> Result<RunParts> {
    let wall = Instant::now();
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let port = server.port();
    let (url, opts) = launch_options(link, port, cert, req, resolver)?;
    let problems = ask_for_qlog(server, req);

    // The browser writes its TLS secrets (always: the head-of-line analysis decrypts QUIC with
    // them) and, if asked, Chromium its NetLog into its files; they are read after it closed.
    let mut ready = browsers.acquire(req.browser, link.client(), &opts)?;
    let launched = std::mem::replace(&mut ready.launched, Ok(()));
    let browser = ready.browser.as_mut();
    // Measure only the load: counters start after the browser settled, and the profile's
    // events count from here.
    let window = Window::open(link, server, browser, req);
    let (observation, end, mut overhead, measured) = match launched {
        Ok(()) => load_and_close(link, browsers, browser, window, &url, req)?,
        Err(e) => (
            Observation::default(),
            LoadEnd::Crashed(format!("{e:#}")),
            BrowserOverhead::default(),
            window.end_without_load(link),
        ),
    };
    overhead.wait_ms = ready.wait_ms;
    overhead.prelaunched = ready.prelaunched;
    let server_exit = server.exited();
    let mut evidence = server.collect();
    let capture = capture_parts(req, &ready, &mut evidence, measured.trace, problems);
    Ok(RunParts {
        started_at,
        url,
        observation,
        end,
        browser: ready.browser.id(),
        browser_version: ready.browser.version(),
        browser_confinement: ready.browser.confinement(),
        overhead,
        server: evidence,
        server_exit,
        link_stats: measured.link_stats,
        counters_before: measured.start.namespaces,
        counters_after: measured.end.namespaces,
        machine: sample_between(&measured.start.cpu, &measured.end.cpu),
        contention: Contention::between(&measured.start.threads, &measured.end.threads, cpus()),
        wall_ms: wall.elapsed().as_secs_f64() * 1e3,
        capture,
        lookups: Vec::new(),
    })
}

/// Asks the server for a qlog when the run's capture wants one. A server that keeps none
/// pagebench can collect is a problem of the capture (returned), not of the run.
fn ask_for_qlog(server: &mut dyn ServerUnderTest, req: &LoadRequest) -> Vec<String> {
    let qlog_asked = req.capture.has(CaptureKind::Qlog);
    let mut problems = Vec::new();
    if !server.set_qlog(qlog_asked) && qlog_asked {
        problems.push(format!(
            "server {} keeps no qlog pagebench can collect: only the embedded server's QUIC connections have one",
            server.name()
        ));
    }
    problems
}

/// Loads the page in the launched browser, ends the measured window with the load, lets the
/// next run's browser start and closes this one. Errors only on a signal; a load that failed
/// otherwise is a crashed one.
fn load_and_close(
    link: &dyn LinkSide,
    browsers: &mut dyn BrowserSource,
    browser: &mut dyn Browser,
    window: Window,
    url: &str,
    req: &LoadRequest,
) -> Result<(Observation, LoadEnd, BrowserOverhead, Measured)> {
    let kind = &req.manifest.workload.kind;
    let loaded = browser.load(url, kind, req.manifest.files.len(), req.timeout);
    // The link's interval ends with the load: the browser's teardown (its closing packets,
    // the kernel's work of ending a large process) is not the measured run, nor is the next
    // run's browser starting.
    let measured = window.end_with_load(link);
    browsers.window_closed();
    let overhead = browser.close();
    let (observation, end) = match loaded {
        Ok(x) => x,
        Err(e) => {
            if signals::interrupted() {
                return Err(e);
            }
            (Observation::default(), LoadEnd::Crashed(format!("{e:#}")))
        }
    };
    Ok((observation, end, overhead, measured))
}

/// The measured window, open from the mark: the readings its end is compared with, the
/// link's packet tap and the armed fault.
struct Window {
    sides: crate::support::contention::Sides,
    start: Readings,
    tap: Option<Tap>,
    armed: Option<fault::Armed>,
}

/// The machine's CPU times, the run's threads' and the namespaces' counters at one moment.
struct Readings {
    cpu: CpuTicks,
    threads: Snapshot,
    namespaces: (snmp::Counters, snmp::Counters),
}

/// What the link saw over the measured window, and the readings at its start and end
/// (compared once the run is over: the machine's load is read then).
struct Measured {
    link_stats: Result<LinkStats>,
    trace: Option<Result<PacketTrace>>,
    start: Readings,
    end: Readings,
}

impl Window {
    /// Marks the server and the link (their counters restart, the profile's timeline starts),
    /// takes the readings the window's end is compared with, and starts the tap and the fault.
    fn open(
        link: &dyn LinkSide,
        server: &mut dyn ServerUnderTest,
        browser: &dyn Browser,
        req: &LoadRequest,
    ) -> Window {
        server.mark();
        let _ = link.take_stats();
        link.start_timeline(req.trace_start, req.draws);
        let namespaces = link.namespace_counters();
        // Armed before the readings: a busy-server fault's thread counts as the server's.
        let armed = req
            .fault
            .and_then(|f| link.arm_fault(f, server.process_group()));
        let mut server_tasks = server.tasks();
        if let Some(tid) = armed.as_ref().and_then(fault::Armed::busy_thread) {
            server_tasks.push(Tasks::Threads {
                pid: std::process::id() as i32,
                tids: vec![tid],
            });
        }
        let sides = crate::support::contention::Sides {
            browser: browser
                .process_group()
                .map(Tasks::Group)
                .into_iter()
                .collect(),
            server: server_tasks,
            emulator: link.emulator_tasks(),
        };
        let start = Readings {
            cpu: cpu_times(),
            threads: Snapshot::take(&sides),
            namespaces,
        };
        let tap = if req.packet_tap {
            link.start_tap()
        } else {
            None
        };
        Window {
            sides,
            start,
            tap,
            armed,
        }
    }

    /// Ends the window right after a load: the link's interval first, then the readings.
    fn end_with_load(mut self, link: &dyn LinkSide) -> Measured {
        // A busy-server fault's thread spins until the readings are taken (it is read as the
        // server's); any other fault is disarmed before the link's interval ends.
        let busy = self.armed.take_if(|a| a.busy_thread().is_some());
        self.disarm();
        let link_stats = link.take_stats();
        let trace = self.tap.take().map(|t| link.finish_tap(t));
        let end = self.read(link);
        if let Some(a) = busy {
            a.disarm();
        }
        Measured {
            link_stats,
            trace,
            start: self.start,
            end,
        }
    }

    /// Ends the window of a browser that did not start (nothing was loaded).
    fn end_without_load(mut self, link: &dyn LinkSide) -> Measured {
        self.disarm();
        let end = self.read(link);
        let link_stats = link.take_stats();
        let trace = self.tap.take().map(|t| link.finish_tap(t));
        Measured {
            link_stats,
            trace,
            start: self.start,
            end,
        }
    }

    /// A fault that has not fired by now no longer can.
    fn disarm(&mut self) {
        if let Some(a) = self.armed.take() {
            a.disarm();
        }
    }

    fn read(&self, link: &dyn LinkSide) -> Readings {
        Readings {
            cpu: cpu_times(),
            threads: Snapshot::take(&self.sides),
            namespaces: link.namespace_counters(),
        }
    }
}

/// The run's material for the packet-level analysis and the `--capture` files: the link's
/// packets, the browser's files (read now that it closed) and what the server kept; what
/// could not be taken joins `problems`.
fn capture_parts(
    req: &LoadRequest,
    ready: &Ready,
    evidence: &mut ServerEvidence,
    trace: Option<Result<PacketTrace>>,
    mut problems: Vec<String>,
) -> CaptureParts {
    let trace = match trace {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            problems.push(format!("the link's packets could not be taken: {e:#}"));
            None
        }
        None => None,
    };
    CaptureParts {
        trace,
        // Absent when the browser never started or negotiated nothing.
        browser_keys: std::fs::read_to_string(&ready.key_log).unwrap_or_default(),
        server_keys: std::mem::take(&mut evidence.key_log),
        netlog: req
            .capture
            .netlog()
            .and_then(|_| std::fs::read(&ready.net_log).ok()),
        qlogs: std::mem::take(&mut evidence.qlogs),
        problems,
    }
}

#[cfg(test)]
mod tests;

pub mod dns_side;
