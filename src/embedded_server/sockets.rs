//! Binding the TCP listener and the UDP socket on one port number, in the calling thread (a
//! socket belongs for life to the network namespace of the thread that creates it), with the
//! socket-level knobs applied and read back from the kernel.

use std::io;
use std::net::{IpAddr, SocketAddr};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol as SockProto, SockRef, Socket, Type};

use super::knobs::{EffectiveKnobs, TcpCongestion};
use crate::support::procfs;

/// Attempts at finding a port free on both TCP and UDP when asked for port 0.
const PORT_ATTEMPTS: usize = 64;
// asm-generic/socket.h (x86-64, arm64): not exported by the libc crate for linux-gnu.
const SO_SNDBUFFORCE: libc::c_int = 32;
const SO_RCVBUFFORCE: libc::c_int = 33;

/// A socket buffer as requested and as the kernel applied it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocketBuffer {
    /// What the knob asked for (`None`: left at the kernel default).
    pub requested: Option<u64>,
    /// `getsockopt` after setting: the kernel doubles the request for its own bookkeeping,
    /// and caps it at net.core.{r,w}mem_max unless set with the *FORCE option (root).
    pub applied: u64,
    /// `SO_RCVBUFFORCE`/`SO_SNDBUFFORCE`, `SO_RCVBUF`/`SO_SNDBUF`, or `kernel default`.
    pub method: String,
    /// True when the kernel gave less than requested (capped by the *mem_max sysctl).
    pub clamped: bool,
}

/// What binding produced.
pub(crate) struct Bound {
    pub port: u16,
    pub tcp: Option<std::net::TcpListener>,
    pub udp: Option<std::net::UdpSocket>,
    pub udp_recv_buffer: Option<SocketBuffer>,
    pub udp_send_buffer: Option<SocketBuffer>,
    /// The listener's congestion control as read back (inherited by accepted sockets).
    pub tcp_congestion: Option<String>,
    /// Segments per send the kernel supports for UDP GSO (1 = none).
    pub gso_max_segments: Option<usize>,
}

/// Binds what the offered protocols need on `ip:port` (port 0: one free on both TCP and UDP).
pub(crate) fn bind(ip: IpAddr, port: u16, knobs: &EffectiveKnobs) -> Result<Bound> {
    if let Some(cc) = knobs.tcp_congestion.filter(|_| knobs.offers_tcp()) {
        ensure_tcp_congestion_available(cc)?;
    }
    let want_tcp = knobs.offers_tcp();
    let want_udp = knobs.offers(super::Protocol::H3);
    let (tcp, udp) = if port != 0 {
        let tcp = want_tcp
            .then(|| bind_tcp(SocketAddr::new(ip, port), knobs))
            .transpose()
            .map_err(|e| in_use_error(e, ip, port, "tcp"))?;
        let udp = want_udp
            .then(|| bind_udp(SocketAddr::new(ip, port), knobs))
            .transpose()
            .map_err(|e| in_use_error(e, ip, port, "udp"))?;
        (tcp, udp)
    } else {
        bind_any_port(ip, knobs, want_tcp, want_udp)?
    };
    let port = match (&tcp, &udp) {
        (Some(t), _) => t.local_addr()?.port(),
        (None, Some((u, _))) => u.local_addr()?.port(),
        (None, None) => bail!("no protocol offered"),
    };
    let tcp_congestion = match &tcp {
        Some(t) => Some(
            super::transport_stats::tcp_congestion(std::os::fd::AsFd::as_fd(t))
                .context("cannot read the listener's TCP_CONGESTION")?,
        ),
        None => None,
    };
    let (udp_sock, bufs) = match udp {
        Some((u, b)) => (Some(u), Some(b)),
        None => (None, None),
    };
    let gso_max_segments = udp_sock.as_ref().and_then(|u| {
        quinn::udp::UdpSocketState::new(quinn::udp::UdpSockRef::from(u))
            .ok()
            .map(|s| s.max_gso_segments())
    });
    let (udp_recv_buffer, udp_send_buffer) = match bufs {
        Some((r, s)) => (Some(r), Some(s)),
        None => (None, None),
    };
    Ok(Bound {
        port,
        tcp,
        udp: udp_sock,
        udp_recv_buffer,
        udp_send_buffer,
        tcp_congestion,
        gso_max_segments,
    })
}

type BoundUdp = (std::net::UdpSocket, (SocketBuffer, SocketBuffer));

fn bind_any_port(
    ip: IpAddr,
    knobs: &EffectiveKnobs,
    want_tcp: bool,
    want_udp: bool,
) -> Result<(Option<std::net::TcpListener>, Option<BoundUdp>)> {
    if !want_tcp {
        let udp = bind_udp(SocketAddr::new(ip, 0), knobs)
            .with_context(|| format!("cannot bind a UDP socket on {ip}"))?;
        return Ok((None, Some(udp)));
    }
    for _ in 0..PORT_ATTEMPTS {
        let tcp = bind_tcp(SocketAddr::new(ip, 0), knobs)
            .with_context(|| format!("cannot bind a TCP listener on {ip}"))?;
        if !want_udp {
            return Ok((Some(tcp), None));
        }
        let port = tcp.local_addr()?.port();
        match bind_udp(SocketAddr::new(ip, port), knobs) {
            Ok(udp) => return Ok((Some(tcp), Some(udp))),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot bind UDP {ip}:{port}")),
        }
    }
    bail!("found no port free on both TCP and UDP on {ip} in {PORT_ATTEMPTS} attempts")
}

fn in_use_error(e: io::Error, ip: IpAddr, port: u16, proto: &str) -> anyhow::Error {
    if e.kind() == io::ErrorKind::AddrInUse {
        let hint = if proto == "udp" {
            "h3 needs the same port on UDP: stop whatever holds it (`ss -lunp`), pick another \
             --port, or offer no h3 (--server-protocols h1,h2)"
        } else {
            "stop whatever holds it (`ss -ltnp`) or pick another --port"
        };
        anyhow::anyhow!("port {port}/{proto} on {ip} is already in use: {hint}")
    } else {
        anyhow::anyhow!("cannot bind {ip}:{port}/{proto}: {e}")
    }
}

fn bind_tcp(addr: SocketAddr, knobs: &EffectiveKnobs) -> io::Result<std::net::TcpListener> {
    let s = Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(SockProto::TCP),
    )?;
    // Lets a restarted server bind while old connections sit in TIME_WAIT; it does NOT let two
    // listeners share the port (that would need SO_REUSEPORT, which is never set).
    s.set_reuse_address(true)?;
    if let Some(cc) = knobs.tcp_congestion {
        // Accepted sockets inherit the listener's congestion control.
        s.set_tcp_congestion(cc.kernel_name().as_bytes())
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("TCP_CONGESTION {}: {e}", cc.kernel_name()),
                )
            })?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

fn bind_udp(addr: SocketAddr, knobs: &EffectiveKnobs) -> io::Result<BoundUdp> {
    udp_socket(addr, knobs.udp_recv_buffer, knobs.udp_send_buffer)
}

/// A non-blocking UDP socket bound to `addr` with the requested buffers (also for clients).
pub fn udp_socket(
    addr: SocketAddr,
    recv_buffer: Option<u64>,
    send_buffer: Option<u64>,
) -> io::Result<(std::net::UdpSocket, (SocketBuffer, SocketBuffer))> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(SockProto::UDP))?;
    // No SO_REUSEADDR/SO_REUSEPORT: a second server on this port must fail, not share it.
    let recv = set_buffer(&s, BufferKind::Recv, recv_buffer)?;
    let send = set_buffer(&s, BufferKind::Send, send_buffer)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok((s.into(), (recv, send)))
}

#[derive(Clone, Copy)]
enum BufferKind {
    Recv,
    Send,
}

fn set_buffer(s: &Socket, kind: BufferKind, want: Option<u64>) -> io::Result<SocketBuffer> {
    let read = |s: &Socket| -> io::Result<u64> {
        Ok(match kind {
            BufferKind::Recv => s.recv_buffer_size()?,
            BufferKind::Send => s.send_buffer_size()?,
        } as u64)
    };
    let Some(want) = want else {
        return Ok(SocketBuffer {
            requested: None,
            applied: read(s)?,
            method: "kernel default".into(),
            clamped: false,
        });
    };
    let (force_opt, force_name, plain_name) = match kind {
        BufferKind::Recv => (SO_RCVBUFFORCE, "SO_RCVBUFFORCE", "SO_RCVBUF"),
        BufferKind::Send => (SO_SNDBUFFORCE, "SO_SNDBUFFORCE", "SO_SNDBUF"),
    };
    let value = want.min(i32::MAX as u64) as libc::c_int;
    // The FORCE variant ignores net.core.*mem_max but needs CAP_NET_ADMIN; else the plain one.
    // SAFETY: setsockopt with a valid fd and an int option value.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::SOL_SOCKET,
            force_opt,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let method = if rc == 0 {
        force_name
    } else {
        match kind {
            BufferKind::Recv => s.set_recv_buffer_size(value as usize)?,
            BufferKind::Send => s.set_send_buffer_size(value as usize)?,
        }
        plain_name
    };
    let applied = read(s)?;
    let clamped = applied < want;
    if clamped {
        tracing::warn!(
            "UDP {plain_name} {want} was capped by the kernel to {applied} (raise net.core.{}mem_max or run as root)",
            if matches!(kind, BufferKind::Recv) { "r" } else { "w" }
        );
    }
    Ok(SocketBuffer {
        requested: Some(want),
        applied,
        method: method.into(),
        clamped,
    })
}

/// Makes sure the kernel offers `cc`, loading its module if needed; a clear error otherwise.
pub(crate) fn ensure_tcp_congestion_available(cc: TcpCongestion) -> Result<()> {
    let name = cc.kernel_name();
    let read = || procfs::tcp_congestion_available().unwrap_or_default();
    if procfs::congestion_listed(&read(), name) {
        return Ok(());
    }
    let loaded = std::process::Command::new("modprobe")
        .arg(format!("tcp_{name}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let available = read();
    if loaded && procfs::congestion_listed(&available, name) {
        return Ok(());
    }
    bail!(
        "--tcp-congestion {name}: this kernel does not offer it (available: {}; `modprobe tcp_{name}` {}). \
         Pick one of the available ones or leave the knob unset.",
        available,
        if loaded { "loaded nothing usable" } else { "failed or is missing" }
    )
}

/// The system's default TCP congestion control.
pub fn system_tcp_congestion() -> Option<String> {
    procfs::tcp_congestion_default().ok()
}

/// Keeps at most `bytes` unsent in an accepted socket (TCP_NOTSENT_LOWAT): the application
/// decides the order of what is not yet on the wire.
pub(crate) fn limit_unsent(s: &tokio::net::TcpStream, bytes: usize) {
    use std::os::fd::AsRawFd;
    let v = bytes as libc::c_int;
    // SAFETY: a valid socket, an int option, its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::warn!("TCP_NOTSENT_LOWAT: {}", std::io::Error::last_os_error());
    }
}

/// Sets TCP_NODELAY on an accepted socket (responses are written in large chunks already).
pub(crate) fn tune_accepted(s: &tokio::net::TcpStream) {
    let _ = SockRef::from(s).set_nodelay(true);
}
