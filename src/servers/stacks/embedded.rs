//! pagebench's own server (hyper + quinn) as a server under test: it runs inside this process
//! (in the server namespace's threads), takes every knob, and reports each connection's
//! transport statistics beside its request log.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::config::identity::ServerId;
use crate::config::protocol::Protocol;
use crate::config::site_archive::replay::Replay;
use crate::embedded_server::{EmbeddedServer, ServerConfig};
use crate::servers::reference::access_log::record_view;
use crate::servers::server_view::transport_summary;
use crate::servers::{
    Registration, ServerDescription, ServerEvidence, ServerUnderTest, StartContext,
};

pub const SERVER: Registration = Registration {
    name: "embedded",
    speaks: &Protocol::ALL,
    cannot_serve: "",
    start,
};

/// The embedded server, with its marks in the request log and the connection registry.
pub struct Embedded {
    server: EmbeddedServer,
    description: ServerDescription,
    requests_mark: u64,
    connections_mark: u64,
}

fn start(ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
    let config = ServerConfig {
        root: ctx.root.to_path_buf(),
        bind: SocketAddr::new(ctx.ip, ctx.port),
        knobs: ctx.knobs.clone(),
        cert: ctx.cert.clone(),
        log_path: ctx.log_dir.map(|d| d.join("server-requests.jsonl")),
        extra_ports: ctx.site_ports.to_vec(),
    };
    let server = ctx.ns.run(move || EmbeddedServer::start(config))??;
    let description = ServerDescription {
        access_log: None,
        applied: Some(server.knobs_applied().clone()),
        command: None,
        knobs_applied: None,
        knobs_not_applicable: None,
        knobs_requested: Some(ctx.knobs.clone()),
        note: None,
        port: None,
        protocols: None,
        server: SERVER.name.into(),
        tcp_congestion: None,
        tcp_congestion_note: None,
        version: format!(
            "pagebench {} (hyper 1, quinn 0.11, h3 0.0.8)",
            env!("CARGO_PKG_VERSION")
        ),
        windows: Vec::new(),
    };
    Ok(Box::new(Embedded {
        server,
        description,
        requests_mark: 0,
        connections_mark: 0,
    }))
}

impl ServerUnderTest for Embedded {
    fn name(&self) -> ServerId {
        ServerId::new(SERVER.name)
    }

    fn port(&self) -> u16 {
        self.server.port()
    }

    fn offers(&self, p: Protocol) -> bool {
        self.server.knobs_applied().knobs.offers(p)
    }

    fn mark(&mut self) {
        self.requests_mark = self.server.request_log_mark();
        self.connections_mark = self.server.connection_mark();
        // Keys and qlogs of before the mark (the warm-up's, a settle wait's) are not the run's.
        // Connections still open keep their qlog sink, so their later events are lost: runs
        // open fresh connections.
        let _ = self.server.capture().take_keys();
        let _ = self.server.capture().take_qlogs();
    }

    fn set_qlog(&mut self, on: bool) -> bool {
        if self.server.capture().qlog_on() != on {
            self.server.capture().set_qlog(on);
        }
        true
    }

    /// Waits (briefly) until the run's connections are closed so their final transport
    /// statistics are in (only its own: a connection an earlier browser left open until the
    /// idle timeout would otherwise cost every later run the whole wait).
    fn collect(&mut self) -> ServerEvidence {
        let s = &self.server;
        let end = Instant::now() + Duration::from_secs(2);
        while s.open_connections_since(self.connections_mark) > 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        let requests = s.requests_since(self.requests_mark);
        let conns = s.transport_stats_since(self.connections_mark);
        let views = requests.iter().map(record_view).collect();
        ServerEvidence {
            views: Some(views),
            log: serde_json::to_value(&requests).unwrap_or_default(),
            summary: Some(transport_summary(&conns)),
            transport: Some(conns),
            key_log: s.capture().take_keys(),
            qlogs: s.capture().take_qlogs(),
        }
    }

    fn exited(&mut self) -> Option<String> {
        // It lives in this process.
        None
    }

    fn process_group(&self) -> Option<i32> {
        None
    }

    fn tasks(&self) -> Vec<crate::support::contention::Tasks> {
        vec![crate::support::contention::Tasks::Threads {
            pid: std::process::id() as i32,
            tids: self.server.thread_ids(),
        }]
    }

    fn describe(&self) -> ServerDescription {
        self.description.clone()
    }

    fn replay(&mut self, replay: Option<Replay>) -> Result<()> {
        self.server.replay(replay);
        Ok(())
    }
}
