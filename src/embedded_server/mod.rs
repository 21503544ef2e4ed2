//! The embedded server: HTTPS h1 + h2 over TCP and HTTP/3 over QUIC on one port number, serving
//! the generated workloads, with the knobs that matter applied for real and reported back, a
//! per-request log and per-connection transport statistics.
//!
//! Sockets are bound in the thread that calls [`EmbeddedServer::start`] (so a caller inside a
//! network namespace gets sockets in that namespace); the server then runs its own tokio runtime
//! on its own threads, spawned from that same thread, so they live in the same namespace.

pub mod answers;
pub mod capture;
pub mod cert;
pub mod client;
pub mod ctx;
pub mod dns;
pub mod early_hints;
pub mod hint_list;
pub mod knobs;
pub mod log;
pub mod paths;
pub mod response_order;
pub mod sockets;
pub mod tls_config;
pub mod transport_stats;

mod h2_server;
mod h3_server;
mod quic_streams;
mod response;
mod tcp;
mod turns;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use ctx::Ctx;

pub use cert::Certificate;
pub use knobs::{ByteSize, EffectiveKnobs, Protocol, QuicCongestion, ServerKnobs, TcpCongestion};
pub use log::RequestRecord;
pub use sockets::SocketBuffer;
pub use tcp::drain_body;
pub use transport_stats::{ConnectionStats, QuicInfo, TcpInfo, Transport};

/// How long a shutdown waits for in-flight requests before closing connections.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Everything a server needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The workload tree (`pages/`): URL `/page10/index.html` is `root/page10/index.html`.
    pub root: PathBuf,
    /// Address and port (0: a port free on both TCP and UDP).
    pub bind: SocketAddr,
    pub knobs: ServerKnobs,
    pub cert: Certificate,
    /// JSON-lines request log (appended, one write per line).
    pub log_path: Option<PathBuf>,
    /// More ports to serve on the same address (a replayed site's origins on ports other than
    /// 443, and 80 for its `http://` ones: plain HTTP is told from TLS by its first byte).
    pub extra_ports: Vec<u16>,
}

/// What the server really runs with: the knobs with defaults filled in and the kernel's answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedKnobs {
    pub bind: SocketAddr,
    pub port: u16,
    pub knobs: EffectiveKnobs,
    /// ALPN the TCP listener offers, in preference order (empty without TCP).
    pub tcp_alpn: Vec<String>,
    /// The TCP congestion control read back from the listening socket (accepted sockets
    /// inherit it; each connection's own is in its [`TcpInfo`]).
    pub tcp_congestion: Option<String>,
    /// `knob` or `system default`.
    pub tcp_congestion_source: Option<String>,
    pub udp_recv_buffer: Option<SocketBuffer>,
    pub udp_send_buffer: Option<SocketBuffer>,
    /// Segments per UDP send the kernel supports (1: no GSO); `knobs.gso` says if quinn uses it.
    pub gso_max_segments: Option<usize>,
    /// How the h3 send buffer is applied, in one sentence.
    pub h3_send_window_rule: Option<String>,
    pub alt_svc: Option<String>,
}

impl AppliedKnobs {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// A running server. Dropping it shuts it down (gracefully, logs flushed).
pub struct EmbeddedServer {
    ctx: Arc<Ctx>,
    addr: SocketAddr,
    cert: Certificate,
    applied: AppliedKnobs,
    log: Arc<log::RequestLog>,
    registry: Arc<transport_stats::Registry>,
    shutdown_tx: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    /// The ids of the threads that serve (the runtime's workers and the thread driving it).
    threads: Arc<std::sync::Mutex<Vec<i32>>>,
}

impl EmbeddedServer {
    /// Binds (in the calling thread) and starts serving. Errors are clear: a port in use on TCP
    /// or UDP, a missing root, an unavailable congestion control, a knob out of range.
    pub fn start(config: ServerConfig) -> Result<EmbeddedServer> {
        config.knobs.validate()?;
        let knobs = config.knobs.effective();
        let root = paths::canonical_root(&config.root)?;
        let bound = sockets::bind(config.bind.ip(), config.bind.port(), &knobs)?;
        let port = bound.port;
        let mut extra = Vec::new();
        for p in config.extra_ports.iter().filter(|p| **p != port) {
            let b = sockets::bind(config.bind.ip(), *p, &knobs)
                .with_context(|| format!("a replayed site's origin needs port {p}"))?;
            extra.push((b.tcp, b.udp));
        }
        let addr = SocketAddr::new(config.bind.ip(), port);
        let log = Arc::new(log::RequestLog::new(config.log_path.as_deref())?);
        let registry = Arc::new(transport_stats::Registry::new());
        let h3 = knobs.offers(Protocol::H3);
        let alt_svc = h3.then(|| answers::alt_svc(port));
        let capture = Arc::new(capture::ServerCapture::default());
        let key_log: Arc<dyn rustls::KeyLog> = Arc::new(capture::MemoryKeyLog(capture.clone()));
        let tcp_tls = match bound.tcp {
            Some(_) => Some(tls_config::tcp_server_config(
                &config.cert,
                &knobs,
                key_log.clone(),
            )?),
            None => None,
        };
        let quic_server = match bound.udp {
            Some(_) => {
                let crypto = tls_config::quic_server_config(&config.cert, &knobs, key_log.clone())?;
                let mut sc = quinn::ServerConfig::with_crypto(Arc::new(crypto));
                sc.transport_config(Arc::new(h3_server::transport_config(&knobs)?));
                Some(sc)
            }
            None => None,
        };
        let alt_svc_text = alt_svc
            .as_ref()
            .and_then(|v| v.to_str().ok().map(str::to_string));
        let applied = applied_knobs(addr, &bound, &knobs, tcp_tls.as_ref(), alt_svc_text);
        let tls_h1_only =
            match &tcp_tls {
                Some(_) if knobs.offers(Protocol::H1) => Some(
                    tls_config::tcp_server_config_h1_only(&config.cert, &knobs, key_log.clone())?,
                ),
                _ => None,
            };
        let ctx = Arc::new(Ctx {
            tls_h1_only,
            site: answers::Site {
                root,
                alt_svc,
                alt_svc_over_h3: knobs.alt_svc_over_h3,
                replay: Default::default(),
                early_hints: knobs.early_hints,
                hint_list: knobs
                    .early_hints_links
                    .as_deref()
                    .map(hint_list::HintList::read)
                    .transpose()?,
                page_think: Duration::from_millis(knobs.page_think_ms),
            },
            log: log.clone(),
            registry: registry.clone(),
            capture: capture.clone(),
            quic_base: quic_server.clone(),
            knobs,
        });
        let ctx_run = ctx.clone();
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut listeners = vec![(bound.tcp, bound.udp)];
        listeners.extend(extra);
        let threads: Arc<std::sync::Mutex<Vec<i32>>> = Arc::default();
        let serve = move |ready_tx| {
            run(
                listeners,
                tcp_tls,
                quic_server,
                ctx_run,
                shutdown_rx,
                ready_tx,
            )
        };
        let thread = spawn_serving(port, threads.clone(), serve)?;
        tracing::debug!("serving on {addr} ({:?})", applied.knobs.protocols);
        Ok(EmbeddedServer {
            ctx,
            addr,
            cert: config.cert,
            applied,
            log,
            registry,
            shutdown_tx,
            thread: Some(thread),
            threads,
        })
    }

    /// Answers every request from `replay`'s site from now on (`None`: the workload tree
    /// again).
    pub fn replay(&self, replay: Option<crate::config::site_archive::replay::Replay>) {
        self.ctx.site.set_replay(replay);
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The ids of the threads that serve (for the CPU each run costs the server).
    pub fn thread_ids(&self) -> Vec<i32> {
        self.threads.lock().map(|t| t.clone()).unwrap_or_default()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// base64(SHA-256(SPKI)) of the certificate, for Chromium's SPKI list.
    pub fn spki(&self) -> &str {
        self.cert.spki_sha256_base64()
    }

    pub fn certificate(&self) -> &Certificate {
        &self.cert
    }

    pub fn knobs_applied(&self) -> &AppliedKnobs {
        &self.applied
    }

    /// A position in the request log; [`requests_since`](Self::requests_since) returns the
    /// requests logged after it (a request is logged when its response has gone out).
    pub fn request_log_mark(&self) -> u64 {
        self.log.mark()
    }

    pub fn requests_since(&self, mark: u64) -> Vec<RequestRecord> {
        self.log.since(mark)
    }

    /// TLS secrets and qlogs for a run's capture.
    pub fn capture(&self) -> &capture::ServerCapture {
        &self.ctx.capture
    }

    /// The id the next connection will get; see [`transport_stats_since`](Self::transport_stats_since).
    pub fn connection_mark(&self) -> u64 {
        self.registry.mark()
    }

    /// Every connection: final numbers of the closed ones, a snapshot of the open ones.
    pub fn transport_stats(&self) -> Vec<ConnectionStats> {
        self.registry.since(0)
    }

    /// Connections opened after `mark` (closed ones and snapshots of the open ones).
    pub fn transport_stats_since(&self, mark: u64) -> Vec<ConnectionStats> {
        self.registry.since(mark)
    }

    /// Connections open right now.
    pub fn open_connections(&self) -> usize {
        self.registry.open_count()
    }

    /// Connections opened after `mark` and open right now.
    pub fn open_connections_since(&self, mark: u64) -> usize {
        self.registry.open_count_since(mark)
    }

    /// Stops accepting, lets in-flight requests finish (up to [`SHUTDOWN_GRACE`]), closes
    /// connections and flushes the log. Idempotent; the log and statistics stay readable.
    pub fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        let _ = self.shutdown_tx.send(true);
        if thread.join().is_err() {
            tracing::warn!("the server thread panicked");
        }
        self.log.flush();
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What the server applied, as `meta.json` records it.
fn applied_knobs(
    addr: SocketAddr,
    bound: &sockets::Bound,
    knobs: &EffectiveKnobs,
    tcp_tls: Option<&Arc<rustls::ServerConfig>>,
    alt_svc: Option<String>,
) -> AppliedKnobs {
    AppliedKnobs {
        bind: addr,
        port: bound.port,
        tcp_alpn: tcp_tls
            .map(|c| {
                c.alpn_protocols
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default(),
        tcp_congestion: bound.tcp_congestion.clone(),
        tcp_congestion_source: bound.tcp_congestion.as_ref().map(|_| {
            if knobs.tcp_congestion.is_some() {
                "knob".to_string()
            } else {
                "system default".to_string()
            }
        }),
        udp_recv_buffer: bound.udp_recv_buffer.clone(),
        udp_send_buffer: bound.udp_send_buffer.clone(),
        gso_max_segments: bound.gso_max_segments,
        h3_send_window_rule: knobs
            .offers(Protocol::H3)
            .then(|| h3_server::send_window_rule(knobs)),
        alt_svc,
        knobs: knobs.clone(),
    }
}

/// Starts the thread that serves: a runtime of two workers driving `serve` (given the channel
/// on which it says it is ready), the ids of its threads noted in `threads`. Returns once it
/// serves, or with why it could not.
fn spawn_serving<F>(
    port: u16,
    threads: Arc<std::sync::Mutex<Vec<i32>>>,
    serve: impl FnOnce(std::sync::mpsc::Sender<Result<()>>) -> F + Send + 'static,
) -> Result<JoinHandle<()>>
where
    F: std::future::Future<Output = ()>,
{
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let (driver, workers) = (threads.clone(), threads);
    let note_thread = move |list: &std::sync::Mutex<Vec<i32>>| {
        if let Ok(mut l) = list.lock() {
            l.push(crate::support::procfs::thread_id());
        }
    };
    let thread = std::thread::Builder::new()
        .name(format!("pagebench-server-{port}"))
        .spawn(move || {
            note_thread(&driver);
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("pagebench-server-rt")
                .on_thread_start(move || note_thread(&workers))
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(
                        anyhow::Error::new(e).context("cannot start the server runtime")
                    ));
                    return;
                }
            };
            rt.block_on(serve(ready_tx));
            rt.shutdown_timeout(Duration::from_secs(1));
        })
        .context("cannot spawn the server thread")?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            anyhow::bail!("the server thread ended during start-up");
        }
    }
}

/// The sockets of one port: its TCP listener and its UDP socket (each if offered).
type PortSockets = (Option<std::net::TcpListener>, Option<std::net::UdpSocket>);

async fn run(
    listeners: Vec<PortSockets>,
    tcp_tls: Option<Arc<rustls::ServerConfig>>,
    quic_server: Option<quinn::ServerConfig>,
    ctx: Arc<Ctx>,
    shutdown: watch::Receiver<bool>,
    ready: std::sync::mpsc::Sender<Result<()>>,
) {
    let setup = || -> Result<_> {
        let mut tcp = Vec::new();
        let mut quic = Vec::new();
        for (tcp_listener, udp_socket) in listeners {
            if let (Some(l), Some(tls)) = (tcp_listener, &tcp_tls) {
                tcp.push((
                    tokio::net::TcpListener::from_std(l)
                        .context("cannot register the TCP listener")?,
                    tokio_rustls::TlsAcceptor::from(tls.clone()),
                ));
            }
            if let (Some(s), Some(sc)) = (udp_socket, &quic_server) {
                quic.push(
                    quinn::Endpoint::new(
                        quinn::EndpointConfig::default(),
                        Some(sc.clone()),
                        s,
                        Arc::new(quinn::TokioRuntime),
                    )
                    .context("cannot start the QUIC endpoint")?,
                );
            }
        }
        Ok((tcp, quic))
    };
    let (tcp, quic) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let mut tasks = Vec::new();
    for (listener, acceptor) in tcp {
        tasks.push(tokio::spawn(tcp::accept_loop(
            listener,
            acceptor,
            ctx.clone(),
            shutdown.clone(),
            SHUTDOWN_GRACE,
        )));
    }
    for endpoint in quic {
        tasks.push(tokio::spawn(h3_server::accept_loop(
            endpoint,
            ctx.clone(),
            shutdown.clone(),
            SHUTDOWN_GRACE,
        )));
    }
    for t in tasks {
        let _ = t.await;
    }
    ctx.log.flush();
}
