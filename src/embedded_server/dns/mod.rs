//! pagebench's own resolver: the IO shell around [`zone::Zone`]. It listens on UDP and TCP port
//! 53 of an address of its own in the server namespace (so every lookup crosses the emulated
//! link), answers from the zone of the current run, holds an answer back as the zone says, and
//! keeps every lookup (what was asked, over what, when asked and answered) for the run's record.

pub mod zone;

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;

use crate::link::netns::Namespace;
pub use zone::{check_dns_name, HttpsService, Said, Zone, ZoneName};

/// The DNS port.
pub const DNS_PORT: u16 = 53;

/// One lookup as the resolver saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lookup {
    #[serde(flatten)]
    pub said: Said,
    /// `udp` or `tcp`.
    pub transport: String,
    /// Wall-clock times (ms since the Unix epoch) the query arrived and the answer left.
    pub asked_unix_ms: f64,
    pub answered_unix_ms: f64,
}

/// What the serving thread shares with its owner.
#[derive(Default)]
struct Shared {
    zone: Mutex<Arc<Zone>>,
    lookups: Mutex<Vec<Lookup>>,
}

/// A running resolver; stopped (and its thread joined) on drop.
pub struct DnsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl DnsServer {
    /// Binds UDP and TCP `ip`:53 in `ns` and serves `zone` until dropped.
    pub fn start(ns: &Namespace, ip: IpAddr, zone: Zone) -> Result<DnsServer> {
        let addr = SocketAddr::new(ip, DNS_PORT);
        let shared = Arc::new(Shared {
            zone: Mutex::new(Arc::new(zone)),
            lookups: Mutex::default(),
        });
        let (stop, stopped) = watch::channel(false);
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<()>>(1);
        let for_thread = shared.clone();
        let thread = ns.spawn_thread("dns", move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.into()));
                    return;
                }
            };
            rt.block_on(async move {
                let bound = bind(addr).await;
                match bound {
                    Ok((udp, tcp)) => {
                        let _ = ready_tx.send(Ok(()));
                        serve(udp, tcp, for_thread, stopped).await;
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        })?;
        ready_rx
            .recv()
            .context("the resolver's thread ended before binding")?
            .with_context(|| format!("starting the resolver on {addr}"))?;
        Ok(DnsServer {
            addr,
            shared,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers from `zone` from now on.
    pub fn set_zone(&self, zone: Zone) {
        *self.shared.zone.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(zone);
    }

    /// The lookups since the last call, in arrival order.
    pub fn take_lookups(&self) -> Vec<Lookup> {
        std::mem::take(
            &mut *self
                .shared
                .lookups
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<(UdpSocket, TcpListener)> {
    let udp = UdpSocket::bind(addr)
        .await
        .with_context(|| format!("binding UDP {addr}"))?;
    let tcp = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding TCP {addr}"))?;
    Ok((udp, tcp))
}

/// Answers datagrams and TCP connections until told to stop.
async fn serve(
    udp: UdpSocket,
    tcp: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let udp = Arc::new(udp);
    let mut buf = vec![0u8; 65535];
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            got = udp.recv_from(&mut buf) => {
                let Ok((n, from)) = got else { continue };
                let (query, shared, udp) = (buf[..n].to_vec(), shared.clone(), udp.clone());
                tokio::spawn(async move {
                    if let Some((reply, asked)) = answer(&shared, &query, true).await {
                        let _ = udp.send_to(&reply.bytes, from).await;
                        note(&shared, reply.said, "udp", asked);
                    }
                });
            }
            conn = tcp.accept() => {
                if let Ok((stream, _)) = conn {
                    tokio::spawn(serve_tcp(stream, shared.clone()));
                }
            }
        }
    }
}

/// Length-prefixed queries on one TCP connection (RFC 1035 §4.2.2), answered in turn.
async fn serve_tcp(mut stream: TcpStream, shared: Arc<Shared>) {
    loop {
        let mut len = [0u8; 2];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if stream.read_exact(&mut query).await.is_err() {
            return;
        }
        let Some((reply, asked)) = answer(&shared, &query, false).await else {
            return;
        };
        let len = (reply.bytes.len() as u16).to_be_bytes();
        if stream.write_all(&len).await.is_err() || stream.write_all(&reply.bytes).await.is_err() {
            return;
        }
        note(&shared, reply.said, "tcp", asked);
    }
}

/// The zone's reply to `query`, after the hold it asks for, and when the query came.
async fn answer(shared: &Shared, query: &[u8], over_udp: bool) -> Option<(zone::Reply, f64)> {
    let asked = unix_ms();
    let zone = shared
        .zone
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let reply = zone.answer(query, over_udp)?;
    if !reply.hold.is_zero() {
        tokio::time::sleep(reply.hold).await;
    }
    Some((reply, asked))
}

fn note(shared: &Shared, said: Said, transport: &str, asked: f64) {
    let lookup = Lookup {
        said,
        transport: transport.to_string(),
        asked_unix_ms: asked,
        answered_unix_ms: unix_ms(),
    };
    shared
        .lookups
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(lookup);
}

fn unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}
