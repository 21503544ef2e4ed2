//! The h3 per-stream send buffer caps a single stream at `buffer / RTT`, on a real delayed path:
//! a userspace UDP relay on loopback that holds every datagram for a fixed one-way delay (FIFO,
//! no loss), between a quinn + h3 client and the embedded server.
//!
//! The bounds asserted are physical ones: with at most B bytes unacknowledged, a stream cannot
//! move more than B per round trip, whatever the machine's load (noise only slows transfers).
//! The lower bounds have wide margins and use medians of three.

mod server_support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Buf;
use pagebench::embedded_server::{sockets, tls_config, ByteSize, EmbeddedServer, ServerKnobs};
use server_support::*;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

const ONE_WAY: Duration = Duration::from_millis(20);
const RTT_S: f64 = 0.040;
const BUFFER: u64 = 64 * 1024;
const WORKLOAD: &str = "download1500kb";
const SIZE: usize = 1_500_000;
const REPS: usize = 3;

/// Forwards datagrams client ↔ server, each released `one_way` after it arrived.
struct DelayRelay {
    addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for DelayRelay {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn relay_socket() -> Arc<tokio::net::UdpSocket> {
    let (s, _) =
        sockets::udp_socket("127.0.0.1:0".parse().unwrap(), Some(8 << 20), Some(8 << 20)).unwrap();
    Arc::new(tokio::net::UdpSocket::from_std(s).unwrap())
}

async fn delay_relay(server: SocketAddr, one_way: Duration) -> DelayRelay {
    let front = relay_socket(); // faces the client
    let back = relay_socket(); // faces the server
    let client: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
    let mut tasks = Vec::new();
    type Queue = (
        mpsc::UnboundedSender<(Instant, Vec<u8>)>,
        mpsc::UnboundedReceiver<(Instant, Vec<u8>)>,
    );
    let (up_tx, mut up_rx): Queue = mpsc::unbounded_channel();
    let (down_tx, mut down_rx): Queue = mpsc::unbounded_channel();
    {
        let (front, client) = (front.clone(), client.clone());
        tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, from)) = front.recv_from(&mut buf).await {
                *client.lock().unwrap() = Some(from);
                let _ = up_tx.send((Instant::now() + one_way, buf[..n].to_vec()));
            }
        }));
    }
    {
        let back = back.clone();
        tasks.push(tokio::spawn(async move {
            while let Some((due, pkt)) = up_rx.recv().await {
                tokio::time::sleep_until(due.into()).await;
                let _ = back.send_to(&pkt, server).await;
            }
        }));
    }
    {
        let back = back.clone();
        tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, _)) = back.recv_from(&mut buf).await {
                let _ = down_tx.send((Instant::now() + one_way, buf[..n].to_vec()));
            }
        }));
    }
    {
        let (front, client) = (front.clone(), client.clone());
        tasks.push(tokio::spawn(async move {
            while let Some((due, pkt)) = down_rx.recv().await {
                tokio::time::sleep_until(due.into()).await;
                let to = *client.lock().unwrap();
                if let Some(to) = to {
                    let _ = front.send_to(&pkt, to).await;
                }
            }
        }));
    }
    DelayRelay {
        addr: front.local_addr().unwrap(),
        tasks,
    }
}

/// On a fresh connection through the relay, fetches `streams` copies of the file at once;
/// returns each stream's duration (request → last byte), in seconds.
async fn fetch_through(
    relay: SocketAddr,
    server: &EmbeddedServer,
    path: &str,
    streams: usize,
) -> Vec<f64> {
    let crypto =
        tls_config::pinned_client_config(server.certificate().cert_der(), &[b"h3"], true).unwrap();
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).unwrap();
    let (sock, _) =
        sockets::udp_socket("127.0.0.1:0".parse().unwrap(), Some(8 << 20), None).unwrap();
    let mut endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        sock,
        Arc::new(quinn::TokioRuntime),
    )
    .unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    let conn = endpoint
        .connect(relay, "pagebench.test")
        .unwrap()
        .await
        .unwrap();
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .unwrap();
    tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let uri = format!("https://pagebench.test:{}{path}", server.port());
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..streams {
        let mut send = send.clone();
        let uri = uri.clone();
        set.spawn(async move {
            let t0 = Instant::now();
            let mut s = send
                .send_request(http::Request::get(uri).body(()).unwrap())
                .await
                .unwrap();
            s.finish().await.unwrap();
            assert_eq!(s.recv_response().await.unwrap().status(), 200);
            let mut n = 0;
            while let Some(mut c) = s.recv_data().await.unwrap() {
                n += c.remaining();
                c.advance(c.remaining());
            }
            assert_eq!(n, SIZE);
            t0.elapsed().as_secs_f64()
        });
    }
    let took = set.join_all().await;
    conn.close(quinn::VarInt::from_u32(0x100), b"");
    endpoint.wait_idle().await;
    took
}

/// Median throughput (bytes/s) of `REPS` transfers of `streams` parallel streams; for several
/// streams, the aggregate (all bytes / the slowest stream's time).
fn throughput(send_buffer: Option<u64>, streams: usize) -> f64 {
    let p = pages(&[WORKLOAD]);
    let path = p.manifest(WORKLOAD).files[0].path.clone();
    let knobs = ServerKnobs {
        h3_send_buffer: send_buffer.map(ByteSize),
        ..Default::default()
    };
    let server = start(&p.root, knobs, None);
    let rt = runtime();
    let samples: Vec<f64> = rt.block_on(async {
        let relay = delay_relay(server.addr(), ONE_WAY).await;
        let mut v = Vec::new();
        for _ in 0..REPS {
            let took = fetch_through(relay.addr, &server, &path, streams).await;
            let slowest = took.iter().cloned().fold(0.0, f64::max);
            v.push((SIZE * streams) as f64 / slowest);
        }
        v
    });
    eprintln!(
        "send buffer {send_buffer:?}, {streams} stream(s): {:?} MB/s (cap B/RTT = {:.2} MB/s)",
        samples
            .iter()
            .map(|t| (t / 1e4).round() / 100.0)
            .collect::<Vec<_>>(),
        BUFFER as f64 / RTT_S / 1e6
    );
    median(samples)
}

#[test]
fn one_h3_stream_is_capped_at_buffer_per_rtt() {
    let cap = BUFFER as f64 / RTT_S;
    let capped = throughput(Some(BUFFER), 1);
    assert!(
        capped <= 1.05 * cap,
        "a single stream exceeded buffer/RTT: {capped:.0} B/s > {cap:.0}"
    );
    assert!(
        capped >= 0.5 * cap,
        "far below buffer/RTT: {capped:.0} B/s vs {cap:.0}"
    );
    // The same transfer with quinn's default (10 MB) window goes well beyond that cap.
    let free = throughput(None, 1);
    assert!(
        free >= 1.5 * cap,
        "default window {free:.0} B/s, buffer/RTT {cap:.0} B/s"
    );
}

#[test]
fn each_h3_stream_gets_its_own_buffer() {
    // Two streams at once: were the buffer shared by the connection, together they could not
    // exceed buffer/RTT; per stream, they move about twice that.
    let cap = BUFFER as f64 / RTT_S;
    let both = throughput(Some(BUFFER), 2);
    assert!(
        both >= 1.2 * cap,
        "two streams together {both:.0} B/s, one stream's cap {cap:.0}"
    );
    assert!(
        both <= 2.1 * cap,
        "two streams exceeded 2 × buffer/RTT: {both:.0} B/s"
    );
}
