//! pagebench's static HTTP/3 server on Cloudflare quiche (`pagebench --servers quiche`).
//!
//! It serves a pages tree over h3 on one UDP port, answers `POST /upload` with the byte count
//! (`{"bytes": N, "duration_ms": F}`, as pagebench's own server), and writes two JSON-lines
//! files pagebench reads: the request log (pagebench's `RequestRecord` shape) and each
//! connection's transport statistics as quiche counts them (`ConnectionStats` with `quic`).
//! On SIGUSR1 it appends a snapshot of the connections still open, then a
//! `{"snapshot": N, "open": M}` line. After binding it writes the `--ready` file.
//!
//! One thread, one socket (mio); each packet leaves at the time quiche's pacer gives it
//! (1 ms granularity), as quiche's own server does with SO_TXTIME.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quiche::h3::NameValue;
use serde_json::{json, Value};

const QUICHE_VERSION: &str = "0.30";
/// The largest UDP payload quiche sends (quiche's own server and Chromium use 1350).
const MAX_SEND_PAYLOAD: usize = 1350;
/// What fits a 1500-byte MTU.
const MAX_RECV_PAYLOAD: usize = 1472;
/// Packets due within this are sent now (the loop's timer granularity).
const PACING_SLACK: Duration = Duration::from_millis(1);
const IDLE_TIMEOUT_MS: u64 = 30_000;

/// The command line (see `usage`).
struct Args {
    listen: SocketAddr,
    root: PathBuf,
    cert: String,
    key: String,
    log: PathBuf,
    stats: PathBuf,
    ready: PathBuf,
    max_streams: u64,
    stream_window: u64,
    conn_window: u64,
    /// Fixed windows (no autotuning beyond them): set when pagebench's knob was set.
    fixed_windows: bool,
    cc: String,
    udp_recv_buffer: Option<usize>,
    udp_send_buffer: Option<usize>,
    alt_svc: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: pagebench-quiche-server --listen IP:PORT --root DIR --cert PEM --key PEM \
         --log FILE --stats FILE --ready FILE [--max-streams N] [--stream-window BYTES] \
         [--conn-window BYTES] [--fixed-windows] [--cc cubic|reno|bbr2] \
         [--udp-recv-buffer BYTES] [--udp-send-buffer BYTES] [--alt-svc]"
    );
    std::process::exit(2)
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let get = |flag: &str, it: &mut dyn Iterator<Item = String>| {
        it.next().ok_or_else(|| format!("{flag} needs a value"))
    };
    let mut a = Args {
        listen: "0.0.0.0:0".parse().unwrap(),
        root: PathBuf::new(),
        cert: String::new(),
        key: String::new(),
        log: PathBuf::new(),
        stats: PathBuf::new(),
        ready: PathBuf::new(),
        max_streams: 100,
        stream_window: 1_250_000,
        conn_window: (1 << 62) - 1,
        fixed_windows: false,
        cc: "cubic".into(),
        udp_recv_buffer: None,
        udp_send_buffer: None,
        alt_svc: false,
    };
    let num = |flag: &str, v: String| -> Result<u64, String> {
        v.parse()
            .map_err(|_| format!("{flag} {v:?} is not a number"))
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--listen" => {
                let v = get(&flag, &mut it)?;
                a.listen = v
                    .parse()
                    .map_err(|_| format!("--listen {v:?} is not IP:PORT"))?;
            }
            "--root" => a.root = get(&flag, &mut it)?.into(),
            "--cert" => a.cert = get(&flag, &mut it)?,
            "--key" => a.key = get(&flag, &mut it)?,
            "--log" => a.log = get(&flag, &mut it)?.into(),
            "--stats" => a.stats = get(&flag, &mut it)?.into(),
            "--ready" => a.ready = get(&flag, &mut it)?.into(),
            "--max-streams" => a.max_streams = num(&flag, get(&flag, &mut it)?)?,
            "--stream-window" => a.stream_window = num(&flag, get(&flag, &mut it)?)?,
            "--conn-window" => a.conn_window = num(&flag, get(&flag, &mut it)?)?,
            "--fixed-windows" => a.fixed_windows = true,
            "--cc" => a.cc = get(&flag, &mut it)?,
            "--udp-recv-buffer" => {
                a.udp_recv_buffer = Some(num(&flag, get(&flag, &mut it)?)? as usize)
            }
            "--udp-send-buffer" => {
                a.udp_send_buffer = Some(num(&flag, get(&flag, &mut it)?)? as usize)
            }
            "--alt-svc" => a.alt_svc = true,
            "-h" | "--help" => usage(),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    for (name, empty) in [
        ("--root", a.root.as_os_str().is_empty()),
        ("--cert", a.cert.is_empty()),
        ("--key", a.key.is_empty()),
        ("--log", a.log.as_os_str().is_empty()),
        ("--stats", a.stats.as_os_str().is_empty()),
        ("--ready", a.ready.as_os_str().is_empty()),
    ] {
        if empty {
            return Err(format!("{name} is required"));
        }
    }
    Ok(a)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Sets SO_RCVBUF/SO_SNDBUF (the FORCE variant first: pagebench runs as root) and returns
/// what the kernel then reports.
fn socket_buffer(fd: i32, force: i32, plain: i32, want: Option<usize>) -> usize {
    if let Some(v) = want {
        let v = v as libc::c_int;
        let set = |opt| unsafe {
            // SAFETY: an int option on a socket we own.
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if set(force) != 0 {
            set(plain);
        }
    }
    let mut out: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: reads an int option into `out`.
    unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            plain,
            (&mut out as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    out as usize
}

/// Appends JSON lines, one `write` each (pagebench reads complete lines only).
struct JsonLines(File);

impl JsonLines {
    fn open(path: &Path) -> std::io::Result<JsonLines> {
        Ok(JsonLines(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        ))
    }

    fn write(&mut self, v: &Value) {
        let mut line = v.to_string();
        line.push('\n');
        if let Err(e) = self.0.write_all(line.as_bytes()) {
            eprintln!("cannot write a log line: {e}");
        }
    }
}

/// A request being answered.
struct Request {
    method: String,
    path: String,
    authority: Option<String>,
    time_unix_ms: u64,
    start: Instant,
    seq: u64,
    bytes_received: u64,
    /// (urgency, incremental) from the `priority` header or a PRIORITY_UPDATE.
    priority: (u8, bool),
    /// The response still to write (None: not started, e.g. an upload still arriving).
    response: Option<Response>,
}

struct Response {
    status: u16,
    headers: Option<Vec<quiche::h3::Header>>,
    body: Vec<u8>,
    written: usize,
}

struct Client {
    conn: quiche::Connection,
    h3: Option<quiche::h3::Connection>,
    id: u64,
    peer: SocketAddr,
    opened_unix_ms: u64,
    opened: Instant,
    established: Option<Instant>,
    requests: HashMap<u64, Request>,
    served: u64,
    /// A packet quiche's pacer wants sent later: (bytes, destination, due).
    held: Option<(Vec<u8>, SocketAddr, Instant)>,
    /// The connection ID the client first sent (its Initial packets may still carry it).
    odcid: quiche::ConnectionId<'static>,
}

struct Server {
    args: Args,
    h3_config: quiche::h3::Config,
    log: JsonLines,
    stats: JsonLines,
    next_id: u64,
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("pagebench-quiche-server: {e}");
        usage()
    });
    if let Err(e) = run(args) {
        eprintln!("pagebench-quiche-server: {e}");
        std::process::exit(1);
    }
}

fn content_type(path: &str) -> &'static str {
    // pagebench's own table (workload::content_type_for).
    match path.rsplit('.').next().unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "png" => "image/png",
        "ttf" => "font/ttf",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "jpg" | "jpeg" => "image/jpeg",
        "woff2" => "font/woff2",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The file below `root` a GET for `target` names (None: nothing servable; dot segments and
/// anything resolving outside the root are refused).
fn resolve(root: &Path, target: &str) -> Option<PathBuf> {
    let path = target.split(['?', '#']).next()?;
    let mut file = root.to_path_buf();
    for seg in path.split('/') {
        match seg {
            "" => continue,
            "." | ".." => return None,
            s if s.contains('\\') || s.contains('%') => return None,
            s => file.push(s),
        }
    }
    if file.is_dir() {
        file.push("index.html");
    }
    let canonical = file.canonicalize().ok()?;
    (canonical.starts_with(root) && canonical.is_file()).then_some(canonical)
}

fn run(args: Args) -> Result<(), String> {
    let root = args
        .root
        .canonicalize()
        .map_err(|e| format!("--root {}: {e}", args.root.display()))?;
    let std_socket = std::net::UdpSocket::bind(args.listen)
        .map_err(|e| format!("cannot bind UDP {}: {e}", args.listen))?;
    std_socket
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&std_socket);
    let rcvbuf = socket_buffer(
        fd,
        libc::SO_RCVBUFFORCE,
        libc::SO_RCVBUF,
        args.udp_recv_buffer,
    );
    let sndbuf = socket_buffer(
        fd,
        libc::SO_SNDBUFFORCE,
        libc::SO_SNDBUF,
        args.udp_send_buffer,
    );
    let mut socket = mio::net::UdpSocket::from_std(std_socket);
    let local = socket.local_addr().map_err(|e| e.to_string())?;

    let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(|e| e.to_string())?;
    config
        .load_cert_chain_from_pem_file(&args.cert)
        .map_err(|e| format!("--cert {}: {e}", args.cert))?;
    config
        .load_priv_key_from_pem_file(&args.key)
        .map_err(|e| format!("--key {}: {e}", args.key))?;
    config
        .set_application_protos(quiche::h3::APPLICATION_PROTOCOL)
        .map_err(|e| e.to_string())?;
    config.set_max_idle_timeout(IDLE_TIMEOUT_MS);
    config.set_max_recv_udp_payload_size(MAX_RECV_PAYLOAD);
    config.set_max_send_udp_payload_size(MAX_SEND_PAYLOAD);
    config.set_initial_max_data(args.conn_window);
    config.set_initial_max_stream_data_bidi_local(args.stream_window);
    config.set_initial_max_stream_data_bidi_remote(args.stream_window);
    config.set_initial_max_stream_data_uni(args.stream_window);
    config.set_initial_max_streams_bidi(args.max_streams);
    config.set_initial_max_streams_uni(100);
    config.set_disable_active_migration(true);
    if args.fixed_windows {
        config.set_max_stream_window(args.stream_window);
        config.set_max_connection_window(args.conn_window);
    }
    config
        .set_cc_algorithm_name(&args.cc)
        .map_err(|e| format!("--cc {}: {e}", args.cc))?;
    config.enable_pacing(true);

    let usr1 = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, usr1.clone())
        .map_err(|e| e.to_string())?;
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, term.clone()).map_err(|e| e.to_string())?;
    }

    let mut poll = mio::Poll::new().map_err(|e| e.to_string())?;
    poll.registry()
        .register(&mut socket, mio::Token(0), mio::Interest::READABLE)
        .map_err(|e| e.to_string())?;
    let mut server = Server {
        h3_config: quiche::h3::Config::new().map_err(|e| e.to_string())?,
        log: JsonLines::open(&args.log).map_err(|e| format!("--log: {e}"))?,
        stats: JsonLines::open(&args.stats).map_err(|e| format!("--stats: {e}"))?,
        next_id: 1,
        args,
    };
    let ready = json!({
        "server": format!("pagebench-quiche-server {} (quiche {QUICHE_VERSION})", env!("CARGO_PKG_VERSION")),
        "listen": local.to_string(),
        "udp_recv_buffer": rcvbuf,
        "udp_send_buffer": sndbuf,
        "cc": server.args.cc,
        "pacing": true,
    });
    let tmp = server.args.ready.with_extension("tmp");
    std::fs::write(&tmp, ready.to_string() + "\n").map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, &server.args.ready).map_err(|e| e.to_string())?;

    let mut events = mio::Events::with_capacity(1024);
    let mut clients: HashMap<quiche::ConnectionId<'static>, Client> = HashMap::new();
    let mut aliases: HashMap<quiche::ConnectionId<'static>, quiche::ConnectionId<'static>> =
        HashMap::new();
    let mut buf = vec![0u8; 65_536];
    let mut out = vec![0u8; MAX_SEND_PAYLOAD];
    let mut body_buf = vec![0u8; 65_536];
    let mut snapshots = 0u64;
    let root_ref = root.as_path();

    while !term.load(Ordering::Relaxed) {
        let now = Instant::now();
        let mut wait = Duration::from_millis(50);
        for c in clients.values() {
            if let Some(t) = c.conn.timeout() {
                wait = wait.min(t);
            }
            if let Some((_, _, at)) = &c.held {
                wait = wait.min(at.saturating_duration_since(now));
            }
        }
        if let Err(e) = poll.poll(&mut events, Some(wait)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("poll: {e}"));
            }
        }

        // Every datagram waiting.
        loop {
            let (len, from) = match socket.recv_from(&mut buf) {
                Ok(v) => v,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("recv: {e}")),
            };
            let pkt = &mut buf[..len];
            let Ok(hdr) = quiche::Header::from_slice(pkt, quiche::MAX_CONN_ID_LEN) else {
                continue;
            };
            let dcid = hdr.dcid.clone().into_owned();
            let key = if clients.contains_key(&dcid) {
                dcid
            } else if let Some(k) = aliases.get(&dcid) {
                k.clone()
            } else {
                if hdr.ty != quiche::Type::Initial {
                    continue;
                }
                if !quiche::version_is_supported(hdr.version) {
                    if let Ok(n) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut out) {
                        let _ = socket.send_to(&out[..n], from);
                    }
                    continue;
                }
                let mut id = [0u8; quiche::MAX_CONN_ID_LEN];
                rand::fill(&mut id[..]);
                let scid = quiche::ConnectionId::from_vec(id.to_vec());
                let conn = match quiche::accept(&scid, None, local, from, &mut config) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("accept failed: {e}");
                        continue;
                    }
                };
                let cid = server.next_id;
                server.next_id += 1;
                aliases.insert(dcid.clone(), scid.clone());
                clients.insert(
                    scid.clone(),
                    Client {
                        conn,
                        h3: None,
                        id: cid,
                        peer: from,
                        opened_unix_ms: unix_ms(),
                        opened: Instant::now(),
                        established: None,
                        requests: HashMap::new(),
                        served: 0,
                        held: None,
                        odcid: dcid,
                    },
                );
                scid
            };
            let Some(client) = clients.get_mut(&key) else {
                continue;
            };
            let info = quiche::RecvInfo { from, to: local };
            if let Err(e) = client.conn.recv(pkt, info) {
                if e != quiche::Error::Done {
                    eprintln!("connection {}: recv: {e}", client.id);
                }
            }
        }

        for client in clients.values_mut() {
            client.conn.on_timeout();
            server.serve(client, root_ref, &mut body_buf);
            flush(client, &socket, &mut out);
        }

        // Closed connections: their statistics, then forget them.
        let closed: Vec<_> = clients
            .iter()
            .filter(|(_, c)| c.conn.is_closed())
            .map(|(k, _)| k.clone())
            .collect();
        for k in closed {
            if let Some(mut c) = clients.remove(&k) {
                aliases.remove(&c.odcid);
                for (sid, r) in std::mem::take(&mut c.requests) {
                    if r.response.is_some() {
                        server.log_request((c.id, c.peer), sid, &r, Some("connection closed"));
                    }
                }
                let v = stats_line(&c, &server.args.cc, true);
                server.stats.write(&v);
            }
        }

        if usr1.swap(false, Ordering::Relaxed) {
            snapshots += 1;
            for c in clients.values() {
                let v = stats_line(c, &server.args.cc, false);
                server.stats.write(&v);
            }
            server
                .stats
                .write(&json!({"snapshot": snapshots, "open": clients.len()}));
        }
    }
    Ok(())
}

/// Sends what quiche has to send, at its pacing times.
fn flush(client: &mut Client, socket: &mio::net::UdpSocket, out: &mut [u8]) {
    let now = Instant::now();
    loop {
        if let Some((bytes, to, at)) = client.held.take() {
            if at > now + PACING_SLACK {
                client.held = Some((bytes, to, at));
                return;
            }
            match socket.send_to(&bytes, to) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    client.held = Some((bytes, to, now));
                    return;
                }
                Err(e) => eprintln!("send: {e}"),
            }
        }
        match client.conn.send(out) {
            Ok((n, info)) => client.held = Some((out[..n].to_vec(), info.to, info.at)),
            Err(quiche::Error::Done) => return,
            Err(e) => {
                eprintln!("connection {}: send: {e}", client.id);
                let _ = client.conn.close(false, 0x1, b"send failed");
                return;
            }
        }
    }
}

/// One connection's statistics in pagebench's `ConnectionStats` shape, with quiche's own
/// counters beside them (`quiche`).
fn stats_line(c: &Client, cc: &str, closed: bool) -> Value {
    let s = c.conn.stats();
    let p = c.conn.path_stats().find(|p| p.active);
    let error = c
        .conn
        .peer_error()
        .map(|e| ("peer", e))
        .or(c.conn.local_error().map(|e| ("local", e)))
        .filter(|(_, e)| e.error_code != 0)
        .map(|(who, e)| {
            format!(
                "{who} closed with {}code {:#x}: {}",
                if e.is_app { "application " } else { "" },
                e.error_code,
                String::from_utf8_lossy(&e.reason)
            )
        })
        .or_else(|| c.conn.is_timed_out().then(|| "idle timeout".to_string()));
    json!({
        "connection_id": c.id,
        "transport": "quic",
        "client": c.peer.to_string(),
        "protocol": c.h3.as_ref().map(|_| "h3"),
        "opened_unix_ms": c.opened_unix_ms,
        "closed_unix_ms": if closed { Some(unix_ms()) } else { None },
        "handshake_ms": c.established.map(|e| (e - c.opened).as_secs_f64() * 1e3),
        "requests": c.served,
        "error": error,
        "tcp": null,
        "quic": {
            "congestion_controller": cc,
            "rtt_us": p.as_ref().map(|p| p.rtt.as_micros() as u64).unwrap_or(0),
            "min_rtt_us": p.as_ref().and_then(|p| p.min_rtt).map(|d| d.as_micros() as u64).unwrap_or(0),
            "cwnd": p.as_ref().map(|p| p.cwnd as u64).unwrap_or(0),
            "congestion_events": 0,
            "lost_packets": s.lost as u64,
            "lost_bytes": s.lost_bytes,
            "sent_packets": s.sent as u64,
            "udp_tx_bytes": s.sent_bytes,
            "udp_tx_datagrams": s.sent as u64,
            "udp_tx_ios": s.sent as u64,
            "udp_rx_bytes": s.recv_bytes,
            "udp_rx_datagrams": s.recv as u64,
            "current_mtu": p.as_ref().map(|p| p.pmtu as u64).unwrap_or(0),
            "black_holes_detected": 0,
        },
        "quiche": {
            "retrans": s.retrans,
            "spurious_lost": s.spurious_lost,
            "stream_retrans_bytes": s.stream_retrans_bytes,
            "pto_count": p.as_ref().map(|p| p.total_pto_count).unwrap_or(0),
            "rttvar_us": p.as_ref().map(|p| p.rttvar.as_micros() as u64).unwrap_or(0),
            "delivery_rate": p.as_ref().map(|p| p.delivery_rate).unwrap_or(0),
        },
    })
}

impl Server {
    fn log_request(&mut self, c: (u64, SocketAddr), stream: u64, r: &Request, error: Option<&str>) {
        let resp = r.response.as_ref();
        self.log.write(&json!({
            "time_unix_ms": r.time_unix_ms,
            "client": c.1.to_string(),
            "protocol": "h3",
            "method": r.method,
            "path": r.path,
            "status": resp.map(|x| x.status).unwrap_or(0),
            "bytes_sent": resp.map(|x| x.written).unwrap_or(0),
            "bytes_received": r.bytes_received,
            "duration_ms": r.start.elapsed().as_secs_f64() * 1e3,
            "connection_id": c.0,
            "stream_id": stream,
            "seq_on_connection": r.seq,
            "error": error,
            "authority": r.authority,
        }));
    }

    /// HTTP/3 on one connection: new requests, request bodies, responses to write.
    fn serve(&mut self, c: &mut Client, root: &Path, body_buf: &mut [u8]) {
        if c.established.is_none() && c.conn.is_established() {
            c.established = Some(Instant::now());
        }
        if c.h3.is_none() && (c.conn.is_established() || c.conn.is_in_early_data()) {
            match quiche::h3::Connection::with_transport(&mut c.conn, &self.h3_config) {
                Ok(h3) => c.h3 = Some(h3),
                Err(e) => {
                    eprintln!("connection {}: h3: {e}", c.id);
                    return;
                }
            }
        }
        let Some(h3) = c.h3.as_mut() else { return };
        loop {
            match h3.poll(&mut c.conn) {
                Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                    let mut r = Request {
                        method: String::new(),
                        path: String::new(),
                        authority: None,
                        time_unix_ms: unix_ms(),
                        start: Instant::now(),
                        seq: c.served + c.requests.len() as u64,
                        bytes_received: 0,
                        priority: (3, false),
                        response: None,
                    };
                    for h in &list {
                        let v = String::from_utf8_lossy(h.value()).to_string();
                        match h.name() {
                            b":method" => r.method = v,
                            b":path" => r.path = v,
                            b":authority" => r.authority = Some(v),
                            b"priority" => r.priority = parse_priority(h.value()),
                            _ => {}
                        }
                    }
                    let plain = r.path.split('?').next().unwrap_or("").to_string();
                    if plain != "/upload" || r.method != "POST" {
                        r.response = Some(self.answer(&r, &plain, root));
                    }
                    c.requests.insert(sid, r);
                }
                Ok((sid, quiche::h3::Event::Data)) => {
                    while let Ok(n) = h3.recv_body(&mut c.conn, sid, body_buf) {
                        if let Some(r) = c.requests.get_mut(&sid) {
                            r.bytes_received += n as u64;
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Finished)) => {
                    if let Some(r) = c.requests.get_mut(&sid) {
                        if r.response.is_none() {
                            let json = json!({
                                "bytes": r.bytes_received,
                                "duration_ms": r.start.elapsed().as_secs_f64() * 1e3,
                            });
                            r.response = Some(self.response(
                                200,
                                "application/json",
                                json.to_string().into_bytes(),
                            ));
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Reset(code))) => {
                    if let Some(r) = c.requests.remove(&sid) {
                        let why = format!("stream reset by the client ({code:#x})");
                        self.log_request((c.id, c.peer), sid, &r, Some(&why));
                    }
                }
                Ok((id, quiche::h3::Event::PriorityUpdate)) => {
                    if let Ok(v) = h3.take_last_priority_update(id) {
                        if let Some(r) = c.requests.get_mut(&id) {
                            r.priority = parse_priority(&v);
                        }
                    }
                }
                Ok((_, quiche::h3::Event::GoAway)) => {}
                Err(quiche::h3::Error::Done) => break,
                Err(e) => {
                    eprintln!("connection {}: h3 poll: {e}", c.id);
                    break;
                }
            }
        }
        self.write_responses(c);
    }

    fn response(&self, status: u16, ctype: &str, body: Vec<u8>) -> Response {
        let mut headers = vec![
            quiche::h3::Header::new(b":status", status.to_string().as_bytes()),
            quiche::h3::Header::new(b"content-type", ctype.as_bytes()),
            quiche::h3::Header::new(b"content-length", body.len().to_string().as_bytes()),
            quiche::h3::Header::new(b"cache-control", b"no-store"),
            quiche::h3::Header::new(b"server", b"quiche"),
        ];
        if self.args.alt_svc {
            let v = format!("h3=\":{}\"; ma=86400", self.args.listen.port());
            headers.push(quiche::h3::Header::new(b"alt-svc", v.as_bytes()));
        }
        Response {
            status,
            headers: Some(headers),
            body,
            written: 0,
        }
    }

    fn answer(&self, r: &Request, plain: &str, root: &Path) -> Response {
        if plain == "/upload" {
            return self.response(405, "text/plain; charset=utf-8", b"use POST\n".to_vec());
        }
        if r.method != "GET" && r.method != "HEAD" {
            return self.response(405, "text/plain; charset=utf-8", b"not allowed\n".to_vec());
        }
        match resolve(root, plain).and_then(|f| std::fs::read(&f).ok().map(|b| (f, b))) {
            Some((f, body)) => {
                let ct = content_type(&f.to_string_lossy());
                let mut resp = self.response(200, ct, body);
                if r.method == "HEAD" {
                    resp.body.clear();
                }
                resp
            }
            None => self.response(404, "text/plain; charset=utf-8", b"not found\n".to_vec()),
        }
    }

    /// Hands every pending response as much as quiche takes, most urgent first.
    fn write_responses(&mut self, c: &mut Client) {
        let Some(h3) = c.h3.as_mut() else { return };
        let mut order: Vec<(u8, u64)> = c
            .requests
            .iter()
            .filter(|(_, r)| r.response.is_some())
            .map(|(sid, r)| (r.priority.0, *sid))
            .collect();
        order.sort_unstable();
        let mut done = Vec::new();
        for (_, sid) in order {
            let Some(r) = c.requests.get_mut(&sid) else {
                continue;
            };
            let priority = quiche::h3::Priority::new(r.priority.0, r.priority.1);
            let Some(resp) = r.response.as_mut() else {
                continue;
            };
            if let Some(headers) = &resp.headers {
                let fin = resp.body.is_empty();
                match h3.send_response_with_priority(&mut c.conn, sid, headers, &priority, fin) {
                    Ok(()) => resp.headers = None,
                    Err(quiche::h3::Error::StreamBlocked) => continue,
                    Err(e) => {
                        done.push((sid, Some(format!("send_response: {e}"))));
                        continue;
                    }
                }
                if fin {
                    done.push((sid, None));
                    continue;
                }
            }
            while resp.written < resp.body.len() {
                match h3.send_body(&mut c.conn, sid, &resp.body[resp.written..], true) {
                    Ok(0) => break,
                    Ok(n) => resp.written += n,
                    Err(quiche::h3::Error::Done) => break,
                    Err(e) => {
                        done.push((sid, Some(format!("send_body: {e}"))));
                        break;
                    }
                }
            }
            if resp.written == resp.body.len() {
                done.push((sid, None));
            }
        }
        for (sid, err) in done {
            if let Some(r) = c.requests.remove(&sid) {
                c.served += 1;
                self.log_request((c.id, c.peer), sid, &r, err.as_deref());
            }
        }
    }
}

/// An Extensible Priorities field value (RFC 9218: `u=N`, `i`): (urgency, incremental), the
/// defaults for what it leaves out.
fn parse_priority(v: &[u8]) -> (u8, bool) {
    let (mut urgency, mut incremental) = (3u8, false);
    for item in String::from_utf8_lossy(v).split(',') {
        let item = item.trim();
        if let Some(u) = item.strip_prefix("u=") {
            if let Ok(u) = u.trim().parse::<u8>() {
                urgency = u.min(7);
            }
        } else if item == "i" || item == "i=?1" {
            incremental = true;
        } else if item == "i=?0" {
            incremental = false;
        }
    }
    (urgency, incremental)
}
