//! `pagebench serve`: the embedded server on this machine, for a browser of your own.
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use super::args::ServeArgs;
use crate::embedded_server::{self, Certificate, EmbeddedServer, ServerConfig, ServerKnobs};
use crate::{config::locations, config::workload, support::signals};

pub fn serve(a: ServeArgs) -> Result<ExitCode> {
    signals::install();
    let root = locations::pages_root(a.pages.as_deref(), workload::DEFAULT_SEED)?;
    let mut knobs = match &a.server_config {
        Some(p) => ServerKnobs::load_toml(p)?,
        None => ServerKnobs::default(),
    };
    knobs = knobs.overlay(&a.knobs).with_default_tcp_congestion();
    let cert = if a.fresh_cert {
        let mut c = Certificate::generate()?;
        c.write_pem(&a.cert_dir)?;
        c
    } else {
        Certificate::load_or_create(&a.cert_dir)?
    };
    let mut srv = EmbeddedServer::start(ServerConfig {
        root: root.clone(),
        bind: SocketAddr::new(a.bind, a.port),
        knobs,
        cert: cert.clone(),
        log_path: a.log.clone(),
        extra_ports: Vec::new(),
    })?;
    let applied = srv.knobs_applied().clone();
    let port = srv.port();
    let offered: Vec<&str> = applied.knobs.protocols.iter().map(|p| p.name()).collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "pagebench serve: {} on {} (protocols {})",
        root.display(),
        srv.addr(),
        offered.join(",")
    )?;
    writeln!(out, "port: {port}")?;
    writeln!(out, "spki: {}", srv.spki())?;
    if let (Some(c), Some(k)) = (cert.cert_path(), cert.key_path()) {
        writeln!(out, "cert: {}  key: {}", c.display(), k.display())?;
    }
    writeln!(
        out,
        "chromium: --ignore-certificate-errors-spki-list={} --host-resolver-rules=\"MAP {} {}, MAP * ~NOTFOUND\" https://{}:{port}/page10/",
        srv.spki(),
        embedded_server::cert::HOST,
        srv.addr().ip(),
        embedded_server::cert::HOST
    )?;
    writeln!(
        out,
        "knobs applied: {}",
        serde_json::to_string_pretty(&applied)?
    )?;
    let ready = serde_json::json!({
        "port": port,
        "spki": srv.spki(),
        "cert": cert.cert_path(),
        "key": cert.key_path(),
        "applied": applied,
    });
    writeln!(out, "ready {ready}")?;
    out.flush()?;
    drop(out);
    while !signals::interrupted() {
        std::thread::sleep(Duration::from_millis(100));
    }
    srv.shutdown();
    let requests = srv.requests_since(0).len();
    let connections = srv.transport_stats().len();
    println!("pagebench serve: stopped after {requests} requests on {connections} connections");
    Ok(ExitCode::SUCCESS)
}
