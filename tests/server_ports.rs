//! A port already in use on TCP or on UDP is one clear error at start: never a second server
//! silently sharing the port (or answering on only one of the two transports).

mod server_support;

use std::net::{TcpListener, UdpSocket};

use pagebench::embedded_server::{
    Certificate, EmbeddedServer, Protocol, ServerConfig, ServerKnobs,
};
use server_support::*;

fn try_start(
    root: &std::path::Path,
    port: u16,
    knobs: ServerKnobs,
) -> anyhow::Result<EmbeddedServer> {
    try_start_with(root, port, knobs, vec![])
}

fn try_start_with(
    root: &std::path::Path,
    port: u16,
    knobs: ServerKnobs,
    extra_ports: Vec<u16>,
) -> anyhow::Result<EmbeddedServer> {
    EmbeddedServer::start(ServerConfig {
        root: root.to_path_buf(),
        bind: format!("127.0.0.1:{port}").parse().unwrap(),
        knobs,
        cert: Certificate::generate().unwrap(),
        log_path: None,
        extra_ports,
    })
}

/// A UDP port whose TCP twin is free, held by the returned socket.
fn udp_taken_tcp_free() -> (UdpSocket, u16) {
    for _ in 0..50 {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = u.local_addr().unwrap().port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return (u, port);
        }
    }
    panic!("no UDP port with a free TCP twin");
}

#[test]
fn tcp_port_in_use_is_a_clear_error() {
    let p = pages(&["page10"]);
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let err = format!(
        "{:#}",
        try_start(&p.root, port, ServerKnobs::default())
            .err()
            .expect("must fail")
    );
    assert!(
        err.contains(&format!("port {port}/tcp")) && err.contains("already in use"),
        "{err}"
    );
    // Also when the holder listens on the wildcard address.
    drop(holder);
    let holder = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let err = format!(
        "{:#}",
        try_start(&p.root, port, ServerKnobs::default())
            .err()
            .expect("must fail")
    );
    assert!(err.contains("already in use"), "{err}");
}

/// A replayed site's origin on another port: the server listens there too, and a port in use
/// is refused naming what needed it.
#[test]
fn a_site_port_is_served_too_or_refused_clearly() {
    let p = pages(&["page10"]);
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port();
    let err = format!(
        "{:#}",
        try_start_with(&p.root, 0, ServerKnobs::default(), vec![taken])
            .err()
            .expect("must fail")
    );
    assert!(
        err.contains(&format!("needs port {taken}")) && err.contains("already in use"),
        "{err}"
    );
    drop(holder);
    let server = try_start_with(&p.root, 0, ServerKnobs::default(), vec![taken]).unwrap();
    assert_ne!(server.port(), taken);
    // Both ports answer (TLS on either; the port taken again is refused while it runs).
    for port in [server.port(), taken] {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
            "port {port}"
        );
    }
    assert!(TcpListener::bind(("127.0.0.1", taken)).is_err());
}

#[test]
fn udp_port_in_use_is_a_clear_error() {
    let p = pages(&["page10"]);
    let (_holder, port) = udp_taken_tcp_free();
    let err = format!(
        "{:#}",
        try_start(&p.root, port, ServerKnobs::default())
            .err()
            .expect("must fail")
    );
    assert!(
        err.contains(&format!("port {port}/udp")) && err.contains("already in use"),
        "{err}"
    );
    assert!(
        err.contains("--server-protocols h1,h2"),
        "the error says how to go on: {err}"
    );
    // The failed start left nothing behind: the TCP port is free again.
    assert!(TcpListener::bind(("127.0.0.1", port)).is_ok());
    // Without h3 the UDP port is not needed.
    let knobs = ServerKnobs {
        protocols: Some(vec![Protocol::H1, Protocol::H2]),
        ..Default::default()
    };
    let server = try_start(&p.root, port, knobs).expect("h1+h2 do not need UDP");
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
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
}

#[test]
fn a_second_server_on_the_same_port_fails() {
    let p = pages(&["page10"]);
    let first = start(&p.root, ServerKnobs::default(), None);
    let port = first.port();
    let err = format!(
        "{:#}",
        try_start(&p.root, port, ServerKnobs::default())
            .err()
            .expect("must fail")
    );
    assert!(err.contains("already in use"), "{err}");
    // h3 only: the UDP side conflicts too.
    let knobs = ServerKnobs {
        protocols: Some(vec![Protocol::H3]),
        ..Default::default()
    };
    let err = format!(
        "{:#}",
        try_start(&p.root, port, knobs).err().expect("must fail")
    );
    assert!(err.contains(&format!("port {port}/udp")), "{err}");
}

#[test]
fn port_zero_picks_a_port_free_on_tcp_and_udp() {
    let p = pages(&["page10"]);
    for _ in 0..5 {
        let server = start(&p.root, ServerKnobs::default(), None);
        let port = server.port();
        assert_ne!(port, 0);
        // The server holds both: nobody else can bind either.
        assert!(TcpListener::bind(("127.0.0.1", port)).is_err());
        assert!(UdpSocket::bind(("127.0.0.1", port)).is_err());
    }
}
