//! How precise and how fast the emulator is on this machine (`pagebench bench netem`, and a
//! shard's calibration).
//!
//! - **Delay error**: UDP probes every few ms from the client, echoed by the server, each stamped
//!   on send, on the server's receive and on return (one process, one monotonic clock), at
//!   one-way delays of 0, 20 and 75 ms without jitter; idle and beside a bulk TCP download. The
//!   probe threads run at SCHED_FIFO below the emulator, so that other load on the machine
//!   delays the measuring endpoints as little as possible; the other load is reported.
//!   Error = measured − configured, for each direction and for the round trip. Samples close to
//!   a CPU-steal tick (`/proc/stat`, sampled every 5 ms) are counted and also left out in a
//!   second p99, so a hypervisor hiccup is told apart from the emulator's own error.
//! - **Forwarding rate**: 1500-byte UDP packets blasted client → server at 0 ms; packets/s and
//!   Mbit/s the emulator forwarded, and its CPU use; then a bulk TCP flow's goodput.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::emulated::{Link, LinkOptions};
use super::host;
use super::link_stats::LinkStats;
use crate::config::profile::Profile;
use crate::support::textfmt;

/// The figures of pagebench's first emulator, a Python prototype (the study's approach; its
/// release lateness mean 34 µs at SCHED_FIFO), printed beside ours: a Rust emulator must beat
/// it clearly.
pub const PROTOTYPE_PPS: f64 = 45_000.0;
pub const PROTOTYPE_RTT_ERROR_MS: (f64, f64) = (0.4, 0.8);

/// What to measure and for how long.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// One-way delays to measure at.
    pub one_way_ms: Vec<f64>,
    /// Probing time per delay and load.
    pub probe_seconds: f64,
    pub probe_interval: Duration,
    /// Blasting time of the forwarding-rate test.
    pub rate_seconds: f64,
    pub realtime: bool,
    pub hold_cpus_awake: bool,
    pub steer_receive: bool,
    pub seed: u64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            one_way_ms: vec![0.0, 20.0, 75.0],
            probe_seconds: 4.0,
            probe_interval: Duration::from_millis(2),
            rate_seconds: 3.0,
            realtime: true,
            hold_cpus_awake: true,
            steer_receive: true,
            seed: 1,
        }
    }
}

/// Median, p99 and max of a set of errors, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorSummary {
    pub samples: usize,
    pub median_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl ErrorSummary {
    pub fn of(values: &[f64]) -> ErrorSummary {
        if values.is_empty() {
            return ErrorSummary::default();
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        ErrorSummary {
            samples: v.len(),
            median_ms: quantile_sorted(&v, 0.5),
            p99_ms: quantile_sorted(&v, 0.99),
            max_ms: v[v.len() - 1],
        }
    }
}

/// Nearest-rank quantile of sorted values.
pub fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Delay error at one one-way delay and load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrecisionRow {
    pub one_way_ms: f64,
    /// "idle" or "bulk TCP".
    pub load: String,
    pub sent: usize,
    pub lost: usize,
    pub up: ErrorSummary,
    pub down: ErrorSummary,
    pub rtt: ErrorSummary,
    /// The round-trip error without the samples that overlapped a CPU-steal tick.
    pub rtt_outside_steal: ErrorSummary,
    pub steal_affected: usize,
    /// The emulator's own release lateness (both directions).
    pub lateness_p99_us: f64,
    pub lateness_max_us: f64,
    pub emulator_cpu_pct: f64,
    pub steal_ms: f64,
    /// CPU use of other processes on the machine meanwhile (share of all CPUs).
    pub other_load_pct: f64,
    /// Goodput of the concurrent bulk flow.
    pub bulk_mbit: Option<f64>,
}

/// Forwarding capacity at 0 ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RateResult {
    pub what: String,
    pub seconds: f64,
    pub packets_per_s: f64,
    pub mbit_per_s: f64,
    /// Goodput seen by the receiving socket.
    pub delivered_mbit_per_s: f64,
    pub emulator_cpu_pct: f64,
    /// Emulator CPU time per forwarded packet.
    pub cpu_us_per_packet: f64,
    pub tun_tx_dropped: u64,
    pub steal_ms: f64,
}

/// Everything `pagebench bench netem` measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub realtime: bool,
    pub cpus_held_awake: bool,
    pub cpus: usize,
    pub precision: Vec<PrecisionRow>,
    pub udp_rate: RateResult,
    pub tcp_rate: RateResult,
}

/// Runs the whole benchmark on one link (reconfigured live between delays).
pub fn run(opts: &BenchOptions, mut progress: impl FnMut(&str)) -> Result<BenchReport> {
    let base = Instant::now();
    let first = bench_profile(opts.one_way_ms.first().copied().unwrap_or(0.0));
    let link = Link::new(
        &first,
        LinkOptions {
            seed: opts.seed,
            realtime: opts.realtime,
            hold_cpus_awake: opts.hold_cpus_awake,
            steer_receive: opts.steer_receive,
            ..LinkOptions::default()
        },
    )?;
    let steal = StealSampler::start(base);
    let mut precision = Vec::new();
    for &ow in &opts.one_way_ms {
        link.set_profile(&bench_profile(ow))?;
        for bulk in [false, true] {
            crate::support::signals::interrupted()
                .then_some(())
                .map_or(Ok(()), |_| Err(crate::support::signals::Interrupted))?;
            progress(&format!(
                "delay error at {ow} ms one-way, {}",
                if bulk { "with bulk TCP" } else { "idle" }
            ));
            precision.push(measure_precision(&link, opts, ow, bulk, base, &steal)?);
        }
    }
    link.set_profile(&bench_profile(0.0))?;
    progress("forwarding rate, 1500-byte UDP at 0 ms");
    let udp_rate = measure_udp_rate(&link, opts.rate_seconds)?;
    progress("forwarding rate, bulk TCP at 0 ms");
    let tcp_rate = measure_tcp_rate(&link, opts.rate_seconds)?;
    Ok(BenchReport {
        realtime: link.realtime(),
        cpus_held_awake: link.cpus_held_awake(),
        cpus: host::cpu_count(),
        precision,
        udp_rate,
        tcp_rate,
    })
}

fn bench_profile(one_way_ms: f64) -> Profile {
    Profile::simple(
        &format!("bench-{}ms", crate::config::profile::fmt_num(one_way_ms)),
        2.0 * one_way_ms,
        0.0,
        0.0,
    )
}

fn nanos_since(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

/// Records the machine's CPU-steal counter every 5 ms, to mark samples hit by a hiccup.
struct StealSampler {
    /// (time since base in ns, steal in ms) at each change.
    changes: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StealSampler {
    fn start(base: Instant) -> StealSampler {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (changes.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("steal-sampler".into())
            .spawn(move || {
                let mut last = host::cpu_steal_ms();
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                    let now = host::cpu_steal_ms();
                    if now > last {
                        c.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(nanos_since(base));
                        last = now;
                    }
                }
            })
            .ok();
        StealSampler {
            changes,
            stop,
            thread,
        }
    }

    /// True if steal was counted within 20 ms of `[from, to]` (ns since base).
    fn near_steal(&self, from: u64, to: u64) -> bool {
        const MARGIN: u64 = 20_000_000;
        let changes = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        changes
            .iter()
            .any(|&t| t + MARGIN >= from && t <= to + MARGIN)
    }
}

impl Drop for StealSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A probe's four time stamps (ns since base).
#[derive(Debug, Clone, Copy)]
struct Probe {
    sent: u64,
    server_rx: u64,
    server_tx: u64,
    returned: u64,
}

const PROBE_LEN: usize = 64;

fn measure_precision(
    link: &Link,
    opts: &BenchOptions,
    one_way_ms: f64,
    bulk: bool,
    base: Instant,
    steal: &StealSampler,
) -> Result<PrecisionRow> {
    let stop = Arc::new(AtomicBool::new(false));
    let echo = UdpEcho::start(link, base)?;
    let bulk_flow = if bulk {
        let f = BulkTcp::start(link)?;
        // Let the flow leave slow start before measuring.
        std::thread::sleep(Duration::from_millis(500) + Duration::from_secs_f64(one_way_ms * 4e-3));
        Some(f)
    } else {
        None
    };
    let client_ip = link.client_ip();
    let socket = link
        .client()
        .run(move || UdpSocket::bind((client_ip, 0)))??;
    socket.connect(echo.addr)?;
    socket.set_read_timeout(Some(Duration::from_millis(100)))?;
    let receiver_socket = socket.try_clone()?;
    let n = (opts.probe_seconds / opts.probe_interval.as_secs_f64()).ceil() as usize;
    let sent_at: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let results: Arc<Mutex<Vec<Probe>>> = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let receiver = spawn_probe_receiver(
        receiver_socket,
        base,
        stop.clone(),
        sent_at.clone(),
        results.clone(),
    )?;
    let _ = link.take_stats()?;
    let load = OtherLoad::start();
    let sender = spawn_probe_sender(socket, base, sent_at.clone(), opts.probe_interval)?;
    sender
        .join()
        .map_err(|_| anyhow::anyhow!("probe sender panicked"))?;
    std::thread::sleep(
        Duration::from_secs_f64(2.0 * one_way_ms / 1e3) + Duration::from_millis(300),
    );
    let stats = link.take_stats()?;
    let other_load_pct = load.pct();
    stop.store(true, Ordering::Relaxed);
    let _ = receiver.join();
    let bulk_mbit = bulk_flow.map(|f| f.stop()).transpose()?;
    drop(echo);
    let probes = std::mem::take(&mut *results.lock().unwrap_or_else(|p| p.into_inner()));
    let mut row = summarise(one_way_ms, bulk, n, &probes, &stats, steal, bulk_mbit);
    row.other_load_pct = other_load_pct;
    Ok(row)
}

/// The thread that reads the echoed probes from `socket` until `stop`, each with the time it
/// was sent (`sent_at`, by sequence number) and came back, into `results`.
fn spawn_probe_receiver(
    socket: UdpSocket,
    base: Instant,
    stop: Arc<AtomicBool>,
    sent_at: Arc<Vec<AtomicU64>>,
    results: Arc<Mutex<Vec<Probe>>>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("probe-rx".into())
        .spawn(move || {
            probe_thread_setup();
            let mut buf = [0u8; 256];
            while !stop.load(Ordering::Relaxed) {
                let Ok(len) = socket.recv(&mut buf) else {
                    continue;
                };
                let returned = nanos_since(base);
                if len < 32 {
                    continue;
                }
                let field =
                    |i: usize| u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap());
                let seq = field(0) as usize;
                if seq >= sent_at.len() {
                    continue;
                }
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(Probe {
                        sent: sent_at[seq].load(Ordering::Relaxed),
                        server_rx: field(2),
                        server_tx: field(3),
                        returned,
                    });
            }
        })
}

/// The thread that sends one probe per `interval` on `socket`, a slot of `sent_at` each,
/// noting when it went.
fn spawn_probe_sender(
    socket: UdpSocket,
    base: Instant,
    sent_at: Arc<Vec<AtomicU64>>,
    interval: Duration,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("probe-tx".into())
        .spawn(move || {
            probe_thread_setup();
            let start = Instant::now();
            let mut buf = [0u8; PROBE_LEN];
            for (seq, slot) in sent_at.iter().enumerate() {
                let tick = start + interval * seq as u32;
                if let Some(wait) = tick.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let t = nanos_since(base);
                slot.store(t, Ordering::Relaxed);
                buf[..8].copy_from_slice(&(seq as u64).to_le_bytes());
                buf[8..16].copy_from_slice(&t.to_le_bytes());
                let _ = socket.send(&buf);
            }
        })
}

fn summarise(
    one_way_ms: f64,
    bulk: bool,
    sent: usize,
    probes: &[Probe],
    stats: &LinkStats,
    steal: &StealSampler,
    bulk_mbit: Option<f64>,
) -> PrecisionRow {
    let ms = |ns: u64, from: u64| (ns.saturating_sub(from)) as f64 / 1e6;
    let up: Vec<f64> = probes
        .iter()
        .map(|p| ms(p.server_rx, p.sent) - one_way_ms)
        .collect();
    let down: Vec<f64> = probes
        .iter()
        .map(|p| ms(p.returned, p.server_tx) - one_way_ms)
        .collect();
    let rtt: Vec<f64> = probes
        .iter()
        .map(|p| ms(p.returned, p.sent) - 2.0 * one_way_ms)
        .collect();
    let clean: Vec<f64> = probes
        .iter()
        .filter(|p| !steal.near_steal(p.sent, p.returned))
        .map(|p| ms(p.returned, p.sent) - 2.0 * one_way_ms)
        .collect();
    PrecisionRow {
        one_way_ms,
        load: if bulk { "bulk TCP" } else { "idle" }.into(),
        sent,
        lost: sent.saturating_sub(probes.len()),
        up: ErrorSummary::of(&up),
        down: ErrorSummary::of(&down),
        rtt: ErrorSummary::of(&rtt),
        rtt_outside_steal: ErrorSummary::of(&clean),
        steal_affected: probes.len() - clean.len(),
        lateness_p99_us: stats.up.lateness.p99_us.max(stats.down.lateness.p99_us),
        lateness_max_us: stats.up.lateness.max_us.max(stats.down.lateness.max_us),
        emulator_cpu_pct: stats.emulator_cpu_pct,
        steal_ms: stats.steal_ms,
        other_load_pct: 0.0,
        bulk_mbit,
    }
}

/// CPU use of everything but this process over an interval, from `/proc/stat` and getrusage.
struct OtherLoad {
    started: Instant,
    busy_ms: f64,
    own_ms: f64,
}

impl OtherLoad {
    fn start() -> OtherLoad {
        OtherLoad {
            started: Instant::now(),
            busy_ms: host::machine_busy_ms(),
            own_ms: host::process_cpu_ms(),
        }
    }

    /// Share of the machine's CPU time other processes used since `start`, in percent.
    fn pct(&self) -> f64 {
        let busy = host::machine_busy_ms() - self.busy_ms;
        let own = host::process_cpu_ms() - self.own_ms;
        let total = self.started.elapsed().as_secs_f64() * 1e3 * host::cpu_count() as f64;
        (100.0 * (busy - own) / total).clamp(0.0, 100.0)
    }
}

/// Priority of the probe threads: real-time (so other load on the machine does not delay the
/// measuring endpoints) but below the emulator's.
const PROBE_RT_PRIORITY: i32 = 5;

/// Timer slack 1 ns and SCHED_FIFO for a probe thread (best effort: at normal priority the
/// figures include the endpoints' own scheduling delays).
fn probe_thread_setup() {
    host::set_timer_slack_1ns();
    let _ = host::set_sched_fifo(PROBE_RT_PRIORITY);
}

/// A UDP echo server in the server namespace that stamps receive and send times.
struct UdpEcho {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl UdpEcho {
    fn start(link: &Link, base: Instant) -> Result<UdpEcho> {
        let ip = link.server_ip();
        let socket = link.server().run(move || UdpSocket::bind((ip, 0)))??;
        socket.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = socket.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("probe-echo".into())
            .spawn(move || {
                probe_thread_setup();
                let mut buf = [0u8; 256];
                while !s.load(Ordering::Relaxed) {
                    let Ok((len, from)) = socket.recv_from(&mut buf) else {
                        continue;
                    };
                    let rx = nanos_since(base);
                    if len >= 32 {
                        buf[16..24].copy_from_slice(&rx.to_le_bytes());
                        buf[24..32].copy_from_slice(&nanos_since(base).to_le_bytes());
                    }
                    let _ = socket.send_to(&buf[..len], from);
                }
            })?;
        Ok(UdpEcho {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for UdpEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A bulk TCP download: the server writes as fast as the link takes, the client reads.
struct BulkTcp {
    stop: Arc<AtomicBool>,
    writer: JoinHandle<()>,
    reader: JoinHandle<u64>,
    started: Instant,
}

impl BulkTcp {
    fn start(link: &Link) -> Result<BulkTcp> {
        let ip = link.server_ip();
        let listener = link.server().run(move || TcpListener::bind((ip, 0)))??;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let writer = std::thread::Builder::new()
            .name("bulk-writer".into())
            .spawn(move || {
                let Ok((mut stream, _)) = listener.accept() else {
                    return;
                };
                let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                let chunk = vec![0x5au8; 64 * 1024];
                while !s.load(Ordering::Relaxed) {
                    use std::io::Write;
                    if let Err(e) = stream.write(&chunk) {
                        if e.kind() != std::io::ErrorKind::WouldBlock
                            && e.kind() != std::io::ErrorKind::TimedOut
                        {
                            return;
                        }
                    }
                }
            })?;
        let stream = link.client().run(move || TcpStream::connect(addr))??;
        let reader = std::thread::Builder::new()
            .name("bulk-reader".into())
            .spawn(move || {
                use std::io::Read;
                let mut stream = stream;
                let mut buf = vec![0u8; 256 * 1024];
                let mut total = 0u64;
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
                total
            })?;
        Ok(BulkTcp {
            stop,
            writer,
            reader,
            started: Instant::now(),
        })
    }

    /// Stops the flow; returns its goodput in Mbit/s.
    fn stop(self) -> Result<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.writer.join();
        let bytes = self
            .reader
            .join()
            .map_err(|_| anyhow::anyhow!("bulk reader panicked"))?;
        Ok(bytes as f64 * 8.0 / self.started.elapsed().as_secs_f64() / 1e6)
    }
}

/// Sets a socket's receive buffer beyond `rmem_max` (root only; best effort).
fn force_rcvbuf(fd: i32, bytes: i32) {
    // SAFETY: setsockopt with a valid int option value.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &bytes as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

fn measure_udp_rate(link: &Link, seconds: f64) -> Result<RateResult> {
    let (cip, sip) = (link.client_ip(), link.server_ip());
    let rx = link.server().run(move || UdpSocket::bind((sip, 0)))??;
    force_rcvbuf(rx.as_raw_fd(), 16 << 20);
    rx.set_read_timeout(Some(Duration::from_millis(100)))?;
    let to = rx.local_addr()?;
    let tx = link.client().run(move || UdpSocket::bind((cip, 0)))??;
    tx.connect(to)?;
    let stop = Arc::new(AtomicBool::new(false));
    let received = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("blast-rx".into())
            .spawn(move || {
                let mut buf = [0u8; 2048];
                let mut bytes = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(n) = rx.recv(&mut buf) {
                        bytes += n as u64;
                    }
                }
                bytes
            })?
    };
    let _ = link.take_stats()?;
    let started = Instant::now();
    let payload = [0xa5u8; 1472]; // + 8 UDP + 20 IP = 1500 bytes
    let until = started + Duration::from_secs_f64(seconds);
    while Instant::now() < until {
        for _ in 0..64 {
            let _ = send_batch(&tx, &payload, 32);
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    let stats = link.take_stats()?;
    stop.store(true, Ordering::Relaxed);
    let bytes = received
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))?;
    Ok(rate_result(
        "UDP 1500 B",
        &stats,
        stats.up.packets_out,
        stats.up.bytes_out,
        bytes,
    ))
}

/// Sends `count` copies of `payload` with one `sendmmsg`.
fn send_batch(socket: &UdpSocket, payload: &[u8], count: usize) -> std::io::Result<usize> {
    let mut iov: Vec<libc::iovec> = (0..count)
        .map(|_| libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = iov
        .iter_mut()
        .map(|v| {
            // SAFETY: an all-zero msghdr is valid; we then point it at one iovec.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    // SAFETY: msgs and their iovecs stay alive for the call; the socket is connected.
    let n = unsafe {
        libc::sendmmsg(
            socket.as_raw_fd(),
            msgs.as_mut_ptr(),
            msgs.len() as libc::c_uint,
            0,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn measure_tcp_rate(link: &Link, seconds: f64) -> Result<RateResult> {
    let flow = BulkTcp::start(link)?;
    std::thread::sleep(Duration::from_millis(300));
    let _ = link.take_stats()?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let stats = link.take_stats()?;
    let goodput = flow.stop()?;
    let mut r = rate_result(
        "bulk TCP (data direction)",
        &stats,
        stats.down.packets_out,
        stats.down.bytes_out,
        0,
    );
    r.delivered_mbit_per_s = goodput;
    Ok(r)
}

fn rate_result(
    what: &str,
    stats: &LinkStats,
    packets: u64,
    bytes: u64,
    delivered_bytes: u64,
) -> RateResult {
    let s = stats.elapsed_s.max(1e-9);
    let all_packets = stats.up.packets_out + stats.down.packets_out;
    RateResult {
        what: what.into(),
        seconds: stats.elapsed_s,
        packets_per_s: packets as f64 / s,
        mbit_per_s: bytes as f64 * 8.0 / s / 1e6,
        delivered_mbit_per_s: delivered_bytes as f64 * 8.0 / s / 1e6,
        emulator_cpu_pct: stats.emulator_cpu_pct,
        cpu_us_per_packet: if all_packets > 0 {
            stats.emulator_cpu_ms * 1e3 / all_packets as f64
        } else {
            0.0
        },
        tun_tx_dropped: stats.up.tun_tx_dropped + stats.down.tun_tx_dropped,
        steal_ms: stats.steal_ms,
    }
}

/// The report as terminal text.
pub fn render(r: &BenchReport) -> String {
    let mut out = format!(
        "pagebench bench netem — {} CPUs, emulator {}, idle CPUs {}\n\n",
        r.cpus,
        if r.realtime {
            "SCHED_FIFO"
        } else {
            "normal priority"
        },
        if r.cpus_held_awake {
            "polling (PM QoS 0 µs)"
        } else {
            "allowed to halt"
        }
    );
    out.push_str("Delay error (measured − configured, ms), UDP probes every 2 ms, no jitter:\n");
    let mut rows = vec![vec![
        "one-way".to_string(),
        "load".into(),
        "up med/p99/max".into(),
        "down med/p99/max".into(),
        "RTT med/p99/max".into(),
        "RTT p99 w/o steal".into(),
        "lateness p99/max µs".into(),
        "lost".into(),
        "steal ms".into(),
        "emu CPU".into(),
        "other load".into(),
    ]];
    let f = |e: &ErrorSummary| format!("{:.3}/{:.3}/{:.3}", e.median_ms, e.p99_ms, e.max_ms);
    for p in &r.precision {
        rows.push(vec![
            format!("{} ms", crate::config::profile::fmt_num(p.one_way_ms)),
            match p.bulk_mbit {
                Some(m) => format!("{} ({m:.0} Mbit/s)", p.load),
                None => p.load.clone(),
            },
            f(&p.up),
            f(&p.down),
            f(&p.rtt),
            format!(
                "{:.3} ({} hit)",
                p.rtt_outside_steal.p99_ms, p.steal_affected
            ),
            format!("{:.0}/{:.0}", p.lateness_p99_us, p.lateness_max_us),
            format!("{}/{}", p.lost, p.sent),
            format!("{:.0}", p.steal_ms),
            format!("{:.1} %", p.emulator_cpu_pct),
            format!("{:.0} %", p.other_load_pct),
        ]);
    }
    out.push_str(&textfmt::table(&rows));
    out.push_str("\nForwarding rate at 0 ms:\n");
    let mut rows = vec![vec![
        "traffic".to_string(),
        "packets/s".into(),
        "Mbit/s (IP)".into(),
        "goodput Mbit/s".into(),
        "emu CPU".into(),
        "µs CPU/packet".into(),
        "TUN drops".into(),
        "steal ms".into(),
    ]];
    for x in [&r.udp_rate, &r.tcp_rate] {
        rows.push(vec![
            x.what.clone(),
            format!("{:.0}", x.packets_per_s),
            format!("{:.0}", x.mbit_per_s),
            format!("{:.0}", x.delivered_mbit_per_s),
            format!("{:.0} %", x.emulator_cpu_pct),
            format!("{:.2}", x.cpu_us_per_packet),
            x.tun_tx_dropped.to_string(),
            format!("{:.0}", x.steal_ms),
        ]);
    }
    out.push_str(&textfmt::table(&rows));
    let idle: Vec<&PrecisionRow> = r.precision.iter().filter(|p| p.load == "idle").collect();
    let worst_median = idle
        .iter()
        .map(|p| p.rtt.median_ms)
        .fold(f64::NAN, f64::max);
    let worst_p99 = idle
        .iter()
        .map(|p| p.rtt_outside_steal.p99_ms)
        .fold(f64::NAN, f64::max);
    out.push_str(&format!(
        "\nvs the Python prototype: {:.0} packets/s = {:.1}× its ~{:.0}k (target ≥ 4×); idle median RTT error ≤ {:.3} ms \
         (prototype +{}–{} ms; target ≤ 0.1 ms); idle RTT p99 outside steal ≤ {:.3} ms (target ≤ 0.5 ms)\n",
        r.udp_rate.packets_per_s,
        r.udp_rate.packets_per_s / PROTOTYPE_PPS,
        PROTOTYPE_PPS / 1e3,
        worst_median,
        PROTOTYPE_RTT_ERROR_MS.0,
        PROTOTYPE_RTT_ERROR_MS.1,
        worst_p99
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_summary_uses_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        let s = ErrorSummary::of(&v);
        assert_eq!((s.median_ms, s.p99_ms, s.max_ms), (50.0, 99.0, 100.0));
        assert_eq!(ErrorSummary::of(&[]).samples, 0);
    }
}
