//! An HTTP/3 stack that is only HTTP/3 (the quiche and aioquic helpers, `servers::helpers`) as a
//! server under test: the stack runs as a child process on the port's UDP side, and h1 and h2 of
//! the same port come from the embedded server's TCP listener (hyper), so one server name offers
//! all three protocols as the others do. Its view of a run joins both: the embedded server's
//! request log and TCP statistics, the helper's request log (pagebench's own format) and its
//! QUIC statistics as the stack counts them. The metadata says which program served which
//! protocol.

use std::collections::HashSet;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};

use super::reference::access_log::{self, LogFormat};
use super::reference::child_process::{ChildServer, Ready};
use super::reference::config_file::Site;
use super::reference::transport_log::{self, StatsLine};
use super::{
    server_view::transport_summary, AccessLogDescription, ConfiguredWindow, OfferedProtocols,
    Registration, ServerDescription, ServerEvidence, ServerUnderTest, StartContext,
};
use crate::config::identity::ServerId;
use crate::config::protocol::Protocol;
use crate::embedded_server::{ConnectionStats, EffectiveKnobs};

/// How long `collect` waits for the browser's QUIC connections to close (as the embedded
/// server does for its own).
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// What an HTTP/3 helper needs besides the common arguments (`--listen --root --cert --key
/// --log --stats --ready`, which every helper takes).
pub struct H3Helper {
    /// `--servers NAME`.
    pub name: &'static str,
    /// The program and its first arguments (a Python and its script).
    pub command: Vec<OsString>,
    /// Knob flags after the common ones (`--cc cubic`…).
    pub knob_args: Vec<String>,
    /// The knobs it takes (h3) — the embedded listener takes the h1/h2 and TCP ones.
    pub knobs_applied: Vec<&'static str>,
    /// Knobs neither part applies.
    pub knobs_not_applicable: Vec<&'static str>,
    /// Windows it was configured with (for `diagnose`).
    pub windows: Vec<ConfiguredWindow>,
    /// What a reader of the results must know about it, beyond who serves what.
    pub note: String,
    /// The server that answers h1 and h2 on the same port (the embedded one).
    pub beside: &'static Registration,
}

/// A helper's program as configured: `$env`, else where `./setup.sh` puts it (`built`), else
/// None (the caller looks further or says how to get it).
pub fn configured_program(env: &str, built: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p));
    }
    std::path::Path::new(built)
        .is_file()
        .then(|| PathBuf::from(built))
}

/// The flow-control flags every helper takes, `cc` being the helper's name for the
/// controller.
pub fn flow_args(e: &EffectiveKnobs, cc: &str) -> Vec<String> {
    vec![
        "--max-streams".to_string(),
        e.h3_max_concurrent_streams.to_string(),
        "--stream-window".into(),
        e.h3_stream_receive_window.to_string(),
        "--conn-window".into(),
        e.h3_connection_receive_window.to_string(),
        "--cc".into(),
        cc.into(),
    ]
}

/// The socket-buffer and Alt-Svc flags every helper takes (after [`flow_args`]).
pub fn socket_args(e: &EffectiveKnobs) -> Vec<String> {
    let mut a = Vec::new();
    if let Some(b) = e.udp_recv_buffer {
        a.extend(["--udp-recv-buffer".into(), b.to_string()]);
    }
    if let Some(b) = e.udp_send_buffer {
        a.extend(["--udp-send-buffer".into(), b.to_string()]);
    }
    if e.alt_svc_over_h3 {
        a.push("--alt-svc".into());
    }
    a
}

/// The knobs the embedded TCP listener applies for h1/h2.
const TCP_KNOBS: &[&str] = &[
    "protocols",
    "h2_max_concurrent_streams",
    "h2_initial_stream_window",
    "h2_initial_connection_window",
    "h2_stream_buffer",
    "tcp_congestion",
];

/// What a helper writes once its socket is bound.
#[derive(Debug, Clone, Deserialize)]
struct HelperReady {
    server: String,
    udp_recv_buffer: u64,
    udp_send_buffer: u64,
}

/// A running split server.
pub struct SplitServer {
    name: ServerId,
    /// The embedded server with h3 off (None: neither h1 nor h2 is offered).
    tcp: Option<Box<dyn ServerUnderTest>>,
    /// The HTTP/3 helper (None: h3 is not offered).
    quic: Option<ChildServer>,
    stats: PathBuf,
    stats_mark: u64,
    snapshots: u64,
    reported: HashSet<u64>,
    description: ServerDescription,
}

/// Starts the embedded TCP listener (h1/h2 as the knobs offer) and the helper (if h3 is
/// offered) on the context's port.
pub fn start(ctx: &StartContext, helper: H3Helper) -> Result<Box<dyn ServerUnderTest>> {
    let tcp = start_tcp(ctx, helper.beside)?;
    let stats = ctx.work.join("transport.jsonl");
    let (quic, ready_info) = if ctx.knobs.effective().offers(Protocol::H3) {
        let (child, ready) = start_helper(ctx, &helper, &stats)?;
        (Some(child), Some(ready))
    } else {
        (None, None)
    };
    let description = describe(
        ctx,
        &helper,
        tcp.as_deref(),
        quic.as_ref(),
        ready_info.as_ref(),
    );
    Ok(Box::new(SplitServer {
        name: ServerId::new(helper.name),
        tcp,
        quic,
        stats,
        stats_mark: 0,
        snapshots: 0,
        reported: HashSet::new(),
        description,
    }))
}

/// The embedded server on TCP with the h1/h2 the knobs offer (None: neither).
fn start_tcp(
    ctx: &StartContext,
    beside: &Registration,
) -> Result<Option<Box<dyn ServerUnderTest>>> {
    let eff = ctx.knobs.effective();
    let tcp_protocols: Vec<Protocol> = eff
        .protocols
        .iter()
        .copied()
        .filter(|p| *p != Protocol::H3)
        .collect();
    Ok(if tcp_protocols.is_empty() {
        None
    } else {
        let mut knobs = ctx.knobs.clone();
        knobs.protocols = Some(tcp_protocols);
        let tcp_ctx = StartContext {
            ns: ctx.ns,
            ip: ctx.ip,
            port: ctx.port,
            root: ctx.root,
            cert: ctx.cert,
            knobs: &knobs,
            work: ctx.work.join("embedded"),
            log_dir: ctx.log_dir,
            namespace_tcp: ctx.namespace_tcp,
            site_ports: ctx.site_ports,
        };
        Some((beside.start)(&tcp_ctx)?)
    })
}

/// The HTTP/3 helper in the server namespace, until its ready file says it listens.
fn start_helper(
    ctx: &StartContext,
    helper: &H3Helper,
    stats: &Path,
) -> Result<(ChildServer, HelperReady)> {
    let mut site = Site::for_server(ctx, &[Protocol::H3])?;
    site.log = ctx.work.join("requests.jsonl");
    let ready = ctx.work.join("ready.json");
    let program = helper
        .command
        .first()
        .context("an h3 helper needs a program")?
        .to_string_lossy()
        .to_string();
    let stats_path = stats.to_path_buf();
    let ready_path = ready.clone();
    let child = ChildServer::start_ready(
        helper.name,
        &program,
        ctx.ns,
        site,
        Ready::File(ready.clone()),
        |ns, site| {
            let _ = std::fs::File::create(&stats_path);
            let mut c = ns.command(&helper.command[0]);
            c.args(&helper.command[1..])
                .arg("--listen")
                .arg(SocketAddr::new(site.ip, site.port).to_string())
                .arg("--root")
                .arg(&site.root)
                .arg("--cert")
                .arg(&site.cert)
                .arg("--key")
                .arg(&site.key)
                .arg("--log")
                .arg(&site.log)
                .arg("--stats")
                .arg(&stats_path)
                .arg("--ready")
                .arg(&ready_path)
                .args(&helper.knob_args);
            Ok(c)
        },
    )?;
    let text = std::fs::read_to_string(&ready)
        .with_context(|| format!("{}: reading {}", helper.name, ready.display()))?;
    let ready_info = serde_json::from_str::<HelperReady>(&text)
        .with_context(|| format!("{}: {} is not its ready line", helper.name, text))?;
    Ok((child, ready_info))
}

/// What `meta.json` says of the pair: the helper's command and version, the knobs each side
/// applied, the UDP buffers the kernel gave.
fn describe(
    ctx: &StartContext,
    helper: &H3Helper,
    tcp: Option<&dyn ServerUnderTest>,
    quic: Option<&ChildServer>,
    ready_info: Option<&HelperReady>,
) -> ServerDescription {
    let offered = OfferedProtocols {
        h1: tcp.is_some_and(|t| t.offers(Protocol::H1)),
        h2: tcp.is_some_and(|t| t.offers(Protocol::H2)),
        h3: quic.is_some(),
    };
    let tcp_description = tcp.map(|t| t.describe());
    let tcp_applied = tcp_description.as_ref().and_then(|d| d.applied.as_ref());
    let mut knobs_applied: Vec<String> =
        helper.knobs_applied.iter().map(|k| k.to_string()).collect();
    knobs_applied.extend(TCP_KNOBS.iter().map(|k| format!("{k} (h1/h2: embedded)")));
    let version = match ready_info {
        Some(r) => format!(
            "{}; h1/h2: pagebench {} (hyper 1)",
            r.server,
            env!("CARGO_PKG_VERSION")
        ),
        None => format!(
            "{} not started (h3 not offered); h1/h2: pagebench {} (hyper 1)",
            helper.name,
            env!("CARGO_PKG_VERSION")
        ),
    };
    let mut note = format!(
        "h3 is served by {} ({}); h1 and h2 on the same port by pagebench's embedded server (hyper), which takes the h2 and TCP knobs",
        helper.name, helper.note
    );
    if let Some(r) = ready_info {
        note.push_str(&format!(
            "; UDP socket buffers as the kernel set them: SO_RCVBUF {}, SO_SNDBUF {}",
            r.udp_recv_buffer, r.udp_send_buffer
        ));
    }
    ServerDescription {
        access_log: quic.map(|q| AccessLogDescription {
            format: LogFormat::Pagebench.name().into(),
            path: q.site().log.clone(),
        }),
        applied: None,
        command: Some(
            helper
                .command
                .iter()
                .map(|a| a.to_string_lossy().to_string())
                .chain(helper.knob_args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        knobs_applied: Some(knobs_applied),
        knobs_not_applicable: Some(
            helper
                .knobs_not_applicable
                .iter()
                .map(|k| k.to_string())
                .collect(),
        ),
        knobs_requested: Some(ctx.knobs.clone()),
        note: Some(note),
        port: Some(ctx.port),
        protocols: Some(offered),
        server: ServerId::new(helper.name),
        tcp_congestion: tcp_applied.and_then(|a| a.tcp_congestion.clone()),
        tcp_congestion_note: None,
        version,
        windows: helper.windows.clone(),
    }
}

impl SplitServer {
    /// Asks the helper for a snapshot of its open connections and waits (briefly) until it
    /// has written it; returns how many were open.
    fn snapshot(&mut self) -> Option<u64> {
        let q = self.quic.as_ref()?;
        self.snapshots += 1;
        // SAFETY: signalling the helper process pagebench started.
        unsafe { libc::kill(q.process_group(), libc::SIGUSR1) };
        let end = Instant::now() + Duration::from_millis(500);
        loop {
            let (lines, _) = access_log::lines_since(&self.stats, self.stats_mark);
            let parsed: Vec<StatsLine> = lines
                .iter()
                .filter_map(|l| transport_log::parse(l))
                .collect();
            if let Some((n, open)) = transport_log::last_snapshot(&parsed) {
                if n >= self.snapshots {
                    return Some(open);
                }
            }
            if Instant::now() > end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The helper's QUIC connections of the run (waiting up to [`CLOSE_WAIT`] for them to
    /// close) and its raw statistics lines.
    fn quic_transport(&mut self) -> (Vec<ConnectionStats>, Vec<Value>) {
        if self.quic.is_none() {
            return (Vec::new(), Vec::new());
        }
        let end = Instant::now() + CLOSE_WAIT;
        while let Some(open) = self.snapshot() {
            if open == 0 || Instant::now() > end {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let (lines, mark) = access_log::lines_since(&self.stats, self.stats_mark);
        self.stats_mark = mark;
        let parsed: Vec<StatsLine> = lines
            .iter()
            .filter_map(|l| transport_log::parse(l))
            .collect();
        let conns = transport_log::connections(&parsed, &mut self.reported);
        let raw = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!(l)))
            .collect();
        (conns, raw)
    }
}

impl ServerUnderTest for SplitServer {
    fn name(&self) -> ServerId {
        self.name.clone()
    }

    fn port(&self) -> u16 {
        self.description.port.unwrap_or(0)
    }

    fn offers(&self, p: Protocol) -> bool {
        match p {
            Protocol::H3 => self.quic.is_some(),
            _ => self.tcp.as_ref().is_some_and(|t| t.offers(p)),
        }
    }

    fn mark(&mut self) {
        if let Some(t) = self.tcp.as_mut() {
            t.mark();
        }
        if let Some(q) = self.quic.as_mut() {
            q.mark();
            self.stats_mark = access_log::mark(&self.stats);
        }
    }

    fn collect(&mut self) -> ServerEvidence {
        let tcp = self.tcp.as_mut().map(|t| t.collect()).unwrap_or_default();
        let (quic_conns, quic_raw) = self.quic_transport();
        let (quic_views, quic_log) = match self.quic.as_mut() {
            Some(q) => q.collect(Some(LogFormat::Pagebench)),
            None => (Some(Vec::new()), Value::Null),
        };
        let mut views = tcp.views.unwrap_or_default();
        views.extend(quic_views.unwrap_or_default());
        let mut transport = tcp.transport.unwrap_or_default();
        transport.extend(quic_conns);
        ServerEvidence {
            views: Some(views),
            log: json!({
                "embedded": tcp.log,
                "helper": quic_log,
                "helper_transport": quic_raw,
            }),
            summary: Some(transport_summary(&transport)),
            transport: Some(transport),
            key_log: tcp.key_log,
            qlogs: Vec::new(),
        }
    }

    fn exited(&mut self) -> Option<String> {
        self.quic.as_mut().and_then(|q| q.exit_status())
    }

    fn process_group(&self) -> Option<i32> {
        self.quic.as_ref().map(|q| q.process_group())
    }

    fn tasks(&self) -> Vec<crate::support::contention::Tasks> {
        let helper = self
            .process_group()
            .map(crate::support::contention::Tasks::Group);
        let tcp = self.tcp.iter().flat_map(|t| t.tasks());
        tcp.chain(helper).collect()
    }

    fn describe(&self) -> ServerDescription {
        self.description.clone()
    }
}
