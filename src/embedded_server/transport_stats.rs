//! Transport statistics per connection: `TCP_INFO` for TCP, quinn's connection stats for QUIC,
//! taken when a connection closes and on demand for the ones still open.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::log::unix_ms;

const MAX_CLOSED: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Tcp,
    Quic,
}

/// One connection's statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionStats {
    pub connection_id: u64,
    pub transport: Transport,
    pub client: SocketAddr,
    /// The client's address at the end (QUIC: it changes when the connection migrates, e.g.
    /// after NAT rebinding); `None` for TCP, whose address cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_last: Option<SocketAddr>,
    /// `http/1.1`, `h2` or `h3`; `None` if the handshake did not get that far.
    pub protocol: Option<String>,
    pub opened_unix_ms: u64,
    /// `None` while the connection is open (an on-demand snapshot).
    pub closed_unix_ms: Option<u64>,
    /// TLS (TCP) or QUIC handshake time as the server measured it.
    pub handshake_ms: Option<f64>,
    /// Whether the TLS handshake resumed a session (a ticket the server issued before); known
    /// for TCP (rustls says so; a QUIC connection's is read from its packets instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resumed: Option<bool>,
    pub requests: u64,
    /// Why the connection ended, if not cleanly.
    pub error: Option<String>,
    pub tcp: Option<TcpInfo>,
    pub quic: Option<QuicInfo>,
}

/// From the kernel's `TCP_INFO` (server side). Fields the running kernel does not fill are
/// `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// The socket's congestion control (`TCP_CONGESTION`), read back from the kernel.
    pub congestion_control: Option<String>,
    pub state: u8,
    /// Retransmissions of the current unacknowledged segment (tcpi_retransmits).
    pub retransmits: u8,
    /// Retransmitted segments over the connection's life (tcpi_total_retrans).
    pub total_retrans: u32,
    pub lost: u32,
    /// Congestion window, in segments of `snd_mss` bytes.
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub snd_mss: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: Option<u32>,
    pub rto_us: u32,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
    pub segs_out: Option<u32>,
    pub segs_in: Option<u32>,
    pub delivery_rate: Option<u64>,
    pub busy_time_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub snd_wnd: Option<u32>,
}

/// From quinn's `Connection::stats()` (server side).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicInfo {
    /// Read back from the live connection's controller (`cubic`, `newreno`, `bbr`).
    pub congestion_controller: String,
    pub rtt_us: u64,
    pub min_rtt_us: u64,
    pub cwnd: u64,
    pub congestion_events: u64,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    pub sent_packets: u64,
    pub udp_tx_bytes: u64,
    pub udp_tx_datagrams: u64,
    /// Send system calls: fewer than datagrams when GSO batches them.
    pub udp_tx_ios: u64,
    pub udp_rx_bytes: u64,
    pub udp_rx_datagrams: u64,
    pub current_mtu: u16,
    pub black_holes_detected: u64,
}

/// Reads `TCP_INFO` from a TCP socket.
pub fn tcp_info(fd: BorrowedFd<'_>) -> std::io::Result<TcpInfo> {
    // SAFETY: tcp_info is plain old data; getsockopt writes at most `len` bytes into it.
    let mut raw: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let len = len as usize;
    // A field is valid when the kernel's struct reaches past its end.
    macro_rules! opt {
        ($f:ident) => {{
            let end = std::mem::offset_of!(libc::tcp_info, $f) + std::mem::size_of_val(&raw.$f);
            (len >= end).then_some(raw.$f)
        }};
    }
    Ok(TcpInfo {
        congestion_control: tcp_congestion(fd).ok(),
        state: raw.tcpi_state,
        retransmits: raw.tcpi_retransmits,
        total_retrans: raw.tcpi_total_retrans,
        lost: raw.tcpi_lost,
        snd_cwnd: raw.tcpi_snd_cwnd,
        snd_ssthresh: raw.tcpi_snd_ssthresh,
        snd_mss: raw.tcpi_snd_mss,
        rtt_us: raw.tcpi_rtt,
        rttvar_us: raw.tcpi_rttvar,
        min_rtt_us: opt!(tcpi_min_rtt),
        rto_us: raw.tcpi_rto,
        bytes_acked: opt!(tcpi_bytes_acked),
        bytes_received: opt!(tcpi_bytes_received),
        bytes_sent: opt!(tcpi_bytes_sent),
        bytes_retrans: opt!(tcpi_bytes_retrans),
        segs_out: opt!(tcpi_segs_out),
        segs_in: opt!(tcpi_segs_in),
        delivery_rate: opt!(tcpi_delivery_rate),
        busy_time_us: opt!(tcpi_busy_time),
        rwnd_limited_us: opt!(tcpi_rwnd_limited),
        sndbuf_limited_us: opt!(tcpi_sndbuf_limited),
        snd_wnd: opt!(tcpi_snd_wnd),
    })
}

/// The congestion control of a TCP socket, as the kernel reports it.
pub fn tcp_congestion(fd: BorrowedFd<'_>) -> std::io::Result<String> {
    let name = socket2::SockRef::from(&fd).tcp_congestion()?;
    Ok(String::from_utf8_lossy(&name)
        .trim_end_matches('\0')
        .to_string())
}

/// The name of the controller a live quinn connection is using.
pub fn quic_controller_name(conn: &quinn::Connection) -> String {
    use quinn::congestion::{Bbr, Cubic, NewReno};
    let any = conn.congestion_state().into_any();
    if any.is::<Cubic>() {
        "cubic".into()
    } else if any.is::<NewReno>() {
        "newreno".into()
    } else if any.is::<Bbr>() {
        "bbr".into()
    } else {
        "unknown".into()
    }
}

pub fn quic_info(conn: &quinn::Connection) -> QuicInfo {
    let s = conn.stats();
    QuicInfo {
        congestion_controller: quic_controller_name(conn),
        rtt_us: s.path.rtt.as_micros() as u64,
        min_rtt_us: conn.min_rtt().as_micros() as u64,
        cwnd: s.path.cwnd,
        congestion_events: s.path.congestion_events,
        lost_packets: s.path.lost_packets,
        lost_bytes: s.path.lost_bytes,
        sent_packets: s.path.sent_packets,
        udp_tx_bytes: s.udp_tx.bytes,
        udp_tx_datagrams: s.udp_tx.datagrams,
        udp_tx_ios: s.udp_tx.ios,
        udp_rx_bytes: s.udp_rx.bytes,
        udp_rx_datagrams: s.udp_rx.datagrams,
        current_mtu: s.path.current_mtu,
        black_holes_detected: s.path.black_holes_detected,
    }
}

/// How to read an open connection's numbers.
pub(crate) enum Probe {
    /// A duplicate of the socket's fd, so reading never races with the fd being closed.
    Tcp(Arc<OwnedFd>),
    Quic(quinn::Connection),
    /// Nothing left to read (e.g. a QUIC handshake that failed).
    None,
}

struct Open {
    stats: ConnectionStats,
    probe: Probe,
}

impl Open {
    fn snapshot(&self) -> ConnectionStats {
        let mut s = self.stats.clone();
        match &self.probe {
            Probe::Tcp(fd) => {
                use std::os::fd::AsFd;
                s.tcp = tcp_info(fd.as_fd()).ok();
            }
            Probe::Quic(c) => {
                s.quic = Some(quic_info(c));
                s.client_last = Some(c.remote_address());
            }
            Probe::None => {}
        }
        s
    }
}

/// All connections of one server.
pub(crate) struct Registry {
    next_id: AtomicU64,
    open: Mutex<BTreeMap<u64, Open>>,
    closed: Mutex<VecDeque<ConnectionStats>>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry {
            next_id: AtomicU64::new(1),
            open: Mutex::new(BTreeMap::new()),
            closed: Mutex::new(VecDeque::new()),
        }
    }

    fn open_map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Open>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn closed_list(&self) -> std::sync::MutexGuard<'_, VecDeque<ConnectionStats>> {
        self.closed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new connection and returns its id.
    pub fn open(&self, transport: Transport, client: SocketAddr, probe: Probe) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let stats = ConnectionStats {
            connection_id: id,
            transport,
            client,
            client_last: None,
            protocol: None,
            opened_unix_ms: unix_ms(SystemTime::now()),
            closed_unix_ms: None,
            handshake_ms: None,
            tls_resumed: None,
            requests: 0,
            error: None,
            tcp: None,
            quic: None,
        };
        self.open_map().insert(id, Open { stats, probe });
        id
    }

    pub fn established(&self, id: u64, protocol: &str, handshake_ms: f64) {
        if let Some(o) = self.open_map().get_mut(&id) {
            o.stats.protocol = Some(protocol.to_string());
            o.stats.handshake_ms = Some(handshake_ms);
        }
    }

    /// Whether the connection's TLS handshake resumed a session.
    pub fn resumed(&self, id: u64, resumed: bool) {
        if let Some(o) = self.open_map().get_mut(&id) {
            o.stats.tls_resumed = Some(resumed);
        }
    }

    /// Counts a request on the connection; returns its 0-based sequence number.
    pub fn next_request(&self, id: u64) -> u64 {
        match self.open_map().get_mut(&id) {
            Some(o) => {
                o.stats.requests += 1;
                o.stats.requests - 1
            }
            None => 0,
        }
    }

    /// Takes the final numbers and moves the connection to the closed list.
    pub fn close(&self, id: u64, error: Option<String>) {
        let Some(open) = self.open_map().remove(&id) else {
            return;
        };
        let mut s = open.snapshot();
        s.closed_unix_ms = Some(unix_ms(SystemTime::now()));
        s.error = error;
        drop(open);
        let mut closed = self.closed_list();
        closed.push_back(s);
        if closed.len() > MAX_CLOSED {
            closed.pop_front();
        }
    }

    /// The id the next connection will get.
    pub fn mark(&self) -> u64 {
        self.next_id.load(Ordering::SeqCst)
    }

    /// Closed connections with ids ≥ `mark`, then snapshots of the open ones, by id.
    pub fn since(&self, mark: u64) -> Vec<ConnectionStats> {
        let mut out: Vec<ConnectionStats> = self
            .closed_list()
            .iter()
            .filter(|s| s.connection_id >= mark)
            .cloned()
            .collect();
        out.extend(self.open_map().range(mark..).map(|(_, o)| o.snapshot()));
        out.sort_by_key(|s| s.connection_id);
        out
    }

    pub fn open_count(&self) -> usize {
        self.open_map().len()
    }

    /// Open connections with ids ≥ `mark` (a run's own, when `mark` is its start).
    pub fn open_count_since(&self, mark: u64) -> usize {
        self.open_map().range(mark..).count()
    }
}

/// Closes a connection's registry entry when dropped, also when its task is aborted.
pub(crate) struct ConnGuard {
    registry: Arc<Registry>,
    pub id: u64,
    pub error: Option<String>,
}

impl ConnGuard {
    pub fn new(
        registry: Arc<Registry>,
        transport: Transport,
        client: SocketAddr,
        probe: Probe,
    ) -> ConnGuard {
        let id = registry.open(transport, client, probe);
        ConnGuard {
            registry,
            id,
            // Overwritten by the connection's task when it ends on its own.
            error: Some("aborted at server shutdown".into()),
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.registry.close(self.id, self.error.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn tcp_info_of_a_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        std::io::Write::write_all(&mut c, &[7u8; 10_000]).unwrap();
        let info = tcp_info(c.as_fd()).unwrap();
        assert_eq!(info.state, 1, "TCP_ESTABLISHED");
        assert!(info.snd_cwnd > 0 && info.snd_mss > 0);
        assert!(info.bytes_sent.is_some(), "kernel 4.19+ reports bytes_sent");
        assert!(info.congestion_control.is_some());
        // The registry reads open connections through its own dup of the fd.
        let reg = Registry::new();
        let fd = Arc::new(s.as_fd().try_clone_to_owned().unwrap());
        let id = reg.open(Transport::Tcp, c.local_addr().unwrap(), Probe::Tcp(fd));
        assert_eq!(reg.next_request(id), 0);
        assert_eq!(reg.next_request(id), 1);
        let snap = reg.since(0);
        assert_eq!(snap.len(), 1);
        assert!(snap[0].closed_unix_ms.is_none() && snap[0].tcp.is_some());
        // A run that started after it opened waits for its own connections only.
        assert_eq!(
            (reg.open_count_since(id), reg.open_count_since(id + 1)),
            (1, 0)
        );
        reg.close(id, None);
        assert_eq!(reg.open_count(), 0);
        let after = reg.since(id);
        assert_eq!(after[0].requests, 2);
        assert!(after[0].closed_unix_ms.is_some());
        assert!(reg.since(id + 1).is_empty());
    }
}
