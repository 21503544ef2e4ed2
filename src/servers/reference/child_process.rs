//! A reference server as a child process inside the server namespace: started from the command
//! its implementation builds (a generated config, or the user's command), waited for until its
//! port answers, its access log read per run, stopped by signalling the process group it was
//! started in. Caddy, nginx and `--server-cmd` servers are each one of these.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::access_log::{self, LogFormat};
use super::config_file::Site;
use super::sink::UploadSink;
use crate::config::identity::ServerId;
use crate::config::protocol::Protocol;
use crate::link::Namespace;
use crate::servers::ServerView;
use crate::servers::{
    AccessLogDescription, NamespaceTcp, OfferedProtocols, ServerDescription, ServerEvidence,
    ServerUnderTest,
};
use crate::support::cgroup::{spawn_counted, CpuGroup};
use crate::support::signals;

/// The embedded server's knobs that a reference server does not take from pagebench (TCP
/// congestion control comes from the namespace default, see the testbed).
pub const KNOBS_NOT_APPLICABLE: &[&str] = &[
    "h2_max_concurrent_streams",
    "h2_initial_stream_window",
    "h2_initial_connection_window",
    "h2_stream_buffer",
    "h3_max_concurrent_streams",
    "h3_stream_receive_window",
    "h3_connection_receive_window",
    "h3_send_buffer",
    "quic_congestion",
    "udp_recv_buffer",
    "udp_send_buffer",
    "gso",
    "alt_svc_over_h3",
    "priorities",
    "early_hints",
    "early_hints_links",
    "page_think_ms",
];

/// How pagebench knows a child server is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// Its TCP port accepts connections (then a short grace for a QUIC listener).
    TcpPort,
    /// It wrote this file (an HTTP/3-only helper, which has no TCP port, writes it once its UDP
    /// socket is bound).
    File(std::path::PathBuf),
}

/// A running reference server.
pub struct ChildServer {
    name: ServerId,
    child: Child,
    site: Site,
    sink: UploadSink,
    log_mark: u64,
    sink_mark: usize,
    _cleanup: signals::CleanupGuard,
    /// Dropped after the server's processes are ended (fields drop after `Drop::drop`).
    _cpu_group: Option<CpuGroup>,
}

/// The first line of `program args…`'s output (`caddy version`, `nginx -v`), for the metadata.
pub fn version_line(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(o) => {
            let s = String::from_utf8_lossy(&o.stdout).to_string()
                + &String::from_utf8_lossy(&o.stderr);
            s.lines().next().unwrap_or("").trim().to_string()
        }
        Err(_) => "not installed".into(),
    }
}

fn which(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

impl ChildServer {
    /// Starts server `name` in `ns`, serving `site`: checks that `program` is installed,
    /// starts the upload sink (its port goes into the site), creates the log, and runs the
    /// command `command` builds (which may also move the site's log). Waits until the TCP port
    /// accepts connections (and, for h3, a little longer).
    pub fn start(
        name: &str,
        program: &str,
        ns: &Namespace,
        site: Site,
        command: impl FnOnce(&Namespace, &mut Site) -> Result<Command>,
    ) -> Result<ChildServer> {
        Self::start_ready(name, program, ns, site, Ready::TcpPort, command)
    }

    /// [`ChildServer::start`], ready when `ready` says so.
    pub fn start_ready(
        name: &str,
        program: &str,
        ns: &Namespace,
        mut site: Site,
        ready: Ready,
        command: impl FnOnce(&Namespace, &mut Site) -> Result<Command>,
    ) -> Result<ChildServer> {
        if !which(program) {
            bail!("--servers {name}: `{program}` is not installed (./setup.sh installs what each server needs)");
        }
        std::fs::create_dir_all(&site.work)
            .with_context(|| format!("cannot create {}", site.work.display()))?;
        let sink = ns.run(UploadSink::start)??;
        site.sink_port = sink.port();
        let _ = std::fs::File::create(&site.log);
        let mut cmd = command(ns, &mut site)?;
        let stderr = std::fs::File::create(site.work.join("server.stderr"))?;
        cmd.stdin(Stdio::null())
            .stdout(stderr.try_clone()?)
            .stderr(stderr)
            .process_group(0);
        let (child, cpu_group) =
            spawn_counted(&mut cmd).with_context(|| format!("cannot start {name}"))?;
        let pgid = child.id() as i32;
        let guard = signals::register_cleanup(move || {
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        });
        let mut server = ChildServer {
            name: ServerId::new(name),
            child,
            site,
            sink,
            log_mark: 0,
            sink_mark: 0,
            _cleanup: guard,
            _cpu_group: cpu_group,
        };
        server.wait_ready(ns, &ready)?;
        Ok(server)
    }

    fn wait_ready(&mut self, ns: &Namespace, ready: &Ready) -> Result<()> {
        let addr = std::net::SocketAddr::new(self.site.ip, self.site.port);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!(
                    "{} exited at start ({status}): {}",
                    self.name,
                    tail(&self.site.work.join("server.stderr"))
                );
            }
            if let Ready::File(f) = ready {
                if f.exists() {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    bail!(
                        "{} did not get ready within 15 s (no {}): {}",
                        self.name,
                        f.display(),
                        tail(&self.site.work.join("server.stderr"))
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            let up = ns.run(move || {
                std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            })?;
            if up {
                // Caddy opens its QUIC listener right after TCP; give it a moment.
                std::thread::sleep(Duration::from_millis(300));
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not accept connections on {addr} within 15 s: {}",
                    self.name,
                    tail(&self.site.work.join("server.stderr"))
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn port(&self) -> u16 {
        self.site.port
    }

    pub fn site(&self) -> &Site {
        &self.site
    }

    /// The protocols the site was configured to offer.
    pub fn offered(&self) -> OfferedProtocols {
        OfferedProtocols {
            h1: self.site.h1,
            h2: self.site.h2,
            h3: self.site.h3,
        }
    }

    /// Marks the start of a run.
    pub fn mark(&mut self) {
        self.log_mark = access_log::mark(&self.site.log);
        self.sink_mark = self.sink.uploads().len();
    }

    /// This run's requests read from the access log in `format` (upload sizes from the sink;
    /// None without a format), and the raw lines.
    pub fn collect(&mut self, format: Option<LogFormat>) -> (Option<Vec<ServerView>>, Value) {
        // Servers write their access log line after the response; give them a moment.
        std::thread::sleep(Duration::from_millis(100));
        let (lines, mark) = access_log::lines_since(&self.site.log, self.log_mark);
        self.log_mark = mark;
        let uploads = self.sink.uploads();
        let new_uploads = &uploads[self.sink_mark.min(uploads.len())..];
        self.sink_mark = uploads.len();
        let views = format.map(|f| {
            let mut views: Vec<ServerView> = lines
                .iter()
                .filter_map(|l| access_log::parse_line(f, l))
                .collect();
            let mut up = new_uploads.iter();
            for v in views
                .iter_mut()
                .filter(|v| v.method == "POST" && v.path == "/upload")
            {
                if let Some(u) = up.next() {
                    v.bytes_received = u.bytes;
                }
            }
            views
        });
        let raw: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!(l)))
            .collect();
        (
            views,
            json!({ "access_log": raw, "uploads": new_uploads.iter().map(|u| json!({"bytes": u.bytes, "duration_ms": u.duration_ms})).collect::<Vec<_>>() }),
        )
    }

    /// What the metadata records about a reference server: its version, command (custom
    /// servers), log, port, protocols, which knobs it takes (`applied`) and the namespace's
    /// TCP congestion control.
    pub fn describe(
        &self,
        version: &str,
        command: Option<&str>,
        log: Option<LogFormat>,
        applied: &[&str],
        namespace_tcp: &NamespaceTcp,
    ) -> ServerDescription {
        let mut not_applicable: Vec<String> =
            KNOBS_NOT_APPLICABLE.iter().map(|k| k.to_string()).collect();
        if !applied.contains(&"protocols") {
            not_applicable.push("protocols".into());
        }
        ServerDescription {
            access_log: log.map(|f| AccessLogDescription {
                format: f.name().into(),
                path: self.site.log.clone(),
            }),
            applied: None,
            command: command.map(str::to_string),
            knobs_applied: Some(applied.iter().map(|k| k.to_string()).collect()),
            knobs_not_applicable: Some(not_applicable),
            knobs_requested: None,
            note: None,
            port: Some(self.site.port),
            protocols: Some(self.offered()),
            server: self.name.clone(),
            tcp_congestion: Some(namespace_tcp.congestion.clone()),
            tcp_congestion_note: namespace_tcp.note.clone(),
            version: version.to_string(),
            windows: Vec::new(),
        }
    }

    /// [`describe`](Self::describe) for a server whose knobs each become one of its
    /// directives (`knobs`: knob, directive): they are listed as applied (`knob → directive`),
    /// and not as not applicable.
    pub fn describe_directives(
        &self,
        version: &str,
        log: Option<LogFormat>,
        knobs: &[(&str, &str)],
        namespace_tcp: &NamespaceTcp,
    ) -> ServerDescription {
        let applied: Vec<&str> = knobs.iter().map(|(k, _)| *k).collect();
        let mut description = self.describe(version, None, log, &applied, namespace_tcp);
        if let Some(na) = description.knobs_not_applicable.as_mut() {
            na.retain(|k| !applied.contains(&k.as_str()));
        }
        description.knobs_applied = Some(knobs.iter().map(|(k, d)| format!("{k} → {d}")).collect());
        description
    }

    /// How the server ended, if it did (with the tail of its output).
    pub fn exit_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "{} exited ({status}): {}",
                self.name,
                tail(&self.site.work.join("server.stderr"))
            )),
            _ => None,
        }
    }

    /// The process group it runs in (pagebench started it; used by the fault-injection hook).
    pub fn process_group(&self) -> i32 {
        self.child.id() as i32
    }
}

fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().rev().take(5).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let pgid = self.child.id() as i32;
        // SAFETY: signalling the process group we created.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A child-process server as a server under test: what Caddy, nginx and `--server-cmd` servers
/// are once started (they differ only in how they start and which log format they write).
pub struct ReferenceServer {
    child: ChildServer,
    /// The access log's format (None: a log pagebench cannot read, so no server view).
    format: Option<LogFormat>,
    description: ServerDescription,
}

impl ReferenceServer {
    pub fn new(
        child: ChildServer,
        format: Option<LogFormat>,
        description: ServerDescription,
    ) -> ReferenceServer {
        ReferenceServer {
            child,
            format,
            description,
        }
    }
}

impl ServerUnderTest for ReferenceServer {
    fn name(&self) -> ServerId {
        self.child.name.clone()
    }

    fn port(&self) -> u16 {
        self.child.port()
    }

    fn offers(&self, p: Protocol) -> bool {
        self.child.offered().offers(p)
    }

    fn mark(&mut self) {
        self.child.mark()
    }

    fn collect(&mut self) -> ServerEvidence {
        let (views, log) = self.child.collect(self.format);
        ServerEvidence {
            views,
            log,
            transport: None,
            summary: None,
            ..ServerEvidence::default()
        }
    }

    fn exited(&mut self) -> Option<String> {
        self.child.exit_status()
    }

    fn process_group(&self) -> Option<i32> {
        Some(self.child.process_group())
    }

    fn describe(&self) -> ServerDescription {
        self.description.clone()
    }
}
