//! [`Link`]: the client and server namespaces, their TUN devices and the emulator thread between
//! them, built from a profile and torn down on Drop (also while a panic unwinds, and by the
//! signal handler's emergency cleanup if the process is forced to exit).

use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use super::cross::CrossFlows;
use super::emulator::Emulator;
use super::host;
use super::link_stats::{self_check, DirectionStats, LinkEvents, LinkStats, SelfCheck};
use super::model::{Direction, DirectionConfig, LinkDirection};
use super::netns::{self, Namespace};
use super::trace::{PacketTrace, TapPacket};
use super::tun::{open_tun, DeviceCounters, DeviceStatsReader};
use crate::config::capacity::TraceStart;
use crate::config::profile::Profile;

/// TUN device name in the client namespace.
pub const CLIENT_DEVICE: &str = "pbtun-c";
/// TUN device name in the server namespace.
pub const SERVER_DEVICE: &str = "pbtun-s";
/// MTU of both devices (as on a real Ethernet path).
pub const MTU: u32 = 1500;
/// Kernel queue of each TUN device, in packets (default 500): slack for short emulator stalls.
pub const TUN_QUEUE_LEN: u32 = 1000;

/// How to build a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkOptions {
    /// Seeds the loss and jitter draws (the same seed gives the same draws for the same packets).
    pub seed: u64,
    /// Run the emulator thread under SCHED_FIFO (falls back to normal priority with a warning).
    pub realtime: bool,
    /// Keep idle CPUs polling instead of halting while the link exists (see
    /// [`host::CpuWakeLatencyHold`]): on a VM this takes 50–100 µs off every wake-up of the
    /// emulator and the endpoints. Skipped with a warning if not allowed.
    pub hold_cpus_awake: bool,
    /// Pin the emulator to one CPU and steer the receive processing of the packets it writes to
    /// the other CPUs (RPS on both TUN devices), on machines with more than one CPU. A write
    /// into a TUN device otherwise runs the receiving host's whole IP/TCP path in the
    /// emulator's thread, so each packet of a burst waits for the stack work of the ones before
    /// it: 0.4–0.9 ms late at the end of a TCP burst here, which inflated TCP's RTT and not
    /// QUIC's (paced). A real link delivers the burst; the host's stack then works through it.
    pub steer_receive: bool,
    /// Addresses the server namespace has besides its own (one per replayed origin address):
    /// each is routed over the link from the client namespace and accepted by the emulator.
    pub extra_server_addresses: usize,
}

impl Default for LinkOptions {
    fn default() -> Self {
        LinkOptions {
            seed: 1,
            realtime: true,
            hold_cpus_awake: true,
            steer_receive: true,
            extra_server_addresses: 0,
        }
    }
}

/// Counter baselines of the current snapshot interval.
struct Interval {
    started: Instant,
    steal_ms: f64,
    cpu_ns: u64,
    client_dev: DeviceCounters,
    server_dev: DeviceCounters,
}

struct State {
    profile: Profile,
    interval: Interval,
    client_dev: DeviceStatsReader,
    server_dev: DeviceStatsReader,
    /// The profile's competing flows, while it has some.
    cross: Option<CrossFlows>,
}

/// A running packet tap (see [`Link::start_tap`]).
pub struct Tap {
    rx: std::sync::mpsc::Receiver<TapPacket>,
    start: Instant,
    start_wall: std::time::SystemTime,
}

/// An emulated link between a client and a server namespace.
pub struct Link {
    emulator: Option<Emulator>,
    /// The CPU the emulator is pinned to (receive steering on), if it is.
    emulator_cpu: Option<usize>,
    /// That CPU kept from devices' caps while the link lives.
    _reserved_cpu: Option<crate::support::cpu_cap::EmulatorCpu>,
    awake: Option<host::CpuWakeLatencyHold>,
    state: Mutex<State>,
    client_ip: Ipv4Addr,
    server_ips: Vec<Ipv4Addr>,
    seed: u64,
    // Dropped after the emulator (see Drop): the namespaces outlive the TUN fds.
    client: Namespace,
    server: Namespace,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("client", &self.client.name())
            .field("server", &self.server.name())
            .field("client_ip", &self.client_ip)
            .field("server_ips", &self.server_ips)
            .finish()
    }
}

/// Most extra server addresses a link takes (`10.250.0.0/16` in the namespaces only).
pub const MAX_EXTRA_SERVER_ADDRESSES: usize = 250 * 250;

/// The `i`-th (0-based) extra server address. They live only inside the link's namespaces
/// (each has its own routing table), so every link may use the same ones.
pub fn extra_server_address(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 250, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// The /30 of link `instance`: client `.1`, server `.2` of `10.A.B.C/30`. Each namespace only
/// routes this /30 (no default route), so nothing can leave for the real network.
pub fn link_addresses(instance: u64) -> (Ipv4Addr, Ipv4Addr) {
    let a = 100 + ((instance >> 14) % 100) as u8;
    let b = ((instance >> 6) & 0xff) as u8;
    let c = ((instance & 63) * 4) as u8;
    (
        Ipv4Addr::new(10, a, b, c + 1),
        Ipv4Addr::new(10, a, b, c + 2),
    )
}

impl Link {
    /// Builds the namespaces, TUN devices and emulator for `profile`.
    pub fn new(profile: &Profile, options: LinkOptions) -> Result<Link> {
        host::preflight()?;
        profile
            .validate()
            .map_err(|m| anyhow!("profile {:?}: {m}", profile.name))?;
        crate::support::signals::install();
        let instance = netns::next_instance();
        let (client_ip, server_ip) = link_addresses(instance);
        let client = Namespace::create(instance, "c")?;
        let server = Namespace::create(instance, "s")?;
        if options.extra_server_addresses > MAX_EXTRA_SERVER_ADDRESSES {
            bail!(
                "{} server addresses asked for; a link has at most {MAX_EXTRA_SERVER_ADDRESSES} besides its own",
                options.extra_server_addresses
            );
        }
        let (client_tun, client_dev) = setup_device(&client, CLIENT_DEVICE, client_ip)?;
        let (server_tun, server_dev) = setup_device(&server, SERVER_DEVICE, server_ip)?;
        let mut server_ips = vec![server_ip];
        server_ips.extend((0..options.extra_server_addresses).map(extra_server_address));
        add_server_addresses(&client, &server, &server_ips[1..])?;
        let allowed = host::allowed_cpus();
        let pin_cpu = (options.steer_receive && allowed.len() > 1)
            .then(|| {
                let cpu = emulator_cpu(instance, &allowed);
                let mask = rps_mask(&allowed, cpu);
                for (ns, dev) in [(&client, CLIENT_DEVICE), (&server, SERVER_DEVICE)] {
                    if let Err(e) = steer_receive(ns, dev, &mask) {
                        tracing::warn!("receive steering on {dev} refused ({e:#}): the emulator's releases will be late in bursts");
                        return None;
                    }
                }
                Some(cpu)
            })
            .flatten();
        let (up_cfg, down_cfg) = direction_configs(profile, client_ip, &server_ips, options.seed);
        let up = LinkDirection::new(up_cfg, direction_seed(options.seed, Direction::Up));
        let down = LinkDirection::new(down_cfg, direction_seed(options.seed, Direction::Down));
        let emulator = Emulator::start(
            client_tun,
            server_tun,
            up,
            down,
            options.realtime,
            pin_cpu,
            &instance.to_string(),
        )?;
        let mut state = State {
            profile: profile.clone(),
            interval: Interval {
                started: Instant::now(),
                steal_ms: 0.0,
                cpu_ns: 0,
                client_dev: DeviceCounters::default(),
                server_dev: DeviceCounters::default(),
            },
            client_dev,
            server_dev,
            cross: None,
        };
        state.interval = new_interval(&mut state, 0)?;
        if let Some(spec) = &profile.cross_traffic {
            state.cross = Some(CrossFlows::start(
                spec, &client, &server, client_ip, server_ip,
            )?);
        }
        tracing::debug!(
            "link up: {} ({client_ip}) <-> {} ({server_ip}), {}",
            client.name(),
            server.name(),
            profile
        );
        let awake = if options.hold_cpus_awake {
            match host::CpuWakeLatencyHold::acquire() {
                Ok(h) => Some(h),
                Err(e) => {
                    tracing::warn!("cannot keep CPUs out of halt (/dev/cpu_dma_latency: {e}); wake-ups will be slower");
                    None
                }
            }
        } else {
            None
        };
        Ok(Link {
            emulator_cpu: emulator.pinned_cpu(),
            _reserved_cpu: emulator
                .pinned_cpu()
                .map(crate::support::cpu_cap::reserve_for_emulator),
            emulator: Some(emulator),
            awake,
            state: Mutex::new(state),
            client_ip,
            server_ips,
            seed: options.seed,
            client,
            server,
        })
    }

    pub fn client(&self) -> &Namespace {
        &self.client
    }

    pub fn server(&self) -> &Namespace {
        &self.server
    }

    pub fn client_ip(&self) -> Ipv4Addr {
        self.client_ip
    }

    pub fn server_ip(&self) -> Ipv4Addr {
        self.server_ips[0]
    }

    /// The server namespace's addresses: its own first, then the extra ones.
    pub fn server_ips(&self) -> &[Ipv4Addr] {
        &self.server_ips
    }

    /// Whether idle CPUs are kept polling (see [`LinkOptions::hold_cpus_awake`]).
    pub fn cpus_held_awake(&self) -> bool {
        self.awake.is_some()
    }

    /// Whether the emulator thread got SCHED_FIFO.
    pub fn realtime(&self) -> bool {
        self.emulator().realtime()
    }

    /// Whether the emulator thread is still running: a link whose emulator stopped carries no
    /// packets and must be rebuilt.
    pub fn is_running(&self) -> bool {
        self.emulator().is_running()
    }

    /// A handle to stall or stop the emulator from another thread (tests of the run gate).
    pub fn fault_handle(&self) -> Result<super::emulator::FaultHandle> {
        self.emulator().fault_handle()
    }

    /// Delivers what the client sends to port `map.public` of any server address at
    /// `map.server` (and the answers back from `map.public`) until told otherwise (`None`).
    pub fn map_port(&self, map: Option<super::nat::PortMap>) -> Result<()> {
        self.emulator().map_port(map)
    }

    /// Starts recording every packet the emulator handles (a run's capture).
    pub fn start_tap(&self) -> Result<Tap> {
        let (tx, rx) = std::sync::mpsc::channel();
        let start = Instant::now();
        let start_wall = std::time::SystemTime::now();
        self.emulator().tap(Some(tx))?;
        Ok(Tap {
            rx,
            start,
            start_wall,
        })
    }

    /// Stops recording and returns what `tap` saw.
    pub fn finish_tap(&self, tap: Tap) -> Result<PacketTrace> {
        self.emulator().tap(None)?;
        let packets: Vec<TapPacket> = tap.rx.try_iter().collect();
        Ok(PacketTrace::from_tap(tap.start, tap.start_wall, packets))
    }

    fn emulator(&self) -> &Emulator {
        self.emulator.as_ref().expect("emulator present until drop")
    }

    /// The emulator thread's id (its CPU time and run-queue wait are a run's contention).
    pub fn emulator_thread(&self) -> i32 {
        self.emulator().thread_id()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The profile in force.
    pub fn profile(&self) -> Profile {
        self.lock().profile.clone()
    }

    /// Switches the running link to `profile` (packets already inside keep their schedule).
    pub fn set_profile(&self, profile: &Profile) -> Result<()> {
        profile
            .validate()
            .map_err(|m| anyhow!("profile {:?}: {m}", profile.name))?;
        let (up, down) = direction_configs(profile, self.client_ip, &self.server_ips, self.seed);
        let mut st = self.lock();
        self.emulator().reconfigure(up, down)?;
        st.profile = profile.clone();
        let same_flows = st.cross.as_ref().map(|c| c.spec()) == profile.cross_traffic.as_ref();
        if !same_flows {
            st.cross = None;
            if let Some(spec) = &profile.cross_traffic {
                st.cross = Some(CrossFlows::start(
                    spec,
                    &self.client,
                    &self.server,
                    self.client_ip,
                    self.server_ips[0],
                )?);
            }
        }
        Ok(())
    }

    /// Starts the events' timeline now — the run's mark: outages, NAT rebinding and a trace's
    /// position count from the returned instant (see [`crate::link::events`]); a capacity
    /// trace from `trace_start`.
    pub fn start_timeline(&self, trace_start: TraceStart) -> Result<Instant> {
        self.start_run(trace_start, None)
    }

    /// [`Link::start_timeline`], every random draw from the mark on coming from `draws` (when
    /// given): a run's loss, jitter and outages depend on its own seed alone.
    pub fn start_run(&self, trace_start: TraceStart, draws: Option<u64>) -> Result<Instant> {
        let seeds = draws.map(|s| {
            [
                direction_seed(s, Direction::Up),
                direction_seed(s, Direction::Down),
            ]
        });
        self.emulator().start_timeline(trace_start, seeds)
    }

    /// Counters since the link was built or the last [`Link::take_stats`].
    pub fn stats(&self) -> Result<LinkStats> {
        self.snapshot(false)
    }

    /// Counters since the link was built or the last call, and start a new interval (one per
    /// run).
    pub fn take_stats(&self) -> Result<LinkStats> {
        self.snapshot(true)
    }

    /// The self-check of `stats` against `profile` (see [`self_check`]).
    pub fn self_check(&self, stats: &LinkStats, profile: &Profile) -> SelfCheck {
        self_check(stats, profile)
    }

    fn snapshot(&self, reset: bool) -> Result<LinkStats> {
        let mut st = self.lock();
        let snap = self.emulator().snapshot(reset)?;
        let now = Instant::now();
        let steal_ms = host::cpu_steal_ms();
        let client_dev = st
            .client_dev
            .read()
            .context("reading the client TUN counters")?;
        let server_dev = st
            .server_dev
            .read()
            .context("reading the server TUN counters")?;
        let iv = &st.interval;
        let elapsed_s = (now - iv.started).as_secs_f64();
        let c = client_dev.since(&iv.client_dev);
        let s = server_dev.since(&iv.server_dev);
        let steal = (steal_ms - iv.steal_ms).max(0.0);
        let cpu_ms = snap.cpu_ns.saturating_sub(iv.cpu_ns) as f64 / 1e6;
        let stats = LinkStats {
            profile: st.profile.name.clone(),
            seed: self.seed,
            elapsed_s,
            up: DirectionStats::new(&snap.up, &snap.up_io, snap.up_in_flight, &c, &s),
            down: DirectionStats::new(&snap.down, &snap.down_io, snap.down_in_flight, &s, &c),
            steal_ms: steal,
            steal_pct: share(steal, elapsed_s * 1e3 * host::cpu_count() as f64),
            emulator_cpu_ms: cpu_ms,
            emulator_cpu_pct: share(cpu_ms, elapsed_s * 1e3),
            realtime: self.emulator().realtime(),
            cpus_held_awake: self.awake.is_some(),
            emulator_cpu: self.emulator_cpu,
            events: link_events(&st.profile, &snap, iv.started, now),
            cross: if reset {
                st.cross.as_mut().map(|c| c.take()).unwrap_or_default()
            } else {
                Vec::new()
            },
        };
        if reset {
            st.interval = Interval {
                started: now,
                steal_ms,
                cpu_ns: snap.cpu_ns,
                client_dev,
                server_dev,
            };
        }
        Ok(stats)
    }
}

/// The profile's events as the emulator's timeline placed them (profiles with outages or NAT
/// rebinding only).
fn link_events(
    profile: &Profile,
    snap: &super::emulator::Snapshot,
    interval_start: Instant,
    now: Instant,
) -> Option<LinkEvents> {
    if !profile.has_outages() && profile.nat_rebind_at_s.is_none() {
        return None;
    }
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let start = snap.timeline_start;
    let offset_ms = if start >= interval_start {
        ms(start - interval_start)
    } else {
        -ms(interval_start - start)
    };
    let unix_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Some(LinkEvents {
        timeline_offset_ms: offset_ms,
        timeline_start_unix_ms: ms(unix_now) - ms(now.saturating_duration_since(start)),
        outages_ms: snap.outages.iter().map(|(s, e)| [ms(*s), ms(*e)]).collect(),
        rebind_at_ms: snap
            .rebind_at
            .map(|t| ms(t.saturating_duration_since(start))),
    })
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

fn new_interval(st: &mut State, cpu_ns: u64) -> Result<Interval> {
    Ok(Interval {
        started: Instant::now(),
        steal_ms: host::cpu_steal_ms(),
        cpu_ns,
        client_dev: st.client_dev.read()?,
        server_dev: st.server_dev.read()?,
    })
}

impl Drop for Link {
    fn drop(&mut self) {
        // The competing flows first (their sockets live in the namespaces), then the emulator
        // thread and the TUN fds; the namespaces go after (field drops).
        self.lock().cross = None;
        self.emulator.take();
    }
}

fn direction_seed(seed: u64, dir: Direction) -> u64 {
    // Distinct, well-mixed seeds per direction (splitmix64 step).
    let mut z = seed.wrapping_add(match dir {
        Direction::Up => 0x9E37_79B9_7F4A_7C15,
        Direction::Down => 0x3C6E_F372_FE94_F82A,
    });
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn direction_configs(
    profile: &Profile,
    client_ip: Ipv4Addr,
    server_ips: &[Ipv4Addr],
    seed: u64,
) -> (DirectionConfig, DirectionConfig) {
    (
        DirectionConfig::from_profile(
            profile,
            Direction::Up,
            server_ips.to_vec(),
            server_ips,
            seed,
        ),
        DirectionConfig::from_profile(profile, Direction::Down, vec![client_ip], server_ips, seed),
    )
}

/// Gives the server namespace `extra` addresses (on its TUN device) and routes them over the
/// link from the client namespace.
fn add_server_addresses(client: &Namespace, server: &Namespace, extra: &[Ipv4Addr]) -> Result<()> {
    if extra.is_empty() {
        return Ok(());
    }
    let on_server: String = extra
        .iter()
        .map(|a| format!("addr add {a}/32 dev {SERVER_DEVICE}\n"))
        .collect();
    netns::run_ip_with_input(&["-n", server.name(), "-batch", "-"], Some(&on_server))
        .with_context(|| format!("adding server addresses in {}", server.name()))?;
    let on_client: String = extra
        .iter()
        .map(|a| format!("route add {a}/32 dev {CLIENT_DEVICE}\n"))
        .collect();
    netns::run_ip_with_input(&["-n", client.name(), "-batch", "-"], Some(&on_client))
        .with_context(|| format!("routing the server addresses in {}", client.name()))?;
    Ok(())
}

/// The CPU the emulator of link `instance` is pinned to when receive processing is steered
/// away from it (one this process may use): links of different processes (parallel tests)
/// spread over the CPUs.
fn emulator_cpu(instance: u64, allowed: &[usize]) -> usize {
    let i = (std::process::id() as u64 + instance) % allowed.len().max(1) as u64;
    allowed.get(i as usize).copied().unwrap_or(0)
}

/// The hexadecimal RPS mask of the `allowed` CPUs but `skip`.
fn rps_mask(allowed: &[usize], skip: usize) -> String {
    let top = allowed.iter().max().map_or(1, |m| m + 1);
    let mut words = vec![0u32; top.div_ceil(32)];
    for &cpu in allowed.iter().filter(|c| **c != skip) {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Sets the RPS mask of `device`'s receive queue in `ns` (sysfs as that namespace sees it).
fn steer_receive(ns: &Namespace, device: &str, mask: &str) -> Result<()> {
    let path = format!("/sys/class/net/{device}/queues/rx-0/rps_cpus");
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns.name(), "sh", "-c"])
        .arg(format!("echo {mask} > {path}"))
        .output()
        .context("running `ip netns exec`")?;
    if !out.status.success() {
        anyhow::bail!(
            "writing {path} in {}: {}",
            ns.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Creates the TUN device inside `ns`, opens its kernel counters there, and configures it:
/// address `/30`, MTU, queue length, up.
fn setup_device(
    ns: &Namespace,
    device: &str,
    address: Ipv4Addr,
) -> Result<(OwnedFd, DeviceStatsReader)> {
    let (fd, reader) = ns
        .run(|| -> std::io::Result<_> {
            let fd = open_tun(device)?;
            let reader = DeviceStatsReader::open_in_current_namespace(device)?;
            Ok((fd, reader))
        })?
        .with_context(|| format!("creating TUN device {device} in {}", ns.name()))?;
    let batch = format!(
        "addr add {address}/30 dev {device}\nlink set dev {device} mtu {MTU} txqueuelen {TUN_QUEUE_LEN} up\n"
    );
    netns::run_ip_with_input(&["-n", ns.name(), "-batch", "-"], Some(&batch))
        .with_context(|| format!("configuring {device} in {}", ns.name()))?;
    Ok((fd, reader))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_a_unique_slash_30_per_instance() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..5000u64 {
            let (c, s) = link_addresses(i);
            assert_eq!(c.octets()[0], 10);
            assert_eq!(u32::from(s), u32::from(c) + 1);
            assert_eq!(u32::from(c) & 3, 1, "{c} is .1 of a /30");
            assert!(seen.insert(c), "{c} reused");
        }
    }

    #[test]
    fn rps_masks_leave_out_the_emulators_cpu() {
        let all = |n: usize| (0..n).collect::<Vec<_>>();
        assert_eq!(rps_mask(&all(2), 0), "00000002");
        assert_eq!(rps_mask(&all(4), 0), "0000000e");
        assert_eq!(rps_mask(&all(40), 0), "000000ff,fffffffe");
        // A restricted cpuset: only the CPUs the process may use.
        assert_eq!(rps_mask(&[2, 5, 7], 5), "00000084");
        assert!([2, 5, 7].contains(&emulator_cpu(3, &[2, 5, 7])));
    }

    #[test]
    fn a_link_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Link>();
        shareable::<Namespace>();
    }

    #[test]
    fn direction_seeds_differ() {
        assert_ne!(
            direction_seed(1, Direction::Up),
            direction_seed(1, Direction::Down)
        );
        assert_ne!(
            direction_seed(1, Direction::Up),
            direction_seed(2, Direction::Up)
        );
    }
}
