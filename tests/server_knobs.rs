//! Every knob is applied for real and observed from outside the server: the peer's QUIC
//! transport parameters and blocked stream opens (h3), the SETTINGS frame on the wire (h2),
//! the congestion controller of each live connection (QUIC and TCP), the kernel's socket
//! buffers (`ss`), and GSO batching in quinn's send counters.

mod server_support;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Buf;
use pagebench::embedded_server::client::ProbeConnection;
use pagebench::embedded_server::{
    tls_config, ByteSize, EmbeddedServer, Protocol, QuicCongestion, ServerKnobs, TcpCongestion,
};
use quinn_proto::crypto::{
    self, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey, Session,
};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, ConnectionId, Side, TransportError};
use server_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// ---- the peer's QUIC transport parameters, as the client's TLS session decoded them ----------

/// Wraps quinn's rustls client crypto and keeps the server's transport parameters.
struct CaptureParams {
    inner: Arc<quinn::crypto::rustls::QuicClientConfig>,
    seen: Arc<Mutex<Option<Vec<u8>>>>,
}

impl crypto::ClientConfig for CaptureParams {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn Session>, ConnectError> {
        let inner = self
            .inner
            .clone()
            .start_session(version, server_name, params)?;
        Ok(Box::new(CaptureSession {
            inner,
            seen: self.seen.clone(),
        }))
    }
}

struct CaptureSession {
    inner: Box<dyn Session>,
    seen: Arc<Mutex<Option<Vec<u8>>>>,
}

impl Session for CaptureSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }
    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()
    }
    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }
    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.early_crypto()
    }
    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }
    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }
    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        self.inner.read_handshake(buf)
    }
    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        let r = self.inner.transport_parameters();
        if let Ok(Some(tp)) = &r {
            // Re-encode to the wire format and decode it independently below.
            let mut wire = Vec::new();
            tp.write(&mut wire);
            *self.seen.lock().unwrap() = Some(wire);
        }
        r
    }
    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        self.inner.write_handshake(buf)
    }
    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys()
    }
    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }
    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

/// RFC 9000 §16 variable-length integer.
fn varint(b: &mut &[u8]) -> u64 {
    let len = 1usize << (b[0] >> 6);
    let mut v = (b[0] & 0x3f) as u64;
    for i in 1..len {
        v = (v << 8) | b[i] as u64;
    }
    *b = &b[len..];
    v
}

/// RFC 9000 §18: id → value of the integer-valued transport parameters.
fn decode_params(mut wire: &[u8]) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    while !wire.is_empty() {
        let id = varint(&mut wire);
        let len = varint(&mut wire) as usize;
        let (value, rest) = wire.split_at(len);
        if (0x01..=0x0e).contains(&id) && !value.is_empty() && id != 0x02 && id != 0x0d {
            let mut v = value;
            out.insert(id, varint(&mut v));
        }
        wire = rest;
    }
    out
}

const INITIAL_MAX_DATA: u64 = 0x04;
const INITIAL_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
const INITIAL_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;

fn quic_client(
    server: &EmbeddedServer,
    transport: Option<quinn::TransportConfig>,
) -> (quinn::ClientConfig, Arc<Mutex<Option<Vec<u8>>>>) {
    let crypto =
        tls_config::pinned_client_config(server.certificate().cert_der(), &[b"h3"], true).unwrap();
    let inner = Arc::new(quinn::crypto::rustls::QuicClientConfig::try_from(crypto).unwrap());
    let seen = Arc::new(Mutex::new(None));
    let mut cfg = quinn::ClientConfig::new(Arc::new(CaptureParams {
        inner,
        seen: seen.clone(),
    }));
    if let Some(t) = transport {
        cfg.transport_config(Arc::new(t));
    }
    (cfg, seen)
}

fn peer_params(server: &EmbeddedServer) -> BTreeMap<u64, u64> {
    let (cfg, seen) = quic_client(server, None);
    runtime().block_on(async {
        let c = ProbeConnection::connect_h3(server.addr(), cfg)
            .await
            .unwrap();
        c.close().await;
    });
    let wire = seen
        .lock()
        .unwrap()
        .clone()
        .expect("transport parameters seen");
    decode_params(&wire)
}

#[test]
fn h3_receive_limits_are_the_peer_transport_parameters() {
    let p = pages(&["page10"]);
    let defaults = start(&p.root, ServerKnobs::default(), None);
    let tp = peer_params(&defaults);
    assert_eq!(tp[&INITIAL_MAX_STREAMS_BIDI], 100);
    assert_eq!(tp[&INITIAL_MAX_STREAM_DATA_BIDI_REMOTE], 1_250_000);
    assert_eq!(tp[&INITIAL_MAX_DATA], (1 << 62) - 1);
    drop(defaults);
    let knobs = ServerKnobs {
        h3_max_concurrent_streams: Some(7),
        h3_stream_receive_window: Some(ByteSize(200_000)),
        h3_connection_receive_window: Some(ByteSize(900_000)),
        ..Default::default()
    };
    let server = start(&p.root, knobs, None);
    let tp = peer_params(&server);
    assert_eq!(tp[&INITIAL_MAX_STREAMS_BIDI], 7, "{tp:?}");
    assert_eq!(tp[&INITIAL_MAX_STREAM_DATA_BIDI_REMOTE], 200_000, "{tp:?}");
    assert_eq!(tp[&INITIAL_MAX_STREAM_DATA_BIDI_LOCAL], 200_000, "{tp:?}");
    assert_eq!(tp[&INITIAL_MAX_DATA], 900_000, "{tp:?}");
}

/// Opens requests for a large file without reading them (a tiny client receive window keeps
/// the server's streams open), then one more: it must block exactly when the limit is reached.
fn third_request_blocks(max_streams: u64) -> bool {
    let p = pages(&["download"]);
    let server = start(
        &p.root,
        ServerKnobs {
            h3_max_concurrent_streams: Some(max_streams),
            ..Default::default()
        },
        None,
    );
    let big = p.manifest("download").files[0].path.clone();
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u32(16 * 1024));
    let (cfg, _) = quic_client(&server, Some(t));
    let authority = format!("https://pagebench.test:{}", server.port());
    runtime().block_on(async move {
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(cfg);
        let conn = endpoint
            .connect(server.addr(), "pagebench.test")
            .unwrap()
            .await
            .unwrap();
        let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .unwrap();
        tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        let get = |path: &str| {
            http::Request::get(format!("{authority}{path}"))
                .body(())
                .unwrap()
        };
        let mut open = Vec::new();
        for _ in 0..2 {
            let mut s = send.send_request(get(&big)).await.unwrap();
            s.finish().await.unwrap();
            assert_eq!(s.recv_response().await.unwrap().status(), 200);
            open.push(s);
        }
        let third = tokio::time::timeout(
            Duration::from_millis(800),
            send.send_request(get("/download/index.html")),
        )
        .await;
        let blocked = third.is_err();
        drop(third);
        // Reading one stream to its end frees a slot: the next request goes through.
        let mut first = open.remove(0);
        let mut n = 0;
        while let Some(mut c) = first.recv_data().await.unwrap() {
            n += c.remaining();
            c.advance(c.remaining());
        }
        assert_eq!(n, 3_000_000);
        drop(first);
        let mut s = tokio::time::timeout(
            Duration::from_secs(10),
            send.send_request(get("/download/index.html")),
        )
        .await
        .expect("a slot must free up")
        .unwrap();
        s.finish().await.unwrap();
        assert_eq!(s.recv_response().await.unwrap().status(), 200);
        conn.close(quinn::VarInt::from_u32(0x100), b"");
        blocked
    })
}

#[test]
fn h3_max_concurrent_streams_blocks_the_next_stream() {
    assert!(
        third_request_blocks(2),
        "with 2 streams allowed, a third must wait"
    );
    assert!(
        !third_request_blocks(3),
        "with 3 allowed, the third opens at once"
    );
}

// ---- QUIC congestion controllers ------------------------------------------------------------

fn quic_download_with(cc: QuicCongestion, name: &str) {
    let p = pages(&["download"]);
    let server = start(
        &p.root,
        ServerKnobs {
            quic_congestion: Some(cc),
            ..Default::default()
        },
        None,
    );
    assert_eq!(server.knobs_applied().knobs.quic_congestion, cc);
    let path = p.manifest("download").files[0].path.clone();
    let want = p.bytes(&path);
    let cert = server.certificate().cert_der().clone();
    let live = runtime().block_on(async {
        let mut c = ProbeConnection::connect(server.addr(), Protocol::H3, &cert)
            .await
            .unwrap();
        let f = c.get(&path).await.unwrap();
        assert!(f.body.as_ref() == want.as_slice(), "{name}: body differs");
        let live = server.transport_stats();
        c.close().await;
        live
    });
    let q = live[0].quic.as_ref().unwrap();
    assert_eq!(
        q.congestion_controller, name,
        "the live connection's controller"
    );
    assert!(q.udp_tx_bytes > 3_000_000);
}

#[test]
fn quic_cubic_transfer_completes() {
    quic_download_with(QuicCongestion::Cubic, "cubic");
}

#[test]
fn quic_newreno_transfer_completes() {
    quic_download_with(QuicCongestion::Newreno, "newreno");
}

#[test]
fn quic_bbr_transfer_completes() {
    quic_download_with(QuicCongestion::Bbr, "bbr");
}

// ---- TCP congestion control per socket --------------------------------------------------------

fn tcp_download_with(cc: TcpCongestion) {
    let name = cc.kernel_name();
    let avail =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    if !avail.split_whitespace().any(|n| n == name) {
        eprintln!("skipped: {name} is not available in this kernel ({avail})");
        return;
    }
    let p = pages(&["download"]);
    let server = start(
        &p.root,
        ServerKnobs {
            tcp_congestion: Some(cc),
            ..Default::default()
        },
        None,
    );
    assert_eq!(server.knobs_applied().tcp_congestion.as_deref(), Some(name));
    let path = p.manifest("download").files[0].path.clone();
    let out_file = p.dir.path().join("out.bin");
    for flag in ["--http1.1", "--http2"] {
        let out = curl(
            &server,
            &[flag, "-o", out_file.to_str().unwrap(), &url(&server, &path)],
        );
        assert!(out.status.success());
        assert!(std::fs::read(&out_file).unwrap() == p.bytes(&path));
    }
    std::thread::sleep(Duration::from_millis(100));
    let stats = server.transport_stats();
    assert_eq!(stats.len(), 2);
    for s in stats {
        let t = s.tcp.unwrap();
        assert_eq!(
            t.congestion_control.as_deref(),
            Some(name),
            "TCP_CONGESTION of the accepted socket"
        );
        assert!(t.bytes_acked.unwrap() >= 3_000_000);
    }
}

#[test]
fn tcp_cubic_per_socket() {
    tcp_download_with(TcpCongestion::Cubic);
}

#[test]
fn tcp_reno_per_socket() {
    tcp_download_with(TcpCongestion::Reno);
}

#[test]
fn tcp_bbr_per_socket() {
    tcp_download_with(TcpCongestion::Bbr);
}

// ---- UDP socket buffers and GSO ---------------------------------------------------------------

/// `rb`/`tb` of the UDP socket on `port`, as `ss` reports it (the kernel's own view).
fn ss_buffers(port: u16) -> (u64, u64) {
    let out = std::process::Command::new("ss")
        .args(["-uamnH"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.contains(&format!("127.0.0.1:{port} ")) {
            let mem = if l.contains("skmem:") {
                l.to_string()
            } else {
                lines.next().unwrap().to_string()
            };
            let field = |key: &str| -> u64 {
                let i = mem.find(key).unwrap() + key.len();
                mem[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit())
                    .collect::<String>()
                    .parse()
                    .unwrap()
            };
            return (field(",rb"), field(",tb"));
        }
    }
    panic!("port {port} not in ss output:\n{text}");
}

#[test]
fn udp_buffers_are_applied_and_reported_as_the_kernel_sees_them() {
    let p = pages(&["page10"]);
    let knobs = ServerKnobs {
        udp_recv_buffer: Some(ByteSize(6 << 20)),
        udp_send_buffer: Some(ByteSize(3 << 20)),
        ..Default::default()
    };
    let server = start(&p.root, knobs, None);
    let a = server.knobs_applied();
    let (rcv, snd) = (
        a.udp_recv_buffer.clone().unwrap(),
        a.udp_send_buffer.clone().unwrap(),
    );
    let (rb, tb) = ss_buffers(server.port());
    assert_eq!(
        (rcv.applied, snd.applied),
        (rb, tb),
        "the report is the kernel's value"
    );
    if unsafe { libc::geteuid() } == 0 {
        // As root the FORCE options pass net.core.rmem_max; the kernel doubles the request.
        assert_eq!(rcv.method, "SO_RCVBUFFORCE");
        assert_eq!((rcv.applied, snd.applied), (12 << 20, 6 << 20));
        assert!(!rcv.clamped && !snd.clamped);
    } else {
        assert_eq!(rcv.method, "SO_RCVBUF");
    }
    // Unset: the kernel default, reported as such.
    let plain = start(&p.root, ServerKnobs::default(), None);
    let r = plain.knobs_applied().udp_recv_buffer.clone().unwrap();
    assert_eq!((r.requested, r.method.as_str()), (None, "kernel default"));
    assert_eq!(r.applied, ss_buffers(plain.port()).0);
}

/// Sends 3 MB over h3 and returns (datagrams, send calls) of the server's connection.
fn gso_counts(gso: bool) -> (u64, u64, Option<usize>) {
    let p = pages(&["download"]);
    let server = start(
        &p.root,
        ServerKnobs {
            gso: Some(gso),
            ..Default::default()
        },
        None,
    );
    let path = p.manifest("download").files[0].path.clone();
    let cert = server.certificate().cert_der().clone();
    let stats = runtime().block_on(async {
        let mut c = ProbeConnection::connect(server.addr(), Protocol::H3, &cert)
            .await
            .unwrap();
        assert_eq!(c.get(&path).await.unwrap().body.len(), 3_000_000);
        let s = server.transport_stats();
        c.close().await;
        s
    });
    let q = stats[0].quic.clone().unwrap();
    (
        q.udp_tx_datagrams,
        q.udp_tx_ios,
        server.knobs_applied().gso_max_segments,
    )
}

#[test]
fn gso_switch_changes_how_quinn_sends() {
    let (dgrams_off, ios_off, _) = gso_counts(false);
    assert_eq!(
        dgrams_off, ios_off,
        "without GSO every datagram is its own send call"
    );
    let (dgrams_on, ios_on, segs) = gso_counts(true);
    eprintln!("GSO off: {dgrams_off} datagrams in {ios_off} sends; on: {dgrams_on} in {ios_on}");
    if segs.unwrap_or(1) <= 1 {
        eprintln!("skipped the GSO-on half: the kernel offers no UDP GSO here");
        return;
    }
    assert!(
        ios_on * 2 < dgrams_on,
        "with GSO, datagrams are batched: {ios_on} sends for {dgrams_on} datagrams"
    );
}

// ---- h2 SETTINGS on the wire ------------------------------------------------------------------

/// Reads the server's first SETTINGS frame and connection-level WINDOW_UPDATE from a raw h2
/// connection: (settings id → value, connection window increment).
fn h2_settings(server: &EmbeddedServer) -> (BTreeMap<u16, u32>, u32) {
    let crypto =
        tls_config::pinned_client_config(server.certificate().cert_der(), &[b"h2"], false).unwrap();
    let addr = server.addr();
    runtime().block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("pagebench.test").unwrap();
        let mut s = tokio_rustls::TlsConnector::from(Arc::new(crypto))
            .connect(name, tcp)
            .await
            .unwrap();
        assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap(); // empty SETTINGS
        s.flush().await.unwrap();
        let (mut settings, mut window) = (None, 0u32);
        let read = async {
            while settings.is_none() || window == 0 {
                let mut h = [0u8; 9];
                s.read_exact(&mut h).await.unwrap();
                let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
                let (kind, flags) = (h[3], h[4]);
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                let mut payload = vec![0u8; len];
                s.read_exact(&mut payload).await.unwrap();
                match kind {
                    4 if flags & 1 == 0 => {
                        settings = Some(
                            payload
                                .chunks(6)
                                .map(|c| {
                                    (
                                        u16::from_be_bytes([c[0], c[1]]),
                                        u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                                    )
                                })
                                .collect::<BTreeMap<_, _>>(),
                        );
                    }
                    8 if stream == 0 => {
                        window =
                            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                                & 0x7fff_ffff
                    }
                    _ => {}
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("SETTINGS and WINDOW_UPDATE arrive");
        (settings.unwrap(), window)
    })
}

const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

#[test]
fn h2_settings_on_the_wire_match_the_knobs() {
    let p = pages(&["page10"]);
    let knobs = ServerKnobs {
        h2_max_concurrent_streams: Some(7),
        h2_initial_stream_window: Some(ByteSize(100_000)),
        h2_initial_connection_window: Some(ByteSize(3_000_000)),
        ..Default::default()
    };
    let server = start(&p.root, knobs, None);
    let (settings, conn_increment) = h2_settings(&server);
    assert_eq!(
        settings[&SETTINGS_MAX_CONCURRENT_STREAMS], 7,
        "{settings:?}"
    );
    assert_eq!(
        settings[&SETTINGS_INITIAL_WINDOW_SIZE], 100_000,
        "{settings:?}"
    );
    // The connection window starts at 65535; the server raises it to the knob at once.
    assert_eq!(65_535 + conn_increment, 3_000_000);
    let defaults = start(&p.root, ServerKnobs::default(), None);
    let (settings, conn_increment) = h2_settings(&defaults);
    assert_eq!(settings[&SETTINGS_MAX_CONCURRENT_STREAMS], 200);
    assert_eq!(settings[&SETTINGS_INITIAL_WINDOW_SIZE], 1 << 20);
    assert_eq!(65_535 + conn_increment, 1 << 20);
    // An upload larger than the stream window still completes (the server grants more).
    let up = p.dir.path().join("up.bin");
    std::fs::write(&up, vec![5u8; 1_000_000]).unwrap();
    let out = curl(
        &server,
        &[
            "--http2",
            "--data-binary",
            &format!("@{}", up.display()),
            &url(&server, "/upload"),
        ],
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["bytes"], 1_000_000);
}
