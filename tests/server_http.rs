//! The embedded server speaks h1 and h2 (real curl) and h3 (quinn + h3 client) on one port,
//! with byte-exact bodies, the right headers, uploads, and a log that names the protocol.

mod server_support;

use std::collections::BTreeMap;

use bytes::Bytes;
use pagebench::embedded_server::client::ProbeConnection;
use pagebench::embedded_server::{Protocol, RequestRecord, ServerKnobs};
use server_support::*;

/// Fetches every file of page50 with one curl process (one connection) and checks each body
/// byte for byte, then the server's log: one line per file, the protocol curl used.
fn curl_page50(flag: &str, parallel: bool, expect_protocol: &str) {
    let p = pages(&["page50"]);
    let server = start(&p.root, ServerKnobs::default(), Some(p.log_path()));
    let out_dir = p.dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let urls = p.urls("page50");
    assert_eq!(urls.len(), 51);
    let mut args: Vec<String> = vec![
        flag.into(),
        "-w".into(),
        "%{http_version} %{http_code}\\n".into(),
    ];
    if parallel {
        args.extend(["--parallel".into(), "--parallel-max".into(), "16".into()]);
    }
    for (i, u) in urls.iter().enumerate() {
        args.push(url(&server, u));
        args.push("-o".into());
        args.push(out_dir.join(format!("f{i}")).display().to_string());
    }
    let mark = server.request_log_mark();
    let args_ref: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = curl(&server, &args_ref);
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let versions = String::from_utf8_lossy(&out.stdout);
    let want_version = if expect_protocol == "h2" {
        "2 200"
    } else {
        "1.1 200"
    };
    assert_eq!(
        versions.lines().filter(|l| *l == want_version).count(),
        51,
        "{versions}"
    );
    for (i, u) in urls.iter().enumerate() {
        let got = std::fs::read(out_dir.join(format!("f{i}"))).unwrap();
        assert!(
            got == p.bytes(u),
            "{u}: body differs ({} vs {} bytes)",
            got.len(),
            p.bytes(u).len()
        );
    }
    let log = wait_requests(&server, mark, 51);
    check_log(&log, &p, &urls, expect_protocol);
    // The JSON-lines file holds the same lines.
    let file: Vec<RequestRecord> = std::fs::read_to_string(p.log_path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let memory = server.requests_since(0);
    assert_eq!(file.len(), memory.len());
    for (mut f, m) in file.into_iter().zip(memory) {
        // JSON floats round-trip to within an ulp.
        assert!((f.duration_ms - m.duration_ms).abs() < 1e-9);
        f.duration_ms = m.duration_ms;
        assert_eq!(f, m);
    }
}

fn check_log(log: &[RequestRecord], p: &Pages, urls: &[String], protocol: &str) {
    assert_eq!(log.len(), urls.len(), "one log line per request");
    let by_path: BTreeMap<&str, &RequestRecord> =
        log.iter().map(|r| (r.path.as_str(), r)).collect();
    for u in urls {
        let r = by_path
            .get(u.as_str())
            .unwrap_or_else(|| panic!("{u} not logged"));
        assert_eq!(r.protocol, protocol, "{u}");
        assert_eq!((r.method.as_str(), r.status), ("GET", 200), "{u}");
        assert_eq!(r.bytes_sent, p.bytes(u).len() as u64, "{u}");
        assert!(r.error.is_none(), "{u}: {:?}", r.error);
        assert_eq!(r.client.ip().to_string(), "127.0.0.1");
    }
    let conns: std::collections::BTreeSet<u64> = log.iter().map(|r| r.connection_id).collect();
    assert_eq!(conns.len(), 1, "curl used one connection: {conns:?}");
}

#[test]
fn curl_http1_fetches_page50_byte_exact() {
    curl_page50("--http1.1", false, "http/1.1");
}

#[test]
fn curl_http2_fetches_page50_byte_exact_multiplexed() {
    curl_page50("--http2", true, "h2");
}

#[test]
fn h3_client_fetches_page50_byte_exact() {
    let p = pages(&["page50"]);
    let server = start(&p.root, ServerKnobs::default(), None);
    let urls = p.urls("page50");
    let cert = server_cert(&server);
    let mark = server.request_log_mark();
    let rt = runtime();
    rt.block_on(async {
        let mut c = ProbeConnection::connect(server.addr(), Protocol::H3, &cert)
            .await
            .unwrap();
        for u in &urls {
            let f = c.get(u).await.unwrap();
            assert_eq!(f.status, 200, "{u}");
            assert!(
                f.body.as_ref() == p.bytes(u).as_slice(),
                "{u}: body differs"
            );
            assert_eq!(
                f.headers["content-length"].to_str().unwrap(),
                p.bytes(u).len().to_string()
            );
        }
        c.close().await;
    });
    let log = wait_requests(&server, mark, urls.len());
    check_log(&log, &p, &urls, "h3");
    // h3 lines carry the QUIC stream ids: the n-th request on the connection (lines are
    // written when a response ends, so their order may differ) went on client bidi stream 4n.
    let mut by_seq: Vec<(u64, u64)> = log
        .iter()
        .map(|r| (r.seq_on_connection, r.stream_id.unwrap()))
        .collect();
    by_seq.sort();
    assert_eq!(
        by_seq,
        (0..urls.len() as u64)
            .map(|i| (i, 4 * i))
            .collect::<Vec<_>>()
    );
}

#[test]
fn h3_response_before_the_request_ends_stops_the_request_with_h3_no_error() {
    // RFC 9114 §4.1: a server that answers before the request stream ends asks the client to
    // stop sending with H3_NO_ERROR, and the response is complete.
    let p = pages(&["page10"]);
    let server = start(&p.root, ServerKnobs::default(), None);
    let cert = server_cert(&server);
    let url = p.urls("page10")[0].clone();
    let expected = p.bytes(&url);
    let authority = format!("https://pagebench.test:{}{url}", server.port());
    runtime().block_on(async {
        let mut c = ProbeConnection::connect(server.addr(), Protocol::H3, &cert)
            .await
            .unwrap();
        let send = c.h3_sender().unwrap();
        let req = http::Request::get(authority.as_str()).body(()).unwrap();
        let mut stream = send.send_request(req).await.unwrap();
        let resp = stream.recv_response().await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.unwrap() {
            use bytes::Buf;
            while chunk.has_remaining() {
                let n = chunk.chunk().len();
                body.extend_from_slice(chunk.chunk());
                chunk.advance(n);
            }
        }
        assert!(body == expected, "body differs");
        // Loopback delivers the server's STOP_SENDING well within this, even on a noisy machine.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let err = stream
            .finish()
            .await
            .expect_err("the server stopped reading");
        eprintln!("finish after the response: {err}");
        assert!(err.to_string().contains("H3_NO_ERROR"), "{err}");
        c.close().await;
    });
}

/// The server's certificate as the probe client pins it.
fn server_cert(
    server: &pagebench::embedded_server::EmbeddedServer,
) -> rustls::pki_types::CertificateDer<'static> {
    server.certificate().cert_der().clone()
}

#[test]
fn headers_head_errors_and_content_types() {
    let p = pages(&["page10"]);
    let server = start(&p.root, ServerKnobs::default(), None);
    let css = p
        .manifest("page10")
        .files
        .iter()
        .find(|f| f.path.ends_with(".css"))
        .unwrap()
        .clone();
    for flag in ["--http1.1", "--http2"] {
        // GET with Accept-Encoding: still never compressed, exact length, no-store, Alt-Svc.
        let out = curl(
            &server,
            &[
                flag,
                "-D",
                "-",
                "-o",
                "/dev/null",
                "-H",
                "Accept-Encoding: gzip, br",
                &url(&server, &css.path),
            ],
        );
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(
            head.contains(&format!("content-length: {}", css.size)),
            "{head}"
        );
        assert!(
            head.contains("content-type: text/css; charset=utf-8"),
            "{head}"
        );
        assert!(head.contains("cache-control: no-store"), "{head}");
        assert!(
            head.contains(&format!("alt-svc: h3=\":{}\"; ma=86400", server.port())),
            "{head}"
        );
        assert!(!head.contains("content-encoding"), "{head}");
        // HEAD: the length of the body that is not sent.
        let out = curl(&server, &[flag, "-I", &url(&server, &css.path)]);
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(head.contains(" 200"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", css.size)),
            "{head}"
        );
        // 404, 405 for other methods, 405 for GET /upload.
        for (method, path, code) in [
            ("GET", "/page10/nope.png", "404"),
            ("DELETE", "/page10/index.html", "405"),
            ("PUT", "/page10/index.html", "405"),
            ("GET", "/upload", "405"),
        ] {
            let u = url(&server, path);
            let out = curl(
                &server,
                &[
                    flag,
                    "-X",
                    method,
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    &u,
                ],
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                code,
                "{flag} {method} {path}"
            );
        }
    }
    let mark = server.request_log_mark();
    let out = curl(
        &server,
        &[
            "--http2",
            "-X",
            "DELETE",
            "-D",
            "-",
            "-o",
            "/dev/null",
            &url(&server, "/page10/index.html"),
        ],
    );
    assert!(String::from_utf8_lossy(&out.stdout)
        .to_ascii_lowercase()
        .contains("allow: get, head"));
    let log = wait_requests(&server, mark, 1);
    assert_eq!((log[0].method.as_str(), log[0].status), ("DELETE", 405));
}

#[test]
fn wrong_pin_is_refused_by_curl() {
    // The SPKI hash the server reports is the one its certificate really has: curl checks it
    // independently, and rejects another one.
    let p = pages(&["page10"]);
    let server = start(&p.root, ServerKnobs::default(), None);
    let ok = curl(
        &server,
        &[
            "--http2",
            "-o",
            "/dev/null",
            &url(&server, "/page10/index.html"),
        ],
    );
    assert!(ok.status.success());
    let other = pagebench::embedded_server::Certificate::generate().unwrap();
    let bad = std::process::Command::new("curl")
        .args(["-sS", "-k", "--http2", "-o", "/dev/null", "--resolve"])
        .arg(format!("pagebench.test:{}:127.0.0.1", server.port()))
        .arg("--pinnedpubkey")
        .arg(format!("sha256//{}", other.spki_sha256_base64()))
        .arg(url(&server, "/page10/index.html"))
        .output()
        .unwrap();
    assert_eq!(
        bad.status.code(),
        Some(90),
        "curl exit 90 = pinned key mismatch"
    );
}

#[test]
fn failed_quic_handshakes_are_in_the_transport_stats() {
    // E.g. a browser whose SPKI pin does not match: over QUIC it just fails; the server says so.
    let p = pages(&["page10"]);
    let server = start(&p.root, ServerKnobs::default(), None);
    let other = pagebench::embedded_server::Certificate::generate().unwrap();
    let r = runtime().block_on(ProbeConnection::connect(
        server.addr(),
        Protocol::H3,
        other.cert_der(),
    ));
    assert!(
        r.is_err(),
        "a client pinned to another certificate must fail"
    );
    let stats = wait_closed_stats(&server, 1);
    assert_eq!(stats.len(), 1, "{stats:?}");
    let e = stats[0].error.as_deref().unwrap_or("");
    assert!(e.contains("QUIC handshake failed"), "{e}");
    assert!(stats[0].protocol.is_none() && stats[0].closed_unix_ms.is_some());
}

/// The server's stats once `n` connections are in them and all are closed (a failed handshake
/// is registered when it starts and closed a moment after the client gave up).
fn wait_closed_stats(
    server: &pagebench::embedded_server::EmbeddedServer,
    n: usize,
) -> Vec<pagebench::embedded_server::ConnectionStats> {
    for _ in 0..500 {
        let s = server.transport_stats();
        if s.len() >= n && s.iter().all(|c| c.closed_unix_ms.is_some()) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    server.transport_stats()
}

#[test]
fn uploads_are_counted_on_every_protocol() {
    let p = pages(&["page10"]);
    let server = start(&p.root, ServerKnobs::default(), None);
    let n = 5_000_003usize;
    let body: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let file = p.dir.path().join("up.bin");
    std::fs::write(&file, &body).unwrap();
    let data = format!("@{}", file.display());
    for (flag, proto) in [("--http1.1", "http/1.1"), ("--http2", "h2")] {
        let mark = server.request_log_mark();
        let out = curl(
            &server,
            &[
                flag,
                "--data-binary",
                &data,
                "-H",
                "content-type: application/octet-stream",
                &url(&server, "/upload"),
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["bytes"], n as u64, "{flag}: {j}");
        assert!(j["duration_ms"].as_f64().unwrap() >= 0.0);
        let log = wait_requests(&server, mark, 1);
        assert_eq!(
            (log[0].protocol.as_str(), log[0].method.as_str()),
            (proto, "POST")
        );
        assert_eq!(log[0].bytes_received, n as u64);
    }
    let cert = server_cert(&server);
    let mark = server.request_log_mark();
    runtime().block_on(async {
        let mut c = ProbeConnection::connect(server.addr(), Protocol::H3, &cert)
            .await
            .unwrap();
        let f = c
            .request(http::Method::POST, "/upload", Bytes::from(body.clone()))
            .await
            .unwrap();
        let j: serde_json::Value = serde_json::from_slice(&f.body).unwrap();
        assert_eq!(j["bytes"], n as u64, "h3: {j}");
        c.close().await;
    });
    let log = wait_requests(&server, mark, 1);
    assert_eq!(
        (log[0].protocol.as_str(), log[0].bytes_received),
        ("h3", n as u64)
    );
}

#[test]
fn protocol_subsets_are_what_alpn_offers() {
    let p = pages(&["page10"]);
    let page = "/page10/index.html";
    // h1 only: curl asking for h2 gets http/1.1; no UDP socket, so no Alt-Svc either.
    let server = start(
        &p.root,
        ServerKnobs {
            protocols: Some(vec![Protocol::H1]),
            ..Default::default()
        },
        None,
    );
    let out = curl(
        &server,
        &[
            "--http2",
            "-D",
            "-",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version}",
            &url(&server, page),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(text.ends_with("1.1") && !text.contains("alt-svc"), "{text}");
    assert_eq!(server.knobs_applied().tcp_alpn, vec!["http/1.1"]);
    drop(server);
    // h2 only: an HTTP/1.1-only client fails the TLS handshake (no common ALPN).
    let server = start(
        &p.root,
        ServerKnobs {
            protocols: Some(vec![Protocol::H2]),
            ..Default::default()
        },
        None,
    );
    let out = curl(
        &server,
        &["--http1.1", "-o", "/dev/null", &url(&server, page)],
    );
    assert!(
        !out.status.success(),
        "h1 must be refused when only h2 is offered"
    );
    let out = curl(
        &server,
        &[
            "--http2",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version}",
            &url(&server, page),
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2");
    // The refused handshake's entry is closed (with its error) once the server has dropped it.
    let stats = wait_closed_stats(&server, 2);
    assert!(
        stats
            .iter()
            .any(|s| s.error.as_deref().is_some_and(|e| e.contains("TLS"))),
        "{stats:?}"
    );
}

#[test]
fn h3_off_means_no_udp_socket_and_no_alt_svc() {
    let p = pages(&["page10"]);
    let server = start(
        &p.root,
        ServerKnobs {
            protocols: Some(vec![Protocol::H1, Protocol::H2]),
            ..Default::default()
        },
        None,
    );
    let out = curl(
        &server,
        &[
            "--http2",
            "-D",
            "-",
            "-o",
            "/dev/null",
            &url(&server, "/page10/index.html"),
        ],
    );
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(head.contains(" 200") && !head.contains("alt-svc"), "{head}");
    assert!(server.knobs_applied().alt_svc.is_none());
    // Nothing listens on UDP: the port is free to bind…
    let probe = std::net::UdpSocket::bind(("127.0.0.1", server.port()));
    assert!(
        probe.is_ok(),
        "the server must not hold the UDP port when h3 is off"
    );
    drop(probe);
    // …and a QUIC client gets no answer.
    let cert = server_cert(&server);
    let rt = runtime();
    let r = rt.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_secs(1),
            ProbeConnection::connect(server.addr(), Protocol::H3, &cert),
        )
        .await
    });
    assert!(
        !matches!(r, Ok(Ok(_))),
        "h3 must not connect when h3 is off"
    );
}

#[test]
fn transport_stats_cover_tcp_and_quic_connections() {
    let p = pages(&["download"]);
    let server = start(&p.root, ServerKnobs::default(), None);
    let path = &p.manifest("download").files[0].path;
    let out = curl(
        &server,
        &["--http2", "-o", "/dev/null", &url(&server, path)],
    );
    assert!(out.status.success());
    let cert = server_cert(&server);
    let rt = runtime();
    let conn_mark = server.connection_mark();
    let open_snapshot = rt.block_on(async {
        let mut c = ProbeConnection::connect(server.addr(), Protocol::H3, &cert)
            .await
            .unwrap();
        let f = c.get(path).await.unwrap();
        assert_eq!(f.body.len(), 3_000_000);
        let snap = server.transport_stats_since(conn_mark);
        c.close().await;
        snap
    });
    // While open: a snapshot with live numbers.
    assert_eq!(open_snapshot.len(), 1);
    let q = open_snapshot[0].quic.as_ref().unwrap();
    assert!(open_snapshot[0].closed_unix_ms.is_none());
    assert!(
        q.udp_tx_bytes > 3_000_000 && q.sent_packets > 2000 && q.cwnd > 0 && q.rtt_us > 0,
        "{q:?}"
    );
    assert_eq!(q.congestion_controller, "cubic");
    // After closing: final numbers of both connections.
    let mut all = server.transport_stats();
    for _ in 0..500 {
        if all.iter().all(|s| s.closed_unix_ms.is_some()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        all = server.transport_stats();
    }
    assert_eq!(all.len(), 2, "{all:?}");
    let tcp = &all[0];
    assert_eq!((tcp.protocol.as_deref(), tcp.requests), (Some("h2"), 1));
    let t = tcp.tcp.as_ref().unwrap();
    assert!(
        t.bytes_acked.unwrap() >= 3_000_000 && t.snd_cwnd > 0 && t.rtt_us > 0,
        "{t:?}"
    );
    assert!(tcp.closed_unix_ms.is_some() && tcp.handshake_ms.is_some());
    let quic = &all[1];
    assert_eq!((quic.protocol.as_deref(), quic.requests), (Some("h3"), 1));
    assert!(quic.closed_unix_ms.is_some(), "{quic:?}");
    assert!(
        quic.error.is_none(),
        "closed with H3_NO_ERROR is clean: {:?}",
        quic.error
    );
    assert!(serde_json::to_string(&all)
        .unwrap()
        .contains("\"transport\":\"quic\""));
}
