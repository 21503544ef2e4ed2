//! Competing traffic (`cross_traffic` of a profile): pagebench's own flows through the emulated
//! bottleneck, so a load shares the link as it would at home or on a busy cell. A sink listens
//! in one namespace (the client's for `down`), senders in the other connect to it:
//!
//! - `tcp`: each flow sends as fast as its congestion control (cubic) lets it, and connects
//!   again when its connection breaks (an outage, NAT rebinding);
//! - `udp-cbr`: each flow sends 1200-byte datagrams at a constant rate.
//!
//! The flows run as long as the link has the profile (also between runs, so a run's load meets
//! flows in their steady state); the sink counts each flow's bytes (payload), taken per interval
//! with the link's counters. Every thread checks a stop flag at least every 200 ms.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::link_stats::CrossFlowBytes;
use super::nat::SINK_PORT;
use super::netns::Namespace;
use crate::config::profile::{CrossDirection, CrossProtocol, CrossTraffic};

/// Payload of a `udp-cbr` datagram.
pub const UDP_PAYLOAD: usize = 1200;
/// How often blocked threads look at the stop flag.
const TICK: Duration = Duration::from_millis(200);

#[derive(Default)]
struct FlowCounter {
    bytes: AtomicU64,
    reconnects: AtomicU64,
}

/// Running competing flows; stopped (threads joined) on drop.
pub struct CrossFlows {
    spec: CrossTraffic,
    stop: Arc<AtomicBool>,
    counters: Vec<Arc<FlowCounter>>,
    /// Counter values at the last take.
    taken: Vec<(u64, u64)>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for CrossFlows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossFlows")
            .field("spec", &self.spec)
            .finish()
    }
}

fn protocol_name(p: CrossProtocol) -> &'static str {
    match p {
        CrossProtocol::Tcp => "tcp",
        CrossProtocol::UdpCbr => "udp-cbr",
    }
}

impl CrossFlows {
    /// Starts the sink and the senders of `spec` between the two namespaces.
    pub fn start(
        spec: &CrossTraffic,
        client: &Namespace,
        server: &Namespace,
        client_ip: Ipv4Addr,
        server_ip: Ipv4Addr,
    ) -> Result<CrossFlows> {
        let (sink_ns, sink_ip, send_ns) = match spec.direction {
            CrossDirection::Down => (client, client_ip, server),
            CrossDirection::Up => (server, server_ip, client),
        };
        let sink_addr = SocketAddr::from((sink_ip, SINK_PORT));
        let mut flows = CrossFlows {
            spec: spec.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            counters: (0..spec.flows)
                .map(|_| Arc::new(FlowCounter::default()))
                .collect(),
            taken: vec![(0, 0); spec.flows as usize],
            threads: Vec::new(),
        };
        match spec.protocol {
            CrossProtocol::Tcp => {
                let listener = sink_ns
                    .run(move || TcpListener::bind(sink_addr))?
                    .with_context(|| format!("binding the cross-traffic sink on {sink_addr}"))?;
                listener.set_nonblocking(true)?;
                let (stop, counters) = (flows.stop.clone(), flows.counters.clone());
                flows.threads.push(
                    std::thread::Builder::new()
                        .name("cross-sink".into())
                        .spawn(move || tcp_sink(listener, stop, counters))?,
                );
                for i in 0..spec.flows {
                    let (stop, counter) = (flows.stop.clone(), flows.counters[i as usize].clone());
                    flows
                        .threads
                        .push(send_ns.spawn_thread("cross-tcp", move || {
                            tcp_sender(i, sink_addr, stop, counter)
                        })?);
                }
            }
            CrossProtocol::UdpCbr => {
                let sink = sink_ns
                    .run(move || UdpSocket::bind(sink_addr))?
                    .with_context(|| format!("binding the cross-traffic sink on {sink_addr}"))?;
                sink.set_read_timeout(Some(TICK))?;
                let (stop, counters) = (flows.stop.clone(), flows.counters.clone());
                flows.threads.push(
                    std::thread::Builder::new()
                        .name("cross-sink".into())
                        .spawn(move || udp_sink(sink, stop, counters))?,
                );
                let rate = spec.rate_mbit.unwrap_or(1.0) * 1e6;
                for i in 0..spec.flows {
                    let stop = flows.stop.clone();
                    flows.threads.push(
                        send_ns.spawn_thread("cross-udp", move || {
                            udp_sender(i, sink_addr, rate, stop)
                        })?,
                    );
                }
            }
        }
        Ok(flows)
    }

    pub fn spec(&self) -> &CrossTraffic {
        &self.spec
    }

    /// Each flow's bytes and reconnects since the last take (or the start).
    pub fn take(&mut self) -> Vec<CrossFlowBytes> {
        self.counters
            .iter()
            .zip(self.taken.iter_mut())
            .enumerate()
            .map(|(i, (c, taken))| {
                let now = (
                    c.bytes.load(Ordering::Relaxed),
                    c.reconnects.load(Ordering::Relaxed),
                );
                let out = CrossFlowBytes {
                    flow: i as u32,
                    protocol: protocol_name(self.spec.protocol).into(),
                    direction: match self.spec.direction {
                        CrossDirection::Down => "down".into(),
                        CrossDirection::Up => "up".into(),
                    },
                    bytes: now.0 - taken.0,
                    reconnects: now.1 - taken.1,
                };
                *taken = now;
                out
            })
            .collect()
    }
}

impl Drop for CrossFlows {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Accepts the senders' connections; each first sends its flow number (4 bytes).
fn tcp_sink(listener: TcpListener, stop: Arc<AtomicBool>, counters: Vec<Arc<FlowCounter>>) {
    let mut readers: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let (stop, counters) = (stop.clone(), counters.clone());
                if let Ok(t) = std::thread::Builder::new()
                    .name("cross-read".into())
                    .spawn(move || tcp_reader(conn, stop, counters))
                {
                    readers.push(t);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => std::thread::sleep(TICK),
        }
        readers.retain(|t| !t.is_finished());
    }
    for t in readers {
        let _ = t.join();
    }
}

fn tcp_reader(mut conn: TcpStream, stop: Arc<AtomicBool>, counters: Vec<Arc<FlowCounter>>) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(TICK));
    let mut id = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match conn.read(&mut id[got..]) {
            Ok(0) => return,
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
    let Some(counter) = counters.get(u32::from_be_bytes(id) as usize) else {
        return;
    };
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                counter.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// One bulk TCP flow: connect, send as fast as possible, connect again when it breaks.
fn tcp_sender(i: u32, sink: SocketAddr, stop: Arc<AtomicBool>, counter: Arc<FlowCounter>) {
    let chunk = vec![0x5au8; 64 * 1024];
    let mut first = true;
    while !stop.load(Ordering::Relaxed) {
        if !first {
            counter.reconnects.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(TICK);
        }
        first = false;
        let Ok(mut conn) = TcpStream::connect_timeout(&sink, Duration::from_secs(2)) else {
            continue;
        };
        // The same controller as the embedded server's (cubic), whatever the host default.
        let _ = socket2::SockRef::from(&conn).set_tcp_congestion(b"cubic");
        let _ = conn.set_write_timeout(Some(TICK));
        if conn.write_all(&i.to_be_bytes()).is_err() {
            continue;
        }
        let mut broken = false;
        while !stop.load(Ordering::Relaxed) && !broken {
            match conn.write(&chunk) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => broken = true,
            }
        }
    }
}

fn udp_sink(sink: UdpSocket, stop: Arc<AtomicBool>, counters: Vec<Arc<FlowCounter>>) {
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, _)) = sink.recv_from(&mut buf) {
            if n >= 4 {
                let id = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                if let Some(c) = counters.get(id) {
                    c.bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
    }
}

/// One constant-rate UDP flow: a datagram every `UDP_PAYLOAD × 8 / rate` seconds, on an
/// absolute schedule (a late wake-up sends what it owes, up to 100 ms' worth).
fn udp_sender(i: u32, sink: SocketAddr, rate_bps: f64, stop: Arc<AtomicBool>) {
    let Ok(sock) = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)) else {
        return;
    };
    if sock.connect(sink).is_err() {
        return;
    }
    let mut payload = vec![0u8; UDP_PAYLOAD];
    payload[..4].copy_from_slice(&i.to_be_bytes());
    let gap = Duration::from_secs_f64(UDP_PAYLOAD as f64 * 8.0 / rate_bps);
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if next > now {
            std::thread::sleep((next - now).min(TICK));
            continue;
        }
        if now - next > Duration::from_millis(100) {
            next = now;
        }
        // A full socket buffer or an unreachable sink is the link's doing: keep the schedule.
        let _ = sock.send(&payload);
        next += gap;
    }
}
