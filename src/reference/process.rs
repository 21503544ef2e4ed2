//! A reference server as a child process inside the server namespace: started from a generated
//! config (or the user's command), waited for until its port answers, its JSON access log read
//! per run, stopped by signalling the process group it was started in.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::access_log::{self, LogFormat};
use super::config::{self, Site};
use super::sink::UploadSink;
use crate::netem::Namespace;
use crate::signals;
use crate::validate::ServerView;

/// Which reference server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Caddy,
    Nginx,
    /// A user's command line with placeholders (see [`config::expand_command`]).
    Command(CustomServer),
}

/// A user's server: its command line and, when named, the access log that gives runs their
/// third viewpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomServer {
    pub command: String,
    pub log: Option<CustomLog>,
}

/// Where a custom server logs and in which format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomLog {
    pub format: LogFormat,
    /// The log file, placeholders allowed; `None`: the `{log}` path the command was given.
    pub path: Option<String>,
}

impl Kind {
    pub fn name(&self) -> &str {
        match self {
            Kind::Caddy => "caddy",
            Kind::Nginx => "nginx",
            Kind::Command(_) => "custom",
        }
    }
}

/// A running reference server.
pub struct ExternalServer {
    kind: Kind,
    child: Child,
    site: Site,
    sink: UploadSink,
    version: String,
    log_mark: u64,
    sink_mark: usize,
    _cleanup: signals::CleanupGuard,
}

/// `caddy version` / `nginx -v` output, for the metadata.
fn version_of(kind: &Kind) -> String {
    let out = match kind {
        Kind::Caddy => Command::new("caddy").arg("version").output(),
        Kind::Nginx => Command::new("nginx").arg("-v").output(),
        Kind::Command(_) => return "user command".into(),
    };
    match out {
        Ok(o) => {
            let s = String::from_utf8_lossy(&o.stdout).to_string()
                + &String::from_utf8_lossy(&o.stderr);
            s.lines().next().unwrap_or("").trim().to_string()
        }
        Err(_) => "not installed".into(),
    }
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

impl ExternalServer {
    /// Starts `kind` in `ns`, serving `site` (whose `sink_port` is replaced by the sink this
    /// starts). Waits until the TCP port accepts connections (and, for h3, a little longer).
    pub fn start(kind: Kind, ns: &Namespace, mut site: Site) -> Result<ExternalServer> {
        let program = match &kind {
            Kind::Caddy => "caddy",
            Kind::Nginx => "nginx",
            Kind::Command(_) => "sh",
        };
        if !which(program) {
            bail!("--server {}: `{program}` is not installed (./setup.sh installs Debian's caddy and nginx-light)", kind.name());
        }
        if kind == Kind::Nginx && site.h3 {
            bail!("--server nginx: Debian's nginx 1.22 has no HTTP/3; drop h3 from --protocols, or use --server caddy, or --server-cmd with an nginx built with QUIC");
        }
        std::fs::create_dir_all(&site.work)
            .with_context(|| format!("cannot create {}", site.work.display()))?;
        let sink = ns.run(UploadSink::start)??;
        site.sink_port = sink.port();
        let _ = std::fs::File::create(&site.log);
        let mut cmd = match &kind {
            Kind::Caddy => {
                let path = site.work.join("Caddyfile");
                std::fs::write(&path, config::caddyfile(&site))?;
                let mut c = ns.command("caddy");
                c.args(["run", "--adapter", "caddyfile", "--config"])
                    .arg(&path);
                c.env("HOME", &site.work)
                    .env("XDG_DATA_HOME", site.work.join("data"))
                    .env("XDG_CONFIG_HOME", site.work.join("config"));
                c
            }
            Kind::Nginx => {
                let path = site.work.join("nginx.conf");
                std::fs::write(&path, config::nginx_conf(&site))?;
                for d in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
                    std::fs::create_dir_all(site.work.join(d))?;
                }
                let mut c = ns.command("nginx");
                c.arg("-c")
                    .arg(&path)
                    .arg("-p")
                    .arg(&site.work)
                    .arg("-e")
                    .arg(site.work.join("error.log"));
                c
            }
            Kind::Command(custom) => {
                if let Some(path) = custom.log.as_ref().and_then(|l| l.path.as_ref()) {
                    let expanded = config::expand_command(path, &site)
                        .map_err(|e| anyhow::anyhow!("--server-log: {e}"))?;
                    site.log = PathBuf::from(expanded);
                    let _ = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&site.log);
                }
                let line =
                    config::expand_command(&custom.command, &site).map_err(anyhow::Error::msg)?;
                let mut c = ns.command("sh");
                c.arg("-c").arg(line);
                c
            }
        };
        let stderr = std::fs::File::create(site.work.join("server.stderr"))?;
        cmd.stdin(Stdio::null())
            .stdout(stderr.try_clone()?)
            .stderr(stderr)
            .process_group(0);
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", kind.name()))?;
        let pgid = child.id() as i32;
        let guard = signals::register_cleanup(move || {
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        });
        let mut server = ExternalServer {
            version: version_of(&kind),
            kind,
            child,
            site,
            sink,
            log_mark: 0,
            sink_mark: 0,
            _cleanup: guard,
        };
        server.wait_ready(ns)?;
        Ok(server)
    }

    fn wait_ready(&mut self, ns: &Namespace) -> Result<()> {
        let addr = std::net::SocketAddr::new(self.site.ip, self.site.port);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!(
                    "{} exited at start ({status}): {}",
                    self.kind.name(),
                    tail(&self.site.work.join("server.stderr"))
                );
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
                    self.kind.name(),
                    tail(&self.site.work.join("server.stderr"))
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn name(&self) -> &str {
        self.kind.name()
    }

    pub fn port(&self) -> u16 {
        self.site.port
    }

    /// Marks the start of a run.
    pub fn mark(&mut self) {
        self.log_mark = access_log::mark(&self.site.log);
        self.sink_mark = self.sink.uploads().len();
    }

    /// This run's requests (from the access log; upload sizes from the sink), and the raw lines.
    /// A custom command without `--server-log-format` gives no server view.
    pub fn collect(&mut self) -> (Option<Vec<ServerView>>, Value) {
        // Servers write their access log line after the response; give them a moment.
        std::thread::sleep(Duration::from_millis(100));
        let (lines, mark) = access_log::lines_since(&self.site.log, self.log_mark);
        self.log_mark = mark;
        let uploads = self.sink.uploads();
        let new_uploads = &uploads[self.sink_mark.min(uploads.len())..];
        self.sink_mark = uploads.len();
        let format = match &self.kind {
            Kind::Caddy => Some(LogFormat::Caddy),
            Kind::Nginx => Some(LogFormat::Nginx),
            Kind::Command(c) => c.log.as_ref().map(|l| l.format),
        };
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

    /// What the metadata records about this server.
    pub fn describe(&self) -> Value {
        // The embedded server's knobs that a reference server does not take from pagebench
        // (TCP congestion control comes from the namespace default, see the testbed).
        let mut not_applicable = vec![
            "h2_max_concurrent_streams",
            "h2_initial_stream_window",
            "h2_initial_connection_window",
            "h3_max_concurrent_streams",
            "h3_stream_receive_window",
            "h3_connection_receive_window",
            "h3_send_buffer",
            "quic_congestion",
            "udp_recv_buffer",
            "udp_send_buffer",
            "gso",
            "alt_svc_over_h3",
        ];
        if matches!(self.kind, Kind::Command(_)) {
            not_applicable.push("protocols");
        }
        let applied: Vec<&str> = if matches!(self.kind, Kind::Command(_)) {
            vec![]
        } else {
            vec!["protocols"]
        };
        json!({
            "server": self.kind.name(),
            "version": self.version,
            "command": match &self.kind { Kind::Command(c) => c.command.clone(), _ => String::new() },
            "access_log": match &self.kind {
                Kind::Command(CustomServer { log: None, .. }) => json!(null),
                _ => json!({ "path": self.site.log, "format": match &self.kind {
                    Kind::Caddy => LogFormat::Caddy.name(),
                    Kind::Nginx => LogFormat::Nginx.name(),
                    Kind::Command(c) => c.log.as_ref().map_or("", |l| l.format.name()),
                } }),
            },
            "port": self.site.port,
            "protocols": { "h1": self.site.h1, "h2": self.site.h2, "h3": self.site.h3 },
            "knobs_applied": applied,
            "knobs_not_applicable": not_applicable,
        })
    }

    pub fn work_dir(&self) -> PathBuf {
        self.site.work.clone()
    }

    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// How the server ended, if it did (with the tail of its output).
    pub fn exit_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "{} exited ({status}): {}",
                self.kind.name(),
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

impl Drop for ExternalServer {
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
