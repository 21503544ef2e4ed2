//! The testbed of a run or a matrix: the emulated link (client and server namespaces), the
//! certificate, and the servers under test running in the server namespace — the embedded
//! server and/or reference servers, each on its own port so they can be interleaved.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::netem::{Link, LinkOptions};
use crate::profile::Profile;
use crate::protocol::Protocol;
use crate::record::TransportSummary;
use crate::reference::access_log::LogFormat;
use crate::reference::config::Site;
use crate::reference::process::{CustomLog, CustomServer, ExternalServer, Kind};
use crate::server::{Certificate, ConnectionStats, EmbeddedServer, ServerConfig, ServerKnobs};
use crate::validate::ServerView;

/// Which server to test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerChoice {
    Embedded,
    Caddy,
    Nginx,
    /// `--server-cmd`: a user's command line with placeholders (and its log, if named).
    Command(CustomServer),
}

impl ServerChoice {
    pub fn name(&self) -> &str {
        match self {
            ServerChoice::Embedded => "embedded",
            ServerChoice::Caddy => "caddy",
            ServerChoice::Nginx => "nginx",
            ServerChoice::Command(_) => "custom",
        }
    }
}

impl ServerChoice {
    /// Refuses a protocol the server cannot speak at all (as opposed to one switched off by a
    /// knob, which a forced browser is then caught failing on).
    pub fn check_protocol(&self, p: Protocol) -> Result<()> {
        if *self == ServerChoice::Nginx && p == Protocol::H3 {
            bail!("--servers nginx cannot serve h3 (Debian's nginx 1.22 has no HTTP/3): drop h3 from --protocols, or use caddy / --server-cmd with an nginx built with QUIC");
        }
        Ok(())
    }
}

impl FromStr for ServerChoice {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "embedded" => Ok(ServerChoice::Embedded),
            "caddy" => Ok(ServerChoice::Caddy),
            "nginx" => Ok(ServerChoice::Nginx),
            other => bail!("unknown server {other:?}: use embedded, caddy or nginx (or --server-cmd for your own)"),
        }
    }
}

/// Parses `--servers a,b` (with `--server-cmd` adding `custom`, whose access log
/// `--server-log-format` / `--server-log` name).
pub fn parse_servers(
    spec: &str,
    command: Option<&str>,
    log_format: Option<&str>,
    log_path: Option<&str>,
) -> Result<Vec<ServerChoice>> {
    let mut out: Vec<ServerChoice> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let s: ServerChoice = item.parse()?;
        if out.contains(&s) {
            bail!("server {item:?} is listed twice in --servers");
        }
        out.push(s);
    }
    if let Some(c) = command {
        if c.trim().is_empty() {
            bail!("--server-cmd is empty");
        }
        let log = match (log_format, log_path) {
            (Some(f), path) => Some(CustomLog {
                format: f.parse().map_err(anyhow::Error::msg)?,
                path: path.map(str::to_string),
            }),
            (None, Some(p)) => bail!(
                "--server-log {p:?} needs --server-log-format ({}) so its lines can be read",
                LogFormat::NAMES
            ),
            (None, None) => None,
        };
        out.push(ServerChoice::Command(CustomServer {
            command: c.to_string(),
            log,
        }));
    } else if log_format.is_some() || log_path.is_some() {
        bail!("--server-log and --server-log-format describe the log of --server-cmd: give --server-cmd too");
    }
    if out.is_empty() {
        bail!("no server selected: give --servers embedded (the default), caddy, nginx or --server-cmd");
    }
    Ok(out)
}

/// The first server listens on 443, the next on 8443, 9443…
fn port_for(index: usize) -> u16 {
    match index {
        0 => 443,
        n => 7443 + 1000 * n as u16,
    }
}

/// A server under test.
pub enum Target {
    Embedded(Box<EmbeddedServer>),
    External(Box<ExternalServer>),
}

/// The server's side of one run.
pub struct ServerRun {
    /// The requests as the server saw them (None: the server keeps no log we can read).
    pub views: Option<Vec<ServerView>>,
    pub log: Value,
    pub transport: Value,
    pub summary: Option<TransportSummary>,
}

struct Mark {
    requests: u64,
    connections: u64,
}

/// A server with the protocols it offers.
pub struct ServerSlot {
    pub name: String,
    pub target: Target,
    pub offers: BTreeMap<Protocol, bool>,
    pub description: Value,
    mark: Mark,
}

impl ServerSlot {
    pub fn port(&self) -> u16 {
        match &self.target {
            Target::Embedded(s) => s.port(),
            Target::External(s) => s.port(),
        }
    }

    pub fn offers(&self, p: Protocol) -> bool {
        self.offers.get(&p).copied().unwrap_or(false)
    }

    /// Why the server is not running any more, if it is not (reference servers are child
    /// processes; the embedded one lives in this process).
    pub fn exited(&mut self) -> Option<String> {
        match &mut self.target {
            Target::Embedded(_) => None,
            Target::External(s) => s.exit_status(),
        }
    }

    /// The reference server's process group (None for the embedded server).
    pub fn process_group(&self) -> Option<i32> {
        match &self.target {
            Target::Embedded(_) => None,
            Target::External(s) => Some(s.process_group()),
        }
    }

    pub fn mark(&mut self) {
        match &mut self.target {
            Target::Embedded(s) => {
                self.mark = Mark {
                    requests: s.request_log_mark(),
                    connections: s.connection_mark(),
                }
            }
            Target::External(s) => s.mark(),
        }
    }

    /// Collects the server's view of the run since [`ServerSlot::mark`]. For the embedded
    /// server, waits (briefly) until the browser's connections are closed so their final
    /// transport statistics are in.
    pub fn collect(&mut self) -> ServerRun {
        match &mut self.target {
            Target::Embedded(s) => {
                let end = std::time::Instant::now() + std::time::Duration::from_secs(2);
                while s.open_connections() > 0 && std::time::Instant::now() < end {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                let requests = s.requests_since(self.mark.requests);
                let conns = s.transport_stats_since(self.mark.connections);
                let views = requests
                    .iter()
                    .map(|r| ServerView {
                        protocol: r.protocol.clone(),
                        method: r.method.clone(),
                        path: crate::metrics::url_path(&format!("https://x{}", r.path)),
                        status: r.status,
                        bytes_sent: r.bytes_sent,
                        bytes_received: r.bytes_received,
                    })
                    .collect();
                ServerRun {
                    views: Some(views),
                    log: serde_json::to_value(&requests).unwrap_or(Value::Null),
                    summary: Some(transport_summary(&conns)),
                    transport: serde_json::to_value(&conns).unwrap_or(Value::Null),
                }
            }
            Target::External(s) => {
                let (views, log) = s.collect();
                ServerRun {
                    views,
                    log,
                    transport: Value::Null,
                    summary: None,
                }
            }
        }
    }
}

/// Sums a run's connections into the CSV's transport columns.
pub fn transport_summary(conns: &[ConnectionStats]) -> TransportSummary {
    let mut t = TransportSummary::default();
    let mut rtts = Vec::new();
    for c in conns {
        if let Some(tcp) = &c.tcp {
            t.tcp_connections += 1;
            t.tcp_retransmits += tcp.total_retrans as u64;
            rtts.push(tcp.rtt_us as f64 / 1000.0);
            let cwnd = tcp.snd_cwnd as u64 * tcp.snd_mss as u64;
            t.cwnd_bytes = Some(t.cwnd_bytes.unwrap_or(0).max(cwnd));
        }
        if let Some(q) = &c.quic {
            t.quic_connections += 1;
            t.quic_lost_packets += q.lost_packets;
            t.quic_congestion_events += q.congestion_events;
            rtts.push(q.rtt_us as f64 / 1000.0);
            t.cwnd_bytes = Some(t.cwnd_bytes.unwrap_or(0).max(q.cwnd));
        }
    }
    t.server_rtt_ms = crate::stats::median(&rtts).ok();
    t
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
}

/// The link, the certificate and the running servers.
pub struct Testbed {
    pub servers: Vec<ServerSlot>,
    pub cert: Certificate,
    work: PathBuf,
    // Dropped last: servers must stop before their namespace goes.
    pub link: Link,
}

impl Testbed {
    pub fn start(cfg: &TestbedConfig) -> Result<Testbed> {
        let link = Link::new(
            &cfg.profile,
            LinkOptions {
                seed: cfg.seed,
                realtime: true,
                steer_receive: cfg.steer_receive,
                ..LinkOptions::default()
            },
        )?;
        // The namespaces' default TCP congestion control, so that reference servers (which do
        // not set it per socket) use the knob's too. Best effort: a child namespace may only
        // default to algorithms in the host's tcp_allowed_congestion_control.
        let mut ns_tcp_note = None;
        if let Some(cc) = cfg.knobs.tcp_congestion {
            for ns in [link.server(), link.client()] {
                let set = ns.run(move || {
                    std::fs::write(
                        "/proc/sys/net/ipv4/tcp_congestion_control",
                        cc.kernel_name(),
                    )
                })?;
                if let Err(e) = set {
                    ns_tcp_note = Some(format!(
                        "could not make {} the namespace default ({e}; the host allows only: {}): reference servers use the namespace default",
                        cc.kernel_name(),
                        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap_or_default().trim()
                    ));
                }
            }
        }
        let ns_tcp_cc = link
            .server()
            .run(|| {
                std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                    .unwrap_or_default()
            })?
            .trim()
            .to_string();
        let work = crate::browser::launch::make_temp_dir("pagebench-testbed")?;
        let cert = Certificate::load_or_create(&work.join("cert"))?;
        let root = std::fs::canonicalize(&cfg.pages_root).with_context(|| {
            format!(
                "pages root {} does not exist: run `pagebench pages`",
                cfg.pages_root.display()
            )
        })?;
        let server_ip = IpAddr::V4(link.server_ip());
        let knobs_json = serde_json::to_value(&cfg.knobs).unwrap_or(Value::Null);
        let mut tb = Testbed {
            servers: Vec::new(),
            cert,
            work,
            link,
        };
        for (i, choice) in cfg.servers.iter().enumerate() {
            let port = port_for(i);
            let slot = match choice {
                ServerChoice::Embedded => {
                    let config = ServerConfig {
                        root: root.clone(),
                        bind: SocketAddr::new(server_ip, port),
                        knobs: cfg.knobs.clone(),
                        cert: tb.cert.clone(),
                        log_path: cfg
                            .log_dir
                            .as_ref()
                            .map(|d| d.join("server-requests.jsonl")),
                    };
                    let server = tb
                        .link
                        .server()
                        .run(move || EmbeddedServer::start(config))??;
                    let eff = server.knobs_applied().knobs.clone();
                    let offers = Protocol::ALL.iter().map(|p| (*p, eff.offers(*p))).collect();
                    ServerSlot {
                        name: "embedded".into(),
                        description: json!({
                            "server": "embedded",
                            "version": format!("pagebench {} (hyper 1, quinn 0.11, h3 0.0.8)", env!("CARGO_PKG_VERSION")),
                            "knobs_requested": knobs_json,
                            "applied": server.knobs_applied().to_json(),
                        }),
                        target: Target::Embedded(Box::new(server)),
                        offers,
                        mark: Mark {
                            requests: 0,
                            connections: 0,
                        },
                    }
                }
                other => {
                    let kind = match other {
                        ServerChoice::Caddy => Kind::Caddy,
                        ServerChoice::Nginx => Kind::Nginx,
                        ServerChoice::Command(c) => Kind::Command(c.clone()),
                        ServerChoice::Embedded => unreachable!("handled above"),
                    };
                    let eff = cfg.knobs.effective();
                    let dir = tb.work.join(other.name());
                    let site = Site {
                        ip: server_ip,
                        port,
                        root: root.clone(),
                        cert: tb
                            .cert
                            .cert_path()
                            .context("the certificate has no PEM file")?,
                        key: tb
                            .cert
                            .key_path()
                            .context("the certificate has no PEM file")?,
                        log: dir.join("access.log"),
                        work: dir,
                        sink_port: 0,
                        h1: eff.offers(Protocol::H1),
                        h2: eff.offers(Protocol::H2),
                        h3: eff.offers(Protocol::H3) && kind != Kind::Nginx,
                    };
                    let offers = [
                        (Protocol::H1, site.h1),
                        (Protocol::H2, site.h2),
                        (Protocol::H3, site.h3),
                    ]
                    .into_iter()
                    .collect();
                    let server = ExternalServer::start(kind, tb.link.server(), site)?;
                    let mut description = server.describe();
                    description["tcp_congestion"] = json!(ns_tcp_cc);
                    if let Some(note) = &ns_tcp_note {
                        description["tcp_congestion_note"] = json!(note);
                    }
                    ServerSlot {
                        name: other.name().to_string(),
                        description,
                        target: Target::External(Box::new(server)),
                        offers,
                        mark: Mark {
                            requests: 0,
                            connections: 0,
                        },
                    }
                }
            };
            tb.servers.push(slot);
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
            .find_map(|s| s.exited().map(|why| format!("server {}: {why}", s.name)))
    }

    pub fn server_mut(&mut self, name: &str) -> Option<&mut ServerSlot> {
        self.servers.iter_mut().find(|s| s.name == name)
    }

    /// The servers' descriptions by name, for the metadata.
    pub fn describe(&self) -> Value {
        Value::Object(
            self.servers
                .iter()
                .map(|s| (s.name.clone(), s.description.clone()))
                .collect(),
        )
    }

    pub fn spki(&self) -> &str {
        self.cert.spki_sha256_base64()
    }

    pub fn work_dir(&self) -> &Path {
        &self.work
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.servers.clear();
        let _ = std::fs::remove_dir_all(&self.work);
    }
}
