//! The IO shell around the link model: one thread holds both TUN fds, reads every packet the
//! moment it can (non-blocking, both devices in turn), stamps it, offers it to its direction's
//! [`LinkDirection`], and writes each packet to the other device at its own due time.
//!
//! Timing: timer slack 1 ns; the thread sleeps in `epoll_pwait2` with a nanosecond timeout until
//! the earliest due time (or until a device is readable). Under SCHED_FIFO it wakes a little
//! early — by the 95th percentile of how late its recent timed wake-ups came ([`SpinMargin`]) —
//! and spins the rest of the way, still polling the devices so arrivals are stamped on time; at
//! normal priority it never spins (on 2 cores spinning steals the CPU the endpoints need).
//! Under SCHED_FIFO it also pauses for 0.2 ms whenever it has left its CPU to others less than
//! a tenth of the time: else, through a long fast transfer, the kernel's guard against starving
//! normal threads takes the CPU from it for 50 ms at once (see [`super::fair_share`]).
//! Packets are never collected and flushed in batches: after every read the due packets go out.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use super::fair_share::FairShare;
use super::host;
use super::io_counters::IoCounters;
use super::model::{ChosenDrop, Counters, Direction, DirectionConfig, LinkDirection};
use super::nat::PortMap;
use super::trace::TapPacket;
use crate::config::capacity::TraceStart;

/// Bounds of how early a SCHED_FIFO emulator wakes before a due time to spin the rest.
pub const SPIN_MARGIN_MIN: Duration = Duration::from_micros(5);
pub const SPIN_MARGIN_MAX: Duration = Duration::from_micros(300);
/// Read buffer per packet: MTU 1500 without offloads never needs more; a read that fills it
/// was truncated and is dropped (counted as `oversize`).
const BUF_SIZE: usize = 2048;
/// Buffers kept for reuse.
const POOL_MAX: usize = 8192;
/// SCHED_FIFO priority of the emulator thread (above every normal task, below kernel RT work).
const RT_PRIORITY: i32 = 10;

/// `dirs[i]`'s direction.
const DIRECTIONS: [Direction; 2] = [Direction::Up, Direction::Down];

const TOKEN_CLIENT: u64 = 0;
const TOKEN_SERVER: u64 = 1;
const TOKEN_CONTROL: u64 = 2;

/// A consistent view of the emulator taken on its own thread.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub up: Counters,
    pub down: Counters,
    pub up_io: IoCounters,
    pub down_io: IoCounters,
    pub up_in_flight: u64,
    pub down_in_flight: u64,
    /// CPU time the emulator thread used since its start.
    pub cpu_ns: u64,
    /// The events' timeline: its start, the outages on it so far (relative to the start), and
    /// when the NAT rebinds on it.
    pub timeline_start: Instant,
    pub outages: Vec<(Duration, Duration)>,
    pub rebind_at: Option<Instant>,
}

enum Command {
    /// Boxed: a configuration is large next to the other commands.
    Reconfigure(Box<(DirectionConfig, DirectionConfig)>),
    Snapshot {
        reset: bool,
        reply: Sender<Snapshot>,
    },
    Stop,
    /// Test hook: sleep without reading or releasing, as a descheduled emulator would.
    Stall(Duration),
    /// Test hook: end the thread as if it had died (the link's devices go with its fds).
    Exit,
    /// Hand every packet (entered, left or dropped, with its bytes) to this channel from now
    /// on; `None` stops. Off the hot path's cost: the released buffer itself is sent.
    Tap(Option<Sender<TapPacket>>),
    /// Test hook: drop one chosen packet of a direction (index 0 up, 1 down).
    DropChosen(usize, ChosenDrop),
    /// Start the events' timeline now (the run's mark), first reseeding each direction's
    /// draws when seeds are given (up, down); replies with its start.
    StartTimeline(TraceStart, Option<[u64; 2]>, Sender<Instant>),
    /// Deliver a server port under another number from now on (`None`: as addressed).
    PortMap(Option<PortMap>),
}

/// The running emulator thread; stops (and closes the TUN fds) when dropped.
pub struct Emulator {
    thread: Option<JoinHandle<()>>,
    commands: Sender<Command>,
    wake: OwnedFd,
    realtime: bool,
    /// The CPU the thread is pinned to, if pinning was asked for and the kernel took it.
    pinned_cpu: Option<usize>,
    /// The thread's id (for its CPU time and run-queue wait per run).
    tid: i32,
}

impl Emulator {
    /// Starts the thread. `client_tun` carries the `up` direction in, `server_tun` the `down`
    /// direction. With `realtime` the thread asks for SCHED_FIFO and, if refused, warns and runs
    /// at normal priority ([`Emulator::realtime`] says which).
    pub fn start(
        client_tun: OwnedFd,
        server_tun: OwnedFd,
        up: LinkDirection,
        down: LinkDirection,
        realtime: bool,
        pin_cpu: Option<usize>,
        name: &str,
    ) -> Result<Emulator> {
        // SAFETY: eventfd has no pointer arguments; we own the result.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error()).context("creating an eventfd");
        }
        // SAFETY: fresh fd owned by nobody else.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        let wake_for_thread = wake.try_clone().context("duplicating the eventfd")?;
        let (commands, command_rx) = mpsc::channel();
        type Started = (bool, Option<usize>, i32);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<Started, String>>(1);
        let thread = std::thread::Builder::new()
            .name(format!("netem-{name}").chars().take(15).collect())
            .spawn(move || {
                host::set_timer_slack_1ns();
                let pinned = pin_cpu.and_then(|cpu| match host::pin_to_cpu(cpu) {
                    Ok(()) => Some(cpu),
                    Err(e) => {
                        tracing::warn!("emulator: cannot pin to CPU {cpu} ({e})");
                        None
                    }
                });
                let rt = realtime
                    && match host::set_sched_fifo(RT_PRIORITY) {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::warn!(
                                "emulator: SCHED_FIFO refused ({e}); running at normal priority, \
                                 release times will be less precise under CPU load"
                            );
                            false
                        }
                    };
                if !rt {
                    // Best effort: the highest fair-share weight keeps wake-ups prompt when the
                    // endpoints load the CPUs.
                    if let Err(e) = host::set_nice(-20) {
                        tracing::debug!("emulator: nice -20 refused ({e})");
                    }
                }
                let mut lp = match Loop::new(
                    client_tun,
                    server_tun,
                    wake_for_thread,
                    [up, down],
                    command_rx,
                    rt,
                ) {
                    Ok(lp) => lp,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("{e:#}")));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((rt, pinned, crate::support::procfs::thread_id())));
                lp.run();
            })
            .context("spawning the emulator thread")?;
        let (realtime, pinned_cpu, tid) = match ready_rx.recv() {
            Ok(Ok(started)) => started,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(anyhow!("emulator thread failed to start: {e}"));
            }
            Err(_) => {
                let _ = thread.join();
                return Err(anyhow!("emulator thread ended during start-up"));
            }
        };
        Ok(Emulator {
            thread: Some(thread),
            commands,
            wake,
            realtime,
            pinned_cpu,
            tid,
        })
    }

    /// The emulator thread's id.
    pub fn thread_id(&self) -> i32 {
        self.tid
    }

    /// Whether the thread runs under SCHED_FIFO.
    pub fn realtime(&self) -> bool {
        self.realtime
    }

    /// The CPU the thread is pinned to (None: not asked, or the kernel refused).
    pub fn pinned_cpu(&self) -> Option<usize> {
        self.pinned_cpu
    }

    fn send(&self, cmd: Command) -> Result<()> {
        send_to(&self.commands, &self.wake, cmd)
    }

    /// Whether the thread is still running (it ends on Stop, on a failing wait, or by a panic).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// A handle another thread can use to inject faults (tests of the run gate).
    pub fn fault_handle(&self) -> Result<FaultHandle> {
        Ok(FaultHandle {
            commands: self.commands.clone(),
            wake: self.wake.try_clone().context("duplicating the eventfd")?,
        })
    }

    /// New behaviour for both directions (applies to packets arriving from now on).
    pub fn reconfigure(&self, up: DirectionConfig, down: DirectionConfig) -> Result<()> {
        self.send(Command::Reconfigure(Box::new((up, down))))
    }

    /// Starts the events' timeline of both directions now (outages, NAT rebinding and a trace's
    /// position count from the returned instant; a trace from `trace_start`).
    pub fn start_timeline(
        &self,
        trace_start: TraceStart,
        seeds: Option<[u64; 2]>,
    ) -> Result<Instant> {
        let (reply, rx) = mpsc::channel();
        self.send(Command::StartTimeline(trace_start, seeds, reply))?;
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| anyhow!("the emulator thread did not answer (stopped or stuck)"))
    }

    /// Counters of both directions; with `reset`, counting restarts from zero.
    /// Starts handing every packet to `tap` (replacing any earlier tap), or stops (`None`).
    /// Packets already handed stay in the channel; a tap stopped sees no later packet.
    /// Delivers what the client sends to `map.public` at `map.server`, and the server's
    /// answers from `map.public`, until told otherwise (`None`).
    pub fn map_port(&self, map: Option<PortMap>) -> Result<()> {
        self.send(Command::PortMap(map))
    }

    pub fn tap(&self, tap: Option<Sender<TapPacket>>) -> Result<()> {
        self.send(Command::Tap(tap))?;
        // The snapshot round trip makes the change take effect before this returns.
        self.snapshot(false).map(|_| ())
    }

    pub fn snapshot(&self, reset: bool) -> Result<Snapshot> {
        let (reply, rx) = mpsc::channel();
        self.send(Command::Snapshot { reset, reply })?;
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| anyhow!("the emulator thread did not answer (stopped or stuck)"))
    }
}

fn send_to(commands: &Sender<Command>, wake: &OwnedFd, cmd: Command) -> Result<()> {
    commands
        .send(cmd)
        .map_err(|_| anyhow!("the emulator thread has stopped"))?;
    let one: u64 = 1;
    // SAFETY: writing 8 bytes from a valid u64 to our eventfd.
    unsafe {
        libc::write(
            wake.as_raw_fd(),
            &one as *const u64 as *const libc::c_void,
            8,
        )
    };
    Ok(())
}

/// Fault injection into a running emulator, from any thread (a test hook).
pub struct FaultHandle {
    commands: Sender<Command>,
    wake: OwnedFd,
}

impl FaultHandle {
    /// The emulator sleeps for `d` without reading or releasing packets.
    pub fn stall(&self, d: Duration) -> Result<()> {
        send_to(&self.commands, &self.wake, Command::Stall(d))
    }

    /// The emulator thread ends, as if it had died.
    pub fn kill(&self) -> Result<()> {
        send_to(&self.commands, &self.wake, Command::Exit)
    }

    /// Drops one chosen packet of `dir`: the `skip + 1`-th of at least `min_len` bytes.
    pub fn drop_chosen(&self, dir: Direction, choice: ChosenDrop) -> Result<()> {
        let i = match dir {
            Direction::Up => 0,
            Direction::Down => 1,
        };
        send_to(&self.commands, &self.wake, Command::DropChosen(i, choice))
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.send(Command::Stop);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("the emulator thread panicked");
            }
        }
    }
}

struct Loop {
    /// Index 0: client TUN (up packets come in here, down packets go out);
    /// index 1: server TUN.
    tuns: [OwnedFd; 2],
    wake: OwnedFd,
    epoll: OwnedFd,
    /// `dirs[0]` = up (client → server), `dirs[1]` = down.
    dirs: [LinkDirection; 2],
    io: [IoCounters; 2],
    pool: Vec<Vec<u8>>,
    commands: Receiver<Command>,
    spin: bool,
    margin: SpinMargin,
    fair: FairShare,
    cpu_start_ns: u64,
    tap: Option<Sender<TapPacket>>,
    port_map: Option<PortMap>,
}

impl Loop {
    fn new(
        client_tun: OwnedFd,
        server_tun: OwnedFd,
        wake: OwnedFd,
        dirs: [LinkDirection; 2],
        commands: Receiver<Command>,
        spin: bool,
    ) -> Result<Loop> {
        // SAFETY: plain syscall; we own the result.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error()).context("epoll_create1");
        }
        // SAFETY: fresh fd.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        for (fd, token) in [
            (client_tun.as_raw_fd(), TOKEN_CLIENT),
            (server_tun.as_raw_fd(), TOKEN_SERVER),
            (wake.as_raw_fd(), TOKEN_CONTROL),
        ] {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: token,
            };
            // SAFETY: valid epoll fd, fd and event.
            if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                return Err(io::Error::last_os_error()).context("epoll_ctl");
            }
        }
        let mut dirs = dirs;
        let now = Instant::now();
        for d in &mut dirs {
            d.start_idle_timeline(now);
        }
        let lp = Loop {
            tuns: [client_tun, server_tun],
            wake,
            epoll,
            dirs,
            io: [IoCounters::default(); 2],
            pool: Vec::with_capacity(1024),
            commands,
            spin,
            margin: SpinMargin::default(),
            fair: FairShare::new(now),
            cpu_start_ns: host::thread_cpu_ns(),
            tap: None,
            port_map: None,
        };
        let mut probe = [libc::epoll_event { events: 0, u64: 0 }; 1];
        lp.wait(&mut probe, Some(Duration::ZERO)).map_err(|e| {
            anyhow!("epoll_pwait2 does not work here ({e}); the emulator needs Linux 5.11 or later")
        })?;
        Ok(lp)
    }

    fn run(&mut self) {
        let mut readable = [true, true];
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        loop {
            self.pump(&mut readable);
            if self.spin && self.pause_if_due() {
                // Whatever arrived during the pause is read, and what fell due released, next.
                readable = [true, true];
                continue;
            }
            let deadline = match (self.dirs[0].next_deadline(), self.dirs[1].next_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let mut timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let mut wake_target = deadline;
            if self.spin {
                if let (Some(d), Some(t)) = (deadline, timeout) {
                    let margin = self.margin.margin();
                    if t <= margin {
                        self.spin_until(d, &mut readable);
                        // Control messages are still looked at below without blocking.
                        timeout = Some(Duration::ZERO);
                        wake_target = None;
                    } else {
                        timeout = Some(t - margin);
                        wake_target = Some(d - margin);
                    }
                }
            }
            let asleep = Instant::now();
            let waited = self.wait(&mut events, timeout);
            let woke = Instant::now();
            self.fair.account(woke, woke - asleep);
            let n = match waited {
                Ok(n) => n,
                Err(e) => {
                    // Never spin on a failing wait; the link stops and its API reports it.
                    tracing::error!("emulator: epoll_pwait2 failed ({e}); the link stopped");
                    return;
                }
            };
            if let (0, Some(target)) = (n, wake_target) {
                self.margin
                    .record(Instant::now().saturating_duration_since(target));
            }
            for ev in &events[..n] {
                match ev.u64 {
                    TOKEN_CLIENT => readable[0] = true,
                    TOKEN_SERVER => readable[1] = true,
                    _ => {
                        if !self.handle_commands() {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Under SCHED_FIFO, sleeps a short pause once the thread has left its CPU to others too
    /// little ([`FairShare`]); true when it did.
    fn pause_if_due(&mut self) -> bool {
        let Some(pause) = self.fair.pause_due() else {
            return false;
        };
        let asleep = Instant::now();
        std::thread::sleep(pause);
        let woke = Instant::now();
        self.fair.account(woke, woke - asleep);
        true
    }

    /// Waits for readiness or the timeout (`None`: no timeout). Returns the number of events
    /// (0 after a timeout or a signal).
    fn wait(
        &self,
        events: &mut [libc::epoll_event],
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: valid epoll fd, events buffer and optional timespec; no signal mask change.
        let n = unsafe {
            libc::epoll_pwait2(
                self.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                ts_ptr,
                std::ptr::null(),
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        Err(err)
    }

    /// Busy-waits until `deadline` (SCHED_FIFO only), reading arrivals as they come.
    fn spin_until(&mut self, deadline: Instant, readable: &mut [bool; 2]) {
        while Instant::now() < deadline {
            *readable = [true, true];
            self.pump(readable);
            std::hint::spin_loop();
        }
        self.release_due();
    }

    /// Reads from both devices in turn until neither has anything, releasing due packets after
    /// every read.
    fn pump(&mut self, readable: &mut [bool; 2]) {
        loop {
            let mut progressed = false;
            for (i, r) in readable.iter_mut().enumerate() {
                if *r {
                    if self.read_one(i) {
                        progressed = true;
                    } else {
                        *r = false;
                    }
                }
            }
            self.release_due();
            if !progressed {
                return;
            }
        }
    }

    /// Reads one packet from device `i` into direction `i`; false when nothing was there.
    fn read_one(&mut self, i: usize) -> bool {
        let mut buf = self
            .pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BUF_SIZE));
        buf.clear();
        let n = loop {
            // SAFETY: reading at most `capacity` bytes into the vector's spare capacity.
            let n = unsafe {
                libc::read(
                    self.tuns[i].as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.capacity(),
                )
            };
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => {
                    self.pool.push(buf);
                    return false;
                }
                _ => {
                    self.io[i].read_errors += 1;
                    self.pool.push(buf);
                    return false;
                }
            }
        };
        let now = Instant::now();
        if n >= buf.capacity() {
            self.io[i].oversize += 1;
            self.pool.push(buf);
            return true;
        }
        // SAFETY: the kernel initialised the first `n` bytes.
        unsafe { buf.set_len(n) };
        if let (Some(map), 1) = (self.port_map, i) {
            map.from_server(&mut buf);
        }
        // A dropped packet's buffer is freed by the model; the pool refills from releases.
        match &self.tap {
            None => {
                let _ = self.dirs[i].offer(now, buf);
            }
            Some(tap) => {
                if let Err((cause, data)) = self.dirs[i].offer_keeping_drops(now, buf) {
                    let _ = tap.send(TapPacket {
                        dir: DIRECTIONS[i],
                        entered: now,
                        left: None,
                        dropped: Some(cause),
                        data,
                    });
                }
            }
        }
        true
    }

    /// Writes every packet whose due time has come, each to the other device.
    fn release_due(&mut self) {
        for (i, dir) in DIRECTIONS.into_iter().enumerate() {
            let out: RawFd = self.tuns[1 - i].as_raw_fd();
            while let Some(mut p) = self.dirs[i].poll_release(Instant::now()) {
                let mapped = match (self.port_map, i) {
                    (Some(map), 0) => map.to_server(&mut p.data).then_some(map),
                    _ => None,
                };
                // SAFETY: writing an initialised buffer to our TUN fd.
                let w = unsafe {
                    libc::write(out, p.data.as_ptr() as *const libc::c_void, p.data.len())
                };
                if let Some(map) = mapped {
                    map.as_sent(&mut p.data);
                }
                if w < 0 {
                    self.io[i].write_errors += 1;
                }
                if let Some(tap) = &self.tap {
                    let _ = tap.send(TapPacket {
                        dir,
                        entered: p.arrived,
                        left: Some(Instant::now()),
                        dropped: None,
                        data: p.data,
                    });
                } else if self.pool.len() < POOL_MAX {
                    self.pool.push(p.data);
                }
            }
            if let Some(tap) = &self.tap {
                // Packets the queue dropped after accepting them (CoDel, FQ-CoDel's limit).
                for d in self.dirs[i].take_late_drops() {
                    let _ = tap.send(TapPacket {
                        dir,
                        entered: d.arrived,
                        left: None,
                        dropped: Some(d.cause),
                        data: d.data,
                    });
                }
            }
        }
    }

    /// Applies queued commands; false when told to stop.
    fn handle_commands(&mut self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes into a u64 from our eventfd (non-blocking).
        unsafe {
            libc::read(
                self.wake.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        while let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                Command::Stop | Command::Exit => return false,
                Command::Stall(d) => std::thread::sleep(d),
                Command::Tap(tap) => {
                    for d in &mut self.dirs {
                        d.keep_late_drops(tap.is_some());
                    }
                    self.tap = tap;
                }
                Command::StartTimeline(trace_start, seeds, reply) => {
                    let now = Instant::now();
                    for (i, d) in self.dirs.iter_mut().enumerate() {
                        d.account_offered(now);
                        if let Some(s) = seeds {
                            d.reseed(s[i]);
                        }
                        d.start_timeline(now, trace_start);
                    }
                    let _ = reply.send(now);
                }
                Command::DropChosen(i, choice) => self.dirs[i].drop_chosen(choice),
                Command::PortMap(map) => self.port_map = map,
                Command::Reconfigure(configs) => {
                    let (up, down) = *configs;
                    let now = Instant::now();
                    for d in &mut self.dirs {
                        d.account_offered(now);
                    }
                    self.dirs[0].reconfigure(up);
                    self.dirs[1].reconfigure(down);
                    for d in &mut self.dirs {
                        d.start_idle_timeline(now);
                    }
                }
                Command::Snapshot { reset, reply } => {
                    let now = Instant::now();
                    for d in &mut self.dirs {
                        d.account_offered(now);
                    }
                    let (timeline_start, outages) = self.dirs[0].outage_windows(now);
                    let snap = Snapshot {
                        timeline_start,
                        outages,
                        rebind_at: self.dirs[0].rebind_at(),
                        up: if reset {
                            self.dirs[0].take_counters()
                        } else {
                            self.dirs[0].counters()
                        },
                        down: if reset {
                            self.dirs[1].take_counters()
                        } else {
                            self.dirs[1].counters()
                        },
                        up_io: self.io[0],
                        down_io: self.io[1],
                        up_in_flight: self.dirs[0].in_flight() as u64,
                        down_in_flight: self.dirs[1].in_flight() as u64,
                        cpu_ns: host::thread_cpu_ns() - self.cpu_start_ns,
                    };
                    if reset {
                        self.io = [IoCounters::default(); 2];
                    }
                    let _ = reply.send(snap);
                }
            }
        }
        true
    }
}

/// How late timed wake-ups come on this machine, learnt as they happen: the spin margin is the
/// 95th percentile of the recent oversleeps (plus a little), so a SCHED_FIFO emulator wakes just
/// early enough to spin to the exact due time, and spins no longer than it must.
#[derive(Debug, Clone)]
pub struct SpinMargin {
    recent_ns: [u32; 128],
    filled: usize,
    next: usize,
    margin: Duration,
}

impl Default for SpinMargin {
    fn default() -> Self {
        SpinMargin {
            recent_ns: [0; 128],
            filled: 0,
            next: 0,
            margin: Duration::from_micros(50),
        }
    }
}

impl SpinMargin {
    /// The current margin.
    pub fn margin(&self) -> Duration {
        self.margin
    }

    /// A timed wake-up came `late` after the time asked for.
    pub fn record(&mut self, late: Duration) {
        let n = self.recent_ns.len();
        self.recent_ns[self.next] = late.as_nanos().min(u32::MAX as u128) as u32;
        self.next = (self.next + 1) % n;
        self.filled = (self.filled + 1).min(n);
        if self.next % 16 == 0 && self.filled >= 16 {
            let mut v = self.recent_ns[..self.filled].to_vec();
            v.sort_unstable();
            let p95 = v[(v.len() * 95 / 100).min(v.len() - 1)];
            let m = Duration::from_nanos(p95 as u64) + Duration::from_micros(5);
            self.margin = m.clamp(SPIN_MARGIN_MIN, SPIN_MARGIN_MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_margin_follows_the_oversleep_tail() {
        let mut m = SpinMargin::default();
        for i in 0..128u64 {
            // 95 % of wake-ups 20 µs late, 5 % 200 µs late.
            let late = if i % 20 == 0 { 200 } else { 20 };
            m.record(Duration::from_micros(late));
        }
        assert!(m.margin() >= Duration::from_micros(25), "{:?}", m.margin());
        assert!(m.margin() <= Duration::from_micros(205), "{:?}", m.margin());
        for _ in 0..128 {
            m.record(Duration::from_micros(1));
        }
        assert_eq!(m.margin(), Duration::from_micros(6));
        for _ in 0..128 {
            m.record(Duration::from_millis(50));
        }
        assert_eq!(m.margin(), SPIN_MARGIN_MAX);
    }
}
