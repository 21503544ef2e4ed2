//! Where the server lives and how it ends: its sockets belong to the network namespace of the
//! thread that started it (so a runner can start it from a thread inside the server namespace),
//! and shutdown closes open connections gracefully instead of cutting them.

mod server_support;

use std::process::Command;
use std::sync::mpsc;

use pagebench::embedded_server::client::ProbeConnection;
use pagebench::embedded_server::{Protocol, ServerKnobs};
use server_support::*;

#[test]
fn sockets_and_threads_live_in_the_callers_network_namespace() {
    let p = pages(&["page10"]);
    let root = p.root.clone();
    let (port_tx, port_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let inside = std::thread::spawn(move || {
        // A fresh, unnamed namespace for this thread only: it vanishes with its last socket.
        if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET) {
            eprintln!("skipped: cannot create a network namespace ({e}); run as root");
            port_tx.send(None).unwrap();
            return;
        }
        // Children inherit the namespace of the thread that spawns them.
        let st = Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(st.success());
        let server = start(&root, ServerKnobs::default(), None);
        let out = curl(
            &server,
            &[
                "--http2",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &url(&server, "/page10/index.html"),
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "200",
            "curl inside the namespace"
        );
        // A runtime whose threads start here is inside too: h3 works from it.
        let cert = server.certificate().cert_der().clone();
        let status = runtime().block_on(async {
            let f = pagebench::embedded_server::client::fetch_once(
                server.addr(),
                Protocol::H3,
                &cert,
                "/page10/index.html",
            )
            .await;
            f.unwrap().status
        });
        assert_eq!(status, 200);
        port_tx.send(Some(server.port())).unwrap();
        let _ = done_rx.recv();
        drop(server);
    });
    let Some(port) = port_rx.recv().unwrap() else {
        inside.join().unwrap();
        return;
    };
    // In this thread's (the root) namespace the port is free on both transports: the server's
    // sockets are not here.
    let tcp = std::net::TcpListener::bind(("127.0.0.1", port));
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port));
    done_tx.send(()).unwrap();
    inside.join().unwrap();
    assert!(
        tcp.is_ok() && udp.is_ok(),
        "port {port} is taken in the root namespace: {tcp:?} {udp:?}"
    );
}

#[test]
fn shutdown_closes_open_connections_gracefully() {
    let p = pages(&["page10"]);
    let mut server = start(&p.root, ServerKnobs::default(), Some(p.log_path()));
    let cert = server.certificate().cert_der().clone();
    let addr = server.addr();
    let rt = runtime();
    // One idle connection per protocol, each after one request.
    let conns = rt.block_on(async {
        let mut v = Vec::new();
        for proto in [Protocol::H1, Protocol::H2, Protocol::H3] {
            let mut c = ProbeConnection::connect(addr, proto, &cert).await.unwrap();
            assert_eq!(c.get("/page10/index.html").await.unwrap().status, 200);
            v.push(c);
        }
        v
    });
    assert_eq!(server.open_connections(), 3);
    server.shutdown();
    let stats = server.transport_stats();
    assert_eq!(stats.len(), 3);
    for s in &stats {
        assert!(s.closed_unix_ms.is_some(), "{s:?}");
        // Not cut off after the grace period. (A client may still close its side untidily:
        // hyper's h2 client drops TCP after GOAWAY without a TLS close_notify.)
        let e = s.error.as_deref().unwrap_or("");
        assert!(
            !e.contains("aborted"),
            "{:?} ended by force, not gracefully: {e}",
            s.protocol
        );
        eprintln!("{:?}: {e:?}", s.protocol);
        assert_eq!(s.requests, 1);
    }
    // The log is flushed and still readable after shutdown.
    assert_eq!(server.requests_since(0).len(), 3);
    assert_eq!(
        std::fs::read_to_string(p.log_path())
            .unwrap()
            .lines()
            .count(),
        3
    );
    // The clients see their connections closed.
    rt.block_on(async {
        for mut c in conns {
            assert!(
                c.get("/page10/index.html").await.is_err(),
                "{:?} still served after shutdown",
                c.protocol()
            );
        }
    });
    server.shutdown(); // idempotent
}
